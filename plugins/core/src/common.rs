//! Glue shared by the core tools: capture selection and error mapping.

use xprof_capture::Session;
use xprof_plugin_api::{Call, ToolError};
pub use xprof_plugin_support::capture_error;

use xprof_capture::HostFile;
use xprof_opstats::OpStats;
use xprof_opstats::load::LoadError;

pub use xprof_plugin_support::session;

/// A library load error as a tool error (kind and hint from the library).
pub fn load_error(e: LoadError) -> ToolError {
    xprof_plugin_support::lib_error(e.kind(), &e, Some(e.hint().to_string()))
}

/// The XSpace files a call reads: `--host` picks one, else all hosts of the run.
pub fn selected_hosts<'a>(call: &Call, s: &'a Session) -> Result<Vec<&'a HostFile>, ToolError> {
    let host = call.opt_nonempty("host")?;
    s.select_hosts(host.as_deref()).map_err(capture_error)
}

/// Build OpStats for the selected hosts (combined when several), recording every file read.
/// Returns the stats, the hosts used and warnings for the capture block.
pub fn op_stats<'a>(
    call: &mut Call,
    s: &'a Session,
) -> Result<(OpStats, Vec<&'a HostFile>, Vec<String>), ToolError> {
    op_stats_with(call, s, xprof_opstats::BuildOptions::default())
}

/// [`op_stats`] building only what a tool reads (`xprof_opstats::BuildOptions`): op-table
/// tools (hlo_stats, top ops, op_profile, device information, profile summary, reshapes) take
/// `OP_DATABASES`, which skips the step database and the host framework ops and loads only the
/// host threads' XLA ops (a CPU capture's conversion, mostly); the step trace and the roofline
/// (its `Average` set and diagnostics read the steps) take `STEPS_AND_OP_DATABASES`. The
/// overview and what reads the host framework ops take everything ([`op_stats`]).
pub fn op_stats_with<'a>(
    call: &mut Call,
    s: &'a Session,
    opts: xprof_opstats::BuildOptions,
) -> Result<(OpStats, Vec<&'a HostFile>, Vec<String>), ToolError> {
    op_stats_visiting(call, s, opts, |_| {})
}

/// [`op_stats_with`], showing each host's model to `visit` before it is dropped.
pub fn op_stats_visiting<'a>(
    call: &mut Call,
    s: &'a Session,
    opts: xprof_opstats::BuildOptions,
    mut visit: impl FnMut(&xprof_opstats::model::HostSpace),
) -> Result<(OpStats, Vec<&'a HostFile>, Vec<String>), ToolError> {
    let hosts = selected_hosts(call, s)?;
    for h in &hosts {
        call.read_file(&h.path);
    }
    for f in &s.hlo_protos {
        call.read_file(f);
    }
    // One host's model at a time: a host's op statistics are small, its model is not, and a
    // pod's run has a file per host.
    let mut per_host = Vec::new();
    let mut warnings = Vec::new();
    let one_shot = xprof_plugin_support::is_cli_call(call);
    for (i, h) in hosts.iter().enumerate() {
        let (space, w) = xprof_opstats::load::load_host_with(
            &h.name,
            &h.path,
            &s.hlo_protos,
            opts.host_events(),
        )
        .map_err(load_error)?;
        warnings.extend(w);
        visit(&space);
        per_host.push(xprof_opstats::build_with(&space, opts));
        // The last model of a one-shot CLI call is left to process exit, which returns its
        // memory whole: running its destructors (millions of events, most freed across
        // threads) was ~8 ms at the end of jax-large's ~150 ms overview. Earlier hosts' models
        // are freed, for the next one to reuse the memory.
        if one_shot && i + 1 == hosts.len() {
            std::mem::forget(space);
        }
    }
    warnings.dedup();
    let stats =
        xprof_opstats::combine(per_host).ok_or_else(|| ToolError::internal("no host selected"))?;
    Ok((stats, hosts, warnings))
}

/// Put the capture header ([`CaptureHeader`]) first in `body`.
pub fn with_capture(
    s: &Session,
    used: &[&HostFile],
    warnings: &[String],
    body: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    let CaptureHeader { capture, run } = CaptureHeader::new(s, used, warnings);
    let mut m = serde_json::Map::new();
    m.insert("capture".into(), capture);
    m.insert("run".into(), serde_json::Value::from(run));
    m.extend(body);
    serde_json::Value::Object(m)
}

/// The fields every capture tool's result starts with: `#[serde(flatten)]` it first in a
/// result serialised from the tool's own types ([`xprof_plugin_api::ToolOutput::serialize`]);
/// [`with_capture`] puts the same fields first in a value.
#[derive(serde::Serialize)]
pub struct CaptureHeader {
    capture: serde_json::Value,
    run: String,
}

impl CaptureHeader {
    pub fn new(s: &Session, used: &[&HostFile], warnings: &[String]) -> Self {
        CaptureHeader {
            capture: s.capture_block(used, warnings),
            run: s.run.clone(),
        }
    }
}

/// Serialise a 64-bit id as a JSON string (ids do not fit a double).
pub fn id_string<S: serde::Serializer>(id: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

/// Flags that capture device op traces, for "no data" answers.
pub const DEVICE_TRACE_FLAGS: &[&str] = &[
    "jax.profiler.trace(...) around device work (device tracer on)",
    "ProfileOptions.device_tracer_level=1",
];

/// What makes a TensorFlow CPU program's ops XLA ops, for "no data" answers.
const TF_XLA_FLAGS: &[&str] = &[
    "tf.function(jit_compile=True) on the step (XLA ops, run by the CPU backend)",
    "tf.profiler.experimental.start(logdir) on a TPU or GPU (device tracer on)",
];

/// The "no data" answer of an XLA op view ([`no_op_reason`]).
pub fn no_op_data(call: &mut Call, s: &Session, st: &OpStats) -> xprof_plugin_api::ToolOutput {
    let (reason, flags) = no_op_reason(call, s, st);
    xprof_plugin_api::ToolOutput::no_data(reason, flags)
}

/// Why a capture has no XLA op view ([`xprof_opstats::views::no_op_reason`]), and the capture
/// flags that would give it one. The op views build no host framework ops; only here, with
/// nothing else to show, are they built on a CPU capture, to point a TensorFlow capture at
/// its framework ops.
pub fn no_op_reason(
    call: &mut Call,
    s: &Session,
    st: &OpStats,
) -> (String, &'static [&'static str]) {
    use xprof_opstats::opstats::HardwareType;
    let full;
    let mut st = st;
    if st.run_env.hardware_type == HardwareType::CpuOnly && st.host_db.metrics.is_empty() {
        let opts = xprof_opstats::BuildOptions {
            steps: false,
            host_framework_ops: true,
        };
        if let Ok((built, _, _)) = op_stats_with(call, s, opts) {
            full = built;
            st = &full;
        }
    }
    let tf_ops = st.run_env.hardware_type == HardwareType::CpuOnly
        && st.host_db.metrics.iter().any(|m| !m.is_idle());
    let flags = if tf_ops {
        TF_XLA_FLAGS
    } else {
        DEVICE_TRACE_FLAGS
    };
    (xprof_opstats::views::no_op_reason(st), flags)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    const KRATE: &str = env!("CARGO_CRATE_NAME");

    /// The capture tools this plugin implements on top of the op-stats engine.
    const TOOLS: &[&str] = &[
        "get_overview",
        "get_kpi_metrics",
        "get_device_information",
        "get_profile_summary",
        "get_top_hlo_ops",
        "get_op_profile",
        "get_hlo_stats",
        "get_roofline_model",
        "get_step_trace",
        "list_xplane_events",
        "aggregate_xplane_events",
        "list_xplane_lines",
        "inspect_capture",
    ];

    fn call(tool: &str, args: Value) -> Result<Value, xprof_plugin_api::ToolError> {
        invoke_json(KRATE, tool, &args.to_string(), "{}").map(|env| env["result"].clone())
    }

    /// Every run directory under the repository's fixtures and the shared corpus.
    fn run_dirs() -> Vec<PathBuf> {
        testing::run_dirs(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn every_tool_answers_on_every_fixture_and_puts_the_capture_block_first() {
        let dirs = run_dirs();
        assert!(!dirs.is_empty(), "no fixture captures found");
        for dir in &dirs {
            for tool in TOOLS {
                let r = call(tool, json!({"path": dir.display().to_string()}))
                    .unwrap_or_else(|e| panic!("{tool} on {}: {e}", dir.display()));
                let obj = r.as_object().unwrap();
                if obj.get("status").and_then(Value::as_str) == Some("no_data") {
                    assert!(obj["reason"].as_str().is_some_and(|s| !s.is_empty()));
                    continue;
                }
                assert_eq!(
                    obj.keys().next().map(String::as_str),
                    Some("capture"),
                    "{tool}"
                );
                assert!(!r["capture"]["files_used"].as_array().unwrap().is_empty());
            }
        }
    }

    fn scratch(name: &str, xplane: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("plugins/profile").join(name);
        std::fs::create_dir_all(&run).unwrap();
        if !xplane.is_empty() || name == "empty" {
            std::fs::write(run.join("host0.xplane.pb"), xplane).unwrap();
        }
        (t, run)
    }

    /// The error's class and message; errors raised by this plugin must carry a hint.
    fn kind(r: Result<Value, xprof_plugin_api::ToolError>) -> (&'static str, String) {
        let e = r.expect_err("expected an error");
        assert!(
            e.hint.as_deref().is_some_and(|h| !h.is_empty()),
            "{e:?} has no hint"
        );
        (e.kind.as_str(), e.message)
    }

    /// Argument-validation errors raised by the SDK (no hint there yet).
    fn sdk_kind(r: Result<Value, xprof_plugin_api::ToolError>) -> &'static str {
        r.expect_err("expected an error").kind.as_str()
    }

    #[test]
    fn bad_inputs_give_the_right_error_classes() {
        // Empty and corrupt XSpace: invalid value (exit 4), naming the file.
        let (_t, run) = scratch("empty", b"");
        let (k, m) = kind(call(
            "get_overview",
            json!({"path": run.display().to_string()}),
        ));
        assert_eq!(k, "invalid_value");
        assert!(m.contains("host0.xplane.pb"));
        let (_t2, run2) = scratch("corrupt", &[0xff, 0xff, 0xff, 0xff, 0x0f]);
        let (k, _) = kind(call(
            "get_hlo_stats",
            json!({"path": run2.display().to_string()}),
        ));
        assert_eq!(k, "invalid_value");
        // A run directory without a capture: path error (exit 3).
        let (_t3, run3) = scratch("nocap", b"");
        let (k, _) = kind(call(
            "get_top_hlo_ops",
            json!({"path": run3.display().to_string()}),
        ));
        assert_eq!(k, "path");
        // Missing path, unknown host, bad regex, bad argument value.
        let (k, _) = kind(call(
            "get_roofline_model",
            json!({"path": "/nonexistent/xprof/capture"}),
        ));
        assert_eq!(k, "path");
        let fixtures =
            testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures/jax-cpu/logdir");
        let p = fixtures.display().to_string();
        let (k, m) = kind(call(
            "get_overview",
            json!({"path": p, "run": "matmul", "host": "nohost"}),
        ));
        assert!(m.contains("nohost"), "{m}");
        assert_ne!(k, "internal");
        let (k, _) = kind(call(
            "list_xplane_events",
            json!({"path": p, "run": "matmul", "event_regex": "("}),
        ));
        assert_eq!(k, "invalid_value");
        let k = sdk_kind(call(
            "get_hlo_stats",
            json!({"path": p, "run": "matmul", "limit": -1}),
        ));
        assert_eq!(k, "invalid_value");
        let k = sdk_kind(call(
            "get_op_profile",
            json!({"path": p, "run": "matmul", "group_by": "module"}),
        ));
        assert_eq!(k, "invalid_value");
        // Binary XSpace is never printed; writing into the run directory is refused.
        let (k, _) = kind(call(
            "get_xspace_proto",
            json!({"path": p, "run": "matmul"}),
        ));
        assert_eq!(k, "usage");
        let inside = fixtures.join("plugins/profile/matmul/copy.pb");
        let (k, _) = kind(call(
            "get_xspace_proto",
            json!({"path": p, "run": "matmul", "output_path": inside.display().to_string()}),
        ));
        assert_eq!(k, "usage");
        assert!(!inside.exists());
    }

    #[test]
    fn op_views_of_a_tensorflow_capture_without_xla_point_at_its_framework_ops() {
        let run = testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/tf-cpu/logdir/plugins/profile/tf_train_loop");
        for tool in ["get_top_hlo_ops", "get_hlo_stats", "get_op_profile"] {
            let r = call(tool, json!({"path": run.display().to_string()})).unwrap();
            assert_eq!(r["status"], "no_data", "{tool}");
            let reason = r["reason"].as_str().unwrap();
            assert!(
                reason.contains("get_framework_op_stats"),
                "{tool}: {reason}"
            );
            assert!(
                r["capture_flags"][0]
                    .as_str()
                    .unwrap()
                    .contains("jit_compile=True")
            );
        }
    }

    #[test]
    fn nothing_is_written_into_run_directories() {
        let root = testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/jax-cpu/logdir/plugins/profile");
        let listing = |d: &Path| {
            let mut v: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            v.sort();
            v
        };
        let before: Vec<_> = ["matmul", "mlp_steps"]
            .iter()
            .map(|r| listing(&root.join(r)))
            .collect();
        for tool in TOOLS {
            for run in ["matmul", "mlp_steps"] {
                let _ = call(tool, json!({"path": root.join(run).display().to_string()}));
            }
        }
        let after: Vec<_> = ["matmul", "mlp_steps"]
            .iter()
            .map(|r| listing(&root.join(r)))
            .collect();
        assert_eq!(before, after);
    }

    #[test]
    fn xspace_export_writes_outside_the_run_and_round_trips() {
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("copy.xplane.pb");
        let fixtures =
            testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures/jax-cpu/logdir");
        let r = call(
            "get_xspace_proto",
            json!({"path": fixtures.display().to_string(), "run": "matmul", "output_path": out.display().to_string()}),
        )
        .unwrap();
        let src = std::fs::read(fixtures.join("plugins/profile/matmul/host0.xplane.pb")).unwrap();
        assert_eq!(r["bytes"], src.len());
        assert_eq!(std::fs::read(&out).unwrap(), src);
    }

    #[test]
    fn event_tools_filter_by_window_and_page() {
        let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let p = c.join("fixtures/seed-v6e/logdir").display().to_string();
        // 3 XLA Ops events on the device clock start at 81311052656, 81629481406, 81842152578 ps.
        let r = call(
            "list_xplane_events",
            json!({"path": p, "plane_regex": "TPU", "line_regex": "^XLA Ops$", "start_time_ps": 81629481406i64, "max_events": 1}),
        )
        .unwrap();
        assert_eq!(r["total_matched"], 2);
        assert_eq!(r["events"][0]["start_ps"], 81629481406i64);
        assert_eq!(r["truncated"], true);
        let r = call(
            "aggregate_xplane_events",
            json!({"path": p, "plane_regex": "TPU", "event_regex": "matmul"}),
        )
        .unwrap();
        assert_eq!(r["total_event_types"], 2);
        let total: i64 = r["aggregates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["total_duration_ps"].as_i64().unwrap())
            .sum();
        // Plain durations: modules 227277344 + ops 227262500.
        assert_eq!(total, 227277344 + 227262500);
        // Overlap vs containment: a window inside the 2nd op only overlaps it.
        let w = json!({"path": p, "plane_regex": "TPU", "line_regex": "^XLA Ops$",
                       "start_time_ps": 81629481406i64 + 10, "end_time_ps": 81629481406i64 + 20});
        assert_eq!(
            call("list_xplane_events", w.clone()).unwrap()["total_matched"],
            0
        );
        let mut o = w;
        o["window_semantics"] = json!("overlap");
        assert_eq!(call("list_xplane_events", o).unwrap()["total_matched"], 1);
        let g = call(
            "aggregate_xplane_events",
            json!({"path": p, "plane_regex": "TPU", "group_by": "line"}),
        )
        .unwrap();
        let lines: Vec<&str> = g["aggregates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["line"].as_str().unwrap())
            .collect();
        assert!(lines.contains(&"XLA Ops") && lines.contains(&"XLA Modules"));
        assert!(g["aggregates"][0].get("event").is_none());
    }

    #[test]
    fn kpis_on_the_shared_tpu_capture() {
        let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let p = c.join("fixtures/seed-v6e/logdir").display().to_string();
        let r = call("get_kpi_metrics", json!({"path": p})).unwrap();
        assert_eq!(r["duty_cycle_percent"], "37.4%");
        // XProf prints "0.00" (no steps): a placeholder.
        assert!(r["step_time_ms"].is_null() && r["step_time_ms_reason"].is_string());
        // Peak of the allocator events: 65536 reserved + 51267584 allocated.
        assert_eq!(r["peak_memory_bytes"], 51333120);
        assert_eq!(r["peak_hbm_gib"], 0.05);
        assert_eq!(r["device"]["device_type"], "TPU v6 Lite");
        // CPU capture without allocator events: unknown, not 0.
        let f = testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures/jax-cpu/logdir");
        let r = call(
            "get_kpi_metrics",
            json!({"path": f.display().to_string(), "run": "matmul"}),
        )
        .unwrap();
        assert!(r["peak_hbm_gib"].is_null() && r["peak_hbm_gib_reason"].is_string());
    }

    #[test]
    fn step_trace_summary_matches_the_official_cli_on_our_capture() {
        let root = testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let p = root.join("jax-cpu/logdir").display().to_string();
        let r = call("get_step_trace", json!({"path": p, "run": "mlp_steps"})).unwrap();
        let cli: Value = serde_json::from_str(
            &std::fs::read_to_string(root.join("oracle/mlp_steps/cli/get_step_trace.json"))
                .unwrap(),
        )
        .unwrap();
        let (ours, theirs) = (&r["summary"], &cli["summary"]);
        assert_eq!(ours["total_steps"], theirs["total_steps"]);
        // The CLI rounds to 4 decimals.
        for k in [
            "step_time_ms_average",
            "step_time_ms_min",
            "step_time_ms_max",
            "step_time_ms_stddev",
        ] {
            let (a, b) = (ours[k].as_f64().unwrap(), theirs[k].as_f64().unwrap());
            assert!((a - b).abs() < 5e-5, "{k}: {a} vs {b}");
        }
        let names: Vec<&Value> = r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| &s["name"])
            .collect();
        let cli_names: Vec<&Value> = cli["step_breakdown"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| &s["step_num"])
            .collect();
        assert_eq!(names, cli_names);
    }

    #[test]
    fn capture_inventory_matches_the_official_cli() {
        let root = testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let mut cases = vec![(
            root.join("jax-cpu/logdir/plugins/profile/mlp_steps"),
            root.join("oracle/mlp_steps/cli/list_xplane_lines.json"),
        )];
        if let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) {
            cases.push((
                c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun"),
                c.join("oracle/official-cli-2.24.2/seed-v6e/inspect_capture.json"),
            ));
        }
        for (run, oracle) in cases {
            let r = call(
                "inspect_capture",
                json!({"path": run.display().to_string()}),
            )
            .unwrap();
            let o: Value =
                serde_json::from_str(&std::fs::read_to_string(&oracle).unwrap()).unwrap();
            type Inventory = Vec<(String, Vec<(String, u64)>, u64)>;
            let strip = |v: &Value| -> Inventory {
                v["planes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        (
                            p["name"].as_str().unwrap().to_string(),
                            p["lines"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|l| {
                                    (
                                        l["name"].as_str().unwrap().to_string(),
                                        l["event_count"].as_u64().unwrap(),
                                    )
                                })
                                .collect(),
                            p["total_events"].as_u64().unwrap(),
                        )
                    })
                    .collect()
            };
            assert_eq!(strip(&r), strip(&o), "{}", run.display());
            for k in [
                "capture_valid_for_device_analysis",
                "capture_valid_for_llo_analysis",
                "capture_valid_for_counter_sampling",
            ] {
                assert_eq!(r[k], o[k], "{k} on {}", run.display());
            }
        }
    }
}
