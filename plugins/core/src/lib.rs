//! `core`: XProf's views computed from raw XSpace. A thin shell: each tool is one file under
//! `tools/`, the analysis lives in the library crates (`xprof-capture`, `xprof-xspace`,
//! `xprof-opstats`).

mod common;
mod op_filter;
mod tools;

#[cfg(test)]
mod mutants;

xprof_plugin_api::export_plugin!(name: "core", capabilities: ["xspace"]);

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_sits_where_mimalloc_h_puts_it() {
        use libmimalloc_sys::{mi_option_eager_commit_delay, mi_option_use_numa_nodes};
        assert_eq!(
            super::MI_OPTION_PURGE_DELAY,
            mi_option_eager_commit_delay + 1
        );
        assert_eq!(super::MI_OPTION_PURGE_DELAY, mi_option_use_numa_nodes - 1);
    }

    #[test]
    fn documented_examples_run() {
        let ran = xprof_plugin_api::sdk::testing::run_examples(
            env!("CARGO_CRATE_NAME"),
            env!("CARGO_MANIFEST_DIR"),
        );
        assert!(ran > 0);
    }
}

xprof_plugin_support::capture_plugin_allocator!();

/// A one-shot CLI call never hands freed memory back to the kernel (`common::session` calls
/// this for CLI calls). The process exits in a moment anyway, and memory handed back and
/// touched again costs a fresh page fault (and, with huge pages, splits them): on jax-large
/// `get_overview` mimalloc's default (purge 10 ms after a free) made 4.1 k page faults instead
/// of 1.8 k. A long-lived MCP server keeps the default, so its memory goes back after a large
/// call.
fn keep_freed_memory() {
    // SAFETY: sets one of mimalloc's option values; -1 means "never purge".
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

/// mimalloc v2's `mi_option_purge_delay` (mimalloc.h: between `eager_commit_delay` and
/// `use_numa_nodes`, which libmimalloc-sys names; it does not name this one).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
