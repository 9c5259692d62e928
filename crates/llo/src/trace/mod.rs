//! Kernel-profiling traces: the device-plane lines libtpu writes when a capture runs with
//! `--xla_enable_custom_call_region_trace=true --xla_xprof_register_llo_debug_info=true`:
//! `_counters_` (per-unit static slot occupancy laid over measured intervals), `Tensor Core`
//! (bundle markers carrying LLO bundle addresses) and `XLA TraceMe` (Mosaic pipeline stages
//! and `jax.named_scope`s). Read through `xprof-xspace`.

pub mod intervals;
pub mod stages;
pub mod utilization;
pub mod wall;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};
use xprof_xspace::{Event, Line, Plane, XSpace};

use crate::round_to;
use intervals::Windows;

pub const COUNTERS_LINE: &str = "_counters_";
pub const TENSOR_CORE_LINE: &str = "Tensor Core";
pub const TRACEME_LINE: &str = "XLA TraceMe";
pub const XLA_OPS_LINE: &str = "XLA Ops";

/// The seed's capture hint (verbatim).
pub const CAPTURE_HINT: &str = "Capture with LIBTPU_INIT_ARGS=\"--xla_enable_custom_call_region_trace=true --xla_xprof_register_llo_debug_info=true\" and jax.profiler.trace(...).";
/// The flags a "no data" answer names.
pub const TRACE_CAPTURE_FLAGS: &[&str] = &[
    "LIBTPU_INIT_ARGS=--xla_enable_custom_call_region_trace=true",
    "LIBTPU_INIT_ARGS=--xla_xprof_register_llo_debug_info=true",
];

/// Mosaic emit_pipeline stage names; any other TraceMe name is a user `jax.named_scope`.
pub const EP_STAGES: &[&str] = &[
    "ep_initialize_0",
    "ep_initialize_1",
    "ep_finalize",
    "ep_wait_in",
    "ep_copy_in",
    "ep_run_kernel",
    "ep_wait_out",
    "ep_copy_out",
];

static DEVICE_PLANE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"/device:(TPU|GPU):\d+").unwrap());
static LONG_NAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\[(\d+)\]\s+(0x[0-9a-fA-F]+|\d+):\s*(.*)$").unwrap());

pub fn device_planes(space: &XSpace) -> Vec<Plane<'_>> {
    space
        .planes()
        .filter(|p| DEVICE_PLANE_RE.is_match(p.name()))
        .collect()
}

/// An event's name as the seed resolves it: display name, else name, else `ID:<id>`.
pub fn event_name(ev: &Event<'_>) -> String {
    let n = ev.display_name();
    if n.is_empty() {
        format!("ID:{}", ev.metadata_id())
    } else {
        n.to_string()
    }
}

pub fn find_line<'a>(plane: &Plane<'a>, name: &str) -> Option<Line<'a>> {
    plane.lines().find(|l| l.name() == name)
}

/// `(start_ps, end_ps)`; the end saturates, so a hostile duration cannot overflow.
pub fn span(ev: &Event<'_>) -> (i64, i64) {
    (ev.start_ps(), ev.end_ps())
}

/// Spans of the LLO instrumentation events (Tensor Core markers and TraceMe stages).
pub fn instrumented_windows(plane: &Plane<'_>) -> Windows {
    let mut w = Vec::new();
    for name in [TENSOR_CORE_LINE, TRACEME_LINE] {
        if let Some(l) = find_line(plane, name) {
            w.extend(l.events().map(|e| span(&e)));
        }
    }
    Windows::new(w)
}

/// Kernel (custom-call) invocations: `XLA Ops` events whose name matches `re` and whose span
/// strictly overlaps an instrumentation event (emitted only inside custom-call regions when
/// the flags are on). Keyed by op name, spans in event order.
pub fn kernel_spans(plane: &Plane<'_>, re: &Regex) -> BTreeMap<String, Vec<(i64, i64)>> {
    let mut out: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    let Some(ops) = find_line(plane, XLA_OPS_LINE) else {
        return out;
    };
    let inst = instrumented_windows(plane);
    if inst.is_empty() {
        return out;
    }
    for ev in ops.events() {
        let name = event_name(&ev);
        if !re.is_match(&name) {
            continue;
        }
        let s = span(&ev);
        if inst.overlaps(s) {
            out.entry(name).or_default().push(s);
        }
    }
    out
}

/// All spans of the kernels matching `re` (the analysis window of the kernel tools).
pub fn kernel_windows(plane: &Plane<'_>, re: &Regex) -> Vec<(i64, i64)> {
    kernel_spans(plane, re).into_values().flatten().collect()
}

/// Python's `statistics.median` over integers (mean of the two middle values when even).
pub fn median_i64(v: &[i64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2] as f64
    } else {
        (s[n / 2 - 1] as f64 + s[n / 2] as f64) / 2.0
    }
}

pub fn median_f64(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// count / total / mean / p50 / min / max in µs (3 decimals), plus the exact total in ps.
pub fn duration_stats(d: &[i64]) -> Map<String, Value> {
    let mut o = Map::new();
    if d.is_empty() {
        return o;
    }
    let total: i128 = d.iter().map(|x| *x as i128).sum();
    let us = |ps: f64| round_to(ps / 1e6, 3);
    o.insert("count".into(), json!(d.len()));
    o.insert("total_us".into(), json!(us(total as f64)));
    o.insert("mean_us".into(), json!(us(total as f64 / d.len() as f64)));
    o.insert("p50_us".into(), json!(us(median_i64(d))));
    o.insert("min_us".into(), json!(us(*d.iter().min().unwrap() as f64)));
    o.insert("max_us".into(), json!(us(*d.iter().max().unwrap() as f64)));
    o.insert("total_ps".into(), json!(total as i64));
    o
}

/// A Tensor Core marker's `long_name` (`[134217728]  0x1ee: bundle.134217728`).
#[derive(Clone, Debug, PartialEq)]
pub struct Marker {
    pub instrumentation_id: u64,
    pub bundle_address: u64,
    pub name: String,
}

pub fn parse_long_name(s: &str) -> Option<Marker> {
    let c = LONG_NAME_RE.captures(s.trim())?;
    let a = &c[2];
    let addr = match a.strip_prefix("0x").or_else(|| a.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => a.parse().ok()?,
    };
    Some(Marker {
        instrumentation_id: c[1].parse().ok()?,
        bundle_address: addr,
        name: c[3].to_string(),
    })
}

/// Tensor Core markers inside `windows`: `(time_ps, marker)`.
pub fn markers_in(plane: &Plane<'_>, windows: &Windows) -> Vec<(i64, Marker)> {
    let Some(l) = find_line(plane, TENSOR_CORE_LINE) else {
        return Vec::new();
    };
    l.events()
        .filter_map(|e| {
            let s = span(&e);
            if !windows.is_empty() && !windows.contains_point_or_overlaps(s) {
                return None;
            }
            let ln = e.stat("long_name").and_then(|st| st.str())?;
            parse_long_name(ln).map(|m| (s.0, m))
        })
        .collect()
}

/// `check_kernel_profiling`.
pub fn check_kernel_profiling(space: &XSpace) -> Value {
    let all = Regex::new(".*").expect("valid");
    let mut devices = Map::new();
    let mut active_any = false;
    let mut runtime_lines: Vec<String> = Vec::new();
    for plane in device_planes(space) {
        let mut lines = Map::new();
        for name in [COUNTERS_LINE, TENSOR_CORE_LINE, TRACEME_LINE] {
            lines.insert(
                name.into(),
                json!(find_line(&plane, name).map(|l| l.num_events()).unwrap_or(0)),
            );
        }
        let mut info = Map::new();
        info.insert("lines".into(), Value::Object(lines.clone()));
        let names_of = |line: &str| -> Option<Vec<String>> {
            let l = find_line(&plane, line)?;
            let mut v: Vec<String> = l.events().map(|e| event_name(&e)).collect();
            v.sort();
            v.dedup();
            Some(v)
        };
        if let Some(u) = names_of(COUNTERS_LINE) {
            info.insert("counter_units".into(), json!(u));
        }
        if let Some(s) = names_of(TRACEME_LINE) {
            info.insert("traceme_stages".into(), json!(s));
        }
        let inv: usize = kernel_spans(&plane, &all).values().map(Vec::len).sum();
        info.insert("kernel_invocations".into(), json!(inv));
        let n = |k: &str| lines[k].as_u64().unwrap_or(0);
        let active = n(COUNTERS_LINE) > 0;
        info.insert("active".into(), json!(active));
        info.insert(
            "active_by_family".into(),
            json!({
                "counters": n(COUNTERS_LINE) > 0,
                "tensor_core_markers": n(TENSOR_CORE_LINE) > 0,
                "traceme_stages": n(TRACEME_LINE) > 0,
            }),
        );
        // Newer libtpu writes per-instruction runtime lines instead of (or beside) the
        // static-occupancy counters; report which generation of instrumentation is present.
        let runtime: Vec<String> = plane
            .lines()
            .map(|l| l.name().to_string())
            .filter(|n| is_runtime_instrumentation_line(n))
            .collect();
        let has_runtime = !runtime.is_empty();
        if has_runtime {
            info.insert("runtime_instruction_lines".into(), json!(runtime));
        }
        runtime_lines.extend(runtime);
        info.insert(
            "instrumentation".into(),
            json!(match (active, !has_runtime) {
                (_, false) => "runtime LLO instruction lines (newer libtpu)",
                (true, true) => "static-occupancy _counters_ (kernel profiling)",
                (false, true) => "none",
            }),
        );
        active_any |= active;
        devices.insert(plane.name().to_string(), Value::Object(info));
    }
    let mut out = Map::new();
    let no_devices = devices.is_empty();
    out.insert("devices".into(), Value::Object(devices));
    out.insert("kernel_profiling_active".into(), json!(active_any));
    if no_devices {
        out.insert(
            "note".into(),
            json!("No device planes found in this trace."),
        );
    }
    if !active_any {
        out.insert("hint".into(), json!(CAPTURE_HINT));
    }
    out.insert(
        "runtime_counter_sampling".into(),
        json!(if runtime_lines.is_empty() {
            "not detected"
        } else {
            "detected"
        }),
    );
    out.insert(
        "runtime_counter_sampling_checked".into(),
        json!({
            "looked_for": "device-plane lines named `LLO Instructions`, `MXU* Instructions`, `VALU`, `VLD`, `VST`, `XLU`, `SALU`, `EUP Instructions`, `Pallas Primitives`, `Source Lines` or `* Counters` (sampled runtime instrumentation); `_counters_` is static occupancy, not sampling",
            "found": runtime_lines,
            "note": "periodic runtime counter sampling exists on TPU v7+ only (tpu_enable_periodic_counter_sampling); its absence on earlier generations is expected",
        }),
    );
    Value::Object(out)
}

fn is_runtime_instrumentation_line(n: &str) -> bool {
    matches!(
        n,
        "LLO Instructions"
            | "VALU"
            | "VLD"
            | "VST"
            | "XLU"
            | "SALU"
            | "EUP Instructions"
            | "Pallas Primitives"
            | "Source Lines"
    ) || (n.starts_with("MXU") && n.ends_with("Instructions"))
        || (n.ends_with(" Counters") && n != COUNTERS_LINE)
}

/// `list_kernel_invocations`: per device, per kernel, duration stats, spans, and the LLO
/// bundle addresses its Tensor Core markers carry. `None` when no device plane has any
/// instrumentation event at all.
pub fn list_kernel_invocations(
    space: &XSpace,
    re: &Regex,
    max_spans: usize,
) -> (Map<String, Value>, bool) {
    let mut out = Map::new();
    let mut any_instrumentation = false;
    for plane in device_planes(space) {
        any_instrumentation |= !instrumented_windows(&plane).is_empty();
        let by_op = kernel_spans(&plane, re);
        if by_op.is_empty() {
            continue;
        }
        let modules: Vec<(i64, i64, String, Option<String>)> = find_line(&plane, "XLA Modules")
            .map(|l| {
                l.events()
                    .map(|e| {
                        let (st, en) = span(&e);
                        let run = e
                            .stat("run_id")
                            .and_then(|x| x.uint())
                            .map(|r| r.to_string());
                        (st, en, event_name(&e), run)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut kernels = Vec::new();
        for (op, spans) in by_op {
            let durs: Vec<i64> = spans.iter().map(|(s, e)| e.saturating_sub(*s)).collect();
            let mut k = Map::new();
            k.insert("kernel".into(), json!(op));
            k.extend(duration_stats(&durs));
            k.insert(
                "spans_ps".into(),
                Value::Array(
                    spans
                        .iter()
                        .take(max_spans)
                        .map(|&(s, e)| {
                            let mut o = json!({"start_ps": s, "end_ps": e});
                            // T4: the XLA Modules run (program execution) the invocation
                            // belongs to, so invocations group by step.
                            if let Some((name, run)) = modules
                                .iter()
                                .find(|m| m.0 <= s && s < m.1)
                                .map(|m| (&m.2, &m.3))
                            {
                                o["module"] = json!(name);
                                o["run_id"] = json!(run);
                            }
                            o
                        })
                        .collect(),
                ),
            );
            k.insert(
                "spans_truncated".into(),
                json!(spans.len().saturating_sub(max_spans)),
            );
            let w = Windows::new(spans.clone());
            let markers = markers_in(&plane, &w);
            let mut by_addr: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
            for (_, m) in &markers {
                let e = by_addr
                    .entry(m.bundle_address)
                    .or_insert((m.instrumentation_id, 0));
                e.1 += 1;
            }
            k.insert(
                "bundle_markers".into(),
                json!(by_addr
                    .iter()
                    .map(|(a, (id, n))| json!({"address": crate::hex(*a), "instrumentation_id": id.to_string(), "count": n}))
                    .collect::<Vec<_>>()),
            );
            if let (Some(lo), Some(hi)) = (by_addr.keys().next(), by_addr.keys().next_back()) {
                k.insert(
                    "bundle_address_range".into(),
                    json!(format!("{}-{}", crate::hex(*lo), crate::hex(*hi))),
                );
                k.insert(
                    "bundle_address_note".into(),
                    json!("Tensor Core marker addresses are LLO bundle addresses: pass bundle_address_range (or one address) to get_llo_bundles --address_range with --program set to the kernel name; addresses past the end of that program's listing (the dump's final_bundles) have no bundle there"),
                );
            }
            k.insert(
                "detected_by".into(),
                json!("XLA Ops span overlapping Tensor Core / XLA TraceMe instrumentation events (emitted only inside custom-call regions)"),
            );
            kernels.push(Value::Object(k));
        }
        out.insert(plane.name().to_string(), Value::Array(kernels));
    }
    (out, any_instrumentation)
}

#[cfg(test)]
pub(crate) mod testdata {
    use xprof_xspace::XSpace;

    /// The seed-v6e capture, or `None` outside CI when the corpus is absent.
    pub fn v6e() -> Option<XSpace> {
        let f = crate::testutil::fixtures()?;
        Some(XSpace::open(f.join("logdir/plugins/profile/testrun/host0.xplane.pb")).unwrap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_name_grammar() {
        let m = parse_long_name("[134217728]  0x1ee: bundle.134217728").unwrap();
        assert_eq!(
            (m.instrumentation_id, m.bundle_address, m.name.as_str()),
            (134217728, 0x1ee, "bundle.134217728")
        );
        assert!(parse_long_name("bundle.1").is_none());
    }

    #[test]
    fn medians() {
        assert_eq!(median_i64(&[3, 1, 2]), 2.0);
        assert_eq!(median_i64(&[4, 1, 2, 3]), 2.5);
    }

    #[test]
    fn row01_check_kernel_profiling_fixture() {
        let Some(space) = testdata::v6e() else { return };
        let r = check_kernel_profiling(&space);
        assert_eq!(r["kernel_profiling_active"], true);
        let d = &r["devices"]["/device:TPU:0"];
        assert_eq!(
            d["lines"],
            json!({"_counters_": 1768, "Tensor Core": 438, "XLA TraceMe": 336})
        );
        assert_eq!(
            d["counter_units"],
            json!([
                "MXU",
                "Scalar ALU",
                "Vector ALU",
                "Vector EUP",
                "Vector Fills",
                "Vector Load",
                "Vector Spills",
                "Vector Store",
                "XLU"
            ])
        );
        assert_eq!(
            d["traceme_stages"],
            json!([
                "acc",
                "ep_copy_in",
                "ep_copy_out",
                "ep_finalize",
                "ep_initialize_0",
                "ep_initialize_1",
                "ep_run_kernel",
                "ep_wait_in",
                "ep_wait_out",
                "init"
            ])
        );
        assert_eq!(d["kernel_invocations"], 3);
        assert_eq!(r["runtime_counter_sampling"], "not detected");
    }

    #[test]
    fn row02_list_kernel_invocations_fixture() {
        let Some(space) = testdata::v6e() else { return };
        let (r, _) = list_kernel_invocations(&space, &Regex::new(".*").unwrap(), 20);
        let k = r["/device:TPU:0"].as_array().unwrap();
        assert_eq!(k.len(), 1);
        let k = &k[0];
        assert_eq!(k["kernel"], "matmul_optimized.1");
        assert_eq!(k["count"], 3);
        assert_eq!(k["mean_us"], json!(75.754));
        assert_eq!(k["p50_us"], json!(75.785));
        assert_eq!(k["min_us"], json!(75.566));
        assert_eq!(k["max_us"], json!(75.911));
        assert_eq!(k["total_us"], json!(227.262));
        let addrs: Vec<&str> = k["bundle_markers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["address"].as_str().unwrap())
            .collect();
        assert_eq!(
            addrs,
            vec![
                "0x1ee", "0x1f7", "0x220", "0x272", "0x274", "0x770", "0x772", "0xc9d", "0xc9f",
                "0xca1", "0xca3"
            ]
        );
        let counts: Vec<u64> = k["bundle_markers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["count"].as_u64().unwrap())
            .collect();
        assert_eq!(counts, vec![3, 3, 48, 48, 48, 48, 48, 48, 48, 48, 48]);
        assert_eq!(k["bundle_address_range"], "0x1ee-0xca3");
        let runs: Vec<&Value> = k["spans_ps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| &s["run_id"])
            .collect();
        assert_eq!(runs, vec!["8", "9", "10"]);
        assert_eq!(
            k["spans_ps"][0]["module"],
            "jit_matmul_optimized(17342868964687645945)"
        );
    }
}

/// Per HLO proto file: its custom calls, or why it could not be read.
pub type HloCustomCalls = (String, Result<BTreeMap<String, String>, String>);

/// Custom calls of an `HloProto` (`*.hlo_proto.pb`): instruction name → custom_call_target.
/// Used to confirm that an op detected by instrumentation overlap really is a kernel.
pub fn hlo_custom_calls(bytes: &[u8]) -> Result<BTreeMap<String, String>, String> {
    use prost::Message;
    let p =
        xprof_proto::xla::HloProto::decode(bytes).map_err(|e| format!("not an HloProto: {e}"))?;
    let mut out = BTreeMap::new();
    for c in p.hlo_module.iter().flat_map(|m| m.computations.iter()) {
        for i in &c.instructions {
            if i.opcode == "custom-call" {
                out.insert(i.name.clone(), i.custom_call_target.clone());
            }
        }
    }
    Ok(out)
}

/// Attach `hlo_confirmation` to each kernel of a `list_kernel_invocations` result from the
/// run's HLO protos (`(file name, custom calls)`); `null` with the reason when none says.
pub fn confirm_with_hlo(result: &mut Map<String, Value>, protos: &[HloCustomCalls]) {
    for v in result.values_mut() {
        let Some(kernels) = v.as_array_mut() else {
            continue;
        };
        for k in kernels {
            let name = k["kernel"].as_str().unwrap_or("").to_string();
            let mut found = Value::Null;
            for (file, calls) in protos {
                if let Ok(c) = calls
                    && let Some(t) = c.get(&name)
                {
                    found = json!({"opcode": "custom-call", "custom_call_target": t, "hlo_proto": file});
                    break;
                }
            }
            let reason = if !found.is_null() {
                Value::Null
            } else if protos.is_empty() {
                json!("no .hlo_proto.pb in the run directory")
            } else {
                let errs: Vec<String> = protos
                    .iter()
                    .filter_map(|(f, c)| c.as_ref().err().map(|e| format!("{f}: {e}")))
                    .collect();
                json!(if errs.is_empty() {
                    "no custom-call instruction of this name in the run's HLO protos".to_string()
                } else {
                    errs.join("; ")
                })
            };
            k["hlo_confirmation"] = found;
            if !reason.is_null() {
                k["hlo_confirmation_reason"] = reason;
            }
        }
    }
}

#[cfg(test)]
mod hostile_tests {
    use super::*;
    use xprof_testkit::XSpaceBuilder;

    /// Extreme offsets and durations must not overflow or panic anywhere.
    #[test]
    fn extreme_timestamps_never_panic() {
        let bytes = XSpaceBuilder::new()
            .plane("/device:TPU:0", |p| {
                p.line("XLA Ops", |l| {
                    l.event("k.1", i64::MIN / 2, i64::MAX)
                        .event("k.1", i64::MAX, i64::MAX)
                })
                .line("XLA TraceMe", |l| {
                    l.event("ep_run_kernel", i64::MIN / 2, i64::MAX).event(
                        "ep_wait_in",
                        0,
                        i64::MAX,
                    )
                })
                .line("Tensor Core", |l| {
                    l.event("bundle.1", 5, 0)
                        .stat("long_name", "[1]  0xffffffffffffffff: x")
                })
                .line("_counters_", |l| {
                    l.event("MXU", i64::MIN / 2, i64::MAX)
                        .stat("% util", 50.0)
                        .event("MXU", 0, i64::MAX)
                        .stat("% util", f64::NAN)
                        .event("Vector Fills", 0, 1)
                        .stat("fills", 3u64)
                })
            })
            .to_bytes();
        let space = XSpace::from_bytes(bytes).unwrap();
        let all = Regex::new(".*").unwrap();
        let _ = check_kernel_profiling(&space);
        let _ = list_kernel_invocations(&space, &all, 5);
        for w in [
            utilization::Window::Whole,
            utilization::Window::Kernel("k".into()),
            utilization::Window::Range(Some(i64::MIN), Some(i64::MAX)),
        ] {
            let _ = utilization::llo_utilization(&space, &w, 50);
        }
        let _ = stages::stage_breakdown(&space, Some(&all));
        let _ = wall::device_busy_p50_ms(&space, &all);
        let plane = device_planes(&space).remove(0);
        let _ = utilization::decomposition(&plane, &all, &|_| Ok(None));
    }
}
