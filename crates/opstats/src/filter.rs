//! The `--filter` expression of the event tools: a boolean expression over one event's fields,
//! the language of XProf's official agent CLI (`xprof` 2.24.2, `list_xplane_events --filter`).
//!
//! # Grammar
//!
//! ```text
//! expr  := and ( ("or" | "||") and )*
//! and   := not ( ("and" | "&&") not )*
//! not   := ("not" | "!") not | atom
//! atom  := "(" expr ")" | FIELD OP VALUE
//! ```
//!
//! * Keywords (`and`, `or`, `not`, `contains`) and field names are case-insensitive.
//! * String fields: `plane`, `line` (= `line_name`; `XLine.name`, never its display name, as
//!   in XProf's CLI), `line_id`, `event` (= `name`; the event tools' name), with
//!   `==`/`=` (equal), `!=`, `contains` (substring), `=~`/`~` (regex search, unanchored) and
//!   `!~` (no regex match). `line_id` holds when the line's name *or* its numeric id (as the
//!   event tools print it) satisfies the test (XProf's CLI calls the line name `line_id`).
//! * Numeric fields: `duration_ps`, `duration` (ps), `duration_ns`, `duration_us`,
//!   `duration_ms`, `offset_ps`/`start_ps` (the event's absolute start: line timestamp +
//!   offset), `end_ps` (start + duration), with `==`/`=`, `!=`, `<`, `<=`, `>`, `>=`. A value is
//!   a decimal number (`1`, `-2.5`, `.5`, `1e3`) in the field's unit, or with its own unit
//!   suffix `ps`, `ns`, `us`, `ms` or `s` (`duration_ps > 1.5us`). Comparisons are exact on
//!   integer picoseconds (a threshold between two integers is rounded the way the comparison
//!   needs, one beyond `i64` makes the test constant).
//! * A VALUE is a bare word (any run of characters other than whitespace and `()=!<>~"'`) or a
//!   quoted string (`"…"` or `'…'`, with Python's backslash escapes: `\\ \" \' \n \t \r \a \b
//!   \f \v \ooo \xhh \uhhhh \Uhhhhhhhh`; other backslashes are kept, so `"fusion\.\d+"` is the
//!   regex it looks like).
//! * An empty (or all-blank) expression keeps every event.
//! * `&&`/`||` are words: glued to a value (`x>1&&y<2`) they are part of it, as in XProf.
//!
//! Differences from XProf's CLI, on purpose: thresholds are exact (XProf compares floats, so
//! `duration_us <= 1.001` misses a 1001000 ps event there); a bad regex is an invalid value (XProf:
//! an internal error); non-ASCII text in quotes is kept as written (XProf decodes it as
//! Latin-1); `line_id` also matches the numeric id; regexes are the `regex` crate's (no
//! look-around or backreferences).
//!
//! Parsing happens once; string tests are meant to be resolved once per plane, line and event
//! name ([`Filter::line_bits`], [`Filter::event_bits`]), so the per-event work
//! ([`Filter::matches_bits`]) is a walk of a small tree with integer comparisons, without
//! allocation. Regexes are compiled once by the caller-supplied compiler (the tools use the
//! `regex` crate).

use std::fmt;

/// A compiled regex test (unanchored search).
pub type Matcher = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// Deepest nesting of parentheses and `not` accepted (deeper input could exhaust the stack).
pub const MAX_DEPTH: usize = 200;

/// A filter expression that does not parse, with where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid filter {expr:?} at column {column} ({near}): {message}")]
pub struct FilterError {
    /// What is wrong.
    pub message: String,
    /// Byte offset of the offending token in `expr`.
    pub offset: usize,
    /// 1-based character column of the offending token.
    pub column: usize,
    /// `near "…"` (up to 20 characters from the offending token) or `at the end`.
    pub near: String,
    /// The expression.
    pub expr: String,
}

impl FilterError {
    fn new(expr: &str, offset: usize, message: impl Into<String>) -> Self {
        let offset = offset.min(expr.len());
        let rest = &expr[offset..];
        let near = if rest.trim().is_empty() {
            "at the end".to_string()
        } else {
            format!("near {:?}", rest.chars().take(20).collect::<String>())
        };
        FilterError {
            message: message.into(),
            offset,
            column: expr[..offset].chars().count() + 1,
            near,
            expr: expr.to_string(),
        }
    }
}

/// The fields of one event a filter reads.
#[derive(Clone, Copy, Debug)]
pub struct Fields<'a> {
    pub plane: &'a str,
    pub line: &'a str,
    pub line_id: i64,
    pub event: &'a str,
    /// Absolute start (ps).
    pub start_ps: i64,
    pub duration_ps: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StrField {
    Plane,
    Line,
    LineId,
    Event,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NumField {
    Duration,
    Start,
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Match,
    NotMatch,
    Contains,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Match => "=~",
            Op::NotMatch => "!~",
            Op::Contains => "contains",
        }
    }
}

/// A string test, resolved per plane/line/event name.
struct StrAtom {
    field: StrField,
    op: Op,
    text: String,
    re: Option<Matcher>,
}

impl StrAtom {
    fn test(&self, s: &str) -> bool {
        match self.op {
            Op::Eq => s == self.text,
            Op::Ne => s != self.text,
            Op::Contains => s.contains(self.text.as_str()),
            Op::Match => self.re.as_ref().is_some_and(|re| re(s)),
            Op::NotMatch => !self.re.as_ref().is_some_and(|re| re(s)),
            _ => false,
        }
    }
    /// The test on `line_id`: true when the name or the decimal id passes (`!=` and `!~` are
    /// the negations of `==` and `=~`).
    fn test_line_id(&self, name: &str, id: i64) -> bool {
        let mut buf = [0u8; 20];
        let id = itoa(id, &mut buf);
        let pos = |op| match op {
            Op::Eq => name == self.text || id == self.text,
            Op::Match => self.re.as_ref().is_some_and(|re| re(name) || re(id)),
            _ => name.contains(self.text.as_str()) || id.contains(self.text.as_str()),
        };
        match self.op {
            Op::Eq => pos(Op::Eq),
            Op::Ne => !pos(Op::Eq),
            Op::Match => pos(Op::Match),
            Op::NotMatch => !pos(Op::Match),
            _ => pos(Op::Contains),
        }
    }
    fn eval(&self, f: &Fields<'_>) -> bool {
        match self.field {
            StrField::Plane => self.test(f.plane),
            StrField::Line => self.test(f.line),
            StrField::LineId => self.test_line_id(f.line, f.line_id),
            StrField::Event => self.test(f.event),
        }
    }
}

/// `n` in decimal, in `buf`, without allocating.
fn itoa(n: i64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    let neg = n < 0;
    let mut m = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if neg {
        // 19 digits at most for |i64::MIN|, so there is room for the sign.
        i -= 1;
        buf[i] = b'-';
    }
    std::str::from_utf8(&buf[i..]).unwrap_or("")
}

enum Node {
    Const(bool),
    Any(Vec<Node>),
    All(Vec<Node>),
    Not(Box<Node>),
    /// Index into [`Filter::atoms`].
    Str(usize),
    Num(NumField, Op, i64),
}

/// A parsed filter expression.
pub struct Filter {
    root: Node,
    atoms: Vec<StrAtom>,
    expr: String,
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Filter").field(&self.expr).finish()
    }
}

impl Filter {
    /// Parses `expr`; `regex` compiles the patterns of `=~`/`~`/`!~` (its error text is
    /// reported at the pattern's position).
    pub fn parse(
        expr: &str,
        regex: &dyn Fn(&str) -> Result<Matcher, String>,
    ) -> Result<Filter, FilterError> {
        let toks = tokenize(expr)?;
        let mut p = Parser {
            expr,
            toks: &toks,
            pos: 0,
            atoms: Vec::new(),
            regex,
        };
        let root = if toks.is_empty() {
            Node::Const(true)
        } else {
            let n = p.or(0)?;
            if let Some(t) = toks.get(p.pos) {
                return Err(FilterError::new(
                    expr,
                    t.at,
                    format!(
                        "unexpected {} after a complete expression (combine tests with and/or)",
                        t.describe()
                    ),
                ));
            }
            n
        };
        Ok(Filter {
            root,
            atoms: p.atoms,
            expr: expr.to_string(),
        })
    }

    /// The expression as given.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// Whether the filter keeps every event (an empty expression).
    pub fn is_trivial(&self) -> bool {
        matches!(self.root, Node::Const(true))
    }

    /// The results of the `plane`, `line` and `line_id` tests among the first 64 string
    /// tests, one bit each (for [`Filter::matches_bits`]).
    pub fn line_bits(&self, plane: &str, line: &str, line_id: i64) -> u64 {
        let f = Fields {
            plane,
            line,
            line_id,
            event: "",
            start_ps: 0,
            duration_ps: 0,
        };
        self.bits(|a| a.field != StrField::Event, &f)
    }

    /// The results of the `event` tests among the first 64 string tests, one bit each.
    pub fn event_bits(&self, event: &str) -> u64 {
        let f = Fields {
            plane: "",
            line: "",
            line_id: 0,
            event,
            start_ps: 0,
            duration_ps: 0,
        };
        self.bits(|a| a.field == StrField::Event, &f)
    }

    fn bits(&self, which: impl Fn(&StrAtom) -> bool, f: &Fields<'_>) -> u64 {
        self.atoms
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, a)| which(a) && a.eval(f))
            .fold(0u64, |b, (i, _)| b | (1 << i))
    }

    /// Whether the event passes, with the first 64 string tests read from `bits`
    /// (`line_bits | event_bits`) and any further ones evaluated on `f`.
    #[inline]
    pub fn matches_bits(&self, bits: u64, f: &Fields<'_>) -> bool {
        self.eval(
            &self.root,
            &|i| {
                if i < 64 {
                    bits & (1 << i) != 0
                } else {
                    self.atoms[i].eval(f)
                }
            },
            f,
        )
    }

    /// Whether the event passes (every test evaluated on `f`).
    pub fn matches(&self, f: &Fields<'_>) -> bool {
        self.eval(&self.root, &|i| self.atoms[i].eval(f), f)
    }

    /// `n` on `f`, with string test `i` answered by `s(i)` (generic, so the per-event walk
    /// makes no indirect calls).
    fn eval<S: Fn(usize) -> bool>(&self, n: &Node, s: &S, f: &Fields<'_>) -> bool {
        match n {
            Node::Const(b) => *b,
            Node::Any(v) => v.iter().any(|n| self.eval(n, s, f)),
            Node::All(v) => v.iter().all(|n| self.eval(n, s, f)),
            Node::Not(n) => !self.eval(n, s, f),
            Node::Str(i) => s(*i),
            Node::Num(field, op, v) => {
                let x = match field {
                    NumField::Duration => f.duration_ps,
                    NumField::Start => f.start_ps,
                    NumField::End => f.start_ps.saturating_add(f.duration_ps),
                };
                match op {
                    Op::Eq => x == *v,
                    Op::Ne => x != *v,
                    Op::Lt => x < *v,
                    Op::Le => x <= *v,
                    Op::Gt => x > *v,
                    Op::Ge => x >= *v,
                    _ => false,
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Debug, PartialEq)]
enum Kind {
    LParen,
    RParen,
    Op(Op),
    Not,
    And,
    Or,
    Word(String),
    Quoted(String),
}

struct Tok {
    kind: Kind,
    /// Byte offset in the expression.
    at: usize,
    /// The token's text as written.
    raw: String,
}

impl Tok {
    fn describe(&self) -> String {
        match self.kind {
            Kind::LParen | Kind::RParen => format!("`{}`", self.raw),
            Kind::Op(_) => format!("operator `{}`", self.raw),
            Kind::Not | Kind::And | Kind::Or => format!("keyword `{}`", self.raw),
            Kind::Word(_) => format!("word `{}`", self.raw),
            Kind::Quoted(_) => format!("string {}", self.raw),
        }
    }
}

fn is_word_char(c: char) -> bool {
    !c.is_whitespace() && !"()=!<>~\"'".contains(c)
}

fn tokenize(expr: &str) -> Result<Vec<Tok>, FilterError> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < expr.len() {
        let c = expr[i..].chars().next().unwrap_or(' ');
        if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        }
        let at = i;
        let two = expr.get(i..i + 2).unwrap_or("");
        let (kind, len) = match (c, two) {
            ('(', _) => (Kind::LParen, 1),
            (')', _) => (Kind::RParen, 1),
            (_, "==") => (Kind::Op(Op::Eq), 2),
            (_, "!=") => (Kind::Op(Op::Ne), 2),
            (_, "=~") => (Kind::Op(Op::Match), 2),
            (_, "!~") => (Kind::Op(Op::NotMatch), 2),
            (_, "<=") => (Kind::Op(Op::Le), 2),
            (_, ">=") => (Kind::Op(Op::Ge), 2),
            ('=', _) => (Kind::Op(Op::Eq), 1),
            ('<', _) => (Kind::Op(Op::Lt), 1),
            ('>', _) => (Kind::Op(Op::Gt), 1),
            ('~', _) => (Kind::Op(Op::Match), 1),
            ('!', _) => (Kind::Not, 1),
            ('"' | '\'', _) => {
                let q = b[i];
                let mut j = i + 1;
                loop {
                    match b.get(j) {
                        None => {
                            return Err(FilterError::new(
                                expr,
                                at,
                                "unterminated quoted string (close it with the same quote)",
                            ));
                        }
                        Some(&x) if x == q => break,
                        Some(b'\\') => {
                            j += 1;
                            // Skip the whole escaped character.
                            j += expr[j..].chars().next().map_or(1, char::len_utf8);
                        }
                        Some(_) => j += 1,
                    }
                }
                let body = &expr[i + 1..j];
                let text = unescape(body).map_err(|(k, m)| FilterError::new(expr, i + 1 + k, m))?;
                (Kind::Quoted(text), j + 1 - i)
            }
            _ => {
                let len: usize = expr[i..]
                    .chars()
                    .take_while(|&c| is_word_char(c))
                    .map(char::len_utf8)
                    .sum();
                let w = &expr[i..i + len];
                let kind = match w.to_ascii_lowercase().as_str() {
                    "and" | "&&" => Kind::And,
                    "or" | "||" => Kind::Or,
                    "not" => Kind::Not,
                    "contains" => Kind::Op(Op::Contains),
                    _ => Kind::Word(w.to_string()),
                };
                (kind, len)
            }
        };
        out.push(Tok {
            kind,
            at,
            raw: expr[at..at + len].to_string(),
        });
        i += len;
    }
    Ok(out)
}

/// Python's `unicode_escape` on a quoted string's body (unknown escapes are kept as written).
/// Errors carry the byte offset of the bad escape in `s`.
fn unescape(s: &str) -> Result<String, (usize, String)> {
    let mut out = String::with_capacity(s.len());
    let mut it = s.char_indices().peekable();
    while let Some((k, c)) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&(_, e)) = it.peek() else {
            out.push('\\');
            break;
        };
        let simple = match e {
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'f' => Some('\x0c'),
            'v' => Some('\x0b'),
            _ => None,
        };
        if let Some(x) = simple {
            it.next();
            out.push(x);
            continue;
        }
        if e == '\n' {
            it.next();
            continue;
        }
        if ('0'..='7').contains(&e) {
            let mut v = 0u32;
            for _ in 0..3 {
                match it.peek() {
                    Some(&(_, d)) if ('0'..='7').contains(&d) => {
                        v = v * 8 + d.to_digit(8).unwrap_or(0);
                        it.next();
                    }
                    _ => break,
                }
            }
            out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            continue;
        }
        let width = match e {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => {
                // Unknown escape: kept as written (`\d`, `\.` stay regex escapes).
                out.push('\\');
                continue;
            }
        };
        it.next();
        let mut v = 0u32;
        for _ in 0..width {
            match it.peek() {
                Some(&(_, d)) if d.is_ascii_hexdigit() => {
                    v = v * 16 + d.to_digit(16).unwrap_or(0);
                    it.next();
                }
                _ => {
                    return Err((
                        k,
                        format!("bad escape `\\{e}`: expected {width} hex digits"),
                    ));
                }
            }
        }
        match char::from_u32(v) {
            Some(x) => out.push(x),
            None => return Err((k, format!("escape `\\{e}` is not a Unicode character"))),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Parser

const FIELDS: &str = "plane, line, line_id, event, duration_ps, duration_ns, duration_us, \
                      duration_ms, offset_ps, start_ps, end_ps";
const OPS: &str = "==, !=, <, <=, >, >=, =~, !~, contains";

struct Parser<'p> {
    expr: &'p str,
    toks: &'p [Tok],
    pos: usize,
    atoms: Vec<StrAtom>,
    regex: &'p dyn Fn(&str) -> Result<Matcher, String>,
}

impl Parser<'_> {
    fn err(&self, at: usize, m: impl Into<String>) -> FilterError {
        FilterError::new(self.expr, at, m)
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn end(&self) -> usize {
        self.expr.len()
    }
    fn deeper(&self, depth: usize, at: usize) -> Result<usize, FilterError> {
        if depth >= MAX_DEPTH {
            return Err(self.err(
                at,
                format!("expression nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(depth + 1)
    }

    fn or(&mut self, depth: usize) -> Result<Node, FilterError> {
        let mut v = vec![self.and(depth)?];
        while self.peek().is_some_and(|t| t.kind == Kind::Or) {
            self.pos += 1;
            v.push(self.and(depth)?);
        }
        Ok(if v.len() == 1 {
            v.pop().unwrap_or(Node::Const(true))
        } else {
            Node::Any(v)
        })
    }

    fn and(&mut self, depth: usize) -> Result<Node, FilterError> {
        let mut v = vec![self.not(depth)?];
        while self.peek().is_some_and(|t| t.kind == Kind::And) {
            self.pos += 1;
            v.push(self.not(depth)?);
        }
        Ok(if v.len() == 1 {
            v.pop().unwrap_or(Node::Const(true))
        } else {
            Node::All(v)
        })
    }

    fn not(&mut self, depth: usize) -> Result<Node, FilterError> {
        match self.peek() {
            Some(t) if t.kind == Kind::Not => {
                let d = self.deeper(depth, t.at)?;
                self.pos += 1;
                Ok(Node::Not(Box::new(self.not(d)?)))
            }
            _ => self.atom(depth),
        }
    }

    fn atom(&mut self, depth: usize) -> Result<Node, FilterError> {
        let Some(t) = self.peek() else {
            return Err(self.err(
                self.end(),
                "unexpected end of the expression: expected a test such as `duration_us > 1`",
            ));
        };
        match &t.kind {
            Kind::LParen => {
                let (open, d) = (t.at, self.deeper(depth, t.at)?);
                self.pos += 1;
                let inner = self.or(d)?;
                match self.peek() {
                    Some(t) if t.kind == Kind::RParen => {
                        self.pos += 1;
                        Ok(inner)
                    }
                    Some(t) => Err(self.err(
                        t.at,
                        format!(
                            "expected `)` (closing the `(` at column {}), found {}",
                            self.expr[..open].chars().count() + 1,
                            t.describe()
                        ),
                    )),
                    None => Err(self.err(open, "unclosed `(`")),
                }
            }
            Kind::Word(w) => {
                let (field, field_at) = (w.clone(), t.at);
                self.pos += 1;
                let op_tok = match self.peek() {
                    Some(o) if matches!(o.kind, Kind::Op(_)) => o,
                    other => {
                        let (at, found) = other.map_or((self.end(), "the end".to_string()), |o| {
                            (o.at, o.describe())
                        });
                        return Err(self.err(
                            at,
                            format!("expected a comparison operator ({OPS}) after field `{field}`, found {found}"),
                        ));
                    }
                };
                let Kind::Op(op) = op_tok.kind else {
                    unreachable!()
                };
                let op_at = op_tok.at;
                self.pos += 1;
                let (value, value_at) = match self.peek() {
                    Some(Tok {
                        kind: Kind::Word(v) | Kind::Quoted(v),
                        at,
                        ..
                    }) => (v.clone(), *at),
                    other => {
                        let (at, found) = other.map_or((self.end(), "the end".to_string()), |o| {
                            (o.at, o.describe())
                        });
                        return Err(self.err(
                            at,
                            format!("expected a value after `{field} {}`, found {found} (quote values that are keywords)", op.text()),
                        ));
                    }
                };
                self.pos += 1;
                self.comparison(&field, field_at, op, op_at, &value, value_at)
            }
            _ => Err(self.err(
                t.at,
                format!(
                    "expected a field name ({FIELDS}) or `(`, found {}",
                    t.describe()
                ),
            )),
        }
    }

    fn comparison(
        &mut self,
        field: &str,
        field_at: usize,
        op: Op,
        op_at: usize,
        value: &str,
        value_at: usize,
    ) -> Result<Node, FilterError> {
        let key = field.to_ascii_lowercase();
        let sfield = match key.as_str() {
            "plane" => Some(StrField::Plane),
            "line" | "line_name" => Some(StrField::Line),
            "line_id" => Some(StrField::LineId),
            "event" | "name" => Some(StrField::Event),
            _ => None,
        };
        if let Some(sf) = sfield {
            if matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge) {
                return Err(self.err(
                    op_at,
                    format!("operator `{}` does not apply to the string field `{field}` (use ==, !=, contains, =~ or !~)", op.text()),
                ));
            }
            let re = if matches!(op, Op::Match | Op::NotMatch) {
                Some(
                    (self.regex)(value)
                        .map_err(|e| self.err(value_at, format!("invalid regex {value:?}: {e}")))?,
                )
            } else {
                None
            };
            self.atoms.push(StrAtom {
                field: sf,
                op,
                text: value.to_string(),
                re,
            });
            return Ok(Node::Str(self.atoms.len() - 1));
        }
        let (nf, pow) = match key.as_str() {
            "duration" | "duration_ps" => (NumField::Duration, 0),
            "duration_ns" => (NumField::Duration, 3),
            "duration_us" => (NumField::Duration, 6),
            "duration_ms" => (NumField::Duration, 9),
            "offset_ps" | "start_ps" => (NumField::Start, 0),
            "end_ps" => (NumField::End, 0),
            _ => {
                return Err(self.err(
                    field_at,
                    format!("unknown field `{field}`; fields are {FIELDS}"),
                ));
            }
        };
        if matches!(op, Op::Match | Op::NotMatch | Op::Contains) {
            return Err(self.err(
                op_at,
                format!("operator `{}` does not apply to the numeric field `{field}` (use ==, !=, <, <=, > or >=)", op.text()),
            ));
        }
        let t = to_ps(value, pow).ok_or_else(|| {
            self.err(
                value_at,
                format!("expected a number (optionally with a unit ps, ns, us, ms or s) after `{field} {}`, found {value:?}", op.text()),
            )
        })?;
        Ok(numeric(nf, op, t))
    }
}

/// A threshold in integer picoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ps {
    Exact(i64),
    /// Strictly between `n` and `n + 1`.
    Between(i64),
    Above,
    Below,
}

/// `field op t` as an integer comparison, or a constant.
fn numeric(f: NumField, op: Op, t: Ps) -> Node {
    match t {
        Ps::Exact(v) => Node::Num(f, op, v),
        Ps::Between(n) => match op {
            Op::Lt | Op::Le => Node::Num(f, Op::Le, n),
            Op::Gt | Op::Ge => Node::Num(f, Op::Gt, n),
            Op::Eq => Node::Const(false),
            _ => Node::Const(true),
        },
        Ps::Above => Node::Const(matches!(op, Op::Lt | Op::Le | Op::Ne)),
        Ps::Below => Node::Const(matches!(op, Op::Gt | Op::Ge | Op::Ne)),
    }
}

/// Parses `[+-]digits[.digits][e[+-]digits][ws][unit]` (surrounding blanks allowed), scaled
/// to ps: by the unit when given, else by `10^default_pow`. Exact: no floating point.
fn to_ps(raw: &str, default_pow: i64) -> Option<Ps> {
    let s = raw.trim().as_bytes();
    let mut i = 0;
    let neg = match s.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut digits: Vec<u8> = Vec::new();
    let int_start = i;
    while i < s.len() && s[i].is_ascii_digit() {
        digits.push(s[i] - b'0');
        i += 1;
    }
    let int_len = i - int_start;
    let mut frac_len = 0i64;
    if i < s.len() && s[i] == b'.' {
        i += 1;
        while i < s.len() && s[i].is_ascii_digit() {
            digits.push(s[i] - b'0');
            frac_len += 1;
            i += 1;
        }
    }
    if int_len == 0 && frac_len == 0 {
        return None;
    }
    let mut exp: i64 = 0;
    if i < s.len() && (s[i] == b'e' || s[i] == b'E') {
        let mut j = i + 1;
        let eneg = match s.get(j) {
            Some(b'-') => {
                j += 1;
                true
            }
            Some(b'+') => {
                j += 1;
                false
            }
            _ => false,
        };
        let start = j;
        let mut e: i64 = 0;
        while j < s.len() && s[j].is_ascii_digit() {
            e = e.saturating_mul(10).saturating_add(i64::from(s[j] - b'0'));
            j += 1;
        }
        if j > start {
            exp = if eneg { -e } else { e };
            i = j;
        }
    }
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let pow = match &s[i..] {
        b"" => default_pow,
        b"ps" => 0,
        b"ns" => 3,
        b"us" => 6,
        b"ms" => 9,
        b"s" => 12,
        _ => return None,
    };
    // value = D × 10^x with D the digits (leading and trailing zeros dropped).
    let lead = digits.iter().take_while(|&&d| d == 0).count();
    let digits = &digits[lead..];
    let trail = digits.iter().rev().take_while(|&&d| d == 0).count();
    let digits = &digits[..digits.len() - trail];
    if digits.is_empty() {
        return Some(Ps::Exact(0));
    }
    let x = exp
        .saturating_sub(frac_len)
        .saturating_add(pow)
        .saturating_add(trail as i64);
    let int_digits = (digits.len() as i64).saturating_add(x);
    let out_of_range = if neg { Ps::Below } else { Ps::Above };
    if int_digits > 19 {
        return Some(out_of_range);
    }
    let (int_part, exact) = if x >= 0 {
        let mut v: i128 = 0;
        for &d in digits {
            v = v * 10 + i128::from(d);
        }
        for _ in 0..x {
            v *= 10;
        }
        (v, true)
    } else if int_digits <= 0 {
        (0, false)
    } else {
        let mut v: i128 = 0;
        for &d in &digits[..int_digits as usize] {
            v = v * 10 + i128::from(d);
        }
        (v, false)
    };
    let v = match (neg, exact) {
        (false, _) => int_part,
        (true, true) => -int_part,
        (true, false) => -int_part - 1,
    };
    match i64::try_from(v) {
        Ok(v) if exact => Some(Ps::Exact(v)),
        Ok(v) if v < i64::MAX => Some(Ps::Between(v)),
        _ => Some(out_of_range),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A literal-substring "regex" compiler for tests (`^` anchors at the start; `(` is an
    /// error), so the engine is tested without a regex crate.
    fn re(p: &str) -> Result<Matcher, String> {
        if p.contains('(') {
            return Err("unclosed group".into());
        }
        let p = p.to_string();
        Ok(match p.strip_prefix('^') {
            Some(rest) => {
                let rest = rest.to_string();
                Box::new(move |s: &str| s.starts_with(rest.as_str()))
            }
            None => Box::new(move |s: &str| s.contains(p.as_str())),
        })
    }

    fn parse(e: &str) -> Filter {
        Filter::parse(e, &re).unwrap_or_else(|err| panic!("{e}: {err}"))
    }

    fn err(e: &str) -> FilterError {
        match Filter::parse(e, &re) {
            Ok(_) => panic!("{e:?} should not parse"),
            Err(x) => x,
        }
    }

    const EV: Fields<'static> = Fields {
        plane: "/device:TPU:0",
        line: "XLA Ops",
        line_id: 7,
        event: "fusion.12",
        start_ps: 5_000_000,
        duration_ps: 1_500_000,
    };

    fn keeps(e: &str, f: &Fields<'_>) -> bool {
        let flt = parse(e);
        let direct = flt.matches(f);
        let bits = flt.line_bits(f.plane, f.line, f.line_id) | flt.event_bits(f.event);
        assert_eq!(
            direct,
            flt.matches_bits(bits, f),
            "bits and direct disagree on {e}"
        );
        direct
    }

    fn k(e: &str) -> bool {
        keeps(e, &EV)
    }

    #[test]
    fn empty_expression_keeps_everything() {
        assert!(parse("").is_trivial());
        assert!(parse("  \t ").is_trivial());
        assert!(k(""));
        assert!(!parse("duration_ps > 0").is_trivial());
    }

    #[test]
    fn each_duration_unit() {
        // 1.5 us = 1_500_000 ps.
        for e in [
            "duration_ps == 1500000",
            "duration == 1500000",
            "duration_ns == 1500",
            "duration_us == 1.5",
            "duration_ms == 0.0015",
            "duration_ps == 1.5us",
            "duration_us == 1500ns",
            "duration_ms = 1500000ps",
            "duration_ns == 0.0000015s",
            "duration_us == '1.5 us'",
            "duration_us == 15e-1",
            "duration_us == .0015ms",
            "DURATION_US == +1.5",
        ] {
            assert!(k(e), "{e}");
        }
        assert!(k("duration_us > 1") && !k("duration_us > 2") && k("duration_us < 2"));
        assert!(k("duration_ns >= 1500") && !k("duration_ns > 1500") && k("duration_ns <= 1500"));
        assert!(!k("duration_ns < 1500") && k("duration_ns != 1499"));
    }

    #[test]
    fn start_offset_and_end() {
        assert!(k("offset_ps == 5000000") && k("start_ps == 5us") && k("start_ps >= 5000ns"));
        assert!(k("end_ps == 6.5us") && !k("end_ps < 6.5us") && k("end_ps <= 6500000"));
        assert!(k("start_ps > -1") && k("start_ps > -1s"));
        let huge = Fields {
            start_ps: i64::MAX - 1,
            duration_ps: 10,
            ..EV
        };
        assert!(
            keeps("end_ps == 9223372036854775807", &huge),
            "end saturates"
        );
    }

    #[test]
    fn fractional_thresholds_are_exact_on_integer_ps() {
        let d = |ps| Fields {
            duration_ps: ps,
            ..EV
        };
        // 0.5 ps lies between 0 and 1.
        assert!(keeps("duration_ns > 0.0005", &d(1)) && !keeps("duration_ns > 0.0005", &d(0)));
        assert!(keeps("duration_ns >= 0.0005", &d(1)) && !keeps("duration_ns >= 0.0005", &d(0)));
        assert!(keeps("duration_ns < 0.0005", &d(0)) && !keeps("duration_ns < 0.0005", &d(1)));
        assert!(!keeps("duration_ns == 0.0005", &d(0)) && keeps("duration_ns != 0.0005", &d(0)));
        // 0.1 us is exactly 100000 ps (no binary rounding).
        assert!(keeps("duration_us >= 0.1", &d(100_000)));
        assert!(!keeps("duration_us > 0.1", &d(100_000)));
        // (XProf's float product 1.001 × 1e6 is 1000999.9999999999.)
        assert!(keeps("duration_us <= 1.001", &d(1_001_000)));
        assert!(keeps("duration_ms == 0.0041", &d(4_100_000)));
        // Negative fractions round toward the floor.
        let s = |ps| Fields { start_ps: ps, ..EV };
        assert!(keeps("start_ps < -1.5", &s(-2)) && !keeps("start_ps < -1.5", &s(-1)));
        assert!(keeps("start_ps > -1.5", &s(-1)) && !keeps("start_ps > -1.5", &s(-2)));
        // Beyond i64: constant.
        assert!(k("duration_ps < 1e30") && !k("duration_ps > 1e30") && !k("duration_ps == 1e30"));
        assert!(k("start_ps > -1e30") && k("start_ps != -1e300") && !k("start_ps < -1e300"));
        assert!(k("duration_ps < 10000000000s"));
        assert_eq!(to_ps("9223372036854775807", 0), Some(Ps::Exact(i64::MAX)));
        assert_eq!(to_ps("9223372036854775808", 0), Some(Ps::Above));
        assert_eq!(to_ps("-9223372036854775808", 0), Some(Ps::Exact(i64::MIN)));
        assert_eq!(to_ps("0.000", 0), Some(Ps::Exact(0)));
        assert_eq!(to_ps("1e-400", 0), Some(Ps::Between(0)));
        assert_eq!(to_ps("1e99999999999999999999", 0), Some(Ps::Above));
        assert_eq!(to_ps("1.", 6), Some(Ps::Exact(1_000_000)));
        for bad in [
            "", ".", "1 2", "abc", "1 us s", "1US", "1es", "0x10", "1e", "--1",
        ] {
            assert_eq!(to_ps(bad, 0), None, "{bad:?}");
        }
    }

    #[test]
    fn string_fields_and_operators() {
        for (e, want) in [
            ("plane == '/device:TPU:0'", true),
            ("plane = \"/device:TPU:0\"", true),
            ("plane != '/device:TPU:0'", false),
            ("plane contains TPU", true),
            ("plane CONTAINS GPU", false),
            ("plane =~ TPU", true),
            ("plane ~ '^/device'", true),
            ("plane !~ TPU", false),
            ("line == 'XLA Ops'", true),
            ("line_name contains Ops", true),
            ("line_id == 'XLA Ops'", true),
            ("line_id == 7", true),
            ("line_id != 7", false),
            ("line_id != 8", true),
            ("line_id =~ 7", true),
            ("line_id !~ Ops", false),
            ("line_id contains XLA", true),
            ("event == fusion.12", true),
            ("name == fusion.12", true),
            ("event contains fusion", true),
            ("event =~ ^fusion", true),
            ("event !~ ^copy", true),
            ("Event == FUSION.12", false),
        ] {
            assert_eq!(k(e), want, "{e}");
        }
        let neg = Fields { line_id: -42, ..EV };
        assert!(keeps("line_id == -42", &neg));
    }

    #[test]
    fn precedence_and_grouping() {
        // not > and > or.
        assert!(k(
            "duration_us > 9 or plane contains TPU and event contains fusion"
        ));
        assert!(!k(
            "(duration_us > 9 or plane contains TPU) and event contains copy"
        ));
        assert!(k(
            "duration_us > 9 and event contains copy or plane contains TPU"
        ));
        assert!(!k("not plane contains TPU and duration_us > 1"));
        assert!(k("not (plane contains GPU and duration_us > 1)"));
        assert!(k("!plane contains GPU"));
        assert!(k("! ! plane contains TPU"));
        assert!(k("NOT NOT plane contains TPU"));
        assert!(k("duration_us>1 && event=~fusion || plane==x"));
        assert!(k("(((duration_us > 1)))"));
        assert!(k(
            "plane == x || plane == y || duration_us > 1 || line == z"
        ));
        assert!(!k("plane contains TPU && line == x && duration_us > 1"));
    }

    #[test]
    fn quoting_and_escapes() {
        let f = Fields {
            event: "a \"b\" 'c' and\\d\tx",
            ..EV
        };
        assert!(keeps(r#"event == "a \"b\" 'c' and\\d\tx""#, &f));
        assert!(keeps(r#"event == 'a "b" \'c\' and\\d\x09x'"#, &f));
        assert!(keeps(r#"event contains "and""#, &f));
        // Unknown escapes stay, for regexes.
        assert_eq!(unescape(r"fusion\.\d+").unwrap(), r"fusion\.\d+");
        assert_eq!(unescape(r"\u00e9\101\n").unwrap(), "éA\n");
        let e = err(r#"event == "x\u12""#);
        assert_eq!(e.column, 12, "{e}");
    }

    #[test]
    fn errors_point_at_the_offending_token() {
        let cases: &[(&str, usize, &str)] = &[
            ("duration_us >", 14, "expected a value"),
            ("dur > 1", 1, "unknown field `dur`"),
            ("duration_us 1", 13, "expected a comparison operator"),
            ("(duration_us > 1", 1, "unclosed `(`"),
            ("(duration_us > 1 event == x", 18, "expected `)`"),
            ("event < x", 7, "does not apply to the string field"),
            ("duration_us ~ 1", 13, "does not apply to the numeric field"),
            ("duration_us > abc", 15, "expected a number"),
            ("duration_us > 1 us", 17, "unexpected word `us`"),
            ("event == \"abc", 10, "unterminated quoted string"),
            ("duration_us > 1 )", 17, "unexpected `)`"),
            ("and", 1, "expected a field name"),
            ("event == and", 10, "expected a value"),
            ("duration_us > 1 and", 20, "unexpected end"),
            ("event =~ 'a('", 10, "invalid regex"),
            ("plane == x or or", 15, "expected a field name"),
            ("\"plane\" == x", 1, "expected a field name"),
            ("événement == x", 1, "unknown field"),
            ("event == é or )", 15, "expected a field name"),
            // `&&`/`||` are words: glued to a value they are part of it (as in XProf's CLI).
            ("duration_us>1&&event=~x", 13, "expected a number"),
        ];
        for &(e, col, what) in cases {
            let x = err(e);
            assert_eq!(x.column, col, "{e}: {x}");
            assert!(x.message.contains(what), "{e}: {x}");
            assert!(x.to_string().contains(&format!("column {col}")), "{x}");
        }
        let x = err("duration_us > abc");
        assert_eq!(x.near, "near \"abc\"");
        assert_eq!(err("duration_us >").near, "at the end");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = format!(
            "{}duration_us > 1{}",
            "(".repeat(10_000),
            ")".repeat(10_000)
        );
        assert!(err(&deep).message.contains("nested deeper"));
        let nots = format!("{}duration_us > 1", "not ".repeat(10_000));
        assert!(err(&nots).message.contains("nested deeper"));
        let ok = format!("{}duration_us > 1{}", "(".repeat(150), ")".repeat(150));
        assert!(k(&ok));
        // Long flat chains are fine (n-ary nodes, no recursion per term).
        let chain = vec!["plane == x"; 20_000].join(" or ") + " or duration_us > 1";
        assert!(k(&chain));
    }

    #[test]
    fn more_than_64_string_tests_fall_back_to_direct_evaluation() {
        let mut e = (0..70)
            .map(|i| format!("event == e{i}"))
            .collect::<Vec<_>>()
            .join(" or ");
        e.push_str(" or event == fusion.12");
        assert!(k(&e));
        let e2 = (0..70)
            .map(|i| format!("line != l{i}"))
            .collect::<Vec<_>>()
            .join(" and ")
            + " and event contains fusion";
        assert!(k(&e2));
        assert!(!keeps(&e2, &Fields { line: "l69", ..EV }));
    }

    #[test]
    fn itoa_formats_like_display() {
        let mut b = [0u8; 20];
        for n in [0, 7, -1, 42, i64::MAX, i64::MIN, -9_007_199_254_740_993] {
            assert_eq!(itoa(n, &mut b), n.to_string());
        }
    }
}
