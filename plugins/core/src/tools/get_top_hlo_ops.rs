use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{session, with_capture};
use crate::op_filter::OpFilter;

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

/// Why a `top_by_*` list is empty although the capture has ops.
fn unranked_reason(host_executed: bool, what: &str) -> String {
    if host_executed {
        let why = xprof_opstats::views::reasons::HOST_NO_COST;
        format!("no op has {what}: {why}; see top_by_time")
    } else {
        format!(
            "no op has {what} (neither XProf's cost model nor the trace's own stats give any); \
             see top_by_time"
        )
    }
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
         trace's own count as `flops_measured` (ranked by it in top_by_flops). Only ops with \
         FLOPs (bytes) are ranked in top_by_flops (top_by_bytes_accessed); a list that ranks \
         nothing is empty with `<list>_reason`. On CPU-only captures the ops are the ones the \
         CPU backend ran on host threads, which carry no FLOP/byte counts."
    }
    fn params(&self) -> Params {
        OpFilter::params(
            Params::new()
                .capture()
                .host()
                .integer_min("limit", "Entries per list.", Some(10), 1),
            true,
        )
    }
    fn output(&self) -> &'static str {
        "{capture, run, source, host_executed, top_by_time, top_by_flops, top_by_bytes_accessed, total_records, total_matched (with a filter), filter_reason?, device_total_time_ps, self_time_percent_basis}"
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
        let filter = OpFilter::from_call(call)?;
        let s = session(call)?;
        let (st, used, warnings) =
            crate::common::op_stats_with(call, &s, xprof_opstats::BuildOptions::OP_DATABASES)?;
        let Some((db, host_executed)) = xprof_opstats::views::op_db(&st) else {
            return Ok(crate::common::no_op_data(call, &s, &st));
        };
        let mut rows = xprof_opstats::views::hlo_stats_of(&st, db);
        let all_records = rows.len();
        if filter.is_active() {
            let names = &st.program_names;
            rows.retain(|r| {
                let pid = r["program_id"].as_str().and_then(|p| p.parse::<u64>().ok());
                let path = pid
                    .and_then(|p| names.get(&p))
                    .map(|m| format!("{m}/{}", r["hlo_op_name"].as_str().unwrap_or("")));
                filter.keep(r, path.as_deref())
            });
        }
        let flops_of = |r: &Map<String, Value>| {
            r.get("flops")
                .and_then(Value::as_f64)
                .or_else(|| r.get("flops_measured").and_then(Value::as_f64))
                .unwrap_or(0.0)
        };
        let bytes_of = |r: &Map<String, Value>| r["bytes_accessed"].as_f64().unwrap_or(0.0);
        // Only ops with a positive value are ranked: a list of zero-FLOP ops sorted by nothing
        // would read as a ranking.
        let top = |key: &dyn Fn(&Map<String, Value>) -> f64| -> Vec<Value> {
            let mut v: Vec<&Map<String, Value>> = rows.iter().filter(|r| key(r) > 0.0).collect();
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
        for (key, list, what) in [
            ("top_by_flops", top(&flops_of), "FLOPs"),
            ("top_by_bytes_accessed", top(&bytes_of), "bytes accessed"),
        ] {
            if list.is_empty() && !rows.is_empty() {
                body.insert(
                    format!("{key}_reason"),
                    json!(unranked_reason(host_executed, what)),
                );
            }
            body.insert(key.into(), Value::Array(list));
        }
        body.insert("total_records".into(), json!(all_records));
        if filter.is_active() {
            body.insert("total_matched".into(), json!(rows.len()));
            if rows.is_empty() {
                body.insert("filter_reason".into(), json!(filter.nothing_matched()));
            }
        }
        body.insert("device_total_time_ps".into(), json!(db.total_time_ps));
        body.insert(
            "self_time_percent_basis".into(),
            json!(xprof_opstats::views::self_time_basis(host_executed)),
        );
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    fn top(path: String, run: Option<&str>) -> Value {
        let mut args = json!({"path": path, "limit": 50});
        if let Some(r) = run {
            args["run"] = json!(r);
        }
        invoke_json(
            env!("CARGO_CRATE_NAME"),
            "get_top_hlo_ops",
            &args.to_string(),
            "{}",
        )
        .map(|env| env["result"].clone())
        .unwrap()
    }

    /// Regression: on a CPU capture no op has FLOPs or bytes, and top_by_flops listed the ops
    /// in time order as if ranked by FLOPs.
    #[test]
    fn lists_of_ops_without_flops_are_empty_with_a_reason_not_ranked_by_nothing() {
        let logdir =
            testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures/jax-cpu/logdir");
        let r = top(logdir.display().to_string(), Some("mlp_steps"));
        assert_eq!(r["host_executed"], json!(true));
        assert!(!r["top_by_time"].as_array().unwrap().is_empty());
        // Each percentage is of the stated basis, whose total is `device_total_time_ps`.
        let basis = r["self_time_percent_basis"].as_str().unwrap();
        assert!(basis.contains("host threads"), "{basis}");
        let total = r["device_total_time_ps"].as_f64().unwrap();
        for op in r["top_by_time"].as_array().unwrap() {
            let share = 100.0 * op["total_self_time_ps"].as_f64().unwrap() / total;
            let pct = op["self_time_percent"].as_f64().unwrap();
            assert!(
                (share - pct).abs() <= 1e-9 * share.max(1.0),
                "{share} vs {pct}"
            );
        }
        for key in ["top_by_flops", "top_by_bytes_accessed"] {
            assert_eq!(r[key], json!([]), "{key}");
            let reason = r[format!("{key}_reason")].as_str().unwrap_or_default();
            assert!(reason.contains("host CPU threads"), "{key}: {reason}");
        }
    }

    /// On a TPU capture every op in top_by_flops has FLOPs (its own or the trace's), in
    /// descending order; a list left empty says why.
    #[test]
    fn ranked_lists_hold_only_ops_with_a_value_in_descending_order() {
        let Some(corpus) = testing::corpus(env!("CARGO_MANIFEST_DIR")) else {
            return;
        };
        let r = top(
            corpus
                .join("fixtures/seed-v6e/logdir")
                .display()
                .to_string(),
            None,
        );
        let flops: Vec<f64> = r["top_by_flops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e["flops"]
                    .as_f64()
                    .or(e["flops_measured"].as_f64())
                    .unwrap()
            })
            .collect();
        assert!(!flops.is_empty());
        assert!(flops.iter().all(|f| *f > 0.0), "{flops:?}");
        assert!(flops.windows(2).all(|w| w[0] >= w[1]), "{flops:?}");
        let bytes: Vec<f64> = r["top_by_bytes_accessed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["bytes_accessed"].as_f64().unwrap())
            .collect();
        assert!(bytes.iter().all(|b| *b > 0.0), "{bytes:?}");
        assert!(r.get("top_by_flops_reason").is_none());
        let basis = r["self_time_percent_basis"].as_str().unwrap();
        assert!(basis.contains("devices"), "{basis}");
        // The capture's one op is a Pallas kernel: FLOPs from the trace, no bytes anywhere.
        if bytes.is_empty() {
            let reason = r["top_by_bytes_accessed_reason"].as_str().unwrap();
            assert!(reason.contains("cost model"), "{reason}");
        }
    }
}
