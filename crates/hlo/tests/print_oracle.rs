//! The printer against XProf 2.24.2's graph viewer (`long_txt`, `short_txt`) and XLA's own
//! dump of the same module.

use std::path::{Path, PathBuf};

use xprof_hlo::print::{ModuleView, PrintOptions, print_module};
use xprof_plugin_api::sdk::testing::corpus;

fn corpus_dir() -> Option<PathBuf> {
    corpus(env!("CARGO_MANIFEST_DIR"))
}

fn load(path: &Path) -> xprof_proto::xla::HloModuleProto {
    let bytes = std::fs::read(path).unwrap();
    xprof_proto::decode_hlo_proto(&bytes)
        .unwrap()
        .hlo_module
        .expect("hlo_module")
}

/// (oracle folder, hlo_proto.pb relative to the corpus)
const CASES: &[(&str, &str)] = &[
    (
        "seed-v6e",
        "fixtures/seed-v6e/logdir/plugins/profile/testrun/jit_matmul_optimized(17342868964687645945).hlo_proto.pb",
    ),
    (
        "jax-cpu-matmul",
        "fixtures/jax-cpu/logdir/plugins/profile/matmul/jit_matmul(0).hlo_proto.pb",
    ),
    (
        "jax-cpu-mlp_train",
        "fixtures/jax-cpu/logdir/plugins/profile/mlp_train/jit_init_params(4).hlo_proto.pb",
    ),
    (
        "jax-cpu-mlp_train.train_step",
        "fixtures/jax-cpu/logdir/plugins/profile/mlp_train/jit_train_step(8).hlo_proto.pb",
    ),
];

fn first_diff(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n ours: {}\n xprof: {}", i + 1, x, y);
        }
    }
    format!(
        "lengths differ: {} vs {} lines",
        a.lines().count(),
        b.lines().count()
    )
}

#[test]
fn long_txt_is_byte_identical() {
    let Some(c) = corpus_dir() else { return };
    for (folder, proto) in CASES {
        let m = load(&c.join(proto));
        let ours = print_module(&m, &PrintOptions::long());
        let want = std::fs::read_to_string(
            c.join("oracle/xprof-2.24.2")
                .join(folder)
                .join("graph_viewer.long_txt.txt"),
        )
        .unwrap();
        assert!(ours == want, "{folder}: {}", first_diff(&ours, &want));
    }
}

#[test]
fn short_txt_is_byte_identical() {
    let Some(c) = corpus_dir() else { return };
    for (folder, proto) in CASES {
        let m = load(&c.join(proto));
        let ours = print_module(&m, &PrintOptions::short());
        let want = std::fs::read_to_string(
            c.join("oracle/xprof-2.24.2")
                .join(folder)
                .join("graph_viewer.short_txt.txt"),
        )
        .unwrap();
        assert!(ours == want, "{folder}: {}", first_diff(&ours, &want));
    }
}

/// jit_train_step(8) against XLA's own dump from the process that recorded the profile:
/// every instruction's name, opcode, operands and shape are equal.
#[test]
fn train_step_matches_xla_dump() {
    let Some(c) = corpus_dir() else { return };
    let m = load(&c.join(CASES[3].1));
    let ours = print_module(
        &m,
        &PrintOptions {
            metadata: true,
            ..PrintOptions::long()
        },
    );
    let ours = xprof_hlo::parse(&ours, "printed").unwrap();
    let dump_path = c.join("fixtures/jax-cpu/hlo_dump/mlp_train/module_0008.jit_train_step.cpu_after_optimizations.txt");
    let dump = xprof_hlo::parse(&std::fs::read_to_string(&dump_path).unwrap(), "dump").unwrap();
    assert_eq!(ours.name, dump.name);
    // XLA printed the dump from its in-memory module, XProf from the proto round trip, so
    // computation and instruction order may differ; the instructions themselves may not.
    assert_eq!(ours.computations.len(), dump.computations.len());
    let mut n = 0;
    for a in &ours.computations {
        let b = dump
            .computation(&a.name)
            .unwrap_or_else(|| panic!("{} not in dump", a.name));
        assert_eq!(a.is_entry, b.is_entry, "{}", a.name);
        assert_eq!(a.instructions.len(), b.instructions.len(), "{}", a.name);
        for x in &a.instructions {
            let y = b
                .instructions
                .iter()
                .find(|y| y.name == x.name)
                .unwrap_or_else(|| panic!("{} not in dump", x.name));
            assert_eq!(
                (&x.opcode, &x.operands, &x.shape, x.is_root),
                (&y.opcode, &y.operands, &y.shape, y.is_root),
                "{}",
                x.name
            );
            // With metadata, whole lines agree too (the proto carries what XLA printed).
            assert_eq!(x.text, y.text);
            n += 1;
        }
    }
    assert!(n > 100);
    let _ = ModuleView::new(&m);
}
