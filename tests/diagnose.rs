//! Issue 33 item 2: `diagnose` answers in under 4 KB on every corpus capture, its verdicts are
//! the expected ones, and its numbers are the other tools' numbers.

use std::path::{Path, PathBuf};

use serde_json::Value;
use xprof_tests::{Run, Sandbox};

fn run(sb: &Sandbox, args: &[&str], path: &Path) -> Value {
    let r: Run = sb
        .cmd()
        .arg("--no_cache")
        .args(args)
        .arg(path)
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{args:?} {}: {}", path.display(), r.stderr);
    assert!(
        r.stdout.len() <= 4096 || args[0] != "diagnose",
        "diagnose {}: {} bytes",
        path.display(),
        r.stdout.len()
    );
    r.json()
}

fn captures(corpus: &Path) -> Vec<PathBuf> {
    let f = corpus.join("fixtures");
    let mut v = vec![f.join("seed-v6e/logdir")];
    for g in [
        "mi300-jax-conv-legacy",
        "mi300-jax08-elementwise",
        "mi300-jax08-gemm",
    ] {
        v.push(f.join("gpu-real").join(g));
    }
    v.push(f.join("gpu-real/tf-gpu-multiworker-demo"));
    for set in [
        f.join("jax-cpu/logdir"),
        xprof_tests::fixtures().join("jax-cpu/logdir"),
    ] {
        for e in std::fs::read_dir(set.join("plugins/profile"))
            .unwrap()
            .flatten()
        {
            v.push(e.path());
        }
    }
    for set in ["ptxla-cpu", "tf-cpu"] {
        let d = xprof_tests::fixtures()
            .join(set)
            .join("logdir/plugins/profile");
        v.extend(std::fs::read_dir(d).unwrap().flatten().map(|e| e.path()));
    }
    v
}

fn pct(v: &Value) -> Option<f64> {
    v.as_str()
        .and_then(|s| s.trim_end_matches('%').parse().ok())
}

#[test]
fn diagnose_fits_4_kb_everywhere_and_its_numbers_are_the_other_tools_numbers() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    for cap in captures(&corpus) {
        let d = run(&sb, &["diagnose"], &cap);
        let name = cap.display();
        let overview = run(&sb, &["get_overview", "--full"], &cap);
        let ps = &overview["performance_summary"];
        let idle = pct(&ps["device_idle_time_percent"])
            .or_else(|| pct(&ps["device_idle_time_percent_measured"]));
        if let Some(p) = d["numbers"]["device_idle_percent"].as_f64() {
            let want = idle.unwrap_or_else(|| panic!("{name}: idle without the overview's"));
            assert!((p - want).abs() < 0.01, "{name}: {p} vs {want}");
        }
        let top = run(&sb, &["get_top_hlo_ops", "--limit", "3"], &cap);
        let theirs = top["top_by_time"].as_array().cloned().unwrap_or_default();
        let ours = d["numbers"]["top_ops"].as_array().unwrap();
        assert_eq!(ours.len(), theirs.len(), "{name}");
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(a["name"], b["name"], "{name}");
            let (x, y) = (
                a["self_time_percent"].as_f64().unwrap(),
                b["self_time_percent"].as_f64().unwrap(),
            );
            assert!((x - y).abs() < 0.01, "{name}: {} {x} vs {y}", a["name"]);
        }
        // Changes: at most three, the largest saving first, each with a next call of a tool.
        let changes = d["changes"].as_array().unwrap();
        assert!(changes.len() <= 3, "{name}");
        let saves: Vec<f64> = changes
            .iter()
            .filter_map(|c| c["can_save_ms_at_most"].as_f64())
            .collect();
        assert!(saves.windows(2).all(|w| w[0] >= w[1]), "{name}: {saves:?}");
        for c in changes {
            assert!(c["next"].as_str().unwrap().starts_with("xprof "), "{c}");
        }
        // A verdict names what came first, or says what the capture lacks.
        match d["verdict"]["bottleneck"].as_str() {
            Some(_) => assert!(!changes.is_empty(), "{name}"),
            None => assert!(changes.is_empty(), "{name}"),
        }
    }
}

#[test]
fn diagnose_verdicts_on_the_corpus() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let f = corpus.join("fixtures");
    let verdict = |p: PathBuf| run(&sb, &["diagnose"], &p)["verdict"].clone();
    // TPU v6e: 62.6 % idle, then the Pallas matmul (37.4 % of device time).
    let tpu = run(&sb, &["diagnose"], &f.join("seed-v6e/logdir"));
    assert_eq!(tpu["verdict"]["bottleneck"], "device idle", "{tpu}");
    assert!(
        tpu["changes"][1]["change"]
            .as_str()
            .unwrap()
            .contains("custom call")
    );
    // AMD GEMMs: idle first; the hipBLASLt custom call next.
    let gemm = verdict(f.join("gpu-real/mi300-jax08-gemm"));
    assert_eq!(gemm["bottleneck"], "device idle", "{gemm}");
    // A CPU training loop spends most of its step outside XLA ops.
    let mlp = verdict(f.join("jax-cpu/logdir/plugins/profile/mlp_train"));
    assert_eq!(mlp["bottleneck"], "outside XLA", "{mlp}");
    // A PyTorch/XLA loop that recompiles every step.
    let recompile =
        verdict(xprof_tests::fixtures().join("ptxla-cpu/logdir/plugins/profile/ptxla_recompile"));
    assert_eq!(recompile["bottleneck"], "RecompilationRule", "{recompile}");
    // A TF GPU capture without XLA ops: the idle share is not trusted, and it says why.
    let tf = run(
        &sb,
        &["diagnose"],
        &f.join("gpu-real/tf-gpu-multiworker-demo"),
    );
    assert!(tf["verdict"]["bottleneck"].is_null(), "{tf}");
    assert!(!tf["not_in_capture"].as_array().unwrap().is_empty(), "{tf}");
}
