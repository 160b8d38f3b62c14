//! Hash commands: HSET, HSETNX, HGET, HMGET, HMSET, HDEL, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HINCRBY,
//! HINCRBYFLOAT, HSTRLEN, HRANDFIELD, HSCAN.
//!
//! These handlers parse the arguments and build the replies; the layout (one member record per field) and
//! the writes are [`crate::types::hash`], HSCAN cursors and HRANDFIELD's picks `commands/coll.rs` and
//! [`crate::types::coll`].

use super::coll::{self, pick_count};
use super::{arg_i64, syntax_error, wrong_arity, Spec};
use crate::keys::Type;
use crate::notify;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::{self, hash};
use bytes::Bytes;

pub static COMMANDS: &[Spec] = &[
    cmd! { "hset", -4, WRITE | DENYOOM | FAST, [1, 1, 1], Write(hset), "Creates or modifies the value of a field in a hash." },
    cmd! { "hmset", -4, WRITE | DENYOOM | FAST, [1, 1, 1], Write(hmset), "Sets the values of multiple fields." },
    cmd! { "hsetnx", 4, WRITE | DENYOOM | FAST, [1, 1, 1], Write(hsetnx), "Sets the value of a field in a hash only when the field doesn't exist." },
    cmd! { "hget", 3, READONLY | FAST, [1, 1, 1], Read(hget), "Returns the value of a field in a hash." },
    cmd! { "hmget", -3, READONLY | FAST, [1, 1, 1], Read(hmget), "Returns the values of all fields in a hash." },
    cmd! { "hdel", -3, WRITE | FAST, [1, 1, 1], Write(hdel), "Deletes one or more fields and their values from a hash." },
    cmd! { "hgetall", 2, READONLY, [1, 1, 1], Read(hgetall), "Returns all fields and values in a hash." },
    cmd! { "hkeys", 2, READONLY, [1, 1, 1], Read(hkeys), "Returns all fields in a hash." },
    cmd! { "hvals", 2, READONLY, [1, 1, 1], Read(hvals), "Returns all values in a hash." },
    cmd! { "hlen", 2, READONLY | FAST, [1, 1, 1], Read(hlen), "Returns the number of fields in a hash." },
    cmd! { "hexists", 3, READONLY | FAST, [1, 1, 1], Read(hexists), "Determines whether a field exists in a hash." },
    cmd! { "hincrby", 4, WRITE | DENYOOM | FAST, [1, 1, 1], Write(hincrby), "Increments the integer value of a field in a hash by a number." },
    cmd! { "hincrbyfloat", 4, WRITE | DENYOOM | FAST, [1, 1, 1], Write(hincrbyfloat), "Increments the floating point value of a field by a number." },
    cmd! { "hstrlen", 3, READONLY | FAST, [1, 1, 1], Read(hstrlen), "Returns the length of the value of a field." },
    cmd! { "hrandfield", -2, READONLY, [1, 1, 1], Read(hrandfield), "Returns one or more random fields from a hash." },
    cmd! { "hscan", -3, READONLY, [1, 1, 1], Read(hscan), "Iterates over fields and values of a hash." },
];

super::coll::reply_from!(hash::Error: Store, Coll);

// ---------------------------------------------------------------------------------------------------------
// Writes

fn hset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if !args.len().is_multiple_of(2) {
        return wrong_arity("hset");
    }
    let added = tri!(hash::set_fields(ctx, &args[1], &args[2..], false));
    ctx.notify(notify::HASH, "hset", &args[1]);
    Reply::Int(added as i64)
}

fn hmset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if !args.len().is_multiple_of(2) {
        return wrong_arity("hmset");
    }
    tri!(hash::set_fields(ctx, &args[1], &args[2..], false));
    ctx.notify(notify::HASH, "hset", &args[1]);
    Reply::Ok
}

fn hsetnx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let added = tri!(hash::set_fields(ctx, &args[1], &args[2..], true));
    if added > 0 {
        ctx.notify(notify::HASH, "hset", &args[1]);
    }
    Reply::Int(added as i64)
}

fn hdel(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let removed = tri!(hash::delete_fields(ctx, &args[1], &args[2..]));
    if removed > 0 {
        ctx.notify_emptied(notify::HASH, "hdel", &args[1]);
    }
    Reply::Int(removed as i64)
}

fn hincrby(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let by = tri!(arg_i64(&args[3]));
    let n = tri!(hash::incr_by(ctx, &args[1], &args[2], by));
    ctx.notify(notify::HASH, "hincrby", &args[1]);
    Reply::Int(n)
}

fn hincrbyfloat(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    // Redis checks the increment before the key: "inf" is read as a number and then refused.
    match crate::types::long_double::classify(&args[3]) {
        crate::types::long_double::Class::Finite => {}
        crate::types::long_double::Class::Infinite => return Reply::err("value is NaN or Infinity"),
        crate::types::long_double::Class::NotANumber => return Reply::err("value is not a valid float"),
    }
    let v = tri!(hash::incr_by_float(ctx, &args[1], &args[2], &args[3]));
    ctx.notify(notify::HASH, "hincrbyfloat", &args[1]);
    Reply::bulk(v)
}

// ---------------------------------------------------------------------------------------------------------
// Reads

fn hget(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(hash::get(&ctx, &args[1])) else { return Reply::Nil };
    match tri!(hash::field(&ctx, &c, &args[2])) {
        Some(v) => Reply::bulk(v),
        None => Reply::Nil,
    }
}

fn hmget(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let values = tri!(types::coll::member_values(ctx, &args[1], Type::Hash, &args[2..]));
    Reply::Array(values.into_iter().map(|v| v.map_or(Reply::Nil, Reply::bulk)).collect())
}

fn hgetall(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let all = tri!(hash::all_fields(ctx, &args[1]));
    Reply::Map(all.into_iter().map(|(f, v)| (Reply::bulk(f), Reply::bulk(v))).collect())
}

fn hkeys(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let all = tri!(hash::all_fields(ctx, &args[1]));
    Reply::Array(all.into_iter().map(|(f, _)| Reply::bulk(f)).collect())
}

fn hvals(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let all = tri!(hash::all_fields(ctx, &args[1]));
    Reply::Array(all.into_iter().map(|(_, v)| Reply::bulk(v)).collect())
}

fn hlen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let c = tri!(hash::get(ctx, &args[1]));
    Reply::Int(c.map_or(0, |c| c.size.min(i64::MAX as u64) as i64))
}

fn hexists(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(hash::get(&ctx, &args[1])) else { return Reply::Int(0) };
    Reply::Int(tri!(hash::field(&ctx, &c, &args[2])).is_some() as i64)
}

fn hstrlen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(hash::get(&ctx, &args[1])) else { return Reply::Int(0) };
    Reply::Int(tri!(hash::field(&ctx, &c, &args[2])).map_or(0, |v| v.len() as i64))
}

/// `HRANDFIELD key [count [WITHVALUES]]`: in Redis's order, the count, the options, then the key.
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
    if let (Some(n), true) = (count, withvalues) {
        tri!(coll::check_pairs_count(n));
    }
    let c = tri!(hash::get(&ctx, &args[1]));
    let Some(count) = count else {
        let Some(c) = c else { return Reply::Nil };
        let picked = tri!(hash::random_fields(&ctx, &c, 1, true));
        return picked.into_iter().next().map_or(Reply::Nil, |(f, _)| Reply::bulk(f));
    };
    let Some(c) = c else { return Reply::Array(Vec::new()) };
    let (count, distinct) = tri!(coll::pick_bound(count));
    let picked = tri!(hash::random_fields(&ctx, &c, count, distinct));
    if withvalues {
        // RESP3: one [field, value] pair per pick, as Redis sends them.
        Reply::Pairs(picked.into_iter().map(|(f, v)| (Reply::bulk(f), Reply::bulk(v))).collect())
    } else {
        Reply::Array(picked.into_iter().map(|(f, _)| Reply::bulk(f)).collect())
    }
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`: in Redis's order, the cursor, the key, the options.
fn hscan(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    tri!(super::arg_cursor(&args[2]));
    let ctx = ctx.pinned();
    let Some(c) = tri!(hash::get(&ctx, &args[1])) else { return coll::scan_reply(0, Vec::new()) };
    let sa = tri!(coll::parse_scan_args(args, 2));
    let mut items = Vec::new();
    let next = tri!(coll::scan_members(&ctx, &c, &sa, |f, v| {
        items.push(Reply::Bulk(Bytes::from(f)));
        items.push(Reply::Bulk(Bytes::from(v)));
    }));
    coll::scan_reply(next, items)
}
