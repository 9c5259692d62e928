//! Malformed input: a corpus of broken captures generated here (written to a temp directory
//! and opened by path, as users do), plus exhaustive truncations and byte flips of a small
//! capture checked against prost. Nothing may panic; every error names the file and a byte
//! offset; a result is never partial without saying so.

mod common;

use common::small_capture;

use prost::Message;
use std::path::Path;
use xprof_proto::xplane as pb;
use xprof_xspace::{ReadOptions, XSpace, XSpaceError};

fn strict() -> ReadOptions {
    ReadOptions {
        strict: true,
        no_mmap: true,
        planes: None,
    }
}

fn expect_malformed(r: Result<XSpace, XSpaceError>, file: &Path, offset: u64, detail: &str) {
    match r {
        Err(e @ XSpaceError::Malformed { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&file.display().to_string()), "{msg}");
            assert!(msg.contains(&format!("byte {offset}")), "{msg}");
            assert!(msg.contains(detail), "{msg}");
            assert_eq!(e.offset(), Some(offset));
            assert_eq!(e.kind(), "invalid_value");
            assert!(e.hint().contains("re-capture") || e.hint().contains("looks like"));
        }
        other => panic!(
            "{}: expected a malformed error, got {other:?}",
            file.display()
        ),
    }
}

#[test]
fn the_malformed_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let good = small_capture();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };

    // Empty file: protobuf's empty XSpace, with a diagnostic.
    let p = write("empty.xplane.pb", &[]);
    let s = XSpace::open(&p).unwrap();
    assert_eq!(s.planes().len(), 0);
    assert!(s.diagnostics()[0].contains("empty"));

    // Truncated in the middle of the second plane: the outer length runs past the end.
    let cut = good.len() - 7;
    let p = write("truncated.xplane.pb", &good[..cut]);
    let second_plane_len_byte = {
        // tag(1 byte) + length varint of plane 0 + its payload → tag of plane 1, then its length.
        let mut pos = 1;
        let len0 = xprof_xspace::wire::read_varint(&good, &mut pos, good.len()).unwrap() as usize;
        let q = pos + len0;
        assert_eq!(good[q], 0x0a, "prost writes planes (field 1) first");
        q + 1
    };
    expect_malformed(
        XSpace::open(&p),
        &p,
        second_plane_len_byte as u64,
        "truncated",
    );

    // Not a protobuf at all: text.
    let p = write("text.xplane.pb", b"this is not a capture\n");
    let r = XSpace::open(&p);
    assert!(matches!(r, Err(XSpaceError::Malformed { .. })), "{r:?}");
    assert!(r.unwrap_err().hint().contains("text"));

    // Gzip magic: 0x1f = field 3 wire type 7, an invalid wire type at byte 0; the hint says gzip.
    let p = write("gzip.xplane.pb", &[0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0]);
    let r = XSpace::open(&p);
    assert!(r.as_ref().unwrap_err().hint().contains("gzip"), "{r:?}");
    expect_malformed(r, &p, 0, "invalid wire type 7");
    // JSON (a trace viewer export).
    let p = write("json.xplane.pb", b"{\"traceEvents\": []}");
    let r = XSpace::open(&p);
    assert!(r.unwrap_err().hint().contains("JSON"));

    // Overlong varint: XSpace.hostnames tag, then an 11-byte length.
    let mut v = vec![0x22];
    v.extend([0xff; 10]);
    v.push(0x01);
    let p = write("overlong.xplane.pb", &v);
    expect_malformed(XSpace::open(&p), &p, 1, "invalid varint");

    // Wrong wire type for a known field: XSpace.planes (field 1) as a varint.
    let p = write("wiretype.xplane.pb", &[0x08, 0x01]);
    expect_malformed(
        XSpace::open(&p),
        &p,
        0,
        "field 1 (planes) has wire type varint",
    );

    // Field number 0.
    let p = write("field0.xplane.pb", &[0x02, 0x00]);
    expect_malformed(XSpace::open(&p), &p, 0, "field number 0");

    // Invalid UTF-8 in a string (hostname).
    let p = write("utf8.xplane.pb", &[0x22, 0x02, 0xc3, 0x28]);
    expect_malformed(XSpace::open(&p), &p, 2, "not valid UTF-8");

    // A concatenation of two XSpaces is valid and merges.
    let mut cat = good.clone();
    cat.extend_from_slice(&good);
    let p = write("concat.xplane.pb", &cat);
    let s = XSpace::open(&p).unwrap();
    assert_eq!(s.planes().len(), 4);
    assert_eq!(s.hostnames(), ["h", "h"]);

    // Every file of this corpus agrees with prost on success vs failure.
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        let ours = XSpace::open_with(&p, &strict());
        let theirs = pb::XSpace::decode(bytes.as_slice());
        assert_eq!(
            ours.is_ok(),
            theirs.is_ok(),
            "{}: {ours:?} vs {theirs:?}",
            p.display()
        );
    }
}

#[test]
fn a_corrupt_plane_with_intact_framing_is_dropped_with_a_diagnostic() {
    // Plane 0: a valid plane whose `name` (field 2) is a varint instead of a string.
    let bad_plane = [0x10, 0x05];
    let good_plane = pb::XPlane {
        name: "/host:CPU".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut bytes = vec![0x0a, bad_plane.len() as u8];
    bytes.extend(bad_plane);
    bytes.push(0x0a);
    bytes.push(good_plane.len() as u8);
    bytes.extend(&good_plane);
    let lenient = XSpace::from_bytes(bytes.clone()).unwrap();
    assert!(!lenient.is_complete());
    assert_eq!(lenient.planes().len(), 1);
    assert_eq!(lenient.planes().next().unwrap().name(), "/host:CPU");
    assert_eq!(lenient.planes().next().unwrap().index(), 1);
    let d = &lenient.diagnostics()[0];
    assert!(
        d.starts_with("plane skipped: malformed at byte 2 in XSpace.planes[0]"),
        "{d}"
    );
    let strict = XSpace::from_bytes_named(bytes, "x.xplane.pb", &strict()).unwrap_err();
    assert!(strict.to_string().contains("XSpace.planes[0]"), "{strict}");
}

#[test]
fn errors_deep_in_events_name_the_path_and_offset() {
    // Hand-framed so every length is right and only the innermost field is wrong: an event
    // stat whose str_value (field 5) arrives as a varint.
    fn ld(tag: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![tag, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }
    let stat = [0x08, 0x01, 0x28, 0x78];
    let good_stat = [0x08, 0x01, 0x20, 0x05];
    let event = |st: &[u8]| [vec![0x08, 0x01], ld(0x22, st)].concat();
    let line = [
        ld(0x12, b"XLA Ops"),
        ld(0x22, &event(&good_stat)),
        ld(0x22, &event(&stat)),
    ]
    .concat();
    let plane = [ld(0x12, b"/device:TPU:0"), ld(0x1a, &line)].concat();
    let bytes = ld(0x0a, &plane);
    let bad_at = bytes.len() - 2; // the tag of the varint str_value
    let e = XSpace::from_bytes_named(bytes.clone(), "deep.xplane.pb", &strict()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("deep.xplane.pb"), "{msg}");
    assert!(
        msg.contains("XSpace.planes[0] ('/device:TPU:0').lines[0].events[1]"),
        "{msg}"
    );
    assert!(
        msg.contains("field 5 (str_value) has wire type varint"),
        "{msg}"
    );
    assert_eq!(e.offset(), Some(bad_at as u64));
    assert!(pb::XSpace::decode(bytes.as_slice()).is_err());

    // Invalid UTF-8 in an event's str_value, and a stat running past its event.
    let bad_utf8 = [0x08, 0x01, 0x2a, 0x02, 0xc3, 0x28];
    let line = [ld(0x12, b"L"), ld(0x22, &event(&bad_utf8))].concat();
    let bytes = ld(0x0a, &[ld(0x12, b"p"), ld(0x1a, &line)].concat());
    let e = XSpace::from_bytes_named(bytes.clone(), "u.xplane.pb", &strict()).unwrap_err();
    assert!(
        e.to_string()
            .contains("field 5 (str_value) is a string but not valid UTF-8"),
        "{e}"
    );
    assert_eq!(e.offset(), Some(bytes.len() as u64 - 2));
    assert!(pb::XSpace::decode(bytes.as_slice()).is_err());
    let overrun = [0x08, 0x01, 0x2a, 0x05, b'a'];
    let line = [ld(0x12, b"L"), ld(0x22, &event(&overrun))].concat();
    let bytes = ld(0x0a, &[ld(0x12, b"p"), ld(0x1a, &line)].concat());
    let e = XSpace::from_bytes_named(bytes.clone(), "o.xplane.pb", &strict()).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    assert_eq!(e.offset(), Some(bytes.len() as u64 - 2));
}

#[test]
fn every_truncation_agrees_with_prost() {
    let good = small_capture();
    for cut in 0..good.len() {
        let bytes = good[..cut].to_vec();
        let theirs = pb::XSpace::decode(bytes.as_slice());
        let ours = XSpace::from_bytes_named(bytes, "t", &strict());
        match (&ours, &theirs) {
            (Ok(o), Ok(t)) => {
                common::assert_agree(o, t).unwrap();
            }
            (Err(e), Err(_)) => assert!(e.offset().unwrap() <= cut as u64),
            _ => panic!("cut {cut}: ours {ours:?} vs prost {theirs:?}"),
        }
    }
}

#[test]
fn every_single_byte_corruption_agrees_with_prost() {
    let good = small_capture();
    let mut checked = 0;
    for pos in 0..good.len() {
        for val in [0x00u8, 0x01, 0x7f, 0x80, 0xff, good[pos] ^ 0x08] {
            if good[pos] == val {
                continue;
            }
            let mut bytes = good.clone();
            bytes[pos] = val;
            let theirs = pb::XSpace::decode(bytes.as_slice());
            let ours = XSpace::from_bytes_named(bytes, "t", &strict());
            match (&ours, &theirs) {
                (Ok(o), Ok(t)) => {
                    common::assert_agree(o, t)
                        .unwrap_or_else(|e| panic!("byte {pos} = {val:#x}: {e}"));
                }
                (Err(_), Err(_)) => {}
                _ => panic!("byte {pos} = {val:#x}: ours {ours:?} vs prost {theirs:?}"),
            }
            checked += 1;
        }
    }
    assert!(checked > 500);
}

#[test]
fn unreadable_paths_are_path_errors() {
    let dir = tempfile::tempdir().unwrap();
    for p in [
        dir.path().to_path_buf(),
        dir.path().join("missing.xplane.pb"),
    ] {
        match XSpace::open(&p) {
            Err(e @ XSpaceError::Io { .. }) => {
                assert_eq!(e.kind(), "path");
                assert!(e.to_string().contains(&p.display().to_string()), "{e}");
                assert!(e.offset().is_none());
            }
            other => panic!("{}: {other:?}", p.display()),
        }
    }
}

#[test]
fn random_corruptions_of_a_real_capture_agree_with_prost() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let path = corpus.join("fixtures/seed-v6e/logdir/plugins/profile/testrun/host0.xplane.pb");
    let good = std::fs::read(path).unwrap();
    // A fixed xorshift sequence: reproducible, no dependency.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut oks, mut errs) = (0, 0);
    for _ in 0..60 {
        let mut bytes = good.clone();
        for _ in 0..=(next() % 4) {
            let pos = (next() % bytes.len() as u64) as usize;
            bytes[pos] = next() as u8;
        }
        let theirs = pb::XSpace::decode(bytes.as_slice());
        let ours = XSpace::from_bytes_named(bytes.clone(), "r", &strict());
        match (&ours, &theirs) {
            (Ok(o), Ok(t)) => {
                common::assert_agree(o, t).unwrap();
                oks += 1;
            }
            (Err(e), Err(_)) => {
                assert!(e.offset().unwrap() < bytes.len() as u64);
                errs += 1;
            }
            _ => panic!("ours {ours:?} vs prost {theirs:?}"),
        }
        // Lenient reading never fails on damage inside a plane, and says so.
        if let Ok(l) = XSpace::from_bytes(bytes) {
            assert_eq!(l.is_complete(), ours.is_ok());
        }
    }
    assert!(oks > 0 && errs > 0, "{oks} ok, {errs} errors");
}

#[test]
fn random_noise_never_panics_and_agrees_with_prost() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..3000 {
        let len = (next() % 96) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let theirs = pb::XSpace::decode(bytes.as_slice());
        let ours = XSpace::from_bytes_named(bytes.clone(), "noise", &strict());
        assert_eq!(
            ours.is_ok(),
            theirs.is_ok(),
            "{bytes:?}: {ours:?} vs {theirs:?}"
        );
        if let (Ok(o), Ok(t)) = (&ours, &theirs) {
            common::assert_agree(o, t).unwrap();
        }
        let _ = XSpace::from_bytes(bytes.clone());
        let _ = xprof_xspace::wire::scan_floor(&bytes);
    }
}
