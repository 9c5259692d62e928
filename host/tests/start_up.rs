//! The executable starts at the C `main` (see `src/main.rs`), so it does itself what std's
//! runtime start-up did for the CLI. The test here fails if that part is dropped.

mod common;

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;

use common::*;

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jax-cpu/logdir")
}

/// A reader that went away (`xprof ... | head`) makes the write fail with EPIPE, which the
/// CLI ignores; it must not kill the process with SIGPIPE.
#[test]
fn a_closed_pipe_on_stdout_is_not_a_signal() {
    let mut fds = [0; 2];
    // SAFETY: `pipe` fills the two descriptors, which are then owned exactly once each.
    let (read_end, write_end) = unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    };
    drop(read_end);
    let cache = tempfile::tempdir().unwrap();
    let status = xprof(cache.path())
        .args(["--no_cache", "get_hosts"])
        .arg(fixture())
        .stdout(Stdio::from(write_end))
        .status()
        .unwrap();
    assert_eq!(status.signal(), None, "{status:?}");
    assert_eq!(status.code(), Some(0), "{status:?}");
}
