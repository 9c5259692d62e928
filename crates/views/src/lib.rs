//! `xprof-views`: XProf's communication, host-side, framework, kernel and counter views, and
//! the suggestions built on them, computed natively from the op-statistics engine
//! ([`xprof_opstats::OpStats`]) and, where a view needs stats the engine does not carry
//! (`kernel_details`, `counter_value`, megascale stats, `core_details`), from the decoded
//! XSpace itself.
//!
//! # Public API
//!
//! * [`load`] — the selected hosts in the engine's model ([`load::LoadedRun`], combined into
//!   one `OpStats` with [`xprof_opstats::combine`], plus each TPU plane's `core_details`), or
//!   opened with the zero-copy reader indexing only the planes a raw view reads
//!   ([`load::load_raw`]); errors are [`load::ViewLoadError`] with a kind and a hint.
//! * [`attribution`] — device-time attribution: the union of kernel time, per line, the
//!   custom-call share, kernels by duration (the method of XProf's agent CLI).
//! * [`diff`] — two captures compared: step time, op self time per step, by category, framework
//!   op and HLO op, with a verdict (ours; XProf's agent CLI's `diff_sessions` keys raw kernel
//!   names and reads device kernels only).
//! * [`framework`] — framework_op_stats (XProf `op_stats_to_tf_stats.cc`).
//! * [`overlap`] — async-op overlap with compute and TPU engine concurrency (the method of
//!   XProf's agent CLI's `analyze_async_overlap`), plus GPU collective kernels (ours).
//! * [`pod`] — pod_viewer (`op_stats_to_pod_stats.cc`, `op_stats_to_pod_viewer.cc`).
//! * [`input_pipeline`] — input_pipeline_analyzer (`op_stats_to_input_pipeline_analysis.cc`).
//! * [`kernel`] — kernel_stats from GPU `kernel_details` (`xplane_to_kernel_stats_db.cc`,
//!   `kernel_stats_utils.cc`).
//! * [`counters`] — perf_counters (`xplane_to_perf_counters.cc`) and utilization_viewer
//!   (`xplane_to_utilization_viewer.cc`, `tpu_generic_utilization_utils.cc`; counter ids in
//!   [`counter_ids`]).
//! * [`megascale`] — megascale_stats: DCN collectives per rendezvous
//!   (`xspace_to_dcn_slack_analysis.cc`).
//! * [`suggestions`] — smart_suggestion rules (`smart_suggestion/*.h`, with the
//!   event-time-fraction analysis of `barrier-cores`/`debug_print`) plus ours, and the
//!   host-boundness verdict of XProf's own CLI (`check_host_boundness`).
//! * [`table`] — the DataTable-as-records type and XProf's sample statistics.
//!
//! Every view returns JSON in XProf's vocabulary: tables as
//! `{"columns": [ids], "properties": {...}, "records": [{column id: value}]}` so that agents
//! read fields by name. Where XProf prints a placeholder 0 we print `null` with
//! `<field>_reason` (and `<field>_measured` when we can compute it).

pub mod attribution;
pub mod counter_ids;
pub mod counters;
pub mod diagnose;
pub mod diff;
pub mod framework;
pub mod input_pipeline;
pub mod kernel;
pub mod load;
pub mod megascale;
pub mod overlap;
pub mod pod;
pub mod recompile;
pub mod suggestions;
pub mod table;

pub use load::{HostData, LoadedRun};
