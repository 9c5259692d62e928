//! In-process benchmarks of the reader (divan): the floor (one pass decoding only tags and
//! varints), `open` (the validating, indexing pass) and a full scan (open + every event's
//! fields + every stat). Inputs: the seed capture from the corpus, and the large captures in
//! `$XPROF_BENCH_DATA` (default `/work/bench-data`) when present — see `cargo xtask bench`.

use xprof_xspace::{XSpace, wire};

fn main() {
    divan::main();
}

/// The capture of input `name` (the table shared with the engine's benches), read into memory.
fn input(name: &str) -> Option<Vec<u8>> {
    let (xplane, _) = xprof_testkit::bench_inputs::input_files(name)?;
    std::fs::read(xplane).ok()
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
        fn start(&self, _: xprof_xspace::Line<'_>, _: &xprof_xspace::Run) -> Option<i64> {
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
