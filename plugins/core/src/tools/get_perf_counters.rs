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
            .string("kernel_filter", "Only rows whose Kernel matches (case-insensitive regex, else substring).")
            .string("counter_filter", "Only rows whose Counter or Description matches (same).")
            .string("set_filter", "Only rows whose counter Set matches (same).")
            .integer("chip_id", "Only this chip.", None)
            .boolean(
                "non_zero_only",
                "Drop rows whose value is 0 or all ones (XProf's agent CLI drops them by default; XProf's table keeps them).",
                false,
            )
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
        let mut t = t;
        let unfiltered = t.records.len();
        let filters = RowFilters::from_call(call)?;
        t.records.retain(|r| filters.keep(r));
        if filters.active() {
            body.insert("unfiltered_records".into(), json!(unfiltered));
            if t.records.is_empty() && unfiltered > 0 {
                body.insert(
                    "filter_reason".into(),
                    json!("no counter row matched the filters"),
                );
            }
        }
        body.insert("table".into(), t.to_json(limit));
        if unfiltered == 0 {
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

/// XProf's agent-CLI row filters: a pattern is a case-insensitive regex, or a substring when
/// it is not one.
struct RowFilters {
    kernel: Option<String>,
    counter: Option<String>,
    set: Option<String>,
    chip: Option<i64>,
    non_zero: bool,
}

fn matches(pattern: &Option<String>, text: &str) -> bool {
    let Some(p) = pattern else { return true };
    match regex::RegexBuilder::new(p).case_insensitive(true).build() {
        Ok(re) => re.is_match(text),
        Err(_) => text.to_lowercase().contains(&p.to_lowercase()),
    }
}

impl RowFilters {
    fn from_call(call: &Call) -> Result<Self, ToolError> {
        Ok(RowFilters {
            kernel: call.opt_nonempty("kernel_filter")?,
            counter: call.opt_nonempty("counter_filter")?,
            set: call.opt_nonempty("set_filter")?,
            chip: call.opt_f64("chip_id")?.map(|c| c as i64),
            non_zero: call.bool_or("non_zero_only", false)?,
        })
    }

    fn active(&self) -> bool {
        self.kernel.is_some()
            || self.counter.is_some()
            || self.set.is_some()
            || self.chip.is_some()
            || self.non_zero
    }

    fn keep(&self, r: &Map<String, serde_json::Value>) -> bool {
        let text = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("");
        if self.non_zero {
            let v = r.get("Value").and_then(|v| v.as_u64());
            if v == Some(0) || v == Some(u64::MAX) {
                return false;
            }
        }
        if let Some(c) = self.chip
            && r.get("Chip").and_then(|v| v.as_i64()) != Some(c)
        {
            return false;
        }
        matches(&self.kernel, text("Kernel"))
            && (self.counter.is_none()
                || matches(&self.counter, text("Counter"))
                || matches(&self.counter, text("Description")))
            && matches(&self.set, text("Set"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::invoke_json;
    use xprof_testkit::XSpaceBuilder;

    /// Chip 7, one sample of three counters: 0, 5 and all ones.
    fn counters(dir: &std::path::Path) -> std::path::PathBuf {
        let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
            p.stat("global_chip_id", 7i64)
                .stat("device_type_string", "TPU v7x")
                .line_with_id(5, "sample 5", |l| {
                    [
                        ("MXU_BUSY", 0u64, "mxu"),
                        ("HBM_RD", 5, "hbm"),
                        ("ICI_WR", u64::MAX, "ici"),
                    ]
                    .into_iter()
                    .fold(l, |l, (n, v, set)| {
                        l.event(n, 0, 1)
                            .stat("counter_value", v)
                            .stat("performance_counter_sets", set)
                    })
                })
        });
        let file = b.write_run(dir, "run", "host0").unwrap();
        file.parent().unwrap().to_path_buf()
    }

    fn rows(run: &std::path::Path, extra: Value) -> Value {
        let mut args = json!({"path": run.display().to_string()});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        invoke_json(
            env!("CARGO_CRATE_NAME"),
            "get_perf_counters",
            &args.to_string(),
            "{}",
        )
        .unwrap()["result"]
            .clone()
    }

    fn counters_of(v: &Value) -> Vec<String> {
        v["table"]["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["Counter"].as_str().unwrap().to_string())
            .collect()
    }

    /// XProf's agent-CLI filters: zero and all-ones values dropped on request, patterns as
    /// case-insensitive regexes, the chip by id.
    #[test]
    fn filters_keep_what_xprofs_agent_cli_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let run = counters(dir.path());
        assert_eq!(counters_of(&rows(&run, json!({}))).len(), 3);
        assert_eq!(
            counters_of(&rows(&run, json!({"non_zero_only": true}))),
            ["hbm_rd"]
        );
        assert_eq!(
            counters_of(&rows(&run, json!({"counter_filter": "^(HBM|ici)"}))),
            ["hbm_rd", "ici_wr"]
        );
        assert_eq!(
            counters_of(&rows(&run, json!({"set_filter": "MXU"}))),
            ["mxu_busy"]
        );
        assert_eq!(counters_of(&rows(&run, json!({"chip_id": 7}))).len(), 3);
        let none = rows(&run, json!({"chip_id": 1, "kernel_filter": "sample"}));
        assert_eq!(counters_of(&none).len(), 0);
        assert_eq!(none["unfiltered_records"], json!(3));
        assert!(none["filter_reason"].is_string());
        assert!(
            none.get("status").is_none(),
            "a filter is not no_data: {none}"
        );
    }
}
