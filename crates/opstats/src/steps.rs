//! Steps: XProf's event grouping (`group_events.cc`), step events and the step database
//! (`xplane_to_step_events.cc`, `step_events_to_steps_db.cc`, `event_span.cc`), restated.
//!
//! XProf-compatible steps come only from XProf's own signals:
//! * TPU: the device `Steps` line (XProf takes TPU step markers only from it), grouped by the
//!   events' `group_id`, else in order — [`StepsSource::StepsLine`];
//! * host events that already carry `group_id` stats (captures XProf grouped) —
//!   [`StepsSource::GroupId`];
//! * host root events (`_r` stat) grouped with their descendants and flows (`_p`/`_c`) —
//!   [`StepsSource::HostRoots`].
//!
//! On host/GPU captures a step's time is its longest host marker (explicit `train…`/`test…`
//! names, `step_name` stats, or the group's root); GPU kernels join a step by `group_id` or
//! through the host launch with the same `correlation_id`.
//!
//! When none exists, [`infer_module_steps`] makes one step per `XLA Modules` execution; that is
//! our own inference and is reported separately (`steps_inferred`), never as XProf's steps.

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;

use crate::device::{STEPS, XLA_MODULES, device_span};
use crate::model::{Line, Plane, StatKey};
use crate::tfop::{TfOpCategory, parse_tf_op};

/// Where the steps came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepsSource {
    StepsLine,
    GroupId,
    HostRoots,
    None,
}

impl StepsSource {
    pub fn as_str(self) -> &'static str {
        match self {
            StepsSource::StepsLine => "steps_line",
            StepsSource::GroupId => "group_id",
            StepsSource::HostRoots => "host_roots",
            StepsSource::None => "none",
        }
    }
}

/// XProf's `EventType`, in priority order (a later type wins where events overlap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    Unknown = 0,
    HostCompute = 10,
    HostCompile = 20,
    HostToHost = 30,
    HostToDevice = 40,
    HostPrepare = 50,
    DeviceCollectives = 60,
    HostWaitInput = 70,
    DeviceToDevice = 80,
    DeviceToHost = 90,
    DeviceCompute32 = 100,
    DeviceCompute16 = 110,
    DeviceWaitDevice = 120,
    DeviceWaitHost = 130,
}

/// The nine generic step-breakdown components (XProf `GenericEventType`, ids 1..9).
pub const GENERIC_NAMES: [&str; 9] = [
    "Device compute",
    "Device to device",
    "Device collective communication",
    "Host compute",
    "Kernel launch",
    "Input",
    "Output",
    "Compilation",
    "All others",
];

impl EventType {
    /// Every type in priority order.
    pub const ALL: [EventType; 14] = [
        EventType::Unknown,
        EventType::HostCompute,
        EventType::HostCompile,
        EventType::HostToHost,
        EventType::HostToDevice,
        EventType::HostPrepare,
        EventType::DeviceCollectives,
        EventType::HostWaitInput,
        EventType::DeviceToDevice,
        EventType::DeviceToHost,
        EventType::DeviceCompute32,
        EventType::DeviceCompute16,
        EventType::DeviceWaitDevice,
        EventType::DeviceWaitHost,
    ];
    /// Position in [`EventType::ALL`] (the discriminants are 0, 10, …, 130).
    pub fn rank(self) -> usize {
        self as usize / 10
    }
    /// Index into [`GENERIC_NAMES`].
    pub fn generic(self) -> usize {
        use EventType::*;
        match self {
            DeviceCompute32 | DeviceCompute16 => 0,
            DeviceToDevice | DeviceWaitDevice => 1,
            DeviceCollectives => 2,
            HostCompute => 3,
            HostPrepare => 4,
            HostWaitInput | HostToDevice | DeviceWaitHost => 5,
            DeviceToHost => 6,
            HostCompile => 7,
            Unknown | HostToHost => 8,
        }
    }
}

/// One step on one core (or on the host, for host-only captures).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoreStep {
    pub begin_ps: i64,
    pub duration_ps: u64,
    /// Generic components in ps, indexed like [`GENERIC_NAMES`].
    pub generic_ps: [u64; 9],
    /// TPU: self time per HLO category inside the step (`IDLE` = the rest).
    pub category_ps: BTreeMap<String, u64>,
}

/// One step across cores.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    pub step_num: i64,
    pub name: String,
    /// Core id (plane id; 0 for host-only) → that core's view of the step.
    pub per_core: BTreeMap<i64, CoreStep>,
}

impl Step {
    /// Step time: the longest core's duration.
    pub fn duration_ps(&self) -> u64 {
        self.per_core
            .values()
            .map(|c| c.duration_ps)
            .max()
            .unwrap_or(0)
    }
    pub fn begin_ps(&self) -> i64 {
        self.per_core
            .values()
            .map(|c| c.begin_ps)
            .min()
            .unwrap_or(0)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct StepDb {
    pub source: StepsSource,
    /// TPU: the op database of the complete steps combined over cores (XProf's
    /// `hlo_metrics_db_complete_steps_only`); `None` without TPU steps.
    pub steps_op_db: Option<crate::metrics::OpMetricsDb>,
    /// All well-formed steps, by step number.
    pub steps: Vec<Step>,
    /// For non-TPU captures XProf drops the first and last step when there are more than 5
    /// ("maybe incomplete"); the overview and input pipeline use this list.
    pub complete_steps: Vec<Step>,
}

impl Default for StepDb {
    fn default() -> Self {
        StepDb {
            source: StepsSource::None,
            steps_op_db: None,
            steps: Vec::new(),
            complete_steps: Vec::new(),
        }
    }
}

const DROP_INCOMPLETE_THRESHOLD: usize = 5;

/// `train…`/`test…`/`TraceContext…` without `/` (XProf `IsExplicitHostStepMarker`).
pub fn is_explicit_host_step_marker(name: &str) -> bool {
    (name.starts_with("train") || name.starts_with("test") || name.starts_with("TraceContext"))
        && !name.contains('/')
}

fn is_real_cpu_compute(name: &str) -> bool {
    !(name.starts_with("EagerExecute")
        || name.starts_with("EagerLocalExecute")
        || name.starts_with("EagerKernelExecute")
        || name.starts_with("FunctionRun")
        || is_explicit_host_step_marker(name))
}

fn classify_cpu_event(name: &str) -> EventType {
    let t = parse_tf_op(name);
    let lower = name.to_ascii_lowercase();
    if t.category == TfOpCategory::MemcpyHToD
        || lower.starts_with("infeedenqueue")
        || t.kind.starts_with("InfeedEnqueue")
    {
        EventType::HostToDevice
    } else if t.category == TfOpCategory::MemcpyHToH {
        EventType::HostToHost
    } else if lower.starts_with("iteratorgetnext") {
        EventType::HostWaitInput
    } else {
        EventType::HostCompute
    }
}

/// Group ids of the host plane's events (XProf `GroupTfEvents` for `_r` roots): roots in time
/// order get 0, 1, 2, …; a group spreads to events nested in a grouped event on the same line
/// and to consumers (`_ct`,`_c`) of a grouped producer (`_pt`,`_p`). Returns, per line, the
/// group of each event (`None` = ungrouped), and per group the root's (line, event).
pub struct HostGroups {
    pub event_group: Vec<Vec<Option<i64>>>,
    pub roots: Vec<(usize, usize)>,
}

pub fn group_host_events(plane: &Plane) -> HostGroups {
    let mut event_group: Vec<Vec<Option<i64>>> = plane
        .lines
        .iter()
        .map(|l| vec![None; l.events.len()])
        .collect();
    // Roots and flows in one pass over the events' stats (each pass over millions of events'
    // stats is bound by memory latency). Flows: consumers and producers by context (type,
    // id), as sorted vectors; hash maps of one Vec per context cost an allocation and a cache
    // miss per flow event.
    let mut roots: Vec<(usize, usize)> = Vec::new();
    let mut consumers: Vec<((u64, u64), usize, usize)> = Vec::new();
    let mut producers: Vec<(u64, u64)> = Vec::new();
    for (li, line) in plane.lines.iter().enumerate() {
        for (ei, e) in line.events.iter().enumerate() {
            if e.stats.i64(StatKey::IsRoot).is_some_and(|v| v > 0) {
                roots.push((li, ei));
            }
            if let (Some(t), Some(id)) = (
                e.stats.u64(StatKey::ConsumerType),
                e.stats.u64(StatKey::ConsumerId),
            ) {
                consumers.push(((t, id), li, ei));
            }
            if let (Some(t), Some(id)) = (
                e.stats.u64(StatKey::ProducerType),
                e.stats.u64(StatKey::ProducerId),
            ) {
                producers.push((t, id));
            }
        }
    }
    // Most captures have no roots: skip building the event forest.
    if roots.is_empty() {
        return HostGroups { event_group, roots };
    }
    // Children on the same line (direct nesting), as one flat adjacency list per line
    // (`offsets[p]..offsets[p + 1]` of `kids` are p's children): a Vec per event cost one
    // allocation per parent and 24 bytes per event on captures with millions of events.
    // Lines are independent: built in parallel.
    let children: Vec<(Vec<usize>, Vec<usize>)> = plane
        .lines
        .par_iter()
        .map(|line| {
            let n = line.events.len();
            // Start ascending, longer first at the same start, then index: the order of the
            // former stable sort by (start, duration desc), without indirect comparisons.
            // Lines are usually stored in this order already: then the events are visited
            // as stored, without building and sorting the order.
            let key = |e: &crate::model::Event| (e.start_ps, std::cmp::Reverse(e.duration_ps));
            let sorted = line.events.is_sorted_by_key(key);
            let order: Vec<usize> = if sorted {
                Vec::new()
            } else {
                let mut o: Vec<(i64, std::cmp::Reverse<i64>, usize)> = line
                    .events
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (e.start_ps, std::cmp::Reverse(e.duration_ps), i))
                    .collect();
                o.sort_unstable();
                o.into_iter().map(|(_, _, i)| i).collect()
            };
            let mut parent = vec![usize::MAX; n];
            // (start, end, index) of the open ancestors.
            let mut stack: Vec<(i64, i64, usize)> = Vec::new();
            let mut visit = |i: usize| {
                let start = line.events[i].start_ps;
                let end = line.events[i].end_ps();
                while let Some(&(ps, pe, _)) = stack.last() {
                    if ps <= start && end <= pe {
                        break;
                    }
                    stack.pop();
                }
                if let Some(&(_, _, t)) = stack.last() {
                    parent[i] = t;
                }
                stack.push((start, end, i));
            };
            if sorted {
                (0..n).for_each(&mut visit);
            } else {
                order.iter().for_each(|&i| visit(i));
            }
            let mut offsets = vec![0usize; n + 1];
            for &p in parent.iter().filter(|&&p| p != usize::MAX) {
                offsets[p + 1] += 1;
            }
            for k in 0..n {
                offsets[k + 1] += offsets[k];
            }
            let mut fill = offsets.clone();
            let mut kids = vec![0usize; offsets[n]];
            for (i, &p) in parent.iter().enumerate() {
                if p != usize::MAX {
                    kids[fill[p]] = i;
                    fill[p] += 1;
                }
            }
            (offsets, kids)
        })
        .collect();
    consumers.sort_unstable();
    producers.sort_unstable();
    // XProf does not link a context with 64+ producers and 64+ consumers (an id reused by
    // unrelated events).
    let num_producers = |k: (u64, u64)| {
        producers.partition_point(|p| *p <= k) - producers.partition_point(|p| *p < k)
    };
    let mut kept = Vec::with_capacity(consumers.len());
    for run in consumers.chunk_by(|a, b| a.0 == b.0) {
        if !(run.len() >= 64 && num_producers(run[0].0) >= 64) {
            kept.extend_from_slice(run);
        }
    }
    let consumers = kept;
    let consumers_of = |k: (u64, u64)| {
        let from = consumers.partition_point(|c| c.0 < k);
        let to = from + consumers[from..].partition_point(|c| c.0 == k);
        &consumers[from..to]
    };
    // Higher root levels group first; within a level, earlier roots first.
    let level = |&(li, ei): &(usize, usize)| {
        plane.lines[li].events[ei]
            .stats
            .i64(StatKey::IsRoot)
            .unwrap_or(1)
    };
    roots.sort_by(|a, b| {
        level(b)
            .cmp(&level(a))
            .then_with(|| {
                plane.lines[a.0].events[a.1]
                    .start_ps
                    .cmp(&plane.lines[b.0].events[b.1].start_ps)
            })
            .then(a.cmp(b))
    });
    let mut kept_roots = Vec::new();
    for &(li, ei) in &roots {
        if event_group[li][ei].is_some() {
            continue; // nested in an earlier root's group
        }
        let gid = kept_roots.len() as i64;
        kept_roots.push((li, ei));
        let mut work = vec![(li, ei)];
        while let Some((l, e)) = work.pop() {
            if event_group[l][e].is_some() {
                continue;
            }
            event_group[l][e] = Some(gid);
            // Which events a root reaches does not depend on the visiting order.
            let (offsets, kids) = &children[l];
            work.extend(kids[offsets[e]..offsets[e + 1]].iter().map(|&c| (l, c)));
            let ev = &plane.lines[l].events[e];
            if let (Some(t), Some(id)) = (
                ev.stats.u64(StatKey::ProducerType),
                ev.stats.u64(StatKey::ProducerId),
            ) {
                work.extend(consumers_of((t, id)).iter().map(|&(_, l, e)| (l, e)));
            }
        }
    }
    HostGroups {
        event_group,
        roots: kept_roots,
    }
}

/// Non-overlapped breakdown of typed spans clipped to `[begin, end]` (XProf
/// `ToNonOverlappedEvents` + `ConvertStepDetailsToStepInfo`): where spans overlap the highest
/// type wins; uncovered time is `Unknown`.
pub fn generic_breakdown(spans: &[(EventType, i64, i64)], begin: i64, end: i64) -> [u64; 9] {
    let mut out = [0u64; 9];
    let mut bounds: Vec<(i64, bool, EventType)> = Vec::with_capacity(spans.len() * 2);
    for &(t, b, e) in spans {
        bounds.push((b, true, t));
        bounds.push((e, false, t));
    }
    // Ascending time; at a tie, ends before starts. The order among equal bounds does not
    // matter: the windows between them are empty.
    bounds.sort_unstable_by_key(|b| (b.0, b.1));
    // Open spans per type, indexed by priority (a fixed array instead of an ordered map: this
    // runs once per event bound).
    let mut counts = [0i64; EventType::ALL.len()];
    let mut covered = 0u64;
    for w in bounds.windows(2) {
        let (t0, start, ty) = w[0];
        let c = &mut counts[ty.rank()];
        *c += if start { 1 } else { -1 };
        let top = counts
            .iter()
            .rposition(|c| *c > 0)
            .map_or(EventType::Unknown, |r| EventType::ALL[r]);
        let (s, e) = (t0.max(begin), w[1].0.min(end));
        if e > s {
            let len = crate::nesting::span_len(s, e);
            out[top.generic()] = out[top.generic()].saturating_add(len);
            covered = covered.saturating_add(len);
        }
    }
    let dur = crate::nesting::span_len(begin, end);
    if covered < dur {
        let u = EventType::Unknown.generic();
        out[u] = out[u].saturating_add(dur - covered);
    }
    out
}

/// What a host event's name says about it (see [`host_steps`]).
#[derive(Clone, Copy)]
struct NameClass {
    /// [`is_explicit_host_step_marker`].
    marker: bool,
    /// [`is_real_cpu_compute`].
    real_compute: bool,
    /// [`classify_cpu_event`].
    cpu: EventType,
    /// `ExecutorState::Process…` (any case): host-side preparation of device work.
    executor_process: bool,
}

impl NameClass {
    fn of(name: &str) -> Self {
        NameClass {
            marker: is_explicit_host_step_marker(name),
            real_compute: is_real_cpu_compute(name),
            cpu: classify_cpu_event(name),
            executor_process: name
                .to_ascii_lowercase()
                .starts_with("executorstate::process"),
        }
    }
}

/// XProf `ClassifyGpuEvent`.
fn classify_gpu_event(name: &str) -> EventType {
    let t = parse_tf_op(name);
    let lower = name.to_ascii_lowercase();
    match t.category {
        TfOpCategory::MemcpyHToD => EventType::HostToDevice,
        TfOpCategory::MemcpyDToH => EventType::DeviceToHost,
        TfOpCategory::MemcpyDToD => EventType::DeviceToDevice,
        _ if lower.starts_with("nccl") => EventType::DeviceCollectives,
        _ if name.contains("half") || name.contains("fp16") => EventType::DeviceCompute16,
        _ => EventType::DeviceCompute32,
    }
}

/// The groups of the host plane's events: taken from `group_id` stats when the capture
/// already carries them (XProf wrote them), else computed from `_r` roots and flows.
/// Returns (per line, per event group), the root event of each computed group, the source.
/// Per line, per event: the event's group.
type EventGroups = Vec<Vec<Option<i64>>>;

fn host_event_groups(plane: &Plane) -> (EventGroups, Vec<(usize, usize)>, StepsSource) {
    // Look before building: most captures carry no `group_id`, and a table per event costs
    // 16 bytes per event while the computed grouping below builds its own.
    let has_group_ids = plane.lines.iter().any(|l| {
        l.events
            .iter()
            .any(|e| e.stats.i64(StatKey::GroupId).is_some())
    });
    if has_group_ids {
        let pre: Vec<Vec<Option<i64>>> = plane
            .lines
            .iter()
            .map(|l| {
                l.events
                    .iter()
                    .map(|e| e.stats.i64(StatKey::GroupId))
                    .collect()
            })
            .collect();
        return (pre, Vec::new(), StepsSource::GroupId);
    }
    let g = group_host_events(plane);
    let src = if g.roots.is_empty() {
        StepsSource::None
    } else {
        StepsSource::HostRoots
    };
    (g.event_group, g.roots, src)
}

/// Host (and GPU) steps: XProf `ConvertHostThreadsXPlaneToStepEvents`,
/// `ConvertDeviceTraceXLineToStepEvents` (GPU) and `ConvertStepDetailsToStepInfo`.
/// GPU kernels join a step through their own `group_id`, else through the host kernel launch
/// with the same `correlation_id`.
fn host_steps(plane: &Plane, gpus: &[&Plane]) -> (StepsSource, Vec<Step>) {
    let (groups, roots, source) = host_event_groups(plane);
    if source == StepsSource::None {
        return (source, Vec::new());
    }
    // Per line, per event: is it a group's root (a flag per event beats hashing each one).
    let mut is_root: Vec<Vec<bool>> = plane
        .lines
        .iter()
        .map(|l| vec![false; l.events.len()])
        .collect();
    for &(li, ei) in &roots {
        if let Some(f) = is_root.get_mut(li).and_then(|l| l.get_mut(ei)) {
            *f = true;
        }
    }
    // Names repeat across millions of events: classify each metadata's name once.
    let classes: Vec<NameClass> = plane
        .metadata
        .iter()
        .map(|m| NameClass::of(&m.name))
        .collect();
    // Device step events (GPU).
    let mut device_spans: BTreeMap<i64, Vec<(EventType, i64, i64)>> = BTreeMap::new();
    if !gpus.is_empty() {
        let mut launch_group: HashMap<i64, i64> = HashMap::new();
        for (li, line) in plane.lines.iter().enumerate() {
            for (ei, e) in line.events.iter().enumerate() {
                if let (Some(g), Some(c)) = (groups[li][ei], e.stats.i64(StatKey::CorrelationId)) {
                    launch_group.insert(c, g);
                }
            }
        }
        for p in gpus {
            for line in p.lines.iter().filter(|l| !(10_000..20_000).contains(&l.id)) {
                for e in &line.events {
                    let Some(c) = e.stats.i64(StatKey::CorrelationId).filter(|c| *c >= 0) else {
                        continue;
                    };
                    let Some(g) = e
                        .stats
                        .i64(StatKey::GroupId)
                        .or_else(|| launch_group.get(&c).copied())
                    else {
                        continue;
                    };
                    device_spans.entry(g).or_default().push((
                        classify_gpu_event(&p.meta(e).name),
                        e.start_ps,
                        e.end_ps(),
                    ));
                }
            }
        }
    }
    let has_device = !gpus.is_empty();
    // (begin, end, name) of the longest host marker per group.
    let mut markers: BTreeMap<i64, (i64, i64, String)> = BTreeMap::new();
    let mut spans: BTreeMap<i64, Vec<(EventType, i64, i64)>> = BTreeMap::new();
    for (li, line) in plane.lines.iter().enumerate() {
        for (ei, e) in line.events.iter().enumerate() {
            let Some(gid) = groups[li][ei] else { continue };
            if has_device && !device_spans.contains_key(&gid) {
                continue;
            }
            let name = &plane.meta(e).name;
            let class = classes
                .get(e.metadata as usize)
                .copied()
                .unwrap_or_else(|| NameClass::of(name));
            let step_name = e.stats.str(StatKey::StepName);
            if class.marker || step_name.is_some() || is_root[li][ei] {
                let label = match (step_name, e.stats.i64(StatKey::StepNum)) {
                    (Some(s), _) => s.to_string(),
                    (None, Some(n)) => format!("{name} {n}"),
                    (None, None) => format!("{name} {gid}"),
                };
                let m = markers
                    .entry(gid)
                    .or_insert((e.start_ps, e.end_ps(), label.clone()));
                if e.duration_ps as i128 > m.1 as i128 - m.0 as i128 {
                    *m = (e.start_ps, e.end_ps(), label);
                }
            } else if class.real_compute {
                let t = if has_device
                    && (e.stats.has(StatKey::CorrelationId) || class.executor_process)
                {
                    EventType::HostPrepare
                } else {
                    class.cpu
                };
                spans
                    .entry(gid)
                    .or_default()
                    .push((t, e.start_ps, e.end_ps()));
            }
        }
    }
    let mut out = Vec::new();
    for (gid, (b, e, name)) in markers {
        let mut s = spans.remove(&gid).unwrap_or_default();
        s.extend(device_spans.remove(&gid).unwrap_or_default());
        let generic = generic_breakdown(&s, b, e);
        // Well-formed steps only: device compute (with a device) or host compute (without).
        let well_formed = if has_device {
            s.iter()
                .any(|x| matches!(x.0, EventType::DeviceCompute32 | EventType::DeviceCompute16))
        } else {
            s.iter().any(|x| x.0 == EventType::HostCompute)
        };
        if !well_formed || e <= b {
            continue;
        }
        let mut per_core = BTreeMap::new();
        per_core.insert(
            0,
            CoreStep {
                begin_ps: b,
                duration_ps: crate::nesting::span_len(b, e),
                generic_ps: generic,
                category_ps: BTreeMap::new(),
            },
        );
        out.push(Step {
            step_num: gid,
            name,
            per_core,
        });
    }
    (source, out)
}

/// Step id → (begin, end, name) on one core.
type StepSpans = BTreeMap<i64, (i64, i64, String)>;

/// Host groups a device event can join: producer context (`_pt`, `_p`) of a grouped host
/// event → (group id, group name). Built from XProf's host grouping (`_r` roots, flows).
pub struct HostContexts {
    by_context: HashMap<(u64, u64), (i64, String)>,
    /// Number of host groups (device-only groups are numbered after them, as in XProf).
    pub num_groups: i64,
}

pub fn host_contexts(host: Option<&Plane>) -> HostContexts {
    let mut by_context = HashMap::new();
    let Some(plane) = host else {
        return HostContexts {
            by_context,
            num_groups: 0,
        };
    };
    let (groups, roots, source) = host_event_groups(plane);
    if source == StepsSource::None {
        return HostContexts {
            by_context,
            num_groups: 0,
        };
    }
    let mut names: HashMap<i64, String> = HashMap::new();
    for (gid, &(li, ei)) in roots.iter().enumerate() {
        let e = &plane.lines[li].events[ei];
        let name = &plane.meta(e).name;
        names.insert(
            gid as i64,
            match e.stats.i64(StatKey::StepNum) {
                Some(n) => format!("{name} {n}"),
                None => format!("{name} {gid}"),
            },
        );
    }
    let mut max_gid = -1;
    for (li, line) in plane.lines.iter().enumerate() {
        for (ei, e) in line.events.iter().enumerate() {
            let Some(g) = groups[li][ei] else { continue };
            max_gid = max_gid.max(g);
            if let (Some(t), Some(id)) = (
                e.stats.u64(StatKey::ProducerType),
                e.stats.u64(StatKey::ProducerId),
            ) {
                let name = e
                    .stats
                    .str(StatKey::StepName)
                    .map(str::to_string)
                    .or_else(|| names.get(&g).cloned())
                    .unwrap_or_else(|| g.to_string());
                by_context.entry((t, id)).or_insert((g, name));
            }
        }
    }
    HostContexts {
        by_context,
        num_groups: max_gid + 1,
    }
}

/// One `Steps` event of a core: its group (id, name) if it has one, begin, end.
type CoreStepEvent = (Option<(i64, String)>, i64, i64);

/// Step spans of one TPU core, from its `Steps` line — XProf takes TPU step markers only from
/// there. A step's group is its `group_id` stat; else the host group whose producer context
/// is consumed (`_ct`, `_c`) by the step event or an event inside it (XProf's grouping);
/// else `None` (grouped later in lock step).
fn tpu_core_step_spans(plane: &Plane, host: &HostContexts) -> Option<Vec<CoreStepEvent>> {
    let line = plane.line(STEPS).filter(|l| !l.events.is_empty())?;
    // Consumer contexts on this core, by plain start time.
    let mut consumers: Vec<(i64, i64, (u64, u64))> = Vec::new();
    if !host.by_context.is_empty() {
        for l in &plane.lines {
            for e in &l.events {
                if let (Some(t), Some(id)) = (
                    e.stats.u64(StatKey::ConsumerType),
                    e.stats.u64(StatKey::ConsumerId),
                ) {
                    consumers.push((e.start_ps, e.end_ps(), (t, id)));
                }
            }
        }
        consumers.sort_unstable();
    }
    let mut out = Vec::new();
    for e in &line.events {
        let (b, d) = device_span(e);
        let group = match e.stats.i64(StatKey::GroupId) {
            Some(g) => Some((g, g.to_string())),
            None => {
                let (pb, pe) = (e.start_ps, e.end_ps());
                let lo = consumers.partition_point(|c| c.0 < pb);
                consumers[lo..]
                    .iter()
                    .take_while(|c| c.0 <= pe)
                    .filter(|c| c.1 <= pe)
                    .find_map(|c| host.by_context.get(&c.2).cloned())
            }
        };
        out.push((group, b, b.saturating_add(d)));
    }
    Some(out)
}

fn tpu_steps(
    tpu: &[&Plane],
    host: Option<&Plane>,
) -> Option<(StepsSource, Vec<Step>, crate::metrics::OpMetricsDb)> {
    let contexts = host_contexts(host);
    let raw: Vec<(i64, Vec<CoreStepEvent>)> = tpu
        .iter()
        .filter_map(|p| tpu_core_step_spans(p, &contexts).map(|v| (p.id, v)))
        .collect();
    if raw.is_empty() {
        return None;
    }
    // When no step of any core joined a group, XProf groups device steps in lock step, numbered
    // after the host groups.
    let any_grouped = raw.iter().any(|(_, v)| v.iter().any(|x| x.0.is_some()));
    let mut per_core: Vec<(i64, StepsSource, StepSpans)> = Vec::new();
    for (core, v) in raw {
        let mut m: StepSpans = BTreeMap::new();
        for (i, (g, b, e)) in v.into_iter().enumerate() {
            let (id, name) = match g {
                Some(x) => x,
                // Ungrouped step events are discarded once others are grouped (XProf
                // `MergeHostSteps`), else numbered in order.
                None if any_grouped => continue,
                None => {
                    let id = contexts.num_groups + i as i64;
                    (id, id.to_string())
                }
            };
            // Consecutive step events of one group are one step.
            let ent = m.entry(id).or_insert((b, e, name));
            ent.0 = ent.0.min(b);
            ent.1 = ent.1.max(e);
        }
        per_core.push((core, StepsSource::StepsLine, m));
    }
    if per_core.iter().all(|c| c.2.is_empty()) {
        return None;
    }
    let source = per_core[0].1;
    // Multi-core TPU: keep only steps every core saw (XProf intersects).
    let mut ids: Vec<i64> = per_core[0].2.keys().copied().collect();
    ids.retain(|id| per_core.iter().all(|(_, _, m)| m.contains_key(id)));
    // Per core, one pass: the op database of each kept step.
    let mut core_dbs: HashMap<i64, HashMap<i64, crate::metrics::OpMetricsDb>> = HashMap::new();
    for (core, _, m) in &per_core {
        let windows: Vec<(i64, i64, i64)> = ids.iter().map(|id| (*id, m[id].0, m[id].1)).collect();
        if let Some(plane) = tpu.iter().find(|p| p.id == *core) {
            core_dbs.insert(*core, crate::device::tensor_core_step_dbs(plane, &windows));
        }
    }
    let mut all = crate::metrics::DbCombiner::new();
    let mut steps = Vec::new();
    for id in ids {
        let mut step = Step {
            step_num: id,
            name: per_core[0].2[&id].2.clone(),
            per_core: BTreeMap::new(),
        };
        for (core, _, m) in &per_core {
            let (b, e, _) = m[&id];
            let dur = crate::nesting::span_len(b, e);
            // Self time per category inside the step; IDLE = the rest.
            let mut cats: BTreeMap<String, u64> = BTreeMap::new();
            if let Some(db) = core_dbs.get(core).and_then(|d| d.get(&id)) {
                for op in db.metrics.iter().filter(|m| !m.is_idle()) {
                    let v = cats.entry(op.category.clone()).or_insert(0);
                    *v = v.saturating_add(op.self_time_ps);
                }
                all.combine(db, true);
            }
            let busy: u64 = cats.values().fold(0, |a, b| a.saturating_add(*b));
            cats.insert("IDLE".into(), dur.saturating_sub(busy));
            step.per_core.insert(
                *core,
                CoreStep {
                    begin_ps: b,
                    duration_ps: dur,
                    generic_ps: [0; 9],
                    category_ps: cats,
                },
            );
        }
        steps.push(step);
    }
    Some((source, steps, all.finish()))
}

/// The step database of one host. `tpu` = TensorCore planes, `gpus` = GPU planes, `host` =
/// `/host:CPU`.
pub fn step_db(tpu: &[&Plane], gpus: &[&Plane], host: Option<&Plane>) -> StepDb {
    if !tpu.is_empty() {
        // TPU step lines already exclude incomplete steps.
        return match tpu_steps(tpu, host) {
            Some((source, steps, db)) => StepDb {
                source,
                steps_op_db: Some(db),
                complete_steps: steps.clone(),
                steps,
            },
            None => StepDb::default(),
        };
    }
    let Some(h) = host else {
        return StepDb::default();
    };
    let (source, steps) = host_steps(h, gpus);
    if steps.is_empty() {
        return StepDb::default();
    }
    let mut complete = steps.clone();
    if complete.len() > DROP_INCOMPLETE_THRESHOLD {
        complete.remove(0);
        complete.pop();
    }
    StepDb {
        source,
        steps_op_db: None,
        steps,
        complete_steps: complete,
    }
}

/// Our fallback when XProf finds no steps: one step per `XLA Modules` execution of the first
/// device plane (device clock). Never mixed into XProf-compatible fields.
pub fn infer_module_steps(first_device: Option<&Plane>) -> Vec<(i64, u64, String)> {
    let Some(line) = first_device.and_then(|p| p.line(XLA_MODULES).map(|l| (p, l))) else {
        return Vec::new();
    };
    let (plane, line): (&Plane, &Line) = line;
    let mut v: Vec<(i64, u64, String)> = line
        .events
        .iter()
        .map(|e| {
            let (b, d) = device_span(e);
            (b, d.max(0) as u64, plane.meta(e).name.clone())
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_groups_follow_nesting_and_flows_whatever_the_stored_order() {
        use crate::model::{Event, StatValue, Stats};
        let ev = |start: i64, dur: i64, stats: Vec<(StatKey, StatValue)>| Event {
            start_ps: start,
            duration_ps: dur,
            stats: Stats::from(stats),
            ..Default::default()
        };
        let root = |n: i64| vec![(StatKey::IsRoot, StatValue::Int(n))];
        let producer = vec![
            (StatKey::ProducerType, StatValue::Uint(1)),
            (StatKey::ProducerId, StatValue::Uint(7)),
        ];
        let consumer = vec![
            (StatKey::ConsumerType, StatValue::Uint(1)),
            (StatKey::ConsumerId, StatValue::Uint(7)),
        ];
        // Line 0: step roots [0,100] and [200,100]; [10,20] nested in the first produces
        // context 7, consumed on line 1 by [50,500] (which nests [60,5]); [150,10] is alone.
        let line0 = vec![
            ev(0, 100, root(1)),
            ev(10, 20, producer),
            ev(150, 10, vec![]),
            ev(200, 100, root(1)),
        ];
        let line1 = vec![ev(50, 500, consumer), ev(60, 5, vec![])];
        let plane = |l0: Vec<Event>, l1: Vec<Event>| Plane {
            lines: vec![
                Line {
                    events: l0,
                    ..Default::default()
                },
                Line {
                    id: 1,
                    events: l1,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let sorted = group_host_events(&plane(line0.clone(), line1.clone()));
        assert_eq!(sorted.roots, vec![(0, 0), (0, 3)]);
        assert_eq!(
            sorted.event_group,
            vec![
                vec![Some(0), Some(0), None, Some(1)],
                vec![Some(0), Some(0)]
            ]
        );
        // The same events stored in reverse: the same groups, per stored position.
        let rev = |mut v: Vec<Event>| {
            v.reverse();
            v
        };
        let g = group_host_events(&plane(rev(line0), rev(line1)));
        assert_eq!(g.roots, vec![(0, 3), (0, 0)]);
        assert_eq!(
            g.event_group,
            vec![
                vec![Some(1), None, Some(0), Some(0)],
                vec![Some(0), Some(0)]
            ]
        );
    }

    #[test]
    fn event_type_ranks_follow_the_priority_order() {
        for (r, t) in EventType::ALL.iter().enumerate() {
            assert_eq!(t.rank(), r);
        }
        assert!(EventType::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn breakdown_takes_the_highest_type_and_fills_gaps_with_unknown() {
        let spans = vec![
            (EventType::HostCompute, 0, 60),
            (EventType::HostWaitInput, 40, 80),
            (EventType::HostCompute, 150, 300),
        ];
        let g = generic_breakdown(&spans, 0, 200);
        assert_eq!(g[3], 40 + 50); // host compute [0,40] + [150,200]
        assert_eq!(g[5], 40); // input [40,80]
        assert_eq!(g[8], 70); // gap [80,150]
        assert_eq!(g.iter().sum::<u64>(), 200);
    }
}
