//! Device-time attribution: the wall-clock time any device kernel ran (a disjoint-interval
//! union, so concurrent work counts once), per line, the custom-call/Pallas share, and the
//! kernels by total duration. It is the summary of XProf's agent-CLI `get_kernel_stats`
//! (`get_device_time_attribution`), computed in Python there; the facts of its method:
//!
//! * Planes `/device:*`. On a TPU plane (`TPU` in its name) the kernel lines are exactly
//!   `XLA Ops` and `Pallas` (any case); `LLO Ops`, `Pallas Primitives` and `* Instructions`
//!   hold regions inside a kernel and are left out unless asked for; `XLA Modules` gives the
//!   step durations; other lines are skipped. On other device planes every line is a kernel
//!   line except those whose name contains COUNTER, MODULES, OVERLAY, SYNC FLAG or SENSOR.
//! * Times are whole nanoseconds, truncated (start = absolute start, end = start +
//!   truncated duration); per-kernel durations are exact (`ps / 10⁶` µs).
//! * A kernel is named by its `tf_op_name` event stat (not the metadata's) when set, else by
//!   the event name; an all-digit name takes the first set `msg`/`message`/`annotation`/
//!   `label` stat.
//! * Per line, events in (start, longest first) order: an event is outermost unless an earlier
//!   one still covers its start (a `%while` and its body); only outermost kernels add to
//!   `total_duration_us_all_records`.
//! * `total_device_duration_ns` is the union over every kernel interval of all device planes
//!   (one time axis); `by_line_duration_ns` the union per line *name* over all device lines;
//!   custom calls are kernels named `custom-call…`, containing `custom_call` or `pallas`, or on
//!   a `Pallas` line.
//! * Records are sorted by rounded total duration, longest first, ties in order of first
//!   appearance; `limit` (0 = all) cuts them unless a kernel name is asked for.
//!
//! Where XProf's tool prints the total device time as the step mean of a capture without
//! `XLA Modules` steps, we print `null` with a reason (docs/PLACEHOLDERS.md).

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};
use xprof_xspace::{Event, XSpace};

/// What the attribution lists.
#[derive(Clone, Debug, Default)]
pub struct AttributionOptions {
    /// Records shown (0 = all); ignored when `kernel_name` is set.
    pub limit: usize,
    /// Only kernels of exactly this name.
    pub kernel_name: Option<String>,
    /// Only kernels whose name matches one of these (a regex, or a literal substring).
    pub trace_matchers: Vec<regex::Regex>,
    pub trace_literals: Vec<String>,
    /// Also list regions inside kernels (`LLO Ops`, `Pallas Primitives`, `* Instructions`).
    pub include_intra_kernel_regions: bool,
}

impl AttributionOptions {
    /// Matchers from user patterns: each a regex when it parses, and always a literal
    /// substring (XProf's tool tries both).
    pub fn with_matchers(mut self, patterns: &[String]) -> Self {
        self.trace_matchers = patterns
            .iter()
            .filter_map(|p| regex::Regex::new(p).ok())
            .collect();
        self.trace_literals = patterns.to_vec();
        self
    }

    fn matches(&self, name: &str) -> bool {
        (self.trace_matchers.is_empty() && self.trace_literals.is_empty())
            || self.trace_matchers.iter().any(|r| r.is_match(name))
            || self
                .trace_literals
                .iter()
                .any(|l| name.contains(l.as_str()))
    }
}

/// Python's `round(x, n)`: correctly rounded from the binary value, as Rust's exact
/// formatting is.
fn round_to(x: f64, n: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.n$}").parse().unwrap_or(x)
}

/// Sorted disjoint union length (touching intervals merge).
fn union_len(v: &mut [(i64, i64)]) -> i64 {
    v.sort_unstable_by_key(|x| x.0);
    let mut total = 0i64;
    let mut cur: Option<(i64, i64)> = None;
    for &(s, e) in v.iter() {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total = total.saturating_add(ce.saturating_sub(cs));
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        total = total.saturating_add(ce.saturating_sub(cs));
    }
    total
}

#[derive(PartialEq, Eq)]
enum LineKind {
    Kernel,
    Region,
    Other,
}

fn tpu_line_kind(name: &str) -> LineKind {
    let upper = name.to_uppercase();
    if upper == "XLA OPS" || upper == "PALLAS" {
        LineKind::Kernel
    } else if upper == "LLO OPS" || upper == "PALLAS PRIMITIVES" || upper.ends_with(" INSTRUCTIONS")
    {
        LineKind::Region
    } else {
        LineKind::Other
    }
}

const NON_KERNEL_LINES: [&str; 5] = ["COUNTER", "MODULES", "OVERLAY", "SYNC FLAG", "SENSOR"];

/// A stat's value as Python's `str()` prints it, when truthy.
fn stat_text(e: &Event, name: &str) -> Option<String> {
    let s = e.stat(name)?;
    if let Some(t) = s.str() {
        return (!t.is_empty()).then(|| t.to_string());
    }
    match s.value {
        xprof_xspace::StatValue::Int(v) => (v != 0).then(|| v.to_string()),
        xprof_xspace::StatValue::Uint(v) => (v != 0).then(|| v.to_string()),
        xprof_xspace::StatValue::Double(v) => (v != 0.0).then(|| v.to_string()),
        _ => None,
    }
}

/// The kernel's name: `tf_op_name`, else the event name, else for an all-digit name the first
/// set annotation stat.
fn kernel_name(e: &Event) -> String {
    if let Some(t) = stat_text(e, "tf_op_name") {
        return t;
    }
    let name = e.name();
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_digit()) {
        for k in ["msg", "message", "annotation", "label"] {
            if let Some(t) = stat_text(e, k) {
                return t;
            }
        }
    }
    name.to_string()
}

/// `fusion.668` from `fusion.668: ...` or `%fusion.668 = f32[...] ...`.
fn canonical(name: &str) -> &str {
    name.trim()
        .split(':')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .next()
        .unwrap_or("")
}

/// The attribution of the hosts' device planes, or `None` when no kernel was found.
pub fn device_time_attribution(
    hosts: &[(String, XSpace)],
    opts: &AttributionOptions,
) -> Option<Map<String, Value>> {
    // (name, is_region) → durations in µs, in order of first appearance.
    let mut order: Vec<(String, bool)> = Vec::new();
    let mut durations: HashMap<(String, bool), Vec<f64>> = HashMap::new();
    let mut top_level_us = 0.0f64;
    let mut all: Vec<(i64, i64)> = Vec::new();
    let mut custom: Vec<(i64, i64)> = Vec::new();
    let mut by_line: Vec<(String, Vec<(i64, i64)>)> = Vec::new();
    let mut steps_us: Vec<f64> = Vec::new();
    let mut excluded: BTreeSet<String> = BTreeSet::new();
    let ns = |e: &Event| -> (i64, i64) {
        let start = e.start_ps().div_euclid(1000);
        (start, start.saturating_add(e.duration_ps() / 1000))
    };

    for (_, space) in hosts {
        for plane in space.planes().filter(|p| p.name().starts_with("/device:")) {
            let is_tpu = plane.name().to_uppercase().contains("TPU");
            for line in plane.lines() {
                let lname = line.name();
                let upper = lname.to_uppercase();
                // A line name is listed once it has an event (empty lines are not).
                let spans: Vec<(i64, i64)> = line.events().map(|e| ns(&e)).collect();
                if !spans.is_empty() {
                    match by_line.iter_mut().find(|(n, _)| n == lname) {
                        Some((_, v)) => v.extend(spans),
                        None => by_line.push((lname.to_string(), spans)),
                    }
                }
                let mut is_region = false;
                if is_tpu {
                    match tpu_line_kind(lname) {
                        LineKind::Region if !opts.include_intra_kernel_regions => {
                            excluded.insert(lname.to_string());
                            continue;
                        }
                        LineKind::Region => is_region = true,
                        LineKind::Other => {
                            if upper.contains("XLA MODULES") {
                                steps_us.extend(
                                    line.events()
                                        .map(|e| e.duration_ps() as f64 / 1000.0 / 1000.0),
                                );
                            }
                            continue;
                        }
                        LineKind::Kernel => {}
                    }
                } else if NON_KERNEL_LINES.iter().any(|w| upper.contains(w)) {
                    continue;
                }
                let mut events: Vec<Event> = line.events().collect();
                events.sort_by_key(|e| {
                    let (s, end) = ns(e);
                    (s, std::cmp::Reverse(end.saturating_sub(s)))
                });
                let mut cover_end = -1i64;
                for e in &events {
                    let (start, end) = ns(e);
                    let name = kernel_name(e);
                    if opts.kernel_name.as_ref().is_some_and(|k| *k != name) || !opts.matches(&name)
                    {
                        continue;
                    }
                    let dur_us = e.duration_ps() as f64 / 1000.0 / 1000.0;
                    let key = (name, is_region);
                    let lower = key.0.to_lowercase();
                    let is_custom = lower.starts_with("custom-call")
                        || lower.contains("custom_call")
                        || lower.contains("pallas")
                        || upper.contains("PALLAS");
                    match durations.get_mut(&key) {
                        Some(v) => v.push(dur_us),
                        None => {
                            order.push(key.clone());
                            durations.insert(key, vec![dur_us]);
                        }
                    }
                    if !is_region && start >= cover_end {
                        top_level_us += dur_us;
                    }
                    cover_end = cover_end.max(end);
                    if !is_region {
                        all.push((start, end));
                        if is_custom {
                            custom.push((start, end));
                        }
                    }
                }
            }
        }
    }
    if order.is_empty() {
        return None;
    }

    let mut records: Vec<(f64, Value, bool)> = order
        .into_iter()
        .map(|key| {
            let v = &durations[&key];
            let total: f64 = v.iter().sum();
            let avg = total / v.len() as f64;
            let c = canonical(&key.0);
            let rounded = round_to(total, 4);
            let rec = json!({
                "kernel_name": key.0,
                "canonical_name": c,
                "short_name": c,
                "hlo_op_name": c,
                "raw_name": key.0,
                "total_duration_us": rounded,
                "execution_count": v.len(),
                "avg_duration_us": round_to(avg, 4),
                "is_intra_kernel_region": key.1,
            });
            (rounded, rec, key.1)
        })
        .collect();
    // Stable: equal totals keep the order of first appearance.
    records.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total_records = records.len();
    let top_level = records.iter().filter(|r| !r.2).count();
    let shown: Vec<Value> = records
        .into_iter()
        .take(if opts.kernel_name.is_none() && opts.limit > 0 {
            opts.limit
        } else {
            usize::MAX
        })
        .map(|r| r.1)
        .collect();

    let returned = shown.len();
    let total_ns = union_len(&mut all);
    let custom_ns = union_len(&mut custom);
    let mut lines = Map::new();
    for (name, mut v) in by_line {
        lines.insert(name, json!(union_len(&mut v)));
    }
    let mut out = Map::new();
    out.insert("total_device_duration_ns".into(), json!(total_ns));
    out.insert(
        "total_device_duration_us".into(),
        json!(total_ns as f64 / 1000.0),
    );
    out.insert(
        "total_device_duration_ms".into(),
        json!(total_ns as f64 / 1_000_000.0),
    );
    out.insert("by_line_duration_ns".into(), Value::Object(lines));
    out.insert(
        "custom_call_duration_us".into(),
        json!(round_to(custom_ns as f64 / 1000.0, 4)),
    );
    out.insert(
        "custom_call_share_pct".into(),
        json!(if total_ns > 0 {
            round_to(custom_ns as f64 / total_ns as f64 * 100.0, 2)
        } else {
            0.0
        }),
    );
    out.insert("kernel_records".into(), json!(shown));
    out.insert("step_durations_us".into(), json!(steps_us));
    let mut stats = Map::new();
    if steps_us.is_empty() {
        stats.insert("mean_us".into(), Value::Null);
        stats.insert(
            "mean_us_reason".into(),
            json!(
                "no XLA Modules events on a TPU plane: no step to average (XProf's CLI prints \
                 the total device time here)"
            ),
        );
        stats.insert("std_us".into(), Value::Null);
        stats.insert("std_us_reason".into(), json!("no steps"));
    } else {
        let n = steps_us.len() as f64;
        let mean = steps_us.iter().sum::<f64>() / n;
        let std = if steps_us.len() > 1 {
            (steps_us.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        stats.insert("mean_us".into(), json!(round_to(mean, 4)));
        stats.insert("std_us".into(), json!(round_to(std, 4)));
    }
    out.insert("stats".into(), Value::Object(stats));
    out.insert("truncated".into(), json!(returned < total_records));
    out.insert("total_records".into(), json!(total_records));
    out.insert("returned_records".into(), json!(returned));
    out.insert("top_level_records".into(), json!(top_level));
    out.insert(
        "total_duration_us_all_records".into(),
        json!(round_to(top_level_us, 4)),
    );
    if !excluded.is_empty() {
        out.insert("excluded_intra_kernel_region_lines".into(), json!(excluded));
        out.insert(
            "note".into(),
            json!(
                "Events on intra-kernel region lines were excluded because they overlap the \
                 kernel that contains them and would otherwise be ranked as top-level kernels. \
                 Pass include_intra_kernel_regions=True to include them, tagged with \
                 is_intra_kernel_region."
            ),
        );
    }
    Some(out)
}

/// Ours, for CPU-only captures (where XProf's tool finds no device kernel): the same
/// attribution over the XLA ops the CPU backend ran on host threads (`/host:CPU` events with
/// an `hlo_op` stat). `busy_ps` is the union over every thread (wall time any XLA op ran),
/// `by_thread_busy_ps` the union per thread; ops are grouped by `hlo_op` and module with their
/// summed durations (an op nested in another counts in both rows, never twice in a union).
/// `None` when no host thread ran an XLA op.
pub fn host_executed_attribution(hosts: &[(String, XSpace)], limit: usize) -> Option<Value> {
    let mut all: Vec<(i64, i64)> = Vec::new();
    let mut threads: Vec<(String, i64)> = Vec::new();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut ops: HashMap<(String, String), (u64, i64)> = HashMap::new();
    for (_, space) in hosts {
        for plane in space.planes().filter(|p| p.name() == "/host:CPU") {
            for line in plane.lines() {
                let mut spans = Vec::new();
                for e in line.events() {
                    let Some(op) = e.stat_or_metadata("hlo_op").and_then(|s| s.str()) else {
                        continue;
                    };
                    let module = e
                        .stat_or_metadata("hlo_module")
                        .and_then(|s| s.str())
                        .unwrap_or("");
                    spans.push((e.start_ps(), e.end_ps()));
                    let key = (op.to_string(), module.to_string());
                    let slot = ops.entry(key.clone()).or_insert_with(|| {
                        order.push(key);
                        (0, 0)
                    });
                    slot.0 += 1;
                    slot.1 = slot.1.saturating_add(e.duration_ps());
                }
                if !spans.is_empty() {
                    all.extend_from_slice(&spans);
                    threads.push((line.name().to_string(), union_len(&mut spans)));
                }
            }
        }
    }
    if order.is_empty() {
        return None;
    }
    let mut rows: Vec<(i64, Value)> = order
        .into_iter()
        .map(|k| {
            let (n, ps) = ops[&k];
            (
                ps,
                json!({
                    "hlo_op": k.0,
                    "module": k.1,
                    "occurrences": n,
                    "total_duration_ps": ps,
                    "total_duration_us": ps as f64 / 1e6,
                }),
            )
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let total = rows.len();
    let shown: Vec<Value> = rows
        .into_iter()
        .take(if limit > 0 { limit } else { usize::MAX })
        .map(|r| r.1)
        .collect();
    let busy = union_len(&mut all);
    threads.sort_by_key(|t| std::cmp::Reverse(t.1));
    let mut thread_map = Map::new();
    for (name, ps) in threads {
        // Threads may share a name: the later ones get their position.
        let key = if thread_map.contains_key(&name) {
            format!("{name} #{}", thread_map.len())
        } else {
            name
        };
        thread_map.insert(key, json!(ps));
    }
    Some(json!({
        "what": "XLA ops the CPU backend ran on host threads (ours; XProf's tool reads device \
                 planes only)",
        "busy_ps": busy,
        "busy_ms": busy as f64 / 1e9,
        "by_thread_busy_ps": thread_map,
        "op_records": shown,
        "total_records": total,
        "returned_records": shown.len(),
        "truncated": shown.len() < total,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        assert_eq!(canonical("%fusion.2 = f32[8] fusion(x)"), "%fusion.2");
        assert_eq!(canonical("fusion.668: body"), "fusion.668");
        assert_eq!(canonical(""), "");
        assert_eq!(canonical(":x"), "");
    }

    #[test]
    fn unions_merge_touching_and_nested_intervals() {
        assert_eq!(union_len(&mut [(5, 10), (0, 5), (2, 3), (20, 25)]), 15);
        assert_eq!(union_len(&mut []), 0);
    }

    #[test]
    fn tpu_lines_by_granularity() {
        assert!(tpu_line_kind("XLA Ops") == LineKind::Kernel);
        assert!(tpu_line_kind("pallas") == LineKind::Kernel);
        assert!(tpu_line_kind("LLO Ops") == LineKind::Region);
        assert!(tpu_line_kind("Vector Instructions") == LineKind::Region);
        assert!(tpu_line_kind("XLA Modules") == LineKind::Other);
    }
}
