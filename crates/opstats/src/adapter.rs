//! From decoded protobuf (`xprof_proto`) to the engine's [`crate::model`].
//!
//! Stats are resolved by **name** through the plane's stat metadata (ids differ per plane and
//! per capture); `ref_value`s become the referenced name. Only stats the engine uses are kept.

use std::collections::HashMap;
use std::sync::Arc;

use crate::preprocess::{self, Preprocess};
use xprof_proto::xla::HloModuleProto;
use xprof_proto::xplane::{XPlane, XSpace, XStat, x_event, x_stat};
use xprof_xspace::hlo::EmbeddedModule;

use crate::model::{
    Event, EventMetadata, HloInstr, HloModuleInfo, HostEvents, HostSpace, Line, Plane, StatChunk,
    StatKey, StatValue, Stats,
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

    fn resolve(&mut self, stats: &[XStat]) -> Vec<(StatKey, StatValue)> {
        let mut out = Vec::new();
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
            out.push((key, value));
        }
        out
    }
}

/// [`RunEvents::append_preprocessed`] for a decoded event: `raw` its stats, `stats` them
/// resolved.
fn preprocess_proto_stats(
    pre: &Preprocess,
    rule: preprocess::Rule,
    raw: &[XStat],
    stats: &mut Vec<(StatKey, StatValue)>,
) {
    let values = pre.values(raw.iter().filter_map(|st| match st.value {
        Some(x_stat::Value::Int64Value(i)) => Some((st.metadata_id, i as u64)),
        Some(x_stat::Value::Uint64Value(u)) => Some((st.metadata_id, u)),
        _ => None,
    }));
    let Some(edit) = pre.edit(rule, &values) else {
        return;
    };
    stats.retain(|(k, _)| edit.iter().all(|(e, _)| e != k));
    stats.extend(edit);
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
            stats: Stats::from(r.resolve(&m.stats)),
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
    let pre = Preprocess::of(
        &p.name,
        metadata.iter().map(|m| m.name.as_str()),
        p.stat_metadata.iter().map(|(id, m)| (*id, m.name.as_str())),
    );
    // Events naming unknown metadata get an empty one, as XProf's visitor does.
    let unknown = metadata.len() as u32;
    metadata.push(EventMetadata::default());
    let lines = p
        .lines
        .iter()
        .map(|l| {
            let module_line = pre.as_ref().is_some_and(|x| x.module_line(&l.name));
            Line {
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
                        let mut stats = r.resolve(&e.stats);
                        let position = index.get(&e.metadata_id).copied();
                        if let Some(pre) = &pre
                            && let Some(rule) = pre.rule(module_line, position.map(|i| i as usize))
                        {
                            preprocess_proto_stats(pre, rule, &e.stats, &mut stats);
                        }
                        if occ != 0 {
                            stats.push((StatKey::NumOccurrences, StatValue::Int(occ)));
                        }
                        Event {
                            metadata: position.unwrap_or(unknown),
                            start_ps: l.timestamp_ns.saturating_mul(1000).saturating_add(offset),
                            duration_ps: e.duration_ps,
                            stats: Stats::from(stats),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    Plane {
        id: p.id,
        name: p.name.clone(),
        lines,
        metadata,
        stats: Stats::from(r.resolve(&p.stats)),
    }
}

/// A fusion's fused instructions as XProf lists them under the fusion
/// (`AddFusionChildrenToOpMetricsFromHloInstruction`): parameters and tuples left out.
fn fused_children(
    view: &xprof_hlo::print::ModuleView<'_>,
    i: &xprof_proto::xla::HloInstructionProto,
) -> Vec<String> {
    if i.opcode != "fusion" {
        return Vec::new();
    }
    let Some(ci) = i
        .called_computation_ids
        .first()
        .and_then(|c| view.comp_by_id.get(c))
    else {
        return Vec::new();
    };
    view.instrs[*ci]
        .iter()
        .filter(|c| c.opcode != "parameter" && c.opcode != "tuple")
        .map(|c| c.name.clone())
        .collect()
}

/// The stack of frame `id` (1-based; 0 is none) in `index`: `file:line:column` per frame,
/// each line ended by a newline, innermost first. A cycle or a bad id ends it.
fn stack_text(index: Option<&xprof_proto::xla::StackFrameIndexProto>, mut id: i32) -> String {
    let Some(sf) = index else {
        return String::new();
    };
    let mut out = String::new();
    let mut seen = 0;
    while id > 0 && seen <= sf.stack_frames.len() {
        seen += 1;
        let Some(frame) = sf.stack_frames.get(id as usize - 1) else {
            break;
        };
        if let Some(loc) = usize::try_from(frame.file_location_id - 1)
            .ok()
            .and_then(|i| sf.file_locations.get(i))
        {
            let file = usize::try_from(loc.file_name_id - 1)
                .ok()
                .and_then(|i| sf.file_names.get(i))
                .map_or("", String::as_str);
            out.push_str(&format!("{file}:{}:{}\n", loc.line, loc.column));
        }
        id = frame.parent_frame_id;
    }
    out
}

/// The HLO facts the views need from one module; each instruction's text is printed as XLA
/// does (the `long_name` XProf shows for ops the trace does not describe).
pub fn module_info(program_id: u64, m: &HloModuleProto) -> HloModuleInfo {
    use xprof_hlo::print::{ModuleView, PrintOptions};
    let view = ModuleView::new(m);
    let opts = PrintOptions::instruction();
    let costs = crate::cost_model::module_costs(&view);
    // Where XProf's cost analysis has no numbers, ours are estimates.
    let rejected = crate::cost_model::xprof_rejects_module(&view);
    let estimate_only = |i: &xprof_proto::xla::HloInstructionProto| {
        rejected || crate::cost_model::xprof_leaves_uncosted(i)
    };
    let mut instructions = HashMap::new();
    let mut is_training = false;
    for c in &m.computations {
        for i in &c.instructions {
            let md = i.metadata.clone().unwrap_or_default();
            is_training |= crate::tfop::is_training_op(&md.op_name, &md.op_type);
            instructions.insert(
                i.name.clone(),
                HloInstr {
                    name: i.name.clone(),
                    opcode: i.opcode.clone(),
                    fusion_kind: i.fusion_kind.clone(),
                    op_name: md.op_name,
                    op_type: md.op_type,
                    source_file: md.source_file,
                    source_line: md.source_line,
                    source_stack: stack_text(m.stack_frame_index.as_ref(), md.stack_frame_id),
                    expression: view.instruction_text(i, &opts),
                    cost: costs.get(&i.id).copied().filter(|_| !estimate_only(i)),
                    estimated_cost: costs.get(&i.id).copied().filter(|_| estimate_only(i)),
                    fused_children: fused_children(&view, i),
                },
            );
        }
    }
    HloModuleInfo {
        program_id,
        name: m.name.clone(),
        instructions,
        is_training,
    }
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
                && let Ok(Some(m)) = xprof_proto::decode_hlo_module(b)
            {
                out.push(module_info(pid.unwrap_or(*id as u64), &m));
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
    let skips_grouping = crate::model::skips_grouping(space.planes.iter().map(|p| {
        (
            p.name.as_str(),
            p.stat_metadata.values().any(|m| m.name == "group_id"),
        )
    }));
    HostSpace {
        skips_grouping,
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
        host_events: HostEvents::All,
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

/// Stat ids → keys per plane, built once per plane and shared by the runs converting it.
type KeyTable = Arc<IdMap<StatKey>>;

/// The plane's stat id → key table.
fn reader_keys(plane: xprof_xspace::Plane<'_>) -> IdMap<StatKey> {
    IdMap::new(
        plane
            .stat_metadata_iter()
            .filter_map(|m| StatKey::from_name(m.name()).map(|k| (m.id(), k)))
            .collect(),
    )
}

/// The per-run string caches' hasher: keys are short strings and small ids from the capture
/// itself, looked up once per stat, so a fast unkeyed hash (SipHash's flooding resistance buys
/// nothing here).
type FastHash = foldhash::fast::FixedState;

/// Where a run's events go.
enum Sink<'a> {
    /// A vector of the run's own (a line in one run: it becomes the line's events).
    Own(Vec<Event>),
    /// The run's part of its line's buffer, laid out before the scan: a line in several runs
    /// is filled in place rather than copied together from its runs' vectors afterwards
    /// (most of a large capture's events are on such lines).
    Part {
        events: &'a mut [Event],
        filled: usize,
    },
}

/// One run of a line's events converted: the events, whose [`Stats`] are ranges of `stats`
/// (made shared once the run is complete, [`RunEvents::complete`]).
struct RunEvents<'a> {
    keys: KeyTable,
    /// The plane's preprocessing (XProf's step roots and flows), and whether this run's line
    /// is a TPU core's `XLA Modules`.
    preprocess: Option<Arc<Preprocess>>,
    module_line: bool,
    /// Index of the empty metadata appended to the plane's (events naming unknown metadata).
    unknown: u32,
    events: Sink<'a>,
    stats: StatChunk,
    /// `ref_value`s resolved, each once per run: their index in `stats`' string table.
    refs: HashMap<u64, u32, FastHash>,
    /// String values already in `stats`' string table: events repeat the same few (`hlo_op`,
    /// `hlo_module`, `tf_op` …) millions of times, so each distinct string is stored once per
    /// run and the stats refer to it by index.
    strs: HashMap<Arc<str>, u32, FastHash>,
}

impl<'a> RunEvents<'a> {
    fn new(keys: KeyTable, unknown: u32, events: Sink<'a>) -> Self {
        RunEvents {
            keys,
            preprocess: None,
            module_line: false,
            unknown,
            events,
            stats: StatChunk::default(),
            refs: HashMap::default(),
            strs: HashMap::default(),
        }
    }

    /// The index of `s` in the run's string table, added on first sight.
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.strs.get(s) {
            return i;
        }
        let a: Arc<str> = Arc::from(s);
        let i = self.stats.add_str(a.clone());
        self.strs.insert(a, i);
        i
    }

    /// Resolve `stats` into the run's stat storage.
    // Inlined into the event loop (where most of a load goes): with a second caller, the
    // preprocessing path, the compiler stopped inlining it, and large loads took ~8 % longer.
    #[inline(always)]
    fn append<'s>(
        &mut self,
        plane: xprof_xspace::Plane<'s>,
        stats: impl Iterator<Item = xprof_xspace::Stat<'s>>,
    ) {
        use xprof_xspace::StatValue as V;
        for s in stats {
            let Some(key) = self.keys.get(s.metadata_id) else {
                continue;
            };
            match s.value {
                V::Double(d) => self.stats.push_double(key, d),
                V::Uint(u) => self.stats.push_uint(key, u),
                V::Int(i) => self.stats.push_int(key, i),
                V::Str(x) => {
                    let i = self.intern(x);
                    self.stats.push_str_at(key, i);
                }
                V::Bytes(b) => self.stats.push(key, StatValue::Bytes(Arc::from(b))),
                V::Ref(r) => {
                    let i = match self.refs.get(&r) {
                        Some(&i) => i,
                        None => {
                            let i = self.intern(plane.stat_name(r as i64).unwrap_or(""));
                            self.refs.insert(r, i);
                            i
                        }
                    };
                    self.stats.push_str_at(key, i);
                }
                V::None | V::CompressedStr(_) => {}
            }
        }
    }

    /// Append an event's stats as XProf's preprocessing leaves them: with the stats `rule`
    /// gives it, in place of any of the same keys.
    #[cold]
    fn append_preprocessed(&mut self, e: xprof_xspace::Event<'_>, rule: preprocess::Rule) {
        let Some(pre) = self.preprocess.clone() else {
            return self.append(e.plane(), e.stats());
        };
        let values = pre.values(e.stats().filter_map(|st| match st.value {
            xprof_xspace::StatValue::Int(i) => Some((st.metadata_id, i as u64)),
            xprof_xspace::StatValue::Uint(u) => Some((st.metadata_id, u)),
            _ => None,
        }));
        let Some(edit) = pre.edit(rule, &values) else {
            return self.append(e.plane(), e.stats());
        };
        let keys = self.keys.clone();
        self.append(
            e.plane(),
            e.stats().filter(|st| {
                keys.get(st.metadata_id)
                    .is_none_or(|k| edit.iter().all(|(e, _)| *e != k))
            }),
        );
        for (k, v) in edit {
            self.stats.push(k, v);
        }
    }

    /// The stats stored from `start` on, as a range of the (not yet shared) storage.
    fn since(&self, start: usize) -> Stats {
        let len = self.stats.len() - start;
        Stats::pending(
            u32::try_from(start).expect("fewer than 2^32 stats per run"),
            len as u32,
        )
    }

    /// Resolve `stats` into the run's stat storage; returns the range they occupy.
    fn resolve<'s>(
        &mut self,
        plane: xprof_xspace::Plane<'s>,
        stats: impl Iterator<Item = xprof_xspace::Stat<'s>>,
    ) -> Stats {
        let start = self.stats.len();
        self.append(plane, stats);
        self.since(start)
    }

    /// Convert one event (`metadata_position`: [`xprof_xspace::Plane::event_metadata_position`]
    /// of its metadata id).
    #[inline]
    fn event(&mut self, e: xprof_xspace::Event<'_>, metadata_position: Option<usize>) {
        let start = self.stats.len();
        let rule = self
            .preprocess
            .as_ref()
            .and_then(|l| l.rule(self.module_line, metadata_position));
        match rule {
            Some(rule) => self.append_preprocessed(e, rule),
            None => self.append(e.plane(), e.stats()),
        }
        let occurrences = e.num_occurrences();
        if occurrences != 0 {
            self.stats.push_int(StatKey::NumOccurrences, occurrences);
        }
        let event = Event {
            metadata: metadata_position.map_or(self.unknown, |p| p as u32),
            start_ps: e.start_ps(),
            duration_ps: e.duration_ps(),
            stats: self.since(start),
        };
        match &mut self.events {
            Sink::Own(v) => v.push(event),
            Sink::Part { events, filled } => {
                // The part has a slot per event of the run (`EventScan::start`).
                if let Some(slot) = events.get_mut(*filled) {
                    *slot = event;
                }
                *filled += 1;
            }
        }
    }

    /// The run is complete: point its events' stats into the run's storage, now shared, and
    /// free what only the conversion needed.
    fn complete(&mut self) {
        self.refs = HashMap::default();
        self.strs = HashMap::default();
        let events: &mut [Event] = match &mut self.events {
            Sink::Own(v) => {
                if v.capacity() - v.len() > v.len() / 8 {
                    v.shrink_to_fit();
                }
                v
            }
            Sink::Part { events, filled } => {
                let n = (*filled).min(events.len());
                &mut events[..n]
            }
        };
        if self.stats.is_empty() {
            return;
        }
        let mut stats = std::mem::take(&mut self.stats);
        stats.shrink_to_fit();
        let chunk = Arc::new(stats);
        for e in events {
            let (start, len) = e.stats.range();
            if len > 0 {
                e.stats = Stats::in_chunk(&chunk, start, len);
            }
        }
    }
}

/// The preprocessing of a plane read by the reader.
fn reader_preprocess(p: xprof_xspace::Plane<'_>) -> Option<Preprocess> {
    Preprocess::of(
        p.name(),
        p.event_metadata_iter().map(|m| m.name()),
        p.stat_metadata_iter().map(|m| (m.id(), m.name())),
    )
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

/// Planes the engine reads (`/host:metadata` only holds the HLO modules, read separately).
fn engine_reads_plane(plane: &str) -> bool {
    plane != "/host:metadata"
}

/// The stat an event of `plane` must carry to be converted under `host_events` (`None`: every
/// event is).
fn only_events_with(plane: &str, host_events: HostEvents) -> Option<StatKey> {
    match host_events {
        HostEvents::XlaOps if plane == crate::host::HOST_THREADS => Some(StatKey::HloOp),
        _ => None,
    }
}

/// The ids of `plane`'s stat metadata that name `key`.
fn stat_ids_of(plane: xprof_xspace::Plane<'_>, key: StatKey) -> Vec<i64> {
    plane
        .stat_metadata_iter()
        .filter(|m| StatKey::from_name(m.name()) == Some(key))
        .map(|m| m.id())
        .collect()
}

/// A plane's metadata (with the empty entry for unknown ids appended), its stats and the
/// lines the engine reads, without their events.
fn plane_shell(p: xprof_xspace::Plane<'_>, keys: &KeyTable) -> (Plane, Vec<usize>) {
    let mut r = RunEvents::new(keys.clone(), 0, Sink::Own(Vec::new()));
    let mut metadata = Vec::with_capacity(p.num_event_metadata() + 1);
    for m in p.event_metadata_iter() {
        let stats = r.resolve(p, m.stats());
        metadata.push(EventMetadata {
            id: m.id(),
            name: m.name().to_string(),
            display_name: m.display_name().to_string(),
            stats,
            children: m
                .child_ids()
                .iter()
                .filter_map(|c| p.event_metadata_position(*c).map(|i| i as u32))
                .collect(),
        });
    }
    metadata.push(EventMetadata::default());
    let stats = r.resolve(p, p.stats());
    // Metadata and plane stats share one chunk.
    let chunk = Arc::new(std::mem::take(&mut r.stats));
    for m in &mut metadata {
        let (start, len) = m.stats.range();
        m.stats = Stats::in_chunk(&chunk, start, len);
    }
    let (start, len) = stats.range();
    let stats = Stats::in_chunk(&chunk, start, len);
    let mut kept = Vec::new();
    let lines = p
        .lines()
        .enumerate()
        .filter(|(_, l)| engine_reads_line(p.name(), l.name()))
        .map(|(i, l)| {
            kept.push(i);
            Line {
                id: l.id(),
                name: l.name().to_string(),
                display_name: l.display_name().to_string(),
                timestamp_ns: l.timestamp_ns(),
                events: Vec::new(),
            }
        })
        .collect();
    let plane = Plane {
        id: p.id(),
        name: p.name().to_string(),
        lines,
        metadata,
        stats,
    };
    (plane, kept)
}

/// A plane's stat key table and preprocessing, shared by the runs converting it.
type PlaneTables = (KeyTable, Option<Arc<Preprocess>>);

/// A line's place: (plane's position in the file, line's position in the plane).
type LineKey = (usize, usize);

/// What [`load_host_space`] does with each run of events while the reader validates them.
struct Convert<'a> {
    host_events: HostEvents,
    /// Per plane (by its index in the file): the stat key table and the preprocessing, built
    /// by the first run.
    keys: std::sync::Mutex<HashMap<usize, PlaneTables>>,
    /// The parts of the lines in several runs, by (line, first event of the run).
    parts: std::sync::Mutex<HashMap<(LineKey, usize), &'a mut [Event]>>,
}

impl<'a> xprof_xspace::EventScan for Convert<'a> {
    type Acc = RunEvents<'a>;
    fn start(
        &self,
        line: xprof_xspace::Line<'_>,
        run: &xprof_xspace::Run,
    ) -> Option<RunEvents<'a>> {
        let p = line.plane();
        if !engine_reads_plane(p.name()) || !engine_reads_line(p.name(), line.name()) {
            return None;
        }
        let (keys, preprocess) = self
            .keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(p.index())
            .or_insert_with(|| (Arc::new(reader_keys(p)), reader_preprocess(p).map(Arc::new)))
            .clone();
        let part = self
            .parts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&((p.index(), run.line), run.events.start));
        let sink = match part {
            Some(events) => Sink::Part { events, filled: 0 },
            // A filtered run's size is not known before it is converted.
            None if only_events_with(p.name(), self.host_events).is_some() => Sink::Own(Vec::new()),
            None => Sink::Own(Vec::with_capacity(run.events.len())),
        };
        let mut acc = RunEvents::new(keys, p.num_event_metadata() as u32, sink);
        acc.module_line = preprocess
            .as_ref()
            .is_some_and(|l| l.module_line(line.name()));
        acc.preprocess = preprocess;
        Some(acc)
    }
    #[inline]
    fn event(&self, acc: &mut RunEvents<'a>, e: xprof_xspace::Event<'_>, position: Option<usize>) {
        acc.event(e, position);
    }
    /// A superset of the events the engine keeps (a stat without a value counts): those
    /// without one are dropped again where the engine reads the stat.
    fn only_events_with(&self, line: xprof_xspace::Line<'_>) -> Option<Vec<i64>> {
        let p = line.plane();
        only_events_with(p.name(), self.host_events).map(|key| stat_ids_of(p, key))
    }
    fn finish(&self, acc: &mut RunEvents<'a>) {
        acc.complete();
    }
}

/// The lines the engine reads that come in several runs, with each run's events; not the
/// filtered ones (whose runs keep some of their events, in vectors of their own).
fn lines_in_parts(
    framed: &xprof_xspace::Framed,
    host_events: HostEvents,
) -> Vec<(LineKey, Vec<std::ops::Range<usize>>)> {
    let mut lines: Vec<(LineKey, Vec<std::ops::Range<usize>>)> = Vec::new();
    for r in framed.runs() {
        if !engine_reads_plane(r.plane_name)
            || !engine_reads_line(r.plane_name, r.line_name)
            || only_events_with(r.plane_name, host_events).is_some()
        {
            continue;
        }
        let key = (r.plane, r.run.line);
        match lines.last_mut() {
            Some((k, runs)) if *k == key => runs.push(r.run.events),
            _ => lines.push((key, vec![r.run.events])),
        }
    }
    lines.retain(|(_, runs)| runs.len() > 1);
    lines
}

/// The identity of each embedded module, to tell whether a scan dropped any.
fn module_ids(modules: &[EmbeddedModule<'_>]) -> Vec<(u64, i64)> {
    modules
        .iter()
        .map(|m| (m.program_id, m.metadata_id))
        .collect()
}

/// Open `path` and convert it to the model in the pass that validates it (the events of the
/// lines the engine reads are converted as the reader checks them, in parallel runs), running
/// `also` on the capture's embedded HLO modules meanwhile. Every event is validated; the host
/// threads' are converted as `host_events` says. Errors, dropped planes and diagnostics are
/// [`xprof_xspace::XSpace::open`]'s.
pub fn load_host_space<R: Send>(
    path: &std::path::Path,
    host_events: HostEvents,
    also: impl Fn(&[EmbeddedModule<'_>]) -> R + Sync,
) -> Result<(xprof_xspace::XSpace, Vec<Plane>, R), xprof_xspace::XSpaceError> {
    use rayon::prelude::*;
    let framed = xprof_xspace::XSpace::open_framed(path, &xprof_xspace::ReadOptions::default())?;
    let long = lines_in_parts(&framed, host_events);
    // Each such line's buffer, written through in parallel so that its pages are faulted in
    // on both cores; its runs then overwrite their parts.
    let mut buffers: Vec<Vec<Event>> = long
        .iter()
        .map(|(_, runs)| {
            let n = runs.last().map_or(0, |r| r.end);
            let mut v = Vec::with_capacity(n);
            v.par_extend(rayon::iter::repeat_n(Event::default(), n));
            v
        })
        .collect();
    let mut parts = HashMap::new();
    for ((key, runs), buffer) in long.iter().zip(buffers.iter_mut()) {
        let mut rest: &mut [Event] = buffer;
        for r in runs {
            let (part, after) = std::mem::take(&mut rest).split_at_mut(r.len());
            parts.insert((*key, r.start), part);
            rest = after;
        }
    }
    let scan = Convert {
        host_events,
        keys: Default::default(),
        parts: std::sync::Mutex::new(parts),
    };
    // The modules are in the planes' metadata, which framing validated: they are decoded
    // while the events are scanned, not after.
    let (scanned, (ids, r)) = framed.scan_beside(&scan, |f| {
        let modules = f.embedded_hlo_modules();
        (module_ids(&modules), also(&modules))
    });
    let (space, runs) = scanned?;
    // A plane the scan dropped for a corrupt event takes its modules with it.
    let modules = xprof_xspace::hlo::embedded_hlo_modules(&space);
    let r = if module_ids(&modules) == ids {
        r
    } else {
        also(&modules)
    };
    let keys = scan.keys.into_inner().unwrap_or_else(|e| e.into_inner());
    // The runs in their own vectors; the others are in the buffers (whose borrows end here).
    let mut own = Vec::new();
    for s in runs {
        match s.acc.events {
            Sink::Own(v) => own.push((s.plane, s.line, v)),
            Sink::Part { events, filled } => {
                // `EventScan::start`: a completed run had exactly one event per slot. Anything
                // else is a bug in the reader's run accounting, and the line would hold
                // placeholder events: fail (the SDK reports a panic as an internal error)
                // rather than answer from them.
                assert_eq!(
                    filled,
                    events.len(),
                    "a run did not fill its part of the line"
                );
            }
        }
    }
    let filled: HashMap<LineKey, Vec<Event>> =
        long.into_iter().map(|(k, _)| k).zip(buffers).collect();
    let out = assemble(&space, own, filled, &keys);
    Ok((space, out, r))
}

/// The planes of `space` from the converted events: the runs in their own vectors (by the
/// plane's position in `space` and the line's) and the lines filled in place (by the plane's
/// position in the file and the line's).
fn assemble(
    space: &xprof_xspace::XSpace,
    own: Vec<(usize, usize, Vec<Event>)>,
    mut filled: HashMap<LineKey, Vec<Event>>,
    keys: &HashMap<usize, PlaneTables>,
) -> Vec<Plane> {
    use rayon::prelude::*;
    let planes: Vec<xprof_xspace::Plane<'_>> = space.planes().collect();
    let mut per_line: Vec<Vec<Vec<Event>>> = planes
        .iter()
        .map(|p| (0..p.lines().len()).map(|_| Vec::new()).collect())
        .collect();
    for (pi, li, mut events) in own {
        // One run per line, unless a line in several runs found no buffer: then its runs, in
        // file order.
        let line = &mut per_line[pi][li];
        if line.is_empty() {
            *line = events;
        } else {
            line.append(&mut events);
        }
    }
    for (p, lines) in planes.iter().zip(per_line.iter_mut()) {
        for (li, events) in lines.iter_mut().enumerate() {
            if let Some(v) = filled.remove(&(p.index(), li)) {
                *events = v;
            }
        }
    }
    planes
        .par_iter()
        .zip(per_line)
        .filter(|(p, _)| engine_reads_plane(p.name()))
        .map(|(p, mut lines)| {
            let keys = keys
                .get(&p.index())
                .map(|t| t.0.clone())
                .unwrap_or_else(|| Arc::new(reader_keys(*p)));
            let (mut plane, kept) = plane_shell(*p, &keys);
            for (line, &i) in plane.lines.iter_mut().zip(&kept) {
                line.events = std::mem::take(&mut lines[i]);
            }
            plane
        })
        .collect()
}

/// Embedded HLO modules, decoded.
pub(crate) fn embedded_module_infos(modules: &[EmbeddedModule<'_>]) -> Vec<HloModuleInfo> {
    use rayon::prelude::*;
    modules
        .par_iter()
        .filter_map(|m| Some(module_info(m.program_id, &m.decode_module().ok()??)))
        .collect()
}

/// One host's model from converted planes (holding the host threads' `host_events`), the
/// embedded modules and extra ones (first wins).
pub(crate) fn host_model(
    host: &str,
    space: &xprof_xspace::XSpace,
    planes: Vec<Plane>,
    infos: Vec<HloModuleInfo>,
    extra_modules: Vec<HloModuleInfo>,
    host_events: HostEvents,
) -> HostSpace {
    let mut modules = HashMap::new();
    for info in infos {
        modules.entry(info.program_id).or_insert(info);
    }
    for m in extra_modules {
        modules.entry(m.program_id).or_insert(m);
    }
    let hostname = space.hostname();
    let skips_grouping = crate::model::skips_grouping(
        space
            .planes()
            .map(|p| (p.name(), p.stat_id("group_id").is_some())),
    );
    HostSpace {
        skips_grouping,
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
        host_events,
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
