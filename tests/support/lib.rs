//! Test support: build the real `xprof` binary and its plugins once per test binary, then run
//! them as a user would, each test in a fresh temp dir.
//!
//! `cargo test` never builds cdylibs, so the first test to ask runs a nested
//! `cargo build --message-format=json-render-diagnostics` and collects the artifacts. Cargo
//! releases its build lock before running tests, so this does not deadlock.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

pub mod mcp;

pub struct Built {
    /// The `xprof` executable (its own directory also holds the plugins, as after `cargo build`).
    pub xprof: PathBuf,
    /// A directory holding only the plugin cdylibs (for `--plugin-dir`).
    pub plugin_dir: PathBuf,
    pub plugins: Vec<PathBuf>,
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Build (once) and return the binary and plugins.
pub fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cmd = Command::new(env!("CARGO"));
        // The whole workspace, as `cargo xtask test` builds it first: a subset of packages
        // unifies dependency features differently, so cargo would compile a second copy of
        // those crates (minutes of CI time, and gigabytes of disk that CI ran out of).
        cmd.current_dir(workspace_root()).args([
            "build",
            "--workspace",
            "--message-format=json-render-diagnostics",
        ]);
        let out = cmd.output().expect("running cargo build");
        assert!(
            out.status.success(),
            "nested cargo build failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut xprof = None;
        let mut plugins = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if v["reason"] != "compiler-artifact" {
                continue;
            }
            if let Some(exe) = v["executable"].as_str()
                && v["target"]["name"] == "xprof"
            {
                xprof = Some(PathBuf::from(exe));
            }
            for f in v["filenames"].as_array().into_iter().flatten() {
                if let Some(f) = f.as_str()
                    && f.ends_with(std::env::consts::DLL_SUFFIX)
                    && Path::new(f)
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.contains("xprof_plugin_"))
                {
                    plugins.push(PathBuf::from(f));
                }
            }
        }
        let xprof = xprof.expect("cargo reported no xprof executable");
        let plugin_dir = workspace_root().join("target/test-plugins");
        std::fs::create_dir_all(&plugin_dir).unwrap();
        for p in &plugins {
            let dest = plugin_dir.join(p.file_name().unwrap());
            // Copy via a temp name + rename so parallel test binaries never see a torn file.
            let tmp = plugin_dir.join(format!(
                ".{}.{}",
                p.file_name().unwrap().to_string_lossy(),
                std::process::id()
            ));
            std::fs::copy(p, &tmp).unwrap();
            std::fs::rename(&tmp, &dest).unwrap();
        }
        Built {
            xprof,
            plugin_dir,
            plugins,
        }
    })
}

/// The shared corpus (`$XPROF_CORPUS`, else `../shared`); `None` outside CI when absent,
/// a panic under `CI`.
pub fn corpus() -> Option<PathBuf> {
    // The one definition of where the corpus is and that CI never skips.
    xprof_plugin_api::sdk::testing::corpus(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixtures() -> PathBuf {
    workspace_root().join("fixtures")
}

/// The result of one `xprof` run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
    /// The one JSON error object on stderr.
    pub fn error(&self) -> Value {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "expected exactly one stderr line, got:\n{}",
            self.stderr
        );
        serde_json::from_str(lines[0])
            .unwrap_or_else(|e| panic!("stderr is not JSON ({e}): {}", lines[0]))
    }
    pub fn assert_ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// A test's sandbox: a fresh temp dir used as cwd, HOME, TMPDIR and cache dir, so no test sees
/// another's state or the developer's.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    pub fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `xprof --no-default-plugin-dirs --plugin-dir <built> ARGS`, hermetic.
    pub fn cmd(&self) -> Command {
        let b = built();
        let mut c = Command::new(&b.xprof);
        c.arg("--no-default-plugin-dirs")
            .arg("--plugin-dir")
            .arg(&b.plugin_dir);
        self.hermetic(&mut c);
        c
    }

    /// The same binary with no flags at all (default discovery).
    pub fn bare_cmd(&self) -> Command {
        self.bare_cmd_of(&built().xprof)
    }

    /// [`Sandbox::bare_cmd`] for the binary at `program` (a copy or a link of it).
    pub fn bare_cmd_of(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        self.hermetic(&mut c);
        c
    }

    fn hermetic(&self, c: &mut Command) {
        let home = self.path().join("home");
        let tmp = self.path().join("tmp");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        c.current_dir(self.path())
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env_remove("XPROF_PLUGIN_PATH")
            .env_remove("XPROF_LOGDIR")
            .env_remove("XPROF_CACHE_DIR")
            .env_remove("XLA_HLO_DUMP_DIR")
            .env_remove("XLA_JF_DUMP_DIR")
            .env_remove("RUST_BACKTRACE");
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.cmd()
            .args(args)
            .output()
            .expect("running xprof")
            .into()
    }
}
