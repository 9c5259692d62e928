use serde_json::{Map, Value, json};
use xprof_capture::{HostFile, Session};
use xprof_memory::MemoryError;
use xprof_memory::modules::{self, ModuleEntry};
use xprof_memory::viewer;
use xprof_plugin_api::{
    Call, ErrorKind, Example, Params, Tool, ToolError, ToolOutput, register_tool,
};

use crate::common::{session, with_capture};

pub struct GetMemoryViewer;
register_tool!(GetMemoryViewer);

/// A memory-library error as a tool error (class and hint from the library).
pub(crate) fn memory_error(e: MemoryError) -> ToolError {
    ToolError::new(ErrorKind::parse(e.kind()), e.to_string()).with_hint(e.hint())
}

/// `no_data` with the capture block first, as every capture tool's answer starts.
pub(crate) fn no_data_with_capture(
    s: &Session,
    used: &[&HostFile],
    reason: String,
    flags: &[&str],
) -> ToolOutput {
    let nd = ToolOutput::no_data(reason, flags);
    let mut m = Map::new();
    m.insert("capture".into(), s.capture_block(used, &[]));
    m.insert("run".into(), json!(s.run));
    if let Value::Object(o) = nd.value {
        m.extend(o);
    }
    ToolOutput::json(Value::Object(m))
}

/// Flags that make a capture carry its HLO modules.
pub(crate) const HLO_FLAGS: &[&str] = &[
    "capture with XProf/jax.profiler (modules are embedded in /host:metadata)",
    "ProfileOptions.include_hlo_proto / keep the <module>.hlo_proto.pb files in the run directory",
];

/// The capture's HLO modules (files and embedded), recording every file read.
pub(crate) fn list_modules(call: &mut Call, s: &Session) -> Result<Vec<ModuleEntry>, ToolError> {
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
        let module_arg = call.opt_nonempty("module_name")?;
        let s = session(call)?;
        let used: Vec<&HostFile> = s.hosts.iter().collect();
        let mods = list_modules(call, &s)?;
        if mods.is_empty() {
            return Ok(no_data_with_capture(
                &s,
                &used,
                "the capture has no HLO modules: no <module>.hlo_proto.pb files in the run \
                 directory and no `Hlo Proto` in /host:metadata"
                    .into(),
                HLO_FLAGS,
            ));
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
        body.insert("memory_viewer".into(), r.to_xprof_json());
        Ok(with_capture(&s, &used, &[], body).into())
    }
}
