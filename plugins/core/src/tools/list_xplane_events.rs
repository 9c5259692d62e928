use regex::Regex;
use serde_json::{Map, Value, json};
use xprof_opstats::events::EventQuery;
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};
use xprof_xspace::XSpace;

use crate::common::{load_error, selected_hosts, session, with_capture};

pub struct ListXplaneEvents;
register_tool!(ListXplaneEvents);

/// Filters shared by the event tools.
pub struct EventFilter {
    pub plane: Regex,
    pub line: Regex,
    pub event: Regex,
    pub start_ps: Option<i64>,
    pub end_ps: Option<i64>,
    pub min_dur: Option<i64>,
    pub max_dur: Option<i64>,
    /// Window test: the event lies inside the window (`containment`) or touches it (`overlap`).
    pub overlap: bool,
}

fn regex_arg(call: &Call, name: &str) -> Result<Regex, ToolError> {
    let s = call.str_or(name, ".*")?;
    Regex::new(&s).map_err(|e| {
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

/// The single host an event tool reads (named, else the first) and its decoded XSpace.
pub fn one_host(call: &mut Call) -> Result<(xprof_capture::Session, usize, XSpace), ToolError> {
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
    let space =
        XSpace::open(&path).map_err(|e| load_error(xprof_opstats::load::LoadError::from(e)))?;
    Ok((s, idx, space))
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
         (ps on the capture's clock: line timestamp + offset) and durations; paged with \
         --offset/--max_events. Names are the metadata display name, else the name."
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
    }
    fn output(&self) -> &'static str {
        "{capture, run, events: [{plane, line, line_id, event, offset_ps, start_ps, duration_ps}], total_matched, truncated}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![Example::new(
            "XLA ops of the shared TPU capture",
            json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "plane_regex": "TPU", "line_regex": "^XLA Ops$", "max_events": 5}),
        )
        .expect(&["events", "total_matched"])]
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
        let (s, idx, space) = one_host(call)?;
        let (matched, hits) = filter.with_query(|q| q.page(&space, skip, max));
        let events: Vec<Value> = hits
            .iter()
            .map(|h| {
                json!({
                    "plane": h.plane, "line": h.line, "line_id": h.line_id.to_string(),
                    "event": h.name, "offset_ps": h.offset_ps, "start_ps": h.start_ps,
                    "duration_ps": h.duration_ps,
                })
            })
            .collect();
        let mut body = Map::new();
        let n = events.len();
        body.insert("events".into(), Value::Array(events));
        body.insert("total_matched".into(), json!(matched));
        body.insert("returned".into(), json!(n));
        body.insert("truncated".into(), json!(skip + n < matched));
        Ok(with_capture(&s, &[&s.hosts[idx]], &[], body).into())
    }
}
