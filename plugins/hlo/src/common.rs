//! Glue shared by the HLO tools: error mapping, the dump directory, truncation.

use std::path::PathBuf;

use xprof_capture::{CaptureError, Selector, Session};
use xprof_hlo::HloError;
use xprof_hlo::dump::{self, DumpDir};
use xprof_plugin_api::{Call, ErrorKind, Params, ToolError};

pub fn hlo_error(e: HloError) -> ToolError {
    let mut t = ToolError::new(ErrorKind::parse(e.kind()), e.to_string());
    t.hint = e.hint();
    t
}

pub fn capture_error(e: CaptureError) -> ToolError {
    let mut t = ToolError::new(ErrorKind::parse(e.kind()), e.to_string());
    t.hint = e.hint();
    t
}

/// Resolve the capture the call names (`path`, `logdir`, `run`).
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

/// The `dump_dir` parameter every dump tool takes.
pub fn dump_dir_param(p: Params) -> Params {
    p.path(
        "dump_dir",
        "XLA dump directory (what --xla_dump_to wrote). Default: $XLA_HLO_DUMP_DIR.",
        Some("XLA_HLO_DUMP_DIR"),
    )
}

/// Scan the dump directory named by `--dump_dir` (or `$XLA_HLO_DUMP_DIR`).
pub fn dump_dir(call: &mut Call) -> Result<DumpDir, ToolError> {
    let dir: PathBuf =
        dump::dump_dir_from(call.opt_nonempty("dump_dir")?.as_deref()).map_err(hlo_error)?;
    let d = dump::scan(&dir).map_err(hlo_error)?;
    call.read_dir(&dir);
    Ok(d)
}

/// Read one stage file (recorded as an input).
pub fn read_stage(call: &mut Call, path: &std::path::Path) -> Result<String, ToolError> {
    let t = dump::read_text(path).map_err(hlo_error)?;
    call.read_file(path);
    Ok(t)
}

/// `max_lines`: <= 0 means everything.
pub fn max_lines(call: &Call, default: i64) -> Result<i64, ToolError> {
    call.i64_or("max_lines", default)
}

pub fn truncation_note(kept: i64, total: usize) -> String {
    format!("\n... (truncated after {kept} lines, total {total}. Use max_lines=-1 to see all)")
}
