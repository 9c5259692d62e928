//! XProf's `memory_viewer` view: one HLO module's buffer assignment, simulated over its heap
//! trace to find the buffers live at the peak (`hlo_proto_to_memory_visualization_utils.cc`).
//!
//! Input: an `xla.HloProto` (module + `buffer_assignment`) and a memory color (0 = HBM /
//! default memory, 1 = TPU VMEM, ...). Output: [`PreprocessResult`], printed by
//! [`PreprocessResult::to_xprof_json`] as XProf's proto3 JSON (camelCase, int64 as strings,
//! default values omitted).
//!
//! Where XProf iterates a hash map of allocations we use allocation order (the order of
//! `buffer_allocations`), which is what XProf printed on every reference capture; where it
//! sorts heap objects by size with an unstable sort we sort stably.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value, json};
use xprof_proto::xla::heap_simulator_trace::event::Kind;
use xprof_proto::xla::{
    BufferAllocationProto, HloInstructionProto, HloProto, LogicalBufferProto, PrimitiveType,
    ShapeProto, StackFrameIndexProto,
};

use xprof_hlo::print::element_bits;

use crate::MemoryError;

/// Buffers smaller than this are summed into one "small" heap object (XProf's default).
pub const SMALL_BUFFER_SIZE: i64 = 16 * 1024;

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Bytes of one element of `t` (sub-byte types take a byte each, as without a packed layout;
/// opaque values are 8-byte pointers).
fn element_bytes(t: i32) -> i64 {
    if t == PrimitiveType::OpaqueType as i32 {
        return 8;
    }
    element_bits(t).div_ceil(8) as i64
}

/// The size of `shape` without layout padding or tiling (`ShapeUtil::ByteSizeOf` on the
/// default layout, 8-byte pointers for tuple tables).
pub fn unpadded_size(shape: &ShapeProto) -> i64 {
    if shape.element_type == PrimitiveType::Tuple as i32 {
        return 8 * shape.tuple_shapes.len() as i64;
    }
    if shape.element_type == PrimitiveType::Token as i32 {
        return 0;
    }
    let n = shape
        .dimensions
        .iter()
        .fold(1i64, |a, &d| a.saturating_mul(d.max(0)));
    n.saturating_mul(element_bytes(shape.element_type))
}

/// XProf's `ResolveShapeIndex`: the tuple element named by the *last* index (historical
/// behaviour), else the whole shape.
fn resolve_shape<'a>(shape: &'a ShapeProto, index: &[i64]) -> &'a ShapeProto {
    if let Some(&i) = index.last()
        && i >= 0
        && (i as usize) < shape.tuple_shapes.len()
    {
        return &shape.tuple_shapes[i as usize];
    }
    shape
}

/// The category XProf shows for an allocation.
pub fn category(a: &BufferAllocationProto) -> &'static str {
    if a.is_entry_computation_parameter {
        "Parameter"
    } else if a.maybe_live_out {
        "Output"
    } else if a.is_thread_local {
        "Thread-local"
    } else if a.is_constant {
        "Constant"
    } else {
        "Temporary"
    }
}

/// Lifetime not reflected by the heap simulation. Thread-local allocations are not counted:
/// they live on a thread's stack, not in device memory (XProf 2.24.2 leaves them out of the
/// indefinite lifetimes, the totals and the peak; they still count as non-reusable).
pub fn is_indefinite(a: &BufferAllocationProto) -> bool {
    !a.is_thread_local && (a.is_entry_computation_parameter || a.is_constant || a.maybe_live_out)
}

fn is_reusable(a: &BufferAllocationProto) -> bool {
    !a.is_thread_local && !a.is_tuple
}

/// Source location of an instruction (XProf's `GetSourceInfo`): the legacy
/// `source_file`/`source_line` when set, else the first frame of its stack.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceInfo {
    pub file_name: String,
    pub line_number: i32,
    pub stack_frame: String,
}

fn stack_frames(index: Option<&StackFrameIndexProto>, mut id: i32) -> String {
    let Some(ix) = index else {
        return String::new();
    };
    let mut out = Vec::new();
    // A malformed index could loop; a stack is never deeper than the frame table.
    let mut guard = ix.stack_frames.len();
    while id > 0 && (id as usize) <= ix.stack_frames.len() && guard > 0 {
        guard -= 1;
        let f = &ix.stack_frames[id as usize - 1];
        id = f.parent_frame_id;
        let (mut file, mut line, mut col) = (String::new(), -1, -1);
        let loc = f.file_location_id;
        if loc > 0 && (loc as usize) <= ix.file_locations.len() {
            let l = &ix.file_locations[loc as usize - 1];
            line = l.line;
            col = l.column;
            let fid = l.file_name_id;
            if fid > 0 && (fid as usize) <= ix.file_names.len() {
                file = ix.file_names[fid as usize - 1].clone();
            }
        }
        out.push(format!("{file}:{line}:{col}"));
    }
    out.join("\n")
}

pub fn source_info(i: &HloInstructionProto, index: Option<&StackFrameIndexProto>) -> SourceInfo {
    let md = i.metadata.clone().unwrap_or_default();
    let stack = stack_frames(index, md.stack_frame_id);
    if !md.source_file.is_empty() {
        return SourceInfo {
            file_name: md.source_file,
            line_number: md.source_line,
            stack_frame: stack,
        };
    }
    let first = stack.split('\n').next().unwrap_or("");
    let parts: Vec<&str> = first.split(':').collect();
    if !stack.is_empty() && parts.len() >= 2 {
        return SourceInfo {
            file_name: parts[0].to_string(),
            line_number: parts[1].parse().unwrap_or(0),
            stack_frame: stack,
        };
    }
    SourceInfo::default()
}

/// A heap object (`HeapObject`): one bar of the peak chart.
#[derive(Clone, Debug, PartialEq)]
pub struct HeapObject {
    pub numbered: i32,
    pub label: String,
    pub logical_buffer_id: i64,
    pub size_bytes: i64,
    pub unpadded_bytes: i64,
    pub instruction_name: String,
    pub shape_string: String,
    pub tf_op_name: String,
    pub group_name: String,
    pub op_code: String,
    pub source_info: SourceInfo,
}

/// A logical buffer of an indefinite allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct IndefiniteBuffer {
    pub id: i64,
    pub shape: String,
    pub size_bytes: i64,
    pub hlo_name: String,
    pub shape_index: Vec<i64>,
}

/// An allocation with indefinite lifetime (`BufferAllocation` of the result).
#[derive(Clone, Debug, PartialEq)]
pub struct IndefiniteAllocation {
    pub id: i64,
    pub size_bytes: i64,
    pub attributes: Vec<&'static str>,
    pub logical_buffers: Vec<IndefiniteBuffer>,
    pub common_shape: String,
}

/// A block of the allocation timeline (`BufferBlockProto`).
#[derive(Clone, Debug, PartialEq)]
pub struct BufferBlock {
    pub logical_buffer_id: i64,
    pub name: String,
    pub offset: i64,
    pub size: i64,
    pub start_step: i64,
    pub end_step: i64,
    pub tf_op_name: String,
    pub category: String,
    pub source_info: SourceInfo,
    pub shape_string: String,
    pub unpadded_size: i64,
}

/// The view (`PreprocessResult`), with exact byte counts beside XProf's MiB.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PreprocessResult {
    pub module_name: String,
    pub entry_computation_name: String,
    pub memory_color: i64,
    /// Heap size before each simulator event and after the last (bytes, indefinite included).
    pub heap_sizes_bytes: Vec<i64>,
    pub unpadded_heap_sizes_bytes: Vec<i64>,
    pub hlo_instruction_names: Vec<String>,
    pub max_heap: Vec<HeapObject>,
    pub max_heap_by_size: Vec<usize>,
    pub logical_buffer_spans: BTreeMap<i64, (i64, i64)>,
    pub peak_heap_bytes: i64,
    pub peak_unpadded_heap_bytes: i64,
    pub peak_heap_size_position: i64,
    pub entry_computation_parameters_bytes: i64,
    pub non_reusable_bytes: i64,
    pub maybe_live_out_bytes: i64,
    pub total_buffer_allocation_bytes: i64,
    pub indefinite_buffer_allocation_bytes: i64,
    pub indefinite_memory_usage_bytes: i64,
    pub max_scoped_vmem_bytes: i64,
    pub max_scoped_vmem_instruction_name: String,
    pub indefinite_lifetimes: Vec<IndefiniteAllocation>,
    pub buffer_blocks: Vec<BufferBlock>,
    /// Whether a heap-simulator trace was found for this color (else only indefinite buffers).
    pub simulated: bool,
}

struct Lb<'p> {
    proto: &'p LogicalBufferProto,
    alloc: usize,
    instr: &'p HloInstructionProto,
    offset: i64,
    shape: &'p ShapeProto,
    unpadded: i64,
    span: Option<(i64, i64)>,
    ref_count: i64,
    canonical: Option<usize>,
}

struct Wrapper<'p> {
    proto: &'p HloProto,
    allocs: Vec<&'p BufferAllocationProto>,
    trace_of_alloc: Vec<Option<usize>>,
    lbs: Vec<Lb<'p>>,
    lb_index: HashMap<i64, usize>,
}

impl<'p> Wrapper<'p> {
    fn new(proto: &'p HloProto) -> Self {
        let module = proto.hlo_module.as_ref();
        let ba = proto.buffer_assignment.as_ref();
        let mut by_id: HashMap<i64, &HloInstructionProto> = HashMap::new();
        for c in module.map(|m| m.computations.as_slice()).unwrap_or(&[]) {
            for i in &c.instructions {
                by_id.insert(i.id, i);
            }
        }
        let mut lb_protos: HashMap<i64, &LogicalBufferProto> = HashMap::new();
        for lb in ba.map(|b| b.logical_buffers.as_slice()).unwrap_or(&[]) {
            lb_protos.insert(lb.id, lb);
        }
        let allocs: Vec<&BufferAllocationProto> = ba
            .map(|b| b.buffer_allocations.iter().collect())
            .unwrap_or_default();
        let mut lbs = Vec::new();
        let mut lb_index = HashMap::new();
        for (ai, a) in allocs.iter().enumerate() {
            for asg in &a.assigned {
                let Some(lb) = lb_protos.get(&asg.logical_buffer_id) else {
                    continue;
                };
                let loc = lb.defined_at.as_ref();
                let Some(instr) = by_id.get(&loc.map_or(0, |l| l.instruction_id)) else {
                    continue;
                };
                static EMPTY: std::sync::OnceLock<ShapeProto> = std::sync::OnceLock::new();
                let whole = instr
                    .shape
                    .as_ref()
                    .unwrap_or_else(|| EMPTY.get_or_init(ShapeProto::default));
                let shape = resolve_shape(whole, loc.map_or(&[][..], |l| &l.shape_index));
                let entry = Lb {
                    proto: lb,
                    alloc: ai,
                    instr,
                    offset: asg.offset,
                    shape,
                    unpadded: unpadded_size(shape),
                    span: None,
                    ref_count: 0,
                    canonical: None,
                };
                // A logical buffer assigned twice keeps its last assignment, as XProf's map.
                match lb_index.get(&lb.id) {
                    Some(&k) => lbs[k] = entry,
                    None => {
                        lb_index.insert(lb.id, lbs.len());
                        lbs.push(entry);
                    }
                }
            }
        }
        let mut trace_of_alloc = vec![None; allocs.len()];
        for (ti, t) in ba
            .map(|b| b.heap_simulator_traces.as_slice())
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            // The trace's own buffer_allocation_index is not trusted (XProf): its first
            // event's buffer says which allocation it simulates.
            let Some(first) = t.events.first() else {
                continue;
            };
            if let Some(&k) = lb_index.get(&first.buffer_id) {
                trace_of_alloc[lbs[k].alloc] = Some(ti);
            }
        }
        Wrapper {
            proto,
            allocs,
            trace_of_alloc,
            lbs,
            lb_index,
        }
    }

    fn allocs_of(
        &self,
        color: i64,
    ) -> impl Iterator<Item = (usize, &'p BufferAllocationProto)> + '_ {
        self.allocs
            .iter()
            .enumerate()
            .filter(move |(_, a)| a.color == color)
            .map(|(i, a)| (i, *a))
    }

    fn trace_id(&self, color: i64) -> Option<usize> {
        for (i, a) in self.allocs_of(color) {
            if is_indefinite(a) {
                continue;
            }
            if let Some(t) = self.trace_of_alloc[i] {
                return Some(t);
            }
        }
        // Else the trace with the most events of this color.
        let traces = &self.proto.buffer_assignment.as_ref()?.heap_simulator_traces;
        let mut best = None;
        let mut best_count = 0;
        for (ti, t) in traces.iter().enumerate() {
            let n = t
                .events
                .iter()
                .filter(|e| {
                    self.lb_index
                        .get(&e.buffer_id)
                        .is_some_and(|&k| self.lbs[k].proto.color == color)
                })
                .count();
            if n > best_count {
                best = Some(ti);
                best_count = n;
            }
        }
        best
    }

    fn root(&self, mut k: usize) -> usize {
        // Canonical chains are acyclic in valid input; bound the walk for invalid input.
        let mut guard = self.lbs.len();
        while let Some(c) = self.lbs[k].canonical {
            if guard == 0 {
                break;
            }
            guard -= 1;
            k = c;
        }
        k
    }

    fn inc(&mut self, k: usize) -> i64 {
        let r = self.root(k);
        self.lbs[r].ref_count += 1;
        self.lbs[r].ref_count
    }

    fn dec(&mut self, k: usize) -> i64 {
        let r = self.root(k);
        self.lbs[r].ref_count -= 1;
        self.lbs[r].ref_count
    }

    fn stack_index(&self) -> Option<&'p StackFrameIndexProto> {
        self.proto
            .hlo_module
            .as_ref()
            .and_then(|m| m.stack_frame_index.as_ref())
    }

    fn name_with_index(&self, k: usize) -> String {
        let lb = &self.lbs[k];
        let idx = lb
            .proto
            .defined_at
            .as_ref()
            .map(|l| l.shape_index.as_slice())
            .unwrap_or(&[]);
        if idx.is_empty() {
            lb.instr.name.clone()
        } else {
            let parts: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
            format!("{}{{{}}}", lb.instr.name, parts.join(","))
        }
    }

    fn heap_object(&self, k: usize, numbered: i32) -> HeapObject {
        let lb = &self.lbs[k];
        let shape = xprof_hlo::print::shape_with_layout(lb.shape);
        let op_name = lb
            .instr
            .metadata
            .as_ref()
            .map(|m| m.op_name.clone())
            .unwrap_or_default();
        HeapObject {
            numbered,
            label: format!("{}: {} # {}", lb.instr.name, shape, op_name),
            logical_buffer_id: lb.proto.id,
            size_bytes: lb.proto.size,
            unpadded_bytes: lb.unpadded,
            instruction_name: self.name_with_index(k),
            shape_string: shape,
            tf_op_name: op_name,
            group_name: category(self.allocs[lb.alloc]).to_string(),
            op_code: lb.instr.opcode.clone(),
            source_info: source_info(lb.instr, self.stack_index()),
        }
    }
}

#[derive(Default)]
struct Sim {
    heap: i64,
    unpadded: i64,
    peak: i64,
    peak_unpadded: i64,
    live: Vec<i64>,
    peak_live: Vec<i64>,
    heap_tl: Vec<i64>,
    unpadded_tl: Vec<i64>,
    names_tl: Vec<String>,
    peak_pos: i64,
    seen_lbs: HashSet<usize>,
    seen_allocs: HashSet<usize>,
    display: HashMap<i64, i64>,
    peak_display: HashMap<i64, i64>,
    n_events: i64,
}

impl Sim {
    fn increase(&mut self, w: &mut Wrapper<'_>, k: usize, init_span: bool) {
        let lb = &w.lbs[k];
        self.live.push(lb.proto.id);
        self.heap = self.heap.saturating_add(lb.proto.size);
        self.unpadded = self.unpadded.saturating_add(lb.unpadded);
        if self.heap > self.peak {
            self.peak = self.heap;
            self.peak_pos = self.heap_tl.len() as i64 - 1;
            self.peak_unpadded = self.unpadded;
            self.peak_live = self.live.clone();
            self.peak_display = self.display.clone();
        }
        if init_span {
            w.lbs[k].span = Some((self.heap_tl.len() as i64 - 1, self.n_events - 1));
        }
    }

    /// The last reference to `root`'s memory went away through buffer `freed` (`root` itself
    /// or a buffer sharing it). The memory is `root`'s; the lifetime that ends is `freed`'s when
    /// it has one, else `root`'s — unless a sharer revived `root`'s memory after it was freed
    /// once: that sharer's span already ended at its own FREE and `root`'s earlier end stays
    /// (what XProf 2.24.2 prints).
    fn decrease(&mut self, w: &mut Wrapper<'_>, root: usize, freed: usize) -> Result<(), String> {
        let id = w.lbs[root].proto.id;
        self.live.retain(|&x| x != id);
        self.heap = self.heap.saturating_sub(w.lbs[root].proto.size);
        if self.heap < 0 {
            return Err(format!(
                "Heap size should be non-negative, but get: {}",
                self.heap
            ));
        }
        self.unpadded = self.unpadded.saturating_sub(w.lbs[root].unpadded);
        let end = self.heap_tl.len() as i64 - 1;
        let owner = if w.lbs[freed].span.is_some() {
            Some(freed)
        } else if self.display.contains_key(&id) {
            None
        } else {
            Some(root)
        };
        if let Some(s) = owner.and_then(|o| w.lbs[o].span.as_mut()) {
            s.1 = end;
        }
        Ok(())
    }
}

fn simulate(w: &mut Wrapper<'_>, color: i64, sim: &mut Sim) -> Result<bool, String> {
    let Some(ti) = w.trace_id(color) else {
        return Ok(false);
    };
    let proto = w.proto;
    let Some(trace) = proto
        .buffer_assignment
        .as_ref()
        .and_then(|b| b.heap_simulator_traces.get(ti))
    else {
        return Ok(false);
    };
    sim.n_events = trace.events.len() as i64;
    for ev in &trace.events {
        sim.heap_tl.push(sim.heap);
        sim.unpadded_tl.push(sim.unpadded);
        sim.names_tl.push(ev.instruction_name.clone());
        let Some(&k) = w.lb_index.get(&ev.buffer_id) else {
            continue;
        };
        sim.seen_lbs.insert(k);
        sim.seen_allocs.insert(w.lbs[k].alloc);
        match Kind::try_from(ev.kind) {
            Ok(Kind::Alloc) => {
                w.inc(k);
                sim.increase(w, k, true);
            }
            Ok(Kind::Free) => {
                let r = w.dec(k);
                if r < 0 {
                    return Err(format!("Buffer {} is freed multiple times.", ev.buffer_id));
                }
                let end = sim.heap_tl.len() as i64 - 1;
                if r == 0 {
                    let root = w.root(k);
                    sim.decrease(w, root, k)?;
                } else if let Some(s) = &mut w.lbs[k].span {
                    // A sharer freed while others still hold the memory: its lifetime ends.
                    s.1 = end;
                }
            }
            Ok(Kind::ShareWith) => {
                let Some(&c) = w.lb_index.get(&ev.share_with_canonical_id) else {
                    continue;
                };
                if c == k || w.root(c) == k {
                    return Err(format!(
                        "Buffer {} is shared with itself (canonical {}).",
                        ev.buffer_id, ev.share_with_canonical_id
                    ));
                }
                w.lbs[k].canonical = Some(c);
                let r = w.inc(c);
                if r == 1 {
                    let root = w.root(c);
                    sim.display.insert(w.lbs[root].proto.id, w.lbs[k].proto.id);
                    w.lbs[k].span = Some((sim.heap_tl.len() as i64 - 1, sim.n_events - 1));
                    sim.increase(w, root, false);
                }
            }
            Err(_) => return Err(format!("Unhandled event kind: {}", ev.kind)),
        }
    }
    sim.heap_tl.push(sim.heap);
    sim.unpadded_tl.push(sim.unpadded);
    sim.names_tl.push(String::new());
    if sim.seen_allocs.len() != 1 {
        return Err(format!(
            "All heap simulation should work out of a single buffer allocation, actual seen_buffer_allocations.size():{}",
            sim.seen_allocs.len()
        ));
    }
    Ok(true)
}

fn scoped_vmem(proto: &HloProto, color: i64) -> (i64, String) {
    if color != 1 {
        return (0, String::new());
    }
    let int = |v: Option<&Value>| -> i64 {
        match v {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
            Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
            _ => 0,
        }
    };
    let mut best = (0i64, String::new());
    for c in proto
        .hlo_module
        .as_ref()
        .map(|m| m.computations.as_slice())
        .unwrap_or(&[])
    {
        for i in &c.instructions {
            if i.backend_config.is_empty() {
                continue;
            }
            let Ok(v) = serde_json::from_slice::<Value>(&i.backend_config) else {
                continue;
            };
            let Some(entries) = v
                .get("used_scoped_memory_configs")
                .and_then(Value::as_array)
            else {
                continue;
            };
            for e in entries {
                if int(e.get("memory_space")) == color {
                    let size = int(e.get("size"));
                    if size > best.0 {
                        best = (size, i.name.clone());
                    }
                }
            }
        }
    }
    best
}

/// Compute the view for memory color `color`.
pub fn preprocess(proto: &HloProto, color: i64) -> Result<PreprocessResult, MemoryError> {
    preprocess_with(proto, color, SMALL_BUFFER_SIZE)
}

pub fn preprocess_with(
    proto: &HloProto,
    color: i64,
    small_buffer_size: i64,
) -> Result<PreprocessResult, MemoryError> {
    let mut w = Wrapper::new(proto);
    let mut sim = Sim::default();
    let simulated = simulate(&mut w, color, &mut sim).map_err(|m| {
        MemoryError::invalid(
            "heap simulator trace",
            format!("Failed to process heap simulator trace: {m}"),
        )
    })?;

    // Peak snapshot: indefinite buffers first (bars only for color 0), then the live ones.
    let mut max_heap: Vec<HeapObject> = Vec::new();
    let mut small_total = 0i64;
    let mut indefinite_usage = 0i64;
    let mut add = |w: &Wrapper<'_>, k: usize, max_heap: &mut Vec<HeapObject>| {
        let size = w.lbs[k].proto.size;
        if size < small_buffer_size {
            small_total = small_total.saturating_add(size);
        } else {
            let n = max_heap.len() as i32;
            max_heap.push(w.heap_object(k, n));
        }
    };
    for (_, a) in w.allocs_of(color) {
        if !is_indefinite(a) {
            continue;
        }
        let mut best: Option<usize> = None;
        let mut best_size = 0i64;
        for asg in &a.assigned {
            if let Some(&k) = w.lb_index.get(&asg.logical_buffer_id)
                && w.lbs[k].proto.size > best_size
            {
                best_size = w.lbs[k].proto.size;
                best = Some(k);
            }
        }
        if let Some(k) = best {
            indefinite_usage = indefinite_usage.saturating_add(a.size);
            if color == 0 {
                add(&w, k, &mut max_heap);
            }
        }
    }
    for id in &sim.peak_live {
        let display = sim.peak_display.get(id).copied().unwrap_or(*id);
        let Some(&k) = w.lb_index.get(&display) else {
            break;
        };
        add(&w, k, &mut max_heap);
    }
    if small_total != 0 {
        max_heap.push(HeapObject {
            numbered: max_heap.len() as i32,
            label: format!("small (<{small_buffer_size} bytes)"),
            logical_buffer_id: -1,
            size_bytes: small_total,
            unpadded_bytes: 0,
            instruction_name: String::new(),
            shape_string: String::new(),
            tf_op_name: String::new(),
            group_name: String::new(),
            op_code: String::new(),
            source_info: SourceInfo::default(),
        });
    }
    let mut by_size: Vec<usize> = (0..max_heap.len()).collect();
    by_size.sort_by(|&a, &b| max_heap[b].size_bytes.cmp(&max_heap[a].size_bytes));

    let module = proto.hlo_module.as_ref();
    let mut r = PreprocessResult {
        module_name: module.map(|m| m.name.clone()).unwrap_or_default(),
        entry_computation_name: module
            .map(|m| m.entry_computation_name.clone())
            .unwrap_or_default(),
        memory_color: color,
        heap_sizes_bytes: sim
            .heap_tl
            .iter()
            .map(|h| h.saturating_add(indefinite_usage))
            .collect(),
        unpadded_heap_sizes_bytes: sim
            .unpadded_tl
            .iter()
            .map(|h| h.saturating_add(indefinite_usage))
            .collect(),
        hlo_instruction_names: std::mem::take(&mut sim.names_tl),
        max_heap,
        max_heap_by_size: by_size,
        peak_heap_bytes: sim.peak.saturating_add(indefinite_usage),
        peak_unpadded_heap_bytes: sim.peak_unpadded.saturating_add(indefinite_usage),
        peak_heap_size_position: sim.peak_pos,
        indefinite_memory_usage_bytes: indefinite_usage,
        simulated,
        ..Default::default()
    };
    for &k in &sim.seen_lbs {
        if let Some(s) = w.lbs[k].span {
            r.logical_buffer_spans.insert(w.lbs[k].proto.id, s);
        }
    }
    for (_, a) in w.allocs_of(color) {
        if a.is_entry_computation_parameter {
            r.entry_computation_parameters_bytes =
                r.entry_computation_parameters_bytes.saturating_add(a.size);
        }
        if !is_reusable(a) {
            r.non_reusable_bytes = r.non_reusable_bytes.saturating_add(a.size);
        }
        if a.maybe_live_out {
            r.maybe_live_out_bytes = r.maybe_live_out_bytes.saturating_add(a.size);
        }
        if !a.is_thread_local {
            r.total_buffer_allocation_bytes =
                r.total_buffer_allocation_bytes.saturating_add(a.size);
        }
        if is_indefinite(a) {
            r.indefinite_buffer_allocation_bytes =
                r.indefinite_buffer_allocation_bytes.saturating_add(a.size);
            r.indefinite_lifetimes.push(indefinite(&w, a));
        }
    }
    let (scoped, scoped_name) = scoped_vmem(proto, color);
    r.max_scoped_vmem_bytes = scoped;
    r.max_scoped_vmem_instruction_name = scoped_name;
    r.buffer_blocks = buffer_blocks(&w, color);
    Ok(r)
}

fn indefinite(w: &Wrapper<'_>, a: &BufferAllocationProto) -> IndefiniteAllocation {
    let mut attributes = Vec::new();
    if a.is_entry_computation_parameter {
        attributes.push("entry computation parameter");
    }
    if a.maybe_live_out {
        attributes.push("may-be live out");
    }
    if is_reusable(a) {
        attributes.push("reusable");
    }
    let mut lbs = Vec::new();
    for asg in &a.assigned {
        let mut b = IndefiniteBuffer {
            id: asg.logical_buffer_id,
            shape: String::new(),
            size_bytes: asg.size,
            hlo_name: String::new(),
            shape_index: Vec::new(),
        };
        if let Some(&k) = w.lb_index.get(&asg.logical_buffer_id) {
            let lb = &w.lbs[k];
            b.hlo_name = lb.instr.name.clone();
            b.shape_index = lb
                .proto
                .defined_at
                .as_ref()
                .map(|l| l.shape_index.clone())
                .unwrap_or_default();
            b.shape = xprof_hlo::print::shape_with_layout(lb.shape);
        }
        lbs.push(b);
    }
    let common_shape = match lbs.first() {
        Some(f) if lbs.iter().all(|b| b.shape == f.shape) => f.shape.clone(),
        _ => String::new(),
    };
    IndefiniteAllocation {
        id: a.index,
        size_bytes: a.size,
        attributes,
        logical_buffers: lbs,
        common_shape,
    }
}

/// The allocation timeline's blocks: each simulated (non-indefinite) allocation of the color
/// stacked on the y axis, each canonical buffer a block over its span.
fn buffer_blocks(w: &Wrapper<'_>, color: i64) -> Vec<BufferBlock> {
    let traces = w
        .proto
        .buffer_assignment
        .as_ref()
        .map(|b| b.heap_simulator_traces.as_slice())
        .unwrap_or(&[]);
    let mut placed: Vec<(usize, i64)> = Vec::new();
    let (mut total_y, mut total_x) = (0i64, 0i64);
    for (i, a) in w.allocs_of(color) {
        if is_indefinite(a) {
            continue;
        }
        let Some(t) = w.trace_of_alloc[i] else {
            continue;
        };
        placed.push((i, total_y));
        total_y = total_y.saturating_add(a.size);
        total_x = total_x.max(traces.get(t).map_or(0, |t| t.events.len() as i64));
    }
    let mut out = Vec::new();
    if total_y == 0 || total_x == 0 {
        return out;
    }
    for (i, y0) in placed {
        let a = w.allocs[i];
        let cat = category(a).to_string();
        out.push(BufferBlock {
            logical_buffer_id: -1,
            name: cat.clone(),
            offset: y0,
            size: a.size,
            start_step: 0,
            end_step: total_x,
            tf_op_name: String::new(),
            category: cat.clone(),
            source_info: SourceInfo::default(),
            shape_string: String::new(),
            unpadded_size: 0,
        });
        for asg in &a.assigned {
            let Some(&k) = w.lb_index.get(&asg.logical_buffer_id) else {
                continue;
            };
            let lb = &w.lbs[k];
            // Sharing buffers are blocks of their own over their own span (XProf 2.24.2).
            let Some(span) = lb.span else {
                continue;
            };
            out.push(BufferBlock {
                logical_buffer_id: lb.proto.id,
                name: w.name_with_index(k),
                offset: y0.saturating_add(lb.offset),
                size: lb.proto.size,
                start_step: span.0,
                end_step: span.1,
                tf_op_name: lb
                    .instr
                    .metadata
                    .as_ref()
                    .map(|m| m.op_name.clone())
                    .unwrap_or_default(),
                category: category(w.allocs[lb.alloc]).to_string(),
                source_info: source_info(lb.instr, w.stack_index()),
                shape_string: xprof_hlo::print::shape_with_layout(lb.shape),
                unpadded_size: lb.unpadded,
            });
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// JSON (proto3 JSON: default values omitted, int64 as strings)

struct Obj(Map<String, Value>);

impl Obj {
    fn new() -> Self {
        Obj(Map::new())
    }
    fn s(mut self, k: &str, v: &str) -> Self {
        if !v.is_empty() {
            self.0.insert(k.into(), Value::from(v));
        }
        self
    }
    fn i32(mut self, k: &str, v: i64) -> Self {
        if v != 0 {
            self.0.insert(k.into(), Value::from(v));
        }
        self
    }
    fn i64s(mut self, k: &str, v: i64) -> Self {
        if v != 0 {
            self.0.insert(k.into(), Value::from(v.to_string()));
        }
        self
    }
    fn f(mut self, k: &str, v: f64) -> Self {
        if v != 0.0 {
            self.0.insert(k.into(), Value::from(v));
        }
        self
    }
    fn v(mut self, k: &str, v: Value) -> Self {
        let empty = match &v {
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            Value::Null => true,
            _ => false,
        };
        if !empty {
            self.0.insert(k.into(), v);
        }
        self
    }
    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

fn source_json(s: &SourceInfo) -> Value {
    Obj::new()
        .s("fileName", &s.file_name)
        .i32("lineNumber", s.line_number as i64)
        .s("stackFrame", &s.stack_frame)
        .done()
}

fn heap_object_json(o: &HeapObject) -> Value {
    let mut m = Map::new();
    // `numbered` is a oneof member: printed even when 0.
    m.insert("numbered".into(), Value::from(o.numbered));
    Obj(m)
        .s("label", &o.label)
        .i32("logicalBufferId", o.logical_buffer_id)
        .f("logicalBufferSizeMib", mib(o.size_bytes))
        .f("unpaddedShapeMib", mib(o.unpadded_bytes))
        .s("instructionName", &o.instruction_name)
        .s("shapeString", &o.shape_string)
        .s("tfOpName", &o.tf_op_name)
        .s("groupName", &o.group_name)
        .s("opCode", &o.op_code)
        .v("sourceInfo", source_json(&o.source_info))
        .done()
}

impl PreprocessResult {
    /// XProf's `memory_viewer.json` for this module and color.
    pub fn to_xprof_json(&self) -> Value {
        let add = mib(self.indefinite_memory_usage_bytes);
        let by_size_to_max: Vec<Value> = self.max_heap_by_size.iter().map(|&i| json!(i)).collect();
        let mut max_to_by_size = vec![0usize; self.max_heap.len()];
        for (pos, &i) in self.max_heap_by_size.iter().enumerate() {
            max_to_by_size[i] = pos;
        }
        let spans: Map<String, Value> = self
            .logical_buffer_spans
            .iter()
            .map(|(id, (s, l))| {
                (
                    id.to_string(),
                    Obj::new().i32("start", *s).i32("limit", *l).done(),
                )
            })
            .collect();
        let mib_list = |v: &[i64], base: i64| -> Vec<Value> {
            v.iter()
                .map(|b| json!(mib(b.saturating_sub(base)) + add))
                .collect()
        };
        let base = self.indefinite_memory_usage_bytes;
        Obj::new()
            .v(
                "heapSizes",
                Value::Array(mib_list(&self.heap_sizes_bytes, base)),
            )
            .v(
                "unpaddedHeapSizes",
                Value::Array(mib_list(&self.unpadded_heap_sizes_bytes, base)),
            )
            .v(
                "maxHeap",
                Value::Array(self.max_heap.iter().map(heap_object_json).collect()),
            )
            .v(
                "maxHeapBySize",
                Value::Array(
                    self.max_heap_by_size
                        .iter()
                        .map(|&i| heap_object_json(&self.max_heap[i]))
                        .collect(),
                ),
            )
            .v("logicalBufferSpans", Value::Object(spans))
            .v("maxHeapToBySize", json!(max_to_by_size))
            .v("bySizeToMaxHeap", Value::Array(by_size_to_max))
            .s("moduleName", &self.module_name)
            .s("entryComputationName", &self.entry_computation_name)
            .f(
                "peakHeapMib",
                mib(self.peak_heap_bytes.saturating_sub(base)) + add,
            )
            .f(
                "peakUnpaddedHeapMib",
                mib(self.peak_unpadded_heap_bytes.saturating_sub(base)) + add,
            )
            .i32("peakHeapSizePosition", self.peak_heap_size_position)
            .f(
                "entryComputationParametersMib",
                mib(self.entry_computation_parameters_bytes),
            )
            .f("nonReusableMib", mib(self.non_reusable_bytes))
            .f("maybeLiveOutMib", mib(self.maybe_live_out_bytes))
            .v(
                "indefiniteLifetimes",
                Value::Array(
                    self.indefinite_lifetimes
                        .iter()
                        .map(|a| {
                            Obj::new()
                                .i64s("id", a.id)
                                .f("sizeMib", mib(a.size_bytes))
                                .v("attributes", json!(a.attributes))
                                .v(
                                    "logicalBuffers",
                                    Value::Array(
                                        a.logical_buffers
                                            .iter()
                                            .map(|b| {
                                                Obj::new()
                                                    .i64s("id", b.id)
                                                    .s("shape", &b.shape)
                                                    .f("sizeMib", mib(b.size_bytes))
                                                    .s("hloName", &b.hlo_name)
                                                    .v(
                                                        "shapeIndex",
                                                        Value::Array(
                                                            b.shape_index
                                                                .iter()
                                                                .map(|i| json!(i.to_string()))
                                                                .collect(),
                                                        ),
                                                    )
                                                    .done()
                                            })
                                            .collect(),
                                    ),
                                )
                                .s("commonShape", &a.common_shape)
                                .done()
                        })
                        .collect(),
                ),
            )
            .f(
                "totalBufferAllocationMib",
                mib(self.total_buffer_allocation_bytes),
            )
            .f(
                "indefiniteBufferAllocationMib",
                mib(self.indefinite_buffer_allocation_bytes),
            )
            .v("hloInstructionNames", json!(self.hlo_instruction_names))
            .f(
                "maxScopedVmemAllocationMib",
                mib(self.max_scoped_vmem_bytes),
            )
            .s(
                "maxScopedVmemInstructionName",
                &self.max_scoped_vmem_instruction_name,
            )
            .v(
                "bufferBlocks",
                Value::Array(
                    self.buffer_blocks
                        .iter()
                        .map(|b| {
                            Obj::new()
                                .i32("logicalBufferId", b.logical_buffer_id)
                                .s("name", &b.name)
                                .f("offset", b.offset as f64)
                                .f("size", b.size as f64)
                                .i32("startStep", b.start_step)
                                .i32("endStep", b.end_step)
                                .s("tfOpName", &b.tf_op_name)
                                .s("category", &b.category)
                                .v("sourceInfo", source_json(&b.source_info))
                                .s("shapeString", &b.shape_string)
                                .f("unpaddedSize", b.unpadded_size as f64)
                                .done()
                        })
                        .collect(),
                ),
            )
            .done()
    }
}
