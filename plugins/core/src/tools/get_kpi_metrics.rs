use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{op_stats, session, with_capture};

pub struct GetKpiMetrics;

/// Peak bytes in use over the first host's allocators; `None` without allocator events.
fn peak_memory(call: &mut Call, s: &xprof_capture::Session) -> Option<i64> {
    let host = crate::common::selected_hosts(call, s)
        .ok()?
        .first()
        .copied()?;
    let space = xprof_memory::open_xspace(&host.path, xprof_memory::profile::wanted_plane).ok()?;
    let p = xprof_memory::profile::build(&space);
    p.allocators
        .values()
        .map(|a| a.summary.peak_stats.peak_bytes_in_use)
        .max()
        .filter(|_| p.num_events > 0)
}
register_tool!(GetKpiMetrics);

impl Tool for GetKpiMetrics {
    fn name(&self) -> &'static str {
        "get_kpi_metrics"
    }
    fn summary(&self) -> &'static str {
        "Headline KPIs: step time, duty cycle, MXU and roofline utilization, device"
    }
    fn doc(&self) -> &'static str {
        "The few numbers to look at first, taken from the overview page: average step time, \
         device duty cycle, MXU utilization, roofline utilization and the device. Placeholders \
         (XProf's 0 for what it cannot measure) are null with a `_reason`."
    }
    fn params(&self) -> Params {
        Params::new().capture().host()
    }
    fn output(&self) -> &'static str {
        "{capture, run, step_time_ms, duty_cycle_percent, mxu_utilization_percent, roofline_utilization, device, note}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "KPIs of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&[
                "step_time_ms",
                "duty_cycle_percent",
                "roofline_utilization",
                "device",
            ]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        // Read before the op statistics, whose model a one-shot call keeps to exit: reading
        // the file again while it is mapped counted its pages twice in the peak RSS (244 vs
        // 195 MB on a 56 MB capture).
        let peak = peak_memory(call, &s);
        let (st, used, warnings) = op_stats(call, &s)?;
        let ov = xprof_opstats::views::overview(&st);
        let ps = ov["performance_summary"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut body = Map::new();
        let mut copy = |from: &str, to: &str| {
            for suffix in ["", "_reason", "_measured"] {
                if let Some(v) = ps.get(&format!("{from}{suffix}")) {
                    body.insert(format!("{to}{suffix}"), v.clone());
                }
            }
        };
        copy("steptime_ms_average", "step_time_ms");
        copy("device_duty_cycle_percent", "duty_cycle_percent");
        copy("mxu_utilization_percent", "mxu_utilization_percent");
        copy(
            "flop_rate_utilization_relative_to_roofline",
            "roofline_utilization",
        );
        body.insert(
            "device".into(),
            json!({
                "device_type": ov["run_environment"]["device_type"],
                "device_core_count": ov["run_environment"]["device_core_count"],
            }),
        );
        body.insert("steps_source".into(), ov["steps"]["steps_source"].clone());
        // Peak memory in use (allocator events of the first host), as the seed reported it.
        match peak {
            Some(bytes) => {
                body.insert(
                    "peak_hbm_gib".into(),
                    json!((bytes as f64 / (1u64 << 30) as f64 * 100.0).round() / 100.0),
                );
                body.insert("peak_memory_bytes".into(), json!(bytes));
            }
            None => {
                body.insert("peak_hbm_gib".into(), Value::Null);
                body.insert(
                    "peak_hbm_gib_reason".into(),
                    Value::from(
                        "no allocator events (MemoryAllocation/MemoryDeallocation) on /host:CPU",
                    ),
                );
            }
        }
        body.insert(
            "note".into(),
            Value::from(
                "roofline_utilization is the program-level cost-model scalar; see get_roofline_model caveats before acting on it.",
            ),
        );
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
