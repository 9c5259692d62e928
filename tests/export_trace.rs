//! `xprof export_trace` as a user runs it: the real binary and plugins, in a fresh sandbox.

use std::io::Read;

use serde_json::Value;
use xprof_tests::{Sandbox, fixtures};

fn run_dir(name: &str) -> String {
    fixtures()
        .join("jax-cpu/logdir/plugins/profile")
        .join(name)
        .display()
        .to_string()
}

fn gunzip(path: &str) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn count(trace: &Value, ph: &str) -> u64 {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == ph)
        .count() as u64
}

#[test]
fn dash_o_writes_a_gzip_trace_with_the_events_the_answer_counts() {
    let sb = Sandbox::new();
    let out = sb.path().join("trace.json.gz");
    let r = sb.run(&[
        "export_trace",
        &run_dir("mlp_steps"),
        "-o",
        out.to_str().unwrap(),
    ]);
    r.assert_ok();
    let v = r.json();
    assert_eq!(v["status"], "written_to_file");
    assert_eq!(v["path"], out.to_str().unwrap());
    assert_eq!(v["content_type"], "application/gzip");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(v["bytes"], bytes.len() as u64);
    let trace = gunzip(out.to_str().unwrap());
    assert!(v["events"].as_u64().unwrap() > 0);
    assert_eq!(count(&trace, "X"), v["events"].as_u64().unwrap());
    assert_eq!(trace["displayTimeUnit"], "ns");
}

#[test]
fn without_an_output_path_the_trace_goes_to_tmpdir_with_its_sha256() {
    let sb = Sandbox::new();
    let r = sb.run(&["export_trace", &run_dir("matmul")]);
    r.assert_ok();
    let v = r.json();
    let path = v["path"].as_str().unwrap();
    assert!(
        path.starts_with(sb.path().join("tmp").to_str().unwrap()) && path.ends_with(".json.gz"),
        "{path}"
    );
    use sha2::Digest;
    let digest = format!("{:x}", sha2::Sha256::digest(std::fs::read(path).unwrap()));
    assert_eq!(v["sha256"], digest);
    // A second call writes a second file (the answer is never a cached path).
    let again = sb.run(&["export_trace", &run_dir("matmul")]).json();
    assert_ne!(again["path"], v["path"]);
}

#[test]
fn an_output_path_without_gz_is_plain_json_and_filters_cut_it_down() {
    let sb = Sandbox::new();
    let all = sb.path().join("all.json");
    let r = sb.run(&[
        "export_trace",
        &run_dir("mlp_steps"),
        "-o",
        all.to_str().unwrap(),
    ]);
    let whole = r.assert_ok().json();
    let trace: Value = serde_json::from_slice(&std::fs::read(&all).unwrap()).unwrap();
    assert_eq!(count(&trace, "X"), whole["events"].as_u64().unwrap());
    let first_ts = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["ts"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    let cut = sb.path().join("cut.json");
    let r = sb.run(&[
        "export_trace",
        &run_dir("mlp_steps"),
        "--output_path",
        cut.to_str().unwrap(),
        "--line_regex",
        "python",
        "--end_us",
        &format!("{}", first_ts + 1000.0),
    ]);
    let part = r.assert_ok().json();
    assert!(part["events"].as_u64().unwrap() > 0);
    assert!(part["events"].as_u64().unwrap() < whole["events"].as_u64().unwrap());
    assert_eq!(part["threads"], 1);
}

#[test]
fn bad_input_is_one_json_error_with_the_conventional_exit_code() {
    let sb = Sandbox::new();
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (vec!["/nonexistent/xprof/run".into()], 3, "path"),
        (
            vec![run_dir("matmul"), "--line_regex".into(), "(".into()],
            4,
            "line_regex",
        ),
        (
            vec![
                run_dir("matmul"),
                "--start_us".into(),
                "5".into(),
                "--end_us".into(),
                "1".into(),
            ],
            4,
            "end_us",
        ),
        (
            vec![run_dir("matmul"), "--gzip_level".into(), "12".into()],
            4,
            "gzip_level",
        ),
        (
            vec![
                run_dir("matmul"),
                "-o".into(),
                "/nonexistent/dir/t.json.gz".into(),
            ],
            3,
            "/nonexistent/dir",
        ),
        (
            vec![
                run_dir("matmul"),
                "-o".into(),
                format!("{}/t.json.gz", run_dir("matmul")),
            ],
            2,
            "run directory",
        ),
    ];
    for (args, code, says) in cases {
        let mut argv = vec!["export_trace".to_string()];
        argv.extend(args);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let r = sb.run(&argv);
        assert_eq!(r.code, code, "{argv:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{argv:?}: {}", r.stdout);
        let e = r.error();
        assert_eq!(e["tool"], "export_trace");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(says),
            "{argv:?}: {e}"
        );
        assert!(!e["error"]["hint"].as_str().unwrap_or("").is_empty(), "{e}");
    }
    // A file that is not an XSpace: exit 4, and no trace file is left behind.
    let bad = sb.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("h.xplane.pb"), b"{\"not\": \"protobuf\"}").unwrap();
    let out = sb.path().join("never.json.gz");
    let r = sb.run(&[
        "export_trace",
        bad.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(!out.exists());
    assert!(std::fs::read_dir(sb.path()).unwrap().all(|e| {
        !e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".xprof-")
    }));
}
