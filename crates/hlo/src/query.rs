//! An HLO module as tables (computations, instructions, edges, call_edges), the layout of
//! XProf's CLI `query_hlo_graph` database, with shape-derived costs, graph queries and
//! read-only SQL over an in-memory SQLite copy.
//!
//! Ids are 1-based: computations in reverse post order (the entry first, callers before
//! callees), instructions in printed order within each, as XProf's CLI numbers them.
//! Costs follow XProf's CLI (`_compute_module_costs`): flops = output elements for
//! elementwise ops, 2·M·N·K for dots, (in − out) elements for reduces, out × (window − 1) for
//! reduce-window, the sum over the fused computation for fusions; bytes = operand bytes +
//! output bytes (0 for parameters, constants, tuples, get-tuple-element, bitcasts).

use std::collections::{HashMap, HashSet, VecDeque};

use serde::Serialize;
use serde_json::{Map, Value, json};
use xprof_proto::xla::{HloInstructionProto, PrimitiveType, ShapeProto};

use crate::error::HloError;
use crate::print::{
    ModuleView, PrintOptions, element_bits, layout_string, shape_with_layout, type_name,
};

#[derive(Clone, Debug, Serialize)]
pub struct CompRow {
    pub id: i64,
    pub name: String,
    pub is_entry: bool,
    pub instruction_count: i64,
    pub root_id: Option<i64>,
    /// Called (transitively) from a fusion: its instructions run inside a kernel.
    pub is_in_fusion: bool,
    /// Reached from the entry through control flow only (while/call/conditional), not as a
    /// fusion body, reducer or comparator.
    pub is_top_level: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct InstrRow {
    pub id: i64,
    pub name: String,
    pub computation_name: String,
    pub opcode: String,
    pub category: &'static str,
    pub shape: String,
    pub dtype: String,
    pub layout: String,
    pub is_root: bool,
    pub is_fusion_blocker: bool,
    pub is_in_fusion: bool,
    pub is_kernel_op: bool,
    pub operand_count: i64,
    pub user_count: i64,
    pub operands: Vec<String>,
    pub called_computations: Vec<String>,
    pub metadata_op_name: String,
    pub metadata_source_file: String,
    pub metadata_source_line: i64,
    pub flops: f64,
    pub bytes_accessed: f64,
    pub output_bytes: f64,
    pub expression: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct EdgeRow {
    pub src_id: i64,
    pub dst_id: i64,
    pub operand_index: i64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CallEdgeRow {
    pub caller_instr_id: i64,
    pub caller_comp_name: String,
    pub caller_instruction: String,
    pub caller_opcode: String,
    pub callee_comp_name: String,
    pub callee_instruction_count: i64,
}

pub struct GraphDb {
    pub module_name: String,
    pub entry: String,
    pub computations: Vec<CompRow>,
    pub instructions: Vec<InstrRow>,
    pub edges: Vec<EdgeRow>,
    pub call_edges: Vec<CallEdgeRow>,
    by_name: HashMap<String, usize>,
    users: Vec<Vec<usize>>,
    operands: Vec<Vec<usize>>,
}

/// Bytes of one element of `t`: fractions for sub-byte types (packed, as XProf counts them).
fn element_bytes(t: i32) -> f64 {
    element_bits(t) as f64 / 8.0
}

fn elements(s: &ShapeProto) -> f64 {
    s.dimensions.iter().map(|&d| d.max(0) as f64).product()
}

/// Bytes of a shape (tuples: the sum of their elements' arrays).
pub fn shape_bytes(s: &ShapeProto) -> f64 {
    if s.element_type == PrimitiveType::Tuple as i32 {
        s.tuple_shapes.iter().map(shape_bytes).sum()
    } else {
        elements(s) * element_bytes(s.element_type)
    }
}

/// HLO opcodes that compute each output element from the same element of their operands (the
/// `elementwise` category, fusion blockers, one FLOP per element in `estimated_flops`).
pub const ELEMENTWISE: &[&str] = &[
    "abs",
    "add",
    "and",
    "atan2",
    "cbrt",
    "ceil",
    "clamp",
    "compare",
    "complex",
    "convert",
    "cosine",
    "divide",
    "erf",
    "exponential",
    "exponential-minus-one",
    "floor",
    "imag",
    "is-finite",
    "log",
    "log-plus-one",
    "logistic",
    "maximum",
    "minimum",
    "multiply",
    "negate",
    "not",
    "or",
    "popcnt",
    "power",
    "real",
    "reduce-precision",
    "remainder",
    "round-nearest-afz",
    "round-nearest-even",
    "rsqrt",
    "select",
    "shift-left",
    "shift-right-arithmetic",
    "shift-right-logical",
    "sign",
    "sine",
    "sqrt",
    "stochastic-convert",
    "subtract",
    "tan",
    "tanh",
    "xor",
    "count-leading-zeros",
    "bitcast-convert",
];

const DATA_MOVEMENT: &[&str] = &[
    "broadcast",
    "reshape",
    "dynamic-reshape",
    "transpose",
    "copy",
    "slice",
    "dynamic-slice",
    "dynamic-update-slice",
    "concatenate",
    "pad",
    "reverse",
    "gather",
    "scatter",
    "iota",
];

fn category(op: &str) -> &'static str {
    match op {
        "fusion" => "fusion",
        "dot" | "convolution" | "ragged-dot" => "convolution",
        "custom-call" => "custom-call",
        "parameter" | "constant" | "tuple" | "get-tuple-element" | "bitcast" => "bookkeeping",
        "while" | "call" | "conditional" | "async-start" | "async-done" | "async-update" => {
            "control flow"
        }
        "reduce" | "reduce-window" | "select-and-scatter" | "sort" | "topk" => "reduction",
        o if o.starts_with("all-")
            || o.starts_with("collective-")
            || o.starts_with("reduce-scatter")
            || matches!(
                o,
                "send" | "recv" | "send-done" | "recv-done" | "partition-id" | "replica-id"
            ) =>
        {
            "collective"
        }
        o if DATA_MOVEMENT.contains(&o) => "data formatting",
        o if ELEMENTWISE.contains(&o) => "elementwise",
        _ => "other",
    }
}

impl GraphDb {
    pub fn build(view: &ModuleView<'_>, module_name: &str) -> GraphDb {
        let post = view.computation_post_order();
        let order: Vec<usize> = post.iter().rev().copied().collect();
        // Which computations run inside fusions, and which are top level.
        let mut in_fusion = vec![false; view.comps.len()];
        let mut top = vec![false; view.comps.len()];
        let callee = |id: &i64| view.comp_by_id.get(id).copied();
        // Callers precede callees in `order`, so one pass propagates both flags.
        if let Some(e) = view.entry {
            top[e] = true;
        }
        for &ci in &order {
            for ins in &view.instrs[ci] {
                let control = matches!(
                    ins.opcode.as_str(),
                    "while"
                        | "call"
                        | "conditional"
                        | "async-start"
                        | "async-update"
                        | "async-done"
                );
                for c in ins.called_computation_ids.iter().filter_map(callee) {
                    if ins.opcode == "fusion" || in_fusion[ci] {
                        in_fusion[c] = true;
                    }
                    if top[ci] && control {
                        top[c] = true;
                    }
                }
            }
        }
        // Flops of each computation, callees first.
        let mut comp_flops = vec![0f64; view.comps.len()];
        let mut instr_flops: HashMap<i64, f64> = HashMap::new();
        for &ci in &post {
            let mut total = 0.0;
            for ins in &view.instrs[ci] {
                let f = Self::flops(view, ins, &comp_flops);
                instr_flops.insert(ins.id, f);
                total += f;
            }
            comp_flops[ci] = total;
        }
        let short = PrintOptions::short();
        let mut computations = Vec::new();
        let mut instructions: Vec<InstrRow> = Vec::new();
        let mut row_of: HashMap<i64, usize> = HashMap::new();
        let mut next_id = 1i64;
        for (k, &ci) in order.iter().enumerate() {
            let comp = view.comps[ci];
            let root = view.instr_by_id.get(&comp.root_id).map(|l| l.1);
            let mut root_id = None;
            for ii in view.instruction_order(ci) {
                let ins = view.instrs[ci][ii];
                let is_root = Some(ii) == root;
                let shape = ins.shape.clone().unwrap_or_default();
                let text = view.instruction_text(ins, &short);
                let op = ins.opcode.as_str();
                let bytes = match op {
                    "parameter" | "constant" | "tuple" | "get-tuple-element" | "bitcast"
                    | "after-all" | "partition-id" | "replica-id" => 0.0,
                    _ => {
                        ins.operand_ids
                            .iter()
                            .filter_map(|id| view.instr(*id))
                            .filter_map(|o| o.shape.as_ref())
                            .map(shape_bytes)
                            .sum::<f64>()
                            + shape_bytes(&shape)
                    }
                };
                let md = ins.metadata.clone().unwrap_or_default();
                if is_root {
                    root_id = Some(next_id);
                }
                row_of.insert(ins.id, instructions.len());
                let top_level = top[ci] && !in_fusion[ci];
                instructions.push(InstrRow {
                    id: next_id,
                    name: ins.name.clone(),
                    computation_name: comp.name.clone(),
                    opcode: ins.opcode.clone(),
                    category: category(op),
                    shape: shape_with_layout(&shape),
                    dtype: type_name(shape.element_type),
                    // As the shape prints it: a scalar's default `{}` is not shown.
                    layout: shape
                        .layout
                        .as_ref()
                        .map(|l| layout_string(l))
                        .filter(|l| !(shape.dimensions.is_empty() && l == "{}"))
                        .unwrap_or_default(),
                    is_root,
                    is_fusion_blocker: top_level && Self::is_blocker(op),
                    is_in_fusion: in_fusion[ci],
                    is_kernel_op: top_level
                        && matches!(
                            category(op),
                            "fusion" | "convolution" | "custom-call" | "collective"
                        ),
                    operand_count: ins.operand_ids.len() as i64,
                    user_count: 0,
                    operands: ins
                        .operand_ids
                        .iter()
                        .filter_map(|id| view.instr(*id).map(|o| o.name.clone()))
                        .collect(),
                    called_computations: ins
                        .called_computation_ids
                        .iter()
                        .filter_map(callee)
                        .map(|c| view.comps[c].name.clone())
                        .collect(),
                    metadata_op_name: md.op_name,
                    metadata_source_file: md.source_file,
                    metadata_source_line: md.source_line as i64,
                    flops: instr_flops.get(&ins.id).copied().unwrap_or(0.0),
                    bytes_accessed: bytes,
                    output_bytes: shape_bytes(&shape),
                    expression: if is_root {
                        format!("ROOT {text}")
                    } else {
                        text
                    },
                });
                next_id += 1;
            }
            computations.push(CompRow {
                id: k as i64 + 1,
                name: comp.name.clone(),
                is_entry: Some(ci) == view.entry,
                instruction_count: view.instrs[ci].len() as i64,
                root_id,
                is_in_fusion: in_fusion[ci],
                is_top_level: top[ci] && !in_fusion[ci],
            });
        }
        let n = instructions.len();
        let mut users = vec![Vec::new(); n];
        let mut operands = vec![Vec::new(); n];
        let mut edges = Vec::new();
        let mut call_edges = Vec::new();
        for &ci in &order {
            for ii in view.instruction_order(ci) {
                let ins = view.instrs[ci][ii];
                let dst = row_of[&ins.id];
                for (k, op) in ins.operand_ids.iter().enumerate() {
                    if let Some(&src) = row_of.get(op) {
                        edges.push(EdgeRow {
                            src_id: instructions[src].id,
                            dst_id: instructions[dst].id,
                            operand_index: k as i64,
                        });
                        if !users[src].contains(&dst) {
                            users[src].push(dst);
                        }
                        operands[dst].push(src);
                    }
                }
                for c in ins.called_computation_ids.iter().filter_map(callee) {
                    call_edges.push(CallEdgeRow {
                        caller_instr_id: instructions[dst].id,
                        caller_comp_name: view.comps[ci].name.clone(),
                        caller_instruction: ins.name.clone(),
                        caller_opcode: ins.opcode.clone(),
                        callee_comp_name: view.comps[c].name.clone(),
                        callee_instruction_count: view.instrs[c].len() as i64,
                    });
                }
            }
        }
        for (i, u) in users.iter().enumerate() {
            instructions[i].user_count = u.len() as i64;
        }
        let by_name = instructions
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i))
            .collect();
        GraphDb {
            module_name: module_name.to_string(),
            entry: view
                .entry
                .map(|e| view.comps[e].name.clone())
                .unwrap_or_default(),
            computations,
            instructions,
            edges,
            call_edges,
            by_name,
            users,
            operands,
        }
    }

    /// Ops XLA could have fused but left standalone in a top-level computation: each one
    /// materialises its result in memory.
    fn is_blocker(op: &str) -> bool {
        ELEMENTWISE.contains(&op)
            || (DATA_MOVEMENT.contains(&op) && op != "iota")
            || matches!(op, "reduce" | "reduce-window")
    }

    fn flops(view: &ModuleView<'_>, ins: &HloInstructionProto, comp_flops: &[f64]) -> f64 {
        let out = ins.shape.as_ref().map(elements).unwrap_or(0.0);
        let operand_elems = |k: usize| {
            ins.operand_ids
                .get(k)
                .and_then(|id| view.instr(*id))
                .and_then(|o| o.shape.as_ref())
                .map(elements)
                .unwrap_or(0.0)
        };
        let called = |k: usize| {
            ins.called_computation_ids
                .get(k)
                .and_then(|id| view.comp_by_id.get(id))
                .map(|&c| comp_flops[c])
                .unwrap_or(0.0)
        };
        let op = ins.opcode.as_str();
        match op {
            "fusion" => called(0),
            "dot" => {
                let k: f64 = ins
                    .dot_dimension_numbers
                    .as_ref()
                    .map(|d| {
                        let lhs = ins
                            .operand_ids
                            .first()
                            .and_then(|id| view.instr(*id))
                            .and_then(|o| o.shape.clone())
                            .unwrap_or_default();
                        d.lhs_contracting_dimensions
                            .iter()
                            .map(|&i| lhs.dimensions.get(i as usize).copied().unwrap_or(1) as f64)
                            .product()
                    })
                    .unwrap_or(1.0);
                2.0 * out * k
            }
            "reduce" => {
                // Each of the n inputs folds (in − out) elements through the reducer.
                let n = (ins.operand_ids.len() / 2).max(1);
                let per = called(0).max(1.0) / n as f64;
                (0..n)
                    .map(|k| (operand_elems(k) - out / n as f64).max(0.0))
                    .sum::<f64>()
                    * per
            }
            "reduce-window" => {
                let window: f64 = ins
                    .window
                    .as_ref()
                    .map(|w| w.dimensions.iter().map(|d| d.size as f64).product())
                    .unwrap_or(1.0);
                out * (window - 1.0).max(0.0) * called(0).max(1.0)
            }
            "convolution" => {
                let kernel = ins
                    .operand_ids
                    .get(1)
                    .and_then(|id| view.instr(*id))
                    .and_then(|o| o.shape.clone())
                    .unwrap_or_default();
                let d = ins
                    .convolution_dimension_numbers
                    .clone()
                    .unwrap_or_default();
                let spatial: f64 = d
                    .kernel_spatial_dimensions
                    .iter()
                    .map(|&i| kernel.dimensions.get(i as usize).copied().unwrap_or(1) as f64)
                    .product();
                let in_feat = kernel
                    .dimensions
                    .get(d.kernel_input_feature_dimension as usize)
                    .copied()
                    .unwrap_or(1) as f64;
                2.0 * out * spatial * in_feat
            }
            "map" => out * called(0).max(1.0),
            o if ELEMENTWISE.contains(&o) && o != "bitcast-convert" => out,
            _ => 0.0,
        }
    }

    pub fn find(&self, name: &str) -> Result<usize, HloError> {
        let name = name.trim().trim_start_matches('%');
        self.by_name.get(name).copied().ok_or_else(|| {
            let stem = name.split('.').next().unwrap_or(name);
            let mut similar: Vec<String> = self
                .by_name
                .keys()
                .filter(|n| !stem.is_empty() && n.contains(stem))
                .cloned()
                .collect();
            similar.sort();
            similar.truncate(10);
            HloError::InstructionNotFound {
                name: name.to_string(),
                scope: format!("module '{}'", self.module_name),
                similar,
            }
        })
    }

    /// Opcode statistics over top-level instructions: (opcode, count, bytes, flops), by count
    /// (ties: opcode descending, as XProf's CLI orders them).
    pub fn opcode_stats(&self) -> Vec<Value> {
        let mut stats: Vec<(String, i64, f64, f64)> = Vec::new();
        for r in self.top_level_rows() {
            match stats.iter_mut().find(|s| s.0 == r.opcode) {
                Some(s) => {
                    s.1 += 1;
                    s.2 += r.bytes_accessed;
                    s.3 += r.flops;
                }
                None => stats.push((r.opcode.clone(), 1, r.bytes_accessed, r.flops)),
            }
        }
        stats.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        stats
            .into_iter()
            .map(|(op, n, b, f)| {
                json!({"opcode": op, "count": n, "total_bytes": b, "total_flops": f, "total_optimal_seconds": 0.0})
            })
            .collect()
    }

    /// The instructions of top-level computations (not fusion bodies nor called ones), in order.
    fn top_level_rows(&self) -> Vec<&InstrRow> {
        let top: HashSet<&str> = self
            .computations
            .iter()
            .filter(|c| c.is_top_level)
            .map(|c| c.name.as_str())
            .collect();
        self.instructions
            .iter()
            .filter(|r| top.contains(r.computation_name.as_str()))
            .collect()
    }

    pub fn summary(&self) -> Value {
        let rows = self.top_level_rows();
        let mut top_ops = self.opcode_stats();
        for o in &mut top_ops {
            if let Some(m) = o.as_object_mut() {
                m.remove("total_optimal_seconds");
            }
        }
        top_ops.truncate(10);
        json!({
            "entry_computation": self.entry,
            "computation_count": self.computations.len(),
            "instruction_count": self.instructions.len(),
            "edge_count": self.edges.len(),
            "fusion_count": rows.iter().filter(|r| r.opcode == "fusion").count(),
            "custom_call_count": rows.iter().filter(|r| r.opcode == "custom-call").count(),
            "fusion_blocker_count": self.instructions.iter().filter(|r| r.is_fusion_blocker).count(),
            "top_opcodes": top_ops,
        })
    }

    /// The columns XProf's CLI returns for an instruction in search results.
    pub fn search_row(&self, r: &InstrRow) -> Value {
        json!({
            "id": r.id,
            "name": r.name,
            "computation_name": r.computation_name,
            "opcode": r.opcode,
            "shape": r.shape,
            "layout": r.layout,
            "is_fusion_blocker": r.is_fusion_blocker as i64,
            "operand_count": r.operand_count,
            "user_count": r.user_count,
            "bytes_accessed": r.bytes_accessed,
            "flops": r.flops,
            "expression": r.expression,
        })
    }

    pub fn users(&self, i: usize) -> &[usize] {
        &self.users[i]
    }

    pub fn operands(&self, i: usize) -> &[usize] {
        &self.operands[i]
    }

    /// Shortest path from `src` to `dst`: downstream (operand → user) first, else upstream.
    pub fn shortest_path(
        &self,
        src: usize,
        dst: usize,
    ) -> Option<(&'static str, Vec<(usize, &'static str)>)> {
        for (dir, down) in [("downstream", true), ("upstream", false)] {
            let mut prev: HashMap<usize, usize> = HashMap::new();
            let mut q = VecDeque::from([src]);
            let mut found = src == dst;
            while let Some(n) = q.pop_front() {
                if found {
                    break;
                }
                let next = if down {
                    &self.users[n]
                } else {
                    &self.operands[n]
                };
                for &m in next {
                    if m != src && !prev.contains_key(&m) {
                        prev.insert(m, n);
                        if m == dst {
                            found = true;
                            break;
                        }
                        q.push_back(m);
                    }
                }
            }
            if !found {
                continue;
            }
            let mut path = vec![dst];
            let mut cur = dst;
            while cur != src {
                cur = prev[&cur];
                path.push(cur);
            }
            path.reverse();
            let rel = if down { "-> (used_by)" } else { "-> (operand)" };
            return Some((
                dir,
                path.iter()
                    .enumerate()
                    .map(|(k, &p)| (p, if k == 0 { "start" } else { rel }))
                    .collect(),
            ));
        }
        None
    }

    /// Run one read-only SQL statement against an in-memory copy of the tables. At most
    /// `limit` rows are returned (0: all; more is `truncated`); running past `limits` (time,
    /// rows produced) is an [`HloError::SqlLimit`].
    pub fn sql(
        &self,
        query: &str,
        limit: usize,
        limits: SqlLimits,
    ) -> Result<(Vec<Value>, bool), HloError> {
        let bad = |m: String| HloError::InvalidArgument {
            arg: "sql",
            message: m,
        };
        let head = strip_sql_comments(query);
        let kw = head
            .split(|c: char| !c.is_ascii_alphabetic())
            .find(|s| !s.is_empty())
            .unwrap_or_default()
            .to_ascii_uppercase();
        if kw != "SELECT" && kw != "WITH" {
            return Err(bad(
                "only read-only SELECT/WITH queries are allowed in mode=sql".into(),
            ));
        }
        let conn = rusqlite::Connection::open_in_memory().map_err(|e| bad(e.to_string()))?;
        self.fill(&conn)
            .map_err(|e| bad(format!("building the tables: {e}")))?;
        conn.execute_batch("PRAGMA query_only = ON;")
            .map_err(|e| bad(e.to_string()))?;
        let mut stmt = conn.prepare(query).map_err(|e| bad(e.to_string()))?;
        if !stmt.readonly() {
            return Err(bad(
                "only read-only SELECT/WITH queries are allowed in mode=sql".into(),
            ));
        }
        let cols: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
        // The time limit: a watchdog interrupts the statement (SQLITE_INTERRUPT) unless the
        // query is done first; it is joined before the connection closes.
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let fired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watchdog = {
            let handle = conn.get_interrupt_handle();
            let fired = fired.clone();
            let timeout = limits.timeout;
            std::thread::spawn(move || {
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(timeout)
                {
                    fired.store(true, std::sync::atomic::Ordering::SeqCst);
                    handle.interrupt();
                }
            })
        };
        let result = collect_rows(&mut stmt, &cols, limit, limits.max_rows);
        drop(done);
        let _ = watchdog.join();
        match result {
            Err(_) if fired.load(std::sync::atomic::Ordering::SeqCst) => Err(HloError::SqlLimit {
                flag: "timeout_s",
                message: format!(
                    "it ran for more than {} s (the time limit, --timeout_s)",
                    limits.timeout.as_secs_f64()
                ),
            }),
            Err(RowsError::Sql(e)) => Err(bad(e.to_string())),
            Err(RowsError::TooMany) => Err(HloError::SqlLimit {
                flag: "max_rows",
                message: format!(
                    "it returned more than {} rows (the row limit, --max_rows)",
                    limits.max_rows
                ),
            }),
            Ok(x) => Ok(x),
        }
    }

    fn fill(&self, conn: &rusqlite::Connection) -> rusqlite::Result<()> {
        conn.execute_batch(
            "CREATE TABLE computations(id INTEGER PRIMARY KEY, name TEXT, is_entry INTEGER, instruction_count INTEGER, root_id INTEGER, is_in_fusion INTEGER);
             CREATE TABLE instructions(id INTEGER PRIMARY KEY, name TEXT, computation_name TEXT, opcode TEXT, category TEXT, shape TEXT, dtype TEXT, layout TEXT, is_root INTEGER, is_fusion_blocker INTEGER, is_in_fusion INTEGER, is_kernel_op INTEGER, operand_count INTEGER, user_count INTEGER, operands_json TEXT, called_computations_json TEXT, metadata_op_name TEXT, metadata_source_file TEXT, metadata_source_line INTEGER, flops REAL, bytes_accessed REAL, optimal_seconds REAL, expression TEXT);
             CREATE TABLE edges(src_id INTEGER, dst_id INTEGER, operand_index INTEGER);
             CREATE TABLE call_edges(caller_instr_id INTEGER, caller_comp_name TEXT, callee_comp_name TEXT);
             CREATE INDEX i_name ON instructions(name); CREATE INDEX i_op ON instructions(opcode);
             CREATE INDEX i_comp ON instructions(computation_name); CREATE INDEX i_blk ON instructions(is_fusion_blocker);
             CREATE INDEX i_kern ON instructions(is_kernel_op); CREATE INDEX e_src ON edges(src_id); CREATE INDEX e_dst ON edges(dst_id);
             BEGIN;",
        )?;
        {
            let mut c = conn.prepare("INSERT INTO computations VALUES (?1,?2,?3,?4,?5,?6)")?;
            for r in &self.computations {
                c.execute(rusqlite::params![
                    r.id,
                    r.name,
                    r.is_entry,
                    r.instruction_count,
                    r.root_id,
                    r.is_in_fusion
                ])?;
            }
            let mut i = conn.prepare(
                "INSERT INTO instructions VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,0.0,?22)",
            )?;
            for r in &self.instructions {
                i.execute(rusqlite::params![
                    r.id,
                    r.name,
                    r.computation_name,
                    r.opcode,
                    r.category,
                    r.shape,
                    r.dtype,
                    r.layout,
                    r.is_root,
                    r.is_fusion_blocker,
                    r.is_in_fusion,
                    r.is_kernel_op,
                    r.operand_count,
                    r.user_count,
                    serde_json::to_string(&r.operands).unwrap_or_default(),
                    serde_json::to_string(&r.called_computations).unwrap_or_default(),
                    r.metadata_op_name,
                    r.metadata_source_file,
                    r.metadata_source_line,
                    r.flops,
                    r.bytes_accessed,
                    r.expression
                ])?;
            }
            let mut e = conn.prepare("INSERT INTO edges VALUES (?1,?2,?3)")?;
            for r in &self.edges {
                e.execute(rusqlite::params![r.src_id, r.dst_id, r.operand_index])?;
            }
            let mut ce = conn.prepare("INSERT INTO call_edges VALUES (?1,?2,?3)")?;
            for r in &self.call_edges {
                ce.execute(rusqlite::params![
                    r.caller_instr_id,
                    r.caller_comp_name,
                    r.callee_comp_name
                ])?;
            }
        }
        conn.execute_batch("COMMIT;")
    }
}

/// What one SQL query may use: wall time and rows produced.
#[derive(Clone, Copy, Debug)]
pub struct SqlLimits {
    pub timeout: std::time::Duration,
    pub max_rows: usize,
}

impl SqlLimits {
    /// 10 s, as the time limit of every SQL tool.
    pub const DEFAULT_TIMEOUT_S: u64 = 10;
    /// 100,000 rows.
    pub const DEFAULT_MAX_ROWS: usize = 100_000;
}

impl Default for SqlLimits {
    fn default() -> Self {
        SqlLimits {
            timeout: std::time::Duration::from_secs(Self::DEFAULT_TIMEOUT_S),
            max_rows: Self::DEFAULT_MAX_ROWS,
        }
    }
}

enum RowsError {
    Sql(rusqlite::Error),
    TooMany,
}

impl From<rusqlite::Error> for RowsError {
    fn from(e: rusqlite::Error) -> Self {
        RowsError::Sql(e)
    }
}

/// The statement's rows as JSON objects: the first `limit` (0: all; `true` when more
/// followed), and [`RowsError::TooMany`] past `max_rows`.
fn collect_rows(
    stmt: &mut rusqlite::Statement<'_>,
    cols: &[String],
    limit: usize,
    max_rows: usize,
) -> Result<(Vec<Value>, bool), RowsError> {
    use rusqlite::types::ValueRef;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        if limit > 0 && out.len() >= limit {
            return Ok((out, true));
        }
        if out.len() >= max_rows {
            return Err(RowsError::TooMany);
        }
        let mut m = Map::new();
        for (i, c) in cols.iter().enumerate() {
            let v = match row.get_ref(i)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => json!(n),
                ValueRef::Real(f) => json!(f),
                ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
                ValueRef::Blob(b) => json!(format!("<{} bytes>", b.len())),
            };
            m.insert(c.clone(), v);
        }
        out.push(Value::Object(m));
    }
    Ok((out, false))
}

fn strip_sql_comments(q: &str) -> String {
    let mut out = String::new();
    for line in q.lines() {
        let l = line.split("--").next().unwrap_or("");
        out.push_str(l);
        out.push(' ');
    }
    while let Some(s) = out.find("/*") {
        match out[s..].find("*/") {
            Some(e) => out.replace_range(s..s + e + 2, " "),
            None => out.truncate(s),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn empty_db() -> GraphDb {
        let m = xprof_proto::xla::HloModuleProto::default();
        GraphDb::build(&ModuleView::new(&m), "empty")
    }

    const ENDLESS: &str =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c";

    #[test]
    fn sql_recursive_cte_that_never_ends_stops_at_the_time_limit() {
        let limits = SqlLimits {
            timeout: Duration::from_millis(50),
            ..SqlLimits::default()
        };
        let e = empty_db().sql(ENDLESS, 0, limits).unwrap_err();
        assert_eq!(e.kind(), "invalid_value");
        assert!(
            matches!(
                &e,
                HloError::SqlLimit {
                    flag: "timeout_s",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("time limit"), "{e}");
        assert!(e.hint().unwrap().contains("--timeout_s"));
    }

    #[test]
    fn sql_rows_past_the_row_limit_are_an_error_not_a_silent_cut() {
        let db = empty_db();
        let q = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) SELECT x FROM c";
        let limits = SqlLimits {
            max_rows: 10,
            ..SqlLimits::default()
        };
        let e = db.sql(q, 0, limits).unwrap_err();
        assert!(
            matches!(
                &e,
                HloError::SqlLimit {
                    flag: "max_rows",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.hint().unwrap().contains("--max_rows"));
        // `limit` within the row limit: the first rows, marked truncated.
        let (rows, truncated) = db.sql(q, 5, limits).unwrap();
        assert_eq!((rows.len(), truncated), (5, true));
        // Exactly the row limit is fine.
        let (rows, truncated) = db.sql(&q.replace("x < 1000", "x < 10"), 0, limits).unwrap();
        assert_eq!((rows.len(), truncated), (10, false));
    }

    #[test]
    fn sql_that_finishes_in_time_is_not_interrupted_later() {
        let db = empty_db();
        for _ in 0..3 {
            let (rows, _) = db.sql("SELECT 1 AS one", 0, SqlLimits::default()).unwrap();
            assert_eq!(rows, vec![json!({"one": 1})]);
        }
    }
}
