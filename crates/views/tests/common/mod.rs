//! Shared test helpers: corpus location, run loading, XProf DataTable comparison.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use xprof_views::LoadedRun;
use xprof_views::table::Table;

mod compare;
pub use compare::*;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `$XPROF_CORPUS`, else `<workspace root>/../shared`; under `CI` a missing corpus fails.
pub fn corpus() -> Option<PathBuf> {
    // The one definition of where the corpus is and that CI never skips.
    xprof_plugin_api::sdk::testing::corpus(env!("CARGO_MANIFEST_DIR"))
}

/// (fixture name, run dir, oracle dir) of every capture with XProf reference outputs.
pub fn oracle_fixtures() -> Vec<(String, PathBuf, PathBuf)> {
    let mut v = Vec::new();
    if let Some(c) = corpus() {
        let o = c.join("oracle/xprof-2.24.2");
        v.push((
            "seed-v6e".into(),
            c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun"),
            o.join("seed-v6e"),
        ));
        for run in ["matmul", "mlp_train"] {
            v.push((
                format!("jax-cpu-{run}"),
                c.join(format!("fixtures/jax-cpu/logdir/plugins/profile/{run}")),
                o.join(format!("jax-cpu-{run}")),
            ));
        }
    }
    // Captures of the user's own, each `<dir>/<name>/{run,oracle}`: `run` holds the capture's
    // files, `oracle` what `../shared/tools/oracle/runner.py` wrote for them.
    if let Some(extra) = std::env::var_os("XPROF_PARITY_DIR") {
        let mut names: Vec<_> = std::fs::read_dir(&extra)
            .expect("XPROF_PARITY_DIR")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("run").is_dir() && p.join("oracle").is_dir())
            .collect();
        names.sort();
        for p in names {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            v.push((name, p.join("run"), p.join("oracle")));
        }
    }
    // The synthetic runs (a two-host TPU pod, a two-GPU host), written once per test process.
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    v.push((
        "synthetic-pod".into(),
        synthetic_pod_run().to_path_buf(),
        data.join("synthetic-pod"),
    ));
    v.push((
        "synthetic-gpu".into(),
        synthetic_gpu_run().to_path_buf(),
        data.join("synthetic-gpu"),
    ));
    // Two of our CPU captures side by side as the hosts of one run.
    v.push((
        "two-cpu-hosts".into(),
        two_cpu_hosts_run().to_path_buf(),
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/two-cpu-hosts"),
    ));
    let w = workspace_root().join("fixtures");
    for run in ["matmul", "mlp_steps", "sharded", "threaded", "two_process"] {
        v.push((
            format!("own-{run}"),
            w.join(format!("jax-cpu/logdir/plugins/profile/{run}")),
            w.join(format!("oracle/{run}/converters")),
        ));
    }
    // Real TensorFlow captures (`fixtures/gen_tf_fixtures.py`).
    for run in ["tf_train_loop", "tf_while_loop"] {
        v.push((
            format!("own-{run}"),
            w.join(format!("tf-cpu/logdir/plugins/profile/{run}")),
            w.join(format!("oracle/{run}/converters")),
        ));
    }
    // A real PyTorch/XLA capture (`fixtures/gen_ptxla_fixtures.py`).
    v.push((
        "own-ptxla_train".into(),
        w.join("ptxla-cpu/logdir/plugins/profile/ptxla_train"),
        w.join("oracle/ptxla_train/converters"),
    ));
    v
}

/// (name, run dir, XProf's converter views, XProf's agent CLI answers) of the real GPU
/// captures recorded by other teams (`../shared/fixtures/gpu-real`).
pub fn gpu_real_fixtures() -> Vec<(String, PathBuf, PathBuf, PathBuf)> {
    let Some(c) = corpus() else {
        return Vec::new();
    };
    let root = c.join("fixtures/gpu-real");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            (
                format!("gpu-real-{n}"),
                root.join(&n).join("plugins/profile/run1"),
                c.join(format!("oracle/xprof-2.24.2/gpu-real-{n}")),
                c.join(format!("oracle/official-cli-2.24.2/gpu-real-{n}")),
            )
        })
        .collect()
}

/// A synthetic run written under this test target's temporary directory, once per process.
fn synthetic_run(
    cell: &'static std::sync::OnceLock<PathBuf>,
    name: &str,
    write: fn(&Path, &str) -> std::io::Result<PathBuf>,
) -> &'static Path {
    cell.get_or_init(|| {
        let logdir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{name}-{}", std::process::id()));
        write(&logdir, "run").expect("write a synthetic run")
    })
}

/// `xprof_testkit::pod`'s run.
pub fn synthetic_pod_run() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    synthetic_run(&DIR, "synthetic-pod", xprof_testkit::pod::write_pod_run)
}

/// `xprof_testkit::gpu`'s run.
pub fn synthetic_gpu_run() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    synthetic_run(&DIR, "synthetic-gpu", xprof_testkit::gpu::write_gpu_run)
}

/// A run of two hosts made of our `mlp_steps` (host0) and `sharded` (host1) captures: one
/// machine's name twice, 5 and 3 steps recorded at unrelated times.
pub fn two_cpu_hosts_run() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("two-cpu-hosts-{}", std::process::id()))
            .join("run");
        std::fs::create_dir_all(&dir).expect("create the two-host run");
        let profiles = workspace_root().join("fixtures/jax-cpu/logdir/plugins/profile");
        for (run, host) in [("mlp_steps", "host0"), ("sharded", "host1")] {
            std::fs::copy(
                profiles.join(run).join("host0.xplane.pb"),
                dir.join(format!("{host}.xplane.pb")),
            )
            .expect("copy a fixture capture");
        }
        dir
    })
}

pub fn host_files(run: &Path) -> (Vec<(String, PathBuf)>, Vec<PathBuf>) {
    let mut hosts = Vec::new();
    let mut hlo = Vec::new();
    for e in std::fs::read_dir(run).expect("run dir").flatten() {
        let p = e.path();
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = n.strip_suffix(".xplane.pb") {
            hosts.push((stem.to_string(), p.clone()));
        } else if n.ends_with(".hlo_proto.pb") {
            hlo.push(p.clone());
        }
    }
    hosts.sort();
    hlo.sort();
    (hosts, hlo)
}

pub fn load(run: &Path) -> LoadedRun {
    let (hosts, hlo) = host_files(run);
    xprof_views::load::load_hosts(&hosts, &hlo).expect("load")
}

/// XProf's output for `view`, `None` when this fixture's oracle does not include it.
pub fn oracle_opt(dir: &Path, view: &str) -> Option<Value> {
    dir.join(format!("{view}.json"))
        .exists()
        .then(|| oracle(dir, view))
}

pub fn oracle(dir: &Path, view: &str) -> Value {
    let p = dir.join(format!("{view}.json"));
    serde_json::from_str(
        &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .expect("oracle json")
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-300) || (a - b).abs() < 1e-9
}

/// Compare one value of ours with XProf's: numbers to relative 1e-6, else equal. A `null`
/// of ours stands for an XProf placeholder 0 when the record explains it (`<key>_reason`).
pub fn same(ours: &Value, theirs: &Value) -> bool {
    match (ours, theirs) {
        (Value::Number(a), Value::Number(b)) => close(a.as_f64().unwrap(), b.as_f64().unwrap()),
        (a, b) => a == b,
    }
}

/// Check a table against XProf's DataTable JSON (`{cols, rows: [{c: [{v}]}], p}`).
pub fn assert_table(ctx: &str, ours: &Table, theirs: &Value) {
    assert_table_except(ctx, ours, theirs, &Except::default());
}

/// What [`assert_table_except`] leaves out: cells (row, column) and properties.
#[derive(Default)]
pub struct Except {
    pub cells: std::collections::HashSet<(usize, String)>,
    pub properties: Vec<&'static str>,
}

/// XProf's zero-length-event quirk (docs/PLACEHOLDERS.md, "Where our numbers differ"): in a
/// CPU step, idle time after a grouped zero-length event becomes XProf's host compute, where
/// we leave it in "All others". True when XProf's host compute exceeds ours by what our "All
/// others" exceeds XProf's (within `tol`, the rounding of the printed values), and nothing
/// else moved.
pub fn zero_length_quirk(ours: (f64, f64), theirs: (f64, f64), tol: f64) -> bool {
    let moved = theirs.0 - ours.0;
    moved > tol && (moved - (ours.1 - theirs.1)).abs() <= tol
}

/// The rows of input pipeline's step table (its table 1) that [`zero_length_quirk`] explains,
/// and what they change: their host compute, "All others" and tooltip cells, and the
/// properties derived from those columns.
pub fn input_pipeline_quirk(ours: &Table, theirs: &Value) -> Except {
    let cols: Vec<&str> = theirs["cols"]
        .as_array()
        .map(|a| a.iter().map(|c| c["id"].as_str().unwrap()).collect())
        .unwrap_or_default();
    let (Some(hc), Some(other)) = (
        cols.iter().position(|c| *c == "hostComputeTimeMs"),
        cols.iter().position(|c| *c == "otherTimeMs"),
    ) else {
        return Except::default();
    };
    let mut except = Except::default();
    let rows = theirs["rows"].as_array().cloned().unwrap_or_default();
    for (i, (r, row)) in ours.records.iter().zip(&rows).enumerate() {
        let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        let o = (num(&r["hostComputeTimeMs"]), num(&r["otherTimeMs"]));
        let t = (num(&row["c"][hc]["v"]), num(&row["c"][other]["v"]));
        if zero_length_quirk(o, t, 2e-6) {
            for c in ["hostComputeTimeMs", "otherTimeMs", "tooltip"] {
                except.cells.insert((i, c.to_string()));
            }
        }
    }
    if !except.cells.is_empty() {
        except.properties = vec![
            "host_compute_time_ms_avg",
            "host_compute_time_ms_sdv",
            "other_time_ms_avg",
            "other_time_ms_sdv",
            // The share of "All others" in the step time, quoted in the conclusion, and the
            // next step the conclusion leads to.
            "input_conclusion",
            "summary_nextstep",
        ];
    }
    except
}

/// [`assert_table`] without the cells and properties `except` names.
pub fn assert_table_except(ctx: &str, ours: &Table, theirs: &Value, except: &Except) {
    let cols: Vec<&str> = theirs["cols"]
        .as_array()
        .map(|a| a.iter().map(|c| c["id"].as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(ours.columns, cols, "{ctx}: columns");
    let rows = theirs["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(ours.records.len(), rows.len(), "{ctx}: row count");
    for (i, (r, row)) in ours.records.iter().zip(&rows).enumerate() {
        for (j, col) in cols.iter().enumerate() {
            if except.cells.contains(&(i, col.to_string())) {
                continue;
            }
            let theirs = &row["c"][j]["v"];
            let mine = r.get(*col).unwrap_or(&Value::Null);
            if mine.is_null() && r.contains_key(&format!("{col}_reason")) {
                assert!(
                    theirs.as_f64() == Some(0.0) || theirs.is_null(),
                    "{ctx}: row {i} {col}: placeholder where XProf prints {theirs}"
                );
                continue;
            }
            assert!(
                same(mine, theirs),
                "{ctx}: row {i} {col}: ours {mine} vs XProf {theirs}"
            );
        }
    }
    if let Some(p) = theirs["p"].as_object() {
        for (k, v) in p {
            if except.properties.contains(&k.as_str()) {
                continue;
            }
            let mine = ours.properties.get(k).unwrap_or(&Value::Null);
            assert!(
                same(mine, v),
                "{ctx}: property {k}: ours {mine} vs XProf {v}"
            );
        }
    }
}

/// Same columns, rows, row keys and text cells; numbers only where XProf's is 0 (a zero
/// component must stay zero) — for captures whose timings differ from the oracle's.
pub fn assert_table_structure(ctx: &str, ours: &Table, theirs: &Value) {
    let cols: Vec<&str> = theirs["cols"]
        .as_array()
        .map(|a| a.iter().map(|c| c["id"].as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(ours.columns, cols, "{ctx}: columns");
    let rows = theirs["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(ours.records.len(), rows.len(), "{ctx}: row count");
    for (i, (r, row)) in ours.records.iter().zip(&rows).enumerate() {
        for (j, col) in cols.iter().enumerate() {
            let theirs = &row["c"][j]["v"];
            let mine = r.get(*col).unwrap_or(&Value::Null);
            if col.contains("ooltip") {
                continue;
            }
            match theirs {
                Value::Number(n) if n.as_f64() == Some(0.0) => {
                    assert!(
                        same(mine, theirs),
                        "{ctx}: row {i} {col}: ours {mine}, XProf 0"
                    )
                }
                Value::Number(_) => assert!(mine.is_number(), "{ctx}: row {i} {col}"),
                _ => assert_eq!(mine, theirs, "{ctx}: row {i} {col}"),
            }
        }
    }
    if let Some(p) = theirs["p"].as_object() {
        let keys: Vec<&String> = p.keys().collect();
        let mut mine: Vec<&String> = ours.properties.keys().collect();
        mine.retain(|k| p.contains_key(*k));
        assert_eq!(mine.len(), keys.len(), "{ctx}: property keys");
    }
}
