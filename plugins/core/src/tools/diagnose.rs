use serde_json::{Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::load_run;
use super::get_smart_suggestions::suggestions_of;
use crate::common::{session, with_capture};

pub struct Diagnose;
register_tool!(Diagnose);

impl Tool for Diagnose {
    fn name(&self) -> &'static str {
        "diagnose"
    }
    fn summary(&self) -> &'static str {
        "One call: the bottleneck with its evidence and the three changes that can save the most time, each with the next call"
    }
    fn doc(&self) -> &'static str {
        "Start here. Reads the overview (device idle time), the HLO op table (self-time shares, \
         bound_by), the input pipeline (step breakdown) and the smart-suggestion rules, and \
         answers in under 4 KB: `verdict` (the bottleneck and why), `numbers` (the figures it \
         used, as those tools print them), `changes` (at most three, largest possible saving \
         first; `can_save_ms_at_most` is the time of what the change removes — idle time, an \
         op's self time — so a bound, not a promise; null where no view measures it) each with \
         `next`, the call that shows the detail, and `not_in_capture` (what this capture cannot \
         say: no data is not 0 %)."
    }
    fn params(&self) -> Params {
        Params::new().capture().host()
    }
    fn output(&self) -> &'static str {
        "{capture, run, verdict: {bottleneck, because}, numbers, changes: [{rank, change, evidence, can_save_ms_at_most, next}], changes_considered, not_in_capture}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Diagnose the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["verdict", "changes", "numbers"]),
            Example::new(
                "Diagnose a CPU training capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps"}),
            )
            .expect(&["verdict", "changes"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        // The next calls name the run directory itself: unambiguous whatever PATH was.
        let dir = s.dir.display().to_string();
        let path = if dir
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
        {
            dir
        } else {
            format!("'{}'", dir.replace('\'', "'\\''"))
        };
        let (run, used) = load_run(call, &s)?;
        let (st, ip) = run
            .op_stats_and_input_pipeline()
            .ok_or_else(|| ToolError::internal("no host selected"))?;
        let suggestions = suggestions_of(call, &s, &run, &st, &ip)?;
        let overview = xprof_opstats::views::overview(&st);
        let (rows, host_executed) = match xprof_opstats::views::op_db(&st) {
            Some((db, host)) => (xprof_opstats::views::hlo_stats_of(&st, db), host),
            None => (Vec::new(), false),
        };
        let b = &ip.bottleneck;
        let input = json!({
            "steps": b.steps,
            "step_time_ms_avg": b.step_time_ms_avg,
            "input_percent": b.input_percent,
            "all_other_percent": b.all_other_percent,
        });
        let overview = Value::Object(overview);
        let body = xprof_views::diagnose::diagnose(&xprof_views::diagnose::Evidence {
            path: &path,
            overview: &overview,
            ops: &rows,
            modules: &st.program_names,
            host_executed,
            input: &input,
            suggestions: &suggestions["suggestions"],
        });
        let body = match body {
            Value::Object(m) => m,
            _ => unreachable!("diagnose answers an object"),
        };
        Ok(with_capture(&s, &used, &run.warnings, body).into())
    }
}
