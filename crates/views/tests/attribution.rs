//! Device-time attribution (`xprof_views::attribution`) against XProf's agent CLI on a
//! synthetic run with every case its method distinguishes.

use std::path::Path;

use serde_json::{Value, json};
use xprof_views::attribution::{AttributionOptions, device_time_attribution};
use xprof_views::load::XSpace;

fn run() -> Vec<(String, XSpace)> {
    let b = xprof_testkit::attribution::attribution_host();
    vec![("host0".into(), XSpace::from_bytes(b.to_bytes()).unwrap())]
}

fn oracle() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/synthetic-attribution/get_device_time_attribution.json"),
        )
        .unwrap(),
    )
    .unwrap()
}

/// XProf 2.24.2's `xprof get_device_time_attribution` on `xprof_testkit::attribution`'s run,
/// every field. By hand (ns): the kernel union is [5,500) ∪ [505,700) ∪ [705,1005) ∪
/// [2100,2400) ∪ [2500,2700) = 1490 — the TPU's and the GPU's kernels on one time axis, as
/// XProf's tool takes them; the custom call [800,900) and the Pallas kernel [2500,2700) are
/// 300 of it (20.13 %); fusion.2 inside the while is not outermost, so the outermost total is
/// 1.9221 µs; `fusion.5`'s `tf_op_name` is a metadata stat, which the tool does not read.
#[test]
fn equals_xprofs_agent_cli_field_by_field() {
    let got = Value::Object(
        device_time_attribution(
            &run(),
            &AttributionOptions {
                limit: 10,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let want = oracle();
    for (k, v) in want.as_object().unwrap() {
        if k == "capture" {
            continue;
        }
        assert_eq!(&got[k], v, "{k}");
    }
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(&got["by_line_duration_ns"]),
        keys(&want["by_line_duration_ns"])
    );
}

#[test]
fn limits_names_matchers_and_regions() {
    let raw = run();
    let opts = AttributionOptions {
        limit: 2,
        ..Default::default()
    };
    let got = device_time_attribution(&raw, &opts).unwrap();
    assert_eq!(got["returned_records"], json!(2));
    assert_eq!(got["truncated"], json!(true));
    assert_eq!(got["total_records"], json!(8));
    // One kernel by name: all its occurrences, and the limit does not apply.
    let opts = AttributionOptions {
        limit: 1,
        kernel_name: Some("%fusion.2 = f32[8] fusion(x)".into()),
        ..Default::default()
    };
    let got = device_time_attribution(&raw, &opts).unwrap();
    assert_eq!(got["kernel_records"][0]["execution_count"], json!(3));
    // The while is filtered out before it can cover its body (as in XProf's tool), so all
    // three are outermost: 0.1 + 0.1004 + 0.3 µs.
    assert_eq!(got["total_duration_us_all_records"], json!(0.5004));
    // Matchers: a regex, or a literal substring.
    let opts = AttributionOptions::default().with_matchers(&["^gemm".into(), "jit(step)".into()]);
    let got = device_time_attribution(&raw, &opts).unwrap();
    let names: Vec<&str> = got["kernel_records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kernel_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gemm_kernel", "jit(step)/mul"]);
    // Regions, when asked for, are listed and tagged, and add to no total.
    let opts = AttributionOptions {
        include_intra_kernel_regions: true,
        ..Default::default()
    };
    let got = device_time_attribution(&raw, &opts).unwrap();
    let region = got["kernel_records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kernel_name"] == "llo_region")
        .unwrap();
    assert_eq!(region["is_intra_kernel_region"], json!(true));
    assert_eq!(got["top_level_records"], json!(8));
    assert_eq!(got["total_device_duration_ns"], json!(1490));
    assert!(got.get("excluded_intra_kernel_region_lines").is_none());
    // A name nothing has: no attribution.
    let opts = AttributionOptions {
        kernel_name: Some("nope".into()),
        ..Default::default()
    };
    assert!(device_time_attribution(&raw, &opts).is_none());
}

/// Without XLA Modules steps there is no step mean: null with a reason, where XProf's tool
/// prints the total device time.
#[test]
fn no_steps_no_step_mean() {
    let b = xprof_testkit::XSpaceBuilder::new().plane("/device:GPU:0", |p| {
        p.line("Stream #1", |l| l.event("k", 0, 5000))
    });
    let raw = vec![("h".to_string(), XSpace::from_bytes(b.to_bytes()).unwrap())];
    let got = device_time_attribution(&raw, &AttributionOptions::default()).unwrap();
    assert_eq!(got["stats"]["mean_us"], Value::Null);
    assert!(got["stats"]["mean_us_reason"].is_string());
    assert_eq!(got["total_device_duration_ns"], json!(5));
}
