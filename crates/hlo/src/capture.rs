//! HLO modules of a capture: `<module>(<program_id>).hlo_proto.pb` files in the run directory
//! and `xla.HloProto`s embedded in each XSpace's `/host:metadata` plane (JAX captures carry
//! only the latter). Nothing is ever written into the run directory.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Serialize;
use xprof_capture::Session;
use xprof_proto::xla::HloModuleProto;
use xprof_xspace::XSpace;

use crate::error::HloError;

/// Where a module's proto lives.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModuleSource {
    /// A `*.hlo_proto.pb` file.
    File { path: PathBuf },
    /// An `Hlo Proto` stat of event metadata `metadata_id` on `/host:metadata`.
    XSpace { path: PathBuf, metadata_id: i64 },
}

#[derive(Clone, Debug, Serialize)]
pub struct CapturedModule {
    /// `<module name>(<program id>)`, as XProf names modules.
    pub name: String,
    /// The module name without the program id.
    pub module_name: String,
    /// Decimal program id (a string: it is a 64-bit id).
    pub program_id: Option<String>,
    pub source: ModuleSource,
}

impl CapturedModule {
    pub fn path(&self) -> &PathBuf {
        match &self.source {
            ModuleSource::File { path } | ModuleSource::XSpace { path, .. } => path,
        }
    }
}

/// `name(123)` → (`name`, `123`).
fn split_program_id(display: &str) -> (String, Option<String>) {
    if let Some(open) = display.rfind('(')
        && display.ends_with(')')
    {
        let id = &display[open + 1..display.len() - 1];
        if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
            return (display[..open].to_string(), Some(id.to_string()));
        }
    }
    (display.to_string(), None)
}

fn decode(bytes: &[u8], origin: &str) -> Result<HloModuleProto, HloError> {
    let proto = xprof_proto::decode_hlo_proto(bytes).map_err(|e| HloError::Decode {
        path: origin.to_string(),
        message: e.to_string(),
    })?;
    proto.hlo_module.ok_or_else(|| HloError::Decode {
        path: origin.to_string(),
        message: "the HloProto has no hlo_module".into(),
    })
}

/// Modules embedded in one XSpace's `/host:metadata` plane, found by `xprof-xspace` (XProf's
/// extraction rules: program id, display name, dedup, `NO_MODULE` skipped).
fn embedded(space: &XSpace, path: &std::path::Path) -> Vec<CapturedModule> {
    xprof_xspace::hlo::embedded_hlo_modules(space)
        .into_iter()
        .map(|m| CapturedModule {
            name: m.display_name(),
            module_name: m.name.clone(),
            program_id: Some(m.program_id.to_string()),
            source: ModuleSource::XSpace {
                path: path.to_path_buf(),
                metadata_id: m.metadata_id,
            },
        })
        .collect()
}

/// The module a `<module>(<program_id>).hlo_proto.pb` file holds (named by its stem).
pub fn file_module(path: &std::path::Path) -> CapturedModule {
    let stem = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(xprof_capture::HLO_PROTO_SUFFIX))
        .unwrap_or_default()
        .to_string();
    let (module_name, program_id) = split_program_id(&stem);
    CapturedModule {
        name: stem,
        module_name,
        program_id,
        source: ModuleSource::File {
            path: path.to_path_buf(),
        },
    }
}

/// Every module of a session, sorted by name: the `.hlo_proto.pb` files, then (deduplicated
/// by program id and by name, first wins) the modules embedded in each host's XSpace.
/// Returns the modules and the files read.
pub fn list_modules(session: &Session) -> Result<(Vec<CapturedModule>, Vec<PathBuf>), HloError> {
    let mut modules: Vec<CapturedModule> = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    let mut ids: HashSet<String> = HashSet::new();
    let mut read = Vec::new();
    for p in &session.hlo_protos {
        let m = file_module(p);
        if let Some(id) = &m.program_id {
            ids.insert(id.clone());
        }
        names.insert(m.name.clone());
        modules.push(m);
    }
    for host in &session.hosts {
        let space = XSpace::open(&host.path)?;
        read.push(host.path.clone());
        for m in embedded(&space, &host.path) {
            let id = m.program_id.clone().unwrap_or_default();
            if names.contains(&m.name) || ids.contains(&id) {
                continue;
            }
            names.insert(m.name.clone());
            ids.insert(id);
            modules.push(m);
        }
    }
    modules.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((modules, read))
}

/// Pick a module: exact display name; else a unique bare module name or program id; `None`
/// picks the first (by name).
pub fn select<'m>(
    modules: &'m [CapturedModule],
    name: Option<&str>,
) -> Result<&'m CapturedModule, HloError> {
    let available = || modules.iter().map(|m| m.name.clone()).collect::<Vec<_>>();
    let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
        return modules.first().ok_or(HloError::ModuleNotFound {
            name: String::new(),
            available: Vec::new(),
        });
    };
    if let Some(m) = modules.iter().find(|m| m.name == name) {
        return Ok(m);
    }
    let loose: Vec<&CapturedModule> = modules
        .iter()
        .filter(|m| m.module_name == name || m.program_id.as_deref() == Some(name))
        .collect();
    match loose.len() {
        1 => Ok(loose[0]),
        0 => Err(HloError::ModuleNotFound {
            name: name.to_string(),
            available: available(),
        }),
        _ => Err(HloError::AmbiguousCaptureModule {
            name: name.to_string(),
            candidates: loose.iter().map(|m| m.name.clone()).collect(),
        }),
    }
}

/// Load a module's proto from wherever it lives.
pub fn load(module: &CapturedModule) -> Result<HloModuleProto, HloError> {
    match &module.source {
        ModuleSource::File { path } => {
            let bytes = std::fs::read(path).map_err(|e| HloError::Io {
                path: path.clone(),
                source: e,
            })?;
            decode(&bytes, &path.display().to_string())
        }
        ModuleSource::XSpace { path, metadata_id } => {
            let space = XSpace::open(path)?;
            let bytes = xprof_xspace::hlo::embedded_hlo_modules(&space)
                .into_iter()
                .find(|m| m.metadata_id == *metadata_id)
                .map(|m| m.bytes)
                .ok_or_else(|| HloError::ModuleNotFound {
                    name: module.name.clone(),
                    available: Vec::new(),
                })?;
            decode(
                bytes,
                &format!(
                    "{} (/host:metadata, event metadata {metadata_id})",
                    path.display()
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_ids_split() {
        assert_eq!(
            split_program_id("jit_f(17342868964687645945)"),
            ("jit_f".into(), Some("17342868964687645945".into()))
        );
        assert_eq!(split_program_id("plain"), ("plain".into(), None));
        assert_eq!(split_program_id("f(x)"), ("f(x)".into(), None));
    }
}
