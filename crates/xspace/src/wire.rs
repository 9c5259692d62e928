//! The protobuf wire format, decoded by hand over a borrowed buffer.
//!
//! Positions are absolute byte offsets into the whole file, so every error can name the byte
//! where it happened. Semantics follow prost (the reference decoder we are compared against):
//! varints longer than 10 bytes or overflowing 64 bits are errors, field number 0 is an error,
//! groups (wire types 3/4) are skipped when they belong to unknown fields, and a length that runs
//! past the end of its enclosing message is a truncation error.

use std::fmt;

/// Protobuf wire types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireType {
    /// 0: int32/64, uint32/64, bool, enum.
    Varint = 0,
    /// 1: double, fixed64.
    Fixed64 = 1,
    /// 2: string, bytes, messages, packed repeated.
    Len = 2,
    /// 3: deprecated group start.
    StartGroup = 3,
    /// 4: deprecated group end.
    EndGroup = 4,
    /// 5: float, fixed32.
    Fixed32 = 5,
}

impl WireType {
    /// The name protobuf documentation uses.
    pub fn name(self) -> &'static str {
        match self {
            WireType::Varint => "varint",
            WireType::Fixed64 => "fixed64",
            WireType::Len => "length-delimited",
            WireType::StartGroup => "start-group",
            WireType::EndGroup => "end-group",
            WireType::Fixed32 => "fixed32",
        }
    }
}

/// What went wrong at the wire level, with the absolute byte offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    /// Absolute byte offset in the buffer.
    pub offset: u64,
    /// What was wrong.
    pub kind: WireErrorKind,
}

/// The kinds of wire-level errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireErrorKind {
    /// The buffer (or the enclosing message) ended inside a value.
    Truncated,
    /// A varint of more than 10 bytes, or one that overflows 64 bits.
    OverlongVarint,
    /// Wire types 6 and 7 do not exist.
    InvalidWireType(u64),
    /// Field numbers start at 1.
    FieldNumberZero,
    /// Field numbers end at 2^29 − 1.
    FieldNumberTooLarge(u64),
    /// A known field arrived with another wire type than the schema's.
    UnexpectedWireType {
        /// Field number.
        field: u32,
        /// Field name in the schema.
        name: &'static str,
        /// The wire type found.
        got: WireType,
        /// The schema's wire type.
        want: WireType,
    },
    /// A `string` field that is not UTF-8.
    InvalidUtf8 {
        /// Field number.
        field: u32,
        /// Field name in the schema.
        name: &'static str,
    },
    /// An end-group tag without a matching start, or a group that never ends.
    UnbalancedGroup,
}

impl fmt::Display for WireErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireErrorKind::Truncated => write!(
                f,
                "truncated: a value runs past the end of its message or of the file"
            ),
            WireErrorKind::OverlongVarint => {
                write!(f, "invalid varint (longer than 10 bytes or over 64 bits)")
            }
            WireErrorKind::InvalidWireType(t) => write!(f, "invalid wire type {t}"),
            WireErrorKind::FieldNumberZero => write!(f, "invalid field number 0"),
            WireErrorKind::FieldNumberTooLarge(n) => write!(f, "invalid field number {n}"),
            WireErrorKind::UnexpectedWireType {
                field,
                name,
                got,
                want,
            } => write!(
                f,
                "field {field} ({name}) has wire type {}, expected {}",
                got.name(),
                want.name()
            ),
            WireErrorKind::InvalidUtf8 { field, name } => {
                write!(f, "field {field} ({name}) is a string but not valid UTF-8")
            }
            WireErrorKind::UnbalancedGroup => write!(f, "unbalanced group tags"),
        }
    }
}

/// Result of wire decoding.
pub type WireResult<T> = Result<T, WireError>;

#[inline]
fn err<T>(offset: usize, kind: WireErrorKind) -> WireResult<T> {
    Err(WireError {
        offset: offset as u64,
        kind,
    })
}

/// Decode a varint at `*pos` (absolute), not reading at or past `end`.
#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize, end: usize) -> WireResult<u64> {
    let start = *pos;
    // Fast path: one byte (most tags, small ids and lengths).
    if start < end {
        let b = buf[start];
        if b < 0x80 {
            *pos = start + 1;
            return Ok(b as u64);
        }
    }
    // Fast path: ten bytes left in the *buffer*, so a fixed-size window needs no per-byte
    // bounds check; a varint that ends past `end` (the enclosing message) is still truncated.
    if buf.len() >= 10 && start <= buf.len() - 10 && start < end {
        let w: &[u8; 10] = buf[start..start + 10].try_into().unwrap();
        let mut result: u64 = 0;
        for (k, &b) in w.iter().enumerate() {
            if start + k >= end {
                return err(start, WireErrorKind::Truncated);
            }
            if k == 9 && b > 1 {
                return err(start, WireErrorKind::OverlongVarint);
            }
            result |= ((b & 0x7f) as u64) << (7 * k);
            if b < 0x80 {
                *pos = start + k + 1;
                return Ok(result);
            }
        }
        return err(start, WireErrorKind::OverlongVarint);
    }
    read_varint_slow(buf, pos, end)
}

/// Skip the varint at `pos` (not past `end`), returning the position after it: the same checks
/// as [`read_varint`] without assembling the value. Eight bytes are tested at once: the first
/// byte without its high bit ends the varint.
#[inline(always)]
pub fn skip_varint(buf: &[u8], pos: usize, end: usize) -> WireResult<usize> {
    if let Some(w) = buf.get(pos..pos + 8) {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        let stops = !w & 0x8080_8080_8080_8080;
        if stops != 0 {
            let next = pos + (stops.trailing_zeros() / 8) as usize + 1;
            if next > end {
                return err(pos, WireErrorKind::Truncated);
            }
            return Ok(next);
        }
    }
    let mut p = pos;
    read_varint(buf, &mut p, end)?;
    Ok(p)
}

/// [`read_varint`] for values that are usually several bytes long (timestamps, durations):
/// when the varint ends within the next eight bytes, its 7-bit groups are gathered from one
/// 64-bit load without a loop. Same checks and result as [`read_varint`].
#[inline(always)]
pub fn read_varint_wide(buf: &[u8], pos: &mut usize, end: usize) -> WireResult<u64> {
    let p = *pos;
    if let Some(w) = buf.get(p..p + 8) {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        let stops = !w & 0x8080_8080_8080_8080;
        if stops != 0 {
            let len = (stops.trailing_zeros() / 8) as usize + 1;
            if p + len > end {
                return err(p, WireErrorKind::Truncated);
            }
            // Keep the varint's bytes, drop their continuation bits, then close the gaps:
            // 7-bit groups -> 14-bit -> 28-bit -> 56-bit.
            let mut x = if len == 8 {
                w
            } else {
                w & ((1u64 << (8 * len)) - 1)
            };
            x &= 0x7f7f_7f7f_7f7f_7f7f;
            x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
            x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
            x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
            *pos = p + len;
            return Ok(x);
        }
    }
    read_varint(buf, pos, end)
}

#[cold]
fn read_varint_slow(buf: &[u8], pos: &mut usize, end: usize) -> WireResult<u64> {
    let start = *pos;
    let mut result: u64 = 0;
    let mut i = start;
    for shift in (0..70).step_by(7) {
        if i >= end {
            return err(start, WireErrorKind::Truncated);
        }
        let b = buf[i];
        i += 1;
        if shift == 63 && b > 1 {
            return err(start, WireErrorKind::OverlongVarint);
        }
        result |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            *pos = i;
            return Ok(result);
        }
    }
    err(start, WireErrorKind::OverlongVarint)
}

/// One field's value; `Len` carries the absolute `[start, end)` of its payload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A varint.
    Varint(u64),
    /// Eight little-endian bytes.
    Fixed64(u64),
    /// Four little-endian bytes.
    Fixed32(u32),
    /// Payload `[start, end)`, absolute.
    Len(usize, usize),
    /// A group (of an unknown field), already skipped.
    Group,
}

impl Value {
    /// The wire type this value was encoded with.
    pub fn wire_type(&self) -> WireType {
        match self {
            Value::Varint(_) => WireType::Varint,
            Value::Fixed64(_) => WireType::Fixed64,
            Value::Fixed32(_) => WireType::Fixed32,
            Value::Len(..) => WireType::Len,
            Value::Group => WireType::StartGroup,
        }
    }
}

/// A decoded field: number, value and the absolute offset of its tag.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Field number.
    pub number: u32,
    /// Decoded value.
    pub value: Value,
    /// Absolute offset of the tag.
    pub offset: usize,
}

impl Field {
    #[inline]
    fn mismatch<T>(&self, name: &'static str, want: WireType) -> WireResult<T> {
        err(
            self.offset,
            WireErrorKind::UnexpectedWireType {
                field: self.number,
                name,
                got: self.value.wire_type(),
                want,
            },
        )
    }
    /// The value of a varint field (int64/uint64/bool/enum).
    #[inline]
    pub fn varint(&self, name: &'static str) -> WireResult<u64> {
        match self.value {
            Value::Varint(v) => Ok(v),
            _ => self.mismatch(name, WireType::Varint),
        }
    }
    /// The value of a fixed64 field (double, fixed64).
    #[inline]
    pub fn fixed64(&self, name: &'static str) -> WireResult<u64> {
        match self.value {
            Value::Fixed64(v) => Ok(v),
            _ => self.mismatch(name, WireType::Fixed64),
        }
    }
    /// The `[start, end)` of a length-delimited field.
    #[inline]
    pub fn len(&self, name: &'static str) -> WireResult<(usize, usize)> {
        match self.value {
            Value::Len(s, e) => Ok((s, e)),
            _ => self.mismatch(name, WireType::Len),
        }
    }
    /// A length-delimited field that must be UTF-8 (proto3 `string`).
    #[inline]
    pub fn string(&self, buf: &[u8], name: &'static str) -> WireResult<(usize, usize)> {
        let (s, e) = self.len(name)?;
        if std::str::from_utf8(&buf[s..e]).is_err() {
            return err(
                s,
                WireErrorKind::InvalidUtf8 {
                    field: self.number,
                    name,
                },
            );
        }
        Ok((s, e))
    }
}

/// Iterator over the fields of the message occupying `buf[pos..end]`.
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Fields<'a> {
    /// `end` must be ≤ `buf.len()` (callers pass spans they got from this module).
    #[inline]
    pub fn new(buf: &'a [u8], start: usize, end: usize) -> Self {
        debug_assert!(end <= buf.len());
        Fields {
            buf,
            pos: start,
            end: end.min(buf.len()),
        }
    }

    /// The absolute position of the next field.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Decode the single field at `pos` (for fast paths that fall back to the general case).
    #[inline]
    pub fn field_at(buf: &'a [u8], pos: usize, end: usize) -> WireResult<(Field, usize)> {
        let mut f = Fields::new(buf, pos, end);
        let field = f.next_field()?;
        Ok((field, f.pos))
    }

    #[inline(always)]
    fn next_field(&mut self) -> WireResult<Field> {
        let offset = self.pos;
        let key = read_varint(self.buf, &mut self.pos, self.end)?;
        let number = key >> 3;
        if number == 0 {
            return err(offset, WireErrorKind::FieldNumberZero);
        }
        if number > (1 << 29) - 1 {
            return err(offset, WireErrorKind::FieldNumberTooLarge(number));
        }
        let number = number as u32;
        let value = match key & 7 {
            0 => Value::Varint(read_varint(self.buf, &mut self.pos, self.end)?),
            2 => {
                let len_at = self.pos;
                let len = read_varint(self.buf, &mut self.pos, self.end)?;
                if len > (self.end - self.pos) as u64 {
                    return err(len_at, WireErrorKind::Truncated);
                }
                let s = self.pos;
                self.pos += len as usize;
                Value::Len(s, self.pos)
            }
            1 => {
                if self.end - self.pos < 8 {
                    return err(self.pos, WireErrorKind::Truncated);
                }
                let v = u64::from_le_bytes(self.buf[self.pos..self.pos + 8].try_into().unwrap());
                self.pos += 8;
                Value::Fixed64(v)
            }
            5 => {
                if self.end - self.pos < 4 {
                    return err(self.pos, WireErrorKind::Truncated);
                }
                let v = u32::from_le_bytes(self.buf[self.pos..self.pos + 4].try_into().unwrap());
                self.pos += 4;
                Value::Fixed32(v)
            }
            3 => {
                self.skip_group(number as u64, offset)?;
                Value::Group
            }
            4 => return err(offset, WireErrorKind::UnbalancedGroup),
            t => return err(offset, WireErrorKind::InvalidWireType(t)),
        };
        Ok(Field {
            number,
            value,
            offset,
        })
    }

    /// Skip to the end-group tag matching `number` (groups may nest).
    fn skip_group(&mut self, number: u64, offset: usize) -> WireResult<()> {
        let mut depth: Vec<u64> = vec![number];
        while let Some(&top) = depth.last() {
            if self.pos >= self.end {
                return err(offset, WireErrorKind::UnbalancedGroup);
            }
            let at = self.pos;
            let key = read_varint(self.buf, &mut self.pos, self.end)?;
            let n = key >> 3;
            match key & 7 {
                0 => {
                    read_varint(self.buf, &mut self.pos, self.end)?;
                }
                1 | 5 => {
                    let w = if key & 7 == 1 { 8 } else { 4 };
                    if self.end - self.pos < w {
                        return err(self.pos, WireErrorKind::Truncated);
                    }
                    self.pos += w;
                }
                2 => {
                    let len_at = self.pos;
                    let len = read_varint(self.buf, &mut self.pos, self.end)?;
                    if len > (self.end - self.pos) as u64 {
                        return err(len_at, WireErrorKind::Truncated);
                    }
                    self.pos += len as usize;
                }
                3 => depth.push(n),
                4 => {
                    if n != top {
                        return err(at, WireErrorKind::UnbalancedGroup);
                    }
                    depth.pop();
                }
                t => return err(at, WireErrorKind::InvalidWireType(t)),
            }
        }
        Ok(())
    }
}

impl Iterator for Fields<'_> {
    type Item = WireResult<Field>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.end {
            return None;
        }
        let r = self.next_field();
        if r.is_err() {
            // Stop after the first error: nothing after it can be framed reliably.
            self.pos = self.end;
        }
        Some(r)
    }
}

/// Read a varint that open-time validation already checked (no error path): stops at the
/// first byte < 0x80 or after ten bytes.
#[inline(always)]
pub fn read_varint_trusted(buf: &[u8], pos: &mut usize) -> u64 {
    let mut result = 0u64;
    let mut p = *pos;
    if let Some(&b) = buf.get(p)
        && b < 0x80
    {
        *pos = p + 1;
        return b as u64;
    }
    // A fixed ten-byte window: no per-byte bounds checks.
    if let Some(w) = buf.get(p..p + 10) {
        let w: &[u8; 10] = w.try_into().unwrap();
        for (k, &b) in w.iter().enumerate() {
            result |= ((b & 0x7f) as u64) << (7 * k);
            if b < 0x80 {
                *pos = p + k + 1;
                return result;
            }
        }
        *pos = p + 10;
        return result;
    }
    for k in 0..10 {
        let Some(&b) = buf.get(p) else { break };
        p += 1;
        result |= ((b & 0x7f) as u64) << (7 * k);
        if b < 0x80 {
            break;
        }
    }
    *pos = p;
    result
}

/// Skip the field whose tag is at `p` in an already-validated message, returning the position
/// after it (`end` if it cannot be framed, which validation rules out).
#[inline(always)]
pub fn skip_trusted(buf: &[u8], p: usize, end: usize) -> usize {
    let mut q = p;
    let key = read_varint_trusted(buf, &mut q);
    match key & 7 {
        0 => {
            read_varint_trusted(buf, &mut q);
            q
        }
        1 => q + 8,
        2 => {
            let len = read_varint_trusted(buf, &mut q) as usize;
            q + len
        }
        5 => q + 4,
        _ => Fields::field_at(buf, p, end).map_or(end, |(_, next)| next),
    }
}

/// Iterate a `repeated int64` field value, packed (`Len`) or not (`Varint`), calling `f`.
pub fn for_each_packed_varint(
    buf: &[u8],
    field: &Field,
    name: &'static str,
    mut f: impl FnMut(u64),
) -> WireResult<()> {
    match field.value {
        Value::Varint(v) => {
            f(v);
            Ok(())
        }
        Value::Len(s, e) => {
            let mut p = s;
            while p < e {
                f(read_varint(buf, &mut p, e)?);
            }
            Ok(())
        }
        _ => field.mismatch(name, WireType::Varint),
    }
}

/// Count tags and varints only: the floor of any decoder (what a single-threaded pass over
/// the bytes costs). Descends into the fields of `XSpace`→`XPlane`→`XLine`→`XEvent`→`XStat`
/// that are messages, so every byte of the event data is visited once; checks framing only.
pub fn scan_floor(buf: &[u8]) -> WireResult<u64> {
    // (message kind, field number) → the kind of the sub-message, if descended into.
    #[inline(always)]
    fn sub(kind: u8, number: u64) -> Option<u8> {
        match (kind, number) {
            (0, 1) => Some(1),          // XSpace.planes → XPlane
            (1, 3) => Some(2),          // XPlane.lines → XLine
            (1, 6) | (3, 4) => Some(4), // plane stats, event stats → XStat
            (2, 4) => Some(3),          // XLine.events → XEvent
            _ => None,
        }
    }
    let mut count = 0u64;
    // (kind, end, resume position) of the enclosing messages.
    let mut stack: Vec<(u8, usize, usize)> = Vec::with_capacity(8);
    let (mut kind, mut end, mut p) = (0u8, buf.len(), 0usize);
    loop {
        if p >= end {
            match stack.pop() {
                Some((k, e, resume)) => (kind, end, p) = (k, e, resume),
                None => return Ok(count),
            }
            continue;
        }
        let at = p;
        let key = read_varint(buf, &mut p, end)?;
        count += 1;
        match key & 7 {
            0 => drop(read_varint(buf, &mut p, end)?),
            1 | 5 => {
                let w = if key & 7 == 1 { 8 } else { 4 };
                if end - p < w {
                    return err(p, WireErrorKind::Truncated);
                }
                p += w;
            }
            2 => {
                let len_at = p;
                let len = read_varint(buf, &mut p, end)?;
                if len > (end - p) as u64 {
                    return err(len_at, WireErrorKind::Truncated);
                }
                let s = p;
                p += len as usize;
                if let Some(k) = sub(kind, key >> 3) {
                    stack.push((kind, end, p));
                    (kind, end, p) = (k, s + len as usize, s);
                }
            }
            _ => p = Fields::field_at(buf, at, end)?.1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        let mut p = 0;
        assert_eq!(read_varint(&[0x96, 0x01], &mut p, 2), Ok(150));
        assert_eq!(p, 2);
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let mut p = 0;
        assert_eq!(read_varint(&max, &mut p, 10), Ok(u64::MAX));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        let mut p = 0;
        assert_eq!(
            read_varint(&over, &mut p, 10).unwrap_err().kind,
            WireErrorKind::OverlongVarint
        );
        let eleven = [0x80; 11];
        let mut p = 0;
        assert!(read_varint(&eleven, &mut p, 11).is_err());
        let mut p = 0;
        assert_eq!(
            read_varint(&[0x80, 0x80], &mut p, 2).unwrap_err().kind,
            WireErrorKind::Truncated
        );
    }

    #[test]
    fn read_varint_wide_matches_read_varint() {
        let values: Vec<u64> = (0..64)
            .flat_map(|b| [1u64 << b, (1u64 << b) - 1, (1u64 << b) | 0x55])
            .chain([0, u64::MAX, 123_456_789_012])
            .collect();
        for v in values {
            let mut enc = Vec::new();
            let mut x = v;
            loop {
                let byte = (x & 0x7f) as u8;
                x >>= 7;
                if x == 0 {
                    enc.push(byte);
                    break;
                }
                enc.push(byte | 0x80);
            }
            // With and without slack after the varint, and cut short (truncated).
            for pad in [0usize, 3, 12] {
                let mut b = enc.clone();
                b.extend(std::iter::repeat_n(0xffu8, pad));
                let (mut p1, mut p2) = (0, 0);
                let end = enc.len();
                assert_eq!(
                    read_varint_wide(&b, &mut p1, end),
                    read_varint(&b, &mut p2, end),
                    "value {v} pad {pad}"
                );
                assert_eq!(p1, p2);
                if end > 1 {
                    let (mut p1, mut p2) = (0, 0);
                    assert_eq!(
                        read_varint_wide(&b, &mut p1, end - 1),
                        read_varint(&b, &mut p2, end - 1)
                    );
                }
            }
        }
    }

    #[test]
    fn skip_varint_matches_read_varint() {
        let cases: &[&[u8]] = &[
            &[0x05, 0, 0, 0, 0, 0, 0, 0, 0],
            &[0x96, 0x01, 0, 0, 0, 0, 0, 0, 0],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[0x80, 0x80, 0x80],
            &[0x80; 12],
            &[0x96, 0x01],
        ];
        for c in cases {
            for end in 0..=c.len() {
                let mut p = 0;
                let want = read_varint(c, &mut p, end).map(|_| p);
                assert_eq!(skip_varint(c, 0, end), want, "{c:?} end {end}");
            }
        }
    }

    #[test]
    fn groups_of_unknown_fields_are_skipped() {
        // field 9 start-group { field 1 varint 5 } end-group, then field 1 varint 7.
        let buf = [0x4b, 0x08, 0x05, 0x4c, 0x08, 0x07];
        let fields: Vec<_> = Fields::new(&buf, 0, buf.len())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[0].value, Value::Group);
        assert_eq!(fields[1].value, Value::Varint(7));
        // An end-group with no start.
        let bad = [0x4c];
        assert_eq!(
            Fields::new(&bad, 0, 1).next().unwrap().unwrap_err().kind,
            WireErrorKind::UnbalancedGroup
        );
    }

    #[test]
    fn length_past_end_is_truncation_at_the_length_byte() {
        let buf = [0x0a, 0x05, b'a'];
        let e = Fields::new(&buf, 0, buf.len()).next().unwrap().unwrap_err();
        assert_eq!(e.offset, 1);
        assert_eq!(e.kind, WireErrorKind::Truncated);
    }
}
