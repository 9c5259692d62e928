//! XProf's memory views, computed natively:
//!
//! * [`profile`] — `memory_profile`: one host's allocator timeline from its
//!   `MemoryAllocation`/`MemoryDeallocation` events (peak, heap/stack, fragmentation, the
//!   allocations live at the peak).
//! * [`viewer`] — `memory_viewer`: one HLO module's buffer assignment simulated over its heap
//!   trace (buffers live at the peak, with shape, defining op and category).
//! * [`peak`] — the official CLI's `get_peak_allocations`: every module's peak buffers.
//! * [`reshapes`] — standalone copy / transpose / reshape ops that materialise in HBM.
//! * [`modules`] — a capture's HLO modules with their buffer assignments (`.hlo_proto.pb`
//!   files and `/host:metadata`).
//!
//! Parity: `tests/parity.rs` compares every field of XProf 2.24.2's `memory_profile.json` and
//! `memory_viewer.json` (colors 0 and 1) on the shared and the project's own captures, and the
//! official CLI's `get_peak_allocations`. Where XProf's own order is not deterministic (hash
//! maps, unstable sorts) the modules document the deterministic choice made here.

pub mod modules;
pub mod peak;
pub mod profile;
pub mod reshapes;
pub mod viewer;

/// Failures of the memory views, converted to tool errors only in the plugin:
/// [`MemoryError::kind`] is the error class, [`MemoryError::hint`] the fix.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// Content that does not add up (a heap trace freeing a buffer twice, say).
    #[error("{what}: {message}")]
    InvalidInput { what: String, message: String },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{} is empty (0 bytes), not an XSpace", path.display())]
    EmptyXSpace { path: std::path::PathBuf },
    #[error(transparent)]
    XSpace(#[from] xprof_xspace::XSpaceError),
    /// An `xla.HloProto` that does not decode.
    #[error("{origin}: not a valid xla.HloProto: {message}")]
    Decode { origin: String, message: String },
}

impl MemoryError {
    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        MemoryError::InvalidInput {
            what: what.into(),
            message: message.into(),
        }
    }

    /// `path` (exit 3) for unreadable files, `invalid_value` (exit 4) for bad contents.
    pub fn kind(&self) -> &'static str {
        match self {
            MemoryError::Io { .. } => "path",
            MemoryError::XSpace(e) => e.kind(),
            _ => "invalid_value",
        }
    }

    pub fn hint(&self) -> String {
        match self {
            MemoryError::Io { .. } => "check that the file exists and is readable".into(),
            MemoryError::XSpace(e) => e.hint(),
            MemoryError::EmptyXSpace { .. } => {
                "the capture file is empty: re-capture, or pass another run with --run".into()
            }
            MemoryError::Decode { .. } => "the module proto is truncated or not an xla.HloProto; \
                 re-capture, or remove the broken <module>.hlo_proto.pb from the run directory"
                .into(),
            MemoryError::InvalidInput { .. } => {
                "the module's buffer assignment is inconsistent; pick another module with --module_name".into()
            }
        }
    }
}

/// Open an XSpace for a view, reading only the planes `wanted` names. A 0-byte file is an
/// error (it decodes as an empty XSpace, which would read as "no data").
pub fn open_xspace(
    path: &std::path::Path,
    wanted: impl Fn(&str) -> bool + Send + Sync + 'static,
) -> Result<xprof_xspace::XSpace, MemoryError> {
    check_xspace_file(path)?;
    let opts = xprof_xspace::ReadOptions::default().only_planes(wanted);
    Ok(xprof_xspace::XSpace::open_with(path, &opts)?)
}

/// A capture file that exists and is not empty (0 bytes decode as an XSpace without planes).
fn check_xspace_file(path: &std::path::Path) -> Result<(), MemoryError> {
    let len = std::fs::metadata(path)
        .map_err(|e| MemoryError::Io {
            path: path.to_path_buf(),
            source: e,
        })?
        .len();
    if len == 0 {
        return Err(MemoryError::EmptyXSpace {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}
