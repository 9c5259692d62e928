//! `kernel`: Pallas / Mosaic / LLO kernel analysis — TPU LLO dumps, Mosaic dumps, the MLIR
//! bytecode in HLO custom calls, and (from traces) kernel-profiling captures. A thin shell:
//! each tool is one file under `tools/`, the analysis lives in `xprof-llo`.

mod common;
mod tools;

xprof_plugin_api::export_plugin!(name: "kernel", capabilities: ["dump", "xspace"]);

#[cfg(test)]
mod tests;

#[cfg(test)]
mod mutants;
