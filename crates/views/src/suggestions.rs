//! Smart suggestions (XProf `smart_suggestion/*.h`, `smart_suggestion_processor.cc`) and the
//! host-boundness verdict of XProf's own CLI (`check_host_boundness`). Every suggestion cites
//! the signal values behind it.

use serde_json::{Map, Value, json};
use xprof_opstats::OpStats;
use xprof_opstats::format::one_digit;
use xprof_opstats::opstats::HardwareType;

use crate::input_pipeline::InputPipeline;
use crate::table::{placeholder, safe_div};

const HBM_LOW: f64 = 50.0;
const HBM_HIGH: f64 = 70.0;
const MXU_LOW: f64 = 50.0;
const MXU_HIGH: f64 = 70.0;
const INFEED_PCT: f64 = 10.0;
const COLLECTIVE_BOUND: f64 = 30.0;
const DATA_SHUFFLE_BOUND: f64 = 30.0;
const DATA_TRANSFER_BOUND: f64 = 30.0;
const HOST_PROCESSING_BOUND: f64 = 50.0;
const TC_IDLE: f64 = 10.0;
const ZERO_EPS: f64 = 1e-6;

/// XProf's collective categories (`SignalProvider::IsCollective`).
const COLLECTIVES: &[&str] = &[
    "all-reduce",
    "all-reduce fusion",
    "all-reduce-scatter fusion",
    "all-to-all",
    "all-gather",
    "all-gather-start",
    "all-gather-done",
    "all-gather fusion",
    "reduce-scatter",
    "collective-permute",
    "collective-permute-done",
    "collective-permute-start",
    "megacore fusion",
    "host recv",
    "host recv-done",
    "host send",
    "host send-done",
];

/// XProf's data-shuffle categories (`SignalProvider::IsDataShuffle`).
const DATA_SHUFFLE: &[&str] = &[
    "broadcast",
    "concatenate",
    "data formatting",
    "dynamic-slice",
    "dynamic-update-slice",
    "gather",
    "pad",
    "reverse",
    "scatter",
    "select",
    "select-and-scatter",
    "shuffle",
    "slice",
    "sort",
];

/// The signals the rules read. `xprof_*` are the values XProf's rules see (its overview's
/// placeholders included); `measured_*` are ours.
#[derive(Clone, Debug, Default)]
pub struct Signals {
    pub hardware_type: String,
    /// XProf: overview `mxu_utilization_percent` (the host-plane stat, else 0).
    pub xprof_mxu_percent: f64,
    /// Whether that value came from the capture's stat (else it is XProf's placeholder 0).
    pub xprof_mxu_from_stat: bool,
    /// XProf: overview `memory_bw_utilization_relative_to_hw_limit_percent` (0 in open source).
    pub xprof_hbm_percent: f64,
    /// Ours: the device's FLOP rate as % of its peak (None without a device / peak).
    pub measured_flops_percent: Option<f64>,
    /// Ours: HBM bandwidth as % of peak.
    pub measured_hbm_percent: Option<f64>,
    pub input_percent: f64,
    /// Shares of the input time; `None` when there is no input time to divide (XProf's rules
    /// see 0).
    pub enqueue_percent_of_input: Option<f64>,
    pub non_enqueue_percent_of_input: Option<f64>,
    /// TPU: average TensorCore idle as % of step time; `None` off TPU (XProf cannot unpack a
    /// TPU breakdown there and skips the rule).
    pub tc_idle_percent: Option<f64>,
    /// Average share of the step time; `None` when no step has op time by category (XProf
    /// builds it for TPU steps only; CPU and GPU steps, or no steps), where its rules see 0.
    pub collective_percent: Option<f64>,
    pub data_shuffle_percent: Option<f64>,
    pub steps: usize,
    /// Event-time fractions of `barrier-cores` and `debug_print` events (None: not analysed).
    pub barrier_cores: Option<EventFractions>,
    pub debug_print: Option<EventFractions>,
    /// XLA compilations on the hosts' threads against the steps (None: not analysed).
    pub compilations: Option<crate::recompile::Compilations>,
    /// Async ops left uncovered by compute (None: not analysed, or no async op).
    pub async_exposure: Option<crate::overlap::AsyncExposure>,
}

const BARRIER_CORES: &str = "barrier-cores";
const DEBUG_PRINT: &str = "debug_print";
const SPECIAL_OP_BOUND: f64 = 10.0;
/// Compile time, as % of the step time after the first step, from which recompilation is
/// reported.
const RECOMPILE_BOUND: f64 = 10.0;
const DEBUG_PRINT_BOUND: f64 = 5.0;
/// Exposed async-op time, as % of the device time, from which it is reported.
const EXPOSED_ASYNC_BOUND: f64 = 5.0;

/// [`signals`] plus XProf's event-time-fraction signals, which read the device planes.
pub fn signals_with_events(s: &OpStats, ip: &InputPipeline, run: &crate::LoadedRun) -> Signals {
    let mut sig = signals(s, ip);
    sig.barrier_cores = Some(event_time_fractions(run, BARRIER_CORES));
    sig.debug_print = Some(event_time_fractions(run, DEBUG_PRINT));
    sig.compilations = Some(crate::recompile::compilations(s, run));
    sig
}

/// Average over steps of (Σ self time of matching categories / Σ core step time); `None` when
/// no step has op time by category to take a share of (XProf builds it for TPU steps only:
/// CPU and GPU steps carry time by event type).
fn step_fraction_percent(s: &OpStats, pred: impl Fn(&str) -> bool) -> Option<f64> {
    let categorised = s
        .steps
        .steps
        .iter()
        .flat_map(|st| st.per_core.values())
        .any(|c| c.category_ps.values().any(|v| *v > 0));
    if !categorised {
        return None;
    }
    let mut fr = Vec::new();
    for step in &s.steps.steps {
        let total: u64 = step.per_core.values().map(|c| c.duration_ps).sum();
        if total == 0 {
            continue;
        }
        let cat: u64 = step
            .per_core
            .values()
            .flat_map(|c| c.category_ps.iter())
            .filter(|(k, _)| pred(k))
            .map(|(_, v)| *v)
            .sum();
        // XProf accumulates these as floats.
        fr.push((cat as f32 / total as f32) as f64);
    }
    (!fr.is_empty()).then(|| 100.0 * fr.iter().sum::<f64>() / fr.len() as f64)
}

pub fn signals(s: &OpStats, ip: &InputPipeline) -> Signals {
    let b = &ip.bottleneck;
    let total_input = b.enqueue_us + b.non_enqueue_us;
    let tpu = s.run_env.hardware_type == HardwareType::Tpu;
    let (measured_flops, measured_hbm) = match (&s.perf_env, s.run_env.hardware_type) {
        (Some(p), hw) if hw != HardwareType::CpuOnly && s.device_db.total_time_ps > 0 => {
            let flops: f64 = s
                .device_db
                .metrics
                .iter()
                .filter(|m| m.occurrences > 0)
                .map(|m| {
                    if xprof_opstats::views::is_flops_placeholder(m) {
                        m.event_flops as f64
                    } else {
                        m.flops as f64
                    }
                })
                .sum();
            let t_ns = s.device_db.total_time_ps as f64 / 1000.0;
            let f = (p.peak_tflops > 0.0)
                .then(|| 100.0 * safe_div(flops / t_ns, p.peak_tflops * 1000.0));
            let h = xprof_opstats::views::roofline_utilization(s)
                .map(|x| x.1)
                .filter(|_| p.peak_bws_gbps[0] > 0.0);
            (f, h)
        }
        _ => (None, None),
    };
    Signals {
        hardware_type: s.run_env.hardware_type.as_str().to_string(),
        xprof_mxu_percent: s.mxu_utilization_percent.unwrap_or(0.0),
        xprof_mxu_from_stat: s.mxu_utilization_percent.is_some(),
        xprof_hbm_percent: 0.0,
        measured_flops_percent: measured_flops,
        measured_hbm_percent: measured_hbm,
        input_percent: b.input_percent,
        enqueue_percent_of_input: (total_input > 0.0).then(|| 100.0 * b.enqueue_us / total_input),
        non_enqueue_percent_of_input: (total_input > 0.0)
            .then(|| 100.0 * b.non_enqueue_us / total_input),
        tc_idle_percent: tpu.then(|| {
            if b.step_time_ms_avg == 0.0 {
                0.0
            } else {
                100.0 * b.tc_idle_ms_avg / b.step_time_ms_avg
            }
        }),
        collective_percent: step_fraction_percent(s, |c| COLLECTIVES.contains(&c)),
        data_shuffle_percent: step_fraction_percent(s, |c| DATA_SHUFFLE.contains(&c)),
        steps: b.steps,
        barrier_cores: None,
        debug_print: None,
        compilations: None,
        async_exposure: None,
    }
}

/// The rules open-source XProf runs (`RegisterAllRulesFor3P`). Its other rules are in its
/// source but registered only in Google's internal build (`RegisterAllRules`), so XProf 2.24.2
/// prints none of them.
const OPEN_SOURCE_XPROF_RULES: &[&str] = &["BarrierCoresRule"];

fn suggestion(rule: &str, source: &str, text: String, cites: Value) -> Value {
    json!({"ruleName": rule, "source": source, "suggestionText": text, "signals": cites})
}

/// One of XProf's rules: `source` is `xprof` when open-source XProf prints it too, else
/// `xprof-internal` (XProf's rule, which only its internal build runs).
fn xprof_rule(rule: &str, text: String, cites: Value) -> Value {
    let source = if OPEN_SOURCE_XPROF_RULES.contains(&rule) {
        "xprof"
    } else {
        "xprof-internal"
    };
    suggestion(rule, source, text, cites)
}

/// One of ours, on measured values.
fn our_rule(rule: &str, text: String, cites: Value) -> Value {
    suggestion(rule, "xprof-rs", text, cites)
}

/// XProf's rules (on XProf's signal values) then ours (on measured values).
pub fn smart_suggestions(sig: &Signals) -> Value {
    let mut out = Vec::new();
    let mxu = sig.xprof_mxu_percent;
    let hbm = sig.xprof_hbm_percent;
    if mxu > MXU_HIGH && hbm < HBM_LOW {
        out.push(xprof_rule("ComputeBoundRule", format!(
            "Compute bound: MXU utilization {}% with HBM bandwidth utilization {}%. Reduce FLOPs (algorithmic changes, lower precision such as bf16/fp8) or improve MXU efficiency of the dominant ops.",
            one_digit(mxu), one_digit(hbm)), json!({"mxu_utilization_percent": mxu, "hbm_utilization_percent": hbm})));
    }
    if hbm > HBM_HIGH && mxu < MXU_LOW {
        out.push(xprof_rule("MemoryBoundRule", format!(
            "Memory bound: HBM bandwidth utilization {}% with MXU utilization {}%. Fuse memory-bound ops, reuse data on chip, or shrink activations (lower precision, rematerialisation).",
            one_digit(hbm), one_digit(mxu)), json!({"mxu_utilization_percent": mxu, "hbm_utilization_percent": hbm})));
    }
    // XProf's rules see 0 where we have no value.
    let enqueue = sig.enqueue_percent_of_input.unwrap_or(0.0);
    let non_enqueue = sig.non_enqueue_percent_of_input.unwrap_or(0.0);
    let collective = sig.collective_percent.unwrap_or(0.0);
    let data_shuffle = sig.data_shuffle_percent.unwrap_or(0.0);
    let input_bound = sig.input_percent > INFEED_PCT;
    let input_cites = json!({
        "input_percent_of_step_time": sig.input_percent,
        "enqueue_percent_of_input": enqueue,
        "non_enqueue_percent_of_input": non_enqueue,
    });
    if input_bound && non_enqueue.abs() < ZERO_EPS && enqueue.abs() < ZERO_EPS {
        out.push(xprof_rule("InputBoundRule", format!(
            "Input bound: {}% of the step time waits for input, and the host input pipeline could not be broken down (custom input framework?). Prefetch and parallelise input preparation, or overlap it with device steps.",
            one_digit(sig.input_percent)), input_cites.clone()));
    }
    if input_bound && enqueue >= DATA_TRANSFER_BOUND {
        out.push(xprof_rule("DataTransferBoundRule", format!(
            "Data transfer bound: {}% of the step time is input, {}% of it enqueuing data to the device. Send fewer, larger transfers and overlap them with compute.",
            one_digit(sig.input_percent), one_digit(enqueue)), input_cites.clone()));
    }
    if input_bound && non_enqueue >= HOST_PROCESSING_BOUND {
        out.push(xprof_rule("HostProcessingBoundRule", format!(
            "Host processing bound: {}% of the step time is input, {}% of it reading and preprocessing on the host. Parallelise and prefetch the input pipeline, or preprocess offline.",
            one_digit(sig.input_percent), one_digit(non_enqueue)), input_cites));
    }
    if let Some(idle) = sig.tc_idle_percent
        && mxu < MXU_LOW
        && hbm < HBM_LOW
        && idle > TC_IDLE
    {
        out.push(xprof_rule("TensorCoreIdleBoundRule", format!(
            "TensorCore idle: the TensorCore is idle {}% of the step time (not waiting for input). Reduce host overhead between steps: run several steps per call, avoid host synchronisation, dispatch asynchronously.",
            one_digit(idle)), json!({"tensor_core_idle_percent": idle, "mxu_utilization_percent": mxu, "hbm_utilization_percent": hbm})));
    }
    if collective >= COLLECTIVE_BOUND {
        out.push(xprof_rule("CollectiveBoundRule", format!(
            "Collective bound: collectives take {}% of the step time on average. Overlap them with compute (async collectives), reduce their size, or change the sharding.",
            one_digit(collective)), json!({"avg_collective_percent_of_step": collective})));
    }
    if data_shuffle >= DATA_SHUFFLE_BOUND {
        out.push(xprof_rule("DataShuffleBoundRule", format!(
            "Data shuffle bound: data movement ops (gather, scatter, slice, concatenate, pad, ...) take {}% of the step time on average. Fuse or eliminate them, or change layouts.",
            one_digit(data_shuffle)), json!({"avg_data_shuffle_percent_of_step": data_shuffle})));
    }
    if let Some(p) = sig
        .barrier_cores
        .as_ref()
        .and_then(EventFractions::avg_percent)
        && p >= SPECIAL_OP_BOUND
    {
        let hosts = sig.barrier_cores.as_ref().unwrap().per_host_percent();
        out.push(xprof_rule("BarrierCoresRule", format!(
            "Barrier bound: TPU `barrier-cores` takes {}% of the step time on average — cores wait for each other. Balance the work across cores and hosts (look for stragglers among the per-host shares) and avoid unnecessary synchronisation.",
            one_digit(p)), json!({"avg_barrier_cores_percent_of_step": p, "per_host_percent": hosts})));
    }
    if let Some(f) = &sig.debug_print {
        let hosts: Vec<(String, f64)> = f
            .per_host_percent()
            .into_iter()
            .filter(|(_, p)| *p >= DEBUG_PRINT_BOUND)
            .collect();
        if let Some(max) = hosts.iter().map(|x| x.1).reduce(f64::max) {
            out.push(xprof_rule("DebugPrintRule", format!(
                "Debug printing: `debug_print` events take up to {}% of the step time on some hosts. Remove jax.debug.print / host callbacks from the hot loop.",
                one_digit(max)), json!({"per_host_percent": hosts})));
        }
    }
    // Ours: compilation in the steady state, which XProf's step breakdown counts as host
    // compute.
    if let Some(c) = &sig.compilations
        && let Some(p) = c.later_percent()
        && c.later_steps_with_compile > 0
        && p >= RECOMPILE_BOUND
    {
        out.push(our_rule("RecompilationRule", format!(
            "Recompilation: XLA compiled {} times during the profile, inside {} of the {} steps after the first, and compilation takes {}% of their step time. A program that recompiles after its first step sees new input shapes or dtypes (a varying batch or sequence length), Python values where arrays are expected (JAX: mark them static or pass arrays), or (PyTorch/XLA) a graph that changes from step to step. Pad inputs to a few fixed shapes and warm up every shape before the measured steps.",
            c.count, c.later_steps_with_compile, c.steps.saturating_sub(1), one_digit(p)), c.to_json()));
    }
    // Ours: async collectives and copies the device waits for (analyze_async_overlap).
    let mut exposed_async_fired = false;
    if let Some(a) = &sig.async_exposure
        && let Some(p) = a.exposed_percent()
        && p >= EXPOSED_ASYNC_BOUND
    {
        let top: Vec<String> = a
            .by_op
            .iter()
            .filter(|(_, ps)| *ps > 0)
            .take(3)
            .map(|(k, ps)| format!("{k} {:.3} ms", *ps as f64 / 1e9))
            .collect();
        let how = if a.gpu {
            "Give the collectives independent compute to overlap with (XLA's latency-hiding scheduler, `--xla_gpu_enable_latency_hiding_scheduler=true`), combine small collectives, or shrink them (sharding, lower precision)."
        } else {
            "Give them independent compute to overlap with (XLA's latency-hiding scheduler places async starts early and dones late), combine small collectives, or shrink them (sharding, lower precision)."
        };
        out.push(our_rule("ExposedAsyncRule", format!(
            "Exposed async ops: {} async windows (collectives, copies, send/recv) leave {}% of the device time uncovered by compute ({}). {how} See analyze_async_overlap for each window.",
            a.windows, one_digit(p), top.join(", ")), a.to_json()));
        exposed_async_fired = true;
    }
    // Ours: the same compute/memory classification on measured utilisation, since XProf's
    // open-source overview passes 0 for both.
    if let (Some(f), Some(h)) = (sig.measured_flops_percent, sig.measured_hbm_percent) {
        let cites =
            json!({"measured_flop_rate_percent_of_peak": f, "measured_hbm_bw_percent_of_peak": h});
        if f > MXU_HIGH && h < HBM_LOW {
            out.push(our_rule("MeasuredComputeBoundRule", format!(
                "Compute bound (measured): the device runs at {}% of its peak FLOP rate while using {}% of its HBM bandwidth. Reduce FLOPs or raise MXU efficiency of the top ops.",
                one_digit(f), one_digit(h)), cites));
        } else if h > HBM_HIGH && f < MXU_LOW {
            out.push(our_rule("MeasuredMemoryBoundRule", format!(
                "Memory bound (measured): HBM bandwidth at {}% of peak while the FLOP rate is {}% of peak. Fuse memory-bound ops and cut bytes moved.",
                one_digit(h), one_digit(f)), cites));
        } else if f < MXU_LOW && h < HBM_LOW && !exposed_async_fired {
            // Not beside ExposedAsync: the device then waits on its async copies and
            // collectives, and "look for idle time, small ops" would point elsewhere.
            out.push(our_rule("MeasuredLatencyBoundRule", format!(
                "Neither compute nor memory bound (measured): {}% of peak FLOP rate, {}% of peak HBM bandwidth over the profile. Look for idle time, small ops and host overhead (get_overview, get_input_pipeline).",
                one_digit(f), one_digit(h)), cites));
        }
    }
    json!({
        "suggestions": out,
        "signals": signals_json(sig),
        "rules_not_evaluated": [
            {"rule": "SparseCoreBoundRule", "reason": "needs SparseCore step breakdowns, which the engine does not build"},
            {"rule": "SparseCoreOffloadRule", "reason": "needs SparseCore step breakdowns, which the engine does not build"},
        ],
    })
}

fn signals_json(sig: &Signals) -> Value {
    let mut m = Map::new();
    m.insert("hardware_type".into(), json!(sig.hardware_type));
    m.insert("steps".into(), json!(sig.steps));
    // XProf's rules read these from its overview, where the open-source build prints 0 unless
    // the capture carries the host-plane utilisation stats: placeholders, with our measures.
    if sig.xprof_mxu_from_stat {
        m.insert(
            "mxu_utilization_percent".into(),
            json!(sig.xprof_mxu_percent),
        );
    } else {
        m.insert("mxu_utilization_percent".into(), Value::Null);
        m.insert(
            "mxu_utilization_percent_reason".into(),
            json!("no matrix_unit_utilization_percent stat on /host:CPU: XProf's rules see 0; *_measured is the FLOP rate as % of the device's peak"),
        );
        m.insert(
            "mxu_utilization_percent_measured".into(),
            json!(sig.measured_flops_percent),
        );
    }
    m.insert("hbm_utilization_percent".into(), Value::Null);
    m.insert(
        "hbm_utilization_percent_reason".into(),
        json!("XProf's open-source overview passes no hardware limits, so its rules see 0; *_measured is the HBM bandwidth as % of the device's peak"),
    );
    m.insert(
        "hbm_utilization_percent_measured".into(),
        json!(sig.measured_hbm_percent),
    );
    m.insert(
        "measured_flop_rate_percent_of_peak".into(),
        json!(sig.measured_flops_percent),
    );
    m.insert(
        "measured_hbm_bw_percent_of_peak".into(),
        json!(sig.measured_hbm_percent),
    );
    m.insert(
        "input_percent_of_step_time".into(),
        json!(sig.input_percent),
    );
    for (key, value, reason) in [
        (
            "enqueue_percent_of_input",
            sig.enqueue_percent_of_input,
            NO_INPUT_TIME,
        ),
        (
            "non_enqueue_percent_of_input",
            sig.non_enqueue_percent_of_input,
            NO_INPUT_TIME,
        ),
    ] {
        insert_or_reason(&mut m, key, value, reason);
    }
    match sig.tc_idle_percent {
        Some(v) => {
            m.insert("tensor_core_idle_percent".into(), json!(v));
        }
        None => {
            m.insert("tensor_core_idle_percent".into(), Value::Null);
            m.insert(
                "tensor_core_idle_percent_reason".into(),
                json!("not a TPU capture: there is no TensorCore step breakdown"),
            );
        }
    }
    for (key, value) in [
        ("avg_collective_percent_of_step", sig.collective_percent),
        ("avg_data_shuffle_percent_of_step", sig.data_shuffle_percent),
    ] {
        insert_or_reason(&mut m, key, value, NO_CORE_STEP_TIME);
    }
    if let Some(c) = &sig.compilations {
        m.insert("compilations".into(), c.to_json());
    }
    if let Some(a) = &sig.async_exposure {
        m.insert("async_ops".into(), a.to_json());
    }
    for (k, f) in [
        ("barrier_cores", &sig.barrier_cores),
        ("debug_print", &sig.debug_print),
    ] {
        if let Some(f) = f {
            m.insert(format!("avg_{k}_percent_of_step"), json!(f.avg_percent()));
            m.insert(format!("{k}_percent_per_host"), json!(f.per_host_percent()));
        }
    }
    Value::Object(m)
}

const NO_INPUT_TIME: &str =
    "the steps spend no time on input, so there is no input time to divide (XProf's rules see 0)";
const NO_CORE_STEP_TIME: &str = "no step has op time by category: XProf builds it only for TPU \
     steps (CPU and GPU steps carry time by event type), so there is nothing to take a share of \
     (XProf's rules see 0)";

/// `key: value`, or `key: null` with `key_reason` when there is no value.
fn insert_or_reason(m: &mut Map<String, Value>, key: &str, value: Option<f64>, reason: &str) {
    match value {
        Some(v) => {
            m.insert(key.into(), json!(v));
        }
        None => placeholder(m, key, reason, None),
    }
}

/// Host-boundness verdict in the shape of XProf's CLI `check_host_boundness`: host bound when
/// the device is idle > 10 % of the time, its MXU idle > 70 %, HBM bandwidth < 30 % and ICI
/// < 30 %. `ici_percent` comes from the utilization viewer's counters when the capture has them.
pub fn host_boundness(s: &OpStats, ip: &InputPipeline, ici_percent: Option<(f64, f64)>) -> Value {
    let b = &ip.bottleneck;
    if b.steps == 0 || b.step_time_ms_avg == 0.0 {
        let no_steps = s
            .steps
            .no_steps
            .filter(|_| s.steps.steps.is_empty())
            .unwrap_or(xprof_opstats::steps::NoSteps::NoMarkers);
        let why = format!(
            "{}; so there is no step time to judge host boundness by.",
            no_steps.reason()
        );
        return json!({
            "status": "INSUFFICIENT_DATA",
            "reasons": [why],
            "recommendations": [no_steps.advice()],
        });
    }
    let sig = signals(s, ip);
    let device = s.run_env.hardware_type != HardwareType::CpuOnly;
    let busy = s.duty_busy_ps as f64;
    let idle = s.duty_idle_ps as f64;
    let duty = if busy + idle > 0.0 {
        Some(100.0 * busy / (busy + idle))
    } else {
        None
    };
    let cores = s.run_env.device_core_count.max(if device { 1 } else { 0 });
    let total_ms: f64 = s
        .steps
        .complete_steps
        .iter()
        .map(|st| st.duration_ps() as f64 / 1e9)
        .sum();
    let mut m = Map::new();
    let mut reasons_missing = Vec::new();
    let no_dev = "CPU-only capture: there is no accelerator to measure";
    insert_or_reason(
        &mut m,
        "tpu_duty_cycle_percent",
        duty,
        if device {
            "the device planes carry no op timeline to measure a duty cycle"
        } else {
            no_dev
        },
    );
    // A device without an op timeline (e.g. a GPU capture whose kernels no XLA op groups) is
    // not a CPU-only capture: say which it is (XProf prints 100 % idle for both).
    let no_idle = if device {
        "the device planes carry no op timeline to measure idle time (XProf prints 100 % idle)"
    } else {
        no_dev
    };
    let idle_ratio = duty.map(|d| 100.0 - d);
    insert_or_reason(&mut m, "idle_time_ratio_percent", idle_ratio, no_idle);
    insert_or_reason(
        &mut m,
        "idle_to_active_compute_ratio",
        duty.map(|_| safe_div(idle, busy)),
        no_idle,
    );
    insert_or_reason(
        &mut m,
        "equivalent_idle_chips",
        idle_ratio.map(|r| r / 100.0 * cores as f64),
        no_idle,
    );
    let mxu_idle = sig.measured_flops_percent.map(|f| (100.0 - f).max(0.0));
    insert_or_reason(
        &mut m,
        "mxu_idleness_percent",
        mxu_idle,
        if device {
            "the device has no peak FLOP rate stat"
        } else {
            no_dev
        },
    );
    insert_or_reason(
        &mut m,
        "hbm_bandwidth_utilization_percent",
        sig.measured_hbm_percent,
        if device {
            "the device has no peak HBM bandwidth stat"
        } else {
            no_dev
        },
    );
    let ici_why = "no ICI counters (utilization viewer) in this capture";
    insert_or_reason(
        &mut m,
        "ici_read_utilization_percent",
        ici_percent.map(|x| x.0),
        ici_why,
    );
    insert_or_reason(
        &mut m,
        "ici_write_utilization_percent",
        ici_percent.map(|x| x.1),
        ici_why,
    );
    insert_or_reason(
        &mut m,
        "pure_idle_time_ms",
        idle_ratio.map(|r| r / 100.0 * total_ms),
        no_idle,
    );
    m.insert("total_duration_ms".into(), json!(total_ms));
    m.insert("number_of_steps".into(), json!(b.steps));
    m.insert("core_count".into(), json!(cores));
    // The gate.
    let mut failed = Vec::new();
    let mut passed = Vec::new();
    let mut check = |name: &str, v: Option<f64>, ok: fn(f64) -> bool, cond: &str| match v {
        None => reasons_missing.push(format!("- {name} is unknown ({cond} cannot be checked).")),
        Some(x) if ok(x) => passed.push(format!("- {name} ({}%) {cond}.", one_digit(x))),
        Some(x) => failed.push(format!(
            "- {name} ({}%) does not satisfy {cond}.",
            one_digit(x)
        )),
    };
    check("Idle time ratio", idle_ratio, |x| x > 10.0, "> 10%");
    check("MXU idleness", mxu_idle, |x| x > 70.0, "> 70%");
    check(
        "HBM bandwidth utilization",
        sig.measured_hbm_percent,
        |x| x < 30.0,
        "< 30%",
    );
    let ici_max = ici_percent.map(|(r, w)| r.max(w));
    check("ICI utilization", ici_max, |x| x < 30.0, "< 30%");
    let (status, mut reasons, recs): (&str, Vec<String>, Vec<&str>) = if !failed.is_empty() {
        let mut r = vec![
            "Workload is not host-bound. One or more host-bound condition thresholds were not met:"
                .to_string(),
        ];
        r.extend(failed);
        ("NOT_HOST_BOUND", r, vec![])
    } else if !device {
        let mut r = vec!["Host boundness does not apply to a CPU-only capture: no accelerator waits on the host, which does all the work:".to_string()];
        r.extend(passed);
        r.extend(reasons_missing.clone());
        (
            "UNKNOWN",
            r,
            vec![
                "See get_input_pipeline for the split of the host's step time (input, host compute, all others) and get_framework_op_stats / get_top_hlo_ops for its ops.",
            ],
        )
    } else if !reasons_missing.is_empty() {
        let mut r = vec!["Host boundness cannot be decided: the conditions that could be checked hold, but some signals are missing:".to_string()];
        r.extend(passed);
        r.extend(reasons_missing.clone());
        ("UNKNOWN", r, vec![])
    } else {
        let mut r = vec!["Workload is host-bound: the device is mostly idle while compute, memory and interconnect are lightly used:".to_string()];
        r.extend(passed);
        (
            "HOST_BOUND",
            r,
            vec![
                "Reduce host work between device steps: run several steps per call, prefetch input, avoid host synchronisation (block_until_ready, .item()) inside the loop.",
                "Check get_input_pipeline for input stalls and get_overview for the idle share.",
            ],
        )
    };
    if status == "NOT_HOST_BOUND" && !reasons_missing.is_empty() {
        reasons.extend(reasons_missing);
    }
    json!({"status": status, "metrics": m, "reasons": reasons, "recommendations": recs})
}

/// XProf's event-time-fraction analysis (`xspace_to_event_time_fraction_analyzer.cc`) of one
/// event name: per step, the device time of events whose name contains `target` as a fraction
/// of the step, per TPU core and averaged per host.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventFractions {
    /// Plane name → one fraction per kept step.
    pub per_chip: std::collections::BTreeMap<String, Vec<f32>>,
    /// Hostname → per kept step, the average over its cores.
    pub per_host: Vec<(String, Vec<f64>)>,
}

impl EventFractions {
    /// XProf `GetAvgEventTimePercent`: the mean of every core's step fractions, in %.
    pub fn avg_percent(&self) -> Option<f64> {
        let all: Vec<f64> = self
            .per_chip
            .values()
            .flatten()
            .map(|x| *x as f64)
            .collect();
        (!all.is_empty()).then(|| 100.0 * all.iter().sum::<f64>() / all.len() as f64)
    }

    /// XProf `GetPerHostAvgEventTimePercent`.
    pub fn per_host_percent(&self) -> Vec<(String, f64)> {
        self.per_host
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(h, v)| (h.clone(), 100.0 * v.iter().sum::<f64>() / v.len() as f64))
            .collect()
    }
}

pub fn event_time_fractions(run: &crate::LoadedRun, target: &str) -> EventFractions {
    use std::collections::{BTreeMap, BTreeSet};
    use xprof_opstats::device::{device_span, is_op_line, is_tpu_tensor_core_plane};
    use xprof_opstats::model::StatKey;
    let mut out = EventFractions::default();
    for h in &run.hosts {
        // step → plane → fraction; step → duration.
        let mut fr: BTreeMap<i64, BTreeMap<String, f64>> = BTreeMap::new();
        let mut step_dur: BTreeMap<i64, u64> = BTreeMap::new();
        for plane in h
            .model
            .planes
            .iter()
            .filter(|p| is_tpu_tensor_core_plane(&p.name))
        {
            // Steps: markers on the Steps line (longest per group) that also have op events.
            let mut markers: BTreeMap<i64, i64> = BTreeMap::new();
            let mut op_groups: BTreeSet<i64> = BTreeSet::new();
            for line in &plane.lines {
                if line.name == "Steps" {
                    for e in &line.events {
                        if let Some(g) = e.stats.i64(StatKey::GroupId) {
                            let d = device_span(e).1;
                            let m = markers.entry(g).or_default();
                            *m = (*m).max(d);
                        }
                    }
                } else if is_op_line(&line.name) {
                    op_groups.extend(
                        line.events
                            .iter()
                            .filter_map(|e| e.stats.i64(StatKey::GroupId)),
                    );
                }
            }
            for line in &plane.lines {
                for e in &line.events {
                    if !plane.meta(e).name.contains(target) {
                        continue;
                    }
                    let Some(g) = e.stats.i64(StatKey::GroupId) else {
                        continue;
                    };
                    let Some(&sd) = markers.get(&g).filter(|_| op_groups.contains(&g)) else {
                        continue;
                    };
                    if sd <= 0 {
                        continue;
                    }
                    let Some(d) = e.stats.u64(StatKey::DeviceDurationPs) else {
                        continue;
                    };
                    // XProf skips barrier-cores' dummy durations (0 and 1.25 ns).
                    if target == "barrier-cores" && (d == 0 || d == 1250) {
                        continue;
                    }
                    *fr.entry(g)
                        .or_default()
                        .entry(plane.name.clone())
                        .or_default() += (d as f64 / sd as f64) as f32 as f64;
                    step_dur.insert(g, sd as u64);
                }
            }
        }
        // Incomplete steps: with ≥ 3 steps drop the first and last; with 2, drop one that is
        // under 1 % of the other.
        if fr.len() >= 3 {
            let first = *fr.keys().next().unwrap();
            let last = *fr.keys().next_back().unwrap();
            fr.remove(&first);
            fr.remove(&last);
        } else if fr.len() == 2 {
            let ks: Vec<i64> = fr.keys().copied().collect();
            let (d1, d2) = (step_dur[&ks[0]] as f64, step_dur[&ks[1]] as f64);
            if d2 < 0.01 * d1 {
                fr.remove(&ks[1]);
            } else if d1 < 0.01 * d2 {
                fr.remove(&ks[0]);
            }
        }
        let mut host = Vec::new();
        for planes in fr.values() {
            for (p, f) in planes {
                out.per_chip.entry(p.clone()).or_default().push(*f as f32);
            }
            if !planes.is_empty() {
                host.push(planes.values().sum::<f64>() / planes.len() as f64);
            }
        }
        out.per_host.push((h.model.hostname.clone(), host));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overlap::AsyncExposure;

    fn rules(sig: &Signals) -> Vec<String> {
        smart_suggestions(sig)["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["ruleName"].as_str().unwrap().to_string())
            .collect()
    }

    fn waiting_on_copies(exposed_union_ps: i64, exposed_ps: i64) -> AsyncExposure {
        AsyncExposure {
            windows: 40,
            span_ps: exposed_ps,
            exposed_ps,
            exposed_union_ps,
            device_time_ps: 1_000_000,
            by_op: vec![("copy".into(), exposed_ps)],
            gpu: false,
        }
    }

    fn idle_device() -> Signals {
        Signals {
            measured_flops_percent: Some(0.5),
            measured_hbm_percent: Some(1.0),
            ..Signals::default()
        }
    }

    /// Issue 33: on a TPU inference capture the async rule said copies "leave 302.3 % of the
    /// device time uncovered" (the sum of overlapping windows), and "look for idle time, small
    /// ops" stood beside copy-done taking 83.5 % of the device time.
    #[test]
    fn exposed_async_cites_the_union_and_the_latency_rule_does_not_contradict_it() {
        let mut sig = idle_device();
        sig.async_exposure = Some(waiting_on_copies(835_000, 3_023_000));
        let out = smart_suggestions(&sig);
        let names = rules(&sig);
        assert_eq!(names, ["ExposedAsyncRule"], "{out}");
        let text = out["suggestions"][0]["suggestionText"].as_str().unwrap();
        assert!(text.contains("leave 83.5% of the device time"), "{text}");
    }

    #[test]
    fn the_latency_rule_fires_on_an_idle_device_without_exposed_async_ops() {
        assert_eq!(rules(&idle_device()), ["MeasuredLatencyBoundRule"]);
        let mut sig = idle_device();
        // Async ops hidden behind compute: below the bound, so the latency rule stands.
        sig.async_exposure = Some(waiting_on_copies(10_000, 10_000));
        assert_eq!(rules(&sig), ["MeasuredLatencyBoundRule"]);
    }
}
