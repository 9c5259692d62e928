//! `report`: what a person looks at, written to a file: a self-contained HTML report with
//! charts (`report`) and the whole capture as a Chrome trace-event file for Perfetto
//! (`export_trace`). A thin shell: each tool is one file under `tools/`, the work lives in the
//! library crates (`xprof-report`, `xprof-trace`) and the views they draw.

mod common;
mod tools;

xprof_plugin_api::export_plugin!(name: "report", capabilities: ["xspace"]);

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
