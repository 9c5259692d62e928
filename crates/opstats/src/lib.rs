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
//!   [`opstats::build_with`] with [`opstats::BuildOptions::OP_DATABASES`] skips the step
//!   database and the host framework ops (left empty) for views that read neither, on a model
//!   [`load::load_host_with`] loads with only the host-thread events they need.
//! * [`opstats::combine`] — several hosts → one `OpStats` (spec §6).
//! * [`views`] — XProf's views computed from `OpStats` with XProf's numbers: overview page,
//!   hlo_stats, op_profile, roofline model, device information; each returns plain structs or
//!   JSON the tools print.
//!
//! * [`events`] — filtered scans of raw events on the lazy reader (paged lists, durations
//!   grouped by name), in parallel.
//!
//! Follow-up views (memory profile, pod viewer, input pipeline, framework op stats, kernel
//! stats, smart suggestions) read the same `OpStats` (framework-op stats from
//! [`views::framework_op_db`], steps from `OpStats::steps`).
//!
//! # Conventions
//!
//! * Times are picoseconds (`u64` totals, `i64` absolute starts); rounded or formatted values
//!   are only produced in [`views`], always beside the exact integer.
//! * XProf-compatible fields carry XProf 2.24.2's numbers; where XProf prints a placeholder 0
//!   the views emit `null` + `<field>_reason` (+ `<field>_measured`), see
//!   `docs/PLACEHOLDERS.md`.
//! * Steps come only from XProf's grouping signals ([`steps`]); our one-step-per-module
//!   inference is kept apart in `OpStats::steps_inferred`.
//! * Arithmetic on capture values saturates: hostile captures never panic the engine.
//!
//! # Example
//!
//! ```
//! use xprof_opstats::{build, views};
//! use xprof_opstats::model::{Event, EventMetadata, HostSpace, Line, Plane, StatKey, StatValue, Stats};
//!
//! // One TPU core that ran one op (program 7, symbol 1) twice, 100 ps each, in a 400 ps window.
//! let md = EventMetadata {
//!     name: "%fusion.1 = f32[] fusion()".into(),
//!     display_name: "fusion.1".into(),
//!     stats: Stats::from(vec![
//!         (StatKey::ProgramId, StatValue::Uint(7)),
//!         (StatKey::SymbolId, StatValue::Uint(1)),
//!         (StatKey::HloCategory, StatValue::Str("loop fusion".into())),
//!     ]),
//!     ..Default::default()
//! };
//! let ev = |start| Event { metadata: 0, start_ps: start, duration_ps: 100, ..Default::default() };
//! let plane = Plane {
//!     name: "/device:TPU:0".into(),
//!     metadata: vec![md],
//!     lines: vec![Line { name: "XLA Ops".into(), events: vec![ev(0), ev(300)], ..Default::default() }],
//!     ..Default::default()
//! };
//! let stats = build(&HostSpace { planes: vec![plane], ..Default::default() });
//! let op = &stats.device_db.metrics[0];
//! assert_eq!((op.occurrences, op.time_ps, op.self_time_ps), (2, 200, 200));
//! assert_eq!(stats.device_db.total_time_ps, 400); // IDLE = 200 ps
//! let rows = views::hlo_stats_of(&stats, &stats.device_db);
//! assert_eq!(rows[0]["total_self_time_percent"], 50.0);
//! ```

pub mod adapter;
pub mod breakdown;
pub mod cost_model;
pub mod device;
pub mod events;
pub mod filter;
mod flows;
pub mod format;
pub mod host;
pub mod intersect;
pub mod load;
pub mod metrics;
pub mod model;
pub mod nesting;
pub mod opstats;
mod preprocess;
pub mod steps;
pub mod tfop;
pub mod views;

pub use metrics::{OpMetrics, OpMetricsDb};
pub use model::HostSpace;
pub use opstats::{BuildOptions, OpStats, build, build_with, combine};
