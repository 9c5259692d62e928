//! Glue shared by the core tools: capture selection and error mapping.

use xprof_capture::{CaptureError, Selector, Session};
use xprof_plugin_api::{Call, ErrorKind, ToolError};

pub fn capture_error(e: CaptureError) -> ToolError {
    let mut t = ToolError::new(ErrorKind::parse(e.kind()), e.to_string());
    t.hint = e.hint();
    t
}

/// Resolve the capture the call names (`path`, `logdir`, `run`) and record the directories
/// that were listed to find it.
pub fn session(call: &mut Call) -> Result<Session, ToolError> {
    let sel = Selector {
        path: call.opt_nonempty("path")?,
        logdir: call.opt_nonempty("logdir")?,
        run: call.opt_nonempty("run")?,
    };
    let s = xprof_capture::resolve(&sel).map_err(capture_error)?;
    for d in &s.scanned_dirs {
        call.read_dir(d);
    }
    Ok(s)
}

use xprof_capture::HostFile;
use xprof_opstats::OpStats;
use xprof_opstats::load::LoadError;

/// A library load error as a tool error (kind and hint from the library).
pub fn load_error(e: LoadError) -> ToolError {
    let mut t = ToolError::new(ErrorKind::parse(e.kind()), e.to_string());
    t.hint = Some(e.hint().to_string());
    t
}

/// The XSpace files a call reads: `--host` picks one, else all hosts of the run.
pub fn selected_hosts<'a>(call: &Call, s: &'a Session) -> Result<Vec<&'a HostFile>, ToolError> {
    let host = call.opt_nonempty("host")?;
    s.select_hosts(host.as_deref()).map_err(capture_error)
}

/// Build OpStats for the selected hosts (combined when several), recording every file read.
/// Returns the stats, the hosts used and warnings for the capture block.
pub fn op_stats<'a>(
    call: &mut Call,
    s: &'a Session,
) -> Result<(OpStats, Vec<&'a HostFile>, Vec<String>), ToolError> {
    let hosts = selected_hosts(call, s)?;
    for h in &hosts {
        call.read_file(&h.path);
    }
    for f in &s.hlo_protos {
        call.read_file(f);
    }
    let loaded: Vec<Result<(xprof_opstats::HostSpace, Vec<String>), LoadError>> = hosts
        .iter()
        .map(|h| xprof_opstats::load::load_host(&h.name, &h.path, &s.hlo_protos))
        .collect();
    let mut per_host = Vec::new();
    let mut warnings = Vec::new();
    for r in loaded {
        let (space, w) = r.map_err(load_error)?;
        warnings.extend(w);
        per_host.push(xprof_opstats::build(&space));
    }
    warnings.dedup();
    let stats =
        xprof_opstats::combine(per_host).ok_or_else(|| ToolError::internal("no host selected"))?;
    Ok((stats, hosts, warnings))
}

/// Put the capture block first in `body`.
pub fn with_capture(
    s: &Session,
    used: &[&HostFile],
    warnings: &[String],
    body: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("capture".into(), s.capture_block(used, warnings));
    m.insert("run".into(), serde_json::Value::from(s.run.clone()));
    m.extend(body);
    serde_json::Value::Object(m)
}

/// Flags that capture device op traces, for "no data" answers.
pub const DEVICE_TRACE_FLAGS: &[&str] = &[
    "jax.profiler.trace(...) around device work (device tracer on)",
    "ProfileOptions.device_tracer_level=1",
];
