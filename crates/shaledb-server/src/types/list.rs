//! Lists on the engine: the layout, and the operations LPUSH, LPOP, LINDEX, LRANGE, LSET, LINSERT, LREM,
//! LTRIM, LPOS and LMOVE perform on the records.
//!
//! Layout (docs/format/server-keys.md, "Lists"; the grammar is in [`node`]): the collection's `extra` is
//! `head:u64be tail:u64be`, the elements live at the indexes `[head, tail)`, and they are grouped in nodes of
//! 32 consecutive indexes (Redis's quicklist, kept simple so that every index stays computable): node `n`
//! covers `[32n, 32n + 32)` and its record holds the live elements of that span in order; an element longer
//! than 512 bytes has a record of its own right after its node's. A new list starts with `head = tail =
//! 2^63`, so both ends can grow by 2^63 elements. Finding element `i` is computing `head + i` and its node:
//! LINDEX is one point read (two for a long element), LRANGE is one ordered scan of the nodes of the range,
//! pushes and pops read and rewrite only the end nodes.
//!
//! LINSERT and LREM change the middle: the elements on the shorter side of the change move by one index
//! (LINSERT) or by the number removed (LREM), so they cost a scan up to the pivot or the last match plus the
//! rewrite of the nodes of the shorter side, O(n) in the worst case, like Redis's O(n) on a quicklist.
//!
//! Every write first reads the nodes it changes (`load`) and then writes every changed node of a span at
//! once (`store`): nothing is written before every check passed, so a failed command leaves no record
//! behind.
//!
//! Every push records its key with [`WriteCtx::signal_key`], which wakes the clients blocked on that key
//! (BLPOP ...) once the pushing group is durable.

use crate::keys::{Coll, Type};
use crate::store::{self, ReadCtx, WriteCtx};
use bytes::Bytes;
use std::collections::BTreeMap;

pub mod node;
pub mod upgrade;

use node::{ext_part, is_external, live, node_of, node_part, Node, NodeScan, SUB_NODE};

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

/// `(head, tail)` of a list.
pub fn bounds(c: &Coll) -> (u64, u64) {
    (c.extra_u64(0), c.extra_u64(1))
}

fn set_bounds(c: &mut Coll, head: u64, tail: u64) {
    c.set_extra_u64(0, head);
    c.set_extra_u64(1, tail);
    c.size = tail - head;
}

/// `(head, tail)` of a list, `Err(Corrupt)` when they disagree with its size.
fn checked_bounds(c: &Coll) -> Result<(u64, u64), Error> {
    let (h, t) = bounds(c);
    if t < h || t - h != c.size {
        return Err(Error::Corrupt);
    }
    Ok((h, t))
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

/// The nodes a write read before changing them, by number.
#[derive(Default)]
struct Loaded {
    nodes: BTreeMap<u64, Node>,
}

impl Loaded {
    /// The element at index `a`, `Err(Corrupt)` when no loaded node holds it.
    fn at(&self, a: u64) -> Result<&[u8], Error> {
        self.nodes.get(&node_of(a)).and_then(|n| n.at(a)).ok_or(Error::Corrupt)
    }
}

/// Reads the nodes `[n_from, n_to]` of the list `c` that hold live elements: one point read (plus one per
/// long element) for a single node, else one ordered scan.
fn load(ctx: &ReadCtx<'_>, c: &Coll, n_from: u64, n_to: u64) -> Result<Loaded, Error> {
    let (h, t) = checked_bounds(c)?;
    let mut out = Loaded::default();
    if h == t {
        return Ok(out);
    }
    let lo = n_from.max(node_of(h));
    let hi = n_to.min(node_of(t - 1));
    if lo > hi {
        return Ok(out);
    }
    if lo == hi {
        out.nodes.insert(lo, node::read(ctx, c, h, t, lo)?);
        return Ok(out);
    }
    for r in NodeScan::new(ctx, c, h, t, lo, hi - lo + 1, false) {
        let node = r?;
        out.nodes.insert(node.n, node);
    }
    Ok(out)
}

/// Refuses an element the engine could not hold as one record (checked before anything is written).
fn check_sizes<'v>(values: impl IntoIterator<Item = &'v [u8]>) -> Result<(), Error> {
    for v in values {
        if is_external(v) {
            store::check_entry_size(11 + 9, v.len())?;
        }
    }
    Ok(())
}

/// What a write makes of a span of nodes: the list becomes `[head, tail)`, the indexes `[lo, hi)` hold
/// `values`, and every other index keeps the element it had (read into the [`Loaded`] nodes).
struct Change<'v> {
    head: u64,
    tail: u64,
    lo: u64,
    values: &'v [&'v [u8]],
}

/// Writes the nodes `[n_from, n_to]` of the list `c` as `change` says, from the nodes `old` read before:
/// a node left without live elements is deleted with its external records, a changed node is rewritten
/// (an unchanged one is not), and an external record is written only for a new element. REQUIRES: `old`
/// holds every node of the span that had live elements.
fn store(
    ctx: &mut WriteCtx<'_>,
    c: &Coll,
    old: &Loaded,
    n_from: u64,
    n_to: u64,
    change: &Change<'_>,
) -> Result<(), Error> {
    check_sizes(change.values.iter().copied())?;
    let hi = change.lo + change.values.len() as u64;
    // Everything is computed first, then written: a missing old element writes nothing. A part is a node's
    // (8 bytes) or an external record's (9).
    let mut puts: Vec<(Part, Vec<u8>)> = Vec::new();
    let mut deletes: Vec<Part> = Vec::new();
    for n in n_from..=n_to {
        let before = old.nodes.get(&n);
        let (first, end) = if change.head < change.tail { live(n, change.head, change.tail) } else { (1, 0) };
        let mut kept_ext: u64 = 0;
        if first < end {
            // The node's new elements are [cl, ch); it keeps its old ones at [first, cl) and [ch, end), whose
            // entries are copied from the old value as they are (they were checked when it was read): a push
            // or a pop encodes only what it adds.
            let cl = change.lo.clamp(first, end);
            let ch = hi.clamp(cl, end);
            let new: &[&[u8]] =
                if cl < ch { &change.values[(cl - change.lo) as usize..(ch - change.lo) as usize] } else { &[] };
            let kept = |from: u64, to: u64| -> Result<&[u8], Error> {
                before.and_then(|b| b.raw_span(from, to)).ok_or(Error::Corrupt)
            };
            let (left, right) =
                (if first < cl { kept(first, cl)? } else { &[] }, if ch < end { kept(ch, end)? } else { &[] });
            let mut raw = Vec::with_capacity(left.len() + node::encoded_size(new.iter().copied()) + right.len());
            raw.extend_from_slice(left);
            node::encode_into(new.iter().copied(), &mut raw);
            raw.extend_from_slice(right);
            for (a, v) in (cl..ch).zip(new) {
                if is_external(v) {
                    let slot = (a % node::K) as u8;
                    kept_ext |= 1 << slot;
                    puts.push((Part::ext(n, slot), v.to_vec()));
                }
            }
            if let Some(b) = before {
                for slot in b.ext_slots() {
                    let a = n * node::K + u64::from(slot);
                    if (first..cl).contains(&a) || (ch..end).contains(&a) {
                        kept_ext |= 1 << slot;
                    }
                }
            }
            if before.is_none_or(|b| b.raw != raw) {
                puts.push((Part::node(n), raw));
            }
        } else if before.is_some() {
            deletes.push(Part::node(n));
        }
        if let Some(b) = before {
            for slot in b.ext_slots() {
                if kept_ext & (1 << slot) == 0 {
                    deletes.push(Part::ext(n, slot));
                }
            }
        }
    }
    for p in deletes {
        ctx.delete_member(c, SUB_NODE, p.as_slice());
    }
    for (p, v) in puts {
        ctx.put_member_vec(c, SUB_NODE, p.as_slice(), v)?;
    }
    Ok(())
}

/// The part of a node record (8 bytes) or of an external record (9), without an allocation.
#[derive(Clone, Copy)]
struct Part {
    bytes: [u8; 9],
    len: u8,
}

impl Part {
    fn node(n: u64) -> Part {
        let mut bytes = [0u8; 9];
        bytes[..8].copy_from_slice(&node_part(n));
        Part { bytes, len: 8 }
    }

    fn ext(n: u64, slot: u8) -> Part {
        Part { bytes: ext_part(n, slot), len: 9 }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// Pushes `values` at the head (`left`: each in turn, so the last ends first) or the tail of the list `c`.
/// The caller stores the meta value (`put_coll`).
fn push_all(ctx: &mut WriteCtx<'_>, c: &mut Coll, left: bool, values: &[&[u8]]) -> Result<(), Error> {
    let (h, t) = checked_bounds(c)?;
    let k = values.len() as u64;
    if k == 0 {
        return Ok(());
    }
    let (nh, nt, lo, ordered): (u64, u64, u64, Vec<&[u8]>) = if left {
        let nh = h.checked_sub(k).ok_or(Error::Exhausted)?;
        (nh, t, nh, values.iter().rev().copied().collect())
    } else {
        let nt = t.checked_add(k).ok_or(Error::Exhausted)?;
        (h, nt, t, values.to_vec())
    };
    let (n_from, n_to) = (node_of(lo), node_of(lo + k - 1));
    let old = load(&ctx.view(), c, n_from, n_to)?;
    store(ctx, c, &old, n_from, n_to, &Change { head: nh, tail: nt, lo, values: &ordered })?;
    set_bounds(c, nh, nt);
    Ok(())
}

/// Removes and returns up to `n` elements from the head (`left`) or the tail, in pop order: reads the end
/// nodes, then deletes or rewrites them. The caller stores the meta value (`put_coll`).
fn pop_n(ctx: &mut WriteCtx<'_>, c: &mut Coll, left: bool, n: u64) -> Result<Vec<Bytes>, Error> {
    let (h, t) = checked_bounds(c)?;
    let n = n.min(t - h);
    if n == 0 {
        return Ok(Vec::new());
    }
    let (from, to) = if left { (h, h + n) } else { (t - n, t) };
    let (n_from, n_to) = (node_of(from), node_of(to - 1));
    let old = load(&ctx.view(), c, n_from, n_to)?;
    let mut items = Vec::new();
    if left {
        for a in from..to {
            items.push(Bytes::copy_from_slice(old.at(a)?));
        }
    } else {
        for a in (from..to).rev() {
            items.push(Bytes::copy_from_slice(old.at(a)?));
        }
    }
    let (nh, nt) = if left { (to, t) } else { (h, from) };
    store(ctx, c, &old, n_from, n_to, &Change { head: nh, tail: nt, lo: nh, values: &[] })?;
    set_bounds(c, nh, nt);
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
    let values: Vec<&[u8]> = elements.iter().map(|e| &e[..]).collect();
    push_all(ctx, &mut c, left, &values)?;
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

/// The element at Redis index `index` of the list `c` (LINDEX), `None` when out of range: one point read of
/// its node (and of its own record when long). Read `c` from the same pinned context.
pub fn index(ctx: &ReadCtx<'_>, c: &Coll, index: i64) -> Result<Option<Vec<u8>>, Error> {
    let Some(p) = position(index, c.size) else { return Ok(None) };
    let (h, t) = checked_bounds(c)?;
    let a = h + p;
    let n = node_of(a);
    let raw = ctx.get_member(c, SUB_NODE, &node_part(n))?.ok_or(Error::Corrupt)?;
    let (first, end) = live(n, h, t);
    let (count, entry) = node::entry_at(&raw, (a - first) as usize)?;
    if count != end - first {
        return Err(Error::Corrupt);
    }
    match entry {
        Some(v) => Ok(Some(v.to_vec())),
        None => {
            let v = ctx.get_member(c, SUB_NODE, &ext_part(n, (a % node::K) as u8))?.ok_or(Error::Corrupt)?;
            if !is_external(&v) {
                return Err(Error::Corrupt);
            }
            Ok(Some(v))
        }
    }
}

/// Calls `f` with each element at the positions `[from, to)` of the list `c`, in order (LRANGE: one
/// ordered scan of the nodes of the range). Read `c` from the same pinned context.
pub fn for_each_in(ctx: &ReadCtx<'_>, c: &Coll, from: u64, to: u64, mut f: impl FnMut(&[u8])) -> Result<(), Error> {
    if from >= to {
        return Ok(());
    }
    let (h, t) = checked_bounds(c)?;
    if to > c.size {
        return Err(Error::Corrupt);
    }
    let (a0, a1) = (h + from, h + to);
    let (n_from, n_to) = (node_of(a0), node_of(a1 - 1));
    for r in NodeScan::new(ctx, c, h, t, n_from, n_to - n_from + 1, false) {
        let node = r?;
        for a in a0.max(node.first)..a1.min(node.end()) {
            f(node.at(a).ok_or(Error::Corrupt)?);
        }
    }
    Ok(())
}

/// Replaces the element at Redis index `index` of the list `c`, stored as `key` (LSET): rewrites its node,
/// or only its own record when both the old and the new element are long.
pub fn set(ctx: &mut WriteCtx<'_>, key: &[u8], c: &Coll, index: i64, v: &[u8]) -> Result<(), Error> {
    let Some(p) = position(index, c.size) else { return Err(Error::IndexOutOfRange) };
    let (h, t) = checked_bounds(c)?;
    let a = h + p;
    let n = node_of(a);
    let old = load(&ctx.view(), c, n, n)?;
    store(ctx, c, &old, n, n, &Change { head: h, tail: t, lo: a, values: &[v] })?;
    ctx.put_coll(key, c)?;
    Ok(())
}

/// Calls `f(position, element)` for the elements of the list `c` from the head (or, `reverse`, from the
/// tail) until it answers false: one ordered scan of the nodes.
fn walk(ctx: &ReadCtx<'_>, c: &Coll, reverse: bool, mut f: impl FnMut(u64, &[u8]) -> bool) -> Result<(), Error> {
    let (h, t) = checked_bounds(c)?;
    if h == t {
        return Ok(());
    }
    let (first, last) = (node_of(h), node_of(t - 1));
    let start = if reverse { last } else { first };
    for r in NodeScan::new(ctx, c, h, t, start, last - first + 1, reverse) {
        let node = r?;
        let span = node.first..node.end();
        let go = |a: u64, f: &mut dyn FnMut(u64, &[u8]) -> bool| -> Result<bool, Error> {
            Ok(f(a - h, node.at(a).ok_or(Error::Corrupt)?))
        };
        if reverse {
            for a in span.rev() {
                if !go(a, &mut f)? {
                    return Ok(());
                }
            }
        } else {
            for a in span {
                if !go(a, &mut f)? {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// Position of the first element equal to `pivot` (one scan from the head).
fn find_first(ctx: &mut WriteCtx<'_>, c: &Coll, pivot: &[u8]) -> Result<Option<u64>, Error> {
    let mut found = None;
    walk(&ctx.view(), c, false, |p, v| {
        if v == pivot {
            found = Some(p);
        }
        found.is_none()
    })?;
    Ok(found)
}

/// Inserts `v` before or (`after`) after the first element equal to `pivot` in the list `key` (LINSERT).
/// Returns the length after the insert (0: no list), or `None` when no element equals `pivot`.
pub fn insert(ctx: &mut WriteCtx<'_>, key: &[u8], after: bool, pivot: &[u8], v: &[u8]) -> Result<Option<u64>, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(Some(0)) };
    let Some(pivot) = find_first(ctx, &c, pivot)? else { return Ok(None) };
    check_sizes([v])?;
    // The new element takes position `at`; the shorter side moves by one to make room.
    let at = pivot + after as u64;
    let (h, t) = checked_bounds(&c)?;
    if at < c.size - at {
        // [0, at) moves one index down, `v` follows it: the indexes [h - 1, h + at) change.
        let nh = h.checked_sub(1).ok_or(Error::Exhausted)?;
        let (n_from, n_to) = (node_of(nh), node_of(h + at - 1));
        let old = load(&ctx.view(), &c, n_from, n_to)?;
        let mut values = Vec::with_capacity(at as usize + 1);
        for a in h..h + at {
            values.push(old.at(a)?);
        }
        values.push(v);
        store(ctx, &c, &old, n_from, n_to, &Change { head: nh, tail: t, lo: nh, values: &values })?;
        set_bounds(&mut c, nh, t);
    } else {
        // [at, size) moves one index up after `v`: the indexes [h + at, t + 1) change.
        let nt = t.checked_add(1).ok_or(Error::Exhausted)?;
        let (n_from, n_to) = (node_of(h + at), node_of(t));
        let old = load(&ctx.view(), &c, n_from, n_to)?;
        let mut values = Vec::new();
        values.push(v);
        for a in h + at..t {
            values.push(old.at(a)?);
        }
        store(ctx, &c, &old, n_from, n_to, &Change { head: h, tail: nt, lo: h + at, values: &values })?;
        set_bounds(&mut c, h, nt);
    }
    ctx.put_coll(key, &c)?;
    Ok(Some(c.size))
}

/// Removes the elements equal to `v` from the list `key` (LREM): up to `count` from the head, up to
/// `-count` from the tail when negative, all of them when 0. Returns how many were removed.
pub fn remove(ctx: &mut WriteCtx<'_>, key: &[u8], count: i64, v: &[u8]) -> Result<u64, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(0) };
    let (h, t) = checked_bounds(&c)?;
    let want = if count == 0 { u64::MAX } else { count.unsigned_abs() };
    let from_tail = count < 0;
    // Positions of the elements to remove (ascending order at the end).
    let mut hits: Vec<u64> = Vec::new();
    walk(&ctx.view(), &c, from_tail, |p, e| {
        if e == v {
            hits.push(p);
        }
        (hits.len() as u64) < want
    })?;
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
        // The list is deleted; the collector deletes its records.
        set_bounds(&mut c, t, t);
        ctx.put_coll(key, &c)?;
        return Ok(removed);
    }
    let is_hit = |p: u64| hits.binary_search(&p).is_ok();
    if last < size - first {
        // Compact [0, last] toward the tail: the kept elements end at `last`, the head moves up by `removed`.
        let (n_from, n_to) = (node_of(h), node_of(h + last));
        let old = load(&ctx.view(), &c, n_from, n_to)?;
        let mut values = Vec::with_capacity((last + 1 - removed) as usize);
        for p in (0..=last).filter(|&p| !is_hit(p)) {
            values.push(old.at(h + p)?);
        }
        let nh = h + removed;
        store(ctx, &c, &old, n_from, n_to, &Change { head: nh, tail: t, lo: nh, values: &values })?;
        set_bounds(&mut c, nh, t);
    } else {
        // Compact [first, size) toward the head: the tail moves down by `removed`.
        let (n_from, n_to) = (node_of(h + first), node_of(t - 1));
        let old = load(&ctx.view(), &c, n_from, n_to)?;
        let mut values = Vec::new();
        for p in (first..size).filter(|&p| !is_hit(p)) {
            values.push(old.at(h + p)?);
        }
        let nt = t - removed;
        store(ctx, &c, &old, n_from, n_to, &Change { head: h, tail: nt, lo: h + first, values: &values })?;
        set_bounds(&mut c, h, nt);
    }
    ctx.put_coll(key, &c)?;
    Ok(removed)
}

/// The parts of every record (node or external) of the nodes `[n_from, n_to)` of the list `c`: one ordered
/// scan of their keys.
fn node_records(ctx: &ReadCtx<'_>, c: &Coll, n_from: u64, n_to: u64) -> Result<Vec<Vec<u8>>, Error> {
    let mut parts = Vec::new();
    if n_from >= n_to {
        return Ok(parts);
    }
    let end = node_part(n_to);
    for r in ctx.members(c, SUB_NODE, Some(&node_part(n_from)), false) {
        let (p, _) = r?;
        if p.as_slice() >= &end[..] {
            break;
        }
        parts.push(p);
    }
    Ok(parts)
}

/// Keeps only the elements `start..=stop` (Redis indexes) of the list `key` (LTRIM); a missing list is no
/// error. The nodes entirely outside the kept range are deleted (one scan of their keys), the one or two
/// nodes at its edges rewritten.
pub fn trim(ctx: &mut WriteCtx<'_>, key: &[u8], start: i64, stop: i64) -> Result<(), Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(()) };
    let (h, t) = checked_bounds(&c)?;
    let Some((s, e)) = range(start, stop, c.size) else {
        // Nothing kept: the list is deleted; the collector deletes its records.
        set_bounds(&mut c, h, h);
        ctx.put_coll(key, &c)?;
        return Ok(());
    };
    let (nh, nt) = (h + s, h + e);
    let (edge_lo, edge_hi) = (node_of(nh), node_of(nt - 1));
    // Every read before the first write: the edge nodes, then the keys of the nodes outside the kept range.
    let mut old = load(&ctx.view(), &c, edge_lo, edge_lo)?;
    if edge_hi != edge_lo {
        old.nodes.append(&mut load(&ctx.view(), &c, edge_hi, edge_hi)?.nodes);
    }
    let mut outside = Vec::new();
    if h < t {
        let view = ctx.view();
        outside = node_records(&view, &c, node_of(h), edge_lo)?;
        outside.append(&mut node_records(&view, &c, edge_hi + 1, node_of(t - 1) + 1)?);
    }
    for p in outside {
        ctx.delete_member(&c, SUB_NODE, &p);
    }
    let keep = Change { head: nh, tail: nt, lo: nh, values: &[] };
    store(ctx, &c, &old, edge_lo, edge_lo, &keep)?;
    if edge_hi != edge_lo {
        store(ctx, &c, &old, edge_hi, edge_hi, &keep)?;
    }
    set_bounds(&mut c, nh, nt);
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
    let reverse = q.rank < 0;
    let mut skip = q.rank.unsigned_abs() - 1;
    let mut found = Vec::new();
    let mut scanned = 0u64;
    if q.limit == 0 {
        return Ok(found);
    }
    walk(ctx, c, reverse, |p, v| {
        scanned += 1;
        if v == q.element {
            if skip > 0 {
                skip -= 1;
            } else {
                found.push(p);
                if found.len() as u64 >= q.want {
                    return false;
                }
            }
        }
        scanned < q.limit
    })?;
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
        push_all(ctx, &mut s, to_left, &[&v[..]])?;
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
    push_all(ctx, &mut d, to_left, &[&v[..]])?;
    ctx.put_coll(dst, &d)?;
    ctx.signal_key(dst);
    Ok(Some(v))
}

/// How many elements MEMORY USAGE's sample of up to `samples` elements (0: all) of the list `c` saw, and
/// the bytes of the records (node and external) it read, each with `overhead` added.
pub fn sample_bytes(ctx: &ReadCtx<'_>, c: &Coll, samples: u64, overhead: u64) -> Result<(u64, u64), Error> {
    let (mut seen, mut bytes) = (0u64, 0u64);
    for r in ctx.members(c, SUB_NODE, None, false) {
        let (p, v) = r?;
        if p.len() == 8 {
            if samples != 0 && seen >= samples {
                break;
            }
            seen += node::count(&v)?;
        }
        bytes += 11 + p.len() as u64 + v.len() as u64 + overhead;
    }
    Ok((seen, bytes))
}

#[cfg(test)]
mod tests;
