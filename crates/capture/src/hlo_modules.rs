//! The HLO modules of a session, from both places XProf keeps them: `<module>(<program id>)
//! .hlo_proto.pb` files in the run directory, and `xla.HloProto`s embedded in each host's
//! `/host:metadata` plane (JAX captures have only the latter). Nothing is written anywhere: the
//! embedded ones are read in memory where XProf would extract them into files.
//!
//! Rules (XProf's): every file, then each host's embedded modules unless a module already listed
//! has the same program id or display name `<module name>(<program id>)` (the first wins);
//! `NO_MODULE` is never a module. The list is sorted by display name, like XProf's file listing.
//! [`select`] picks one by display name, else by a unique bare name or program id.

use std::path::{Path, PathBuf};

use xprof_proto::xla::HloProto;
use xprof_xspace::{ReadOptions, XSpace, hlo::embedded_hlo_modules, names};

use crate::{CaptureError, HLO_PROTO_SUFFIX, Session};

/// Where a module's `HloProto` lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HloSource {
    /// A `*.hlo_proto.pb` file.
    File(PathBuf),
    /// The `Hlo Proto` stat of event metadata `metadata_id` on `/host:metadata` of an XSpace.
    Embedded { xspace: PathBuf, metadata_id: i64 },
}

/// One HLO module of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HloModuleRef {
    /// `<module name>(<program id>)` (or the file stem when it carries no program id).
    pub name: String,
    /// `HloModuleProto.name` (the file stem without its `(<program id>)` for files).
    pub module_name: String,
    /// The program id (64-bit; print it as a string in JSON).
    pub program_id: Option<u64>,
    /// Where the proto is.
    pub source: HloSource,
}

/// `name(123)` → (`name`, `Some(123)`); anything else → (the stem, `None`). The id is decimal
/// digits only (no sign) and fits in 64 bits, as XProf writes program ids.
fn split_program_id(stem: &str) -> (String, Option<u64>) {
    if let Some(open) = stem.rfind('(')
        && let Some(id) = stem[open + 1..].strip_suffix(')')
        && !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && let Ok(id) = id.parse::<u64>()
    {
        return (stem[..open].to_string(), Some(id));
    }
    (stem.to_string(), None)
}

/// Read only `/host:metadata` (the rest of a large capture is skipped unread).
fn open_metadata(path: &Path) -> Result<XSpace, CaptureError> {
    let opts = ReadOptions::default().only_planes(|n| n == names::plane::HOST_METADATA);
    Ok(XSpace::open_with(path, &opts)?)
}

impl HloModuleRef {
    /// The module a `<module>(<program id>).hlo_proto.pb` file holds, named by its stem;
    /// `None` for other file names and for `NO_MODULE`.
    pub fn from_file(path: &Path) -> Option<HloModuleRef> {
        let stem = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(HLO_PROTO_SUFFIX))
            .filter(|s| *s != "NO_MODULE")?;
        let (module_name, program_id) = split_program_id(stem);
        Some(HloModuleRef {
            name: stem.to_string(),
            module_name,
            program_id,
            source: HloSource::File(path.to_path_buf()),
        })
    }

    /// The file the module is read from (the XSpace for embedded modules).
    pub fn path(&self) -> &Path {
        match &self.source {
            HloSource::File(p) | HloSource::Embedded { xspace: p, .. } => p,
        }
    }

    /// The serialized `xla.HloProto`.
    pub fn bytes(&self) -> Result<Vec<u8>, CaptureError> {
        match &self.source {
            HloSource::File(p) => xprof_xspace::file::read(p).map_err(|e| CaptureError::io(p, e)),
            HloSource::Embedded { xspace, .. } => {
                Ok(self.embedded_bytes(&open_metadata(xspace)?)?.to_vec())
            }
        }
    }

    /// The proto's bytes in `space`, the (already opened) XSpace an embedded module lives in.
    fn embedded_bytes<'s>(&self, space: &'s XSpace) -> Result<&'s [u8], CaptureError> {
        let HloSource::Embedded { metadata_id, .. } = &self.source else {
            unreachable!("only embedded modules live in an XSpace")
        };
        embedded_hlo_modules(space)
            .into_iter()
            .find(|m| m.metadata_id == *metadata_id)
            .map(|m| m.bytes)
            .ok_or_else(|| CaptureError::HloProto {
                origin: self.origin(),
                detail: "the module is no longer in the capture (was the file replaced?)".into(),
            })
    }

    fn decode_bytes(&self, bytes: &[u8]) -> Result<HloProto, CaptureError> {
        xprof_proto::decode_hlo_proto(bytes).map_err(|e| CaptureError::HloProto {
            origin: self.origin(),
            detail: e.to_string(),
        })
    }

    /// The decoded `xla.HloProto`.
    pub fn decode(&self) -> Result<HloProto, CaptureError> {
        self.decode_bytes(&self.bytes()?)
    }

    /// Only the decoded `hlo_module` (the buffer assignment skipped undecoded), for readers
    /// that never look at the buffer assignment.
    pub fn decode_module(&self) -> Result<Option<xprof_proto::xla::HloModuleProto>, CaptureError> {
        xprof_proto::decode_hlo_module(&self.bytes()?).map_err(|e| CaptureError::HloProto {
            origin: self.origin(),
            detail: e.to_string(),
        })
    }

    /// Human-readable location, for messages.
    pub fn origin(&self) -> String {
        match &self.source {
            HloSource::File(p) => p.display().to_string(),
            HloSource::Embedded {
                xspace,
                metadata_id,
            } => format!(
                "{} (/host:metadata, event metadata {metadata_id})",
                xspace.display()
            ),
        }
    }
}

/// Decode every module, reading each XSpace once however many modules it embeds.
pub fn decode_all(modules: &[HloModuleRef]) -> Result<Vec<HloProto>, CaptureError> {
    let mut spaces: Vec<(&Path, XSpace)> = Vec::new();
    let mut out = Vec::with_capacity(modules.len());
    for m in modules {
        let proto = match &m.source {
            HloSource::File(_) => m.decode()?,
            HloSource::Embedded { xspace, .. } => {
                let i = match spaces.iter().position(|(p, _)| p == xspace) {
                    Some(i) => i,
                    None => {
                        spaces.push((xspace, open_metadata(xspace)?));
                        spaces.len() - 1
                    }
                };
                m.decode_bytes(m.embedded_bytes(&spaces[i].1)?)?
            }
        };
        out.push(proto);
    }
    Ok(out)
}

/// Every HLO module of `hlo_files` (a run's `*.hlo_proto.pb`, each listed) and of the
/// `/host:metadata` planes of `xspaces` (see the module docs for the rules), sorted by name.
pub fn list(hlo_files: &[PathBuf], xspaces: &[PathBuf]) -> Result<Vec<HloModuleRef>, CaptureError> {
    let mut out: Vec<HloModuleRef> = hlo_files
        .iter()
        .filter_map(|p| HloModuleRef::from_file(p))
        .collect();
    for x in xspaces {
        let space = open_metadata(x)?;
        for m in embedded_hlo_modules(&space) {
            let name = m.display_name();
            if out
                .iter()
                .any(|o| o.program_id == Some(m.program_id) || o.name == name)
            {
                continue;
            }
            out.push(HloModuleRef {
                name,
                module_name: m.name.clone(),
                program_id: Some(m.program_id),
                source: HloSource::Embedded {
                    xspace: x.clone(),
                    metadata_id: m.metadata_id,
                },
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The module `name` picks: the exact display name, else the one module whose bare name or
/// program id it is. Surrounding blanks are ignored.
pub fn select<'m>(
    modules: &'m [HloModuleRef],
    name: &str,
) -> Result<&'m HloModuleRef, CaptureError> {
    let name = name.trim();
    if let Some(m) = modules.iter().find(|m| m.name == name) {
        return Ok(m);
    }
    let loose: Vec<&HloModuleRef> = modules
        .iter()
        .filter(|m| m.module_name == name || m.program_id.is_some_and(|p| p.to_string() == name))
        .collect();
    match loose[..] {
        [m] => Ok(m),
        [] => Err(CaptureError::UnknownHloModule {
            name: name.to_string(),
            available: modules.iter().map(|m| m.name.clone()).collect(),
        }),
        _ => Err(CaptureError::AmbiguousHloModule {
            name: name.to_string(),
            candidates: loose.iter().map(|m| m.name.clone()).collect(),
        }),
    }
}

impl Session {
    /// Every HLO module of the session (see [`list`]), and the files that were read to find
    /// them (the hosts' XSpaces).
    pub fn hlo_modules(&self) -> Result<(Vec<HloModuleRef>, Vec<PathBuf>), CaptureError> {
        let xspaces: Vec<PathBuf> = self.hosts.iter().map(|h| h.path.clone()).collect();
        let out = list(&self.hlo_protos, &xspaces)?;
        Ok((out, xspaces))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xprof_testkit::{XSpaceBuilder, simple_hlo_proto};

    #[test]
    fn program_ids_split() {
        assert_eq!(
            split_program_id("jit_f(17342868964687645945)"),
            ("jit_f".into(), Some(17342868964687645945))
        );
        assert_eq!(split_program_id("plain"), ("plain".into(), None));
        assert_eq!(split_program_id("f(x)"), ("f(x)".into(), None));
        assert_eq!(split_program_id("f(99999999999999999999)").1, None); // > u64
        assert_eq!(split_program_id("f(+5)").1, None);
        assert_eq!(split_program_id("f()").1, None);
    }

    fn file_ref(name: &str) -> HloModuleRef {
        HloModuleRef::from_file(Path::new(&format!("/r/{name}.hlo_proto.pb"))).unwrap()
    }

    #[test]
    fn selection_by_full_name_then_unique_bare_name_or_program_id() {
        let mods = [
            file_ref("f(1)"),
            file_ref("f(2)"),
            file_ref("g(3)"),
            file_ref("h"),
        ];
        assert_eq!(select(&mods, " f(2) ").unwrap().name, "f(2)");
        assert_eq!(select(&mods, "g").unwrap().name, "g(3)");
        assert_eq!(select(&mods, "1").unwrap().name, "f(1)");
        assert_eq!(select(&mods, "h").unwrap().name, "h");
        let e = select(&mods, "f").unwrap_err();
        assert!(
            matches!(e, CaptureError::AmbiguousHloModule { ref candidates, .. } if candidates.len() == 2)
        );
        assert_eq!(e.kind(), "invalid_value");
        let e = select(&mods, "f(").unwrap_err();
        assert!(
            matches!(e, CaptureError::UnknownHloModule { ref available, .. } if available.len() == 4)
        );
        assert!(HloModuleRef::from_file(Path::new("/r/NO_MODULE.hlo_proto.pb")).is_none());
    }

    #[test]
    fn files_are_all_listed_even_when_they_share_a_program_id() {
        let files = [
            PathBuf::from("/r/b(5).hlo_proto.pb"),
            PathBuf::from("/r/a(5).hlo_proto.pb"),
        ];
        let names: Vec<_> = list(&files, &[])
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(names, ["a(5)", "b(5)"]);
    }

    #[test]
    fn files_and_embedded_modules_merge_without_writing() {
        let t = tempfile::tempdir().unwrap();
        let fp: u64 = 17342868964687645945;
        let a = simple_hlo_proto("jit_a", &[("p", "parameter")]);
        let b = simple_hlo_proto("jit_b", &[("p", "parameter"), ("n", "negate")]);
        let capture = XSpaceBuilder::new()
            .plane("/host:metadata", |p| {
                p.hlo_module(fp as i64, fp, &a).hlo_module(7, 7, &b)
            })
            .plane("/host:CPU", |p| p.line("main", |l| l.event("x", 0, 1)));
        let xspace = capture.write_run(t.path(), "run", "host0").unwrap();
        let dir = xspace.parent().unwrap().to_path_buf();
        // The file for jit_a exists too: the file wins, the embedded copy is a duplicate.
        let file = dir.join(format!("jit_a({fp}).hlo_proto.pb"));
        std::fs::write(&file, prost::Message::encode_to_vec(&a)).unwrap();
        std::fs::write(dir.join("NO_MODULE.hlo_proto.pb"), b"").unwrap();
        let before: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();

        let session = crate::open_run_dir(None, "run".into(), dir.clone()).unwrap();
        let (mods, read) = session.hlo_modules().unwrap();
        let names: Vec<_> = mods.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, [format!("jit_a({fp})").as_str(), "jit_b(7)"]);
        assert_eq!(mods[0].source, HloSource::File(file));
        assert_eq!(mods[0].program_id, Some(fp));
        assert_eq!(mods[1].module_name, "jit_b");
        assert!(matches!(
            mods[1].source,
            HloSource::Embedded { metadata_id: 7, .. }
        ));
        assert_eq!(mods[1].decode().unwrap(), b);
        assert_eq!(mods[0].decode().unwrap(), a);
        assert_eq!(decode_all(&mods).unwrap(), [a.clone(), b.clone()]);
        assert_eq!(mods[1].path(), xspace);
        assert_eq!(read, [xspace]);
        let after: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(before, after, "nothing is written into the run directory");
    }

    #[test]
    fn a_damaged_capture_is_an_invalid_value_error_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("plugins/profile/run");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("h.xplane.pb"), [0x0a, 0x05, 0x01]).unwrap();
        std::fs::write(dir.join("bad(3).hlo_proto.pb"), [0x0a, 0x05]).unwrap();
        let session = crate::open_run_dir(None, "run".into(), dir.clone()).unwrap();
        let e = session.hlo_modules().unwrap_err();
        assert_eq!(e.kind(), "invalid_value");
        assert!(e.to_string().contains("h.xplane.pb"), "{e}");
        // The file-backed module lists, and fails only when decoded.
        std::fs::remove_file(dir.join("h.xplane.pb")).unwrap();
        std::fs::write(dir.join("h.xplane.pb"), b"").unwrap();
        let session = crate::open_run_dir(None, "run".into(), dir.clone()).unwrap();
        let (mods, _) = session.hlo_modules().unwrap();
        assert_eq!(mods.len(), 1);
        let e = mods[0].decode().unwrap_err();
        assert_eq!(e.kind(), "invalid_value");
        assert!(e.to_string().contains("bad(3).hlo_proto.pb"), "{e}");
    }
}
