use std::path::Path;

use serde_json::{Map, Value, json};
use xprof_opstats::OpStats;
use xprof_plugin_api::{
    Call, Example, Params, Tool, ToolError, ToolOutput, register_tool, sdk::InputKind,
};

use xprof_views::diff::{Compared, DiffOptions, diff};
use xprof_views::recompile::{CompileSpans, Covered, host_compile_spans};

use crate::common::{op_stats_visiting, session};

pub struct DiffSessions;
register_tool!(DiffSessions);

const BASELINE: &str = "baseline_session_id";
const OPTIMIZED: &str = "optimized_session_id";

/// One side's capture: resolved and analysed in a call of its own, so that its errors name the
/// argument, and the files it read recorded on the outer call (the result cache's inputs).
fn side(call: &mut Call, arg: &str) -> Result<(OpStats, Covered, Value), ToolError> {
    let value = call.req_str(arg)?;
    let logdir = call.opt_nonempty("logdir")?;
    let mut args = Map::new();
    // A path when it exists (or when there is no logdir to look a run name up in), else a run
    // name under --logdir, as XProf's CLI takes either.
    match logdir {
        Some(l) if !Path::new(&value).exists() => {
            args.insert("logdir".into(), json!(l));
            args.insert("run".into(), json!(value));
        }
        _ => {
            args.insert("path".into(), json!(value));
        }
    }
    if let Some(h) = call.opt_nonempty("host")? {
        args.insert("host".into(), json!(h));
    }
    let mut sub = Call::new(args, call.ctx().clone());
    let named = |e: ToolError| ToolError {
        message: format!("--{arg}: {}", e.message),
        ..e
    };
    let s = session(&mut sub).map_err(named)?;
    // The compilations on each host's clock, to attribute a step-time change to them.
    let mut compiles = CompileSpans::default();
    let (st, used, warnings) = op_stats_visiting(
        &mut sub,
        &s,
        xprof_opstats::BuildOptions::default(),
        |space| compiles.extend(host_compile_spans(space)),
    )
    .map_err(named)?;
    let block = json!({"capture": s.capture_block(&used, &warnings), "run": s.run});
    for input in sub.inputs() {
        match input.kind {
            InputKind::File => call.read_file(&input.path),
            InputKind::Dir => call.read_dir(&input.path),
        }
    }
    Ok((st, compiles.covering(), block))
}

impl Tool for DiffSessions {
    fn name(&self) -> &'static str {
        "diff_sessions"
    }
    fn summary(&self) -> &'static str {
        "Compare two captures: step time, op time, and which ops account for the change"
    }
    fn doc(&self) -> &'static str {
        "Compares an optimized capture against a baseline (each a logdir, run directory, \
         .xplane.pb, or a run name under --logdir): the average step time (XProf's steps; the \
         overview's complete steps when both sides have them), the ops' self time (per step when \
         both sides have steps, else per capture) and a verdict (faster/slower/unchanged within \
         --tolerance_pct, decided by step time when there are steps, else by op time). Then the \
         change by HLO category, by framework op (JAX/TF/PyTorch op_name, stable when XLA \
         renumbers ops) and by HLO op (module + instruction name), largest first, each row with \
         both sides' us, exact ps and occurrences, delta, delta % and its share of the whole \
         op-time change, plus the average per occurrence on each side (comparable whatever the \
         captures' lengths). Works on TPU, GPU and CPU captures (on CPU the ops are the ones the CPU \
         backend ran on host threads). What does not compare (other hardware, no common \
         program, unequal windows without steps) is listed in `warnings`."
    }
    fn params(&self) -> Params {
        Params::new()
            .path(
                BASELINE,
                "The baseline capture: a logdir, run directory, .xplane.pb, or a run name under --logdir.",
                None,
            )
            .path(
                OPTIMIZED,
                "The capture to compare with the baseline (same forms).",
                None,
            )
            .path(
                "logdir",
                "Where run names are looked up. Default: $XPROF_LOGDIR.",
                Some("XPROF_LOGDIR"),
            )
            .host()
            .integer_min(
                "limit",
                "Rows of by_framework_op and by_hlo_op (0 = all).",
                Some(20),
                0,
            )
            .number(
                "tolerance_pct",
                "A change smaller than this percent of the baseline is `unchanged`.",
                Some(2.0),
            )
            .required(BASELINE)
            .required(OPTIMIZED)
    }
    fn output(&self) -> &'static str {
        "{baseline: {capture, run, device_type, op_source, op_time_ps, steps_source, steps, complete_steps, step_time_ms_average, ...}, optimized: {...}, step_time: {basis, baseline_ms, optimized_ms, delta_ms, delta_pct, speedup} | null + step_time_reason, normalization, op_time, verdict: {result, decided_by, delta_pct, tolerance_pct}, by_category: [...], by_framework_op: {total_records, truncated, records}, by_hlo_op: {...}, warnings}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "A capture against itself: unchanged, every delta 0",
                json!({
                    "baseline_session_id": "${FIXTURES}/jax-cpu/logdir/plugins/profile/mlp_steps",
                    "optimized_session_id": "${FIXTURES}/jax-cpu/logdir/plugins/profile/mlp_steps",
                }),
            )
            .expect(&["verdict", "step_time", "by_hlo_op"]),
            Example::new(
                "Two CPU programs without steps: compared per capture, with a warning",
                json!({
                    "baseline_session_id": "${FIXTURES}/jax-cpu/logdir/plugins/profile/matmul",
                    "optimized_session_id": "${FIXTURES}/jax-cpu/logdir/plugins/profile/mlp_steps",
                    "limit": 5,
                }),
            )
            .expect(&["verdict", "warnings", "by_category"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 20)?;
        let tolerance_pct = call.f64_or("tolerance_pct", 2.0)?;
        if !(tolerance_pct.is_finite() && tolerance_pct >= 0.0) {
            return Err(ToolError::invalid(format!(
                "--tolerance_pct must be a number >= 0 (got {tolerance_pct})"
            )));
        }
        let (b, b_compiles, b_block) = side(call, BASELINE)?;
        let (o, o_compiles, o_block) = side(call, OPTIMIZED)?;
        let mut body = diff(
            Compared::new(&b).with_compiles(&b_compiles),
            Compared::new(&o).with_compiles(&o_compiles),
            DiffOptions {
                limit,
                tolerance_pct,
            },
        );
        // Each side's capture header first in its own summary; the summaries first in the
        // result, as the output schema lists them.
        let mut out = Map::new();
        for (k, block) in [("baseline", b_block), ("optimized", o_block)] {
            let mut m = block.as_object().cloned().unwrap_or_default();
            if let Some(Value::Object(s)) = body.shift_remove(k) {
                m.extend(s);
            }
            out.insert(k.into(), Value::Object(m));
        }
        out.extend(body);
        Ok(Value::Object(out).into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    fn profiles(framework: &str) -> std::path::PathBuf {
        testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(framework)
            .join("logdir/plugins/profile")
    }

    fn diff(args: Value) -> Result<Value, xprof_plugin_api::ToolError> {
        invoke_json(
            env!("CARGO_CRATE_NAME"),
            "diff_sessions",
            &args.to_string(),
            "{}",
        )
        .map(|r| r["result"].clone())
    }

    fn ptxla(baseline: &str, optimized: &str) -> Value {
        let p = profiles("ptxla-cpu");
        diff(json!({
            "baseline_session_id": p.join(baseline).display().to_string(),
            "optimized_session_id": p.join(optimized).display().to_string(),
        }))
        .unwrap()
    }

    /// A real PyTorch/XLA loop that recompiles at every step is ~80x slower per step than the
    /// same loop on fixed shapes, and the diff says the compilation is why, in both directions.
    #[test]
    fn a_recompiling_loop_is_slower_because_of_compilation() {
        let d = ptxla("ptxla_train", "ptxla_recompile");
        assert_eq!(d["verdict"]["result"], "slower");
        assert_eq!(d["verdict"]["decided_by"], "average step time");
        let st = &d["step_time"];
        assert!(st["delta_pct"].as_f64().unwrap() > 1000.0, "{st}");
        assert_eq!(st["baseline_compile_ms_measured"], json!(0.0));
        let a = &st["attribution"];
        assert_eq!(a["main_cause"], "XLA compilation inside the steps");
        // The parts add up to the step-time change.
        let sum: f64 = ["op_time_delta_ms", "compile_delta_ms", "rest_delta_ms"]
            .iter()
            .map(|k| a[*k].as_f64().unwrap())
            .sum();
        let delta = st["delta_ms"].as_f64().unwrap();
        assert!(
            (sum - delta).abs() <= 1e-9 * delta.abs(),
            "{sum} vs {delta}"
        );
        // Both captures carry their capture header, and their steps.
        assert_eq!(d["baseline"]["run"], "ptxla_train");
        assert_eq!(d["optimized"]["run"], "ptxla_recompile");
        assert_eq!(d["baseline"]["steps"], json!(6));
        assert_eq!(d["optimized"]["steps"], json!(3));
        assert!(d["baseline"]["capture"]["files_used"].is_array());

        let back = ptxla("ptxla_recompile", "ptxla_train");
        assert_eq!(back["verdict"]["result"], "faster");
        assert_eq!(
            back["step_time"]["attribution"]["main_cause"],
            "XLA compilation inside the steps"
        );
    }

    /// A capture against itself: unchanged, and no row moved.
    #[test]
    fn a_capture_against_itself_is_unchanged() {
        let d = ptxla("ptxla_train", "ptxla_train");
        assert_eq!(d["verdict"]["result"], "unchanged");
        assert_eq!(d["op_time"]["delta_us"], json!(0.0));
        for table in ["by_framework_op", "by_hlo_op"] {
            let rows = d[table]["records"].as_array().unwrap();
            assert!(!rows.is_empty(), "{table}");
            assert!(rows.iter().all(|r| r["status"] == "same"), "{table}");
        }
        assert_eq!(d["warnings"], json!([]));
    }

    /// Run names are looked up under --logdir; a run without steps compares per capture.
    #[test]
    fn run_names_resolve_under_the_logdir_and_a_run_without_steps_compares_per_capture() {
        let logdir = profiles("jax-cpu").join("../..");
        let d = diff(json!({
            "baseline_session_id": "matmul",
            "optimized_session_id": "mlp_steps",
            "logdir": logdir.display().to_string(),
        }))
        .unwrap();
        assert_eq!(d["baseline"]["run"], "matmul");
        assert_eq!(d["step_time"], Value::Null);
        assert!(
            d["step_time_reason"]
                .as_str()
                .unwrap()
                .starts_with("no steps")
        );
        assert_eq!(d["normalization"]["basis"], "per_capture");
        assert_eq!(d["verdict"]["decided_by"], "op self time per capture");
    }

    /// Errors name the argument that caused them.
    #[test]
    fn a_missing_capture_is_a_path_error_naming_its_argument() {
        let here = profiles("jax-cpu").join("mlp_steps").display().to_string();
        let e = diff(json!({
            "baseline_session_id": here,
            "optimized_session_id": "/nonexistent/run",
        }))
        .unwrap_err();
        assert_eq!(e.kind.as_str(), "path");
        assert!(
            e.message.starts_with("--optimized_session_id: "),
            "{}",
            e.message
        );
        let e = diff(json!({
            "baseline_session_id": here,
            "optimized_session_id": here,
            "tolerance_pct": -1,
        }))
        .unwrap_err();
        assert_eq!(e.kind.as_str(), "invalid_value");
    }
}
