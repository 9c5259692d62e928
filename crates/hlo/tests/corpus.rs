//! The parser and dump discovery against every HLO dump in the shared corpus.

use std::path::{Path, PathBuf};

use xprof_hlo::dump;
use xprof_hlo::graph::{Direction, Graph, render_neighborhood};
use xprof_plugin_api::sdk::testing::corpus;

fn corpus_dir() -> Option<PathBuf> {
    corpus(env!("CARGO_MANIFEST_DIR"))
}

/// Every directory under `root` (recursively) that holds `module_*` files.
fn dump_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    let mut has_module = false;
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            dump_dirs(&p, out);
        } else if e.file_name().to_string_lossy().starts_with("module_") {
            has_module = true;
        }
    }
    if has_module {
        out.push(root.to_path_buf());
    }
}

/// Instruction lines counted independently of the parser: indented `[ROOT ]%?name = ...`.
fn count_instruction_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let Some(t) = l.strip_prefix("  ") else {
                return false;
            };
            let t = t.strip_prefix("ROOT ").unwrap_or(t);
            let t = t.strip_prefix('%').unwrap_or(t);
            match t.find(" = ") {
                Some(p) => {
                    p > 0
                        && t[..p]
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                }
                None => false,
            }
        })
        .count()
}

#[test]
fn every_dump_file_parses_completely() {
    let Some(c) = corpus_dir() else { return };
    let mut dirs = Vec::new();
    dump_dirs(&c.join("fixtures"), &mut dirs);
    assert!(dirs.len() >= 3, "dump dirs found: {dirs:?}");
    let mut files = 0;
    for d in &dirs {
        let scanned = dump::scan(d).unwrap();
        for m in scanned.modules.values() {
            for f in m.hlo_text_files() {
                let text = dump::read_text(f).unwrap();
                let module = xprof_hlo::parse(&text, &f.display().to_string())
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(
                    module.instruction_count(),
                    count_instruction_lines(&text),
                    "{}",
                    f.display()
                );
                assert!(module.instruction_count() > 0, "{}", f.display());
                files += 1;
            }
        }
    }
    assert!(files >= 80, "only {files} HLO files parsed");
}

#[test]
fn oracle_module_texts_parse() {
    let Some(c) = corpus_dir() else { return };
    let root = c.join("oracle/xprof-2.24.2");
    let mut n = 0;
    for d in std::fs::read_dir(&root).unwrap().flatten() {
        for f in ["graph_viewer.long_txt.txt", "graph_viewer.short_txt.txt"] {
            let p = d.path().join(f);
            if let Ok(text) = std::fs::read_to_string(&p) {
                let m = xprof_hlo::parse(&text, &p.display().to_string()).unwrap();
                assert_eq!(m.instruction_count(), count_instruction_lines(&text));
                n += 1;
            }
        }
    }
    assert!(n >= 8);
}

/// TOOLS-kernel §5 row 38: the seed's own fixture (`.cl_<id>`, `.txt`) is one module.
#[test]
fn row38_seed_fixture_is_listed() {
    let Some(c) = corpus_dir() else { return };
    let d = dump::scan(&c.join("fixtures/seed-v6e/hlo_dump")).unwrap();
    assert_eq!(d.modules.len(), 1);
    let m = &d.modules["module_0035.jit_matmul_optimized"];
    assert_eq!(m.compile_id.as_deref(), Some("cl_897798484"));
    assert_eq!(m.stage_keys(), vec!["after_optimizations"]);
}

/// Row 39: the ROOT custom-call is found, with x.1 and y.1 at distance 1.
#[test]
fn row39_neighborhood_finds_root() {
    let Some(c) = corpus_dir() else { return };
    let d = dump::scan(&c.join("fixtures/seed-v6e/hlo_dump")).unwrap();
    let m = d.select("matmul").unwrap().module;
    let (_, path) = m.resolve_stage("after_optimizations").unwrap();
    let module = xprof_hlo::parse(&dump::read_text(&path).unwrap(), "f").unwrap();
    let g = Graph::new(&module);
    let n = g.neighborhood(g.find("matmul_optimized.1").unwrap(), 2, Direction::Both, 0);
    let got: Vec<_> = n.iter().map(|x| (x.name.as_str(), x.distance)).collect();
    assert_eq!(got, vec![("matmul_optimized.1", 0), ("x.1", 1), ("y.1", 1)]);
    assert!(n[0].line.starts_with("ROOT %matmul_optimized.1 = "));
    let text = render_neighborhood(&n);
    assert!(
        text.starts_with("   [TARGET] [main.1] ROOT %matmul_optimized.1"),
        "{text}"
    );
    let n = g.neighborhood(g.find("%x.1").unwrap(), 2, Direction::Both, 0);
    assert_eq!(n[1].name, "matmul_optimized.1");
    assert_eq!(n[1].direction, "user");
}

#[test]
fn jax_pass_dumps_and_backend_stage() {
    let Some(c) = corpus_dir() else { return };
    let d = dump::scan(&c.join("fixtures/jax-cpu/hlo_dump/text")).unwrap();
    let m = d.select("reshape").unwrap().module;
    assert_eq!(m.prefix, "module_0000.jit_reshape_transpose");
    assert_eq!(m.passes.len(), 48);
    // The explicit files win over the pass aliases.
    let (k, p) = m.resolve_stage("after_optimizations").unwrap();
    assert_eq!(k, "cpu_after_optimizations");
    assert!(p.ends_with("module_0000.jit_reshape_transpose.cpu_after_optimizations.txt"));
    assert_eq!(m.resolve_stage("pass_7").unwrap().0, "pass_0007");
    assert!(
        m.also_available
            .contains_key("cpu_after_optimizations-buffer-assignment.txt")
    );
    assert!(!m.stage_keys().iter().any(|k| k.contains("buffer")));
    let e = m.resolve_stage("pass_9999").unwrap_err().to_string();
    assert!(e.contains("pass_0047"), "{e}");
    let e = d.select("jit").unwrap_err().to_string();
    assert!(e.contains("matched 2 distinct modules"), "{e}");
    assert!(d.select("nomatch").is_err());
}

/// `--xla_dump_hlo_as_proto` dumps are stages too: printed, they equal XLA's text dump of the
/// same module instruction by instruction (names, opcodes, operands, shapes, whole lines).
#[test]
fn proto_dump_stages_print_like_text_dumps() {
    let Some(c) = corpus_dir() else { return };
    let protos = dump::scan(&c.join("fixtures/jax-cpu/hlo_dump/proto")).unwrap();
    let texts = dump::scan(&c.join("fixtures/jax-cpu/hlo_dump/text")).unwrap();
    assert_eq!(protos.modules.len(), 2);
    let mut compared = 0;
    for (prefix, pm) in &protos.modules {
        let tm = &texts.modules[prefix];
        for stage in ["before_optimizations", "after_optimizations"] {
            let (pk, pp) = pm.resolve_stage(stage).unwrap();
            let (tk, tp) = tm.resolve_stage(stage).unwrap();
            if stage == "after_optimizations" {
                assert_eq!(pk, "cpu_after_optimizations");
                assert_eq!(pk, tk);
            }
            let printed = xprof_hlo::parse(&dump::read_stage_text(&pp).unwrap(), "p").unwrap();
            let dumped = xprof_hlo::parse(&dump::read_text(&tp).unwrap(), "t").unwrap();
            assert_eq!(
                printed.instruction_count(),
                dumped.instruction_count(),
                "{prefix} {stage}"
            );
            for comp in &printed.computations {
                let other = dumped.computation(&comp.name).unwrap();
                for i in &comp.instructions {
                    let j = other
                        .instructions
                        .iter()
                        .find(|j| j.name == i.name)
                        .unwrap();
                    assert_eq!(i.text, j.text, "{prefix} {stage}");
                }
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 4);
}
