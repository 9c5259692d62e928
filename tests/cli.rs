//! The command line as users and agents meet it: the real binary, the real plugins.

use serde_json::Value;
use xprof_tests::{Sandbox, built, corpus, fixtures};

#[test]
fn bare_binary_finds_its_plugins_next_to_the_executable() {
    let sb = Sandbox::new();
    let r: xprof_tests::Run = sb.bare_cmd().arg("plugins").output().unwrap().into();
    r.assert_ok();
    for name in ["core", "hlo", "kernel", "report", "example-vendor"] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("plugin {name} not listed:\n{}", r.stdout));
        // name, version, tool count, path
        assert!(line.contains("0.1.0") && line.contains("tools"), "{line}");
    }
}

/// Installed as a symbolic link (`/usr/local/bin/xprof -> /opt/xprof/bin/xprof`), the binary
/// still finds the plugins beside the file the link points to.
#[cfg(unix)]
#[test]
fn a_symlinked_binary_finds_its_plugins_next_to_the_real_executable() {
    let sb = Sandbox::new();
    let bin = sb.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("xprof");
    std::os::unix::fs::symlink(&built().xprof, &link).unwrap();
    let r: xprof_tests::Run = sb
        .bare_cmd_of(&link)
        .arg("plugins")
        .output()
        .unwrap()
        .into();
    r.assert_ok();
    assert!(
        r.stdout
            .lines()
            .any(|l| l.split_whitespace().next() == Some("core")),
        "{}",
        r.stdout
    );
}

#[test]
fn listing_groups_tools_by_plugin() {
    let sb = Sandbox::new();
    let r = sb.run(&["--format", "json"]);
    r.assert_ok();
    let v = r.json();
    let core = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "core")
        .expect("core plugin");
    let names: Vec<&str> = core["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"list_runs") && names.contains(&"get_hosts"));
}

#[test]
fn every_tool_has_help() {
    let sb = Sandbox::new();
    let v = sb.run(&["--format", "json"]).json();
    let mut n = 0;
    for p in v["plugins"].as_array().unwrap() {
        for t in p["tools"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap();
            let r = sb.run(&[name, "--help"]);
            r.assert_ok();
            assert!(r.stdout.contains("Usage: xprof"), "{name}: {}", r.stdout);
            n += 1;
        }
    }
    assert!(n >= 3);
}

#[test]
fn list_runs_on_the_seed_logdir() {
    let Some(c) = corpus() else { return };
    let sb = Sandbox::new();
    let logdir = c.join("fixtures/seed-v6e/logdir");
    let v = sb
        .run(&["list_runs", logdir.to_str().unwrap()])
        .assert_ok()
        .json();
    assert_eq!(v["runs"], serde_json::json!(["testrun"]));
    assert_eq!(v["count"], 1);
}

#[test]
fn list_runs_on_the_bundled_fixtures() {
    let sb = Sandbox::new();
    let logdir = fixtures().join("jax-cpu/logdir");
    if !logdir.exists() {
        panic!("bundled fixtures missing at {}", logdir.display());
    }
    let v = sb
        .run(&["list_runs", logdir.to_str().unwrap()])
        .assert_ok()
        .json();
    let runs: Vec<&str> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    let mut sorted = runs.clone();
    sorted.sort();
    assert_eq!(runs, sorted);
    assert!(runs.contains(&"matmul"), "{runs:?}");
}

#[test]
fn get_hosts_on_the_seed_capture_via_logdir_flag_and_env() {
    let Some(c) = corpus() else { return };
    let sb = Sandbox::new();
    let logdir = c.join("fixtures/seed-v6e/logdir");
    let v = sb
        .run(&[
            "get_hosts",
            "--logdir",
            logdir.to_str().unwrap(),
            "--run",
            "testrun",
        ])
        .assert_ok()
        .json();
    assert_eq!(v["hosts"][0]["hostname"], "host0");
    assert_eq!(v["capture"]["run"], "testrun");
    let r: xprof_tests::Run = sb
        .cmd()
        .env("XPROF_LOGDIR", &logdir)
        .arg("get_hosts")
        .output()
        .unwrap()
        .into();
    assert_eq!(r.assert_ok().json()["hosts"][0]["hostname"], "host0");
}

#[test]
fn missing_path_is_exit_3_with_one_json_error_and_empty_stdout() {
    let sb = Sandbox::new();
    let r = sb.run(&["list_runs", "/nonexistent"]);
    assert_eq!(r.code, 3);
    assert!(r.stdout.is_empty());
    let e = r.error();
    assert_eq!(e["error"]["kind"], "path");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent")
    );
    assert!(e["error"]["hint"].is_string());
    assert_eq!(e["tool"], "list_runs");
}

#[test]
fn run_dir_without_a_capture_is_a_path_error() {
    let sb = Sandbox::new();
    let run = sb.path().join("logdir/plugins/profile/empty");
    std::fs::create_dir_all(&run).unwrap();
    let r = sb.run(&["get_hosts", run.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stdout.is_empty());
}

#[test]
fn numeric_run_names_stay_strings() {
    let sb = Sandbox::new();
    let logdir = sb.path().join("logdir");
    let run = logdir.join("plugins/profile/12345");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("h.xplane.pb"), b"").unwrap();
    let v = sb
        .run(&[
            "get_hosts",
            "--logdir",
            logdir.to_str().unwrap(),
            "--run",
            "12345",
        ])
        .assert_ok()
        .json();
    assert_eq!(v["run"], Value::from("12345"));
}

#[test]
fn unknown_tool_is_a_usage_error_with_suggestions() {
    let sb = Sandbox::new();
    let r = sb.run(&["list_run"]);
    assert_eq!(r.code, 2);
    assert!(r.stdout.is_empty());
    let e = r.error();
    assert_eq!(e["error"]["kind"], "usage");
    assert!(e["error"]["hint"].as_str().unwrap().contains("list_runs"));
}

#[test]
fn unknown_flag_names_the_valid_ones() {
    let sb = Sandbox::new();
    let r = sb.run(&["get_hosts", "--bogus", "1"]);
    assert_eq!(r.code, 2);
    let e = r.error();
    let hint = e["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("--logdir") && hint.contains("--run"),
        "{hint}"
    );
}

#[test]
fn bad_numeric_value_is_exit_4() {
    let sb = Sandbox::new();
    let r = sb.run(&["vendor_dump_inventory", "--dump_dir", ".", "--top", "many"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.error()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--top")
    );
}

#[test]
fn kebab_case_flags_are_accepted() {
    let sb = Sandbox::new();
    let dir = fixtures();
    let r = sb.run(&["vendor_dump_inventory", "--dump-dir", dir.to_str().unwrap()]);
    r.assert_ok();
}

#[test]
fn table_and_text_formats_render() {
    let Some(c) = corpus() else { return };
    let sb = Sandbox::new();
    let logdir = c.join("fixtures/seed-v6e/logdir");
    let r = sb.run(&["get_hosts", logdir.to_str().unwrap(), "--format", "table"]);
    r.assert_ok();
    assert!(r.stdout.contains("hostname") && r.stdout.contains("host0"));
    let r = sb.run(&["get_hosts", logdir.to_str().unwrap(), "--format", "text"]);
    r.assert_ok();
    assert!(r.stdout.contains("hostname: host0"), "{}", r.stdout);
}

#[test]
fn version_and_plugin_search_order_are_reported() {
    let sb = Sandbox::new();
    let r = sb.run(&["--version"]);
    r.assert_ok();
    assert!(r.stdout.starts_with("xprof "));
    let r = sb.run(&["plugins", "--verbose"]);
    r.assert_ok();
    assert!(r.stdout.contains("searched:"));
}

/// First-party names are trusted only from install locations or --plugin-dir.
#[test]
fn first_party_names_are_refused_from_the_env_search_path() {
    let sb = Sandbox::new();
    // An xprof with no plugins beside it, so only XPROF_PLUGIN_PATH supplies them.
    let bin_dir = sb.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let exe = bin_dir.join("xprof");
    std::fs::copy(&built().xprof, &exe).unwrap();
    let env_dir = sb.path().join("envplugins");
    std::fs::create_dir_all(&env_dir).unwrap();
    for p in &built().plugins {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.contains("_core") || name.contains("example_vendor") {
            std::fs::copy(p, env_dir.join(&name)).unwrap();
        }
    }
    let out = std::process::Command::new(&exe)
        .args(["plugins", "--format", "json"])
        .env("XPROF_PLUGIN_PATH", &env_dir)
        .env("HOME", sb.path())
        .env("XDG_DATA_HOME", sb.path().join("data"))
        .output()
        .unwrap();
    let r: xprof_tests::Run = out.into();
    let v = r.assert_ok().json();
    let names: Vec<&str> = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["example-vendor"]);
    let refused = v["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 1);
    assert!(refused[0]["reason"].as_str().unwrap().contains("reserved"));
}

#[test]
fn earlier_directory_wins_a_plugin_name_clash() {
    let sb = Sandbox::new();
    let a = sb.path().join("a");
    let b = sb.path().join("b");
    for d in [&a, &b] {
        std::fs::create_dir_all(d).unwrap();
        for p in &built().plugins {
            if p.file_name()
                .unwrap()
                .to_string_lossy()
                .contains("example_vendor")
            {
                std::fs::copy(p, d.join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    let r: xprof_tests::Run = sb
        .bare_cmd()
        .args(["--no-default-plugin-dirs", "--plugin-dir"])
        .arg(&a)
        .arg("--plugin-dir")
        .arg(&b)
        .args(["plugins", "--format", "json"])
        .output()
        .unwrap()
        .into();
    let v = r.assert_ok().json();
    assert!(
        v["plugins"][0]["path"]
            .as_str()
            .unwrap()
            .starts_with(a.to_str().unwrap())
    );
    assert!(
        v["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("already loaded")
    );
}

/// Flags of XProf's own agent CLI on the tools both have are accepted and do what that CLI
/// does, so a call written for it works here (the agents know that one).
#[test]
fn xprofs_agent_cli_flags_work_on_the_tools_we_share() {
    let sb = Sandbox::new();
    let run = |args: &[&str]| -> Value {
        let r = sb.run(args);
        r.assert_ok();
        r.json()
    };
    let mlp = fixtures().join("jax-cpu/logdir/plugins/profile/mlp_steps");
    let mlp = mlp.to_str().unwrap();

    // get_top_hlo_ops: a category substring, an op's base name.
    let all = run(&["get_top_hlo_ops", mlp, "--limit=50", "--no_cache"]);
    let dots = run(&[
        "get_top_hlo_ops",
        mlp,
        "--category_filter=DOT",
        "--limit=50",
        "--no_cache",
    ]);
    let rows = dots["top_by_time"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["category"] == "dot"), "{rows:?}");
    let want = all["top_by_time"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["category"] == "dot")
        .count();
    assert_eq!(dots["total_matched"], want);
    let base = run(&[
        "get_top_hlo_ops",
        mlp,
        "--op_name=dot",
        "--limit=50",
        "--no_cache",
    ]);
    for r in base["top_by_time"].as_array().unwrap() {
        let n = r["name"].as_str().unwrap();
        assert!(n == "dot" || n.starts_with("dot."), "{n}");
    }
    let none = run(&[
        "get_top_hlo_ops",
        mlp,
        "--category_filter=convolution",
        "--no_cache",
    ]);
    assert_eq!(none["top_by_time"], serde_json::json!([]));
    assert!(
        none["filter_reason"]
            .as_str()
            .unwrap()
            .contains("convolution")
    );

    // get_hlo_stats: another order, a category, without nested rows.
    let by_count = run(&[
        "get_hlo_stats",
        mlp,
        "--sort_by=occurrences",
        "--limit=0",
        "--no_cache",
    ]);
    let counts: Vec<u64> = by_count["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["occurrences"].as_u64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    assert_eq!(by_count["sorted_by"], "occurrences");
    let fusions = run(&[
        "get_hlo_stats",
        mlp,
        "--category_filter=fusion",
        "--include_nested=false",
        "--no_cache",
    ]);
    assert!(
        fusions["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["category"].as_str().unwrap().contains("fusion"))
    );
    // A value outside the choices is a usage error naming them, as for every enum flag.
    let r = sb.run(&["get_hlo_stats", mlp, "--sort_by=nonsense"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("occurrences"), "{}", r.stderr);

    // get_hlo_neighborhood: --op_name is --instruction_name.
    let matmul = fixtures().join("jax-cpu/logdir/plugins/profile/matmul");
    let matmul = matmul.to_str().unwrap();
    let a = run(&[
        "get_hlo_neighborhood",
        matmul,
        "--op_name=ynn_fusion",
        "--no_cache",
    ]);
    let b = run(&[
        "get_hlo_neighborhood",
        matmul,
        "--instruction_name=ynn_fusion",
        "--no_cache",
    ]);
    assert_eq!(a["nodes"], b["nodes"]);
    let r = sb.run(&["get_hlo_neighborhood", matmul]);
    assert_eq!(r.code, 2, "{}", r.stderr);

    // Accepted for compatibility.
    run(&[
        "check_host_boundness",
        mlp,
        "--func_name=train_step",
        "--no_cache",
    ]);
    run(&["get_overview", mlp, "--include_command=true", "--no_cache"]);
    run(&["get_kernel_stats", mlp, "--kernel_name=gemm", "--no_cache"]);
    run(&["export_json", mlp, "--no_cache"]);
    run(&[
        "get_utilization_viewer",
        mlp,
        "--device=0",
        "--node=0",
        "--no_cache",
    ]);
    // Hosts by index, as that CLI numbers them.
    let by_index = run(&["get_step_trace", mlp, "--host=0", "--no_cache"]);
    let by_name = run(&["get_step_trace", mlp, "--host=host0", "--no_cache"]);
    assert_eq!(by_index["steps"], by_name["steps"]);
    assert_eq!(
        by_index["capture"]["files_used"],
        serde_json::json!(["host0"])
    );

    // get_roofline_model: top_n is the limit; group_by=step lists every record set.
    if let Some(c) = corpus() {
        let seed = c.join("fixtures/seed-v6e/logdir");
        let seed = seed.to_str().unwrap();
        let one = run(&["get_roofline_model", seed, "--top_n=1", "--no_cache"]);
        assert_eq!(one["records"].as_array().unwrap().len(), 1);
        let steps = run(&["get_roofline_model", seed, "--group_by=step", "--no_cache"]);
        let total = run(&["get_roofline_model", seed, "--step_filter=", "--no_cache"]);
        assert_eq!(steps["records"], total["records"]);
    }
}
