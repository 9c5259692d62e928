//! MLIR bytecode (the `custom_call_config.body` of a Mosaic custom call), decoded natively.
//!
//! Container: magic `ML\xEFR`, a varint version, a NUL-terminated producer, then sections
//! `(id byte, varint length, data)`: 0 strings, 1 dialects + op names, 2 attributes/types,
//! 3 their offsets, 4 IR, 5/6 resources, 7 dialect versions, 8 properties. Varints use
//! MLIR's prefix encoding (the count of trailing zero bits in the first byte is the number of
//! extra bytes).
//!
//! Decoded here: header, string table, dialect and op-name tables, attribute/type offsets,
//! the builtin location and string attributes, and the IR section of version-0 bytecode (what
//! Mosaic serializes), which gives true op counts and each op's `jax.named_scope`. What cannot
//! be decoded is reported as `null` with the reason, never guessed.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

pub const MAGIC: &[u8; 4] = b"ML\xEFR";

/// Deepest region nesting followed (a guard against hostile input, far above real kernels).
const MAX_DEPTH: usize = 200;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("MLIR bytecode: {what} at byte {offset}")]
pub struct BcError {
    pub what: String,
    pub offset: usize,
}

struct Reader<'a> {
    d: &'a [u8],
    p: usize,
    /// Offset of `d` within the whole blob (for messages).
    base: usize,
}

impl<'a> Reader<'a> {
    fn new(d: &'a [u8], base: usize) -> Self {
        Reader { d, p: 0, base }
    }
    fn err(&self, what: &str) -> BcError {
        BcError {
            what: what.into(),
            offset: self.base + self.p,
        }
    }
    fn done(&self) -> bool {
        self.p >= self.d.len()
    }
    fn byte(&mut self) -> Result<u8, BcError> {
        let b = *self
            .d
            .get(self.p)
            .ok_or_else(|| self.err("unexpected end"))?;
        self.p += 1;
        Ok(b)
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], BcError> {
        let end = self
            .p
            .checked_add(n)
            .filter(|e| *e <= self.d.len())
            .ok_or_else(|| self.err("length past the end"))?;
        let s = &self.d[self.p..end];
        self.p = end;
        Ok(s)
    }
    fn varint(&mut self) -> Result<u64, BcError> {
        let first = self.byte()?;
        if first & 1 == 1 {
            return Ok((first >> 1) as u64);
        }
        if first == 0 {
            let b = self.bytes(8)?;
            return Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")));
        }
        let extra = first.trailing_zeros() as usize;
        let rest = self.bytes(extra)?;
        let mut v: u64 = first as u64;
        for (i, b) in rest.iter().enumerate() {
            v |= (*b as u64) << (8 * (i + 1));
        }
        Ok(v >> (extra + 1))
    }
    fn index(&mut self, len: usize, what: &str) -> Result<usize, BcError> {
        let v = self.varint()?;
        if (v as usize) < len && v <= usize::MAX as u64 {
            Ok(v as usize)
        } else {
            Err(self.err(&format!("{what} index {v} out of range (< {len})")))
        }
    }
}

/// One attribute (or type) entry: its dialect and raw encoding.
#[derive(Clone, Debug)]
struct Entry {
    dialect: usize,
    custom: bool,
    start: usize,
    len: usize,
}

#[derive(Clone, Debug, Default)]
pub struct Bytecode {
    pub version: u64,
    pub producer: String,
    /// `(section id, length)` in file order.
    pub sections: Vec<(u8, usize)>,
    pub strings: Vec<String>,
    pub dialects: Vec<String>,
    /// Full op names (`tpu.matmul`), in op-name-table order, with their dialect group.
    pub op_names: Vec<(String, String)>,
    attrs: Vec<Entry>,
    attr_data: Vec<u8>,
    pub op_counts: Option<BTreeMap<String, u64>>,
    /// Ops per `jax.named_scope` path (`acc/dot_general`) from their locations.
    pub scope_op_counts: Option<BTreeMap<String, BTreeMap<String, u64>>>,
    pub functions: Vec<String>,
    /// Why a part could not be decoded.
    pub undecoded: BTreeMap<&'static str, String>,
}

/// Parse what can be parsed. Only a bad magic or a broken header is an error.
pub fn parse(raw: &[u8]) -> Result<Bytecode, BcError> {
    if raw.len() < 4 || &raw[..4] != MAGIC {
        return Err(BcError {
            what: "missing magic ML\\xEFR".into(),
            offset: 0,
        });
    }
    let mut r = Reader::new(raw, 0);
    r.p = 4;
    let mut bc = Bytecode {
        version: r.varint()?,
        ..Default::default()
    };
    let nul = raw[r.p..]
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| r.err("producer string is not NUL-terminated"))?;
    bc.producer = String::from_utf8_lossy(&raw[r.p..r.p + nul]).into_owned();
    r.p += nul + 1;
    let mut sections: BTreeMap<u8, (usize, &[u8])> = BTreeMap::new();
    while !r.done() {
        let id_byte = r.byte()?;
        let id = id_byte & 0x7f;
        let len = r.varint()? as usize;
        if id_byte & 0x80 != 0 {
            let align = r.varint()? as usize;
            if align == 0 || !align.is_power_of_two() || align > 4096 {
                return Err(r.err("bad section alignment"));
            }
            while !r.p.is_multiple_of(align) {
                let b = r.byte()?;
                if b != 0xCB {
                    return Err(r.err("bad alignment padding"));
                }
            }
        }
        let start = r.p;
        let data = r.bytes(len)?;
        bc.sections.push((id, len));
        sections.insert(id, (start, data));
    }
    match sections.get(&0) {
        Some((base, d)) => match parse_strings(d, *base) {
            Ok(s) => bc.strings = s,
            Err(e) => {
                bc.undecoded.insert("strings", e.to_string());
            }
        },
        None => {
            bc.undecoded.insert("strings", "no string section".into());
        }
    }
    if bc.version != 0 {
        // Later versions change the dialect, block-argument and op encodings (dialect
        // versions, lazy-loaded regions, use-list orders, properties); decoding them without
        // a sample to check against would be guessing.
        let why = format!(
            "decoded for bytecode version 0 (what Mosaic writes); this body is version {}",
            bc.version
        );
        for k in ["op_names", "ir", "locations"] {
            bc.undecoded.insert(k, why.clone());
        }
        return Ok(bc);
    }
    if let Some((base, d)) = sections.get(&1) {
        if let Err(e) = parse_dialects(&mut bc, d, *base) {
            bc.undecoded.insert("op_names", e.to_string());
        }
    } else {
        bc.undecoded.insert("op_names", "no dialect section".into());
    }
    if let (Some((b3, offs)), Some((_, data))) = (sections.get(&3), sections.get(&2)) {
        match parse_attr_offsets(offs, *b3, data.len()) {
            Ok(a) => {
                bc.attrs = a;
                bc.attr_data = data.to_vec();
            }
            Err(e) => {
                bc.undecoded.insert("locations", e.to_string());
            }
        }
    }
    match sections.get(&4) {
        Some((base, d)) if !bc.undecoded.contains_key("op_names") => {
            if let Err(e) = parse_ir(&mut bc, d, *base) {
                bc.op_counts = None;
                bc.scope_op_counts = None;
                bc.undecoded.insert("ir", e.to_string());
            }
        }
        Some(_) => {
            bc.undecoded
                .insert("ir", "the op-name table could not be decoded".into());
        }
        None => {
            bc.undecoded.insert("ir", "no IR section".into());
        }
    }
    Ok(bc)
}

fn parse_strings(d: &[u8], base: usize) -> Result<Vec<String>, BcError> {
    let mut r = Reader::new(d, base);
    let n = r.varint()? as usize;
    if n > d.len() {
        return Err(r.err("string count larger than the section"));
    }
    let mut lens = Vec::with_capacity(n);
    for _ in 0..n {
        lens.push(r.varint()? as usize);
    }
    // The string data sits at the end of the section, laid out back to front.
    let mut end = d.len();
    let mut out = Vec::with_capacity(n);
    for l in lens {
        if l == 0 || l > end || end - l < r.p {
            return Err(r.err("string length overruns the section"));
        }
        end -= l;
        out.push(String::from_utf8_lossy(&d[end..end + l - 1]).into_owned());
    }
    out.reverse();
    Ok(out)
}

fn parse_dialects(bc: &mut Bytecode, d: &[u8], base: usize) -> Result<(), BcError> {
    let mut r = Reader::new(d, base);
    let n = r.varint()? as usize;
    for _ in 0..n {
        let i = r.index(bc.strings.len(), "dialect name")?;
        bc.dialects.push(bc.strings[i].clone());
    }
    while !r.done() {
        let di = r.index(bc.dialects.len(), "dialect")?;
        let count = r.varint()?;
        for _ in 0..count {
            let i = r.index(bc.strings.len(), "op name")?;
            let name = &bc.strings[i];
            let dialect = bc.dialects[di].clone();
            // Mosaic's versioned `stable_mosaic` group stores already-qualified names.
            let full = if name.contains('.') {
                name.clone()
            } else {
                format!("{dialect}.{name}")
            };
            bc.op_names.push((dialect, full));
        }
    }
    Ok(())
}

fn parse_attr_offsets(d: &[u8], base: usize, data_len: usize) -> Result<Vec<Entry>, BcError> {
    let mut r = Reader::new(d, base);
    let n_attrs = r.varint()? as usize;
    let n_types = r.varint()? as usize;
    let mut out = Vec::new();
    let mut off = 0usize;
    let mut group = |r: &mut Reader, total: usize, out: &mut Vec<Entry>| -> Result<(), BcError> {
        let mut got = 0;
        while got < total {
            let dialect = r.varint()? as usize;
            let n = r.varint()? as usize;
            if n == 0 || got + n > total {
                return Err(r.err("attribute group count mismatch"));
            }
            for _ in 0..n {
                let v = r.varint()? as usize;
                let len = v >> 1;
                if off + len > data_len {
                    return Err(r.err("attribute entry past the attribute section"));
                }
                out.push(Entry {
                    dialect,
                    custom: v & 1 == 1,
                    start: off,
                    len,
                });
                off += len;
            }
            got += n;
        }
        Ok(())
    };
    group(&mut r, n_attrs, &mut out)?;
    let mut types = Vec::new();
    group(&mut r, n_types, &mut types)?;
    Ok(out)
}

// Builtin attribute codes of the builtin dialect's bytecode encoding.
const BUILTIN_DICTIONARY: u64 = 1;
const BUILTIN_STRING: u64 = 2;
const BUILTIN_CALLSITE_LOC: u64 = 10;
const BUILTIN_FUSED_LOC: u64 = 12;
const BUILTIN_NAME_LOC: u64 = 14;

impl Bytecode {
    fn builtin_attr(&self, i: usize) -> Option<(u64, Reader<'_>)> {
        let e = self.attrs.get(i)?;
        if !e.custom || self.dialects.get(e.dialect).map(String::as_str) != Some("builtin") {
            return None;
        }
        let mut r = Reader::new(&self.attr_data[e.start..e.start + e.len], 0);
        let code = r.varint().ok()?;
        Some((code, r))
    }

    fn string_attr(&self, i: usize) -> Option<&str> {
        let (code, mut r) = self.builtin_attr(i)?;
        if code != BUILTIN_STRING {
            return None;
        }
        let s = r.index(self.strings.len(), "string").ok()?;
        Some(&self.strings[s])
    }

    /// The `NameLoc` names along a location, outermost first (call sites follow the callee,
    /// fused locations their first member).
    fn loc_names(&self, i: usize, depth: usize, out: &mut Vec<String>) {
        if depth > 16 {
            return;
        }
        let Some((code, mut r)) = self.builtin_attr(i) else {
            return;
        };
        let n = self.attrs.len();
        match code {
            BUILTIN_NAME_LOC => {
                if let (Ok(name), Ok(child)) = (r.index(n, "attr"), r.index(n, "attr")) {
                    if let Some(s) = self.string_attr(name) {
                        out.push(s.to_string());
                    }
                    self.loc_names(child, depth + 1, out);
                }
            }
            BUILTIN_CALLSITE_LOC => {
                if let Ok(callee) = r.index(n, "attr") {
                    self.loc_names(callee, depth + 1, out);
                }
            }
            BUILTIN_FUSED_LOC => {
                if let Ok(count) = r.varint()
                    && count > 0
                    && let Ok(first) = r.index(n, "attr")
                {
                    self.loc_names(first, depth + 1, out);
                }
            }
            _ => {}
        }
    }

    /// The named-scope path of a location: the first NameLoc name with a `/`.
    fn scope_of(&self, loc: usize) -> Option<String> {
        let mut names = Vec::new();
        self.loc_names(loc, 0, &mut names);
        names.into_iter().find(|n| n.contains('/'))
    }

    /// `sym_name` from an attribute dictionary.
    fn sym_name(&self, dict: usize) -> Option<String> {
        let (code, mut r) = self.builtin_attr(dict)?;
        if code != BUILTIN_DICTIONARY {
            return None;
        }
        let n = self.attrs.len();
        let count = r.varint().ok()?;
        for _ in 0..count {
            let k = r.index(n, "attr").ok()?;
            let v = r.index(n, "attr").ok()?;
            if self.string_attr(k) == Some("sym_name") {
                return self.string_attr(v).map(str::to_string);
            }
        }
        None
    }

    /// Textual attributes (those written in assembly form), e.g. `#tpu.memory_space<vmem>`.
    pub fn text_attrs(&self) -> Vec<String> {
        self.attrs
            .iter()
            .filter(|e| !e.custom)
            .map(|e| {
                let b = &self.attr_data[e.start..e.start + e.len];
                String::from_utf8_lossy(b.strip_suffix(&[0]).unwrap_or(b)).into_owned()
            })
            .collect()
    }
}

struct IrWalk<'b> {
    bc: &'b Bytecode,
    counts: BTreeMap<String, u64>,
    scopes: BTreeMap<String, BTreeMap<String, u64>>,
    functions: Vec<String>,
}

impl IrWalk<'_> {
    fn block(&mut self, r: &mut Reader, depth: usize) -> Result<(), BcError> {
        let v = r.varint()?;
        let n_ops = v >> 1;
        if v & 1 == 1 {
            let n_args = r.varint()?;
            for _ in 0..n_args {
                // Version 0: every block argument has a type and a location.
                r.varint()?;
                r.varint()?;
            }
        }
        for _ in 0..n_ops {
            self.op(r, depth)?;
        }
        Ok(())
    }

    fn region(&mut self, r: &mut Reader, depth: usize) -> Result<(), BcError> {
        if depth > MAX_DEPTH {
            return Err(r.err("regions nested too deeply"));
        }
        let n_blocks = r.varint()?;
        if n_blocks == 0 {
            return Ok(());
        }
        let _n_values = r.varint()?;
        for _ in 0..n_blocks {
            self.block(r, depth + 1)?;
        }
        Ok(())
    }

    fn op(&mut self, r: &mut Reader, depth: usize) -> Result<(), BcError> {
        let name = r.index(self.bc.op_names.len(), "op name")?;
        let mask = r.byte()?;
        if mask & !0x1f != 0 {
            return Err(r.err(&format!(
                "op encoding mask {mask:#x} has bits version 0 does not define"
            )));
        }
        let loc = r.varint()? as usize;
        let op = self.bc.op_names[name].1.clone();
        *self.counts.entry(op.clone()).or_default() += 1;
        if let Some(scope) = self.bc.scope_of(loc) {
            *self
                .scopes
                .entry(scope)
                .or_default()
                .entry(op.clone())
                .or_default() += 1;
        }
        if mask & 0x01 != 0 {
            let dict = r.varint()? as usize;
            if op == "func.func"
                && let Some(n) = self.bc.sym_name(dict)
            {
                self.functions.push(n);
            }
        }
        for bit in [0x02u8, 0x04, 0x08] {
            // results (types), operands (values), successors (blocks)
            if mask & bit != 0 {
                let n = r.varint()?;
                if n as usize > r.d.len() {
                    return Err(r.err("implausible operand/result count"));
                }
                for _ in 0..n {
                    r.varint()?;
                }
            }
        }
        if mask & 0x10 != 0 {
            let v = r.varint()?;
            for _ in 0..(v >> 1) {
                self.region(r, depth + 1)?;
            }
        }
        Ok(())
    }
}

fn parse_ir(bc: &mut Bytecode, d: &[u8], base: usize) -> Result<(), BcError> {
    let mut r = Reader::new(d, base);
    let mut w = IrWalk {
        bc,
        counts: BTreeMap::new(),
        scopes: BTreeMap::new(),
        functions: Vec::new(),
    };
    w.block(&mut r, 0)?;
    if !r.done() {
        return Err(r.err("trailing bytes after the top-level block"));
    }
    let (counts, scopes, functions) = (w.counts, w.scopes, w.functions);
    bc.op_counts = Some(counts);
    bc.scope_op_counts = Some(scopes);
    bc.functions = functions;
    Ok(())
}

/// Ops the seed's summary looks for (its `op_counts` keys, kept for compatibility).
pub const OPS_OF_INTEREST: &[&str] = &[
    "tpu.matmul",
    "tpu.enqueue_dma",
    "tpu.wait_dma",
    "tpu.wait_dma2",
    "tpu.memref_slice",
    "tpu.vector_store",
    "vector.load",
    "vector.shape_cast",
    "tpu.sem_alloc",
    "tpu.region",
    "tpu.trace_start",
    "tpu.trace_stop",
    "scf.for",
    "scf.if",
    "arith.addf",
    "arith.mulf",
];

static SCOPE_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[\w.]+/[\w./]+$").unwrap());

/// The summary JSON (`bytecode_summary`). A body without the magic gets
/// `{body_format: "unknown"}` and no heuristics.
pub fn summarize(raw: &[u8]) -> Value {
    let bc = match parse(raw) {
        Ok(b) => b,
        Err(e) => return json!({"body_format": "unknown", "error": e.to_string()}),
    };
    let mut o = Map::new();
    o.insert("mlir_version".into(), json!(bc.producer));
    o.insert("bytecode_version".into(), json!(bc.version));
    o.insert("producer".into(), json!(bc.producer));
    o.insert(
        "sections".into(),
        json!(
            bc.sections
                .iter()
                .map(|(id, len)| json!({"id": id, "name": section_name(*id), "bytes": len}))
                .collect::<Vec<_>>()
        ),
    );
    o.insert("dialects".into(), json!(bc.dialects));
    match &bc.op_counts {
        Some(c) => {
            o.insert("op_counts".into(), json!(c));
            o.insert(
                "op_counts_source".into(),
                json!("IR section decoded: one count per operation instance"),
            );
            o.insert("op_count_total".into(), json!(c.values().sum::<u64>()));
        }
        None => {
            o.insert("op_counts".into(), Value::Null);
            o.insert(
                "op_counts_reason".into(),
                json!(
                    bc.undecoded
                        .get("ir")
                        .cloned()
                        .unwrap_or_else(|| "IR not decoded".into())
                ),
            );
        }
    }
    let mut ops_present: Vec<String> = bc.op_names.iter().map(|(_, n)| n.clone()).collect();
    ops_present.sort();
    ops_present.dedup();
    if bc.op_names.is_empty() {
        o.insert("ops_present".into(), Value::Null);
        o.insert(
            "ops_present_reason".into(),
            json!(
                bc.undecoded
                    .get("op_names")
                    .cloned()
                    .unwrap_or_else(|| "no op-name table".into())
            ),
        );
    } else {
        o.insert("ops_present".into(), json!(ops_present));
    }
    // Named scopes as the seed lists them (string-table names with a `/`), then per-scope op
    // counts from the decoded locations.
    let mut scopes: Vec<&str> = bc
        .strings
        .iter()
        .map(String::as_str)
        .filter(|s| s.len() < 80 && SCOPE_RE.is_match(s))
        .collect();
    scopes.sort_unstable();
    scopes.dedup();
    o.insert(
        "named_scopes".into(),
        json!(scopes.iter().take(40).collect::<Vec<_>>()),
    );
    match &bc.scope_op_counts {
        Some(s) => {
            o.insert("scope_op_counts".into(), json!(s));
            let mut by_top: BTreeMap<&str, u64> = BTreeMap::new();
            for (path, ops) in s {
                let top = path.split('/').next().unwrap_or(path);
                *by_top.entry(top).or_default() += ops.values().sum::<u64>();
            }
            o.insert("ops_per_named_scope".into(), json!(by_top));
        }
        None => {
            o.insert("scope_op_counts".into(), Value::Null);
            o.insert(
                "scope_op_counts_reason".into(),
                json!(
                    bc.undecoded
                        .get("ir")
                        .or(bc.undecoded.get("locations"))
                        .cloned()
                        .unwrap_or_default()
                ),
            );
        }
    }
    o.insert("functions".into(), json!(bc.functions));
    let mut py: Vec<&str> = bc
        .strings
        .iter()
        .map(String::as_str)
        .filter(|s| s.ends_with(".py"))
        .collect();
    py.sort_unstable();
    o.insert("source_files".into(), json!(py));
    let texts = bc.text_attrs();
    let interesting: Vec<&String> = texts
        .iter()
        .filter(|t| {
            t.starts_with("#tpu.memory_space<")
                || t.starts_with("#tpu.dot_dimension_numbers<")
                || t.starts_with("#tpu.core_type<")
        })
        .collect();
    o.insert("attributes_of_interest".into(), json!(interesting));
    let dims: Vec<&String> = texts
        .iter()
        .filter(|t| t.contains("dimension_semantics"))
        .collect();
    if !dims.is_empty() {
        o.insert("dimension_semantics".into(), json!(dims));
    }
    if !bc.undecoded.is_empty() {
        o.insert("undecoded".into(), json!(bc.undecoded));
    }
    Value::Object(o)
}

fn section_name(id: u8) -> &'static str {
    match id {
        0 => "string",
        1 => "dialect",
        2 => "attr_type",
        3 => "attr_type_offset",
        4 => "ir",
        5 => "resource",
        6 => "resource_offset",
        7 => "dialect_versions",
        8 => "properties",
        _ => "unknown",
    }
}

/// Standard base64 (with or without padding); `None` on any invalid character.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        let mut r = Reader::new(&[0x01, 0x55, 0x0a, 0x02, 0x00, 1, 0, 0, 0, 0, 0, 0, 0], 0);
        assert_eq!(r.varint().unwrap(), 0);
        assert_eq!(r.varint().unwrap(), 42);
        assert_eq!(r.varint().unwrap(), 130);
        assert_eq!(r.varint().unwrap(), 1);
        assert!(r.varint().is_err());
    }

    #[test]
    fn base64() {
        assert_eq!(base64_decode("TUzvUg==").unwrap(), b"ML\xEFR");
        assert_eq!(base64_decode("aGk").unwrap(), b"hi");
        assert!(base64_decode("a b").is_none());
    }

    #[test]
    fn bad_magic_is_unknown_format() {
        let s = summarize(b"not bytecode");
        assert_eq!(s["body_format"], "unknown");
    }

    #[test]
    fn truncated_bodies_never_panic() {
        let Some(f) = crate::testutil::fixtures() else {
            return;
        };
        let raw = fixture_body(&f);
        for cut in (0..raw.len()).step_by(97) {
            let _ = summarize(&raw[..cut]);
        }
        let mut flipped = raw.clone();
        for i in (8..flipped.len()).step_by(13) {
            flipped[i] ^= 0x5a;
        }
        let _ = summarize(&flipped);
    }

    fn fixture_body(f: &std::path::Path) -> Vec<u8> {
        let t = std::fs::read_to_string(f.join(
            "hlo_dump/module_0035.jit_matmul_optimized.cl_897798484.after_optimizations.txt",
        ))
        .unwrap();
        let start = t.find("\"body\":\"").unwrap() + 8;
        let end = start + t[start..].find('"').unwrap();
        base64_decode(&t[start..end]).unwrap()
    }

    #[test]
    fn seed_v6e_body_decodes() {
        let Some(f) = crate::testutil::fixtures() else {
            return;
        };
        let raw = fixture_body(&f);
        assert_eq!(raw.len(), 12407);
        let bc = parse(&raw).unwrap();
        assert_eq!(bc.version, 0);
        assert_eq!(bc.producer, "MLIR23.0.0git");
        assert_eq!(
            bc.dialects,
            vec!["builtin", "stable_mosaic", "tpu", "arith"]
        );
        assert_eq!(bc.op_names.len(), 33);
        let c = bc.op_counts.as_ref().unwrap();
        assert_eq!(c["tpu.matmul"], 2);
        assert_eq!(c["tpu.enqueue_dma"], 5);
        assert_eq!(c["scf.for"], 1);
        assert!(
            !c.contains_key("tpu.wait_dma"),
            "no phantom from tpu.wait_dma2"
        );
        assert_eq!(bc.functions, vec!["matmul_pipeline_kernel"]);
        let scopes = bc.scope_op_counts.as_ref().unwrap();
        assert_eq!(scopes["acc/dot_general"]["tpu.matmul"], 1);
        assert_eq!(scopes["init/dot_general"]["tpu.matmul"], 1);
        let s = summarize(&raw);
        assert_eq!(s["named_scopes"].as_array().unwrap().len(), 37);
        assert!(
            s["attributes_of_interest"]
                .to_string()
                .contains("#tpu.memory_space<vmem>")
        );
    }
}
