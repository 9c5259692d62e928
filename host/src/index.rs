//! The registry index: which plugin file serves each tool, and that tool's descriptor, so that
//! a tool call loads only that plugin and asks it for nothing but the call.
//!
//! Loading a plugin (dlopen, abi_stable's layout check, building its descriptors) is most of
//! what a small tool call costs, and a call needs one plugin and one of its tools. After a full
//! load the host writes the outcome — every callable name (tools and aliases) with the
//! canonical name it resolves to and the plugin that won it under the precedence rules; for
//! every plugin its file, name and tool count; for every tool its descriptor as registered
//! (`ToolEntry::descriptor`: the schema and examples are the plugin's own text); and the
//! refusals — to a small per-user file next to the result cache (`<cache dir>/registry/<hash of
//! the search path>.json`), guarded by a manifest (module `cache::manifest`) of the plugin
//! directories (their stamps, not their listings), the plugin files and the `xprof` executable
//! itself. A tool
//! call whose name the index knows then opens that one file, reads and checks its `abi_info()`
//! as the full load does (protocol, first-party trust), and registers the one tool from its
//! recorded descriptor, without calling `descriptors()` (which builds and serialises every
//! tool's schema and examples) or parsing the other tools' descriptors. If the manifest no
//! longer matches the disk, the file is missing or unreadable, the name is unknown, the plugin
//! is refused or is no longer the recorded one, or the recorded descriptor does not resolve the
//! name to the same tool, the host falls back to the full load (which rewrites a stale index).
//!
//! The file is a line of JSON holding the header (everything but the names and descriptors), a
//! line holding the JSON object of the names, then the descriptors, each on its own line, at
//! the byte ranges the names' entries give. A call parses the small header, picks its name's
//! entry out of the names without building the others, and parses the one descriptor.
//!
//! Writing an index removes the least recently written index files beyond the sixteen most
//! recent (one exists per plugin search path: build directories, worktrees, temporary plugin
//! directories).
//!
//! The index is independent of the result cache: `--no_cache` and a TTL of 0 turn off result
//! caching, not the index. Failing to read or write it is silent (it is only an optimisation).
//! Because the recorded files passed abi_stable's layout check against this very executable
//! and neither has changed since (the manifest says so), the one plugin is opened without
//! repeating that check; for the same reason its descriptors are those it sent then (they are
//! a function of the plugin file, which the cache's registry snapshot relies on as well).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::cache::{cache_dir, manifest, manifest_matches};
use crate::registry::{DirOrigin, Discovery, LayoutCheck, Recorded, Registry};

/// Bump when the file's layout or meaning changes.
const VERSION: u32 = 2;

/// The first line of the file.
#[derive(Serialize, Deserialize)]
struct Header {
    version: u32,
    /// The plugin search path this index describes (directories with their origin).
    dirs: String,
    /// The manifest of the plugin directories, plugin files and the executable.
    manifest: Value,
    /// The plugins that loaded.
    plugins: Vec<PluginRecord>,
    /// The plugin files that were refused: `[path, one-line reason]`.
    refused: Vec<(String, String)>,
}

/// One plugin that loaded.
#[derive(Serialize, Deserialize)]
struct PluginRecord {
    path: String,
    /// Its directory's origin ([`DirOrigin::label`]).
    origin: String,
    /// The name its `abi_info()` gave.
    name: String,
    /// How many tools it registered.
    tool_count: usize,
    /// The byte range, in the descriptors' text (after the names' line), of the descriptors
    /// of the tools it serves in the registry. A tool's descriptor must lie inside the range
    /// of the plugin the index assigns the tool to: a call registers a tool with the plugin
    /// it was recorded for, or not at all.
    descriptors: (usize, usize),
}

/// The second line of the file maps every callable name (tools and aliases) to this.
#[derive(Serialize, Deserialize)]
struct NameEntry {
    /// The canonical tool name it resolves to.
    tool: String,
    /// Index into [`Header::plugins`]: the plugin serving it.
    plugin: usize,
    /// The byte range of the tool's descriptor in the descriptors' text.
    descriptor: (usize, usize),
}

/// A read index: the header, the bytes of the file's first two lines (the names' line is
/// `names`), and the open file, whose descriptors' text starts at offset `body`. The
/// descriptors (most of the file) are not read: a call reads the one it needs.
struct IndexFile {
    header: Header,
    head: Vec<u8>,
    names: std::ops::Range<usize>,
    file: std::fs::File,
    body: u64,
}

impl IndexFile {
    /// The entry of `name`, if the index lists it.
    fn entry(&self, name: &str) -> Result<Option<NameEntry>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(&self.head[self.names.clone()]);
        let entry = Pick {
            name,
            entry: std::marker::PhantomData,
        }
        .deserialize(&mut de)?;
        de.end()?;
        Ok(entry)
    }

    /// The descriptor text at `start..end` when that lies inside `within` (a plugin's range)
    /// and holds UTF-8.
    fn descriptor(&self, (start, end): (usize, usize), within: (usize, usize)) -> Option<String> {
        if start < within.0 || end > within.1 || start > end {
            return None;
        }
        let mut text = vec![0; end - start];
        let at = self.body.checked_add(u64::try_from(start).ok()?)?;
        std::os::unix::fs::FileExt::read_exact_at(&self.file, &mut text, at).ok()?;
        String::from_utf8(text).ok()
    }
}

/// What [`load_for_tool`] found.
pub enum Lookup {
    /// The registry of the one plugin serving the tool (with that tool only), and the refusals
    /// (`[path, reason]`) the full load that wrote the index recorded.
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

/// The inputs the index depends on: each plugin directory (its entries), each plugin file in
/// it, and the executable (a new host may order or check plugins differently).
fn inputs(disc: &Discovery) -> Vec<Value> {
    let mut v = crate::cache::plugin_inputs(disc);
    if let Ok(exe) = std::env::current_exe() {
        v.push(serde_json::json!({"path": exe.display().to_string(), "kind": "file"}));
    }
    v
}

/// The line starting at `from` (without its newline) and where the next one starts.
fn line(bytes: &[u8], from: usize) -> Option<(std::ops::Range<usize>, usize)> {
    let len = bytes.get(from..)?.iter().position(|&b| b == b'\n')?;
    Some((from..from + len, from + len + 1))
}

fn read(disc: &Discovery) -> Option<IndexFile> {
    let dirs = dirs_key(disc);
    let mut file = std::fs::File::open(index_path(&dirs)?).ok()?;
    // Only the first two lines are read (a few KB; the descriptors after them are most of the
    // file): every byte read lands in fresh memory, and page faults are what a small call
    // spends most on. Only the header is parsed here; the names stay bytes until looked up.
    let mut head = Vec::new();
    let (header, names, body) = loop {
        let had = head.len();
        let want = (had * 2).max(16 * 1024);
        head.resize(want, 0);
        let n = std::io::Read::read(&mut file, &mut head[had..]).ok()?;
        head.truncate(had + n);
        let lines = line(&head, 0).and_then(|(header, next)| {
            let (names, body) = line(&head, next)?;
            Some((header, names, body))
        });
        match lines {
            Some(found) => break found,
            None if n == 0 => return None,
            None => continue,
        }
    };
    let header: Header = serde_json::from_slice(&head[header]).ok()?;
    let ok = header.version == VERSION && header.dirs == dirs && manifest_matches(&header.manifest);
    ok.then_some(IndexFile {
        header,
        head,
        names,
        file,
        body: u64::try_from(body).ok()?,
    })
}

/// The index's answer for `name`: the registry of the plugin serving it, or why not.
pub fn load_for_tool(disc: &Discovery, name: &str) -> Lookup {
    let Some(idx) = read(disc) else {
        return Lookup::Stale;
    };
    let entry = match idx.entry(name) {
        Ok(Some(entry)) => entry,
        Ok(None) => return Lookup::Unknown,
        Err(_) => return Lookup::Stale,
    };
    let Some(record) = idx.header.plugins.get(entry.plugin) else {
        return Lookup::Stale;
    };
    let Some(origin) = DirOrigin::from_label(&record.origin) else {
        return Lookup::Stale;
    };
    let Some(descriptor) = idx.descriptor(entry.descriptor, record.descriptors) else {
        return Lookup::Stale;
    };
    let recorded = Recorded {
        name: &record.name,
        tool_count: record.tool_count,
        descriptors: vec![descriptor.as_str()],
    };
    let Ok(reg) = Registry::load_recorded(
        Path::new(&record.path),
        origin,
        LayoutCheck::AlreadyChecked,
        &recorded,
    ) else {
        return Lookup::Stale;
    };
    // The recorded descriptor must resolve the name to the same tool the full registry did;
    // anything else is left to the full load.
    if reg.find(name).is_some_and(|t| t.name == entry.tool) {
        Lookup::Loaded(reg, idx.header.refused)
    } else {
        Lookup::Stale
    }
}

/// Reads a JSON object keeping only the value under one key (the first, should it repeat),
/// so a lookup allocates nothing for the other entries.
struct Pick<'n, T> {
    name: &'n str,
    entry: std::marker::PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Pick<'_, T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Pick<'_, T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(hit) = map.next_key_seed(KeyIs(self.name))? {
            if hit && found.is_none() {
                found = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Reads a string, saying whether it is the given one (without allocating it).
struct KeyIs<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
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
    // The descriptors grouped by plugin, each on its own line.
    let mut descriptors = String::new();
    let mut ranges = BTreeMap::new();
    let mut plugins = Vec::with_capacity(reg.plugins.len());
    for (i, p) in reg.plugins.iter().enumerate() {
        let first = descriptors.len();
        for t in reg.tools.values().filter(|t| t.plugin == i) {
            let start = descriptors.len();
            descriptors.push_str(&t.descriptor().ok()?);
            ranges.insert(t.name.as_str(), (start, descriptors.len()));
            descriptors.push('\n');
        }
        plugins.push(PluginRecord {
            path: p.path.display().to_string(),
            origin: p.origin.label().to_string(),
            name: p.name.clone(),
            tool_count: p.tool_count,
            descriptors: (first, descriptors.len()),
        });
    }
    let mut names = BTreeMap::new();
    for name in reg.tools.keys().chain(reg.aliases.keys()) {
        if let Some(t) = reg.find(name)
            && let Some(&descriptor) = ranges.get(t.name.as_str())
        {
            let entry = NameEntry {
                tool: t.name.clone(),
                plugin: t.plugin,
                descriptor,
            };
            names.insert(name.as_str(), entry);
        }
    }
    let header = Header {
        version: VERSION,
        dirs,
        manifest,
        plugins,
        refused: reg
            .refused
            .iter()
            .map(|r| (r.path.display().to_string(), r.reason.clone()))
            .collect(),
    };
    // serde_json escapes newlines inside strings, so each JSON text stays on its line.
    let mut text = serde_json::to_string(&header).ok()?;
    text.push('\n');
    text.push_str(&serde_json::to_string(&names).ok()?);
    text.push('\n');
    text.push_str(&descriptors);
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
    prune(dir, &path);
    Some(())
}

/// Index files kept per user. Each plugin search path (a build directory, a worktree, a test's
/// temporary plugin directory) gets its own file of ~100 KB, and nothing else removes them.
const MAX_INDEXES: usize = 16;

/// Removes the least recently written index files beyond [`MAX_INDEXES`], never `keep` (the
/// one just written) and nothing whose name is not an index's. A removed index that was still
/// in use is rebuilt by its next call's full load.
fn prune(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut indexes: Vec<(SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| is_index_name(&e.file_name().to_string_lossy()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .filter(|(_, p)| p != keep)
        .collect();
    let excess = (indexes.len() + 1).saturating_sub(MAX_INDEXES);
    if excess == 0 {
        return;
    }
    indexes.sort();
    for (_, p) in indexes.into_iter().take(excess) {
        let _ = std::fs::remove_file(p);
    }
}

/// `<32 hex digits>.json`, as [`index_path`] names them.
fn is_index_name(name: &str) -> bool {
    name.strip_suffix(".json")
        .is_some_and(|stem| stem.len() == 32 && stem.bytes().all(|b| b.is_ascii_hexdigit()))
}
