use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{capture_block, open_host, regex_arg, session, trace_no_data};

pub struct ListKernelInvocations;
register_tool!(ListKernelInvocations);

impl Tool for ListKernelInvocations {
    fn name(&self) -> &'static str {
        "list_kernel_invocations"
    }
    fn summary(&self) -> &'static str {
        "Custom-call (Pallas/Mosaic kernel) invocations in a trace, with the LLO bundle addresses they hit"
    }
    fn doc(&self) -> &'static str {
        "Kernel executions from each device plane's XLA Ops line: an op counts as a kernel \
         invocation when its span overlaps Tensor Core / XLA TraceMe instrumentation events \
         (only emitted inside custom-call regions with the kernel-profiling flags). Per kernel: \
         count and duration statistics (µs, plus the exact total in ps), the first max_spans \
         spans in absolute ps, and bundle_markers — the LLO bundle addresses carried by the \
         kernel's Tensor Core markers, with bundle_address_range ready for get_llo_bundles \
         --address_range (the trace-to-dump join). The kernel names are what \
         get_llo_utilization and get_kernel_stage_breakdown accept as --kernel."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .string_default(
                "kernel_regex",
                "Regex filter on the kernel (op) name.",
                ".*",
            )
            .integer_min("max_spans", "Spans listed per kernel.", Some(20), 0)
    }
    fn output(&self) -> &'static str {
        "{capture, <plane>: [{kernel, count, total_us, mean_us, p50_us, min_us, max_us, total_ps, spans_ps, spans_truncated, bundle_markers: [{address, instrumentation_id, count}], bundle_address_range, detected_by}]}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Kernels of the v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["capture", "/device:TPU:0"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let re = regex_arg(call, "kernel_regex", ".*")?;
        let max = call.usize_or("max_spans", 20)?;
        let s = session(call)?;
        let (h, space) = open_host(call, &s)?;
        let (found, any_instr) = xprof_llo::trace::list_kernel_invocations(&space, &re, max);
        if !any_instr {
            return Ok(trace_no_data(format!(
                "no Tensor Core or XLA TraceMe instrumentation events on any device plane of host {}: kernel invocations cannot be told apart from other ops",
                h.name
            )));
        }
        let mut out = Map::new();
        out.insert("capture".into(), capture_block(&s, &h, &space));
        if found.is_empty() {
            out.insert("kernels".into(), json!([]));
            out.insert(
                "note".into(),
                json!("No custom-call invocations matched. Run check_kernel_profiling to verify capture flags."),
            );
        } else {
            // T4: confirm the overlap heuristic with the run's HLO protos when they exist.
            let protos: Vec<_> = s
                .hlo_protos
                .iter()
                .map(|p| {
                    call.read_file(p);
                    let name = p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let calls = xprof_xspace::file::read(p)
                        .map_err(|e| e.to_string())
                        .and_then(|b| xprof_llo::trace::hlo_custom_calls(&b));
                    (name, calls)
                })
                .collect();
            let mut found = found;
            xprof_llo::trace::confirm_with_hlo(&mut found, &protos);
            out.extend(found);
        }
        out.insert(
            "provenance".into(),
            xprof_llo::provenance(
                &["spans_ps", "bundle_markers", "hlo_confirmation"],
                &["count", "total_us", "mean_us", "p50_us", "min_us", "max_us", "bundle_address_range"],
                &["kernel (an XLA Ops event overlapping instrumentation events; see hlo_confirmation)"],
            ),
        );
        Ok(Value::Object(out).into())
    }
}
