//! Fast path: a cached CLI call answered without loading any plugin.
//!
//! Loading the plugins (dlopen plus abi_stable's layout checks) costs more than the whole cache
//! hit. So the registry's outcome — every tool's descriptor with its plugin's name and version —
//! is kept beside the results, keyed by the plugin search path and guarded by a manifest of the
//! plugin directories and files like any other entry. While it matches, a CLI call is parsed,
//! keyed and served from the snapshot; anything else (a miss, a parse error, help, an unknown
//! tool) falls through to the normal path, which loads the plugins and reports errors itself.

use std::fs;
use std::path::PathBuf;
use std::time::SystemTime;

use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};

use super::db::Db;
use super::keys::{key_for, plugin_build};
use super::manifest::{manifest, manifest_matches};
use super::{db_path, trace, ttl};
use crate::cli::GlobalOpts;
use crate::registry::{Registry, ToolEntry};

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
pub(crate) fn plugin_inputs(disc: &crate::registry::Discovery) -> Vec<Value> {
    let mut inputs = Vec::new();
    for (dir, _) in disc.dirs() {
        inputs.push(json!({"path": dir.display().to_string(), "kind": "plugin_dir"}));
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
            params: v["params"].clone().into(),
            output: v["output"].as_str().unwrap_or_default().to_string(),
            examples: v["examples"].clone().into(),
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
    let Some(mut db) = Db::shared() else { return };
    let dirs = dirs_key(disc);
    db.guard("registry snapshot", |db| {
        db.before_write();
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
    // Folded at once, whatever the call stores next (maybe nothing: an error, a result
    // without inputs): the snapshot is ~70 WAL frames, which every later hit would replay.
    db.fold_wal();
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
    let Some(mut db) = Db::shared() else {
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
    if g.verbose {
        crate::verbose_line(json!({"registry": "cache", "plugins_loaded": []}));
    }
    let format = g.format.as_deref().unwrap_or("json");
    Fast::Hit(
        match crate::output::render(
            &tool.name,
            &env.result,
            &env.content_type,
            format,
            crate::budget::Budget::for_call(&tool, &args, g.full).as_ref(),
        ) {
            Ok(s) => {
                crate::out(&s);
                0
            }
            Err(e) => crate::output::print_error(Some(&tool.name), &e),
        },
    )
}
