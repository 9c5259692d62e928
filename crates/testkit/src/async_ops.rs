//! A one-host TPU run with asynchronous ops, for the async-overlap analysis: chip 0 pairs
//! `<op>-start`/`<op>-done` events on its `XLA Ops` line (a partly covered all-gather, an
//! exposed copy, a hidden all-reduce, a `send` never done and a `recv-done` never started) and
//! has a SparseCore busy beside its TensorCore; chip 1 has an `Async XLA Ops` line. XProf
//! 2.24.2's agent CLI output for this run (`xprof analyze_async_overlap`) is what the parity
//! test compares with (`crates/views/tests/data/synthetic-async/`, made from
//! [`write_async_run`]). Times in ps; every expected value is worked out in that test.

use crate::{LineBuilder, XSpaceBuilder};

/// An XLA op named by its HLO text, as TPU captures name them.
fn op(l: LineBuilder, name: &str, start: i64, dur: i64) -> LineBuilder {
    l.event(&format!("%{name} = f32[8]{{0}} {name}()"), start, dur)
        .display_name(name)
}

/// The run's one host (`host0`).
pub fn async_host() -> XSpaceBuilder {
    XSpaceBuilder::new()
        .plane("/device:TPU:0", |p| {
            p.line("XLA Ops", |l| {
                [
                    ("fusion.1", 0, 100),
                    ("all-gather-start.1", 100, 10),
                    ("fusion.2", 110, 140),
                    ("all-gather-done.1", 300, 10),
                    ("copy-start.2", 310, 2),
                    ("copy-done.2", 312, 8),
                    ("all-reduce-start", 320, 10),
                    ("fusion.3", 330, 300),
                    ("all-reduce-done", 630, 10),
                    ("send.4", 640, 10),
                    ("recv-done.5", 650, 10),
                ]
                .into_iter()
                .fold(l, |l, (n, s, d)| op(l, n, s, d))
            })
        })
        .plane("/device:TPU:0 SparseCore 0", |p| {
            p.line("Sparse Core Ops", |l| {
                l.event("sc-gather", 50, 100).event("sc-scatter", 600, 100)
            })
        })
        .plane("/device:TPU:1", |p| {
            p.line("XLA Ops", |l| op(l, "fusion.9", 1000, 100))
                .line("Async XLA Ops", |l| op(l, "all-to-all.7", 1050, 200))
        })
}

/// Writes the run as `<logdir>/plugins/profile/<run>/host0.xplane.pb`; returns the run
/// directory.
pub fn write_async_run(logdir: &std::path::Path, run: &str) -> std::io::Result<std::path::PathBuf> {
    let file = async_host().write_run(logdir, run, "host0")?;
    Ok(file.parent().unwrap_or(logdir).to_path_buf())
}
