//! The `--filter` expression inside the parallel event scan (`EventQuery::filter`), on a
//! synthetic capture: agreement with a direct evaluation of every event, paging, grouping and
//! `events_scanned`.

use xprof_opstats::events::EventQuery;
use xprof_opstats::filter::{Fields, Filter, Matcher};
use xprof_testkit::XSpaceBuilder;
use xprof_xspace::XSpace;

/// Substring "regexes" (`^` anchors), enough for these tests.
fn re(p: &str) -> Result<Matcher, String> {
    let p = p.to_string();
    Ok(match p.strip_prefix('^') {
        Some(r) => {
            let r = r.to_string();
            Box::new(move |s: &str| s.starts_with(r.as_str()))
        }
        None => Box::new(move |s: &str| s.contains(p.as_str())),
    })
}

/// Two planes; the host line starts at 1 µs (absolute starts differ from offsets); one line
/// big enough to be scanned as several runs.
fn space() -> XSpace {
    let sp = build();
    let ops = sp.planes().next().unwrap().lines().next().unwrap();
    assert!(
        ops.event_runs().len() > 1,
        "XLA Ops should be scanned as several runs"
    );
    sp
}

/// Events on the TPU's `XLA Ops` line.
const N: i64 = 300_000;

fn build() -> XSpace {
    let b = XSpaceBuilder::new()
        .plane("/device:TPU:0", |p| {
            let p = p.line("XLA Ops", |mut l| {
                for i in 0..N {
                    let name = ["fusion.1", "copy.2", "convolution.3"][(i % 3) as usize];
                    l = l.event(name, i * 10_000, (i % 7) * 1_000);
                }
                l
            });
            p.line("Steps", |l| l.event("0", 0, 400_000_000))
        })
        .plane("/host:CPU", |p| {
            p.line_with_id(4242, "python", |l| {
                l.timestamp_ns(1_000)
                    .event("fusion.1", 0, 2_000_000)
                    .event("$main", 500_000, 3_000)
            })
        });
    XSpace::from_bytes(b.to_bytes()).expect("synthetic capture")
}

fn query(filter: Option<&Filter>) -> EventQuery<'_> {
    EventQuery {
        filter,
        ..EventQuery::everything()
    }
}

/// Every event of the capture, evaluated directly.
fn direct(space: &XSpace, f: &Filter) -> usize {
    let mut n = 0;
    for p in space.planes() {
        for l in p.lines() {
            for e in l.events() {
                let name = p
                    .event_metadata(e.metadata_id())
                    .map_or("Unknown", |m| m.name());
                let fields = Fields {
                    plane: p.name(),
                    line: l.name(),
                    line_id: l.id(),
                    event: name,
                    start_ps: e.start_ps(),
                    duration_ps: e.duration_ps(),
                };
                n += usize::from(f.matches(&fields));
            }
        }
    }
    n
}

const EXPRS: &[&str] = &[
    "",
    "duration_ns > 3",
    "duration_ns >= 3 and event == fusion.1",
    "not (event contains copy or event =~ ^conv) and plane contains TPU",
    "line_id == 4242",
    "line == python and start_ps >= 1us",
    "offset_ps < 1.5us and plane == /host:CPU",
    "end_ps <= 20000ns or duration_ms > 0.1",
    "line_id == 'XLA Ops' and duration_ps == 0",
    "event == 0",
];

#[test]
fn the_scan_agrees_with_direct_evaluation() {
    let sp = space();
    for e in EXPRS {
        let f = Filter::parse(e, &re).unwrap();
        let want = direct(&sp, &f);
        let (total, page) = query(Some(&f)).page(&sp, 0, usize::MAX);
        assert_eq!(total, want, "{e}");
        assert_eq!(page.len(), want, "{e}");
        let (matched, groups) = query(Some(&f)).group_durations(&sp, true, false, false);
        assert_eq!(matched, want, "{e}");
        assert_eq!(groups.iter().map(|g| g.len()).sum::<usize>(), want, "{e}");
    }
    // Without an expression, as before.
    assert_eq!(query(None).page(&sp, 0, 0).0, N as usize + 3);
}

#[test]
fn absolute_start_is_line_timestamp_plus_offset() {
    let sp = space();
    let f = Filter::parse("start_ps == 1us and plane contains host", &re).unwrap();
    let (n, hits) = query(Some(&f)).page(&sp, 0, 10);
    assert_eq!(n, 1);
    assert_eq!((hits[0].offset_ps, hits[0].start_ps), (0, 1_000_000));
    assert_eq!(hits[0].name, "fusion.1");
    let f = Filter::parse("end_ps == 1.503us and line == python", &re).unwrap();
    assert_eq!(query(Some(&f)).page(&sp, 0, 10).1[0].name, "$main");
}

#[test]
fn pages_combine_filter_and_other_filters() {
    let sp = space();
    let f = Filter::parse("duration_ns >= 5 and plane contains TPU", &re).unwrap();
    let fusion = |s: &str| s == "fusion.1";
    let q = EventQuery {
        event: &fusion,
        start_ps: Some(0),
        end_ps: Some(100_000_000),
        ..query(Some(&f))
    };
    let (total, hits) = q.page(&sp, 3, 4);
    // fusion.1 is event i ≡ 0 (mod 3) of XLA Ops; duration (i mod 7) µs-thousandths ≥ 5 ns
    // means i mod 7 ∈ {5, 6}; inside [0, 100 µs] means start i·10 ns + dur ≤ 100 µs.
    let want: Vec<i64> = (0..N)
        .filter(|i| i % 3 == 0 && i % 7 >= 5 && i * 10_000 + (i % 7) * 1_000 <= 100_000_000)
        .collect();
    assert_eq!(total, want.len());
    let got: Vec<i64> = hits.iter().map(|h| h.offset_ps / 10_000).collect();
    assert_eq!(got, want[3..7]);
}

#[test]
fn events_scanned_counts_the_planes_and_lines_kept() {
    let sp = space();
    assert_eq!(query(None).events_scanned(&sp), N as usize + 3);
    let tpu = |s: &str| s.contains("TPU");
    let q = EventQuery {
        plane: &tpu,
        ..query(None)
    };
    assert_eq!(q.events_scanned(&sp), N as usize + 1);
    let ops = |s: &str| s == "XLA Ops";
    let q = EventQuery {
        line: &ops,
        ..query(None)
    };
    assert_eq!(q.events_scanned(&sp), N as usize);
}
