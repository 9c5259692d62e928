//! Repository automation in Rust (rust-analyzer's xtask pattern): `cargo xtask <task>`.
//!
//! * `install [--prefix DIR]` — build release and install `xprof` plus its plugins.
//! * `test` — prepare what the tests need, then run every test (what `.ci/run` runs).
//! * `codegen [--check]` — regenerate the checked-in prost code from `proto/*.proto`.
//! * `bench [...]` — the benchmark suite (whole processes and in-process).
//! * `fuzz [--seconds N] [--target T]...` — mutation fuzzing of the parsers (module `fuzz`).

mod bench;
mod codegen;
mod fuzz;
mod install;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = match args.split_first() {
        Some((t, r)) => (t.as_str(), r),
        None => ("help", &[][..]),
    };
    let result = match task {
        "install" => install::run(rest),
        "test" => install::test(rest),
        "codegen" => codegen::run(rest),
        "bench" => bench::run(rest),
        "fuzz" => fuzz::run(rest),
        _ => {
            eprintln!("usage: cargo xtask <install|test|codegen|bench|fuzz> [args]");
            return if task == "help" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {task}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (xtask lives one level below it).
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent directory")
        .to_path_buf()
}

pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;
