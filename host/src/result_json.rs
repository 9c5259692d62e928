//! A tool's result as the JSON text the plugin sent, parsed only when something needs the value.
//!
//! The CLI's default output is the result pretty-printed. The envelope's parse has already
//! validated the text (the result is a `RawValue`), so it is re-indented as it stands, in one
//! pass: the layout of `serde_json::to_string_pretty`, with the plugin's own spelling of every
//! string and number. Parsing it into a `Value` (an allocation and a hash per key) only to
//! print it again cost more than many tools' own work; checking that the text was exactly what
//! serde_json would print again (the previous design) cost as much as the parse on large
//! results (list_xplane_events: 13 M instructions for 0.9 MB). For text serde_json wrote —
//! every plugin built on the SDK — the output is byte for byte what parsing and
//! `to_string_pretty` print. The host parses with serde_json's `float_roundtrip`: its default
//! float parsing is off by an ulp for many values a plugin prints (a mean of
//! `102844666.66666667` read back as `…669`), and the old path printed those perturbed values.
//! Now the CLI's text, MCP's text and MCP's structured content all carry the plugin's value.

use std::sync::OnceLock;

use serde_json::Value;
use serde_json::value::RawValue;

/// A result: the plugin's text (parsed on first use) or a value.
#[derive(Clone, Debug)]
pub struct ResultJson {
    /// Valid JSON text, as the plugin sent it.
    raw: Option<Box<str>>,
    value: OnceLock<Value>,
}

impl ResultJson {
    /// Keep validated JSON text as it is.
    pub fn from_raw(raw: Box<RawValue>) -> Self {
        ResultJson {
            raw: Some(raw.into()),
            value: OnceLock::new(),
        }
    }

    /// The value (parsed on first use; `null` if serde_json cannot represent it, e.g. a
    /// number beyond the `f64` range, which is valid JSON).
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| match &self.raw {
            Some(raw) => serde_json::from_str(raw).unwrap_or(Value::Null),
            None => Value::Null,
        })
    }

    pub fn into_value(mut self) -> Value {
        self.value();
        self.value.take().unwrap_or(Value::Null)
    }

    /// The JSON text to store or send: the plugin's text (compact when serde_json wrote it),
    /// or the value printed compactly.
    pub fn compact(&self) -> std::borrow::Cow<'_, str> {
        use std::borrow::Cow;
        match (&self.raw, self.value.get()) {
            (Some(raw), _) => Cow::Borrowed(raw),
            (None, Some(v)) => Cow::Owned(v.to_string()),
            (None, None) => Cow::Borrowed("null"),
        }
    }

    /// The pretty JSON text (the layout of `serde_json::to_string_pretty`).
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

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// Pretty-print valid JSON text the way `serde_json::to_string_pretty` lays it out (two-space
/// indent, `": "`, empty containers as `[]` / `{}`), dropping the text's own whitespace and
/// copying strings, numbers and literals as they are.
fn reindent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len() + s.len() / 2);
    let mut depth = 0usize;
    let mut i = 0;
    // The portable searcher, not `memchr::memchr2`: that one picks its SIMD kernel at run time
    // with `cpuid`, a hypervisor trap on a VM, which cost a one-shot call more (~30 us) than
    // the faster kernel saves on a result of typical size.
    let quote_or_escape = memchr::arch::all::memchr::Two::new(b'"', b'\\');
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i;
                i += 1;
                // Plain bytes are skipped by a search, not one step per byte; an escape's
                // second byte is skipped with it (so `\"` does not end the string).
                while let Some(k) = quote_or_escape.find(&b[i..]) {
                    i += k;
                    if b[i] == b'"' {
                        break;
                    }
                    i += 2;
                }
                i = (i + 1).min(b.len());
                out.push_str(&s[start..i]);
            }
            c @ (b'{' | b'[') => {
                let close = if c == b'{' { b'}' } else { b']' };
                let mut next = i + 1;
                while next < b.len() && is_whitespace(b[next]) {
                    next += 1;
                }
                if b.get(next) == Some(&close) {
                    out.push(c as char);
                    out.push(close as char);
                    i = next + 1;
                } else {
                    out.push(c as char);
                    depth += 1;
                    newline(&mut out, depth);
                    i += 1;
                }
            }
            c @ (b'}' | b']') => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c as char);
                i += 1;
            }
            b',' => {
                out.push(',');
                newline(&mut out, depth);
                i += 1;
            }
            b':' => {
                out.push_str(": ");
                i += 1;
            }
            c if is_whitespace(c) => i += 1,
            _ => {
                // A number or a literal: up to the next delimiter.
                let start = i;
                while i < b.len()
                    && !matches!(b[i], b',' | b']' | b'}' | b':')
                    && !is_whitespace(b[i])
                {
                    i += 1;
                }
                out.push_str(&s[start..i]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    fn pretty(text: &str) -> String {
        ResultJson::from_raw(raw(text)).pretty()
    }

    #[test]
    fn what_serde_json_writes_is_reindented_exactly_as_it_pretty_prints() {
        let v = json!({
            "a": [], "b": {}, "c": [1, -2, 3.5, 1e300, -0.0, 0.1, 18446744073709551615u64,
                                  -9223372036854775808i64, 5.0, 1.5e-7],
            "d": {"e\"q": "x\\y\n\t\u{1}\u{7f}é💡, : { [ ] } \\\"", "f": [[], [{}], [[1]]]},
            "g": null, "h": true, "i": false, "": "", "\\": "\\",
        });
        let text = v.to_string();
        let r = ResultJson::from_raw(raw(&text));
        assert_eq!(r.pretty(), serde_json::to_string_pretty(&v).unwrap());
        assert_eq!(r.compact(), text);
        assert_eq!(*r, v);
        for scalar in ["1", "\"s\"", "null", "[]", "{}", "-1.25", "true"] {
            let v: Value = serde_json::from_str(scalar).unwrap();
            assert_eq!(pretty(scalar), serde_json::to_string_pretty(&v).unwrap());
        }
    }

    #[test]
    fn other_valid_json_keeps_its_spelling_and_takes_the_same_layout() {
        // Whitespace anywhere between tokens, inside empty containers too.
        let spaced = "{ \"a\" :\t[ 1 ,\r\n 2 ] , \"b\" : { } , \"c\" : [\n] }";
        let v: Value = serde_json::from_str(spaced).unwrap();
        assert_eq!(pretty(spaced), serde_json::to_string_pretty(&v).unwrap());
        // Escapes, number spellings and repeated keys are printed as the plugin wrote them.
        assert_eq!(
            pretty(r#"{"a":"\u00e9\/","b":[1E5,0.10,-0],"a":2}"#),
            "{\n  \"a\": \"\\u00e9\\/\",\n  \"b\": [\n    1E5,\n    0.10,\n    -0\n  ],\n  \"a\": 2\n}"
        );
        // A float whose shortest spelling serde_json's default parser does not read back
        // exactly prints as the plugin wrote it (its exact value).
        assert_eq!(
            pretty("[2.2250738585072014e-308]"),
            "[\n  2.2250738585072014e-308\n]"
        );
        // Valid JSON serde_json cannot hold in a value still prints; its value is null.
        let big = ResultJson::from_raw(raw("[1e400]"));
        assert_eq!(big.pretty(), "[\n  1e400\n]");
        assert_eq!(*big, Value::Null);
    }

    #[test]
    fn deep_nesting_needs_no_recursion() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let out = pretty(&deep);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2 * 10_000 - 1);
        assert_eq!(lines[9_999], format!("{}[]", "  ".repeat(9_999)));
        assert_eq!(lines[1], "  [");
        assert_eq!(lines[lines.len() - 2], "  ]");
    }
}
