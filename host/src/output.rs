//! Rendering results for stdout: JSON by default, `--format text|table` for people, large
//! results spilled to a file, errors as one JSON object on stderr.

use std::io::Write;

use comfy_table::{ContentArrangement, Table};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use xprof_plugin_api::ToolError;

use crate::result_json::ResultJson;

/// Results larger than this go to a file in `$TMPDIR`; stdout gets a small envelope.
pub const SPILL_BYTES: usize = 10 * 1024 * 1024;

/// The failure object every frontend prints: `{"error": {kind, message, hint}, "tool"}`.
pub fn error_json(tool: Option<&str>, e: &ToolError) -> Value {
    json!({"error": e.to_json(), "tool": tool})
}

/// Print the error object on stderr (one line) and return the exit code.
pub fn print_error(tool: Option<&str>, e: &ToolError) -> i32 {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", error_json(tool, e));
    e.kind.exit_code()
}

fn spill(tool: &str, body: &str, content_type: &str) -> Result<Value, ToolError> {
    let dir = std::env::temp_dir();
    let ext = if content_type == "application/json" {
        "json"
    } else {
        "txt"
    };
    let mut f = tempfile::Builder::new()
        .prefix(&format!("xprof_{tool}_"))
        .suffix(&format!(".{ext}"))
        .tempfile_in(&dir)
        .map_err(|e| {
            ToolError::internal(format!(
                "result is {} bytes (over the 10 MB stdout limit) and cannot be written to {}: {e}",
                body.len(),
                dir.display()
            ))
            .with_hint("set TMPDIR to a writable directory")
        })?;
    f.write_all(body.as_bytes())
        .map_err(|e| ToolError::internal(format!("writing the spilled result: {e}")))?;
    let (_, path) = f
        .keep()
        .map_err(|e| ToolError::internal(format!("keeping the spilled result: {e}")))?;
    Ok(json!({
        "status": "written_to_file",
        "path": path.display().to_string(),
        "bytes": body.len(),
        "sha256": format!("{:x}", Sha256::digest(body.as_bytes())),
        "content_type": content_type,
        "message": "The result exceeded 10 MB and was written to a file; read it from `path`.",
    }))
}

/// Render a successful result as the text to print on stdout.
pub fn render(
    tool: &str,
    result: &ResultJson,
    content_type: &str,
    format: &str,
    budget: Option<&crate::budget::Budget>,
) -> Result<String, ToolError> {
    let form = if format == "compact" {
        crate::budget::Form::Compact
    } else {
        crate::budget::Form::Pretty
    };
    let fitted = budget.and_then(|b| b.fit_result(result, form));
    let result = fitted.as_ref().unwrap_or(result);
    match format {
        "text" => Ok(render_text(result)),
        "table" => Ok(render_table(result)),
        _ => {
            // Re-indented from the plugin's text when it is canonical (no parse at all);
            // `compact`: the plugin's own one-line text.
            let body = if format == "compact" {
                result.compact().into_owned()
            } else {
                result.pretty()
            };
            if body.len() > SPILL_BYTES {
                let env = spill(tool, &body, content_type)?;
                return Ok(serde_json::to_string_pretty(&env).unwrap_or_default());
            }
            Ok(body)
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// `--format text`: a text result prints its text; anything else as indented `key: value` lines.
pub fn render_text(v: &Value) -> String {
    if let Some(t) = v.get("text").and_then(Value::as_str) {
        return t.to_string();
    }
    let mut out = String::new();
    text_lines(v, 0, &mut out);
    out
}

fn text_lines(v: &Value, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x {
                    Value::Object(_) | Value::Array(_) => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        text_lines(x, depth + 1, out);
                    }
                    _ => out.push_str(&format!("{pad}{k}: {}\n", scalar(x))),
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                match x {
                    Value::Object(_) | Value::Array(_) => {
                        out.push_str(&format!("{pad}- [{i}]\n"));
                        text_lines(x, depth + 1, out);
                    }
                    _ => out.push_str(&format!("{pad}- {}\n", scalar(x))),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

/// `--format table`: every scalar as a `path.to.field` / value row, and each list of objects,
/// however deep (e.g. `table.records` of XProf's tables), as its own table named by its path.
pub fn render_table(v: &Value) -> String {
    if let Some(t) = v.get("text").and_then(Value::as_str) {
        return t.to_string();
    }
    if !v.is_object() {
        return render_text(v);
    }
    let mut kv = new_table();
    kv.set_header(vec!["field", "value"]);
    let mut lists = Vec::new();
    let mut has_kv = false;
    flatten("", v, &mut |path, x| match x {
        Flat::Scalar(x) => {
            kv.add_row(vec![path.to_string(), x]);
            has_kv = true;
        }
        Flat::Rows(rows) => lists.push((path.to_string(), rows)),
    });
    let mut out = String::new();
    if has_kv {
        out.push_str(&kv.to_string());
        out.push('\n');
    }
    for (name, rows) in lists {
        let mut cols: Vec<String> = Vec::new();
        for r in rows.iter().filter_map(Value::as_object) {
            for k in r.keys() {
                if !cols.contains(k) {
                    cols.push(k.clone());
                }
            }
        }
        let mut t = new_table();
        t.set_header(cols.clone());
        for r in rows {
            t.add_row(
                cols.iter()
                    .map(|c| r.get(c).map(scalar).unwrap_or_default())
                    .collect::<Vec<_>>(),
            );
        }
        out.push_str(&format!("\n{name}:\n{t}\n"));
    }
    out
}

/// A table as wide as the terminal: comfy-table measures a terminal on stdout itself; piped,
/// `$COLUMNS` (what shells export) says how wide, else no limit.
fn new_table() -> Table {
    let mut t = Table::new();
    t.set_content_arrangement(ContentArrangement::Dynamic);
    if !t.is_tty()
        && let Some(w) = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<u16>().ok())
            .filter(|w| *w >= 20)
    {
        t.set_width(w);
    }
    t
}

/// What [`flatten`] finds at a path: a value to print in one cell, or rows of a table.
enum Flat<'a> {
    Scalar(String),
    Rows(&'a [Value]),
}

/// Walk `v` depth first, in key order: objects are descended into, a list holding objects is a
/// table, anything else (a scalar, a list of scalars, an empty object) one cell.
fn flatten<'a>(path: &str, v: &'a Value, f: &mut dyn FnMut(&str, Flat<'a>)) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                flatten(&join(k), x, f);
            }
        }
        Value::Array(a) if a.iter().any(Value::is_object) => f(path, Flat::Rows(a)),
        Value::Array(_) | Value::Object(_) => f(path, Flat::Scalar(v.to_string())),
        x => f(path, Flat::Scalar(scalar(x))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_results_print_their_text() {
        let v = json!({"format": "hlo_text", "text": "HloModule m\n"});
        assert_eq!(render_text(&v), "HloModule m\n");
    }

    /// Regression: a list of records inside an object (XProf's `table.records`) was printed as
    /// one JSON cell.
    #[test]
    fn nested_lists_of_records_are_tables_named_by_their_path() {
        let v = json!({
            "run": "r",
            "table": {"properties": {"task_type": "Training"}, "records": [{"op": "dot", "t": 2}]},
            "host_executed": {"table": {"records": [{"op": "add"}]}},
        });
        let s = render_table(&v);
        assert!(
            s.contains("table.properties.task_type") && s.contains("Training"),
            "{s}"
        );
        assert!(
            s.contains("\ntable.records:\n") && s.contains("| dot"),
            "{s}"
        );
        assert!(
            s.contains("\nhost_executed.table.records:\n") && s.contains("| add"),
            "{s}"
        );
        assert!(!s.contains("{\"op\""), "{s}");
    }

    #[test]
    fn tables_list_rows() {
        let v = json!({"run": "r", "ops": [{"name": "a", "t": 1}, {"name": "b", "t": 2}]});
        let s = render_table(&v);
        assert!(
            s.contains("ops:") && s.contains("| a") && s.contains("run"),
            "{s}"
        );
    }

    #[test]
    fn huge_results_are_spilled_with_a_checksum() {
        let big = "x".repeat(SPILL_BYTES + 10);
        let out = render(
            "t",
            &json!({"blob": big}).into(),
            "application/json",
            "json",
            None,
        )
        .unwrap();
        let env: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(env["status"], "written_to_file");
        let path = env["path"].as_str().unwrap();
        let body = std::fs::read(path).unwrap();
        assert_eq!(body.len() as u64, env["bytes"].as_u64().unwrap());
        assert_eq!(
            format!("{:x}", Sha256::digest(&body)),
            env["sha256"].as_str().unwrap()
        );
        std::fs::remove_file(path).unwrap();
    }
}
