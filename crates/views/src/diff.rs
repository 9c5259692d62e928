//! Two captures compared: did a change make the program faster, and which ops account for it.
//!
//! XProf's own agent CLI has a `diff_sessions` that keys kernels by their raw trace name, sums
//! device kernels only (all zeros on a CPU capture) and gives no verdict. This one reads the op
//! database every op view reads ([`xprof_opstats::views::op_db`]: the device's, or the XLA ops
//! a CPU backend ran on host threads), so it answers on TPU, GPU and CPU captures alike, and
//! compares:
//!
//! * the average step time (XProf's grouping; the overview's "complete" steps when both sides
//!   have them), which decides the verdict when both sides have steps;
//! * the ops' self time, per step when both sides have steps (two captures rarely hold the
//!   same number of steps, so raw totals would mostly measure the profiling window), else per
//!   capture, which decides the verdict when steps are missing;
//! * the same self time by HLO category, by framework op (the `op_name` metadata, which keeps
//!   its name when XLA renumbers `fusion.12` into `fusion.13` after a change) and by HLO op
//!   (module and instruction name: exact, so a renumbered op shows as removed and new).
//!
//! Every row keeps both sides' exact picosecond totals and occurrences beside the normalised
//! microseconds, and what is not comparable (other hardware, no program in common, unequal
//! capture windows without steps) is said in `warnings`, never silently compared.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use xprof_opstats::OpStats;
use xprof_opstats::metrics::{OpMetrics, OpMetricsDb};
use xprof_opstats::steps::Step;

use crate::recompile::Covered;

/// What [`diff`] reports and how it decides.
#[derive(Clone, Copy, Debug)]
pub struct DiffOptions {
    /// Rows per op table (`by_framework_op`, `by_hlo_op`); 0 = all.
    pub limit: usize,
    /// A change smaller than this (percent of the baseline) is `unchanged`.
    pub tolerance_pct: f64,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            limit: 20,
            tolerance_pct: 2.0,
        }
    }
}

/// One capture to compare: its op statistics and, when the caller looked for them, the XLA
/// compilations on its host clock ([`crate::recompile`]), which the step-time change is
/// attributed to when steps compile.
#[derive(Clone, Copy)]
pub struct Compared<'a> {
    pub stats: &'a OpStats,
    pub compiles: Option<&'a Covered>,
}

impl<'a> Compared<'a> {
    pub fn new(stats: &'a OpStats) -> Self {
        Compared {
            stats,
            compiles: None,
        }
    }

    pub fn with_compiles(self, compiles: &'a Covered) -> Self {
        Compared {
            compiles: Some(compiles),
            ..self
        }
    }
}

/// One side of the comparison.
struct Side<'a> {
    st: &'a OpStats,
    db: Option<(&'a OpMetricsDb, bool)>,
    compiles: Option<&'a Covered>,
}

impl<'a> Side<'a> {
    fn new(c: Compared<'a>) -> Self {
        Side {
            st: c.stats,
            db: xprof_opstats::views::op_db(c.stats),
            compiles: c.compiles,
        }
    }

    /// Average XLA compile time inside `steps` (ps), when compilations were looked for.
    fn compile_ps(&self, steps: &[Step]) -> Option<f64> {
        let c = self.compiles?;
        if steps.is_empty() {
            return None;
        }
        let total: f64 = steps
            .iter()
            .map(|s| c.inside(s.begin_ps(), s.duration_ps()) as f64)
            .sum();
        Some(total / steps.len() as f64)
    }

    fn ops(&self) -> impl Iterator<Item = &'a OpMetrics> {
        self.db
            .into_iter()
            .flat_map(|(db, _)| db.metrics.iter())
            .filter(|m| !m.is_idle())
    }

    fn op_time_ps(&self) -> u64 {
        self.ops()
            .map(|m| m.self_time_ps)
            .fold(0, u64::saturating_add)
    }

    fn module(&self, m: &OpMetrics) -> String {
        match self.st.program_names.get(&m.program_id) {
            Some(n) => n.clone(),
            None if m.program_id == 0 => String::new(),
            None => m.program_id.to_string(),
        }
    }

    fn modules(&self) -> BTreeSet<String> {
        self.ops()
            .map(|m| self.module(m))
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// The steps the step time averages: the overview's complete steps when `complete`.
    fn steps(&self, complete: bool) -> &'a [Step] {
        if complete {
            &self.st.steps.complete_steps
        } else {
            &self.st.steps.steps
        }
    }

    fn summary(&self) -> Value {
        let steps = &self.st.steps;
        let avg = |v: &[Step]| average_ps(v).map(|ps| ps / 1e9);
        json!({
            "device_type": self.st.run_env.hardware_type.as_str(),
            "op_source": match self.db {
                Some((_, true)) => "host_executed",
                Some((_, false)) => "device",
                None => "none",
            },
            "op_time_ps": self.op_time_ps(),
            "capture_window_ps": self.db.map(|(db, _)| db.total_time_ps),
            "steps_source": steps.source.as_str(),
            "steps": steps.steps.len(),
            "complete_steps": steps.complete_steps.len(),
            "step_time_ms_average": avg(&steps.steps),
            "complete_step_time_ms_average": avg(&steps.complete_steps),
            "programs": self.modules(),
        })
    }
}

fn average_ps(steps: &[Step]) -> Option<f64> {
    if steps.is_empty() {
        return None;
    }
    let total: f64 = steps.iter().map(|s| s.duration_ps() as f64).sum();
    Some(total / steps.len() as f64)
}

/// Occurrences and self time of the ops that share a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Agg {
    occurrences: u64,
    self_time_ps: u64,
}

fn group<K: Ord>(side: &Side, key: impl Fn(&OpMetrics) -> K) -> BTreeMap<K, Agg> {
    let mut out: BTreeMap<K, Agg> = BTreeMap::new();
    for m in side.ops() {
        let a = out.entry(key(m)).or_default();
        a.occurrences = a.occurrences.saturating_add(m.occurrences);
        a.self_time_ps = a.self_time_ps.saturating_add(m.self_time_ps);
    }
    out
}

/// What times are divided by before they are compared.
#[derive(Clone, Copy, Debug)]
struct Basis {
    baseline: u64,
    optimized: u64,
    per_step: bool,
}

impl Basis {
    fn us(self, ps: u64, baseline: bool) -> f64 {
        let d = if baseline {
            self.baseline
        } else {
            self.optimized
        };
        ps as f64 / d.max(1) as f64 / 1e6
    }
}

/// `(new - old) / old` in percent; `None` when there is no baseline to divide by.
fn pct(old: f64, new: f64) -> Option<f64> {
    (old > 0.0).then(|| (new - old) / old * 100.0)
}

/// One comparison row: `key` (the row's identifying fields) and both sides' numbers.
fn row(key: Map<String, Value>, b: Option<Agg>, o: Option<Agg>, basis: Basis) -> (f64, Value) {
    let bu = b.map_or(0.0, |a| basis.us(a.self_time_ps, true));
    let ou = o.map_or(0.0, |a| basis.us(a.self_time_ps, false));
    let delta = ou - bu;
    let status = match (b, o) {
        (None, _) => "new",
        (_, None) => "removed",
        _ if delta > 0.0 => "slower",
        _ if delta < 0.0 => "faster",
        _ => "same",
    };
    let mut m = key;
    m.insert("status".into(), json!(status));
    m.insert("baseline_us".into(), json!(bu));
    m.insert("optimized_us".into(), json!(ou));
    m.insert("delta_us".into(), json!(delta));
    m.insert("delta_pct".into(), json!(pct(bu, ou)));
    m.insert(
        "baseline_self_time_ps".into(),
        json!(b.map(|a| a.self_time_ps)),
    );
    m.insert(
        "optimized_self_time_ps".into(),
        json!(o.map(|a| a.self_time_ps)),
    );
    m.insert(
        "baseline_occurrences".into(),
        json!(b.map(|a| a.occurrences)),
    );
    m.insert(
        "optimized_occurrences".into(),
        json!(o.map(|a| a.occurrences)),
    );
    // Per occurrence: comparable whatever the two captures' windows and step counts.
    let avg = |a: Option<Agg>| {
        a.filter(|a| a.occurrences > 0)
            .map(|a| a.self_time_ps as f64 / a.occurrences as f64 / 1e6)
    };
    let (ba, oa) = (avg(b), avg(o));
    m.insert("baseline_avg_us".into(), json!(ba));
    m.insert("optimized_avg_us".into(), json!(oa));
    m.insert(
        "avg_delta_pct".into(),
        json!(ba.zip(oa).and_then(|(x, y)| pct(x, y))),
    );
    (delta, Value::Object(m))
}

/// Rows of two groupings joined on their key, largest change first.
fn table<K: Ord + Clone>(
    b: &BTreeMap<K, Agg>,
    o: &BTreeMap<K, Agg>,
    basis: Basis,
    total_delta_us: f64,
    key: impl Fn(&K) -> Map<String, Value>,
) -> Vec<(f64, Value)> {
    let keys: BTreeSet<&K> = b.keys().chain(o.keys()).collect();
    let mut rows: Vec<(f64, Value)> = keys
        .into_iter()
        .map(|k| {
            let (d, mut v) = row(key(k), b.get(k).copied(), o.get(k).copied(), basis);
            // Which part of the whole change this row is; meaningless when the whole did not
            // change (rows then cancel out).
            let share = (total_delta_us.abs() > 0.0).then(|| d / total_delta_us * 100.0);
            v["share_of_op_time_delta_pct"] = json!(share);
            (d, v)
        })
        .collect();
    // Largest change first; among equal changes (a capture against itself), the larger op.
    let size = |v: &Value| {
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        f("baseline_us").max(f("optimized_us"))
    };
    rows.sort_by(|x, y| {
        y.0.abs()
            .total_cmp(&x.0.abs())
            .then_with(|| size(&y.1).total_cmp(&size(&x.1)))
    });
    rows
}

fn limited(rows: Vec<(f64, Value)>, limit: usize) -> Value {
    let total = rows.len();
    let records: Vec<Value> = rows
        .into_iter()
        .take(if limit == 0 { usize::MAX } else { limit })
        .map(|r| r.1)
        .collect();
    json!({
        "total_records": total,
        "returned_records": records.len(),
        "truncated": records.len() < total,
        "records": records,
    })
}

fn verdict(delta_pct: f64, tolerance_pct: f64) -> &'static str {
    if delta_pct <= -tolerance_pct {
        "faster"
    } else if delta_pct >= tolerance_pct {
        "slower"
    } else {
        "unchanged"
    }
}

/// Compare `optimized` against `baseline` (see the module docs). The result has `baseline` and
/// `optimized` summaries, `step_time` (or `step_time_reason`), `op_time`, `verdict`,
/// `by_category`, `by_framework_op`, `by_hlo_op` and `warnings`.
pub fn diff(baseline: Compared, optimized: Compared, opts: DiffOptions) -> Map<String, Value> {
    let (b, o) = (Side::new(baseline), Side::new(optimized));
    let mut warnings: Vec<String> = Vec::new();
    let mut out = Map::new();
    out.insert("baseline".into(), b.summary());
    out.insert("optimized".into(), o.summary());

    // Step time: the overview's complete steps when both have them, else all steps.
    let complete = !b.steps(true).is_empty() && !o.steps(true).is_empty();
    let (bs, os) = (b.steps(complete), o.steps(complete));
    let step_avgs = average_ps(bs).zip(average_ps(os));
    match step_avgs {
        Some((bp, op)) => {
            out.insert(
                "step_time".into(),
                json!({
                    "basis": if complete {
                        "complete steps (the average XProf's overview reports)"
                    } else {
                        "all steps"
                    },
                    "baseline_ms": bp / 1e9,
                    "optimized_ms": op / 1e9,
                    "delta_ms": (op - bp) / 1e9,
                    "delta_pct": pct(bp, op),
                    "speedup": (op > 0.0).then(|| bp / op),
                    // Ours: the XLA compilation inside those steps, which XProf's step
                    // breakdown counts as host compute.
                    "baseline_compile_ms_measured": b.compile_ps(bs).map(|p| p / 1e9),
                    "optimized_compile_ms_measured": o.compile_ps(os).map(|p| p / 1e9),
                }),
            );
        }
        None => {
            let missing: Vec<String> = [("baseline", &b), ("optimized", &o)]
                .iter()
                .filter(|(_, s)| s.st.steps.steps.is_empty())
                .map(|(name, s)| {
                    let why =
                        s.st.steps
                            .no_steps
                            .unwrap_or(xprof_opstats::steps::NoSteps::NoMarkers);
                    format!("{name}: {} ({})", why.reason(), why.advice())
                })
                .collect();
            out.insert("step_time".into(), Value::Null);
            out.insert(
                "step_time_reason".into(),
                json!(format!("no steps to compare: {}", missing.join("; "))),
            );
        }
    }

    // Op times: per step when both sides have steps (any kind), else per capture.
    let per_step = !b.st.steps.steps.is_empty() && !o.st.steps.steps.is_empty();
    let basis = if per_step {
        Basis {
            baseline: b.st.steps.steps.len() as u64,
            optimized: o.st.steps.steps.len() as u64,
            per_step: true,
        }
    } else {
        Basis {
            baseline: 1,
            optimized: 1,
            per_step: false,
        }
    };
    let (bt, ot) = (
        basis.us(b.op_time_ps(), true),
        basis.us(o.op_time_ps(), false),
    );
    out.insert(
        "normalization".into(),
        json!({
            "basis": if basis.per_step { "per_step" } else { "per_capture" },
            "baseline_divisor": basis.baseline,
            "optimized_divisor": basis.optimized,
            "why": if basis.per_step {
                "op self times are divided by each capture's step count: two captures rarely \
                 hold the same number of steps"
            } else {
                "a side has no steps, so op self times are whole-capture totals: they compare \
                 only when both captures ran the same amount of work"
            },
        }),
    );
    out.insert(
        "op_time".into(),
        json!({
            "unit": if basis.per_step { "us per step" } else { "us per capture" },
            "baseline_us": bt,
            "optimized_us": ot,
            "delta_us": ot - bt,
            "delta_pct": pct(bt, ot),
        }),
    );

    // The verdict: step time decides when both sides have steps; else op time.
    let decided = match step_avgs {
        Some((bp, op)) => pct(bp, op).map(|p| ("average step time", p)),
        None => pct(bt, ot).map(|p| ("op self time per capture", p)),
    };
    out.insert(
        "verdict".into(),
        match decided {
            Some((by, p)) => json!({
                "result": verdict(p, opts.tolerance_pct),
                "decided_by": by,
                "delta_pct": p,
                "tolerance_pct": opts.tolerance_pct,
            }),
            None => json!({
                "result": "not_comparable",
                "decided_by": Value::Null,
                "reason": "the baseline has neither steps nor op time to compare against",
                "tolerance_pct": opts.tolerance_pct,
            }),
        },
    );

    // Where a step-time change comes from: the ops' self time, XLA compilation inside the
    // steps, and the rest. Approximate: op time averages over all steps while step time may
    // average over complete ones, and device ops overlap host work.
    if let (Some((bp, op)), true) = (step_avgs, basis.per_step) {
        let step_delta = (op - bp) / 1e9;
        let op_delta = (ot - bt) / 1e3;
        let compile_delta = b
            .compile_ps(bs)
            .zip(o.compile_ps(os))
            .map(|(x, y)| (y - x) / 1e9);
        let other = step_delta - op_delta - compile_delta.unwrap_or(0.0);
        let parts = [
            ("op self time", Some(op_delta)),
            ("XLA compilation inside the steps", compile_delta),
            (
                "the rest of the step (host work, input, waiting)",
                Some(other),
            ),
        ];
        // The part that moved the most in the direction the step time moved.
        let main = parts
            .iter()
            .filter_map(|(n, d)| d.map(|d| (*n, d)))
            .filter(|(_, d)| step_delta != 0.0 && d.signum() == step_delta.signum())
            .max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()))
            .map(|(n, _)| n);
        let mut a = Map::new();
        a.insert("op_time_delta_ms".into(), json!(op_delta));
        a.insert("compile_delta_ms".into(), json!(compile_delta));
        if compile_delta.is_none() {
            a.insert(
                "compile_delta_ms_reason".into(),
                json!("compilations were not looked for"),
            );
        }
        a.insert("rest_delta_ms".into(), json!(other));
        a.insert("main_cause".into(), json!(main));
        a.insert(
            "approximate".into(),
            json!(
                "op time is averaged over all steps, step time over the steps named in `basis`; \
                 device ops overlap host work"
            ),
        );
        if let Some(Value::Object(st)) = out.get_mut("step_time") {
            st.insert("attribution".into(), Value::Object(a));
        }
    }

    // What is not comparable, said rather than silently compared.
    let (bh, oh) = (
        b.st.run_env.hardware_type.as_str(),
        o.st.run_env.hardware_type.as_str(),
    );
    if bh != oh {
        warnings.push(format!(
            "the captures ran on different hardware ({bh} and {oh}): op rows compare different \
             backends' ops"
        ));
    }
    for (name, s) in [("baseline", &b), ("optimized", &o)] {
        if s.db.is_none() {
            warnings.push(format!(
                "the {name} has no XLA ops: {}",
                xprof_opstats::views::no_op_reason(s.st)
            ));
        }
    }
    let (bm, om) = (b.modules(), o.modules());
    if !bm.is_empty() && !om.is_empty() && bm.is_disjoint(&om) {
        warnings.push(
            "the captures share no program (module) name: HLO op rows cannot match; compare \
             by_category and by_framework_op"
                .into(),
        );
    }
    if !basis.per_step {
        let window = |s: &Side| s.db.map_or(0, |(db, _)| db.total_time_ps);
        let (bw, ow) = (window(&b), window(&o));
        if bw > 0 && ow > 0 && (bw.max(ow) as f64 / bw.min(ow) as f64) > 1.1 {
            warnings.push(format!(
                "without steps the op times are per capture, and the captures' op windows \
                 differ ({:.3} ms and {:.3} ms): the deltas include the difference in work \
                 profiled; annotate steps (jax.profiler.StepTraceAnnotation, xp.StepTrace, \
                 tf.profiler.experimental.Trace(step_num=...)) to compare per step",
                bw as f64 / 1e9,
                ow as f64 / 1e9
            ));
        }
    }

    let total_delta = ot - bt;
    let by_cat = table(
        &group(&b, |m| m.category.clone()),
        &group(&o, |m| m.category.clone()),
        basis,
        total_delta,
        |k| {
            let mut m = Map::new();
            m.insert("category".into(), json!(k));
            m
        },
    );
    out.insert(
        "by_category".into(),
        Value::Array(by_cat.into_iter().map(|r| r.1).collect()),
    );
    let by_fw = table(
        &group(&b, |m| m.provenance.clone()),
        &group(&o, |m| m.provenance.clone()),
        basis,
        total_delta,
        |k| {
            let mut m = Map::new();
            m.insert("framework_op".into(), json!(k));
            m
        },
    );
    out.insert("by_framework_op".into(), limited(by_fw, opts.limit));
    let by_op = table(
        &group(&b, |m| (b.module(m), m.name.clone(), m.category.clone())),
        &group(&o, |m| (o.module(m), m.name.clone(), m.category.clone())),
        basis,
        total_delta,
        |(module, name, category)| {
            let mut m = Map::new();
            m.insert("module".into(), json!(module));
            m.insert("hlo_op".into(), json!(name));
            m.insert("category".into(), json!(category));
            m
        },
    );
    out.insert("by_hlo_op".into(), limited(by_op, opts.limit));
    out.insert("warnings".into(), json!(warnings));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_is_symmetric_around_the_tolerance() {
        assert_eq!(verdict(-2.0, 2.0), "faster");
        assert_eq!(verdict(-1.99, 2.0), "unchanged");
        assert_eq!(verdict(1.99, 2.0), "unchanged");
        assert_eq!(verdict(2.0, 2.0), "slower");
    }

    #[test]
    fn a_percentage_needs_a_baseline() {
        assert_eq!(pct(0.0, 5.0), None);
        assert_eq!(pct(4.0, 5.0), Some(25.0));
    }
}
