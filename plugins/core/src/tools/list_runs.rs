use serde_json::json;
use std::path::PathBuf;
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::capture_error;

pub struct ListRuns;
register_tool!(ListRuns);

impl Tool for ListRuns {
    fn name(&self) -> &'static str {
        "list_runs"
    }
    fn summary(&self) -> &'static str {
        "List profiling sessions (runs) in a logdir"
    }
    fn doc(&self) -> &'static str {
        "List the runs under a logdir: every directory <logdir>[/<sub>]/plugins/profile/<run> \
         (sub-directories searched three levels deep), sorted by name, so the newest \
         timestamped run is last.\n\nPATH (or --logdir, default $XPROF_LOGDIR) is the logdir."
    }
    fn params(&self) -> Params {
        Params::new()
            .positional_path(
                "The logdir to list. Default: --logdir or $XPROF_LOGDIR.",
                None,
            )
            .path(
                "logdir",
                "Root of the profile captures. Default: $XPROF_LOGDIR.",
                Some("XPROF_LOGDIR"),
            )
    }
    fn output(&self) -> &'static str {
        "{mode, logdir, runs: [name], count, tip}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Runs of the bundled JAX CPU captures",
                json!({"path": "${FIXTURES}/jax-cpu/logdir"}),
            )
            .expect(&["runs", "count"]),
            Example::new(
                "Runs of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["runs"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let logdir = call
            .opt_nonempty("path")?
            .or(call.opt_nonempty("logdir")?)
            .or_else(|| std::env::var("XPROF_LOGDIR").ok().filter(|s| !s.is_empty()))
            .ok_or_else(|| {
                ToolError::usage("no logdir given")
                    .with_hint("pass PATH or --logdir, or set XPROF_LOGDIR")
            })?;
        let logdir = PathBuf::from(logdir);
        let (runs, scanned) = xprof_capture::list_runs(&logdir).map_err(capture_error)?;
        for d in &scanned {
            call.read_dir(d);
        }
        Ok(json!({
            "mode": "local (in-process, no server)",
            "logdir": logdir.display().to_string(),
            "runs": runs,
            "count": runs.len(),
            "tip": "Pass a run name (with --logdir) or a run directory to get_overview, get_top_hlo_ops, list_hlo_modules, etc.",
        })
        .into())
    }
}
