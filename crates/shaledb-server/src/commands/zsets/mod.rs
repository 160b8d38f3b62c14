//! Sorted-set commands: ZADD (NX/XX/GT/LT/CH/INCR), ZREM, ZSCORE, ZMSCORE, ZINCRBY, ZCARD, ZCOUNT, ZLEXCOUNT,
//! ZRANK, ZREVRANK, ZRANGE (BYSCORE/BYLEX/REV/LIMIT/WITHSCORES), ZRANGEBYSCORE, ZREVRANGEBYSCORE,
//! ZRANGEBYLEX, ZREVRANGEBYLEX, ZREVRANGE, ZRANGESTORE, ZPOPMIN, ZPOPMAX, ZREMRANGEBYRANK/BYSCORE/BYLEX,
//! ZUNIONSTORE, ZINTERSTORE, ZUNION, ZINTER, ZDIFF, ZDIFFSTORE, ZINTERCARD, ZRANDMEMBER, ZSCAN.
//!
//! Layout (docs/format/server-keys.md, "Sorted sets"):
//!
//! ```text
//! member record := db 0x01 version 0x00 member            -> sortable_score:8
//! score index   := db 0x01 version 0x01 sortable_score:8 member -> (empty)
//! ```
//!
//! `sortable_score` is [`crate::keys::score_to_sortable`]: byte order is numeric order, -inf to +inf, with -0 stored
//! as +0. Both records of a member are written by the same command (the same batch), so the score index is
//! the sorted set in Redis order (score, then member bytes) and every range is an ordered scan.
//!
//! Costs: ZSCORE/ZADD/ZREM/ZINCRBY are point reads and writes per member. Ranges by score or lex cost the
//! seek plus the entries returned (plus LIMIT's offset). Ranks are not stored: ZRANK and ZRANGE by index
//! count entries, from whichever end of the set is nearer, so they cost O(min(rank, size - rank)).
//! ZCOUNT and ZLEXCOUNT cost O(entries counted).
//!
//! Files by role: this one has the command table, ZADD ... ZREVRANK, the pops and ZREMRANGEBY*; `range.rs`
//! ZRANGE and its forms, `setops.rs` ZUNION/ZINTER/ZDIFF, `scan.rs` ZRANDMEMBER and ZSCAN; the score index and
//! its walks are in `commands/zset_index.rs`.

use super::flags::*;
use super::strings::spec;
use super::zset_index::*;
use super::{arg_i64, syntax_error, Handler, Spec};
use crate::keys::{Coll, Type};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;

mod range;
mod scan;
mod setops;

use range::{
    items_reply, run_range, zrange, zrangebylex, zrangebyscore, zrangestore, zrevrange, zrevrangebylex,
    zrevrangebyscore, By, RangeReq, RangeSpec,
};
pub use scan::MAX_RANDMEMBER_REPEATS;
use scan::{zrandmember, zscan};
use setops::{zdiff, zdiffstore, zinter, zintercard, zinterstore, zunion, zunionstore};

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    spec!("zadd", -4, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(zadd), "Adds members to a sorted set, or updates their scores."),
    spec!("zrem", -3, WRITE | FAST, 1, 1, 1, Handler::Write(zrem), "Removes members from a sorted set."),
    spec!("zscore", 3, READONLY | FAST, 1, 1, 1, Handler::Read(zscore), "Returns the score of a member of a sorted set."),
    spec!("zmscore", -3, READONLY | FAST, 1, 1, 1, Handler::Read(zmscore), "Returns the scores of members of a sorted set."),
    spec!("zincrby", 4, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(zincrby), "Increments the score of a member of a sorted set."),
    spec!("zcard", 2, READONLY | FAST, 1, 1, 1, Handler::Read(zcard), "Returns the number of members in a sorted set."),
    spec!("zcount", 4, READONLY | FAST, 1, 1, 1, Handler::Read(zcount), "Returns the count of members with scores within a range."),
    spec!("zlexcount", 4, READONLY | FAST, 1, 1, 1, Handler::Read(zlexcount), "Returns the number of members within a lexicographical range."),
    spec!("zrank", 3, READONLY | FAST, 1, 1, 1, Handler::Read(zrank), "Returns the index of a member ordered by ascending scores."),
    spec!("zrevrank", 3, READONLY | FAST, 1, 1, 1, Handler::Read(zrevrank), "Returns the index of a member ordered by descending scores."),
    spec!("zrange", -4, READONLY, 1, 1, 1, Handler::Read(zrange), "Returns members in a range of indexes, scores or names."),
    spec!("zrangebyscore", -4, READONLY, 1, 1, 1, Handler::Read(zrangebyscore), "Returns members within a range of scores."),
    spec!("zrevrangebyscore", -4, READONLY, 1, 1, 1, Handler::Read(zrevrangebyscore), "Returns members within a range of scores, highest first."),
    spec!("zrangebylex", -4, READONLY, 1, 1, 1, Handler::Read(zrangebylex), "Returns members within a lexicographical range."),
    spec!("zrevrangebylex", -4, READONLY, 1, 1, 1, Handler::Read(zrevrangebylex), "Returns members within a lexicographical range, in reverse order."),
    spec!("zrevrange", -4, READONLY, 1, 1, 1, Handler::Read(zrevrange), "Returns members in a range of indexes, highest score first."),
    spec!("zrangestore", -5, WRITE | DENYOOM, 1, 2, 1, Handler::Write(zrangestore), "Stores a range of members of a sorted set in a key."),
    spec!("zpopmin", -2, WRITE | FAST, 1, 1, 1, Handler::Write(zpopmin), "Removes and returns the members with the lowest scores."),
    spec!("zpopmax", -2, WRITE | FAST, 1, 1, 1, Handler::Write(zpopmax), "Removes and returns the members with the highest scores."),
    spec!("bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, 1, -2, 1, Handler::Write(bzpopmin), "Removes and returns the member with the lowest score from one of multiple sorted sets. Blocks until a member is available otherwise."),
    spec!("bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, 1, -2, 1, Handler::Write(bzpopmax), "Removes and returns the member with the highest score from one of multiple sorted sets. Blocks until a member is available otherwise."),
    spec!("zremrangebyrank", 4, WRITE, 1, 1, 1, Handler::Write(zremrangebyrank), "Removes the members within a range of indexes."),
    spec!("zremrangebyscore", 4, WRITE, 1, 1, 1, Handler::Write(zremrangebyscore), "Removes the members within a range of scores."),
    spec!("zremrangebylex", 4, WRITE, 1, 1, 1, Handler::Write(zremrangebylex), "Removes the members within a lexicographical range."),
    spec!("zunionstore", -4, WRITE | DENYOOM, 1, 1, 1, Handler::Write(zunionstore), "Stores the union of sorted sets in a key."),
    spec!("zinterstore", -4, WRITE | DENYOOM, 1, 1, 1, Handler::Write(zinterstore), "Stores the intersection of sorted sets in a key."),
    spec!("zdiffstore", -4, WRITE | DENYOOM, 1, 1, 1, Handler::Write(zdiffstore), "Stores the difference of sorted sets in a key."),
    spec!("zunion", -3, READONLY, 0, 0, 0, Handler::Read(zunion), "Returns the union of sorted sets."),
    spec!("zinter", -3, READONLY, 0, 0, 0, Handler::Read(zinter), "Returns the intersection of sorted sets."),
    spec!("zdiff", -3, READONLY, 0, 0, 0, Handler::Read(zdiff), "Returns the difference of sorted sets."),
    spec!("zintercard", -3, READONLY, 0, 0, 0, Handler::Read(zintercard), "Returns the number of members in the intersection of sorted sets."),
    spec!("zrandmember", -2, READONLY, 1, 1, 1, Handler::Read(zrandmember), "Returns random members of a sorted set."),
    spec!("zscan", -3, READONLY, 1, 1, 1, Handler::Read(zscan), "Iterates over members and scores of a sorted set."),
];

// ---------------------------------------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// The outcome of adding one element.
enum Added {
    New,
    Updated(f64),
    Same(f64),
    /// Not done (NX/XX/GT/LT said no).
    Nop,
}

/// Adds or updates one member as ZADD does (the flags' rules, NaN check for INCR).
fn zadd_one(
    ctx: &mut WriteCtx<'_>,
    c: &mut Coll,
    f: &ZaddFlags,
    score: f64,
    member: &[u8],
    buf: &mut Vec<u8>,
) -> Result<Added, Reply> {
    match score_w(ctx, c, member)? {
        Some(cur) => {
            if f.nx {
                return Ok(Added::Nop);
            }
            let new = if f.incr { cur + score } else { score };
            if new.is_nan() {
                return Err(nan_result());
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

fn zadd(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let mut f = ZaddFlags::default();
    let mut j = 2;
    while j < args.len() {
        match &args[j].to_ascii_uppercase()[..] {
            b"NX" => f.nx = true,
            b"XX" => f.xx = true,
            b"GT" => f.gt = true,
            b"LT" => f.lt = true,
            b"CH" => f.ch = true,
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
        tri!(check_member(&p[1]));
        pairs.push((s, &p[1]));
    }
    let mut c = match tri!(ctx.get_coll(&args[1], Type::ZSet)) {
        Some(c) => c,
        None if f.xx => return if f.incr { Reply::Nil } else { Reply::Int(0) },
        None => ctx.create_coll(&args[1], Type::ZSet),
    };
    let mut buf = Vec::new();
    let (mut added, mut changed) = (0i64, 0i64);
    let mut incr_reply = Reply::Nil;
    for (score, member) in pairs {
        let r = match zadd_one(ctx, &mut c, &f, score, member, &mut buf) {
            Ok(r) => r,
            Err(e) => {
                // Only INCR can fail here (one pair): nothing was written for it; keep what exists.
                tri!(ctx.put_coll(&args[1], &c));
                return e;
            }
        };
        match r {
            Added::New => {
                added += 1;
                incr_reply = double(score);
            }
            Added::Updated(s) => {
                changed += 1;
                incr_reply = double(s);
            }
            Added::Same(s) => incr_reply = double(s),
            Added::Nop => incr_reply = Reply::Nil,
        }
    }
    tri!(ctx.put_coll(&args[1], &c));
    if added > 0 {
        ctx.signal_key(&args[1]);
    }
    if f.incr {
        incr_reply
    } else {
        Reply::Int(if f.ch { added + changed } else { added })
    }
}

fn zincrby(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let Some(by) = parse_score(&args[2]) else { return not_float() };
    tri!(check_member(&args[3]));
    let mut c = match tri!(ctx.get_coll(&args[1], Type::ZSet)) {
        Some(c) => c,
        None => ctx.create_coll(&args[1], Type::ZSet),
    };
    let f = ZaddFlags { incr: true, ..ZaddFlags::default() };
    let mut buf = Vec::new();
    let r = match zadd_one(ctx, &mut c, &f, by, &args[3], &mut buf) {
        Ok(r) => r,
        Err(e) => return e,
    };
    tri!(ctx.put_coll(&args[1], &c));
    if matches!(r, Added::New) {
        ctx.signal_key(&args[1]);
    }
    match r {
        Added::New => double(by),
        Added::Updated(s) | Added::Same(s) => double(s),
        Added::Nop => Reply::Nil,
    }
}

fn zrem(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let Some(mut c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else { return Reply::Int(0) };
    let mut buf = Vec::new();
    let mut n = 0;
    for m in &args[2..] {
        if let Some(s) = tri!(score_w(ctx, &c, m)) {
            remove(ctx, &mut c, m, s, &mut buf);
            n += 1;
        }
    }
    if n > 0 {
        tri!(ctx.put_coll(&args[1], &c));
    }
    Reply::Int(n)
}

fn zscore(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else { return Reply::Nil };
    tri!(score_r(&ctx, &c, &args[2])).map_or(Reply::Nil, double)
}

fn zmscore(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let c = tri!(ctx.get_coll(&args[1], Type::ZSet));
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        out.push(match &c {
            Some(c) => tri!(score_r(&ctx, c, m)).map_or(Reply::Nil, double),
            None => Reply::Nil,
        });
    }
    Reply::Array(out)
}

fn zcard(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    Reply::Int(tri!(ctx.get_coll(&args[1], Type::ZSet)).map_or(0, |c| c.size as i64))
}

// ---------------------------------------------------------------------------------------------------------
// ZCOUNT, ZLEXCOUNT, ZRANK, ZREVRANK

fn zcount(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let r = tri!(ScoreRange::parse(&args[2], &args[3]));
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else { return Reply::Int(0) };
    Reply::Int(tri!(count_by_score(&ctx, &c, &r)))
}

fn zlexcount(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let r = tri!(LexRange::parse(&args[2], &args[3]));
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else { return Reply::Int(0) };
    let mut n = 0i64;
    tri!(for_each_lex(&ctx, &c, &r, false, |_| {
        n += 1;
        Ok(true)
    }));
    Reply::Int(n)
}

fn rank_generic(ctx: &ReadCtx<'_>, args: &Args, rev: bool) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else { return Reply::Nil };
    let Some(s) = tri!(score_r(&ctx, &c, &args[2])) else { return Reply::Nil };
    let r = tri!(rank_of(&ctx, &c, s, &args[2]));
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
    let count = match args.get(2) {
        Some(a) => match crate::resp::parse_i64(a) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Reply::err("value is out of range, must be positive"),
        },
        None => None,
    };
    let Some(mut c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else { return Reply::Array(Vec::new()) };
    let n = count.unwrap_or(1).min(c.size);
    if n == 0 {
        return Reply::Array(Vec::new());
    }
    let items = {
        let (lower, upper) = pop_range(ctx, &c);
        let v = ctx.view();
        let mut out = Vec::new();
        for item in v.scan(&lower, &upper, max).take(n as usize) {
            tri!(push_item(&mut out, &tri!(item).0));
        }
        out
    };
    let mut buf = Vec::new();
    for (m, s) in &items {
        remove(ctx, &mut c, m, *s, &mut buf);
    }
    if !items.is_empty() {
        // `buf` holds the last popped item's part: every part beyond it from this end is gone now.
        note_popped(ctx, &c, max, &buf);
    }
    tri!(ctx.put_coll(&args[1], &c));
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
        let Some(mut c) = tri!(ctx.get_coll(key, Type::ZSet)) else { continue };
        let first = {
            let (lower, upper) = pop_range(ctx, &c);
            let v = ctx.view();
            let mut out = Vec::new();
            if let Some(item) = v.scan(&lower, &upper, max).next() {
                tri!(push_item(&mut out, &tri!(item).0));
            }
            out.pop()
        };
        let Some((m, s)) = first else { continue };
        let mut buf = Vec::new();
        remove(ctx, &mut c, &m, s, &mut buf);
        note_popped(ctx, &c, max, &buf);
        tri!(ctx.put_coll(key, &c));
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

/// The keys BZPOPMIN/BZPOPMAX wait on and the timeout (`None`: forever), for the wake-up registry.
pub fn blocking_keys(args: &Args) -> Option<(Vec<Bytes>, Option<std::time::Duration>)> {
    let n = args.len();
    let t = super::lists::parse_timeout_secs(&args[n - 1]).ok()?;
    Some((args[1..n - 1].to_vec(), t))
}

/// Removes the items a range names (collected first through the group's view) and answers their count.
fn remove_range(ctx: &mut WriteCtx<'_>, key: &[u8], spec: RangeSpec) -> Reply {
    let Some(mut c) = tri!(ctx.get_coll(key, Type::ZSet)) else { return Reply::Int(0) };
    let q = RangeReq { by: By::Rank, rev: false, withscores: false, limit: None, a: Bytes::new(), b: Bytes::new() };
    let items = tri!(run_range(&ctx.view(), &c, &q, &spec));
    let mut buf = Vec::new();
    for (m, s) in &items {
        remove(ctx, &mut c, m, *s, &mut buf);
    }
    if !items.is_empty() {
        tri!(ctx.put_coll(key, &c));
    }
    Reply::Int(items.len() as i64)
}

fn zremrangebyrank(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (s, e) = (tri!(arg_i64(&args[2])), tri!(arg_i64(&args[3])));
    remove_range(ctx, &args[1], RangeSpec::Rank(s, e))
}

fn zremrangebyscore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let r = tri!(ScoreRange::parse(&args[2], &args[3]));
    remove_range(ctx, &args[1], RangeSpec::Score(r))
}

fn zremrangebylex(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let r = tri!(LexRange::parse(&args[2], &args[3]));
    remove_range(ctx, &args[1], RangeSpec::Lex(r))
}

// ---------------------------------------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF (and their STORE forms), ZINTERCARD

// ---------------------------------------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN
