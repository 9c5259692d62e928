//! Every tool, on every capture we have, keeps the output conventions: a JSON object on stdout
//! and nothing else on success; on failure nothing on stdout and exactly one JSON error on
//! stderr whose kind matches the exit code; never an internal error on well-formed or
//! malformed input; nothing written into the run directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;
use xprof_tests::{Run, Sandbox, corpus, fixtures};

/// Capture tools: those whose schema has the capture selector (positional path + logdir + run).
fn capture_tools(sb: &Sandbox) -> Vec<(String, Vec<String>)> {
    let listing = sb.run(&["--format", "json"]).assert_ok().json();
    let mut out = Vec::new();
    for p in listing["plugins"].as_array().unwrap() {
        for t in p["tools"].as_array().unwrap() {
            let props = &t["params"]["properties"];
            if props["path"]["x-positional"] == true
                && props.get("logdir").is_some()
                && props.get("run").is_some()
            {
                // Required arguments get a placeholder value, so the capture is what is tested.
                let mut extra = Vec::new();
                for r in t["params"]["required"].as_array().into_iter().flatten() {
                    extra.push(format!("--{}=x", r.as_str().unwrap()));
                }
                out.push((t["name"].as_str().unwrap().to_string(), extra));
            }
        }
    }
    out
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, Option<SystemTime>)> {
    let mut m = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let md = e.metadata().unwrap();
            if md.is_dir() {
                stack.push(p.clone());
            }
            m.insert(p, (md.len(), md.modified().ok()));
        }
    }
    m
}

fn expected_kind(code: i32) -> &'static str {
    match code {
        1 => "internal",
        2 => "usage",
        3 => "path",
        4 => "invalid_value",
        _ => "?",
    }
}

/// Check one run against the conventions; returns a description of any violation.
fn violations(tool: &str, what: &str, r: &Run) -> Option<String> {
    match r.code {
        0 => match serde_json::from_str::<Value>(&r.stdout) {
            Ok(Value::Object(_)) => None,
            Ok(_) => Some(format!(
                "{tool} on {what}: stdout is JSON but not an object"
            )),
            Err(e) => Some(format!("{tool} on {what}: stdout is not JSON ({e})")),
        },
        code @ 2..=4 => {
            if !r.stdout.is_empty() {
                return Some(format!(
                    "{tool} on {what}: exit {code} with stdout:\n{}",
                    r.stdout
                ));
            }
            let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            if lines.len() != 1 {
                return Some(format!(
                    "{tool} on {what}: exit {code}, stderr is not one line:\n{}",
                    r.stderr
                ));
            }
            match serde_json::from_str::<Value>(lines[0]) {
                Ok(v)
                    if v["error"]["kind"] == expected_kind(code)
                        && v["error"]["message"].is_string() =>
                {
                    None
                }
                Ok(v) => Some(format!("{tool} on {what}: exit {code} but error {v}")),
                Err(e) => Some(format!(
                    "{tool} on {what}: stderr is not JSON ({e}): {}",
                    lines[0]
                )),
            }
        }
        code => Some(format!(
            "{tool} on {what}: exit {code}\nstdout: {}\nstderr: {}",
            r.stdout, r.stderr
        )),
    }
}

fn captures() -> Vec<(String, PathBuf)> {
    let mut v = Vec::new();
    let own = fixtures().join("jax-cpu/logdir/plugins/profile");
    for e in std::fs::read_dir(&own).unwrap().flatten() {
        v.push((
            format!("fixtures/{}", e.file_name().to_string_lossy()),
            e.path(),
        ));
    }
    if let Some(c) = corpus() {
        v.push((
            "seed-v6e".into(),
            c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun"),
        ));
        for run in ["matmul", "mlp_train"] {
            v.push((
                format!("jax-cpu/{run}"),
                c.join("fixtures/jax-cpu/logdir/plugins/profile").join(run),
            ));
        }
    }
    v.sort();
    v
}

#[test]
fn every_capture_tool_keeps_the_conventions_on_every_capture() {
    let sb = Sandbox::new();
    let tools = capture_tools(&sb);
    assert!(
        tools.len() >= 10,
        "only {} capture tools found",
        tools.len()
    );
    let mut bad = Vec::new();
    for (label, run_dir) in captures() {
        // Work on a copy so a tool that wrote into the run dir is caught without touching the
        // corpus (which is read-only anyway).
        let copy = sb
            .path()
            .join("runs")
            .join(label.replace('/', "_"))
            .join("plugins/profile/run");
        std::fs::create_dir_all(&copy).unwrap();
        for e in std::fs::read_dir(&run_dir).unwrap().flatten() {
            if e.path().is_file() {
                std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
            }
        }
        let before = snapshot(&copy);
        for (tool, extra) in &tools {
            let mut args = vec![tool.as_str(), copy.to_str().unwrap(), "--no_cache"];
            args.extend(extra.iter().map(String::as_str));
            let r = sb.run(&args);
            if r.code == 1 {
                bad.push(format!("{tool} on {label}: internal error: {}", r.stderr));
            } else if let Some(v) = violations(tool, &label, &r) {
                bad.push(v);
            }
        }
        assert_eq!(
            before,
            snapshot(&copy),
            "a tool wrote into the run directory of {label}"
        );
    }
    assert!(
        bad.is_empty(),
        "{} violations:\n{}",
        bad.len(),
        bad.join("\n\n")
    );
}

#[test]
fn malformed_and_missing_captures_are_errors_never_internal() {
    let sb = Sandbox::new();
    let tools = capture_tools(&sb);
    let run = sb.path().join("bad/plugins/profile/run");
    std::fs::create_dir_all(&run).unwrap();
    // Not a protobuf: a field-7 group start (wire type 3) right away.
    std::fs::write(
        run.join("host0.xplane.pb"),
        b"\x3b\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    )
    .unwrap();
    let missing = sb.path().join("nowhere");
    let mut bad = Vec::new();
    for (tool, extra) in &tools {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let r = sb.run(
            &[
                &[tool.as_str(), run.to_str().unwrap(), "--no_cache"][..],
                &extra,
            ]
            .concat(),
        );
        if r.code == 1 {
            bad.push(format!(
                "{tool} on a malformed capture: internal error: {}",
                r.stderr
            ));
        } else if let Some(v) = violations(tool, "a malformed capture", &r) {
            bad.push(v);
        }
        let r = sb.run(
            &[
                &[tool.as_str(), missing.to_str().unwrap(), "--no_cache"][..],
                &extra,
            ]
            .concat(),
        );
        if r.code != 3 {
            bad.push(format!(
                "{tool} on a missing path: exit {} (want 3): {}",
                r.code, r.stderr
            ));
        } else if let Some(v) = violations(tool, "a missing path", &r) {
            bad.push(v);
        }
    }
    assert!(
        bad.is_empty(),
        "{} violations:\n{}",
        bad.len(),
        bad.join("\n\n")
    );
}
