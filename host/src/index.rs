//! The registry index: which plugin file serves each tool, so that a tool call loads only that
//! plugin instead of all of them.
//!
//! Loading a plugin (dlopen, abi_stable's layout check, building its descriptors) is most of
//! what a small tool call costs, and a call needs one plugin. After a full load the host writes
//! the outcome — every callable name (tools and aliases) with the canonical name it resolves to
//! and the file of the plugin that won it under the precedence rules, plus the refusals — to a
//! small per-user file next to the result cache (`<cache dir>/registry/<hash of the search
//! path>.json`), guarded by a manifest (module `cache::manifest`) of the plugin directories
//! (their listings), the plugin files and the `xprof` executable itself. A tool call whose name
//! the index knows then loads that one file; if the manifest no longer matches the disk, the
//! file is missing or unreadable, the name is unknown, or the one plugin does not load or does
//! not resolve the name the same way, the host falls back to the full load (which rewrites a
//! stale index).
//!
//! The index is independent of the result cache: `--no_cache` and a TTL of 0 turn off result
//! caching, not the index. Failing to read or write it is silent (it is only an optimisation).
//! Because the recorded files passed abi_stable's layout check against this very executable
//! and neither has changed since (the manifest says so), the one plugin is opened without
//! repeating that check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::cache::{cache_dir, manifest, manifest_matches};
use crate::registry::{DirOrigin, Discovery, LayoutCheck, Registry};

/// Bump when the file's layout or meaning changes.
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct IndexFile {
    version: u32,
    /// The plugin search path this index describes (directories with their origin).
    dirs: String,
    /// The manifest of the plugin directories, plugin files and the executable.
    manifest: Value,
    /// The plugins that loaded: `[path, origin label, plugin name]`.
    plugins: Vec<(String, String, String)>,
    /// Every callable name → `(canonical tool name, index into plugins)`.
    tools: BTreeMap<String, (String, usize)>,
    /// The plugin files that were refused: `[path, one-line reason]`.
    refused: Vec<(String, String)>,
}

/// What [`load_for_tool`] found.
pub enum Lookup {
    /// The registry of the one plugin serving the tool, and the refusals (`[path, reason]`)
    /// the full load that wrote the index recorded.
    Loaded(Registry, Vec<(String, String)>),
    /// The index is valid but does not know the name (an unknown tool, or one whose plugin
    /// was refused): the full load will report it.
    Unknown,
    /// No usable index (missing, unreadable, stale), or the one plugin did not load the way
    /// the index said: load everything and rewrite the index.
    Stale,
}

fn dirs_key(disc: &Discovery) -> String {
    serde_json::to_string(
        &disc
            .dirs()
            .into_iter()
            .map(|(d, o)| (d.display().to_string(), o.label()))
            .collect::<Vec<_>>(),
    )
    .unwrap_or_default()
}

fn index_path(dirs: &str) -> Option<PathBuf> {
    let digest = format!("{:x}", Sha256::digest(dirs.as_bytes()));
    cache_dir().map(|d| d.join("registry").join(format!("{}.json", &digest[..32])))
}

/// The inputs the index depends on: each plugin directory (its listing), each plugin file in
/// it, and the executable (a new host may order or check plugins differently).
fn inputs(disc: &Discovery) -> Vec<Value> {
    let mut v = crate::cache::plugin_inputs(disc);
    if let Ok(exe) = std::env::current_exe() {
        v.push(serde_json::json!({"path": exe.display().to_string(), "kind": "file"}));
    }
    v
}

fn read(disc: &Discovery) -> Option<IndexFile> {
    let dirs = dirs_key(disc);
    let text = std::fs::read_to_string(index_path(&dirs)?).ok()?;
    let idx: IndexFile = serde_json::from_str(&text).ok()?;
    (idx.version == VERSION && idx.dirs == dirs && manifest_matches(&idx.manifest)).then_some(idx)
}

/// The index's answer for `name`: the registry of the plugin serving it, or why not.
pub fn load_for_tool(disc: &Discovery, name: &str) -> Lookup {
    let Some(idx) = read(disc) else {
        return Lookup::Stale;
    };
    let Some((canonical, plugin)) = idx.tools.get(name) else {
        return Lookup::Unknown;
    };
    let Some((path, origin, plugin_name)) = idx.plugins.get(*plugin) else {
        return Lookup::Stale;
    };
    let Some(origin) = DirOrigin::from_label(origin) else {
        return Lookup::Stale;
    };
    let reg = Registry::load_file(Path::new(path), origin, LayoutCheck::AlreadyChecked);
    // The one plugin must load as the recorded one and resolve the name to the same tool it
    // did in the full registry; anything else is left to the full load.
    let same = reg.plugins.len() == 1
        && reg.plugins[0].name == *plugin_name
        && reg.find(name).is_some_and(|t| t.name == *canonical);
    if same {
        Lookup::Loaded(reg, idx.refused)
    } else {
        Lookup::Stale
    }
}

/// Write the index of a fully loaded registry. Skipped (silently) when a plugin file changed
/// too recently to trust its timestamps, or the cache directory is not writable.
pub fn store(reg: &Registry, disc: &Discovery) {
    let _ = try_store(reg, disc);
}

fn try_store(reg: &Registry, disc: &Discovery) -> Option<()> {
    let manifest = manifest(&inputs(disc), SystemTime::now())?;
    let dirs = dirs_key(disc);
    let path = index_path(&dirs)?;
    let plugins = reg
        .plugins
        .iter()
        .map(|p| {
            (
                p.path.display().to_string(),
                p.origin.label().to_string(),
                p.name.clone(),
            )
        })
        .collect();
    let mut tools = BTreeMap::new();
    let names = reg.tools.keys().chain(reg.aliases.keys());
    for name in names {
        if let Some(t) = reg.find(name) {
            tools.insert(name.clone(), (t.name.clone(), t.plugin));
        }
    }
    let idx = IndexFile {
        version: VERSION,
        dirs,
        manifest,
        plugins,
        tools,
        refused: reg
            .refused
            .iter()
            .map(|r| (r.path.display().to_string(), r.reason.clone()))
            .collect(),
    };
    let text = serde_json::to_string(&idx).ok()?;
    let dir = path.parent()?;
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .ok()?;
    }
    // Write beside and rename over: readers see the old index or the new one, never half.
    let mut tmp = tempfile::NamedTempFile::new_in(dir).ok()?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).ok()?;
    tmp.persist(&path).ok()?;
    Some(())
}
