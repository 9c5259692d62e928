//! Each view on a synthetic capture (xprof-testkit) where it is not empty, with the expected
//! values computed by hand from the events written; and each view's "no data" condition.

use std::path::PathBuf;

use prost::Message;
use serde_json::{Value, json};
use xprof_testkit::xprof_proto::xla;
use xprof_testkit::{Ref, XSpaceBuilder};
use xprof_views::counter_ids::*;
use xprof_views::load::{CoreDetails, XSpace};

fn raw(b: XSpaceBuilder) -> Vec<(String, XSpace)> {
    vec![(
        "host0".to_string(),
        XSpace::from_bytes(b.to_bytes()).unwrap(),
    )]
}

/// Write the capture as a run and load it through the engine, as the tools do.
fn loaded(b: &XSpaceBuilder) -> (tempfile::TempDir, xprof_views::LoadedRun) {
    let dir = tempfile::tempdir().unwrap();
    let p: PathBuf = dir.path().join("host0.xplane.pb");
    b.write(&p).unwrap();
    let r = xprof_views::load::load_hosts(&[("host0".into(), p)], &[]).unwrap();
    (dir, r)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

// ----------------------------------------------------------------------------------------
// kernel_stats

fn gpu_capture() -> XSpaceBuilder {
    let gemm =
        "regs:64 static_shared:1024 dynamic_shared:2048 grid:80,1,1 block:256,1,1 occ_pct:50.5";
    XSpaceBuilder::new()
        .hostname("gpu-host")
        .plane("/device:GPU:0", |p| {
            p.line_with_id(1, "stream 1", |l| {
                l.event("volta_h884gemm_128x64", 1_000_000, 10_000_000)
                    .stat("kernel_details", gemm)
                    .stat("tf_op", Ref("model/dense/MatMul:MatMul"))
                    .event("volta_h884gemm_128x64", 20_000_000, 20_000_000)
                    .stat("kernel_details", gemm)
                    .stat("tf_op", Ref("model/dense/MatMul:MatMul"))
                    .event("elementwise_add", 50_000_000, 5_000_000)
                    .stat("kernel_details", "regs:16 grid:10,1,1 block:128,1,1")
                    .stat("tf_op", "model/add:AddV2")
                    // Not kernels: no kernel_details, or zero duration.
                    .event("MemcpyH2D", 60_000_000, 3_000_000)
                    .event("elementwise_add", 70_000_000, 0)
                    .stat("kernel_details", "regs:16 grid:10,1,1 block:128,1,1")
            })
            // XProf skips its derived lines.
            .line_with_id(0xdead_beef, "derived", |l| {
                l.event("elementwise_add", 0, 9_000_000)
                    .stat("kernel_details", "regs:16 grid:10,1,1 block:128,1,1")
            })
        })
}

#[test]
fn kernel_stats_group_gpu_kernels_by_launch_configuration() {
    let ks = xprof_views::kernel::kernel_stats(&raw(gpu_capture()));
    assert_eq!(ks.gpu_planes, 1);
    let t = ks.table();
    assert_eq!(t.records.len(), 2);
    let g = &t.records[0];
    assert_eq!(g["rank"], json!(1));
    assert_eq!(g["kernel_name"], json!("volta_h884gemm_128x64"));
    assert_eq!(g["registers_per_thread"], json!(64));
    assert_eq!(g["shmem_bytes"], json!(3072)); // 1024 static + 2048 dynamic
    assert_eq!(g["block_dim"], json!("256,1,1"));
    assert_eq!(g["grid_dim"], json!("80,1,1"));
    assert_eq!(g["occupancy_pct"], json!(50.5));
    assert_eq!(g["is_kernel_using_tensor_core"], json!(true)); // "h884"
    assert_eq!(g["is_op_tensor_core_eligible"], json!(true)); // ".../MatMul"
    assert_eq!(g["op_name"], json!("model/dense/MatMul"));
    assert_eq!(g["occurrences"], json!(2));
    assert_eq!(g["total_duration_us"], json!(30.0)); // 10 µs + 20 µs
    assert_eq!(g["avg_duration_us"], json!(15.0));
    assert_eq!(g["min_duration_us"], json!(10.0));
    assert_eq!(g["max_duration_us"], json!(20.0));
    assert_eq!(g["total_duration_ns"], json!(30_000));
    let a = &t.records[1];
    assert_eq!(a["kernel_name"], json!("elementwise_add"));
    assert_eq!(a["registers_per_thread"], json!(16));
    assert_eq!(a["shmem_bytes"], json!(0));
    assert_eq!(a["occupancy_pct"], json!(0.0));
    assert_eq!(a["is_kernel_using_tensor_core"], json!(false));
    assert_eq!(a["is_op_tensor_core_eligible"], json!(false));
    assert_eq!(a["op_name"], json!("model/add"));
    assert_eq!(a["occurrences"], json!(1));
    assert_eq!(a["total_duration_us"], json!(5.0));
}

#[test]
fn kernel_stats_keep_identical_kernels_of_two_hosts_apart() {
    let one = XSpace::from_bytes(gpu_capture().to_bytes()).unwrap();
    let two = XSpace::from_bytes(gpu_capture().to_bytes()).unwrap();
    let ks = xprof_views::kernel::kernel_stats(&[("h0".into(), one), ("h1".into(), two)]);
    let t = ks.table();
    // XProf combines the hosts' kernel databases without merging their reports.
    assert_eq!(t.records.len(), 4);
    assert_eq!(t.records[0]["kernel_name"], t.records[1]["kernel_name"]);
    assert_eq!(t.records[0]["occurrences"], json!(2));
}

#[test]
fn amd_matrix_core_kernels_and_jax_matrix_ops_count_as_tensor_core() {
    use xprof_views::kernel::{is_kernel_using_tensor_core, is_op_tensor_core_eligible};
    for k in [
        "Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1_SN",
        "gemm_fusion_dot_general_1.kd",
        "kernel_mfma_f32_32x32x8",
        "wmma_gemm",
    ] {
        assert!(is_kernel_using_tensor_core(k), "{k}");
    }
    for k in [
        "wrapped_broadcast.kd",
        "__amd_rocclr_copyBuffer.kd",
        "loop_convert_fusion",
    ] {
        assert!(!is_kernel_using_tensor_core(k), "{k}");
    }
    assert!(is_op_tensor_core_eligible(
        "jit(f)/jit(main)/conv_general_dilated"
    ));
    assert!(is_op_tensor_core_eligible("jit(dot)/dot_general"));
    assert!(!is_op_tensor_core_eligible("jit(f)/broadcast_in_dim"));
}

/// A JAX-style GPU capture: kernels name their HLO op (`hlo_op`, `program_id`), whose
/// `op_name` metadata is the framework op.
fn gpu_jax_capture() -> XSpaceBuilder {
    let instr = |name: &str, opcode: &str, op_name: &str| xla::HloInstructionProto {
        name: name.into(),
        opcode: opcode.into(),
        metadata: Some(xla::OpMetadata {
            op_name: op_name.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let hlo = xla::HloProto {
        hlo_module: Some(xla::HloModuleProto {
            name: "jit_f".into(),
            computations: vec![xla::HloComputationProto {
                name: "main".into(),
                instructions: vec![
                    instr("dot.1", "dot", "jit(f)/dot_general"),
                    instr("add.2", "add", "jit(f)/add"),
                ],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    XSpaceBuilder::new()
        .plane("/host:metadata", |p| p.hlo_module(5, 5, &hlo))
        .plane("/device:GPU:0", |p| {
            p.stat("peak_teraflops_per_second", 100.0)
                .stat("peak_hbm_bw_gigabytes_per_second", 1000.0)
                .line_with_id(1, "stream 1", |l| {
                    l.event("sm80_xmma_gemm_f16", 0, 6_000_000)
                        .stat("kernel_details", "regs:128 grid:4,1,1 block:256,1,1")
                        .stat("hlo_op", "dot.1")
                        .stat("hlo_module", "jit_f")
                        .stat("program_id", 5u64)
                        .event("add_kernel", 7_000_000, 2_000_000)
                        .stat("kernel_details", "regs:8 grid:1,1,1 block:32,1,1")
                        .stat("hlo_op", "add.2")
                        .stat("hlo_module", "jit_f")
                        .stat("program_id", 5u64)
                })
        })
}

#[test]
fn kernels_name_their_framework_op_through_the_hlo() {
    let r = raw(gpu_jax_capture());
    let hlo = xprof_views::kernel::HloOpNames::new(&r, &[]);
    let ks = xprof_views::kernel::kernel_stats_with_hlo(&r, &hlo);
    let t = ks.table();
    assert_eq!(t.records[0]["kernel_name"], json!("sm80_xmma_gemm_f16"));
    assert_eq!(t.records[0]["op_name"], json!("jit(f)/dot_general"));
    assert_eq!(t.records[0]["is_kernel_using_tensor_core"], json!(true));
    assert_eq!(t.records[1]["op_name"], json!("jit(f)/add"));
    // Without the HLO the kernels have no framework op.
    let plain = xprof_views::kernel::kernel_stats(&r);
    assert_eq!(plain.table().records[0]["op_name"], json!(""));
    // Per framework op: Tensor Core time / kernel time.
    let by_op = xprof_views::kernel::tensor_core_time_by_op(&ks);
    assert_eq!(by_op["jit(f)/dot_general"], (6000, 6000));
    assert_eq!(by_op["jit(f)/add"], (0, 2000));
}

#[test]
fn kernel_launch_params_parse_like_xprof() {
    use xprof_views::kernel::*;
    let mut k = KernelKey::default();
    let mut occ = 0.0;
    parse_launch_params(
        "regs:x grid:1,2 block:4,5,6\nocc_pct:12.5 junk",
        &mut k,
        &mut occ,
    );
    // Malformed values keep the defaults (grid 1,1,1; regs 0).
    assert_eq!(
        (k.registers_per_thread, k.grid_dim, k.block_dim),
        (0, [1, 1, 1], [4, 5, 6])
    );
    assert_eq!(occ, 12.5);
    assert!(is_einsum_tensor_core_eligible("ab,bc->ac"));
    assert!(!is_einsum_tensor_core_eligible("ab->ba"));
    assert!(is_op_tensor_core_eligible("a/BatchMatMulV2"));
    assert!(!is_op_tensor_core_eligible("a/MatMulX"));
}

#[test]
fn kernel_stats_no_data_without_gpu_kernels() {
    let tpu = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Ops", |l| l.event("fusion", 0, 100))
    });
    let ks = xprof_views::kernel::kernel_stats(&raw(tpu));
    assert_eq!((ks.gpu_planes, ks.reports.len()), (0, 0));
    let gpu_no_details = XSpaceBuilder::new().plane("/device:GPU:0", |p| {
        p.line("stream 1", |l| l.event("k", 0, 1000))
    });
    let ks = xprof_views::kernel::kernel_stats(&raw(gpu_no_details));
    assert_eq!(
        (ks.gpu_planes, ks.kernel_events, ks.reports.len()),
        (1, 0, 0)
    );
}

// ----------------------------------------------------------------------------------------
// perf_counters and utilization_viewer (TPU v7x counter samples)

fn id(table: &[(&str, u64)], name: &str) -> u64 {
    table.iter().find(|(n, _)| *n == name).unwrap().1
}

fn pwr(die: u32, name: &str) -> u64 {
    V7X_PWRMGR
        .iter()
        .find(|(d, n, _)| *d == die && *n == name)
        .unwrap()
        .2
}

fn sc(die: u8, core: u8, tile: i8, name: &str) -> u64 {
    V7X_SC
        .iter()
        .find(|x| x.0 == die && x.1 == core && x.2 == tile && SC_NAMES[usize::from(x.3)] == name)
        .unwrap()
        .4
}

fn v7x_capture() -> XSpaceBuilder {
    let counters: Vec<(String, u64, u64)> = vec![
        ("CYCLE_COUNT_0".into(), pwr(0, "CYCLE_COUNT"), 1000),
        ("CYCLE_COUNT_1".into(), pwr(1, "CYCLE_COUNT"), 2000),
        ("CLOCKS_SKIPPED_0".into(), pwr(0, "CLOCKS_SKIPPED"), 7),
        (
            "SCALAR_0".into(),
            id(V7X_TC_DIE0, "SCALAR_ALU_INSTRUCTION_0"),
            300,
        ),
        (
            "SCALAR_1".into(),
            id(V7X_TC_DIE0, "SCALAR_ALU_INSTRUCTION_1"),
            500,
        ),
        ("MXU_BUSY_1".into(), id(V7X_TC_DIE0, "MXU_BUSY_1"), 200),
        ("MXU_BUSY_2".into(), id(V7X_TC_DIE0, "MXU_BUSY_2"), 100),
        (
            "BF16_LMR_0".into(),
            id(V7X_TC_DIE0, "MATMUL_LMR_BF16_MXU_0"),
            10,
        ),
        (
            "TRANSPOSE_XLU_0".into(),
            id(V7X_TC_DIE0, "TRANSPOSE_XLU_0"),
            50,
        ),
        ("ICI_RD_0".into(), V7X_ICI_RD[0], 10),
        ("TC_CYCLES_DIE0".into(), id(V7X_TC_DIE0, "CYCLES"), 1900),
        ("HBM_RD_A".into(), V7X_HBM_RD_DIE0[0], 100),
        ("HBM_RD_B".into(), V7X_HBM_RD_DIE0[5], 20),
        ("HBM_WR_A".into(), V7X_HBM_WR_DIE0[3], 30),
        ("SC_D1C1_TILE0_CYCLES".into(), sc(1, 1, 0, "CYCLES"), 100),
        (
            "SC_D1C1_TILE3_VECTOR".into(),
            sc(1, 1, 3, "VECTOR_ISSUE"),
            64,
        ),
        (
            "SC_D1C1_TILE9_VECTOR".into(),
            sc(1, 1, 9, "VECTOR_ISSUE"),
            16,
        ),
        ("SCS_D0C0_SCALAR".into(), sc(0, 0, -1, "SCALAR_ISSUE"), 10),
        ("SCS_D0C0_CYCLES".into(), sc(0, 0, -1, "CYCLES"), 40),
        ("ICI_WR_2".into(), V7X_ICI_WR[2], 3),
    ];
    XSpaceBuilder::new()
        .hostname("v7x-host")
        .plane("/device:TPU:0", |p| {
            let p = p
                .stat("device_id", 3i64)
                .stat("global_chip_id", 7i64)
                .stat("device_type_string", "TPU v7x");
            let mut p = p;
            for (name, cid, _) in &counters {
                p = p.metadata_stat_value(name, "performance_counter_id", *cid);
            }
            p.line_with_id(5, "sample 5", |mut l| {
                for (i, (name, _, v)) in counters.iter().enumerate() {
                    l = l
                        .event(name, i as i64 * 10, 1)
                        .stat("counter_value", *v)
                        .stat("performance_counter_description", Ref("a counter"))
                        .stat("performance_counter_sets", "set0");
                }
                l
            })
        })
}

#[test]
fn perf_counters_list_every_counter_sample() {
    let (t, p) = xprof_views::counters::perf_counters_with_presence(&raw(v7x_capture()));
    assert_eq!(
        (p.device_planes, p.planes_with_chip_id, p.counter_events),
        (1, 1, 20)
    );
    assert_eq!(t.records.len(), 20);
    let r = &t.records[3];
    assert_eq!(r["Host"], json!("host0"));
    assert_eq!(r["Chip"], json!(7)); // global_chip_id wins over device_id
    assert_eq!(r["Kernel"], json!("sample 5"));
    assert_eq!(r["Sample"], json!(5));
    assert_eq!(r["Counter"], json!("scalar_0")); // lower-cased event name
    assert_eq!(r["Value"], json!(300));
    assert_eq!(r["Value_hex"], json!("0x12c"));
    assert_eq!(r["Description"], json!("a counter"));
    assert_eq!(r["Set"], json!("set0"));
}

#[test]
fn utilization_viewer_derives_units_from_v7x_counters() {
    let t = xprof_views::counters::utilization_viewer(&raw(v7x_capture()));
    let row = |node: u64, name: &str| {
        t.records
            .iter()
            .find(|r| r["node"] == json!(node) && r["name"] == json!(name))
            .unwrap_or_else(|| panic!("no row {node} {name}"))
            .clone()
    };
    // Every row carries the plane's device id and the line id as sample.
    assert!(
        t.records
            .iter()
            .all(|r| r["device"] == json!(3) && r["sample"] == json!(5))
    );
    let r = row(0, "Clocks Skipped");
    assert_eq!(
        (r["achieved"].as_f64(), r["peak"].as_f64()),
        (Some(7.0), Some(1000.0))
    );
    let r = row(0, "Scalar Unit"); // (300 + 500) of 2 × 1000 cycles
    assert_eq!(
        (r["achieved"].as_f64(), r["peak"].as_f64()),
        (Some(800.0), Some(2000.0))
    );
    let r = row(0, "Avg MXU Busy"); // 0.5 × 200 + 100
    assert_eq!(
        (r["achieved"].as_f64(), r["peak"].as_f64()),
        (Some(200.0), Some(1000.0))
    );
    let r = row(0, "MXU0"); // 4 cycles per bf16 LMR instruction
    assert_eq!(r["achieved"].as_f64(), Some(40.0));
    let r = row(0, "XLU0"); // v7x: one cycle per XLU instruction
    assert_eq!(
        (r["achieved"].as_f64(), r["peak"].as_f64()),
        (Some(50.0), Some(1000.0))
    );
    let r = row(0, "ICI (Read)"); // 10 flits × 128 B over 1000 cycles at 1 GHz
    assert_eq!(r["achieved"].as_f64(), Some(1280.0));
    assert!(close(r["peak"].as_f64().unwrap(), 294947368421.0526 * 1e-6));
    let r = row(0, "ICI (Write)");
    assert_eq!(r["achieved"].as_f64(), Some(384.0));
    // HBM: (100 + 20) read beats and 30 write requests of 32 B over 1900 TensorCore cycles at
    // 1.9 GHz (1 µs) against 3433 GiB/s.
    let r = row(0, "HBM Rd+Wr - core 0");
    assert_eq!(r["achieved"].as_f64(), Some(150.0 * 32.0));
    assert!(close(
        r["peak"].as_f64().unwrap(),
        3433.0 * 1073741824.0 * 1e-6
    ));
    let r = row(0, "HBM Read Ratio");
    assert_eq!(
        (r["achieved"].as_f64(), r["peak"].as_f64()),
        (Some(3840.0), Some(4800.0))
    );
    assert_eq!(r["unit"], json!("percent"));
    // Core 1 has its own cycle counter (2000) and no instruction counts.
    let r = row(1, "Scalar Unit");
    assert_eq!(
        (r["achieved"].as_f64(), r["peak"].as_f64()),
        (Some(0.0), Some(4000.0))
    );
    // SparseCores: node = die × 2 + core; tiles summed against 16 × tile-0 cycles.
    let r = row(3, "SC Vector Issue");
    assert_eq!(
        (r["achieved"].as_f64(), r["peak"].as_f64()),
        (Some(80.0), Some(1600.0))
    );
    let r = row(0, "SCS Scalar Issue");
    assert_eq!(
        (r["achieved"].as_f64(), r["peak"].as_f64()),
        (Some(10.0), Some(40.0))
    );
    // Four SparseCores × (12 tile + 4 sequencer metrics).
    let sc_rows = t
        .records
        .iter()
        .filter(|r| {
            let n = r["name"].as_str().unwrap();
            n.starts_with("TEC ") || n.starts_with("SC ") || n.starts_with("SCS")
        })
        .count();
    assert_eq!(sc_rows, 4 * 16);
    // XProf repeats the per-chip ICI rows once per TensorCore.
    assert_eq!(
        t.records
            .iter()
            .filter(|r| r["name"] == json!("ICI (Read)"))
            .count(),
        2
    );
}

#[test]
fn counters_no_data_without_samples() {
    // v6e plane without device_id / counter values: nothing, as XProf.
    let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.stat("device_type_string", "TPU v6 Lite")
            .line("_counters_", |l| l.event("MXU", 0, 10).stat("% util", 50.0))
    });
    let raw = raw(b);
    assert!(
        xprof_views::counters::utilization_viewer(&raw)
            .records
            .is_empty()
    );
    let (t, p) = xprof_views::counters::perf_counters_with_presence(&raw);
    assert!(t.records.is_empty());
    assert_eq!((p.device_planes, p.planes_with_chip_id), (1, 0));
    // Other TPU generations are not read by the utilization viewer.
    let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.stat("device_id", 0i64)
            .stat("device_type_string", "TPU v5p")
            .line("s", |l| l.event("c", 0, 1).stat("counter_value", 5u64))
    });
    assert!(
        xprof_views::counters::utilization_viewer(&raw_of(b))
            .records
            .is_empty()
    );
}

fn raw_of(b: XSpaceBuilder) -> Vec<(String, XSpace)> {
    raw(b)
}

// ----------------------------------------------------------------------------------------
// pod_viewer and input pipeline on a two-core, two-step TPU capture

fn tpu_two_cores() -> XSpaceBuilder {
    let details = CoreDetails {
        hostname: "tpu-host-a".into(),
        device_ordinal: 0,
        ..Default::default()
    }
    .encode_to_vec();
    // Per core: steps [0, 100 µs) and [100, 250 µs); ops inside (offsets in ps).
    let core = |p: xprof_testkit::PlaneBuilder, conv: i64, ar: i64, infeed: i64| {
        p.stat("peak_teraflops_per_second", 100.0)
            .stat("peak_hbm_bw_gigabytes_per_second", 1000.0)
            .line("Steps", |l| {
                l.event("0", 0, 100_000_000)
                    .stat("group_id", 0i64)
                    .event("1", 100_000_000, 150_000_000)
                    .stat("group_id", 1i64)
            })
            .line("XLA Modules", |l| {
                l.event("jit_step(1)", 0, 100_000_000).event(
                    "jit_step(1)",
                    100_000_000,
                    150_000_000,
                )
            })
            .line("XLA Ops", |l| {
                let op = |l: xprof_testkit::LineBuilder,
                          name: &str,
                          cat: &str,
                          sym: u64,
                          at: i64,
                          d: i64| {
                    // Grouped already, as the steps (XProf reads such a capture as it is).
                    l.event(name, at, d)
                        .metadata_stat("hlo_category", cat)
                        .metadata_stat("program_id", 1u64)
                        .metadata_stat("symbol_id", sym)
                        .stat("group_id", i64::from(at >= 100_000_000))
                };
                let l = op(l, "conv.1", "convolution", 1, 1_000_000, conv);
                let l = op(l, "all-reduce.2", "all-reduce", 2, 60_000_000, ar);
                let l = op(l, "infeed.3", "infeed", 3, 101_000_000, infeed);
                op(l, "conv.1", "convolution", 1, 120_000_000, conv)
            })
    };
    XSpaceBuilder::new()
        .hostname("tpu-host-a")
        .plane("/device:TPU:0", |p| {
            core(
                p.id(1).stat("core_details", details.clone()),
                40_000_000,
                20_000_000,
                30_000_000,
            )
        })
        .plane("/device:TPU:1", |p| {
            core(p.id(2), 50_000_000, 10_000_000, 60_000_000)
        })
}

#[test]
fn pod_viewer_breaks_down_each_core_of_each_step() {
    let (_d, r) = loaded(&tpu_two_cores());
    let s = r.op_stats().unwrap();
    assert_eq!(s.steps.steps.len(), 2);
    let pv = xprof_views::pod::pod_viewer(&s, &r.core_details());
    assert_eq!(pv["deviceType"], json!(s.run_env.device_type));
    assert_eq!(pv["diagnostics"]["warnings"], json!([]));
    let steps = pv["podStatsSequence"]["podStatsMap"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    let c0 = &steps[0]["podStatsPerCore"]["1"];
    let c1 = &steps[0]["podStatsPerCore"]["2"];
    assert_eq!(c0["hostName"], json!("tpu-host-a"));
    assert_eq!(c0["totalDurationUs"], json!(100.0));
    assert_eq!(c0["totalDurationPs"], json!(100_000_000u64));
    // XProf maps the step's HLO categories onto the components.
    let m = &c0["stepBreakdownUs"];
    // Step 0, core 0: conv 40 µs (compute), all-reduce 20 µs (collectives), idle 40 µs.
    assert_eq!(
        (m["1"].as_f64(), m["3"].as_f64(), m["9"].as_f64()),
        (Some(40.0), Some(20.0), Some(40.0))
    );
    assert_eq!(c0["bottleneck"], json!("Device compute"));
    // Core 1 has no core_details: XProf would drop it; we keep it and say so.
    assert!(c1["coreDetails_reason"].is_string());
    let m = &c1["stepBreakdownUs"];
    assert_eq!(
        (m["1"].as_f64(), m["3"].as_f64(), m["9"].as_f64()),
        (Some(50.0), Some(10.0), Some(40.0))
    );
    // Step 1, core 1: infeed 60 µs, conv 50 µs, idle 40 µs of 150 µs → Input is the largest.
    let c1s1 = &steps[1]["podStatsPerCore"]["2"];
    assert_eq!(c1s1["totalDurationUs"], json!(150.0));
    assert_eq!(c1s1["stepBreakdownUs"]["6"].as_f64(), Some(60.0));
    assert_eq!(c1s1["bottleneck"], json!("Input"));
}

#[test]
fn input_pipeline_on_tpu_steps() {
    let (_d, r) = loaded(&tpu_two_cores());
    let s = r.op_stats().unwrap();
    let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
    let t = &ip.tables[1];
    assert_eq!(t.records.len(), 2);
    // Step 1 (150 µs on both cores): infeed 30 µs on core 0, 60 µs on core 1. XProf takes the
    // largest infeed (0.06 ms) and the per-core infeed shares 20 % and 40 %.
    let r1 = &t.records[1];
    assert!(close(r1["tcInfeedTimeMs"].as_f64().unwrap(), 0.06));
    assert!(close(r1["infeedPercentMin"].as_f64().unwrap(), 20.0));
    assert!(close(r1["infeedPercentMax"].as_f64().unwrap(), 40.0));
    assert!(close(r1["infeedPercentAverage"].as_f64().unwrap(), 30.0));
    // Compute: the smallest "optimal" step over cores — core 0: 150 − infeed 30 − idle 80
    // (conv 40 µs is its only other op) = 40 µs; idle: the shortest step minus the rest,
    // 0.15 − 0.04 − 0.06 = 0.05 ms.
    assert!(close(r1["tcComputeTimeMs"].as_f64().unwrap(), 0.04));
    assert!(close(r1["tcIdleTimeMs"].as_f64().unwrap(), 0.05));
    // The max-infeed core of step 1 is core 1, which has no core_details → "unknown".
    let cores = &ip.tables[0];
    assert_eq!(cores.records[0]["1"], json!("1"));
    assert_eq!(cores.records[1]["1"], json!("unknown"));
    // Input share: Σ max infeed / Σ step time = 0.06 / (0.1 + 0.15) = 24 % ≥ 20 %: host.
    assert!(close(ip.bottleneck.input_percent, 24.0));
    assert_eq!(ip.bottleneck.input_classification, "host");
    assert!(
        t.properties["input_conclusion"]
            .as_str()
            .unwrap()
            .contains("HIGHLY input-bound because 24.0%")
    );
    // (0.1 + 0.15) / 2 = 0.125, printed like C's %.2f (exact half → even): "0.12".
    assert_eq!(t.properties["steptime_ms_average"], json!("0.12"));
    // XProf's table has no idle statement (its TpuBottleneckAnalysis does): ours is in
    // `bottleneck`, above XProf's 3 % threshold.
    assert!(!t.properties.contains_key("tc_idle_conclusion"));
    assert!(ip.bottleneck.idle_percent >= 3.0);
    assert!(ip.bottleneck.tc_idle_statement.starts_with(&format!(
        "{:.1} % of the total step time",
        ip.bottleneck.idle_percent
    )));
}

#[test]
fn pod_viewer_no_steps_is_empty_with_xprof_warning() {
    let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Ops", |l| {
            l.event("conv.1", 0, 100)
                .metadata_stat("hlo_category", "convolution")
                .metadata_stat("symbol_id", 1u64)
        })
    });
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    let pv = xprof_views::pod::pod_viewer(&s, &r.core_details());
    assert_eq!(pv["podStatsSequence"]["podStatsMap"], json!([]));
    assert_eq!(
        pv["diagnostics"]["warnings"][0],
        json!(xprof_views::pod::NO_STEP_MARKER)
    );
}

// ----------------------------------------------------------------------------------------
// megascale_stats (one DCN all-gather on TPU core 0)

fn dcn_hlo() -> xla::HloProto {
    let f32_1024 = xla::ShapeProto {
        element_type: xla::PrimitiveType::F32 as i32,
        dimensions: vec![1024],
        ..Default::default()
    };
    let token = xla::ShapeProto {
        element_type: xla::PrimitiveType::Token as i32,
        ..Default::default()
    };
    let attrs = |kv: &[(&str, &str)]| {
        Some(Box::new(xla::FrontendAttributes {
            map: kv
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }))
    };
    let instr = |name: &str, opcode: &str, shape: xla::ShapeProto, fa| xla::HloInstructionProto {
        name: name.into(),
        opcode: opcode.into(),
        channel_id: 1,
        shape: Some(shape),
        frontend_attributes: fa,
        ..Default::default()
    };
    let tuple = xla::ShapeProto {
        element_type: xla::PrimitiveType::Tuple as i32,
        tuple_shapes: vec![f32_1024.clone(), token.clone()],
        ..Default::default()
    };
    xla::HloProto {
        hlo_module: Some(xla::HloModuleProto {
            name: "jit_step".into(),
            computations: vec![xla::HloComputationProto {
                name: "main".into(),
                instructions: vec![
                    instr(
                        "send.1",
                        "send",
                        tuple.clone(),
                        attrs(&[
                            ("_xla_host_transfer_rendezvous", "rdv0"),
                            ("_xla_megascale_transfer_type", "ALL_GATHER"),
                        ]),
                    ),
                    instr("recv.2", "recv", tuple.clone(), None),
                    instr("send-done.1", "send-done", token.clone(), None),
                    instr("recv-done.2", "recv-done", tuple, None),
                ],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// DCN collective info with one endpoint group of 4 devices (field 2 → field 1 ×4).
fn four_endpoints() -> Vec<u8> {
    let endpoint = [0x0a, 0x00]; // EndpointGroup.endpoints: an empty Endpoint
    let group: Vec<u8> = endpoint.iter().copied().cycle().take(8).collect();
    let mut out = vec![0x12, group.len() as u8];
    out.extend(group);
    out
}

fn dcn_capture(with_megascale_host: bool) -> XSpaceBuilder {
    let b = XSpaceBuilder::new()
        .hostname("slice0")
        .plane("/host:metadata", |p| p.hlo_module(7, 7, &dcn_hlo()))
        .plane("/device:TPU:0", |p| {
            p.line("XLA Modules", |l| l.event("jit_step(7)", 0, 100_000_000))
                .line("XLA Ops", |l| {
                    l.event("send.1", 10_000_000, 2_000_000)
                        .metadata_stat("hlo_category", "host send")
                        .metadata_stat("dcn_collective_info", four_endpoints())
                        .event("recv.2", 13_000_000, 1_000_000)
                        .metadata_stat("hlo_category", "host recv")
                        .event("send-done.1", 20_000_000, 3_000_000)
                        .metadata_stat("hlo_category", "host send-done")
                        .event("recv-done.2", 40_000_000, 5_000_000)
                        .metadata_stat("hlo_category", "host recv-done")
                        // Outside any module: ignored.
                        .event("send.1", 200_000_000, 1_000_000)
                })
        });
    if with_megascale_host {
        b.plane("/host:CPU", |p| {
            p.line_with_id(1, "megascale", |l| l.event("MegaScale: AllGather", 0, 1000))
        })
    } else {
        b
    }
}

#[test]
fn megascale_summarises_a_dcn_transfer() {
    let space = XSpace::from_bytes(dcn_capture(true).to_bytes()).unwrap();
    let ms = xprof_views::megascale::megascale_stats(&space);
    assert_eq!(ms.presence.dcn_ops, 4);
    assert_eq!(ms.presence.dcn_ops_with_hlo, 4);
    assert_eq!(ms.summaries.len(), 1);
    let t = ms.table();
    let r = &t.records[0];
    assert_eq!(r["rendezvous_name"], json!("rdv0"));
    assert_eq!(r["send_op_name"], json!("send.1"));
    assert_eq!(r["recv_op_name"], json!("recv-done.2"));
    assert_eq!(r["transfer_type"], json!("ALL_GATHER"));
    // Slack: recv-done start (40 µs) − send start (10 µs) − DCN op time since the send
    // (2 + 1 + 3 µs) = 24 µs.
    assert!(close(r["slack_time"].as_f64().unwrap(), 0.024));
    // Observed: recv-done end (45 µs) − send start (10 µs).
    assert!(close(r["observed_duration"].as_f64().unwrap(), 0.035));
    assert!(close(r["send_stall"].as_f64().unwrap(), 0.002));
    assert!(close(r["send_done_stall"].as_f64().unwrap(), 0.003));
    assert!(r["recv_stall"].is_null());
    assert!(close(r["recv_stall_measured"].as_f64().unwrap(), 0.001));
    assert!(close(r["recv_done_stall"].as_f64().unwrap(), 0.005));
    // Stall: all four ops, 2 + 1 + 3 + 5 µs.
    assert!(close(r["stall_duration"].as_f64().unwrap(), 0.011));
    assert!(close(r["total_stall"].as_f64().unwrap(), 0.011));
    assert_eq!(r["occurrences"], json!(1));
    // All-gather over 4 devices of a 4096-byte buffer: 3/4 of it crosses the network.
    assert_eq!(r["net_tx_bytes"], json!(3072));
    // 3072 B in 24 µs = 1.024 Gbps.
    assert!(close(r["required_bandwidth"].as_f64().unwrap(), 1.024));
    assert_eq!(r["host_stall"], json!("-"));
}

#[test]
fn megascale_no_data_without_megascale_host_events() {
    let ms = xprof_views::megascale::megascale_stats(
        &XSpace::from_bytes(dcn_capture(false).to_bytes()).unwrap(),
    );
    assert!(ms.summaries.is_empty());
    assert!(!ms.presence.has_megascale_host_events);
    assert!(ms.presence.has_tpu0);
    assert_eq!(
        xprof_views::megascale::transmitted_bytes(4096, 4, "ALL_REDUCE"),
        6144
    );
    assert_eq!(
        xprof_views::megascale::transmitted_bytes(4096, 0, "ALL_REDUCE"),
        0
    );
}

// ----------------------------------------------------------------------------------------
// framework_op_stats on the TPU capture

#[test]
fn framework_ops_group_device_ops_by_provenance() {
    let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.stat("peak_teraflops_per_second", 100.0)
            .stat("peak_hbm_bw_gigabytes_per_second", 1000.0)
            .line("XLA Modules", |l| l.event("jit_f(1)", 0, 1_000_000))
            .line("XLA Ops", |l| {
                l.event("dot.1", 0, 300_000)
                    .metadata_stat("hlo_category", "convolution")
                    .metadata_stat("symbol_id", 1u64)
                    .metadata_stat("program_id", 1u64)
                    .metadata_stat("tf_op", "jit(f)/dense/dot_general:dot_general")
                    .metadata_stat("flops", 2.5e7)
                    .metadata_stat("bytes_accessed", 1000u64)
                    .event("add.2", 400_000, 100_000)
                    .metadata_stat("hlo_category", "loop fusion")
                    .metadata_stat("symbol_id", 2u64)
                    .metadata_stat("program_id", 1u64)
                    .metadata_stat("tf_op", "jit(f)/dense/dot_general:dot_general")
                    .event("add.2", 600_000, 100_000)
            })
    });
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    let (with_idle, without_idle) = xprof_views::framework::framework_op_stats(&s);
    let op = with_idle
        .records
        .iter()
        .find(|r| r["operation"] == json!("jit(f)/dense/dot_general"))
        .expect("framework op");
    assert_eq!(op["type"], json!("dot_general"));
    assert_eq!(op["host_or_device"], json!("Device"));
    // Occurrences: the max over its HLO ops (dot once, add twice).
    assert_eq!(op["occurrences"], json!(2));
    assert_eq!(op["total_self_time_ps"], json!(500_000u64));
    assert!(close(op["total_self_time"].as_f64().unwrap(), 0.5));
    assert!(close(op["avg_self_time"].as_f64().unwrap(), 0.25));
    // 2.5e7 FLOP over the op's 500 ns total time = 5e4 GFLOP/s, half the 100 TFLOP/s peak,
    // while 1000 B in 500 ns is 0.2 % of the HBM peak: compute bound; intensity 2.5e4.
    assert!(close(op["measured_flop_rate"].as_f64().unwrap(), 5.0e4));
    assert!(close(op["operational_intensity"].as_f64().unwrap(), 2.5e4));
    assert_eq!(op["bound_by"], json!("Compute"));
    assert!(
        without_idle
            .records
            .iter()
            .all(|r| r["type"] != json!("IDLE"))
    );
    assert!(
        with_idle
            .records
            .iter()
            .any(|r| r["operation"] == json!("IDLE"))
    );
}

// ----------------------------------------------------------------------------------------
// smart suggestions and host boundness

#[test]
fn suggestions_fire_on_their_signals_and_cite_them() {
    use xprof_views::suggestions::*;
    let mut sig = Signals {
        hardware_type: "TPU".into(),
        input_percent: 25.0,
        enqueue_percent_of_input: Some(40.0),
        non_enqueue_percent_of_input: Some(60.0),
        tc_idle_percent: Some(12.0),
        collective_percent: Some(35.0),
        data_shuffle_percent: Some(5.0),
        measured_flops_percent: Some(80.0),
        measured_hbm_percent: Some(20.0),
        ..Default::default()
    };
    let v = smart_suggestions(&sig);
    let rules: Vec<&str> = v["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ruleName"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "DataTransferBoundRule",
            "HostProcessingBoundRule",
            "TensorCoreIdleBoundRule",
            "CollectiveBoundRule",
            "MeasuredComputeBoundRule"
        ]
    );
    // Open-source XProf registers none of these rules (only BarrierCores): XProf's own view
    // shows none of them, so they are labelled apart from ours and from what XProf prints.
    let sources: Vec<&str> = v["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    assert_eq!(
        sources,
        [
            "xprof-internal",
            "xprof-internal",
            "xprof-internal",
            "xprof-internal",
            "xprof-rs"
        ]
    );
    let dt = &v["suggestions"][0];
    assert_eq!(dt["signals"]["enqueue_percent_of_input"], json!(40.0));
    assert!(dt["suggestionText"].as_str().unwrap().contains("40.0%"));
    // Measured shares are printed as they are.
    let shown = &v["signals"];
    assert_eq!(shown["avg_collective_percent_of_step"], json!(35.0));
    assert_eq!(shown["avg_data_shuffle_percent_of_step"], json!(5.0));
    assert_eq!(shown["non_enqueue_percent_of_input"], json!(60.0));
    assert!(shown.get("avg_collective_percent_of_step_reason").is_none());
    // Below every threshold: nothing fires, but the list is there.
    sig = Signals::default();
    assert_eq!(smart_suggestions(&sig)["suggestions"], json!([]));
}

/// A capture whose steps have no per-core breakdown (CPU-only) and no input time: XProf's
/// rules see 0 for the collective, data-shuffle and input shares, which it could not measure;
/// we print null with the reason instead of a 0 % that reads as a finding.
#[test]
fn unmeasured_step_shares_are_null_with_a_reason_not_zero() {
    use xprof_views::suggestions::*;
    let sig = Signals {
        hardware_type: "CPU_ONLY".into(),
        ..Default::default()
    };
    let v = smart_suggestions(&sig);
    let shown = &v["signals"];
    for key in [
        "avg_collective_percent_of_step",
        "avg_data_shuffle_percent_of_step",
        "enqueue_percent_of_input",
        "non_enqueue_percent_of_input",
    ] {
        assert_eq!(shown[key], Value::Null, "{key}");
        let reason = shown[format!("{key}_reason")].as_str().unwrap_or_default();
        assert!(reason.contains("XProf's rules see 0"), "{key}: {reason}");
    }
    assert_eq!(v["suggestions"], json!([]));
}

#[test]
fn host_boundness_needs_steps() {
    let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Ops", |l| l.event("x", 0, 10))
    });
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
    let v = xprof_views::suggestions::host_boundness(&s, &ip, None);
    assert_eq!(v["status"], json!("INSUFFICIENT_DATA"));
    // With steps the gate runs and cites its numbers.
    let (_d, r) = loaded(&tpu_two_cores());
    let s = r.op_stats().unwrap();
    let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
    let v = xprof_views::suggestions::host_boundness(&s, &ip, None);
    assert_eq!(v["metrics"]["number_of_steps"], json!(2));
    assert_eq!(v["metrics"]["core_count"], json!(2));
    assert!(v["metrics"]["ici_read_utilization_percent"].is_null());
    assert!(v["metrics"]["ici_read_utilization_percent_reason"].is_string());
    assert!(["NOT_HOST_BOUND", "UNKNOWN"].contains(&v["status"].as_str().unwrap()));
    assert!(v["reasons"].as_array().unwrap().len() >= 2);
}

#[test]
fn framework_ops_on_gpu_carry_tensor_core_utilization() {
    let b = gpu_jax_capture();
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    assert!(
        s.run_env.device_type.contains("GPU"),
        "{}",
        s.run_env.device_type
    );
    let rawv = raw(gpu_jax_capture());
    let ks = xprof_views::kernel::kernel_stats_with_hlo(
        &rawv,
        &xprof_views::kernel::HloOpNames::new(&rawv, &[]),
    );
    let by_op = xprof_views::kernel::tensor_core_time_by_op(&ks);
    let t = xprof_views::framework::table_with_kernels(&s, false, Some(&by_op));
    assert!(t.columns.iter().any(|c| c == "gpu_tensorcore_utilization"));
    let row = |op: &str| {
        t.records
            .iter()
            .find(|r| r["operation"] == json!(op))
            .unwrap_or_else(|| panic!("no {op} in {:?}", t.records))
            .clone()
    };
    assert_eq!(
        row("jit(f)/dot_general")["gpu_tensorcore_utilization"],
        json!(1.0)
    );
    assert_eq!(row("jit(f)/add")["gpu_tensorcore_utilization"], json!(0.0));
    // Without kernel stats the column is a placeholder, not a 0.
    let t = xprof_views::framework::table(&s, false);
    let r = &t.records[0];
    assert!(r["gpu_tensorcore_utilization"].is_null());
    assert!(r["gpu_tensorcore_utilization_reason"].is_string());
}

/// A host-only capture with two `train` steps numbered `first`, `first + 1`.
fn host_steps(name: &str, first: i64) -> XSpaceBuilder {
    XSpaceBuilder::new().hostname(name).plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |l| {
            l.event("train", 0, 1_000_000)
                .stat("_r", 1i64)
                .stat("step_num", first)
                .event("matmul", 100_000, 400_000)
                .event("train", 2_000_000, 1_000_000)
                .stat("_r", 1i64)
                .stat("step_num", first + 1)
                .event("matmul", 2_100_000, 600_000)
        })
    })
}

/// Host-only captures of `train` steps of 10 µs starting at `starts` (µs).
fn host_steps_at(name: &str, starts: &[i64]) -> XSpaceBuilder {
    let starts = starts.to_vec();
    XSpaceBuilder::new()
        .hostname(name)
        .plane("/host:CPU", move |p| {
            p.line_with_id(1, "python", move |mut l| {
                for (i, s) in starts.iter().enumerate() {
                    l = l
                        .event("train", s * 1_000_000, 10_000_000)
                        .stat("_r", 1i64)
                        .stat("step_num", i as i64)
                        .event("matmul", s * 1_000_000 + 1_000_000, 5_000_000);
                }
                l
            })
        })
}

/// The step warning of both views for `hosts` combined, and whether XProf's empty
/// intersection was found.
fn combined_step_warning(hosts: &[(&str, XSpaceBuilder)]) -> (Value, bool) {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<(String, std::path::PathBuf)> = hosts
        .iter()
        .map(|(name, b)| {
            let f = dir.path().join(format!("{name}.xplane.pb"));
            b.write(&f).unwrap();
            (name.to_string(), f)
        })
        .collect();
    let r = xprof_views::load::load_hosts(&files, &[]).unwrap();
    let (s, empty) = r.op_stats_checked().unwrap();
    assert!(s.steps.steps.is_empty());
    let pv = xprof_views::pod::pod_viewer_with(&s, &r.core_details(), empty);
    let ip = xprof_views::input_pipeline::input_pipeline_with(&s, &r.core_details(), empty);
    assert_eq!(
        json!([ip.tables[4].records[0]["message"]]),
        pv["diagnostics"]["warnings"]
    );
    (pv["diagnostics"]["warnings"][0].clone(), empty)
}

#[test]
fn combined_hosts_whose_steps_do_not_meet_say_so() {
    // Checked with XProf 2.24.2. Host 1 (the shortest span) is the chief; host 0's third step
    // matches the chief's first, host 2's first the chief's third: the stretches every host
    // covers do not meet, which XProf calls an empty intersection.
    let (warning, empty) = combined_step_warning(&[
        ("h0", host_steps_at("h0", &[0, 10, 100])),
        ("h1", host_steps_at("h1", &[100, 110, 120])),
        ("h2", host_steps_at("h2", &[120, 200])),
    ]);
    assert!(empty);
    assert_eq!(warning, json!(xprof_views::pod::EMPTY_INTERSECT));
}

#[test]
fn combined_hosts_one_without_steps_have_no_step_marker() {
    // Checked with XProf 2.24.2: the host without step markers spans no time, so it is the
    // chief of the intersection, which stops there: no step, and not an empty intersection.
    let (warning, empty) = combined_step_warning(&[
        ("a", host_steps("host-a", 0)),
        (
            "b",
            XSpaceBuilder::new()
                .hostname("host-b")
                .plane("/host:CPU", |p| {
                    p.line_with_id(1, "python", |l| l.event("matmul", 0, 400_000))
                }),
        ),
    ]);
    assert!(!empty);
    assert_eq!(warning, json!(xprof_views::pod::NO_STEP_MARKER));
}

#[test]
fn pod_viewer_numbers_cores_of_combined_hosts_like_xprof() {
    let host = |name: &str| host_steps(name, 0);
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        dir.path().join("a.xplane.pb"),
        dir.path().join("b.xplane.pb"),
    );
    host("host-a").write(&a).unwrap();
    host("host-b").write(&b).unwrap();
    let r = xprof_views::load::load_hosts(&[("a".into(), a), ("b".into(), b)], &[]).unwrap();
    let s = r.op_stats().unwrap();
    let pv = xprof_views::pod::pod_viewer(&s, &r.core_details());
    let steps = pv["podStatsSequence"]["podStatsMap"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    let cores = steps[0]["podStatsPerCore"].as_object().unwrap();
    // Host index × 1000 + XProf's host-step core id 1.
    assert_eq!(cores.keys().collect::<Vec<_>>(), ["1", "1001"]);
    assert_eq!(cores["1"]["hostName"], json!("host-a"));
    assert_eq!(cores["1001"]["hostName"], json!("host-b"));
    // Step 0: 1 µs, of which 0.4 µs host compute and the rest unaccounted ("All others").
    let c = &cores["1"];
    assert_eq!(c["totalDurationUs"], json!(1.0));
    assert_eq!(c["stepBreakdownUs"]["4"], json!(0.4));
    assert_eq!(c["stepBreakdownUs"]["9"], json!(0.6));
    assert_eq!(c["bottleneck"], json!("All others"));
}

#[test]
fn host_input_ops_are_categorised_and_scaled_like_xprof() {
    let b = XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(7, "tf_data_worker", |l| {
            l.event("Iterator::Prefetch::TFRecord", 0, 300_000_000)
                .event("Iterator::Map", 400_000_000, 100_000_000)
                .event(
                    "infeed/InfeedEnqueueTuple:InfeedEnqueueTuple",
                    600_000_000,
                    600_000_000,
                )
        })
    });
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
    let t = &ip.tables[2];
    let ops: Vec<(&str, &str)> = t
        .records
        .iter()
        .map(|r| {
            (
                r["opName"].as_str().unwrap(),
                r["category"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("infeed/InfeedEnqueueTuple", "Enqueue"),
            ("Iterator::Prefetch::TFRecord", "Advanced file read"),
            ("Iterator::Map", "Preprocessing"),
        ]
    );
    // Shares of the 1000 µs of input-op self time.
    assert!(close(
        t.records[0]["selfTimeInPercent"].as_f64().unwrap(),
        0.6
    ));
    assert!(close(t.records[1]["timeInMs"].as_f64().unwrap(), 0.3));
    // No steps → no host-to-device ratio: the non-enqueue time is the input ops' own 400 µs,
    // split by category.
    assert_eq!(t.properties["enqueue_us"], json!("600.000"));
    assert_eq!(t.properties["advanced_file_read_us"], json!("300.000"));
    assert_eq!(t.properties["preprocessing_us"], json!("100.000"));
    assert_eq!(t.properties["demanded_file_read_us"], json!("0.000"));
    assert_eq!(t.properties["unclassified_nonequeue_us"], json!("0.000"));
}

#[test]
fn barrier_and_debug_print_rules_read_event_time_fractions() {
    // Four 100 µs steps; in each, barrier-cores waits 20 µs and debug_print takes 6 µs.
    let b = XSpaceBuilder::new()
        .hostname("tpu-host")
        .plane("/device:TPU:0", |p| {
            let p = p.line("Steps", |mut l| {
                for g in 0..4i64 {
                    l = l
                        .event(&g.to_string(), g * 100_000_000, 100_000_000)
                        .stat("group_id", g);
                }
                l
            });
            p.line("XLA Ops", |mut l| {
                for g in 0..4i64 {
                    let t = g * 100_000_000;
                    l = l
                        .event("fusion.1", t + 1_000_000, 50_000_000)
                        .metadata_stat("hlo_category", "loop fusion")
                        .metadata_stat("symbol_id", 1u64)
                        .stat("group_id", g)
                        .event("barrier-cores.2", t + 60_000_000, 20_000_000)
                        .metadata_stat("hlo_category", "barrier")
                        .metadata_stat("symbol_id", 2u64)
                        .stat("group_id", g)
                        .stat("device_duration_ps", 20_000_000u64)
                        .event("debug_print.3", t + 85_000_000, 6_000_000)
                        .stat("group_id", g)
                        .stat("device_duration_ps", 6_000_000u64);
                }
                l
            })
        });
    let (_d, r) = loaded(&b);
    let bc = xprof_views::suggestions::event_time_fractions(&r, "barrier-cores");
    // First and last steps dropped: two 0.2 fractions.
    assert_eq!(bc.per_chip["/device:TPU:0"], vec![0.2f32, 0.2]);
    // XProf keeps fractions as f32.
    assert!((bc.avg_percent().unwrap() - 20.0).abs() < 1e-4);
    let dp = xprof_views::suggestions::event_time_fractions(&r, "debug_print");
    assert_eq!(dp.per_host_percent().len(), 1);
    assert!((dp.per_host_percent()[0].1 - 6.0).abs() < 1e-4);
    let s = r.op_stats().unwrap();
    let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
    let sig = xprof_views::suggestions::signals_with_events(&s, &ip, &r);
    let v = xprof_views::suggestions::smart_suggestions(&sig);
    let rules: Vec<&str> = v["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ruleName"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"BarrierCoresRule"), "{rules:?}");
    assert!(rules.contains(&"DebugPrintRule"), "{rules:?}");
    // Of the two, open-source XProf runs only BarrierCores.
    let source = |rule: &str| {
        v["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["ruleName"] == rule)
            .map(|s| s["source"].clone())
    };
    assert_eq!(source("BarrierCoresRule"), Some(json!("xprof")));
    assert_eq!(source("DebugPrintRule"), Some(json!("xprof-internal")));
    let avg = v["signals"]["avg_barrier_cores_percent_of_step"]
        .as_f64()
        .unwrap();
    assert!((avg - 20.0).abs() < 1e-4);
    // TPU steps carry op time by category: no collective here is a measured 0 %.
    assert_eq!(v["signals"]["avg_collective_percent_of_step"], json!(0.0));
}

/// GPU steps carry time by event type, not op time by category (XProf builds the latter for
/// TPU steps only), so the collective and data-shuffle shares are unknown, not 0 %.
#[test]
fn gpu_steps_leave_the_category_shares_unknown() {
    let b = XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.line_with_id(1, "python", |l| {
                l.event("train", 0, 200)
                    .stat("group_id", 3i64)
                    .event("train", 200, 200)
                    .stat("group_id", 4i64)
            })
        })
        .plane("/device:GPU:0", |p| {
            p.line_with_id(1, "Stream #1", |l| {
                l.event("all-reduce.1", 10, 100)
                    .stat("correlation_id", 1i64)
                    .stat("group_id", 3i64)
                    .event("all-reduce.1", 210, 100)
                    .stat("correlation_id", 2i64)
                    .stat("group_id", 4i64)
            })
        });
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    assert_eq!(s.steps.steps.len(), 2);
    let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
    let v =
        xprof_views::suggestions::smart_suggestions(&xprof_views::suggestions::signals(&s, &ip));
    for key in [
        "avg_collective_percent_of_step",
        "avg_data_shuffle_percent_of_step",
    ] {
        assert_eq!(v["signals"][key], Value::Null, "{key}");
        let reason = v["signals"][format!("{key}_reason")].as_str().unwrap();
        assert!(reason.contains("GPU"), "{reason}");
    }
}

#[test]
fn extreme_values_do_not_panic() {
    // Every counter at u64::MAX, kernels lasting i64::MAX ps, DCN ops at the end of time.
    let counters: Vec<u64> = V7X_TC_DIE0
        .iter()
        .map(|x| x.1)
        .chain(V7X_HBM_RD_DIE0.iter().copied())
        .chain(V7X_PWRMGR.iter().map(|x| x.2))
        .collect();
    let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        let mut p = p
            .stat("device_id", 0i64)
            .stat("device_type_string", "TPU v7x");
        for (i, id) in counters.iter().enumerate() {
            p = p.metadata_stat_value(&format!("c{i}"), "performance_counter_id", *id);
        }
        p.line("s", |mut l| {
            for i in 0..counters.len() {
                l = l
                    .event(&format!("c{i}"), 0, 1)
                    .stat("counter_value", u64::MAX);
            }
            l
        })
    });
    let t = xprof_views::counters::utilization_viewer(&raw(b));
    assert!(!t.records.is_empty());
    let gpu = XSpaceBuilder::new().plane("/device:GPU:0", |p| {
        p.line("s", |l| {
            l.event("k", 0, i64::MAX)
                .stat(
                    "kernel_details",
                    "regs:4294967295 grid:4294967295,1,1 block:1,1,1",
                )
                .event("k", i64::MAX / 2, i64::MAX)
                .stat(
                    "kernel_details",
                    "regs:4294967295 grid:4294967295,1,1 block:1,1,1",
                )
        })
    });
    let ks = xprof_views::kernel::kernel_stats(&raw(gpu));
    assert_eq!(ks.reports[0].occurrences, 2);
    let late = dcn_capture(true).build();
    let mut late = late;
    for p in &mut late.planes {
        for l in &mut p.lines {
            l.timestamp_ns = i64::MAX - 1;
        }
    }
    use prost::Message as _;
    let space = XSpace::from_bytes(late.encode_to_vec()).unwrap();
    let _ = xprof_views::megascale::megascale_stats(&space);
}

#[test]
fn framework_ops_list_a_host_idle_row_only_with_host_threads() {
    // XProf's host database, IDLE op included, exists only when the capture has a host threads
    // plane (checked with XProf 2.24.2 on a TPU-only run of two hosts: no Host rows).
    let host_rows = |b: &XSpaceBuilder| {
        let (_d, r) = loaded(b);
        let s = r.op_stats().unwrap();
        xprof_views::framework::table(&s, false)
            .records
            .iter()
            .filter(|r| r["host_or_device"] == json!("Host"))
            .count()
    };
    assert_eq!(host_rows(&tpu_two_cores()), 0);
    let with_host =
        tpu_two_cores().plane("/host:CPU", |p| p.line("python", |l| l.event("f", 0, 10)));
    assert_eq!(host_rows(&with_host), 1);
}

/// One host plane: `train` steps of 10 µs at `starts` (µs) on the Python thread, and the
/// given events (name, start µs, duration µs) on two more threads (line 2 and line 3).
fn steps_and_compiles(
    starts: &[i64],
    line2: &[(&str, i64, i64)],
    line3: &[(&str, i64, i64)],
) -> XSpaceBuilder {
    const US: i64 = 1_000_000;
    let starts = starts.to_vec();
    let (line2, line3): (Vec<_>, Vec<_>) = (
        line2
            .iter()
            .map(|(n, b, d)| (n.to_string(), *b, *d))
            .collect(),
        line3
            .iter()
            .map(|(n, b, d)| (n.to_string(), *b, *d))
            .collect(),
    );
    XSpaceBuilder::new().plane("/host:CPU", move |p| {
        let events = |mut l: xprof_testkit::LineBuilder, v: &[(String, i64, i64)]| {
            for (n, b, d) in v {
                l = l.event(n, b * US, d * US);
            }
            l
        };
        p.line_with_id(1, "python", |mut l| {
            for (i, s) in starts.iter().enumerate() {
                l = l
                    .event("train", s * US, 10 * US)
                    .stat("_r", 1i64)
                    .stat("step_num", i as i64)
                    .event("matmul", (s + 1) * US, 5 * US);
            }
            l
        })
        .line_with_id(2, "worker", |l| events(l, &line2))
        .line_with_id(3, "python2", |l| events(l, &line3))
    })
}

/// Compilations in the steady state (ours; XProf counts them as host compute): compile entry
/// points nested in one another or overlapping across threads count once, Python-tracer frames
/// not at all, and the first step is apart. Expected values computed by hand (µs).
#[test]
fn recompilation_after_the_first_step_is_found_and_reported() {
    const US: u64 = 1_000_000;
    // Steps of 10 µs at 0, 20, 40 and 60 µs.
    let b = steps_and_compiles(
        &[0, 20, 40, 60],
        &[
            ("PjRtCpuClient::Compile", 1, 2),      // step 0: [1, 3]
            ("PjRtCpuClient::Compile", 42, 4),     // step 2: [42, 46]
            ("JitCompiler::Compile", 43, 2),       // nested: counts once
            ("XLAGraphExecutor::Compile", 65, 10), // [65, 75]: 5 in step 3
        ],
        &[
            ("backend_compile_and_load", 44, 4), // overlaps on another thread: [42, 48]
            ("$compiler.py:292 backend_compile_and_load", 61, 3), // a Python frame
        ],
    );
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    assert_eq!(s.steps.steps.len(), 4);
    let c = xprof_views::recompile::compilations(&s, &r);
    let want = xprof_views::recompile::Compilations {
        count: 3,
        total_ps: (2 + 6 + 10) * US,
        steps: 4,
        steps_with_compile: 3,
        later_steps_with_compile: 2,
        later_step_ps: 30 * US,
        later_compile_ps: (6 + 5) * US,
    };
    assert_eq!(c, want);
    let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
    let sig = xprof_views::suggestions::signals_with_events(&s, &ip, &r);
    let v = xprof_views::suggestions::smart_suggestions(&sig);
    let rule = v["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["ruleName"] == "RecompilationRule")
        .expect("RecompilationRule");
    assert_eq!(rule["source"], "xprof-rs");
    let p = rule["signals"]["compile_percent_of_step_time_after_the_first"]
        .as_f64()
        .unwrap();
    assert!(close(p, 100.0 * 11.0 / 30.0), "{p}");
    assert!(rule["suggestionText"].as_str().unwrap().contains("36.7%"));
    assert_eq!(v["signals"]["compilations"]["compilations"], json!(3));
}

/// A compilation in the first step only (the usual first call) is no finding.
#[test]
fn a_compilation_in_the_first_step_only_is_not_reported() {
    let b = steps_and_compiles(&[0, 20, 40], &[("PjRtCpuClient::Compile", 1, 8)], &[]);
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
    let sig = xprof_views::suggestions::signals_with_events(&s, &ip, &r);
    let c = sig.compilations.as_ref().unwrap();
    assert_eq!((c.count, c.steps_with_compile), (1, 1));
    assert_eq!(c.later_percent(), Some(0.0));
    let v = xprof_views::suggestions::smart_suggestions(&sig);
    assert!(
        v["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["ruleName"] != "RecompilationRule")
    );
}

/// TensorFlow's jit_compile leaves no runtime entry point, only XLA's compiler: each backend
/// run is a compilation, its HLO passes and inner `…::Compile` add time but no count.
#[test]
fn compilations_without_an_entry_point_count_backend_runs() {
    const US: u64 = 1_000_000;
    let b = steps_and_compiles(
        &[0, 20, 40],
        &[
            ("HLO passes through layout assignment", 21, 2), // [21, 23]
            ("CpuCompiler::RunBackend", 23, 5),              // [23, 28]
            ("JitCompiler::Compile", 24, 3),                 // nested
            ("CpuCompiler::RunBackend", 42, 4),              // [42, 46]
        ],
        &[],
    );
    let (_d, r) = loaded(&b);
    let s = r.op_stats().unwrap();
    let c = xprof_views::recompile::compilations(&s, &r);
    let want = xprof_views::recompile::Compilations {
        count: 2,
        total_ps: (7 + 4) * US,
        steps: 3,
        steps_with_compile: 2,
        later_steps_with_compile: 2,
        later_step_ps: 20 * US,
        later_compile_ps: 11 * US,
    };
    assert_eq!(c, want);
}
