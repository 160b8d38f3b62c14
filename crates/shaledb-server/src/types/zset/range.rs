//! The ordered reads of a sorted set's score index (the layout is in [`super`]): ranks counted from the
//! nearer end, score, rank and lex ranges as scans, ZRANDMEMBER's ranks and ZSCAN's pages.

use super::{decode_score, index_key, push_item, split_index_key, Error, Items};
use crate::keys::{self, score_to_sortable, Coll, SUB_MEMBER, SUB_SCORE};
use crate::store::ReadCtx;
pub use crate::types::coll::rank_bounds;
use bytes::Bytes;

/// A score range: `[min, max]` with either end exclusive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub minex: bool,
    pub max: f64,
    pub maxex: bool,
}

impl ScoreRange {
    /// The index keys' sortable scores in range: `[lo, hi)` as u64s (`None`: empty range).
    pub(crate) fn sortable_bounds(&self) -> Option<(u64, u64)> {
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

/// A lex range: members from `min` to `max` (meaningful when all scores are equal, as in Redis).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexRange {
    /// `m >= min`.
    pub fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Incl(x) => m >= &x[..],
            LexBound::Excl(x) => m > &x[..],
        }
    }

    /// `m <= max`.
    pub fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Incl(x) => m <= &x[..],
            LexBound::Excl(x) => m < &x[..],
        }
    }

    /// True when no string can be in the range (Redis checks this first).
    pub fn is_empty(&self) -> bool {
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

/// The bounds of `c`'s score index: `(prefix, end)`.
pub(crate) fn index_bounds(ctx: &ReadCtx<'_>, c: &Coll) -> ([u8; 11], Vec<u8>) {
    let p = keys::sub_prefix(ctx.db_index, c.version, SUB_SCORE);
    let end = keys::prefix_end(&p).unwrap_or_default();
    (p, end)
}

/// The rank (ascending, from 0) of `member` with `score` in `c`: counts from both ends at once, so the
/// cost is O(min(rank, size - rank)).
pub fn rank_of(ctx: &ReadCtx<'_>, c: &Coll, score: f64, member: &[u8]) -> Result<u64, Error> {
    let (p, end) = index_bounds(ctx, c);
    let target = index_key(&p, u64::from_be_bytes(score_to_sortable(score)), member);
    let mut fwd = ctx.scan(&p, &end, false);
    let mut rev = ctx.scan(&p, &end, true);
    for i in 0..c.size {
        match fwd.next() {
            Some(Ok((k, _))) if k == target => return Ok(i),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => return Err(Error::MissingFromIndex),
        }
        match rev.next() {
            Some(Ok((k, _))) if k == target => return Ok(c.size.saturating_sub(1 + i)),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => return Err(Error::MissingFromIndex),
        }
    }
    Err(Error::MissingFromIndex)
}

/// The entries of ascending ranks `[lo, hi]` of `c`, ascending; scans from the nearer end.
pub fn ranked(ctx: &ReadCtx<'_>, c: &Coll, lo: u64, hi: u64) -> Result<Items, Error> {
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
pub struct Limit {
    pub offset: i64,
    pub count: i64,
}

impl Limit {
    pub const ALL: Limit = Limit { offset: 0, count: -1 };

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
fn range_by_score(ctx: &ReadCtx<'_>, c: &Coll, r: &ScoreRange, rev: bool, lim: Limit) -> Result<Items, Error> {
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
pub fn count_by_score(ctx: &ReadCtx<'_>, c: &Coll, r: &ScoreRange) -> Result<u64, Error> {
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
fn lex_start(ctx: &ReadCtx<'_>, c: &Coll, r: &LexRange, rev: bool) -> Result<Option<Vec<u8>>, Error> {
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

/// Visits the entries (score-index engine keys) of lex range `r` of `c` in order (`rev`: reversed) until
/// `f` returns false.
pub fn for_each_lex(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    r: &LexRange,
    rev: bool,
    mut f: impl FnMut(&[u8]) -> Result<bool, Error>,
) -> Result<(), Error> {
    if r.is_empty() {
        return Ok(());
    }
    let (p, end) = index_bounds(ctx, c);
    // As Redis: nothing when the last entry's member is below min or the first entry's is above max.
    let edge = |reverse: bool| -> Result<Option<Vec<u8>>, Error> {
        Ok(ctx.scan(&p, &end, reverse).next().transpose()?.map(|(k, _)| k))
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

fn range_by_lex(ctx: &ReadCtx<'_>, c: &Coll, r: &LexRange, rev: bool, lim: Limit) -> Result<Items, Error> {
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

/// A range of a sorted set: by rank (Redis indexes), by score, or by member (lex).
#[derive(Clone, Debug, PartialEq)]
pub enum Range {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// The items of range `r` of `c`, in reply order (`rev`: descending), LIMIT applied to score and lex
/// ranges.
pub fn run(ctx: &ReadCtx<'_>, c: &Coll, r: &Range, rev: bool, lim: Limit) -> Result<Items, Error> {
    match r {
        Range::Rank(start, stop) => {
            let Some((s, e)) = rank_bounds(*start, *stop, c.size) else { return Ok(Vec::new()) };
            if rev {
                let n = c.size;
                let mut v = ranked(ctx, c, n - 1 - e, n - 1 - s)?;
                v.reverse();
                Ok(v)
            } else {
                ranked(ctx, c, s, e)
            }
        }
        Range::Score(r) => range_by_score(ctx, c, r, rev, lim),
        Range::Lex(r) => range_by_lex(ctx, c, r, rev, lim),
    }
}

/// The members at the ascending ranks `wanted` (sorted, distinct) of `c`, by rank: one scan from the low
/// end up to the highest rank wanted (ZRANDMEMBER).
pub fn at_ranks(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    wanted: &[u64],
) -> Result<std::collections::HashMap<u64, (Vec<u8>, f64)>, Error> {
    let (p, end) = index_bounds(ctx, c);
    let mut found = std::collections::HashMap::new();
    let mut w = wanted.iter().peekable();
    for (i, item) in ctx.scan(&p, &end, false).enumerate() {
        let Some(&&next) = w.peek() else { break };
        let (k, _) = item?;
        if i as u64 == next {
            let (s, m) = split_index_key(&k)?;
            found.insert(next, (m.to_vec(), s));
            w.next();
        }
    }
    Ok(found)
}

/// Every entry of `c` in score order, from the score index (ZSCAN of a small set).
pub fn all_items(ctx: &ReadCtx<'_>, c: &Coll) -> Result<Items, Error> {
    let (p, end) = index_bounds(ctx, c);
    let mut out = Vec::new();
    for item in ctx.scan(&p, &end, false) {
        push_item(&mut out, &item?.0)?;
    }
    Ok(out)
}

/// One page of a walk of `c`'s member records in member order (ZSCAN of a larger set): from the member
/// `from` (inclusive; the start when `None`), `count` records examined, those `keep` accepts returned with
/// their scores; and the member the next page starts at (`None` at the end).
pub fn scan_page(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    from: Option<&[u8]>,
    count: u64,
    keep: impl Fn(&[u8]) -> bool,
) -> Result<(Items, Option<Vec<u8>>), Error> {
    let mut out = Vec::new();
    let mut next = None;
    for (examined, item) in ctx.members(c, SUB_MEMBER, from, false).enumerate() {
        let (m, v) = item?;
        if examined as u64 == count {
            next = Some(m);
            break;
        }
        if keep(&m) {
            let s = decode_score(&v)?;
            out.push((m, s));
        }
    }
    Ok((out, next))
}
