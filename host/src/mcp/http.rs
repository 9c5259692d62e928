//! Streamable HTTP transport: stateless rmcp service behind an Origin / bearer-token gate.
//!
//! Stateless (`NeverSessionManager`, JSON responses): xprof's tools are request → response with
//! a tool list fixed at start-up, so sessions would only add keep-alives, SSE priming and
//! DELETE handling. The cost is that the server cannot send requests to the client, so
//! client-announced roots (`roots/list`) are not used over HTTP; `--root` is.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use xprof_plugin_api::ToolError;

use super::XprofMcp;

#[derive(Clone)]
struct Gate {
    token: Option<Arc<str>>,
}

/// Is this `Origin` a page served from this machine? Only http(s) on localhost, 127.0.0.1 or
/// [::1] (any port) qualifies; `null`, look-alikes (`localhost.evil.example`) and anything
/// unparsable do not.
pub fn origin_is_local(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, tail)) if tail.is_empty() || is_port(tail) => return h == "::1",
            _ => return false,
        }
    } else {
        match rest.split_once(':') {
            Some((h, p)) if is_port(&format!(":{p}")) => h,
            Some(_) => return false,
            None => rest,
        }
    };
    matches!(host, "localhost" | "127.0.0.1")
}

fn is_port(s: &str) -> bool {
    s.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from timings.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Origin first (a browser page on another site gets 403 whatever it sends), then the token.
async fn gate(State(g): State<Gate>, req: Request, next: Next) -> Response {
    if let Some(o) = req.headers().get(header::ORIGIN) {
        let ok = o.to_str().map(origin_is_local).unwrap_or(false);
        if !ok {
            return (
                StatusCode::FORBIDDEN,
                "Forbidden: Origin not allowed (xprof mcp accepts only local origins)",
            )
                .into_response();
        }
    }
    if let Some(t) = &g.token {
        let ok = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|v| same_secret(v.trim().as_bytes(), t.as_bytes()));
        if !ok {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "Unauthorized: missing or wrong bearer token",
            )
                .into_response();
        }
    }
    next.run(req).await
}

fn rpc_error(status: StatusCode, reply: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        reply.to_string(),
    )
        .into_response()
}

/// A POST body that is not a JSON-RPC message is answered with a JSON-RPC error (rmcp answers
/// such a body with a plain-text 415): -32700 when it is not JSON (module `framing`), -32600
/// when it is JSON of the wrong shape; a notification rmcp does not know is accepted and
/// dropped, as over stdio.
async fn jsonrpc_body(req: Request, next: Next) -> Response {
    use super::framing::{INVALID_REQUEST, MAX_MESSAGE_BYTES, check_json, error_reply, too_large};
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    // The same parse error as an oversized line over stdio, with HTTP's own status.
    let Ok(bytes) = axum::body::to_bytes(body, MAX_MESSAGE_BYTES).await else {
        return rpc_error(StatusCode::PAYLOAD_TOO_LARGE, too_large());
    };
    if let Err(reply) = check_json(&bytes) {
        return rpc_error(StatusCode::BAD_REQUEST, reply);
    }
    if let Err(e) = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(&bytes) {
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        if v.get("id").is_none() && v.get("method").is_some() {
            return StatusCode::ACCEPTED.into_response();
        }
        let id = match &v["id"] {
            serde_json::Value::String(_) => v["id"].clone(),
            serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => v["id"].clone(),
            _ => serde_json::Value::Null,
        };
        return rpc_error(
            StatusCode::BAD_REQUEST,
            error_reply(id, INVALID_REQUEST, format!("Invalid Request: {e}")),
        );
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// `8792` and `:8792` mean 127.0.0.1:8792; anything else is `host:port`.
fn normalise_addr(addr: &str) -> String {
    if addr.bytes().all(|b| b.is_ascii_digit()) {
        format!("127.0.0.1:{addr}")
    } else if let Some(p) = addr.strip_prefix(':') {
        format!("127.0.0.1:{p}")
    } else {
        addr.to_string()
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

pub async fn serve(
    handler: XprofMcp,
    addr: &str,
    token: Option<String>,
    mut out: std::fs::File,
    banner: &str,
) -> Result<(), ToolError> {
    let addr_s = normalise_addr(addr);
    let listener = tokio::net::TcpListener::bind(&addr_s).await.map_err(|e| {
        ToolError::usage(format!("--http {addr}: cannot listen on {addr_s}: {e}"))
            .with_hint("pass a free host:port such as 127.0.0.1:8792 (port 0 picks one)")
    })?;
    let local: SocketAddr = listener
        .local_addr()
        .map_err(|e| ToolError::internal(format!("--http {addr}: {e}")))?;
    let mut allowed_hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if !local.ip().is_loopback() {
        if token.is_none() {
            return Err(ToolError::usage(format!(
                "--http {addr}: refusing to serve beyond loopback ({}) without a token",
                local.ip()
            ))
            .with_hint("set --token or XPROF_MCP_TOKEN, or bind 127.0.0.1"));
        }
        allowed_hosts.push(local.ip().to_string());
        if let Some((h, _)) = addr_s.rsplit_once(':') {
            allowed_hosts.push(h.trim_matches(['[', ']']).to_string());
        }
    }
    let ct = CancellationToken::new();
    let cfg = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(allowed_hosts)
        .with_cancellation_token(ct.child_token());
    let svc = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        cfg,
    );
    let gate_state = Gate {
        token: token.map(Arc::from),
    };
    let app = axum::Router::new()
        .nest_service("/mcp", svc)
        .layer(axum::middleware::from_fn(jsonrpc_body))
        .layer(axum::middleware::from_fn_with_state(gate_state, gate));
    let url = format!("http://{local}/mcp");
    eprintln!("{banner}");
    // The first stdout line is the URL, so callers can bind port 0 and read where it went.
    let _ = writeln!(out, "{url}").and_then(|_| out.flush());
    drop(out);
    eprintln!("xprof mcp: listening on {url}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            ct.cancel();
        })
        .await
        .map_err(|e| ToolError::internal(format!("HTTP server failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_origins() {
        for ok in [
            "http://localhost",
            "http://localhost:5173",
            "https://127.0.0.1:8443",
            "http://[::1]:3000",
            "http://[::1]",
        ] {
            assert!(origin_is_local(ok), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "file://localhost",
            "http://localhost:80x",
            "http://[::2]:1",
            "",
        ] {
            assert!(!origin_is_local(bad), "{bad}");
        }
    }

    #[test]
    fn addresses() {
        assert_eq!(normalise_addr("8792"), "127.0.0.1:8792");
        assert_eq!(normalise_addr(":0"), "127.0.0.1:0");
        assert_eq!(normalise_addr("localhost:1"), "localhost:1");
    }

    #[test]
    fn secrets() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"ab"));
    }
}
