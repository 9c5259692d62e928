use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::{load_raw, no_data_with};
use crate::common::{session, with_capture};

pub struct GetPerfCounters;
register_tool!(GetPerfCounters);

const COUNTER_FLAGS: &[&str] = &[
    "TPU v7+: enable hardware counter sampling at capture time; on v5p/v6e counter sampling is silently unavailable",
    "GPU: enable CUPTI performance-counter collection",
];

impl Tool for GetPerfCounters {
    fn name(&self) -> &'static str {
        "get_perf_counters"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["perf_counters"]
    }
    fn summary(&self) -> &'static str {
        "Raw hardware performance-counter samples per chip and kernel (XProf perf_counters)"
    }
    fn doc(&self) -> &'static str {
        "XProf's perf_counters: every event with a `counter_value` stat on the TPU/GPU planes \
         that name their chip (`global_chip_id`, else `device_id`), over all hosts (or --host): \
         host, chip, kernel (line), sample (line id), counter (lower-cased event name), value \
         (exact integer; `Value_hex` as XProf formats it), description and counter set. Measured \
         hardware counters are the ground truth beside the roofline's cost-model estimates. \
         Captures without counter samples (TPU v5p/v6e: sampling is silently unavailable) \
         answer `no_data`."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Maximum rows (0 = all).", Some(100), 0)
    }
    fn output(&self) -> &'static str {
        "{capture, run, device_planes, planes_with_chip_id, counter_events, table: {columns, total_records, truncated, records: [{Host, Chip, Kernel, Sample, Counter, Value, Value_hex, Description, Set}]}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "TPU v6e has no counter samples (no_data)",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["status", "table"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 100)?;
        let s = session(call)?;
        let (raw, used) = load_raw(call, &s, xprof_views::load::device_planes)?;
        let (t, p) = xprof_views::counters::perf_counters_with_presence(&raw);
        let mut body = Map::new();
        body.insert("device_planes".into(), json!(p.device_planes));
        body.insert("planes_with_chip_id".into(), json!(p.planes_with_chip_id));
        body.insert("counter_events".into(), json!(p.counter_events));
        body.insert("table".into(), t.to_json(limit));
        if t.records.is_empty() {
            const EMPTY: &str = "EMPTY: no counter samples in this capture. On TPU v5p/v6e counter sampling is silently unavailable — this is expected, not a capture error. On v7+ enable counter sampling at capture time.";
            let reason = if p.device_planes == 0 {
                "no TPU/GPU plane: performance counters are sampled on accelerators only"
                    .to_string()
            } else if p.planes_with_chip_id == 0 {
                format!(
                    "no device plane has a `global_chip_id` or `device_id` stat, so no counters are read from it. {EMPTY}"
                )
            } else {
                format!("no `counter_value` stats on the device planes. {EMPTY}")
            };
            return Ok(no_data_with(&s, &used, &[], &reason, COUNTER_FLAGS, body));
        }
        body.insert(
            "note".into(),
            json!("Measured HW counters — ground truth vs the roofline's cost-model estimates."),
        );
        Ok(with_capture(&s, &used, &[], body).into())
    }
}
