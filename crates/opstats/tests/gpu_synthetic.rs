//! GPU captures made first-class: AMD peak numbers, precision stats (16/32-bit compute time)
//! and the HLO cost model for kernels without `flops`/`bytes_accessed` stats — on one synthetic
//! AMD MI300X capture, expected values computed by hand in the comments and checked against
//! XProf 2.24.2's own output for the same capture (`tests/data/gpu_oracle.json`, see
//! `write_gpu_capture_for_the_oracle`).

use serde_json::Value;
use xprof_opstats::adapter::host_space;
use xprof_opstats::metrics::CostSource;
use xprof_opstats::{OpStats, build, views};
use xprof_testkit::xprof_proto::xla::{
    self, ConvolutionDimensionNumbers, DotDimensionNumbers, PrimitiveType as T, Window,
    WindowDimension,
};
use xprof_testkit::{XSpaceBuilder, hlo_instr, hlo_module_proto, hlo_shape};

const PROGRAM: u64 = 7;

/// jit_gpu(7), entry computation `main`:
/// * `dot.1   = f32[4,8,32] dot(p0 f32[4,8,16], p1 f32[4,16,32])`, batch {0}, contracting lhs
///   {2} / rhs {1}: 2·4·8·32·16 = 32768 FLOPs; bytes (512 + 2048 + 1024)·4 = 14336.
/// * `add.2   = f32[4,8,32] add(dot.1, dot.1)`: 1024 FLOPs; bytes 3·1024·4 = 12288.
/// * `conv.3  = f32[1,8,8,16] convolution(p2 f32[1,8,8,4], p3 f32[3,3,4,16])`, NHWC/HWIO,
///   3×3 window, stride 1, padding 1: per spatial dim 8·3 − 2 = 22 valid (output, tap) pairs
///   → 2·1·16·4·22·22 = 61952 FLOPs; bytes (256 + 576 + 1024)·4 = 7424.
/// * `fusion.4 = f32[4,8,32] fusion(add.2)`, kLoop: multiply(x, x) then add(m, x) → 2048
///   FLOPs; bytes (operand + output) 2·4096 = 8192.
/// * `reduce.5 = f32[4,8] reduce(add.2, c0)`, dims {2}, add reducer: 1024 − 32 = 992 FLOPs;
///   bytes 4096 + 4 + 128 = 4228.
/// * `convert.6 = bf16[4,8,32] convert(add.2)`: 1024 FLOPs; bytes 4096 + 2048 = 6144.
/// * `dot.7   = bf16[8,32] dot(p4 bf16[8,16], p5 bf16[16,32])`: 2·8·32·16 = 8192 FLOPs;
///   bytes (128 + 512 + 256)·2 = 1792.
pub fn gpu_hlo() -> xla::HloProto {
    let f32s = |d: &[i64]| hlo_shape(T::F32, d);
    let bf16s = |d: &[i64]| hlo_shape(T::Bf16, d);
    let param = |id: i64, name: &str, s: xla::ShapeProto, n: i64| {
        let mut i = hlo_instr(id, name, "parameter", s, &[]);
        i.parameter_number = n;
        i
    };
    // Fused computation of fusion.4 (id 2) and the reducer (id 3).
    let fused = vec![
        param(101, "fp0", f32s(&[4, 8, 32]), 0),
        hlo_instr(102, "mul.f", "multiply", f32s(&[4, 8, 32]), &[101, 101]),
        hlo_instr(103, "add.f", "add", f32s(&[4, 8, 32]), &[102, 101]),
    ];
    let reducer = vec![
        param(201, "ra", f32s(&[]), 0),
        param(202, "rb", f32s(&[]), 1),
        hlo_instr(203, "radd", "add", f32s(&[]), &[201, 202]),
    ];
    let mut dot1 = hlo_instr(7, "dot.1", "dot", f32s(&[4, 8, 32]), &[1, 2]);
    dot1.dot_dimension_numbers = Some(Box::new(DotDimensionNumbers {
        lhs_contracting_dimensions: vec![2],
        rhs_contracting_dimensions: vec![1],
        lhs_batch_dimensions: vec![0],
        rhs_batch_dimensions: vec![0],
    }));
    let mut conv = hlo_instr(9, "conv.3", "convolution", f32s(&[1, 8, 8, 16]), &[3, 4]);
    let wd = WindowDimension {
        size: 3,
        stride: 1,
        padding_low: 1,
        padding_high: 1,
        window_dilation: 1,
        base_dilation: 1,
        window_reversal: false,
    };
    conv.window = Some(Box::new(Window {
        dimensions: vec![wd, wd],
    }));
    conv.convolution_dimension_numbers = Some(Box::new(ConvolutionDimensionNumbers {
        input_batch_dimension: 0,
        input_feature_dimension: 3,
        input_spatial_dimensions: vec![1, 2],
        kernel_input_feature_dimension: 2,
        kernel_output_feature_dimension: 3,
        kernel_spatial_dimensions: vec![0, 1],
        output_batch_dimension: 0,
        output_feature_dimension: 3,
        output_spatial_dimensions: vec![1, 2],
    }));
    conv.feature_group_count = 1;
    conv.batch_group_count = 1;
    let mut fusion = hlo_instr(10, "fusion.4", "fusion", f32s(&[4, 8, 32]), &[8]);
    fusion.fusion_kind = "kLoop".into();
    fusion.called_computation_ids = vec![2];
    let mut c0 = hlo_instr(11, "c0", "constant", f32s(&[]), &[]);
    c0.literal = Some(Box::new(xla::LiteralProto {
        shape: Some(f32s(&[])),
        f32s: vec![0.0],
        ..Default::default()
    }));
    let mut reduce = hlo_instr(12, "reduce.5", "reduce", f32s(&[4, 8]), &[8, 11]);
    reduce.dimensions = vec![2];
    reduce.called_computation_ids = vec![3];
    let mut dot7 = hlo_instr(16, "dot.7", "dot", bf16s(&[8, 32]), &[14, 15]);
    dot7.dot_dimension_numbers = Some(Box::new(DotDimensionNumbers {
        lhs_contracting_dimensions: vec![1],
        rhs_contracting_dimensions: vec![0],
        ..Default::default()
    }));
    let entry = vec![
        param(1, "p0", f32s(&[4, 8, 16]), 0),
        param(2, "p1", f32s(&[4, 16, 32]), 1),
        param(3, "p2", f32s(&[1, 8, 8, 4]), 2),
        param(4, "p3", f32s(&[3, 3, 4, 16]), 3),
        dot1,
        hlo_instr(8, "add.2", "add", f32s(&[4, 8, 32]), &[7, 7]),
        conv,
        fusion,
        c0,
        reduce,
        hlo_instr(13, "convert.6", "convert", bf16s(&[4, 8, 32]), &[8]),
        param(14, "p4", bf16s(&[8, 16]), 4),
        param(15, "p5", bf16s(&[16, 32]), 5),
        dot7,
        {
            let mut t = hlo_instr(17, "tuple.8", "tuple", f32s(&[]), &[9, 10, 12, 13, 16]);
            t.shape = Some(xla::ShapeProto {
                element_type: T::Tuple as i32,
                tuple_shapes: vec![
                    f32s(&[1, 8, 8, 16]),
                    f32s(&[4, 8, 32]),
                    f32s(&[4, 8]),
                    bf16s(&[4, 8, 32]),
                    bf16s(&[8, 32]),
                ],
                ..Default::default()
            });
            t
        },
    ];
    hlo_module_proto(
        "jit_gpu",
        1,
        vec![
            (2, "fused_computation", fused),
            (3, "add_reducer", reducer),
            (1, "main", entry),
        ],
    )
}

/// One MI300X (gfx942: 304 CUs at 2.1 GHz) running jit_gpu's kernels (times in ps):
///
/// | stream | kernel | op | group | span | stats |
/// | 1 | dot_kernel | dot.1 | 0 | [0, 1000000) | |
/// | 1 | add_kernel | add.2 | 0 | [1000000, 1500000) | `flops` 5 |
/// | 1 | conv_kernel | conv.3 | 0 | [1500000, 2500000) | |
/// | 1 | loop_fusion_kernel | fusion.4 | 0 | [2500000, 3000000) | |
/// | 1 | reduce_kernel | reduce.5 | 1 | [3000000, 3400000) | |
/// | 1 | convert_fp16_kernel | convert.6 | 1 | [3400000, 3600000) | |
/// | 1 | gemm_kernel | dot.7 | 1 | [3600000, 4600000) | `bytes_accessed` 77 |
/// | 1 | add_kernel | add.2 | — | [5000000, 5100000) | |
/// | 2 | gemm_kernel | dot.1 | 0 | [500000, 1200000) | `shape` (XProf `kTensorShapes`) "(half[8,16])" |
pub fn gpu_capture() -> XSpaceBuilder {
    let hlo = gpu_hlo();
    XSpaceBuilder::new()
        .hostname("gpuhost")
        .plane("/host:metadata", |p| {
            p.hlo_module(PROGRAM as i64, PROGRAM, &hlo)
        })
        .plane("/device:GPU:0", |p| {
            let k = |l: xprof_testkit::LineBuilder,
                     name: &str,
                     op: &str,
                     corr: u64,
                     group: Option<i64>,
                     b: i64,
                     d: i64| {
                let l = l
                    .event(name, b, d)
                    .stat("hlo_op", op)
                    .stat("hlo_module", "jit_gpu")
                    .stat("program_id", PROGRAM)
                    .stat("correlation_id", corr);
                match group {
                    Some(g) => l.stat("group_id", g),
                    None => l,
                }
            };
            p.id(1)
                .stat("device_vendor", "AMD")
                .stat("gpu_device_name", "gfx942")
                .stat("clock_rate", 2_100_000u64)
                .stat("core_count", 304u64)
                .stat("memory_bandwidth", 5_300_000_000_000u64)
                .stat("compute_cap_major", 9u64)
                .stat("compute_cap_minor", 4u64)
                .line_with_id(1, "Stream #1(Compute)", |l| {
                    let l = k(l, "dot_kernel", "dot.1", 1, Some(0), 0, 1_000_000);
                    let l = k(l, "add_kernel", "add.2", 2, Some(0), 1_000_000, 500_000)
                        .stat("flops", 5u64);
                    let l = k(l, "conv_kernel", "conv.3", 3, Some(0), 1_500_000, 1_000_000);
                    let l = k(
                        l,
                        "loop_fusion_kernel",
                        "fusion.4",
                        4,
                        Some(0),
                        2_500_000,
                        500_000,
                    );
                    let l = k(
                        l,
                        "reduce_kernel",
                        "reduce.5",
                        5,
                        Some(1),
                        3_000_000,
                        400_000,
                    );
                    let l = k(
                        l,
                        "convert_fp16_kernel",
                        "convert.6",
                        6,
                        Some(1),
                        3_400_000,
                        200_000,
                    );
                    let l = k(l, "gemm_kernel", "dot.7", 7, Some(1), 3_600_000, 1_000_000)
                        .stat("bytes_accessed", 77u64);
                    k(l, "add_kernel", "add.2", 8, None, 5_000_000, 100_000)
                })
                .line_with_id(2, "Stream #2(Compute)", |l| {
                    k(l, "gemm_kernel", "dot.1", 9, Some(0), 500_000, 700_000)
                        .stat("shape", "(half[8,16])")
                })
        })
}

/// [`gpu_capture`] with the host thread that launched the kernels: two JAX-style step roots
/// (`_r`), `train_step` 0 on [0, 3 ms) launching correlations 1–4 and 9, `train_step` 1 on
/// [3, 5.2 ms) launching 5–8. XProf 2.24.2's overview page for it (made with
/// `../shared/tools/oracle` from `write_gpu_capture_with_host_for_the_oracle`) shows step 0 of
/// 0.003 ms, all device compute, and step 1 of 0.0021 ms: 0.0017 device compute and 0.0004
/// "all others". Its framework-op table lists dot.1 (2 occurrences, 1.7 µs), conv.3 and dot.7
/// (1 µs each), add.2 (2, 0.6 µs), fusion.4 (0.5), reduce.5 (0.4) and convert.6 (0.2).
fn gpu_capture_with_host() -> XSpaceBuilder {
    gpu_capture().plane("/host:CPU", |p| {
        p.line_with_id(77, "python3/77", |l| {
            let launch = |l: xprof_testkit::LineBuilder, at: i64, correlation: u64| {
                l.event("cuLaunchKernel", at, 500)
                    .stat("correlation_id", correlation)
            };
            let mut l = l
                .event("train_step", 0, 3_000_000)
                .stat("_r", 1i64)
                .stat("step_num", 0i64);
            for (k, c) in [1u64, 2, 3, 4, 9].into_iter().enumerate() {
                l = launch(l, 10_000 + 1_000 * k as i64, c);
            }
            l = l
                .event("train_step", 3_000_000, 2_200_000)
                .stat("_r", 1i64)
                .stat("step_num", 1i64);
            for (k, c) in [5u64, 6, 7, 8].into_iter().enumerate() {
                l = launch(l, 3_010_000 + 1_000 * k as i64, c);
            }
            l
        })
    })
}

/// Writes [`gpu_capture_with_host`] as a run directory for XProf's converters (as
/// `write_gpu_capture_for_the_oracle`).
#[test]
#[ignore]
fn write_gpu_capture_with_host_for_the_oracle() {
    let dir = std::env::var("GPU_ORACLE_DIR").expect("GPU_ORACLE_DIR");
    gpu_capture_with_host()
        .write_run(dir, "run", "gpuhost")
        .unwrap();
}

/// XProf 2.24.2's overview step rows for [`gpu_capture`], with or without its host thread:
/// (step, duration, device compute, all others), ps.
const XPROF_STEP_ROWS: [(i64, u64, u64, u64); 2] = [
    (0, 3_000_000, 3_000_000, 0),
    (1, 2_100_000, 1_700_000, 400_000),
];

fn step_rows(s: &OpStats) -> Vec<(i64, u64, u64, u64)> {
    s.steps
        .steps
        .iter()
        .map(|x| {
            let g = x.per_core.values().next().unwrap().generic_ps;
            (x.step_num, x.duration_ps(), g[0], g[8])
        })
        .collect()
}

#[test]
fn gpu_device_idle_time_is_ours_not_xprofs() {
    // XProf's GPU overview has no device idle time (it computes it only for TPU): null with
    // the reason, and our measurement (the op database's idle share) beside it.
    let s = stats();
    let ps = &views::overview(&s)["performance_summary"];
    assert!(ps["device_idle_time_percent"].is_null());
    assert_eq!(
        ps["device_idle_time_percent_reason"],
        views::reasons::DEVICE_IDLE_TPU_ONLY
    );
    let measured = xprof_opstats::format::percent(100.0 * s.device_db.idle_ratio());
    assert_eq!(ps["device_idle_time_percent_measured"], measured.as_str());
}

#[test]
fn gpu_steps_without_a_host_plane_come_from_the_kernels_group_ids() {
    // No host plane, so no host grouping: XProf takes the groups from the kernels' own
    // `group_id` stats and shows the same two steps as with the host thread.
    let s = stats();
    assert_eq!(s.steps.source, xprof_opstats::steps::StepsSource::GroupId);
    assert_eq!(step_rows(&s), XPROF_STEP_ROWS);
}

#[test]
fn gpu_steps_and_framework_ops_with_a_host_match_xprof() {
    let s = build(&host_space(
        "gpuhost",
        &gpu_capture_with_host().build(),
        Vec::new(),
    ));
    assert_eq!(step_rows(&s), XPROF_STEP_ROWS);
    // XProf's framework-op rows, by total self time: (operation, occurrences, self time ps).
    let mut got: Vec<(String, u64, u64)> = views::framework_op_db(&s.device_db, false)
        .metrics
        .iter()
        .map(|m| (m.name.clone(), m.occurrences, m.self_time_ps))
        .collect();
    got.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let want = [
        ("dot.1", 2, 1_700_000),
        ("conv.3", 1, 1_000_000),
        ("dot.7", 1, 1_000_000),
        ("add.2", 2, 600_000),
        ("fusion.4", 1, 500_000),
        ("reduce.5", 1, 400_000),
        ("convert.6", 1, 200_000),
    ];
    let want: Vec<(String, u64, u64)> = want
        .into_iter()
        .map(|(n, c, t)| (n.to_string(), c, t))
        .collect();
    assert_eq!(got, want);
}

fn stats() -> OpStats {
    build(&host_space("gpuhost", &gpu_capture().build(), Vec::new()))
}

/// Writes the capture as a run directory for XProf's converters:
/// `GPU_ORACLE_DIR=/tmp/gpu-run cargo test -p xprof-opstats --test gpu_synthetic -- --ignored`,
/// then `runner.py --name gpu --src /tmp/gpu-run/plugins/profile/run ...`.
#[test]
#[ignore]
fn write_gpu_capture_for_the_oracle() {
    let dir = std::env::var("GPU_ORACLE_DIR").expect("GPU_ORACLE_DIR");
    gpu_capture().write_run(dir, "run", "gpuhost").unwrap();
}

fn oracle() -> Value {
    serde_json::from_str(include_str!("data/gpu_oracle.json")).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn amd_peaks_and_device_type_come_from_the_gfx_tables() {
    let s = stats();
    assert_eq!(s.run_env.device_type, "AMD GPU - gfx942");
    let pe = s.perf_env.as_ref().unwrap();
    // 304 CUs × 2048 FLOPs/CU/cycle (CDNA 3 matrix fp16) × 2.1 GHz = 1307.4432 TFLOP/s.
    assert!(close(pe.peak_tflops, 304.0 * 2048.0 * 2.1 / 1000.0));
    assert_eq!(pe.peak_source, xprof_opstats::device::peak_source::AMD);
    // HBM 5.3e12 B/s; LDS 304 × 128 B × 2.1 GHz = 81715.2 GB/s.
    assert!(close(pe.peak_bws_gbps[0], 5300.0));
    assert!(close(pe.peak_bws_gbps[1], 81715.2));
    // XProf: the same numbers (roofline device information, GiB/s for bandwidths).
    let o = oracle();
    let dev = &o["roofline_device"];
    assert_eq!(dev["device_type"], "AMD GPU - gfx942");
    let num = |k: &str| dev[k].as_str().unwrap().parse::<f64>().unwrap();
    // (XProf prints 6 significant digits: "1.30744e+06".)
    assert!((num("peak_flop_rate") / (pe.peak_tflops * 1000.0) - 1.0).abs() < 1e-5);
    assert!((num("peak_hbm_bw") - 5300.0 / 1.073741824).abs() < 0.01);
    assert!((num("peak_vmem_write_bw") - 81715.2 / 1.073741824).abs() < 0.1);
}

#[test]
fn precision_stats_count_compute_time_once_with_16_bit_winning() {
    // Group 0: dot [0,1.0M) 32, gemm (shape "half") [0.5M,1.2M) 16, add/conv/fusion to 3.0M 32
    //   → 16-bit 700000, 32-bit 3000000 − 700000 = 2300000.
    // Group 1: reduce [3.0M,3.4M) 32, convert_fp16 [3.4M,3.6M) 16, gemm [3.6M,4.6M) 32, and
    //   the ungrouped add [5.0M,5.1M) joins group 1 (XProf does too) → 16: 200000, 32: 1500000.
    let s = stats();
    let p = s.device_db.precision_stats;
    assert_eq!(
        (p.compute_16bit_ps, p.compute_32bit_ps),
        (900_000, 3_800_000)
    );
    let ov = views::overview(&s);
    let ps = &ov["performance_summary"];
    // 900000 / 4700000 = 19.1 %; XProf prints the same.
    let o = oracle();
    assert_eq!(ps["device_compute_16bit_percent"], "19.1%");
    assert_eq!(ps["device_compute_32bit_percent"], "80.9%");
    assert_eq!(
        ps["device_compute_16bit_percent"],
        o["overview"]["device_compute_16bit_percent"]
    );
    assert_eq!(
        ps["device_compute_32bit_percent"],
        o["overview"]["device_compute_32bit_percent"]
    );
    assert_eq!(ps["device_compute_16bit_ps"], 900_000);
    assert_eq!(
        ps["precision_statement"],
        o["overview"]["precision_statement"]
    );
}

#[test]
fn the_hlo_cost_model_fills_gpu_kernels_and_wins_over_kernel_stats() {
    let s = stats();
    let db = &s.device_db;
    let op = |n: &str| db.metrics.iter().find(|m| m.name == n).unwrap();
    // (name, occurrences, FLOPs, bytes) over all occurrences; hand-computed in `gpu_hlo`.
    // add.2's `flops` 5 and dot.7's `bytes_accessed` 77 lose to the cost model, as in XProf.
    for (n, occ, flops, bytes) in [
        ("dot.1", 2, 2 * 32768, 2 * 14336),
        ("add.2", 2, 2 * 3 * 1024, 2 * 12288),
        ("conv.3", 1, 61952, 7424),
        ("fusion.4", 1, 2 * 3 * 1024, 8192),
        ("reduce.5", 1, 992 * 3, 4096 + 128 + 128),
        ("convert.6", 1, 3 * 1024, 6144),
        ("dot.7", 1, 8192, 1792),
    ] {
        let m = op(n);
        assert_eq!(
            (m.occurrences, m.flops, m.model_flops, m.bytes_accessed),
            (occ, flops, flops, bytes),
            "{n}"
        );
        assert_eq!(m.cost_source, CostSource::HloCostModel, "{n}");
    }
    // Parity: XProf's hlo_stats rates for every op.
    let rows = views::hlo_stats_of(&s, db);
    let o = oracle();
    let want = o["hlo_stats"].as_array().unwrap();
    assert_eq!(want.len(), 7);
    for w in want {
        let name = w["hlo_op_name"].as_str().unwrap();
        let r = rows
            .iter()
            .find(|r| r["hlo_op_name"] == name)
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(r["cost_model"], "hlo_cost_model", "{name}");
        // XLA's category names (add.2 and convert.6 are "non-fusion elementwise").
        assert_eq!(r["category"], w["category"], "{name}");
        for k in [
            "occurrences",
            "model_flop_rate",
            "normalized_flop_rate",
            "measured_memory_bw",
        ] {
            let (a, b) = (r[k].as_f64().unwrap(), w[k].as_f64().unwrap());
            assert!(close(a, b), "{name} {k}: ours {a}, XProf {b}");
        }
    }
}

#[test]
fn unknown_vendors_and_ambiguous_amd_parts_get_no_peak() {
    let caps = |vendor: &str, name: Option<&str>, major: u64, minor: u64| {
        let s = build(&host_space(
            "h",
            &XSpaceBuilder::new()
                .plane("/device:GPU:0", |p| {
                    let p = p
                        .stat("device_vendor", vendor)
                        .stat("clock_rate", 1_700_000u64)
                        .stat("core_count", 104u64)
                        .stat("memory_bandwidth", 1_600_000_000_000u64)
                        .stat("compute_cap_major", major)
                        .stat("compute_cap_minor", minor);
                    let p = match name {
                        Some(n) => p.stat("gpu_device_name", n),
                        None => p,
                    };
                    p.line_with_id(1, "Stream #1", |l| l.event("k", 0, 10))
                })
                .build(),
            Vec::new(),
        ));
        (s.run_env.device_type.clone(), s.perf_env.unwrap())
    };
    use xprof_opstats::device::peak_source;
    // gfx90a named: 104 CUs × 1024 × 1.7 GHz = 181.0 TFLOP/s (XProf's MI250 GCD figure).
    let (t, pe) = caps("AMD", Some("gfx90a"), 9, 0);
    assert_eq!(t, "AMD GPU - gfx90a");
    assert!(close(pe.peak_tflops, 104.0 * 1024.0 * 1.7 / 1000.0));
    // 9.0 without a name is gfx908 or gfx90a: no peak, no LDS, family name.
    let (t, pe) = caps("AMD", None, 9, 0);
    assert_eq!(t, "AMD GPU - gfx-9XX series");
    assert_eq!((pe.peak_tflops, pe.peak_bws_gbps[1]), (0.0, 0.0));
    assert_eq!(pe.peak_source, peak_source::AMD_UNKNOWN);
    // A target-id name is not the collector's format: fall back to the compute capability.
    let (t, _) = caps("AMD", Some("gfx942:sramecc+:xnack-"), 0, 0);
    assert_eq!(t, "AMD GPU");
    // Another vendor: nothing borrowed from Nvidia or AMD.
    let (t, pe) = caps("Intel", None, 9, 0);
    assert_eq!(t, "GPU");
    assert_eq!((pe.peak_tflops, pe.peak_bws_gbps[1]), (0.0, 0.0));
    assert_eq!(pe.peak_source, peak_source::UNKNOWN_VENDOR);
}

#[test]
fn precision_fields_are_placeholders_without_gpu_kernels_in_steps() {
    // A GPU kernel without correlation_id: no step compute time → null + reason.
    let s = build(&host_space(
        "h",
        &XSpaceBuilder::new()
            .plane("/device:GPU:0", |p| {
                p.stat("device_vendor", "Nvidia")
                    .line_with_id(1, "Stream #1", |l| l.event("k", 0, 10))
            })
            .build(),
        Vec::new(),
    ));
    let ov = views::overview(&s);
    let ps = &ov["performance_summary"];
    assert!(ps["device_compute_16bit_percent"].is_null());
    assert_eq!(
        ps["device_compute_16bit_percent_reason"],
        views::reasons::PRECISION_NO_STEPS
    );
}

#[test]
fn gpu_roofline_has_no_average_record() {
    // XProf's GPU roofline (same capture through its converters) has the Total records only,
    // plus a Program row of zeros per step (no per-step op database on GPU; left out here,
    // docs/PLACEHOLDERS.md). It has no Average record: complete steps carry no ops on GPU.
    let s = build(&host_space(
        "gpuhost",
        &gpu_capture_with_host().build(),
        Vec::new(),
    ));
    assert_eq!(s.steps.steps.len(), 2);
    let (_, records) = views::roofline_model(&s);
    assert!(!records.is_empty());
    assert!(records.iter().all(|r| r["step"] == "Total"), "{records:?}");
}

#[test]
fn gpu_op_profile_counts_the_cost_models_bytes_as_xprof() {
    // XProf's GPU op profile (same capture): 81152 HBM bytes at the root, the cost model's
    // bytes of every kernel (its cost analysis gives each op an all-HBM breakdown).
    let root = views::op_profile(&stats(), "program", true);
    assert_eq!(
        root["metrics"]["rawBytesAccessedArray"],
        serde_json::json!([81152u64, 0, 0])
    );
    let bw = root["metrics"]["bandwidthUtils"][0].as_f64().unwrap();
    assert!((bw - 0.00283549965059399).abs() < 1e-9, "{bw}");
}

/// XProf 2.24.2's FLOPs and bytes for collectives on GPU (its `hlo_stats` on a capture with
/// one kernel per op, replica groups of 4, operand `f32[128,256]` = 128 KiB).
#[test]
fn collectives_cost_what_xprof_reports() {
    let f32s = |d: &[i64]| hlo_shape(T::F32, d);
    let param = |id: i64, name: &str, s: xla::ShapeProto, n: i64| {
        let mut i = hlo_instr(id, name, "parameter", s, &[]);
        i.parameter_number = n;
        i
    };
    let reducer = vec![
        param(201, "ra", f32s(&[]), 0),
        param(202, "rb", f32s(&[]), 1),
        hlo_instr(203, "radd", "add", f32s(&[]), &[201, 202]),
    ];
    // The shapes say the group size (4); the cost does not read the replica groups.
    let with = |mut i: xla::HloInstructionProto, reduces: bool| {
        i.dimensions = vec![0];
        if reduces {
            i.called_computation_ids = vec![2];
        }
        i
    };
    let entry = vec![
        param(1, "p0", f32s(&[128, 256]), 0),
        with(
            hlo_instr(3, "ag", "all-gather", f32s(&[512, 256]), &[1]),
            false,
        ),
        with(
            hlo_instr(4, "rs", "reduce-scatter", f32s(&[32, 256]), &[1]),
            true,
        ),
        with(
            hlo_instr(5, "a2a", "all-to-all", f32s(&[128, 256]), &[1]),
            false,
        ),
        with(
            hlo_instr(6, "ar", "all-reduce", f32s(&[128, 256]), &[1]),
            true,
        ),
        with(
            hlo_instr(7, "ars", "all-reduce-start", f32s(&[128, 256]), &[1]),
            true,
        ),
        hlo_instr(8, "ard", "all-reduce-done", f32s(&[128, 256]), &[7]),
    ];
    let hlo = hlo_module_proto("jit_coll", 1, vec![(2, "sum", reducer), (1, "main", entry)]);
    let m = hlo.hlo_module.unwrap();
    let view = xprof_hlo::print::ModuleView::new(&m);
    let costs = xprof_opstats::cost_model::module_costs(&view);
    let got = |id: i64| (costs[&id].flops, costs[&id].bytes_accessed);
    let kib = 1024u64;
    assert_eq!(got(3), (0, 11 * 128 * kib));
    assert_eq!(got(4), (3 * 32 * 256, 11 * 32 * kib));
    assert_eq!(got(5), (0, 256 * kib));
    assert_eq!(got(6), (3 * 128 * 256, 256 * kib));
    assert_eq!(got(7), (3 * 128 * 256, 128 * kib));
    assert_eq!(got(8), (0, 256 * kib));
}

/// A module of one cuBLAS gemm (`gemm.1 = (bf16[64,64], s8[16]) custom-call(a, b)` calling
/// `target`, contracting lhs {1}: 2·64·64·32 = 262144 FLOPs) and an add over its result,
/// with the gemm's backend config `config`.
fn gemm_module(name: &str, target: &str, config: &str) -> xla::HloProto {
    use xprof_testkit::hlo_param;
    let bf16s = |d: &[i64]| hlo_shape(T::Bf16, d);
    let mut gemm = hlo_instr(3, "gemm.1", "custom-call", bf16s(&[64, 64]), &[1, 2]);
    gemm.shape = Some(xla::ShapeProto {
        element_type: T::Tuple as i32,
        tuple_shapes: vec![bf16s(&[64, 64]), hlo_shape(T::S8, &[16])],
        ..Default::default()
    });
    gemm.custom_call_target = target.into();
    gemm.backend_config = config.as_bytes().to_vec();
    let mut gte = hlo_instr(4, "gte.2", "get-tuple-element", bf16s(&[64, 64]), &[3]);
    gte.tuple_index = 0;
    let entry = vec![
        hlo_param(1, "a", bf16s(&[64, 32]), 0),
        hlo_param(2, "b", bf16s(&[32, 64]), 1),
        gemm,
        gte,
        hlo_instr(5, "add.3", "add", bf16s(&[64, 64]), &[4, 4]),
    ];
    hlo_module_proto(name, 1, vec![(1, "main", entry)])
}

/// Program 1: a cuBLASLt gemm with a config XProf 2.24.2's XLA reads; program 2: one with a
/// config it rejects (`mx_mode`, a field that XLA dropped); program 3: a legacy
/// `__cublas$gemm` (XLA no longer costs those). On one stream, program 1's gemm twice back to
/// back without `group_id`, its add twice back to back in group 5; programs 2 and 3's gemm
/// and add once each.
fn library_call_capture() -> XSpaceBuilder {
    const READ: &str = r#"{"operation_queue_id":"0","gemm_backend_config":{"alpha_real":1,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}"#;
    const REJECTED: &str = r#"{"operation_queue_id":"0","gemm_backend_config":{"alpha_real":1,"mx_mode":false,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}"#;
    const LT: &str = "__cublas$lt$matmul";
    let read = gemm_module("jit_read", LT, READ);
    let rejected = gemm_module("jit_rej", LT, REJECTED);
    let legacy = gemm_module("jit_legacy", "__cublas$gemm", READ);
    XSpaceBuilder::new()
        .hostname("gpuhost")
        .plane("/host:metadata", |p| {
            p.hlo_module(1, 1, &read)
                .hlo_module(2, 2, &rejected)
                .hlo_module(3, 3, &legacy)
        })
        .plane("/device:GPU:0", |p| {
            let k = |l: xprof_testkit::LineBuilder, op: &str, pid: u64, g: Option<i64>, b: i64| {
                let l = l
                    .event(&format!("{op}_kernel"), b, 1_000_000)
                    .stat("hlo_op", op)
                    .stat("program_id", pid)
                    .stat("correlation_id", (b / 1_000_000) as u64);
                match g {
                    Some(g) => l.stat("group_id", g),
                    None => l,
                }
            };
            p.id(1)
                .stat("device_vendor", "AMD")
                .stat("gpu_device_name", "gfx942")
                .stat("clock_rate", 2_100_000u64)
                .stat("core_count", 304u64)
                .stat("memory_bandwidth", 5_300_000_000_000u64)
                .line_with_id(1, "Stream #1(Compute)", |l| {
                    let l = k(l, "gemm.1", 1, None, 0);
                    let l = k(l, "gemm.1", 1, None, 1_000_000);
                    let l = k(l, "add.3", 1, Some(5), 2_000_000);
                    let l = k(l, "add.3", 1, Some(5), 3_000_000);
                    let l = k(l, "gemm.1", 2, None, 4_000_000);
                    let l = k(l, "add.3", 2, None, 5_000_000);
                    let l = k(l, "gemm.1", 3, None, 6_000_000);
                    k(l, "add.3", 3, None, 7_000_000)
                })
        })
}

#[test]
fn ungrouped_back_to_back_kernels_of_one_op_are_occurrences_of_their_own() {
    let s = build(&host_space(
        "gpuhost",
        &library_call_capture().build(),
        Vec::new(),
    ));
    let op = |pid: u64, n: &str| {
        s.device_db
            .metrics
            .iter()
            .find(|m| m.program_id == pid && m.name == n)
            .unwrap_or_else(|| panic!("{pid} {n}"))
    };
    // No group id: each launch counts; one group id: the two launches are one occurrence.
    assert_eq!(op(1, "gemm.1").occurrences, 2);
    assert_eq!(op(1, "add.3").occurrences, 1);
    assert_eq!(op(1, "add.3").time_ps, 2_000_000);
}

#[test]
fn library_calls_of_a_module_xprof_cannot_cost_get_its_zeros_and_our_estimate() {
    let s = build(&host_space(
        "gpuhost",
        &library_call_capture().build(),
        Vec::new(),
    ));
    let op = |pid: u64, n: &str| {
        s.device_db
            .metrics
            .iter()
            .find(|m| m.program_id == pid && m.name == n)
            .unwrap()
    };
    // Readable config: the gemm costs as a dot, per occurrence; its bytes leave out the
    // scratch buffer: (64·32 + 32·64 + 64·64) · 2 = 16384.
    assert_eq!(op(1, "gemm.1").flops, 2 * 262_144);
    assert_eq!(op(1, "gemm.1").bytes_accessed, 2 * 16_384);
    // XProf's HBM breakdown has the gemm's reads only (its tuple result is recorded whole,
    // not per leaf), the add's reads and writes.
    assert_eq!(op(1, "gemm.1").hbm_bytes(), 2 * 8_192);
    assert_eq!(op(1, "add.3").hbm_bytes(), op(1, "add.3").bytes_accessed);
    // A legacy gemm: XProf does not cost it, the module's other ops it does.
    let legacy = op(3, "gemm.1");
    assert_eq!((legacy.flops, legacy.bytes_accessed), (0, 0));
    assert_eq!(
        (legacy.estimated_flops, legacy.estimated_bytes_accessed),
        (262_144, 16_384)
    );
    assert!(op(3, "add.3").flops > 0);
    // Rejected: XProf's cost analysis of the whole module fails, the add's too.
    for n in ["gemm.1", "add.3"] {
        let m = op(2, n);
        assert_eq!((m.flops, m.bytes_accessed), (0, 0), "{n}");
        assert!(
            m.estimated_flops > 0 && m.estimated_bytes_accessed > 0,
            "{n}"
        );
    }
    assert_eq!(op(2, "gemm.1").estimated_flops, 262_144);
    let rows = views::hlo_stats_of(&s, &s.device_db);
    let row = rows
        .iter()
        .find(|r| r["program_id"] == "2" && r["hlo_op_name"] == "gemm.1")
        .unwrap();
    // XProf's fields: its placeholder 0 (null + reason) and "Unknown"; ours beside them.
    assert!(row["model_flop_rate"].is_null());
    assert!(row["model_flop_rate_reason"].is_string());
    assert_eq!(row["bound_by"], "Unknown");
    assert!(row["model_flop_rate_estimated"].as_f64().unwrap() > 0.0);
    assert_eq!(row["flops_estimated"], 262_144);
    assert!(row["bound_by_estimated"] != "Unknown");
}
