//! Steps from each of XProf's grouping signals, on synthetic captures built with the testkit;
//! expected values computed by hand in the comments.

use xprof_opstats::adapter::host_space;
use xprof_opstats::steps::{NoSteps, StepsSource};
use xprof_opstats::{OpStats, build, views};
use xprof_testkit::XSpaceBuilder;

fn stats(b: XSpaceBuilder) -> OpStats {
    build(&host_space("host0", &b.build(), Vec::new()))
}

/// A TPU op on `XLA Ops` with its identity in metadata stats.
fn op(
    l: xprof_testkit::LineBuilder,
    name: &str,
    symbol: u64,
    cat: &str,
    start: i64,
    dur: i64,
) -> xprof_testkit::LineBuilder {
    l.event(&format!("%{name} = f32[] op()"), start, dur)
        .display_name(name)
        .metadata_stat("program_id", 42u64)
        .metadata_stat("symbol_id", symbol)
        .metadata_stat("hlo_category", cat)
}

#[test]
fn steps_line_gives_steps_with_category_breakdown() {
    // A capture grouped already (its steps and ops carry `group_id`, no host plane), which XProf
    // reads as it is. Two steps [0,1000] and [1000,2000] (group 7 and 8). Step 7 holds a
    // fusion [100,400] and an infeed [500,600]; step 8 a fusion [1100,1300].
    let s = stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("Steps", |l| {
            l.event("7", 0, 1000)
                .stat("group_id", 7i64)
                .event("8", 1000, 1000)
                .stat("group_id", 8i64)
        })
        .line("XLA Ops", |l| {
            let l = op(l, "fusion.1", 1, "loop fusion", 100, 300).stat("group_id", 7i64);
            let l = op(l, "infeed.2", 2, "infeed", 500, 100).stat("group_id", 7i64);
            op(l, "fusion.1", 1, "loop fusion", 1100, 200).stat("group_id", 8i64)
        })
    }));
    assert_eq!(s.steps.source, StepsSource::StepsLine);
    let nums: Vec<i64> = s.steps.steps.iter().map(|x| x.step_num).collect();
    assert_eq!(nums, [7, 8]);
    let c7 = s.steps.steps[0].per_core.values().next().unwrap();
    assert_eq!(c7.duration_ps, 1000);
    assert_eq!(c7.category_ps["loop fusion"], 300);
    assert_eq!(c7.category_ps["infeed"], 100);
    assert_eq!(c7.category_ps["IDLE"], 600);
    let c8 = s.steps.steps[1].per_core.values().next().unwrap();
    assert_eq!(
        (c8.category_ps["loop fusion"], c8.category_ps["IDLE"]),
        (200, 800)
    );
    // TPU step lines are already complete: nothing dropped; step time 1000 ps both.
    assert_eq!(s.steps.complete_steps.len(), 2);
    let ov = views::overview(&s);
    assert_eq!(ov["performance_summary"]["steptime_ms_average"], "0.00");
    assert_eq!(ov["steps"]["steps_source"], "steps_line");
    // Step 7: waits for the host 100 ps (infeed) → compute 900, infeed 100, idle 0.
    let t = views::tpu_step_times(&s.steps.steps[0]);
    assert_eq!(
        (t.compute_ms * 1e9, t.infeed_ms * 1e9, t.idle_ms),
        (900.0, 100.0, 0.0)
    );
    assert!(ov["performance_summary"]["tc_infeed_ms_average"].is_string());
    // The complete steps' op db: fusion.1 twice (300 + 200), infeed once; window 2000 ps.
    let sdb = s.steps.steps_op_db.as_ref().unwrap();
    let f = sdb.metrics.iter().find(|m| m.name == "fusion.1").unwrap();
    assert_eq!((f.occurrences, f.self_time_ps), (2, 500));
    assert_eq!(sdb.total_time_ps, 2000);
    // Roofline `Average` Program row: 2000 ps over 2 steps = 0.001 us.
    let (_, recs) = views::roofline_model(&s);
    let avg = recs
        .iter()
        .find(|r| r["step"] == "Average" && r["include_infeed_outfeed"] == true)
        .unwrap();
    assert!((avg["total_time"].as_f64().unwrap() - 0.001).abs() < 1e-12);
    // The op db still covers the whole window: 300+100+200 busy of [100,1300].
    assert_eq!(s.device_db.total_op_time_ps, 600);
}

#[test]
fn group_id_stats_give_steps_and_gpu_kernels_join_through_correlation_ids() {
    // A capture XProf already grouped: host events carry group_id. Step 3 is `train` [0,1000];
    // its launch [100,150] (correlation 11) starts kernel [200,700] on the GPU; step 4 is
    // `train` [1000,2000] with launch [1100,1150] (correlation 12) → kernel [1200,1500], and
    // a kernel tagged group 4 directly, [1600,1700], a NCCL collective.
    let s = stats(gpu_capture_grouped_on_the_host());
    assert_eq!(s.steps.source, StepsSource::GroupId);
    // With a device, XProf takes a step's time from the device alone: the span of the
    // group's kernels on the GPU (its derived `Steps` line), not the host's `train` events.
    let got: Vec<(i64, u64)> = s
        .steps
        .steps
        .iter()
        .map(|x| (x.step_num, x.duration_ps()))
        .collect();
    assert_eq!(got, [(3, 500), (4, 500)]);
    let g3 = s.steps.steps[0]
        .per_core
        .values()
        .next()
        .unwrap()
        .generic_ps;
    // Step 3, [200,700]: device compute 500; host events (the launch) do not count.
    assert_eq!((g3[4], g3[0], g3[8]), (0, 500, 0));
    let g4 = s.steps.steps[1]
        .per_core
        .values()
        .next()
        .unwrap()
        .generic_ps;
    // Step 4, [1200,1700]: compute 300, collectives 100, the gap between them unknown 100.
    assert_eq!((g4[4], g4[0], g4[2], g4[8]), (0, 300, 100, 100));
    // The host marker still names the step.
    assert_eq!(s.steps.steps[0].name, "train 3");
}

fn gpu_capture_grouped_on_the_host() -> XSpaceBuilder {
    XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.line_with_id(1, "python", |l| {
                l.event("train", 0, 1000)
                    .stat("group_id", 3i64)
                    .event("cudaLaunchKernel", 100, 50)
                    .stat("group_id", 3i64)
                    .stat("correlation_id", 11i64)
                    .event("train", 1000, 1000)
                    .stat("group_id", 4i64)
                    .event("cudaLaunchKernel", 1100, 50)
                    .stat("group_id", 4i64)
                    .stat("correlation_id", 12i64)
            })
        })
        .plane("/device:GPU:0", |p| {
            p.line_with_id(1, "Stream #1", |l| {
                l.event("gemm_kernel", 200, 500)
                    .stat("correlation_id", 11i64)
                    .event("gemm_kernel", 1200, 300)
                    .stat("correlation_id", 12i64)
                    .event("ncclAllReduce", 1600, 100)
                    .stat("correlation_id", 13i64)
                    .stat("group_id", 4i64)
            })
        })
}

#[test]
fn gpu_steps_take_the_device_span_as_xprof_2_24_does() {
    // JAX-style host step roots (`_r`) and two kernels launched from them, joined by
    // correlation id only. XProf 2.24.2 on this capture (its overview page, made with
    // ../shared/tools/oracle) shows step 0 of 0.025 ms and step 1 of 0.01 ms, all device
    // compute: the host steps (60 µs each) and their launches do not count once a device is
    // present.
    let s = stats(
        XSpaceBuilder::new()
            .plane("/device:GPU:0", |p| {
                p.line_with_id(7, "Stream #7(Compute)", |l| {
                    l.timestamp_ns(1_000_000)
                        .event("fusion_3_kernel", 1_000_000, 25_000_000)
                        .stat("correlation_id", 1u64)
                        .event("gemm_kernel", 70_000_000, 10_000_000)
                        .stat("correlation_id", 2u64)
                })
            })
            .plane("/host:CPU", |p| {
                p.line_with_id(1234, "python3/1234", |l| {
                    l.timestamp_ns(1_000_000)
                        .event("train_step", 0, 60_000_000)
                        .stat("_r", 1i64)
                        .stat("step_num", 0i64)
                        .event("cuLaunchKernel", 500_000, 300_000)
                        .stat("correlation_id", 1u64)
                        .event("train_step", 65_000_000, 60_000_000)
                        .stat("_r", 1i64)
                        .stat("step_num", 1i64)
                        .event("cuLaunchKernel", 66_000_000, 300_000)
                        .stat("correlation_id", 2u64)
                })
            }),
    );
    let got: Vec<(i64, u64, u64, u64)> = s
        .steps
        .steps
        .iter()
        .map(|x| {
            let g = x.per_core.values().next().unwrap().generic_ps;
            (x.step_num, x.duration_ps(), g[0], g.iter().sum())
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, 25_000_000, 25_000_000, 25_000_000),
            (1, 10_000_000, 10_000_000, 10_000_000)
        ]
    );
}

#[test]
fn a_gpu_group_in_two_separate_runs_takes_its_longest_span() {
    // XProf's derived `Steps` line merges only consecutive events of one group: group 3's
    // kernels [0,100] and [300,350] are split by group 4's [150,250], so group 3 has two
    // markers and its step time is the longer one, [0,100]; its second kernel, outside that
    // span, does not count.
    let s = stats(
        XSpaceBuilder::new()
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
                    l.event("k", 0, 100)
                        .stat("correlation_id", 1i64)
                        .stat("group_id", 3i64)
                        .event("k", 150, 100)
                        .stat("correlation_id", 2i64)
                        .stat("group_id", 4i64)
                        .event("k", 300, 50)
                        .stat("correlation_id", 3i64)
                        .stat("group_id", 3i64)
                })
            }),
    );
    let got: Vec<(i64, i64, u64)> = s
        .steps
        .steps
        .iter()
        .map(|x| {
            let c = x.per_core.values().next().unwrap();
            (x.step_num, c.begin_ps, c.duration_ps)
        })
        .collect();
    assert_eq!(got, [(3, 0, 100), (4, 150, 100)]);
}

#[test]
fn tpu_module_group_ids_without_a_steps_line_give_no_xprof_steps() {
    // XProf takes TPU step markers only from the Steps line.
    let s = stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Modules", |l| {
            l.event("jit_f(42)", 0, 500)
                .stat("group_id", 3i64)
                .event("jit_f(42)", 800, 700)
                .stat("group_id", 4i64)
        })
        .line("XLA Ops", |l| op(l, "fusion.1", 1, "loop fusion", 100, 200))
    }));
    assert_eq!(s.steps.source, StepsSource::None);
    assert_eq!(s.steps_inferred.len(), 2);
}

#[test]
fn a_steps_line_without_group_ids_groups_in_order() {
    let s = stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("Steps", |l| l.event("a", 0, 100).event("b", 100, 150))
            .line("XLA Ops", |l| {
                let l = op(l, "fusion.1", 1, "loop fusion", 10, 20);
                op(l, "fusion.1", 1, "loop fusion", 120, 20)
            })
    }));
    let got: Vec<(i64, u64)> = s
        .steps
        .steps
        .iter()
        .map(|x| (x.step_num, x.duration_ps()))
        .collect();
    assert_eq!(got, [(0, 100), (1, 150)]);
}

#[test]
fn host_roots_with_flows_give_steps_and_generic_breakdown() {
    // Root `train` 0 on [0,1000] nests `dispatch` [100,300], which produces flow (1,5);
    // `work` [400,900] on another thread consumes it → joins step 0.
    // Root `train` 1 on [1000,2000] nests `compute` [1100,1200].
    // `unrelated` [1500,1900] on the worker thread has no link → in no step.
    let s = stats(XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |l| {
            l.event("train", 0, 1000)
                .stat("_r", 1i64)
                .stat("step_num", 0i64)
                .event("dispatch", 100, 200)
                .stat("_pt", 1i64)
                .stat("_p", 5u64)
                .event("train", 1000, 1000)
                .stat("_r", 1i64)
                .stat("step_num", 1i64)
                .event("compute", 1100, 100)
        })
        .line_with_id(2, "worker", |l| {
            l.event("work", 400, 500)
                .stat("_ct", 1i64)
                .stat("_c", 5u64)
                .event("unrelated", 1500, 400)
        })
    }));
    assert_eq!(s.steps.source, StepsSource::HostRoots);
    let names: Vec<&str> = s.steps.steps.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["train 0", "train 1"]);
    let g0 = s.steps.steps[0]
        .per_core
        .values()
        .next()
        .unwrap()
        .generic_ps;
    // Host compute [100,300] ∪ [400,900] = 700; all others 300.
    assert_eq!((g0[3], g0[8]), (700, 300));
    let g1 = s.steps.steps[1]
        .per_core
        .values()
        .next()
        .unwrap()
        .generic_ps;
    assert_eq!((g1[3], g1[8]), (100, 900));
    // ≤ 5 steps: none dropped as "incomplete".
    assert_eq!(s.steps.complete_steps.len(), 2);
}

#[test]
fn more_than_five_host_steps_drop_first_and_last_in_the_complete_list() {
    let s = stats(XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |mut l| {
            for i in 0..7i64 {
                l = l
                    .event("train", i * 100, 100)
                    .stat("_r", 1i64)
                    .stat("step_num", i)
                    .event("op", i * 100 + 10, 50);
            }
            l
        })
    }));
    assert_eq!(s.steps.steps.len(), 7);
    let kept: Vec<i64> = s.steps.complete_steps.iter().map(|x| x.step_num).collect();
    assert_eq!(kept, [1, 2, 3, 4, 5]);
}

#[test]
fn without_markers_xprof_has_no_steps_and_we_infer_one_per_module() {
    let s = stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Modules", |l| {
            l.event("jit_f(42)", 0, 500).event("jit_f(42)", 600, 300)
        })
        .line("XLA Ops", |l| op(l, "fusion.1", 1, "loop fusion", 100, 200))
    }));
    assert_eq!(s.steps.source, StepsSource::None);
    assert!(s.steps.steps.is_empty());
    let inferred: Vec<(i64, u64)> = s.steps_inferred.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(inferred, [(0, 500), (600, 300)]);
    let ov = views::overview(&s);
    assert!(ov["performance_summary"]["steptime_ms_average"].is_null());
    assert_eq!(ov["steps"]["steps_inferred"]["count"], 2);
}

/// A host thread with roots `train` 5 on [0,1000] and `train` 6 on [1000,2000], each nesting
/// an event `dispatch` (at 10 and 1010, 50 long) whose stats `dispatch_stats(line, k)` adds.
fn two_dispatching_steps(
    p: xprof_testkit::PlaneBuilder,
    dispatch: &str,
    dispatch_stats: impl Fn(xprof_testkit::LineBuilder, usize) -> xprof_testkit::LineBuilder,
) -> xprof_testkit::PlaneBuilder {
    p.line_with_id(1, "python", |mut l| {
        for k in 0..2 {
            let t = 1000 * k as i64;
            l = l
                .event("train", t, 1000)
                .stat("_r", 1i64)
                .stat("step_num", 5 + k as i64);
            l = dispatch_stats(l.event(dispatch, t + 10, 50), k);
        }
        l
    })
}

/// A TPU core with Steps [100,900], [1100,1900] and [2100,2500], a fusion in each, and a
/// module inside each of the first two, its stats added by `module_stats(line, k)`.
fn three_step_core(
    p: xprof_testkit::PlaneBuilder,
    module_stats: impl Fn(xprof_testkit::LineBuilder, usize) -> xprof_testkit::LineBuilder,
) -> xprof_testkit::PlaneBuilder {
    p.line("Steps", |l| {
        l.event("s", 100, 800)
            .event("s", 1100, 800)
            .event("s", 2100, 400)
    })
    .line("XLA Modules", |l| {
        let l = module_stats(l.event("jit_f(42)", 150, 600), 0);
        module_stats(l.event("jit_f(42)", 1150, 600), 1)
    })
    .line("XLA Ops", |l| {
        let l = op(l, "fusion.1", 1, "loop fusion", 200, 100);
        let l = op(l, "fusion.1", 1, "loop fusion", 1200, 100);
        op(l, "fusion.1", 1, "loop fusion", 2200, 100)
    })
}

#[test]
fn tpu_steps_join_host_roots_through_flows() {
    // Host: `train` 5 on [0,1000] dispatches context (12, 100); `train` 6 on [1000,2000]
    // dispatches (12, 200). Device: Steps [100,900], [1100,1900] and [2100,2500]; the module
    // inside each of the first two consumes the matching context. The third step has no host
    // group: dropped, as XProf discards ungrouped steps once others are grouped.
    let s = stats(
        XSpaceBuilder::new()
            .plane("/host:CPU", |p| {
                two_dispatching_steps(p, "Execute", |l, k| {
                    l.stat("_pt", 12i64).stat("_p", [100u64, 200][k])
                })
            })
            .plane("/device:TPU:0", |p| {
                three_step_core(p, |l, k| l.stat("_ct", 12i64).stat("_c", [100u64, 200][k]))
            }),
    );
    assert_eq!(s.steps.source, StepsSource::StepsLine);
    let got: Vec<(i64, &str, u64)> = s
        .steps
        .steps
        .iter()
        .map(|x| (x.step_num, x.name.as_str(), x.duration_ps()))
        .collect();
    assert_eq!(got, [(0, "train 5", 800), (1, "train 6", 800)]);
}

#[test]
fn build_without_steps_leaves_them_empty_and_the_op_views_unchanged() {
    let capture = || {
        XSpaceBuilder::new().plane("/device:TPU:0", |p| {
            p.line("Steps", |l| l.event("7", 0, 1000).stat("group_id", 7i64))
                .line("XLA Ops", |l| {
                    op(l, "fusion.1", 1, "loop fusion", 100, 300).stat("group_id", 7i64)
                })
        })
    };
    let space = host_space("host0", &capture().build(), Vec::new());
    let full = build(&space);
    let lean = xprof_opstats::build_with(&space, xprof_opstats::BuildOptions::OP_DATABASES);
    assert_eq!(full.steps.source, StepsSource::StepsLine);
    assert_eq!(lean.steps, Default::default());
    assert!(lean.steps_inferred.is_empty());
    assert_eq!(lean.device_db, full.device_db);
    assert_eq!(
        views::hlo_stats_of(&lean, &lean.device_db),
        views::hlo_stats_of(&full, &full.device_db)
    );
    assert_eq!(
        views::op_profile(&lean, "program", true),
        views::op_profile(&full, "program", true)
    );
    assert_eq!(
        views::device_information(&lean),
        views::device_information(&full)
    );
}

/// One TensorCore of the captures below: steps [0, 1 µs) and [2, 3 µs) on `Steps`, the module
/// runs that hold them on `XLA Modules`, one op inside each step on `XLA Ops`. Each line's
/// events carry `group_id` 0 and 1 when asked.
fn grouping_core(
    p: xprof_testkit::PlaneBuilder,
    (steps, modules, ops): (bool, bool, bool),
) -> xprof_testkit::PlaneBuilder {
    let gid = |l: xprof_testkit::LineBuilder, on: bool, g: i64| {
        if on { l.stat("group_id", g) } else { l }
    };
    p.line("XLA Modules", |l| {
        let l = gid(l.event("jit_step(42)", 0, 1_000_000), modules, 0);
        gid(l.event("jit_step(42)", 2_000_000, 1_000_000), modules, 1)
    })
    .line("XLA Ops", |l| {
        let l = gid(
            op(l, "fusion.3", 3, "output fusion", 1_000, 400_000),
            ops,
            0,
        );
        gid(op(l, "dot.4", 4, "convolution", 2_001_000, 500_000), ops, 1)
    })
    .line("Steps", |l| {
        let l = gid(l.event("0", 0, 1_000_000), steps, 0);
        gid(l.event("1", 2_000_000, 1_000_000), steps, 1)
    })
}

#[test]
fn tpu_step_numbers_follow_xprofs_grouping_pass() {
    // Two-core captures that differ in which events carry `group_id` and in their other planes,
    // each run through XProf 2.24.2's converters (`../shared/tools/oracle`); the step numbers
    // are those of its input-pipeline step table. XProf groups unless the capture has a
    // `group_id` stat and no `/host:` plane; grouping renumbers the steps (host roots first,
    // then the device steps in order) and gives an op without `group_id` its step's; a step
    // needs an op of its own group.
    let two_roots = |p: xprof_testkit::PlaneBuilder| {
        p.line("python", |l| {
            l.event("train", 0, 1_500_000)
                .stat("_r", 1i64)
                .event("train", 1_600_000, 1_500_000)
                .stat("_r", 1i64)
        })
    };
    let plain_host =
        |p: xprof_testkit::PlaneBuilder| p.line("python", |l| l.event("train", 0, 3_000_000));
    type Host = Option<(
        &'static str,
        fn(xprof_testkit::PlaneBuilder) -> xprof_testkit::PlaneBuilder,
    )>;
    /// (what, which lines carry `group_id`: steps, modules, ops; other plane; XProf's steps)
    type Case = (&'static str, (bool, bool, bool), Host, &'static [i64]);
    let cases: [Case; 10] = [
        (
            "all grouped, host",
            (true, true, true),
            Some(("/host:CPU", plain_host)),
            &[0, 1],
        ),
        ("steps only, no host", (true, true, false), None, &[]),
        ("modules only, no host", (false, true, false), None, &[]),
        ("ops only, no host", (false, true, true), None, &[]),
        (
            "nothing grouped, no host",
            (false, false, false),
            None,
            &[0, 1],
        ),
        (
            "ops grouped, host",
            (false, true, true),
            Some(("/host:CPU", plain_host)),
            &[0, 1],
        ),
        (
            "ops grouped, host roots",
            (false, true, true),
            Some(("/host:CPU", two_roots)),
            &[],
        ),
        (
            "nothing grouped, host roots",
            (false, true, false),
            Some(("/host:CPU", two_roots)),
            &[2, 3],
        ),
        (
            "steps grouped, host roots",
            (true, false, false),
            Some(("/host:CPU", two_roots)),
            &[2, 3],
        ),
        (
            "modules only, metadata plane",
            (false, true, false),
            Some(("/host:metadata", |p| p)),
            &[0, 1],
        ),
    ];
    for (what, groups, host, want) in cases {
        let mut b = XSpaceBuilder::new()
            .hostname("h")
            .plane("/device:TPU:0", |p| grouping_core(p, groups))
            .plane("/device:TPU:1", |p| grouping_core(p, groups));
        if let Some((name, f)) = host {
            b = b.plane(name, f);
        }
        let s = stats(b);
        let got: Vec<i64> = s.steps.steps.iter().map(|x| x.step_num).collect();
        assert_eq!(got, want, "{what}");
        if let Some(step) = s.steps.steps.first() {
            // Step 0: 1 µs on each core, 0.4 µs of it the fusion.
            assert_eq!(step.per_core.len(), 2, "{what}");
            let core = step.per_core.values().next().unwrap();
            assert_eq!(core.duration_ps, 1_000_000, "{what}");
            assert_eq!(core.category_ps["output fusion"], 400_000, "{what}");
        }
    }
}

#[test]
fn a_tpu_step_without_ops_of_its_group_is_no_step() {
    // XProf builds a step from the ops of its group: a `Steps` event with nothing running in it
    // leaves no step (not a step of 100 % idle time).
    let s = stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("Steps", |l| {
            l.event("a", 0, 100)
                .event("b", 100, 150)
                .event("c", 250, 50)
        })
        .line("XLA Ops", |l| {
            let l = op(l, "fusion.1", 1, "loop fusion", 10, 20);
            op(l, "fusion.1", 1, "loop fusion", 260, 20)
        })
    }));
    let got: Vec<i64> = s.steps.steps.iter().map(|x| x.step_num).collect();
    assert_eq!(got, [0, 2]);
}

/// Serving: XProf makes every `BatchingSessionRun`, `ProcessBatch` (TensorFlow Serving, Orbax)
/// and `TraceContext` event a step root, without a `_r` stat in the capture. XProf 2.24.2 on this
/// capture: steps `BatchingSessionRun 1` … `6` (the first and last dropped as incomplete),
/// each 9 µs = 2 µs host compute + 7 µs "All others"; the same for `ProcessBatch`,
/// `OrbaxServing::ProcessBatch` and `TraceContext`, and no step for other names (`SessionRunLike`,
/// `BrainSessionRun`, `ServingModelRun`); all run through `../shared/tools/oracle/runner.py`.
fn batching_session_runs(name: &str) -> XSpaceBuilder {
    XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "worker", |mut l| {
            for i in 0..8i64 {
                let b = i * 10_000_000;
                l = l
                    .event(name, b, 9_000_000)
                    .event("compute_py", b + 100_000, 2_000_000);
            }
            l
        })
    })
}

#[test]
fn tf_serving_batches_are_steps_without_root_stats() {
    for name in [
        "BatchingSessionRun",
        "ProcessBatch",
        "OrbaxServing::ProcessBatch",
        "TraceContext",
    ] {
        let s = stats(batching_session_runs(name));
        assert_eq!(s.steps.source, StepsSource::HostRoots, "{name}");
        let kept: Vec<String> = s
            .steps
            .complete_steps
            .iter()
            .map(|x| x.name.clone())
            .collect();
        let want: Vec<String> = (1..=6).map(|i| format!("{name} {i}")).collect();
        assert_eq!(kept, want);
        for st in &s.steps.complete_steps {
            let c = st.per_core.values().next().unwrap();
            assert_eq!(c.duration_ps, 9_000_000);
            assert_eq!((c.generic_ps[3], c.generic_ps[8]), (2_000_000, 7_000_000));
        }
    }
    // Any other name is no step root.
    for name in ["SessionRunLike", "BrainSessionRun", "ServingModelRun"] {
        let s = stats(batching_session_runs(name));
        assert_eq!(s.steps.source, StepsSource::None, "{name}");
    }
}

/// Host steps whose `python` roots (each nesting `producer` with stats `a`, `b`) reach work on
/// a runtime thread only through ids XProf's preprocessing turns into flows: `consumer`
/// [1, 4] µs of each 10 µs step, with the same stats, nests `work` [1.5, 2.5] µs.
fn runtime_requests(producer: &str, consumer: &str, a: &str, b: &str) -> XSpaceBuilder {
    runtime_requests_with(producer, consumer, a, b, 99)
}

/// [`runtime_requests`] with `b`'s value.
fn runtime_requests_with(
    producer: &str,
    consumer: &str,
    a: &str,
    b: &str,
    b_value: i64,
) -> XSpaceBuilder {
    XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |mut l| {
            for i in 0..8i64 {
                let t = i * 10_000_000;
                l = l
                    .event("train", t, 10_000_000)
                    .stat("_r", 1i64)
                    .stat("step_num", i)
                    .event(producer, t + 100_000, 200_000)
                    .stat(a, 1000 + i)
                    .stat(b, b_value);
            }
            l
        })
        .line_with_id(2, "runtime", |mut l| {
            for i in 0..8i64 {
                let t = i * 10_000_000;
                l = l
                    .event(consumer, t + 1_000_000, 3_000_000)
                    .stat(a, 1000 + i)
                    .stat(b, b_value)
                    .event("work", t + 1_500_000, 1_000_000);
            }
            l
        })
    })
}

#[test]
fn runtime_requests_join_the_step_that_queued_them_as_xprofs_preprocessing_links_them() {
    // XProf 2.24.2 (`../shared/tools/oracle/runner.py`) on the `PjrtAsyncWait`, `TpuExecuteOp`
    // and unlinked captures: steps `train 1` … `train 6` with 3.2 µs host compute (the
    // producer's 0.2 µs + the request's 3 µs) when the two ends are linked, 0.2 µs when the
    // consumer is no request. `RunProgramRequest` is another consumer of the same rule. The
    // executors are iteration 0 of their runs: other iterations would be a TensorFlow loop
    // (see `tensorflow_loop_iterations_replace_the_step_roots`).
    let linked = [
        (
            "EnqueueRequestLocked",
            "PjrtAsyncWait",
            "request_id",
            "queue_addr",
            99,
        ),
        (
            "EnqueueRequestLocked",
            "RunProgramRequest",
            "request_id",
            "queue_addr",
            99,
        ),
        (
            "ExecutorState::Process",
            "TpuExecuteOp",
            "id",
            "iter_num",
            0,
        ),
    ];
    for (producer, consumer, a, b, b_value) in linked {
        let s = stats(runtime_requests_with(producer, consumer, a, b, b_value));
        assert_eq!(s.steps.complete_steps.len(), 6, "{consumer}");
        for st in &s.steps.complete_steps {
            let g = st.per_core.values().next().unwrap().generic_ps;
            assert_eq!((g[3], g[8]), (3_200_000, 6_800_000), "{consumer}");
        }
    }
    let unlinked = stats(runtime_requests(
        "EnqueueRequestLocked",
        "NotARequest",
        "request_id",
        "queue_addr",
    ));
    let g = unlinked.steps.complete_steps[0]
        .per_core
        .values()
        .next()
        .unwrap()
        .generic_ps;
    assert_eq!((g[3], g[8]), (200_000, 9_800_000));
}

/// A TPU capture whose host steps launch programs (`DoEnqueueProgram` with `run_id`,
/// `queue_id`, `device_ordinal`) that the core's `XLA Modules` execute (same `run_id`,
/// `queue_id`), with no flow stats anywhere.
fn tpu_launches(host_runs: [i64; 2], device_runs: [i64; 2]) -> XSpaceBuilder {
    XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            two_dispatching_steps(p, "DoEnqueueProgram", |l, k| {
                l.stat("run_id", host_runs[k])
                    .stat("queue_id", 0i64)
                    .stat("device_ordinal", 0i64)
            })
        })
        .plane("/device:TPU:0", |p| {
            three_step_core(p, |l, k| {
                l.stat("run_id", device_runs[k]).stat("queue_id", 0i64)
            })
        })
}

#[test]
fn tpu_modules_join_the_host_step_that_launched_them_by_run_and_queue_id() {
    // XProf 2.24.2's step numbers on these captures: [0, 1] when the run ids match (the
    // host's cut to 27 bits first), [2, 3, 4] when they do not.
    // Through the file reader the tools use, and the decoded-proto adapter.
    let steps = |b: XSpaceBuilder| -> Vec<(i64, String)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host0.xplane.pb");
        b.write(&path).unwrap();
        let (space, _) = xprof_opstats::load::load_host("host0", &path, &[]).unwrap();
        let read = build(&space);
        let decoded = stats(b);
        let of = |s: &OpStats| -> Vec<(i64, String)> {
            s.steps
                .steps
                .iter()
                .map(|x| (x.step_num, x.name.clone()))
                .collect()
        };
        assert_eq!(of(&read), of(&decoded));
        of(&read)
    };
    let joined = vec![(0, "train 5".to_string()), (1, "train 6".to_string())];
    assert_eq!(steps(tpu_launches([7, 8], [7, 8])), joined);
    assert_eq!(
        steps(tpu_launches([7 + (1 << 27), 8 + (1 << 28)], [7, 8])),
        joined
    );
    let apart: Vec<i64> = steps(tpu_launches([7, 8], [17, 18]))
        .into_iter()
        .map(|x| x.0)
        .collect();
    assert_eq!(apart, [2, 3, 4]);
}

/// TensorFlow-shaped: `train` roots holding a nested `FunctionRun` root; tf.data's function
/// runs (a `FunctionRun` root inside `InstantiatedCapturedFunction::RunAsync`, same `id`); a
/// stand-alone `FunctionRun` root on a third thread after each step.
fn tf_shaped() -> XSpaceBuilder {
    XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |mut l| {
            for i in 0..8i64 {
                let t = i * 10_000_000;
                l = l
                    .event("train", t, 6_000_000)
                    .stat("_r", 1i64)
                    .stat("step_num", i)
                    .event("FunctionRun", t + 100_000, 2_000_000)
                    .stat("_r", 1i64)
                    .stat("id", 300 + i)
                    .event("MatMul", t + 200_000, 1_000_000);
            }
            l
        })
        .line_with_id(2, "tf_data_iterator_resource", |mut l| {
            for i in 0..8i64 {
                let t = i * 10_000_000 + 3_000_000;
                l = l
                    .event("InstantiatedCapturedFunction::RunAsync", t, 2_000_000)
                    .stat("id", 500 + i)
                    .event("FunctionRun", t + 100_000, 1_500_000)
                    .stat("_r", 1i64)
                    .stat("id", 500 + i)
                    .event("Mul", t + 200_000, 1_000_000);
            }
            l
        })
        .line_with_id(3, "worker", |mut l| {
            for i in 0..8i64 {
                let t = i * 10_000_000 + 6_500_000;
                l = l
                    .event("FunctionRun", t, 3_000_000)
                    .stat("_r", 1i64)
                    .stat("id", 900 + i)
                    .event("AddV2", t + 100_000, 2_000_000);
            }
            l
        })
    })
}

/// `iter(i)`: (id, iter_num) of the executor of step i.
fn executor_requests(iter: impl Fn(i64) -> (i64, i64), consumer: &str) -> XSpaceBuilder {
    XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |mut l| {
            for i in 0..8i64 {
                let t = i * 10_000_000;
                let (a, b) = iter(i);
                l = l
                    .event("train", t, 10_000_000)
                    .stat("_r", 1i64)
                    .stat("step_num", i)
                    .event("ExecutorState::Process", t + 100_000, 200_000)
                    .stat("id", a)
                    .stat("iter_num", b);
            }
            l
        })
        .line_with_id(2, "runtime", |mut l| {
            for i in 0..8i64 {
                let t = i * 10_000_000;
                let (a, b) = iter(i);
                l = l
                    .event(consumer, t + 1_000_000, 3_000_000)
                    .stat("id", a)
                    .stat("iter_num", b)
                    .event("work", t + 1_500_000, 1_000_000);
            }
            l
        })
    })
}

#[test]
fn tensorflow_function_runs_are_not_steps_of_their_own() {
    // XProf 2.24.2 (`../shared/tools/oracle/runner.py`) on `tf_shaped`: `train 1` … `train 6`,
    // 1 µs host compute and 5 µs other each. A `FunctionRun` root nested in a step is part of
    // it; tf.data's (same `id` as a captured-function run) is not a root; a stand-alone one
    // is a group without a step marker (an implicit root), so no step.
    let s = stats(tf_shaped());
    assert_eq!(s.steps.source, StepsSource::HostRoots);
    let names: Vec<&str> = s
        .steps
        .complete_steps
        .iter()
        .map(|x| x.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "train 1", "train 2", "train 3", "train 4", "train 5", "train 6"
        ]
    );
    for st in &s.steps.complete_steps {
        let g = st.per_core.values().next().unwrap().generic_ps;
        assert_eq!((g[3], g[8]), (1_000_000, 5_000_000), "{}", st.name);
    }
}

#[test]
fn tensorflow_loop_iterations_replace_the_step_roots() {
    // XProf 2.24.2 on these captures: no steps. Executors of a run past its iteration 0 make
    // a TensorFlow loop, whose iterations become the only roots; they are implicit roots
    // (no step marker), and the `train` events are left out of every group. Iteration 0 of
    // each run is no loop: the `train` roots make the steps.
    let loops = [
        executor_requests(|i| (1000 + i, 99), "TpuExecuteOp"),
        executor_requests(|i| (7, i), "TpuExecuteOp"),
        executor_requests(|i| (7, i), "IteratorGetNextOp::DoCompute"),
    ];
    for b in loops {
        let s = stats(b);
        assert!(s.steps.steps.is_empty());
        assert_eq!(s.steps.no_steps, Some(NoSteps::TfLoop));
    }
    let runs = stats(executor_requests(|i| (1000 + i, 0), "TpuExecuteOp"));
    assert_eq!(runs.steps.complete_steps.len(), 6);
    assert_eq!(runs.steps.no_steps, None);
    // A loop op anywhere in the metadata: XProf groups nothing.
    let with_while = XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |mut l| {
            for i in 0..8i64 {
                l = l
                    .event("train", i * 1_000_000, 900_000)
                    .stat("_r", 1i64)
                    .event("MatMul", i * 1_000_000 + 10, 500_000);
            }
            l.event("WhileOp-EvalCond", 9_000_000, 10)
        })
    });
    let s = stats(with_while);
    assert!(s.steps.steps.is_empty());
    assert_eq!(s.steps.no_steps, Some(NoSteps::LoopOps));
}

#[test]
fn no_steps_say_why() {
    // Function runs alone are roots without step markers (Keras 3's `model.fit` marks its
    // batches with `Profiled batch` events that are no roots): XProf 2.24.2 finds no steps in
    // such a real capture (TensorFlow 2.21, Keras 3.15, TensorBoard's `profile_batch`).
    let runs = XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |mut l| {
            for i in 0..8i64 {
                l = l
                    .event("FunctionRun", i * 1_000_000, 900_000)
                    .stat("_r", 1i64)
                    .event("MatMul", i * 1_000_000 + 10, 500_000)
                    .event("Profiled batch", i * 1_000_000 + 600_000, 100_000)
                    .stat("step_num", i);
            }
            l
        })
    });
    let s = stats(runs);
    assert!(s.steps.steps.is_empty());
    assert_eq!(s.steps.no_steps, Some(NoSteps::NoneQualified));
    let bare = XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |l| l.event("MatMul", 0, 500_000))
    });
    let bare = stats(bare);
    assert_eq!(bare.steps.no_steps, Some(NoSteps::NoMarkers));
    let summary = xprof_opstats::views::steps_summary(&bare);
    assert_eq!(summary["no_steps_reason"], NoSteps::NoMarkers.reason());
    assert!(
        summary["no_steps_advice"]
            .as_str()
            .unwrap()
            .contains("step_num")
    );
    assert_eq!(stats(tf_shaped()).steps.no_steps, None);
}
