//! `kernel` plugin (being written): a thin shell over its library crate; one tool per file under `tools/`.

mod tools;

xprof_plugin_api::export_plugin!(name: "kernel", capabilities: []);
