use std::path::PathBuf;

/// Why an XSpace could not be read. Converted to a `ToolError` only at the plugin edge:
/// [`XSpaceError::kind`] gives the error class, [`XSpaceError::hint`] the fix.
#[derive(Debug, thiserror::Error)]
pub enum XSpaceError {
    /// The file could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a well-formed XSpace protobuf.
    #[error("{source_name}: malformed XSpace protobuf at byte {offset} (in {context}): {detail}")]
    Malformed {
        /// The file path, or `<bytes>` for in-memory input.
        source_name: String,
        /// Absolute byte offset in the file where decoding failed.
        offset: u64,
        /// Where in the message tree, e.g. `XSpace.planes[2].lines[0].events[17].stats[1]`.
        context: String,
        /// What was wrong (truncation, wire type, varint, UTF-8 …).
        detail: String,
        /// What the file looks like instead, when its first bytes say so (gzip, JSON, text).
        looks_like: Option<&'static str>,
    },
}

/// Recognize common wrong inputs by their first bytes, for the hint.
pub(crate) fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let head = &bytes[..bytes.len().min(64)];
    if head.starts_with(&[0x1f, 0x8b]) {
        return Some("gzip data (e.g. a .trace.json.gz or a compressed capture: gunzip it first)");
    }
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'{') | Some(b'[')) {
        return Some("JSON (e.g. a trace viewer export), not a binary XSpace");
    }
    if !head.is_empty()
        && head
            .iter()
            .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        return Some("text (protobuf text format or a log?), not a binary XSpace");
    }
    None
}

impl XSpaceError {
    /// The CLI error class: `"path"` (exit 3) for unreadable files, `"invalid_value"` (exit 4)
    /// for malformed content.
    pub fn kind(&self) -> &'static str {
        match self {
            XSpaceError::Io { .. } => "path",
            XSpaceError::Malformed { .. } => "invalid_value",
        }
    }

    /// What the user can do about it.
    pub fn hint(&self) -> String {
        match self {
            XSpaceError::Io { .. } => {
                "check that the .xplane.pb file exists and is readable".into()
            }
            XSpaceError::Malformed {
                looks_like: Some(what),
                ..
            } => format!("the file looks like {what}; pass the <host>.xplane.pb of the run"),
            XSpaceError::Malformed { .. } => "the file is not a complete XSpace (.xplane.pb): it may be truncated (capture still being written, interrupted copy) or another kind of file; re-capture, or pass the right file".into(),
        }
    }

    /// The byte offset of a malformed input, if that is what this is.
    pub fn offset(&self) -> Option<u64> {
        match self {
            XSpaceError::Malformed { offset, .. } => Some(*offset),
            XSpaceError::Io { .. } => None,
        }
    }
}
