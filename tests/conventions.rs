//! Every tool, on every capture we have, keeps the output conventions: a JSON object on stdout
//! and nothing else on success; on failure nothing on stdout and exactly one JSON error on
//! stderr whose kind matches the exit code; never an internal error on well-formed or
//! malformed input; nothing written into the run directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;
use xprof_testkit::{Ref, XSpaceBuilder, simple_hlo_proto};
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
    // Every run of our own captures: JAX, TensorFlow and PyTorch/XLA.
    for framework in ["jax-cpu", "tf-cpu", "ptxla-cpu"] {
        let own = fixtures().join(framework).join("logdir/plugins/profile");
        for e in std::fs::read_dir(&own).unwrap().flatten() {
            v.push((
                format!("fixtures/{framework}/{}", e.file_name().to_string_lossy()),
                e.path(),
            ));
        }
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

/// Run every tool on `run_dir`, adding each broken convention to `bad`; fails if a tool wrote
/// into the run directory. Returns how many tools answered (exit 0, `no_data` included).
fn run_every_tool(
    sb: &Sandbox,
    tools: &[(String, Vec<String>)],
    label: &str,
    run_dir: &Path,
    bad: &mut Vec<String>,
) -> usize {
    let before = snapshot(run_dir);
    let mut answered = 0;
    for (tool, extra) in tools {
        let mut args = vec![tool.as_str(), run_dir.to_str().unwrap(), "--no_cache"];
        args.extend(extra.iter().map(String::as_str));
        let r = sb.run(&args);
        if r.code == 0 {
            answered += 1;
        }
        if r.code == 1 {
            bad.push(format!("{tool} on {label}: internal error: {}", r.stderr));
        } else if let Some(v) = violations(tool, label, &r) {
            bad.push(v);
        }
    }
    assert_eq!(
        before,
        snapshot(run_dir),
        "a tool wrote into the run directory of {label}"
    );
    answered
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
        run_every_tool(&sb, &tools, &label, &copy, &mut bad);
    }
    assert!(
        bad.is_empty(),
        "{} violations:\n{}",
        bad.len(),
        bad.join("\n\n")
    );
}

/// Shapes of capture we have no real file of: a GPU run (two GPUs, CUDA streams, kernels
/// naming their HLO ops, host launches joined by correlation ids, host step roots), a TPU host
/// with two chips and `Steps` lines, a run of two hosts, and a capture whose planes hold no
/// events at all. Written under `root`, one run each; returns (label, run dir).
fn synthetic_captures(root: &Path) -> Vec<(String, PathBuf)> {
    let hlo = simple_hlo_proto(
        "jit_step",
        &[
            ("p0", "parameter"),
            ("fusion.3", "fusion"),
            ("dot.4", "dot"),
        ],
    );
    let gpu_plane = |p: xprof_testkit::PlaneBuilder, k: u64| {
        p.stat("clock_rate", 1_410_000u64)
            .stat("core_count", 108u64)
            .stat("memory_bandwidth", 1_555_000_000_000u64)
            .stat("device_vendor", "Nvidia")
            .line_with_id(7, "Stream #7(Compute)", |l| {
                l.timestamp_ns(1_000_000)
                    .event("fusion_3_kernel", 1_000_000, 25_000_000)
                    .stat("hlo_op", "fusion.3")
                    .stat("hlo_module", "jit_step")
                    .stat("program_id", 42u64)
                    .stat("correlation_id", 10 * k + 1)
                    .stat("group_id", 0i64)
                    .stat(
                        "kernel_details",
                        "regs:32 static_shared:0 grid:80,1,1 block:128,1,1",
                    )
                    .event("sm80_xmma_gemm_f16", 30_000_000, 40_000_000)
                    .stat("hlo_op", "dot.4")
                    .stat("hlo_module", "jit_step")
                    .stat("program_id", 42u64)
                    .stat("correlation_id", 10 * k + 2)
                    .stat("group_id", 1i64)
                    .stat("kernel_details", "regs:128 grid:4,1,1 block:256,1,1")
            })
            .line_with_id(8, "Stream #8(MemcpyH2D)", |l| {
                l.timestamp_ns(1_000_000)
                    .event("MemcpyH2D", 0, 2_000_000)
                    .stat("correlation_id", 10 * k + 3)
                    .stat("memcpy_details", "kind_src:pageable size:4096")
            })
    };
    let host_plane = |p: xprof_testkit::PlaneBuilder| {
        p.line_with_id(1234, "python3/1234", |l| {
            l.timestamp_ns(1_000_000)
                .event("train_step", 0, 60_000_000)
                .stat("_r", 1i64)
                .stat("step_num", 0i64)
                .stat("group_id", 0i64)
                .event("cuLaunchKernel", 500_000, 300_000)
                .stat("correlation_id", 11u64)
                .stat("group_id", 0i64)
                .event("train_step", 65_000_000, 60_000_000)
                .stat("_r", 1i64)
                .stat("step_num", 1i64)
                .stat("group_id", 1i64)
                .event("MemoryAllocation", 66_000_000, 0)
                .stat("bytes_allocated", 4096i64)
                .stat("allocator_name", Ref("GPU_0_bfc"))
        })
    };
    let gpu = XSpaceBuilder::new()
        .hostname("gpu-host")
        .plane("/device:GPU:0", |p| gpu_plane(p, 0))
        .plane("/device:GPU:1", |p| gpu_plane(p, 1))
        .plane("/host:CPU", host_plane)
        .plane("/host:metadata", |p| p.hlo_module(42, 42, &hlo))
        .plane("Task Environment", |p| {
            p.stat("profile_start_time", 1_700_000_000_000_000_000u64)
                .stat("profile_stop_time", 1_700_000_001_000_000_000u64)
        });
    let tpu_plane = |p: xprof_testkit::PlaneBuilder| {
        p.stat("peak_teraflops_per_second", 918.0)
            .stat("peak_hbm_bw_gigabytes_per_second", 1640.0)
            .line("XLA Modules", |l| {
                l.event("jit_step(42)", 0, 1_000_000)
                    .stat("group_id", 0i64)
                    .event("jit_step(42)", 2_000_000, 1_000_000)
                    .stat("group_id", 1i64)
            })
            .line("XLA Ops", |l| {
                l.event("fusion.3", 1_000, 400_000)
                    .metadata_stat("hlo_category", "output fusion")
                    .metadata_stat("flops", 1.0e9)
                    .metadata_stat("bytes_accessed", 4096u64)
                    .metadata_stat("program_id", 42u64)
                    .metadata_stat("symbol_id", 3u64)
                    .device_timespan(900, 400_100)
                    .stat("group_id", 0i64)
                    .event("dot.4", 2_001_000, 500_000)
                    .metadata_stat("hlo_category", "convolution")
                    .metadata_stat("flops", 4.0e9)
                    .metadata_stat("bytes_accessed", 8192u64)
                    .metadata_stat("program_id", 42u64)
                    .metadata_stat("symbol_id", 4u64)
                    .stat("group_id", 1i64)
            })
            .line("Steps", |l| {
                l.event("0", 0, 1_000_000)
                    .stat("group_id", 0i64)
                    .event("1", 2_000_000, 1_000_000)
                    .stat("group_id", 1i64)
            })
    };
    let tpu_host = |name: &str| {
        XSpaceBuilder::new()
            .hostname(name)
            .plane("/device:TPU:0", tpu_plane)
            .plane("/device:TPU:1", tpu_plane)
            .plane("/host:CPU", host_plane)
            .plane("/host:metadata", |p| p.hlo_module(42, 42, &hlo))
    };
    let empty = XSpaceBuilder::new()
        .hostname("idle")
        .plane("/device:TPU:0", |p| p.line("XLA Ops", |l| l))
        .plane("/host:CPU", |p| p)
        .warning("the profiler saw no activity");
    let mut out = Vec::new();
    let mut write = |label: &str, hosts: &[(&str, &XSpaceBuilder)]| {
        let logdir = root.join(label);
        for (host, b) in hosts {
            b.write_run(&logdir, "run", host).unwrap();
        }
        out.push((
            format!("synthetic/{label}"),
            logdir.join("plugins/profile/run"),
        ));
    };
    write("gpu", &[("gpu-host", &gpu)]);
    write("tpu_two_chips", &[("host0", &tpu_host("host0"))]);
    write(
        "two_hosts",
        &[("host0", &tpu_host("host0")), ("host1", &tpu_host("host1"))],
    );
    write("no_events", &[("idle", &empty)]);
    // Async ops: start/done pairs, an Async XLA Ops line, a SparseCore.
    write(
        "async_ops",
        &[("host0", &xprof_testkit::async_ops::async_host())],
    );
    out
}

#[test]
fn every_capture_tool_keeps_the_conventions_on_synthetic_gpu_multi_chip_and_multi_host_runs() {
    let sb = Sandbox::new();
    let tools = capture_tools(&sb);
    let mut bad = Vec::new();
    let mut answered = 0;
    for (label, run_dir) in synthetic_captures(&sb.path().join("synthetic")) {
        answered += run_every_tool(&sb, &tools, &label, &run_dir, &mut bad);
    }
    assert!(
        bad.is_empty(),
        "{} violations:\n{}",
        bad.len(),
        bad.join("\n\n")
    );
    // Most tools answer on these captures (the rest say why not, as structured errors).
    assert!(
        answered * 2 > tools.len() * 4,
        "only {answered} answers from {} tools on 4 captures",
        tools.len()
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

/// `diff_sessions` takes two captures by keyword rather than the capture selector, so the
/// loops above do not reach it: the same conventions, with the failing side named.
#[test]
fn diff_sessions_keeps_the_conventions_and_names_the_failing_side() {
    let sb = Sandbox::new();
    let good = fixtures().join("jax-cpu/logdir/plugins/profile/mlp_steps");
    let run = sb.path().join("bad/plugins/profile/run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("host0.xplane.pb"), b"\x3b\xff\xff\xff").unwrap();
    let before = snapshot(&good);
    let arg = |k: &str, p: &Path| format!("--{k}={}", p.display());
    let r = sb.run(&[
        "diff_sessions",
        &arg("baseline_session_id", &good),
        &arg("optimized_session_id", &good),
        "--no_cache",
    ]);
    assert_eq!(
        violations("diff_sessions", "a capture against itself", &r),
        None
    );
    assert_eq!(r.json()["verdict"]["result"], "unchanged");
    for (side, path, code) in [
        ("optimized_session_id", run.as_path(), 4),
        ("optimized_session_id", &sb.path().join("nowhere"), 3),
    ] {
        let r = sb.run(&[
            "diff_sessions",
            &arg("baseline_session_id", &good),
            &arg(side, path),
            "--no_cache",
        ]);
        assert_eq!(r.code, code, "{side}={}: {}", path.display(), r.stderr);
        assert_eq!(violations("diff_sessions", "a bad side", &r), None);
        assert!(r.stderr.contains(&format!("--{side}: ")), "{}", r.stderr);
    }
    // Without the second capture: a usage error.
    let r = sb.run(&["diff_sessions", &arg("baseline_session_id", &good)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(
        before,
        snapshot(&good),
        "diff_sessions wrote into a run directory"
    );
}
