//! A tool's result as the JSON text the plugin sent, parsed only when something needs the value.
//!
//! The CLI's default output is the result pretty-printed. Parsing a large result into a
//! `serde_json::Value` (an allocation and a hash per key) only to print it again cost more than
//! many tools' own work, so a result in *canonical* form — exactly what `serde_json` writes:
//! no whitespace, its escapes, its number spellings, no repeated keys, bounded nesting — is kept
//! as text and re-indented directly; the output is byte for byte what parsing and
//! `to_string_pretty` would print. Anything else is parsed as before.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde_json::Value;
use serde_json::value::RawValue;

/// Deeper results are left to the parser (which also enforces serde_json's recursion limit).
const MAX_DEPTH: usize = 100;

/// Room for any number serde_json prints (at most 24 bytes: `-1.7976931348623157e308`, a u64
/// or an i64).
const NUMBER_BYTES: usize = 32;

/// A result: canonical text (parsed on first use) or a value.
#[derive(Clone, Debug)]
pub struct ResultJson {
    /// Canonical JSON text (see `canonicalize`).
    raw: Option<Box<str>>,
    value: OnceLock<Value>,
}

impl ResultJson {
    /// Keep `raw` as text if it is canonical, else parse it now; `Err` when it does not parse.
    pub fn from_raw(raw: Box<RawValue>) -> Result<Self, serde_json::Error> {
        match canonicalize(raw.get()) {
            Some(Cow::Borrowed(_)) => Ok(ResultJson {
                raw: Some(raw.into()),
                value: OnceLock::new(),
            }),
            Some(Cow::Owned(fixed)) => Ok(ResultJson {
                raw: Some(fixed.into_boxed_str()),
                value: OnceLock::new(),
            }),
            None => serde_json::from_str::<Value>(raw.get()).map(ResultJson::from),
        }
    }

    /// The value (parsed on first use).
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| match &self.raw {
            // Canonical text always parses (checked in `from_raw`).
            Some(raw) => serde_json::from_str(raw).unwrap_or(Value::Null),
            None => Value::Null,
        })
    }

    pub fn into_value(mut self) -> Value {
        self.value();
        self.value.take().unwrap_or(Value::Null)
    }

    /// The compact JSON text (what `Value::to_string` prints).
    pub fn compact(&self) -> Cow<'_, str> {
        match (&self.raw, self.value.get()) {
            (Some(raw), _) => Cow::Borrowed(raw),
            (None, Some(v)) => Cow::Owned(v.to_string()),
            (None, None) => Cow::Borrowed("null"),
        }
    }

    /// The pretty JSON text (what `serde_json::to_string_pretty` prints).
    pub fn pretty(&self) -> String {
        match &self.raw {
            Some(raw) => reindent(raw),
            None => serde_json::to_string_pretty(self.value()).unwrap_or_default(),
        }
    }
}

impl From<Value> for ResultJson {
    fn from(v: Value) -> Self {
        let value = OnceLock::new();
        let _ = value.set(v);
        ResultJson { raw: None, value }
    }
}

impl std::ops::Deref for ResultJson {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.value()
    }
}

impl PartialEq for ResultJson {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

/// Is `s` exactly what `serde_json::to_string` would print for the value it parses to? `s` is
/// already known to be valid JSON (a `RawValue`).
pub fn is_canonical(s: &str) -> bool {
    matches!(canonicalize(s), Some(Cow::Borrowed(_)))
}

/// What `serde_json::to_string` would print for the value `s` parses to, when that differs from
/// `s` in number spellings at most (serde_json's default float parsing is not exact, so a
/// plugin's float can print back differently): `s` itself when it is canonical, `s` with those
/// numbers rewritten, or `None` when anything else differs (whitespace, escapes, repeated
/// keys, depth, a number out of range) and the text must be parsed.
pub fn canonicalize(s: &str) -> Option<Cow<'_, str>> {
    let mut fixed: Option<String> = None;
    let mut copied = 0; // bytes of `s` already in `fixed`
    let ok = scan(s, |start, end| {
        let t = &s[start..end];
        if integer_is_canonical(t) {
            return true;
        }
        // As serde_json itself parses and prints the number (into a buffer on the stack: most
        // numbers print back unchanged, and a `String` per number was a good part of the scan).
        let Ok(v) = serde_json::from_str::<Value>(t) else {
            return false;
        };
        let mut buf = [0u8; NUMBER_BYTES];
        let mut rest = &mut buf[..];
        if serde_json::to_writer(&mut rest, &v).is_err() {
            return false; // longer than any number serde_json prints: leave it to the parser
        }
        let unused = rest.len();
        let printed = &buf[..NUMBER_BYTES - unused];
        if printed != t.as_bytes() {
            let Ok(printed) = std::str::from_utf8(printed) else {
                return false;
            };
            let f = fixed.get_or_insert_with(|| String::with_capacity(s.len()));
            f.push_str(&s[copied..start]);
            f.push_str(printed);
            copied = end;
        }
        true
    });
    if !ok {
        return None;
    }
    Some(match fixed {
        None => Cow::Borrowed(s),
        Some(mut f) => {
            f.push_str(&s[copied..]);
            Cow::Owned(f)
        }
    })
}

/// Walk valid JSON text, checking everything but numbers, which go to `number(start, end)`.
fn scan(s: &str, mut number: impl FnMut(usize, usize) -> bool) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    // The open containers, and the keys of the open objects (all in one list, so that an object
    // costs no allocation of its own).
    let mut stack: Vec<Open> = Vec::new();
    let mut keys: Vec<&str> = Vec::new();
    let mut expect_key = false;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i + 1;
                let Some(end) = canonical_string_end(b, start) else {
                    return false;
                };
                if expect_key {
                    let Some(open) = stack.last_mut() else {
                        return false;
                    };
                    if !open.insert_key(&mut keys, &s[start..end]) {
                        return false; // the parser would keep one of them
                    }
                    expect_key = false;
                }
                i = end + 1;
            }
            c @ (b'{' | b'[') => {
                if stack.len() >= MAX_DEPTH {
                    return false;
                }
                stack.push(Open {
                    object: c == b'{',
                    keys_from: keys.len(),
                    many: None,
                });
                expect_key = c == b'{';
                i += 1;
            }
            b'}' | b']' => {
                if let Some(open) = stack.pop() {
                    keys.truncate(open.keys_from);
                }
                expect_key = false;
                i += 1;
            }
            b',' => {
                expect_key = stack.last().is_some_and(|open| open.object);
                i += 1;
            }
            b':' => i += 1,
            b't' | b'f' | b'n' => {
                // true / false / null (valid JSON: the literal is complete)
                i += match b[i] {
                    b't' => 4,
                    b'f' => 5,
                    _ => 4,
                };
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += b[i..]
                    .iter()
                    .position(|c| !matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .unwrap_or(b.len() - i);
                if !number(start, i) {
                    return false;
                }
            }
            _ => return false, // whitespace
        }
    }
    true
}

/// An open container of the scan.
struct Open<'a> {
    object: bool,
    /// Where this object's keys start in the shared list of keys, while it has few.
    keys_from: usize,
    /// This object's keys once it has many (they then leave the shared list).
    many: Option<std::collections::HashSet<&'a str>>,
}

impl<'a> Open<'a> {
    /// Record `key` for this object (the innermost open one); false if it was already there.
    fn insert_key(&mut self, keys: &mut Vec<&'a str>, key: &'a str) -> bool {
        if let Some(set) = &mut self.many {
            return set.insert(key);
        }
        if keys[self.keys_from..].contains(&key) {
            return false;
        }
        keys.push(key);
        if keys.len() - self.keys_from > 16 {
            self.many = Some(keys.drain(self.keys_from..).collect());
        }
        true
    }
}

/// The index of the closing quote of the string starting at `start`, if every escape in it is
/// the one serde_json writes.
fn canonical_string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    loop {
        // Plain bytes are skipped by a search (a much tighter loop than one step per byte).
        i += b.get(i..)?.iter().position(|&c| c == b'"' || c == b'\\')?;
        if b[i] == b'"' {
            return Some(i);
        }
        // A backslash.
        match *b.get(i + 1)? {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
            b'u' => {
                // Only control characters without a short escape, in lowercase hex.
                let hex = b.get(i + 2..i + 6)?;
                let lower = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
                if hex[0] != b'0' || hex[1] != b'0' || !matches!(hex[2], b'0' | b'1') {
                    return None;
                }
                if !lower(hex[3]) {
                    return None;
                }
                let code = (hex[2] - b'0') * 16
                    + if hex[3].is_ascii_digit() {
                        hex[3] - b'0'
                    } else {
                        hex[3] - b'a' + 10
                    };
                if matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                    return None;
                }
                i += 6;
            }
            _ => return None,
        }
    }
}

/// Is this an integer serde_json prints back unchanged (no leading zero, no `-0`, within u64,
/// or i64 when negative)? Anything else is checked by parsing it.
fn integer_is_canonical(t: &str) -> bool {
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return false;
    }
    if t.starts_with('-') {
        digits != "0" && t.parse::<i64>().is_ok()
    } else {
        t.parse::<u64>().is_ok()
    }
}

/// Pretty-print canonical compact JSON the way `serde_json::to_string_pretty` does.
fn reindent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len() + s.len() / 2);
    let mut depth = 0usize;
    let mut i = 0;
    let mut run = 0; // start of the bytes not yet copied
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            c @ (b'{' | b'[') => {
                out.push_str(&s[run..i]);
                let close = if c == b'{' { b'}' } else { b']' };
                if b.get(i + 1) == Some(&close) {
                    out.push_str(&s[i..i + 2]);
                    i += 2;
                } else {
                    out.push(c as char);
                    depth += 1;
                    newline(&mut out, depth);
                    i += 1;
                }
                run = i;
            }
            c @ (b'}' | b']') => {
                out.push_str(&s[run..i]);
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c as char);
                i += 1;
                run = i;
            }
            b',' => {
                out.push_str(&s[run..i]);
                out.push(',');
                newline(&mut out, depth);
                i += 1;
                run = i;
            }
            b':' => {
                out.push_str(&s[run..i]);
                out.push_str(": ");
                i += 1;
                run = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&s[run..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn canonical_text_is_reindented_exactly_as_serde_json_pretty_prints() {
        let v = json!({
            "a": [], "b": {}, "c": [1, -2, 3.5, 1e300, -0.0, 0.1, 18446744073709551615u64,
                                  -9223372036854775808i64, 5.0, 1.5e-7],
            "d": {"e\"q": "x\\y\n\t\u{1}\u{7f}é💡, : { [ ] }", "f": [[], [{}], [[1]]]},
            "g": null, "h": true, "i": false, "": "",
        });
        let text = v.to_string();
        assert!(is_canonical(&text), "{text}");
        let r = ResultJson::from_raw(raw(&text)).unwrap();
        assert!(r.raw.is_some());
        assert_eq!(r.pretty(), serde_json::to_string_pretty(&v).unwrap());
        assert_eq!(r.compact(), text);
        assert_eq!(*r, v);
        for scalar in ["1", "\"s\"", "null", "[]", "{}", "-1.25"] {
            let v: Value = serde_json::from_str(scalar).unwrap();
            assert_eq!(
                ResultJson::from_raw(raw(scalar)).unwrap().pretty(),
                serde_json::to_string_pretty(&v).unwrap()
            );
        }
    }

    #[test]
    fn anything_else_is_parsed_and_prints_as_before() {
        for text in [
            r#"{"a": 1}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":"\/"}"#,
            r#"{"a":"\u00e9"}"#,
            r#"{"a":"\u000A"}"#,
            r#"{"a":"\u001F"}"#,
            "[\n1]",
        ] {
            assert!(!is_canonical(text), "{text}");
            let r = ResultJson::from_raw(raw(text)).unwrap();
            assert!(r.raw.is_none(), "{text}");
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(r.pretty(), serde_json::to_string_pretty(&v).unwrap());
            assert_eq!(r.compact(), v.to_string());
        }
        // Numbers serde_json prints differently are rewritten the way it prints them.
        for text in [
            r#"{"a":[1E5,1e5,0.10,-0,1.0e0,18446744073709551616,-9223372036854775809]}"#,
            r#"[0.30000000000000004,2.2250738585072014e-308,1.7976931348623157e308,9007199254740993.0]"#,
            r#"[123456789.12345678,0.1234567890123456789,5e-324]"#,
        ] {
            assert!(!is_canonical(text), "{text}");
            let r = ResultJson::from_raw(raw(text)).unwrap();
            assert!(r.raw.is_some(), "{text}");
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(r.pretty(), serde_json::to_string_pretty(&v).unwrap());
            assert_eq!(r.compact(), v.to_string());
            assert_eq!(*r, v);
        }
        assert!(
            ResultJson::from_raw(raw("[1e400]")).is_err(),
            "out of range, as before"
        );
        // Keys may repeat across objects, nested or not, never within one (whether it has few
        // keys, compared in a list, or many, kept in a set).
        let members = |n: usize, value: &str| {
            (0..n)
                .map(|i| format!("\"k{i}\":{value}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        for n in [3, 40] {
            let inner = format!("{{{}}}", members(n, "[1]"));
            let outer = format!("{{{}}}", members(n, &inner));
            assert!(is_canonical(&outer), "{outer}");
            assert!(is_canonical(&format!("[{outer},{outer}]")));
            let after_nested = format!("{{{},\"k1\":2}}", members(n, &inner));
            assert!(!is_canonical(&after_nested), "{after_nested}");
            let repeating_inner = format!("{{{},\"k0\":2}}", members(n, "1"));
            let inside = format!("{{{}}}", members(n, &repeating_inner));
            assert!(!is_canonical(&inside), "{inside}");
        }
        // Control characters with a short escape, and the escapes serde_json writes.
        assert!(is_canonical(r#"["\u0000\u001f\b\f\n\r\t\"\\"]"#));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(!is_canonical(&deep));
    }
}
