use serde_json::{Map, json};
use xprof_hlo::print::{PrintOptions, print_module};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{hlo_error, load_module, module_param, no_hlo};

pub struct GetHloText;
register_tool!(GetHloText);

impl Tool for GetHloText {
    fn name(&self) -> &'static str {
        "get_hlo_text"
    }
    fn summary(&self) -> &'static str {
        "A captured module's HLO text (short form), optionally one computation or saved to a file"
    }
    fn doc(&self) -> &'static str {
        "The HLO text of a captured module in XLA's short parsable form (XProf's get_hlo_text / \
         graph viewer short_txt). With --op_name, only the computation that defines that \
         instruction. With --output_path, the full text is also written to that file (never \
         into the run directory), e.g. to diff two sessions."
    }
    fn params(&self) -> Params {
        module_param(Params::new().capture())
            .string(
                "op_name",
                "Restrict to the computation defining this instruction.",
            )
            .integer(
                "max_lines",
                "Keep the first N lines in `content` (<= 0: all).",
                Some(0),
            )
            .path(
                "output_path",
                "Also write the full text to this file.",
                None,
            )
    }
    fn output(&self) -> &'static str {
        "{capture, status, module_name, op_name, saved_to_path, truncated, line_count, returned_line_count, byte_count, content}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Short-form text of the bundled matmul module",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul"}),
            )
            .expect(&["content", "line_count"]),
            Example::new(
                "Only the computation holding the TPU kernel's custom-call",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "op_name": "matmul_optimized.1"}),
            )
            .expect(&["content"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let op = call.opt_nonempty("op_name")?;
        let max = call.i64_or("max_lines", 0)?;
        let out_path = call.opt_nonempty("output_path")?;
        let Some(lm) = load_module(call)? else {
            return Ok(no_hlo());
        };
        let full = print_module(&lm.proto, &PrintOptions::short());
        let text = match &op {
            None => full.clone(),
            Some(op) => {
                let parsed = xprof_hlo::parse(&full, &lm.module.name)
                    .map_err(|e| crate::common::proto_module_error(&lm.module.name, e))?;
                let g = xprof_hlo::Graph::new(&parsed);
                let (ci, _) = g.find(op).map_err(hlo_error)?;
                let start = parsed.computations[ci].line;
                full.lines()
                    .skip(start - 1)
                    .take_while(|l| *l != "}")
                    .chain(std::iter::once("}"))
                    .collect::<Vec<_>>()
                    .join("\n")
                    + "\n"
            }
        };
        let mut saved = None;
        if let Some(p) = out_path {
            // Nothing is ever written into a run directory (XProf's caches live elsewhere).
            let abs = std::path::absolute(&p).unwrap_or_else(|_| p.clone().into());
            let run =
                std::path::absolute(&lm.session.dir).unwrap_or_else(|_| lm.session.dir.clone());
            if abs.parent().is_some_and(|d| d.starts_with(&run)) {
                return Err(ToolError::invalid(format!(
                    "--output_path {p} is inside the run directory {}",
                    run.display()
                ))
                .with_hint("write the text somewhere else (e.g. /tmp/module.hlo); run directories are never modified"));
            }
            std::fs::write(&p, &text).map_err(|e| {
                ToolError::path(format!("cannot write {p}: {e}"))
                    .with_hint("pass a writable --output_path (a file, not a directory)")
            })?;
            saved = Some(p);
        }
        let (content, total, truncated) = xprof_hlo::dump::truncate_lines(&text, max);
        let mut o = Map::new();
        o.insert("capture".into(), lm.capture_block());
        o.insert("status".into(), json!("SUCCESS"));
        o.insert("module_name".into(), json!(lm.module.name));
        o.insert("op_name".into(), json!(op));
        o.insert("saved_to_path".into(), json!(saved));
        o.insert("truncated".into(), json!(truncated));
        o.insert("line_count".into(), json!(total));
        o.insert(
            "returned_line_count".into(),
            json!(if truncated { max as usize } else { total }),
        );
        o.insert("byte_count".into(), json!(text.len()));
        o.insert("content".into(), json!(content));
        Ok(ToolOutput::json(o.into()))
    }
}
