//! Async-op overlap: how much of each asynchronous op (a collective, an async copy, a
//! send/recv) ran while the same device computed something else, and how long the engines of
//! one TPU chip (TensorCore, SparseCores) were busy at once. XProf's agent CLI computes this
//! in Python (`analyze_async_overlap`); the facts of its method, restated:
//!
//! * Lines read: `XLA Ops`, `Sparse Core Ops` (op lines) and `Async XLA Ops` (by display
//!   name, else name); times are the events' absolute starts (line timestamp + offset).
//! * Windows: each event of a plane's `Async XLA Ops` line when it has events, else
//!   `<base>-start[.N]` / `<base>-done[.N]` pairs on the plane's op lines, in start order,
//!   FIFO per key (`send`/`recv` start without a suffix; a done without a start, or a start
//!   never done, is `unpaired`). A window runs from the start op's start to the done op's end.
//! * Coverage: the merged intervals of the plane's op-line events that are neither a start
//!   nor a done op. A window's `overlap_ratio` = covered / span, classified `hidden`
//!   (≥ hidden threshold), `exposed` (≤ exposed threshold) or `partial`.
//! * The op family is the last dot-separated, non-numeric token of the window's base name
//!   (`all-gather-start.3` → `all-gather`, `fusion.7.call-start` → `call`).
//! * Concurrency: per TPU chip (`/device:TPU:N` and its `SparseCore` planes), the op lines'
//!   busy time and each pair's concurrent time, as a fraction of the less busy engine's.
//! * Hosts are never mixed: with several hosts `by_plane` keys are `<host>:<plane>`.
//!
//! Ours on top: GPU captures, whose raw planes have no `XLA Ops` line (XProf's tool finds
//! nothing there): a GPU plane without XProf's windows takes each collective kernel (NCCL /
//! RCCL) on its streams as a window, covered by the other kernels of the same GPU (memory
//! copies and sets are not compute), with `window_source: "gpu_collective_kernels"`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};
use xprof_xspace::{Plane, XSpace};

pub const ASYNC_OPS_LINE: &str = "Async XLA Ops";
/// Op lines, in the order XProf's tool reads them (sorted).
pub const OPS_LINES: [&str; 2] = ["Sparse Core Ops", "XLA Ops"];
pub const GPU_WINDOWS: &str = "gpu_collective_kernels";

static START_DONE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?P<base>.+)-(?P<role>start|done)(?P<n>\.\d+)?$").unwrap());
static SEND_RECV: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?P<base>send|recv)(?P<n>\.\d+)?$").unwrap());
static TPU_PLANE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^/device:TPU:(?P<chip>\d+)(?: SparseCore(?: [A-Za-z]+)? (?P<sc>\d+))?$").unwrap()
});

/// Classification thresholds; `0 <= exposed < hidden <= 1`.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    pub hidden: f64,
    pub exposed: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            hidden: 0.9,
            exposed: 0.1,
        }
    }
}

impl Thresholds {
    /// The thresholds, or the message XProf's CLI gives for invalid ones.
    pub fn new(hidden: f64, exposed: f64) -> Result<Self, String> {
        if (0.0..hidden).contains(&exposed) && hidden <= 1.0 {
            Ok(Thresholds { hidden, exposed })
        } else {
            Err(format!(
                "thresholds must satisfy 0 <= exposed_threshold < hidden_threshold <= 1, got \
                 exposed={exposed}, hidden={hidden}"
            ))
        }
    }

    fn classify(self, ratio: f64) -> &'static str {
        if ratio >= self.hidden {
            "hidden"
        } else if ratio <= self.exposed {
            "exposed"
        } else {
            "partial"
        }
    }
}

/// The HLO instruction name in an event name: `%copy-start.1 = (...) copy-start(...)` and
/// `copy-start.1` both give `copy-start.1`.
pub fn instruction_name(name: &str) -> &str {
    let name = name.trim();
    match name.strip_prefix('%') {
        Some(rest) => rest.split(" = ").next().unwrap_or(rest).trim(),
        None => name,
    }
}

/// Whether an instruction starts or ends an async op: `(key, is_start)`, the key the same for
/// both ends of one op.
pub fn async_role(name: &str) -> Option<(String, bool)> {
    if let Some(c) = START_DONE.captures(name) {
        let n = c.name("n").map_or("", |m| m.as_str());
        return Some((format!("{}{n}", &c["base"]), &c["role"] == "start"));
    }
    SEND_RECV.captures(name).map(|c| {
        let n = c.name("n").map_or("", |m| m.as_str());
        (format!("{}{n}", &c["base"]), true)
    })
}

/// The op kind of an async op (`all-gather`, `copy`, `send`, ...).
pub fn op_family(name: &str) -> String {
    let base = START_DONE
        .captures(name)
        .or_else(|| SEND_RECV.captures(name))
        .map_or(name, |c| c.name("base").map_or(name, |m| m.as_str()));
    base.split('.')
        .rfind(|t| !t.is_empty() && !t.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or(base)
        .to_string()
}

/// Sorted, disjoint, non-empty intervals (touching ones merge).
fn merge(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    v.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(v.len());
    for (lo, hi) in v {
        if hi <= lo {
            continue;
        }
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// "How much of [lo, hi) do these intervals cover", by binary search over prefix sums.
struct Coverage {
    merged: Vec<(i64, i64)>,
    prefix: Vec<i128>,
}

impl Coverage {
    fn new(merged: Vec<(i64, i64)>) -> Self {
        let mut prefix = Vec::with_capacity(merged.len() + 1);
        prefix.push(0i128);
        for (lo, hi) in &merged {
            prefix.push(prefix.last().copied().unwrap_or(0) + (*hi as i128 - *lo as i128));
        }
        Coverage { merged, prefix }
    }

    fn covered(&self, lo: i64, hi: i64) -> i64 {
        if hi <= lo || self.merged.is_empty() {
            return 0;
        }
        // Intervals that end after `lo` … that start before `hi`.
        let first = self.merged.partition_point(|x| x.1 <= lo);
        let last = self.merged.partition_point(|x| x.0 < hi);
        if first >= last {
            return 0;
        }
        let mut total = self.prefix[last] - self.prefix[first];
        let (flo, _) = self.merged[first];
        total -= (lo as i128 - flo as i128).max(0);
        let (_, lhi) = self.merged[last - 1];
        total -= (lhi as i128 - hi as i128).max(0);
        total.clamp(0, i64::MAX as i128) as i64
    }
}

fn intersection(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let (mut i, mut j, mut total) = (0, 0, 0i64);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total = total.saturating_add(hi.saturating_sub(lo));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// Merged busy intervals of an op line, by (host, plane, line).
type Busy = BTreeMap<(String, String, String), Vec<(i64, i64)>>;

/// An event of a line the analysis reads.
struct Ev<'a> {
    name: &'a str,
    start: i64,
    end: i64,
}

struct Window {
    name: String,
    start: i64,
    end: i64,
}

#[derive(Default, Clone, Copy)]
struct Bucket {
    count: u64,
    span_ps: i64,
    exposed_ps: i64,
    hidden: u64,
    partial: u64,
    exposed: u64,
}

impl Bucket {
    fn add(&mut self, span: i64, exposed: i64, class: &str) {
        self.count += 1;
        self.span_ps = self.span_ps.saturating_add(span);
        self.exposed_ps = self.exposed_ps.saturating_add(exposed);
        match class {
            "hidden" => self.hidden += 1,
            "exposed" => self.exposed += 1,
            _ => self.partial += 1,
        }
    }

    fn to_map(self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("count".into(), json!(self.count));
        m.insert("span_ps".into(), json!(self.span_ps));
        m.insert("exposed_ps".into(), json!(self.exposed_ps));
        m.insert("hidden".into(), json!(self.hidden));
        m.insert("partial".into(), json!(self.partial));
        m.insert("exposed".into(), json!(self.exposed));
        m
    }
}

fn line_name<'a>(l: &xprof_xspace::Line<'a>) -> &'a str {
    let d = l.display_name();
    if d.is_empty() { l.name() } else { d }
}

fn events_of<'a>(plane: &Plane<'a>, line: &str) -> Option<Vec<Ev<'a>>> {
    let mut found = None;
    for l in plane.lines().filter(|l| line_name(l) == line) {
        let v: &mut Vec<Ev> = found.get_or_insert_with(Vec::new);
        v.extend(l.events().map(|e| Ev {
            name: e.name(),
            start: e.start_ps(),
            end: e.end_ps(),
        }));
    }
    found.filter(|v: &Vec<Ev>| !v.is_empty())
}

/// A GPU collective kernel's family from its name (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`
/// → `all-reduce`), or `None` for a kernel that is not a collective.
pub fn gpu_collective_family(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if !(lower.contains("nccl") || lower.contains("rccl")) {
        return None;
    }
    const KINDS: [(&str, &str); 7] = [
        ("allreduce", "all-reduce"),
        ("allgather", "all-gather"),
        ("reducescatter", "reduce-scatter"),
        ("alltoall", "all-to-all"),
        ("broadcast", "broadcast"),
        ("sendrecv", "send-recv"),
        ("reduce", "reduce"),
    ];
    let squashed: String = lower.chars().filter(|c| *c != '_').collect();
    Some(
        KINDS
            .iter()
            .find(|(k, _)| squashed.contains(k))
            .map_or("collective", |(_, f)| f),
    )
}

/// GPU windows: collective kernels on the plane's stream lines; coverage: its other kernels.
fn gpu_windows(plane: &Plane) -> (Vec<Window>, Vec<(i64, i64)>) {
    let mut windows = Vec::new();
    let mut compute = Vec::new();
    for l in plane.lines().filter(|l| l.name().starts_with("Stream #")) {
        for e in l.events() {
            let name = e.name();
            if gpu_collective_family(name).is_some() {
                windows.push(Window {
                    name: name.to_string(),
                    start: e.start_ps(),
                    end: e.end_ps(),
                });
            } else if !(name.starts_with("Memcpy") || name.starts_with("Memset")) {
                compute.push((e.start_ps(), e.end_ps()));
            }
        }
    }
    windows.sort_by_key(|w| w.start);
    (windows, compute)
}

/// The analysis of the hosts' planes (see the module docs). `status` is `OK` when any plane
/// has events of the lines read (or GPU windows), else `NO_DEVICE_TIMELINE_EVENTS`.
pub fn analyze(hosts: &[(String, XSpace)], th: Thresholds, top_k: usize) -> Map<String, Value> {
    let multi_host = hosts.len() > 1;
    let mut summary = Bucket::default();
    let mut exposed_union_total = 0i64;
    let mut unpaired = 0u64;
    let mut by_op: BTreeMap<String, Bucket> = BTreeMap::new();
    let mut by_plane = Map::new();
    let mut rows: Vec<(i64, String, String, i64, Value)> = Vec::new();
    // (host, plane, line) → merged busy intervals, for the chip concurrency.
    let mut busy: Busy = BTreeMap::new();
    let mut any_events = false;
    let mut gpu_planes = 0usize;

    let mut planes: Vec<(&str, Plane)> = hosts
        .iter()
        .flat_map(|(h, s)| s.planes().map(move |p| (h.as_str(), p)))
        .collect();
    planes.sort_by(|a, b| (a.0, a.1.name()).cmp(&(b.0, b.1.name())));
    for (host, plane) in planes {
        let is_gpu = plane.name().starts_with("/device:GPU:");
        gpu_planes += usize::from(is_gpu);
        let mut op_events: Vec<Ev> = Vec::new();
        for line in OPS_LINES {
            if let Some(v) = events_of(&plane, line) {
                any_events = true;
                busy.insert(
                    (host.to_string(), plane.name().to_string(), line.to_string()),
                    merge(v.iter().map(|e| (e.start, e.end)).collect()),
                );
                op_events.extend(v);
            }
        }
        let async_events = events_of(&plane, ASYNC_OPS_LINE);
        any_events |= async_events.is_some();
        let mut compute = merge(
            op_events
                .iter()
                .filter(|e| async_role(instruction_name(e.name)).is_none())
                .map(|e| (e.start, e.end))
                .collect(),
        );
        let (mut windows, mut source) = match async_events {
            Some(v) => (
                v.iter()
                    .map(|e| Window {
                        name: instruction_name(e.name).to_string(),
                        start: e.start,
                        end: e.end,
                    })
                    .collect(),
                ASYNC_OPS_LINE,
            ),
            None => {
                let (w, u) = pair_start_done(&mut op_events);
                unpaired += u;
                (w, "start_done_pairs")
            }
        };
        if windows.is_empty() && is_gpu {
            let (w, c) = gpu_windows(&plane);
            // A GPU's kernels are its device timeline, collectives or not.
            any_events |= !w.is_empty() || !c.is_empty();
            if !w.is_empty() {
                windows = w;
                compute = merge(c);
                source = GPU_WINDOWS;
            }
        }
        if windows.is_empty() {
            continue;
        }
        let coverage = Coverage::new(compute);
        let exposed_union = exposed_union(&windows, &coverage);
        exposed_union_total = exposed_union_total.saturating_add(exposed_union);
        let mut pb = Bucket::default();
        for w in windows {
            let span = w.end.saturating_sub(w.start);
            if span <= 0 {
                continue;
            }
            let covered = coverage.covered(w.start, w.end);
            let ratio = covered as f64 / span as f64;
            let exposed = span - covered;
            let class = th.classify(ratio);
            let family = if source == GPU_WINDOWS {
                gpu_collective_family(&w.name)
                    .unwrap_or("collective")
                    .to_string()
            } else {
                op_family(&w.name)
            };
            summary.add(span, exposed, class);
            by_op
                .entry(family.clone())
                .or_default()
                .add(span, exposed, class);
            pb.add(span, exposed, class);
            let row = json!({
                "plane": plane.name(),
                "name": w.name,
                "op": family,
                "start_ps": w.start,
                "span_ps": span,
                "exposed_ps": exposed,
                "overlap_ratio": ratio,
                "class": class,
                "host": host,
            });
            rows.push((
                exposed,
                host.to_string(),
                plane.name().to_string(),
                w.start,
                row,
            ));
        }
        let mut m = pb.to_map();
        m.insert("exposed_union_ps".into(), json!(exposed_union));
        m.insert("window_source".into(), json!(source));
        if multi_host {
            m.insert("host".into(), json!(host));
        }
        let key = if multi_host {
            format!("{host}:{}", plane.name())
        } else {
            plane.name().to_string()
        };
        by_plane.insert(key, Value::Object(m));
    }

    rows.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.cmp(&b.2))
            .then_with(|| a.3.cmp(&b.3))
    });
    let mut s = summary.to_map();
    s.insert("exposed_union_ps".into(), json!(exposed_union_total));
    s.insert(
        "exposed_union_note".into(),
        json!(
            "exposed_ps sums each window's uncovered time (windows in flight together count \
               once each); exposed_union_ps is the time at least one window was open and no \
               compute ran, per device: what the device waited"
        ),
    );
    s.insert("unpaired_ops".into(), json!(unpaired));
    let ratio =
        (summary.span_ps > 0).then(|| 1.0 - summary.exposed_ps as f64 / summary.span_ps as f64);
    s.insert("overlap_ratio".into(), json!(ratio));
    if ratio.is_none() {
        s.insert(
            "overlap_ratio_reason".into(),
            json!(if any_events {
                "no async op window: no Async XLA Ops events, no <op>-start/<op>-done pairs on \
                 the op lines, and no GPU collective kernels"
            } else {
                "no device timeline events"
            }),
        );
    }
    let mut ops: Vec<(String, Bucket)> = by_op.into_iter().collect();
    ops.sort_by(|a, b| {
        b.1.exposed_ps
            .cmp(&a.1.exposed_ps)
            .then_with(|| a.0.cmp(&b.0))
    });

    let mut out = Map::new();
    out.insert(
        "status".into(),
        json!(if any_events {
            "OK"
        } else {
            "NO_DEVICE_TIMELINE_EVENTS"
        }),
    );
    out.insert("summary".into(), Value::Object(s));
    out.insert(
        "by_op".into(),
        Value::Object(
            ops.into_iter()
                .map(|(k, b)| (k, Value::Object(b.to_map())))
                .collect(),
        ),
    );
    out.insert("by_plane".into(), Value::Object(by_plane));
    out.insert(
        "top_exposed".into(),
        Value::Array(rows.into_iter().take(top_k).map(|r| r.4).collect()),
    );
    out.insert(
        "concurrency".into(),
        Value::Array(concurrency(&busy, multi_host)),
    );
    out.insert(
        "thresholds".into(),
        json!({"hidden": th.hidden, "exposed": th.exposed}),
    );
    out.insert("gpu_planes".into(), json!(gpu_planes));
    out
}

/// What the async-op analysis says for the smart suggestions: how much device time async
/// windows left uncovered, against the device time the op timelines span.
#[derive(Clone, Debug, Default)]
pub struct AsyncExposure {
    pub windows: u64,
    pub span_ps: i64,
    pub exposed_ps: i64,
    /// The time some window was open and no compute ran (per device, summed): what the device
    /// waited; at most its timeline.
    pub exposed_union_ps: i64,
    /// Σ of the devices' op-timeline windows (the op database's total time, idle included).
    pub device_time_ps: u64,
    /// Op families by exposed time, most first.
    pub by_op: Vec<(String, i64)>,
    pub gpu: bool,
}

impl AsyncExposure {
    /// From [`analyze`]'s result; `None` without any async window.
    pub fn from_analysis(a: &Map<String, Value>, device_time_ps: u64) -> Option<Self> {
        let s = a.get("summary")?;
        let windows = s.get("count")?.as_u64()?;
        if windows == 0 {
            return None;
        }
        let by_op = a
            .get("by_op")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v["exposed_ps"].as_i64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        let gpu = a
            .get("by_plane")
            .and_then(Value::as_object)
            .is_some_and(|m| m.values().any(|p| p["window_source"] == GPU_WINDOWS));
        Some(AsyncExposure {
            windows,
            span_ps: s["span_ps"].as_i64().unwrap_or(0),
            exposed_ps: s["exposed_ps"].as_i64().unwrap_or(0),
            exposed_union_ps: s["exposed_union_ps"]
                .as_i64()
                .or_else(|| s["exposed_ps"].as_i64())
                .unwrap_or(0),
            device_time_ps,
            by_op,
            gpu,
        })
    }

    /// The time the device waited on async windows (their union less compute) as % of the
    /// device time; `None` without device time. A union, so never over 100 %.
    pub fn exposed_percent(&self) -> Option<f64> {
        (self.device_time_ps > 0).then(|| {
            (100.0 * self.exposed_union_ps.max(0) as f64 / self.device_time_ps as f64).min(100.0)
        })
    }

    pub fn to_json(&self) -> Value {
        json!({
            "async_windows": self.windows,
            "async_span_ps": self.span_ps,
            "async_exposed_ps": self.exposed_ps,
            "async_exposed_union_ps": self.exposed_union_ps,
            "device_time_ps": self.device_time_ps,
            "async_exposed_percent_of_device_time": self.exposed_percent(),
            "exposed_ps_by_op": self.by_op.iter().map(|(k, v)| json!({"op": k, "exposed_ps": v})).collect::<Vec<_>>(),
        })
    }
}

/// The time at least one window is open and no compute runs. Windows overlap (many copies in
/// flight at once), so the sum of their exposed times can exceed the time the device waited
/// (a capture's suggestion once said 302 % of the device time); the union cannot.
fn exposed_union(windows: &[Window], coverage: &Coverage) -> i64 {
    merge(windows.iter().map(|w| (w.start, w.end)).collect())
        .iter()
        .map(|&(lo, hi)| (hi - lo).saturating_sub(coverage.covered(lo, hi)).max(0))
        .sum()
}

/// Start/done pairs in start order, FIFO per key: the windows and the unpaired ops.
fn pair_start_done(events: &mut [Ev]) -> (Vec<Window>, u64) {
    // Stable: events that start together keep the op lines' order, as XProf's tool does.
    events.sort_by_key(|e| e.start);
    let mut open: BTreeMap<String, std::collections::VecDeque<&Ev>> = BTreeMap::new();
    let mut windows = Vec::new();
    let mut unpaired = 0u64;
    for e in events.iter() {
        let Some((key, is_start)) = async_role(instruction_name(e.name)) else {
            continue;
        };
        if is_start {
            open.entry(key).or_default().push_back(e);
        } else if let Some(s) = open.get_mut(&key).and_then(|q| q.pop_front()) {
            windows.push(Window {
                name: instruction_name(s.name).to_string(),
                start: s.start,
                end: e.end,
            });
        } else {
            unpaired += 1;
        }
    }
    unpaired += open.values().map(|q| q.len() as u64).sum::<u64>();
    (windows, unpaired)
}

/// Per host and TPU chip with two or more busy engines: each engine's busy time and each
/// pair's concurrent time.
fn concurrency(busy: &Busy, multi_host: bool) -> Vec<Value> {
    let mut chips: BTreeMap<(String, u64), Vec<(&str, &str)>> = BTreeMap::new();
    for (host, plane, line) in busy.keys() {
        if let Some(c) = TPU_PLANE.captures(plane)
            && let Ok(chip) = c["chip"].parse::<u64>()
        {
            chips
                .entry((host.clone(), chip))
                .or_default()
                .push((plane.as_str(), line.as_str()));
        }
    }
    let mut out = Vec::new();
    for ((host, chip), mut engines) in chips {
        if engines.len() < 2 {
            continue;
        }
        engines.sort();
        let iv = |e: &(&str, &str)| &busy[&(host.clone(), e.0.to_string(), e.1.to_string())];
        let total = |e: &(&str, &str)| {
            iv(e)
                .iter()
                .fold(0i64, |a, (lo, hi)| a.saturating_add(hi.saturating_sub(*lo)))
        };
        let mut pairs: Vec<(i64, Value)> = Vec::new();
        for (i, a) in engines.iter().enumerate() {
            for b in &engines[i + 1..] {
                let c = intersection(iv(a), iv(b));
                let shorter = total(a).min(total(b));
                pairs.push((
                    c,
                    json!({
                        "a": {"plane": a.0, "line": a.1},
                        "b": {"plane": b.0, "line": b.1},
                        "concurrent_ps": c,
                        "concurrent_ratio": if shorter > 0 { c as f64 / shorter as f64 } else { 0.0 },
                    }),
                ));
            }
        }
        // Stable: equal times keep the engines' order, as XProf's tool does.
        pairs.sort_by_key(|p| std::cmp::Reverse(p.0));
        let mut m = Map::new();
        m.insert("chip".into(), json!(chip));
        m.insert(
            "engines".into(),
            Value::Array(
                engines
                    .iter()
                    .map(|e| json!({"plane": e.0, "line": e.1, "busy_ps": total(e)}))
                    .collect(),
            ),
        );
        m.insert(
            "pairs".into(),
            Value::Array(pairs.into_iter().map(|p| p.1).collect()),
        );
        if multi_host {
            m.insert("host".into(), json!(host));
        }
        out.push(Value::Object(m));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33: on a TPU inference capture the async rule said copies "leave 302.3 % of the
    /// device time uncovered": it summed the exposed time of windows in flight together.
    #[test]
    fn exposed_time_of_overlapping_windows_counts_the_waiting_once() {
        let w = |start, end| Window {
            name: "copy-start".into(),
            start,
            end,
        };
        // Three copies open over [0, 100), compute over [40, 60).
        let windows = [w(0, 100), w(0, 100), w(10, 90)];
        let coverage = Coverage::new(merge(vec![(40, 60)]));
        let summed: i64 = windows
            .iter()
            .map(|x| (x.end - x.start) - coverage.covered(x.start, x.end))
            .sum();
        assert_eq!(
            summed,
            80 + 80 + 60,
            "the old sum: 220 ps of waiting in 100 ps"
        );
        assert_eq!(exposed_union(&windows, &coverage), 80);
        let a = AsyncExposure {
            windows: 3,
            span_ps: 280,
            exposed_ps: summed,
            exposed_union_ps: exposed_union(&windows, &coverage),
            device_time_ps: 100,
            by_op: Vec::new(),
            gpu: false,
        };
        assert_eq!(a.exposed_percent(), Some(80.0));
    }

    #[test]
    fn names_roles_and_families() {
        assert_eq!(
            instruction_name("%copy-start.1 = (f32[8]) copy-start(x)"),
            "copy-start.1"
        );
        assert_eq!(instruction_name(" all-gather-done "), "all-gather-done");
        assert_eq!(
            async_role("all-gather-start.3"),
            Some(("all-gather.3".into(), true))
        );
        assert_eq!(
            async_role("all-gather-done.3"),
            Some(("all-gather.3".into(), false))
        );
        assert_eq!(async_role("send.2"), Some(("send.2".into(), true)));
        assert_eq!(async_role("send-done.2"), Some(("send.2".into(), false)));
        assert_eq!(async_role("fusion.2"), None);
        assert_eq!(op_family("all-gather-start.3"), "all-gather");
        assert_eq!(op_family("all-gather.3-start"), "all-gather");
        assert_eq!(op_family("fusion.7.call-start"), "call");
        assert_eq!(op_family("recv.4"), "recv");
    }

    #[test]
    fn coverage_counts_only_the_covered_part() {
        let c = Coverage::new(merge(vec![(0, 10), (20, 30), (5, 12), (30, 31)]));
        // merged: [0,12) [20,31)
        assert_eq!(c.covered(5, 25), 7 + 5);
        assert_eq!(c.covered(12, 20), 0);
        assert_eq!(c.covered(-5, 100), 12 + 11);
        assert_eq!(c.covered(21, 22), 1);
        assert_eq!(intersection(&[(0, 10), (20, 30)], &[(5, 25)]), 5 + 5);
    }

    #[test]
    fn nccl_kernels_are_collectives() {
        assert_eq!(
            gpu_collective_family("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            Some("all-reduce")
        );
        assert_eq!(
            gpu_collective_family("ncclKernel_ReduceScatter_RING_LL_Sum_bf16"),
            Some("reduce-scatter")
        );
        assert_eq!(
            gpu_collective_family("ncclDevKernel_SendRecv"),
            Some("send-recv")
        );
        assert_eq!(gpu_collective_family("volta_sgemm_128x64_nn"), None);
    }

    #[test]
    fn thresholds_must_be_ordered() {
        assert!(Thresholds::new(0.1, 0.5).is_err());
        assert!(Thresholds::new(1.1, 0.1).is_err());
        assert!(Thresholds::new(0.5, -0.1).is_err());
        assert!(Thresholds::new(0.9, 0.0).is_ok());
    }
}
