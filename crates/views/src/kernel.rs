//! kernel_stats (XProf `xplane_to_kernel_stats_db.cc`, `kernel_stats_utils.cc`): GPU kernels
//! grouped by launch configuration — name, grid/block, registers, shared memory, occupancy,
//! Tensor Core use and eligibility, framework op — with their durations.

use std::collections::HashMap;

use serde_json::{Map, json};
use xprof_opstats::tfop::parse_tf_op;
use xprof_xspace::XSpace;

use crate::table::Table;

/// XProf keeps the 1000 longest kernels.
pub const MAX_KERNELS: usize = 1000;

pub const COLUMNS: &[&str] = &[
    "rank",
    "kernel_name",
    "registers_per_thread",
    "shmem_bytes",
    "block_dim",
    "grid_dim",
    "occupancy_pct",
    "is_op_tensor_core_eligible",
    "is_kernel_using_tensor_core",
    "op_name",
    "occurrences",
    "total_duration_us",
    "avg_duration_us",
    "min_duration_us",
    "max_duration_us",
];

/// Kernel-name fragments of Tensor Core (matrix core) kernels (XProf
/// `kTensorCoreKernelNamePatterns`). XProf 2.24.2 adds AMD's: Tensile/hipBLASLt `Cijk_*`
/// gemms, MFMA/WMMA kernels and XLA's Triton `gemm_fusion*` kernels (read from its
/// converter's string table; checked on real MI300X captures).
const TENSOR_CORE_PATTERNS: &[&str] = &[
    "Cijk_",
    "gemm_fusion",
    "mfma",
    "wmma",
    "16816",
    "c1688",
    "conv1x1",
    "conv2d_c1_k1",
    "dgrad_1x1_stride_2x2",
    "direct_group",
    "first_layer_wgrad_kernel",
    "h1688",
    "h884",
    "hmma",
    "i16832",
    "i8816",
    "s884",
    "s1688",
    "xmma_gemm",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_sparse_gemm",
    "xmma_warp_specialized_implicit_gemm",
];

pub fn is_kernel_using_tensor_core(name: &str) -> bool {
    TENSOR_CORE_PATTERNS.iter().any(|p| name.contains(p))
}

/// XProf `IsOpTensorCoreEligible` (not exhaustive, as upstream says).
pub fn is_op_tensor_core_eligible(op: &str) -> bool {
    [
        "Conv2D",
        "Conv2DBackpropFilter",
        "Conv2DBackpropInput",
        "Conv3D",
        "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropFilter",
        "DepthwiseConv2dNativeBackpropInput",
        "/MatMul",
        "FusedMatMul",
        "/CudnnRNN",
        "XlaDot",
        "XlaDotV2",
    ]
    .iter()
    .any(|s| op.ends_with(s))
        || [
            "BatchMatMul",
            "CudnnRNNV",
            "CudnnRNNForward",
            "CudnnRNNBackprop",
        ]
        .iter()
        .any(|s| op.contains(s))
        // JAX's matrix ops (XProf 2.24.2).
        || ["dot_general", "conv_general_dilated"]
            .iter()
            .any(|s| op.contains(s))
}

/// An einsum `a,b->c` with two operands.
pub fn is_einsum_tensor_core_eligible(eq: &str) -> bool {
    match eq.split_once("->") {
        Some((lhs, rhs)) if !rhs.contains("->") => lhs.split(',').count() == 2,
        _ => false,
    }
}

/// One kernel configuration (XProf `KernelReport` key fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelKey {
    pub name: String,
    pub grid_dim: [u32; 3],
    pub block_dim: [u32; 3],
    pub registers_per_thread: u32,
    pub static_shmem_bytes: u32,
    pub dynamic_shmem_bytes: u32,
    pub is_kernel_using_tensor_core: bool,
    pub is_op_tensor_core_eligible: bool,
    pub op_name: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelReport {
    pub key: KernelKey,
    /// Theoretical occupancy (%), from `occ_pct`.
    pub occupancy_pct: f64,
    pub occurrences: u64,
    pub total_duration_ns: u64,
    pub min_duration_ns: u64,
    pub max_duration_ns: u64,
}

/// Parse a `kernel_details` stat (`regs:32 static_shared:0 dynamic_shared:1024
/// grid:80,1,1 block:256,1,1 occ_pct:50.0`) into `k` (XProf `ParseKernelLaunchParams`).
pub fn parse_launch_params(details: &str, k: &mut KernelKey, occupancy: &mut f64) {
    k.block_dim = [1, 1, 1];
    k.grid_dim = [1, 1, 1];
    for tok in details.split([' ', '\n']) {
        let mut kv = tok.split(':');
        let (Some(key), Some(v), None) = (kv.next(), kv.next(), kv.next()) else {
            continue;
        };
        let dims = |v: &str| -> Option<[u32; 3]> {
            let p: Vec<u32> = v
                .split(',')
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            (p.len() == 3).then(|| [p[0], p[1], p[2]])
        };
        match key {
            "regs" => {
                if let Ok(x) = v.parse() {
                    k.registers_per_thread = x;
                }
            }
            "static_shared" => {
                if let Ok(x) = v.parse() {
                    k.static_shmem_bytes = x;
                }
            }
            "dynamic_shared" => {
                if let Ok(x) = v.parse() {
                    k.dynamic_shmem_bytes = x;
                }
            }
            "block" => {
                if let Some(d) = dims(v) {
                    k.block_dim = d;
                }
            }
            "grid" => {
                if let Some(d) = dims(v) {
                    k.grid_dim = d;
                }
            }
            "occ_pct" => {
                if let Ok(x) = v.parse() {
                    *occupancy = x;
                }
            }
            _ => {}
        }
    }
}

/// XProf's derived (synthetic) thread ids are skipped.
fn is_derived_line(id: i64) -> bool {
    const DERIVED_MIN: i64 = 0xdead_beef;
    (DERIVED_MIN..=DERIVED_MIN + 100).contains(&id)
}

#[derive(Clone, Debug, Default)]
pub struct KernelStats {
    pub reports: Vec<KernelReport>,
    /// GPU planes seen, and events carrying `kernel_details`.
    pub gpu_planes: usize,
    pub kernel_events: usize,
}

impl KernelStats {
    /// XProf's DataTable (sorted by total duration, then the key).
    pub fn table(&self) -> Table {
        let mut t = Table::new(COLUMNS);
        for (i, r) in self.reports.iter().enumerate() {
            let k = &r.key;
            let join = |d: &[u32; 3]| d.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            let us = |ns: u64| ns as f64 / 1000.0;
            let mut m = Map::new();
            m.insert("rank".into(), json!(i + 1));
            m.insert("kernel_name".into(), json!(k.name));
            m.insert("registers_per_thread".into(), json!(k.registers_per_thread));
            m.insert(
                "shmem_bytes".into(),
                json!(k.static_shmem_bytes as u64 + k.dynamic_shmem_bytes as u64),
            );
            m.insert("block_dim".into(), json!(join(&k.block_dim)));
            m.insert("grid_dim".into(), json!(join(&k.grid_dim)));
            m.insert("occupancy_pct".into(), json!(r.occupancy_pct));
            m.insert(
                "is_op_tensor_core_eligible".into(),
                json!(k.is_op_tensor_core_eligible),
            );
            m.insert(
                "is_kernel_using_tensor_core".into(),
                json!(k.is_kernel_using_tensor_core),
            );
            m.insert("op_name".into(), json!(k.op_name));
            m.insert("occurrences".into(), json!(r.occurrences));
            m.insert("total_duration_us".into(), json!(us(r.total_duration_ns)));
            m.insert(
                "avg_duration_us".into(),
                json!(us(r.total_duration_ns / r.occurrences.max(1))),
            );
            m.insert("min_duration_us".into(), json!(us(r.min_duration_ns)));
            m.insert("max_duration_us".into(), json!(us(r.max_duration_ns)));
            m.insert("total_duration_ns".into(), json!(r.total_duration_ns));
            m.insert("static_shmem_bytes".into(), json!(k.static_shmem_bytes));
            m.insert("dynamic_shmem_bytes".into(), json!(k.dynamic_shmem_bytes));
            t.records.push(m);
        }
        t
    }
}

/// Framework op (`metadata.op_name`) of every HLO instruction, by program id and by module
/// name, for kernels that name their HLO op rather than carrying a `tf_op` stat.
#[derive(Default)]
pub struct HloOpNames {
    by_program: HashMap<u64, HashMap<String, String>>,
    by_module: HashMap<String, u64>,
}

impl HloOpNames {
    /// From the HLO the captures embed and the run's `*.hlo_proto.pb` files.
    pub fn new(hosts: &[(String, XSpace)], hlo_files: &[std::path::PathBuf]) -> Self {
        let mut out = HloOpNames::default();
        let mut modules: Vec<(Option<u64>, xprof_proto::xla::HloModuleProto)> = Vec::new();
        for (_, space) in hosts {
            modules.extend(crate::megascale::embedded_hlo(space));
        }
        modules.extend(crate::megascale::file_hlo(hlo_files));
        for (pid, m) in modules {
            let pid = pid.unwrap_or(m.id as u64);
            let ops: HashMap<String, String> = m
                .computations
                .iter()
                .flat_map(|c| c.instructions.iter())
                .map(|i| {
                    let op = i
                        .metadata
                        .as_ref()
                        .map(|md| md.op_name.clone())
                        .unwrap_or_default();
                    (i.name.clone(), op)
                })
                .collect();
            out.by_module.insert(m.name.clone(), pid);
            out.by_module.insert(format!("{}({pid})", m.name), pid);
            out.by_program.entry(pid).or_insert(ops);
        }
        out
    }

    /// XProf `GetHloInstruction(program_id, hlo_op)`: the kernel's program (by id, else by its
    /// `hlo_module` name) and the last HLO op it names.
    fn op_name(&self, program_id: Option<u64>, module: &str, hlo_op: &str) -> Option<&str> {
        let pid = program_id.or_else(|| self.by_module.get(module).copied())?;
        let instr = hlo_op.rsplit("::").next()?;
        self.by_program.get(&pid)?.get(instr).map(String::as_str)
    }
}

/// Kernel reports of every `/device:GPU:*` plane of every host, merged by configuration.
pub fn kernel_stats(hosts: &[(String, XSpace)]) -> KernelStats {
    kernel_stats_with_hlo(hosts, &HloOpNames::default())
}

/// [`kernel_stats`] naming each kernel's framework op from its HLO instruction when the event
/// has `hlo_op` (XProf's kernel-stats pass with the HLO module map).
pub fn kernel_stats_with_hlo(hosts: &[(String, XSpace)], hlo: &HloOpNames) -> KernelStats {
    let mut out = KernelStats::default();
    // XProf builds one kernel database per host and keeps the hosts' reports apart when it
    // combines them: identical kernels of two hosts are two rows.
    let mut map: HashMap<(usize, KernelKey), KernelReport> = HashMap::new();
    for (host, (_, space)) in hosts.iter().enumerate() {
        for plane in space
            .planes()
            .filter(|p| p.name().starts_with("/device:GPU:"))
        {
            out.gpu_planes += 1;
            for line in plane.lines().filter(|l| !is_derived_line(l.id())) {
                for e in line.events() {
                    let dur_ns = (e.duration_ps() / 1000).max(0) as u64;
                    if dur_ns == 0 {
                        continue;
                    }
                    // XProf's GpuEventStats visits the event's and its metadata's stats.
                    let text = |n: &str| e.stat_or_metadata(n).and_then(|s| s.str()).unwrap_or("");
                    let details = text("kernel_details");
                    if details.is_empty() {
                        continue;
                    }
                    out.kernel_events += 1;
                    let name = e.name().to_string();
                    let mut key = KernelKey {
                        is_kernel_using_tensor_core: is_kernel_using_tensor_core(&name),
                        name,
                        ..Default::default()
                    };
                    let mut occ = 0.0;
                    parse_launch_params(details, &mut key, &mut occ);
                    let tf_op = text("tf_op");
                    if !tf_op.is_empty() {
                        key.op_name = parse_tf_op(tf_op).name.to_string();
                        key.is_op_tensor_core_eligible =
                            is_einsum_tensor_core_eligible(text("equation"))
                                || is_op_tensor_core_eligible(&key.op_name)
                                || key.is_kernel_using_tensor_core;
                    }
                    let hlo_op = text("hlo_op");
                    if !hlo_op.is_empty() {
                        let pid = e.stat_or_metadata("program_id").and_then(|s| s.uint());
                        if let Some(op) = hlo.op_name(pid, text("hlo_module"), hlo_op) {
                            key.op_name = op.to_string();
                            key.is_op_tensor_core_eligible |= is_op_tensor_core_eligible(op);
                        }
                    }
                    let r = map
                        .entry((host, key.clone()))
                        .or_insert_with(|| KernelReport {
                            key,
                            occupancy_pct: occ,
                            min_duration_ns: u64::MAX,
                            ..Default::default()
                        });
                    r.occurrences += 1;
                    r.total_duration_ns = r.total_duration_ns.saturating_add(dur_ns);
                    r.min_duration_ns = r.min_duration_ns.min(dur_ns);
                    r.max_duration_ns = r.max_duration_ns.max(dur_ns);
                }
            }
        }
    }
    let mut reports: Vec<KernelReport> = map.into_values().collect();
    reports.sort_by(|a, b| {
        b.total_duration_ns
            .cmp(&a.total_duration_ns)
            .then_with(|| a.key.cmp(&b.key))
    });
    reports.truncate(MAX_KERNELS);
    out.reports = reports;
    out
}

/// Per framework op: (Tensor-Core kernel time, all kernel time) in ns (XProf
/// `GroupKernelReportsByOpName`), for the framework-op table's GPU Tensor Core utilization.
pub fn tensor_core_time_by_op(ks: &KernelStats) -> HashMap<String, (u64, u64)> {
    let mut m: HashMap<String, (u64, u64)> = HashMap::new();
    for r in &ks.reports {
        let e = m.entry(r.key.op_name.clone()).or_default();
        e.1 = e.1.saturating_add(r.total_duration_ns);
        if r.key.is_kernel_using_tensor_core {
            e.0 = e.0.saturating_add(r.total_duration_ns);
        }
    }
    m
}
