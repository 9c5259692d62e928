//! `xprof-opstats`: XProf's op-statistics engine, restated in Rust.
//!
//! # Public API
//!
//! * [`model`] — the input: a [`model::HostSpace`] per host (planes, lines, events with stats
//!   resolved by name, plus the HLO modules the capture carries). [`adapter`] builds it from the
//!   XSpace reader; tests build it by hand.
//! * [`opstats::build`] — one host → [`opstats::OpStats`]: the device op database
//!   ([`metrics::OpMetricsDb`]: per-op occurrences, total/self time with nesting, FLOPs, bytes,
//!   category, program, framework op), the host framework-op database, the XLA ops a CPU backend
//!   ran on host threads, duty cycle, peak numbers ([`device::PerfEnv`]), the run environment and
//!   the step database ([`steps::StepDb`], with its `source`).
//! * [`opstats::combine`] — several hosts → one `OpStats` (spec §6).
//! * [`views`] — XProf's views computed from `OpStats` with XProf's numbers: overview page,
//!   hlo_stats, op_profile, roofline model, device information; each returns plain structs or
//!   JSON the tools print.
//!
//! Follow-up views (memory profile, pod viewer, input pipeline, framework op stats, kernel
//! stats, smart suggestions) read the same `OpStats` (framework-op stats from
//! [`views::framework_op_db`], steps from `OpStats::steps`).

pub mod adapter;
pub mod breakdown;
pub mod device;
pub mod format;
pub mod host;
pub mod load;
pub mod metrics;
pub mod model;
pub mod nesting;
pub mod opstats;
pub mod steps;
pub mod tfop;
pub mod views;

pub use metrics::{OpMetrics, OpMetricsDb};
pub use model::HostSpace;
pub use opstats::{OpStats, build, combine};
