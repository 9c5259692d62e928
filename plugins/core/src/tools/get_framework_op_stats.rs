use serde_json::{Map, Value, json};
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
         null with the reason and the trace's own count as `*_measured`. On a CPU capture, where \
         XProf's table leaves out the XLA ops (only IDLE rows, or TensorFlow's own host ops), \
         `host_executed` groups the XLA ops the CPU backend ran on host threads by framework op \
         the same way (our view, labelled; no FLOP counts)."
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
        "{capture, run, device_type, task_type, architecture_type, table: {columns, properties, total_records, truncated, records: [{rank, host_or_device, type, operation, occurrences, total_time, total_time_ps, total_self_time, ..., bound_by, eager}]}, host_executed?: {what, self_time_percent_basis, self_time_without_framework_op_percent, note?, table}}"
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
        if let Some(h) = xprof_views::framework::host_executed_table(&st, !with_idle) {
            body.insert("host_executed".into(), host_executed(&st, &h, limit));
        } else if !real_ops {
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

/// The host-executed block of a CPU capture: [`xprof_views::framework::host_executed_table`]
/// with its basis, and how much of the op time has no framework op to group by.
fn host_executed(
    st: &xprof_opstats::OpStats,
    t: &xprof_views::table::Table,
    limit: usize,
) -> Value {
    let (mut all, mut bare) = (0u64, 0u64);
    for m in st.host_xla_db.iter().flat_map(|d| &d.metrics) {
        if !m.is_idle() {
            all = all.saturating_add(m.self_time_ps);
            if m.provenance.is_empty() {
                bare = bare.saturating_add(m.self_time_ps);
            }
        }
    }
    let mut m = Map::new();
    m.insert(
        "what".into(),
        json!(
            "the XLA ops the CPU backend ran on host threads, grouped by framework op as XProf \
             groups device ops (our view: XProf's table above leaves out the XLA ops of a CPU \
             capture)"
        ),
    );
    m.insert(
        "self_time_percent_basis".into(),
        json!(xprof_opstats::views::self_time_basis(true)),
    );
    let share = (all > 0).then(|| bare as f64 / all as f64 * 100.0);
    m.insert(
        "self_time_without_framework_op_percent".into(),
        json!(share),
    );
    if share.is_some_and(|p| p >= 50.0) {
        m.insert("note".into(), json!(NO_PROVENANCE));
    }
    m.insert("table".into(), t.to_json(limit));
    Value::Object(m)
}

/// Why most rows are HLO op names: the HLO has no `op_name` metadata.
const NO_PROVENANCE: &str = "most of the op time comes from HLO ops without op_name metadata, so \
     the rows are HLO op names (type Unknown); PyTorch/XLA writes op_name metadata when run with \
     XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1 (JAX and TensorFlow write it by default)";

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    fn call(tool: &str, args: Value) -> Value {
        invoke_json(env!("CARGO_CRATE_NAME"), tool, &args.to_string(), "{}")
            .map(|env| env["result"].clone())
            .unwrap()
    }

    fn fixture(dir: &str) -> String {
        testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(dir)
            .display()
            .to_string()
    }

    fn records(t: &Value) -> &Vec<Value> {
        t["records"].as_array().unwrap()
    }

    /// A JAX CPU capture: XProf's table keeps only its IDLE rows; the host-executed block
    /// groups the XLA ops by JAX scope with the op type from the name, and accounts for every
    /// op's self time that get_hlo_stats lists.
    #[test]
    fn cpu_captures_group_host_executed_ops_by_framework_op() {
        let args = json!({"path": fixture("jax-cpu/logdir"), "run": "mlp_steps", "limit": 0});
        let r = call("get_framework_op_stats", args.clone());
        assert!(r.get("status").is_none(), "{}", r["status"]);
        assert!(records(&r["table"]).iter().all(|x| x["type"] == "IDLE"));
        let h = &r["host_executed"];
        assert_eq!(h["self_time_without_framework_op_percent"], json!(0.0));
        assert!(h.get("note").is_none());
        let t = &h["table"];
        assert_eq!(t["properties"]["task_type"], "Training");
        let rows = records(t);
        let mut ours = 0u64;
        for x in rows.iter().filter(|x| x["type"] != "IDLE") {
            assert_eq!(x["host_or_device"], "Host");
            let op = x["operation"].as_str().unwrap();
            assert!(op.starts_with("jit("), "{op}");
            let last = op.rsplit('/').next().unwrap();
            assert!(
                last.starts_with(x["type"].as_str().unwrap()),
                "{op} {}",
                x["type"]
            );
            assert!(x["measured_flop_rate"].is_null());
            let why = x["measured_flop_rate_reason"].as_str().unwrap();
            assert!(why.contains("host CPU threads"), "{why}");
            ours += x["total_self_time_ps"].as_u64().unwrap();
        }
        let stats = call(
            "get_hlo_stats",
            json!({"path": args["path"], "run": "mlp_steps", "limit": 0}),
        );
        let theirs: u64 = stats["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["total_self_time_ps"].as_u64().unwrap())
            .sum();
        assert!(ours > 0);
        assert_eq!(ours, theirs);
        // The shares add up to the basis: the IDLE row and the ops together make 100 %.
        let last = rows.last().unwrap()["Host_cumulative_total_self_time_percent"]
            .as_f64()
            .unwrap();
        assert!((last - 1.0).abs() < 1e-9, "{last}");
    }

    /// PyTorch/XLA writes no op_name metadata unless asked: the rows are HLO op names, and the
    /// answer names the environment variables that add it.
    #[test]
    fn ops_without_op_name_metadata_name_the_flags_that_add_it() {
        let args = json!({"path": fixture("ptxla-cpu/logdir"), "run": "ptxla_train"});
        let h = call("get_framework_op_stats", args)["host_executed"].clone();
        assert_eq!(h["self_time_without_framework_op_percent"], json!(100.0));
        assert!(h["note"].as_str().unwrap().contains("XLA_HLO_DEBUG=1"));
        let rows = records(&h["table"]);
        assert!(rows.iter().any(|x| {
            x["type"] == "Unknown"
                && x["operation"]
                    .as_str()
                    .is_some_and(|o| o.starts_with("dot"))
        }));
    }

    /// A TPU capture has device ops: no host-executed block.
    #[test]
    fn device_captures_have_no_host_executed_block() {
        let Some(corpus) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let path = corpus
            .join("fixtures/seed-v6e/logdir")
            .display()
            .to_string();
        let r = call("get_framework_op_stats", json!({"path": path}));
        assert!(r.get("host_executed").is_none());
        assert!(
            records(&r["table"])
                .iter()
                .any(|x| x["host_or_device"] == "Device" && x["type"] != "IDLE")
        );
    }
}
