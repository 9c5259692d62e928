use regex::Regex;
use serde_json::{Map, Value, json};
use xprof_llo::bundles::{self, parse_address_range};
use xprof_llo::{LloError, hex, read_text};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{
    llo_dump_dir_param, open_dump, pick_pass, program_arg, program_param, run_lib, tool_to_llo,
    usize_arg,
};

pub struct GetLloBundles;
register_tool!(GetLloBundles);

/// Hard cap on returned bundles (the seed's).
const MAX_LIMIT: usize = 500;

impl Tool for GetLloBundles {
    fn name(&self) -> &'static str {
        "get_llo_bundles"
    }
    fn summary(&self) -> &'static str {
        "Windowed access to the VLIW bundle listing of an LLO program"
    }
    fn doc(&self) -> &'static str {
        "Bundles from an LLO program's final_bundles listing: instructions per bundle with HLO \
         attribution and loop-region markers. Narrow with address_range (`0x<lo>-0x<hi>` or \
         one `0x<addr>`, inclusive — the addresses printed by get_llo_static_utilization \
         hot ranges and by list_kernel_invocations' Tensor Core markers) or grep (a regex \
         matched against the WHOLE logical bundle, multi-line comments included; \
         `in_comment` says when a hit is only inside /* */ comments). Control-target bundles \
         (`0x1a LB:`) and column-0 continuation lines are parsed, so every bundle is \
         listed. Per bundle: ct_marker, loop_depth (number of `>`), hlo (carried forward \
         from the last `hlo:` attribution), regions."
    }
    fn params(&self) -> Params {
        program_param(llo_dump_dir_param(Params::new()))
            .string_default(
                "pass_label",
                "Bundle listing pass: an exact label or a regex.",
                "final_bundles",
            )
            .string(
                "address_range",
                "`0x<lo>-0x<hi>` or a single `0x<addr>` (inclusive).",
            )
            .string(
                "grep",
                "Regex over the whole bundle text, e.g. `dma\\.hbm_to_vmem`.",
            )
            .integer_min(
                "limit",
                "Max bundles returned (hard cap 500).",
                Some(100),
                0,
            )
    }
    fn output(&self) -> &'static str {
        "{program, pass, file, total_matched, returned, truncated, bundles: [{address, text, ct_marker, loop_depth, hlo, regions, in_comment?}], hint}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Bundles 0x19-0x1b, including the LB-marked loop head",
                json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump", "program": "matmul_optimized.1", "address_range": "0x19-0x1b"}),
            )
            .expect(&["bundles", "total_matched"]),
            Example::new(
                "HBM→VMEM DMA bundles",
                json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump", "program": "matmul_optimized.1", "grep": "dma\\.hbm_to_vmem", "limit": 3}),
            )
            .expect(&["bundles", "truncated"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        run_lib(|| {
            let idx = open_dump(call)?;
            let program = program_arg(call)?;
            let limit = usize_arg(call, "limit", 100)?.min(MAX_LIMIT);
            let range = match call.opt_nonempty("address_range").map_err(tool_to_llo)? {
                Some(r) => Some(parse_address_range(&r)?),
                None => None,
            };
            let grep = match call.opt_nonempty("grep").map_err(tool_to_llo)? {
                Some(g) => Some(Regex::new(&g).map_err(|e| LloError::InvalidArg {
                    arg: "grep",
                    message: format!("not a valid regex: {e}"),
                })?),
                None => None,
            };
            let inst = idx.program(&program)?.primary();
            let choice = pick_pass(call, inst, "final_bundles", "final_bundles listing")?;
            let path = idx.path_of(choice.pass);
            call.read_file(&path);
            let listing = bundles::parse(&read_text(&path)?, &path)?;
            let sel = bundles::select(&listing, range, grep.as_ref());
            let total = sel.len();
            let out: Vec<Value> = sel
                .iter()
                .take(limit)
                .map(|s| {
                    let b = s.bundle;
                    let mut o = Map::new();
                    o.insert("address".into(), json!(hex(b.address)));
                    o.insert("text".into(), json!(b.text));
                    o.insert("ct_marker".into(), json!(b.ct_marker));
                    o.insert("loop_depth".into(), json!(b.loop_depth));
                    o.insert("hlo".into(), json!(s.hlo_carried));
                    o.insert("regions".into(), json!(b.regions));
                    o.insert("line".into(), json!(b.line));
                    if let Some(c) = s.in_comment {
                        o.insert("in_comment".into(), json!(c));
                    }
                    Value::Object(o)
                })
                .collect();
            let mut res = json!({
                "program": program,
                "pass": choice.pass.label,
                "file": choice.pass.file,
                "total_matched": total,
                "returned": out.len(),
                "truncated": total > out.len(),
                "bundles": out,
                "hint": if total > limit { "Narrow with address_range / grep — listing truncated." } else { "" },
                "total_bundles": listing.bundles.len(),
                "grep_scope": "whole logical bundle (continuation lines and comments included)",
            });
            if let Some((lo, hi)) = range
                && total == 0
            {
                res["note"] = json!(format!(
                    "no bundle in {}-{}; this listing spans {}-{}",
                    hex(lo),
                    hex(hi),
                    hex(listing.bundles.first().map(|b| b.address).unwrap_or(0)),
                    hex(listing.bundles.last().map(|b| b.address).unwrap_or(0))
                ));
            }
            res["provenance"] = xprof_llo::provenance(
                &[
                    "bundles[].text",
                    "bundles[].ct_marker",
                    "bundles[].loop_depth",
                    "bundles[].regions",
                    "total_matched",
                ],
                &[
                    "bundles[].hlo (carried forward from the last explicit hlo: attribution)",
                    "bundles[].in_comment",
                ],
                &[],
            );
            Ok(res.into())
        })
    }
}
