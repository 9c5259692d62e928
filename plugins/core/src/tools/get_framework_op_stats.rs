use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::{load_run, no_data_with, views_error};
use crate::common::{DEVICE_TRACE_FLAGS, session, with_capture};

pub struct GetFrameworkOpStats;
register_tool!(GetFrameworkOpStats);

impl Tool for GetFrameworkOpStats {
    fn name(&self) -> &'static str {
        "get_framework_op_stats"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["framework_op_stats", "tf_stats"]
    }
    fn summary(&self) -> &'static str {
        "Time by framework op: JAX named scope, PyTorch op or TF op (XProf framework_op_stats)"
    }
    fn doc(&self) -> &'static str {
        "XProf's framework_op_stats: device HLO ops grouped by the framework op that produced them \
         (the op_name metadata: a JAX named scope path, a PyTorch/XLA op, a TF op; type after the \
         last ':'), then the framework ops that ran on host threads. Per row: occurrences, total \
         and self time (us, exact ps beside them), the share of device or host self time and its \
         running total, FLOP rate, memory bandwidth, operational intensity, the roofline bound \
         and the execution mode. Rows are sorted by self time. --include_idle=false drops the \
         IDLE rows (XProf's second table). Where XProf counts 0 FLOPs for custom calls we print \
         null with the reason and the trace's own count as `*_measured`."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Maximum rows (0 = all).", Some(40), 0)
            .boolean(
                "include_idle",
                "Include the device and host IDLE rows (XProf's first table).",
                true,
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, device_type, task_type, architecture_type, table: {columns, properties, total_records, truncated, records: [{rank, host_or_device, type, operation, occurrences, total_time, total_time_ps, total_self_time, ..., bound_by, eager}]}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Framework ops of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["table", "device_type"]),
            Example::new(
                "Without IDLE rows, top 5",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "include_idle": false, "limit": 5}),
            )
            .expect(&["table"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 40)?;
        let with_idle = call.bool_or("include_idle", true)?;
        let s = session(call)?;
        let (run, used) = load_run(call, &s)?;
        let st = run
            .op_stats_with(xprof_views::framework::BUILD)
            .ok_or_else(|| ToolError::internal("no host selected"))?;
        // GPU: Tensor Core utilization per framework op comes from the kernel stats.
        let kernels = if st.run_env.device_type.contains("GPU") {
            let list: Vec<(String, std::path::PathBuf)> = run
                .hosts
                .iter()
                .map(|h| (h.name.clone(), h.path.clone()))
                .collect();
            let raw = xprof_views::load::load_raw(&list, xprof_views::load::gpu_planes)
                .map_err(views_error)?;
            let hlo = xprof_views::kernel::HloOpNames::new(&raw, &s.hlo_protos);
            let ks = xprof_views::kernel::kernel_stats_with_hlo(&raw, &hlo);
            Some(xprof_views::kernel::tensor_core_time_by_op(&ks))
        } else {
            None
        };
        let t = xprof_views::framework::table_with_kernels(&st, !with_idle, kernels.as_ref());
        let mut body = Map::new();
        body.insert("device_type".into(), json!(st.run_env.device_type));
        body.insert("task_type".into(), t.properties["task_type"].clone());
        body.insert(
            "architecture_type".into(),
            t.properties["architecture_type"].clone(),
        );
        let real_ops = st.device_db.metrics.iter().any(|m| !m.is_idle())
            || st.host_db.metrics.iter().any(|m| !m.is_idle());
        body.insert("table".into(), t.to_json(limit));
        if !real_ops {
            return Ok(no_data_with(
                &s,
                &used,
                &run.warnings,
                "no framework ops: the device planes have no XLA op events and the host threads no framework-op (TraceMe `name:type`, `tf_op`) events; XProf's table would hold only IDLE rows",
                DEVICE_TRACE_FLAGS,
                body,
            ));
        }
        Ok(with_capture(&s, &used, &run.warnings, body).into())
    }
}
