//! The HLO dump tools on damaged dumps (the project's own XLA text dump, and the corpus's TPU
//! one when it is there; see `xprof_testkit::damage`). A tool may answer or report a
//! usage/value/path error, but never panic (an internal error).

use std::path::PathBuf;

use serde_json::{Value, json};
use xprof_plugin_api::sdk::{ErrorKind, invoke_json, testing};
use xprof_testkit::damage::{Lcg, damaged_copy};

const KRATE: &str = env!("CARGO_CRATE_NAME");

#[test]
fn no_hlo_dump_tool_panics_on_damaged_dumps() {
    const MUTANTS: u64 = 12;
    let mut dumps: Vec<(&str, PathBuf)> = vec![(
        "jax-cpu",
        testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures/jax-cpu/hlo_dump"),
    )];
    if let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) {
        dumps.push(("seed-v6e", c.join("fixtures/seed-v6e/hlo_dump")));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    for (name, original) in &dumps {
        for m in 0..MUTANTS {
            let mut r = Lcg(0xd0e5 ^ m << 24 ^ name.len() as u64);
            let root = dir.path().join(format!("{name}-{m}"));
            damaged_copy(&[("dump", original)], &root, 1 + m * m, &mut r);
            let d = root.join("dump").display().to_string();
            let cases: Vec<(&str, Value)> = vec![
                ("list_hlo_dump_modules", json!({"dump_dir": d})),
                (
                    "get_hlo_dump",
                    json!({"dump_dir": d, "module_pattern": "."}),
                ),
                (
                    "get_hlo_dump",
                    json!({"dump_dir": d, "module_pattern": ".", "stage": "before_optimizations"}),
                ),
                (
                    "diff_hlo_stages",
                    json!({"dump_dir": d, "module_pattern": "."}),
                ),
                (
                    "get_hlo_dump_neighborhood",
                    json!({"dump_dir": d, "module_pattern": ".", "instruction_name": "dot.1"}),
                ),
            ];
            let label = format!("{name} mutant {m}");
            calls.extend(cases.into_iter().map(|(t, a)| (label.clone(), t, a)));
        }
    }
    testing::robustness_calls(KRATE, calls).assert_clean();
}

/// Runs holding an empty capture and one damaged `*.hlo_proto.pb`: from the synthetic TPU pod
/// and GPU modules, and the corpus's TPU module (with its buffer assignment) when it is there.
#[test]
fn no_hlo_tool_panics_on_damaged_modules() {
    use xprof_proto::prost::Message;
    use xprof_testkit::damage::damage_hlo;
    const MUTANTS: u64 = 16;
    let mut originals = vec![
        ("pod", xprof_testkit::pod::pod_hlo()),
        ("gpu", xprof_testkit::gpu::gpu_hlo()),
    ];
    if let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) {
        let run = c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun");
        for e in std::fs::read_dir(run).unwrap().flatten() {
            if e.file_name().to_string_lossy().ends_with(".hlo_proto.pb") {
                let bytes = std::fs::read(e.path()).unwrap();
                originals.push(("seed-v6e", xprof_proto::decode_hlo_proto(&bytes).unwrap()));
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    for (ci, (name, original)) in originals.iter().enumerate() {
        let module = original
            .hlo_module
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap();
        let instruction = original
            .hlo_module
            .as_ref()
            .and_then(|m| m.computations.last())
            .and_then(|c| c.instructions.last())
            .map(|i| i.name.clone())
            .unwrap();
        for m in 0..MUTANTS {
            let mut r = Lcg(0x41_0000 ^ (ci as u64) << 32 ^ m);
            let mut hlo = original.clone();
            for _ in 0..(1 + m * m) {
                damage_hlo(&mut hlo, &mut r);
            }
            let run = dir.path().join(format!("{name}-{ci}-{m}"));
            std::fs::create_dir_all(&run).unwrap();
            let space = xprof_proto::xplane::XSpace::default();
            std::fs::write(run.join("host0.xplane.pb"), space.encode_to_vec()).unwrap();
            std::fs::write(
                run.join(format!("{module}(1).hlo_proto.pb")),
                hlo.encode_to_vec(),
            )
            .unwrap();
            let p = run.display().to_string();
            let id = format!("{module}(1)");
            let cases: Vec<(&str, Value)> = vec![
                ("list_hlo_modules", json!({"logdir": p})),
                (
                    "get_hlo_module_content",
                    json!({"logdir": p, "module_name": id}),
                ),
                ("get_hlo_text", json!({"logdir": p, "module_name": id})),
                ("query_hlo_graph", json!({"logdir": p, "module_name": id})),
                ("get_graph_viewer", json!({"logdir": p, "module_name": id})),
                (
                    "get_hlo_neighborhood",
                    json!({"logdir": p, "module_name": id, "instruction_name": instruction}),
                ),
            ];
            let label = format!("{name} mutant {m}");
            calls.extend(cases.into_iter().map(|(t, a)| (label.clone(), t, a)));
        }
    }
    testing::robustness_calls(KRATE, calls).assert_clean();
}

#[test]
fn a_module_with_a_dangling_operand_is_reported_as_an_inconsistent_proto() {
    use xprof_proto::prost::Message;
    let mut hlo = xprof_testkit::pod::pod_hlo();
    let module = hlo.hlo_module.as_ref().unwrap().name.clone();
    let target = {
        let m = hlo.hlo_module.as_mut().unwrap();
        let ins = m
            .computations
            .iter_mut()
            .flat_map(|c| c.instructions.iter_mut())
            .find(|i| !i.operand_ids.is_empty())
            .unwrap();
        ins.operand_ids[0] = 987_654_321;
        ins.name.clone()
    };
    let dir = tempfile::tempdir().unwrap();
    let space = xprof_proto::xplane::XSpace::default();
    std::fs::write(dir.path().join("host0.xplane.pb"), space.encode_to_vec()).unwrap();
    std::fs::write(
        dir.path().join(format!("{module}(1).hlo_proto.pb")),
        hlo.encode_to_vec(),
    )
    .unwrap();
    let args = json!({"logdir": dir.path().display().to_string(), "module_name": format!("{module}(1)"), "instruction_name": target});
    let e = invoke_json(KRATE, "get_hlo_neighborhood", &args.to_string(), "{}")
        .expect_err("a dangling operand cannot be walked");
    assert_eq!(e.kind, ErrorKind::InvalidValue, "{}", e.message);
    assert!(
        e.message.contains("HLO proto is inconsistent"),
        "{}",
        e.message
    );
}
