//! The command line as users and agents meet it: the real binary, the real plugins.

use serde_json::Value;
use xprof_tests::{Sandbox, built, corpus, fixtures};

#[test]
fn bare_binary_finds_its_plugins_next_to_the_executable() {
    let sb = Sandbox::new();
    let r: xprof_tests::Run = sb.bare_cmd().arg("plugins").output().unwrap().into();
    r.assert_ok();
    for name in ["core", "hlo", "kernel", "example-vendor"] {
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
