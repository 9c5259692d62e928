//! A raw JSON-RPC session with `xprof mcp` over stdio, for the end-to-end tests (no MCP client
//! library: the tests see exactly the bytes the server sends).

use std::process::Stdio;

use crate::Sandbox;

/// `xprof --no_cache mcp --root ROOT`, initialized.
pub struct Mcp {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Mcp {
    pub fn start(sb: &Sandbox, extra: &[&str], env: &[(&str, &str)]) -> Mcp {
        Mcp::start_in(sb, &crate::fixtures(), extra, env)
    }

    /// A session whose only root is `root`.
    pub fn start_in(
        sb: &Sandbox,
        root: &std::path::Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Mcp {
        let mut c = sb.cmd();
        // Every tool: these sessions exercise tools beyond the default (triage) set.
        c.args(["--no_cache", "mcp", "--tools", "all", "--root"])
            .arg(root)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("starting xprof mcp");
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut m = Mcp {
            child,
            stdin,
            stdout,
        };
        m.send(
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "robustness", "version": "0"}}}),
        );
        m.reply(0);
        m.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    pub fn send(&mut self, v: serde_json::Value) {
        use std::io::Write;
        let w = self.stdin.as_mut().unwrap();
        writeln!(w, "{v}").unwrap();
        w.flush().unwrap();
    }

    /// Send bytes as one line, whatever they are.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let w = self.stdin.as_mut().unwrap();
        w.write_all(bytes).unwrap();
        w.write_all(b"\n").unwrap();
        w.flush().unwrap();
    }

    /// The next message the server sends.
    pub fn next_message(&mut self) -> serde_json::Value {
        use std::io::BufRead;
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "the server ended");
        serde_json::from_str(&line).unwrap()
    }

    /// The reply to request `id` (other lines are skipped).
    pub fn reply(&mut self, id: u64) -> serde_json::Value {
        use std::io::BufRead;
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the server ended before answering request {id}");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    pub fn call(&mut self, id: u64, tool: &str, args: serde_json::Value) -> serde_json::Value {
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}),
        );
        let reply = self.reply(id);
        assert!(reply["result"].is_object(), "{tool}: {reply}");
        reply["result"].clone()
    }

    /// End the session (end of input) and return the server's stderr.
    pub fn finish(mut self) -> String {
        drop(self.stdin.take());
        let out = self.child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}
