use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{capture_block, open_host, session};

pub struct CheckKernelProfiling;
register_tool!(CheckKernelProfiling);

impl Tool for CheckKernelProfiling {
    fn name(&self) -> &'static str {
        "check_kernel_profiling"
    }
    fn summary(&self) -> &'static str {
        "Was the trace captured with the TPU kernel-profiling flags? (call before any LLO-level trace analysis)"
    }
    fn doc(&self) -> &'static str {
        "Per device plane: event counts of the kernel-profiling lines (_counters_, Tensor Core, \
         XLA TraceMe), the counter units and TraceMe stages seen, the number of custom-call \
         (kernel) invocations, and whether each line family is present. A trace captured \
         without LIBTPU_INIT_ARGS=\"--xla_enable_custom_call_region_trace=true \
         --xla_xprof_register_llo_debug_info=true\" has none of them: analysing it at the LLO \
         level is a silent no-op. runtime_counter_sampling is detected from the lines \
         present (newer libtpu's per-instruction lines), never assumed."
    }
    fn params(&self) -> Params {
        Params::new().capture().host()
    }
    fn output(&self) -> &'static str {
        "{capture, devices: {<plane>: {lines, counter_units, traceme_stages, kernel_invocations, active, active_by_family}}, kernel_profiling_active, hint?, runtime_counter_sampling}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Kernel-profiling lines of the v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["devices", "kernel_profiling_active"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let (h, space) = open_host(call, &s)?;
        let mut out = Map::new();
        out.insert("capture".into(), capture_block(&s, &h, &space));
        if let Value::Object(m) = xprof_llo::trace::check_kernel_profiling(&space) {
            out.extend(m);
        }
        out.insert(
            "provenance".into(),
            xprof_llo::provenance(
                &["devices.*.lines", "devices.*.counter_units", "devices.*.traceme_stages", "runtime_counter_sampling"],
                &["devices.*.active", "kernel_profiling_active"],
                &["devices.*.kernel_invocations (XLA Ops spans overlapping instrumentation events)"],
            ),
        );
        Ok(Value::Object(out).into())
    }
}
