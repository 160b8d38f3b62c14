//! Hash commands: HSET, HSETNX, HGET, HMGET, HMSET, HDEL, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HINCRBY,
//! HINCRBYFLOAT, HSTRLEN, HRANDFIELD, HSCAN.
//!
//! Layout (docs/format/server-keys.md): the meta value holds the collection header (version, field count);
//! each field is one member record `db 0x01 version 0x00 field -> value`. Fields come back in byte order
//! (Redis's order is its hash table's; clients must not rely on either). HSCAN cursors and HRANDFIELD's
//! picks are described in `commands/coll.rs`.
//!
//! Write commands read every member they change before writing it and write the meta value once at the end,
//! so the field count stays exact; a size problem is refused before anything is written.

use super::coll::{self, pick_count};
use super::flags::*;
use super::strings::{format_float, parse_float, spec};
use super::{arg_i64, syntax_error, wrong_arity, Handler, Spec};
use crate::keys::{Coll, Type, SUB_MEMBER};
use crate::resp::{Args, Reply};
use crate::store::{check_entry_size, ReadCtx, WriteCtx};
use bytes::Bytes;

pub static COMMANDS: &[Spec] = &[
    spec!(
        "hset",
        -4,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(hset),
        "Creates or modifies the value of a field in a hash."
    ),
    spec!("hmset", -4, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(hmset), "Sets the values of multiple fields."),
    spec!(
        "hsetnx",
        4,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(hsetnx),
        "Sets the value of a field in a hash only when the field doesn't exist."
    ),
    spec!("hget", 3, READONLY | FAST, 1, 1, 1, Handler::Read(hget), "Returns the value of a field in a hash."),
    spec!("hmget", -3, READONLY | FAST, 1, 1, 1, Handler::Read(hmget), "Returns the values of all fields in a hash."),
    spec!(
        "hdel",
        -3,
        WRITE | FAST,
        1,
        1,
        1,
        Handler::Write(hdel),
        "Deletes one or more fields and their values from a hash."
    ),
    spec!("hgetall", 2, READONLY, 1, 1, 1, Handler::Read(hgetall), "Returns all fields and values in a hash."),
    spec!("hkeys", 2, READONLY, 1, 1, 1, Handler::Read(hkeys), "Returns all fields in a hash."),
    spec!("hvals", 2, READONLY, 1, 1, 1, Handler::Read(hvals), "Returns all values in a hash."),
    spec!("hlen", 2, READONLY | FAST, 1, 1, 1, Handler::Read(hlen), "Returns the number of fields in a hash."),
    spec!(
        "hexists",
        3,
        READONLY | FAST,
        1,
        1,
        1,
        Handler::Read(hexists),
        "Determines whether a field exists in a hash."
    ),
    spec!(
        "hincrby",
        4,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(hincrby),
        "Increments the integer value of a field in a hash by a number."
    ),
    spec!(
        "hincrbyfloat",
        4,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(hincrbyfloat),
        "Increments the floating point value of a field by a number."
    ),
    spec!(
        "hstrlen",
        3,
        READONLY | FAST,
        1,
        1,
        1,
        Handler::Read(hstrlen),
        "Returns the length of the value of a field."
    ),
    spec!(
        "hrandfield",
        -2,
        READONLY,
        1,
        1,
        1,
        Handler::Read(hrandfield),
        "Returns one or more random fields from a hash."
    ),
    spec!("hscan", -3, READONLY, 1, 1, 1, Handler::Read(hscan), "Iterates over fields and values of a hash."),
];

/// Refuses a field and value the engine could not hold as one member record.
fn check_field(field: &[u8], value: &[u8]) -> Result<(), Reply> {
    check_entry_size(field.len() + 9, value.len())
}

/// Refuses a user key too long for a collection's meta value (checked before any member is written).
pub fn check_coll_key(key: &[u8]) -> Result<(), Reply> {
    check_entry_size(key.len(), 9 + crate::keys::COLL_HEADER_LEN + 32)
}

// ---------------------------------------------------------------------------------------------------------
// Writes

/// The hash `key`, created when missing: `(collection, created)`. A created one is stored by the caller's
/// `put_coll` (a command that ends up writing nothing leaves only a registry record the collector removes).
fn get_or_create(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<(Coll, bool), Reply> {
    match ctx.get_coll(key, Type::Hash)? {
        Some(c) => Ok((c, false)),
        None => Ok((ctx.create_coll(key, Type::Hash), true)),
    }
}

/// Sets the `(field, value)` pairs of `args[2..]`; `nx`: only fields that do not exist. Returns the number
/// of fields created.
fn set_fields(ctx: &mut WriteCtx<'_>, args: &Args, nx: bool) -> Result<i64, Reply> {
    let key = &args[1];
    check_coll_key(key)?;
    for p in args[2..].chunks_exact(2) {
        check_field(&p[0], &p[1])?;
    }
    let (mut c, fresh) = get_or_create(ctx, key)?;
    let mut added = 0i64;
    let mut failed = None;
    for p in args[2..].chunks_exact(2) {
        let exists = match ctx.get_member(&c, SUB_MEMBER, &p[0]) {
            Ok(v) => v.is_some(),
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        if exists && nx {
            continue;
        }
        if let Err(e) = ctx.put_member(&c, SUB_MEMBER, &p[0], &p[1]) {
            failed = Some(e);
            break;
        }
        if !exists {
            c.size += 1;
            added += 1;
        }
    }
    // The meta value follows whatever members were written, even when the command stopped on an error.
    if fresh || added > 0 {
        ctx.put_coll(key, &c)?;
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(added),
    }
}

fn hset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if !args.len().is_multiple_of(2) {
        return wrong_arity("hset");
    }
    match set_fields(ctx, args, false) {
        Ok(n) => Reply::Int(n),
        Err(e) => e,
    }
}

fn hmset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if !args.len().is_multiple_of(2) {
        return wrong_arity("hmset");
    }
    match set_fields(ctx, args, false) {
        Ok(_) => Reply::Ok,
        Err(e) => e,
    }
}

fn hsetnx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    match set_fields(ctx, args, true) {
        Ok(n) => Reply::Int(n),
        Err(e) => e,
    }
}

fn hdel(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let Some(mut c) = tri!(ctx.get_coll(key, Type::Hash)) else { return Reply::Int(0) };
    let mut removed = 0i64;
    let mut failed = None;
    for f in &args[2..] {
        match ctx.get_member(&c, SUB_MEMBER, f) {
            Ok(Some(_)) => {
                ctx.delete_member(&c, SUB_MEMBER, f);
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
        tri!(ctx.put_coll(key, &c));
    }
    failed.unwrap_or(Reply::Int(removed))
}

/// Read-modify-write of one field: `f(old value) -> new value`, or the command's error.
fn update_field(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    field: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, Reply>,
) -> Result<Vec<u8>, Reply> {
    check_coll_key(key)?;
    let (mut c, fresh) = get_or_create(ctx, key)?;
    let old = ctx.get_member(&c, SUB_MEMBER, field)?;
    let new = f(old.as_deref())?;
    check_field(field, &new)?;
    ctx.put_member(&c, SUB_MEMBER, field, &new)?;
    if old.is_none() {
        c.size += 1;
    }
    if fresh || old.is_none() {
        ctx.put_coll(key, &c)?;
    }
    Ok(new)
}

fn hincrby(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let by = tri!(arg_i64(&args[3]));
    let r = update_field(ctx, &args[1], &args[2], |old| {
        let cur = match old {
            Some(v) => crate::resp::parse_i64(v).ok_or_else(|| Reply::err("hash value is not an integer"))?,
            None => 0,
        };
        let new = cur.checked_add(by).ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
        Ok(new.to_string().into_bytes())
    });
    match r {
        // The value was just formatted from an i64.
        Ok(v) => Reply::Int(crate::resp::parse_i64(&v).unwrap_or_default()),
        Err(e) => e,
    }
}

fn hincrbyfloat(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let Some(by) = parse_float(&args[3]) else {
        // Redis reads "inf" as a number and then refuses it; anything else is not a float.
        let inf = std::str::from_utf8(&args[3]).ok().and_then(|s| s.parse::<f64>().ok()).is_some_and(f64::is_infinite);
        return Reply::err(if inf { "value is NaN or Infinity" } else { "value is not a valid float" });
    };
    let r = update_field(ctx, &args[1], &args[2], |old| {
        let cur = match old {
            Some(v) => parse_float(v).ok_or_else(|| Reply::err("hash value is not a float"))?,
            None => 0.0,
        };
        let new = cur + by;
        if !new.is_finite() {
            return Err(Reply::err("increment would produce NaN or Infinity"));
        }
        Ok(format_float(new).into_bytes())
    });
    match r {
        Ok(v) => Reply::bulk(v),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------------------
// Reads

fn hget(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::Hash)) else { return Reply::Nil };
    match tri!(ctx.get_member(&c, SUB_MEMBER, &args[2])) {
        Some(v) => Reply::bulk(v),
        None => Reply::Nil,
    }
}

fn hmget(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let c = tri!(ctx.get_coll(&args[1], Type::Hash));
    let mut out = Vec::with_capacity(args.len() - 2);
    for f in &args[2..] {
        let v = match &c {
            Some(c) => tri!(ctx.get_member(c, SUB_MEMBER, f)),
            None => None,
        };
        out.push(v.map_or(Reply::Nil, Reply::bulk));
    }
    Reply::Array(out)
}

/// Every `(field, value)` of the hash `key` (empty when missing).
fn all_fields(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<coll::MemberList, Reply> {
    let ctx = ctx.pinned();
    match ctx.get_coll(key, Type::Hash)? {
        Some(c) => coll::all_members(&ctx, &c, SUB_MEMBER),
        None => Ok(Vec::new()),
    }
}

fn hgetall(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let all = tri!(all_fields(ctx, &args[1]));
    Reply::Map(all.into_iter().map(|(f, v)| (Reply::bulk(f), Reply::bulk(v))).collect())
}

fn hkeys(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let all = tri!(all_fields(ctx, &args[1]));
    Reply::Array(all.into_iter().map(|(f, _)| Reply::bulk(f)).collect())
}

fn hvals(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let all = tri!(all_fields(ctx, &args[1]));
    Reply::Array(all.into_iter().map(|(_, v)| Reply::bulk(v)).collect())
}

fn hlen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let c = tri!(ctx.get_coll(&args[1], Type::Hash));
    Reply::Int(c.map_or(0, |c| c.size.min(i64::MAX as u64) as i64))
}

fn hexists(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::Hash)) else { return Reply::Int(0) };
    Reply::Int(tri!(ctx.get_member(&c, SUB_MEMBER, &args[2])).is_some() as i64)
}

fn hstrlen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::Hash)) else { return Reply::Int(0) };
    Reply::Int(tri!(ctx.get_member(&c, SUB_MEMBER, &args[2])).map_or(0, |v| v.len() as i64))
}

/// `HRANDFIELD key [count [WITHVALUES]]`.
fn hrandfield(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let count = match args.len() {
        2 => None,
        3 | 4 => Some(tri!(pick_count(&args[2]))),
        _ => return syntax_error(),
    };
    let withvalues = match args.get(3) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"WITHVALUES") => true,
        Some(_) => return syntax_error(),
    };
    let c = tri!(ctx.get_coll(&args[1], Type::Hash));
    let Some((count, distinct)) = count else {
        let Some(c) = c else { return Reply::Nil };
        let picked = tri!(coll::random_members(&ctx, &c, SUB_MEMBER, 1, true));
        return picked.into_iter().next().map_or(Reply::Nil, |(f, _)| Reply::bulk(f));
    };
    let Some(c) = c else { return Reply::Array(Vec::new()) };
    let picked = tri!(coll::random_members(&ctx, &c, SUB_MEMBER, count, distinct));
    let mut out = Vec::new();
    for (f, v) in picked {
        out.push(Reply::bulk(f));
        if withvalues {
            out.push(Reply::bulk(v));
        }
    }
    Reply::Array(out)
}

fn hscan(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let sa = tri!(coll::parse_scan_args(args, 2));
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::Hash)) else { return coll::scan_reply(0, Vec::new()) };
    let mut items = Vec::new();
    let next = tri!(coll::scan_members(&ctx, &c, SUB_MEMBER, &sa, |f, v| {
        items.push(Reply::Bulk(Bytes::from(f)));
        items.push(Reply::Bulk(Bytes::from(v)));
    }));
    coll::scan_reply(next, items)
}
