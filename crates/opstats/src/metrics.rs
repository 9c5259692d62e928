//! Op metrics and op-metrics databases (XProf's `OpMetrics` / `OpMetricsDb`), the builders
//! that fill them from events, and the combiner that merges databases across cores and hosts.

use std::collections::HashMap;

/// Memory spaces of a memory-access breakdown entry (XProf `PerformanceInfo.MemoryAccessed`).
pub const MEMORY_SPACE_HBM: u64 = 1;
pub const MEMORY_SPACE_CMEM: u64 = 2;
pub const MEMORY_SPACE_VMEM: u64 = 3;

/// Read or write (`OpMetrics.MemoryAccessed.OperationType`: 0 unknown, 1 read, 2 write).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AccessKind {
    #[default]
    Unknown,
    Read,
    Write,
}

impl AccessKind {
    pub fn from_proto(v: i32) -> AccessKind {
        match v {
            1 => AccessKind::Read,
            2 => AccessKind::Write,
            _ => AccessKind::Unknown,
        }
    }
}

/// One entry of an op's memory-access breakdown (bytes, totalled over occurrences).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct MemoryAccessed {
    pub kind: AccessKind,
    pub memory_space: u64,
    pub bytes: u64,
}

/// Which kind of core executed an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CoreType {
    #[default]
    Unknown,
    TensorCore,
    SparseCore,
    /// An XLA op executed on a host CPU thread (CPU-only captures; XProf shows nothing there).
    Host,
}

impl CoreType {
    pub fn label(self) -> &'static str {
        match self {
            CoreType::TensorCore => "TensorCore",
            CoreType::SparseCore => "SparseCore",
            CoreType::Host => "Host",
            CoreType::Unknown => "",
        }
    }
}

/// Where an op's FLOP / byte counts came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CostSource {
    /// The op carried no cost stats.
    #[default]
    None,
    /// XLA's cost model (metadata stats `flops`, `bytes_accessed`).
    CostModel,
    /// Per-launch stats on the event (custom calls / Pallas kernels).
    EventStats,
    /// Our HLO cost model (`crate::cost_model`), as XProf's GPU cost analysis fills kernels.
    HloCostModel,
}

/// Metrics of one op (an HLO instruction of one program), totalled over its occurrences.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpMetrics {
    /// Program id (`hlo_module_id`); 0 for ops without one (IDLE, framework ops).
    pub program_id: u64,
    /// Short name (`matmul_optimized.1`).
    pub name: String,
    /// The HLO text of the instruction, when known.
    pub long_name: String,
    pub category: String,
    /// Framework op (`tf_op` / HLO `op_name` metadata).
    pub provenance: String,
    pub deduplicated_name: String,
    pub occurrences: u64,
    pub time_ps: u64,
    pub self_time_ps: u64,
    pub min_time_ps: u64,
    pub normalized_time_ps: u64,
    pub dma_stall_ps: u64,
    /// Cost-model FLOPs (totalled). XProf's `flops` / `flops_v2`.
    pub flops: u64,
    pub model_flops: u64,
    pub bytes_accessed: u64,
    pub memory_accessed: Vec<MemoryAccessed>,
    pub cost_source: CostSource,
    /// FLOPs / bytes the trace itself reports per launch (custom calls). XProf 2.24.2 does not
    /// count these (it prints 0); we keep them to report as `*_measured`.
    pub event_flops: u64,
    pub event_model_flops: u64,
    pub event_bytes_accessed: u64,
    /// Our HLO cost model's FLOPs / bytes where XProf's cost analysis has none for the op
    /// (it prints 0; `crate::cost_model::xprof_rejects_module`), reported as `*_estimated`.
    pub estimated_flops: u64,
    pub estimated_bytes_accessed: u64,
    pub is_eager: bool,
    pub core_type: CoreType,
    pub source_file: String,
    pub source_line: i32,
    pub source_stack: String,
    pub num_cores: u32,
    pub vdd_energy_j: f64,
    /// Ops run on behalf of this one elsewhere: the SparseCore ops a TensorCore op offloaded.
    pub children: Option<Box<OpMetricsDb>>,
}

pub const IDLE: &str = "IDLE";

impl OpMetrics {
    /// Turns per-occurrence FLOPs and bytes into totals over the op's occurrences (XProf
    /// `AdjustFlopsAndBytesAccessed`); model FLOPs default to the FLOPs. Saturating: a
    /// corrupt capture's counts must not wrap.
    pub fn total_per_occurrence_costs(&mut self) {
        let n = self.occurrences;
        self.flops = self.flops.saturating_mul(n);
        self.model_flops = if self.model_flops > 0 {
            self.model_flops.saturating_mul(n)
        } else {
            self.flops
        };
        self.bytes_accessed = self.bytes_accessed.saturating_mul(n);
        self.estimated_flops = self.estimated_flops.saturating_mul(n);
        self.estimated_bytes_accessed = self.estimated_bytes_accessed.saturating_mul(n);
        for m in &mut self.memory_accessed {
            m.bytes = m.bytes.saturating_mul(n);
        }
    }

    pub fn is_idle(&self) -> bool {
        self.category == IDLE
    }

    /// Bytes of one memory tier and access kind (XProf `BytesAccessedPerCore` semantics:
    /// `Unknown` kind matches both).
    pub fn bytes_in(&self, space: u64, kind: AccessKind) -> u64 {
        self.memory_accessed
            .iter()
            .filter(|m| m.memory_space == space && (kind == AccessKind::Unknown || m.kind == kind))
            .map(|m| m.bytes)
            .fold(0, |a, b| a.saturating_add(b))
    }

    /// HBM bytes: the breakdown's HBM entries, or all bytes when there is no breakdown.
    pub fn hbm_bytes(&self) -> u64 {
        if self.memory_accessed.is_empty() {
            self.bytes_accessed
        } else {
            self.bytes_in(MEMORY_SPACE_HBM, AccessKind::Unknown)
        }
    }

    /// Add `src`'s totals into `self` (XProf `CombineOpMetrics`).
    pub fn combine_from(&mut self, src: &OpMetrics, update_num_cores: bool) {
        let first = self.occurrences == 0 && self.time_ps == 0 && self.name.is_empty();
        if first {
            self.program_id = src.program_id;
            self.name = src.name.clone();
            self.long_name = src.long_name.clone();
            self.category = src.category.clone();
            self.provenance = src.provenance.clone();
            self.deduplicated_name = src.deduplicated_name.clone();
            self.is_eager = src.is_eager;
            self.core_type = src.core_type;
            self.source_file = src.source_file.clone();
            self.source_line = src.source_line;
            self.source_stack = src.source_stack.clone();
            self.cost_source = src.cost_source;
            self.min_time_ps = src.min_time_ps;
        } else if self.category == "Unknown" && !src.category.is_empty() {
            // XProf `CopyOpMetricsMetadata` fills a field the first source left empty.
            self.category = src.category.clone();
        }
        if !first {
            self.min_time_ps = self.min_time_ps.min(src.min_time_ps);
        }
        if update_num_cores {
            self.num_cores = self.num_cores.saturating_add(1);
        } else if first {
            self.num_cores = src.num_cores;
        }
        self.occurrences = self.occurrences.saturating_add(src.occurrences);
        self.time_ps = self.time_ps.saturating_add(src.time_ps);
        self.self_time_ps = self.self_time_ps.saturating_add(src.self_time_ps);
        self.normalized_time_ps = self
            .normalized_time_ps
            .saturating_add(src.normalized_time_ps);
        self.dma_stall_ps = self.dma_stall_ps.saturating_add(src.dma_stall_ps);
        self.flops = self.flops.saturating_add(src.flops);
        self.model_flops = self.model_flops.saturating_add(src.model_flops);
        self.bytes_accessed = self.bytes_accessed.saturating_add(src.bytes_accessed);
        self.event_flops = self.event_flops.saturating_add(src.event_flops);
        self.event_model_flops = self.event_model_flops.saturating_add(src.event_model_flops);
        self.event_bytes_accessed = self
            .event_bytes_accessed
            .saturating_add(src.event_bytes_accessed);
        self.estimated_flops = self.estimated_flops.saturating_add(src.estimated_flops);
        self.estimated_bytes_accessed = self
            .estimated_bytes_accessed
            .saturating_add(src.estimated_bytes_accessed);
        self.vdd_energy_j += src.vdd_energy_j;
        // XProf copies an op's children from the first source that has some
        // (`CopyOpMetricsMetadata`); it does not add them up over cores or hosts.
        if self.children.is_none() && src.children.is_some() {
            self.children = src.children.clone();
        }
        self.add_memory_accessed(&src.memory_accessed);
    }

    /// Add a per-memory-space breakdown to this op's (XProf `CombineMemoryAccessedBreakdown`).
    pub fn add_memory_accessed(&mut self, src: &[MemoryAccessed]) {
        for m in src {
            match self
                .memory_accessed
                .iter_mut()
                .find(|d| d.kind == m.kind && d.memory_space == m.memory_space)
            {
                Some(d) => d.bytes = d.bytes.saturating_add(m.bytes),
                None => self.memory_accessed.push(*m),
            }
        }
    }
}

/// Device compute time by precision (XProf `PrecisionStats`): GPU kernel time inside steps,
/// overlaps counted once with 16-bit winning (see `device::gpu_precision_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrecisionStats {
    pub compute_16bit_ps: u64,
    pub compute_32bit_ps: u64,
}

impl PrecisionStats {
    pub fn total_ps(&self) -> u64 {
        self.compute_16bit_ps.saturating_add(self.compute_32bit_ps)
    }
    /// XProf `CombinePrecisionStats`.
    pub fn combine(&mut self, o: &PrecisionStats) {
        self.compute_16bit_ps = self.compute_16bit_ps.saturating_add(o.compute_16bit_ps);
        self.compute_32bit_ps = self.compute_32bit_ps.saturating_add(o.compute_32bit_ps);
    }
}

/// A database of op metrics for one scope (a core, a host, or combined), plus the totals
/// the views divide by.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpMetricsDb {
    /// Ops, IDLE included (as the last entry when present).
    pub metrics: Vec<OpMetrics>,
    /// The window the ops were measured over, idle included.
    pub total_time_ps: u64,
    /// Σ self time of the (non-idle) ops.
    pub total_op_time_ps: u64,
    pub normalized_total_op_time_ps: u64,
    /// Busy/idle from the duty-cycle tracker (TPU); 0 when not measured.
    pub busy_time_ps: u64,
    pub idle_time_ps: u64,
    /// 16/32-bit device compute time (GPU; zero elsewhere, as in XProf).
    pub precision_stats: PrecisionStats,
}

impl OpMetricsDb {
    pub fn is_empty(&self) -> bool {
        self.metrics.iter().all(OpMetrics::is_idle)
    }

    /// Σ idle time (the IDLE op's time).
    pub fn idle_op_time_ps(&self) -> u64 {
        self.total_time_ps.saturating_sub(self.total_op_time_ps)
    }

    /// XProf `IdleTimeRatio`: 1 − op time / total time (1 when the total is 0).
    pub fn idle_ratio(&self) -> f64 {
        1.0 - safe_div(self.total_op_time_ps as f64, self.total_time_ps as f64)
    }

    /// Append the IDLE op for `total_time_ps − total_op_time_ps` (XProf `AddIdleOp`).
    pub fn add_idle_op(&mut self) {
        let idle = self.idle_op_time_ps();
        self.metrics.push(OpMetrics {
            name: IDLE.into(),
            category: IDLE.into(),
            time_ps: idle,
            self_time_ps: idle,
            ..Default::default()
        });
    }

    /// Ops (no IDLE) sorted by self time desc, then name (XProf `SortedOpMetricsDb`).
    pub fn sorted_ops(&self) -> Vec<&OpMetrics> {
        let mut v: Vec<&OpMetrics> = self.metrics.iter().filter(|m| m.occurrences > 0).collect();
        v.sort_by(|a, b| {
            b.self_time_ps
                .cmp(&a.self_time_ps)
                .then_with(|| a.name.cmp(&b.name))
        });
        v
    }
}

/// XProf's `SafeDivide`: 0 when the denominator is (nearly) 0.
pub fn safe_div(a: f64, b: f64) -> f64 {
    if b.abs() < 1e-12 { 0.0 } else { a / b }
}

/// An op's position in a database under construction, by key. The builders look it up once
/// per event, and std's SipHash was ~4 % of a large CPU capture's op database; foldhash,
/// seeded per process, keeps the keys (names from the capture) from being chosen to collide.
type OpIndex<K> = HashMap<K, usize, foldhash::fast::RandomState>;

/// Merges databases by (program id, name) — XProf's `OpMetricsDbCombiner`.
#[derive(Default)]
pub struct DbCombiner {
    db: OpMetricsDb,
    index: OpIndex<(u64, String)>,
    idle: OpMetrics,
}

impl DbCombiner {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn combine(&mut self, src: &OpMetricsDb, update_num_cores: bool) {
        self.db.total_time_ps = self.db.total_time_ps.saturating_add(src.total_time_ps);
        self.db.total_op_time_ps = self
            .db
            .total_op_time_ps
            .saturating_add(src.total_op_time_ps);
        self.db.normalized_total_op_time_ps = self
            .db
            .normalized_total_op_time_ps
            .saturating_add(src.normalized_total_op_time_ps);
        self.db.busy_time_ps = self.db.busy_time_ps.saturating_add(src.busy_time_ps);
        self.db.idle_time_ps = self.db.idle_time_ps.saturating_add(src.idle_time_ps);
        self.db.precision_stats.combine(&src.precision_stats);
        for m in &src.metrics {
            if m.is_idle() {
                self.idle.combine_from(m, false);
                continue;
            }
            let key = (m.program_id, m.name.clone());
            let i = *self.index.entry(key).or_insert_with(|| {
                self.db.metrics.push(OpMetrics::default());
                self.db.metrics.len() - 1
            });
            self.db.metrics[i].combine_from(m, update_num_cores);
        }
    }

    /// The combined database; IDLE (when any source had one) is recomputed from the totals.
    pub fn finish(mut self) -> OpMetricsDb {
        if !self.idle.name.is_empty() {
            self.db.add_idle_op();
        }
        self.db
    }
}

/// Builds one core's database from op events keyed by (program id, symbol id) — XProf's
/// `XEventsOpMetricsDbBuilder`.
#[derive(Default)]
pub struct KeyedDbBuilder {
    ops: Vec<OpMetrics>,
    index: OpIndex<(u64, u64)>,
}

impl KeyedDbBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Merge one occurrence (already carrying per-occurrence cost and its times).
    pub fn add(&mut self, key: (u64, u64), op: OpMetrics) {
        match self.index.get(&key) {
            Some(&i) => {
                let dst = &mut self.ops[i];
                dst.occurrences = dst.occurrences.saturating_add(op.occurrences);
                dst.time_ps = dst.time_ps.saturating_add(op.time_ps);
                dst.self_time_ps = dst.self_time_ps.saturating_add(op.self_time_ps);
                dst.min_time_ps = dst.min_time_ps.min(op.min_time_ps);
                dst.normalized_time_ps =
                    dst.normalized_time_ps.saturating_add(op.normalized_time_ps);
                dst.dma_stall_ps = dst.dma_stall_ps.saturating_add(op.dma_stall_ps);
                dst.vdd_energy_j += op.vdd_energy_j;
                dst.event_flops = dst.event_flops.saturating_add(op.event_flops);
                dst.event_model_flops = dst.event_model_flops.saturating_add(op.event_model_flops);
                dst.event_bytes_accessed = dst
                    .event_bytes_accessed
                    .saturating_add(op.event_bytes_accessed);
            }
            None => {
                let mut op = op;
                op.program_id = key.0;
                self.index.insert(key, self.ops.len());
                self.ops.push(op);
            }
        }
    }

    /// Totals per-occurrence cost by occurrences (XProf `AdjustFlopsAndBytesAccessed`), sets
    /// the op-time totals and the window, and appends IDLE.
    pub fn finish(self, total_time_ps: u64) -> OpMetricsDb {
        let mut db = OpMetricsDb::default();
        for mut op in self.ops {
            op.total_per_occurrence_costs();
            db.total_op_time_ps = db.total_op_time_ps.saturating_add(op.self_time_ps);
            db.normalized_total_op_time_ps += (op.self_time_ps as f64
                * safe_div(op.normalized_time_ps as f64, op.time_ps as f64))
                as u64;
            db.metrics.push(op);
        }
        db.total_time_ps = total_time_ps.max(db.total_op_time_ps);
        db.add_idle_op();
        db
    }
}

/// Builds a database from ops keyed by (program id, name), times given per occurrence
/// (host-executed XLA ops, GPU kernels, framework ops).
#[derive(Default)]
pub struct NamedDbBuilder {
    ops: Vec<OpMetrics>,
    /// Program id → name → position in `ops`: two levels so a lookup borrows the name (this
    /// runs once per event; a `(u64, String)` key cost an allocation per lookup).
    index: HashMap<u64, OpIndex<String>, foldhash::fast::RandomState>,
}

impl NamedDbBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one occurrence; `template` supplies identity and per-occurrence cost the first
    /// time the key is seen.
    pub fn enter(
        &mut self,
        program_id: u64,
        name: &str,
        time_ps: u64,
        self_time_ps: u64,
        template: impl FnOnce() -> OpMetrics,
    ) {
        let i = match self.index.get(&program_id).and_then(|m| m.get(name)) {
            Some(&i) => i,
            None => {
                let mut op = template();
                op.program_id = program_id;
                op.name = name.to_string();
                op.occurrences = 0;
                op.time_ps = 0;
                op.self_time_ps = 0;
                op.min_time_ps = u64::MAX;
                op.num_cores = 1;
                self.index
                    .entry(program_id)
                    .or_default()
                    .insert(name.to_string(), self.ops.len());
                self.ops.push(op);
                self.ops.len() - 1
            }
        };
        let op = &mut self.ops[i];
        op.occurrences = op.occurrences.saturating_add(1);
        op.time_ps = op.time_ps.saturating_add(time_ps);
        op.self_time_ps = op.self_time_ps.saturating_add(self_time_ps);
        op.normalized_time_ps = op.normalized_time_ps.saturating_add(time_ps);
        op.min_time_ps = op.min_time_ps.min(time_ps);
    }

    /// Give the op `name` of `program_id` the category `category` if it has none yet
    /// ("Unknown"): XProf's builders fill an op's type from the first occurrence that has one.
    pub fn fill_category(&mut self, program_id: u64, name: &str, category: &str) {
        if category.is_empty() || category == "Unknown" {
            return;
        }
        if let Some(&i) = self.index.get(&program_id).and_then(|m| m.get(name))
            && self.ops[i].category == "Unknown"
        {
            self.ops[i].category = category.to_string();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Finish with the window `total_time_ps`; per-occurrence cost is multiplied out.
    pub fn finish(self, total_time_ps: u64, add_idle: bool) -> OpMetricsDb {
        let mut db = OpMetricsDb::default();
        for mut op in self.ops {
            op.total_per_occurrence_costs();
            if op.min_time_ps == u64::MAX {
                op.min_time_ps = 0;
            }
            db.total_op_time_ps = db.total_op_time_ps.saturating_add(op.self_time_ps);
            db.normalized_total_op_time_ps = db
                .normalized_total_op_time_ps
                .saturating_add(op.self_time_ps);
            db.metrics.push(op);
        }
        db.total_time_ps = total_time_ps.max(db.total_op_time_ps);
        if add_idle {
            db.add_idle_op();
        }
        db
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: model FLOPs were multiplied by the occurrences unchecked, so a corrupt
    /// capture's per-occurrence count could overflow (a panic in debug builds, a wrapped total
    /// in release ones).
    #[test]
    fn per_occurrence_costs_saturate_instead_of_overflowing() {
        let mut op = OpMetrics {
            occurrences: 3,
            flops: 10,
            model_flops: u64::MAX / 2,
            bytes_accessed: u64::MAX / 2,
            ..Default::default()
        };
        op.total_per_occurrence_costs();
        assert_eq!(op.flops, 30);
        assert_eq!(op.model_flops, u64::MAX);
        assert_eq!(op.bytes_accessed, u64::MAX);
        let mut plain = OpMetrics {
            occurrences: 2,
            flops: 7,
            ..Default::default()
        };
        plain.total_per_occurrence_costs();
        assert_eq!((plain.flops, plain.model_flops), (14, 14));
    }

    fn op(name: &str, occ: u64, time: u64, flops: u64) -> OpMetrics {
        OpMetrics {
            name: name.into(),
            category: "fusion".into(),
            occurrences: occ,
            time_ps: time,
            self_time_ps: time,
            min_time_ps: time,
            flops,
            ..Default::default()
        }
    }

    #[test]
    fn keyed_builder_multiplies_cost_by_occurrences_and_adds_idle() {
        let mut b = KeyedDbBuilder::new();
        b.add((7, 1), op("a", 1, 100, 10));
        b.add((7, 1), op("a", 1, 50, 10));
        b.add((7, 2), op("b", 1, 30, 0));
        let db = b.finish(400);
        assert_eq!(db.total_op_time_ps, 180);
        assert_eq!(db.total_time_ps, 400);
        let a = &db.metrics[0];
        assert_eq!(
            (
                a.occurrences,
                a.time_ps,
                a.min_time_ps,
                a.flops,
                a.model_flops
            ),
            (2, 150, 50, 20, 20)
        );
        let idle = db.metrics.last().unwrap();
        assert!(idle.is_idle());
        assert_eq!(idle.self_time_ps, 220);
        assert_eq!(idle.occurrences, 0);
    }

    #[test]
    fn combiner_merges_by_program_and_name_and_counts_cores() {
        let mut b1 = KeyedDbBuilder::new();
        b1.add((1, 1), op("a", 1, 100, 5));
        let mut b2 = KeyedDbBuilder::new();
        b2.add((1, 9), op("a", 1, 60, 5));
        b2.add((2, 1), op("a", 1, 10, 0));
        let mut c = DbCombiner::new();
        c.combine(&b1.finish(200), true);
        c.combine(&b2.finish(100), true);
        let db = c.finish();
        assert_eq!(db.total_time_ps, 300);
        assert_eq!(db.total_op_time_ps, 170);
        let a = db.metrics.iter().find(|m| m.program_id == 1).unwrap();
        assert_eq!(
            (a.occurrences, a.time_ps, a.num_cores, a.flops),
            (2, 160, 2, 10)
        );
        assert_eq!(db.metrics.last().unwrap().self_time_ps, 130);
    }

    #[test]
    fn idle_ratio_is_one_for_an_empty_window() {
        let db = OpMetricsDb::default();
        assert_eq!(db.idle_ratio(), 1.0);
    }
}
