//! Parity with XProf 2.24.2 on real GPU captures recorded by other teams
//! (`../shared/fixtures/gpu-real`): every field of every converter view XProf prints, compared
//! field by field. Fields that still differ are listed in `tests/data/gpu-real-known-diffs.txt`
//! (one `capture<TAB>field` line each); the test fails on a difference not listed there, and
//! on a listed one that no longer differs, so the list only shrinks. `XPROF_BLESS=1` rewrites
//! it. The tally per capture and view is printed (`--nocapture`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use common::*;

fn known_diffs_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/gpu-real-known-diffs.txt")
}

/// The tally of one capture per view.
fn compare_capture(
    name: &str,
    run: &std::path::Path,
    oracle_dir: &std::path::Path,
) -> BTreeMap<&'static str, Tally> {
    let mut by_view = BTreeMap::new();
    let r = load(run);
    let s = r.op_stats().expect("op stats");

    let mut t = Tally::default();
    compare_op_views(name, &s, oracle_dir, &mut t);
    by_view.insert("op views", t);

    let (hosts, hlo) = host_files(run);
    let raw = xprof_views::load::load_raw(&hosts, xprof_views::load::gpu_planes).unwrap();
    let names = xprof_views::kernel::HloOpNames::new(&raw, &hlo);
    let ks = xprof_views::kernel::kernel_stats_with_hlo(&raw, &names);
    let mut t = Tally::default();
    if let Some(o) = oracle_opt(oracle_dir, "kernel_stats") {
        t.table(&format!("{name} kernel_stats"), &ks.table(), &o);
    }
    by_view.insert("kernel_stats", t);

    // As get_framework_op_stats builds it: the Tensor Core use from the kernel stats.
    let mut t = Tally::default();
    if let Some(o) = oracle_opt(oracle_dir, "framework_op_stats") {
        let f = r
            .op_stats_with(xprof_views::framework::BUILD)
            .expect("op stats");
        let tc = xprof_views::kernel::tensor_core_time_by_op(&ks);
        for (i, exclude_idle) in [(0, false), (1, true)] {
            let table = xprof_views::framework::table_with_kernels(&f, exclude_idle, Some(&tc));
            t.table(&format!("{name} framework table {i}"), &table, &o[i]);
        }
    }
    by_view.insert("framework_op_stats", t);

    let mut t = Tally::default();
    if let Some(o) = oracle_opt(oracle_dir, "input_pipeline_analyzer") {
        let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
        let theirs = o.as_array().cloned().unwrap_or_default();
        t.structure(
            &format!("{name} input_pipeline"),
            "tables",
            ip.tables.len() == theirs.len(),
            format!("ours {} vs XProf {}", ip.tables.len(), theirs.len()),
        );
        for (i, (a, b)) in ip.tables.iter().zip(&theirs).enumerate() {
            t.table(&format!("{name} input_pipeline table {i}"), a, b);
        }
    }
    by_view.insert("input_pipeline", t);
    by_view
}

#[test]
fn real_gpu_captures_equal_xprof_field_by_field() {
    let fixtures = gpu_real_fixtures();
    if corpus().is_none() {
        return;
    }
    assert!(
        fixtures.len() >= 4,
        "the shared corpus has four real GPU captures"
    );
    let mut found: BTreeSet<String> = BTreeSet::new();
    let mut details = BTreeMap::new();
    for (name, run, oracle_dir, _) in &fixtures {
        let tallies = compare_capture(name, run, oracle_dir);
        let (mut compared, mut diffs) = (0, 0);
        for (view, t) in &tallies {
            eprintln!(
                "{name:40} {view:20} compared {:5}  equal {:5}  placeholder {:4}  differ {:4}",
                t.compared,
                t.equal,
                t.placeholders,
                t.diffs.len()
            );
            compared += t.compared;
            diffs += t.diffs.len();
            for (key, detail) in &t.diffs {
                let line = format!("{name}\t{key}");
                details.insert(line.clone(), detail.clone());
                found.insert(line);
            }
        }
        assert!(compared > 0, "{name}: nothing compared");
        eprintln!(
            "{name:40} {:20} compared {compared:5}  differ {diffs:4} ({:.2} %)",
            "all views",
            100.0 * diffs as f64 / compared as f64
        );
    }
    let path = known_diffs_file();
    if std::env::var_os("XPROF_BLESS").is_some() {
        let text: String = found.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).expect("write the known differences");
        return;
    }
    let known: BTreeSet<String> = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let new: Vec<&String> = found.difference(&known).collect();
    let fixed: Vec<&String> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "{} new differences from XProf:\n{}",
        new.len(),
        new.iter()
            .map(|l| details[*l].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        fixed.is_empty(),
        "{} listed differences are gone: remove them from {}:\n{}",
        fixed.len(),
        path.display(),
        fixed
            .iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
