//! The benchmarks' inputs, shared by the reader's and the engine's benches: the seed capture
//! from the corpus (`$XPROF_CORPUS`, else `../shared`), the repository's JAX CPU fixture, and
//! the large captures in `$XPROF_BENCH_DATA` (default `/work/bench-data`, see
//! `docs/BENCHMARKS.md`); missing ones are skipped.

use std::path::{Path, PathBuf};

/// Every input, smallest first.
pub const NAMES: &[&str] = &["seed", "jax-cpu", "x200", "jax-large"];

/// The `.xplane.pb` and the `.hlo_proto.pb` files of input `name` (one of [`NAMES`], or the
/// path of a run directory or `.xplane.pb` file), `None` when it is missing or unknown.
pub fn input_files(name: &str) -> Option<(PathBuf, Vec<PathBuf>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = std::env::var_os("XPROF_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared"));
    let data = std::env::var_os("XPROF_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/bench-data"));
    let path = match name {
        "seed" => corpus.join("fixtures/seed-v6e/logdir/plugins/profile/testrun"),
        "jax-cpu" => root.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_steps"),
        "x200" => data.join("x200/plugins/profile/x200/host0.xplane.pb"),
        "jax-large" => data.join("jax-large/logdir/plugins/profile/transformer_train"),
        // Anything else is a path; an unknown name was once read as jax-large.
        other => PathBuf::from(other),
    };
    files(&path)
}

/// The `.xplane.pb` and the `.hlo_proto.pb` files of a run directory (or one file).
fn files(path: &Path) -> Option<(PathBuf, Vec<PathBuf>)> {
    if path.is_file() {
        return Some((path.to_path_buf(), Vec::new()));
    }
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
    Some((xplane, hlo))
}
