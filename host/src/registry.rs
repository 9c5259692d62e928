//! Plugin discovery, loading and the merged tool registry.
//!
//! Plugins are `libxprof_plugin_*.so` cdylibs found in an ordered list of directories and
//! loaded through abi_stable (which checks the layout of everything that crosses). A plugin that
//! fails to load is recorded with its reason and the host carries on: load failures are
//! reported by `xprof plugins`, never fatal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use abi_stable::std_types::{RResult, RStr};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;
use xprof_plugin_api::{ErrorKind, PROTOCOL, PluginModRef, ToolError};

use crate::result_json::ResultJson;

/// Plugins whose name is reserved for the ones shipped with xprof. They are trusted only from
/// the install locations (next to the executable, `<prefix>/lib/xprof/plugins`) or a directory
/// the user named explicitly with `--plugin-dir`, so a stray copy on a search path cannot
/// impersonate them.
pub const FIRST_PARTY: &[&str] = &["core", "hlo", "kernel", "report"];

/// Top-level command names a tool may not take.
pub const RESERVED_NAMES: &[&str] = &[
    "plugins",
    "mcp",
    "cache",
    "help",
    "tools",
    "completions",
    "skills",
];

/// Where a plugin directory came from; decides first-party trust and precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirOrigin {
    /// `--plugin-dir` (explicit, trusted).
    Explicit,
    /// `$XPROF_PLUGIN_PATH`.
    EnvPath,
    /// The executable's own directory (a `cargo build` tree or an install's bin dir).
    ExeDir,
    /// `<prefix>/lib/xprof/plugins`.
    PrefixLib,
    /// `$XDG_DATA_HOME/xprof/plugins` (default `~/.local/share/xprof/plugins`).
    UserData,
}

impl DirOrigin {
    fn trusted_for_first_party(self) -> bool {
        matches!(
            self,
            DirOrigin::Explicit | DirOrigin::ExeDir | DirOrigin::PrefixLib
        )
    }
    pub fn label(self) -> &'static str {
        match self {
            DirOrigin::Explicit => "--plugin-dir",
            DirOrigin::EnvPath => "XPROF_PLUGIN_PATH",
            DirOrigin::ExeDir => "executable dir",
            DirOrigin::PrefixLib => "prefix lib dir",
            DirOrigin::UserData => "user data dir",
        }
    }
    /// The inverse of [`DirOrigin::label`].
    pub fn from_label(label: &str) -> Option<DirOrigin> {
        [
            DirOrigin::Explicit,
            DirOrigin::EnvPath,
            DirOrigin::ExeDir,
            DirOrigin::PrefixLib,
            DirOrigin::UserData,
        ]
        .into_iter()
        .find(|o| o.label() == label)
    }
}

/// How plugins are searched for.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    pub plugin_dirs: Vec<PathBuf>,
    pub no_default_dirs: bool,
}

/// The executable's path with symbolic links resolved, as the directory beside it is found
/// through. On Linux `current_exe` reads `/proc/self/exe`, which the kernel gives resolved
/// already; elsewhere it may be the path the program was started by.
fn canonical_exe(exe: PathBuf) -> Option<PathBuf> {
    if cfg!(target_os = "linux") {
        Some(exe)
    } else {
        exe.canonicalize().ok()
    }
}

impl Discovery {
    /// The directories to scan, in precedence order.
    pub fn dirs(&self) -> Vec<(PathBuf, DirOrigin)> {
        let mut dirs: Vec<(PathBuf, DirOrigin)> = self
            .plugin_dirs
            .iter()
            .map(|d| (d.clone(), DirOrigin::Explicit))
            .collect();
        if self.no_default_dirs {
            return dirs;
        }
        if let Some(paths) = std::env::var_os("XPROF_PLUGIN_PATH") {
            dirs.extend(
                std::env::split_paths(&paths)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(|p| (p, DirOrigin::EnvPath)),
            );
        }
        if let Some(exe_dir) = std::env::current_exe()
            .ok()
            .and_then(canonical_exe)
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            if let Some(prefix) = exe_dir.parent() {
                dirs.push((exe_dir.clone(), DirOrigin::ExeDir));
                dirs.push((prefix.join("lib/xprof/plugins"), DirOrigin::PrefixLib));
            } else {
                dirs.push((exe_dir, DirOrigin::ExeDir));
            }
        }
        let data_home = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")));
        if let Some(d) = data_home {
            dirs.push((d.join("xprof/plugins"), DirOrigin::UserData));
        }
        dirs
    }

    /// The plugin files to load, in precedence order, each once (a directory listed twice, or
    /// two directories holding the same file, load it from the first).
    pub fn plugin_files(&self) -> Vec<(PathBuf, DirOrigin)> {
        let mut out = Vec::new();
        let mut seen_files: Vec<PathBuf> = Vec::new();
        for (dir, origin) in self.dirs() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(is_plugin_file)
                })
                .collect();
            files.sort();
            for path in files {
                let canon = path.canonicalize().unwrap_or_else(|_| path.clone());
                if seen_files.contains(&canon) {
                    continue; // the same directory listed twice
                }
                seen_files.push(canon);
                out.push((path, origin));
            }
        }
        out
    }
}

/// Is this a plugin file name: `libxprof_plugin_<x>.so`, and not a cargo `-<16 hex>` copy?
pub fn is_plugin_file(name: &str) -> bool {
    let prefix = format!("{}xprof_plugin_", std::env::consts::DLL_PREFIX);
    let Some(stem) = name
        .strip_prefix(&prefix)
        .and_then(|r| r.strip_suffix(std::env::consts::DLL_SUFFIX))
    else {
        return false;
    };
    if stem.is_empty() {
        return false;
    }
    // cargo leaves hashed copies (`libxprof_plugin_x-0123456789abcdef.so`) under deps/ and
    // examples/; loading them too would register every tool twice.
    !matches!(stem.rsplit_once('-'), Some((_, h)) if h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A JSON value kept as its source text until first used. A process usually needs the schema
/// of one tool, so parsing all fifty at start-up would be wasted work.
#[derive(Clone, Debug)]
pub struct LazyJson {
    raw: Option<Box<RawValue>>,
    /// What to use when the text is absent or not of the expected kind.
    fallback: fn() -> Value,
    value: OnceLock<Value>,
}

impl LazyJson {
    fn from_raw(raw: Option<Box<RawValue>>, fallback: fn() -> Value) -> Self {
        LazyJson {
            raw,
            fallback,
            value: OnceLock::new(),
        }
    }

    pub fn new(value: Value) -> Self {
        let l = LazyJson::from_raw(None, || Value::Null);
        let _ = l.value.set(value);
        l
    }
}

fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

fn empty_list() -> Value {
    Value::Array(Vec::new())
}

impl std::ops::Deref for LazyJson {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.value.get_or_init(|| {
            let fallback = (self.fallback)();
            let parsed = self
                .raw
                .as_ref()
                .and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
            match parsed {
                // Only a value of the fallback's kind (object schema, example list) is usable.
                Some(v) if std::mem::discriminant(&v) == std::mem::discriminant(&fallback) => v,
                _ => fallback,
            }
        })
    }
}

impl From<Value> for LazyJson {
    fn from(v: Value) -> Self {
        LazyJson::new(v)
    }
}

impl serde::Serialize for LazyJson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Value::serialize(self, s)
    }
}

/// Serialises a [`LazyJson`] as the text it was given, unparsed (its value when it has none),
/// so that reading the output back yields the same `LazyJson`.
struct AsGiven<'a>(&'a LazyJson);

impl serde::Serialize for AsGiven<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0.raw {
            Some(raw) => raw.serialize(s),
            None => Value::serialize(self.0, s),
        }
    }
}

/// A descriptor as a plugin sends it; the bulky parts stay unparsed.
#[derive(serde::Deserialize)]
struct RawDescriptor {
    name: Option<String>,
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    doc: String,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default)]
    output: String,
    #[serde(default)]
    examples: Option<Box<RawValue>>,
}

/// One tool as the registry knows it.
#[derive(Clone, Debug)]
pub struct ToolEntry {
    pub name: String,
    pub aliases: Vec<String>,
    pub summary: String,
    pub doc: String,
    /// The parameter JSON Schema (an object).
    pub params: LazyJson,
    pub output: String,
    /// The documented examples (an array of `{description, args, ...}`).
    pub examples: LazyJson,
    /// Index into [`Registry::plugins`].
    pub plugin: usize,
}

/// A registered tool written back as a descriptor (see [`ToolEntry::descriptor`]).
#[derive(serde::Serialize)]
struct DescriptorOf<'a> {
    name: &'a str,
    aliases: &'a [String],
    summary: &'a str,
    doc: &'a str,
    params: AsGiven<'a>,
    output: &'a str,
    examples: AsGiven<'a>,
}

impl ToolEntry {
    /// A descriptor that registers this tool again as it is: the fields the host reads, the
    /// schema and examples as the plugin's text (unparsed). The registry index records it, so
    /// that a tool call can register its tool without the plugin's `descriptors()`; writing it
    /// costs only the call that writes the index, not every full load.
    pub fn descriptor(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(&DescriptorOf {
            name: &self.name,
            aliases: &self.aliases,
            summary: &self.summary,
            doc: &self.doc,
            params: AsGiven(&self.params),
            output: &self.output,
            examples: AsGiven(&self.examples),
        })
    }

    pub fn example_list(&self) -> &[Value] {
        self.examples.as_array().map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn properties(&self) -> Map<String, Value> {
        self.params["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default()
    }
}

/// A plugin that loaded.
pub struct LoadedPlugin {
    pub name: String,
    pub version: String,
    pub protocol: u64,
    pub capabilities: Vec<String>,
    pub path: PathBuf,
    pub origin: DirOrigin,
    pub first_party: bool,
    pub tool_count: usize,
    module: PluginModRef,
}

/// A plugin file that was found but not used, with the reason.
#[derive(Clone, Debug)]
pub struct Refused {
    pub path: PathBuf,
    pub origin: DirOrigin,
    /// One line.
    pub reason: String,
    /// The full loader report (for `xprof plugins --verbose`).
    pub detail: String,
}

/// What a successful call returns: the envelope the plugin built.
#[derive(Clone, Debug)]
pub struct Envelope {
    pub result: ResultJson,
    pub content_type: String,
    /// `[{"path", "kind": "file"|"dir"}]`: what the call read.
    pub inputs: Vec<Value>,
}

/// A failed call: the error, and the inputs the call had read before it failed (plugins
/// built against an older SDK report none).
#[derive(Debug)]
pub struct Failure {
    pub error: ToolError,
    /// `[{"path", "kind"}]`, as [`Envelope::inputs`].
    pub inputs: Vec<Value>,
}

impl From<ToolError> for Failure {
    fn from(error: ToolError) -> Self {
        Failure {
            error,
            inputs: Vec::new(),
        }
    }
}

/// An envelope as a plugin sends it, its result unparsed.
#[derive(serde::Deserialize)]
struct RawEnvelope {
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    content_type: Value,
    #[serde(default)]
    inputs: Value,
}

/// The merged registry of every loaded plugin's tools.
#[derive(Default)]
pub struct Registry {
    pub plugins: Vec<LoadedPlugin>,
    pub refused: Vec<Refused>,
    /// Tools by canonical name, sorted.
    pub tools: BTreeMap<String, ToolEntry>,
    /// Alias → canonical name.
    pub aliases: BTreeMap<String, String>,
    /// Human-readable notes about shadowed tools and plugins (printed with `--verbose`).
    pub warnings: Vec<String>,
}

/// What the registry index recorded of one plugin, enough to register the tool a call needs
/// without calling the plugin's `descriptors()`.
pub struct Recorded<'a> {
    /// The plugin's name (`abi_info()`), which the opened file must still report.
    pub name: &'a str,
    /// How many tools the plugin registered in the full load (`xprof plugins`'s count).
    pub tool_count: usize,
    /// The descriptor texts to register, as [`ToolEntry::descriptor`] wrote them.
    pub descriptors: Vec<&'a str>,
}

/// Why [`Registry::load_recorded`] did not build a registry. The caller falls back to the full
/// load, which reports whatever is wrong with the plugin itself.
#[derive(Debug, thiserror::Error)]
pub enum RecordedError {
    #[error("the plugin was refused: {0}")]
    Refused(String),
    #[error("the file is plugin `{found}`, not `{recorded}` as recorded")]
    OtherPlugin { recorded: String, found: String },
    #[error("a recorded descriptor does not parse: {0}")]
    Descriptor(#[from] serde_json::Error),
    #[error("a recorded descriptor was not registered (see the warnings)")]
    NotRegistered,
}

/// Why a plugin file is not used: a one-line reason and the full report.
struct Refusal {
    reason: String,
    detail: String,
}

impl Refusal {
    fn new(reason: String, detail: String) -> Self {
        Refusal { reason, detail }
    }
}

/// A plugin file that opened and passed the checks of `abi_info()`; its tools are not
/// registered yet.
struct Opened {
    module: PluginModRef,
    name: String,
    version: String,
    protocol: u64,
    capabilities: Vec<String>,
    first_party: bool,
}

/// Reduce abi_stable's multi-hundred-line layout report to one line: the `Error:` blocks
/// (kind, expected, found) with whitespace collapsed.
pub fn summarize_load_error(full: &str) -> String {
    let mut parts = Vec::new();
    let lines: Vec<&str> = full.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if let Some(kind) = l.strip_prefix("Error:") {
            let mut s = kind.trim().to_string();
            // The expected/found values follow on the next lines.
            let mut j = i + 1;
            while j < lines.len() && j <= i + 4 {
                let t = lines[j].trim();
                if t.starts_with("Error:") {
                    break;
                }
                if !t.is_empty() {
                    s.push(' ');
                    s.push_str(t);
                }
                j += 1;
            }
            parts.push(s);
            i = j;
        } else {
            i += 1;
        }
    }
    let text = if parts.is_empty() {
        full.split_whitespace().collect::<Vec<_>>().join(" ")
    } else {
        format!("ABI mismatch: {}", parts.join("; "))
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > 400 {
        let cut: String = text.chars().take(400).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// Whether abi_stable's layout check runs when a plugin file is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutCheck {
    /// Check the root module's layout against this host's (the normal case).
    Check,
    /// Skip the check: this very file (same identity) already passed it against this very
    /// executable, as recorded by the registry index (`crate::index`), which revalidates both
    /// files' identity before saying so. abi_stable documents this use of
    /// `init_root_module_with_unchecked_layout` ("a cache of which dynamic libraries have been
    /// checked for layout compatibility"). The version check still runs.
    AlreadyChecked,
}

fn load_one(path: &Path, check: LayoutCheck) -> Result<PluginModRef, (String, String)> {
    let fail = |e: abi_stable::library::LibraryError| {
        let full = e.to_string();
        (summarize_load_error(&full), full)
    };
    let header = abi_stable::library::lib_header_from_path(path).map_err(fail)?;
    match check {
        LayoutCheck::Check => header.init_root_module::<PluginModRef>().map_err(fail),
        // SAFETY: see `LayoutCheck::AlreadyChecked`: the layout of this file's root module was
        // checked against this executable's `PluginModRef`, and neither file has changed since.
        LayoutCheck::AlreadyChecked => unsafe {
            header
                .init_root_module_with_unchecked_layout::<PluginModRef>()
                .map_err(fail)
        },
    }
}

impl Registry {
    /// Discover and load every plugin. Never fails: problems end up in `refused`.
    pub fn load(discovery: &Discovery) -> Registry {
        let mut reg = Registry::default();
        for (path, origin) in discovery.plugin_files() {
            reg.add_file(&path, origin, LayoutCheck::Check);
        }
        reg
    }

    /// A registry of one plugin file whose tools are registered from `recorded` (what the
    /// registry index kept of the full load) instead of the plugin's `descriptors()`, which is
    /// most of what loading a plugin costs. The file is opened and its `abi_info()` checked as
    /// in [`Registry::load`]; it must still be the recorded plugin.
    pub fn load_recorded(
        path: &Path,
        origin: DirOrigin,
        check: LayoutCheck,
        recorded: &Recorded<'_>,
    ) -> Result<Registry, RecordedError> {
        let mut reg = Registry::default();
        let opened = reg
            .open(path, origin, check)
            .map_err(|r| RecordedError::Refused(r.reason))?;
        if opened.name != recorded.name {
            return Err(RecordedError::OtherPlugin {
                recorded: recorded.name.to_string(),
                found: opened.name,
            });
        }
        let descriptors = recorded
            .descriptors
            .iter()
            .map(|d| serde_json::from_str::<RawDescriptor>(d))
            .collect::<Result<Vec<_>, _>>()?;
        for d in descriptors {
            if !reg.add_tool(reg.plugins.len(), &opened.name, opened.first_party, d) {
                return Err(RecordedError::NotRegistered);
            }
        }
        reg.push_plugin(opened, path, origin, recorded.tool_count);
        Ok(reg)
    }

    fn refuse(&mut self, path: &Path, origin: DirOrigin, refusal: Refusal) {
        self.refused.push(Refused {
            path: path.to_path_buf(),
            origin,
            reason: refusal.reason,
            detail: refusal.detail,
        });
    }

    fn add_file(&mut self, path: &Path, origin: DirOrigin, check: LayoutCheck) {
        let opened = match self.open(path, origin, check) {
            Ok(o) => o,
            Err(r) => return self.refuse(path, origin, r),
        };
        let descriptors_text = (opened.module.descriptors())();
        let descriptors: Vec<RawDescriptor> = match serde_json::from_str(descriptors_text.as_str())
        {
            Ok(v) => v,
            Err(_) => {
                let reason = format!(
                    "plugin `{}`: descriptors() is not a JSON array",
                    opened.name
                );
                return self.refuse(path, origin, Refusal::new(reason, String::new()));
            }
        };
        let idx = self.plugins.len();
        let mut count = 0;
        for d in descriptors {
            if self.add_tool(idx, &opened.name, opened.first_party, d) {
                count += 1;
            }
        }
        self.push_plugin(opened, path, origin, count);
    }

    /// Open a plugin file and check what its `abi_info()` says (name, protocol, first-party
    /// trust, not already loaded), before any of its tools are registered.
    fn open(&self, path: &Path, origin: DirOrigin, check: LayoutCheck) -> Result<Opened, Refusal> {
        let module =
            load_one(path, check).map_err(|(reason, detail)| Refusal::new(reason, detail))?;
        let info: Value = serde_json::from_str((module.abi_info())().as_str()).map_err(|e| {
            Refusal::new(format!("abi_info() is not valid JSON: {e}"), String::new())
        })?;
        let name = info["name"].as_str().unwrap_or("").to_string();
        let version = info["version"].as_str().unwrap_or("?").to_string();
        let protocol = info["protocol"].as_u64().unwrap_or(0);
        if name.is_empty() {
            return Err(Refusal::new(
                "abi_info() has no name".into(),
                info.to_string(),
            ));
        }
        if protocol == 0 || protocol > u64::from(PROTOCOL) {
            return Err(Refusal::new(
                format!(
                    "plugin `{name}` speaks protocol {protocol}, this xprof speaks {PROTOCOL}; upgrade xprof or rebuild the plugin"
                ),
                info.to_string(),
            ));
        }
        let first_party = FIRST_PARTY.contains(&name.as_str());
        if first_party && !origin.trusted_for_first_party() {
            return Err(Refusal::new(
                format!(
                    "the name `{name}` is reserved for xprof's own plugins, which load only from the executable's directory, <prefix>/lib/xprof/plugins or --plugin-dir (found via {})",
                    origin.label()
                ),
                String::new(),
            ));
        }
        if let Some(prev) = self.plugins.iter().find(|p| p.name == name) {
            return Err(Refusal::new(
                format!(
                    "plugin `{name}` already loaded from {} (earlier directory wins)",
                    prev.path.display()
                ),
                String::new(),
            ));
        }
        let capabilities = info["capabilities"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Opened {
            module,
            name,
            version,
            protocol,
            capabilities,
            first_party,
        })
    }

    fn push_plugin(&mut self, opened: Opened, path: &Path, origin: DirOrigin, tool_count: usize) {
        self.plugins.push(LoadedPlugin {
            name: opened.name,
            version: opened.version,
            protocol: opened.protocol,
            capabilities: opened.capabilities,
            path: path.to_path_buf(),
            origin,
            first_party: opened.first_party,
            tool_count,
            module: opened.module,
        });
    }

    fn add_tool(
        &mut self,
        plugin: usize,
        plugin_name: &str,
        first_party: bool,
        d: RawDescriptor,
    ) -> bool {
        let Some(name) = d.name.clone() else {
            self.warnings.push(format!(
                "plugin `{plugin_name}`: a descriptor has no name; skipped"
            ));
            return false;
        };
        if RESERVED_NAMES.contains(&name.as_str()) {
            self.warnings.push(format!(
                "plugin `{plugin_name}`: tool name `{name}` is reserved for an xprof command; skipped"
            ));
            return false;
        }
        if let Some(existing) = self.tools.get(&name) {
            let owner_first_party = self
                .plugins
                .get(existing.plugin)
                .is_some_and(|p| p.first_party);
            if owner_first_party || !first_party {
                self.warnings.push(format!(
                    "tool `{name}` from plugin `{plugin_name}` shadowed by plugin `{}`",
                    self.plugin_name(existing.plugin)
                ));
                return false;
            }
            // A first-party plugin takes the name back from a vendor plugin loaded earlier.
            self.warnings.push(format!(
                "tool `{name}` of plugin `{}` replaced by first-party plugin `{plugin_name}`",
                self.plugin_name(existing.plugin)
            ));
        }
        let entry = ToolEntry {
            aliases: d.aliases,
            summary: d.summary,
            doc: d.doc,
            params: LazyJson::from_raw(d.params, empty_schema),
            output: d.output,
            examples: LazyJson::from_raw(d.examples, empty_list),
            plugin,
            name: name.clone(),
        };
        for a in &entry.aliases {
            if !self.tools.contains_key(a) && !RESERVED_NAMES.contains(&a.as_str()) {
                self.aliases.insert(a.clone(), name.clone());
            }
        }
        self.aliases.remove(&name);
        self.tools.insert(name, entry);
        true
    }

    fn plugin_name(&self, idx: usize) -> &str {
        self.plugins
            .get(idx)
            .map(|p| p.name.as_str())
            .unwrap_or("?")
    }

    /// A tool by canonical name or alias.
    pub fn find(&self, name: &str) -> Option<&ToolEntry> {
        self.tools
            .get(name)
            .or_else(|| self.aliases.get(name).and_then(|c| self.tools.get(c)))
    }

    /// Call a tool. `args` must already be a JSON object; `ctx` is the host context.
    pub fn invoke(
        &self,
        tool: &ToolEntry,
        args: &Map<String, Value>,
        ctx: &Value,
    ) -> Result<Envelope, ToolError> {
        self.invoke_reporting(tool, args, ctx).map_err(|f| f.error)
    }

    /// [`Registry::invoke`], a failure with the inputs read before it.
    pub fn invoke_reporting(
        &self,
        tool: &ToolEntry,
        args: &Map<String, Value>,
        ctx: &Value,
    ) -> Result<Envelope, Failure> {
        let plugin = &self.plugins[tool.plugin];
        let args_s = Value::Object(args.clone()).to_string();
        let ctx_s = ctx.to_string();
        let out = (plugin.module.invoke())(
            RStr::from(tool.name.as_str()),
            RStr::from(args_s.as_str()),
            RStr::from(ctx_s.as_str()),
        );
        match out {
            RResult::ROk(s) => {
                // The result stays text unless it needs parsing (see `ResultJson`); anything
                // unusual about the envelope takes the general path below.
                if let Ok(raw) = serde_json::from_str::<RawEnvelope>(s.as_str()) {
                    let result = raw
                        .result
                        .map_or(ResultJson::from(Value::Null), ResultJson::from_raw);
                    return Ok(Envelope {
                        content_type: raw
                            .content_type
                            .as_str()
                            .unwrap_or("application/json")
                            .to_string(),
                        inputs: raw.inputs.as_array().cloned().unwrap_or_default(),
                        result,
                    });
                }
                let v: Value = serde_json::from_str(s.as_str()).map_err(|e| {
                    ToolError::internal(format!(
                        "plugin `{}` returned an invalid envelope for `{}`: {e}",
                        plugin.name, tool.name
                    ))
                })?;
                Ok(Envelope {
                    content_type: v["content_type"]
                        .as_str()
                        .unwrap_or("application/json")
                        .to_string(),
                    inputs: v["inputs"].as_array().cloned().unwrap_or_default(),
                    result: v.get("result").cloned().unwrap_or(Value::Null).into(),
                })
            }
            RResult::RErr(s) => {
                let v: Value = serde_json::from_str(s.as_str()).unwrap_or_else(
                    |_| json!({"kind": "internal", "message": s.as_str(), "hint": null}),
                );
                Err(Failure {
                    error: ToolError {
                        kind: ErrorKind::parse(v["kind"].as_str().unwrap_or("internal")),
                        message: v["message"].as_str().unwrap_or("plugin error").to_string(),
                        hint: v["hint"].as_str().map(String::from),
                    },
                    inputs: v["inputs"].as_array().cloned().unwrap_or_default(),
                })
            }
        }
    }

    /// Name and version of the plugin that serves `tool` (part of the cache key).
    pub fn plugin_of(&self, tool: &ToolEntry) -> (&str, &str) {
        let p = &self.plugins[tool.plugin];
        (&p.name, &p.version)
    }

    /// The one-line-per-plugin report of `xprof plugins`.
    pub fn report(&self, verbose: bool) -> Value {
        json!({
            "plugins": self.plugins.iter().map(|p| json!({
                "name": p.name,
                "version": p.version,
                "path": p.path.display().to_string(),
                "found_via": p.origin.label(),
                "first_party": p.first_party,
                "protocol": p.protocol,
                "capabilities": p.capabilities,
                "tools": p.tool_count,
            })).collect::<Vec<_>>(),
            "refused": self.refused.iter().map(|r| {
                let mut o = json!({
                    "path": r.path.display().to_string(),
                    "found_via": r.origin.label(),
                    "reason": r.reason,
                });
                if verbose && !r.detail.is_empty() {
                    o["detail"] = Value::from(r.detail.clone());
                }
                o
            }).collect::<Vec<_>>(),
            "warnings": self.warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_file_names() {
        assert!(is_plugin_file("libxprof_plugin_core.so"));
        assert!(is_plugin_file("libxprof_plugin_example_vendor.so"));
        assert!(!is_plugin_file("libxprof_plugin_core-0123456789abcdef.so"));
        assert!(!is_plugin_file("libxprof_plugin_.so"));
        assert!(!is_plugin_file("libother.so"));
        assert!(!is_plugin_file("libxprof_plugin_core.so.d"));
    }

    #[test]
    fn load_errors_are_summarized_to_one_line() {
        let full = "\nCompatibility errors:\n\nError:incompatible type size\nExpected:\n    96\nFound:\n    128\n\nError:too many fields\nExpected:\n  3\nFound:\n  4\n";
        let s = summarize_load_error(full);
        assert!(!s.contains('\n'));
        assert!(
            s.starts_with(
                "ABI mismatch: incompatible type size Expected: 96 Found: 128; too many fields"
            ),
            "{s}"
        );
    }

    #[test]
    fn no_default_dirs_keeps_only_explicit() {
        let d = Discovery {
            plugin_dirs: vec![PathBuf::from("/a"), PathBuf::from("/b")],
            no_default_dirs: true,
        };
        let dirs = d.dirs();
        assert_eq!(dirs.len(), 2);
        assert!(dirs.iter().all(|(_, o)| *o == DirOrigin::Explicit));
    }

    /// Register one descriptor text in a fresh registry and return the entry.
    fn registered(text: &str) -> (Registry, ToolEntry) {
        let mut reg = Registry::default();
        let d: RawDescriptor = serde_json::from_str(text).unwrap();
        assert!(reg.add_tool(0, "p", false, d), "{text}");
        let t = reg.tools.values().next().unwrap().clone();
        (reg, t)
    }

    #[test]
    fn a_written_back_descriptor_registers_the_same_tool() {
        let texts = [
            // Escapes, whitespace inside the schema, a field the host does not read.
            r#"{"name":"t","aliases":["u","v"],"summary":"s \"q\" é","doc":"line\nline","params":{"type": "object",
                "properties":{"a":{"type":"integer","default":1.50}}},"output":"o","examples":[{"description":"e","args":{"a":2}}],"extra":1}"#,
            // Everything but the name missing.
            r#"{"name":"t"}"#,
            // Parts of the wrong kind (the host falls back for them).
            r#"{"name":"t","params":[1],"examples":{"a":1},"summary":"s"}"#,
        ];
        for text in texts {
            let (reg, t) = registered(text);
            // Before anything parsed the schema, and after.
            for _ in 0..2 {
                let written = t.descriptor().unwrap();
                let (again_reg, again) = registered(&written);
                assert_eq!(again.name, t.name);
                assert_eq!(again.aliases, t.aliases);
                assert_eq!(again_reg.aliases, reg.aliases);
                assert_eq!(again.summary, t.summary);
                assert_eq!(again.doc, t.doc);
                assert_eq!(again.output, t.output);
                assert_eq!(*again.params, *t.params, "{written}");
                assert_eq!(*again.examples, *t.examples, "{written}");
                // The plugin's own text is kept, unparsed.
                let raw = |l: &LazyJson| l.raw.as_ref().map(|r| r.get().to_string());
                if let Some(params) = raw(&t.params) {
                    assert_eq!(raw(&again.params), Some(params));
                }
            }
        }
    }

    #[test]
    fn missing_directories_load_nothing_and_fail_nothing() {
        let d = Discovery {
            plugin_dirs: vec![PathBuf::from("/nonexistent/xprof-plugins")],
            no_default_dirs: true,
        };
        let r = Registry::load(&d);
        assert!(r.plugins.is_empty() && r.refused.is_empty());
    }
}
