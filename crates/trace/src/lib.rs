//! An XSpace as Chrome trace-event JSON, the format Perfetto and `chrome://tracing` open,
//! written as it is read: nothing larger than one event is held in memory.
//!
//! The mapping is the one JAX's own `*.trace.json.gz` uses (TSL's `xplane_to_trace_events.cc`
//! and `trace_events_to_json.cc`), so the two files line up event for event:
//! - the host plane (`/host:CPU`) is process 701, each device plane (`/device:GPU:*`, else
//!   `/device:TPU:*`, else `/device:CUSTOM:*`) process `1 + plane id`, with `process_name`
//!   and `process_sort_index` metadata;
//! - each line is a thread: `tid` is the line's display id (else its id) truncated to 32 bits,
//!   with `thread_name` (its display name, else its name) and `thread_sort_index` (file order
//!   on the host plane, else the tid);
//! - each XEvent is a complete event (`"ph":"X"`): `ts` and `dur` in µs (exact decimals of the
//!   capture's ps; a duration under 1 ps is written as 1 ps, as JAX does, so that viewers draw
//!   it), named by its metadata's display name (the full name then in `args.long_name`) or by
//!   its `step_name` stat; its metadata's stats and then its own become `args`.
//!
//! Beyond JAX's file, which leaves them out: the other planes with events (as processes from
//! 1000 up), the `Async XLA Ops` lines, the events and stats TSL calls internal, a `_counters_`
//! line's samples as counter events (`"ph":"C"`), and an event's `flow` stat as a flow event
//! (`s`/`t`/`f`). With several hosts, host `k`'s process ids are offset by `k × 10000` and
//! their names start with the host's name.
//!
//! Stat values: integers as JSON numbers when a double holds them exactly (|v| ≤ 2^53), else as
//! strings (64-bit ids); doubles as numbers (non-finite ones as strings); strings as strings;
//! bytes as `"<N bytes>"`.
//!
//! Measured (release build, 2 cores, gzip level 1 as `export_trace` defaults to): a 56.8 MB
//! capture of 1.6 M events (262 MB of JSON) in 1.4 s at 76 MB peak RSS, 33 MB written (1.45×
//! `gzip -6` of the same JSON, which alone takes 3.1 s); a 535 MB one of 15.2 M events in 13 s
//! at 542 MB peak RSS, nearly all of it the mapped capture. Both were made from the corpus's
//! `mlp_train` with `scale_xspace.py` (×100, ×950).

use std::io::{self, Write};

use regex::Regex;
use xprof_xspace::{Event, Line, Plane, Stat, StatValue, XSpace};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The output could not be written.
    #[error("writing the trace: {0}")]
    Write(#[from] io::Error),
}

/// What to export.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Keep events that end at or after this time (µs on the trace's clock, as `ts`).
    pub start_us: Option<f64>,
    /// Keep events that start at or before this time (µs).
    pub end_us: Option<f64>,
    /// Keep only lines whose name (or display name) this regex finds.
    pub line_regex: Option<Regex>,
}

impl Filter {
    fn window_ps(&self) -> (i128, i128) {
        let ps = |us: f64| (us * 1e6).round() as i128;
        (
            self.start_us.map_or(i128::MIN, ps),
            self.end_us.map_or(i128::MAX, ps),
        )
    }
    fn keeps_line(&self, line: &Line<'_>) -> bool {
        self.line_regex
            .as_ref()
            .is_none_or(|re| re.is_match(line.name()) || re.is_match(line.display_name()))
    }
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Complete events (`"ph":"X"`).
    pub events: u64,
    /// Counter samples (`"ph":"C"`).
    pub counters: u64,
    /// Flow events (`s`, `t`, `f`).
    pub flows: u64,
    /// Processes (planes with a `process_name`).
    pub processes: u64,
    /// Threads (lines with a `thread_name`).
    pub threads: u64,
}

/// TSL's trace-viewer process id of the host threads plane.
pub const HOST_THREADS_PID: u32 = 701;
/// The first process id of a plane TSL's export leaves out.
pub const OTHER_PLANES_FIRST_PID: u32 = 1000;
/// How far apart the process ids of consecutive hosts are.
pub const HOST_PID_STRIDE: u32 = 10_000;
const HOST_PLANE: &str = "/host:CPU";
const DEVICE_PREFIXES: [&str; 3] = ["/device:GPU:", "/device:TPU:", "/device:CUSTOM:"];

/// A streaming writer of one trace: [`TraceWriter::new`] writes the header,
/// [`TraceWriter::add_host`] one host's planes, [`TraceWriter::finish`] the closing brackets.
pub struct TraceWriter<W: Write> {
    out: W,
    first: bool,
    summary: Summary,
}

/// One process of the trace: a plane and the id and name it is shown with.
struct Process<'a> {
    plane: Plane<'a>,
    pid: u32,
    name: String,
}

/// The planes of `space` as processes, in the order the trace lists them.
fn processes<'a>(space: &'a XSpace, host: Option<&str>, host_index: u32) -> Vec<Process<'a>> {
    let base = host_index.wrapping_mul(HOST_PID_STRIDE);
    let name = |p: &Plane<'_>| match host {
        Some(h) => format!("{h}: {}", p.name()),
        None => p.name().to_string(),
    };
    // TSL exports the device planes of the first prefix that has any.
    let device_prefix = DEVICE_PREFIXES
        .into_iter()
        .find(|pre| space.planes().any(|p| p.name().starts_with(pre)));
    let mut out = Vec::new();
    let mut other = OTHER_PLANES_FIRST_PID;
    for p in space.planes() {
        let pid = if p.name() == HOST_PLANE {
            HOST_THREADS_PID
        } else if device_prefix.is_some_and(|pre| p.name().starts_with(pre)) {
            1u32.wrapping_add(p.id() as u32)
        } else if p.num_events() > 0 {
            other += 1;
            other - 1
        } else {
            continue;
        };
        out.push(Process {
            plane: p,
            pid: base.wrapping_add(pid),
            name: name(&p),
        });
    }
    out
}

/// TSL's thread id of a line: its display id, else its id, as 32 bits.
fn tid(line: &Line<'_>) -> u32 {
    let id = if line.display_id() != 0 {
        line.display_id()
    } else {
        line.id()
    };
    id as u32
}

fn line_name<'a>(line: &Line<'a>) -> &'a str {
    let d = line.display_name();
    if d.is_empty() { line.name() } else { d }
}

/// Exact µs of an absolute time in ps (`-1.5`, `12.000001`), without float rounding.
fn write_us(out: &mut impl Write, ps: i128) -> io::Result<()> {
    let sign = if ps < 0 { "-" } else { "" };
    let a = ps.unsigned_abs();
    let (whole, frac) = (a / 1_000_000, a % 1_000_000);
    if frac == 0 {
        write!(out, "{sign}{whole}")
    } else {
        let mut f = format!("{frac:06}");
        while f.ends_with('0') {
            f.pop();
        }
        write!(out, "{sign}{whole}.{f}")
    }
}

fn json_str(out: &mut impl Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(out, s).map_err(io::Error::from)
}

/// A stat's value as JSON (see the crate docs for the rules).
fn write_stat(out: &mut impl Write, s: &Stat<'_>) -> io::Result<()> {
    const EXACT: u64 = 1 << 53;
    match s.value {
        StatValue::None => out.write_all(b"null"),
        StatValue::Int(i) if i.unsigned_abs() <= EXACT => write!(out, "{i}"),
        StatValue::Int(i) => write!(out, "\"{i}\""),
        StatValue::Uint(u) if u <= EXACT => write!(out, "{u}"),
        StatValue::Uint(u) => write!(out, "\"{u}\""),
        StatValue::Double(d) if d.is_finite() => {
            serde_json::to_writer(out, &d).map_err(io::Error::from)
        }
        StatValue::Double(d) => write!(out, "\"{d}\""),
        StatValue::Str(_) | StatValue::Ref(_) => json_str(out, s.str().unwrap_or("")),
        StatValue::Bytes(b) => write!(out, "\"<{} bytes>\"", b.len()),
        StatValue::CompressedStr(b) => write!(out, "\"<{} compressed bytes>\"", b.len()),
    }
}

/// The flow a `flow` stat encodes (TSL's `XFlow`): direction in the low 2 bits, then a 54-bit
/// id; the top 8 bits are a category.
fn flow_of(v: u64) -> Option<(&'static str, u64)> {
    let id = (v >> 2) & ((1 << 54) - 1);
    let ph = match v & 3 {
        1 => "f",
        2 => "s",
        3 => "t",
        _ => return None,
    };
    Some((ph, id))
}

impl<W: Write> TraceWriter<W> {
    /// Start a trace on `out` (writes the JSON header).
    pub fn new(mut out: W) -> Result<Self, TraceError> {
        out.write_all(
            br#"{"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":["#,
        )?;
        Ok(TraceWriter {
            out,
            first: true,
            summary: Summary::default(),
        })
    }

    fn sep(&mut self) -> io::Result<()> {
        if self.first {
            self.first = false;
            Ok(())
        } else {
            self.out.write_all(b",\n")
        }
    }

    /// Write every plane of one host's XSpace. `host` names the host in process names (pass
    /// it when the trace has several hosts); `host_index` offsets its process ids.
    pub fn add_host(
        &mut self,
        space: &XSpace,
        host: Option<&str>,
        host_index: u32,
        filter: &Filter,
    ) -> Result<(), TraceError> {
        let procs = processes(space, host, host_index);
        for p in &procs {
            self.process_metadata(p, filter)?;
        }
        for p in &procs {
            for line in p.plane.lines().filter(|l| filter.keeps_line(l)) {
                self.line_events(p.pid, &line, filter)?;
            }
        }
        Ok(())
    }

    fn process_metadata(&mut self, p: &Process<'_>, filter: &Filter) -> io::Result<()> {
        let pid = p.pid;
        self.sep()?;
        write!(
            self.out,
            r#"{{"ph":"M","pid":{pid},"name":"process_name","args":{{"name":"#
        )?;
        json_str(&mut self.out, &p.name)?;
        self.out.write_all(b"}}")?;
        self.sep()?;
        write!(
            self.out,
            r#"{{"ph":"M","pid":{pid},"name":"process_sort_index","args":{{"sort_index":{pid}}}}}"#
        )?;
        self.summary.processes += 1;
        let by_ordinal = p.plane.name() == HOST_PLANE;
        for (i, line) in p.plane.lines().enumerate() {
            if !filter.keeps_line(&line) {
                continue;
            }
            let tid = tid(&line);
            let sort = if by_ordinal { i as u64 + 1 } else { tid as u64 };
            self.sep()?;
            write!(
                self.out,
                r#"{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_name","args":{{"name":"#
            )?;
            json_str(&mut self.out, line_name(&line))?;
            self.out.write_all(b"}}")?;
            self.sep()?;
            write!(
                self.out,
                r#"{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_sort_index","args":{{"sort_index":{sort}}}}}"#
            )?;
            self.summary.threads += 1;
        }
        Ok(())
    }

    fn line_events(&mut self, pid: u32, line: &Line<'_>, filter: &Filter) -> io::Result<()> {
        let (lo, hi) = filter.window_ps();
        let base = line.timestamp_ns() as i128 * 1000;
        let tid = tid(line);
        let counters = line.name() == "_counters_";
        for e in line.events() {
            let start = base + e.offset_ps() as i128;
            let end = start + e.duration_ps() as i128;
            if end < lo || start > hi {
                continue;
            }
            if counters {
                self.counter(pid, start, &e)?;
            } else {
                self.complete(pid, tid, start, &e)?;
            }
        }
        Ok(())
    }

    /// A `_counters_` sample: its `counter_value` stat (else its first numeric stat) as the
    /// value of the counter named after the event.
    fn counter(&mut self, pid: u32, start: i128, e: &Event<'_>) -> io::Result<()> {
        let numeric = |v: StatValue<'_>| {
            matches!(
                v,
                StatValue::Int(_) | StatValue::Uint(_) | StatValue::Double(_)
            )
        };
        let stat = e
            .stat("counter_value")
            .filter(|s| numeric(s.value))
            .or_else(|| e.stats().find(|s| numeric(s.value)));
        let Some(stat) = stat else {
            return Ok(());
        };
        self.sep()?;
        write!(self.out, r#"{{"ph":"C","pid":{pid},"ts":"#)?;
        write_us(&mut self.out, start)?;
        self.out.write_all(br#","name":"#)?;
        json_str(&mut self.out, e.display_name())?;
        self.out.write_all(br#","args":{"value":"#)?;
        write_stat(&mut self.out, &stat)?;
        self.out.write_all(b"}}")?;
        self.summary.counters += 1;
        Ok(())
    }

    fn complete(&mut self, pid: u32, tid: u32, start: i128, e: &Event<'_>) -> io::Result<()> {
        let meta = e.metadata();
        let full = meta.map_or("", |m| m.name());
        let display = meta.map_or("", |m| m.display_name());
        let mut name = if display.is_empty() { full } else { display };
        // (key, stat); `None` is `long_name`, the full name of a displayed-name event.
        let mut args: Vec<(&str, Option<Stat<'_>>)> = Vec::new();
        if !display.is_empty() {
            args.push(("long_name", None));
        }
        let mut flow = None;
        for s in meta.into_iter().flat_map(|m| m.stats()).chain(e.stats()) {
            if matches!(s.value, StatValue::None) {
                continue;
            }
            let key = s.name();
            match key {
                "step_name" => name = s.str().unwrap_or(name),
                "flow" => flow = s.uint().and_then(flow_of),
                _ => {}
            }
            // The event's own stat overrides its metadata's of the same name.
            match args.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = Some(s),
                None => args.push((key, Some(s))),
            }
        }
        args.sort_by(|a, b| a.0.cmp(b.0));
        self.sep()?;
        write!(self.out, r#"{{"ph":"X","pid":{pid},"tid":{tid},"ts":"#)?;
        write_us(&mut self.out, start)?;
        self.out.write_all(br#","dur":"#)?;
        write_us(&mut self.out, e.duration_ps().max(1) as i128)?;
        self.out.write_all(br#","name":"#)?;
        json_str(&mut self.out, name)?;
        if !args.is_empty() {
            self.out.write_all(br#","args":{"#)?;
            for (i, (k, s)) in args.iter().enumerate() {
                if i > 0 {
                    self.out.write_all(b",")?;
                }
                json_str(&mut self.out, k)?;
                self.out.write_all(b":")?;
                match s {
                    None => json_str(&mut self.out, full)?,
                    Some(s) => write_stat(&mut self.out, s)?,
                }
            }
            self.out.write_all(b"}")?;
        }
        self.out.write_all(b"}")?;
        self.summary.events += 1;
        if let Some((ph, id)) = flow {
            self.sep()?;
            write!(self.out, r#"{{"ph":"{ph}","pid":{pid},"tid":{tid},"ts":"#)?;
            write_us(&mut self.out, start)?;
            write!(self.out, r#","name":"flow","cat":"flow","id":"0x{id:x}""#)?;
            if ph != "s" {
                self.out.write_all(br#","bp":"e""#)?;
            }
            self.out.write_all(b"}")?;
            self.summary.flows += 1;
        }
        Ok(())
    }

    /// Close the JSON and return the output and what was written.
    pub fn finish(mut self) -> Result<(W, Summary), TraceError> {
        self.out.write_all(b"]}\n")?;
        self.out.flush()?;
        Ok((self.out, self.summary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use xprof_testkit::XSpaceBuilder;

    fn export(b: &XSpaceBuilder, filter: &Filter) -> (Value, Summary) {
        let space = XSpace::from_bytes(b.to_bytes()).unwrap();
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        w.add_host(&space, None, 0, filter).unwrap();
        let (bytes, summary) = w.finish().unwrap();
        (serde_json::from_slice(&bytes).unwrap(), summary)
    }

    fn events<'a>(v: &'a Value, ph: &str) -> Vec<&'a Value> {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == ph)
            .collect()
    }

    /// (pid, process_name) of every process, in trace order.
    fn process_names(v: &Value) -> Vec<(u64, &str)> {
        events(v, "M")
            .iter()
            .filter(|m| m["name"] == "process_name")
            .map(|m| {
                (
                    m["pid"].as_u64().unwrap(),
                    m["args"]["name"].as_str().unwrap(),
                )
            })
            .collect()
    }

    fn gpu_capture() -> XSpaceBuilder {
        XSpaceBuilder::new()
            .plane("/host:CPU", |p| {
                p.line_with_id(77, "python", |l| {
                    l.timestamp_ns(1_000)
                        .event("train", 0, 5_000_000)
                        .stat("step_name", "step 3")
                        .event("launch", 2_500, 0)
                        .stat("flow", (42u64 << 2) | 2)
                        .stat("run_id", u64::MAX)
                })
            })
            .plane("/device:GPU:0", |p| {
                p.id(3)
                    .line("Stream #1", |l| {
                        l.event("fusion.1", 1_000_000, 250)
                            .display_name("fusion.1")
                            .metadata_stat("flops", 10.5)
                            .stat("flow", (42u64 << 2) | 1)
                    })
                    .line_with_id(i64::MAX, "_counters_", |l| {
                        l.event("HBM bytes", 2_000_000, 0)
                            .stat("counter_value", 7u64)
                    })
            })
            .plane("/host:metadata", |p| p)
    }

    #[test]
    fn planes_are_processes_and_lines_threads_with_jaxs_ids() {
        let (v, s) = export(&gpu_capture(), &Filter::default());
        let meta = events(&v, "M");
        let names = process_names(&v);
        // The host plane is 701, a device plane 1 + its id; an empty plane is no process.
        assert_eq!(names, vec![(701, "/host:CPU"), (4, "/device:GPU:0")]);
        let thread = meta
            .iter()
            .find(|m| m["name"] == "thread_name" && m["args"]["name"] == "python")
            .unwrap();
        assert_eq!(thread["tid"], 77);
        // `_counters_` (id i64::MAX) keeps its 32-bit tid.
        assert!(meta.iter().any(|m| m["tid"] == u32::MAX as u64));
        assert_eq!((s.processes, s.threads), (2, 3));
    }

    #[test]
    fn events_are_complete_events_in_microseconds_with_stats_as_args() {
        let (v, s) = export(&gpu_capture(), &Filter::default());
        let x = events(&v, "X");
        assert_eq!(s.events, 3);
        assert_eq!(x.len(), 3);
        let train = x.iter().find(|e| e["tid"] == 77 && e["dur"] == 5).unwrap();
        // The step_name stat names the event, as in JAX's file; ts = 1000 ns = 1 µs.
        assert_eq!(train["name"], "step 3");
        assert_eq!(train["ts"], 1);
        let launch = x.iter().find(|e| e["name"] == "launch").unwrap();
        // 1 µs + 2500 ps; a zero duration is written as 1 ps.
        assert_eq!(launch["ts"].as_f64().unwrap(), 1.0025);
        assert_eq!(launch["dur"].as_f64().unwrap(), 0.000001);
        // A 64-bit value that a double cannot hold is a string.
        assert_eq!(launch["args"]["run_id"], u64::MAX.to_string());
        let fusion = x.iter().find(|e| e["name"] == "fusion.1").unwrap();
        assert_eq!(fusion["pid"], 4);
        assert_eq!(fusion["args"]["flops"], 10.5);
        assert_eq!(fusion["args"]["long_name"], "fusion.1");
    }

    #[test]
    fn counters_are_counter_events_and_flows_flow_events() {
        let (v, s) = export(&gpu_capture(), &Filter::default());
        let c = events(&v, "C");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0]["name"], "HBM bytes");
        assert_eq!(c[0]["args"]["value"], 7);
        assert_eq!(c[0]["pid"], 4);
        let (start, end) = (events(&v, "s"), events(&v, "f"));
        assert_eq!((start.len(), end.len()), (1, 1));
        assert_eq!(start[0]["id"], end[0]["id"]);
        assert_eq!(start[0]["id"], "0x2a");
        assert_eq!(end[0]["bp"], "e");
        assert_eq!((s.counters, s.flows), (1, 2));
    }

    #[test]
    fn the_window_keeps_events_that_overlap_it_and_the_line_regex_whole_lines() {
        let f = Filter {
            start_us: Some(2.0),
            end_us: Some(3.0),
            ..Filter::default()
        };
        let (v, _) = export(&gpu_capture(), &f);
        let mut names: Vec<&str> = events(&v, "X")
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        names.sort();
        // train (1–6 µs) overlaps; launch (1.0025 µs) and fusion.1 (1 µs) do not.
        assert_eq!(names, vec!["step 3"]);
        let f = Filter {
            line_regex: Some(Regex::new("^Stream").unwrap()),
            ..Filter::default()
        };
        let (v, s) = export(&gpu_capture(), &f);
        assert_eq!(s.threads, 1);
        assert!(events(&v, "X").iter().all(|e| e["name"] == "fusion.1"));
        assert!(events(&v, "C").is_empty());
    }

    #[test]
    fn several_hosts_get_their_own_process_ids_and_names() {
        let space = XSpace::from_bytes(gpu_capture().to_bytes()).unwrap();
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        w.add_host(&space, Some("a"), 0, &Filter::default())
            .unwrap();
        w.add_host(&space, Some("b"), 1, &Filter::default())
            .unwrap();
        let (bytes, s) = w.finish().unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let names = process_names(&v);
        assert_eq!(
            names,
            vec![
                (701, "a: /host:CPU"),
                (4, "a: /device:GPU:0"),
                (10_701, "b: /host:CPU"),
                (10_004, "b: /device:GPU:0")
            ]
        );
        assert_eq!(s.events, 6);
    }

    #[test]
    fn microseconds_are_exact_decimals_of_picoseconds() {
        let us = |ps: i128| {
            let mut b = Vec::new();
            write_us(&mut b, ps).unwrap();
            String::from_utf8(b).unwrap()
        };
        assert_eq!(us(0), "0");
        assert_eq!(us(1), "0.000001");
        assert_eq!(us(12_000_000), "12");
        assert_eq!(us(-1_500_000), "-1.5");
        // An epoch timestamp in ps does not fit an i64; the export does not saturate.
        assert_eq!(us(1_733_000_000_000_000_000_123), "1733000000000000.000123");
    }
}
