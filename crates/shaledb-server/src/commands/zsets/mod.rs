//! Sorted-set commands: ZADD (NX/XX/GT/LT/CH/INCR), ZREM, ZSCORE, ZMSCORE, ZINCRBY, ZCARD, ZCOUNT, ZLEXCOUNT,
//! ZRANK, ZREVRANK, ZRANGE (BYSCORE/BYLEX/REV/LIMIT/WITHSCORES), ZRANGEBYSCORE, ZREVRANGEBYSCORE,
//! ZRANGEBYLEX, ZREVRANGEBYLEX, ZREVRANGE, ZRANGESTORE, ZPOPMIN, ZPOPMAX, ZMPOP, BZPOPMIN, BZPOPMAX, BZMPOP,
//! ZREMRANGEBYRANK/BYSCORE/BYLEX, ZUNIONSTORE, ZINTERSTORE, ZUNION, ZINTER, ZDIFF, ZDIFFSTORE, ZINTERCARD, ZRANDMEMBER, ZSCAN.
//!
//! These handlers parse the arguments and build the replies; the layout (member records and the score index,
//! docs/format/server-keys.md, "Sorted sets") and the reads and writes on it are [`crate::types::zset`].
//!
//! Files by role: this one has the command table, ZADD ... ZREVRANK, the pops and ZREMRANGEBY*; `range.rs`
//! ZRANGE and its forms, `setops.rs` ZUNION/ZINTER/ZDIFF, `scan.rs` ZRANDMEMBER and ZSCAN; `parse.rs` reads
//! scores and ranges as Redis does.

use super::{arg_i64, syntax_error, Spec};
use crate::notify;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::zset::{self, Added, LexRange, ScoreRange};
use bytes::Bytes;
use parse::{double, not_float, parse_score};

mod parse;
mod range;
mod scan;
mod setops;

use range::{
    items_reply, zrange, zrangebylex, zrangebyscore, zrangestore, zrevrange, zrevrangebylex, zrevrangebyscore,
};
use scan::{zrandmember, zscan};
use setops::{zdiff, zdiffstore, zinter, zintercard, zinterstore, zunion, zunionstore};

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    cmd! { "zadd", -4, WRITE | DENYOOM | FAST, [1, 1, 1], Write(zadd), "Adds members to a sorted set, or updates their scores." },
    cmd! { "zrem", -3, WRITE | FAST, [1, 1, 1], Write(zrem), "Removes members from a sorted set." },
    cmd! { "zscore", 3, READONLY | FAST, [1, 1, 1], Read(zscore), "Returns the score of a member of a sorted set." },
    cmd! { "zmscore", -3, READONLY | FAST, [1, 1, 1], Read(zmscore), "Returns the scores of members of a sorted set." },
    cmd! { "zincrby", 4, WRITE | DENYOOM | FAST, [1, 1, 1], Write(zincrby), "Increments the score of a member of a sorted set." },
    cmd! { "zcard", 2, READONLY | FAST, [1, 1, 1], Read(zcard), "Returns the number of members in a sorted set." },
    cmd! { "zcount", 4, READONLY | FAST, [1, 1, 1], Read(zcount), "Returns the count of members with scores within a range." },
    cmd! { "zlexcount", 4, READONLY | FAST, [1, 1, 1], Read(zlexcount), "Returns the number of members within a lexicographical range." },
    cmd! { "zrank", 3, READONLY | FAST, [1, 1, 1], Read(zrank), "Returns the index of a member ordered by ascending scores." },
    cmd! { "zrevrank", 3, READONLY | FAST, [1, 1, 1], Read(zrevrank), "Returns the index of a member ordered by descending scores." },
    cmd! { "zrange", -4, READONLY, [1, 1, 1], Read(zrange), "Returns members in a range of indexes, scores or names." },
    cmd! { "zrangebyscore", -4, READONLY, [1, 1, 1], Read(zrangebyscore), "Returns members within a range of scores." },
    cmd! { "zrevrangebyscore", -4, READONLY, [1, 1, 1], Read(zrevrangebyscore), "Returns members within a range of scores, highest first." },
    cmd! { "zrangebylex", -4, READONLY, [1, 1, 1], Read(zrangebylex), "Returns members within a lexicographical range." },
    cmd! { "zrevrangebylex", -4, READONLY, [1, 1, 1], Read(zrevrangebylex), "Returns members within a lexicographical range, in reverse order." },
    cmd! { "zrevrange", -4, READONLY, [1, 1, 1], Read(zrevrange), "Returns members in a range of indexes, highest score first." },
    cmd! { "zrangestore", -5, WRITE | DENYOOM, [1, 2, 1], Write(zrangestore), "Stores a range of members of a sorted set in a key." },
    cmd! { "zpopmin", -2, WRITE | FAST, [1, 1, 1], Write(zpopmin), "Removes and returns the members with the lowest scores." },
    cmd! { "zpopmax", -2, WRITE | FAST, [1, 1, 1], Write(zpopmax), "Removes and returns the members with the highest scores." },
    cmd! { "bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, [1, -2, 1], Write(bzpopmin), "Removes and returns the member with the lowest score from one of multiple sorted sets. Blocks until a member is available otherwise." },
    cmd! { "bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, [1, -2, 1], Write(bzpopmax), "Removes and returns the member with the highest score from one of multiple sorted sets. Blocks until a member is available otherwise." },
    cmd! { "zmpop", -4, WRITE, [0, 0, 0], Write(zmpop), "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped." },
    cmd! { "bzmpop", -5, WRITE | BLOCKING, [0, 0, 0], Write(bzmpop), "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped." },
    cmd! { "zremrangebyrank", 4, WRITE, [1, 1, 1], Write(zremrangebyrank), "Removes the members within a range of indexes." },
    cmd! { "zremrangebyscore", 4, WRITE, [1, 1, 1], Write(zremrangebyscore), "Removes the members within a range of scores." },
    cmd! { "zremrangebylex", 4, WRITE, [1, 1, 1], Write(zremrangebylex), "Removes the members within a lexicographical range." },
    cmd! { "zunionstore", -4, WRITE | DENYOOM, [1, 1, 1], Write(zunionstore), "Stores the union of sorted sets in a key." },
    cmd! { "zinterstore", -4, WRITE | DENYOOM, [1, 1, 1], Write(zinterstore), "Stores the intersection of sorted sets in a key." },
    cmd! { "zdiffstore", -4, WRITE | DENYOOM, [1, 1, 1], Write(zdiffstore), "Stores the difference of sorted sets in a key." },
    cmd! { "zunion", -3, READONLY, [0, 0, 0], Read(zunion), "Returns the union of sorted sets." },
    cmd! { "zinter", -3, READONLY, [0, 0, 0], Read(zinter), "Returns the intersection of sorted sets." },
    cmd! { "zdiff", -3, READONLY, [0, 0, 0], Read(zdiff), "Returns the difference of sorted sets." },
    cmd! { "zintercard", -3, READONLY, [0, 0, 0], Read(zintercard), "Returns the number of members in the intersection of sorted sets." },
    cmd! { "zrandmember", -2, READONLY, [1, 1, 1], Read(zrandmember), "Returns random members of a sorted set." },
    cmd! { "zscan", -3, READONLY, [1, 1, 1], Read(zscan), "Iterates over members and scores of a sorted set." },
];

// ---------------------------------------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD

fn zadd(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let mut f = zset::AddFlags::default();
    let mut ch = false;
    let mut j = 2;
    while j < args.len() {
        match &args[j].to_ascii_uppercase()[..] {
            b"NX" => f.nx = true,
            b"XX" => f.xx = true,
            b"GT" => f.gt = true,
            b"LT" => f.lt = true,
            b"CH" => ch = true,
            b"INCR" => f.incr = true,
            _ => break,
        }
        j += 1;
    }
    let rest = &args[j..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return syntax_error();
    }
    if f.nx && f.xx {
        return Reply::err("XX and NX options at the same time are not compatible");
    }
    if (f.gt || f.lt) && (f.nx || (f.gt && f.lt)) {
        return Reply::err("GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && rest.len() > 2 {
        return Reply::err("INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks(2) {
        let Some(s) = parse_score(&p[0]) else { return not_float() };
        tri!(zset::check_member(&p[1]));
        pairs.push((s, &p[1][..]));
    }
    let Some(outcomes) = tri!(zset::add(ctx, &args[1], &f, &pairs)) else {
        return if f.incr { Reply::Nil } else { Reply::Int(0) };
    };
    let (mut added, mut changed) = (0i64, 0i64);
    let mut incr_reply = Reply::Nil;
    for (r, (score, _)) in outcomes.into_iter().zip(&pairs) {
        match r {
            Added::New => {
                added += 1;
                incr_reply = double(*score);
            }
            Added::Updated(s) => {
                changed += 1;
                incr_reply = double(s);
            }
            Added::Same(s) => incr_reply = double(s),
            Added::Nop => incr_reply = Reply::Nil,
        }
    }
    if added + changed > 0 {
        ctx.notify(notify::ZSET, if f.incr { "zincr" } else { "zadd" }, &args[1]);
    }
    if f.incr {
        incr_reply
    } else {
        Reply::Int(if ch { added + changed } else { added })
    }
}

fn zincrby(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let Some(by) = parse_score(&args[2]) else { return not_float() };
    tri!(zset::check_member(&args[3]));
    let outcome = tri!(zset::incr(ctx, &args[1], by, &args[3]));
    if matches!(outcome, Added::New | Added::Updated(_)) {
        ctx.notify(notify::ZSET, "zincr", &args[1]);
    }
    match outcome {
        Added::New => double(by),
        Added::Updated(s) | Added::Same(s) => double(s),
        Added::Nop => Reply::Nil,
    }
}

fn zrem(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let removed = tri!(zset::remove_members(ctx, &args[1], &args[2..]));
    if removed > 0 {
        ctx.notify_emptied(notify::ZSET, "zrem", &args[1]);
    }
    Reply::Int(removed as i64)
}

fn zscore(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(zset::get(&ctx, &args[1])) else { return Reply::Nil };
    tri!(zset::score(&ctx, &c, &args[2])).map_or(Reply::Nil, double)
}

fn zmscore(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let c = tri!(zset::get(&ctx, &args[1]));
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        out.push(match &c {
            Some(c) => tri!(zset::score(&ctx, c, m)).map_or(Reply::Nil, double),
            None => Reply::Nil,
        });
    }
    Reply::Array(out)
}

fn zcard(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    Reply::Int(tri!(zset::get(ctx, &args[1])).map_or(0, |c| c.size as i64))
}

// ---------------------------------------------------------------------------------------------------------
// ZCOUNT, ZLEXCOUNT, ZRANK, ZREVRANK

fn zcount(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let r = tri!(ScoreRange::parse(&args[2], &args[3]));
    let ctx = ctx.pinned();
    let Some(c) = tri!(zset::get(&ctx, &args[1])) else { return Reply::Int(0) };
    Reply::Int(tri!(zset::count_by_score(&ctx, &c, &r)) as i64)
}

fn zlexcount(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let r = tri!(LexRange::parse(&args[2], &args[3]));
    let ctx = ctx.pinned();
    let Some(c) = tri!(zset::get(&ctx, &args[1])) else { return Reply::Int(0) };
    let mut n = 0i64;
    tri!(zset::for_each_lex(&ctx, &c, &r, false, |_| {
        n += 1;
        Ok(true)
    }));
    Reply::Int(n)
}

fn rank_generic(ctx: &ReadCtx<'_>, args: &Args, rev: bool) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(zset::get(&ctx, &args[1])) else { return Reply::Nil };
    let Some(s) = tri!(zset::score(&ctx, &c, &args[2])) else { return Reply::Nil };
    let r = tri!(zset::rank_of(&ctx, &c, s, &args[2]));
    Reply::Int(if rev { c.size - 1 - r } else { r } as i64)
}

fn zrank(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    rank_generic(ctx, args, false)
}

fn zrevrank(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    rank_generic(ctx, args, true)
}

// ---------------------------------------------------------------------------------------------------------
// ZRANGE and its older forms, ZRANGESTORE

// ---------------------------------------------------------------------------------------------------------
// ZPOPMIN, ZPOPMAX, ZREMRANGEBY*

fn pop_generic(ctx: &mut WriteCtx<'_>, args: &Args, max: bool) -> Reply {
    if args.len() > 3 {
        return syntax_error();
    }
    let count = tri!(super::lists::pop_count(args.get(2)));
    let Some(items) = tri!(zset::pop(ctx, &args[1], max, count.unwrap_or(1))) else {
        return Reply::Array(Vec::new());
    };
    if !items.is_empty() {
        ctx.notify_emptied(notify::ZSET, pop_event(max), &args[1]);
    }
    match count {
        None => {
            let mut flat = Vec::with_capacity(2);
            for (m, s) in items {
                flat.push(Reply::Bulk(m.into()));
                flat.push(double(s));
            }
            Reply::Array(flat)
        }
        Some(_) => items_reply(items, true),
    }
}

/// The events of a command that stored a result in `dst`: `event` when the result is not empty (`stored`),
/// else `del` when it replaced a key (an empty result deletes the destination).
pub(super) fn notify_store(ctx: &mut WriteCtx<'_>, dst: &[u8], stored: bool, existed: bool, event: &'static str) {
    if stored {
        ctx.notify(notify::ZSET, event, dst);
    } else if existed {
        ctx.notify(notify::GENERIC, "del", dst);
    }
}

/// The event of a pop of the lowest or (`max`) highest members.
fn pop_event(max: bool) -> &'static str {
    if max {
        "zpopmax"
    } else {
        "zpopmin"
    }
}

fn zpopmin(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    pop_generic(ctx, args, false)
}

fn zpopmax(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    pop_generic(ctx, args, true)
}

/// BZPOPMIN/BZPOPMAX: the first key (in argument order) holding a sorted set gives its lowest (highest)
/// member: `[key, member, score]`; nil when none has one (the connection then blocks, see blocking.rs).
fn bzpop_generic(ctx: &mut WriteCtx<'_>, args: &Args, max: bool) -> Reply {
    tri!(super::lists::parse_timeout_secs(&args[args.len() - 1]));
    for key in &args[1..args.len() - 1] {
        let Some((m, s)) = tri!(zset::pop_one(ctx, key, max)) else { continue };
        ctx.notify_emptied(notify::ZSET, pop_event(max), key);
        return Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(m.into()), double(s)]);
    }
    Reply::NilArray
}

fn bzpopmin(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    bzpop_generic(ctx, args, false)
}

fn bzpopmax(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    bzpop_generic(ctx, args, true)
}

/// The parsed tail of ZMPOP/BZMPOP: `numkeys key... MIN|MAX [COUNT n]` from `args[at]`.
struct Mpop<'a> {
    keys: &'a [Bytes],
    max: bool,
    count: u64,
}

/// Parses ZMPOP's arguments in Redis's order: numkeys, the side, COUNT.
fn parse_mpop(args: &Args, at: usize) -> Result<Mpop<'_>, Reply> {
    let bad_numkeys = || Reply::err("numkeys should be greater than 0");
    let n = crate::resp::parse_i64(&args[at]).ok_or_else(bad_numkeys)?;
    if n <= 0 {
        return Err(bad_numkeys());
    }
    let first = at + 1;
    if n as u64 >= (args.len() - first) as u64 {
        return Err(syntax_error());
    }
    let n = n as usize;
    let max = match super::either(&args[first + n], b"MAX", b"MIN") {
        Some(m) => m,
        None => return Err(syntax_error()),
    };
    let mut count = None;
    let mut j = first + n + 1;
    while j < args.len() {
        if count.is_none() && args[j].eq_ignore_ascii_case(b"COUNT") && j + 1 < args.len() {
            match crate::resp::parse_i64(&args[j + 1]) {
                Some(c) if c > 0 => count = Some(c as u64),
                _ => return Err(Reply::err("count should be greater than 0")),
            }
            j += 2;
        } else {
            return Err(syntax_error());
        }
    }
    Ok(Mpop { keys: &args[first..first + n], max, count: count.unwrap_or(1) })
}

/// ZMPOP and BZMPOP: the first key that exists (type-checked; the later ones are not looked at) gives up to
/// `count` members: `[key, [[member, score] ...]]`; nil when none exists.
fn mpop_generic(ctx: &mut WriteCtx<'_>, m: &Mpop<'_>) -> Reply {
    for key in m.keys {
        let Some(items) = tri!(zset::pop(ctx, key, m.max, m.count)) else { continue };
        if items.is_empty() {
            continue;
        }
        ctx.notify_emptied(notify::ZSET, pop_event(m.max), key);
        let pairs = items.into_iter().map(|(mb, s)| Reply::Array(vec![Reply::Bulk(mb.into()), double(s)]));
        return Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Array(pairs.collect())]);
    }
    Reply::NilArray
}

fn zmpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let m = tri!(parse_mpop(args, 1));
    mpop_generic(ctx, &m)
}

fn bzmpop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let m = tri!(parse_mpop(args, 2));
    tri!(super::lists::parse_timeout_secs(&args[1]));
    mpop_generic(ctx, &m)
}

/// The keys BZPOPMIN/BZPOPMAX/BZMPOP wait on and the timeout (`None`: forever), for the wake-up registry.
pub fn blocking_keys(args: &Args) -> Option<(Vec<Bytes>, Option<std::time::Duration>)> {
    let n = args.len();
    if args[0].eq_ignore_ascii_case(b"bzmpop") {
        let t = super::lists::parse_timeout_secs(&args[1]).ok()?;
        return Some((parse_mpop(args, 2).ok()?.keys.to_vec(), t));
    }
    let t = super::lists::parse_timeout_secs(&args[n - 1]).ok()?;
    Some((args[1..n - 1].to_vec(), t))
}

/// ZREMRANGEBY*: removes the items a range names and answers their count (`event` is the command's name).
fn remove_range(ctx: &mut WriteCtx<'_>, key: &[u8], r: zset::Range, event: &'static str) -> Reply {
    let removed = tri!(zset::remove_range(ctx, key, &r));
    if removed > 0 {
        ctx.notify_emptied(notify::ZSET, event, key);
    }
    Reply::Int(removed as i64)
}

fn zremrangebyrank(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (s, e) = (tri!(arg_i64(&args[2])), tri!(arg_i64(&args[3])));
    remove_range(ctx, &args[1], zset::Range::Rank(s, e), "zremrangebyrank")
}

fn zremrangebyscore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let r = tri!(ScoreRange::parse(&args[2], &args[3]));
    remove_range(ctx, &args[1], zset::Range::Score(r), "zremrangebyscore")
}

fn zremrangebylex(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let r = tri!(LexRange::parse(&args[2], &args[3]));
    remove_range(ctx, &args[1], zset::Range::Lex(r), "zremrangebylex")
}

// ---------------------------------------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF (and their STORE forms), ZINTERCARD

// ---------------------------------------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN
