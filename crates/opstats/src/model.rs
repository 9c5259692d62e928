//! The engine's input model: one host's XSpace reduced to what the op-statistics views need.
//!
//! It mirrors the XSpace shape (planes → lines → events, event metadata, stats) but with
//! stats resolved **by name** to [`StatKey`] once, times made absolute (ps), and strings owned
//! or shared. The adapter from the protobuf reader (`crate::adapter`) fills it; unit tests
//! build it by hand. Keeping the engine on this model means the analysis is testable without
//! protobuf bytes and does not depend on how the reader lays out its data.

use std::collections::HashMap;
use std::sync::Arc;

/// The stats the engine reads, by their XProf names (`xla/tsl/profiler/utils/xplane_schema.cc`).
/// Stats with other names are not carried into the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatKey {
    // Op identity and cost (XLA Ops metadata; some also on events).
    ProgramId,
    SymbolId,
    HloCategory,
    TfOp,
    Flops,
    ModelFlops,
    BytesAccessed,
    MemoryAccessBreakdown,
    DeduplicatedName,
    SourceInfo,
    SourceStack,
    // Timing (events).
    DeviceOffsetPs,
    DeviceDurationPs,
    TimeScaleMultiplier,
    SelfDurationPs,
    MinDurationPs,
    DmaStallDurationPs,
    // SparseCore offload (TensorCore op ↔ SparseCore module).
    OffloadCoreId,
    TcOffloadStartId,
    // Grouping and steps.
    GroupId,
    StepNum,
    StepName,
    IsRoot,
    ProducerType,
    ProducerId,
    ConsumerType,
    ConsumerId,
    CorrelationId,
    IsEager,
    // Host-executed XLA ops (CPU) and GPU kernels.
    HloOp,
    HloModule,
    // Device plane capabilities.
    DeviceTypeString,
    PeakTeraflopsPerSecond,
    PeakHbmBw,
    PeakSramRdBw,
    PeakSramWrBw,
    PeakCmemRdBw,
    PeakCmemWrBw,
    PeakVmemRdBw,
    PeakVmemWrBw,
    HasMegacore,
    HasMergedVmem,
    CoreDetails,
    // GPU device capabilities.
    ClockRateKhz,
    CoreCount,
    MemoryBandwidth,
    ComputeCapMajor,
    ComputeCapMinor,
    DeviceVendor,
    /// `gpu_device_name` (AMD: the gfx architecture, e.g. `gfx942`).
    GpuDeviceName,
    /// `shape` (XProf `kTensorShapes`): a kernel's tensor shapes (GPU precision).
    TensorShapes,
    // Host plane utilisation stats some runtimes emit.
    MatrixUnitUtilizationPercent,
    HbmUtilizationPercent,
    // Task environment.
    ProfileStartTime,
    ProfileStopTime,
}

impl StatKey {
    /// The key for an XProf stat name, `None` for stats the engine does not use.
    pub fn from_name(name: &str) -> Option<StatKey> {
        use StatKey::*;
        Some(match name {
            "program_id" => ProgramId,
            "symbol_id" => SymbolId,
            "hlo_category" => HloCategory,
            "tf_op" => TfOp,
            "flops" => Flops,
            "model_flops" => ModelFlops,
            "bytes_accessed" => BytesAccessed,
            "memory_access_breakdown" => MemoryAccessBreakdown,
            "deduplicated_name" => DeduplicatedName,
            "source" => SourceInfo,
            "source_stack" => SourceStack,
            "device_offset_ps" => DeviceOffsetPs,
            "device_duration_ps" => DeviceDurationPs,
            "Time Scale Multiplier" => TimeScaleMultiplier,
            "self_duration_ps" => SelfDurationPs,
            "min_duration_ps" => MinDurationPs,
            "dma_stall_duration_ps" => DmaStallDurationPs,
            "offload_core_id" => OffloadCoreId,
            "tc_offload_start_id" => TcOffloadStartId,
            "group_id" => GroupId,
            "step_num" => StepNum,
            "step_name" => StepName,
            "_r" => IsRoot,
            "_pt" => ProducerType,
            "_p" => ProducerId,
            "_ct" => ConsumerType,
            "_c" => ConsumerId,
            "correlation_id" => CorrelationId,
            "is_eager" => IsEager,
            "hlo_op" => HloOp,
            "hlo_module" => HloModule,
            "device_type_string" => DeviceTypeString,
            "peak_teraflops_per_second" => PeakTeraflopsPerSecond,
            "peak_hbm_bw_gigabytes_per_second" => PeakHbmBw,
            "peak_sram_rd_bw_gigabytes_per_second" => PeakSramRdBw,
            "peak_sram_wr_bw_gigabytes_per_second" => PeakSramWrBw,
            "peak_cmem_rd_bw_gigabytes_per_second" => PeakCmemRdBw,
            "peak_cmem_wr_bw_gigabytes_per_second" => PeakCmemWrBw,
            "peak_vmem_rd_bw_gigabytes_per_second" => PeakVmemRdBw,
            "peak_vmem_wr_bw_gigabytes_per_second" => PeakVmemWrBw,
            "has_megacore" => HasMegacore,
            "has_merged_vmem" => HasMergedVmem,
            "core_details" => CoreDetails,
            "clock_rate" => ClockRateKhz,
            "core_count" => CoreCount,
            "memory_bandwidth" => MemoryBandwidth,
            "compute_cap_major" => ComputeCapMajor,
            "compute_cap_minor" => ComputeCapMinor,
            "device_vendor" => DeviceVendor,
            "gpu_device_name" => GpuDeviceName,
            "shape" => TensorShapes,
            "matrix_unit_utilization_percent" => MatrixUnitUtilizationPercent,
            "hbm_utilization_percent" => HbmUtilizationPercent,
            "profile_start_time" => ProfileStartTime,
            "profile_stop_time" => ProfileStopTime,
            _ => return None,
        })
    }
}

/// A stat value with XProf's accessor semantics.
#[derive(Clone, Debug, PartialEq)]
pub enum StatValue {
    Int(i64),
    Uint(u64),
    Double(f64),
    /// `str_value`, or a `ref_value` already resolved through the plane's stat metadata.
    Str(Arc<str>),
    Bytes(Arc<[u8]>),
}

impl StatValue {
    /// `IntOrUintValue`: integers as u64 (two's complement for negative int64, like XProf's
    /// cast); doubles truncated.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            StatValue::Int(v) => Some(*v as u64),
            StatValue::Uint(v) => Some(*v),
            StatValue::Double(v) => Some(*v as u64),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            StatValue::Int(v) => Some(*v),
            StatValue::Uint(v) => Some(*v as i64),
            StatValue::Double(v) => Some(*v as i64),
            _ => None,
        }
    }
    /// `DoubleValue`, accepting integers too.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            StatValue::Int(v) => Some(*v as f64),
            StatValue::Uint(v) => Some(*v as f64),
            StatValue::Double(v) => Some(*v),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            StatValue::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            StatValue::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

/// A small list of resolved stats (events carry a handful, so a list beats a map).
///
/// The entries live in a shared chunk: the adapter stores all stats of a run of events in one
/// vector and each event's `Stats` is a range of it, so converting a capture makes one
/// allocation per run instead of one per event, and an event is 16 bytes smaller. A list
/// built by hand ([`Stats::from`], [`Stats::push`]) owns its chunk.
#[derive(Clone, Default)]
pub struct Stats {
    chunk: Option<Arc<Vec<(StatKey, StatValue)>>>,
    start: u32,
    len: u32,
}

impl Stats {
    /// `len` entries of `chunk` from `start` (the adapter's per-run storage).
    pub(crate) fn in_chunk(chunk: &Arc<Vec<(StatKey, StatValue)>>, start: u32, len: u32) -> Self {
        debug_assert!(start as usize + len as usize <= chunk.len());
        Stats {
            chunk: (len > 0).then(|| chunk.clone()),
            start,
            len,
        }
    }
    /// A range of a chunk not yet shared ([`Stats::in_chunk`] once it is).
    pub(crate) fn pending(start: u32, len: u32) -> Self {
        Stats {
            chunk: None,
            start,
            len,
        }
    }
    /// `(start, len)` in the chunk.
    pub(crate) fn range(&self) -> (u32, u32) {
        (self.start, self.len)
    }
    /// The entries, in file order.
    pub fn as_slice(&self) -> &[(StatKey, StatValue)] {
        match &self.chunk {
            Some(c) => &c[self.start as usize..self.start as usize + self.len as usize],
            None => &[],
        }
    }
    pub fn iter(&self) -> std::slice::Iter<'_, (StatKey, StatValue)> {
        self.as_slice().iter()
    }
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
    pub fn get(&self, key: StatKey) -> Option<&StatValue> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
    pub fn u64(&self, key: StatKey) -> Option<u64> {
        self.get(key).and_then(StatValue::as_u64)
    }
    pub fn i64(&self, key: StatKey) -> Option<i64> {
        self.get(key).and_then(StatValue::as_i64)
    }
    pub fn f64(&self, key: StatKey) -> Option<f64> {
        self.get(key).and_then(StatValue::as_f64)
    }
    pub fn str(&self, key: StatKey) -> Option<&str> {
        self.get(key).and_then(StatValue::as_str)
    }
    pub fn has(&self, key: StatKey) -> bool {
        self.get(key).is_some()
    }
    pub fn push(&mut self, key: StatKey, value: StatValue) {
        let end = self.start as usize + self.len as usize;
        // Append in place when this list owns the tail of its chunk; copy out otherwise.
        if let Some(c) = self.chunk.as_mut().and_then(Arc::get_mut)
            && c.len() == end
            && self.len < u32::MAX
        {
            c.push((key, value));
            self.len += 1;
            return;
        }
        let mut v = self.as_slice().to_vec();
        v.push((key, value));
        *self = Stats::from(v);
    }
}

impl From<Vec<(StatKey, StatValue)>> for Stats {
    fn from(v: Vec<(StatKey, StatValue)>) -> Self {
        let len = u32::try_from(v.len()).expect("fewer than 2^32 stats");
        Stats {
            chunk: (len > 0).then(|| Arc::new(v)),
            start: 0,
            len,
        }
    }
}

impl PartialEq for Stats {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// `XEventMetadata`.
#[derive(Clone, Debug, Default)]
pub struct EventMetadata {
    pub id: i64,
    pub name: String,
    pub display_name: String,
    pub stats: Stats,
    /// Indices (into the plane's `metadata`) of the children metadata (fusion bodies).
    pub children: Vec<u32>,
}

/// One event. Times are absolute ps on the XSpace's clock (`line.timestamp_ns*1000+offset`).
#[derive(Clone, Debug, Default)]
pub struct Event {
    /// Index into the plane's `metadata`.
    pub metadata: u32,
    pub start_ps: i64,
    pub duration_ps: i64,
    /// `num_occurrences` of an aggregated event (0 for an ordinary one).
    pub num_occurrences: i64,
    pub stats: Stats,
}

impl Event {
    pub fn end_ps(&self) -> i64 {
        self.start_ps.saturating_add(self.duration_ps)
    }
}

/// `XLine`.
#[derive(Clone, Debug, Default)]
pub struct Line {
    pub id: i64,
    pub name: String,
    pub display_name: String,
    pub timestamp_ns: i64,
    pub events: Vec<Event>,
}

/// `XPlane`.
#[derive(Clone, Debug, Default)]
pub struct Plane {
    pub id: i64,
    pub name: String,
    pub lines: Vec<Line>,
    pub metadata: Vec<EventMetadata>,
    pub stats: Stats,
}

impl Plane {
    pub fn meta(&self, e: &Event) -> &EventMetadata {
        static EMPTY: std::sync::OnceLock<EventMetadata> = std::sync::OnceLock::new();
        self.metadata
            .get(e.metadata as usize)
            .unwrap_or_else(|| EMPTY.get_or_init(EventMetadata::default))
    }
    pub fn line(&self, name: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.name == name)
    }
}

/// One HLO instruction as far as the op views need it (from the module's HloProto).
#[derive(Clone, Debug, Default)]
pub struct HloInstr {
    pub name: String,
    pub opcode: String,
    /// `fusion_kind` (`kLoop`, ...) for fusions.
    pub fusion_kind: String,
    /// `metadata.op_name`: the framework op (provenance).
    pub op_name: String,
    pub source_file: String,
    pub source_line: i32,
    /// The instruction as XLA prints it (best effort; used as `long_name`).
    pub expression: String,
    /// FLOPs / bytes from our HLO cost model (`crate::cost_model`; used for GPU kernels).
    pub cost: Option<crate::cost_model::HloCost>,
}

/// The HLO of one program (module), keyed by instruction name.
#[derive(Clone, Debug, Default)]
pub struct HloModuleInfo {
    pub program_id: u64,
    pub name: String,
    pub instructions: HashMap<String, HloInstr>,
    /// True when backward-pass / optimizer signals appear (XProf's `is_training`).
    pub is_training: bool,
}

/// One host's capture (one XSpace), ready for the engine.
#[derive(Clone, Debug, Default)]
pub struct HostSpace {
    /// The host (file stem) this space came from.
    pub host: String,
    /// `XSpace.hostnames[0]`, else "localhost".
    pub hostname: String,
    pub planes: Vec<Plane>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// Programs known from `/host:metadata` or `*.hlo_proto.pb`, by program id.
    pub modules: HashMap<u64, HloModuleInfo>,
}

impl HostSpace {
    pub fn plane(&self, name: &str) -> Option<&Plane> {
        self.planes.iter().find(|p| p.name == name)
    }
}
