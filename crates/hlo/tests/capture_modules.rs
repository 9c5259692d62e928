//! Modules from captures: `.hlo_proto.pb` files and the XSpace's `/host:metadata` plane.

use std::path::Path;

use xprof_capture::{HloSource, Selector, resolve};
use xprof_hlo::capture::{list_modules, load, select};
use xprof_hlo::print::{PrintOptions, print_module};
use xprof_plugin_api::sdk::testing::{corpus, workspace_root};

fn session(dir: &Path) -> xprof_capture::Session {
    resolve(&Selector {
        path: Some(dir.display().to_string()),
        ..Default::default()
    })
    .unwrap()
}

/// A JAX capture reduced to its `.xplane.pb`: the modules still list and print, identically
/// to XProf's converter output.
#[test]
fn metadata_plane_only_capture() {
    let Some(c) = corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    let src = c.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_train");
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("plugins/profile/mlp_train");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(src.join("host0.xplane.pb"), run.join("host0.xplane.pb")).unwrap();
    let s = session(&run);
    assert!(s.hlo_protos.is_empty());
    let (mods, read) = list_modules(&s).unwrap();
    assert_eq!(read.len(), 1);
    let names: Vec<&str> = mods.iter().map(|m| m.name.as_str()).collect();
    // The same names XProf gives the extracted files.
    let mut want: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".hlo_proto.pb")
                .map(String::from)
        })
        .collect();
    want.sort();
    assert_eq!(names, want);
    assert!(
        mods.iter()
            .all(|m| matches!(m.source, HloSource::Embedded { .. }))
    );
    let m = select(&mods, Some("jit_train_step(8)")).unwrap();
    let text = print_module(&load(m).unwrap(), &PrintOptions::long());
    let oracle = std::fs::read_to_string(
        c.join("oracle/xprof-2.24.2/jax-cpu-mlp_train.train_step/graph_viewer.long_txt.txt"),
    )
    .unwrap();
    assert!(text == oracle);
    // Bare names and program ids select too.
    assert_eq!(
        select(&mods, Some("jit_train_step")).unwrap().name,
        "jit_train_step(8)"
    );
    assert_eq!(select(&mods, Some("8")).unwrap().name, "jit_train_step(8)");
    assert!(select(&mods, Some("nope")).is_err());
    // Nothing was written into the run directory.
    assert_eq!(std::fs::read_dir(&run).unwrap().count(), 1);
}

/// Files win over embedded copies of the same module; the seed run has both.
#[test]
fn files_and_embedded_dedupe() {
    let Some(c) = corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    let s = session(&c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun"));
    let (mods, _) = list_modules(&s).unwrap();
    assert_eq!(mods.len(), 1);
    assert_eq!(mods[0].name, "jit_matmul_optimized(17342868964687645945)");
    assert_eq!(mods[0].program_id, Some(17342868964687645945));
    assert!(matches!(mods[0].source, HloSource::File(_)));
}

/// The project's own captures (no corpus needed) hold only XSpaces.
#[test]
fn bundled_fixture_lists_modules() {
    let root = workspace_root(env!("CARGO_MANIFEST_DIR"));
    let s = session(&root.join("fixtures/jax-cpu/logdir/plugins/profile/matmul"));
    let (mods, _) = list_modules(&s).unwrap();
    assert!(!mods.is_empty());
    for m in &mods {
        let p = load(m).unwrap();
        let text = print_module(&p, &PrintOptions::long());
        let parsed = xprof_hlo::parse(&text, &m.name).unwrap();
        let count: usize = p.computations.iter().map(|c| c.instructions.len()).sum();
        assert_eq!(parsed.instruction_count(), count);
    }
}
