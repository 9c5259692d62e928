use serde_json::{Map, Value, json};
use xprof_capture::{HostFile, Session};
use xprof_plugin_api::{
    Call, ErrorKind, Example, Params, Tool, ToolError, ToolOutput, register_tool,
};
use xprof_views::LoadedRun;
use xprof_views::load::ViewLoadError;

use crate::common::{selected_hosts, session, with_capture};

pub struct GetPodViewer;
register_tool!(GetPodViewer);

/// Flags that record step markers, for "no steps" answers.
pub(super) const STEP_FLAGS: &[&str] = &[
    "wrap each training step in jax.profiler.StepTraceAnnotation(\"train\", step_num=i) (PyTorch/XLA: xp.StepTrace; TF: tf.profiler.experimental.Trace(\"train\", step_num=i))",
    "profile several whole steps",
];

/// A views load error as a tool error (kind and hint from the library).
pub(super) fn views_error(e: ViewLoadError) -> ToolError {
    ToolError::new(ErrorKind::parse(e.kind()), e.to_string()).with_hint(e.hint())
}

/// The selected hosts (`--host`, else all) loaded into the engine's model; every file read is
/// recorded.
pub(super) fn load_run<'a>(
    call: &mut Call,
    s: &'a Session,
) -> Result<(LoadedRun, Vec<&'a HostFile>), ToolError> {
    let hosts = selected_hosts(call, s)?;
    for h in &hosts {
        call.read_file(&h.path);
    }
    for f in &s.hlo_protos {
        call.read_file(f);
    }
    let list: Vec<(String, std::path::PathBuf)> = hosts
        .iter()
        .map(|h| (h.name.clone(), h.path.clone()))
        .collect();
    let run = xprof_views::load::load_hosts(&list, &s.hlo_protos).map_err(views_error)?;
    Ok((run, hosts))
}

/// Hosts opened with the zero-copy reader: (host name, capture).
pub(super) type RawHosts = Vec<(String, xprof_views::load::XSpace)>;

/// The selected hosts opened with the zero-copy reader (only the planes `planes` accepts),
/// without the engine's model.
pub(super) fn load_raw<'a>(
    call: &mut Call,
    s: &'a Session,
    planes: fn(&str) -> bool,
) -> Result<(RawHosts, Vec<&'a HostFile>), ToolError> {
    let hosts = selected_hosts(call, s)?;
    for h in &hosts {
        call.read_file(&h.path);
    }
    let list: Vec<(String, std::path::PathBuf)> = hosts
        .iter()
        .map(|h| (h.name.clone(), h.path.clone()))
        .collect();
    let raw = xprof_views::load::load_raw(&list, planes).map_err(views_error)?;
    Ok((raw, hosts))
}

/// A "no data" answer that still carries the capture block and XProf's (empty) payload.
pub(super) fn no_data_with(
    s: &Session,
    used: &[&HostFile],
    warnings: &[String],
    reason: &str,
    flags: &[&str],
    body: Map<String, Value>,
) -> ToolOutput {
    let nd = ToolOutput::no_data(reason, flags);
    let mut m = Map::new();
    if let Value::Object(o) = nd.into_value() {
        m.extend(o);
    }
    m.extend(body);
    with_capture(s, used, warnings, m).into()
}

impl Tool for GetPodViewer {
    fn name(&self) -> &'static str {
        "get_pod_viewer"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["pod_viewer"]
    }
    fn summary(&self) -> &'static str {
        "Per-step, per-core step-time breakdown and bottleneck (XProf pod_viewer)"
    }
    fn doc(&self) -> &'static str {
        "XProf's pod viewer from the raw XSpace of all hosts (or --host): for every step and every \
         core, the step time (us, exact ps beside it) split into XProf's nine generic components \
         (Device compute, Device to device, Device collective communication, Host compute, Kernel \
         launch, Input, Output, Compilation, All others) and the largest of them as `bottleneck`. \
         On TPU the components come from the step's HLO-category times as XProf maps them \
         (collectives: all-reduce, all-reduce fusion, all-to-all; device to device: send/recv, \
         megacore fusion, async-done; input: infeed, host recv; output: outfeed, host send; \
         idle: All others; the rest: device compute). Exact ps in `stepBreakdownPs`. Cores of \
         several hosts are keyed `host index × 1000 + core`, steps numbered 0, 1, … over the \
         steps every host ran (matched by time, as XProf does). Without step markers the answer is \
         `no_data` (XProf's empty pod viewer is still included)."
    }
    fn params(&self) -> Params {
        Params::new().capture().host()
    }
    fn output(&self) -> &'static str {
        "{capture, run, pod_viewer: {podStatsSequence: {podStatsMap: [{stepNum, podStatsPerCore: {core: {hostName, stepNum, totalDurationUs, totalDurationPs, bottleneck, stepBreakdownUs}}}]}, diagnostics, stepBreakdownEvents, deviceType}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Per-step breakdown of the bundled 5-step MLP capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps"}),
            )
            .expect(&["pod_viewer"]),
            Example::new(
                "The shared TPU capture has no step markers: no_data with XProf's empty viewer",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["status", "pod_viewer"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let (run, used) = load_run(call, &s)?;
        let (st, empty_intersect) = run
            .op_stats_checked()
            .ok_or_else(|| ToolError::internal("no host selected"))?;
        let pv = xprof_views::pod::pod_viewer_with(&st, &run.core_details(), empty_intersect);
        let mut body = Map::new();
        body.insert("pod_viewer".into(), pv);
        if st.steps.steps.is_empty() {
            return Ok(no_data_with(
                &s,
                &used,
                &run.warnings,
                if empty_intersect {
                    "the hosts have steps, but no step number is common to all of them (empty step intersection); pass --host to see one host's steps"
                } else {
                    "no step markers: no `Steps` line on the device planes, no `group_id` stats and no host step roots (`_r`)"
                },
                STEP_FLAGS,
                body,
            ));
        }
        Ok(with_capture(&s, &used, &run.warnings, body).into())
    }
}

#[cfg(test)]
mod views_tool_tests {
    //! The communication, host-side, framework, kernel and counter tools end to end through the
    //! SDK: error classes, "no data" on captures that lack what each view reads, and non-empty
    //! answers on synthetic captures that have it.

    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};
    use xprof_testkit::{Ref, XSpaceBuilder};

    const TOOLS: &[&str] = &[
        "get_pod_viewer",
        "get_megascale_stats",
        "get_input_pipeline",
        "check_host_boundness",
        "get_framework_op_stats",
        "get_utilization_viewer",
        "get_perf_counters",
        "get_kernel_stats",
        "get_smart_suggestions",
    ];

    fn call(tool: &str, args: Value) -> Result<Value, xprof_plugin_api::ToolError> {
        invoke_json(env!("CARGO_CRATE_NAME"), tool, &args.to_string(), "{}")
            .map(|env| env["result"].clone())
    }

    fn run_with(bytes: &[u8]) -> (tempfile::TempDir, String) {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("plugins/profile/r1");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("host0.xplane.pb"), bytes).unwrap();
        let p = run.display().to_string();
        (t, p)
    }

    fn fixtures() -> String {
        testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/jax-cpu/logdir")
            .display()
            .to_string()
    }

    /// Every run directory under the repository's fixtures and the shared corpus.
    fn run_dirs() -> Vec<std::path::PathBuf> {
        testing::run_dirs(env!("CARGO_MANIFEST_DIR"))
    }

    fn listing(d: &std::path::Path) -> Vec<(std::ffi::OsString, u64)> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| (e.file_name(), e.metadata().map(|m| m.len()).unwrap_or(0)))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn every_view_answers_on_every_fixture_and_writes_nothing() {
        let dirs = run_dirs();
        assert!(dirs.len() >= 2, "fixtures missing: {dirs:?}");
        let before: Vec<_> = dirs.iter().map(|d| listing(d)).collect();
        for dir in &dirs {
            for tool in TOOLS {
                let r = call(tool, json!({"path": dir.display().to_string()}))
                    .unwrap_or_else(|e| panic!("{tool} on {}: {e}", dir.display()));
                let obj = r.as_object().unwrap();
                assert_eq!(
                    obj.keys().next().map(String::as_str),
                    Some("capture"),
                    "{tool}"
                );
                assert!(
                    !r["capture"]["files_used"].as_array().unwrap().is_empty(),
                    "{tool}"
                );
                if r["status"] == json!("no_data") {
                    assert!(
                        r["reason"].as_str().is_some_and(|s| !s.is_empty()),
                        "{tool}"
                    );
                }
            }
        }
        let after: Vec<_> = dirs.iter().map(|d| listing(d)).collect();
        assert_eq!(before, after, "a tool wrote into a run directory");
    }

    #[test]
    fn bad_inputs_give_the_convention_error_classes() {
        let (_e, empty) = run_with(b"");
        let (_c, corrupt) = run_with(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        for tool in TOOLS {
            let e = call(tool, json!({"path": empty})).expect_err(tool);
            assert_eq!(e.kind.as_str(), "invalid_value", "{tool}: {e:?}");
            assert!(
                e.message.contains("host0.xplane.pb"),
                "{tool}: {}",
                e.message
            );
            assert!(e.hint.as_deref().is_some_and(|h| !h.is_empty()), "{tool}");
            let e = call(tool, json!({"path": corrupt})).expect_err(tool);
            assert_eq!(e.kind.as_str(), "invalid_value", "{tool}: {e:?}");
            let e = call(tool, json!({"path": "/nonexistent/xprof/run"})).expect_err(tool);
            assert_eq!(e.kind.as_str(), "path", "{tool}");
            let e = call(
                tool,
                json!({"path": fixtures(), "run": "matmul", "host": "nohost"}),
            )
            .expect_err(tool);
            assert!(e.message.contains("nohost"), "{tool}: {}", e.message);
            assert_ne!(e.kind.as_str(), "internal", "{tool}");
        }
        for tool in [
            "get_input_pipeline",
            "get_kernel_stats",
            "get_perf_counters",
        ] {
            let e = call(
                tool,
                json!({"path": fixtures(), "run": "matmul", "limit": -1}),
            )
            .expect_err(tool);
            assert_eq!(e.kind.as_str(), "invalid_value", "{tool}");
        }
    }

    #[test]
    fn no_data_names_what_the_capture_lacks() {
        let Some(corpus) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let seed = corpus
            .join("fixtures/seed-v6e/logdir")
            .display()
            .to_string();
        for (tool, needle) in [
            ("get_pod_viewer", "step markers"),
            ("get_kernel_stats", "GPU"),
            ("get_perf_counters", "silently unavailable"),
            ("get_utilization_viewer", "device_id"),
            ("get_megascale_stats", "MegaScale:"),
        ] {
            let r = call(tool, json!({"path": seed})).unwrap();
            assert_eq!(r["status"], json!("no_data"), "{tool}");
            assert!(
                r["reason"].as_str().unwrap().contains(needle),
                "{tool}: {}",
                r["reason"]
            );
            assert!(
                r["capture_flags"].as_array().is_some_and(|a| !a.is_empty()),
                "{tool}"
            );
            // The capture block still comes first.
            assert_eq!(
                r.as_object().unwrap().keys().next().unwrap(),
                "capture",
                "{tool}"
            );
        }
        // XProf's (empty) pod viewer is kept beside the no_data answer.
        let r = call("get_pod_viewer", json!({"path": seed})).unwrap();
        assert_eq!(
            r["pod_viewer"]["podStatsSequence"]["podStatsMap"],
            json!([])
        );
        // The TPU capture has device framework ops: an answer, not no_data.
        let r = call("get_framework_op_stats", json!({"path": seed})).unwrap();
        assert!(r.get("status").is_none());
        assert_eq!(
            r["table"]["records"][1]["operation"],
            json!("jit(matmul_optimized)/pallas_call")
        );
        // A CPU capture without framework ops or steps: XProf's table has only IDLE rows,
        // and the XLA ops the host ran answer instead.
        let r = call(
            "get_framework_op_stats",
            json!({"path": fixtures(), "run": "matmul"}),
        )
        .unwrap();
        assert!(r.get("status").is_none());
        assert!(
            r["host_executed"]["table"]["records"]
                .as_array()
                .is_some_and(|v| v.iter().any(|x| x["type"] != json!("IDLE")))
        );
        // A host that ran neither XLA nor framework ops: no_data.
        let dir = tempfile::tempdir().unwrap();
        xprof_testkit::XSpaceBuilder::new()
            .plane("/host:CPU", |p| {
                p.line("python", |l| l.event("main", 0, 10))
            })
            .write_run(dir.path(), "r", "host0")
            .unwrap();
        let path = dir.path().display().to_string();
        let r = call("get_framework_op_stats", json!({"path": path})).unwrap();
        assert_eq!(r["status"], json!("no_data"));
        assert!(r.get("host_executed").is_none());
        let r = call(
            "get_input_pipeline",
            json!({"path": fixtures(), "run": "matmul"}),
        )
        .unwrap();
        assert_eq!(r["status"], json!("no_data"));
        let r = call("check_host_boundness", json!({"path": seed})).unwrap();
        assert_eq!(r["status"], json!("INSUFFICIENT_DATA"));
        // XProf's rules fire nothing on the seed (as XProf); ours may, citing measured values.
        let r = call("get_smart_suggestions", json!({"path": seed})).unwrap();
        let all = r["suggestions"].as_array().unwrap();
        assert!(all.iter().all(|s| s["source"] == json!("xprof-rs")));
        // XProf's open-source signals are placeholders: null + reason + our measure.
        let sig = &r["signals"];
        assert!(sig["hbm_utilization_percent"].is_null());
        assert!(sig["hbm_utilization_percent_reason"].is_string());
        assert!(
            sig["mxu_utilization_percent_measured"]
                .as_f64()
                .is_some_and(|v| v > 0.0)
        );
        assert!(
            all.iter()
                .all(|s| s["signals"].as_object().is_some_and(|m| !m.is_empty()))
        );
    }

    #[test]
    fn captures_with_steps_answer() {
        let r = call(
            "get_pod_viewer",
            json!({"path": fixtures(), "run": "mlp_steps"}),
        )
        .unwrap();
        assert!(r.get("status").is_none());
        let steps = r["pod_viewer"]["podStatsSequence"]["podStatsMap"]
            .as_array()
            .unwrap();
        assert!(!steps.is_empty());
        let r = call(
            "get_input_pipeline",
            json!({"path": fixtures(), "run": "mlp_steps"}),
        )
        .unwrap();
        assert!(r["bottleneck"]["steps"].as_u64().unwrap() > 0);
        assert_eq!(
            r["tables"]["step_time"]["total_records"],
            r["bottleneck"]["steps"]
        );
        // CPU-only: no device, so XProf's device compute / idle shares are placeholders; the
        // host's share of the step is measured, and most of a training step here.
        let b = &r["bottleneck"];
        for key in [
            "compute_percent",
            "idle_percent",
            "device_collectives_percent",
        ] {
            assert!(b[key].is_null(), "{key}: {b}");
            assert!(b[format!("{key}_reason")].as_str().is_some(), "{key}");
        }
        let host = b["host_compute_percent"].as_f64().unwrap();
        assert!(host > 50.0 && host <= 100.0, "{host}");
        let r = call(
            "check_host_boundness",
            json!({"path": fixtures(), "run": "mlp_steps"}),
        )
        .unwrap();
        // CPU capture: no accelerator to measure, so the verdict is UNKNOWN, never a guess.
        assert_eq!(r["status"], json!("UNKNOWN"));
        assert!(r["metrics"]["mxu_idleness_percent"].is_null());
        assert!(r["metrics"]["number_of_steps"].as_u64().unwrap() > 0);
    }

    /// Four CPU devices with collectives (fixtures/jax-cpu/logdir, run `sharded`): the
    /// collectives are host-executed ops, so the device step shares XProf's rules read are
    /// unmeasured, not 0 %.
    #[test]
    fn a_sharded_cpu_capture_reports_unmeasured_step_shares_as_null() {
        let args = json!({"path": fixtures(), "run": "sharded"});
        let r = call("get_smart_suggestions", args.clone()).unwrap();
        let sig = &r["signals"];
        assert_eq!(sig["steps"].as_u64(), Some(3), "{sig}");
        assert!(sig["avg_collective_percent_of_step"].is_null(), "{sig}");
        assert!(sig["avg_collective_percent_of_step_reason"].is_string());
        let r = call("get_input_pipeline", args).unwrap();
        assert!(r["bottleneck"]["device_collectives_percent"].is_null());
        assert!(r["bottleneck"]["host_compute_percent"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn tpu_steps_through_the_tools() {
        // Two 100 µs steps on one TensorCore: 60 µs of convolution, 25 µs of infeed. As the
        // profiler writes them: no `group_id` yet (XProf's grouping numbers the steps).
        let b = XSpaceBuilder::new()
            .hostname("tpu-host")
            .plane("/device:TPU:0", |p| {
                p.stat("peak_teraflops_per_second", 100.0)
                    .stat("peak_hbm_bw_gigabytes_per_second", 1000.0)
                    .line("Steps", |l| {
                        l.event("0", 0, 100_000_000)
                            .event("1", 100_000_000, 100_000_000)
                    })
                    .line("XLA Modules", |l| {
                        l.event("jit_step(1)", 0, 100_000_000).event(
                            "jit_step(1)",
                            100_000_000,
                            100_000_000,
                        )
                    })
                    .line("XLA Ops", |mut l| {
                        for step in 0..2i64 {
                            let t = step * 100_000_000;
                            l = l
                                .event("conv.1", t + 1_000_000, 60_000_000)
                                .metadata_stat("hlo_category", "convolution")
                                .metadata_stat("symbol_id", 1u64)
                                .metadata_stat("program_id", 1u64)
                                .event("infeed.2", t + 70_000_000, 25_000_000)
                                .metadata_stat("hlo_category", "infeed")
                                .metadata_stat("symbol_id", 2u64)
                                .metadata_stat("program_id", 1u64);
                        }
                        l
                    })
            });
        let (_t, run) = run_with(&b.to_bytes());
        let r = call("get_pod_viewer", json!({"path": run})).unwrap();
        assert!(r.get("status").is_none(), "{r}");
        let core = &r["pod_viewer"]["podStatsSequence"]["podStatsMap"][0]["podStatsPerCore"]["0"];
        assert_eq!(core["totalDurationUs"], json!(100.0));
        assert_eq!(core["stepBreakdownUs"]["6"], json!(25.0));
        assert_eq!(core["stepBreakdownPs"]["6"], json!(25_000_000u64));
        let r = call("get_input_pipeline", json!({"path": run})).unwrap();
        assert_eq!(r["hardware_type"], json!("TPU"));
        assert_eq!(r["bottleneck"]["steps"], json!(2));
        assert_eq!(r["bottleneck"]["input_percent"], json!(25.0));
        assert_eq!(r["bottleneck"]["input_classification"], json!("host"));
        let rows = &r["tables"]["step_time"]["records"];
        assert_eq!(rows[0]["tcInfeedTimeMs"], json!(0.025));
        assert_eq!(
            r["tables"]["max_infeed_core"]["records"][1]["0"],
            json!("unknown")
        );
        let r = call("check_host_boundness", json!({"path": run})).unwrap();
        assert_eq!(r["metrics"]["number_of_steps"], json!(2));
        assert!(r["reasons"].as_array().is_some_and(|a| !a.is_empty()));
        let r = call("get_smart_suggestions", json!({"path": run})).unwrap();
        assert!(r["signals"]["input_percent_of_step_time"].as_f64() == Some(25.0));
        // The steps' ops are categorised (convolution, infeed) and none is a collective or a
        // data shuffle: measured 0 %, not unknown.
        assert_eq!(r["signals"]["avg_collective_percent_of_step"], json!(0.0));
        assert_eq!(r["signals"]["avg_data_shuffle_percent_of_step"], json!(0.0));
        assert!(
            r["signals"]
                .get("avg_collective_percent_of_step_reason")
                .is_none()
        );
        // 25 % of the step waits for infeed and the host pipeline is not broken down.
        let rules: Vec<&str> = r["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["ruleName"].as_str().unwrap())
            .collect();
        assert!(rules.contains(&"InputBoundRule"), "{rules:?}");
    }

    #[test]
    fn a_dcn_transfer_through_get_megascale_stats() {
        use xprof_testkit::xprof_proto::xla;
        let shape = xla::ShapeProto {
            element_type: xla::PrimitiveType::Tuple as i32,
            tuple_shapes: vec![xla::ShapeProto {
                element_type: xla::PrimitiveType::Bf16 as i32,
                dimensions: vec![512],
                ..Default::default()
            }],
            ..Default::default()
        };
        let instr = |name: &str, opcode: &str, rendezvous: bool| xla::HloInstructionProto {
            name: name.into(),
            opcode: opcode.into(),
            channel_id: 3,
            shape: Some(shape.clone()),
            frontend_attributes: rendezvous.then(|| {
                Box::new(xla::FrontendAttributes {
                    map: [
                        (
                            "_xla_host_transfer_rendezvous".to_string(),
                            "dcn_ar".to_string(),
                        ),
                        (
                            "_xla_megascale_transfer_type".to_string(),
                            "ONE_TO_ONE".to_string(),
                        ),
                    ]
                    .into_iter()
                    .collect(),
                })
            }),
            ..Default::default()
        };
        let hlo = xla::HloProto {
            hlo_module: Some(xla::HloModuleProto {
                name: "jit_g".into(),
                computations: vec![xla::HloComputationProto {
                    instructions: vec![
                        instr("send.7", "send", true),
                        instr("recv-done.8", "recv-done", false),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        // One-to-one transfer of a 1024-byte buffer: send at 1 µs (1 µs long), recv-done at
        // 11 µs (2 µs long); slack 11 − 1 − 1 = 9 µs. A one-to-one group has size 1.
        let one_to_one = vec![0x1a, 0x00];
        let b = XSpaceBuilder::new()
            .plane("/host:metadata", |p| p.hlo_module(9, 9, &hlo))
            .plane("/host:CPU", |p| {
                p.line_with_id(1, "ms", |l| l.event("MegaScale: Send", 0, 10))
            })
            .plane("/device:TPU:0", |p| {
                p.line("XLA Modules", |l| l.event("jit_g(9)", 0, 50_000_000))
                    .line("XLA Ops", |l| {
                        l.event("send.7", 1_000_000, 1_000_000)
                            .metadata_stat("hlo_category", "host send")
                            .metadata_stat("dcn_collective_info", one_to_one)
                            .event("recv-done.8", 11_000_000, 2_000_000)
                            .metadata_stat("hlo_category", "host recv-done")
                    })
            });
        let (_t, run) = run_with(&b.to_bytes());
        let r = call("get_megascale_stats", json!({"path": run})).unwrap();
        assert!(r.get("status").is_none(), "{r}");
        let row = &r["table"]["records"][0];
        assert_eq!(row["rendezvous_name"], json!("dcn_ar"));
        assert_eq!(row["transfer_type"], json!("ONE_TO_ONE"));
        assert_eq!(row["net_tx_bytes"], json!(1024));
        assert_eq!(row["slack_time"], json!(0.009));
        assert_eq!(row["occurrences"], json!(1));
    }

    #[test]
    fn gpu_kernels_through_the_tool() {
        let b = XSpaceBuilder::new().plane("/device:GPU:0", |p| {
            p.line_with_id(1, "stream 1", |l| {
                l.event("ampere_s16816gemm", 0, 4_000_000)
                    .stat(
                        "kernel_details",
                        "regs:96 grid:8,4,1 block:128,1,1 occ_pct:25",
                    )
                    .stat("tf_op", Ref("m/MatMul:MatMul"))
            })
        });
        let (_t, run) = run_with(&b.to_bytes());
        let r = call("get_kernel_stats", json!({"path": run})).unwrap();
        let row = &r["table"]["records"][0];
        assert_eq!(row["grid_dim"], json!("8,4,1"));
        assert_eq!(row["is_kernel_using_tensor_core"], json!(true));
        assert_eq!(row["total_duration_us"], json!(4.0));
        assert_eq!(r["kernel_events"], json!(1));
    }
}
