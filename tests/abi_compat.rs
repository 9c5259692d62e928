//! The host survives bad plugins: an incompatible ABI is refused with a one-line reason while
//! the others load; a panicking tool is exit 1 with one JSON error; a vendor cannot take a
//! first-party tool name.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use xprof_tests::{Sandbox, built, workspace_root};

/// Build tests/abi-compat (its own workspace, its own target dir) once; return a plugin dir
/// holding the good plugins plus the two bad ones.
fn bad_plugins_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = workspace_root();
        let target = root.join("target/abi-compat");
        let out = Command::new(env!("CARGO"))
            .current_dir(root.join("tests/abi-compat"))
            .env("CARGO_TARGET_DIR", &target)
            .args(["build", "--quiet"])
            .output()
            .expect("cargo build of tests/abi-compat");
        assert!(
            out.status.success(),
            "building tests/abi-compat failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = root.join("target/abi-compat-plugins");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["incompatible", "panicky"] {
            let file = format!(
                "{}xprof_plugin_{name}{}",
                std::env::consts::DLL_PREFIX,
                std::env::consts::DLL_SUFFIX
            );
            std::fs::copy(target.join("debug").join(&file), dir.join(&file)).unwrap();
        }
        for p in &built().plugins {
            std::fs::copy(p, dir.join(p.file_name().unwrap())).unwrap();
        }
        dir
    })
}

fn run_with(sb: &Sandbox, args: &[&str]) -> xprof_tests::Run {
    let mut c = sb.bare_cmd();
    c.arg("--no-default-plugin-dirs")
        .arg("--plugin-dir")
        .arg(bad_plugins_dir())
        .args(args);
    c.output().unwrap().into()
}

#[test]
fn incompatible_plugin_is_refused_with_one_line_while_others_load() {
    let sb = Sandbox::new();
    let r = run_with(&sb, &["plugins", "--format", "json"]);
    r.assert_ok();
    let v = r.json();
    let refused = v["refused"].as_array().unwrap();
    let bad = refused
        .iter()
        .find(|x| x["path"].as_str().unwrap().contains("incompatible"))
        .expect("the incompatible plugin is listed as refused");
    let reason = bad["reason"].as_str().unwrap();
    assert!(!reason.contains('\n') && !reason.is_empty(), "{reason}");
    let names: Vec<&str> = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for want in ["core", "panicky", "example-vendor"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    // The text report is one line per plugin or refusal.
    let text = run_with(&sb, &["plugins"]);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("REFUSED") && l.contains("incompatible")),
        "{}",
        text.stdout
    );
}

#[test]
fn panicking_tool_is_exit_1_with_one_json_error_and_nothing_on_stdout() {
    let sb = Sandbox::new();
    let r = run_with(&sb, &["panic_now"]);
    assert_eq!(r.code, 1, "stderr: {}", r.stderr);
    assert!(r.stdout.is_empty(), "stdout: {}", r.stdout);
    let e = r.error();
    assert_eq!(e["error"]["kind"], "internal");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deliberate panic"),
        "{e}"
    );
    assert_eq!(e["tool"], "panic_now");
}

#[test]
fn first_party_wins_a_tool_name_clash() {
    let sb = Sandbox::new();
    let logdir = sb.path().join("logdir");
    std::fs::create_dir_all(logdir.join("plugins/profile/r1")).unwrap();
    let r = run_with(&sb, &["list_runs", logdir.to_str().unwrap()]);
    r.assert_ok();
    let v = r.json();
    assert!(v.get("impostor").is_none(), "{v}");
    assert_eq!(v["runs"][0], "r1");
}
