//! `diff`: two synthetic TPU captures of one program before and after a change; every expected
//! number computed by hand in the comments.

use serde_json::{Value, json};
use xprof_opstats::adapter::host_space;
use xprof_opstats::{OpStats, build};
use xprof_testkit::{LineBuilder, XSpaceBuilder};
use xprof_views::diff::{Compared, DiffOptions, diff};
use xprof_views::recompile::{Covered, host_compile_spans};

fn stats(b: XSpaceBuilder) -> OpStats {
    build(&host_space("host0", &b.build(), Vec::new()))
}

/// A TPU op of program 42 on `XLA Ops`, in step `group`.
fn op(
    l: LineBuilder,
    (name, sym, cat, fw): (&str, u64, &str, &str),
    at: i64,
    dur: i64,
    group: i64,
) -> LineBuilder {
    l.event(&format!("%{name} = f32[] op()"), at, dur)
        .display_name(name)
        .metadata_stat("program_id", 42u64)
        .metadata_stat("symbol_id", sym)
        .metadata_stat("hlo_category", cat)
        .metadata_stat("tf_op", fw)
        .stat("group_id", group)
}

/// Baseline: 2 steps of 1000 ps. fusion.1 (`jit(f)/mul`) runs 300 ps in step 1 and 200 in
/// step 2; copy.2 (`jit(f)/transpose`) 100 ps in step 1.
fn baseline() -> OpStats {
    stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("Steps", |l| {
            l.event("1", 0, 1000)
                .stat("group_id", 1i64)
                .event("2", 1000, 1000)
                .stat("group_id", 2i64)
        })
        .line("XLA Ops", |l| {
            let l = op(l, ("fusion.1", 1, "loop fusion", "jit(f)/mul"), 100, 300, 1);
            let l = op(
                l,
                ("copy.2", 2, "data formatting", "jit(f)/transpose"),
                500,
                100,
                1,
            );
            op(
                l,
                ("fusion.1", 1, "loop fusion", "jit(f)/mul"),
                1100,
                200,
                2,
            )
        })
    }))
}

/// Optimized: 3 steps of 800 ps. fusion.1 100 ps in each; the transpose is now fused as
/// fusion.3 (same framework op, new HLO name), 50 ps in each step.
fn optimized() -> OpStats {
    stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("Steps", |l| {
            (0..3).fold(l, |l, i| {
                l.event(&i.to_string(), i * 800, 800)
                    .stat("group_id", i + 1)
            })
        })
        .line("XLA Ops", |l| {
            (0..3).fold(l, |l, i| {
                let l = op(
                    l,
                    ("fusion.1", 1, "loop fusion", "jit(f)/mul"),
                    i * 800 + 100,
                    100,
                    i + 1,
                );
                op(
                    l,
                    ("fusion.3", 3, "loop fusion", "jit(f)/transpose"),
                    i * 800 + 300,
                    50,
                    i + 1,
                )
            })
        })
    }))
}

fn close(v: &Value, want: f64) {
    let got = v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1e-12),
        "{got} vs {want}"
    );
}

fn find<'a>(rows: &'a Value, key: &str, val: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r[key] == val)
        .unwrap_or_else(|| panic!("no row {key}={val} in {rows}"))
}

#[test]
fn a_faster_step_is_faster_and_the_ops_say_why() {
    let d = Value::Object(diff(
        Compared::new(&baseline()),
        Compared::new(&optimized()),
        DiffOptions::default(),
    ));
    // Step time 1000 → 800 ps: -20 %, speedup 1.25; TPU steps are all complete.
    let st = &d["step_time"];
    assert_eq!(
        st["basis"],
        "complete steps (the average XProf's overview reports)"
    );
    close(&st["baseline_ms"], 1000e-9);
    close(&st["optimized_ms"], 800e-9);
    close(&st["delta_pct"], -20.0);
    close(&st["speedup"], 1.25);
    assert_eq!(d["verdict"]["result"], "faster");
    assert_eq!(d["verdict"]["decided_by"], "average step time");
    // Op self time per step: (300+200+100)/2 = 300 ps → (300+150)/3 = 150 ps, -50 %.
    assert_eq!(d["normalization"]["basis"], "per_step");
    assert_eq!(
        (
            d["normalization"]["baseline_divisor"].clone(),
            d["normalization"]["optimized_divisor"].clone()
        ),
        (json!(2), json!(3))
    );
    close(&d["op_time"]["baseline_us"], 300e-6);
    close(&d["op_time"]["optimized_us"], 150e-6);
    close(&d["op_time"]["delta_pct"], -50.0);
    // By category: loop fusion 500/2 = 250 → 450/3 = 150 ps (-100, 2/3 of the change), data
    // formatting 50 → gone (-50, 1/3). Largest change first.
    let cats = &d["by_category"];
    assert_eq!(cats[0]["category"], "loop fusion");
    close(&cats[0]["delta_us"], -100e-6);
    close(&cats[0]["share_of_op_time_delta_pct"], 200.0 / 3.0);
    let df = find(cats, "category", "data formatting");
    assert_eq!(df["status"], "removed");
    assert_eq!(df["optimized_self_time_ps"], Value::Null);
    assert_eq!(df["baseline_self_time_ps"], json!(100));
    close(&df["share_of_op_time_delta_pct"], 100.0 / 3.0);
    // By framework op, the renamed transpose compares with itself: 100/2 = 50 → 150/3 = 50.
    let fw = &d["by_framework_op"]["records"];
    let mul = find(fw, "framework_op", "jit(f)/mul");
    close(&mul["delta_us"], -150e-6);
    assert_eq!(mul["status"], "faster");
    assert_eq!(
        (
            mul["baseline_occurrences"].clone(),
            mul["optimized_occurrences"].clone()
        ),
        (json!(2), json!(3))
    );
    // Per occurrence: 500/2 = 250 ps → 300/3 = 100 ps, -60 %.
    close(&mul["baseline_avg_us"], 250e-6);
    close(&mul["optimized_avg_us"], 100e-6);
    close(&mul["avg_delta_pct"], -60.0);
    let tr = find(fw, "framework_op", "jit(f)/transpose");
    assert_eq!(tr["status"], "same");
    close(&tr["delta_pct"], 0.0);
    // By HLO op the rename shows: copy.2 removed, fusion.3 new (no % without a baseline).
    let ops = &d["by_hlo_op"]["records"];
    assert_eq!(d["by_hlo_op"]["total_records"], json!(3));
    assert_eq!(find(ops, "hlo_op", "copy.2")["status"], "removed");
    let new = find(ops, "hlo_op", "fusion.3");
    assert_eq!(new["status"], "new");
    assert_eq!(new["delta_pct"], Value::Null);
    close(&new["delta_us"], 50e-6);
    assert_eq!(ops[0]["hlo_op"], "fusion.1");
    assert_eq!(d["warnings"], json!([]));
    // Step -200 ps = op time -150 ps + the rest -50 ps; compilations were not looked for.
    let a = &st["attribution"];
    close(&a["op_time_delta_ms"], -150e-9);
    close(&a["rest_delta_ms"], -50e-9);
    assert_eq!(a["compile_delta_ms"], Value::Null);
    assert_eq!(a["main_cause"], "op self time");
}

/// Host steps (`train` roots of `len` µs at `starts` µs, with a 5 µs op inside) and compile
/// events (start, duration µs) on a worker thread; the op statistics and the compile spans.
fn host_steps(len: i64, starts: &[i64], compiles: &[(i64, i64)]) -> (OpStats, Covered) {
    const US: i64 = 1_000_000;
    let b = XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |l| {
            starts.iter().enumerate().fold(l, |l, (i, s)| {
                l.event("train", s * US, len * US)
                    .stat("_r", 1i64)
                    .stat("step_num", i as i64)
                    .event("matmul", (s + 1) * US, 5 * US)
            })
        })
        .line_with_id(2, "worker", |l| {
            compiles.iter().fold(l, |l, (s, d)| {
                l.event("PjRtCpuClient::Compile", s * US, d * US)
            })
        })
    });
    let space = host_space("host0", &b.build(), Vec::new());
    (build(&space), host_compile_spans(&space).covering())
}

#[test]
fn a_step_time_change_from_recompilation_is_attributed_to_it() {
    // Baseline: 3 steps of 10 µs, no compilation. Optimized: 3 steps of 30 µs, the last two
    // compiling 20 µs each: 40/3 µs per step; no XLA op either side. Step +20 µs = op 0 +
    // compile 13.33 + rest 6.67 µs: compilation is the main cause.
    let (bs, bc) = host_steps(10, &[0, 100, 200], &[]);
    let (os, oc) = host_steps(30, &[0, 100, 200], &[(105, 20), (205, 20)]);
    let d = Value::Object(diff(
        Compared::new(&bs).with_compiles(&bc),
        Compared::new(&os).with_compiles(&oc),
        DiffOptions::default(),
    ));
    let st = &d["step_time"];
    close(&st["delta_ms"], 20e-3);
    close(&st["baseline_compile_ms_measured"], 0.0);
    close(&st["optimized_compile_ms_measured"], 40e-3 / 3.0);
    let a = &st["attribution"];
    close(&a["compile_delta_ms"], 40e-3 / 3.0);
    close(&a["rest_delta_ms"], 20e-3 / 3.0);
    close(&a["op_time_delta_ms"], 0.0);
    assert_eq!(a["main_cause"], "XLA compilation inside the steps");
    assert_eq!(d["verdict"]["result"], "slower");
}

#[test]
fn swapping_the_sides_swaps_the_verdict() {
    let d = Value::Object(diff(
        Compared::new(&optimized()),
        Compared::new(&baseline()),
        DiffOptions::default(),
    ));
    assert_eq!(d["verdict"]["result"], "slower");
    close(&d["step_time"]["delta_pct"], 25.0);
    close(&d["op_time"]["delta_pct"], 100.0);
}

#[test]
fn a_change_inside_the_tolerance_is_unchanged() {
    // -20 % is unchanged when 25 % is tolerated.
    let opts = DiffOptions {
        limit: 1,
        tolerance_pct: 25.0,
    };
    let d = Value::Object(diff(
        Compared::new(&baseline()),
        Compared::new(&optimized()),
        opts,
    ));
    assert_eq!(d["verdict"]["result"], "unchanged");
    assert_eq!(d["by_hlo_op"]["returned_records"], json!(1));
    assert_eq!(d["by_hlo_op"]["truncated"], json!(true));
}

#[test]
fn without_steps_op_time_decides_and_unequal_windows_are_a_warning() {
    // The same op twice, without Steps lines: per capture. 600 ps of ops in both; the
    // baseline's op timeline spans 0..600 ps, the optimized one's 0..3000 ps.
    let strip = |b: bool| {
        stats(XSpaceBuilder::new().plane("/device:TPU:0", |p| {
            p.line("XLA Ops", |l| {
                if b {
                    let l = op(l, ("fusion.1", 1, "loop fusion", "jit(f)/mul"), 0, 300, 1);
                    op(l, ("fusion.1", 1, "loop fusion", "jit(f)/mul"), 300, 300, 1)
                } else {
                    let l = op(l, ("fusion.1", 1, "loop fusion", "jit(f)/mul"), 0, 300, 1);
                    op(
                        l,
                        ("fusion.1", 1, "loop fusion", "jit(f)/mul"),
                        2700,
                        300,
                        1,
                    )
                }
            })
        }))
    };
    let d = Value::Object(diff(
        Compared::new(&strip(true)),
        Compared::new(&strip(false)),
        DiffOptions::default(),
    ));
    assert_eq!(d["step_time"], Value::Null);
    assert!(
        d["step_time_reason"]
            .as_str()
            .unwrap()
            .contains("baseline:")
    );
    assert_eq!(d["normalization"]["basis"], "per_capture");
    // 600 ps both: unchanged by op time.
    assert_eq!(d["verdict"]["decided_by"], "op self time per capture");
    assert_eq!(d["verdict"]["result"], "unchanged");
    // Windows 600 and 3000 ps differ by more than 10 %: said.
    let w = d["warnings"].as_array().unwrap();
    assert!(
        w.iter().any(|w| w.as_str().unwrap().contains("windows")),
        "{w:?}"
    );
}

#[test]
fn nothing_to_compare_is_not_comparable() {
    let empty =
        stats(XSpaceBuilder::new().plane("/host:CPU", |p| p.line("t", |l| l.event("x", 0, 10))));
    let d = Value::Object(diff(
        Compared::new(&empty),
        Compared::new(&baseline()),
        DiffOptions::default(),
    ));
    assert_eq!(d["verdict"]["result"], "not_comparable");
    assert_eq!(d["baseline"]["op_source"], "none");
    let w = d["warnings"].as_array().unwrap();
    assert!(
        w.iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("the captures ran on different hardware")),
        "{w:?}"
    );
    assert!(
        w.iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("the baseline has no XLA ops")),
        "{w:?}"
    );
}
