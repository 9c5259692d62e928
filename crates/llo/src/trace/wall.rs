//! `get_device_wall_report`: device-busy time from the trace beside the caller's wall-clock
//! measurement, both framings labelled.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};
use xprof_xspace::XSpace;

use super::{device_planes, kernel_spans, median_i64};
use crate::round_to;

static WALL_KEY_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(^|_)(wall_)?p50(_ms|_us|_ns)?$|^wall_ms$|^wall_us$").unwrap());

pub const WALL_RATIO_LABEL: &str =
    "wall_ratio (deployable — what a caller of the op actually gets)";
pub const DEVICE_RATIO_LABEL: &str = "device_ratio (device-framing — overstates the win when dispatch/host overhead dominates the wall time)";

/// Median kernel span over all device planes, in ms; `None` without instrumented spans.
pub fn device_busy_p50_ms(space: &XSpace, kernel: &Regex) -> Option<f64> {
    let d: Vec<i64> = device_planes(space)
        .iter()
        .flat_map(|p| {
            kernel_spans(p, kernel)
                .into_values()
                .flatten()
                .map(|(s, e)| e.saturating_sub(s))
                .collect::<Vec<_>>()
        })
        .collect();
    (!d.is_empty()).then(|| median_i64(&d) / 1e9)
}

/// A wall-like numeric leaf: `(dotted path, value in ms, key had a unit)`.
#[derive(Clone, Debug, PartialEq)]
pub struct WallLeaf {
    pub path: String,
    pub ms: f64,
    pub unit_explicit: bool,
    pub key: String,
}

/// Keys whose prefix names a baseline or a reference measurement, not the candidate's.
fn is_reference_key(k: &str) -> bool {
    let l = k.to_ascii_lowercase();
    [
        "baseline_",
        "base_",
        "ref_",
        "reference_",
        "prev_",
        "previous_",
        "old_",
    ]
    .iter()
    .any(|p| l.starts_with(p))
}

/// Numeric leaves whose key looks like a wall p50, in document order (reference-prefixed
/// keys such as `baseline_p50_ms` excluded).
pub fn wall_leaves(v: &Value, path: &str, out: &mut Vec<WallLeaf>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if let (Some(n), true) =
                    (x.as_f64(), WALL_KEY_RE.is_match(k) && !is_reference_key(k))
                {
                    let (scale, unit) = if k.ends_with("_us") {
                        (1e-3, true)
                    } else if k.ends_with("_ns") {
                        (1e-6, true)
                    } else {
                        (1.0, k.ends_with("_ms"))
                    };
                    out.push(WallLeaf {
                        path: p,
                        ms: n * scale,
                        unit_explicit: unit,
                        key: k.clone(),
                    });
                } else {
                    wall_leaves(x, &p, out);
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                wall_leaves(x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Remove every `baseline` key at any depth, returning the removed subtrees in order.
pub fn pop_baselines(v: &mut Value) -> Vec<Value> {
    let mut found = Vec::new();
    match v {
        Value::Object(m) => {
            if let Some(b) = m.shift_remove("baseline") {
                found.push(b);
            }
            for x in m.values_mut() {
                found.extend(pop_baselines(x));
            }
        }
        Value::Array(a) => {
            for x in a {
                found.extend(pop_baselines(x));
            }
        }
        _ => {}
    }
    found
}

fn floor_check(claim: Option<f64>, floor: f64, what: &str) -> Option<Value> {
    let c = claim?;
    if floor == 0.0 || c >= floor {
        return None;
    }
    Some(json!({
        "claim": what,
        "claim_ms": c,
        "floor_ms": floor,
        "verdict": "PHYSICALLY_IMPOSSIBLE",
        "detail": format!(
            "{what} of {} ms is {:.1}x below the stated physical floor of {} ms — the measurement or the framing is wrong, not the hardware",
            fmt_g6(c), floor / c, fmt_g6(floor)
        ),
    }))
}

/// C's `%.6g`.
pub fn fmt_g6(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let exp = x.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{:.5e}", x);
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{:.*}", decimals, x);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Inputs of the report.
pub struct WallInputs<'a> {
    pub run: &'a str,
    pub kernel: &'a str,
    pub device_ms: Option<f64>,
    /// `(file name, parsed JSON)` of the measurement.
    pub measure: Option<(String, Value)>,
    pub baseline_run: Option<(&'a str, Option<f64>)>,
    pub floor_ms: f64,
    /// A JSON pointer (`/results/0/p50_us`) naming the wall value explicitly.
    pub wall_key: Option<String>,
    /// The unit of unitless keys (`ms`, `us`, `ns`, `s`); without it they are not used.
    pub wall_unit: Option<String>,
}

/// Milliseconds per unit name.
pub fn unit_scale(u: &str) -> Option<f64> {
    match u {
        "ms" => Some(1.0),
        "us" => Some(1e-3),
        "ns" => Some(1e-6),
        "s" => Some(1e3),
        _ => None,
    }
}

pub fn report(inp: WallInputs<'_>) -> Value {
    let mut r = Map::new();
    r.insert("run".into(), json!(inp.run));
    r.insert(
        "kernel".into(),
        json!(if inp.kernel.is_empty() {
            "(all instrumented)"
        } else {
            inp.kernel
        }),
    );
    r.insert("device_busy_p50_ms".into(), json!(inp.device_ms));
    if inp.device_ms.is_none() {
        r.insert(
            "device_note".into(),
            json!(format!(
                "no instrumented kernel spans found in trace; {}",
                super::CAPTURE_HINT
            )),
        );
    }
    let mut wall = None;
    let mut baseline_wall = None;
    if let Some((file, mut doc)) = inp.measure {
        let mut baselines = Vec::new();
        if let Value::Object(m) = &mut doc
            && let Some(b) = m.shift_remove("baseline")
        {
            baselines.push(b);
        }
        baselines.extend(pop_baselines(&mut doc));
        let mut leaves = Vec::new();
        wall_leaves(&doc, "", &mut leaves);
        let unit_scale_arg = inp.wall_unit.as_deref().and_then(unit_scale);
        // A key without a unit is used only when the caller says what unit it is in.
        let (mut usable, unitless): (Vec<WallLeaf>, Vec<WallLeaf>) =
            leaves.into_iter().partition(|l| l.unit_explicit);
        if let Some(sc) = unit_scale_arg {
            usable.extend(unitless.iter().cloned().map(|l| WallLeaf {
                ms: l.ms * sc,
                unit_explicit: true,
                ..l
            }));
        } else if !unitless.is_empty() {
            r.insert(
                "wall_unitless_keys".into(),
                json!({
                    "keys": unitless.iter().map(|l| l.path.clone()).collect::<Vec<_>>(),
                    "note": "keys without a _ms/_us/_ns unit are not read as a wall time; pass --wall_unit (ms, us, ns, s) to use them",
                }),
            );
        }
        if let Some(ptr) = inp.wall_key.as_deref() {
            // An explicit JSON pointer wins over the key search.
            let last = ptr.rsplit('/').next().unwrap_or("");
            let scale = if last.ends_with("_us") {
                Some(1e-3)
            } else if last.ends_with("_ns") {
                Some(1e-6)
            } else if last.ends_with("_ms") {
                Some(1.0)
            } else {
                unit_scale_arg
            };
            match (doc.pointer(ptr).and_then(Value::as_f64), scale) {
                (Some(v), Some(sc)) => {
                    usable = vec![WallLeaf {
                        path: ptr.to_string(),
                        ms: v * sc,
                        unit_explicit: true,
                        key: last.to_string(),
                    }];
                }
                (Some(_), None) => {
                    r.insert(
                        "wall_note".into(),
                        json!(format!(
                            "--wall_key {ptr} names a key without a unit; pass --wall_unit"
                        )),
                    );
                    usable.clear();
                }
                (None, _) => {
                    r.insert(
                        "wall_note".into(),
                        json!(format!("--wall_key {ptr} names no number in '{file}'")),
                    );
                    usable.clear();
                }
            }
        }
        if let Some(first) = usable.first() {
            r.insert(
                "wall_source".into(),
                json!({"file": file, "key": first.path}),
            );
            wall = Some(first.ms);
            r.insert(
                "wall_confidence".into(),
                json!(if usable.len() > 1 { "low" } else { "high" }),
            );
            if usable.len() > 1 {
                r.insert(
                    "wall_ambiguous".into(),
                    json!({
                        "note": "multiple wall/p50-like keys matched; used the first in document order — confirm it is the candidate's, or pass --wall_key",
                        "candidates": usable.iter().take(8).map(|l| json!({"key": l.path, "value_ms": l.ms})).collect::<Vec<_>>(),
                    }),
                );
            }
        } else if !r.contains_key("wall_note") {
            r.insert(
                "wall_note".into(),
                json!(format!("no wall/p50-like key found in '{file}' (accepted: wall_p50_ms, p50_ms, p50_us, wall.p50_ms)")),
            );
        }
        if let Some(b) = baselines.first() {
            let mut bl = Vec::new();
            wall_leaves(b, "", &mut bl);
            baseline_wall = bl.iter().find(|l| l.unit_explicit).map(|l| l.ms);
        }
    }
    r.insert("wall_p50_ms".into(), json!(wall));
    if let (Some(w), Some(d)) = (wall, inp.device_ms) {
        let gap = round_to(100.0 * (w - d) / w, 1);
        r.insert("gap_pct".into(), json!(gap));
        let framing = if d > w {
            "device-busy EXCEEDS wall — overlapping invocations or mismatched aggregation windows; the device framing is unreliable here, trust wall".to_string()
        } else if gap.abs() < 5.0 {
            "framings agree (gap < 5%) — dispatch overhead is negligible; either number is honest"
                .to_string()
        } else {
            format!(
                "wall is {:.2}x device-busy — dispatch/host overhead owns the difference; quote the wall number for deployable claims",
                w / d
            )
        };
        r.insert("framing".into(), json!(framing));
    }
    let mut baseline_device = None;
    if let Some((name, dev)) = inp.baseline_run {
        baseline_device = dev;
        r.insert("baseline_run".into(), json!(name));
        r.insert("baseline_device_busy_p50_ms".into(), json!(dev));
    }
    if let Some(b) = baseline_wall {
        r.insert("baseline_wall_p50_ms".into(), json!(b));
    }
    let mut ratios = Map::new();
    if let (Some(w), Some(b)) = (
        wall.filter(|w| *w != 0.0),
        baseline_wall.filter(|b| *b != 0.0),
    ) {
        ratios.insert("wall_ratio".into(), json!(round_to(b / w, 2)));
        ratios.insert("wall_ratio_label".into(), json!(WALL_RATIO_LABEL));
    }
    if let (Some(d), Some(b)) = (
        inp.device_ms.filter(|d| *d != 0.0),
        baseline_device.filter(|b| *b != 0.0),
    ) {
        ratios.insert("device_ratio".into(), json!(round_to(b / d, 2)));
        ratios.insert("device_ratio_label".into(), json!(DEVICE_RATIO_LABEL));
    }
    if !ratios.is_empty() {
        if let (Some(w), Some(d)) = (
            ratios.get("wall_ratio").and_then(Value::as_f64),
            ratios.get("device_ratio").and_then(Value::as_f64),
        ) && d > 1.5 * w
        {
            r.insert(
                "ratio_warning".into(),
                json!("device_ratio overstates wall_ratio by >1.5x — the device framing is inflating this win (dispatch-bound regime); report wall_ratio"),
            );
        }
        r.insert("ratios".into(), Value::Object(ratios));
    }
    if inp.floor_ms != 0.0 {
        let audit: Vec<Value> = [
            floor_check(wall, inp.floor_ms, "wall p50"),
            floor_check(inp.device_ms, inp.floor_ms, "device-busy p50"),
        ]
        .into_iter()
        .flatten()
        .collect();
        r.insert("floor_ms".into(), json!(inp.floor_ms));
        r.insert(
            "floor_audit".into(),
            if audit.is_empty() {
                json!([{"verdict": "OK", "detail": "no claim below the floor"}])
            } else {
                Value::Array(audit)
            },
        );
    }
    r.insert(
        "caveat".into(),
        json!("device-busy comes from instrumented custom-call spans in the trace (LLO kernel-profiling flags); wall comes from the caller's measurement file. Neither alone is 'the' time: wall is what deploys, device is what the kernel costs on-chip."),
    );
    Value::Object(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g6() {
        assert_eq!(fmt_g6(0.0363), "0.0363");
        assert_eq!(fmt_g6(0.599), "0.599");
        assert_eq!(fmt_g6(1234567.0), "1.23457e+06");
        assert_eq!(fmt_g6(0.075785), "0.075785");
    }

    fn rep(measure: Value, floor: f64, baseline: bool) -> Value {
        report(WallInputs {
            run: "testrun",
            kernel: "matmul_optimized",
            device_ms: Some(0.075785),
            measure: Some(("m.json".into(), measure)),
            baseline_run: baseline.then_some(("testrun", Some(0.075785))),
            floor_ms: floor,
            wall_key: None,
            wall_unit: None,
        })
    }

    #[test]
    fn row25_floor_and_ratios() {
        let r = rep(
            json!({"wall_p50_ms": 0.0363, "baseline": {"wall_p50_ms": 0.599}}),
            0.599,
            true,
        );
        let a = &r["floor_audit"][0];
        assert_eq!(a["claim"], "wall p50");
        assert_eq!(a["verdict"], "PHYSICALLY_IMPOSSIBLE");
        assert!(a["detail"].as_str().unwrap().contains("16.5x below"));
        assert_eq!(r["ratios"]["wall_ratio"], json!(16.5));
        assert!(
            r["ratios"]["wall_ratio_label"]
                .as_str()
                .unwrap()
                .contains("deployable")
        );
        assert!(
            r["ratios"]["device_ratio_label"]
                .as_str()
                .unwrap()
                .contains("device-framing")
        );
        assert!(
            r["framing"]
                .as_str()
                .unwrap()
                .contains("device-busy EXCEEDS wall")
        );
    }

    #[test]
    fn row26_framings_agree() {
        let r = rep(json!({"wall_p50_ms": 0.0765}), 0.0, false);
        assert!(r["gap_pct"].as_f64().unwrap().abs() < 5.0);
        assert!(r["framing"].as_str().unwrap().contains("framings agree"));
    }

    #[test]
    fn row27_microseconds_in_a_list() {
        let r = rep(json!({"results": [{"p50_us": 758.0}]}), 0.0, false);
        assert_eq!(r["wall_p50_ms"], json!(0.758));
        assert_eq!(r["gap_pct"], json!(90.0));
        assert!(
            r["framing"]
                .as_str()
                .unwrap()
                .contains("dispatch/host overhead")
        );
        assert!(r.get("floor_audit").is_none());
    }

    #[test]
    fn row29_nested_baseline_is_not_the_candidate() {
        let r = rep(
            json!({"results": {"baseline": {"p50_ms": 5.0}, "candidate": {"p50_ms": 1.0}}}),
            0.0,
            false,
        );
        assert_eq!(r["wall_p50_ms"], json!(1.0));
        assert_eq!(r["wall_source"]["key"], "results.candidate.p50_ms");
        assert_eq!(r["baseline_wall_p50_ms"], json!(5.0));
    }

    #[test]
    fn row28_no_measurement() {
        let r = report(WallInputs {
            run: "r",
            kernel: "",
            device_ms: Some(0.075785),
            measure: None,
            baseline_run: None,
            floor_ms: 0.0,
            wall_key: None,
            wall_unit: None,
        });
        assert_eq!(r["device_busy_p50_ms"], json!(0.075785));
        assert_eq!(r["wall_p50_ms"], Value::Null);
        assert!(r.get("caveat").is_some());
    }

    #[test]
    fn unitless_and_reference_keys_are_not_the_wall() {
        let r = rep(
            json!({"p50": 0.07, "baseline_p50_ms": 9.0, "ref_p50_ms": 8.0}),
            0.0,
            false,
        );
        assert!(r["wall_p50_ms"].is_null());
        assert_eq!(r["wall_unitless_keys"]["keys"], json!(["p50"]));
        let r = report(WallInputs {
            run: "r",
            kernel: "",
            device_ms: Some(0.05),
            measure: Some(("m".into(), json!({"p50": 70.0, "x": {"p50_ms": 1.0}}))),
            baseline_run: None,
            floor_ms: 0.0,
            wall_key: None,
            wall_unit: Some("us".into()),
        });
        assert_eq!(
            r["wall_p50_ms"],
            json!(1.0),
            "explicit units first, then the unitless ones"
        );
        assert_eq!(r["wall_confidence"], "low");
    }

    #[test]
    fn explicit_wall_key_wins() {
        let r = report(WallInputs {
            run: "r",
            kernel: "",
            device_ms: Some(0.05),
            measure: Some((
                "m".into(),
                json!({"a": {"p50_ms": 1.0}, "b": [{"t_us": 500.0}]}),
            )),
            baseline_run: None,
            floor_ms: 0.0,
            wall_key: Some("/b/0/t_us".into()),
            wall_unit: None,
        });
        assert_eq!(r["wall_p50_ms"], json!(0.5));
        assert_eq!(r["wall_source"]["key"], "/b/0/t_us");
        assert_eq!(r["wall_confidence"], "high");
    }
}
