//! `cargo xtask install` and `cargo xtask test`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::root;

/// The packages that make a complete `xprof`: the host and the first-party plugins.
pub(crate) const PRODUCT: &[&str] = &[
    "xprof",
    "xprof-plugin-core",
    "xprof-plugin-hlo",
    "xprof-plugin-kernel",
    "xprof-plugin-report",
    "xprof-plugin-example-vendor",
];

/// Where cargo puts its output (`$CARGO_TARGET_DIR`, else `<root>/target`).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root().join(p) })
        .unwrap_or_else(|| root().join("target"))
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn step(mut c: Command, what: &str) -> crate::Result {
    eprintln!("xtask: {what}");
    let st = c.status()?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({st})").into())
    }
}

pub(crate) fn flag_value(args: &[String], name: &str) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == name {
            return it.next().cloned();
        }
        if let Some(v) = a.strip_prefix(&format!("{name}=")) {
            return Some(v.to_string());
        }
    }
    None
}

/// `cargo xtask install [--prefix DIR]`: release-build the host and plugins, then install
/// `<prefix>/bin/xprof` and `<prefix>/lib/xprof/plugins/*.so` — the layout the host searches.
/// `cargo install` alone cannot do this: it never installs cdylibs. Default prefix:
/// `$CARGO_HOME` (`~/.cargo`), whose `bin/` is already on PATH for Rust users.
pub fn run(args: &[String]) -> crate::Result {
    let prefix = flag_value(args, "--prefix")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_HOME").map(PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("no --prefix given and neither CARGO_HOME nor HOME is set")?;
    let mut c = cargo();
    c.args(["build", "--release", "--locked"]);
    for p in PRODUCT {
        c.args(["-p", p]);
    }
    step(c, "cargo build --release (host and plugins)")?;
    let (exe, n) = install_into(&target_dir().join("release"), &prefix)?;
    eprintln!(
        "xtask: installed {} and {n} plugins into {}",
        exe.display(),
        prefix.join(PLUGIN_DIR).display()
    );
    Ok(())
}

/// Where the host looks for plugins under its prefix.
pub(crate) const PLUGIN_DIR: &str = "lib/xprof/plugins";

/// Copy the build in `release` (`xprof` and the plugin files beside it) into `<prefix>/bin`
/// and `<prefix>/lib/xprof/plugins`. Returns the installed binary and the number of plugins.
pub(crate) fn install_into(release: &Path, prefix: &Path) -> crate::Result<(PathBuf, usize)> {
    let bin = prefix.join("bin");
    let plugins = prefix.join(PLUGIN_DIR);
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(&plugins)?;
    let exe = bin.join("xprof");
    copy_atomic(&release.join("xprof"), &exe)?;
    let found = plugin_files(release)?;
    for p in &found {
        if let Some(name) = p.file_name() {
            copy_atomic(p, &plugins.join(name))?;
        }
    }
    Ok((exe, found.len()))
}

/// The first-party plugin files (`libxprof_plugin_*.so`) in `dir`, sorted.
pub(crate) fn plugin_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let prefix = format!("{}xprof_plugin_", std::env::consts::DLL_PREFIX);
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with(&prefix) && name.ends_with(std::env::consts::DLL_SUFFIX) {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Copy via a temporary name and rename, so a running `xprof` never sees a half-written file.
fn copy_atomic(from: &Path, to: &Path) -> crate::Result {
    let tmp = to.with_extension("xtask-tmp");
    std::fs::copy(from, &tmp).map_err(|e| format!("copying {}: {e}", from.display()))?;
    std::fs::rename(&tmp, to)?;
    Ok(())
}

/// `cargo xtask test`: every test the project has. Builds the workspace (the end-to-end tests
/// need the plugins as cdylibs, which `cargo test` never builds), runs `cargo test`, then the MCP
/// end-to-end suite with the official Python client.
pub fn test(args: &[String]) -> crate::Result {
    let mut c = cargo();
    c.args(["build", "--workspace"]);
    step(c, "cargo build --workspace")?;
    let mut c = cargo();
    c.args(["test", "--workspace"]);
    c.args(args);
    step(c, "cargo test --workspace")?;
    let mcp = root().join("tests/mcp/run.sh");
    if mcp.exists() {
        let debug = target_dir().join("debug");
        let mut c = Command::new("bash");
        c.arg(&mcp)
            .current_dir(root())
            .env("XPROF_BIN", debug.join("xprof"))
            .env("XPROF_PLUGIN_DIR", &debug);
        step(c, "MCP end-to-end tests (tests/mcp/run.sh)")?;
    } else if std::env::var_os("CI").is_some() {
        return Err("tests/mcp/run.sh is missing".into());
    }
    Ok(())
}
