//! Worker isolation for `xprof mcp`: every `tools/call` runs in a child process, so that no
//! crash, abort, signal or runaway of a call can reach the server.
//!
//! The server re-executes its own binary with the hidden subcommand [`SUBCOMMAND`], writes one
//! JSON request (tool, arguments, host options) on the child's stdin and reads one JSON reply
//! from its stdout: the envelope (`result`, `content_type`, `inputs`) or the failure (`error`,
//! `inputs`). The worker loads only the plugin that serves the tool (the registry index) and
//! calls it through the result cache, as the CLI does. The server supervises it:
//! - a time limit per call ([`Limits::timeout`], `--call_timeout_s`, default 300 s);
//! - a memory limit ([`Limits::max_rss_bytes`], `--call_max_rss_mb`, default 8 GiB) on the
//!   worker's anonymous resident memory (`RssAnon` in `/proc/<pid>/status`, polled): what the
//!   call allocates. Not an address-space limit and not `VmRSS`: captures are memory-mapped,
//!   and their pages are the page cache's, not the call's;
//! - cancellation: `notifications/cancelled` for the call kills its worker.
//!
//! Hitting a limit kills the worker and is an `isError` result naming the limit and the flag
//! that raises it; a worker that dies otherwise (a signal, an abort) is an `internal` one.
//! What the worker prints on stderr is passed on to the server's stderr. The CLI runs tools
//! in-process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use xprof_plugin_api::{ErrorKind, ToolError};

use crate::cli::GlobalOpts;
use crate::registry::{Envelope, Failure};
use crate::result_json::ResultJson;

/// The hidden subcommand a worker runs as (`xprof __mcp_worker`).
pub const SUBCOMMAND: &str = "__mcp_worker";

/// Defaults of the per-call limits.
pub const DEFAULT_TIMEOUT_S: f64 = 300.0;
pub const DEFAULT_MAX_RSS_MB: u64 = 8192;

/// How often the worker's memory is read.
const RSS_POLL: Duration = Duration::from_millis(100);

/// The worker's stderr kept for the server (the tail, if it printed more).
const STDERR_KEEP: usize = 64 * 1024;

/// What one call may use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub timeout: Duration,
    pub max_rss_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs_f64(DEFAULT_TIMEOUT_S),
            max_rss_bytes: DEFAULT_MAX_RSS_MB << 20,
        }
    }
}

/// The host options a worker needs (the rest of [`GlobalOpts`] is about printing).
#[derive(Serialize, Deserialize)]
struct Opts {
    plugin_dirs: Vec<PathBuf>,
    no_default_plugin_dirs: bool,
    no_cache: bool,
    bypass_cache: bool,
    cache_ttl: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Request {
    tool: String,
    args: Map<String, Value>,
    opts: Opts,
}

#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    inputs: Vec<Value>,
    #[serde(default)]
    error: Option<Value>,
}

// ---------------------------------------------------------------------------------------------
// The worker side

/// `xprof __mcp_worker`: read one request on stdin, answer it on stdout, exit.
pub fn serve() -> i32 {
    // Only the reply may reach the server's pipe: a plugin's stray print goes to stderr.
    super::claim_stdout();
    let Some(mut out) = super::take_stdout() else {
        return crate::output::print_error(
            None,
            &ToolError::internal("mcp worker: cannot duplicate stdout"),
        );
    };
    let reply = answer();
    use std::io::Write;
    let _ = out
        .write_all(reply.as_bytes())
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush());
    0
}

fn answer() -> String {
    use std::io::Read;
    let failed = |e: ToolError| json!({"error": e.to_json(), "inputs": []}).to_string();
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        return failed(ToolError::internal(format!(
            "mcp worker: reading the request: {e}"
        )));
    }
    let req: Request = match serde_json::from_str(&input) {
        Ok(r) => r,
        Err(e) => {
            return failed(ToolError::internal(format!(
                "mcp worker: the request is not valid: {e}"
            )));
        }
    };
    // Debug builds: make the named tool's worker abort, for the tests that a crashing call
    // is one failed call.
    #[cfg(debug_assertions)]
    if std::env::var_os("XPROF_FAILPOINT_ABORT").is_some_and(|t| t == req.tool.as_str()) {
        std::process::abort();
    }
    let g = GlobalOpts {
        plugin_dirs: req.opts.plugin_dirs,
        no_default_plugin_dirs: req.opts.no_default_plugin_dirs,
        no_cache: req.opts.no_cache,
        bypass_cache: req.opts.bypass_cache,
        cache_ttl: req.opts.cache_ttl,
        ..GlobalOpts::default()
    };
    let disc = crate::discovery(&g);
    let reg = crate::load_registry(&g, std::slice::from_ref(&req.tool), &disc, false);
    let Some(tool) = reg.find(&req.tool) else {
        return failed(ToolError::internal(format!(
            "mcp worker: no plugin serves `{}` any more",
            req.tool
        )));
    };
    match crate::call_tool_reporting(&reg, tool, &req.args, crate::Frontend::Mcp, &g) {
        Ok(env) => format!(
            "{{\"result\":{},\"content_type\":{},\"inputs\":{}}}",
            env.result.compact(),
            Value::from(env.content_type),
            Value::Array(env.inputs)
        ),
        Err(f) => json!({"error": f.error.to_json(), "inputs": f.inputs}).to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// The server side

/// Which limit stopped a worker.
enum Stop {
    Time,
    Memory(u64),
    Cancelled,
}

/// Run one call in a worker process (`exe` is this binary) under `limits`; `cancel` kills it.
pub async fn call(
    exe: &Path,
    tool: &str,
    args: &Map<String, Value>,
    opts: &GlobalOpts,
    limits: Limits,
    cancel: CancellationToken,
) -> Result<Envelope, Failure> {
    let req = Request {
        tool: tool.to_string(),
        args: args.clone(),
        opts: Opts {
            plugin_dirs: opts.plugin_dirs.clone(),
            no_default_plugin_dirs: opts.no_default_plugin_dirs,
            no_cache: opts.no_cache,
            bypass_cache: opts.bypass_cache,
            cache_ttl: opts.cache_ttl.clone(),
        },
    };
    let body = serde_json::to_vec(&req)
        .map_err(|e| ToolError::internal(format!("mcp: encoding the worker request: {e}")))?;
    let mut child = tokio::process::Command::new(exe)
        .arg(SUBCOMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            ToolError::internal(format!(
                "mcp: cannot start a worker process ({}): {e}",
                exe.display()
            ))
            .with_hint("check that the xprof binary is still in place; restart `xprof mcp`")
        })?;
    let pid = child.id();
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(ToolError::internal("mcp: the worker's pipes are missing").into());
    };
    tokio::spawn(async move {
        // A worker that died early closes its stdin: nothing to report here, the reply is
        // missing and the exit status says why.
        let _ = stdin.write_all(&body).await;
    });
    let out_task = tokio::spawn(read_all(stdout, usize::MAX));
    let err_task = tokio::spawn(read_all(stderr, STDERR_KEEP));
    let deadline = tokio::time::sleep(limits.timeout);
    tokio::pin!(deadline);
    let mut poll = tokio::time::interval(RSS_POLL);
    let mut stop = None;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = &mut deadline => stop = Some(Stop::Time),
            _ = cancel.cancelled() => stop = Some(Stop::Cancelled),
            _ = poll.tick() => {
                if let Some(rss) = pid.and_then(anon_rss_bytes)
                    && rss > limits.max_rss_bytes
                {
                    stop = Some(Stop::Memory(rss));
                }
            }
        }
        if stop.is_some() {
            let _ = child.start_kill();
            break child.wait().await;
        }
    };
    let out = out_task.await.unwrap_or_default();
    let err = err_task.await.unwrap_or_default();
    if !err.is_empty() {
        eprint!("{}", String::from_utf8_lossy(&err));
    }
    if let Some(stop) = stop {
        if matches!(stop, Stop::Cancelled) {
            eprintln!("xprof mcp: `{tool}` was cancelled by the client; its worker was stopped");
        }
        return Err(limit_error(tool, stop, limits).into());
    }
    let reply: Option<Reply> = serde_json::from_slice(&out).ok();
    match reply {
        Some(Reply {
            error: Some(e),
            inputs,
            ..
        }) => Err(Failure {
            error: ToolError {
                kind: ErrorKind::parse(e["kind"].as_str().unwrap_or("internal")),
                message: e["message"].as_str().unwrap_or("tool error").to_string(),
                hint: e["hint"].as_str().map(String::from),
            },
            inputs,
        }),
        Some(Reply {
            result: Some(result),
            content_type,
            inputs,
            ..
        }) => Ok(Envelope {
            result: ResultJson::from_raw(result),
            content_type: content_type.unwrap_or_else(|| "application/json".into()),
            inputs,
        }),
        _ => Err(reported_error(&err)
            .unwrap_or_else(|| crashed(tool, status, &err))
            .into()),
    }
}

/// The error a worker that could not answer still reported: the last stderr line when it is
/// the CLI's one-object JSON error (a library that must end the process at once, such as the
/// reader's `SIGBUS` handler for a file truncated under it, prints that and exits 4).
fn reported_error(stderr: &[u8]) -> Option<ToolError> {
    let text = String::from_utf8_lossy(stderr);
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let v: Value = serde_json::from_str(last).ok()?;
    let e = v.get("error")?;
    Some(ToolError {
        kind: ErrorKind::parse(e.get("kind")?.as_str()?),
        message: e.get("message")?.as_str()?.to_string(),
        hint: e.get("hint").and_then(|h| h.as_str()).map(String::from),
    })
}

/// Read `r` to its end, keeping at most the last `keep` bytes.
async fn read_all<R: AsyncRead + Unpin>(mut r: R, keep: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return buf,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > keep {
                    buf.drain(..buf.len() - keep);
                }
            }
        }
    }
}

/// The anonymous resident memory of a process (`RssAnon`, else `VmRSS` on kernels before
/// 4.5), from `/proc/<pid>/status`; `None` once it is gone.
fn anon_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_rss(&status)
}

fn parse_rss(status: &str) -> Option<u64> {
    let field = |name: &str| {
        status.lines().find_map(|l| {
            let kb = l.strip_prefix(name)?.trim().strip_suffix("kB")?.trim();
            kb.parse::<u64>().ok().map(|k| k * 1024)
        })
    };
    field("RssAnon:").or_else(|| field("VmRSS:"))
}

fn limit_error(tool: &str, stop: Stop, limits: Limits) -> ToolError {
    match stop {
        Stop::Time => ToolError::invalid(format!(
            "`{tool}` was stopped: it ran longer than the per-call time limit of {} s \
             (`xprof mcp --call_timeout_s`)",
            limits.timeout.as_secs_f64()
        ))
        .with_hint(
            "narrow the call (one host, one module, a --limit), or restart `xprof mcp` with a \
             larger --call_timeout_s",
        ),
        Stop::Memory(rss) => ToolError::invalid(format!(
            "`{tool}` was stopped: it used {:.1} MiB of memory, over the per-call limit of {} MiB \
             (`xprof mcp --call_max_rss_mb`)",
            rss as f64 / (1u64 << 20) as f64,
            limits.max_rss_bytes >> 20
        ))
        .with_hint(
            "narrow the call (one host, one module, a --limit), or restart `xprof mcp` with a \
             larger --call_max_rss_mb",
        ),
        Stop::Cancelled => ToolError::usage(format!(
            "`{tool}` was cancelled by the client (notifications/cancelled)"
        ))
        .with_hint("call it again if the answer is still wanted"),
    }
}

fn crashed(
    tool: &str,
    status: std::io::Result<std::process::ExitStatus>,
    stderr: &[u8],
) -> ToolError {
    use std::os::unix::process::ExitStatusExt;
    let how = match status {
        Ok(s) => match (s.signal(), s.code()) {
            (Some(sig), _) => format!("killed by signal {sig}{}", signal_name(sig)),
            (None, Some(c)) => format!("exited with code {c} and no answer"),
            (None, None) => "ended with no answer".to_string(),
        },
        Err(e) => format!("could not be waited for ({e})"),
    };
    let last = String::from_utf8_lossy(stderr);
    let last = last
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let mut msg = format!("`{tool}` crashed its worker process: {how}");
    if !last.is_empty() {
        msg.push_str(&format!("; its last words: {last}"));
    }
    ToolError::internal(msg).with_hint(
        "this is a bug; the server is still running; please report it with the call's arguments",
    )
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => " (SIGABRT: an abort)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGBUS => " (SIGBUS: a mapped file changed under it?)",
        libc::SIGKILL => " (SIGKILL: out of memory?)",
        libc::SIGILL => " (SIGILL)",
        libc::SIGFPE => " (SIGFPE)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_that_died_after_printing_a_json_error_reports_that_error() {
        let stderr = b"xprof: progress\n{\"error\":{\"kind\":\"invalid_value\",\"message\":\"/c/host0.xplane.pb: the file changed while being read\",\"hint\":\"wait\"},\"tool\":null}\n";
        let e = reported_error(stderr).unwrap();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        assert!(
            e.message
                .starts_with("/c/host0.xplane.pb: the file changed")
        );
        assert_eq!(e.hint.as_deref(), Some("wait"));
        assert!(reported_error(b"thread 'main' panicked\n").is_none());
        assert!(reported_error(b"").is_none());
    }

    #[test]
    fn rss_is_the_anonymous_part() {
        let s = "Name:\txprof\nVmRSS:\t  900000 kB\nRssAnon:\t  12345 kB\nRssFile:\t 887655 kB\n";
        assert_eq!(parse_rss(s), Some(12345 * 1024));
        assert_eq!(parse_rss("VmRSS:\t 10 kB\n"), Some(10 * 1024));
        assert_eq!(parse_rss("Name: x\n"), None);
    }

    #[test]
    fn limit_errors_name_the_limit_and_the_flag() {
        let l = Limits::default();
        let t = limit_error("t", Stop::Time, l);
        assert!(t.message.contains("300 s") && t.message.contains("--call_timeout_s"));
        let m = limit_error("t", Stop::Memory(9 << 30), l);
        assert!(m.message.contains("9216.0 MiB") && m.message.contains("8192 MiB"));
        assert!(m.hint.unwrap().contains("--call_max_rss_mb"));
    }
}
