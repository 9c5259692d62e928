use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::views_error;
use crate::common::{selected_hosts, session, with_capture};

pub struct CheckHostBoundness;
register_tool!(CheckHostBoundness);

impl Tool for CheckHostBoundness {
    fn name(&self) -> &'static str {
        "check_host_boundness"
    }
    fn summary(&self) -> &'static str {
        "Verdict: is the workload host-bound? With the numbers behind it (XProf CLI check_host_boundness)"
    }
    fn doc(&self) -> &'static str {
        "The host-boundness gate of XProf's own CLI: HOST_BOUND when the device is idle more than \
         10 % of the time, its MXU idle more than 70 % (100 − measured FLOP rate as % of peak), \
         HBM bandwidth below 30 % of peak and ICI below 30 % (from counter samples when the \
         capture has them). Any condition that fails gives NOT_HOST_BOUND; conditions that \
         cannot be measured (CPU captures, no counters) give UNKNOWN rather than a guess. \
         Without step markers: INSUFFICIENT_DATA. `reasons` cite every number checked."
    }
    fn params(&self) -> Params {
        Params::new().capture().host().string(
            "func_name",
            "Accepted for XProf's agent CLI, which keeps it only for API compatibility; unused.",
        )
    }
    fn output(&self) -> &'static str {
        "{capture, run, status: HOST_BOUND|NOT_HOST_BOUND|UNKNOWN|INSUFFICIENT_DATA, metrics: {tpu_duty_cycle_percent, idle_time_ratio_percent, idle_to_active_compute_ratio, equivalent_idle_chips, mxu_idleness_percent, hbm_bandwidth_utilization_percent, ici_read_utilization_percent, ici_write_utilization_percent, pure_idle_time_ms, total_duration_ms, number_of_steps, core_count}, reasons, recommendations}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "A CPU training capture with steps",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train"}),
            )
            .expect(&["status", "metrics", "reasons"]),
            Example::new(
                "No step markers: INSUFFICIENT_DATA",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["status", "reasons"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let used = selected_hosts(call, &s)?;
        for h in &used {
            call.read_file(&h.path);
        }
        for f in &s.hlo_protos {
            call.read_file(f);
        }
        let list: Vec<(String, std::path::PathBuf)> = used
            .iter()
            .map(|h| (h.name.clone(), h.path.clone()))
            .collect();
        // The engine's model and the TPU planes' counter samples (for ICI), read side by side.
        let (run, raw) =
            xprof_views::load::load_with_raw(&list, &s.hlo_protos, xprof_views::load::tpu_planes)
                .map_err(views_error)?;
        let (st, ip) = run
            .op_stats_and_input_pipeline()
            .ok_or_else(|| ToolError::internal("no host selected"))?;
        let ici = ici_percent(&xprof_views::counters::utilization_viewer(&raw));
        let body = match xprof_views::suggestions::host_boundness(&st, &ip, ici) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Ok(with_capture(&s, &used, &run.warnings, body).into())
    }
}

/// Σ achieved / Σ peak of the utilization viewer's ICI rows, as (read %, write %).
fn ici_percent(t: &xprof_views::table::Table) -> Option<(f64, f64)> {
    let sum = |name: &str| {
        let rows: Vec<_> = t
            .records
            .iter()
            .filter(|r| r["name"] == json!(name))
            .collect();
        if rows.is_empty() {
            return None;
        }
        let a: f64 = rows.iter().filter_map(|r| r["achieved"].as_f64()).sum();
        let p: f64 = rows.iter().filter_map(|r| r["peak"].as_f64()).sum();
        (p > 0.0).then(|| 100.0 * a / p)
    };
    Some((sum("ICI (Read)")?, sum("ICI (Write)")?))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    fn verdict(path: std::path::PathBuf) -> Value {
        let args = json!({"path": path.display().to_string()});
        invoke_json(
            env!("CARGO_CRATE_NAME"),
            "check_host_boundness",
            &args.to_string(),
            "{}",
        )
        .unwrap()["result"]
            .clone()
    }

    /// Issue 28, class 10: on a 16-GPU TensorFlow capture whose kernels no XLA op groups, the
    /// idle metrics' reasons said "CPU-only capture". They name the missing op timeline now,
    /// and a real CPU capture still says CPU-only.
    #[test]
    fn a_gpu_capture_without_an_op_timeline_is_not_called_cpu_only() {
        let Some(corpus) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let gpu = verdict(corpus.join("fixtures/gpu-real/tf-gpu-multiworker-demo"));
        let m = &gpu["metrics"];
        assert_eq!(m["core_count"], 16, "{gpu}");
        for k in [
            "idle_time_ratio_percent",
            "equivalent_idle_chips",
            "pure_idle_time_ms",
        ] {
            assert!(m[k].is_null(), "{k}: {gpu}");
            let why = m[format!("{k}_reason")].as_str().unwrap();
            assert!(!why.contains("CPU-only"), "{k}: {why}");
            assert!(why.contains("no op timeline"), "{k}: {why}");
        }
        let cpu = verdict(corpus.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_train"));
        let why = cpu["metrics"]["idle_time_ratio_percent_reason"]
            .as_str()
            .unwrap();
        assert!(why.contains("CPU-only"), "{why}");
    }
}
