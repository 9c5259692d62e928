use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{DEVICE_TRACE_FLAGS, session, with_capture};

pub struct GetTopHloOps;
register_tool!(GetTopHloOps);

/// A top-ops entry from an hlo_stats row: real names, exact counts beside rates.
fn entry(row: &Map<String, Value>, names: &std::collections::BTreeMap<u64, String>) -> Value {
    let pid: u64 = row["program_id"]
        .as_str()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let module = names
        .get(&pid)
        .map(|n| format!("{n}({pid})"))
        .unwrap_or_else(|| pid.to_string());
    let ps = |k: &str| row.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut m = Map::new();
    m.insert("name".into(), row["hlo_op_name"].clone());
    m.insert("module".into(), json!(module));
    m.insert("program_id".into(), row["program_id"].clone());
    m.insert("category".into(), row["category"].clone());
    m.insert("expression".into(), row["hlo_op_expression"].clone());
    m.insert("framework_op".into(), row["tf_op_name"].clone());
    m.insert("occurrences".into(), row["occurrences"].clone());
    m.insert(
        "total_self_time_ms".into(),
        json!(ps("total_self_time_ps") as f64 / 1e9),
    );
    m.insert("total_self_time_ps".into(), json!(ps("total_self_time_ps")));
    m.insert(
        "total_time_ms".into(),
        json!(ps("total_time_ps") as f64 / 1e9),
    );
    m.insert("total_time_ps".into(), json!(ps("total_time_ps")));
    m.insert(
        "self_time_percent".into(),
        row["total_self_time_percent"].clone(),
    );
    // Cost fields with their `_reason` / `_measured` companions (null = unknown, never 0).
    for (src, dst) in [
        ("flops", "flops"),
        ("model_flop_rate", "model_flop_rate_gflops"),
        ("bytes_accessed", "bytes_accessed"),
        ("hbm_bw", "hbm_bw_gibps"),
        ("operational_intensity", "operational_intensity"),
        ("bound_by", "bound_by"),
    ] {
        for suffix in ["", "_reason", "_measured"] {
            if let Some(v) = row.get(&format!("{src}{suffix}")) {
                m.insert(format!("{dst}{suffix}"), v.clone());
            }
        }
    }
    if let Some(v) = row.get("cost_model") {
        m.insert("cost_model".into(), v.clone());
    }
    m.insert("source_info".into(), row["source_info"].clone());
    Value::Object(m)
}

impl Tool for GetTopHloOps {
    fn name(&self) -> &'static str {
        "get_top_hlo_ops"
    }
    fn summary(&self) -> &'static str {
        "Top HLO ops by self time, by FLOPs and by bytes accessed"
    }
    fn doc(&self) -> &'static str {
        "The most expensive HLO ops: three lists (by self time, by FLOPs, by bytes accessed), each \
         entry with its real HLO name, module, category, expression, occurrences, self/total time \
         (ms and exact ps), FLOPs, bytes, bandwidth, intensity and bound_by. Custom calls, whose \
         FLOPs XProf's cost model does not see, have `flops: null` with `flops_reason` and the \
         trace's own count as `flops_measured` (ranked by it in top_by_flops). On CPU-only \
         captures the ops are the ones the CPU backend ran on host threads."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Entries per list.", Some(10), 1)
    }
    fn output(&self) -> &'static str {
        "{capture, run, source, host_executed, top_by_time, top_by_flops, top_by_bytes_accessed, total_records}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Top ops of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "limit": 5}),
            )
            .expect(&["top_by_time", "top_by_flops", "top_by_bytes_accessed"]),
            Example::new(
                "Top host-executed ops of the bundled CPU training capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps"}),
            )
            .expect(&["top_by_time", "host_executed"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 10)?.max(1);
        let s = session(call)?;
        let (st, used, warnings) =
            crate::common::op_stats_with(call, &s, xprof_opstats::BuildOptions { steps: false })?;
        let Some((db, host_executed)) = xprof_opstats::views::op_db(&st) else {
            return Ok(ToolOutput::no_data(
                xprof_opstats::views::no_op_reason(&st),
                DEVICE_TRACE_FLAGS,
            ));
        };
        let rows = xprof_opstats::views::hlo_stats_of(&st, db);
        let flops_of = |r: &Map<String, Value>| {
            r.get("flops")
                .and_then(Value::as_f64)
                .or_else(|| r.get("flops_measured").and_then(Value::as_f64))
                .unwrap_or(0.0)
        };
        let bytes_of = |r: &Map<String, Value>| r["bytes_accessed"].as_f64().unwrap_or(0.0);
        let top = |key: &dyn Fn(&Map<String, Value>) -> f64| -> Vec<Value> {
            let mut v: Vec<&Map<String, Value>> = rows.iter().collect();
            v.sort_by(|a, b| key(b).total_cmp(&key(a)));
            v.into_iter()
                .take(limit)
                .map(|r| entry(r, &st.program_names))
                .collect()
        };
        let by_time: Vec<Value> = rows
            .iter()
            .take(limit)
            .map(|r| entry(r, &st.program_names))
            .collect();
        let mut body = Map::new();
        body.insert(
            "source".into(),
            json!(if host_executed {
                "host_executed_ops (CPU backend; XProf shows no op view)"
            } else {
                "hlo_stats"
            }),
        );
        body.insert("host_executed".into(), json!(host_executed));
        body.insert("top_by_time".into(), Value::Array(by_time));
        body.insert("top_by_flops".into(), Value::Array(top(&flops_of)));
        body.insert("top_by_bytes_accessed".into(), Value::Array(top(&bytes_of)));
        body.insert("total_records".into(), json!(rows.len()));
        body.insert("device_total_time_ps".into(), json!(db.total_time_ps));
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
