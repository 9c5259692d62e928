//! `EventQuery::open_grouped` and `open_counted` (grouping / counting while the reader
//! validates, one pass) give what `group_durations` and `page` give on an opened space, for
//! every capture of the corpus and the repo's fixtures, a capture with chunked huge lines, and
//! each kind of filter.

use std::path::{Path, PathBuf};

use xprof_opstats::events::{DurationStats, EventQuery, group_stats};
use xprof_xspace::{ReadOptions, XSpace};

/// Every capture file of the run directories under `fixtures/` and the corpus's `fixtures/`.
fn captures() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        xprof_plugin_api::sdk::testing::run_dirs(env!("CARGO_MANIFEST_DIR"))
            .iter()
            .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with(".xplane.pb"))
            .collect();
    out.sort();
    out
}

type Keyed = Vec<((String, String, String), DurationStats)>;

/// The groups' statistics by key (the order groups are found in depends on how the runs were
/// shared among threads).
fn keyed(groups: Vec<xprof_opstats::events::DurationGroup<'_>>) -> Keyed {
    let mut k: Keyed = group_stats(groups)
        .into_iter()
        .map(|((e, p, l), st)| ((e.into(), p.into(), l.into()), st))
        .collect();
    k.sort_by(|a, b| a.0.cmp(&b.0));
    k
}

#[test]
fn open_grouped_equals_group_durations() {
    let files = captures();
    assert!(files.len() >= 2, "{files:?}");
    let any = |_: &str| true;
    let tpu = |s: &str| s.contains("TPU") || s.contains("CPU");
    let short = |s: &str| s.len() < 12;
    let queries = queries(&any, &tpu, &short);
    for f in &files {
        let space = XSpace::open(f).unwrap();
        for q in &queries {
            for (e, p, l) in [
                (true, false, false),
                (true, true, false),
                (true, true, true),
                (false, false, true),
            ] {
                let (m1, g1) = q.group_durations(&space, e, p, l);
                let (fused, runs) = q.open_grouped(f, &ReadOptions::default(), l).unwrap();
                let (m2, g2) = q.merge_groups(&fused, runs, e, p, l);
                assert_eq!(m1, m2, "{}", f.display());
                let (k1, k2) = (keyed(g1), keyed(g2));
                assert_eq!(k1.len(), k2.len(), "{}", f.display());
                for (a, b) in k1.iter().zip(&k2) {
                    assert_eq!(a.0, b.0, "{}", f.display());
                    let (x, y) = (&a.1, &b.1);
                    assert_eq!(
                        (x.count, x.total, x.min, x.max, x.p50, x.p90, x.p99),
                        (y.count, y.total, y.min, y.max, y.p50, y.p90, y.p99)
                    );
                }
            }
        }
    }
}

/// Everything, and a query with every filter kind: `plane` on plane names, `names` on line
/// and event names, a time window and duration bounds.
fn queries<'f>(
    any: &'f (dyn Fn(&str) -> bool + Sync),
    plane: &'f (dyn Fn(&str) -> bool + Sync),
    names: &'f (dyn Fn(&str) -> bool + Sync),
) -> Vec<EventQuery<'f>> {
    vec![
        EventQuery {
            plane: any,
            line: any,
            event: any,
            ..EventQuery::everything()
        },
        EventQuery {
            plane,
            line: names,
            event: names,
            start_ps: Some(0),
            end_ps: Some(i64::MAX / 2),
            min_duration_ps: Some(1),
            max_duration_ps: Some(1_000_000_000),
            overlap: true,
            filter: None,
        },
    ]
}

fn assert_pages_agree(f: &Path) {
    let any = |_: &str| true;
    let some = |s: &str| s.len() < 12 || s.contains('a');
    let space = XSpace::open(f).unwrap();
    for q in &queries(&any, &any, &some) {
        let (all, _) = q.page(&space, 0, 0);
        for (skip, max) in [
            (0, 0),
            (0, 1),
            (0, 100),
            (7, 50),
            (all / 2, 1000),
            (all.saturating_sub(3), 10),
            (all + 5, 10),
            (0, usize::MAX),
        ] {
            let eager = q.page(&space, skip, max);
            let (fused, counts) = q.open_counted(f, &ReadOptions::default()).unwrap();
            let one_pass = q.page_counted(&fused, counts, skip, max);
            assert_eq!(eager, one_pass, "{} skip {skip} max {max}", f.display());
        }
    }
}

#[test]
fn open_counted_pages_equal_page() {
    for f in captures() {
        assert_pages_agree(&f);
    }
    // A line of ~3 MB: counted and paged in ~1 MiB runs.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big.xplane.pb");
    let bytes = xprof_testkit::XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.line("python", |mut l| {
                for k in 0..120_000i64 {
                    l = l
                        .event(if k % 3 == 0 { "a" } else { "bb" }, k * 10, k % 7)
                        .stat("group_id", k);
                }
                l
            })
        })
        .to_bytes();
    assert!(bytes.len() > 2 << 20);
    std::fs::write(&f, bytes).unwrap();
    assert_pages_agree(&f);
}

/// Every key combination, against a count and sum per key taken by walking every event of the
/// opened space (so the merge of per-run groups, which reuses a (plane, slot)'s group across
/// the runs of a plane when the line is not part of the key, is checked against the events
/// themselves, not against itself).
#[test]
fn merged_groups_match_a_walk_over_every_event_for_every_key() {
    use std::collections::HashMap;
    let any = |_: &str| true;
    let q = &queries(&any, &any, &any)[0];
    for f in &captures() {
        let space = XSpace::open(f).unwrap();
        for bits in 0..8u8 {
            let (e, p, l) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
            let mut want: HashMap<(String, String, String), (usize, i64)> = HashMap::new();
            for plane in space.planes() {
                for line in plane.lines() {
                    for ev in line.events() {
                        let name = ev.metadata().map_or("Unknown", |_| ev.display_name());
                        let key = (
                            if e { name } else { "" }.to_string(),
                            if p { plane.name() } else { "" }.to_string(),
                            if l { line.name() } else { "" }.to_string(),
                        );
                        let w = want.entry(key).or_default();
                        w.0 += 1;
                        w.1 += ev.duration_ps();
                    }
                }
            }
            let (fused, runs) = q.open_grouped(f, &ReadOptions::default(), l).unwrap();
            let (_, groups) = q.merge_groups(&fused, runs, e, p, l);
            let got: HashMap<(String, String, String), (usize, i64)> = keyed(groups)
                .into_iter()
                .map(|(k, st)| (k, (st.count, st.total)))
                .collect();
            assert_eq!(got, want, "{} group_by bits {bits:03b}", f.display());
        }
    }
}

#[test]
fn a_plane_dropped_for_a_corrupt_event_leaves_nothing_in_the_groups() {
    // Many lines on the host plane, so that several runs (on both worker threads) add to the
    // threads' accumulators, which fill up (64 Ki durations) and are set aside, before the last
    // line's corrupt event drops the plane.
    let mut b = xprof_testkit::XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Ops", |l| {
            l.event("fusion.1", 0, 10).event("fusion.1", 20, 30)
        })
    });
    b = b.plane("/host:CPU", |mut p| {
        for t in 0..64 {
            p = p.line(&format!("thread {t}"), |mut l| {
                for k in 0..2100 {
                    l = l.event("host_only", k * 10, 5);
                }
                if t == 63 {
                    l = l.event("host_only", 30_000, 5).stat("note", "CORRUPTME");
                }
                l
            });
        }
        p
    });
    let mut bytes = b.to_bytes();
    let at = bytes
        .windows(9)
        .position(|w| w == b"CORRUPTME")
        .expect("the marker is in the encoding");
    bytes[at] = 0xff; // no longer UTF-8: the reader drops the plane (not strict)
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("host0.xplane.pb");
    std::fs::write(&f, &bytes).unwrap();
    let any = |_: &str| true;
    let q = &queries(&any, &any, &any)[0];
    let space = XSpace::open(&f).unwrap();
    assert_eq!(
        space.planes().count(),
        1,
        "the reader drops the corrupt plane"
    );
    for (e, p, l) in [
        (true, false, false),
        (true, true, false),
        (true, true, true),
    ] {
        let (m1, g1) = q.group_durations(&space, e, p, l);
        let (fused, runs) = q.open_grouped(&f, &ReadOptions::default(), l).unwrap();
        let (m2, g2) = q.merge_groups(&fused, runs, e, p, l);
        assert_eq!((m1, m2), (2, 2));
        let (k1, k2) = (keyed(g1), keyed(g2));
        assert_eq!(k1.len(), 1);
        assert_eq!(k1[0].0, k2[0].0);
        assert_eq!(k2.len(), 1, "no group of the dropped plane: {:?}", k2[1].0);
    }
}
