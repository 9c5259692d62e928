use serde_json::{Map, Value, json};
use xprof_capture::{HloModuleRef, HostFile, Session};
use xprof_memory::MemoryError;
use xprof_memory::modules;
use xprof_memory::viewer;
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{session, with_capture};

pub struct GetMemoryViewer;
register_tool!(GetMemoryViewer);

/// A memory-library error as a tool error (class and hint from the library).
pub(crate) fn memory_error(e: MemoryError) -> ToolError {
    xprof_plugin_support::lib_error(e.kind(), &e, Some(e.hint()))
}

/// `no_data` with the capture block first, as every capture tool's answer starts.
pub(crate) fn no_data_with_capture(
    s: &Session,
    used: &[&HostFile],
    reason: String,
    flags: &[&str],
) -> ToolOutput {
    let body = match ToolOutput::no_data(reason, flags).into_value() {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    ToolOutput::json(crate::common::with_capture(s, used, &[], body))
}

/// Flags that make a capture carry its HLO modules.
pub(crate) const HLO_FLAGS: &[&str] = &[
    "capture with XProf/jax.profiler (modules are embedded in /host:metadata)",
    "ProfileOptions.include_hlo_proto / keep the <module>.hlo_proto.pb files in the run directory",
    "TensorFlow: tf.function(jit_compile=True), so that XLA compiles the step (only XLA programs have HLO modules)",
];

/// The answer when the capture has no HLO module at all.
pub(crate) fn no_modules(s: &Session, used: &[&HostFile]) -> ToolOutput {
    no_data_with_capture(
        s,
        used,
        "the capture has no HLO modules: no <module>.hlo_proto.pb files in the run directory \
         and no `Hlo Proto` in /host:metadata"
            .into(),
        HLO_FLAGS,
    )
}

/// The capture's HLO modules (files and embedded), recording every file read.
pub(crate) fn list_modules(call: &mut Call, s: &Session) -> Result<Vec<HloModuleRef>, ToolError> {
    for f in &s.hlo_protos {
        call.read_file(f);
    }
    for h in &s.hosts {
        call.read_file(&h.path);
    }
    let xspaces: Vec<_> = s.hosts.iter().map(|h| h.path.clone()).collect();
    modules::list(&s.hlo_protos, &xspaces).map_err(memory_error)
}

/// `memory_space`: 0 = HBM / default memory, 1 = TPU VMEM, … (a string or an integer).
pub(crate) fn memory_space(call: &Call) -> Result<i64, ToolError> {
    let raw = call.str_or("memory_space", "0")?;
    raw.trim().parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
        ToolError::invalid(format!(
            "argument `memory_space` must be a memory color (0 = HBM/default, 1 = VMEM, ...), got {raw:?}"
        ))
        .with_hint("pass --memory_space 0 for device memory (HBM)")
    })
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

impl Tool for GetMemoryViewer {
    fn name(&self) -> &'static str {
        "get_memory_viewer"
    }
    fn summary(&self) -> &'static str {
        "Buffers live at the peak of one HLO module's buffer assignment"
    }
    fn doc(&self) -> &'static str {
        "XProf's memory_viewer view. Without --module_name: the capture's modules. With it: the \
         module's buffer assignment simulated over its heap trace for memory color \
         --memory_space (0 = HBM / default memory, 1 = TPU VMEM): the peak heap (indefinite \
         buffers — parameters, outputs, constants — included), the buffers live at the peak \
         largest first with size, shape, defining op and category (Parameter / Output / \
         Temporary / Constant / Thread-local), and XProf's own JSON as `memory_viewer`. Modules \
         come from the run's <module>.hlo_proto.pb files and from /host:metadata."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .string(
                "module_name",
                "Module as listed (`jit_f(123)`), or a unique bare name / program id; omit to list the modules.",
            )
            .string_default(
                "memory_space",
                "Memory color: 0 = HBM / default device memory, 1 = TPU VMEM, ...",
                "0",
            )
            .integer_min(
                "limit",
                "Buffers at the peak to list (largest first); 0 = all. XProf's JSON always has all.",
                Some(50),
                0,
            )
            .boolean(
                "xprof_json",
                "Include XProf's own JSON for the view as `memory_viewer` (its heap timeline has a \
                 point per heap-simulator event).",
                true,
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, modules, tip} | {capture, run, module, memory_space, peak_heap_bytes, \
         peak_heap_mib, …, buffers_at_peak[{instruction, size_bytes, size_mib, shape, category, \
         opcode, tf_op_name, source}], memory_viewer{XProf JSON}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "The modules of the shared JAX training capture",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train"}),
            )
            .expect(&["modules", "tip"]),
            Example::new(
                "Buffers at the peak of its training step",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train",
                       "module_name": "jit_train_step(8)"}),
            )
            .expect(&["peak_heap_bytes", "buffers_at_peak", "memory_viewer"]),
            Example::new(
                "VMEM (memory space 1) of the TPU v6e capture's Pallas kernel module",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir",
                       "module_name": "jit_matmul_optimized", "memory_space": "1"}),
            )
            .expect(&["max_scoped_vmem_bytes"]),
            Example::new(
                "A module embedded in the bundled capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps",
                       "module_name": "jit_train_step(2)"}),
            )
            .expect(&["buffers_at_peak"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let color = memory_space(call)?;
        let limit = call.usize_or("limit", 50)?;
        let with_json = call.bool_or("xprof_json", true)?;
        let module_arg = call.opt_nonempty("module_name")?;
        let s = session(call)?;
        let used: Vec<&HostFile> = s.hosts.iter().collect();
        let mods = list_modules(call, &s)?;
        if mods.is_empty() {
            return Ok(no_modules(&s, &used));
        }
        let Some(name) = module_arg else {
            let mut body = Map::new();
            body.insert(
                "modules".into(),
                json!(mods.iter().map(|m| m.name.as_str()).collect::<Vec<_>>()),
            );
            body.insert(
                "tip".into(),
                json!("Pass module_name=<one of these> for the buffer map."),
            );
            return Ok(with_capture(&s, &used, &[], body).into());
        };
        let Some(entry) = modules::select(&mods, &name) else {
            return Err(
                ToolError::invalid(format!("no HLO module {name:?} in the capture")).with_hint(
                    format!(
                        "pass --module_name with one of: {}",
                        mods.iter()
                            .map(|m| m.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            );
        };
        let proto = modules::load(entry).map_err(memory_error)?;
        let r = viewer::preprocess(&proto, color).map_err(memory_error)?;
        let shown = if limit == 0 {
            r.max_heap_by_size.len()
        } else {
            limit.min(r.max_heap_by_size.len())
        };
        let buffers: Vec<Value> = r.max_heap_by_size[..shown]
            .iter()
            .map(|&i| {
                let o = &r.max_heap[i];
                json!({
                    "instruction": o.instruction_name,
                    "label": o.label,
                    "logical_buffer_id": (o.logical_buffer_id >= 0).then(|| o.logical_buffer_id.to_string()),
                    "size_bytes": o.size_bytes,
                    "size_mib": mib(o.size_bytes),
                    "unpadded_bytes": o.unpadded_bytes,
                    "shape": o.shape_string,
                    "category": o.group_name,
                    "opcode": o.op_code,
                    "tf_op_name": o.tf_op_name,
                    "source": (!o.source_info.file_name.is_empty()).then(|| format!(
                        "{}:{}", o.source_info.file_name, o.source_info.line_number)),
                })
            })
            .collect();
        let mut body = Map::new();
        body.insert("module".into(), json!(entry.name));
        body.insert("memory_space".into(), json!(color));
        body.insert("simulated".into(), json!(r.simulated));
        body.insert("peak_heap_bytes".into(), json!(r.peak_heap_bytes));
        body.insert("peak_heap_mib".into(), json!(mib(r.peak_heap_bytes)));
        body.insert(
            "peak_unpadded_heap_bytes".into(),
            json!(r.peak_unpadded_heap_bytes),
        );
        body.insert(
            "peak_heap_size_position".into(),
            json!(r.peak_heap_size_position),
        );
        body.insert(
            "total_buffer_allocation_bytes".into(),
            json!(r.total_buffer_allocation_bytes),
        );
        body.insert(
            "indefinite_buffer_allocation_bytes".into(),
            json!(r.indefinite_buffer_allocation_bytes),
        );
        body.insert(
            "entry_computation_parameters_bytes".into(),
            json!(r.entry_computation_parameters_bytes),
        );
        body.insert("maybe_live_out_bytes".into(), json!(r.maybe_live_out_bytes));
        body.insert("non_reusable_bytes".into(), json!(r.non_reusable_bytes));
        if color == 1 {
            body.insert(
                "max_scoped_vmem_bytes".into(),
                json!(r.max_scoped_vmem_bytes),
            );
            body.insert(
                "max_scoped_vmem_instruction".into(),
                json!(r.max_scoped_vmem_instruction_name),
            );
        }
        body.insert("total_buffers_at_peak".into(), json!(r.max_heap.len()));
        body.insert("returned_buffers".into(), json!(shown));
        body.insert("truncated".into(), json!(shown < r.max_heap.len()));
        body.insert("buffers_at_peak".into(), Value::Array(buffers));
        if with_json {
            body.insert("memory_viewer".into(), r.to_xprof_json());
        }
        Ok(with_capture(&s, &used, &[], body).into())
    }
}

/// The four memory tools end to end through the SDK (argument validation, capture block,
/// no_data, error classes, nothing written into run directories).
#[cfg(test)]
mod memory_tool_tests {
    use std::path::{Path, PathBuf};

    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};
    use xprof_proto::prost::Message;
    use xprof_proto::xplane::{XEvent, XEventMetadata, XLine, XPlane, XSpace};

    const KRATE: &str = env!("CARGO_CRATE_NAME");
    const TOOLS: &[&str] = &[
        "get_memory_profile",
        "get_memory_viewer",
        "get_peak_allocations",
        "detect_unfused_reshapes",
    ];

    fn call(tool: &str, args: Value) -> Result<Value, xprof_plugin_api::ToolError> {
        invoke_json(KRATE, tool, &args.to_string(), "{}").map(|env| env["result"].clone())
    }

    fn run_dirs() -> Vec<PathBuf> {
        testing::run_dirs(env!("CARGO_MANIFEST_DIR"))
    }

    fn listing(d: &Path) -> Vec<std::ffi::OsString> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn every_memory_tool_answers_on_every_fixture_and_writes_nothing() {
        let dirs = run_dirs();
        assert!(!dirs.is_empty());
        for dir in &dirs {
            let before = listing(dir);
            for tool in TOOLS {
                let r = call(tool, json!({"path": dir.display().to_string()}))
                    .unwrap_or_else(|e| panic!("{tool} on {}: {e}", dir.display()));
                let obj = r.as_object().unwrap();
                assert_eq!(
                    obj.keys().next().map(String::as_str),
                    Some("capture"),
                    "{tool}"
                );
                if obj.get("status").and_then(Value::as_str) == Some("no_data") {
                    assert!(obj["reason"].as_str().is_some_and(|s| !s.is_empty()));
                    assert!(!obj["capture_flags"].as_array().unwrap().is_empty());
                }
            }
            assert_eq!(before, listing(dir), "{}", dir.display());
        }
    }

    #[test]
    fn detect_unfused_reshapes_on_the_seed_capture_row_37() {
        let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let r = call(
            "detect_unfused_reshapes",
            json!({"path": c.join("fixtures/seed-v6e/logdir").display().to_string()}),
        )
        .unwrap();
        assert!(r.get("error").is_none());
        assert_eq!(r["bottlenecks_found"], false);
        assert_eq!(r["inefficient_ops"], json!([]));
    }

    #[test]
    fn memory_profile_of_the_seed_capture_and_no_data_without_allocator_events() {
        let Some(c) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let r = call(
            "get_memory_profile",
            json!({"path": c.join("fixtures/seed-v6e/logdir").display().to_string()}),
        )
        .unwrap();
        assert_eq!(r["peak"]["peak_bytes_in_use"], 51_333_120);
        assert_eq!(r["peak"]["memory_capacity_bytes"], 33_550_235_648u64);
        assert_eq!(r["memory_capacity_gib"], 31.25);
        assert_eq!(r["peak_usage_details"]["utilization_percent"], 0.16);
        let r = call(
            "get_memory_profile",
            json!({"path": c.join("fixtures/jax-cpu/logdir").display().to_string(), "run": "matmul"}),
        )
        .unwrap();
        assert_eq!(r["status"], "no_data");
        assert!(r["reason"].as_str().unwrap().contains("MemoryAllocation"));
    }

    /// A run directory holding one synthetic host (and optionally more files).
    fn scratch(space: &XSpace) -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("plugins/profile/run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("host0.xplane.pb"), space.encode_to_vec()).unwrap();
        (t, run)
    }

    fn host_only() -> XSpace {
        let mut plane = XPlane {
            id: 1,
            name: "/host:CPU".into(),
            ..Default::default()
        };
        plane.event_metadata.insert(
            1,
            XEventMetadata {
                id: 1,
                name: "work".into(),
                ..Default::default()
            },
        );
        plane.lines.push(XLine {
            id: 1,
            name: "main".into(),
            events: vec![XEvent {
                metadata_id: 1,
                duration_ps: 10,
                ..Default::default()
            }],
            ..Default::default()
        });
        XSpace {
            planes: vec![plane],
            ..Default::default()
        }
    }

    #[test]
    fn no_data_names_what_the_capture_lacks() {
        let (_t, run) = scratch(&host_only());
        let p = run.display().to_string();
        let r = call("get_memory_profile", json!({"path": p})).unwrap();
        assert_eq!(r["status"], "no_data");
        assert!(r["reason"].as_str().unwrap().contains("/host:CPU"));
        for tool in [
            "get_memory_viewer",
            "get_peak_allocations",
            "detect_unfused_reshapes",
        ] {
            let r = call(tool, json!({"path": p})).unwrap();
            assert_eq!(r["status"], "no_data", "{tool}");
            assert!(
                r["reason"].as_str().unwrap().contains("Hlo Proto"),
                "{tool}"
            );
        }
        // No /host:CPU plane at all.
        let mut space = host_only();
        space.planes[0].name = "/device:TPU:0".into();
        let (_t2, run2) = scratch(&space);
        let r = call(
            "get_memory_profile",
            json!({"path": run2.display().to_string()}),
        )
        .unwrap();
        assert_eq!(r["status"], "no_data");
        assert!(r["reason"].as_str().unwrap().contains("no /host:CPU plane"));
    }

    #[test]
    fn bad_inputs_give_the_convention_error_classes() {
        let err = |tool: &str, args: Value| {
            let e = call(tool, args).expect_err("expected an error");
            (e.kind.as_str(), e.message, e.hint.unwrap_or_default())
        };
        // Empty capture file: invalid value naming it, with a hint.
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("plugins/profile/empty");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("host0.xplane.pb"), b"").unwrap();
        for tool in TOOLS {
            let (k, m, h) = err(tool, json!({"path": run.display().to_string()}));
            assert_eq!(k, "invalid_value", "{tool}: {m}");
            assert!(m.contains("host0.xplane.pb"), "{tool}: {m}");
            assert!(!h.is_empty(), "{tool}");
        }
        // Missing capture: path error.
        for tool in TOOLS {
            let (k, _, _) = err(tool, json!({"path": "/nonexistent/xprof/capture"}));
            assert_eq!(k, "path", "{tool}");
        }
        // A corrupt module file: invalid value naming it.
        let (_t2, run2) = scratch(&host_only());
        std::fs::write(
            run2.join("jit_x(3).hlo_proto.pb"),
            b"\x0a\xff\xff\xff\xff\x0f",
        )
        .unwrap();
        let p2 = run2.display().to_string();
        let (k, m, _) = err(
            "get_memory_viewer",
            json!({"path": p2, "module_name": "jit_x(3)"}),
        );
        assert_eq!(k, "invalid_value");
        assert!(m.contains("jit_x(3).hlo_proto.pb"), "{m}");
        let (k, _, _) = err("get_peak_allocations", json!({"path": p2}));
        assert_eq!(k, "invalid_value");
        // Bad argument values.
        let fixtures =
            testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures/jax-cpu/logdir");
        let p = fixtures.display().to_string();
        let (k, m, h) = err(
            "get_memory_viewer",
            json!({"path": p, "run": "matmul", "module_name": "jit_nope"}),
        );
        assert_eq!(k, "invalid_value");
        assert!(h.contains("jit_matmul(0)"), "{m} / {h}");
        let (k, _, _) = err(
            "get_memory_viewer",
            json!({"path": p, "run": "matmul", "module_name": "jit_matmul(0)", "memory_space": "-1"}),
        );
        assert_eq!(k, "invalid_value");
        let (k, _, _) = err(
            "get_peak_allocations",
            json!({"path": p, "run": "matmul", "min_size_mib": -2}),
        );
        assert_eq!(k, "invalid_value");
        let (k, m, _) = err(
            "get_memory_profile",
            json!({"path": p, "run": "matmul", "host": "nohost"}),
        );
        assert_ne!(k, "internal");
        assert!(m.contains("nohost"), "{m}");
        let (k, _, _) = err(
            "get_memory_viewer",
            json!({"path": p, "run": "matmul", "bogus": 1}),
        );
        assert_eq!(k, "usage");
    }
}
