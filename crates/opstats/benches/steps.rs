//! In-process benchmark of the step database (divan): `steps::step_db` alone, on captures
//! loaded once (the inputs of `xprof_testkit::bench_inputs`).

use std::sync::OnceLock;

use xprof_opstats::host::HOST_THREADS;
use xprof_opstats::model::{HostSpace, Plane};
use xprof_opstats::opstats::device_planes;
use xprof_opstats::steps::step_db;

use xprof_testkit::bench_inputs::{NAMES, input_files};

fn main() {
    divan::main();
}

fn input(name: &str) -> Option<&'static HostSpace> {
    static SPACES: OnceLock<Vec<(&str, Option<HostSpace>)>> = OnceLock::new();
    let spaces = SPACES.get_or_init(|| {
        NAMES
            .iter()
            .map(|&n| {
                let space = input_files(n).and_then(|(xplane, hlo)| {
                    xprof_opstats::load::load_host("host0", &xplane, &hlo).ok()
                });
                (n, space.map(|(s, _)| s))
            })
            .collect()
    });
    spaces
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, s)| s.as_ref())
}

/// The planes `opstats::build` hands to `step_db`.
fn planes(space: &HostSpace) -> (Vec<&Plane>, Vec<&Plane>, Option<&Plane>) {
    let (tpu, gpu) = device_planes(space);
    (tpu, gpu, space.plane(HOST_THREADS))
}

#[divan::bench(args = NAMES, sample_count = 20)]
fn step_database(bencher: divan::Bencher, name: &str) {
    let Some(space) = input(name) else { return };
    let (tpu, gpu, host) = planes(space);
    bencher.bench(|| step_db(divan::black_box(&tpu), &gpu, host, false));
}
