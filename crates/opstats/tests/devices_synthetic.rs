//! Device shapes the shared corpus lacks — GPU kernels, several TensorCores, several hosts —
//! on synthetic captures; expected values computed by hand in the comments.

use xprof_opstats::adapter::host_space;
use xprof_opstats::opstats::HardwareType;
use xprof_opstats::{OpStats, build, combine, views};
use xprof_testkit::{XSpaceBuilder, simple_hlo_proto};

fn stats(b: XSpaceBuilder) -> OpStats {
    build(&host_space("host0", &b.build(), Vec::new()))
}

#[test]
fn gpu_kernels_of_one_hlo_op_in_one_step_are_one_occurrence() {
    // jit_f(7): fusion.1 (fusion), dot.2 (dot). Kernels on one stream:
    //   fusion.1 g0 [0,100] + [100,150] → 1 occurrence of 150
    //   dot.2    g0 [200,300]           → 1 occurrence of 100
    //   fusion.1 g1 [400,450]           → 2nd occurrence, 50
    //   gone.9   g1 [500,520]           → not in the HLO: dropped (XProf does the same)
    let hlo = simple_hlo_proto("jit_f", &[("fusion.1", "fusion"), ("dot.2", "dot")]);
    let s = stats(
        XSpaceBuilder::new()
            .plane("/host:metadata", |p| p.hlo_module(1, 7, &hlo))
            .plane("/device:GPU:0", |p| {
                // H100-like caps, no peak stat: XProf derives the peak from the SM count,
                // clock and compute capability.
                p.stat("device_vendor", "Nvidia")
                    .stat("compute_cap_major", 9i64)
                    .stat("compute_cap_minor", 0i64)
                    .stat("clock_rate", 1_830_000.0)
                    .stat("core_count", 132i64)
                    .stat("memory_bandwidth", 3.35e12)
                    .line_with_id(1, "Stream #1", |l| {
                        let k =
                            |l: xprof_testkit::LineBuilder, op: &str, g: i64, b: i64, d: i64| {
                                l.event("kernel", b, d)
                                    .stat("hlo_op", op)
                                    .stat("program_id", 7u64)
                                    .stat("group_id", g)
                                    .stat("flops", 1000u64)
                            };
                        let l = k(l, "fusion.1", 0, 0, 100);
                        let l = k(l, "fusion.1", 0, 100, 50);
                        let l = k(l, "dot.2", 0, 200, 100);
                        let l = k(l, "fusion.1", 1, 400, 50);
                        let l = k(l, "gone.9", 1, 500, 20);
                        // A TensorFlow op's kernel outside XLA.
                        l.event("volta_sgemm", 510, 10)
                            .stat("tf_op", "model/dense/MatMul:MatMul")
                    })
            }),
    );
    assert_eq!(s.run_env.hardware_type, HardwareType::Gpu);
    assert_eq!(s.run_env.device_type, "Nvidia GPU (Hopper)");
    let pe = s.perf_env.as_ref().unwrap();
    // 132 SMs × 4096 FLOPs/cycle × 1.83 GHz = 989.4 TFLOP/s; HBM 3.35e12 B/s = 3350 GB/s.
    assert!((pe.peak_tflops - 132.0 * 4096.0 * 1.83 / 1000.0).abs() < 1e-9);
    assert!((pe.peak_bws_gbps[0] - 3350.0).abs() < 1e-9);
    let db = &s.device_db;
    let f = db.metrics.iter().find(|m| m.name == "fusion.1").unwrap();
    assert_eq!((f.occurrences, f.time_ps, f.self_time_ps), (2, 200, 200));
    assert_eq!(f.category, "fusion");
    // Per-occurrence event FLOPs, multiplied out by occurrences.
    assert_eq!(f.flops, 2000);
    let d = db.metrics.iter().find(|m| m.name == "dot.2").unwrap();
    assert_eq!((d.occurrences, d.time_ps), (1, 100));
    assert!(db.metrics.iter().all(|m| m.name != "gone.9"));
    let tf = db
        .metrics
        .iter()
        .find(|m| m.name == "model/dense/MatMul/volta_sgemm")
        .unwrap();
    assert_eq!(
        (tf.occurrences, tf.time_ps, tf.category.as_str()),
        (1, 10, "MatMul")
    );
    assert_eq!(s.gpu_kernels_without_hlo, 1);
    // Window: first kernel begin 0 → last end 520; op time 300 + 10; idle 210.
    assert_eq!((db.total_time_ps, db.total_op_time_ps), (520, 310));
    assert_eq!(db.metrics.last().unwrap().self_time_ps, 210);
    let rows = views::hlo_stats_of(&s, db);
    assert_eq!(rows[0]["hlo_op_name"], "fusion.1");
    // 2000 FLOPs over 200 ps = 0.2 ns → 10000 GFLOP/s.
    assert!((rows[0]["model_flop_rate"].as_f64().unwrap() - 10000.0).abs() < 1e-6);
}

fn tpu_plane(
    p: xprof_testkit::PlaneBuilder,
    core_details: Option<Vec<u8>>,
    start: i64,
    dur: i64,
) -> xprof_testkit::PlaneBuilder {
    let p = match core_details {
        Some(b) => p.stat("core_details", b),
        None => p,
    };
    p.stat("peak_teraflops_per_second", 900.0)
        .stat("peak_hbm_bw_gigabytes_per_second", 1600.0)
        .stat("device_type_string", "TPU v5p")
        .line("XLA Modules", |l| l.event("jit_f(42)", start, dur + 100))
        .line("XLA Ops", |l| {
            l.event("%fusion.1 = f32[] fusion()", start + 50, dur)
                .display_name("fusion.1")
                .metadata_stat("program_id", 42u64)
                .metadata_stat("symbol_id", 1u64)
                .metadata_stat("hlo_category", "loop fusion")
                .metadata_stat("flops", 10u64)
        })
}

/// `CoreDetails { local_chip_id: chip }` (field 4, varint).
fn core_details(chip: u8) -> Vec<u8> {
    vec![0x20, chip]
}

#[test]
fn tensor_cores_combine_and_duty_cycle_unions_cores_of_a_chip() {
    // Two cores on chip 0: busy [50,250] and [150,350] → chip busy [50,350] = 300 over window
    // [0,400] → duty 75 %. Op db: 2 cores × 200 ps; windows 200 each (op-only) → total 400.
    let s = stats(
        XSpaceBuilder::new()
            .plane("/device:TPU:0", |p| {
                tpu_plane(p, Some(core_details(0)), 0, 200)
            })
            .plane("/device:TPU:1", |p| {
                tpu_plane(p, Some(core_details(0)), 100, 200)
            }),
    );
    assert_eq!(s.run_env.device_core_count, 2);
    assert_eq!((s.duty_busy_ps, s.duty_idle_ps), (300, 100));
    let f = s
        .device_db
        .metrics
        .iter()
        .find(|m| m.name == "fusion.1")
        .unwrap();
    assert_eq!(
        (f.occurrences, f.num_cores, f.time_ps, f.flops),
        (2, 2, 400, 20)
    );
    assert_eq!(s.device_db.total_time_ps, 400);
    let ov = views::overview(&s);
    assert_eq!(
        ov["performance_summary"]["device_duty_cycle_percent"],
        "75.0%"
    );
    // Without core details each core is its own chip: busy 200+200 over windows 300+300.
    let s = stats(
        XSpaceBuilder::new()
            .plane("/device:TPU:0", |p| tpu_plane(p, None, 0, 200))
            .plane("/device:TPU:1", |p| tpu_plane(p, None, 100, 200)),
    );
    assert_eq!((s.duty_busy_ps, s.duty_idle_ps), (400, 200));
}

#[test]
fn hosts_combine_counts_and_intersect_steps() {
    // A capture grouped already (its steps and ops carry `group_id`, no host plane): XProf
    // takes the ids as they are. Each step holds one op of its group.
    let host = |name: &str, steps: &[i64]| {
        let (ops, markers) = (steps.to_vec(), steps.to_vec());
        let b = XSpaceBuilder::new()
            .hostname(name)
            .plane("/device:TPU:0", move |p| {
                p.line("XLA Ops", move |mut l| {
                    for g in &ops {
                        l = l
                            .event("%fusion.1 = f32[] fusion()", g * 1000 + 50, 200)
                            .display_name("fusion.1")
                            .metadata_stat("program_id", 42u64)
                            .metadata_stat("symbol_id", 1u64)
                            .metadata_stat("hlo_category", "loop fusion")
                            .stat("group_id", *g);
                    }
                    l
                })
                .line("Steps", move |mut l| {
                    for g in &markers {
                        l = l.event(&g.to_string(), g * 1000, 500).stat("group_id", *g);
                    }
                    l
                })
            });
        build(&host_space(name, &b.build(), Vec::new()))
    };
    let all = combine(vec![host("a", &[1, 2, 3]), host("b", &[2, 3, 4])]).unwrap();
    assert_eq!(all.run_env.host_count, 2);
    // Checked with XProf 2.24.2 on this run: no device_type_string stat, no device type; no
    // host threads plane, no host database (not even its IDLE op).
    assert_eq!(all.run_env.device_type, "");
    assert!(!all.has_host_plane);
    assert_eq!(all.run_env.device_core_count, 2);
    assert_eq!(all.run_env.hostnames, ["a", "b"]);
    let f = all
        .device_db
        .metrics
        .iter()
        .find(|m| m.name == "fusion.1")
        .unwrap();
    assert_eq!((f.occurrences, f.num_cores), (6, 2));
    // Only the steps every host ran, matched by time (groups 2 and 3 of both), numbered
    // 0, 1 as XProf numbers combined steps; each keeps both hosts' cores, host b's core 0 as
    // 1000.
    let steps: Vec<(i64, Vec<(i64, i64)>)> = all
        .steps
        .steps
        .iter()
        .map(|s| {
            let cores = s.per_core.iter().map(|(c, x)| (*c, x.begin_ps)).collect();
            (s.step_num, cores)
        })
        .collect();
    assert_eq!(
        steps,
        [
            (0, vec![(0, 2000), (1000, 2000)]),
            (1, vec![(0, 3000), (1000, 3000)])
        ]
    );
}

#[test]
fn extreme_times_and_stats_never_panic() {
    // Valid protobuf, hostile values: negative and huge offsets/durations, stats of the wrong
    // type, unknown metadata ids, a root that nests everything.
    let b = XSpaceBuilder::new()
        .plane("/device:TPU:0", |p| {
            p.stat("peak_teraflops_per_second", "not a number")
                .stat("core_details", vec![0xffu8, 0xff])
                .line("XLA Modules", |l| {
                    l.event("m", i64::MIN / 2, i64::MAX).stat("group_id", "x")
                })
                .line("Steps", |l| {
                    l.event("s", -5, -10).event("t", i64::MAX - 1, i64::MAX)
                })
                .line("XLA Ops", |l| {
                    l.event("%a = f32[] add()", i64::MAX - 10, i64::MAX)
                        .display_name("a")
                        .metadata_stat("program_id", u64::MAX)
                        .metadata_stat("symbol_id", 1u64)
                        .metadata_stat("hlo_category", "while")
                        .metadata_stat("flops", u64::MAX)
                        .device_timespan(i64::MIN, i64::MAX)
                        .event("%b = f32[] add()", -100, -1)
                        .display_name("b")
                        .metadata_stat("program_id", 1i64)
                        .metadata_stat("symbol_id", 2i64)
                        .stat("self_duration_ps", -7i64)
                })
        })
        .plane("/host:CPU", |p| {
            p.line_with_id(1, "t", |l| {
                l.event("train", i64::MAX - 5, i64::MAX)
                    .stat("_r", 1i64)
                    .stat("_p", u64::MAX)
                    .stat("_pt", -1i64)
                    .event("x:Y", i64::MIN, 0)
                    .stat("_c", u64::MAX)
                    .stat("_ct", -1i64)
                    .stat("hlo_op", 5i64)
                    .stat("tf_op", "")
            })
        });
    let s = build(&host_space("h", &b.build(), Vec::new()));
    let _ = views::overview(&s);
    let _ = views::hlo_stats_of(&s, &s.device_db);
    let _ = views::roofline_model(&s);
    let _ = views::op_profile(&s, "program", true);
    let _ = views::op_profile(&s, "category", false);
    let _ = views::device_information(&s);
    let _ = views::steps_summary(&s);
    let _ = combine(vec![s.clone(), s]);
}

#[test]
fn sparse_core_ops_become_children_of_the_offloading_tensor_core_op() {
    // TC op `offload.1` [0,1000] offloads (core 2, start 7). The SparseCore plane runs module
    // window [100,900] for that offload with ops gather.3 [200,400] and scatter.4 [500,600];
    // an op outside any window is ignored.
    let s = stats(
        XSpaceBuilder::new()
            .plane("/device:TPU:0", |p| {
                p.line("XLA Ops", |l| {
                    l.event("%offload.1 = () custom-call()", 0, 1000)
                        .display_name("offload.1")
                        .metadata_stat("program_id", 5u64)
                        .metadata_stat("symbol_id", 1u64)
                        .metadata_stat("hlo_category", "custom-call")
                        .stat("offload_core_id", 2u64)
                        .stat("tc_offload_start_id", 7u64)
                })
            })
            .plane("/device:TPU:0 SparseCore 0", |p| {
                p.line("Sparse Core Modules", |l| {
                    l.event("sc_module", 100, 800)
                        .stat("offload_core_id", 2u64)
                        .stat("tc_offload_start_id", 7u64)
                })
                .line("Sparse Core Ops", |l| {
                    let sc = |l: xprof_testkit::LineBuilder, n: &str, sym: u64, b: i64, d: i64| {
                        l.event(&format!("%{n} = f32[] {n}()"), b, d)
                            .display_name(n)
                            .metadata_stat("program_id", 5u64)
                            .metadata_stat("symbol_id", sym)
                            .metadata_stat("hlo_category", "sparse")
                    };
                    let l = sc(l, "gather.3", 3, 200, 200);
                    let l = sc(l, "scatter.4", 4, 500, 100);
                    sc(l, "stray.5", 5, 2000, 10)
                })
            }),
    );
    assert_eq!(s.run_env.device_core_count, 1);
    let parent = s
        .device_db
        .metrics
        .iter()
        .find(|m| m.name == "offload.1")
        .unwrap();
    let kids = parent.children.as_ref().expect("SparseCore children");
    let names: Vec<&str> = kids.sorted_ops().iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["gather.3", "scatter.4"]);
    // The child db's window is the module window: 800 ps, 300 of them busy.
    assert_eq!((kids.total_time_ps, kids.total_op_time_ps), (800, 300));
    let rows = views::hlo_stats_of(&s, &s.device_db);
    let child = rows
        .iter()
        .find(|r| r["hlo_op_name"] == "gather.3")
        .unwrap();
    assert_eq!(child["parent_op_name"], "offload.1");
    assert_eq!(child["core_type"], "SparseCore");
    assert_eq!(child["rank"], 0);
    // Duty cycle, each core its own chip (no core details): TC busy 1000; SC busy 200 + 100 +
    // 10 (every Sparse Core Ops event counts as active, in a window or not).
    assert_eq!(s.duty_busy_ps, 1000 + 310);
}

#[test]
fn op_profile_groups_duplicates_like_xprof() {
    // fusion.1 and fusion.2 are duplicates of fusion.3 (deduplicated_name); fusion.4 stands
    // alone. Times: 1 → 300, 2 → 100, 3 → 200, 4 → 50.
    let s = stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Ops", |l| {
            let f =
                |l: xprof_testkit::LineBuilder, n: &str, sym: u64, dedup: &str, b: i64, d: i64| {
                    let l = l
                        .event(&format!("%{n} = f32[] fusion()"), b, d)
                        .display_name(n)
                        .metadata_stat("program_id", 9u64)
                        .metadata_stat("symbol_id", sym)
                        .metadata_stat("hlo_category", "convolution fusion");
                    if dedup.is_empty() {
                        l
                    } else {
                        l.metadata_stat("deduplicated_name", dedup)
                    }
                };
            let l = f(l, "fusion.1", 1, "fusion.3", 0, 300);
            let l = f(l, "fusion.2", 2, "fusion.3", 400, 100);
            let l = f(l, "fusion.3", 3, "", 600, 200);
            f(l, "fusion.4", 4, "", 900, 50)
        })
    }));
    let prof = views::op_profile(&s, "category", false);
    let cat = &prof["children"][0];
    assert_eq!(cat["name"], "convolution fusion");
    let names: Vec<&str> = cat["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fusion.1 and its duplicate(s)", "fusion.4"]);
    assert_eq!(cat["children"][0]["metrics"]["rawTime"], 600);
    assert_eq!(cat["children"][0]["numChildren"], 3);
}

#[test]
fn a_device_without_identified_ops_is_no_data_not_zero() {
    // XLA Ops events without program/symbol ids: XProf drops them; the views say so.
    let s = stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Ops", |l| l.event("%x = f32[] add()", 0, 100))
    }));
    assert!(views::op_db(&s).is_none());
    assert!(views::no_op_reason(&s).contains("XLA Ops"));
    // A CPU capture without hlo_op events: the same.
    let s = stats(XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "t", |l| l.event("work", 0, 10))
    }));
    assert!(views::op_db(&s).is_none());
    assert!(views::no_op_reason(&s).contains("hlo_op"));
}

#[test]
fn a_program_without_its_hlo_is_named_main_like_xprof() {
    // No `/host:metadata` module for program 42: XProf 2.24.2's op profile names the program
    // node "main" (checked on this capture with two megacore TensorCores); its id stays.
    let s = stats(
        XSpaceBuilder::new()
            .plane("/device:TPU:0", |p| {
                tpu_plane(p, Some(core_details(0)), 0, 200)
            })
            .plane("/device:TPU:1", |p| {
                tpu_plane(p, Some(core_details(0)), 100, 200)
            }),
    );
    let root = views::op_profile(&s, "program", true);
    let program = root["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] != "IDLE")
        .unwrap();
    assert_eq!(program["name"], "main");
    assert_eq!(program["programId"], "42");
}

#[test]
fn combined_hosts_are_training_as_the_last_host_is_like_xprof() {
    // XProf overwrites `is_training` host by host: checked with XProf 2.24.2 on the synthetic
    // pod beside a training CPU capture listed first ("false").
    let host = |name: &str, training: bool| {
        let mut s = stats(
            XSpaceBuilder::new()
                .hostname(name)
                .plane("/device:TPU:0", |p| tpu_plane(p, None, 0, 200)),
        );
        s.run_env.is_training = training;
        s
    };
    let first = combine(vec![host("a", true), host("b", false)]).unwrap();
    assert!(!first.run_env.is_training);
    let last = combine(vec![host("a", false), host("b", true)]).unwrap();
    assert!(last.run_env.is_training);
}

#[test]
fn a_capture_without_host_threads_has_no_host_database() {
    let with = |host_plane: bool| {
        let mut b = XSpaceBuilder::new().plane("/device:TPU:0", |p| tpu_plane(p, None, 0, 200));
        if host_plane {
            b = b.plane("/host:CPU", |p| p.line("python", |l| l.event("f", 0, 10)));
        }
        stats(b).has_host_plane
    };
    assert!(with(true));
    assert!(!with(false));
}
