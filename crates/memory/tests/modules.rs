//! Module listing (files + /host:metadata), and bad inputs: every failure is a typed error
//! naming the file, with the class the CLI maps to an exit code.

use prost::Message;
use xprof_memory::{MemoryError, modules, open_xspace, profile};
use xprof_proto::xla::{HloModuleProto, HloProto};
use xprof_testkit::XSpaceBuilder;

fn module(name: &str) -> HloProto {
    HloProto {
        hlo_module: Some(HloModuleProto {
            name: name.into(),
            ..Default::default()
        }),
        buffer_assignment: None,
    }
}

#[test]
fn files_first_then_embedded_deduplicated_by_program_id() {
    let dir = tempfile::tempdir().unwrap();
    let x = XSpaceBuilder::new()
        .plane("/host:metadata", |p| {
            p.hlo_module(1, 5, &module("jit_a"))
                .hlo_module(2, 9, &module("jit_b"))
        })
        .write_run(dir.path(), "run", "host0")
        .unwrap();
    let run = x.parent().unwrap();
    // jit_a(5) also exists as a file: the file wins.
    let file = run.join("jit_a(5).hlo_proto.pb");
    std::fs::write(&file, module("jit_a").encode_to_vec()).unwrap();

    let mods = modules::list(std::slice::from_ref(&file), std::slice::from_ref(&x)).unwrap();
    let names: Vec<&str> = mods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["jit_a(5)", "jit_b(9)"]);
    assert_eq!(mods[0].source, xprof_capture::HloSource::File(file.clone()));
    assert_eq!(mods[1].program_id, Some(9));
    let loaded = modules::load_all(&mods).unwrap();
    assert_eq!(loaded[1].1.hlo_module.as_ref().unwrap().name, "jit_b");
    assert_eq!(modules::load(&mods[1]).unwrap(), loaded[1].1);
    // By bare name or program id when unique.
    assert_eq!(modules::select(&mods, "jit_b").unwrap().name, "jit_b(9)");
    assert_eq!(modules::select(&mods, "5").unwrap().name, "jit_a(5)");
    assert!(modules::select(&mods, "jit_c").is_none());
}

#[test]
fn a_capture_without_modules_lists_none() {
    let dir = tempfile::tempdir().unwrap();
    let x = XSpaceBuilder::new()
        .plane("/host:CPU", |p| p.line("main", |l| l.event("work", 0, 1)))
        .write_run(dir.path(), "run", "host0")
        .unwrap();
    assert!(modules::list(&[], &[x]).unwrap().is_empty());
}

#[test]
fn a_corrupt_module_file_is_an_invalid_value_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jit_a(5).hlo_proto.pb");
    std::fs::write(&file, b"\x0a\xff\xff\xff\xff\x0f").unwrap();
    let mods = modules::list(std::slice::from_ref(&file), &[]).unwrap();
    let e = modules::load(&mods[0]).unwrap_err();
    assert_eq!(e.kind(), "invalid_value");
    assert!(e.to_string().contains("jit_a(5).hlo_proto.pb"), "{e}");
    assert!(!e.hint().is_empty());
}

#[test]
fn unreadable_empty_and_truncated_captures_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.xplane.pb");
    let e = open_xspace(&missing, profile::wanted_plane).unwrap_err();
    assert!(matches!(e, MemoryError::Io { .. }));
    assert_eq!(e.kind(), "path");

    let empty = dir.path().join("empty.xplane.pb");
    std::fs::write(&empty, b"").unwrap();
    let e = open_xspace(&empty, profile::wanted_plane).unwrap_err();
    assert_eq!(e.kind(), "invalid_value");
    assert!(e.to_string().contains("empty.xplane.pb"), "{e}");

    let full = XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.line("main", |l| l.event("MemoryAllocation", 0, 0))
        })
        .to_bytes();
    let cut = dir.path().join("cut.xplane.pb");
    std::fs::write(&cut, &full[..full.len() - 3]).unwrap();
    let e = open_xspace(&cut, profile::wanted_plane).unwrap_err();
    assert_eq!(e.kind(), "invalid_value");
    assert!(e.to_string().contains("cut.xplane.pb"), "{e}");
}
