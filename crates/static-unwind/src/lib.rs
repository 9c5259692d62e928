//! Called from a build script (`xprof_static_unwind::link()`): on `*-linux-gnu`, link the GNU
//! unwinder (`libgcc_eh.a`) into the artifact instead of loading `libgcc_s.so.1` at run time.
//!
//! Why: Rust's standard library needs libgcc's unwinder for panics, and on glibc targets links
//! the shared `libgcc_s`. Loading it costs every process an extra object to map and relocate,
//! and its constructor (`__cpu_indicator_init`) runs about ten `cpuid` instructions, each of
//! which traps to the hypervisor on a virtual machine. Measured on the 2-core benchmark VM: a
//! Rust "hello world" starts 0.92 → 0.80 ms (median of 600 interleaved runs) without it; a C
//! program gains the same 0.1 ms from not linking it. An `xprof` tool call is a cold process
//! that loads the host and one plugin, so it pays this twice over nothing.
//!
//! How: the static archive is named before the standard library's `-lgcc_s` on the link line
//! (a package's own native libraries precede those of its dependencies), so it resolves the
//! `_Unwind_*` symbols first and the linker's `--as-needed` drops `libgcc_s`. Each artifact
//! then has a private copy of the unwinder; that is sound because no unwind crosses an
//! artifact boundary (the plugin ABI catches every panic on the plugin's side).
//!
//! Where the archive cannot be found (another C compiler, a musl or cross build, static
//! linking already) nothing changes: the artifact loads `libgcc_s` as before.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Emit the cargo directives that link `libgcc_eh.a`, when the build is a native
/// `linux-gnu` one and the C compiler knows where the archive is. Call from `build.rs`.
pub fn link() {
    println!("cargo:rerun-if-env-changed=XPROF_SHARED_LIBGCC");
    // An escape hatch for a toolchain where the static unwinder misbehaves.
    if env::var_os("XPROF_SHARED_LIBGCC").is_some() {
        return;
    }
    let var = |k: &str| env::var(k).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    let gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let crt_static = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    if !(native && gnu) || crt_static {
        return;
    }
    if let Some(dir) = archive().as_deref().and_then(|a| a.parent()) {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static=gcc_eh");
    }
}

/// `libgcc_eh.a` of the C compiler rustc links with (`cc` unless `CC` says otherwise), if it
/// has one. Tests use it to know whether [`link`] took effect.
pub fn archive() -> Option<PathBuf> {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    // Asked for a file it does not have, the compiler echoes the bare name back.
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
