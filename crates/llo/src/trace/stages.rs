//! `get_kernel_stage_breakdown`: Mosaic pipeline stages and named scopes on `XLA TraceMe`.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value, json};
use xprof_xspace::{Plane, XSpace};

use super::intervals::Windows;
use super::{
    EP_STAGES, Marker, TRACEME_LINE, device_planes, duration_stats, event_name, find_line,
    kernel_spans, markers_in, span,
};
use crate::round_to;

/// TraceMe events (name, span) overlapping `windows` (all when empty), in event order.
pub fn stage_events(plane: &Plane<'_>, windows: &Windows) -> Vec<(String, (i64, i64))> {
    let Some(l) = find_line(plane, TRACEME_LINE) else {
        return Vec::new();
    };
    l.events()
        .map(|e| (event_name(&e), span(&e)))
        .filter(|(_, s)| windows.is_empty() || windows.overlaps(*s))
        .collect()
}

/// Per stage, the Tensor Core bundle markers that fall inside its spans: the join from
/// measured stage time to LLO bundle addresses.
pub fn markers_by_stage(
    plane: &Plane<'_>,
    events: &[(String, (i64, i64))],
    windows: &Windows,
) -> BTreeMap<String, BTreeMap<u64, usize>> {
    let markers: Vec<(i64, Marker)> = markers_in(plane, windows);
    let mut by: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for (n, s) in events {
        by.entry(n.clone()).or_default().push(*s);
    }
    let mut out: BTreeMap<String, BTreeMap<u64, usize>> = BTreeMap::new();
    for (name, spans) in by {
        let w = Windows::new(spans);
        for (t, m) in &markers {
            if w.contains_point_or_overlaps((*t, *t)) {
                *out.entry(name.clone())
                    .or_default()
                    .entry(m.bundle_address)
                    .or_default() += 1;
            }
        }
    }
    out
}

fn plane_breakdown(plane: &Plane<'_>, kernel: Option<&Regex>) -> Option<Value> {
    find_line(plane, TRACEME_LINE)?;
    let windows = match kernel {
        Some(re) => {
            let w: Vec<(i64, i64)> = kernel_spans(plane, re).into_values().flatten().collect();
            if w.is_empty() {
                return Some(
                    json!({"note": format!("no custom-call invocations matched kernel='{}'", re.as_str())}),
                );
            }
            Windows::new(w)
        }
        None => Windows::default(),
    };
    let events = stage_events(plane, &windows);
    if events.is_empty() {
        return Some(json!({"note": "no XLA TraceMe events in window"}));
    }
    let mut durs: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut spans: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for (n, s) in &events {
        durs.entry(n.clone())
            .or_default()
            .push(s.1.saturating_sub(s.0));
        spans.entry(n.clone()).or_default().push(*s);
    }
    let run = Windows::new(spans.get("ep_run_kernel").cloned().unwrap_or_default());
    let mut stages = Map::new();
    for (name, d) in &durs {
        let mut e = duration_stats(d);
        let pipeline = EP_STAGES.contains(&name.as_str());
        e.insert(
            "kind".into(),
            json!(if pipeline { "pipeline" } else { "named_scope" }),
        );
        if !pipeline {
            // T6: a named scope whose spans all lie inside ep_run_kernel spans is nested in it
            // and must not be added to the pipeline stages.
            let inside = spans[name]
                .iter()
                .all(|&(s, e)| run.spans().iter().any(|&(rs, re)| rs <= s && e <= re));
            e.insert(
                "nested_in".into(),
                if inside && !run.is_empty() {
                    json!("ep_run_kernel")
                } else {
                    Value::Null
                },
            );
        }
        stages.insert(name.clone(), Value::Object(e));
    }
    let total = |s: &str| {
        durs.get(s)
            .map(|v| v.iter().map(|x| *x as i128).sum::<i128>())
            .unwrap_or(0)
    };
    let mut out = Map::new();
    out.insert("stages".into(), Value::Object(stages));
    let run_total = total("ep_run_kernel");
    if run_total > 0 {
        let wait = total("ep_wait_in") + total("ep_wait_out");
        out.insert(
            "wait_ratio".into(),
            json!(round_to(wait as f64 / run_total as f64, 3)),
        );
        out.insert(
            "wait_ratio_meaning".into(),
            json!("(ep_wait_in+ep_wait_out)/ep_run_kernel; >~0.3 suggests DMA-starved compute (buffering/block-size lever)"),
        );
        out.insert(
            "wait_ratio_basis".into(),
            json!("disjoint ep_* pipeline stages only; named scopes nest inside ep_run_kernel and are not added"),
        );
    }
    // T6: waits per input. Within one pipeline step (from one ep_run_kernel start to the
    // next) the k-th ep_wait_in waits for input k, so group the waits by that ordinal.
    if let Some(waits) = spans.get("ep_wait_in") {
        let mut run_starts: Vec<i64> = run.spans().iter().map(|s| s.0).collect();
        run_starts.sort_unstable();
        let mut ordinal: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
        let mut last_step: Option<usize> = None;
        let mut k = 0;
        let mut sorted = waits.clone();
        sorted.sort_unstable();
        for (s, e) in sorted {
            let step = run_starts.partition_point(|r| *r <= s);
            if Some(step) != last_step {
                k = 0;
                last_step = Some(step);
            }
            ordinal.entry(k).or_default().push(e.saturating_sub(s));
            k += 1;
        }
        if ordinal.len() > 1 {
            let per: Map<String, Value> = ordinal
                .iter()
                .map(|(i, d)| (format!("input_{i}"), Value::Object(duration_stats(d))))
                .collect();
            out.insert("wait_in_by_input".into(), Value::Object(per));
            out.insert(
                "wait_in_by_input_basis".into(),
                json!("ep_wait_in events numbered by their order inside each pipeline step (between successive ep_run_kernel starts): input_0 is the first operand waited on"),
            );
        }
    }
    let by_stage = markers_by_stage(plane, &events, &windows);
    if !by_stage.is_empty() {
        out.insert(
            "bundle_markers_by_stage".into(),
            json!(
                by_stage
                    .iter()
                    .map(|(s, m)| (
                        s.clone(),
                        json!(
                            m.iter()
                                .map(|(a, n)| json!({"address": crate::hex(*a), "count": n}))
                                .collect::<Vec<_>>()
                        )
                    ))
                    .collect::<Map<String, Value>>()
            ),
        );
    }
    Some(Value::Object(out))
}

/// `get_kernel_stage_breakdown` over every device plane; `None` when no plane has TraceMe.
pub fn stage_breakdown(space: &XSpace, kernel: Option<&Regex>) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    for plane in device_planes(space) {
        if let Some(v) = plane_breakdown(&plane, kernel) {
            out.insert(plane.name().to_string(), v);
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::testdata;

    #[test]
    fn row06_stage_breakdown_fixture() {
        let Some(space) = testdata::v6e() else { return };
        let re = Regex::new("matmul_optimized").unwrap();
        let r = stage_breakdown(&space, Some(&re)).unwrap();
        let d = &r["/device:TPU:0"];
        eprintln!("{}", serde_json::to_string_pretty(d).unwrap());
        let s = &d["stages"];
        assert_eq!(s["ep_run_kernel"]["kind"], "pipeline");
        assert_eq!(s["acc"]["kind"], "named_scope");
        assert_eq!(s["init"]["kind"], "named_scope");
        assert_eq!(d["wait_ratio"], json!(3.982));
        let table = [
            ("ep_wait_in", 96, 173.374, 1.806),
            ("ep_copy_in", 90, 1.561, 0.017),
            ("ep_run_kernel", 48, 43.579, 0.908),
            ("init", 24, 21.517, 0.897),
            ("acc", 24, 21.885, 0.912),
            ("ep_copy_out", 24, 0.313, 0.013),
            ("ep_wait_out", 21, 0.162, 0.008),
            ("ep_finalize", 3, 5.595, 1.865),
            ("ep_initialize_0", 3, 0.023, 0.008),
            ("ep_initialize_1", 3, 0.016, 0.005),
        ];
        for (n, c, t, m) in table {
            assert_eq!(s[n]["count"], json!(c), "{n}");
            assert_eq!(s[n]["total_us"], json!(t), "{n}");
            assert_eq!(s[n]["mean_us"], json!(m), "{n}");
        }
        assert_eq!(s["acc"]["nested_in"], "ep_run_kernel");
        assert_eq!(d["wait_in_by_input"]["input_0"]["count"], json!(48));
        assert_eq!(d["wait_in_by_input"]["input_1"]["count"], json!(48));
    }
}
