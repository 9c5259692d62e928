use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{dump_dir, dump_dir_param, hlo_error, max_lines, read_stage, truncation_note};

/// The default `max_bytes`: well under the 10 MB spill, a few hundred KB of HLO text.
const MAX_BYTES: i64 = 1_000_000;

pub struct GetHloDump;
register_tool!(GetHloDump);

impl Tool for GetHloDump {
    fn name(&self) -> &'static str {
        "get_hlo_dump"
    }
    fn summary(&self) -> &'static str {
        "Print one stage of a module from an XLA HLO dump directory"
    }
    fn doc(&self) -> &'static str {
        "Print the HLO text of one module at one stage from an XLA dump directory. The module \
         pattern is a case-insensitive glob matched against the whole prefix or as *pattern*; an \
         exact prefix or module name wins. Stages: before_optimizations, after_optimizations \
         (aliases resolve to <backend>_after_optimizations or the first/last pass dump), \
         after_pass_<X>, pass_NNNN. Stages dumped as binary protos (--xla_dump_hlo_as_proto) are \
         printed as XLA prints a module."
    }
    fn params(&self) -> Params {
        dump_dir_param(
            Params::new()
                .string(
                    "module_pattern",
                    "Module prefix, name or glob (e.g. 'jit_train_step', 'module_0002.*').",
                )
                .required("module_pattern"),
        )
        .string_default("stage", "Stage key or alias.", "after_optimizations")
        .integer(
            "max_lines",
            "Keep the first N lines (<= 0: all).",
            Some(2000),
        )
        .integer(
            "max_bytes",
            "Keep at most N bytes of the text (<= 0: all); bounds a single huge line, which max_lines does not.",
            Some(MAX_BYTES),
        )
    }
    fn output(&self) -> &'static str {
        "{format: \"hlo_text\", text, module, stage, stage_key, file, line_count, truncated, also_matched}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "jit_train_step after optimizations (the cpu_after_optimizations file)",
                json!({"dump_dir": "${FIXTURES}/jax-cpu/hlo_dump", "module_pattern": "train_step", "max_lines": 40}),
            )
            .expect(&["text", "file"]),
            Example::new(
                "A pass dump by number",
                json!({"dump_dir": "${FIXTURES}/jax-cpu/hlo_dump", "module_pattern": "train_step", "stage": "pass_0008"}),
            )
            .expect(&["text"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let pattern = call.req_str("module_pattern")?;
        let stage = call.str_or("stage", "after_optimizations")?;
        let max = max_lines(call, 2000)?;
        let max_bytes = call.i64_or("max_bytes", MAX_BYTES)?;
        let d = dump_dir(call)?;
        let sel = d.select(&pattern).map_err(hlo_error)?;
        let (key, path) = sel.module.resolve_stage(&stage).map_err(hlo_error)?;
        let text = read_stage(call, &path)?;
        let (mut body, total, mut truncated) = xprof_hlo::dump::truncate_lines(&text, max);
        drop(text);
        let cut_bytes = xprof_hlo::dump::truncate_bytes(&mut body, max_bytes);
        let mut out = format!(
            "# {} — {}\n# File: {}\n\n{}",
            sel.module.prefix,
            stage,
            path.display(),
            body
        );
        if cut_bytes {
            out.push_str(&format!(
                "\n... (truncated after {max_bytes} bytes. Use max_bytes=-1 to see all)"
            ));
        } else if truncated {
            out.push_str(&truncation_note(max, total));
        }
        truncated |= cut_bytes;
        let mut extra = Map::new();
        extra.insert("module".into(), json!(sel.module.prefix));
        extra.insert("stage".into(), json!(stage));
        extra.insert("stage_key".into(), json!(key));
        extra.insert("file".into(), json!(path.display().to_string()));
        extra.insert("line_count".into(), json!(total));
        extra.insert("truncated".into(), json!(truncated));
        extra.insert("also_matched".into(), json!(sel.also_matched));
        Ok(ToolOutput::text("hlo_text", out, extra))
    }
}
