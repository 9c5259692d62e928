use super::*;
use std::fs;

fn touch(p: &Path) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, b"").unwrap();
}

#[test]
fn runs_are_found_nested_and_sorted() {
    let t = tempfile::tempdir().unwrap();
    touch(&t.path().join("plugins/profile/b_run/h.xplane.pb"));
    touch(&t.path().join("plugins/profile/a_run/h.xplane.pb"));
    touch(&t.path().join("sub/plugins/profile/r2/h.xplane.pb"));
    let (runs, _) = list_runs(t.path()).unwrap();
    assert_eq!(runs, vec!["a_run", "b_run", "sub/r2"]);
}

#[test]
fn logdir_opens_latest_run_and_hosts_are_sorted() {
    let t = tempfile::tempdir().unwrap();
    touch(&t.path().join("plugins/profile/2024_01_01/host1.xplane.pb"));
    touch(&t.path().join("plugins/profile/2024_01_02/host1.xplane.pb"));
    touch(&t.path().join("plugins/profile/2024_01_02/host0.xplane.pb"));
    touch(
        &t.path()
            .join("plugins/profile/2024_01_02/m(1).hlo_proto.pb"),
    );
    touch(
        &t.path()
            .join("plugins/profile/2024_01_02/NO_MODULE.hlo_proto.pb"),
    );
    let s = resolve(&Selector {
        path: Some(t.path().display().to_string()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(s.run, "2024_01_02");
    assert_eq!(s.host_names(), vec!["host0", "host1"]);
    assert_eq!(s.hlo_protos.len(), 1);
}

#[test]
fn run_name_with_logdir_and_underscore_folding() {
    let t = tempfile::tempdir().unwrap();
    touch(&t.path().join("plugins/profile/2024_01_01/h.xplane.pb"));
    let s = resolve(&Selector {
        logdir: Some(t.path().display().to_string()),
        run: Some("20240101".into()),
        ..Default::default()
    })
    .unwrap();
    assert!(s.dir.ends_with("2024_01_01"));
}

#[test]
fn missing_paths_and_empty_run_dirs_are_path_errors() {
    let t = tempfile::tempdir().unwrap();
    let e = resolve(&Selector {
        path: Some(t.path().join("nope").display().to_string()),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(e.kind(), "path");
    fs::create_dir_all(t.path().join("plugins/profile/empty")).unwrap();
    let e = resolve(&Selector {
        path: Some(t.path().join("plugins/profile/empty").display().to_string()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(e, CaptureError::NoXSpace { .. }), "{e}");
}

#[test]
fn unknown_host_lists_available() {
    let t = tempfile::tempdir().unwrap();
    touch(&t.path().join("plugins/profile/r/host0.xplane.pb"));
    let s = resolve(&Selector {
        path: Some(t.path().display().to_string()),
        ..Default::default()
    })
    .unwrap();
    let e = s.select_hosts(Some("zz")).unwrap_err();
    assert!(e.hint().unwrap().contains("host0"));
}

/// XProf's agent CLI numbers hosts: an index picks a host in file order, a name wins over an
/// index, and an index past the end is an unknown host.
#[test]
fn a_host_index_picks_the_host_in_file_order() {
    let t = tempfile::tempdir().unwrap();
    for h in ["b", "a", "1"] {
        touch(&t.path().join(format!("plugins/profile/r/{h}.xplane.pb")));
    }
    let s = resolve(&Selector {
        path: Some(t.path().display().to_string()),
        ..Default::default()
    })
    .unwrap();
    let name = |h: &str| s.select_hosts(Some(h)).unwrap()[0].name.clone();
    assert_eq!(name("0"), "1"); // files sort as 1, a, b: index 0 is "1"
    assert_eq!(name("1"), "1"); // a host named "1" wins over index 1
    assert_eq!(name("2"), "b");
    assert!(s.select_hosts(Some("3")).is_err());
}

#[test]
fn latest_run_resolution_records_every_listed_directory() {
    let t = tempfile::tempdir().unwrap();
    touch(&t.path().join("plugins/profile/r1/h.xplane.pb"));
    let s = resolve(&Selector {
        path: Some(t.path().display().to_string()),
        ..Default::default()
    })
    .unwrap();
    assert!(
        s.scanned_dirs.contains(&t.path().join("plugins/profile")),
        "{:?}",
        s.scanned_dirs
    );
}

/// Regression: a capture named by its file listed its directory for the HLO protos without
/// recording it, so a cached result survived a module's `.hlo_proto.pb` appearing beside it.
#[test]
fn a_file_path_records_the_directory_listed_for_its_hlo_protos() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("plugins/profile/r1/h.xplane.pb");
    touch(&file);
    let s = resolve(&Selector {
        path: Some(file.display().to_string()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(s.scanned_dirs, [t.path().join("plugins/profile/r1")]);
}

/// The kinds a listing reports are those of the symlinks' targets, as `is_dir`/`is_file` said
/// before the listing kept them: a run directory and capture files shared by symlinks resolve,
/// and a dangling link or a directory named like a capture is not a host.
#[cfg(unix)]
#[test]
fn symlinked_runs_and_captures_resolve_and_look_alikes_do_not() {
    use std::os::unix::fs::symlink;
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    touch(&store.join("real/host0.xplane.pb"));
    touch(&store.join("m(3).hlo_proto.pb"));
    let logdir = t.path().join("logdir");
    let profile = logdir.join("plugins/profile");
    fs::create_dir_all(profile.join("2024_01_01")).unwrap();
    symlink(store.join("real"), profile.join("2024_01_02")).unwrap();
    let run = profile.join("2024_01_01");
    symlink(
        store.join("real/host0.xplane.pb"),
        run.join("host0.xplane.pb"),
    )
    .unwrap();
    symlink(
        store.join("m(3).hlo_proto.pb"),
        run.join("m(3).hlo_proto.pb"),
    )
    .unwrap();
    symlink(store.join("gone.xplane.pb"), run.join("host1.xplane.pb")).unwrap();
    fs::create_dir_all(run.join("host2.xplane.pb")).unwrap();

    let latest = resolve(&Selector {
        path: Some(logdir.display().to_string()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(latest.run, "2024_01_02");
    assert_eq!(latest.host_names(), vec!["host0"]);

    let first = resolve(&Selector {
        logdir: Some(logdir.display().to_string()),
        run: Some("2024_01_01".into()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(first.host_names(), vec!["host0"]);
    assert_eq!(first.hlo_protos, vec![run.join("m(3).hlo_proto.pb")]);
}
