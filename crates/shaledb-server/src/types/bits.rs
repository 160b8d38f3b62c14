//! Bit operations on strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, and LCS's table.
//!
//! Bits are numbered as Redis numbers them: bit 0 is the most significant bit of byte 0. A string is a bit
//! array padded with zero bits without end; a write past its end grows it with zero bytes first.
//!
//! Storage: the bits are the string's bytes, in the string's own record ([`super::string`]: the value inline
//! in the meta value). So every write here reads the whole value and writes it back whole: SETBIT and
//! BITFIELD on a string of `n` bytes cost O(n) time and put `n` bytes into the WAL and the memtable, where
//! Redis changes one byte in memory. That is the price of one engine key per string (a read is one `get`);
//! a chunked layout for large bitmaps would change docs/format/server-keys.md and is not done.
//!
//! Offsets are checked before anything is sized by them: at most [`MAX_BIT_OFFSET`] (512 MB of bits, as
//! Redis's `proto-max-bulk-len`), and the engine's own entry limit
//! (`shaledb::options::limits::MAX_KEY_VALUE_BYTES`) before a grown string is allocated.

use super::string::{self, Error};
use crate::store::{self, WriteCtx};
use bytes::Bytes;

/// The largest bit offset: the last bit of a 512 MB string.
pub const MAX_BIT_OFFSET: u64 = (512u64 << 20) * 8 - 1;

/// The bit at `offset` of `v` (0 past its end).
pub fn bit_at(v: &[u8], offset: u64) -> bool {
    usize::try_from(offset >> 3).ok().and_then(|i| v.get(i)).is_some_and(|b| b & (0x80 >> (offset & 7)) != 0)
}

/// Redis's range rules for BITCOUNT and BITPOS on a string of `len` bytes: `start` and `end` count bytes, or
/// bits when `bits`; negative ones count from the end; both are clamped into the string. Returns the first and
/// last bit of the range, or `None` when it is empty.
pub fn bit_range(len: usize, start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { (len as i64).saturating_mul(8) } else { len as i64 };
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s += total;
    }
    if e < 0 {
        e += total;
    }
    s = s.max(0);
    e = e.max(0);
    if e >= total {
        e = total - 1;
    }
    if s > e {
        return None;
    }
    let (s, e) = (s as u64, e as u64);
    Some(if bits { (s, e) } else { (s * 8, e * 8 + 7) })
}

/// The number of set bits from bit `first` to bit `last` (both included) of `v`; both lie inside `v`.
pub fn count(v: &[u8], first: u64, last: u64) -> u64 {
    let (a, b) = ((first >> 3) as usize, (last >> 3) as usize);
    let Some(bytes) = v.get(a..=b) else { return 0 };
    let mut n = popcount(bytes);
    // Take off the bits of the edge bytes outside the range.
    n -= u64::from((bytes[0] & !(0xffu8 >> (first & 7))).count_ones());
    n -= u64::from((bytes[bytes.len() - 1] & (0x7fu8 >> (last & 7))).count_ones());
    n
}

fn popcount(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        n += u64::from(u64::from_ne_bytes(w).count_ones());
    }
    n + chunks.remainder().iter().map(|b| u64::from(b.count_ones())).sum::<u64>()
}

/// BITPOS: the first bit equal to `bit` from bit `first` to bit `last` (both included, inside `v`), or
/// `-1`. Looking for a clear bit in a range without a given end answers the bit just past the range (the
/// string is padded with zeros), as Redis does; with an end given it answers `-1`.
pub fn position(v: &[u8], bit: bool, first: u64, last: u64, end_given: bool) -> i64 {
    let skip = if bit { 0x00 } else { 0xff };
    let mut p = first;
    while p <= last {
        if p & 7 == 0 && p + 7 <= last && v.get((p >> 3) as usize) == Some(&skip) {
            p += 8;
            continue;
        }
        if bit_at(v, p) == bit {
            return p as i64;
        }
        p += 1;
    }
    if bit || end_given {
        -1
    } else {
        last as i64 + 1
    }
}

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// BITOP's result over `srcs` (a missing key is an empty string, zero-padded like the shorter ones): as long
/// as the longest source; empty when every source is.
pub fn bitop(op: BitOp, srcs: &[Bytes]) -> Vec<u8> {
    let len = srcs.iter().map(Bytes::len).max().unwrap_or(0);
    let Some((first, rest)) = srcs.split_first() else { return Vec::new() };
    let mut out = first.to_vec();
    out.resize(len, 0);
    match op {
        BitOp::Not => out.iter_mut().for_each(|b| *b = !*b),
        BitOp::And => {
            for s in rest {
                out.iter_mut().enumerate().for_each(|(i, b)| *b &= s.get(i).copied().unwrap_or(0));
            }
        }
        BitOp::Or => {
            for s in rest {
                out.iter_mut().zip(s.iter()).for_each(|(b, x)| *b |= x);
            }
        }
        BitOp::Xor => {
            for s in rest {
                out.iter_mut().zip(s.iter()).for_each(|(b, x)| *b ^= x);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------------
// BITFIELD

/// What BITFIELD does when a SET or INCRBY does not fit its type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overflow {
    /// Wrap around (modulo for unsigned types; two's complement for signed ones). The default.
    #[default]
    Wrap,
    /// Saturate at the type's minimum or maximum.
    Sat,
    /// Leave the field as it is and answer nil.
    Fail,
}

/// A field's type: `i1`..`i64` or `u1`..`u63`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldType {
    pub signed: bool,
    pub bits: u32,
}

/// One BITFIELD operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD operation on its field, with the OVERFLOW mode in force for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub op: FieldOp,
    pub ty: FieldType,
    /// The field's first bit.
    pub offset: u64,
    pub overflow: Overflow,
}

impl Field {
    /// The last bit a write of this field touches.
    pub fn last_bit(&self) -> u64 {
        self.offset + u64::from(self.ty.bits) - 1
    }
}

/// The `bits`-bit unsigned integer at bit `offset` of `v`, most significant bit first; zero bits past the
/// end of `v`.
pub fn read_unsigned(v: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |acc, j| (acc << 1) | u64::from(bit_at(v, offset + j)))
}

/// [`read_unsigned`] read as two's complement.
pub fn read_signed(v: &[u8], offset: u64, bits: u32) -> i64 {
    let u = read_unsigned(v, offset, bits);
    if bits < 64 && u & (1 << (bits - 1)) != 0 {
        (u | (u64::MAX << bits)) as i64
    } else {
        u as i64
    }
}

/// Writes the low `bits` bits of `value` at bit `offset` of `v`, which holds them.
pub fn write_unsigned(v: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let on = value & (1 << (u64::from(bits) - 1 - j)) != 0;
        let at = offset + j;
        if let Some(b) = v.get_mut((at >> 3) as usize) {
            let mask = 0x80u8 >> (at & 7);
            if on {
                *b |= mask;
            } else {
                *b &= !mask;
            }
        }
    }
}

/// Whether `value + incr` leaves the unsigned `bits`-bit range (`Some`), and then the value the overflow
/// mode gives (for FAIL: unused). `value` itself may be out of range (a SET's argument).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, mode: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let room_up = max.wrapping_sub(value) as i64;
    let room_down = value.wrapping_neg() as i64;
    let over = value > max || (incr > 0 && incr > room_up);
    let under = !over && incr < 0 && incr < room_down;
    if !(over || under) {
        return None;
    }
    Some(match mode {
        Overflow::Wrap => value.wrapping_add(incr as u64) & max,
        Overflow::Sat if over => max,
        _ => 0,
    })
}

/// [`unsigned_overflow`] for a signed `bits`-bit field.
fn signed_overflow(value: i64, incr: i64, bits: u32, mode: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let room_up = (max as u64).wrapping_sub(value as u64) as i64;
    let room_down = min.wrapping_sub(value);
    let over = value > max || (bits != 64 && incr > room_up) || (value >= 0 && incr > 0 && incr > room_up);
    let under =
        !over && (value < min || (bits != 64 && incr < room_down) || (value < 0 && incr < 0 && incr < room_down));
    if !(over || under) {
        return None;
    }
    Some(match mode {
        Overflow::Wrap => {
            let c = (value as u64).wrapping_add(incr as u64);
            if bits < 64 {
                let high = u64::MAX << bits;
                (if c & (1 << (bits - 1)) != 0 { c | high } else { c & !high }) as i64
            } else {
                c as i64
            }
        }
        Overflow::Sat if over => max,
        Overflow::Sat => min,
        Overflow::Fail => 0,
    })
}

/// Runs one SET or INCRBY on `v` (which holds the field's bits). Returns the reply (`None`: refused by
/// OVERFLOW FAIL) and whether the field changed.
fn write_field(v: &mut [u8], f: &Field) -> (Option<i64>, bool) {
    let FieldType { signed, bits } = f.ty;
    if signed {
        let old = read_signed(v, f.offset, bits);
        let (new, reply, over) = match f.op {
            FieldOp::IncrBy(by) => {
                let over = signed_overflow(old, by, bits, f.overflow);
                let new = over.unwrap_or_else(|| old.wrapping_add(by));
                (new, new, over.is_some())
            }
            FieldOp::Set(x) => {
                let over = signed_overflow(x, 0, bits, f.overflow);
                (over.unwrap_or(x), old, over.is_some())
            }
            FieldOp::Get => (old, old, false),
        };
        if over && f.overflow == Overflow::Fail {
            return (None, false);
        }
        write_unsigned(v, f.offset, bits, new as u64);
        (Some(reply), new != old)
    } else {
        let old = read_unsigned(v, f.offset, bits);
        let (new, reply, over) = match f.op {
            FieldOp::IncrBy(by) => {
                let over = unsigned_overflow(old, by, bits, f.overflow);
                let new = over.unwrap_or_else(|| old.wrapping_add(by as u64));
                (new, new, over.is_some())
            }
            FieldOp::Set(x) => {
                let over = unsigned_overflow(x as u64, 0, bits, f.overflow);
                (over.unwrap_or(x as u64), old, over.is_some())
            }
            FieldOp::Get => (old, old, false),
        };
        if over && f.overflow == Overflow::Fail {
            return (None, false);
        }
        write_unsigned(v, f.offset, bits, new);
        (Some(reply as i64), new != old)
    }
}

/// A GET of `f` on `v` (zero past its end).
pub fn get_field(v: &[u8], f: &Field) -> i64 {
    if f.ty.signed {
        read_signed(v, f.offset, f.ty.bits)
    } else {
        read_unsigned(v, f.offset, f.ty.bits) as i64
    }
}

// ---------------------------------------------------------------------------------------------------------
// Writes on the store

/// The string `key` grown with zero bytes to hold bit `last_bit`, for a write: its bytes, its expiry, and
/// whether it is new or grew. The size is checked against the engine's limit before anything is allocated.
fn grown(ctx: &mut WriteCtx<'_>, key: &[u8], last_bit: u64) -> Result<(Vec<u8>, Option<u64>, bool), Error> {
    let found = string::get_stored_mut(ctx, key)?;
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let created = found.is_none();
    let old = string::value_of(found).unwrap_or_default();
    let need = usize::try_from((last_bit >> 3) + 1).map_err(|_| Error::TooLong)?;
    if need as u64 > string::MAX_STRING_LEN {
        return Err(Error::TooLong);
    }
    let len = old.len().max(need);
    store::check_entry_size(key.len(), len + 9)?;
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&old);
    v.resize(len, 0);
    Ok((v, ttl, created || len > old.len()))
}

/// SETBIT: sets bit `offset` (at most [`MAX_BIT_OFFSET`]) of the string `key` to `on`, growing or
/// creating it, keeping its expiry. Returns the bit's old value.
pub fn set_bit(ctx: &mut WriteCtx<'_>, key: &[u8], offset: u64, on: bool) -> Result<bool, Error> {
    let (mut v, ttl, dirty) = grown(ctx, key, offset)?;
    let old = bit_at(&v, offset);
    if dirty || old != on {
        write_unsigned(&mut v, offset, 1, u64::from(on));
        string::put(ctx, key, &v, ttl)?;
    }
    Ok(old)
}

/// BITOP: computes `op` over the strings `srcs` (missing keys are empty; WRONGTYPE for another type) and
/// stores the result in `dest` without an expiry, or deletes `dest` when the result is empty. Returns the
/// result's length.
pub fn bitop_store(ctx: &mut WriteCtx<'_>, op: BitOp, dest: &[u8], srcs: &[Bytes]) -> Result<usize, Error> {
    let mut values = Vec::with_capacity(srcs.len());
    for k in srcs {
        let found = string::get_stored_mut(ctx, k)?;
        if found.is_none() {
            ctx.note_miss(k);
        }
        values.push(string::value_of(found).unwrap_or_default());
    }
    let out = bitop(op, &values);
    if out.is_empty() {
        ctx.delete_key(dest);
    } else {
        string::check_size(dest, &out)?;
        string::put(ctx, dest, &out, None)?;
    }
    Ok(out.len())
}

/// BITFIELD with at least one SET or INCRBY: grows or creates the string `key` to hold every written
/// field (as Redis does, even when OVERFLOW FAIL then refuses them), runs `fields` in order, and stores the
/// string if anything changed, keeping its expiry. Returns one reply per field (`None`: refused by FAIL).
pub fn bitfield(ctx: &mut WriteCtx<'_>, key: &[u8], fields: &[Field]) -> Result<Vec<Option<i64>>, Error> {
    let last = fields.iter().filter(|f| f.op != FieldOp::Get).map(Field::last_bit).max().unwrap_or(0);
    let (mut v, ttl, mut dirty) = grown(ctx, key, last)?;
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        if f.op == FieldOp::Get {
            out.push(Some(get_field(&v, f)));
        } else {
            let (reply, changed) = write_field(&mut v, f);
            dirty |= changed;
            out.push(reply);
        }
    }
    if dirty {
        string::put(ctx, key, &v, ttl)?;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------------
// LCS

/// The most bytes LCS's table may take: Redis's `proto-max-bulk-len`.
pub const MAX_LCS_TABLE: u64 = 512 << 20;

/// Why LCS gave no answer (Redis's texts).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LcsError {
    #[error("String too long for LCS")]
    TooLong,
    #[error("Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")]
    TableTooLarge,
    #[error("Insufficient memory, failed allocating transient memory for LCS")]
    NoMemory,
}

/// One run of matching bytes: its first and last index in each string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcsMatch {
    pub a: (u32, u32),
    pub b: (u32, u32),
}

impl LcsMatch {
    /// The run's length in bytes.
    pub fn run_len(&self) -> u32 {
        self.a.1 - self.a.0 + 1
    }
}

/// A longest common subsequence of two strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lcs {
    pub len: u32,
    /// The subsequence (filled when asked for).
    pub text: Vec<u8>,
    /// Its runs, from the end of the strings backwards, those shorter than the minimum left out (filled when
    /// asked for).
    pub matches: Vec<LcsMatch>,
}

/// The longest common subsequence of `a` and `b` by the dynamic-programming table; with `walk`, also the
/// subsequence and its runs of at least `min_run` bytes (0: all), found walking the table back from the end
/// as Redis does, so ties resolve the same way.
pub fn lcs(a: &[u8], b: &[u8], walk: bool, min_run: u64) -> Result<Lcs, LcsError> {
    if a.len() as u64 >= u64::from(u32::MAX) - 1 || b.len() as u64 >= u64::from(u32::MAX) - 1 {
        return Err(LcsError::TooLong);
    }
    let (n, m) = (a.len(), b.len());
    let cells = (n as u64 + 1) * (m as u64 + 1);
    if cells.saturating_mul(4) > MAX_LCS_TABLE {
        return Err(LcsError::TableTooLarge);
    }
    let cells = cells as usize;
    let mut t: Vec<u32> = Vec::new();
    t.try_reserve_exact(cells).map_err(|_| LcsError::NoMemory)?;
    t.resize(cells, 0);
    let w = m + 1;
    for i in 1..=n {
        for j in 1..=m {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let len = t[n * w + m];
    let mut out = Lcs { len, ..Lcs::default() };
    if !walk {
        return Ok(out);
    }
    let mut text = vec![0u8; len as usize];
    let mut idx = len as usize;
    let (mut i, mut j) = (n, m);
    let mut run: Option<LcsMatch> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            text[idx - 1] = a[i - 1];
            let (ai, bj) = ((i - 1) as u32, (j - 1) as u32);
            match run.as_mut() {
                None => run = Some(LcsMatch { a: (ai, ai), b: (bj, bj) }),
                // Each match moves back one byte in both strings: a run grows backwards.
                Some(r) if r.a.0 == ai + 1 && r.b.0 == bj + 1 => {
                    r.a.0 = ai;
                    r.b.0 = bj;
                }
                Some(_) => emit = true,
            }
            if run.is_some_and(|r| r.a.0 == 0 || r.b.0 == 0) {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = run.is_some();
        }
        if emit {
            if let Some(r) = run.take() {
                if min_run == 0 || u64::from(r.run_len()) >= min_run {
                    out.matches.push(r);
                }
            }
        }
    }
    out.text = text;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_numbered_from_the_top_of_each_byte() {
        let v = [0b1000_0001u8, 0xff];
        assert!(bit_at(&v, 0));
        assert!(!bit_at(&v, 1));
        assert!(bit_at(&v, 7));
        assert!(bit_at(&v, 15));
        assert!(!bit_at(&v, 16), "past the end");
        assert!(!bit_at(&v, u64::MAX));
    }

    #[test]
    fn ranges_follow_redis_index_rules() {
        assert_eq!(bit_range(3, 0, -1, false), Some((0, 23)));
        assert_eq!(bit_range(3, 1, 1, false), Some((8, 15)));
        assert_eq!(bit_range(3, -100, 100, false), Some((0, 23)));
        assert_eq!(bit_range(3, 5, 9, true), Some((5, 9)));
        assert_eq!(bit_range(3, -1, -1, true), Some((23, 23)));
        assert_eq!(bit_range(3, 2, 1, false), None);
        assert_eq!(bit_range(0, 0, -1, false), None);
        assert_eq!(bit_range(3, i64::MIN, i64::MAX, true), Some((0, 23)));
    }

    #[test]
    fn count_masks_the_edge_bytes() {
        let v = b"foobar";
        assert_eq!(count(v, 0, 47), 26);
        assert_eq!(count(v, 8, 15), 6);
        assert_eq!(count(v, 5, 30), 17);
        assert_eq!(count(&[0xff], 3, 3), 1);
        assert_eq!(count(&[0xff; 20], 1, 158), 158);
    }

    #[test]
    fn position_pads_with_zeros_only_without_an_end() {
        let v = [0xff, 0xf0, 0x00];
        assert_eq!(position(&v, false, 0, 23, false), 12);
        assert_eq!(position(&v, true, 16, 23, false), -1);
        assert_eq!(position(&[0xff, 0xff], false, 0, 15, false), 16);
        assert_eq!(position(&[0xff, 0xff], false, 0, 15, true), -1);
        assert_eq!(position(&[0x00, 0x01], true, 0, 15, true), 15);
        assert_eq!(position(&[0x00, 0x01], true, 3, 14, true), -1);
    }

    #[test]
    fn bitop_pads_the_shorter_sources_with_zeros() {
        let s = |x: &[u8]| Bytes::copy_from_slice(x);
        assert_eq!(bitop(BitOp::And, &[s(&[0xff, 0xff]), s(&[0x0f])]), [0x0f, 0x00]);
        assert_eq!(bitop(BitOp::Or, &[s(&[0xf0]), s(&[0x0f, 0x01])]), [0xff, 0x01]);
        assert_eq!(bitop(BitOp::Xor, &[s(&[0xff]), s(&[0x0f]), s(&[])]), [0xf0]);
        assert_eq!(bitop(BitOp::Not, &[s(&[0x0f, 0x00])]), [0xf0, 0xff]);
        assert!(bitop(BitOp::And, &[s(&[]), s(&[])]).is_empty());
    }

    #[test]
    fn bitfield_overflows_wrap_saturate_or_fail() {
        let f = |op, signed, bits, overflow| Field { op, ty: FieldType { signed, bits }, offset: 0, overflow };
        let mut v = vec![0u8; 8];
        assert_eq!(write_field(&mut v, &f(FieldOp::Set(255), false, 8, Overflow::Wrap)), (Some(0), true));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(10), false, 8, Overflow::Wrap)), (Some(9), true));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(300), false, 8, Overflow::Sat)), (Some(255), true));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(1), false, 8, Overflow::Fail)), (None, false));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(-300), false, 8, Overflow::Sat)), (Some(0), true));
        assert_eq!(write_field(&mut v, &f(FieldOp::Set(-1), false, 8, Overflow::Sat)), (Some(0), true));
        assert_eq!(get_field(&v, &f(FieldOp::Get, false, 8, Overflow::Wrap)), 255);
        assert_eq!(write_field(&mut v, &f(FieldOp::Set(127), true, 8, Overflow::Wrap)), (Some(-1), true));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(1), true, 8, Overflow::Wrap)), (Some(-128), true));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(-1), true, 8, Overflow::Sat)), (Some(-128), false));
        assert_eq!(write_field(&mut v, &f(FieldOp::Set(200), true, 8, Overflow::Sat)), (Some(-128), true));
        assert_eq!(get_field(&v, &f(FieldOp::Get, true, 8, Overflow::Wrap)), 127);
    }

    #[test]
    fn bitfield_64_bit_signed_fields_overflow_like_redis() {
        let mut v = vec![0u8; 8];
        let f = |op, overflow| Field { op, ty: FieldType { signed: true, bits: 64 }, offset: 0, overflow };
        write_field(&mut v, &f(FieldOp::Set(i64::MAX), Overflow::Wrap));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(1), Overflow::Wrap)), (Some(i64::MIN), true));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(-1), Overflow::Sat)), (Some(i64::MIN), false));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(-1), Overflow::Fail)), (None, false));
        assert_eq!(write_field(&mut v, &f(FieldOp::IncrBy(5), Overflow::Fail)), (Some(i64::MIN + 5), true));
    }

    #[test]
    fn lcs_finds_the_subsequence_and_its_runs() {
        let r = lcs(b"ohmytext", b"mynewtext", true, 0).unwrap();
        assert_eq!(r.len, 6);
        assert_eq!(r.text, b"mytext");
        assert_eq!(r.matches, [LcsMatch { a: (4, 7), b: (5, 8) }, LcsMatch { a: (2, 3), b: (0, 1) }]);
        let r = lcs(b"ohmytext", b"mynewtext", true, 4).unwrap();
        assert_eq!(r.matches, [LcsMatch { a: (4, 7), b: (5, 8) }]);
        assert_eq!(lcs(b"", b"abc", true, 0).unwrap(), Lcs { len: 0, text: vec![], matches: vec![] });
        assert_eq!(lcs(&[b'a'; 20_000], &[b'a'; 20_000], false, 0), Err(LcsError::TableTooLarge));
    }
}
