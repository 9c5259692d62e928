use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{dump_dir, dump_dir_param, hlo_error, read_stage};

pub struct DiffHloStages;
register_tool!(DiffHloStages);

impl Tool for DiffHloStages {
    fn name(&self) -> &'static str {
        "diff_hlo_stages"
    }
    fn summary(&self) -> &'static str {
        "Unified diff of two stages of a module in an XLA HLO dump directory"
    }
    fn doc(&self) -> &'static str {
        "Line-based unified diff between two stages of one module of an XLA dump directory \
         (default before_optimizations → after_optimizations), with context_lines of context \
         and at most max_lines diff lines (<= 0: all). Stages as in get_hlo_dump."
    }
    fn params(&self) -> Params {
        dump_dir_param(
            Params::new()
                .string("module_pattern", "Module prefix, name or glob.")
                .required("module_pattern"),
        )
        .string_default("stage_before", "Older stage.", "before_optimizations")
        .string_default("stage_after", "Newer stage.", "after_optimizations")
        .integer_min(
            "context_lines",
            "Context lines around each change.",
            Some(5),
            0,
        )
        .integer(
            "max_lines",
            "Keep the first N diff lines (<= 0: all).",
            Some(500),
        )
        .boolean(
            "normalize",
            "Ignore metadata={...} and renumbered .N name suffixes, and add per-opcode count changes.",
            false,
        )
    }
    fn output(&self) -> &'static str {
        "{format: \"diff\", text, module, stage_before, stage_after, files, before_lines, after_lines, \
         added, removed, identical, truncated, normalized, opcode_changes (with normalize)}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "What XLA's optimizations did to jit_train_step",
                json!({"dump_dir": "${FIXTURES}/jax-cpu/hlo_dump", "module_pattern": "jit_train_step", "max_lines": 60}),
            )
            .expect(&["text", "added", "removed"]),
            Example::new(
                "Only structural changes (metadata and renumbering ignored), with opcode counts",
                json!({"dump_dir": "${FIXTURES}/jax-cpu/hlo_dump", "module_pattern": "jit_train_step",
                       "normalize": true, "max_lines": 40}),
            )
            .expect(&["opcode_changes"]),
            Example::new(
                "One pass against a later one",
                json!({"dump_dir": "${FIXTURES}/jax-cpu/hlo_dump", "module_pattern": "train_step",
                       "stage_before": "pass_0008", "stage_after": "pass_0024", "context_lines": 2}),
            )
            .expect(&["text"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let pattern = call.req_str("module_pattern")?;
        let sa = call.str_or("stage_before", "before_optimizations")?;
        let sb = call.str_or("stage_after", "after_optimizations")?;
        let context = call.usize_or("context_lines", 5)?;
        let max = call.i64_or("max_lines", 500)?;
        let normalize = call.bool_or("normalize", false)?;
        let d = dump_dir(call)?;
        let sel = d.select(&pattern).map_err(hlo_error)?;
        let m = sel.module;
        let (_, pa) = m.resolve_stage(&sa).map_err(hlo_error)?;
        let (_, pb) = m.resolve_stage(&sb).map_err(hlo_error)?;
        let ta = read_stage(call, &pa)?;
        let tb = read_stage(call, &pb)?;
        let mut opcode_changes = None;
        let (ta, tb) = if normalize {
            let ma = xprof_hlo::parse(&ta, &pa.display().to_string()).map_err(hlo_error)?;
            let mb = xprof_hlo::parse(&tb, &pb.display().to_string()).map_err(hlo_error)?;
            let changes: Vec<_> = xprof_hlo::diff::opcode_changes(&ma, &mb)
                .into_iter()
                .map(|(op, b, a)| json!({"opcode": op, "before": b, "after": a, "delta": a as i64 - b as i64}))
                .collect();
            opcode_changes = Some(changes);
            (
                xprof_hlo::diff::normalize(&ta),
                xprof_hlo::diff::normalize(&tb),
            )
        } else {
            (ta, tb)
        };
        let diff = xprof_hlo::diff::unified(
            &ta,
            &tb,
            &format!("{}.{sa}.hlo", m.prefix),
            &format!("{}.{sb}.hlo", m.prefix),
            context,
        );
        let identical = diff.diff.is_empty();
        let mut truncated = false;
        let text = if identical {
            format!(
                "No differences between '{sa}' and '{sb}' for module '{}'.",
                m.prefix
            )
        } else {
            let lines: Vec<&str> = diff.diff.lines().collect();
            let mut body = if max > 0 && lines.len() > max as usize {
                truncated = true;
                let mut b = lines[..max as usize].join("\n");
                b.push_str(&format!(
                    "\n... (diff truncated after {max} lines. Use max_lines=-1 to see all)\n"
                ));
                b
            } else {
                diff.diff.clone()
            };
            body.insert_str(
                0,
                &format!(
                    "# Diff: {}\n# {sa}  →  {sb}\n# {} lines before, {} lines after\n\n",
                    m.prefix, diff.before_lines, diff.after_lines
                ),
            );
            body
        };
        let mut extra = Map::new();
        extra.insert("module".into(), json!(m.prefix));
        extra.insert("stage_before".into(), json!(sa));
        extra.insert("stage_after".into(), json!(sb));
        extra.insert(
            "files".into(),
            json!([pa.display().to_string(), pb.display().to_string()]),
        );
        extra.insert("before_lines".into(), json!(diff.before_lines));
        extra.insert("after_lines".into(), json!(diff.after_lines));
        extra.insert("added".into(), json!(diff.added));
        extra.insert("removed".into(), json!(diff.removed));
        extra.insert("identical".into(), json!(identical));
        extra.insert("truncated".into(), json!(truncated));
        extra.insert("normalized".into(), json!(normalize));
        if let Some(c) = opcode_changes {
            extra.insert("opcode_changes".into(), json!(c));
        }
        Ok(ToolOutput::text("diff", text, extra))
    }
}
