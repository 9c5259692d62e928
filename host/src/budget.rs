//! The output budget: by default a result fits an agent's context (issue 33).
//!
//! Agent clients cap a tool result at ~25 k tokens and charge for every byte, so a result over
//! [`DEFAULT_BUDGET_BYTES`] as printed (pretty JSON on the CLI, compact JSON over MCP) is cut
//! to fit before it is shown: rows are dropped from the end of the largest lists (the tools put
//! lists in order of importance, largest first) and of maps of rows keyed by name, and a text
//! longer than the rest is cut at a line end. Fields are never renamed or re-nested; the top-level object gains
//! `"truncated": true` and a `"truncation"` object saying what was cut and which flag gets the
//! rest. The budget is off with `--full` (MCP: `"full": true`), when the call asks for a size
//! itself (`--limit 0`, `--top_n N`, `--max_events -1`, ...: it gets what it asks for), and when
//! the result is written to a file (`--output_path`).
//!
//! It applies where results are shown, after the cache: the cache keeps whole results, so
//! `--full` after a budgeted call is a cache hit.

use serde_json::{Map, Value, json};

use crate::registry::ToolEntry;
use crate::result_json::ResultJson;

/// The default budget of one result, in bytes as printed.
pub const DEFAULT_BUDGET_BYTES: usize = 16 * 1024;

/// Arguments that ask for a number of rows, nodes or bytes. A call that sets one explicitly
/// gets what it asks for.
pub const SIZE_ARGS: &[&str] = &[
    "limit",
    "top_n",
    "top_k",
    "top",
    "top_stalls",
    "max_events",
    "max_lines",
    "max_bytes",
    "max_chars",
    "max_nodes",
    "max_rows",
    "max_spans",
];

/// What the `truncation` object costs at most, kept free when cutting.
const NOTICE_RESERVE: usize = 1024;

/// At most this many cuts are listed (a tree can have a cut list per node).
const MAX_LISTED_CUTS: usize = 8;

/// A text is never cut shorter than this, and only when more than twice as long (so each
/// cut shortens it and the cutting ends).
const MIN_TEXT: usize = 512;

/// How a result is printed, and so measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The CLI's pretty JSON.
    Pretty,
    /// MCP's compact JSON.
    Compact,
}

/// The budget of one call, when it has one.
#[derive(Clone, Debug)]
pub struct Budget {
    pub bytes: usize,
    /// The tool's size arguments (from [`SIZE_ARGS`]), for the hint.
    size_args: Vec<String>,
    /// The call's `offset`, when the tool pages with one.
    offset: Option<i64>,
}

impl Budget {
    /// The budget of calling `tool` with `args`: `None` with `--full`, an explicit size
    /// argument, or an output file.
    pub fn for_call(tool: &ToolEntry, args: &Map<String, Value>, full: bool) -> Option<Budget> {
        if full
            || args
                .get("output_path")
                .is_some_and(|p| p.as_str().is_some_and(|s| !s.is_empty()))
            || SIZE_ARGS.iter().any(|a| args.contains_key(*a))
        {
            return None;
        }
        let props = tool.properties();
        Some(Budget {
            bytes: DEFAULT_BUDGET_BYTES,
            size_args: SIZE_ARGS
                .iter()
                .filter(|a| props.contains_key(**a))
                .map(|a| a.to_string())
                .collect(),
            offset: props
                .contains_key("offset")
                .then(|| args.get("offset").and_then(Value::as_i64).unwrap_or(0)),
        })
    }

    /// [`Budget::fit`] of a tool's result, measuring the text it already has first.
    pub fn fit_result(&self, r: &ResultJson, form: Form) -> Option<ResultJson> {
        let fits = r.compact().len() <= self.bytes
            && (form == Form::Compact || r.pretty().len() <= self.bytes);
        if fits {
            return None;
        }
        self.fit(r.value(), form).map(ResultJson::from)
    }

    /// `result` cut to fit, or `None` when it fits as it is.
    pub fn fit(&self, result: &Value, form: Form) -> Option<Value> {
        let full = measure(result, form);
        if full <= self.bytes || !result.is_object() {
            return None;
        }
        let compact = measure(result, Form::Compact);
        // Cut in compact bytes; the pretty form is larger by a ratio that grows as deeper
        // rows go, so aim again from the original with what the last try measured.
        let mut target = self.bytes.saturating_sub(NOTICE_RESERVE) * compact / full.max(1);
        let mut best = None;
        for _ in 0..4 {
            let mut out = result.clone();
            let cuts = shrink(&mut out, target);
            self.add_notice(&mut out, &cuts, full);
            let got = measure(&out, form);
            best = Some(out);
            if got <= self.bytes || cuts.is_empty() {
                break;
            }
            target = target.saturating_mul(self.bytes) / got.max(1);
            target = target.saturating_sub(64);
        }
        best
    }

    fn add_notice(&self, out: &mut Value, cuts: &[Cut], full: usize) {
        let Some(obj) = out.as_object_mut() else {
            return;
        };
        let mut more = vec!["--full (MCP: \"full\": true) returns the whole result".to_string()];
        let rows = cuts.iter().find(|c| c.unit == "rows");
        if let (Some(offset), Some(c)) = (self.offset, rows) {
            more.push(format!(
                "--offset {} gets the rows after these ({})",
                offset + c.kept as i64,
                c.path
            ));
        }
        if !self.size_args.is_empty() {
            more.push(format!(
                "{} set how many rows the tool returns (then no budget applies)",
                self.size_args
                    .iter()
                    .map(|a| format!("--{a}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let listed: Vec<Value> = cuts
            .iter()
            .take(MAX_LISTED_CUTS)
            .map(|c| json!({"path": c.path, "kept": c.kept, "total": c.total, "unit": c.unit}))
            .collect();
        let mut notice = json!({
            "reason": format!(
                "the result is {full} bytes, over the {} byte output budget",
                self.bytes
            ),
            "cut": listed,
            "get_more": more.join("; "),
        });
        if cuts.len() > MAX_LISTED_CUTS {
            notice["cuts_not_listed"] = json!(cuts.len() - MAX_LISTED_CUTS);
        }
        obj.insert("truncated".into(), Value::Bool(true));
        obj.insert("truncation".into(), notice);
    }
}

/// The printed length of `v`.
pub fn measure(v: &Value, form: Form) -> usize {
    let mut n = Counter(0);
    let _ = match form {
        Form::Pretty => serde_json::to_writer_pretty(&mut n, v),
        Form::Compact => serde_json::to_writer(&mut n, v),
    };
    n.0
}

struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One cut: the JSON pointer of a list (or text), and how much of it is left.
#[derive(Debug)]
struct Cut {
    path: String,
    kept: usize,
    total: usize,
    unit: &'static str,
}

#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

fn pointer(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        s.push('/');
        match seg {
            Seg::Key(k) => s.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Seg::Index(i) => s.push_str(&i.to_string()),
        }
    }
    s
}

fn at<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// Cut the largest lists and texts of `v` until its compact form is at most `target` bytes.
fn shrink(v: &mut Value, target: usize) -> Vec<Cut> {
    let mut cuts: Vec<Cut> = Vec::new();
    loop {
        let mut best: Option<(usize, Vec<Seg>)> = None;
        let total = largest(v, &mut Vec::new(), &mut best);
        if total <= target {
            break;
        }
        let Some((size, path)) = best else { break };
        let over = total - target;
        let node = at(v, &path).expect("the path was just found");
        let (kept, was, unit) = match node {
            Value::Array(rows) => {
                let was = rows.len();
                let mut freed = 0;
                while rows.len() > 1 && freed < over {
                    let last = rows.pop().expect("more than one row");
                    freed += measure(&last, Form::Compact) + 1;
                }
                (rows.len(), was, "rows")
            }
            Value::Object(entries) => {
                let was = entries.len();
                let mut freed = 0;
                while entries.len() > 1 && freed < over {
                    let k = entries
                        .keys()
                        .next_back()
                        .cloned()
                        .expect("more than one entry");
                    // The last entry: removing it moves no other (swap_remove of the last).
                    let last = entries.remove(&k).expect("the key was just listed");
                    freed += measure(&Value::String(k), Form::Compact)
                        + measure(&last, Form::Compact)
                        + 2;
                }
                (entries.len(), was, "entries")
            }
            Value::String(s) => {
                let was = s.len();
                // `size` counts the JSON escapes (`\n` is two bytes): keep that share of the text.
                let keep =
                    (was as u128 * size.saturating_sub(over) as u128 / size as u128) as usize;
                cut_text(s, keep);
                (s.len(), was, "bytes")
            }
            _ => unreachable!("only lists, maps and texts are cut"),
        };
        let p = pointer(&path);
        match cuts.iter_mut().find(|c| c.path == p) {
            Some(c) => c.kept = kept,
            None => cuts.push(Cut {
                path: p,
                kept,
                total: was,
                unit,
            }),
        }
    }
    cuts
}

/// The compact size of `v`; `best` becomes the largest cuttable node under it (a list of two
/// or more rows, a map of rows ([`is_map`]), or a text over twice [`MIN_TEXT`] bytes).
fn largest(v: &Value, path: &mut Vec<Seg>, best: &mut Option<(usize, Vec<Seg>)>) -> usize {
    let (size, cuttable) = match v {
        Value::Array(rows) => {
            let mut n = 2 + rows.len().saturating_sub(1);
            for (i, r) in rows.iter().enumerate() {
                path.push(Seg::Index(i));
                n += largest(r, path, best);
                path.pop();
            }
            (n, rows.len() >= 2)
        }
        Value::Object(m) => {
            let mut n = 2 + m.len().saturating_sub(1);
            for (k, x) in m {
                n += measure(&Value::String(k.clone()), Form::Compact) + 1;
                path.push(Seg::Key(k.clone()));
                n += largest(x, path, best);
                path.pop();
            }
            (n, is_map(m))
        }
        Value::String(s) => (measure(v, Form::Compact), s.len() > 2 * MIN_TEXT),
        _ => (measure(v, Form::Compact), false),
    };
    if cuttable && best.as_ref().is_none_or(|(b, _)| size > *b) {
        *best = Some((size, path.clone()));
    }
    size
}

/// Is this object a map of rows keyed by name (per allocator, per host, ...) rather than a
/// record? Three or more entries whose values are all objects with the same keys: its entries
/// are rows, and dropping some drops rows, not fields.
fn is_map(m: &Map<String, Value>) -> bool {
    let mut values = m.values();
    let Some(Value::Object(first)) = values.next() else {
        return false;
    };
    m.len() >= 3
        && values.all(|v| {
            v.as_object()
                .is_some_and(|o| o.len() == first.len() && o.keys().eq(first.keys()))
        })
}

/// Cut `s` to about `keep` bytes (never below [`MIN_TEXT`]), at a line end when there is one,
/// and say so at the end.
fn cut_text(s: &mut String, keep: usize) {
    // At most three quarters stay, so every cut shortens the text by more than its marker.
    let mut end = keep.min(s.len() * 3 / 4).max(MIN_TEXT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(nl) = s[..end].rfind('\n') {
        end = nl + 1;
    }
    let rest = s.len() - end;
    s.truncate(end);
    s.push_str(&format!(
        "... ({rest} more bytes cut by the output budget; --full shows all)"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(bytes: usize) -> Budget {
        Budget {
            bytes,
            size_args: vec!["limit".into()],
            offset: Some(0),
        }
    }

    fn rows(n: usize) -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"name": format!("op{i}"), "self_time_ms": i as f64 / 3.0}))
                .collect(),
        )
    }

    #[test]
    fn a_result_that_fits_is_left_alone() {
        let v = json!({"ops": rows(3)});
        assert!(budget(16384).fit(&v, Form::Pretty).is_none());
    }

    #[test]
    fn the_largest_list_loses_rows_from_its_end_and_the_notice_says_how_to_get_them() {
        let v = json!({"run": "r", "ops": rows(2000), "steps": rows(5)});
        for form in [Form::Pretty, Form::Compact] {
            let out = budget(16384).fit(&v, form).unwrap();
            assert!(measure(&out, form) <= 16384, "{}", measure(&out, form));
            let ops = out["ops"].as_array().unwrap();
            assert!(ops.len() > 50 && ops.len() < 2000, "{}", ops.len());
            assert_eq!(
                ops[..],
                v["ops"].as_array().unwrap()[..ops.len()],
                "the head is kept"
            );
            assert_eq!(out["steps"], v["steps"], "a small list is left alone");
            assert_eq!(out["run"], "r");
            assert_eq!(out["truncated"], true);
            let cut = &out["truncation"]["cut"][0];
            assert_eq!(cut["path"], "/ops");
            assert_eq!(cut["total"], 2000);
            assert_eq!(cut["kept"], ops.len());
            let more = out["truncation"]["get_more"].as_str().unwrap();
            assert!(more.contains("--full"), "{more}");
            assert!(more.contains(&format!("--offset {}", ops.len())), "{more}");
            let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["run", "ops", "steps", "truncated", "truncation"]);
        }
    }

    #[test]
    fn nested_lists_are_cut_where_the_bytes_are() {
        let tree = json!({"root": {"children": (0..40).map(|i| json!({
            "name": format!("n{i}"), "children": rows(100)})).collect::<Vec<_>>()}});
        let out = budget(16384).fit(&tree, Form::Pretty).unwrap();
        assert!(measure(&out, Form::Pretty) <= 16384);
        assert_eq!(out["root"]["children"][0]["name"], "n0");
    }

    #[test]
    fn a_long_text_is_cut_at_a_line_end_and_says_so() {
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let v = json!({"module": "m", "text": text});
        let out = budget(16384).fit(&v, Form::Pretty).unwrap();
        assert!(measure(&out, Form::Pretty) <= 16384);
        let t = out["text"].as_str().unwrap();
        assert!(t.starts_with("line 0\nline 1\n"));
        assert!(t.contains("\n... ("), "{}", &t[t.len() - 100..]);
        assert!(t.ends_with("--full shows all)"));
        assert_eq!(out["truncation"]["cut"][0]["unit"], "bytes");
    }

    #[test]
    fn a_map_of_rows_loses_entries_but_a_record_keeps_its_fields() {
        let per: Map<String, Value> = (0..8)
            .map(|i| {
                (
                    format!("GPU_{i}"),
                    json!({"peak": i, "timeline": rows(200)}),
                )
            })
            .collect();
        let record = json!({"hbm": {"used": 1, "total": 2}, "vmem": {"used": 3, "total": 4}});
        let v = json!({"summary": record, "per_allocator": per});
        let out = budget(16384).fit(&v, Form::Pretty).unwrap();
        assert!(
            measure(&out, Form::Pretty) <= 16384,
            "{}",
            measure(&out, Form::Pretty)
        );
        assert_eq!(out["summary"], record);
        let kept = out["per_allocator"].as_object().unwrap();
        assert!(kept.contains_key("GPU_0"), "{:?}", kept.keys());
        assert!(!kept.contains_key("GPU_7"), "{:?}", kept.keys());
    }

    #[test]
    fn a_results_own_truncated_flag_stays_true() {
        let v = json!({"truncated": false, "ops": rows(3000)});
        let out = budget(16384).fit(&v, Form::Compact).unwrap();
        assert_eq!(out["truncated"], true);
        assert_eq!(out.as_object().unwrap().keys().next().unwrap(), "truncated");
    }
}
