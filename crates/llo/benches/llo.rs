//! In-process cost of the LLO dump tools on the shared v6e fixture dump
//! (`$XPROF_CORPUS/fixtures/seed-v6e/jf_dump`, else `../shared` beside the workspace).
//! Run: `cargo bench -p xprof-llo`. Skips (prints why) when the corpus is absent.

use std::path::PathBuf;

use xprof_llo::dump::DumpIndex;
use xprof_llo::{bundles, fit, read_text};

fn jf_dump() -> Option<PathBuf> {
    let c = std::env::var_os("XPROF_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let d = c.join("fixtures/seed-v6e/jf_dump");
    d.is_dir().then_some(d)
}

fn main() {
    if jf_dump().is_none() {
        eprintln!("shared corpus not found (set XPROF_CORPUS): nothing to benchmark");
        return;
    }
    divan::main();
}

/// The whole `get_llo_fit_summary` computation: scan, parse every checkpoint, render.
#[divan::bench]
fn fit_summary() -> usize {
    let idx = DumpIndex::open(jf_dump()).unwrap();
    let data = fit::fit_data(&idx, None, 5).unwrap();
    fit::render(&data, 5).len()
}

/// `get_llo_bundles --grep dma\.hbm_to_vmem`: scan, read and parse the listing, filter.
#[divan::bench]
fn bundles_grep() -> usize {
    let idx = DumpIndex::open(jf_dump()).unwrap();
    let inst = idx.program("matmul_optimized.1").unwrap().primary();
    let p = idx.path_of(inst.passes.get("final_bundles").unwrap());
    let l = bundles::parse(&read_text(&p).unwrap(), &p).unwrap();
    let re = regex::Regex::new(r"dma\.hbm_to_vmem").unwrap();
    bundles::select(&l, None, Some(&re)).len()
}

/// `get_llo_bundles --address_range 0x19-0x1b`.
#[divan::bench]
fn bundles_range() -> usize {
    let idx = DumpIndex::open(jf_dump()).unwrap();
    let inst = idx.program("matmul_optimized.1").unwrap().primary();
    let p = idx.path_of(inst.passes.get("final_bundles").unwrap());
    let l = bundles::parse(&read_text(&p).unwrap(), &p).unwrap();
    bundles::select(&l, Some((0x19, 0x1b)), None).len()
}

/// Components of the fit summary, to see where its time goes.
mod parts {
    use super::*;

    fn file(label: &str) -> PathBuf {
        let idx = DumpIndex::open(jf_dump()).unwrap();
        let inst = idx.program("matmul_optimized.1").unwrap().primary();
        idx.path_of(inst.passes.get(label).unwrap())
    }

    #[divan::bench]
    fn mxu_scan(b: divan::Bencher) {
        let t = read_text(&file("final_bundles")).unwrap();
        b.bench(|| xprof_llo::mxu::scan_mxu_mnemonics(&t).matmul_count());
    }

    #[divan::bench]
    fn vmem_extract(b: divan::Bencher) {
        let t = read_text(&file("original")).unwrap();
        b.bench(|| xprof_llo::vmem::extract(&t).total());
    }

    #[divan::bench]
    fn matrix_parse(b: divan::Bencher) {
        let p = file("final_hlo-static-per-bundle-utilization");
        let t = read_text(&p).unwrap();
        b.bench(|| xprof_llo::matrix::parse(&t, &p).unwrap().rows.len());
    }

    #[divan::bench]
    fn schedule_parse(b: divan::Bencher) {
        let t = read_text(&file("schedule-analysis_final_bundles")).unwrap();
        b.bench(|| xprof_llo::schedule::parse(&t).per_hlo.len());
    }
}
