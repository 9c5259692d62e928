//! Glue shared by the HLO tools: error mapping, the dump directory, truncation.

use std::path::PathBuf;

use xprof_capture::Session;
use xprof_hlo::dump::{self, DumpDir};
use xprof_hlo::{Direction, HloError};
use xprof_plugin_api::{Call, Params, ToolError};
pub use xprof_plugin_support::session;

pub fn hlo_error(e: HloError) -> ToolError {
    xprof_plugin_support::lib_error(e.kind(), &e, e.hint())
}

/// A module from a capture (an `HloProto`) is read by printing it as XLA prints it and
/// parsing that text: when the text does not parse back, the proto itself is inconsistent (an
/// operand or callee id that no instruction or computation has, say), and the position in text
/// the user never saw would not help.
pub fn proto_module_error(module: &str, e: HloError) -> ToolError {
    let mut t = hlo_error(e);
    t.message = format!(
        "module `{module}`: its HLO proto is inconsistent and cannot be analysed (printed as HLO text, it does not parse back: {})",
        t.message
    );
    t.hint = Some(
        "the module in the capture (or its *.hlo_proto.pb) is damaged or was written by a tool that left ids dangling; re-capture, or read it with get_hlo_module_content".into(),
    );
    t
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
    let t = dump::read_stage_text(path).map_err(hlo_error)?;
    call.read_file(path);
    Ok(t)
}

/// How the neighborhood tools walk the graph: `radius`, `direction`, `follow_calls`.
pub fn walk_params(p: Params) -> Params {
    p.integer_min("radius", "Hops from the instruction.", Some(2), 0)
        .string_enum(
            "direction",
            "Edges to follow.",
            &["both", "operands", "users"],
            "both",
        )
        .boolean(
            "follow_calls",
            "Also step into called computations (fusion bodies, call/while bodies) and back out to callers.",
            false,
        )
}

/// `max_nodes`, the neighborhood tools' size limit.
pub fn max_nodes_param(p: Params) -> Params {
    p.integer_min(
        "max_nodes",
        "At most this many nodes (0: no limit).",
        Some(200),
        0,
    )
}

/// The neighborhood walk a call asks for ([`walk_params`] and [`max_nodes_param`]).
pub struct Walk {
    pub radius: usize,
    pub direction: Direction,
    pub max_nodes: usize,
    pub follow_calls: bool,
}

pub fn walk_args(call: &Call) -> Result<Walk, ToolError> {
    Ok(Walk {
        radius: call.usize_or("radius", 2)?,
        direction: Direction::parse(&call.str_or("direction", "both")?).ok_or_else(|| {
            ToolError::invalid("argument `direction` must be both, operands or users")
        })?,
        max_nodes: call.usize_or("max_nodes", 200)?,
        follow_calls: call.bool_or("follow_calls", false)?,
    })
}

/// `max_lines`: <= 0 means everything.
pub fn max_lines(call: &Call, default: i64) -> Result<i64, ToolError> {
    call.i64_or("max_lines", default)
}

pub fn truncation_note(kept: i64, total: usize) -> String {
    format!("\n... (truncated after {kept} lines, total {total}. Use max_lines=-1 to see all)")
}

/// A capture's module, loaded: the session, every module's name, the selected one and its
/// proto.
pub struct LoadedModule {
    pub session: Session,
    /// Every module's name; `None` when the module was found as a file without listing the
    /// XSpaces' embedded modules.
    pub available: Option<Vec<String>>,
    pub module: xprof_capture::HloModuleRef,
    pub proto: xprof_proto::xla::HloModuleProto,
    /// A one-shot CLI call: the proto is left to process exit (see `Drop`).
    one_shot: bool,
}

impl Drop for LoadedModule {
    /// A one-shot CLI call leaves the decoded module to process exit, which returns its memory
    /// whole, instead of freeing its thousands of instructions one by one (as the core plugin
    /// does with its last model). A long-lived MCP server frees it.
    fn drop(&mut self) {
        if self.one_shot {
            std::mem::forget(std::mem::take(&mut self.proto));
        }
    }
}

impl LoadedModule {
    /// The `capture` block capture tools put first.
    pub fn capture_block(&self) -> serde_json::Value {
        let used: Vec<_> = self.session.hosts.iter().collect();
        self.session.capture_block(&used, &[])
    }
}

/// Resolve the capture, list its modules (files and `/host:metadata`) and load `module_name`
/// (default: the first by name). `Ok(None)` when the capture has no HLO module at all.
pub fn load_module(call: &mut Call) -> Result<Option<LoadedModule>, ToolError> {
    let session = session(call)?;
    let name = call.opt_nonempty("module_name")?;
    // A file named exactly like the request wins over any embedded copy, so the XSpaces
    // (possibly hundreds of MB) need not be opened to find it.
    if let Some(n) = name.as_deref()
        && let Some(m) = session
            .hlo_protos
            .iter()
            .filter_map(|p| xprof_capture::HloModuleRef::from_file(p))
            .find(|m| m.name == n.trim())
    {
        call.read_file(m.path());
        let proto = xprof_hlo::capture::load(&m).map_err(hlo_error)?;
        return Ok(Some(LoadedModule {
            available: None,
            session,
            module: m,
            proto,
            one_shot: xprof_plugin_support::is_cli_call(call),
        }));
    }
    let (mods, read) = xprof_hlo::capture::list_modules(&session).map_err(hlo_error)?;
    for p in &read {
        call.read_file(p);
    }
    if mods.is_empty() {
        return Ok(None);
    }
    let module = xprof_hlo::capture::select(&mods, name.as_deref())
        .map_err(hlo_error)?
        .clone();
    call.read_file(module.path());
    let proto = xprof_hlo::capture::load(&module).map_err(hlo_error)?;
    Ok(Some(LoadedModule {
        session,
        available: Some(mods.into_iter().map(|m| m.name).collect()),
        module,
        proto,
        one_shot: xprof_plugin_support::is_cli_call(call),
    }))
}

/// The "no data" answer of HLO capture tools.
pub fn no_hlo() -> xprof_plugin_api::ToolOutput {
    xprof_plugin_api::ToolOutput::no_data(
        "the capture has no HLO module: no <module>(<program_id>).hlo_proto.pb file and no 'Hlo Proto' stat on the /host:metadata plane",
        &[
            "capture with jax.profiler / xprof (HLO protos are recorded in /host:metadata)",
            "or dump modules with XLA_FLAGS=--xla_dump_to=<dir> --xla_dump_hlo_as_text and use the *_hlo_dump tools",
        ],
    )
}

/// `module_name` parameter.
pub fn module_param(p: Params) -> Params {
    p.string(
        "module_name",
        "Module as list_hlo_modules names it (`jit_f(123)`); the bare name or the program id also work when unique. Default: the first module.",
    )
}

/// A text result of a capture tool: the `capture` block first (as every capture tool's result
/// starts), then `format`, `text` and the rest.
pub fn capture_text(
    capture: serde_json::Value,
    format: &str,
    text: String,
    extra: serde_json::Map<String, serde_json::Value>,
) -> xprof_plugin_api::ToolOutput {
    let mut o = serde_json::Map::new();
    o.insert("capture".into(), capture);
    o.insert("format".into(), format.into());
    o.insert("text".into(), text.into());
    o.extend(extra.into_iter().filter(|(k, _)| k != "capture"));
    xprof_plugin_api::ToolOutput::new(
        serde_json::Value::Object(o),
        xprof_plugin_api::ContentType::Text,
    )
}
