//! `xprof mcp`: every registry tool served over MCP (rmcp), on stdio by default or streamable
//! HTTP with `--http ADDR`.
//!
//! The tool list is built at run time from the plugins' descriptors. Arguments are checked
//! against each tool's schema here (rmcp does not); malformed ones, a path outside the server's
//! roots (named by an argument, or read by the call, whether it succeeded or not) and every
//! tool failure are an `isError` result carrying the CLI's JSON error object. An unknown tool is
//! a JSON-RPC -32602 error. Each call runs in its own supervised worker process (module
//! `worker`: time and memory limits, cancellation) through the same cached `call_tool` as the
//! CLI, so concurrent calls are served concurrently and a crashing or runaway call is one
//! failed call, never a dead server.

mod framing;
mod http;
pub mod install;
pub mod surface;
pub mod worker;

use std::borrow::Cow;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, JsonObject, ListPromptsResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use xprof_plugin_api::ToolError;

use crate::budget::Form;

use crate::VERSION;
use crate::cli::GlobalOpts;
use crate::output::error_json;
use crate::registry::{Registry, ToolEntry};

// ---------------------------------------------------------------------------------------------
// stdout

static MCP_STDOUT: OnceLock<Mutex<Option<OwnedFd>>> = OnceLock::new();

/// Keep the real stdout for the MCP transport and point fd 1 at stderr, so that nothing else
/// (a plugin's stray `println!`, a library's diagnostics) can corrupt the JSON-RPC stream.
/// Called before plugins load.
pub fn claim_stdout() {
    MCP_STDOUT.get_or_init(|| {
        // SAFETY: dup/dup2 on the process's own standard descriptors; the duplicate is owned
        // by the returned OwnedFd and nothing else closes it.
        let saved = unsafe { libc::dup(libc::STDOUT_FILENO) };
        if saved < 0 {
            return Mutex::new(None);
        }
        unsafe {
            libc::fcntl(saved, libc::F_SETFD, libc::FD_CLOEXEC);
            libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO);
        }
        Mutex::new(Some(unsafe { OwnedFd::from_raw_fd(saved) }))
    });
}

/// The saved stdout (once). `None` if fd 1 could not be duplicated.
fn take_stdout() -> Option<std::fs::File> {
    claim_stdout();
    MCP_STDOUT
        .get()
        .and_then(|m| m.lock().ok().and_then(|mut g| g.take()))
        .map(std::fs::File::from)
}

// ---------------------------------------------------------------------------------------------
// Options

#[derive(Debug, Default)]
struct McpOpts {
    http: Option<String>,
    token: Option<String>,
    roots: Vec<PathBuf>,
    limits: worker::Limits,
    selection: surface::Selection,
}

/// `--http` without an address.
const DEFAULT_HTTP: &str = "127.0.0.1:8792";

fn parse_opts(args: &[String]) -> Result<McpOpts, ToolError> {
    let mut o = McpOpts::default();
    let mut tools_given = false;
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        // A bare `--http` (nothing after it, or another flag) means the default address.
        if a == "--http" && it.peek().is_none_or(|n| n.starts_with("--")) {
            o.http = Some(DEFAULT_HTTP.to_string());
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if a.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |flag: &str| -> Result<String, ToolError> {
            inline
                .clone()
                .or_else(|| it.next_if(|n| !n.starts_with("--")).cloned())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    ToolError::usage(format!("flag {flag} needs a value"))
                        .with_hint("see `xprof mcp --help`")
                })
        };
        match name.replace('-', "_").as_str() {
            "__http" => o.http = Some(value("--http")?),
            "__token" => o.token = Some(value("--token")?),
            "__root" => o.roots.push(PathBuf::from(value("--root")?)),
            "__tools" => {
                if !tools_given {
                    o.selection.sets.clear();
                    tools_given = true;
                }
                o.selection
                    .sets
                    .extend(surface::parse_sets(&value("--tools")?));
            }
            "__plugin" => o.selection.plugins.push(value("--plugin")?),
            "__call_timeout_s" => {
                let v = value("--call_timeout_s")?;
                o.limits.timeout = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| {
                        ToolError::invalid(format!("--call_timeout_s {v}: not a positive number"))
                            .with_hint("give seconds, e.g. --call_timeout_s 600")
                    })?;
            }
            "__call_max_rss_mb" => {
                let v = value("--call_max_rss_mb")?;
                o.limits.max_rss_bytes = v
                    .parse::<u64>()
                    .ok()
                    .filter(|m| *m > 0)
                    .and_then(|m| m.checked_mul(1 << 20))
                    .ok_or_else(|| {
                        ToolError::invalid(format!(
                            "--call_max_rss_mb {v}: not a positive whole number"
                        ))
                        .with_hint("give MiB, e.g. --call_max_rss_mb 16384")
                    })?;
            }
            _ => {
                return Err(
                    ToolError::usage(format!("unknown argument `{a}` to `xprof mcp`")).with_hint(
                        "usage: xprof mcp [--http 127.0.0.1:8792] [--token T] [--root DIR]... \
                         [--tools SET,...] [--plugin NAME]... [--call_timeout_s S] \
                         [--call_max_rss_mb MB]",
                    ),
                );
            }
        }
    }
    if o.token.is_none() {
        o.token = std::env::var("XPROF_MCP_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
    }
    Ok(o)
}

const HELP: &str = "\
xprof mcp: serve every xprof tool over the Model Context Protocol

Usage: xprof mcp [--http [ADDR]] [--token TOKEN] [--root DIR]... [--tools SET,...] [--plugin NAME]...
                 [--call_timeout_s S] [--call_max_rss_mb MB]

  (default)        stdio transport: the client starts `xprof mcp` and speaks JSON-RPC on stdin/stdout
  --http [ADDR]    streamable HTTP at http://ADDR/mcp (default 127.0.0.1:8792; a bare port means
                   127.0.0.1:PORT; port 0 picks a free one; the bound URL is the first line on
                   stdout). Loopback only unless --token is set.
  --token TOKEN    require `Authorization: Bearer TOKEN` over HTTP (default: $XPROF_MCP_TOKEN)
  --root DIR       directory that path arguments must lie in (repeatable). Default: $XPROF_LOGDIR,
                   $XLA_HLO_DUMP_DIR and $XLA_JF_DUMP_DIR where set, else the working directory.
                   Over stdio the roots a client announces (roots/list) are added.
  --tools SET,...  the tools to list and serve: `triage` (the default: the tools that answer why a
                   program is slow or out of memory, ~18 tools), `all`, or a plugin's name (`core`,
                   `hlo`, `kernel`, ...); repeatable and combinable (`--tools triage,hlo`). The
                   example-vendor plugin's tools are listed only with `all` or `--plugin`.
                   `describe_tool` is always listed: the full description of any tool.
  --plugin NAME    add every tool of that plugin (repeatable)
  --call_timeout_s S     each tool call runs in its own worker process, stopped (an isError
                         result naming the limit) after S seconds (default 300)
  --call_max_rss_mb MB   ... or once it holds more than MB MiB of anonymous memory (default
                         8192; mapped capture files do not count)

`xprof mcp install --client claude|claude-desktop|codex|cursor|gemini|vscode [--print] [-- ARGS]`
registers this binary (`xprof mcp ARGS`) in that client's config, or prints what to run or paste.

Host flags apply too: --plugin-dir, --no_cache, --bypass_cache, --cache_ttl.
See docs/MCP.md for client configurations.";

// ---------------------------------------------------------------------------------------------
// Roots

/// `p` made absolute and resolved like the kernel would: the longest existing prefix is
/// canonicalized (symlinks, `..`), the non-existent rest is appended with `..` applied lexically.
pub fn resolve(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    if let Ok(c) = abs.canonicalize() {
        return c;
    }
    let comps: Vec<Component> = abs.components().collect();
    for split in (1..comps.len()).rev() {
        let head: PathBuf = comps[..split].iter().collect();
        if let Ok(mut c) = head.canonicalize() {
            for comp in &comps[split..] {
                match comp {
                    Component::ParentDir => {
                        c.pop();
                    }
                    Component::CurDir => {}
                    other => c.push(other),
                }
            }
            return c;
        }
    }
    crate::cache::absolute_lexical(&abs)
}

/// The configured roots, canonicalized, and a line describing where they came from.
fn configured_roots(o: &McpOpts) -> Result<(Vec<PathBuf>, String), ToolError> {
    if !o.roots.is_empty() {
        let mut out = Vec::new();
        for r in &o.roots {
            let c = r.canonicalize().map_err(|e| {
                ToolError::path(format!("--root {}: {e}", r.display()))
                    .with_hint("pass an existing directory")
            })?;
            out.push(c);
        }
        return Ok((out, "--root".into()));
    }
    let mut out = Vec::new();
    let mut from = Vec::new();
    for var in ["XPROF_LOGDIR", "XLA_HLO_DUMP_DIR", "XLA_JF_DUMP_DIR"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            // A dump dir that does not exist yet still bounds where paths may point.
            out.push(resolve(Path::new(&v)));
            from.push(var);
        }
    }
    if out.is_empty() {
        let cwd = std::env::current_dir().map_err(|e| {
            ToolError::path(format!("cannot read the working directory: {e}"))
                .with_hint("pass --root DIR")
        })?;
        out.push(resolve(&cwd));
        return Ok((out, "working directory".into()));
    }
    Ok((out, from.join(", ")))
}

/// `file://` URI → path (percent-decoded); anything else is ignored.
fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://host/path` names a host; only the local one (empty or localhost) is usable.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

// ---------------------------------------------------------------------------------------------
// Tool list and argument validation

/// The `--help` text of a tool, as the MCP description: summary, doc, output, examples.
pub fn description(t: &ToolEntry) -> String {
    let mut s = t.summary.clone();
    if !t.doc.is_empty() && t.doc != t.summary {
        s.push_str("\n\n");
        s.push_str(&t.doc);
    }
    if !t.output.is_empty() {
        s.push_str("\n\nOutput: ");
        s.push_str(&t.output);
    }
    if !t.example_list().is_empty() {
        s.push_str("\n\nExamples (arguments; ${FIXTURES} = the xprof repository's fixtures/):");
        for ex in t.example_list() {
            s.push_str(&format!(
                "\n- {}: {}",
                ex["description"].as_str().unwrap_or(""),
                ex["args"]
            ));
        }
    }
    s
}

/// The input schema without our `x-` keywords (clients and model APIs may reject unknown
/// keywords; `format` is standard and stays).
pub fn client_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with("x-"))
                .map(|(k, x)| (k.clone(), client_schema(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(client_schema).collect()),
        other => other.clone(),
    }
}

/// The argument every tool takes over MCP that turns the output budget off.
pub const FULL_ARG: &str = "full";
const FULL_DESCRIPTION: &str = "Return the whole result. By default a result over 16 KB keeps its \
    first (most important) rows and says `truncated: true`; size arguments such as `limit` also \
    return what they ask for.";

pub fn mcp_tool(t: &ToolEntry) -> Tool {
    let mut schema = match client_schema(&t.params) {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    };
    // The host's own argument on every tool (module `budget`).
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert(
            FULL_ARG.into(),
            json!({"type": "boolean", "description": FULL_DESCRIPTION}),
        );
    }
    surface::listed_tool(t, schema)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(ty: &str, v: &Value) -> bool {
    match ty {
        "string" => v.is_string(),
        // JSON Schema: 5.0 is an integer.
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => true,
    }
}

/// Check `args` against the tool's schema (the subset our SDK emits: types, enum, minimum,
/// array items, required, additionalProperties). Nulls count as absent and are dropped.
pub fn validate(t: &ToolEntry, args: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let props = t.properties();
    let mut out = Map::new();
    for (k, v) in args {
        let Some(s) = props.get(k) else {
            let mut valid: Vec<&str> = props.keys().map(String::as_str).collect();
            valid.sort_unstable();
            return Err(format!(
                "{}: unknown argument `{k}`; valid arguments: {}",
                t.name,
                if valid.is_empty() {
                    "none".to_string()
                } else {
                    valid.join(", ")
                }
            ));
        };
        if v.is_null() {
            continue;
        }
        if let Some(ty) = s["type"].as_str()
            && !type_ok(ty, v)
        {
            return Err(format!(
                "{}: argument `{k}` must be {ty}, got {} {v}",
                t.name,
                json_type(v)
            ));
        }
        if let (Some(allowed), Some(item_ty)) = (v.as_array(), s["items"]["type"].as_str())
            && let Some(bad) = allowed.iter().find(|x| !type_ok(item_ty, x))
        {
            return Err(format!(
                "{}: argument `{k}` must be an array of {item_ty}, got element {bad}",
                t.name
            ));
        }
        if let Some(allowed) = s["enum"].as_array()
            && !allowed.contains(v)
        {
            return Err(format!(
                "{}: argument `{k}` must be one of {}, got {v}",
                t.name,
                Value::Array(allowed.clone())
            ));
        }
        if let (Some(min), Some(x)) = (s["minimum"].as_f64(), v.as_f64())
            && x < min
        {
            return Err(format!(
                "{}: argument `{k}` must be >= {min}, got {v}",
                t.name
            ));
        }
        out.insert(k.clone(), v.clone());
    }
    for r in t.params["required"].as_array().into_iter().flatten() {
        if let Some(r) = r.as_str()
            && !out.contains_key(r)
        {
            return Err(format!("{}: missing required argument `{r}`", t.name));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The handler

struct Shared {
    reg: Registry,
    /// What tools/list returns.
    tools: Vec<Tool>,
    /// The tools served (canonical names); `describe_tool` is the host's own.
    exposed: std::collections::BTreeSet<String>,
    selection: surface::Selection,
    roots: Vec<PathBuf>,
    opts: GlobalOpts,
    /// This binary, re-executed as each call's worker.
    exe: PathBuf,
    limits: worker::Limits,
}

/// One per connection (stdio) or per request (stateless HTTP); cheap to clone.
#[derive(Clone)]
pub struct XprofMcp {
    shared: Arc<Shared>,
    /// Roots announced by the client (`roots/list`); `None` = not asked yet or changed since.
    client_roots: Arc<tokio::sync::Mutex<Option<Vec<PathBuf>>>>,
}

const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

impl XprofMcp {
    fn error_result(tool: &str, e: &ToolError) -> CallToolResponse {
        CallToolResult::structured_error(error_json(Some(tool), e)).into()
    }

    /// `describe_tool {name}`: answered by the host, no worker.
    fn describe_tool(&self, args: JsonObject) -> CallToolResponse {
        let name = match args.get("name") {
            Some(Value::String(n)) if args.len() == 1 => n.clone(),
            _ => {
                let e = ToolError::usage(format!(
                    "{}: takes one argument, `name` (a string)",
                    surface::DESCRIBE_TOOL
                ))
                .with_hint("e.g. {\"name\": \"get_overview\"}");
                return Self::error_result(surface::DESCRIBE_TOOL, &e);
            }
        };
        let s = &self.shared;
        match surface::describe(&s.reg, &s.exposed, &s.selection, &name) {
            Ok(v) => CallToolResult::structured(v).into(),
            Err(e) => Self::error_result(surface::DESCRIBE_TOOL, &e),
        }
    }

    /// Roots the client announced, fetched once and again after `roots/list_changed`.
    // Roots are deprecated by SEP-2577, but the clients of today still announce them.
    #[allow(deprecated)]
    async fn client_roots(&self, ctx: &RequestContext<RoleServer>) -> Vec<PathBuf> {
        let supports = ctx
            .peer
            .peer_info()
            .is_some_and(|i| i.capabilities.roots.is_some());
        if !supports {
            return Vec::new();
        }
        let mut cached = self.client_roots.lock().await;
        if let Some(r) = cached.as_ref() {
            return r.clone();
        }
        let fetched = tokio::time::timeout(ROOTS_TIMEOUT, ctx.peer.list_roots()).await;
        let roots: Vec<PathBuf> = match fetched {
            Ok(Ok(r)) => r
                .roots
                .iter()
                .filter_map(|r| file_uri_path(&r.uri))
                .map(|p| resolve(&p))
                .collect(),
            Ok(Err(e)) => {
                eprintln!("xprof mcp: roots/list failed ({e}); using the configured roots");
                Vec::new()
            }
            Err(_) => {
                eprintln!(
                    "xprof mcp: the client did not answer roots/list; using the configured roots"
                );
                Vec::new()
            }
        };
        *cached = Some(roots.clone());
        roots
    }

    /// Each named path must lie inside a root once symlinks and `..` are resolved; the first
    /// one that does not is the error. Client roots are asked for only when needed.
    async fn check_inside(
        &self,
        paths: Vec<(String, String)>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), ToolError> {
        let inside = |p: &Path, roots: &[PathBuf]| roots.iter().any(|r| p.starts_with(r));
        let mut client: Option<Vec<PathBuf>> = None;
        for (name, v) in paths {
            let p = resolve(Path::new(&v));
            if inside(&p, &self.shared.roots) {
                continue;
            }
            if client.is_none() {
                client = Some(self.client_roots(ctx).await);
            }
            if inside(&p, client.as_deref().unwrap_or(&[])) {
                continue;
            }
            let roots: Vec<String> = self
                .shared
                .roots
                .iter()
                .chain(client.iter().flatten())
                .map(|r| r.display().to_string())
                .collect();
            return Err(ToolError::path(format!(
                "{name}: {v} (resolved: {}) is outside the MCP server's roots [{}]",
                p.display(),
                roots.join(", ")
            ))
            .with_hint(
                "pass a path inside a root, or restart `xprof mcp` with --root <dir> (or set XPROF_LOGDIR)",
            ));
        }
        Ok(())
    }

    /// Before the call: every path argument the client gave.
    async fn check_args(
        &self,
        t: &ToolEntry,
        args: &Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), ToolError> {
        let paths: Vec<(String, String)> = t
            .properties()
            .iter()
            .filter(|(_, s)| s["format"].as_str() == Some("path"))
            .filter_map(|(k, _)| {
                let v = args.get(k)?.as_str().filter(|v| !v.is_empty())?;
                Some((format!("argument `{k}`"), v.to_string()))
            })
            .collect();
        self.check_inside(paths, ctx).await
    }

    /// After the call: every file and directory the tool read (the envelope's `inputs`). This
    /// also covers paths the tool took from the environment (`$XPROF_LOGDIR`) or found by
    /// listing a directory, which no argument names.
    async fn check_inputs(
        &self,
        inputs: &[Value],
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), ToolError> {
        let paths = inputs
            .iter()
            .filter_map(|i| i["path"].as_str())
            .map(|p| ("the tool read".to_string(), p.to_string()))
            .collect();
        self.check_inside(paths, ctx).await
    }
}

impl ServerHandler for XprofMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new("xprof", VERSION))
        .with_instructions(
            "Answers questions about XProf profiler captures (logdir / run dir / .xplane.pb), \
                 XLA HLO dumps and TPU kernel dumps as JSON. Start with `list_runs` on a logdir; \
                 capture tools take `path` (a logdir, a run directory or one .xplane.pb).",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared
            .tools
            .iter()
            .find(|t| t.name == name)
            .cloned()
            .or_else(|| {
                let t = self.shared.reg.find(name)?;
                self.shared.exposed.contains(&t.name).then(|| mcp_tool(t))
            })
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(surface::prompts()))
    }

    async fn get_prompt(
        &self,
        req: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        surface::prompt(&req.name, &req.arguments.unwrap_or_default())
            .map(Into::into)
            .map_err(|e| McpError::invalid_params(e.message.clone(), Some(json!({"hint": e.hint}))))
    }

    async fn on_roots_list_changed(&self, _ctx: NotificationContext<RoleServer>) {
        *self.client_roots.lock().await = None;
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name: Cow<str> = req.name;
        if name == surface::DESCRIBE_TOOL {
            return Ok(self.describe_tool(req.arguments.unwrap_or_default()));
        }
        let Some(t) = self
            .shared
            .reg
            .find(&name)
            .filter(|t| self.shared.exposed.contains(&t.name))
        else {
            let hint = if self.shared.reg.find(&name).is_some() {
                format!(
                    "`{name}` is not in this server's tool set ({}); restart it with \
                     `xprof mcp --tools all`",
                    self.shared.selection.describe()
                )
            } else {
                "tools/list lists every tool".to_string()
            };
            return Err(McpError::invalid_params(
                format!("unknown tool `{name}`"),
                Some(json!({ "hint": hint })),
            ));
        };
        // Bad arguments are the model's to fix: a tool result with `isError` (which it sees),
        // not a protocol error (which clients tend to swallow).
        let mut raw_args = req.arguments.unwrap_or_default();
        let full = match raw_args.remove(FULL_ARG) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(other) => {
                let e = ToolError::usage(format!(
                    "{}: argument `{FULL_ARG}` must be boolean, got {other}",
                    t.name
                ))
                .with_hint("pass \"full\": true for the whole result");
                return Ok(Self::error_result(&t.name, &e));
            }
        };
        let args = match validate(t, &raw_args) {
            Ok(a) => a,
            Err(m) => {
                let hint = format!(
                    "the tool's inputSchema (tools/list) lists its arguments; `xprof {} --help` too",
                    t.name
                );
                return Ok(Self::error_result(
                    &t.name,
                    &ToolError::usage(m).with_hint(hint),
                ));
            }
        };
        if let Err(e) = self.check_args(t, &args, &ctx).await {
            return Ok(Self::error_result(&t.name, &e));
        }
        let called = worker::call(
            &self.shared.exe,
            &t.name,
            &args,
            &self.shared.opts,
            self.shared.limits,
            ctx.ct.clone(),
        )
        .await;
        Ok(match called {
            Ok(env) => {
                if let Err(e) = self.check_inputs(&env.inputs, &ctx).await {
                    return Ok(Self::error_result(&t.name, &e));
                }
                // Cut to the output budget (module `budget`); with the budget off, over 10 MB
                // the result goes to a file, as on the CLI: no client or model wants that much
                // inline, and the envelope says where it is.
                let budget = crate::budget::Budget::for_call(t, &args, full);
                let fitted = budget.and_then(|b| b.fit_result(&env.result, Form::Compact));
                let result = if let Some(fitted) = fitted {
                    fitted.into_value()
                } else if env.result.compact().len() > crate::output::SPILL_BYTES {
                    let spilled = crate::output::render(
                        &t.name,
                        &env.result,
                        &env.content_type,
                        "json",
                        None,
                    )
                    .and_then(|s| {
                        serde_json::from_str::<Value>(&s).map_err(|e| {
                            ToolError::internal(format!("re-reading the spill envelope: {e}"))
                        })
                    });
                    match spilled {
                        Ok(v) => v,
                        Err(e) => return Ok(Self::error_result(&t.name, &e)),
                    }
                } else {
                    env.result.into_value()
                };
                // structuredContent must be an object; every tool returns one, but a
                // misbehaving plugin must not make the reply invalid.
                let v = if result.is_object() {
                    result
                } else {
                    json!({"result": result})
                };
                CallToolResult::structured(v).into()
            }
            // What a failed call read is checked too: its error may describe a file outside
            // the roots (reached by listing a directory inside them).
            Err(f) => match self.check_inputs(&f.inputs, &ctx).await {
                Err(e) => Self::error_result(&t.name, &e),
                Ok(()) => Self::error_result(&t.name, &f.error),
            },
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Entry point

fn fail(e: ToolError) -> i32 {
    crate::output::print_error(None, &e)
}

pub fn run(reg: Registry, args: &[String], g: &GlobalOpts) -> i32 {
    if g.help || args.iter().any(|a| a == "--help" || a == "-h") {
        // Help is the answer here, so it goes to the real stdout (fd 1 now points at stderr).
        match take_stdout() {
            Some(mut out) => {
                use std::io::Write;
                let _ = writeln!(out, "{HELP}");
            }
            None => eprintln!("{HELP}"),
        }
        return 0;
    }
    let o = match parse_opts(args) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    // A bad cache TTL is reported now rather than on every call.
    if !g.no_cache
        && let Err(e) = crate::cache::ttl(g)
    {
        return fail(e);
    }
    let (roots, roots_from) = match configured_roots(&o) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let exposed = match o.selection.resolve(&reg) {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    let mut tools: Vec<Tool> = reg
        .tools
        .values()
        .filter(|t| exposed.contains(&t.name))
        .map(mcp_tool)
        .collect();
    tools.push(surface::describe_tool_listing());
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let transport = o
        .http
        .as_deref()
        .map_or("stdio".to_string(), |a| format!("http {a}"));
    // Printed by the transport once it is up: a failed bind is then the one stderr line.
    let banner = format!(
        "xprof mcp {VERSION}: {} tools ({}) from {} plugin(s) over {transport}; roots ({roots_from}): {}",
        tools.len(),
        o.selection.describe(),
        reg.plugins.len(),
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            return fail(ToolError::internal(format!(
                "cannot locate the xprof binary to run tool calls in worker processes: {e}"
            )));
        }
    };
    let handler = XprofMcp {
        shared: Arc::new(Shared {
            reg,
            tools,
            exposed,
            selection: o.selection.clone(),
            roots,
            opts: g.clone(),
            exe,
            limits: o.limits,
        }),
        client_roots: Arc::new(tokio::sync::Mutex::new(None)),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return fail(ToolError::internal(format!(
                "cannot start the runtime: {e}"
            )));
        }
    };
    let Some(out) = take_stdout() else {
        return fail(ToolError::internal(
            "cannot duplicate stdout for the MCP transport",
        ));
    };
    let result = match o.http {
        Some(addr) => rt.block_on(http::serve(handler, &addr, o.token, out, &banner)),
        None => {
            eprintln!("{banner}");
            rt.block_on(serve_stdio(handler, out))
        }
    };
    // Blocking reads of stdin cannot be cancelled; do not wait for them.
    rt.shutdown_background();
    match result {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

async fn serve_stdio(handler: XprofMcp, out: std::fs::File) -> Result<(), ToolError> {
    let (transport, copier) = framing::stdio(tokio::io::stdin(), out);
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| ToolError::internal(format!("MCP initialization failed: {e}")))?;
    let stopped = service.waiting().await;
    // The service has dropped its end of the pipe: the copier ends once the last replies are
    // on stdout.
    let _ = copier.await;
    stopped.map_err(|e| ToolError::internal(format!("MCP server stopped: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> ToolEntry {
        ToolEntry {
            name: "t".into(),
            aliases: vec![],
            summary: "Sum".into(),
            doc: "Doc".into(),
            params: json!({"type": "object", "properties": {
                "path": {"type": "string", "format": "path", "x-positional": true, "x-env": "X"},
                "n": {"type": "integer", "minimum": 0},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "names": {"type": "array", "items": {"type": "string"}},
                "flag": {"type": "boolean"},
            }, "required": ["mode"], "additionalProperties": false})
            .into(),
            output: "{x}".into(),
            examples: json!([{"description": "ex", "args": {"mode": "a"}}]).into(),
            plugin: 0,
        }
    }

    fn args(v: Value) -> Map<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn schemas_lose_x_keywords_but_keep_format() {
        let s = client_schema(&entry().params);
        let p = &s["properties"]["path"];
        assert_eq!(p["format"], "path");
        assert!(p.get("x-env").is_none() && p.get("x-positional").is_none());
    }

    #[test]
    fn descriptions_carry_doc_output_and_examples() {
        let d = description(&entry());
        assert!(d.starts_with("Sum\n\nDoc\n\nOutput: {x}"), "{d}");
        assert!(d.contains(r#"- ex: {"mode":"a"}"#), "{d}");
    }

    #[test]
    fn validation() {
        let t = entry();
        assert!(validate(&t, &args(json!({"mode": "a", "n": 3.0}))).is_ok());
        let ok = validate(&t, &args(json!({"mode": "a", "path": null}))).unwrap();
        assert!(!ok.contains_key("path"), "nulls are dropped");
        for (bad, needle) in [
            (json!({}), "missing required argument `mode`"),
            (json!({"mode": "c"}), "must be one of"),
            (json!({"mode": "a", "n": "3"}), "`n` must be integer"),
            (json!({"mode": "a", "n": -1}), ">= 0"),
            (json!({"mode": "a", "names": ["x", 1]}), "array of string"),
            (json!({"mode": "a", "flag": "yes"}), "must be boolean"),
            (json!({"mode": "a", "bogus": 1}), "unknown argument `bogus`"),
        ] {
            let e = validate(&t, &args(bad.clone())).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn mcp_options() {
        let o = |a: &[&str]| parse_opts(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(o(&["--http"]).unwrap().http.as_deref(), Some(DEFAULT_HTTP));
        let x = o(&["--http", "--root", "/r", "--http=:9"]).unwrap();
        assert_eq!(x.http.as_deref(), Some(":9"));
        assert_eq!(x.roots, [PathBuf::from("/r")]);
        assert_eq!(
            o(&["--http", "8000"]).unwrap().http.as_deref(),
            Some("8000")
        );
        assert!(
            o(&["--root"])
                .unwrap_err()
                .message
                .contains("--root needs a value")
        );
        assert!(o(&["--root", "--http"]).is_err());
        assert!(o(&["--token="]).is_err());
        assert!(
            o(&["stdio"])
                .unwrap_err()
                .message
                .contains("unknown argument `stdio`")
        );
    }

    #[test]
    fn file_uris() {
        assert_eq!(
            file_uri_path("file:///a%20b/c"),
            Some(PathBuf::from("/a b/c"))
        );
        assert_eq!(
            file_uri_path("file://localhost/x"),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(file_uri_path("https://x/y"), None);
        assert_eq!(file_uri_path("file://other/x"), None);
    }

    #[test]
    fn resolve_sees_through_dotdot_and_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap().join("root");
        std::fs::create_dir(&root).unwrap();
        let outside = d.path().canonicalize().unwrap().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        assert!(!resolve(&root.join("../outside")).starts_with(&root));
        assert!(!resolve(&root.join("link/x.pb")).starts_with(&root));
        assert!(!resolve(&root.join("missing/../../outside")).starts_with(&root));
        assert!(resolve(&root.join("missing/y")).starts_with(&root));
    }
}
