use serde_json::json;
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{op_stats, session, with_capture};

pub struct GetOverview;
register_tool!(GetOverview);

impl Tool for GetOverview {
    fn name(&self) -> &'static str {
        "get_overview"
    }
    fn summary(&self) -> &'static str {
        "Overview page: duty cycle, idle time, step time, run environment (XProf overview_page)"
    }
    fn doc(&self) -> &'static str {
        "XProf's overview page computed from the raw XSpace of all hosts (or --host): device duty \
         cycle and idle time, framework-op shares, step-time statistics (only from XProf's own \
         step grouping; `steps.steps_inferred` is our one-step-per-module fallback) and the run \
         environment. Values are XProf's strings; where XProf prints a placeholder 0 we print \
         null with `<field>_reason` (and `<field>_measured` when we can compute it)."
    }
    fn params(&self) -> Params {
        Params::new().capture().host().boolean(
            "include_command",
            "Accepted for XProf's agent CLI, which adds the run's command line from an XProf server's session metadata; local captures carry none, so nothing is added.",
            false,
        )
    }
    fn output(&self) -> &'static str {
        "{capture, run, performance_summary, run_environment, steps}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Overview of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["performance_summary", "run_environment", "steps"]),
            Example::new(
                "Overview of a CPU training capture with steps",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train"}),
            )
            .expect(&["performance_summary", "steps"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let (st, used, warnings) = op_stats(call, &s)?;
        let body = xprof_opstats::views::overview(&st);
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
