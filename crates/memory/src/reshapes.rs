//! Standalone data-formatting ops that materialise in HBM: `copy`, `transpose`, `reshape` and
//! `bitcast-convert` instructions that XLA left outside any fusion, so their result is
//! written to memory and read back by the next op. The ones that feed a compute op — a `dot`,
//! `convolution` or `custom-call`, or a fusion whose body contains one — are the classic
//! "unfused reshape" bottleneck: folding the layout change into the consumer removes an HBM
//! round trip. (The seed counted every fusion as compute; a copy feeding an elementwise loop
//! fusion — typically a copy XLA inserted to break aliasing of a loop-carried value — is
//! reported among the other formatting ops instead, with its users shown.)
//!
//! Found on the HLO graph itself (not by substring tests on text, as the seed did), ranked by
//! the op's measured time when the capture has it, then by the bytes it materialises.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use xprof_capture::HloModuleRef;
use xprof_hlo::print::{ModuleView, PrintOptions};
use xprof_proto::xla::{HloInstructionProto, HloModuleProto, HloProto};

use crate::viewer::unpadded_size;

/// Opcodes that only move or re-lay-out data.
pub const FORMATTING_OPCODES: &[&str] = &["copy", "transpose", "reshape", "bitcast-convert"];
/// Opcodes that consume a layout-sensitive operand as compute (and make a fusion that
/// contains them a compute fusion).
pub const COMPUTE_OPCODES: &[&str] = &["dot", "convolution", "custom-call"];

/// A module to scan.
pub struct ModuleRef<'a> {
    /// `<name>(<program id>)`.
    pub display_name: String,
    pub program_id: Option<u64>,
    pub proto: &'a HloModuleProto,
}

impl<'a> ModuleRef<'a> {
    /// The modules of a capture as [`crate::modules::load_all`] decodes them (a proto
    /// without an `hlo_module` has nothing to detect and is left out).
    pub fn all(loaded: &'a [(HloModuleRef, HloProto)]) -> Vec<ModuleRef<'a>> {
        loaded
            .iter()
            .filter_map(|(e, p)| {
                p.hlo_module.as_ref().map(|m| ModuleRef {
                    display_name: e.name.clone(),
                    program_id: e.program_id,
                    proto: m,
                })
            })
            .collect()
    }
}

/// What the capture measured for one op (summed over occurrences).
#[derive(Clone, Debug, Default)]
pub struct OpTime {
    pub program_id: u64,
    pub name: String,
    pub occurrences: u64,
    pub time_ps: u64,
    pub self_time_ps: u64,
    pub bytes_accessed: u64,
}

#[derive(Clone, Debug)]
pub struct Neighbor {
    pub name: String,
    pub opcode: String,
    pub text: String,
    /// For fusions: whether the fused computation contains a dot / convolution / custom-call.
    pub fused_compute: Option<bool>,
}

#[derive(Clone, Debug)]
pub struct Finding {
    pub module: String,
    pub program_id: Option<u64>,
    pub computation: String,
    pub name: String,
    pub opcode: String,
    pub shape: String,
    /// Bytes the op writes (its result, without layout padding).
    pub output_bytes: i64,
    /// Bytes it reads (its operands, without padding).
    pub input_bytes: i64,
    pub op_name: String,
    pub text: String,
    pub operands: Vec<Neighbor>,
    pub users: Vec<Neighbor>,
    /// The first compute user, if any.
    pub downstream_compute: Option<String>,
    pub measured: Option<OpTime>,
}

impl Finding {
    pub fn feeds_compute(&self) -> bool {
        self.downstream_compute.is_some()
    }
    /// Bytes the ranking uses: measured `bytes_accessed` when the capture has it, else
    /// input + output from the shapes.
    pub fn bytes(&self) -> u64 {
        match &self.measured {
            Some(m) if m.bytes_accessed > 0 => m.bytes_accessed,
            _ => self.input_bytes.saturating_add(self.output_bytes).max(0) as u64,
        }
    }
    pub fn time_ps(&self) -> u64 {
        self.measured.as_ref().map_or(0, |m| m.time_ps)
    }
}

fn fused_has_compute(view: &ModuleView<'_>, ins: &HloInstructionProto) -> bool {
    // Walk called computations (nested fusions included), bounded by the module size.
    let mut stack: Vec<i64> = ins.called_computation_ids.clone();
    let mut seen = HashSet::new();
    while let Some(cid) = stack.pop() {
        if !seen.insert(cid) {
            continue;
        }
        let Some(&ci) = view.comp_by_id.get(&cid) else {
            continue;
        };
        for i in &view.instrs[ci] {
            if COMPUTE_OPCODES.contains(&i.opcode.as_str()) {
                return true;
            }
            stack.extend(i.called_computation_ids.iter().copied());
        }
    }
    false
}

/// Scan `modules` for standalone formatting ops; `ops` are the capture's measured op metrics
/// (may be empty). Findings are ranked: measured time, then bytes, then module and name.
pub fn detect(modules: &[ModuleRef<'_>], ops: &[OpTime]) -> Vec<Finding> {
    let mut measured: HashMap<(u64, &str), &OpTime> = HashMap::new();
    let mut by_name: HashMap<&str, Vec<&OpTime>> = HashMap::new();
    for o in ops {
        measured.insert((o.program_id, o.name.as_str()), o);
        by_name.entry(o.name.as_str()).or_default().push(o);
    }
    let short = PrintOptions::short();
    let mut out = Vec::new();
    for m in modules {
        let view = ModuleView::new(m.proto);
        // Computations that are fusion bodies: flagged, or called by a fusion instruction.
        let mut fused: HashSet<i64> = HashSet::new();
        for (ci, c) in view.comps.iter().enumerate() {
            if c.is_fusion_computation {
                fused.insert(c.id);
            }
            for i in &view.instrs[ci] {
                if i.opcode == "fusion" {
                    fused.extend(i.called_computation_ids.iter().copied());
                }
            }
        }
        for (ci, c) in view.comps.iter().enumerate() {
            if fused.contains(&c.id) {
                continue;
            }
            let instrs = &view.instrs[ci];
            let mut users: HashMap<i64, Vec<&HloInstructionProto>> = HashMap::new();
            for i in instrs {
                for op in &i.operand_ids {
                    users.entry(*op).or_default().push(i);
                }
            }
            for ins in instrs {
                if !FORMATTING_OPCODES.contains(&ins.opcode.as_str()) {
                    continue;
                }
                let neighbor = |i: &HloInstructionProto| Neighbor {
                    name: i.name.clone(),
                    opcode: i.opcode.clone(),
                    text: view.instruction_text(i, &short),
                    fused_compute: (i.opcode == "fusion").then(|| fused_has_compute(&view, i)),
                };
                let operands: Vec<Neighbor> = ins
                    .operand_ids
                    .iter()
                    .filter_map(|id| view.instr(*id))
                    .map(neighbor)
                    .collect();
                let us: Vec<Neighbor> = users
                    .get(&ins.id)
                    .map(|v| v.iter().map(|i| neighbor(i)).collect())
                    .unwrap_or_default();
                let downstream_compute = us
                    .iter()
                    .find(|u| {
                        COMPUTE_OPCODES.contains(&u.opcode.as_str())
                            || u.fused_compute == Some(true)
                    })
                    .map(|u| u.name.clone());
                let out_bytes = ins.shape.as_ref().map_or(0, unpadded_size);
                let in_bytes: i64 = ins
                    .operand_ids
                    .iter()
                    .filter_map(|id| view.instr(*id))
                    .map(|i| i.shape.as_ref().map_or(0, unpadded_size))
                    .fold(0i64, i64::saturating_add);
                let measured_op = match m.program_id {
                    Some(pid) => measured.get(&(pid, ins.name.as_str())).copied(),
                    None => None,
                }
                .or_else(|| {
                    // Without a program id, a name measured in exactly one program.
                    by_name
                        .get(ins.name.as_str())
                        .filter(|v| v.len() == 1 && m.program_id.is_none())
                        .map(|v| v[0])
                });
                out.push(Finding {
                    module: m.display_name.clone(),
                    program_id: m.program_id,
                    computation: c.name.clone(),
                    name: ins.name.clone(),
                    opcode: ins.opcode.clone(),
                    shape: ins
                        .shape
                        .as_ref()
                        .map(xprof_hlo::print::shape_with_layout)
                        .unwrap_or_default(),
                    output_bytes: out_bytes,
                    input_bytes: in_bytes,
                    op_name: ins
                        .metadata
                        .as_ref()
                        .map(|md| md.op_name.clone())
                        .unwrap_or_default(),
                    text: view.instruction_text(ins, &short),
                    operands,
                    users: us,
                    downstream_compute,
                    measured: measured_op.cloned(),
                });
            }
        }
    }
    out.sort_by(|a, b| {
        b.time_ps()
            .cmp(&a.time_ps())
            .then(b.bytes().cmp(&a.bytes()))
            .then(a.module.cmp(&b.module))
            .then(a.name.cmp(&b.name))
    });
    out
}

fn neighbor_json(n: &Neighbor) -> Value {
    let mut v = json!({"name": n.name, "opcode": n.opcode, "hlo": n.text});
    if let Some(f) = n.fused_compute {
        v["fusion_contains_compute"] = json!(f);
    }
    v
}

impl Finding {
    /// The seed's keys (`name`, `category`, `hbm_materialization_overhead`,
    /// `downstream_compute`, `recommendation`) plus the graph context and exact numbers.
    pub fn to_json(&self) -> Value {
        let m = self.measured.as_ref();
        let mut v = json!({
            "name": self.name,
            "category": "data formatting",
            "opcode": self.opcode,
            "module": self.module,
            "program_id": self.program_id.map(|p| p.to_string()),
            "computation": self.computation,
            "shape": self.shape,
            "tf_op_name": self.op_name,
            "standalone": true,
            "feeds_compute": self.feeds_compute(),
            "hbm_materialization_overhead": self.feeds_compute(),
            "output_bytes": self.output_bytes,
            "input_bytes": self.input_bytes,
            "measured": m.is_some(),
            "occurrences": m.map(|m| m.occurrences),
            "time_ps": m.map(|m| m.time_ps),
            "self_time_ps": m.map(|m| m.self_time_ps),
            "bytes_accessed": m.map(|m| m.bytes_accessed),
            "hlo": self.text,
            "context": {
                "operands": self.operands.iter().map(neighbor_json).collect::<Vec<_>>(),
                "users": self.users.iter().map(neighbor_json).collect::<Vec<_>>(),
            },
        });
        if let Some(t) = &self.downstream_compute {
            v["downstream_compute"] = json!(t);
            v["recommendation"] = json!(format!(
                "Standalone formatting op '{}' feeds compute op '{}'. This forces an explicit HBM \
                 intermediate. Restructure so it folds into the consumer (e.g. einsum / fused form).",
                self.name, t
            ));
        }
        v
    }
}
