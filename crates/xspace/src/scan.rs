//! Open a capture and visit every event in the same pass that validates it.
//!
//! [`XSpace::open`] validates every event at open and [`Line::events`] decodes them again when
//! asked: two passes over the bytes. A view that reads every event once (aggregating events by
//! name, say) pays for both. [`XSpace::open_scan`] frames the events at open (tags and lengths
//! only) and then validates and decodes each event exactly once, handing it to an
//! [`EventScan`]. When it returns `Ok` the space is as fully validated as one from
//! [`XSpace::open`] and can be used in every other way; on malformed input it fails (or drops
//! the plane, with a diagnostic) exactly as `open` would, and no accumulator of a failed plane
//! is returned.
//!
//! [`XSpace::open_framed`] is the same in two steps: the framed capture tells how its events
//! fall into runs ([`Framed::runs`]) before [`Framed::scan`] visits them, so a scan can lay
//! out its output first (e.g. one buffer per line that its runs fill in place).
//!
//! A scan that needs only the events carrying some stat (the engine's op tables: the host
//! threads' events with an `hlo_op`) names its ids ([`EventScan::only_events_with`]); the
//! others are validated and not handed over, and the test costs nothing beyond the validation.

use std::ops::Range;

use rayon::prelude::*;

use super::{
    Backing, Ctx, Event, Line, Located, Plane, ReadOptions, XSpace, XSpaceError, check_event,
    len_field, malformed, missing_metadata, skipped_plane,
};
use crate::wire::Fields;

/// What [`XSpace::open_scan`] does with the events.
///
/// Runs (a line, or a ~1 MiB chunk of a huge line) are visited in parallel; each gets its own
/// accumulator, returned in file order.
pub trait EventScan: Sync {
    /// One run's state.
    type Acc: Send;
    /// Called once per run before its events; `None` skips the run's events (they are still
    /// validated). Unless the run fails, [`EventScan::event`] is then called once for each
    /// event of `run.events` (that [`EventScan::only_events_with`] lets through), in order.
    fn start(&self, line: Line<'_>, run: &Run) -> Option<Self::Acc>;
    /// One event of the run, in file order; `metadata_position` is
    /// [`Plane::event_metadata_position`] of its metadata id (`None`: the plane lacks it).
    fn event(&self, acc: &mut Self::Acc, event: Event<'_>, metadata_position: Option<usize>);
    /// `Some(ids)`: only the events of `line` with a stat whose metadata id is in `ids` are
    /// passed to [`EventScan::event`] (none if `ids` is empty); the others are validated only.
    /// `None`, the default: every event is. Called once per run that [`EventScan::start`]
    /// accepted. The ids are tested as each stat is validated, so a scan that wants few of a
    /// line's events pays nothing to find them.
    fn only_events_with(&self, _line: Line<'_>) -> Option<Vec<i64>> {
        None
    }
    /// Called once after a run's last event, on the thread that visited it (e.g. to free
    /// scratch memory there rather than on the thread that later merges the accumulators).
    fn finish(&self, _acc: &mut Self::Acc) {}
}

/// One run's accumulator from [`XSpace::open_scan`].
#[derive(Debug)]
pub struct Scanned<A> {
    /// Index of the plane in [`XSpace::planes`] of the returned space.
    pub plane: usize,
    /// Index of the line in [`Plane::lines`].
    pub line: usize,
    /// What [`EventScan::start`] and [`EventScan::event`] made of the run.
    pub acc: A,
}

/// Which events of which line a run holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The line's position among its plane's lines.
    pub line: usize,
    /// The run's events, numbered within the line.
    pub events: Range<usize>,
}

/// A run as [`XSpace::open_framed`] lays it out, before its events are validated.
#[derive(Clone, Debug)]
pub struct FramedRun<'a> {
    /// The plane's position among the file's planes ([`Plane::index`]).
    pub plane: usize,
    /// [`Plane::name`].
    pub plane_name: &'a str,
    /// [`Line::name`].
    pub line_name: &'a str,
    /// The line and its events in the run.
    pub run: Run,
}

/// A capture whose planes and lines are framed (their own fields read, every event's tag and
/// length checked) but whose events are not yet validated ([`XSpace::open_framed`]). It
/// offers no events: their contents are checked only by [`Framed::scan`].
pub struct Framed {
    space: XSpace,
    strict: bool,
}

impl Framed {
    /// Every run of every line, in file order (the order of [`Framed::scan`]'s results).
    pub fn runs(&self) -> Vec<FramedRun<'_>> {
        self.space
            .runs()
            .into_iter()
            .map(|r| {
                let plane = Plane {
                    space: &self.space,
                    d: &self.space.planes[r.plane],
                };
                FramedRun {
                    plane: plane.index(),
                    plane_name: plane.name(),
                    line_name: plane.s(plane.d.lines[r.line].name),
                    run: r.run(),
                }
            })
            .collect()
    }

    /// The HLO modules embedded in the capture ([`crate::hlo::embedded_hlo_modules`]): they
    /// are in the planes' metadata, which framing validates. A plane that [`Framed::scan`]
    /// then drops for a corrupt event takes its modules with it.
    pub fn embedded_hlo_modules(&self) -> Vec<crate::hlo::EmbeddedModule<'_>> {
        crate::hlo::embedded_hlo_modules(&self.space)
    }

    /// Validate the events and pass each to `scan`: [`XSpace::open_scan`]'s second step.
    pub fn scan<S: EventScan>(self, scan: &S) -> ScanResult<S::Acc> {
        self.scan_beside(scan, |_| ()).0
    }

    /// [`Framed::scan`], running `beside` on the framed capture meanwhile (work that needs
    /// no events, such as decoding the embedded HLO, then fills the scan's idle moments
    /// instead of following it).
    pub fn scan_beside<S: EventScan, R: Send>(
        self,
        scan: &S,
        beside: impl FnOnce(&Framed) -> R + Send,
    ) -> (ScanResult<S::Acc>, R) {
        let (visited, r) = rayon::join(|| self.space.visit_all(scan), || beside(&self));
        (self.space.finish_scan(self.strict, visited), r)
    }
}

/// One run of a line's events: bytes `[start, end)` holding `events`.
struct RunSpan {
    plane: usize,
    line: usize,
    start: usize,
    end: usize,
    events: Range<usize>,
}

impl RunSpan {
    fn run(&self) -> Run {
        Run {
            line: self.line,
            events: self.events.clone(),
        }
    }
}

/// A validated space and its runs' accumulators, in file order.
pub type ScanResult<A> = Result<(XSpace, Vec<Scanned<A>>), XSpaceError>;

/// What visiting one run produced: (accumulator, events with unknown metadata).
type RunResult<A> = Result<(Option<A>, usize), Located>;

/// Every run and what visiting it produced.
type Visited<A> = (Vec<RunSpan>, Vec<RunResult<A>>);

impl XSpace {
    /// Open a capture and pass every event to `scan` while validating it: one pass over the
    /// events instead of [`XSpace::open`]'s validation plus a decoding pass. Errors, dropped
    /// planes and diagnostics are those of [`XSpace::open_with`] with the same options.
    pub fn open_scan<S: EventScan>(
        path: impl AsRef<std::path::Path>,
        opts: &ReadOptions,
        scan: &S,
    ) -> ScanResult<S::Acc> {
        Self::open_framed(path, opts)?.scan(scan)
    }

    /// [`XSpace::open_scan`]'s first step: read and frame the capture; errors and dropped
    /// planes of the framing are [`XSpace::open_with`]'s.
    pub fn open_framed(
        path: impl AsRef<std::path::Path>,
        opts: &ReadOptions,
    ) -> Result<Framed, XSpaceError> {
        let path = path.as_ref();
        let buf = Self::read_backing(path, opts)?;
        Ok(Framed {
            space: Self::parse(buf, path.display().to_string(), opts, true)?,
            strict: opts.strict,
        })
    }

    /// [`XSpace::open_scan`] over bytes in memory.
    pub fn from_bytes_scan<S: EventScan>(
        bytes: Vec<u8>,
        name: &str,
        opts: &ReadOptions,
        scan: &S,
    ) -> ScanResult<S::Acc> {
        Self::from_bytes_framed(bytes, name, opts)?.scan(scan)
    }

    /// [`XSpace::open_framed`] over bytes in memory.
    pub fn from_bytes_framed(
        bytes: Vec<u8>,
        name: &str,
        opts: &ReadOptions,
    ) -> Result<Framed, XSpaceError> {
        Ok(Framed {
            space: Self::parse(Backing::Owned(bytes), name.to_string(), opts, true)?,
            strict: opts.strict,
        })
    }

    /// Every run visited, in parallel.
    fn visit_all<S: EventScan>(&self, scan: &S) -> Visited<S::Acc> {
        let runs = self.runs();
        let results = runs.par_iter().map(|r| self.visit(r, scan)).collect();
        (runs, results)
    }

    /// The space with the planes whose runs failed dropped (an error in strict mode), and the
    /// other runs' accumulators.
    fn finish_scan<A>(mut self, strict: bool, (runs, results): Visited<A>) -> ScanResult<A> {
        // Per plane: the first error in file order, or the events with unknown metadata.
        let n = self.planes.len();
        let mut failed: Vec<Option<Located>> = (0..n).map(|_| None).collect();
        let mut missing = vec![0usize; n];
        let mut accs = Vec::with_capacity(results.len());
        for (r, res) in runs.iter().zip(results) {
            match res {
                Ok((acc, m)) => {
                    missing[r.plane] += m;
                    if let Some(acc) = acc {
                        accs.push((r.plane, r.line, acc));
                    }
                }
                Err(l) => {
                    if failed[r.plane].is_none() {
                        failed[r.plane] = Some(l);
                    }
                }
            }
        }
        for (pi, m) in missing.iter().enumerate() {
            if *m > 0 && failed[pi].is_none() {
                let name = Plane {
                    space: &self,
                    d: &self.planes[pi],
                }
                .name()
                .to_string();
                self.diagnostics.push(missing_metadata(&name, *m));
            }
        }
        // Drop the planes that failed (an error in strict mode), as `open` does.
        let mut new_index = vec![usize::MAX; n];
        let mut kept = Vec::with_capacity(n);
        let planes = std::mem::take(&mut self.planes);
        for (pi, (p, f)) in planes.into_iter().zip(failed).enumerate() {
            match f {
                None => {
                    new_index[pi] = kept.len();
                    kept.push(p);
                }
                Some(l) if strict => return Err(malformed(&self.source, &self.buf, l)),
                Some(l) => {
                    self.skipped_planes += 1;
                    self.diagnostics.push(skipped_plane(&l));
                }
            }
        }
        self.planes = kept;
        let scanned = accs
            .into_iter()
            .filter(|(p, _, _)| new_index[*p] != usize::MAX)
            .map(|(p, line, acc)| Scanned {
                plane: new_index[p],
                line,
                acc,
            })
            .collect();
        Ok((self, scanned))
    }

    /// Every line's runs, in file order (chunked lines in their chunks).
    fn runs(&self) -> Vec<RunSpan> {
        let lines = self.planes.iter().flat_map(|p| &p.lines);
        let mut runs = Vec::with_capacity(lines.map(|l| l.chunks.len().max(1)).sum());
        for (pi, p) in self.planes.iter().enumerate() {
            for (li, l) in p.lines.iter().enumerate() {
                runs.extend(l.runs().map(|((start, end), events)| RunSpan {
                    plane: pi,
                    line: li,
                    start,
                    end,
                    events,
                }));
            }
        }
        runs
    }

    /// Validate and decode one run's events, feeding them to `scan`.
    fn visit<S: EventScan>(&self, r: &RunSpan, scan: &S) -> RunResult<S::Acc> {
        let plane = Plane {
            space: self,
            d: &self.planes[r.plane],
        };
        let line = Line {
            plane,
            d: &plane.d.lines[r.line],
        };
        let buf: &[u8] = &self.buf;
        let ctx = || {
            let d = plane.d;
            let name = std::str::from_utf8(&buf[d.name.0..d.name.1]).unwrap_or("");
            format!("XSpace.planes[{}] ('{name}').lines[{}]", d.index, r.line)
        };
        let mut acc = scan.start(line, &r.run());
        let wanted = acc.as_ref().and_then(|_| scan.only_events_with(line));
        let wanted_ids = wanted.as_deref().unwrap_or(&[]);
        let (mut p, end) = (r.start, r.end);
        let (mut k, mut missing) = (r.events.start, 0usize);
        while p < end {
            if buf[p] != 0x22 {
                // The line's own fields were checked when it was framed.
                p = Fields::field_at(buf, p, end).ctx(ctx)?.1;
                continue;
            }
            let ((es, ee), next) = len_field(buf, p, end).ctx(ctx)?;
            let c =
                check_event(buf, es, ee, wanted_ids).ctx(|| format!("{}.events[{k}]", ctx()))?;
            let position = plane.d.event_index.get(c.metadata_id);
            if position.is_none() {
                missing += 1;
            }
            if let Some(a) = acc.as_mut()
                && (wanted.is_none() || c.has_wanted_stat)
            {
                let ev = Event {
                    line,
                    msg: (es, ee),
                    metadata_id: c.metadata_id,
                    data: c.data,
                    duration_ps: c.duration_ps,
                };
                scan.event(a, ev, position);
            }
            k += 1;
            p = next;
        }
        if let Some(a) = acc.as_mut() {
            scan.finish(a);
        }
        Ok((acc, missing))
    }
}
