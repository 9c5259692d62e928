//! Reading a run's hosts: the engine's model (through `xprof_opstats::load`) for the views
//! built on OpStats, or the decoded `XSpace` for the views that read stats the model does not
//! carry (`kernel_details`, `counter_value`, megascale stats).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use xprof_opstats::OpStats;
use xprof_opstats::load::LoadError;
use xprof_opstats::model::{HostSpace, StatKey};
pub use xprof_xspace::XSpace;
use xprof_xspace::{ReadOptions, XSpaceError};

#[derive(Debug, thiserror::Error)]
pub enum ViewLoadError {
    #[error(transparent)]
    Engine(#[from] LoadError),
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is empty (0 bytes), not an XSpace", path.display())]
    Empty { path: PathBuf },
    #[error(transparent)]
    Reader(#[from] XSpaceError),
}

impl ViewLoadError {
    /// `path` for unreadable files, `invalid_value` for malformed contents.
    pub fn kind(&self) -> &'static str {
        match self {
            ViewLoadError::Engine(e) => e.kind(),
            ViewLoadError::Reader(e) => e.kind(),
            ViewLoadError::Io { .. } => "path",
            _ => "invalid_value",
        }
    }
    pub fn hint(&self) -> String {
        match self {
            ViewLoadError::Engine(e) => e.hint().to_string(),
            ViewLoadError::Reader(e) => e.hint(),
            ViewLoadError::Io { .. } => "check the file exists and is readable".into(),
            _ => "re-capture the profile, or pass another run/host (--run, --host)".into(),
        }
    }
}

/// One host of a run in the engine's model.
pub struct HostData {
    /// Host name (the `.xplane.pb` file stem).
    pub name: String,
    pub path: PathBuf,
    pub model: HostSpace,
}

/// The selected hosts of a run.
pub struct LoadedRun {
    pub hosts: Vec<HostData>,
    /// Unreadable `*.hlo_proto.pb` files and the like.
    pub warnings: Vec<String>,
}

/// Load every host (in parallel) into the engine's model.
pub fn load_hosts(
    hosts: &[(String, PathBuf)],
    hlo_files: &[PathBuf],
) -> Result<LoadedRun, ViewLoadError> {
    let loaded = hosts
        .par_iter()
        .map(|(name, path)| {
            let (model, w) = xprof_opstats::load::load_host(name, path, hlo_files)?;
            Ok((
                HostData {
                    name: name.clone(),
                    path: path.clone(),
                    model,
                },
                w,
            ))
        })
        .collect::<Result<Vec<_>, ViewLoadError>>()?;
    let mut warnings = Vec::new();
    let mut out = Vec::new();
    for (h, w) in loaded {
        for x in w {
            if !warnings.contains(&x) {
                warnings.push(x);
            }
        }
        out.push(h);
    }
    Ok(LoadedRun {
        hosts: out,
        warnings,
    })
}

/// Open one `.xplane.pb` with the zero-copy reader, indexing only the planes `planes` accepts
/// (the views that read raw stats need a few planes of a large capture).
pub fn read_raw(
    path: &Path,
    planes: impl Fn(&str) -> bool + Send + Sync + 'static,
) -> Result<XSpace, ViewLoadError> {
    let len = std::fs::metadata(path)
        .map_err(|source| ViewLoadError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    if len == 0 {
        return Err(ViewLoadError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(XSpace::open_with(
        path,
        &ReadOptions::default().only_planes(planes),
    )?)
}

/// Open hosts (in parallel) without building the engine's model.
pub fn load_raw(
    hosts: &[(String, PathBuf)],
    planes: fn(&str) -> bool,
) -> Result<Vec<(String, XSpace)>, ViewLoadError> {
    hosts
        .par_iter()
        .map(|(name, path)| Ok((name.clone(), read_raw(path, planes)?)))
        .collect()
}

/// [`load_hosts`] and [`load_raw`] of the same hosts side by side (views that need both the
/// engine's OpStats and raw counter stats).
#[allow(clippy::type_complexity)]
pub fn load_with_raw(
    hosts: &[(String, PathBuf)],
    hlo_files: &[PathBuf],
    planes: fn(&str) -> bool,
) -> Result<(LoadedRun, Vec<(String, XSpace)>), ViewLoadError> {
    let (run, raw) = rayon::join(|| load_hosts(hosts, hlo_files), || load_raw(hosts, planes));
    Ok((run?, raw?))
}

/// Planes the kernel and counter views read.
pub fn device_planes(name: &str) -> bool {
    name.starts_with("/device:TPU:") || name.starts_with("/device:GPU:")
}

/// Planes the kernel view reads: GPUs and the embedded HLO.
pub fn gpu_planes(name: &str) -> bool {
    name.starts_with("/device:GPU:") || name == "/host:metadata"
}

/// TPU planes (where counter samples live).
pub fn tpu_planes(name: &str) -> bool {
    name.starts_with("/device:TPU:")
}

/// Planes the DCN analysis reads.
pub fn megascale_planes(name: &str) -> bool {
    name == "/device:TPU:0" || name == "/host:CPU" || name == "/host:metadata"
}

impl LoadedRun {
    /// OpStats of every host, combined (XProf `op_stats_combiner.cc` as the engine does it).
    pub fn op_stats(&self) -> Option<OpStats> {
        self.op_stats_checked().map(|x| x.0)
    }

    /// [`LoadedRun::op_stats`] computing only what `opts` asks for (e.g. no step database for
    /// a view that reads no step: on a CPU capture the grouping walks every host event).
    pub fn op_stats_with(&self, opts: xprof_opstats::BuildOptions) -> Option<OpStats> {
        xprof_opstats::combine(self.per_host(opts))
    }

    /// [`LoadedRun::op_stats`] and whether several hosts had steps but the combination kept
    /// none (XProf's "empty intersection" diagnostic).
    pub fn op_stats_checked(&self) -> Option<(OpStats, bool)> {
        let per_host = self.per_host(xprof_opstats::BuildOptions::default());
        let combined = xprof_opstats::combine(per_host)?;
        let empty = combined.steps.empty_intersect;
        Some((combined, empty))
    }

    /// [`LoadedRun::op_stats_checked`] and XProf's input pipeline over it, which the
    /// verdict tools (input pipeline, host boundness, suggestions, diagnose) all read.
    pub fn op_stats_and_input_pipeline(
        &self,
    ) -> Option<(OpStats, crate::input_pipeline::InputPipeline)> {
        let (st, empty_intersect) = self.op_stats_checked()?;
        let ip =
            crate::input_pipeline::input_pipeline_with(&st, &self.core_details(), empty_intersect);
        Some((st, ip))
    }

    /// Each host's OpStats, built in parallel.
    fn per_host(&self, opts: xprof_opstats::BuildOptions) -> Vec<OpStats> {
        self.hosts
            .par_iter()
            .map(|h| xprof_opstats::build_with(&h.model, opts))
            .collect()
    }

    /// Core details of every device plane, keyed like the engine's step cores: plane id, and
    /// for combined hosts `host index × 1000 + plane id` (XProf's `GlobalCoreId`).
    pub fn core_details(&self) -> BTreeMap<i64, CoreDetails> {
        if let [one] = self.hosts.as_slice() {
            return core_details(&one.model);
        }
        let mut out = BTreeMap::new();
        for (hi, h) in self.hosts.iter().enumerate() {
            for (id, d) in core_details(&h.model) {
                out.insert((hi as i64).saturating_mul(1000).saturating_add(id), d);
            }
        }
        out
    }
}

/// XProf's `CoreDetails` (`plugin/xprof/protobuf/op_stats.proto`), carried as the bytes of the
/// `core_details` plane stat of TPU planes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CoreDetails {
    #[prost(string, tag = "1")]
    pub hostname: String,
    #[prost(uint32, tag = "2")]
    pub device_ordinal: u32,
    #[prost(uint32, tag = "3")]
    pub core_num: u32,
    #[prost(uint32, tag = "4")]
    pub local_chip_id: u32,
    #[prost(uint32, tag = "5")]
    pub global_chip_id: u32,
    #[prost(uint32, tag = "6")]
    pub global_core_id: u32,
    #[prost(bool, tag = "7")]
    pub is_sparse_core: bool,
}

/// XProf's core id of a GPU or CPU-only host's steps (`kDefaultGpuLocalCoreId`).
pub const DEFAULT_CORE_ID: i64 = 1;

/// Core details as XProf's op stats carry them: on TPU, plane id → the plane's parsed
/// `core_details` stat (for the planes whose stat parses), completed with the host's name and
/// whether the plane is a SparseCore's; on a host without TPU planes, one entry at
/// [`DEFAULT_CORE_ID`] holding the host's name.
pub fn core_details(model: &HostSpace) -> BTreeMap<i64, CoreDetails> {
    use prost::Message;
    let tpu = model
        .planes
        .iter()
        .any(|p| p.name.starts_with("/device:TPU:"));
    if !tpu {
        let d = CoreDetails {
            hostname: model.hostname.clone(),
            ..Default::default()
        };
        return BTreeMap::from([(DEFAULT_CORE_ID, d)]);
    }
    model
        .planes
        .iter()
        .filter_map(|p| {
            let b = p.stats.get(StatKey::CoreDetails)?.as_bytes()?;
            let mut d = CoreDetails::decode(b).ok()?;
            d.hostname = model.hostname.clone();
            d.is_sparse_core = xprof_opstats::device::is_sparse_core_plane(&p.name);
            Some((p.id, d))
        })
        .collect()
}
