use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{op_stats_with, session, with_capture};

pub struct GetRooflineModel;
register_tool!(GetRooflineModel);

/// What a roofline cannot tell (the seed's contract: tests look for these topics).
const CAVEATS: &[&str] = &[
    "FLOPs and bytes are XLA cost-model estimates stamped at compile time; only TIME is measured. Treat utilization numbers as model-derived.",
    "custom_call ops (Pallas/Mosaic kernels, e.g. splash attention, segment_matmul, tokamax CE) have no cost-model FLOPs: their FLOP utilization reads near zero and their operational intensity is meaningless regardless of actual efficiency. Judge hand-written kernels with get_llo_utilization / get_kernel_stage_breakdown instead.",
    "bound_by classifies compute vs memory tiers (HBM/VMEM/CMEM) ONLY \u{2014} there is no communication class. Collectives (~0 cost-model FLOPs, nonzero bytes) get mis-bucketed as HBM-bound. For ICI/DCN attribution use get_pod_viewer / get_megascale_stats.",
    "The 'Program' row folds idle time into its denominator, so its utilization reads pessimistically low; prefer the op-level rows.",
    "bytes_accessed is the op's logical traffic, not measured HBM traffic (fusion and VMEM residency are invisible), so memory-vs-compute calls near the ridge point are soft.",
    "On TPU v5p/v6e there is no hardware-counter cross-check (counter sampling is v7+ only): the cost-model series is the only series.",
];

const NO_STEPS: &str = "No step marker observed and hence the step time is unknown. This may happen if (1) training steps are not instrumented (e.g., if you are not using Keras) or (2) the profiling duration is shorter than the step time. For (1), you need to add step instrumentation; for (2), you may try to profile longer.";

impl Tool for GetRooflineModel {
    fn name(&self) -> &'static str {
        "get_roofline_model"
    }
    fn summary(&self) -> &'static str {
        "Roofline model: device envelope, per-op FLOP rate, bandwidth, intensity and bound_by"
    }
    fn doc(&self) -> &'static str {
        "XProf's roofline model: the device envelope (peaks and ridge points, XProf's strings) \
         and records — a Program row (idle folded in) and one row per op — with measured FLOP \
         rate (GFLOP/s), HBM/VMEM/CMEM bandwidths (GiB/s), operational intensities, bound_by \
         (Compute / HBM / VMEM… / Unknown) and efficiencies. --step_filter picks `Total` \
         (default), `Average` (TPU: the complete steps' Program row, per step), a step number \
         (TPU: that step's Program row) or empty for all; --include_infeed_outfeed false gives \
         XProf's second record set. Read the `caveats` before acting on a utilization number."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .string_default(
                "step_filter",
                "Record set: Total, Average, a step number, or empty for all.",
                "Total",
            )
            .boolean(
                "include_infeed_outfeed",
                "Records that count infeed/outfeed ops (XProf's first set).",
                true,
            )
            .integer_min("limit", "Maximum records.", Some(25), 1)
            .integer_min(
                "top_n",
                "XProf's agent CLI's name for --limit (wins when both are given).",
                None,
                1,
            )
            .string_enum(
                "group_by",
                "XProf's agent CLI's record sets: `program` (the Total set) or `step` (every set: Total, Average and each step), unless --step_filter is given.",
                &["program", "step"],
                "program",
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, device, records, record_count_total, diagnostics, caveats}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Roofline of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["device", "records", "caveats"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let group_by = call.str_or("group_by", "program")?;
        let step_filter = match call.opt_str("step_filter")? {
            Some(f) => f,
            None if group_by == "step" => String::new(),
            None => "Total".to_string(),
        };
        let include_io = call.bool_or("include_infeed_outfeed", true)?;
        let limit = match call.opt_f64("top_n")? {
            Some(_) => call.usize_or("top_n", 25)?,
            None => call.usize_or("limit", 25)?,
        }
        .max(1);
        let s = session(call)?;
        let (st, used, warnings) = op_stats_with(
            call,
            &s,
            xprof_opstats::BuildOptions::STEPS_AND_OP_DATABASES,
        )?;
        if st.perf_env.is_none() {
            return Ok(ToolOutput::no_data(
                "the capture has no /device:TPU or /device:GPU plane (CPU-only): a roofline needs device peaks; see get_hlo_stats for the host-executed ops",
                &["profile on a TPU or GPU backend"],
            ));
        }
        let (device, records) = xprof_opstats::views::roofline_model(&st);
        let filtered: Vec<Map<String, Value>> = records
            .into_iter()
            .filter(|r| r["include_infeed_outfeed"] == include_io)
            .filter(|r| step_filter.is_empty() || r["step"] == step_filter.as_str())
            .collect();
        let total = filtered.len();
        let mut diagnostics = Vec::new();
        if st.steps.steps.is_empty() {
            diagnostics.push(json!({"severity": "WARNING", "message": NO_STEPS}));
        }
        let mut body = Map::new();
        body.insert("device".into(), Value::Object(device));
        body.insert(
            "records".into(),
            Value::Array(
                filtered
                    .into_iter()
                    .take(limit)
                    .map(Value::Object)
                    .collect(),
            ),
        );
        body.insert("record_count_total".into(), json!(total));
        body.insert("diagnostics".into(), Value::Array(diagnostics));
        body.insert("caveats".into(), json!(CAVEATS));
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
