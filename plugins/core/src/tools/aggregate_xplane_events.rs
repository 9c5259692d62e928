use serde::Serialize;
use serde_json::json;
use xprof_opstats::events::group_stats;
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::list_xplane_events::{EventFilter, one_host_path, reader_warnings};
use crate::common::CaptureHeader;
use crate::common::load_error;

pub struct AggregateXplaneEvents;
register_tool!(AggregateXplaneEvents);

/// `event,plane,line` → which keys group (at least one).
fn group_keys(spec: &str) -> Result<(bool, bool, bool), ToolError> {
    let (mut e, mut p, mut l) = (false, false, false);
    for k in spec.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        match k {
            "event" => e = true,
            "plane" => p = true,
            "line" => l = true,
            // The spelling of an earlier version of this tool.
            "event_plane_line" => (e, p, l) = (true, true, true),
            other => {
                return Err(
                    ToolError::invalid(format!("unknown group_by key `{other}`"))
                        .with_hint("use a comma-separated subset of: event, plane, line"),
                );
            }
        }
    }
    if !(e || p || l) {
        return Err(ToolError::invalid("group_by is empty")
            .with_hint("use a comma-separated subset of: event, plane, line"));
    }
    Ok((e, p, l))
}

impl Tool for AggregateXplaneEvents {
    fn name(&self) -> &'static str {
        "aggregate_xplane_events"
    }
    fn summary(&self) -> &'static str {
        "Aggregate raw trace events by name: count, total, mean, percentiles"
    }
    fn doc(&self) -> &'static str {
        "Groups the matching events of one host (same filters as list_xplane_events) by event \
         name (or any comma-separated subset of event, plane, line via --group_by) and reports count, \
         total/min/max duration (exact ps), mean, p50/p90/p99 and sample standard deviation, \
         sorted by total duration. Durations are the events' own (host clock). \
         events_scanned counts the events of the planes and lines kept by --plane_regex and \
         --line_regex, before the name, time and --filter tests (as XProf's CLI, without its \
         5 M cap)."
    }
    fn params(&self) -> Params {
        EventFilter::params(Params::new().capture().host())
            .string_default(
                "group_by",
                "Grouping keys, comma-separated: event, plane, line (e.g. `event,plane,line`).",
                "event",
            )
            .integer_min("top_n", "Groups returned.", Some(50), 1)
    }
    fn output(&self) -> &'static str {
        "{capture, run, total_event_types, total_matched, events_scanned, returned, truncated, shown, aggregates: [...], note?}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "matmul events on the TPU plane",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir", "plane_regex": "TPU", "event_regex": "matmul"}),
            )
            .expect(&["aggregates", "total_event_types"]),
            Example::new(
                "events over 1 µs outside the python thread, by event and line",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps", "filter": "duration_us > 1 and not line == python", "group_by": "event,line"}),
            )
            .expect(&["aggregates", "events_scanned"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let filter = EventFilter::from_call(call)?;
        let (by_event, by_plane, by_line) = group_keys(&call.str_or("group_by", "event")?)?;
        let top_n = call.usize_or("top_n", 50)?.max(1);
        let (s, idx, path) = one_host_path(call)?;
        // Grouped while the capture is validated: one pass over the events.
        let (space, per_run) = filter
            .with_query(|q| q.open_grouped(&path, &Default::default(), by_line))
            .map_err(|e| load_error(xprof_opstats::load::LoadError::from(e)))?;
        let (scanned, (matched, groups)) = filter.with_query(|q| {
            (
                q.events_scanned(&space),
                q.merge_groups(&space, per_run, by_event, by_plane, by_line),
            )
        });
        // Statistics (sorting every duration) only for the groups that can be shown: those
        // whose total reaches the top_n-th largest (ties included, so the order below, which
        // breaks ties on the rendered group, is the one computing all of them would give).
        let total = groups.len();
        let groups = if total > top_n {
            let totals: Vec<i64> = groups.iter().map(|g| g.total()).collect();
            let mut t = totals.clone();
            let (_, cut, _) = t.select_nth_unstable_by(top_n - 1, |a, b| b.cmp(a));
            let cut = *cut;
            groups
                .into_iter()
                .zip(totals)
                .filter(|(_, t)| *t >= cut)
                .map(|(g, _)| g)
                .collect()
        } else {
            groups
        };
        let mut aggs: Vec<Aggregate> = group_stats(groups)
            .into_iter()
            .map(|((name, plane, line), st)| Aggregate {
                event: by_event.then_some(name),
                plane: by_plane.then_some(plane),
                line: by_line.then_some(line),
                count: st.count,
                total_duration_ps: st.total,
                avg_duration_ps: st.mean,
                min_duration_ps: st.min,
                p50_duration_ps: st.p50,
                p90_duration_ps: st.p90,
                p99_duration_ps: st.p99,
                max_duration_ps: st.max,
                std_dev_ps: st.std_dev,
            })
            .collect();
        // Deterministic order: total desc, then the group's key (event, plane, line), which is
        // unique per group (every group has the same parts, so comparing the options compares
        // the key).
        aggs.sort_unstable_by(|a, b| {
            b.total_duration_ps
                .cmp(&a.total_duration_ps)
                .then_with(|| (a.event, a.plane, a.line).cmp(&(b.event, b.plane, b.line)))
        });
        aggs.truncate(top_n);
        let shown = total.min(top_n);
        ToolOutput::serialize(&Aggregates {
            header: CaptureHeader::new(&s, &[&s.hosts[idx]], &reader_warnings(&space)),
            total_event_types: total,
            total_matched: matched,
            events_scanned: scanned,
            returned: shown,
            truncated: total > top_n,
            shown,
            aggregates: aggs,
            note: (total > top_n).then(|| {
                format!(
                    "Truncated to top {top_n} by total duration. Use event_regex to filter or increase top_n."
                )
            }),
        })
    }
}

/// The result (serialised straight from these types: see `ToolOutput::serialize`).
#[derive(Serialize)]
struct Aggregates<'a> {
    #[serde(flatten)]
    header: CaptureHeader,
    total_event_types: usize,
    total_matched: usize,
    events_scanned: usize,
    returned: usize,
    truncated: bool,
    shown: usize,
    aggregates: Vec<Aggregate<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// One group: its key parts as `group_by` asks, then its duration statistics.
#[derive(Serialize)]
struct Aggregate<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plane: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<&'a str>,
    count: usize,
    total_duration_ps: i64,
    avg_duration_ps: f64,
    min_duration_ps: i64,
    p50_duration_ps: f64,
    p90_duration_ps: f64,
    p99_duration_ps: f64,
    max_duration_ps: i64,
    std_dev_ps: f64,
}
