use std::path::Path;

use serde_json::{Map, Value, json};
use xprof_capture::Selector;
use xprof_llo::expand_tilde;
use xprof_llo::trace::wall::{WallInputs, device_busy_p50_ms, report};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};
use xprof_xspace::XSpace;

use crate::common::{capture_block, capture_error, open_host, regex_arg, session, xspace_error};

pub struct GetDeviceWallReport;
register_tool!(GetDeviceWallReport);

impl Tool for GetDeviceWallReport {
    fn name(&self) -> &'static str {
        "get_device_wall_report"
    }
    fn summary(&self) -> &'static str {
        "Device-busy (trace) vs wall-clock (your measurement) for a kernel, both framings labelled"
    }
    fn doc(&self) -> &'static str {
        "device_busy_p50_ms is the median instrumented kernel span in the trace (kernel regex, \
         default all). With --measure_json (a benchmark result file) the first wall/p50-like \
         key with a unit (wall_p50_ms, p50_ms, p50_us, wall.p50_ms, …; baseline subtrees and \
         baseline_/ref_-prefixed keys removed first) is the wall p50, or the value at \
         --wall_key (a JSON pointer); gap_pct / framing compare the two. Several candidates \
         lower wall_confidence and are listed in wall_ambiguous; unitless keys are used only \
         with --wall_unit. --baseline_run (a run of the same \
         logdir) and a baseline subtree give labelled wall_ratio (deployable) and device_ratio \
         (device framing). --floor_ms stamps any claim below a physical floor \
         PHYSICALLY_IMPOSSIBLE."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .string("kernel", "Kernel (op name) regex; default: all instrumented kernels.")
            .path("measure_json", "A wall-clock measurement JSON file.", None)
            .string("baseline_run", "A second run (name under the same logdir, or a path) for the baseline device-busy p50.")
            .number("floor_ms", "A physical floor (e.g. the HBM roofline time) in ms; 0 = none.", Some(0.0))
            .string("wall_key", "JSON pointer to the wall value in --measure_json (e.g. /results/0/p50_us); default: the first wall/p50-like key with a unit.")
            .string_enum("wall_unit", "Unit of wall keys that carry none (p50, wall); without it they are not used.", &["", "ms", "us", "ns", "s"], "")
    }
    fn output(&self) -> &'static str {
        "{capture, run, kernel, device_busy_p50_ms, wall_source?, wall_p50_ms, gap_pct?, framing?, baseline_run?, baseline_device_busy_p50_ms?, baseline_wall_p50_ms?, ratios?, floor_ms?, floor_audit?, caveat}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Device-busy p50 of the v6e kernel",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "kernel": "matmul_optimized"}),
            )
            .expect(&["device_busy_p50_ms", "caveat"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let kernel = call.opt_nonempty("kernel")?.unwrap_or_default();
        let re = regex_arg(call, "kernel", ".*")?;
        let floor = call.f64_or("floor_ms", 0.0)?;
        if !floor.is_finite() || floor < 0.0 {
            return Err(ToolError::invalid(format!(
                "argument `floor_ms` must be >= 0, got {floor}"
            )));
        }
        let measure = match call.opt_nonempty("measure_json")? {
            None => None,
            Some(m) => {
                let p = expand_tilde(&m);
                let text = xprof_xspace::file::read_text(&p).map_err(|e| {
                    ToolError::path(format!("cannot read measure_json {}: {e}", p.display()))
                        .with_hint("pass --measure_json with an existing JSON file")
                })?;
                call.read_file(&p);
                let v: Value = serde_json::from_str(&text).map_err(|e| {
                    ToolError::invalid(format!(
                        "{}:{}:{}: not valid JSON: {e}",
                        p.display(),
                        e.line(),
                        e.column()
                    ))
                    .with_hint(
                        "--measure_json must be a JSON document (e.g. {\"wall_p50_ms\": 0.5})",
                    )
                })?;
                Some((p.display().to_string(), v))
            }
        };
        let s = session(call)?;
        let (h, space) = open_host(call, &s)?;
        let device = device_busy_p50_ms(&space, &re);
        let baseline = match call.opt_nonempty("baseline_run")? {
            None => None,
            Some(b) => {
                let sel = if Path::new(&b).exists() {
                    Selector {
                        path: Some(b.clone()),
                        ..Default::default()
                    }
                } else {
                    // A run of the same logdir (a run directory's logdir is three levels up).
                    let logdir = s
                        .logdir
                        .clone()
                        .or_else(|| s.dir.parent()?.parent()?.parent().map(Path::to_path_buf));
                    Selector {
                        path: None,
                        logdir: logdir.map(|l| l.display().to_string()),
                        run: Some(b.clone()),
                    }
                };
                let bs = xprof_capture::resolve(&sel).map_err(capture_error)?;
                let host = call.opt_nonempty("host")?;
                let bh = bs.first_or_named(host.as_deref()).map_err(capture_error)?;
                call.read_file(&bh.path);
                let bspace = XSpace::open(&bh.path).map_err(xspace_error)?;
                Some((b, device_busy_p50_ms(&bspace, &re)))
            }
        };
        let r = report(WallInputs {
            run: &s.run,
            kernel: &kernel,
            device_ms: device,
            measure,
            baseline_run: baseline.as_ref().map(|(n, d)| (n.as_str(), *d)),
            floor_ms: floor,
            wall_key: call.opt_nonempty("wall_key")?,
            wall_unit: call.opt_nonempty("wall_unit")?,
        });
        let mut out = Map::new();
        out.insert("capture".into(), capture_block(&s, &h, &space));
        if let Value::Object(m) = r {
            out.extend(m);
        }
        out.insert(
            "provenance".into(),
            xprof_llo::provenance(
                &[
                    "device_busy_p50_ms (median instrumented kernel span)",
                    "wall_p50_ms (read from --measure_json)",
                ],
                &["gap_pct", "ratios", "floor_audit"],
                &[
                    "framing",
                    "wall_source (first matching key unless --wall_key)",
                ],
            ),
        );
        Ok(Value::Object(out).into())
    }
}
