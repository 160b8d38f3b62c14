//! String commands: GET, SET (EX/PX/EXAT/PXAT/NX/XX/GET/KEEPTTL), SETNX, SETEX, PSETEX, MGET, MSET, MSETNX,
//! GETSET, GETDEL, GETEX, APPEND, STRLEN, GETRANGE, SETRANGE, INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT.
//!
//! Redis 7 semantics and error texts. Every write runs on the commit thread, so read-modify-write commands
//! (INCR, APPEND, SET NX ...) are atomic; SET without NX/XX/GET/KEEPTTL is a blind write (no read).

use super::flags::*;
use super::{arg_i64, Handler, Spec};
use crate::keys::{self, Meta, Type};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;

/// Redis's `proto-max-bulk-len` default: the longest string SETRANGE and APPEND may build.
pub const MAX_STRING_LEN: u64 = 512 << 20;

macro_rules! spec {
    ($name:literal, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $h:expr, $sum:literal) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            step: $step,
            handler: $h,
            summary: $sum,
        }
    };
}
pub(crate) use spec;

pub static COMMANDS: &[Spec] = &[
    spec!("get", 2, READONLY | FAST, 1, 1, 1, Handler::Read(get), "Returns the string value of a key."),
    spec!(
        "set",
        -3,
        WRITE | DENYOOM,
        1,
        1,
        1,
        Handler::Write(set),
        "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."
    ),
    spec!(
        "setnx",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(setnx),
        "Set the string value of a key only when the key doesn't exist."
    ),
    spec!(
        "setex",
        4,
        WRITE | DENYOOM,
        1,
        1,
        1,
        Handler::Write(setex),
        "Sets the string value and expiration time of a key."
    ),
    spec!(
        "psetex",
        4,
        WRITE | DENYOOM,
        1,
        1,
        1,
        Handler::Write(psetex),
        "Sets both string value and expiration time in milliseconds of a key."
    ),
    spec!(
        "mget",
        -2,
        READONLY | FAST,
        1,
        -1,
        1,
        Handler::Read(mget),
        "Atomically returns the string values of one or more keys."
    ),
    spec!(
        "mset",
        -3,
        WRITE | DENYOOM,
        1,
        -1,
        2,
        Handler::Write(mset),
        "Atomically creates or modifies the string values of one or more keys."
    ),
    spec!(
        "msetnx",
        -3,
        WRITE | DENYOOM,
        1,
        -1,
        2,
        Handler::Write(msetnx),
        "Atomically modifies the string values of one or more keys only when all keys don't exist."
    ),
    spec!(
        "getset",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(getset),
        "Returns the previous string value of a key after setting it to a new value."
    ),
    spec!(
        "getdel",
        2,
        WRITE | FAST,
        1,
        1,
        1,
        Handler::Write(getdel),
        "Returns the string value of a key after deleting the key."
    ),
    spec!(
        "getex",
        -2,
        WRITE | FAST,
        1,
        1,
        1,
        Handler::Write(getex),
        "Returns the string value of a key after setting its expiration time."
    ),
    spec!(
        "append",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(append),
        "Appends a string to the value of a key. Creates the key if it doesn't exist."
    ),
    spec!("strlen", 2, READONLY | FAST, 1, 1, 1, Handler::Read(strlen), "Returns the length of a string value."),
    spec!(
        "getrange",
        4,
        READONLY,
        1,
        1,
        1,
        Handler::Read(getrange),
        "Returns a substring of the string stored at a key."
    ),
    spec!(
        "setrange",
        4,
        WRITE | DENYOOM,
        1,
        1,
        1,
        Handler::Write(setrange),
        "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist."
    ),
    spec!(
        "incr",
        2,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(incr),
        "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."
    ),
    spec!(
        "decr",
        2,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(decr),
        "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."
    ),
    spec!(
        "incrby",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(incrby),
        "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."
    ),
    spec!(
        "decrby",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(decrby),
        "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."
    ),
    spec!(
        "incrbyfloat",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        Handler::Write(incrbyfloat),
        "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist."
    ),
];

/// A live string: its meta and whole stored value; `Ok(None)` if missing; WRONGTYPE for another type.
fn string_r(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<(Meta, Bytes)>, Reply> {
    match ctx.get_meta(key)? {
        Some((m, v)) if m.typ == Type::String => Ok(Some((m, v))),
        Some(_) => Err(super::wrong_type()),
        None => Ok(None),
    }
}

fn string_w(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<Option<(Meta, Bytes)>, Reply> {
    match ctx.get_meta(key)? {
        Some((m, v)) if m.typ == Type::String => Ok(Some((m, v))),
        Some(_) => Err(super::wrong_type()),
        None => Ok(None),
    }
}

fn value_of(found: Option<(Meta, Bytes)>) -> Option<Bytes> {
    found.map(|(m, v)| keys::payload(v, &m))
}

fn bulk_or_nil(v: Option<Bytes>) -> Reply {
    v.map_or(Reply::Nil, Reply::Bulk)
}

/// `ERR invalid expire time in '<cmd>' command`.
pub fn invalid_expire(cmd: &str) -> Reply {
    Reply::err(format!("invalid expire time in '{cmd}' command"))
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

/// Parses `args[from..]` as SET's (`getex == false`) or GETEX's options; a conflict is a syntax error.
fn parse_set_opts(args: &Args, from: usize, now_ms: u64, getex: bool) -> Result<SetOpts, Reply> {
    let cmd = if getex { "getex" } else { "set" };
    let mut o = SetOpts::default();
    let mut unit: Option<ExpireUnit> = None;
    let mut j = from;
    while j < args.len() {
        let opt = args[j].to_ascii_uppercase();
        let has_next = j + 1 < args.len();
        let no_expiry = unit.is_none() && !o.keepttl && !o.persist;
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
                unit = Some(u);
                j += 1;
                o.expire = Some(parse_set_expire(&args[j], u, now_ms, cmd)?);
            }
            _ => return Err(super::syntax_error()),
        }
        j += 1;
    }
    Ok(o)
}

fn get(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    bulk_or_nil(value_of(tri!(string_r(ctx, &args[1]))))
}

/// Writes a string, or deletes the key when its expiry is already past (Redis sets and expires it at once).
fn store_string(ctx: &mut WriteCtx<'_>, key: &[u8], value: &[u8], expire: Option<u64>) -> Result<(), Reply> {
    if expire.is_some_and(|t| t <= ctx.now_ms) {
        ctx.delete_key(key);
        return Ok(());
    }
    ctx.put_string(key, value, expire)
}

fn set(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if args.len() == 3 {
        // The hot path: a blind write.
        return match ctx.put_string(&args[1], &args[2], None) {
            Ok(()) => Reply::Ok,
            Err(e) => e,
        };
    }
    let o = tri!(parse_set_opts(args, 3, ctx.now_ms, false));
    if !(o.nx || o.xx || o.get || o.keepttl) {
        return match store_string(ctx, &args[1], &args[2], o.expire) {
            Ok(()) => Reply::Ok,
            Err(e) => e,
        };
    }
    let old = if o.get {
        tri!(string_w(ctx, &args[1]))
    } else {
        match ctx.get_meta(&args[1]) {
            Ok(x) => x,
            Err(e) => return e,
        }
    };
    let found = old.is_some();
    let old_ttl = old.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let reply_old = || if o.get { bulk_or_nil(value_of(old.clone())) } else { Reply::Nil };
    if (o.nx && found) || (o.xx && !found) {
        return reply_old();
    }
    let expire = if o.keepttl { old_ttl } else { o.expire };
    if let Err(e) = store_string(ctx, &args[1], &args[2], expire) {
        return e;
    }
    if o.get {
        reply_old()
    } else {
        Reply::Ok
    }
}

fn setnx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if tri!(ctx.get_meta(&args[1])).is_some() {
        return Reply::Int(0);
    }
    match ctx.put_string(&args[1], &args[2], None) {
        Ok(()) => Reply::Int(1),
        Err(e) => e,
    }
}

fn setex_generic(ctx: &mut WriteCtx<'_>, args: &Args, unit: ExpireUnit, cmd: &str) -> Reply {
    let at = tri!(parse_set_expire(&args[2], unit, ctx.now_ms, cmd));
    match ctx.put_string(&args[1], &args[3], Some(at)) {
        Ok(()) => Reply::Ok,
        Err(e) => e,
    }
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
        out.push(match ctx.get_meta(k) {
            Ok(Some((m, v))) if m.typ == Type::String => Reply::Bulk(keys::payload(v, &m)),
            Ok(_) => Reply::Nil,
            Err(e) => return e,
        });
    }
    Reply::Array(out)
}

fn mset_check(args: &Args, cmd: &str) -> Result<(), Reply> {
    if args.len().is_multiple_of(2) {
        return Err(super::wrong_arity(cmd));
    }
    // All or none: refuse before writing anything if one pair is too large for the engine.
    for p in args[1..].chunks(2) {
        crate::store::check_entry_size(p[0].len(), p[1].len() + 9)?;
    }
    Ok(())
}

fn mset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(mset_check(args, "mset"));
    for p in args[1..].chunks(2) {
        tri!(ctx.put_string(&p[0], &p[1], None));
    }
    Reply::Ok
}

fn msetnx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(mset_check(args, "msetnx"));
    for p in args[1..].chunks(2) {
        if tri!(ctx.get_meta(&p[0])).is_some() {
            return Reply::Int(0);
        }
    }
    for p in args[1..].chunks(2) {
        tri!(ctx.put_string(&p[0], &p[1], None));
    }
    Reply::Int(1)
}

fn getset(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let old = value_of(tri!(string_w(ctx, &args[1])));
    tri!(ctx.put_string(&args[1], &args[2], None));
    bulk_or_nil(old)
}

fn getdel(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let old = value_of(tri!(string_w(ctx, &args[1])));
    if old.is_some() {
        ctx.delete_key(&args[1]);
    }
    bulk_or_nil(old)
}

fn getex(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let o = tri!(parse_set_opts(args, 2, ctx.now_ms, true));
    let Some((m, v)) = tri!(string_w(ctx, &args[1])) else { return Reply::Nil };
    let value = keys::payload(v, &m);
    if let Some(at) = o.expire {
        tri!(store_string(ctx, &args[1], &value, Some(at)));
    } else if o.persist && m.expire_at_ms.is_some() {
        tri!(ctx.put_string(&args[1], &value, None));
    }
    Reply::Bulk(value)
}

/// `ERR string exceeds maximum allowed size (proto-max-bulk-len)` unless `size + append` fits.
fn check_string_length(size: u64, append: u64) -> Result<(), Reply> {
    match size.checked_add(append) {
        Some(t) if t <= MAX_STRING_LEN => Ok(()),
        _ => Err(Reply::err("string exceeds maximum allowed size (proto-max-bulk-len)")),
    }
}

fn append(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let found = tri!(string_w(ctx, &args[1]));
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old = value_of(found).unwrap_or_default();
    tri!(check_string_length(old.len() as u64, args[2].len() as u64));
    let mut v = Vec::with_capacity(old.len() + args[2].len());
    v.extend_from_slice(&old);
    v.extend_from_slice(&args[2]);
    tri!(ctx.put_string(&args[1], &v, ttl));
    Reply::Int(v.len() as i64)
}

fn strlen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    Reply::Int(value_of(tri!(string_r(ctx, &args[1]))).map_or(0, |v| v.len() as i64))
}

/// Redis's GETRANGE index rules on a string of `len` bytes: the byte range to return (empty: `None`).
pub fn getrange_bounds(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let len = len as i64;
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    if len == 0 || s > e {
        return None;
    }
    Some((s as usize, e as usize + 1))
}

fn getrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let start = tri!(arg_i64(&args[2]));
    let end = tri!(arg_i64(&args[3]));
    let v = value_of(tri!(string_r(ctx, &args[1]))).unwrap_or_default();
    match getrange_bounds(start, end, v.len()) {
        Some((a, b)) => Reply::Bulk(v.slice(a..b)),
        None => Reply::Bulk(Bytes::new()),
    }
}

fn setrange(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let offset = tri!(arg_i64(&args[2]));
    if offset < 0 {
        return Reply::err("offset is out of range");
    }
    let offset = offset as u64;
    let patch = &args[3];
    let found = tri!(string_w(ctx, &args[1]));
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old = value_of(found).unwrap_or_default();
    if patch.is_empty() {
        return Reply::Int(old.len() as i64);
    }
    tri!(check_string_length(offset, patch.len() as u64));
    // Within 512 MB: fits usize; the engine's own limit is checked by put_string before anything is built
    // beyond what the reply needs.
    let new_len = (old.len() as u64).max(offset + patch.len() as u64) as usize;
    tri!(crate::store::check_entry_size(args[1].len(), new_len + 9));
    let mut v = Vec::with_capacity(new_len);
    v.extend_from_slice(&old);
    v.resize(new_len, 0);
    v[offset as usize..offset as usize + patch.len()].copy_from_slice(patch);
    tri!(ctx.put_string(&args[1], &v, ttl));
    Reply::Int(v.len() as i64)
}

fn incr_generic(ctx: &mut WriteCtx<'_>, key: &[u8], by: i64) -> Reply {
    let found = tri!(string_w(ctx, key));
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old = match value_of(found) {
        Some(v) => tri!(crate::resp::parse_i64(&v).ok_or_else(super::not_an_integer)),
        None => 0,
    };
    let Some(new) = old.checked_add(by) else {
        return Reply::err("increment or decrement would overflow");
    };
    tri!(ctx.put_string(key, new.to_string().as_bytes(), ttl));
    Reply::Int(new)
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

/// Parses a float as Redis's string2ld does: no leading space, finite, at most 5 KB of text.
pub fn parse_float(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a.len() > 5 * 1024 || a[0].is_ascii_whitespace() {
        return None;
    }
    let v: f64 = std::str::from_utf8(a).ok()?.parse().ok()?;
    v.is_finite().then_some(v)
}

/// INCRBYFLOAT's result text: the shortest decimal that reads back as the same number, never in exponent
/// form (Redis prints `%.17Lf` of a long double with trailing zeros removed, which gives the same text for
/// the values a double holds exactly, e.g. `10.6`, `5200`, `-0.5`).
pub fn format_float(v: f64) -> String {
    let s = format!("{v}");
    if s == "-0" {
        return "0".into();
    }
    s
}

fn incrbyfloat(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let not_float = || Reply::err("value is not a valid float");
    let found = tri!(string_w(ctx, &args[1]));
    // As Redis: the stored value is checked first, and an infinite increment is a valid float whose sum is
    // refused below.
    let by = match std::str::from_utf8(&args[2]).ok().filter(|t| !t.starts_with(char::is_whitespace)) {
        Some(t) if t.len() <= 5 * 1024 => match t.parse::<f64>() {
            Ok(v) if !v.is_nan() => v,
            _ => return not_float(),
        },
        _ => return not_float(),
    };
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old = match value_of(found) {
        Some(v) => match parse_float(&v) {
            Some(x) => x,
            None => return not_float(),
        },
        None => 0.0,
    };
    let new = old + by;
    if !new.is_finite() {
        return Reply::err("increment would produce NaN or Infinity");
    }
    let text = format_float(new);
    tri!(ctx.put_string(&args[1], text.as_bytes(), ttl));
    Reply::bulk(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getrange_follows_redis_index_rules() {
        // "Hello World" is 11 bytes.
        assert_eq!(getrange_bounds(0, 3, 11), Some((0, 4)));
        assert_eq!(getrange_bounds(-3, -1, 11), Some((8, 11)));
        assert_eq!(getrange_bounds(0, -1, 11), Some((0, 11)));
        assert_eq!(getrange_bounds(10, 100, 11), Some((10, 11)));
        assert_eq!(getrange_bounds(-1, -5, 11), None);
        assert_eq!(getrange_bounds(5, 3, 11), None);
        assert_eq!(getrange_bounds(-100, 2, 11), Some((0, 3)));
        assert_eq!(getrange_bounds(0, 0, 0), None);
        assert_eq!(getrange_bounds(20, 30, 11), None);
        assert_eq!(getrange_bounds(i64::MIN, i64::MAX, 11), Some((0, 11)));
    }

    #[test]
    fn floats_parse_and_format_like_redis() {
        assert_eq!(parse_float(b"10.5"), Some(10.5));
        assert_eq!(parse_float(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b"inf"), None);
        assert_eq!(parse_float(b"abc"), None);
        assert_eq!(format_float(10.5 + 0.1), "10.6");
        assert_eq!(format_float(5200.0), "5200");
        assert_eq!(format_float(-0.5), "-0.5");
        assert_eq!(format_float(1e20), "100000000000000000000");
        assert_eq!(format_float(-0.0), "0");
    }

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
    }
}
