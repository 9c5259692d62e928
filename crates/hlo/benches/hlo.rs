//! In-process benchmarks (divan): printing the largest captured module from its proto (what
//! get_hlo_module_content does after loading) and parsing the largest HLO dump file (what the
//! dump tools do). Inputs come from the shared corpus, plus the large JAX capture in
//! `$XPROF_BENCH_DATA` (default `/work/bench-data`) when present.

use std::path::PathBuf;

use xprof_hlo::print::{PrintOptions, print_module};

fn corpus() -> PathBuf {
    std::env::var_os("XPROF_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

fn bench_data() -> PathBuf {
    std::env::var_os("XPROF_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/bench-data"))
}

const MODULES: &[&str] = &[
    "corpus:fixtures/jax-cpu/logdir/plugins/profile/mlp_train/jit_init_params(4).hlo_proto.pb",
    "data:jax-large/logdir/plugins/profile/transformer_train/jit_init(4).hlo_proto.pb",
];

const DUMPS: &[&str] = &[
    "corpus:fixtures/jax-cpu/hlo_dump/mlp_train/module_0006.jit_make_batch.cpu_after_optimizations.txt",
];

fn resolve(spec: &str) -> PathBuf {
    match spec.split_once(':') {
        Some(("data", p)) => bench_data().join(p),
        Some((_, p)) => corpus().join(p),
        None => PathBuf::from(spec),
    }
}

fn main() {
    divan::main();
}

/// Decode + print (long form), as get_hlo_module_content does.
#[divan::bench(args = MODULES)]
fn module_content(bencher: divan::Bencher, spec: &str) {
    let Ok(bytes) = std::fs::read(resolve(spec)) else {
        return;
    };
    bencher.bench(|| {
        let m = xprof_proto::decode_hlo_module(&bytes).unwrap().unwrap();
        print_module(&m, &PrintOptions::long()).len()
    });
}

/// Print only (the proto already decoded).
#[divan::bench(args = MODULES)]
fn print_only(bencher: divan::Bencher, spec: &str) {
    let Ok(bytes) = std::fs::read(resolve(spec)) else {
        return;
    };
    let m = xprof_proto::decode_hlo_module(&bytes).unwrap().unwrap();
    bencher.bench(|| print_module(&m, &PrintOptions::long()).len());
}

/// Full parse of the largest dump file.
#[divan::bench(args = DUMPS)]
fn parse_dump(bencher: divan::Bencher, spec: &str) {
    let Ok(text) = std::fs::read_to_string(resolve(spec)) else {
        return;
    };
    bencher.bench(|| xprof_hlo::parse(&text, spec).unwrap().instruction_count());
}
