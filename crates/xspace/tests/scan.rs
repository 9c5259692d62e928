//! `XSpace::open_scan` (validate and visit events in one pass) must be indistinguishable from
//! `XSpace::open` followed by iterating every line: same events, same errors with the same
//! offsets, same dropped planes and diagnostics.

mod common;

use common::small_capture;

use prost::Message;
use std::path::Path;
use xprof_proto::xplane as pb;
use xprof_testkit::XSpaceBuilder;
use xprof_xspace::{Event, EventData, EventScan, Line, ReadOptions, XSpace, XSpaceError};

/// What a test compares per event.
type Row = (i64, EventData, i64, usize, Option<usize>);

fn row(e: &Event<'_>, position: Option<usize>) -> Row {
    (
        e.metadata_id(),
        e.data(),
        e.duration_ps(),
        e.stats().count(),
        position,
    )
}

/// Collects every event; skips the lines whose name is in `skip` (still validated).
struct Collect<'s> {
    skip: &'s [&'s str],
}

impl EventScan for Collect<'_> {
    type Acc = Vec<Row>;
    fn start(&self, line: Line<'_>) -> Option<Vec<Row>> {
        (!self.skip.contains(&line.name())).then(Vec::new)
    }
    fn event(&self, acc: &mut Vec<Row>, e: Event<'_>, position: Option<usize>) {
        acc.push(row(&e, position));
    }
}

/// Per (plane, line): the events as `open` + `Line::events` see them.
fn eager_rows(space: &XSpace, skip: &[&str]) -> Vec<((usize, usize), Vec<Row>)> {
    let mut out = Vec::new();
    for (pi, p) in space.planes().enumerate() {
        for (li, l) in p.lines().enumerate() {
            if skip.contains(&l.name()) {
                continue;
            }
            let rows = l
                .events()
                .map(|e| row(&e, p.event_metadata_position(e.metadata_id())))
                .collect();
            out.push(((pi, li), rows));
        }
    }
    out
}

/// `open_scan`'s runs concatenated per line (lines with no run are absent).
fn scanned_rows(scanned: Vec<xprof_xspace::Scanned<Vec<Row>>>) -> Vec<((usize, usize), Vec<Row>)> {
    let mut out: Vec<((usize, usize), Vec<Row>)> = Vec::new();
    for s in scanned {
        match out.last_mut() {
            Some((k, rows)) if *k == (s.plane, s.line) => rows.extend(s.acc),
            _ => out.push(((s.plane, s.line), s.acc)),
        }
    }
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Both ways of reading `bytes` agree (events, errors, diagnostics), strict and lenient.
fn assert_same(bytes: &[u8], skip: &[&str], what: &str) {
    for strict in [true, false] {
        let opts = ReadOptions {
            strict,
            no_mmap: true,
            planes: None,
        };
        let eager = XSpace::from_bytes_named(bytes.to_vec(), "cap", &opts);
        let fused = XSpace::from_bytes_scan(bytes.to_vec(), "cap", &opts, &Collect { skip });
        match (eager, fused) {
            (Ok(a), Ok((b, scanned))) => {
                assert_eq!(
                    sorted(a.diagnostics().to_vec()),
                    sorted(b.diagnostics().to_vec()),
                    "{what}"
                );
                assert_eq!(a.is_complete(), b.is_complete(), "{what}");
                assert_eq!(a.planes().len(), b.planes().len(), "{what}");
                let eager = eager_rows(&a, skip);
                // Lines without events still start a run (one accumulator each).
                let fused = scanned_rows(scanned);
                assert_eq!(eager, fused, "{what} (strict {strict})");
                if let Ok(t) = pb::XSpace::decode(bytes) {
                    common::assert_agree(&b, &t).unwrap_or_else(|e| panic!("{what}: {e}"));
                }
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
            (a, b) => panic!(
                "{what} (strict {strict}): open {:?} vs open_scan {:?}",
                a.map(|_| ()),
                b.map(|_| ())
            ),
        }
    }
}

#[test]
fn open_scan_reads_every_capture_like_open() {
    let mut files = common::captures_under(&common::repo_fixtures());
    if let Some(c) = common::corpus() {
        files.extend(common::captures_under(&c.join("fixtures")));
    }
    assert!(!files.is_empty());
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert_same(&bytes, &[], &f.display().to_string());
        assert_same(&bytes, &["XLA Ops", "Steps"], &f.display().to_string());
        // And by path (mapped when large), as the tools open captures.
        let (space, scanned) =
            XSpace::open_scan(&f, &ReadOptions::default(), &Collect { skip: &[] }).unwrap();
        assert_eq!(eager_rows(&space, &[]), scanned_rows(scanned));
    }
}

#[test]
fn open_scan_visits_the_chunks_of_huge_lines_in_order() {
    // One line of ~3 MB: validated and visited in ~1 MiB runs.
    let bytes = XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.line_with_id(1, "python", |mut l| {
                for k in 0..120_000i64 {
                    l = l
                        .event(if k % 3 == 0 { "a" } else { "b" }, k * 10, k % 7)
                        .stat("group_id", k);
                }
                l
            })
        })
        .to_bytes();
    assert!(bytes.len() > 2 << 20, "{} bytes", bytes.len());
    let (_, scanned) = XSpace::from_bytes_scan(
        bytes.clone(),
        "big",
        &ReadOptions::default(),
        &Collect { skip: &[] },
    )
    .unwrap();
    assert!(scanned.len() > 2, "{} runs", scanned.len());
    assert_same(&bytes, &[], "huge line");
    // A corrupt event deep in a later chunk: same error, same offset.
    let mut bad = bytes.clone();
    let at = bad.len() - 1000;
    for b in &mut bad[at..at + 12] {
        *b = 0xff;
    }
    assert_same(&bad, &[], "huge line, corrupt tail");
}

#[test]
fn open_scan_fails_like_open_on_every_truncation_and_byte_flip() {
    let good = small_capture();
    for cut in 0..good.len() {
        assert_same(&good[..cut], &[], &format!("cut {cut}"));
        assert_same(&good[..cut], &["XLA Ops"], &format!("cut {cut}, skip"));
    }
    for pos in 0..good.len() {
        for val in [0x00u8, 0x01, 0x7f, 0x80, 0xff, good[pos] ^ 0x08] {
            let mut bytes = good.clone();
            bytes[pos] = val;
            assert_same(&bytes, &[], &format!("byte {pos} = {val:#x}"));
        }
    }
}

#[test]
fn open_scan_fails_like_open_on_random_damage_to_a_real_capture() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let path = corpus.join("fixtures/seed-v6e/logdir/plugins/profile/testrun/host0.xplane.pb");
    let good = std::fs::read(path).unwrap();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..40 {
        let mut bytes = good.clone();
        for _ in 0..=(next() % 4) {
            let pos = (next() % bytes.len() as u64) as usize;
            bytes[pos] = next() as u8;
        }
        assert_same(&bytes, &[], &format!("round {round}"));
    }
}

#[test]
fn open_scan_errors_name_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("host0.xplane.pb");
    let mut bytes = small_capture();
    let n = bytes.len();
    bytes.truncate(n - 20);
    std::fs::write(&f, &bytes).unwrap();
    let strict = ReadOptions {
        strict: true,
        ..Default::default()
    };
    match XSpace::open_scan(&f, &strict, &Collect { skip: &[] }) {
        Err(e @ XSpaceError::Malformed { .. }) => {
            assert!(e.to_string().contains(&f.display().to_string()), "{e}");
            assert!(e.offset().is_some());
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(matches!(
        XSpace::open_scan(
            Path::new("/nonexistent.xplane.pb"),
            &strict,
            &Collect { skip: &[] }
        ),
        Err(XSpaceError::Io { .. })
    ));
}
