//! The reader on synthetic captures built with xprof-testkit: shapes the corpus lacks.

mod common;

use prost::Message;
use xprof_testkit::{Ref, XSpaceBuilder, simple_hlo_proto};
use xprof_xspace::{EventData, StatValue, XSpace, hlo};

fn read(b: &XSpaceBuilder) -> XSpace {
    let bytes = b.to_bytes();
    let space = XSpace::from_bytes(bytes.clone()).unwrap();
    let theirs = xprof_proto::xplane::XSpace::decode(bytes.as_slice()).unwrap();
    common::assert_agree(&space, &theirs).unwrap();
    space
}

#[test]
fn stats_resolve_by_name_on_each_plane_and_by_kind() {
    let b = XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.stat("unused_first", 0i64).line_with_id(7, "main/7", |l| {
                l.timestamp_ns(2)
                    .event("MemoryAllocation", 5, 0)
                    .stat("bytes_allocated", 4096i64)
                    .stat("allocator_name", Ref("GPU_0_bfc"))
                    .stat("fragmentation", 0.25)
                    .stat("peak_bytes_in_use", u64::MAX)
                    .stat("tf_op", "jit(f)/dot")
                    .stat("blob", vec![1u8, 2, 3])
            })
        })
        .plane("/device:GPU:0", |p| {
            p.line("Stream #1", |l| {
                l.event("fusion_kernel", 10, 20)
                    .stat("hlo_op", "fusion.3")
                    .stat("bytes_allocated", -1i64)
            })
        });
    let space = read(&b);
    let cpu = space.plane("/host:CPU").unwrap();
    let gpu = space.plane("/device:GPU:0").unwrap();
    assert_ne!(
        cpu.stat_id("bytes_allocated"),
        gpu.stat_id("bytes_allocated")
    );
    let ev = cpu.lines().next().unwrap().events().next().unwrap();
    assert_eq!(ev.start_ps(), 2 * 1000 + 5);
    assert_eq!(ev.stat("bytes_allocated").unwrap().int(), Some(4096));
    assert_eq!(ev.stat("allocator_name").unwrap().str(), Some("GPU_0_bfc"));
    assert!(matches!(
        ev.stat("allocator_name").unwrap().value,
        StatValue::Ref(_)
    ));
    assert_eq!(ev.stat("fragmentation").unwrap().double(), Some(0.25));
    assert_eq!(ev.stat("bytes_allocated").unwrap().double(), Some(4096.0));
    assert_eq!(ev.stat("peak_bytes_in_use").unwrap().uint(), Some(u64::MAX));
    assert_eq!(ev.stat("peak_bytes_in_use").unwrap().int(), Some(-1));
    assert_eq!(ev.stat("tf_op").unwrap().str(), Some("jit(f)/dot"));
    assert_eq!(ev.stat("blob").unwrap().bytes(), Some(&[1u8, 2, 3][..]));
    assert_eq!(ev.stat("fragmentation").unwrap().int(), None);
    assert!(ev.stat("hlo_op").is_none());
    let gev = gpu.lines().next().unwrap().events().next().unwrap();
    assert_eq!(gev.stat("bytes_allocated").unwrap().int(), Some(-1));
    assert_eq!(gev.stat("hlo_op").unwrap().name(), "hlo_op");
    assert_eq!(gev.device_timespan(), gev.timespan()); // no device stats → plain timespan
}

#[test]
fn metadata_stats_are_separate_and_aggregated_events_have_no_offset() {
    let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Ops", |l| {
            l.event("%fusion.1 = f32[8] fusion(...)", 100, 50)
                .display_name("fusion.1")
                .metadata_stat("hlo_category", "output fusion")
                .metadata_stat("flops", 2.0e6)
                .stat("flops", 7.0)
                .aggregated_event("%fusion.1 = f32[8] fusion(...)", 12, 600)
        })
        .event_metadata("%fusion.1 = f32[8] fusion(...)", |m, _| {
            m.child_id = vec![3, 4]
        })
    });
    let space = read(&b);
    let tpu = space.plane("/device:TPU:0").unwrap();
    let evs: Vec<_> = tpu.lines().next().unwrap().events().collect();
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].display_name(), "fusion.1");
    assert!(evs[0].name().starts_with("%fusion.1"));
    assert_eq!(evs[0].stat("flops").unwrap().double(), Some(7.0));
    assert_eq!(evs[0].metadata_stat("flops").unwrap().double(), Some(2.0e6));
    assert!(evs[0].stat("hlo_category").is_none());
    assert_eq!(
        evs[0].stat_or_metadata("hlo_category").unwrap().str(),
        Some("output fusion")
    );
    assert_eq!(evs[1].data(), EventData::NumOccurrences(12));
    assert_eq!(evs[1].offset_ps(), 0);
    assert_eq!(evs[1].num_occurrences(), 12);
    assert_eq!(evs[0].metadata().unwrap().child_ids(), [3, 4]);
}

#[test]
fn sparse_64_bit_metadata_ids_and_embedded_hlo_modules() {
    let fp: u64 = 17342868964687645945; // > i64::MAX, like real program fingerprints
    let a = simple_hlo_proto("jit_a", &[("p", "parameter"), ("n", "negate")]);
    let b2 = simple_hlo_proto("jit_b", &[("p", "parameter")]);
    let dup = simple_hlo_proto("jit_a_again", &[("p", "parameter")]);
    let b = XSpaceBuilder::new().plane("/host:metadata", |p| {
        p.hlo_module(fp as i64, fp, &a)
            .hlo_module(3, 3, &b2)
            // Same program id as the first: dropped. "First" is by map key, and `fp as i64` is
            // negative (-1.1e18), so it precedes -1.
            .hlo_module(-1, fp, &dup)
            .stat("jax_version", "0.10.2")
    });
    let space = read(&b);
    let md = space.plane("/host:metadata").unwrap();
    assert_eq!(
        md.event_metadata(fp as i64).unwrap().name(),
        format!("jit_a({fp})")
    );
    assert_eq!(md.event_metadata(3).unwrap().name(), "jit_b(3)");
    let mods = hlo::embedded_hlo_modules(&space);
    let names: Vec<_> = mods.iter().map(|m| m.display_name()).collect();
    assert_eq!(names, [format!("jit_a({fp})"), "jit_b(3)".to_string()]);
    assert_eq!(mods[1].decode().unwrap(), b2);
    assert_eq!(mods[0].program_id, fp);
}

#[test]
fn dangling_metadata_ids_are_diagnosed_not_fatal() {
    use xprof_proto::xplane as pb;
    let plane = pb::XPlane {
        name: "/device:TPU:0".into(),
        lines: vec![pb::XLine {
            name: "XLA Ops".into(),
            events: vec![pb::XEvent {
                metadata_id: 99,
                duration_ps: 5,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let space = read(&XSpaceBuilder::new().raw_plane(plane));
    assert!(space.is_complete());
    assert!(
        space
            .diagnostics()
            .iter()
            .any(|d| d.contains("1 events reference")),
        "{:?}",
        space.diagnostics()
    );
    let ev = space
        .planes()
        .next()
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .events()
        .next()
        .unwrap();
    assert_eq!(ev.name(), "");
    assert_eq!(ev.data(), EventData::None);
    assert_eq!(space.hostname(), "localhost");
}

#[test]
fn profiler_errors_warnings_and_hostnames() {
    let b = XSpaceBuilder::new()
        .hostname("h1")
        .hostname("h2")
        .error("e1")
        .warning("w1");
    let space = read(&b);
    assert_eq!(space.hostname(), "h1");
    assert_eq!(space.hostnames(), ["h1", "h2"]);
    assert_eq!(space.errors(), ["e1"]);
    assert_eq!(space.warnings(), ["w1"]);
}

#[test]
fn nesting_self_time_over_a_line() {
    let b = XSpaceBuilder::new().plane("/device:TPU:0", |p| {
        p.line("XLA Ops", |l| {
            l.event("while", 0, 100)
                .event("body.fusion", 10, 30)
                .event("body.copy", 50, 20)
                .event("after", 100, 10)
        })
    });
    let space = read(&b);
    let line = space.planes().next().unwrap().lines().next().unwrap();
    let nested = xprof_xspace::self_times(
        line.events()
            .map(|e| (e.name(), e.start_ps(), e.duration_ps())),
    );
    let self_of = |n: &str| nested.iter().find(|x| x.item == n).unwrap().self_time_ps;
    assert_eq!(self_of("while"), 50);
    assert_eq!(self_of("body.fusion"), 30);
    assert_eq!(self_of("after"), 10);
}

#[test]
fn a_repeated_stat_reads_as_its_first_occurrence_like_xprof() {
    let b = XSpaceBuilder::new().plane("p", |p| {
        p.line("l", |l| {
            l.event("e", 0, 1)
                .stat("x", 1i64)
                .stat("x", 2i64)
                .device_timespan(5, 6)
                .device_timespan(7, 8)
        })
    });
    let space = read(&b);
    let ev = space
        .planes()
        .next()
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .events()
        .next()
        .unwrap();
    assert_eq!(ev.stat("x").unwrap().int(), Some(1));
    assert_eq!(ev.stats().filter(|s| s.name() == "x").count(), 2);
    assert_eq!(ev.device_timespan(), (5, 6));
}

/// A line of several MiB is validated in parallel chunks: same result as prost, and an error
/// deep in a late chunk still names its global event index.
#[test]
fn huge_lines_are_validated_in_chunks() {
    use xprof_proto::xplane as pb;
    let n = 200_000;
    let b = XSpaceBuilder::new().plane("/host:CPU", |p| {
        p.line_with_id(9, "python", |mut l| {
            l = l.timestamp_ns(5);
            for k in 0..n {
                l = l
                    .event(if k % 3 == 0 { "a" } else { "b" }, k * 10, 7)
                    .stat("k", k);
            }
            l
        })
    });
    let space = read(&b);
    let line = space.planes().next().unwrap().lines().next().unwrap();
    assert!(
        space.bytes().len() > 2 << 20,
        "the line must span several 1 MiB chunks"
    );
    assert_eq!(line.num_events(), n as usize);
    assert_eq!(line.name(), "python");
    assert_eq!(line.timestamp_ns(), 5);
    let last = line.events().last().unwrap();
    assert_eq!(last.stat("k").unwrap().int(), Some(n - 1));
    // Chunked iteration yields the same events in the same order, split into several runs.
    let runs = line.events_chunked(256 << 10);
    assert!(runs.len() > 4, "{} runs", runs.len());
    assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), n as usize);
    let ks: Vec<i64> = runs
        .into_iter()
        .flatten()
        .map(|e| e.stat("k").unwrap().int().unwrap())
        .collect();
    assert_eq!(ks, (0..n).collect::<Vec<_>>());
    assert_eq!(line.events_chunked(usize::MAX).len(), 1);
    // The runs `open` validated in parallel come for free and cover the line in order.
    let runs = line.event_runs();
    assert!(runs.len() >= 3, "{} runs", runs.len());
    assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), n as usize);
    let ks: Vec<i64> = runs
        .into_iter()
        .flatten()
        .map(|e| e.stat("k").unwrap().int().unwrap())
        .collect();
    assert_eq!(ks, (0..n).collect::<Vec<_>>());
    let small = read(&XSpaceBuilder::new().plane("p", |p| p.line("l", |l| l.event("e", 0, 1))));
    assert_eq!(
        small
            .planes()
            .next()
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .event_runs()
            .len(),
        1
    );

    // Corrupt event number n-10 (its `k` stat becomes a string that is not UTF-8).
    let mut space_pb: pb::XSpace = b.build();
    let target = n as usize - 10;
    let ev = &mut space_pb.planes[0].lines[0].events[target];
    ev.stats[0].value = Some(pb::x_stat::Value::StrValue("x".into()));
    let mut bytes = prost::Message::encode_to_vec(&space_pb);
    let pos = bytes
        .windows(3)
        .rposition(|w| w == [0x2a, 0x01, b'x'])
        .unwrap();
    bytes[pos + 2] = 0xff;
    let strict = xprof_xspace::ReadOptions {
        strict: true,
        ..Default::default()
    };
    let e = XSpace::from_bytes_named(bytes.clone(), "big", &strict).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&format!(".lines[0].events[{target}]")),
        "{msg}"
    );
    // Lenient: the plane is dropped, and the diagnostic says where.
    let lenient = XSpace::from_bytes(bytes).unwrap();
    assert!(!lenient.is_complete());
    assert!(lenient.diagnostics()[0].contains(&format!("events[{target}]")));
    assert_eq!(e.offset(), Some(pos as u64 + 2));
}

#[test]
fn compressed_strings_decompress() {
    use std::io::Write;
    use xprof_proto::xplane as pb;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all("a long tf_op name".as_bytes()).unwrap();
    let packed = gz.finish().unwrap();
    let stat = |v| pb::XStat {
        metadata_id: 1,
        value: Some(v),
    };
    let plane = pb::XPlane {
        name: "p".into(),
        stat_metadata: [(
            1,
            pb::XStatMetadata {
                id: 1,
                name: "tf_op".into(),
                ..Default::default()
            },
        )]
        .into(),
        stats: vec![
            stat(pb::x_stat::Value::CompressedStrValue(packed)),
            stat(pb::x_stat::Value::CompressedStrValue(b"not gzip".to_vec())),
            stat(pb::x_stat::Value::StrValue("plain".into())),
        ],
        ..Default::default()
    };
    let space = read(&XSpaceBuilder::new().raw_plane(plane));
    let stats: Vec<_> = space.planes().next().unwrap().stats().collect();
    assert_eq!(
        stats[0].decompress_str().unwrap().unwrap(),
        "a long tf_op name"
    );
    assert!(stats[1].decompress_str().unwrap().is_err());
    assert!(stats[2].decompress_str().is_none());
    assert_eq!(stats[0].str(), None);
}

#[test]
fn a_map_value_repeated_inside_one_entry_merges_like_prost() {
    use prost::Message;
    use xprof_proto::xplane as pb;
    // event_metadata entry {key 1, value {id 1, name "a", stats [s1], child_id [5]},
    //                       value {stats [s2], child_id [6]}} — the two values merge.
    let v1 = pb::XEventMetadata {
        id: 1,
        name: "a".into(),
        stats: vec![pb::XStat {
            metadata_id: 1,
            value: Some(pb::x_stat::Value::Int64Value(1)),
        }],
        child_id: vec![5],
        ..Default::default()
    }
    .encode_to_vec();
    let v2 = pb::XEventMetadata {
        stats: vec![pb::XStat {
            metadata_id: 1,
            value: Some(pb::x_stat::Value::Int64Value(2)),
        }],
        child_id: vec![6],
        ..Default::default()
    }
    .encode_to_vec();
    let mut entry = vec![0x08, 0x01];
    for v in [&v1, &v2] {
        entry.push(0x12);
        entry.push(v.len() as u8);
        entry.extend_from_slice(v);
    }
    let mut plane = vec![0x12, 0x01, b'p', 0x22, entry.len() as u8];
    plane.extend(entry);
    let mut bytes = vec![0x0a, plane.len() as u8];
    bytes.extend(plane);
    let theirs = pb::XSpace::decode(bytes.as_slice()).unwrap();
    assert_eq!(theirs.planes[0].event_metadata[&1].stats.len(), 2);
    let ours = XSpace::from_bytes(bytes).unwrap();
    common::assert_agree(&ours, &theirs).unwrap();
    let md = ours.planes().next().unwrap().event_metadata(1).unwrap();
    assert_eq!(md.name(), "a");
    assert_eq!(md.child_ids(), [5, 6]);
}
