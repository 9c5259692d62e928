//! The capture glue of the first-party plugins, in one place: the session a [`Call`] names
//! (`path`, `logdir`, `run`) with the directories listed to find it recorded for the cache, and
//! library errors (`kind()` and `hint()`) as [`ToolError`]s. Kept out of `xprof-plugin-api` so
//! the ABI crate depends on no analysis code.

/// The allocator of a first-party capture plugin; use once, in its `lib.rs`.
///
/// mimalloc instead of the system allocator: converting a large capture allocates a few
/// hundred MB in large blocks (and a decoded HLO module is ~40 times its encoded size), which
/// glibc hands out as fresh 4 KB pages; faulting them in was a third of `get_overview`'s CPU
/// time on a 56 MB capture. v2 rather than the crate's default v3: lower peak RSS in the same
/// measurement. `local_dynamic_tls` because the plugin is loaded with dlopen, where the
/// initial-exec TLS model may not fit. One allocator for every block of the plugin: an earlier
/// policy that started on glibc's and switched to mimalloc freed mimalloc's huge blocks
/// (over ~1 GiB) with glibc's `free` and aborted (issue 30, case 1).
#[macro_export]
macro_rules! capture_plugin_allocator {
    () => {
        #[global_allocator]
        static GLOBAL: $crate::MiMalloc = $crate::MiMalloc;
    };
}

#[doc(hidden)]
pub use mimalloc::MiMalloc;

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
    fit_threads(&s, call);
    Ok(s)
}

/// Captures (XSpace files and HLO protos together) below this size are analysed on the
/// calling thread alone.
pub const SMALL_CAPTURE_BYTES: u64 = 4 << 20;

/// In a one-shot CLI process, a small capture is analysed on the calling thread alone: the
/// work takes about a millisecond, less than starting rayon's worker threads and waking them
/// for each parallel step (measured: ~0.7 ms of a 5 ms call on a 1 MB capture, most of it
/// workers spinning on a 2-core machine), and without transparent huge pages (see [`pages`]).
/// Larger captures and long-lived frontends (MCP, whose next call may be large) keep rayon's
/// default pool. The global pool is built once per process; if it exists already this changes
/// nothing.
fn fit_threads(s: &Session, call: &Call) {
    if !is_small_cli_call(s, call) {
        return;
    }
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .build_global();
}

/// Is the call made by the one-shot CLI (the process exits after it), not a long-lived MCP
/// server?
pub fn is_cli_call(call: &Call) -> bool {
    call.ctx().get("frontend").and_then(|f| f.as_str()) == Some("cli")
}

fn is_small_cli_call(s: &Session, call: &Call) -> bool {
    if !is_cli_call(call) {
        return false;
    }
    let bytes: u64 = s
        .hosts
        .iter()
        .map(|h| h.path.as_path())
        .chain(s.hlo_protos.iter().map(|p| p.as_path()))
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    bytes < SMALL_CAPTURE_BYTES
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

    // The only test of this binary that touches rayon's global pool, which a process sets once.
    #[test]
    fn a_small_cli_call_runs_on_the_calling_thread() {
        let root = xprof_plugin_api::sdk::testing::workspace_root(env!("CARGO_MANIFEST_DIR"));
        let run = root.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_steps");
        let mut call = Call::new(
            [("path".to_string(), run.display().to_string().into())]
                .into_iter()
                .collect(),
            serde_json::json!({"frontend": "cli"}),
        );
        let s = session(&mut call).unwrap();
        let bytes: u64 = s
            .hosts
            .iter()
            .map(|h| std::fs::metadata(&h.path).unwrap().len())
            .sum();
        assert!(
            bytes < SMALL_CAPTURE_BYTES,
            "the fixture is no longer small"
        );
        assert_eq!(rayon::current_num_threads(), 1);
        let here = std::thread::current().id();
        use rayon::prelude::*;
        assert!(
            (0..64)
                .into_par_iter()
                .all(|_| std::thread::current().id() == here)
        );
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
