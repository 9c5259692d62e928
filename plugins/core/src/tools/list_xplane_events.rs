use regex::Regex;
use serde::Serialize;
use serde_json::json;
use xprof_opstats::events::EventQuery;
use xprof_opstats::filter::{Filter, Matcher};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};
use xprof_xspace::XSpace;

use crate::common::{CaptureHeader, id_string, load_error, selected_hosts, session};

pub struct ListXplaneEvents;
register_tool!(ListXplaneEvents);

/// A name filter: an unanchored regex, or none when the argument matches every name.
pub struct NameRegex(Option<Regex>);

impl NameRegex {
    pub fn is_match(&self, s: &str) -> bool {
        self.0.as_ref().is_none_or(|re| re.is_match(s))
    }
}

/// Filters shared by the event tools.
pub struct EventFilter {
    pub plane: NameRegex,
    pub line: NameRegex,
    pub event: NameRegex,
    pub start_ps: Option<i64>,
    pub end_ps: Option<i64>,
    pub min_dur: Option<i64>,
    pub max_dur: Option<i64>,
    /// Window test: the event lies inside the window (`containment`) or touches it (`overlap`).
    pub overlap: bool,
    /// The `filter` expression (XProf CLI syntax, `xprof_opstats::filter`), when not blank.
    pub expr: Option<Filter>,
}

/// The `filter` example shown in its errors' hint (and checked against the parameter doc).
pub const FILTER_EXAMPLE: &str = "duration_us > 1 and (event =~ \"fusion\" or line == \"XLA Ops\")";

/// The `filter` argument, parsed once (regexes compiled once) for the whole scan.
fn filter_arg(call: &Call) -> Result<Option<Filter>, ToolError> {
    let Some(expr) = call.opt_str("filter")? else {
        return Ok(None);
    };
    let regex = |p: &str| -> Result<Matcher, String> {
        let re = Regex::new(p).map_err(|e| e.to_string())?;
        Ok(Box::new(move |s: &str| re.is_match(s)))
    };
    let f = Filter::parse(&expr, &regex).map_err(|e| {
        ToolError::invalid(format!("argument `filter` is not a valid expression: {e}")).with_hint(
            format!(
                "e.g. --filter '{FILTER_EXAMPLE}'. Tests are FIELD OP VALUE joined by and/or/not \
                 and parentheses; fields: plane, line, line_id, event (==, !=, contains, =~, !~) \
                 and duration_ps/ns/us/ms, offset_ps (= start_ps, absolute), end_ps (==, !=, <, \
                 <=, >, >=; values may carry a unit: 1.5us); quote values with spaces"
            ),
        )
    })?;
    Ok((!f.is_trivial()).then_some(f))
}

fn regex_arg(call: &Call, name: &str) -> Result<NameRegex, ToolError> {
    let s = call.str_or(name, ".*")?;
    // The default (and the empty pattern) match every name: not compiling them saves a
    // regex build per filter (a fifth of a small call's instructions for three of them).
    if s.is_empty() || s == ".*" {
        return Ok(NameRegex(None));
    }
    Regex::new(&s).map(|re| NameRegex(Some(re))).map_err(|e| {
        ToolError::invalid(format!("argument `{name}` is not a valid regex: {e}")).with_hint(
            format!("pass --{name} with a Rust/RE2-style regular expression, e.g. 'XLA Ops'"),
        )
    })
}

impl EventFilter {
    pub fn params(p: Params) -> Params {
        p.string_default("plane_regex", "Regex (unanchored) on plane names.", ".*")
            .string_default("line_regex", "Regex (unanchored) on line names.", ".*")
            .string_default("event_regex", "Regex (unanchored) on event names.", ".*")
            .integer("start_time_ps", "Keep events starting at or after this absolute time (ps, line timestamp + offset).", None)
            .integer("end_time_ps", "Keep events ending at or before this absolute time (ps).", None)
            .integer_min("min_duration_ps", "Keep events at least this long.", None, 0)
            .integer_min("max_duration_ps", "Keep events at most this long.", None, 0)
            .string_enum(
                "window_semantics",
                "How events relate to the time window: inside it (containment) or intersecting it (overlap).",
                &["containment", "overlap"],
                "containment",
            )
            .string(
                "filter",
                "Boolean expression over each event (XProf CLI syntax), e.g. \
                 `duration_us > 1 and (event =~ \"fusion\" or line == \"XLA Ops\")`. \
                 Tests: plane, line, line_id (line name or id), event with ==, !=, contains, \
                 =~ (regex search), !~; duration_ps/duration_ns/duration_us/duration_ms, \
                 offset_ps or start_ps (absolute start), end_ps with ==, !=, <, <=, >, >= \
                 (numbers in the field's unit, or with a unit suffix: `end_ps <= 1.5ms`). \
                 Combine with and/&&, or/||, not/!, parentheses; quote values with spaces.",
            )
    }
    pub fn from_call(call: &Call) -> Result<Self, ToolError> {
        let f = EventFilter {
            plane: regex_arg(call, "plane_regex")?,
            line: regex_arg(call, "line_regex")?,
            event: regex_arg(call, "event_regex")?,
            start_ps: call.opt_i64("start_time_ps")?,
            end_ps: call.opt_i64("end_time_ps")?,
            min_dur: call.opt_i64("min_duration_ps")?,
            max_dur: call.opt_i64("max_duration_ps")?,
            overlap: call.str_or("window_semantics", "containment")? == "overlap",
            expr: filter_arg(call)?,
        };
        if let (Some(s), Some(e)) = (f.start_ps, f.end_ps)
            && e < s
        {
            return Err(ToolError::invalid(format!(
                "end_time_ps ({e}) is before start_time_ps ({s})"
            ))
            .with_hint("pass an end_time_ps >= start_time_ps"));
        }
        Ok(f)
    }

    /// The scan these filters describe (see `xprof_opstats::events`).
    pub fn query<'f>(
        &'f self,
        plane: &'f (dyn Fn(&str) -> bool + Sync),
        line: &'f (dyn Fn(&str) -> bool + Sync),
        event: &'f (dyn Fn(&str) -> bool + Sync),
    ) -> EventQuery<'f> {
        EventQuery {
            plane,
            line,
            event,
            start_ps: self.start_ps,
            end_ps: self.end_ps,
            min_duration_ps: self.min_dur,
            max_duration_ps: self.max_dur,
            overlap: self.overlap,
            filter: self.expr.as_ref(),
        }
    }

    /// Run `f` with the scan these filters describe.
    pub fn with_query<T>(&self, f: impl FnOnce(&EventQuery<'_>) -> T) -> T {
        let (p, l, e) = (
            |s: &str| self.plane.is_match(s),
            |s: &str| self.line.is_match(s),
            |s: &str| self.event.is_match(s),
        );
        f(&self.query(&p, &l, &e))
    }
}

/// What the reader dropped (a plane corrupt inside intact framing): the capture's warnings,
/// so a partial answer never passes for a complete one.
pub fn reader_warnings(space: &XSpace) -> Vec<String> {
    if space.is_complete() {
        Vec::new()
    } else {
        space.diagnostics().to_vec()
    }
}

/// The single host an event tool reads (named, else the first) and its decoded XSpace.
pub fn one_host(call: &mut Call) -> Result<(xprof_capture::Session, usize, XSpace), ToolError> {
    let (s, idx, path) = one_host_path(call)?;
    let space =
        XSpace::open(&path).map_err(|e| load_error(xprof_opstats::load::LoadError::from(e)))?;
    Ok((s, idx, space))
}

/// The single host an event tool reads (named, else the first) and its capture file, recorded
/// as an input of the call; the caller opens it.
pub fn one_host_path(
    call: &mut Call,
) -> Result<(xprof_capture::Session, usize, std::path::PathBuf), ToolError> {
    let s = session(call)?;
    let idx = {
        let hosts = selected_hosts(call, &s)?;
        s.hosts
            .iter()
            .position(|h| h.name == hosts[0].name)
            .unwrap_or(0)
    };
    let path = s.hosts[idx].path.clone();
    call.read_file(&path);
    Ok((s, idx, path))
}

impl Tool for ListXplaneEvents {
    fn name(&self) -> &'static str {
        "list_xplane_events"
    }
    fn summary(&self) -> &'static str {
        "List raw trace events with regex, time-window and duration filters"
    }
    fn doc(&self) -> &'static str {
        "Raw XSpace events of one host (--host, default the first), in plane/line/event order, \
         filtered by regexes on plane, line and event names (unanchored), an absolute time window \
         (ps on the capture's clock: line timestamp + offset), durations and a boolean --filter \
         expression in XProf's CLI syntax (e.g. `duration_us > 1 and event =~ \"fusion\"`); \
         paged with --offset/--max_events. Names are the metadata display name, else the name."
    }
    fn params(&self) -> Params {
        EventFilter::params(Params::new().capture().host())
            .integer_min(
                "max_events",
                "Maximum events returned (-1 = all).",
                Some(100),
                -1,
            )
            .integer_min(
                "offset",
                "Skip this many matching events first.",
                Some(0),
                0,
            )
            .boolean(
                "with_stats",
                "Add each event's stats (its own, then its metadata's not overridden: what XProf's \
                 trace viewer shows as args), by stat name. Integers beyond ±2^53 are strings; \
                 bytes values are summarised by their length.",
                false,
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, events: [{plane, line, line_id, event, offset_ps, start_ps, duration_ps, stats?: {name: value}}], total_matched, truncated}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "XLA ops of the shared TPU capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "plane_regex": "TPU", "line_regex": "^XLA Ops$", "max_events": 5}),
            )
            .expect(&["events", "total_matched"]),
            Example::new(
                "TPU matmul kernels longer than 75 µs, with a filter expression",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "filter": "plane =~ TPU and line == \"XLA Ops\" and event contains matmul and duration_us > 75", "max_events": 3}),
            )
            .expect(&["events", "total_matched"]),
            Example::new(
                "The XLA ops a CPU run executed, with their stats (hlo_op, hlo_module, program_id …)",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul", "filter": "event =~ fusion", "with_stats": true, "max_events": 3}),
            )
            .expect(&["events", "total_matched"]),
            Example::new(
                "Python frames over 100 µs that started after the first millisecond",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps", "filter": "line == python and duration_us > 100 and start_ps >= 1ms"}),
            )
            .expect(&["events", "total_matched"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let filter = EventFilter::from_call(call)?;
        let max = match call.i64_or("max_events", 100)? {
            -1 => usize::MAX,
            n if n < 0 => {
                return Err(ToolError::invalid(format!(
                    "argument `max_events` must be >= -1, got {n}"
                ))
                .with_hint("pass --max_events N, or -1 for all events"));
            }
            n => n as usize,
        };
        let skip = call.usize_or("offset", 0)?;
        let with_stats = call.bool_or("with_stats", false)?;
        let (s, idx, path) = one_host_path(call)?;
        // Matches counted while the capture is validated; only the runs holding the page are
        // read again.
        let (space, counts) = filter
            .with_query(|q| q.open_counted(&path, &Default::default()))
            .map_err(|e| load_error(xprof_opstats::load::LoadError::from(e)))?;
        let (matched, hits) = filter.with_query(|q| q.page_counted(&space, counts, skip, max));
        let n = hits.len();
        ToolOutput::serialize(&EventPage {
            header: CaptureHeader::new(&s, &[&s.hosts[idx]], &reader_warnings(&space)),
            events: hits
                .iter()
                .map(|h| EventRow {
                    plane: h.plane,
                    line: h.line,
                    line_id: h.line_id,
                    event: h.name,
                    offset_ps: h.offset_ps,
                    start_ps: h.start_ps,
                    duration_ps: h.duration_ps,
                    stats: with_stats.then(|| event_stats(&h.event)),
                })
                .collect(),
            total_matched: matched,
            returned: n,
            truncated: skip + n < matched,
        })
    }
}

/// A page of events (serialised straight from these types: see `ToolOutput::serialize`).
#[derive(Serialize)]
struct EventPage<'a> {
    #[serde(flatten)]
    header: CaptureHeader,
    events: Vec<EventRow<'a>>,
    total_matched: usize,
    returned: usize,
    truncated: bool,
}

#[derive(Serialize)]
struct EventRow<'a> {
    plane: &'a str,
    line: &'a str,
    #[serde(serialize_with = "id_string")]
    line_id: i64,
    event: &'a str,
    offset_ps: i64,
    start_ps: i64,
    duration_ps: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    stats: Option<serde_json::Map<String, serde_json::Value>>,
}

/// An event's stats by name, as XProf's event visitor sees them: its own first (the first of
/// a repeated name wins), then its metadata's under names the event does not carry.
fn event_stats(e: &xprof_xspace::Event<'_>) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    let own = e.stats();
    let shared = e.metadata().into_iter().flat_map(|m| m.stats());
    for st in own.chain(shared) {
        let name = st.name();
        if name.is_empty() || out.contains_key(name) {
            continue;
        }
        out.insert(name.to_string(), stat_json(&st));
    }
    out
}

/// One stat's value in JSON: integers that a double cannot hold exactly as strings (64-bit
/// ids, hashes), `ref_value`s resolved, bytes (serialized protos) as their length.
fn stat_json(st: &xprof_xspace::Stat<'_>) -> serde_json::Value {
    use serde_json::Value;
    use xprof_xspace::StatValue as V;
    const EXACT: u64 = 1 << 53;
    match st.value {
        V::Int(i) if i.unsigned_abs() <= EXACT => Value::from(i),
        V::Int(i) => Value::from(i.to_string()),
        V::Uint(u) if u <= EXACT => Value::from(u),
        V::Uint(u) => Value::from(u.to_string()),
        V::Double(d) => serde_json::Number::from_f64(d).map_or(Value::Null, Value::Number),
        V::Bytes(b) | V::CompressedStr(b) => json!({"bytes": b.len()}),
        V::Str(_) | V::Ref(_) => st.str().map_or(Value::Null, Value::from),
        V::None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};
    use xprof_plugin_api::{ErrorKind, ToolError};

    use super::FILTER_EXAMPLE;

    const KRATE: &str = env!("CARGO_CRATE_NAME");

    fn call(tool: &str, args: Value) -> Result<Value, ToolError> {
        invoke_json(KRATE, tool, &args.to_string(), "{}").map(|env| env["result"].clone())
    }

    fn matched(tool: &str, args: Value) -> u64 {
        let r = call(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
        r["total_matched"].as_u64().unwrap()
    }

    /// Regression: the event tools answered from a capture whose corrupt plane the reader had
    /// dropped without saying so (the op views did warn).
    #[test]
    fn event_tools_warn_when_a_corrupt_plane_is_dropped() {
        use xprof_testkit::XSpaceBuilder;
        let mut bytes = XSpaceBuilder::new()
            .plane("/device:TPU:0", |p| {
                p.line("XLA Ops", |l| {
                    l.event("fusion.1", 0, 10).event("copy.2", 20, 5)
                })
            })
            .plane("/host:CPU", |p| {
                p.line("python", |l| l.event("main", 0, 100))
            })
            .to_bytes();
        // Break the first event of the TPU plane inside its intact framing: an invalid tag.
        let at = bytes
            .windows(b"XLA Ops".len())
            .position(|w| w == b"XLA Ops")
            .unwrap();
        let ev = at + bytes[at..].iter().position(|&b| b == 0x22).unwrap();
        bytes[ev + 2] = 0x07;
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("plugins/profile/r1");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("host0.xplane.pb"), &bytes).unwrap();
        for tool in ["list_xplane_events", "aggregate_xplane_events"] {
            let r = call(tool, json!({"path": run.display().to_string()})).unwrap();
            let w = r["capture"]["warnings"].to_string();
            assert!(
                w.contains("plane skipped") && w.contains("/device:TPU:0"),
                "{tool}: {w}"
            );
            // The host plane was still read.
            assert!(r.to_string().contains("main"), "{tool}: {r}");
        }
    }

    /// `with_stats` adds each event's stats as XProf's visitor merges them; without it the
    /// rows are unchanged.
    #[test]
    fn with_stats_gives_every_stat_by_name_and_64_bit_integers_as_strings() {
        use xprof_testkit::{Ref, XSpaceBuilder};
        let dir = tempfile::tempdir().unwrap();
        XSpaceBuilder::new()
            .plane("/host:CPU", |p| {
                p.line("worker", |l| {
                    l.event("op", 0, 10)
                        .stat("_p", u64::MAX - 1)
                        .stat("run_id", -5i64)
                        .stat("big", i64::MIN)
                        .stat("kind", Ref("fused"))
                        .stat("ratio", 0.5)
                        .stat("proto", vec![1u8, 2, 3])
                        .stat("hlo_category", "event's own")
                        .metadata_stat("hlo_category", "metadata's")
                        .metadata_stat("flops", 1000u64)
                })
            })
            .write_run(dir.path(), "r", "host0")
            .unwrap();
        let path = dir.path().display().to_string();
        let r = call(
            "list_xplane_events",
            json!({"path": path, "with_stats": true}),
        )
        .unwrap();
        assert_eq!(
            r["events"][0]["stats"],
            json!({
                "_p": (u64::MAX - 1).to_string(),
                "run_id": -5,
                "big": i64::MIN.to_string(),
                "kind": "fused",
                "ratio": 0.5,
                "proto": {"bytes": 3},
                "hlo_category": "event's own",
                "flops": 1000,
            })
        );
        let plain = call("list_xplane_events", json!({"path": path})).unwrap();
        assert!(plain["events"][0].get("stats").is_none(), "{plain}");
    }

    /// The repository's own JAX CPU capture (always present).
    fn mlp_steps() -> String {
        testing::workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/jax-cpu/logdir/plugins/profile/mlp_steps")
            .display()
            .to_string()
    }

    /// The shared corpus's seed TPU capture.
    fn seed() -> Option<String> {
        testing::corpus(env!("CARGO_MANIFEST_DIR")).map(|c| {
            c.join("fixtures/seed-v6e/logdir/plugins/profile/testrun")
                .display()
                .to_string()
        })
    }

    /// `total_matched` of XProf's official CLI (PyPI `xprof` 2.24.2), observed with
    ///   xprof list_xplane_events <copy of the run dir> --max_events=0 --filter='<expr>'
    /// on a copy in /tmp (the official CLI writes into run directories).
    const MLP_STEPS_GOLDEN: &[(&str, u64)] = &[
        (
            "line == python and offset_ps >= 10us and duration < 2us",
            161,
        ),
        (
            "line_name !~ \"^tf_\" and duration_ns > 1000 or event contains dot",
            122,
        ),
        (
            "event contains \"jit\" or (line_id == python and duration_ms > 0.05)",
            36,
        ),
        ("!(duration_ps = 0)", 567),
        // The documented example.
        (
            "line == python and duration_us > 100 and start_ps >= 1ms",
            9,
        ),
        ("", 596),
    ];
    /// As above, on `seed-v6e/logdir/plugins/profile/testrun` (the shared corpus).
    const SEED_GOLDEN: &[(&str, u64)] = &[
        ("duration_us > 1", 405),
        (
            "plane == \"/device:TPU:0\" and (event =~ \"matmul\" or event contains Copy) and not duration_ns < 500",
            6,
        ),
        ("NOT plane =~ TPU AND end_ps <= 81.5ms", 4),
        (
            "plane =~ TPU and start_ps >= 81.5ms and line != \"XLA Ops\"",
            1694,
        ),
        (
            "line = \"XLA Ops\" && duration_us >= 75.6 || event ~ \"^jit_\"",
            5,
        ),
        // The documented example.
        (
            "plane =~ TPU and line == \"XLA Ops\" and event contains matmul and duration_us > 75",
            3,
        ),
        ("", 4208),
    ];

    #[test]
    fn filter_matches_the_official_cli_on_the_jax_cpu_capture() {
        for &(expr, want) in MLP_STEPS_GOLDEN {
            let args = json!({"path": mlp_steps(), "filter": expr, "max_events": 0});
            assert_eq!(matched("list_xplane_events", args), want, "{expr}");
        }
    }

    #[test]
    fn filter_matches_the_official_cli_on_the_seed_capture() {
        let Some(seed) = seed() else { return };
        for &(expr, want) in SEED_GOLDEN {
            let args = json!({"path": seed, "filter": expr, "max_events": 0});
            assert_eq!(matched("list_xplane_events", args), want, "{expr}");
        }
    }

    /// The official CLI's first page of `--max_events=5 --offset=2 --filter='duration_us > 1'`
    /// (oracle `list_xplane_events.filter_paged.json`): same events, same order.
    #[test]
    fn filter_pages_like_the_official_cli() {
        let Some(seed) = seed() else { return };
        let r = call(
            "list_xplane_events",
            json!({"path": seed, "filter": "duration_us > 1", "max_events": 5, "offset": 2}),
        )
        .unwrap();
        let got: Vec<(i64, i64)> = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["start_ps"].as_i64().unwrap(),
                    e["duration_ps"].as_i64().unwrap(),
                )
            })
            .collect();
        let oracle = testing::corpus(env!("CARGO_MANIFEST_DIR"))
            .unwrap()
            .join("oracle/official-cli-2.24.2/seed-v6e/list_xplane_events.filter_paged.json");
        let want: Value = serde_json::from_str(&std::fs::read_to_string(oracle).unwrap()).unwrap();
        let want: Vec<(i64, i64)> = want["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["offset_ps"].as_i64().unwrap(),
                    e["duration_ps"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            (r["total_matched"].as_u64(), r["returned"].as_u64()),
            (Some(405), Some(5))
        );
        assert_eq!(r["truncated"], true);
    }

    #[test]
    fn aggregate_filter_and_events_scanned_match_the_official_cli() {
        // `xprof aggregate_xplane_events <mlp_steps> --group_by=event,line
        //  --filter='duration_us > 1 and not line == python'`: 49 groups, events_scanned 596.
        let r = call(
            "aggregate_xplane_events",
            json!({"path": mlp_steps(), "filter": "duration_us > 1 and not line == python", "group_by": "event,line", "top_n": 1000}),
        )
        .unwrap();
        assert_eq!(
            (
                r["total_event_types"].as_u64(),
                r["events_scanned"].as_u64()
            ),
            (Some(49), Some(596))
        );
        let Some(seed) = seed() else { return };
        // `xprof aggregate_xplane_events <run> --filter='duration_us > 1'`: 45 groups,
        // events_scanned 4208; `--plane_regex=TPU`: 32 groups, events_scanned 2548.
        for (args, groups, scanned) in [
            (
                json!({"path": seed, "filter": "duration_us > 1", "top_n": 1000}),
                45,
                4208,
            ),
            (
                json!({"path": seed, "plane_regex": "TPU", "top_n": 1000}),
                32,
                2548,
            ),
        ] {
            let r = call("aggregate_xplane_events", args.clone()).unwrap();
            assert_eq!(r["total_event_types"], groups, "{args}");
            assert_eq!(r["events_scanned"], scanned, "{args}");
        }
        // The matched events of the filter are the list tool's.
        let r = call(
            "aggregate_xplane_events",
            json!({"path": seed, "filter": "duration_us > 1"}),
        )
        .unwrap();
        assert_eq!(r["total_matched"], 405);
    }

    #[test]
    fn filter_combines_with_the_other_filters() {
        let all = matched(
            "list_xplane_events",
            json!({"path": mlp_steps(), "filter": "line == python and duration_us > 10", "max_events": 0}),
        );
        let split = matched(
            "list_xplane_events",
            json!({"path": mlp_steps(), "line_regex": "^python$", "min_duration_ps": 10_000_001, "max_events": 0}),
        );
        assert_eq!(all, split);
        assert!(all > 0);
        let narrowed = matched(
            "list_xplane_events",
            json!({"path": mlp_steps(), "line_regex": "^python$", "filter": "duration_us > 10", "event_regex": "^\\$", "max_events": 0}),
        );
        assert!(narrowed > 0 && narrowed < all, "{narrowed} {all}");
        // A blank filter is no filter.
        assert_eq!(
            matched(
                "list_xplane_events",
                json!({"path": mlp_steps(), "filter": "  ", "max_events": 0})
            ),
            596
        );
    }

    #[test]
    fn bad_filters_are_invalid_values_pointing_at_the_position() {
        for (tool, expr, column) in [
            ("list_xplane_events", "duration_us 1", 13),
            ("list_xplane_events", "dur > 1", 1),
            ("list_xplane_events", "event =~ \"(\"", 10),
            ("aggregate_xplane_events", "(duration_us > 1", 1),
            ("aggregate_xplane_events", "duration_us > 1 us", 17),
        ] {
            let e = call(tool, json!({"path": mlp_steps(), "filter": expr})).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidValue, "{expr}");
            assert!(e.message.contains("`filter`"), "{}", e.message);
            assert!(
                e.message.contains(&format!("column {column}")),
                "{}",
                e.message
            );
            let hint = e.hint.unwrap();
            assert!(hint.contains(FILTER_EXAMPLE), "{hint}");
        }
    }

    #[test]
    fn the_filter_example_parses_and_is_documented() {
        let ok = |_: &str| -> Result<xprof_opstats::filter::Matcher, String> {
            Ok(Box::new(|_: &str| true))
        };
        assert!(xprof_opstats::filter::Filter::parse(FILTER_EXAMPLE, &ok).is_ok());
        use xprof_plugin_api::Tool;
        let schema = super::ListXplaneEvents.params().schema();
        let doc = schema["properties"]["filter"]["description"]
            .as_str()
            .unwrap();
        assert!(doc.contains(&format!("`{FILTER_EXAMPLE}`")), "{doc}");
    }
}
