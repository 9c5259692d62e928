//! XLA dump folders (`--xla_dump_to`): which files are which module's stages.
//!
//! Naming schemes (top level only, no recursion), with `<prefix>` = `module_NNNN.<name>`
//! where `<name>` may itself contain dots:
//! * `<prefix>[.cl_<id>].<stage>.(txt|hlo)` with `<stage>` = `before_optimizations`,
//!   `after_optimizations` or `after_pass_<Pass>` (JAX/TF);
//! * `<prefix>[.cl_<id>].<backend>_after_optimizations.txt` (`cpu_`, `sm_8.0_gpu_`): the
//!   after-optimizations stage when no plain one exists; its `-buffer-assignment`,
//!   `-memory-usage-report`, ... companions are artifacts;
//! * `<prefix>[.cl_<id>].<NNNN>.<pipeline>.after_<X>[.before_<Y>].txt`: XLA's between-pass
//!   dumps (`--xla_dump_hlo_pass_re`, PyTorch/XLA), keyed `pass_NNNN`;
//! * everything else that starts with a known prefix (`.hlo.pb`, `.dot`, `.ll`, `.o`, ...) is
//!   listed under `also_available`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::HloError;

#[derive(Clone, Debug, Serialize)]
pub struct PassFile {
    pub number: u32,
    pub pipeline: String,
    pub after: String,
    pub before: Option<String>,
    pub path: PathBuf,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DumpModule {
    /// `module_NNNN.<name>`.
    pub prefix: String,
    pub number: u32,
    /// `<name>` (the logical module name).
    pub name: String,
    /// `cl_<id>` when the files carry XLA's compile-id token.
    pub compile_id: Option<String>,
    /// Explicit stage files: `before_optimizations`, `after_optimizations`, `after_pass_X`.
    pub stages: BTreeMap<String, PathBuf>,
    /// `<backend>_after_optimizations` files, by backend (`cpu`, `sm_8.0_gpu`).
    pub backend_after: BTreeMap<String, PathBuf>,
    /// Between-pass dumps by number.
    pub passes: BTreeMap<u32, PassFile>,
    /// Stages dumped only as binary protos (`--xla_dump_hlo_as_proto`), by stage key
    /// (`before_optimizations`, `cpu_after_optimizations`, ...). Text files win.
    pub proto_stages: BTreeMap<String, PathBuf>,
    /// Non-stage artifacts: suffix after the prefix → path.
    pub also_available: BTreeMap<String, PathBuf>,
}

impl DumpModule {
    /// The stage keys a caller may pass, in a stable order: named stages (explicit, then the
    /// backend and pass aliases), then every `pass_NNNN`.
    pub fn stage_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for k in ["before_optimizations", "after_optimizations"] {
            if self.resolve_named(k).is_some() {
                keys.push(k.to_string());
            }
        }
        for k in self.stages.keys().chain(self.proto_stages.keys()) {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        keys.extend(self.passes.keys().map(|n| format!("pass_{n:04}")));
        keys
    }

    fn resolve_named(&self, stage: &str) -> Option<(String, PathBuf)> {
        self.resolve_text(stage)
            .or_else(|| self.resolve_proto(stage))
    }

    /// A stage from the binary proto dumps: the key itself, or for `after_optimizations` a
    /// backend's `<backend>_after_optimizations`.
    fn resolve_proto(&self, stage: &str) -> Option<(String, PathBuf)> {
        if let Some(p) = self.proto_stages.get(stage) {
            return Some((stage.to_string(), p.clone()));
        }
        if stage == "after_optimizations" {
            return self
                .proto_stages
                .iter()
                .find(|(k, _)| k.ends_with("_after_optimizations"))
                .map(|(k, p)| (k.clone(), p.clone()));
        }
        None
    }

    fn resolve_text(&self, stage: &str) -> Option<(String, PathBuf)> {
        if let Some(p) = self.stages.get(stage) {
            return Some((stage.to_string(), p.clone()));
        }
        match stage {
            "after_optimizations" => {
                if let Some((b, p)) = self.backend_after.iter().next() {
                    return Some((format!("{b}_after_optimizations"), p.clone()));
                }
                self.passes
                    .values()
                    .next_back()
                    .map(|p| (format!("pass_{:04}", p.number), p.path.clone()))
            }
            "before_optimizations" => self
                .passes
                .values()
                .next()
                .map(|p| (format!("pass_{:04}", p.number), p.path.clone())),
            _ => None,
        }
    }

    /// Resolve a stage key (or alias) to its file. Returns the concrete key used (e.g.
    /// `cpu_after_optimizations` or `pass_0047` for the alias `after_optimizations`).
    pub fn resolve_stage(&self, stage: &str) -> Result<(String, PathBuf), HloError> {
        let stage = stage.trim();
        let found = if let Some(n) = stage.strip_prefix("pass_") {
            n.parse::<u32>()
                .ok()
                .and_then(|n| self.passes.get(&n))
                .map(|p| (format!("pass_{:04}", p.number), p.path.clone()))
        } else if let Some(b) = stage.strip_suffix("_after_optimizations") {
            self.backend_after
                .get(b)
                .map(|p| (stage.to_string(), p.clone()))
                .or_else(|| self.resolve_proto(stage))
        } else {
            self.resolve_named(stage)
        };
        found.ok_or_else(|| HloError::StageNotAvailable {
            stage: stage.to_string(),
            module: self.prefix.clone(),
            available: self.stage_keys(),
        })
    }

    /// `jax` when only stage files exist, `passes` when XLA's between-pass dumps exist.
    pub fn format(&self) -> &'static str {
        if self.passes.is_empty() {
            "jax"
        } else {
            "passes"
        }
    }

    /// Every text file of this module that holds HLO (stages and passes).
    pub fn hlo_text_files(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> = self.stages.values().map(PathBuf::as_path).collect();
        v.extend(self.backend_after.values().map(PathBuf::as_path));
        v.extend(self.passes.values().map(|p| p.path.as_path()));
        v
    }
}

/// A scanned dump directory.
#[derive(Clone, Debug, Serialize)]
pub struct DumpDir {
    pub dir: PathBuf,
    /// By prefix, sorted.
    pub modules: BTreeMap<String, DumpModule>,
}

/// Where the dump directory comes from: the argument, else `$XLA_HLO_DUMP_DIR`.
pub fn dump_dir_from(arg: Option<&str>) -> Result<PathBuf, HloError> {
    let raw = arg
        .map(str::to_string)
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            std::env::var("XLA_HLO_DUMP_DIR")
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
        .ok_or(HloError::DumpDirNotSet)?;
    Ok(expand_tilde(raw.trim()))
}

fn expand_tilde(s: &str) -> PathBuf {
    if let Some(rest) = s.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    PathBuf::from(s)
}

/// `module_<digits>.` → (number, rest).
fn split_module_number(file: &str) -> Option<(u32, &str)> {
    let rest = file.strip_prefix("module_")?;
    let dot = rest.find('.')?;
    let digits = &rest[..dot];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, &rest[dot + 1..]))
}

/// A file name classified against the grammar above.
enum Kind {
    Stage(String),
    BackendAfter(String),
    Pass(PassFile),
    /// A stage dumped as a binary `xla.HloProto` (`--xla_dump_hlo_as_proto`): readable by
    /// printing it; the key is the stage it holds.
    ProtoStage(String),
    /// A text-format proto (`.hlo.pbtxt`): listed as an artifact.
    Artifact,
}

/// Strip an optional `.cl_<digits>` token from the end of the name part.
fn split_compile_id(name: &str) -> (&str, Option<&str>) {
    if let Some(p) = name.rfind(".cl_") {
        let id = &name[p + 4..];
        if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
            return (&name[..p], Some(&name[p + 1..]));
        }
    }
    (name, None)
}

fn is_backend(s: &str) -> bool {
    // `cpu`, `gpu`, `tpu`, `sm_8.0_gpu`, `rocm_gfx90a_gpu`: no dots except XLA's CUDA
    // compute capability (`sm_<major>.<minor>`).
    let plain =
        |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if plain(s) {
        return true;
    }
    if let Some(rest) = s.strip_prefix("sm_")
        && let Some((maj, tail)) = rest.split_once('.')
        && maj.bytes().all(|b| b.is_ascii_digit())
    {
        let minor_end = tail.find('_').unwrap_or(tail.len());
        return tail[..minor_end].bytes().all(|b| b.is_ascii_digit())
            && plain(&tail[minor_end..].replace('_', "x"));
    }
    false
}

/// Classify `rest` (the file name without `module_NNNN.`): returns (name, compile id, kind).
fn classify(rest: &str, path: &Path) -> Option<(String, Option<String>, Kind)> {
    // 0 = text, 1 = binary proto, 2 = text proto
    let (base, proto) = if let Some(b) = rest.strip_suffix(".hlo.pb") {
        (b, 1)
    } else if let Some(b) = rest.strip_suffix(".hlo.pbtxt") {
        (b, 2)
    } else if let Some(b) = rest.strip_suffix(".txt") {
        (b, 0)
    } else if let Some(b) = rest.strip_suffix(".hlo") {
        (b, 0)
    } else {
        return None;
    };
    let kind_of = |stage: String, text: Kind| match proto {
        0 => text,
        1 => Kind::ProtoStage(stage),
        _ => Kind::Artifact,
    };
    // Between-pass dumps: <name>.<NNNN>.<pipeline>.after_<X>[.before_<Y>]
    if proto == 0
        && let Some(pf) = classify_pass(base, path)
    {
        return Some(pf);
    }
    for named in ["before_optimizations", "after_optimizations"] {
        if let Some(name) = base.strip_suffix(named).and_then(|n| n.strip_suffix('.')) {
            let (name, cl) = split_compile_id(name);
            let kind = kind_of(named.to_string(), Kind::Stage(named.to_string()));
            return Some((name.to_string(), cl.map(str::to_string), kind));
        }
    }
    if let Some(p) = base.rfind(".after_pass_") {
        let (name, cl) = split_compile_id(&base[..p]);
        let kind = kind_of(
            base[p + 1..].to_string(),
            Kind::Stage(base[p + 1..].to_string()),
        );
        return Some((name.to_string(), cl.map(str::to_string), kind));
    }
    if let Some(head) = base.strip_suffix("_after_optimizations") {
        // head = <name>[.cl_id].<backend>; the backend is the shortest dot-free suffix, or
        // `sm_X.Y_gpu` which contains one dot.
        // XLA's CUDA backend name (`sm_8.0_gpu`) holds a dot: prefer it over the plain
        // rightmost segment.
        let mut candidates: Vec<usize> = head.rfind(".sm_").into_iter().collect();
        candidates.extend(head.rfind('.'));
        for dot in candidates {
            let backend = &head[dot + 1..];
            if is_backend(backend) {
                let (name, cl) = split_compile_id(&head[..dot]);
                let kind = kind_of(
                    format!("{backend}_after_optimizations"),
                    Kind::BackendAfter(backend.to_string()),
                );
                return Some((name.to_string(), cl.map(str::to_string), kind));
            }
        }
    }
    None
}

fn classify_pass(base: &str, path: &Path) -> Option<(String, Option<String>, Kind)> {
    // Walk the dot-separated fields from the right: [.before_Y] .after_X .pipeline .NNNN
    let parts: Vec<&str> = base.split('.').collect();
    if parts.len() < 4 {
        return None;
    }
    let mut end = parts.len();
    let before = if parts[end - 1].starts_with("before_") {
        end -= 1;
        Some(parts[end].to_string())
    } else {
        None
    };
    if end < 4 || !parts[end - 1].starts_with("after_") {
        return None;
    }
    let after = parts[end - 1].to_string();
    let pipeline = parts[end - 2].to_string();
    let num = parts[end - 3];
    if num.len() != 4 || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let name = parts[..end - 3].join(".");
    let (name, cl) = split_compile_id(&name);
    if name.is_empty() {
        return None;
    }
    Some((
        name.to_string(),
        cl.map(str::to_string),
        Kind::Pass(PassFile {
            number: num.parse().ok()?,
            pipeline,
            after,
            before,
            path: path.to_path_buf(),
        }),
    ))
}

/// Scan a dump directory (top level only).
pub fn scan(dir: &Path) -> Result<DumpDir, HloError> {
    if !dir.exists() {
        return Err(HloError::DumpDirNotFound(dir.to_path_buf()));
    }
    if !dir.is_dir() {
        return Err(HloError::NotADirectory(dir.to_path_buf()));
    }
    let rd = std::fs::read_dir(dir).map_err(|e| HloError::Io {
        path: dir.to_path_buf(),
        source: e,
    })?;
    let mut files: Vec<(String, PathBuf)> = rd
        .filter_map(Result::ok)
        // Symbolic links to files are followed: a dump assembled from links reads like a
        // copied one (the MCP server checks what they reach against its roots).
        .filter(|e| match e.file_type() {
            Ok(t) if t.is_symlink() => e.path().is_file(),
            Ok(t) => t.is_file(),
            Err(_) => false,
        })
        .filter_map(|e| Some((e.file_name().to_str()?.to_string(), e.path())))
        .collect();
    files.sort();
    let mut modules: BTreeMap<String, DumpModule> = BTreeMap::new();
    let mut leftovers: Vec<(u32, String, PathBuf)> = Vec::new();
    for (fname, path) in &files {
        let Some((number, rest)) = split_module_number(fname) else {
            continue;
        };
        let Some((name, cl, kind)) = classify(rest, path) else {
            leftovers.push((number, fname.clone(), path.clone()));
            continue;
        };
        let digits = fname[7..].split('.').next().unwrap_or_default();
        let prefix = format!("module_{digits}.{name}");
        let m = modules.entry(prefix.clone()).or_insert_with(|| DumpModule {
            prefix: prefix.clone(),
            number,
            name: name.clone(),
            ..Default::default()
        });
        if m.compile_id.is_none() {
            m.compile_id = cl;
        }
        match kind {
            Kind::Stage(s) => {
                m.stages.insert(s, path.clone());
            }
            Kind::BackendAfter(b) => {
                m.backend_after.insert(b, path.clone());
            }
            Kind::Pass(p) => {
                m.passes.insert(p.number, p);
            }
            Kind::ProtoStage(stage) => {
                m.proto_stages.insert(stage, path.clone());
                m.also_available
                    .insert(fname[prefix.len() + 1..].to_string(), path.clone());
            }
            Kind::Artifact => {
                m.also_available
                    .insert(fname[prefix.len() + 1..].to_string(), path.clone());
            }
        }
    }
    // Artifacts: attach each remaining file to the longest known prefix it starts with.
    for (_, fname, path) in leftovers {
        let best = modules
            .keys()
            .filter(|p| {
                fname.starts_with(p.as_str()) && fname.as_bytes().get(p.len()) == Some(&b'.')
            })
            .max_by_key(|p| p.len())
            .cloned();
        if let Some(p) = best {
            let key = fname[p.len() + 1..].to_string();
            modules
                .get_mut(&p)
                .expect("prefix exists")
                .also_available
                .insert(key, path);
        }
    }
    Ok(DumpDir {
        dir: dir.to_path_buf(),
        modules,
    })
}

/// Case-insensitive glob match (`*`, `?`) of the whole string.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// The module a pattern selects, plus the other instances of the same logical name.
#[derive(Debug)]
pub struct ModuleMatch<'d> {
    pub module: &'d DumpModule,
    /// Other prefixes with the same logical name (the lowest module number was picked).
    pub also_matched: Vec<String>,
}

impl DumpDir {
    /// Select one module: an exact prefix or logical-name match wins over glob/substring
    /// matches; several instances of one logical name pick the lowest module number (and
    /// report the others); several distinct names are an error listing them.
    pub fn select(&self, pattern: &str) -> Result<ModuleMatch<'_>, HloError> {
        if self.modules.is_empty() {
            return Err(HloError::NoDumpFiles(self.dir.clone()));
        }
        let pat = pattern.trim();
        let exact: Vec<&DumpModule> = self
            .modules
            .values()
            .filter(|m| m.prefix.eq_ignore_ascii_case(pat) || m.name.eq_ignore_ascii_case(pat))
            .collect();
        let matched: Vec<&DumpModule> = if !exact.is_empty() {
            exact
        } else {
            let sub = format!("*{pat}*");
            self.modules
                .values()
                .filter(|m| glob_match(pat, &m.prefix) || glob_match(&sub, &m.prefix))
                .collect()
        };
        if matched.is_empty() {
            return Err(HloError::NoModuleMatch {
                pattern: pat.to_string(),
                dir: self.dir.clone(),
                available: self.modules.keys().take(10).cloned().collect(),
            });
        }
        let mut names: Vec<&str> = matched.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if names.len() > 1 {
            return Err(HloError::AmbiguousModule {
                pattern: pat.to_string(),
                candidates: matched.iter().map(|m| m.prefix.clone()).collect(),
            });
        }
        let best = matched
            .iter()
            .min_by_key(|m| m.number)
            .copied()
            .expect("non-empty");
        Ok(ModuleMatch {
            module: best,
            also_matched: matched
                .iter()
                .filter(|m| m.prefix != best.prefix)
                .map(|m| m.prefix.clone())
                .collect(),
        })
    }
}

/// Read a text file as UTF-8, replacing invalid bytes.
pub fn read_text(path: &Path) -> Result<String, HloError> {
    xprof_xspace::file::read_text(path).map_err(|e| HloError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}

/// The HLO text of a stage file: text files as they are; binary `xla.HloProto` dumps printed
/// as XLA prints a module (long form, with metadata, as `--xla_dump_hlo_as_text` would have).
pub fn read_stage_text(path: &Path) -> Result<String, HloError> {
    let is_proto = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".hlo.pb"));
    if !is_proto {
        return read_text(path);
    }
    let bytes = xprof_xspace::file::read(path).map_err(|e| HloError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let decode_err = |message: String| HloError::Decode {
        path: path.display().to_string(),
        message,
    };
    let module = xprof_proto::decode_hlo_module(&bytes)
        .map_err(|e| decode_err(e.to_string()))?
        .ok_or_else(|| decode_err("the HloProto has no hlo_module".into()))?;
    Ok(crate::print::print_module(
        &module,
        &crate::print::PrintOptions {
            metadata: true,
            ..crate::print::PrintOptions::long()
        },
    ))
}

/// Keep the first `max_lines` lines (`max_lines <= 0` keeps all). Returns the text, the total
/// line count and whether it was cut.
pub fn truncate_lines(text: &str, max_lines: i64) -> (String, usize, bool) {
    let total = text.lines().count();
    if max_lines <= 0 || total <= max_lines as usize {
        return (text.to_string(), total, false);
    }
    let kept: Vec<&str> = text.lines().take(max_lines as usize).collect();
    (kept.join("\n"), total, true)
}

/// Keep at most `max_bytes` bytes of `text` (`max_bytes <= 0` keeps all), cut at a character
/// boundary: one line of a stage file can be tens of MB (a large constant), which a line
/// limit does not bound. Returns whether it was cut.
pub fn truncate_bytes(text: &mut String, max_bytes: i64) -> bool {
    let Ok(max) = usize::try_from(max_bytes) else {
        return false;
    };
    if max == 0 || text.len() <= max {
        return false;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_cut_keeps_whole_characters() {
        let mut t = "aé".repeat(3);
        assert!(truncate_bytes(&mut t, 2));
        assert_eq!(t, "a");
        let mut t = "short".to_string();
        assert!(!truncate_bytes(&mut t, 100));
        assert!(!truncate_bytes(&mut t, -1));
        assert!(!truncate_bytes(&mut t, 0));
        assert_eq!(t, "short");
    }

    fn classify_name(f: &str) -> Option<(String, Option<String>, String)> {
        let (_, rest) = split_module_number(f)?;
        let (n, cl, k) = classify(rest, Path::new(f))?;
        let k = match k {
            Kind::Stage(s) => s,
            Kind::BackendAfter(b) => format!("backend:{b}"),
            Kind::Pass(p) => format!(
                "pass:{}:{}:{}:{:?}",
                p.number, p.pipeline, p.after, p.before
            ),
            Kind::ProtoStage(st) => format!("proto:{st}"),
            Kind::Artifact => "artifact".into(),
        };
        Some((n, cl, k))
    }

    #[test]
    fn naming_schemes() {
        let c =
            classify_name("module_0035.jit_matmul_optimized.cl_897798484.after_optimizations.txt")
                .unwrap();
        assert_eq!(
            c,
            (
                "jit_matmul_optimized".into(),
                Some("cl_897798484".into()),
                "after_optimizations".into()
            )
        );
        let c = classify_name(
            "module_0001.tt_jit_distributed.barrier.all_reduce.before_optimizations.hlo",
        )
        .unwrap();
        assert_eq!(c.0, "tt_jit_distributed.barrier.all_reduce");
        let c = classify_name("module_0000.f.sm_8.0_gpu_after_optimizations.txt").unwrap();
        assert_eq!(c, ("f".into(), None, "backend:sm_8.0_gpu".into()));
        let c = classify_name("module_0000.a.b.cpu_after_optimizations.txt").unwrap();
        assert_eq!(c, ("a.b".into(), None, "backend:cpu".into()));
        assert!(
            classify_name("module_0000.f.cpu_after_optimizations-buffer-assignment.txt").is_none()
        );
        let c = classify_name(
            "module_0002.jit_m.0023.copy-insertion.after_adding_special-case_copies.txt",
        )
        .unwrap();
        assert_eq!(
            c.2,
            "pass:23:copy-insertion:after_adding_special-case_copies:None"
        );
        let c = classify_name(
            "module_0002.jit_m.0018.HLO_passes.after_fusion.before_fusion-wrapper.txt",
        )
        .unwrap();
        assert_eq!(c.0, "jit_m");
        assert_eq!(
            c.2,
            "pass:18:HLO_passes:after_fusion:Some(\"before_fusion-wrapper\")"
        );
        let c = classify_name("module_0001.m.cl_5.0002.pipe.after_a.before_b.txt").unwrap();
        assert_eq!((c.0.as_str(), c.1.as_deref()), ("m", Some("cl_5")));
        let c = classify_name("module_0001.m.after_pass_Foo.hlo").unwrap();
        assert_eq!(c.2, "after_pass_Foo");
        assert_eq!(
            classify_name("module_0001.m.before_optimizations.hlo.pb")
                .unwrap()
                .2,
            "proto:before_optimizations"
        );
        assert_eq!(
            classify_name("module_0001.m.cpu_after_optimizations.hlo.pb")
                .unwrap()
                .2,
            "proto:cpu_after_optimizations"
        );
        assert_eq!(
            classify_name("module_0001.m.after_optimizations.hlo.pbtxt")
                .unwrap()
                .2,
            "artifact"
        );
        assert!(classify_name("module_0001.m.ir-no-opt.ll").is_none());
    }

    #[test]
    fn globbing() {
        assert!(glob_match("*MATMUL*", "module_0035.jit_matmul_optimized"));
        assert!(glob_match("module_00??.jit_*", "module_0035.jit_x"));
        assert!(!glob_match("jit", "module_0035.jit_x"));
    }
}
