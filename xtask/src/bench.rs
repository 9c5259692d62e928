//! `cargo xtask bench`: whole-process benchmarks of the release `xprof` binary, and of the
//! competitor `xprof-rs` (PyPI `xprof-rs==0.1.3`) on the same inputs when it is installed.
//!
//! ```text
//! cargo xtask bench [--quick] [--runs N] [--warmup N] [--data DIR] [--corpus DIR]
//!                   [--filter SUBSTR] [--no-build] [--list]
//! ```
//!
//! * Builds `xprof` and the first-party plugins in release mode (skipped with `--no-build`; a
//!   plugin that does not compile is reported and the bench goes on), then
//!   runs every case of [`CASES`] `--warmup` times unmeasured (default 2) and `--runs` times
//!   measured (default 20). `--quick`: 5 runs, 1 warm-up, only the cases on small inputs.
//! * Each measured run is one process: wall time from spawn to reap, and the peak RSS of that
//!   child from `wait4(2)`'s `rusage.ru_maxrss`. With a competitor, the two programs' measured
//!   runs alternate, so that the machine's slow and fast phases weigh on both alike. Output goes to /dev/null; `TMPDIR` is a scratch
//!   directory (results over 10 MB are written there by both tools), and `xprof`'s result cache
//!   and registry index live there too (`XPROF_CACHE_DIR`). `xprof` gets `--no_cache`, so every
//!   run does the whole work, except in the cases marked `cached`, which measure hits. Files a tool writes into its input directories are removed
//!   after each run and listed in the JSON (`wrote_into_input`): xprof-rs writes
//!   `<module>.hlo_proto.pb` beside the capture and would read those on the next run.
//! * A case whose tool `xprof` does not have yet (exit 2, "unknown tool") is reported as
//!   `skipped: tool not available`; one whose input is missing as `skipped: input missing`.
//! * Competitor: `$XPROF_RS_BIN`, else `xprof-rs` beside `$XPROF_RS_PYTHON` (the python of the venv
//!   that has `xprof-rs` installed). Unset: competitor columns are empty. It is called directly
//!   (no interpreter in between), with the XProf-CLI argv of the case.
//! * Inputs: `--data DIR` (default `/work/bench-data`, see `docs/BENCHMARKS.md` for how to make it),
//!   the shared corpus (`--corpus`, else `$XPROF_CORPUS`, else `../shared` beside the workspace) and
//!   the repository's `fixtures/`.
//! * Before the first case, the files of both programs (`xprof`, its plugins, `xprof-rs`) are
//!   dropped from the page cache, so that both are read back from disk alike: a file the linker
//!   has just written is cached as single pages, which a cold process maps ~10 % slower.
//! * Output: a markdown table on stdout and JSON in `<target>/bench/results.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

use crate::install::{PRODUCT, target_dir};

/// One benchmark case. `args` follow the tool name; `{name}` placeholders are replaced by the
/// inputs of [`Inputs::resolve`]. `competitor` is the argv (after the binary) for `xprof-rs`.
struct Case {
    id: &'static str,
    /// What the case measures, for the table.
    what: &'static str,
    tool: &'static str,
    args: &'static [&'static str],
    competitor: Option<&'static [&'static str]>,
    /// Small input: part of `--quick`.
    quick: bool,
    /// Where `xprof` runs from.
    layout: Layout,
    /// `xprof` runs with its result cache (in the bench's scratch directory) instead of
    /// `--no_cache`: the warm-up stores the answer and every measured run is a hit.
    cached: bool,
}

/// Where a case's `xprof` runs from.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// The build directory (`target/release`), the plugins beside the binary.
    Build,
    /// An installed layout (`<prefix>/bin/xprof`, `<prefix>/lib/xprof/plugins`) whose `bin/`
    /// also holds [`CROWDED_BIN_ENTRIES`] other files, like `/usr/local/bin`: the executable's
    /// directory is a plugin directory, so what a call does with it must not grow with it.
    CrowdedInstall,
}

/// Other files in the `bin/` of [`Layout::CrowdedInstall`].
const CROWDED_BIN_ENTRIES: usize = 2000;

const SEED_MODULE: &str = "--module_name=jit_matmul_optimized(17342868964687645945)";
const JAX_LARGE_MODULE: &str = "--module_name=jit_train_step(12)";

/// The benchmark table. Inputs: `seed_logdir`, `seed` (TPU v6e run, 1 MB, 4.2 k events), `x200`
/// (the seed's lines repeated 200 times: 23 MB, 842 k events), `jax_large` (JAX CPU transformer,
/// 700 steps: 56 MB, 1.76 M events), `mlp` (fixtures/ 5-step MLP), `jf_dump` (seed LLO dump),
/// `hlo_dump` (fixtures/ XLA text dump), `ids64` (the seed with every event/stat metadata id
/// shifted by 2^40: xprof-rs 0.1.3 finds no overview in it, XProf does), `jax_large_xp` (the same
/// xplane as `jax_large` alone in its run dir, without the `*.hlo_proto.pb` files the generator
/// wrote beside it, which xprof-rs reads instead of the xplane).
const CASES: &[Case] = &[
    Case {
        id: "startup.list_runs",
        what: "start-up: list runs of the seed logdir",
        tool: "list_runs",
        args: &["{seed_logdir}"],
        competitor: None,
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "get_hosts.seed",
        what: "start-up + read one small capture",
        tool: "get_hosts",
        args: &["{seed}"],
        competitor: Some(&["get_hosts", "{seed}"]),
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "get_hosts.seed_crowded_bin",
        what: "get_hosts.seed, installed beside 2,000 other programs",
        tool: "get_hosts",
        args: &["{seed}"],
        competitor: None,
        quick: true,
        layout: Layout::CrowdedInstall,
        cached: false,
    },
    Case {
        id: "overview.seed_cache_hit",
        what: "overview.seed, served from the result cache",
        tool: "get_overview",
        args: &["{seed}"],
        competitor: Some(&["get_overview", "{seed}"]),
        quick: true,
        layout: Layout::Build,
        cached: true,
    },
    Case {
        id: "load.seed",
        what: "decode every event (list 1 of all)",
        tool: "list_xplane_events",
        args: &["{seed}", "--max_events=1"],
        competitor: Some(&["list_xplane_events", "{seed}", "--max_events=1"]),
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "load.x200",
        what: "decode every event (list 1 of all)",
        tool: "list_xplane_events",
        args: &["{x200}", "--max_events=1"],
        competitor: Some(&["list_xplane_events", "{x200}", "--max_events=1"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "load.jax_large",
        what: "decode every event (list 1 of all)",
        tool: "list_xplane_events",
        args: &["{jax_large}", "--max_events=1"],
        competitor: Some(&["list_xplane_events", "{jax_large}", "--max_events=1"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "aggregate.seed",
        what: "aggregate events by name",
        tool: "aggregate_xplane_events",
        args: &["{seed}"],
        competitor: Some(&["aggregate_xplane_events", "{seed}"]),
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "aggregate.x200",
        what: "aggregate events by name",
        tool: "aggregate_xplane_events",
        args: &["{x200}"],
        competitor: Some(&["aggregate_xplane_events", "{x200}"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "aggregate.jax_large",
        what: "aggregate events by name",
        tool: "aggregate_xplane_events",
        args: &["{jax_large}"],
        competitor: Some(&["aggregate_xplane_events", "{jax_large}"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "overview.mlp",
        what: "overview of the 5-step fixture",
        tool: "get_overview",
        args: &["{mlp}"],
        competitor: Some(&["get_overview", "{mlp}"]),
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "overview.seed",
        what: "overview page",
        tool: "get_overview",
        args: &["{seed}"],
        competitor: Some(&["get_overview", "{seed}"]),
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "overview.ids64",
        what: "overview, metadata ids above 2^32",
        tool: "get_overview",
        args: &["{ids64}"],
        competitor: Some(&["get_overview", "{ids64}"]),
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "overview.x200",
        what: "overview page",
        tool: "get_overview",
        args: &["{x200}"],
        competitor: Some(&["get_overview", "{x200}"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "overview.jax_large",
        what: "overview page",
        tool: "get_overview",
        args: &["{jax_large}"],
        competitor: Some(&["get_overview", "{jax_large}"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "step_trace.jax_large",
        what: "700 host steps",
        tool: "get_step_trace",
        args: &["{jax_large}"],
        competitor: Some(&["get_step_trace", "{jax_large}"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "kpi.jax_large",
        what: "overview KPIs and the allocator peak",
        tool: "get_kpi_metrics",
        args: &["{jax_large}"],
        competitor: Some(&["get_kpi_metrics", "{jax_large}"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "top_hlo_ops.jax_large",
        what: "top HLO ops",
        tool: "get_top_hlo_ops",
        args: &["{jax_large}"],
        competitor: Some(&["get_top_hlo_ops", "{jax_large}"]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "hlo_module.seed",
        what: "HLO text from the capture",
        tool: "get_hlo_module_content",
        args: &["{seed}", SEED_MODULE],
        competitor: Some(&["get_hlo_module_content", "{seed}", SEED_MODULE]),
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "hlo_module.jax_large",
        what: "HLO text from the capture",
        tool: "get_hlo_module_content",
        args: &["{jax_large}", JAX_LARGE_MODULE],
        competitor: Some(&["get_hlo_module_content", "{jax_large}", JAX_LARGE_MODULE]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "hlo_module.jax_large_xplane_only",
        what: "HLO text, no hlo_proto.pb beside the xplane",
        tool: "get_hlo_module_content",
        args: &["{jax_large_xp}", JAX_LARGE_MODULE],
        competitor: Some(&["get_hlo_module_content", "{jax_large_xp}", JAX_LARGE_MODULE]),
        quick: false,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "llo_fit.seed",
        what: "LLO fit summary of the seed jf_dump",
        tool: "get_llo_fit_summary",
        args: &["--dump_dir={jf_dump}"],
        competitor: None,
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
    Case {
        id: "hlo_dump_modules.fixtures",
        what: "list modules of an XLA dump dir",
        tool: "list_hlo_dump_modules",
        args: &["--dump_dir={hlo_dump}"],
        competitor: None,
        quick: true,
        layout: Layout::Build,
        cached: false,
    },
];

struct Opts {
    quick: bool,
    runs: usize,
    warmup: usize,
    data: PathBuf,
    corpus: PathBuf,
    filter: Option<String>,
    build: bool,
    list: bool,
}

fn parse_args(args: &[String]) -> crate::Result<Opts> {
    let root = crate::root();
    let mut o = Opts {
        quick: false,
        runs: 0,
        warmup: usize::MAX,
        data: PathBuf::from("/work/bench-data"),
        corpus: std::env::var_os("XPROF_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("../shared")),
        filter: None,
        build: true,
        list: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let mut value = || -> crate::Result<String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value").into())
        };
        match flag {
            "--quick" => o.quick = true,
            "--runs" => o.runs = value()?.parse().map_err(|_| "--runs: not a number")?,
            "--warmup" => o.warmup = value()?.parse().map_err(|_| "--warmup: not a number")?,
            "--data" => o.data = value()?.into(),
            "--corpus" => o.corpus = value()?.into(),
            "--filter" => o.filter = Some(value()?),
            "--no-build" => o.build = false,
            "--list" => o.list = true,
            "-h" | "--help" => {
                println!(
                    "cargo xtask bench [--quick] [--runs N] [--warmup N] [--data DIR] \
                     [--corpus DIR] [--filter SUBSTR] [--no-build] [--list]\n\
                     Env: XPROF_RS_BIN or XPROF_RS_PYTHON (competitor), XPROF_CORPUS.\n\
                     See docs/BENCHMARKS.md."
                );
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a:?} (see --help)").into()),
        }
    }
    if o.runs == 0 {
        o.runs = if o.quick { 5 } else { 20 };
    }
    if o.warmup == usize::MAX {
        o.warmup = if o.quick { 1 } else { 2 };
    }
    Ok(o)
}

/// The inputs a case can name.
struct Inputs(BTreeMap<&'static str, PathBuf>);

impl Inputs {
    fn new(o: &Opts) -> Inputs {
        let root = crate::root();
        let seed = o.corpus.join("fixtures/seed-v6e");
        let mut m = BTreeMap::new();
        m.insert("seed_logdir", seed.join("logdir"));
        m.insert("seed", seed.join("logdir/plugins/profile/testrun"));
        m.insert("jf_dump", seed.join("jf_dump"));
        m.insert("x200", o.data.join("x200/plugins/profile/x200"));
        m.insert(
            "jax_large",
            o.data
                .join("jax-large/logdir/plugins/profile/transformer_train"),
        );
        m.insert(
            "mlp",
            root.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_steps"),
        );
        m.insert("hlo_dump", root.join("fixtures/jax-cpu/hlo_dump"));
        m.insert("ids64", o.data.join("ids64/plugins/profile/ids64"));
        m.insert(
            "jax_large_xp",
            o.data
                .join("jax-large-xplane-only/plugins/profile/transformer_train"),
        );
        Inputs(m)
    }

    /// Substitute the placeholders; Err(path) names the first input that is missing.
    fn resolve(&self, args: &[&str]) -> Result<Vec<String>, String> {
        let mut out = Vec::with_capacity(args.len());
        for a in args {
            let mut s = (*a).to_string();
            for (name, path) in &self.0 {
                let ph = format!("{{{name}}}");
                if s.contains(&ph) {
                    if !path.exists() {
                        return Err(path.display().to_string());
                    }
                    s = s.replace(&ph, &path.display().to_string());
                }
            }
            out.push(s);
        }
        Ok(out)
    }

    /// The input directories a case names (a file's parent), watched for files the tool writes.
    fn dirs(&self, args: &[&str]) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (name, path) in &self.0 {
            if args.iter().any(|a| a.contains(&format!("{{{name}}}"))) {
                let d = if path.is_dir() {
                    path.clone()
                } else {
                    path.parent().map(Path::to_path_buf).unwrap_or_default()
                };
                if d.is_dir() && !out.contains(&d) {
                    out.push(d);
                }
            }
        }
        out
    }

    /// Bytes of the capture files (`*.xplane.pb`) a case reads, for the table.
    fn input_bytes(&self, args: &[&str]) -> u64 {
        let mut total = 0;
        for (name, path) in &self.0 {
            if !args.iter().any(|a| a.contains(&format!("{{{name}}}"))) {
                continue;
            }
            if let Ok(rd) = std::fs::read_dir(path) {
                for e in rd.flatten() {
                    let n = e.file_name();
                    if n.to_string_lossy().ends_with(".xplane.pb") {
                        total += e.metadata().map(|m| m.len()).unwrap_or(0);
                    }
                }
            }
        }
        total
    }
}

/// Make (or refresh) the [`Layout::CrowdedInstall`] prefix under `dir`: `cargo xtask
/// install`'s layout of the release build in `release` (copied on every bench run: it may have
/// been rebuilt), plus the other entries of `bin/` (made once). Returns the installed binary.
fn crowded_install(release: &Path, dir: &Path) -> crate::Result<PathBuf> {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    for i in 0..CROWDED_BIN_ENTRIES {
        let f = bin.join(format!("program-{i:04}"));
        if !f.exists() {
            std::fs::write(&f, b"")?;
        }
    }
    let exe = crate::install::install_into(release, dir)?.0;
    // The files were just written: until they are older than the result cache's racy margin
    // (100 ms) the host will not store a registry index for them, and every call would load
    // all the plugins. Measured, a `--runs 5` bench of this case alone took 8 ms a call.
    std::thread::sleep(std::time::Duration::from_millis(250));
    Ok(exe)
}

/// Write `path`'s pages back and drop them from the page cache (`POSIX_FADV_DONTNEED` keeps
/// dirty pages, hence the `fsync` first). Whether that was done.
/// (Linux only; elsewhere nothing is dropped.)
fn drop_from_page_cache(path: &Path) -> bool {
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain advice call on a descriptor this function owns.
        f.sync_all().is_ok()
            && unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) } == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        drop(f);
        false
    }
}

pub(crate) fn cargo_build(packages: &[&str]) -> crate::Result<bool> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(crate::root()).args(["build", "--release"]);
    for p in packages {
        cmd.args(["-p", p]);
    }
    Ok(cmd.status()?.success())
}

/// Build the release binary and the plugins. In a checkout where some plugin does not compile,
/// build package by package: the binary must build; a plugin that fails is reported (its tools
/// then show as "skipped: tool not available", or an older build of it is used if present).
fn build_release() -> crate::Result<Vec<String>> {
    eprintln!("bench: cargo build --release (xprof + first-party plugins)");
    if cargo_build(PRODUCT)? {
        return Ok(Vec::new());
    }
    eprintln!("bench: the joint build failed; building package by package");
    let mut failed = Vec::new();
    for p in PRODUCT {
        if !cargo_build(&[p])? {
            if *p == "xprof" {
                return Err("cargo build --release -p xprof failed".into());
            }
            eprintln!("bench: WARNING: {p} does not build; its tools may be missing or stale");
            failed.push(p.to_string());
        }
    }
    Ok(failed)
}

fn competitor_bin() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("XPROF_RS_BIN") {
        return Some(PathBuf::from(b)).filter(|p| p.is_file());
    }
    let py = PathBuf::from(std::env::var_os("XPROF_RS_PYTHON")?);
    Some(py.parent()?.join("xprof-rs")).filter(|p| p.is_file())
}

/// Keeps input directories as they were: XProf and xprof-rs write files into the run directory
/// (`<module>.hlo_proto.pb`, `.cached_tools.json`, op-stats caches) and then read them instead of
/// the capture. Every run starts from the original directory: files that appear are removed after
/// each run and reported (our own tools must never write there).
struct InputGuard {
    dirs: Vec<(PathBuf, std::collections::BTreeSet<std::ffi::OsString>)>,
    wrote: std::collections::BTreeSet<String>,
}

impl InputGuard {
    fn new(dirs: Vec<PathBuf>) -> InputGuard {
        let dirs = dirs
            .into_iter()
            .map(|d| {
                let names = std::fs::read_dir(&d)
                    .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
                    .unwrap_or_default();
                (d, names)
            })
            .collect();
        InputGuard {
            dirs,
            wrote: Default::default(),
        }
    }

    fn sweep(&mut self) {
        for (d, before) in &self.dirs {
            let Ok(rd) = std::fs::read_dir(d) else {
                continue;
            };
            for e in rd.flatten() {
                if before.contains(&e.file_name()) {
                    continue;
                }
                let p = e.path();
                self.wrote.insert(p.display().to_string());
                let _ = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
    }
}

/// One measured process: wall time and the child's own peak RSS.
struct Sample {
    wall_ms: f64,
    rss_kb: u64,
    exit: i32,
}

/// Spawn `bin args`, wait for it with `wait4` and return its wall time, peak RSS and exit code.
fn run_once(bin: &Path, args: &[String], tmp: &Path) -> std::io::Result<Sample> {
    let start = Instant::now();
    let child = Command::new(bin)
        .args(args)
        .env("TMPDIR", tmp)
        // The result cache and registry index of the cases that use them, apart from the user's.
        .env("XPROF_CACHE_DIR", tmp.join("xprof-cache"))
        .env_remove("XPROF_PLUGIN_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; wait4 fills it for the child we just spawned (and reaps it,
    // so `child` is never waited on again; dropping a std Child does not wait).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    drop(child);
    if r == -1 {
        return Err(std::io::Error::last_os_error());
    }
    let exit = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok(Sample {
        wall_ms,
        // Linux reports ru_maxrss in KiB.
        rss_kb: ru.ru_maxrss.max(0) as u64,
        exit,
    })
}

/// First (unmeasured) run with stderr captured, to classify failures.
fn probe(bin: &Path, args: &[String], tmp: &Path) -> std::io::Result<(i32, String)> {
    let out = Command::new(bin)
        .args(args)
        .env("TMPDIR", tmp)
        // The result cache and registry index of the cases that use them, apart from the user's.
        .env("XPROF_CACHE_DIR", tmp.join("xprof-cache"))
        .env_remove("XPROF_PLUGIN_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    Ok((out.status.code().unwrap_or(-1), first))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// One program's side of a case: what it runs, its input guard, and its measured runs.
struct Side<'a> {
    bin: &'a Path,
    args: Vec<String>,
    is_xprof: bool,
    guard: InputGuard,
    /// The record when the side is not measured (skipped or failed at the probe run).
    early: Option<Value>,
    samples: Vec<Sample>,
}

impl<'a> Side<'a> {
    fn new(bin: &'a Path, args: Vec<String>, is_xprof: bool, guard: InputGuard) -> Self {
        Side {
            bin,
            args,
            is_xprof,
            guard,
            early: None,
            samples: Vec::new(),
        }
    }

    /// The probe run (stderr kept, to classify a failure) and the unmeasured warm-up runs.
    fn warm_up(&mut self, o: &Opts, tmp: &Path) -> crate::Result<()> {
        let (code, err) = probe(self.bin, &self.args, tmp)?;
        self.guard.sweep();
        if self.is_xprof && code == 2 && err.contains("unknown tool") {
            self.early = Some(json!({"status": "skipped: tool not available", "exit": code}));
            return Ok(());
        }
        if code != 0 {
            self.early = Some(json!({"status": "failed", "exit": code, "stderr": err}));
            return Ok(());
        }
        for _ in 1..o.warmup {
            run_once(self.bin, &self.args, tmp)?;
            self.guard.sweep();
        }
        Ok(())
    }

    fn run(&mut self, tmp: &Path) -> crate::Result<()> {
        if self.early.is_none() {
            self.samples.push(run_once(self.bin, &self.args, tmp)?);
            self.guard.sweep();
        }
        Ok(())
    }

    /// The JSON record: `status` "ok", "failed" or "skipped: ...", the timings and RSS.
    fn record(&self) -> Value {
        if let Some(r) = &self.early {
            return r.clone();
        }
        let samples = &self.samples;
        let bad: Vec<i32> = samples.iter().map(|s| s.exit).filter(|&e| e != 0).collect();
        let mut wall: Vec<f64> = samples.iter().map(|s| s.wall_ms).collect();
        wall.sort_by(f64::total_cmp);
        let mut rss: Vec<f64> = samples.iter().map(|s| s.rss_kb as f64).collect();
        rss.sort_by(f64::total_cmp);
        let round = |x: f64| (x * 100.0).round() / 100.0;
        let mut r = json!({
            "status": if bad.is_empty() { "ok" } else { "failed" },
            "exit": bad.first().copied().unwrap_or(0),
            "runs": samples.len(),
            "p50_ms": round(percentile(&wall, 0.5)),
            "p90_ms": round(percentile(&wall, 0.9)),
            "min_ms": wall.first().map_or(Value::Null, |&x| json!(round(x))),
            "max_ms": wall.last().map_or(Value::Null, |&x| json!(round(x))),
            "peak_rss_kb": rss.last().copied().unwrap_or(0.0) as u64,
            "p50_rss_kb": percentile(&rss, 0.5) as u64,
            "wall_ms": samples.iter().map(|s| round(s.wall_ms)).collect::<Vec<_>>(),
        });
        if !self.guard.wrote.is_empty() {
            r["wrote_into_input"] = json!(self.guard.wrote);
        }
        r
    }
}

/// Measure the sides of one case: each warms up, then their measured runs alternate (ours,
/// theirs, ours, ...), so that a change of the machine's speed during the case (a shared VM
/// has slow and fast phases) weighs on both alike.
fn measure(sides: &mut [Side<'_>], o: &Opts, tmp: &Path) -> crate::Result<()> {
    for side in sides.iter_mut() {
        side.warm_up(o, tmp)?;
    }
    for _ in 0..o.runs {
        for side in sides.iter_mut() {
            side.run(tmp)?;
        }
    }
    Ok(())
}

fn fmt_ms(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x >= 1000.0 => format!("{:.2} s", x / 1000.0),
        Some(x) => format!("{x:.1} ms"),
        None => "-".into(),
    }
}

fn fmt_mb(v: &Value) -> String {
    v.as_u64()
        .map(|kb| format!("{:.1} MB", kb as f64 / 1024.0))
        .unwrap_or_else(|| "-".into())
}

fn cells(r: &Value) -> [String; 3] {
    match r["status"].as_str() {
        Some("ok") => [
            fmt_ms(&r["p50_ms"]),
            fmt_ms(&r["p90_ms"]),
            fmt_mb(&r["peak_rss_kb"]),
        ],
        Some("failed") => [format!("failed (exit {})", r["exit"]), "".into(), "".into()],
        Some(s) => [s.to_string(), "".into(), "".into()],
        None => ["-".into(), "".into(), "".into()],
    }
}

pub fn run(args: &[String]) -> crate::Result {
    let o = parse_args(args)?;
    let cases: Vec<&Case> = CASES
        .iter()
        .filter(|c| !o.quick || c.quick)
        .filter(|c| o.filter.as_deref().is_none_or(|f| c.id.contains(f)))
        .collect();
    if o.list {
        for c in &cases {
            println!("{:<28} xprof {} {}", c.id, c.tool, c.args.join(" "));
        }
        return Ok(());
    }
    let build_failures = if o.build {
        build_release()?
    } else {
        Vec::new()
    };
    let target = target_dir();
    let xprof = target.join("release/xprof");
    if !xprof.is_file() {
        return Err(format!(
            "{} not found (build it, or drop --no-build)",
            xprof.display()
        )
        .into());
    }
    let comp = competitor_bin();
    let inputs = Inputs::new(&o);
    let out_dir = target.join("bench");
    let tmp = out_dir.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    eprintln!(
        "bench: {} cases, {} runs + {} warm-up each; competitor: {}",
        cases.len(),
        o.runs,
        o.warmup,
        comp.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "none (set XPROF_RS_PYTHON or XPROF_RS_BIN)".into())
    );

    let crowded = if cases.iter().any(|c| c.layout == Layout::CrowdedInstall) {
        Some(crowded_install(
            &target.join("release"),
            &out_dir.join("crowded-install"),
        )?)
    } else {
        None
    };

    // Both programs' files start out of the page cache, to be read back by readahead like any
    // program not run for a while: `xprof`'s were just written by the linker (through a shared
    // mapping, which leaves them cached as single pages, and a cold process maps those ~10 %
    // slower than the same bytes read back), xprof-rs's by pip.
    let mut programs = vec![xprof.clone()];
    let plugin_files = |dir: &Path| crate::install::plugin_files(dir).unwrap_or_default();
    programs.extend(plugin_files(&target.join("release")));
    if let Some(exe) = &crowded {
        programs.push(exe.clone());
        if let Some(prefix) = exe.parent().and_then(Path::parent) {
            programs.extend(plugin_files(&prefix.join(crate::install::PLUGIN_DIR)));
        }
    }
    programs.extend(comp.iter().cloned());
    let dropped = programs.iter().filter(|p| drop_from_page_cache(p)).count();
    eprintln!(
        "bench: dropped {dropped} of {} program files from the page cache",
        programs.len()
    );

    let mut results = Vec::new();
    for c in &cases {
        let xprof = match (c.layout, &crowded) {
            (Layout::CrowdedInstall, Some(exe)) => exe,
            _ => &xprof,
        };
        eprint!("bench: {:<28}", c.id);
        let mut rec = json!({
            "id": c.id, "what": c.what, "tool": c.tool,
            "argv": std::iter::once(c.tool).chain(c.args.iter().copied()).collect::<Vec<_>>(),
            "input_bytes": inputs.input_bytes(c.args),
        });
        let mut sides = Vec::new();
        let ours_missing = match inputs.resolve(c.args) {
            Err(p) => Some(json!({"status": format!("skipped: input missing ({p})")})),
            Ok(mut a) => {
                a.insert(0, c.tool.to_string());
                if !c.cached {
                    a.push("--no_cache".into());
                }
                let guard = InputGuard::new(inputs.dirs(c.args));
                sides.push(Side::new(xprof, a, true, guard));
                None
            }
        };
        let theirs_missing = match (&comp, c.competitor) {
            (Some(bin), Some(cargs)) => match inputs.resolve(cargs) {
                Err(p) => Some(Some(
                    json!({"status": format!("skipped: input missing ({p})")}),
                )),
                Ok(a) => {
                    let guard = InputGuard::new(inputs.dirs(cargs));
                    sides.push(Side::new(bin, a, false, guard));
                    None
                }
            },
            _ => Some(None),
        };
        measure(&mut sides, &o, &tmp)?;
        let mut records = sides.iter().map(Side::record);
        let ours = match ours_missing {
            Some(r) => r,
            None => records.next().unwrap_or_default(),
        };
        if let Some(wrote) = ours.get("wrote_into_input") {
            eprint!(" [xprof WROTE INTO ITS INPUT: {wrote}]");
        }
        let theirs = match theirs_missing {
            Some(r) => r,
            None => records.next(),
        };
        if let Some(t) = &theirs {
            let ratio = |k: &str| match (ours[k].as_f64(), t[k].as_f64()) {
                (Some(a), Some(b)) if a > 0.0 && ours["status"] == "ok" && t["status"] == "ok" => {
                    json!((b / a * 100.0).round() / 100.0)
                }
                _ => Value::Null,
            };
            rec["ratio_time_p50"] = ratio("p50_ms");
            rec["ratio_peak_rss"] = ratio("peak_rss_kb");
            rec["competitor"] = t.clone();
        }
        eprintln!(
            " xprof: {}{}",
            cells(&ours).join(" "),
            theirs
                .as_ref()
                .map(|t| format!(" | xprof-rs: {}", cells(t).join(" ")))
                .unwrap_or_default()
        );
        rec["xprof"] = ours;
        results.push(rec);
    }
    let _ = std::fs::remove_dir_all(&tmp);

    // Markdown table.
    println!(
        "| case | input | xprof p50 | xprof p90 | xprof peak RSS | xprof-rs p50 | xprof-rs p90 | \
         xprof-rs peak RSS | time ratio | RSS ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &results {
        let [a, b, c] = cells(&r["xprof"]);
        let [d, e, f] = r
            .get("competitor")
            .map(cells)
            .unwrap_or_else(|| ["n/a".into(), "".into(), "".into()]);
        let ratio = |k: &str| {
            r[k].as_f64()
                .map(|x| format!("{x:.2}x"))
                .unwrap_or_else(|| "-".into())
        };
        let bytes = r["input_bytes"].as_u64().unwrap_or(0);
        let input = if bytes == 0 {
            "-".to_string()
        } else {
            format!("{:.1} MB", bytes as f64 / 1e6)
        };
        println!(
            "| {} | {input} | {a} | {b} | {c} | {d} | {e} | {f} | {} | {} |",
            r["id"].as_str().unwrap_or(""),
            ratio("ratio_time_p50"),
            ratio("ratio_peak_rss"),
        );
    }
    println!(
        "\nratio = xprof-rs / xprof (above 1: xprof is faster or smaller). {} runs after {} \
         warm-up, whole processes, wall time spawn-to-reap, peak RSS from wait4.",
        o.runs, o.warmup
    );

    let doc = json!({
        "xprof": xprof.display().to_string(),
        "competitor": comp.as_ref().map(|p| p.display().to_string()),
        "runs": o.runs,
        "warmup": o.warmup,
        "quick": o.quick,
        "build_failures": build_failures,
        "program_files_dropped_from_page_cache": dropped,
        "data": o.data.display().to_string(),
        "corpus": o.corpus.display().to_string(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "unix_time": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        "results": results,
    });
    let path = out_dir.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
    eprintln!("bench: wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_files_are_the_plugins_and_they_can_be_dropped_from_the_page_cache() {
        let dir = std::env::temp_dir().join(format!("xtask-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let so = |n: &str| {
            format!(
                "{}{n}{}",
                std::env::consts::DLL_PREFIX,
                std::env::consts::DLL_SUFFIX
            )
        };
        for name in [
            so("xprof_plugin_b"),
            so("xprof_plugin_a"),
            so("other"),
            "xprof".into(),
        ] {
            std::fs::write(dir.join(name), b"bytes").unwrap();
        }
        let found = crate::install::plugin_files(&dir).unwrap();
        assert_eq!(
            found,
            [
                dir.join(so("xprof_plugin_a")),
                dir.join(so("xprof_plugin_b"))
            ]
        );
        assert!(found.iter().all(|p| drop_from_page_cache(p)) || !cfg!(target_os = "linux"));
        assert!(!drop_from_page_cache(&dir.join("missing")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn percentile_nearest_rank() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&v, 0.5), 5.0);
        assert_eq!(percentile(&v, 0.9), 9.0);
        assert_eq!(percentile(&[3.0], 0.9), 3.0);
    }

    #[test]
    fn case_ids_are_unique_and_placeholders_known() {
        let inputs = Inputs::new(&parse_args(&[]).unwrap());
        let mut ids = std::collections::HashSet::new();
        for c in CASES {
            assert!(ids.insert(c.id), "duplicate case id {}", c.id);
            for a in c.args.iter().chain(c.competitor.unwrap_or(&[]).iter()) {
                if let Some(start) = a.find('{') {
                    let name = &a[start + 1..a[start..].find('}').unwrap() + start];
                    // Module names like jit_x(123) contain no braces; only inputs do.
                    assert!(
                        inputs.0.contains_key(name),
                        "unknown placeholder {name} in {}",
                        c.id
                    );
                }
            }
        }
    }
}
