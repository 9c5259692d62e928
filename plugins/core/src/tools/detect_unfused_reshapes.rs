use serde_json::{Map, Value, json};
use xprof_memory::{modules, reshapes};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_memory_viewer::{list_modules, memory_error, no_modules};
use crate::common::{op_stats_with, session, with_capture};

pub struct DetectUnfusedReshapes;
register_tool!(DetectUnfusedReshapes);

impl Tool for DetectUnfusedReshapes {
    fn name(&self) -> &'static str {
        "detect_unfused_reshapes"
    }
    fn summary(&self) -> &'static str {
        "Standalone copy/transpose/reshape ops that materialise in HBM before a compute op"
    }
    fn doc(&self) -> &'static str {
        "Finds copy, transpose, reshape and bitcast-convert instructions that XLA left outside \
         any fusion in the capture's HLO modules, so their result round-trips through device \
         memory. Those feeding a compute op (dot, convolution, custom-call, fusion) are the \
         `inefficient_ops` (hbm_materialization_overhead), each with its HLO context (operand \
         and user instructions), the bytes it moves, and its measured time from the capture's \
         op metrics when the op ran in the profile; the rest are listed as \
         `other_formatting_ops`. Ranked by measured time, then bytes."
    }
    fn params(&self) -> Params {
        Params::new().capture().host().integer_min(
            "limit",
            "Ops to return per list; 0 = all.",
            Some(50),
            0,
        )
    }
    fn output(&self) -> &'static str {
        "{capture, run, bottlenecks_found, message, inefficient_ops[{name, category, opcode, \
         module, program_id, computation, shape, output_bytes, input_bytes, measured, time_ps, \
         bytes_accessed, downstream_compute, recommendation, hlo, context{operands, users}}], \
         other_formatting_ops[…], total_inefficient, total_formatting_ops, truncated}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "The TPU v6e capture (one Pallas custom-call: nothing to report)",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["bottlenecks_found", "inefficient_ops"]),
            Example::new(
                "The shared JAX training capture",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train", "limit": 5}),
            )
            .expect(&["bottlenecks_found", "other_formatting_ops"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 50)?;
        let s = session(call)?;
        let mods = list_modules(call, &s)?;
        let (st, used, mut warnings) =
            op_stats_with(call, &s, xprof_opstats::BuildOptions::OP_DATABASES)?;
        if mods.is_empty() {
            return Ok(no_modules(&s, &used));
        }
        let ops: Vec<reshapes::OpTime> = match xprof_opstats::views::op_db(&st) {
            Some((db, _)) => db
                .metrics
                .iter()
                .filter(|m| !m.is_idle())
                .map(|m| reshapes::OpTime {
                    program_id: m.program_id,
                    name: m.name.clone(),
                    occurrences: m.occurrences,
                    time_ps: m.time_ps,
                    self_time_ps: m.self_time_ps,
                    bytes_accessed: m.bytes_accessed,
                })
                .collect(),
            None => {
                warnings.push(
                    "no XLA op events in the capture: ops are ranked by the bytes their shapes move"
                        .into(),
                );
                Vec::new()
            }
        };
        let loaded = modules::load_all(&mods).map_err(memory_error)?;
        let refs = reshapes::ModuleRef::all(&loaded);
        let found = reshapes::detect(&refs, &ops);
        let total = found.len();
        let (bad, other): (Vec<_>, Vec<_>) = found.iter().partition(|f| f.feeds_compute());
        let take = |v: &[&reshapes::Finding]| -> Vec<Value> {
            v.iter()
                .take(if limit == 0 { usize::MAX } else { limit })
                .map(|f| f.to_json())
                .collect()
        };
        let message = if total == 0 {
            "No formatting operations found.".to_string()
        } else if bad.is_empty() {
            "No unfused reshape bottlenecks detected.".to_string()
        } else {
            format!(
                "Detected {} standalone formatting operations causing HBM materialization overhead.",
                bad.len()
            )
        };
        let shown_bad = take(&bad);
        let shown_other = take(&other);
        let mut body = Map::new();
        body.insert("bottlenecks_found".into(), json!(!bad.is_empty()));
        body.insert("message".into(), json!(message));
        body.insert("modules_scanned".into(), json!(refs.len()));
        body.insert("total_formatting_ops".into(), json!(total));
        body.insert("total_inefficient".into(), json!(bad.len()));
        body.insert(
            "truncated".into(),
            json!(shown_bad.len() < bad.len() || shown_other.len() < other.len()),
        );
        body.insert("inefficient_ops".into(), Value::Array(shown_bad));
        body.insert("other_formatting_ops".into(), Value::Array(shown_other));
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
