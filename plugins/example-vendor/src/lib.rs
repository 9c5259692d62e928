//! The template a hardware vendor copies to ship its own kernel analyzer beside xprof's.
//!
//! A plugin is a `cdylib` named `libxprof_plugin_<name>.so` that:
//! 1. depends on `xprof-plugin-api` (the only crate it shares with the host) and `abi_stable`;
//! 2. implements [`xprof_plugin_api::Tool`] once per tool, one file per tool under `tools/`,
//!    each followed by `register_tool!`;
//! 3. calls `export_plugin!` once, here.
//!
//! The host then lists its tools in `xprof`, generates `xprof <tool> --help` and flags from the
//! parameter schema, and serves them over MCP — nothing to register anywhere else. See
//! `docs/PLUGINS.md`.

mod tools;

xprof_plugin_api::export_plugin!(name: "example-vendor", capabilities: ["dump"]);

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
