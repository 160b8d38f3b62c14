//! String commands: GET, SET (EX/PX/EXAT/PXAT/NX/XX/GET/KEEPTTL), SETNX, SETEX, PSETEX, MGET, MSET, MSETNX,
//! GETSET, GETDEL, GETEX, APPEND, STRLEN, GETRANGE (and its old name SUBSTR), SETRANGE, INCR, DECR, INCRBY,
//! DECRBY, INCRBYFLOAT. The bit commands and LCS are `commands/bits.rs`.
//!
//! Redis 7 semantics and error texts. Every write runs in the commit step, so read-modify-write commands
//! (INCR, APPEND, SET NX ...) are atomic; SET without NX/XX/GET/KEEPTTL is a blind write (no read). These
//! handlers parse the arguments and build the replies; the value's layout and the writes are
//! [`crate::types::string`].

use super::{arg_i64, invalid_expire, Spec};
use crate::notify;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::string;
pub use crate::types::string::{format_float, parse_float};
use bytes::Bytes;

pub static COMMANDS: &[Spec] = &[
    cmd! { "get", 2, READONLY | FAST, [1, 1, 1], Read(get), "Returns the string value of a key." },
    cmd! { "set", -3, WRITE | DENYOOM, [1, 1, 1], Write(set), "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist." },
    cmd! { "setnx", 3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(setnx), "Set the string value of a key only when the key doesn't exist." },
    cmd! { "setex", 4, WRITE | DENYOOM, [1, 1, 1], Write(setex), "Sets the string value and expiration time of a key." },
    cmd! { "psetex", 4, WRITE | DENYOOM, [1, 1, 1], Write(psetex), "Sets both string value and expiration time in milliseconds of a key." },
    cmd! { "mget", -2, READONLY | FAST, [1, -1, 1], Read(mget), "Atomically returns the string values of one or more keys." },
    cmd! { "mset", -3, WRITE | DENYOOM, [1, -1, 2], Write(mset), "Atomically creates or modifies the string values of one or more keys." },
    cmd! { "msetnx", -3, WRITE | DENYOOM, [1, -1, 2], Write(msetnx), "Atomically modifies the string values of one or more keys only when all keys don't exist." },
    cmd! { "getset", 3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(getset), "Returns the previous string value of a key after setting it to a new value." },
    cmd! { "getdel", 2, WRITE | FAST, [1, 1, 1], Write(getdel), "Returns the string value of a key after deleting the key." },
    cmd! { "getex", -2, WRITE | FAST, [1, 1, 1], Write(getex), "Returns the string value of a key after setting its expiration time." },
    cmd! { "append", 3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(append), "Appends a string to the value of a key. Creates the key if it doesn't exist." },
    cmd! { "strlen", 2, READONLY | FAST, [1, 1, 1], Read(strlen), "Returns the length of a string value." },
    cmd! { "getrange", 4, READONLY, [1, 1, 1], Read(getrange), "Returns a substring of the string stored at a key." },
    cmd! { "substr", 4, READONLY, [1, 1, 1], Read(getrange), "Returns a substring of the string stored at a key (GETRANGE's old name)." },
    cmd! { "setrange", 4, WRITE | DENYOOM, [1, 1, 1], Write(setrange), "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist." },
    cmd! { "incr", 2, WRITE | DENYOOM | FAST, [1, 1, 1], Write(incr), "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist." },
    cmd! { "decr", 2, WRITE | DENYOOM | FAST, [1, 1, 1], Write(decr), "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist." },
    cmd! { "incrby", 3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(incrby), "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist." },
    cmd! { "decrby", 3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(decrby), "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist." },
    cmd! { "incrbyfloat", 3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(incrbyfloat), "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist." },
];

super::coll::reply_from!(string::Error: Store);

fn bulk_or_nil(v: Option<Bytes>) -> Reply {
    v.map_or(Reply::Nil, Reply::Bulk)
}

/// How an expiry argument is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireUnit {
    /// EX: seconds from now.
    Ex,
    /// PX: milliseconds from now.
    Px,
    /// EXAT: Unix seconds.
    ExAt,
    /// PXAT: Unix milliseconds.
    PxAt,
}

/// Parses the expiry of SET / SETEX / PSETEX / GETEX as Redis does: a positive integer; the absolute
/// Unix milliseconds it means must fit an i64.
pub fn parse_set_expire(arg: &[u8], unit: ExpireUnit, now_ms: u64, cmd: &str) -> Result<u64, Reply> {
    let v = arg_i64(arg)?;
    if v <= 0 {
        return Err(invalid_expire(cmd));
    }
    let ms = match unit {
        ExpireUnit::Ex | ExpireUnit::ExAt => v.checked_mul(1000).ok_or_else(|| invalid_expire(cmd))?,
        ExpireUnit::Px | ExpireUnit::PxAt => v,
    };
    let at = match unit {
        ExpireUnit::Ex | ExpireUnit::Px => ms.checked_add(now_ms as i64).ok_or_else(|| invalid_expire(cmd))?,
        _ => ms,
    };
    Ok(at as u64)
}

/// The options of SET and GETEX.
#[derive(Default, Debug, PartialEq, Eq)]
struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// Absolute expiry in Unix ms.
    expire: Option<u64>,
}

/// The words of SET's (`getex == false`) or GETEX's options in `args[from..]`, checked as Redis checks them
/// first: a conflict or an unknown word is a syntax error. The expiry's value is read later
/// ([`expire_of`]): Redis looks GETEX's key up in between. Returns the options and where the expiry's value
/// is, with its unit.
fn parse_set_words(args: &Args, from: usize, getex: bool) -> Result<(SetOpts, Option<(ExpireUnit, usize)>), Reply> {
    let mut o = SetOpts::default();
    let mut expire: Option<(ExpireUnit, usize)> = None;
    let mut j = from;
    while j < args.len() {
        let opt = args[j].to_ascii_uppercase();
        let has_next = j + 1 < args.len();
        let no_expiry = expire.is_none() && !o.keepttl && !o.persist;
        match &opt[..] {
            b"NX" if !getex && !o.xx => o.nx = true,
            b"XX" if !getex && !o.nx => o.xx = true,
            b"GET" if !getex => o.get = true,
            b"KEEPTTL" if !getex && no_expiry => o.keepttl = true,
            b"PERSIST" if getex && no_expiry => o.persist = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if no_expiry && has_next => {
                let u = match &opt[..] {
                    b"EX" => ExpireUnit::Ex,
                    b"PX" => ExpireUnit::Px,
                    b"EXAT" => ExpireUnit::ExAt,
                    _ => ExpireUnit::PxAt,
                };
                j += 1;
                expire = Some((u, j));
            }
            _ => return Err(super::syntax_error()),
        }
        j += 1;
    }
    Ok((o, expire))
}

/// The absolute expiry (Unix ms) of an expiry found by [`parse_set_words`], or Redis's error.
fn expire_of(args: &Args, at: Option<(ExpireUnit, usize)>, now_ms: u64, cmd: &str) -> Result<Option<u64>, Reply> {
    at.map(|(u, j)| parse_set_expire(&args[j], u, now_ms, cmd)).transpose()
}

/// Parses `args[from..]` as SET's (`getex == false`) or GETEX's options, the expiry's value included.
fn parse_set_opts(args: &Args, from: usize, now_ms: u64, getex: bool) -> Result<SetOpts, Reply> {
    let (mut o, at) = parse_set_words(args, from, getex)?;
    o.expire = expire_of(args, at, now_ms, if getex { "getex" } else { "set" })?;
    Ok(o)
}

fn get(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    bulk_or_nil(tri!(string::get(ctx, &args[1])))
}

fn set(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if args.len() == 3 {
        // The hot path: a blind write.
        tri!(string::put(ctx, &args[1], &args[2], None));
        ctx.notify(notify::STRING, "set", &args[1]);
        return Reply::Ok;
    }
    let o = tri!(parse_set_opts(args, 3, ctx.now_ms, false));
    let cond = string::SetCond { nx: o.nx, xx: o.xx, get: o.get, keepttl: o.keepttl, expire: o.expire };
    let mark = ctx.event_mark();
    let (written, old) = tri!(string::set(ctx, &args[1], &args[2], &cond));
    if o.get && old.is_none() {
        ctx.note_miss_at(mark, &args[1]);
    }
    if written {
        ctx.notify(notify::STRING, "set", &args[1]);
        if o.expire.is_some() {
            ctx.notify(notify::GENERIC, "expire", &args[1]);
        }
    }
    match (o.get, written) {
        (true, _) => bulk_or_nil(old),
        (false, true) => Reply::Ok,
        (false, false) => Reply::Nil,
    }
}

fn setnx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let written = tri!(string::set_if_absent(ctx, &args[1], &args[2]));
    if written {
        ctx.notify(notify::STRING, "set", &args[1]);
    }
    Reply::Int(written as i64)
}

fn setex_generic(ctx: &mut WriteCtx<'_>, args: &Args, unit: ExpireUnit, cmd: &str) -> Reply {
    let at = tri!(parse_set_expire(&args[2], unit, ctx.now_ms, cmd));
    tri!(string::put(ctx, &args[1], &args[3], Some(at)));
    ctx.notify(notify::STRING, "set", &args[1]);
    ctx.notify(notify::GENERIC, "expire", &args[1]);
    Reply::Ok
}

fn setex(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    setex_generic(ctx, args, ExpireUnit::Ex, "setex")
}

fn psetex(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    setex_generic(ctx, args, ExpireUnit::Px, "psetex")
}

fn mget(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let mut out = Vec::with_capacity(args.len() - 1);
    for k in &args[1..] {
        out.push(bulk_or_nil(tri!(string::get_if_string(ctx, k))));
    }
    Reply::Array(out)
}

fn mset_check(args: &Args, cmd: &str) -> Result<(), Reply> {
    if args.len().is_multiple_of(2) {
        return Err(super::wrong_arity(cmd));
    }
    // All or none: refuse before writing anything if one pair is too large for the engine.
    for p in args[1..].chunks(2) {
        string::check_size(&p[0], &p[1])?;
    }
    Ok(())
}

fn mset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(mset_check(args, "mset"));
    tri!(set_pairs(ctx, args));
    Reply::Ok
}

fn msetnx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(mset_check(args, "msetnx"));
    for p in args[1..].chunks(2) {
        if tri!(ctx.get_meta(&p[0])).is_some() {
            return Reply::Int(0);
        }
    }
    tri!(set_pairs(ctx, args));
    Reply::Int(1)
}

/// Stores each `(key, value)` pair of MSET / MSETNX in turn, with its `set` event (after the key's `new`
/// one, as Redis orders them). Check the sizes with [`mset_check`] first.
fn set_pairs(ctx: &mut WriteCtx<'_>, args: &Args) -> Result<(), string::Error> {
    for p in args[1..].chunks(2) {
        string::put(ctx, &p[0], &p[1], None)?;
        ctx.notify(notify::STRING, "set", &p[0]);
    }
    Ok(())
}

fn getset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let mark = ctx.event_mark();
    let old = tri!(string::get_set(ctx, &args[1], &args[2]));
    if old.is_none() {
        ctx.note_miss_at(mark, &args[1]);
    }
    ctx.notify(notify::STRING, "set", &args[1]);
    bulk_or_nil(old)
}

fn getdel(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let old = tri!(string::get_del(ctx, &args[1]));
    match old {
        Some(_) => ctx.notify(notify::GENERIC, "del", &args[1]),
        None => ctx.note_miss(&args[1]),
    }
    bulk_or_nil(old)
}

fn getex(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    // Redis's order: the option words, then the key (missing: nil, whatever the expiry says; another type:
    // WRONGTYPE), then the expiry's value.
    let (o, at) = tri!(parse_set_words(args, 2, true));
    let Some(found) = tri!(string::get_stored_mut(ctx, &args[1])) else {
        ctx.note_miss(&args[1]);
        return Reply::Nil;
    };
    let expire = tri!(expire_of(args, at, ctx.now_ms, "getex"));
    let had_ttl = found.0.expire_at_ms.is_some();
    let value = tri!(string::get_ex(ctx, &args[1], found, expire, o.persist));
    match expire {
        Some(at) if at <= ctx.now_ms => ctx.notify(notify::GENERIC, "del", &args[1]),
        Some(_) => ctx.notify(notify::GENERIC, "expire", &args[1]),
        None if o.persist && had_ttl => ctx.notify(notify::GENERIC, "persist", &args[1]),
        None => {}
    }
    Reply::Bulk(value)
}

fn append(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let len = tri!(string::append(ctx, &args[1], &args[2]));
    ctx.notify(notify::STRING, "append", &args[1]);
    Reply::Int(len as i64)
}

fn strlen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    Reply::Int(tri!(string::get(ctx, &args[1])).map_or(0, |v| v.len() as i64))
}

fn getrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let start = tri!(arg_i64(&args[2]));
    let end = tri!(arg_i64(&args[3]));
    let v = tri!(string::get(ctx, &args[1])).unwrap_or_default();
    match string::getrange_bounds(start, end, v.len()) {
        Some((a, b)) => Reply::Bulk(v.slice(a..b)),
        None => Reply::Bulk(Bytes::new()),
    }
}

fn setrange(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let offset = tri!(arg_i64(&args[2]));
    if offset < 0 {
        return Reply::err("offset is out of range");
    }
    let len = tri!(string::set_range(ctx, &args[1], offset as u64, &args[3]));
    if !args[3].is_empty() {
        ctx.notify(notify::STRING, "setrange", &args[1]);
    }
    Reply::Int(len as i64)
}

fn incr_generic(ctx: &mut WriteCtx<'_>, key: &[u8], by: i64) -> Reply {
    let n = tri!(string::incr_by(ctx, key, by));
    ctx.notify(notify::STRING, "incrby", key);
    Reply::Int(n)
}

fn incr(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    incr_generic(ctx, &args[1], 1)
}

fn decr(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    incr_generic(ctx, &args[1], -1)
}

fn incrby(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let by = tri!(arg_i64(&args[2]));
    incr_generic(ctx, &args[1], by)
}

fn decrby(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let by = tri!(arg_i64(&args[2]));
    let Some(neg) = by.checked_neg() else { return Reply::err("decrement would overflow") };
    incr_generic(ctx, &args[1], neg)
}

fn incrbyfloat(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    // As Redis: the key's type first, then the stored value, then the increment (an infinite increment is a
    // number whose sum is refused).
    let found = tri!(string::get_stored_mut(ctx, &args[1]));
    let v = tri!(string::incr_by_float(ctx, &args[1], found, &args[2]));
    ctx.notify(notify::STRING, "incrbyfloat", &args[1]);
    Reply::bulk(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_options_conflicts_are_syntax_errors() {
        let a = |s: &str| -> Args { s.split(' ').map(|w| Bytes::copy_from_slice(w.as_bytes())).collect() };
        let ok = |s: &str| parse_set_opts(&a(s), 3, 1000, false);
        assert!(ok("set k v NX GET").is_ok());
        assert!(ok("set k v NX XX").is_err());
        assert!(ok("set k v EX 1 PX 1").is_err());
        assert!(ok("set k v KEEPTTL EX 1").is_err());
        assert!(ok("set k v EX 1 KEEPTTL").is_err());
        assert!(ok("set k v EX").is_err());
        assert!(ok("set k v PERSIST").is_err());
        assert_eq!(ok("set k v px 5").unwrap().expire, Some(1005));
        assert_eq!(ok("set k v exat 5").unwrap().expire, Some(5000));
        assert!(matches!(ok("set k v EX 0"), Err(Reply::Error(e)) if e == "ERR invalid expire time in 'set' command"));
        assert!(matches!(ok("set k v EX 9223372036854775807"), Err(Reply::Error(e)) if e.contains("invalid expire")));
        assert!(matches!(ok("set k v EX x"), Err(Reply::Error(e)) if e.contains("not an integer")));
        let g = parse_set_opts(&a("getex k PERSIST"), 2, 0, true).unwrap();
        assert!(g.persist);
        assert!(parse_set_opts(&a("getex k PERSIST EX 1"), 2, 0, true).is_err());
        assert!(parse_set_opts(&a("getex k NX"), 2, 0, true).is_err());
        // The words are checked before the expiry's value.
        assert_eq!(parse_set_words(&a("set k v EX abc NX XX"), 3, false), Err(super::super::syntax_error()));
        let (_, at) = parse_set_words(&a("getex k EX 0"), 2, true).unwrap();
        assert_eq!(at, Some((ExpireUnit::Ex, 3)));
    }
}
