//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE, SINTER,
//! SUNION, SDIFF, SINTERSTORE, SUNIONSTORE, SDIFFSTORE, SINTERCARD, SSCAN.
//!
//! Layout (docs/format/server-keys.md): the meta value holds the collection header (version, member
//! count); each member is one member record `db 0x01 version 0x00 member -> empty`. Members come back in
//! byte order. SSCAN cursors, SRANDMEMBER and SPOP picks are described in `commands/coll.rs`.
//!
//! SINTER and SINTERCARD walk the smallest set and look each member up in the others (|smallest| x (k-1)
//! point reads); SDIFF walks the first set and looks its members up in the others; SUNION reads every set.
//! The STORE forms compute the result first, then replace the destination (whatever it held) with a new
//! collection under a fresh version, in the same command.

use super::coll::{self, pick_count};
use super::flags::*;
use super::hashes::check_coll_key;
use super::strings::spec;
use super::{arg_i64, parse_intercard, syntax_error, Handler, Spec};
use crate::keys::{Coll, Type, SUB_MEMBER};
use crate::resp::{Args, Reply};
use crate::store::{check_entry_size, ReadCtx, WriteCtx};
use bytes::Bytes;
use std::collections::BTreeSet;

pub static COMMANDS: &[Spec] = &[
    spec!("sadd", -3, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(sadd), "Adds one or more members to a set."),
    spec!("srem", -3, WRITE | FAST, 1, 1, 1, Handler::Write(srem), "Removes one or more members from a set."),
    spec!("smembers", 2, READONLY, 1, 1, 1, Handler::Read(smembers), "Returns all members of a set."),
    spec!(
        "sismember",
        3,
        READONLY | FAST,
        1,
        1,
        1,
        Handler::Read(sismember),
        "Determines whether a member belongs to a set."
    ),
    spec!(
        "smismember",
        -3,
        READONLY | FAST,
        1,
        1,
        1,
        Handler::Read(smismember),
        "Determines whether multiple members belong to a set."
    ),
    spec!("scard", 2, READONLY | FAST, 1, 1, 1, Handler::Read(scard), "Returns the number of members in a set."),
    spec!(
        "spop",
        -2,
        WRITE | FAST,
        1,
        1,
        1,
        Handler::Write(spop),
        "Returns one or more random members from a set after removing them."
    ),
    spec!(
        "srandmember",
        -2,
        READONLY,
        1,
        1,
        1,
        Handler::Read(srandmember),
        "Get one or multiple random members from a set"
    ),
    spec!("smove", 4, WRITE | FAST, 1, 2, 1, Handler::Write(smove), "Moves a member from one set to another."),
    spec!("sinter", -2, READONLY, 1, -1, 1, Handler::Read(sinter), "Returns the intersect of multiple sets."),
    spec!(
        "sintercard",
        -3,
        READONLY,
        0,
        0,
        0,
        Handler::Read(sintercard),
        "Returns the number of members of the intersect of multiple sets."
    ),
    spec!(
        "sinterstore",
        -3,
        WRITE | DENYOOM,
        1,
        -1,
        1,
        Handler::Write(sinterstore),
        "Stores the intersect of multiple sets in a key."
    ),
    spec!("sunion", -2, READONLY, 1, -1, 1, Handler::Read(sunion), "Returns the union of multiple sets."),
    spec!(
        "sunionstore",
        -3,
        WRITE | DENYOOM,
        1,
        -1,
        1,
        Handler::Write(sunionstore),
        "Stores the union of multiple sets in a key."
    ),
    spec!("sdiff", -2, READONLY, 1, -1, 1, Handler::Read(sdiff), "Returns the difference of multiple sets."),
    spec!(
        "sdiffstore",
        -3,
        WRITE | DENYOOM,
        1,
        -1,
        1,
        Handler::Write(sdiffstore),
        "Stores the difference of multiple sets in a key."
    ),
    spec!("sscan", -3, READONLY, 1, 1, 1, Handler::Read(sscan), "Iterates over members of a set."),
];

fn check_member(m: &[u8]) -> Result<(), Reply> {
    check_entry_size(m.len() + 9, 0)
}

fn members_reply(ms: impl IntoIterator<Item = Vec<u8>>) -> Reply {
    Reply::Set(ms.into_iter().map(|m| Reply::Bulk(Bytes::from(m))).collect())
}

// ---------------------------------------------------------------------------------------------------------
// Writes

/// Adds `members` to the set `key` (created when missing). Returns how many were new.
fn add_members<'m>(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    members: impl Iterator<Item = &'m Bytes> + Clone,
) -> Result<i64, Reply> {
    check_coll_key(key)?;
    for m in members.clone() {
        check_member(m)?;
    }
    let (mut c, fresh) = match ctx.get_coll(key, Type::Set)? {
        Some(c) => (c, false),
        None => (ctx.create_coll(key, Type::Set), true),
    };
    let mut added = 0i64;
    let mut failed = None;
    for m in members {
        match ctx.get_member(&c, SUB_MEMBER, m) {
            Ok(Some(_)) => {}
            Ok(None) => {
                if let Err(e) = ctx.put_member(&c, SUB_MEMBER, m, b"") {
                    failed = Some(e);
                    break;
                }
                c.size += 1;
                added += 1;
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if fresh || added > 0 {
        ctx.put_coll(key, &c)?;
    }
    failed.map_or(Ok(added), Err)
}

fn sadd(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    match add_members(ctx, &args[1], args[2..].iter()) {
        Ok(n) => Reply::Int(n),
        Err(e) => e,
    }
}

/// Removes `members` from the set `c` (stored as `key`); returns how many were there.
fn remove_members<'m>(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    c: &mut Coll,
    members: impl Iterator<Item = &'m [u8]>,
) -> Result<i64, Reply> {
    let mut removed = 0i64;
    let mut failed = None;
    for m in members {
        match ctx.get_member(c, SUB_MEMBER, m) {
            Ok(Some(_)) => {
                ctx.delete_member(c, SUB_MEMBER, m);
                c.size = c.size.saturating_sub(1);
                removed += 1;
            }
            Ok(None) => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if removed > 0 {
        ctx.put_coll(key, c)?;
    }
    failed.map_or(Ok(removed), Err)
}

fn srem(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let Some(mut c) = tri!(ctx.get_coll(key, Type::Set)) else { return Reply::Int(0) };
    match remove_members(ctx, key, &mut c, args[2..].iter().map(|b| &b[..])) {
        Ok(n) => Reply::Int(n),
        Err(e) => e,
    }
}

/// `SPOP key [count]`.
fn spop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let count = match args.len() {
        2 => None,
        3 => {
            let n = tri!(arg_i64(&args[2]));
            if n < 0 {
                return Reply::err("value is out of range, must be positive");
            }
            Some(n as u64)
        }
        _ => return syntax_error(),
    };
    let Some(mut c) = tri!(ctx.get_coll(key, Type::Set)) else {
        return if count.is_some() { Reply::Set(Vec::new()) } else { Reply::Nil };
    };
    let n = count.unwrap_or(1);
    // A pop that empties the set, or a first pop of a small set (or of a third of it) reads it whole and
    // picks exactly uniformly; otherwise one seek per member (see coll.rs), past what earlier pops emptied.
    let whole = n >= c.size
        || (ctx.dead_ranges(&c, SUB_MEMBER).is_none() && (c.size <= coll::SMALL_PICK || n.saturating_mul(3) > c.size));
    let picked: Vec<Vec<u8>> = if whole {
        let picked: Vec<Vec<u8>> = {
            let view = ctx.view();
            let r = coll::random_members(&view, &c, SUB_MEMBER, n, true);
            tri!(r).into_iter().map(|(m, _)| m).collect()
        };
        tri!(remove_members(ctx, key, &mut c, picked.iter().map(|m| &m[..])));
        picked
    } else {
        let mut picked = Vec::new();
        for _ in 0..n {
            let Some((m, _)) = tri!(coll::pick_for_pop(ctx, &c, SUB_MEMBER)) else { break };
            tri!(remove_members(ctx, key, &mut c, std::iter::once(&m[..])));
            picked.push(m);
        }
        picked
    };
    match count {
        None => picked.into_iter().next().map_or(Reply::Nil, |m| Reply::Bulk(Bytes::from(m))),
        Some(_) => members_reply(picked),
    }
}

fn smove(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    // Redis: a missing source answers 0 before the types are checked.
    let src_meta = tri!(ctx.get_meta(src));
    let Some((sm, _)) = src_meta else { return Reply::Int(0) };
    if sm.typ != Type::Set {
        return super::wrong_type();
    }
    if let Some((dm, _)) = tri!(ctx.get_meta(dst)) {
        if dm.typ != Type::Set {
            return super::wrong_type();
        }
    }
    let Some(mut sc) = tri!(ctx.get_coll(src, Type::Set)) else { return Reply::Int(0) };
    if src == dst {
        return Reply::Int(tri!(ctx.get_member(&sc, SUB_MEMBER, member)).is_some() as i64);
    }
    tri!(check_coll_key(dst));
    tri!(check_member(member));
    if tri!(remove_members(ctx, src, &mut sc, std::iter::once(&member[..]))) == 0 {
        return Reply::Int(0);
    }
    tri!(add_members(ctx, dst, std::iter::once(member)));
    Reply::Int(1)
}

// ---------------------------------------------------------------------------------------------------------
// Reads

fn smembers(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::Set)) else { return Reply::Set(Vec::new()) };
    let all = tri!(coll::all_members(&ctx, &c, SUB_MEMBER));
    members_reply(all.into_iter().map(|(m, _)| m))
}

fn sismember(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::Set)) else { return Reply::Int(0) };
    Reply::Int(tri!(ctx.get_member(&c, SUB_MEMBER, &args[2])).is_some() as i64)
}

fn smismember(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let c = tri!(ctx.get_coll(&args[1], Type::Set));
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        let there = match &c {
            Some(c) => tri!(ctx.get_member(c, SUB_MEMBER, m)).is_some(),
            None => false,
        };
        out.push(Reply::Int(there as i64));
    }
    Reply::Array(out)
}

fn scard(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let c = tri!(ctx.get_coll(&args[1], Type::Set));
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
    let c = tri!(ctx.get_coll(&args[1], Type::Set));
    let Some((count, distinct)) = count else {
        let Some(c) = c else { return Reply::Nil };
        let picked = tri!(coll::random_members(&ctx, &c, SUB_MEMBER, 1, true));
        return picked.into_iter().next().map_or(Reply::Nil, |(m, _)| Reply::Bulk(Bytes::from(m)));
    };
    let Some(c) = c else { return Reply::Array(Vec::new()) };
    let picked = tri!(coll::random_members(&ctx, &c, SUB_MEMBER, count, distinct));
    Reply::Array(picked.into_iter().map(|(m, _)| Reply::Bulk(Bytes::from(m))).collect())
}

fn sscan(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let sa = tri!(coll::parse_scan_args(args, 2));
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::Set)) else { return coll::scan_reply(0, Vec::new()) };
    let mut items = Vec::new();
    let next = tri!(coll::scan_members(&ctx, &c, SUB_MEMBER, &sa, |m, _| items.push(Reply::Bulk(Bytes::from(m)))));
    coll::scan_reply(next, items)
}

// ---------------------------------------------------------------------------------------------------------
// Set algebra

/// The sets named by `names`, `None` for a missing key; WRONGTYPE if any key holds another type (checked
/// for every key before anything else, as Redis does).
fn load_sets(ctx: &ReadCtx<'_>, names: &[Bytes]) -> Result<Vec<Option<Coll>>, Reply> {
    names.iter().map(|k| ctx.get_coll(k, Type::Set)).collect()
}

fn is_member(ctx: &ReadCtx<'_>, c: &Coll, m: &[u8]) -> Result<bool, Reply> {
    Ok(ctx.get_member(c, SUB_MEMBER, m)?.is_some())
}

/// The intersection of the sets `names`, stopping after `limit` members (0: no limit).
fn inter(ctx: &ReadCtx<'_>, names: &[Bytes], limit: u64) -> Result<Vec<Vec<u8>>, Reply> {
    let sets = load_sets(ctx, names)?;
    let mut sets: Vec<Coll> = match sets.into_iter().collect::<Option<Vec<Coll>>>() {
        Some(s) => s,
        None => return Ok(Vec::new()),
    };
    sets.sort_by_key(|c| c.size);
    let Some((first, rest)) = sets.split_first() else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for r in ctx.members(first, SUB_MEMBER, None, false) {
        let (m, _) = r?;
        let mut all = true;
        for c in rest {
            if c.version != first.version && !is_member(ctx, c, &m)? {
                all = false;
                break;
            }
        }
        if all {
            out.push(m);
            if limit != 0 && out.len() as u64 >= limit {
                break;
            }
        }
    }
    Ok(out)
}

fn union(ctx: &ReadCtx<'_>, names: &[Bytes]) -> Result<Vec<Vec<u8>>, Reply> {
    let sets = load_sets(ctx, names)?;
    let mut out: BTreeSet<Vec<u8>> = BTreeSet::new();
    for c in sets.iter().flatten() {
        for r in ctx.members(c, SUB_MEMBER, None, false) {
            out.insert(r?.0);
        }
    }
    Ok(out.into_iter().collect())
}

fn diff(ctx: &ReadCtx<'_>, names: &[Bytes]) -> Result<Vec<Vec<u8>>, Reply> {
    let sets = load_sets(ctx, names)?;
    let Some(Some(first)) = sets.first() else { return Ok(Vec::new()) };
    let others: Vec<&Coll> = sets[1..].iter().flatten().collect();
    if others.iter().any(|c| c.version == first.version) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for r in ctx.members(first, SUB_MEMBER, None, false) {
        let (m, _) = r?;
        let mut keep = true;
        for c in &others {
            if is_member(ctx, c, &m)? {
                keep = false;
                break;
            }
        }
        if keep {
            out.push(m);
        }
    }
    Ok(out)
}

#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

fn compute(ctx: &ReadCtx<'_>, op: Op, names: &[Bytes]) -> Result<Vec<Vec<u8>>, Reply> {
    match op {
        Op::Inter => inter(ctx, names, 0),
        Op::Union => union(ctx, names),
        Op::Diff => diff(ctx, names),
    }
}

fn read_op(ctx: &ReadCtx<'_>, args: &Args, op: Op) -> Reply {
    let ctx = ctx.pinned();
    match compute(&ctx, op, &args[1..]) {
        Ok(ms) => members_reply(ms),
        Err(e) => e,
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
    match inter(&ctx, &args[2..2 + n], limit) {
        Ok(ms) => Reply::Int(ms.len() as i64),
        Err(e) => e,
    }
}

fn store_op(ctx: &mut WriteCtx<'_>, args: &Args, op: Op) -> Reply {
    let dst = &args[1];
    tri!(check_coll_key(dst));
    let result = {
        let view = ctx.view();
        tri!(compute(&view, op, &args[2..]))
    };
    // The destination is replaced whatever it held (a collection's old version goes to the collector).
    if tri!(ctx.get_meta(dst)).is_some() {
        tri!(ctx.remove_key(ctx.db_index, dst));
    }
    if result.is_empty() {
        return Reply::Int(0);
    }
    let mut c = ctx.create_coll(dst, Type::Set);
    for m in &result {
        if let Err(e) = ctx.put_member(&c, SUB_MEMBER, m, b"") {
            // Members come from existing sets: they always fit. Keep the count exact anyway.
            tri!(ctx.put_coll(dst, &c));
            return e;
        }
        c.size += 1;
    }
    tri!(ctx.put_coll(dst, &c));
    Reply::Int(c.size.min(i64::MAX as u64) as i64)
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
