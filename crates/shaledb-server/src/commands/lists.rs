//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LINDEX, LRANGE, LSET, LINSERT, LREM, LTRIM,
//! LPOS, LMOVE, RPOPLPUSH, LMPOP, and the blocking forms BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP.
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
//! The blocking forms are ordinary write commands that never block themselves (inside MULTI they answer at
//! once, as in Redis); outside MULTI the connection parks the client in the wake-up registry when they find
//! nothing (see `blocking.rs`). Every push records its key with [`WriteCtx::signal_key`], which wakes the
//! waiters of that key once the pushing group is durable.

use super::flags::*;
use super::strings::spec;
use super::{arg_i64, not_an_integer, syntax_error, Handler, Spec};
use crate::keys::{Coll, Type, SUB_MEMBER};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;

/// Index of the first element of a new list (both ends can grow by 2^63).
pub const BASE: u64 = 1 << 63;

pub static COMMANDS: &[Spec] = &[
    spec!("lpush", -3, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(lpush), "Prepends one or more elements to a list. Creates the key if it doesn't exist."),
    spec!("rpush", -3, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(rpush), "Appends one or more elements to a list. Creates the key if it doesn't exist."),
    spec!("lpushx", -3, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(lpushx), "Prepends one or more elements to a list only when the list exists."),
    spec!("rpushx", -3, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(rpushx), "Appends an element to a list only when the list exists."),
    spec!("lpop", -2, WRITE | FAST, 1, 1, 1, Handler::Write(lpop), "Returns the first elements in a list after removing it. Deletes the list if the last element was popped."),
    spec!("rpop", -2, WRITE | FAST, 1, 1, 1, Handler::Write(rpop), "Returns and removes the last elements of the list. Deletes the list if the last element was popped."),
    spec!("llen", 2, READONLY | FAST, 1, 1, 1, Handler::Read(llen), "Returns the length of a list."),
    spec!("lindex", 3, READONLY, 1, 1, 1, Handler::Read(lindex), "Returns an element from a list by its index."),
    spec!("lrange", 4, READONLY, 1, 1, 1, Handler::Read(lrange), "Returns a range of elements from a list."),
    spec!("lset", 4, WRITE | DENYOOM, 1, 1, 1, Handler::Write(lset), "Sets the value of an element in a list by its index."),
    spec!("linsert", 5, WRITE | DENYOOM, 1, 1, 1, Handler::Write(linsert), "Inserts an element before or after another element in a list."),
    spec!("lrem", 4, WRITE, 1, 1, 1, Handler::Write(lrem), "Removes elements from a list. Deletes the list if the last element was removed."),
    spec!("ltrim", 4, WRITE, 1, 1, 1, Handler::Write(ltrim), "Removes elements from both ends a list. Deletes the list if all elements were trimmed."),
    spec!("lpos", -3, READONLY, 1, 1, 1, Handler::Read(lpos), "Returns the index of matching elements in a list."),
    spec!("lmove", 5, WRITE | DENYOOM, 1, 2, 1, Handler::Write(lmove), "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved."),
    spec!("rpoplpush", 3, WRITE | DENYOOM, 1, 2, 1, Handler::Write(rpoplpush), "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped."),
    spec!("lmpop", -4, WRITE, 0, 0, 0, Handler::Write(lmpop), "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped."),
    spec!("blpop", -3, WRITE | NOSCRIPT | BLOCKING, 1, -2, 1, Handler::Write(blpop), "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    spec!("brpop", -3, WRITE | NOSCRIPT | BLOCKING, 1, -2, 1, Handler::Write(brpop), "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    spec!("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, 1, 2, 1, Handler::Write(blmove), "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved."),
    spec!("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, 1, 2, 1, Handler::Write(brpoplpush), "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped."),
    spec!("blmpop", -5, WRITE | BLOCKING, 0, 0, 0, Handler::Write(blmpop), "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
];

fn part(i: u64) -> [u8; 8] {
    i.to_be_bytes()
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

fn corrupt() -> Reply {
    Reply::err("corrupt list: its element records do not match its header")
}

fn exhausted() -> Reply {
    Reply::err("list index space exhausted at this end: too many pushes on one side")
}

/// A new, empty list for `key` (stored by `put_coll` after the pushes).
fn create(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Coll {
    let mut c = ctx.create_coll(key, Type::List);
    set_bounds(&mut c, BASE, BASE);
    c
}

/// Pushes one element at the head (`left`) or the tail.
fn push_one(ctx: &mut WriteCtx<'_>, c: &mut Coll, left: bool, v: &[u8]) -> Result<(), Reply> {
    let (h, t) = bounds(c);
    if left {
        let nh = h.checked_sub(1).ok_or_else(exhausted)?;
        ctx.put_member(c, SUB_MEMBER, &part(nh), v)?;
        set_bounds(c, nh, t);
    } else {
        let nt = t.checked_add(1).ok_or_else(exhausted)?;
        ctx.put_member(c, SUB_MEMBER, &part(t), v)?;
        set_bounds(c, h, nt);
    }
    Ok(())
}

/// Removes and returns up to `n` elements from the head (`left`) or the tail, in pop order: one ordered
/// scan, then one delete per element. The caller stores the meta value (`put_coll`).
fn pop_n(ctx: &mut WriteCtx<'_>, c: &mut Coll, left: bool, n: u64) -> Result<Vec<Bytes>, Reply> {
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
                return Err(corrupt());
            }
            items.push(Bytes::from(v));
        }
    }
    if items.len() as u64 != n {
        return Err(corrupt());
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

fn push_generic(ctx: &mut WriteCtx<'_>, args: &Args, left: bool, only_existing: bool) -> Reply {
    let key = &args[1];
    let mut c = match tri!(ctx.get_coll(key, Type::List)) {
        Some(c) => c,
        None if only_existing => return Reply::Int(0),
        None => create(ctx, key),
    };
    for v in &args[2..] {
        tri!(push_one(ctx, &mut c, left, v));
    }
    tri!(ctx.put_coll(key, &c));
    ctx.signal_key(key);
    Reply::Int(c.size as i64)
}

fn lpush(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    push_generic(ctx, args, true, false)
}

fn rpush(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    push_generic(ctx, args, false, false)
}

fn lpushx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    push_generic(ctx, args, true, true)
}

fn rpushx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    push_generic(ctx, args, false, true)
}

fn pop_generic(ctx: &mut WriteCtx<'_>, args: &Args, left: bool) -> Reply {
    if args.len() > 3 {
        return super::wrong_arity(if left { "lpop" } else { "rpop" });
    }
    let count = match args.get(2) {
        Some(a) => match crate::resp::parse_i64(a) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Reply::err("value is out of range, must be positive"),
        },
        None => None,
    };
    let key = &args[1];
    let Some(mut c) = tri!(ctx.get_coll(key, Type::List)) else {
        return if count.is_some() { Reply::NilArray } else { Reply::Nil };
    };
    let items = tri!(pop_n(ctx, &mut c, left, count.unwrap_or(1)));
    tri!(ctx.put_coll(key, &c));
    match count {
        None => items.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
        Some(_) => Reply::Array(items.into_iter().map(Reply::Bulk).collect()),
    }
}

fn lpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    pop_generic(ctx, args, true)
}

fn rpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    pop_generic(ctx, args, false)
}

fn llen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    match tri!(ctx.get_coll(&args[1], Type::List)) {
        Some(c) => Reply::Int(c.size as i64),
        None => Reply::Int(0),
    }
}

/// A Redis list index (negative from the end) as a position in `[0, len)`, or `None` when out of range.
fn position(index: i64, len: u64) -> Option<u64> {
    let i = if index < 0 { (len as i128) + index as i128 } else { index as i128 };
    (i >= 0 && i < len as i128).then_some(i as u64)
}

/// LRANGE/LTRIM bounds: the positions `[start, end)` of `start..=stop` clamped as Redis does, or `None`
/// when the range is empty.
pub fn range(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i128;
    let mut s = start as i128;
    let mut e = stop as i128;
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as u64, e as u64 + 1))
}

fn lindex(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::List)) else { return Reply::Nil };
    let index = tri!(arg_i64(&args[2]));
    let Some(p) = position(index, c.size) else { return Reply::Nil };
    match tri!(ctx.get_member(&c, SUB_MEMBER, &part(bounds(&c).0 + p))) {
        Some(v) => Reply::Bulk(v.into()),
        None => corrupt(),
    }
}

fn lrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let start = tri!(arg_i64(&args[2]));
    let stop = tri!(arg_i64(&args[3]));
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::List)) else { return Reply::Array(vec![]) };
    let Some((s, e)) = range(start, stop, c.size) else { return Reply::Array(vec![]) };
    let n = (e - s) as usize;
    let mut out = Vec::with_capacity(n.min(4096));
    let visited = tri!(ctx.for_member_values(&c, SUB_MEMBER, &part(bounds(&c).0 + s), n, |v| {
        out.push(Reply::Bulk(Bytes::copy_from_slice(v)))
    }));
    if visited != n {
        return corrupt();
    }
    Reply::Array(out)
}

fn lset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let Some(c) = tri!(ctx.get_coll(key, Type::List)) else { return Reply::err("no such key") };
    let index = tri!(arg_i64(&args[2]));
    let Some(p) = position(index, c.size) else { return Reply::err("index out of range") };
    tri!(ctx.put_member(&c, SUB_MEMBER, &part(bounds(&c).0 + p), &args[3]));
    tri!(ctx.put_coll(key, &c));
    Reply::Ok
}

/// The elements at positions `[from, to)` of a list, in order (one scan).
fn read_span(ctx: &mut WriteCtx<'_>, c: &Coll, from: u64, to: u64) -> Result<Vec<Vec<u8>>, Reply> {
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
        return Err(corrupt());
    }
    Ok(out)
}

/// Position of the first element equal to `pivot` (one scan from the head).
fn find_first(ctx: &mut WriteCtx<'_>, c: &Coll, pivot: &[u8]) -> Result<Option<u64>, Reply> {
    let (h, _) = bounds(c);
    let view = ctx.view();
    for r in view.members(c, SUB_MEMBER, None, false) {
        let (p, v) = r?;
        if v == pivot {
            if p.len() != 8 {
                return Err(corrupt());
            }
            return Ok(Some(crate::keys::be_u64(&p) - h));
        }
    }
    Ok(None)
}

fn linsert(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let after = if args[2].eq_ignore_ascii_case(b"after") {
        true
    } else if args[2].eq_ignore_ascii_case(b"before") {
        false
    } else {
        return syntax_error();
    };
    let key = &args[1];
    let Some(mut c) = tri!(ctx.get_coll(key, Type::List)) else { return Reply::Int(0) };
    let Some(pivot) = tri!(find_first(ctx, &c, &args[3])) else { return Reply::Int(-1) };
    // The new element takes position `at`; the shorter side moves by one to make room.
    let at = pivot + after as u64;
    let (h, t) = bounds(&c);
    if at < c.size - at {
        // Move [0, at) one index down.
        let nh = tri!(h.checked_sub(1).ok_or_else(exhausted));
        let span = tri!(read_span(ctx, &c, 0, at));
        for (i, v) in span.iter().enumerate() {
            tri!(ctx.put_member(&c, SUB_MEMBER, &part(nh + i as u64), v));
        }
        tri!(ctx.put_member(&c, SUB_MEMBER, &part(nh + at), &args[4]));
        set_bounds(&mut c, nh, t);
    } else {
        // Move [at, size) one index up.
        let nt = tri!(t.checked_add(1).ok_or_else(exhausted));
        let span = tri!(read_span(ctx, &c, at, c.size));
        for (i, v) in span.iter().enumerate() {
            tri!(ctx.put_member(&c, SUB_MEMBER, &part(h + at + 1 + i as u64), v));
        }
        tri!(ctx.put_member(&c, SUB_MEMBER, &part(h + at), &args[4]));
        set_bounds(&mut c, h, nt);
    }
    tri!(ctx.put_coll(key, &c));
    Reply::Int(c.size as i64)
}

fn lrem(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let count = tri!(arg_i64(&args[2]));
    let key = &args[1];
    let Some(mut c) = tri!(ctx.get_coll(key, Type::List)) else { return Reply::Int(0) };
    let (h, t) = bounds(&c);
    let want = if count == 0 { u64::MAX } else { count.unsigned_abs() };
    let from_tail = count < 0;
    // Positions of the elements to remove (ascending order at the end).
    let mut hits: Vec<u64> = Vec::new();
    {
        let view = ctx.view();
        let from = if from_tail { Some(part(t - 1)) } else { None };
        for r in view.members(&c, SUB_MEMBER, from.as_ref().map(|p| &p[..]), from_tail) {
            let (p, v) = tri!(r);
            if v == args[3] {
                if p.len() != 8 {
                    return corrupt();
                }
                hits.push(crate::keys::be_u64(&p) - h);
                if hits.len() as u64 >= want {
                    break;
                }
            }
        }
    }
    if hits.is_empty() {
        return Reply::Int(0);
    }
    if from_tail {
        hits.reverse();
    }
    let removed = hits.len() as u64;
    let (first, last) = (hits[0], hits[hits.len() - 1]);
    let size = c.size;
    if removed == size {
        tri!(ctx.put_coll(key, &Coll { size: 0, ..c.clone() }));
        for p in 0..size {
            ctx.delete_member(&c, SUB_MEMBER, &part(h + p));
        }
        return Reply::Int(removed as i64);
    }
    if last < size - first {
        // Compact [0, last] toward the tail: kept elements end at `last`, the head moves up by `removed`.
        let span = tri!(read_span(ctx, &c, 0, last + 1));
        let mut dst = last;
        let mut k = hits.len();
        for src in (0..=last).rev() {
            if k > 0 && hits[k - 1] == src {
                k -= 1;
                continue;
            }
            if dst != src {
                tri!(ctx.put_member(&c, SUB_MEMBER, &part(h + dst), &span[src as usize]));
            }
            dst = dst.wrapping_sub(1);
        }
        for p in 0..removed {
            ctx.delete_member(&c, SUB_MEMBER, &part(h + p));
        }
        set_bounds(&mut c, h + removed, t);
    } else {
        // Compact [first, size) toward the head: the tail moves down by `removed`.
        let span = tri!(read_span(ctx, &c, first, size));
        let mut dst = first;
        let mut k = 0;
        for src in first..size {
            if k < hits.len() && hits[k] == src {
                k += 1;
                continue;
            }
            if dst != src {
                tri!(ctx.put_member(&c, SUB_MEMBER, &part(h + dst), &span[(src - first) as usize]));
            }
            dst += 1;
        }
        for p in size - removed..size {
            ctx.delete_member(&c, SUB_MEMBER, &part(h + p));
        }
        set_bounds(&mut c, h, t - removed);
    }
    tri!(ctx.put_coll(key, &c));
    Reply::Int(removed as i64)
}

fn ltrim(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let start = tri!(arg_i64(&args[2]));
    let stop = tri!(arg_i64(&args[3]));
    let key = &args[1];
    let Some(mut c) = tri!(ctx.get_coll(key, Type::List)) else { return Reply::Ok };
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
    tri!(ctx.put_coll(key, &c));
    Reply::Ok
}

fn lpos(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let mut rank: i64 = 1;
    let mut count: Option<u64> = None;
    let mut maxlen: u64 = 0;
    let mut i = 3;
    while i < args.len() {
        let opt = &args[i];
        let Some(val) = args.get(i + 1) else { return syntax_error() };
        if opt.eq_ignore_ascii_case(b"rank") {
            rank = tri!(arg_i64(val));
            if rank == 0 {
                return Reply::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use \
                     negative to start from the end of the list",
                );
            }
            if rank == i64::MIN {
                return not_an_integer();
            }
        } else if opt.eq_ignore_ascii_case(b"count") {
            let n = tri!(arg_i64(val));
            if n < 0 {
                return Reply::err("COUNT can't be negative");
            }
            count = Some(n as u64);
        } else if opt.eq_ignore_ascii_case(b"maxlen") {
            let n = tri!(arg_i64(val));
            if n < 0 {
                return Reply::err("MAXLEN can't be negative");
            }
            maxlen = n as u64;
        } else {
            return syntax_error();
        }
        i += 2;
    }
    let ctx = ctx.pinned();
    let c = match tri!(ctx.get_coll(&args[1], Type::List)) {
        Some(c) => c,
        None => return if count.is_some() { Reply::Array(vec![]) } else { Reply::Nil },
    };
    let (h, t) = bounds(&c);
    let reverse = rank < 0;
    let mut skip = rank.unsigned_abs() - 1;
    let want = match count {
        Some(0) => u64::MAX,
        Some(n) => n,
        None => 1,
    };
    let limit = if maxlen == 0 { u64::MAX } else { maxlen };
    let from = if reverse { Some(part(t - 1)) } else { None };
    let mut found = Vec::new();
    for (scanned, r) in ctx.members(&c, SUB_MEMBER, from.as_ref().map(|p| &p[..]), reverse).enumerate() {
        if scanned as u64 >= limit {
            break;
        }
        let (p, v) = tri!(r);
        if v != args[2] {
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if p.len() != 8 {
            return corrupt();
        }
        found.push(Reply::Int((crate::keys::be_u64(&p) - h) as i64));
        if found.len() as u64 >= want {
            break;
        }
    }
    match count {
        Some(_) => Reply::Array(found),
        None => found.into_iter().next().unwrap_or(Reply::Nil),
    }
}

fn side(a: &[u8]) -> Option<bool> {
    if a.eq_ignore_ascii_case(b"left") {
        Some(true)
    } else if a.eq_ignore_ascii_case(b"right") {
        Some(false)
    } else {
        None
    }
}

/// Pops one element from `src` (`from_left`) and pushes it to `dst` (`to_left`); `Nil` when `src` is empty.
/// `dst` is type-checked before anything is popped, as Redis does.
fn move_generic(ctx: &mut WriteCtx<'_>, src: &[u8], dst: &[u8], from_left: bool, to_left: bool) -> Reply {
    let Some(mut s) = tri!(ctx.get_coll(src, Type::List)) else { return Reply::Nil };
    tri!(ctx.get_coll(dst, Type::List));
    let mut items = tri!(pop_n(ctx, &mut s, from_left, 1));
    let Some(v) = items.pop() else { return Reply::Nil };
    if src == dst {
        // A rotation: the list is never empty in between, so it keeps its expiry (writing the emptied list
        // first would delete the key and its TTL, as a one-element LMOVE k k did before).
        tri!(push_one(ctx, &mut s, to_left, &v));
        tri!(ctx.put_coll(src, &s));
        ctx.signal_key(dst);
        return Reply::Bulk(v);
    }
    tri!(ctx.put_coll(src, &s));
    // Read the destination again: it may be the source just written.
    let mut d = match tri!(ctx.get_coll(dst, Type::List)) {
        Some(d) => d,
        None => create(ctx, dst),
    };
    tri!(push_one(ctx, &mut d, to_left, &v));
    tri!(ctx.put_coll(dst, &d));
    ctx.signal_key(dst);
    Reply::Bulk(v)
}

fn lmove(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (Some(f), Some(t)) = (side(&args[3]), side(&args[4])) else { return syntax_error() };
    move_generic(ctx, &args[1], &args[2], f, t)
}

fn rpoplpush(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    move_generic(ctx, &args[1], &args[2], false, true)
}

/// Checks a blocking command's timeout in seconds as Redis does (a float, not negative); `Ok(None)` for 0
/// (forever).
pub fn parse_timeout_secs(a: &[u8]) -> Result<Option<std::time::Duration>, Reply> {
    let bad = || Reply::err("timeout is not a float or out of range");
    let s = std::str::from_utf8(a).map_err(|_| bad())?;
    if s.is_empty() || s.trim() != s {
        return Err(bad());
    }
    let x: f64 = s.parse().map_err(|_| bad())?;
    if x.is_nan() || x.is_infinite() {
        return Err(bad());
    }
    if x < 0.0 {
        return Err(Reply::err("timeout is negative"));
    }
    let ms = (x * 1000.0).ceil();
    if ms > (i64::MAX / 2) as f64 {
        return Err(Reply::err("timeout is out of range"));
    }
    Ok((ms > 0.0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// BLPOP/BRPOP without blocking: the first non-empty list of the keys, as `[key, element]`.
fn bpop_generic(ctx: &mut WriteCtx<'_>, args: &Args, left: bool) -> Reply {
    tri!(parse_timeout_secs(&args[args.len() - 1]));
    for key in &args[1..args.len() - 1] {
        let Some(mut c) = tri!(ctx.get_coll(key, Type::List)) else { continue };
        let items = tri!(pop_n(ctx, &mut c, left, 1));
        tri!(ctx.put_coll(key, &c));
        if let Some(v) = items.into_iter().next() {
            return Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(v)]);
        }
    }
    Reply::NilArray
}

fn blpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    bpop_generic(ctx, args, true)
}

fn brpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    bpop_generic(ctx, args, false)
}

fn blmove(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (Some(f), Some(t)) = (side(&args[3]), side(&args[4])) else { return syntax_error() };
    tri!(parse_timeout_secs(&args[5]));
    move_generic(ctx, &args[1], &args[2], f, t)
}

fn brpoplpush(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(parse_timeout_secs(&args[3]));
    move_generic(ctx, &args[1], &args[2], false, true)
}

/// The parsed tail of LMPOP/BLMPOP: `numkeys key... LEFT|RIGHT [COUNT n]` starting at `args[at]`.
struct Mpop<'a> {
    keys: &'a [Bytes],
    left: bool,
    count: u64,
}

fn parse_mpop(args: &Args, at: usize) -> Result<Mpop<'_>, Reply> {
    let n = crate::resp::parse_i64(&args[at]).ok_or_else(|| Reply::err("numkeys should be greater than 0"))?;
    if n <= 0 {
        return Err(Reply::err("numkeys should be greater than 0"));
    }
    let first = at + 1;
    let rest = args.len() - first;
    if n as u64 >= rest as u64 {
        return Err(syntax_error());
    }
    let n = n as usize;
    let keys = &args[first..first + n];
    let left = side(&args[first + n]).ok_or_else(syntax_error)?;
    let mut count = None;
    let mut i = first + n + 1;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"count") && count.is_none() && i + 1 < args.len() {
            match crate::resp::parse_i64(&args[i + 1]) {
                Some(c) if c > 0 => count = Some(c as u64),
                _ => return Err(Reply::err("count should be greater than 0")),
            }
            i += 2;
        } else {
            return Err(syntax_error());
        }
    }
    Ok(Mpop { keys, left, count: count.unwrap_or(1) })
}

fn mpop_generic(ctx: &mut WriteCtx<'_>, m: &Mpop<'_>) -> Reply {
    for key in m.keys {
        let Some(mut c) = tri!(ctx.get_coll(key, Type::List)) else { continue };
        let items = tri!(pop_n(ctx, &mut c, m.left, m.count));
        tri!(ctx.put_coll(key, &c));
        if !items.is_empty() {
            return Reply::Array(vec![
                Reply::Bulk(key.clone()),
                Reply::Array(items.into_iter().map(Reply::Bulk).collect()),
            ]);
        }
    }
    Reply::NilArray
}

fn lmpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let m = tri!(parse_mpop(args, 1));
    mpop_generic(ctx, &m)
}

fn blmpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(parse_timeout_secs(&args[1]));
    let m = tri!(parse_mpop(args, 2));
    mpop_generic(ctx, &m)
}

/// The keys a blocking list command waits on and its timeout (`None`: forever); `args` passed the
/// command's own checks already.
pub fn blocking_keys(name: &str, args: &Args) -> Option<(Vec<Bytes>, Option<std::time::Duration>)> {
    let n = args.len();
    match name {
        "blpop" | "brpop" => Some((args[1..n - 1].to_vec(), parse_timeout_secs(&args[n - 1]).ok()?)),
        "blmove" => Some((vec![args[1].clone()], parse_timeout_secs(&args[5]).ok()?)),
        "brpoplpush" => Some((vec![args[1].clone()], parse_timeout_secs(&args[3]).ok()?)),
        "blmpop" => {
            let t = parse_timeout_secs(&args[1]).ok()?;
            let m = parse_mpop(args, 2).ok()?;
            Some((m.keys.to_vec(), t))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_redis() {
        assert_eq!(range(0, -1, 3), Some((0, 3)));
        assert_eq!(range(-100, 100, 3), Some((0, 3)));
        assert_eq!(range(2, 1, 3), None);
        assert_eq!(range(3, 5, 3), None);
        assert_eq!(range(-1, -1, 3), Some((2, 3)));
        assert_eq!(range(0, 0, 0), None);
        assert_eq!(range(i64::MIN, i64::MAX, 3), Some((0, 3)));
        assert_eq!(position(-1, 3), Some(2));
        assert_eq!(position(3, 3), None);
        assert_eq!(position(-4, 3), None);
        assert_eq!(position(i64::MIN, 3), None);
    }

    #[test]
    fn timeouts_parse_as_redis() {
        assert_eq!(parse_timeout_secs(b"0").unwrap(), None);
        assert_eq!(parse_timeout_secs(b"0.1").unwrap(), Some(std::time::Duration::from_millis(100)));
        assert_eq!(parse_timeout_secs(b"2").unwrap(), Some(std::time::Duration::from_secs(2)));
        assert!(parse_timeout_secs(b"-1").is_err());
        assert!(parse_timeout_secs(b"x").is_err());
        assert!(parse_timeout_secs(b"inf").is_err());
        assert!(parse_timeout_secs(b"1e300").is_err());
    }

    #[test]
    fn list_header_round_trips() {
        let mut c = Coll::new(Type::List, 9);
        set_bounds(&mut c, BASE - 2, BASE + 5);
        let d = Coll::decode(&c.encode()).unwrap().unwrap();
        assert_eq!(bounds(&d), (BASE - 2, BASE + 5));
        assert_eq!(d.size, 7);
    }
}
