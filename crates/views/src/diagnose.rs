//! `diagnose`: one small answer to "why is it slow, and what do I change first" (issue 33).
//!
//! Built only from what the other views print, so nothing here can disagree with them: the
//! overview's idle share, the HLO op table's self-time shares and `bound_by`, the input
//! pipeline's step breakdown and the smart-suggestion rules. Each candidate change carries the
//! most time it can save (the time of what it removes: idle time, an op's self time), the
//! evidence, and the next call that shows the detail; the three largest are kept. What the
//! capture cannot say is listed as such, never as 0 %.

use serde_json::{Map, Value, json};

/// What diagnose reads: the other views' own results.
pub struct Evidence<'a> {
    /// The capture as the user named it, for the next calls.
    pub path: &'a str,
    /// `xprof_opstats::views::overview`.
    pub overview: &'a Value,
    /// The HLO op table (`hlo_stats` rows), largest self time first.
    pub ops: &'a [Map<String, Value>],
    /// Module names by program id (for the next calls).
    pub modules: &'a std::collections::BTreeMap<u64, String>,
    /// The ops ran on the host (a CPU capture): shares are of host op time.
    pub host_executed: bool,
    /// get_input_pipeline's `bottleneck` object.
    pub input: &'a Value,
    /// `smart_suggestions(..)["suggestions"]`.
    pub suggestions: &'a Value,
}

/// Ops below this share of the time are not worth a change of their own.
const MIN_OP_SHARE: f64 = 5.0;
/// Idle time below this share is not called a bottleneck.
const MIN_IDLE_SHARE: f64 = 10.0;
/// Suggestion texts are cut to this many characters (the answer stays within 4 KB).
const MAX_TEXT: usize = 240;

struct Change {
    class: String,
    change: String,
    evidence: String,
    /// The most this change can save, in ms of the capture; `None` when no view measures it.
    can_save_ms: Option<f64>,
    next: String,
}

fn percent(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => s.trim().trim_end_matches('%').parse().ok(),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
    .filter(|p: &f64| p.is_finite())
}

fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(MAX_TEXT) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The device's idle share (XProf's, else our measured one, labelled) and the capture's device
/// time in ms.
fn idle(overview: &Value) -> (Option<(f64, &'static str)>, Option<f64>) {
    let ps = &overview["performance_summary"];
    let total_ms = ps["device_total_time_ps"].as_f64().map(|p| p / 1e9);
    let share = percent(&ps["device_idle_time_percent"])
        .map(|p| (p, "get_overview device_idle_time_percent"))
        .or_else(|| {
            percent(&ps["device_idle_time_percent_measured"])
                .map(|p| (p, "get_overview device_idle_time_percent_measured"))
        });
    (share, total_ms)
}

fn op_change(e: &Evidence, row: &Map<String, Value>) -> Option<Change> {
    let name = row["hlo_op_name"].as_str()?;
    let share = row["total_self_time_percent"].as_f64()?;
    if share < MIN_OP_SHARE {
        return None;
    }
    let self_ms = row["total_self_time_ps"].as_f64().map(|p| p / 1e9);
    let category = row["category"].as_str().unwrap_or("");
    let bound = row["bound_by"].as_str().unwrap_or("");
    // get_top_hlo_ops' `self_time_percent_basis`, in short.
    let basis = if e.host_executed {
        "the time of the host threads that ran XLA ops"
    } else {
        "device time, idle included"
    };
    let (class, what): (&str, String) = if category.contains("custom") {
        (
            "custom call",
            format!("Tune or replace the custom call `{name}` (a library or Pallas kernel)"),
        )
    } else if [
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "collective",
    ]
    .iter()
    .any(|c| category.contains(c) || name.starts_with(c))
    {
        (
            "communication",
            format!("Overlap `{name}` with compute or shrink what it sends"),
        )
    } else if bound.eq_ignore_ascii_case("compute") {
        (
            "compute-bound op",
            format!("Cut the FLOPs of `{name}` or run it in lower precision"),
        )
    } else if bound.to_ascii_lowercase().contains("hbm") || bound.contains("emory") {
        (
            "memory-bound op",
            format!("Move fewer bytes in `{name}`: fuse it with its neighbours, smaller dtypes"),
        )
    } else {
        ("hot op", format!("Speed up `{name}`, the largest op"))
    };
    let mut evidence = format!(
        "{name} ({category}) takes {:.1}% of {basis}",
        round(share, 1)
    );
    if let Some(ms) = self_ms {
        evidence.push_str(&format!(", {:.3} ms", round(ms, 3)));
    }
    if !bound.is_empty() {
        evidence.push_str(&format!("; bound_by {bound}"));
    }
    let module = row["program_id"]
        .as_str()
        .and_then(|p| p.parse::<u64>().ok())
        .and_then(|p| e.modules.get(&p));
    let pid = row["program_id"].as_str().unwrap_or("");
    let what = match module {
        Some(m) => format!("{what} (module {m}({pid}))"),
        None => what,
    };
    let mut next = format!(
        "xprof get_hlo_neighborhood {} --instruction_name {name}",
        e.path
    );
    if let Some(m) = module {
        next.push_str(&format!(" --module_name {m}"));
    }
    Some(Change {
        class: class.to_string(),
        change: what,
        evidence,
        can_save_ms: self_ms,
        next,
    })
}

/// The diagnosis.
pub fn diagnose(e: &Evidence) -> Value {
    let mut changes: Vec<Change> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    let (idle_share, total_ms) = idle(e.overview);
    let steps = e.input["steps"].as_u64().unwrap_or(0);
    let step_ms = e.input["step_time_ms_avg"].as_f64().filter(|_| steps > 0);
    let input_pct = e.input["input_percent"].as_f64().filter(|_| steps > 0);

    match (idle_share, total_ms) {
        // A measured idle share over a capture without op events is absence of evidence: the
        // ops the device ran are not in the op table, not absent from the device.
        (Some((share, source)), Some(total))
            if share >= MIN_IDLE_SHARE && !e.host_executed && !e.ops.is_empty() =>
        {
            let input_bound = input_pct.is_some_and(|p| p >= 20.0);
            changes.push(Change {
                class: if input_bound {
                    "input-bound".into()
                } else {
                    "device idle".into()
                },
                change: if input_bound {
                    "Feed the device faster: prefetch and parallelise the input pipeline".into()
                } else {
                    "Keep the device busy: find what it waits for (host work, launches, input)"
                        .into()
                },
                evidence: format!(
                    "the device is idle {:.1}% of {:.3} ms ({source})",
                    round(share, 1),
                    round(total, 3)
                ) + &input_pct
                    .filter(|p| *p >= 1.0)
                    .map(|p| format!("; input takes {:.1}% of the step time", round(p, 1)))
                    .unwrap_or_default(),
                can_save_ms: Some(share / 100.0 * total),
                next: if steps > 0 {
                    format!("xprof get_input_pipeline {}", e.path)
                } else {
                    format!("xprof check_host_boundness {}", e.path)
                },
            });
        }
        (None, _) if !e.host_executed => {
            unknown.push("device idle time (no view measures it on this capture)".into())
        }
        (Some(_), _) if !e.host_executed && e.ops.is_empty() => unknown.push(
            "device idle time (the op table is empty, so the device's busy time is unknown)".into(),
        ),
        _ => {}
    }
    if e.host_executed {
        let others = e.input["all_other_percent"].as_f64().filter(|_| steps > 0);
        if let (Some(p), Some(ms)) = (others, step_ms)
            && p >= 20.0
        {
            changes.push(Change {
                class: "outside XLA".into(),
                change: "Cut the step time spent outside XLA ops (Python, data loading, I/O)"
                    .into(),
                evidence: format!(
                    "{:.1}% of the {:.3} ms average step is outside XLA ops ({steps} steps)",
                    round(p, 1),
                    round(ms, 3)
                ),
                can_save_ms: Some(p / 100.0 * ms * steps as f64),
                next: format!("xprof get_input_pipeline {}", e.path),
            });
        }
    }
    for row in e.ops.iter().take(2) {
        if let Some(c) = op_change(e, row) {
            changes.push(c);
        }
    }
    if e.ops.is_empty() {
        unknown.push("per-op times (the capture has no XLA op events)".into());
    }
    // The rules' findings, apart from the generic measured-utilization ones (the numbers above
    // already say it).
    for s in e.suggestions.as_array().into_iter().flatten() {
        let rule = s["ruleName"].as_str().unwrap_or("");
        if rule.starts_with("Measured") || rule.is_empty() {
            continue;
        }
        changes.push(Change {
            class: rule.to_string(),
            change: format!(
                "{rule}: {}",
                cut(s["suggestionText"].as_str().unwrap_or(""))
            ),
            evidence: format!("rule {rule} ({})", s["source"].as_str().unwrap_or("")),
            can_save_ms: None,
            next: format!("xprof get_smart_suggestions {}", e.path),
        });
    }
    changes.sort_by(|a, b| match (a.can_save_ms, b.can_save_ms) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    let considered = changes.len();
    changes.truncate(3);
    let verdict = match changes.first() {
        Some(c) => json!({"bottleneck": c.class, "because": c.evidence}),
        None if !unknown.is_empty() => json!({
            "bottleneck": null,
            "because": "this capture lacks what diagnose reads (not_in_capture)",
        }),
        None => json!({
            "bottleneck": null,
            "because": "no idle time, op or rule stands out in this capture",
        }),
    };
    let top_ops: Vec<Value> = e
        .ops
        .iter()
        .take(3)
        .map(|r| {
            json!({
                "name": r["hlo_op_name"],
                "category": r["category"],
                "self_time_percent": r["total_self_time_percent"].as_f64().map(|p| round(p, 2)),
                "self_time_ms": r["total_self_time_ps"].as_f64().map(|p| round(p / 1e9, 4)),
                "bound_by": r.get("bound_by").cloned().unwrap_or(Value::Null),
            })
        })
        .collect();
    let ranked: Vec<Value> = changes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "rank": i + 1,
                "change": c.change,
                "evidence": c.evidence,
                "can_save_ms_at_most": c.can_save_ms.map(|m| round(m, 4)),
                "next": c.next,
            })
        })
        .collect();
    json!({
        "verdict": verdict,
        "numbers": {
            "device_idle_percent": idle_share.map(|(p, _)| round(p, 2)),
            "device_time_ms": total_ms.map(|m| round(m, 4)),
            "steps": steps,
            "step_time_ms_average": step_ms.map(|m| round(m, 4)),
            "top_ops": top_ops,
            "ops_are": if e.host_executed { "host-executed (CPU)" } else { "device" },
        },
        "changes": ranked,
        "changes_considered": considered,
        "not_in_capture": unknown,
    })
}
