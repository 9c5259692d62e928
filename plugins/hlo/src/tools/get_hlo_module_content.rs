use serde_json::{Map, json};
use xprof_hlo::print::{PrintOptions, print_module};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{capture_text, load_module, module_param, no_hlo, truncation_note};

pub struct GetHloModuleContent;
register_tool!(GetHloModuleContent);

impl Tool for GetHloModuleContent {
    fn name(&self) -> &'static str {
        "get_hlo_module_content"
    }
    fn summary(&self) -> &'static str {
        "Print a captured HLO module as XLA prints it"
    }
    fn doc(&self) -> &'static str {
        "Print one HLO module of a capture as XLA's HloModule::ToString does (XProf graph viewer \
         long_txt: %names, computation signatures, control predecessors; large constants in \
         full), optionally with metadata={...}; --form short gives XLA's short parsable form \
         (what XProf's own CLI returns). Truncated to max_lines (<= 0: all)."
    }
    fn params(&self) -> Params {
        module_param(Params::new().capture())
            .string_enum("fmt", "Output format (only text).", &["text"], "text")
            .integer("max_lines", "Keep the first N lines (<= 0: all).", Some(2000))
            .boolean("print_metadata", "Print metadata={op_name=... source_file=...}.", false)
            .string_enum(
                "form",
                "long: XProf graph viewer long_txt (the seed's output); short: XLA's short parsable form (XProf's own CLI).",
                &["long", "short"],
                "long",
            )
    }
    fn output(&self) -> &'static str {
        "{format: \"hlo_text\", text, capture, module_name, line_count, returned_line_count, truncated, available_modules (omitted when the module was found as a file by its exact name)}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "The matmul module of the bundled capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul"}),
            )
            .expect(&["text", "module_name"]),
            Example::new(
                "jit_train_step with metadata, first 50 lines",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train",
                       "module_name": "jit_train_step(8)", "print_metadata": true, "max_lines": 50}),
            )
            .expect(&["text", "truncated"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let max = call.i64_or("max_lines", 2000)?;
        let metadata = call.bool_or("print_metadata", false)?;
        let base = if call.str_or("form", "long")? == "short" {
            PrintOptions::short()
        } else {
            PrintOptions::long()
        };
        let Some(lm) = load_module(call)? else {
            return Ok(no_hlo());
        };
        let text = print_module(&lm.proto, &PrintOptions { metadata, ..base });
        let (mut body, total, truncated) = xprof_hlo::dump::truncate_lines(&text, max);
        if truncated {
            body.push_str(&truncation_note(max, total));
        }
        let mut extra = Map::new();
        extra.insert("capture".into(), lm.capture_block());
        extra.insert("module_name".into(), json!(lm.module.name));
        extra.insert("line_count".into(), json!(total));
        extra.insert(
            "returned_line_count".into(),
            json!(if truncated { max as usize } else { total }),
        );
        extra.insert("truncated".into(), json!(truncated));
        if let Some(a) = &lm.available {
            extra.insert("available_modules".into(), json!(a));
        }
        Ok(capture_text(lm.capture_block(), "hlo_text", body, extra))
    }
}
