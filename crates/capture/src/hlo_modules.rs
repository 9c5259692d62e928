//! The HLO modules of a session, from both places XProf keeps them: `<module>(<program id>)
//! .hlo_proto.pb` files in the run directory, and `xla.HloProto`s embedded in each host's
//! `/host:metadata` plane (JAX captures have only the latter). Nothing is written anywhere: the
//! embedded ones are read in memory where XProf would extract them into files.
//!
//! Rules (XProf's): files first, then each host's embedded modules; deduplicated by program id,
//! then by display name `<module name>(<program id>)`, the first winning; `NO_MODULE` is never a
//! module. The list is sorted by display name, like XProf's file listing.

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

/// `name(123)` → (`name`, `Some(123)`); anything else → (the stem, `None`).
fn split_program_id(stem: &str) -> (String, Option<u64>) {
    if let Some(open) = stem.rfind('(')
        && let Some(id) = stem[open + 1..].strip_suffix(')')
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
    /// The serialized `xla.HloProto`.
    pub fn bytes(&self) -> Result<Vec<u8>, CaptureError> {
        match &self.source {
            HloSource::File(p) => std::fs::read(p).map_err(|e| CaptureError::io(p, e)),
            HloSource::Embedded {
                xspace,
                metadata_id,
            } => {
                let space = open_metadata(xspace)?;
                embedded_hlo_modules(&space)
                    .into_iter()
                    .find(|m| m.metadata_id == *metadata_id)
                    .map(|m| m.bytes.to_vec())
                    .ok_or_else(|| CaptureError::HloProto {
                        origin: self.origin(),
                        detail: "the module is no longer in the capture (was the file replaced?)"
                            .into(),
                    })
            }
        }
    }

    /// The decoded `xla.HloProto`.
    pub fn decode(&self) -> Result<HloProto, CaptureError> {
        xprof_proto::decode_hlo_proto(&self.bytes()?).map_err(|e| CaptureError::HloProto {
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

impl Session {
    /// Every HLO module of the session (see the module docs for the rules), and the files that
    /// were read to find them.
    pub fn hlo_modules(&self) -> Result<(Vec<HloModuleRef>, Vec<PathBuf>), CaptureError> {
        let mut out: Vec<HloModuleRef> = Vec::new();
        let mut read = Vec::new();
        let seen = |out: &[HloModuleRef], id: Option<u64>, name: &str| {
            out.iter()
                .any(|m| (id.is_some() && m.program_id == id) || m.name == name)
        };
        for p in &self.hlo_protos {
            let Some(stem) = p
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(HLO_PROTO_SUFFIX))
            else {
                continue;
            };
            let (module_name, program_id) = split_program_id(stem);
            if stem == "NO_MODULE" || seen(&out, program_id, stem) {
                continue;
            }
            out.push(HloModuleRef {
                name: stem.to_string(),
                module_name,
                program_id,
                source: HloSource::File(p.clone()),
            });
        }
        for host in &self.hosts {
            let space = open_metadata(&host.path)?;
            read.push(host.path.clone());
            for m in embedded_hlo_modules(&space) {
                let name = m.display_name();
                if seen(&out, Some(m.program_id), &name) {
                    continue;
                }
                out.push(HloModuleRef {
                    name,
                    module_name: m.name.clone(),
                    program_id: Some(m.program_id),
                    source: HloSource::Embedded {
                        xspace: host.path.clone(),
                        metadata_id: m.metadata_id,
                    },
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((out, read))
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
