//! In-process benchmark of loading a capture into the engine's model (divan):
//! `load::load_host` (open and validate the XSpace, convert the planes the engine reads, decode
//! the HLO modules) and dropping the model, on the inputs of `xprof_testkit::bench_inputs`.

use xprof_testkit::bench_inputs::{NAMES, input_files};

fn main() {
    divan::main();
}

/// Open, validate and convert one host's capture (the model is dropped inside the sample).
#[divan::bench(args = NAMES, sample_count = 20)]
fn load_host(bencher: divan::Bencher, name: &str) {
    let Some((xplane, hlo)) = input_files(name) else {
        return;
    };
    bencher.bench(|| {
        let (space, _) = xprof_opstats::load::load_host("host0", &xplane, &hlo).unwrap();
        divan::black_box(&space);
    });
}
