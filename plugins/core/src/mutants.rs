//! Every capture tool on captures that are well-formed protobuf but say odd things: real
//! captures with events, stats and metadata changed at random (negative and huge durations and
//! offsets, missing metadata, a stat of another type than usual, a line's clock far away, ...).
//! The reader validates the wire format only, so such captures reach the engine; a tool may
//! answer or report a usage/value error, but never panic (an internal error).

use std::path::PathBuf;

use serde_json::{Value, json};
use xprof_plugin_api::sdk::testing;
use xprof_proto::prost::Message;
use xprof_proto::xplane::{XSpace, XStat, x_event, x_stat};
use xprof_testkit::damage::Lcg;

const KRATE: &str = env!("CARGO_CRATE_NAME");

/// One random change to the space.
fn mutate(space: &mut XSpace, r: &mut Lcg) {
    let np = space.planes.len();
    let plane = &mut space.planes[r.below(np)];
    let kind = r.below(10);
    if kind == 9 {
        // A plane's metadata entry dropped (events keep pointing at it).
        let keys: Vec<i64> = plane.event_metadata.keys().copied().collect();
        if !keys.is_empty() {
            plane.event_metadata.remove(&keys[r.below(keys.len())]);
        }
        return;
    }
    let nl = plane.lines.len();
    if nl == 0 {
        return;
    }
    let stat_ids: Vec<i64> = plane.stat_metadata.keys().copied().collect();
    let line = &mut plane.lines[r.below(nl)];
    if kind == 8 {
        line.timestamp_ns = r.odd_i64();
        return;
    }
    let ne = line.events.len();
    if ne == 0 {
        return;
    }
    let e = &mut line.events[r.below(ne)];
    match kind {
        0 | 1 => e.duration_ps = r.odd_i64(),
        2 => e.data = Some(x_event::Data::OffsetPs(r.odd_i64())),
        3 => e.data = Some(x_event::Data::NumOccurrences(r.odd_i64())),
        4 => e.metadata_id = r.odd_i64(),
        5 => {
            // A stat's value swapped for another type.
            if !e.stats.is_empty() {
                let k = r.below(e.stats.len());
                e.stats[k].value = Some(match r.below(5) {
                    0 => x_stat::Value::StrValue("not a number".into()),
                    1 => x_stat::Value::DoubleValue(f64::NAN),
                    2 => x_stat::Value::Uint64Value(u64::MAX),
                    3 => x_stat::Value::RefValue(r.draw()),
                    _ => x_stat::Value::BytesValue(vec![0xff, 0, 1]),
                });
            }
        }
        6 => {
            // A stat of the plane's kinds added with an odd value.
            if !stat_ids.is_empty() {
                e.stats.push(XStat {
                    metadata_id: stat_ids[r.below(stat_ids.len())],
                    value: Some(x_stat::Value::Int64Value(r.odd_i64())),
                });
            }
        }
        _ => {
            // Events of the line in reverse order.
            line.events.reverse();
        }
    }
}

fn fixture(rel: &str) -> PathBuf {
    testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The captures to mutate: the project's own (JAX, TensorFlow and PyTorch/XLA on CPU), the synthetic TPU
/// pod host and GPU host, and the shared corpus's real TPU capture when it is there.
fn originals() -> Vec<(String, XSpace)> {
    let mut v = Vec::new();
    for rel in [
        "fixtures/jax-cpu/logdir/plugins/profile/mlp_steps/host0.xplane.pb",
        "fixtures/jax-cpu/logdir/plugins/profile/sharded/host0.xplane.pb",
        "fixtures/tf-cpu/logdir/plugins/profile/tf_train_loop/host0.xplane.pb",
        "fixtures/ptxla-cpu/logdir/plugins/profile/ptxla_train/host0.xplane.pb",
    ] {
        let bytes = std::fs::read(fixture(rel)).unwrap();
        v.push((rel.to_string(), XSpace::decode(bytes.as_slice()).unwrap()));
    }
    v.push((
        "pod host".into(),
        xprof_testkit::pod::pod_host(0, &[5, 6, 7]).build(),
    ));
    v.push(("gpu host".into(), xprof_testkit::gpu::gpu_host().build()));
    if let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) {
        let seed = c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun/host0.xplane.pb");
        let bytes = std::fs::read(seed).unwrap();
        v.push(("seed-v6e".into(), XSpace::decode(bytes.as_slice()).unwrap()));
    }
    v
}

/// The capture tools, each called with the run directory `run`.
fn capture_tool_calls(run: &std::path::Path, label: &str) -> Vec<(String, &'static str, Value)> {
    xprof_plugin_api::sdk::tools(KRATE)
        .iter()
        .map(|t| t.name())
        .filter(|n| !matches!(*n, "list_runs" | "get_xspace_proto"))
        .map(|tool| {
            let args = json!({"path": run.display().to_string()});
            (label.to_string(), tool, args)
        })
        .collect()
}

#[test]
fn no_tool_panics_on_semantically_odd_captures() {
    const MUTANTS: u64 = 16;
    let dir = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    for (ci, (name, original)) in originals().iter().enumerate() {
        for m in 0..MUTANTS {
            let mut r = Lcg(0x9e37_79b9 ^ (ci as u64) << 32 ^ m);
            let mut space = original.clone();
            // From one change to hundreds.
            for _ in 0..(1 + m * m * 3) {
                mutate(&mut space, &mut r);
            }
            let run = dir.path().join(format!("c{ci}m{m}"));
            std::fs::create_dir_all(&run).unwrap();
            std::fs::write(run.join("host0.xplane.pb"), space.encode_to_vec()).unwrap();
            calls.extend(capture_tool_calls(&run, &format!("{name} mutant {m}")));
        }
    }
    assert!(calls.len() > 20 * MUTANTS as usize);
    testing::robustness_calls(KRATE, calls).assert_clean();
}

/// The corpus's TPU capture beside a damaged copy of its module's `*.hlo_proto.pb` (the op
/// views, the memory viewer and the cost model read it).
#[test]
fn no_tool_panics_on_a_capture_with_a_damaged_module() {
    use xprof_testkit::damage::damage_hlo;
    const MUTANTS: u64 = 16;
    let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    let src = c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun");
    let xplane = std::fs::read(src.join("host0.xplane.pb")).unwrap();
    let (file, original) = std::fs::read_dir(&src)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".hlo_proto.pb"))
        .map(|e| {
            let bytes = std::fs::read(e.path()).unwrap();
            (
                e.file_name(),
                xprof_proto::decode_hlo_proto(&bytes).unwrap(),
            )
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    for m in 0..MUTANTS {
        let mut r = Lcg(0xbad_0000 ^ m);
        let mut hlo = original.clone();
        for _ in 0..(1 + m * m) {
            damage_hlo(&mut hlo, &mut r);
        }
        let run = dir.path().join(format!("m{m}"));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("host0.xplane.pb"), &xplane).unwrap();
        std::fs::write(run.join(&file), hlo.encode_to_vec()).unwrap();
        calls.extend(capture_tool_calls(&run, &format!("mutant {m}")));
    }
    testing::robustness_calls(KRATE, calls).assert_clean();
}
