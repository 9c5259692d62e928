//! HLO text as XLA prints it (`HloModule::ToString`, `--xla_dump_hlo_as_text`), long form
//! (`%name`, typed operands, computation signatures) and short form alike.
//!
//! Grammar (one instruction per line):
//! `[ROOT ]%?<name> = <shape> <opcode>(<operands>)[, <attr>=<value>]*`. Operand edges come
//! only from the parentheses right after the opcode; computation references (`calls=`,
//! `to_apply=`, `body=`, ...) are kept apart and control predecessors are their own edges, so
//! `%` tokens inside `metadata={...}`, `backend_config=...` or string literals never become
//! edges.

use serde::Serialize;

use crate::error::HloError;

/// A parsed HLO module.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Module {
    pub name: String,
    /// The header line (`HloModule name, k=v, ...`), verbatim.
    pub header: String,
    pub computations: Vec<Computation>,
    /// Index of the `ENTRY` computation, if any.
    pub entry: Option<usize>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Computation {
    pub name: String,
    pub is_entry: bool,
    /// 1-based line of the header in the source text.
    pub line: usize,
    pub instructions: Vec<Instruction>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Instruction {
    pub name: String,
    pub opcode: String,
    /// The result shape as printed (`f32[2,3]{1,0}`, `(f32[], s32[])`).
    pub shape: String,
    pub operands: Vec<String>,
    /// Computations this instruction calls (`calls=`, `to_apply=`, `body=`, ...).
    pub called_computations: Vec<String>,
    pub control_predecessors: Vec<String>,
    pub is_root: bool,
    /// The text inside the opcode's parentheses for `constant`/`parameter` (literal, number).
    pub literal: Option<String>,
    /// `key=value` attributes after the operand list, verbatim values.
    pub attrs: Vec<(String, String)>,
    /// 1-based line in the source text.
    pub line: usize,
    /// The whole definition line without its indentation.
    pub text: String,
}

impl Instruction {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `metadata={op_name="..."}`'s op_name, if printed.
    pub fn metadata_field(&self, field: &str) -> Option<String> {
        let md = self.attr("metadata")?;
        metadata_value(md, field)
    }
}

/// Extract `field=value` from a printed `{op_name="a" source_line=3}` metadata block.
pub fn metadata_value(md: &str, field: &str) -> Option<String> {
    let inner = md.strip_prefix('{')?.strip_suffix('}')?;
    let b = inner.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        let key_start = i;
        while i < b.len() && b[i] != b'=' && b[i] != b' ' {
            i += 1;
        }
        let key = &inner[key_start..i];
        if i >= b.len() || b[i] != b'=' {
            continue;
        }
        i += 1;
        let (val, next) = if i < b.len() && b[i] == b'"' {
            let end = skip_string(b, i);
            // An unterminated string runs to the end of the block.
            let close = if end > i + 1 && b.get(end - 1) == Some(&b'"') {
                end - 1
            } else {
                end
            };
            (unescape(inner.get(i + 1..close).unwrap_or_default()), end)
        } else {
            let s = i;
            while i < b.len() && b[i] != b' ' {
                i += 1;
            }
            (inner[s..i].to_string(), i)
        };
        if key == field {
            return Some(val);
        }
        i = next;
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Attribute keys whose values name computations, not instructions.
const COMPUTATION_ATTRS: &[&str] = &[
    "calls",
    "to_apply",
    "body",
    "condition",
    "branch_computations",
    "true_computation",
    "false_computation",
    "called_computations",
    "async_wrapped_computation",
    "select",
    "scatter",
];

impl Module {
    pub fn instruction_count(&self) -> usize {
        self.computations.iter().map(|c| c.instructions.len()).sum()
    }

    pub fn computation(&self, name: &str) -> Option<&Computation> {
        let name = name.strip_prefix('%').unwrap_or(name);
        self.computations.iter().find(|c| c.name == name)
    }

    pub fn entry_computation(&self) -> Option<&Computation> {
        self.entry.map(|i| &self.computations[i])
    }
}

/// Parse HLO text. `file` names the source in errors (`file:line:column: message`).
pub fn parse(text: &str, file: &str) -> Result<Module, HloError> {
    let mut module = Module::default();
    let mut current: Option<Computation> = None;
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let err = |col: usize, message: String| HloError::Parse {
            file: file.to_string(),
            line: line_no,
            column: indent + col + 1,
            message,
        };
        if let Some(comp) = current.as_mut() {
            if trimmed == "}" {
                let comp = current.take().expect("inside a computation");
                if comp.is_entry {
                    module.entry = Some(module.computations.len());
                }
                module.computations.push(comp);
                continue;
            }
            if trimmed.is_empty() {
                continue;
            }
            let instr = parse_instruction(trimmed, line_no).map_err(|(c, m)| err(c, m))?;
            comp.instructions.push(instr);
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("HloModule ") {
            if !module.name.is_empty() || !module.computations.is_empty() {
                return Err(err(
                    0,
                    "a second `HloModule` header; one module per text".into(),
                ));
            }
            let end = rest.find([',', ' ']).unwrap_or(rest.len());
            module.name = rest[..end].to_string();
            module.header = trimmed.to_string();
            continue;
        }
        if trimmed.ends_with('{') && indent == 0 && !starts_with_digit(trimmed) {
            current = Some(parse_computation_header(trimmed, line_no).map_err(|(c, m)| err(c, m))?);
            continue;
        }
        // Stack-frame tables (`FileNames`, `1 "file.py"`, `1 {file_name_id=1 ...}`) and any
        // other module-level rows carry no instructions.
        if indent == 0 && (starts_with_digit(trimmed) || is_table_title(trimmed)) {
            continue;
        }
        return Err(err(
            0,
            format!(
                "expected `HloModule`, a computation header `[ENTRY ]%name (...) -> shape {{` or a stack-frame table row, got `{}`",
                clip(trimmed, 60)
            ),
        ));
    }
    if let Some(comp) = current {
        return Err(HloError::Parse {
            file: file.to_string(),
            line: comp.line,
            column: 1,
            message: format!("computation `{}` is not closed by `}}`", comp.name),
        });
    }
    if module.name.is_empty() && module.computations.is_empty() {
        return Err(HloError::Parse {
            file: file.to_string(),
            line: 1,
            column: 1,
            message: "no `HloModule` header and no computation: not HLO text".into(),
        });
    }
    Ok(module)
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

fn starts_with_digit(s: &str) -> bool {
    s.as_bytes().first().is_some_and(u8::is_ascii_digit)
}

fn is_table_title(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'$')
}

type LineResult<T> = Result<T, (usize, String)>;

fn parse_computation_header(s: &str, line: usize) -> LineResult<Computation> {
    let (is_entry, rest, off) = match s.strip_prefix("ENTRY ") {
        Some(r) => (true, r, 6),
        None => (false, s, 0),
    };
    let (rest, off) = match rest.strip_prefix('%') {
        Some(r) => (r, off + 1),
        None => (rest, off),
    };
    let end = rest
        .bytes()
        .position(|b| !is_name_byte(b))
        .unwrap_or(rest.len());
    if end == 0 {
        return Err((off, "expected a computation name".into()));
    }
    Ok(Computation {
        name: rest[..end].to_string(),
        is_entry,
        line,
        instructions: Vec::new(),
    })
}

/// Index just past the string literal starting at `b[i] == '"'`.
fn skip_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// Index just past the bracketed group opening at `b[i]` (one of `([{`), honouring nesting,
/// string literals and `/*...*/` comments.
fn skip_group(b: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    while j < b.len() {
        match b[j] {
            b'"' => {
                j = skip_string(b, j);
                continue;
            }
            b'/' if b.get(j + 1) == Some(&b'*') => {
                j = find_from(b, j + 2, b"*/").map(|e| e + 2).unwrap_or(b.len());
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    None
}

fn find_from(b: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(pat.len())
        .position(|w| w == pat)
        .map(|p| p + from)
}

/// Split `s` at top-level commas (outside brackets, strings and comments).
fn split_top(s: &str) -> Vec<(usize, &str)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut j = 0;
    while j < b.len() {
        match b[j] {
            b'"' => {
                j = skip_string(b, j);
                continue;
            }
            b'(' | b'[' | b'{' => {
                j = skip_group(b, j).unwrap_or(b.len());
                continue;
            }
            b'/' if b.get(j + 1) == Some(&b'*') => {
                j = find_from(b, j + 2, b"*/").map(|e| e + 2).unwrap_or(b.len());
                continue;
            }
            b',' => {
                out.push((start, &s[start..j]));
                start = j + 1;
            }
            _ => {}
        }
        j += 1;
    }
    if start < s.len() || !out.is_empty() {
        out.push((start, &s[start..]));
    }
    out
}

fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find("/*") {
        out.push_str(&rest[..p]);
        match rest[p + 2..].find("*/") {
            Some(e) => rest = &rest[p + 2 + e + 2..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// An operand reference: the last token (`f32[2]{0} %a` → `a`, `a` → `a`).
fn operand_name(s: &str) -> Option<String> {
    let s = strip_comments(s);
    let tok = s.trim().rsplit(' ').next()?.trim();
    let tok = tok.strip_prefix('%').unwrap_or(tok);
    if tok.is_empty() || !tok.bytes().all(is_name_byte) {
        return None;
    }
    Some(tok.to_string())
}

/// Computation names in an attribute value: `%c`, `c`, `{%a, %b}`.
fn computation_refs(v: &str) -> Vec<String> {
    let v = v.trim();
    let inner = v
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(v);
    inner
        .split(',')
        .filter_map(|t| {
            let t = t.trim();
            let t = t.strip_prefix('%').unwrap_or(t);
            (!t.is_empty() && t.bytes().all(is_name_byte)).then(|| t.to_string())
        })
        .collect()
}

fn parse_instruction(s: &str, line: usize) -> LineResult<Instruction> {
    let b = s.as_bytes();
    let mut i = 0;
    let is_root = s.starts_with("ROOT ");
    if is_root {
        i = 5;
    }
    if b.get(i) == Some(&b'%') {
        i += 1;
    }
    let name_start = i;
    while i < b.len() && is_name_byte(b[i]) {
        i += 1;
    }
    if i == name_start {
        return Err((i, "expected an instruction name".into()));
    }
    let name = s[name_start..i].to_string();
    if !s[i..].starts_with(" = ") {
        return Err((i, format!("expected ` = ` after instruction name `{name}`")));
    }
    i += 3;
    // Shape: a tuple `(...)` or `type[dims]{layout}` (a scalar may omit the layout).
    let shape_start = i;
    if b.get(i) == Some(&b'(') {
        i = skip_group(b, i).ok_or((i, "unbalanced parentheses in tuple shape".to_string()))?;
    } else {
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if b.get(i) == Some(&b'[') {
            i = skip_group(b, i).ok_or((i, "unbalanced `[` in shape".to_string()))?;
        } else {
            return Err((i, "expected a shape such as `f32[2,3]{1,0}`".into()));
        }
        if b.get(i) == Some(&b'{') {
            i = skip_group(b, i).ok_or((i, "unbalanced `{` in layout".to_string()))?;
        }
    }
    let shape = s[shape_start..i].to_string();
    if b.get(i) != Some(&b' ') {
        return Err((i, "expected a space and an opcode after the shape".into()));
    }
    i += 1;
    let op_start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'-' | b'_' | b'.')) {
        i += 1;
    }
    if i == op_start {
        return Err((i, "expected an opcode".into()));
    }
    let opcode = s[op_start..i].to_string();
    if b.get(i) != Some(&b'(') {
        return Err((i, format!("expected `(` after opcode `{opcode}`")));
    }
    let close =
        skip_group(b, i).ok_or((i, "unbalanced parentheses in the operand list".to_string()))?;
    let inside = &s[i + 1..close - 1];
    let mut operands = Vec::new();
    let mut literal = None;
    if matches!(opcode.as_str(), "constant" | "parameter") {
        literal = Some(inside.to_string());
    } else if !inside.trim().is_empty() {
        for (off, part) in split_top(inside) {
            match operand_name(part) {
                Some(n) => operands.push(n),
                None => {
                    return Err((
                        i + 1 + off,
                        format!(
                            "cannot read operand `{}` of `{name}`",
                            clip(part.trim(), 40)
                        ),
                    ));
                }
            }
        }
    }
    i = close;
    let mut attrs = Vec::new();
    let mut called = Vec::new();
    let mut control = Vec::new();
    if i < b.len() {
        let rest = &s[i..];
        let Some(rest) = rest.strip_prefix(", ") else {
            return Err((
                i,
                "expected `, <attribute>=<value>` after the operand list".into(),
            ));
        };
        for (off, part) in split_top(rest) {
            let part_t = part.trim();
            let Some(eq) = part_t.find('=') else {
                return Err((
                    i + 2 + off,
                    format!("expected `key=value`, got `{}`", clip(part_t, 40)),
                ));
            };
            let key = part_t[..eq].to_string();
            let value = part_t[eq + 1..].to_string();
            if COMPUTATION_ATTRS.contains(&key.as_str()) {
                called.extend(computation_refs(&value));
            } else if key == "control-predecessors" {
                control.extend(computation_refs(&value));
            }
            attrs.push((key, value));
        }
    }
    Ok(Instruction {
        name,
        opcode,
        shape,
        operands,
        called_computations: called,
        control_predecessors: control,
        is_root,
        literal,
        attrs,
        line,
        text: s.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_long_and_short_forms() {
        let text = "HloModule m, is_scheduled=true\n\n%f (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(f32[2]{0} %p), metadata={op_name=\"a%b\"}\n}\n\nENTRY main {\n  a = f32[2]{0} parameter(0)\n  c = f32[] constant(0)\n  t = (f32[2]{0}, /*index=1*/f32[]) tuple(a, c)\n  ROOT r = f32[2]{0} fusion(a), kind=kLoop, calls=%f, control-predecessors={c}\n}\n";
        let m = parse(text, "t.txt").unwrap();
        assert_eq!(m.name, "m");
        assert_eq!(m.computations.len(), 2);
        assert_eq!(m.entry, Some(1));
        let f = &m.computations[0];
        assert_eq!(f.instructions[1].operands, vec!["p"]);
        assert!(f.instructions[1].is_root);
        assert_eq!(
            f.instructions[1].metadata_field("op_name").as_deref(),
            Some("a%b")
        );
        let e = &m.computations[1];
        assert_eq!(e.instructions[1].literal.as_deref(), Some("0"));
        assert_eq!(e.instructions[2].operands, vec!["a", "c"]);
        assert_eq!(e.instructions[2].shape, "(f32[2]{0}, /*index=1*/f32[])");
        assert_eq!(e.instructions[3].called_computations, vec!["f"]);
        assert_eq!(e.instructions[3].control_predecessors, vec!["c"]);
        assert!(e.instructions[3].operands == vec!["a"]);
    }

    #[test]
    fn hostile_input_never_panics() {
        let cases = [
            "HloModule m\nENTRY e {\n  a = f32[] parameter(0), metadata={op_name=\"\u{e9}\u{e9}}\n}\n",
            "HloModule m\nENTRY e {\n  a = f32[] parameter(0), metadata={op_name=\"x}\n}\n",
            "HloModule m\nENTRY e {\n  \u{e9} = f32[] parameter(0)\n}\n",
            "HloModule m\nENTRY e {\n  a = ((((((f32[] tuple()\n}\n",
            "HloModule m\nENTRY e {\n  a = f32[]{ add(b)\n}\n",
            "HloModule m\nENTRY e {\n  ROOT\n}\n",
            "}\n{\n",
            "",
            "ENTRY %e (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n  ROOT %n = f32[] negate(/*index=0*/%p), x=\"\u{1F600}\n}\n",
        ];
        for c in cases {
            if let Ok(m) = parse(c, "x") {
                for comp in &m.computations {
                    for i in &comp.instructions {
                        let _ = i.metadata_field("op_name");
                    }
                }
            }
        }
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let text = "HloModule m\n\nENTRY main {\n  a = f32[2]{0} parameter(0)\n  b = f32[2]{0} negate(a\n}\n";
        let e = parse(text, "bad.txt").unwrap_err().to_string();
        assert!(e.starts_with("bad.txt:5:"), "{e}");
        assert!(e.contains("unbalanced"), "{e}");
        let e = parse(
            "HloModule m\nENTRY main {\n  x = f32[] parameter(0)\n",
            "u.txt",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("u.txt:2:1:"), "{e}");
        let e = parse("hello world\n", "n.txt").unwrap_err().to_string();
        assert!(e.starts_with("n.txt:1:1:"), "{e}");
    }
}
