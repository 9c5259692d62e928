use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::{STEP_FLAGS, load_run, no_data_with};
use crate::common::{session, with_capture};
use xprof_opstats::opstats::HardwareType;

pub struct GetInputPipeline;
register_tool!(GetInputPipeline);

const TABLE_NAMES: [&str; 5] = [
    "max_infeed_core",
    "step_time",
    "host_input_ops",
    "recommendations",
    "diagnostics",
];

/// XProf's shares of a non-TPU step are device shares: compute is device compute, and idle is
/// everything else but input and output, host compute included. A CPU-only capture has no
/// device, so XProf prints 0 % compute and ~100 % idle for a step spent computing on the
/// host. Those become null with the reason, and the host's share is printed on its own.
fn cpu_only_shares(bottleneck: &mut serde_json::Value, host_compute_percent: f64) {
    for (key, reason) in [
        (
            "compute_percent",
            "CPU-only capture: XProf's compute share is device compute, and there is no device \
             (it prints 0 %); see host_compute_percent",
        ),
        (
            "idle_percent",
            "CPU-only capture: XProf's idle share is the device's, which counts host compute as \
             idle (it prints ~100 %); see host_compute_percent",
        ),
        (
            "device_collectives_percent",
            "CPU-only capture: there is no device to run collectives (XProf prints 0 %)",
        ),
    ] {
        if let Some(m) = bottleneck.as_object_mut() {
            xprof_views::table::placeholder(m, key, reason, None);
        }
    }
    bottleneck["host_compute_percent"] = json!(host_compute_percent);
}

impl Tool for GetInputPipeline {
    fn name(&self) -> &'static str {
        "get_input_pipeline"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["input_pipeline_analyzer"]
    }
    fn summary(&self) -> &'static str {
        "Is the program input-bound? Step-time breakdown and host input ops (XProf input_pipeline_analyzer)"
    }
    fn doc(&self) -> &'static str {
        "XProf's input pipeline analyzer over the complete steps of all hosts (or --host): the \
         per-step breakdown (TPU: TensorCore compute / infeed / outfeed / idle / host transfer; \
         GPU and CPU: XProf's nine generic components), step-time statistics, XProf's bottleneck \
         conclusion (input %, classification and statement), the host input ops (tf.data \
         iterators, enqueue) by category, the fixed tf.data recommendations and the diagnostics. \
         Tables are XProf's, as records keyed by column id; `bottleneck` repeats the numbers the \
         conclusion is based on. Without step markers and host input ops the answer is \
         `no_data` (XProf's tables still included)."
    }
    fn params(&self) -> Params {
        Params::new().capture().host().integer_min(
            "limit",
            "Maximum rows per table (0 = all).",
            Some(30),
            0,
        )
    }
    fn output(&self) -> &'static str {
        "{capture, run, hardware_type, bottleneck: {steps, input_percent, output_percent, idle_percent, compute_percent, host_compute_percent? (CPU-only), input_classification, input_statement, tc_idle_statement?, step_time_ms_avg}, tables: {max_infeed_core, step_time, host_input_ops, recommendations, diagnostics}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Input-pipeline analysis of the bundled 5-step MLP capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps"}),
            )
            .expect(&["bottleneck", "tables"]),
            Example::new(
                "A CPU training capture with 10 steps",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train", "limit": 5}),
            )
            .expect(&["bottleneck", "tables"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 30)?;
        let s = session(call)?;
        let (run, used) = load_run(call, &s)?;
        let (_, ip) = run
            .op_stats_and_input_pipeline()
            .ok_or_else(|| ToolError::internal("no host selected"))?;
        let b = &ip.bottleneck;
        let mut body = Map::new();
        body.insert("hardware_type".into(), json!(ip.hardware_type.as_str()));
        let mut bottleneck = json!({
                "steps": b.steps,
                "step_time_ms_avg": b.step_time_ms_avg,
                "input_percent": b.input_percent,
                "output_percent": b.output_percent,
                "idle_percent": b.idle_percent,
                "compute_percent": b.compute_percent,
                "all_other_percent": b.all_other_percent,
                "kernel_launch_percent": b.kernel_launch_percent,
                "device_collectives_percent": b.device_collectives_percent,
                "input_classification": b.input_classification,
                "input_statement": b.input_statement,
        });
        if !b.tc_idle_statement.is_empty() {
            bottleneck["tc_idle_statement"] = json!(b.tc_idle_statement);
        }
        if ip.hardware_type == HardwareType::CpuOnly && b.steps > 0 {
            cpu_only_shares(&mut bottleneck, b.host_compute_percent);
        }
        body.insert("bottleneck".into(), bottleneck);
        let tables: Map<String, serde_json::Value> = TABLE_NAMES
            .iter()
            .zip(&ip.tables)
            .map(|(n, t)| (n.to_string(), t.to_json(limit)))
            .collect();
        body.insert("tables".into(), serde_json::Value::Object(tables));
        let host_ops = ip.tables.get(2).is_some_and(|t| !t.records.is_empty());
        if b.steps == 0 && !host_ops {
            return Ok(no_data_with(
                &s,
                &used,
                &run.warnings,
                "no step markers (no `Steps` line, `group_id` stats or host `_r` step roots) and no host input-pipeline ops (tf.data iterators, infeed enqueue)",
                STEP_FLAGS,
                body,
            ));
        }
        Ok(with_capture(&s, &used, &run.warnings, body).into())
    }
}
