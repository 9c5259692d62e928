//! `XSpace::open_scan` (validate and visit events in one pass) must be indistinguishable from
//! `XSpace::open` followed by iterating every line: same events, same errors with the same
//! offsets, same dropped planes and diagnostics.

mod common;

use common::small_capture;

use prost::Message;
use std::path::Path;
use xprof_proto::xplane as pb;
use xprof_testkit::XSpaceBuilder;
use xprof_xspace::{
    Event, EventData, EventScan, Line, ReadOptions, Run, ScanResult, XSpace, XSpaceError,
};

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
    fn start(&self, line: Line<'_>, _: &Run) -> Option<Vec<Row>> {
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

/// `open_scan` over `bytes`, collecting every event.
fn scan_all(bytes: &[u8], opts: &ReadOptions) -> ScanResult<Vec<Row>> {
    XSpace::from_bytes_scan(bytes.to_vec(), "cap", opts, &Collect { skip: &[] })
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
    let (_, scanned) = scan_all(&bytes, &ReadOptions::default()).unwrap();
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

/// `tag` + varint length + `payload`: one length-delimited field.
fn len_delimited(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let mut n = payload.len() as u64;
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(payload);
    out
}

/// A plane whose lines are laid out field by field: two huge lines (several 1 MiB chunks)
/// between small ones, their events' lengths taking one, two and three bytes, and the line's
/// own fields (repeated: the last wins) between the events. Also where each event's tag is
/// (events numbered over the whole capture).
fn mixed_huge_lines() -> (Vec<u8>, Vec<usize>) {
    let template = XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.line("t", |l| {
                l.event("alpha_event", 0, 1)
                    .stat("k", 1i64)
                    .stat("note", "x")
                    .event("beta_event", 0, 1)
            })
        })
        .build();
    let mut plane = template.planes[0].clone();
    let t = plane.lines.remove(0);
    let (a, b) = (t.events[0].metadata_id, t.events[1].metadata_id);
    let (k_id, note_id) = (
        t.events[0].stats[0].metadata_id,
        t.events[0].stats[1].metadata_id,
    );
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut k = 0i64;
    // Per line: the offsets of its events' tags in the line.
    let mut tags: Vec<Vec<usize>> = Vec::new();
    let mut line = |bytes: usize, name: &str| -> Vec<u8> {
        let mut at = Vec::new();
        let mut out = pb::XLine {
            id: 7,
            name: name.to_string(),
            timestamp_ns: 1,
            ..Default::default()
        }
        .encode_to_vec();
        while out.len() < bytes {
            let r = next() % 1000;
            if r >= 990 {
                // The line's own fields, between events.
                out.extend(
                    pb::XLine {
                        name: format!("{name}/{k}"),
                        timestamp_ns: k + 2,
                        display_name: format!("d{k}"),
                        duration_ps: k,
                        ..Default::default()
                    }
                    .encode_to_vec(),
                );
                continue;
            }
            // Mostly one-byte lengths; some two-byte (> 127) and three-byte (> 16383) ones.
            let pad = match r {
                0..=799 => 0,
                800..=979 => 150 + (next() % 3000) as usize,
                _ => 17_000 + (next() % 5000) as usize,
            };
            let note = format!("s{k:07}{}", "x".repeat(pad));
            let stat = |metadata_id, value| pb::XStat {
                metadata_id,
                value: Some(value),
            };
            use pb::x_stat::Value;
            let ev = pb::XEvent {
                metadata_id: if k % 3 == 0 { a } else { b },
                data: Some(pb::x_event::Data::OffsetPs(k * 10)),
                duration_ps: k % 7,
                stats: vec![
                    stat(k_id, Value::Int64Value(k)),
                    stat(note_id, Value::StrValue(note)),
                ],
            };
            at.push(out.len());
            out.extend(len_delimited(0x22, &ev.encode_to_vec()));
            k += 1;
        }
        tags.push(at);
        out
    };
    let lines = [
        line(300, "small0"),
        line(3 << 20, "huge1"),
        line(40 << 10, "small2"),
        line(5 << 20, "huge3"),
        line(200, "small4"),
    ];
    let mut plane_bytes = plane.encode_to_vec();
    let mut events = Vec::new();
    for (l, at) in lines.iter().zip(&tags) {
        let field = len_delimited(0x1a, l);
        let start = plane_bytes.len() + field.len() - l.len();
        events.extend(at.iter().map(|a| start + a));
        plane_bytes.extend(field);
    }
    let space = len_delimited(0x0a, &plane_bytes);
    let header = space.len() - plane_bytes.len();
    (space, events.into_iter().map(|a| header + a).collect())
}

/// The position of the string stat (`s{k:07}…`) of the event whose tag is at `tag`.
fn note_of_event(bytes: &[u8], tag: usize, k: usize) -> usize {
    let needle = format!("s{k:07}");
    tag + bytes[tag..]
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap_or_else(|| panic!("no event {k}"))
}

#[test]
fn open_scan_frames_huge_lines_of_every_length_and_field_like_open() {
    let (bytes, _) = mixed_huge_lines();
    assert_same(&bytes, &[], "mixed huge lines");
    // The runs are the chunks `open` validates: same boundaries, in order.
    let opts = ReadOptions::default();
    let open = XSpace::from_bytes_named(bytes.clone(), "cap", &opts).unwrap();
    let (scan, scanned) = scan_all(&bytes, &opts).unwrap();
    let runs = |s: &XSpace| -> Vec<Vec<usize>> {
        let p = s.planes().next().unwrap();
        p.lines()
            .map(|l| l.event_runs().iter().map(|r| r.len()).collect())
            .collect()
    };
    let (a, b) = (runs(&open), runs(&scan));
    assert_eq!(a, b);
    assert!(a[1].len() >= 3 && a[3].len() >= 5, "{a:?}");
    let per_run: Vec<usize> = scanned.iter().map(|s| s.acc.len()).collect();
    assert_eq!(per_run, a.concat());
    // Line headers merge in file order (the last of a repeated field wins), as prost does.
    let theirs = pb::XSpace::decode(bytes.as_slice()).unwrap();
    for (l, tl) in scan
        .planes()
        .next()
        .unwrap()
        .lines()
        .zip(&theirs.planes[0].lines)
    {
        assert_eq!(
            (
                l.name(),
                l.display_name(),
                l.timestamp_ns(),
                l.duration_ps()
            ),
            (
                tl.name.as_str(),
                tl.display_name.as_str(),
                tl.timestamp_ns,
                tl.duration_ps
            )
        );
    }
}

/// Records each run's [`Run`] and how many events it was given.
struct Runs;

impl EventScan for Runs {
    type Acc = (Run, usize);
    fn start(&self, _: Line<'_>, run: &Run) -> Option<(Run, usize)> {
        Some((run.clone(), 0))
    }
    fn event(&self, acc: &mut (Run, usize), _: Event<'_>, _: Option<usize>) {
        acc.1 += 1;
    }
}

#[test]
fn framed_runs_number_the_events_the_scan_then_gives_each_run() {
    let (bytes, _) = mixed_huge_lines();
    let opts = ReadOptions::default();
    let open = XSpace::from_bytes_named(bytes.clone(), "cap", &opts).unwrap();
    let framed = XSpace::from_bytes_framed(bytes, "cap", &opts).unwrap();
    let laid_out: Vec<(usize, Run)> = framed
        .runs()
        .into_iter()
        .map(|r| (r.plane, r.run))
        .collect();
    // Per line: consecutive ranges from 0 to its event count, the chunks `open` validates.
    let plane = open.planes().next().unwrap();
    for (li, l) in plane.lines().enumerate() {
        let ranges: Vec<_> = laid_out
            .iter()
            .filter(|(p, r)| *p == plane.index() && r.line == li)
            .map(|(_, r)| r.events.clone())
            .collect();
        let lens: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
        let chunks: Vec<usize> = l.event_runs().iter().map(|r| r.len()).collect();
        assert_eq!(lens, chunks, "line {li}");
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(ranges.first().map(|r| r.start), Some(0));
        assert_eq!(ranges.last().map(|r| r.end), Some(l.num_events()));
    }
    // The scan starts the runs laid out, in that order, and gives each its events.
    let (_, scanned) = framed.scan(&Runs).unwrap();
    let visited: Vec<(usize, Run)> = scanned.iter().map(|s| (s.line, s.acc.0.clone())).collect();
    assert_eq!(visited.len(), laid_out.len());
    for ((line, run), (_, want)) in visited.iter().zip(&laid_out) {
        assert_eq!((*line, run), (want.line, want));
    }
    for s in &scanned {
        assert_eq!(s.acc.1, s.acc.0.events.len());
    }
}

#[test]
fn open_scan_reports_the_first_error_in_file_order_across_huge_lines() {
    let (bytes, tags) = mixed_huge_lines();
    let (space, _) = scan_all(&bytes, &ReadOptions::default()).unwrap();
    let lines: Vec<Line<'_>> = space.planes().next().unwrap().lines().collect();
    // The number (over the capture) of each line's first event.
    let before: Vec<usize> = lines
        .iter()
        .scan(0, |n, l| {
            let b = *n;
            *n += l.num_events();
            Some(b)
        })
        .collect();
    assert_eq!(tags.len(), before[4] + lines[4].num_events());
    let late_in = |li: usize| before[li] + lines[li].num_events() * 9 / 10;
    let strict = ReadOptions {
        strict: true,
        no_mmap: true,
        planes: None,
    };
    let bad_utf8 = |bytes: &mut Vec<u8>, k: usize| {
        let at = note_of_event(bytes, tags[k], k);
        bytes[at + 1] = 0xff;
    };
    let strict_error = |bytes: &[u8]| {
        scan_all(bytes, &strict)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    // Content errors late in both huge lines: the first line's, at its event's number.
    let mut bad = bytes.clone();
    bad_utf8(&mut bad, late_in(3));
    bad_utf8(&mut bad, late_in(1));
    assert_same(&bad, &[], "bad stats in both huge lines");
    let err = strict_error(&bad);
    let k = late_in(1) - before[1];
    assert!(err.contains(&format!(".lines[1].events[{k}]")), "{err}");
    // Only in the later line: that line's event.
    let mut bad = bytes.clone();
    bad_utf8(&mut bad, late_in(3));
    assert_same(&bad, &[], "bad stat in the second huge line");
    let err = strict_error(&bad);
    let k = late_in(3) - before[3];
    assert!(err.contains(&format!(".lines[3].events[{k}]")), "{err}");
    // Broken framing (a length that overruns) early, mid-chunk and at the end of a huge line.
    let third = lines[3].num_events() / 3;
    for k in [before[1] + 1, before[3] + third, before[4] - 1] {
        let mut bad = bytes.clone();
        let len = &mut bad[tags[k] + 1];
        *len = if *len < 0x7f { 0x7f } else { 0x01 };
        assert_same(&bad, &[], &format!("overrun at event {k}"));
        assert!(strict_error(&bad).contains(".lines["));
    }
    // A metadata error wins over a line's, as when the metadata was read first.
    let mut bad = bytes.clone();
    let at = bad.windows(11).position(|w| w == b"alpha_event").unwrap();
    bad[at] = 0xff;
    bad_utf8(&mut bad, late_in(1));
    let err = strict_error(&bad);
    assert!(err.contains("event_metadata"), "{err}");
}

/// Collects the events that carry one of `wanted`'s stats ([`EventScan::only_events_with`]).
struct Wanting(Option<Vec<i64>>);

impl EventScan for Wanting {
    type Acc = Vec<Row>;
    fn start(&self, _: Line<'_>, _: &Run) -> Option<Vec<Row>> {
        Some(Vec::new())
    }
    fn event(&self, acc: &mut Vec<Row>, e: Event<'_>, position: Option<usize>) {
        acc.push(row(&e, position));
    }
    fn only_events_with(&self, _: Line<'_>) -> Option<Vec<i64>> {
        self.0.clone()
    }
}

/// One line of events with and without an `hlo_op` stat, one of them laid out out of the
/// usual field order (its stat after `num_occurrences`, where the general loop reads it); and
/// the two stats' metadata ids.
fn line_with_some_hlo_ops() -> (Vec<u8>, i64, i64) {
    let template = XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.line("t", |l| {
                l.event("op", 0, 1)
                    .stat("hlo_op", "fusion.1")
                    .stat("other", 1i64)
            })
        })
        .build();
    let mut plane = template.planes[0].clone();
    let t = plane.lines.remove(0);
    let mid = t.events[0].metadata_id;
    let (hlo_op, other) = (
        t.events[0].stats[0].metadata_id,
        t.events[0].stats[1].metadata_id,
    );
    use pb::x_stat::Value;
    let stat = |metadata_id, value| pb::XStat {
        metadata_id,
        value: Some(value),
    };
    let event = |k: i64, stats: Vec<pb::XStat>| pb::XEvent {
        metadata_id: mid,
        data: Some(pb::x_event::Data::OffsetPs(k * 10)),
        duration_ps: k,
        stats,
    };
    let mut line = pb::XLine {
        id: 1,
        name: "t".into(),
        ..Default::default()
    }
    .encode_to_vec();
    for ev in [
        event(1, vec![stat(hlo_op, Value::StrValue("a".into()))]),
        event(2, vec![stat(other, Value::StrValue("~".into()))]),
        event(3, vec![]),
        event(
            4,
            vec![
                stat(other, Value::Int64Value(4)),
                stat(hlo_op, Value::StrValue("b".into())),
            ],
        ),
    ] {
        line.extend(len_delimited(0x22, &ev.encode_to_vec()));
    }
    // metadata_id, num_occurrences (field 5), then the stat (field 4).
    assert!(
        mid < 0x80,
        "the odd event writes its metadata id in one byte"
    );
    let mut odd = vec![0x08, mid as u8, 0x28, 3];
    odd.extend(len_delimited(
        0x22,
        &stat(hlo_op, Value::StrValue("c".into())).encode_to_vec(),
    ));
    line.extend(len_delimited(0x22, &odd));
    let mut plane_bytes = plane.encode_to_vec();
    plane_bytes.extend(len_delimited(0x1a, &line));
    (len_delimited(0x0a, &plane_bytes), hlo_op, other)
}

#[test]
fn only_events_with_passes_just_the_events_carrying_a_wanted_stat() {
    let (bytes, hlo_op, other) = line_with_some_hlo_ops();
    let opts = ReadOptions::default();
    let eager = XSpace::from_bytes_named(bytes.clone(), "cap", &opts).unwrap();
    let line = eager.planes().next().unwrap().lines().next().unwrap();
    let all: Vec<Event<'_>> = line.events().collect();
    assert_eq!(all.len(), 5);
    for (wanted, expect) in [
        (Some(vec![hlo_op]), vec![1, 4, 5]),
        (Some(vec![other]), vec![2, 4]),
        (Some(vec![other, hlo_op]), vec![1, 2, 4, 5]),
        (Some(vec![]), vec![]),
        (None, vec![1, 2, 3, 4, 5]),
    ] {
        let (_, scanned) =
            XSpace::from_bytes_scan(bytes.clone(), "cap", &opts, &Wanting(wanted.clone())).unwrap();
        let got: Vec<Row> = scanned.into_iter().flat_map(|s| s.acc).collect();
        let want: Vec<Row> = expect
            .iter()
            .map(|k: &usize| {
                let e = &all[k - 1];
                row(e, line.plane().event_metadata_position(e.metadata_id()))
            })
            .collect();
        assert_eq!(got, want, "{wanted:?}");
    }
}

#[test]
fn events_a_scan_does_not_want_are_still_validated() {
    let (mut bytes, hlo_op, _) = line_with_some_hlo_ops();
    // The second event's (unwanted) string stat stops being UTF-8.
    let at = bytes
        .iter()
        .position(|b| *b == b'~')
        .expect("event 2's stat");
    bytes[at] = 0xff;
    let opts = ReadOptions::default();
    let wanting =
        XSpace::from_bytes_scan(bytes.clone(), "cap", &opts, &Wanting(Some(vec![hlo_op])));
    let collect = XSpace::from_bytes_scan(bytes, "cap", &opts, &Collect { skip: &[] });
    match (wanting, collect) {
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (Ok((a, _)), Ok((b, _))) => {
            assert!(!a.is_complete(), "the damaged plane must be reported");
            assert_eq!(a.diagnostics(), b.diagnostics());
        }
        (a, b) => panic!("{:?} vs {:?}", a.map(|_| ()), b.map(|_| ())),
    }
}
