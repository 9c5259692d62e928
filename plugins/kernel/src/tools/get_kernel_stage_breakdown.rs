use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{capture_block, open_host, regex_arg, session, trace_no_data};

pub struct GetKernelStageBreakdown;
register_tool!(GetKernelStageBreakdown);

impl Tool for GetKernelStageBreakdown {
    fn name(&self) -> &'static str {
        "get_kernel_stage_breakdown"
    }
    fn summary(&self) -> &'static str {
        "Mosaic pipeline stage times (ep_wait_in, ep_run_kernel, named scopes, …) and wait_ratio of Pallas kernels"
    }
    fn doc(&self) -> &'static str {
        "Aggregates the XLA TraceMe line's Mosaic emit_pipeline stages (ep_initialize_*, \
         ep_wait_in, ep_copy_in, ep_run_kernel, ep_wait_out, ep_copy_out, ep_finalize) and \
         user jax.named_scopes (kind named_scope, nested_in ep_run_kernel when they lie inside \
         it) into count / total / mean time, restricted to a kernel's invocation spans with \
         --kernel. wait_ratio = (ep_wait_in + ep_wait_out) / ep_run_kernel over the disjoint \
         pipeline stages; > ~0.3 means DMA-starved compute. wait_in_by_input splits the input \
         waits by their order inside each pipeline step, which shows which operand starves. \
         bundle_markers_by_stage lists the LLO bundle addresses whose Tensor Core markers fall \
         inside each stage."
    }
    fn params(&self) -> Params {
        Params::new().capture().host().string(
            "kernel",
            "Kernel (op name) regex from list_kernel_invocations; default: the whole trace.",
        )
    }
    fn output(&self) -> &'static str {
        "{capture, <plane>: {stages: {<name>: {count, total_us, mean_us, p50_us, min_us, max_us, total_ps, kind, nested_in?}}, wait_ratio, wait_ratio_meaning, wait_in_by_input, bundle_markers_by_stage}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Stage breakdown of the v6e matmul kernel",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "kernel": "matmul_optimized"}),
            )
            .expect(&["capture", "/device:TPU:0"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let kernel = match call.opt_nonempty("kernel")? {
            Some(_) => Some(regex_arg(call, "kernel", "")?),
            None => None,
        };
        let s = session(call)?;
        let (h, space) = open_host(call, &s)?;
        let Some(found) = xprof_llo::trace::stages::stage_breakdown(&space, kernel.as_ref()) else {
            return Ok(trace_no_data(format!(
                "No XLA TraceMe line found on any device plane of host {} (the Mosaic pipeline stage spans).",
                h.name
            )));
        };
        let mut out = Map::new();
        out.insert("capture".into(), capture_block(&s, &h, &space));
        out.extend(found);
        out.insert(
            "provenance".into(),
            xprof_llo::provenance(
                &["stages.*.count", "bundle_markers_by_stage"],
                &[
                    "stages.*.total_us / mean_us / p50_us / min_us / max_us",
                    "wait_ratio",
                ],
                &[
                    "stages.*.kind (ep_* vocabulary)",
                    "stages.*.nested_in",
                    "wait_in_by_input (input = order inside a pipeline step)",
                ],
            ),
        );
        Ok(Value::Object(out).into())
    }
}
