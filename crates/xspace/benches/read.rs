//! In-process benchmarks of the reader (divan): the floor (one pass decoding only tags and
//! varints), `open` (the validating, indexing pass) and a full scan (open + every event's
//! fields + every stat). Inputs: the seed capture from the corpus, and the large captures in
//! `$XPROF_BENCH_DATA` (default `/work/bench-data`) when present — see `cargo xtask bench`.

use std::path::PathBuf;
use xprof_xspace::{XSpace, wire};

fn inputs() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = std::env::var_os("XPROF_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared"));
    let data = std::env::var_os("XPROF_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/bench-data"));
    let candidates = [
        (
            "seed",
            corpus.join("fixtures/seed-v6e/logdir/plugins/profile/testrun/host0.xplane.pb"),
        ),
        ("x200", data.join("seed_x200.xplane.pb")),
        (
            "jax-large",
            data.join("jax-large/logdir/plugins/profile/transformer_train/host0.xplane.pb"),
        ),
    ];
    candidates
        .into_iter()
        .filter_map(|(n, p)| std::fs::read(&p).ok().map(|b| (n.to_string(), b)))
        .collect()
}

fn main() {
    divan::main();
}

fn input(name: &str) -> Option<Vec<u8>> {
    inputs()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, b)| b)
}

const NAMES: &[&str] = &["seed", "x200", "jax-large"];

#[divan::bench(args = NAMES)]
fn floor(bencher: divan::Bencher, name: &str) {
    let Some(bytes) = input(name) else { return };
    bencher
        .counter(divan::counter::BytesCount::new(bytes.len()))
        .bench(|| wire::scan_floor(divan::black_box(&bytes)).unwrap());
}

#[divan::bench(args = NAMES)]
fn open(bencher: divan::Bencher, name: &str) {
    let Some(bytes) = input(name) else { return };
    bencher
        .counter(divan::counter::BytesCount::new(bytes.len()))
        .with_inputs(|| bytes.clone())
        .bench_values(|b| XSpace::from_bytes(b).unwrap().num_events());
}

#[divan::bench(args = NAMES)]
fn full_scan(bencher: divan::Bencher, name: &str) {
    let Some(bytes) = input(name) else { return };
    bencher
        .counter(divan::counter::BytesCount::new(bytes.len()))
        .with_inputs(|| bytes.clone())
        .bench_values(|b| {
            let space = XSpace::from_bytes(b).unwrap();
            let mut acc = 0i64;
            for p in space.planes() {
                for l in p.lines() {
                    for e in l.events() {
                        acc = acc.wrapping_add(e.duration_ps() ^ e.metadata_id());
                        for s in e.stats() {
                            acc = acc.wrapping_add(s.int().unwrap_or(1));
                        }
                    }
                }
            }
            acc
        });
}

/// `open_scan`: validate and visit every event (metadata id, duration, every stat) in one
/// pass, on rayon — the same work as `full_scan` without its second pass.
#[divan::bench(args = NAMES)]
fn open_scan(bencher: divan::Bencher, name: &str) {
    struct Sum;
    impl xprof_xspace::EventScan for Sum {
        type Acc = i64;
        fn start(&self, _: xprof_xspace::Line<'_>) -> Option<i64> {
            Some(0)
        }
        fn event(&self, acc: &mut i64, e: xprof_xspace::Event<'_>, _: Option<usize>) {
            *acc = acc.wrapping_add(e.duration_ps() ^ e.metadata_id());
            for s in e.stats() {
                *acc = acc.wrapping_add(s.int().unwrap_or(1));
            }
        }
    }
    let Some(bytes) = input(name) else { return };
    bencher
        .counter(divan::counter::BytesCount::new(bytes.len()))
        .with_inputs(|| bytes.clone())
        .bench_values(|b| {
            let (_, runs) = XSpace::from_bytes_scan(b, "bench", &Default::default(), &Sum).unwrap();
            runs.iter().fold(0i64, |a, r| a.wrapping_add(r.acc))
        });
}

#[divan::bench(args = NAMES)]
fn prost_decode(bencher: divan::Bencher, name: &str) {
    use prost::Message;
    let Some(bytes) = input(name) else { return };
    bencher
        .counter(divan::counter::BytesCount::new(bytes.len()))
        .bench(|| xprof_proto::xplane::XSpace::decode(divan::black_box(bytes.as_slice())).unwrap());
}
