//! framework_op_stats (XProf `op_stats_to_tf_stats.cc`): time by framework op — JAX named
//! scope / PyTorch / TF op — on the device (HLO ops grouped by their provenance) and on the
//! host (framework ops on host threads).

use std::borrow::Cow;

use serde_json::{Map, Value, json};
use xprof_opstats::OpStats;
use xprof_opstats::device::PerfEnv;
use xprof_opstats::metrics::{OpMetrics, OpMetricsDb};
use xprof_opstats::opstats::HardwareType;
use xprof_opstats::tfop::parse_tf_op;

use crate::table::{Table, placeholder, ps_to_us, safe_div};

/// What the framework tables read of the engine: the op databases, host framework ops
/// included, and no step (on a CPU capture the step grouping walks every host event).
pub const BUILD: xprof_opstats::BuildOptions = xprof_opstats::BuildOptions {
    steps: false,
    host_framework_ops: true,
};

/// XProf shows at most 500 device ops and 500 host ops.
pub const MAX_OPS: usize = 500;

const GIB_PER_GB: f64 = 1.073741824;

pub const REASON_CUSTOM_CALL_FLOPS: &str = "XProf's cost model counts 0 FLOPs for custom calls (Pallas/Mosaic kernels) under this framework op; *_measured uses the trace's own per-launch FLOP counts";

pub const COLUMNS: &[&str] = &[
    "rank",
    "host_or_device",
    "type",
    "operation",
    "occurrences",
    "total_time",
    "avg_time",
    "total_self_time",
    "avg_self_time",
    "device_total_self_time_percent",
    "device_cumulative_total_self_time_percent",
    "host_total_self_time_percent",
    "Host_cumulative_total_self_time_percent",
    "measured_flop_rate",
    "model_flop_rate",
    "measured_memory_bw",
    "operational_intensity",
    "bound_by",
    "eager",
];

/// A framework op on the device: XProf's totals plus the trace's own FLOPs of custom calls
/// XProf leaves at 0.
#[derive(Clone, Debug, Default)]
pub struct FrameworkOp {
    pub metrics: OpMetrics,
    /// Σ per-launch FLOPs of member custom calls whose cost-model FLOPs are 0.
    pub placeholder_event_flops: u64,
    pub has_flops_placeholder: bool,
}

/// XProf `CreateTfMetricsDbFromDeviceOpMetricsDb`: device HLO ops grouped by framework op
/// (provenance parsed as `name:type`); no provenance → the HLO op name with type `Unknown`;
/// occurrences = the max over the members.
pub fn device_framework_ops(device: &OpMetricsDb, with_idle: bool) -> Vec<FrameworkOp> {
    framework_ops_by(device, with_idle, |m| Cow::Borrowed(&m.provenance))
}

/// [`device_framework_ops`] with each op's provenance as `provenance` gives it.
fn framework_ops_by(
    device: &OpMetricsDb,
    with_idle: bool,
    provenance: impl Fn(&OpMetrics) -> Cow<'_, str>,
) -> Vec<FrameworkOp> {
    let mut ops: Vec<FrameworkOp> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for m in &device.metrics {
        let (name, kind) = if m.is_idle() {
            if !with_idle {
                continue;
            }
            ("IDLE".to_string(), "IDLE".to_string())
        } else if m.provenance.is_empty() {
            (m.name.clone(), "Unknown".to_string())
        } else {
            let p = provenance(m);
            let t = parse_tf_op(&p);
            let kind = if t.kind.is_empty() || t.kind == "Unknown" {
                "Unknown".to_string()
            } else {
                t.kind.to_string()
            };
            (t.name.to_string(), kind)
        };
        let i = *index.entry(name.clone()).or_insert_with(|| {
            ops.push(FrameworkOp {
                metrics: OpMetrics {
                    name,
                    category: kind,
                    ..Default::default()
                },
                ..Default::default()
            });
            ops.len() - 1
        });
        let op = &mut ops[i];
        let t = &mut op.metrics;
        t.is_eager = m.is_eager;
        t.occurrences = t.occurrences.max(m.occurrences);
        t.time_ps = t.time_ps.saturating_add(m.time_ps);
        t.self_time_ps = t.self_time_ps.saturating_add(m.self_time_ps);
        t.flops = t.flops.saturating_add(m.flops);
        t.model_flops = t.model_flops.saturating_add(m.model_flops);
        t.bytes_accessed = t.bytes_accessed.saturating_add(m.bytes_accessed);
        t.core_type = m.core_type;
        if xprof_opstats::views::is_flops_placeholder(m) && m.event_flops > 0 {
            op.has_flops_placeholder = true;
            op.placeholder_event_flops = op.placeholder_event_flops.saturating_add(m.event_flops);
        }
    }
    ops
}

/// XProf `SortedOpMetricsDb`: self time descending, then name ascending; IDLE included.
fn sorted<T>(items: &[T], m: impl Fn(&T) -> &OpMetrics) -> Vec<&T> {
    let mut v: Vec<&T> = items.iter().collect();
    v.sort_by(|a, b| {
        let (a, b) = (m(a), m(b));
        b.self_time_ps
            .cmp(&a.self_time_ps)
            .then_with(|| a.name.cmp(&b.name))
    });
    v.truncate(MAX_OPS);
    v
}

/// Roofline numbers of one record (XProf `SetRooflineMetrics`, memory = all bytes as HBM since
/// framework ops carry no memory breakdown).
fn roofline(
    m: &OpMetrics,
    flops: u64,
    perf: Option<&PerfEnv>,
    hw: HardwareType,
) -> (f64, f64, f64, f64, &'static str) {
    let time_ns = m.time_ps as f64 / 1000.0;
    let flop_rate = safe_div(flops as f64, time_ns);
    let model_rate = safe_div(m.model_flops as f64, time_ns);
    let bw_gib = safe_div(m.bytes_accessed as f64, time_ns) / GIB_PER_GB;
    let intensity = safe_div(flops as f64, m.bytes_accessed as f64);
    let mut bound = "Unknown";
    let mut best = 0.0;
    if let Some(p) = perf {
        let u = safe_div(flop_rate, p.peak_tflops * 1000.0);
        if best < u {
            bound = "Compute";
            best = u;
        }
        let u = safe_div(bw_gib, p.peak_bws_gbps[0] / GIB_PER_GB);
        if best < u {
            bound = "HBM";
            best = u;
        }
        if hw == HardwareType::Gpu && p.peak_bws_gbps[2] > 0.0 {
            let u = safe_div(bw_gib, p.peak_bws_gbps[2] / GIB_PER_GB);
            if best < u {
                bound = "Shm/L1";
            }
        }
    }
    (flop_rate, model_rate, bw_gib, intensity, bound)
}

/// One framework-op table (XProf `GenerateTfStatsTable` + `TfStatsToDataTable`).
pub fn table(s: &OpStats, exclude_idle: bool) -> Table {
    table_with_kernels(s, exclude_idle, None)
}

/// [`table`] with GPU kernel time per framework op (Tensor Core ns, all ns) for the
/// `gpu_tensorcore_utilization` column; `None` when the kernel stats were not read.
pub fn table_with_kernels(
    s: &OpStats,
    exclude_idle: bool,
    kernels: Option<&std::collections::HashMap<String, (u64, u64)>>,
) -> Table {
    let gpu = s.run_env.device_type.contains("GPU");
    let mut cols = COLUMNS.to_vec();
    if gpu {
        cols.insert(17, "gpu_tensorcore_utilization");
    }
    let mut t = Table::new(&cols);
    let hw = s.run_env.hardware_type;
    let perf = s.perf_env.as_ref();
    let device = device_framework_ops(&s.device_db, true);
    let device_total = if exclude_idle {
        s.device_db.total_op_time_ps
    } else {
        s.device_db.total_time_ps
    };
    let mut rank = 0u64;
    let mut dev_cum = 0.0;
    for op in sorted(&device, |o| &o.metrics) {
        let m = &op.metrics;
        if exclude_idle && m.is_idle() {
            continue;
        }
        rank += 1;
        let frac = safe_div(ps_to_us(m.self_time_ps), ps_to_us(device_total));
        dev_cum += frac;
        let mut r = record(rank, "Device", m, m.flops, perf, hw);
        r.insert("device_total_self_time_percent".into(), json!(frac));
        r.insert(
            "device_cumulative_total_self_time_percent".into(),
            json!(dev_cum),
        );
        if gpu {
            // Kernel stats are matched by framework op name; ops without kernels get 0, as in
            // XProf.
            match kernels {
                Some(k) => {
                    let (tc, all) = k.get(&m.name).copied().unwrap_or((0, 0));
                    r.insert(
                        "gpu_tensorcore_utilization".into(),
                        json!(safe_div(tc as f64, all as f64)),
                    );
                }
                None => placeholder(
                    &mut r,
                    "gpu_tensorcore_utilization",
                    "the GPU kernel stats (kernel_details) were not read",
                    None,
                ),
            }
        }
        if op.has_flops_placeholder {
            let (measured, ..) = roofline(
                m,
                m.flops.saturating_add(op.placeholder_event_flops),
                perf,
                hw,
            );
            placeholder(
                &mut r,
                "measured_flop_rate",
                REASON_CUSTOM_CALL_FLOPS,
                Some(json!(measured)),
            );
            r.insert(
                "flops_measured".into(),
                json!(m.flops.saturating_add(op.placeholder_event_flops)),
            );
        }
        t.records.push(r);
    }
    // Host side.
    let host = &s.host_db;
    let host_total = if exclude_idle {
        host.total_op_time_ps
    } else {
        host.total_time_ps
    };
    let mut host_cum = 0.0;
    // XProf's host database carries its IDLE op (0 when nothing was idle) whenever the capture
    // has a host threads plane; the engine leaves it out when the host had no framework ops.
    let mut host_ops = host.metrics.clone();
    if s.has_host_plane && !host_ops.iter().any(OpMetrics::is_idle) {
        let idle = host.total_time_ps.saturating_sub(host.total_op_time_ps);
        host_ops.push(OpMetrics {
            name: "IDLE".into(),
            category: "IDLE".into(),
            time_ps: idle,
            self_time_ps: idle,
            ..Default::default()
        });
    }
    for m in sorted(&host_ops, |m| m) {
        if exclude_idle && m.is_idle() {
            continue;
        }
        rank += 1;
        let frac = safe_div(ps_to_us(m.self_time_ps), ps_to_us(host_total));
        host_cum += frac;
        let mut r = record(rank, "Host", m, m.flops, perf, hw);
        // XProf keeps a host op's type as parsed, so an op without one has type "" (only the
        // device side maps it to "Unknown"); the engine stores "Unknown" for both.
        if m.category == "Unknown" {
            r.insert("type".into(), json!(""));
        }
        r.insert("host_total_self_time_percent".into(), json!(frac));
        r.insert(
            "Host_cumulative_total_self_time_percent".into(),
            json!(host_cum),
        );
        if gpu {
            r.insert("gpu_tensorcore_utilization".into(), json!(0.0));
        }
        t.records.push(r);
    }
    with_model_properties(t)
}

/// Our view for a CPU capture, where XProf's table holds only IDLE rows: the XLA ops the CPU
/// backend ran on host threads, grouped by framework op as XProf groups device ops
/// ([`device_framework_ops`]). Rows are `Host`, their shares are of the host-executed op
/// database's time (each thread's span, idle included; without idle when `exclude_idle`), and
/// the FLOP/byte columns are null with the reason: the trace carries no cost for these ops.
/// The `task_type` property reads the gradient scopes of these rows (XProf's `ModelTracker`).
/// `None` when the capture is not CPU-only or ran no XLA op on the host.
pub fn host_executed_table(s: &OpStats, exclude_idle: bool) -> Option<Table> {
    if s.run_env.hardware_type != HardwareType::CpuOnly {
        return None;
    }
    let db = s.host_xla_db.as_ref().filter(|d| !d.is_empty())?;
    let mut t = Table::new(COLUMNS);
    // A device op's provenance is XProf's `tf_op` stat, `op_name:op_type`; a host-executed
    // op's is the HLO's op_name alone, so the type comes from the name, as XProf derives it
    // for an empty `op_type` (JAX leaves it out of most ops).
    let ops = framework_ops_by(db, !exclude_idle, |m| {
        if m.provenance.contains(':') {
            Cow::Borrowed(&m.provenance)
        } else {
            Cow::Owned(format!("{}:", m.provenance))
        }
    });
    let total = if exclude_idle {
        db.total_op_time_ps
    } else {
        db.total_time_ps
    };
    let mut cum = 0.0;
    for (rank, op) in (1u64..).zip(sorted(&ops, |o| &o.metrics)) {
        let m = &op.metrics;
        let frac = safe_div(ps_to_us(m.self_time_ps), ps_to_us(total));
        cum += frac;
        let mut r = record(rank, "Host", m, m.flops, None, s.run_env.hardware_type);
        r.insert("host_total_self_time_percent".into(), json!(frac));
        r.insert("Host_cumulative_total_self_time_percent".into(), json!(cum));
        if !m.is_idle() && m.flops == 0 && m.bytes_accessed == 0 {
            let why = xprof_opstats::views::reasons::HOST_NO_COST;
            for k in [
                "measured_flop_rate",
                "model_flop_rate",
                "measured_memory_bw",
                "operational_intensity",
                "bound_by",
                "flops",
                "bytes_accessed",
            ] {
                placeholder(&mut r, k, why, None);
            }
        }
        t.records.push(r);
    }
    Some(with_model_properties(t))
}

/// The table with XProf's `ModelTracker` properties read from its rows.
fn with_model_properties(mut t: Table) -> Table {
    let (task, arch) = model_tracker(t.records.iter().map(|r| {
        (
            r["operation"].as_str().unwrap_or_default(),
            r["type"].as_str().unwrap_or_default(),
        )
    }));
    t.prop("architecture_type", arch);
    t.prop("task_type", task);
    t
}

fn record(
    rank: u64,
    where_: &str,
    m: &OpMetrics,
    flops: u64,
    perf: Option<&PerfEnv>,
    hw: HardwareType,
) -> Map<String, Value> {
    let (flop_rate, model_rate, bw, intensity, bound) = roofline(m, flops, perf, hw);
    let total_us = ps_to_us(m.time_ps);
    let self_us = ps_to_us(m.self_time_ps);
    let mut r = Map::new();
    r.insert("rank".into(), json!(rank));
    r.insert("host_or_device".into(), json!(where_));
    r.insert("type".into(), json!(m.category));
    r.insert("operation".into(), json!(m.name));
    r.insert("occurrences".into(), json!(m.occurrences));
    r.insert("total_time".into(), json!(total_us));
    r.insert(
        "avg_time".into(),
        json!(safe_div(total_us, m.occurrences as f64)),
    );
    r.insert("total_self_time".into(), json!(self_us));
    r.insert(
        "avg_self_time".into(),
        json!(safe_div(self_us, m.occurrences as f64)),
    );
    r.insert("device_total_self_time_percent".into(), json!(0.0));
    r.insert(
        "device_cumulative_total_self_time_percent".into(),
        json!(0.0),
    );
    r.insert("host_total_self_time_percent".into(), json!(0.0));
    r.insert("Host_cumulative_total_self_time_percent".into(), json!(0.0));
    r.insert("measured_flop_rate".into(), json!(flop_rate));
    r.insert("model_flop_rate".into(), json!(model_rate));
    r.insert("measured_memory_bw".into(), json!(bw));
    r.insert("operational_intensity".into(), json!(intensity));
    r.insert("bound_by".into(), json!(bound));
    r.insert(
        "eager".into(),
        json!(if m.is_eager { "Eager" } else { "Function" }),
    );
    r.insert("total_time_ps".into(), json!(m.time_ps));
    r.insert("total_self_time_ps".into(), json!(m.self_time_ps));
    r.insert("flops".into(), json!(m.flops));
    r.insert("bytes_accessed".into(), json!(m.bytes_accessed));
    r
}

/// XProf's `ModelTracker` as the open-source build runs it: "Training" when a name scope shows
/// a gradient (TF `gradients*` / `gradient_tape`, JAX `transpose(jvp(...))`); the architecture
/// flags (LSTM/GRU/RNN/CNN/MLP) are never set there, so it is always "Unknown".
fn model_tracker<'a>(
    ops: impl Iterator<Item = (&'a str, &'a str)>,
) -> (&'static str, &'static str) {
    let mut training = false;
    for (name, _kind) in ops {
        for scope in name.split('/') {
            if scope.starts_with("transpose(")
                || scope == "gradient_tape"
                || scope
                    .strip_prefix("gradient")
                    .is_some_and(|r| r.starts_with('s'))
            {
                training = true;
            }
        }
    }
    (if training { "Training" } else { "Inference" }, "Unknown")
}

/// The view: XProf's two tables (`[with_idle, without_idle]`).
pub fn framework_op_stats(s: &OpStats) -> (Table, Table) {
    (table(s, false), table(s, true))
}
