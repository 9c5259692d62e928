//! The dump tools on damaged dumps: the shared corpus's real LLO, Mosaic and HLO dumps with
//! lines deleted, repeated, swapped, cut short or replaced by garbage, numbers made huge or
//! negative, files cut at any byte. A tool may answer or report a usage/value/path error, but
//! never panic (an internal error).

use std::path::Path;

use serde_json::{Value, json};
use xprof_plugin_api::sdk::testing;
use xprof_testkit::damage::{Lcg, damaged_copy};

const KRATE: &str = env!("CARGO_CRATE_NAME");

#[test]
fn no_dump_tool_panics_on_damaged_dumps() {
    const MUTANTS: u64 = 12;
    let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    let seed = c.join("fixtures/seed-v6e");
    let originals = [
        ("llo", seed.join("jf_dump")),
        ("mosaic", seed.join("mosaic_dump")),
        ("hlo", seed.join("hlo_dump")),
    ];
    let originals: Vec<(&str, &Path)> = originals.iter().map(|(n, p)| (*n, p.as_path())).collect();
    let logdir = seed.join("logdir").display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    for m in 0..MUTANTS {
        let mut r = Lcg(0x5eed ^ m << 20);
        let root = dir.path().join(format!("m{m}"));
        damaged_copy(&originals, &root, 1 + m * m * 2, &mut r);
        let (llo, mosaic, hlo) = (root.join("llo"), root.join("mosaic"), root.join("hlo"));
        let (llo, mosaic, hlo) = (
            llo.display().to_string(),
            mosaic.display().to_string(),
            hlo.display().to_string(),
        );
        let cases: Vec<(&str, Value)> = vec![
            ("list_llo_programs", json!({"dump_dir": llo})),
            ("get_llo_bundles", json!({"dump_dir": llo})),
            (
                "get_llo_fit_summary",
                json!({"dump_dir": llo, "hlo_dump_dir": hlo}),
            ),
            ("get_llo_schedule_analysis", json!({"dump_dir": llo})),
            ("get_llo_static_utilization", json!({"dump_dir": llo})),
            (
                "get_llo_utilization",
                json!({"logdir": logdir, "dump_dir": llo}),
            ),
            (
                "get_custom_call_mlir",
                json!({"mosaic_dump_dir": mosaic, "hlo_dump_dir": hlo}),
            ),
        ];
        let label = format!("mutant {m}");
        calls.extend(cases.into_iter().map(|(t, a)| (label.clone(), t, a)));
    }
    // The damage leaves most dumps readable: the analyses run, not only the input checks.
    testing::robustness_calls(KRATE, calls).assert_clean();
}
