//! Async-op overlap (`xprof_views::overlap`): XProf's agent CLI output on a synthetic TPU run
//! with every kind of window, field by field; and our GPU windows, computed by hand.

use std::path::Path;

use serde_json::{Value, json};
use xprof_testkit::XSpaceBuilder;
use xprof_views::load::{XSpace, read_raw};
use xprof_views::overlap::{Thresholds, analyze};

/// `xprof_testkit::async_ops`'s run, decoded from the builder's bytes (what the run file
/// holds).
fn async_run() -> Vec<(String, XSpace)> {
    let b = xprof_testkit::async_ops::async_host();
    vec![("host0".into(), XSpace::from_bytes(b.to_bytes()).unwrap())]
}

/// XProf 2.24.2's `xprof analyze_async_overlap` on `xprof_testkit::async_ops`'s run (kept in
/// `tests/data/synthetic-async/`). By hand, chip 0 (start/done pairs, coverage = the ops that
/// are neither, merged [0,250) ∪ [330,630)):
/// all-gather [100,310) 140 of 210 covered (partial, exposed 70); copy [310,320) 0 of 10
/// (exposed); all-reduce [320,640) 300 of 320 = 0.9375 (hidden, exposed 20); send.4 never
/// done and recv-done.5 never started: 2 unpaired. Chip 1 (`Async XLA Ops`): all-to-all
/// [1050,1250) covered 50 by fusion.9 [1000,1100) → 0.25, exposed 150. Overall 1 − 250/740.
/// Concurrency on chip 0: XLA Ops busy [0,250) ∪ [300,660) = 610, SparseCore [50,150) ∪
/// [600,700) = 200, together 100 + 60 = 160 = 0.8 of the SparseCore's.
#[test]
fn async_windows_equal_xprofs_agent_cli() {
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/synthetic-async/analyze_async_overlap.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let got = Value::Object(analyze(&async_run(), Thresholds::default(), 20));
    assert_eq!(got["status"], want["status"]);
    for k in ["by_op", "concurrency", "thresholds"] {
        assert_eq!(got[k], want[k], "{k}");
    }
    // XProf's fields equal; ours add `exposed_union_ps` (and its note) beside them.
    assert_eq!(
        without(&got["summary"], &["exposed_union_ps", "exposed_union_note"]),
        want["summary"]
    );
    assert_eq!(
        got["summary"]["exposed_union_ps"], 250,
        "no windows overlap here"
    );
    let planes = got["by_plane"].as_object().unwrap();
    let want_planes = want["by_plane"].as_object().unwrap();
    assert_eq!(planes.len(), want_planes.len());
    for (name, p) in planes {
        assert_eq!(
            without(p, &["exposed_union_ps"]),
            want_planes[name],
            "{name}"
        );
    }
    // Same order of op families (most exposed first).
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&got["by_op"]), keys(&want["by_op"]));
    // The rows, in order, with XProf's fields (ours add the host).
    let (g, w) = (
        got["top_exposed"].as_array().unwrap(),
        want["top_exposed"].as_array().unwrap(),
    );
    assert_eq!(g.len(), w.len());
    for (g, w) in g.iter().zip(w) {
        for (k, v) in w.as_object().unwrap() {
            assert_eq!(&g[k], v, "{k} of {w}");
        }
        assert_eq!(g["host"], "host0");
    }
    assert_eq!(w.len(), 4);
}

#[test]
fn thresholds_move_the_classes_and_top_k_cuts_the_rows() {
    // all-reduce's 0.9375 is partial when hidden needs 0.95; all-gather's 2/3 is exposed
    // at or below 0.7.
    let th = Thresholds::new(0.95, 0.7).unwrap();
    let got = Value::Object(analyze(&async_run(), th, 1));
    assert_eq!(got["by_op"]["all-reduce"]["partial"], json!(1));
    assert_eq!(got["by_op"]["all-gather"]["exposed"], json!(1));
    assert_eq!(got["summary"]["hidden"], json!(0));
    assert_eq!(got["top_exposed"].as_array().unwrap().len(), 1);
}

/// `xprof_testkit::gpu`'s run: on each GPU the NCCL all-reduce runs on the compute stream
/// between the other kernels, so nothing covers it: 3 windows per GPU, all exposed, of 2.0,
/// 2.2 and 2.4 µs.
#[test]
fn gpu_collectives_in_line_with_compute_are_exposed() {
    let logdir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("synthetic-gpu-overlap-{}", std::process::id()));
    let run = xprof_testkit::gpu::write_gpu_run(&logdir, "run").unwrap();
    let raw = vec![(
        "gpuhost".to_string(),
        read_raw(&run.join("gpuhost.xplane.pb"), |_| true).unwrap(),
    )];
    let got = Value::Object(analyze(&raw, Thresholds::default(), 20));
    assert_eq!(got["status"], "OK");
    assert_eq!(got["gpu_planes"], json!(2));
    let s = &got["summary"];
    assert_eq!(
        (s["count"].clone(), s["exposed"].clone()),
        (json!(6), json!(6))
    );
    assert_eq!(s["span_ps"], json!(2 * 6_600_000));
    assert_eq!(s["exposed_ps"], s["span_ps"]);
    assert_eq!(s["overlap_ratio"], json!(0.0));
    assert_eq!(got["by_op"]["all-reduce"]["count"], json!(6));
    for p in ["/device:GPU:0", "/device:GPU:1"] {
        assert_eq!(
            got["by_plane"][p]["window_source"],
            "gpu_collective_kernels"
        );
        assert_eq!(got["by_plane"][p]["count"], json!(3));
    }
}

/// A collective on its own stream, overlapping a GEMM on another for 300 of its 400 ps
/// (a memcpy on a third stream does not count): partial, ratio 0.75. A GPU with kernels but
/// no collective has a timeline and no window.
#[test]
fn gpu_collectives_on_their_own_stream_are_covered_by_other_streams() {
    let b = XSpaceBuilder::new()
        .plane("/device:GPU:0", |p| {
            p.line("Stream #1(Compute)", |l| {
                l.event("sm90_gemm_bf16", 100, 500)
            })
            .line("Stream #2(Comm)", |l| {
                l.event("ncclDevKernel_AllGather_RING_LL", 300, 400)
            })
            .line("Stream #3(Memcpy)", |l| l.event("MemcpyDToD", 600, 100))
        })
        .plane("/device:GPU:1", |p| {
            p.line("Stream #1(Compute)", |l| l.event("sm90_gemm_bf16", 0, 10))
        });
    let raw = vec![("h".to_string(), XSpace::from_bytes(b.to_bytes()).unwrap())];
    let got = Value::Object(analyze(&raw, Thresholds::default(), 20));
    assert_eq!(got["status"], "OK");
    let row = &got["top_exposed"][0];
    assert_eq!(row["op"], "all-gather");
    assert_eq!(row["overlap_ratio"], json!(0.75));
    assert_eq!(row["exposed_ps"], json!(100));
    assert_eq!(row["class"], "partial");
    assert!(got["by_plane"].get("/device:GPU:1").is_none());
}

#[test]
fn a_capture_without_device_lines_has_no_timeline() {
    let b = XSpaceBuilder::new().plane("/host:CPU", |p| p.line("main", |l| l.event("f", 0, 10)));
    let raw = vec![("h".to_string(), XSpace::from_bytes(b.to_bytes()).unwrap())];
    let got = Value::Object(analyze(&raw, Thresholds::default(), 20));
    assert_eq!(got["status"], "NO_DEVICE_TIMELINE_EVENTS");
    assert_eq!(got["summary"]["overlap_ratio"], Value::Null);
    assert_eq!(
        got["summary"]["overlap_ratio_reason"],
        "no device timeline events"
    );
}

/// `v` without our own `keys` (fields XProf does not print).
fn without(v: &Value, keys: &[&str]) -> Value {
    let mut m = v.as_object().unwrap().clone();
    for k in keys {
        m.shift_remove(*k);
    }
    Value::Object(m)
}
