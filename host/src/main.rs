//! `xprof`: the thin binary over the host library.
//!
//! It starts at the C `main`, not through std's runtime: a tool call is a cold process whose
//! fixed start-up is most of what a small call costs, and std's start-up spends ~80 us (median
//! of 600 interleaved runs of a hello world on the benchmark VM) locating the main thread's
//! stack in `/proc/self/maps` and arming a stack-overflow handler. What the CLI relies on from
//! that start-up is done here instead ([`start_up`]); a main-thread stack overflow is a plain
//! SIGSEGV rather than std's one-line message. The arguments are taken from `main`'s own
//! `argc`/`argv` (std's `env::args` gets them from its start-up on some C libraries).

#![no_main]

use std::cell::RefCell;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};

use xprof_plugin_api::ToolError;

thread_local! {
    static PANIC_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    start_up();
    // SAFETY: the C runtime passes `argc` valid NUL-terminated strings in `argv`.
    let args = (1..usize::try_from(argc).unwrap_or(0))
        .map(|i| unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) })
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let code = run(args);
    // std's runtime would flush stdout at exit; `out` flushes already, this is for any other
    // writer.
    let _ = std::io::stdout().flush();
    code
}

/// The parts of std's runtime start-up the CLI depends on.
fn start_up() {
    // SAFETY: plain libc calls on the process's own signal disposition and descriptors, made
    // before any other thread exists.
    unsafe {
        // A closed pipe (`xprof ... | head`) must be an EPIPE write error (which `out` ignores),
        // not a silent death by SIGPIPE.
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        // A descriptor 0-2 the parent closed must not be taken by the next file we open, or
        // what we print would be written into that file (SQLite guards its own files against
        // this; the index's temporary file and the result files are not).
        let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        });
        if libc::poll(fds.as_mut_ptr(), 3, 0) >= 0 {
            for p in fds {
                if p.revents & libc::POLLNVAL != 0 {
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                    if null >= 0 && null != p.fd {
                        libc::dup2(null, p.fd);
                        libc::close(null);
                    }
                }
            }
        }
    }
}

fn run(argv: Vec<String>) -> i32 {
    // A panic is an internal error reported as one JSON object, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let loc = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        PANIC_MSG.with(|p| *p.borrow_mut() = Some(format!("{msg}{loc}")));
    }));
    let code = match catch_unwind(AssertUnwindSafe(|| xprof::run(argv))) {
        Ok(code) => code,
        Err(_) => {
            let msg = PANIC_MSG
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "unknown panic".into());
            xprof::output::print_error(
                None,
                &ToolError::internal(format!("xprof panicked: {msg}")).with_hint(
                    "this is a bug; please report it with the command that triggered it",
                ),
            )
        }
    };
    i32::from(u8::try_from(code).unwrap_or(1))
}
