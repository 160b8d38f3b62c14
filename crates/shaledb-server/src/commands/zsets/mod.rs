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
//! `sortable_score` is [`keys::score_to_sortable`]: byte order is numeric order, -inf to +inf, with -0 stored
//! as +0. Both records of a member are written by the same command (the same batch), so the score index is
//! the sorted set in Redis order (score, then member bytes) and every range is an ordered scan.
//!
//! Costs: ZSCORE/ZADD/ZREM/ZINCRBY are point reads and writes per member. Ranges by score or lex cost the
//! seek plus the entries returned (plus LIMIT's offset). Ranks are not stored: ZRANK and ZRANGE by index
//! count entries, from whichever end of the set is nearer, so they cost O(min(rank, size - rank)).
//! ZCOUNT and ZLEXCOUNT cost O(entries counted).

use super::flags::*;
use super::strings::spec;
use super::zset_index::*;
use super::{arg_i64, syntax_error, Handler, Spec};
use crate::keys::{Coll, Type, SUB_MEMBER};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;
use parking_lot::Mutex;
use rand::Rng;
use std::sync::OnceLock;

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

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum By {
    Rank,
    Score,
    Lex,
}

/// A parsed range request.
#[derive(Debug)]
struct RangeReq {
    by: By,
    rev: bool,
    withscores: bool,
    limit: Option<Limit>,
    /// The range arguments, already swapped for REV of BYSCORE/BYLEX (`a` is the low end).
    a: Bytes,
    b: Bytes,
}

/// Which command is parsing (what options it takes).
#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeCmd {
    /// ZRANGE and ZRANGESTORE (`store`): every option.
    Generic { store: bool },
    /// ZRANGEBYSCORE / ZREVRANGEBYSCORE / ZRANGEBYLEX / ZREVRANGEBYLEX / ZRANGE / ZREVRANGE of old.
    Fixed { by: By, rev: bool },
}

/// Parses `key min max [options]` from `args[first..]` (first = the key's index + 1).
fn parse_range(args: &Args, first: usize, cmd: RangeCmd) -> Result<RangeReq, Reply> {
    let (mut by, mut rev, generic, store) = match cmd {
        RangeCmd::Generic { store } => (None, false, true, store),
        RangeCmd::Fixed { by, rev } => (Some(by), rev, false, false),
    };
    let mut withscores = false;
    let mut limit = None;
    let mut j = first + 2;
    while j < args.len() {
        let o = args[j].to_ascii_uppercase();
        let left = args.len() - j - 1;
        match &o[..] {
            b"WITHSCORES" if !store => withscores = true,
            b"LIMIT" if left >= 2 => {
                let offset = super::arg_i64(&args[j + 1])?;
                let count = super::arg_i64(&args[j + 2])?;
                limit = Some(Limit { offset, count });
                j += 2;
            }
            b"REV" if generic && !rev => rev = true,
            b"BYSCORE" if generic && by.is_none() => by = Some(By::Score),
            b"BYLEX" if generic && by.is_none() => by = Some(By::Lex),
            _ => return Err(syntax_error()),
        }
        j += 1;
    }
    let by = by.unwrap_or(By::Rank);
    // As Redis: LIMIT with a count other than -1 needs BYSCORE or BYLEX; `LIMIT n -1` is ignored by index.
    if limit.is_some_and(|l| l.count != -1) && by == By::Rank {
        return Err(Reply::err("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
    }
    if withscores && by == By::Lex {
        return Err(Reply::err("syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut a, mut b) = (args[first].clone(), args[first + 1].clone());
    if rev && by != By::Rank {
        std::mem::swap(&mut a, &mut b);
    }
    Ok(RangeReq { by, rev, withscores, limit, a, b })
}

/// A parsed range, ready to run.
enum RangeSpec {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

fn range_spec(q: &RangeReq) -> Result<RangeSpec, Reply> {
    Ok(match q.by {
        By::Rank => RangeSpec::Rank(arg_i64(&q.a)?, arg_i64(&q.b)?),
        By::Score => RangeSpec::Score(ScoreRange::parse(&q.a, &q.b)?),
        By::Lex => RangeSpec::Lex(LexRange::parse(&q.a, &q.b)?),
    })
}

/// The items of a range, in reply order.
fn run_range(ctx: &ReadCtx<'_>, c: &Coll, q: &RangeReq, spec: &RangeSpec) -> Result<Items, Reply> {
    let lim = q.limit.unwrap_or(Limit::ALL);
    match spec {
        RangeSpec::Rank(start, stop) => {
            let Some((s, e)) = rank_bounds(*start, *stop, c.size) else { return Ok(Vec::new()) };
            if q.rev {
                let n = c.size;
                let mut v = range_by_rank(ctx, c, n - 1 - e, n - 1 - s)?;
                v.reverse();
                Ok(v)
            } else {
                range_by_rank(ctx, c, s, e)
            }
        }
        RangeSpec::Score(r) => range_by_score(ctx, c, r, q.rev, lim),
        RangeSpec::Lex(r) => range_by_lex(ctx, c, r, q.rev, lim),
    }
}

fn items_reply(items: Items, withscores: bool) -> Reply {
    if withscores {
        Reply::Pairs(items.into_iter().map(|(m, s)| (Reply::Bulk(m.into()), double(s))).collect())
    } else {
        Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m.into())).collect())
    }
}

fn range_read(ctx: &ReadCtx<'_>, args: &Args, cmd: RangeCmd) -> Reply {
    let q = tri!(parse_range(args, 2, cmd));
    let spec = tri!(range_spec(&q));
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else { return Reply::Array(Vec::new()) };
    items_reply(tri!(run_range(&ctx, &c, &q, &spec)), q.withscores)
}

fn zrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Generic { store: false })
}

fn zrevrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Rank, rev: true })
}

fn zrangebyscore(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Score, rev: false })
}

fn zrevrangebyscore(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Score, rev: true })
}

fn zrangebylex(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Lex, rev: false })
}

fn zrevrangebylex(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Lex, rev: true })
}

/// Replaces `dst` (whatever it holds) with a sorted set of `items` (distinct members); an empty result
/// deletes `dst`. Returns the size stored.
fn store_items(ctx: &mut WriteCtx<'_>, dst: &[u8], items: &[(Vec<u8>, f64)]) -> Result<i64, Reply> {
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
    Ok(c.size as i64)
}

fn zrangestore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let q = tri!(parse_range(args, 3, RangeCmd::Generic { store: true }));
    let spec = tri!(range_spec(&q));
    let items = match tri!(ctx.get_coll(&args[2], Type::ZSet)) {
        Some(c) => tri!(run_range(&ctx.view(), &c, &q, &spec)),
        None => Vec::new(),
    };
    Reply::Int(tri!(store_items(ctx, &args[1], &items)))
}

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

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// A parsed ZUNION/ZINTER/ZDIFF request.
struct SetOpReq {
    keys: Vec<Bytes>,
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
}

/// Parses `numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]` from `args[at..]`.
fn parse_setop(args: &Args, at: usize, op: SetOp, store: bool, cmd: &str) -> Result<SetOpReq, Reply> {
    let n = arg_i64(&args[at])?;
    if n < 1 {
        return Err(Reply::err(format!("at least 1 input key is needed for '{cmd}' command")));
    }
    let first = at + 1;
    if n as u64 > (args.len() - first) as u64 {
        return Err(syntax_error());
    }
    let n = n as usize;
    let keys: Vec<Bytes> = args[first..first + n].to_vec();
    let mut req = SetOpReq { keys, weights: vec![1.0; n], aggregate: Aggregate::Sum, withscores: false };
    let mut j = first + n;
    while j < args.len() {
        let o = args[j].to_ascii_uppercase();
        let left = args.len() - j - 1;
        match &o[..] {
            b"WEIGHTS" if op != SetOp::Diff && left >= n => {
                for (i, w) in args[j + 1..j + 1 + n].iter().enumerate() {
                    req.weights[i] = parse_score(w).ok_or_else(|| Reply::err("weight value is not a float"))?;
                }
                j += n;
            }
            b"AGGREGATE" if op != SetOp::Diff && left >= 1 => {
                req.aggregate = match &args[j + 1].to_ascii_uppercase()[..] {
                    b"SUM" => Aggregate::Sum,
                    b"MIN" => Aggregate::Min,
                    b"MAX" => Aggregate::Max,
                    _ => return Err(syntax_error()),
                };
                j += 1;
            }
            b"WITHSCORES" if !store => req.withscores = true,
            _ => return Err(syntax_error()),
        }
        j += 1;
    }
    Ok(req)
}

/// One input of a set operation: a sorted set, or a set (every member with score 1, as in Redis).
fn load_input(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Items>, Reply> {
    let Some((m, stored)) = ctx.get_meta(key)? else { return Ok(None) };
    if m.typ != Type::ZSet && m.typ != Type::Set {
        return Err(super::wrong_type());
    }
    let c = match Coll::decode(&stored) {
        Ok(Some(c)) => c,
        Ok(None) => return Err(super::wrong_type()),
        Err(e) => return Err(Reply::err(e)),
    };
    let mut out = Vec::new();
    for item in ctx.members(&c, SUB_MEMBER, None, false) {
        let (member, v) = item?;
        let score = if m.typ == Type::ZSet { decode_score(&v)? } else { 1.0 };
        out.push((member, score));
    }
    Ok(Some(out))
}

fn aggregate(a: Aggregate, acc: &mut f64, v: f64) {
    match a {
        Aggregate::Sum => {
            *acc += v;
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        Aggregate::Min => *acc = acc.min(v),
        Aggregate::Max => *acc = acc.max(v),
    }
}

/// Runs a set operation: the result in sorted-set order.
fn run_setop(ctx: &ReadCtx<'_>, req: &SetOpReq, op: SetOp) -> Result<Items, Reply> {
    // Inputs are read (and type-checked) first, all of them, as Redis does.
    let mut inputs: Vec<(Items, f64)> = Vec::with_capacity(req.keys.len());
    for (k, w) in req.keys.iter().zip(&req.weights) {
        inputs.push((load_input(ctx, k)?.unwrap_or_default(), *w));
    }
    let weighted = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut out: Items = match op {
        SetOp::Union => {
            // Smallest inputs first, as Redis orders them (this decides the order of the sums).
            inputs.sort_by_key(|(i, _)| i.len());
            let mut acc: std::collections::HashMap<Vec<u8>, f64> = std::collections::HashMap::new();
            for (items, w) in inputs {
                for (m, s) in items {
                    let v = weighted(s, w);
                    match acc.get_mut(&m) {
                        Some(a) => aggregate(req.aggregate, a, v),
                        None => {
                            acc.insert(m, v);
                        }
                    }
                }
            }
            acc.into_iter().collect()
        }
        SetOp::Inter => {
            inputs.sort_by_key(|(i, _)| i.len());
            let mut it = inputs.into_iter();
            let Some((first, w0)) = it.next() else { return Ok(Vec::new()) };
            let others: Vec<(std::collections::HashMap<Vec<u8>, f64>, f64)> =
                it.map(|(items, w)| (items.into_iter().collect(), w)).collect();
            let mut res = Vec::new();
            'members: for (m, s) in first {
                let mut acc = weighted(s, w0);
                for (o, w) in &others {
                    match o.get(&m) {
                        Some(&s) => aggregate(req.aggregate, &mut acc, weighted(s, *w)),
                        None => continue 'members,
                    }
                }
                res.push((m, acc));
            }
            res
        }
        SetOp::Diff => {
            let mut it = inputs.into_iter();
            let Some((first, _)) = it.next() else { return Ok(Vec::new()) };
            let others: Vec<std::collections::HashSet<Vec<u8>>> =
                it.map(|(items, _)| items.into_iter().map(|(m, _)| m).collect()).collect();
            first.into_iter().filter(|(m, _)| !others.iter().any(|o| o.contains(m))).collect()
        }
    };
    for item in out.iter_mut() {
        if item.1 == 0.0 {
            item.1 = 0.0;
        }
    }
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}

fn setop_read(ctx: &ReadCtx<'_>, args: &Args, op: SetOp, cmd: &str) -> Reply {
    let req = tri!(parse_setop(args, 1, op, false, cmd));
    let ctx = ctx.pinned();
    let items = tri!(run_setop(&ctx, &req, op));
    items_reply(items, req.withscores)
}

fn setop_store(ctx: &mut WriteCtx<'_>, args: &Args, op: SetOp, cmd: &str) -> Reply {
    let req = tri!(parse_setop(args, 2, op, true, cmd));
    // Expired inputs are deleted on access, as in Redis; then everything is read through the view.
    for k in &req.keys {
        tri!(ctx.get_meta(k));
    }
    let items = tri!(run_setop(&ctx.view(), &req, op));
    Reply::Int(tri!(store_items(ctx, &args[1], &items)))
}

fn zunion(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    setop_read(ctx, args, SetOp::Union, "zunion")
}

fn zinter(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    setop_read(ctx, args, SetOp::Inter, "zinter")
}

fn zdiff(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    setop_read(ctx, args, SetOp::Diff, "zdiff")
}

fn zunionstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    setop_store(ctx, args, SetOp::Union, "zunionstore")
}

fn zinterstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    setop_store(ctx, args, SetOp::Inter, "zinterstore")
}

fn zdiffstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    setop_store(ctx, args, SetOp::Diff, "zdiffstore")
}

fn zintercard(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let n = tri!(arg_i64(&args[1]));
    if n < 1 {
        return Reply::err("numkeys should be greater than 0");
    }
    if n as u64 > (args.len() - 2) as u64 {
        return Reply::err("Number of keys can't be greater than number of args");
    }
    let n = n as usize;
    let mut limit = 0u64;
    let mut j = 2 + n;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"LIMIT") && j + 1 < args.len() {
            match crate::resp::parse_i64(&args[j + 1]) {
                Some(l) if l >= 0 => limit = l as u64,
                _ => return Reply::err("LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return syntax_error();
        }
    }
    let req =
        SetOpReq { keys: args[2..2 + n].to_vec(), weights: vec![1.0; n], aggregate: Aggregate::Sum, withscores: false };
    let ctx = ctx.pinned();
    let items = tri!(run_setop(&ctx, &req, SetOp::Inter));
    let len = items.len() as u64;
    Reply::Int(if limit > 0 { len.min(limit) } else { len } as i64)
}

// ---------------------------------------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN

/// Most members one ZRANDMEMBER with a negative count returns (Redis has no bound and would build the
/// whole reply in memory; a hostile count must not exhaust the server's).
pub const MAX_RANDMEMBER_REPEATS: u64 = 1 << 20;

fn zrandmember(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let mut withscores = false;
    let count = match args.get(2) {
        None => None,
        Some(a) => {
            let n = tri!(arg_i64(a));
            match args.len() {
                3 => {}
                4 if args[3].eq_ignore_ascii_case(b"WITHSCORES") => withscores = true,
                _ => return syntax_error(),
            }
            if n == i64::MIN {
                return Reply::err(
                    "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                );
            }
            Some(n)
        }
    };
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else {
        return if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil };
    };
    let mut rng = rand::thread_rng();
    let size = c.size;
    let Some(count) = count else {
        let r = rng.gen_range(0..size);
        let v = tri!(range_by_rank(&ctx, &c, r, r));
        return v.into_iter().next().map_or(Reply::Nil, |(m, _)| Reply::Bulk(m.into()));
    };
    if count == 0 {
        return Reply::Array(Vec::new());
    }
    if count > 0 && count as u64 >= size {
        // The whole set, highest first: the order Redis 7.0 sends it in (it walks from the tail).
        let mut all = tri!(range_by_rank(&ctx, &c, 0, size - 1));
        all.reverse();
        return items_reply(all, withscores);
    }
    // Ranks to return: distinct (count > 0) or with repeats (count < 0), in random order.
    let ranks: Vec<u64> = if count > 0 {
        rand::seq::index::sample(&mut rng, size as usize, count as usize).into_iter().map(|i| i as u64).collect()
    } else {
        let n = count.unsigned_abs();
        if n > MAX_RANDMEMBER_REPEATS {
            return Reply::err(format!(
                "ZRANDMEMBER with a negative count returns at most {MAX_RANDMEMBER_REPEATS} members"
            ));
        }
        (0..n).map(|_| rng.gen_range(0..size)).collect()
    };
    let mut wanted: Vec<u64> = ranks.clone();
    wanted.sort_unstable();
    wanted.dedup();
    let (p, end) = index_bounds(&ctx, &c);
    let mut found: std::collections::HashMap<u64, (Vec<u8>, f64)> = std::collections::HashMap::new();
    let mut w = wanted.iter().peekable();
    for (i, item) in ctx.scan(&p, &end, false).enumerate() {
        let Some(&&next) = w.peek() else { break };
        let (k, _) = tri!(item);
        if i as u64 == next {
            let (s, m) = tri!(split_index_key(&k));
            found.insert(next, (m.to_vec(), s));
            w.next();
        }
    }
    let items: Items = ranks.iter().filter_map(|r| found.get(r).cloned()).collect();
    items_reply(items, withscores)
}

/// ZSCAN cursors: id -> (database, the member the scan goes on at), least recently used first out.
fn cursors() -> &'static Mutex<super::keys::Cursors> {
    static C: OnceLock<Mutex<super::keys::Cursors>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// A sorted set this small is answered in one ZSCAN call (cursor 0), as Redis does for its small
/// (listpack) encoding, whatever COUNT says.
const SCAN_ALL_AT_ONCE: u64 = 128;

fn zscan(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let cursor = match std::str::from_utf8(&args[2]).ok().and_then(|s| s.parse::<u64>().ok()) {
        Some(c) => c,
        None => return Reply::err("invalid cursor"),
    };
    let mut pattern: Option<Bytes> = None;
    let mut count: i64 = 10;
    let mut j = 3;
    while j < args.len() {
        if j + 1 >= args.len() {
            return syntax_error();
        }
        match &args[j].to_ascii_uppercase()[..] {
            b"MATCH" => pattern = Some(args[j + 1].clone()),
            b"COUNT" => {
                count = tri!(arg_i64(&args[j + 1]));
                if count < 1 {
                    return syntax_error();
                }
            }
            _ => return syntax_error(),
        }
        j += 2;
    }
    let ctx = ctx.pinned();
    let empty = || Reply::Array(vec![Reply::bulk("0"), Reply::Array(Vec::new())]);
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::ZSet)) else { return empty() };
    let keep = |m: &[u8]| pattern.as_deref().is_none_or(|p| super::keys::glob_match(p, m));
    let mut out = Vec::new();
    let push = |out: &mut Vec<Reply>, m: &[u8], s: f64| {
        out.push(Reply::Bulk(Bytes::copy_from_slice(m)));
        out.push(Reply::bulk(scan_score_text(s)));
    };
    if c.size <= SCAN_ALL_AT_ONCE {
        let (p, end) = index_bounds(&ctx, &c);
        for item in ctx.scan(&p, &end, false) {
            let (k, _) = tri!(item);
            let (s, m) = tri!(split_index_key(&k));
            if keep(m) {
                push(&mut out, m, s);
            }
        }
        return Reply::Array(vec![Reply::bulk("0"), Reply::Array(out)]);
    }
    // Larger sets: pages in member order (stable while scores change), the cursor names the next member.
    let from: Option<Bytes> = if cursor == 0 {
        None
    } else {
        match cursors().lock().get(cursor) {
            Some((db, m)) if db == ctx.db_index => Some(m),
            _ => return Reply::err("invalid cursor"),
        }
    };
    let mut it = ctx.members(&c, SUB_MEMBER, from.as_deref(), false);
    let mut next = None;
    for (examined, item) in it.by_ref().enumerate() {
        let (m, v) = tri!(item);
        if examined as i64 == count {
            next = Some(m);
            break;
        }
        if keep(&m) {
            push(&mut out, &m, tri!(decode_score(&v)));
        }
    }
    let id = match next {
        Some(m) => cursors().lock().insert(ctx.db_index, Bytes::from(m)),
        None => 0,
    };
    Reply::Array(vec![Reply::bulk(id.to_string()), Reply::Array(out)])
}
