//! Where an `aggregate_xplane_events` call's in-process time goes, phase by phase, on one input
//! of `xprof_testkit::bench_inputs` (default `x200`; a path works too):
//!
//! `cargo bench -p xprof-opstats --bench aggregate_phases -- [input] [iterations]`
//!
//! Phases: `framed` (read and frame the capture), `validating scan` (a scan that only
//! validates), `count` (open + count, as `list_xplane_events`), `open+group` (open and group
//! by name, as the tool), `merge`, `stats` (percentiles of every group) and `drop` (of the
//! space and the groups). Prints min / p25 / median of each in ms. Unlike a whole-process run,
//! memory is reused between iterations, so page faults barely show here: whole calls are
//! measured by `cargo xtask bench`.

use std::time::Instant;

use xprof_opstats::events::{EventQuery, group_stats};
use xprof_testkit::bench_inputs::input_files;
use xprof_xspace::{Event, EventScan, Line, Run, XSpace};

/// A scan that keeps nothing: the cost of validating and decoding every event.
struct Validate;

impl EventScan for Validate {
    type Acc = ();
    fn start(&self, _: Line<'_>, _: &Run) -> Option<()> {
        Some(())
    }
    fn event(&self, _: &mut (), _: Event<'_>, _: Option<usize>) {}
}

const PHASES: [&str; 7] = [
    "framed",
    "validating scan",
    "count",
    "open+group",
    "merge",
    "stats",
    "drop",
];

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let name = args.next().unwrap_or_else(|| "x200".into());
    let iterations: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);
    let Some((xplane, _)) = input_files(&name) else {
        eprintln!("aggregate_phases: input `{name}` is missing (see docs/BENCHMARKS.md)");
        return;
    };
    let q = EventQuery::everything();
    let opts = Default::default();
    let mut ms: Vec<Vec<f64>> = vec![Vec::new(); PHASES.len()];
    let mut lap = |k: usize, t: &mut Instant| {
        let now = Instant::now();
        ms[k].push((now - *t).as_secs_f64() * 1e3);
        *t = now;
    };
    for _ in 0..iterations {
        let mut t = Instant::now();
        let framed = XSpace::open_framed(&xplane, &opts).unwrap();
        lap(0, &mut t);
        let validated = framed.scan(&Validate).unwrap();
        lap(1, &mut t);
        drop(validated);
        t = Instant::now();
        // Including its drop.
        drop(q.open_counted(&xplane, &opts).unwrap());
        lap(2, &mut t);
        let (space, per_run) = q.open_grouped(&xplane, &opts, false).unwrap();
        lap(3, &mut t);
        let (_, groups) = q.merge_groups(&space, per_run, true, false, false);
        lap(4, &mut t);
        let stats = group_stats(groups);
        lap(5, &mut t);
        drop(stats);
        drop(space);
        lap(6, &mut t);
    }
    println!("aggregate phases on {name}, {iterations} iterations (ms):");
    for (phase, v) in PHASES.iter().zip(&mut ms) {
        v.sort_by(f64::total_cmp);
        let at = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
        println!(
            "  {phase:16} min {:7.2}  p25 {:7.2}  median {:7.2}",
            at(0.0),
            at(0.25),
            at(0.5)
        );
    }
}
