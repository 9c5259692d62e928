//! A deliberately small tool: inventory of a vendor dump directory by file kind. A real vendor
//! plugin would parse its own kernel dump format here (or, better, in a library crate this
//! file calls).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

pub struct VendorDumpInventory;
register_tool!(VendorDumpInventory);

impl Tool for VendorDumpInventory {
    fn name(&self) -> &'static str {
        "vendor_dump_inventory"
    }
    fn summary(&self) -> &'static str {
        "Example vendor tool: count the files of a kernel dump directory by extension"
    }
    fn doc(&self) -> &'static str {
        "Count the files of a kernel dump directory (non-recursive) by extension, with their total \
         size. This tool is the worked example of docs/PLUGINS.md: copy plugins/example-vendor \
         to ship your own analyzer."
    }
    fn params(&self) -> Params {
        Params::new()
            .path(
                "dump_dir",
                "The dump directory to inventory. Default: $VENDOR_DUMP_DIR.",
                Some("VENDOR_DUMP_DIR"),
            )
            .integer_min(
                "top",
                "How many extensions to list (largest first).",
                Some(20),
                1,
            )
    }
    fn output(&self) -> &'static str {
        "{dump_dir, files, bytes, by_extension: [{extension, files, bytes}]}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Inventory of a bundled HLO dump",
                json!({"dump_dir": "${FIXTURES}/jax-cpu/hlo_dump", "top": 5}),
            )
            .expect(&["files", "by_extension"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let dir = call
            .opt_nonempty("dump_dir")?
            .or_else(|| {
                std::env::var("VENDOR_DUMP_DIR")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .ok_or_else(|| {
                ToolError::usage("no dump directory given")
                    .with_hint("pass --dump_dir DIR or set VENDOR_DUMP_DIR")
            })?;
        let top = call.usize_or("top", 20)?;
        let dir = PathBuf::from(dir);
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            ToolError::path(format!("cannot read dump directory {}: {e}", dir.display()))
                .with_hint("pass the directory your compiler's dump flag wrote to as --dump_dir")
        })?;
        call.read_dir(&dir);
        let mut by_ext: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let (mut files, mut bytes) = (0u64, 0u64);
        for e in entries.flatten() {
            let Ok(md) = e.metadata() else { continue };
            if !md.is_file() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let ext = name
                .rsplit_once('.')
                .map(|(_, x)| x)
                .unwrap_or("")
                .to_string();
            let slot = by_ext.entry(ext).or_default();
            slot.0 += 1;
            slot.1 += md.len();
            files += 1;
            bytes += md.len();
        }
        let mut rows: Vec<_> = by_ext.into_iter().collect();
        rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
        rows.truncate(top);
        Ok(json!({
            "dump_dir": dir.display().to_string(),
            "files": files,
            "bytes": bytes,
            "by_extension": rows.into_iter().map(|(ext, (n, b))| json!({
                "extension": ext, "files": n, "bytes": b,
            })).collect::<Vec<_>>(),
        })
        .into())
    }
}
