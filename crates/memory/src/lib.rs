//! XProf's memory views, computed natively:
//!
//! * [`profile`] — `memory_profile`: one host's allocator timeline from its
//!   `MemoryAllocation`/`MemoryDeallocation` events (peak, heap/stack, fragmentation, the
//!   allocations live at the peak).
//! * [`viewer`] — `memory_viewer`: one HLO module's buffer assignment simulated over its heap
//!   trace (buffers live at the peak, with shape, defining op and category).
//! * [`peak`] — the official CLI's `get_peak_allocations`: every module's peak buffers.
//! * [`reshapes`] — standalone copy / transpose / reshape ops that materialise in HBM.

pub mod peak;
pub mod profile;
pub mod reshapes;
pub mod viewer;

/// Failures of the memory views. Input problems (a malformed module, a heap trace that does
/// not add up) are `InvalidInput`.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("{what}: {message}")]
    InvalidInput { what: String, message: String },
}

impl MemoryError {
    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        MemoryError::InvalidInput {
            what: what.into(),
            message: message.into(),
        }
    }
}
