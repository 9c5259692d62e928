use std::path::PathBuf;

use crate::{LLO_CAPTURE_FLAGS, no_dir_message};

/// Why an LLO / Mosaic analysis could not answer. `kind()` maps it onto the CLI's error
/// classes at the plugin edge; `NoData` is not a failure but the structured "the input
/// really lacks this" answer.
#[derive(Debug, thiserror::Error)]
pub enum LloError {
    /// Neither the argument nor the environment variable named a directory.
    #[error("no {what} given: {}", no_dir_message(""))]
    DirNotGiven {
        what: &'static str,
        env: &'static str,
    },
    #[error("{}", no_dir_message(&.0.display().to_string()))]
    DumpDirNotFound(PathBuf),
    #[error("{what} not found: {}", path.display())]
    NotFound { path: PathBuf, what: &'static str },
    /// A malformed call (what is missing and how to supply it).
    #[error("{message}")]
    Usage { message: String, hint: String },
    #[error("Missing required arg `{0}` — call list_llo_programs first.")]
    MissingArg(&'static str),
    #[error("Program '{program}' not found. Close matches: {close:?}")]
    ProgramNotFound { program: String, close: Vec<String> },
    #[error("pass '{query}' not found; available: {available:?}")]
    PassNotFound {
        query: String,
        available: Vec<String>,
    },
    #[error("invalid value for `{arg}`: {message}")]
    InvalidArg { arg: &'static str, message: String },
    /// A file whose contents do not follow the format (file and line named).
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Malformed {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    #[error("{reason}")]
    NoData {
        reason: String,
        capture_flags: Vec<String>,
    },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl LloError {
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        LloError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn no_data(reason: impl Into<String>, flags: &[&str]) -> Self {
        LloError::NoData {
            reason: reason.into(),
            capture_flags: flags.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// `"usage"`, `"path"`, `"invalid_value"`, `"internal"` or `"no_data"`.
    pub fn kind(&self) -> &'static str {
        match self {
            LloError::DirNotGiven { .. } | LloError::MissingArg(_) | LloError::Usage { .. } => {
                "usage"
            }
            LloError::DumpDirNotFound(_) | LloError::NotFound { .. } => "path",
            LloError::ProgramNotFound { .. }
            | LloError::PassNotFound { .. }
            | LloError::InvalidArg { .. }
            | LloError::Malformed { .. } => "invalid_value",
            LloError::NoData { .. } => "no_data",
            LloError::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound
                | std::io::ErrorKind::PermissionDenied
                | std::io::ErrorKind::IsADirectory
                | std::io::ErrorKind::NotADirectory => "path",
                std::io::ErrorKind::InvalidData => "invalid_value",
                _ => "internal",
            },
        }
    }

    /// The fix to suggest; every error has one (a `"hint": null` helps nobody).
    pub fn hint(&self) -> String {
        match self {
            LloError::DirNotGiven { what, env } => format!(
                "pass the {what} explicitly or set ${env}; capture flags: {}",
                LLO_CAPTURE_FLAGS.join(" ")
            ),
            LloError::DumpDirNotFound(_) => format!(
                "check --dump_dir (or $XLA_JF_DUMP_DIR); write a dump with LIBTPU_INIT_ARGS=\"{}\"",
                LLO_CAPTURE_FLAGS.join(" ")
            ),
            LloError::NotFound { what, .. } => format!("pass an existing directory: the {what}"),
            LloError::Usage { hint, .. } => hint.clone(),
            LloError::MissingArg(a) => {
                format!("pass --{a} <name>; list_llo_programs lists the programs of a dump")
            }
            LloError::ProgramNotFound { .. } => {
                "run list_llo_programs on this --dump_dir and pass one of its `program` names".into()
            }
            LloError::PassNotFound { .. } => {
                "pass --pass_label with one of the available labels (exact label or a regex)".into()
            }
            LloError::InvalidArg { arg, .. } => format!("fix --{arg}"),
            LloError::Malformed { .. } => {
                "the file does not follow the libtpu dump format this tool knows; re-capture it or report the libtpu version".into()
            }
            LloError::NoData { capture_flags, .. } => {
                format!("re-capture with {}", capture_flags.join(" "))
            }
            LloError::Io { path, .. } => format!(
                "check that {} exists and is a file this user can read",
                path.display()
            ),
        }
    }
}

pub type Result<T, E = LloError> = std::result::Result<T, E>;
