//! `xprof`: the thin binary over the host library.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;

use xprof_plugin_api::ToolError;

thread_local! {
    static PANIC_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn main() -> ExitCode {
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
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
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
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
