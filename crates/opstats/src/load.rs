//! Reading a host's capture files into the engine's model.

use std::path::{Path, PathBuf};

use crate::adapter::{embedded_module_infos, host_model, module_info};
use crate::model::{HloModuleInfo, HostEvents, HostSpace};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is empty (0 bytes), not an XSpace", path.display())]
    Empty { path: PathBuf },
    #[error("{} is not a valid XSpace protobuf: {source}", path.display())]
    Decode {
        path: PathBuf,
        source: prost::DecodeError,
    },
    /// From the lazy reader (names the file and the byte offset).
    #[error(transparent)]
    Reader(#[from] xprof_xspace::XSpaceError),
}

impl LoadError {
    /// `path` for unreadable files, `invalid_value` for malformed contents.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadError::Io { .. } => "path",
            LoadError::Reader(e) => e.kind(),
            _ => "invalid_value",
        }
    }
    pub fn hint(&self) -> String {
        match self {
            LoadError::Io { .. } => "check the file exists and is readable".into(),
            LoadError::Reader(e) => e.hint(),
            _ => "re-capture the profile, or pass another run/host (--run, --host)".into(),
        }
    }
}

/// Decode one `.xplane.pb`.
pub fn read_xspace(path: &Path) -> Result<xprof_proto::xplane::XSpace, LoadError> {
    use prost::Message;
    let bytes = xprof_xspace::file::read(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.is_empty() {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
        });
    }
    xprof_proto::xplane::XSpace::decode(bytes.as_slice()).map_err(|source| LoadError::Decode {
        path: path.to_path_buf(),
        source,
    })
}

/// The program id in a `<module>(<program_id>).hlo_proto.pb` file name.
pub fn program_id_from_file_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?.strip_suffix(".hlo_proto.pb")?;
    let open = name.rfind('(')?;
    name[open + 1..].strip_suffix(')')?.parse().ok()
}

/// HLO modules from `*.hlo_proto.pb` files (decoded in parallel) except the programs in
/// `skip`; unreadable ones are reported as warnings.
pub fn read_hlo_files_except(
    files: &[PathBuf],
    skip: &std::collections::HashSet<u64>,
) -> (Vec<HloModuleInfo>, Vec<String>) {
    use rayon::prelude::*;
    let results: Vec<Result<HloModuleInfo, String>> = files
        .par_iter()
        .filter_map(|f| {
            let pid = program_id_from_file_name(f)?;
            if skip.contains(&pid) {
                return None;
            }
            let r = xprof_xspace::file::read(f)
                .map_err(|e| e.to_string())
                .and_then(|b| xprof_proto::decode_hlo_module(&b).map_err(|e| e.to_string()))
                .map_err(|e| format!("skipped {}: {e}", f.display()));
            Some(r.and_then(|m| {
                m.map(|m| module_info(pid, &m))
                    .ok_or_else(|| format!("skipped {}: no hlo_module", f.display()))
            }))
        })
        .collect();
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for r in results {
        match r {
            Ok(m) => out.push(m),
            Err(w) => warnings.push(w),
        }
    }
    (out, warnings)
}

/// HLO modules from `*.hlo_proto.pb` files; unreadable ones are reported as warnings.
pub fn read_hlo_files(files: &[PathBuf]) -> (Vec<HloModuleInfo>, Vec<String>) {
    read_hlo_files_except(files, &Default::default())
}

/// One host's model from its XSpace file (lazy, zero-copy reader) and the run's HLO files.
/// Planes the reader had to drop (corrupt content inside intact framing) become warnings.
pub fn load_host(
    host: &str,
    xspace: &Path,
    hlo_files: &[PathBuf],
) -> Result<(HostSpace, Vec<String>), LoadError> {
    load_host_with(host, xspace, hlo_files, HostEvents::All)
}

/// [`load_host`] keeping only the host-thread events `host_events` names (what a build needs:
/// [`crate::BuildOptions::host_events`]).
pub fn load_host_with(
    host: &str,
    xspace: &Path,
    hlo_files: &[PathBuf],
    host_events: HostEvents,
) -> Result<(HostSpace, Vec<String>), LoadError> {
    if std::fs::metadata(xspace).is_ok_and(|m| m.len() == 0) {
        return Err(LoadError::Empty {
            path: xspace.to_path_buf(),
        });
    }
    // The HLO modules (embedded, and the run's files except the programs the capture embeds:
    // each decoded once) are decoded while the events are converted.
    let (space, planes, (infos, (modules, mut warnings))) =
        crate::adapter::load_host_space(xspace, host_events, |modules| {
            let embedded: std::collections::HashSet<u64> =
                modules.iter().map(|m| m.program_id).collect();
            rayon::join(
                || embedded_module_infos(modules),
                || read_hlo_files_except(hlo_files, &embedded),
            )
        })?;
    if !space.is_complete() {
        warnings.extend(space.diagnostics().iter().cloned());
    }
    let model = host_model(host, &space, planes, infos, modules, host_events);
    Ok((model, warnings))
}
