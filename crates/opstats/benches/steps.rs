//! In-process benchmark of the step database (divan): `steps::step_db` alone, on captures
//! loaded once. Inputs: the seed capture from the corpus, and the large captures in
//! `$XPROF_BENCH_DATA` (default `/work/bench-data`) when present; missing ones are skipped.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use xprof_opstats::device::{is_gpu_plane, is_tpu_tensor_core_plane};
use xprof_opstats::host::HOST_THREADS;
use xprof_opstats::model::{HostSpace, Plane};
use xprof_opstats::steps::step_db;

fn main() {
    divan::main();
}

/// The `.xplane.pb` and the `.hlo_proto.pb` files of a run directory (or one file).
fn load(path: &Path) -> Option<HostSpace> {
    let (xplane, hlo): (PathBuf, Vec<PathBuf>) = if path.is_dir() {
        let files: Vec<PathBuf> = std::fs::read_dir(path)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        let xplane = files
            .iter()
            .find(|f| f.to_string_lossy().ends_with(".xplane.pb"))?
            .clone();
        let hlo = files
            .into_iter()
            .filter(|f| f.to_string_lossy().ends_with(".hlo_proto.pb"))
            .collect();
        (xplane, hlo)
    } else if path.is_file() {
        (path.to_path_buf(), Vec::new())
    } else {
        return None;
    };
    xprof_opstats::load::load_host("host0", &xplane, &hlo)
        .ok()
        .map(|(s, _)| s)
}

const NAMES: &[&str] = &["seed", "jax-cpu", "x200", "jax-large"];

fn input(name: &str) -> Option<&'static HostSpace> {
    static SPACES: OnceLock<Vec<(String, Option<HostSpace>)>> = OnceLock::new();
    let spaces = SPACES.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let corpus = std::env::var_os("XPROF_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("../shared"));
        let data = std::env::var_os("XPROF_BENCH_DATA")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/work/bench-data"));
        let paths = [
            corpus.join("fixtures/seed-v6e/logdir/plugins/profile/testrun"),
            root.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_steps"),
            data.join("x200/plugins/profile/x200/host0.xplane.pb"),
            data.join("jax-large/logdir/plugins/profile/transformer_train"),
        ];
        NAMES
            .iter()
            .zip(paths)
            .map(|(n, p)| (n.to_string(), load(&p)))
            .collect()
    });
    spaces
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, s)| s.as_ref())
}

/// The planes `opstats::build` hands to `step_db`.
fn planes(space: &HostSpace) -> (Vec<&Plane>, Vec<&Plane>, Option<&Plane>) {
    let tpu: Vec<&Plane> = space
        .planes
        .iter()
        .filter(|p| is_tpu_tensor_core_plane(&p.name))
        .collect();
    let gpu: Vec<&Plane> = if tpu.is_empty() {
        space
            .planes
            .iter()
            .filter(|p| is_gpu_plane(&p.name))
            .collect()
    } else {
        Vec::new()
    };
    (tpu, gpu, space.plane(HOST_THREADS))
}

#[divan::bench(args = NAMES, sample_count = 20)]
fn step_database(bencher: divan::Bencher, name: &str) {
    let Some(space) = input(name) else { return };
    let (tpu, gpu, host) = planes(space);
    bencher.bench(|| step_db(divan::black_box(&tpu), &gpu, host));
}
