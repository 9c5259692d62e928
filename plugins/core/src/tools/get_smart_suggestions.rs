use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::{load_raw, load_run};
use crate::common::{session, with_capture};

pub struct GetSmartSuggestions;
register_tool!(GetSmartSuggestions);

impl Tool for GetSmartSuggestions {
    fn name(&self) -> &'static str {
        "get_smart_suggestions"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["smart_suggestion"]
    }
    fn summary(&self) -> &'static str {
        "Bottleneck suggestions from XProf's rules plus ours, each citing its numbers (XProf smart_suggestion)"
    }
    fn doc(&self) -> &'static str {
        "XProf's smart-suggestion rules evaluated on the signals XProf's own rules read (overview \
         MXU/HBM utilization — XProf's open-source placeholders included —, input-pipeline \
         input %, enqueue vs host-processing split, TensorCore idle %, average collective and \
         data-shuffle share of step time): ComputeBound, MemoryBound, InputBound, \
         DataTransferBound, HostProcessingBound, TensorCoreIdleBound, CollectiveBound, \
         DataShuffleBound, BarrierCores and DebugPrint (share of step time of `barrier-cores` / \
         `debug_print` events per TPU core and host), then ours (`source: xprof-rs`): \
         compute/memory/latency bound on measured utilization, and Recompilation — XLA \
         compilations (PjRt, JAX, PyTorch/XLA and TensorFlow compile entry points, and XLA's \
         own backend runs, on the host threads) inside the steps after the first, which XProf's step breakdown counts as \
         host compute (`signals.compilations`), and ExposedAsync — async collectives, copies and \
         send/recv whose windows compute does not cover, from 5 % of the device time \
         (`signals.async_ops`, the analysis of analyze_async_overlap). Open-source XProf runs only BarrierCores of its rules (`source: \
         xprof`); the others are in its source but run only in Google's internal build \
         (`source: xprof-internal`), so XProf's own view never shows them. Every suggestion lists the signal values behind it; `signals` \
         holds them all and `rules_not_evaluated` the rules this capture cannot feed. \
         `suggestions` is always present ([] when none fires)."
    }
    fn params(&self) -> Params {
        Params::new().capture().host()
    }
    fn output(&self) -> &'static str {
        "{capture, run, suggestions: [{ruleName, source, suggestionText, signals}], signals, rules_not_evaluated}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Suggestions for the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["suggestions", "signals"]),
            Example::new(
                "A PyTorch/XLA loop that recompiles at every step (RecompilationRule)",
                json!({"path": "${FIXTURES}/ptxla-cpu/logdir", "run": "ptxla_recompile"}),
            )
            .expect(&["suggestions", "signals"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let (run, used) = load_run(call, &s)?;
        let (st, ip) = run
            .op_stats_and_input_pipeline()
            .ok_or_else(|| ToolError::internal("no host selected"))?;
        let body = match suggestions_of(call, &s, &run, &st, &ip)? {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Ok(with_capture(&s, &used, &run.warnings, body).into())
    }
}

/// XProf's rules and ours on a loaded run (also read by `diagnose`).
pub(super) fn suggestions_of(
    call: &mut Call,
    s: &xprof_capture::Session,
    run: &xprof_views::LoadedRun,
    st: &xprof_opstats::OpStats,
    ip: &xprof_views::input_pipeline::InputPipeline,
) -> Result<Value, ToolError> {
    let mut sig = xprof_views::suggestions::signals_with_events(st, ip, run);
    // The async-op windows, from the device planes as analyze_async_overlap reads them.
    let (raw, _) = load_raw(call, s, |n| n.starts_with("/device:"))?;
    let overlap = xprof_views::overlap::analyze(&raw, Default::default(), 0);
    sig.async_exposure =
        xprof_views::overlap::AsyncExposure::from_analysis(&overlap, st.device_db.total_time_ps);
    Ok(xprof_views::suggestions::smart_suggestions(&sig))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    fn suggestions(run: &str) -> Value {
        let path =
            testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures/ptxla-cpu/logdir");
        let args = json!({"path": path.display().to_string(), "run": run});
        invoke_json(
            env!("CARGO_CRATE_NAME"),
            "get_smart_suggestions",
            &args.to_string(),
            "{}",
        )
        .unwrap()["result"]
            .clone()
    }

    fn fired(r: &Value, rule: &str) -> Option<Value> {
        r["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["ruleName"] == rule)
            .cloned()
    }

    /// Real PyTorch/XLA captures: the batch size changes at each of the steps after the first,
    /// and each of them compiles a new graph; with fixed shapes nothing compiles in the trace.
    #[test]
    fn a_real_pytorch_xla_loop_that_recompiles_is_reported() {
        let r = suggestions("ptxla_recompile");
        let rule = fired(&r, "RecompilationRule").expect("RecompilationRule");
        let c = &rule["signals"];
        assert_eq!(c["compilations"], json!(2));
        assert_eq!(c["steps"], json!(3));
        assert_eq!(c["steps_after_the_first_with_compile"], json!(2));
        let p = c["compile_percent_of_step_time_after_the_first"]
            .as_f64()
            .unwrap();
        assert!(p > 50.0 && p <= 100.0, "{p}");
        let steady = suggestions("ptxla_train");
        assert!(fired(&steady, "RecompilationRule").is_none());
        assert_eq!(steady["signals"]["compilations"]["compilations"], json!(0));
    }

    /// Async collectives the device waits for (xprof_testkit::async_ops: 250 ps of the
    /// windows uncovered, against op timelines of 660 + 100 ps) are reported with their
    /// families; captures without async ops have no such signal.
    #[test]
    fn exposed_async_ops_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let run = xprof_testkit::async_ops::write_async_run(dir.path(), "run").unwrap();
        let args = json!({"path": run.display().to_string()});
        let r = invoke_json(
            env!("CARGO_CRATE_NAME"),
            "get_smart_suggestions",
            &args.to_string(),
            "{}",
        )
        .unwrap()["result"]
            .clone();
        let rule = fired(&r, "ExposedAsyncRule").expect("ExposedAsyncRule");
        let a = &rule["signals"];
        assert_eq!(a["async_windows"], json!(4));
        assert_eq!(a["async_exposed_ps"], json!(250));
        assert_eq!(a["device_time_ps"], json!(760));
        assert_eq!(a["exposed_ps_by_op"][0]["op"], "all-to-all");
        let text = rule["suggestionText"].as_str().unwrap();
        assert!(text.contains("all-to-all 0.000 ms"), "{text}");
        assert_eq!(r["signals"]["async_ops"], *a);
        assert!(
            suggestions("ptxla_train")["signals"]
                .get("async_ops")
                .is_none()
        );
    }
}
