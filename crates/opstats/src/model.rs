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
    /// `id` (XProf `kStepId`): a TensorFlow function or session run (tf.data's and
    /// executors' events).
    StepId,
    /// `iter_num`: an iteration of a TensorFlow executor loop.
    IterNum,
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
            "id" => StepId,
            "iter_num" => IterNum,
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

/// One stored stat: 8 bytes, where a `(StatKey, StatValue)` takes 32. Integers that fit in
/// 48 bits (nearly all: ids, counts, times) are stored inline; wider integers, doubles,
/// strings and bytes are indices into the chunk's tables (a capture's millions of string
/// stats repeat a few distinct values).
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: StatKey,
    kind: Kind,
    /// The payload's low 16 and high 32 bits (two fields keep the entry at 8 bytes).
    low: u16,
    high: u32,
}

/// What an [`Entry`]'s 48-bit payload holds.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A signed value in 48-bit two's complement.
    Int,
    Uint,
    /// Index into [`StatChunk::wide`] (the value's bits).
    WideInt,
    WideUint,
    Double,
    /// Index into [`StatChunk::strs`].
    Str,
    /// Index into [`StatChunk::blobs`].
    Bytes,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 8);

const PAYLOAD_BITS: u32 = 48;

impl Entry {
    fn new(key: StatKey, kind: Kind, payload: u64) -> Self {
        debug_assert!(payload >> PAYLOAD_BITS == 0);
        Entry {
            key,
            kind,
            low: payload as u16,
            high: (payload >> 16) as u32,
        }
    }
    fn payload(&self) -> u64 {
        self.low as u64 | (self.high as u64) << 16
    }
    /// The payload as an index into one of the chunk's tables.
    fn index(&self) -> usize {
        self.payload() as usize
    }
}

/// `v` as a payload in 48-bit two's complement, if it fits.
fn int_payload(v: i64) -> Option<u64> {
    let shift = 64 - PAYLOAD_BITS;
    ((v << shift) >> shift == v).then_some(v as u64 & ((1 << PAYLOAD_BITS) - 1))
}

/// The value of an `int_payload`.
fn int_of_payload(payload: u64) -> i64 {
    let shift = 64 - PAYLOAD_BITS;
    ((payload << shift) as i64) >> shift
}

/// The storage [`Stats`] are ranges of: the stats of a run of events (or of a plane's
/// metadata, or one hand-built list), with the values that do not fit in an entry.
#[derive(Clone, Default)]
pub(crate) struct StatChunk {
    entries: Vec<Entry>,
    /// Integers wider than 48 bits and doubles, as bits.
    wide: Vec<u64>,
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
        match value {
            StatValue::Int(v) => self.push_int(key, v),
            StatValue::Uint(v) => self.push_uint(key, v),
            StatValue::Double(v) => self.push_double(key, v),
            StatValue::Str(s) => {
                let i = self.add_str(s);
                self.push_str_at(key, i);
            }
            StatValue::Bytes(b) => {
                let i = table_index(self.blobs.len());
                self.blobs.push(b);
                self.entries.push(Entry::new(key, Kind::Bytes, i.into()));
            }
        }
    }
    pub(crate) fn push_int(&mut self, key: StatKey, v: i64) {
        let entry = match int_payload(v) {
            Some(p) => Entry::new(key, Kind::Int, p),
            None => Entry::new(key, Kind::WideInt, self.add_wide(v as u64)),
        };
        self.entries.push(entry);
    }
    pub(crate) fn push_uint(&mut self, key: StatKey, v: u64) {
        let entry = if v >> PAYLOAD_BITS == 0 {
            Entry::new(key, Kind::Uint, v)
        } else {
            Entry::new(key, Kind::WideUint, self.add_wide(v))
        };
        self.entries.push(entry);
    }
    pub(crate) fn push_double(&mut self, key: StatKey, v: f64) {
        let i = self.add_wide(v.to_bits());
        self.entries.push(Entry::new(key, Kind::Double, i));
    }
    fn add_wide(&mut self, bits: u64) -> u64 {
        let i = table_index(self.wide.len());
        self.wide.push(bits);
        i.into()
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
        self.entries.push(Entry::new(key, Kind::Str, index.into()));
    }
    /// Reserve room for `additional` more stats.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }
    /// Release unused capacity (the chunk is complete).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
        self.wide.shrink_to_fit();
        self.strs.shrink_to_fit();
        self.blobs.shrink_to_fit();
    }
    /// The value of `e` owned (strings and bytes shared, not copied).
    fn value(&self, e: &Entry) -> StatValue {
        match self.view(e).1 {
            StatRef::Str(_) => StatValue::Str(self.strs[e.index()].clone()),
            StatRef::Bytes(_) => StatValue::Bytes(self.blobs[e.index()].clone()),
            v => v.to_owned_value(),
        }
    }
    fn view(&self, e: &Entry) -> (StatKey, StatRef<'_>) {
        let value = match e.kind {
            Kind::Int => StatRef::Int(int_of_payload(e.payload())),
            Kind::Uint => StatRef::Uint(e.payload()),
            Kind::WideInt => StatRef::Int(self.wide[e.index()] as i64),
            Kind::WideUint => StatRef::Uint(self.wide[e.index()]),
            Kind::Double => StatRef::Double(f64::from_bits(self.wide[e.index()])),
            Kind::Str => StatRef::Str(&self.strs[e.index()]),
            Kind::Bytes => StatRef::Bytes(&self.blobs[e.index()]),
        };
        (e.key, value)
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
        let e = self.entries().iter().find(|e| e.key == key)?;
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
        self.entries().iter().any(|e| e.key == key)
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
                own.push(e.key, c.value(e));
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
    /// `metadata.op_type`.
    pub op_type: String,
    pub source_file: String,
    pub source_line: i32,
    /// The call stack of `metadata.stack_frame_id` in the module's stack frame index, one
    /// `file:line:column` per line, innermost first (XProf's `stackFrame`).
    pub source_stack: String,
    /// The instruction as XLA prints it (best effort; used as `long_name`).
    pub expression: String,
    /// FLOPs / bytes from our HLO cost model (`crate::cost_model`; used for GPU kernels).
    pub cost: Option<crate::cost_model::HloCost>,
    /// Our cost model's numbers where XProf has none for this op
    /// ([`crate::cost_model::xprof_rejects_module`]); reported as `*_estimated`.
    pub estimated_cost: Option<crate::cost_model::HloCost>,
    /// A fusion's fused instructions but parameters and tuples, in their computation's
    /// order (by name; names are unique in a module).
    pub fused_children: Vec<String>,
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
    /// XProf runs no grouping pass on this capture and takes its `group_id` stats as they are
    /// ([`skips_grouping`]); `false` for the captures profilers write.
    pub skips_grouping: bool,
    /// Which events of the host threads the space holds.
    pub host_events: HostEvents,
}

/// Which events of the host threads plane (`/host:CPU`) a [`HostSpace`] holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostEvents {
    /// All of them: what the host framework-op database and the step grouping walk.
    #[default]
    All,
    /// Only the XLA ops a CPU backend ran on host threads (events with an `hlo_op` stat), all
    /// the op databases read. On a JAX CPU capture the rest (Python, runtime and thread-pool
    /// events) is ~90 % of the events; a load that keeps only these still validates them all
    /// but converts none of them.
    XlaOps,
}

/// Whether XProf 2.24.2 skips its event grouping (step numbering) on a capture, given its
/// planes' names and whether each has a `group_id` stat metadata: when some plane has one
/// (the capture says it is grouped already, XProf's `IsXSpaceGrouped`) and no `/host:` plane
/// exists. Observed on XProf's converters with captures that differ in one plane each: with a
/// `/host:CPU` or `/host:metadata` plane, even an empty one, the grouping ran whatever the
/// device planes' `group_id`s; without one, it ran only when no plane had `group_id`.
pub fn skips_grouping<'a>(planes: impl IntoIterator<Item = (&'a str, bool)>) -> bool {
    let (mut host, mut grouped) = (false, false);
    for (name, has_group_id) in planes {
        host |= name.starts_with("/host:");
        grouped |= has_group_id;
    }
    grouped && !host
}

impl HostSpace {
    pub fn plane(&self, name: &str) -> Option<&Plane> {
        self.planes.iter().find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values on both sides of every inline/table boundary of an entry.
    fn edge_values() -> Vec<StatValue> {
        let mut v = Vec::new();
        for bits in [0u32, 1, 15, 16, 31, 32, 46, 47, 48, 49, 52, 53, 62, 63] {
            let p = 1i64 << bits;
            let n = p.wrapping_neg();
            for x in [
                p,
                p.wrapping_sub(1),
                p.wrapping_add(1),
                n,
                n.wrapping_sub(1),
                n.wrapping_add(1),
            ] {
                v.push(StatValue::Int(x));
                v.push(StatValue::Uint(x as u64));
            }
        }
        for x in [i64::MIN, i64::MAX] {
            v.push(StatValue::Int(x));
        }
        v.push(StatValue::Uint(u64::MAX));
        let nan = f64::from_bits(0x7ff8_dead_beef_0001);
        for x in [
            0.0,
            -0.0,
            1.5,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            nan,
        ] {
            v.push(StatValue::Double(x));
        }
        v.push(StatValue::Str("".into()));
        v.push(StatValue::Str("hlo_op".into()));
        v.push(StatValue::Bytes(Arc::from(&[0u8, 255][..])));
        v
    }

    #[test]
    fn stored_stats_read_back_exactly() {
        let keys = [StatKey::GroupId, StatKey::Flops, StatKey::HloOp];
        let input: Vec<(StatKey, StatValue)> = edge_values()
            .into_iter()
            .enumerate()
            .map(|(i, v)| (keys[i % keys.len()], v))
            .collect();
        let stats = Stats::from(input.clone());
        assert_eq!(stats.len(), input.len());
        for ((k, v), (sk, sv)) in input.iter().zip(stats.iter()) {
            assert_eq!(*k, sk);
            match (v, sv) {
                // Bit for bit: -0.0 equals 0.0 and NaN equals nothing.
                (StatValue::Double(a), StatRef::Double(b)) => assert_eq!(a.to_bits(), b.to_bits()),
                _ => assert_eq!(v.as_ref(), sv),
            }
        }
    }

    #[test]
    fn push_appends_in_place_or_copies_out_of_a_shared_chunk() {
        let mut a = Stats::from(vec![(StatKey::HloOp, StatValue::Str("x".into()))]);
        a.push(StatKey::Flops, StatValue::Uint(1 << 50));
        let shared = a.clone();
        a.push(StatKey::GroupId, StatValue::Int(-1));
        assert_eq!(shared.len(), 2);
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![
                (StatKey::HloOp, StatRef::Str("x")),
                (StatKey::Flops, StatRef::Uint(1 << 50)),
                (StatKey::GroupId, StatRef::Int(-1)),
            ]
        );
    }

    #[test]
    fn events_take_the_aggregated_count_from_their_stats() {
        let mut e = Event::default();
        assert_eq!(e.num_occurrences(), 0);
        e.stats
            .push(StatKey::NumOccurrences, StatValue::Int(i64::MAX));
        assert_eq!(e.num_occurrences(), i64::MAX);
    }
}
