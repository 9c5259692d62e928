//! pod_viewer (XProf `op_stats_to_pod_stats.cc`, `op_stats_to_pod_viewer.cc`): per step, per
//! core, the step time split into the nine generic components and the largest of them.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use xprof_opstats::OpStats;
use xprof_opstats::opstats::HardwareType;
use xprof_opstats::steps::{CoreStep, GENERIC_NAMES};

use crate::load::{CoreDetails, DEFAULT_CORE_ID};
use crate::table::ps_to_us;

/// XProf `kErrorNoStepMarker` (`xprof/utils/diagnostics.cc`).
pub const NO_STEP_MARKER: &str = "No step marker observed and hence the step time is unknown. This may happen if (1) training steps are not instrumented (e.g., if you are not using Keras) or (2) the profiling duration is shorter than the step time. For (1), you need to add step instrumentation; for (2), you may try to profile longer.";

pub const REASON_NO_CORE_DETAILS: &str = "the device plane has no core_details stat, so XProf drops this core's record; we keep it with the XSpace hostname";

/// XProf `kErrorEmptyIntersect`.
pub const EMPTY_INTERSECT: &str = "Although there are steps observed on some host(s), the intersection of the steps over all hosts is empty (because the differences among individual host's step sequences are too big). Consequently, the overall step time is unknown.";

/// XProf `PopulateStepDiagnostics`' warning, if any. `empty_intersect`: several hosts had steps
/// but none is common to all.
pub fn step_warning(s: &OpStats, empty_intersect: bool) -> Option<&'static str> {
    s.steps.steps.is_empty().then_some(if empty_intersect {
        EMPTY_INTERSECT
    } else {
        NO_STEP_MARKER
    })
}

/// XProf `PopulateStepDiagnostics`.
pub fn step_diagnostics(s: &OpStats, empty_intersect: bool) -> Value {
    let warnings: Vec<&str> = step_warning(s, empty_intersect).into_iter().collect();
    json!({"info": [], "warnings": warnings, "errors": []})
}

/// How XProf 2.24.2's pod viewer spreads a TPU core-step's HLO-category times over the
/// generic components, by exact category name: collectives are `all-reduce`,
/// `all-reduce fusion` and `all-to-all` (XProf's `AllReduceOrAllToAllTimePs`; `all-gather`,
/// `reduce-scatter` and `collective-permute` count as compute); device to device are send and
/// receive, `megacore fusion` and `async-done`; input is infeed and host receives, output
/// outfeed and host sends; idle is "All others", and everything else device compute. Found by
/// running XProf on a capture whose every category lasts a distinct power of two (the
/// open-source converter sources do not hold this mapping).
pub fn tpu_generic_from_categories(cs: &CoreStep) -> [u64; 9] {
    let mut g = [0u64; 9];
    for (cat, ps) in &cs.category_ps {
        let i = match cat.as_str() {
            "IDLE" => 8,
            "all-reduce" | "all-reduce fusion" | "all-to-all" => 2,
            "send" | "send-done" | "recv" | "recv-done" | "megacore fusion" | "async-done" => 1,
            "infeed" | "host recv" | "host recv-done" => 5,
            "outfeed" | "host send" | "host send-done" => 6,
            _ => 0,
        };
        g[i] = g[i].saturating_add(*ps);
    }
    g
}

/// `{id: us}` over the nine components and the bottleneck (largest by (ps, name), as XProf
/// sorts pairs).
fn breakdown(g: &[u64; 9]) -> (Map<String, Value>, &'static str) {
    let mut m = Map::new();
    let mut best: (u64, &'static str) = (0, GENERIC_NAMES[0]);
    for (i, ps) in g.iter().enumerate() {
        m.insert((i + 1).to_string(), json!(ps_to_us(*ps)));
        if (*ps, GENERIC_NAMES[i]) > best {
            best = (*ps, GENERIC_NAMES[i]);
        }
    }
    (m, best.1)
}

/// The pod viewer database as XProf's protobuf JSON (camelCase), plus our measured fields.
pub fn pod_viewer(s: &OpStats, cores: &BTreeMap<i64, CoreDetails>) -> Value {
    pod_viewer_with(s, cores, false)
}

/// [`pod_viewer`] for combined hosts whose steps did not intersect (`empty_intersect`).
pub fn pod_viewer_with(
    s: &OpStats,
    cores: &BTreeMap<i64, CoreDetails>,
    empty_intersect: bool,
) -> Value {
    let tpu = s.run_env.hardware_type == HardwareType::Tpu;
    let mut seq = Vec::new();
    for step in &s.steps.steps {
        let mut per_core = Map::new();
        for (core, cs) in &step.per_core {
            // Cores of combined hosts are XProf's `GlobalCoreId`s, `host × 1000 + core`.
            let host_idx = core / 1000;
            let fallback_host = s
                .run_env
                .hostnames
                .get(host_idx as usize)
                .cloned()
                .unwrap_or_default();
            let (key, host_name, details) = if tpu {
                let d = cores.get(core);
                (
                    *core,
                    d.map(|d| d.hostname.clone()).unwrap_or(fallback_host),
                    d,
                )
            } else {
                let key = host_idx * 1000 + DEFAULT_CORE_ID;
                let name = cores.get(&key).map(|d| d.hostname.clone());
                (key, name.unwrap_or(fallback_host), None)
            };
            let mut r = Map::new();
            r.insert("hostName".into(), json!(host_name));
            r.insert("chipId".into(), json!(0));
            r.insert("nodeId".into(), json!(0));
            r.insert("stepNum".into(), json!(step.step_num));
            r.insert("totalDurationUs".into(), json!(ps_to_us(cs.duration_ps)));
            r.insert("totalDurationPs".into(), json!(cs.duration_ps));
            let generic = if tpu {
                if details.is_none() {
                    r.insert("coreDetails_reason".into(), json!(REASON_NO_CORE_DETAILS));
                }
                tpu_generic_from_categories(cs)
            } else {
                cs.generic_ps
            };
            let (m, bottleneck) = breakdown(&generic);
            r.insert("bottleneck".into(), json!(bottleneck));
            r.insert("stepBreakdownUs".into(), Value::Object(m));
            r.insert(
                "stepBreakdownPs".into(),
                Value::Object(
                    generic
                        .iter()
                        .enumerate()
                        .map(|(i, ps)| ((i + 1).to_string(), json!(ps)))
                        .collect(),
                ),
            );
            per_core.insert(key.to_string(), Value::Object(r));
        }
        seq.push(json!({
            "stepNum": step.step_num,
            "podStatsPerCore": per_core,
            "channelDb": [],
            "coreIdToReplicaIdMap": {},
            "allReduceOpDb": [],
        }));
    }
    json!({
        "podStatsSequence": {"podStatsMap": seq},
        "diagnostics": step_diagnostics(s, empty_intersect),
        "stepBreakdownEvents": GENERIC_NAMES.iter().enumerate()
            .map(|(i, n)| json!({"id": i + 1, "name": n})).collect::<Vec<_>>(),
        "deviceType": s.run_env.device_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XProf 2.24.2's pod viewer on one TPU step whose categories each lasted a distinct power
    /// of two (10 ns × 2^i), decoded component by component.
    #[test]
    fn tpu_categories_map_onto_components_as_in_xprof() {
        let observed: [(&str, usize); 24] = [
            ("send", 1),
            ("recv", 1),
            ("send-done", 1),
            ("recv-done", 1),
            ("async-done", 1),
            ("megacore fusion", 1),
            ("all-reduce", 2),
            ("all-reduce fusion", 2),
            ("all-to-all", 2),
            ("infeed", 5),
            ("host recv", 5),
            ("host recv-done", 5),
            ("outfeed", 6),
            ("host send", 6),
            ("host send-done", 6),
            ("IDLE", 8),
            ("all-gather", 0),
            ("reduce-scatter", 0),
            ("collective-permute", 0),
            ("all-reduce-scatter fusion", 0),
            ("infeed fusion", 0),
            ("sparse core v0 infeed", 0),
            ("copy-start", 0),
            ("custom-call", 0),
        ];
        let mut cs = CoreStep::default();
        let mut want = [0u64; 9];
        for (i, (cat, component)) in observed.iter().enumerate() {
            let ps = 10_000u64 << i;
            cs.category_ps.insert(cat.to_string(), ps);
            want[*component] += ps;
        }
        assert_eq!(tpu_generic_from_categories(&cs), want);
    }
}
