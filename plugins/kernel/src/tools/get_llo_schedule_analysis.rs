use serde_json::json;
use xprof_llo::{read_text, schedule};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{
    llo_dump_dir_param, open_dump, pick_pass, program_arg, program_param, run_lib, usize_arg,
};

pub struct GetLloScheduleAnalysis;
register_tool!(GetLloScheduleAnalysis);

impl Tool for GetLloScheduleAnalysis {
    fn name(&self) -> &'static str {
        "get_llo_schedule_analysis"
    }
    fn summary(&self) -> &'static str {
        "Bundle totals and the bundles owned by each HLO op / opcode of an LLO program"
    }
    fn doc(&self) -> &'static str {
        "Parse an LLO program's schedule-analysis pass (default \
         schedule-analysis_final_bundles): total / empty / non-empty scheduled bundles, and \
         the per-HLO-instruction and per-opcode bundle counts. Attributions are cut at 300 \
         characters (the raw HLO text carries megabyte backend configs). Static: bundle \
         counts, not time."
    }
    fn params(&self) -> Params {
        program_param(llo_dump_dir_param(Params::new()))
            .string_default(
                "pass_label",
                "Schedule-analysis pass: an exact label or a regex.",
                "schedule-analysis_final_bundles",
            )
            .integer_min("top_n", "Rows kept per table.", Some(20), 0)
    }
    fn output(&self) -> &'static str {
        "{program, pass, file, totals: {total_bundles, empty_bundles, non_empty_bundles}, per_hlo: [{bundles, pct, attribution}], per_opcode: [...], custom_call_evidence}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Schedule analysis of the v6e matmul kernel",
                json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump", "program": "matmul_optimized.1"}),
            )
            .expect(&["totals", "per_hlo", "per_opcode"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        run_lib(|| {
            let idx = open_dump(call)?;
            let program = program_arg(call)?;
            let top_n = usize_arg(call, "top_n", 20)?;
            let inst = idx.program(&program)?.primary();
            let choice = pick_pass(
                call,
                inst,
                "schedule-analysis_final_bundles",
                "schedule-analysis",
            )?;
            let path = idx.path_of(choice.pass);
            call.read_file(&path);
            let s = schedule::parse(&read_text(&path)?);
            let take =
                |rows: &[schedule::Row]| rows.iter().take(top_n).cloned().collect::<Vec<_>>();
            Ok(json!({
                "program": program,
                "pass": choice.pass.label,
                "file": choice.pass.file,
                "totals": s.totals,
                "per_hlo": take(&s.per_hlo),
                "per_opcode": take(&s.per_opcode),
                "custom_call_evidence": s.has_custom_call(),
                "selected_because": choice.selected_because,
                "semantics": "static bundle counts (compile-time schedule), not time",
                "provenance": xprof_llo::provenance(&["totals", "per_hlo", "per_opcode"], &[], &["custom_call_evidence"]),
                "provenance": xprof_llo::provenance(&["totals", "per_hlo", "per_opcode"], &[], &["custom_call_evidence"]),
            })
            .into())
        })
    }
}
