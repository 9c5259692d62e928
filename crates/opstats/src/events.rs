//! Filtered scans of raw XSpace events (what `list_xplane_events` and `aggregate_xplane_events`
//! print), straight on the lazy reader and in parallel.
//!
//! Names and the name filter are resolved once per event metadata (an event's name is its
//! metadata's display name, else its name, else `Unknown` when the plane lacks the metadata),
//! so the per-event work is one table lookup and the time filters. Lines are scanned as the
//! runs the reader validated in parallel ([`xprof_xspace::Line::event_runs`]), on rayon.

use std::collections::HashMap;

use rayon::prelude::*;
use std::sync::{Arc, Mutex};

use xprof_xspace::{Event, EventScan, Events, Line, Plane, ReadOptions, XSpace};

use crate::filter::{Fields, Filter};

/// A name filter (a regex, in the tools).
pub type NameFilter<'f> = &'f (dyn Fn(&str) -> bool + Sync);

/// Which events a scan keeps.
pub struct EventQuery<'f> {
    pub plane: NameFilter<'f>,
    pub line: NameFilter<'f>,
    pub event: NameFilter<'f>,
    /// Absolute window (ps): events inside it, or touching it when `overlap`.
    pub start_ps: Option<i64>,
    pub end_ps: Option<i64>,
    pub min_duration_ps: Option<i64>,
    pub max_duration_ps: Option<i64>,
    pub overlap: bool,
    /// A `--filter` expression ([`crate::filter`]), tested after the name and time filters.
    pub filter: Option<&'f Filter>,
}

fn any_name(_: &str) -> bool {
    true
}

impl EventQuery<'static> {
    /// Keeps every event: no name, time, duration or expression filter. Narrow it with struct
    /// update syntax: `EventQuery { event: &f, ..EventQuery::everything() }`.
    pub fn everything() -> Self {
        EventQuery {
            plane: &any_name,
            line: &any_name,
            event: &any_name,
            start_ps: None,
            end_ps: None,
            min_duration_ps: None,
            max_duration_ps: None,
            overlap: false,
            filter: None,
        }
    }
}

/// One matching event.
#[derive(Clone, Copy, Debug)]
pub struct Hit<'a> {
    pub plane: &'a str,
    pub line: &'a str,
    pub line_id: i64,
    pub name: &'a str,
    pub offset_ps: i64,
    pub start_ps: i64,
    pub duration_ps: i64,
    /// The event itself, for its stats.
    pub event: xprof_xspace::Event<'a>,
}

/// Hits are equal when they describe the same event (an [`xprof_xspace::Event`] has no
/// equality of its own).
impl PartialEq for Hit<'_> {
    fn eq(&self, o: &Self) -> bool {
        (
            self.plane,
            self.line,
            self.line_id,
            self.name,
            self.offset_ps,
            self.start_ps,
            self.duration_ps,
            self.event.metadata_id(),
        ) == (
            o.plane,
            o.line,
            o.line_id,
            o.name,
            o.offset_ps,
            o.start_ps,
            o.duration_ps,
            o.event.metadata_id(),
        )
    }
}

impl Eq for Hit<'_> {}

/// The event names of one plane by metadata position (the last slot is `Unknown`, for events
/// whose metadata the plane lacks), whether each passes the event filter, and the results of
/// the expression's `event` tests on it ([`Filter::event_bits`]; empty without an expression).
struct PlaneNames<'a> {
    plane: Plane<'a>,
    /// The plane's position in [`XSpace::planes`].
    pos: usize,
    names: Vec<&'a str>,
    keep: Vec<bool>,
    bits: Vec<u64>,
}

impl<'a> PlaneNames<'a> {
    fn new(pos: usize, plane: Plane<'a>, filter: NameFilter<'_>, expr: Option<&Filter>) -> Self {
        let mut names: Vec<&'a str> = (0..plane.num_event_metadata())
            .map(|k| {
                plane.event_metadata_at(k).map_or("Unknown", |m| {
                    if m.display_name().is_empty() {
                        m.name()
                    } else {
                        m.display_name()
                    }
                })
            })
            .collect();
        names.push("Unknown");
        let keep: Vec<bool> = names.iter().map(|n| filter(n)).collect();
        let bits = match expr {
            Some(x) => names
                .iter()
                .zip(&keep)
                .map(|(n, &k)| if k { x.event_bits(n) } else { 0 })
                .collect(),
            None => Vec::new(),
        };
        PlaneNames {
            plane,
            pos,
            names,
            keep,
            bits,
        }
    }
    /// The slot of an event's metadata id.
    #[inline]
    fn slot(&self, metadata_id: i64) -> usize {
        self.plane
            .event_metadata_position(metadata_id)
            .filter(|&k| k + 1 < self.names.len())
            .unwrap_or(self.names.len() - 1)
    }
}

/// A run of consecutive events of one line: run `k` of [`Line::event_runs`].
struct Run<'a> {
    plane: usize,
    line: Line<'a>,
    /// The line's position in its plane.
    line_index: usize,
    k: usize,
}

impl<'a> Run<'a> {
    /// The run's events (an iterator is consumed by one pass; a page scans a run twice).
    fn events(&self) -> Events<'a> {
        let mut runs = self.line.event_runs();
        runs.swap_remove(self.k)
    }
}

impl EventQuery<'_> {
    /// The time filters (`start` absolute, `dur` the event's own).
    #[inline]
    fn keeps_times(&self, start: i64, dur: i64) -> bool {
        let end = start.saturating_add(dur);
        let outside = if self.overlap {
            self.start_ps.is_some_and(|s| end < s) || self.end_ps.is_some_and(|x| start > x)
        } else {
            self.start_ps.is_some_and(|s| start < s) || self.end_ps.is_some_and(|x| end > x)
        };
        !(outside
            || self.min_duration_ps.is_some_and(|d| dur < d)
            || self.max_duration_ps.is_some_and(|d| dur > d))
    }

    /// Planes and line runs passing the plane and line filters, in file order.
    fn runs<'a>(&self, space: &'a XSpace) -> (Vec<PlaneNames<'a>>, Vec<Run<'a>>) {
        let planes: Vec<(usize, Plane<'a>)> = space
            .planes()
            .enumerate()
            .filter(|(_, p)| (self.plane)(p.name()))
            .collect();
        let names: Vec<PlaneNames<'a>> = planes
            .par_iter()
            .map(|(pos, p)| PlaneNames::new(*pos, *p, self.event, self.filter))
            .collect();
        let mut runs = Vec::new();
        for (pi, (_, p)) in planes.iter().enumerate() {
            for (li, l) in p.lines().enumerate() {
                if !(self.line)(l.name()) {
                    continue;
                }
                runs.extend((0..l.event_runs().len()).map(|k| Run {
                    plane: pi,
                    line: l,
                    line_index: li,
                    k,
                }));
            }
        }
        (names, runs)
    }

    /// How many events the planes and lines passing the plane and line filters hold: the
    /// events a scan visits before the name, time and expression filters (XProf's
    /// `events_scanned`, which has no line filter and stops counting after 5 M events).
    pub fn events_scanned(&self, space: &XSpace) -> usize {
        space
            .planes()
            .filter(|p| (self.plane)(p.name()))
            .flat_map(|p| p.lines())
            .filter(|l| (self.line)(l.name()))
            .map(|l| l.num_events())
            .sum()
    }

    /// Calls `f(slot, event, start_ps, duration_ps)` for each matching event of `run`.
    #[inline]
    fn scan<'a>(
        &self,
        names: &PlaneNames<'_>,
        run: &Run<'a>,
        f: impl FnMut(usize, &xprof_xspace::Event<'a>, i64, i64),
    ) {
        match self.filter {
            Some(x) if !x.is_trivial() => self.scan_expr(x, names, run, f),
            _ => self.scan_plain(names, run, f),
        }
    }

    /// [`Self::scan`] without an expression.
    #[inline]
    fn scan_plain<'a>(
        &self,
        names: &PlaneNames<'_>,
        run: &Run<'a>,
        mut f: impl FnMut(usize, &xprof_xspace::Event<'a>, i64, i64),
    ) {
        for e in run.events() {
            let slot = names.slot(e.metadata_id());
            if !names.keep[slot] {
                continue;
            }
            let (start, dur) = (e.start_ps(), e.duration_ps());
            if self.keeps_times(start, dur) {
                f(slot, &e, start, dur);
            }
        }
    }

    /// [`Self::scan`] with an expression: its plane and line tests are resolved once per run,
    /// its event-name tests once per metadata slot, so per event only the numeric tests run.
    fn scan_expr<'a>(
        &self,
        x: &Filter,
        names: &PlaneNames<'_>,
        run: &Run<'a>,
        mut f: impl FnMut(usize, &xprof_xspace::Event<'a>, i64, i64),
    ) {
        let (plane, line, line_id) = (names.plane.name(), run.line.name(), run.line.id());
        let line_bits = x.line_bits(plane, line, line_id);
        for e in run.events() {
            let slot = names.slot(e.metadata_id());
            if !names.keep[slot] {
                continue;
            }
            let (start, dur) = (e.start_ps(), e.duration_ps());
            if !self.keeps_times(start, dur) {
                continue;
            }
            let fields = Fields {
                plane,
                line,
                line_id,
                event: names.names[slot],
                start_ps: start,
                duration_ps: dur,
            };
            if x.matches_bits(line_bits | names.bits[slot], &fields) {
                f(slot, &e, start, dur);
            }
        }
    }

    /// How many events match, and matches number `skip..skip + max` in plane/line/event order.
    pub fn page<'a>(&self, space: &'a XSpace, skip: usize, max: usize) -> (usize, Vec<Hit<'a>>) {
        let counts = self.count_runs(space);
        self.page_counted(space, counts, skip, max)
    }

    /// The matches of every run of an opened space.
    fn count_runs(&self, space: &XSpace) -> RunCounts {
        let (names, runs) = self.runs(space);
        RunCounts(
            runs.par_iter()
                .map(|r| {
                    let mut n = 0usize;
                    self.scan(&names[r.plane], r, |_, _, _, _| n += 1);
                    RunCount {
                        plane: names[r.plane].pos,
                        line: r.line_index,
                        run: r.k,
                        matches: n,
                    }
                })
                .collect(),
        )
    }

    /// Open the capture at `path` and count each run's matches in the pass that validates it
    /// ([`XSpace::open_scan`]); [`Self::page_counted`] then reads only the runs holding the
    /// page. With a non-trivial `--filter` expression the space is opened first and counted
    /// after (the expression's per-event name tests need the names).
    pub fn open_counted(
        &self,
        path: &std::path::Path,
        opts: &ReadOptions,
    ) -> Result<(XSpace, RunCounts), xprof_xspace::XSpaceError> {
        if self.filter.is_some_and(|x| !x.is_trivial()) {
            let space = XSpace::open_with(path, opts)?;
            let counts = self.count_runs(&space);
            return Ok((space, counts));
        }
        let (space, scanned) = XSpace::open_scan(path, opts, &CountScan(OpenFilters::new(self)))?;
        // Runs come in file order; a line's runs are consecutive and all present (the
        // decision to visit depends only on the line).
        let mut counts: Vec<RunCount> = Vec::with_capacity(scanned.len());
        for s in scanned {
            let run = match counts.last() {
                Some(c) if (c.plane, c.line) == (s.plane, s.line) => c.run + 1,
                _ => 0,
            };
            counts.push(RunCount {
                plane: s.plane,
                line: s.line,
                run,
                matches: s.acc.1,
            });
        }
        Ok((space, RunCounts(counts)))
    }

    /// [`Self::page`] from counts made by [`Self::open_counted`] (or on `space`).
    pub fn page_counted<'a>(
        &self,
        space: &'a XSpace,
        counts: RunCounts,
        skip: usize,
        max: usize,
    ) -> (usize, Vec<Hit<'a>>) {
        let total = counts.0.iter().map(|c| c.matches).sum();
        // The runs holding the page, with how many of their matches to skip and to keep.
        let end = skip.saturating_add(max);
        let mut wanted = Vec::new();
        let mut before = 0usize;
        for c in &counts.0 {
            let n = c.matches;
            let (lo, hi) = (before.max(skip), (before + n).min(end));
            if lo < hi {
                wanted.push((c, lo - before, hi - lo));
            }
            before += n;
        }
        let planes: Vec<Plane<'a>> = space.planes().collect();
        let mut names: HashMap<usize, PlaneNames<'a>> = HashMap::new();
        for (c, _, _) in &wanted {
            names.entry(c.plane).or_insert_with(|| {
                PlaneNames::new(c.plane, planes[c.plane], self.event, self.filter)
            });
        }
        let pages: Vec<Vec<Hit<'a>>> = wanted
            .par_iter()
            .map(|&(c, from, take)| {
                let pn = &names[&c.plane];
                let Some(line) = pn.plane.lines().nth(c.line) else {
                    return Vec::new();
                };
                let r = Run {
                    plane: 0,
                    line,
                    line_index: c.line,
                    k: c.run,
                };
                let mut out = Vec::with_capacity(take.min(1 << 16));
                let mut k = 0usize;
                self.scan(pn, &r, |slot, e, start, dur| {
                    if k >= from && out.len() < take {
                        out.push(Hit {
                            plane: pn.plane.name(),
                            line: r.line.name(),
                            line_id: r.line.id(),
                            name: pn.names[slot],
                            offset_ps: e.offset_ps(),
                            start_ps: start,
                            duration_ps: dur,
                            event: *e,
                        });
                    }
                    k += 1;
                });
                out
            })
            .collect();
        (total, pages.concat())
    }

    /// The durations of the matching events grouped by (event name, plane name, line name),
    /// each key part `""` unless its flag is set; groups in first-seen order, durations in no
    /// particular order. Returns (matched events, groups).
    pub fn group_durations<'a>(
        &self,
        space: &'a XSpace,
        by_event: bool,
        by_plane: bool,
        by_line: bool,
    ) -> (usize, Vec<DurationGroup<'a>>) {
        let per_run = self.group_runs(space);
        self.merge_groups(space, per_run, by_event, by_plane, by_line)
    }

    /// Per run of an opened space: durations per metadata slot.
    fn group_runs(&self, space: &XSpace) -> Vec<RunDurations> {
        let (names, runs) = self.runs(space);
        runs.par_iter()
            .map(|r| {
                let pn = &names[r.plane];
                let mut acc = RunDurations::new(pn.pos, r.line_index, pn.names.len());
                self.scan(pn, r, |slot, _, _, dur| acc.push(slot, dur));
                acc
            })
            .collect()
    }

    /// Open the capture at `path` and group its events as [`Self::group_durations`] does, in
    /// the pass that validates them ([`XSpace::open_scan`]: one pass over the events instead
    /// of two). With a non-trivial `--filter` expression the space is opened first and scanned
    /// after (the expression's per-event name tests need the names).
    ///
    /// `by_line`: whether the groups will be keyed by line ([`Self::merge_groups`]). When they
    /// are not, the runs a worker thread scans add to one accumulator per plane instead of one
    /// each (thousands of runs, each with its own table and small vectors, otherwise).
    pub fn open_grouped(
        &self,
        path: &std::path::Path,
        opts: &ReadOptions,
        by_line: bool,
    ) -> Result<(XSpace, Vec<RunDurations>), xprof_xspace::XSpaceError> {
        if self.filter.is_some_and(|x| !x.is_trivial()) {
            let space = XSpace::open_with(path, opts)?;
            let per_run = self.group_runs(&space);
            return Ok((space, per_run));
        }
        let scan = GroupScan {
            filters: OpenFilters::new(self),
            per_thread: (!by_line).then(|| {
                (0..rayon::current_num_threads())
                    .map(|_| Mutex::new(Vec::new()))
                    .collect()
            }),
            full: Mutex::new(Vec::new()),
        };
        let (space, scanned) = XSpace::open_scan(path, opts, &scan)?;
        // Planes the reader kept: their position in the file → in the returned space.
        let mut kept: HashMap<usize, usize> = HashMap::new();
        let mut out = Vec::new();
        for s in scanned {
            kept.insert(s.acc.plane, s.plane);
            let mut d = s.acc.durations;
            if !d.groups.is_empty() {
                (d.plane, d.line) = (s.plane, s.line);
                out.push(d);
            }
        }
        // The threads' accumulators, for the planes the reader kept (a plane it dropped for a
        // corrupt event may have added events before it).
        let full = scan.full.into_inner().unwrap_or_else(|e| e.into_inner());
        let threads = scan.per_thread.into_iter().flatten();
        for accs in threads
            .map(|slot| slot.into_inner().unwrap_or_else(|e| e.into_inner()))
            .chain([full])
        {
            for (file_plane, mut d) in accs {
                if let Some(&p) = kept.get(&file_plane) {
                    d.plane = p;
                    d.local = Vec::new();
                    out.push(d);
                }
            }
        }
        Ok((space, out))
    }

    /// Merge per-run durations into groups keyed by name (see [`Self::group_durations`]).
    pub fn merge_groups<'a>(
        &self,
        space: &'a XSpace,
        per_run: Vec<RunDurations>,
        by_event: bool,
        by_plane: bool,
        by_line: bool,
    ) -> (usize, Vec<DurationGroup<'a>>) {
        let planes: Vec<Plane<'a>> = space.planes().collect();
        let lines: Vec<Vec<Line<'a>>> = planes.iter().map(|p| p.lines().collect()).collect();
        // The names of the planes that have runs, by plane index.
        let mut names: Vec<Option<PlaneNames<'a>>> = (0..planes.len()).map(|_| None).collect();
        for r in &per_run {
            if names[r.plane].is_none() {
                names[r.plane] = Some(PlaneNames::new(r.plane, planes[r.plane], self.event, None));
            }
        }
        // Key parts are numbered once per (plane, slot), plane and run, so the per-(run, slot)
        // merge hashes three integers instead of three (possibly long) names.
        let mut ids: HashMap<&'a str, u32> = HashMap::new();
        let mut id_of = |s: &'a str| {
            let n = ids.len() as u32;
            *ids.entry(s).or_insert(n)
        };
        let mut name_ids: Vec<Vec<u32>> = names
            .iter()
            .map(|pn| vec![u32::MAX; pn.as_ref().map_or(0, |pn| pn.names.len())])
            .collect();
        // (plane, slot) → its group, when the line is not part of the key.
        let mut group_of = name_ids.clone();
        let plane_ids: Vec<u32> = planes.iter().map(|p| id_of(p.name())).collect();
        let mut index: HashMap<(u32, u32, u32), usize> = HashMap::new();
        let mut out: Vec<DurationGroup<'a>> = Vec::new();
        let mut matched = 0usize;
        for r in per_run {
            let Some(pn) = names[r.plane].as_ref() else {
                continue;
            };
            let line = lines[r.plane][r.line];
            let line_id = if by_line {
                id_of(line.name())
            } else {
                u32::MAX
            };
            let plane_id = if by_plane {
                plane_ids[r.plane]
            } else {
                u32::MAX
            };
            for (slot, durs, sum) in r.groups {
                let slot = slot as usize;
                matched += durs.len();
                // Without the line in the key a (plane, slot) always lands in the same group:
                // look it up once, not once per run (thousands of runs).
                let cached = if by_line {
                    u32::MAX
                } else {
                    group_of[r.plane][slot]
                };
                if cached != u32::MAX {
                    let g = &mut out[cached as usize];
                    g.chunks.push(durs);
                    g.sum += sum;
                    continue;
                }
                let name_id = if by_event {
                    let n = &mut name_ids[r.plane][slot];
                    if *n == u32::MAX {
                        *n = id_of(pn.names[slot]);
                    }
                    *n
                } else {
                    u32::MAX
                };
                let g = *index
                    .entry((name_id, plane_id, line_id))
                    .or_insert_with(|| {
                        out.push(DurationGroup {
                            key: (
                                if by_event { pn.names[slot] } else { "" },
                                if by_plane { pn.plane.name() } else { "" },
                                if by_line { line.name() } else { "" },
                            ),
                            chunks: Vec::new(),
                            sum: 0,
                        });
                        out.len() - 1
                    });
                if !by_line {
                    group_of[r.plane][slot] = g as u32;
                }
                out[g].chunks.push(durs);
                out[g].sum += sum;
            }
        }
        (matched, out)
    }
}

/// One run's durations by metadata slot (see [`EventQuery::open_grouped`]).
pub struct RunDurations {
    /// Position of the plane in [`XSpace::planes`].
    plane: usize,
    /// Position of the line in its plane.
    line: usize,
    /// Slot → 1 + index into `groups` (0: none yet); runs are one line's events, which use
    /// few distinct names, so a dense table beats hashing.
    local: Vec<u32>,
    /// (slot, durations, their exact sum): summed while scanning, in parallel, so the top-n
    /// cut does not re-read every duration afterwards on one thread (one name often holds
    /// most events).
    groups: Vec<(u32, Durations, i128)>,
}

/// One group's durations as a run collects them: 4 bytes each while they fit in a `u32`
/// (most events last under 4.3 ms), 8 bytes from the first one that does not. Millions of
/// durations are kept for exact percentiles, so their memory is much of the scan's cost.
#[derive(Debug)]
pub enum Durations {
    Narrow(Vec<u32>),
    Wide(Vec<i64>),
}

impl Durations {
    #[inline(always)]
    fn push(&mut self, d: i64) {
        let narrow = match self {
            Durations::Narrow(v) => match u32::try_from(d) {
                Ok(x) => {
                    v.push(x);
                    return;
                }
                Err(_) => true,
            },
            Durations::Wide(v) => {
                v.push(d);
                false
            }
        };
        if narrow {
            self.widen(d);
        }
    }
    /// The first duration that does not fit in a `u32`: switch to 8 bytes each.
    #[cold]
    #[inline(never)]
    fn widen(&mut self, d: i64) {
        if let Durations::Narrow(v) = self {
            let mut w: Vec<i64> = Vec::with_capacity(v.len() * 2 + 1);
            w.extend(v.iter().map(|&x| x as i64));
            w.push(d);
            *self = Durations::Wide(w);
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Durations::Narrow(v) => v.len(),
            Durations::Wide(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn sum(&self) -> i128 {
        match self {
            Durations::Narrow(v) => v.iter().map(|&x| x as i128).sum(),
            Durations::Wide(v) => v.iter().map(|&x| x as i128).sum(),
        }
    }
    fn extend_into(&self, out: &mut Vec<i64>) {
        match self {
            Durations::Narrow(v) => out.extend(v.iter().map(|&x| x as i64)),
            Durations::Wide(v) => out.extend_from_slice(v),
        }
    }
    fn into_wide(self) -> Vec<i64> {
        match self {
            Durations::Narrow(v) => v.into_iter().map(|x| x as i64).collect(),
            Durations::Wide(v) => v,
        }
    }
}

impl RunDurations {
    fn new(plane: usize, line: usize, slots: usize) -> Self {
        RunDurations {
            plane,
            line,
            local: vec![0; slots],
            groups: Vec::new(),
        }
    }
    #[inline(always)]
    fn push(&mut self, slot: usize, duration_ps: i64) {
        let g = &mut self.local[slot];
        if *g == 0 {
            self.groups
                .push((slot as u32, Durations::Narrow(Vec::with_capacity(16)), 0));
            *g = self.groups.len() as u32;
        }
        let e = &mut self.groups[*g as usize - 1];
        e.1.push(duration_ps);
        e.2 += duration_ps as i128;
    }
}

/// Which metadata slots of one plane pass the event-name filter (the last slot: unknown).
struct SlotFilter {
    keep: Vec<bool>,
}

/// The plane, line and event-name filters of an [`EventQuery`] for scans run while the
/// capture is opened ([`XSpace::open_scan`]).
struct OpenFilters<'q, 'f> {
    q: &'q EventQuery<'f>,
    /// Whether the query has a time filter (most do not: then no event's start is computed).
    timed: bool,
    /// Per plane (by its index in the file), built by the first run of the plane.
    tables: Mutex<HashMap<usize, Arc<SlotFilter>>>,
}

impl<'q, 'f> OpenFilters<'q, 'f> {
    fn new(q: &'q EventQuery<'f>) -> Self {
        OpenFilters {
            q,
            timed: q.start_ps.is_some()
                || q.end_ps.is_some()
                || q.min_duration_ps.is_some()
                || q.max_duration_ps.is_some(),
            tables: Default::default(),
        }
    }
    /// The slot filter of a run's plane, `None` when the run's line is filtered out (or empty).
    fn start(&self, line: Line<'_>) -> Option<Arc<SlotFilter>> {
        let plane = line.plane();
        if line.num_events() == 0 || !(self.q.plane)(plane.name()) || !(self.q.line)(line.name()) {
            return None;
        }
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        Some(
            tables
                .entry(plane.index())
                .or_insert_with(|| {
                    let names = PlaneNames::new(0, plane, self.q.event, None);
                    Arc::new(SlotFilter { keep: names.keep })
                })
                .clone(),
        )
    }
    /// The event's metadata slot when it passes the name and time filters.
    #[inline]
    fn keeps(&self, f: &SlotFilter, e: &Event<'_>, position: Option<usize>) -> Option<usize> {
        let unknown = f.keep.len() - 1;
        let slot = position.filter(|&k| k < unknown).unwrap_or(unknown);
        (f.keep[slot] && (!self.timed || self.q.keeps_times(e.start_ps(), e.duration_ps())))
            .then_some(slot)
    }
}

/// [`EventQuery::group_durations`] as an [`EventScan`], run while the capture is opened.
struct GroupScan<'q, 'f> {
    filters: OpenFilters<'q, 'f>,
    /// Without the line in the key: per worker thread (rayon's index), one accumulator per
    /// plane (its position in the file), lent to each run the thread scans.
    per_thread: Option<Vec<Mutex<PlaneAccumulators>>>,
    /// Accumulators of `per_thread` that reached [`FULL_ACCUMULATOR`] durations.
    full: Mutex<PlaneAccumulators>,
}

/// Accumulators, each with the position in the file of the plane it is for.
type PlaneAccumulators = Vec<(usize, RunDurations)>;

/// Durations after which a thread's accumulator is set aside for a new one (256 KiB of 4-byte
/// durations).
const FULL_ACCUMULATOR: usize = 1 << 16;

/// One run's state in a [`GroupScan`].
struct GroupRun {
    filter: Arc<SlotFilter>,
    /// The plane's position in the file.
    plane: usize,
    /// The worker thread whose accumulator `durations` is, to give it back after the run.
    thread: Option<usize>,
    durations: RunDurations,
}

impl EventScan for GroupScan<'_, '_> {
    type Acc = GroupRun;
    fn start(&self, line: Line<'_>, _: &xprof_xspace::Run) -> Option<GroupRun> {
        let filter = self.filters.start(line)?;
        let slots = filter.keep.len();
        let plane = line.plane().index();
        // A run never waits on other rayon work, so a thread scans one run at a time and can
        // lend its accumulator to it.
        let lent = self.per_thread.as_ref().and_then(|per_thread| {
            let t = rayon::current_thread_index()?;
            let mut accs = per_thread.get(t)?.lock().unwrap_or_else(|e| e.into_inner());
            let d = match accs.iter().position(|(p, _)| *p == plane) {
                Some(k) => accs.swap_remove(k).1,
                // Positions in the returned space are set after the scan (the reader
                // renumbers planes if it drops one); the line is not part of the key.
                None => RunDurations::new(0, 0, slots),
            };
            Some((t, d))
        });
        let (thread, durations) = match lent {
            Some((t, d)) => (Some(t), d),
            None => (None, RunDurations::new(0, 0, slots)),
        };
        Some(GroupRun {
            filter,
            plane,
            thread,
            durations,
        })
    }
    #[inline]
    fn event(&self, acc: &mut GroupRun, e: Event<'_>, position: Option<usize>) {
        if let Some(slot) = self.filters.keeps(&acc.filter, &e, position) {
            acc.durations.push(slot, e.duration_ps());
        }
    }
    fn finish(&self, acc: &mut GroupRun) {
        if let (Some(t), Some(per_thread)) = (acc.thread, self.per_thread.as_ref()) {
            let mut d = std::mem::replace(&mut acc.durations, RunDurations::new(0, 0, 0));
            // A full accumulator is set aside and the thread starts a new one: vectors that
            // kept doubling to millions of durations would copy more than they save.
            if d.groups.iter().map(|g| g.1.len()).sum::<usize>() >= FULL_ACCUMULATOR {
                d.local = Vec::new();
                self.full
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((acc.plane, d));
            } else {
                per_thread[t]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((acc.plane, d));
            }
            return;
        }
        // The slot table is only needed while scanning: free it on the scanning thread rather
        // than one run at a time on the thread that merges the runs.
        acc.durations.local = Vec::new();
    }
}

/// Counting the matches of each run as an [`EventScan`] ([`EventQuery::open_counted`]).
struct CountScan<'q, 'f>(OpenFilters<'q, 'f>);

impl EventScan for CountScan<'_, '_> {
    type Acc = (Arc<SlotFilter>, usize);
    fn start(&self, line: Line<'_>, _: &xprof_xspace::Run) -> Option<Self::Acc> {
        Some((self.0.start(line)?, 0))
    }
    #[inline]
    fn event(&self, acc: &mut Self::Acc, e: Event<'_>, position: Option<usize>) {
        if self.0.keeps(&acc.0, &e, position).is_some() {
            acc.1 += 1;
        }
    }
}

/// How many events of each run match, in file order ([`EventQuery::open_counted`]).
pub struct RunCounts(Vec<RunCount>);

/// One run's matches: the plane's position in [`XSpace::planes`], the line's in its plane,
/// the run's number among [`Line::event_runs`], and the count.
struct RunCount {
    plane: usize,
    line: usize,
    run: usize,
    matches: usize,
}

/// One group of [`EventQuery::group_durations`].
pub struct DurationGroup<'a> {
    /// (event, plane, line); parts not grouped on are `""`.
    pub key: (&'a str, &'a str, &'a str),
    /// The durations, as the runs collected them (concatenated only when sorted: copying
    /// them into one growing vector first cost more than the scan).
    pub chunks: Vec<Durations>,
    /// The exact sum of the durations.
    sum: i128,
}

impl<'a> DurationGroup<'a> {
    /// A group of `chunks` (their sum computed here).
    pub fn new(key: (&'a str, &'a str, &'a str), chunks: Vec<Durations>) -> Self {
        let sum = chunks.iter().map(Durations::sum).sum();
        DurationGroup { key, chunks, sum }
    }
    /// How many durations the group holds.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Durations::len).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.chunks.iter().all(Durations::is_empty)
    }
    /// The sum of the durations ([`DurationStats::total`], without sorting them).
    pub fn total(&self) -> i64 {
        clamp_sum(self.sum)
    }
    /// All durations, in no particular order (the chunks concatenated, without copying a
    /// single chunk).
    pub fn into_values(mut self) -> Vec<i64> {
        if self.chunks.len() == 1 {
            return self
                .chunks
                .pop()
                .map(Durations::into_wide)
                .unwrap_or_default();
        }
        let mut out = Vec::with_capacity(self.len());
        for c in &self.chunks {
            c.extend_into(&mut out);
        }
        out
    }
    /// The group's statistics ([`DurationStats::of_unsorted`]), computed on the 4-byte values
    /// when every run kept its durations narrow. `None` when empty.
    pub fn stats(mut self) -> Option<DurationStats> {
        if !self
            .chunks
            .iter()
            .all(|c| matches!(c, Durations::Narrow(_)))
        {
            return DurationStats::of_unsorted(self.into_values());
        }
        // Append the other chunks to the largest one, which keeps its buffer.
        let biggest = (0..self.chunks.len()).max_by_key(|&i| self.chunks[i].len())?;
        let Durations::Narrow(mut all) = self.chunks.swap_remove(biggest) else {
            unreachable!("every chunk is narrow");
        };
        all.reserve_exact(self.chunks.iter().map(Durations::len).sum());
        for c in &self.chunks {
            if let Durations::Narrow(v) = c {
                all.extend_from_slice(v);
            }
        }
        DurationStats::of_unsorted_values(all)
    }
    /// All durations, ascending.
    pub fn sorted(self) -> Vec<i64> {
        let values = self.into_values();
        sorted_from_chunks(vec![values])
    }
}

/// The statistics of every non-empty group, groups in parallel (in the groups' order).
pub fn group_stats<'a>(
    groups: Vec<DurationGroup<'a>>,
) -> Vec<((&'a str, &'a str, &'a str), DurationStats)> {
    groups
        .into_par_iter()
        .filter_map(|g| {
            let key = g.key;
            Some((key, g.stats()?))
        })
        .collect()
}

/// An exact sum clamped to `i64` (the same whatever the order of the values).
fn clamp_sum(sum: i128) -> i64 {
    sum.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// A group's duration statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct DurationStats {
    pub count: usize,
    /// Exact sum, clamped to the `i64` range.
    pub total: i64,
    pub mean: f64,
    pub min: i64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: i64,
    /// Sample standard deviation (0 for one value).
    pub std_dev: f64,
}

/// Inputs at least this long are radix-sorted.
const RADIX_MIN: usize = 1 << 14;

/// Sort ascending (see [`sorted_from_chunks`]).
fn sort_i64(v: &mut [i64]) {
    if v.len() < RADIX_MIN {
        v.sort_unstable();
    } else {
        let sorted = sorted_from_chunks(vec![v.to_vec()]);
        v.copy_from_slice(&sorted);
    }
}

/// The values of `chunks`, ascending. Large inputs use an LSD radix sort (bytes on which every
/// value agrees are skipped, so short durations take few passes) whose first pass reads the
/// chunks directly: several times faster than a comparison sort on the millions of durations
/// one group can hold, with the same result.
fn sorted_from_chunks(mut chunks: Vec<Vec<i64>>) -> Vec<i64> {
    let n: usize = chunks.iter().map(Vec::len).sum();
    if n < RADIX_MIN {
        let mut v = if chunks.len() == 1 {
            chunks.pop().unwrap_or_default()
        } else {
            chunks.concat()
        };
        v.sort_unstable();
        return v;
    }
    // Order-preserving map to u64: flip the sign bit.
    let key = |x: i64| (x as u64) ^ (1 << 63);
    let mut counts = vec![[0usize; 256]; 8];
    for &x in chunks.iter().flatten() {
        let k = key(x);
        for (b, c) in counts.iter_mut().enumerate() {
            c[((k >> (8 * b)) & 0xff) as usize] += 1;
        }
    }
    let mut src: Vec<i64> = Vec::new();
    let mut dst: Vec<i64> = vec![0; n];
    let mut first = true;
    for (b, c) in counts.iter().enumerate() {
        if c.contains(&n) {
            continue; // every value has the same byte here
        }
        let mut pos = [0usize; 256];
        let mut sum = 0;
        for (p, &k) in pos.iter_mut().zip(c.iter()) {
            *p = sum;
            sum += k;
        }
        let mut scatter = |x: i64| {
            let d = ((key(x) >> (8 * b)) & 0xff) as usize;
            dst[pos[d]] = x;
            pos[d] += 1;
        };
        if first {
            chunks.iter().flatten().for_each(|&x| scatter(x));
            chunks = Vec::new();
            src = vec![0; n];
            first = false;
        } else {
            src.iter().for_each(|&x| scatter(x));
        }
        std::mem::swap(&mut src, &mut dst);
    }
    if first {
        // All values are equal.
        return chunks.concat();
    }
    src
}

/// Linear interpolation between the closest ranks of sorted values.
fn percentile(sorted: &[i64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] as f64 + (sorted[hi] as f64 - sorted[lo] as f64) * (pos - lo as f64)
}

impl DurationStats {
    /// Statistics of `durations` (sorted in place: the sums run in ascending order, so the
    /// floating-point results do not depend on the scan order). `None` when empty.
    pub fn of(durations: &mut [i64]) -> Option<DurationStats> {
        if durations.is_empty() {
            return None;
        }
        sort_i64(durations);
        Self::of_sorted(durations)
    }

    /// The statistics of `v` in any order, without sorting it: exact integer sums for the
    /// standard deviation and order-statistic selection for the percentiles (the same
    /// percentiles as sorting; the deviation exact where the float sums of [`Self::of_sorted`]
    /// round). Falls back to sorting when the integer sums would overflow.
    pub fn of_unsorted(v: Vec<i64>) -> Option<DurationStats> {
        Self::of_unsorted_values(v)
    }

    /// [`Self::of_unsorted`] over durations of any integer width: a group whose durations all
    /// fit in `u32` is summarised in the 4-byte values its runs collected, without widening
    /// them into a second, twice as large buffer first.
    pub fn of_unsorted_values<T: Copy + Ord + Into<i64>>(mut v: Vec<T>) -> Option<DurationStats> {
        if v.is_empty() {
            return None;
        }
        let n = v.len() as i128;
        let (mut min, mut max) = (v[0].into(), v[0].into());
        let mut sum: i128 = 0;
        let mut sumsq: Option<i128> = Some(0);
        for &x in &v {
            let x: i64 = x.into();
            min = min.min(x);
            max = max.max(x);
            sum += x as i128;
            sumsq = sumsq.and_then(|a| a.checked_add((x as i128).checked_mul(x as i128)?));
        }
        // n·Σx² − (Σx)², exact; None on overflow.
        let num = sumsq
            .and_then(|q| q.checked_mul(n))
            .and_then(|a| sum.checked_mul(sum).and_then(|b| a.checked_sub(b)));
        let Some(num) = num else {
            let mut w: Vec<i64> = v.iter().map(|&x| x.into()).collect();
            drop(v);
            sort_i64(&mut w);
            return Self::of_sorted(&w);
        };
        let total = clamp_sum(sum);
        let count = v.len();
        let mean = total as f64 / count as f64;
        let std_dev = if count > 1 {
            (num.max(0) as f64 / (n * (n - 1)) as f64).sqrt()
        } else {
            0.0
        };
        // Percentiles in ascending order of rank: each selection only looks right of the
        // previous one.
        let mut from = 0usize;
        let mut pct = [0.0f64; 3];
        for (k, q) in [0.5, 0.9, 0.99].into_iter().enumerate() {
            let pos = q * (count - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            let lo_v = if lo >= from {
                let (_, x, _) = v[from..].select_nth_unstable(lo - from);
                *x
            } else {
                v[lo]
            };
            let hi_v = if hi == lo {
                lo_v
            } else {
                // The smallest value right of `lo` (all of them are >= lo_v).
                v[lo + 1..].iter().copied().min().unwrap_or(lo_v)
            };
            let (lo_v, hi_v): (i64, i64) = (lo_v.into(), hi_v.into());
            pct[k] = lo_v as f64 + (hi_v as f64 - lo_v as f64) * (pos - lo as f64);
            from = from.max(lo + 1);
        }
        Some(DurationStats {
            count,
            total,
            mean,
            min,
            p50: pct[0],
            p90: pct[1],
            p99: pct[2],
            max,
            std_dev,
        })
    }

    /// Statistics of ascending `d`. `None` when empty.
    pub fn of_sorted(d: &[i64]) -> Option<DurationStats> {
        if d.is_empty() {
            return None;
        }
        let n = d.len() as f64;
        let total = clamp_sum(d.iter().map(|&x| x as i128).sum());
        let mean = total as f64 / n;
        let std_dev = if d.len() > 1 {
            (d.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Some(DurationStats {
            count: d.len(),
            total,
            mean,
            min: d[0],
            p50: percentile(d, 0.5),
            p90: percentile(d, 0.9),
            p99: percentile(d, 0.99),
            max: d[d.len() - 1],
            std_dev,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic xorshift64 stream from `seed` (non-zero).
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn durations_widen_on_the_first_value_past_u32_and_keep_order() {
        let values = [1i64, 2, u32::MAX as i64, u32::MAX as i64 + 1, -5, 3];
        let mut d = Durations::Narrow(Vec::new());
        for (k, &v) in values.iter().enumerate() {
            d.push(v);
            assert_eq!(matches!(d, Durations::Wide(_)), k >= 3, "after {v}");
        }
        assert_eq!(d.len(), values.len());
        assert_eq!(d.sum(), values.iter().map(|&x| x as i128).sum::<i128>());
        let g = DurationGroup::new(("e", "", ""), vec![d, Durations::Narrow(vec![7, 8])]);
        assert_eq!(g.total(), values.iter().sum::<i64>() + 15);
        let mut all: Vec<i64> = values.to_vec();
        all.extend([7, 8]);
        assert_eq!(g.into_values(), all);
    }

    #[test]
    fn a_run_sums_each_slot_while_collecting_it() {
        let values = [5i64, u32::MAX as i64 + 9, 7, -2, 1 << 40, 3];
        let mut r = RunDurations::new(0, 0, 3);
        for (k, &v) in values.iter().enumerate() {
            r.push(k % 3, v);
        }
        assert_eq!(r.groups.len(), 3);
        for (slot, durs, sum) in &r.groups {
            let expect: i128 = values
                .iter()
                .enumerate()
                .filter(|(k, _)| k % 3 == *slot as usize)
                .map(|(_, &v)| v as i128)
                .sum();
            assert_eq!((*sum, durs.sum()), (expect, expect), "slot {slot}");
        }
    }

    #[test]
    fn a_narrow_group_has_the_statistics_of_its_widened_values() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for sizes in [vec![1usize], vec![5, 1, 9], vec![0, 300, 2_000, 17]] {
            let chunks: Vec<Vec<u32>> = sizes
                .iter()
                .map(|&n| (0..n).map(|_| (next() % 5_000_000) as u32).collect())
                .collect();
            let group = |wide_last: bool| {
                DurationGroup::new(
                    ("e", "", ""),
                    chunks
                        .iter()
                        .enumerate()
                        .map(|(k, c)| {
                            if wide_last && k + 1 == chunks.len() {
                                Durations::Wide(c.iter().map(|&d| d as i64).collect())
                            } else {
                                Durations::Narrow(c.clone())
                            }
                        })
                        .collect(),
                )
            };
            let widened = DurationStats::of_unsorted(group(false).into_values());
            assert_eq!(group(false).stats(), widened, "{sizes:?}");
            assert_eq!(group(true).stats(), widened, "{sizes:?}");
        }
        let empty = DurationGroup::new(("e", "", ""), vec![Durations::Narrow(Vec::new())]);
        assert_eq!(empty.stats(), None);
    }

    #[test]
    fn unsorted_statistics_agree_with_sorted_ones() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for n in [1usize, 2, 3, 7, 10, 11, 100, 101, 999, 20_000] {
            for spread in [1u64, 7, 1_000, 1 << 40] {
                let v: Vec<i64> = (0..n).map(|_| (next() % spread) as i64 - 3).collect();
                let mut sorted = v.clone();
                sorted.sort_unstable();
                let a = DurationStats::of_sorted(&sorted).unwrap();
                let b = DurationStats::of_unsorted(v).unwrap();
                assert_eq!(
                    (a.count, a.total, a.min, a.max, a.p50, a.p90, a.p99),
                    (b.count, b.total, b.min, b.max, b.p50, b.p90, b.p99),
                    "n {n} spread {spread}"
                );
                let tol = 1e-9 * a.std_dev.abs().max(1.0);
                assert!(
                    (a.std_dev - b.std_dev).abs() <= tol,
                    "{} vs {}",
                    a.std_dev,
                    b.std_dev
                );
            }
        }
        // Squares that overflow i128 fall back to sorting, with the same result.
        let big = vec![i64::MAX, i64::MAX - 1, 5, i64::MIN];
        let mut sorted = big.clone();
        sorted.sort_unstable();
        assert_eq!(
            DurationStats::of_unsorted(big),
            DurationStats::of_sorted(&sorted)
        );
        assert_eq!(DurationStats::of_unsorted(Vec::new()), None);
    }

    #[test]
    fn radix_sort_agrees_with_the_standard_sort() {
        // A deterministic mix of small, large, negative and extreme values.
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut v: Vec<i64> = (0..50_000)
            .map(|i| {
                let x = next();
                match i % 5 {
                    0 => (x % 1000) as i64,
                    1 => x as i64,
                    2 => -((x % 100_000) as i64),
                    3 => [i64::MIN, i64::MAX, 0][(x % 3) as usize],
                    _ => (x % 10_000_000) as i64,
                }
            })
            .collect();
        let mut w = v.clone();
        sort_i64(&mut v);
        w.sort_unstable();
        assert_eq!(v, w);
        let mut same = vec![7i64; 20_000];
        sort_i64(&mut same);
        assert!(same.iter().all(|&x| x == 7));
    }

    #[test]
    fn duration_stats_are_order_independent_and_interpolated() {
        let mut a = vec![30, 10, 20, 40];
        let mut b = vec![40, 30, 20, 10];
        let (sa, sb) = (
            DurationStats::of(&mut a).unwrap(),
            DurationStats::of(&mut b).unwrap(),
        );
        assert_eq!(sa, sb);
        assert_eq!((sa.count, sa.total, sa.min, sa.max), (4, 100, 10, 40));
        assert_eq!(sa.p50, 25.0);
        assert!((sa.p90 - 37.0).abs() < 1e-9);
        assert!(DurationStats::of(&mut []).is_none());
        let one = DurationStats::of(&mut [i64::MAX, 5]).unwrap();
        assert_eq!(one.total, i64::MAX);
    }
}
