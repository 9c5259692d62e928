//! Whole-process benchmark driver: aggregate every event of a capture by name (what the
//! `aggregate_xplane_events` tool does), printing the top groups as JSON.
//!
//! `cargo run --release -p xprof-xspace --example xspace_scan -- CAPTURE [PLANE_REGEX] [EVENT_REGEX] [TOP_N]`
//! where CAPTURE is an `.xplane.pb` file or a run directory (its first host is read);
//! `--no-mmap` reads the file instead of mapping it.

use std::collections::HashMap;
use std::path::PathBuf;
use xprof_xspace::XSpace;

/// Duration statistics of one group; integer sums are exact.
#[derive(Clone, Copy, Default)]
struct Acc {
    count: u64,
    total: i128,
    sumsq: i128,
    min: i64,
    max: i64,
}

impl Acc {
    #[inline]
    fn add(&mut self, d: i64) {
        if self.count == 0 {
            self.min = d;
            self.max = d;
        } else {
            self.min = self.min.min(d);
            self.max = self.max.max(d);
        }
        self.count += 1;
        self.total += d as i128;
        self.sumsq += (d as i128) * (d as i128);
    }
    fn merge(&mut self, o: &Acc) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *o;
            return;
        }
        self.count += o.count;
        self.total += o.total;
        self.sumsq += o.sumsq;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
}

/// The scan: per run, a table of [`Acc`] indexed by metadata position.
struct ByMetadata<'f> {
    planes: &'f (dyn Fn(&str) -> bool + Sync),
}

impl xprof_xspace::EventScan for ByMetadata<'_> {
    type Acc = Vec<Acc>;
    fn start(&self, line: xprof_xspace::Line<'_>, _: &xprof_xspace::Run) -> Option<Vec<Acc>> {
        let plane = line.plane();
        if line.num_events() == 0 || !(self.planes)(plane.name()) {
            return None;
        }
        Some(vec![Acc::default(); plane.num_event_metadata() + 1])
    }
    #[inline]
    fn event(&self, t: &mut Vec<Acc>, e: xprof_xspace::Event<'_>, position: Option<usize>) {
        let unknown = t.len() - 1;
        t[position.unwrap_or(unknown)].add(e.duration_ps());
    }
}

fn main() -> std::process::ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // `--no-mmap`: read the file instead of mapping it (to compare the two).
    let no_mmap = args.iter().any(|a| a == "--no-mmap");
    args.retain(|a| a != "--no-mmap");
    let Some(input) = args.first() else {
        eprintln!("usage: xspace_scan CAPTURE [PLANE_REGEX] [EVENT_REGEX] [TOP_N]");
        return std::process::ExitCode::from(2);
    };
    // An absent, empty or `.*` pattern matches everything: no regex to compile.
    let pattern = |k: usize| {
        args.get(k)
            .filter(|p| !p.is_empty() && p.as_str() != ".*")
            .map(|p| regex::Regex::new(p).expect("a valid regex"))
    };
    let (plane_re, event_re) = (pattern(1), pattern(2));
    let matches = |re: &Option<regex::Regex>, s: &str| re.as_ref().is_none_or(|r| r.is_match(s));
    let top_n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50);
    let mut path = PathBuf::from(input);
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
            .expect("read run dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with(".xplane.pb"))
            .collect();
        files.sort();
        path = files
            .into_iter()
            .next()
            .expect("no .xplane.pb in the directory");
    }
    let opts = xprof_xspace::ReadOptions {
        no_mmap,
        ..Default::default()
    };
    // One pass: `open_scan` validates each event as it hands it over. Per run of events (a
    // line, or a ~1 MiB chunk of a huge line, in parallel) a table indexed by the metadata's
    // dense position; the last slot collects events whose metadata is missing.
    let scan = ByMetadata {
        planes: &|name: &str| matches(&plane_re, name),
    };
    let (space, runs) = match XSpace::open_scan(&path, &opts, &scan) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::from(4);
        }
    };
    let per_run: Vec<(xprof_xspace::Plane<'_>, Vec<Acc>)> = runs
        .into_iter()
        .filter_map(|r| Some((space.planes().nth(r.plane)?, r.acc)))
        .collect();
    let mut by_name: HashMap<&str, Acc> = HashMap::new();
    let mut scanned = 0u64;
    for (plane, t) in &per_run {
        for (pos, acc) in t.iter().enumerate().filter(|(_, a)| a.count > 0) {
            scanned += acc.count;
            let name = match plane.event_metadata_at(pos) {
                Some(md) if !md.display_name().is_empty() => md.display_name(),
                Some(md) => md.name(),
                None => "Unknown",
            };
            if matches(&event_re, name) {
                by_name.entry(name).or_default().merge(acc);
            }
        }
    }
    let mut groups: Vec<(&str, Acc)> = by_name.into_iter().collect();
    groups.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(b.0)));
    let total = groups.len();
    let events: Vec<serde_json::Value> = groups
        .iter()
        .take(top_n)
        .map(|(name, a)| {
            let n = a.count as f64;
            let mean = a.total as f64 / n;
            let var = if a.count > 1 {
                ((a.sumsq as f64) - (a.total as f64) * mean) / (n - 1.0)
            } else {
                0.0
            };
            serde_json::json!({
                "event": name,
                "count": a.count,
                "total_duration_ps": a.total as i64,
                "avg_duration_ps": mean,
                "min_duration_ps": a.min,
                "max_duration_ps": a.max,
                "std_dev_ps": var.max(0.0).sqrt(),
            })
        })
        .collect();
    let out = serde_json::json!({
        "total_event_types": total,
        "shown": events.len(),
        "events_scanned": scanned,
        "events": events,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
    std::process::ExitCode::SUCCESS
}
