use serde_json::{Value, json};
use xprof_llo::fit::load_listing;
use xprof_llo::{matrix, read_text};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{
    llo_dump_dir_param, open_dump, pick_pass, program_arg, program_param, run_lib, usize_arg,
};

pub struct GetLloStaticUtilization;
register_tool!(GetLloStaticUtilization);

impl Tool for GetLloStaticUtilization {
    fn name(&self) -> &'static str {
        "get_llo_static_utilization"
    }
    fn summary(&self) -> &'static str {
        "Per-unit static slot occupancy and hot bundle ranges of an LLO program"
    }
    fn doc(&self) -> &'static str {
        "Parse the per-bundle utilization matrix (*-hlo-static-per-bundle-utilization.txt: unit \
         capacities, then slots used per unit for each bundle). Per unit: occupancy_pct \
         (mean used/capacity), nonzero_bundle_pct, saturated_bundle_pct. hot_ranges: the \
         longest runs of bundles dominated by one unit by raw slot count (XProf CLI's \
         numbers); hot_ranges_by_occupancy ranks by used/capacity, reports ties as `tie`, \
         and merges runs separated by <= merge_gap empty bundles. Address ranges are printed \
         only when the matrix rows and the bundle listing agree in count (row i = bundle i) \
         and can be passed to get_llo_bundles --address_range. Among several utilization \
         passes the final_ one wins, then the highest pass number. Static, not time."
    }
    fn params(&self) -> Params {
        program_param(llo_dump_dir_param(Params::new()))
            .string_default(
                "pass_label",
                "Utilization pass: an exact label or a regex.",
                "per-bundle-utilization",
            )
            .integer_min("hot_ranges", "How many hot ranges to report.", Some(5), 0)
            .integer_min(
                "merge_gap",
                "hot_ranges_by_occupancy: merge runs separated by at most this many empty bundles.",
                Some(0),
                0,
            )
    }
    fn output(&self) -> &'static str {
        "{program, pass, file, num_bundles, units: {<unit>: {capacity, occupancy_pct, nonzero_bundle_pct, saturated_bundle_pct}}, hot_ranges: [{bundle_range, address_range, length, dominant_unit}], hot_ranges_by_occupancy, alignment, semantics}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Static unit occupancy of the v6e matmul kernel",
                json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump", "program": "matmul_optimized.1"}),
            )
            .expect(&["units", "hot_ranges"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        run_lib(|| {
            let idx = open_dump(call)?;
            let program = program_arg(call)?;
            let hot = usize_arg(call, "hot_ranges", 5)?;
            let gap = usize_arg(call, "merge_gap", 0)?;
            let inst = idx.program(&program)?.primary();
            let choice = pick_pass(
                call,
                inst,
                "per-bundle-utilization",
                "per-bundle utilization",
            )?;
            let path = idx.path_of(choice.pass);
            call.read_file(&path);
            let m = matrix::parse(&read_text(&path)?, &path)?;
            // Row i is bundle i only if the listing has as many bundles as the matrix rows.
            let listing = load_listing(&idx, inst)?;
            let (bundles, aligned) = match &listing {
                Some((file, l, _)) => {
                    call.read_file(idx.dir.join(file));
                    (
                        Some(l.bundles.len()),
                        Some(l.bundles.len() == m.rows.len() && l.addresses_are_dense()),
                    )
                }
                None => (None, None),
            };
            let body = matrix::static_utilization_json(&m, hot, gap, aligned != Some(false));
            let mut out = serde_json::Map::new();
            out.insert("program".into(), json!(program));
            out.insert("pass".into(), json!(choice.pass.label));
            out.insert("file".into(), json!(choice.pass.file));
            out.extend(body);
            out.insert(
                "alignment".into(),
                json!({
                    "matrix_rows": m.rows.len(),
                    "bundles": bundles,
                    "aligned": aligned,
                    "note": match aligned {
                        Some(true) => "matrix rows = bundle addresses 0..n: address ranges are bundle addresses",
                        Some(false) => "matrix rows and bundle listing disagree: address ranges omitted",
                        None => "no final_bundles listing to check against: address ranges assume row i = bundle i",
                    },
                }),
            );
            out.insert("selected_because".into(), json!(choice.selected_because));
            out.insert("also_matched".into(), json!(choice.also_matched));
            out.insert(
                "semantics".into(),
                json!("static slot occupancy per bundle (compile-time)"),
            );
            out.insert(
                "provenance".into(),
                xprof_llo::provenance(
                    &[
                        "num_bundles",
                        "units.*.capacity",
                        "malformed_rows",
                        "alignment",
                    ],
                    &[
                        "units.*.occupancy_pct",
                        "units.*.nonzero_bundle_pct",
                        "units.*.saturated_bundle_pct",
                        "hot_ranges",
                        "hot_ranges_by_occupancy",
                    ],
                    &[],
                ),
            );
            Ok(Value::Object(out).into())
        })
    }
}
