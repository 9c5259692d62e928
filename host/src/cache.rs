//! The per-user result cache, shared by the CLI and the MCP server.
//!
//! One SQLite file (`$XPROF_CACHE_DIR/cache.sqlite`, else `$XDG_CACHE_HOME/xprof/cache.sqlite`,
//! else `~/.cache/xprof/cache.sqlite`) maps a key (module `keys`: tool, normalised arguments, the
//! environment defaults the tool would use, plugin name, version and build) to the tool's
//! envelope plus a manifest of its inputs (module `manifest`: size, mtime, ctime, inode and
//! device of every file the call read, and the same plus a digest of the listing of every
//! directory it scanned — the envelope's `inputs`). A stored result is served only while that
//! manifest still matches the disk and the entry is younger than the TTL, so an answer is never
//! stale. The CLI serves hits without loading plugins (module `fast`).
//!
//! Policy decisions (documented in docs/MCP.md, "Result cache"):
//! - Errors are never cached.
//! - A result whose `inputs` list is empty is not cached: there is nothing to revalidate, and we
//!   cannot tell "read nothing" from "forgot to record"; such tools are cheap anyway.
//! - A result is not stored when any input changed within [`RACY_MARGIN`] of the call's start
//!   (the "racy git" problem): the tool may have read the old bytes while the manifest records
//!   the new ones. The next call recomputes and stores.
//! - Results up to [`MAX_CACHED_RESULT_BYTES`] that the CLI later spills to a file
//!   (`written_to_file`) are cached in full (the spill happens at render time, after the cache);
//!   larger ones are not cached at all, so the cache cannot grow by hundreds of MB per call.
//! - A tool whose own answer is `written_to_file` (it made a file: `export_trace`) is never
//!   cached: a hit would name a file that may since have been deleted or overwritten.
//! - Any failure of the cache itself (unwritable directory, corrupt file, locked database) warns
//!   once per process on stderr and the call runs uncached; a corrupt file is deleted and rebuilt.

/// Results larger than this (compact JSON) are not stored: recomputing them costs less than
/// keeping them, and the CLI writes them to a file anyway (the 10 MB spill).
pub const MAX_CACHED_RESULT_BYTES: usize = 64 << 20;

mod db;
mod fast;
mod keys;
mod manifest;

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use xprof_plugin_api::ToolError;

pub use db::Db;
pub(crate) use fast::plugin_inputs;
pub use fast::{Fast, fast_path, remember_registry};
pub use keys::{absolute_lexical, key, normalised_args};
pub use manifest::{RACY_MARGIN, RACY_MARGIN_COARSE, manifest, manifest_matches, modified_during};

use crate::cli::GlobalOpts;
use crate::registry::{Envelope, Registry, ToolEntry};

/// Default time to live of an entry.
pub const DEFAULT_TTL_SECS: u64 = 3600;

/// Bump when the key or the stored layout changes: old entries then simply stop matching.
pub(crate) const SCHEMA_VERSION: i64 = 3;

static WARNED: AtomicBool = AtomicBool::new(false);

/// Warn once per process: a broken cache must not drown every call's stderr.
pub(crate) fn warn_once(message: String, hint: &str) {
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
        return std::path::absolute(PathBuf::from(d)).ok();
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
// Calls

/// `XPROF_CACHE_TRACE=1`: one JSON line per cached call on stderr saying what the cache did
/// (`hit`, `miss`, `stored`, `not_stored` with a reason, `off`). For tests and debugging.
pub(crate) fn trace(tool: &str, event: &str, reason: Option<&str>) {
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
        return run_unchanged(run).map(|(env, _)| env);
    }
    let (ttl, _) = ttl(opts)?;
    if ttl == 0 {
        trace(name, "off", Some("ttl 0"));
        return run_unchanged(run).map(|(env, _)| env);
    }
    let Some(mut db) = Db::shared() else {
        trace(name, "off", Some("cache unavailable"));
        return run_unchanged(run).map(|(env, _)| env);
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
    let (env, started) = run_unchanged(run)?;
    if wrote_a_file(&env) {
        trace(name, "not_stored", Some("the tool wrote a file"));
        return Ok(env);
    }
    if env.result.compact().len() > MAX_CACHED_RESULT_BYTES {
        trace(
            name,
            "not_stored",
            Some("the result is larger than the cache keeps"),
        );
        return Ok(env);
    }
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

/// Is the tool's own answer `written_to_file` (it made a file, e.g. `export_trace`)? Parsed
/// only when a small result mentions it.
fn wrote_a_file(env: &Envelope) -> bool {
    let text = env.result.compact();
    text.len() < 1 << 16
        && text.contains("\"written_to_file\"")
        && env.result.value()["status"] == "written_to_file"
}

/// Run the tool; its result is an error when a file it read was modified while it ran (issue
/// 30: a file that changes under a call is exit 4, never a silently mixed answer). Returns the
/// start time for the manifest.
fn run_unchanged(
    run: impl FnOnce() -> Result<Envelope, ToolError>,
) -> Result<(Envelope, SystemTime), ToolError> {
    let started = SystemTime::now();
    let env = run()?;
    if let Some(path) = modified_during(&env.inputs, started, SystemTime::now()) {
        return Err(ToolError::invalid(format!(
            "{path}: the file was modified while the call read it (rewritten by another process)"
        ))
        .with_hint(
            "wait until whatever writes the capture has finished (or copy it somewhere stable), \
             then run the call again",
        ));
    }
    Ok((env, started))
}

fn print_json(v: &Value) {
    // Not `println!`: that panics when the reader has gone (`xprof cache stats | true`).
    crate::out(&serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()));
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
            if let (Value::Object(m), Some(o)) = (s, v.as_object_mut()) {
                o.extend(m);
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

    fn envelope_reading(path: &std::path::Path) -> Envelope {
        let raw = serde_json::value::RawValue::from_string("{}".into()).unwrap();
        Envelope {
            result: crate::result_json::ResultJson::from_raw(raw),
            content_type: "application/json".into(),
            inputs: vec![json!({"path": path, "kind": "file"})],
        }
    }

    /// Issue 30: a capture rewritten in place with the same size while a call read it gave a
    /// mixed answer with exit 0 (the reader only sees truncation). Now the call is exit 4.
    #[test]
    fn a_capture_rewritten_in_place_during_the_call_is_an_invalid_value_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("host0.xplane.pb");
        let written_long_ago = || {
            let ago = SystemTime::now() - std::time::Duration::from_secs(60);
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(ago)
                .unwrap();
        };
        std::fs::write(&p, [1u8; 64]).unwrap();
        written_long_ago();
        let e = run_unchanged(|| {
            std::fs::write(&p, [2u8; 64]).unwrap();
            // The stamp of the write, exactly (the kernel's own lags by up to a tick).
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(SystemTime::now()).unwrap();
            Ok(envelope_reading(&p))
        })
        .unwrap_err();
        assert_eq!(e.kind, xprof_plugin_api::ErrorKind::InvalidValue, "{e:?}");
        assert!(
            e.message.contains("host0.xplane.pb: the file was modified"),
            "{e:?}"
        );
        written_long_ago();
        assert!(run_unchanged(|| Ok(envelope_reading(&p))).is_ok());
    }
}
