//! `xprof report` as a user runs it (the real binary and plugins, in a fresh sandbox), and the
//! reports of a TPU, a GPU and a CPU capture rendered by headless Chromium: no console error,
//! and every chart the answer lists is drawn (non-blank where the chart is).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use xprof_tests::{Sandbox, corpus, fixtures};

fn cpu_run() -> PathBuf {
    fixtures().join("jax-cpu/logdir/plugins/profile/mlp_steps")
}

fn report(sb: &Sandbox, capture: &Path, name: &str) -> (Value, PathBuf) {
    let out = sb.path().join(format!("{name}.html"));
    let r = sb.run(&[
        "report",
        capture.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    r.assert_ok();
    (r.json(), out)
}

fn charts(v: &Value) -> Vec<&str> {
    v["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect()
}

#[test]
fn a_cpu_report_has_the_step_chart_and_top_ops_and_says_what_it_lacks() {
    let sb = Sandbox::new();
    let (v, out) = report(&sb, &cpu_run(), "cpu");
    assert_eq!(v["status"], "written_to_file");
    assert_eq!(v["content_type"], "text/html");
    assert_eq!(charts(&v), vec!["steps-chart", "ops-chart"]);
    for section in ["roofline", "memory"] {
        assert!(v["missing"][section].is_string(), "{}", v["missing"]);
    }
    let html = std::fs::read_to_string(&out).unwrap();
    assert_eq!(v["bytes"], html.len() as u64);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));
    assert!(html.contains(&format!(
        "Not in this capture: {}",
        v["missing"]["roofline"].as_str().unwrap()
    )));
}

#[test]
fn without_an_output_path_the_report_goes_to_tmpdir() {
    let sb = Sandbox::new();
    let r = sb.run(&["report", cpu_run().to_str().unwrap()]);
    let v = r.assert_ok().json();
    let path = v["path"].as_str().unwrap();
    assert!(path.starts_with(sb.path().join("tmp").to_str().unwrap()) && path.ends_with(".html"));
    assert!(std::fs::metadata(path).unwrap().len() > 0);
}

/// The corpus's TPU and GPU captures: (name, capture, charts they must have).
fn device_captures() -> Vec<(&'static str, PathBuf, &'static [&'static str])> {
    let Some(c) = corpus() else { return vec![] };
    vec![
        (
            "tpu",
            c.join("fixtures/seed-v6e/logdir"),
            &["steps-chart", "ops-chart", "memory-chart"][..],
        ),
        (
            "gpu",
            c.join("fixtures/gpu-real/mi300-jax08-gemm"),
            &["ops-chart", "roofline-chart", "memory-chart"][..],
        ),
    ]
}

#[test]
fn tpu_and_gpu_reports_draw_their_device_charts() {
    let sb = Sandbox::new();
    for (name, capture, want) in device_captures() {
        let (v, _) = report(&sb, &capture, name);
        let got = charts(&v);
        for c in want {
            assert!(got.contains(c), "{name}: {got:?}, missing {}", v["missing"]);
        }
    }
}

// ---- Headless Chromium -------------------------------------------------------------------

fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed; .ci/run installs Debian's `chromium` package"
        );
        eprintln!("note: chromium not found; skipping the rendering tests");
    }
    found
}

/// Screenshot `html` (a file) at 1000 px wide; returns the PNG and the console messages.
fn screenshot(browser: &Path, html: &Path, png: &Path) -> Vec<String> {
    let profile = tempfile::tempdir().unwrap();
    let profile = profile.path();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1000,2800",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("running chromium");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect()
}

/// Pixels of a PNG that are neither white nor near-white, and those with colour (not grey).
fn ink(png: &Path) -> (usize, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let (mut dark, mut coloured) = (0, 0);
    for px in buf[..info.buffer_size()].chunks(channels) {
        let (r, g, b) = (px[0] as i32, px[1] as i32, px[2] as i32);
        if r.min(g).min(b) < 230 {
            dark += 1;
        }
        if r.max(g).max(b) - r.min(g).min(b) > 60 {
            coloured += 1;
        }
    }
    (dark, coloured)
}

/// The report with everything hidden but one chart: its screenshot has ink only where that
/// chart is drawn.
fn only(html: &str, chart: &str) -> String {
    html.replacen(
        "</style>",
        &format!("body *{{visibility:hidden}}#{chart},#{chart} *{{visibility:visible}}</style>"),
        1,
    )
}

#[test]
fn the_rendering_check_sees_console_errors_and_blank_charts() {
    let Some(browser) = chromium() else { return };
    let sb = Sandbox::new();
    let page = sb.path().join("bad.html");
    std::fs::write(&page, "<html><body><script>nosuch();</script><svg id=\"c\" width=\"200\" height=\"200\"></svg></body></html>").unwrap();
    let png = sb.path().join("bad.png");
    let console = screenshot(&browser, &page, &png);
    assert!(console.iter().any(|l| l.contains("nosuch")), "{console:?}");
    std::fs::write(
        &page,
        only(
            &std::fs::read_to_string(&page)
                .unwrap()
                .replace("<body>", "<style></style><body>"),
            "c",
        ),
    )
    .unwrap();
    screenshot(&browser, &page, &png);
    assert_eq!(ink(&png).0, 0);
}

#[test]
fn reports_render_in_chromium_with_every_chart_drawn() {
    let Some(browser) = chromium() else { return };
    let sb = Sandbox::new();
    // Kept for people to look at (target/report-screenshots/<kind>.png).
    let keep = xprof_plugin_api::sdk::testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
        .join("target/report-screenshots");
    std::fs::create_dir_all(&keep).unwrap();
    let mut captures = vec![("cpu", cpu_run(), &["steps-chart", "ops-chart"][..])];
    captures.extend(device_captures());
    for (name, capture, want) in captures {
        let (v, out) = report(&sb, &capture, name);
        let html = std::fs::read_to_string(&out).unwrap();
        let full = keep.join(format!("{name}.png"));
        let console = screenshot(&browser, &out, &full);
        assert!(console.is_empty(), "{name}: console messages {console:?}");
        for chart in charts(&v) {
            let page = sb.path().join(format!("{name}-{chart}.html"));
            std::fs::write(&page, only(&html, chart)).unwrap();
            let png = sb.path().join(format!("{name}-{chart}.png"));
            screenshot(&browser, &page, &png);
            let (dark, coloured) = ink(&png);
            // A drawn chart has axes, labels and coloured marks: thousands of pixels.
            assert!(
                dark > 2000 && coloured > 300,
                "{name} {chart}: {dark} dark, {coloured} coloured pixels"
            );
        }
        for c in want {
            assert!(charts(&v).contains(c), "{name}: {c} not drawn");
        }
    }
}

#[test]
fn with_a_baseline_the_report_shows_the_verdict_and_the_op_changes() {
    let sb = Sandbox::new();
    let out = sb.path().join("diff.html");
    let threaded = fixtures().join("jax-cpu/logdir/plugins/profile/threaded");
    let r = sb.run(&[
        "report",
        threaded.to_str().unwrap(),
        "--baseline",
        cpu_run().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let v = r.assert_ok().json();
    assert!(charts(&v).contains(&"diff-chart"), "{v}");
    let verdict = v["verdict"]["result"].as_str().unwrap();
    assert!(["faster", "slower", "unchanged"].contains(&verdict));
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains(&format!("<b>{verdict}</b>")));
    // A baseline that is not a capture is a path error naming it.
    let r = sb.run(&[
        "report",
        threaded.to_str().unwrap(),
        "--baseline",
        "/nonexistent/base",
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.error()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/base")
    );
}

#[test]
fn over_mcp_both_tools_answer_with_the_path_they_wrote() {
    use std::io::Write;
    let sb = Sandbox::new();
    let run = cpu_run();
    let mut child = sb
        .cmd()
        .args(["mcp", "--plugin", "report", "--root"])
        .arg(fixtures())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let call = |id: u32, tool: &str| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {"path": run.to_str().unwrap()}}})
    };
    for msg in [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(2, "export_trace"),
        call(3, "report"),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let mut seen = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["id"] == 2 || v["id"] == 3 {
            let r: Value =
                serde_json::from_str(v["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
            assert_eq!(r["status"], "written_to_file", "{r}");
            let path = PathBuf::from(r["path"].as_str().unwrap());
            assert!(
                path.starts_with(sb.path()) && path.is_file(),
                "{}",
                path.display()
            );
            seen.push(v["id"].as_u64().unwrap());
        }
    }
    seen.sort();
    assert_eq!(seen, vec![2, 3]);
}
