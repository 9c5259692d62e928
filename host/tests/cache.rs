//! The result cache through the real binary: concurrency, corruption, fresh captures, flags.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::*;
use serde_json::Value;

const RUN: &str = "plugins/profile/testrun";

/// Call `get_hosts <dir>` until the cache serves a hit (the fixture was just copied, so its
/// timestamps are too fresh to cache at first). Bounded; returns the hit's answer.
fn until_hit(cache: &Path, dir: &Path) -> Value {
    for _ in 0..2000 {
        let out = xprof(cache).arg("get_hosts").arg(dir).output().unwrap();
        let v = stdout_json(&out);
        if cache_events(&out).contains(&"hit".to_string()) {
            return v;
        }
    }
    panic!("the cache never served a hit for {}", dir.display());
}

#[test]
fn eight_processes_fifty_calls_each_on_one_cache_with_inputs_changing_mid_run() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    const PROCS: usize = 8;
    const CALLS: usize = 50;
    let logdirs: Vec<PathBuf> = (0..PROCS)
        .map(|i| {
            let d = tmp.path().join(format!("logdir{i}"));
            copy_dir(&seed, &d);
            d
        })
        .collect();
    plugin_dir(); // build once before the threads start

    let done_calls = Arc::new(AtomicUsize::new(0));
    // Process 0's run dir is touched (timestamps only); process 1's gains a second host.
    let change_started = Arc::new(AtomicBool::new(false));
    let change_done = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..PROCS)
        .map(|i| {
            let (cache, logdir) = (cache.clone(), logdirs[i].clone());
            let (done_calls, started, done) = (
                done_calls.clone(),
                change_started.clone(),
                change_done.clone(),
            );
            std::thread::spawn(move || {
                let run_dir = logdir.join(RUN);
                let mut events = Vec::new();
                for n in 0..CALLS {
                    // Three distinct argument sets per process: misses first, then hits.
                    let mut cmd = xprof(&cache);
                    match n % 3 {
                        0 => cmd.arg("get_hosts").arg(&logdir),
                        1 => cmd.arg("get_hosts").arg(&run_dir),
                        _ => cmd.arg("list_runs").arg(&logdir),
                    };
                    let after_change = done.load(Ordering::SeqCst);
                    let out = cmd.output().unwrap();
                    let before_change = !started.load(Ordering::SeqCst);
                    let v = stdout_json(&out);
                    let ev = cache_events(&out);
                    if n % 3 == 2 {
                        assert_eq!(v["runs"], serde_json::json!(["testrun"]), "{v}");
                    } else {
                        let hosts = hostnames(&v);
                        let grown = i == 1 && after_change;
                        let old = i != 1 || before_change;
                        if grown {
                            assert_eq!(hosts, ["host0", "host1"], "process {i} call {n}: stale");
                        } else if old {
                            assert_eq!(hosts, ["host0"], "process {i} call {n}");
                        } else {
                            // Overlapped the change: either answer is right.
                            assert!(hosts == ["host0"] || hosts == ["host0", "host1"]);
                        }
                    }
                    events.push((n, after_change, ev));
                    done_calls.fetch_add(1, Ordering::SeqCst);
                }
                events
            })
        })
        .collect();

    // Mid-run: once a third of all calls are answered, change the inputs.
    while done_calls.load(Ordering::SeqCst) < PROCS * CALLS / 3 {
        std::thread::yield_now();
    }
    change_started.store(true, Ordering::SeqCst);
    let run0 = logdirs[0].join(RUN);
    fs::File::open(&run0)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    let run1 = logdirs[1].join(RUN);
    fs::copy(run1.join("host0.xplane.pb"), run1.join("host1.xplane.pb")).unwrap();
    change_done.store(true, Ordering::SeqCst);

    let mut hits = 0;
    let mut misses = 0;
    for (i, w) in workers.into_iter().enumerate() {
        let events = w.join().expect("a worker failed; see its panic above");
        let flat: Vec<&String> = events.iter().flat_map(|(_, _, e)| e).collect();
        hits += flat.iter().filter(|e| **e == "hit").count();
        misses += flat.iter().filter(|e| **e == "miss").count();
        if i <= 1 {
            // The first run-dir call after the change must not be served from the cache.
            let first_after = events
                .iter()
                .find(|(n, after, _)| *after && n % 3 == 1)
                .expect("calls after the change");
            assert!(
                first_after.2.contains(&"miss".to_string()),
                "process {i}: {:?}",
                first_after
            );
        }
    }
    assert_eq!(
        hits + misses,
        PROCS * CALLS,
        "every call went through the cache"
    );
    assert!(hits > PROCS * CALLS / 2, "hits {hits}, misses {misses}");
    assert!(misses >= PROCS * 3, "hits {hits}, misses {misses}");
}

#[test]
fn a_corrupt_cache_file_is_rebuilt() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let logdir = tmp.path().join("logdir");
    copy_dir(&seed, &logdir);
    let good = until_hit(&cache, &logdir);

    // Garbage over the database and over its write-ahead log (which holds recent pages).
    for name in ["cache.sqlite", "cache.sqlite-wal"] {
        let f = cache.join(name);
        if let Ok(m) = fs::metadata(&f) {
            fs::write(&f, vec![0x5a; (m.len() as usize).max(4096)]).unwrap();
        }
    }

    let out = xprof(&cache)
        .arg("get_hosts")
        .arg(&logdir)
        .output()
        .unwrap();
    assert_eq!(
        stdout_json(&out),
        good,
        "the answer survives a corrupt cache"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("\"warning\""))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning: {stderr}");
    assert!(warnings[0].contains("corrupt"), "{}", warnings[0]);
    assert!(
        cache_events(&out).contains(&"stored".to_string()),
        "{stderr}"
    );

    // Rebuilt: the next call is a hit, without warnings.
    let out = xprof(&cache)
        .arg("get_hosts")
        .arg(&logdir)
        .output()
        .unwrap();
    assert_eq!(stdout_json(&out), good);
    assert_eq!(cache_events(&out), ["hit"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}

#[test]
fn a_new_capture_in_a_run_dir_gives_a_fresh_result() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let logdir = tmp.path().join("logdir");
    copy_dir(&seed, &logdir);
    let run = logdir.join(RUN);
    for target in [&logdir, &run] {
        assert_eq!(hostnames(&until_hit(&cache, target)), ["host0"]);
    }
    fs::copy(run.join("host0.xplane.pb"), run.join("host1.xplane.pb")).unwrap();
    for target in [&logdir, &run] {
        let out = xprof(&cache).arg("get_hosts").arg(target).output().unwrap();
        assert_eq!(hostnames(&stdout_json(&out)), ["host0", "host1"]);
        assert_eq!(cache_events(&out)[0], "miss");
    }
    // ... and the new answer is cached in its turn.
    assert_eq!(hostnames(&until_hit(&cache, &run)), ["host0", "host1"]);
}

/// Regression: a capture named by its file was listed for its HLO protos without the listing
/// being recorded, so a module's `.hlo_proto.pb` written beside it later (XProf's converters
/// and xprof-rs write them there) left a stale answer in the cache.
#[test]
fn a_new_hlo_proto_beside_a_capture_file_gives_a_fresh_result() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let logdir = tmp.path().join("logdir");
    copy_dir(&seed, &logdir);
    let file = logdir.join(RUN).join("host0.xplane.pb");
    until_hit(&cache, &file);
    fs::write(logdir.join(RUN).join("jit_new(1).hlo_proto.pb"), b"").unwrap();
    let out = xprof(&cache).arg("get_hosts").arg(&file).output().unwrap();
    assert_eq!(hostnames(&stdout_json(&out)), ["host0"]);
    assert_eq!(cache_events(&out)[0], "miss");
}

#[test]
fn a_new_run_in_a_logdir_gives_a_fresh_result() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let logdir = tmp.path().join("logdir");
    copy_dir(&seed, &logdir);
    until_hit(&cache, &logdir);
    let newer = logdir.join("plugins/profile/zz_newer_run");
    copy_dir(&logdir.join(RUN), &newer);
    let out = xprof(&cache)
        .arg("get_hosts")
        .arg(&logdir)
        .output()
        .unwrap();
    assert_eq!(stdout_json(&out)["run"], "zz_newer_run");
}

#[test]
fn no_cache_neither_reads_nor_writes_and_bypass_refreshes() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let out = xprof(&cache)
        .args(["get_hosts", "--no_cache"])
        .arg(&seed)
        .output()
        .unwrap();
    assert_eq!(hostnames(&stdout_json(&out)), ["host0"]);
    assert_eq!(cache_events(&out), ["off"]);
    // The registry index lives beside the cache and is kept with --no_cache; the results
    // database is neither read nor created.
    assert!(
        !cache.join("cache.sqlite").exists(),
        "--no_cache created {}",
        cache.join("cache.sqlite").display()
    );

    // The seed corpus is old, so its first result is stored at once.
    let first = xprof(&cache).arg("get_hosts").arg(&seed).output().unwrap();
    assert_eq!(cache_events(&first), ["miss", "stored"]);
    let out = xprof(&cache)
        .args(["get_hosts", "--bypass_cache"])
        .arg(&seed)
        .output()
        .unwrap();
    assert_eq!(cache_events(&out), ["miss", "stored"]);
    assert_eq!(stdout_json(&out), stdout_json(&first));
    let out = xprof(&cache)
        .args(["get_hosts", "--no_cache"])
        .arg(&seed)
        .output()
        .unwrap();
    assert_eq!(cache_events(&out), ["off"]);
    // The same call spelled differently (relative path, `..`) is the same entry.
    let parent = seed.parent().unwrap();
    let out = xprof(&cache)
        .current_dir(parent)
        .args(["get_hosts", "./x/../logdir"])
        .output()
        .unwrap();
    assert_eq!(cache_events(&out), ["hit"]);
    assert_eq!(stdout_json(&out), stdout_json(&first));
}

#[test]
fn errors_are_not_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let missing = tmp.path().join("no_such_logdir");
    for _ in 0..2 {
        let out = xprof(&cache)
            .arg("get_hosts")
            .arg(&missing)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert!(out.stdout.is_empty());
        assert_eq!(cache_events(&out), ["miss"]);
    }
    let stats = xprof(&cache).args(["cache", "stats"]).output().unwrap();
    assert_eq!(stdout_json(&stats)["entries"], 0);
}

/// Regression: the registry snapshot a call stores for later fast hits was left in SQLite's
/// WAL when the call itself stored no result (an error here), and every later process, hits
/// included, replayed and checkpointed that WAL again (a cached `get_hosts` took 8.7 ms, an
/// uncached one 2.5 ms).
#[test]
fn a_registry_snapshot_is_not_left_in_the_wal_for_every_later_call_to_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let plugins = tmp.path().join("plugins");
    copy_dir(plugin_dir(), &plugins);
    let missing = tmp.path().join("no_such_logdir");
    let wal = cache.join("cache.sqlite-wal");
    let snapshots = || {
        let db = rusqlite::Connection::open(cache.join("cache.sqlite")).unwrap();
        db.query_row("SELECT COUNT(*) FROM registry", [], |r| r.get::<_, i64>(0))
            .unwrap()
    };
    // The plugin files were just copied: the snapshot is stored by the first call made once
    // their timestamps are old enough to trust (bounded, no sleeping).
    for _ in 0..2000 {
        let out = xprof_with_plugins(&cache, &plugins)
            .arg("get_hosts")
            .arg(&missing)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        // Read before the test opens the database (its connection would fold the WAL).
        let wal_bytes = fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        assert_eq!(wal_bytes, 0, "a call left {wal_bytes} bytes in the WAL");
        if snapshots() > 0 {
            return;
        }
    }
    panic!("the registry snapshot was never stored");
}

#[test]
fn ttl_comes_from_flag_env_config_or_default_and_bad_values_name_their_source() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let stats = |cmd: &mut std::process::Command| cmd.args(["cache", "stats"]).output().unwrap();

    let v = stdout_json(&stats(&mut xprof(&cache)));
    assert_eq!(
        (v["ttl_seconds"].as_u64(), v["ttl_source"].as_str()),
        (Some(3600), Some("default"))
    );

    let cfg = cache.join("no-config/xprof");
    fs::create_dir_all(&cfg).unwrap();
    fs::write(cfg.join("config.toml"), "cache_ttl = 120\n").unwrap();
    let v = stdout_json(&stats(&mut xprof(&cache)));
    assert_eq!(v["ttl_seconds"], 120);
    assert!(v["ttl_source"].as_str().unwrap().ends_with("config.toml"));

    let v = stdout_json(&stats(xprof(&cache).env("XPROF_CACHE_TTL", "5m")));
    assert_eq!(
        (v["ttl_seconds"].as_u64(), v["ttl_source"].as_str()),
        (Some(300), Some("XPROF_CACHE_TTL"))
    );

    let v = stdout_json(&stats(
        xprof(&cache)
            .env("XPROF_CACHE_TTL", "5m")
            .args(["--cache_ttl", "7"]),
    ));
    assert_eq!(
        (v["ttl_seconds"].as_u64(), v["ttl_source"].as_str()),
        (Some(7), Some("--cache_ttl"))
    );

    for (cmd, needle) in [
        (xprof(&cache).args(["--cache_ttl", "soon"]), "--cache_ttl"),
        (
            xprof(&cache).env("XPROF_CACHE_TTL", "-3"),
            "XPROF_CACHE_TTL",
        ),
    ] {
        let out = cmd.args(["get_hosts", "/nonexistent"]).output().unwrap();
        assert_eq!(out.status.code(), Some(4));
        let err: Value = serde_json::from_slice(&out.stderr).unwrap();
        assert!(
            err["error"]["message"].as_str().unwrap().contains(needle),
            "{err}"
        );
        assert!(
            err["error"]["hint"].as_str().unwrap().contains("1h"),
            "{err}"
        );
    }
    fs::write(cfg.join("config.toml"), "cache_ttl = [\n").unwrap();
    let out = stats(&mut xprof(&cache));
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("config.toml"));
}

#[test]
fn an_unusable_cache_directory_warns_once_and_the_call_runs_uncached() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let not_a_dir = tmp.path().join("file");
    fs::write(&not_a_dir, b"").unwrap();
    let out = xprof(&not_a_dir.join("sub"))
        .arg("get_hosts")
        .arg(&seed)
        .output()
        .unwrap();
    assert_eq!(hostnames(&stdout_json(&out)), ["host0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("\"warning\"").count(), 1, "{stderr}");
    assert!(stderr.contains("XPROF_CACHE_DIR"), "{stderr}");
    assert_eq!(cache_events(&out), ["off"]);
}

#[test]
fn cache_stats_and_clear() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let v = stdout_json(&xprof(&cache).args(["cache", "stats"]).output().unwrap());
    assert_eq!(
        (v["exists"].as_bool(), v["entries"].as_u64()),
        (Some(false), Some(0))
    );
    for _ in 0..3 {
        xprof(&cache).arg("get_hosts").arg(&seed).output().unwrap();
    }
    xprof(&cache).arg("list_runs").arg(&seed).output().unwrap();
    let v = stdout_json(&xprof(&cache).args(["cache", "stats"]).output().unwrap());
    assert_eq!(v["entries"], 2, "{v}");
    assert_eq!(v["tools"][0]["tool"], "get_hosts", "{v}");
    assert_eq!(v["tools"][0]["entries"], 1, "{v}");
    assert_eq!(v["path"], cache.join("cache.sqlite").display().to_string());
    let v = stdout_json(&xprof(&cache).args(["cache", "clear"]).output().unwrap());
    assert_eq!(v["cleared"], 2);
    let v = stdout_json(&xprof(&cache).args(["cache", "stats"]).output().unwrap());
    assert_eq!(v["entries"], 0);

    for args in [
        &["cache"][..],
        &["cache", "purge"],
        &["cache", "stats", "x"],
    ] {
        let out = xprof(&cache).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err: Value = serde_json::from_slice(&out.stderr).unwrap();
        assert!(
            err["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("xprof cache stats")
        );
    }
}

/// Hits are served without loading plugins while the plugin files are unchanged; a rebuilt
/// plugin (same version, new file) invalidates both the snapshot and its results.
#[test]
fn hits_skip_plugin_loading_until_a_plugin_file_changes() {
    let Some(seed) = seed_logdir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let plugins = tmp.path().join("plugins");
    copy_dir(plugin_dir(), &plugins);
    let call = || {
        xprof_with_plugins(&cache, &plugins)
            .arg("get_hosts")
            .arg(&seed)
            .output()
            .unwrap()
    };
    let fast = |out: &std::process::Output| {
        cache_trace(out) == [("hit".to_string(), "plugins not loaded".to_string())]
    };
    let reference = stdout_json(
        &xprof_with_plugins(&cache, &plugins)
            .args(["get_hosts", "--no_cache"])
            .arg(&seed)
            .output()
            .unwrap(),
    );
    let until_fast = || {
        for _ in 0..2000 {
            let out = call();
            assert_eq!(stdout_json(&out), reference);
            if fast(&out) {
                return;
            }
        }
        panic!("never served a hit without loading plugins");
    };
    until_fast();

    // "Rebuild" the core plugin: same bytes, same version, a new file.
    let core = fs::read_dir(&plugins)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("xprof_plugin_core"))
        .unwrap();
    let bytes = fs::read(&core).unwrap();
    fs::remove_file(&core).unwrap();
    fs::write(&core, bytes).unwrap();
    let out = call();
    assert_eq!(stdout_json(&out), reference);
    assert_eq!(
        cache_events(&out)[0],
        "miss",
        "results of the old build are not served"
    );
    until_fast();

    // Output formats are rendered the same way on the fast path.
    let text = |extra: &str| {
        let out = xprof_with_plugins(&cache, &plugins)
            .args(["get_hosts", "--format", "text", extra])
            .arg(&seed)
            .output()
            .unwrap();
        assert!(out.status.success());
        let was_fast = fast(&out);
        (String::from_utf8(out.stdout).unwrap(), was_fast)
    };
    let (cached, was_fast) = text("--cache_ttl=1h");
    assert!(was_fast);
    assert_eq!(cached, text("--no_cache").0);
}
