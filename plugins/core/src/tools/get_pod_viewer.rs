use serde_json::{Map, Value, json};
use xprof_capture::{HostFile, Session};
use xprof_plugin_api::{
    Call, ErrorKind, Example, Params, Tool, ToolError, ToolOutput, register_tool,
};
use xprof_views::LoadedRun;
use xprof_views::load::ViewLoadError;

use crate::common::{selected_hosts, session, with_capture};

pub struct GetPodViewer;
register_tool!(GetPodViewer);

/// Flags that record step markers, for "no steps" answers.
pub(super) const STEP_FLAGS: &[&str] = &[
    "wrap each training step in jax.profiler.StepTraceAnnotation(\"train\", step_num=i) (PyTorch/XLA: xp.StepTrace; TF: tf.profiler.experimental.Trace(\"train\", step_num=i))",
    "profile several whole steps",
];

/// A views load error as a tool error (kind and hint from the library).
pub(super) fn views_error(e: ViewLoadError) -> ToolError {
    ToolError::new(ErrorKind::parse(e.kind()), e.to_string()).with_hint(e.hint())
}

/// The selected hosts (`--host`, else all) loaded into the engine's model; every file read is
/// recorded.
pub(super) fn load_run<'a>(
    call: &mut Call,
    s: &'a Session,
) -> Result<(LoadedRun, Vec<&'a HostFile>), ToolError> {
    let hosts = selected_hosts(call, s)?;
    for h in &hosts {
        call.read_file(&h.path);
    }
    for f in &s.hlo_protos {
        call.read_file(f);
    }
    let list: Vec<(String, std::path::PathBuf)> = hosts
        .iter()
        .map(|h| (h.name.clone(), h.path.clone()))
        .collect();
    let run = xprof_views::load::load_hosts(&list, &s.hlo_protos).map_err(views_error)?;
    Ok((run, hosts))
}

/// The selected hosts opened with the zero-copy reader (only the planes `planes` accepts),
/// without the engine's model.
pub(super) fn load_raw<'a>(
    call: &mut Call,
    s: &'a Session,
    planes: fn(&str) -> bool,
) -> Result<(Vec<(String, xprof_views::load::XSpace)>, Vec<&'a HostFile>), ToolError> {
    let hosts = selected_hosts(call, s)?;
    for h in &hosts {
        call.read_file(&h.path);
    }
    let list: Vec<(String, std::path::PathBuf)> = hosts
        .iter()
        .map(|h| (h.name.clone(), h.path.clone()))
        .collect();
    let raw = xprof_views::load::load_raw(&list, planes).map_err(views_error)?;
    Ok((raw, hosts))
}

/// A "no data" answer that still carries the capture block and XProf's (empty) payload.
pub(super) fn no_data_with(
    s: &Session,
    used: &[&HostFile],
    warnings: &[String],
    reason: &str,
    flags: &[&str],
    body: Map<String, Value>,
) -> ToolOutput {
    let nd = ToolOutput::no_data(reason, flags);
    let mut m = Map::new();
    if let Value::Object(o) = nd.value {
        m.extend(o);
    }
    m.extend(body);
    with_capture(s, used, warnings, m).into()
}

impl Tool for GetPodViewer {
    fn name(&self) -> &'static str {
        "get_pod_viewer"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["pod_viewer"]
    }
    fn summary(&self) -> &'static str {
        "Per-step, per-core step-time breakdown and bottleneck (XProf pod_viewer)"
    }
    fn doc(&self) -> &'static str {
        "XProf's pod viewer from the raw XSpace of all hosts (or --host): for every step and every \
         core, the step time (us, exact ps beside it) split into XProf's nine generic components \
         (Device compute, Device to device, Device collective communication, Host compute, Kernel \
         launch, Input, Output, Compilation, All others) and the largest of them as `bottleneck`. \
         On TPU XProf's step database carries only HLO-category times, so XProf prints 0 for \
         every component; we print null with `stepBreakdownUs_reason` and our mapping of the \
         categories in `stepBreakdownUs_measured`. Without step markers the answer is \
         `no_data` (XProf's empty pod viewer is still included)."
    }
    fn params(&self) -> Params {
        Params::new().capture().host()
    }
    fn output(&self) -> &'static str {
        "{capture, run, pod_viewer: {podStatsSequence: {podStatsMap: [{stepNum, podStatsPerCore: {core: {hostName, stepNum, totalDurationUs, totalDurationPs, bottleneck, stepBreakdownUs}}}]}, diagnostics, stepBreakdownEvents, deviceType}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Per-step breakdown of the bundled 5-step MLP capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps"}),
            )
            .expect(&["pod_viewer"]),
            Example::new(
                "The shared TPU capture has no step markers: no_data with XProf's empty viewer",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["status", "pod_viewer"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let (run, used) = load_run(call, &s)?;
        let st = run
            .op_stats()
            .ok_or_else(|| ToolError::internal("no host selected"))?;
        let pv = xprof_views::pod::pod_viewer(&st, &run.core_details());
        let mut body = Map::new();
        body.insert("pod_viewer".into(), pv);
        if st.steps.steps.is_empty() {
            return Ok(no_data_with(
                &s,
                &used,
                &run.warnings,
                "no step markers: no `Steps` line on the device planes, no `group_id` stats and no host step roots (`_r`)",
                STEP_FLAGS,
                body,
            ));
        }
        Ok(with_capture(&s, &used, &run.warnings, body).into())
    }
}
