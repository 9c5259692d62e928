//! HLO modules of a capture: the listing and selection of [`xprof_capture::hlo_modules`]
//! (`<module>(<program_id>).hlo_proto.pb` files and `xla.HloProto`s embedded in each XSpace's
//! `/host:metadata` plane), loaded as `HloModuleProto`s, with failures as [`HloError`]s.

use std::path::PathBuf;

use xprof_capture::{CaptureError, HloModuleRef, Session, hlo_modules};
use xprof_proto::xla::HloModuleProto;

use crate::error::HloError;

impl From<CaptureError> for HloError {
    fn from(e: CaptureError) -> Self {
        match e {
            CaptureError::Io { path, source } => HloError::Io { path, source },
            CaptureError::XSpace(e) => HloError::XSpace(e),
            CaptureError::HloProto { origin, detail } => HloError::Decode {
                path: origin,
                message: detail,
            },
            CaptureError::UnknownHloModule { name, available } => {
                HloError::ModuleNotFound { name, available }
            }
            CaptureError::AmbiguousHloModule { name, candidates } => {
                HloError::AmbiguousCaptureModule { name, candidates }
            }
            other => HloError::InvalidArgument {
                arg: "path",
                message: other.to_string(),
            },
        }
    }
}

/// Every module of a session, sorted by name, and the files read to list them.
pub fn list_modules(session: &Session) -> Result<(Vec<HloModuleRef>, Vec<PathBuf>), HloError> {
    Ok(session.hlo_modules()?)
}

/// Pick a module: exact display name; else a unique bare module name or program id; `None`
/// picks the first (by name).
pub fn select<'m>(
    modules: &'m [HloModuleRef],
    name: Option<&str>,
) -> Result<&'m HloModuleRef, HloError> {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => Ok(hlo_modules::select(modules, name)?),
        None => modules.first().ok_or(HloError::ModuleNotFound {
            name: String::new(),
            available: Vec::new(),
        }),
    }
}

/// Load a module's proto from wherever it lives.
pub fn load(module: &HloModuleRef) -> Result<HloModuleProto, HloError> {
    module.decode_module()?.ok_or_else(|| HloError::Decode {
        path: module.origin(),
        message: "the HloProto has no hlo_module".into(),
    })
}
