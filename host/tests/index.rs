//! The registry index: a tool call loads only the plugin serving the tool while the index is
//! valid, and falls back to loading every plugin (with the same output) whenever it is not.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use serde_json::{Value, json};

/// The `{"verbose": ...}` line of a `--verbose` call.
fn verbose(out: &Output) -> Value {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v.get("verbose").cloned())
        .unwrap_or_else(|| {
            panic!(
                "no verbose line on stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// How the registry was built (`index` or `full`) and the names of the plugins loaded.
fn loaded(out: &Output) -> (String, Vec<String>) {
    let v = verbose(out);
    let names = v["plugins_loaded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    (v["registry"].as_str().unwrap().to_string(), names)
}

struct Env {
    _tmp: tempfile::TempDir,
    cache: PathBuf,
    plugins: PathBuf,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let plugins = tmp.path().join("plugins");
        copy_dir(plugin_dir(), &plugins);
        Env {
            _tmp: tmp,
            cache,
            plugins,
        }
    }

    fn run(&self, args: &[&str], extra: &[&Path]) -> Output {
        xprof_with_plugins(&self.cache, &self.plugins)
            .args(args)
            .args(extra)
            .args(["--verbose", "--no_cache"])
            .output()
            .unwrap()
    }

    /// Repeat the call until it is served through the index (the plugin files were just
    /// written, so their timestamps are too fresh to index at first). Bounded.
    fn until_indexed(&self, args: &[&str], extra: &[&Path]) -> Output {
        for _ in 0..2000 {
            let out = self.run(args, extra);
            if loaded(&out).0 == "index" {
                return out;
            }
        }
        panic!("never served through the registry index: {args:?}");
    }

    /// With the index just damaged: the call is served by the full load with `reference`'s
    /// output, and the full load rewrote the index, so the next call goes through it. `what`
    /// names the damage in failure messages.
    fn falls_back_and_reindexes(&self, seed: &Path, reference: &Output, what: &str) {
        let out = self.run(&["get_hosts"], &[seed]);
        assert_eq!(loaded(&out).0, "full", "{what}");
        same_output(&out, reference);
        let out = self.run(&["get_hosts"], &[seed]);
        assert_eq!(
            loaded(&out),
            ("index".into(), vec!["core".into()]),
            "rewritten after {what}"
        );
    }

    fn file_of(&self, needle: &str) -> PathBuf {
        fs::read_dir(&self.plugins)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains(needle))
            .unwrap()
    }

    fn index_file(&self) -> PathBuf {
        let files: Vec<PathBuf> = fs::read_dir(self.cache.join("registry"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files[0].clone()
    }
}

/// The registry index file in its three parts: the header line, the names line (every
/// callable name → `{tool, plugin, descriptor: [start, end]}`) and the descriptors' text.
struct IndexText {
    header: Value,
    names: Value,
    descriptors: String,
}

impl IndexText {
    fn read(path: &Path) -> IndexText {
        let text = fs::read_to_string(path).unwrap();
        let mut parts = text.splitn(3, '\n');
        let mut json = || serde_json::from_str(parts.next().unwrap()).unwrap();
        let (header, names) = (json(), json());
        IndexText {
            header,
            names,
            descriptors: parts.next().unwrap().to_string(),
        }
    }

    fn write(&self, path: &Path) {
        let text = format!("{}\n{}\n{}", self.header, self.names, self.descriptors);
        fs::write(path, text).unwrap();
    }

    fn range(v: &Value) -> (usize, usize) {
        let at = |i: usize| v[i].as_u64().unwrap() as usize;
        (at(0), at(1))
    }

    /// The descriptor recorded for `name`, and the range of the plugin serving it.
    fn descriptor(&self, name: &str) -> (Value, (usize, usize)) {
        let entry = &self.names[name];
        let (start, end) = Self::range(&entry["descriptor"]);
        let plugin = &self.header["plugins"][entry["plugin"].as_u64().unwrap() as usize];
        (
            serde_json::from_str(&self.descriptors[start..end]).unwrap(),
            Self::range(&plugin["descriptors"]),
        )
    }

    /// Record `descriptor` for `name` instead, appended to the text and inside the range of
    /// the plugin serving it.
    fn replace_descriptor(&mut self, name: &str, descriptor: &Value) {
        let start = self.descriptors.len();
        self.descriptors.push_str(&descriptor.to_string());
        let end = self.descriptors.len();
        self.descriptors.push('\n');
        let plugin = self.names[name]["plugin"].as_u64().unwrap() as usize;
        self.names[name]["descriptor"] = json!([start, end]);
        self.header["plugins"][plugin]["descriptors"][1] = json!(end);
    }
}

fn same_output(a: &Output, b: &Output) {
    assert_eq!(a.status.code(), b.status.code());
    assert_eq!(
        String::from_utf8_lossy(&a.stdout),
        String::from_utf8_lossy(&b.stdout)
    );
    // stderr minus the verbose line (which says how the registry was built).
    let strip = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .filter(|l| !l.starts_with("{\"verbose\""))
            .map(String::from)
            .collect()
    };
    assert_eq!(strip(a), strip(b));
}

#[test]
fn a_tool_call_loads_only_its_plugin_with_the_same_output_and_errors() {
    let Some(seed) = seed_logdir() else { return };
    let env = Env::new();
    let first = env.run(&["get_hosts"], &[&seed]);
    assert_eq!(
        loaded(&first),
        (
            "full".to_string(),
            vec!["core".to_string(), "example-vendor".to_string()]
        )
    );
    let out = env.until_indexed(&["get_hosts"], &[&seed]);
    assert_eq!(loaded(&out).1, ["core"]);
    same_output(&out, &first);
    assert!(
        !env.cache.join("cache.sqlite").exists(),
        "--no_cache keeps the index but never creates the result cache"
    );

    // The vendor's tool loads the vendor plugin only.
    let out = env.run(&["vendor_dump_inventory", "--help"], &[]);
    assert_eq!(
        loaded(&out),
        ("index".into(), vec!["example-vendor".into()])
    );
    assert!(out.status.success());

    // Aliases resolve through the index too.
    let out = env.run(&["tf_stats", "--help"], &[]);
    assert_eq!(loaded(&out), ("index".into(), vec!["core".into()]));

    // Errors are the same: a bad argument, a missing path, an unknown tool (which loads all).
    for args in [
        &["get_hosts", "--bogus", "1"][..],
        &["get_hosts", "/nonexistent/logdir"][..],
    ] {
        let via_index = env.run(args, &[]);
        assert_eq!(loaded(&via_index).0, "index");
        let full = xprof_with_plugins(&env.cache, &env.plugins)
            .args(args)
            .args(["--no_cache"])
            .env("XPROF_CACHE_DIR", env.cache.join("elsewhere"))
            .output()
            .unwrap();
        assert!(!via_index.status.success());
        same_output(&via_index, &full);
    }
    let out = env.run(&["get_hostz"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        loaded(&out).1.len(),
        2,
        "an unknown tool loads every plugin"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("get_hosts"));
}

#[test]
fn a_changed_added_or_removed_plugin_file_invalidates_the_index() {
    let Some(seed) = seed_logdir() else { return };
    let env = Env::new();
    env.until_indexed(&["get_hosts"], &[&seed]);

    // "Rebuild" core: same bytes, a new file.
    let core = env.file_of("xprof_plugin_core");
    let bytes = fs::read(&core).unwrap();
    fs::remove_file(&core).unwrap();
    fs::write(&core, &bytes).unwrap();
    assert_eq!(loaded(&env.run(&["get_hosts"], &[&seed])).0, "full");
    env.until_indexed(&["get_hosts"], &[&seed]);

    // A new plugin file: here a broken one, whose refusal is reported on both paths.
    let broken = env.plugins.join("libxprof_plugin_broken.so");
    fs::write(&broken, b"not a shared object").unwrap();
    let out = env.run(&["get_hosts"], &[&seed]);
    assert_eq!(loaded(&out).0, "full");
    let refused = |out: &Output| verbose(out)["refused"].as_array().unwrap().len();
    assert_eq!(refused(&out), 1);
    let out = env.until_indexed(&["get_hosts"], &[&seed]);
    assert_eq!(refused(&out), 1, "the index keeps the refusals");
    assert_eq!(loaded(&out).1, ["core"]);

    // A removed plugin file.
    fs::remove_file(&broken).unwrap();
    let vendor = env.file_of("example_vendor");
    let vendor_bytes = fs::read(&vendor).unwrap();
    fs::remove_file(&vendor).unwrap();
    let out = env.run(&["get_hosts"], &[&seed]);
    assert_eq!(loaded(&out), ("full".into(), vec!["core".into()]));
    let out = env.run(&["vendor_dump_inventory", "--help"], &[]);
    assert_eq!(out.status.code(), Some(2), "the vendor tool is gone");

    // The vendor plugin comes back under another file name: its tool is found there.
    let moved = env.plugins.join("libxprof_plugin_acme.so");
    fs::write(&moved, vendor_bytes).unwrap();
    let out = env.run(&["vendor_dump_inventory", "--help"], &[]);
    assert!(out.status.success());
    let out = env.until_indexed(&["vendor_dump_inventory", "--help"], &[]);
    assert_eq!(
        verbose(&out)["plugins_loaded"][0]["path"],
        moved.display().to_string()
    );
}

#[test]
fn an_index_naming_the_wrong_plugin_or_a_corrupt_one_falls_back_to_the_full_load() {
    let Some(seed) = seed_logdir() else { return };
    let env = Env::new();
    let reference = env.until_indexed(&["get_hosts"], &[&seed]);
    let index = env.index_file();

    // The index says another plugin serves the tool (as if the tool had moved between
    // plugins without the files changing): that plugin has no such descriptor recorded.
    let mut idx = IndexText::read(&index);
    let owner = idx.names["get_hosts"]["plugin"].as_u64().unwrap();
    idx.names["get_hosts"]["plugin"] = Value::from(1 - owner);
    idx.write(&index);
    env.falls_back_and_reindexes(&seed, &reference, "another plugin named");

    // The name's recorded descriptor is another tool's (of the same plugin): it does not
    // resolve the name to the tool the full load did.
    let mut idx = IndexText::read(&index);
    let other = idx.names["get_hosts"]["plugin"].clone();
    let other = idx
        .names
        .as_object()
        .unwrap()
        .values()
        .find(|e| e["plugin"] == other && e["tool"] != "get_hosts")
        .unwrap()["descriptor"]
        .clone();
    idx.names["get_hosts"]["descriptor"] = other;
    idx.write(&index);
    env.falls_back_and_reindexes(&seed, &reference, "another tool's descriptor");

    // The descriptors are cut off.
    let mut idx = IndexText::read(&index);
    idx.descriptors.clear();
    idx.write(&index);
    env.falls_back_and_reindexes(&seed, &reference, "cut-off descriptors");

    for garbage in [&b""[..], b"{\"version\": 1", b"\x00\xff garbage"] {
        fs::write(&index, garbage).unwrap();
        env.falls_back_and_reindexes(&seed, &reference, &format!("{garbage:?}"));
    }
}

#[test]
fn a_call_through_the_index_registers_its_tool_from_the_index_not_the_plugin() {
    let Some(seed) = seed_logdir() else { return };
    let env = Env::new();
    let reference = env.until_indexed(&["get_hosts"], &[&seed]);
    let index = env.index_file();
    let mut idx = IndexText::read(&index);

    // The index records, for every tool and alias of every plugin, the descriptor of the tool
    // it resolves to, among those of the plugin serving it, and each plugin's tool count.
    let full = |args: &[&str]| {
        stdout_json(
            &xprof_with_plugins(&env.cache, &env.plugins)
                .args(args)
                .args(["--format", "json"])
                .output()
                .unwrap(),
        )
    };
    let listing = full(&["tools"]);
    let report = full(&["plugins"]);
    let records = idx.header["plugins"].as_array().unwrap().clone();
    let tool_names: Vec<&Value> = listing["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap())
        .map(|t| &t["name"])
        .collect();
    for p in listing["plugins"].as_array().unwrap() {
        let record = records.iter().find(|r| r["name"] == p["name"]).unwrap();
        let reported = report["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == p["name"])
            .unwrap();
        assert_eq!(record["tool_count"], reported["tools"]);
        for t in p["tools"].as_array().unwrap() {
            let aliases = t["aliases"].as_array().unwrap();
            // An alias that is also a tool's name calls that tool.
            let callable = aliases.iter().filter(|a| !tool_names.contains(a));
            for name in std::iter::once(&t["name"]).chain(callable) {
                let name = name.as_str().unwrap();
                assert_eq!(idx.names[name]["tool"], t["name"], "{name}");
                let (d, (first, last)) = idx.descriptor(name);
                let (start, end) = IndexText::range(&idx.names[name]["descriptor"]);
                assert!(first <= start && end <= last, "{name}");
                assert_eq!(
                    records[idx.names[name]["plugin"].as_u64().unwrap() as usize]["name"],
                    p["name"]
                );
                for field in ["name", "aliases", "summary", "params"] {
                    assert_eq!(d[field], t[field], "{name}: {field}");
                }
            }
        }
    }

    // What a call through the index knows of its tool is the recorded descriptor: with the
    // recorded summary and doc changed, `--help` through the index shows them, while the full
    // load (the plugin's descriptors) does not...
    let (mut d, _) = idx.descriptor("get_hosts");
    let mark = |v: &Value| format!("{} (as recorded)", v.as_str().unwrap());
    let (summary, doc) = (mark(&d["summary"]), mark(&d["doc"]));
    d["summary"] = json!(summary);
    d["doc"] = json!(doc);
    idx.replace_descriptor("get_hosts", &d);
    idx.write(&index);
    let help = env.run(&["get_hosts", "--help"], &[]);
    assert_eq!(loaded(&help), ("index".into(), vec!["core".into()]));
    // Help text is wrapped to the terminal's width: compare with whitespace collapsed.
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = words(&String::from_utf8_lossy(&help.stdout));
    assert!(text.contains(&words(&doc)), "{text}");
    let help = xprof_with_plugins(&env.cache, &env.plugins)
        .args(["help", "get_hosts"])
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(!String::from_utf8_lossy(&help.stdout).contains("(as recorded)"));
    // ... and the call itself runs from the index alone, with the same output.
    let out = env.run(&["get_hosts"], &[&seed]);
    assert_eq!(loaded(&out), ("index".into(), vec!["core".into()]));
    same_output(&out, &reference);
}

#[test]
fn listings_and_host_commands_load_every_plugin() {
    let env = Env::new();
    for args in [&["tools"][..], &["plugins"], &["help", "get_hosts"]] {
        let out = xprof_with_plugins(&env.cache, &env.plugins)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        // No verbose line is asked for, none is printed.
        assert!(!String::from_utf8_lossy(&out.stderr).contains("\"verbose\""));
    }
    let out = xprof_with_plugins(&env.cache, &env.plugins)
        .args(["plugins"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("core") && text.contains("example-vendor"),
        "{text}"
    );
}

/// Regression: every plugin search path (each build directory, worktree or temporary plugin
/// directory) left its own ~100 KB index file in the user's cache, and nothing removed them.
#[test]
fn writing_an_index_keeps_the_sixteen_most_recent_and_touches_nothing_else() {
    let env = Env::new();
    let registry = env.cache.join("registry");
    fs::create_dir_all(&registry).unwrap();
    let day = std::time::Duration::from_secs(86_400);
    let now = std::time::SystemTime::now();
    // Twenty stale indexes of other search paths, written 1 to 20 days ago.
    let stale: Vec<PathBuf> = (1..=20u32)
        .map(|age| {
            let p = registry.join(format!("{age:032x}.json"));
            fs::write(&p, "{}\n{}\n").unwrap();
            let f = fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(now - day * age).unwrap();
            p
        })
        .collect();
    let other = registry.join("notes.json");
    fs::write(&other, "not an index").unwrap();

    env.until_indexed(&["get_hosts", "--help"], &[]);

    let left: Vec<bool> = stale.iter().map(|p| p.exists()).collect();
    // The new index and the fifteen most recent stale ones.
    assert_eq!(left.iter().filter(|k| **k).count(), 15, "{left:?}");
    assert!(
        left[..15].iter().all(|k| *k),
        "the most recent are kept: {left:?}"
    );
    assert!(other.exists(), "a file not named as an index is left alone");
    let indexes = fs::read_dir(&registry)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().len() == 37 && name != "notes.json"
        })
        .count();
    assert_eq!(indexes, 16);
}
