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
    /// validated).
    fn start(&self, line: Line<'_>) -> Option<Self::Acc>;
    /// One event of the run, in file order; `metadata_position` is
    /// [`Plane::event_metadata_position`] of its metadata id (`None`: the plane lacks it).
    fn event(&self, acc: &mut Self::Acc, event: Event<'_>, metadata_position: Option<usize>);
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

/// One run of a line's events: `[start, end)` holding events numbered from `first`.
struct Run {
    plane: usize,
    line: usize,
    start: usize,
    end: usize,
    first: usize,
}

/// A validated space and its runs' accumulators, in file order.
pub type ScanResult<A> = Result<(XSpace, Vec<Scanned<A>>), XSpaceError>;

/// What visiting one run produced: (accumulator, events with unknown metadata).
type RunResult<A> = Result<(Option<A>, usize), Located>;

impl XSpace {
    /// Open a capture and pass every event to `scan` while validating it: one pass over the
    /// events instead of [`XSpace::open`]'s validation plus a decoding pass. Errors, dropped
    /// planes and diagnostics are those of [`XSpace::open_with`] with the same options.
    pub fn open_scan<S: EventScan>(
        path: impl AsRef<std::path::Path>,
        opts: &ReadOptions,
        scan: &S,
    ) -> ScanResult<S::Acc> {
        let path = path.as_ref();
        let buf = Self::read_backing(path, opts)?;
        let space = Self::parse(buf, path.display().to_string(), opts, true)?;
        space.scan_deferred(opts, scan)
    }

    /// [`XSpace::open_scan`] over bytes in memory.
    pub fn from_bytes_scan<S: EventScan>(
        bytes: Vec<u8>,
        name: &str,
        opts: &ReadOptions,
        scan: &S,
    ) -> ScanResult<S::Acc> {
        let space = Self::parse(Backing::Owned(bytes), name.to_string(), opts, true)?;
        space.scan_deferred(opts, scan)
    }

    fn scan_deferred<S: EventScan>(mut self, opts: &ReadOptions, scan: &S) -> ScanResult<S::Acc> {
        let runs = self.runs();
        let results: Vec<RunResult<S::Acc>> = {
            let space = &self;
            runs.par_iter().map(|r| space.visit(r, scan)).collect()
        };
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
                Some(l) if opts.strict => return Err(malformed(&self.source, &self.buf, l)),
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
    fn runs(&self) -> Vec<Run> {
        let lines = self.planes.iter().flat_map(|p| &p.lines);
        let mut runs = Vec::with_capacity(lines.map(|l| l.chunks.len().max(1)).sum());
        for (pi, p) in self.planes.iter().enumerate() {
            for (li, l) in p.lines.iter().enumerate() {
                let (s, e) = l.msg;
                if l.chunks.is_empty() {
                    runs.push(Run {
                        plane: pi,
                        line: li,
                        start: s,
                        end: e,
                        first: 0,
                    });
                    continue;
                }
                for (k, &(start, first)) in l.chunks.iter().enumerate() {
                    let end = l.chunks.get(k + 1).map_or(e, |c| c.0);
                    runs.push(Run {
                        plane: pi,
                        line: li,
                        start,
                        end,
                        first,
                    });
                }
            }
        }
        runs
    }

    /// Validate and decode one run's events, feeding them to `scan`.
    fn visit<S: EventScan>(&self, r: &Run, scan: &S) -> RunResult<S::Acc> {
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
        let mut acc = scan.start(line);
        let (mut p, end) = (r.start, r.end);
        let (mut k, mut missing) = (r.first, 0usize);
        while p < end {
            if buf[p] != 0x22 {
                // The line's own fields were checked when it was framed.
                p = Fields::field_at(buf, p, end).ctx(ctx)?.1;
                continue;
            }
            let ((es, ee), next) = len_field(buf, p, end).ctx(ctx)?;
            let (metadata_id, data, duration_ps) =
                check_event(buf, es, ee).ctx(|| format!("{}.events[{k}]", ctx()))?;
            let position = plane.d.event_index.get(metadata_id);
            if position.is_none() {
                missing += 1;
            }
            if let Some(a) = acc.as_mut() {
                let ev = Event {
                    line,
                    msg: (es, ee),
                    metadata_id,
                    data,
                    duration_ps,
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
