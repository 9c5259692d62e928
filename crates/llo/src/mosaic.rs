//! Mosaic (Pallas) kernels: textual MLIR per pass from `--xla_mosaic_dump_to`, and the MLIR
//! bytecode carried in an HLO custom call's `backend_config` (`custom_call_config.body`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use crate::bytecode::{self, OPS_OF_INTEREST};
use crate::{HLO_CAPTURE_FLAGS, LloError, MOSAIC_CAPTURE_FLAGS, Result, read_head, read_text};

static FNAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\d{10,})-(\d{4})-mosaic-dump-(.+?)-([\w\-]+)\.txt$").unwrap());
static FUNC_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"func\.func\s+(?:\w+\s+)?@([\w.$\-]+)").unwrap());
// The first `<dialect>.<op>` at op position on a line: at the statement start or after `=`,
// optionally in generic form ("llo.vmatmul.mubr"(...)).
static OP_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^\s*(?:%[\w#:, %]+?\s*=\s*)?"?([a-z_][a-z0-9_]*)\.([a-z_][a-z0-9_.]*)"?(?:[\s(<{:]|$)"#,
    )
    .unwrap()
});

/// One Mosaic dump file.
#[derive(Clone, Debug, PartialEq)]
pub struct MosaicFile {
    pub ts: u64,
    pub seq: u32,
    pub kernel: String,
    pub pass: String,
    pub file: String,
}

pub fn parse_mosaic_name(fname: &str) -> Option<MosaicFile> {
    let c = FNAME_RE.captures(fname)?;
    Some(MosaicFile {
        ts: c[1].parse().ok()?,
        seq: c[2].parse().ok()?,
        kernel: c[3].to_string(),
        pass: c[4].to_string(),
        file: fname.to_string(),
    })
}

/// The seed's op summary: occurrences of a fixed op list (zeros dropped). Occurrences are
/// counted as whole tokens, so `tpu.wait_dma` is not found inside `tpu.wait_dma2`.
pub fn op_summary(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for op in OPS_OF_INTEREST {
        let mut n = 0u64;
        let mut from = 0;
        while let Some(i) = text[from..].find(op) {
            let s = from + i;
            let e = s + op.len();
            let next = text.as_bytes().get(e).copied();
            let prev = if s == 0 {
                None
            } else {
                text.as_bytes().get(s - 1).copied()
            };
            let ident = |b: Option<u8>| {
                b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
            };
            if !ident(next) && !ident(prev) {
                n += 1;
            }
            from = e;
        }
        if n > 0 {
            out.insert(op.to_string(), n);
        }
    }
    out
}

/// Every `<dialect>.<op>` at op position, grouped by dialect.
pub fn op_counts_by_dialect(text: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for line in text.lines() {
        if let Some(c) = OP_RE.captures(line) {
            let op = format!("{}.{}", &c[1], &c[2]);
            *out.entry(c[1].to_string())
                .or_default()
                .entry(op)
                .or_default() += 1;
        }
    }
    out
}

/// `get_custom_call_mlir` from a Mosaic dump directory.
pub fn from_mosaic_dump(
    dir: &Path,
    kernel: &str,
    pass_label: Option<&str>,
    max_chars: usize,
) -> Result<(Value, PathBuf)> {
    let names = crate::dump_file_names(dir)?;
    let files: Vec<MosaicFile> = names.iter().filter_map(|n| parse_mosaic_name(n)).collect();
    // A kernel matches by its file token, its file name, or its MLIR function name (read from
    // the file head), so `matmul_pipeline_kernel` finds a dump whose token is `anonymous`.
    let mut funcs: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut groups: BTreeMap<(u64, String), Vec<&MosaicFile>> = BTreeMap::new();
    for f in &files {
        let head = read_head(&dir.join(&f.file), 64 * 1024)?;
        let func = FUNC_RE.captures(&head).map(|c| c[1].to_string());
        let hit = kernel.is_empty()
            || f.kernel.contains(kernel)
            || f.file.contains(kernel)
            || func.as_deref().is_some_and(|n| n.contains(kernel));
        funcs.insert(f.file.clone(), func);
        if hit {
            groups.entry((f.ts, f.kernel.clone())).or_default().push(f);
        }
    }
    if groups.is_empty() {
        return Err(LloError::no_data(
            format!(
                "No mosaic dump files matched kernel='{kernel}' in '{}'. Files are named <ts>-<NNNN>-mosaic-dump-<kernel>-<pass>.txt ({} such files present).",
                dir.display(),
                files.len()
            ),
            MOSAIC_CAPTURE_FLAGS,
        ));
    }
    // The compile instance with the most passes; ties to the newest, then the kernel name.
    let (key, passes) = groups
        .iter()
        .max_by(|a, b| {
            a.1.len()
                .cmp(&b.1.len())
                .then(a.0.0.cmp(&b.0.0))
                .then(b.0.1.cmp(&a.0.1))
        })
        .expect("non-empty");
    let mut passes: Vec<&MosaicFile> = passes.clone();
    passes.sort_by_key(|p| p.seq);
    let chosen = match pass_label.filter(|p| !p.is_empty()) {
        Some(q) => {
            let re = Regex::new(q).map_err(|e| LloError::InvalidArg {
                arg: "pass_label",
                message: format!("not a valid regex: {e}"),
            })?;
            *passes
                .iter()
                .rev()
                .find(|p| re.is_match(&p.pass))
                .ok_or_else(|| LloError::PassNotFound {
                    query: q.to_string(),
                    available: passes.iter().map(|p| p.pass.clone()).collect(),
                })?
        }
        None => *passes.last().expect("non-empty"),
    };
    let path = dir.join(&chosen.file);
    let text = read_text(&path)?;
    let chars = text.chars().count();
    let shown: String = text.chars().take(max_chars).collect();
    let others: Vec<String> = groups
        .keys()
        .filter(|k| *k != key)
        .map(|(ts, k)| format!("{k}@{ts}"))
        .collect();
    Ok((
        json!({
            "source": "mosaic_dump",
            "kernel": key.1,
            "function": funcs.get(&chosen.file).cloned().flatten(),
            "pass": chosen.pass,
            "pass_seq": chosen.seq,
            "available_passes": passes.iter().map(|p| p.pass.clone()).collect::<Vec<_>>(),
            "op_summary": op_summary(&text),
            "op_counts_by_dialect": op_counts_by_dialect(&text),
            "mlir_chars": chars,
            "mlir_text": shown,
            "truncated": chars > max_chars,
            "file": chosen.file,
            "instance_ts": key.0,
            "other_instances": others,
        }),
        path,
    ))
}

static BODY_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""body"\s*:\s*"([A-Za-z0-9+/=]+)""#).unwrap());
static CC_NAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"%([\w.\-]+)\s*=[^=]*custom-call").unwrap());

/// `get_custom_call_mlir` from an XLA HLO dump directory: the bytecode summary of the first
/// matching custom call (after-optimizations files first).
pub fn from_hlo_dump(dir: &Path, kernel: &str) -> Result<(Value, Vec<PathBuf>)> {
    let mut names = crate::dump_file_names(dir)?;
    names.retain(|n| n.ends_with(".txt") || n.ends_with(".hlo"));
    names.sort_by_key(|n| !n.contains("after_optimizations"));
    let mut read = Vec::new();
    let mut found: Option<(String, String, String)> = None;
    let mut also: Vec<String> = Vec::new();
    for fname in &names {
        let path = dir.join(fname);
        // An unreadable file is the answer (a path error naming it), not a reason to skip it
        // and report that the dump holds no custom call.
        let text = read_text(&path)?;
        read.push(path);
        if !text.contains("custom-call") || !text.contains("custom_call_config") {
            continue;
        }
        for line in text.lines() {
            if !line.contains("custom_call_config")
                || (!kernel.is_empty() && !line.contains(kernel))
            {
                continue;
            }
            let Some(b) = BODY_RE.captures(line) else {
                continue;
            };
            let name = CC_NAME_RE
                .captures(line)
                .map(|c| c[1].to_string())
                .unwrap_or_default();
            if found.is_none() {
                found = Some((fname.clone(), name, b[1].to_string()));
            } else {
                also.push(name);
            }
        }
        if found.is_some() {
            break;
        }
    }
    let Some((fname, name, body)) = found else {
        return Err(LloError::no_data(
            format!(
                "No custom-call with custom_call_config found in '{}'{}. Is this an --xla_dump_to dir with HLO text dumps?",
                dir.display(),
                if kernel.is_empty() {
                    String::new()
                } else {
                    format!(" matching kernel='{kernel}'")
                }
            ),
            HLO_CAPTURE_FLAGS,
        ));
    };
    let raw = bytecode::base64_decode(&body).ok_or_else(|| LloError::Malformed {
        path: dir.join(&fname),
        line: None,
        message: format!("custom call {name}: backend_config body is not valid base64"),
    })?;
    let is_bc = raw.starts_with(bytecode::MAGIC);
    let summary = bytecode::summarize(&raw);
    Ok((
        json!({
            "source": "hlo_backend_config",
            "hlo_file": fname,
            "kernel": name,
            "body_format": if is_bc { "mlir_bytecode" } else { "unknown" },
            "body_bytes": raw.len(),
            "bytecode_summary": summary,
            "also_matched": also,
            "note": "body is MLIR bytecode; for full textual MLIR re-capture with LIBTPU_INIT_ARGS=\"--xla_mosaic_dump_to=<dir>\" and pass mosaic_dump_dir.",
        }),
        read,
    ))
}

/// M2: a kernel named by its HLO op (`matmul_optimized.1`) is found in a Mosaic dump through
/// the HLO dump: the custom call's bytecode names its MLIR function(s), and the Mosaic files
/// are matched on those. Returns the Mosaic result with `matched_via`.
pub fn from_mosaic_dump_via_hlo(
    mosaic_dir: &Path,
    hlo_dir: &Path,
    kernel: &str,
    pass_label: Option<&str>,
    max_chars: usize,
) -> Result<(Value, PathBuf)> {
    let (hlo, _) = from_hlo_dump(hlo_dir, kernel)?;
    let funcs: Vec<String> = hlo["bytecode_summary"]["functions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let op = hlo["kernel"].as_str().unwrap_or("").to_string();
    for f in &funcs {
        if let Ok((mut v, path)) = from_mosaic_dump(mosaic_dir, f, pass_label, max_chars) {
            v["matched_via"] = json!(format!(
                "HLO custom call {op} ({}) → MLIR function @{f} → Mosaic dump",
                hlo["hlo_file"].as_str().unwrap_or("")
            ));
            return Ok((v, path));
        }
    }
    Err(LloError::no_data(
        format!(
            "no Mosaic dump file in '{}' matches kernel='{kernel}', nor the MLIR function(s) {funcs:?} of its HLO custom call {op}",
            mosaic_dir.display()
        ),
        MOSAIC_CAPTURE_FLAGS,
    ))
}

/// The text for "no directory at all" (the seed's, which its tests check).
pub const NO_DIR_TEXT: &str = "No dump directory available. Provide `mosaic_dump_dir` (capture with LIBTPU_INIT_ARGS=\"--xla_mosaic_dump_to=<dir>\" — textual MLIR) or `hlo_dump_dir` / $XLA_HLO_DUMP_DIR (XLA_FLAGS=\"--xla_dump_to=<dir>\" — bytecode summary).";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mosaic_names() {
        let f = parse_mosaic_name(
            "1783579466843103744-0016-mosaic-dump-anonymous-post-eliminate-llo-extensions.txt",
        )
        .unwrap();
        assert_eq!(
            (f.seq, f.kernel.as_str(), f.pass.as_str()),
            (16, "anonymous", "post-eliminate-llo-extensions")
        );
        assert!(parse_mosaic_name("123-0016-mosaic-dump-x-y.txt").is_none());
    }

    #[test]
    fn op_counting_is_token_exact_and_positional() {
        let t = "  %0 = tpu.wait_dma2 %a\n  \"llo.vmatmul.mubr\"(%1) <{x}> : () -> ()\n  scf.for %i = %c0 to %c1 {\n  %2:2 = arith.addf %a, %b : f32\n";
        let s = op_summary(t);
        assert_eq!(s.get("tpu.wait_dma2"), Some(&1));
        assert!(!s.contains_key("tpu.wait_dma"));
        let d = op_counts_by_dialect(t);
        assert_eq!(d["llo"]["llo.vmatmul.mubr"], 1);
        assert_eq!(d["scf"]["scf.for"], 1);
        assert_eq!(d["arith"]["arith.addf"], 1);
        assert_eq!(d["tpu"]["tpu.wait_dma2"], 1);
    }
}
