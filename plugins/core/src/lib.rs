//! `core`: XProf's views computed from raw XSpace. A thin shell: each tool is one file under
//! `tools/`, the analysis lives in the library crates (`xprof-capture`, `xprof-xspace`,
//! `xprof-opstats`).

mod common;
mod tools;

xprof_plugin_api::export_plugin!(name: "core", capabilities: ["xspace"]);

#[cfg(test)]
mod tests {
    #[test]
    fn documented_examples_run() {
        let ran = xprof_plugin_api::sdk::testing::run_examples(
            env!("CARGO_CRATE_NAME"),
            env!("CARGO_MANIFEST_DIR"),
        );
        assert!(ran > 0);
    }
}

/// mimalloc instead of the system allocator. Converting a large capture allocates a few hundred
/// MB in large blocks; glibc hands each one out as fresh 4 KB pages, and faulting them in was a
/// third of `get_overview`'s CPU time on a 56 MB capture (80 k page faults). mimalloc reserves
/// aligned arenas and asks for transparent huge pages where the kernel offers them
/// (`madvise`), which brings that to ~1.5 k faults (0.6× the wall time). v2 rather than the
/// crate's default v3: lower peak RSS in the same measurement. `local_dynamic_tls` because
/// this library is loaded with dlopen, where the initial-exec TLS model may not fit.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Transparent huge pages wait until a call turns out not to be a small CLI one (see
/// `xprof_plugin_support::pages`): run when the library is loaded, before mimalloc reserves
/// its first arena.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static DEFER_HUGE_PAGES: extern "C" fn() = {
    extern "C" fn defer() {
        xprof_plugin_support::pages::defer_huge_pages();
    }
    defer
};
