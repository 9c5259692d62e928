//! Shared test helpers: corpus discovery and a field-by-field comparison against prost.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use xprof_proto::xplane as pb;
use xprof_xspace::{EventData, Stat, StatValue, XSpace};

/// `$XPROF_CORPUS`, else `<workspace root>/../shared`; under `CI` a missing corpus fails.
pub fn corpus() -> Option<PathBuf> {
    // The one definition of where the corpus is and that CI never skips.
    xprof_plugin_api::sdk::testing::corpus(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's own `fixtures/` directory.
pub fn repo_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every `*.xplane.pb` / `*.xspace.pb` below `dir`, sorted.
pub fn captures_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".xplane.pb") || n.ends_with(".xspace.pb"))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn stat_matches(ours: Stat<'_>, theirs: &pb::XStat) -> Result<(), String> {
    use pb::x_stat::Value as V;
    if ours.metadata_id != theirs.metadata_id {
        return Err(format!(
            "stat metadata_id {} vs {}",
            ours.metadata_id, theirs.metadata_id
        ));
    }
    let ok = match (&ours.value, &theirs.value) {
        (StatValue::None, None) => true,
        (StatValue::Double(a), Some(V::DoubleValue(b))) => a.to_bits() == b.to_bits(),
        (StatValue::Uint(a), Some(V::Uint64Value(b))) => a == b,
        (StatValue::Int(a), Some(V::Int64Value(b))) => a == b,
        (StatValue::Str(a), Some(V::StrValue(b))) => a == b,
        (StatValue::Bytes(a), Some(V::BytesValue(b))) => *a == b.as_slice(),
        (StatValue::Ref(a), Some(V::RefValue(b))) => a == b,
        (StatValue::CompressedStr(a), Some(V::CompressedStrValue(b))) => *a == b.as_slice(),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("stat value {:?} vs {:?}", ours.value, theirs.value))
    }
}

fn stats_match<'a>(
    ours: impl Iterator<Item = Stat<'a>>,
    theirs: &[pb::XStat],
    what: &str,
) -> Result<(), String> {
    let ours: Vec<_> = ours.collect();
    if ours.len() != theirs.len() {
        return Err(format!("{what}: {} stats vs {}", ours.len(), theirs.len()));
    }
    for (k, (a, b)) in ours.into_iter().zip(theirs).enumerate() {
        stat_matches(a, b).map_err(|e| format!("{what}.stats[{k}]: {e}"))?;
    }
    Ok(())
}

/// Compare our reader with prost's full decode, field by field. Returns the number of events.
pub fn assert_agree(ours: &XSpace, theirs: &pb::XSpace) -> Result<usize, String> {
    if ours.hostnames() != theirs.hostnames {
        return Err("hostnames differ".into());
    }
    if ours.errors() != theirs.errors || ours.warnings() != theirs.warnings {
        return Err("errors/warnings differ".into());
    }
    if ours.planes().len() != theirs.planes.len() {
        return Err(format!(
            "{} planes vs {}",
            ours.planes().len(),
            theirs.planes.len()
        ));
    }
    let mut events = 0;
    for (p, tp) in ours.planes().zip(&theirs.planes) {
        let w = format!("plane '{}'", tp.name);
        if p.id() != tp.id || p.name() != tp.name {
            return Err(format!("{w}: id/name differ"));
        }
        stats_match(p.stats(), &tp.stats, &w)?;
        let ems: Vec<_> = p.event_metadata_iter().collect();
        if ems.len() != tp.event_metadata.len() {
            return Err(format!("{w}: event metadata count"));
        }
        for (m, (k, tm)) in ems.iter().zip(&tp.event_metadata) {
            if m.key() != *k
                || m.id() != tm.id
                || m.name() != tm.name
                || m.display_name() != tm.display_name
                || m.metadata_bytes() != tm.metadata.as_slice()
                || m.child_ids() != tm.child_id
            {
                return Err(format!("{w}: event metadata {k} differs"));
            }
            stats_match(m.stats(), &tm.stats, &format!("{w}.event_metadata[{k}]"))?;
            assert!(p.event_metadata(*k).is_some_and(|x| x.id() == tm.id));
        }
        let sms: Vec<_> = p.stat_metadata_iter().collect();
        if sms.len() != tp.stat_metadata.len() {
            return Err(format!("{w}: stat metadata count"));
        }
        for (m, (k, tm)) in sms.iter().zip(&tp.stat_metadata) {
            if m.key() != *k
                || m.id() != tm.id
                || m.name() != tm.name
                || m.description() != tm.description
            {
                return Err(format!("{w}: stat metadata {k} differs"));
            }
            assert_eq!(p.stat_name(*k), Some(tm.name.as_str()));
        }
        if p.lines().len() != tp.lines.len() {
            return Err(format!("{w}: line count"));
        }
        for (l, tl) in p.lines().zip(&tp.lines) {
            let lw = format!("{w} line '{}'", tl.name);
            if l.id() != tl.id
                || l.display_id() != tl.display_id
                || l.name() != tl.name
                || l.display_name() != tl.display_name
                || l.timestamp_ns() != tl.timestamp_ns
                || l.duration_ps() != tl.duration_ps
                || l.num_events() != tl.events.len()
            {
                return Err(format!("{lw}: header differs"));
            }
            for (k, (e, te)) in l.events().zip(&tl.events).enumerate() {
                use pb::x_event::Data;
                let data_ok = match (e.data(), &te.data) {
                    (EventData::None, None) => true,
                    (EventData::OffsetPs(a), Some(Data::OffsetPs(b))) => a == *b,
                    (EventData::NumOccurrences(a), Some(Data::NumOccurrences(b))) => a == *b,
                    _ => false,
                };
                if !data_ok
                    || e.metadata_id() != te.metadata_id
                    || e.duration_ps() != te.duration_ps
                {
                    return Err(format!("{lw}: event {k} differs"));
                }
                stats_match(e.stats(), &te.stats, &format!("{lw}.events[{k}]"))?;
                events += 1;
            }
            if l.events().count() != tl.events.len() {
                return Err(format!("{lw}: event count"));
            }
        }
    }
    Ok(events)
}

/// A small capture with a TPU plane (metadata stats, device timespans, a group id) and a host
/// plane: the input of the exhaustive truncation and corruption tests.
pub fn small_capture() -> Vec<u8> {
    use xprof_testkit::{Ref, XSpaceBuilder};
    XSpaceBuilder::new()
        .hostname("h")
        .plane("/device:TPU:0", |p| {
            p.stat("peak_teraflops_per_second", 918.0)
                .line("XLA Ops", |l| {
                    l.event("fusion.1", 10, 20)
                        .metadata_stat("hlo_category", Ref("loop fusion"))
                        .device_timespan(9, 21)
                        .event("copy.2", 40, 5)
                        .stat("group_id", 3i64)
                })
        })
        .plane("/host:CPU", |p| {
            p.line_with_id(5, "main/5", |l| {
                l.timestamp_ns(100).event("step", 0, 1000).stat("_r", 1i64)
            })
        })
        .to_bytes()
}
