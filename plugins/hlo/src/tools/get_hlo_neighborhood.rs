use serde_json::{Map, json};
use xprof_hlo::graph::Graph;
use xprof_hlo::print::{PrintOptions, print_module};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{
    Walk, capture_text, hlo_error, load_module, max_nodes_param, module_param, no_hlo, walk_args,
    walk_params,
};

pub struct GetHloNeighborhood;
register_tool!(GetHloNeighborhood);

impl Tool for GetHloNeighborhood {
    fn name(&self) -> &'static str {
        "get_hlo_neighborhood"
    }
    fn summary(&self) -> &'static str {
        "Instructions within N hops of one instruction of a captured module"
    }
    fn doc(&self) -> &'static str {
        "Breadth-first search from one instruction of a captured module over operand and user \
         edges (operand lists only; called computations and metadata are not edges), up to \
         `radius` hops. ROOT instructions are included. Each node carries its computation, \
         distance and direction (operand = upstream, user = downstream). Lines are XLA's short \
         form, as XProf's CLI prints them."
    }
    fn params(&self) -> Params {
        let p = module_param(Params::new().capture())
            .string(
                "instruction_name",
                "Instruction name, with or without a leading %.",
            )
            .string(
                "op_name",
                "XProf's agent CLI's other name for --instruction_name.",
            );
        max_nodes_param(
            walk_params(p).string_enum("fmt", "Text layout.", &["text", "markdown"], "text"),
        )
        .boolean(
            "print_metadata",
            "Include metadata={...} in the lines.",
            false,
        )
        .string_list(
            "opcode_filter",
            "Show only nodes with these opcodes (the search still walks through all; the target is always shown).",
        )
    }
    fn output(&self) -> &'static str {
        "{format: \"text\", text, capture, module_name, target, radius, nodes: [{name, computation, opcode, distance, direction, is_root, line}]}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Around the fusion of the bundled matmul capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul", "instruction_name": "%ynn_fusion"}),
            )
            .expect(&["nodes", "text"]),
            Example::new(
                "Upstream of the TPU kernel's ROOT custom-call",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "instruction_name": "matmul_optimized.1",
                       "direction": "operands", "radius": 1}),
            )
            .expect(&["nodes"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let Walk {
            radius,
            direction,
            max_nodes,
            follow_calls,
        } = walk_args(call)?;
        let markdown = call.str_or("fmt", "text")? == "markdown";
        let metadata = call.bool_or("print_metadata", false)?;
        let filter = call.str_list("opcode_filter")?;
        let Some(lm) = load_module(call)? else {
            return Ok(no_hlo());
        };
        // After the capture, so that a missing capture is a path error whatever else is missing.
        let name = match call.opt_nonempty("instruction_name")? {
            Some(n) => n,
            None => call.opt_nonempty("op_name")?.ok_or_else(|| {
                ToolError::usage("get_hlo_neighborhood needs --instruction_name (or --op_name)")
            })?,
        };
        let text = print_module(
            &lm.proto,
            &PrintOptions {
                metadata,
                ..PrintOptions::short()
            },
        );
        let parsed = xprof_hlo::parse(&text, &lm.module.name)
            .map_err(|e| crate::common::proto_module_error(&lm.module.name, e))?;
        let g = Graph::new(&parsed);
        let target = g.find(&name).map_err(hlo_error)?;
        let mut nodes = g.neighborhood_with(target, radius, direction, 0, follow_calls);
        if !filter.is_empty() {
            nodes.retain(|n| n.distance == 0 || filter.iter().any(|f| f == &n.opcode));
        }
        if max_nodes > 0 {
            nodes.truncate(max_nodes);
        }
        let tname = name.trim().trim_start_matches('%');
        let mut out = if markdown {
            format!("### Neighborhood of '{tname}' (radius={radius}):\n")
        } else {
            format!("Neighborhood of '{tname}' (radius={radius}):\n")
        };
        for n in &nodes {
            let lead = if markdown { "- " } else { "  " };
            out.push_str(&format!(
                "{lead}[dist={}] [{}] {}\n",
                n.distance, n.computation, n.line
            ));
        }
        let mut extra = Map::new();
        extra.insert("capture".into(), lm.capture_block());
        extra.insert("module_name".into(), json!(lm.module.name));
        extra.insert("target".into(), json!(tname));
        extra.insert("radius".into(), json!(radius));
        extra.insert("direction".into(), json!(direction));
        extra.insert("nodes".into(), json!(nodes));
        Ok(capture_text(lm.capture_block(), "text", out, extra))
    }
}
