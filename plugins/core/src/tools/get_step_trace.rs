use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{op_stats_visiting, session, with_capture};

pub struct GetStepTrace;
register_tool!(GetStepTrace);

impl Tool for GetStepTrace {
    fn name(&self) -> &'static str {
        "get_step_trace"
    }
    fn summary(&self) -> &'static str {
        "Steps and their time breakdown (from XProf's step grouping)"
    }
    fn doc(&self) -> &'static str {
        "The steps XProf's grouping finds — from a device `Steps` line, `group_id` stats, or host \
         `_r` root events with their flows (`steps_source`) — each with begin, duration (exact \
         ps), breakdown (generic components on CPU/GPU, self time per HLO category on TPU) and \
         `complete`: whether XProf's overview counts it (of more than 5 host steps it drops the \
         first and last as maybe incomplete; `complete_count` counts the rest, and the summary's \
         `complete_step_time_ms_average` averages them as XProf's overview does), and \
         `compile_ps_measured`: the XLA compilation inside the step (ours: XProf's breakdown \
         counts it as host compute; see get_smart_suggestions' RecompilationRule). \
         Without steps the answer says why (`no_steps_reason`: no markers, TensorFlow loop ops \
         or an executor loop, groups without a step marker) and what to do (`no_steps_advice`), \
         and carries `steps_inferred` where \
         the capture has XLA modules (one step per module execution — our inference, labelled \
         as such)."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Maximum steps listed.", Some(100), 1)
    }
    fn output(&self) -> &'static str {
        "{capture, run, steps_source, count, complete_count, steps: [...], no_steps_reason?, no_steps_advice?, steps_inferred?}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Steps of a CPU training capture (host _r roots)",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train"}),
            )
            .expect(&["steps_source", "steps"]),
            Example::new(
                "A TPU capture without step markers (inferred steps)",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["steps_source"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 100)?.max(1);
        let s = session(call)?;
        let mut compiles = xprof_views::recompile::CompileSpans::default();
        let (st, used, warnings) = op_stats_visiting(
            call,
            &s,
            xprof_opstats::BuildOptions::STEPS_AND_OP_DATABASES,
            |space| compiles.extend(xprof_views::recompile::host_compile_spans(space)),
        )?;
        let mut summary = xprof_opstats::views::steps_summary(&st);
        let mut body: Map<String, Value> = summary
            .as_object_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        if let Some(Value::Array(v)) = body.get_mut("steps") {
            // Ours: XLA compilation inside each step, which XProf's breakdown counts as host
            // compute (the steps are listed in the engine's order).
            let compiles = compiles.covering();
            for (step, x) in v.iter_mut().zip(&st.steps.steps) {
                step["compile_ps_measured"] = json!(compiles.inside(x.begin_ps(), x.duration_ps()));
            }
            let total = v.len();
            v.truncate(limit);
            let n = v.len();
            body.insert("truncated".into(), json!(n < total));
        }
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    /// get_step_trace on a run of the PyTorch/XLA fixtures.
    fn step_trace(run: &str) -> Value {
        let path = testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/ptxla-cpu/logdir/plugins/profile")
            .join(run);
        let args = json!({"path": path.display().to_string()});
        invoke_json(
            env!("CARGO_CRATE_NAME"),
            "get_step_trace",
            &args.to_string(),
            "{}",
        )
        .unwrap()["result"]
            .clone()
    }

    /// Each step says whether XProf's overview counts it: of the six PyTorch/XLA steps, all but
    /// the first and the last.
    #[test]
    fn steps_say_whether_xprofs_overview_counts_them() {
        let r = step_trace("ptxla_train");
        let complete: Vec<bool> = r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["complete"].as_bool().unwrap())
            .collect();
        assert_eq!(complete, [false, true, true, true, true, false]);
        assert_eq!(r["complete_count"], json!(4));
        // The summary's complete-step average is the mean of the flagged steps.
        let steps = r["steps"].as_array().unwrap();
        let mean = steps[1..5]
            .iter()
            .map(|s| s["duration_ps"].as_f64().unwrap() / 1e9)
            .sum::<f64>()
            / 4.0;
        let got = r["summary"]["complete_step_time_ms_average"]
            .as_f64()
            .unwrap();
        assert!((got - mean).abs() <= 1e-9 * mean, "{got} vs {mean}");
        // Shapes do not change: nothing compiles inside the steps.
        assert!(steps.iter().all(|s| s["compile_ps_measured"] == json!(0)));
    }

    /// A real PyTorch/XLA loop with a new batch size at each step after the first: those
    /// steps are mostly XLA compilation, the first (warmed-up shapes) none.
    #[test]
    fn steps_that_recompile_show_their_compile_time() {
        let r = step_trace("ptxla_recompile");
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0]["compile_ps_measured"], json!(0));
        for s in &steps[1..] {
            let c = s["compile_ps_measured"].as_u64().unwrap();
            let d = s["duration_ps"].as_u64().unwrap();
            assert!(c <= d && c * 2 > d, "{c} of {d}");
        }
    }
}
