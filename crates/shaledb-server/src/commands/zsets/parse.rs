//! The sorted-set records and the ordered reads over them (commands/zsets/ has the commands; the layout
//! is in docs/format/server-keys.md, "Sorted sets"): score and range parsing as Redis reads them, the score
//! index's keys, ranks counted from the nearer end, score, rank and lex ranges as scans.

use crate::dead::Start;
use crate::keys::{self, score_to_sortable, sortable_to_score, Coll, SUB_MEMBER, SUB_SCORE};
use crate::resp::Reply;
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;

// ---------------------------------------------------------------------------------------------------------
// Parsing and formatting

pub(crate) fn not_float() -> Reply {
    Reply::err("value is not a valid float")
}

pub(crate) fn nan_result() -> Reply {
    Reply::err("resulting score is not a number (NaN)")
}

pub(crate) fn range_not_float() -> Reply {
    Reply::err("min or max is not a float")
}

pub(crate) fn range_not_lex() -> Reply {
    Reply::err("min or max not valid string range item")
}

/// `strtod` on the whole text as Rust reads it: decimal and `inf`/`infinity`/`nan` forms with a sign.
/// `Err(())` if the text is not a number; also tells whether the number overflowed or underflowed to zero
/// (`strtod`'s ERANGE cases).
pub(crate) fn strtod(t: &[u8]) -> Result<(f64, bool), ()> {
    let s = std::str::from_utf8(t).map_err(|_| ())?;
    let v: f64 = s.parse().map_err(|_| ())?;
    let body = s.trim_start_matches(['+', '-']);
    let named = body.bytes().next().is_some_and(|c| c.is_ascii_alphabetic());
    let overflow = v.is_infinite() && !named;
    // Underflow to zero: a mantissa with a non-zero digit that read back as 0.
    let mantissa = body.split(['e', 'E']).next().unwrap_or("");
    let underflow = v == 0.0 && mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c));
    Ok((v, overflow || underflow))
}

/// A score argument as Redis reads one (ZADD, ZINCRBY, WEIGHTS): the whole text is a number, no leading
/// space, no overflow or underflow to zero, not NaN.
pub fn parse_score(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a[0].is_ascii_whitespace() {
        return None;
    }
    match strtod(a) {
        Ok((v, false)) if !v.is_nan() => Some(v),
        _ => None,
    }
}

/// A bound of a score range (`zslParseRange`): `(x` exclusive, else inclusive; leading spaces are allowed,
/// an empty number is 0, overflow gives ±inf; NaN or trailing garbage is an error.
pub(crate) fn parse_range_bound(a: &[u8]) -> Option<(f64, bool)> {
    let (ex, t) = match a.first() {
        Some(b'(') => (true, &a[1..]),
        _ => (false, a),
    };
    if t.is_empty() {
        return Some((0.0, ex));
    }
    let t = trim_c_space(t);
    let (v, _) = strtod(t).ok()?;
    (!v.is_nan()).then_some((v, ex))
}

pub(crate) fn trim_c_space(t: &[u8]) -> &[u8] {
    let n = t.iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')).count();
    &t[n..]
}

/// A score range: `[min, max]` with either end exclusive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub minex: bool,
    pub max: f64,
    pub maxex: bool,
}

impl ScoreRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
        let (min, minex) = parse_range_bound(min).ok_or_else(range_not_float)?;
        let (max, maxex) = parse_range_bound(max).ok_or_else(range_not_float)?;
        Ok(ScoreRange { min, minex, max, maxex })
    }

    /// The index keys' sortable scores in range: `[lo, hi)` as u64s (`None`: empty range).
    fn sortable_bounds(&self) -> Option<(u64, u64)> {
        if self.min > self.max || (self.min == self.max && (self.minex || self.maxex)) {
            return None;
        }
        let lo = u64::from_be_bytes(score_to_sortable(self.min)) + self.minex as u64;
        let hi = u64::from_be_bytes(score_to_sortable(self.max)) + !self.maxex as u64;
        (lo < hi).then_some((lo, hi))
    }
}

/// A bound of a lex range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`
    Min,
    /// `+`
    Max,
    /// `[x`
    Incl(Bytes),
    /// `(x`
    Excl(Bytes),
}

impl LexBound {
    fn parse(a: &Bytes) -> Option<LexBound> {
        match a.first() {
            Some(b'+') if a.len() == 1 => Some(LexBound::Max),
            Some(b'-') if a.len() == 1 => Some(LexBound::Min),
            Some(b'[') => Some(LexBound::Incl(a.slice(1..))),
            Some(b'(') => Some(LexBound::Excl(a.slice(1..))),
            _ => None,
        }
    }
}

/// A lex range: members from `min` to `max` (meaningful when all scores are equal, as in Redis).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexRange {
    pub fn parse(min: &Bytes, max: &Bytes) -> Result<LexRange, Reply> {
        let min = LexBound::parse(min).ok_or_else(range_not_lex)?;
        let max = LexBound::parse(max).ok_or_else(range_not_lex)?;
        Ok(LexRange { min, max })
    }

    /// `m >= min`.
    fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Incl(x) => m >= &x[..],
            LexBound::Excl(x) => m > &x[..],
        }
    }

    /// `m <= max`.
    fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Incl(x) => m <= &x[..],
            LexBound::Excl(x) => m < &x[..],
        }
    }

    /// True when no string can be in the range (Redis checks this first).
    fn is_empty(&self) -> bool {
        use LexBound::*;
        match (&self.min, &self.max) {
            (Max, _) | (_, Min) => true,
            (Min, _) | (_, Max) => false,
            (Incl(a) | Excl(a), Incl(b) | Excl(b)) => {
                a > b || (a == b && (matches!(self.min, Excl(_)) || matches!(self.max, Excl(_))))
            }
        }
    }
}

/// A score in ZSCAN's replies, as Redis 7.0 prints a small sorted set's stored score (`d2string`): an
/// integral score within ±2^62 as an integer, else as replies print doubles.
pub fn scan_score_text(d: f64) -> String {
    const LIM: f64 = (i64::MAX / 2) as f64;
    if d.is_finite() && (-LIM..=LIM).contains(&d) && d == d.trunc() {
        return format!("{}", d as i64);
    }
    crate::resp::format_double(d)
}

pub(crate) fn double(d: f64) -> Reply {
    Reply::Double(d)
}

// ---------------------------------------------------------------------------------------------------------
// Records

/// The score-index part of a member: `sortable_score member`, written into `out` (cleared first).
pub(crate) fn index_part_into(score: f64, member: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&score_to_sortable(score));
    out.extend_from_slice(member);
}

/// Splits a score-index engine key (`db 0x01 version 0x01 score:8 member`) into score and member.
pub(crate) fn split_index_key(k: &[u8]) -> Result<(f64, &[u8]), Reply> {
    if k.len() < 19 {
        return Err(Reply::err("corrupt sorted-set score index entry"));
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&k[11..19]);
    Ok((sortable_to_score(b), &k[19..]))
}

pub(crate) fn decode_score(v: &[u8]) -> Result<f64, Reply> {
    let b: [u8; 8] = v.try_into().map_err(|_| Reply::err("corrupt sorted-set member record"))?;
    Ok(sortable_to_score(b))
}

/// The score of `member` in `c` (through the group's pending writes).
pub(crate) fn score_w(ctx: &mut WriteCtx<'_>, c: &Coll, member: &[u8]) -> Result<Option<f64>, Reply> {
    ctx.get_member(c, SUB_MEMBER, member)?.map(|v| decode_score(&v)).transpose()
}

pub(crate) fn score_r(ctx: &ReadCtx<'_>, c: &Coll, member: &[u8]) -> Result<Option<f64>, Reply> {
    ctx.get_member(c, SUB_MEMBER, member)?.map(|v| decode_score(&v)).transpose()
}

/// Sets `member`'s score to `new` (its old score is `old`, `None` when it is new): the member record and the
/// score index entry together; counts a new member in `c.size`.
pub(crate) fn put_score(
    ctx: &mut WriteCtx<'_>,
    c: &mut Coll,
    member: &[u8],
    old: Option<f64>,
    new: f64,
    buf: &mut Vec<u8>,
) -> Result<(), Reply> {
    match old {
        Some(o) if score_to_sortable(o) == score_to_sortable(new) => return Ok(()),
        Some(o) => {
            index_part_into(o, member, buf);
            ctx.delete_member(c, SUB_SCORE, buf);
        }
        None => c.size += 1,
    }
    ctx.put_member(c, SUB_MEMBER, member, &score_to_sortable(new))?;
    index_part_into(new, member, buf);
    ctx.put_member(c, SUB_SCORE, buf, b"")
}

/// Removes `member` (score `score`) from `c`.
pub(crate) fn remove(ctx: &mut WriteCtx<'_>, c: &mut Coll, member: &[u8], score: f64, buf: &mut Vec<u8>) {
    ctx.delete_member(c, SUB_MEMBER, member);
    index_part_into(score, member, buf);
    ctx.delete_member(c, SUB_SCORE, buf);
    c.size = c.size.saturating_sub(1);
}

/// A member too long for the engine (its index key is the longer record: member + 8 + 11 bytes of key).
pub(crate) fn check_member(member: &[u8]) -> Result<(), Reply> {
    crate::store::check_entry_size(member.len() + 17, 0)
}

// ---------------------------------------------------------------------------------------------------------
// Ordered reads of the score index

/// The bounds of `c`'s score index: `(prefix, end)`.
pub(crate) fn index_bounds(ctx: &ReadCtx<'_>, c: &Coll) -> ([u8; 11], Vec<u8>) {
    let p = keys::sub_prefix(ctx.db_index, c.version, SUB_SCORE);
    let end = keys::prefix_end(&p).unwrap_or_default();
    (p, end)
}

/// The engine-key range `[lower, upper)` a pop from either end of `c`'s score index scans: the whole index,
/// narrowed by the dead ranges the commit thread learnt from earlier pops (so it does not step over their
/// tombstones again; see dead.rs).
pub(crate) fn pop_range(ctx: &WriteCtx<'_>, c: &Coll) -> (Vec<u8>, Vec<u8>) {
    let p = keys::sub_prefix(ctx.db_index, c.version, SUB_SCORE);
    let end = keys::prefix_end(&p).unwrap_or_default();
    let Some(r) = ctx.dead_ranges(c, SUB_SCORE) else { return (p.to_vec(), end) };
    let mut lower = p.to_vec();
    match r.start(b"") {
        Start::At(from) => lower.extend_from_slice(&from),
        Start::End => return (lower.clone(), lower),
    }
    let upper = match r.tail() {
        Some(t) => [&p[..], t].concat(),
        None => end,
    };
    (lower, upper)
}

/// Records what a pop of `c`'s score index learnt: every part up to `last` (the part of the last item it
/// removed) from the low end, or (`max`) from `last` up, is gone.
pub(crate) fn note_popped(ctx: &mut WriteCtx<'_>, c: &Coll, max: bool, last: &[u8]) {
    if max {
        ctx.note_dead_tail(c, SUB_SCORE, last);
    } else {
        ctx.note_dead_zone(c, SUB_SCORE, b"", last);
    }
}

pub(crate) fn index_key(prefix: &[u8; 11], sortable: u64, member: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(19 + member.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(&sortable.to_be_bytes());
    k.extend_from_slice(member);
    k
}

pub(crate) type Items = Vec<(Vec<u8>, f64)>;

pub(crate) fn push_item(out: &mut Items, k: &[u8]) -> Result<(), Reply> {
    let (s, m) = split_index_key(k)?;
    out.push((m.to_vec(), s));
    Ok(())
}

/// The rank (ascending, from 0) of `member` with `score` in `c`: counts from both ends at once, so the
/// cost is O(min(rank, size - rank)).
pub(crate) fn rank_of(ctx: &ReadCtx<'_>, c: &Coll, score: f64, member: &[u8]) -> Result<u64, Reply> {
    let (p, end) = index_bounds(ctx, c);
    let target = index_key(&p, u64::from_be_bytes(score_to_sortable(score)), member);
    let mut fwd = ctx.scan(&p, &end, false);
    let mut rev = ctx.scan(&p, &end, true);
    let lost = || Reply::err("corrupt sorted set: member missing from the score index");
    for i in 0..c.size {
        match fwd.next() {
            Some(Ok((k, _))) if k == target => return Ok(i),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e),
            None => return Err(lost()),
        }
        match rev.next() {
            Some(Ok((k, _))) if k == target => return Ok(c.size.saturating_sub(1 + i)),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e),
            None => return Err(lost()),
        }
    }
    Err(lost())
}

/// Redis's index rules (ZRANGE, ZREMRANGEBYRANK) on a set of `len`: the ascending ranks `[lo, hi]`, or
/// `None` when empty.
pub fn rank_bounds(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = len.min(i64::MAX as u64) as i64;
    let mut s = if start < 0 { start.saturating_add(len) } else { start };
    let mut e = if end < 0 { end.saturating_add(len) } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as u64, e as u64))
}

/// The entries of ascending ranks `[lo, hi]` of `c`, ascending; scans from the nearer end.
pub(crate) fn range_by_rank(ctx: &ReadCtx<'_>, c: &Coll, lo: u64, hi: u64) -> Result<Items, Reply> {
    let (p, end) = index_bounds(ctx, c);
    let want = (hi - lo + 1) as usize;
    let from_end = c.size.saturating_sub(1 + hi);
    let reverse = from_end < lo;
    let skip = if reverse { from_end } else { lo };
    let mut out = Vec::new();
    for item in ctx.scan(&p, &end, reverse).skip(skip as usize).take(want) {
        push_item(&mut out, &item?.0)?;
    }
    if reverse {
        out.reverse();
    }
    Ok(out)
}

/// Offset and count of `LIMIT` as Redis applies them: a negative offset gives nothing, a negative count
/// means all.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limit {
    pub offset: i64,
    pub count: i64,
}

impl Limit {
    pub(crate) const ALL: Limit = Limit { offset: 0, count: -1 };

    fn skip(&self) -> usize {
        self.offset.max(0) as usize
    }

    fn take(&self) -> usize {
        if self.offset < 0 {
            0
        } else if self.count < 0 {
            usize::MAX
        } else {
            self.count as usize
        }
    }
}

/// The entries of `c` in score range `r`, ascending (or descending with `rev`), LIMIT applied.
pub(crate) fn range_by_score(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    r: &ScoreRange,
    rev: bool,
    lim: Limit,
) -> Result<Items, Reply> {
    let mut out = Vec::new();
    let Some((lo, hi)) = r.sortable_bounds() else { return Ok(out) };
    let (p, _) = index_bounds(ctx, c);
    let (lower, upper) = (index_key(&p, lo, b""), index_key(&p, hi, b""));
    for item in ctx.scan(&lower, &upper, rev).skip(lim.skip()).take(lim.take()) {
        push_item(&mut out, &item?.0)?;
    }
    Ok(out)
}

/// Counts the entries of `c` in score range `r`.
pub(crate) fn count_by_score(ctx: &ReadCtx<'_>, c: &Coll, r: &ScoreRange) -> Result<i64, Reply> {
    let Some((lo, hi)) = r.sortable_bounds() else { return Ok(0) };
    let (p, _) = index_bounds(ctx, c);
    let mut n = 0;
    for item in ctx.scan(&index_key(&p, lo, b""), &index_key(&p, hi, b""), false) {
        item?;
        n += 1;
    }
    Ok(n)
}

/// The first entry (an index engine key) of a lex range, as Redis finds it in a small sorted set: walking
/// from the lowest (`rev`: highest) entry, the first member >= min (`rev`: <= max). One group of equal scores
/// at a time, with one seek each, so a set whose scores are all equal (the case lex ranges are meant for)
/// costs one seek.
pub(crate) fn lex_start(ctx: &ReadCtx<'_>, c: &Coll, r: &LexRange, rev: bool) -> Result<Option<Vec<u8>>, Reply> {
    let (p, end) = index_bounds(ctx, c);
    let mut lo = p.to_vec();
    let mut hi = end.clone();
    loop {
        // The next group's score.
        let Some(first) = ctx.scan(&lo, &hi, rev).next() else { return Ok(None) };
        let k = first?.0;
        let (score, _) = split_index_key(&k)?;
        let s = u64::from_be_bytes(score_to_sortable(score));
        let (group_lo, group_hi) = (index_key(&p, s, b""), index_key(&p, s.wrapping_add(1), b""));
        let (from, to) = if rev {
            let to = match &r.max {
                LexBound::Min => return Ok(None),
                LexBound::Max => group_hi.clone(),
                LexBound::Incl(m) => {
                    let mut t = index_key(&p, s, m);
                    t.push(0);
                    t
                }
                LexBound::Excl(m) => index_key(&p, s, m),
            };
            (group_lo.clone(), to)
        } else {
            let from = match &r.min {
                LexBound::Max => return Ok(None),
                LexBound::Min => group_lo.clone(),
                LexBound::Incl(m) => index_key(&p, s, m),
                LexBound::Excl(m) => {
                    let mut f = index_key(&p, s, m);
                    f.push(0);
                    f
                }
            };
            (from, group_hi.clone())
        };
        if let Some(found) = ctx.scan(&from, &to, rev).next() {
            return Ok(Some(found?.0));
        }
        if rev {
            hi = group_lo;
        } else {
            lo = group_hi;
        }
    }
}

/// Visits the entries of lex range `r` of `c` in order (`rev`: reversed) until `f` returns false.
pub(crate) fn for_each_lex(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    r: &LexRange,
    rev: bool,
    mut f: impl FnMut(&[u8]) -> Result<bool, Reply>,
) -> Result<(), Reply> {
    if r.is_empty() {
        return Ok(());
    }
    let (p, end) = index_bounds(ctx, c);
    // As Redis: nothing when the last entry's member is below min or the first entry's is above max.
    let edge = |reverse: bool| -> Result<Option<Vec<u8>>, Reply> {
        ctx.scan(&p, &end, reverse).next().transpose().map(|e| e.map(|(k, _)| k))
    };
    match (edge(true)?, edge(false)?) {
        (Some(last), Some(first)) => {
            if !r.gte_min(split_index_key(&last)?.1) || !r.lte_max(split_index_key(&first)?.1) {
                return Ok(());
            }
        }
        _ => return Ok(()),
    }
    let Some(start) = lex_start(ctx, c, r, rev)? else { return Ok(()) };
    let scan = if rev {
        let mut to = start;
        to.push(0);
        ctx.scan(&p, &to, true)
    } else {
        ctx.scan(&start, &end, false)
    };
    for item in scan {
        let (k, _) = item?;
        let (_, m) = split_index_key(&k)?;
        let inside = if rev { r.gte_min(m) } else { r.lte_max(m) };
        if !inside || !f(&k)? {
            break;
        }
    }
    Ok(())
}

pub(crate) fn range_by_lex(ctx: &ReadCtx<'_>, c: &Coll, r: &LexRange, rev: bool, lim: Limit) -> Result<Items, Reply> {
    let mut out = Vec::new();
    let (mut skip, mut take) = (lim.skip(), lim.take());
    if take == 0 {
        return Ok(out);
    }
    for_each_lex(ctx, c, r, rev, |k| {
        if skip > 0 {
            skip -= 1;
            return Ok(true);
        }
        push_item(&mut out, k)?;
        take -= 1;
        Ok(take > 0)
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_redis_reads_them() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-2e3"), Some(-2000.0));
        assert_eq!(parse_score(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"4e-320"), Some(4e-320));
        for bad in [&b"nan"[..], b"", b" 1", b"1 ", b"abc", b"1e400", b"-1e400", b"1e-400", b"1e", b"."] {
            assert_eq!(parse_score(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn score_ranges_parse_as_redis_reads_them() {
        let r = ScoreRange::parse(b"(1", b"5").unwrap();
        assert_eq!((r.min, r.minex, r.max, r.maxex), (1.0, true, 5.0, false));
        let r = ScoreRange::parse(b"(", b" 1").unwrap();
        assert_eq!((r.min, r.minex, r.max), (0.0, true, 1.0));
        let r = ScoreRange::parse(b"-inf", b"1e400").unwrap();
        assert_eq!((r.min, r.max), (f64::NEG_INFINITY, f64::INFINITY));
        for bad in [&b"nan"[..], b" ", b"a", b"1x", b"(nan"] {
            assert!(ScoreRange::parse(bad, b"1").is_err());
        }
        assert_eq!(ScoreRange::parse(b"1", b"1").unwrap().sortable_bounds().map(|(a, b)| b - a), Some(1));
        assert_eq!(ScoreRange::parse(b"(1", b"1").unwrap().sortable_bounds(), None);
        assert_eq!(ScoreRange::parse(b"2", b"1").unwrap().sortable_bounds(), None);
        assert!(ScoreRange::parse(b"-0", b"0").unwrap().sortable_bounds().is_some());
        assert!(ScoreRange::parse(b"(inf", b"inf").unwrap().sortable_bounds().is_none());
    }

    #[test]
    fn lex_ranges_parse_and_compare() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        assert!(LexRange::parse(&b("a"), &b("b")).is_err());
        assert!(LexRange::parse(&b("-x"), &b("+")).is_err());
        let r = LexRange::parse(&b("[b"), &b("(d")).unwrap();
        assert!(!r.gte_min(b"a") && r.gte_min(b"b") && r.lte_max(b"c") && !r.lte_max(b"d"));
        assert!(!r.is_empty());
        assert!(LexRange::parse(&b("(b"), &b("[b")).unwrap().is_empty());
        assert!(LexRange::parse(&b("[c"), &b("[b")).unwrap().is_empty());
        assert!(LexRange::parse(&b("+"), &b("+")).unwrap().is_empty());
        assert!(!LexRange::parse(&b("-"), &b("+")).unwrap().is_empty());
        assert!(!LexRange::parse(&b("["), &b("[")).unwrap().is_empty());
    }

    #[test]
    fn rank_bounds_follow_redis() {
        assert_eq!(rank_bounds(0, -1, 5), Some((0, 4)));
        assert_eq!(rank_bounds(-2, -1, 5), Some((3, 4)));
        assert_eq!(rank_bounds(-100, 2, 5), Some((0, 2)));
        assert_eq!(rank_bounds(3, 100, 5), Some((3, 4)));
        assert_eq!(rank_bounds(5, 10, 5), None);
        assert_eq!(rank_bounds(3, 1, 5), None);
        assert_eq!(rank_bounds(0, -1, 0), None);
        assert_eq!(rank_bounds(i64::MIN, i64::MAX, 5), Some((0, 4)));
    }

    #[test]
    fn zscan_scores_print_like_a_small_redis_set() {
        assert_eq!(scan_score_text(123456789012345678.0), "123456789012345680");
        assert_eq!(scan_score_text(1.5e16), "15000000000000000");
        assert_eq!(scan_score_text(1e22), "1e+22");
        assert_eq!(scan_score_text(1.1), "1.1000000000000001");
        assert_eq!(scan_score_text(-3.0), "-3");
        assert_eq!(scan_score_text(f64::INFINITY), "inf");
    }

    /// The score index's byte order is the sorted set's order (score, then member) for many random
    /// scores, negatives, zeros and infinities included, and decodes back to the same score and member.
    #[test]
    fn score_index_keys_sort_in_sorted_set_order() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let mut items: Vec<(f64, Vec<u8>)> = Vec::new();
        for i in 0..5000 {
            let s = match i % 7 {
                0 => f64::from_bits(rng.gen::<u64>()),
                1 => rng.gen_range(-1e6..1e6),
                2 => f64::NEG_INFINITY,
                3 => f64::INFINITY,
                4 => (rng.gen_range(-5..5)) as f64,
                5 => -0.0,
                _ => rng.gen::<f64>() * 1e-300,
            };
            if s.is_nan() {
                continue;
            }
            let m: Vec<u8> = (0..rng.gen_range(0..4)).map(|_| rng.gen_range(b'a'..b'e')).collect();
            items.push((s, m));
        }
        let p = keys::sub_prefix(3, 77, SUB_SCORE);
        let mut encoded: Vec<Vec<u8>> = items
            .iter()
            .map(|(s, m)| {
                let mut part = Vec::new();
                index_part_into(*s, m, &mut part);
                let mut k = p.to_vec();
                k.extend_from_slice(&part);
                k
            })
            .collect();
        encoded.sort();
        let mut model = items.clone();
        model.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then_with(|| a.1.cmp(&b.1)));
        for (k, (s, m)) in encoded.iter().zip(&model) {
            let (ds, dm) = split_index_key(k).unwrap();
            assert_eq!(ds, if *s == 0.0 { 0.0 } else { *s });
            assert!(ds.to_bits() == (if *s == 0.0 { 0.0f64 } else { *s }).to_bits());
            assert_eq!(dm, &m[..]);
        }
        assert!(split_index_key(&p).is_err());
        assert!(decode_score(b"1234567").is_err());
    }
}
