//! Parity with XProf 2.24.2's converters on the shared corpus (`$XPROF_CORPUS`, else
//! `<workspace>/../shared`; under `CI` a missing corpus fails).

use std::path::{Path, PathBuf};

use serde_json::Value;
use xprof_opstats::{OpStats, build, load::load_host, views};

fn corpus() -> Option<PathBuf> {
    // The one definition of where the corpus is and that CI never skips.
    xprof_plugin_api::sdk::testing::corpus(env!("CARGO_MANIFEST_DIR"))
}

fn run_dir(c: &Path, fixture: &str) -> PathBuf {
    match fixture {
        "seed-v6e" => c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun"),
        "jax-cpu-matmul" => c.join("fixtures/jax-cpu/logdir/plugins/profile/matmul"),
        _ => c.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_train"),
    }
}

fn stats(c: &Path, fixture: &str) -> OpStats {
    let dir = run_dir(c, fixture);
    let hlo: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".hlo_proto.pb"))
        .collect();
    let (space, _) = load_host("host0", &dir.join("host0.xplane.pb"), &hlo).unwrap();
    build(&space)
}

fn oracle(c: &Path, fixture: &str, view: &str) -> Value {
    let p = c
        .join("oracle/xprof-2.24.2")
        .join(fixture)
        .join(format!("{view}.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// DataTable rows as maps of column id → value.
fn rows(t: &Value) -> Vec<serde_json::Map<String, Value>> {
    let ids: Vec<String> = t["cols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            ids.iter()
                .cloned()
                .zip(
                    r["c"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c.get("v").cloned().unwrap_or(Value::Null)),
                )
                .collect()
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-12) || (a - b).abs() < 1e-9
}

fn assert_num(ours: &Value, theirs: &Value, what: &str) {
    let (a, b) = (ours.as_f64(), theirs.as_f64());
    assert!(
        a.zip(b).is_some_and(|(a, b)| close(a, b)),
        "{what}: ours {ours} vs XProf {theirs}"
    );
}

#[test]
fn seed_v6e_hlo_stats_match_xprof() {
    let Some(c) = corpus() else { return };
    let s = stats(&c, "seed-v6e");
    let ours = views::hlo_stats_of(&s, &s.device_db);
    let theirs = rows(&oracle(&c, "seed-v6e", "hlo_stats"));
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(&theirs) {
        for k in [
            "program_id",
            "category",
            "hlo_op_name",
            "hlo_op_expression",
            "tf_op_name",
            "bound_by",
            "core_type",
            "hlo_rematerialization",
        ] {
            assert_eq!(o[k], t[k], "{k}");
        }
        for k in [
            "rank",
            "occurrences",
            "total_time",
            "avg_time",
            "total_self_time",
            "avg_self_time",
            "total_self_time_percent",
            "cumulative_total_self_time_percent",
            "dma_stall_percent",
        ] {
            assert_num(&o[k], &t[k], k);
        }
        // Its bytes are the same blind spot (0 in XProf's cost model): null + reason, and the
        // bandwidths and intensity derived from them too.
        for k in [
            "measured_memory_bw",
            "hbm_bw",
            "cmem_read_bw",
            "cmem_write_bw",
            "operational_intensity",
        ] {
            assert_eq!(t[k].as_f64(), Some(0.0), "{k}");
            assert!(o[k].is_null(), "{k} should be a placeholder");
            assert!(o[&format!("{k}_reason")].is_string(), "{k}");
        }
        // The custom call's FLOP rates are XProf placeholders (0): null + reason + measured.
        for k in ["model_flop_rate", "normalized_flop_rate"] {
            assert_eq!(t[k].as_f64(), Some(0.0));
            assert!(o[k].is_null(), "{k} should be a placeholder");
            assert!(o[&format!("{k}_reason")].is_string());
            assert!(o[&format!("{k}_measured")].as_f64().unwrap() > 0.0);
        }
        // 3 launches × 1076887552 FLOPs over 227262.5 ns.
        assert!(close(
            o["model_flop_rate_measured"].as_f64().unwrap(),
            3.0 * 1076887552.0 / 227262.5
        ));
        assert_eq!(o["total_self_time_ps"], 227262500u64);
        assert_eq!(o["bound_by_measured"], "Compute");
    }
}

#[test]
fn seed_v6e_roofline_and_device_information_match_xprof() {
    let Some(c) = corpus() else { return };
    let s = stats(&c, "seed-v6e");
    let o = oracle(&c, "seed-v6e", "roofline_model");
    let (dev, recs) = views::roofline_model(&s);
    let p = o[0]["p"].as_object().unwrap();
    for (k, v) in p {
        assert_eq!(&dev[k], v, "device property {k}");
    }
    let theirs = rows(&o[0]);
    assert_eq!(recs.len(), theirs.len());
    for (r, t) in recs.iter().zip(&theirs) {
        for k in [
            "step",
            "category",
            "operation",
            "bound_by",
            "include_infeed_outfeed",
            "hlo_module_id",
        ] {
            assert_eq!(r[k], t[k], "{k} of {}", t["operation"]);
        }
        for k in [
            "rank",
            "occurrences",
            "total_time",
            "avg_time",
            "total_self_time",
            "avg_self_time",
            "total_self_time_percent",
            "cumulative_total_self_time_percent",
            "hbm_bw",
            "operational_intensity",
            "roofline_efficiency",
            "max_mem_bw_utilization",
            "total_time_per_core",
            "total_time_in_percentage",
        ] {
            assert_num(
                &r[k],
                &t[k],
                &format!("{k} of {} {}", t["step"], t["operation"]),
            );
        }
        if t["category"] == "custom-call" {
            assert!(r["measured_flop_rate"].is_null());
        } else {
            assert_num(
                &r["measured_flop_rate"],
                &t["measured_flop_rate"],
                "measured_flop_rate",
            );
        }
    }
    let info = views::device_information(&s).unwrap();
    assert_eq!(info["device_type"], "TPU v6 Lite");
    assert!(close(info["peak_flop_rate"].as_f64().unwrap(), 946700.0));
    assert!(close(
        info["hbm_ridge_point"].as_f64().unwrap(),
        946700.0 / 1637.993152512
    ));
    for (k, v) in p {
        assert_eq!(&info["xprof_strings"][k], v, "{k}");
    }
}

#[test]
fn seed_v6e_overview_matches_xprof() {
    let Some(c) = corpus() else { return };
    let s = stats(&c, "seed-v6e");
    let o = oracle(&c, "seed-v6e", "overview_page");
    let ov = views::overview(&s);
    let ps = &ov["performance_summary"];
    let p = o[0]["p"].as_object().unwrap();
    for k in [
        "device_duty_cycle_percent",
        "device_idle_time_percent",
        "host_idle_time_percent",
        "device_tf_op_percent",
        "host_tf_op_percent",
        "device_op_time_eager_percent",
        "idle_time_high_confidence_ps",
    ] {
        assert_eq!(ps[k], p[k], "{k}");
    }
    // XProf placeholders (0 for what it cannot measure): null + reason. The host framework
    // ops are 3 zero-length instants, so the host eager share is 0 of 0.
    for k in [
        "flop_rate_utilization_relative_to_roofline",
        "mxu_utilization_percent",
        "steptime_ms_average",
        "host_op_time_eager_percent",
    ] {
        let theirs = p
            .get(k)
            .or_else(|| o[1]["p"].get(k))
            .and_then(Value::as_str);
        assert_eq!(theirs.map(|v| v.starts_with("0.0")), Some(true), "{k}");
        assert!(ps[k].is_null(), "{k}");
        assert!(ps[format!("{k}_reason")].is_string(), "{k}");
    }
    assert!(ps["flop_rate_utilization_relative_to_roofline_measured"].is_string());
    let env = o[2]["p"].as_object().unwrap();
    for (k, v) in env {
        assert_eq!(&ov["run_environment"][k], v, "{k}");
    }
    assert_eq!(ov["steps"]["steps_source"], "none");
    assert_eq!(ov["steps"]["steps_inferred"]["count"], 3);
    // XProf's own CLI: "custom_call_share_pct": 37.44.
    assert_eq!(ps["custom_call_share_pct"], 37.44);
    assert_eq!(ps["custom_call_self_time_ps"], 227262500u64);
}

#[test]
fn seed_v6e_op_profile_matches_xprof() {
    let Some(c) = corpus() else { return };
    let s = stats(&c, "seed-v6e");
    let o = oracle(&c, "seed-v6e", "op_profile");
    for (key, idle) in [("byProgram", true), ("byProgramExcludeIdle", false)] {
        let ours = views::op_profile(&s, "program", idle);
        let theirs = &o[key];
        assert_eq!(
            ours["metrics"]["rawTime"], theirs["metrics"]["rawTime"],
            "{key} root"
        );
        let tc: Vec<&Value> = theirs["children"].as_array().unwrap().iter().collect();
        let oc = ours["children"].as_array().unwrap();
        assert_eq!(oc.len(), tc.len());
        for (a, b) in oc.iter().zip(tc) {
            assert_eq!(a["name"], b["name"]);
            assert_eq!(a["metrics"]["rawTime"], b["metrics"]["rawTime"]);
        }
        let prog = oc.iter().find(|n| n["name"] != "IDLE").unwrap();
        let cat = &prog["children"][0];
        assert_eq!(cat["name"], "custom-call");
        assert_eq!(cat["metrics"]["occurrences"], 3);
        let op = &cat["children"][0];
        assert_eq!(op["name"], "matmul_optimized.1");
        assert_eq!(op["metrics"]["rawTime"], 227262500u64);
        assert!(op["metrics"]["rawFlops"].is_null());
        assert_eq!(op["metrics"]["rawFlops_measured"], 3230662656u64);
    }
}

#[test]
fn cpu_captures_match_xprof_and_add_host_executed_ops() {
    let Some(c) = corpus() else { return };
    for f in ["jax-cpu-matmul", "jax-cpu-mlp_train"] {
        let s = stats(&c, f);
        let o = oracle(&c, f, "overview_page");
        let ov = views::overview(&s);
        let env = o[2]["p"].as_object().unwrap();
        for (k, v) in env {
            assert_eq!(&ov["run_environment"][k], v, "{f} {k}");
        }
        // XProf's device views are empty on CPU; ours show the host-executed XLA ops.
        assert_eq!(
            oracle(&c, f, "op_profile")["byProgram"]["children"]
                .as_array()
                .unwrap()
                .len(),
            0
        );
        let db = s.host_xla_db.as_ref().expect("host-executed ops");
        assert!(db.metrics.iter().any(|m| m.occurrences > 0
            && m.category != "unknown"
            && s.program_names.contains_key(&m.program_id)));
        let prof = views::op_profile(&s, "program", true);
        assert_eq!(prof["host_executed"], true);
        assert!(ov["performance_summary"]["device_duty_cycle_percent"].is_null());
    }
}

#[test]
fn mlp_train_steps_follow_xprof_grouping() {
    let Some(c) = corpus() else { return };
    let s = stats(&c, "jax-cpu-mlp_train");
    assert_eq!(s.steps.source, xprof_opstats::steps::StepsSource::HostRoots);
    // XProf lists all 10 `train` roots in the pod viewer and drops the first and last
    // ("maybe incomplete") in the overview's step table.
    let pod = oracle(&c, "jax-cpu-mlp_train", "pod_viewer");
    assert_eq!(
        pod["podStatsSequence"]["podStatsMap"]
            .as_array()
            .unwrap()
            .len(),
        s.steps.steps.len()
    );
    let o = oracle(&c, "jax-cpu-mlp_train", "overview_page");
    let table = rows(&o[1]);
    let names: Vec<Value> = s
        .steps
        .complete_steps
        .iter()
        .map(|st| Value::from(st.name.clone()))
        .collect();
    let theirs: Vec<Value> = table.iter().map(|r| r["stepnum"].clone()).collect();
    assert_eq!(names, theirs);
    // Every step's breakdown accounts for its whole duration.
    for st in &s.steps.steps {
        let cs = st.per_core.values().next().unwrap();
        assert_eq!(cs.generic_ps.iter().sum::<u64>(), cs.duration_ps);
        assert!(cs.generic_ps[3] > 0, "host compute in {}", st.name);
    }
}

/// The project's own captures (`fixtures/`) and XProf 2.24.2's outputs for exactly those files.
fn local(run: &str) -> (OpStats, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let captures = if run.starts_with("tf_") {
        "tf-cpu"
    } else if run.starts_with("ptxla_") {
        "ptxla-cpu"
    } else {
        "jax-cpu"
    };
    let dir = root.join(captures).join("logdir/plugins/profile").join(run);
    let (space, _) = load_host("host0", &dir.join("host0.xplane.pb"), &[]).unwrap();
    (
        build(&space),
        root.join("oracle").join(run).join("converters"),
    )
}

fn read_json(p: PathBuf) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

#[test]
fn local_mlp_steps_match_xprof_step_by_step() {
    steps_match_xprof_step_by_step("mlp_steps");
}

/// Four CPU devices: each step's ops run once per device, on the devices' own threads.
#[test]
fn local_sharded_steps_match_xprof_step_by_step() {
    steps_match_xprof_step_by_step("sharded");
}

/// A real TensorFlow custom training loop (`fixtures/gen_tf_fixtures.py`: 7 steps marked
/// `train`, tf.data's function runs and the step function's `FunctionRun` roots besides).
#[test]
fn local_tf_train_loop_steps_match_xprof_step_by_step() {
    steps_match_xprof_step_by_step("tf_train_loop");
    let (s, _) = local("tf_train_loop");
    let names: Vec<&str> = s.steps.steps.iter().map(|x| x.name.as_str()).collect();
    let want: Vec<String> = (0..7).map(|i| format!("train {i}")).collect();
    assert_eq!(names, want);
}

/// A real PyTorch/XLA training loop (`fixtures/gen_ptxla_fixtures.py`: 6 steps in
/// `xp.StepTrace("train_step", step_num=i)`), on the CPU backend.
#[test]
fn local_ptxla_train_steps_match_xprof_step_by_step() {
    steps_match_xprof_step_by_step("ptxla_train");
    let (s, _) = local("ptxla_train");
    let names: Vec<&str> = s.steps.steps.iter().map(|x| x.name.as_str()).collect();
    let want: Vec<String> = (0..6).map(|i| format!("train_step {i}")).collect();
    assert_eq!(names, want);
    // XProf's overview drops the first and last of more than 5 steps.
    let complete: Vec<&str> = s
        .steps
        .complete_steps
        .iter()
        .map(|x| x.name.as_str())
        .collect();
    assert_eq!(complete, &names[1..5]);
}

/// A real TensorFlow `tf.while_loop`: its executor loop's iterations replace the step roots,
/// and XProf finds no steps (its pod viewer and input pipeline list none).
#[test]
fn local_tf_while_loop_has_no_steps_as_in_xprof() {
    let (s, oracle_dir) = local("tf_while_loop");
    let pod = read_json(oracle_dir.join("pod_viewer.json"));
    let theirs = pod["podStatsSequence"]["podStatsMap"].as_array();
    assert!(theirs.is_none_or(|v| v.is_empty()));
    let ipa = read_json(oracle_dir.join("input_pipeline_analyzer.json"));
    assert_eq!(ipa[1]["rows"].as_array().map(Vec::len), Some(0));
    assert!(s.steps.steps.is_empty());
    assert_eq!(
        s.steps.no_steps,
        Some(xprof_opstats::steps::NoSteps::TfLoop)
    );
}

/// Our steps beside XProf's pod-viewer steps after checking that they are the same steps (count,
/// numbers, durations): (step number, our generic breakdown, XProf's), components 1..9 in µs.
fn steps_beside_xprofs(s: &OpStats, oracle_dir: &Path) -> Vec<(i64, [f64; 9], [f64; 9])> {
    let pod = read_json(oracle_dir.join("pod_viewer.json"));
    let theirs = pod["podStatsSequence"]["podStatsMap"].as_array().unwrap();
    assert_eq!(theirs.len(), s.steps.steps.len());
    s.steps
        .steps
        .iter()
        .zip(theirs)
        .map(|(st, t)| {
            assert_eq!(Value::from(st.step_num), t["stepNum"]);
            let core = t["podStatsPerCore"]
                .as_object()
                .unwrap()
                .values()
                .next()
                .unwrap();
            let cs = st.per_core.values().next().unwrap();
            assert!(
                close(
                    cs.duration_ps as f64 / 1e6,
                    core["totalDurationUs"].as_f64().unwrap()
                ),
                "step {}",
                st.step_num
            );
            let ours = cs.generic_ps.map(|v| v as f64 / 1e6);
            let theirs = std::array::from_fn(|i| {
                core["stepBreakdownUs"][(i + 1).to_string()]
                    .as_f64()
                    .unwrap()
            });
            (st.step_num, ours, theirs)
        })
        .collect()
}

fn steps_match_xprof_step_by_step(run: &str) {
    let (s, oracle_dir) = local(run);
    assert_eq!(s.steps.source, xprof_opstats::steps::StepsSource::HostRoots);
    for (step, ours, theirs) in steps_beside_xprofs(&s, &oracle_dir) {
        // Generic components: ids 1..9 in XProf, indices 0..8 here.
        for (i, (us, them)) in ours.iter().zip(theirs).enumerate() {
            assert!(
                close(*us, them),
                "step {step} component {}: {us} vs {them}",
                i + 1
            );
        }
    }
    let o = read_json(oracle_dir.join("overview_page.json"));
    let p = o[1]["p"].as_object().unwrap();
    let ov = views::overview(&s);
    for k in [
        "steptime_ms_average",
        "steptime_ms_standard_deviation",
        "steptime_ms_minimum",
        "steptime_ms_maximum",
        "host_compute_time_ms_avg",
        "host_compute_time_ms_sdv",
        "other_time_ms_avg",
        "other_time_ms_sdv",
        "device_compute_time_ms_avg",
    ] {
        assert_eq!(ov["performance_summary"][k], p[k], "{k}");
    }
    let table = rows(&o[1]);
    let names: Vec<Value> = s
        .steps
        .complete_steps
        .iter()
        .map(|st| Value::from(st.name.clone()))
        .collect();
    assert_eq!(
        names,
        table
            .iter()
            .map(|r| r["stepnum"].clone())
            .collect::<Vec<_>>()
    );
    for (k, v) in o[2]["p"].as_object().unwrap() {
        assert_eq!(&ov["run_environment"][k], v, "{k}");
    }
}

#[test]
fn local_matmul_matches_xprof_and_shows_host_executed_ops() {
    let (s, oracle_dir) = local("matmul");
    let o = read_json(oracle_dir.join("overview_page.json"));
    let ov = views::overview(&s);
    for (k, v) in o[2]["p"].as_object().unwrap() {
        assert_eq!(&ov["run_environment"][k], v, "{k}");
    }
    // XProf: no steps (TraceAnnotation is not a step marker), empty op views.
    assert!(s.steps.steps.is_empty());
    assert!(ov["performance_summary"]["steptime_ms_average"].is_null());
    let pod = read_json(oracle_dir.join("pod_viewer.json"));
    assert!(
        pod["podStatsSequence"]["podStatsMap"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // Ours: the 3 ynn_fusion launches of jit_matmul(0), joined with the embedded HLO.
    let db = s.host_xla_db.as_ref().unwrap();
    let op = db.metrics.iter().find(|m| m.name == "ynn_fusion").unwrap();
    assert_eq!((op.program_id, op.occurrences), (0, 3));
    assert_ne!(op.category, "unknown");
    assert_eq!(
        s.program_names.get(&0).map(String::as_str),
        Some("jit_matmul")
    );
    // No cost numbers exist for host-executed ops: null with a reason, never 0.
    let rows = views::hlo_stats_of(&s, db);
    let r = rows
        .iter()
        .find(|r| r["hlo_op_name"] == "ynn_fusion")
        .unwrap();
    assert!(r["flops"].is_null() && r["bytes_accessed"].is_null());
    assert!(
        r["flops_reason"]
            .as_str()
            .is_some_and(|x| x.contains("host"))
    );
    assert_eq!(r["core_type"], "Host");
    // The expression is the instruction as XLA prints it, from the embedded HLO.
    assert!(
        r["hlo_op_expression"]
            .as_str()
            .unwrap()
            .starts_with("%ynn_fusion = f32["),
        "{}",
        r["hlo_op_expression"]
    );
    assert_eq!(r["total_time_ps"], op.time_ps);
}

/// Steps run by a second Python thread (two host lines named `python`), fed by a third. The
/// steps, their names, times and the complete ones are XProf's. Each step's breakdown is
/// XProf's too, except where XProf's priority tracker turns idle time after a zero-length
/// grouped event into host compute (docs/PLACEHOLDERS.md, "Where our numbers differ"): there
/// the only difference is that time, which we leave in "All others".
#[test]
fn local_threaded_steps_match_xprof_but_for_its_zero_length_event_quirk() {
    let (s, oracle_dir) = local("threaded");
    assert_eq!(s.steps.source, xprof_opstats::steps::StepsSource::HostRoots);
    let o = read_json(oracle_dir.join("overview_page.json"));
    let ov = views::overview(&s);
    let p = o[1]["p"].as_object().unwrap();
    for k in [
        "steptime_ms_average",
        "steptime_ms_standard_deviation",
        "steptime_ms_minimum",
        "steptime_ms_maximum",
    ] {
        assert_eq!(ov["performance_summary"][k], p[k], "{k}");
    }
    let (mut same, mut quirk) = (0, 0);
    for (step, us, them) in steps_beside_xprofs(&s, &oracle_dir) {
        // Components 1..9 in XProf: host compute is the 4th, "All others" the 9th.
        for i in (0..9).filter(|&i| i != 3 && i != 8) {
            assert!(close(us[i], them[i]), "step {step} component {}", i + 1);
        }
        let moved = them[3] - us[3];
        assert!(
            (moved - (us[8] - them[8])).abs() < 1e-3,
            "step {step}: only idle time moves to host compute"
        );
        if close(us[3], them[3]) {
            same += 1;
        } else {
            assert!(moved > 0.0, "step {step}: ours {} vs {}", us[3], them[3]);
            quirk += 1;
        }
    }
    assert!(same > 0 && quirk > 0, "same {same}, quirk {quirk}");
}

/// The sharded run's parameters as its generator recorded them: (steps, devices).
fn sharded_parameters() -> (u64, u64) {
    let m = read_json(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/jax-cpu/MANIFEST.json"),
    );
    let p = &m["parameters"];
    (
        p["sharded_steps"].as_u64().unwrap(),
        p["sharded_devices"].as_u64().unwrap(),
    )
}

#[test]
fn local_sharded_collectives_run_once_per_device_per_step() {
    let (s, oracle_dir) = local("sharded");
    let (steps, devices) = sharded_parameters();
    assert_eq!(s.steps.steps.len() as u64, steps);
    // XProf shows no op view for a CPU capture; ours is the host-executed ops.
    let hlo = read_json(oracle_dir.join("hlo_stats.json"));
    assert!(rows(&hlo).is_empty());
    let db = s.host_xla_db.as_ref().unwrap();
    let rows = views::hlo_stats_of(&s, db);
    // The sharded step's all-gather of the weights and all-reduce of their gradient, and the
    // shard_map psum (an all-reduce of another module): each device runs its share of every
    // op of every step on its own thread.
    let collectives: Vec<&serde_json::Map<String, Value>> = rows
        .iter()
        .filter(|r| r["category"] == "all-gather" || r["category"] == "all-reduce")
        .collect();
    let modules: std::collections::BTreeSet<String> = collectives
        .iter()
        .map(|r| r["program_id"].to_string())
        .collect();
    assert_eq!(modules.len(), 2, "{collectives:?}");
    assert!(collectives.iter().any(|r| r["category"] == "all-gather"));
    for r in rows.iter().filter(|r| r["hlo_op_name"] != "IDLE") {
        assert_eq!(
            r["occurrences"],
            Value::from(steps * devices),
            "{}",
            r["hlo_op_name"]
        );
    }
    for r in &collectives {
        assert!(r["flops"].is_null(), "{}", r["hlo_op_name"]);
        assert!(
            r["hlo_op_expression"]
                .as_str()
                .is_some_and(|e| e.contains("replica_groups")),
            "{}",
            r["hlo_op_expression"]
        );
    }
}

/// The XSpace files of the bundled fixtures and, when present, the corpus.
fn capture_files() -> Vec<PathBuf> {
    let mut files = vec![];
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/jax-cpu/logdir/plugins/profile");
    files.push(root.join("matmul/host0.xplane.pb"));
    files.push(root.join("mlp_steps/host0.xplane.pb"));
    files.push(root.join("sharded/host0.xplane.pb"));
    files.push(root.join("threaded/host0.xplane.pb"));
    if let Some(c) = corpus() {
        for f in ["seed-v6e", "jax-cpu-matmul", "jax-cpu-mlp_train"] {
            files.push(run_dir(&c, f).join("host0.xplane.pb"));
        }
    }
    files
}

/// The lazy reader and the prost decoder feed the engine the same model.
#[test]
fn reader_and_prost_adapters_agree() {
    for f in capture_files() {
        let space = xprof_opstats::load::read_xspace(&f).unwrap();
        let a = build(&xprof_opstats::adapter::host_space("h", &space, vec![]));
        let (m, _) = load_host("h", &f, &[]).unwrap();
        let b = build(&m);
        assert_eq!(a.device_db, b.device_db, "{}", f.display());
        assert_eq!(a.host_db, b.host_db, "{}", f.display());
        assert_eq!(a.host_xla_db, b.host_xla_db, "{}", f.display());
        assert_eq!(a.steps, b.steps, "{}", f.display());
        assert_eq!(a.program_names, b.program_names, "{}", f.display());
    }
}

/// Lines long enough to be converted in several runs (each filling its part of the line's
/// buffer) give the model the prost decoder gives, event by event and stat by stat.
#[test]
fn lines_converted_in_parts_match_the_prost_adapter() {
    use xprof_testkit::XSpaceBuilder;
    let b = XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(1, "python", |mut l| {
            for k in 0..120_000i64 {
                l = l.event(if k % 3 == 0 { "a" } else { "b" }, k * 10, k % 7);
                l = match k % 4 {
                    0 => l.stat("group_id", k),
                    1 => l.stat("hlo_op", format!("op{}", k % 5)).stat("_r", 1i64),
                    2 => l.stat("_p", k as u64).stat("_pt", 2u64),
                    _ => l,
                };
            }
            l
        })
        .line_with_id(2, "short", |l| l.event("c", 5, 3).stat("_c", 7u64))
        .line_with_id(3, "python2", |mut l| {
            for k in 0..90_000i64 {
                l = l.event("d", k * 20, 11).stat("step_num", k);
            }
            l
        })
    });
    let bytes = b.to_bytes();
    let framed = xprof_xspace::XSpace::from_bytes_framed(bytes.clone(), "cap", &Default::default());
    let runs = framed.unwrap().runs().len();
    assert!(runs >= 3 + 2, "{runs} runs: too few lines in several runs");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host0.xplane.pb");
    std::fs::write(&path, &bytes).unwrap();
    let want = xprof_opstats::adapter::host_space("h", &b.build(), vec![]);
    let (got, _) = load_host("h", &path, &[]).unwrap();
    let key = |e: &xprof_opstats::model::Event| {
        let stats: Vec<String> = e.stats.iter().map(|s| format!("{s:?}")).collect();
        (e.metadata, e.start_ps, e.duration_ps, stats)
    };
    assert_eq!(want.planes.len(), got.planes.len());
    for (w, g) in want.planes.iter().zip(&got.planes) {
        assert_eq!(w.lines.len(), g.lines.len());
        for (wl, gl) in w.lines.iter().zip(&g.lines) {
            assert_eq!(wl.events.len(), gl.events.len(), "line {}", wl.name);
            for (k, (we, ge)) in wl.events.iter().zip(&gl.events).enumerate() {
                assert_eq!(key(we), key(ge), "line {} event {k}", wl.name);
            }
        }
    }
}

/// The HLO modules are decoded while the events are scanned; a `/host:metadata` plane that
/// the scan then drops (a corrupt event in one of its lines) takes its modules with it, as
/// when the capture is opened whole.
#[test]
fn modules_of_a_metadata_plane_dropped_for_a_corrupt_event_are_not_used() {
    use prost::Message;
    use xprof_testkit::XSpaceBuilder;
    let hlo = xprof_proto::xla::HloProto {
        hlo_module: Some(xprof_proto::xla::HloModuleProto {
            name: "jit_step".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let bytes = XSpaceBuilder::new()
        .plane("/host:metadata", |p| {
            p.metadata_stat_value("jit_step", "Hlo Proto", hlo.clone())
                .metadata_stat_value("jit_step", "program_id", 7u64)
                .line_with_id(1, "l", |l| l.event("e", 0, 1).stat("note", "MARKER"))
        })
        .plane("/host:CPU", |p| {
            p.line_with_id(1, "t", |l| l.event("x", 0, 5))
        })
        .to_bytes();
    let dir = tempfile::tempdir().unwrap();
    let load = |bytes: &[u8]| {
        let path = dir.path().join("host0.xplane.pb");
        std::fs::write(&path, bytes).unwrap();
        let (space, warnings) = load_host("h", &path, &[]).unwrap();
        let mut ids: Vec<u64> = space.modules.keys().copied().collect();
        ids.sort();
        (ids, warnings)
    };
    assert_eq!(load(&bytes).0, vec![7]);
    // Invalid UTF-8 in a string stat: the framing holds, the event's validation fails.
    let at = bytes.windows(6).position(|w| w == b"MARKER").unwrap();
    let mut bad = bytes.clone();
    bad[at..at + 6].fill(0xff);
    let (ids, warnings) = load(&bad);
    assert_eq!(ids, Vec::<u64>::new());
    assert!(
        warnings.iter().any(|w| w.contains("/host:metadata")),
        "{warnings:?}"
    );
}

/// A model loaded with only the host threads' XLA ops gives the op-database views exactly what
/// the whole model gives them, and holds only those events of the host threads.
#[test]
fn a_model_of_the_host_xla_ops_alone_gives_the_same_op_databases() {
    use xprof_opstats::model::{HostEvents, StatKey};
    use xprof_opstats::{BuildOptions, build_with, load::load_host_with};
    let events = |m: &xprof_opstats::HostSpace| -> Vec<(String, usize)> {
        m.planes
            .iter()
            .map(|p| (p.name.clone(), p.lines.iter().map(|l| l.events.len()).sum()))
            .collect()
    };
    let mut fewer = 0;
    for f in capture_files() {
        let hlo: Vec<PathBuf> = std::fs::read_dir(f.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".hlo_proto.pb"))
            .collect();
        let what = f.display();
        let (all, _) = load_host_with("h", &f, &hlo, HostEvents::All).unwrap();
        let (lean, _) = load_host_with("h", &f, &hlo, HostEvents::XlaOps).unwrap();
        assert_eq!(lean.host_events, HostEvents::XlaOps);
        let a = build_with(&all, BuildOptions::OP_DATABASES);
        let b = build_with(&lean, BuildOptions::OP_DATABASES);
        assert_eq!(a.device_db, b.device_db, "{what}");
        assert_eq!(a.host_xla_db, b.host_xla_db, "{what}");
        assert_eq!(a.run_env, b.run_env, "{what}");
        assert_eq!(a.perf_env, b.perf_env, "{what}");
        assert_eq!(a.program_names, b.program_names, "{what}");
        assert_eq!(a.errors, b.errors, "{what}");
        assert_eq!(a.warnings, b.warnings, "{what}");
        match (views::op_db(&a), views::op_db(&b)) {
            (Some((da, ha)), Some((db, hb))) => {
                assert_eq!(ha, hb, "{what}");
                assert_eq!(
                    views::hlo_stats_of(&a, da),
                    views::hlo_stats_of(&b, db),
                    "{what}"
                );
            }
            (None, None) => {}
            _ => panic!("{what}: one model has an op database, the other not"),
        }
        // Device planes whole; of the host threads, only the events with an `hlo_op`.
        let host = xprof_opstats::host::HOST_THREADS;
        for ((name, n_all), (_, n_lean)) in events(&all).into_iter().zip(events(&lean)) {
            if name != host {
                assert_eq!(n_all, n_lean, "{what}: {name}");
            }
        }
        let kept = |m: &xprof_opstats::HostSpace| -> Vec<usize> {
            m.plane(host)
                .map(|p| {
                    p.lines
                        .iter()
                        .flat_map(|l| &l.events)
                        .filter(|e| e.stats.has(StatKey::HloOp))
                        .map(|e| e.start_ps as usize)
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(kept(&all), kept(&lean), "{what}");
        let lean_host: usize = events(&lean)
            .iter()
            .filter(|(n, _)| n == host)
            .map(|(_, k)| k)
            .sum();
        assert_eq!(lean_host, kept(&lean).len(), "{what}: only hlo_op events");
        let all_host: usize = events(&all)
            .iter()
            .filter(|(n, _)| n == host)
            .map(|(_, k)| k)
            .sum();
        fewer += usize::from(lean_host < all_host);
    }
    // The bundled CPU captures have Python and runtime events on their host threads.
    assert!(fewer >= 4, "{fewer}");
}
