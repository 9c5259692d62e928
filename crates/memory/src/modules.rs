//! The HLO modules of a capture, with their buffer assignments: `<name>(<program id>)`
//! `.hlo_proto.pb` files of the run directory, then the `xla.HloProto`s embedded in each
//! host's `/host:metadata` plane (JAX captures carry only these). Modules are deduplicated by
//! program id and by name, files first — the listing `list_hlo_modules` shows.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use xprof_proto::xla::HloProto;
use xprof_xspace::{hlo, names};

use crate::{MemoryError, open_xspace};

#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    File(PathBuf),
    Embedded { xspace: PathBuf, metadata_id: i64 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModuleEntry {
    /// `<module name>(<program id>)`, XProf's module name.
    pub name: String,
    pub module_name: String,
    pub program_id: Option<u64>,
    pub source: Source,
}

impl ModuleEntry {
    /// The file this module is read from.
    pub fn path(&self) -> &Path {
        match &self.source {
            Source::File(p) => p,
            Source::Embedded { xspace, .. } => xspace,
        }
    }
}

fn metadata_only(name: &str) -> bool {
    name == names::plane::HOST_METADATA
}

/// `name(123)` → (`name`, 123).
fn split_program_id(display: &str) -> (String, Option<u64>) {
    if let Some(open) = display.rfind('(')
        && display.ends_with(')')
        && let Ok(id) = display[open + 1..display.len() - 1].parse::<u64>()
    {
        return (display[..open].to_string(), Some(id));
    }
    (display.to_string(), None)
}

/// Every module of a capture, sorted by name. `hlo_files` are the run's `.hlo_proto.pb`
/// files, `xspaces` its hosts' `.xplane.pb` files.
pub fn list(hlo_files: &[PathBuf], xspaces: &[PathBuf]) -> Result<Vec<ModuleEntry>, MemoryError> {
    let mut out: Vec<ModuleEntry> = Vec::new();
    let mut names_seen: HashSet<String> = HashSet::new();
    let mut ids_seen: HashSet<u64> = HashSet::new();
    for p in hlo_files {
        let stem = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".hlo_proto.pb"))
            .unwrap_or_default()
            .to_string();
        let (module_name, program_id) = split_program_id(&stem);
        ids_seen.extend(program_id);
        names_seen.insert(stem.clone());
        out.push(ModuleEntry {
            name: stem,
            module_name,
            program_id,
            source: Source::File(p.clone()),
        });
    }
    for x in xspaces {
        let space = open_xspace(x, metadata_only)?;
        for m in hlo::embedded_hlo_modules(&space) {
            let name = m.display_name();
            if names_seen.contains(&name) || ids_seen.contains(&m.program_id) {
                continue;
            }
            names_seen.insert(name.clone());
            ids_seen.insert(m.program_id);
            out.push(ModuleEntry {
                name,
                module_name: m.name.clone(),
                program_id: Some(m.program_id),
                source: Source::Embedded {
                    xspace: x.clone(),
                    metadata_id: m.metadata_id,
                },
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn decode(bytes: &[u8], origin: &str) -> Result<HloProto, MemoryError> {
    xprof_proto::decode_hlo_proto(bytes).map_err(|e| MemoryError::Decode {
        origin: origin.to_string(),
        message: e.to_string(),
    })
}

/// Decode one module's `xla.HloProto`.
pub fn load(entry: &ModuleEntry) -> Result<HloProto, MemoryError> {
    match &entry.source {
        Source::File(p) => {
            let bytes = std::fs::read(p).map_err(|e| MemoryError::Io {
                path: p.clone(),
                source: e,
            })?;
            decode(&bytes, &p.display().to_string())
        }
        Source::Embedded {
            xspace,
            metadata_id,
        } => {
            let space = open_xspace(xspace, metadata_only)?;
            let origin = format!(
                "{} (/host:metadata, event metadata {metadata_id})",
                xspace.display()
            );
            let bytes = space
                .plane(names::plane::HOST_METADATA)
                .and_then(|p| p.event_metadata(*metadata_id))
                .and_then(|m| m.stat(names::stat::HLO_PROTO))
                .and_then(|s| s.bytes())
                .ok_or_else(|| MemoryError::Decode {
                    origin: origin.clone(),
                    message: "the module's Hlo Proto stat is gone".into(),
                })?;
            decode(bytes, &origin)
        }
    }
}

/// Decode every listed module (one read per XSpace).
pub fn load_all(entries: &[ModuleEntry]) -> Result<Vec<(ModuleEntry, HloProto)>, MemoryError> {
    let mut spaces: Vec<(PathBuf, xprof_xspace::XSpace)> = Vec::new();
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let proto = match &e.source {
            Source::File(_) => load(e)?,
            Source::Embedded {
                xspace,
                metadata_id,
            } => {
                if !spaces.iter().any(|(p, _)| p == xspace) {
                    spaces.push((xspace.clone(), open_xspace(xspace, metadata_only)?));
                }
                let space = &spaces.iter().find(|(p, _)| p == xspace).unwrap().1;
                let origin = format!(
                    "{} (/host:metadata, event metadata {metadata_id})",
                    xspace.display()
                );
                let bytes = space
                    .plane(names::plane::HOST_METADATA)
                    .and_then(|p| p.event_metadata(*metadata_id))
                    .and_then(|m| m.stat(names::stat::HLO_PROTO))
                    .and_then(|s| s.bytes())
                    .unwrap_or_default();
                decode(bytes, &origin)?
            }
        };
        out.push((e.clone(), proto));
    }
    Ok(out)
}

/// Pick a module by its full name, else by a unique bare module name or program id.
pub fn select<'m>(entries: &'m [ModuleEntry], name: &str) -> Option<&'m ModuleEntry> {
    let name = name.trim();
    if let Some(m) = entries.iter().find(|m| m.name == name) {
        return Some(m);
    }
    let loose: Vec<&ModuleEntry> = entries
        .iter()
        .filter(|m| m.module_name == name || m.program_id.is_some_and(|p| p.to_string() == name))
        .collect();
    (loose.len() == 1).then(|| loose[0])
}
