//! Device planes: TPU TensorCore op databases, GPU kernel databases, duty cycle and peak
//! numbers (XProf `xplane_to_op_metrics_db.cc`, `duty_cycle_tracker.cc`,
//! `xplane_to_op_stats.cc::GetPerfEnvFromXPlane`).

use crate::metrics::{
    CoreType, CostSource, KeyedDbBuilder, NamedDbBuilder, OpMetrics, OpMetricsDb,
};
use crate::model::{Event, HloModuleInfo, Plane, StatKey};
use crate::nesting::{Span, nest};
use std::collections::HashMap;

pub const XLA_OPS: &str = "XLA Ops";
pub const XLA_MODULES: &str = "XLA Modules";
pub const STEPS: &str = "Steps";
pub const SPARSE_CORE_OPS: &str = "Sparse Core Ops";
pub const SPARSE_CORE_MODULES: &str = "Sparse Core Modules";
pub const SPARSE_CORE_STEPS: &str = "Sparse Core Steps";
pub const FRAMEWORK_OPS: &str = "Framework Ops";

/// Lines whose events are ops (XProf `IsOpLineName`).
pub fn is_op_line(name: &str) -> bool {
    name == XLA_OPS || name == FRAMEWORK_OPS || name == SPARSE_CORE_OPS
}

/// `^/device:TPU:[0-9]+$`
pub fn is_tpu_tensor_core_plane(name: &str) -> bool {
    name.strip_prefix("/device:TPU:")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `^/device:TPU:[0-9]+ SparseCore(?: [a-zA-Z]+)? [0-9]+$`
pub fn is_sparse_core_plane(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("/device:TPU:") else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let Some(rest) = rest[digits..].strip_prefix(" SparseCore") else {
        return false;
    };
    if digits == 0 {
        return false;
    }
    let parts: Vec<&str> = rest.split(' ').skip(1).collect();
    let is_num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        [n] => is_num(n),
        [w, n] => !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphabetic()) && is_num(n),
        _ => false,
    }
}

/// The SparseCore op databases of one SparseCore plane, keyed by the offload that started
/// them: (`offload_core_id`, `tc_offload_start_id`) of the `Sparse Core Modules` event whose
/// window holds the ops (XProf `ConvertSparseCoreDeviceTraceXPlaneToOpMetricsDb`). Each db's
/// window is the total length of its module events.
pub fn sparse_core_dbs(plane: &Plane) -> HashMap<(u64, u64), OpMetricsDb> {
    // (begin, end, key) of each module window, by time.
    let mut windows: Vec<(i64, i64, (u64, u64))> = plane
        .line(SPARSE_CORE_MODULES)
        .map(|l| {
            l.events
                .iter()
                .filter_map(|e| {
                    let key = (
                        e.stats.u64(StatKey::OffloadCoreId)?,
                        e.stats.u64(StatKey::TcOffloadStartId)?,
                    );
                    let (b, d) = device_span(e);
                    Some((b, b.saturating_add(d), key))
                })
                .collect()
        })
        .unwrap_or_default();
    windows.sort_unstable();
    let mut per_key: HashMap<(u64, u64), Vec<Span>> = HashMap::new();
    let Some(ops) = plane.line(SPARSE_CORE_OPS) else {
        return HashMap::new();
    };
    let mut w = 0;
    let mut order: Vec<usize> = (0..ops.events.len()).collect();
    order.sort_by_key(|&i| device_span(&ops.events[i]).0);
    for i in order {
        let (b, d) = device_span(&ops.events[i]);
        let end = b.saturating_add(d);
        while w < windows.len() && windows[w].1 < b {
            w += 1;
        }
        if let Some(&(wb, we, key)) = windows.get(w)
            && wb <= b
            && end <= we
        {
            per_key.entry(key).or_default().push(Span {
                begin: b,
                dur: d,
                index: i,
            });
        }
    }
    let mut out = HashMap::new();
    for (key, mut spans) in per_key {
        let mut builder = KeyedDbBuilder::new();
        nest(&mut spans, |i, dur, children, _| {
            let e = &ops.events[i];
            let md = plane.meta(e);
            let (Some(program_id), Some(symbol_id)) = (
                md.stats.u64(StatKey::ProgramId),
                md.stats.u64(StatKey::SymbolId),
            ) else {
                return;
            };
            if symbol_id == 0 {
                return;
            }
            let mut op = op_from_metadata(plane, e);
            op.occurrences = e.num_occurrences().max(1) as u64;
            op.time_ps = dur;
            op.self_time_ps = dur.saturating_sub(children);
            op.min_time_ps = e.duration_ps.max(0) as u64;
            op.normalized_time_ps = dur;
            op.core_type = CoreType::SparseCore;
            op.num_cores = 1;
            builder.add((program_id, symbol_id), op);
        });
        let total = windows.iter().filter(|x| x.2 == key).fold(0u64, |a, x| {
            a.saturating_add(crate::nesting::span_len(x.0, x.1))
        });
        out.insert(key, builder.finish(total));
    }
    out
}

pub fn is_gpu_plane(name: &str) -> bool {
    name.starts_with("/device:GPU:")
}

/// Categories during which the core waits on the host (XProf `IsOffDutyOp`).
pub fn is_off_duty(category: &str) -> bool {
    matches!(
        category,
        "infeed"
            | "outfeed"
            | "host send"
            | "host send-done"
            | "host recv"
            | "host recv-done"
            | "megacore fusion"
    )
}

/// Categories whose ops contain other ops (XProf `MayHaveInnerOps`).
/// XProf `IsInfeedOrOutfeed`: a category naming infeed or outfeed.
pub fn is_infeed_outfeed(category: &str) -> bool {
    category.contains("infeed") || category.contains("outfeed")
}

pub fn may_have_inner_ops(category: &str) -> bool {
    matches!(
        category,
        "call" | "conditional" | "while" | "megacore fusion"
    )
}

/// XProf's device timespan: `device_offset_ps`/`device_duration_ps` when both exist.
pub fn device_span(e: &Event) -> (i64, i64) {
    match (
        e.stats.i64(StatKey::DeviceOffsetPs),
        e.stats.i64(StatKey::DeviceDurationPs),
    ) {
        (Some(o), Some(d)) => (o, d),
        _ => (e.start_ps, e.duration_ps),
    }
}

/// Fill identity and per-occurrence cost from an op event's metadata (XProf
/// `SetOpMetadataFromHloEventMetadata`).
fn op_from_metadata(plane: &Plane, e: &Event) -> OpMetrics {
    let md = plane.meta(e);
    let mut op = OpMetrics::default();
    if !md.display_name.is_empty() {
        op.name = md.display_name.clone();
        op.long_name = md.name.clone();
    } else {
        op.name = md.name.clone();
    }
    let s = &md.stats;
    op.program_id = s.u64(StatKey::ProgramId).unwrap_or(0);
    op.category = s.str(StatKey::HloCategory).unwrap_or_default().to_string();
    op.provenance = s.str(StatKey::TfOp).unwrap_or_default().to_string();
    op.deduplicated_name = s
        .str(StatKey::DeduplicatedName)
        .unwrap_or_default()
        .to_string();
    if let Some(f) = s.u64(StatKey::Flops) {
        op.flops = f;
        op.cost_source = CostSource::CostModel;
    }
    op.model_flops = s.u64(StatKey::ModelFlops).unwrap_or(0);
    if let Some(b) = s.u64(StatKey::BytesAccessed) {
        op.bytes_accessed = b;
        op.cost_source = CostSource::CostModel;
    }
    if let Some(src) = s.str(StatKey::SourceInfo)
        && let Some((file, line)) = src.rsplit_once(':')
        && let Ok(l) = line.parse::<i32>()
    {
        op.source_file = file.to_string();
        op.source_line = l;
    }
    op.source_stack = s.str(StatKey::SourceStack).unwrap_or_default().to_string();
    op.memory_accessed = crate::breakdown::from_stats(s);
    op
}

/// One TensorCore plane's op database (XProf `ConvertTensorCoreDeviceTraceXPlaneToOpMetricsDb`).
pub fn tensor_core_db(plane: &Plane) -> OpMetricsDb {
    tensor_core_db_with(plane, &HashMap::new())
}

/// One TensorCore plane's op database; ops that offloaded work to a SparseCore get that
/// SparseCore's op database as `children` (from [`sparse_core_dbs`]).
pub fn tensor_core_db_with(
    plane: &Plane,
    sparse_core: &HashMap<(u64, u64), OpMetricsDb>,
) -> OpMetricsDb {
    let mut builder = KeyedDbBuilder::new();
    let mut first = i64::MAX;
    let mut last = i64::MIN;
    // XProf 2.24.2's window starts at the earliest device-clock begin and ends at the latest end;
    // its output on real captures matches the later of the device-clock and host-clock ends.
    let mut track = |e: &Event| {
        let (b, d) = device_span(e);
        first = first.min(b);
        last = last.max(b.saturating_add(d)).max(e.end_ps());
    };
    for line in &plane.lines {
        if line.name == STEPS || line.name == SPARSE_CORE_STEPS {
            line.events.iter().for_each(&mut track);
        }
        if !is_op_line(&line.name) {
            continue;
        }
        let mut spans: Vec<Span> = line
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                track(e);
                let (b, d) = device_span(e);
                Span {
                    begin: b,
                    dur: d,
                    index: i,
                }
            })
            .collect();
        nest(&mut spans, |i, dur, children, _| {
            let e = &line.events[i];
            let Some((key, mut op)) = tensor_core_op(plane, e, dur, children) else {
                return;
            };
            op.min_time_ps = e
                .stats
                .u64(StatKey::MinDurationPs)
                .unwrap_or(e.duration_ps.max(0) as u64);
            op.dma_stall_ps = e.stats.u64(StatKey::DmaStallDurationPs).unwrap_or(0);
            if let (Some(c), Some(s)) = (
                e.stats.u64(StatKey::OffloadCoreId),
                e.stats.u64(StatKey::TcOffloadStartId),
            ) && let Some(db) = sparse_core.get(&(c, s))
            {
                op.children = Some(Box::new(db.clone()));
            }
            builder.add(key, op);
        });
    }
    let total = if first == i64::MAX || last < first {
        0
    } else {
        crate::nesting::span_len(first, last)
    };
    builder.finish(total)
}

/// One nested TensorCore op event as op metrics, keyed by `(program_id, symbol_id)`: what the
/// whole-run and the per-step databases share. `None` for events that are not ops (no program
/// or symbol id) and for symbol 0, the program's root, whose time is the module's.
fn tensor_core_op(
    plane: &Plane,
    e: &Event,
    dur: u64,
    children: u64,
) -> Option<((u64, u64), OpMetrics)> {
    let md = plane.meta(e);
    let program_id = md.stats.u64(StatKey::ProgramId)?;
    let symbol_id = md.stats.u64(StatKey::SymbolId)?;
    if symbol_id == 0 {
        return None;
    }
    let mut op = op_from_metadata(plane, e);
    op.occurrences = e.num_occurrences().max(1) as u64;
    op.time_ps = dur;
    op.self_time_ps = match e.stats.u64(StatKey::SelfDurationPs) {
        Some(s) => s,
        None => dur.saturating_sub(children),
    };
    let factor = e.stats.f64(StatKey::TimeScaleMultiplier).unwrap_or(1.0);
    op.normalized_time_ps = (dur as f64 * factor) as u64;
    op.core_type = CoreType::TensorCore;
    op.num_cores = 1;
    // Per-launch cost on the event (custom calls): kept as the measured value.
    op.event_flops = e.stats.u64(StatKey::Flops).unwrap_or(0);
    op.event_model_flops = e.stats.u64(StatKey::ModelFlops).unwrap_or(0);
    op.event_bytes_accessed = e.stats.u64(StatKey::BytesAccessed).unwrap_or(0);
    Some(((program_id, symbol_id), op))
}

/// The op database of each step of one TensorCore, for the steps given as (id, begin, end),
/// as XProf's `ConvertTpuDeviceTraceXLineToStepEvents` builds them: an op belongs to the step
/// whose id its `group_id` stat names; with `containing`, an op without one belongs to the
/// step whose span holds it (what XProf's grouping pass gives it). Only steps with at least
/// one op are returned: XProf has no step events for the others, and drops their markers.
pub fn tensor_core_step_dbs(
    plane: &Plane,
    windows: &[(i64, i64, i64)],
    containing: bool,
) -> HashMap<i64, OpMetricsDb> {
    let mut sorted: Vec<(i64, i64, i64)> = windows.to_vec();
    sorted.sort_by_key(|w| (w.1, w.2));
    let span_of: HashMap<i64, (i64, i64)> = windows.iter().map(|w| (w.0, (w.1, w.2))).collect();
    let mut builders: HashMap<i64, KeyedDbBuilder> = HashMap::new();
    for line in plane.lines.iter().filter(|l| is_op_line(&l.name)) {
        let mut order: Vec<usize> = (0..line.events.len()).collect();
        order.sort_by_key(|&i| device_span(&line.events[i]).0);
        let mut per_window: HashMap<i64, Vec<Span>> = HashMap::new();
        let mut w = 0;
        for i in order {
            let e = &line.events[i];
            let (b, d) = device_span(e);
            let end = b.saturating_add(d);
            while w < sorted.len() && sorted[w].2 < b {
                w += 1;
            }
            let id = match e.stats.i64(StatKey::GroupId) {
                Some(g) => span_of.contains_key(&g).then_some(g),
                // Windows may touch; the first one that holds the event wins.
                None if containing => sorted[w..]
                    .iter()
                    .take(2)
                    .find(|x| x.1 <= b && end <= x.2)
                    .map(|x| x.0),
                None => None,
            };
            if let Some(id) = id {
                per_window.entry(id).or_default().push(Span {
                    begin: b,
                    dur: d,
                    index: i,
                });
            }
        }
        for (id, mut spans) in per_window {
            let builder = builders.entry(id).or_default();
            nest(&mut spans, |i, dur, children, _| {
                let e = &line.events[i];
                let Some((key, mut op)) = tensor_core_op(plane, e, dur, children) else {
                    return;
                };
                op.min_time_ps = e.duration_ps.max(0) as u64;
                builder.add(key, op);
            });
        }
    }
    builders
        .into_iter()
        .map(|(id, builder)| {
            let (b, e) = span_of[&id];
            (id, builder.finish(crate::nesting::span_len(b, e)))
        })
        .collect()
}

/// Busy/idle of one core (XProf `DutyCycleTracker`), on the host clock.
#[derive(Clone, Debug, Default)]
pub struct DutyCycle {
    /// Active intervals, merged.
    active: Vec<(i64, i64)>,
    window: Option<(i64, i64)>,
}

impl DutyCycle {
    pub fn add(&mut self, begin: i64, end: i64, active: bool) {
        self.window = Some(match self.window {
            None => (begin, end),
            Some((b, e)) => (b.min(begin), e.max(end)),
        });
        if active && end > begin {
            self.active.push((begin, end));
        }
    }

    /// Union another core's tracker into this one (cores of one chip).
    pub fn union(&mut self, o: &DutyCycle) {
        if let Some((b, e)) = o.window {
            self.add(b, e, false);
        }
        self.active.extend_from_slice(&o.active);
    }

    pub fn active_ps(&self) -> u64 {
        let mut v = self.active.clone();
        v.sort_unstable();
        let mut total = 0u64;
        let mut cur: Option<(i64, i64)> = None;
        for (b, e) in v {
            match cur {
                Some((cb, ce)) if b <= ce => cur = Some((cb, ce.max(e))),
                Some((cb, ce)) => {
                    total = total.saturating_add(crate::nesting::span_len(cb, ce));
                    cur = Some((b, e));
                }
                None => cur = Some((b, e)),
            }
        }
        if let Some((cb, ce)) = cur {
            total = total.saturating_add(crate::nesting::span_len(cb, ce));
        }
        total
    }

    pub fn window_ps(&self) -> u64 {
        self.window
            .map_or(0, |(b, e)| crate::nesting::span_len(b, e))
    }

    pub fn idle_ps(&self) -> u64 {
        self.window_ps().saturating_sub(self.active_ps())
    }
}

#[derive(Clone, PartialEq, prost::Message)]
struct CoreDetailsProto {
    #[prost(string, tag = "1")]
    hostname: String,
    #[prost(uint32, tag = "2")]
    device_ordinal: u32,
    #[prost(uint32, tag = "3")]
    core_num: u32,
    #[prost(uint32, tag = "4")]
    local_chip_id: u32,
    #[prost(uint32, tag = "5")]
    global_chip_id: u32,
    #[prost(uint32, tag = "6")]
    global_core_id: u32,
    #[prost(bool, tag = "7")]
    is_sparse_core: bool,
}

/// The plane's chip (`core_details.local_chip_id`) when its `core_details` stat is present and
/// parses — as in XProf, an empty value parses (to chip 0).
pub fn local_chip_id(plane: &Plane) -> Option<u32> {
    use prost::Message;
    let b = plane.stats.get(StatKey::CoreDetails)?.as_bytes()?;
    CoreDetailsProto::decode(b).ok().map(|c| c.local_chip_id)
}

/// XProf `DutyCycleCombiner`: cores of one chip are unioned (a chip is busy when any of its
/// cores is); cores without chip details count on their own.
#[derive(Default)]
pub struct DutyCycleCombiner {
    chips: std::collections::BTreeMap<u32, DutyCycle>,
    active: u64,
    idle: u64,
}

impl DutyCycleCombiner {
    pub fn add(&mut self, t: &DutyCycle, chip: Option<u32>) {
        match chip {
            Some(c) => self.chips.entry(c).or_default().union(t),
            None => {
                self.active = self.active.saturating_add(t.active_ps());
                self.idle = self.idle.saturating_add(t.idle_ps());
            }
        }
    }
    pub fn active_ps(&self) -> u64 {
        self.active
            + self
                .chips
                .values()
                .map(DutyCycle::active_ps)
                .fold(0u64, u64::saturating_add)
    }
    pub fn idle_ps(&self) -> u64 {
        self.idle
            + self
                .chips
                .values()
                .map(DutyCycle::idle_ps)
                .fold(0u64, u64::saturating_add)
    }
}

/// XProf `ConstructDutyCycleTracker`.
pub fn duty_cycle(plane: &Plane) -> DutyCycle {
    let mut t = DutyCycle::default();
    for line in &plane.lines {
        let active = match line.name.as_str() {
            XLA_OPS => None,
            SPARSE_CORE_OPS => Some(true),
            XLA_MODULES | SPARSE_CORE_MODULES => Some(false),
            _ => continue,
        };
        for e in &line.events {
            let is_active = active.unwrap_or_else(|| {
                !plane
                    .meta(e)
                    .stats
                    .str(StatKey::HloCategory)
                    .is_some_and(is_off_duty)
            });
            t.add(e.start_ps, e.end_ps(), is_active);
        }
    }
    t
}

/// Peak numbers of a device (XProf `PerfEnv`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerfEnv {
    pub peak_tflops: f64,
    /// GB/s: HBM, SRAM_RD, SRAM_WR, CMEM_RD, CMEM_WR, VMEM_RD, VMEM_WR.
    pub peak_bws_gbps: [f64; 7],
    pub has_cmem: bool,
    pub has_merged_vmem: bool,
    pub has_megacore: bool,
    /// Where `peak_tflops` came from: [`peak_source`] labels, or why it is unknown (0).
    pub peak_source: &'static str,
}

/// Provenance labels of [`PerfEnv::peak_source`].
pub mod peak_source {
    /// The device plane's `peak_teraflops_per_second` stat.
    pub const STAT: &str = "stat:peak_teraflops_per_second";
    /// SMs × FLOPs/SM/cycle (compute capability table) × clock (XProf `cuda_type_utils.cc`).
    pub const NVIDIA: &str = "derived:nvidia_compute_capability";
    /// CUs × FLOPs/CU/cycle (gfx architecture table) × clock (XProf `rocm_type_utils.cc`).
    pub const AMD: &str = "derived:amd_gfx_architecture";
    /// AMD device whose gfx architecture is unknown or ambiguous: XProf reports 0.
    pub const AMD_UNKNOWN: &str = "unknown: AMD gfx architecture not in XProf's table (or not resolvable from gpu_device_name / compute capability); XProf reports 0";
    /// Vendor other than Nvidia / AMD: XProf reports 0.
    pub const UNKNOWN_VENDOR: &str =
        "unknown: no peak stat and the device vendor is neither Nvidia nor AMD; XProf reports 0";
}

impl PerfEnv {
    /// FLOP/byte at which HBM bandwidth and compute peak meet.
    pub fn ridge_point(&self) -> f64 {
        crate::metrics::safe_div(self.peak_tflops * 1000.0, self.peak_bws_gbps[0])
    }
}

/// Nvidia dense FLOPs per SM per cycle: the max of CUDA-core fp32/fp16 and tensor-core
/// fp32/fp16 (XProf `cuda_type_utils.cc`), keyed by `major*1000 + minor*10`.
const NVIDIA_FLOPS_PER_SM_PER_CYCLE: &[(u32, f64)] = &[
    (2000, 64.0),
    (3000, 384.0),
    (5000, 256.0),
    (6000, 256.0),
    (6010, 256.0),
    (7000, 1024.0),
    (7050, 1024.0),
    (8000, 2048.0),
    (8060, 1024.0),
    (8090, 1024.0),
    (9000, 4096.0),
    (10000, 8192.0),
];

/// AMD dense FLOPs per CU per cycle: the max of vector fp32/fp16 and matrix fp32/fp16 rates
/// (XProf `rocm_type_utils.cc`, from AMD's CDNA white papers), keyed by gfx architecture.
const AMD_FLOPS_PER_CU_PER_CYCLE: &[(&str, f64)] = &[
    ("gfx908", 1024.0), // CDNA 1 (MI100): matrix fp16 1024
    ("gfx90a", 1024.0), // CDNA 2 (MI200): matrix fp16 1024
    ("gfx942", 2048.0), // CDNA 3 (MI300): matrix fp16 2048
    ("gfx950", 4096.0), // CDNA 4 (MI350): matrix fp16 4096
];

/// AMD LDS bytes per CU per cycle (XProf `rocm_type_utils.cc`: 32 banks × 4 B up to CDNA 3,
/// 64 banks × 4 B on CDNA 4).
const AMD_LDS_BYTES_PER_CU_PER_CYCLE: &[(&str, f64)] = &[
    ("gfx908", 128.0),
    ("gfx90a", 128.0),
    ("gfx942", 128.0),
    ("gfx950", 256.0),
];

/// XProf `ResolveAmdGfxVersion`: `gpu_device_name` when it is `gfx` + ≥ 3 hex digits (the
/// rocprofiler agent name), else the one architecture a compute capability identifies
/// (9.4 → gfx942, 9.5 → gfx950); `None` when ambiguous (e.g. 9.0 is gfx908 or gfx90a).
pub fn amd_gfx_version(plane: &Plane) -> Option<String> {
    let s = &plane.stats;
    if let Some(name) = s.str(StatKey::GpuDeviceName)
        && let Some(suffix) = name.strip_prefix("gfx")
        && suffix.len() >= 3
        && suffix.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Some(name.to_string());
    }
    match (
        s.i64(StatKey::ComputeCapMajor).unwrap_or(0),
        s.i64(StatKey::ComputeCapMinor).unwrap_or(0),
    ) {
        (9, 4) => Some("gfx942".into()),
        (9, 5) => Some("gfx950".into()),
        _ => None,
    }
}

fn amd_table(table: &[(&str, f64)], gfx: Option<&str>) -> Option<f64> {
    let gfx = gfx?;
    table.iter().find(|(k, _)| *k == gfx).map(|(_, v)| *v)
}

/// The GPU model name XProf uses as device type (`GpuModelName`; "GPU" for other vendors).
pub fn gpu_model_name(plane: &Plane) -> String {
    let s = &plane.stats;
    if s.str(StatKey::DeviceVendor) == Some("AMD") {
        if let Some(gfx) = amd_gfx_version(plane) {
            return format!("AMD GPU - {gfx}");
        }
        return match s.i64(StatKey::ComputeCapMajor).unwrap_or(0) {
            9 => "AMD GPU - gfx-9XX series",
            10 => "AMD GPU - gfx-10XX series",
            11 => "AMD GPU - gfx-11XX series",
            _ => "AMD GPU",
        }
        .into();
    }
    if s.str(StatKey::DeviceVendor) != Some("Nvidia") {
        return "GPU".into();
    }
    let minor = s.i64(StatKey::ComputeCapMinor).unwrap_or(0);
    let arch = match s.i64(StatKey::ComputeCapMajor).unwrap_or(0) {
        2 => "Fermi",
        3 => "Kepler",
        5 => "Maxwell",
        6 => "Pascal",
        7 if minor < 5 => "Volta",
        7 => "Turing",
        8 if minor < 9 => "Ampere",
        8 => "Ada Lovelace",
        9 => "Hopper",
        10 => "Blackwell",
        _ => return "Nvidia GPU".into(),
    };
    format!("Nvidia GPU ({arch})")
}

/// XProf's derived peak for an Nvidia GPU: SMs × FLOPs/SM/cycle × clock, in TFLOP/s.
fn nvidia_peak_tflops(plane: &Plane) -> Option<f64> {
    let s = &plane.stats;
    if s.str(StatKey::DeviceVendor) != Some("Nvidia") {
        return None;
    }
    let cap = s.i64(StatKey::ComputeCapMajor)?.clamp(0, 1000) as u32 * 1000
        + s.i64(StatKey::ComputeCapMinor).unwrap_or(0).clamp(0, 99) as u32 * 10;
    // The highest known capability at or below this one (XProf falls back the same way).
    let per_cycle = NVIDIA_FLOPS_PER_SM_PER_CYCLE
        .iter()
        .rev()
        .find(|(k, _)| *k <= cap)
        .or(NVIDIA_FLOPS_PER_SM_PER_CYCLE.first())?
        .1;
    let ghz = s.f64(StatKey::ClockRateKhz)? / 1e6;
    let sms = s.f64(StatKey::CoreCount)?;
    Some(sms * per_cycle * ghz / 1000.0)
}

/// XProf's derived peak for an AMD GPU: CUs × FLOPs/CU/cycle (gfx table) × clock, TFLOP/s.
fn amd_peak_tflops(plane: &Plane) -> Option<f64> {
    let s = &plane.stats;
    let per_cycle = amd_table(
        AMD_FLOPS_PER_CU_PER_CYCLE,
        amd_gfx_version(plane).as_deref(),
    )?;
    let ghz = s.f64(StatKey::ClockRateKhz)? / 1e6;
    let cus = s.f64(StatKey::CoreCount)?;
    Some(cus * per_cycle * ghz / 1000.0)
}

/// XProf `GetPerfEnvFromXPlane` for a GPU plane: peak FLOPs from the stat, else derived from
/// the vendor's architecture tables (Nvidia compute capability, AMD gfx version; other vendors
/// get 0 with the reason in `peak_source`); HBM from `memory_bandwidth` (B/s); shared memory
/// (Nvidia) / LDS (AMD) from the SM / CU count.
pub fn gpu_perf_env(plane: &Plane) -> PerfEnv {
    let s = &plane.stats;
    let stat_peak = s.f64(StatKey::PeakTeraflopsPerSecond).unwrap_or(0.0);
    let vendor = s.str(StatKey::DeviceVendor);
    let (peak, source) = if stat_peak > 0.0 {
        (stat_peak, peak_source::STAT)
    } else {
        match vendor {
            Some("Nvidia") => (
                nvidia_peak_tflops(plane).unwrap_or(0.0),
                peak_source::NVIDIA,
            ),
            Some("AMD") => match amd_peak_tflops(plane) {
                Some(p) => (p, peak_source::AMD),
                None => (0.0, peak_source::AMD_UNKNOWN),
            },
            _ => (0.0, peak_source::UNKNOWN_VENDOR),
        }
    };
    let hbm = match s.f64(StatKey::MemoryBandwidth) {
        Some(b) => b / 1e9,
        None => s.f64(StatKey::PeakHbmBw).unwrap_or(0.0),
    };
    let major = s.i64(StatKey::ComputeCapMajor).unwrap_or(0);
    let ghz = s.f64(StatKey::ClockRateKhz).unwrap_or(0.0) / 1e6;
    // Shared memory bytes per core per cycle: Nvidia's bank model, AMD's LDS table; other
    // vendors 0 (XProf reports nothing rather than borrow another vendor's number).
    let bytes_per_cycle = match vendor {
        Some("Nvidia") => {
            if major <= 2 {
                64.0
            } else {
                256.0
            }
        }
        Some("AMD") => amd_table(
            AMD_LDS_BYTES_PER_CU_PER_CYCLE,
            amd_gfx_version(plane).as_deref(),
        )
        .unwrap_or(0.0),
        _ => 0.0,
    };
    let shm = s.f64(StatKey::CoreCount).unwrap_or(0.0) * bytes_per_cycle * ghz;
    let pick = |k| match s.f64(k) {
        Some(v) if v > 0.0 => v,
        _ => shm,
    };
    PerfEnv {
        peak_tflops: peak,
        peak_bws_gbps: [
            hbm,
            pick(StatKey::PeakSramRdBw),
            pick(StatKey::PeakSramWrBw),
            0.0,
            0.0,
            0.0,
            0.0,
        ],
        has_cmem: false,
        has_merged_vmem: true,
        has_megacore: false,
        peak_source: source,
    }
}

/// XProf `GetPerfEnvFromXPlane` for a TPU plane (stats only).
pub fn perf_env(plane: &Plane) -> PerfEnv {
    let s = &plane.stats;
    let g = |k| s.f64(k).unwrap_or(0.0);
    let mut p = PerfEnv {
        peak_tflops: g(StatKey::PeakTeraflopsPerSecond),
        peak_bws_gbps: [
            g(StatKey::PeakHbmBw),
            g(StatKey::PeakSramRdBw),
            g(StatKey::PeakSramWrBw),
            g(StatKey::PeakCmemRdBw),
            g(StatKey::PeakCmemWrBw),
            g(StatKey::PeakVmemRdBw),
            g(StatKey::PeakVmemWrBw),
        ],
        has_cmem: false,
        has_merged_vmem: s.i64(StatKey::HasMergedVmem).unwrap_or(0) != 0,
        has_megacore: s.i64(StatKey::HasMegacore).unwrap_or(0) != 0,
        peak_source: peak_source::STAT,
    };
    p.has_cmem = p.peak_bws_gbps[3] > 0.0 || p.peak_bws_gbps[4] > 0.0;
    p
}

/// Category of an HLO instruction as XProf names it: XLA's `HloInstruction::ToCategory`, which
/// XProf's HLO module map uses (fusions by kind; transposes, copies and reshapes are "data
/// formatting"; elementwise ops "non-fusion elementwise"; the rest their opcode).
/// `bitcast-convert` is elementwise in XLA only between types of one width, which the model
/// does not record: it keeps its opcode.
pub fn hlo_category(instr: &crate::model::HloInstr) -> String {
    let op = instr.opcode.as_str();
    match op {
        "fusion" => match instr.fusion_kind.as_str() {
            "kLoop" => "loop fusion",
            "kInput" => "input fusion",
            "kOutput" => "output fusion",
            "kCustom" => "custom fusion",
            _ => "fusion",
        },
        "transpose" | "copy" | "reshape" | "dynamic-reshape" => "data formatting",
        "map" => "non-fusion elementwise",
        o if o != "bitcast-convert" && xprof_hlo::query::ELEMENTWISE.contains(&o) => {
            "non-fusion elementwise"
        }
        o => o,
    }
    .to_string()
}

/// XProf's fused-instruction children of TPU ops (`UpdateOpMetricsDbFromHloModuleMap`): every
/// op whose HLO instruction is a fusion gets its fused instructions (but parameters and
/// tuples) appended to its children, recursively, each once, without time or cost (XProf has
/// no TPU cost model in its open-source build), named and typed from the HLO.
pub fn add_fusion_children(db: &mut OpMetricsDb, modules: &HashMap<u64, HloModuleInfo>) {
    fn children(
        module: &HloModuleInfo,
        instr: &crate::model::HloInstr,
        depth: u32,
    ) -> Vec<OpMetrics> {
        // Fusions nest a level or two; a cycle in a malformed module must not recurse forever.
        if depth > 16 {
            return Vec::new();
        }
        instr
            .fused_children
            .iter()
            .filter_map(|name| module.instructions.get(name))
            .map(|c| {
                let nested = children(module, c, depth + 1);
                OpMetrics {
                    name: c.name.clone(),
                    category: hlo_category(c),
                    long_name: c.expression.clone(),
                    // XProf joins these plainly (":" for an op without metadata).
                    provenance: format!("{}:{}", c.op_name, c.op_type),
                    occurrences: 1,
                    num_cores: 1,
                    core_type: CoreType::Unknown,
                    children: (!nested.is_empty()).then(|| {
                        Box::new(OpMetricsDb {
                            metrics: nested,
                            ..Default::default()
                        })
                    }),
                    ..Default::default()
                }
            })
            .collect()
    }
    for op in db.metrics.iter_mut().filter(|m| !m.is_idle()) {
        let Some(module) = modules.get(&op.program_id) else {
            continue;
        };
        let Some(instr) = module.instructions.get(&op.name) else {
            continue;
        };
        let fused = children(module, instr, 0);
        if fused.is_empty() {
            continue;
        }
        op.children
            .get_or_insert_with(Default::default)
            .metrics
            .extend(fused);
    }
}

/// XProf `ClassifyGpuCompute` for a kernel that is device compute: `Some(true)` for 16-bit
/// (`half` in the `shape` stat, or without one `half`/`fp16` in the name), `Some(false)` for
/// 32-bit, `None` for memcpys and NCCL collectives (`ClassifyGpuEvent`).
fn gpu_compute_is_16bit(name: &str, shapes: Option<&str>) -> Option<bool> {
    use crate::tfop::TfOpCategory;
    let cat = crate::tfop::parse_tf_op(name).category;
    if matches!(
        cat,
        TfOpCategory::MemcpyHToD | TfOpCategory::MemcpyDToH | TfOpCategory::MemcpyDToD
    ) || name
        .get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("nccl"))
    {
        return None;
    }
    Some(match shapes.filter(|s| !s.is_empty()) {
        Some(s) => s.contains("half"),
        None => name.contains("half") || name.contains("fp16"),
    })
}

/// Σ length of the union of spans.
fn union_len(spans: &mut [(i64, i64)]) -> u64 {
    spans.sort_unstable();
    let mut total = 0u64;
    let mut cur: Option<(i64, i64)> = None;
    for &(b, e) in spans.iter() {
        match cur {
            Some((cb, ce)) if b <= ce => cur = Some((cb, ce.max(e))),
            _ => {
                if let Some((cb, ce)) = cur {
                    total = total.saturating_add(crate::nesting::span_len(cb, ce));
                }
                cur = Some((b, e));
            }
        }
    }
    if let Some((cb, ce)) = cur {
        total = total.saturating_add(crate::nesting::span_len(cb, ce));
    }
    total
}

/// XProf `ComputePrecisionStats` on GPU: per step (group), the kernels' compute time made
/// non-overlapping (all GPUs of the host together, 16-bit winning over 32-bit where they
/// overlap), summed over steps. Kernels need a `correlation_id`. A kernel's group is its
/// `group_id`, else that of the host launch with its correlation id (`kernel_groups`: what
/// XProf's grouping writes on raw captures), else the group of the latest grouped kernel of its
/// GPU that started at or before it (what XProf 2.24.2 does on captures whose kernels are partly
/// grouped; checked in `tests/gpu_synthetic.rs`).
pub fn gpu_precision_stats(
    gpus: &[&Plane],
    kernel_groups: &crate::steps::KernelGroups,
) -> crate::metrics::PrecisionStats {
    // group → (16-bit spans, all compute spans)
    type Spans = Vec<(i64, i64)>;
    let mut by_group: std::collections::BTreeMap<i64, (Spans, Spans)> = Default::default();
    for plane in gpus {
        // (start, group, is_16bit, end) of compute kernels; group None = to be inferred.
        let mut evs: Vec<(i64, Option<i64>, bool, i64)> = Vec::new();
        for line in plane
            .lines
            .iter()
            .filter(|l| !(10_000..20_000).contains(&l.id))
        {
            for e in &line.events {
                let Some(correlation) = e.stats.i64(StatKey::CorrelationId).filter(|c| *c >= 0)
                else {
                    continue;
                };
                let Some(is16) =
                    gpu_compute_is_16bit(&plane.meta(e).name, e.stats.str(StatKey::TensorShapes))
                else {
                    continue;
                };
                let group = e
                    .stats
                    .i64(StatKey::GroupId)
                    .filter(|g| *g >= 0)
                    .or_else(|| kernel_groups.get(&correlation).copied());
                evs.push((e.start_ps, group, is16, e.end_ps()));
            }
        }
        // Grouped kernels first at equal starts, so an ungrouped one can join them.
        evs.sort_by_key(|&(b, g, _, _)| (b, g.is_none()));
        let mut last_group: Option<i64> = None;
        for (b, g, is16, e) in evs {
            if g.is_some() {
                last_group = g;
            }
            let Some(group) = g.or(last_group) else {
                continue;
            };
            let entry = by_group.entry(group).or_default();
            if is16 {
                entry.0.push((b, e));
            }
            entry.1.push((b, e));
        }
    }
    let mut out = crate::metrics::PrecisionStats::default();
    for (_, (mut s16, mut all)) in by_group {
        let p16 = union_len(&mut s16);
        let total = union_len(&mut all);
        out.compute_16bit_ps = out.compute_16bit_ps.saturating_add(p16);
        out.compute_32bit_ps = out
            .compute_32bit_ps
            .saturating_add(total.saturating_sub(p16));
    }
    out
}

/// One GPU plane's kernel database (XProf `ConvertDeviceTraceXPlaneToOpMetricsDb`): kernels
/// of one HLO op launched back to back in one step are one occurrence (kernels without a
/// `group_id` each their own); ops whose instruction is unknown are dropped.
/// Returns the db and the number of kernels dropped for lack of HLO.
pub fn gpu_db(plane: &Plane, modules: &HashMap<u64, HloModuleInfo>) -> (OpMetricsDb, u64) {
    let mut b = NamedDbBuilder::new();
    let mut first = i64::MAX;
    let mut last = i64::MIN;
    let mut dropped = 0u64;
    for line in &plane.lines {
        // Derived lines (XProf's reserved thread-id range) repeat device events.
        if line.id >= 10_000 && line.id < 20_000 {
            continue;
        }
        // (program, op, group) of the occurrence being merged, with its duration and cost.
        let mut cur: Option<(u64, String, Option<i64>, u64, OpMetrics)> = None;
        let flush = |cur: &mut Option<(u64, String, Option<i64>, u64, OpMetrics)>,
                     b: &mut NamedDbBuilder| {
            if let Some((pid, name, _, dur, tmpl)) = cur.take() {
                b.enter(pid, &name, dur, dur, || tmpl);
            }
        };
        for e in &line.events {
            first = first.min(e.start_ps);
            last = last.max(e.end_ps());
            let hlo_op = e
                .stats
                .str(StatKey::HloOp)
                .map(|s| s.rsplit(',').next().unwrap_or(s).trim().to_string());
            let pid = e.stats.u64(StatKey::ProgramId);
            let (Some(op_name), Some(pid)) = (hlo_op, pid) else {
                // A framework (TF) op run as a kernel outside XLA: `<tf op name>/<kernel>`,
                // typed by the framework op, one occurrence per kernel (XProf does the same).
                if let Some(full) = e.stats.str(StatKey::TfOp).filter(|t| !t.is_empty()) {
                    flush(&mut cur, &mut b);
                    let t = crate::tfop::parse_tf_op(full);
                    let name = format!("{}/{}", t.name, plane.meta(e).name);
                    let dur = e.duration_ps.max(0) as u64;
                    b.enter(0, &name, dur, dur, || OpMetrics {
                        category: if t.kind.is_empty() {
                            "Unknown".into()
                        } else {
                            t.kind.to_string()
                        },
                        provenance: full.to_string(),
                        is_eager: e.stats.i64(StatKey::IsEager).unwrap_or(0) != 0,
                        ..Default::default()
                    });
                }
                continue;
            };
            let Some(instr) = modules.get(&pid).and_then(|m| m.instructions.get(&op_name)) else {
                dropped = dropped.saturating_add(1);
                continue;
            };
            // XProf's tracker compares optional group ids: an absent id equals no other, so
            // each ungrouped launch is an occurrence of its own.
            let group = e.stats.i64(StatKey::GroupId);
            let same = cur.as_ref().is_some_and(|(p, n, g, _, _)| {
                *p == pid && *n == op_name && group.is_some() && *g == group
            });
            if !same {
                flush(&mut cur, &mut b);
                let mut t = OpMetrics {
                    category: hlo_category(instr),
                    provenance: crate::tfop::tf_op_fullname(&instr.op_name, &instr.op_type),
                    long_name: instr.expression.clone(),
                    source_file: instr.source_file.clone(),
                    source_stack: instr.source_stack.clone(),
                    // XProf gives a GPU op without a source file line -1.
                    source_line: if instr.source_file.is_empty() {
                        -1
                    } else {
                        instr.source_line
                    },
                    is_eager: e.stats.i64(StatKey::IsEager).unwrap_or(0) != 0,
                    core_type: CoreType::Unknown,
                    ..Default::default()
                };
                if let Some(f) = e.stats.u64(StatKey::Flops) {
                    t.flops = f;
                    t.cost_source = CostSource::EventStats;
                }
                if let Some(by) = e.stats.u64(StatKey::BytesAccessed) {
                    t.bytes_accessed = by;
                    t.cost_source = CostSource::EventStats;
                }
                // XProf `DeviceOpMetricsDbBuilder::EnterOp`: the HLO cost analysis wins
                // wherever it gives more than 0; the kernel's stats fill the rest.
                if let Some(c) = instr.estimated_cost {
                    t.estimated_flops = c.flops;
                    t.estimated_bytes_accessed = c.bytes_accessed;
                }
                if let Some(c) = instr.cost {
                    if c.flops > 0 {
                        t.flops = c.flops;
                        t.cost_source = CostSource::HloCostModel;
                    }
                    if c.model_flops > 0 {
                        t.model_flops = c.model_flops;
                        t.cost_source = CostSource::HloCostModel;
                    }
                    if c.bytes_accessed > 0 {
                        t.bytes_accessed = c.bytes_accessed;
                        t.cost_source = CostSource::HloCostModel;
                        // XProf exports only the positive parts of the breakdown.
                        for (kind, bytes) in [
                            (crate::metrics::AccessKind::Read, c.hbm_read),
                            (crate::metrics::AccessKind::Write, c.hbm_write),
                        ] {
                            if bytes > 0 {
                                t.memory_accessed.push(crate::metrics::MemoryAccessed {
                                    kind,
                                    memory_space: crate::metrics::MEMORY_SPACE_HBM,
                                    bytes,
                                });
                            }
                        }
                    }
                }
                cur = Some((pid, op_name, group, 0, t));
            }
            if let Some(c) = cur.as_mut() {
                c.3 = c.3.saturating_add(e.duration_ps.max(0) as u64);
            }
        }
        flush(&mut cur, &mut b);
    }
    let total = if first == i64::MAX {
        0
    } else {
        crate::nesting::span_len(first, last)
    };
    (b.finish(total, true), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventMetadata, Line, StatValue, Stats};

    fn meta(
        name: &str,
        display: &str,
        program: u64,
        symbol: u64,
        cat: &str,
        flops: Option<u64>,
    ) -> EventMetadata {
        let mut s = Stats::default();
        s.push(StatKey::ProgramId, StatValue::Uint(program));
        s.push(StatKey::SymbolId, StatValue::Uint(symbol));
        s.push(StatKey::HloCategory, StatValue::Str(cat.into()));
        if let Some(f) = flops {
            s.push(StatKey::Flops, StatValue::Uint(f));
        }
        EventMetadata {
            name: name.into(),
            display_name: display.into(),
            stats: s,
            ..Default::default()
        }
    }

    fn ev(md: u32, start: i64, dur: i64, dev: Option<(i64, i64)>) -> Event {
        let mut s = Stats::default();
        if let Some((o, d)) = dev {
            s.push(StatKey::DeviceOffsetPs, StatValue::Int(o));
            s.push(StatKey::DeviceDurationPs, StatValue::Int(d));
        }
        Event {
            metadata: md,
            start_ps: start,
            duration_ps: dur,
            stats: s,
        }
    }

    fn plane(events: Vec<Event>, modules: Vec<Event>) -> Plane {
        Plane {
            name: "/device:TPU:0".into(),
            metadata: vec![
                meta("%while.1 = while(...)", "while.1", 5, 1, "while", None),
                meta(
                    "%fusion.2 = f32[] fusion(...)",
                    "fusion.2",
                    5,
                    2,
                    "loop fusion",
                    Some(100),
                ),
                meta("%infeed.3 = infeed()", "infeed.3", 5, 3, "infeed", None),
                meta("root", "", 5, 0, "", None),
                meta("jit_f(5)", "", 0, 0, "", None),
            ],
            lines: vec![
                Line {
                    name: XLA_MODULES.into(),
                    events: modules,
                    ..Default::default()
                },
                Line {
                    name: XLA_OPS.into(),
                    events,
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn tensor_core_db_nests_on_the_device_clock_and_totals_cost() {
        // while [0,1000] contains fusion [100,300] and [400,500]; infeed [1200,1300] outside.
        // The root symbol [0,1300] is dropped but still nests.
        let p = plane(
            vec![
                ev(3, 0, 1300, None),
                ev(0, 0, 1000, None),
                ev(1, 100, 200, None),
                ev(1, 400, 100, None),
                ev(2, 1200, 100, None),
            ],
            vec![],
        );
        let db = tensor_core_db(&p);
        let by = |n: &str| db.metrics.iter().find(|m| m.name == n).unwrap();
        assert_eq!(
            (by("while.1").time_ps, by("while.1").self_time_ps),
            (1000, 700)
        );
        let f = by("fusion.2");
        assert_eq!(
            (
                f.occurrences,
                f.time_ps,
                f.self_time_ps,
                f.flops,
                f.model_flops
            ),
            (2, 300, 300, 200, 200)
        );
        assert_eq!(f.long_name, "%fusion.2 = f32[] fusion(...)");
        assert_eq!(db.total_op_time_ps, 700 + 300 + 100);
        assert_eq!(db.total_time_ps, 1300);
        assert!(db.metrics.iter().all(|m| m.name != "root"));
        assert_eq!(db.metrics.last().unwrap().self_time_ps, 200);
    }

    #[test]
    fn device_offsets_take_precedence_and_the_window_spans_both_clocks() {
        let p = plane(
            vec![
                ev(1, 1_000, 500, Some((900, 480))),
                ev(1, 3_000, 500, Some((2_900, 520))),
            ],
            vec![],
        );
        let db = tensor_core_db(&p);
        let f = db.metrics.iter().find(|m| m.name == "fusion.2").unwrap();
        assert_eq!(f.time_ps, 1000);
        // begin 900 (device), end max(3420 device, 3500 host)
        assert_eq!(db.total_time_ps, 2600);
    }

    #[test]
    fn plane_kinds() {
        assert!(is_tpu_tensor_core_plane("/device:TPU:12"));
        assert!(!is_tpu_tensor_core_plane("/device:TPU:1 SparseCore 0"));
        assert!(is_sparse_core_plane("/device:TPU:1 SparseCore 0"));
        assert!(is_sparse_core_plane("/device:TPU:1 SparseCore Vector 3"));
        assert!(!is_sparse_core_plane("/device:TPU:1 SparseCore"));
        assert!(!is_sparse_core_plane("/device:TPU: SparseCore 0"));
        assert!(!is_sparse_core_plane("/device:TPU:1 SparseCore x y z"));
    }

    #[test]
    fn cores_of_one_chip_are_unioned_others_summed() {
        let mut a = DutyCycle::default();
        a.add(0, 100, true);
        a.add(0, 200, false);
        let mut b = DutyCycle::default();
        b.add(50, 150, true);
        let mut c = DutyCycleCombiner::default();
        c.add(&a, Some(0));
        c.add(&b, Some(0));
        // chip 0: active [0,150] = 150 over window [0,200] → idle 50.
        assert_eq!((c.active_ps(), c.idle_ps()), (150, 50));
        c.add(&b, None);
        assert_eq!((c.active_ps(), c.idle_ps()), (250, 50));
    }

    #[test]
    fn duty_cycle_counts_off_duty_ops_and_modules_as_idle_window() {
        let p = plane(
            vec![
                ev(1, 100, 200, None),
                ev(2, 300, 100, None),
                ev(1, 250, 100, None),
            ],
            vec![ev(4, 0, 1000, None)],
        );
        let d = duty_cycle(&p);
        assert_eq!(d.window_ps(), 1000);
        // [100,300] ∪ [250,350] = 250; infeed is off duty.
        assert_eq!(d.active_ps(), 250);
        assert_eq!(d.idle_ps(), 750);
    }
}
