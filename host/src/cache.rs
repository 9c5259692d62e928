//! The per-user result cache, shared by the CLI and the MCP server.
//!
//! One SQLite file (`$XPROF_CACHE_DIR/cache.sqlite`, else `$XDG_CACHE_HOME/xprof/cache.sqlite`,
//! else `~/.cache/xprof/cache.sqlite`) maps a key — tool, normalised arguments, plugin name and
//! version — to the tool's envelope plus a manifest of its inputs: size, mtime, ctime, inode and
//! device of every file the call read and a digest of the listing of every directory it scanned
//! (the envelope's `inputs`). A stored result is served only while that manifest still matches
//! the disk and the entry is younger than the TTL, so an answer is never stale.
//!
//! Policy decisions (documented in docs/MCP.md, "Result cache"):
//! - Errors are never cached.
//! - A result whose `inputs` list is empty is not cached: there is nothing to revalidate, and we
//!   cannot tell "read nothing" from "forgot to record"; such tools are cheap anyway.
//! - A result is not stored when any input changed within [`RACY_MARGIN`] of the call's start
//!   (the "racy git" problem): the tool may have read the old bytes while the manifest records
//!   the new ones. The next call recomputes and stores.
//! - Results that the CLI later spills to a file (`written_to_file`) are cached in full; the
//!   spill happens at render time, after the cache.
//! - Any failure of the cache itself (unwritable directory, corrupt file, locked database) warns
//!   once per process on stderr and the call runs uncached; a corrupt file is deleted and rebuilt.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use xprof_plugin_api::ToolError;

use crate::cli::GlobalOpts;
use crate::registry::{Envelope, Registry, ToolEntry};

/// Default time to live of an entry.
pub const DEFAULT_TTL_SECS: u64 = 3600;

/// An input changed less than this before the call started is "racy": the call may have read
/// bytes older than what the manifest would record, so the result is not stored. Linux stamps
/// files from a coarse clock that lags the real one by at most a tick (1-10 ms), so a change
/// made after the call started can carry a stamp slightly before it; 100 ms covers that.
pub const RACY_MARGIN: Duration = Duration::from_millis(100);

/// The margin on filesystems that keep whole seconds only (ctime without nanoseconds: FAT,
/// ext3, some network filesystems), where a later change can carry a stamp up to 2 s earlier.
pub const RACY_MARGIN_COARSE: Duration = Duration::from_secs(2);

/// Bump when the key or the stored layout changes: old entries then simply stop matching.
const SCHEMA_VERSION: i64 = 3;

/// Entries untouched for this long are dropped when something new is stored, so the file does
/// not grow without bound between `xprof cache clear`s.
const PURGE_AFTER_SECS: i64 = 30 * 24 * 3600;

const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

static WARNED: AtomicBool = AtomicBool::new(false);

/// Warn once per process: a broken cache must not drown every call's stderr.
fn warn_once(message: String, hint: &str) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "{}",
            json!({"warning": {"kind": "cache", "message": message, "hint": hint}})
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Locations and settings

/// The directory holding `cache.sqlite`.
pub fn cache_dir() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(d) = std::env::var_os("XPROF_CACHE_DIR").filter(|v| !v.is_empty()) {
        return Some(std::path::absolute(PathBuf::from(d)).ok()?);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .and_then(abs)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("xprof"))
}

pub fn db_path() -> Option<PathBuf> {
    cache_dir().map(|d| d.join("cache.sqlite"))
}

/// `~/.config/xprof/config.toml` (`$XDG_CONFIG_HOME` respected).
pub fn config_path() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("xprof/config.toml"))
}

/// Parse a TTL: whole seconds, optionally with a unit suffix `s`, `m`, `h` or `d`.
pub fn parse_ttl(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 's') => (&s[..i], 1),
        (i, 'm') => (&s[..i], 60),
        (i, 'h') => (&s[..i], 3600),
        (i, 'd') => (&s[..i], 86400),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// The TTL in force and where it came from: `--cache_ttl`, else `$XPROF_CACHE_TTL`, else
/// `cache_ttl` in the config file, else one hour. A bad value is an error naming its source.
pub fn ttl(opts: &GlobalOpts) -> Result<(u64, String), ToolError> {
    let bad = |what: &str, v: &str| {
        ToolError::invalid(format!("invalid cache TTL {v:?} from {what}")).with_hint(
            "give whole seconds, optionally with a unit: 3600, 90s, 30m, 1h, 2d (0 disables the cache)",
        )
    };
    if let Some(v) = &opts.cache_ttl {
        return parse_ttl(v)
            .map(|t| (t, "--cache_ttl".into()))
            .ok_or_else(|| bad("--cache_ttl", v));
    }
    if let Ok(v) = std::env::var("XPROF_CACHE_TTL")
        && !v.trim().is_empty()
    {
        return parse_ttl(&v)
            .map(|t| (t, "XPROF_CACHE_TTL".into()))
            .ok_or_else(|| bad("XPROF_CACHE_TTL", &v));
    }
    if let Some(path) = config_path()
        && let Ok(text) = fs::read_to_string(&path)
    {
        let src = path.display().to_string();
        let table: toml::Table = toml::from_str(&text).map_err(|e| {
            ToolError::invalid(format!("config file {src} is not valid TOML: {e}"))
                .with_hint("fix or remove the file; it may set `cache_ttl = 3600`")
        })?;
        match table.get("cache_ttl") {
            None => {}
            Some(toml::Value::Integer(i)) if *i >= 0 => return Ok((*i as u64, src)),
            Some(toml::Value::String(s)) => {
                return parse_ttl(s)
                    .map(|t| (t, src.clone()))
                    .ok_or_else(|| bad(&src, s));
            }
            Some(other) => return Err(bad(&format!("`cache_ttl` in {src}"), &other.to_string())),
        }
    }
    Ok((DEFAULT_TTL_SECS, "default".into()))
}

// ---------------------------------------------------------------------------------------------
// Keys

/// `p` made absolute against the working directory, with `.` and `..` resolved lexically
/// (symlinks are left alone: the manifest revalidates what they point to).
pub fn absolute_lexical(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Objects with sorted keys all the way down (the workspace enables serde_json's
/// `preserve_order`, so insertion order would otherwise leak into the key).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let b: BTreeMap<&String, Value> = m.iter().map(|(k, x)| (k, sorted(x))).collect();
            Value::Object(b.into_iter().map(|(k, x)| (k.clone(), x)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The normalised arguments: nulls dropped, schema defaults filled in, path parameters made
/// absolute, and the environment defaults a tool would fall back to (`x-env`) made explicit. When
/// no path reaches the tool at all it may fall back to the working directory, which then joins
/// the key.
pub fn normalised_args(tool: &ToolEntry, args: &Map<String, Value>) -> Value {
    let props = tool.properties();
    let mut out = Map::new();
    let mut any_path = false;
    for (k, v) in args {
        if v.is_null() {
            continue;
        }
        let is_path = props
            .get(k)
            .is_some_and(|s| s["format"].as_str() == Some("path"));
        match v {
            Value::String(s) if is_path && !s.is_empty() => {
                any_path = true;
                out.insert(
                    k.clone(),
                    Value::from(absolute_lexical(Path::new(s)).display().to_string()),
                );
            }
            other => {
                out.insert(k.clone(), other.clone());
            }
        }
    }
    for (k, s) in &props {
        if out.contains_key(k) {
            continue;
        }
        if let Some(d) = s.get("default").filter(|d| !d.is_null()) {
            out.insert(k.clone(), d.clone());
        } else if let Some(var) = s["x-env"].as_str()
            && let Some(val) = std::env::var_os(var).filter(|v| !v.is_empty())
        {
            let val = if s["format"].as_str() == Some("path") {
                any_path = true;
                absolute_lexical(Path::new(&val)).display().to_string()
            } else {
                val.to_string_lossy().into_owned()
            };
            out.insert(format!("${var}"), Value::from(val));
        }
    }
    if !any_path && let Ok(cwd) = std::env::current_dir() {
        out.insert("$cwd".into(), Value::from(cwd.display().to_string()));
    }
    sorted(&Value::Object(out))
}

/// The cache key: a digest of tool, normalised arguments, plugin name and version.
pub fn key(reg: &Registry, tool: &ToolEntry, args: &Map<String, Value>) -> (String, Value) {
    let (plugin, version) = reg.plugin_of(tool);
    key_for(plugin, version, &plugin_build(reg, tool), tool, args)
}

/// The identity of the plugin file that serves `tool` (size, mtime, inode). A rebuilt plugin
/// keeps its version during development; its old results must not be served.
fn plugin_build(reg: &Registry, tool: &ToolEntry) -> String {
    reg.plugins
        .get(tool.plugin)
        .and_then(|p| fs::metadata(&p.path).ok())
        .map(|m| format!("{}-{}-{}", m.size(), ns(m.mtime(), m.mtime_nsec()), m.ino()))
        .unwrap_or_default()
}

fn key_for(
    plugin: &str,
    version: &str,
    build: &str,
    tool: &ToolEntry,
    args: &Map<String, Value>,
) -> (String, Value) {
    let material = json!({
        "schema": SCHEMA_VERSION,
        "tool": tool.name,
        "args": normalised_args(tool, args),
        "plugin": plugin,
        "plugin_version": version,
        "plugin_build": build,
    });
    let digest = format!("{:x}", Sha256::digest(material.to_string().as_bytes()));
    (digest, material)
}

// ---------------------------------------------------------------------------------------------
// Manifests

fn ns(secs: i64, nsec: i64) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nsec)
}

/// The state of one input now: `None` if it does not exist (a tool may probe for a file; its
/// later appearance must invalidate the result), else identity and timestamps, plus a digest of
/// the sorted entry names for a directory.
fn input_state(path: &Path, kind: &str) -> Option<(Value, i128, bool)> {
    let m = fs::metadata(path).ok()?;
    let changed = ns(m.mtime(), m.mtime_nsec()).max(ns(m.ctime(), m.ctime_nsec()));
    // The kernel sets ctime itself, so whole seconds there mean a whole-second filesystem.
    let coarse = m.ctime_nsec() == 0;
    let mut st = json!({
        "ino": m.ino(),
        "dev": m.dev(),
        "mtime_ns": ns(m.mtime(), m.mtime_nsec()).to_string(),
        "ctime_ns": ns(m.ctime(), m.ctime_nsec()).to_string(),
    });
    if kind == "dir" {
        let mut names: Vec<String> = fs::read_dir(path)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        let mut h = Sha256::new();
        for n in &names {
            h.update(n.as_bytes());
            h.update([0]);
        }
        st["listing"] = Value::from(format!("{:x}", h.finalize()));
    } else {
        st["size"] = Value::from(m.size());
    }
    Some((st, changed, coarse))
}

/// The manifest of `inputs` (the envelope's list), or `None` when the result must not be
/// stored: no inputs, or an input changed too close to `started`.
pub fn manifest(inputs: &[Value], started: SystemTime) -> Option<Value> {
    if inputs.is_empty() {
        return None;
    }
    let since_epoch = started.duration_since(UNIX_EPOCH).ok()?;
    let racy_after = |margin: Duration| {
        i128::try_from(since_epoch.saturating_sub(margin).as_nanos()).unwrap_or(i128::MAX)
    };
    let mut out = Vec::with_capacity(inputs.len());
    for i in inputs {
        let path = i["path"].as_str()?;
        let kind = if i["kind"].as_str() == Some("dir") {
            "dir"
        } else {
            "file"
        };
        let state = match input_state(Path::new(path), kind) {
            Some((st, changed, coarse)) => {
                let margin = if coarse {
                    RACY_MARGIN_COARSE
                } else {
                    RACY_MARGIN
                };
                if changed >= racy_after(margin) {
                    return None;
                }
                st
            }
            None => Value::Null,
        };
        out.push(json!({"path": path, "kind": kind, "state": state}));
    }
    Some(Value::Array(out))
}

/// Does the stored manifest still describe the disk?
pub fn manifest_matches(stored: &Value) -> bool {
    let Some(items) = stored.as_array() else {
        return false;
    };
    items.iter().all(|i| {
        let (Some(path), Some(kind)) = (i["path"].as_str(), i["kind"].as_str()) else {
            return false;
        };
        let now = input_state(Path::new(path), kind)
            .map(|(s, _, _)| s)
            .unwrap_or(Value::Null);
        now == i["state"]
    })
}

// ---------------------------------------------------------------------------------------------
// The database

pub struct Db {
    conn: Connection,
    pub path: PathBuf,
}

fn is_corrupt(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode as C;
    matches!(
        e.sqlite_error_code(),
        Some(C::DatabaseCorrupt | C::NotADatabase)
    )
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn remove_db_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = fs::remove_file(PathBuf::from(p));
    }
}

impl Db {
    fn connect(path: &Path) -> rusqlite::Result<Connection> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Keep the WAL file between processes (each CLI call is usually the last connection
        // to close): deleting and recreating it on every call costs syscalls and fsyncs.
        let mut persist = 1;
        conn.file_control(
            Some(rusqlite::MAIN_DB),
            rusqlite::FileControl::PersistWal(&mut persist),
        )?;
        // WAL lets readers run beside one writer across processes; the mode is stored in the
        // file, so only the first opener pays for switching (and it needs the write lock).
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))?;
        }
        // A lost write only loses a cache entry; skip the per-commit fsync.
        conn.execute_batch("PRAGMA synchronous=NORMAL")?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version != SCHEMA_VERSION {
            conn.execute_batch(&format!(
                "BEGIN IMMEDIATE;
                 DROP TABLE IF EXISTS entries;
                 CREATE TABLE entries (
                     key TEXT PRIMARY KEY,
                     tool TEXT NOT NULL,
                     plugin TEXT NOT NULL,
                     plugin_version TEXT NOT NULL,
                     key_material TEXT NOT NULL,
                     result TEXT NOT NULL,
                     content_type TEXT NOT NULL,
                     inputs TEXT NOT NULL,
                     manifest TEXT NOT NULL,
                     created_at INTEGER NOT NULL
                 );
                 CREATE INDEX entries_created ON entries(created_at);
                 DROP TABLE IF EXISTS registry;
                 CREATE TABLE registry (
                     dirs TEXT PRIMARY KEY,
                     manifest TEXT NOT NULL
                 );
                 DROP TABLE IF EXISTS registry_tools;
                 CREATE TABLE registry_tools (
                     dirs TEXT NOT NULL,
                     name TEXT NOT NULL,
                     entry TEXT NOT NULL,
                     PRIMARY KEY (dirs, name)
                 );
                 PRAGMA user_version = {SCHEMA_VERSION};
                 COMMIT;"
            ))?;
        }
        Ok(conn)
    }

    /// Open (creating it if needed) the cache. A corrupt file is deleted and rebuilt; any other
    /// failure warns once and returns `None` so the call runs uncached.
    pub fn open() -> Option<Db> {
        let Some(dir) = cache_dir() else {
            warn_once(
                "no cache directory: neither XPROF_CACHE_DIR, XDG_CACHE_HOME nor HOME is set"
                    .into(),
                "set XPROF_CACHE_DIR, or pass --no_cache",
            );
            return None;
        };
        Self::open_in(&dir)
    }

    /// Open the cache in `dir` (created private to the user: results describe their files).
    pub fn open_in(dir: &Path) -> Option<Db> {
        use std::os::unix::fs::DirBuilderExt;
        if let Err(e) = fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            warn_once(
                format!(
                    "result cache disabled: cannot create {}: {e}",
                    dir.display()
                ),
                "set XPROF_CACHE_DIR to a writable directory, or pass --no_cache",
            );
            return None;
        }
        let path = dir.join("cache.sqlite");
        match Self::connect(&path) {
            Ok(conn) => Some(Db { conn, path }),
            Err(e) if is_corrupt(&e) => Self::rebuild(&path, &e),
            Err(e) => {
                warn_once(
                    format!("result cache disabled: cannot open {}: {e}", path.display()),
                    "check the file's permissions, or pass --no_cache",
                );
                None
            }
        }
    }

    fn rebuild(path: &Path, e: &rusqlite::Error) -> Option<Db> {
        warn_once(
            format!(
                "result cache {} is corrupt ({e}); rebuilding it",
                path.display()
            ),
            "nothing to do: the cache only holds results that can be recomputed",
        );
        remove_db_files(path);
        match Self::connect(path) {
            Ok(conn) => Some(Db {
                conn,
                path: path.to_path_buf(),
            }),
            Err(e) => {
                warn_once(
                    format!(
                        "result cache disabled: cannot rebuild {}: {e}",
                        path.display()
                    ),
                    "remove the file by hand, or pass --no_cache",
                );
                None
            }
        }
    }

    /// A fresh, still valid entry.
    pub fn lookup(&mut self, key: &str, ttl: u64) -> rusqlite::Result<Option<Envelope>> {
        let row = self
            .conn
            .query_row(
                "SELECT result, content_type, inputs, manifest, created_at FROM entries WHERE key = ?1",
                params![key],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, i64>(4)?,
                    ))
                },
            )
            .optional()?;
        let Some((result, content_type, inputs, manifest, created_at)) = row else {
            return Ok(None);
        };
        if now_secs().saturating_sub(created_at) >= ttl as i64 {
            return Ok(None);
        }
        let manifest: Value = serde_json::from_str(&manifest).unwrap_or(Value::Null);
        if !manifest_matches(&manifest) {
            return Ok(None);
        }
        let (Ok(result), Ok(Value::Array(inputs))) = (
            serde_json::from_str::<Value>(&result),
            serde_json::from_str::<Value>(&inputs),
        ) else {
            return Ok(None);
        };
        // A hit writes nothing: a write per hit would cost more than the rest of the hit.
        Ok(Some(Envelope {
            result,
            content_type,
            inputs,
        }))
    }

    pub fn store(
        &mut self,
        key: &str,
        material: &Value,
        env: &Envelope,
        manifest: &Value,
    ) -> rusqlite::Result<()> {
        let now = now_secs();
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO entries
               (key, tool, plugin, plugin_version, key_material, result, content_type, inputs,
                manifest, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                key,
                material["tool"].as_str().unwrap_or(""),
                material["plugin"].as_str().unwrap_or(""),
                material["plugin_version"].as_str().unwrap_or(""),
                material.to_string(),
                env.result.to_string(),
                env.content_type,
                Value::Array(env.inputs.clone()).to_string(),
                manifest.to_string(),
                now,
            ],
        )?;
        tx.execute(
            "DELETE FROM entries WHERE created_at < ?1",
            params![now - PURGE_AFTER_SECS],
        )?;
        tx.commit()?;
        // Fold the WAL back into the database and empty it now, while we pay for a miss
        // anyway: otherwise every later process (hits included) would replay and checkpoint
        // it on open and close. Busy readers just make this a partial checkpoint.
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        Ok(())
    }

    pub fn stats(&self) -> rusqlite::Result<Value> {
        let (entries, bytes, oldest, newest): (i64, i64, Option<i64>, Option<i64>) =
            self.conn.query_row(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(result)), 0),
                        MIN(created_at), MAX(created_at) FROM entries",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?;
        let mut stmt = self.conn.prepare(
            "SELECT tool, plugin, COUNT(*) FROM entries GROUP BY tool, plugin ORDER BY tool",
        )?;
        let tools: Vec<Value> = stmt
            .query_map([], |r| {
                Ok(json!({
                    "tool": r.get::<_, String>(0)?,
                    "plugin": r.get::<_, String>(1)?,
                    "entries": r.get::<_, i64>(2)?,
                }))
            })?
            .collect::<Result<_, _>>()?;
        Ok(json!({
            "entries": entries,
            "result_bytes": bytes,
            "oldest_unix": oldest,
            "newest_unix": newest,
            "tools": tools,
        }))
    }

    pub fn clear(&mut self) -> rusqlite::Result<usize> {
        let n = self.conn.execute("DELETE FROM entries", [])?;
        self.conn
            .execute_batch("DELETE FROM registry; DELETE FROM registry_tools;")?;
        // Give the space back; harmless if another process holds the file open.
        let _ = self
            .conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE); VACUUM;");
        Ok(n)
    }

    /// Run `f`; on a corruption error rebuild the file and report `None`. Other database errors
    /// (e.g. a lock held beyond the busy timeout) warn and report `None`.
    fn guard<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Db) -> rusqlite::Result<T>,
    ) -> Option<T> {
        match f(self) {
            Ok(v) => Some(v),
            Err(e) if is_corrupt(&e) => {
                if let Some(db) = Self::rebuild(&self.path.clone(), &e) {
                    *self = db;
                }
                None
            }
            Err(e) => {
                warn_once(
                    format!("result cache {what} failed on {}: {e}", self.path.display()),
                    "the call ran uncached; pass --no_cache to silence this",
                );
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Calls

/// `XPROF_CACHE_TRACE=1`: one JSON line per cached call on stderr saying what the cache did
/// (`hit`, `miss`, `stored`, `not_stored` with a reason, `off`). For tests and debugging.
fn trace(tool: &str, event: &str, reason: Option<&str>) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("XPROF_CACHE_TRACE").is_some_and(|v| v == "1")) {
        eprintln!(
            "{}",
            json!({"cache": {"tool": tool, "event": event, "reason": reason}})
        );
    }
}

/// Run a tool through the cache: serve a valid entry, else run `run` and store its result.
pub fn cached_call(
    reg: &Registry,
    tool: &ToolEntry,
    args: &Map<String, Value>,
    opts: &GlobalOpts,
    run: impl FnOnce() -> Result<Envelope, ToolError>,
) -> Result<Envelope, ToolError> {
    let name = tool.name.as_str();
    if opts.no_cache {
        trace(name, "off", Some("--no_cache"));
        return run();
    }
    let (ttl, _) = ttl(opts)?;
    if ttl == 0 {
        trace(name, "off", Some("ttl 0"));
        return run();
    }
    let Some(mut db) = Db::open() else {
        trace(name, "off", Some("cache unavailable"));
        return run();
    };
    let (key, material) = key(reg, tool, args);
    if opts.bypass_cache {
        trace(name, "miss", Some("--bypass_cache"));
    } else if let Some(Some(env)) = db.guard("lookup", |db| db.lookup(&key, ttl)) {
        trace(name, "hit", None);
        return Ok(env);
    } else {
        trace(name, "miss", None);
    }
    let started = SystemTime::now();
    let env = run()?;
    match manifest(&env.inputs, started) {
        Some(m) => match db.guard("store", |db| db.store(&key, &material, &env, &m)) {
            Some(()) => trace(name, "stored", None),
            None => trace(name, "not_stored", Some("database error")),
        },
        None if env.inputs.is_empty() => trace(name, "not_stored", Some("no inputs")),
        None => trace(
            name,
            "not_stored",
            Some("an input changed too recently to trust its timestamps"),
        ),
    }
    Ok(env)
}

fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

/// `xprof cache stats|clear`.
pub fn command(args: &[String], g: &GlobalOpts) -> i32 {
    let usage = || {
        ToolError::usage(match args.first() {
            Some(a) => format!("unknown cache command `{a}`"),
            None => "missing cache command".to_string(),
        })
        .with_hint("use `xprof cache stats` or `xprof cache clear`")
    };
    let sub = match args {
        [s] if s == "stats" || s == "clear" => s.as_str(),
        [s, extra, ..] if s == "stats" || s == "clear" => {
            return crate::output::print_error(
                None,
                &ToolError::usage(format!(
                    "unexpected argument `{extra}` to `xprof cache {s}`"
                ))
                .with_hint("`xprof cache stats` and `xprof cache clear` take no arguments"),
            );
        }
        _ => return crate::output::print_error(None, &usage()),
    };
    let (ttl, ttl_source) = match ttl(g) {
        Ok(t) => t,
        Err(e) => return crate::output::print_error(None, &e),
    };
    let Some(path) = db_path() else {
        return crate::output::print_error(
            None,
            &ToolError::path(
                "no cache directory: neither XPROF_CACHE_DIR, XDG_CACHE_HOME nor HOME is set",
            )
            .with_hint("set XPROF_CACHE_DIR"),
        );
    };
    let base = json!({
        "path": path.display().to_string(),
        "ttl_seconds": ttl,
        "ttl_source": ttl_source,
    });
    if sub == "stats" && !path.exists() {
        let mut v = base;
        v["exists"] = Value::Bool(false);
        v["entries"] = Value::from(0);
        print_json(&v);
        return 0;
    }
    let Some(mut db) = Db::open() else {
        return crate::output::print_error(
            None,
            &ToolError::path(format!(
                "cannot open the result cache at {}",
                path.display()
            ))
            .with_hint("set XPROF_CACHE_DIR to a writable directory"),
        );
    };
    let mut v = base;
    let outcome = if sub == "stats" {
        db.guard("stats", |db| db.stats()).map(|s| {
            v["exists"] = Value::Bool(true);
            v["file_bytes"] = Value::from(fs::metadata(&path).map(|m| m.len()).unwrap_or(0));
            if let Value::Object(m) = s {
                v.as_object_mut().map(|o| o.extend(m));
            }
        })
    } else {
        db.guard("clear", |db| db.clear()).map(|n| {
            v["cleared"] = Value::from(n);
        })
    };
    match outcome {
        Some(()) => {
            print_json(&v);
            0
        }
        None => crate::output::print_error(
            None,
            &ToolError::internal(format!("`xprof cache {sub}` failed on {}", path.display()))
                .with_hint("the warning above says why; deleting the file is always safe"),
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Fast path: a hit without loading plugins
//
// Loading the plugins (dlopen plus abi_stable's layout checks) costs more than the whole cache
// hit. So the registry's outcome — every tool's descriptor with its plugin's name and version —
// is kept beside the results, keyed by the plugin search path and guarded by a manifest of the
// plugin directories and files like any other entry. While it matches, a CLI call is parsed,
// keyed and served from the snapshot; anything else (a miss, a parse error, help, an unknown
// tool) falls through to the normal path, which loads the plugins and reports errors itself.

/// What [`fast_path`] did.
pub enum Fast {
    /// Served from the cache; the process exit code.
    Hit(i32),
    /// Not served. `remember`: the registry snapshot is missing or stale, so store one after
    /// the plugins load ([`remember_registry`]).
    Miss { remember: bool },
}

fn dirs_key(disc: &crate::registry::Discovery) -> String {
    Value::Array(
        disc.dirs()
            .into_iter()
            .map(|(d, o)| json!([d.display().to_string(), o.label()]))
            .collect(),
    )
    .to_string()
}

/// The plugin directories and the plugin files in them, as cache inputs.
fn plugin_inputs(disc: &crate::registry::Discovery) -> Vec<Value> {
    let mut inputs = Vec::new();
    for (dir, _) in disc.dirs() {
        inputs.push(json!({"path": dir.display().to_string(), "kind": "dir"}));
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(crate::registry::is_plugin_file)
            })
            .collect();
        files.sort();
        for f in files {
            inputs.push(json!({"path": f.display().to_string(), "kind": "file"}));
        }
    }
    inputs
}

fn entry_json(reg: &Registry, t: &ToolEntry) -> Value {
    let (plugin, version) = reg.plugin_of(t);
    json!({
        "name": t.name, "aliases": t.aliases, "summary": t.summary, "doc": t.doc,
        "params": t.params, "output": t.output, "examples": t.examples,
        "plugin": plugin, "plugin_version": version, "plugin_build": plugin_build(reg, t),
    })
}

/// A snapshot entry: the tool, and its plugin's name, version and build.
type SnapshotEntry = (ToolEntry, String, String, String);

fn entry_from_json(v: &Value) -> Option<SnapshotEntry> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    Some((
        ToolEntry {
            name: v["name"].as_str()?.to_string(),
            aliases: strings(&v["aliases"]),
            summary: v["summary"].as_str().unwrap_or_default().to_string(),
            doc: v["doc"].as_str().unwrap_or_default().to_string(),
            params: v["params"].clone(),
            output: v["output"].as_str().unwrap_or_default().to_string(),
            examples: v["examples"].as_array().cloned().unwrap_or_default(),
            plugin: 0,
        },
        v["plugin"].as_str()?.to_string(),
        v["plugin_version"].as_str()?.to_string(),
        v["plugin_build"].as_str()?.to_string(),
    ))
}

/// Store the loaded registry's outcome for [`fast_path`]. Skipped when a plugin file changed
/// too recently to trust its timestamps (a build in progress).
pub fn remember_registry(reg: &Registry, disc: &crate::registry::Discovery) {
    let Some(manifest) = manifest(&plugin_inputs(disc), SystemTime::now()) else {
        return;
    };
    let Some(mut db) = Db::open() else { return };
    let dirs = dirs_key(disc);
    db.guard("registry snapshot", |db| {
        let tx = db.conn.transaction()?;
        tx.execute("DELETE FROM registry_tools WHERE dirs = ?1", params![dirs])?;
        for t in reg.tools.values() {
            let entry = entry_json(reg, t).to_string();
            for name in std::iter::once(&t.name).chain(&t.aliases) {
                // Canonical names win over another tool's alias, as in the registry.
                let verb = if name == &t.name { "REPLACE" } else { "IGNORE" };
                tx.execute(
                    &format!("INSERT OR {verb} INTO registry_tools (dirs, name, entry) VALUES (?1, ?2, ?3)"),
                    params![dirs, name, entry],
                )?;
            }
        }
        tx.execute(
            "INSERT OR REPLACE INTO registry (dirs, manifest) VALUES (?1, ?2)",
            params![dirs, manifest.to_string()],
        )?;
        tx.commit()
    });
}

fn write_stdout(s: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    // A closed pipe (`xprof ... | head`) is not an error worth reporting.
    let _ = o.write_all(s.as_bytes());
    if !s.ends_with('\n') {
        let _ = o.write_all(b"\n");
    }
    let _ = o.flush();
}

/// Try to answer `xprof <tool> ...` from the cache without loading any plugin.
pub fn fast_path(g: &GlobalOpts, rest: &[String], disc: &crate::registry::Discovery) -> Fast {
    let miss = Fast::Miss { remember: false };
    if g.no_cache || g.bypass_cache || g.help || g.version {
        return miss;
    }
    let Some(name) = rest.first() else {
        return miss;
    };
    if name.starts_with('-') || crate::registry::RESERVED_NAMES.contains(&name.as_str()) {
        return miss;
    }
    let Ok((ttl, _)) = ttl(g) else { return miss };
    if ttl == 0 || !db_path().is_some_and(|p| p.exists()) {
        return Fast::Miss { remember: ttl > 0 };
    }
    let Some(mut db) = Db::open() else {
        return miss;
    };
    let dirs = dirs_key(disc);
    let snapshot = db.guard("registry snapshot", |db| {
        db.conn
            .query_row(
                "SELECT manifest FROM registry WHERE dirs = ?1",
                params![dirs],
                |r| r.get::<_, String>(0),
            )
            .optional()
    });
    let fresh = snapshot
        .flatten()
        .and_then(|m| serde_json::from_str::<Value>(&m).ok())
        .is_some_and(|m| manifest_matches(&m));
    if !fresh {
        return Fast::Miss { remember: true };
    }
    let entry = db
        .guard("registry snapshot", |db| {
            db.conn
                .query_row(
                    "SELECT entry FROM registry_tools WHERE dirs = ?1 AND name = ?2",
                    params![dirs, name],
                    |r| r.get::<_, String>(0),
                )
                .optional()
        })
        .flatten()
        .and_then(|e| serde_json::from_str::<Value>(&e).ok())
        .and_then(|v| entry_from_json(&v));
    let Some((tool, plugin, version, build)) = entry else {
        return miss;
    };
    let mut cmd = crate::cli::tool_command(&tool);
    let Ok(matches) = cmd.try_get_matches_from_mut(
        std::iter::once(tool.name.clone()).chain(rest[1..].iter().cloned()),
    ) else {
        return miss;
    };
    let Ok(args) = crate::cli::matches_to_args(&tool, &matches) else {
        return miss;
    };
    let (key, _) = key_for(&plugin, &version, &build, &tool, &args);
    let Some(Some(env)) = db.guard("lookup", |db| db.lookup(&key, ttl)) else {
        return miss;
    };
    trace(&tool.name, "hit", Some("plugins not loaded"));
    let format = g.format.as_deref().unwrap_or("json");
    Fast::Hit(
        match crate::output::render(&tool.name, &env.result, &env.content_type, format) {
            Ok(s) => {
                write_stdout(&s);
                0
            }
            Err(e) => crate::output::print_error(Some(&tool.name), &e),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_units() {
        assert_eq!(parse_ttl("3600"), Some(3600));
        assert_eq!(parse_ttl("90s"), Some(90));
        assert_eq!(parse_ttl("30m"), Some(1800));
        assert_eq!(parse_ttl("1h"), Some(3600));
        assert_eq!(parse_ttl("2d"), Some(172800));
        assert_eq!(parse_ttl("0"), Some(0));
        assert_eq!(parse_ttl("-1"), None);
        assert_eq!(parse_ttl("soon"), None);
        assert_eq!(parse_ttl(""), None);
    }

    #[test]
    fn lexical_absolute_paths() {
        let p = absolute_lexical(Path::new("/a/b/../c/./d"));
        assert_eq!(p, PathBuf::from("/a/c/d"));
        assert!(absolute_lexical(Path::new("rel")).is_absolute());
    }

    fn entry() -> ToolEntry {
        ToolEntry {
            name: "t".into(),
            aliases: vec![],
            summary: String::new(),
            doc: String::new(),
            params: json!({"type": "object", "properties": {
                "path": {"type": "string", "format": "path"},
                "run": {"type": "string"},
                "max_lines": {"type": "integer", "default": 10},
            }}),
            output: String::new(),
            examples: vec![],
            plugin: 0,
        }
    }

    #[test]
    fn key_order_defaults_and_paths_are_normalised() {
        let t = entry();
        let a: Map<String, Value> =
            serde_json::from_value(json!({"run": "r", "path": "/x/y/../z", "max_lines": 10}))
                .unwrap();
        let b: Map<String, Value> =
            serde_json::from_value(json!({"path": "/x/z", "run": "r", "host": null})).unwrap();
        let (na, nb) = (normalised_args(&t, &a), normalised_args(&t, &b));
        // `host` is not a property of this tool, but null is dropped before that matters.
        assert_eq!(na, nb);
        assert_eq!(
            na.to_string(),
            r#"{"max_lines":10,"path":"/x/z","run":"r"}"#
        );
    }

    #[test]
    fn no_path_means_the_working_directory_is_part_of_the_key() {
        let t = entry();
        let n = normalised_args(&t, &Map::new());
        assert!(n.get("$cwd").is_some(), "{n}");
    }

    #[test]
    fn manifests_detect_changes_and_new_directory_entries() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.xplane.pb");
        fs::write(&f, b"abc").unwrap();
        let inputs = vec![
            json!({"path": f.display().to_string(), "kind": "file"}),
            json!({"path": dir.path().display().to_string(), "kind": "dir"}),
        ];
        // Just written: racy, so not storable.
        assert!(manifest(&inputs, SystemTime::now()).is_none());
        // As if the call had started well after the writes.
        let later = SystemTime::now() + RACY_MARGIN_COARSE + Duration::from_secs(1);
        let m = manifest(&inputs, later).unwrap();
        assert!(manifest_matches(&m));
        fs::write(dir.path().join("b.xplane.pb"), b"").unwrap();
        assert!(
            !manifest_matches(&m),
            "a new file in a listed dir invalidates"
        );
        let m = manifest(&inputs, later + RACY_MARGIN_COARSE).unwrap();
        fs::write(&f, b"abd").unwrap();
        assert!(!manifest_matches(&m), "rewriting a read file invalidates");
        assert!(manifest(&[], later).is_none(), "no inputs: not cached");
    }

    #[test]
    fn entries_expire_after_the_ttl_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.pb");
        fs::write(&input, b"x").unwrap();
        let inputs = vec![json!({"path": input.display().to_string(), "kind": "file"})];
        let later = SystemTime::now() + RACY_MARGIN_COARSE + Duration::from_secs(1);
        let m = manifest(&inputs, later).unwrap();
        let env = Envelope {
            result: json!({"answer": 42}),
            content_type: "application/json".into(),
            inputs,
        };
        let material = json!({"tool": "t", "plugin": "p", "plugin_version": "1"});
        let mut db = Db::open_in(&dir.path().join("cache")).unwrap();
        db.store("k", &material, &env, &m).unwrap();
        drop(db);
        let mut db = Db::open_in(&dir.path().join("cache")).unwrap();
        let hit = db
            .lookup("k", 3600)
            .unwrap()
            .expect("a fresh entry is served");
        assert_eq!(hit.result, env.result);
        assert_eq!(hit.inputs, env.inputs);
        db.conn
            .execute("UPDATE entries SET created_at = created_at - 100", [])
            .unwrap();
        assert!(db.lookup("k", 50).unwrap().is_none(), "expired");
        assert!(db.lookup("k", 200).unwrap().is_some());
        assert!(db.lookup("other", 3600).unwrap().is_none());
        let mode = fs::metadata(dir.path().join("cache")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn absent_inputs_are_recorded_and_their_appearance_invalidates() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("later.pb");
        let inputs = vec![json!({"path": f.display().to_string(), "kind": "file"})];
        let m = manifest(&inputs, SystemTime::now()).unwrap();
        assert!(manifest_matches(&m));
        fs::write(&f, b"x").unwrap();
        assert!(!manifest_matches(&m));
    }
}
