use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{Map, json};
use xprof_hlo::dot::{computation_dot, neighborhood_dot};
use xprof_hlo::graph::Graph;
use xprof_hlo::print::{ModuleView, PrintOptions};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{capture_text, hlo_error, load_module, module_param, no_hlo, truncation_note};

pub struct GetGraphViewer;
register_tool!(GetGraphViewer);

const TYPES: &[&str] = &["short_txt", "long_txt", "adj_nodes", "dot", "svg", "graph"];

impl Tool for GetGraphViewer {
    fn name(&self) -> &'static str {
        "get_graph_viewer"
    }
    fn summary(&self) -> &'static str {
        "XProf's graph viewer: module text, adjacent nodes, or a DOT/SVG graph"
    }
    fn doc(&self) -> &'static str {
        "XProf's graph_viewer for a captured module. short_txt (default) and long_txt are the \
         module text exactly as XProf 2.24.2 returns it; adj_nodes lists a node's operands and \
         consumers; dot (alias graph) renders a computation (node_name names a computation, or \
         none = the entry) or the neighborhood of an instruction within graph_width hops, with \
         stable node ids; svg pipes that DOT through Graphviz's `dot` when it is installed."
    }
    fn params(&self) -> Params {
        module_param(Params::new().capture())
            .string_enum("output_type", "What to return.", TYPES, "short_txt")
            .string(
                "node_name",
                "Instruction (or computation, for dot/svg) to centre on.",
            )
            .integer_min(
                "graph_width",
                "Neighborhood radius for dot/svg.",
                Some(3),
                0,
            )
            .boolean(
                "show_metadata",
                "Include metadata={...} in text outputs.",
                false,
            )
            .integer(
                "max_lines",
                "Keep the first N lines of text outputs (<= 0: all).",
                Some(0),
            )
    }
    fn output(&self) -> &'static str {
        "text types: {format, text, capture, module_name, output_type, line_count, truncated}; adj_nodes: \
         {capture, module_name, node_name, consumer_names, operand_names}; dot/svg: {format, text, node_count, edge_count}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Module text of the bundled matmul capture (XProf short_txt)",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul"}),
            )
            .expect(&["text"]),
            Example::new(
                "Operands and consumers of a fusion",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul", "output_type": "adj_nodes",
                       "node_name": "ynn_fusion"}),
            )
            .expect(&["operand_names", "consumer_names"]),
            Example::new(
                "DOT of the neighborhood of the TPU kernel",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "output_type": "dot",
                       "node_name": "matmul_optimized.1", "graph_width": 2}),
            )
            .expect(&["text", "node_count"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let ty = call.str_or("output_type", "short_txt")?;
        let node = call.opt_nonempty("node_name")?;
        let width = call.usize_or("graph_width", 3)?;
        let metadata = call.bool_or("show_metadata", false)?;
        let max = call.i64_or("max_lines", 0)?;
        let Some(lm) = load_module(call)? else {
            return Ok(no_hlo());
        };
        let view = ModuleView::new(&lm.proto);
        let mut extra = Map::new();
        extra.insert("capture".into(), lm.capture_block());
        extra.insert("module_name".into(), json!(lm.module.name));
        extra.insert("output_type".into(), json!(ty));
        match ty.as_str() {
            "short_txt" | "long_txt" => {
                let base = if ty == "short_txt" {
                    PrintOptions::short()
                } else {
                    PrintOptions::long()
                };
                let text = view.print(&PrintOptions { metadata, ..base });
                let (mut body, total, truncated) = xprof_hlo::dump::truncate_lines(&text, max);
                if truncated {
                    body.push_str(&truncation_note(max, total));
                }
                extra.insert("line_count".into(), json!(total));
                extra.insert("truncated".into(), json!(truncated));
                Ok(capture_text(lm.capture_block(), "hlo_text", body, extra))
            }
            "adj_nodes" => {
                let node = node.ok_or_else(|| {
                    ToolError::usage("output_type=adj_nodes needs --node_name")
                        .with_hint("pass --node_name <instruction>")
                })?;
                let name = node.trim().trim_start_matches('%');
                let (operands, users) = view.adjacent(name).ok_or_else(|| {
                    ToolError::invalid(format!(
                        "instruction '{name}' not found in module '{}'",
                        lm.module.name
                    ))
                    .with_hint("pass an instruction name as printed by get_hlo_text")
                })?;
                extra.remove("output_type");
                extra.insert("node_name".into(), json!(name));
                extra.insert("consumer_names".into(), json!(users));
                extra.insert("operand_names".into(), json!(operands));
                Ok(ToolOutput::json(extra.into()))
            }
            _ => {
                let text = view.print(&PrintOptions::short());
                let parsed = xprof_hlo::parse(&text, &lm.module.name)
                    .map_err(|e| crate::common::proto_module_error(&lm.module.name, e))?;
                let g = Graph::new(&parsed);
                let (dot, nodes, edges) = match node.as_deref() {
                    None => {
                        let entry = parsed.entry.unwrap_or(0);
                        computation_dot(&g, entry)
                    }
                    Some(n) => {
                        let n = n.trim().trim_start_matches('%');
                        if let Some(ci) = parsed.computations.iter().position(|c| c.name == n) {
                            computation_dot(&g, ci)
                        } else {
                            neighborhood_dot(&g, g.find(n).map_err(hlo_error)?, width)
                        }
                    }
                };
                extra.insert("node_count".into(), json!(nodes));
                extra.insert("edge_count".into(), json!(edges));
                if ty == "svg" {
                    let svg = render_svg(&dot)?;
                    Ok(capture_text(lm.capture_block(), "svg", svg, extra))
                } else {
                    Ok(capture_text(lm.capture_block(), "dot", dot, extra))
                }
            }
        }
    }
}

/// Run Graphviz's `dot -Tsvg`, if installed.
fn render_svg(dot: &str) -> Result<String, ToolError> {
    let child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ToolError::invalid(
                "output_type=svg needs Graphviz's `dot` program, which is not on PATH",
            )
            .with_hint(
                "install Graphviz (e.g. `apt-get install graphviz`), or use --output_type=dot and render it elsewhere",
            ));
        }
        Err(e) => return Err(ToolError::internal(format!("cannot run `dot`: {e}"))),
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(dot.as_bytes())
            .map_err(|e| ToolError::internal(format!("writing to `dot`: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| ToolError::internal(format!("waiting for `dot`: {e}")))?;
    if !out.status.success() {
        return Err(ToolError::internal(format!(
            "`dot -Tsvg` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
