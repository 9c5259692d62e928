//! Glue shared by the core tools: capture selection and error mapping.

use xprof_capture::{CaptureError, Selector, Session};
use xprof_plugin_api::{Call, ErrorKind, ToolError};

pub fn capture_error(e: CaptureError) -> ToolError {
    let mut t = ToolError::new(ErrorKind::parse(e.kind()), e.to_string());
    t.hint = e.hint();
    t
}

/// Resolve the capture the call names (`path`, `logdir`, `run`) and record the directories
/// that were listed to find it.
pub fn session(call: &mut Call) -> Result<Session, ToolError> {
    let sel = Selector {
        path: call.opt_nonempty("path")?,
        logdir: call.opt_nonempty("logdir")?,
        run: call.opt_nonempty("run")?,
    };
    let s = xprof_capture::resolve(&sel).map_err(capture_error)?;
    for d in &s.scanned_dirs {
        call.read_dir(d);
    }
    Ok(s)
}
