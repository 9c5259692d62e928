use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};
use xprof_views::attribution::{
    AttributionOptions, device_time_attribution, host_executed_attribution,
};

use super::get_pod_viewer::{load_raw, no_data_with};
use crate::common::{DEVICE_TRACE_FLAGS, session, with_capture};

pub struct GetDeviceTimeAttribution;
register_tool!(GetDeviceTimeAttribution);

/// Device planes, and the host threads (for a CPU capture's XLA ops).
fn planes(name: &str) -> bool {
    name.starts_with("/device:") || name == "/host:CPU"
}

impl Tool for GetDeviceTimeAttribution {
    fn name(&self) -> &'static str {
        "get_device_time_attribution"
    }
    fn summary(&self) -> &'static str {
        "Wall-clock device busy time (interval union), per line, custom-call share, kernels by time"
    }
    fn doc(&self) -> &'static str {
        "XProf's agent-CLI device-time attribution (the summary of its get_kernel_stats), \
         natively: `total_device_duration_ns` is the disjoint-interval union of every device \
         kernel (TPU `XLA Ops`/`Pallas` lines, GPU streams), so concurrent work counts once; \
         `by_line_duration_ns` the union per line name; `custom_call_share_pct` the share of \
         custom calls and Pallas kernels; `kernel_records` the kernels (named by `tf_op_name`, \
         else the event) by total duration; `total_duration_us_all_records` the outermost \
         kernels' sum (ops inside a `%while` not counted twice); steps from `XLA Modules`. \
         Regions inside kernels (`LLO Ops`, `Pallas Primitives`, `* Instructions`) are left out \
         unless --include_intra_kernel_regions. On a CPU-only capture, where XProf's tool finds \
         no kernel, `host_executed` gives the same attribution over the XLA ops the CPU backend \
         ran on host threads."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Kernel records listed (0 = all).", Some(10), 0)
            .string("kernel_name", "Only this kernel (its exact name).")
            .string_list(
                "trace_matchers",
                "Only kernels whose name matches one of these (regex or substring).",
            )
            .boolean(
                "include_intra_kernel_regions",
                "Also list regions inside kernels (LLO Ops, Pallas Primitives, * Instructions), tagged.",
                false,
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, total_device_duration_ns, total_device_duration_us, total_device_duration_ms, by_line_duration_ns, custom_call_duration_us, custom_call_share_pct, kernel_records: [{kernel_name, canonical_name, short_name, hlo_op_name, raw_name, total_duration_us, execution_count, avg_duration_us, is_intra_kernel_region}], step_durations_us, stats: {mean_us, std_us}, truncated, total_records, returned_records, top_level_records, total_duration_us_all_records} | CPU: {capture, run, info, host_executed: {busy_ps, by_thread_busy_ps, op_records, ...}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Device time of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["total_device_duration_ns", "kernel_records"]),
            Example::new(
                "A CPU capture: the XLA ops its host threads ran",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps", "limit": 3}),
            )
            .expect(&["info", "host_executed"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 10)?;
        let opts = AttributionOptions {
            limit,
            kernel_name: call.opt_nonempty("kernel_name")?,
            include_intra_kernel_regions: call.bool_or("include_intra_kernel_regions", false)?,
            ..Default::default()
        }
        .with_matchers(&call.str_list("trace_matchers")?);
        let s = session(call)?;
        let (raw, used) = load_raw(call, &s, planes)?;
        if let Some(body) = device_time_attribution(&raw, &opts) {
            return Ok(with_capture(&s, &used, &[], body).into());
        }
        // XProf's tool answers `info` here; a CPU capture still has its host-executed ops.
        let mut info = format!("No kernel stats found for session {}", s.run);
        if let Some(k) = &opts.kernel_name {
            info.push_str(&format!(" and kernel {k}"));
        }
        if opts.kernel_name.is_none()
            && let Some(host) = host_executed_attribution(&raw, limit)
        {
            let mut body = Map::new();
            body.insert("info".into(), json!(info));
            body.insert("host_executed".into(), host);
            return Ok(with_capture(&s, &used, &[], body).into());
        }
        let mut body = Map::new();
        body.insert("info".into(), Value::String(info));
        let reason = "no device kernel events (no /device:* plane with XLA Ops, Pallas or GPU \
                      stream events) and no XLA op on host threads";
        Ok(no_data_with(
            &s,
            &used,
            &[],
            reason,
            DEVICE_TRACE_FLAGS,
            body,
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    fn attribution(path: &std::path::Path) -> Value {
        invoke_json(
            env!("CARGO_CRATE_NAME"),
            "get_device_time_attribution",
            &json!({"path": path.display().to_string()}).to_string(),
            "{}",
        )
        .unwrap()["result"]
            .clone()
    }

    /// Every field XProf's agent CLI prints for the seed capture.
    #[test]
    fn the_tpu_capture_equals_xprofs_agent_cli() {
        let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let got = attribution(&c.join("fixtures/seed-v6e/logdir"));
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(
                c.join("oracle/official-cli-2.24.2/seed-v6e/get_device_time_attribution.json"),
            )
            .unwrap(),
        )
        .unwrap();
        for (k, v) in want.as_object().unwrap() {
            if k != "capture" {
                assert_eq!(&got[k], v, "{k}");
            }
        }
    }

    /// On CPU XProf's tool finds no kernel (its `info` kept); the host threads' XLA ops are
    /// attributed instead: their union is at most the sum of the per-thread unions, and each
    /// thread's at most its ops' summed time.
    #[test]
    fn a_cpu_capture_attributes_its_host_executed_ops() {
        let root = testing::workspace_root(env!("CARGO_MANIFEST_DIR"));
        for run in ["matmul", "mlp_steps"] {
            let got = attribution(
                &root
                    .join("fixtures/jax-cpu/logdir/plugins/profile")
                    .join(run),
            );
            let want: Value = serde_json::from_str(
                &std::fs::read_to_string(
                    root.join("fixtures/oracle")
                        .join(run)
                        .join("cli/get_device_time_attribution.json"),
                )
                .unwrap(),
            )
            .unwrap();
            assert_eq!(
                got["info"].as_str().unwrap().replace(run, "<RUN>"),
                want["info"]
            );
            let h = &got["host_executed"];
            let busy = h["busy_ps"].as_i64().unwrap();
            let threads: i64 = h["by_thread_busy_ps"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_i64().unwrap())
                .sum();
            let ops: i64 = h["op_records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["total_duration_ps"].as_i64().unwrap())
                .sum();
            assert!(busy > 0 && busy <= threads, "{run}: {busy} > {threads}");
            assert!(h["truncated"] == json!(true) || threads <= ops, "{run}");
        }
    }
}
