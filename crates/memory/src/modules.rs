//! The HLO modules of a capture, with their buffer assignments: the listing of
//! [`xprof_capture::hlo_modules`] (`.hlo_proto.pb` files, then the `xla.HloProto`s embedded in
//! each host's `/host:metadata`), its failures as [`MemoryError`]s.

use std::path::PathBuf;

use xprof_capture::hlo_modules;
use xprof_capture::{CaptureError, HloModuleRef};
use xprof_proto::xla::HloProto;

use crate::MemoryError;

impl From<CaptureError> for MemoryError {
    fn from(e: CaptureError) -> Self {
        match e {
            CaptureError::Io { path, source } => MemoryError::Io { path, source },
            CaptureError::XSpace(e) => MemoryError::XSpace(e),
            CaptureError::HloProto { origin, detail } => MemoryError::Decode {
                origin,
                message: detail,
            },
            other => MemoryError::invalid("HLO modules", other.to_string()),
        }
    }
}

/// Every module of a capture, sorted by name. `hlo_files` are the run's `.hlo_proto.pb`
/// files, `xspaces` its hosts' `.xplane.pb` files (an empty or unreadable one is an error).
pub fn list(hlo_files: &[PathBuf], xspaces: &[PathBuf]) -> Result<Vec<HloModuleRef>, MemoryError> {
    for x in xspaces {
        crate::check_xspace_file(x)?;
    }
    Ok(hlo_modules::list(hlo_files, xspaces)?)
}

/// Decode one module's `xla.HloProto`.
pub fn load(entry: &HloModuleRef) -> Result<HloProto, MemoryError> {
    Ok(entry.decode()?)
}

/// Decode every listed module (one read per XSpace).
pub fn load_all(entries: &[HloModuleRef]) -> Result<Vec<(HloModuleRef, HloProto)>, MemoryError> {
    let protos = hlo_modules::decode_all(entries)?;
    Ok(entries.iter().cloned().zip(protos).collect())
}

/// Pick a module by its full name, else by a unique bare module name or program id.
pub fn select<'m>(entries: &'m [HloModuleRef], name: &str) -> Option<&'m HloModuleRef> {
    hlo_modules::select(entries, name).ok()
}
