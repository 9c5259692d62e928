//! `hlo`: HLO modules from captures (`*.hlo_proto.pb`, the XSpace's `/host:metadata` plane)
//! and from XLA dump folders. A thin shell: each tool is one file under `tools/`, the
//! analysis lives in `xprof-hlo`.

mod common;
mod tools;

xprof_plugin_api::export_plugin!(name: "hlo", capabilities: ["hlo"]);

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
    }
}
