//! The capture glue of the first-party plugins, in one place: the session a [`Call`] names
//! (`path`, `logdir`, `run`) with the directories listed to find it recorded for the cache, and
//! library errors (`kind()` and `hint()`) as [`ToolError`]s. Kept out of `xprof-plugin-api` so
//! the ABI crate depends on no analysis code.

use xprof_capture::{CaptureError, Selector, Session};
use xprof_plugin_api::{Call, ErrorKind, ToolError};

/// A library error as a tool error: its class (`"path"`, `"usage"`, `"invalid_value"`, ...)
/// and its fix come from the library.
pub fn lib_error(kind: &str, message: impl ToString, hint: Option<String>) -> ToolError {
    let mut t = ToolError::new(ErrorKind::parse(kind), message.to_string());
    t.hint = hint;
    t
}

pub fn capture_error(e: CaptureError) -> ToolError {
    lib_error(e.kind(), &e, e.hint())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_errors_keep_their_class_message_and_hint() {
        let e = CaptureError::NoCaptureGiven;
        let (msg, hint) = (e.to_string(), e.hint());
        let t = capture_error(e);
        assert_eq!(t.kind, ErrorKind::Usage);
        assert_eq!(t.message, msg);
        assert_eq!(t.hint, hint);
    }

    #[test]
    fn a_missing_capture_is_a_path_error_with_a_hint() {
        let mut call = Call::new(
            [("path".to_string(), "/nonexistent/xprof/capture".into())]
                .into_iter()
                .collect(),
            serde_json::Value::Null,
        );
        let e = session(&mut call).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Path);
        assert!(e.hint.is_some_and(|h| !h.is_empty()));
    }
}
