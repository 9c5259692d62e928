use serde_json::{Map, Value, json};
use xprof_llo::dir_from_arg_or_env;
use xprof_llo::fit::{self, fit_data};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{llo_dump_dir_param, open_dump, run_lib, tool_to_llo, usize_arg};

pub struct GetLloFitSummary;
register_tool!(GetLloFitSummary);

impl Tool for GetLloFitSummary {
    fn name(&self) -> &'static str {
        "get_llo_fit_summary"
    }
    fn summary(&self) -> &'static str {
        "Kernel fit digest of an LLO dump: VMEM, MXU, unit split, spills, stall timeline, levers"
    }
    fn doc(&self) -> &'static str {
        "A <= 30-line markdown digest, then the full JSON in a ```json fence, composed from the \
         same parsers as the other get_llo_* tools (numbers agree by construction): VMEM \
         allocated vs the 32 MiB scoped default and 128 MiB hardware VMEM (the operative \
         limit is --xla_tpu_scoped_vmem_limit_kib, not recorded in the dump); MXU mnemonics, \
         dtypes and operand lane width (three-valued: only positive evidence gives 128/256); \
         per-unit static occupancy; spill/fill totals; per-bundle timeline classes and the \
         longest MXU-idle stall runs with their HLO attribution; ranked INFERRED levers with \
         bundle-count ceilings and their measured track record; verdict_class. With \
         diff_dump_dir, scalar deltas (before = diff_dump_dir, after = dump_dir). Everything \
         is STATIC (compile-time), not measured time. Default program: the kernel with the \
         most passes."
    }
    fn params(&self) -> Params {
        llo_dump_dir_param(Params::new())
            .string(
                "program",
                "LLO program name; default: the kernel-classified program with the most passes.",
            )
            .integer_min("top_stalls", "Stall runs reported.", Some(5), 0)
            .path(
                "diff_dump_dir",
                "A second dump directory to compare against (the 'before').",
                None,
            )
            .path(
                "hlo_dump_dir",
                "The XLA dump (--xla_dump_to) of the same run: its flagfile / tpu_comp_env gives the operative scoped VMEM limit. Default: $XLA_HLO_DUMP_DIR.",
                Some("XLA_HLO_DUMP_DIR"),
            )
    }
    fn output(&self) -> &'static str {
        "{format: \"markdown\", text: <digest + fenced JSON>, summary: {dump_dir, program, kind, other_programs, vmem, mxu, units, spills, timeline, totals, recommendations, verdict, verdict_class, provenance, caveat, alignment, files, diff?}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new("Fit summary of the v6e matmul dump", json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump"}))
                .expect(&["text", "summary"]),
            Example::new(
                "Diff a dump against itself (no changes)",
                json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump", "diff_dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump"}),
            )
            .expect(&["text", "summary"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        run_lib(|| {
            let idx = open_dump(call)?;
            let top = usize_arg(call, "top_stalls", 5)?;
            let program = call.opt_nonempty("program").map_err(tool_to_llo)?;
            let mut data = fit_data(&idx, program.as_deref(), top)?;
            for f in data["files"].as_array().cloned().unwrap_or_default() {
                if let Some(f) = f.as_str() {
                    call.read_file(idx.dir.join(f));
                }
            }
            if let Some(other) = dir_from_arg_or_env(
                call.opt_nonempty("diff_dump_dir")
                    .map_err(tool_to_llo)?
                    .as_deref(),
                "",
            ) {
                call.read_dir(&other);
                fit::add_diff(&mut data, &other, top);
            }
            let hlo_arg = call.opt_nonempty("hlo_dump_dir").map_err(tool_to_llo)?;
            let explicit = hlo_arg.is_some();
            let mut hlo = dir_from_arg_or_env(hlo_arg.as_deref(), "XLA_HLO_DUMP_DIR");
            if let Some(h) = hlo.clone() {
                if h.is_dir() {
                    call.read_dir(&h);
                } else if explicit {
                    return Err(xprof_llo::LloError::NotFound {
                        path: h,
                        what: "HLO dump directory (--hlo_dump_dir; written by --xla_dump_to)",
                    });
                } else {
                    // A stale $XLA_HLO_DUMP_DIR must not fail the summary: the limit is
                    // then simply not found.
                    hlo = None;
                }
            }
            fit::add_operative_limit(&mut data, hlo.as_deref());
            let text = fit::render(&data, top);
            let mut extra = Map::new();
            extra.insert("summary".into(), Value::Object(data));
            Ok(ToolOutput::text("markdown", text, extra))
        })
    }
}
