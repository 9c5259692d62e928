//! `xprof mcp install --client C [--print] [-- MCP ARGS...]`: register `xprof mcp` with a client.
//!
//! The server entry names this binary by its absolute path (GUI clients do not see the shell's
//! `PATH`) and passes the arguments after `--` (e.g. `--root /data/profiles`).
//! - JSON configs are merged, keeping every other server and setting: Cursor
//!   (`~/.cursor/mcp.json`), Gemini CLI (`~/.gemini/settings.json`), VS Code (`.vscode/mcp.json`
//!   in the working directory), Claude Desktop (`claude_desktop_config.json` in its folder).
//! - Claude Code and Codex keep their own state (`claude mcp add`, `~/.codex/config.toml` with
//!   comments a rewrite would drop): the command or snippet is printed to run or paste.
//!
//! `--print` prints the entry for any client without writing anything.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use xprof_plugin_api::ToolError;

pub const CLIENTS: &[&str] = &[
    "claude",
    "claude-desktop",
    "codex",
    "cursor",
    "gemini",
    "vscode",
];

fn usage(m: String) -> ToolError {
    ToolError::usage(m).with_hint(format!(
        "xprof mcp install --client {} [--print] [-- --root DIR ...]",
        CLIENTS.join("|")
    ))
}

fn home() -> Result<PathBuf, ToolError> {
    crate::files::home().ok_or_else(|| {
        ToolError::path("HOME is not set: cannot find the client's config")
            .with_hint("use --print and paste the entry yourself")
    })
}

/// The config file a client reads, and the key its servers live under.
fn config(client: &str) -> Result<Option<(PathBuf, &'static str)>, ToolError> {
    Ok(match client {
        "cursor" => Some((home()?.join(".cursor/mcp.json"), "mcpServers")),
        "gemini" => Some((home()?.join(".gemini/settings.json"), "mcpServers")),
        "vscode" => Some((PathBuf::from(".vscode/mcp.json"), "servers")),
        "claude-desktop" => {
            let dir = if cfg!(target_os = "macos") {
                home()?.join("Library/Application Support/Claude")
            } else {
                home()?.join(".config/Claude")
            };
            Some((dir.join("claude_desktop_config.json"), "mcpServers"))
        }
        _ => None,
    })
}

fn quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Merge `entry` as `servers.xprof` into the JSON file at `path`, keeping everything else.
fn merge_into(path: &Path, key: &str, entry: &Value) -> Result<(), ToolError> {
    let fail = |e: String| {
        ToolError::path(format!("{}: {e}", path.display()))
            .with_hint("fix or move the file, or use --print and paste the entry yourself")
    };
    let mut doc: Value = match std::fs::read_to_string(path) {
        Ok(t) if t.trim().is_empty() => json!({}),
        Ok(t) => serde_json::from_str(&t).map_err(|e| fail(format!("not JSON ({e})")))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(fail(e.to_string())),
    };
    let Some(obj) = doc.as_object_mut() else {
        return Err(fail("not a JSON object".into()));
    };
    let servers = obj.entry(key).or_insert_with(|| json!({}));
    let Some(servers) = servers.as_object_mut() else {
        return Err(fail(format!("`{key}` is not an object")));
    };
    servers.insert("xprof".into(), entry.clone());
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    crate::files::write_atomically(path, &text).map_err(|e| fail(e.to_string()))
}

/// `xprof mcp install ARGS` (ARGS after `install`).
pub fn command(args: &[String]) -> Result<Value, ToolError> {
    let (ours, server_args) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let (mut client, mut print) = (None, false);
    let mut it = ours.iter();
    while let Some(a) = it.next() {
        match a.split_once('=') {
            Some(("--client", v)) => client = Some(v.to_string()),
            _ if a == "--client" => {
                client = Some(
                    it.next()
                        .cloned()
                        .ok_or_else(|| usage("--client needs a value".into()))?,
                )
            }
            _ if a == "--print" => print = true,
            _ => return Err(usage(format!("mcp install: unknown argument `{a}`"))),
        }
    }
    let client = client.ok_or_else(|| usage("mcp install: which client? (--client)".into()))?;
    if !CLIENTS.contains(&client.as_str()) {
        return Err(usage(format!("--client {client}: unknown client")));
    }
    let exe = std::env::current_exe()
        .map_err(|e| ToolError::internal(format!("cannot locate the xprof binary: {e}")))?;
    let exe = exe.display().to_string();
    let mut mcp_args = vec!["mcp".to_string()];
    mcp_args.extend(server_args.iter().cloned());
    let line = std::iter::once(exe.as_str())
        .chain(mcp_args.iter().map(String::as_str))
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ");
    let entry = if client == "vscode" {
        json!({"type": "stdio", "command": exe, "args": mcp_args})
    } else {
        json!({"command": exe, "args": mcp_args})
    };
    match client.as_str() {
        "claude" => {
            let cmd = format!("claude mcp add --scope user xprof -- {line}");
            return Ok(json!({"status": "run_this", "client": client, "command": cmd}));
        }
        "codex" => {
            let toml = format!(
                "[mcp_servers.xprof]\ncommand = {}\nargs = {}\n",
                json!(exe),
                json!(mcp_args)
            );
            return Ok(json!({
                "status": "paste_this",
                "client": client,
                "file": home().map(|h| h.join(".codex/config.toml").display().to_string()).ok(),
                "snippet": toml,
            }));
        }
        _ => {}
    }
    let Some((path, key)) = config(&client)? else {
        unreachable!("every other client has a JSON config")
    };
    if print {
        return Ok(json!({
            "status": "paste_this",
            "client": client,
            "file": path.display().to_string(),
            "snippet": {key: {"xprof": entry}},
        }));
    }
    merge_into(&path, key, &entry)?;
    Ok(json!({
        "status": "written",
        "client": client,
        "file": path.display().to_string(),
        "entry": entry,
    }))
}
