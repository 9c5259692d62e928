//! The HTML report: one self-contained file (inline CSS and SVG, no script, no network) that a
//! person can attach to a bug. It draws what the views computed — it computes nothing itself:
//! the overview (run environment, KPIs, the steps and their breakdown) from
//! `xprof_opstats::views::overview`, the op table from `hlo_stats_of`, the roofline from
//! `roofline_model`, the memory timeline from `xprof_memory::profile`, the input-pipeline
//! verdict and the suggestions from `xprof_views`. A section the capture cannot fill says why
//! instead of drawing empty axes.

pub mod svg;

use std::fmt::Write;

use serde_json::{Map, Value};
use xprof_memory::profile::AllocatorProfile;

/// A view's rows (JSON objects).
pub type Rows = Vec<Map<String, Value>>;
/// `roofline_model`'s answer: the device and its records.
pub type RooflineModel = (Map<String, Value>, Rows);

/// What the report is drawn from (each view's own output).
pub struct Inputs<'a> {
    /// The capture block of the answer (`input`, `run`, `files_used`, `warnings`).
    pub capture: Value,
    /// `xprof_opstats::views::overview`.
    pub overview: Value,
    /// `hlo_stats_of` rows (largest self time first), or why there are none.
    pub ops: Result<Rows, String>,
    /// `roofline_model` (device, records), or why there is none.
    pub roofline: Result<RooflineModel, String>,
    /// The allocator with the highest peak, or why there is none.
    pub memory: Result<&'a AllocatorProfile, String>,
    /// The input-pipeline verdict: (classification, statement).
    pub input_pipeline: Option<(String, String)>,
    /// `smart_suggestions`' list.
    pub suggestions: Vec<Value>,
    /// `xprof_views::diff::diff` against a baseline capture (`report --baseline`), and the
    /// baseline's run name.
    pub diff: Option<(String, Map<String, Value>)>,
}

/// Escape text for HTML (and SVG) content and attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The sections in order; `render` writes them, tests look for their ids.
pub const SECTIONS: &[(&str, &str)] = &[
    ("summary", "Run and devices"),
    ("kpis", "Key numbers"),
    ("steps", "Step time"),
    ("ops", "Top ops by self time"),
    ("roofline", "Roofline"),
    ("memory", "Memory timeline"),
    ("input", "Input pipeline"),
    ("suggestions", "Suggestions"),
    ("diff", "Compared with the baseline"),
];

/// The charts a complete report draws (`<svg id=...>`), for tests and screenshots.
pub const CHARTS: &[&str] = &[
    "steps-chart",
    "ops-chart",
    "roofline-chart",
    "memory-chart",
    "diff-chart",
];

const CSS: &str = "body{font-family:sans-serif;margin:24px auto;max-width:960px;color:#222}\
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}\
.kpis{display:flex;flex-wrap:wrap;gap:12px}.kpi{border:1px solid #ccc;border-radius:6px;padding:8px 12px;min-width:180px}\
.kpi .v{font-size:20px;font-weight:bold}.kpi .l{font-size:12px;color:#555}.kpi .why{font-size:11px;color:#777;max-width:220px}\
.missing{background:#f4f4f4;border-left:4px solid #999;padding:8px 12px;color:#444}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}\
th{background:#f4f4f4}.num{text-align:right}code{font-size:12px}svg.chart{max-width:100%;height:auto}";

fn missing(out: &mut String, why: &str) {
    let _ = write!(
        out,
        r#"<p class="missing">Not in this capture: {}</p>"#,
        esc(why)
    );
}

/// The report as one HTML document.
pub fn render(inp: &Inputs<'_>) -> String {
    let run = text(&inp.capture["run"]);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>xprof report: {}</title><style>{CSS}</style></head><body><h1>xprof report: {}</h1>",
        esc(&run),
        esc(&run)
    );
    for (id, title) in SECTIONS {
        if *id == "diff" && inp.diff.is_none() {
            continue;
        }
        let _ = write!(out, r#"<section id="{id}"><h2>{title}</h2>"#);
        match *id {
            "summary" => summary(&mut out, inp),
            "kpis" => kpis(&mut out, inp),
            "steps" => steps(&mut out, &inp.overview["steps"]),
            "ops" => ops(&mut out, &inp.ops),
            "roofline" => roofline(&mut out, &inp.roofline),
            "memory" => memory(&mut out, &inp.memory),
            "input" => input(&mut out, &inp.input_pipeline),
            "suggestions" => suggestions(&mut out, &inp.suggestions),
            _ => diff(&mut out, inp.diff.as_ref()),
        }
        out.push_str("</section>");
    }
    out.push_str("<p style=\"color:#777;font-size:12px\">Written by xprof from the raw capture; numbers are those of its views (get_overview, get_hlo_stats, get_roofline_model, get_memory_profile, get_input_pipeline, get_smart_suggestions).</p></body></html>\n");
    out
}

fn summary(out: &mut String, inp: &Inputs<'_>) {
    let env = &inp.overview["run_environment"];
    let c = &inp.capture;
    let mut rows: Vec<(&str, String)> = vec![
        ("capture", text(&c["input"])),
        ("run", text(&c["run"])),
        (
            "hosts",
            c["files_used"]
                .as_array()
                .map(|a| a.iter().map(text).collect::<Vec<_>>().join(", "))
                .unwrap_or_default(),
        ),
    ];
    for (k, label) in [
        ("device_type", "device type"),
        ("hardware_type", "hardware"),
        ("device_core_count", "device cores"),
        ("host_count", "host count"),
        ("task_count", "tasks"),
        ("is_training", "training"),
    ] {
        if !env[k].is_null() {
            rows.push((label, text(&env[k])));
        }
    }
    out.push_str("<table>");
    for (k, v) in rows {
        let _ = write!(out, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    out.push_str("</table>");
    if let Some(w) = c["warnings"].as_array().filter(|w| !w.is_empty()) {
        out.push_str("<p>Warnings:</p><ul>");
        for x in w {
            let _ = write!(out, "<li>{}</li>", esc(&text(x)));
        }
        out.push_str("</ul>");
    }
}

fn kpis(out: &mut String, inp: &Inputs<'_>) {
    let ps = &inp.overview["performance_summary"];
    out.push_str(r#"<div class="kpis">"#);
    for (k, label, unit) in [
        ("steptime_ms_average", "average step time", " ms"),
        ("device_duty_cycle_percent", "device duty cycle", ""),
        ("device_idle_time_percent", "device idle time", ""),
        (
            "flop_rate_utilization_relative_to_roofline",
            "FLOP rate vs roofline",
            "",
        ),
        (
            "memory_bw_utilization_relative_to_hw_limit",
            "memory bandwidth vs peak",
            "",
        ),
        ("mxu_utilization_percent", "MXU utilization", ""),
        ("host_idle_time_percent", "host idle time", ""),
    ] {
        let v = &ps[k];
        let measured = &ps[format!("{k}_measured")];
        if v.is_null() && measured.is_null() && ps[format!("{k}_reason")].is_null() {
            // The view has no such number for this kind of capture.
            continue;
        }
        let (value, why) = if !v.is_null() {
            (format!("{}{unit}", text(v)), String::new())
        } else if !measured.is_null() {
            (
                format!("{}{unit}", text(measured)),
                format!(
                    "measured (XProf prints a placeholder): {}",
                    text(&ps[format!("{k}_reason")])
                ),
            )
        } else {
            ("—".to_string(), text(&ps[format!("{k}_reason")]))
        };
        let _ = write!(
            out,
            r#"<div class="kpi"><div class="v">{}</div><div class="l">{label}</div>"#,
            esc(&value)
        );
        if !why.is_empty() {
            let _ = write!(out, r#"<div class="why">{}</div>"#, esc(&why));
        }
        out.push_str("</div>");
    }
    out.push_str("</div>");
}

/// At most this many steps are drawn (the first ones); the rest are counted.
const MAX_STEPS_DRAWN: usize = 400;

fn steps(out: &mut String, st: &Value) {
    let list = st["steps"].as_array().filter(|s| !s.is_empty());
    let Some(list) = list else {
        let why = [&st["no_steps_reason"], &st["no_steps_advice"]]
            .iter()
            .map(|v| text(v))
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        missing(
            out,
            if why.is_empty() {
                "no steps (no step markers in the capture)"
            } else {
                &why
            },
        );
        inferred_steps(out, &st["steps_inferred"]);
        return;
    };
    let mut series: Vec<String> = Vec::new();
    for s in list {
        for k in s["breakdown_ps"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|x| x.0)
        {
            if !series.contains(k) {
                series.push(k.clone());
            }
        }
    }
    let bars: Vec<(String, Vec<f64>)> = list
        .iter()
        .take(MAX_STEPS_DRAWN)
        .map(|s| {
            let b = &s["breakdown_ps"];
            let label = s["step_num"]
                .as_i64()
                .map_or_else(|| text(&s["name"]), |n| n.to_string());
            (
                label,
                series
                    .iter()
                    .map(|k| b[k].as_f64().unwrap_or(0.0) / 1e9)
                    .collect(),
            )
        })
        .collect();
    let src = text(&st["steps_source"]);
    let _ = write!(
        out,
        "<p>{} steps (from {}); each bar is one step, stacked by where its time went.</p>",
        list.len(),
        esc(&src)
    );
    out.push_str(&svg::stacked_bars(
        "steps-chart",
        &series,
        &bars,
        "ms",
        "step",
    ));
    if list.len() > MAX_STEPS_DRAWN {
        let _ = write!(
            out,
            "<p>The first {MAX_STEPS_DRAWN} of {} steps are drawn.</p>",
            list.len()
        );
    }
    let sm = &st["summary"];
    if !sm.is_null() {
        let _ = write!(
            out,
            "<p>Step time: average {} ms, min {} ms, max {} ms, standard deviation {} ms.</p>",
            svg::num(sm["step_time_ms_average"].as_f64().unwrap_or(0.0)),
            svg::num(sm["step_time_ms_min"].as_f64().unwrap_or(0.0)),
            svg::num(sm["step_time_ms_max"].as_f64().unwrap_or(0.0)),
            svg::num(sm["step_time_ms_stddev"].as_f64().unwrap_or(0.0)),
        );
    }
}

/// The overview's `steps_inferred` (one step per module execution: ours, not XProf's), drawn
/// as such when XProf found no steps.
fn inferred_steps(out: &mut String, inf: &Value) {
    let Some(list) = inf["steps"].as_array().filter(|l| !l.is_empty()) else {
        return;
    };
    let bars: Vec<(String, Vec<f64>)> = list
        .iter()
        .take(MAX_STEPS_DRAWN)
        .map(|s| {
            (
                text(&s["index"]),
                vec![s["duration_ps"].as_f64().unwrap_or(0.0) / 1e9],
            )
        })
        .collect();
    let _ = write!(
        out,
        "<p>Inferred instead ({}): {} steps, average {} ms.</p>",
        esc(&text(&inf["method"])),
        list.len(),
        svg::num(inf["steptime_ms_average"].as_f64().unwrap_or(0.0))
    );
    out.push_str(&svg::stacked_bars(
        "steps-chart",
        &["module execution (inferred step)".to_string()],
        &bars,
        "ms",
        "inferred step",
    ));
}

/// Ops shown in the bar chart.
const TOP_OPS: usize = 15;

fn ops(out: &mut String, ops: &Result<Rows, String>) {
    let rows = match ops {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => return missing(out, "no XLA ops in the capture"),
        Err(why) => return missing(out, why),
    };
    let top = &rows[..rows.len().min(TOP_OPS)];
    let name = |r: &Map<String, Value>| text(g(r, "hlo_op_name"));
    let items: Vec<(String, f64, String)> = top
        .iter()
        .map(|r| {
            let share = g(r, "total_self_time_percent").as_f64().unwrap_or(0.0);
            // Programs reuse op names: the program id tells repeated names apart.
            let repeated = top.iter().filter(|o| name(o) == name(r)).count() > 1;
            (
                if repeated {
                    format!("{} (program {})", name(r), text(g(r, "program_id")))
                } else {
                    name(r)
                },
                g(r, "total_self_time_ps").as_f64().unwrap_or(0.0) / 1e9,
                format!("({}%, {})", svg::num(share), text(g(r, "category"))),
            )
        })
        .collect();
    let _ = write!(
        out,
        "<p>The {} ops (of {}) with the most self time; beside each bar its share of the total op time and its category.</p>",
        items.len(),
        rows.len()
    );
    out.push_str(&svg::hbars("ops-chart", &items, "ms"));
}

/// A field of a row (`null` when absent: indexing a `Map` would panic).
fn g<'m>(m: &'m Map<String, Value>, k: &str) -> &'m Value {
    m.get(k).unwrap_or(&Value::Null)
}

fn f(m: &Map<String, Value>, k: &str) -> f64 {
    match &m.get(k) {
        Some(Value::String(s)) => s.parse().unwrap_or(0.0),
        Some(v) => v.as_f64().unwrap_or(0.0),
        None => 0.0,
    }
}

fn roofline(out: &mut String, r: &Result<RooflineModel, String>) {
    let (device, records) = match r {
        Ok(x) => x,
        Err(why) => return missing(out, why),
    };
    let peak = f(device, "peak_flop_rate");
    if peak <= 0.0 {
        return missing(out, "the device's peak FLOP rate is unknown");
    }
    // XProf's device bandwidths are GiB/s; FLOP/byte and GFLOP/s make a roof in GB/s (so
    // that peak / bandwidth is the device's own ridge point).
    const GIB_IN_GB: f64 = 1.073_741_824;
    let mut roofs = Vec::new();
    for (key, name) in [("peak_hbm_bw", "HBM"), ("peak_vmem_read_bw", "VMEM read")] {
        let bw = f(device, key);
        if bw > 0.0 {
            roofs.push(svg::Roof {
                name: name.into(),
                bandwidth: bw * GIB_IN_GB,
            });
        }
    }
    let mut points = Vec::new();
    let mut unplaced = Vec::new();
    for r in records
        .iter()
        .filter(|r| g(r, "step") == "Total" && g(r, "include_infeed_outfeed") != false)
        .filter(|r| g(r, "category") != "Program")
    {
        let custom = g(r, "category") == "custom-call";
        let oi = g(r, "operational_intensity")
            .as_f64()
            .or_else(|| g(r, "operational_intensity_measured").as_f64());
        let rate = g(r, "measured_flop_rate")
            .as_f64()
            .or_else(|| g(r, "measured_flop_rate_measured").as_f64());
        let name = text(g(r, "operation"));
        match (oi, rate) {
            (Some(x), Some(y)) if x > 0.0 && y > 0.0 => points.push(svg::Point {
                x,
                y,
                label: name,
                marked: custom,
            }),
            _ => unplaced.push(name),
        }
    }
    let _ = write!(
        out,
        "<p>{}: peak {} GFLOP/s, HBM {} GiB/s (ridge point {} FLOP/byte). Dots are ops, diamonds custom calls.</p>",
        esc(&text(g(device, "device_type"))),
        svg::num(peak),
        svg::num(f(device, "peak_hbm_bw")),
        svg::num(f(device, "hbm_ridge_point"))
    );
    if points.is_empty() {
        missing(
            out,
            "no op has both a FLOP count and bytes accessed, so none can be placed on the roofline",
        );
    } else {
        out.push_str(&svg::roofline("roofline-chart", peak, &roofs, &points));
    }
    if !unplaced.is_empty() {
        unplaced.sort();
        unplaced.dedup();
        let _ = write!(
            out,
            "<p>Not placed (no FLOPs or no bytes recorded): {}.</p>",
            esc(&unplaced.join(", "))
        );
    }
}

fn bytes_label(b: i64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let b = b as f64;
    if b >= 1024.0 * MIB {
        format!("{} GiB", svg::num(b / 1024.0 / MIB))
    } else {
        format!("{} MiB", svg::num(b / MIB))
    }
}

fn memory(out: &mut String, m: &Result<&AllocatorProfile, String>) {
    let a = match m {
        Ok(a) => *a,
        Err(why) => return missing(out, why),
    };
    const MIB: f64 = 1024.0 * 1024.0;
    let samples: Vec<(f64, f64)> = a
        .sampled_timeline
        .iter()
        .map(|s| (s.time_offset_ps as f64 / 1e9, s.stats.in_use() as f64 / MIB))
        .collect();
    let p = &a.summary.peak_stats;
    let peak = (
        a.summary.peak_stats_time_ps as f64 / 1e9,
        p.peak_bytes_in_use as f64 / MIB,
    );
    let _ = write!(
        out,
        "<p>Allocator <code>{}</code>: peak {} in use (heap {}, stack {}) of {} capacity; {} events.</p>",
        esc(&a.memory_id),
        bytes_label(p.peak_bytes_in_use),
        bytes_label(p.heap_allocated_bytes),
        bytes_label(p.stack_reserved_bytes),
        bytes_label(a.summary.memory_capacity),
        a.snapshots.len()
    );
    out.push_str(&svg::step_line(
        "memory-chart",
        &samples,
        Some(peak),
        "time (ms from the start of the capture)",
        "MiB in use",
    ));
    let mut live: Vec<(i64, String, String, i64)> = a
        .active_allocations
        .iter()
        .filter_map(|r| {
            let m = if r.snapshot_index >= 0 {
                &a.peak_snapshots.get(r.snapshot_index as usize)?.meta
            } else {
                a.special_allocations.get(r.special_index as usize)?
            };
            Some((
                m.allocation_bytes,
                m.tf_op_name.clone(),
                m.tensor_shape.clone(),
                r.num_occurrences,
            ))
        })
        .collect();
    live.sort_by_key(|x| std::cmp::Reverse(x.0));
    if live.is_empty() {
        return;
    }
    out.push_str("<p>Buffers live at the peak (largest first):</p><table><tr><th>size</th><th>op</th><th>shape</th><th>count</th></tr>");
    for (b, op, shape, n) in live.iter().take(20) {
        let _ = write!(
            out,
            r#"<tr><td class="num">{}</td><td>{}</td><td><code>{}</code></td><td class="num">{n}</td></tr>"#,
            bytes_label(*b),
            esc(if op.is_empty() { "(unnamed)" } else { op }),
            esc(shape)
        );
    }
    out.push_str("</table>");
}

fn input(out: &mut String, ip: &Option<(String, String)>) {
    match ip {
        Some((class, statement)) if !statement.is_empty() => {
            let _ = write!(out, "<p><b>{}</b>: {}</p>", esc(class), esc(statement));
        }
        _ => missing(out, "no steps to analyse the input pipeline over"),
    }
}

/// Ops drawn in the change chart (the largest changes, as the diff orders them).
const DIFF_OPS: usize = 15;

fn diff(out: &mut String, d: Option<&(String, Map<String, Value>)>) {
    let Some((baseline, d)) = d else { return };
    let v = g(d, "verdict");
    let _ = write!(
        out,
        "<p>Against <b>{}</b>: <b>{}</b> by {} ({}{} %).</p>",
        esc(baseline),
        esc(&text(&v["result"])),
        esc(&text(&v["decided_by"])),
        if v["delta_pct"].as_f64().unwrap_or(0.0) > 0.0 {
            "+"
        } else {
            ""
        },
        svg::num(v["delta_pct"].as_f64().unwrap_or(0.0))
    );
    let st = g(d, "step_time");
    if st.is_object() {
        let _ = write!(
            out,
            "<p>Step time, {}: {} ms → {} ms.</p>",
            esc(&text(&st["basis"])),
            svg::num(st["baseline_ms"].as_f64().unwrap_or(0.0)),
            svg::num(st["optimized_ms"].as_f64().unwrap_or(0.0))
        );
    } else if let Some(why) = d.get("step_time_reason") {
        let _ = write!(out, "<p>{}</p>", esc(&text(why)));
    }
    let ops = &g(d, "by_hlo_op")["records"];
    let unit = text(&g(d, "op_time")["unit"]);
    let items: Vec<(String, f64, String)> = ops
        .as_array()
        .into_iter()
        .flatten()
        .take(DIFF_OPS)
        .map(|r| {
            (
                format!("{}/{}", text(&r["module"]), text(&r["hlo_op"])),
                r["delta_us"].as_f64().unwrap_or(0.0),
                text(&r["status"]),
            )
        })
        .collect();
    if items.is_empty() {
        missing(out, "no HLO op in either capture to compare");
        return;
    }
    let _ = write!(
        out,
        "<p>The {} ops whose self time changed most ({}).</p>",
        items.len(),
        esc(&unit)
    );
    let unit = unit.replace("us ", "µs ");
    out.push_str(&svg::delta_bars("diff-chart", &items, &unit));
}

fn suggestions(out: &mut String, list: &[Value]) {
    if list.is_empty() {
        out.push_str("<p>No rule fired.</p>");
        return;
    }
    out.push_str("<ul>");
    for s in list {
        let _ = write!(
            out,
            "<li><b>{}</b>: {}",
            esc(&text(&s["ruleName"])),
            esc(&text(&s["suggestionText"]))
        );
        if let Some(sig) = s["signals"].as_object().filter(|m| !m.is_empty()) {
            let parts: Vec<String> = sig
                .iter()
                .map(|(k, v)| match v.as_f64() {
                    Some(x) => format!("{k} = {}", svg::num(x)),
                    None => format!("{k} = {}", text(v)),
                })
                .collect();
            let _ = write!(out, " <small>({})</small>", esc(&parts.join(", ")));
        }
        out.push_str("</li>");
    }
    out.push_str("</ul>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cpu_like() -> Inputs<'static> {
        Inputs {
            capture: json!({"input": "/runs/r1", "run": "r1", "files_used": ["h<0>"], "warnings": []}),
            overview: json!({
                "performance_summary": {
                    "steptime_ms_average": 7.9,
                    "device_duty_cycle_percent": null,
                    "device_duty_cycle_percent_reason": "CPU-only capture",
                },
                "run_environment": {"device_type": "CPU", "host_count": 1},
                "steps": {
                    "steps_source": "host_roots",
                    "steps": [
                        {"step_num": 0, "breakdown_ps": {"Host compute": 2e9, "All others": 1e9}},
                        {"step_num": 1, "breakdown_ps": {"Host compute": 3e9, "All others": 0}},
                    ],
                },
            }),
            ops: Ok(vec![
                json!({"hlo_op_name": "dot.1", "category": "dot", "total_self_time_ps": 5e9, "total_self_time_percent": 50.0})
                    .as_object()
                    .unwrap()
                    .clone(),
            ]),
            roofline: Err("a CPU-only capture has no device peaks".into()),
            memory: Err("no allocator events".into()),
            input_pipeline: Some(("both".into(), "POTENTIALLY input-bound".into())),
            suggestions: vec![json!({"ruleName": "R", "suggestionText": "do <this>", "signals": {"x": 1.5}})],
            diff: None,
        }
    }

    #[test]
    fn a_cpu_report_draws_steps_and_ops_and_says_what_the_capture_lacks() {
        let html = render(&cpu_like());
        // Every section but the diff, which only a --baseline report has.
        for (id, _) in SECTIONS.iter().filter(|s| s.0 != "diff") {
            assert!(html.contains(&format!("<section id=\"{id}\">")), "{id}");
        }
        assert!(html.contains("<svg id=\"steps-chart\""));
        assert!(html.contains("<svg id=\"ops-chart\""));
        assert!(!html.contains("<svg id=\"roofline-chart\""));
        assert!(!html.contains("<svg id=\"memory-chart\""));
        assert!(html.contains("Not in this capture: a CPU-only capture has no device peaks"));
        assert!(html.contains("Not in this capture: no allocator events"));
        // A null KPI shows a dash and its reason, never 0.
        assert!(html.contains("CPU-only capture"));
        // Step 0 has two parts, step 1 one; the legend two entries.
        assert!(html.contains("0 — Host compute: 2 ms"));
        assert!(html.contains("1 — Host compute: 3 ms"));
    }

    #[test]
    fn the_report_is_self_contained_and_escapes_what_it_prints() {
        let html = render(&cpu_like());
        assert!(!html.contains("<script"));
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(!html.contains("<link"));
        assert!(html.contains("h&lt;0&gt;"));
        assert!(html.contains("do &lt;this&gt;"));
    }

    #[test]
    fn a_capture_without_steps_says_why_instead_of_empty_axes() {
        let mut inp = cpu_like();
        inp.overview["steps"] = json!({"steps": [], "no_steps_reason": "no step markers"});
        let html = render(&inp);
        assert!(!html.contains("<svg id=\"steps-chart\""));
        assert!(html.contains("Not in this capture: no step markers"));
        // Inferred steps are drawn, and said to be inferred.
        inp.overview["steps"]["steps_inferred"] = json!({
            "method": "one step per XLA Modules execution (ours)",
            "steptime_ms_average": 0.5,
            "steps": [{"index": 0, "duration_ps": 4e8}, {"index": 1, "duration_ps": 6e8}],
        });
        let html = render(&inp);
        assert!(html.contains("<svg id=\"steps-chart\""));
        assert!(html.contains("Inferred instead (one step per XLA Modules execution (ours))"));
        assert!(html.contains("1 — module execution (inferred step): 0.6 ms"));
    }

    #[test]
    fn a_diff_draws_faster_ops_left_and_slower_ops_right() {
        let mut inp = cpu_like();
        assert!(!render(&inp).contains("<section id=\"diff\">"));
        inp.diff = Some((
            "base".into(),
            json!({
                "verdict": {"result": "slower", "decided_by": "average step time", "delta_pct": 24.6},
                "step_time": {"basis": "all steps", "baseline_ms": 10.0, "optimized_ms": 12.46},
                "op_time": {"unit": "us per step"},
                "by_hlo_op": {"records": [
                    {"module": "m", "hlo_op": "dot", "status": "slower", "delta_us": 50.0},
                    {"module": "m", "hlo_op": "add", "status": "faster", "delta_us": -10.0},
                ]},
            })
            .as_object()
            .unwrap()
            .clone(),
        ));
        let html = render(&inp);
        assert!(html.contains("<svg id=\"diff-chart\""));
        assert!(html.contains("<b>slower</b> by average step time (+24.6 %)"));
        assert!(html.contains("+50 µs per step") && html.contains("-10 µs per step"));
    }
}
