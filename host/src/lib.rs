//! The `xprof` host: discovers analyzer plugins, merges their tools into one registry and
//! serves that registry as a command line (and, in `mcp`, as an MCP server). The host never
//! names a tool; everything it knows about tools comes from the plugins' descriptors.

pub mod budget;
pub mod cache;
pub mod cli;
pub mod files;
pub mod index;
pub mod mcp;
pub mod output;
pub mod registry;
pub mod result_json;
pub mod skills;

use std::io::Write;

use serde_json::{Map, Value, json};
use xprof_plugin_api::ToolError;

use cli::GlobalOpts;
use registry::{Discovery, Envelope, Failure, Registry, ToolEntry};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Which frontend is calling (part of the context passed to plugins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frontend {
    Cli,
    Mcp,
}

/// The context object passed to every `invoke`.
pub fn context(frontend: Frontend) -> Value {
    json!({
        "protocol": xprof_plugin_api::PROTOCOL,
        "host_version": VERSION,
        "frontend": match frontend { Frontend::Cli => "cli", Frontend::Mcp => "mcp" },
        "cwd": std::env::current_dir().ok().map(|p| p.display().to_string()),
        "tmpdir": std::env::temp_dir().display().to_string(),
    })
}

/// Call a tool through the result cache (unless disabled). Both frontends go through here.
pub fn call_tool(
    reg: &Registry,
    tool: &ToolEntry,
    args: &Map<String, Value>,
    frontend: Frontend,
    opts: &GlobalOpts,
) -> Result<Envelope, ToolError> {
    cache::cached_call(reg, tool, args, opts, || {
        reg.invoke(tool, args, &context(frontend))
    })
}

/// [`call_tool`], a failure with the inputs the call had read (the MCP server checks them
/// against its roots whether or not the call succeeded).
pub fn call_tool_reporting(
    reg: &Registry,
    tool: &ToolEntry,
    args: &Map<String, Value>,
    frontend: Frontend,
    opts: &GlobalOpts,
) -> Result<Envelope, Failure> {
    let mut read = Vec::new();
    cache::cached_call(reg, tool, args, opts, || {
        reg.invoke_reporting(tool, args, &context(frontend))
            // Kept for a result the cache then refuses (an input modified during the call).
            .inspect(|env| read.clone_from(&env.inputs))
            .map_err(|f| {
                read = f.inputs;
                f.error
            })
    })
    .map_err(|error| Failure {
        error,
        inputs: read,
    })
}

fn discovery(g: &GlobalOpts) -> Discovery {
    Discovery {
        plugin_dirs: g.plugin_dirs.clone(),
        no_default_dirs: g.no_default_plugin_dirs,
    }
}

/// Print a result on stdout. Every stdout write of the CLI goes through here (never
/// `println!`, which panics on a closed pipe): a reader that has gone (`xprof ... | head`,
/// `| true`) is not an error worth reporting, the command just ends as it would have.
pub(crate) fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes());
    if !s.ends_with('\n') {
        let _ = o.write_all(b"\n");
    }
    let _ = o.flush();
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn unknown_tool(reg: &Registry, name: &str) -> ToolError {
    let mut near: Vec<(usize, &str)> = reg
        .tools
        .keys()
        .chain(reg.aliases.keys())
        .map(|t| (levenshtein(name, t), t.as_str()))
        .filter(|(d, t)| *d <= 3 || t.contains(name))
        .collect();
    near.sort();
    let hint = if near.is_empty() {
        "run `xprof` to list the tools; `xprof plugins` shows which plugins loaded".to_string()
    } else {
        format!(
            "did you mean {}? (`xprof` lists every tool)",
            near.iter()
                .take(3)
                .map(|(_, t)| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    ToolError::usage(format!("unknown tool or command `{name}`")).with_hint(hint)
}

/// The bare `xprof` listing: tools grouped by plugin.
pub fn tool_listing(reg: &Registry, format: &str) -> String {
    if format == "json" {
        let v = json!({
            "version": VERSION,
            "plugins": reg.plugins.iter().enumerate().map(|(i, p)| json!({
                "name": p.name,
                "version": p.version,
                "tools": reg.tools.values().filter(|t| t.plugin == i).map(|t| json!({
                    "name": t.name, "aliases": t.aliases, "summary": t.summary,
                    "params": t.params,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "refused_plugins": reg.refused.len(),
        });
        return serde_json::to_string_pretty(&v).unwrap_or_default();
    }
    let mut s = format!(
        "xprof {VERSION} — why is my TPU/GPU program slow or out of memory\n\n\
         Usage: xprof <tool> [PATH] [--flag value ...]   (PATH: a logdir, a run directory or an .xplane.pb)\n       \
         xprof <tool> --help | xprof plugins | xprof mcp [--http ADDR] | xprof cache stats|clear\n"
    );
    let width = reg.tools.keys().map(String::len).max().unwrap_or(10);
    for (i, p) in reg.plugins.iter().enumerate() {
        s.push_str(&format!("\n{} ({}):\n", p.name, p.version));
        for t in reg.tools.values().filter(|t| t.plugin == i) {
            s.push_str(&format!("  {:width$}  {}\n", t.name, t.summary));
        }
    }
    if reg.plugins.is_empty() {
        s.push_str("\nNo plugins loaded. `xprof plugins --verbose` says where it looked.\n");
    }
    if !reg.refused.is_empty() {
        s.push_str(&format!(
            "\n{} plugin(s) refused; see `xprof plugins`.\n",
            reg.refused.len()
        ));
    }
    s
}

/// `xprof plugins`: one line per plugin (or refusal); `--format json` for the full object.
pub fn plugins_report(reg: &Registry, g: &GlobalOpts) -> String {
    let report = reg.report(g.verbose);
    if g.format.as_deref() == Some("json") {
        return serde_json::to_string_pretty(&report).unwrap_or_default();
    }
    let mut s = String::new();
    for p in &reg.plugins {
        s.push_str(&format!(
            "{:<16} {:<8} {:>3} tools  {}\n",
            p.name,
            p.version,
            p.tool_count,
            p.path.display()
        ));
    }
    for r in &reg.refused {
        s.push_str(&format!("REFUSED {}: {}\n", r.path.display(), r.reason));
        if g.verbose && !r.detail.is_empty() {
            s.push_str(&format!("{}\n", r.detail.trim_end()));
        }
    }
    if g.verbose {
        for w in &reg.warnings {
            s.push_str(&format!("warning: {w}\n"));
        }
        s.push_str("searched:\n");
        for (d, o) in discovery(g).dirs() {
            s.push_str(&format!("  {} ({})\n", d.display(), o.label()));
        }
    }
    if s.is_empty() {
        s.push_str("no plugins found (run `xprof plugins --verbose` to see where xprof looked)\n");
    }
    s
}

fn run_tool(reg: &Registry, name: &str, argv: &[String], g: &GlobalOpts) -> i32 {
    let Some(tool) = reg.find(name) else {
        return output::print_error(None, &unknown_tool(reg, name));
    };
    let mut cmd = cli::tool_command(tool);
    if g.help {
        out(&cmd.render_long_help().to_string());
        return 0;
    }
    let matches = match cmd
        .try_get_matches_from_mut(std::iter::once(tool.name.clone()).chain(argv.iter().cloned()))
    {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind as K;
            if matches!(e.kind(), K::DisplayHelp | K::DisplayVersion) {
                out(&cmd.render_long_help().to_string());
                return 0;
            }
            let msg = e.to_string();
            // clap's first paragraph is the error ("the following required arguments were
            // not provided:" continues on the next lines); the usage and tips follow a blank line.
            let first = msg
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
                .trim_start_matches("error: ")
                .to_string();
            let mut flags: Vec<String> = tool
                .properties()
                .iter()
                .map(|(k, s)| {
                    if s["x-positional"].as_bool().unwrap_or(false) {
                        k.to_uppercase()
                    } else {
                        format!("--{k}")
                    }
                })
                .collect();
            flags.sort();
            let err = ToolError::usage(format!("{}: {first}", tool.name)).with_hint(format!(
                "valid arguments: {}; see `xprof {} --help`",
                flags.join(" "),
                tool.name
            ));
            return output::print_error(Some(&tool.name), &err);
        }
    };
    let args = match cli::matches_to_args(tool, &matches) {
        Ok(a) => a,
        Err(e) => {
            return output::print_error(
                Some(&tool.name),
                &ToolError::invalid(e.to_string())
                    .with_hint(format!("see `xprof {} --help`", tool.name)),
            );
        }
    };
    match call_tool(reg, tool, &args, Frontend::Cli, g) {
        Ok(env) => match output::render(
            &tool.name,
            &env.result,
            &env.content_type,
            g.format.as_deref().unwrap_or("json"),
            budget::Budget::for_call(tool, &args, g.full).as_ref(),
        ) {
            Ok(s) => {
                out(&s);
                0
            }
            Err(e) => output::print_error(Some(&tool.name), &e),
        },
        Err(e) => output::print_error(Some(&tool.name), &e),
    }
}

/// A host command's answer: the JSON on stdout (exit 0), or the error on stderr.
fn print_answer(answer: Result<Value, ToolError>) -> i32 {
    match answer {
        Ok(v) => {
            out(&serde_json::to_string_pretty(&v).unwrap_or_default());
            0
        }
        Err(e) => output::print_error(None, &e),
    }
}

/// Is `rest` a tool call (not the listing or one of the host's own commands)?
fn called_tool(rest: &[String]) -> Option<&str> {
    rest.first()
        .map(String::as_str)
        .filter(|n| !registry::RESERVED_NAMES.contains(n))
}

/// The registry a command needs. A tool call loads only the plugin serving the tool when the
/// registry index (module `index`) knows it; everything else loads every plugin, refreshing
/// the index (for tool calls) and the cache's registry snapshot (when `remember`). With
/// `--verbose`, a tool call says on stderr which plugins it loaded.
fn load_registry(g: &GlobalOpts, rest: &[String], disc: &Discovery, remember: bool) -> Registry {
    let Some(name) = called_tool(rest) else {
        let reg = Registry::load(disc);
        if remember {
            cache::remember_registry(&reg, disc);
        }
        return reg;
    };
    // A stale cache snapshot is refreshed only by a full load, so it takes precedence.
    let lookup = if remember {
        index::Lookup::Stale
    } else {
        index::load_for_tool(disc, name)
    };
    let (reg, how, refused) = match lookup {
        index::Lookup::Loaded(reg, refused) => (reg, "index", refused),
        other => {
            let reg = Registry::load(disc);
            if remember {
                cache::remember_registry(&reg, disc);
            }
            if matches!(other, index::Lookup::Stale) {
                index::store(&reg, disc);
            }
            let refused = reg
                .refused
                .iter()
                .map(|r| (r.path.display().to_string(), r.reason.clone()))
                .collect();
            (reg, "full", refused)
        }
    };
    if g.verbose {
        verbose_line(json!({
            "registry": how,
            "plugins_loaded": reg.plugins.iter().map(|p| json!({
                "name": p.name, "path": p.path.display().to_string(),
            })).collect::<Vec<_>>(),
            "refused": refused.iter().map(|(path, reason)| json!({
                "path": path, "reason": reason,
            })).collect::<Vec<_>>(),
        }));
    }
    reg
}

/// One `{"verbose": ...}` line on stderr (`--verbose`; never on stdout).
pub(crate) fn verbose_line(v: Value) {
    eprintln!("{}", json!({ "verbose": v }));
}

/// The whole command line. Returns the process exit code.
pub fn run(argv: Vec<String>) -> i32 {
    let (g, rest) = match cli::extract_globals(argv) {
        Ok(x) => x,
        Err(e) => {
            return output::print_error(
                None,
                &ToolError::usage(e.to_string()).with_hint("see `xprof --help`"),
            );
        }
    };
    if g.version && rest.is_empty() {
        out(&format!("xprof {VERSION}"));
        return 0;
    }
    if rest.first().map(String::as_str) == Some(mcp::worker::SUBCOMMAND) {
        // A worker of `xprof mcp` (one tool call; module `mcp::worker`).
        return mcp::worker::serve();
    }
    if rest.first().map(String::as_str) == Some("mcp")
        && rest.get(1).map(String::as_str) == Some("install")
    {
        // Not a server: a config entry written or printed (module `mcp::install`).
        return print_answer(mcp::install::command(&rest[2..]));
    }
    if rest.first().map(String::as_str) == Some("mcp") {
        // Before plugins load: from here on only the MCP transport may write to stdout.
        mcp::claim_stdout();
    }
    let disc = discovery(&g);
    // A cached tool call is answered without loading any plugin (see cache::fast_path).
    let remember = match cache::fast_path(&g, &rest, &disc) {
        cache::Fast::Hit(code) => return code,
        cache::Fast::Miss { remember } => remember,
    };
    let reg = load_registry(&g, &rest, &disc, remember);
    let format = g.format.clone().unwrap_or_else(|| "text".into());
    match rest.first().map(String::as_str) {
        None => {
            out(&tool_listing(&reg, &format));
            0
        }
        Some("help") => match rest.get(1) {
            Some(t) => {
                let mut g2 = g.clone();
                g2.help = true;
                run_tool(&reg, t, &[], &g2)
            }
            None => {
                out(&tool_listing(&reg, &format));
                0
            }
        },
        Some("tools") => {
            out(&tool_listing(&reg, &format));
            0
        }
        Some("plugins") => {
            out(&plugins_report(&reg, &g));
            0
        }
        Some("mcp") => mcp::run(reg, &rest[1..], &g),
        Some("cache") => cache::command(&rest[1..], &g),
        Some("skills") => print_answer(skills::command(&reg, &rest[1..])),
        Some("completions") => match cli::completions(&reg, &rest[1..]) {
            Ok(script) => {
                out(&script);
                0
            }
            Err(e) => output::print_error(None, &e),
        },
        Some(name) => run_tool(&reg, name, &rest[1..], &g),
    }
}
