use serde_json::{Value, json};
use xprof_llo::dump::{checkpoints, classify, custom_call_evidence};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{llo_dump_dir_param, open_dump, path_string, run_lib};

pub struct ListLloPrograms;
register_tool!(ListLloPrograms);

impl Tool for ListLloPrograms {
    fn name(&self) -> &'static str {
        "list_llo_programs"
    }
    fn summary(&self) -> &'static str {
        "List the LLO programs and pass checkpoints of a TPU LLO dump (start here)"
    }
    fn doc(&self) -> &'static str {
        "Index an LLO dump directory (written by LIBTPU_INIT_ARGS=\"--xla_jf_dump_to=<dir> \
         --xla_jf_dump_llo_text=true\"; XLA's --xla_dump_to alone does NOT write LLO files). \
         Files are <ts>-<program>-<NN>-<pass_label>.txt. For each program: its kind \
         (kernel / fusion / infrastructure, by name as XProf's CLI does, plus \
         custom_call_evidence read from the schedule analysis or the entry bundle), its \
         compile instances (timestamps; the primary one has the most passes, ties to the \
         newest), and which analysis checkpoints exist (final_bundles, per-bundle \
         utilization, schedule analysis, static gaps). Kernels are listed first."
    }
    fn params(&self) -> Params {
        llo_dump_dir_param(Params::new())
    }
    fn output(&self) -> &'static str {
        "{dump_dir, programs: [{program, kind, compile_instances, primary_instance_ts, num_passes, checkpoints: {final_bundles, per_bundle_utilization, schedule_analysis, static_gap_analysis}, custom_call_evidence, evidence_source, passes}]}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Programs of the shared TPU v6e LLO dump",
                json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/jf_dump"}),
            )
            .expect(&["dump_dir", "programs"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        run_lib(|| {
            let idx = open_dump(call)?;
            let mut out: Vec<(bool, String, Value)> = Vec::new();
            for (name, prog) in &idx.programs {
                let inst = prog.primary();
                let (evidence, source) = custom_call_evidence(&idx, inst);
                let kind = classify(name);
                let mut passes: Vec<_> = inst.passes.values().collect();
                passes.sort_by_key(|p| (p.num, p.label.clone()));
                out.push((
                    kind.as_str() != "kernel",
                    name.clone(),
                    json!({
                        "program": name,
                        "kind": kind.as_str(),
                        "compile_instances": prog.instances.len(),
                        // The seed prints the timestamp as a number; it is < 2^63 ns.
                        "primary_instance_ts": inst.ts,
                        "num_passes": inst.passes.len(),
                        "checkpoints": checkpoints(inst),
                        "custom_call_evidence": evidence,
                        "evidence_source": source,
                        "passes": passes.iter().map(|p| json!({"num": p.num, "label": p.label})).collect::<Vec<_>>(),
                    }),
                ));
            }
            out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            let mut res = json!({
                "dump_dir": path_string(&idx.dir),
                "programs": out.into_iter().map(|(_, _, v)| v).collect::<Vec<_>>(),
            });
            res["provenance"] = xprof_llo::provenance(
                &[
                    "programs[].compile_instances",
                    "programs[].num_passes",
                    "programs[].checkpoints",
                    "programs[].passes",
                    "programs[].custom_call_evidence",
                ],
                &["programs[].primary_instance_ts (most passes, ties to the newest)"],
                &["programs[].kind (from the program name, as XProf's CLI does)"],
            );
            if !idx.unparsed_files.is_empty() {
                res["unparsed_files"] = json!(idx.unparsed_files);
            }
            Ok(res.into())
        })
    }
}
