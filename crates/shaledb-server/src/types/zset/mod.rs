//! Sorted sets on the engine: the member records and the score index, and the operations ZADD, ZINCRBY,
//! ZREM, the pops, ZREMRANGEBY*, the STORE forms and the set operations' inputs perform on them. The
//! ordered reads (ranks, score, rank and lex ranges, ZRANDMEMBER's and ZSCAN's walks) are in [`range`].
//!
//! Layout (docs/format/server-keys.md, "Sorted sets"):
//!
//! ```text
//! member record := db 0x01 version 0x00 member            -> sortable_score:8
//! score index   := db 0x01 version 0x01 sortable_score:8 member -> (empty)
//! ```
//!
//! `sortable_score` is [`crate::keys::score_to_sortable`]: byte order is numeric order, -inf to +inf, with -0
//! stored as +0. Both records of a member are written by the same command (the same batch), so the score
//! index is the sorted set in Redis order (score, then member bytes) and every range is an ordered scan.
//!
//! Costs: ZSCORE/ZADD/ZREM/ZINCRBY are point reads and writes per member. Ranges by score or lex cost the
//! seek plus the entries returned (plus LIMIT's offset). Ranks are not stored: ZRANK and ZRANGE by index
//! count entries, from whichever end of the set is nearer, so they cost O(min(rank, size - rank)).
//! ZCOUNT and ZLEXCOUNT cost O(entries counted).

use crate::dead::Start;
use crate::keys::{self, score_to_sortable, sortable_to_score, Coll, Type, SUB_MEMBER, SUB_SCORE};
use crate::store::{self, ReadCtx, WriteCtx};

pub mod range;

pub use range::{
    all_items, at_ranks, count_by_score, for_each_lex, rank_bounds, rank_of, ranked, run, scan_page, LexBound,
    LexRange, Limit, Range, ScoreRange,
};

/// Why a sorted-set operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The store failed (wrong type, corrupt meta value, failed read, member too large).
    #[error(transparent)]
    Store(#[from] store::Error),
    /// A score-index record that does not follow the layout.
    #[error("corrupt sorted-set score index entry")]
    CorruptIndexEntry,
    /// A member record whose value is not a score.
    #[error("corrupt sorted-set member record")]
    CorruptMember,
    /// A member record without its score-index entry.
    #[error("corrupt sorted set: member missing from the score index")]
    MissingFromIndex,
    /// ZADD INCR or ZINCRBY made a score NaN (`inf + -inf`).
    #[error("resulting score is not a number (NaN)")]
    NanResult,
}

/// Members and their scores, in the order a read gives them.
pub type Items = Vec<(Vec<u8>, f64)>;

// ---------------------------------------------------------------------------------------------------------
// Records

/// The score-index part of a member: `sortable_score member`, written into `out` (cleared first).
pub(crate) fn index_part_into(score: f64, member: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&score_to_sortable(score));
    out.extend_from_slice(member);
}

/// Splits a score-index engine key (`db 0x01 version 0x01 score:8 member`) into score and member.
pub(crate) fn split_index_key(k: &[u8]) -> Result<(f64, &[u8]), Error> {
    if k.len() < 19 {
        return Err(Error::CorruptIndexEntry);
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&k[11..19]);
    Ok((sortable_to_score(b), &k[19..]))
}

/// The score a member record holds.
pub(crate) fn decode_score(v: &[u8]) -> Result<f64, Error> {
    let b: [u8; 8] = v.try_into().map_err(|_| Error::CorruptMember)?;
    Ok(sortable_to_score(b))
}

/// The score index's key of `member` with the sortable score `sortable`, under the index `prefix`.
pub(crate) fn index_key(prefix: &[u8; 11], sortable: u64, member: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(19 + member.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(&sortable.to_be_bytes());
    k.extend_from_slice(member);
    k
}

/// Appends the member and score of the score-index key `k` to `out`.
pub(crate) fn push_item(out: &mut Items, k: &[u8]) -> Result<(), Error> {
    let (s, m) = split_index_key(k)?;
    out.push((m.to_vec(), s));
    Ok(())
}

/// The live sorted set `key`: `Ok(None)` when missing, `Err(WRONGTYPE)` when it holds another type. Pass a
/// [`ReadCtx::pinned`] context when members are read next.
pub fn get(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::ZSet)?)
}

/// [`get`] in the commit step.
pub fn get_mut(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::ZSet)?)
}

/// The score of `member` in `c` (through the group's pending writes).
fn score_mut(ctx: &mut WriteCtx<'_>, c: &Coll, member: &[u8]) -> Result<Option<f64>, Error> {
    ctx.get_member(c, SUB_MEMBER, member)?.map(|v| decode_score(&v)).transpose()
}

/// The score of `member` in `c`, `None` when it is not a member.
pub fn score(ctx: &ReadCtx<'_>, c: &Coll, member: &[u8]) -> Result<Option<f64>, Error> {
    ctx.get_member(c, SUB_MEMBER, member)?.map(|v| decode_score(&v)).transpose()
}

/// Sets `member`'s score to `new` (its old score is `old`, `None` when it is new): the member record and the
/// score index entry together; counts a new member in `c.size`.
fn put_score(
    ctx: &mut WriteCtx<'_>,
    c: &mut Coll,
    member: &[u8],
    old: Option<f64>,
    new: f64,
    buf: &mut Vec<u8>,
) -> Result<(), Error> {
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
    Ok(ctx.put_member(c, SUB_SCORE, buf, b"")?)
}

/// Removes `member` (score `score`) from `c`.
fn remove(ctx: &mut WriteCtx<'_>, c: &mut Coll, member: &[u8], score: f64, buf: &mut Vec<u8>) {
    ctx.delete_member(c, SUB_MEMBER, member);
    index_part_into(score, member, buf);
    ctx.delete_member(c, SUB_SCORE, buf);
    c.size = c.size.saturating_sub(1);
}

/// A member too long for the engine (its index key is the longer record: member + 8 + 11 bytes of key).
pub fn check_member(member: &[u8]) -> Result<(), Error> {
    Ok(crate::store::check_entry_size(member.len() + 17, 0)?)
}

// ---------------------------------------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM

/// ZADD's conditions: NX, XX, GT, LT, and INCR (the score is an increment).
#[derive(Clone, Copy, Debug, Default)]
pub struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub incr: bool,
}

/// The outcome of adding one element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Added {
    /// A new member, with the score given.
    New,
    /// An existing member whose score changed to this.
    Updated(f64),
    /// An existing member whose score stays this.
    Same(f64),
    /// Not done (NX/XX/GT/LT said no).
    Nop,
}

/// Adds or updates one member as ZADD does (the flags' rules, NaN check for INCR).
fn add_one(
    ctx: &mut WriteCtx<'_>,
    c: &mut Coll,
    f: &AddFlags,
    score: f64,
    member: &[u8],
    buf: &mut Vec<u8>,
) -> Result<Added, Error> {
    match score_mut(ctx, c, member)? {
        Some(cur) => {
            if f.nx {
                return Ok(Added::Nop);
            }
            let new = if f.incr { cur + score } else { score };
            if new.is_nan() {
                return Err(Error::NanResult);
            }
            if (f.gt && new <= cur) || (f.lt && new >= cur) {
                return Ok(Added::Nop);
            }
            if new != cur {
                put_score(ctx, c, member, Some(cur), new, buf)?;
                Ok(Added::Updated(new))
            } else {
                Ok(Added::Same(new))
            }
        }
        None => {
            if f.xx {
                return Ok(Added::Nop);
            }
            put_score(ctx, c, member, None, score, buf)?;
            Ok(Added::New)
        }
    }
}

/// Adds `(score, member)` pairs to the sorted set `key` under the conditions `f` (ZADD), creating it unless
/// XX. Returns each pair's outcome, or `None` when there is no set and XX. Check the members with
/// [`check_member`] first.
pub fn add(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    f: &AddFlags,
    pairs: &[(f64, &[u8])],
) -> Result<Option<Vec<Added>>, Error> {
    let mut c = match get_mut(ctx, key)? {
        Some(c) => c,
        None if f.xx => return Ok(None),
        None => ctx.create_coll(key, Type::ZSet),
    };
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(pairs.len());
    for &(score, member) in pairs {
        match add_one(ctx, &mut c, f, score, member, &mut buf) {
            Ok(r) => out.push(r),
            Err(e) => {
                // Only INCR can fail here (one pair): nothing was written for it; keep what exists.
                ctx.put_coll(key, &c)?;
                return Err(e);
            }
        }
    }
    ctx.put_coll(key, &c)?;
    if out.iter().any(|r| matches!(r, Added::New)) {
        ctx.signal_key(key);
    }
    Ok(Some(out))
}

/// Adds `by` to the score of `member` in the sorted set `key` (ZINCRBY), creating both when missing.
pub fn incr(ctx: &mut WriteCtx<'_>, key: &[u8], by: f64, member: &[u8]) -> Result<Added, Error> {
    let mut c = match get_mut(ctx, key)? {
        Some(c) => c,
        None => ctx.create_coll(key, Type::ZSet),
    };
    let f = AddFlags { incr: true, ..AddFlags::default() };
    let mut buf = Vec::new();
    let r = add_one(ctx, &mut c, &f, by, member, &mut buf)?;
    ctx.put_coll(key, &c)?;
    if matches!(r, Added::New) {
        ctx.signal_key(key);
    }
    Ok(r)
}

/// Removes `members` from the sorted set `key` (ZREM). Returns how many were there.
pub fn remove_members<M: AsRef<[u8]>>(ctx: &mut WriteCtx<'_>, key: &[u8], members: &[M]) -> Result<u64, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(0) };
    let mut buf = Vec::new();
    let mut n = 0;
    for m in members {
        let m = m.as_ref();
        if let Some(s) = score_mut(ctx, &c, m)? {
            remove(ctx, &mut c, m, s, &mut buf);
            n += 1;
        }
    }
    if n > 0 {
        ctx.put_coll(key, &c)?;
    }
    Ok(n)
}

// ---------------------------------------------------------------------------------------------------------
// Pops

/// The engine-key range `[lower, upper)` a pop from either end of `c`'s score index scans: the whole index,
/// narrowed by the dead ranges the commit step learnt from earlier pops (so it does not step over their
/// tombstones again; see dead.rs).
fn pop_range(ctx: &WriteCtx<'_>, c: &Coll) -> (Vec<u8>, Vec<u8>) {
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
fn note_popped(ctx: &mut WriteCtx<'_>, c: &Coll, max: bool, last: &[u8]) {
    if max {
        ctx.note_dead_tail(c, SUB_SCORE, last);
    } else {
        ctx.note_dead_zone(c, SUB_SCORE, b"", last);
    }
}

/// How many score-index entries a pop's scan reads past the ones it takes, for the next pops from the same
/// end to take without a seek (dead.rs: the parts read ahead).
const POP_READ_AHEAD: usize = 16;

/// The items at the low (`max`: high) end of `c`'s score index, `n` of them in pop order, and the parts of
/// up to [`POP_READ_AHEAD`] more after them: the parts an earlier pop read ahead when there are `n`, else
/// one scan past what earlier pops emptied.
fn pop_items(ctx: &mut WriteCtx<'_>, c: &Coll, max: bool, n: usize) -> Result<(Items, Vec<Vec<u8>>), Error> {
    if let Some(parts) = ctx.take_read_ahead(c, SUB_SCORE, max, n) {
        let mut out = Vec::with_capacity(n);
        for p in &parts {
            let (score, member) = p.split_at_checked(8).ok_or(Error::CorruptIndexEntry)?;
            let score: [u8; 8] = score.try_into().map_err(|_| Error::CorruptIndexEntry)?;
            out.push((member.to_vec(), sortable_to_score(score)));
        }
        return Ok((out, Vec::new()));
    }
    let (lower, upper) = pop_range(ctx, c);
    let v = ctx.view();
    let mut out = Vec::new();
    let mut ahead = Vec::new();
    for item in v.scan(&lower, &upper, max).take(n.saturating_add(POP_READ_AHEAD)) {
        let k = item?.0;
        if out.len() < n {
            push_item(&mut out, &k)?;
        } else {
            ahead.push(k.get(11..).ok_or(Error::CorruptIndexEntry)?.to_vec());
        }
    }
    Ok((out, ahead))
}

/// Removes and returns up to `n` members with the lowest (`max`: highest) scores of the sorted set `key`
/// (ZPOPMIN, ZPOPMAX), in pop order; `None` when there is no set or nothing to pop (`n` is 0). A pop seeks
/// once and reads 16 entries ahead, which the next pops from the same end take without a seek while no
/// write comes between.
pub fn pop(ctx: &mut WriteCtx<'_>, key: &[u8], max: bool, n: u64) -> Result<Option<Items>, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(None) };
    let n = n.min(c.size);
    if n == 0 {
        return Ok(None);
    }
    let (items, ahead) = pop_items(ctx, &c, max, usize::try_from(n).unwrap_or(usize::MAX))?;
    let mut buf = Vec::new();
    for (m, s) in &items {
        remove(ctx, &mut c, m, *s, &mut buf);
    }
    if !items.is_empty() {
        // `buf` holds the last popped item's part: every part beyond it from this end is gone now.
        note_popped(ctx, &c, max, &buf);
    }
    if !ahead.is_empty() {
        ctx.note_read_ahead(&c, SUB_SCORE, max, ahead);
    }
    ctx.put_coll(key, &c)?;
    Ok(Some(items))
}

/// Removes and returns the member with the lowest (`max`: highest) score of the sorted set `key`
/// (BZPOPMIN, BZPOPMAX); `None` when there is no set or it has no member.
pub fn pop_one(ctx: &mut WriteCtx<'_>, key: &[u8], max: bool) -> Result<Option<(Vec<u8>, f64)>, Error> {
    Ok(pop(ctx, key, max, 1)?.and_then(|mut items| items.pop()))
}

/// Removes the members of the sorted set `key` that range `r` names (ZREMRANGEBYRANK/BYSCORE/BYLEX;
/// collected first through the group's view). Returns how many were removed.
pub fn remove_range(ctx: &mut WriteCtx<'_>, key: &[u8], r: &Range) -> Result<u64, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(0) };
    let items = run(&ctx.view(), &c, r, false, Limit::ALL)?;
    let mut buf = Vec::new();
    for (m, s) in &items {
        remove(ctx, &mut c, m, *s, &mut buf);
    }
    if !items.is_empty() {
        ctx.put_coll(key, &c)?;
    }
    Ok(items.len() as u64)
}

// ---------------------------------------------------------------------------------------------------------
// Whole sets: the STORE forms' destination, the set operations' inputs

/// Replaces `dst` (whatever it holds) with a sorted set of `items` (distinct members); an empty result
/// deletes `dst`. Returns the size stored.
pub fn store(ctx: &mut WriteCtx<'_>, dst: &[u8], items: &[(Vec<u8>, f64)]) -> Result<u64, Error> {
    for (m, _) in items {
        check_member(m)?;
    }
    if let Some((_, stored)) = ctx.get_meta(dst)? {
        // Any type; a collection's old version goes to the collector.
        ctx.delete_stored(ctx.db_index, dst, &stored);
    }
    if items.is_empty() {
        return Ok(0);
    }
    let mut c = ctx.create_coll(dst, Type::ZSet);
    let mut buf = Vec::new();
    for (m, s) in items {
        put_score(ctx, &mut c, m, None, *s, &mut buf)?;
    }
    ctx.put_coll(dst, &c)?;
    ctx.signal_key(dst);
    Ok(c.size)
}

/// Reads the meta values of `keys` in the commit step, so the expired ones are deleted on access, as in
/// Redis (the STORE forms of the set operations, before they read their inputs through the view).
pub fn expire_on_access<K: AsRef<[u8]>>(ctx: &mut WriteCtx<'_>, keys: &[K]) -> Result<(), Error> {
    for k in keys {
        ctx.get_meta(k.as_ref())?;
    }
    Ok(())
}

/// One input of a set operation (ZUNION, ZINTER, ZDIFF): the members of a sorted set with their scores, or
/// of a set with score 1 each (as in Redis), in member order; `None` when the key is missing, WRONGTYPE
/// for another type.
pub fn load_scored(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Items>, Error> {
    let Some((m, stored)) = ctx.get_meta(key)? else { return Ok(None) };
    if m.typ != Type::ZSet && m.typ != Type::Set {
        return Err(store::Error::WrongType.into());
    }
    let c = match Coll::decode(&stored) {
        Ok(Some(c)) => c,
        Ok(None) => return Err(store::Error::WrongType.into()),
        Err(e) => return Err(store::Error::Corrupt(e.to_string()).into()),
    };
    let mut out = Vec::new();
    for item in ctx.members(&c, SUB_MEMBER, None, false) {
        let (member, v) = item?;
        let score = if m.typ == Type::ZSet { decode_score(&v)? } else { 1.0 };
        out.push((member, score));
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests;
