//! detect_unfused_reshapes on real JAX HLO (the shared corpus' `--xla_dump_hlo_as_proto`
//! dumps): `jit_matmul_softmax` before optimizations computes `q @ k.T` with a standalone
//! `transpose` of `k` feeding the dot; after optimizations XLA folded it into the dot's fusion.

use std::path::{Path, PathBuf};

use xprof_memory::reshapes;
use xprof_proto::xla::HloModuleProto;

fn corpus() -> Option<PathBuf> {
    xprof_plugin_api::sdk::testing::corpus(env!("CARGO_MANIFEST_DIR"))
}

fn dumped_module(c: &Path, stage: &str) -> HloModuleProto {
    let p = c.join(format!(
        "fixtures/jax-cpu/hlo_dump/proto/module_0002.jit_matmul_softmax.{stage}.hlo.pb"
    ));
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    xprof_proto::decode_hlo_proto(&bytes)
        .unwrap()
        .hlo_module
        .expect("the dump is an xla.HloProto with a module")
}

#[test]
fn standalone_transpose_of_k_feeding_the_dot_is_found() {
    let Some(c) = corpus() else { return };
    let m = dumped_module(&c, "before_optimizations");
    let modules = [reshapes::ModuleRef {
        display_name: "jit_matmul_softmax".into(),
        program_id: None,
        proto: &m,
    }];
    let found = reshapes::detect(&modules, &[]);
    let flagged: Vec<&reshapes::Finding> = found.iter().filter(|f| f.feeds_compute()).collect();
    assert_eq!(flagged.len(), 1, "{found:#?}");
    let t = flagged[0];
    assert_eq!(t.opcode, "transpose");
    assert_eq!(t.operands[0].name, "k.1");
    assert_eq!(t.users[0].opcode, "dot");
    assert_eq!(
        t.downstream_compute.as_deref(),
        Some(t.users[0].name.as_str())
    );
    // f32[64,256]: 64 KiB written.
    assert_eq!(t.output_bytes, 64 * 256 * 4);
    assert!(t.text.contains("transpose(k.1)"), "{}", t.text);
}

#[test]
fn after_optimization_nothing_materialises() {
    let Some(c) = corpus() else { return };
    let m = dumped_module(&c, "cpu_after_optimizations");
    let modules = [reshapes::ModuleRef {
        display_name: "jit_matmul_softmax".into(),
        program_id: None,
        proto: &m,
    }];
    let found = reshapes::detect(&modules, &[]);
    assert!(found.iter().all(|f| !f.feeds_compute()), "{found:#?}");
}
