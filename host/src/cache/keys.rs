//! Cache keys: tool, normalised arguments, plugin name, version and build.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::SCHEMA_VERSION;
use super::manifest::ns;
use crate::registry::{Registry, ToolEntry};

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
pub(super) fn plugin_build(reg: &Registry, tool: &ToolEntry) -> String {
    reg.plugins
        .get(tool.plugin)
        .and_then(|p| fs::metadata(&p.path).ok())
        .map(|m| format!("{}-{}-{}", m.size(), ns(m.mtime(), m.mtime_nsec()), m.ino()))
        .unwrap_or_default()
}

pub(super) fn key_for(
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

#[cfg(test)]
mod tests {
    use super::*;

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
            }})
            .into(),
            output: String::new(),
            examples: serde_json::Value::Array(vec![]).into(),
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
}
