//! Glue shared by the kernel tools: directory arguments, library errors → `ToolError` /
//! "no data", and the dump index with its reads recorded.

use std::path::PathBuf;

use xprof_llo::dump::{DumpIndex, Instance, PassChoice, find_pass};
use xprof_llo::{LloError, dir_from_arg_or_env};
use xprof_plugin_api::{Call, Params, ToolError, ToolOutput};

/// A library failure: "no data" becomes a result, everything else a typed error.
pub fn lib_err(e: LloError) -> Result<ToolOutput, ToolError> {
    match e {
        LloError::NoData {
            reason,
            capture_flags,
        } => {
            let flags: Vec<&str> = capture_flags.iter().map(String::as_str).collect();
            Ok(ToolOutput::no_data(reason, &flags))
        }
        other => Err(to_tool_error(other)),
    }
}

pub fn to_tool_error(e: LloError) -> ToolError {
    // "No data" that is not answered as a result (`lib_err`) is an input the tool cannot use.
    let kind = match e.kind() {
        "no_data" => "invalid_value",
        k => k,
    };
    xprof_plugin_support::lib_error(kind, &e, Some(e.hint()))
}

/// Run a tool body whose library errors may be "no data".
pub fn run_lib(f: impl FnOnce() -> Result<ToolOutput, LloError>) -> Result<ToolOutput, ToolError> {
    f().or_else(lib_err)
}

/// The `dump_dir` parameter of the LLO dump tools.
pub fn llo_dump_dir_param(p: Params) -> Params {
    p.path(
        "dump_dir",
        "The --xla_jf_dump_to directory. Default: $XLA_JF_DUMP_DIR.",
        Some("XLA_JF_DUMP_DIR"),
    )
}

/// The required `program` parameter of the tools that read one LLO program.
pub fn program_param(p: Params) -> Params {
    p.string(
        "program",
        "LLO program name from list_llo_programs (required).",
    )
}

/// `--dump_dir`, else `$XLA_JF_DUMP_DIR`, indexed; the listing is recorded for the cache.
pub fn open_dump(call: &mut Call) -> Result<DumpIndex, LloError> {
    let arg = call.opt_nonempty("dump_dir").map_err(tool_to_llo)?;
    let dir = dir_from_arg_or_env(arg.as_deref(), "XLA_JF_DUMP_DIR");
    let idx = DumpIndex::open(dir)?;
    call.read_dir(&idx.dir);
    Ok(idx)
}

/// Argument errors surface through the library error type so one `run_lib` maps all.
pub fn tool_to_llo(e: ToolError) -> LloError {
    LloError::InvalidArg {
        arg: "argument",
        message: e.message,
    }
}

/// Find a pass; when the caller left `pass_label` at its default a missing pass is "no
/// data" (the dump lacks that checkpoint), when they named one it is an invalid value.
pub fn pick_pass<'a>(
    call: &Call,
    inst: &'a Instance,
    default: &str,
    what: &str,
) -> Result<PassChoice<'a>, LloError> {
    let given = call.opt_nonempty("pass_label").map_err(tool_to_llo)?;
    let q = given.clone().unwrap_or_else(|| default.to_string());
    match find_pass(inst, &q) {
        Err(LloError::PassNotFound { query, available }) if given.is_none() => {
            Err(LloError::no_data(
                format!(
                    "this program's dump has no {what} pass (label matching '{query}'); passes present: {available:?}"
                ),
                &[
                    "--xla_jf_dump_to=<dir>",
                    "--xla_jf_dump_llo_text=true",
                    "(no --xla_jf_dump_llo_pass_label_regex filter, or one that keeps this pass)",
                ],
            ))
        }
        other => other,
    }
}

pub fn program_arg(call: &Call) -> Result<String, LloError> {
    call.opt_nonempty("program")
        .map_err(tool_to_llo)?
        .ok_or(LloError::MissingArg("program"))
}

pub fn usize_arg(call: &Call, name: &'static str, default: usize) -> Result<usize, LloError> {
    call.usize_or(name, default)
        .map_err(|e| LloError::InvalidArg {
            arg: name,
            message: e.message,
        })
}

pub fn path_string(p: &std::path::Path) -> String {
    p.display().to_string()
}

#[allow(dead_code)]
pub fn pathbuf(s: &str) -> PathBuf {
    xprof_llo::expand_tilde(s)
}

// ---- captures ---------------------------------------------------------------------------------

use xprof_capture::{HostFile, Session};
pub use xprof_plugin_support::{capture_error, session};
use xprof_xspace::XSpace;

pub fn xspace_error(e: xprof_xspace::XSpaceError) -> ToolError {
    xprof_plugin_support::lib_error(e.kind(), &e, Some(e.hint()))
}

/// One host's XSpace (the named one, else the first), read and recorded.
pub fn open_host(call: &mut Call, s: &Session) -> Result<(HostFile, XSpace), ToolError> {
    let host = call.opt_nonempty("host")?;
    let h = s
        .first_or_named(host.as_deref())
        .map_err(capture_error)?
        .clone();
    call.read_file(&h.path);
    let space = XSpace::open(&h.path).map_err(xspace_error)?;
    Ok((h, space))
}

/// The capture block every capture tool puts first, with the reader's diagnostics as warnings.
pub fn capture_block(s: &Session, h: &HostFile, space: &XSpace) -> serde_json::Value {
    let warnings: Vec<String> = space.diagnostics().to_vec();
    s.capture_block(&[h], &warnings)
}

/// A regex argument (invalid regexes are invalid values naming the argument).
pub fn regex_arg(call: &Call, name: &str, default: &str) -> Result<regex::Regex, ToolError> {
    let pat = call
        .opt_nonempty(name)?
        .unwrap_or_else(|| default.to_string());
    regex::Regex::new(&pat).map_err(|e| {
        ToolError::invalid(format!("argument `{name}` is not a valid regex: {e}")).with_hint(
            format!("pass --{name} with a valid regular expression (e.g. `matmul`)"),
        )
    })
}

/// "No data" naming the kernel-profiling capture flags.
pub fn trace_no_data(reason: impl Into<String>) -> ToolOutput {
    ToolOutput::no_data(reason, xprof_llo::trace::TRACE_CAPTURE_FLAGS)
}
