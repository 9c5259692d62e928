use serde_json::json;
use xprof_llo::mosaic::{self, NO_DIR_TEXT};
use xprof_llo::{LloError, dir_from_arg_or_env, expand_tilde};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{run_lib, tool_to_llo, usize_arg};

pub struct GetCustomCallMlir;
register_tool!(GetCustomCallMlir);

impl Tool for GetCustomCallMlir {
    fn name(&self) -> &'static str {
        "get_custom_call_mlir"
    }
    fn summary(&self) -> &'static str {
        "The lowered Mosaic MLIR of a Pallas custom call (Mosaic dump text, or the HLO's bytecode decoded)"
    }
    fn doc(&self) -> &'static str {
        "What the compiler actually lowered for a Pallas kernel. With mosaic_dump_dir (from \
         LIBTPU_INIT_ARGS=\"--xla_mosaic_dump_to=<dir>\"): the textual MLIR of one pass (default: \
         the last), capped at max_chars, with op counts by dialect. Otherwise from an XLA HLO \
         dump (hlo_dump_dir, default $XLA_HLO_DUMP_DIR; XLA_FLAGS=\"--xla_dump_to=<dir> \
         --xla_dump_hlo_as_text\"): the custom call's backend_config body, MLIR bytecode decoded \
         natively — version, producer, dialect and op-name tables, true op counts from the IR \
         section, ops per jax.named_scope from the op locations, kernel function names, \
         source files and TPU attributes; parts that cannot be decoded are null with the \
         reason. `kernel` matches the Mosaic file token, the MLIR function name, or the HLO \
         op name."
    }
    fn params(&self) -> Params {
        Params::new()
            .string("kernel", "Kernel filter: Mosaic file token / MLIR function / HLO custom-call name (substring). Empty = first found.")
            .path("mosaic_dump_dir", "The --xla_mosaic_dump_to directory (textual MLIR per pass).", None)
            .path("hlo_dump_dir", "The --xla_dump_to directory (bytecode fallback). Default: $XLA_HLO_DUMP_DIR.", Some("XLA_HLO_DUMP_DIR"))
            .string("pass_label", "Mosaic pass (regex); default: the last pass.")
            .integer_min("max_chars", "Cap on returned MLIR text.", Some(20000), 0)
    }
    fn output(&self) -> &'static str {
        "mosaic: {source: \"mosaic_dump\", kernel, function, pass, pass_seq, available_passes, op_summary, op_counts_by_dialect, mlir_chars, mlir_text, truncated}; hlo: {source: \"hlo_backend_config\", hlo_file, kernel, body_format, body_bytes, bytecode_summary: {mlir_version, bytecode_version, producer, dialects, op_counts, ops_present, named_scopes, scope_op_counts, functions, source_files, attributes_of_interest}, note}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Textual Mosaic MLIR from a Mosaic dump",
                json!({"mosaic_dump_dir": "${CORPUS}/fixtures/seed-v6e/mosaic_dump", "max_chars": 500}),
            )
            .expect(&["source", "mlir_text", "op_counts_by_dialect"]),
            Example::new(
                "Bytecode summary from an HLO dump's custom call",
                json!({"kernel": "matmul_optimized", "hlo_dump_dir": "${CORPUS}/fixtures/seed-v6e/hlo_dump"}),
            )
            .expect(&["source", "bytecode_summary"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        run_lib(|| {
            let kernel = call
                .opt_str("kernel")
                .map_err(tool_to_llo)?
                .unwrap_or_default();
            let max_chars = usize_arg(call, "max_chars", 20000)?;
            let pass = call.opt_nonempty("pass_label").map_err(tool_to_llo)?;
            if let Some(m) = call.opt_nonempty("mosaic_dump_dir").map_err(tool_to_llo)? {
                let dir = expand_tilde(&m);
                if !dir.is_dir() {
                    return Err(LloError::NotFound {
                        path: dir,
                        what: "Mosaic dump directory (--mosaic_dump_dir; written by --xla_mosaic_dump_to)",
                    });
                }
                call.read_dir(&dir);
                let hlo_dir = dir_from_arg_or_env(
                    call.opt_nonempty("hlo_dump_dir")
                        .map_err(tool_to_llo)?
                        .as_deref(),
                    "XLA_HLO_DUMP_DIR",
                )
                .filter(|h| h.is_dir());
                let (v, file) =
                    match mosaic::from_mosaic_dump(&dir, &kernel, pass.as_deref(), max_chars) {
                        // The Mosaic file token is the Pallas kernel name; an HLO op name is
                        // resolved through the HLO dump's custom call when one is available.
                        Err(LloError::NoData { .. }) if !kernel.is_empty() && hlo_dir.is_some() => {
                            let h = hlo_dir.expect("checked");
                            call.read_dir(&h);
                            mosaic::from_mosaic_dump_via_hlo(
                                &dir,
                                &h,
                                &kernel,
                                pass.as_deref(),
                                max_chars,
                            )?
                        }
                        other => other?,
                    };
                call.read_file(file);
                let mut v = v;
                v["provenance"] = xprof_llo::provenance(
                    &[
                        "mlir_text",
                        "mlir_chars",
                        "available_passes",
                        "op_summary",
                        "op_counts_by_dialect",
                    ],
                    &[],
                    &["kernel / function matching (file token, MLIR function name)"],
                );
                return Ok(v.into());
            }
            let given = call.opt_nonempty("hlo_dump_dir").map_err(tool_to_llo)?;
            let Some(dir) = dir_from_arg_or_env(given.as_deref(), "XLA_HLO_DUMP_DIR") else {
                return Err(LloError::Usage {
                    message: NO_DIR_TEXT.into(),
                    hint: "pass --mosaic_dump_dir <dir> or --hlo_dump_dir <dir> (or set $XLA_HLO_DUMP_DIR)".into(),
                });
            };
            if !dir.is_dir() {
                return Err(LloError::NotFound {
                    path: dir,
                    what: "HLO dump directory (--hlo_dump_dir / $XLA_HLO_DUMP_DIR; written by --xla_dump_to)",
                });
            }
            call.read_dir(&dir);
            let (v, files) = mosaic::from_hlo_dump(&dir, &kernel)?;
            for f in files {
                call.read_file(f);
            }
            let mut v = v;
            v["provenance"] = xprof_llo::provenance(
                &[
                    "body_bytes",
                    "bytecode_summary (decoded; undecoded parts listed with the reason)",
                ],
                &["bytecode_summary.ops_per_named_scope"],
                &[
                    "bytecode_summary.named_scopes (string-table names with a `/`, as XProf's CLI lists them)",
                ],
            );
            Ok(v.into())
        })
    }
}
