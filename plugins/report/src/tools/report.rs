use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};
use xprof_plugin_support::lib_error;
use xprof_report::Inputs;

use crate::common::{Output, capture_error, session, written_to_file};

pub struct Report;
register_tool!(Report);

fn views_error(e: xprof_views::load::ViewLoadError) -> ToolError {
    lib_error(e.kind(), &e, Some(e.hint()))
}

impl Tool for Report {
    fn name(&self) -> &'static str {
        "report"
    }
    fn summary(&self) -> &'static str {
        "A self-contained HTML report with charts: steps, top ops, roofline, memory, advice"
    }
    fn doc(&self) -> &'static str {
        "Writes one HTML file (inline SVG, no script, no network; mail it or attach it to a bug) \
         drawn from the views of all hosts (or --host): run and device summary, key numbers \
         (get_overview), a stacked step-time chart per step, the top ops by self time \
         (get_hlo_stats), the roofline with its ridge points and custom calls marked \
         (get_roofline_model, TPU/GPU), the memory timeline with its peak and the buffers live \
         at it (get_memory_profile, first host), the input-pipeline verdict and the \
         suggestions (get_smart_suggestions); with --baseline, the verdict and the per-op \
         changes against that capture (diff_sessions). A section the capture cannot fill says why. \
         Returns the written_to_file envelope with the charts drawn and the sections missing."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .path(
                "output_path",
                "HTML file to write (outside the run directory). Default: a new xprof_report_*.html in $TMPDIR.",
                None,
            )
            .short("output_path", 'o')
            .path(
                "baseline",
                "A baseline capture (logdir, run directory or .xplane.pb; all its hosts) to compare with: adds the verdict and the per-op changes (diff_sessions).",
                None,
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, status: \"written_to_file\", path, bytes, sha256, content_type: \"text/html\", charts, missing: {section: reason}, verdict? (with --baseline)}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Report of the bundled CPU capture (steps and top ops; no roofline or memory)",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps"}),
            )
            .expect(&["path", "charts", "missing"]),
            Example::new(
                "A two-thread run against the one-thread baseline: the per-op changes",
                json!({"path": "${FIXTURES}/jax-cpu/logdir/plugins/profile/threaded", "baseline": "${FIXTURES}/jax-cpu/logdir/plugins/profile/mlp_steps"}),
            )
            .expect(&["path", "charts", "verdict"]),
            Example::new(
                "Report of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["path", "charts"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let host = call.opt_nonempty("host")?;
        let hosts = s.select_hosts(host.as_deref()).map_err(capture_error)?;
        for h in &hosts {
            call.read_file(&h.path);
        }
        for f in &s.hlo_protos {
            call.read_file(f);
        }
        let out = Output::create(call, &s, self.name(), ".html")?;
        let list: Vec<(String, std::path::PathBuf)> = hosts
            .iter()
            .map(|h| (h.name.clone(), h.path.clone()))
            .collect();
        let run = xprof_views::load::load_hosts(&list, &s.hlo_protos).map_err(views_error)?;
        let (st, empty_intersect) = run
            .op_stats_checked()
            .ok_or_else(|| ToolError::internal("no host selected"))?;

        let overview = Value::Object(xprof_opstats::views::overview(&st));
        let ops = match xprof_opstats::views::op_db(&st) {
            Some((db, _)) => Ok(xprof_opstats::views::hlo_stats_of(&st, db)),
            None => Err(xprof_opstats::views::no_op_reason(&st)),
        };
        let roofline = if st.perf_env.is_some() {
            Ok(xprof_opstats::views::roofline_model(&st))
        } else {
            Err("a CPU-only capture has no device peaks to draw a roofline against".to_string())
        };
        let ip = xprof_views::input_pipeline::input_pipeline_with(
            &st,
            &run.core_details(),
            empty_intersect,
        );
        let mut sig = xprof_views::suggestions::signals_with_events(&st, &ip, &run);
        let raw = xprof_views::load::load_raw(&list, |n| n.starts_with("/device:"))
            .map_err(views_error)?;
        let overlap = xprof_views::overlap::analyze(&raw, Default::default(), 0);
        sig.async_exposure = xprof_views::overlap::AsyncExposure::from_analysis(
            &overlap,
            st.device_db.total_time_ps,
        );
        let suggestions = xprof_views::suggestions::smart_suggestions(&sig)["suggestions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let b = &ip.bottleneck;
        let input_pipeline =
            (b.steps > 0).then(|| (b.input_classification.clone(), b.input_statement.clone()));

        // The memory profile of the first selected host, as get_memory_profile reads it.
        let mem_space =
            xprof_memory::open_xspace(&hosts[0].path, xprof_memory::profile::wanted_plane)
                .map_err(|e| lib_error(e.kind(), &e, Some(e.hint())))?;
        let profile = xprof_memory::profile::build(&mem_space);
        let memory = match profile.peak_allocator() {
            Some(a) => Ok(a),
            None if !profile.has_host_plane => Err(format!(
                "host {} has no /host:CPU plane, where allocator events are recorded",
                hosts[0].name
            )),
            None => Err(format!(
                "no MemoryAllocation/MemoryDeallocation events on /host:CPU of host {} (the runtime records them on TPU, with the GPU BFC allocator, and in TensorFlow)",
                hosts[0].name
            )),
        };

        let diff = match call.opt_nonempty("baseline")? {
            None => None,
            Some(b) => {
                let bs = xprof_capture::resolve(&xprof_capture::Selector {
                    path: Some(b),
                    ..Default::default()
                })
                .map_err(capture_error)?;
                for d in &bs.scanned_dirs {
                    call.read_dir(d);
                }
                for f in bs.hosts.iter().map(|h| &h.path).chain(&bs.hlo_protos) {
                    call.read_file(f);
                }
                let blist: Vec<(String, std::path::PathBuf)> = bs
                    .hosts
                    .iter()
                    .map(|h| (h.name.clone(), h.path.clone()))
                    .collect();
                let brun =
                    xprof_views::load::load_hosts(&blist, &bs.hlo_protos).map_err(views_error)?;
                let bst = brun
                    .op_stats()
                    .ok_or_else(|| ToolError::internal("the baseline has no host"))?;
                let d = xprof_views::diff::diff(
                    xprof_views::diff::Compared::new(&bst),
                    xprof_views::diff::Compared::new(&st),
                    Default::default(),
                );
                Some((bs.run.clone(), d))
            }
        };
        let inputs = Inputs {
            capture: s.capture_block(&hosts, &run.warnings),
            overview,
            ops,
            roofline,
            memory,
            input_pipeline,
            suggestions,
            diff,
        };
        let html = xprof_report::render(&inputs);
        let mut out = out;
        std::io::Write::write_all(&mut out, html.as_bytes())
            .map_err(|e| ToolError::path(format!("writing the report: {e}")))?;
        let written = out.finish()?;
        let charts: Vec<&str> = xprof_report::CHARTS
            .iter()
            .copied()
            .filter(|c| html.contains(&format!("<svg id=\"{c}\"")))
            .collect();
        let mut missing = Map::new();
        for (key, why) in [
            (
                "steps",
                inputs.overview["steps"]["no_steps_reason"]
                    .as_str()
                    .map(String::from),
            ),
            ("ops", inputs.ops.as_ref().err().cloned()),
            ("roofline", inputs.roofline.as_ref().err().cloned()),
            ("memory", inputs.memory.as_ref().err().cloned()),
        ] {
            if let Some(w) = why {
                missing.insert(key.into(), json!(w));
            }
        }
        let mut body = Map::new();
        body.insert("charts".into(), json!(charts));
        body.insert("missing".into(), Value::Object(missing));
        if let Some((_, d)) = &inputs.diff {
            body.insert(
                "verdict".into(),
                d.get("verdict").cloned().unwrap_or(Value::Null),
            );
        }
        Ok(written_to_file(&s, &hosts, &run.warnings, &written, "text/html", body).into())
    }
}
