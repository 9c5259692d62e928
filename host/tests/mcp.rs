//! `xprof mcp` through the real binary, without any MCP client library: a JSON-RPC exchange
//! over stdio and raw HTTP requests. The full client-level suite is tests/mcp (Python SDK).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use common::*;
use serde_json::{Value, json};

fn rpc(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string() + "\n"
}

const INIT: &str =
    r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}"#;

#[test]
fn stdio_exchange_answers_every_request_and_stdout_is_only_json_rpc() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut child = xprof(tmp.path())
        .args(["mcp", "--root"])
        .arg(&seed)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = rpc(1, "initialize", serde_json::from_str(INIT).unwrap());
    input += "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    input += &rpc(2, "tools/list", json!({}));
    let path = seed.display().to_string();
    input += &rpc(
        3,
        "tools/call",
        json!({"name": "get_hosts", "arguments": {"path": path}}),
    );
    input += &rpc(
        4,
        "tools/call",
        json!({"name": "get_hosts", "arguments": {"path": "/"}}),
    );
    input += &rpc(
        5,
        "tools/call",
        json!({"name": "get_hosts", "arguments": {"run": 7}}),
    );
    input += &rpc(6, "tools/call", json!({"name": "nope", "arguments": {}}));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    // stdin is closed now: the server answers what it read, then exits.
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut replies = std::collections::BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(v["jsonrpc"], "2.0");
        replies.insert(v["id"].as_u64().unwrap(), v);
    }
    assert_eq!(
        replies.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(replies[&1]["result"]["serverInfo"]["name"], "xprof");
    let tools: Vec<&str> = replies[&2]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"get_hosts") && tools.contains(&"list_runs"),
        "{tools:?}"
    );
    let ok = &replies[&3]["result"];
    assert_eq!(ok["isError"], false);
    assert_eq!(hostnames(&ok["structuredContent"]), ["host0"]);
    let outside = &replies[&4]["result"];
    assert_eq!(outside["isError"], true);
    assert_eq!(outside["structuredContent"]["error"]["kind"], "path");
    assert_eq!(outside["structuredContent"]["tool"], "get_hosts");
    // A schema-invalid argument is a usage error the model sees; an unknown tool is -32602.
    let bad_arg = &replies[&5]["result"];
    assert_eq!(bad_arg["isError"], true, "{bad_arg}");
    assert_eq!(bad_arg["structuredContent"]["error"]["kind"], "usage");
    assert_eq!(replies[&6]["error"]["code"], -32602, "{}", replies[&6]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("roots (--root)"), "{stderr}");
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn post(addr: &str, headers: &str) -> (u16, String) {
    let body =
        format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{INIT}}}");
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n{headers}\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, resp)
}

#[test]
fn http_reports_its_address_checks_origin_and_token_and_stops_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = xprof(tmp.path())
        .args(["mcp", "--http", "127.0.0.1:0", "--root"])
        .arg(tmp.path())
        .env("XPROF_MCP_TOKEN", "tok")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let server = Server(child);
    let mut url = String::new();
    stdout.read_line(&mut url).unwrap();
    let addr = url
        .trim()
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("first stdout line is not the URL: {url:?}"))
        .to_string();

    let (code, resp) = post(&addr, "Authorization: Bearer tok\r\n");
    assert_eq!(code, 200, "{resp}");
    assert!(resp.contains("\"serverInfo\""), "{resp}");
    assert_eq!(post(&addr, "").0, 401);
    assert_eq!(post(&addr, "Authorization: Bearer nope\r\n").0, 401);
    let evil = "Origin: http://evil.example\r\nAuthorization: Bearer tok\r\n";
    assert_eq!(post(&addr, evil).0, 403);
    let local = "Origin: http://localhost:3000\r\nAuthorization: Bearer tok\r\n";
    assert_eq!(post(&addr, local).0, 200);

    let mut child = server;
    // SAFETY: signalling our own child process by its pid.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "", "nothing on stdout after the URL");
}

#[test]
fn help_goes_to_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let out = xprof(tmp.path()).args(["mcp", "--help"]).output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Usage: xprof mcp"), "{stdout}");
    assert!(stdout.contains("--root DIR"), "{stdout}");
}
