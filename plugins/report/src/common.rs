//! Glue shared by the report tools: the file a tool writes (`--output_path`, else a new file
//! in `$TMPDIR`) and the `written_to_file` answer that names it.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use xprof_capture::Session;
use xprof_plugin_api::{Call, ToolError};

pub use xprof_plugin_support::{capture_error, session};

/// An output file being written: a temporary file beside its destination, renamed into place
/// by [`Output::finish`] (a failed call leaves no half-written file behind). Counts and hashes
/// what passes through.
pub struct Output {
    file: BufWriter<tempfile::NamedTempFile>,
    dest: Option<PathBuf>,
    bytes: u64,
    sha: Sha256,
}

/// What [`Output::finish`] wrote.
pub struct Written {
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
}

fn canonical_parent(p: &Path) -> PathBuf {
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::canonicalize(&parent).unwrap_or(parent)
}

impl Output {
    /// The file `--output_path` names, else a new `xprof_<tool>_*<suffix>` in `$TMPDIR`.
    /// Never inside the run directory (`s.dir`).
    pub fn create(call: &Call, s: &Session, tool: &str, suffix: &str) -> Result<Output, ToolError> {
        let dest = call.opt_nonempty("output_path")?.map(PathBuf::from);
        let (dir, prefix, suffix) = match &dest {
            Some(d) => {
                let dir = canonical_parent(d);
                let run = std::fs::canonicalize(&s.dir).unwrap_or_else(|_| s.dir.clone());
                if dir.starts_with(&run) {
                    return Err(ToolError::usage(format!(
                        "refusing to write {} inside the run directory {}",
                        d.display(),
                        s.dir.display()
                    ))
                    .with_hint("pass an --output_path outside the capture (e.g. under $TMPDIR)"));
                }
                if d.is_dir() {
                    return Err(ToolError::path(format!(
                        "--output_path {} is a directory",
                        d.display()
                    ))
                    .with_hint(format!(
                        "name a file, e.g. {}",
                        d.join(format!("out{suffix}")).display()
                    )));
                }
                (dir, ".xprof-".to_string(), ".tmp".to_string())
            }
            None => (
                std::env::temp_dir(),
                format!("xprof_{tool}_"),
                suffix.to_string(),
            ),
        };
        let file = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(&suffix)
            .tempfile_in(&dir)
            .map_err(|e| {
                ToolError::path(format!("cannot create a file in {}: {e}", dir.display()))
                    .with_hint(if dest.is_some() {
                        "check that --output_path's directory exists and is writable"
                    } else {
                        "set TMPDIR to a writable directory, or pass --output_path"
                    })
            })?;
        Ok(Output {
            file: BufWriter::with_capacity(1 << 20, file),
            dest,
            bytes: 0,
            sha: Sha256::new(),
        })
    }

    /// Flush and move the file into place.
    pub fn finish(self) -> Result<Written, ToolError> {
        let write_err = |e: io::Error| ToolError::path(format!("writing the output: {e}"));
        let tmp = self
            .file
            .into_inner()
            .map_err(|e| write_err(e.into_error()))?;
        // A temporary file is private (0600); the result is an ordinary file for its reader.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = tmp
                .as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644));
        }
        let path = match self.dest {
            Some(dest) => {
                tmp.persist(&dest).map_err(|e| {
                    ToolError::path(format!("cannot write {}: {}", dest.display(), e.error))
                })?;
                dest
            }
            None => tmp.keep().map_err(|e| write_err(e.error))?.1,
        };
        Ok(Written {
            path,
            bytes: self.bytes,
            sha256: format!("{:x}", self.sha.finalize()),
        })
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The answer of a tool that wrote a file: `{capture, run, status: "written_to_file", path,
/// bytes, sha256, content_type, ...body}`.
pub fn written_to_file(
    s: &Session,
    used: &[&xprof_capture::HostFile],
    warnings: &[String],
    w: &Written,
    content_type: &str,
    body: Map<String, Value>,
) -> Value {
    let mut m = Map::new();
    m.insert("capture".into(), s.capture_block(used, warnings));
    m.insert("run".into(), json!(s.run));
    m.insert("status".into(), json!("written_to_file"));
    m.insert("path".into(), json!(w.path.display().to_string()));
    m.insert("bytes".into(), json!(w.bytes));
    m.insert("sha256".into(), json!(w.sha256));
    m.insert("content_type".into(), json!(content_type));
    m.extend(body);
    Value::Object(m)
}
