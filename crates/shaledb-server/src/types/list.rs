//! Lists on the engine: the layout, and the operations LPUSH, LPOP, LINDEX, LRANGE, LSET, LINSERT, LREM,
//! LTRIM, LPOS and LMOVE perform on the records.
//!
//! Layout (docs/format/server-keys.md, "Lists"): the collection's `extra` is `head:u64be tail:u64be`; the
//! elements live at the indexes `[head, tail)`, one member record each (`sub 0x00`, part `index:u64be`,
//! value = the element). A new list starts with `head = tail = 2^63`, so both ends can grow by 2^63
//! elements. Finding element `i` is computing `head + i`: LINDEX and LSET are one point read or write,
//! LRANGE is one ordered scan starting at `head + start`, pushes and pops touch only the ends.
//!
//! LINSERT and LREM change the middle: the elements on the shorter side of the change move by one index
//! (LINSERT) or by the number removed (LREM), so they cost a scan up to the pivot or the last match plus
//! `min(left, right)` rewrites, O(n) in the worst case, like Redis's O(n) on a quicklist.
//!
//! Every push records its key with [`WriteCtx::signal_key`], which wakes the clients blocked on that key
//! (BLPOP ...) once the pushing group is durable.

use crate::keys::{be_u64, Coll, Type, SUB_MEMBER};
use crate::store::{self, ReadCtx, WriteCtx};
use bytes::Bytes;

/// Index of the first element of a new list (both ends can grow by 2^63).
pub const BASE: u64 = 1 << 63;

/// Why a list operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The store failed (wrong type, corrupt meta value, failed read, entry too large).
    #[error(transparent)]
    Store(#[from] store::Error),
    /// The element records do not match the list's header.
    #[error("corrupt list: its element records do not match its header")]
    Corrupt,
    /// A push past index 0 or 2^64-1.
    #[error("list index space exhausted at this end: too many pushes on one side")]
    Exhausted,
    /// LSET on a missing key.
    #[error("no such key")]
    NoSuchKey,
    /// LSET past either end.
    #[error("index out of range")]
    IndexOutOfRange,
}

/// The part of the member key of the element at index `i`.
fn part(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// The position (from the head) of the element record with part `p`.
fn position_of(p: &[u8], head: u64) -> Result<u64, Error> {
    if p.len() != 8 {
        return Err(Error::Corrupt);
    }
    Ok(be_u64(p) - head)
}

/// `(head, tail)` of a list.
pub fn bounds(c: &Coll) -> (u64, u64) {
    (c.extra_u64(0), c.extra_u64(1))
}

fn set_bounds(c: &mut Coll, head: u64, tail: u64) {
    c.set_extra_u64(0, head);
    c.set_extra_u64(1, tail);
    c.size = tail - head;
}

/// The live list `key`: `Ok(None)` when missing, `Err(WRONGTYPE)` when it holds another type. Pass a
/// [`ReadCtx::pinned`] context when members are read next.
pub fn get(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::List)?)
}

/// [`get`] in the commit step.
pub fn get_mut(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::List)?)
}

/// A new, empty list for `key` (stored by `put_coll` after the pushes).
fn create(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Coll {
    let mut c = ctx.create_coll(key, Type::List);
    set_bounds(&mut c, BASE, BASE);
    c
}

/// Pushes one element at the head (`left`) or the tail.
fn push_one(ctx: &mut WriteCtx<'_>, c: &mut Coll, left: bool, v: &[u8]) -> Result<(), Error> {
    let (h, t) = bounds(c);
    if left {
        let nh = h.checked_sub(1).ok_or(Error::Exhausted)?;
        ctx.put_member(c, SUB_MEMBER, &part(nh), v)?;
        set_bounds(c, nh, t);
    } else {
        let nt = t.checked_add(1).ok_or(Error::Exhausted)?;
        ctx.put_member(c, SUB_MEMBER, &part(t), v)?;
        set_bounds(c, h, nt);
    }
    Ok(())
}

/// Removes and returns up to `n` elements from the head (`left`) or the tail, in pop order: one ordered
/// scan, then one delete per element. The caller stores the meta value (`put_coll`).
fn pop_n(ctx: &mut WriteCtx<'_>, c: &mut Coll, left: bool, n: u64) -> Result<Vec<Bytes>, Error> {
    let (h, t) = bounds(c);
    let n = n.min(t - h);
    if n == 0 {
        return Ok(Vec::new());
    }
    let from = if left { h } else { t - 1 };
    let mut items = Vec::new();
    {
        let view = ctx.view();
        for r in view.members(c, SUB_MEMBER, Some(&part(from)), !left).take(n as usize) {
            let (p, v) = r?;
            let expect = if left { h + items.len() as u64 } else { t - 1 - items.len() as u64 };
            if p.as_slice() != part(expect) {
                return Err(Error::Corrupt);
            }
            items.push(Bytes::from(v));
        }
    }
    if items.len() as u64 != n {
        return Err(Error::Corrupt);
    }
    for i in 0..n {
        let idx = if left { h + i } else { t - 1 - i };
        ctx.delete_member(c, SUB_MEMBER, &part(idx));
    }
    if left {
        set_bounds(c, h + n, t);
    } else {
        set_bounds(c, h, t - n);
    }
    Ok(items)
}

/// Pushes `elements` one by one at the head (`left`) or the tail of the list `key`, creating it unless
/// `only_existing` (LPUSHX). Returns the length after the pushes (0: no list and `only_existing`).
pub fn push(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    elements: &[Bytes],
    left: bool,
    only_existing: bool,
) -> Result<u64, Error> {
    let mut c = match get_mut(ctx, key)? {
        Some(c) => c,
        None if only_existing => return Ok(0),
        None => create(ctx, key),
    };
    for v in elements {
        push_one(ctx, &mut c, left, v)?;
    }
    ctx.put_coll(key, &c)?;
    ctx.signal_key(key);
    Ok(c.size)
}

/// Removes and returns up to `n` elements of the list `key` from the head (`left`) or the tail, in pop
/// order; `None` when there is no list. A list emptied is deleted.
pub fn pop(ctx: &mut WriteCtx<'_>, key: &[u8], left: bool, n: u64) -> Result<Option<Vec<Bytes>>, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(None) };
    let items = pop_n(ctx, &mut c, left, n)?;
    ctx.put_coll(key, &c)?;
    Ok(Some(items))
}

/// A Redis list index (negative from the end) as a position in `[0, len)`, or `None` when out of range.
pub fn position(index: i64, len: u64) -> Option<u64> {
    let i = if index < 0 { (len as i128) + index as i128 } else { index as i128 };
    (i >= 0 && i < len as i128).then_some(i as u64)
}

/// LRANGE/LTRIM bounds: the positions `[start, end)` of `start..=stop` clamped as Redis does, or `None`
/// when the range is empty.
pub fn range(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    super::coll::rank_bounds(start, stop, len).map(|(s, e)| (s, e + 1))
}

/// The element at Redis index `index` of the list `c` (LINDEX), `None` when out of range. Read `c` from
/// the same pinned context.
pub fn index(ctx: &ReadCtx<'_>, c: &Coll, index: i64) -> Result<Option<Vec<u8>>, Error> {
    let Some(p) = position(index, c.size) else { return Ok(None) };
    match ctx.get_member(c, SUB_MEMBER, &part(bounds(c).0 + p))? {
        Some(v) => Ok(Some(v)),
        None => Err(Error::Corrupt),
    }
}

/// Calls `f` with each element at the positions `[from, to)` of the list `c`, in order (LRANGE: one
/// ordered scan). Read `c` from the same pinned context.
pub fn for_each_in(ctx: &ReadCtx<'_>, c: &Coll, from: u64, to: u64, f: impl FnMut(&[u8])) -> Result<(), Error> {
    let n = (to - from) as usize;
    let visited = ctx.for_member_values(c, SUB_MEMBER, &part(bounds(c).0 + from), n, f)?;
    if visited != n {
        return Err(Error::Corrupt);
    }
    Ok(())
}

/// Replaces the element at Redis index `index` of the list `c`, stored as `key` (LSET).
pub fn set(ctx: &mut WriteCtx<'_>, key: &[u8], c: &Coll, index: i64, v: &[u8]) -> Result<(), Error> {
    let Some(p) = position(index, c.size) else { return Err(Error::IndexOutOfRange) };
    ctx.put_member(c, SUB_MEMBER, &part(bounds(c).0 + p), v)?;
    ctx.put_coll(key, c)?;
    Ok(())
}

/// The elements at positions `[from, to)` of a list, in order (one scan).
fn read_span(ctx: &mut WriteCtx<'_>, c: &Coll, from: u64, to: u64) -> Result<Vec<Vec<u8>>, Error> {
    let n = (to - from) as usize;
    if n == 0 {
        return Ok(Vec::new());
    }
    let (h, _) = bounds(c);
    let view = ctx.view();
    let mut out = Vec::new();
    for r in view.members(c, SUB_MEMBER, Some(&part(h + from)), false).take(n) {
        out.push(r?.1);
    }
    if out.len() != n {
        return Err(Error::Corrupt);
    }
    Ok(out)
}

/// Position of the first element equal to `pivot` (one scan from the head).
fn find_first(ctx: &mut WriteCtx<'_>, c: &Coll, pivot: &[u8]) -> Result<Option<u64>, Error> {
    let (h, _) = bounds(c);
    let view = ctx.view();
    for r in view.members(c, SUB_MEMBER, None, false) {
        let (p, v) = r?;
        if v == pivot {
            return Ok(Some(position_of(&p, h)?));
        }
    }
    Ok(None)
}

/// Inserts `v` before or (`after`) after the first element equal to `pivot` in the list `key` (LINSERT).
/// Returns the length after the insert (0: no list), or `None` when no element equals `pivot`.
pub fn insert(ctx: &mut WriteCtx<'_>, key: &[u8], after: bool, pivot: &[u8], v: &[u8]) -> Result<Option<u64>, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(Some(0)) };
    let Some(pivot) = find_first(ctx, &c, pivot)? else { return Ok(None) };
    // The new element takes position `at`; the shorter side moves by one to make room.
    let at = pivot + after as u64;
    let (h, t) = bounds(&c);
    if at < c.size - at {
        // Move [0, at) one index down.
        let nh = h.checked_sub(1).ok_or(Error::Exhausted)?;
        let span = read_span(ctx, &c, 0, at)?;
        for (i, e) in span.iter().enumerate() {
            ctx.put_member(&c, SUB_MEMBER, &part(nh + i as u64), e)?;
        }
        ctx.put_member(&c, SUB_MEMBER, &part(nh + at), v)?;
        set_bounds(&mut c, nh, t);
    } else {
        // Move [at, size) one index up.
        let nt = t.checked_add(1).ok_or(Error::Exhausted)?;
        let span = read_span(ctx, &c, at, c.size)?;
        for (i, e) in span.iter().enumerate() {
            ctx.put_member(&c, SUB_MEMBER, &part(h + at + 1 + i as u64), e)?;
        }
        ctx.put_member(&c, SUB_MEMBER, &part(h + at), v)?;
        set_bounds(&mut c, h, nt);
    }
    ctx.put_coll(key, &c)?;
    Ok(Some(c.size))
}

/// Removes the elements equal to `v` from the list `key` (LREM): up to `count` from the head, up to
/// `-count` from the tail when negative, all of them when 0. Returns how many were removed.
pub fn remove(ctx: &mut WriteCtx<'_>, key: &[u8], count: i64, v: &[u8]) -> Result<u64, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(0) };
    let (h, t) = bounds(&c);
    let want = if count == 0 { u64::MAX } else { count.unsigned_abs() };
    let from_tail = count < 0;
    // Positions of the elements to remove (ascending order at the end).
    let mut hits: Vec<u64> = Vec::new();
    {
        let view = ctx.view();
        let from = if from_tail { Some(part(t - 1)) } else { None };
        for r in view.members(&c, SUB_MEMBER, from.as_ref().map(|p| &p[..]), from_tail) {
            let (p, e) = r?;
            if e == v {
                hits.push(position_of(&p, h)?);
                if hits.len() as u64 >= want {
                    break;
                }
            }
        }
    }
    if hits.is_empty() {
        return Ok(0);
    }
    if from_tail {
        hits.reverse();
    }
    let removed = hits.len() as u64;
    let (first, last) = (hits[0], hits[hits.len() - 1]);
    let size = c.size;
    if removed == size {
        ctx.put_coll(key, &Coll { size: 0, ..c.clone() })?;
        for p in 0..size {
            ctx.delete_member(&c, SUB_MEMBER, &part(h + p));
        }
        return Ok(removed);
    }
    if last < size - first {
        // Compact [0, last] toward the tail: kept elements end at `last`, the head moves up by `removed`.
        let span = read_span(ctx, &c, 0, last + 1)?;
        let mut dst = last;
        let mut k = hits.len();
        for src in (0..=last).rev() {
            if k > 0 && hits[k - 1] == src {
                k -= 1;
                continue;
            }
            if dst != src {
                ctx.put_member(&c, SUB_MEMBER, &part(h + dst), &span[src as usize])?;
            }
            dst = dst.wrapping_sub(1);
        }
        for p in 0..removed {
            ctx.delete_member(&c, SUB_MEMBER, &part(h + p));
        }
        set_bounds(&mut c, h + removed, t);
    } else {
        // Compact [first, size) toward the head: the tail moves down by `removed`.
        let span = read_span(ctx, &c, first, size)?;
        let mut dst = first;
        let mut k = 0;
        for src in first..size {
            if k < hits.len() && hits[k] == src {
                k += 1;
                continue;
            }
            if dst != src {
                ctx.put_member(&c, SUB_MEMBER, &part(h + dst), &span[(src - first) as usize])?;
            }
            dst += 1;
        }
        for p in size - removed..size {
            ctx.delete_member(&c, SUB_MEMBER, &part(h + p));
        }
        set_bounds(&mut c, h, t - removed);
    }
    ctx.put_coll(key, &c)?;
    Ok(removed)
}

/// Keeps only the elements `start..=stop` (Redis indexes) of the list `key` (LTRIM); a missing list is no
/// error.
pub fn trim(ctx: &mut WriteCtx<'_>, key: &[u8], start: i64, stop: i64) -> Result<(), Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(()) };
    let (h, _) = bounds(&c);
    let (s, e) = range(start, stop, c.size).unwrap_or((0, 0));
    // One delete per trimmed element (their indexes are computed, no scan).
    let old = c.clone();
    for p in (0..s).chain(e.max(s)..c.size) {
        ctx.delete_member(&old, SUB_MEMBER, &part(h + p));
    }
    if e <= s {
        set_bounds(&mut c, h, h);
    } else {
        set_bounds(&mut c, h + s, h + e);
    }
    ctx.put_coll(key, &c)?;
    Ok(())
}

/// What LPOS looks for: the `rank`-th match first (negative: counting from the tail, scanning backwards;
/// never 0), at most `want` matches, among the first `limit` elements scanned.
pub struct Find<'a> {
    pub element: &'a [u8],
    pub rank: i64,
    pub want: u64,
    pub limit: u64,
}

/// The positions of the elements of the list `c` that `q` asks for (LPOS), in scan order. Read `c` from
/// the same pinned context.
pub fn find(ctx: &ReadCtx<'_>, c: &Coll, q: &Find<'_>) -> Result<Vec<u64>, Error> {
    let (h, t) = bounds(c);
    let reverse = q.rank < 0;
    let mut skip = q.rank.unsigned_abs() - 1;
    let from = if reverse { Some(part(t - 1)) } else { None };
    let mut found = Vec::new();
    for (scanned, r) in ctx.members(c, SUB_MEMBER, from.as_ref().map(|p| &p[..]), reverse).enumerate() {
        if scanned as u64 >= q.limit {
            break;
        }
        let (p, v) = r?;
        if v != q.element {
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        found.push(position_of(&p, h)?);
        if found.len() as u64 >= q.want {
            break;
        }
    }
    Ok(found)
}

/// Pops one element from `src` (`from_left`) and pushes it to `dst` (`to_left`) (LMOVE); `None` when
/// `src` is empty. `dst` is type-checked before anything is popped, as Redis does.
pub fn move_one(
    ctx: &mut WriteCtx<'_>,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Result<Option<Bytes>, Error> {
    let Some(mut s) = get_mut(ctx, src)? else { return Ok(None) };
    get_mut(ctx, dst)?;
    let mut items = pop_n(ctx, &mut s, from_left, 1)?;
    let Some(v) = items.pop() else { return Ok(None) };
    if src == dst {
        // A rotation: the list is never empty in between, so it keeps its expiry (writing the emptied list
        // first would delete the key and its TTL, as a one-element LMOVE k k did before).
        push_one(ctx, &mut s, to_left, &v)?;
        ctx.put_coll(src, &s)?;
        ctx.signal_key(dst);
        return Ok(Some(v));
    }
    ctx.put_coll(src, &s)?;
    // Read the destination again: it may be the source just written.
    let mut d = match get_mut(ctx, dst)? {
        Some(d) => d,
        None => create(ctx, dst),
    };
    push_one(ctx, &mut d, to_left, &v)?;
    ctx.put_coll(dst, &d)?;
    ctx.signal_key(dst);
    Ok(Some(v))
}

#[cfg(test)]
mod tests;
