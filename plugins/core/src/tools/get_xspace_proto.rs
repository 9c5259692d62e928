use std::path::{Path, PathBuf};

use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::list_xplane_events::one_host;
use crate::common::with_capture;

pub struct GetXspaceProto;
register_tool!(GetXspaceProto);

fn inside(child: &Path, dir: &Path) -> bool {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let parent = child.parent().map(abs).unwrap_or_default();
    parent.starts_with(abs(dir))
}

impl Tool for GetXspaceProto {
    fn name(&self) -> &'static str {
        "get_xspace_proto"
    }
    fn summary(&self) -> &'static str {
        "Export one host's XSpace: to a file, or as readable text"
    }
    fn doc(&self) -> &'static str {
        "One host's XSpace (--host, default the first). With --output_path, writes the raw \
         protobuf (or, with --as_text, the readable rendering) to that file and returns its path \
         and size; the path must be outside the run directory. Without --output_path, returns \
         the readable rendering (truncated to --max_bytes). Never prints binary."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .boolean(
                "as_text",
                "Readable rendering instead of raw protobuf bytes.",
                false,
            )
            .path(
                "output_path",
                "File to write (outside the run directory).",
                None,
            )
            .integer_min(
                "max_bytes",
                "Truncate the returned text to this many bytes.",
                Some(65536),
                1,
            )
    }
    fn output(&self) -> &'static str {
        "{format: \"text\", text, truncated} or {capture, run, output_path, bytes, format}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![Example::new(
            "Readable head of the bundled CPU capture",
            json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul", "as_text": true, "max_bytes": 2000}),
        )
        .expect(&["text"])]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let as_text = call.bool_or("as_text", false)?;
        let out = call.opt_nonempty("output_path")?.map(PathBuf::from);
        let max = call.usize_or("max_bytes", 65536)?.max(1);
        let (s, idx, _) = one_host(call)?;
        // The readable rendering needs the owning decoder (every field, in order).
        let render = || -> Result<String, ToolError> {
            let space = xprof_opstats::load::read_xspace(&s.hosts[idx].path)
                .map_err(crate::common::load_error)?;
            Ok(format!("{space:#?}"))
        };
        if let Some(out) = out {
            if inside(&out, &s.dir) {
                return Err(ToolError::usage(format!(
                    "refusing to write {} inside the run directory {}",
                    out.display(),
                    s.dir.display()
                ))
                .with_hint("pass an --output_path outside the capture (e.g. under $TMPDIR)"));
            }
            let bytes = if as_text {
                render()?.into_bytes()
            } else {
                xprof_xspace::file::read(&s.hosts[idx].path).map_err(|e| {
                    ToolError::path(format!("cannot read {}: {e}", s.hosts[idx].path.display()))
                })?
            };
            std::fs::write(&out, &bytes).map_err(|e| {
                ToolError::path(format!("cannot write {}: {e}", out.display()))
                    .with_hint("check that --output_path's directory exists and is writable")
            })?;
            let mut body = Map::new();
            body.insert("output_path".into(), json!(out.display().to_string()));
            body.insert("bytes".into(), json!(bytes.len()));
            body.insert(
                "format".into(),
                json!(if as_text { "text" } else { "protobuf" }),
            );
            return Ok(with_capture(&s, &[&s.hosts[idx]], &[], body).into());
        }
        if !as_text {
            return Err(
                ToolError::usage("the XSpace is binary protobuf; refusing to print it").with_hint(
                    "pass --output_path <file> to save it, or --as_text true to read it",
                ),
            );
        }
        let mut text = render()?;
        let full = text.len();
        if full > max {
            let mut cut = max;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        let mut extra = Map::new();
        extra.insert("truncated".into(), json!(full > max));
        extra.insert("total_bytes".into(), json!(full));
        extra.insert("host".into(), json!(s.hosts[idx].name));
        Ok(ToolOutput::text("text", text, extra))
    }
}
