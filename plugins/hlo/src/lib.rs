//! `hlo`: HLO modules from captures (`*.hlo_proto.pb`, the XSpace's `/host:metadata` plane)
//! and from XLA dump folders. A thin shell: each tool is one file under `tools/`, the
//! analysis lives in `xprof-hlo`.

mod common;
mod tools;

xprof_plugin_api::export_plugin!(name: "hlo", capabilities: ["hlo"]);

// The capture plugins' allocator (`capture_plugin_allocator!`): prost's structs hold a decoded
// module at ~40 times its encoded size, in many small blocks.
xprof_plugin_support::capture_plugin_allocator!();

#[cfg(test)]
mod tests {
    #[test]
    fn documented_examples_run() {
        let ran = xprof_plugin_api::sdk::testing::run_examples(
            env!("CARGO_CRATE_NAME"),
            env!("CARGO_MANIFEST_DIR"),
        );
        assert!(ran > 0);
    }

    use serde_json::{Value, json};
    use xprof_plugin_api::{ErrorKind, ToolError};

    fn call(tool: &str, args: Value) -> Result<Value, ToolError> {
        xprof_plugin_api::sdk::invoke_json(env!("CARGO_CRATE_NAME"), tool, &args.to_string(), "{}")
            .map(|env| env["result"].clone())
    }

    fn fixtures() -> String {
        xprof_plugin_api::sdk::testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/jax-cpu/hlo_dump")
            .display()
            .to_string()
    }

    #[test]
    fn missing_dump_dir_is_a_path_error_naming_the_flag() {
        let e = call(
            "list_hlo_dump_modules",
            json!({"dump_dir": "/nonexistent/hlo"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Path);
        assert!(e.message.contains("/nonexistent/hlo"), "{}", e.message);
        assert!(e.hint.unwrap().contains("--xla_dump_to"));
    }

    #[test]
    fn unknown_stage_and_instruction_are_invalid_values() {
        let e = call(
            "get_hlo_dump",
            json!({"dump_dir": fixtures(), "module_pattern": "train", "stage": "pass_0999"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        assert!(e.message.contains("pass_0008"), "{}", e.message);
        let e = call(
            "get_hlo_dump_neighborhood",
            json!({"dump_dir": fixtures(), "module_pattern": "train", "instruction_name": "dot.999"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        assert!(e.message.contains("Similar: %dot"), "{}", e.message);
        let e = call(
            "get_hlo_dump",
            json!({"dump_dir": fixtures(), "module_pattern": "nomatch"}),
        )
        .unwrap_err();
        assert!(
            e.message.contains("module_0002.jit_train_step"),
            "{}",
            e.message
        );
    }

    #[test]
    fn dump_listing_and_diff() {
        let r = call("list_hlo_dump_modules", json!({"dump_dir": fixtures()})).unwrap();
        let m = &r["modules"]["module_0002.jit_train_step"];
        assert_eq!(
            m["stages"],
            json!(["before_optimizations", "after_optimizations"])
        );
        assert_eq!(
            m["stage_aliases"]["after_optimizations"],
            "cpu_after_optimizations"
        );
        assert_eq!(m["pass_count"], 3);
        let r = call(
            "diff_hlo_stages",
            json!({"dump_dir": fixtures(), "module_pattern": "train", "max_lines": 10}),
        )
        .unwrap();
        assert_eq!(r["truncated"], true);
        let text = r["text"].as_str().unwrap();
        assert!(
            text.starts_with("# Diff: module_0002.jit_train_step\n"),
            "{text}"
        );
        assert!(text.contains("\n@@ -1,"), "{text}");
        let r = call("diff_hlo_stages", json!({"dump_dir": fixtures(), "module_pattern": "train", "stage_before": "pass_0008", "stage_after": "pass_0008"})).unwrap();
        assert_eq!(r["identical"], true);
        // Normalised: fewer changed lines, and the fusion pass shows up in the opcode counts.
        let raw = call(
            "diff_hlo_stages",
            json!({"dump_dir": fixtures(), "module_pattern": "train", "max_lines": -1}),
        )
        .unwrap();
        let norm = call("diff_hlo_stages", json!({"dump_dir": fixtures(), "module_pattern": "train", "max_lines": -1, "normalize": true})).unwrap();
        assert!(norm["added"].as_u64() < raw["added"].as_u64());
        let changes = norm["opcode_changes"].as_array().unwrap();
        let fusion = changes.iter().find(|c| c["opcode"] == "fusion").unwrap();
        assert_eq!(fusion["before"], 0);
        assert!(fusion["after"].as_u64().unwrap() > 0);
    }

    fn corpus() -> Option<std::path::PathBuf> {
        xprof_plugin_api::sdk::testing::corpus(env!("CARGO_MANIFEST_DIR"))
    }

    /// Text outputs equal XProf's official CLI (`official-cli-2.24.2/jax-cpu-matmul`) and the
    /// seed (`seed-cli`) on the same inputs.
    #[test]
    fn capture_texts_match_the_oracles() {
        let Some(c) = corpus() else { return };
        let official = c.join("oracle/official-cli-2.24.2/jax-cpu-matmul");
        let run = c
            .join("fixtures/jax-cpu/logdir/plugins/profile/matmul")
            .display()
            .to_string();
        let r = call(
            "get_hlo_neighborhood",
            json!({"path": run, "instruction_name": "ynn_fusion", "module_name": "jit_matmul(0)"}),
        )
        .unwrap();
        assert_eq!(
            r["text"],
            std::fs::read_to_string(official.join("get_hlo_neighborhood.txt")).unwrap()
        );
        let r = call(
            "get_hlo_neighborhood",
            json!({"path": run, "instruction_name": "ynn_fusion", "fmt": "markdown"}),
        )
        .unwrap();
        assert_eq!(
            r["text"],
            std::fs::read_to_string(official.join("get_hlo_neighborhood.markdown_blockers.txt"))
                .unwrap()
        );
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(official.join("get_hlo_text.json")).unwrap(),
        )
        .unwrap();
        let r = call("get_hlo_text", json!({"path": run})).unwrap();
        for k in [
            "module_name",
            "truncated",
            "line_count",
            "byte_count",
            "content",
        ] {
            assert_eq!(r[k], want[k], "{k}");
        }
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(official.join("get_hlo_module_content.json")).unwrap(),
        )
        .unwrap();
        let r = call(
            "get_hlo_module_content",
            json!({"path": run, "form": "short"}),
        )
        .unwrap();
        assert_eq!(r["text"], want["content"]);
        assert_eq!(r["line_count"], want["line_count"]);
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(official.join("list_hlo_modules.json")).unwrap(),
        )
        .unwrap();
        let r = call("list_hlo_modules", json!({"path": run})).unwrap();
        assert_eq!(r["modules"], want["modules"]);
        // The seed prints the long form (graph viewer long_txt).
        let seed = c.join("fixtures/seed-v6e/logdir").display().to_string();
        let r = call(
            "get_hlo_module_content",
            json!({"path": seed, "module_name": "jit_matmul_optimized(17342868964687645945)"}),
        )
        .unwrap();
        let want =
            std::fs::read_to_string(c.join("oracle/seed-cli/get_hlo_module_content.module.txt"))
                .unwrap();
        assert_eq!(r["text"].as_str().unwrap().trim_end(), want.trim_end());
    }

    #[test]
    fn capture_errors_and_no_data() {
        let root = xprof_plugin_api::sdk::testing::workspace_root(env!("CARGO_MANIFEST_DIR"));
        let run = root
            .join("fixtures/jax-cpu/logdir/plugins/profile/matmul")
            .display()
            .to_string();
        let e = call(
            "get_hlo_module_content",
            json!({"path": run, "module_name": "nope"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        assert!(e.message.contains("jit_matmul"), "{}", e.message);
        let e = call(
            "get_hlo_neighborhood",
            json!({"path": run, "instruction_name": "nope.3"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        let e = call("list_hlo_modules", json!({"path": "/nonexistent/run"})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Path);
        // A run whose XSpace carries no /host:metadata modules is "no data", not an error.
        let tmp = std::env::temp_dir().join(format!("xprof-hlo-nodata-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(tmp.join("host0.xplane.pb"), []).unwrap();
        let r = call(
            "list_hlo_modules",
            json!({"path": tmp.display().to_string()}),
        )
        .unwrap();
        std::fs::remove_dir_all(&tmp).unwrap();
        assert_eq!(r["status"], "no_data");
    }

    /// get_graph_viewer's text and adjacency outputs equal XProf 2.24.2's converter outputs
    /// for the parameters recorded in each oracle folder's `_results.json`.
    #[test]
    fn graph_viewer_matches_xprof() {
        let Some(c) = corpus() else { return };
        let cases = [
            (
                "seed-v6e",
                "fixtures/seed-v6e/logdir/plugins/profile/testrun",
            ),
            (
                "jax-cpu-matmul",
                "fixtures/jax-cpu/logdir/plugins/profile/matmul",
            ),
            (
                "jax-cpu-mlp_train",
                "fixtures/jax-cpu/logdir/plugins/profile/mlp_train",
            ),
            (
                "jax-cpu-mlp_train.train_step",
                "fixtures/jax-cpu/logdir/plugins/profile/mlp_train",
            ),
        ];
        for (folder, run) in cases {
            let dir = c.join("oracle/xprof-2.24.2").join(folder);
            let results: Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("_results.json")).unwrap())
                    .unwrap();
            let run = c.join(run).display().to_string();
            let mut checked = 0;
            for r in results["results"].as_array().unwrap() {
                let o = &r["params"]["graph_viewer_options"];
                if r["tool"] != "graph_viewer" || r["ok"] != true {
                    continue;
                }
                let module = o["module_name"].clone();
                let want =
                    || std::fs::read_to_string(dir.join(r["file"].as_str().unwrap())).unwrap();
                match o["type"].as_str().unwrap() {
                    t @ ("short_txt" | "long_txt") => {
                        let got = call(
                            "get_graph_viewer",
                            json!({"path": run, "module_name": module, "output_type": t}),
                        )
                        .unwrap();
                        assert!(got["text"].as_str().unwrap() == want(), "{folder} {t}");
                        checked += 1;
                    }
                    "adj_nodes" => {
                        let got = call("get_graph_viewer", json!({"path": run, "module_name": module, "output_type": "adj_nodes", "node_name": o["node_name"]})).unwrap();
                        let want: Value = serde_json::from_str(&want()).unwrap();
                        assert_eq!(got["operand_names"], want["operand_names"], "{folder}");
                        assert_eq!(got["consumer_names"], want["consumer_names"], "{folder}");
                        checked += 1;
                    }
                    _ => {}
                }
            }
            assert_eq!(checked, 3, "{folder}");
        }
        // XProf's own CLI on the same module (consumer order included).
        let official: Value = serde_json::from_str(
            &std::fs::read_to_string(c.join(
                "oracle/official-cli-2.24.2/jax-cpu-mlp_train/get_graph_viewer.adj_nodes.json",
            ))
            .unwrap(),
        )
        .unwrap();
        let run = c
            .join("fixtures/jax-cpu/logdir/plugins/profile/mlp_train")
            .display()
            .to_string();
        let got = call("get_graph_viewer", json!({"path": run, "module_name": "jit_train_step(8)", "output_type": "adj_nodes", "node_name": "ynn_fusion.6"})).unwrap();
        assert_eq!(got["consumer_names"], official["consumer_names"]);
        assert_eq!(got["operand_names"], official["operand_names"]);
        let got = call("get_graph_viewer", json!({"path": run, "module_name": "jit_train_step(8)", "output_type": "dot", "node_name": "ynn_fusion.6", "graph_width": 1})).unwrap();
        assert_eq!(got["node_count"], 5);
        assert!(got["text"].as_str().unwrap().starts_with("digraph "));
    }

    #[test]
    fn query_hlo_graph_modes() {
        let root = xprof_plugin_api::sdk::testing::workspace_root(env!("CARGO_MANIFEST_DIR"));
        let run = root
            .join("fixtures/jax-cpu/logdir/plugins/profile/matmul")
            .display()
            .to_string();
        let e = call(
            "query_hlo_graph",
            json!({"path": run, "mode": "sql", "sql": "DELETE FROM instructions"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        let e = call(
            "query_hlo_graph",
            json!({"path": run, "mode": "shortest_path", "src_op": "p.1"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage);
        let r = call(
            "query_hlo_graph",
            json!({"path": run, "mode": "shortest_path", "src_op": "p.1", "dst_op": "ynn_fusion"}),
        )
        .unwrap();
        assert_eq!(r["distance"], 1);
        let r = call(
            "query_hlo_graph",
            json!({"path": run, "mode": "fusion_contents", "op": "ynn_fusion"}),
        )
        .unwrap();
        assert_eq!(r["count"], 3);
        let r = call(
            "query_hlo_graph",
            json!({"path": run, "mode": "neighbors", "op": "ynn_fusion"}),
        )
        .unwrap();
        assert_eq!(r["operands"].as_array().unwrap().len(), 2);
        let r = call(
            "get_hlo_neighborhood",
            json!({"path": run, "instruction_name": "ynn_fusion", "opcode_filter": ["fusion"]}),
        )
        .unwrap();
        assert_eq!(r["nodes"].as_array().unwrap().len(), 1);
        let r = call("get_hlo_neighborhood", json!({"path": run, "instruction_name": "ynn_fusion", "radius": 1, "follow_calls": true})).unwrap();
        let nodes = r["nodes"].as_array().unwrap();
        assert!(
            nodes
                .iter()
                .any(|n| n["name"] == "dot_general.0" && n["direction"] == "callee"),
            "{nodes:?}"
        );
        let r = call(
            "get_hlo_neighborhood",
            json!({"path": run, "instruction_name": "p.1", "opcode_filter": "fusion,parameter"}),
        )
        .unwrap();
        assert_eq!(r["nodes"].as_array().unwrap().len(), 3);
        let r = call(
            "query_hlo_graph",
            json!({"path": run, "mode": "search", "opcode": "parameter", "limit": 1}),
        )
        .unwrap();
        assert_eq!(
            (r["count"].as_i64(), r["truncated"].as_bool()),
            (Some(1), Some(true))
        );
    }

    /// Damaged inputs are invalid values naming the file, never panics.
    #[test]
    fn damaged_captures_name_the_file() {
        let root = xprof_plugin_api::sdk::testing::workspace_root(env!("CARGO_MANIFEST_DIR"));
        let src = root.join("fixtures/jax-cpu/logdir/plugins/profile/matmul/host0.xplane.pb");
        let tmp = std::env::temp_dir().join(format!("xprof-hlo-damaged-{}", std::process::id()));
        let run = tmp.join("plugins/profile/r1");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::copy(&src, run.join("host0.xplane.pb")).unwrap();
        std::fs::write(
            run.join("bad(1).hlo_proto.pb"),
            b"\xff\xff\xff\xff not a proto",
        )
        .unwrap();
        let path = run.display().to_string();
        let e = call(
            "get_hlo_module_content",
            json!({"path": path, "module_name": "bad(1)"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        assert!(e.message.contains("bad(1).hlo_proto.pb"), "{}", e.message);
        assert!(e.hint.is_some());
        // The listing itself still works (files are not decoded to be listed).
        let r = call("list_hlo_modules", json!({"path": path})).unwrap();
        assert!(
            r["modules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m == "bad(1)")
        );
        // --output_path inside the run directory is refused.
        let e = call("get_hlo_text", json!({"path": path, "module_name": "jit_matmul(0)", "output_path": run.join("x.hlo").display().to_string()})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidValue);
        // A truncated XSpace.
        let bytes = std::fs::read(&src).unwrap();
        std::fs::write(run.join("host0.xplane.pb"), &bytes[..bytes.len() / 2]).unwrap();
        std::fs::remove_file(run.join("bad(1).hlo_proto.pb")).unwrap();
        let e = call("list_hlo_modules", json!({"path": path})).unwrap_err();
        std::fs::remove_dir_all(&tmp).unwrap();
        assert_eq!(e.kind, ErrorKind::InvalidValue, "{}", e.message);
        assert!(e.message.contains("host0.xplane.pb"), "{}", e.message);
    }

    /// The project's own captures against their committed XProf 2.24.2 outputs
    /// (`fixtures/oracle/<run>/{cli,converters}`): runs without the shared corpus, so in CI.
    #[test]
    fn bundled_fixtures_match_committed_oracle() {
        let root = xprof_plugin_api::sdk::testing::workspace_root(env!("CARGO_MANIFEST_DIR"));
        let read = |p: std::path::PathBuf| -> Value {
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
        };
        for (run, module, node) in [
            ("matmul", "jit_matmul(0)", "ynn_fusion"),
            ("mlp_steps", "jit_train_step(2)", "tuple.3"),
        ] {
            let path = root
                .join("fixtures/jax-cpu/logdir/plugins/profile")
                .join(run)
                .display()
                .to_string();
            let oracle = root.join("fixtures/oracle").join(run);
            let got = call("list_hlo_modules", json!({"path": path})).unwrap();
            assert_eq!(
                got["modules"],
                read(oracle.join("cli/list_hlo_modules.json"))["modules"],
                "{run}"
            );
            let want = read(oracle.join("cli/query_hlo_graph.json"));
            let got = call(
                "query_hlo_graph",
                json!({"path": path, "module_name": module}),
            )
            .unwrap();
            for k in [
                "entry_computation",
                "computation_count",
                "instruction_count",
                "edge_count",
                "fusion_count",
                "custom_call_count",
                "fusion_blocker_count",
                "top_opcodes",
            ] {
                assert_eq!(got[k], want[k], "{run} summary.{k}");
            }
            let want = read(oracle.join("cli/query_hlo_graph.opcode_stats.json"));
            let got = call(
                "query_hlo_graph",
                json!({"path": path, "module_name": module, "mode": "opcode_stats"}),
            )
            .unwrap();
            assert_eq!(got["rows"], want["rows"], "{run}");
            let want = read(oracle.join("converters/graph_viewer.adj_nodes.json"));
            let got = call("get_graph_viewer", json!({"path": path, "module_name": module, "output_type": "adj_nodes", "node_name": node})).unwrap();
            assert_eq!(got["operand_names"], want["operand_names"], "{run}");
            assert_eq!(got["consumer_names"], want["consumer_names"], "{run}");
        }
    }
}

#[cfg(test)]
mod mutants;
