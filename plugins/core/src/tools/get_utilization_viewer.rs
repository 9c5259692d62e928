use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::{load_raw, no_data_with};
use crate::common::{session, with_capture};

pub struct GetUtilizationViewer;
register_tool!(GetUtilizationViewer);

const FLAGS: &[&str] = &[
    "TPU v6e/v7x: enable hardware counter sampling at capture time (per-line counter samples with `counter_value`)",
];

impl Tool for GetUtilizationViewer {
    fn name(&self) -> &'static str {
        "get_utilization_viewer"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["utilization_viewer"]
    }
    fn summary(&self) -> &'static str {
        "TPU unit utilizations (MXU, VPU, XLU, scalar, vector loads/stores, ICI) from hardware counters (XProf utilization_viewer)"
    }
    fn doc(&self) -> &'static str {
        "XProf's utilization_viewer for TPU v6e (`TPU v6 Lite`) and v7x planes with a \
         `device_id` stat: per counter sample (line), achieved vs peak for each TensorCore unit \
         (scalar unit, vector ALUs, VPU, vector loads/stores, MXU busy and per-MXU/per-precision \
         cycles, matpush, XLU), HBM read/write bytes and ICI read/write bytes, derived from the \
         counters with XProf's formulas and counter ids, then the SparseCore issue slots (TEC, \
         vector, sequencer; node = die × 2 + SparseCore on v7x). `utilization_percent` = \
         achieved / peak. Captures without such counters answer `no_data`."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Maximum rows (0 = all).", Some(100), 0)
            .integer(
                "device",
                "Only this device id (XProf's agent CLI shows device 0 by default; we show all).",
                None,
            )
            .integer("node", "Only this node (same).", None)
    }
    fn output(&self) -> &'static str {
        "{capture, run, table: {columns, total_records, truncated, records: [{host, device, sample, node, name, achieved, peak, unit, utilization_percent}]}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "TPU v6e capture without counter samples (no_data)",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["status", "table"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 100)?;
        let device = call.opt_f64("device")?;
        let node = call.opt_f64("node")?;
        let s = session(call)?;
        let (raw, used) = load_raw(call, &s, xprof_views::load::device_planes)?;
        let mut t = xprof_views::counters::utilization_viewer(&raw);
        for r in &mut t.records {
            let a = r["achieved"].as_f64().unwrap_or(0.0);
            let p = r["peak"].as_f64().unwrap_or(0.0);
            let u = if p > 0.0 { Some(100.0 * a / p) } else { None };
            r.insert("utilization_percent".into(), json!(u));
        }
        let unfiltered = t.records.len();
        let is = |r: &Map<String, Value>, k: &str, want: Option<f64>| {
            want.is_none() || r.get(k).and_then(Value::as_f64) == want
        };
        t.records
            .retain(|r| is(r, "device", device) && is(r, "node", node));
        let mut body = Map::new();
        if device.is_some() || node.is_some() {
            body.insert("unfiltered_records".into(), json!(unfiltered));
        }
        body.insert("table".into(), t.to_json(limit));
        if unfiltered == 0 {
            return Ok(no_data_with(
                &s,
                &used,
                &[],
                "no TPU v6e/v7x plane with a `device_id` stat and counter samples (`counter_value` with TensorCore cycle counters)",
                FLAGS,
                body,
            ));
        }
        Ok(with_capture(&s, &used, &[], body).into())
    }
}
