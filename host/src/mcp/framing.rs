//! JSON-RPC framing in front of rmcp: a message that is not JSON (garbage, invalid UTF-8, a
//! number out of range such as `"id": 1e400`, nesting past serde_json's depth limit) or is
//! larger than [`MAX_MESSAGE_BYTES`] gets a JSON-RPC error reply (-32700, `id: null`), as
//! JSON-RPC 2.0 asks. rmcp itself drops such input silently over stdio and answers HTTP 415.
//!
//! Over stdio the client's lines pass through [`stdio`]: each complete line is checked, a bad
//! one is answered here, the rest go to rmcp through an in-memory pipe, and rmcp's replies are
//! copied to stdout a line at a time (so an error reply never lands inside one of them). JSON
//! that rmcp cannot type (a request of the wrong shape) is rmcp's to answer (-32600).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::Mutex;

/// The largest message accepted: rmcp's own stdio line limit (16 MiB).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC 2.0's "Parse error".
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0's "Invalid Request".
pub const INVALID_REQUEST: i64 = -32600;

/// A JSON-RPC error response.
pub fn error_reply(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// `Err(reply)` when `bytes` is not one JSON value (UTF-8, within the size limit).
pub fn check_json(bytes: &[u8]) -> Result<(), Value> {
    let parse_error = |why: String| error_reply(Value::Null, PARSE_ERROR, why);
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(too_large());
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(parse_error(format!(
            "Parse error: the message is not UTF-8 ({e})"
        )));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(_) => Ok(()),
        Err(e) => Err(parse_error(format!("Parse error: {e}"))),
    }
}

/// The parse error of a message over [`MAX_MESSAGE_BYTES`].
pub fn too_large() -> Value {
    error_reply(
        Value::Null,
        PARSE_ERROR,
        format!("Parse error: the message is larger than {MAX_MESSAGE_BYTES} bytes"),
    )
}

/// One line of input, bounded: the bytes of a line (without its `\n`), or `Oversized` once
/// it passed the limit (the rest of it is read and dropped).
enum Line {
    Eof,
    Full(Vec<u8>),
    Oversized,
}

async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut over = false;
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(match (over, buf.is_empty()) {
                (true, _) => Line::Oversized,
                (false, true) => Line::Eof,
                (false, false) => Line::Full(buf),
            });
        }
        let newline = memchr::memchr(b'\n', avail);
        let take = newline.map_or(avail.len(), |i| i + 1);
        if !over {
            let body = newline.unwrap_or(avail.len());
            if buf.len() + body > max {
                over = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(&avail[..body]);
            }
        }
        r.consume(take);
        if newline.is_some() {
            return Ok(if over {
                Line::Oversized
            } else {
                Line::Full(buf)
            });
        }
    }
}

type Out = Arc<Mutex<tokio::fs::File>>;

async fn write_line(out: &Out, line: &[u8]) -> std::io::Result<()> {
    let mut o = out.lock().await;
    o.write_all(line).await?;
    if !line.ends_with(b"\n") {
        o.write_all(b"\n").await?;
    }
    o.flush().await
}

/// rmcp's ends of the pipes, and the task copying rmcp's replies to stdout: await it once the
/// service ended, or the last replies are lost.
pub type Stdio = (
    (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>),
    tokio::task::JoinHandle<()>,
);

/// The stdio transport for rmcp, with the framing checks in front: reads `input` (stdin),
/// writes to `out` (the saved stdout).
pub fn stdio<R>(input: R, out: std::fs::File) -> Stdio
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (their_read, their_write) = tokio::io::split(theirs);
    let (our_read, mut our_write) = tokio::io::split(ours);
    let out: Out = Arc::new(Mutex::new(tokio::fs::File::from_std(out)));
    // rmcp's replies, a line at a time.
    let o = out.clone();
    let copier = tokio::spawn(async move {
        let mut r = tokio::io::BufReader::new(our_read);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if write_line(&o, &line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    // The client's messages: checked, then answered here or passed on.
    tokio::spawn(async move {
        let mut r = tokio::io::BufReader::new(input);
        loop {
            let reply = match read_line(&mut r, MAX_MESSAGE_BYTES).await {
                Ok(Line::Eof) | Err(_) => break,
                Ok(Line::Oversized) => too_large(),
                Ok(Line::Full(mut line)) => {
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match check_json(&line) {
                        Ok(()) => {
                            line.push(b'\n');
                            if our_write.write_all(&line).await.is_err() {
                                break;
                            }
                            continue;
                        }
                        Err(reply) => reply,
                    }
                }
            };
            if write_line(&out, reply.to_string().as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
        // End of input: rmcp sees end of file and stops.
        let _ = our_write.shutdown().await;
    });
    ((their_read, their_write), copier)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<(), Value>) -> Option<i64> {
        r.err().map(|v| v["error"]["code"].as_i64().unwrap())
    }

    #[test]
    fn what_is_not_json_gets_a_parse_error() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        for bad in [
            &b"garbage"[..],
            b"\xff\xfe{}",
            br#"{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}"#,
            deep.as_bytes(),
            b"{\"a\": ",
        ] {
            assert_eq!(
                code(check_json(bad)),
                Some(PARSE_ERROR),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let r = check_json(b"nope").unwrap_err();
        assert_eq!(r["id"], Value::Null);
        assert_eq!(r["jsonrpc"], "2.0");
        assert_eq!(
            code(check_json(
                br#"{"jsonrpc": "2.0", "id": 1, "method": "ping"}"#
            )),
            None
        );
        assert_eq!(
            code(check_json(b"\xEF\xBB\xBF{}")),
            None,
            "a BOM is allowed"
        );
        let big = vec![b' '; MAX_MESSAGE_BYTES + 1];
        assert_eq!(code(check_json(&big)), Some(PARSE_ERROR));
    }

    #[test]
    fn lines_are_bounded() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let input = b"short\n0123456789abc\nlast".to_vec();
            let mut r = tokio::io::BufReader::with_capacity(4, &input[..]);
            let mut got = Vec::new();
            loop {
                match read_line(&mut r, 8).await.unwrap() {
                    Line::Eof => break,
                    Line::Full(l) => got.push(String::from_utf8(l).unwrap()),
                    Line::Oversized => got.push("<oversized>".into()),
                }
            }
            assert_eq!(got, ["short", "<oversized>", "last"]);
        });
    }
}
