//! Synthetic XProf captures for tests, written in XProf's own vocabulary.
//!
//! [`XSpaceBuilder`] assembles an `XSpace` with prost (`xprof_proto::xplane`) — the encoder
//! every reader is checked against — from plane, line, event and stat *names*: event metadata and
//! stat metadata ids are interned per plane for you (ids start at 1 and differ per plane, as in
//! real captures, so tests catch code that resolves stats by id instead of by name).
//!
//! Builders are passed by value, so closures chain: `|p| p.stat(..).line(..)`. On a line,
//! [`LineBuilder::event`] starts an event and the methods after it ([`LineBuilder::stat`],
//! [`LineBuilder::metadata_stat`], [`LineBuilder::device_timespan`], …) apply to that event.
//!
//! ```
//! use xprof_testkit::{XSpaceBuilder, Ref};
//!
//! let bytes = XSpaceBuilder::new()
//!     .hostname("host0")
//!     // A TPU TensorCore plane: device caps, then modules, ops and steps.
//!     .plane("/device:TPU:0", |p| {
//!         p.stat("peak_teraflops_per_second", 918.0)
//!             .stat("peak_hbm_bw_gigabytes_per_second", 1640.0)
//!             .line("XLA Modules", |l| l.event("jit_step(42)", 0, 1_000_000))
//!             .line("XLA Ops", |l| {
//!                 l.event("fusion.1", 1_000, 400_000)
//!                     .display_name("fusion.1")
//!                     .metadata_stat("hlo_category", "output fusion")
//!                     .metadata_stat("flops", 1.0e9)
//!                     .metadata_stat("bytes_accessed", 4096u64)
//!                     .metadata_stat("program_id", 42u64)
//!                     .device_timespan(900, 400_100)
//!                     .stat("group_id", 0i64)
//!             })
//!             .line("Steps", |l| l.event("0", 0, 1_000_000).stat("group_id", 0i64))
//!     })
//!     // Host threads: a step root (`_r`) and an allocator event.
//!     .plane("/host:CPU", |p| {
//!         p.line_with_id(1234, "main/1234", |l| {
//!             l.timestamp_ns(1_000)
//!                 .event("train_step", 0, 2_000_000)
//!                 .stat("_r", 1i64)
//!                 .stat("step_num", 0i64)
//!                 .event("MemoryAllocation", 10, 0)
//!                 .stat("bytes_allocated", 1024i64)
//!                 .stat("allocator_name", Ref("GPU_0_bfc"))
//!         })
//!     })
//!     .to_bytes();
//! assert!(!bytes.is_empty());
//! ```
//!
//! GPU and metadata shapes:
//!
//! ```
//! use xprof_testkit::{XSpaceBuilder, simple_hlo_proto};
//!
//! let hlo = simple_hlo_proto("jit_step", &[("p0", "parameter"), ("fusion.3", "fusion")]);
//! let space = XSpaceBuilder::new()
//!     .plane("/device:GPU:0", |p| {
//!         p.stat("clock_rate", 1_410_000u64) // kHz
//!             .stat("core_count", 108u64)
//!             .stat("memory_bandwidth", 1_555_000_000_000u64)
//!             .stat("device_vendor", "Nvidia")
//!             .line_with_id(7, "Stream #7(Compute)", |l| {
//!                 l.event("fusion_3_kernel", 1_000, 25_000)
//!                     .stat("hlo_op", "fusion.3")
//!                     .stat("hlo_module", "jit_step")
//!                     .stat("program_id", 42u64)
//!                     .stat("correlation_id", 9u64)
//!                     .stat("kernel_details", "regs:32 static_shared:0 grid:80,1,1 block:128,1,1")
//!             })
//!     })
//!     // HLO embedded the way JAX captures carry it (key = program fingerprint).
//!     .plane("/host:metadata", |p| p.hlo_module(42, 42, &hlo))
//!     .plane("Task Environment", |p| {
//!         p.stat("profile_start_time", 1_700_000_000_000_000_000u64)
//!             .stat("profile_stop_time", 1_700_000_001_000_000_000u64)
//!     })
//!     .build();
//! assert_eq!(space.planes.len(), 3);
//! assert_eq!(space.planes[1].event_metadata[&42].name, "jit_step(42)");
//! ```

#![warn(missing_docs)]

pub mod async_ops;
pub mod attribution;
pub mod bench_inputs;
pub mod damage;
pub mod gpu;
pub mod pod;

use prost::Message;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use xprof_proto::xla;
use xprof_proto::xplane as pb;

pub use xprof_proto;

/// A stat value. Built from Rust values with `.into()`: `f64`/`f32` → double, `i64`/`i32` →
/// int64, `u64`/`u32`/`usize` → uint64, `bool` → int64 0/1 (XProf stores bools as ints),
/// `&str`/`String` → string, `Vec<u8>`/`&[u8]` → bytes, [`Ref`] → `ref_value`.
#[derive(Clone, Debug, PartialEq)]
pub enum StatValue {
    /// `double_value`.
    Double(f64),
    /// `int64_value`.
    Int(i64),
    /// `uint64_value`.
    Uint(u64),
    /// `str_value`.
    Str(String),
    /// `bytes_value`.
    Bytes(Vec<u8>),
    /// A string stored as a stat metadata name (`ref_value`), as XProf does for repeated strings.
    Ref(String),
}

/// A string stat stored by reference (`ref_value` → a stat metadata whose name is the string).
#[derive(Clone, Debug)]
pub struct Ref<S: Into<String>>(pub S);

macro_rules! from {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for StatValue { fn from(x: $t) -> Self { StatValue::$v(x as $c) } }
    )*};
}
from!(f64 => Double as f64, f32 => Double as f64, i64 => Int as i64, i32 => Int as i64,
      u64 => Uint as u64, u32 => Uint as u64, usize => Uint as u64);
impl From<bool> for StatValue {
    fn from(x: bool) -> Self {
        StatValue::Int(x as i64)
    }
}
impl From<&str> for StatValue {
    fn from(x: &str) -> Self {
        StatValue::Str(x.to_string())
    }
}
impl From<String> for StatValue {
    fn from(x: String) -> Self {
        StatValue::Str(x)
    }
}
impl From<Vec<u8>> for StatValue {
    fn from(x: Vec<u8>) -> Self {
        StatValue::Bytes(x)
    }
}
impl From<&[u8]> for StatValue {
    fn from(x: &[u8]) -> Self {
        StatValue::Bytes(x.to_vec())
    }
}
impl<S: Into<String>> From<Ref<S>> for StatValue {
    fn from(x: Ref<S>) -> Self {
        StatValue::Ref(x.0.into())
    }
}

/// Per-plane id interning: names → event metadata ids and stat metadata ids.
#[derive(Default)]
struct Interner {
    /// Stat ids of plane k start at 1000·k + 1, so the same name has different ids on
    /// different planes (as in real captures).
    stat_base: i64,
    plane: pb::XPlane,
    event_ids: HashMap<String, i64>,
    stat_ids: HashMap<String, i64>,
}

impl Interner {
    fn stat_id(&mut self, name: &str) -> i64 {
        if let Some(&id) = self.stat_ids.get(name) {
            return id;
        }
        let id = self.stat_base + self.stat_ids.len() as i64 + 1;
        self.stat_ids.insert(name.to_string(), id);
        self.plane.stat_metadata.insert(
            id,
            pb::XStatMetadata {
                id,
                name: name.to_string(),
                description: String::new(),
            },
        );
        id
    }
    fn event_id(&mut self, name: &str) -> i64 {
        if let Some(&id) = self.event_ids.get(name) {
            return id;
        }
        let id = self.event_ids.len() as i64 + 1;
        self.add_event_metadata(id, name);
        id
    }
    fn add_event_metadata(&mut self, id: i64, name: &str) {
        self.event_ids.insert(name.to_string(), id);
        self.plane.event_metadata.insert(
            id,
            pb::XEventMetadata {
                id,
                name: name.to_string(),
                ..Default::default()
            },
        );
    }
    fn stat(&mut self, name: &str, value: StatValue) -> pb::XStat {
        use pb::x_stat::Value as V;
        let metadata_id = self.stat_id(name);
        let value = match value {
            StatValue::Double(x) => V::DoubleValue(x),
            StatValue::Int(x) => V::Int64Value(x),
            StatValue::Uint(x) => V::Uint64Value(x),
            StatValue::Str(x) => V::StrValue(x),
            StatValue::Bytes(x) => V::BytesValue(x),
            StatValue::Ref(x) => V::RefValue(self.stat_id(&x) as u64),
        };
        pb::XStat {
            metadata_id,
            value: Some(value),
        }
    }
}

/// Builds an `XSpace` (one host's capture).
#[derive(Default)]
pub struct XSpaceBuilder {
    space: pb::XSpace,
}

impl XSpaceBuilder {
    /// An empty XSpace.
    pub fn new() -> Self {
        Self::default()
    }
    /// Append to `XSpace.hostnames`.
    pub fn hostname(mut self, h: &str) -> Self {
        self.space.hostnames.push(h.to_string());
        self
    }
    /// Append to `XSpace.errors` (errors the profiler recorded).
    pub fn error(mut self, e: &str) -> Self {
        self.space.errors.push(e.to_string());
        self
    }
    /// Append to `XSpace.warnings`.
    pub fn warning(mut self, w: &str) -> Self {
        self.space.warnings.push(w.to_string());
        self
    }
    /// Add a plane named `name` (e.g. `/device:TPU:0`, `/device:GPU:0`, `/host:CPU`,
    /// `/host:metadata`, `Task Environment`), built by `f`.
    pub fn plane(mut self, name: &str, f: impl FnOnce(PlaneBuilder) -> PlaneBuilder) -> Self {
        let id = self.space.planes.len() as i64;
        let mut pb = PlaneBuilder {
            st: Interner {
                stat_base: 1000 * id,
                ..Default::default()
            },
        };
        pb.st.plane.name = name.to_string();
        pb.st.plane.id = id;
        self.space.planes.push(f(pb).st.plane);
        self
    }
    /// Add a plane given as a raw prost message (for shapes the builder does not cover).
    pub fn raw_plane(mut self, plane: pb::XPlane) -> Self {
        self.space.planes.push(plane);
        self
    }
    /// The prost message.
    pub fn build(self) -> pb::XSpace {
        self.space
    }
    /// The encoded bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.space.encode_to_vec()
    }
    /// Write the encoded capture to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.to_bytes())
    }
    /// Write it as `<logdir>/plugins/profile/<run>/<host>.xplane.pb` (creating directories) and
    /// return that path: the layout capture tools resolve.
    pub fn write_run(
        &self,
        logdir: impl AsRef<Path>,
        run: &str,
        host: &str,
    ) -> std::io::Result<PathBuf> {
        let dir = logdir.as_ref().join("plugins").join("profile").join(run);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{host}.xplane.pb"));
        self.write(&path)?;
        Ok(path)
    }
}

/// Builds one plane. Obtained from [`XSpaceBuilder::plane`].
pub struct PlaneBuilder {
    st: Interner,
}

impl PlaneBuilder {
    /// Set `XPlane.id` (default: the plane's position).
    pub fn id(mut self, id: i64) -> Self {
        self.st.plane.id = id;
        self
    }
    /// Add a plane-level stat (device caps such as `peak_teraflops_per_second`, versions …).
    pub fn stat(mut self, name: &str, value: impl Into<StatValue>) -> Self {
        let s = self.st.stat(name, value.into());
        self.st.plane.stats.push(s);
        self
    }
    /// Add a line named `name` with id = its position on the plane.
    pub fn line(self, name: &str, f: impl FnOnce(LineBuilder) -> LineBuilder) -> Self {
        let id = self.st.plane.lines.len() as i64;
        self.line_with_id(id, name, f)
    }
    /// Add a line with an explicit id (host thread id; `i64::MAX` for `_counters_`).
    pub fn line_with_id(
        mut self,
        id: i64,
        name: &str,
        f: impl FnOnce(LineBuilder) -> LineBuilder,
    ) -> Self {
        let lb = LineBuilder {
            st: std::mem::take(&mut self.st),
            line: pb::XLine {
                id,
                display_id: id,
                name: name.to_string(),
                ..Default::default()
            },
        };
        let lb = f(lb);
        self.st = lb.st;
        self.st.plane.lines.push(lb.line);
        self
    }
    /// Declare event metadata `name` up front (with display name, stats, children) so that
    /// events refer to it; `f` edits the prost message, [`PlaneBuilder::metadata_stat_value`]
    /// helps building its stats.
    pub fn event_metadata(
        mut self,
        name: &str,
        f: impl FnOnce(&mut pb::XEventMetadata, &mut MetadataStats),
    ) -> Self {
        let id = self.st.event_id(name);
        let mut md = self.st.plane.event_metadata.remove(&id).unwrap_or_default();
        let mut ms = MetadataStats {
            pending: Vec::new(),
        };
        f(&mut md, &mut ms);
        for (n, v) in ms.pending {
            let s = self.st.stat(&n, v);
            md.stats.push(s);
        }
        self.st.plane.event_metadata.insert(id, md);
        self
    }
    /// Shorthand: a metadata stat on event metadata `event` (created if needed).
    pub fn metadata_stat_value(self, event: &str, name: &str, value: impl Into<StatValue>) -> Self {
        let v = value.into();
        self.event_metadata(event, |_, s| {
            s.add(name, v);
        })
    }
    /// Embed an HLO module the way `/host:metadata` does: event metadata named
    /// `<module name>(<program_id>)` with stats `Hlo Proto` (bytes) and `program_id` (uint64).
    /// `metadata_id` is the map key (real captures use 64-bit fingerprints; pass
    /// `program_id as i64` to mimic them).
    pub fn hlo_module(mut self, metadata_id: i64, program_id: u64, hlo: &xla::HloProto) -> Self {
        let name = format!(
            "{}({program_id})",
            hlo.hlo_module.as_ref().map_or("", |m| m.name.as_str())
        );
        self.st.add_event_metadata(metadata_id, &name);
        let a = self
            .st
            .stat("Hlo Proto", StatValue::Bytes(hlo.encode_to_vec()));
        let b = self.st.stat("program_id", StatValue::Uint(program_id));
        let md = self.st.plane.event_metadata.get_mut(&metadata_id).unwrap();
        md.stats.push(a);
        md.stats.push(b);
        self
    }
    /// The stat metadata id this plane assigned to `name` (interning it if new).
    pub fn stat_id(&mut self, name: &str) -> i64 {
        self.st.stat_id(name)
    }
}

/// Collects metadata stats inside [`PlaneBuilder::event_metadata`].
pub struct MetadataStats {
    pending: Vec<(String, StatValue)>,
}

impl MetadataStats {
    /// Add a stat to the metadata being built.
    pub fn add(&mut self, name: &str, value: impl Into<StatValue>) -> &mut Self {
        self.pending.push((name.to_string(), value.into()));
        self
    }
}

/// Builds one line. Obtained from [`PlaneBuilder::line`].
pub struct LineBuilder {
    st: Interner,
    line: pb::XLine,
}

impl LineBuilder {
    /// `XLine.timestamp_ns` (default 0): event offsets are relative to it.
    pub fn timestamp_ns(mut self, ns: i64) -> Self {
        self.line.timestamp_ns = ns;
        self
    }
    /// `XLine.display_name`.
    pub fn display_name_of_line(mut self, name: &str) -> Self {
        self.line.display_name = name.to_string();
        self
    }
    /// `XLine.display_id`.
    pub fn display_id(mut self, id: i64) -> Self {
        self.line.display_id = id;
        self
    }
    /// `XLine.duration_ps`.
    pub fn duration_ps(mut self, ps: i64) -> Self {
        self.line.duration_ps = ps;
        self
    }
    /// Start a timed event named `name` (event metadata interned by name) at `offset_ps` from
    /// the line's timestamp, lasting `duration_ps`. Following event methods apply to it.
    pub fn event(mut self, name: &str, offset_ps: i64, duration_ps: i64) -> Self {
        let metadata_id = self.st.event_id(name);
        self.line.events.push(pb::XEvent {
            metadata_id,
            duration_ps,
            data: Some(pb::x_event::Data::OffsetPs(offset_ps)),
            stats: Vec::new(),
        });
        self
    }
    /// Start an aggregated event (`num_occurrences` instead of an offset).
    pub fn aggregated_event(mut self, name: &str, num_occurrences: i64, duration_ps: i64) -> Self {
        let metadata_id = self.st.event_id(name);
        self.line.events.push(pb::XEvent {
            metadata_id,
            duration_ps,
            data: Some(pb::x_event::Data::NumOccurrences(num_occurrences)),
            stats: Vec::new(),
        });
        self
    }
    fn last(&mut self) -> &mut pb::XEvent {
        self.line
            .events
            .last_mut()
            .expect("call .event(..) before adding event stats")
    }
    /// Add a stat to the current event (its *own* stats: `device_offset_ps`, `group_id`,
    /// `hlo_op`, `correlation_id`, `bytes_allocated` …).
    pub fn stat(mut self, name: &str, value: impl Into<StatValue>) -> Self {
        let s = self.st.stat(name, value.into());
        self.last().stats.push(s);
        self
    }
    /// Add a stat to the current event's *metadata* (shared by every event of that name:
    /// `hlo_category`, `flops`, `bytes_accessed`, `program_id` …). Added once per name.
    pub fn metadata_stat(mut self, name: &str, value: impl Into<StatValue>) -> Self {
        let id = self.last().metadata_id;
        let s = self.st.stat(name, value.into());
        let md = self.st.plane.event_metadata.get_mut(&id).unwrap();
        if !md.stats.iter().any(|x| x.metadata_id == s.metadata_id) {
            md.stats.push(s);
        }
        self
    }
    /// Set the current event's metadata display name (on TPU `XLA Ops`: the short op name,
    /// while the name is the HLO text).
    pub fn display_name(mut self, name: &str) -> Self {
        let id = self.last().metadata_id;
        self.st
            .plane
            .event_metadata
            .get_mut(&id)
            .unwrap()
            .display_name = name.to_string();
        self
    }
    /// The TPU hardware-clock timespan: stats `device_offset_ps` and `device_duration_ps`.
    pub fn device_timespan(self, device_offset_ps: i64, device_duration_ps: i64) -> Self {
        self.stat("device_offset_ps", device_offset_ps)
            .stat("device_duration_ps", device_duration_ps)
    }
}

/// A minimal `xla.HloProto`: one module with an entry computation holding `instructions`
/// (`(name, opcode)`), ids `1..`, each instruction using the previous one as operand.
pub fn simple_hlo_proto(module_name: &str, instructions: &[(&str, &str)]) -> xla::HloProto {
    let insts: Vec<xla::HloInstructionProto> = instructions
        .iter()
        .enumerate()
        .map(|(k, (name, opcode))| xla::HloInstructionProto {
            name: name.to_string(),
            opcode: opcode.to_string(),
            id: k as i64 + 1,
            operand_ids: if k == 0 { vec![] } else { vec![k as i64] },
            shape: Some(xla::ShapeProto {
                element_type: xla::PrimitiveType::F32 as i32,
                dimensions: vec![8, 128],
                layout: Some(Box::new(xla::LayoutProto {
                    minor_to_major: vec![1, 0],
                    ..Default::default()
                })),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    let root_id = insts.last().map_or(0, |i| i.id);
    xla::HloProto {
        hlo_module: Some(xla::HloModuleProto {
            name: module_name.to_string(),
            entry_computation_name: "main".into(),
            entry_computation_id: 1,
            id: 1,
            computations: vec![xla::HloComputationProto {
                name: "main".into(),
                id: 1,
                root_id,
                instructions: insts,
                ..Default::default()
            }],
            ..Default::default()
        }),
        buffer_assignment: None,
    }
}

/// An array shape `t[dims]` with the default (descending) layout.
pub fn hlo_shape(t: xla::PrimitiveType, dims: &[i64]) -> xla::ShapeProto {
    xla::ShapeProto {
        element_type: t as i32,
        dimensions: dims.to_vec(),
        is_dynamic_dimension: vec![false; dims.len()],
        layout: Some(Box::new(xla::LayoutProto {
            minor_to_major: (0..dims.len() as i64).rev().collect(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// One HLO instruction: `name = shape opcode(operands...)`. Set opcode-specific fields
/// (dimension numbers, window, fused computation, ...) on the result.
pub fn hlo_instr(
    id: i64,
    name: &str,
    opcode: &str,
    shape: xla::ShapeProto,
    operand_ids: &[i64],
) -> xla::HloInstructionProto {
    xla::HloInstructionProto {
        id,
        name: name.to_string(),
        opcode: opcode.to_string(),
        shape: Some(shape),
        operand_ids: operand_ids.to_vec(),
        ..Default::default()
    }
}

/// A `parameter` instruction: `name = shape parameter(number)`.
pub fn hlo_param(
    id: i64,
    name: &str,
    shape: xla::ShapeProto,
    number: i64,
) -> xla::HloInstructionProto {
    let mut i = hlo_instr(id, name, "parameter", shape, &[]);
    i.parameter_number = number;
    i
}

/// A matrix product contracting `lhs` dimension 1 with `rhs` dimension 0.
pub fn hlo_matmul(
    id: i64,
    name: &str,
    shape: xla::ShapeProto,
    lhs: i64,
    rhs: i64,
) -> xla::HloInstructionProto {
    let mut i = hlo_instr(id, name, "dot", shape, &[lhs, rhs]);
    i.dot_dimension_numbers = Some(Box::new(xla::DotDimensionNumbers {
        lhs_contracting_dimensions: vec![1],
        rhs_contracting_dimensions: vec![0],
        ..Default::default()
    }));
    i
}

/// The body of a loop fusion over `shape`: `mul.f = multiply(p, p)`, `add.f = add(mul.f, p)`
/// (ids `base + 1 ..= base + 3`).
pub fn hlo_multiply_add_body(base: i64, shape: &xla::ShapeProto) -> Vec<xla::HloInstructionProto> {
    vec![
        hlo_param(base + 1, "fp0", shape.clone(), 0),
        hlo_instr(
            base + 2,
            "mul.f",
            "multiply",
            shape.clone(),
            &[base + 1, base + 1],
        ),
        hlo_instr(
            base + 3,
            "add.f",
            "add",
            shape.clone(),
            &[base + 2, base + 1],
        ),
    ]
}

/// A scalar f32 sum, the reduction computation of an all-reduce (ids `base + 1 ..= base + 3`).
pub fn hlo_sum_reducer(base: i64) -> Vec<xla::HloInstructionProto> {
    let scalar = || hlo_shape(xla::PrimitiveType::F32, &[]);
    vec![
        hlo_param(base + 1, "ra", scalar(), 0),
        hlo_param(base + 2, "rb", scalar(), 1),
        hlo_instr(base + 3, "radd", "add", scalar(), &[base + 1, base + 2]),
    ]
}

/// An `xla.HloProto` from computations given as `(id, name, instructions)`; the root of each
/// is its last instruction, the entry is the one with `entry_id`.
pub fn hlo_module_proto(
    module_name: &str,
    entry_id: i64,
    computations: Vec<(i64, &str, Vec<xla::HloInstructionProto>)>,
) -> xla::HloProto {
    let entry_name = computations
        .iter()
        .find(|c| c.0 == entry_id)
        .map_or(String::new(), |c| c.1.to_string());
    // XLA refuses a module without program shapes: parameters by number, root's shape.
    let program_shape = |instructions: &[xla::HloInstructionProto]| {
        let mut params: Vec<&xla::HloInstructionProto> = instructions
            .iter()
            .filter(|i| i.opcode == "parameter")
            .collect();
        params.sort_by_key(|i| i.parameter_number);
        xla::ProgramShapeProto {
            parameters: params.iter().filter_map(|i| i.shape.clone()).collect(),
            result: instructions.last().and_then(|i| i.shape.clone()),
            parameter_names: params.iter().map(|i| i.name.clone()).collect(),
        }
    };
    let computations: Vec<xla::HloComputationProto> = computations
        .into_iter()
        .map(|(id, name, instructions)| xla::HloComputationProto {
            name: name.to_string(),
            id,
            root_id: instructions.last().map_or(0, |i| i.id),
            program_shape: Some(program_shape(&instructions)),
            instructions,
            ..Default::default()
        })
        .collect();
    let host_program_shape = computations
        .iter()
        .find(|c| c.id == entry_id)
        .and_then(|c| c.program_shape.clone());
    xla::HloProto {
        hlo_module: Some(xla::HloModuleProto {
            name: module_name.to_string(),
            entry_computation_name: entry_name,
            entry_computation_id: entry_id,
            id: 1,
            computations,
            host_program_shape,
            ..Default::default()
        }),
        buffer_assignment: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_interned_per_plane_and_ids_differ_between_planes() {
        let space = XSpaceBuilder::new()
            .plane("a", |p| {
                p.stat("x", 1i64)
                    .line("L", |l| l.event("e", 0, 1).stat("y", 2u64))
            })
            .plane("b", |p| {
                p.line("L", |l| {
                    l.event("e", 5, 1)
                        .stat("y", 2u64)
                        .event("e", 9, 1)
                        .stat("x", 1.5)
                })
            })
            .build();
        let (a, b) = (&space.planes[0], &space.planes[1]);
        let name_of = |p: &pb::XPlane, id: i64| p.stat_metadata[&id].name.clone();
        assert_eq!(name_of(a, a.stats[0].metadata_id), "x");
        let by = &b.lines[0].events[0].stats[0];
        assert_eq!(name_of(b, by.metadata_id), "y");
        // Same name, different planes: different ids.
        assert_ne!(a.lines[0].events[0].stats[0].metadata_id, by.metadata_id);
        // Same event name → same metadata.
        assert_eq!(
            b.lines[0].events[0].metadata_id,
            b.lines[0].events[1].metadata_id
        );
        assert_eq!(b.event_metadata.len(), 1);
    }

    #[test]
    fn refs_metadata_stats_and_hlo_modules() {
        let hlo = simple_hlo_proto("jit_f", &[("p", "parameter"), ("r", "negate")]);
        let space = XSpaceBuilder::new()
            .plane("/host:metadata", |p| p.hlo_module(-5, 1u64 << 63, &hlo))
            .plane("/device:TPU:0", |p| {
                p.line("XLA Ops", |l| {
                    l.event("%r = f32[8,128] negate(%p)", 0, 10)
                        .display_name("r")
                        .metadata_stat("hlo_category", Ref("elementwise"))
                })
            })
            .build();
        let md = &space.planes[0].event_metadata[&-5];
        assert_eq!(md.name, format!("jit_f({})", 1u64 << 63));
        let decoded = xla::HloProto::decode(match &md.stats[0].value {
            Some(pb::x_stat::Value::BytesValue(b)) => b.as_slice(),
            _ => panic!("Hlo Proto is bytes"),
        })
        .unwrap();
        assert_eq!(decoded, hlo);
        let tpu = &space.planes[1];
        let m = &tpu.event_metadata[&1];
        assert_eq!(m.display_name, "r");
        match m.stats[0].value {
            Some(pb::x_stat::Value::RefValue(r)) => {
                assert_eq!(tpu.stat_metadata[&(r as i64)].name, "elementwise")
            }
            ref v => panic!("expected a ref, got {v:?}"),
        }
    }

    #[test]
    fn writes_the_run_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = XSpaceBuilder::new()
            .hostname("h")
            .write_run(dir.path(), "run1", "h")
            .unwrap();
        assert_eq!(path, dir.path().join("plugins/profile/run1/h.xplane.pb"));
        let back = pb::XSpace::decode(std::fs::read(&path).unwrap().as_slice()).unwrap();
        assert_eq!(back.hostnames, ["h"]);
    }
}
