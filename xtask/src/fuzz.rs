//! `cargo xtask fuzz [--seconds N] [--target NAME]... [--seed S]`: mutation fuzzing of the
//! parsers on the stable toolchain, seeded from the repository's fixtures and the shared corpus.
//!
//! Each target gets N seconds (default 10): inputs are the seeds mutated (bit flips, random
//! bytes, insertions, deletions, duplicated and spliced ranges, truncation, dictionary tokens)
//! and fed to the parser under `catch_unwind`. A panic is a failure, its input saved under
//! `target/fuzz/<target>/`. Targets: `xspace` (the XSpace reader, walking every plane, line,
//! event and stat it returns), `hlo_text`, `llo_text` (bundle listings, utilization matrices,
//! schedule analyses), `mosaic_bytecode` (MLIR bytecode from the HLO dumps' custom calls),
//! `filter` (the event tools' `--filter` expressions) and `jsonrpc` (the framing of the real
//! `xprof mcp` over stdio: after every mutated message the server must still answer a ping; a
//! server that exits or prints a line that is not JSON is a failure). One JSON summary on
//! stdout; the task fails when any target failed.

use std::io::{BufRead, BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TARGETS: &[&str] = &[
    "xspace",
    "hlo_text",
    "llo_text",
    "mosaic_bytecode",
    "filter",
    "jsonrpc",
];

/// Seed files larger than this are skipped: a mutation of a large capture costs a full parse.
const MAX_SEED_BYTES: u64 = 2 << 20;

pub fn run(args: &[String]) -> crate::Result {
    let mut seconds = 10.0f64;
    let mut only: Vec<String> = Vec::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--seconds" => seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--target" => only.push(value()?.clone()),
            "--seed" => seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            other => {
                return Err(format!(
                    "unknown argument `{other}`; usage: cargo xtask fuzz [--seconds N] \
                     [--target {}]... [--seed S]",
                    TARGETS.join("|")
                )
                .into());
            }
        }
    }
    if let Some(bad) = only.iter().find(|t| !TARGETS.contains(&t.as_str())) {
        return Err(format!("unknown target `{bad}`; targets: {}", TARGETS.join(", ")).into());
    }
    let targets: Vec<&str> = TARGETS
        .iter()
        .copied()
        .filter(|t| only.is_empty() || only.iter().any(|o| o == t))
        .collect();
    let budget = Duration::from_secs_f64(seconds.max(0.0));
    let out_dir = crate::root().join("target/fuzz");
    // Parser panics are the findings: count them, do not print a backtrace for each.
    std::panic::set_hook(Box::new(|_| {}));
    let mut reports = Vec::new();
    let mut failed = 0;
    for (i, t) in targets.iter().enumerate() {
        let mut rng = Rng(seed.wrapping_add(i as u64).max(1));
        eprintln!("xtask fuzz: {t} for {seconds} s");
        let r = match *t {
            "jsonrpc" => fuzz_jsonrpc(budget, &mut rng, &out_dir)?,
            _ => fuzz_in_process(t, budget, &mut rng, &out_dir)?,
        };
        failed += r["failures"].as_u64().unwrap_or(0);
        reports.push(r);
    }
    let _ = std::panic::take_hook();
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "seconds_per_target": seconds,
            "seed": seed.to_string(),
            "targets": reports,
            "failures": failed,
        }))?
    );
    if failed > 0 {
        return Err(format!("{failed} failing input(s); see target/fuzz/").into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Mutation

/// xorshift64*: reproducible from `--seed`, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Tokens worth inserting into text formats.
const DICT: &[&[u8]] = &[
    b"{",
    b"}",
    b"(",
    b")",
    b"[",
    b"]",
    b"%",
    b"=",
    b",",
    b":",
    b"\n",
    b"\"",
    b"'",
    b"\\",
    b"ENTRY",
    b"HloModule",
    b"ROOT",
    b"fusion",
    b"calls=",
    b"f32[",
    b"s32[]",
    b"{1,0}",
    b"and",
    b"or",
    b"not",
    b"contains",
    b"=~",
    b"!~",
    b"<=",
    b">=",
    b"==",
    b"duration_ps",
    b"1e400",
    b"-9223372036854775808",
    b"18446744073709551616",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    b"\x00",
    b"\x7f",
    b"\x80",
    b"\xff",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], input: &mut Vec<u8>) {
    let n = 1 + rng.below(4);
    for _ in 0..n {
        let len = input.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.next() as u8;
            }
            2 => {
                let i = rng.below(len + 1);
                let k = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..k).map(|_| rng.next() as u8).collect();
                input.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let k = 1 + rng.below((len - i).min(64));
                input.drain(i..i + k);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let k = 1 + rng.below((len - i).min(256));
                let chunk = input[i..i + k].to_vec();
                let j = rng.below(len + 1);
                input.splice(j..j, chunk);
            }
            5 if len > 0 => input.truncate(rng.below(len)),
            6 => {
                let tok = DICT[rng.below(DICT.len())];
                let i = rng.below(len + 1);
                input.splice(i..i, tok.iter().copied());
            }
            7 if !seeds.is_empty() => {
                // Splice: a prefix of this input and a suffix of another seed.
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
            }
            _ if len > 0 => {
                let i = rng.below(len);
                input[i] = [0x00, 0x01, 0x7f, 0x80, 0xff][rng.below(5)];
            }
            _ => input.push(rng.next() as u8),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Seeds

fn corpus() -> Option<PathBuf> {
    let c = std::env::var_os("XPROF_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("../shared"));
    c.is_dir().then_some(c)
}

/// Files under `dirs` (recursively) whose name satisfies `keep`, at most [`MAX_SEED_BYTES`].
fn files(dirs: &[PathBuf], keep: &dyn Fn(&str) -> bool) -> Vec<Vec<u8>> {
    let mut paths = Vec::new();
    let mut stack: Vec<PathBuf> = dirs.to_vec();
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file()
                && p.file_name().and_then(|n| n.to_str()).is_some_and(keep)
                && e.metadata().is_ok_and(|m| m.len() <= MAX_SEED_BYTES)
            {
                paths.push(p);
            }
        }
    }
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn seed_dirs() -> Vec<PathBuf> {
    let mut d = vec![crate::root().join("fixtures")];
    if let Some(c) = corpus() {
        d.push(c.join("fixtures"));
    }
    d
}

const FILTER_SEEDS: &[&str] = &[
    "",
    "duration_ps > 1000",
    "name contains fusion and duration_us >= 1.5",
    "plane == '/device:TPU:0' or not (line =~ \"XLA Ops\")",
    "event !~ 'copy\\.\\d+' && offset_ps < 1e9",
    "(line_id == 3 || line contains Steps) and end_ps <= 2ms",
    "duration > 1.5us and duration_ns != 7",
];

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dirs = seed_dirs();
    match target {
        "xspace" => files(&dirs, &|n| n.ends_with(".xplane.pb")),
        "hlo_text" => files(&dirs, &|n| {
            n.starts_with("module_") && n.ends_with(".txt") && !n.contains("buffer-assignment")
        }),
        "llo_text" => files(&dirs, &|n| {
            n.ends_with(".txt")
                && (n.contains("final_bundles")
                    || n.contains("per-bundle-utilization")
                    || n.contains("schedule-analysis"))
        }),
        "mosaic_bytecode" => {
            let re = regex_lite_body();
            files(&dirs, &|n| n.starts_with("module_") && n.ends_with(".txt"))
                .iter()
                .flat_map(|t| re(t))
                .collect()
        }
        "filter" => FILTER_SEEDS.iter().map(|s| s.as_bytes().to_vec()).collect(),
        _ => Vec::new(),
    }
}

/// The base64 `"body"` strings of custom calls in an HLO text, decoded.
fn regex_lite_body() -> impl Fn(&[u8]) -> Vec<Vec<u8>> {
    |t: &[u8]| {
        let s = String::from_utf8_lossy(t);
        let mut out = Vec::new();
        let mut rest = &s[..];
        while let Some(i) = rest.find("\"body\"") {
            rest = &rest[i + 6..];
            let Some(q) = rest.find('"') else { break };
            let body = &rest[q + 1..];
            let end = body
                .find(|c: char| !(c.is_ascii_alphanumeric() || "+/=".contains(c)))
                .unwrap_or(body.len());
            if let Some(b) = xprof_llo::bytecode::base64_decode(&body[..end]) {
                out.push(b);
            }
            rest = &body[end..];
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// In-process targets

fn exercise(target: &str, input: &[u8]) {
    match target {
        "xspace" => {
            if let Ok(space) = xprof_xspace::XSpace::from_bytes(input.to_vec()) {
                let mut sink = 0i64;
                for p in space.planes() {
                    sink ^= p.name().len() as i64;
                    for s in p.stats() {
                        sink ^= s.name().len() as i64 ^ s.int().unwrap_or(0);
                    }
                    for l in p.lines() {
                        sink ^= l.name().len() as i64 ^ l.display_name().len() as i64;
                        for e in l.events() {
                            sink ^= e.name().len() as i64
                                ^ e.duration_ps()
                                ^ e.end_ps()
                                ^ e.num_occurrences();
                            for s in e.stats() {
                                sink ^= s.name().len() as i64
                                    ^ s.str().map_or(0, str::len) as i64
                                    ^ s.double().unwrap_or(0.0) as i64;
                            }
                        }
                    }
                }
                std::hint::black_box(sink);
            }
        }
        "hlo_text" => {
            let _ = xprof_hlo::parse(&String::from_utf8_lossy(input), "fuzz.txt");
        }
        "llo_text" => {
            let text = String::from_utf8_lossy(input);
            let p = Path::new("fuzz.txt");
            let _ = xprof_llo::bundles::parse(&text, p);
            let _ = xprof_llo::matrix::parse(&text, p);
            let _ = xprof_llo::schedule::parse(&text);
        }
        "mosaic_bytecode" => {
            let _ = xprof_llo::bytecode::parse(input);
            let _ = xprof_llo::bytecode::summarize(input);
        }
        "filter" => {
            let expr = String::from_utf8_lossy(input);
            let re = |p: &str| -> Result<xprof_opstats::filter::Matcher, String> {
                let re = regex::Regex::new(p).map_err(|e| e.to_string())?;
                Ok(Box::new(move |s: &str| re.is_match(s)))
            };
            if let Ok(f) = xprof_opstats::filter::Filter::parse(&expr, &re) {
                for (start_ps, duration_ps) in [(0, 0), (i64::MAX, i64::MAX), (i64::MIN, -1)] {
                    let fields = xprof_opstats::filter::Fields {
                        plane: "/device:TPU:0",
                        line: "XLA Ops",
                        line_id: 3,
                        event: "fusion.1",
                        start_ps,
                        duration_ps,
                    };
                    std::hint::black_box(f.matches(&fields));
                }
            }
        }
        other => unreachable!("no in-process target {other}"),
    }
}

fn save(out_dir: &Path, target: &str, n: usize, input: &[u8]) -> String {
    let dir = out_dir.join(target);
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(format!("failure-{n}.bin"));
    let _ = std::fs::write(&p, input);
    p.display().to_string()
}

fn fuzz_in_process(
    target: &str,
    budget: Duration,
    rng: &mut Rng,
    out_dir: &Path,
) -> crate::Result<Value> {
    let seeds = seeds(target);
    if seeds.is_empty() {
        return Err(format!("fuzz {target}: no seeds found (fixtures/, $XPROF_CORPUS)").into());
    }
    // The seeds themselves first: they must parse without a panic too.
    let mut queue: Vec<Vec<u8>> = seeds.clone();
    let start = Instant::now();
    let (mut runs, mut failures, mut slowest) = (0u64, Vec::new(), Duration::ZERO);
    while start.elapsed() < budget {
        let input = queue.pop().unwrap_or_else(|| {
            let mut x = seeds[rng.below(seeds.len())].clone();
            mutate(rng, &seeds, &mut x);
            x
        });
        let t0 = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| exercise(target, &input)));
        slowest = slowest.max(t0.elapsed());
        runs += 1;
        if r.is_err() && failures.len() < 100 {
            failures.push(save(out_dir, target, failures.len(), &input));
        }
    }
    Ok(json!({
        "target": target,
        "seeds": seeds.len(),
        "runs": runs,
        "failures": failures.len(),
        "failure_inputs": failures,
        "slowest_run_ms": slowest.as_secs_f64() * 1e3,
    }))
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC framing, against the real server

const JSONRPC_SEEDS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{"a":[1,2,{"b":null}]}}}"#,
    r#"{"jsonrpc":"2.0","id":"s","method":"ping"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
    r#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
];

fn fuzz_jsonrpc(budget: Duration, rng: &mut Rng, out_dir: &Path) -> crate::Result<Value> {
    let status = Command::new(env!("CARGO"))
        .current_dir(crate::root())
        .args(["build", "--quiet", "-p", "xprof"])
        .status()?;
    if !status.success() {
        return Err("cargo build -p xprof failed".into());
    }
    let exe = crate::root().join("target/debug/xprof");
    let empty = std::env::temp_dir().join(format!("xprof-fuzz-root-{}", std::process::id()));
    std::fs::create_dir_all(&empty)?;
    let seeds: Vec<Vec<u8>> = JSONRPC_SEEDS
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let start = Instant::now();
    let (mut runs, mut failures, mut restarts) = (0u64, Vec::new(), 0u64);
    'sessions: while start.elapsed() < budget {
        // No plugins (framing needs none), an empty root, no cache.
        let mut child = Command::new(&exe)
            .args(["--no-default-plugin-dirs", "--no_cache", "mcp", "--root"])
            .arg(&empty)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        // rmcp ends a session whose first message is not `initialize`: start each one
        // properly, then fuzz what follows.
        let mut history: Vec<u8> = Vec::new();
        for m in &JSONRPC_SEEDS[..2] {
            history.extend_from_slice(m.as_bytes());
            history.push(b'\n');
        }
        stdin.write_all(&history)?;
        stdin.flush()?;
        loop {
            let mut line = String::new();
            if stdout.read_line(&mut line)? == 0 {
                return Err("xprof mcp ended before answering initialize".into());
            }
            if serde_json::from_str::<Value>(&line).is_ok_and(|v| v["id"] == 1) {
                break;
            }
        }
        let mut n = 0u64;
        while start.elapsed() < budget {
            let mut msg = seeds[rng.below(seeds.len())].clone();
            if rng.below(8) != 0 {
                mutate(rng, &seeds, &mut msg);
            }
            // One message per line: a newline in the mutation would make two.
            msg.retain(|b| *b != b'\n');
            n += 1;
            let ping = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"fuzz-{n}\",\"method\":\"ping\"}}\n");
            history.extend_from_slice(&msg);
            history.push(b'\n');
            let sent = stdin
                .write_all(&msg)
                .and_then(|_| stdin.write_all(b"\n"))
                .and_then(|_| stdin.write_all(ping.as_bytes()))
                .and_then(|_| stdin.flush());
            runs += 1;
            // Every line is JSON; the ping's answer comes (before or after the others').
            let mut ok = sent.is_ok();
            let want = format!("fuzz-{n}");
            while ok {
                let mut line = String::new();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => ok = false,
                    Ok(_) => match serde_json::from_str::<Value>(&line) {
                        Ok(v) if v["id"] == want.as_str() => break,
                        Ok(_) => {}
                        Err(_) => ok = false,
                    },
                }
            }
            if !ok {
                if failures.len() < 100 {
                    failures.push(save(out_dir, "jsonrpc", failures.len(), &history));
                }
                let _ = child.kill();
                let _ = child.wait();
                restarts += 1;
                continue 'sessions;
            }
            // A fresh session now and then (a bounded history to save on failure).
            if history.len() > 1 << 20 || rng.below(500) == 0 {
                break;
            }
        }
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        restarts += 1;
    }
    let _ = std::fs::remove_dir(&empty);
    Ok(json!({
        "target": "jsonrpc",
        "seeds": seeds.len(),
        "runs": runs,
        "sessions": restarts,
        "failures": failures.len(),
        "failure_inputs": failures,
    }))
}
