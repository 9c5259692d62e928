//! Our lazy reader and prost's full decode agree on every capture of the shared corpus and of
//! the repository's `fixtures/` (when present), and on concatenations of them.

mod common;

use prost::Message;
use xprof_proto::xplane as pb;
use xprof_xspace::{ReadOptions, XSpace};

#[test]
fn both_decoders_agree_on_every_capture() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut files = common::captures_under(&corpus.join("fixtures"));
    let shared = files.len();
    files.extend(common::captures_under(&common::repo_fixtures()));
    assert!(shared >= 3, "expected the corpus captures, found {shared}");
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let theirs = pb::XSpace::decode(bytes.as_slice())
            .unwrap_or_else(|e| panic!("prost rejects {}: {e}", f.display()));
        for opts in [
            ReadOptions::default(),
            ReadOptions {
                no_mmap: true,
                strict: true,
                planes: None,
            },
        ] {
            let ours = XSpace::open_with(f, &opts)
                .unwrap_or_else(|e| panic!("we reject {}: {e}", f.display()));
            assert!(ours.is_complete(), "{}", f.display());
            let n = common::assert_agree(&ours, &theirs)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert_eq!(n, ours.num_events());
        }
    }
}

#[test]
fn a_concatenation_of_two_captures_is_their_merge() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let files = common::captures_under(&corpus.join("fixtures"));
    let a = std::fs::read(&files[0]).unwrap();
    let b = std::fs::read(&files[1]).unwrap();
    let mut cat = a.clone();
    cat.extend_from_slice(&b);
    let theirs = pb::XSpace::decode(cat.as_slice()).unwrap();
    let ours = XSpace::from_bytes(cat).unwrap();
    let na = XSpace::from_bytes(a).unwrap().planes().len();
    let nb = XSpace::from_bytes(b).unwrap().planes().len();
    assert_eq!(ours.planes().len(), na + nb);
    common::assert_agree(&ours, &theirs).unwrap();
}

#[test]
fn seed_capture_reads_like_xplane_summary() {
    // Figures printed by the corpus' tools/xplane_summary.py for the seed capture.
    let Some(corpus) = common::corpus() else {
        return;
    };
    let path = corpus.join("fixtures/seed-v6e/logdir/plugins/profile/testrun/host0.xplane.pb");
    let space = XSpace::open(&path).unwrap();
    assert_eq!(space.hostname(), "t1v-n-70cf3ce3-w-0");
    let tpu = space.plane("/device:TPU:0").unwrap();
    assert_eq!(tpu.lines().len(), 7);
    assert_eq!(
        tpu.stat("peak_teraflops_per_second").unwrap().double(),
        Some(946.7)
    );
    assert_eq!(tpu.stat("has_merged_vmem").unwrap().bool(), Some(true));
    assert_eq!(tpu.stat("core_details").unwrap().bytes(), Some(&[][..]));
    let ops = tpu.line_by_name("XLA Ops").unwrap();
    assert_eq!(ops.num_events(), 3);
    let ev = ops.events().next().unwrap();
    assert!(
        ev.name()
            .starts_with("%matmul_optimized.1 = f32[2048,2048]")
    );
    // Device timespan comes from the hardware-clock stats; the plain one differs by a skew.
    let (dstart, ddur) = ev.device_timespan();
    assert_eq!(dstart, ev.stat("device_offset_ps").unwrap().int().unwrap());
    assert_eq!(ddur, ev.stat("device_duration_ps").unwrap().int().unwrap());
    assert_ne!(ev.device_timespan(), ev.timespan());
    // The spec's fixture figures (TOOLS-core §1.4): device clock vs line clock.
    assert_eq!(ev.device_timespan(), (81311052500, 75566250));
    assert_eq!(ev.timespan(), (81311052656, 75566172));
    assert_eq!(ev.line().timestamp_ns(), 0);
    // Metadata stats are separate from the event's own.
    assert!(ev.stat("hlo_category").is_none());
    assert!(ev.metadata_stat("hlo_category").is_some());
    let counters = tpu.line_by_name("_counters_").unwrap();
    assert_eq!(counters.id(), i64::MAX);
    assert_eq!(counters.num_events(), 1768);
    let cpu = space.plane("/host:CPU").unwrap();
    let python = cpu.line_by_name("python").unwrap();
    assert_eq!(python.id(), -7565713996007134123);
    assert_eq!(python.num_events(), 46);
    let env = space.plane("Task Environment").unwrap();
    assert_eq!(
        env.stat("profile_start_time").unwrap().int(),
        Some(1783579579390989132)
    );
    let md = space.plane("/host:metadata").unwrap();
    assert_eq!(md.stat("jax_version").unwrap().str(), Some("0.10.0"));
    assert_eq!(md.stat("process_id").unwrap().int(), Some(4146827));
}

#[test]
fn ref_values_resolve_through_stat_metadata() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut refs = 0;
    for f in common::captures_under(&corpus.join("fixtures")) {
        let space = XSpace::open(&f).unwrap();
        for p in space.planes() {
            for l in p.lines() {
                for e in l.events() {
                    for s in e.stats() {
                        if let xprof_xspace::StatValue::Ref(r) = s.value {
                            assert_eq!(s.str(), p.stat_name(r as i64));
                            refs += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(refs > 0, "the corpus has ref_value stats");
}

#[test]
fn a_plane_filter_indexes_only_the_named_planes() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let path = corpus.join("fixtures/seed-v6e/logdir/plugins/profile/testrun/host0.xplane.pb");
    let opts = ReadOptions::default().only_planes(|n| n == "/host:metadata");
    let space = XSpace::open_with(&path, &opts).unwrap();
    let names: Vec<_> = space.planes().map(|p| p.name()).collect();
    assert_eq!(names, ["/host:metadata"]);
    assert_eq!(space.planes().next().unwrap().index(), 0);
    let full = XSpace::open(&path).unwrap();
    assert!(full.planes().len() > 1);
}

#[test]
fn every_metadata_id_shifted_to_64_bits_still_reads() {
    // The seed capture with every event/stat metadata id (and every reference to one) moved
    // past 2^40, as in captures keyed by fingerprints: the tables fall back to hash maps.
    let Some(corpus) = common::corpus() else {
        return;
    };
    let path = corpus.join("fixtures/seed-v6e/logdir/plugins/profile/testrun/host0.xplane.pb");
    let mut space = pb::XSpace::decode(std::fs::read(&path).unwrap().as_slice()).unwrap();
    const SHIFT: i64 = 1 << 40;
    fn shift_stats(stats: &mut [pb::XStat]) {
        for s in stats {
            s.metadata_id += SHIFT;
            if let Some(pb::x_stat::Value::RefValue(r)) = &mut s.value {
                *r += SHIFT as u64;
            }
        }
    }
    for p in &mut space.planes {
        p.event_metadata = std::mem::take(&mut p.event_metadata)
            .into_iter()
            .map(|(k, mut m)| {
                m.id += SHIFT;
                shift_stats(&mut m.stats);
                (k + SHIFT, m)
            })
            .collect();
        p.stat_metadata = std::mem::take(&mut p.stat_metadata)
            .into_iter()
            .map(|(k, mut m)| {
                m.id += SHIFT;
                (k + SHIFT, m)
            })
            .collect();
        shift_stats(&mut p.stats);
        for l in &mut p.lines {
            for e in &mut l.events {
                e.metadata_id += SHIFT;
                shift_stats(&mut e.stats);
            }
        }
    }
    let bytes = space.encode_to_vec();
    let ours = XSpace::from_bytes(bytes).unwrap();
    common::assert_agree(&ours, &space).unwrap();
    assert!(ours.diagnostics().is_empty(), "{:?}", ours.diagnostics());
    let tpu = ours.plane("/device:TPU:0").unwrap();
    assert_eq!(
        tpu.stat("peak_teraflops_per_second").unwrap().double(),
        Some(946.7)
    );
    let ev = tpu
        .line_by_name("XLA Ops")
        .unwrap()
        .events()
        .next()
        .unwrap();
    assert!(ev.metadata_id() > SHIFT);
    assert!(ev.name().starts_with("%matmul_optimized.1"));
    assert!(ev.metadata_stat("hlo_category").is_some());
    assert_ne!(ev.device_timespan(), ev.timespan());
}

#[test]
fn the_floor_scan_frames_every_capture() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    for f in common::captures_under(&corpus.join("fixtures")) {
        let bytes = std::fs::read(&f).unwrap();
        let space = XSpace::from_bytes(bytes.clone()).unwrap();
        let fields = xprof_xspace::wire::scan_floor(&bytes).unwrap();
        // At least one tag per event, plane and line.
        assert!(
            fields as usize >= space.num_events() + space.planes().len(),
            "{}",
            f.display()
        );
        let cut = &bytes[..bytes.len() - 1];
        assert!(
            xprof_xspace::wire::scan_floor(cut).is_err(),
            "{}",
            f.display()
        );
    }
}
