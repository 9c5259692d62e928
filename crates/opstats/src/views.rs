//! XProf's views computed from [`OpStats`]: hlo_stats, roofline model (+ device information),
//! op_profile and the overview page's numbers. XProf-compatible fields carry XProf's values;
//! where XProf prints a placeholder 0 (see `docs/PLACEHOLDERS.md`) we emit `null`,
//! `<field>_reason` and, when we can measure it, `<field>_measured`.

use serde_json::{Map, Value, json};

use crate::device::{PerfEnv, is_infeed_outfeed, may_have_inner_ops};
use crate::format::{g6, one_digit, percent, two_digits};
use crate::metrics::{
    AccessKind, DbCombiner, MEMORY_SPACE_CMEM, MEMORY_SPACE_VMEM, OpMetrics, OpMetricsDb, safe_div,
};
use crate::opstats::{HardwareType, OpStats};
use crate::steps::{GENERIC_NAMES, StepsSource, program_totals};
use crate::tfop::parse_tf_op;

const GIB_PER_GB: f64 = 1.073741824;

pub fn ps_to_us(ps: u64) -> f64 {
    ps as f64 / 1e6
}

/// Reasons used for placeholders (the table in `docs/PLACEHOLDERS.md`).
pub mod reasons {
    pub const CUSTOM_CALL_FLOPS: &str = "XProf's cost model assigns 0 FLOPs/bytes to custom calls (Pallas/Mosaic kernels); the trace's own per-launch counts are in *_measured";
    pub const NO_DEVICE: &str =
        "CPU-only capture: there is no accelerator to measure (XProf prints 0)";
    pub const ROOFLINE_LIMITS: &str = "XProf's open-source overview passes no hardware limits, so it prints 0; *_measured uses the capture's peak FLOP rate and HBM bandwidth";
    pub const NO_MXU_STAT: &str =
        "the capture has no matrix_unit_utilization_percent stat on /host:CPU (XProf prints 0)";
    pub const NO_HBM_STAT: &str =
        "the capture has no hbm_utilization_percent stat on /host:CPU (XProf prints 0)";
    pub const NO_FRAMEWORK_OPS: &str =
        "no framework ops on host or device (0 of 0; XProf prints 0)";
    pub const NO_OP_TIME: &str =
        "no op time to divide (no non-idle framework ops on that side; XProf prints 0)";
    pub const HOST_NO_COST: &str = "XLA ops executed on host CPU threads carry no FLOP/byte counts in the trace (XProf shows no op view for CPU captures)";
    pub const GPU_NO_COST: &str = "the kernel has no flops/bytes_accessed stats; XProf derives them with XLA's GPU cost model, which is not available here";
    pub const PRECISION_NOT_GPU: &str = "XProf computes 16/32-bit compute time only from GPU kernels (this capture has none; XProf prints nothing)";
    pub const PRECISION_NO_STEPS: &str = "no GPU kernel with a correlation_id falls in a step (group_id), so there is no compute time to divide (XProf prints 0.0%)";
    pub const DEVICE_IDLE_TPU_ONLY: &str = "XProf computes device idle time only for TPU captures (its GPU overview has no such field); *_measured is the idle share of the GPU op time";
    pub const GPU_NO_NORMALIZED_TIME: &str =
        "XProf has no DVFS-normalized time for GPU ops and prints 0";
    pub const GPU_NO_PEAK_UTILIZATION: &str = "XProf's op profile divides FLOPs by the GPU's peak FLOP rate, which it has as 0 for Nvidia GPUs (compute-capability peak), and prints 0; *_measured uses our peak";
    pub const COMBINED_LAYOUT_FLAGS: &str = "XProf combines several hosts' device properties without their memory-layout flags (merged VMEM, CMEM, megacore), so it prints 0 for these; *_measured is the first host's";
    pub const GPU_ROOFLINE_PEAKS: &str = "XProf's GPU roofline prints 0 for this device property (its records still use the GPU's peaks); *_measured is ours from the capture's GPU caps";
    pub const GPU_COMPUTE_EFFICIENCY: &str = "XProf's GPU roofline prints 0 for the compute efficiency; *_measured is the measured FLOP rate over the GPU's peak";
    pub const NOT_COUNTED_ABOVE_CATEGORY: &str = "XProf counts occurrences only for ops and their categories and prints 0 for programs and the root; *_measured sums the occurrences of the node's ops";
    pub const NO_MEMORY_BREAKDOWN: &str = "XProf's TPU op profile counts bytes only from an op's per-memory-space breakdown (memory_access_breakdown), which these ops lack (it prints 0); *_measured puts their bytes_accessed in HBM";
    pub const REJECTED_BY_COST_ANALYSIS: &str = "XProf's XLA cost analysis has no numbers for this op (a custom call it does not cost, such as a legacy __cublas$gemm, or a module whose cuBLASLt gemm config its XLA cannot read), so it prints 0 FLOPs and bytes; *_estimated is our HLO cost model's";
    pub const NO_HOST_OPS: &str =
        "XProf computes host idle time only for TPU captures (prints 0 elsewhere)";
}

fn null_with(m: &mut Map<String, Value>, key: &str, reason: &str, measured: Option<Value>) {
    m.insert(key.into(), Value::Null);
    m.insert(format!("{key}_reason"), Value::from(reason));
    if let Some(v) = measured {
        m.insert(format!("{key}_measured"), v);
    }
}

/// Why an op has no cost numbers at all (`None` when it has them, or when 0 is meaningful):
/// XLA ops a CPU backend ran on host threads, and GPU kernels without `flops`/`bytes_accessed`
/// stats (XProf would run XLA's GPU cost model on the HLO; we do not).
pub fn cost_unknown(op: &OpMetrics, hw: HardwareType) -> Option<&'static str> {
    // An op XProf's cost analysis rejected has XProf's 0 and our estimate, not an absence.
    if op.cost_source != crate::metrics::CostSource::None
        || op.is_idle()
        || op.estimated_flops > 0
        || op.estimated_bytes_accessed > 0
    {
        return None;
    }
    match (op.core_type, hw) {
        (crate::metrics::CoreType::Host, _) => Some(reasons::HOST_NO_COST),
        (_, HardwareType::Gpu) => Some(reasons::GPU_NO_COST),
        _ => None,
    }
}

/// An op whose FLOPs XProf does not count (placeholder 0): a custom call without them, or an
/// op of a module XProf's cost analysis rejected (we have an estimate).
pub fn is_flops_placeholder(op: &OpMetrics) -> bool {
    op.flops == 0 && (op.category == "custom-call" || op.estimated_flops > 0)
}

/// The placeholder reason for `op`'s FLOPs and bytes ([`is_flops_placeholder`]).
fn flops_placeholder_reason(op: &OpMetrics) -> &'static str {
    if op.estimated_flops > 0 || op.estimated_bytes_accessed > 0 {
        reasons::REJECTED_BY_COST_ANALYSIS
    } else {
        reasons::CUSTOM_CALL_FLOPS
    }
}

/// `hlo_op_name`: the text before ` = ` of the expression, `%` stripped; else the name.
pub fn hlo_op_name(op: &OpMetrics) -> String {
    if let Some((lhs, _)) = op.long_name.split_once(" = ") {
        return lhs.trim_start_matches('%').to_string();
    }
    op.name.clone()
}

/// The roofline resources of one op or program aggregate.
#[derive(Clone, Debug, Default)]
pub struct Roofline {
    pub measured_flop_rate: f64,
    pub model_flop_rate: f64,
    pub measured_memory_bw: f64,
    pub hbm_bw: f64,
    pub cmem_read_bw: f64,
    pub cmem_write_bw: f64,
    pub vmem_read_bw: f64,
    pub vmem_write_bw: f64,
    pub operational_intensity: f64,
    pub hbm_operational_intensity: f64,
    pub cmem_read_operational_intensity: f64,
    pub cmem_write_operational_intensity: f64,
    pub vmem_read_operational_intensity: f64,
    pub vmem_write_operational_intensity: f64,
    pub bottleneck_operational_intensity: f64,
    pub bound_by: &'static str,
    pub compute_efficiency: f64,
    pub max_mem_bw_utilization: f64,
    pub roofline_efficiency: f64,
    pub optimal_flop_rate: f64,
}

/// XProf `SetRooflineMetrics` + the roofline record's utilisations, for `flops`, `model_flops`
/// and `bytes` over `time_ps`.
pub fn roofline(
    op: &OpMetrics,
    flops: f64,
    model_flops: f64,
    bytes: u64,
    perf: Option<&PerfEnv>,
    hw: HardwareType,
) -> Roofline {
    let t_ns = op.time_ps as f64 / 1000.0;
    let mut r = Roofline {
        measured_flop_rate: safe_div(flops, t_ns),
        model_flop_rate: safe_div(model_flops, t_ns),
        measured_memory_bw: safe_div(bytes as f64, t_ns) / GIB_PER_GB,
        operational_intensity: safe_div(flops, bytes as f64),
        bound_by: "Unknown",
        ..Default::default()
    };
    let hbm = if op.memory_accessed.is_empty() {
        bytes
    } else {
        op.hbm_bytes()
    };
    let cr = op.bytes_in(MEMORY_SPACE_CMEM, AccessKind::Read);
    let cw = op.bytes_in(MEMORY_SPACE_CMEM, AccessKind::Write);
    let vr = op.bytes_in(MEMORY_SPACE_VMEM, AccessKind::Read);
    let vw = op.bytes_in(MEMORY_SPACE_VMEM, AccessKind::Write);
    let bw = |b: u64| safe_div(b as f64, t_ns) / GIB_PER_GB;
    r.hbm_bw = bw(hbm);
    r.cmem_read_bw = bw(cr);
    r.cmem_write_bw = bw(cw);
    r.vmem_read_bw = bw(vr);
    r.vmem_write_bw = bw(vw);
    r.hbm_operational_intensity = safe_div(flops, hbm as f64);
    r.cmem_read_operational_intensity = safe_div(flops, cr as f64);
    r.cmem_write_operational_intensity = safe_div(flops, cw as f64);
    r.vmem_read_operational_intensity = safe_div(flops, vr as f64);
    r.vmem_write_operational_intensity = safe_div(flops, vw as f64);
    let Some(p) = perf else { return r };
    let peak_flops = p.peak_tflops * 1000.0;
    let gib = |gb: f64| gb / GIB_PER_GB;
    let mut util = 0.0;
    let mut consider = |name: &'static str, u: f64, oi: f64, r: &mut Roofline| {
        if util < u {
            util = u;
            r.bound_by = name;
            r.bottleneck_operational_intensity = oi;
        }
    };
    let fu = safe_div(r.measured_flop_rate, peak_flops);
    consider("Compute", fu, r.operational_intensity, &mut r);
    let hu = safe_div(r.hbm_bw, gib(p.peak_bws_gbps[0]));
    consider("HBM", hu, r.hbm_operational_intensity, &mut r);
    if hw == HardwareType::Tpu {
        for (name, b, rate, peak, oi) in [
            (
                "CMEM Read",
                cr,
                r.cmem_read_bw,
                p.peak_bws_gbps[3],
                r.cmem_read_operational_intensity,
            ),
            (
                "CMEM Write",
                cw,
                r.cmem_write_bw,
                p.peak_bws_gbps[4],
                r.cmem_write_operational_intensity,
            ),
            (
                "VMEM Read",
                vr,
                r.vmem_read_bw,
                p.peak_bws_gbps[5],
                r.vmem_read_operational_intensity,
            ),
            (
                "VMEM Write",
                vw,
                r.vmem_write_bw,
                p.peak_bws_gbps[6],
                r.vmem_write_operational_intensity,
            ),
        ] {
            if b > 0 && peak > 0.0 {
                consider(name, safe_div(rate, gib(peak)), oi, &mut r);
            }
        }
    } else if hw == HardwareType::Gpu && p.peak_bws_gbps[2] > 0.0 {
        let oi = r.hbm_operational_intensity;
        consider(
            "Shm/L1",
            safe_div(r.hbm_bw, gib(p.peak_bws_gbps[2])),
            oi,
            &mut r,
        );
    }
    let dev = device_envelope(p, hw);
    let cmem_r = if dev.has_cmem {
        safe_div(r.cmem_read_bw, dev.peak_cmem_read_bw)
    } else {
        0.0
    };
    let cmem_w = if dev.has_cmem {
        safe_div(r.cmem_write_bw, dev.peak_cmem_write_bw)
    } else {
        0.0
    };
    let vmem_r = if dev.has_merged_vmem {
        safe_div(r.vmem_read_bw, dev.peak_vmem_read_bw)
    } else {
        0.0
    };
    let vmem_w = if dev.has_merged_vmem {
        safe_div(r.vmem_write_bw, dev.peak_vmem_write_bw)
    } else {
        0.0
    };
    r.compute_efficiency = fu;
    r.max_mem_bw_utilization = [cmem_r, cmem_w, hu, vmem_r, vmem_w]
        .into_iter()
        .fold(0.0, f64::max);
    r.roofline_efficiency = r.max_mem_bw_utilization.max(fu);
    r.optimal_flop_rate = safe_div(r.measured_flop_rate, r.roofline_efficiency);
    r
}

/// The roofline database's device envelope (XProf `InitializeRooflineModelDatabaseFromOpStats`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceEnvelope {
    pub megacore: bool,
    pub has_cmem: bool,
    pub has_merged_vmem: bool,
    pub peak_flop_rate: f64,
    pub peak_hbm_bw: f64,
    pub peak_cmem_read_bw: f64,
    pub peak_cmem_write_bw: f64,
    pub peak_vmem_read_bw: f64,
    pub peak_vmem_write_bw: f64,
}

impl DeviceEnvelope {
    pub fn ridge(&self, peak_bw_gib: f64) -> f64 {
        safe_div(self.peak_flop_rate, peak_bw_gib * GIB_PER_GB)
    }
}

pub fn device_envelope(p: &PerfEnv, hw: HardwareType) -> DeviceEnvelope {
    let gib = |gb: f64| gb / GIB_PER_GB;
    let mut d = DeviceEnvelope {
        peak_flop_rate: p.peak_tflops * 1000.0,
        peak_hbm_bw: gib(p.peak_bws_gbps[0]),
        ..Default::default()
    };
    match hw {
        HardwareType::Tpu => {
            d.megacore = p.has_megacore;
            d.has_cmem = p.has_cmem;
            d.has_merged_vmem = p.has_merged_vmem;
            if d.has_cmem {
                d.peak_cmem_read_bw = gib(p.peak_bws_gbps[3]);
                d.peak_cmem_write_bw = gib(p.peak_bws_gbps[4]);
            } else if d.has_merged_vmem {
                d.peak_vmem_read_bw = gib(p.peak_bws_gbps[5]);
                d.peak_vmem_write_bw = gib(p.peak_bws_gbps[6]);
            }
        }
        HardwareType::Gpu => {
            d.has_merged_vmem = true;
            d.peak_vmem_read_bw = gib(p.peak_bws_gbps[1]);
            d.peak_vmem_write_bw = gib(p.peak_bws_gbps[2]);
        }
        HardwareType::CpuOnly => {}
    }
    d
}

/// Device information: the roofline `p` properties with full-precision numbers, plus XProf's
/// 6-significant-digit strings under `xprof_strings`. `None` for CPU-only captures.
pub fn device_information(s: &OpStats) -> Option<Value> {
    let p = s.perf_env.as_ref()?;
    let hw = s.run_env.hardware_type;
    let d = device_envelope(p, hw);
    let tsm = safe_div(
        s.device_db.normalized_total_op_time_ps as f64,
        s.device_db.total_op_time_ps as f64,
    );
    let b = |x: bool| if x { 1.0 } else { 0.0 };
    let fields: Vec<(&str, f64)> = vec![
        ("megacore", b(d.megacore)),
        ("has_cmem", b(d.has_cmem)),
        ("has_merged_vmem", b(d.has_merged_vmem)),
        ("peak_flop_rate", d.peak_flop_rate),
        ("peak_hbm_bw", d.peak_hbm_bw),
        ("peak_cmem_read_bw", d.peak_cmem_read_bw),
        ("peak_cmem_write_bw", d.peak_cmem_write_bw),
        ("peak_vmem_read_bw", d.peak_vmem_read_bw),
        ("peak_vmem_write_bw", d.peak_vmem_write_bw),
        ("hbm_ridge_point", d.ridge(d.peak_hbm_bw)),
        ("cmem_read_ridge_point", d.ridge(d.peak_cmem_read_bw)),
        ("cmem_write_ridge_point", d.ridge(d.peak_cmem_write_bw)),
        ("vmem_read_ridge_point", d.ridge(d.peak_vmem_read_bw)),
        ("vmem_write_ridge_point", d.ridge(d.peak_vmem_write_bw)),
        ("time_scale_multiplier", tsm),
    ];
    let mut m = Map::new();
    m.insert(
        "device_type".into(),
        Value::from(s.run_env.device_type.clone()),
    );
    let mut strings = Map::new();
    strings.insert(
        "device_type".into(),
        Value::from(s.run_env.device_type.clone()),
    );
    for (k, v) in fields {
        m.insert(k.into(), json!(v));
        strings.insert(k.into(), Value::from(g6(v)));
    }
    m.insert(
        "units".into(),
        json!({"peak_flop_rate": "GFLOP/s", "peak_*_bw": "GiB/s", "*_ridge_point": "FLOP/byte"}),
    );
    m.insert("xprof_strings".into(), Value::Object(strings));
    Some(Value::Object(m))
}

/// One hlo_stats row (XProf column ids) for `op`, ranked among `db`'s ops.
fn hlo_stats_row(
    s: &OpStats,
    op: &OpMetrics,
    rank: usize,
    total_us: f64,
    cum: &mut f64,
) -> Map<String, Value> {
    let hw = s.run_env.hardware_type;
    let perf = s.perf_env.as_ref();
    let r = roofline(
        op,
        op.flops as f64,
        op.model_flops as f64,
        op.bytes_accessed,
        perf,
        hw,
    );
    let self_us = ps_to_us(op.self_time_ps);
    let pct = 100.0 * safe_div(self_us, total_us);
    *cum += pct;
    let occ = op.occurrences as f64;
    let mut m = Map::new();
    m.insert("rank".into(), json!(rank));
    m.insert("program_id".into(), json!(op.program_id.to_string()));
    m.insert("category".into(), json!(op.category));
    m.insert("hlo_op_name".into(), json!(hlo_op_name(op)));
    m.insert(
        "hlo_op_expression".into(),
        json!(if op.long_name.is_empty() {
            &op.name
        } else {
            &op.long_name
        }),
    );
    m.insert("tf_op_name".into(), json!(op.provenance));
    m.insert("occurrences".into(), json!(op.occurrences));
    m.insert("total_time".into(), json!(ps_to_us(op.time_ps)));
    m.insert(
        "avg_time".into(),
        json!(safe_div(ps_to_us(op.time_ps), occ)),
    );
    m.insert("total_self_time".into(), json!(self_us));
    m.insert("avg_self_time".into(), json!(safe_div(self_us, occ)));
    m.insert("total_time_ps".into(), json!(op.time_ps));
    m.insert("total_self_time_ps".into(), json!(op.self_time_ps));
    m.insert("total_self_time_percent".into(), json!(pct));
    m.insert("cumulative_total_self_time_percent".into(), json!(*cum));
    m.insert(
        "dma_stall_percent".into(),
        json!(safe_div(op.dma_stall_ps as f64, op.time_ps as f64)),
    );
    let placeholder = is_flops_placeholder(op);
    let mr = roofline(
        op,
        op.event_flops as f64,
        op.event_model_flops.max(op.event_flops) as f64,
        op.event_bytes_accessed,
        perf,
        hw,
    );
    let t_ns = op.time_ps as f64 / 1000.0;
    let normalized = if op.normalized_time_ps == 0 {
        r.measured_flop_rate
    } else {
        r.measured_flop_rate * safe_div(op.time_ps as f64, op.normalized_time_ps as f64)
    };
    let why = flops_placeholder_reason(op);
    if placeholder {
        let measured = |v: f64| (op.event_flops > 0).then(|| json!(v));
        null_with(&mut m, "model_flop_rate", why, measured(mr.model_flop_rate));
        null_with(
            &mut m,
            "normalized_flop_rate",
            why,
            measured(mr.measured_flop_rate),
        );
        null_with(
            &mut m,
            "flops",
            why,
            (op.event_flops > 0).then(|| json!(op.event_flops)),
        );
        if op.estimated_flops > 0 || op.estimated_bytes_accessed > 0 {
            let er = roofline(
                op,
                op.estimated_flops as f64,
                op.estimated_flops as f64,
                op.estimated_bytes_accessed,
                perf,
                hw,
            );
            m.insert("flops_estimated".into(), json!(op.estimated_flops));
            m.insert(
                "bytes_accessed_estimated".into(),
                json!(op.estimated_bytes_accessed),
            );
            m.insert(
                "model_flop_rate_estimated".into(),
                json!(er.model_flop_rate),
            );
            m.insert(
                "measured_memory_bw_estimated".into(),
                json!(er.measured_memory_bw),
            );
            m.insert(
                "operational_intensity_estimated".into(),
                json!(er.operational_intensity),
            );
            m.insert("bound_by_estimated".into(), json!(er.bound_by));
        }
    } else {
        m.insert("model_flop_rate".into(), json!(r.model_flop_rate));
        m.insert("normalized_flop_rate".into(), json!(normalized));
        m.insert("flops".into(), json!(op.flops));
    }
    m.insert("model_flops".into(), json!(op.model_flops));
    m.insert("bytes_accessed".into(), json!(op.bytes_accessed));
    m.insert("measured_memory_bw".into(), json!(r.measured_memory_bw));
    m.insert("hbm_bw".into(), json!(r.hbm_bw));
    m.insert("cmem_read_bw".into(), json!(r.cmem_read_bw));
    m.insert("cmem_write_bw".into(), json!(r.cmem_write_bw));
    m.insert(
        "operational_intensity".into(),
        json!(r.operational_intensity),
    );
    m.insert("bound_by".into(), json!(r.bound_by));
    if op.cost_source == crate::metrics::CostSource::HloCostModel {
        m.insert("cost_model".into(), json!("hlo_cost_model"));
    }
    if let Some(reason) = cost_unknown(op, hw) {
        // No cost numbers exist for this op: report them as unknown, never as 0.
        m.insert("cost_model".into(), json!("absent"));
        for k in [
            "flops",
            "model_flops",
            "model_flop_rate",
            "normalized_flop_rate",
            "bytes_accessed",
            "measured_memory_bw",
            "hbm_bw",
            "cmem_read_bw",
            "cmem_write_bw",
            "operational_intensity",
            "bound_by",
        ] {
            null_with(&mut m, k, reason, None);
        }
    }
    if placeholder && op.bytes_accessed == 0 {
        // The same blind spot as the FLOPs: XProf's 0 bytes for a custom call is "not
        // measured", so the bandwidth and intensity derived from it are not measurements either.
        for k in [
            "bytes_accessed",
            "measured_memory_bw",
            "hbm_bw",
            "cmem_read_bw",
            "cmem_write_bw",
            "operational_intensity",
        ] {
            null_with(&mut m, k, why, None);
        }
    }
    if placeholder && op.event_flops > 0 {
        m.insert("bound_by_measured".into(), json!(mr.bound_by));
        m.insert(
            "measured_flops_per_ns".into(),
            json!(safe_div(op.event_flops as f64, t_ns)),
        );
    }
    let remat = op
        .long_name
        .split('=')
        .next()
        .is_some_and(|l| l.contains(".remat"))
        || op.provenance.contains("/rematted_computation/");
    m.insert(
        "hlo_rematerialization".into(),
        json!(if remat { "Yes" } else { "No" }),
    );
    m.insert("outside_compilation".into(), json!("No"));
    m.insert("autotuned".into(), json!("No"));
    m.insert(
        "source_info".into(),
        json!(if op.source_file.is_empty() {
            String::new()
        } else {
            format!("{}:{}", op.source_file, op.source_line)
        }),
    );
    m.insert("source_stack".into(), json!(op.source_stack));
    m.insert("core_type".into(), json!(op.core_type.label()));
    m.insert("parent_op_name".into(), json!(""));
    m.insert("vdd_energy".into(), json!(op.vdd_energy_j));
    m
}

/// hlo_stats rows of a database (self time desc, then name; IDLE skipped).
/// SparseCore ops an op offloaded follow it, with `parent_op_name` and, as in XProf, no rank
/// or time fractions of their own.
pub fn hlo_stats_of(s: &OpStats, db: &OpMetricsDb) -> Vec<Map<String, Value>> {
    let total_us = ps_to_us(db.total_time_ps);
    let mut cum = 0.0;
    let mut rows = Vec::new();
    for (i, op) in db.sorted_ops().into_iter().enumerate() {
        rows.push(hlo_stats_row(s, op, i + 1, total_us, &mut cum));
        let Some(children) = &op.children else {
            continue;
        };
        for child in children.sorted_ops() {
            if child.core_type != crate::metrics::CoreType::SparseCore {
                continue;
            }
            let mut unused = 0.0;
            let mut r = hlo_stats_row(s, child, 0, 0.0, &mut unused);
            r.insert("total_self_time_percent".into(), json!(0.0));
            r.insert("cumulative_total_self_time_percent".into(), json!(0.0));
            r.insert("parent_op_name".into(), json!(op.name));
            rows.push(r);
        }
    }
    rows
}

/// A roofline Program record's metrics and time from [`program_totals`]: every op's counts,
/// or all but infeed/outfeed's (their time left out too).
fn program_metrics(totals: &OpMetricsDb, include_io: bool) -> OpMetrics {
    let mut prog = OpMetrics {
        name: "Program".into(),
        category: "Program".into(),
        occurrences: 1,
        time_ps: totals.total_time_ps,
        ..Default::default()
    };
    for m in &totals.metrics {
        if !include_io && is_infeed_outfeed(&m.category) {
            prog.time_ps = prog.time_ps.saturating_sub(m.time_ps);
            continue;
        }
        prog.flops = prog.flops.saturating_add(m.flops);
        prog.model_flops = prog.model_flops.saturating_add(m.model_flops);
        prog.bytes_accessed = prog.bytes_accessed.saturating_add(m.bytes_accessed);
        prog.event_flops = prog.event_flops.saturating_add(m.event_flops);
        prog.add_memory_accessed(&m.memory_accessed);
    }
    prog
}

/// The roofline model: device envelope and records (`Total` + `Average` + one per step, with
/// and without infeed/outfeed, as XProf emits them).
pub fn roofline_model(s: &OpStats) -> (Map<String, Value>, Vec<Map<String, Value>>) {
    let hw = s.run_env.hardware_type;
    let perf = s.perf_env.clone().unwrap_or_default();
    let mut records = Vec::new();
    let db = &s.device_db;
    let n_steps = s.steps.complete_steps.len() as f64;
    // `Total` reads the whole device database; `Average` the complete steps' (XProf's
    // `hlo_metrics_db_complete_steps_only`, TPU only, present even without steps), divided by
    // the number of steps; a step's record its own ops (TPU only too: on GPU XProf prints a
    // Program row of zeros per step, having no per-step op database, which we leave out).
    // (record, is Average, the Program totals of its ops)
    let mut sets: Vec<(String, bool, OpMetricsDb)> =
        vec![("Total".into(), false, program_totals(db))];
    if hw == HardwareType::Tpu {
        let avg = s.steps.steps_op_db.as_ref().map(program_totals);
        sets.push(("Average".into(), true, avg.unwrap_or_default()));
    }
    for st in &s.steps.steps {
        if let Some(d) = st.op_db.as_ref() {
            sets.push((st.step_num.to_string(), false, d.clone()));
        }
    }
    for include_io in [true, false] {
        for (step, avg, totals) in &sets {
            let prog = program_metrics(totals, include_io);
            let total_ps = prog.time_ps;
            let mut rec = roofline_record(s, &prog, step, 0, total_ps, include_io, &perf, hw);
            if *avg {
                for k in ["total_time", "total_self_time", "total_time_per_core"] {
                    let v = rec[k].as_f64().unwrap_or(0.0);
                    rec.insert(k.into(), json!(safe_div(v, n_steps)));
                }
            }
            rec.insert("total_self_time_percent".into(), json!(0.0));
            rec.insert("cumulative_total_self_time_percent".into(), json!(0.0));
            records.push(rec);
            if step != "Total" {
                continue;
            }
            // Then every op of the whole database.
            let mut cum = 0.0;
            let total_us = ps_to_us(total_ps);
            let mut rank = 0;
            for op in db.sorted_ops().into_iter().take(1000) {
                if !include_io && is_infeed_outfeed(&op.category) {
                    continue;
                }
                rank += 1;
                let mut rec =
                    roofline_record(s, op, "Total", rank, total_ps, include_io, &perf, hw);
                let frac = safe_div(ps_to_us(op.self_time_ps), total_us);
                cum += frac;
                rec.insert("total_self_time_percent".into(), json!(frac));
                rec.insert("cumulative_total_self_time_percent".into(), json!(cum));
                records.push(rec);
            }
        }
    }
    let mut dev = Map::new();
    if let Some(info) = device_information(s)
        && let Some(st) = info.get("xprof_strings").and_then(Value::as_object)
    {
        dev = st.clone();
    }
    // XProf's multi-host combination keeps the peaks but not the memory-layout flags
    // (`CombinePerfEnv`), so the on-chip tiers of several TPU hosts print as 0.
    if hw == HardwareType::Tpu && s.run_env.task_count > 1 {
        for k in [
            "megacore",
            "has_cmem",
            "has_merged_vmem",
            "peak_cmem_read_bw",
            "peak_cmem_write_bw",
            "peak_vmem_read_bw",
            "peak_vmem_write_bw",
            "cmem_read_ridge_point",
            "cmem_write_ridge_point",
            "vmem_read_ridge_point",
            "vmem_write_ridge_point",
        ] {
            if dev.get(k).is_some_and(|v| v != "0") {
                let measured = dev.get(k).cloned();
                null_with(&mut dev, k, reasons::COMBINED_LAYOUT_FLAGS, measured);
            }
        }
    }
    if hw == HardwareType::Gpu && !xprof_prints_gpu_peak(&perf) {
        for k in [
            "peak_flop_rate",
            "hbm_ridge_point",
            "peak_vmem_write_bw",
            "vmem_write_ridge_point",
        ] {
            let measured = dev.get(k).cloned();
            null_with(&mut dev, k, reasons::GPU_ROOFLINE_PEAKS, measured);
        }
    }
    (dev, records)
}

/// Whether XProf's GPU roofline prints the device's peak FLOP rate (and the ridge points and
/// compute efficiencies derived from it): it does for a peak from the device plane's stat or
/// from its AMD gfx table; for Nvidia GPUs XProf 2.24.2 prints 0 (checked on a V100 and a
/// synthetic Hopper capture).
fn xprof_prints_gpu_peak(perf: &PerfEnv) -> bool {
    use crate::device::peak_source;
    perf.peak_tflops > 0.0
        && (perf.peak_source == peak_source::AMD || perf.peak_source == peak_source::STAT)
}

#[allow(clippy::too_many_arguments)]
fn roofline_record(
    s: &OpStats,
    op: &OpMetrics,
    step: &str,
    rank: usize,
    total_ps: u64,
    include_io: bool,
    perf: &PerfEnv,
    hw: HardwareType,
) -> Map<String, Value> {
    let r = roofline(
        op,
        op.flops as f64,
        op.model_flops as f64,
        op.bytes_accessed,
        Some(perf),
        hw,
    );
    let occ = op.occurrences as f64;
    let mut m = Map::new();
    m.insert("step".into(), json!(step));
    m.insert("rank".into(), json!(rank));
    m.insert("category".into(), json!(op.category));
    m.insert("operation".into(), json!(op.name));
    m.insert("occurrences".into(), json!(op.occurrences));
    m.insert("total_time".into(), json!(ps_to_us(op.time_ps)));
    m.insert(
        "avg_time".into(),
        json!(safe_div(ps_to_us(op.time_ps), occ)),
    );
    m.insert("total_self_time".into(), json!(ps_to_us(op.self_time_ps)));
    m.insert(
        "avg_self_time".into(),
        json!(safe_div(ps_to_us(op.self_time_ps), occ)),
    );
    m.insert("total_time_ps".into(), json!(op.time_ps));
    m.insert("total_self_time_ps".into(), json!(op.self_time_ps));
    m.insert(
        "dma_stall_percent".into(),
        json!(safe_div(op.dma_stall_ps as f64, op.time_ps as f64)),
    );
    let placeholder = is_flops_placeholder(op) && op.name != "Program";
    if placeholder {
        let mr = roofline(
            op,
            op.event_flops as f64,
            op.event_flops as f64,
            op.event_bytes_accessed,
            Some(perf),
            hw,
        );
        let measured = |v: f64| (op.event_flops > 0).then(|| json!(v));
        let why = flops_placeholder_reason(op);
        null_with(
            &mut m,
            "measured_flop_rate",
            why,
            measured(mr.measured_flop_rate),
        );
        null_with(&mut m, "model_flop_rate", why, measured(mr.model_flop_rate));
        if op.estimated_flops > 0 {
            let er = roofline(
                op,
                op.estimated_flops as f64,
                op.estimated_flops as f64,
                op.estimated_bytes_accessed,
                Some(perf),
                hw,
            );
            m.insert(
                "measured_flop_rate_estimated".into(),
                json!(er.measured_flop_rate),
            );
            m.insert("bound_by_estimated".into(), json!(er.bound_by));
        }
        if op.event_flops > 0 {
            m.insert("bound_by_measured".into(), json!(mr.bound_by));
            m.insert(
                "compute_efficiency_measured".into(),
                json!(mr.compute_efficiency),
            );
        }
    } else {
        m.insert("measured_flop_rate".into(), json!(r.measured_flop_rate));
        m.insert("model_flop_rate".into(), json!(r.model_flop_rate));
    }
    for (k, v) in [
        ("measured_memory_bw", r.measured_memory_bw),
        ("hbm_bw", r.hbm_bw),
        ("cmem_read_bw", r.cmem_read_bw),
        ("cmem_write_bw", r.cmem_write_bw),
        ("vmem_read_bw", r.vmem_read_bw),
        ("vmem_write_bw", r.vmem_write_bw),
        ("operational_intensity", r.operational_intensity),
        ("hbm_operational_intensity", r.hbm_operational_intensity),
        (
            "cmem_read_operational_intensity",
            r.cmem_read_operational_intensity,
        ),
        (
            "cmem_write_operational_intensity",
            r.cmem_write_operational_intensity,
        ),
        (
            "vmem_read_operational_intensity",
            r.vmem_read_operational_intensity,
        ),
        (
            "vmem_write_operational_intensity",
            r.vmem_write_operational_intensity,
        ),
        (
            "bottleneck_operational_intensity",
            r.bottleneck_operational_intensity,
        ),
    ] {
        m.insert(k.into(), json!(v));
    }
    m.insert("bound_by".into(), json!(r.bound_by));
    m.insert(
        "total_time_per_core".into(),
        json!(safe_div(
            ps_to_us(op.time_ps),
            s.run_env.device_core_count as f64
        )),
    );
    m.insert(
        "total_time_in_percentage".into(),
        json!(safe_div(op.time_ps as f64, total_ps as f64)),
    );
    m.insert("optimal_flop_rate".into(), json!(r.optimal_flop_rate));
    m.insert("roofline_efficiency".into(), json!(r.roofline_efficiency));
    if hw == HardwareType::Gpu && !xprof_prints_gpu_peak(perf) {
        null_with(
            &mut m,
            "compute_efficiency",
            reasons::GPU_COMPUTE_EFFICIENCY,
            Some(json!(r.compute_efficiency)),
        );
    } else {
        m.insert("compute_efficiency".into(), json!(r.compute_efficiency));
    }
    m.insert(
        "max_mem_bw_utilization".into(),
        json!(r.max_mem_bw_utilization),
    );
    m.insert("include_infeed_outfeed".into(), json!(include_io));
    m.insert("hlo_module_id".into(), json!(op.program_id.to_string()));
    m.insert(
        "source_info".into(),
        json!(if op.source_file.is_empty() {
            String::new()
        } else {
            format!("{}:{}", op.source_file, op.source_line)
        }),
    );
    m
}

/// XProf's framework-op database from a device database (`CreateTfMetricsDbFromDeviceOpMetricsDb`):
/// ops grouped by provenance (name, type); occurrences = max of the members'.
pub fn framework_op_db(device: &OpMetricsDb, with_idle: bool) -> OpMetricsDb {
    let mut ops: Vec<OpMetrics> = Vec::new();
    for m in &device.metrics {
        let (name, kind) = if m.is_idle() {
            if !with_idle {
                continue;
            }
            ("IDLE".to_string(), "IDLE".to_string())
        } else if m.provenance.is_empty() {
            (m.name.clone(), "Unknown".to_string())
        } else {
            let t = parse_tf_op(&m.provenance);
            (
                t.name.to_string(),
                if t.kind.is_empty() {
                    "Unknown".into()
                } else {
                    t.kind.to_string()
                },
            )
        };
        let op = match ops.iter_mut().find(|o| o.name == name) {
            Some(o) => o,
            None => {
                ops.push(OpMetrics {
                    name,
                    category: kind,
                    ..Default::default()
                });
                ops.last_mut().expect("pushed")
            }
        };
        op.is_eager = m.is_eager;
        op.occurrences = op.occurrences.max(m.occurrences);
        op.time_ps = op.time_ps.saturating_add(m.time_ps);
        op.self_time_ps = op.self_time_ps.saturating_add(m.self_time_ps);
        op.flops = op.flops.saturating_add(m.flops);
        op.model_flops = op.model_flops.saturating_add(m.model_flops);
        op.bytes_accessed = op.bytes_accessed.saturating_add(m.bytes_accessed);
        op.core_type = m.core_type;
    }
    OpMetricsDb {
        metrics: ops,
        total_op_time_ps: device.total_op_time_ps,
        total_time_ps: if with_idle {
            device.total_time_ps
        } else {
            device.total_op_time_ps
        },
        ..Default::default()
    }
}

/// Mean and sample standard deviation (n − 1), as XProf's step summaries
/// (`GetStepSummaryForSampleStats`: `sqrt(sample_variance())`); 0 for fewer than 2 values.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// The overview page's numbers: `performance_summary` and `run_environment` (XProf's strings),
/// the step summary, and — for CPU captures — the host-executed ops summary.
pub fn overview(s: &OpStats) -> Map<String, Value> {
    let hw = s.run_env.hardware_type;
    let mut ps = Map::new();
    let device_tf = framework_op_db(&s.device_db, false);
    let host_ops: u64 = s
        .host_db
        .metrics
        .iter()
        .map(|m| m.occurrences)
        .fold(0, |a, b| a.saturating_add(b));
    let dev_ops: u64 = device_tf
        .metrics
        .iter()
        .map(|m| m.occurrences)
        .fold(0, |a, b| a.saturating_add(b));
    // Share of non-idle self time spent in eagerly executed ops; `None` when there is none.
    let eager = |db: &OpMetricsDb| {
        let (tot, eag) =
            db.metrics
                .iter()
                .filter(|m| !m.is_idle())
                .fold((0u64, 0u64), |(t, e), m| {
                    (
                        t.saturating_add(m.self_time_ps),
                        e.saturating_add(if m.is_eager { m.self_time_ps } else { 0 }),
                    )
                });
        (tot > 0).then(|| 100.0 * eag as f64 / tot as f64)
    };
    if hw == HardwareType::Tpu {
        let busy = s.duty_busy_ps as f64;
        let duty = 100.0 * safe_div(busy, busy + s.duty_idle_ps as f64);
        ps.insert("device_duty_cycle_percent".into(), json!(percent(duty)));
        ps.insert("device_duty_cycle_busy_ps".into(), json!(s.duty_busy_ps));
        ps.insert("device_duty_cycle_idle_ps".into(), json!(s.duty_idle_ps));
        ps.insert(
            "idle_time_high_confidence_ps".into(),
            json!(g6(s.duty_idle_ps as f64)),
        );
        ps.insert(
            "device_idle_time_percent".into(),
            json!(percent(100.0 * s.device_db.idle_ratio())),
        );
        ps.insert(
            "host_idle_time_percent".into(),
            json!(percent(100.0 * s.host_db.idle_ratio())),
        );
    } else if hw == HardwareType::Gpu {
        null_with(
            &mut ps,
            "device_idle_time_percent",
            reasons::DEVICE_IDLE_TPU_ONLY,
            Some(json!(percent(100.0 * s.device_db.idle_ratio()))),
        );
        null_with(
            &mut ps,
            "host_idle_time_percent",
            reasons::NO_HOST_OPS,
            None,
        );
    } else {
        null_with(
            &mut ps,
            "device_duty_cycle_percent",
            reasons::NO_DEVICE,
            None,
        );
        null_with(
            &mut ps,
            "device_idle_time_percent",
            reasons::NO_DEVICE,
            None,
        );
        let measured = s
            .host_xla_db
            .as_ref()
            .map(|d| json!(percent(100.0 * d.idle_ratio())));
        null_with(
            &mut ps,
            "host_idle_time_percent",
            reasons::NO_HOST_OPS,
            measured,
        );
    }
    // Precision (XProf `device_compute_{16,32}bit_percent`, GPU only).
    let prec = s.device_db.precision_stats;
    if hw == HardwareType::Gpu && prec.total_ps() > 0 {
        let tot = prec.total_ps() as f64;
        let p16 = 100.0 * prec.compute_16bit_ps as f64 / tot;
        ps.insert("device_compute_16bit_percent".into(), json!(percent(p16)));
        ps.insert(
            "device_compute_32bit_percent".into(),
            json!(percent(100.0 * prec.compute_32bit_ps as f64 / tot)),
        );
        ps.insert(
            "device_compute_16bit_ps".into(),
            json!(prec.compute_16bit_ps),
        );
        ps.insert(
            "device_compute_32bit_ps".into(),
            json!(prec.compute_32bit_ps),
        );
        // XProf `GeneratePrecisionStatement` (threshold 10 %).
        let statement = if p16 < 10.0 {
            format!(
                "Only {}% of device computation is 16 bit. So you might want to replace more 32-bit Ops by 16-bit Ops to improve performance (if the reduced accuracy is acceptable).",
                one_digit(p16)
            )
        } else {
            String::new()
        };
        ps.insert("precision_statement".into(), json!(statement));
    } else {
        let reason = if hw == HardwareType::Gpu {
            reasons::PRECISION_NO_STEPS
        } else {
            reasons::PRECISION_NOT_GPU
        };
        null_with(&mut ps, "device_compute_16bit_percent", reason, None);
        null_with(&mut ps, "device_compute_32bit_percent", reason, None);
    }
    if hw != HardwareType::CpuOnly {
        ps.insert(
            "device_total_time_ps".into(),
            json!(s.device_db.total_time_ps),
        );
        ps.insert(
            "device_op_time_ps".into(),
            json!(s.device_db.total_op_time_ps),
        );
    }
    if host_ops.saturating_add(dev_ops) == 0 {
        null_with(
            &mut ps,
            "host_tf_op_percent",
            reasons::NO_FRAMEWORK_OPS,
            None,
        );
        null_with(
            &mut ps,
            "device_tf_op_percent",
            reasons::NO_FRAMEWORK_OPS,
            None,
        );
    } else {
        let tot = host_ops as f64 + dev_ops as f64;
        ps.insert(
            "host_tf_op_percent".into(),
            json!(percent(100.0 * host_ops as f64 / tot)),
        );
        ps.insert(
            "device_tf_op_percent".into(),
            json!(percent(100.0 * dev_ops as f64 / tot)),
        );
    }
    for (key, v) in [
        ("host_op_time_eager_percent", eager(&s.host_db)),
        ("device_op_time_eager_percent", eager(&device_tf)),
    ] {
        match v {
            Some(v) => {
                ps.insert(key.into(), json!(percent(v)));
            }
            None => null_with(&mut ps, key, reasons::NO_OP_TIME, None),
        }
    }
    // How much device time the cost model cannot see (custom calls have no FLOPs in it).
    if hw != HardwareType::CpuOnly && s.device_db.total_op_time_ps > 0 {
        let cc: u64 = s
            .device_db
            .metrics
            .iter()
            .filter(|m| m.category == "custom-call")
            .map(|m| m.self_time_ps)
            .fold(0, |a, b| a.saturating_add(b));
        let share = 100.0 * cc as f64 / s.device_db.total_time_ps.max(1) as f64;
        ps.insert("custom_call_self_time_ps".into(), json!(cc));
        ps.insert(
            "custom_call_share_pct".into(),
            json!((share * 100.0).round() / 100.0),
        );
        if cc > 0 {
            ps.insert(
                "custom_call_warning".into(),
                json!(format!(
                    "Custom calls take {share:.2}% of device time. XLA's cost model gives them 0 FLOPs, so FLOP rates and roofline numbers ignore them; their trace-measured FLOPs are in the *_measured fields."
                )),
            );
        }
    }
    // Roofline-relative utilisation: XProf's open-source build passes no limits (prints 0).
    let measured = roofline_utilization(s);
    null_with(
        &mut ps,
        "flop_rate_utilization_relative_to_roofline",
        if hw == HardwareType::CpuOnly {
            reasons::NO_DEVICE
        } else {
            reasons::ROOFLINE_LIMITS
        },
        measured.map(|(f, _)| json!(format!("{f:.1}%"))),
    );
    null_with(
        &mut ps,
        "memory_bw_utilization_relative_to_hw_limit",
        if hw == HardwareType::CpuOnly {
            reasons::NO_DEVICE
        } else {
            reasons::ROOFLINE_LIMITS
        },
        measured.map(|(_, m)| json!(format!("{m:.1}%"))),
    );
    match s.mxu_utilization_percent {
        Some(v) => {
            ps.insert("mxu_utilization_percent".into(), json!(percent(v)));
        }
        None => null_with(
            &mut ps,
            "mxu_utilization_percent",
            reasons::NO_MXU_STAT,
            None,
        ),
    }
    match s.hbm_utilization_percent {
        Some(v) => {
            ps.insert("hbm_utilization_percent".into(), json!(percent(v)));
        }
        None => null_with(
            &mut ps,
            "hbm_utilization_percent",
            reasons::NO_HBM_STAT,
            None,
        ),
    }
    // Step time (XProf's steps only).
    let steps = &s.steps.complete_steps;
    let fmt = |v: f64| {
        if hw == HardwareType::Tpu {
            two_digits(v)
        } else {
            one_digit(v)
        }
    };
    if steps.is_empty() {
        for k in [
            "steptime_ms_average",
            "steptime_ms_standard_deviation",
            "steptime_ms_minimum",
            "steptime_ms_maximum",
        ] {
            let why = s.steps.no_steps.unwrap_or(crate::steps::NoSteps::NoMarkers);
            null_with(&mut ps, k, why.reason(), None);
        }
    } else {
        let ms: Vec<f64> = steps
            .iter()
            .map(|st| st.duration_ps() as f64 / 1e9)
            .collect();
        let (mean, sd) = mean_sd(&ms);
        let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ms.iter().copied().fold(0.0, f64::max);
        ps.insert("steptime_ms_average".into(), json!(fmt(mean)));
        ps.insert("steptime_ms_standard_deviation".into(), json!(fmt(sd)));
        ps.insert("steptime_ms_minimum".into(), json!(fmt(min)));
        ps.insert("steptime_ms_maximum".into(), json!(fmt(max)));
        if hw == HardwareType::Tpu {
            let per_step: Vec<TpuStepTimes> = steps.iter().map(tpu_step_times).collect();
            let avg = |f: fn(&TpuStepTimes) -> f64| {
                mean_sd(&per_step.iter().map(f).collect::<Vec<_>>()).0
            };
            ps.insert(
                "tc_compute_ms_average".into(),
                json!(two_digits(avg(|t| t.compute_ms))),
            );
            ps.insert(
                "tc_infeed_ms_average".into(),
                json!(two_digits(avg(|t| t.infeed_ms))),
            );
            ps.insert(
                "tc_outfeed_ms_average".into(),
                json!(two_digits(avg(|t| t.outfeed_ms))),
            );
            ps.insert(
                "tc_idle_ms_average".into(),
                json!(two_digits(avg(|t| t.idle_ms))),
            );
            ps.insert(
                "host_transfer_ms_average".into(),
                json!(two_digits(avg(|t| t.host_transfer_ms))),
            );
        }
        if hw != HardwareType::Tpu {
            for (i, name) in GENERIC_NAMES.iter().enumerate() {
                let v: Vec<f64> = steps
                    .iter()
                    .map(|st| {
                        st.per_core
                            .values()
                            .map(|c| c.generic_ps[i])
                            .fold(0u64, u64::saturating_add) as f64
                            / 1e9
                    })
                    .collect();
                let (m, sd) = mean_sd(&v);
                let key = generic_key(name);
                ps.insert(format!("{key}_ms_avg"), json!(one_digit(m)));
                ps.insert(format!("{key}_ms_sdv"), json!(one_digit(sd)));
            }
        }
    }
    let mut out = Map::new();
    out.insert("performance_summary".into(), Value::Object(ps));
    let mut env = Map::new();
    env.insert(
        "device_core_count".into(),
        json!(s.run_env.device_core_count.to_string()),
    );
    env.insert("device_type".into(), json!(s.run_env.device_type));
    env.insert("hardware_type".into(), json!(hw.as_str()));
    env.insert("host_count".into(), json!(s.run_env.host_count.to_string()));
    env.insert(
        "is_training".into(),
        json!(s.run_env.is_training.to_string()),
    );
    env.insert(
        "task_count".into(),
        json!(format!(
            "{} (num tasks per host = {})",
            s.run_env.task_count,
            s.run_env.task_count / s.run_env.host_count.max(1)
        )),
    );
    env.insert("hostnames".into(), json!(s.run_env.hostnames));
    out.insert("run_environment".into(), Value::Object(env));
    out.insert("steps".into(), steps_summary(s));
    out
}

/// One TPU step across cores (XProf `ComputeTpuPerStepDataAcrossCores`, TensorCores only).
#[derive(Clone, Copy, Debug, Default)]
pub struct TpuStepTimes {
    pub compute_ms: f64,
    pub infeed_ms: f64,
    pub outfeed_ms: f64,
    pub idle_ms: f64,
    pub host_transfer_ms: f64,
}

pub fn tpu_step_times(step: &crate::steps::Step) -> TpuStepTimes {
    let sum = |c: &crate::steps::CoreStep, f: &dyn Fn(&str) -> bool| -> u64 {
        c.category_ps
            .iter()
            .filter(|(k, _)| f(k))
            .map(|(_, v)| *v)
            .fold(0, |a, b| a.saturating_add(b))
    };
    let ms = |ps: f64| ps / 1e9;
    let mut compute = f64::INFINITY;
    let (mut infeed, mut host, mut min_dur) = (0u64, 0u64, u64::MAX);
    let mut outfeed = Vec::new();
    for c in step.per_core.values() {
        let inf = sum(c, &|k| k.contains("infeed"));
        let out = sum(c, &|k| k.contains("outfeed"));
        let hsr = sum(c, &|k| {
            k.starts_with("host send") || k.starts_with("host recv")
        });
        // Optimal step time: the step minus the time the core waits for the host.
        compute = compute.min(c.duration_ps.saturating_sub(inf + hsr) as f64);
        infeed = infeed.max(inf);
        host = host.max(hsr);
        min_dur = min_dur.min(c.duration_ps);
        outfeed.push(out as f64);
    }
    if step.per_core.is_empty() {
        return TpuStepTimes::default();
    }
    let out_avg = outfeed.iter().sum::<f64>() / outfeed.len() as f64;
    let busy = compute + infeed as f64 + out_avg + host as f64;
    TpuStepTimes {
        compute_ms: ms(compute),
        infeed_ms: ms(infeed as f64),
        outfeed_ms: ms(out_avg),
        idle_ms: ms((min_dur as f64 - busy).max(0.0)),
        host_transfer_ms: ms(host as f64),
    }
}

fn generic_key(name: &str) -> &'static str {
    match name {
        "Device compute" => "device_compute_time",
        "Device to device" => "device_to_device_time",
        "Device collective communication" => "device_collectives_time",
        "Host compute" => "host_compute_time",
        "Kernel launch" => "kernel_launch_time",
        "Input" => "infeed_time",
        "Output" => "outfeed_time",
        "Compilation" => "compile_time",
        _ => "other_time",
    }
}

/// XProf's overview numbers for roofline-relative utilisation, had it been given the
/// capture's limits: (flop-rate % of roofline, HBM bandwidth % of peak).
pub fn roofline_utilization(s: &OpStats) -> Option<(f64, f64)> {
    let p = s.perf_env.as_ref()?;
    // XProf computes this over the complete steps' ops; without steps, over the whole trace.
    let db = s
        .steps
        .steps_op_db
        .as_ref()
        .filter(|d| !d.is_empty())
        .unwrap_or(&s.device_db);
    let mut flops = 0.0;
    let mut bytes = 0u64;
    for m in &db.metrics {
        if m.occurrences == 0 || may_have_inner_ops(&m.category) {
            continue;
        }
        flops += if is_flops_placeholder(m) {
            m.event_flops as f64
        } else {
            m.flops as f64
        };
        bytes = bytes.saturating_add(m.hbm_bytes());
    }
    let t_ns = db.total_time_ps as f64 / 1000.0;
    let gflops = safe_div(flops, t_ns);
    let gbps = safe_div(bytes as f64, t_ns);
    let oi = safe_div(flops, bytes as f64);
    let peak = p.peak_tflops * 1000.0;
    let optimal = if bytes == 0 {
        peak
    } else {
        (oi * p.peak_bws_gbps[0]).min(peak)
    };
    Some((
        100.0 * safe_div(gflops, optimal),
        100.0 * safe_div(gbps, p.peak_bws_gbps[0]),
    ))
}

/// Steps as the tools report them: XProf's (with source) and, separately, our inference.
pub fn steps_summary(s: &OpStats) -> Value {
    let st = &s.steps;
    let list = |v: &[crate::steps::Step]| -> Vec<Value> {
        v.iter()
            .map(|x| {
                let mut m = Map::new();
                m.insert("step_num".into(), json!(x.step_num));
                m.insert("name".into(), json!(x.name));
                m.insert("begin_ps".into(), json!(x.begin_ps()));
                m.insert("duration_ps".into(), json!(x.duration_ps()));
                m.insert("duration_ms".into(), json!(x.duration_ps() as f64 / 1e9));
                // Whether XProf's overview and input pipeline count it (they drop the first
                // and last of more than 5 host steps as "maybe incomplete").
                let complete = st
                    .complete_steps
                    .iter()
                    .any(|c| c.step_num == x.step_num && c.begin_ps() == x.begin_ps());
                m.insert("complete".into(), json!(complete));
                if s.run_env.hardware_type != HardwareType::Tpu {
                    let mut b = Map::new();
                    for (i, n) in GENERIC_NAMES.iter().enumerate() {
                        let ps: u64 = x
                            .per_core
                            .values()
                            .map(|c| c.generic_ps[i])
                            .fold(0, |a, b| a.saturating_add(b));
                        b.insert((*n).into(), json!(ps));
                    }
                    m.insert("breakdown_ps".into(), Value::Object(b));
                } else {
                    let mut b = Map::new();
                    for c in x.per_core.values() {
                        for (k, v) in &c.category_ps {
                            let e = b.entry(k.clone()).or_insert(json!(0u64));
                            *e = json!(e.as_u64().unwrap_or(0).saturating_add(*v));
                        }
                    }
                    m.insert("category_ps".into(), Value::Object(b));
                }
                Value::Object(m)
            })
            .collect()
    };
    let mut m = Map::new();
    m.insert("steps_source".into(), json!(st.source.as_str()));
    if !st.steps.is_empty() {
        let ps: Vec<u64> = st.steps.iter().map(|x| x.duration_ps()).collect();
        let ms: Vec<f64> = ps.iter().map(|p| *p as f64 / 1e9).collect();
        let (mean, sd) = mean_sd(&ms);
        m.insert(
            "summary".into(),
            json!({
                "total_steps": ps.len(),
                "step_time_ms_average": mean,
                "step_time_ms_min": ms.iter().copied().fold(f64::INFINITY, f64::min),
                "step_time_ms_max": ms.iter().copied().fold(0.0, f64::max),
                "step_time_ms_stddev": sd,
                "step_time_ps_min": ps.iter().min(),
                "step_time_ps_max": ps.iter().max(),
                "step_time_ps_total": ps.iter().fold(0u64, |a, b| a.saturating_add(*b)),
                // The average XProf's overview reports: without the first and last of more
                // than 5 host steps, which often hold compilation or a partial step.
                "complete_step_time_ms_average": (!st.complete_steps.is_empty()).then(|| {
                    let ms: Vec<f64> = st
                        .complete_steps
                        .iter()
                        .map(|x| x.duration_ps() as f64 / 1e9)
                        .collect();
                    mean_sd(&ms).0
                }),
            }),
        );
    }
    m.insert("count".into(), json!(st.steps.len()));
    m.insert("complete_count".into(), json!(st.complete_steps.len()));
    m.insert("steps".into(), Value::Array(list(&st.steps)));
    if st.steps.is_empty() {
        let why = st.no_steps.unwrap_or(crate::steps::NoSteps::NoMarkers);
        m.insert("no_steps_reason".into(), json!(why.reason()));
        m.insert("no_steps_advice".into(), json!(why.advice()));
    }
    if st.source == StepsSource::None && !s.steps_inferred.is_empty() {
        let ms: Vec<f64> = s.steps_inferred.iter().map(|x| x.1 as f64 / 1e9).collect();
        let (mean, sd) = mean_sd(&ms);
        m.insert(
            "steps_inferred".into(),
            json!({
                "method": "one step per XLA Modules execution on the first device (ours, not XProf's)",
                "count": ms.len(),
                "steptime_ms_average": mean,
                "steptime_ms_standard_deviation": sd,
                "steps": s.steps_inferred.iter().enumerate().map(|(i, (b, d, n))| json!({
                    "index": i, "module": n, "begin_ps": b, "duration_ps": d})).collect::<Vec<_>>(),
            }),
        );
    }
    Value::Object(m)
}

/// The database op views read: the device's, or on CPU-only captures the host-executed XLA ops.
/// `None` when it holds no op (see [`no_op_reason`]).
pub fn op_db(s: &OpStats) -> Option<(&OpMetricsDb, bool)> {
    if s.run_env.hardware_type != HardwareType::CpuOnly {
        return (!s.device_db.is_empty()).then_some((&s.device_db, false));
    }
    s.host_xla_db
        .as_ref()
        .filter(|d| !d.is_empty())
        .map(|d| (d, true))
}

/// What the op tables' self-time percentages divide by, for [`op_db`]'s database: on a CPU
/// capture the host threads' time (idle included, as XProf's device tables include a device's
/// idle time), which several threads make larger than the capture.
pub fn self_time_basis(host_executed: bool) -> &'static str {
    if host_executed {
        "time of the host threads that ran XLA ops: each thread's span from its first op's start \
         to its last op's end, idle included, summed over the threads"
    } else {
        "total time of the devices' op timelines, idle included (XProf's hlo_stats basis)"
    }
}

/// Why [`op_db`] found no op, naming what the capture lacks.
pub fn no_op_reason(s: &OpStats) -> String {
    match s.run_env.hardware_type {
        HardwareType::Tpu => format!(
            "the {} TPU TensorCore plane(s) have no `XLA Ops` events with program_id/symbol_id metadata stats",
            s.run_env.device_core_count
        ),
        HardwareType::Gpu => format!(
            "the {} GPU plane(s) have no kernel events with hlo_op/program_id stats that match the capture's HLO ({} such kernels lacked their HLO module)",
            s.run_env.device_core_count, s.gpu_kernels_without_hlo
        ),
        HardwareType::CpuOnly => {
            let base = "no device plane, and no /host:CPU thread events with an `hlo_op` stat (XLA ops run by a CPU backend)";
            // A TensorFlow capture without XLA: its ops ran in TensorFlow's own executor.
            let framework_ops = s.host_db.metrics.iter().filter(|m| !m.is_idle()).count();
            if framework_ops > 0 {
                format!(
                    "{base}; the host ran {framework_ops} framework (TensorFlow) ops in its own runtime, not through XLA: see get_framework_op_stats, or compile the step with tf.function(jit_compile=True) for XLA op views"
                )
            } else {
                base.into()
            }
        }
    }
}

/// XProf's op-profile view of a device's ops: its peaks, and whether it counts an op's bytes
/// only from a per-memory-space breakdown (TPU: the `memory_access_breakdown` stat; on GPU its
/// cost model gives every op one, all HBM, as our `bytes_accessed`).
#[derive(Clone, Copy)]
struct NodeEnv<'a> {
    perf: Option<&'a PerfEnv>,
    breakdown_only: bool,
    /// The ops are a CPU backend's on host threads: no FLOP or byte counts exist for them.
    host_executed: bool,
    /// GPU ops: XProf has no DVFS-normalized time for them.
    gpu: bool,
}

/// One op_profile node's metrics (XProf `op_profile` field names).
fn node_metrics(op: &OpMetrics, total_ps: u64, env: NodeEnv<'_>) -> Value {
    let perf = env.perf;
    let t_ns = op.time_ps as f64 / 1000.0;
    // XProf's flop rate is per DVFS-normalized time when there is one: for the root, whose
    // time is reset to the profile's total, that is its ops' time (IDLE has none).
    // GPU ops have no normalized time in XProf: the root's rate is over its whole time, IDLE
    // included.
    let flops_ns = if op.normalized_time_ps == 0 || env.gpu {
        t_ns
    } else {
        op.normalized_time_ps as f64 / 1000.0
    };
    // XProf's three tiers: HBM (read and write), on-chip reads, on-chip writes (every memory
    // space but HBM), from the op's breakdown; without one, all bytes as HBM, which XProf
    // counts on GPU but not on TPU.
    let (tiers, xprof_counts_them) = if op.memory_accessed.is_empty() {
        ([op.bytes_accessed, 0, 0], !env.breakdown_only)
    } else {
        let on_chip = |kind| {
            op.memory_accessed
                .iter()
                .filter(|m| m.memory_space != crate::metrics::MEMORY_SPACE_HBM && m.kind == kind)
                .fold(0u64, |a, m| a.saturating_add(m.bytes))
        };
        let hbm = op
            .bytes_in(crate::metrics::MEMORY_SPACE_HBM, AccessKind::Read)
            .saturating_add(op.bytes_in(crate::metrics::MEMORY_SPACE_HBM, AccessKind::Write));
        (
            [hbm, on_chip(AccessKind::Read), on_chip(AccessKind::Write)],
            true,
        )
    };
    let flops_util = match perf {
        Some(p) => {
            safe_div(op.flops as f64, flops_ns) / (p.peak_tflops * 1000.0).max(f64::MIN_POSITIVE)
        }
        None => 0.0,
    };
    // Each tier against its peak (HBM, SRAM read, SRAM write); unlike the FLOP utilization,
    // XProf does not weight the bandwidth by the time fraction.
    let utils: Vec<f64> = tiers
        .iter()
        .zip([0, 1, 2])
        .map(|(b, k)| match perf {
            Some(p) if p.peak_bws_gbps[k] > 0.0 => {
                (safe_div(*b as f64, t_ns) / p.peak_bws_gbps[k]).min(1.0)
            }
            _ => 0.0,
        })
        .collect();
    let hbm = tiers[0];
    let frac = safe_div(op.time_ps as f64, total_ps as f64);
    let bytes = json!(tiers);
    let bandwidth = json!(utils);
    let mut m = json!({
        "rawTime": op.time_ps,
        "selfTimePs": op.self_time_ps,
        "rawFlops": op.model_flops,
        "bf16Flops": op.flops,
        "rawBytesAccessedArray": bytes,
        "occurrences": op.occurrences,
        "avgTimePs": safe_div(op.time_ps as f64, op.occurrences as f64),
        "normalizedTimePs": op.normalized_time_ps,
        "timeFraction": frac,
        "flops": flops_util.min(1.0) * frac,
        "uncappedFlops": flops_util * frac,
        "bandwidthUtils": bandwidth,
    });
    // XProf has no DVFS-normalized time for GPU ops (it prints 0), and its FLOP utilization
    // is 0 where its GPU peak is (Nvidia's compute-capability peak).
    if env.gpu
        && !op.is_idle()
        && let Some(map) = m.as_object_mut()
    {
        if !perf.is_some_and(xprof_prints_gpu_peak) {
            for key in ["flops", "uncappedFlops"] {
                let measured = map.get(key).cloned();
                null_with(map, key, reasons::GPU_NO_PEAK_UTILIZATION, measured);
            }
        }
        null_with(
            map,
            "normalizedTimePs",
            reasons::GPU_NO_NORMALIZED_TIME,
            None,
        );
    }
    // Unknown, not 0: the trace gives host-executed ops no cost (XProf has no such view).
    if env.host_executed
        && !op.is_idle()
        && let Some(map) = m.as_object_mut()
    {
        for key in [
            "rawFlops",
            "bf16Flops",
            "flops",
            "uncappedFlops",
            "rawBytesAccessedArray",
            "bandwidthUtils",
        ] {
            null_with(map, key, reasons::HOST_NO_COST, None);
        }
        return m;
    }
    if !xprof_counts_them
        && hbm > 0
        && let Some(map) = m.as_object_mut()
    {
        null_with(
            map,
            "rawBytesAccessedArray",
            reasons::NO_MEMORY_BREAKDOWN,
            Some(bytes),
        );
        null_with(
            map,
            "bandwidthUtils",
            reasons::NO_MEMORY_BREAKDOWN,
            Some(bandwidth),
        );
    }
    m
}

/// An op's node, with its children (the SparseCore ops it offloaded and, on TPU, its fused
/// instructions) under it as XProf inserts them (`InsertFusedInstructions`), in stored order.
fn op_tree_node(op: &OpMetrics, total: u64, env: NodeEnv<'_>, depth: u32) -> Value {
    let children: Vec<Value> = match &op.children {
        Some(c) if depth < 16 => c
            .metrics
            .iter()
            .map(|child| op_tree_node(child, total, env, depth + 1))
            .collect(),
        _ => Vec::new(),
    };
    let mut m = json!({
        "name": op.name,
        "metrics": node_metrics(op, total, env),
        "xla": {
            "expression": op.long_name,
            "provenance": op.provenance,
            "category": op.category,
            "programId": op.program_id.to_string(),
            "sourceInfo": {"fileName": op.source_file, "lineNumber": op.source_line, "stackFrame": op.source_stack},
        },
        "numChildren": children.len(),
        "children": children,
    });
    if is_flops_placeholder(op) {
        m["metrics"]["rawFlops"] = Value::Null;
        m["metrics"]["bf16Flops"] = Value::Null;
        let why = flops_placeholder_reason(op);
        m["metrics"]["rawFlops_reason"] = json!(why);
        m["metrics"]["bf16Flops_reason"] = json!(why);
        if op.event_flops > 0 {
            m["metrics"]["rawFlops_measured"] = json!(op.event_flops);
        }
        if op.estimated_flops > 0 {
            m["metrics"]["rawFlops_estimated"] = json!(op.estimated_flops);
        }
    }
    m
}

/// Whether an op is placed in the op profile's categories: it holds no nested op's time, or
/// what it holds are SparseCore ops.
fn is_op_profile_leaf(op: &OpMetrics) -> bool {
    op.time_ps <= op.self_time_ps
        || op.children.as_ref().is_some_and(|c| {
            c.metrics
                .iter()
                .any(|m| m.core_type == crate::metrics::CoreType::SparseCore)
        })
}

/// A program's or the root's totals from one op (XProf `UpdateNodeMetrics`): its self time,
/// its normalized time, and its cost only when it holds no nested op (whose cost is counted
/// by the nested ops themselves).
fn update_node(dst: &mut OpMetrics, src: &OpMetrics) {
    dst.time_ps = dst.time_ps.saturating_add(src.self_time_ps);
    dst.self_time_ps = dst.self_time_ps.saturating_add(src.self_time_ps);
    dst.normalized_time_ps = dst
        .normalized_time_ps
        .saturating_add(src.normalized_time_ps);
    if src.time_ps <= src.self_time_ps {
        dst.flops = dst.flops.saturating_add(src.flops);
        dst.model_flops = dst.model_flops.saturating_add(src.model_flops);
        dst.bytes_accessed = dst.bytes_accessed.saturating_add(src.bytes_accessed);
        dst.event_flops = dst.event_flops.saturating_add(src.event_flops);
        dst.add_memory_accessed(&src.memory_accessed);
    }
}

/// Totals of a group node (XProf combines the children's metrics, breakdown included).
fn sum_into(dst: &mut OpMetrics, src: &OpMetrics) {
    dst.add_memory_accessed(&src.memory_accessed);
    dst.time_ps = dst.time_ps.saturating_add(src.time_ps);
    dst.self_time_ps = dst.self_time_ps.saturating_add(src.self_time_ps);
    dst.flops = dst.flops.saturating_add(src.flops);
    dst.model_flops = dst.model_flops.saturating_add(src.model_flops);
    dst.bytes_accessed = dst.bytes_accessed.saturating_add(src.bytes_accessed);
    dst.occurrences = dst.occurrences.saturating_add(src.occurrences);
    dst.normalized_time_ps = dst
        .normalized_time_ps
        .saturating_add(src.normalized_time_ps);
    dst.event_flops = dst.event_flops.saturating_add(src.event_flops);
}

/// op_profile: root → (program →) category → op, with IDLE as a root child when `with_idle`.
/// `group_by` = "program" or "category".
pub fn op_profile(s: &OpStats, group_by: &str, with_idle: bool) -> Value {
    let Some((db, host_executed)) = op_db(s) else {
        return json!({"name": "by_".to_string() + group_by, "children": [], "metrics": Value::Null});
    };
    let env = NodeEnv {
        perf: s.perf_env.as_ref(),
        breakdown_only: s.run_env.hardware_type == HardwareType::Tpu,
        host_executed,
        gpu: s.run_env.hardware_type == HardwareType::Gpu,
    };
    let total = if with_idle {
        db.total_time_ps
    } else {
        db.total_op_time_ps
    };
    // XProf names a program whose HLO the capture lacks "main" (`GenerateProgramName`); the
    // node's `programId` still says which it is.
    let module_name = |pid: u64| match s.program_names.get(&pid) {
        Some(n) => format!("{n}({pid})"),
        None => "main".to_string(),
    };
    let op_node = |op: &OpMetrics| op_tree_node(op, total, env, 0);
    // Group ops (no IDLE, no ops named region…, deduplicated by deduplicated_name).
    let mut ops: Vec<&OpMetrics> = db
        .metrics
        .iter()
        .filter(|m| !m.is_idle() && !m.name.starts_with("region"))
        .collect();
    ops.sort_by(|a, b| b.time_ps.cmp(&a.time_ps).then(a.name.cmp(&b.name)));
    let category_nodes = |ops: &[&OpMetrics]| -> (Vec<Value>, OpMetrics) {
        // category → (totals, dedup key → (group totals, member ops)); `ops` is sorted by time.
        type Group<'a> = (OpMetrics, Vec<&'a OpMetrics>);
        type Cat<'a> = (String, OpMetrics, Vec<(String, Group<'a>)>);
        let mut cats: Vec<Cat> = Vec::new();
        let mut total_m = OpMetrics::default();
        for op in ops {
            let i = match cats.iter().position(|c| c.0 == op.category) {
                Some(i) => i,
                None => {
                    cats.push((op.category.clone(), OpMetrics::default(), Vec::new()));
                    cats.len() - 1
                }
            };
            sum_into(&mut cats[i].1, op);
            sum_into(&mut total_m, op);
            // XProf groups ops that share a `deduplicated_name` (an op's own name otherwise).
            let key = if op.deduplicated_name.is_empty() {
                op.name.clone()
            } else {
                op.deduplicated_name.clone()
            };
            let groups = &mut cats[i].2;
            let g = match groups.iter().position(|g| g.0 == key) {
                Some(g) => g,
                None => {
                    groups.push((key, (OpMetrics::default(), Vec::new())));
                    groups.len() - 1
                }
            };
            sum_into(&mut groups[g].1.0, op);
            groups[g].1.1.push(op);
        }
        cats.sort_by(|a, b| b.1.time_ps.cmp(&a.1.time_ps).then(a.0.cmp(&b.0)));
        let nodes = cats
            .into_iter()
            .map(|(name, m, mut groups)| {
                groups.sort_by(|a, b| b.1.0.time_ps.cmp(&a.1.0.time_ps).then(a.0.cmp(&b.0)));
                let children: Vec<Value> = groups
                    .into_iter()
                    .map(|(_, (gm, members))| {
                        if members.len() == 1 {
                            return op_node(members[0]);
                        }
                        let top = members[0];
                        json!({
                            "name": format!("{} and its duplicate(s)", top.name),
                            "metrics": node_metrics(&gm, total, env),
                            "xla": {"expression": top.long_name, "category": top.category,
                                    "programId": top.program_id.to_string()},
                            "numChildren": members.len(),
                            "children": members.iter().map(|o| op_node(o)).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                json!({"name": name, "metrics": node_metrics(&m, total, env), "numChildren": children.len(), "children": children})
            })
            .collect();
        (nodes, total_m)
    };
    let mut children = Vec::new();
    if with_idle && let Some(idle) = db.metrics.iter().find(|m| m.is_idle()) {
        children.push(json!({"name": "IDLE", "metrics": node_metrics(idle, total, env), "children": [], "numChildren": 0}));
    }
    // The root and the programs take every op's self time; the categories and below only
    // ops that hold no nested ops (a while or a call would count its body twice), unless
    // what it holds are SparseCore ops (XProf `OpProfileBuilder::AddOp`).
    let leaf_ops: Vec<&OpMetrics> = ops
        .iter()
        .copied()
        .filter(|o| is_op_profile_leaf(o))
        .collect();
    let mut root = OpMetrics::default();
    let mut root_occurrences = 0u64;
    for o in &ops {
        update_node(&mut root, o);
        root_occurrences = root_occurrences.saturating_add(o.occurrences);
    }
    if group_by == "category" {
        let (nodes, _) = category_nodes(&leaf_ops);
        children.extend(nodes);
    } else {
        let mut programs: Vec<u64> = ops.iter().map(|o| o.program_id).collect();
        programs.sort_unstable();
        programs.dedup();
        for pid in programs {
            let pops: Vec<&OpMetrics> = leaf_ops
                .iter()
                .copied()
                .filter(|o| o.program_id == pid)
                .collect();
            let (nodes, _) = category_nodes(&pops);
            let mut m = OpMetrics::default();
            let mut occurrences = 0u64;
            for o in ops.iter().filter(|o| o.program_id == pid) {
                update_node(&mut m, o);
                occurrences = occurrences.saturating_add(o.occurrences);
            }
            let mut metrics = node_metrics(&m, total, env);
            uncounted_occurrences(&mut metrics, occurrences);
            children.push(json!({
                "name": module_name(pid),
                "programId": pid.to_string(),
                "metrics": metrics,
                "numChildren": nodes.len(),
                "children": nodes,
            }));
        }
    }
    // XProf sorts every level by time, IDLE and programs included (a stable sort: equal
    // times keep IDLE first, then programs by id).
    children.sort_by_key(|c| std::cmp::Reverse(c["metrics"]["rawTime"].as_u64().unwrap_or(0)));
    let mut rm = root.clone();
    rm.time_ps = total;
    let mut metrics = node_metrics(&rm, total, env);
    uncounted_occurrences(&mut metrics, root_occurrences);
    let mut node = json!({
        "name": format!("by_{group_by}"),
        "metrics": metrics,
        "numChildren": children.len(),
        "children": children,
    });
    if host_executed {
        node["host_executed"] = json!(true);
    }
    node
}

/// A program's or the root's occurrences and average time, which XProf does not count (it
/// prints 0): null with the reason, and the ops' occurrences as measured.
fn uncounted_occurrences(metrics: &mut Value, ops_occurrences: u64) {
    if let Some(m) = metrics.as_object_mut() {
        null_with(
            m,
            "occurrences",
            reasons::NOT_COUNTED_ABOVE_CATEGORY,
            Some(json!(ops_occurrences)),
        );
        null_with(m, "avgTimePs", reasons::NOT_COUNTED_ABOVE_CATEGORY, None);
    }
}

/// Combine several databases (used by tools that read per-host results).
pub fn combine_dbs(dbs: &[&OpMetricsDb]) -> OpMetricsDb {
    let mut c = DbCombiner::new();
    for d in dbs {
        c.combine(d, true);
    }
    c.finish()
}
