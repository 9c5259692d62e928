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
    fn documented_examples_run() {
        let ran = xprof_plugin_api::sdk::testing::run_examples(
            env!("CARGO_CRATE_NAME"),
            env!("CARGO_MANIFEST_DIR"),
        );
        assert!(ran > 0);
    }
}

xprof_plugin_support::capture_plugin_allocator!();
