//! Our export against the `.trace.json.gz` JAX writes beside its capture: the same complete
//! events (name, timestamp, duration, process, thread), the same process and thread
//! metadata, and every arg JAX writes with its value.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;
use xprof_trace::{Filter, TraceWriter};
use xprof_xspace::XSpace;

/// Every `<host>.xplane.pb` of the corpus with JAX's `<host>.trace.json.gz` beside it.
fn pairs() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for dir in xprof_plugin_api::sdk::testing::run_dirs(env!("CARGO_MANIFEST_DIR")) {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".xplane.pb") {
                let jax = dir.join(format!("{stem}.trace.json.gz"));
                if jax.is_file() {
                    out.push((p, jax));
                }
            }
        }
    }
    out.sort();
    out
}

fn ours(xplane: &Path) -> Value {
    let space = XSpace::open(xplane).unwrap();
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    w.add_host(&space, None, 0, &Filter::default()).unwrap();
    serde_json::from_slice(&w.finish().unwrap().0).unwrap()
}

fn jax(path: &Path) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

type Key = (u64, u64, i64, i64, String);

fn key(e: &Value) -> Key {
    let ps = |v: &Value| (v.as_f64().unwrap() * 1e6).round() as i64;
    (
        e["pid"].as_u64().unwrap(),
        e["tid"].as_u64().unwrap(),
        ps(&e["ts"]),
        ps(&e["dur"]),
        e["name"].as_str().unwrap().to_string(),
    )
}

fn complete(v: &Value) -> HashMap<Key, Vec<&Value>> {
    let mut m: HashMap<Key, Vec<&Value>> = HashMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        if e["ph"] == "X" {
            m.entry(key(e)).or_default().push(e);
        }
    }
    m
}

/// JAX writes every arg as a string (doubles with 6 significant digits).
fn same_arg(ours: &Value, jax: &str) -> bool {
    match ours {
        Value::String(s) => s == jax,
        Value::Number(n) => {
            let (a, b) = (n.as_f64().unwrap(), jax.parse::<f64>().unwrap_or(f64::NAN));
            a == b || (a - b).abs() <= 1e-5 * a.abs().max(b.abs())
        }
        _ => false,
    }
}

#[test]
fn our_export_has_the_events_of_jaxs_own_trace_file() {
    let pairs = pairs();
    if xprof_plugin_api::sdk::testing::corpus(env!("CARGO_MANIFEST_DIR")).is_some() {
        assert!(!pairs.is_empty(), "no JAX .trace.json.gz in the corpus");
    }
    for (xplane, jax_file) in pairs {
        let (o, j) = (ours(&xplane), jax(&jax_file));
        let (oc, jc) = (complete(&o), complete(&j));
        let count = |m: &HashMap<Key, Vec<&Value>>| m.values().map(Vec::len).sum::<usize>();
        let (n_ours, n_jax) = (count(&oc), count(&jc));
        assert!(n_jax > 0, "{}", jax_file.display());
        assert!(
            n_ours.abs_diff(n_jax) * 100 <= n_jax,
            "{}: {n_ours} complete events, JAX has {n_jax}",
            xplane.display()
        );
        // Events JAX has that we lack (or have fewer of): under 1 %.
        let missing: usize = jc
            .iter()
            .map(|(k, v)| v.len().saturating_sub(oc.get(k).map_or(0, Vec::len)))
            .sum();
        assert!(
            missing * 100 <= n_jax,
            "{}: {missing} of JAX's {n_jax} events are not in our export, e.g. {:?}",
            xplane.display(),
            jc.keys().find(|k| !oc.contains_key(*k))
        );
        // Every arg JAX gives an event, ours gives it too, with the same value.
        for (k, jv) in &jc {
            let Some(ov) = oc.get(k) else { continue };
            for (je, oe) in jv.iter().zip(ov) {
                for (name, val) in je["args"].as_object().into_iter().flatten() {
                    assert!(
                        same_arg(&oe["args"][name], val.as_str().unwrap()),
                        "{}: event {k:?} arg {name}: ours {}, JAX {val}",
                        xplane.display(),
                        oe["args"][name]
                    );
                }
            }
        }
        // JAX's process and thread metadata, exactly.
        let meta = |v: &Value| -> Vec<String> {
            let mut m: Vec<String> = v["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "M")
                .map(|e| e.to_string())
                .collect();
            m.sort();
            m
        };
        let ours_meta = meta(&o);
        for m in meta(&j) {
            assert!(
                ours_meta.contains(&m),
                "{}: metadata {m} missing",
                xplane.display()
            );
        }
    }
}
