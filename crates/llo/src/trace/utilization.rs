//! `get_llo_utilization`: the `_counters_` samples aggregated per unit.
//!
//! The seed-compatible fields keep the seed's reading (each sample's value belongs to its own
//! `[offset, offset + duration]`). Because that reading decides the headline (on the v6e
//! fixture MXU reads 0 % inside every matmul scope under it and ~79 % when each value is
//! assigned to the following interval), labelled fields add: the alignment check under both
//! readings, repaired malformed samples, samples clipped to the window, and a verdict
//! demoted to "indeterminate" when the alignment makes it suspect.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value, json};
use xprof_xspace::{Plane, XSpace};

use super::intervals::{Windows, covered};
use super::{
    COUNTERS_LINE, TRACEME_LINE, device_planes, event_name, find_line, kernel_spans, median_f64,
    span,
};
use crate::round_to;

/// One `% util` sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub start: i64,
    pub dur: i64,
    pub value: f64,
}

/// Where the analysis looks.
#[derive(Clone, Debug)]
pub enum Window {
    Whole,
    Kernel(String),
    Range(Option<i64>, Option<i64>),
}

/// Duration-weighted median: sort by value; the first value where the cumulative weight
/// reaches half the total.
pub fn weighted_median(pairs: &[(i64, f64)]) -> f64 {
    let mut v = pairs.to_vec();
    v.sort_by(|a, b| a.1.total_cmp(&b.1));
    let total: f64 = v.iter().map(|(w, _)| *w as f64).sum();
    if total <= 0.0 {
        return median_f64(&v.iter().map(|(_, x)| *x).collect::<Vec<_>>());
    }
    let mut seen = 0.0;
    for (w, x) in &v {
        seen += *w as f64;
        if seen >= total / 2.0 {
            return *x;
        }
    }
    v.last().map(|p| p.1).unwrap_or(f64::NAN)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Time-weighted mean of samples over a disjoint union, each sample's value spread over
/// `interval(i)`; `None` when nothing is covered.
fn weighted_in(
    union: &[(i64, i64)],
    items: impl Iterator<Item = ((i64, i64), f64)>,
) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0i128);
    for (iv, v) in items {
        let c = covered(union, iv);
        if c > 0 {
            num += c as f64 * v;
            den += c as i128;
        }
    }
    (den > 0).then(|| num / den as f64)
}

/// The samples of each `% util` unit and the fills/spills totals of a plane, for samples
/// overlapping `windows` (all when `windows` is empty).
fn collect(
    plane: &Plane<'_>,
    windows: &Windows,
) -> (BTreeMap<String, Vec<Sample>>, BTreeMap<String, f64>) {
    let mut samples: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    let mut counts: BTreeMap<String, f64> = BTreeMap::new();
    let Some(line) = find_line(plane, COUNTERS_LINE) else {
        return (samples, counts);
    };
    for ev in line.events() {
        let s = span(&ev);
        if !windows.is_empty() && !windows.overlaps(s) {
            continue;
        }
        let unit = event_name(&ev);
        if let Some(st) = ev.stat("% util") {
            samples.entry(unit).or_default().push(Sample {
                start: s.0,
                dur: s.1.saturating_sub(s.0).max(0),
                value: st.double().unwrap_or(0.0),
            });
        } else {
            for key in ["fills", "spills"] {
                if let Some(st) = ev.stat(key) {
                    *counts.entry(unit.clone()).or_default() += st.double().unwrap_or(0.0);
                }
            }
        }
    }
    (samples, counts)
}

/// Per-plane result of the seed's algorithm plus the labelled additions.
pub fn plane_utilization(plane: &Plane<'_>, window: &Window, buckets: usize) -> Option<Value> {
    find_line(plane, COUNTERS_LINE)?;
    let mut kernel_w: Vec<(i64, i64)> = Vec::new();
    let windows = match window {
        Window::Whole => Windows::default(),
        Window::Kernel(k) => {
            let re = Regex::new(k).ok()?;
            kernel_w = kernel_spans(plane, &re).into_values().flatten().collect();
            if kernel_w.is_empty() {
                return Some(
                    json!({"note": format!("no custom-call invocations matched kernel='{k}'")}),
                );
            }
            Windows::new(kernel_w.clone())
        }
        Window::Range(s, e) => Windows::new(vec![(s.unwrap_or(0), e.unwrap_or(1 << 62))]),
    };
    if kernel_w.is_empty() {
        // Repairs and the alignment check need the owning kernel spans even without --kernel.
        kernel_w = kernel_spans(plane, &Regex::new(".*").expect("valid"))
            .into_values()
            .flatten()
            .collect();
    }
    let kernel_union = Windows::new(kernel_w.clone()).union();
    let (mut samples, counts) = collect(plane, &windows);
    let starts: Vec<i64> = samples.values().flatten().map(|s| s.start).collect();
    let trace_span = match (starts.iter().min(), starts.iter().max()) {
        (Some(a), Some(b)) => (b - a).max(1),
        _ => 1,
    };
    let window_union = if windows.is_empty() {
        None
    } else {
        Some(windows.union())
    };

    let mut units = Map::new();
    for (unit, vals) in samples.iter_mut() {
        let good: Vec<Sample> = vals
            .iter()
            .copied()
            .filter(|s| s.dur > 0 && s.dur <= trace_span)
            .collect();
        let malformed = vals.len() - good.len();
        let utils: Vec<f64> = vals.iter().map(|s| s.value).collect();
        let mut e = Map::new();
        e.insert("samples".into(), json!(utils.len()));
        e.insert(
            "max_util_pct".into(),
            json!(round_to(utils.iter().cloned().fold(f64::MIN, f64::max), 2)),
        );
        e.insert(
            "mean_util_pct_unweighted".into(),
            json!(round_to(mean(&utils), 2)),
        );
        e.insert(
            "p50_util_pct_unweighted".into(),
            json!(round_to(median_f64(&utils), 2)),
        );
        if good.is_empty() {
            e.insert("mean_util_pct".into(), json!(round_to(mean(&utils), 2)));
            e.insert(
                "p50_util_pct".into(),
                json!(round_to(median_f64(&utils), 2)),
            );
            e.insert(
                "weighted_by".into(),
                json!("none — no sample carried a usable duration; values are unweighted"),
            );
        } else {
            let tot: i64 = good.iter().fold(0i64, |a, s| a.saturating_add(s.dur));
            let num: f64 = good.iter().map(|s| s.dur as f64 * s.value).sum();
            e.insert("mean_util_pct".into(), json!(round_to(num / tot as f64, 2)));
            let pairs: Vec<(i64, f64)> = good.iter().map(|s| (s.dur, s.value)).collect();
            e.insert(
                "p50_util_pct".into(),
                json!(round_to(weighted_median(&pairs), 2)),
            );
            e.insert("weighted_by".into(), json!("sample duration_ps"));
            e.insert("covered_ps".into(), json!(tot));
        }
        if malformed > 0 {
            e.insert("malformed_duration_samples".into(), json!(malformed));
            e.insert(
                "malformed_note".into(),
                json!(format!(
                    "{malformed} sample(s) reported a duration longer than the whole observed span ({trace_span} ps) — an exporter writing an absolute end into duration_ps; excluded from the weighting"
                )),
            );
            // T2: a malformed duration that equals the absolute end of the kernel span owning
            // the sample is read as that end; the sample then lasts `end − start`.
            let mut repaired = Vec::new();
            for s in vals.iter().filter(|s| !(s.dur > 0 && s.dur <= trace_span)) {
                if let Some(&(_, ke)) = kernel_union
                    .iter()
                    .find(|(ks, ke)| *ks <= s.start && s.start < *ke)
                    && s.dur == ke
                {
                    repaired.push(Sample {
                        dur: ke.saturating_sub(s.start),
                        ..*s
                    });
                }
            }
            if !repaired.is_empty() {
                let all: Vec<Sample> = good.iter().chain(repaired.iter()).copied().collect();
                let tot: i64 = all.iter().fold(0i64, |a, s| a.saturating_add(s.dur));
                let num: f64 = all.iter().map(|s| s.dur as f64 * s.value).sum();
                e.insert(
                    "repaired_samples".into(),
                    json!({
                        "count": repaired.len(),
                        "rule": "duration_ps equal to the absolute end of the owning kernel span is read as that end: duration = span_end − start",
                        "repaired_ps": repaired.iter().map(|s| s.dur).collect::<Vec<_>>(),
                        "mean_util_pct_with_repaired": round_to(num / tot as f64, 2),
                    }),
                );
            }
        }
        if let Some(u) = &window_union {
            // T3: clip each sample to the window before weighting.
            let m = weighted_in(
                u,
                good.iter().map(|s| ((s.start, s.start + s.dur), s.value)),
            );
            e.insert(
                "mean_util_pct_clipped".into(),
                json!(m.map(|m| round_to(m, 2))),
            );
        }
        if buckets > 0 && vals.len() > 1 {
            vals.sort_by(|a, b| {
                (a.start, a.dur)
                    .cmp(&(b.start, b.dur))
                    .then(a.value.total_cmp(&b.value))
            });
            let t0 = vals[0].start;
            let t1 = vals[vals.len() - 1].start;
            let width = ((t1 - t0) / buckets as i64 + 1).max(1);
            let src: Vec<(i64, i64, f64)> = if good.is_empty() {
                vals.iter().map(|s| (s.start, 1, s.value)).collect()
            } else {
                good.iter().map(|s| (s.start, s.dur, s.value)).collect()
            };
            let mut b: BTreeMap<i64, (f64, i64)> = BTreeMap::new();
            for (t, d, v) in src {
                let x = b.entry((t - t0) / width).or_default();
                x.0 += d as f64 * v;
                x.1 = x.1.saturating_add(d);
            }
            let tl: Vec<Value> = (0..buckets as i64)
                .map(|i| {
                    b.get(&i)
                        .map(|(n, d)| json!(round_to(n / (*d).max(1) as f64, 1)))
                        .unwrap_or(Value::Null)
                })
                .collect();
            e.insert("timeline_mean_pct".into(), Value::Array(tl));
        }
        units.insert(unit.clone(), Value::Object(e));
    }
    for (unit, total) in &counts {
        units.insert(unit.clone(), json!({"total_count": total}));
    }
    if units.is_empty() {
        return Some(json!({"note": "no _counters_ samples in window"}));
    }

    let mean_of = |u: &str| {
        units
            .get(u)
            .and_then(|v| v.get("mean_util_pct"))
            .and_then(Value::as_f64)
    };
    let mut verdict = Map::new();
    let mut best: Option<(&str, f64)> = None;
    for (u, v) in &units {
        if let Some(m) = v.get("mean_util_pct").and_then(Value::as_f64)
            && best.is_none_or(|(_, b)| m > b)
        {
            best = Some((u, m));
        }
    }
    if let Some((dom, _)) = best {
        verdict.insert("dominant_unit".into(), json!(dom));
        let (mxu, vload, salu) = (
            mean_of("MXU"),
            mean_of("Vector Load"),
            mean_of("Scalar ALU"),
        );
        verdict.insert("mxu_mean_util_pct".into(), json!(mxu));
        let missing: Vec<&str> = [("MXU", mxu), ("Vector Load", vload), ("Scalar ALU", salu)]
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(n, _)| *n)
            .collect();
        if missing.is_empty() {
            verdict.insert("memory_bound_signal".into(), json!(vload > mxu));
            verdict.insert("scalar_bound_signal".into(), json!(salu > mxu));
        } else {
            verdict.insert("status".into(), json!("indeterminate"));
            verdict.insert("missing_units".into(), json!(missing));
            verdict.insert(
                "note".into(),
                json!(format!(
                    "no samples for {} in this window — bound signals are not derivable and are omitted rather than defaulted to zero",
                    missing.join(", ")
                )),
            );
        }
    }

    let scope = window_union.clone().unwrap_or_else(|| kernel_union.clone());
    let check = alignment_check(plane, &samples, trace_span, &scope);
    let verdict_corrected = corrected_verdict(&check, &verdict);

    let mut out = Map::new();
    out.insert(
        "window".into(),
        json!(match window {
            Window::Kernel(_) => "kernel spans",
            Window::Range(..) => "explicit range",
            Window::Whole => "whole trace",
        }),
    );
    out.insert("units".into(), Value::Object(units));
    out.insert("verdict".into(), Value::Object(verdict));
    out.insert(
        "semantics".into(),
        json!("LLO static slot occupancy over measured windows"),
    );
    out.insert("trace_span_ps".into(), json!(trace_span));
    out.insert("alignment_check".into(), check);
    out.insert("verdict_corrected".into(), verdict_corrected);
    Some(Value::Object(out))
}

/// Unions of TraceMe spans by stage name inside `scope`.
fn stage_unions(plane: &Plane<'_>, scope: &[(i64, i64)]) -> BTreeMap<String, Vec<(i64, i64)>> {
    let mut by: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    if let Some(l) = find_line(plane, TRACEME_LINE) {
        let sw = Windows::new(scope.to_vec());
        for ev in l.events() {
            let s = span(&ev);
            if scope.is_empty() || sw.overlaps(s) {
                by.entry(event_name(&ev)).or_default().push(s);
            }
        }
    }
    by.into_iter()
        .map(|(k, v)| (k, Windows::new(v).union()))
        .collect()
}

/// T1: time-weighted util per region under both readings of a sample's interval.
fn alignment_check(
    plane: &Plane<'_>,
    samples: &BTreeMap<String, Vec<Sample>>,
    trace_span: i64,
    scope: &[(i64, i64)],
) -> Value {
    let stages = stage_unions(plane, scope);
    let union_of = |names: &[&str]| -> Vec<(i64, i64)> {
        Windows::new(
            names
                .iter()
                .filter_map(|n| stages.get(*n))
                .flatten()
                .copied()
                .collect(),
        )
        .union()
    };
    let mut regions: Vec<(String, Vec<(i64, i64)>)> = vec![
        ("window".into(), scope.to_vec()),
        (
            "compute (ep_run_kernel)".into(),
            union_of(&["ep_run_kernel"]),
        ),
        (
            "wait (ep_wait_in + ep_wait_out)".into(),
            union_of(&["ep_wait_in", "ep_wait_out"]),
        ),
    ];
    for name in stages
        .keys()
        .filter(|n| !super::EP_STAGES.contains(&n.as_str()))
    {
        regions.push((format!("named_scope {name}"), stages[name].clone()));
    }
    let mut per_alignment = Map::new();
    for (label, shifted) in [("own_interval", false), ("next_interval", true)] {
        let mut regs = Map::new();
        for (rname, region) in &regions {
            let mut unit_means = Map::new();
            for (unit, vals) in samples {
                let mut v: Vec<Sample> = vals
                    .iter()
                    .copied()
                    .filter(|s| s.dur > 0 && s.dur <= trace_span)
                    .collect();
                v.sort_by_key(|s| s.start);
                let items: Vec<((i64, i64), f64)> = if shifted {
                    v.windows(2)
                        .map(|w| ((w[1].start, w[1].start + w[1].dur), w[0].value))
                        .collect()
                } else {
                    v.iter()
                        .map(|s| ((s.start, s.start + s.dur), s.value))
                        .collect()
                };
                let m = weighted_in(region, items.into_iter());
                unit_means.insert(unit.clone(), json!(m.map(|m| round_to(m, 1))));
            }
            regs.insert(rname.clone(), Value::Object(unit_means));
        }
        per_alignment.insert(label.into(), Value::Object(regs));
    }
    let get = |a: &str, r: &str, u: &str| per_alignment[a][r][u].as_f64();
    let own_compute = get("own_interval", "compute (ep_run_kernel)", "MXU");
    let next_compute = get("next_interval", "compute (ep_run_kernel)", "MXU");
    let suspect = matches!((own_compute, next_compute), (Some(o), Some(n)) if o < 1.0 && n >= 10.0);
    json!({
        "own_interval": per_alignment["own_interval"],
        "next_interval": per_alignment["next_interval"],
        "suspect": suspect,
        "suspect_reason": if suspect {
            Value::from(format!(
                "MXU reads {:.1}% inside ep_run_kernel when each sample's value is given its own interval but {:.1}% when given the following one: the headline depends on the alignment, not on measured activity",
                own_compute.unwrap_or(0.0), next_compute.unwrap_or(0.0)))
        } else { Value::Null },
        "semantics": "time-weighted mean % util (well-formed samples, clipped to each region). own_interval = the seed's reading (value over [offset, offset+duration]); next_interval = each value over the following sample's interval. Neither is measured busy time: the counters carry per-region static occupancy.",
    })
}

fn corrected_verdict(check: &Value, verdict: &Map<String, Value>) -> Value {
    if check["suspect"] == json!(true) {
        let next = &check["next_interval"]["window"];
        let mut best: Option<(&str, f64)> = None;
        if let Some(o) = next.as_object() {
            for (u, v) in o {
                if let Some(m) = v.as_f64()
                    && best.is_none_or(|(_, b)| m > b)
                {
                    best = Some((u, m));
                }
            }
        }
        json!({
            "status": "indeterminate",
            "reason": check["suspect_reason"],
            "dominant_unit_own_interval": verdict.get("dominant_unit"),
            "dominant_unit_next_interval": best.map(|b| b.0),
            "note": "do not quote a single 'MXU busy x%' figure from these counters; use get_llo_static_utilization for occupancy and get_kernel_stage_breakdown for measured time",
        })
    } else {
        json!({
            "status": if verdict.contains_key("status") { "indeterminate" } else { "consistent" },
            "dominant_unit": verdict.get("dominant_unit"),
            "note": "the dominant unit does not depend on the sample-interval alignment in this window",
        })
    }
}

/// `get_llo_utilization` over every device plane; `None` when no plane has `_counters_`.
pub fn llo_utilization(
    space: &XSpace,
    window: &Window,
    buckets: usize,
) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    for plane in device_planes(space) {
        if let Some(v) = plane_utilization(&plane, window, buckets.min(50)) {
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
    fn weighted_median_rule() {
        assert_eq!(weighted_median(&[(1, 79.0), (100, 0.0)]), 0.0);
        assert_eq!(weighted_median(&[(10, 5.0), (10, 1.0), (1, 9.0)]), 5.0);
    }

    fn unit<'a>(r: &'a Map<String, Value>, u: &str) -> &'a Value {
        &r["/device:TPU:0"]["units"][u]
    }

    #[test]
    fn row03_kernel_window_fixture() {
        let Some(space) = testdata::v6e() else { return };
        let r = llo_utilization(&space, &Window::Kernel("matmul_optimized".into()), 0).unwrap();
        let d = &r["/device:TPU:0"];
        assert_eq!(d["window"], "kernel spans");
        let mxu = unit(&r, "MXU");
        assert_eq!(mxu["p50_util_pct_unweighted"], json!(72.07));
        assert_eq!(mxu["mean_util_pct"], json!(0.26));
        assert_eq!(mxu["weighted_by"], "sample duration_ps");
        assert_eq!(d["verdict"]["dominant_unit"], "Scalar ALU");
        assert_eq!(unit(&r, "Vector Fills")["total_count"], json!(0.0));
        assert!(
            d["semantics"]
                .as_str()
                .unwrap()
                .contains("static slot occupancy")
        );
    }

    #[test]
    fn row04_unknown_kernel_fixture() {
        let Some(space) = testdata::v6e() else { return };
        let r = llo_utilization(&space, &Window::Kernel("nonexistent_kernel".into()), 0).unwrap();
        assert!(r["/device:TPU:0"].get("note").is_some());
    }

    #[test]
    fn row05_whole_trace_fixture() {
        let Some(space) = testdata::v6e() else { return };
        let r = llo_utilization(&space, &Window::Whole, 0).unwrap();
        let table = [
            ("MXU", 294, 0.26, 0.0, 39.24, 72.07, 79.13, None),
            (
                "Scalar ALU",
                441,
                19.27,
                14.29,
                30.09,
                14.29,
                61.54,
                Some(3),
            ),
            ("Vector Load", 441, 9.72, 9.52, 21.57, 10.26, 52.78, Some(3)),
            ("Vector ALU", 294, 0.05, 0.0, 7.36, 9.89, 19.75, None),
            ("Vector Store", 294, 0.07, 0.0, 9.81, 18.02, 19.78, None),
            ("XLU", 1, 0.0, 0.0, 0.0, 0.0, 0.0, None),
            ("Vector EUP", 1, 0.0, 0.0, 0.0, 0.0, 0.0, None),
        ];
        for (u, n, mean, p50, mu, pu, max, bad) in table {
            let e = unit(&r, u);
            assert_eq!(e["samples"], json!(n), "{u}");
            assert_eq!(e["mean_util_pct"], json!(mean), "{u}");
            assert_eq!(e["p50_util_pct"], json!(p50), "{u}");
            assert_eq!(e["mean_util_pct_unweighted"], json!(mu), "{u}");
            assert_eq!(e["p50_util_pct_unweighted"], json!(pu), "{u}");
            assert_eq!(e["max_util_pct"], json!(max), "{u}");
            assert_eq!(
                e.get("malformed_duration_samples").cloned(),
                bad.map(|b: i32| json!(b)),
                "{u}"
            );
        }
        assert_eq!(unit(&r, "MXU")["covered_ps"], json!(221479220));
        let salu = unit(&r, "Scalar ALU");
        assert!(
            salu["malformed_note"]
                .as_str()
                .unwrap()
                .contains("longer than the whole observed span")
        );
        assert_eq!(r["/device:TPU:0"]["trace_span_ps"], json!(605102500));
        let v = &r["/device:TPU:0"]["verdict"];
        assert!(v.get("status").is_none());
        assert_eq!(v["mxu_mean_util_pct"], json!(0.26));
        assert_eq!(v["memory_bound_signal"], true);
        assert_eq!(v["scalar_bound_signal"], true);
    }

    #[test]
    fn alignment_check_fixture() {
        let Some(space) = testdata::v6e() else { return };
        let r = llo_utilization(&space, &Window::Kernel("matmul_optimized".into()), 0).unwrap();
        let c = &r["/device:TPU:0"]["alignment_check"];
        eprintln!("{}", serde_json::to_string_pretty(c).unwrap());
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&r["/device:TPU:0"]["units"]["Scalar ALU"]).unwrap()
        );
        assert_eq!(c["own_interval"]["named_scope acc"]["MXU"], json!(0.0));
        assert_eq!(c["next_interval"]["named_scope acc"]["MXU"], json!(79.0));
        assert_eq!(c["suspect"], true);
        assert_eq!(
            r["/device:TPU:0"]["verdict_corrected"]["status"],
            "indeterminate"
        );
    }
}

/// Loads the static utilization matrix of an LLO program: `Ok(None)` when the dump has no
/// such program, `Err(reason)` when it cannot be read.
pub type MatrixSource<'a> = &'a dyn Fn(&str) -> Result<Option<crate::matrix::Matrix>, String>;

/// "Static occupancy × measured stage time": for each TraceMe stage of each kernel, the
/// bundle range its Tensor Core markers span, that range's static occupancy per unit (from
/// the LLO dump) and the stage's measured time weighted by it. Needs no reading of the
/// `_counters_` values at all.
pub fn decomposition(plane: &Plane<'_>, kernel: &Regex, source: MatrixSource<'_>) -> Value {
    let mut out = Map::new();
    for (op, spans) in kernel_spans(plane, kernel) {
        let m = match source(&op) {
            Ok(Some(m)) => m,
            Ok(None) => {
                out.insert(op.clone(), json!({"status": "no_join", "reason": format!("the LLO dump has no program named '{op}'")}));
                continue;
            }
            Err(reason) => {
                out.insert(op.clone(), json!({"status": "no_join", "reason": reason}));
                continue;
            }
        };
        let w = Windows::new(spans);
        let events = super::stages::stage_events(plane, &w);
        let markers = super::stages::markers_by_stage(plane, &events, &w);
        let mut totals: BTreeMap<String, i64> = BTreeMap::new();
        for (n, (s, e)) in &events {
            let t = totals.entry(n.clone()).or_default();
            *t = t.saturating_add(e.saturating_sub(*s));
        }
        let mut stages = Map::new();
        let mut unjoined = Vec::new();
        for (name, total) in &totals {
            let Some(addrs) = markers.get(name).filter(|a| !a.is_empty()) else {
                unjoined.push(name.clone());
                continue;
            };
            let lo = *addrs.keys().next().expect("non-empty") as usize;
            let hi = *addrs.keys().next_back().expect("non-empty") as usize;
            if hi >= m.rows.len() {
                unjoined.push(name.clone());
                continue;
            }
            let rows: Vec<&Vec<u32>> = m.rows[lo..=hi]
                .iter()
                .filter(|r| m.is_well_formed(r))
                .collect();
            let us = *total as f64 / 1e6;
            let mut occ = Map::new();
            let mut weighted = Map::new();
            for (i, u) in m.units.iter().enumerate() {
                let o = if rows.is_empty() {
                    None
                } else {
                    Some(
                        rows.iter()
                            .map(|r| r[i] as f64 / m.cap(i) as f64)
                            .sum::<f64>()
                            / rows.len() as f64
                            * 100.0,
                    )
                };
                occ.insert(u.clone(), json!(o.map(|o| round_to(o, 2))));
                weighted.insert(u.clone(), json!(o.map(|o| round_to(o / 100.0 * us, 3))));
            }
            stages.insert(
                name.clone(),
                json!({
                    "measured_total_us": round_to(us, 3),
                    "bundle_range": [crate::hex(lo as u64), crate::hex(hi as u64)],
                    "static_occupancy_pct": occ,
                    "occupancy_weighted_us": weighted,
                }),
            );
        }
        out.insert(
            op.clone(),
            json!({
                "stages": stages,
                "unjoined_stages": unjoined,
                "unjoined_reason": "no Tensor Core bundle marker falls inside these stages' spans, so their bundle range is unknown",
            }),
        );
    }
    json!({
        "semantics": "static occupancy × measured stage time: measured TraceMe stage time, weighted by the static slot occupancy of the bundle range between the stage's Tensor Core markers (from the LLO dump); no _counters_ interpretation involved",
        "kernels": out,
    })
}

#[cfg(test)]
mod decomposition_tests {
    use super::*;
    use crate::dump::DumpIndex;
    use crate::trace::testdata;

    #[test]
    fn decomposition_joins_stage_time_to_static_occupancy() {
        let Some(space) = testdata::v6e() else { return };
        let f = crate::testutil::fixtures().unwrap();
        let idx = DumpIndex::open(Some(f.join("jf_dump"))).unwrap();
        let src = |p: &str| -> Result<Option<crate::matrix::Matrix>, String> {
            let Ok(prog) = idx.program(p) else {
                return Ok(None);
            };
            crate::fit::load_matrix(&idx, prog.primary())
                .map(|o| o.map(|(_, _, m)| m))
                .map_err(|e| e.to_string())
        };
        let plane = crate::trace::device_planes(&space).remove(0);
        let d = decomposition(&plane, &Regex::new(".*").unwrap(), &src);
        let k = &d["kernels"]["matmul_optimized.1"];
        let run = &k["stages"]["ep_run_kernel"];
        assert_eq!(run["bundle_range"], json!(["0x272", "0x772"]));
        assert_eq!(run["measured_total_us"], json!(43.579));
        let mxu = run["static_occupancy_pct"]["MXU"].as_f64().unwrap();
        assert!(mxu > 50.0, "{mxu}");
        assert!(
            k["unjoined_stages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s == "ep_wait_in")
        );
    }
}
