//! Host planes: the framework-op database XProf builds from host threads
//! (`ConvertHostThreadsXPlaneToOpMetricsDb`), and — beyond XProf — the database of XLA ops a
//! CPU backend executes on host threads (events carrying `hlo_op`), joined with the HLO.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::device::hlo_category;
use crate::metrics::{CoreType, DbCombiner, NamedDbBuilder, OpMetrics, OpMetricsDb};
use crate::model::{HloModuleInfo, Line, Plane, StatKey, StatRef};
use crate::nesting::{Span, nest};
use crate::tfop::{TfOpCategory, parse_tf_op};

pub const HOST_THREADS: &str = "/host:CPU";

/// Line ids XProf derives from device data (not real threads).
fn is_derived_line(id: i64) -> bool {
    (10_000..20_000).contains(&id)
}

/// Per event metadata: the framework op its name parses to, if any (parsed once per plane).
fn named_framework_ops(plane: &Plane) -> Vec<Option<(String, String)>> {
    plane
        .metadata
        .iter()
        .map(|md| {
            let t = parse_tf_op(&md.name);
            (!md.name.is_empty() && t.category != TfOpCategory::Unknown)
                .then(|| (t.name.to_string(), t.kind.to_string()))
        })
        .collect()
}

/// One line's framework ops: `(name, type, eager)` activities nested by time.
fn framework_line_db(line: &Line, named: &[Option<(String, String)>]) -> Option<OpMetricsDb> {
    struct Act {
        ts: i64,
        id: u32,
        begin: bool,
        name: String,
        kind: String,
        eager: bool,
    }
    let mut acts: Vec<Act> = Vec::new();
    let mut next_id = 0u32;
    for e in &line.events {
        let mut push = |name: &str, kind: &str, eager: bool| {
            next_id = next_id.saturating_add(1);
            acts.push(Act {
                ts: e.start_ps,
                id: next_id,
                begin: true,
                name: name.to_string(),
                kind: kind.to_string(),
                eager,
            });
            acts.push(Act {
                ts: e.end_ps(),
                id: next_id,
                begin: false,
                name: name.to_string(),
                kind: kind.to_string(),
                eager,
            });
        };
        if let Some(Some((name, kind))) = named.get(e.metadata as usize) {
            let eager = e.stats.i64(StatKey::IsEager).unwrap_or(0) != 0;
            push(name, kind, eager);
        }
        if let Some(full) = e.stats.str(StatKey::TfOp).filter(|s| !s.is_empty()) {
            let t = parse_tf_op(full);
            push(t.name, t.kind, false);
        }
    }
    if acts.is_empty() {
        return None;
    }
    acts.sort_by_key(|a| a.ts);
    let mut b = NamedDbBuilder::new();
    // (id, start, children duration)
    let mut stack: Vec<(u32, i64, u64)> = Vec::new();
    for a in &acts {
        if a.begin {
            stack.push((a.id, a.ts, 0));
            continue;
        }
        // Overlapping TraceMes can end out of order: drop the ones opened after this one.
        let Some(pos) = stack.iter().rposition(|(id, _, _)| *id == a.id) else {
            continue;
        };
        let (_, start, children) = stack[pos];
        stack.truncate(pos);
        let dur = crate::nesting::span_len(start, a.ts);
        let kind = if a.kind.is_empty() {
            "Unknown"
        } else {
            a.kind.as_str()
        };
        b.enter(0, &a.name, dur, dur.saturating_sub(children), || {
            OpMetrics {
                category: kind.to_string(),
                is_eager: a.eager,
                ..Default::default()
            }
        });
        b.fill_category(0, &a.name, kind);
        if let Some(top) = stack.last_mut() {
            top.2 = top.2.saturating_add(dur);
        }
    }
    let total = crate::nesting::span_len(
        acts.first().map_or(0, |a| a.ts),
        acts.last().map_or(0, |a| a.ts),
    );
    Some(b.finish(total, true))
}

/// XProf's host framework-op database: per line, then combined.
pub fn framework_op_db(plane: &Plane) -> OpMetricsDb {
    let named = named_framework_ops(plane);
    let mut c = DbCombiner::new();
    for line in plane.lines.iter().filter(|l| !is_derived_line(l.id)) {
        if let Some(db) = framework_line_db(line, &named) {
            c.combine(&db, false);
        }
    }
    c.finish()
}

/// The program an `hlo_op` event belongs to: `program_id`, else the module named by `hlo_module`.
fn event_program(
    stats: &crate::model::Stats,
    modules: &HashMap<u64, HloModuleInfo>,
    by_name: &HashMap<&str, u64>,
) -> u64 {
    if let Some(p) = stats.u64(StatKey::ProgramId) {
        return p;
    }
    stats
        .str(StatKey::HloModule)
        .and_then(|m| by_name.get(m).copied())
        .or_else(|| {
            let m = stats.str(StatKey::HloModule)?;
            modules.values().find(|x| x.name == m).map(|x| x.program_id)
        })
        .unwrap_or(0)
}

/// XLA ops executed on host threads (CPU backend): one database per thread line, each with its
/// own window (first op begin → last op end) and IDLE, combined. `None` when no event carries
/// `hlo_op`.
pub fn host_xla_op_db(plane: &Plane, modules: &HashMap<u64, HloModuleInfo>) -> Option<OpMetricsDb> {
    let by_name: HashMap<&str, u64> = modules
        .values()
        .map(|m| (m.name.as_str(), m.program_id))
        .collect();
    // Threads are independent: each line's database is built on its own (a CPU capture's ops
    // run on a few executor threads of hundreds of thousands of events each) and the databases
    // are combined in line order, as one loop over the lines would.
    let per_line: Vec<OpMetricsDb> = plane
        .lines
        .par_iter()
        .filter(|l| !is_derived_line(l.id))
        .filter_map(|line| line_xla_op_db(line, modules, &by_name))
        .collect();
    if per_line.is_empty() {
        return None;
    }
    let mut c = DbCombiner::new();
    for db in &per_line {
        c.combine(db, true);
    }
    Some(c.finish())
}

/// One host thread's XLA ops (see [`host_xla_op_db`]); `None` when it ran none.
fn line_xla_op_db(
    line: &Line,
    modules: &HashMap<u64, HloModuleInfo>,
    by_name: &HashMap<&str, u64>,
) -> Option<OpMetricsDb> {
    let mut spans: Vec<Span> = Vec::new();
    for (i, e) in line.events.iter().enumerate() {
        if e.stats.has(StatKey::HloOp) {
            spans.push(Span {
                begin: e.start_ps,
                dur: e.duration_ps,
                index: i,
            });
        }
    }
    if spans.is_empty() {
        return None;
    }
    let first = spans.iter().map(|s| s.begin).min().unwrap_or(0);
    let last = spans
        .iter()
        .map(|s| s.begin.saturating_add(s.dur))
        .max()
        .unwrap_or(0);
    let mut b = NamedDbBuilder::new();
    // The program of the last `hlo_module` name seen: consecutive ops share their module.
    let mut last_module: Option<(&str, u64)> = None;
    nest(&mut spans, |i, dur, children, _| {
        let e = &line.events[i];
        // The three stats in one pass over the event's (first occurrence of each key, as
        // `Stats::get`).
        let (mut op, mut program, mut module) = (None, None, None);
        for (k, v) in e.stats.iter() {
            match k {
                StatKey::HloOp if op.is_none() => op = Some(v),
                StatKey::ProgramId if program.is_none() => program = Some(v),
                StatKey::HloModule if module.is_none() => module = Some(v),
                _ => {}
            }
        }
        let op_name = op.and_then(StatRef::as_str).unwrap_or_default();
        let module = module.and_then(StatRef::as_str);
        let pid = match (program.and_then(StatRef::as_u64), module) {
            (Some(p), _) => p,
            (None, Some(m)) => match last_module {
                Some((name, pid)) if name == m => pid,
                _ => {
                    let pid = event_program(&e.stats, modules, by_name);
                    last_module = Some((m, pid));
                    pid
                }
            },
            (None, None) => event_program(&e.stats, modules, by_name),
        };
        b.enter(pid, op_name, dur, dur.saturating_sub(children), || {
            // Looked up once per op (the first occurrence), not per event.
            let instr = modules.get(&pid).and_then(|m| m.instructions.get(op_name));
            let mut op = OpMetrics {
                core_type: CoreType::Host,
                category: "unknown".into(),
                ..Default::default()
            };
            if let Some(ins) = instr {
                op.category = hlo_category(ins);
                op.provenance = ins.op_name.clone();
                op.long_name = ins.expression.clone();
                op.source_file = ins.source_file.clone();
                op.source_line = ins.source_line;
            }
            op
        });
    });
    Some(b.finish(crate::nesting::span_len(first, last), true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, EventMetadata, HloInstr, StatValue, Stats};

    fn ev(md: u32, start: i64, dur: i64, stats: Vec<(StatKey, StatValue)>) -> Event {
        Event {
            metadata: md,
            start_ps: start,
            duration_ps: dur,
            stats: Stats::from(stats),
        }
    }

    fn md(name: &str) -> EventMetadata {
        EventMetadata {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_host_op_first_seen_without_a_type_takes_the_type_of_a_later_occurrence() {
        // XProf's builders and combiner fill an op's type if it is still empty: the first
        // occurrence (a `tf_op` stat without type) on one thread, typed later on the same
        // thread and on another.
        let untyped = |start| {
            ev(
                1,
                start,
                10,
                vec![(StatKey::TfOp, StatValue::Str("model/Cast".into()))],
            )
        };
        let plane = Plane {
            name: HOST_THREADS.into(),
            metadata: vec![md("model/Cast:Cast"), md("other")],
            lines: vec![
                Line {
                    id: 1,
                    name: "t1".into(),
                    events: vec![untyped(0), ev(0, 100, 10, vec![])],
                    ..Default::default()
                },
                Line {
                    id: 2,
                    name: "t2".into(),
                    events: vec![untyped(0)],
                    ..Default::default()
                },
                Line {
                    id: 3,
                    name: "t3".into(),
                    events: vec![ev(0, 0, 10, vec![])],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let db = framework_op_db(&plane);
        let cast = db.metrics.iter().find(|m| m.name == "model/Cast").unwrap();
        assert_eq!((cast.occurrences, cast.category.as_str()), (4, "Cast"));
    }

    #[test]
    fn framework_ops_from_names_and_tf_op_stats() {
        let plane = Plane {
            name: HOST_THREADS.into(),
            metadata: vec![
                md("model/MatMul:MatMul"),
                md("MutexLock"),
                md("MemoryAllocation"),
            ],
            lines: vec![Line {
                id: 1,
                name: "t".into(),
                events: vec![
                    ev(0, 0, 100, vec![]),
                    ev(1, 10, 20, vec![]),
                    ev(
                        2,
                        200,
                        0,
                        vec![(StatKey::TfOp, StatValue::Str("jit(f)/pallas_call:".into()))],
                    ),
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let db = framework_op_db(&plane);
        let mm = db
            .metrics
            .iter()
            .find(|m| m.name == "model/MatMul")
            .unwrap();
        assert_eq!(
            (mm.occurrences, mm.time_ps, mm.category.as_str()),
            (1, 100, "MatMul")
        );
        let pc = db
            .metrics
            .iter()
            .find(|m| m.name == "jit(f)/pallas_call")
            .unwrap();
        assert_eq!((pc.occurrences, pc.time_ps), (1, 0));
        assert_eq!(db.total_time_ps, 200);
        assert_eq!(db.total_op_time_ps, 100);
        assert!(db.metrics.iter().all(|m| m.name != "MutexLock"));
    }

    #[test]
    fn host_xla_ops_nest_per_thread_and_join_the_hlo() {
        let mut modules = HashMap::new();
        let mut instrs = HashMap::new();
        instrs.insert(
            "fusion.1".to_string(),
            HloInstr {
                name: "fusion.1".into(),
                opcode: "fusion".into(),
                fusion_kind: "kLoop".into(),
                op_name: "jit(f)/add".into(),
                ..Default::default()
            },
        );
        modules.insert(
            8,
            HloModuleInfo {
                program_id: 8,
                name: "jit_f".into(),
                instructions: instrs,
                is_training: false,
            },
        );
        let op = |n: &str| {
            vec![
                (StatKey::HloOp, StatValue::Str(n.into())),
                (StatKey::HloModule, StatValue::Str("jit_f".into())),
            ]
        };
        let plane = Plane {
            name: HOST_THREADS.into(),
            metadata: vec![md("fusion.1"), md("call.2")],
            lines: vec![
                Line {
                    id: 1,
                    events: vec![
                        ev(1, 0, 100, op("call.2")),
                        ev(0, 10, 30, op("fusion.1")),
                        ev(0, 200, 50, op("fusion.1")),
                    ],
                    ..Default::default()
                },
                Line {
                    id: 2,
                    events: vec![ev(0, 0, 40, op("fusion.1"))],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let db = host_xla_op_db(&plane, &modules).unwrap();
        let f = db.metrics.iter().find(|m| m.name == "fusion.1").unwrap();
        assert_eq!(
            (f.program_id, f.occurrences, f.time_ps, f.self_time_ps),
            (8, 3, 120, 120)
        );
        assert_eq!(
            (f.category.as_str(), f.provenance.as_str(), f.num_cores),
            ("loop fusion", "jit(f)/add", 2)
        );
        let c = db.metrics.iter().find(|m| m.name == "call.2").unwrap();
        assert_eq!((c.self_time_ps, c.category.as_str()), (70, "unknown"));
        // Windows: line 1 [0,250], line 2 [0,40].
        assert_eq!(db.total_time_ps, 290);
        assert_eq!(db.total_op_time_ps, 70 + 120);
    }
}
