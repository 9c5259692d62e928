//! `xprof-llo`: the TPU compiler's own artifacts, read natively.
//!
//! * LLO dumps (`--xla_jf_dump_to` + `--xla_jf_dump_llo_text`): the pass files of each LLO
//!   program ([`dump`]), the VLIW bundle listing ([`bundles`]), the per-bundle slot
//!   utilization matrix ([`matrix`]), the schedule analysis ([`schedule`]), the VMEM
//!   allocation header ([`vmem`]), MXU mnemonics ([`mxu`]) and the fit summary built from
//!   all of them ([`fit`]).
//! * Mosaic (Pallas) kernels: textual MLIR from `--xla_mosaic_dump_to` dumps and the MLIR
//!   bytecode carried in an HLO custom call's backend config ([`mosaic`], [`bytecode`]).
//!
//! Every function here returns data or an [`LloError`]; the plugin turns errors into
//! `ToolError`s. Nothing here prints or writes files.

pub mod bundles;
pub mod bytecode;
pub mod dump;
mod error;
pub mod fit;
pub mod matrix;
pub mod mosaic;
pub mod mxu;
pub mod schedule;
pub mod trace;
pub mod vmem;

pub use error::{LloError, Result};

use std::path::{Path, PathBuf};

/// The libtpu flags that write an LLO text dump. `--xla_dump_to` alone does not.
pub const LLO_CAPTURE_FLAGS: &[&str] = &["--xla_jf_dump_to=<dir>", "--xla_jf_dump_llo_text=true"];
/// The libtpu flag that writes textual Mosaic MLIR per pass.
pub const MOSAIC_CAPTURE_FLAGS: &[&str] = &["--xla_mosaic_dump_to=<dir>"];
/// The XLA flags that write HLO text (which carries Mosaic bytecode in custom calls).
pub const HLO_CAPTURE_FLAGS: &[&str] = &["--xla_dump_to=<dir>", "--xla_dump_hlo_as_text"];

/// The seed's message for a missing or empty LLO dump directory (its tests check the flag
/// names in it, so the wording is kept).
pub fn no_dir_message(d: &str) -> String {
    format!(
        "LLO dump directory not found or empty: '{d}'. Pass dump_dir explicitly or set \
         XLA_JF_DUMP_DIR. Capture with LIBTPU_INIT_ARGS=\"--xla_jf_dump_to=<dir> \
         --xla_jf_dump_llo_text=true\" (note: --xla_dump_to alone does NOT produce LLO dumps)."
    )
}

/// `~` expansion for directory arguments (the seed's `os.path.expanduser`).
pub fn expand_tilde(p: &str) -> PathBuf {
    if p == "~" {
        if let Some(h) = std::env::var_os("HOME") {
            return PathBuf::from(h);
        }
    } else if let Some(rest) = p.strip_prefix("~/")
        && let Some(h) = std::env::var_os("HOME")
    {
        return Path::new(&h).join(rest);
    }
    PathBuf::from(p)
}

/// The directory an argument names, else the environment variable's; `None` when neither
/// is set (an explicit argument wins, as the spec asks).
pub fn dir_from_arg_or_env(arg: Option<&str>, env: &str) -> Option<PathBuf> {
    arg.filter(|s| !s.trim().is_empty())
        .map(str::to_string)
        .or_else(|| std::env::var(env).ok().filter(|s| !s.trim().is_empty()))
        .map(|s| expand_tilde(s.trim()))
}

/// Python's `round(x, n)`: correctly rounded from the binary value (Rust's exact formatting
/// does the same), so our numbers print as the seed's do.
pub fn round_to(x: f64, n: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.n$}").parse().unwrap_or(x)
}

/// `hex(n)` as Python prints it (`0x0`, `0x1a`).
pub fn hex(n: u64) -> String {
    format!("{n:#x}")
}

/// A JSON number for a float that is integral-valued prints as `2696.0` like Python does.
pub fn f64_json(x: f64) -> serde_json::Value {
    serde_json::Number::from_f64(x)
        .map(serde_json::Value::Number)
        .unwrap_or(serde_json::Value::Null)
}

/// The names of the files at the top level of a dump directory, sorted: regular files and
/// symbolic links to them, followed (a dump assembled from links reads like a copied one; the
/// MCP server checks what the links reach against its roots). Directories, dangling links,
/// special files and names that are not UTF-8 are left out.
pub fn dump_file_names(dir: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(dir).map_err(|e| LloError::io(dir, e))?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| match e.file_type() {
            Ok(t) if t.is_symlink() => e.path().is_file(),
            Ok(t) => t.is_file(),
            Err(_) => false,
        })
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// Read a whole file as text, replacing invalid UTF-8 (the seed's `errors="replace"`).
pub fn read_text(path: &Path) -> Result<String> {
    xprof_xspace::file::read_text(path).map_err(|e| LloError::io(path, e))
}

/// The first `limit` bytes of a file as text.
pub fn read_head(path: &Path, limit: usize) -> Result<String> {
    use std::io::Read;
    let (f, _) = xprof_xspace::file::open_regular(path).map_err(|e| LloError::io(path, e))?;
    let mut buf = Vec::with_capacity(limit.min(1 << 20));
    f.take(limit as u64)
        .read_to_end(&mut buf)
        .map_err(|e| LloError::io(path, e))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Which result keys are counted (parsed from the artifact), derived (arithmetic on counted
/// values) and inferred (heuristics): every tool says so (spec §6.1 G3).
pub fn provenance(counted: &[&str], derived: &[&str], inferred: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "counted": counted,
        "derived": derived,
        "inferred": inferred,
    })
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::path::PathBuf;

    /// The shared corpus's seed-v6e fixtures, or `None` (outside CI) when it is absent.
    pub fn fixtures() -> Option<PathBuf> {
        let dir = std::env::var_os("XPROF_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
        let f = dir.join("fixtures/seed-v6e");
        if f.is_dir() {
            Some(f)
        } else if std::env::var_os("CI").is_some() {
            panic!(
                "shared corpus missing at {} (set XPROF_CORPUS); CI must not skip",
                dir.display()
            )
        } else {
            None
        }
    }
}
