use serde_json::{Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};
use xprof_views::overlap::{Thresholds, analyze};

use super::get_pod_viewer::{load_raw, no_data_with};
use crate::common::{DEVICE_TRACE_FLAGS, session, with_capture};

pub struct AnalyzeAsyncOverlap;
register_tool!(AnalyzeAsyncOverlap);

/// Device planes: TPU chips with their SparseCores, and GPUs.
fn device_planes(name: &str) -> bool {
    name.starts_with("/device:")
}

impl Tool for AnalyzeAsyncOverlap {
    fn name(&self) -> &'static str {
        "analyze_async_overlap"
    }
    fn summary(&self) -> &'static str {
        "How much of each async collective/copy/send-recv is hidden behind compute"
    }
    fn doc(&self) -> &'static str {
        "XProf's agent-CLI analysis of async ops, natively: each async op window (an `Async XLA \
         Ops` event, or a paired `<op>-start`/`<op>-done` on `XLA Ops`/`Sparse Core Ops`) is \
         covered by the other ops of the same device or not; its overlap_ratio classifies it \
         `hidden` (>= --hidden_threshold), `exposed` (<= --exposed_threshold) or `partial`. \
         Gives `summary` (count, span, exposed ps, class counts, unpaired ops, overall \
         overlap_ratio), `by_op` (per op family, most exposed first), `by_plane` (with \
         window_source), `top_exposed` (the --top_k most exposed windows) and `concurrency` \
         (per TPU chip: TensorCore/SparseCore busy time and pairwise concurrent time). Ours on \
         top: on GPU planes, which XProf's tool does not read, NCCL/RCCL collective kernels are \
         the windows, covered by the GPU's other kernels (`window_source: \
         gpu_collective_kernels`). Hosts are analysed apart, never merged. A CPU-only capture \
         has no device timeline: `no_data`."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .number(
                "hidden_threshold",
                "Covered fraction at or above which a window is `hidden`.",
                Some(0.9),
            )
            .number(
                "exposed_threshold",
                "Covered fraction at or below which a window is `exposed`.",
                Some(0.1),
            )
            .integer_min("top_k", "Windows listed in top_exposed.", Some(20), 0)
    }
    fn output(&self) -> &'static str {
        "{capture, run, status, summary: {count, span_ps, exposed_ps, hidden, partial, exposed, unpaired_ops, overlap_ratio}, by_op: {<family>: {count, span_ps, exposed_ps, hidden, partial, exposed}}, by_plane: {<plane>: {..., window_source}}, top_exposed: [{plane, name, op, start_ps, span_ps, exposed_ps, overlap_ratio, class, host}], concurrency: [{chip, engines, pairs}], thresholds, gpu_planes}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "The shared TPU v6e capture (no async op in this program)",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["summary", "by_op", "concurrency"]),
            Example::new(
                "A CPU-only capture has no device timeline (no_data)",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps"}),
            )
            .expect(&["status", "summary"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let hidden = call.f64_or("hidden_threshold", 0.9)?;
        let exposed = call.f64_or("exposed_threshold", 0.1)?;
        let th = Thresholds::new(hidden, exposed).map_err(ToolError::invalid)?;
        let top_k = call.usize_or("top_k", 20)?;
        let s = session(call)?;
        let (raw, used) = load_raw(call, &s, device_planes)?;
        let mut body = analyze(&raw, th, top_k);
        if body["status"] == "NO_DEVICE_TIMELINE_EVENTS" {
            let status = body.shift_remove("status").unwrap_or(Value::Null);
            body.insert("xprof_status".into(), status);
            let reason = "no XLA Ops, Async XLA Ops or Sparse Core Ops timeline events and no GPU \
                          kernels: the capture has no device timeline (a CPU-only run, or the \
                          device tracer was off)";
            return Ok(no_data_with(
                &s,
                &used,
                &[],
                reason,
                DEVICE_TRACE_FLAGS,
                body,
            ));
        }
        Ok(with_capture(&s, &used, &[], body).into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    fn overlap(args: Value) -> Result<Value, xprof_plugin_api::ToolError> {
        invoke_json(
            env!("CARGO_CRATE_NAME"),
            "analyze_async_overlap",
            &args.to_string(),
            "{}",
        )
        .map(|r| r["result"].clone())
    }

    /// Ours against XProf's agent CLI on the same run: the same numbers; its
    /// NO_DEVICE_TIMELINE_EVENTS is our `no_data`, keeping its status as `xprof_status`.
    fn assert_matches(got: &Value, want: &Value) {
        match want["status"].as_str() {
            Some("OK") => assert_eq!(got["status"], "OK"),
            _ => {
                assert_eq!(got["status"], "no_data");
                assert_eq!(got["xprof_status"], want["status"]);
            }
        }
        for k in [
            "by_op",
            "by_plane",
            "top_exposed",
            "concurrency",
            "thresholds",
        ] {
            assert_eq!(got[k], want[k], "{k}");
        }
        for (k, v) in want["summary"].as_object().unwrap() {
            assert_eq!(&got["summary"][k], v, "summary.{k}");
        }
        // XProf prints a bare null; we say why.
        assert!(got["summary"]["overlap_ratio_reason"].is_string());
    }

    #[test]
    fn the_cpu_fixtures_equal_xprofs_agent_cli() {
        let root = testing::workspace_root(env!("CARGO_MANIFEST_DIR"));
        for run in ["matmul", "mlp_steps"] {
            let path = root
                .join("fixtures/jax-cpu/logdir/plugins/profile")
                .join(run);
            let got = overlap(json!({"path": path.display().to_string()})).unwrap();
            let want: Value = serde_json::from_str(
                &std::fs::read_to_string(
                    root.join("fixtures/oracle")
                        .join(run)
                        .join("cli/analyze_async_overlap.json"),
                )
                .unwrap(),
            )
            .unwrap();
            assert_matches(&got, &want);
        }
    }

    #[test]
    fn the_tpu_capture_equals_xprofs_agent_cli() {
        let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let got =
            overlap(json!({"path": c.join("fixtures/seed-v6e/logdir").display().to_string()}))
                .unwrap();
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(
                c.join("oracle/official-cli-2.24.2/seed-v6e/analyze_async_overlap.json"),
            )
            .unwrap(),
        )
        .unwrap();
        assert_matches(&got, &want);
    }

    /// XProf's own rule and message for thresholds out of order; an invalid value (exit 4).
    #[test]
    fn thresholds_out_of_order_are_an_invalid_value() {
        let root = testing::workspace_root(env!("CARGO_MANIFEST_DIR"));
        let path = root.join("fixtures/jax-cpu/logdir/plugins/profile/matmul");
        let e = overlap(json!({
            "path": path.display().to_string(),
            "hidden_threshold": 0.1,
            "exposed_threshold": 0.5,
        }))
        .unwrap_err();
        assert_eq!(e.kind.as_str(), "invalid_value");
        assert!(
            e.message.starts_with("thresholds must satisfy"),
            "{}",
            e.message
        );
    }
}
