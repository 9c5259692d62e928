//! The hot-path XSpace reader: a lazy, zero-copy protobuf decoder for XProf captures
//! (`*.xplane.pb`, package `tensorflow.profiler`).
//!
//! [`XSpace::open`] maps the file (or reads it, for small files) and does **one validating pass**
//! in parallel (planes, the lines of each plane, 1 MiB chunks of huge lines, on rayon): every
//! field's wire type, every
//! length, every varint and every UTF-8 string is checked, but nothing below a line is stored.
//! Events are decoded again each time [`Line::events`] is iterated and stats only when asked
//! for — which is why, after `open` succeeded, no accessor can fail.
//!
//! Semantics are protobuf's (prost is the reference and a test compares both on every capture
//! of the corpus): unknown fields are skipped, the last value of a scalar wins, repeated fields
//! append — so a concatenation of two XSpaces is read as their merge — and map entries with the
//! same key keep the last. Offsets are `usize` (64-bit), so files over 4 GiB work.
//!
//! Malformed input is an [`XSpaceError::Malformed`] naming the file, the byte offset and the
//! place in the message tree. One exception keeps a capture usable: a plane whose *own* content
//! is corrupt (while its length framing is intact) is dropped with a [`XSpace::diagnostics`]
//! entry and [`XSpace::is_complete`] returns false ([`ReadOptions::strict`] makes it an error
//! instead). Other oddities — events pointing at metadata the plane lacks, map keys that
//! disagree with the metadata's own id, absolute-epoch timestamps — are diagnostics too.
//!
//! Metadata tables accept sparse 64-bit ids (real captures key `/host:metadata` by program
//! fingerprints): a dense vector when ids are small, a hash map otherwise.
//!
//! Stats are resolved **by name** through the plane's stat metadata (ids differ per plane).
//! [`Event::stat`] looks only at the event's own stats, [`Event::metadata_stat`] only at its
//! metadata's, [`Event::stat_or_metadata`] tries both in that order — XProf's converters pick
//! one explicitly per stat, and so should callers.
//!
//! A view that reads every event once can skip the second pass: [`XSpace::open_scan`] frames
//! the events at open and validates each one as it hands it to an [`EventScan`] — same
//! errors, dropped planes and diagnostics as `open`, one pass instead of two.
//!
//! Also here: [`ReadOptions::only_planes`] (index only the planes a view needs),
//! [`Line::events_chunked`] (iterate one huge line on several threads),
//! [`Plane::event_metadata_position`] (dense per-plane tables instead of hashing 64-bit ids),
//! [`self_times`] (XProf's AncestorStack: nesting → self time), [`hlo::embedded_hlo_modules`]
//! (the HLO modules in `/host:metadata`; `xprof-capture`'s `Session::hlo_modules` adds the
//! `.hlo_proto.pb` files of a run), [`names`] (XProf's plane/line/stat names) and [`wire`] (the
//! decoder itself). `BENCHMARKS.md` beside this crate has the figures.
//!
//! ```no_run
//! use std::collections::HashMap;
//! use xprof_xspace::XSpace;
//!
//! let space = XSpace::open("host0.xplane.pb")?;
//! for plane in space.planes().filter(|p| p.name().starts_with("/device:TPU:")) {
//!     let Some(ops) = plane.line_by_name("XLA Ops") else { continue };
//!     // Per HLO category: (occurrences, device time in ps).
//!     let mut per_category: HashMap<&str, (u64, i64)> = HashMap::new();
//!     for ev in ops.events() {
//!         let (_, dur) = ev.device_timespan(); // TPU ops use the device clock
//!         // `hlo_category` is a metadata stat, not an event stat.
//!         let cat = ev.metadata_stat("hlo_category").and_then(|s| s.str()).unwrap_or("");
//!         let e = per_category.entry(cat).or_default();
//!         e.0 += 1;
//!         e.1 += dur;
//!     }
//!     println!("{}: {per_category:?}", plane.name());
//! }
//! # Ok::<(), xprof_xspace::XSpaceError>(())
//! ```

#![warn(missing_docs)]

mod error;
pub mod file;
pub mod hlo;
pub mod names;
mod nesting;
mod scan;
mod table;
pub mod wire;

pub use error::XSpaceError;
pub use nesting::{NestedEvent, self_times};
pub use scan::{EventScan, Framed, FramedRun, Run, ScanResult, Scanned};

use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use table::IdIndex;
use wire::{Field, Fields, WireError, WireResult};

/// Files at least this large are memory-mapped; smaller ones are read (a map costs more than a
/// read for tiny files, and an empty file cannot be mapped).
const MMAP_THRESHOLD: u64 = 256 * 1024;

/// Stat name → id. Looked up once per `stat(name)` call, often per event, so it uses a fast
/// unkeyed hash: names are short, trusted (they come from the capture's own small table) and
/// SipHash's flooding resistance buys nothing here.
type NameMap = HashMap<Box<str>, i64, foldhash::fast::FixedState>;

/// A byte range `[start, end)` of the file.
type Span = (usize, usize);

enum Backing {
    Mmap(file::MappedRegion),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Backing {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Backing::Mmap(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

/// Which planes to index, by name (see [`ReadOptions::planes`]).
pub type PlaneFilter = std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// How to read a capture.
#[derive(Clone, Default)]
pub struct ReadOptions {
    /// Fail on a corrupt plane instead of dropping it with a diagnostic.
    pub strict: bool,
    /// Never memory-map (read the whole file instead). Mapping is the default for files of
    /// 256 KiB and more (a mapped file truncated while read ends the call with exit 4: `file`).
    pub no_mmap: bool,
    /// Index (and validate) only the planes whose name passes this filter; the others are
    /// skipped unread, which makes e.g. reading `/host:metadata` of a large capture cheap.
    /// The top-level framing of every plane is still checked.
    pub planes: Option<PlaneFilter>,
}

impl ReadOptions {
    /// Only planes whose name satisfies `f`.
    pub fn only_planes(mut self, f: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.planes = Some(std::sync::Arc::new(f));
        self
    }
}

impl std::fmt::Debug for ReadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOptions")
            .field("strict", &self.strict)
            .field("no_mmap", &self.no_mmap)
            .field("planes", &self.planes.as_ref().map(|_| "<filter>"))
            .finish()
    }
}

/// The name of the plane at `span`, read without parsing the rest (last `name` field wins).
fn plane_name_only(buf: &[u8], (s, e): Span) -> WireResult<&str> {
    let mut name = "";
    for f in Fields::new(buf, s, e) {
        let f = f?;
        if f.number == 2 {
            let (a, b) = f.string(buf, "name")?;
            name = std::str::from_utf8(&buf[a..b]).unwrap_or("");
        }
    }
    Ok(name)
}

/// One XSpace file (one host's capture), validated and indexed.
pub struct XSpace {
    buf: Backing,
    source: String,
    planes: Vec<PlaneData>,
    errors: Vec<Span>,
    warnings: Vec<Span>,
    hostnames: Vec<Span>,
    diagnostics: Vec<String>,
    skipped_planes: usize,
}

impl std::fmt::Debug for XSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XSpace")
            .field("source", &self.source)
            .field("bytes", &self.buf.len())
            .field("planes", &self.planes.len())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// Parsed (index) data, owned by XSpace; the public views below borrow it.

struct PlaneData {
    index: usize,
    id: i64,
    name: Span,
    lines: Vec<LineData>,
    stats: Vec<Span>,
    event_metadata: Vec<MetaData>,
    event_index: IdIndex,
    stat_metadata: Vec<StatMetaData>,
    stat_index: IdIndex,
    stat_by_name: NameMap,
    device_offset_id: Option<i64>,
    device_duration_id: Option<i64>,
}

struct LineData {
    id: i64,
    display_id: i64,
    name: Span,
    display_name: Span,
    timestamp_ns: i64,
    duration_ps: i64,
    msg: Span,
    num_events: usize,
    /// For lines validated in chunks: each chunk's start and the events before it.
    chunks: Vec<(usize, usize)>,
}

impl LineData {
    /// The line's runs in file order, as (bytes, events numbered within the line): its ~1 MiB
    /// chunks when it was validated in chunks, else the whole line.
    fn runs(&self) -> impl Iterator<Item = (Span, std::ops::Range<usize>)> + '_ {
        let n = self.chunks.len().max(1);
        (0..n).map(move |k| {
            let (start, first) = self.chunks.get(k).copied().unwrap_or((self.msg.0, 0));
            let (end, last) = self
                .chunks
                .get(k + 1)
                .copied()
                .unwrap_or((self.msg.1, self.num_events));
            ((start, end), first..last)
        })
    }
}

struct MetaData {
    key: i64,
    id: i64,
    name: Span,
    display_name: Span,
    metadata: Span,
    /// The map entry's value message; a value field repeated within one entry merges (its
    /// repeated fields append), so later occurrences are kept in `more` (normally empty).
    msg: Span,
    more: Vec<Span>,
}

struct StatMetaData {
    key: i64,
    id: i64,
    name: Span,
    description: Span,
}

const EMPTY: Span = (0, 0);

// ---------------------------------------------------------------------------------------------
// Parsing

/// A wire error plus where in the tree it happened.
struct Located {
    err: WireError,
    context: String,
}

trait Ctx<T> {
    fn ctx(self, f: impl FnOnce() -> String) -> Result<T, Located>;
}

impl<T> Ctx<T> for WireResult<T> {
    // Inlined: on hot paths the `Ok` arm must cost nothing (the error arm is cold).
    #[inline(always)]
    fn ctx(self, f: impl FnOnce() -> String) -> Result<T, Located> {
        match self {
            Ok(v) => Ok(v),
            Err(err) => Err(located(err, f)),
        }
    }
}

#[cold]
#[inline(never)]
fn located(err: WireError, f: impl FnOnce() -> String) -> Located {
    Located { err, context: f() }
}

#[inline]
fn i(v: u64) -> i64 {
    v as i64
}

/// A length-delimited field whose one-byte tag is at `p`: its payload span and the position
/// after it.
#[inline(always)]
fn len_field(buf: &[u8], p: usize, e: usize) -> WireResult<(Span, usize)> {
    let mut q = p + 1;
    let len_at = q;
    let len = wire::read_varint(buf, &mut q, e)?;
    if len > (e - q) as u64 {
        return Err(WireError {
            offset: len_at as u64,
            kind: wire::WireErrorKind::Truncated,
        });
    }
    let end = q + len as usize;
    Ok(((q, end), end))
}

/// Validate one XStat message (every oneof member's wire type, strings' UTF-8); returns its
/// metadata id (the last one, as [`decode_stat`] reads it; 0 when absent).
#[inline(always)]
fn validate_stat(buf: &[u8], s: usize, e: usize) -> WireResult<i64> {
    let mut p = s;
    let mut id = 0;
    // Predicted layout: metadata_id first.
    if p < e && buf[p] == 0x08 {
        p += 1;
        id = i(wire::read_varint(buf, &mut p, e)?);
    }
    while p < e {
        // Fast path: the one-byte tags of XStat's fields with their schema wire types.
        match buf[p] {
            0x08 => {
                p += 1;
                id = i(wire::read_varint(buf, &mut p, e)?);
                continue;
            }
            0x18 | 0x20 | 0x38 => {
                p = wire::skip_varint(buf, p + 1, e)?;
                continue;
            }
            0x11 if e - p > 8 => {
                p += 9;
                continue;
            }
            0x2a => {
                let (sp, next) = len_field(buf, p, e)?;
                if std::str::from_utf8(&buf[sp.0..sp.1]).is_ok() {
                    p = next;
                    continue;
                }
                // Invalid UTF-8: fall through so the general path reports it.
            }
            0x32 | 0x42 => {
                p = len_field(buf, p, e)?.1;
                continue;
            }
            _ => {}
        }
        let (f, next) = Fields::field_at(buf, p, e)?;
        p = next;
        match f.number {
            1 => id = i(f.varint("metadata_id")?),
            2 => drop(f.fixed64("double_value")?),
            3 => drop(f.varint("uint64_value")?),
            4 => drop(f.varint("int64_value")?),
            5 => drop(f.string(buf, "str_value")?),
            6 => drop(f.len("bytes_value")?),
            7 => drop(f.varint("ref_value")?),
            8 => drop(f.len("compressed_str_value")?),
            _ => {}
        }
    }
    Ok(id)
}

/// Validate one XEvent; returns its metadata id.
#[inline(always)]
fn validate_event(buf: &[u8], s: usize, e: usize) -> WireResult<i64> {
    let mut metadata_id = 0;
    let mut p = s;
    // Predicted layout (what XProf writes): metadata_id, offset_ps, duration_ps, then stats.
    // Testing the tags in that order keeps branches predictable; anything else, in any order,
    // falls to the general loop below (a later metadata_id still wins there).
    if p < e && buf[p] == 0x08 {
        p += 1;
        metadata_id = i(wire::read_varint(buf, &mut p, e)?);
    }
    if p < e && buf[p] == 0x10 {
        p = wire::skip_varint(buf, p + 1, e)?;
    }
    if p < e && buf[p] == 0x18 {
        p = wire::skip_varint(buf, p + 1, e)?;
    }
    while p < e && buf[p] == 0x22 {
        let ((ss, se), next) = len_field(buf, p, e)?;
        validate_stat(buf, ss, se)?;
        p = next;
    }
    while p < e {
        match buf[p] {
            0x08 => {
                p += 1;
                metadata_id = i(wire::read_varint(buf, &mut p, e)?);
                continue;
            }
            0x10 | 0x18 | 0x28 => {
                p = wire::skip_varint(buf, p + 1, e)?;
                continue;
            }
            0x22 => {
                let ((ss, se), next) = len_field(buf, p, e)?;
                validate_stat(buf, ss, se)?;
                p = next;
                continue;
            }
            _ => {}
        }
        let (f, next) = Fields::field_at(buf, p, e)?;
        p = next;
        match f.number {
            1 => metadata_id = i(f.varint("metadata_id")?),
            2 => drop(f.varint("offset_ps")?),
            3 => drop(f.varint("duration_ps")?),
            5 => drop(f.varint("num_occurrences")?),
            4 => {
                let (ss, se) = f.len("stats")?;
                validate_stat(buf, ss, se)?;
            }
            _ => {}
        }
    }
    Ok(metadata_id)
}

/// [`validate_event`] that also decodes what [`Events`] would: metadata id, data, duration —
/// validation and decoding in one pass (see [`XSpace::open_scan`]) — and tells whether one of
/// its stats has a metadata id in `wanted` (see [`scan::EventScan::only_events_with`]).
#[inline(always)]
fn check_event(buf: &[u8], s: usize, e: usize, wanted: &[i64]) -> WireResult<CheckedEvent> {
    let mut c = CheckedEvent {
        metadata_id: 0,
        data: EventData::None,
        duration_ps: 0,
        has_wanted_stat: false,
    };
    let mut p = s;
    // The predicted layout first, as in `validate_event`.
    if p < e && buf[p] == 0x08 {
        p += 1;
        c.metadata_id = i(wire::read_varint(buf, &mut p, e)?);
    }
    if p < e && buf[p] == 0x10 {
        p += 1;
        c.data = EventData::OffsetPs(i(wire::read_varint_wide(buf, &mut p, e)?));
    }
    if p < e && buf[p] == 0x18 {
        p += 1;
        c.duration_ps = i(wire::read_varint_wide(buf, &mut p, e)?);
    }
    while p < e && buf[p] == 0x22 {
        let ((ss, se), next) = len_field(buf, p, e)?;
        let id = validate_stat(buf, ss, se)?;
        c.has_wanted_stat |= wanted.contains(&id);
        p = next;
    }
    while p < e {
        let (f, next) = Fields::field_at(buf, p, e)?;
        p = next;
        match f.number {
            1 => c.metadata_id = i(f.varint("metadata_id")?),
            2 => c.data = EventData::OffsetPs(i(f.varint("offset_ps")?)),
            3 => c.duration_ps = i(f.varint("duration_ps")?),
            5 => c.data = EventData::NumOccurrences(i(f.varint("num_occurrences")?)),
            4 => {
                let (ss, se) = f.len("stats")?;
                let id = validate_stat(buf, ss, se)?;
                c.has_wanted_stat |= wanted.contains(&id);
            }
            _ => {}
        }
    }
    Ok(c)
}

/// What [`check_event`] read.
struct CheckedEvent {
    metadata_id: i64,
    data: EventData,
    duration_ps: i64,
    has_wanted_stat: bool,
}

/// Lines larger than this are validated in chunks on several threads (a capture may put most
/// of its events on one line, e.g. a Python thread or a TPU `XLA Ops` line).
const LINE_CHUNK_BYTES: usize = 1 << 20;

/// What one chunk of a line's fields set (scalars: `None` = not present in the chunk).
#[derive(Default)]
struct LinePart {
    id: Option<i64>,
    display_id: Option<i64>,
    name: Option<Span>,
    display_name: Option<Span>,
    timestamp_ns: Option<i64>,
    duration_ps: Option<i64>,
    num_events: usize,
    missing_meta: usize,
}

/// Parse the line fields in `[s, e)` (whole fields), whose first event is number `first_event`.
fn parse_line_part(
    buf: &[u8],
    (s, e): Span,
    ctx: &dyn Fn() -> String,
    first_event: usize,
    meta: &IdIndex,
) -> Result<LinePart, Located> {
    let mut l = LinePart::default();
    let mut p = s;
    while p < e {
        // Fast path: an event (field 4, length-delimited).
        if buf[p] == 0x22 {
            let ((es, ee), next) = len_field(buf, p, e).ctx(ctx)?;
            let mid = validate_event(buf, es, ee)
                .ctx(|| format!("{}.events[{}]", ctx(), first_event + l.num_events))?;
            if meta.get(mid).is_none() {
                l.missing_meta += 1;
            }
            l.num_events += 1;
            p = next;
            continue;
        }
        let (f, next) = Fields::field_at(buf, p, e).ctx(ctx)?;
        p = next;
        line_field(&mut l, &f, buf).ctx(ctx)?;
    }
    Ok(l)
}

/// One of XLine's own fields (anything but a well-formed event) into `l`. An `events` field
/// that is not length-delimited is reported here; one behind an overlong tag is skipped, as
/// [`Events`] skips it.
fn line_field(l: &mut LinePart, f: &Field, buf: &[u8]) -> WireResult<()> {
    match f.number {
        1 => l.id = Some(i(f.varint("id")?)),
        10 => l.display_id = Some(i(f.varint("display_id")?)),
        2 => l.name = Some(f.string(buf, "name")?),
        11 => l.display_name = Some(f.string(buf, "display_name")?),
        3 => l.timestamp_ns = Some(i(f.varint("timestamp_ns")?)),
        9 => l.duration_ps = Some(i(f.varint("duration_ps")?)),
        4 => drop(f.len("events")?),
        _ => {}
    }
    Ok(())
}

/// The error for malformed input at `l` in `source` (whose bytes are `buf`).
fn malformed(source: &str, buf: &[u8], l: Located) -> XSpaceError {
    XSpaceError::Malformed {
        source_name: source.to_string(),
        offset: l.err.offset,
        context: l.context,
        detail: l.err.kind.to_string(),
        looks_like: error::sniff(buf),
    }
}

/// The diagnostic of a plane dropped for the malformed content at `l`.
fn skipped_plane(l: &Located) -> String {
    format!(
        "plane skipped: malformed at byte {} in {}: {} (the other planes were read)",
        l.err.offset, l.context, l.err.kind
    )
}

/// The diagnostic of a plane with `n` events whose metadata it does not define.
fn missing_metadata(plane_name: &str, n: usize) -> String {
    format!(
        "plane '{plane_name}': {n} events reference event metadata ids the plane does not define (their name is empty)"
    )
}

/// The first error in sequence order (rayon's `collect` into `Result` may return any).
fn first_error<T>(v: Vec<Result<T, Located>>) -> Result<Vec<T>, Located> {
    v.into_iter().collect()
}

fn parse_line(
    buf: &[u8],
    (s, e): Span,
    plane_ctx: &str,
    li: usize,
    meta: &IdIndex,
) -> Result<(LineData, usize), Located> {
    let ctx = || format!("{plane_ctx}.lines[{li}]");
    // Chunk boundaries at field starts, found by a framing-only pass over the line's own fields
    // (one tag and one length per event), with the number of events before each chunk.
    let mut chunks: Vec<(Span, usize)> = Vec::new();
    if e - s >= 2 * LINE_CHUNK_BYTES {
        let (mut start, mut events) = (s, 0usize);
        let mut before = 0usize;
        let mut p = s;
        loop {
            if p - start >= LINE_CHUNK_BYTES || p >= e {
                chunks.push(((start, p), before));
                (start, before) = (p, events);
            }
            if p >= e {
                break;
            }
            if buf[p] == 0x22 {
                p = len_field(buf, p, e).ctx(ctx)?.1;
                events += 1;
            } else {
                let (f, next) = Fields::field_at(buf, p, e).ctx(ctx)?;
                if f.number == 4 {
                    events += 1;
                }
                p = next;
            }
        }
    } else {
        chunks.push(((s, e), 0));
    }
    let parts = if chunks.len() == 1 {
        vec![parse_line_part(buf, chunks[0].0, &ctx, 0, meta)?]
    } else {
        first_error(
            chunks
                .par_iter()
                .map(|(span, before)| parse_line_part(buf, *span, &ctx, *before, meta))
                .collect(),
        )?
    };
    // Merge in file order: the last value of a scalar wins, as in protobuf.
    let mut l = LineData {
        id: 0,
        display_id: 0,
        name: EMPTY,
        display_name: EMPTY,
        timestamp_ns: 0,
        duration_ps: 0,
        msg: (s, e),
        num_events: 0,
        chunks: if chunks.len() > 1 {
            chunks
                .iter()
                .map(|((a, _), before)| (*a, *before))
                .collect()
        } else {
            Vec::new()
        },
    };
    let mut missing_meta = 0;
    for p in parts {
        l.id = p.id.unwrap_or(l.id);
        l.display_id = p.display_id.unwrap_or(l.display_id);
        l.name = p.name.unwrap_or(l.name);
        l.display_name = p.display_name.unwrap_or(l.display_name);
        l.timestamp_ns = p.timestamp_ns.unwrap_or(l.timestamp_ns);
        l.duration_ps = p.duration_ps.unwrap_or(l.duration_ps);
        l.num_events += p.num_events;
        missing_meta += p.missing_meta;
    }
    Ok((l, missing_meta))
}

/// [`parse_line`] without looking inside the events: the line's own fields are parsed and
/// every event's tag and length checked (which is what counting and chunking need); the events'
/// contents are left to the single validating pass of [`XSpace::open_scan`].
fn frame_line(buf: &[u8], (s, e): Span, plane_ctx: &str, li: usize) -> Result<LineData, Located> {
    let ctx = || format!("{plane_ctx}.lines[{li}]");
    let chunked = e - s >= 2 * LINE_CHUNK_BYTES;
    let mut chunks: Vec<(usize, usize)> = vec![(s, 0)];
    let mut l = LinePart::default();
    let mut p = s;
    // A chunk ends before the first field that starts at or past `chunk_full`.
    let mut chunk_full = if chunked {
        s + LINE_CHUNK_BYTES
    } else {
        usize::MAX
    };
    while p < e {
        if p >= chunk_full {
            chunks.push((p, l.num_events));
            chunk_full = p + LINE_CHUNK_BYTES;
        }
        let stop = e.min(chunk_full);
        (p, l.num_events) = frame_events(buf, p, stop, e, l.num_events);
        if p >= stop {
            continue;
        }
        // Anything the hot loop left: a longer length, a truncated event, the line's fields.
        if buf[p] == 0x22 {
            p = len_field(buf, p, e).ctx(ctx)?.1;
            l.num_events += 1;
            continue;
        }
        let (f, next) = Fields::field_at(buf, p, e).ctx(ctx)?;
        p = next;
        line_field(&mut l, &f, buf).ctx(ctx)?;
    }
    if chunks.len() == 1 {
        chunks.clear();
    }
    Ok(LineData {
        id: l.id.unwrap_or(0),
        display_id: l.display_id.unwrap_or(0),
        name: l.name.unwrap_or(EMPTY),
        display_name: l.display_name.unwrap_or(EMPTY),
        timestamp_ns: l.timestamp_ns.unwrap_or(0),
        duration_ps: l.duration_ps.unwrap_or(0),
        msg: (s, e),
        num_events: l.num_events,
        chunks,
    })
}

/// Skip the events from `p` while they start before `stop` and their length takes one or two
/// bytes and stays within `e` (the line's end); returns the position reached and `n` plus the
/// events skipped. It stops, without judging it, at anything else (a line field, a longer or
/// malformed length), which the caller frames with the checking path. The hot loop of framing:
/// a tag test and a length per event.
#[inline(always)]
fn frame_events(buf: &[u8], mut p: usize, stop: usize, e: usize, mut n: usize) -> (usize, usize) {
    let b = &buf[..e];
    // Tag, length and the length's possible second byte are all before `e` when p + 3 <= e.
    let stop = stop.min(e.saturating_sub(2));
    while p < stop {
        let (tag, l0) = (b[p], b[p + 1]);
        if tag != 0x22 {
            break;
        }
        let next = if l0 < 0x80 {
            p + 2 + l0 as usize
        } else {
            let l1 = b[p + 2];
            if l1 >= 0x80 {
                break;
            }
            p + 3 + ((l0 & 0x7f) as usize | (l1 as usize) << 7)
        };
        if next > e {
            break;
        }
        p = next;
        n += 1;
    }
    (p, n)
}

fn parse_stat_metadata(buf: &[u8], (s, e): Span) -> WireResult<StatMetaData> {
    let mut key = 0;
    let mut m = StatMetaData {
        key: 0,
        id: 0,
        name: EMPTY,
        description: EMPTY,
    };
    for f in Fields::new(buf, s, e) {
        let f = f?;
        match f.number {
            1 => key = i(f.varint("key")?),
            2 => {
                let (vs, ve) = f.len("value")?;
                // A repeated occurrence of the value merges into the previous one.
                for g in Fields::new(buf, vs, ve) {
                    let g = g?;
                    match g.number {
                        1 => m.id = i(g.varint("id")?),
                        2 => m.name = g.string(buf, "name")?,
                        3 => m.description = g.string(buf, "description")?,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    m.key = key;
    Ok(m)
}

fn parse_event_metadata(buf: &[u8], (s, e): Span) -> WireResult<MetaData> {
    let mut m = MetaData {
        key: 0,
        id: 0,
        name: EMPTY,
        display_name: EMPTY,
        metadata: EMPTY,
        msg: EMPTY,
        more: Vec::new(),
    };
    for f in Fields::new(buf, s, e) {
        let f = f?;
        match f.number {
            1 => m.key = i(f.varint("key")?),
            2 => {
                let (vs, ve) = f.len("value")?;
                if m.msg == EMPTY {
                    m.msg = (vs, ve);
                } else {
                    m.more.push((vs, ve));
                }
                for g in Fields::new(buf, vs, ve) {
                    let g = g?;
                    match g.number {
                        1 => m.id = i(g.varint("id")?),
                        2 => m.name = g.string(buf, "name")?,
                        4 => m.display_name = g.string(buf, "display_name")?,
                        3 => m.metadata = g.len("metadata")?,
                        5 => {
                            let (ss, se) = g.len("stats")?;
                            validate_stat(buf, ss, se)?;
                        }
                        6 => wire::for_each_packed_varint(buf, &g, "child_id", |_| {})?,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(m)
}

/// Sort by key keeping the *last* of equal keys (protobuf map semantics), then index.
fn dedupe_by_key<T>(mut v: Vec<T>, key: impl Fn(&T) -> i64) -> (Vec<T>, IdIndex, usize) {
    let n = v.len();
    // Stable sort keeps wire order among equal keys; reversing first makes the last one first.
    v.reverse();
    v.sort_by_key(|m| key(m));
    v.dedup_by_key(|m| key(m));
    let dups = n - v.len();
    let index = IdIndex::build(v.iter().map(&key));
    (v, index, dups)
}

/// A plane's metadata maps, indexed, with the diagnostics they gave.
struct PlaneMeta {
    stat_metadata: Vec<StatMetaData>,
    stat_index: IdIndex,
    event_metadata: Vec<MetaData>,
    event_index: IdIndex,
    stat_by_name: NameMap,
    diags: Vec<String>,
}

/// Parse and index the plane's stat and event metadata (`named`: the plane's context).
fn plane_metadata(
    buf: &[u8],
    named: &str,
    plane_name: &str,
    sm_spans: &[Span],
    em_spans: &[Span],
) -> Result<PlaneMeta, Located> {
    let mut diags = Vec::new();
    let sms = sm_spans
        .iter()
        .enumerate()
        .map(|(k, sp)| parse_stat_metadata(buf, *sp).ctx(|| format!("{named}.stat_metadata[{k}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let ems = em_spans
        .par_iter()
        .enumerate()
        .map(|(k, sp)| {
            parse_event_metadata(buf, *sp).ctx(|| format!("{named}.event_metadata[{k}]"))
        })
        .collect::<Vec<_>>();
    let ems = first_error(ems)?;

    let (stat_metadata, stat_index, sdup) = dedupe_by_key(sms, |m| m.key);
    let (event_metadata, event_index, edup) = dedupe_by_key(ems, |m| m.key);
    if sdup + edup > 0 {
        diags.push(format!(
            "plane '{plane_name}': {} duplicate metadata map keys (the last entry of each was kept)",
            sdup + edup
        ));
    }
    let em_mismatch = event_metadata.iter().filter(|m| m.key != m.id).count();
    let sm_mismatch = stat_metadata.iter().filter(|m| m.key != m.id).count();
    if em_mismatch + sm_mismatch > 0 {
        diags.push(format!(
            "plane '{plane_name}': {} metadata entries whose map key differs from their id (looked up by key)",
            em_mismatch + sm_mismatch
        ));
    }
    let mut stat_by_name: NameMap =
        HashMap::with_capacity_and_hasher(stat_metadata.len(), Default::default());
    let mut dup_names = 0;
    for m in &stat_metadata {
        let n = std::str::from_utf8(&buf[m.name.0..m.name.1]).unwrap_or("");
        // Map order is by key, so the smallest id wins for a duplicated name.
        if stat_by_name.insert(n.into(), m.key).is_some() {
            dup_names += 1;
        }
    }
    if dup_names > 0 {
        // Restore "smallest id wins" (insert overwrote with larger keys).
        for m in stat_metadata.iter().rev() {
            let n = std::str::from_utf8(&buf[m.name.0..m.name.1]).unwrap_or("");
            stat_by_name.insert(n.into(), m.key);
        }
        diags.push(format!(
            "plane '{plane_name}': {dup_names} stat names are defined by more than one stat metadata id (lookups by name use the smallest id)"
        ));
    }

    Ok(PlaneMeta {
        stat_metadata,
        stat_index,
        event_metadata,
        event_index,
        stat_by_name,
        diags,
    })
}

/// `f` over every line, results in line order. Lines of 1 MiB or more go first, largest first
/// and each on its own (rayon, FIFO): a huge line framed last, or two queued behind each other
/// on one thread, would leave the other threads idle (most of a capture's events may be on a
/// few lines). The other lines follow as one parallel job.
fn for_lines<R: Send>(spans: &[Span], f: impl Fn(usize, Span) -> R + Sync) -> Vec<R> {
    let size = |li: usize| spans[li].1 - spans[li].0;
    if spans.iter().all(|(s, e)| e - s < LINE_CHUNK_BYTES) {
        return spans
            .par_iter()
            .enumerate()
            .map(|(li, sp)| f(li, *sp))
            .collect();
    }
    let mut out: Vec<Option<R>> = (0..spans.len()).map(|_| None).collect();
    let (mut big, mut small): (Vec<_>, Vec<_>) = out
        .iter_mut()
        .enumerate()
        .partition(|(li, _)| size(*li) >= LINE_CHUNK_BYTES);
    big.sort_by_key(|(li, _)| std::cmp::Reverse(size(*li)));
    let f = &f;
    rayon::scope_fifo(|sc| {
        for (li, slot) in big {
            sc.spawn_fifo(move |_| *slot = Some(f(li, spans[li])));
        }
        if !small.is_empty() {
            sc.spawn_fifo(move |_| {
                small
                    .par_iter_mut()
                    .for_each(|(li, slot)| **slot = Some(f(*li, spans[*li])))
            });
        }
    });
    out.into_iter()
        .map(|r| r.expect("every line was visited"))
        .collect()
}

fn parse_plane(
    buf: &[u8],
    (s, e): Span,
    pi: usize,
    diags: &mut Vec<String>,
    defer: bool,
) -> Result<PlaneData, Located> {
    let ctx = format!("XSpace.planes[{pi}]");
    let mut id = 0;
    let mut name = EMPTY;
    let mut line_spans = Vec::new();
    let mut em_spans = Vec::new();
    let mut sm_spans = Vec::new();
    let mut stats = Vec::new();
    for f in Fields::new(buf, s, e) {
        let f = f.ctx(|| ctx.clone())?;
        let r: WireResult<()> = (|| {
            match f.number {
                1 => id = i(f.varint("id")?),
                2 => name = f.string(buf, "name")?,
                3 => line_spans.push(f.len("lines")?),
                4 => em_spans.push(f.len("event_metadata")?),
                5 => sm_spans.push(f.len("stat_metadata")?),
                6 => {
                    let sp = f.len("stats")?;
                    validate_stat(buf, sp.0, sp.1)?;
                    stats.push(sp);
                }
                _ => {}
            }
            Ok(())
        })();
        r.ctx(|| ctx.clone())?;
    }
    let plane_name = std::str::from_utf8(&buf[name.0..name.1]).unwrap_or("");
    let named = format!("{ctx} ('{plane_name}')");
    let meta = || plane_metadata(buf, &named, plane_name, &sm_spans, &em_spans);
    let (meta, lines) = if defer {
        // Framing needs nothing from the metadata: both at once. A metadata error is still
        // the one reported, as when the metadata was parsed first.
        let (lines, meta) = rayon::join(
            || {
                for_lines(&line_spans, |li, sp| {
                    frame_line(buf, sp, &named, li).map(|l| (l, 0))
                })
            },
            meta,
        );
        (meta?, lines)
    } else {
        let meta = meta()?;
        let lines = for_lines(&line_spans, |li, sp| {
            parse_line(buf, sp, &named, li, &meta.event_index)
        });
        (meta, lines)
    };
    let PlaneMeta {
        stat_metadata,
        stat_index,
        event_metadata,
        event_index,
        stat_by_name,
        diags: meta_diags,
    } = meta;
    diags.extend(meta_diags);
    let lines = first_error(lines)?;
    let missing: usize = lines.iter().map(|(_, m)| m).sum();
    if missing > 0 {
        diags.push(missing_metadata(plane_name, missing));
    }
    let overflow = lines
        .iter()
        .filter(|(l, _)| l.timestamp_ns.checked_mul(1000).is_none())
        .count();
    if overflow > 0 {
        diags.push(format!(
            "plane '{plane_name}': {overflow} lines have timestamps too large for picoseconds in 64 bits (absolute epoch?); event start times saturate"
        ));
    }
    let device_offset_id = stat_by_name.get(names::stat::DEVICE_OFFSET_PS).copied();
    let device_duration_id = stat_by_name.get(names::stat::DEVICE_DURATION_PS).copied();
    Ok(PlaneData {
        index: pi,
        id,
        name,
        lines: lines.into_iter().map(|(l, _)| l).collect(),
        stats,
        event_metadata,
        event_index,
        stat_metadata,
        stat_index,
        stat_by_name,
        device_offset_id,
        device_duration_id,
    })
}

impl XSpace {
    /// Open and validate a capture file (memory-mapped when large).
    pub fn open(path: impl AsRef<Path>) -> Result<XSpace, XSpaceError> {
        Self::open_with(path, &ReadOptions::default())
    }

    /// [`XSpace::open`] with options.
    pub fn open_with(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<XSpace, XSpaceError> {
        let path = path.as_ref();
        let buf = Self::read_backing(path, opts)?;
        Self::parse(buf, path.display().to_string(), opts, false)
    }

    /// The file's bytes: mapped when large (unless `opts.no_mmap`), else read.
    fn read_backing(path: &Path, opts: &ReadOptions) -> Result<Backing, XSpaceError> {
        let io = |source| XSpaceError::Io {
            path: path.to_path_buf(),
            source,
        };
        let (file, meta) = file::open_regular(path).map_err(io)?;
        Ok(if !opts.no_mmap && meta.len() >= MMAP_THRESHOLD {
            // SAFETY: the map is read-only and private to this process; a truncation while it
            // is read ends the process with a JSON error naming the file, exit 4 (`file`).
            // Not MAP_POPULATE: faulting the pages in up front ran on one thread before the
            // parallel passes; faulted lazily, both threads share that work and readers of a
            // few planes (`only_planes`) touch only their pages. Measured: aggregate x200
            // 0.92x, jax-large 0.97x of the populated map's time, overview unchanged.
            match unsafe { file::MappedRegion::map(&file, path) } {
                Ok(m) => Backing::Mmap(m),
                Err(_) => Backing::Owned(file::read_opened(file, meta.len()).map_err(io)?),
            }
        } else {
            Backing::Owned(file::read_opened(file, meta.len()).map_err(io)?)
        })
    }

    /// Validate and index an in-memory capture.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<XSpace, XSpaceError> {
        Self::from_bytes_named(bytes, "<bytes>", &ReadOptions::default())
    }

    /// [`XSpace::from_bytes`] with a name for messages (e.g. the file it came from) and options.
    pub fn from_bytes_named(
        bytes: Vec<u8>,
        name: &str,
        opts: &ReadOptions,
    ) -> Result<XSpace, XSpaceError> {
        Self::parse(Backing::Owned(bytes), name.to_string(), opts, false)
    }

    /// `defer`: frame the events only (lengths, counts, chunks); their contents are validated
    /// by [`XSpace::open_scan`]'s single pass, which must follow before the space is handed out.
    fn parse(
        buf: Backing,
        source: String,
        opts: &ReadOptions,
        defer: bool,
    ) -> Result<XSpace, XSpaceError> {
        let malformed = |l: Located| malformed(&source, &buf, l);
        let b: &[u8] = &buf;
        let mut plane_spans = Vec::new();
        let (mut errors, mut warnings, mut hostnames) = (Vec::new(), Vec::new(), Vec::new());
        for f in Fields::new(b, 0, b.len()) {
            let f: Field = f.ctx(|| "XSpace".into()).map_err(malformed)?;
            let r: WireResult<()> = (|| {
                match f.number {
                    1 => plane_spans.push(f.len("planes")?),
                    2 => errors.push(f.string(b, "errors")?),
                    3 => warnings.push(f.string(b, "warnings")?),
                    4 => hostnames.push(f.string(b, "hostnames")?),
                    _ => {}
                }
                Ok(())
            })();
            r.ctx(|| "XSpace".into()).map_err(malformed)?;
        }
        let results: Vec<(Result<PlaneData, Located>, Vec<String>)> = plane_spans
            .par_iter()
            .enumerate()
            .filter_map(|(pi, sp)| {
                if let Some(keep) = &opts.planes {
                    match plane_name_only(b, *sp) {
                        Ok(name) if !keep(name) => return None,
                        Ok(_) => {}
                        Err(err) => {
                            let context = format!("XSpace.planes[{pi}]");
                            return Some((Err(Located { err, context }), Vec::new()));
                        }
                    }
                }
                let mut d = Vec::new();
                let mut r = parse_plane(b, *sp, pi, &mut d, defer);
                if defer && r.is_err() {
                    // Framing found an error; the full parse reports the first one in file
                    // order (an event's content may be broken before the framing is).
                    d.clear();
                    r = parse_plane(b, *sp, pi, &mut d, false);
                }
                Some((r, d))
            })
            .collect();
        let mut planes = Vec::with_capacity(results.len());
        let mut diagnostics = Vec::new();
        if b.is_empty() {
            diagnostics.push("the file is empty: an XSpace with no planes".to_string());
        }
        let mut skipped = 0;
        for (r, d) in results {
            diagnostics.extend(d);
            match r {
                Ok(p) => planes.push(p),
                Err(l) if !opts.strict => {
                    skipped += 1;
                    diagnostics.push(skipped_plane(&l));
                }
                Err(l) => return Err(malformed(l)),
            }
        }
        Ok(XSpace {
            buf,
            source,
            planes,
            errors,
            warnings,
            hostnames,
            diagnostics,
            skipped_planes: skipped,
        })
    }

    fn str_at(&self, (s, e): Span) -> &str {
        std::str::from_utf8(&self.buf[s..e]).unwrap_or("")
    }

    /// The file path (or the name given to [`XSpace::from_bytes_named`]).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The raw bytes of the capture.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The planes, in file order.
    pub fn planes(&self) -> impl ExactSizeIterator<Item = Plane<'_>> + Clone {
        self.planes.iter().map(move |d| Plane { space: self, d })
    }

    /// The first plane with exactly this name.
    pub fn plane(&self, name: &str) -> Option<Plane<'_>> {
        self.planes().find(|p| p.name() == name)
    }

    /// `XSpace.hostnames`, in file order.
    pub fn hostnames(&self) -> Vec<&str> {
        self.hostnames.iter().map(|s| self.str_at(*s)).collect()
    }

    /// The host this capture is from: the first hostname, else `"localhost"` (XProf's rule).
    pub fn hostname(&self) -> &str {
        self.hostnames
            .first()
            .map(|s| self.str_at(*s))
            .unwrap_or("localhost")
    }

    /// `XSpace.errors`: errors the *profiler* recorded while capturing (not reader errors).
    pub fn errors(&self) -> Vec<&str> {
        self.errors.iter().map(|s| self.str_at(*s)).collect()
    }

    /// `XSpace.warnings`: warnings the profiler recorded while capturing.
    pub fn warnings(&self) -> Vec<&str> {
        self.warnings.iter().map(|s| self.str_at(*s)).collect()
    }

    /// What the *reader* found odd (dropped planes, dangling metadata ids, duplicate keys …).
    /// Tools surface these in their `capture.warnings`.
    pub fn diagnostics(&self) -> &[String] {
        &self.diagnostics
    }

    /// False when a corrupt plane was dropped (see [`XSpace::diagnostics`]).
    pub fn is_complete(&self) -> bool {
        self.skipped_planes == 0
    }

    /// Total events over all planes and lines.
    pub fn num_events(&self) -> usize {
        self.planes
            .iter()
            .flat_map(|p| &p.lines)
            .map(|l| l.num_events)
            .sum()
    }
}

// ---------------------------------------------------------------------------------------------
// Views

/// A plane (`/device:TPU:0`, `/host:CPU`, `/host:metadata`, …).
#[derive(Clone, Copy)]
pub struct Plane<'a> {
    space: &'a XSpace,
    d: &'a PlaneData,
}

impl std::fmt::Debug for Plane<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plane")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("lines", &self.d.lines.len())
            .finish()
    }
}

impl<'a> Plane<'a> {
    fn s(&self, sp: Span) -> &'a str {
        self.space.str_at(sp)
    }
    fn b(&self, (s, e): Span) -> &'a [u8] {
        &self.space.buf[s..e]
    }
    /// The space this plane belongs to.
    pub fn space(&self) -> &'a XSpace {
        self.space
    }
    /// Position among the file's planes, counting dropped ones.
    pub fn index(&self) -> usize {
        self.d.index
    }
    /// `XPlane.id`.
    pub fn id(&self) -> i64 {
        self.d.id
    }
    /// `XPlane.name`.
    pub fn name(&self) -> &'a str {
        self.s(self.d.name)
    }
    /// The lines, in file order.
    pub fn lines(&self) -> impl ExactSizeIterator<Item = Line<'a>> + Clone + use<'a> {
        let p = *self;
        self.d.lines.iter().map(move |d| Line { plane: p, d })
    }
    /// The first line with exactly this name.
    pub fn line_by_name(&self, name: &str) -> Option<Line<'a>> {
        self.lines().find(|l| l.name() == name)
    }
    /// Total events over the plane's lines.
    pub fn num_events(&self) -> usize {
        self.d.lines.iter().map(|l| l.num_events).sum()
    }
    /// Plane-level stats (device capabilities, versions …).
    pub fn stats(&self) -> impl Iterator<Item = Stat<'a>> + use<'a> {
        let p = *self;
        self.d.stats.iter().map(move |sp| decode_stat(p, *sp))
    }
    /// The plane stat named `name`.
    pub fn stat(&self, name: &str) -> Option<Stat<'a>> {
        let id = self.stat_id(name)?;
        self.stats().find(|s| s.metadata_id == id)
    }
    /// The event metadata keyed `id`.
    pub fn event_metadata(&self, id: i64) -> Option<EventMetadata<'a>> {
        self.d.event_index.get(id).map(|k| EventMetadata {
            plane: *self,
            d: &self.d.event_metadata[k],
        })
    }
    /// The position of event metadata `id` in [`Plane::event_metadata_iter`] order (dense,
    /// `0..num_event_metadata()`): index per-plane tables with it instead of hashing 64-bit ids.
    #[inline]
    pub fn event_metadata_position(&self, id: i64) -> Option<usize> {
        self.d.event_index.get(id)
    }
    /// The event metadata at `position` (see [`Plane::event_metadata_position`]).
    pub fn event_metadata_at(&self, position: usize) -> Option<EventMetadata<'a>> {
        self.d
            .event_metadata
            .get(position)
            .map(|d| EventMetadata { plane: *self, d })
    }
    /// How many event metadata entries the plane has.
    pub fn num_event_metadata(&self) -> usize {
        self.d.event_metadata.len()
    }
    /// All event metadata, by ascending key.
    pub fn event_metadata_iter(
        &self,
    ) -> impl ExactSizeIterator<Item = EventMetadata<'a>> + use<'a> {
        let p = *self;
        self.d
            .event_metadata
            .iter()
            .map(move |d| EventMetadata { plane: p, d })
    }
    /// The stat metadata keyed `id`.
    pub fn stat_metadata(&self, id: i64) -> Option<StatMetadata<'a>> {
        self.d.stat_index.get(id).map(|k| StatMetadata {
            plane: *self,
            d: &self.d.stat_metadata[k],
        })
    }
    /// All stat metadata, by ascending key.
    pub fn stat_metadata_iter(&self) -> impl ExactSizeIterator<Item = StatMetadata<'a>> + use<'a> {
        let p = *self;
        self.d
            .stat_metadata
            .iter()
            .map(move |d| StatMetadata { plane: p, d })
    }
    /// The name of stat metadata `id`.
    pub fn stat_name(&self, id: i64) -> Option<&'a str> {
        self.stat_metadata(id).map(|m| m.name())
    }
    /// The stat metadata id this plane uses for `name` (ids differ per plane: resolve once,
    /// then use [`Event::stat_by_id`] in loops).
    pub fn stat_id(&self, name: &str) -> Option<i64> {
        self.d.stat_by_name.get(name).copied()
    }
}

/// A timeline of a plane (`XLA Ops`, `Steps`, a host thread …).
#[derive(Clone, Copy)]
pub struct Line<'a> {
    plane: Plane<'a>,
    d: &'a LineData,
}

impl std::fmt::Debug for Line<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Line")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("events", &self.num_events())
            .finish()
    }
}

impl<'a> Line<'a> {
    /// The plane this line belongs to.
    pub fn plane(&self) -> Plane<'a> {
        self.plane
    }
    /// `XLine.id` (thread id on hosts; `i64::MAX` for `_counters_`).
    pub fn id(&self) -> i64 {
        self.d.id
    }
    /// `XLine.display_id`.
    pub fn display_id(&self) -> i64 {
        self.d.display_id
    }
    /// `XLine.name`.
    pub fn name(&self) -> &'a str {
        self.plane.s(self.d.name)
    }
    /// `XLine.display_name` (may be empty).
    pub fn display_name(&self) -> &'a str {
        self.plane.s(self.d.display_name)
    }
    /// `XLine.timestamp_ns`: the line's start; event offsets are relative to it.
    pub fn timestamp_ns(&self) -> i64 {
        self.d.timestamp_ns
    }
    /// `XLine.duration_ps` (often 0).
    pub fn duration_ps(&self) -> i64 {
        self.d.duration_ps
    }
    /// Number of events on the line.
    pub fn num_events(&self) -> usize {
        self.d.num_events
    }
    /// The events, decoded lazily in file order (stats are decoded only when asked for).
    pub fn events(&self) -> Events<'a> {
        Events {
            line: *self,
            pos: self.d.msg.0,
            end: self.d.msg.1,
            remaining: self.d.num_events,
        }
    }
    /// The events in runs for parallel processing, at no cost: one run for lines under 2 MiB,
    /// else the ~1 MiB chunks `open` validated in parallel (in file order).
    pub fn event_runs(&self) -> Vec<Events<'a>> {
        self.d
            .runs()
            .map(|((pos, end), events)| Events {
                line: *self,
                pos,
                end,
                remaining: events.len(),
            })
            .collect()
    }
    /// The events split into consecutive runs of about `chunk_bytes` of the file each (at
    /// least one event per run), in file order: iterate them on several threads to process one
    /// huge line in parallel. Finding the split points reads one tag and one length per event.
    pub fn events_chunked(&self, chunk_bytes: usize) -> Vec<Events<'a>> {
        let buf: &'a [u8] = &self.plane.space.buf;
        let (s, e) = self.d.msg;
        let mut out = Vec::new();
        let (mut start, mut count, mut p) = (s, 0usize, s);
        while p < e {
            if p - start >= chunk_bytes.max(1) && count > 0 {
                out.push(Events {
                    line: *self,
                    pos: start,
                    end: p,
                    remaining: count,
                });
                (start, count) = (p, 0);
            }
            if buf[p] == 0x22 {
                count += 1;
            }
            p = wire::skip_trusted(buf, p, e);
        }
        out.push(Events {
            line: *self,
            pos: start,
            end: e,
            remaining: count,
        });
        out
    }
}

/// Iterator over a line's events.
pub struct Events<'a> {
    line: Line<'a>,
    pos: usize,
    end: usize,
    remaining: usize,
}

impl<'a> Iterator for Events<'a> {
    type Item = Event<'a>;
    #[inline]
    fn next(&mut self) -> Option<Event<'a>> {
        // Validated at open, so the fields cannot fail. Fast path: the one-byte `events` tag.
        let buf: &'a [u8] = &self.line.plane.space.buf;
        let (end, mut p) = (self.end, self.pos);
        while p < end {
            if buf[p] == 0x22 {
                p += 1;
                let len = wire::read_varint_trusted(buf, &mut p) as usize;
                let s = p;
                p += len;
                self.pos = p;
                self.remaining = self.remaining.saturating_sub(1);
                return Some(decode_event(self.line, s, p));
            }
            match Fields::field_at(buf, p, end) {
                Ok((_, next)) => p = next,
                Err(_) => break,
            }
        }
        self.pos = end;
        None
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Events<'_> {}

/// What `XEvent.data` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventData {
    /// Neither member set (reads as offset 0).
    None,
    /// A timed event: start offset from the line's timestamp, ps.
    OffsetPs(i64),
    /// An aggregated event: how many times it occurred.
    NumOccurrences(i64),
}

#[inline]
fn decode_event<'a>(line: Line<'a>, s: usize, e: usize) -> Event<'a> {
    let buf: &[u8] = &line.plane.space.buf;
    let mut ev = Event {
        line,
        msg: (s, e),
        metadata_id: 0,
        data: EventData::None,
        duration_ps: 0,
    };
    // Validated at open: one-byte tags of known fields are read directly; anything else goes
    // through the general decoder (which cannot fail here). The predicted layout first (see
    // `validate_event`).
    let mut p = s;
    if p < e && buf[p] == 0x08 {
        p += 1;
        ev.metadata_id = i(wire::read_varint_trusted(buf, &mut p));
    }
    if p < e && buf[p] == 0x10 {
        p += 1;
        ev.data = EventData::OffsetPs(i(wire::read_varint_trusted(buf, &mut p)));
    }
    if p < e && buf[p] == 0x18 {
        p += 1;
        ev.duration_ps = i(wire::read_varint_trusted(buf, &mut p));
    }
    while p < e && buf[p] == 0x22 {
        p += 1;
        let len = wire::read_varint_trusted(buf, &mut p) as usize;
        p += len;
    }
    while p < e {
        let tag = buf[p];
        match tag {
            0x08 | 0x10 | 0x18 | 0x28 => {
                p += 1;
                let v = i(wire::read_varint_trusted(buf, &mut p));
                match tag {
                    0x08 => ev.metadata_id = v,
                    0x10 => ev.data = EventData::OffsetPs(v),
                    0x18 => ev.duration_ps = v,
                    _ => ev.data = EventData::NumOccurrences(v),
                }
            }
            0x22 => {
                p += 1;
                let len = wire::read_varint_trusted(buf, &mut p) as usize;
                p += len;
            }
            _ => match Fields::field_at(buf, p, e) {
                Ok((_, next)) => p = next,
                Err(_) => break,
            },
        }
    }
    ev
}

/// One event of a line. Cheap to copy; its stats are decoded on demand.
#[derive(Clone, Copy)]
pub struct Event<'a> {
    line: Line<'a>,
    msg: Span,
    metadata_id: i64,
    data: EventData,
    duration_ps: i64,
}

impl std::fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("name", &self.name())
            .field("metadata_id", &self.metadata_id)
            .field("data", &self.data)
            .field("duration_ps", &self.duration_ps)
            .finish()
    }
}

impl<'a> Event<'a> {
    /// The line the event is on.
    pub fn line(&self) -> Line<'a> {
        self.line
    }
    /// The plane the event is on.
    pub fn plane(&self) -> Plane<'a> {
        self.line.plane
    }
    /// `XEvent.metadata_id`.
    pub fn metadata_id(&self) -> i64 {
        self.metadata_id
    }
    /// The `data` oneof as decoded.
    pub fn data(&self) -> EventData {
        self.data
    }
    /// `XEvent.offset_ps` (0 for aggregated events, as in protobuf).
    pub fn offset_ps(&self) -> i64 {
        match self.data {
            EventData::OffsetPs(o) => o,
            _ => 0,
        }
    }
    /// `XEvent.num_occurrences` (0 for timed events).
    pub fn num_occurrences(&self) -> i64 {
        match self.data {
            EventData::NumOccurrences(n) => n,
            _ => 0,
        }
    }
    /// `XEvent.duration_ps`.
    pub fn duration_ps(&self) -> i64 {
        self.duration_ps
    }
    /// Absolute start in ps: `line.timestamp_ns × 1000 + offset_ps` (saturating; see
    /// [`XSpace::diagnostics`] for captures whose timestamps do not fit).
    pub fn start_ps(&self) -> i64 {
        self.line
            .d
            .timestamp_ns
            .saturating_mul(1000)
            .saturating_add(self.offset_ps())
    }
    /// `start_ps + duration_ps`.
    pub fn end_ps(&self) -> i64 {
        self.start_ps().saturating_add(self.duration_ps)
    }
    /// `(start_ps, duration_ps)`.
    pub fn timespan(&self) -> (i64, i64) {
        (self.start_ps(), self.duration_ps)
    }
    /// XProf's `GetDeviceEventTimespan`: `(device_offset_ps, device_duration_ps)` when the
    /// event carries both stats (TPU hardware clock), else [`Event::timespan`].
    pub fn device_timespan(&self) -> (i64, i64) {
        let d = self.line.plane.d;
        if let (Some(oid), Some(did)) = (d.device_offset_id, d.device_duration_id) {
            let (mut off, mut dur) = (None, None);
            for s in self.stats() {
                if s.metadata_id == oid && off.is_none() {
                    off = s.int();
                } else if s.metadata_id == did && dur.is_none() {
                    dur = s.int();
                }
            }
            if let (Some(o), Some(du)) = (off, dur) {
                return (o, du);
            }
        }
        self.timespan()
    }
    /// The event's metadata, if the plane defines it.
    pub fn metadata(&self) -> Option<EventMetadata<'a>> {
        self.line.plane.event_metadata(self.metadata_id)
    }
    /// The metadata's name ("" when missing). On TPU `XLA Ops` this is the full HLO text.
    pub fn name(&self) -> &'a str {
        self.metadata().map_or("", |m| m.name())
    }
    /// The metadata's display name, else its name (XProf's `DisplayName` fallback).
    pub fn display_name(&self) -> &'a str {
        self.metadata().map_or("", |m| {
            let d = m.display_name();
            if d.is_empty() { m.name() } else { d }
        })
    }
    /// The event's own stats, in file order.
    pub fn stats(&self) -> impl Iterator<Item = Stat<'a>> + use<'a> {
        stats_in(self.line.plane, self.msg, 4)
    }
    /// The event's own stat with metadata id `id` (the first one if repeated, as XProf's
    /// `GetStat`).
    pub fn stat_by_id(&self, id: i64) -> Option<Stat<'a>> {
        self.stats().find(|s| s.metadata_id == id)
    }
    /// The event's own stat named `name` (not its metadata's).
    pub fn stat(&self, name: &str) -> Option<Stat<'a>> {
        self.stat_by_id(self.line.plane.stat_id(name)?)
    }
    /// The stat named `name` of the event's metadata (not the event's own).
    pub fn metadata_stat(&self, name: &str) -> Option<Stat<'a>> {
        self.metadata()?.stat(name)
    }
    /// The event's own stat, else its metadata's ("event→metadata" in the spec).
    pub fn stat_or_metadata(&self, name: &str) -> Option<Stat<'a>> {
        self.stat(name).or_else(|| self.metadata_stat(name))
    }
}

/// `XEventMetadata`: what events with this id share (name, constant stats, children).
#[derive(Clone, Copy)]
pub struct EventMetadata<'a> {
    plane: Plane<'a>,
    d: &'a MetaData,
}

impl std::fmt::Debug for EventMetadata<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventMetadata")
            .field("id", &self.id())
            .field("name", &self.name())
            .finish()
    }
}

impl<'a> EventMetadata<'a> {
    /// The map key (what events' `metadata_id` refers to).
    pub fn key(&self) -> i64 {
        self.d.key
    }
    /// `XEventMetadata.id` (normally equal to the key).
    pub fn id(&self) -> i64 {
        self.d.id
    }
    /// `XEventMetadata.name`.
    pub fn name(&self) -> &'a str {
        self.plane.s(self.d.name)
    }
    /// `XEventMetadata.display_name`.
    pub fn display_name(&self) -> &'a str {
        self.plane.s(self.d.display_name)
    }
    /// `XEventMetadata.metadata` (serialized extra data, rarely set).
    pub fn metadata_bytes(&self) -> &'a [u8] {
        self.plane.b(self.d.metadata)
    }
    /// The metadata's stats, in file order.
    pub fn stats(&self) -> impl Iterator<Item = Stat<'a>> + use<'a> {
        let plane = self.plane;
        stats_in(plane, self.d.msg, 5).chain(
            self.d
                .more
                .iter()
                .flat_map(move |sp| stats_in(plane, *sp, 5)),
        )
    }
    /// The metadata stat named `name` (the first one if repeated, as XProf's `GetStat`).
    pub fn stat(&self, name: &str) -> Option<Stat<'a>> {
        let id = self.plane.stat_id(name)?;
        self.stats().find(|s| s.metadata_id == id)
    }
    /// `XEventMetadata.child_id`.
    pub fn child_ids(&self) -> Vec<i64> {
        let buf: &[u8] = &self.plane.space.buf;
        let mut v = Vec::new();
        let spans = std::iter::once(&self.d.msg).chain(&self.d.more);
        for f in spans.flat_map(|sp| Fields::new(buf, sp.0, sp.1).flatten()) {
            if f.number == 6 {
                let _ = wire::for_each_packed_varint(buf, &f, "child_id", |x| v.push(i(x)));
            }
        }
        v
    }
}

/// `XStatMetadata`: a stat's name on this plane.
#[derive(Clone, Copy)]
pub struct StatMetadata<'a> {
    plane: Plane<'a>,
    d: &'a StatMetaData,
}

impl<'a> StatMetadata<'a> {
    /// The map key (what stats' `metadata_id` refers to).
    pub fn key(&self) -> i64 {
        self.d.key
    }
    /// `XStatMetadata.id`.
    pub fn id(&self) -> i64 {
        self.d.id
    }
    /// `XStatMetadata.name`.
    pub fn name(&self) -> &'a str {
        self.plane.s(self.d.name)
    }
    /// `XStatMetadata.description`.
    pub fn description(&self) -> &'a str {
        self.plane.s(self.d.description)
    }
}

/// The `XStat.value` oneof, borrowed from the file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StatValue<'a> {
    /// No member set.
    None,
    /// `double_value`.
    Double(f64),
    /// `uint64_value`.
    Uint(u64),
    /// `int64_value`.
    Int(i64),
    /// `str_value`.
    Str(&'a str),
    /// `bytes_value` (often a nested serialized proto).
    Bytes(&'a [u8]),
    /// A string stored as a stat metadata's name; [`Stat::str`] resolves it.
    Ref(u64),
    /// Gzip-compressed string (`compressed_str_value`), as stored; [`Stat::decompress_str`]
    /// unpacks it.
    CompressedStr(&'a [u8]),
}

/// A stat with its plane, so names and `ref_value`s resolve.
#[derive(Clone, Copy)]
pub struct Stat<'a> {
    plane: Plane<'a>,
    /// `XStat.metadata_id`.
    pub metadata_id: i64,
    /// The value as stored.
    pub value: StatValue<'a>,
}

impl std::fmt::Debug for Stat<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stat")
            .field("name", &self.name())
            .field("value", &self.value)
            .finish()
    }
}

impl<'a> Stat<'a> {
    /// The stat's name (through the plane's stat metadata).
    pub fn name(&self) -> &'a str {
        self.plane.stat_name(self.metadata_id).unwrap_or("")
    }
    /// XProf `IntValue`: int64, or uint64 reinterpreted.
    pub fn int(&self) -> Option<i64> {
        match self.value {
            StatValue::Int(v) => Some(v),
            StatValue::Uint(v) => Some(v as i64),
            _ => None,
        }
    }
    /// XProf `IntOrUintValue` as unsigned: uint64, or int64 reinterpreted.
    pub fn uint(&self) -> Option<u64> {
        match self.value {
            StatValue::Uint(v) => Some(v),
            StatValue::Int(v) => Some(v as u64),
            _ => None,
        }
    }
    /// XProf `DoubleValue`, accepting integers too.
    pub fn double(&self) -> Option<f64> {
        match self.value {
            StatValue::Double(v) => Some(v),
            StatValue::Int(v) => Some(v as f64),
            StatValue::Uint(v) => Some(v as f64),
            _ => None,
        }
    }
    /// XProf `StrOrRefValue`: the string, or a `ref_value` resolved through stat metadata.
    pub fn str(&self) -> Option<&'a str> {
        match self.value {
            StatValue::Str(s) => Some(s),
            StatValue::Ref(r) => self.plane.stat_name(r as i64),
            _ => None,
        }
    }
    /// `bytes_value` (nested protos such as `Hlo Proto`).
    pub fn bytes(&self) -> Option<&'a [u8]> {
        match self.value {
            StatValue::Bytes(b) => Some(b),
            _ => None,
        }
    }
    /// A `compressed_str_value`, gunzipped. `None` for other kinds of value; an error when the
    /// bytes are not gzip or the text is not UTF-8 (the capture is then damaged).
    pub fn decompress_str(&self) -> Option<std::io::Result<String>> {
        use std::io::Read;
        let StatValue::CompressedStr(b) = self.value else {
            return None;
        };
        let mut out = String::new();
        Some(
            flate2::read::GzDecoder::new(b)
                .read_to_string(&mut out)
                .map(|_| out),
        )
    }
    /// XProf `BoolValue`: an integer stat ≠ 0.
    pub fn bool(&self) -> Option<bool> {
        self.int().map(|v| v != 0)
    }
}

#[inline]
fn decode_stat<'a>(plane: Plane<'a>, (s, e): Span) -> Stat<'a> {
    let buf: &'a [u8] = &plane.space.buf;
    let mut st = Stat {
        plane,
        metadata_id: 0,
        value: StatValue::None,
    };
    // The span was validated at open: read one-byte tags directly.
    let mut p = s;
    while p < e {
        let tag = buf[p];
        p += 1;
        match tag {
            0x08 => st.metadata_id = i(wire::read_varint_trusted(buf, &mut p)),
            0x11 => {
                let v = u64::from_le_bytes(buf[p..p + 8].try_into().unwrap());
                st.value = StatValue::Double(f64::from_bits(v));
                p += 8;
            }
            0x18 => st.value = StatValue::Uint(wire::read_varint_trusted(buf, &mut p)),
            0x20 => st.value = StatValue::Int(i(wire::read_varint_trusted(buf, &mut p))),
            0x38 => st.value = StatValue::Ref(wire::read_varint_trusted(buf, &mut p)),
            0x2a | 0x32 | 0x42 => {
                let len = wire::read_varint_trusted(buf, &mut p) as usize;
                let b = &buf[p..p + len];
                p += len;
                st.value = match tag {
                    0x2a => StatValue::Str(std::str::from_utf8(b).unwrap_or("")),
                    0x32 => StatValue::Bytes(b),
                    _ => StatValue::CompressedStr(b),
                };
            }
            _ => p = wire::skip_trusted(buf, p - 1, e),
        }
    }
    st
}

/// Iterator over the stats (length-delimited field with one-byte `tag`) of a validated message.
struct StatsIn<'a> {
    plane: Plane<'a>,
    pos: usize,
    end: usize,
    tag: u8,
}

impl<'a> Iterator for StatsIn<'a> {
    type Item = Stat<'a>;
    #[inline]
    fn next(&mut self) -> Option<Stat<'a>> {
        let buf: &'a [u8] = &self.plane.space.buf;
        while self.pos < self.end {
            let p = self.pos;
            if buf[p] == self.tag {
                let mut q = p + 1;
                let len = wire::read_varint_trusted(buf, &mut q) as usize;
                self.pos = q + len;
                return Some(decode_stat(self.plane, (q, q + len)));
            }
            self.pos = wire::skip_trusted(buf, p, self.end);
        }
        None
    }
}

/// The stats (field `number`, < 16) of the validated message at `msg`.
fn stats_in<'a>(plane: Plane<'a>, msg: Span, number: u32) -> impl Iterator<Item = Stat<'a>> + 'a {
    StatsIn {
        plane,
        pos: msg.0,
        end: msg.1,
        tag: ((number << 3) | 2) as u8,
    }
}

#[cfg(test)]
mod tests {
    /// Engines share one XSpace across rayon workers and hold events across threads.
    #[test]
    fn views_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::XSpace>();
        check::<super::Plane<'_>>();
        check::<super::Line<'_>>();
        check::<super::Event<'_>>();
        check::<super::Stat<'_>>();
        check::<super::EventMetadata<'_>>();
    }

    /// `tag`, varint `len`: a length-delimited field's header.
    fn header(out: &mut Vec<u8>, tag: u8, len: usize) {
        out.push(tag);
        let mut n = len;
        while n >= 0x80 {
            out.push(n as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    /// A line of `bytes` or more: events whose length takes one, two and three bytes (`pad`
    /// gives the padding of the `k`th), and the line's own fields between them when `fields`.
    /// Also where each event's tag is.
    fn line(bytes: usize, fields: bool, pad: impl Fn(u64) -> usize) -> (Vec<u8>, Vec<usize>) {
        let (mut out, mut tags) = (Vec::new(), Vec::new());
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut k = 0u64;
        while out.len() < bytes {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            k += 1;
            if fields && x.is_multiple_of(100) {
                // name, timestamp_ns
                header(&mut out, 0x12, 3);
                out.extend(b"abc");
                out.extend([0x18, (k % 100) as u8]);
                continue;
            }
            // Event: metadata_id, duration_ps, then an unknown field padding it to size.
            let pad = pad(x);
            let mut ev = vec![0x08, (k % 5) as u8, 0x18, 7];
            header(&mut ev, 0x7a, pad);
            ev.resize(ev.len() + pad, 0);
            tags.push(out.len());
            header(&mut out, 0x22, ev.len());
            out.extend(ev);
        }
        (out, tags)
    }

    /// Framing a line (tags and lengths only) finds what the validating parse finds: events,
    /// chunks, the line's fields, and on a line cut short the same error.
    #[test]
    fn framing_a_line_agrees_with_parsing_it() {
        let index = super::IdIndex::build([0i64, 1, 2, 3, 4].into_iter());
        let mixed = |x: u64| match x % 1000 {
            0..=799 => (x % 40) as usize,
            800..=979 => 130 + (x % 2000) as usize,
            _ => 16_400 + (x % 3000) as usize,
        };
        // Events of 16 and 1024 bytes: one starts exactly where each chunk is full.
        let lines = [
            line(3 << 20, true, mixed),
            line(3 << 20, false, |_| 8),
            line(3 << 20, false, |_| 1014),
            line(100 << 10, true, mixed),
        ];
        for (li, (whole, tags)) in lines.iter().enumerate() {
            let n = whole.len();
            // Whole; cut inside an event's tag, length or payload, or just before its end.
            let mut cuts = vec![n, 1, 2, 3];
            for k in (0..tags.len()).step_by(tags.len() / 50 + 1) {
                let (t, next) = (tags[k], tags.get(k + 1).copied().unwrap_or(n));
                cuts.extend([t + 1, t + 2, t + 3, (t + next) / 2, next - 1]);
            }
            for cut in cuts {
                let buf = &whole[..cut];
                let framed = super::frame_line(buf, (0, cut), "p", 0);
                let parsed = super::parse_line(buf, (0, cut), "p", 0, &index).map(|(l, _)| l);
                let what = format!("line {li} cut at {cut} of {n}");
                match (framed, parsed) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(a.num_events, b.num_events, "{what}");
                        assert_eq!(a.chunks, b.chunks, "{what}");
                        assert_eq!(
                            (a.name, a.timestamp_ns, a.msg),
                            (b.name, b.timestamp_ns, b.msg),
                            "{what}"
                        );
                        if cut == n && n > 2 << 20 {
                            assert!(a.chunks.len() >= 3, "{what}: {} chunks", a.chunks.len());
                        }
                        if cut == n && li > 0 && li < 3 {
                            assert_eq!(a.chunks[1].0, 1 << 20, "{what}");
                        }
                    }
                    (Err(a), Err(b)) => assert_eq!(
                        (a.err.offset, a.err.kind.to_string(), a.context),
                        (b.err.offset, b.err.kind.to_string(), b.context),
                        "{what}"
                    ),
                    (a, b) => panic!("{what}: framed {:?}, parsed {:?}", a.is_ok(), b.is_ok()),
                }
            }
        }
    }
}
