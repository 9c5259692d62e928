use serde_json::{Map, Value, json};
use xprof_capture::HostFile;
use xprof_memory::{modules, peak, viewer};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_memory_viewer::{list_modules, memory_error, memory_space, no_modules};
use crate::common::{session, with_capture};

pub struct GetPeakAllocations;
register_tool!(GetPeakAllocations);

impl Tool for GetPeakAllocations {
    fn name(&self) -> &'static str {
        "get_peak_allocations"
    }
    fn summary(&self) -> &'static str {
        "Every HLO module's device-memory total and the buffers live at its peak, largest first"
    }
    fn doc(&self) -> &'static str {
        "XProf's own CLI tool: for each HLO module of the capture, its buffer assignment's total \
         (`total_hbm_mib`, XProf's totalBufferAllocationMib) and the buffers live at its peak \
         (the memory viewer's maxHeap), largest first. With aggregation (default), buffers \
         named like `copy.1`, `copy.2` of one size become `copy.* (N occurrences of size S \
         MiB)` and buffers under --min_size_mib are summed into `Others`. Modules are ranked by \
         total; --limit 0 returns all. Exact byte counts stand beside every MiB figure."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .integer_min(
                "limit",
                "Modules to return, largest first; 0 = all.",
                Some(10),
                0,
            )
            .number(
                "min_size_mib",
                "Buffers under this size (MiB) are summed into `Others` when aggregating.",
                Some(1.0),
            )
            .boolean(
                "aggregate_instructions",
                "Aggregate numbered names of one size (`copy.*`) and small buffers (`Others`).",
                true,
            )
            .string_default(
                "memory_space",
                "Memory color: 0 = HBM / default device memory, 1 = TPU VMEM, ...",
                "0",
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, summary{total_modules, top_modules[{module_name, total_hbm_mib, \
         total_hbm_bytes}]}, modules[{module_name, total_hbm_mib, total_hbm_bytes, peak_heap_mib, \
         peak_heap_bytes, top_buffers[{instruction, size_mib, size_bytes, count}]}], memory_space} \
         (modules whose buffer assignment does not simulate are skipped with a capture warning)"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Peak allocations of every module of the shared JAX training capture",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train"}),
            )
            .expect(&["summary", "modules"]),
            Example::new(
                "Top module of the TPU v6e capture, no aggregation",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "limit": 1,
                       "aggregate_instructions": false}),
            )
            .expect(&["modules"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 10)?;
        let min_size_mib = call.f64_or("min_size_mib", 1.0)?;
        if !(min_size_mib.is_finite() && min_size_mib >= 0.0) {
            return Err(ToolError::invalid(format!(
                "argument `min_size_mib` must be a size in MiB >= 0, got {min_size_mib}"
            ))
            .with_hint("pass --min_size_mib 1.0 (or 0 to list every buffer)"));
        }
        let aggregate = call.bool_or("aggregate_instructions", true)?;
        let color = memory_space(call)?;
        let s = session(call)?;
        let used: Vec<&HostFile> = s.hosts.iter().collect();
        let mods = list_modules(call, &s)?;
        if mods.is_empty() {
            return Ok(no_modules(&s, &used));
        }
        let opt = peak::Options {
            min_size_mib,
            aggregate,
        };
        let mut warnings = Vec::new();
        let mut all = Vec::new();
        for (entry, proto) in modules::load_all(&mods).map_err(memory_error)? {
            // One inconsistent module must not hide the others: skip it with a warning.
            match viewer::preprocess(&proto, color) {
                Ok(r) => all.push(peak::module_peak(&entry.name, &r, opt)),
                Err(e) => warnings.push(format!("{}: {e}", entry.name)),
            }
        }
        let total = all.len();
        let ranked = peak::rank(all, limit);
        let mut body = Map::new();
        body.insert(
            "summary".into(),
            json!({
                "total_modules": total,
                "top_modules": ranked.iter().map(|m| json!({
                    "module_name": m.module_name,
                    "total_hbm_mib": m.total_bytes as f64 / (1u64 << 20) as f64,
                    "total_hbm_bytes": m.total_bytes,
                })).collect::<Vec<_>>(),
            }),
        );
        body.insert(
            "modules".into(),
            Value::Array(ranked.iter().map(peak::ModulePeak::to_json).collect()),
        );
        body.insert("memory_space".into(), json!(color));
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
