use std::fmt::Write;

use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{session, with_capture};

pub struct GetProfileSummary;
register_tool!(GetProfileSummary);

impl Tool for GetProfileSummary {
    fn name(&self) -> &'static str {
        "get_profile_summary"
    }
    /// XProf's agent CLI has the same function under this name (it exports nothing).
    fn aliases(&self) -> &'static [&'static str] {
        &["export_json"]
    }
    fn summary(&self) -> &'static str {
        "Short text summary: top HLO ops by self time"
    }
    fn doc(&self) -> &'static str {
        "A compact summary for people: the top HLO ops by self time (name, ms, share of device \
         time, occurrences) as text, plus the same rows as JSON. Sorted by self time (the seed \
         sorted by total time and printed `?` for names; we do not)."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Rows.", Some(15), 1)
    }
    fn output(&self) -> &'static str {
        "{capture, run, total_time_ps, top_operations: [...], text}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Summary of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["text", "top_operations"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 15)?.max(1);
        let s = session(call)?;
        let (st, used, warnings) =
            crate::common::op_stats_with(call, &s, xprof_opstats::BuildOptions::OP_DATABASES)?;
        let mut text = format!("Profile Summary for: {}\n\n", s.run);
        let mut top = Vec::new();
        let mut body = Map::new();
        match xprof_opstats::views::op_db(&st) {
            Some((db, host_executed)) => {
                let rows = xprof_opstats::views::hlo_stats_of(&st, db);
                let _ = writeln!(
                    text,
                    "Top HLO ops by self-time{}:\n{:<60}{:>20}{:>12}\n{}",
                    if host_executed {
                        " (executed on host CPU threads)"
                    } else {
                        ""
                    },
                    "Op",
                    "Self Time",
                    "Occurrences",
                    "-".repeat(92)
                );
                for r in rows.iter().take(limit) {
                    let name = r["hlo_op_name"].as_str().unwrap_or_default();
                    let ps = r["total_self_time_ps"].as_u64().unwrap_or(0);
                    let pct = r["total_self_time_percent"].as_f64().unwrap_or(0.0);
                    let shown: String = name.chars().take(58).collect();
                    let t = format!("{:.3} ms ({pct:.1}%)", ps as f64 / 1e9);
                    let _ = writeln!(text, "{shown:<60}{t:>20}{:>12}", r["occurrences"]);
                    top.push(json!({
                        "name": name,
                        "category": r["category"],
                        "self_time_ps": ps,
                        "self_time_ms": ps as f64 / 1e9,
                        "self_time_percent": pct,
                        "occurrences": r["occurrences"],
                    }));
                }
                body.insert("host_executed".into(), json!(host_executed));
                body.insert("total_time_ps".into(), json!(db.total_time_ps));
                body.insert("idle_time_ps".into(), json!(db.idle_op_time_ps()));
            }
            None => {
                let (reason, _) = crate::common::no_op_reason(call, &s, &st);
                let _ = writeln!(text, "No XLA op events: {reason}.");
                body.insert("no_data_reason".into(), json!(reason));
            }
        }
        body.insert("top_operations".into(), Value::Array(top));
        body.insert("text".into(), json!(text));
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
