//! The SQLite file: entries, the registry snapshot, and how a broken file is survived.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::manifest::manifest_matches;
use super::{SCHEMA_VERSION, cache_dir, warn_once};
use crate::registry::Envelope;
use crate::result_json::ResultJson;

/// A stored result leaves the WAL as it is up to this size; past it, the store folds it
/// ([`Db::fold_wal`]). Every process that opens the file replays the WAL (~7 µs a 4 KB frame,
/// measured: a 53 KB WAL made a hit 90 µs slower), while folding costs a checkpoint and four
/// `fsync`s (~0.9 ms a store on the benchmark VM; more on a disk whose `fsync` flushes a write
/// cache). At 64 KB a hit replays at most ~16 frames, and a few stores share one fold.
pub(super) const FOLD_WAL_AT: u64 = 64 * 1024;

/// Entries untouched for this long are dropped when something new is stored, so the file does
/// not grow without bound between `xprof cache clear`s.
const PURGE_AFTER_SECS: i64 = 30 * 24 * 3600;

const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Db {
    pub(super) conn: Connection,
    pub path: PathBuf,
    /// Has [`Db::before_write`] run on this connection?
    relaxed: bool,
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

/// The database file's name with `suffix` appended (SQLite's `-wal`, `-shm`, `-journal`).
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

fn remove_db_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = fs::remove_file(sidecar(path, suffix));
    }
}

/// The connection [`Db::shared`] keeps between uses. Never closed: the process exits with it
/// open, which SQLite survives like any crash (what was committed is in the database or the
/// WAL, and the next opener replays the WAL, see [`FOLD_WAL_AT`]).
static SHARED: Mutex<Option<Db>> = Mutex::new(None);

/// [`Db::shared`]'s connection, returned to the process when dropped.
pub struct Shared(Option<Db>);

impl std::ops::Deref for Shared {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.0
            .as_ref()
            .expect("a Shared holds its connection until dropped")
    }
}

impl std::ops::DerefMut for Shared {
    fn deref_mut(&mut self) -> &mut Db {
        self.0
            .as_mut()
            .expect("a Shared holds its connection until dropped")
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let mut kept = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if kept.is_none() {
            *kept = self.0.take();
        }
    }
}

/// See [`Db::fold_wal`].
fn fold_wal(conn: &Connection) {
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
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
        // Only the header is read here. A hit runs two statements after this, and each
        // statement a cold process parses costs it tens of microseconds (asking for the journal
        // mode on every open also made SQLite parse the schema before it was needed).
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version != SCHEMA_VERSION {
            // WAL lets readers run beside one writer across processes; the mode is stored in
            // the file, so it is set once, with the schema (switching needs the write lock).
            let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))?;
            }
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
            fold_wal(&conn);
        }
        Ok(conn)
    }

    /// The process's connection to the cache, opened on first use and handed back when the
    /// [`Shared`] is dropped. A CLI call that misses used the file three times (the fast path,
    /// the registry snapshot, the call itself), and each open parsed the schema again and, as
    /// the only connection, rebuilt the WAL index: measured, an uncacheable `get_hosts` took
    /// 1.5 ms longer than with `--no_cache`. Whoever finds it taken (a concurrent MCP call)
    /// opens a connection of its own. `None` as [`Db::open`].
    pub fn shared() -> Option<Shared> {
        let kept = SHARED.lock().unwrap_or_else(|e| e.into_inner()).take();
        kept.or_else(Db::open).map(|db| Shared(Some(db)))
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
            Ok(conn) => Some(Db {
                conn,
                path,
                relaxed: false,
            }),
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
                relaxed: false,
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

    /// Call before writing. A lost write only loses a cache entry, so commits skip the fsync
    /// (`synchronous=NORMAL`, per connection). Set here rather than on open: a hit writes
    /// nothing.
    pub(super) fn before_write(&mut self) {
        if !self.relaxed {
            self.relaxed = self.conn.execute_batch("PRAGMA synchronous=NORMAL").is_ok();
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
            RawValue::from_string(result).map(ResultJson::from_raw),
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
        self.before_write();
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
                env.result.compact(),
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
        if self.wal_bytes() > FOLD_WAL_AT {
            self.fold_wal();
        }
        Ok(())
    }

    /// The size of the WAL file (0 if there is none).
    pub(super) fn wal_bytes(&self) -> u64 {
        fs::metadata(sidecar(&self.path, "-wal")).map_or(0, |m| m.len())
    }

    /// Fold the WAL back into the database and empty it, after a write, while the caller pays
    /// for a miss anyway. A WAL left with frames in it is replayed by every later process that
    /// opens the file, hits included (the first connection rebuilds the WAL index by reading
    /// all of it), and checkpointed again by a connection that closes: measured, a 280 KB WAL
    /// made each cached `get_hosts` 6 ms slower than an uncached one. Stored results fold only
    /// past [`FOLD_WAL_AT`]; the large, rare writes (the schema, the registry snapshot) always.
    /// Busy readers just make this a partial checkpoint.
    pub(super) fn fold_wal(&self) {
        fold_wal(&self.conn);
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
        self.before_write();
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
    pub(super) fn guard<T>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::manifest::{RACY_MARGIN_COARSE, manifest};
    use std::os::unix::fs::MetadataExt;
    use std::time::Duration;

    /// A temporary directory with one input file, the inputs' list and a manifest of it that
    /// can be stored (taken as if the call had started well after the file was written).
    fn one_input() -> (tempfile::TempDir, Vec<Value>, Value) {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.pb");
        fs::write(&input, b"x").unwrap();
        let inputs = vec![json!({"path": input.display().to_string(), "kind": "file"})];
        let later = SystemTime::now() + RACY_MARGIN_COARSE + Duration::from_secs(1);
        let m = manifest(&inputs, later).unwrap();
        (dir, inputs, m)
    }

    #[test]
    fn stores_fold_the_wal_only_once_it_outgrows_the_threshold() {
        let (dir, inputs, m) = one_input();
        let material = json!({"tool": "t", "plugin": "p", "plugin_version": "1"});
        let mut db = Db::open_in(&dir.path().join("cache")).unwrap();
        assert_eq!(db.wal_bytes(), 0, "creating the schema folds it");
        let (mut left_some, mut folded) = (false, false);
        for i in 0..64 {
            let env = Envelope {
                // ~6 KB a result, so that a few stores outgrow the threshold.
                result: json!({"i": i, "pad": "x".repeat(6000)}).into(),
                content_type: "application/json".into(),
                inputs: inputs.clone(),
            };
            let before = db.wal_bytes();
            db.store(&format!("k{i}"), &material, &env, &m).unwrap();
            let after = db.wal_bytes();
            assert!(after <= FOLD_WAL_AT, "store {i} left {after} bytes");
            left_some |= after > 0;
            folded |= before > 0 && after == 0;
        }
        assert!(left_some, "small stores leave the WAL to grow");
        assert!(folded, "a store past the threshold folds it");
        // Everything stored is served, folded or not.
        for i in 0..64 {
            assert!(db.lookup(&format!("k{i}"), 3600).unwrap().is_some(), "k{i}");
        }
    }

    #[test]
    fn entries_expire_after_the_ttl_and_survive_reopening() {
        let (dir, inputs, m) = one_input();
        let env = Envelope {
            result: json!({"answer": 42}).into(),
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
}
