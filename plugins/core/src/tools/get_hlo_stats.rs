use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{session, with_capture};
use crate::op_filter::OpFilter;

pub struct GetHloStats;
register_tool!(GetHloStats);

impl Tool for GetHloStats {
    fn name(&self) -> &'static str {
        "get_hlo_stats"
    }
    fn summary(&self) -> &'static str {
        "Per-HLO-op statistics table (XProf hlo_stats), by self time"
    }
    fn doc(&self) -> &'static str {
        "XProf's hlo_stats table: one row per HLO op (program, category, expression, framework \
         op, occurrences, total/self time in us with exact ps, % of device time, FLOP rates, \
         memory bandwidths, operational intensity, bound_by), sorted by self time. On CPU-only \
         captures (where XProf shows nothing) the rows are the XLA ops the CPU backend ran on \
         host threads (`host_executed: true`, core_type `Host`); their % is of the summed \
         windows of the threads that ran XLA ops (first op begin to last op end per thread), \
         and their FLOPs/bytes are null (the trace has none)."
    }
    fn params(&self) -> Params {
        OpFilter::params(
            Params::new()
                .capture()
                .host()
                .integer_min("limit", "Maximum rows (0 = all).", Some(100), 0)
                .string_enum(
                    "sort_by",
                    "Row order (XProf's agent CLI's choices).",
                    &["self_time", "total_time", "occurrences", "flops", "bandwidth"],
                    "self_time",
                )
                .boolean(
                    "include_nested",
                    "Keep the rows of ops run inside another op (SparseCore ops, `parent_op_name`); XProf's table has them, its agent CLI hides them by default.",
                    true,
                ),
            false,
        )
    }
    fn output(&self) -> &'static str {
        "{capture, run, host_executed, total_time_ps, self_time_percent_basis, total_records, returned_records, truncated, rows: [...]}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "HLO stats of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["rows"]),
            Example::new(
                "Host-executed XLA ops of the bundled CPU matmul capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul", "limit": 5}),
            )
            .expect(&["rows", "host_executed"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 100)?;
        let filter = OpFilter::from_call(call)?;
        let sort_by = call.str_or("sort_by", "self_time")?;
        let include_nested = call.bool_or("include_nested", true)?;
        let s = session(call)?;
        let (st, used, warnings) =
            crate::common::op_stats_with(call, &s, xprof_opstats::BuildOptions::OP_DATABASES)?;
        let Some((db, host_executed)) = xprof_opstats::views::op_db(&st) else {
            return Ok(crate::common::no_op_data(call, &s, &st));
        };
        let mut rows = xprof_opstats::views::hlo_stats_of(&st, db);
        let all_records = rows.len();
        rows.retain(|r| {
            filter.keep(r, None)
                && (include_nested
                    || r.get("parent_op_name")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty))
        });
        // XProf's table is in self-time order already; the other orders are stable re-sorts.
        let key = match sort_by.as_str() {
            "total_time" => Some("total_time_ps"),
            "occurrences" => Some("occurrences"),
            "flops" => Some("flops"),
            "bandwidth" => Some("measured_memory_bw"),
            _ => None,
        };
        if let Some(k) = key {
            let v = |r: &Map<String, Value>| r.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            rows.sort_by(|a, b| v(b).total_cmp(&v(a)));
        }
        let total = rows.len();
        let shown: Vec<Value> = rows
            .into_iter()
            .take(if limit == 0 { usize::MAX } else { limit })
            .map(Value::Object)
            .collect();
        let mut body = Map::new();
        body.insert("host_executed".into(), json!(host_executed));
        body.insert("total_time_ps".into(), json!(db.total_time_ps));
        body.insert(
            "self_time_percent_basis".into(),
            json!(xprof_opstats::views::self_time_basis(host_executed)),
        );
        body.insert("total_records".into(), json!(total));
        if total < all_records || filter.is_active() {
            body.insert("unfiltered_records".into(), json!(all_records));
            if total == 0 && filter.is_active() {
                body.insert("filter_reason".into(), json!(filter.nothing_matched()));
            }
        }
        if key.is_some() {
            body.insert("sorted_by".into(), json!(sort_by));
        }
        body.insert("returned_records".into(), json!(shown.len()));
        body.insert("truncated".into(), json!(shown.len() < total));
        body.insert("rows".into(), Value::Array(shown));
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
