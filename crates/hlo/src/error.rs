//! Errors of the HLO library. Each names the file or argument at fault; `kind()` and `hint()`
//! let the plugin map them to exit-code classes without string matching.

use std::path::PathBuf;

use thiserror::Error;

/// The capture flags that write an XLA HLO dump folder.
pub const DUMP_FLAGS_HINT: &str = "run the program with XLA_FLAGS='--xla_dump_to=<dir> --xla_dump_hlo_as_text' \
     and pass that directory as --dump_dir (or set XLA_HLO_DUMP_DIR)";

#[derive(Debug, Error)]
pub enum HloError {
    #[error("no HLO dump directory given: --dump_dir is empty and XLA_HLO_DUMP_DIR is not set")]
    DumpDirNotSet,

    #[error("HLO dump directory not found: {0}")]
    DumpDirNotFound(PathBuf),

    #[error("not a directory: {0}")]
    NotADirectory(PathBuf),

    #[error("no HLO dump files found in {0}")]
    NoDumpFiles(PathBuf),

    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{file}:{line}:{column}: {message}")]
    Parse {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },

    #[error("no module matching '{pattern}' found in {dir}; available (first 10): {available:?}")]
    NoModuleMatch {
        pattern: String,
        dir: PathBuf,
        available: Vec<String>,
    },

    #[error("pattern '{pattern}' matched {} distinct modules: {candidates:?}", candidates.len())]
    AmbiguousModule {
        pattern: String,
        candidates: Vec<String>,
    },

    #[error("stage '{stage}' not available for module '{module}'; available stages: {available:?}")]
    StageNotAvailable {
        stage: String,
        module: String,
        available: Vec<String>,
    },

    #[error(
        "instruction '%{name}' not found in {scope}{}",
        similar_suffix(similar)
    )]
    InstructionNotFound {
        name: String,
        scope: String,
        similar: Vec<String>,
    },

    #[error("computation '{name}' not found in module '{module}'")]
    ComputationNotFound { name: String, module: String },

    #[error("{path}: not a valid xla.HloProto: {message}")]
    Decode { path: String, message: String },

    #[error("{0}")]
    XSpace(#[from] xprof_xspace::XSpaceError),

    #[error("module '{name}' not found; available: {available:?}")]
    ModuleNotFound {
        name: String,
        available: Vec<String>,
    },

    #[error("module '{name}' matches {} modules: {candidates:?}", candidates.len())]
    AmbiguousCaptureModule {
        name: String,
        candidates: Vec<String>,
    },

    #[error("invalid argument `{arg}`: {message}")]
    InvalidArgument { arg: &'static str, message: String },

    /// A SQL query ran into one of its limits (time, rows); `flag` raises it.
    #[error("the SQL query was stopped: {message}")]
    SqlLimit { flag: &'static str, message: String },
}

fn similar_suffix(similar: &[String]) -> String {
    if similar.is_empty() {
        String::new()
    } else {
        format!(
            ". Similar: {}",
            similar
                .iter()
                .map(|s| format!("%{s}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

impl HloError {
    /// The exit-code class: `path` (3), `invalid_value` (4) or `usage` (2).
    pub fn kind(&self) -> &'static str {
        match self {
            HloError::DumpDirNotSet
            | HloError::DumpDirNotFound(_)
            | HloError::NotADirectory(_)
            | HloError::NoDumpFiles(_)
            | HloError::Io { .. } => "path",
            HloError::Parse { .. }
            | HloError::NoModuleMatch { .. }
            | HloError::AmbiguousModule { .. }
            | HloError::StageNotAvailable { .. }
            | HloError::InstructionNotFound { .. }
            | HloError::ComputationNotFound { .. }
            | HloError::InvalidArgument { .. }
            | HloError::SqlLimit { .. }
            | HloError::Decode { .. }
            | HloError::ModuleNotFound { .. }
            | HloError::AmbiguousCaptureModule { .. } => "invalid_value",
            HloError::XSpace(e) => e.kind(),
        }
    }

    /// What to do about it: the flag or the fix.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            HloError::DumpDirNotSet | HloError::DumpDirNotFound(_) | HloError::NoDumpFiles(_) => {
                DUMP_FLAGS_HINT.to_string()
            }
            HloError::NotADirectory(_) => "pass the dump directory itself as --dump_dir".into(),
            HloError::Io { .. } => "check that the file exists and is readable".into(),
            HloError::Parse { .. } => {
                "the file is not HLO text as XLA prints it (--xla_dump_hlo_as_text); pick a stage file".into()
            }
            HloError::NoModuleMatch { .. } => {
                "run list_hlo_dump_modules and pass one of its module prefixes as --module_pattern".into()
            }
            HloError::AmbiguousModule { .. } => {
                "refine the pattern to match exactly one module (include the module number, e.g. 'module_0006.jit__my_fwd')".into()
            }
            HloError::StageNotAvailable { .. } => {
                "pass one of the available stages (before_optimizations, after_optimizations, pass_NNNN)".into()
            }
            HloError::InstructionNotFound { .. } => {
                "pass an instruction name as printed in the HLO text (without or with a leading %)".into()
            }
            HloError::ComputationNotFound { .. } => {
                "pass a computation name as printed in the HLO text".into()
            }
            HloError::InvalidArgument { arg, .. } => format!("check the value of --{arg}"),
            HloError::SqlLimit { flag, .. } => format!(
                "narrow the query (WHERE, LIMIT; a recursive CTE needs a stop condition) or raise --{flag}"
            ),
            HloError::Decode { .. } => {
                "the file is damaged or not an HloProto; re-capture, or point at another run".into()
            }
            HloError::XSpace(_) => "the .xplane.pb is damaged or truncated; re-capture the profile".into(),
            HloError::ModuleNotFound { .. } | HloError::AmbiguousCaptureModule { .. } => {
                "run list_hlo_modules and pass one of its names as --module_name (the bare module name or the program id also work when unique)".into()
            }
        })
    }
}
