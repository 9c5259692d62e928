use flate2::Compression;
use flate2::write::GzEncoder;
use regex::Regex;
use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};
use xprof_plugin_support::lib_error;
use xprof_trace::{Filter, TraceWriter};
use xprof_xspace::XSpace;

use crate::common::{Output, capture_error, session, written_to_file};

pub struct ExportTrace;
register_tool!(ExportTrace);

fn trace_error(e: xprof_trace::TraceError) -> ToolError {
    ToolError::path(e.to_string())
        .with_hint("check that the output's filesystem is writable and not full")
}

fn filter(call: &Call) -> Result<Filter, ToolError> {
    let start_us = call.opt_f64("start_us")?;
    let end_us = call.opt_f64("end_us")?;
    if let (Some(s), Some(e)) = (start_us, end_us)
        && e < s
    {
        return Err(
            ToolError::invalid(format!("end_us ({e}) is before start_us ({s})"))
                .with_hint("pass an --end_us >= --start_us"),
        );
    }
    let line_regex = match call.opt_nonempty("line_regex")? {
        None => None,
        Some(p) => Some(Regex::new(&p).map_err(|e| {
            ToolError::invalid(format!("argument `line_regex` is not a valid regex: {e}"))
                .with_hint("pass --line_regex with a Rust/RE2-style regular expression, e.g. 'XLA Ops|python'")
        })?),
    };
    Ok(Filter {
        start_us,
        end_us,
        line_regex,
    })
}

impl Tool for ExportTrace {
    fn name(&self) -> &'static str {
        "export_trace"
    }
    fn summary(&self) -> &'static str {
        "Every event of a capture as a Chrome trace file (trace.json.gz) for Perfetto"
    }
    fn doc(&self) -> &'static str {
        "Writes every XEvent of the capture (all hosts, or --host) as Chrome trace-event JSON, \
         the format Perfetto (ui.perfetto.dev) and chrome://tracing open, with no event cap: \
         planes as processes, lines as threads, each event a complete event (ts/dur in µs, \
         stats as args), `_counters_` samples as counter tracks and `flow` stats as flow \
         events — the same processes, threads and events as the .trace.json.gz JAX writes \
         beside its capture. Gzip-compressed when the output's name ends in .gz (the default \
         file in $TMPDIR does). Cut it down with --start_us/--end_us (µs on the trace's clock, \
         the `ts` values; events overlapping the window are kept) and --line_regex. Returns \
         the written_to_file envelope (path, bytes, sha256) with the counts written."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .path(
                "output_path",
                "File to write (outside the run directory); gzip when it ends in .gz. Default: a new xprof_export_trace_*.json.gz in $TMPDIR.",
                None,
            )
            .short("output_path", 'o')
            .number("start_us", "Keep events that end at or after this time (µs, as the trace's ts).", None)
            .number("end_us", "Keep events that start at or before this time (µs).", None)
            .string("line_regex", "Keep only lines (threads) whose name this regex finds (unanchored).")
            .integer_min(
                "gzip_level",
                "Gzip level, 0–9: 1 (the default) writes a 56 MB capture's 260 MB of JSON in ~1.4 s at ~1.45× the size of gzip -6; 6 is ~3× slower for a third less.",
                Some(1),
                0,
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, status: \"written_to_file\", path, bytes, sha256, content_type, events, counters, flows, processes, threads}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "The bundled CPU capture as a Perfetto trace in $TMPDIR",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul"}),
            )
            .expect(&["path", "bytes", "events"]),
            Example::new(
                "Only the Python thread of the shared JAX capture",
                json!({"path": "${CORPUS}/fixtures/jax-cpu/logdir", "run": "mlp_train", "line_regex": "^python$"}),
            )
            .expect(&["path", "events", "threads"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let filter = filter(call)?;
        let level = call.i64_or("gzip_level", 1)?;
        if !(0..=9).contains(&level) {
            return Err(
                ToolError::invalid(format!("gzip_level {level} is not between 0 and 9"))
                    .with_hint("pass --gzip_level 1 (fast, the default) to 9 (smallest)"),
            );
        }
        let level = level as u32;
        let s = session(call)?;
        let host = call.opt_nonempty("host")?;
        let hosts = s.select_hosts(host.as_deref()).map_err(capture_error)?;
        let out = Output::create(call, &s, self.name(), ".json.gz")?;
        let gzip = call
            .opt_nonempty("output_path")?
            .is_none_or(|p| p.ends_with(".gz"));
        let several = hosts.len() > 1;
        let mut warnings = Vec::new();
        let mut write = |sink: &mut dyn std::io::Write| -> Result<xprof_trace::Summary, ToolError> {
            let mut w = TraceWriter::new(sink).map_err(trace_error)?;
            for (i, h) in hosts.iter().enumerate() {
                call.read_file(&h.path);
                let space =
                    XSpace::open(&h.path).map_err(|e| lib_error(e.kind(), &e, Some(e.hint())))?;
                if !space.is_complete() {
                    warnings.extend(space.diagnostics().iter().cloned());
                }
                w.add_host(
                    &space,
                    several.then_some(h.name.as_str()),
                    i as u32,
                    &filter,
                )
                .map_err(trace_error)?;
            }
            Ok(w.finish().map_err(trace_error)?.1)
        };
        let (summary, out) = if gzip {
            // The trace is written in small pieces; the compressor wants large ones.
            let gz = GzEncoder::new(out, Compression::new(level));
            let mut buf = std::io::BufWriter::with_capacity(1 << 18, gz);
            let summary = write(&mut buf)?;
            let gz = buf
                .into_inner()
                .map_err(|e| trace_error(e.into_error().into()))?;
            (summary, gz.finish().map_err(|e| trace_error(e.into()))?)
        } else {
            let mut out = out;
            (write(&mut out)?, out)
        };
        let written = out.finish()?;
        let mut body = Map::new();
        body.insert("events".into(), json!(summary.events));
        body.insert("counters".into(), json!(summary.counters));
        body.insert("flows".into(), json!(summary.flows));
        body.insert("processes".into(), json!(summary.processes));
        body.insert("threads".into(), json!(summary.threads));
        body.insert(
            "open_with".into(),
            json!("https://ui.perfetto.dev (Open trace file), or chrome://tracing"),
        );
        let content_type = if gzip {
            "application/gzip"
        } else {
            "application/json"
        };
        Ok(written_to_file(&s, &hosts, &warnings, &written, content_type, body).into())
    }
}
