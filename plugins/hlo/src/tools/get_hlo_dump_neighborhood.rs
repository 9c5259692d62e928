use serde_json::{Map, json};
use xprof_hlo::graph::{Graph, render_neighborhood};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{
    Walk, dump_dir, dump_dir_param, hlo_error, max_nodes_param, read_stage, walk_args, walk_params,
};

pub struct GetHloDumpNeighborhood;
register_tool!(GetHloDumpNeighborhood);

impl Tool for GetHloDumpNeighborhood {
    fn name(&self) -> &'static str {
        "get_hlo_dump_neighborhood"
    }
    fn summary(&self) -> &'static str {
        "Instructions within N hops of one instruction, from an XLA HLO dump"
    }
    fn doc(&self) -> &'static str {
        "Breadth-first search from one instruction over operand and user edges (operands from the \
         operand list only; calls=/to_apply= and metadata never count), up to `radius` hops, in \
         one stage of one module of an XLA dump directory. ROOT instructions are included. Each \
         node carries its computation, distance and direction (operand = upstream, user = \
         downstream)."
    }
    fn params(&self) -> Params {
        let p = dump_dir_param(
            Params::new()
                .string(
                    "instruction_name",
                    "Instruction name, with or without a leading %.",
                )
                .required("instruction_name")
                .string("module_pattern", "Module prefix, name or glob.")
                .required("module_pattern"),
        )
        .string_default("stage", "Stage key or alias.", "after_optimizations");
        max_nodes_param(walk_params(p))
    }
    fn output(&self) -> &'static str {
        "{format: \"text\", text, module, stage, target, radius, nodes: [{name, computation, opcode, distance, direction, is_root, line}]}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Around the ROOT custom-call of the seed's TPU dump",
                json!({"dump_dir": "${CORPUS}/fixtures/seed-v6e/hlo_dump", "module_pattern": "matmul",
                       "instruction_name": "matmul_optimized.1"}),
            )
            .expect(&["nodes", "text"]),
            Example::new(
                "One hop around a parameter of jit_train_step",
                json!({"dump_dir": "${FIXTURES}/jax-cpu/hlo_dump", "module_pattern": "jit_train_step",
                       "instruction_name": "%params_0___w__.1", "radius": 1}),
            )
            .expect(&["nodes"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let name = call.req_str("instruction_name")?;
        let pattern = call.req_str("module_pattern")?;
        let stage = call.str_or("stage", "after_optimizations")?;
        let Walk {
            radius,
            direction,
            max_nodes,
            follow_calls,
        } = walk_args(call)?;
        let d = dump_dir(call)?;
        let sel = d.select(&pattern).map_err(hlo_error)?;
        let (_, path) = sel.module.resolve_stage(&stage).map_err(hlo_error)?;
        let text = read_stage(call, &path)?;
        let module = xprof_hlo::parse(&text, &path.display().to_string()).map_err(hlo_error)?;
        let g = Graph::new(&module);
        let target = g.find(&name).map_err(|e| {
            let mut t = hlo_error(e);
            t.message = format!("{} (stage {stage} of {})", t.message, sel.module.prefix);
            t
        })?;
        let nodes = g.neighborhood_with(target, radius, direction, max_nodes, follow_calls);
        let tname = name.trim().trim_start_matches('%');
        let out = format!(
            "Neighborhood of '%{tname}' (radius={radius})\nStage: {stage}  Module: {}\n\n{}",
            sel.module.prefix,
            render_neighborhood(&nodes)
        );
        let mut extra = Map::new();
        extra.insert("module".into(), json!(sel.module.prefix));
        extra.insert("stage".into(), json!(stage));
        extra.insert("file".into(), json!(path.display().to_string()));
        extra.insert("target".into(), json!(tname));
        extra.insert("radius".into(), json!(radius));
        extra.insert("direction".into(), json!(direction));
        extra.insert("nodes".into(), json!(nodes));
        Ok(ToolOutput::text("text", out, extra))
    }
}
