use std::path::PathBuf;

/// Why a capture could not be resolved. `kind()` maps it onto the CLI's error classes at the
/// plugin edge (`path` = exit 3, `usage` = exit 2).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{what} not found: {}", path.display())]
    NotFound { path: PathBuf, what: &'static str },
    #[error("not a directory: {}", path.display())]
    NotADirectory { path: PathBuf },
    #[error("no capture given")]
    NoCaptureGiven,
    #[error("no runs under {}: no plugins/profile/<run> directory found (searched 3 levels deep)", logdir.display())]
    NoRuns { logdir: PathBuf },
    #[error("run `{run}` not found under {}", logdir.display())]
    UnknownRun {
        run: String,
        logdir: PathBuf,
        available: Vec<String>,
    },
    #[error("no capture in {}: no <host>.xplane.pb (or .xspace.pb) files and no plugins/profile/<run> directories", dir.display())]
    NoXSpace { dir: PathBuf },
    #[error("{} is not an XSpace file (expected a name ending in .xplane.pb or .xspace.pb)", path.display())]
    NotAnXSpaceFile { path: PathBuf },
    #[error("host `{host}` not found in this run")]
    UnknownHost {
        host: String,
        available: Vec<String>,
    },
    /// A capture file that is not a well-formed XSpace (kind and hint come from the reader).
    #[error(transparent)]
    XSpace(#[from] xprof_xspace::XSpaceError),
    /// An HLO module's proto that does not decode.
    #[error("{origin}: not a valid xla.HloProto: {detail}")]
    HloProto { origin: String, detail: String },
    /// No HLO module of the session goes by this name.
    #[error("no HLO module {name:?} in the capture")]
    UnknownHloModule {
        name: String,
        available: Vec<String>,
    },
    /// A bare module name or program id that several modules share.
    #[error("{name:?} names {} HLO modules: {candidates:?}", candidates.len())]
    AmbiguousHloModule {
        name: String,
        candidates: Vec<String>,
    },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CaptureError {
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        CaptureError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// `"path"`, `"usage"` or `"invalid_value"`.
    pub fn kind(&self) -> &'static str {
        match self {
            CaptureError::NoCaptureGiven => "usage",
            CaptureError::UnknownHost { .. } => "invalid_value",
            CaptureError::NotAnXSpaceFile { .. } => "invalid_value",
            CaptureError::XSpace(e) => e.kind(),
            CaptureError::HloProto { .. } => "invalid_value",
            CaptureError::UnknownHloModule { .. } | CaptureError::AmbiguousHloModule { .. } => {
                "invalid_value"
            }
            _ => "path",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            CaptureError::NotFound { what, .. } if *what == "logdir" => {
                "check --logdir (or $XPROF_LOGDIR): it should be the directory you passed to jax.profiler.trace / xprof --logdir".into()
            }
            CaptureError::NotFound { .. } => {
                "pass a logdir, a run directory (<logdir>/plugins/profile/<run>) or one .xplane.pb file; a bare run name needs --logdir".into()
            }
            CaptureError::NotADirectory { .. } => "--logdir must be a directory".into(),
            CaptureError::NoCaptureGiven => {
                "pass PATH (a logdir, run directory or .xplane.pb), or --logdir (or set XPROF_LOGDIR) with --run".into()
            }
            CaptureError::NoRuns { .. } => {
                "capture a profile first (jax.profiler.trace(logdir) or XProf's capture), or point at a directory that holds plugins/profile/<run>".into()
            }
            CaptureError::UnknownRun { available, .. } => {
                if available.is_empty() {
                    "this logdir has no runs".into()
                } else {
                    format!("available runs: {}", available.join(", "))
                }
            }
            CaptureError::NoXSpace { .. } => {
                "this run directory holds no capture; pass the directory that contains <host>.xplane.pb".into()
            }
            CaptureError::NotAnXSpaceFile { .. } => {
                "pass a <host>.xplane.pb file or its run directory".into()
            }
            CaptureError::UnknownHost { available, .. } => {
                format!("available hosts: {}", available.join(", "))
            }
            CaptureError::Io { .. } => "check the file's permissions".into(),
            CaptureError::XSpace(e) => e.hint(),
            CaptureError::HloProto { .. } => {
                "the module's proto is damaged: re-capture, or pass another --module_name".into()
            }
            CaptureError::UnknownHloModule { available, .. } => {
                format!("pass --module_name with one of: {}", available.join(", "))
            }
            CaptureError::AmbiguousHloModule { candidates, .. } => {
                format!("pass the full name: one of {}", candidates.join(", "))
            }
        })
    }
}
