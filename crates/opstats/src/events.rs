//! Filtered scans of raw XSpace events (what `list_xplane_events` and `aggregate_xplane_events`
//! print), straight on the lazy reader and in parallel.
//!
//! Names and the name filter are resolved once per event metadata (an event's name is its
//! metadata's display name, else its name, else `Unknown` when the plane lacks the metadata),
//! so the per-event work is one table lookup and the time filters. Lines are scanned as the
//! runs the reader validated in parallel ([`xprof_xspace::Line::event_runs`]), on rayon.

use std::collections::HashMap;

use rayon::prelude::*;
use xprof_xspace::{Events, Line, Plane, XSpace};

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

/// One matching event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit<'a> {
    pub plane: &'a str,
    pub line: &'a str,
    pub line_id: i64,
    pub name: &'a str,
    pub offset_ps: i64,
    pub start_ps: i64,
    pub duration_ps: i64,
}

/// The event names of one plane by metadata position (the last slot is `Unknown`, for events
/// whose metadata the plane lacks), whether each passes the event filter, and the results of
/// the expression's `event` tests on it ([`Filter::event_bits`]; empty without an expression).
struct PlaneNames<'a> {
    plane: Plane<'a>,
    names: Vec<&'a str>,
    keep: Vec<bool>,
    bits: Vec<u64>,
}

impl<'a> PlaneNames<'a> {
    fn new(plane: Plane<'a>, filter: NameFilter<'_>, expr: Option<&Filter>) -> Self {
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
        let planes: Vec<Plane<'a>> = space.planes().filter(|p| (self.plane)(p.name())).collect();
        let names: Vec<PlaneNames<'a>> = planes
            .par_iter()
            .map(|p| PlaneNames::new(*p, self.event, self.filter))
            .collect();
        let mut runs = Vec::new();
        for (pi, p) in planes.iter().enumerate() {
            for l in p.lines().filter(|l| (self.line)(l.name())) {
                runs.extend((0..l.event_runs().len()).map(|k| Run {
                    plane: pi,
                    line: l,
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

    /// Calls `f(slot, offset_ps, start_ps, duration_ps)` for each matching event of `run`.
    #[inline]
    fn scan(&self, names: &PlaneNames<'_>, run: &Run<'_>, f: impl FnMut(usize, i64, i64, i64)) {
        match self.filter {
            Some(x) if !x.is_trivial() => self.scan_expr(x, names, run, f),
            _ => self.scan_plain(names, run, f),
        }
    }

    /// [`Self::scan`] without an expression.
    #[inline]
    fn scan_plain(
        &self,
        names: &PlaneNames<'_>,
        run: &Run<'_>,
        mut f: impl FnMut(usize, i64, i64, i64),
    ) {
        for e in run.events() {
            let slot = names.slot(e.metadata_id());
            if !names.keep[slot] {
                continue;
            }
            let (start, dur) = (e.start_ps(), e.duration_ps());
            if self.keeps_times(start, dur) {
                f(slot, e.offset_ps(), start, dur);
            }
        }
    }

    /// [`Self::scan`] with an expression: its plane and line tests are resolved once per run,
    /// its event-name tests once per metadata slot, so per event only the numeric tests run.
    fn scan_expr(
        &self,
        x: &Filter,
        names: &PlaneNames<'_>,
        run: &Run<'_>,
        mut f: impl FnMut(usize, i64, i64, i64),
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
                f(slot, e.offset_ps(), start, dur);
            }
        }
    }

    /// How many events match, and matches number `skip..skip + max` in plane/line/event order.
    pub fn page<'a>(&self, space: &'a XSpace, skip: usize, max: usize) -> (usize, Vec<Hit<'a>>) {
        let (names, runs) = self.runs(space);
        let counts: Vec<usize> = runs
            .par_iter()
            .map(|r| {
                let mut n = 0usize;
                self.scan(&names[r.plane], r, |_, _, _, _| n += 1);
                n
            })
            .collect();
        let total = counts.iter().sum();
        // The runs holding the page, with how many of their matches to skip and to keep.
        let end = skip.saturating_add(max);
        let mut wanted = Vec::new();
        let mut before = 0usize;
        for (r, &n) in runs.iter().zip(&counts) {
            let (lo, hi) = (before.max(skip), (before + n).min(end));
            if lo < hi {
                wanted.push((r, lo - before, hi - lo));
            }
            before += n;
        }
        let pages: Vec<Vec<Hit<'a>>> = wanted
            .par_iter()
            .map(|&(r, from, take)| {
                let pn = &names[r.plane];
                let mut out = Vec::with_capacity(take);
                let mut k = 0usize;
                self.scan(pn, r, |slot, offset, start, dur| {
                    if k >= from && out.len() < take {
                        out.push(Hit {
                            plane: pn.plane.name(),
                            line: r.line.name(),
                            line_id: r.line.id(),
                            name: pn.names[slot],
                            offset_ps: offset,
                            start_ps: start,
                            duration_ps: dur,
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
        let (names, runs) = self.runs(space);
        // Per run: durations per metadata slot, in a dense slot → local index table (runs are
        // one line's events, which use few distinct names).
        let per_run: Vec<Vec<(usize, Vec<i64>)>> = runs
            .par_iter()
            .map(|r| {
                let pn = &names[r.plane];
                let mut local: Vec<u32> = vec![0; pn.names.len()];
                let mut groups: Vec<(usize, Vec<i64>)> = Vec::new();
                self.scan(pn, r, |slot, _, _, dur| {
                    let g = &mut local[slot];
                    if *g == 0 {
                        groups.push((slot, Vec::new()));
                        *g = groups.len() as u32;
                    }
                    groups[*g as usize - 1].1.push(dur);
                });
                groups
            })
            .collect();
        // Key parts are numbered once per (plane, slot), plane and run, so the per-(run, slot)
        // merge hashes three integers instead of three (possibly long) names.
        let mut ids: HashMap<&'a str, u32> = HashMap::new();
        let mut id_of = |s: &'a str| {
            let n = ids.len() as u32;
            *ids.entry(s).or_insert(n)
        };
        let mut name_ids: Vec<Vec<u32>> = names
            .iter()
            .map(|pn| vec![u32::MAX; pn.names.len()])
            .collect();
        let plane_ids: Vec<u32> = names.iter().map(|pn| id_of(pn.plane.name())).collect();
        let mut index: HashMap<(u32, u32, u32), usize> = HashMap::new();
        let mut out: Vec<DurationGroup<'a>> = Vec::new();
        let mut matched = 0usize;
        for (r, groups) in runs.iter().zip(per_run) {
            let pn = &names[r.plane];
            let line_id = if by_line {
                id_of(r.line.name())
            } else {
                u32::MAX
            };
            let plane_id = if by_plane {
                plane_ids[r.plane]
            } else {
                u32::MAX
            };
            for (slot, durs) in groups {
                matched += durs.len();
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
                                if by_line { r.line.name() } else { "" },
                            ),
                            chunks: Vec::new(),
                        });
                        out.len() - 1
                    });
                out[g].chunks.push(durs);
            }
        }
        (matched, out)
    }
}

/// One group of [`EventQuery::group_durations`].
pub struct DurationGroup<'a> {
    /// (event, plane, line); parts not grouped on are `""`.
    pub key: (&'a str, &'a str, &'a str),
    /// The durations, as the runs collected them (concatenated only when sorted: copying
    /// them into one growing vector first cost more than the scan).
    pub chunks: Vec<Vec<i64>>,
}

impl DurationGroup<'_> {
    /// How many durations the group holds.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.chunks.iter().all(Vec::is_empty)
    }
    /// All durations, ascending.
    pub fn sorted(self) -> Vec<i64> {
        sorted_from_chunks(self.chunks)
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
            Some((key, DurationStats::of_sorted(&g.sorted())?))
        })
        .collect()
}

/// A group's duration statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct DurationStats {
    pub count: usize,
    /// Saturating sum.
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

    /// Statistics of ascending `d`. `None` when empty.
    pub fn of_sorted(d: &[i64]) -> Option<DurationStats> {
        if d.is_empty() {
            return None;
        }
        let n = d.len() as f64;
        let total: i64 = d.iter().fold(0i64, |a, b| a.saturating_add(*b));
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

    #[test]
    fn radix_sort_agrees_with_the_standard_sort() {
        // A deterministic mix of small, large, negative and extreme values.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut v: Vec<i64> = (0..50_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
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
