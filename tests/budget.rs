//! Issue 33, the output budget: by default every answer fits 16 KB; `--full` (MCP
//! `"full": true`) and explicit size arguments return what they ask for.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;
use xprof_tests::{Run, Sandbox};

const BUDGET: usize = 16 * 1024;

/// Every run directory of the corpus and of the bundled fixtures.
fn run_dirs(corpus: &Path) -> Vec<PathBuf> {
    let mut logdirs: Vec<PathBuf> = Vec::new();
    for root in [corpus.join("fixtures"), xprof_tests::fixtures()] {
        for entry in std::fs::read_dir(&root).unwrap().flatten() {
            let set = entry.path();
            logdirs.push(set.join("logdir"));
            // gpu-real: one capture per folder, each a logdir itself.
            if let Ok(inner) = std::fs::read_dir(&set) {
                logdirs.extend(inner.flatten().map(|e| e.path()));
            }
        }
    }
    let mut runs: Vec<PathBuf> = logdirs
        .iter()
        .filter_map(|l| std::fs::read_dir(l.join("plugins/profile")).ok())
        .flat_map(|d| d.flatten().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    runs.sort();
    runs
}

/// `(tool, args)` for every capture tool on every run, and every dump tool on every dump dir.
fn calls(sb: &Sandbox, corpus: &Path) -> Vec<(String, Vec<String>)> {
    let tools = sb.run(&["tools", "--format", "json"]);
    let runs = run_dirs(corpus);
    let seed = corpus.join("fixtures/seed-v6e");
    let dumps = [
        seed.join("hlo_dump"),
        seed.join("jf_dump"),
        seed.join("mosaic_dump"),
        corpus.join("fixtures/jax-cpu/hlo_dump"),
    ];
    let mut out = Vec::new();
    for plugin in tools.json()["plugins"].as_array().unwrap() {
        for t in plugin["tools"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap().to_string();
            let props = t["params"]["properties"].as_object().unwrap();
            let required: Vec<&str> = t["params"]["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let dump_flag = ["dump_dir", "mosaic_dump_dir"]
                .into_iter()
                .find(|f| props.contains_key(*f));
            if props.contains_key("path") && required.is_empty() {
                for r in &runs {
                    out.push((name.clone(), vec![r.display().to_string()]));
                }
            } else if let Some(flag) = dump_flag
                && required.iter().all(|r| *r == "module_pattern")
            {
                for d in &dumps {
                    let mut args = vec![format!("--{flag}"), d.display().to_string()];
                    if !required.is_empty() {
                        args.extend(["--module_pattern".into(), ".".into()]);
                    }
                    out.push((name.clone(), args));
                }
            }
        }
    }
    out
}

#[test]
fn every_capture_tools_default_result_fits_16_kb_on_every_corpus_capture() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let jobs = Mutex::new(calls(&sb, &corpus));
    let total = jobs.lock().unwrap().len();
    let results = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                // The lock is released before the call runs (a closure's temporaries end in it).
                let next = || jobs.lock().unwrap().pop();
                while let Some((tool, args)) = next() {
                    let r: Run = sb
                        .cmd()
                        .args(["--no_cache", &tool])
                        .args(&args)
                        .output()
                        .unwrap()
                        .into();
                    results.lock().unwrap().push((tool, args, r));
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    let answered: Vec<_> = results.iter().filter(|(_, _, r)| r.code == 0).collect();
    let over: Vec<String> = answered
        .iter()
        .filter(|(_, _, r)| r.stdout.len() > BUDGET)
        .map(|(t, a, r)| format!("{t} {}: {} bytes", a.join(" "), r.stdout.len()))
        .collect();
    assert!(over.is_empty(), "over {BUDGET} bytes:\n{}", over.join("\n"));
    // Not vacuous: most calls answer, and the budget had work to do.
    assert!(
        answered.len() * 2 > total,
        "{} of {total} answered",
        answered.len()
    );
    let cut: Vec<Value> = answered
        .iter()
        .map(|(_, _, r)| r.json())
        .filter(|v| v.get("truncation").is_some())
        .collect();
    assert!(cut.len() >= 10, "only {} results were cut", cut.len());
    for v in &cut {
        assert_eq!(v["truncated"], true, "{}", v["truncation"]);
        let more = v["truncation"]["get_more"].as_str().unwrap();
        assert!(more.contains("--full"), "{more}");
    }
}

fn hlo_stats(sb: &Sandbox, corpus: &Path, extra: &[&str]) -> Run {
    let run = corpus.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_train");
    let r: Run = sb
        .cmd()
        .args(["--no_cache", "get_hlo_stats"])
        .arg(&run)
        .args(extra)
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{}", r.stderr);
    r
}

#[test]
fn full_and_an_explicit_limit_return_the_whole_result_the_default_keeps_its_first_rows() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let default = hlo_stats(&sb, &corpus, &[]);
    let full = hlo_stats(&sb, &corpus, &["--full"]);
    assert!(default.stdout.len() <= BUDGET);
    assert!(full.stdout.len() > BUDGET, "{} bytes", full.stdout.len());
    let (d, f) = (default.json(), full.json());
    assert!(f.get("truncation").is_none());
    // The same fields in the same order; the cut lists keep their first rows.
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let mut want = keys(&f);
    if !want.contains(&"truncated".to_string()) {
        want.push("truncated".into());
    }
    want.push("truncation".into());
    assert_eq!(keys(&d), want);
    for cut in d["truncation"]["cut"].as_array().unwrap() {
        let path = cut["path"].as_str().unwrap();
        let (kept, whole) = (&d.pointer(path).unwrap(), &f.pointer(path).unwrap());
        let (kept, whole) = (kept.as_array().unwrap(), whole.as_array().unwrap());
        assert_eq!(cut["total"], whole.len(), "{path}");
        assert_eq!(cut["kept"], kept.len(), "{path}");
        assert_eq!(
            kept[..],
            whole[..kept.len()],
            "{path}: the first rows are kept"
        );
    }
    // An explicit size argument is answered as asked, without the budget.
    let all = hlo_stats(&sb, &corpus, &["--limit", "0"]);
    assert!(all.json().get("truncation").is_none());
    assert!(all.stdout.len() > BUDGET);
}

#[test]
fn over_mcp_the_budget_is_on_compact_json_and_full_true_turns_it_off() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let root = corpus.join("fixtures/jax-cpu/logdir");
    let mut mcp = xprof_tests::mcp::Mcp::start_in(&sb, &root, &[], &[]);
    let args = serde_json::json!({"path": root.join("plugins/profile/mlp_train")});
    let cut = mcp.call(1, "get_hlo_stats", args.clone());
    let mut full_args = args.clone();
    full_args["full"] = Value::Bool(true);
    let full = mcp.call(2, "get_hlo_stats", full_args);
    let mut bad_args = args;
    bad_args["full"] = Value::from("yes");
    let bad = mcp.call(3, "get_hlo_stats", bad_args);
    mcp.finish();

    let (cut, full) = (&cut["structuredContent"], &full["structuredContent"]);
    assert!(cut.to_string().len() <= BUDGET, "{}", cut.to_string().len());
    assert_eq!(cut["truncated"], true);
    assert!(full.to_string().len() > BUDGET);
    assert!(full.get("truncation").is_none());
    assert_eq!(bad["isError"], true, "{bad}");
    let msg = bad["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("`full` must be boolean"), "{msg}");
}

#[test]
fn every_tool_lists_full_in_its_mcp_schema() {
    let sb = Sandbox::new();
    let mut mcp = xprof_tests::mcp::Mcp::start(&sb, &[], &[]);
    mcp.send(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let tools = mcp.reply(1)["result"]["tools"].clone();
    mcp.finish();
    let tools = tools.as_array().unwrap();
    assert!(tools.len() > 40, "{}", tools.len());
    // describe_tool is the host's own, with a small answer of its own.
    for t in tools.iter().filter(|t| t["name"] != "describe_tool") {
        let full = &t["inputSchema"]["properties"]["full"];
        assert_eq!(full["type"], "boolean", "{}", t["name"]);
    }
}
