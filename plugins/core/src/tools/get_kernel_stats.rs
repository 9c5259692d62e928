use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::{load_raw, no_data_with};
use crate::common::{session, with_capture};

pub struct GetKernelStats;
register_tool!(GetKernelStats);

const GPU_FLAGS: &[&str] = &[
    "profile a GPU run with the CUPTI tracer on (jax.profiler.trace, tf.profiler.experimental.start or torch_xla.debug.profiler on the GPU; PyTorch's own torch.profiler writes Chrome traces, not XSpace); kernel_details is recorded per kernel launch",
];

impl Tool for GetKernelStats {
    fn name(&self) -> &'static str {
        "get_kernel_stats"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["kernel_stats"]
    }
    fn summary(&self) -> &'static str {
        "GPU kernels: launch shape, registers, shared memory, occupancy, Tensor Core use (XProf kernel_stats)"
    }
    fn doc(&self) -> &'static str {
        "XProf's kernel_stats from the `kernel_details` stat of GPU kernel events on every \
         `/device:GPU:*` plane of all hosts (or --host): kernels grouped by name, grid and block \
         dimensions, registers per thread, static+dynamic shared memory, theoretical occupancy, \
         whether the kernel uses Tensor Cores (by name, XProf's patterns) and whether its \
         framework op (the `tf_op` stat, or the op_name of the HLO instruction its `hlo_op` \
         names) is Tensor-Core eligible, with occurrences and total/avg/min/max durations \
         (us, exact ns beside them), sorted by total duration (XProf keeps the top 1000). \
         TPU and CPU captures have no GPU kernels: `no_data`."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Maximum rows (0 = all).", Some(50), 0)
            .string(
                "kernel_name",
                "Only kernels of exactly this name (XProf's agent CLI's filter).",
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, gpu_planes, kernel_events, table: {columns, total_records, truncated, records: [{rank, kernel_name, registers_per_thread, shmem_bytes, block_dim, grid_dim, occupancy_pct, is_op_tensor_core_eligible, is_kernel_using_tensor_core, op_name, occurrences, total_duration_us, total_duration_ns, avg_duration_us, min_duration_us, max_duration_us}]}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "A TPU capture has no GPU kernels (no_data, with XProf's empty table)",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["status", "table"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 50)?;
        let kernel_name = call.opt_nonempty("kernel_name")?;
        let s = session(call)?;
        let (raw, used) = load_raw(call, &s, xprof_views::load::gpu_planes)?;
        for f in &s.hlo_protos {
            call.read_file(f);
        }
        let hlo = xprof_views::kernel::HloOpNames::new(&raw, &s.hlo_protos);
        let ks = xprof_views::kernel::kernel_stats_with_hlo(&raw, &hlo);
        let mut body = Map::new();
        body.insert("gpu_planes".into(), json!(ks.gpu_planes));
        body.insert("kernel_events".into(), json!(ks.kernel_events));
        let mut table = ks.table();
        if let Some(k) = &kernel_name {
            table
                .records
                .retain(|r| r.get("kernel_name").and_then(|v| v.as_str()) == Some(k.as_str()));
        }
        body.insert("table".into(), table.to_json(limit));
        if ks.reports.is_empty() {
            let reason = if ks.gpu_planes == 0 {
                "no GPU plane (`/device:GPU:*`): kernel statistics exist only for GPU captures"
            } else {
                "the GPU planes have no kernel events with a `kernel_details` stat"
            };
            return Ok(no_data_with(&s, &used, &[], reason, GPU_FLAGS, body));
        }
        Ok(with_capture(&s, &used, &[], body).into())
    }
}
