//! The plugin author's SDK: one file per tool, `impl Tool`, `register_tool!`, and one
//! `export_plugin!` per plugin crate.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Once;

use abi_stable::std_types::{RErr, ROk, RResult, RString};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::abi::PROTOCOL;

// ---------------------------------------------------------------------------------------------
// Errors

/// The error classes every frontend maps the same way (exit codes follow XProf's own CLI).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Exit 1: a bug, a panic, an I/O failure that is not the user's input.
    Internal,
    /// Exit 2: the call itself is malformed (unknown or missing argument).
    Usage,
    /// Exit 3: a path (capture, run, dump dir, file) does not exist or cannot be read.
    Path,
    /// Exit 4: an argument value or an input file's contents are invalid.
    InvalidValue,
}

impl ErrorKind {
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Internal => 1,
            ErrorKind::Usage => 2,
            ErrorKind::Path => 3,
            ErrorKind::InvalidValue => 4,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Internal => "internal",
            ErrorKind::Usage => "usage",
            ErrorKind::Path => "path",
            ErrorKind::InvalidValue => "invalid_value",
        }
    }

    pub fn parse(s: &str) -> ErrorKind {
        match s {
            "usage" => ErrorKind::Usage,
            "path" => ErrorKind::Path,
            "invalid_value" => ErrorKind::InvalidValue,
            _ => ErrorKind::Internal,
        }
    }
}

/// A tool failure: what went wrong (`message`, naming the file or argument) and what to do
/// about it (`hint`, naming the flag or fix).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolError {
    pub kind: ErrorKind,
    pub message: String,
    pub hint: Option<String>,
}

impl ToolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
            hint: None,
        }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }
    pub fn path(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Path, message)
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidValue, message)
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn to_json(&self) -> Value {
        json!({"kind": self.kind.as_str(), "message": self.message, "hint": self.hint})
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " (hint: {h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ToolError {}

// ---------------------------------------------------------------------------------------------
// Results

/// MIME-ish type of a result, so frontends know how to render it for people. The result is
/// always one JSON object; text-like tools wrap their text as `{"format", "text"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentType {
    Json,
    /// `{"format": ..., "text": ...}` — rendered as the raw text by `--format text`.
    Text,
}

impl ContentType {
    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Json => "application/json",
            ContentType::Text => "text/plain",
        }
    }
}

/// What a tool returns on success.
#[derive(Clone, Debug)]
pub struct ToolOutput {
    pub body: ResultBody,
    pub content_type: ContentType,
}

/// A result: a value, or (for results with many rows) JSON the tool serialised itself
/// ([`ToolOutput::serialize`]). Serialises as the result either way.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ResultBody {
    Value(Value),
    Serialized(Box<RawValue>),
}

impl ToolOutput {
    pub fn new(value: Value, content_type: ContentType) -> Self {
        ToolOutput {
            body: ResultBody::Value(value),
            content_type,
        }
    }
    pub fn json(value: Value) -> Self {
        Self::new(value, ContentType::Json)
    }
    /// A JSON result serialised straight from a `Serialize` type. For results with many rows:
    /// building a `Value` costs a `String` and a hashed map entry per field, and on a page of
    /// 4000 events that was most of the call (20 M of 62 M instructions, then 14 M more to
    /// serialise the `Value`).
    pub fn serialize(result: &impl Serialize) -> Result<Self, ToolError> {
        let raw = serde_json::value::to_raw_value(result)
            .map_err(|e| ToolError::internal(format!("result not serialisable: {e}")))?;
        Ok(ToolOutput {
            body: ResultBody::Serialized(raw),
            content_type: ContentType::Json,
        })
    }
    /// The result as a value (a serialised result is parsed).
    pub fn into_value(self) -> Value {
        match self.body {
            ResultBody::Value(v) => v,
            ResultBody::Serialized(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
        }
    }
    /// A text result: `{"format": format, "text": text, ..extra}`.
    pub fn text(format: &str, text: impl Into<String>, extra: Map<String, Value>) -> Self {
        let mut obj = Map::new();
        obj.insert("format".into(), Value::from(format));
        obj.insert("text".into(), Value::from(text.into()));
        obj.extend(extra);
        Self::new(Value::Object(obj), ContentType::Text)
    }
    /// The structured "no data" answer: the input really lacks what `reason` names, and
    /// `capture_flags` says how to capture it next time. Not a failure (exit 0).
    pub fn no_data(reason: impl Into<String>, capture_flags: &[&str]) -> Self {
        Self::json(json!({
            "status": "no_data",
            "reason": reason.into(),
            "capture_flags": capture_flags,
        }))
    }
}

impl From<Value> for ToolOutput {
    fn from(value: Value) -> Self {
        ToolOutput::json(value)
    }
}

// ---------------------------------------------------------------------------------------------
// Parameters (JSON Schema)

/// One value of a parameter's schema keyword. Schemas are built and serialised at every plugin
/// load (the descriptors), so they are plain typed values rather than `serde_json::Value` maps.
#[derive(Clone, Debug, PartialEq)]
enum Kw {
    Static(&'static str),
    Str(String),
    Bool(bool),
    Int(i64),
    /// Serialised as `Value::from(f64)` is: non-finite values become `null`.
    Num(f64),
    Strs(Vec<String>),
    /// `{"type": "string"}` (the `items` of a string list).
    StringItems,
}

impl Kw {
    fn as_str(&self) -> Option<&str> {
        match self {
            Kw::Static(s) => Some(s),
            Kw::Str(s) => Some(s),
            _ => None,
        }
    }
    fn as_f64(&self) -> Option<f64> {
        match self {
            Kw::Int(i) => Some(*i as f64),
            Kw::Num(f) => Some(*f),
            _ => None,
        }
    }
}

impl Serialize for Kw {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Kw::Static(v) => s.serialize_str(v),
            Kw::Str(v) => s.serialize_str(v),
            Kw::Bool(v) => s.serialize_bool(*v),
            Kw::Int(v) => s.serialize_i64(*v),
            Kw::Num(v) if v.is_finite() => s.serialize_f64(*v),
            Kw::Num(_) => s.serialize_unit(),
            Kw::Strs(v) => v.serialize(s),
            Kw::StringItems => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("type", "string")?;
                m.end()
            }
        }
    }
}

/// One parameter's schema: its keywords in the order they are written.
#[derive(Clone, Debug, Default, PartialEq)]
struct Prop(Vec<(&'static str, Kw)>);

impl Prop {
    fn new(ty: &'static str) -> Self {
        Prop(vec![("type", Kw::Static(ty))])
    }
    /// Add (at the end) or replace (in place) a keyword, as inserting into a JSON object does.
    fn with(mut self, key: &'static str, value: Kw) -> Self {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
        self
    }
    fn get(&self, key: &str) -> Option<&Kw> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

impl Serialize for Prop {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Builder for a tool's parameter JSON Schema. Conventions (docs/CONVENTIONS.md) live here so
/// that every plugin spells them the same way.
#[derive(Clone, Debug, Default)]
pub struct Params {
    props: Vec<(String, Prop)>,
    required: Vec<String>,
}

impl Params {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a parameter; a second one of the same name replaces the first in place.
    fn add(mut self, name: &str, schema: Prop) -> Self {
        match self.props.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = schema,
            None => self.props.push((name.to_string(), schema)),
        }
        self
    }

    fn described(ty: &'static str, description: &str) -> Prop {
        Prop::new(ty).with("description", Kw::Str(description.to_string()))
    }

    /// The capture selector every capture tool takes: positional `path` (a logdir, a run
    /// directory or one `.xplane.pb`), `logdir` (default `$XPROF_LOGDIR`) and `run`.
    pub fn capture(self) -> Self {
        self.add(
            "path",
            Prop::new("string")
                .with("format", Kw::Static("path"))
                .with("x-positional", Kw::Bool(true))
                .with(
                    "description",
                    Kw::Static(
                        "A logdir, a run directory (plugins/profile/<run>) or one .xplane.pb file.",
                    ),
                ),
        )
        .add(
            "logdir",
            Prop::new("string")
                .with("format", Kw::Static("path"))
                .with("x-env", Kw::Static("XPROF_LOGDIR"))
                .with(
                    "description",
                    Kw::Static(
                        "Root of the profile captures (what you pass to `xprof --logdir`). Default: $XPROF_LOGDIR.",
                    ),
                ),
        )
        .add(
            "run",
            Prop::new("string").with(
                "description",
                Kw::Static(
                    "Run (session) name under <logdir>/plugins/profile/; default: the newest run.",
                ),
            ),
        )
    }

    /// `host`: which host's XSpace to read; empty = the tool's default (all hosts combined,
    /// or the first host where the view is per host).
    pub fn host(self) -> Self {
        self.add(
            "host",
            Prop::new("string").with(
                "description",
                Kw::Static(
                    "Host (xplane file stem, or its 0-based index in file order) to read; default: all hosts combined where the view allows, else the first host.",
                ),
            ),
        )
    }

    pub fn string(self, name: &str, description: &str) -> Self {
        self.add(name, Self::described("string", description))
    }

    pub fn string_default(self, name: &str, description: &str, default: &str) -> Self {
        self.add(
            name,
            Self::described("string", description).with("default", Kw::Str(default.to_string())),
        )
    }

    pub fn string_enum(
        self,
        name: &str,
        description: &str,
        values: &[&str],
        default: &str,
    ) -> Self {
        self.add(
            name,
            Self::described("string", description)
                .with(
                    "enum",
                    Kw::Strs(values.iter().map(|v| v.to_string()).collect()),
                )
                .with("default", Kw::Str(default.to_string())),
        )
    }

    /// The positional PATH parameter of a non-capture tool (a logdir for `list_runs`, say).
    pub fn positional_path(self, description: &str, env: Option<&str>) -> Self {
        let mut s = Prop::new("string")
            .with("format", Kw::Static("path"))
            .with("x-positional", Kw::Bool(true))
            .with("description", Kw::Str(description.to_string()));
        if let Some(env) = env {
            s = s.with("x-env", Kw::Str(env.to_string()));
        }
        self.add("path", s)
    }

    /// A filesystem path parameter (MCP checks it against the server's roots).
    pub fn path(self, name: &str, description: &str, env: Option<&str>) -> Self {
        let mut s = Prop::new("string")
            .with("format", Kw::Static("path"))
            .with("description", Kw::Str(description.to_string()));
        if let Some(env) = env {
            s = s.with("x-env", Kw::Str(env.to_string()));
        }
        self.add(name, s)
    }

    pub fn integer(self, name: &str, description: &str, default: Option<i64>) -> Self {
        let mut s = Self::described("integer", description);
        if let Some(d) = default {
            s = s.with("default", Kw::Int(d));
        }
        self.add(name, s)
    }

    pub fn integer_min(
        self,
        name: &str,
        description: &str,
        default: Option<i64>,
        minimum: i64,
    ) -> Self {
        let mut s = Self::described("integer", description).with("minimum", Kw::Int(minimum));
        if let Some(d) = default {
            s = s.with("default", Kw::Int(d));
        }
        self.add(name, s)
    }

    pub fn number(self, name: &str, description: &str, default: Option<f64>) -> Self {
        let mut s = Self::described("number", description);
        if let Some(d) = default {
            s = s.with("default", Kw::Num(d));
        }
        self.add(name, s)
    }

    pub fn boolean(self, name: &str, description: &str, default: bool) -> Self {
        self.add(
            name,
            Self::described("boolean", description).with("default", Kw::Bool(default)),
        )
    }

    pub fn string_list(self, name: &str, description: &str) -> Self {
        self.add(
            name,
            Prop::new("array")
                .with("items", Kw::StringItems)
                .with("description", Kw::Str(description.to_string())),
        )
    }

    /// Give the already-added parameter `name` a one-letter CLI spelling (`-o` for
    /// `--output_path`), as the `x-short` keyword; MCP clients never see it.
    pub fn short(mut self, name: &str, letter: char) -> Self {
        if let Some(slot) = self.props.iter_mut().find(|(k, _)| k == name) {
            let p = std::mem::replace(&mut slot.1, Prop(Vec::new()));
            slot.1 = p.with("x-short", Kw::Str(letter.to_string()));
        }
        self
    }

    pub fn required(mut self, name: &str) -> Self {
        self.required.push(name.to_string());
        self
    }

    fn prop(&self, name: &str) -> Option<&Prop> {
        self.props.iter().find(|(k, _)| k == name).map(|(_, p)| p)
    }

    /// The JSON Schema as a value (the descriptors serialise the builder directly).
    pub fn schema(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Serialises as the JSON Schema: `{"type": "object", "properties", "required",
/// "additionalProperties": false}`.
impl Serialize for Params {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Props<'a>(&'a [(String, Prop)]);
        impl Serialize for Props<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("type", "object")?;
        m.serialize_entry("properties", &Props(&self.props))?;
        m.serialize_entry("required", &self.required)?;
        m.serialize_entry("additionalProperties", &false)?;
        m.end()
    }
}

// ---------------------------------------------------------------------------------------------
// Examples

/// A documented example call. It is printed by `--help`, listed in the MCP description, and
/// run as a test by [`testing::run_examples`]. In `args`, `${FIXTURES}` stands for the
/// repository's `fixtures/` directory and `${CORPUS}` for the shared corpus.
#[derive(Clone, Debug, Serialize)]
pub struct Example {
    pub description: &'static str,
    pub args: Value,
    /// Top-level keys the result must contain (checked by the example test).
    pub expect_keys: Vec<&'static str>,
}

impl Example {
    pub fn new(description: &'static str, args: Value) -> Self {
        Example {
            description,
            args,
            expect_keys: Vec::new(),
        }
    }
    pub fn expect(mut self, keys: &[&'static str]) -> Self {
        self.expect_keys.extend_from_slice(keys);
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Calls

/// One input a call read; the result cache and MCP's roots check rely on this list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Input {
    pub path: PathBuf,
    pub kind: InputKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    File,
    Dir,
}

/// A tool invocation: validated arguments, the host's context, and the inputs read so far.
pub struct Call {
    args: Map<String, Value>,
    ctx: Value,
    inputs: Vec<Input>,
}

impl Call {
    pub fn new(args: Map<String, Value>, ctx: Value) -> Self {
        Call {
            args,
            ctx,
            inputs: Vec::new(),
        }
    }

    pub fn args(&self) -> &Map<String, Value> {
        &self.args
    }

    /// The host context: `{"protocol", "host_version", "cwd", "tmpdir", ...}`.
    pub fn ctx(&self) -> &Value {
        &self.ctx
    }

    fn present(&self, name: &str) -> Option<&Value> {
        self.args.get(name).filter(|v| !v.is_null())
    }

    /// A string argument; absent (or null) → `None`. Numbers are accepted as their decimal
    /// text, so a run named `12345` given by an untyped client still works.
    pub fn opt_str(&self, name: &str) -> Result<Option<String>, ToolError> {
        match self.present(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(other) => Err(type_error(name, "a string", other)),
        }
    }

    /// A non-empty string argument, or `None` when absent or empty.
    pub fn opt_nonempty(&self, name: &str) -> Result<Option<String>, ToolError> {
        Ok(self.opt_str(name)?.filter(|s| !s.is_empty()))
    }

    pub fn str_or(&self, name: &str, default: &str) -> Result<String, ToolError> {
        Ok(self.opt_str(name)?.unwrap_or_else(|| default.to_string()))
    }

    pub fn req_str(&self, name: &str) -> Result<String, ToolError> {
        self.opt_nonempty(name)?.ok_or_else(|| {
            ToolError::usage(format!("missing required argument `{name}`"))
                .with_hint(format!("pass --{name} <value>"))
        })
    }

    pub fn opt_i64(&self, name: &str) -> Result<Option<i64>, ToolError> {
        match self.present(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .map(Some)
                .ok_or_else(|| type_error(name, "an integer", &Value::Number(n.clone()))),
            Some(Value::String(s)) => s
                .trim()
                .parse::<i64>()
                .map(Some)
                .map_err(|_| type_error(name, "an integer", &Value::String(s.clone()))),
            Some(other) => Err(type_error(name, "an integer", other)),
        }
    }

    pub fn i64_or(&self, name: &str, default: i64) -> Result<i64, ToolError> {
        Ok(self.opt_i64(name)?.unwrap_or(default))
    }

    /// A count/limit: a non-negative integer.
    pub fn usize_or(&self, name: &str, default: usize) -> Result<usize, ToolError> {
        match self.opt_i64(name)? {
            None => Ok(default),
            Some(v) if v >= 0 => Ok(v as usize),
            Some(v) => Err(ToolError::invalid(format!(
                "argument `{name}` must be >= 0, got {v}"
            ))),
        }
    }

    pub fn opt_f64(&self, name: &str) -> Result<Option<f64>, ToolError> {
        match self.present(name) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(Value::String(s)) => s
                .trim()
                .parse::<f64>()
                .map(Some)
                .map_err(|_| type_error(name, "a number", &Value::String(s.clone()))),
            Some(other) => Err(type_error(name, "a number", other)),
        }
    }

    pub fn f64_or(&self, name: &str, default: f64) -> Result<f64, ToolError> {
        Ok(self.opt_f64(name)?.unwrap_or(default))
    }

    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool, ToolError> {
        match self.present(name) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) => parse_bool(s)
                .ok_or_else(|| type_error(name, "true or false", &Value::String(s.clone()))),
            Some(Value::Number(n)) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {
                Ok(n.as_i64() == Some(1))
            }
            Some(other) => Err(type_error(name, "true or false", other)),
        }
    }

    pub fn str_list(&self, name: &str) -> Result<Vec<String>, ToolError> {
        match self.present(name) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(type_error(name, "a list of strings", other)),
                })
                .collect(),
            Some(Value::String(s)) => Ok(s
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()),
            Some(other) => Err(type_error(name, "a list of strings", other)),
        }
    }

    /// Record that the call read this file (for the cache's staleness check).
    pub fn read_file(&mut self, path: impl AsRef<Path>) {
        self.push_input(path.as_ref(), InputKind::File);
    }

    /// Record that the call listed this directory (a new capture in it invalidates the cache).
    pub fn read_dir(&mut self, path: impl AsRef<Path>) {
        self.push_input(path.as_ref(), InputKind::Dir);
    }

    fn push_input(&mut self, path: &Path, kind: InputKind) {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let input = Input { path, kind };
        if !self.inputs.contains(&input) {
            self.inputs.push(input);
        }
    }

    pub fn inputs(&self) -> &[Input] {
        &self.inputs
    }
}

pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" | "" => Some(false),
        _ => None,
    }
}

fn type_error(name: &str, expected: &str, got: &Value) -> ToolError {
    ToolError::invalid(format!("argument `{name}` must be {expected}, got {got}"))
}

// ---------------------------------------------------------------------------------------------
// Tools

/// One tool. Implement it on a unit struct in `src/tools/<name>.rs` and `register_tool!` it.
pub trait Tool: Sync + Send + 'static {
    /// The snake_case name, unqualified (`get_overview`).
    fn name(&self) -> &'static str;
    /// Other names the tool answers to (callable, not listed in MCP `tools/list`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// One line for tool lists.
    fn summary(&self) -> &'static str;
    /// The full help text (`xprof <tool> --help`, MCP description).
    fn doc(&self) -> &'static str;
    fn params(&self) -> Params;
    /// What the result object contains.
    fn output(&self) -> &'static str {
        ""
    }
    fn examples(&self) -> Vec<Example> {
        Vec::new()
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError>;
}

#[doc(hidden)]
pub struct Registration {
    pub krate: &'static str,
    pub tool: &'static dyn Tool,
}

inventory::collect!(Registration);

/// Register a tool (a `const`-constructible value, usually a unit struct) with the plugin
/// crate that expands this macro.
#[macro_export]
macro_rules! register_tool {
    ($tool:expr) => {
        $crate::__private::inventory::submit! {
            $crate::sdk::Registration { krate: env!("CARGO_CRATE_NAME"), tool: &$tool }
        }
    };
}

/// The tools registered by crate `krate`, sorted by name.
pub fn tools(krate: &str) -> Vec<&'static dyn Tool> {
    let mut v: Vec<&'static dyn Tool> = inventory::iter::<Registration>
        .into_iter()
        .filter(|r| r.krate == krate)
        .map(|r| r.tool)
        .collect();
    v.sort_by_key(|t| t.name());
    v
}

/// A tool's descriptor as the plugin sends it (serialised directly: building it as
/// `serde_json::Value` maps made every plugin load pay for hashing and allocating them).
#[derive(Serialize)]
struct Descriptor<'a> {
    name: &'a str,
    aliases: &'a [&'a str],
    summary: &'a str,
    doc: &'a str,
    params: Params,
    output: &'a str,
    examples: Vec<Example>,
}

impl<'a> Descriptor<'a> {
    fn of(tool: &'a dyn Tool) -> Self {
        Descriptor {
            name: tool.name(),
            aliases: tool.aliases(),
            summary: tool.summary(),
            doc: tool.doc(),
            params: tool.params(),
            output: tool.output(),
            examples: tool.examples(),
        }
    }
}

pub fn descriptor(tool: &dyn Tool) -> Value {
    serde_json::to_value(Descriptor::of(tool)).unwrap_or(Value::Null)
}

#[doc(hidden)]
pub fn abi_info_json(name: &str, version: &str, capabilities: &[&str]) -> String {
    // A struct, not a `json!` map: the host asks for this on every call, and a map would build
    // an index (with a randomly seeded hasher, a `getrandom` call) to print five fields.
    #[derive(Serialize)]
    struct AbiInfo<'a> {
        name: &'a str,
        version: &'a str,
        protocol: u32,
        api_version: &'a str,
        capabilities: &'a [&'a str],
    }
    serde_json::to_string(&AbiInfo {
        name,
        version,
        protocol: PROTOCOL,
        api_version: env!("CARGO_PKG_VERSION"),
        capabilities,
    })
    .unwrap_or_default()
}

#[doc(hidden)]
pub fn descriptors_json(krate: &str) -> String {
    let all: Vec<Descriptor<'_>> = tools(krate).into_iter().map(Descriptor::of).collect();
    serde_json::to_string(&all).unwrap_or_else(|_| "[]".into())
}

// ---------------------------------------------------------------------------------------------
// Invoke: validation, catch_unwind, envelope

thread_local! {
    static IN_INVOKE: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Invokes in progress in this process, and the last panic of a thread that is not an
/// invoke's own (a tool's worker thread, e.g. rayon's, whose panic reaches the invoke as a
/// payload without its message or place).
static INVOKES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static LAST_WORKER_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Panics inside a tool are reported as one JSON error, so the default hook's message and
/// backtrace must not reach stderr. Outside an invoke (e.g. a failing unit test) the previous
/// hook still runs.
fn install_quiet_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let describe = || {
                let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                    (*s).to_string()
                } else if let Some(s) = info.payload().downcast_ref::<String>() {
                    s.clone()
                } else {
                    "unknown panic payload".to_string()
                };
                let loc = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                format!("{msg}{loc}")
            };
            if IN_INVOKE.with(|f| f.get()) {
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(describe()));
            } else if INVOKES.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                // Most likely a worker thread of the running tool; its invoke reports it.
                let mut last = LAST_WORKER_PANIC.lock().unwrap_or_else(|e| e.into_inner());
                *last = Some(describe());
            } else {
                previous(info);
            }
        }));
    });
}

/// Check `args` against the tool's schema: unknown names are usage errors that list the valid
/// ones; missing required ones are usage errors; wrong JSON types are invalid values.
pub fn validate_args(tool: &dyn Tool, args: &Map<String, Value>) -> Result<(), ToolError> {
    let params = tool.params();
    for (k, v) in args {
        let Some(p) = params.prop(k) else {
            let mut valid: Vec<&str> = params.props.iter().map(|(k, _)| k.as_str()).collect();
            valid.sort_unstable();
            return Err(ToolError::usage(format!(
                "unknown argument `{k}` for tool `{}`",
                tool.name()
            ))
            .with_hint(format!("valid arguments: {}", valid.join(", "))));
        };
        if v.is_null() {
            continue;
        }
        let ty = p.get("type").and_then(Kw::as_str);
        let ok = match ty {
            Some("string") => v.is_string() || v.is_number(),
            Some("integer") => {
                v.as_i64().is_some()
                    || v.as_u64().is_some()
                    || v.as_f64().is_some_and(|f| f.fract() == 0.0)
                    || v.as_str().is_some_and(|s| s.trim().parse::<i64>().is_ok())
            }
            Some("number") => {
                v.is_number() || v.as_str().is_some_and(|s| s.trim().parse::<f64>().is_ok())
            }
            Some("boolean") => {
                v.is_boolean() || v.as_str().is_some_and(|s| parse_bool(s).is_some())
            }
            Some("array") => v.is_array() || v.is_string(),
            _ => true,
        };
        let help = || format!("see `xprof {} --help`", tool.name());
        if !ok {
            return Err(ToolError::invalid(format!(
                "argument `{k}` must be of type {}, got {v}",
                ty.unwrap_or("?")
            ))
            .with_hint(help()));
        }
        if let (Some(Kw::Strs(allowed)), Some(s)) = (p.get("enum"), v.as_str())
            && !allowed.iter().any(|a| a == s)
        {
            return Err(ToolError::invalid(format!(
                "argument `{k}` must be one of {}, got {s:?}",
                serde_json::to_string(allowed).unwrap_or_default()
            ))
            .with_hint(format!("pass --{k} {}", allowed.join("|"))));
        }
        let number = v
            .as_f64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse::<f64>().ok()));
        if let (Some(min), Some(n)) = (p.get("minimum").and_then(Kw::as_f64), number)
            && matches!(ty, Some("integer" | "number"))
            && n < min
        {
            return Err(
                ToolError::invalid(format!("argument `{k}` must be >= {min}, got {n}"))
                    .with_hint(help()),
            );
        }
    }
    for r in &params.required {
        if args.get(r).is_none_or(Value::is_null) {
            return Err(ToolError::usage(format!(
                "missing required argument `{r}` for tool `{}`",
                tool.name()
            ))
            .with_hint(format!("pass --{r} <value>")));
        }
    }
    Ok(())
}

/// What a successful call produced: the tool's output and the inputs it read.
pub struct Invoked {
    pub output: ToolOutput,
    pub inputs: Vec<Input>,
}

/// The envelope every frontend receives, borrowed from an [`Invoked`] so that serialising it
/// writes the result once (a `json!` envelope would first copy the whole result into a new
/// `Value`, which on a table-sized result cost as much as serialising it).
#[derive(Serialize)]
struct Envelope<'a> {
    result: &'a ResultBody,
    content_type: &'a str,
    inputs: &'a [Input],
}

impl Invoked {
    fn envelope(&self) -> Envelope<'_> {
        Envelope {
            result: &self.output.body,
            content_type: self.output.content_type.as_str(),
            inputs: &self.inputs,
        }
    }
}

/// Run a tool in-process: validate the arguments, call it, catch its panics.
pub fn invoke_tool(
    krate: &str,
    name: &str,
    args_json: &str,
    ctx_json: &str,
) -> Result<Invoked, ToolError> {
    invoke_reporting(krate, name, args_json, ctx_json).map_err(|(e, _)| e)
}

/// [`invoke_tool`], a failure coming with the inputs the call had read by then: the MCP server
/// checks those against its roots whether or not the call succeeded.
fn invoke_reporting(
    krate: &str,
    name: &str,
    args_json: &str,
    ctx_json: &str,
) -> Result<Invoked, (ToolError, Vec<Input>)> {
    let mut read = Vec::new();
    invoke_body(krate, name, args_json, ctx_json, &mut read).map_err(|e| (e, read))
}

fn invoke_body(
    krate: &str,
    name: &str,
    args_json: &str,
    ctx_json: &str,
    read: &mut Vec<Input>,
) -> Result<Invoked, ToolError> {
    install_quiet_panic_hook();
    let tool = tools(krate)
        .into_iter()
        .find(|t| t.name() == name || t.aliases().contains(&name))
        .ok_or_else(|| ToolError::usage(format!("unknown tool `{name}`")))?;
    let args: Map<String, Value> = if args_json.trim().is_empty() {
        Map::new()
    } else {
        match serde_json::from_str::<Value>(args_json) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(ToolError::usage("arguments must be a JSON object")),
            Err(e) => {
                return Err(ToolError::usage(format!(
                    "arguments are not valid JSON: {e}"
                )));
            }
        }
    };
    let ctx: Value = serde_json::from_str(ctx_json).unwrap_or(Value::Null);
    validate_args(tool, &args)?;
    let mut call = Call::new(args, ctx);

    let was_in_invoke = IN_INVOKE.with(|f| f.replace(true));
    INVOKES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // A failpoint for the tests that a panic inside a real plugin artifact is caught and
        // reported. Debug builds only.
        #[cfg(debug_assertions)]
        if std::env::var_os("XPROF_FAILPOINT_PANIC").is_some_and(|t| t == name) {
            panic!("failpoint XPROF_FAILPOINT_PANIC");
        }
        tool.run(&mut call)
    }));
    IN_INVOKE.with(|f| f.set(was_in_invoke));
    INVOKES.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    // A failure (a panic included) reports what the call had read up to then.
    if !matches!(outcome, Ok(Ok(_))) {
        *read = call.inputs().to_vec();
    }

    match outcome {
        Ok(Ok(output)) => Ok(Invoked {
            output,
            inputs: call.inputs().to_vec(),
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            let msg = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .or_else(|| {
                    let mut last = LAST_WORKER_PANIC.lock().unwrap_or_else(|e| e.into_inner());
                    last.take().map(|m| format!("{m} (on a worker thread)"))
                })
                .unwrap_or_else(|| "unknown panic".into());
            Err(ToolError::internal(format!("tool `{name}` panicked: {msg}")).with_hint(
                "this is a bug in the plugin; please report it with the command that triggered it",
            ))
        }
    }
}

/// Run a tool in-process and build the envelope as a value. Used by tests.
pub fn invoke_json(
    krate: &str,
    name: &str,
    args_json: &str,
    ctx_json: &str,
) -> Result<Value, ToolError> {
    let done = invoke_tool(krate, name, args_json, ctx_json)?;
    let inputs = serde_json::to_value(&done.inputs).unwrap_or_default();
    let content_type = done.output.content_type.as_str();
    let mut env = Map::new();
    env.insert("result".into(), done.output.into_value());
    env.insert("content_type".into(), Value::from(content_type));
    env.insert("inputs".into(), inputs);
    Ok(Value::Object(env))
}

#[doc(hidden)]
pub fn invoke_abi(
    krate: &str,
    name: &str,
    args_json: &str,
    ctx_json: &str,
) -> RResult<RString, RString> {
    // Even serialisation runs under catch_unwind: nothing may unwind across the C ABI.
    let r = catch_unwind(AssertUnwindSafe(|| {
        invoke_reporting(krate, name, args_json, ctx_json)
            // `serde_json::to_string` writes into a byte buffer; `Value`'s `Display`
            // (`to_string`) goes through `fmt::Write` piece by piece, several times slower on
            // large results.
            .map(|done| serde_json::to_string(&done.envelope()))
    }));
    match r {
        Ok(Ok(Ok(s))) => ROk(RString::from(s)),
        Ok(Ok(Err(e))) => RErr(RString::from(
            ToolError::internal(format!("tool `{name}`: result not serialisable: {e}"))
                .to_json()
                .to_string(),
        )),
        // A failure carries what the call had read (`inputs`, as in a success's envelope);
        // hosts that predate the field ignore it.
        Ok(Err((e, inputs))) => {
            let mut v = e.to_json();
            if !inputs.is_empty() {
                v["inputs"] = serde_json::to_value(&inputs).unwrap_or_default();
            }
            RErr(RString::from(v.to_string()))
        }
        Err(_) => RErr(RString::from(
            ToolError::internal(format!("tool `{name}` panicked"))
                .to_json()
                .to_string(),
        )),
    }
}

/// Generates the plugin's root module. Use once, in the plugin crate's `lib.rs`:
///
/// ```ignore
/// xprof_plugin_api::export_plugin!(name: "core", capabilities: ["xspace"]);
/// ```
///
/// It also defines `pub fn plugin_module() -> PluginModRef` for in-process use.
#[macro_export]
macro_rules! export_plugin {
    (name: $name:expr, capabilities: [$($cap:expr),* $(,)?] $(,)?) => {
        extern "C" fn __xprof_abi_info() -> $crate::__private::abi_stable::std_types::RString {
            $crate::sdk::abi_info_json($name, env!("CARGO_PKG_VERSION"), &[$($cap),*]).into()
        }
        extern "C" fn __xprof_descriptors() -> $crate::__private::abi_stable::std_types::RString {
            $crate::sdk::descriptors_json(env!("CARGO_CRATE_NAME")).into()
        }
        extern "C" fn __xprof_invoke(
            name: $crate::__private::abi_stable::std_types::RStr<'_>,
            args: $crate::__private::abi_stable::std_types::RStr<'_>,
            ctx: $crate::__private::abi_stable::std_types::RStr<'_>,
        ) -> $crate::__private::abi_stable::std_types::RResult<
            $crate::__private::abi_stable::std_types::RString,
            $crate::__private::abi_stable::std_types::RString,
        > {
            $crate::sdk::invoke_abi(env!("CARGO_CRATE_NAME"), name.as_str(), args.as_str(), ctx.as_str())
        }
        /// This plugin's root module, for in-process use (tests).
        pub fn plugin_module() -> $crate::PluginModRef {
            use $crate::__private::abi_stable::prefix_type::PrefixTypeTrait;
            $crate::PluginMod {
                abi_info: __xprof_abi_info,
                descriptors: __xprof_descriptors,
                invoke: __xprof_invoke,
            }
            .leak_into_prefix()
        }
        #[$crate::__private::abi_stable::export_root_module]
        pub fn __xprof_root_module() -> $crate::PluginModRef {
            plugin_module()
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Testing

/// In-process test helpers: every tool's documented examples run as tests.
pub mod testing {
    use super::*;

    /// What [`robustness_calls`] saw.
    #[derive(Debug, Default)]
    pub struct Robustness {
        pub calls: usize,
        pub answered: usize,
        /// `label: message` of every call that panicked (an internal error).
        pub panics: Vec<String>,
    }

    impl Robustness {
        /// No call panicked, and most answered (so that the inputs reached the analyses, not
        /// only the argument checks).
        pub fn assert_clean(&self) {
            assert!(self.panics.is_empty(), "{}", self.panics.join("\n"));
            assert!(
                self.answered > self.calls / 2,
                "{} of {} calls answered",
                self.answered,
                self.calls
            );
        }
    }

    /// Run `(label, tool, args)` calls of crate `krate`'s tools in-process, for robustness
    /// tests on damaged inputs: a tool may answer or fail with a usage, path or value error,
    /// but a panic is a bug.
    pub fn robustness_calls<'t>(
        krate: &str,
        calls: impl IntoIterator<Item = (String, &'t str, Value)>,
    ) -> Robustness {
        let mut r = Robustness::default();
        for (label, tool, args) in calls {
            r.calls += 1;
            match invoke_tool(krate, tool, &args.to_string(), "{}") {
                Ok(_) => r.answered += 1,
                Err(e) if e.kind == ErrorKind::Internal => {
                    r.panics.push(format!("{tool} on {label}: {}", e.message))
                }
                Err(_) => {}
            }
        }
        r
    }

    /// Every run directory (one holding `*.xplane.pb` files) under the repository's
    /// `fixtures/` and the shared corpus's `fixtures/`, sorted.
    pub fn run_dirs(manifest_dir: &str) -> Vec<PathBuf> {
        let mut stack = vec![workspace_root(manifest_dir).join("fixtures")];
        stack.extend(corpus(manifest_dir).map(|c| c.join("fixtures")));
        let mut out = Vec::new();
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.to_string_lossy().ends_with(".xplane.pb") {
                    out.push(d.clone());
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The repository root (where `fixtures/` lives), found from a crate's manifest dir.
    pub fn workspace_root(manifest_dir: &str) -> PathBuf {
        let mut p = PathBuf::from(manifest_dir);
        while !p.join("fixtures").is_dir() || !p.join("Cargo.toml").is_file() {
            if !p.pop() {
                return PathBuf::from(manifest_dir);
            }
        }
        p
    }

    /// The shared corpus: `$XPROF_CORPUS`, else `<workspace root>/../shared`. Under `CI` a
    /// missing corpus is a failure, never a skip.
    pub fn corpus(manifest_dir: &str) -> Option<PathBuf> {
        let dir = std::env::var_os("XPROF_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root(manifest_dir).join("../shared"));
        if dir.join("fixtures").is_dir() {
            Some(dir)
        } else if std::env::var_os("CI").is_some() {
            panic!(
                "the shared corpus is missing at {} (set XPROF_CORPUS); CI must not skip",
                dir.display()
            )
        } else {
            eprintln!(
                "note: shared corpus not found at {}; skipping",
                dir.display()
            );
            None
        }
    }

    fn substitute(v: &Value, fixtures: &str, corpus: &str) -> Value {
        match v {
            Value::String(s) => Value::String(
                s.replace("${FIXTURES}", fixtures)
                    .replace("${CORPUS}", corpus),
            ),
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| substitute(x, fixtures, corpus)).collect())
            }
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), substitute(x, fixtures, corpus)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Run every example of every tool in `krate`; panics with a list of failures.
    /// Examples that need the corpus are skipped (outside CI) when it is absent.
    pub fn run_examples(krate: &str, manifest_dir: &str) -> usize {
        let root = workspace_root(manifest_dir);
        let fixtures = root.join("fixtures").display().to_string();
        let corpus = corpus(manifest_dir);
        let corpus_s = corpus.as_ref().map(|c| c.display().to_string());
        let mut failures = Vec::new();
        let mut ran = 0;
        for tool in tools(krate) {
            for ex in tool.examples() {
                let raw = ex.args.to_string();
                if raw.contains("${CORPUS}") && corpus_s.is_none() {
                    continue;
                }
                let args = substitute(&ex.args, &fixtures, corpus_s.as_deref().unwrap_or(""));
                ran += 1;
                match invoke_json(krate, tool.name(), &args.to_string(), "{}") {
                    Ok(env) => {
                        for k in &ex.expect_keys {
                            if env["result"].get(k).is_none() {
                                failures.push(format!(
                                    "{} example {:?}: result lacks key `{k}`: {}",
                                    tool.name(),
                                    ex.description,
                                    env["result"]
                                ));
                            }
                        }
                    }
                    Err(e) => failures.push(format!(
                        "{} example {:?} failed: {e}",
                        tool.name(),
                        ex.description
                    )),
                }
            }
        }
        assert!(
            failures.is_empty(),
            "examples failed:\n{}",
            failures.join("\n")
        );
        ran
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_info_names_the_plugin_its_protocol_and_capabilities() {
        let info: Value =
            serde_json::from_str(&abi_info_json("p", "1.2.3", &["xspace", "hlo"])).unwrap();
        assert_eq!(
            info,
            json!({
                "name": "p",
                "version": "1.2.3",
                "protocol": PROTOCOL,
                "api_version": env!("CARGO_PKG_VERSION"),
                "capabilities": ["xspace", "hlo"],
            })
        );
    }

    /// A tool whose worker thread panics, the panic handed to the tool's thread as rayon
    /// hands it (`resume_unwind`: the hook does not run again there).
    struct WorkerPanics;
    impl Tool for WorkerPanics {
        fn name(&self) -> &'static str {
            "worker_panics"
        }
        fn summary(&self) -> &'static str {
            ""
        }
        fn doc(&self) -> &'static str {
            ""
        }
        fn params(&self) -> Params {
            Params::new()
        }
        fn run(&self, _call: &mut Call) -> Result<ToolOutput, ToolError> {
            let joined = std::thread::spawn(|| -> u32 { panic!("boom in a worker") }).join();
            match joined {
                Ok(_) => Ok(json!({}).into()),
                Err(payload) => std::panic::resume_unwind(payload),
            }
        }
    }
    crate::register_tool!(WorkerPanics);

    #[test]
    fn a_worker_threads_panic_is_reported_with_its_message_and_place() {
        let e = invoke_tool(env!("CARGO_CRATE_NAME"), "worker_panics", "{}", "{}")
            .err()
            .expect("a panic is an error");
        assert_eq!(e.kind, ErrorKind::Internal);
        assert!(e.message.contains("boom in a worker"), "{}", e.message);
        assert!(e.message.contains("sdk.rs:"), "{}", e.message);
    }

    struct T;
    impl Tool for T {
        fn name(&self) -> &'static str {
            "t"
        }
        fn summary(&self) -> &'static str {
            ""
        }
        fn doc(&self) -> &'static str {
            ""
        }
        fn params(&self) -> Params {
            Params::new()
                .integer_min("limit", "", Some(5), 1)
                .string_enum("mode", "", &["a", "b"], "a")
                .boolean("flag", "", false)
                .string("req", "")
                .required("req")
        }
        fn run(&self, _call: &mut Call) -> Result<ToolOutput, ToolError> {
            Ok(json!({}).into())
        }
    }

    /// The schema every builder method writes, as the `serde_json::Value` builder this SDK
    /// used to have wrote it (key order included).
    fn reference_schema() -> Value {
        let capture_path = json!({"type": "string", "format": "path", "x-positional": true,
            "description": "A logdir, a run directory (plugins/profile/<run>) or one .xplane.pb file."});
        let logdir = json!({"type": "string", "format": "path", "x-env": "XPROF_LOGDIR",
            "description": "Root of the profile captures (what you pass to `xprof --logdir`). Default: $XPROF_LOGDIR."});
        let run = json!({"type": "string",
            "description": "Run (session) name under <logdir>/plugins/profile/; default: the newest run."});
        let host = json!({"type": "string",
            "description": "Host (xplane file stem, or its 0-based index in file order) to read; default: all hosts combined where the view allows, else the first host."});
        let mut props = Map::new();
        // Inserting a name again keeps its first position (IndexMap), as `Params` does.
        props.insert(
            "run".into(),
            json!({"type": "string", "description": "replaced below"}),
        );
        props.insert("path".into(), capture_path);
        props.insert("logdir".into(), logdir);
        props.insert("run".into(), run);
        props.insert("host".into(), host);
        props.insert(
            "s".into(),
            json!({"type": "string", "description": "an \"s\"\n"}),
        );
        props.insert(
            "sd".into(),
            json!({"type": "string", "description": "sd", "default": "x"}),
        );
        props.insert(
            "se".into(),
            json!({"type": "string", "description": "se", "enum": ["a", "b"], "default": "a"}),
        );
        let mut p = json!({"type": "string", "format": "path", "description": "p"});
        p["x-env"] = Value::from("P_ENV");
        props.insert("p".into(), p);
        props.insert(
            "p2".into(),
            json!({"type": "string", "format": "path", "description": "p2"}),
        );
        let mut i = json!({"type": "integer", "description": "i"});
        i["default"] = Value::from(-3);
        props.insert("i".into(), i);
        props.insert("i2".into(), json!({"type": "integer", "description": "i2"}));
        let mut im = json!({"type": "integer", "description": "im", "minimum": 1});
        im["default"] = Value::from(5);
        props.insert("im".into(), im);
        let mut n = json!({"type": "number", "description": "n"});
        n["default"] = Value::from(0.25);
        props.insert("n".into(), n);
        let mut nan = json!({"type": "number", "description": "nan"});
        nan["default"] = Value::from(f64::NAN);
        props.insert("nan".into(), nan);
        props.insert(
            "b".into(),
            json!({"type": "boolean", "description": "b", "default": true}),
        );
        props.insert(
            "l".into(),
            json!({"type": "array", "items": {"type": "string"}, "description": "l"}),
        );
        json!({
            "type": "object",
            "properties": props,
            "required": ["s", "p"],
            "additionalProperties": false,
        })
    }

    fn every_builder() -> Params {
        Params::new()
            .string("run", "replaced below")
            .capture()
            .host()
            .string("s", "an \"s\"\n")
            .string_default("sd", "sd", "x")
            .string_enum("se", "se", &["a", "b"], "a")
            .path("p", "p", Some("P_ENV"))
            .path("p2", "p2", None)
            .integer("i", "i", Some(-3))
            .integer("i2", "i2", None)
            .integer_min("im", "im", Some(5), 1)
            .number("n", "n", Some(0.25))
            .number("nan", "nan", Some(f64::NAN))
            .boolean("b", "b", true)
            .string_list("l", "l")
            .required("s")
            .required("p")
    }

    #[test]
    fn typed_schemas_serialise_exactly_as_the_value_builder_did() {
        let p = every_builder();
        let reference = reference_schema();
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            reference.to_string(),
            "descriptor text"
        );
        assert_eq!(p.schema(), reference);
        assert_eq!(p.schema().to_string(), reference.to_string(), "key order");
        // Positional paths, with and without an environment default.
        let pp = Params::new().positional_path("d", Some("E")).schema();
        assert_eq!(
            pp["properties"].to_string(),
            r#"{"path":{"type":"string","format":"path","x-positional":true,"description":"d","x-env":"E"}}"#
        );
        let pp = Params::new().positional_path("d", None).schema();
        assert_eq!(
            pp["properties"].to_string(),
            r#"{"path":{"type":"string","format":"path","x-positional":true,"description":"d"}}"#
        );
    }

    struct Full;
    impl Tool for Full {
        fn name(&self) -> &'static str {
            "full"
        }
        fn aliases(&self) -> &'static [&'static str] {
            &["f", "fu"]
        }
        fn summary(&self) -> &'static str {
            "sum"
        }
        fn doc(&self) -> &'static str {
            "doc \u{e9}"
        }
        fn params(&self) -> Params {
            every_builder()
        }
        fn output(&self) -> &'static str {
            "out"
        }
        fn examples(&self) -> Vec<Example> {
            vec![
                Example::new("one", json!({"path": "${FIXTURES}/x", "n": 1.5})).expect(&["a"]),
                Example::new("two", json!({})),
            ]
        }
        fn run(&self, _call: &mut Call) -> Result<ToolOutput, ToolError> {
            Ok(json!({}).into())
        }
    }

    #[test]
    fn descriptors_serialise_exactly_as_the_value_builder_did() {
        let reference = json!({
            "name": Full.name(),
            "aliases": Full.aliases(),
            "summary": Full.summary(),
            "doc": Full.doc(),
            "params": reference_schema(),
            "output": Full.output(),
            "examples": Full.examples(),
        });
        let d = Descriptor::of(&Full);
        assert_eq!(serde_json::to_string(&d).unwrap(), reference.to_string());
        assert_eq!(descriptor(&Full).to_string(), reference.to_string());
        let list = serde_json::to_string(&vec![Descriptor::of(&Full), Descriptor::of(&T)]).unwrap();
        let ref_list = Value::Array(vec![reference, {
            json!({
                "name": "t", "aliases": [], "summary": "", "doc": "",
                "params": T.params().schema(), "output": "", "examples": [],
            })
        }]);
        assert_eq!(list, ref_list.to_string());
    }

    #[test]
    fn validation_uses_the_typed_schema() {
        let args = |v: Value| v.as_object().unwrap().clone();
        let e = validate_args(&Full, &args(json!({"s": "x"}))).unwrap_err();
        assert_eq!(e.message, "missing required argument `p` for tool `full`");
        let e = validate_args(&Full, &args(json!({"s": "x", "p": "/", "se": "c"}))).unwrap_err();
        assert_eq!(
            e.message,
            r#"argument `se` must be one of ["a","b"], got "c""#
        );
        let e = validate_args(&Full, &args(json!({"s": "x", "p": "/", "im": 0}))).unwrap_err();
        assert_eq!(e.message, "argument `im` must be >= 1, got 0");
        let e = validate_args(&Full, &args(json!({"s": "x", "p": "/", "b": []}))).unwrap_err();
        assert_eq!(e.message, "argument `b` must be of type boolean, got []");
        let e = validate_args(&Full, &args(json!({"zz": 1}))).unwrap_err();
        assert!(
            e.hint
                .unwrap()
                .starts_with("valid arguments: b, host, i, i2, im, l, logdir")
        );
        assert!(
            validate_args(
                &Full,
                &args(json!({"s": 1, "p": "/", "l": "a,b", "n": "2"}))
            )
            .is_ok()
        );
    }

    fn check(args: Value) -> Result<(), ToolError> {
        validate_args(&T, args.as_object().unwrap())
    }

    #[test]
    fn minimum_is_enforced_with_a_hint() {
        let e = check(json!({"req": "x", "limit": 0})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        assert!(e.message.contains(">= 1") && e.hint.is_some(), "{e:?}");
        assert!(check(json!({"req": "x", "limit": 1})).is_ok());
    }

    #[test]
    fn enum_errors_list_the_choices() {
        let e = check(json!({"req": "x", "mode": "c"})).unwrap_err();
        assert_eq!(e.hint.as_deref(), Some("pass --mode a|b"));
    }

    #[test]
    fn unknown_and_missing_arguments_are_usage_errors() {
        assert_eq!(
            check(json!({"req": "x", "nope": 1})).unwrap_err().kind,
            ErrorKind::Usage
        );
        assert_eq!(check(json!({})).unwrap_err().kind, ErrorKind::Usage);
    }

    #[test]
    fn strings_that_look_like_values_are_accepted() {
        assert!(check(json!({"req": "x", "limit": "7", "flag": "True"})).is_ok());
        assert_eq!(
            check(json!({"req": "x", "flag": "maybe"}))
                .unwrap_err()
                .kind,
            ErrorKind::InvalidValue
        );
    }
}
