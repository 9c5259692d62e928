use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{dump_dir, dump_dir_param};

pub struct ListHloDumpModules;
register_tool!(ListHloDumpModules);

impl Tool for ListHloDumpModules {
    fn name(&self) -> &'static str {
        "list_hlo_dump_modules"
    }
    fn summary(&self) -> &'static str {
        "List the modules and stages of an XLA HLO dump directory"
    }
    fn doc(&self) -> &'static str {
        "List the HLO modules of an XLA dump directory (--xla_dump_to) and the stages each one \
         has: before_optimizations / after_optimizations (a <backend>_after_optimizations file \
         counts when no plain one exists), after_pass_<X>, and XLA's between-pass dumps as \
         pass_NNNN. File names may carry a .cl_<id> compile-id token. Non-stage files \
         (buffer assignment, memory report, protos, LLVM IR) are listed under also_available; \
         stages dumped as binary protos (--xla_dump_hlo_as_proto) are readable stages too."
    }
    fn params(&self) -> Params {
        dump_dir_param(Params::new())
    }
    fn output(&self) -> &'static str {
        "{dump_dir, module_count, modules: {<prefix>: {format, name, module_number, compile_id, stages, stage_aliases, \
         pass_count, pass_range, proto_stages, also_available}}, tip}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "The bundled dump of jit_train_step (pass dumps and cpu_after_optimizations)",
                json!({"dump_dir": "${FIXTURES}/jax-cpu/hlo_dump"}),
            )
            .expect(&["modules", "module_count"]),
            Example::new(
                "A dump written with --xla_dump_hlo_as_proto (stages are binary protos)",
                json!({"dump_dir": "${CORPUS}/fixtures/jax-cpu/hlo_dump/proto"}),
            )
            .expect(&["modules"]),
            Example::new(
                "The seed's TPU dump, whose file carries a .cl_<id> token",
                json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/hlo_dump"}),
            )
            .expect(&["modules"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let d = dump_dir(call)?;
        if d.modules.is_empty() {
            return Ok(ToolOutput::no_data(
                format!(
                    "no HLO dump files (module_NNNN.<name>.<stage>.txt) in {}",
                    d.dir.display()
                ),
                &["--xla_dump_to=<dir>", "--xla_dump_hlo_as_text"],
            ));
        }
        let mut modules = Map::new();
        for m in d.modules.values() {
            let mut o = Map::new();
            o.insert("format".into(), json!(m.format()));
            o.insert("name".into(), json!(m.name));
            o.insert("module_number".into(), json!(m.number));
            o.insert("compile_id".into(), json!(m.compile_id));
            let named: Vec<String> = m
                .stage_keys()
                .into_iter()
                .filter(|k| !k.starts_with("pass_"))
                .collect();
            o.insert("stages".into(), json!(named));
            let mut aliases = Map::new();
            for alias in ["before_optimizations", "after_optimizations"] {
                if let Ok((key, _)) = m.resolve_stage(alias)
                    && key != alias
                {
                    aliases.insert(alias.into(), json!(key));
                }
            }
            if !aliases.is_empty() {
                o.insert("stage_aliases".into(), Value::Object(aliases));
            }
            if !m.passes.is_empty() {
                let first = m.passes.keys().next().copied().unwrap_or_default();
                let last = m.passes.keys().next_back().copied().unwrap_or_default();
                o.insert("pass_count".into(), json!(m.passes.len()));
                o.insert(
                    "pass_range".into(),
                    json!(format!("pass_{first:04}..pass_{last:04}")),
                );
                o.insert(
                    "note".into(),
                    json!("Use 'before_optimizations'/'after_optimizations' or 'pass_NNNN'"),
                );
            }
            if !m.proto_stages.is_empty() {
                // Dumped with --xla_dump_hlo_as_proto: readable as stages (printed as XLA would).
                o.insert(
                    "proto_stages".into(),
                    json!(m.proto_stages.keys().collect::<Vec<_>>()),
                );
            }
            o.insert(
                "also_available".into(),
                json!(m.also_available.keys().collect::<Vec<_>>()),
            );
            modules.insert(m.prefix.clone(), Value::Object(o));
        }
        Ok(json!({
            "dump_dir": d.dir.display().to_string(),
            "module_count": d.modules.len(),
            "modules": modules,
            "tip": "Pass a module prefix (or part of one) to get_hlo_dump, diff_hlo_stages or get_hlo_dump_neighborhood.",
        })
        .into())
    }
}
