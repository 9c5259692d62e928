//! XProf's `memory_profile` view: the allocator timeline of one host, from the
//! `MemoryAllocation` / `MemoryDeallocation` events of its `/host:CPU` plane
//! (`xprof/convert/xplane_to_memory_profile.cc`).
//!
//! Semantics follow XProf, with two choices made deterministic where XProf's are not:
//!
//! * **Peak.** XProf keeps the *last* snapshot whose `stack + heap` is `>=` the running peak,
//!   in event visit order (line by line). We apply the same `>=` rule to the snapshots sorted
//!   by time (stable, so equal times keep visit order): among tied peaks the **latest in time**
//!   wins. On a capture whose allocator events sit on one line both orders are the same.
//! * **Active allocations at the peak.** XProf collects them in a hash map and merges identical
//!   rows after an unstable sort, so which snapshot a merged row points at varies between runs
//!   (the oracle README notes it). We order identical rows latest-first, so a merged row
//!   points at its latest snapshot.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};
use xprof_xspace::{Plane, XSpace, names};

/// XProf's default number of points of the sampled timeline.
pub const MAX_TIMELINE_SNAPSHOTS: usize = 1000;

/// What the capture option must record for this view to have data.
pub const CAPTURE_FLAGS: &[&str] = &[
    "a runtime that emits allocator events (TPU PJRT, the GPU BFC allocator, TensorFlow)",
    "ProfileOptions.host_tracer_level>=2 (jax.profiler.ProfileOptions / tf.profiler.experimental.ProfilerOptions(host_tracer_level=2))",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Activity {
    #[default]
    Unknown,
    Allocation,
    Deallocation,
}

impl Activity {
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Unknown => "UNKNOWN_ACTIVITY",
            Activity::Allocation => "ALLOCATION",
            Activity::Deallocation => "DEALLOCATION",
        }
    }
}

/// `MemoryAggregationStats`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AggregationStats {
    pub stack_reserved_bytes: i64,
    pub heap_allocated_bytes: i64,
    pub free_memory_bytes: i64,
    pub fragmentation: f64,
    pub peak_bytes_in_use: i64,
}

impl AggregationStats {
    /// Bytes in use: stack reservation + heap allocations.
    pub fn in_use(&self) -> i64 {
        self.stack_reserved_bytes
            .saturating_add(self.heap_allocated_bytes)
    }
}

/// `MemoryActivityMetadata`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ActivityMetadata {
    pub memory_activity: Activity,
    pub requested_bytes: i64,
    pub allocation_bytes: i64,
    pub address: u64,
    pub tf_op_name: String,
    pub step_id: i64,
    pub region_type: String,
    pub data_type: String,
    pub tensor_shape: String,
}

/// `MemoryProfileSnapshot`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The event's offset on its line (XProf uses the line-relative offset).
    pub time_offset_ps: i64,
    pub stats: AggregationStats,
    pub meta: ActivityMetadata,
    /// Which aggregation stats the event carried (XProf reads an absent one as 0).
    pub present: Present,
}

/// Whether an allocator event carried each aggregation stat.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Present {
    pub stack_reserved: bool,
    pub heap_allocated: bool,
    pub free_memory: bool,
    pub fragmentation: bool,
}

/// `MemoryProfileSummary`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// `peak_bytes_in_use` of the latest event: the allocator's own lifetime peak.
    pub peak_bytes_usage_lifetime: i64,
    /// The snapshot at the peak of `stack + heap` in the window, with `peak_bytes_in_use`
    /// replaced by that sum.
    pub peak_stats: AggregationStats,
    pub peak_stats_time_ps: i64,
    /// stack + heap + free at the peak.
    pub memory_capacity: i64,
    /// Which stats the peak snapshot's event carried.
    pub peak_present: Present,
}

/// `ActiveAllocation`: a row of the breakdown at the peak.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ActiveAllocation {
    /// Index into [`AllocatorProfile::peak_snapshots`], or -1 for special rows.
    pub snapshot_index: i64,
    /// Index into [`AllocatorProfile::special_allocations`], or -1.
    pub special_index: i64,
    pub num_occurrences: i64,
}

/// One allocator's (memory id's) profile.
#[derive(Clone, Debug, Default)]
pub struct AllocatorProfile {
    pub memory_id: String,
    /// Every snapshot, sorted by time, step ids and deallocation metadata filled in.
    pub snapshots: Vec<Snapshot>,
    pub summary: Summary,
    /// The snapshots the active allocations refer to (XProf's `memoryProfileSnapshots`
    /// after `SaveActiveAllocationSnapshots`).
    pub peak_snapshots: Vec<Snapshot>,
    pub active_allocations: Vec<ActiveAllocation>,
    pub special_allocations: Vec<ActivityMetadata>,
    /// At most [`MAX_TIMELINE_SNAPSHOTS`] points, max-box filtered.
    pub sampled_timeline: Vec<Snapshot>,
    /// The step the peak belongs to.
    pub peak_step_id: i64,
}

/// An `XLA Modules` event of a TPU plane.
#[derive(Clone, Debug, PartialEq)]
pub struct HloModuleSpan {
    pub id: i64,
    pub name: String,
    pub start_time_ps: i64,
    pub end_time_ps: i64,
    pub plane_name: String,
}

/// The whole view for one host.
#[derive(Clone, Debug, Default)]
pub struct MemoryProfile {
    /// Whether the host has a `/host:CPU` plane at all (XProf prints nothing without one).
    pub has_host_plane: bool,
    /// Number of allocator events read.
    pub num_events: usize,
    pub allocators: BTreeMap<String, AllocatorProfile>,
    pub hlo_modules: Vec<HloModuleSpan>,
}

/// Only the planes this view reads, for [`xprof_xspace::ReadOptions::only_planes`].
pub fn wanted_plane(name: &str) -> bool {
    name == names::plane::HOST_CPU || name.starts_with(names::plane::TPU_PREFIX)
}

/// TensorFlow `DataType` enum → XProf's `DataTypeString`.
pub fn data_type_string(v: i64) -> String {
    const NAMES: [&str; 31] = [
        "INVALID",
        "float",
        "double",
        "int32",
        "uint8",
        "int16",
        "int8",
        "string",
        "complex64",
        "int64",
        "bool",
        "qint8",
        "quint8",
        "qint32",
        "bfloat16",
        "qint16",
        "quint16",
        "uint16",
        "complex128",
        "half",
        "resource",
        "variant",
        "uint32",
        "uint64",
        "float8_e5m2",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e4m3b11fnuz",
        "float8_e5m2fnuz",
        "int4",
        "uint4",
    ];
    // Reference types are the base type + 100 (`kDataTypeRefOffset`).
    if v > 100 {
        if let Some(n) = usize::try_from(v - 100).ok().and_then(|i| NAMES.get(i)) {
            return format!("{n}_ref");
        }
    } else if let Some(n) = usize::try_from(v).ok().and_then(|i| NAMES.get(i)) {
        return (*n).to_string();
    }
    format!("unknown dtype enum ({v})")
}

/// Stat ids of the plane, resolved once by name (ids differ per plane).
struct StatIds {
    index_on_host: Option<i64>,
    device_ordinal: Option<i64>,
    allocator_name: Option<i64>,
    bytes_reserved: Option<i64>,
    bytes_allocated: Option<i64>,
    bytes_available: Option<i64>,
    fragmentation: Option<i64>,
    peak_bytes_in_use: Option<i64>,
    requested_bytes: Option<i64>,
    allocation_bytes: Option<i64>,
    addr: Option<i64>,
    tf_op: Option<i64>,
    group_id: Option<i64>,
    region_type: Option<i64>,
    data_type: Option<i64>,
    shape: Option<i64>,
}

impl StatIds {
    fn new(p: &Plane<'_>) -> Self {
        StatIds {
            index_on_host: p.stat_id("index_on_host"),
            device_ordinal: p.stat_id("device_ordinal"),
            allocator_name: p.stat_id("allocator_name"),
            bytes_reserved: p.stat_id(names::stat::BYTES_RESERVED),
            bytes_allocated: p.stat_id(names::stat::BYTES_ALLOCATED),
            bytes_available: p.stat_id(names::stat::BYTES_AVAILABLE),
            fragmentation: p.stat_id("fragmentation"),
            peak_bytes_in_use: p.stat_id(names::stat::PEAK_BYTES_IN_USE),
            requested_bytes: p.stat_id(names::stat::REQUESTED_BYTES),
            allocation_bytes: p.stat_id(names::stat::ALLOCATION_BYTES),
            addr: p.stat_id("addr"),
            tf_op: p.stat_id(names::stat::TF_OP),
            group_id: p.stat_id(names::stat::GROUP_ID),
            region_type: p.stat_id("region_type"),
            data_type: p.stat_id("data_type"),
            shape: p.stat_id("shape"),
        }
    }
}

/// Build the view from one host's XSpace.
pub fn build(space: &XSpace) -> MemoryProfile {
    let mut out = MemoryProfile::default();
    if let Some(plane) = space.plane(names::plane::HOST_CPU) {
        out.has_host_plane = true;
        collect(&plane, &mut out);
    }
    out.hlo_modules = hlo_modules(space);
    out
}

fn collect(plane: &Plane<'_>, out: &mut MemoryProfile) {
    let mut alloc_ids = Vec::new();
    let mut dealloc_ids = Vec::new();
    for m in plane.event_metadata_iter() {
        match m.name() {
            names::event::MEMORY_ALLOCATION => alloc_ids.push(m.key()),
            names::event::MEMORY_DEALLOCATION => dealloc_ids.push(m.key()),
            _ => {}
        }
    }
    if alloc_ids.is_empty() && dealloc_ids.is_empty() {
        return;
    }
    let ids = StatIds::new(plane);
    let is = |id: Option<i64>, x: i64| id == Some(x);
    // Snapshots per memory id, in visit order (plane's lines, then each line's events).
    let mut raw: BTreeMap<String, Vec<Snapshot>> = BTreeMap::new();
    for line in plane.lines() {
        for ev in line.events() {
            let mid = ev.metadata_id();
            let activity = if alloc_ids.contains(&mid) {
                Activity::Allocation
            } else if dealloc_ids.contains(&mid) {
                Activity::Deallocation
            } else {
                continue;
            };
            let mut s = Snapshot {
                time_offset_ps: ev.offset_ps(),
                present: Present::default(),
                stats: AggregationStats::default(),
                meta: ActivityMetadata {
                    memory_activity: activity,
                    step_id: -1,
                    ..Default::default()
                },
            };
            let mut memory_id = String::new();
            for st in ev.stats() {
                let k = st.metadata_id;
                let int = || st.int().unwrap_or(0);
                let text = || st.str().unwrap_or("").to_string();
                if is(ids.index_on_host, k) || is(ids.device_ordinal, k) {
                    memory_id = int().to_string();
                } else if is(ids.allocator_name, k) {
                    memory_id = text();
                } else if is(ids.bytes_reserved, k) {
                    s.stats.stack_reserved_bytes = int();
                    s.present.stack_reserved = true;
                } else if is(ids.bytes_allocated, k) {
                    s.stats.heap_allocated_bytes = int();
                    s.present.heap_allocated = true;
                } else if is(ids.bytes_available, k) {
                    s.stats.free_memory_bytes = int();
                    s.present.free_memory = true;
                } else if is(ids.fragmentation, k) {
                    s.stats.fragmentation = st.double().unwrap_or(0.0);
                    s.present.fragmentation = true;
                } else if is(ids.peak_bytes_in_use, k) {
                    s.stats.peak_bytes_in_use = int();
                } else if is(ids.requested_bytes, k) {
                    s.meta.requested_bytes = int();
                } else if is(ids.allocation_bytes, k) {
                    s.meta.allocation_bytes = int();
                } else if is(ids.addr, k) {
                    s.meta.address = int() as u64;
                } else if is(ids.tf_op, k) {
                    s.meta.tf_op_name = text();
                } else if is(ids.group_id, k) {
                    s.meta.step_id = int();
                } else if is(ids.region_type, k) {
                    s.meta.region_type = text();
                } else if is(ids.data_type, k) {
                    s.meta.data_type = data_type_string(int());
                } else if is(ids.shape, k) {
                    s.meta.tensor_shape = text();
                }
            }
            out.num_events += 1;
            raw.entry(memory_id).or_default().push(s);
        }
    }
    for (memory_id, mut snapshots) in raw {
        // Stable: equal times keep visit order.
        snapshots.sort_by_key(|s| s.time_offset_ps);
        let summary = summarize(&snapshots);
        update_step_ids(&mut snapshots);
        update_deallocations(&mut snapshots);
        let sampled_timeline = sample_timeline(&snapshots, MAX_TIMELINE_SNAPSHOTS);
        let peak_step_id = peak_step(&summary, &snapshots);
        let mut p = AllocatorProfile {
            memory_id: memory_id.clone(),
            snapshots,
            summary,
            sampled_timeline,
            peak_step_id,
            ..Default::default()
        };
        active_allocations(&mut p);
        out.allocators.insert(memory_id, p);
    }
}

/// XProf's `UpdateProfileSummary` over time-sorted snapshots (see the module docs).
fn summarize(snapshots: &[Snapshot]) -> Summary {
    let mut sum = Summary::default();
    for s in snapshots {
        sum.peak_bytes_usage_lifetime = s.stats.peak_bytes_in_use;
        if s.stats.in_use() >= sum.peak_stats.peak_bytes_in_use {
            sum.peak_stats = s.stats.clone();
            sum.peak_stats.peak_bytes_in_use = s.stats.in_use();
            sum.peak_stats_time_ps = s.time_offset_ps;
            sum.memory_capacity = s.stats.in_use().saturating_add(s.stats.free_memory_bytes);
            sum.peak_present = s.present;
        }
    }
    sum
}

/// Missing step ids: 0 before the first valid one, else the previous valid + 1.
fn update_step_ids(snapshots: &mut [Snapshot]) {
    let mut last_valid = -1i64;
    for s in snapshots {
        if s.meta.step_id == -1 {
            s.meta.step_id = last_valid.saturating_add(1);
        } else {
            last_valid = s.meta.step_id;
        }
    }
}

/// Deallocations take the op, region, type and shape of the allocation at their address.
fn update_deallocations(snapshots: &mut [Snapshot]) {
    let mut by_addr: HashMap<u64, usize> = HashMap::new();
    for i in 0..snapshots.len() {
        let addr = snapshots[i].meta.address;
        if snapshots[i].meta.memory_activity == Activity::Deallocation {
            if let Some(a) = by_addr.remove(&addr) {
                let src = snapshots[a].meta.clone();
                let m = &mut snapshots[i].meta;
                m.tf_op_name = src.tf_op_name;
                m.region_type = src.region_type;
                m.data_type = src.data_type;
                m.tensor_shape = src.tensor_shape;
            }
        } else {
            by_addr.entry(addr).or_insert(i);
        }
    }
}

/// The step of the peak: the step of the last snapshot whose usage equals the peak.
fn peak_step(sum: &Summary, snapshots: &[Snapshot]) -> i64 {
    snapshots
        .iter()
        .rev()
        .find(|s| s.stats.in_use() == sum.peak_stats.peak_bytes_in_use)
        .map_or(0, |s| s.meta.step_id)
}

/// XProf's max-box filter: `max` points, each the largest-usage snapshot of its box (the
/// first of equal ones).
pub fn sample_timeline(snapshots: &[Snapshot], max: usize) -> Vec<Snapshot> {
    let n = snapshots.len();
    if n <= max || max == 0 {
        return snapshots.to_vec();
    }
    let width = n / max;
    let count1 = max * (width + 1) - n;
    let count2 = max - count1;
    let mut out = Vec::with_capacity(max);
    let mut boxes = |w: usize, count: usize, start: usize| {
        for i in 0..count {
            let lo = start + w * i;
            let best = (lo..lo + w).fold(lo, |b, j| {
                if snapshots[j].stats.in_use() > snapshots[b].stats.in_use() {
                    j
                } else {
                    b
                }
            });
            out.push(snapshots[best].clone());
        }
    };
    boxes(width, count1, 0);
    boxes(width + 1, count2, width * count1);
    out
}

fn special(bytes: i64, step_id: i64, op: &str, region: &str) -> ActivityMetadata {
    ActivityMetadata {
        memory_activity: Activity::Allocation,
        requested_bytes: bytes,
        allocation_bytes: bytes,
        address: 0,
        tf_op_name: op.to_string(),
        step_id,
        region_type: region.to_string(),
        data_type: data_type_string(0),
        tensor_shape: "unknown".to_string(),
    }
}

/// XProf's `ProcessActiveAllocations` + `SaveActiveAllocationSnapshots`.
fn active_allocations(p: &mut AllocatorProfile) {
    let peak_time = p.summary.peak_stats_time_ps;
    let mut unmapped_alloc = p.summary.peak_stats.heap_allocated_bytes;
    let mut unmapped_dealloc = 0i64;
    // address → snapshot index of its live allocation (within the peak step, up to the peak).
    let mut live: HashMap<u64, usize> = HashMap::new();
    for (i, s) in p.snapshots.iter().enumerate() {
        if s.time_offset_ps > peak_time {
            break;
        }
        if s.meta.step_id != p.peak_step_id {
            continue;
        }
        if s.meta.memory_activity == Activity::Allocation {
            live.insert(s.meta.address, i);
            unmapped_alloc = unmapped_alloc.saturating_sub(s.meta.allocation_bytes);
        } else {
            if live.remove(&s.meta.address).is_none() {
                unmapped_dealloc = unmapped_dealloc.saturating_add(s.meta.allocation_bytes);
            }
            unmapped_alloc = unmapped_alloc.saturating_add(s.meta.allocation_bytes);
        }
    }
    unmapped_alloc = unmapped_alloc.saturating_sub(unmapped_dealloc);

    // (index, metadata): index >= 0 → snapshot, < 0 → special row -index-1.
    let mut rows: Vec<(i64, ActivityMetadata)> = live
        .values()
        .map(|&i| (i as i64, p.snapshots[i].meta.clone()))
        .collect();
    let step = p.peak_step_id;
    let mut idx = 0i64;
    if unmapped_alloc > 0 {
        p.special_allocations.push(special(
            unmapped_alloc,
            step,
            "unused preallocated device memory",
            "persist/dynamic",
        ));
        idx -= 1;
        rows.push((idx, p.special_allocations.last().unwrap().clone()));
    }
    let stack = p.summary.peak_stats.stack_reserved_bytes;
    if stack > 0 {
        p.special_allocations
            .push(special(stack, step, "stack", "stack"));
        idx -= 1;
        rows.push((idx, p.special_allocations.last().unwrap().clone()));
    }
    let key = |m: &ActivityMetadata| {
        (
            std::cmp::Reverse(m.allocation_bytes),
            std::cmp::Reverse(m.requested_bytes),
            m.tf_op_name.clone(),
            m.region_type.clone(),
            m.data_type.clone(),
            m.tensor_shape.clone(),
        )
    };
    // Identical rows latest snapshot first (deterministic; see the module docs).
    rows.sort_by(|a, b| key(&a.1).cmp(&key(&b.1)).then(b.0.cmp(&a.0)));
    let same = |a: &ActivityMetadata, b: &ActivityMetadata| key(a) == key(b);
    let mut i = 0;
    let mut saved = Vec::new();
    while i < rows.len() {
        let mut n = 1;
        while i + n < rows.len() && same(&rows[i].1, &rows[i + n].1) {
            n += 1;
        }
        let (index, _) = rows[i];
        let row = if index >= 0 {
            saved.push(p.snapshots[index as usize].clone());
            ActiveAllocation {
                snapshot_index: saved.len() as i64 - 1,
                special_index: -1,
                num_occurrences: n as i64,
            }
        } else {
            ActiveAllocation {
                snapshot_index: index,
                special_index: -index - 1,
                num_occurrences: n as i64,
            }
        };
        p.active_allocations.push(row);
        i += n;
    }
    p.peak_snapshots = saved;
}

fn hlo_modules(space: &XSpace) -> Vec<HloModuleSpan> {
    let mut out = Vec::new();
    for plane in space
        .planes()
        .filter(|p| p.name().starts_with(names::plane::TPU_PREFIX))
    {
        let plane_name = plane
            .name()
            .strip_prefix("/device:")
            .unwrap_or(plane.name())
            .to_string();
        for line in plane
            .lines()
            .filter(|l| l.name() == names::line::XLA_MODULES)
        {
            for ev in line.events() {
                out.push(HloModuleSpan {
                    id: out.len() as i64,
                    name: ev.name().to_string(),
                    start_time_ps: ev.offset_ps(),
                    end_time_ps: ev.offset_ps().saturating_add(ev.duration_ps()),
                    plane_name: plane_name.clone(),
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// JSON

fn s64(v: i64) -> Value {
    Value::from(v.to_string())
}

fn stats_json(s: &AggregationStats) -> Value {
    json!({
        "stackReservedBytes": s64(s.stack_reserved_bytes),
        "heapAllocatedBytes": s64(s.heap_allocated_bytes),
        "freeMemoryBytes": s64(s.free_memory_bytes),
        "fragmentation": s.fragmentation,
        "peakBytesInUse": s64(s.peak_bytes_in_use),
    })
}

fn meta_json(m: &ActivityMetadata) -> Value {
    json!({
        "memoryActivity": m.memory_activity.as_str(),
        "requestedBytes": s64(m.requested_bytes),
        "allocationBytes": s64(m.allocation_bytes),
        "address": m.address.to_string(),
        "tfOpName": m.tf_op_name,
        "stepId": s64(m.step_id),
        "regionType": m.region_type,
        "dataType": m.data_type,
        "tensorShape": m.tensor_shape,
    })
}

fn snapshot_json(s: &Snapshot) -> Value {
    json!({
        "timeOffsetPs": s64(s.time_offset_ps),
        "aggregationStats": stats_json(&s.stats),
        "activityMetadata": meta_json(&s.meta),
    })
}

impl MemoryProfile {
    /// The profile in XProf's JSON (`MemoryProfile` proto, camelCase, int64 as strings, every
    /// field printed), field for field what `memory_profile.json` contains.
    pub fn to_xprof_json(&self) -> Value {
        let mut per = Map::new();
        for (id, p) in &self.allocators {
            per.insert(
                id.clone(),
                json!({
                    "memoryProfileSnapshots": p.peak_snapshots.iter().map(snapshot_json).collect::<Vec<_>>(),
                    "profileSummary": {
                        "peakBytesUsageLifetime": s64(p.summary.peak_bytes_usage_lifetime),
                        "peakStats": stats_json(&p.summary.peak_stats),
                        "peakStatsTimePs": s64(p.summary.peak_stats_time_ps),
                        "memoryCapacity": s64(p.summary.memory_capacity),
                    },
                    "activeAllocations": p.active_allocations.iter().map(|a| json!({
                        "snapshotIndex": s64(a.snapshot_index),
                        "specialIndex": s64(a.special_index),
                        "numOccurrences": s64(a.num_occurrences),
                    })).collect::<Vec<_>>(),
                    "specialAllocations": p.special_allocations.iter().map(meta_json).collect::<Vec<_>>(),
                    "sampledTimelineSnapshots": p.sampled_timeline.iter().map(snapshot_json).collect::<Vec<_>>(),
                }),
            );
        }
        json!({
            "memoryProfilePerAllocator": per,
            "numHosts": 1,
            "memoryIds": self.allocators.keys().collect::<Vec<_>>(),
            "version": 1,
            "hloModules": self.hlo_modules.iter().map(|m| json!({
                "name": m.name,
                "startTimePs": s64(m.start_time_ps),
                "endTimePs": s64(m.end_time_ps),
                "id": s64(m.id),
                "planeName": m.plane_name,
            })).collect::<Vec<_>>(),
        })
    }

    /// The allocator with the largest peak (`stack + heap`); the first memory id (sorted) on a
    /// tie.
    pub fn peak_allocator(&self) -> Option<&AllocatorProfile> {
        let mut best: Option<&AllocatorProfile> = None;
        for p in self.allocators.values() {
            if best.is_none_or(|b| {
                p.summary.peak_stats.peak_bytes_in_use > b.summary.peak_stats.peak_bytes_in_use
            }) {
                best = Some(p);
            }
        }
        best
    }

    /// The seed's / XProf CLI's summary: `memory_capacity_gib` (largest capacity over
    /// allocators) and `peak_memory_usage_gib` (largest peak) rounded to 2 decimals, and the
    /// peak allocator's `peak_usage_details` (GiB to 4 decimals, percentages to 2;
    /// `utilization_percent` is computed from the two rounded GiB figures, as both print it).
    /// `None` without allocator events.
    pub fn seed_summary(&self) -> Option<Value> {
        const GIB: f64 = (1u64 << 30) as f64;
        let round = |v: f64, digits: i32| {
            let f = 10f64.powi(digits);
            (v * f).round() / f
        };
        let peak = self.peak_allocator()?;
        let ps = &peak.summary.peak_stats;
        let has = peak.summary.peak_present;
        let peak_gib = round(ps.peak_bytes_in_use as f64 / GIB, 2);
        let mut top = Map::new();
        let mut details = Map::new();
        // Without `bytes_available` XProf's capacity is just stack + heap (a placeholder): say
        // so instead of printing a capacity that makes every peak look like 100 %.
        if has.free_memory {
            let cap_gib = round(self.max_capacity().unwrap_or(0) as f64 / GIB, 2);
            top.insert("memory_capacity_gib".into(), json!(cap_gib));
            details.insert(
                "free_memory_gib".into(),
                json!(round(ps.free_memory_bytes as f64 / GIB, 4)),
            );
            let util = if cap_gib > 0.0 {
                Value::from(round(peak_gib / cap_gib * 100.0, 2))
            } else {
                Value::Null
            };
            details.insert("utilization_percent".into(), util);
        } else {
            let why = "the allocator events carry no `bytes_available` stat, so free memory and \
                       capacity are unknown";
            top.insert("memory_capacity_gib".into(), Value::Null);
            top.insert("memory_capacity_gib_reason".into(), json!(why));
            details.insert("free_memory_gib".into(), Value::Null);
            details.insert("free_memory_gib_reason".into(), json!(why));
            details.insert("utilization_percent".into(), Value::Null);
            details.insert("utilization_percent_reason".into(), json!(why));
        }
        top.insert("peak_memory_usage_gib".into(), json!(peak_gib));
        details.insert(
            "stack_reservation_gib".into(),
            json!(round(ps.stack_reserved_bytes as f64 / GIB, 4)),
        );
        details.insert(
            "heap_allocation_gib".into(),
            json!(round(ps.heap_allocated_bytes as f64 / GIB, 4)),
        );
        if has.fragmentation {
            details.insert(
                "fragmentation_percent".into(),
                json!(round(ps.fragmentation * 100.0, 2)),
            );
        } else {
            details.insert("fragmentation_percent".into(), Value::Null);
            details.insert(
                "fragmentation_percent_reason".into(),
                json!("the allocator events carry no `fragmentation` stat"),
            );
        }
        top.insert("peak_usage_details".into(), Value::Object(details));
        Some(Value::Object(top))
    }

    /// The largest `memory_capacity` over allocators.
    pub fn max_capacity(&self) -> Option<i64> {
        self.allocators
            .values()
            .map(|p| p.summary.memory_capacity)
            .max()
    }
}
