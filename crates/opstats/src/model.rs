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
    /// Not a stat: an aggregated XEvent's `num_occurrences` (its `data` instead of an offset).
    /// Only aggregated events have one, so it is kept among their stats rather than in every
    /// [`Event`] (8 bytes each); no stat name maps to it.
    NumOccurrences,
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

/// A stat value with XProf's accessor semantics, owned: what hand-built stats are made of
/// ([`Stats::from`], [`Stats::push`]). Stored stats are read back as [`StatRef`]s.
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
    /// The value borrowed, with the accessors of [`StatRef`].
    pub fn as_ref(&self) -> StatRef<'_> {
        match self {
            StatValue::Int(v) => StatRef::Int(*v),
            StatValue::Uint(v) => StatRef::Uint(*v),
            StatValue::Double(v) => StatRef::Double(*v),
            StatValue::Str(s) => StatRef::Str(s),
            StatValue::Bytes(b) => StatRef::Bytes(b),
        }
    }
    /// [`StatRef::as_u64`].
    pub fn as_u64(&self) -> Option<u64> {
        self.as_ref().as_u64()
    }
    /// [`StatRef::as_i64`].
    pub fn as_i64(&self) -> Option<i64> {
        self.as_ref().as_i64()
    }
    /// [`StatRef::as_f64`].
    pub fn as_f64(&self) -> Option<f64> {
        self.as_ref().as_f64()
    }
    pub fn as_str(&self) -> Option<&str> {
        self.as_ref().as_str()
    }
    pub fn as_bytes(&self) -> Option<&[u8]> {
        self.as_ref().as_bytes()
    }
}

/// A stat value borrowed from its [`Stats`], with XProf's accessor semantics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StatRef<'a> {
    Int(i64),
    Uint(u64),
    Double(f64),
    /// `str_value`, or a `ref_value` already resolved through the plane's stat metadata.
    Str(&'a str),
    Bytes(&'a [u8]),
}

impl<'a> StatRef<'a> {
    /// `IntOrUintValue`: integers as u64 (two's complement for negative int64, like XProf's
    /// cast); doubles truncated.
    pub fn as_u64(self) -> Option<u64> {
        match self {
            StatRef::Int(v) => Some(v as u64),
            StatRef::Uint(v) => Some(v),
            StatRef::Double(v) => Some(v as u64),
            _ => None,
        }
    }
    pub fn as_i64(self) -> Option<i64> {
        match self {
            StatRef::Int(v) => Some(v),
            StatRef::Uint(v) => Some(v as i64),
            StatRef::Double(v) => Some(v as i64),
            _ => None,
        }
    }
    /// `DoubleValue`, accepting integers too.
    pub fn as_f64(self) -> Option<f64> {
        match self {
            StatRef::Int(v) => Some(v as f64),
            StatRef::Uint(v) => Some(v as f64),
            StatRef::Double(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_str(self) -> Option<&'a str> {
        match self {
            StatRef::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            StatRef::Bytes(b) => Some(b),
            _ => None,
        }
    }
    /// The value owned (strings and bytes copied).
    pub fn to_owned_value(self) -> StatValue {
        match self {
            StatRef::Int(v) => StatValue::Int(v),
            StatRef::Uint(v) => StatValue::Uint(v),
            StatRef::Double(v) => StatValue::Double(v),
            StatRef::Str(s) => StatValue::Str(s.into()),
            StatRef::Bytes(b) => StatValue::Bytes(b.into()),
        }
    }
}

/// One stored stat: 16 bytes, where a `(StatKey, StatValue)` takes 32. The key sits beside
/// the variant's tag, and strings and bytes are indices into the chunk's tables instead of
/// fat pointers (a capture's millions of string stats repeat a few distinct values).
#[derive(Clone, Copy, Debug)]
enum Entry {
    Int(StatKey, i64),
    Uint(StatKey, u64),
    Double(StatKey, f64),
    /// Index into [`StatChunk::strs`].
    Str(StatKey, u32),
    /// Index into [`StatChunk::blobs`].
    Bytes(StatKey, u32),
}

const _: () = assert!(std::mem::size_of::<Entry>() == 16);

impl Entry {
    fn key(&self) -> StatKey {
        match *self {
            Entry::Int(k, _)
            | Entry::Uint(k, _)
            | Entry::Double(k, _)
            | Entry::Str(k, _)
            | Entry::Bytes(k, _) => k,
        }
    }
}

/// The storage [`Stats`] are ranges of: the stats of a run of events (or of a plane's
/// metadata, or one hand-built list), with the strings and bytes they refer to.
#[derive(Clone, Default)]
pub(crate) struct StatChunk {
    entries: Vec<Entry>,
    strs: Vec<Arc<str>>,
    blobs: Vec<Arc<[u8]>>,
}

impl StatChunk {
    /// Stats stored so far.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Append a stat (strings and bytes get a table slot of their own).
    pub(crate) fn push(&mut self, key: StatKey, value: StatValue) {
        let entry = match value {
            StatValue::Int(v) => Entry::Int(key, v),
            StatValue::Uint(v) => Entry::Uint(key, v),
            StatValue::Double(v) => Entry::Double(key, v),
            StatValue::Str(s) => Entry::Str(key, self.add_str(s)),
            StatValue::Bytes(b) => {
                let i = table_index(self.blobs.len());
                self.blobs.push(b);
                Entry::Bytes(key, i)
            }
        };
        self.entries.push(entry);
    }
    /// Add a string to the table, for [`StatChunk::push_str_at`]; returns its index.
    pub(crate) fn add_str(&mut self, s: Arc<str>) -> u32 {
        let i = table_index(self.strs.len());
        self.strs.push(s);
        i
    }
    /// Append a string stat whose value is already in the table ([`StatChunk::add_str`]), so
    /// stats repeating a string share one slot.
    pub(crate) fn push_str_at(&mut self, key: StatKey, index: u32) {
        debug_assert!((index as usize) < self.strs.len());
        self.entries.push(Entry::Str(key, index));
    }
    /// Reserve room for `additional` more stats.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }
    /// Release unused capacity (the chunk is complete).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
        self.strs.shrink_to_fit();
        self.blobs.shrink_to_fit();
    }
    /// The value of `e` owned (strings and bytes shared, not copied).
    fn value(&self, e: &Entry) -> StatValue {
        match *e {
            Entry::Int(_, v) => StatValue::Int(v),
            Entry::Uint(_, v) => StatValue::Uint(v),
            Entry::Double(_, v) => StatValue::Double(v),
            Entry::Str(_, i) => StatValue::Str(self.strs[i as usize].clone()),
            Entry::Bytes(_, i) => StatValue::Bytes(self.blobs[i as usize].clone()),
        }
    }
    fn view(&self, e: &Entry) -> (StatKey, StatRef<'_>) {
        match *e {
            Entry::Int(k, v) => (k, StatRef::Int(v)),
            Entry::Uint(k, v) => (k, StatRef::Uint(v)),
            Entry::Double(k, v) => (k, StatRef::Double(v)),
            Entry::Str(k, i) => (k, StatRef::Str(&self.strs[i as usize])),
            Entry::Bytes(k, i) => (k, StatRef::Bytes(&self.blobs[i as usize])),
        }
    }
}

/// A table index: a chunk holds fewer than 2^32 stats, so fewer strings or byte values.
fn table_index(len: usize) -> u32 {
    u32::try_from(len).expect("fewer than 2^32 values per stat chunk")
}

/// A small list of resolved stats (events carry a handful, so a list beats a map).
///
/// The entries live in a shared chunk: the adapter stores all stats of a run of events in one
/// chunk and each event's `Stats` is a range of it, so converting a capture makes one
/// allocation per run instead of one per event, and an event is 16 bytes smaller. A list
/// built by hand ([`Stats::from`], [`Stats::push`]) owns its chunk.
#[derive(Clone, Default)]
pub struct Stats {
    chunk: Option<Arc<StatChunk>>,
    start: u32,
    len: u32,
}

impl Stats {
    /// `len` entries of `chunk` from `start` (the adapter's per-run storage).
    pub(crate) fn in_chunk(chunk: &Arc<StatChunk>, start: u32, len: u32) -> Self {
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
    fn entries(&self) -> &[Entry] {
        match &self.chunk {
            Some(c) => &c.entries[self.start as usize..self.start as usize + self.len as usize],
            None => &[],
        }
    }
    /// The stats, in file order.
    pub fn iter(&self) -> StatsIter<'_> {
        StatsIter {
            chunk: self.chunk.as_deref(),
            entries: self.entries().iter(),
        }
    }
    pub fn len(&self) -> usize {
        self.entries().len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }
    /// The first stat with `key`.
    pub fn get(&self, key: StatKey) -> Option<StatRef<'_>> {
        let e = self.entries().iter().find(|e| e.key() == key)?;
        Some(self.chunk.as_deref()?.view(e).1)
    }
    pub fn u64(&self, key: StatKey) -> Option<u64> {
        self.get(key).and_then(StatRef::as_u64)
    }
    pub fn i64(&self, key: StatKey) -> Option<i64> {
        self.get(key).and_then(StatRef::as_i64)
    }
    pub fn f64(&self, key: StatKey) -> Option<f64> {
        self.get(key).and_then(StatRef::as_f64)
    }
    pub fn str(&self, key: StatKey) -> Option<&str> {
        self.get(key).and_then(StatRef::as_str)
    }
    pub fn has(&self, key: StatKey) -> bool {
        self.entries().iter().any(|e| e.key() == key)
    }
    pub fn push(&mut self, key: StatKey, value: StatValue) {
        let end = self.start as usize + self.len as usize;
        // Append in place when this list owns the tail of its chunk; copy out otherwise.
        if let Some(c) = self.chunk.as_mut().and_then(Arc::get_mut)
            && c.len() == end
            && self.len < u32::MAX
        {
            c.push(key, value);
            self.len += 1;
            return;
        }
        let mut own = StatChunk::default();
        if let Some(c) = &self.chunk {
            for e in self.entries() {
                own.push(e.key(), c.value(e));
            }
        }
        own.push(key, value);
        *self = Stats::whole(own);
    }
    /// A list owning all of `chunk`.
    fn whole(chunk: StatChunk) -> Self {
        let len = u32::try_from(chunk.len()).expect("fewer than 2^32 stats");
        Stats {
            chunk: (len > 0).then(|| Arc::new(chunk)),
            start: 0,
            len,
        }
    }
}

/// [`Stats::iter`]: `(key, value)` in file order.
#[derive(Clone)]
pub struct StatsIter<'a> {
    chunk: Option<&'a StatChunk>,
    entries: std::slice::Iter<'a, Entry>,
}

impl<'a> Iterator for StatsIter<'a> {
    type Item = (StatKey, StatRef<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        let e = self.entries.next()?;
        Some(self.chunk?.view(e))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for StatsIter<'_> {}

impl From<Vec<(StatKey, StatValue)>> for Stats {
    fn from(v: Vec<(StatKey, StatValue)>) -> Self {
        let mut chunk = StatChunk::default();
        chunk.reserve(v.len());
        for (k, value) in v {
            chunk.push(k, value);
        }
        Stats::whole(chunk)
    }
}

impl PartialEq for Stats {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
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
    /// The event's stats; an aggregated event's `num_occurrences` is among them
    /// ([`StatKey::NumOccurrences`], [`Event::num_occurrences`]).
    pub stats: Stats,
}

const _: () = assert!(std::mem::size_of::<Event>() == 40);

impl Event {
    /// `num_occurrences` of an aggregated event (0 for an ordinary one).
    pub fn num_occurrences(&self) -> i64 {
        self.stats.i64(StatKey::NumOccurrences).unwrap_or(0)
    }
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
