//! A two-core TPU capture with an embedded HLO module, host step roots and a `Steps` line:
//! the op profile and the steps against XProf 2.24.2's own output for the same capture (made
//! with `../shared/tools/oracle` from `write_tpu_capture_for_the_oracle`), values copied below.

use serde_json::Value;
use xprof_opstats::adapter::host_space;
use xprof_opstats::{OpStats, build, views};
use xprof_testkit::xprof_proto::xla::{self, DotDimensionNumbers, PrimitiveType as T};
use xprof_testkit::{XSpaceBuilder, hlo_instr, hlo_module_proto, hlo_shape};

/// jit_tpu(7): `dot.1 = f32[128,256] dot(f32[128,512], f32[512,256])`, `add.2 = add(dot.1,
/// dot.1)`, `fusion.3` (kLoop: multiply then add).
fn tpu_hlo() -> xla::HloProto {
    let f32s = |d: &[i64]| hlo_shape(T::F32, d);
    let param = |id: i64, name: &str, s: xla::ShapeProto, n: i64| {
        let mut i = hlo_instr(id, name, "parameter", s, &[]);
        i.parameter_number = n;
        i
    };
    let fused = vec![
        param(101, "fp0", f32s(&[128, 256]), 0),
        hlo_instr(102, "mul.f", "multiply", f32s(&[128, 256]), &[101, 101]),
        hlo_instr(103, "add.f", "add", f32s(&[128, 256]), &[102, 101]),
    ];
    let mut dot1 = hlo_instr(3, "dot.1", "dot", f32s(&[128, 256]), &[1, 2]);
    dot1.dot_dimension_numbers = Some(Box::new(DotDimensionNumbers {
        lhs_contracting_dimensions: vec![1],
        rhs_contracting_dimensions: vec![0],
        ..Default::default()
    }));
    let mut fusion = hlo_instr(5, "fusion.3", "fusion", f32s(&[128, 256]), &[4]);
    fusion.fusion_kind = "kLoop".into();
    fusion.called_computation_ids = vec![2];
    let entry = vec![
        param(1, "p0", f32s(&[128, 512]), 0),
        param(2, "p1", f32s(&[512, 256]), 1),
        dot1,
        hlo_instr(4, "add.2", "add", f32s(&[128, 256]), &[3, 3]),
        fusion,
    ];
    hlo_module_proto("jit_tpu", 1, vec![(1, "main", entry), (2, "fused", fused)])
}

/// One TensorCore: steps [0, 10 µs) and [10, 22 µs); in each, dot.1 (3 then 4 µs), add.2 (1 µs)
/// and fusion.3 (2 µs), with their cost in metadata stats and no per-memory-space breakdown.
fn core(p: xprof_testkit::PlaneBuilder) -> xprof_testkit::PlaneBuilder {
    p.stat("peak_teraflops_per_second", 918.0)
        .stat("peak_hbm_bw_gigabytes_per_second", 1640.0)
        .line("Steps", |l| {
            l.event("0", 0, 10_000_000)
                .event("1", 10_000_000, 12_000_000)
        })
        .line("XLA Modules", |l| {
            l.event("jit_tpu(7)", 100_000, 8_000_000)
                .event("jit_tpu(7)", 10_100_000, 9_000_000)
        })
        .line("XLA Ops", |mut l| {
            for (k, t) in [100_000i64, 10_100_000].into_iter().enumerate() {
                let x = k as i64 * 1_000_000;
                let ops: [(&str, u64, &str, u64, u64, i64, i64); 3] = [
                    (
                        "dot.1",
                        3,
                        "convolution",
                        33_554_432,
                        917_504,
                        100_000,
                        3_000_000 + x,
                    ),
                    (
                        "add.2",
                        4,
                        "non-fusion elementwise",
                        32_768,
                        393_216,
                        3_200_000 + x,
                        1_000_000,
                    ),
                    (
                        "fusion.3",
                        5,
                        "loop fusion",
                        65_536,
                        262_144,
                        4_300_000 + x,
                        2_000_000,
                    ),
                ];
                for (name, sym, cat, flops, bytes, at, d) in ops {
                    l = l
                        .event(name, t + at, d)
                        .metadata_stat("program_id", 7u64)
                        .metadata_stat("symbol_id", sym)
                        .metadata_stat("hlo_category", cat)
                        .metadata_stat("flops", flops)
                        .metadata_stat("bytes_accessed", bytes);
                }
            }
            l
        })
}

fn tpu_capture() -> XSpaceBuilder {
    XSpaceBuilder::new()
        .hostname("tpuhost")
        .plane("/device:TPU:0", core)
        .plane("/device:TPU:1", core)
        .plane("/host:CPU", |p| {
            p.line("python", |l| {
                l.event("train_step", 0, 9_000_000)
                    .stat("_r", 1i64)
                    .event("train_step", 9_500_000, 12_000_000)
                    .stat("_r", 1i64)
            })
        })
        .plane("/host:metadata", |p| p.hlo_module(7, 7, &tpu_hlo()))
}

/// Writes the capture for `../shared/tools/oracle` (`TPU_ORACLE_DIR=<dir> cargo test -p
/// xprof-opstats --test tpu_synthetic -- --ignored`).
#[test]
#[ignore]
fn write_tpu_capture_for_the_oracle() {
    let dir = std::env::var("TPU_ORACLE_DIR").expect("TPU_ORACLE_DIR");
    tpu_capture().write_run(dir, "run", "tpuhost").unwrap();
}

fn stats() -> OpStats {
    build(&host_space("tpuhost", &tpu_capture().build(), Vec::new()))
}

fn metric(node: &Value, key: &str) -> Value {
    node["metrics"][key].clone()
}

#[test]
fn op_profile_root_flops_and_order_as_xprof() {
    let s = stats();
    for group_by in ["program", "category"] {
        let root = views::op_profile(&s, group_by, true);
        // XProf: the root's time is the profile's (44 µs), its flop rate per op time (26 µs):
        // 134610944 FLOPs / 26 µs / 918 TFLOP/s.
        assert_eq!(metric(&root, "rawTime"), 44_000_000);
        let f = metric(&root, "flops").as_f64().unwrap();
        assert!((f - 0.005639808278867102).abs() < 1e-15, "{group_by}: {f}");
        // Children by time, IDLE (18 µs) after the 26 µs program, before 14 µs of convolution.
        let names: Vec<&str> = root["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        let want: &[&str] = if group_by == "program" {
            &["jit_tpu(7)", "IDLE"]
        } else {
            &[
                "IDLE",
                "convolution",
                "loop fusion",
                "non-fusion elementwise",
            ]
        };
        assert_eq!(names, want, "{group_by}");
    }
    let root = views::op_profile(&s, "program", true);
    let program = &root["children"][0];
    // Every other node: FLOPs over the profile's time (XProf 0.0033326139829669243).
    let f = metric(program, "flops").as_f64().unwrap();
    assert!((f - 0.0033326139829669243).abs() < 1e-15, "{f}");
}

#[test]
fn op_profile_bytes_without_a_memory_breakdown_are_a_placeholder() {
    // XProf prints 0 bytes and 0 bandwidth for ops without memory_access_breakdown: null with
    // the reason, and the ops' bytes_accessed (4 × (917504 + 393216 + 262144)) as measured.
    let root = views::op_profile(&stats(), "program", true);
    let program = &root["children"][0];
    for node in [&root, program] {
        assert!(metric(node, "rawBytesAccessedArray").is_null());
        assert!(metric(node, "bandwidthUtils").is_null());
        assert_eq!(
            metric(node, "rawBytesAccessedArray_reason"),
            views::reasons::NO_MEMORY_BREAKDOWN
        );
        assert_eq!(
            metric(node, "rawBytesAccessedArray_measured"),
            serde_json::json!([6_291_456u64, 0, 0])
        );
    }
    // IDLE has no bytes: XProf's 0 is a real 0.
    let idle = &root["children"][1];
    assert_eq!(
        metric(idle, "rawBytesAccessedArray"),
        serde_json::json!([0, 0, 0])
    );
}

#[test]
fn steps_follow_the_host_roots_as_xprof() {
    // XProf: the host roots are groups 0 and 1, the device steps 2 and 3, of 10 and 12 µs;
    // TensorCore compute 6 and 7 µs (the smaller core's), idle 4 and 5 µs.
    let s = stats();
    let got: Vec<(i64, u64)> = s
        .steps
        .steps
        .iter()
        .map(|x| (x.step_num, x.duration_ps()))
        .collect();
    assert_eq!(got, [(2, 10_000_000), (3, 12_000_000)]);
    let core = s.steps.steps[1].per_core.values().next().unwrap();
    assert_eq!(core.category_ps["IDLE"], 5_000_000);
}

#[test]
fn roofline_has_xprofs_average_and_per_step_program_records() {
    // XProf's rows (first record set): Average over the 2 complete steps, then one Program row
    // per step from the step's ops on both cores (step time 2 × 10 and 2 × 12 µs).
    let (_, records) = views::roofline_model(&stats());
    let program = |step: &str| {
        records
            .iter()
            .find(|r| r["step"] == step && r["include_infeed_outfeed"] == true)
            .unwrap_or_else(|| panic!("no {step} record"))
    };
    for (step, time, rate) in [
        ("Average", 22.0, 3059.339636363636),
        ("2", 20.0, 3365.2736),
        ("3", 24.0, 2804.3946666666666),
    ] {
        let r = program(step);
        assert_eq!(r["operation"], "Program", "{step}");
        let (t, f) = (
            r["total_time"].as_f64().unwrap(),
            r["measured_flop_rate"].as_f64().unwrap(),
        );
        assert!(
            (t - time).abs() < 1e-9 && (f - rate).abs() < 1e-6 * rate,
            "{step}: {t} {f}"
        );
    }
    // Two record sets (with and without infeed/outfeed) of 4 Total, 1 Average, 2 step rows.
    assert_eq!(records.len(), 14);
}
