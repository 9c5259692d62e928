use serde_json::{Map, Value, json};
use xprof_llo::dir_from_arg_or_env;
use xprof_llo::dump::DumpIndex;
use xprof_llo::trace::utilization::{Window, decomposition, llo_utilization};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{capture_block, open_host, regex_arg, session, to_tool_error, trace_no_data};

pub struct GetLloUtilization;
register_tool!(GetLloUtilization);

impl Tool for GetLloUtilization {
    fn name(&self) -> &'static str {
        "get_llo_utilization"
    }
    fn summary(&self) -> &'static str {
        "Per-unit LLO utilization from a kernel-profiling trace's _counters_ line, with its alignment caveat"
    }
    fn doc(&self) -> &'static str {
        "Aggregates the _counters_ line (% util per unit: MXU, Scalar ALU, Vector ALU/Load/\
         Store/EUP, XLU; fills/spills counts) over the whole trace, a kernel's invocation \
         spans (--kernel, a regex) or an explicit ps range. Per unit: sample count, max, \
         unweighted mean/median, duration-weighted mean/median (XProf CLI's numbers), samples \
         whose duration exceeds the observed span (malformed; repaired when the value is the \
         owning kernel's absolute end), and the mean clipped to the window. The values are \
         LLO STATIC slot occupancy laid over measured intervals, not hardware counters: which \
         interval a value belongs to decides the headline, so alignment_check reports both \
         readings per region (compute / wait / named scopes) and verdict_corrected becomes \
         indeterminate when they disagree. With --dump_dir (the kernel's LLO dump) \
         decomposition gives measured stage time × the stage's static occupancy, joined \
         through the Tensor Core bundle markers."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .string("kernel", "Kernel (op name) regex from list_kernel_invocations: restricts to its spans.")
            .integer("start_time_ps", "Explicit window start (absolute ps).", None)
            .integer("end_time_ps", "Explicit window end (absolute ps).", None)
            .integer_min("timeline_buckets", "Also return a per-unit timeline with this many buckets (max 50).", Some(0), 0)
            .path("dump_dir", "The kernel's LLO dump (--xla_jf_dump_to) for the static-occupancy × stage-time decomposition. Default: $XLA_JF_DUMP_DIR.", Some("XLA_JF_DUMP_DIR"))
    }
    fn output(&self) -> &'static str {
        "{capture, <plane>: {window, units: {<unit>: {samples, max_util_pct, mean_util_pct_unweighted, p50_util_pct_unweighted, mean_util_pct, p50_util_pct, weighted_by, covered_ps, malformed_duration_samples?, repaired_samples?, mean_util_pct_clipped?, timeline_mean_pct?} | {total_count}}, verdict, semantics, alignment_check, verdict_corrected}, decomposition}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Unit utilization inside the v6e matmul kernel, joined with its LLO dump",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "kernel": "matmul_optimized", "dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump"}),
            )
            .expect(&["capture", "/device:TPU:0", "decomposition"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let kernel = call.opt_nonempty("kernel")?;
        let kernel_re = match &kernel {
            Some(_) => Some(regex_arg(call, "kernel", "")?),
            None => None,
        };
        let (start, end) = (call.opt_i64("start_time_ps")?, call.opt_i64("end_time_ps")?);
        let buckets = call.usize_or("timeline_buckets", 0)?;
        let window = match (&kernel, start, end) {
            (Some(k), _, _) => Window::Kernel(k.clone()),
            (None, None, None) => Window::Whole,
            (None, s, e) => Window::Range(s, e),
        };
        let dump_arg = call.opt_nonempty("dump_dir")?;
        let explicit = dump_arg.is_some();
        let dump = dir_from_arg_or_env(dump_arg.as_deref(), "XLA_JF_DUMP_DIR");
        let s = session(call)?;
        let (h, space) = open_host(call, &s)?;
        let Some(found) = llo_utilization(&space, &window, buckets) else {
            return Ok(trace_no_data(format!(
                "No _counters_ line found on any device plane of host {} (the LLO slot-utilization samples).",
                h.name
            )));
        };
        let mut out = Map::new();
        out.insert("capture".into(), capture_block(&s, &h, &space));
        out.extend(found);
        let decomp = match dump {
            None => {
                json!({"status": "not_requested", "reason": "pass --dump_dir (the kernel's --xla_jf_dump_to LLO dump) to join measured stage time with static occupancy"})
            }
            Some(dir) => 'join: {
                // The join is optional: a dump named explicitly must exist (path error), while
                // one that only comes from $XLA_JF_DUMP_DIR never fails the measurement.
                let idx = match DumpIndex::open(Some(dir.clone())) {
                    Ok(i) => i,
                    Err(e) if explicit && e.kind() == "path" => return Err(to_tool_error(e)),
                    Err(e) => {
                        break 'join json!({"status": "no_join", "dump_dir": dir.display().to_string(), "reason": e.to_string()});
                    }
                };
                call.read_dir(&idx.dir);
                let src = |p: &str| -> Result<Option<xprof_llo::matrix::Matrix>, String> {
                    let Ok(prog) = idx.program(p) else {
                        return Ok(None);
                    };
                    xprof_llo::fit::load_matrix(&idx, prog.primary())
                        .map(|o| o.map(|(_, _, m)| m))
                        .map_err(|e| e.to_string())
                };
                let re = kernel_re
                    .clone()
                    .unwrap_or_else(|| regex::Regex::new(".*").expect("valid"));
                let per: Map<String, Value> = xprof_llo::trace::device_planes(&space)
                    .iter()
                    .map(|p| (p.name().to_string(), decomposition(p, &re, &src)))
                    .collect();
                Value::Object(per)
            }
        };
        out.insert("decomposition".into(), decomp);
        out.insert(
            "provenance".into(),
            xprof_llo::provenance(
                &[
                    "units.*.samples",
                    "units.*.max_util_pct",
                    "units.*.total_count",
                ],
                &[
                    "units.*.mean_util_pct*",
                    "units.*.p50_util_pct*",
                    "units.*.covered_ps",
                    "units.*.mean_util_pct_clipped",
                    "alignment_check",
                    "decomposition",
                ],
                &[
                    "verdict",
                    "verdict_corrected",
                    "units.*.repaired_samples (duration read as the kernel's absolute end)",
                ],
            ),
        );
        Ok(Value::Object(out).into())
    }
}
