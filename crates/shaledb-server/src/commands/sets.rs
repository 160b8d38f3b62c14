//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE, SINTER,
//! SUNION, SDIFF, SINTERSTORE, SUNIONSTORE, SDIFFSTORE, SINTERCARD, SSCAN.
//!
//! These handlers parse the arguments and build the replies; the layout (one member record per member), the
//! writes and the set algebra are [`crate::types::set`], SSCAN cursors `commands/coll.rs`, SRANDMEMBER's and
//! SPOP's picks [`crate::types::coll`].

use super::coll::{self, pick_count};
use super::{parse_intercard, syntax_error, Spec};
use crate::keys::Type;
use crate::notify;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::{self, set};
use bytes::Bytes;

pub static COMMANDS: &[Spec] = &[
    cmd! { "sadd", -3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(sadd), "Adds one or more members to a set." },
    cmd! { "srem", -3, WRITE | FAST, [1, 1, 1], Write(srem), "Removes one or more members from a set." },
    cmd! { "smembers", 2, READONLY, [1, 1, 1], Read(smembers), "Returns all members of a set." },
    cmd! { "sismember", 3, READONLY | FAST, [1, 1, 1], Read(sismember), "Determines whether a member belongs to a set." },
    cmd! { "smismember", -3, READONLY | FAST, [1, 1, 1], Read(smismember), "Determines whether multiple members belong to a set." },
    cmd! { "scard", 2, READONLY | FAST, [1, 1, 1], Read(scard), "Returns the number of members in a set." },
    cmd! { "spop", -2, WRITE | FAST, [1, 1, 1], Write(spop), "Returns one or more random members from a set after removing them." },
    cmd! { "srandmember", -2, READONLY, [1, 1, 1], Read(srandmember), "Get one or multiple random members from a set" },
    cmd! { "smove", 4, WRITE | FAST, [1, 2, 1], Write(smove), "Moves a member from one set to another." },
    cmd! { "sinter", -2, READONLY, [1, -1, 1], Read(sinter), "Returns the intersect of multiple sets." },
    cmd! { "sintercard", -3, READONLY, [0, 0, 0], Read(sintercard), "Returns the number of members of the intersect of multiple sets." },
    cmd! { "sinterstore", -3, WRITE | DENYOOM, [1, -1, 1], Write(sinterstore), "Stores the intersect of multiple sets in a key." },
    cmd! { "sunion", -2, READONLY, [1, -1, 1], Read(sunion), "Returns the union of multiple sets." },
    cmd! { "sunionstore", -3, WRITE | DENYOOM, [1, -1, 1], Write(sunionstore), "Stores the union of multiple sets in a key." },
    cmd! { "sdiff", -2, READONLY, [1, -1, 1], Read(sdiff), "Returns the difference of multiple sets." },
    cmd! { "sdiffstore", -3, WRITE | DENYOOM, [1, -1, 1], Write(sdiffstore), "Stores the difference of multiple sets in a key." },
    cmd! { "sscan", -3, READONLY, [1, 1, 1], Read(sscan), "Iterates over members of a set." },
];

fn members_reply(ms: impl IntoIterator<Item = Vec<u8>>) -> Reply {
    Reply::Set(ms.into_iter().map(|m| Reply::Bulk(Bytes::from(m))).collect())
}

// ---------------------------------------------------------------------------------------------------------
// Writes

fn sadd(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let added = tri!(set::add_members(ctx, &args[1], args[2..].iter()));
    if added > 0 {
        ctx.notify(notify::SET, "sadd", &args[1]);
    }
    Reply::Int(added as i64)
}

fn srem(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let removed = tri!(set::remove(ctx, &args[1], &args[2..]));
    if removed > 0 {
        ctx.notify_emptied(notify::SET, "srem", &args[1]);
    }
    Reply::Int(removed as i64)
}

/// `SPOP key [count]`.
fn spop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let count = match args.len() {
        2 => None,
        3 => match crate::resp::parse_i64(&args[2]) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Reply::err("value is out of range, must be positive"),
        },
        _ => return syntax_error(),
    };
    let Some(mut c) = tri!(set::get_mut(ctx, key)) else {
        return if count.is_some() { Reply::Set(Vec::new()) } else { Reply::Nil };
    };
    let picked = tri!(set::pop(ctx, key, &mut c, count.unwrap_or(1)));
    if !picked.is_empty() {
        ctx.notify_emptied(notify::SET, "spop", key);
    }
    match count {
        None => picked.into_iter().next().map_or(Reply::Nil, |m| Reply::Bulk(Bytes::from(m))),
        Some(_) => members_reply(picked),
    }
}

fn smove(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    // Redis's `sadd` event is for a member the destination did not have yet.
    let in_dst = ctx.notify_flags != 0
        && match set::get_mut(ctx, dst) {
            Ok(Some(c)) => set::is_member(&ctx.view(), &c, member).unwrap_or(false),
            _ => false,
        };
    let mark = ctx.events.len();
    let moved = tri!(set::move_member(ctx, src, dst, member));
    if moved && src != dst {
        // Redis's order: the source's `srem` (and `del`), then the destination's `new` that storing it staged.
        let created = ctx.events.split_off(mark);
        ctx.notify_emptied(notify::SET, "srem", src);
        ctx.events.extend(created);
        if !in_dst {
            ctx.notify(notify::SET, "sadd", dst);
        }
    }
    Reply::Int(moved as i64)
}

// ---------------------------------------------------------------------------------------------------------
// Reads

fn smembers(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(set::get(&ctx, &args[1])) else { return Reply::Set(Vec::new()) };
    members_reply(tri!(set::members(&ctx, &c)))
}

fn sismember(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(set::get(&ctx, &args[1])) else { return Reply::Int(0) };
    Reply::Int(tri!(set::is_member(&ctx, &c, &args[2])) as i64)
}

fn smismember(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let there = tri!(types::coll::member_values(ctx, &args[1], Type::Set, &args[2..]));
    Reply::Array(there.into_iter().map(|v| Reply::Int(v.is_some() as i64)).collect())
}

fn scard(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let c = tri!(set::get(ctx, &args[1]));
    Reply::Int(c.map_or(0, |c| c.size.min(i64::MAX as u64) as i64))
}

/// `SRANDMEMBER key [count]`.
fn srandmember(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let count = match args.len() {
        2 => None,
        3 => Some(tri!(pick_count(&args[2]))),
        _ => return syntax_error(),
    };
    let ctx = ctx.pinned();
    let c = tri!(set::get(&ctx, &args[1]));
    let Some(count) = count else {
        let Some(c) = c else { return Reply::Nil };
        let picked = tri!(set::random_members(&ctx, &c, 1, true));
        return picked.into_iter().next().map_or(Reply::Nil, |m| Reply::Bulk(Bytes::from(m)));
    };
    let Some(c) = c else { return Reply::Array(Vec::new()) };
    let (count, distinct) = tri!(coll::pick_bound(count));
    let picked = tri!(set::random_members(&ctx, &c, count, distinct));
    Reply::Array(picked.into_iter().map(|m| Reply::Bulk(Bytes::from(m))).collect())
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`: in Redis's order, the cursor, the key, the options.
fn sscan(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    tri!(super::arg_cursor(&args[2]));
    let ctx = ctx.pinned();
    let Some(c) = tri!(set::get(&ctx, &args[1])) else { return coll::scan_reply(0, Vec::new()) };
    let sa = tri!(coll::parse_scan_args(args, 2));
    let mut items = Vec::new();
    let next = tri!(coll::scan_members(&ctx, &c, &sa, |m, _| items.push(Reply::Bulk(Bytes::from(m)))));
    coll::scan_reply(next, items)
}

// ---------------------------------------------------------------------------------------------------------
// Set algebra

#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

fn compute(ctx: &ReadCtx<'_>, op: Op, names: &[Bytes]) -> Result<Vec<Vec<u8>>, set::Error> {
    match op {
        Op::Inter => set::inter(ctx, names, 0),
        Op::Union => set::union(ctx, names),
        Op::Diff => set::diff(ctx, names),
    }
}

fn read_op(ctx: &ReadCtx<'_>, args: &Args, op: Op) -> Reply {
    let ctx = ctx.pinned();
    match compute(&ctx, op, &args[1..]) {
        Ok(ms) => members_reply(ms),
        Err(e) => e.into(),
    }
}

fn sinter(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    read_op(ctx, args, Op::Inter)
}

fn sunion(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    read_op(ctx, args, Op::Union)
}

fn sdiff(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    read_op(ctx, args, Op::Diff)
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`.
fn sintercard(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let (n, limit) = tri!(parse_intercard(args));
    let ctx = ctx.pinned();
    match set::inter(&ctx, &args[2..2 + n], limit) {
        Ok(ms) => Reply::Int(ms.len() as i64),
        Err(e) => e.into(),
    }
}

fn store_op(ctx: &mut WriteCtx<'_>, args: &Args, op: Op) -> Reply {
    let dst = &args[1];
    tri!(types::coll::check_key(dst));
    // The sources are read as Redis reads them (a missing one is a `keymiss`).
    let result = tri!(ctx.run_read(|view| compute(view, op, &args[2..])));
    let existed = ctx.notify_flags != 0 && ctx.stored_now(dst);
    ctx.replacing = existed.then(|| dst.clone());
    let stored = set::store(ctx, dst, &result);
    ctx.replacing = None;
    let n = tri!(stored);
    if n > 0 {
        let event = match op {
            Op::Inter => "sinterstore",
            Op::Union => "sunionstore",
            Op::Diff => "sdiffstore",
        };
        ctx.notify(notify::SET, event, dst);
    } else if existed {
        ctx.notify(notify::GENERIC, "del", dst);
    }
    Reply::Int(n.min(i64::MAX as u64) as i64)
}

fn sinterstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    store_op(ctx, args, Op::Inter)
}

fn sunionstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    store_op(ctx, args, Op::Union)
}

fn sdiffstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    store_op(ctx, args, Op::Diff)
}
