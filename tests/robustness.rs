//! Issue 30: no input, closed pipe or hostile argument kills a call without a JSON error.
//! Each test is named after the bug it pins.

use std::process::Stdio;

use xprof_tests::mcp::Mcp;
use xprof_tests::{Run, Sandbox};

/// Run `xprof ARGS` with its stdout a pipe whose reader is already closed, so every write
/// fails with EPIPE (`xprof cache stats | true`, deterministically).
fn run_into_closed_pipe(sb: &Sandbox, args: &[&str]) -> Run {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    sb.cmd()
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("running xprof")
        .into()
}

#[test]
fn cache_stats_into_a_closed_pipe_does_not_panic() {
    let sb = Sandbox::new();
    for args in [
        &["cache", "stats"][..],
        &["cache", "clear"],
        &["--version"],
        &["--format", "json"],
        &["plugins"],
        &["list_runs", "--help"],
    ] {
        let r = run_into_closed_pipe(&sb, args);
        assert!(
            !r.stderr.contains("panicked"),
            "{args:?}: exit {}, stderr:\n{}",
            r.code,
            r.stderr
        );
        assert_eq!(r.code, 0, "{args:?}: stderr:\n{}", r.stderr);
        assert_eq!(r.stderr, "", "{args:?}: a closed pipe is a quiet exit");
    }
}

/// `xprof mcp --http 0.0.0.0:0` without a token is refused, and a taken port cannot be bound:
/// either way stderr is the one JSON error, with no banner before it.
#[test]
fn mcp_http_bind_failure_prints_no_banner_before_the_error() {
    let sb = Sandbox::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    for (addr, needle) in [
        ("0.0.0.0:0", "without a token"),
        (taken.as_str(), "cannot listen"),
    ] {
        let r: Run = sb
            .cmd()
            .env_remove("XPROF_MCP_TOKEN")
            .args(["mcp", "--http", addr])
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 2, "{addr}: {}", r.stderr);
        let e = r.error();
        assert_eq!(e["error"]["kind"], "usage", "{addr}: {e}");
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{addr}: {msg}");
        assert_eq!(r.stdout, "", "{addr}: no URL is printed");
    }
}

/// Whether this process runs as root (who can read any file, so a test that needs an
/// unreadable file runs `xprof` as `nobody`).
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `xprof --no_cache ARGS` as a user who cannot read a mode-000 file (this user, or `nobody`
/// when the tests run as root; the sandbox is opened up so that user can enter it).
fn run_unprivileged(sb: &Sandbox, args: &[&str]) -> Run {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let mut c = sb.cmd();
    c.arg("--no_cache").args(args);
    if running_as_root() {
        std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        c.uid(65534).gid(65534);
    }
    c.output().expect("running xprof").into()
}

/// A copy of `src`'s files in `<sandbox>/<name>`.
fn copy_dir(sb: &Sandbox, src: &std::path::Path, name: &str) -> std::path::PathBuf {
    let dst = sb.path().join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    dst
}

fn make_unreadable(p: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o000)).unwrap();
}

fn assert_path_error_naming(r: &Run, file: &std::path::Path) {
    assert_eq!(r.code, 3, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let e = r.error();
    assert_eq!(e["error"]["kind"], "path", "{e}");
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(
        e["error"]["message"].as_str().unwrap().contains(name),
        "the message names {name}: {e}"
    );
    assert!(
        e["error"]["hint"].as_str().is_some_and(|h| !h.is_empty()),
        "a hint, not null: {e}"
    );
}

/// `r` failed with exit 4, an `invalid_value` error whose message contains `needle`; the error.
fn assert_invalid_value_saying(r: &Run, needle: &str) -> serde_json::Value {
    assert_eq!(r.code, 4, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let e = r.error();
    assert_eq!(e["error"]["kind"], "invalid_value", "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains(needle),
        "the message says {needle}: {e}"
    );
    e
}

#[test]
fn unreadable_hlo_dump_file_is_a_path_error_not_no_data() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let dir = copy_dir(&sb, &corpus.join("fixtures/seed-v6e/hlo_dump"), "hlo_dump");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    make_unreadable(&file);
    let r = run_unprivileged(
        &sb,
        &[
            "get_custom_call_mlir",
            "--hlo_dump_dir",
            dir.to_str().unwrap(),
        ],
    );
    assert_path_error_naming(&r, &file);
}

#[test]
fn unreadable_mosaic_dump_file_is_a_path_error_not_no_data() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let dir = copy_dir(&sb, &corpus.join("fixtures/seed-v6e/mosaic_dump"), "mosaic");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    make_unreadable(&file);
    let r = run_unprivileged(
        &sb,
        &[
            "get_custom_call_mlir",
            "--mosaic_dump_dir",
            dir.to_str().unwrap(),
        ],
    );
    assert_path_error_naming(&r, &file);
}

#[test]
fn unreadable_llo_dump_file_is_a_path_error_with_a_hint_not_null() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let dir = copy_dir(&sb, &corpus.join("fixtures/seed-v6e/jf_dump"), "jf_dump");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().ends_with("-final_bundles.txt"))
        .expect("a final_bundles file");
    make_unreadable(&file);
    let program = "matmul_optimized.1";
    let r = run_unprivileged(
        &sb,
        &[
            "get_llo_bundles",
            "--dump_dir",
            dir.to_str().unwrap(),
            "--program",
            program,
        ],
    );
    assert_path_error_naming(&r, &file);
}

/// `<sandbox>/<name>` holding a symbolic link to each file of `src`.
fn link_dir(sb: &Sandbox, src: &std::path::Path, name: &str) -> std::path::PathBuf {
    let dst = sb.path().join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::os::unix::fs::symlink(e.path().canonicalize().unwrap(), dst.join(e.file_name()))
            .unwrap();
    }
    dst
}

/// The result without the `dump_dir` it echoes (the copy and the links differ there only).
fn without_dir(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("dump_dir");
        o.remove("capture");
    }
    v
}

#[test]
fn symlinked_hlo_dump_files_are_followed_like_copies() {
    let sb = Sandbox::new();
    let src = xprof_tests::fixtures().join("jax-cpu/hlo_dump");
    let copy = copy_dir(&sb, &src, "copy");
    let links = link_dir(&sb, &src, "links");
    for args in [
        &["list_hlo_dump_modules"][..],
        &[
            "get_hlo_dump",
            "--module_pattern",
            "jit_train_step",
            "--max_lines",
            "20",
        ],
    ] {
        let run = |d: &std::path::Path| {
            let mut a: Vec<&str> = args.to_vec();
            a.extend(["--dump_dir", d.to_str().unwrap()]);
            let r = sb.run(&a);
            r.assert_ok();
            without_dir(r.json())
        };
        let (c, l) = (run(&copy), run(&links));
        assert!(c.to_string().contains("jit_train_step"), "{c}");
        assert_eq!(
            c.to_string().replace("/copy/", "/links/"),
            l.to_string(),
            "{args:?}"
        );
    }
}

#[test]
fn symlinked_llo_dump_files_are_followed_like_copies() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let src = corpus.join("fixtures/seed-v6e/jf_dump");
    let copy = copy_dir(&sb, &src, "copy");
    let links = link_dir(&sb, &src, "links");
    for args in [
        &["list_llo_programs"][..],
        &["get_llo_bundles", "--program", "matmul_optimized.1"],
    ] {
        let run = |d: &std::path::Path| {
            let mut a: Vec<&str> = args.to_vec();
            a.extend(["--dump_dir", d.to_str().unwrap()]);
            let r = sb.run(&a);
            r.assert_ok();
            without_dir(r.json())
        };
        let (c, l) = (run(&copy), run(&links));
        assert!(c.to_string().contains("matmul_optimized.1"), "{c}");
        assert_eq!(
            c.to_string().replace("/copy/", "/links/"),
            l.to_string(),
            "{args:?}"
        );
    }
}

/// A recursive CTE with no stop condition never returned (over MCP its thread spun until the
/// server exited); it is now stopped by the time limit, exit 4 naming `--timeout_s`.
#[test]
fn sql_recursive_cte_that_never_ends_stops_at_the_time_limit() {
    let sb = Sandbox::new();
    let logdir = xprof_tests::fixtures().join("jax-cpu/logdir");
    let r = sb.run(&[
        "query_hlo_graph",
        logdir.to_str().unwrap(),
        "--run",
        "matmul",
        "--mode",
        "sql",
        "--sql",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
        "--timeout_s",
        "1",
    ]);
    let e = assert_invalid_value_saying(&r, "time limit");
    assert!(
        e["error"]["hint"].as_str().unwrap().contains("--timeout_s"),
        "{e}"
    );
}

#[test]
fn sql_rows_past_max_rows_are_exit_4_naming_the_limit() {
    let sb = Sandbox::new();
    let logdir = xprof_tests::fixtures().join("jax-cpu/logdir");
    let r = sb.run(&[
        "query_hlo_graph",
        logdir.to_str().unwrap(),
        "--run",
        "matmul",
        "--mode",
        "sql",
        "--sql",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500) SELECT x FROM c",
        "--limit",
        "0",
        "--max_rows",
        "100",
    ]);
    let e = assert_invalid_value_saying(&r, "more than 100 rows");
    assert!(
        e["error"]["hint"].as_str().unwrap().contains("--max_rows"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// MCP worker isolation: a raw JSON-RPC session over stdio.

/// A call that never ends on its own (SQL with a time limit far beyond the test's).
fn endless_sql() -> serde_json::Value {
    serde_json::json!({
        "path": xprof_tests::fixtures().join("jax-cpu/logdir"), "run": "matmul", "mode": "sql",
        "sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
        "timeout_s": 3600,
    })
}

fn hosts_args() -> serde_json::Value {
    serde_json::json!({"path": xprof_tests::fixtures().join("jax-cpu/logdir")})
}

fn tool_error(result: &serde_json::Value) -> serde_json::Value {
    assert_eq!(result["isError"], true, "{result}");
    result["structuredContent"]["error"].clone()
}

#[test]
fn mcp_call_over_the_time_limit_is_stopped_and_the_server_answers_the_next() {
    let sb = Sandbox::new();
    let mut mcp = Mcp::start(&sb, &["--call_timeout_s", "1"], &[]);
    let e = tool_error(&mcp.call(1, "query_hlo_graph", endless_sql()));
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("time limit") && msg.contains("--call_timeout_s"),
        "{e}"
    );
    let ok = mcp.call(2, "get_hosts", hosts_args());
    assert_eq!(ok["isError"], false, "{ok}");
    mcp.finish();
}

#[test]
fn mcp_call_over_the_memory_limit_is_stopped() {
    let sb = Sandbox::new();
    let mut mcp = Mcp::start(&sb, &["--call_max_rss_mb", "1"], &[]);
    let e = tool_error(&mcp.call(1, "query_hlo_graph", endless_sql()));
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("memory") && msg.contains("--call_max_rss_mb"),
        "{e}"
    );
    mcp.finish();
}

#[test]
fn mcp_call_whose_worker_aborts_is_one_failed_call() {
    let sb = Sandbox::new();
    let mut mcp = Mcp::start(&sb, &[], &[("XPROF_FAILPOINT_ABORT", "get_hosts")]);
    let e = tool_error(&mcp.call(1, "get_hosts", hosts_args()));
    assert_eq!(e["kind"], "internal", "{e}");
    assert!(e["message"].as_str().unwrap().contains("signal 6"), "{e}");
    let ok = mcp.call(2, "list_runs", hosts_args());
    assert_eq!(ok["isError"], false, "{ok}");
    mcp.finish();
}

#[test]
fn mcp_cancelled_call_stops_its_worker() {
    let sb = Sandbox::new();
    let mut mcp = Mcp::start(&sb, &[], &[]);
    mcp.send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "query_hlo_graph", "arguments": endless_sql()}}),
    );
    mcp.send(
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "test"}}),
    );
    let ok = mcp.call(2, "get_hosts", hosts_args());
    assert_eq!(ok["isError"], false, "{ok}");
    let stderr = mcp.finish();
    assert!(stderr.contains("cancelled by the client"), "{stderr}");
}

/// `<sandbox>/logdir/plugins/profile/<name>` holding a copy of the jax-cpu matmul XSpace.
fn run_dir_with_the_matmul_capture(sb: &Sandbox, name: &str) -> std::path::PathBuf {
    let run = sb.path().join("logdir/plugins/profile").join(name);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(
        xprof_tests::fixtures().join("jax-cpu/logdir/plugins/profile/matmul/host0.xplane.pb"),
        run.join("host0.xplane.pb"),
    )
    .unwrap();
    run
}

/// A run directory with the matmul XSpace beside an `.hlo_proto.pb` of `len` bytes that are
/// all zeros (a sparse file: no disk is used).
fn run_with_a_zero_hlo_proto(sb: &Sandbox, len: u64) -> std::path::PathBuf {
    let run = run_dir_with_the_matmul_capture(sb, "big");
    let f = std::fs::File::create(run.join("jit_big(1).hlo_proto.pb")).unwrap();
    f.set_len(len).unwrap();
    run
}

/// Case 1: any buffer over ~1 GiB freed in a capture plugin aborted the process (`free():
/// invalid pointer`, exit 134): the plugins' allocator handed mimalloc's huge blocks to
/// glibc's `free`. A 1.1 GB proto is now read, found invalid and freed like any other.
#[test]
fn an_hlo_proto_over_1_gib_is_a_json_error_not_an_abort() {
    let sb = Sandbox::new();
    let run = run_with_a_zero_hlo_proto(&sb, 1_150_000_000);
    let r: Run = sb
        .cmd()
        .args(["--no_cache", "get_hlo_module_content", "--path"])
        .arg(&run)
        .args(["--module_name", "jit_big"])
        .output()
        .unwrap()
        .into();
    assert_invalid_value_saying(&r, "jit_big(1).hlo_proto.pb");
}

/// Case 3: a capture that is a symlink to a file whose size reads as 0 but streams data
/// (`/proc/self/pagemap`) was read without bound (GBs in seconds). Reads stop at the size the
/// file had when opened: here nothing, so an empty capture.
#[test]
fn a_capture_symlinked_to_a_streaming_proc_file_is_read_to_its_size_not_without_bound() {
    let sb = Sandbox::new();
    let run = sb.path().join("logdir/plugins/profile/proc");
    std::fs::create_dir_all(&run).unwrap();
    std::os::unix::fs::symlink("/proc/self/pagemap", run.join("host0.xplane.pb")).unwrap();
    for tool in ["list_xplane_events", "aggregate_xplane_events"] {
        let r: Run = sb
            .cmd()
            .args(["--no_cache", tool, "--path"])
            .arg(&run)
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 0, "{tool}: {}", r.stderr);
        let v = r.json();
        assert_eq!(v["total_matched"], 0, "{tool}: {v}");
    }
}

/// Case 3: a FIFO where a capture file is expected would block the reader forever (and
/// `/dev/zero` would never end): only regular files are read.
#[test]
fn a_fifo_named_like_a_capture_is_refused_without_blocking() {
    let sb = Sandbox::new();
    let run = run_dir_with_the_matmul_capture(&sb, "fifo");
    let fifo = run.join("jit_x(1).hlo_proto.pb");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a path string that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let r: Run = sb
        .cmd()
        .args(["--no_cache", "list_hlo_modules", "--path"])
        .arg(&run)
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let names = r.json()["modules"].to_string();
    assert!(
        !names.contains("jit_x"),
        "the FIFO is not a module: {names}"
    );
}

/// Case 10: `get_hlo_dump` on a stage file with one 80 MB line used 941 MB and left a 480 MB
/// spill file per call: `--max_lines` does not bound a line. `--max_bytes` (default 1 MB) does.
#[test]
fn get_hlo_dump_of_a_stage_file_with_one_huge_line_is_bounded_by_max_bytes() {
    let sb = Sandbox::new();
    let dump = copy_dir(
        &sb,
        &xprof_tests::fixtures().join("jax-cpu/hlo_dump"),
        "dump",
    );
    let stage = dump.join("module_0002.jit_train_step.cpu_after_optimizations.txt");
    let mut text = std::fs::read_to_string(&stage).unwrap();
    text.push_str(&format!("  c = f32[] constant({})\n", "7".repeat(20 << 20)));
    std::fs::write(&stage, text).unwrap();
    let r: Run = sb
        .cmd()
        // --full: the 16 KB output budget would cut the text first; this is max_bytes' bound.
        .args(["--no_cache", "--full", "get_hlo_dump", "--dump_dir"])
        .arg(&dump)
        .args(["--module_pattern", "train_step"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.len() < 2_000_000, "{} bytes", r.stdout.len());
    let v = r.json();
    assert_eq!(v["truncated"], true, "{}", &r.stdout[..300]);
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .ends_with("Use max_bytes=-1 to see all)")
    );
}

// ---------------------------------------------------------------------------------------------
// One MCP session sent every hostile input of issue 30 (cases 1–6), over stdio and over HTTP:
// each gets its own answer and the next normal call is still answered correctly.

/// A hostile call: what it is (for messages), the tool, its arguments, and a check of its
/// `tools/call` result.
struct Hostile {
    case: &'static str,
    tool: &'static str,
    args: serde_json::Value,
    check: fn(&serde_json::Value),
}

/// The failpoints the hostile session runs with (debug builds): the plugin panic and the
/// truncation under a map (docs/CONVENTIONS.md).
const HOSTILE_ENV: &[(&str, &str)] = &[
    ("XPROF_FAILPOINT_PANIC", "get_device_information"),
    ("XPROF_FAILPOINT_TRUNCATE_MAPPED", "moving.xplane.pb"),
];

fn error_kind_saying(result: &serde_json::Value, kind: &str, needle: &str) {
    let e = tool_error(result);
    assert_eq!(e["kind"], kind, "{e}");
    assert!(e["message"].as_str().unwrap().contains(needle), "{e}");
}

/// Lay out cases 1–5 under `<sandbox>/root` (the MCP root) and `<sandbox>/outside`.
fn hostile_calls(sb: &Sandbox, seed: &std::path::Path) -> (std::path::PathBuf, Vec<Hostile>) {
    let root = sb.path().join("logdir");
    let profile = root.join("plugins/profile");
    // Case 1: a 1.1 GB proto (sparse zeros), freed after it is found invalid.
    let big = run_with_a_zero_hlo_proto(sb, 1_150_000_000);
    // Case 2: a mapped capture truncated while it is read (the failpoint does it).
    let moving = profile.join("moving");
    std::fs::create_dir_all(&moving).unwrap();
    std::fs::copy(
        seed.join("plugins/profile/testrun/host0.xplane.pb"),
        moving.join("moving.xplane.pb"),
    )
    .unwrap();
    // Case 3: a capture that is a streaming /proc file, and a FIFO named like a proto.
    let proc = profile.join("proc");
    std::fs::create_dir_all(&proc).unwrap();
    std::os::unix::fs::symlink("/proc/self/pagemap", proc.join("host0.xplane.pb")).unwrap();
    let fifo = run_dir_with_the_matmul_capture(sb, "fifo");
    let c = std::ffi::CString::new(fifo.join("jit_x(1).hlo_proto.pb").to_str().unwrap()).unwrap();
    // SAFETY: a path string that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Case 5: a run inside the root whose capture is a link to a damaged file outside it.
    let outside = sb.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("garbage.xplane.pb"), [0xffu8; 64]).unwrap();
    let linked = profile.join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(
        outside.join("garbage.xplane.pb"),
        linked.join("host0.xplane.pb"),
    )
    .unwrap();
    let matmul = run_dir_with_the_matmul_capture(sb, "matmul");
    let calls = vec![
        Hostile {
            case: "1: a proto over 1 GiB",
            tool: "get_hlo_module_content",
            args: serde_json::json!({"path": big, "module_name": "jit_big"}),
            check: |r| error_kind_saying(r, "invalid_value", "jit_big(1).hlo_proto.pb"),
        },
        Hostile {
            case: "1: a panic inside a plugin",
            tool: "get_device_information",
            args: serde_json::json!({"path": matmul}),
            check: |r| error_kind_saying(r, "internal", "panic"),
        },
        Hostile {
            case: "2: a capture truncated under its map",
            tool: "list_xplane_events",
            args: serde_json::json!({"path": moving}),
            check: |r| error_kind_saying(r, "invalid_value", "changed while being read"),
        },
        Hostile {
            // Read to its size (0 bytes; the CLI test above), then refused: /proc is outside.
            case: "3: a capture that is /proc/self/pagemap",
            tool: "aggregate_xplane_events",
            args: serde_json::json!({"path": proc}),
            check: |r| error_kind_saying(r, "path", "outside the MCP server's roots"),
        },
        Hostile {
            case: "3: a FIFO named like an HLO proto",
            tool: "list_hlo_modules",
            args: serde_json::json!({"path": fifo}),
            check: |r| {
                assert_eq!(r["isError"], false, "{r}");
                let modules = r["structuredContent"]["modules"].to_string();
                assert!(!modules.contains("jit_x"), "{modules}");
            },
        },
        Hostile {
            case: "4: a recursive SQL CTE that never ends",
            tool: "query_hlo_graph",
            args: {
                let mut a = endless_sql();
                a["path"] = serde_json::json!(root);
                a["timeout_s"] = serde_json::json!(1);
                a
            },
            check: |r| error_kind_saying(r, "invalid_value", "time limit"),
        },
        Hostile {
            case: "5: a file outside the roots reached through a run inside them",
            tool: "get_overview",
            args: serde_json::json!({"path": linked}),
            check: |r| error_kind_saying(r, "path", "outside the MCP server's roots"),
        },
        Hostile {
            case: "6: a schema-invalid argument",
            tool: "get_hosts",
            args: serde_json::json!({"path": 5}),
            check: |r| error_kind_saying(r, "usage", "`path` must be string"),
        },
    ];
    (root, calls)
}

/// The normal call sent after each hostile one, and its check.
fn normal_call(root: &std::path::Path) -> serde_json::Value {
    serde_json::json!({"path": root.join("plugins/profile/matmul")})
}

fn assert_normal_answer(result: &serde_json::Value, after: &str) {
    assert_eq!(result["isError"], false, "after case {after}: {result}");
    assert_eq!(
        result["structuredContent"]["hosts"][0]["hostname"], "host0",
        "after case {after}: {result}"
    );
}

/// Case 6: messages that are not JSON-RPC, each to get a parse error (id null) and, over HTTP,
/// this status.
fn malformed_messages() -> Vec<(Vec<u8>, u16)> {
    let mut huge = br#"{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"x": ""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 50 << 20));
    huge.extend(br#""}}"#);
    vec![
        (b"garbage".to_vec(), 400),
        (b"\xff\xfe{}".to_vec(), 400),
        (
            br#"{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}"#.to_vec(),
            400,
        ),
        ([b"[".repeat(100_000), b"]".repeat(100_000)].concat(), 400),
        (huge, 413),
    ]
}

#[test]
fn mcp_stdio_session_sent_every_hostile_input_answers_each_and_the_next_normal_call() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let (root, calls) = hostile_calls(&sb, &corpus.join("fixtures/seed-v6e/logdir"));
    let mut mcp = Mcp::start_in(&sb, &root, &[], HOSTILE_ENV);
    let mut id = 1;
    for h in &calls {
        let r = mcp.call(id, h.tool, h.args.clone());
        (h.check)(&r);
        assert_normal_answer(&mcp.call(id + 1, "get_hosts", normal_call(&root)), h.case);
        id += 2;
    }
    for (i, (bad, _)) in malformed_messages().iter().enumerate() {
        mcp.send_raw(bad);
        let reply = mcp.next_message();
        assert!(reply["id"].is_null(), "message {i}: {reply}");
        assert_eq!(reply["error"]["code"], -32700, "message {i}: {reply}");
        assert_normal_answer(&mcp.call(id, "get_hosts", normal_call(&root)), "6");
        id += 1;
    }
    mcp.finish();
}

/// `xprof mcp --http 127.0.0.1:0`, stopped when dropped.
struct HttpMcp {
    child: std::process::Child,
    addr: String,
}

impl HttpMcp {
    fn start(sb: &Sandbox, root: &std::path::Path, env: &[(&str, &str)]) -> HttpMcp {
        use std::io::BufRead;
        let mut c = sb.cmd();
        c.args([
            "--no_cache",
            "mcp",
            "--tools",
            "all",
            "--http",
            "127.0.0.1:0",
            "--root",
        ])
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("starting xprof mcp --http");
        let mut url = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut url)
            .unwrap();
        let addr = url
            .trim()
            .strip_prefix("http://")
            .and_then(|u| u.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("the first stdout line is not the URL: {url:?}"))
            .to_string();
        HttpMcp { child, addr }
    }

    /// POST one body; the status and the JSON reply.
    fn post(&self, body: &[u8]) -> (u16, serde_json::Value) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        // The server may answer (and close) before it has read an oversized body.
        let _ = s.write_all(body);
        let mut resp = Vec::new();
        let _ = s.read_to_end(&mut resp);
        let resp = String::from_utf8_lossy(&resp);
        let status = resp
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let (_, body) = resp.split_once("\r\n\r\n").unwrap_or(("", ""));
        let v = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("{e}: the reply body is not JSON: {resp}"));
        (status, v)
    }

    fn call(&self, tool: &str, args: serde_json::Value) -> serde_json::Value {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        let (status, v) = self.post(body.to_string().as_bytes());
        assert_eq!(status, 200, "{tool}: {v}");
        assert!(v["result"].is_object(), "{tool}: {v}");
        v["result"].clone()
    }
}

impl Drop for HttpMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mcp_http_server_sent_every_hostile_input_answers_each_and_the_next_normal_call() {
    let Some(corpus) = xprof_tests::corpus() else {
        return;
    };
    let sb = Sandbox::new();
    let (root, calls) = hostile_calls(&sb, &corpus.join("fixtures/seed-v6e/logdir"));
    let mcp = HttpMcp::start(&sb, &root, HOSTILE_ENV);
    for h in &calls {
        (h.check)(&mcp.call(h.tool, h.args.clone()));
        assert_normal_answer(&mcp.call("get_hosts", normal_call(&root)), h.case);
    }
    for (i, (bad, want_status)) in malformed_messages().iter().enumerate() {
        let (status, reply) = mcp.post(bad);
        assert_eq!(status, *want_status, "message {i}: {reply}");
        assert!(reply["id"].is_null(), "message {i}: {reply}");
        assert_eq!(reply["error"]["code"], -32700, "message {i}: {reply}");
        assert_normal_answer(&mcp.call("get_hosts", normal_call(&root)), "6");
    }
}
