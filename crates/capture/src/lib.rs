//! Where a capture lives on disk, resolved the same way by every plugin.
//!
//! Layout (XProf's, TensorBoard's): `<logdir>/[<sub>/]plugins/profile/<run>/<host>.xplane.pb`,
//! plus optional `<module>(<program_id>).hlo_proto.pb` files. A *session* is one run directory
//! (or one lone `.xplane.pb`), chosen from a positional PATH or `--logdir`/`--run`.

use std::path::{Path, PathBuf};

mod error;
pub mod hlo_modules;
pub use error::CaptureError;
pub use hlo_modules::{HloModuleRef, HloSource};

/// Suffixes of XSpace files, longest first (`.xspace.pb` is what some exporters write).
pub const XSPACE_SUFFIXES: &[&str] = &[".xplane.pb", ".xspace.pb"];
pub const HLO_PROTO_SUFFIX: &str = ".hlo_proto.pb";
/// How deep below the logdir `plugins/profile` directories are searched.
const MAX_RUN_DEPTH: usize = 3;

/// One host's capture file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFile {
    /// The file stem (`host0` for `host0.xplane.pb`).
    pub name: String,
    pub path: PathBuf,
}

/// A resolved session (run).
#[derive(Clone, Debug)]
pub struct Session {
    /// The logdir the run was found in, if the user named one.
    pub logdir: Option<PathBuf>,
    /// The run name relative to the logdir (`testrun`, `sub/run2`), or the directory name.
    pub run: String,
    /// The run directory (for a lone file: its parent directory).
    pub dir: PathBuf,
    /// The XSpace files, sorted by host name.
    pub hosts: Vec<HostFile>,
    /// `*.hlo_proto.pb` files in the run directory (excluding `NO_MODULE`), sorted.
    pub hlo_protos: Vec<PathBuf>,
    /// Directories that were listed to resolve the session (the cache watches them).
    pub scanned_dirs: Vec<PathBuf>,
}

/// Where the user pointed: the raw selector arguments every capture tool takes.
#[derive(Clone, Debug, Default)]
pub struct Selector {
    pub path: Option<String>,
    pub logdir: Option<String>,
    pub run: Option<String>,
}

impl Selector {
    /// `logdir` falls back to `$XPROF_LOGDIR` when neither a path nor a logdir is given.
    pub fn with_env_default(mut self) -> Self {
        if self.path.is_none() && self.logdir.is_none() {
            self.logdir = std::env::var("XPROF_LOGDIR").ok().filter(|s| !s.is_empty());
        }
        self
    }
}

pub fn xspace_stem(file_name: &str) -> Option<&str> {
    XSPACE_SUFFIXES
        .iter()
        .find_map(|s| file_name.strip_suffix(s))
        .filter(|stem| !stem.is_empty())
}

/// A directory entry and what it is, as [`Path::is_dir`] and [`Path::is_file`] would say
/// (following a symbolic link), taken from the listing itself where it can: resolving a capture
/// lists a few directories, and a `stat` per entry per question was most of that.
struct Entry {
    path: PathBuf,
    dir: bool,
    file: bool,
}

impl Entry {
    fn name(&self) -> Option<&str> {
        self.path.file_name().and_then(|n| n.to_str())
    }
}

/// The entries of `dir`, sorted by path.
fn read_dir_sorted(dir: &Path) -> Result<Vec<Entry>, CaptureError> {
    let rd = std::fs::read_dir(dir).map_err(|e| CaptureError::io(dir, e))?;
    let mut v: Vec<Entry> = rd
        .flatten()
        .map(|e| {
            let path = e.path();
            let (dir, file) = match e.file_type() {
                Ok(t) if !t.is_symlink() => (t.is_dir(), t.is_file()),
                _ => std::fs::metadata(&path).map_or((false, false), |m| (m.is_dir(), m.is_file())),
            };
            Entry { path, dir, file }
        })
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(v)
}

/// Runs under a logdir, sorted by name: every entry of `<logdir>[/<sub>]/plugins/profile/`
/// that is a directory, for sub-directories up to three levels deep.
pub fn list_runs(logdir: &Path) -> Result<(Vec<String>, Vec<PathBuf>), CaptureError> {
    if !logdir.exists() {
        return Err(CaptureError::NotFound {
            path: logdir.to_path_buf(),
            what: "logdir",
        });
    }
    if !logdir.is_dir() {
        return Err(CaptureError::NotADirectory {
            path: logdir.to_path_buf(),
        });
    }
    let mut runs = Vec::new();
    let mut scanned = Vec::new();
    walk_runs(logdir, "", 0, &mut runs, &mut scanned)?;
    runs.sort();
    runs.dedup();
    Ok((runs, scanned))
}

fn walk_runs(
    dir: &Path,
    prefix: &str,
    depth: usize,
    runs: &mut Vec<String>,
    scanned: &mut Vec<PathBuf>,
) -> Result<(), CaptureError> {
    let profile = dir.join("plugins").join("profile");
    if profile.is_dir() {
        scanned.push(profile.clone());
        for entry in read_dir_sorted(&profile)? {
            if entry.dir
                && let Some(name) = entry.name()
            {
                runs.push(if prefix.is_empty() {
                    name.to_string()
                } else {
                    format!("{prefix}/{name}")
                });
            }
        }
    }
    if depth >= MAX_RUN_DEPTH {
        return Ok(());
    }
    scanned.push(dir.to_path_buf());
    for entry in read_dir_sorted(dir)? {
        let Some(name) = entry.name() else {
            continue;
        };
        if name == "plugins" || name.starts_with('.') || !entry.dir {
            continue;
        }
        let sub = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        };
        walk_runs(&entry.path, &sub, depth + 1, runs, scanned)?;
    }
    Ok(())
}

/// The directory of run `run` under `logdir`, following XProf's rules: the standard path;
/// else a run whose name matches once `_` are removed; else `<root>/plugins/profile/<session>`
/// for a run containing `/`.
pub fn run_dir(logdir: &Path, run: &str) -> Option<PathBuf> {
    let profile = logdir.join("plugins").join("profile");
    let direct = profile.join(run);
    if direct.is_dir() {
        return Some(direct);
    }
    let squash = |s: &str| s.replace('_', "");
    if let Ok(entries) = read_dir_sorted(&profile) {
        for e in entries {
            if e.dir && e.name().is_some_and(|n| squash(n) == squash(run)) {
                return Some(e.path);
            }
        }
    }
    if let Some((root, session)) = run.rsplit_once('/') {
        let p = logdir
            .join(root)
            .join("plugins")
            .join("profile")
            .join(session);
        if p.is_dir() {
            return Some(p);
        }
    }
    None
}

/// The listing of `dir` when it looks like a run directory (it holds an XSpace file), kept so
/// that opening it does not list it again.
fn run_dir_listing(dir: &Path) -> Option<Vec<Entry>> {
    read_dir_sorted(dir).ok().filter(|v| {
        v.iter()
            .any(|e| e.name().is_some_and(|n| xspace_stem(n).is_some()))
    })
}

/// The directory's own name, which is the run's name when it is opened directly.
fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string()
}

/// Resolve a selector to a session. Errors name the path or run and say which flag fixes it.
pub fn resolve(sel: &Selector) -> Result<Session, CaptureError> {
    let sel = sel.clone().with_env_default();
    if let Some(path) = sel.path.as_deref().filter(|p| !p.is_empty()) {
        let p = PathBuf::from(path);
        // One `stat` answers both questions (`exists`, then `is_file`, asked it twice).
        let Ok(meta) = std::fs::metadata(&p) else {
            // A bare run name given positionally together with --logdir.
            if let Some(logdir) = sel.logdir.as_deref()
                && let Some(dir) = run_dir(Path::new(logdir), path)
            {
                return open_run_dir(Some(PathBuf::from(logdir)), path.to_string(), dir);
            }
            return Err(CaptureError::NotFound {
                path: p,
                what: "capture path",
            });
        };
        if meta.is_file() {
            return open_file(&p);
        }
        if let Some(run) = sel.run.as_deref().filter(|r| !r.is_empty()) {
            return open_run_in_logdir(&p, run);
        }
        if let Some(entries) = run_dir_listing(&p) {
            return open_listed_run_dir(None, dir_name(&p), p, entries);
        }
        return open_latest_run(&p);
    }
    let Some(logdir) = sel.logdir.as_deref().filter(|l| !l.is_empty()) else {
        return Err(CaptureError::NoCaptureGiven);
    };
    let logdir = PathBuf::from(logdir);
    match sel.run.as_deref().filter(|r| !r.is_empty()) {
        Some(run) => open_run_in_logdir(&logdir, run),
        None => {
            if let Some(entries) = run_dir_listing(&logdir) {
                return open_listed_run_dir(None, dir_name(&logdir), logdir, entries);
            }
            open_latest_run(&logdir)
        }
    }
}

fn open_run_in_logdir(logdir: &Path, run: &str) -> Result<Session, CaptureError> {
    if !logdir.is_dir() {
        return Err(CaptureError::NotFound {
            path: logdir.to_path_buf(),
            what: "logdir",
        });
    }
    match run_dir(logdir, run) {
        Some(dir) => open_run_dir(Some(logdir.to_path_buf()), run.to_string(), dir),
        None => {
            let (available, _) = list_runs(logdir)?;
            Err(CaptureError::UnknownRun {
                run: run.to_string(),
                logdir: logdir.to_path_buf(),
                available,
            })
        }
    }
}

fn open_latest_run(logdir: &Path) -> Result<Session, CaptureError> {
    let (runs, scanned) = list_runs(logdir)?;
    // Run names are timestamps in JAX/TF layouts, so the last in name order is the newest.
    let Some(run) = runs.last() else {
        if !logdir.join("plugins").join("profile").is_dir() {
            // Neither a logdir nor a run directory: most likely a run dir without a capture.
            return Err(CaptureError::NoXSpace {
                dir: logdir.to_path_buf(),
            });
        }
        return Err(CaptureError::NoRuns {
            logdir: logdir.to_path_buf(),
        });
    };
    // Which run is "latest" depends on every directory listed, so a new run anywhere under the
    // logdir must invalidate cached answers: record them all.
    let mut session = open_run_in_logdir(logdir, run)?;
    for d in scanned {
        if !session.scanned_dirs.contains(&d) {
            session.scanned_dirs.push(d);
        }
    }
    Ok(session)
}

fn open_file(path: &Path) -> Result<Session, CaptureError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let Some(stem) = xspace_stem(name) else {
        return Err(CaptureError::NotAnXSpaceFile {
            path: path.to_path_buf(),
        });
    };
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let run = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let hlo_protos = read_dir_sorted(&dir)
        .map(|entries| hlo_protos_in(&entries))
        .unwrap_or_default();
    Ok(Session {
        logdir: None,
        run,
        // Listed for the HLO protos: one that appears later changes what the tools read.
        scanned_dirs: vec![dir.clone()],
        dir,
        hosts: vec![HostFile {
            name: stem.to_string(),
            path: path.to_path_buf(),
        }],
        hlo_protos,
    })
}

/// The HLO protos among a run directory's entries.
fn hlo_protos_in(entries: &[Entry]) -> Vec<PathBuf> {
    entries
        .iter()
        .filter(|e| {
            e.file
                && e.name()
                    .and_then(|n| n.strip_suffix(HLO_PROTO_SUFFIX))
                    .is_some_and(|stem| !stem.is_empty() && stem != "NO_MODULE")
        })
        .map(|e| e.path.clone())
        .collect()
}

/// Open a run directory: its hosts (sorted) and HLO protos.
pub fn open_run_dir(
    logdir: Option<PathBuf>,
    run: String,
    dir: PathBuf,
) -> Result<Session, CaptureError> {
    let entries = read_dir_sorted(&dir)?;
    open_listed_run_dir(logdir, run, dir, entries)
}

/// [`open_run_dir`] with the directory's listing already made.
fn open_listed_run_dir(
    logdir: Option<PathBuf>,
    run: String,
    dir: PathBuf,
    entries: Vec<Entry>,
) -> Result<Session, CaptureError> {
    let mut hosts = Vec::new();
    for e in &entries {
        if let Some(stem) = e.name().and_then(xspace_stem)
            && e.file
        {
            hosts.push(HostFile {
                name: stem.to_string(),
                path: e.path.clone(),
            });
        }
    }
    hosts.sort_by(|a, b| a.name.cmp(&b.name));
    if hosts.is_empty() {
        return Err(CaptureError::NoXSpace { dir });
    }
    let hlo_protos = hlo_protos_in(&entries);
    Ok(Session {
        logdir,
        run,
        scanned_dirs: vec![dir.clone()],
        dir,
        hosts,
        hlo_protos,
    })
}

impl Session {
    pub fn host_names(&self) -> Vec<&str> {
        self.hosts.iter().map(|h| h.name.as_str()).collect()
    }

    /// The hosts a tool reads: `host` empty → all; a name → that host (file stem), or an error
    /// listing the available ones.
    pub fn select_hosts(&self, host: Option<&str>) -> Result<Vec<&HostFile>, CaptureError> {
        match host.filter(|h| !h.is_empty() && *h != "ALL_HOSTS") {
            None => Ok(self.hosts.iter().collect()),
            // A name, else (XProf's agent CLI numbers hosts) a 0-based index in file order.
            Some(h) => self
                .hosts
                .iter()
                .find(|f| f.name == h)
                .or_else(|| h.parse::<usize>().ok().and_then(|i| self.hosts.get(i)))
                .map(|f| vec![f])
                .ok_or_else(|| CaptureError::UnknownHost {
                    host: h.to_string(),
                    available: self.hosts.iter().map(|f| f.name.clone()).collect(),
                }),
        }
    }

    /// The single host a per-host view reads: the named one, else the first.
    pub fn first_or_named(&self, host: Option<&str>) -> Result<&HostFile, CaptureError> {
        Ok(self.select_hosts(host)?[0])
    }
}

#[cfg(test)]
mod tests;

impl Session {
    /// The `capture` block capture tools put first in their result (XProf's own CLI does the
    /// same), so an agent sees which files answered.
    pub fn capture_block(&self, used: &[&HostFile], warnings: &[String]) -> serde_json::Value {
        serde_json::json!({
            "input": self.dir.display().to_string(),
            "run": self.run,
            "files_used": used.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(),
            "files_available": self.host_names(),
            "combined": used.len() > 1,
            "warnings": warnings,
        })
    }
}
