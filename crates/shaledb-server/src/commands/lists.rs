//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LINDEX, LRANGE, LSET, LINSERT, LREM, LTRIM,
//! LPOS, LMOVE, RPOPLPUSH, LMPOP, and the blocking forms BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP.
//!
//! These handlers parse the arguments and build the replies; the list's layout and the operations on its
//! records are [`crate::types::list`].
//!
//! The blocking forms are ordinary write commands that never block themselves (inside MULTI they answer at
//! once, as in Redis); outside MULTI the connection parks the client in the wake-up registry when they find
//! nothing (see `blocking.rs`). Every push records its key with [`WriteCtx::signal_key`], which wakes the
//! waiters of that key once the pushing group is durable.

use super::{arg_i64, not_an_integer, syntax_error, Spec};
use crate::notify;
use crate::resp::{Args, Bulks, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::list;
use bytes::Bytes;

pub static COMMANDS: &[Spec] = &[
    cmd! { "lpush", -3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(lpush), "Prepends one or more elements to a list. Creates the key if it doesn't exist." },
    cmd! { "rpush", -3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(rpush), "Appends one or more elements to a list. Creates the key if it doesn't exist." },
    cmd! { "lpushx", -3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(lpushx), "Prepends one or more elements to a list only when the list exists." },
    cmd! { "rpushx", -3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(rpushx), "Appends an element to a list only when the list exists." },
    cmd! { "lpop", -2, WRITE | FAST, [1, 1, 1], Write(lpop), "Returns the first elements in a list after removing it. Deletes the list if the last element was popped." },
    cmd! { "rpop", -2, WRITE | FAST, [1, 1, 1], Write(rpop), "Returns and removes the last elements of the list. Deletes the list if the last element was popped." },
    cmd! { "llen", 2, READONLY | FAST, [1, 1, 1], Read(llen), "Returns the length of a list." },
    cmd! { "lindex", 3, READONLY, [1, 1, 1], Read(lindex), "Returns an element from a list by its index." },
    cmd! { "lrange", 4, READONLY, [1, 1, 1], Read(lrange), "Returns a range of elements from a list." },
    cmd! { "lset", 4, WRITE | DENYOOM, [1, 1, 1], Write(lset), "Sets the value of an element in a list by its index." },
    cmd! { "linsert", 5, WRITE | DENYOOM, [1, 1, 1], Write(linsert), "Inserts an element before or after another element in a list." },
    cmd! { "lrem", 4, WRITE, [1, 1, 1], Write(lrem), "Removes elements from a list. Deletes the list if the last element was removed." },
    cmd! { "ltrim", 4, WRITE, [1, 1, 1], Write(ltrim), "Removes elements from both ends a list. Deletes the list if all elements were trimmed." },
    cmd! { "lpos", -3, READONLY, [1, 1, 1], Read(lpos), "Returns the index of matching elements in a list." },
    cmd! { "lmove", 5, WRITE | DENYOOM, [1, 2, 1], Write(lmove), "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved." },
    cmd! { "rpoplpush", 3, WRITE | DENYOOM, [1, 2, 1], Write(rpoplpush), "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped." },
    cmd! { "lmpop", -4, WRITE, [0, 0, 0], Write(lmpop), "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped." },
    cmd! { "blpop", -3, WRITE | NOSCRIPT | BLOCKING, [1, -2, 1], Write(blpop), "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped." },
    cmd! { "brpop", -3, WRITE | NOSCRIPT | BLOCKING, [1, -2, 1], Write(brpop), "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped." },
    cmd! { "blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, [1, 2, 1], Write(blmove), "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved." },
    cmd! { "brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, [1, 2, 1], Write(brpoplpush), "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped." },
    cmd! { "blmpop", -5, WRITE | BLOCKING, [0, 0, 0], Write(blmpop), "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped." },
];

super::coll::reply_from!(list::Error: Store);

fn push_generic(ctx: &mut WriteCtx<'_>, args: &Args, left: bool, only_existing: bool) -> Reply {
    let len = tri!(list::push(ctx, &args[1], &args[2..], left, only_existing));
    if len > 0 {
        ctx.notify(notify::LIST, if left { "lpush" } else { "rpush" }, &args[1]);
    }
    Reply::Int(len as i64)
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

/// The optional count of LPOP, RPOP, ZPOPMIN and ZPOPMAX: a non-negative integer.
pub(crate) fn pop_count(a: Option<&Bytes>) -> Result<Option<u64>, Reply> {
    match a {
        Some(a) => match crate::resp::parse_i64(a) {
            Some(n) if n >= 0 => Ok(Some(n as u64)),
            _ => Err(Reply::err("value is out of range, must be positive")),
        },
        None => Ok(None),
    }
}

fn pop_generic(ctx: &mut WriteCtx<'_>, args: &Args, left: bool) -> Reply {
    if args.len() > 3 {
        return super::wrong_arity(if left { "lpop" } else { "rpop" });
    }
    let count = tri!(pop_count(args.get(2)));
    let Some(items) = tri!(list::pop(ctx, &args[1], left, count.unwrap_or(1))) else {
        return if count.is_some() { Reply::NilArray } else { Reply::Nil };
    };
    if !items.is_empty() {
        ctx.notify_emptied(notify::LIST, pop_event(left), &args[1]);
    }
    match count {
        None => items.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
        Some(_) => Reply::Array(items.into_iter().map(Reply::Bulk).collect()),
    }
}

/// The event of a pop from the left or the right of a list.
fn pop_event(left: bool) -> &'static str {
    if left {
        "lpop"
    } else {
        "rpop"
    }
}

fn lpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    pop_generic(ctx, args, true)
}

fn rpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    pop_generic(ctx, args, false)
}

fn llen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    match tri!(list::get(ctx, &args[1])) {
        Some(c) => Reply::Int(c.size as i64),
        None => Reply::Int(0),
    }
}

fn lindex(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(list::get(&ctx, &args[1])) else { return Reply::Nil };
    let index = tri!(arg_i64(&args[2]));
    match tri!(list::index(&ctx, &c, index)) {
        Some(v) => Reply::Bulk(v.into()),
        None => Reply::Nil,
    }
}

fn lrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let start = tri!(arg_i64(&args[2]));
    let stop = tri!(arg_i64(&args[3]));
    let ctx = ctx.pinned();
    let Some(c) = tri!(list::get(&ctx, &args[1])) else { return Reply::Array(vec![]) };
    let Some((s, e)) = list::range(start, stop, c.size) else { return Reply::Array(vec![]) };
    // Encoded as the elements are read: no allocation or `Reply` per element.
    let mut out = Bulks::with_capacity(((e - s) as usize).min(4096) * 16);
    tri!(list::for_each_in(&ctx, &c, s, e, |v| out.push(v)));
    Reply::Bulks(out)
}

fn lset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let Some(c) = tri!(list::get_mut(ctx, key)) else { return list::Error::NoSuchKey.into() };
    let index = tri!(arg_i64(&args[2]));
    tri!(list::set(ctx, key, &c, index, &args[3]));
    ctx.notify(notify::LIST, "lset", key);
    Reply::Ok
}

fn linsert(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let after = if args[2].eq_ignore_ascii_case(b"after") {
        true
    } else if args[2].eq_ignore_ascii_case(b"before") {
        false
    } else {
        return syntax_error();
    };
    match tri!(list::insert(ctx, &args[1], after, &args[3], &args[4])) {
        Some(len) => {
            if len > 0 {
                ctx.notify(notify::LIST, "linsert", &args[1]);
            }
            Reply::Int(len as i64)
        }
        None => Reply::Int(-1),
    }
}

fn lrem(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let count = tri!(arg_i64(&args[2]));
    let removed = tri!(list::remove(ctx, &args[1], count, &args[3]));
    if removed > 0 {
        ctx.notify_emptied(notify::LIST, "lrem", &args[1]);
    }
    Reply::Int(removed as i64)
}

fn ltrim(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let start = tri!(arg_i64(&args[2]));
    let stop = tri!(arg_i64(&args[3]));
    let existed = ctx.notify_flags != 0 && tri!(list::get_mut(ctx, &args[1])).is_some();
    tri!(list::trim(ctx, &args[1], start, stop));
    if existed {
        ctx.notify_emptied(notify::LIST, "ltrim", &args[1]);
    }
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
    let c = match tri!(list::get(&ctx, &args[1])) {
        Some(c) => c,
        None => return if count.is_some() { Reply::Array(vec![]) } else { Reply::Nil },
    };
    let want = match count {
        Some(0) => u64::MAX,
        Some(n) => n,
        None => 1,
    };
    let limit = if maxlen == 0 { u64::MAX } else { maxlen };
    let q = list::Find { element: &args[2], rank, want, limit };
    let mut found = tri!(list::find(&ctx, &c, &q)).into_iter().map(|p| Reply::Int(p as i64));
    match count {
        Some(_) => Reply::Array(found.collect()),
        None => found.next().unwrap_or(Reply::Nil),
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

/// LMOVE and its forms: the moved element, or `Nil` when `src` is empty.
fn move_generic(ctx: &mut WriteCtx<'_>, src: &[u8], dst: &[u8], from_left: bool, to_left: bool) -> Reply {
    let moved = tri!(list::move_one(ctx, src, dst, from_left, to_left));
    if moved.is_some() {
        ctx.notify(notify::LIST, if to_left { "lpush" } else { "rpush" }, dst);
        ctx.notify_emptied(notify::LIST, pop_event(from_left), src);
    }
    moved.map_or(Reply::Nil, Reply::Bulk)
}

fn lmove(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (Some(f), Some(t)) = (side(&args[3]), side(&args[4])) else { return syntax_error() };
    move_generic(ctx, &args[1], &args[2], f, t)
}

fn rpoplpush(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    move_generic(ctx, &args[1], &args[2], false, true)
}

/// Checks a blocking command's timeout in seconds as Redis does (a float, not negative); `Ok(None)` for 0
/// (forever). As in Redis, a timeout whose milliseconds do not fit in 63 bits (`inf`, `1e400`) is
/// "negative"; one past 2^62 ms (about 146 million years) is refused as out of range.
pub fn parse_timeout_secs(a: &[u8]) -> Result<Option<std::time::Duration>, Reply> {
    let bad = || Reply::err("timeout is not a float or out of range");
    if crate::types::long_double::classify(a) == crate::types::long_double::Class::NotANumber {
        return Err(bad());
    }
    let x: f64 = std::str::from_utf8(a).ok().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    if x.is_nan() {
        return Err(bad());
    }
    let ms = (x * 1000.0).ceil();
    if x < 0.0 || ms >= 9_223_372_036_854_775_808.0 {
        return Err(Reply::err("timeout is negative"));
    }
    if ms > (i64::MAX / 2) as f64 {
        return Err(Reply::err("timeout is out of range"));
    }
    Ok((ms > 0.0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// BLPOP/BRPOP without blocking: the first non-empty list of the keys, as `[key, element]`.
fn bpop_generic(ctx: &mut WriteCtx<'_>, args: &Args, left: bool) -> Reply {
    tri!(parse_timeout_secs(&args[args.len() - 1]));
    for key in &args[1..args.len() - 1] {
        let Some(items) = tri!(list::pop(ctx, key, left, 1)) else { continue };
        if let Some(v) = items.into_iter().next() {
            ctx.notify_emptied(notify::LIST, pop_event(left), key);
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
        let Some(items) = tri!(list::pop(ctx, key, m.left, m.count)) else { continue };
        if !items.is_empty() {
            ctx.notify_emptied(notify::LIST, pop_event(m.left), key);
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
    // Redis reads the timeout last, after the keys, the side and COUNT.
    let m = tri!(parse_mpop(args, 2));
    tri!(parse_timeout_secs(&args[1]));
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
    fn timeouts_parse_as_redis() {
        assert_eq!(parse_timeout_secs(b"0").unwrap(), None);
        assert_eq!(parse_timeout_secs(b"0.1").unwrap(), Some(std::time::Duration::from_millis(100)));
        assert_eq!(parse_timeout_secs(b"2").unwrap(), Some(std::time::Duration::from_secs(2)));
        assert!(parse_timeout_secs(b"-1").is_err());
        assert!(parse_timeout_secs(b"x").is_err());
        assert_eq!(parse_timeout_secs(b"inf"), Err(Reply::err("timeout is negative")));
        assert_eq!(parse_timeout_secs(b"1e400"), Err(Reply::err("timeout is negative")));
        assert_eq!(parse_timeout_secs(b"9223372036854775807"), Err(Reply::err("timeout is negative")));
        assert_eq!(parse_timeout_secs(b"nan"), Err(Reply::err("timeout is not a float or out of range")));
        assert_eq!(parse_timeout_secs(b" 1"), Err(Reply::err("timeout is not a float or out of range")));
        assert!(parse_timeout_secs(b"9223372036854775").is_err());
    }
}
