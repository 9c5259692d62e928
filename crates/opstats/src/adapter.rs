//! From decoded protobuf (`xprof_proto`) to the engine's [`crate::model`].
//!
//! Stats are resolved by **name** through the plane's stat metadata (ids differ per plane and
//! per capture); `ref_value`s become the referenced name. Only stats the engine uses are kept.

use std::collections::HashMap;
use std::sync::Arc;

use xprof_proto::xla::HloProto;
use xprof_proto::xplane::{XPlane, XSpace, XStat, x_event, x_stat};

use crate::model::{
    Event, EventMetadata, HloInstr, HloModuleInfo, HostSpace, Line, Plane, StatKey, StatValue,
    Stats,
};

/// Per-plane resolution of stat ids to keys and of ref values to shared strings.
struct StatResolver<'a> {
    plane: &'a XPlane,
    keys: HashMap<i64, StatKey>,
    refs: HashMap<u64, Arc<str>>,
}

impl<'a> StatResolver<'a> {
    fn new(plane: &'a XPlane) -> Self {
        let keys = plane
            .stat_metadata
            .iter()
            .filter_map(|(id, m)| StatKey::from_name(&m.name).map(|k| (*id, k)))
            .collect();
        StatResolver {
            plane,
            keys,
            refs: HashMap::new(),
        }
    }

    fn resolve(&mut self, stats: &[XStat]) -> Stats {
        let mut out = Stats::default();
        for s in stats {
            let Some(&key) = self.keys.get(&s.metadata_id) else {
                continue;
            };
            let Some(v) = &s.value else { continue };
            let value = match v {
                x_stat::Value::DoubleValue(d) => StatValue::Double(*d),
                x_stat::Value::Uint64Value(u) => StatValue::Uint(*u),
                x_stat::Value::Int64Value(i) => StatValue::Int(*i),
                x_stat::Value::StrValue(s) => StatValue::Str(Arc::from(s.as_str())),
                x_stat::Value::BytesValue(b) => StatValue::Bytes(Arc::from(b.as_slice())),
                x_stat::Value::RefValue(r) => {
                    let plane = self.plane;
                    let s = self
                        .refs
                        .entry(*r)
                        .or_insert_with(|| {
                            Arc::from(
                                plane
                                    .stat_metadata
                                    .get(&(*r as i64))
                                    .map(|m| m.name.as_str())
                                    .unwrap_or(""),
                            )
                        })
                        .clone();
                    StatValue::Str(s)
                }
                // Compressed strings are not used by the engine's stats.
                x_stat::Value::CompressedStrValue(_) => continue,
            };
            out.push(key, value);
        }
        out
    }
}

/// Convert one decoded plane.
pub fn plane_from_proto(p: &XPlane) -> Plane {
    let mut r = StatResolver::new(p);
    let mut index: HashMap<i64, u32> = HashMap::with_capacity(p.event_metadata.len());
    let mut metadata = Vec::with_capacity(p.event_metadata.len());
    for (id, m) in &p.event_metadata {
        index.insert(*id, metadata.len() as u32);
        metadata.push(EventMetadata {
            id: *id,
            name: m.name.clone(),
            display_name: m.display_name.clone(),
            stats: r.resolve(&m.stats),
            children: Vec::new(),
        });
    }
    for (id, m) in &p.event_metadata {
        let children: Vec<u32> = m
            .child_id
            .iter()
            .filter_map(|c| index.get(c).copied())
            .collect();
        if let Some(&i) = index.get(id) {
            metadata[i as usize].children = children;
        }
    }
    // Events naming unknown metadata get an empty one, as XProf's visitor does.
    let unknown = metadata.len() as u32;
    metadata.push(EventMetadata::default());
    let lines = p
        .lines
        .iter()
        .map(|l| Line {
            id: l.id,
            name: l.name.clone(),
            display_name: l.display_name.clone(),
            timestamp_ns: l.timestamp_ns,
            events: l
                .events
                .iter()
                .map(|e| {
                    let (offset, occ) = match e.data {
                        Some(x_event::Data::OffsetPs(o)) => (o, 0),
                        Some(x_event::Data::NumOccurrences(n)) => (0, n),
                        None => (0, 0),
                    };
                    Event {
                        metadata: index.get(&e.metadata_id).copied().unwrap_or(unknown),
                        start_ps: l.timestamp_ns.saturating_mul(1000).saturating_add(offset),
                        duration_ps: e.duration_ps,
                        num_occurrences: occ,
                        stats: r.resolve(&e.stats),
                    }
                })
                .collect(),
        })
        .collect();
    Plane {
        id: p.id,
        name: p.name.clone(),
        lines,
        metadata,
        stats: r.resolve(&p.stats),
    }
}

/// The HLO facts the views need from one module; each instruction's text is printed as XLA
/// does (the `long_name` XProf shows for ops the trace does not describe).
pub fn module_info(program_id: u64, hlo: &HloProto) -> Option<HloModuleInfo> {
    use xprof_hlo::print::{ModuleView, PrintOptions};
    let m = hlo.hlo_module.as_ref()?;
    let view = ModuleView::new(m);
    let opts = PrintOptions::long();
    let costs = crate::cost_model::module_costs(&view);
    let mut instructions = HashMap::new();
    let mut is_training = false;
    for c in &m.computations {
        for i in &c.instructions {
            let md = i.metadata.clone().unwrap_or_default();
            if md.op_name.contains("transpose(jvp(") || md.op_name.contains("/gradients/") {
                is_training = true;
            }
            instructions.insert(
                i.name.clone(),
                HloInstr {
                    name: i.name.clone(),
                    opcode: i.opcode.clone(),
                    fusion_kind: i.fusion_kind.clone(),
                    op_name: md.op_name,
                    source_file: md.source_file,
                    source_line: md.source_line,
                    expression: view.instruction_text(i, &opts),
                    cost: costs.get(&i.id).copied(),
                },
            );
        }
    }
    Some(HloModuleInfo {
        program_id,
        name: m.name.clone(),
        instructions,
        is_training,
    })
}

/// Modules embedded in `/host:metadata` (stat `Hlo Proto`; program id from stat `program_id`,
/// else the metadata id).
pub fn embedded_modules(space: &XSpace) -> Vec<HloModuleInfo> {
    let mut out = Vec::new();
    for p in space.planes.iter().filter(|p| p.name == "/host:metadata") {
        let names: HashMap<i64, &str> = p
            .stat_metadata
            .iter()
            .map(|(id, m)| (*id, m.name.as_str()))
            .collect();
        for (id, m) in &p.event_metadata {
            let mut bytes = None;
            let mut pid = None;
            for s in &m.stats {
                match (names.get(&s.metadata_id).copied(), &s.value) {
                    (Some("Hlo Proto"), Some(x_stat::Value::BytesValue(b))) => bytes = Some(b),
                    (Some("program_id"), Some(x_stat::Value::Uint64Value(v))) => pid = Some(*v),
                    (Some("program_id"), Some(x_stat::Value::Int64Value(v))) => {
                        pid = Some(*v as u64)
                    }
                    _ => {}
                }
            }
            if let Some(b) = bytes
                && let Ok(hlo) = xprof_proto::decode_hlo_proto(b)
                && let Some(info) = module_info(pid.unwrap_or(*id as u64), &hlo)
            {
                out.push(info);
            }
        }
    }
    out
}

/// One host's model from its decoded XSpace and extra HLO modules (from `*.hlo_proto.pb`).
/// Planes are converted in parallel.
pub fn host_space(host: &str, space: &XSpace, extra_modules: Vec<HloModuleInfo>) -> HostSpace {
    use rayon::prelude::*;
    let planes: Vec<Plane> = space
        .planes
        .par_iter()
        .filter(|p| p.name != "/host:metadata")
        .map(plane_from_proto)
        .collect();
    let mut modules = HashMap::new();
    for m in embedded_modules(space).into_iter().chain(extra_modules) {
        modules.entry(m.program_id).or_insert(m);
    }
    HostSpace {
        host: host.to_string(),
        hostname: space
            .hostnames
            .first()
            .cloned()
            .unwrap_or_else(|| "localhost".into()),
        planes,
        errors: space.errors.clone(),
        warnings: space.warnings.clone(),
        modules,
    }
}

/// Metadata ids → values: a dense table for the usual small ids, a hash map for sparse ones
/// (some captures key metadata by 64-bit fingerprints).
enum IdMap<T: Copy> {
    Dense(Vec<Option<T>>),
    Sparse(HashMap<i64, T>),
}

impl<T: Copy> IdMap<T> {
    fn new(entries: Vec<(i64, T)>) -> Self {
        const DENSE_LIMIT: i64 = 1 << 20;
        let max = entries.iter().map(|e| e.0).max().unwrap_or(0);
        if entries.iter().all(|e| e.0 >= 0)
            && max < DENSE_LIMIT
            && (max as usize) < entries.len() * 8 + 64
        {
            let mut v = vec![None; max as usize + 1];
            for (k, t) in entries {
                v[k as usize] = Some(t);
            }
            IdMap::Dense(v)
        } else {
            IdMap::Sparse(entries.into_iter().collect())
        }
    }
    fn get(&self, id: i64) -> Option<T> {
        match self {
            IdMap::Dense(v) => usize::try_from(id)
                .ok()
                .and_then(|i| v.get(i).copied().flatten()),
            IdMap::Sparse(m) => m.get(&id).copied(),
        }
    }
}

/// Resolution for the lazy reader: stat ids → keys (one table per plane, shared by the
/// threads converting its lines), ref and string values shared per thread.
struct ReaderResolver<'k, 'a> {
    keys: &'k IdMap<StatKey>,
    refs: HashMap<u64, Arc<str>>,
    /// String values already seen: events repeat the same few (`hlo_op`, `hlo_module`,
    /// `tf_op` …) millions of times, so each distinct string is allocated once per thread
    /// instead of once per event.
    strs: HashMap<&'a str, Arc<str>>,
    scratch: Vec<(StatKey, StatValue)>,
    plane: xprof_xspace::Plane<'a>,
}

/// The plane's stat id → key table.
fn reader_keys(plane: xprof_xspace::Plane<'_>) -> IdMap<StatKey> {
    IdMap::new(
        plane
            .stat_metadata_iter()
            .filter_map(|m| StatKey::from_name(m.name()).map(|k| (m.id(), k)))
            .collect(),
    )
}

impl<'k, 'a> ReaderResolver<'k, 'a> {
    fn new(plane: xprof_xspace::Plane<'a>, keys: &'k IdMap<StatKey>) -> Self {
        ReaderResolver {
            keys,
            refs: HashMap::new(),
            strs: HashMap::new(),
            scratch: Vec::new(),
            plane,
        }
    }

    fn resolve(&mut self, stats: impl Iterator<Item = xprof_xspace::Stat<'a>>) -> Stats {
        use xprof_xspace::StatValue as V;
        // Collected in a reused buffer, then copied at its exact size: a vector grown from
        // empty reserves four entries (128 bytes) even for an event with one kept stat, and
        // the engine's passes stream these millions of small vectors.
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        for s in stats {
            let Some(key) = self.keys.get(s.metadata_id) else {
                continue;
            };
            let value = match s.value {
                V::Double(d) => StatValue::Double(d),
                V::Uint(u) => StatValue::Uint(u),
                V::Int(i) => StatValue::Int(i),
                V::Str(x) => {
                    StatValue::Str(self.strs.entry(x).or_insert_with(|| Arc::from(x)).clone())
                }
                V::Bytes(b) => StatValue::Bytes(Arc::from(b)),
                V::Ref(r) => {
                    let plane = self.plane;
                    StatValue::Str(
                        self.refs
                            .entry(r)
                            .or_insert_with(|| Arc::from(plane.stat_name(r as i64).unwrap_or("")))
                            .clone(),
                    )
                }
                V::None | V::CompressedStr(_) => continue,
            };
            out.push((key, value));
        }
        // Moved into a vector of exact capacity (taking `out` itself would keep its spare
        // capacity and lose the reusable buffer).
        let mut exact = Vec::with_capacity(out.len());
        exact.append(&mut out);
        let stats = Stats(exact);
        self.scratch = out;
        stats
    }
}

/// Lines of a TPU plane the engine reads; the rest (LLO bundles, TraceMe, counters) can hold
/// most of a capture's events and are skipped.
fn engine_reads_line(plane: &str, line: &str) -> bool {
    if !plane.starts_with("/device:TPU:") {
        return true;
    }
    matches!(
        line,
        "XLA Ops"
            | "XLA Modules"
            | "Steps"
            | "Framework Ops"
            | "Sparse Core Ops"
            | "Sparse Core Modules"
            | "Sparse Core Steps"
    )
}

/// Convert one plane read by the lazy reader. Events are converted in parallel: every line
/// in the runs the reader validated (a CPU capture puts most events on one plane, and a
/// handful of threads on it), each run into its place in the line's event vector.
pub fn plane_from_reader(p: xprof_xspace::Plane<'_>) -> Plane {
    use rayon::prelude::*;
    let keys = reader_keys(p);
    let mut r = ReaderResolver::new(p, &keys);
    let mut ids: Vec<(i64, u32)> = Vec::new();
    let mut metadata = Vec::new();
    for m in p.event_metadata_iter() {
        ids.push((m.key(), metadata.len() as u32));
        metadata.push(EventMetadata {
            id: m.id(),
            name: m.name().to_string(),
            display_name: m.display_name().to_string(),
            stats: r.resolve(m.stats()),
            children: Vec::new(),
        });
    }
    let index = IdMap::new(ids);
    for m in p.event_metadata_iter() {
        let children: Vec<u32> = m.child_ids().iter().filter_map(|c| index.get(*c)).collect();
        if let Some(i) = index.get(m.key()) {
            metadata[i as usize].children = children;
        }
    }
    let unknown = metadata.len() as u32;
    metadata.push(EventMetadata::default());
    let plane_stats = r.resolve(p.stats());
    let reader_lines: Vec<xprof_xspace::Line<'_>> = p
        .lines()
        .filter(|l| engine_reads_line(p.name(), l.name()))
        .collect();
    // Each line's events, sized from the reader's counts; runs fill disjoint slices.
    let runs_per_line: Vec<Vec<xprof_xspace::Events<'_>>> =
        reader_lines.iter().map(|l| l.event_runs()).collect();
    let mut events: Vec<Vec<Event>> = runs_per_line
        .iter()
        .map(|runs| {
            let n = runs.iter().map(ExactSizeIterator::len).sum();
            let mut v = Vec::with_capacity(n);
            v.resize_with(n, Event::default);
            v
        })
        .collect();
    let mut work: Vec<(&mut [Event], xprof_xspace::Events<'_>)> = Vec::new();
    for (slots, runs) in events.iter_mut().zip(runs_per_line) {
        let mut rest: &mut [Event] = slots;
        for run in runs {
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(run.len());
            work.push((mine, run));
            rest = tail;
        }
    }
    work.into_par_iter().for_each(|(slots, run)| {
        let mut r = ReaderResolver::new(p, &keys);
        for (slot, e) in slots.iter_mut().zip(run) {
            *slot = Event {
                metadata: index.get(e.metadata_id()).unwrap_or(unknown),
                start_ps: e.start_ps(),
                duration_ps: e.duration_ps(),
                num_occurrences: e.num_occurrences(),
                stats: r.resolve(e.stats()),
            };
        }
    });
    let lines = reader_lines
        .iter()
        .zip(events)
        .map(|(l, events)| Line {
            id: l.id(),
            name: l.name().to_string(),
            display_name: l.display_name().to_string(),
            timestamp_ns: l.timestamp_ns(),
            events,
        })
        .collect();
    Plane {
        id: p.id(),
        name: p.name().to_string(),
        lines,
        metadata,
        stats: plane_stats,
    }
}

/// One host's model from the lazy reader (planes converted in parallel).
pub fn host_space_from_reader(
    host: &str,
    space: &xprof_xspace::XSpace,
    extra_modules: Vec<HloModuleInfo>,
) -> HostSpace {
    use rayon::prelude::*;
    let planes: Vec<xprof_xspace::Plane<'_>> = space
        .planes()
        .filter(|p| p.name() != "/host:metadata")
        .collect();
    // Planes and the embedded HLO modules (decoded and printed) are independent.
    let (planes, infos): (Vec<Plane>, Vec<HloModuleInfo>) = rayon::join(
        || planes.into_par_iter().map(plane_from_reader).collect(),
        || {
            xprof_xspace::hlo::embedded_hlo_modules(space)
                .par_iter()
                .filter_map(|m| module_info(m.program_id, &m.decode().ok()?))
                .collect()
        },
    );
    let mut modules = HashMap::new();
    for info in infos {
        modules.entry(info.program_id).or_insert(info);
    }
    for m in extra_modules {
        modules.entry(m.program_id).or_insert(m);
    }
    let hostname = space.hostname();
    HostSpace {
        host: host.to_string(),
        hostname: if hostname.is_empty() {
            "localhost".into()
        } else {
            hostname.to_string()
        },
        planes,
        errors: space.errors().into_iter().map(str::to_string).collect(),
        warnings: space.warnings().into_iter().map(str::to_string).collect(),
        modules,
    }
}

#[cfg(test)]
mod tests {
    use super::IdMap;

    #[test]
    fn id_maps_are_dense_for_small_ids_and_sparse_otherwise() {
        let d = IdMap::new(vec![(1, 'a'), (3, 'b')]);
        assert!(matches!(d, IdMap::Dense(_)));
        assert_eq!(
            (d.get(1), d.get(2), d.get(3), d.get(-1), d.get(99)),
            (Some('a'), None, Some('b'), None, None)
        );
        let s = IdMap::new(vec![(1 << 40, 'x'), (-5, 'y')]);
        assert!(matches!(s, IdMap::Sparse(_)));
        assert_eq!(
            (s.get(1 << 40), s.get(-5), s.get(0)),
            (Some('x'), Some('y'), None)
        );
    }
}
