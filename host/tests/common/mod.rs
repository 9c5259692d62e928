//! Support for integration tests that run the built `xprof` binary with real plugins.
//!
//! `cargo test` builds no cdylibs, so the plugins are built by a nested `cargo build` once per
//! test binary and copied into a private directory (cargo releases its build lock before it
//! runs tests, so this does not deadlock).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The plugins the tests load.
const PLUGINS: &[&str] = &["xprof-plugin-core", "xprof-plugin-example-vendor"];

pub fn xprof_bin() -> &'static str {
    env!("CARGO_BIN_EXE_xprof")
}

/// A directory holding freshly built `libxprof_plugin_*.so` for this test binary.
pub fn plugin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "--message-format=json-render-diagnostics"]);
        // Follow the profile of the binary under test.
        if Path::new(xprof_bin())
            .components()
            .any(|c| c.as_os_str() == "release")
        {
            // Nothing is built in release yet: only the plugins, not the whole workspace
            // (each cdylib is a whole-program link).
            cmd.arg("--release");
            for p in PLUGINS {
                cmd.args(["-p", p]);
            }
        } else {
            // The whole workspace, as `cargo xtask test` builds it first (only the cdylibs of
            // `PLUGINS` are kept below): `-p` on a subset unifies dependency features
            // differently, so cargo would compile a second copy of most crates (over a minute
            // of CI, and the disk that CI ran out of).
            cmd.arg("--workspace");
        }
        let out = cmd
            .stderr(Stdio::inherit())
            .output()
            .expect("running the nested cargo build of the plugins");
        assert!(
            out.status.success(),
            "building the plugins failed: {} (cargo's errors are above; in a shared checkout another change may not compile yet)",
            out.status
        );
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        remove_stale_plugin_dirs(&tmp);
        let dir = tmp.join(format!("xprof-plugins-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut copied = 0;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            // Proc-macro crates are shared objects too: keep only the cdylibs.
            let cdylib = v["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|x| x == "cdylib"));
            let wanted = v["target"]["name"]
                .as_str()
                .is_some_and(|n| PLUGINS.iter().any(|p| p.replace('-', "_") == n));
            if v["reason"] != "compiler-artifact" || !cdylib || !wanted {
                continue;
            }
            for f in v["filenames"].as_array().into_iter().flatten() {
                let f = PathBuf::from(f.as_str().unwrap_or_default());
                if f.to_string_lossy().ends_with(std::env::consts::DLL_SUFFIX) {
                    // A hard link costs no space (debug plugins are large); cargo replaces
                    // rather than rewrites its outputs, so the link keeps this build.
                    let dst = dir.join(f.file_name().unwrap());
                    if std::fs::hard_link(&f, &dst).is_err() {
                        std::fs::copy(&f, &dst).unwrap();
                    }
                    copied += 1;
                }
            }
        }
        assert_eq!(copied, PLUGINS.len(), "expected one cdylib per plugin");
        dir
    })
}

/// Plugin directories of earlier test runs whose process is gone.
fn remove_stale_plugin_dirs(tmp: &Path) {
    let Ok(rd) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("xprof-plugins-") else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The shared corpus: `$XPROF_CORPUS`, else `<workspace root>/../shared`. Under `CI` a missing
/// corpus fails the test; elsewhere the test is skipped (returns `None`).
pub fn corpus() -> Option<PathBuf> {
    // The one definition of where the corpus is and that CI never skips.
    xprof_plugin_api::sdk::testing::corpus(env!("CARGO_MANIFEST_DIR"))
}

pub fn seed_logdir() -> Option<PathBuf> {
    corpus().map(|c| c.join("fixtures/seed-v6e/logdir"))
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// An `xprof` command with only the test's plugins, the given cache directory, an empty
/// config dir, cache tracing on, and none of the caller's xprof environment.
pub fn xprof(cache: &Path) -> Command {
    xprof_with_plugins(cache, plugin_dir())
}

/// [`xprof`] with another plugin directory.
pub fn xprof_with_plugins(cache: &Path, plugins: &Path) -> Command {
    let mut c = Command::new(xprof_bin());
    c.args(["--no-default-plugin-dirs", "--plugin-dir"])
        .arg(plugins)
        .env("XPROF_CACHE_DIR", cache)
        .env("XDG_CONFIG_HOME", cache.join("no-config"))
        .env("XPROF_CACHE_TRACE", "1")
        .env_remove("XPROF_CACHE_TTL")
        .env_remove("XPROF_LOGDIR")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null());
    c
}

/// The cache events (`hit`, `miss`, `stored`, ...) traced on stderr.
pub fn cache_events(out: &Output) -> Vec<String> {
    cache_trace(out).into_iter().map(|(e, _)| e).collect()
}

/// The cache events with their reasons (`""` when none).
pub fn cache_trace(out: &Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let c = &v["cache"];
            Some((
                c["event"].as_str()?.to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            ))
        })
        .collect()
}

pub fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "xprof failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

pub fn hostnames(v: &Value) -> Vec<String> {
    v["hosts"]
        .as_array()
        .unwrap_or_else(|| panic!("no hosts in {v}"))
        .iter()
        .map(|h| h["hostname"].as_str().unwrap().to_string())
        .collect()
}
