use serde_json::{Map, Value, json};
use xprof_hlo::print::ModuleView;
use xprof_hlo::query::{GraphDb, SqlLimits};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{hlo_error, load_module, module_param, no_hlo};

pub struct QueryHloGraph;
register_tool!(QueryHloGraph);

const MODES: &[&str] = &[
    "summary",
    "opcode_stats",
    "fusion_blockers",
    "shortest_path",
    "call_tree",
    "sql",
    "search",
    "largest_tensors",
    "fusion_contents",
    "neighbors",
];

impl Tool for QueryHloGraph {
    fn name(&self) -> &'static str {
        "query_hlo_graph"
    }
    fn summary(&self) -> &'static str {
        "Query a captured module as a graph database (XProf CLI's query_hlo_graph)"
    }
    fn doc(&self) -> &'static str {
        "Query a captured HLO module as tables — computations(id, name, is_entry, \
         instruction_count, root_id, is_in_fusion), instructions(id, name, computation_name, \
         opcode, category, shape, dtype, layout, is_root, is_fusion_blocker, is_in_fusion, \
         is_kernel_op, operand_count, user_count, operands_json, called_computations_json, \
         metadata_op_name, metadata_source_file, metadata_source_line, flops, bytes_accessed, \
         optimal_seconds, expression), edges(src_id, dst_id, operand_index), \
         call_edges(caller_instr_id, caller_comp_name, callee_comp_name). Modes: summary, \
         opcode_stats, fusion_blockers, call_tree, search (opcode/category/comp_name/\
         name_pattern filters, sort_by), shortest_path (src_op → dst_op), largest_tensors, \
         fusion_contents (op = a fusion), neighbors (op's operands and users), and sql: one \
         read-only SELECT/WITH statement (anything else is rejected, exit 4), stopped with exit 4 \
         past timeout_s (default 10 s) or max_rows (default 100,000). flops and bytes \
         are shape-derived estimates, as XProf's CLI computes them."
    }
    fn params(&self) -> Params {
        module_param(Params::new().capture())
            .string_enum("mode", "What to query.", MODES, "summary")
            .string("opcode", "search: only this opcode.")
            .string("category", "search: only this category (fusion, convolution, elementwise, data formatting, reduction, ...).")
            .string("comp_name", "search: only this computation.")
            .string("name_pattern", "search: case-insensitive substring of the name or expression.")
            .string("src_op", "shortest_path: start instruction.")
            .string("dst_op", "shortest_path: end instruction.")
            .string("op", "fusion_contents / neighbors: the instruction.")
            .string("sql", "sql: one read-only SELECT or WITH statement.")
            .integer_min("limit", "At most this many rows (0: no limit).", Some(50), 0)
            .integer_min(
                "timeout_s",
                "sql: stop the query after this many seconds (an error, exit 4).",
                Some(SqlLimits::DEFAULT_TIMEOUT_S as i64),
                1,
            )
            .integer_min(
                "max_rows",
                "sql: a query producing more rows than this is stopped (an error, exit 4); --limit cuts the answer first.",
                Some(SqlLimits::DEFAULT_MAX_ROWS as i64),
                1,
            )
            .string_enum("sort_by", "search: order.", &["id", "count", "flops", "bytes"], "id")
    }
    fn output(&self) -> &'static str {
        "{capture, status, module_name, mode, ...mode fields (see XProf CLI): summary {entry_computation, computation_count, \
         instruction_count, edge_count, fusion_count, custom_call_count, fusion_blocker_count, top_opcodes}; \
         search {count, match_count, rows}; shortest_path {found, distance, direction, path}; sql {row_count, rows, truncated}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Summary of the bundled matmul module",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul"}),
            )
            .expect(&["top_opcodes", "instruction_count"]),
            Example::new(
                "Read-only SQL over the instruction table",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps", "mode": "sql",
                       "sql": "SELECT opcode, COUNT(*) AS n, SUM(flops) AS flops FROM instructions GROUP BY opcode ORDER BY n DESC"}),
            )
            .expect(&["rows", "row_count"]),
            Example::new(
                "Largest tensors of jit_train_step",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train", "module_name": "jit_train_step(8)",
                       "mode": "largest_tensors", "limit": 5}),
            )
            .expect(&["rows"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let mode = call.str_or("mode", "summary")?;
        let limit = call.usize_or("limit", 50)?;
        let req = |call: &Call, k: &str| -> Result<String, ToolError> {
            call.opt_nonempty(k)?.ok_or_else(|| {
                ToolError::usage(format!("mode={mode} needs --{k}"))
                    .with_hint(format!("pass --{k} <value>"))
            })
        };
        let sql = if mode == "sql" {
            Some(req(call, "sql")?)
        } else {
            None
        };
        let limits = SqlLimits {
            timeout: std::time::Duration::from_secs(
                call.usize_or("timeout_s", SqlLimits::DEFAULT_TIMEOUT_S as usize)? as u64,
            ),
            max_rows: call.usize_or("max_rows", SqlLimits::DEFAULT_MAX_ROWS)?,
        };
        let (src, dst) = if mode == "shortest_path" {
            (Some(req(call, "src_op")?), Some(req(call, "dst_op")?))
        } else {
            (None, None)
        };
        let op = if matches!(mode.as_str(), "fusion_contents" | "neighbors") {
            Some(req(call, "op")?)
        } else {
            None
        };
        let filters = (
            call.opt_nonempty("opcode")?,
            call.opt_nonempty("category")?,
            call.opt_nonempty("comp_name")?,
            call.opt_nonempty("name_pattern")?.map(|p| p.to_lowercase()),
        );
        let sort_by = call.str_or("sort_by", "id")?;
        let Some(lm) = load_module(call)? else {
            return Ok(no_hlo());
        };
        let view = ModuleView::new(&lm.proto);
        let db = GraphDb::build(&view, &lm.module.name);
        let mut o = Map::new();
        o.insert("capture".into(), lm.capture_block());
        o.insert("status".into(), json!("SUCCESS"));
        o.insert("module_name".into(), json!(lm.module.name));
        o.insert("mode".into(), json!(mode));
        let cap = |v: Vec<Value>| -> (Vec<Value>, bool) {
            let truncated = limit > 0 && v.len() > limit;
            (
                v.into_iter()
                    .take(if limit > 0 { limit } else { usize::MAX })
                    .collect(),
                truncated,
            )
        };
        match mode.as_str() {
            "summary" => {
                if let Value::Object(m) = db.summary() {
                    o.extend(m);
                }
            }
            "opcode_stats" => {
                let rows = db.opcode_stats();
                o.insert("rows".into(), json!(rows));
                o.insert("opcode_stats".into(), json!(rows));
            }
            "fusion_blockers" => {
                let rows: Vec<Value> = db
                    .instructions
                    .iter()
                    .filter(|r| r.is_fusion_blocker)
                    .map(|r| db.search_row(r))
                    .collect();
                let n = rows.len();
                let (rows, truncated) = cap(rows);
                o.insert("count".into(), json!(n));
                o.insert("fusion_blockers".into(), json!(rows));
                o.insert("truncated".into(), json!(truncated));
            }
            "call_tree" => {
                o.insert("entry_computation".into(), json!(db.entry));
                let edges: Vec<Value> = db
                    .call_edges
                    .iter()
                    .map(|e| {
                        json!({"caller_comp_name": e.caller_comp_name, "caller_instruction": e.caller_instruction,
                               "caller_opcode": e.caller_opcode, "callee_comp_name": e.callee_comp_name,
                               "callee_instruction_count": e.callee_instruction_count})
                    })
                    .collect();
                o.insert("call_edges".into(), json!(edges));
            }
            "search" | "largest_tensors" => {
                let (opcode, category, comp, pat) = &filters;
                let mut rows: Vec<&xprof_hlo::query::InstrRow> = db
                    .instructions
                    .iter()
                    .filter(|r| opcode.as_ref().is_none_or(|x| &r.opcode == x))
                    .filter(|r| {
                        category
                            .as_ref()
                            .is_none_or(|x| r.category.eq_ignore_ascii_case(x))
                    })
                    .filter(|r| comp.as_ref().is_none_or(|x| &r.computation_name == x))
                    .filter(|r| {
                        pat.as_ref().is_none_or(|p| {
                            r.name.to_lowercase().contains(p)
                                || r.expression.to_lowercase().contains(p)
                        })
                    })
                    .collect();
                match (mode.as_str(), sort_by.as_str()) {
                    ("largest_tensors", _) => {
                        rows.sort_by(|a, b| b.output_bytes.total_cmp(&a.output_bytes))
                    }
                    (_, "flops") => rows.sort_by(|a, b| b.flops.total_cmp(&a.flops)),
                    (_, "bytes") => {
                        rows.sort_by(|a, b| b.bytes_accessed.total_cmp(&a.bytes_accessed))
                    }
                    (_, "count") => rows.sort_by_key(|r| std::cmp::Reverse(r.user_count)),
                    _ => {}
                }
                let n = rows.len();
                let rows: Vec<Value> = rows
                    .iter()
                    .map(|r| {
                        let mut v = db.search_row(r);
                        if mode == "largest_tensors" {
                            v["output_bytes"] = json!(r.output_bytes);
                        }
                        v
                    })
                    .collect();
                let (rows, truncated) = cap(rows);
                o.insert("count".into(), json!(rows.len()));
                o.insert("match_count".into(), json!(n));
                o.insert("truncated".into(), json!(truncated));
                o.insert("rows".into(), json!(rows));
                if mode == "search" {
                    o.insert("instructions".into(), json!(rows));
                }
            }
            "shortest_path" => {
                let s = db
                    .find(src.as_deref().unwrap_or_default())
                    .map_err(hlo_error)?;
                let d = db
                    .find(dst.as_deref().unwrap_or_default())
                    .map_err(hlo_error)?;
                match db.shortest_path(s, d) {
                    Some((dir, path)) => {
                        o.insert("found".into(), json!(true));
                        o.insert("distance".into(), json!(path.len() - 1));
                        o.insert("direction".into(), json!(dir));
                        let steps: Vec<Value> = path
                            .iter()
                            .map(|(i, rel)| {
                                let r = &db.instructions[*i];
                                json!({"id": r.id, "name": r.name, "opcode": r.opcode, "computation": r.computation_name,
                                       "relation": rel, "expression": r.expression})
                            })
                            .collect();
                        o.insert("path".into(), json!(steps));
                    }
                    None => {
                        o.insert("found".into(), json!(false));
                        o.insert("distance".into(), Value::Null);
                        o.insert("path".into(), json!([]));
                    }
                }
            }
            "fusion_contents" => {
                let i = db
                    .find(op.as_deref().unwrap_or_default())
                    .map_err(hlo_error)?;
                let r = &db.instructions[i];
                let Some(body) = r.called_computations.first() else {
                    return Err(ToolError::invalid(format!(
                        "instruction '{}' ({}) calls no computation",
                        r.name, r.opcode
                    ))
                    .with_hint("pass a fusion (or call/while) instruction as --op"));
                };
                let rows: Vec<Value> = db
                    .instructions
                    .iter()
                    .filter(|x| &x.computation_name == body)
                    .map(|x| db.search_row(x))
                    .collect();
                o.insert("op".into(), json!(r.name));
                o.insert("computation".into(), json!(body));
                o.insert("count".into(), json!(rows.len()));
                o.insert("rows".into(), json!(rows));
            }
            "neighbors" => {
                let i = db
                    .find(op.as_deref().unwrap_or_default())
                    .map_err(hlo_error)?;
                let list = |v: &[usize]| -> Vec<Value> {
                    v.iter()
                        .map(|&k| db.search_row(&db.instructions[k]))
                        .collect()
                };
                o.insert("op".into(), json!(db.instructions[i].name));
                o.insert("operands".into(), json!(list(db.operands(i))));
                o.insert("users".into(), json!(list(db.users(i))));
            }
            "sql" => {
                let (rows, truncated) = db
                    .sql(sql.as_deref().unwrap_or_default(), limit, limits)
                    .map_err(|e| {
                        let limit_hit = matches!(e, xprof_hlo::HloError::SqlLimit { .. });
                        let mut t = hlo_error(e);
                        if !limit_hit {
                            t.hint = Some(
                                "tables: computations, instructions, edges, call_edges; only one SELECT/WITH statement".into(),
                            );
                        }
                        t
                    })?;
                o.insert("row_count".into(), json!(rows.len()));
                o.insert("truncated".into(), json!(truncated));
                o.insert("rows".into(), json!(rows));
            }
            other => return Err(ToolError::invalid(format!("unknown mode `{other}`"))),
        }
        Ok(ToolOutput::json(o.into()))
    }
}
