//! Link settings that make a cold `xprof` process start faster, for the build scripts of the
//! host and the first-party plugins: `fn main() { xprof_link::for_cold_start(); }`.
//!
//! An `xprof` tool call is a cold process that loads the host and one plugin, and on a small
//! capture its fixed start-up is most of its time. Three settings of the link cut that start-up;
//! each applies only where the toolchain supports it, and otherwise the artifact links as
//! before. All are for native `*-linux-gnu` builds (the C compiler is asked about the target,
//! so a cross build is left alone). `XPROF_PLAIN_LINK` set at build time turns them off.
//!
//! **The unwinder linked statically** ([`static_unwinder`]). Rust's standard library needs
//! libgcc's unwinder for panics, and on glibc links the shared `libgcc_s`. Loading it costs an
//! extra object to map and relocate, and its constructor (`__cpu_indicator_init`) runs about
//! ten `cpuid` instructions, each of which traps to the hypervisor on a virtual machine (6 us
//! apiece on the 2-core benchmark VM). Measured there: a Rust "hello world" starts 0.92 → 0.80
//! ms (median of 600 interleaved runs) without it. The static archive is named before the
//! standard library's `-lgcc_s` on the link line (a package's own native libraries precede
//! those of its dependencies), so it resolves the `_Unwind_*` symbols first and the linker's
//! `--as-needed` drops `libgcc_s`. Each artifact then has a private copy of the unwinder; that
//! is sound because no unwind crosses an artifact boundary (the plugin ABI catches every panic
//! on the plugin's side).
//!
//! **Packed relative relocations** ([`packed_relocations`], `-z pack-relative-relocs`). The
//! core plugin has ~10 700 relative relocations; as RELA records they are 259 KB that the
//! dynamic loader reads page by page on every `dlopen`. Packed (DT_RELR) they take 4 KB.
//! Measured: seed `aggregate_xplane_events` 2.97 → 2.81 and 2.76 → 2.57 ms (medians of two
//! 300-run interleaved A/Bs, same output). It needs glibc 2.36 at run time, so it is used only
//! when a probe program linked with it runs on the build machine.
//!
//! **Hot code together** ([`ORDER_FILE`], `--symbol-ordering-file`). A small call executes
//! about a megabyte of the host's 5.5 MB of code and as much of the core plugin's 4.4 MB, in
//! functions spread over both, and each first touch of a 64 KB window of code is a page fault
//! that maps its 16 pages. A package's `symbol-order.txt`, written by `cargo xtask
//! symbol-order` from what the tools' documented examples execute under valgrind, lists the
//! functions that ran, grouped by the tools that ran them (shared code first, then each
//! tool's own in one stretch), and the linker places them in that order at the start of the
//! text. The functions those 91 runs executed span 21 windows of the host instead of 65, 38 of
//! the core plugin instead of 66 (hlo 25 instead of 56, kernel 23 instead of 41). Measured (60
//! interleaved runs of each build, copied alike): seed `aggregate_xplane_events` 2.78 → 2.69
//! ms, `get_hosts` 2.08 → 1.90 ms, `get_overview` 3.01 → 2.78 ms, a cache hit 2.06 → 1.90 ms,
//! 20–35 fewer page faults (a list made from the aggregate alone took that call 2.81 → 2.44
//! ms). Only LLD takes the option (rustc links with it by default on x86_64 Linux since 1.90),
//! so it is used when the same rustc, with the build's flags, links a probe program with it. A
//! name the build does not define (the list is from an older build, another toolchain, another
//! profile) is skipped silently: a stale list costs speed, never correctness, and `cargo xtask
//! bench` reports how much of each list the build defines.

use std::collections::BTreeMap;
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Emit the cargo directives for the three settings, where they apply. Call from `build.rs`.
pub fn for_cold_start() {
    println!("cargo:rerun-if-env-changed=XPROF_PLAIN_LINK");
    println!("cargo:rerun-if-env-changed=CC");
    if env::var_os("XPROF_PLAIN_LINK").is_some() || !native_gnu_build() {
        return;
    }
    if let Some(dir) = static_unwinder().as_deref().and_then(Path::parent) {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static=gcc_eh");
    }
    if packed_relocations() {
        println!("cargo:rustc-link-arg=-Wl,-z,pack-relative-relocs");
    }
    let order = env::var_os("CARGO_MANIFEST_DIR").map(|d| PathBuf::from(d).join(ORDER_FILE));
    if let Some(order) = order.filter(|o| o.is_file()) {
        println!("cargo:rerun-if-changed={}", order.display());
        if symbol_ordering() {
            println!(
                "cargo:rustc-link-arg=-Wl,--symbol-ordering-file={}",
                order.display()
            );
            println!("cargo:rustc-link-arg=-Wl,--no-warn-symbol-ordering");
        }
    }
}

/// A package's list of hot functions, beside its `Cargo.toml`: one symbol name a line, `#`
/// starts a comment (LLD's format).
pub const ORDER_FILE: &str = "symbol-order.txt";

/// The symbol names an [`ORDER_FILE`]'s text lists, in order.
pub fn listed_symbols(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// The functions `artifact` defines, by symbol name, with their addresses: what binutils'
/// `nm` lists. `None` when `nm` cannot be run or fails. (`cargo xtask symbol-order` writes the
/// lists from these; the tests check the layout with them.)
pub fn defined_functions(artifact: &Path) -> Option<BTreeMap<String, u64>> {
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(artifact)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| text_symbols(&String::from_utf8_lossy(&out.stdout)))
}

/// The text symbols of `nm` output (`<address> <type> <name>`, types t, T, w, W).
fn text_symbols(nm: &str) -> BTreeMap<String, u64> {
    nm.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (addr, kind, name) = (it.next()?, it.next()?, it.next()?);
            matches!(kind, "t" | "T" | "w" | "W")
                .then(|| Some((name.to_string(), u64::from_str_radix(addr, 16).ok()?)))
                .flatten()
        })
        .collect()
}

/// Does rustc's linker take a symbol ordering file? Asked of the linker itself: the rustc that
/// runs the build (`RUSTC`, else `rustc`) links an empty program for the build's target with
/// the build's flags and `--symbol-ordering-file`. LLD links it; GNU ld fails on the option.
pub fn symbol_ordering() -> bool {
    let Ok(dir) = probe_dir() else {
        return false;
    };
    let (src, order, exe) = (
        dir.join("probe.rs"),
        dir.join("order.txt"),
        dir.join("probe"),
    );
    if std::fs::write(&src, "fn main() {}\n").is_err()
        || std::fs::write(&order, "# no symbols\nmain\n").is_err()
    {
        return false;
    }
    let mut rustc = Command::new(env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    rustc.arg("--crate-type=bin").arg("-o").arg(&exe).arg(&src);
    if let Ok(target) = env::var("TARGET") {
        rustc.args(["--target", &target]);
    }
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        rustc.arg(format!("-Clinker={linker}"));
    }
    // The build's own flags (`RUSTFLAGS`, `build.rustflags`): a `-C linker` among them is the
    // linker to ask.
    if let Ok(flags) = env::var("CARGO_ENCODED_RUSTFLAGS") {
        rustc.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    }
    rustc
        .arg(format!(
            "-Clink-arg=-Wl,--symbol-ordering-file={}",
            order.display()
        ))
        .arg("-Clink-arg=-Wl,--no-warn-symbol-ordering");
    let linked = rustc.output().is_ok_and(|o| o.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    linked
}

/// Is this build script building for `*-linux-gnu` on the machine it runs on, without
/// `crt-static`?
fn native_gnu_build() -> bool {
    let var = |k: &str| env::var(k).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    let gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let crt_static = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    native && gnu && !crt_static
}

/// The C compiler rustc links with: `cc` unless `CC` says otherwise.
fn cc() -> Command {
    Command::new(env::var("CC").unwrap_or_else(|_| "cc".into()))
}

/// `libgcc_eh.a` of the C compiler, if it has one. Tests use it to know whether
/// [`for_cold_start`] linked the unwinder statically.
pub fn static_unwinder() -> Option<PathBuf> {
    let out = cc().arg("-print-file-name=libgcc_eh.a").output().ok()?;
    // Asked for a file it does not have, the compiler echoes the bare name back.
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}

/// Does a program linked with `-z pack-relative-relocs` link and run here? (The linker needs
/// binutils 2.38; the program needs glibc 2.36, and an older one refuses to start it.) Tests
/// use it to know whether [`for_cold_start`] packed the relocations.
pub fn packed_relocations() -> bool {
    let Ok(dir) = probe_dir() else {
        return false;
    };
    let (src, exe) = (dir.join("probe.c"), dir.join("probe"));
    // A relative relocation to pack: a pointer in initialised data.
    let code = "static int x; int *p = &x; int main(void) { return p != &x; }\n";
    if std::fs::write(&src, code).is_err() {
        return false;
    }
    let linked = cc()
        .args([
            "-fPIE",
            "-pie",
            "-Wl,-z,pack-relative-relocs,--fatal-warnings",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .output()
        .is_ok_and(|o| o.status.success());
    let ran = linked && Command::new(&exe).status().is_ok_and(|s| s.success());
    let _ = std::fs::remove_dir_all(&dir);
    ran
}

/// A fresh directory for the probe: under the build script's `OUT_DIR` when there is one.
fn probe_dir() -> std::io::Result<PathBuf> {
    let base = env::var_os("OUT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(env::temp_dir);
    // One directory per probe: tests run probes on several threads of one process.
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = base.join(format!("xprof-link-probe-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nm_text_symbols_and_order_file_names() {
        let nm = "0000000000001000 T a\n0000000000003000 t b\n0000000000002000 W c\n\
                  0000000000004000 D data\n                 U undefined\n0000000000000800 w d\n";
        let symbols = text_symbols(nm);
        let got: Vec<(&str, u64)> = symbols.iter().map(|(n, a)| (n.as_str(), *a)).collect();
        assert_eq!(
            got,
            [("a", 0x1000), ("b", 0x3000), ("c", 0x2000), ("d", 0x800)]
        );
        let list = "# made by a tool\n\n  main  \n_ZN1a\n# again\n_RNv1b\n";
        assert_eq!(
            listed_symbols(list).collect::<Vec<_>>(),
            ["main", "_ZN1a", "_RNv1b"]
        );
    }
}
