//! The acceptance rows of spec/TOOLS-kernel.md §5 on the shared seed-v6e fixtures, run
//! through the same in-process invoke path the host uses, plus failure-mode tests.

use serde_json::{Value, json};
use xprof_plugin_api::sdk::{invoke_json, testing};
use xprof_plugin_api::{ErrorKind, ToolError};

const KRATE: &str = env!("CARGO_CRATE_NAME");

fn corpus() -> Option<std::path::PathBuf> {
    testing::corpus(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(sub: &str) -> Option<String> {
    corpus().map(|c| c.join("fixtures/seed-v6e").join(sub).display().to_string())
}

fn call(tool: &str, args: Value) -> Result<Value, ToolError> {
    invoke_json(KRATE, tool, &args.to_string(), "{}").map(|env| env["result"].clone())
}

fn ok(tool: &str, args: Value) -> Value {
    call(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args} failed: {e}"))
}

fn err(tool: &str, args: Value) -> ToolError {
    match call(tool, args.clone()) {
        Ok(v) => panic!("{tool} {args} should fail, got {v}"),
        Err(e) => e,
    }
}

fn full_text(e: &ToolError) -> String {
    format!("{} {}", e.message, e.hint.clone().unwrap_or_default())
}

macro_rules! jf_dump {
    () => {
        match fixture("jf_dump") {
            Some(d) => d,
            None => return,
        }
    };
}

const PROG: &str = "matmul_optimized.1";

#[test]
fn documented_examples_run() {
    let ran = testing::run_examples(KRATE, env!("CARGO_MANIFEST_DIR"));
    assert!(ran > 0 || corpus().is_none());
}

#[test]
fn row07_list_llo_programs() {
    let d = jf_dump!();
    let r = ok("list_llo_programs", json!({"dump_dir": d}));
    let progs = r["programs"].as_array().unwrap();
    assert_eq!(progs.len(), 1);
    let p = &progs[0];
    assert_eq!(p["program"], PROG);
    assert_eq!(p["kind"], "kernel");
    assert_eq!(p["compile_instances"], 1);
    assert_eq!(p["primary_instance_ts"], json!(1783579467107688879u64));
    assert_eq!(p["num_passes"], 4);
    assert_eq!(
        p["checkpoints"],
        json!({"final_bundles": true, "per_bundle_utilization": true, "schedule_analysis": true, "static_gap_analysis": false})
    );
    assert_eq!(p["custom_call_evidence"], true);
}

#[test]
fn row08_list_llo_programs_missing_dir_names_capture_flags() {
    let e = err(
        "list_llo_programs",
        json!({"dump_dir": "/nonexistent/path"}),
    );
    assert_eq!(e.kind, ErrorKind::Path);
    let t = full_text(&e);
    assert!(t.contains("--xla_jf_dump_to"), "{t}");
    assert!(t.contains("--xla_jf_dump_llo_text"), "{t}");
}

#[test]
fn row09_schedule_analysis() {
    let d = jf_dump!();
    let r = ok(
        "get_llo_schedule_analysis",
        json!({"dump_dir": d, "program": PROG}),
    );
    assert_eq!(
        r["totals"],
        json!({"total_bundles": 2705, "empty_bundles": 9, "non_empty_bundles": 2696})
    );
    assert_eq!(r["per_opcode"][0]["pct"], json!(100.0));
    assert_eq!(r["per_opcode"][0]["bundles"], json!(2696.0));
    assert!(
        r["per_opcode"][0]["attribution"]
            .as_str()
            .unwrap()
            .contains("custom-call")
    );
    let a = r["per_hlo"][0]["attribution"].as_str().unwrap();
    assert!(a.chars().count() <= 300);
    assert!(a.starts_with("%matmul_optimized.1 = f32[2048,2048]"));
    assert_eq!(r["per_hlo"][0]["pct"], json!(100.0));
}

#[test]
fn row10_static_utilization() {
    let d = jf_dump!();
    let r = ok(
        "get_llo_static_utilization",
        json!({"dump_dir": d, "program": PROG}),
    );
    let u = &r["units"];
    assert_eq!(u["MXU"]["capacity"], 2);
    assert_eq!(u["VALU"]["capacity"], 4);
    assert_eq!(u["VLOAD"]["capacity"], 3);
    assert_eq!(u["SALU"]["capacity"], 2);
    // The full §4.8 table.
    let table = [
        ("MXU", 74.6, 74.68, 74.53),
        ("XLU", 0.0, 0.0, 0.0),
        ("VALU", 14.2, 37.89, 0.0),
        ("VPOP", 37.86, 75.71, 0.0),
        ("EUP", 0.0, 0.0, 0.0),
        ("VLOAD", 44.26, 68.21, 18.34),
        ("VLOAD:FILL", 0.0, 0.0, 0.0),
        ("VSTORE", 18.93, 37.86, 0.0),
        ("VSTORE:SPILL", 0.0, 0.0, 0.0),
        ("SALU", 4.58, 5.62, 3.55),
    ];
    for (unit, occ, nz, sat) in table {
        assert_eq!(u[unit]["occupancy_pct"], json!(occ), "{unit}");
        assert_eq!(u[unit]["nonzero_bundle_pct"], json!(nz), "{unit}");
        assert_eq!(u[unit]["saturated_bundle_pct"], json!(sat), "{unit}");
    }
    assert_eq!(r["num_bundles"], 2705);
    let hot: Vec<(String, String, String, u64)> = r["hot_ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["dominant_unit"].as_str().unwrap().to_string(),
                h["address_range"][0].as_str().unwrap().to_string(),
                h["address_range"][1].as_str().unwrap().to_string(),
                h["length"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("MXU", "0x322", "0x4a4", 387),
        ("MXU", "0x113", "0x19c", 138),
        ("MXU", "0x220", "0x28e", 111),
        ("SALU", "0x1", "0x64", 100),
        ("VLOAD", "0x70", "0xc3", 84),
    ];
    assert_eq!(hot.len(), want.len());
    for (h, w) in hot.iter().zip(want) {
        assert_eq!((h.0.as_str(), h.1.as_str(), h.2.as_str(), h.3), w);
    }
    assert_eq!(r["alignment"]["aligned"], true);
    assert!(
        r["hot_ranges_by_occupancy"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
}

#[test]
fn row11_bundles_grep() {
    let d = jf_dump!();
    let r = ok(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": PROG, "grep": "dma\\.hbm_to_vmem", "limit": 3}),
    );
    assert!(r["total_matched"].as_u64().unwrap() >= 3);
    assert_eq!(r["returned"], 3);
    assert_eq!(r["truncated"], true);
    let addrs: Vec<&str> = r["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["address"].as_str().unwrap())
        .collect();
    assert!(addrs.iter().all(|a| a.starts_with("0x")));
    assert_eq!(addrs, vec!["0xa", "0xd", "0x14"]);
    // 0xa's hit is the BoundsCheck comment, 0xd is the DMA itself.
    assert_eq!(r["bundles"][0]["in_comment"], true);
    assert_eq!(r["bundles"][1]["in_comment"], false);
}

#[test]
fn row12_bundles_address_range() {
    let d = jf_dump!();
    let r = ok(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": PROG, "address_range": "0xa-0xd"}),
    );
    assert_eq!(r["total_matched"], 4);
    let addrs: Vec<&str> = r["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["address"].as_str().unwrap())
        .collect();
    assert_eq!(addrs, vec!["0xa", "0xb", "0xc", "0xd"]);
    assert_eq!(
        r["bundles"][3]["text"],
        "{ %11 = dma.hbm_to_vmem [thread:$0]  /*hbm=*/%s16850_s0, /*size_in_granules=*/32768, /*vmem=*/%s12940_s10, /*dst_syncflagno=*/[#allocation3], /*src_stride=*/%s12914_s13, /*dst_stride=*/%s12915_s14, /*steps_per_stride=*/%s12916_s15 }"
    );
    // The column-0 `hlo:` continuation belongs to 0xa.
    assert!(
        r["bundles"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hlo: matmul_optimized.1 */ }")
    );
    assert_eq!(r["bundles"][0]["hlo"], PROG);
}

#[test]
fn row13_bundles_without_program_points_to_list_llo_programs() {
    let d = jf_dump!();
    let e = err("get_llo_bundles", json!({"dump_dir": d}));
    assert_eq!(e.kind, ErrorKind::Usage);
    assert!(e.message.contains("list_llo_programs"), "{}", e.message);
}

fn fit(d: &str) -> (String, Value) {
    let r = ok("get_llo_fit_summary", json!({"dump_dir": d}));
    let text = r["text"].as_str().unwrap().to_string();
    let (digest, rest) = text
        .split_once("\n\n```json\n")
        .expect("digest, then a json fence");
    let json_text = rest.strip_suffix("\n```").expect("closing fence");
    let data: Value = serde_json::from_str(json_text).unwrap();
    assert_eq!(data, r["summary"]);
    (digest.to_string(), data)
}

#[test]
fn row17_fit_summary_digest() {
    let d = jf_dump!();
    let (digest, data) = fit(&d);
    assert!(digest.lines().count() <= 30);
    for marker in [
        "# LLO fit summary",
        "VMEM:",
        "MXU:",
        "Unit split",
        "Spills:",
        "Timeline:",
        "Hypotheses",
        "Verdict:",
        "Caveat:",
    ] {
        assert!(digest.contains(marker), "missing {marker}");
    }
    assert_eq!(data["program"], PROG);
    // The seed's digest, line for line.
    let seed = std::fs::read_to_string(
        corpus()
            .unwrap()
            .join("oracle/seed-cli/get_llo_fit_summary.txt"),
    )
    .unwrap();
    let seed_digest = seed.split("\n\n```json\n").next().unwrap();
    assert_eq!(digest, seed_digest);
}

#[test]
fn row18_fit_summary_vmem() {
    let d = jf_dump!();
    let v = &fit(&d).1["vmem"];
    assert_eq!(v["vmem_total_bytes"], 9510912);
    assert_eq!(v["vmem_scoped_bytes"], 9510912);
    assert_eq!(v["allocations"].as_array().unwrap().len(), 4);
    assert_eq!(v["used_of_scoped_default_pct"], json!(28.3));
    assert_eq!(v["headroom_vs_scoped_default_pct"], json!(71.7));
    assert_eq!(v["used_of_hardware_pct"], json!(7.1));
    assert!(
        v["limit_note"]
            .as_str()
            .unwrap()
            .contains("--xla_tpu_scoped_vmem_limit_kib")
    );
}

#[test]
fn row19_fit_summary_mxu() {
    let d = jf_dump!();
    let m = &fit(&d).1["mxu"];
    assert_eq!(m["matmul_count"], 1024);
    assert_eq!(m["inferred_operand_lanes"], 256);
    assert_eq!(m["mxus_used"], json!(["mxu0", "mxu1"]));
    assert!(m["dtypes"].get("f32").is_some());
    assert_eq!(
        m["op_counts"],
        json!({"matmul": 1024, "matprep": 1536, "matpush1": 256, "matpush2": 256})
    );
    assert_eq!(m["dtypes"], json!({"f32": 1024}));
    assert_eq!(
        m["mxu_result_pops"]["mxu0"].as_u64().unwrap()
            + m["mxu_result_pops"]["mxu1"].as_u64().unwrap(),
        2048
    );
}

#[test]
fn row20_fit_summary_agrees_with_the_tools() {
    let d = jf_dump!();
    let data = fit(&d).1;
    let su = ok(
        "get_llo_static_utilization",
        json!({"dump_dir": d, "program": PROG}),
    );
    let sa = ok(
        "get_llo_schedule_analysis",
        json!({"dump_dir": d, "program": PROG}),
    );
    assert_eq!(
        data["units"]["MXU"]["occupancy_pct"],
        su["units"]["MXU"]["occupancy_pct"]
    );
    assert_eq!(
        data["totals"]["total_bundles"],
        sa["totals"]["total_bundles"]
    );
}

#[test]
fn row21_fit_summary_spills_and_timeline() {
    let d = jf_dump!();
    let data = fit(&d).1;
    let s = &data["spills"];
    assert_eq!(
        (s["spills_total"].clone(), s["fills_total"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(s["spill_fill_per_bundle"], json!(0.0));
    assert!(s.get("flag").is_none());
    let tl = &data["timeline"];
    let pct = tl["bundle_class_pct"].as_object().unwrap();
    let sum: f64 = pct.values().map(|v| v.as_f64().unwrap()).sum();
    assert!((sum - 100.0).abs() <= 0.5);
    assert_eq!(
        Value::Object(pct.clone()),
        json!({"overlap_mxu_mem": 61.1, "mxu_only": 13.6, "mem_stall_mxu_idle": 12.5, "vpu_only_mxu_idle": 7.0, "salu_bubble": 5.5, "idle": 0.3})
    );
    assert_eq!(tl["mxu_idle_stall_pct"], json!(25.3));
    let runs = tl["top_stall_runs"].as_array().unwrap();
    let lens: Vec<u64> = runs.iter().map(|r| r["length"].as_u64().unwrap()).collect();
    assert!(lens.windows(2).all(|w| w[0] >= w[1]));
    assert!(
        runs[0]["bundle_range"][0]
            .as_str()
            .unwrap()
            .starts_with("0x")
    );
    assert_eq!(runs[0]["hlo"], PROG);
    let stall = [
        "mem_stall_mxu_idle",
        "vpu_only_mxu_idle",
        "salu_bubble",
        "idle",
    ];
    assert!(
        runs.iter()
            .all(|r| stall.contains(&r["dominant_class"].as_str().unwrap()))
    );
    assert_eq!(runs[0]["bundle_range"], json!(["0x4a5", "0x5ae"]));
    assert_eq!(runs[1]["bundle_range"], json!(["0x9a1", "0xa90"]));
    assert_eq!(runs[2]["bundle_range"], json!(["0x0", "0xb2"]));
}

#[test]
fn row22_fit_summary_recommendations_and_verdict_class() {
    let d = jf_dump!();
    let data = fit(&d).1;
    let recs = data["recommendations"].as_array().unwrap();
    assert!(!recs.is_empty());
    for r in recs {
        assert!(["STRUCTURAL", "TUNE"].contains(&r["kind"].as_str().unwrap()));
        for k in ["lever", "ceiling_estimate", "basis"] {
            assert!(!r[k].as_str().unwrap().is_empty());
        }
    }
    let ceilings: Vec<&str> = recs
        .iter()
        .map(|r| r["ceiling_estimate"].as_str().unwrap())
        .collect();
    assert_eq!(ceilings, vec!["<=1.14x", "<=1.08x", "<=1.06x"]);
    let vc = &data["verdict_class"];
    assert_eq!(vc["class"], "TUNE");
    assert_eq!(vc["top_lever"], recs[0]["lever"]);
    assert_eq!(vc["ceiling_estimate"], recs[0]["ceiling_estimate"]);
    assert!(data["caveat"].as_str().unwrap().contains("static"));
}

#[test]
fn row23_fit_summary_missing_dir() {
    let e = err(
        "get_llo_fit_summary",
        json!({"dump_dir": "/nonexistent/path"}),
    );
    assert_eq!(e.kind, ErrorKind::Path);
    let t = full_text(&e);
    for s in [
        "--xla_jf_dump_to",
        "--xla_jf_dump_llo_text",
        "--xla_dump_to alone does NOT",
    ] {
        assert!(t.contains(s), "{t}");
    }
}

#[test]
fn row24_fit_summary_diff_against_itself() {
    let d = jf_dump!();
    let r = ok(
        "get_llo_fit_summary",
        json!({"dump_dir": d, "diff_dump_dir": d}),
    );
    let deltas = r["summary"]["diff"]["deltas"].as_object().unwrap();
    for k in [
        "vmem_total_mib",
        "spills",
        "fills",
        "spill_fill_per_bundle",
        "mxu_occupancy_pct",
        "mxu_idle_stall_pct",
        "total_bundles",
    ] {
        assert_eq!(deltas[k]["changed"], false, "{k}");
    }
    assert!(r["text"].as_str().unwrap().contains("no scalar changes"));
}

#[test]
fn row36_fit_summary_provenance() {
    let d = jf_dump!();
    let data = fit(&d).1;
    let p = &data["provenance"];
    let keys = |v: &Value| {
        v["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(keys(&p["hypotheses"]).contains(&"recommendations".to_string()));
    assert!(keys(&p["hypotheses"]).contains(&"verdict_class".to_string()));
    assert!(keys(&p["measurements"]).contains(&"spills".to_string()));
    assert!(
        p["grading_metrics_forbidden"]
            .get("spill_fill_per_bundle")
            .is_some()
    );
    assert!(
        p["grading_metrics_forbidden"]
            .get("occupancy_pct")
            .is_some()
    );
    assert!(data["caveat"].as_str().unwrap().contains("INFERRED"));
}

#[test]
fn row40_bundles_ct_marker_is_its_own_bundle() {
    let d = jf_dump!();
    let r = ok(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": PROG, "address_range": "0x19-0x1b"}),
    );
    assert_eq!(r["total_matched"], 3);
    let b = r["bundles"].as_array().unwrap();
    assert_eq!(b[1]["address"], "0x1a");
    assert_eq!(b[1]["ct_marker"], "LB");
    assert_eq!(b[1]["loop_depth"], 1);
    assert!(!b[0]["text"].as_str().unwrap().contains("0x1a"));
}

#[test]
fn row41_bundles_unfiltered_count_every_bundle() {
    let d = jf_dump!();
    let r = ok(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": PROG, "limit": 500}),
    );
    assert_eq!(r["total_matched"], 2705);
    assert_eq!(r["returned"], 500);
    let all = ok(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": PROG, "grep": "."}),
    );
    assert_eq!(all["total_matched"], 2705);
    let ct = ok(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": PROG, "address_range": "0x0-0xfff", "limit": 500}),
    );
    assert_eq!(ct["total_matched"], 2705);
}

// ---- failure modes --------------------------------------------------------------------------

#[test]
fn llo_tools_without_any_dump_dir_are_usage_errors() {
    // The tests never set the variable; when the developer's shell has it, skip.
    if std::env::var_os("XLA_JF_DUMP_DIR").is_some() {
        return;
    }
    for (tool, args) in [
        ("list_llo_programs", json!({})),
        ("get_llo_fit_summary", json!({})),
        ("get_llo_bundles", json!({"program": PROG})),
    ] {
        let e = err(tool, args);
        assert_eq!(e.kind, ErrorKind::Usage, "{tool}");
        assert!(full_text(&e).contains("XLA_JF_DUMP_DIR"), "{tool}: {e}");
    }
}

#[test]
fn empty_dump_dir_is_no_data_with_capture_flags() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("README"), "not a dump").unwrap();
    let d = t.path().display().to_string();
    for (tool, args) in [
        ("list_llo_programs", json!({"dump_dir": d})),
        ("get_llo_fit_summary", json!({"dump_dir": d})),
        ("get_llo_bundles", json!({"dump_dir": d, "program": "x"})),
        (
            "get_llo_static_utilization",
            json!({"dump_dir": d, "program": "x"}),
        ),
        (
            "get_llo_schedule_analysis",
            json!({"dump_dir": d, "program": "x"}),
        ),
    ] {
        let r = ok(tool, args);
        assert_eq!(r["status"], "no_data", "{tool}");
        assert!(
            r["capture_flags"].to_string().contains("--xla_jf_dump_to"),
            "{tool}"
        );
    }
}

/// A dump with one program whose files are damaged in the ways a real dump can be.
fn damaged_dump() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let p = |n: &str| t.path().join(format!("1000000000-k.1-{n}.txt"));
    std::fs::write(
        p("05-hlo-static-per-bundle-utilization"),
        "== CAPACTIY:\nMXU, VALU\n2 x\n== UTILIZATION:\n0 0\n",
    )
    .unwrap();
    std::fs::write(p("06-final_bundles"), "no bundles in here\n").unwrap();
    t
}

#[test]
fn malformed_inputs_are_invalid_values_naming_file_and_line() {
    let t = damaged_dump();
    let d = t.path().display().to_string();
    let e = err(
        "get_llo_static_utilization",
        json!({"dump_dir": d, "program": "k.1"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    assert!(
        e.message.contains("per-bundle-utilization.txt:3"),
        "{}",
        e.message
    );
    assert!(e.hint.is_some());
    let e = err("get_llo_bundles", json!({"dump_dir": d, "program": "k.1"}));
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    assert!(e.message.contains("final_bundles.txt"), "{}", e.message);
    let e = err("get_llo_fit_summary", json!({"dump_dir": d}));
    assert_eq!(e.kind, ErrorKind::InvalidValue);
}

#[test]
fn missing_checkpoint_is_no_data_but_a_named_missing_pass_is_an_error() {
    let t = damaged_dump();
    let d = t.path().display().to_string();
    let r = ok(
        "get_llo_schedule_analysis",
        json!({"dump_dir": d, "program": "k.1"}),
    );
    assert_eq!(r["status"], "no_data");
    assert!(r["reason"].as_str().unwrap().contains("schedule-analysis"));
    let e = err(
        "get_llo_schedule_analysis",
        json!({"dump_dir": d, "program": "k.1", "pass_label": "nope"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    assert!(e.message.contains("available"), "{}", e.message);
}

#[test]
fn bad_arguments_are_invalid_values() {
    let d = jf_dump!();
    let e = err(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": PROG, "address_range": "a-d"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    assert!(e.message.contains("address_range"));
    let e = err(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": PROG, "grep": "("}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    let e = err(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": "matmul"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    assert!(
        e.message.contains("matmul_optimized.1"),
        "close matches listed: {}",
        e.message
    );
    let e = err(
        "get_llo_static_utilization",
        json!({"dump_dir": d, "program": PROG, "hot_ranges": -1}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
}

// ---- Mosaic -----------------------------------------------------------------------------------

#[test]
fn row14_custom_call_mlir_from_mosaic_dump() {
    let Some(d) = fixture("mosaic_dump") else {
        return;
    };
    let r = ok(
        "get_custom_call_mlir",
        json!({"mosaic_dump_dir": d, "max_chars": 500}),
    );
    assert_eq!(r["source"], "mosaic_dump");
    let t = r["mlir_text"].as_str().unwrap();
    assert!(t.contains("matmul_pipeline_kernel"));
    assert!(t.starts_with("module attributes {stable_mosaic.version = 11 : i64} {"));
    assert_eq!(t.chars().count(), 500);
    assert_eq!(r["truncated"], true);
    assert_eq!(r["kernel"], "anonymous");
    assert_eq!(r["function"], "matmul_pipeline_kernel");
    assert_eq!(r["pass"], "post-eliminate-llo-extensions");
    assert_eq!(r["pass_seq"], 16);
    assert_eq!(r["mlir_chars"], 2977795);
    assert_eq!(r["op_summary"], json!({"scf.for": 1, "scf.if": 8}));
    let llo = &r["op_counts_by_dialect"]["llo"];
    assert_eq!(llo["llo.vmatmul.mubr"], 1024);
    assert_eq!(llo["llo.vmatprep.subr"], 512);
    assert_eq!(llo["llo.enqueue_dma"], 5);
    // M2: the MLIR function name finds the dump whose file token is `anonymous`.
    let by_func = ok(
        "get_custom_call_mlir",
        json!({"mosaic_dump_dir": d, "kernel": "matmul_pipeline", "max_chars": 10}),
    );
    assert_eq!(by_func["kernel"], "anonymous");
    // …and so does the HLO op name, through the HLO dump's custom call.
    if let Some(h) = fixture("hlo_dump") {
        let r = ok(
            "get_custom_call_mlir",
            json!({"mosaic_dump_dir": d, "hlo_dump_dir": h, "kernel": "matmul_optimized.1", "max_chars": 10}),
        );
        assert_eq!(r["kernel"], "anonymous");
        assert!(
            r["matched_via"]
                .as_str()
                .unwrap()
                .contains("@matmul_pipeline_kernel")
        );
        if std::env::var_os("XLA_HLO_DUMP_DIR").is_none() {
            let r = ok(
                "get_custom_call_mlir",
                json!({"mosaic_dump_dir": d, "kernel": "matmul_optimized.1"}),
            );
            assert_eq!(
                r["status"], "no_data",
                "without the HLO dump the op name cannot be resolved"
            );
        }
    }
}

#[test]
fn row15_custom_call_mlir_from_hlo_bytecode() {
    let Some(d) = fixture("hlo_dump") else { return };
    let r = ok(
        "get_custom_call_mlir",
        json!({"kernel": "matmul_optimized", "hlo_dump_dir": d}),
    );
    assert_eq!(r["source"], "hlo_backend_config");
    assert_eq!(r["kernel"], "matmul_optimized.1");
    assert_eq!(r["body_format"], "mlir_bytecode");
    assert_eq!(r["body_bytes"], 12407);
    let s = &r["bytecode_summary"];
    assert!(s["mlir_version"].as_str().unwrap().starts_with("MLIR"));
    assert_eq!(s["mlir_version"], "MLIR23.0.0git");
    assert!(s["op_counts"].get("tpu.matmul").is_some());
    assert!(s["op_counts"].get("tpu.enqueue_dma").is_some());
    assert_eq!(
        s["op_counts"]["tpu.matmul"], 2,
        "true counts from the IR section"
    );
    assert!(
        s["op_counts"].get("tpu.wait_dma").is_none(),
        "no phantom prefix match"
    );
    let scopes: Vec<&str> = s["named_scopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(scopes.iter().any(|n| n.starts_with("acc/")));
    let seed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            corpus()
                .unwrap()
                .join("oracle/seed-cli/get_custom_call_mlir.hlo_dump.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(s["named_scopes"], seed["bytecode_summary"]["named_scopes"]);
    assert_eq!(s["bytecode_version"], 0);
    assert_eq!(s["functions"], json!(["matmul_pipeline_kernel"]));
    assert_eq!(s["scope_op_counts"]["acc/dot_general"]["tpu.matmul"], 1);
}

#[test]
fn row16_custom_call_mlir_without_any_dir() {
    if std::env::var_os("XLA_HLO_DUMP_DIR").is_some() {
        return;
    }
    let e = err("get_custom_call_mlir", json!({}));
    assert_eq!(e.kind, ErrorKind::Usage);
    assert!(e.message.contains("No dump directory available"));
}

#[test]
fn custom_call_mlir_failure_modes() {
    let e = err(
        "get_custom_call_mlir",
        json!({"mosaic_dump_dir": "/nonexistent/mosaic"}),
    );
    assert_eq!(e.kind, ErrorKind::Path);
    assert!(full_text(&e).contains("--xla_mosaic_dump_to"));
    let t = tempfile::tempdir().unwrap();
    let d = t.path().display().to_string();
    let r = ok("get_custom_call_mlir", json!({"mosaic_dump_dir": d}));
    assert_eq!(r["status"], "no_data");
    assert!(
        r["capture_flags"]
            .to_string()
            .contains("--xla_mosaic_dump_to")
    );
    let r = ok("get_custom_call_mlir", json!({"hlo_dump_dir": d}));
    assert_eq!(r["status"], "no_data");
    // A custom call whose body is not base64 is malformed input naming the file.
    std::fs::write(
        t.path().join("module_0001.m.after_optimizations.txt"),
        "ROOT %k.1 = f32[1] custom-call(%x), custom_call_target=\"tpu_custom_call\", backend_config={\"custom_call_config\":{\"body\":\"@@@\"}}\n",
    )
    .unwrap();
    let r = ok("get_custom_call_mlir", json!({"hlo_dump_dir": d}));
    assert_eq!(
        r["status"], "no_data",
        "a body that is not base64 text is not matched as one"
    );
    std::fs::write(
        t.path().join("module_0001.m.after_optimizations.txt"),
        "ROOT %k.1 = f32[1] custom-call(%x), custom_call_target=\"tpu_custom_call\", backend_config={\"custom_call_config\":{\"body\":\"aGVsbG8=\"}}\n",
    )
    .unwrap();
    let r = ok("get_custom_call_mlir", json!({"hlo_dump_dir": d}));
    assert_eq!(r["kernel"], "k.1");
    assert_eq!(r["body_format"], "unknown");
    assert_eq!(r["bytecode_summary"]["body_format"], "unknown");
    let mosaic = fixture("mosaic_dump");
    if let Some(m) = mosaic {
        let e = err(
            "get_custom_call_mlir",
            json!({"mosaic_dump_dir": m, "pass_label": "nope"}),
        );
        assert_eq!(e.kind, ErrorKind::InvalidValue);
    }
}

// ---- trace side -------------------------------------------------------------------------------

macro_rules! logdir {
    () => {
        match fixture("logdir") {
            Some(d) => d,
            None => return,
        }
    };
}

fn tpu0(r: &Value) -> &Value {
    &r["/device:TPU:0"]
}

#[test]
fn row01_check_kernel_profiling() {
    let l = logdir!();
    let r = ok(
        "check_kernel_profiling",
        json!({"logdir": l, "run": "testrun"}),
    );
    assert_eq!(r["kernel_profiling_active"], true);
    let d = &r["devices"]["/device:TPU:0"];
    assert_eq!(
        d["lines"],
        json!({"_counters_": 1768, "Tensor Core": 438, "XLA TraceMe": 336})
    );
    assert!(
        d["counter_units"]
            .as_array()
            .unwrap()
            .contains(&json!("MXU"))
    );
    assert!(
        d["traceme_stages"]
            .as_array()
            .unwrap()
            .contains(&json!("ep_run_kernel"))
    );
    assert_eq!(d["kernel_invocations"], 3);
    assert_eq!(r["capture"]["files_used"], json!(["host0"]));
}

#[test]
fn row02_list_kernel_invocations() {
    let l = logdir!();
    let r = ok("list_kernel_invocations", json!({"path": l}));
    let k = tpu0(&r).as_array().unwrap();
    assert_eq!(k.len(), 1);
    assert_eq!(k[0]["kernel"], "matmul_optimized.1");
    assert_eq!(k[0]["count"], 3);
    let mean = k[0]["mean_us"].as_f64().unwrap();
    assert!(70.0 < mean && mean < 82.0);
    assert_eq!(k[0]["mean_us"], json!(75.754));
    assert_eq!(k[0]["p50_us"], json!(75.785));
    assert_eq!(
        k[0]["hlo_confirmation"]["custom_call_target"],
        "tpu_custom_call"
    );
}

#[test]
fn list_kernel_invocations_addresses_feed_get_llo_bundles() {
    let (l, d) = (logdir!(), jf_dump!());
    let r = ok("list_kernel_invocations", json!({"path": l}));
    let k = &tpu0(&r)[0];
    let range = k["bundle_address_range"].as_str().unwrap();
    let b = ok(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": k["kernel"], "address_range": range, "limit": 500}),
    );
    // The listing ends at 0xa90; markers 0xc9d-0xca3 lie past it, so only the covered part
    // of the range matches.
    assert_eq!(b["total_matched"], json!(0xa90 - 0x1ee + 1));
    let one = k["bundle_markers"][0]["address"].as_str().unwrap();
    let b = ok(
        "get_llo_bundles",
        json!({"dump_dir": d, "program": k["kernel"], "address_range": one}),
    );
    assert_eq!(b["bundles"][0]["address"], one);
}

#[test]
fn row03_llo_utilization_kernel_window() {
    let l = logdir!();
    let r = ok(
        "get_llo_utilization",
        json!({"path": l, "kernel": "matmul_optimized"}),
    );
    let d = tpu0(&r);
    assert_eq!(d["window"], "kernel spans");
    let mxu = &d["units"]["MXU"];
    let p50u = mxu["p50_util_pct_unweighted"].as_f64().unwrap();
    assert!(65.0 < p50u && p50u < 80.0);
    assert!(mxu["mean_util_pct"].as_f64().unwrap() < 1.0);
    assert_eq!(mxu["weighted_by"], "sample duration_ps");
    assert_eq!(d["verdict"]["dominant_unit"], "Scalar ALU");
    assert_eq!(d["units"]["Vector Fills"]["total_count"], json!(0.0));
    assert!(
        d["semantics"]
            .as_str()
            .unwrap()
            .contains("static slot occupancy")
    );
    assert_eq!(d["alignment_check"]["suspect"], true);
    assert_eq!(d["verdict_corrected"]["status"], "indeterminate");
    assert_eq!(r["decomposition"]["status"], "not_requested");
}

#[test]
fn row04_llo_utilization_unknown_kernel() {
    let l = logdir!();
    let r = ok(
        "get_llo_utilization",
        json!({"path": l, "kernel": "nonexistent_kernel"}),
    );
    assert!(tpu0(&r).get("note").is_some());
}

#[test]
fn row05_llo_utilization_whole_trace() {
    let l = logdir!();
    let r = ok("get_llo_utilization", json!({"path": l}));
    let d = tpu0(&r);
    let mxu = &d["units"]["MXU"];
    assert!(mxu["mean_util_pct"].as_f64().unwrap() < 1.0);
    assert!(mxu["mean_util_pct_unweighted"].as_f64().unwrap() > 35.0);
    assert_eq!(mxu["covered_ps"], json!(221479220));
    let salu = &d["units"]["Scalar ALU"];
    assert_eq!(salu["malformed_duration_samples"], 3);
    assert!(
        salu["malformed_note"]
            .as_str()
            .unwrap()
            .contains("longer than the whole observed span")
    );
    assert!(salu["mean_util_pct"].as_f64().unwrap() > 5.0);
    assert_ne!(d["verdict"].get("status"), Some(&json!("indeterminate")));
    assert!(!d["verdict"]["mxu_mean_util_pct"].is_null());
    assert_eq!(salu["repaired_samples"]["count"], 3);
}

#[test]
fn llo_utilization_decomposition_with_the_dump() {
    let (l, d) = (logdir!(), jf_dump!());
    let r = ok(
        "get_llo_utilization",
        json!({"path": l, "kernel": "matmul_optimized", "dump_dir": d, "timeline_buckets": 4}),
    );
    let k = &r["decomposition"]["/device:TPU:0"]["kernels"]["matmul_optimized.1"];
    assert_eq!(
        k["stages"]["ep_run_kernel"]["bundle_range"],
        json!(["0x272", "0x772"])
    );
    assert_eq!(
        tpu0(&r)["units"]["MXU"]["timeline_mean_pct"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}

#[test]
fn row06_kernel_stage_breakdown() {
    let l = logdir!();
    let r = ok(
        "get_kernel_stage_breakdown",
        json!({"path": l, "kernel": "matmul_optimized"}),
    );
    let d = tpu0(&r);
    assert_eq!(d["stages"]["ep_run_kernel"]["kind"], "pipeline");
    assert_eq!(d["stages"]["acc"]["kind"], "named_scope");
    assert_eq!(d["stages"]["init"]["kind"], "named_scope");
    assert!(d["wait_ratio"].as_f64().unwrap() > 1.0);
    assert_eq!(d["wait_ratio"], json!(3.982));
}

fn measure(v: Value) -> (tempfile::NamedTempFile, String) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut f, v.to_string().as_bytes()).unwrap();
    let p = f.path().display().to_string();
    (f, p)
}

#[test]
fn row25_device_wall_floor_audit() {
    let l = logdir!();
    let (_f, m) = measure(json!({"wall_p50_ms": 0.0363, "baseline": {"wall_p50_ms": 0.599}}));
    let r = ok(
        "get_device_wall_report",
        json!({"logdir": l, "run": "testrun", "kernel": "matmul_optimized", "measure_json": m, "baseline_run": "testrun", "floor_ms": 0.599}),
    );
    let a = &r["floor_audit"][0];
    assert_eq!(a["claim"], "wall p50");
    assert_eq!(a["verdict"], "PHYSICALLY_IMPOSSIBLE");
    assert!(a["detail"].as_str().unwrap().contains("16.5x below"));
    assert_eq!(r["ratios"]["wall_ratio"], json!(16.5));
    assert!(
        r["ratios"]["wall_ratio_label"]
            .as_str()
            .unwrap()
            .contains("deployable")
    );
    assert!(
        r["ratios"]["device_ratio_label"]
            .as_str()
            .unwrap()
            .contains("device-framing")
    );
    assert!(
        r["framing"]
            .as_str()
            .unwrap()
            .contains("device-busy EXCEEDS wall")
    );
    assert_eq!(r["baseline_device_busy_p50_ms"], json!(0.075785));
}

#[test]
fn row26_device_wall_framings_agree() {
    let l = logdir!();
    let (_f, m) = measure(json!({"wall_p50_ms": 0.0765}));
    let r = ok(
        "get_device_wall_report",
        json!({"path": l, "kernel": "matmul_optimized", "measure_json": m}),
    );
    assert!(r["gap_pct"].as_f64().unwrap().abs() < 5.0);
    assert!(r["framing"].as_str().unwrap().contains("framings agree"));
}

#[test]
fn row27_device_wall_dispatch_overhead() {
    let l = logdir!();
    let (_f, m) = measure(json!({"results": [{"p50_us": 758.0}]}));
    let r = ok(
        "get_device_wall_report",
        json!({"path": l, "kernel": "matmul_optimized", "measure_json": m}),
    );
    assert_eq!(r["wall_p50_ms"], json!(0.758));
    assert!(r["gap_pct"].as_f64().unwrap() > 85.0);
    assert_eq!(r["gap_pct"], json!(90.0));
    assert!(
        r["framing"]
            .as_str()
            .unwrap()
            .contains("dispatch/host overhead")
    );
    assert!(r.get("floor_audit").is_none());
}

#[test]
fn row28_device_wall_without_measurement() {
    let l = logdir!();
    let r = ok(
        "get_device_wall_report",
        json!({"path": l, "kernel": "matmul_optimized"}),
    );
    assert_eq!(r["device_busy_p50_ms"], json!(0.075785));
    assert!(r["wall_p50_ms"].is_null());
    assert!(r.get("caveat").is_some());
}

#[test]
fn row29_device_wall_nested_baseline() {
    let l = logdir!();
    let (_f, m) =
        measure(json!({"results": {"baseline": {"p50_ms": 5.0}, "candidate": {"p50_ms": 1.0}}}));
    let r = ok(
        "get_device_wall_report",
        json!({"path": l, "kernel": "matmul_optimized", "measure_json": m}),
    );
    assert_eq!(r["wall_p50_ms"], json!(1.0));
    let key = r["wall_source"]["key"].as_str().unwrap();
    assert!(!key.contains("baseline"));
    assert_eq!(key, "results.candidate.p50_ms");
}

/// A capture with a device plane but none of the kernel-profiling lines.
fn flagless_capture() -> (tempfile::TempDir, String) {
    let t = tempfile::tempdir().unwrap();
    xprof_testkit::XSpaceBuilder::new()
        .hostname("host0")
        .plane("/device:TPU:0", |p| {
            p.line("XLA Ops", |l| l.event("fusion.1", 0, 1_000_000))
                .line("XLA Modules", |l| l.event("jit_f(1)", 0, 2_000_000))
        })
        .write_run(t.path(), "run1", "host0")
        .unwrap();
    let p = t.path().display().to_string();
    (t, p)
}

#[test]
fn trace_tools_on_a_flagless_capture_say_no_data() {
    let (_t, l) = flagless_capture();
    let r = ok("check_kernel_profiling", json!({"path": l}));
    assert_eq!(r["kernel_profiling_active"], false);
    assert!(
        r["hint"]
            .as_str()
            .unwrap()
            .contains("--xla_enable_custom_call_region_trace")
    );
    for (tool, args) in [
        ("list_kernel_invocations", json!({"path": l})),
        ("get_llo_utilization", json!({"path": l})),
        ("get_kernel_stage_breakdown", json!({"path": l})),
    ] {
        let r = ok(tool, args);
        assert_eq!(r["status"], "no_data", "{tool}: {r}");
        assert!(
            r["capture_flags"]
                .to_string()
                .contains("--xla_xprof_register_llo_debug_info"),
            "{tool}"
        );
    }
    let r = ok("get_device_wall_report", json!({"path": l}));
    assert!(r["device_busy_p50_ms"].is_null());
    assert!(
        r["device_note"]
            .as_str()
            .unwrap()
            .contains("no instrumented kernel spans")
    );
}

#[test]
fn trace_tools_reject_bad_paths_files_and_arguments() {
    let e = err(
        "check_kernel_profiling",
        json!({"path": "/nonexistent/logdir"}),
    );
    assert_eq!(e.kind, ErrorKind::Path);
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join("plugins/profile/r1");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("host0.xplane.pb"), b"\x0a\xff\xff\xff\x0f garbage").unwrap();
    let e = err(
        "list_kernel_invocations",
        json!({"path": t.path().display().to_string()}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    assert!(e.message.contains("host0.xplane.pb"), "{}", e.message);
    let (_t2, l) = flagless_capture();
    let e = err(
        "list_kernel_invocations",
        json!({"path": l, "kernel_regex": "("}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    let e = err("get_llo_utilization", json!({"path": l, "host": "nohost"}));
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    let (_f, m) = {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, b"{\"wall_p50_ms\": ").unwrap();
        let p = f.path().display().to_string();
        (f, p)
    };
    let e = err(
        "get_device_wall_report",
        json!({"path": l, "measure_json": m}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    assert!(e.message.contains(":1:"), "{}", e.message);
    let e = err(
        "get_device_wall_report",
        json!({"path": l, "measure_json": "/nonexistent.json"}),
    );
    assert_eq!(e.kind, ErrorKind::Path);
    let e = err("get_device_wall_report", json!({"path": l, "floor_ms": -1}));
    assert_eq!(e.kind, ErrorKind::InvalidValue);
}

// ---- seed oracle --------------------------------------------------------------------------------

/// Every value the seed printed (`oracle/seed-cli/<file>`) must be in our result at the same
/// place, except under `skip` (JSON-pointer prefixes), each a documented, deliberate change.
fn assert_matches_oracle(ours: &Value, oracle_file: &str, skip: &[(&str, &str)]) {
    let path = corpus().unwrap().join("oracle/seed-cli").join(oracle_file);
    let text = std::fs::read_to_string(&path).unwrap();
    let json_text = text
        .split_once("```json\n")
        .map(|(_, j)| j.trim_end().trim_end_matches("```"))
        .unwrap_or(&text);
    let oracle: Value = serde_json::from_str(json_text).unwrap();
    fn walk(o: &Value, ours: &Value, at: &str, skip: &[(&str, &str)], bad: &mut Vec<String>) {
        if skip
            .iter()
            .any(|(p, _)| at == *p || at.starts_with(&format!("{p}/")))
        {
            return;
        }
        match (o, ours) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    match b.get(k) {
                        Some(w) => walk(v, w, &format!("{at}/{k}"), skip, bad),
                        None => bad.push(format!("{at}/{k}: missing")),
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
                for (i, (v, w)) in a.iter().zip(b).enumerate() {
                    walk(v, w, &format!("{at}/{i}"), skip, bad);
                }
            }
            _ if o == ours => {}
            // Integral floats the seed printed as ints (or back) are the same number.
            (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
            _ => bad.push(format!("{at}: seed {o} vs ours {ours}")),
        }
    }
    let mut bad = Vec::new();
    walk(&oracle, ours, "", skip, &mut bad);
    assert!(
        bad.is_empty(),
        "{oracle_file}: differs from the seed:\n{}",
        bad.join("\n")
    );
}

#[test]
fn seed_oracle_trace_tools() {
    let l = logdir!();
    let run = json!({"logdir": l, "run": "testrun"});
    let with = |extra: Value| {
        let mut a = run.clone();
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        a
    };
    assert_matches_oracle(
        &ok("check_kernel_profiling", run.clone()),
        "check_kernel_profiling.json",
        &[(
            "/runtime_counter_sampling",
            "detected from the lines present instead of a constant sentence (§6.3 T8)",
        )],
    );
    assert_matches_oracle(
        &ok("list_kernel_invocations", run.clone()),
        "list_kernel_invocations.json",
        &[],
    );
    assert_matches_oracle(
        &ok("get_llo_utilization", run.clone()),
        "get_llo_utilization.json",
        &[],
    );
    assert_matches_oracle(
        &ok(
            "get_llo_utilization",
            with(json!({"kernel": "matmul_optimized"})),
        ),
        "get_llo_utilization.kernel.json",
        &[],
    );
    assert_matches_oracle(
        &ok(
            "get_kernel_stage_breakdown",
            with(json!({"kernel": "matmul_optimized"})),
        ),
        "get_kernel_stage_breakdown.json",
        &[],
    );
    assert_matches_oracle(
        &ok(
            "get_device_wall_report",
            with(json!({"kernel": "matmul_optimized"})),
        ),
        "get_device_wall_report.json",
        &[],
    );
}

#[test]
fn seed_oracle_dump_tools() {
    let d = jf_dump!();
    let p = json!({"dump_dir": d, "program": PROG});
    let with = |extra: Value| {
        let mut a = p.clone();
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        a
    };
    let dump_dir = ("/dump_dir", "the seed ran with a relative path");
    assert_matches_oracle(
        &ok("list_llo_programs", json!({"dump_dir": d})),
        "list_llo_programs.json",
        &[dump_dir],
    );
    assert_matches_oracle(
        &ok("get_llo_schedule_analysis", p.clone()),
        "get_llo_schedule_analysis.program.json",
        &[],
    );
    assert_matches_oracle(
        &ok("get_llo_static_utilization", p.clone()),
        "get_llo_static_utilization.program.json",
        &[],
    );
    let col0 = "the seed drops column-0 continuation lines (`hlo: …`); we keep them (§2.2)";
    assert_matches_oracle(
        &ok("get_llo_bundles", with(json!({"address_range": "0xa-0xd"}))),
        "get_llo_bundles.address_range.json",
        &[("/bundles/0/text", col0)],
    );
    assert_matches_oracle(
        &ok(
            "get_llo_bundles",
            with(json!({"grep": "dma\\.hbm_to_vmem", "limit": 3})),
        ),
        "get_llo_bundles.grep.json",
        &[
            ("/bundles/0/text", col0),
            ("/bundles/2/text", col0),
            (
                "/total_matched",
                "grep runs over the whole logical bundle, not its first line (§4.9)",
            ),
        ],
    );
    assert_matches_oracle(
        &ok("get_llo_bundles", p.clone()),
        "get_llo_bundles.program.json",
        &[
            (
                "/total_matched",
                "2705 bundles: the seed misses the 3 control-target bundles (§2.2)",
            ),
            (
                "/bundles",
                "the seed's listing lacks 0x1a and glues its text onto 0x19",
            ),
        ],
    );
    let fit = ok("get_llo_fit_summary", json!({"dump_dir": d}));
    assert_matches_oracle(&fit["summary"], "get_llo_fit_summary.txt", &[dump_dir]);
}

#[test]
fn seed_oracle_mosaic_tool() {
    let (Some(m), Some(h)) = (fixture("mosaic_dump"), fixture("hlo_dump")) else {
        return;
    };
    assert_matches_oracle(
        &ok("get_custom_call_mlir", json!({"mosaic_dump_dir": m})),
        "get_custom_call_mlir.json",
        &[],
    );
    assert_matches_oracle(
        &ok(
            "get_custom_call_mlir",
            json!({"kernel": "matmul_optimized", "hlo_dump_dir": h}),
        ),
        "get_custom_call_mlir.hlo_dump.json",
        &[
            (
                "/bytecode_summary/op_counts",
                "true counts from the decoded IR section instead of string-table presence flags; no phantom tpu.wait_dma (§6.4 M1)",
            ),
            ("/note", "names the LIBTPU_INIT_ARGS spelling of the flag"),
        ],
    );
}

#[test]
fn fit_summary_operative_vmem_limit() {
    let d = jf_dump!();
    let r = ok("get_llo_fit_summary", json!({"dump_dir": d}));
    let v = &r["summary"]["vmem"];
    if std::env::var_os("XLA_HLO_DUMP_DIR").is_none() {
        assert!(v["limit_operative_bytes"].is_null());
        assert!(
            v["limit_operative_reason"]
                .as_str()
                .unwrap()
                .contains("--hlo_dump_dir")
        );
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::write(
        t.path().join("module_0001.m.flagfile"),
        "--xla_tpu_scoped_vmem_limit_kib=65536\n",
    )
    .unwrap();
    let r = ok(
        "get_llo_fit_summary",
        json!({"dump_dir": d, "hlo_dump_dir": t.path().display().to_string()}),
    );
    let v = &r["summary"]["vmem"];
    assert_eq!(v["limit_operative_bytes"], json!(64 * 1024 * 1024));
    assert_eq!(v["used_of_operative_pct"], json!(14.2));
    assert_eq!(
        v["used_of_scoped_default_pct"],
        json!(28.3),
        "the seed-compatible field is unchanged"
    );
    let e = err(
        "get_llo_fit_summary",
        json!({"dump_dir": d, "hlo_dump_dir": "/nonexistent/hlo"}),
    );
    assert_eq!(e.kind, ErrorKind::Path);
}

#[test]
fn every_tool_says_what_is_counted_derived_and_inferred() {
    if corpus().is_none() {
        return;
    }
    let c = corpus().unwrap().display().to_string();
    for tool in xprof_plugin_api::sdk::tools(KRATE) {
        for ex in tool.examples() {
            let args: Value =
                serde_json::from_str(&ex.args.to_string().replace("${CORPUS}", &c)).unwrap();
            let r = ok(tool.name(), args);
            let p = r
                .get("provenance")
                .or_else(|| r.get("summary").and_then(|s| s.get("provenance")));
            assert!(p.is_some(), "{} lacks provenance", tool.name());
        }
    }
}

#[test]
fn llo_utilization_explicit_range() {
    let l = logdir!();
    let r = ok(
        "get_llo_utilization",
        json!({"path": l, "start_time_ps": 0, "end_time_ps": 1i64 << 62}),
    );
    let d = tpu0(&r);
    assert_eq!(d["window"], "explicit range");
    assert_eq!(d["units"]["MXU"]["samples"], 294);
    let r = ok(
        "get_llo_utilization",
        json!({"path": l, "start_time_ps": 1, "end_time_ps": 2}),
    );
    assert_eq!(tpu0(&r)["note"], "no _counters_ samples in window");
}

#[test]
fn list_kernel_invocations_caps_spans_and_filters_by_regex() {
    let l = logdir!();
    let r = ok(
        "list_kernel_invocations",
        json!({"path": l, "max_spans": 1}),
    );
    let k = &tpu0(&r)[0];
    assert_eq!(k["spans_ps"].as_array().unwrap().len(), 1);
    assert_eq!(k["spans_truncated"], 2);
    let r = ok(
        "list_kernel_invocations",
        json!({"path": l, "kernel_regex": "^nothing$"}),
    );
    assert_eq!(r["kernels"], json!([]));
    assert!(
        r["note"]
            .as_str()
            .unwrap()
            .contains("check_kernel_profiling")
    );
}

#[test]
fn llo_utilization_dump_join_failures() {
    let l = logdir!();
    let e = err(
        "get_llo_utilization",
        json!({"path": l, "dump_dir": "/nonexistent/jf"}),
    );
    assert_eq!(e.kind, ErrorKind::Path);
    let t = tempfile::tempdir().unwrap();
    let r = ok(
        "get_llo_utilization",
        json!({"path": l, "dump_dir": t.path().display().to_string()}),
    );
    assert_eq!(r["decomposition"]["status"], "no_join");
    assert!(
        r["decomposition"]["reason"]
            .as_str()
            .unwrap()
            .contains("--xla_jf_dump_to")
    );
    assert!(
        tpu0(&r)["units"]["MXU"].is_object(),
        "the measurement still answers"
    );
}
