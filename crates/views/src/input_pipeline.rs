//! input_pipeline_analyzer (XProf `op_stats_to_input_pipeline_analysis.cc`): five tables —
//! max-infeed core (TPU), step-time breakdown with the bottleneck conclusion, host input ops,
//! recommendations, diagnostics.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use xprof_opstats::OpStats;
use xprof_opstats::format::{one_digit, two_digits};
use xprof_opstats::metrics::OpMetrics;
use xprof_opstats::opstats::HardwareType;
use xprof_opstats::steps::Step;

use crate::load::CoreDetails;
use crate::pod::step_warning;
use crate::table::{Table, ps_to_ms, ps_to_us, safe_div, summarize};

const HIGHLY_INFEED: f64 = 20.0;
const MODERATELY_INFEED: f64 = 5.0;
const HIGHLY_OUTFEED: f64 = 20.0;
const MODERATELY_OUTFEED: f64 = 5.0;
const HIGHLY_KERNEL_LAUNCH: f64 = 15.0;
const MODERATELY_KERNEL_LAUNCH: f64 = 3.0;
const HIGHLY_ALL_OTHER: f64 = 15.0;
const MODERATELY_ALL_OTHER: f64 = 3.0;
const HIGHLY_COLLECTIVES: f64 = 15.0;
const MODERATELY_COLLECTIVES: f64 = 3.0;
const TC_IDLE_THRESHOLD: f64 = 3.0;

const NO_STEP_TIME: &str =
    "No step time measured. Therefore we cannot tell where the performance bottleneck is.";
const ALL_OTHERS_PYTHON: &str = " % of the total step time sampled is spent on 'All Others' time. This could be due to Python execution overhead.";
const KERNEL_LAUNCH_TFDATA: &str = " It could be due to CPU contention with tf.data. In this case, you may try to set the environment variable TF_GPU_THREAD_MODE=gpu_private.";
const MULTIPLE_STEPS_DOC: &str = "https://www.tensorflow.org/guide/tpu#improving_performance_by_multiple_steps_within_tffunction";

/// The recommendation table's fixed tf.data tips (XProf `GenerateRecommendation`).
fn recommendations() -> Vec<String> {
    let topic = "https://www.tensorflow.org/api_docs/python/tf/data/Dataset#";
    let tfrecord =
        "https://www.tensorflow.org/api_docs/python/tf/data/TFRecordDataset#class_tfrecorddataset";
    let a = |href: &str, text: &str| format!("<a href=\"{href}\" target=\"_blank\">{text}</a>");
    vec![
        "Enqueuing data: you may want to combine small input data chunks into fewer but larger chunks.".into(),
        format!("Data preprocessing: you may increase num_parallel_calls in {} or preprocess the data OFFLINE.", a(&format!("{topic}map"), "Dataset map()")),
        format!("Reading data from files in advance: you may tune parameters in the following tf.data API ({}, {}, {})",
            a(&format!("{topic}prefetch"), "prefetch size"), a(&format!("{topic}interleave"), "interleave cycle_length"), a(tfrecord, "reader buffer_size")),
        format!("Reading data from files on demand: you should read data IN ADVANCE using the following tf.data API ({}, {}, {})",
            a(&format!("{topic}prefetch"), "prefetch"), a(&format!("{topic}interleave"), "interleave"), a(tfrecord, "reader buffer")),
        format!("Other data reading or processing: you may consider using the {} (if you are not using it now)",
            a("https://www.tensorflow.org/programmers_guide/datasets", "tf.data API")),
    ]
}

/// The numbers other views (smart suggestions, host boundness) take from this analysis.
#[derive(Clone, Debug, Default)]
pub struct Bottleneck {
    /// Steps analysed.
    pub steps: usize,
    pub input_percent: f64,
    pub output_percent: f64,
    pub idle_percent: f64,
    pub compute_percent: f64,
    /// Non-TPU: host compute as % of the step time (XProf counts it in `idle_percent`).
    pub host_compute_percent: f64,
    pub all_other_percent: f64,
    pub kernel_launch_percent: f64,
    pub device_collectives_percent: f64,
    pub input_classification: String,
    pub input_statement: String,
    pub step_time_ms_avg: f64,
    /// TPU: average TensorCore idle time per step (ms).
    pub tc_idle_ms_avg: f64,
    /// TPU: XProf's statement on TensorCore idle time (empty below its 3 % threshold).
    pub tc_idle_statement: String,
    pub enqueue_us: f64,
    pub non_enqueue_us: f64,
}

pub struct InputPipeline {
    /// `[max_infeed_core, step_table, host_ops, recommendation, diagnostics]`.
    pub tables: Vec<Table>,
    pub hardware_type: HardwareType,
    pub bottleneck: Bottleneck,
}

#[derive(Default, Clone, Copy)]
struct InputTimes {
    enqueue_us: f64,
    demanded_us: f64,
    advanced_us: f64,
    preprocessing_us: f64,
    unclassified_us: f64,
}

impl InputTimes {
    fn tf_data_in_use(&self) -> bool {
        self.demanded_us > 0.0 || self.advanced_us > 0.0 || self.preprocessing_us > 0.0
    }
}

fn input_analysis(input_pct: f64, all_other_pct: f64) -> (String, String, bool) {
    if input_pct >= HIGHLY_INFEED {
        (
            "host".into(),
            format!(
                "Your program is HIGHLY input-bound because {}% of the total step time sampled is waiting for input. Therefore, you should first focus on reducing the input time.",
                one_digit(input_pct)
            ),
            false,
        )
    } else if input_pct >= MODERATELY_INFEED {
        (
            "both".into(),
            format!(
                "Your program is MODERATELY input-bound because {}% of the total step time sampled is waiting for input. Therefore, you would need to reduce both the input time and other time.",
                one_digit(input_pct)
            ),
            false,
        )
    } else if all_other_pct >= MODERATELY_ALL_OTHER {
        (
            "both".into(),
            format!(
                "Your program is POTENTIALLY input-bound because {}% of the total step time sampled is spent on 'All Others' time (which could be due to I/O or Python execution or both).",
                one_digit(all_other_pct)
            ),
            true,
        )
    } else {
        (
            "device".into(),
            format!(
                "Your program is NOT input-bound because only {}% of the total step time sampled is waiting for input. Therefore, you should focus on reducing other time.",
                one_digit(input_pct)
            ),
            false,
        )
    }
}

fn output_statement(output_pct: f64) -> String {
    if output_pct >= HIGHLY_OUTFEED {
        format!(
            "Your program is HIGHLY output-bound because {}% of the total step time sampled is spent on output. Therefore, you should first focus on reducing the output time.",
            one_digit(output_pct)
        )
    } else if output_pct >= MODERATELY_OUTFEED {
        format!(
            "Your program is MODERATELY output-bound because {}% of the total step time sampled is spent on output. Therefore, you would need to reduce both the output time and other time.",
            one_digit(output_pct)
        )
    } else {
        String::new()
    }
}

fn graded(pct: f64, high: f64, moderate: f64, text: impl Fn() -> String) -> String {
    if pct >= high || pct >= moderate {
        text()
    } else {
        String::new()
    }
}

fn summary_next_step(classification: &str, t: &InputTimes) -> String {
    if classification == "host" || classification == "both" {
        if !t.tf_data_in_use() {
            "Consider using <a href=\"https://www.tensorflow.org/guide/data\" target=\"_blank\">the tf.data API</a> to enable profiler's host-side analysis for input pipeline. Profiler currently does not support custom input pipeline (please ignore Section 3 below).".into()
        } else {
            "Look at Section 3 for the breakdown of input time on the host.".into()
        }
    } else {
        "You may skip the rest of this page.".into()
    }
}

/// XProf input-op categories of host framework ops.
fn input_category(m: &OpMetrics) -> Option<&'static str> {
    // The engine stores "Unknown" where XProf keeps the parsed type "" (see framework.rs).
    let cat = match m.category.as_str() {
        "Unknown" => "",
        c => c,
    };
    let lower = cat.to_ascii_lowercase();
    match lower.as_str() {
        "enqueue" => return Some("Enqueue"),
        "read" => return Some("Demanded file read"),
        "preprocessing" => return Some("Preprocessing"),
        "unknown" => return Some("Unknown"),
        _ => {}
    }
    if cat.starts_with("InfeedEnqueue") || cat == "MemcpyHToD" {
        return Some("Enqueue");
    }
    if cat != "Dataset" {
        return None;
    }
    let n = m.name.as_str();
    let file_read = [
        "::TFRecord",
        "::TextLine",
        "::FixedLengthRecord",
        "::SSTable",
        "::RecordIO",
        "::ArrayRecord",
    ]
    .iter()
    .any(|s| n.ends_with(s));
    Some(if file_read {
        if [
            "::MemoryReader",
            "::MemoryWriter",
            "::Interleave",
            "::Prefetch",
            "::ParallelMap",
        ]
        .iter()
        .any(|s| n.contains(s))
        {
            "Advanced file read"
        } else {
            "Demanded file read"
        }
    } else {
        "Preprocessing"
    })
}

/// XProf `GenerateHostResult`. `h2d_ratio` = host-to-device time / step time.
fn host_table(s: &OpStats, h2d_ratio: f64) -> (Table, InputTimes) {
    let mut t = Table::new(&[
        "opName",
        "count",
        "timeInMs",
        "timeInPercent",
        "selfTimeInMs",
        "selfTimeInPercent",
        "category",
    ]);
    let mut ops: Vec<(&OpMetrics, &'static str)> = s
        .host_db
        .metrics
        .iter()
        .filter_map(|m| input_category(m).map(|c| (m, c)))
        .collect();
    ops.sort_by(|(a, _), (b, _)| {
        b.self_time_ps
            .cmp(&a.self_time_ps)
            .then_with(|| a.name.cmp(&b.name))
    });
    let total: u64 = ops.iter().map(|(m, _)| m.self_time_ps).sum();
    let mut by_cat: BTreeMap<&str, f64> = BTreeMap::new();
    for (m, c) in &ops {
        let mut r = serde_json::Map::new();
        r.insert("opName".into(), json!(m.name));
        r.insert("count".into(), json!(m.occurrences));
        r.insert("timeInMs".into(), json!(ps_to_ms(m.time_ps)));
        r.insert(
            "timeInPercent".into(),
            json!(safe_div(m.time_ps as f64, total as f64)),
        );
        r.insert("selfTimeInMs".into(), json!(ps_to_ms(m.self_time_ps)));
        r.insert(
            "selfTimeInPercent".into(),
            json!(safe_div(m.self_time_ps as f64, total as f64)),
        );
        r.insert("category".into(), json!(c));
        r.insert("timePs".into(), json!(m.time_ps));
        r.insert("selfTimePs".into(), json!(m.self_time_ps));
        t.records.push(r);
        *by_cat.entry(c).or_default() += ps_to_us(m.self_time_ps);
    }
    let mut times = InputTimes::default();
    if !ops.is_empty() {
        let g = |k: &str| by_cat.get(k).copied().unwrap_or(0.0);
        times.enqueue_us = g("Enqueue");
        let total_input = g("Demanded file read") + g("Advanced file read") + g("Preprocessing");
        let ratio = h2d_ratio.min(1.0);
        let non_enqueue = if ratio != 0.0 {
            times.enqueue_us * (1.0 - ratio) / ratio
        } else {
            total_input
        };
        times.demanded_us = safe_div(non_enqueue * g("Demanded file read"), total_input);
        times.advanced_us = safe_div(non_enqueue * g("Advanced file read"), total_input);
        times.preprocessing_us = safe_div(non_enqueue * g("Preprocessing"), total_input);
        times.unclassified_us =
            (non_enqueue - times.demanded_us - times.advanced_us - times.preprocessing_us).max(0.0);
    }
    t.prop("advanced_file_read_us", format!("{:.3}", times.advanced_us));
    t.prop("demanded_file_read_us", format!("{:.3}", times.demanded_us));
    t.prop("enqueue_us", format!("{:.3}", times.enqueue_us));
    t.prop("preprocessing_us", format!("{:.3}", times.preprocessing_us));
    t.prop(
        "unclassified_nonequeue_us",
        format!("{:.3}", times.unclassified_us),
    );
    (t, times)
}

/// Generic per-step details (ms), XProf `PerGenericStepDetails`.
struct GenericStep {
    name: String,
    step_ms: f64,
    /// [device compute, d2d, collectives, host compute, kernel launch, input, output, compile,
    /// all others] in ms.
    c: [f64; 9],
    /// The host-to-device part of the input time, ms.
    host_to_device_ms: f64,
}

/// `named`: XProf names a step after its host root only when the steps come from the host;
/// with a GPU they come from the device and go by number.
fn generic_steps(steps: &[Step], named: bool) -> Vec<GenericStep> {
    steps
        .iter()
        .filter_map(|s| {
            // Host-only and GPU steps live on one core (the engine's core 0 of the first host).
            let cs = s.per_core.get(&0)?;
            Some(GenericStep {
                name: if s.name.is_empty() || !named {
                    s.step_num.to_string()
                } else {
                    s.name.clone()
                },
                step_ms: ps_to_ms(cs.duration_ps),
                c: cs.generic_ps.map(ps_to_ms),
                host_to_device_ms: ps_to_ms(cs.host_to_device_ps),
            })
        })
        .collect()
}

/// XProf's first SparseCore core id (`kSparseCoreIndexStart`): step times leave those out.
const SPARSE_CORE_INDEX_START: i64 = 1_000_000;

/// Step times as XProf summarizes them (`ComputeStepTimeSummaryInMs`): each step's slowest core,
/// over every core of every host, while the per-step rows read the first host's alone.
fn step_times_ms(steps: &[Step]) -> Vec<f64> {
    steps
        .iter()
        .map(|s| {
            s.per_core
                .iter()
                .filter(|(core, _)| **core < SPARSE_CORE_INDEX_START)
                .map(|(_, c)| ps_to_ms(c.duration_ps))
                .fold(0.0, f64::max)
        })
        .collect()
}

fn generic_table(
    s: &OpStats,
    steps: &[GenericStep],
    step_times_ms: &[f64],
    times: &InputTimes,
) -> (Table, Bottleneck) {
    let mut t = Table::new(&[
        "stepnum",
        "deviceComputeTimeMs",
        "deviceToDeviceTimeMs",
        "deviceCollectivesTimeMs",
        "hostComputeTimeMs",
        "kernelLaunchTimeMs",
        "infeedTimeMs",
        "outfeedTimeMs",
        "compileTimeMs",
        "otherTimeMs",
        "tooltip",
        "stepTimeMs",
    ]);
    let step_ms: Vec<f64> = steps.iter().map(|x| x.step_ms).collect();
    let st = summarize(step_times_ms);
    let col = |i: usize| summarize(&steps.iter().map(|x| x.c[i]).collect::<Vec<_>>());
    t.prop("step_time_graph_column_ids", "stepnum,deviceComputeTimeMs,deviceToDeviceTimeMs,deviceCollectivesTimeMs,hostComputeTimeMs,kernelLaunchTimeMs,infeedTimeMs,outfeedTimeMs,compileTimeMs,otherTimeMs, tooltip");
    t.prop("hardware_type", s.run_env.hardware_type.as_str());
    t.prop("steptime_ms_average", one_digit(st.average));
    t.prop(
        "steptime_ms_standard_deviation",
        one_digit(st.standard_deviation),
    );
    t.prop("steptime_ms_minimum", one_digit(st.minimum));
    t.prop("steptime_ms_maximum", one_digit(st.maximum));
    for (i, key) in [
        (0, "device_compute_time_ms"),
        (1, "device_to_device_time_ms"),
        (2, "device_collectives_time_ms"),
        (5, "infeed_time_ms"),
        (6, "outfeed_time_ms"),
        (3, "host_compute_time_ms"),
        (4, "kernel_launch_time_ms"),
        (7, "compile_time_ms"),
        (8, "other_time_ms"),
    ] {
        let c = col(i);
        t.prop(&format!("{key}_avg"), one_digit(c.average));
        t.prop(&format!("{key}_sdv"), one_digit(c.standard_deviation));
    }
    // Bottleneck (XProf `ComputeBottleneckAnalysis`).
    let total: f64 = step_ms.iter().sum();
    let sum = |i: usize| steps.iter().map(|x| x.c[i]).sum::<f64>();
    let mut b = Bottleneck {
        steps: steps.len(),
        step_time_ms_avg: st.average,
        enqueue_us: times.enqueue_us,
        non_enqueue_us: times.demanded_us
            + times.advanced_us
            + times.preprocessing_us
            + times.unclassified_us,
        ..Default::default()
    };
    let (collectives_stmt, launch_stmt, other_stmt);
    if total == 0.0 {
        b.input_classification = "unknown".into();
        b.input_statement = NO_STEP_TIME.into();
        collectives_stmt = String::new();
        launch_stmt = String::new();
        other_stmt = String::new();
    } else {
        let pct = |i: usize| 100.0 * sum(i) / total;
        b.input_percent = pct(5);
        b.output_percent = pct(6);
        b.compute_percent = pct(0);
        b.host_compute_percent = pct(3);
        b.device_collectives_percent = pct(2);
        b.idle_percent = (100.0
            - b.input_percent
            - b.output_percent
            - b.compute_percent
            - b.device_collectives_percent)
            .max(0.0);
        b.kernel_launch_percent = pct(4);
        b.all_other_percent = pct(8);
        let (c, stmt, all_other_reported) = input_analysis(b.input_percent, b.all_other_percent);
        b.input_classification = c;
        b.input_statement = stmt;
        let dc = b.device_collectives_percent;
        collectives_stmt = graded(dc, HIGHLY_COLLECTIVES, MODERATELY_COLLECTIVES, || {
            format!(
                "{} % of the total step time sampled is spent on 'Device Collective Communication'.",
                one_digit(dc)
            )
        });
        let kl = b.kernel_launch_percent;
        launch_stmt = graded(kl, HIGHLY_KERNEL_LAUNCH, MODERATELY_KERNEL_LAUNCH, || {
            let mut s = format!(
                "{} % of the total step time sampled is spent on 'Kernel Launch'.",
                one_digit(kl)
            );
            if times.tf_data_in_use() {
                s.push_str(KERNEL_LAUNCH_TFDATA);
            }
            s
        });
        let ao = b.all_other_percent;
        other_stmt = if all_other_reported {
            String::new()
        } else {
            graded(ao, HIGHLY_ALL_OTHER, MODERATELY_ALL_OTHER, || {
                format!("{}{ALL_OTHERS_PYTHON}", one_digit(ao))
            })
        };
    }
    t.prop("input_conclusion", b.input_statement.clone());
    t.prop("device_collectives_bottleneck", collectives_stmt.clone());
    t.prop("device_collectives_statement", collectives_stmt);
    t.prop("kernel_launch_bottleneck", launch_stmt.clone());
    t.prop("kernel_launch_statement", launch_stmt);
    t.prop("all_other_bottleneck", other_stmt.clone());
    t.prop("all_other_statement", other_stmt);
    t.prop(
        "summary_nextstep",
        summary_next_step(&b.input_classification, times),
    );
    for x in steps {
        let c = &x.c;
        let tooltip = format!(
            "Step {}, duration: {} ms\n-All others: {} ms\n-Compilation: {} ms\n-Output: {} ms\n-Input: {} ms\n-Kernel launch: {} ms\n-Host compute: {} ms\n-Device collectives: {} ms\n-Device to device: {} ms\n-Device compute: {} ms",
            x.name,
            two_digits(x.step_ms),
            two_digits(c[8]),
            two_digits(c[7]),
            two_digits(c[6]),
            two_digits(c[5]),
            two_digits(c[4]),
            two_digits(c[3]),
            two_digits(c[2]),
            two_digits(c[1]),
            two_digits(c[0])
        );
        let mut r = serde_json::Map::new();
        r.insert("stepnum".into(), json!(x.name));
        for (i, k) in [
            "deviceComputeTimeMs",
            "deviceToDeviceTimeMs",
            "deviceCollectivesTimeMs",
            "hostComputeTimeMs",
            "kernelLaunchTimeMs",
            "infeedTimeMs",
            "outfeedTimeMs",
            "compileTimeMs",
            "otherTimeMs",
        ]
        .iter()
        .enumerate()
        {
            r.insert((*k).into(), json!(c[i]));
        }
        r.insert("tooltip".into(), json!(tooltip));
        r.insert("stepTimeMs".into(), json!(x.step_ms));
        t.records.push(r);
    }
    (t, b)
}

/// One TPU step across cores (XProf `PerTpuStepDetails`, ms).
struct TpuStep {
    step_num: i64,
    /// Σ components + idle (XProf `StepTimeMs`).
    step_ms: f64,
    tc_compute_ms: f64,
    scv0_compute_ms: f64,
    tc_infeed_ms: f64,
    tc_outfeed_ms: f64,
    tc_idle_ms: f64,
    host_transfer_ms: f64,
    infeed_pct: (f64, f64, f64),
    max_infeed_core: String,
    /// Longest core's step (for the step-time summary).
    max_core_step_ms: f64,
}

/// A TensorCore's step breakdown from its HLO-category times (XProf
/// `ConvertGenericStepBreakdownToTpuStepBreakdown` over `ProfileTimeBreakdown`; category names
/// from `xla_op_utils.h`).
#[derive(Default)]
struct TpuBreakdown {
    infeed_ps: u64,
    host_outfeed_ps: u64,
    wait_for_scv0_ps: u64,
    host_send_recv_ps: u64,
    tc_idle_ps: u64,
}

fn tpu_breakdown(cats: &BTreeMap<String, u64>, step_ps: u64) -> TpuBreakdown {
    let cat = |k: &str| cats.get(k).copied().unwrap_or(0);
    // IDLE is inferred, not a category of the breakdown.
    let total: u64 = cats
        .iter()
        .filter(|(k, _)| k.as_str() != "IDLE")
        .map(|(_, v)| *v)
        .sum();
    // `BreakdownSparseCoreV0Infeed`: infeed from SparseCoreV0 minus the matching outfeed is
    // waiting; the rest is transform.
    let sc_infeed = cat("sparsecorev0 infeed");
    let transform = sc_infeed.min(cat("sparsecorev0 outfeed"));
    TpuBreakdown {
        infeed_ps: cat("infeed"),
        host_outfeed_ps: cat("outfeed"),
        wait_for_scv0_ps: sc_infeed - transform,
        host_send_recv_ps: cat("host send")
            + cat("host send-done")
            + cat("host recv")
            + cat("host recv-done"),
        tc_idle_ps: step_ps.saturating_sub(total),
    }
}

/// XProf `ComputeTpuPerStepDataAcrossCores` (without all-reduce breakdowns, which need the
/// collectives database the engine does not build: 0, as XProf has without it).
fn tpu_steps(steps: &[Step], cores: &BTreeMap<i64, CoreDetails>) -> Vec<TpuStep> {
    let ms = |ps: u64| ps as f64 / 1e9;
    let mut out = Vec::new();
    for s in steps {
        let mut durations = Vec::new();
        let mut outfeed = Vec::new();
        let mut optimal = Vec::new();
        let mut host_xfer = Vec::new();
        let mut infeed_pct = Vec::new();
        let mut max_infeed: (Option<i64>, u64) = (None, 0);
        let mut max_wait = 0u64;
        for (core, cs) in &s.per_core {
            if cores.get(core).is_some_and(|d| d.is_sparse_core) {
                continue;
            }
            let b = tpu_breakdown(&cs.category_ps, cs.duration_ps);
            durations.push(cs.duration_ps);
            max_wait = max_wait.max(b.wait_for_scv0_ps);
            outfeed.push(b.host_outfeed_ps);
            infeed_pct.push(100.0 * safe_div(b.infeed_ps as f64, cs.duration_ps as f64));
            // The optimal step: minus the time waiting for the host or SparseCoreV0.
            let wait = [
                b.infeed_ps,
                b.host_outfeed_ps,
                b.host_send_recv_ps,
                b.tc_idle_ps,
                b.wait_for_scv0_ps,
            ]
            .iter()
            .fold(0u64, |a, x| a.saturating_add(*x));
            optimal.push(cs.duration_ps.saturating_sub(wait));
            host_xfer.push(b.host_send_recv_ps);
            if b.infeed_ps > max_infeed.1 {
                max_infeed = (Some(*core), b.infeed_ps);
            }
        }
        if durations.is_empty() {
            continue;
        }
        let n = durations.len() as f64;
        let tc_outfeed_ms = ms(outfeed.iter().sum::<u64>()) / n;
        let tc_compute_ms = ms(*optimal.iter().min().unwrap_or(&0));
        let scv0_compute_ms = ms(max_wait);
        let tc_infeed_ms = ms(max_infeed.1);
        let non_idle = tc_compute_ms + scv0_compute_ms + tc_infeed_ms + tc_outfeed_ms;
        let min_step = ms(*durations.iter().min().unwrap_or(&0));
        let tc_idle_ms = (min_step - non_idle).max(0.0);
        out.push(TpuStep {
            step_num: s.step_num,
            step_ms: non_idle + tc_idle_ms,
            tc_compute_ms,
            scv0_compute_ms,
            tc_infeed_ms,
            tc_outfeed_ms,
            tc_idle_ms,
            host_transfer_ms: ms(*host_xfer.iter().max().unwrap_or(&0)),
            infeed_pct: (
                infeed_pct.iter().sum::<f64>() / n,
                infeed_pct.iter().copied().fold(f64::INFINITY, f64::min),
                infeed_pct.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ),
            max_infeed_core: max_infeed
                .0
                .and_then(|c| cores.get(&c))
                .map(|d| format!("{}:{}", d.hostname, d.device_ordinal))
                .unwrap_or_default(),
            max_core_step_ms: ms(*durations.iter().max().unwrap_or(&0)),
        });
    }
    out
}

fn tpu_table(s: &OpStats, steps: &[TpuStep], times: &InputTimes) -> (Table, Bottleneck) {
    let mut t = Table::new(&[
        "stepnum",
        "tcComputeTimeMs",
        "scv0ComputeTimeMs",
        "scv0InfeedTimeMs",
        "tcInfeedTimeMs",
        "tcOutfeedTimeMs",
        "tcIdleTimeMs",
        "hostTransferTimeMs",
        "tooltip",
        "infeedPercentAverage",
        "infeedPercentMin",
        "infeedPercentMax",
    ]);
    // Step time: the longest core of each step (XProf `ComputeStepTimeSummaryInMs`).
    let st = summarize(&steps.iter().map(|x| x.max_core_step_ms).collect::<Vec<_>>());
    let avg = |f: fn(&TpuStep) -> f64| summarize(&steps.iter().map(f).collect::<Vec<_>>()).average;
    let infeed = summarize(&steps.iter().map(|x| x.infeed_pct.2).collect::<Vec<_>>());
    t.prop(
        "active_steptime_ms_average",
        two_digits(avg(|x| x.step_ms - x.tc_idle_ms)),
    );
    t.prop("hardware_type", s.run_env.hardware_type.as_str());
    t.prop(
        "host_transfer_ms_average",
        two_digits(avg(|x| x.host_transfer_ms)),
    );
    t.prop("infeed_percent_average", one_digit(infeed.average));
    t.prop("infeed_percent_maximum", one_digit(infeed.maximum));
    t.prop("infeed_percent_minimum", one_digit(infeed.minimum));
    t.prop(
        "infeed_percent_standard_deviation",
        one_digit(infeed.standard_deviation),
    );
    t.prop(
        "scv0_compute_ms_average",
        two_digits(avg(|x| x.scv0_compute_ms)),
    );
    t.prop("scv0_infeed_ms_average", two_digits(0.0));
    t.prop("step_time_graph_column_ids", "stepnum,tcComputeTimeMs,scv0ComputeTimeMs,scv0InfeedTimeMs,tcInfeedTimeMs,tcOutfeedTimeMs,tcIdleTimeMs,hostTransferTimeMs,tooltip");
    t.prop("steptime_ms_average", two_digits(st.average));
    t.prop("steptime_ms_maximum", two_digits(st.maximum));
    t.prop("steptime_ms_minimum", two_digits(st.minimum));
    t.prop(
        "steptime_ms_standard_deviation",
        two_digits(st.standard_deviation),
    );
    t.prop(
        "tc_active_ms_average",
        two_digits(avg(|x| x.tc_compute_ms + x.tc_infeed_ms + x.tc_outfeed_ms)),
    );
    t.prop(
        "tc_compute_ms_average",
        two_digits(avg(|x| x.tc_compute_ms)),
    );
    t.prop("tc_idle_ms_average", two_digits(avg(|x| x.tc_idle_ms)));
    t.prop("tc_infeed_ms_average", two_digits(avg(|x| x.tc_infeed_ms)));
    t.prop(
        "tc_outfeed_ms_average",
        two_digits(avg(|x| x.tc_outfeed_ms)),
    );
    // XProf `ComputeTpuBottleneckAnalysis` (all cores profiled).
    let total: f64 = steps.iter().map(|x| x.step_ms).sum();
    let infeed_total: f64 = steps.iter().map(|x| x.tc_infeed_ms).sum();
    let mut b = Bottleneck {
        steps: steps.len(),
        step_time_ms_avg: st.average,
        tc_idle_ms_avg: avg(|x| x.tc_idle_ms),
        enqueue_us: times.enqueue_us,
        non_enqueue_us: times.demanded_us
            + times.advanced_us
            + times.preprocessing_us
            + times.unclassified_us,
        ..Default::default()
    };
    let mut output_conclusion = String::new();
    if total == 0.0 {
        b.input_classification = "unknown".into();
        b.input_statement = NO_STEP_TIME.into();
    } else {
        b.input_percent = 100.0 * infeed_total / total;
        b.output_percent = 100.0 * steps.iter().map(|x| x.tc_outfeed_ms).sum::<f64>() / total;
        b.idle_percent = 100.0 * steps.iter().map(|x| x.tc_idle_ms).sum::<f64>() / total;
        b.compute_percent = (100.0 - b.input_percent - b.output_percent - b.idle_percent).max(0.0);
        let (c, stmt, _) = input_analysis(b.input_percent, 0.0);
        b.input_classification = c;
        b.input_statement = stmt;
        output_conclusion = output_statement(b.output_percent);
    }
    t.prop("input_conclusion", b.input_statement.clone());
    t.prop("output_conclusion", output_conclusion);
    t.prop(
        "summary_nextstep",
        summary_next_step(&b.input_classification, times),
    );
    // XProf computes this statement (TpuBottleneckAnalysis.tc_idle_statement, with every core
    // profiled) but its data table does not print it; it is ours to show, in `bottleneck`.
    if total > 0.0 && b.idle_percent >= TC_IDLE_THRESHOLD {
        b.tc_idle_statement = format!(
            "{:.1} % of the total step time sampled is due to host overhead that is not input-related. For TF 2.x, you may want to use a <a href=\"{MULTIPLE_STEPS_DOC}\" target=\"_blank\">host-training loop (i.e. running multiple steps within a tf.function).</a>",
            b.idle_percent
        );
    }
    for x in steps {
        let mut r = serde_json::Map::new();
        r.insert("stepnum".into(), json!(x.step_num.to_string()));
        r.insert("tcComputeTimeMs".into(), json!(x.tc_compute_ms));
        r.insert("scv0ComputeTimeMs".into(), json!(x.scv0_compute_ms));
        r.insert("scv0InfeedTimeMs".into(), json!(0.0));
        r.insert("tcInfeedTimeMs".into(), json!(x.tc_infeed_ms));
        r.insert("tcOutfeedTimeMs".into(), json!(x.tc_outfeed_ms));
        r.insert("tcIdleTimeMs".into(), json!(x.tc_idle_ms));
        r.insert("hostTransferTimeMs".into(), json!(x.host_transfer_ms));
        r.insert(
            "tooltip".into(),
            json!(format!(
                "step {}:\nTime waiting for input data = {:.3} ms, Step time = {:.3} ms",
                x.step_num, x.tc_infeed_ms, x.step_ms
            )),
        );
        r.insert("infeedPercentAverage".into(), json!(x.infeed_pct.0));
        r.insert("infeedPercentMin".into(), json!(x.infeed_pct.1));
        r.insert("infeedPercentMax".into(), json!(x.infeed_pct.2));
        t.records.push(r);
    }
    (t, b)
}

/// The analysis on the complete steps of `s`.
pub fn input_pipeline(s: &OpStats, cores: &BTreeMap<i64, CoreDetails>) -> InputPipeline {
    input_pipeline_with(s, cores, false)
}

/// [`input_pipeline`] for combined hosts whose steps did not intersect (`empty_intersect`).
pub fn input_pipeline_with(
    s: &OpStats,
    cores: &BTreeMap<i64, CoreDetails>,
    empty_intersect: bool,
) -> InputPipeline {
    let hw = s.run_env.hardware_type;
    let steps = &s.steps.complete_steps;
    let (tables, bottleneck) = if hw == HardwareType::Tpu {
        let ts = tpu_steps(steps, cores);
        let (host, times) = host_table(s, 0.0);
        let (step_table, b) = tpu_table(s, &ts, &times);
        let mut core_table = Table::new(&["index"]);
        let mut row0 = serde_json::Map::new();
        let mut row1 = serde_json::Map::new();
        row0.insert("index".into(), json!("Step number"));
        row1.insert("index".into(), json!("Core name"));
        let cols: Vec<String> = (0..ts.len()).map(|i| i.to_string()).collect();
        for (i, x) in ts.iter().enumerate() {
            row0.insert(cols[i].clone(), json!(x.step_num.to_string()));
            row1.insert(
                cols[i].clone(),
                json!(if x.max_infeed_core.is_empty() {
                    "unknown"
                } else {
                    x.max_infeed_core.as_str()
                }),
            );
        }
        core_table.columns.extend(cols);
        core_table.records = vec![row0, row1];
        (vec![core_table, step_table, host], b)
    } else {
        let gs = generic_steps(steps, hw != HardwareType::Gpu);
        let step_times = step_times_ms(steps);
        // Host-to-device share of the step (`RatioOfHostToDeviceTimeToStepTime`, no infeed
        // enqueue ratio in the engine's host DB): transfers and the device waiting on the
        // host, not the host waiting for input, which the "Input" component also holds.
        let avg_step = summarize(&step_times).average;
        let h2d: Vec<f64> = gs.iter().map(|x| x.host_to_device_ms).collect();
        let avg_h2d = summarize(&h2d).average;
        let ratio = if avg_step > 0.0 {
            safe_div(avg_h2d, avg_step)
        } else {
            0.0
        };
        let (host, times) = host_table(s, ratio);
        let (step_table, b) = generic_table(s, &gs, &step_times, &times);
        (vec![Table::new(&[]), step_table, host], b)
    };
    let mut tables = tables;
    let mut rec = Table::new(&["link"]);
    for r in recommendations() {
        let mut m = serde_json::Map::new();
        m.insert("link".into(), Value::from(r));
        rec.records.push(m);
    }
    tables.push(rec);
    let mut diag = Table::new(&["severity", "message"]);
    if let Some(w) = step_warning(s, empty_intersect) {
        let mut m = serde_json::Map::new();
        m.insert("severity".into(), json!("WARNING"));
        m.insert("message".into(), json!(w));
        diag.records.push(m);
    }
    tables.push(diag);
    InputPipeline {
        tables,
        hardware_type: hw,
        bottleneck,
    }
}
