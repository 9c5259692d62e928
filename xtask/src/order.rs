//! `cargo xtask symbol-order [--corpus DIR]`: write the `symbol-order.txt` of every package
//! whose build links with `xprof_link::for_cold_start` (the host and the first-party plugins):
//! its hot functions, which the linker then places together at the start of the code (see
//! `crates/link`, where the measurement is).
//!
//! It builds the release artifacts and runs every documented example of every tool (the
//! `Examples` of `xprof <tool> --help`) as a cold process under valgrind's callgrind, which
//! names each function every loaded object executed. Each run has the result cache on, so the
//! first run of an example stores its answer; the first examples run once more to take the
//! cache's hit path. A package's file lists the functions it defines that ran, grouped by the
//! set of tools whose examples ran them: those of more tools first (start-up, capture
//! resolution, output), and each group together, so that one tool's own code is one stretch
//! rather than interleaved with other tools' code run as often; by address within a group.
//! Examples on
//! the shared corpus run when it is there (`--corpus`, else `$XPROF_CORPUS`, else `../shared`).
//!
//! Symbol names carry hashes that change with the toolchain, the profile and the dependency
//! versions; names the build no longer defines are skipped by the linker, so a stale list only
//! loses speed. `cargo xtask bench` reports how much of each list the built artifacts define.
//! Needs valgrind and binutils' `nm`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use xprof_link::{ORDER_FILE, defined_functions, listed_symbols};

use crate::install::target_dir;
use crate::root;

/// The artifacts with a symbol order: (file name in `target/release`, package directory).
pub(crate) const ARTIFACTS: &[(&str, &str)] = &[
    ("xprof", "host"),
    ("libxprof_plugin_core.so", "plugins/core"),
    ("libxprof_plugin_hlo.so", "plugins/hlo"),
    ("libxprof_plugin_kernel.so", "plugins/kernel"),
];

/// How many of the first examples run a second time, for the cache's hit path.
const HIT_RUNS: usize = 3;

pub fn run(args: &[String]) -> crate::Result {
    let corpus = crate::install::flag_value(args, "--corpus")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XPROF_CORPUS").map(PathBuf::from))
        .unwrap_or_else(|| root().join("../shared"));
    for tool in ["valgrind", "nm"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Err(
                format!("`{tool}` is required (Debian: apt-get install {})", {
                    if tool == "nm" { "binutils" } else { tool }
                })
                .into(),
            );
        }
    }
    if !crate::bench::cargo_build(crate::install::PRODUCT)? {
        return Err("cargo build --release failed".into());
    }
    let release = target_dir().join("release");
    let xprof = release.join("xprof");
    let scratch = target_dir().join("symbol-order");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let examples = examples(&xprof, &corpus)?;
    if examples.is_empty() {
        return Err("no tool has a runnable example".into());
    }
    let env = |c: &mut Command| {
        c.env("XPROF_CACHE_DIR", scratch.join("cache"))
            .env("TMPDIR", &scratch)
            .env_remove("XPROF_PLUGIN_PATH")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    };
    // Unprofiled: the registry index is written, so profiled runs load one plugin each.
    let mut warm = Command::new(&xprof);
    warm.arg("tools");
    env(&mut warm);
    warm.status()?;
    let runs: Vec<&Vec<String>> = examples
        .iter()
        .chain(examples.iter().take(HIT_RUNS))
        .collect();
    let mut executed: Vec<(String, HashSet<(String, String)>)> = Vec::new();
    for (i, argv) in runs.iter().enumerate() {
        eprintln!(
            "symbol-order: [{}/{}] xprof {}",
            i + 1,
            runs.len(),
            argv.join(" ")
        );
        let out = scratch.join(format!("callgrind.{i}"));
        let mut c = Command::new("valgrind");
        c.args(["--tool=callgrind", "--demangle=no", "--compress-strings=no"])
            .arg("--compress-pos=no")
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&xprof)
            .args(argv.iter());
        env(&mut c);
        c.status()?;
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        executed.push((argv[0].clone(), functions_executed(&text)));
    }
    let rustc = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    for (file, dir) in ARTIFACTS {
        let artifact = release.join(file);
        let order = order(
            &tools_running(&executed, file),
            &defined_functions(&artifact)
                .ok_or_else(|| format!("nm {} failed", artifact.display()))?,
        );
        let mut text = format!(
            "# Hot functions of {file}, grouped by the tools that ran them, those of more tools\n\
             # first. Written by `cargo xtask symbol-order` from {} runs of the tools'\n\
             # documented examples, {rustc}.\n\
             # Read by crates/link (the linker's --symbol-ordering-file).\n",
            runs.len()
        );
        for name in &order {
            text.push_str(name);
            text.push('\n');
        }
        let path = root().join(dir).join(ORDER_FILE);
        std::fs::write(&path, text)?;
        eprintln!(
            "symbol-order: {} ({} functions)",
            path.strip_prefix(root()).unwrap_or(&path).display(),
            order.len()
        );
    }
    Ok(())
}

/// Every tool's documented examples as argument vectors (placeholders filled in); examples on
/// the corpus are left out when it is missing.
fn examples(xprof: &Path, corpus: &Path) -> crate::Result<Vec<Vec<String>>> {
    let listing = Command::new(xprof)
        .args(["tools", "--format", "json"])
        .output()?;
    let listing: serde_json::Value = serde_json::from_slice(&listing.stdout)?;
    let mut tools = Vec::new();
    for p in listing["plugins"].as_array().into_iter().flatten() {
        for t in p["tools"].as_array().into_iter().flatten() {
            if let Some(name) = t["name"].as_str() {
                tools.push(name.to_string());
            }
        }
    }
    let fixtures = root().join("fixtures");
    let mut out = Vec::new();
    for tool in tools {
        let help = Command::new(xprof).args([&tool, "--help"]).output()?;
        for line in example_lines(&String::from_utf8_lossy(&help.stdout)) {
            if line.contains("${CORPUS}") && !corpus.is_dir() {
                continue;
            }
            let line = line
                .replace("${FIXTURES}", &fixtures.display().to_string())
                .replace("${CORPUS}", &corpus.display().to_string());
            if let Some(words) = shell_words(&line)
                && words.first().map(String::as_str) == Some("xprof")
            {
                out.push(words[1..].to_vec());
            }
        }
    }
    Ok(out)
}

/// The command lines of a tool's help text's `Examples` section.
fn example_lines(help: &str) -> Vec<&str> {
    help.lines()
        .skip_while(|l| !l.starts_with("Examples"))
        .map(str::trim)
        .filter(|l| l.starts_with("xprof "))
        .collect()
}

/// Split a command line the way a POSIX shell would for plain words and single quotes (the
/// quoting the help text uses: `'...'`, with `'\''` for a quote inside). `None` on an
/// unterminated quote.
fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        q => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// (object file name, function) for every function a callgrind profile gives a cost: `fn=`
/// lines, under the last `ob=` line (uncompressed names: `--compress-strings=no`).
fn functions_executed(profile: &str) -> HashSet<(String, String)> {
    let mut out = HashSet::new();
    let mut object = String::new();
    for line in profile.lines() {
        if let Some(ob) = line.strip_prefix("ob=") {
            object = Path::new(ob.trim())
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
        } else if let Some(f) = line.strip_prefix("fn=") {
            out.insert((object.clone(), f.trim().to_string()));
        }
    }
    out
}

/// The tools whose runs executed each function of the object `file` (runs: the tool, and the
/// functions the run executed).
fn tools_running(
    runs: &[(String, HashSet<(String, String)>)],
    file: &str,
) -> HashMap<String, BTreeSet<String>> {
    let mut tools: HashMap<String, BTreeSet<String>> = HashMap::new();
    for (tool, run) in runs {
        for (object, function) in run {
            if object == file {
                tools
                    .entry(function.clone())
                    .or_default()
                    .insert(tool.clone());
            }
        }
    }
    tools
}

/// The executed functions the artifact defines, grouped by the set of tools that ran them:
/// groups of more tools first, each group in one stretch (a call then touches the shared
/// groups and its tool's own), by address within a group (which keeps functions the compiler
/// placed together, together).
fn order(
    tools: &HashMap<String, BTreeSet<String>>,
    defined: &BTreeMap<String, u64>,
) -> Vec<String> {
    let mut hot: Vec<(&String, &BTreeSet<String>, u64)> = tools
        .iter()
        .filter_map(|(name, t)| defined.get(name).map(|a| (name, t, *a)))
        .collect();
    hot.sort_by(|a, b| {
        (b.1.len().cmp(&a.1.len()))
            .then_with(|| a.1.cmp(b.1))
            .then(a.2.cmp(&b.2))
            .then(a.0.cmp(b.0))
    });
    hot.into_iter().map(|(name, _, _)| name.clone()).collect()
}

/// How many names of `artifact`'s order file the built artifact defines, of how many listed;
/// `None` without an order file. For the bench's report.
pub(crate) fn coverage(artifact: &Path, dir: &str) -> Option<(usize, usize)> {
    let text = std::fs::read_to_string(root().join(dir).join(ORDER_FILE)).ok()?;
    let defined = defined_functions(artifact)?;
    let listed: Vec<&str> = listed_symbols(&text).collect();
    let found = listed.iter().filter(|n| defined.contains_key(**n)).count();
    Some((found, listed.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_examples_split_like_a_shell() {
        let help = concat!(
            "Usage: xprof t [OPTIONS]\n\nExamples (x):\n  # First\n",
            "  xprof t ${FIXTURES}/a --re 'a b' --q 'it'\\''s'\n",
            "  # Second\n  xprof t2\n\nHost flags: --format\n",
        );
        let lines = example_lines(help);
        assert_eq!(
            lines,
            [
                "xprof t ${FIXTURES}/a --re 'a b' --q 'it'\\''s'",
                "xprof t2"
            ]
        );
        assert_eq!(
            shell_words(lines[0]).unwrap(),
            ["xprof", "t", "${FIXTURES}/a", "--re", "a b", "--q", "it's"]
        );
        assert_eq!(shell_words("a 'open"), None);
        assert_eq!(shell_words("  a   b ").unwrap(), ["a", "b"]);
        assert_eq!(shell_words("a ''").unwrap(), ["a", ""]);
    }

    #[test]
    fn callgrind_functions_belong_to_the_last_named_object() {
        let profile = "version: 1\nob=/x/target/release/xprof\nfn=_ZN5xprof3run17h0E\n0 3\n\
                       cob=/lib/libc.so.6\ncfn=malloc\ncalls=1 0\n0 9\n\
                       ob=/x/target/release/libxprof_plugin_core.so\nfn=_ZN4core4scan17h1E\n0 1\n";
        let got = functions_executed(profile);
        let want: HashSet<(String, String)> = [
            ("xprof", "_ZN5xprof3run17h0E"),
            ("libxprof_plugin_core.so", "_ZN4core4scan17h1E"),
        ]
        .into_iter()
        .map(|(o, f)| (o.to_string(), f.to_string()))
        .collect();
        // A callee named by `cfn=` has no cost line of its own here: not counted.
        assert_eq!(got, want);
    }

    #[test]
    fn shared_functions_come_first_and_each_tool_s_own_stay_together() {
        let defined: BTreeMap<String, u64> = [
            ("a", 0x1000),
            ("b", 0x3000),
            ("c", 0x2000),
            ("cold", 0x5000),
            ("d", 0x800),
            ("e", 0x6000),
        ]
        .into_iter()
        .map(|(n, a)| (n.to_string(), a))
        .collect();
        let run = |tool: &str, fns: &[&str]| {
            let fns = fns
                .iter()
                .map(|f| ("lib.so".to_string(), f.to_string()))
                .chain([("other.so".to_string(), "a".to_string())])
                .collect::<HashSet<_>>();
            (tool.to_string(), fns)
        };
        let runs = [
            run("t1", &["b", "a", "e"]),
            run("t2", &["b", "c", "gone"]),
            run("t1", &["b", "d", "e"]),
        ];
        let tools = tools_running(&runs, "lib.so");
        assert_eq!(tools["b"].len(), 2);
        assert_eq!(tools["e"].len(), 1, "two runs of one tool count once");
        // `b` is shared; then t1's own (`d`, `a`, `e` by address), then t2's. `gone` ran but
        // the artifact no longer defines it; `cold` never ran.
        assert_eq!(order(&tools, &defined), ["b", "d", "a", "e", "c"]);
    }

    /// Every package whose build script links with `for_cold_start` has an entry here (so
    /// `symbol-order` writes its list), and every entry is such a package.
    #[test]
    fn the_artifact_table_matches_the_build_scripts() {
        let mut linked = Vec::new();
        for dir in ["host", "plugins"] {
            let base = root().join(dir);
            let candidates: Vec<PathBuf> = if dir == "host" {
                vec![base]
            } else {
                std::fs::read_dir(&base)
                    .unwrap()
                    .flatten()
                    .map(|e| e.path())
                    .collect()
            };
            for pkg in candidates {
                let script = std::fs::read_to_string(pkg.join("build.rs")).unwrap_or_default();
                if script.contains("for_cold_start") {
                    let rel = pkg
                        .strip_prefix(root())
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    linked.push(rel);
                }
            }
        }
        linked.sort();
        let mut table: Vec<String> = ARTIFACTS.iter().map(|(_, d)| d.to_string()).collect();
        table.sort();
        assert_eq!(linked, table);
    }

    /// Every package of the table has its list checked in (its build script watches the file
    /// only when it exists: one added later is not seen until the script reruns), in LLD's
    /// format: one symbol name a line, each once.
    #[test]
    fn every_order_file_is_there_and_lists_each_symbol_once() {
        for (_, dir) in ARTIFACTS {
            let path = root().join(dir).join(ORDER_FILE);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!("{}: {e}; run `cargo xtask symbol-order`", path.display())
            });
            let names: Vec<&str> = listed_symbols(&text).collect();
            assert!(!names.is_empty(), "{} lists nothing", path.display());
            let mut seen = HashSet::new();
            for n in &names {
                assert!(
                    !n.contains(char::is_whitespace),
                    "{}: {n:?}",
                    path.display()
                );
                assert!(seen.insert(*n), "{}: {n} twice", path.display());
            }
        }
    }
}
