//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted numerically or (ALPHA) by bytes,
//! optionally by the values of other keys (`BY pattern`), cut by `LIMIT`, each replaced by the values of
//! other keys (`GET pattern`), and (SORT only) stored as a list (`STORE destination`).
//!
//! A pattern names another key by replacing its first `*` with the element: `weight_*` is the string key
//! `weight_<element>`, `obj_*->w` the field `w` of the hash key `obj_<element>`; `#` is the element itself.
//! A `BY` pattern without `*` means "do not sort": lists and sorted sets keep their order (reversed by
//! DESC), and LIMIT reads only the range asked for. A set has no order of its own here (its members come
//! back in byte order); with `BY nosort` and STORE it is sorted ALPHA, as Redis does so that a stored result
//! never depends on a hash table's order.
//!
//! Numeric sorting reads each weight as C's `strtod` does (leading spaces, hex, `inf`), answers Redis's
//! `One or more scores can't be converted into double` for anything else, and orders equal weights by the
//! element's bytes. A `BY` key that is missing (or of another type) weighs 0 (numeric) or sorts first
//! (ALPHA).
//!
//! SORT is a write command in Redis's table (it may STORE), so it runs in the commit step: a SORT ...
//! STORE replaces the destination in the same batch as every other write of its group (all or nothing after
//! a crash). SORT_RO, which cannot store, runs on the connection's task at one snapshot.
//!
//! Cost: the whole collection is read into memory (Redis's O(N + M log M)), plus one point read per
//! element for a `BY` pattern and per element and `GET` pattern.

use super::{arg_i64, syntax_error, wrong_type, Spec};
use crate::keys::{Coll, Type};
use crate::resp::{Args, Reply};
use crate::store::{check_entry_size, ReadCtx, WriteCtx};
use crate::types::{coll, hash, list, set, zset};
use bytes::Bytes;
use std::cmp::Ordering;

pub static COMMANDS: &[Spec] = &[
    cmd! { "sort", -2, WRITE | DENYOOM, [1, 1, 1], Write(sort), "Sorts the elements in a list, a set, or a sorted set, optionally storing the result." },
    cmd! { "sort_ro", -2, READONLY, [1, 1, 1], Read(sort_ro), "Returns the sorted elements of a list, a set, or a sorted set." },
];

/// The options of one SORT, as parsed.
#[derive(Debug, Default)]
struct Opts {
    desc: bool,
    alpha: bool,
    /// LIMIT offset and count (`-1`: no limit), as given.
    offset: i64,
    count: i64,
    /// `BY` pattern (with a `*`); `None` with `nosort` means "keep the native order".
    by: Option<Bytes>,
    nosort: bool,
    gets: Vec<Bytes>,
    store: Option<Bytes>,
}

/// Parses `key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE dst]` from
/// `args[2]` on, in Redis's order of checks (options first, the key's type after). SORT_RO (`readonly`)
/// has no STORE: the word is a syntax error there.
fn parse(args: &Args, readonly: bool) -> Result<Opts, Reply> {
    let mut o = Opts { count: -1, ..Opts::default() };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if a.eq_ignore_ascii_case(b"asc") {
            o.desc = false;
        } else if a.eq_ignore_ascii_case(b"desc") {
            o.desc = true;
        } else if a.eq_ignore_ascii_case(b"alpha") {
            o.alpha = true;
        } else if a.eq_ignore_ascii_case(b"limit") && left >= 2 {
            o.offset = arg_i64(&args[j + 1])?;
            o.count = arg_i64(&args[j + 2])?;
            j += 2;
        } else if !readonly && a.eq_ignore_ascii_case(b"store") && left >= 1 {
            o.store = Some(args[j + 1].clone());
            j += 1;
        } else if a.eq_ignore_ascii_case(b"by") && left >= 1 {
            let p = &args[j + 1];
            // A pattern without '*' names one key for every element: nothing to sort by.
            o.nosort = !p.contains(&b'*');
            o.by = Some(p.clone());
            j += 1;
        } else if a.eq_ignore_ascii_case(b"get") && left >= 1 {
            o.gets.push(args[j + 1].clone());
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    Ok(o)
}

/// The value a pattern names for `elem` (`None`: no such key, a key of another type, no such field, or a
/// pattern without `*`). See the module's doc for the pattern's rules.
fn lookup(ctx: &ReadCtx<'_>, pattern: &[u8], elem: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else { return Ok(None) };
    // A hash field: the text after the first "->" following the '*', when that text is not empty.
    let field = pattern[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&arrow| arrow + 2 < pattern.len());
    let key_end = field.unwrap_or(pattern.len());
    let mut key = Vec::with_capacity(key_end + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    let Some((m, stored)) = ctx.get_meta(&key)? else { return Ok(None) };
    match field {
        Some(arrow) => {
            if m.typ != Type::Hash {
                return Ok(None);
            }
            let Some(c) = Coll::decode(&stored).map_err(Reply::err)? else { return Ok(None) };
            Ok(hash::field(ctx, &c, &pattern[arrow + 2..])?)
        }
        None if m.typ == Type::String => Ok(Some(stored[m.payload_at.min(stored.len())..].to_vec())),
        None => Ok(None),
    }
}

/// A weight read as C's `strtod` reads it, with the checks SORT makes: the whole text a number (leading
/// white space allowed, trailing not), not NaN, not out of a double's range. The empty text is 0, as
/// `strtod` leaves it.
fn weight(text: &[u8]) -> Option<f64> {
    if text.is_empty() {
        return Some(0.0);
    }
    let start = text.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))?;
    let s = std::str::from_utf8(&text[start..]).ok()?;
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let v = if body.len() > 2 && body[..2].eq_ignore_ascii_case("0x") {
        hex_float(&body[2..])?
    } else {
        // Rust's grammar is C's for decimal numbers and inf/infinity/nan, minus the leading sign
        // handled above (a second sign is refused by both).
        if body.starts_with(['+', '-']) {
            return None;
        }
        let v: f64 = body.parse().ok()?;
        let literal_inf = body.as_bytes().first().is_some_and(|b| b.eq_ignore_ascii_case(&b'i'));
        if v.is_infinite() && !literal_inf {
            return None; // overflow: ERANGE
        }
        let mantissa = body.split(['e', 'E']).next().unwrap_or("");
        if (v == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b))) || v.is_subnormal() {
            return None; // underflow: ERANGE
        }
        v
    };
    if v.is_nan() {
        return None;
    }
    Some(if neg { -v } else { v })
}

/// The value of a C hexadecimal float after its `0x`: hex digits, an optional `.` and hex digits, an
/// optional binary exponent `p[+-]digits`.
fn hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = match s.find(['p', 'P']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    let v = v * 2f64.powi(exp);
    v.is_finite().then_some(v)
}

/// One element being sorted: the element, its numeric weight, its ALPHA key from a `BY` pattern.
struct Item {
    elem: Vec<u8>,
    score: f64,
    by: Option<Vec<u8>>,
}

/// The elements `[from, to]` (positions, inclusive) of the collection in its native order (a list's,
/// or a sorted set's by score), or reversed (`desc`: position 0 is the last element).
fn native_range(ctx: &ReadCtx<'_>, typ: Type, c: &Coll, from: u64, to: u64, desc: bool) -> Result<Vec<Vec<u8>>, Reply> {
    let n = c.size;
    let (lo, hi) = if desc { (n - 1 - to, n - 1 - from) } else { (from, to) };
    let mut out = Vec::with_capacity((hi - lo + 1) as usize);
    match typ {
        Type::List => list::for_each_in(ctx, c, lo, hi + 1, |v| out.push(v.to_vec()))?,
        _ => out.extend(zset::ranked(ctx, c, lo, hi)?.into_iter().map(|(m, _)| m)),
    }
    if desc {
        out.reverse();
    }
    Ok(out)
}

/// Every element of the collection (a set's members in byte order).
fn all_elements(ctx: &ReadCtx<'_>, typ: Type, c: &Coll) -> Result<Vec<Vec<u8>>, Reply> {
    if c.size == 0 {
        return Ok(Vec::new());
    }
    Ok(match typ {
        Type::Set => set::members(ctx, c)?,
        _ => native_range(ctx, typ, c, 0, c.size - 1, false)?,
    })
}

/// What a SORT answers, before GET: the sorted elements of the window LIMIT selects.
fn sorted(ctx: &ReadCtx<'_>, key: &[u8], o: &Opts) -> Result<Vec<Vec<u8>>, Reply> {
    let ctx = ctx.pinned();
    let found = match ctx.get_meta(key)? {
        None => None,
        Some((m, stored)) => match m.typ {
            Type::List | Type::Set | Type::ZSet => {
                let c = Coll::decode(&stored).map_err(Reply::err)?.ok_or_else(wrong_type)?;
                Some((m.typ, c))
            }
            _ => return Err(wrong_type()),
        },
    };
    let (mut nosort, mut alpha, mut by) = (o.nosort, o.alpha, o.by.as_deref());
    if nosort && o.store.is_some() && found.as_ref().is_some_and(|(t, _)| *t == Type::Set) {
        (nosort, alpha, by) = (false, true, None);
    }
    let len = found.as_ref().map_or(0, |(_, c)| c.size.min(i64::MAX as u64) as i64);
    // The window, as Redis clamps it.
    let mut start = o.offset.clamp(0, len);
    let count = o.count.clamp(-1, len);
    let mut end = if count < 0 { len - 1 } else { start + count - 1 };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    end = end.min(len - 1);
    let Some((typ, c)) = found else { return Ok(Vec::new()) };
    // The window's length (0 when empty). Weights are checked on every element even then, as Redis does.
    let take = if end < start { 0 } else { (end - start + 1) as usize };
    if nosort && typ != Type::Set {
        if take == 0 {
            return Ok(Vec::new());
        }
        return native_range(&ctx, typ, &c, start as u64, end as u64, o.desc);
    }
    let elems = all_elements(&ctx, typ, &c)?;
    if nosort {
        return Ok(elems.into_iter().skip(start.max(0) as usize).take(take).collect());
    }
    let mut items = Vec::with_capacity(elems.len());
    let mut bad_score = false;
    for elem in elems {
        let mut item = Item { elem, score: 0.0, by: None };
        let weight_text = match by {
            Some(p) => lookup(&ctx, p, &item.elem)?,
            None => None,
        };
        if alpha {
            item.by = weight_text;
        } else {
            let text = match (&weight_text, by) {
                (Some(t), _) => Some(&t[..]),
                (None, None) => Some(&item.elem[..]),
                (None, Some(_)) => None,
            };
            if let Some(t) = text {
                match weight(t) {
                    Some(s) => item.score = s,
                    None => bad_score = true,
                }
            }
        }
        items.push(item);
    }
    if bad_score {
        return Err(Reply::err("One or more scores can't be converted into double"));
    }
    let by_pattern = by.is_some();
    items.sort_by(|a, b| {
        let ord = if !alpha {
            a.score.partial_cmp(&b.score).unwrap_or(Ordering::Equal).then_with(|| a.elem.cmp(&b.elem))
        } else if by_pattern {
            a.by.cmp(&b.by)
        } else {
            a.elem.cmp(&b.elem)
        };
        if o.desc {
            ord.reverse()
        } else {
            ord
        }
    });
    Ok(items.into_iter().skip(start.max(0) as usize).take(take).map(|i| i.elem).collect())
}

/// The result rows: each element, or with GET patterns the value each names (`None`: nil).
fn rows(ctx: &ReadCtx<'_>, elems: Vec<Vec<u8>>, o: &Opts) -> Result<Vec<Option<Vec<u8>>>, Reply> {
    if o.gets.is_empty() {
        return Ok(elems.into_iter().map(Some).collect());
    }
    let ctx = ctx.pinned();
    let mut out = Vec::with_capacity(elems.len().saturating_mul(o.gets.len()));
    for e in &elems {
        for g in &o.gets {
            out.push(lookup(&ctx, g, e)?);
        }
    }
    Ok(out)
}

fn reply_rows(rows: Vec<Option<Vec<u8>>>) -> Reply {
    Reply::Array(rows.into_iter().map(|r| r.map_or(Reply::Nil, Reply::bulk)).collect())
}

fn sort_ro(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let o = tri!(parse(args, true));
    let ctx = ctx.pinned();
    let elems = tri!(sorted(&ctx, &args[1], &o));
    reply_rows(tri!(rows(&ctx, elems, &o)))
}

fn sort(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let o = tri!(parse(args, false));
    // An expired source is deleted on access, as Redis does.
    tri!(ctx.get_meta(&args[1]));
    // Read as Redis reads: the source and each BY/GET key looked up (a missing one is a `keymiss`).
    let result = ctx.run_read(|view| sorted(view, &args[1], &o).and_then(|elems| rows(view, elems, &o)));
    let rows = tri!(result);
    let Some(dst) = &o.store else { return reply_rows(rows) };
    // STORE: a missing GET value is stored as an empty string. Every check comes before the first write,
    // so a refused STORE leaves the destination as it was.
    let elements: Vec<Bytes> = rows.into_iter().map(|r| Bytes::from(r.unwrap_or_default())).collect();
    if !elements.is_empty() {
        tri!(coll::check_key(dst));
        for e in &elements {
            tri!(check_entry_size(8 + 9, e.len()));
        }
    }
    let db = ctx.db_index;
    let existed = tri!(ctx.remove_key(db, dst));
    if !elements.is_empty() {
        ctx.replacing = existed.then(|| dst.clone());
        let pushed = list::push(ctx, dst, &elements, false, false);
        ctx.replacing = None;
        tri!(pushed);
        ctx.notify(crate::notify::LIST, "sortstore", dst);
    } else if existed {
        ctx.notify(crate::notify::GENERIC, "del", dst);
    }
    Reply::Int(elements.len() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_read_as_strtod_does() {
        assert_eq!(weight(b"1.5"), Some(1.5));
        assert_eq!(weight(b"  -2"), Some(-2.0));
        assert_eq!(weight(b""), Some(0.0));
        assert_eq!(weight(b"0x10"), Some(16.0));
        assert_eq!(weight(b"-0x1.8p1"), Some(-3.0));
        assert_eq!(weight(b"+inf"), Some(f64::INFINITY));
        assert_eq!(weight(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(weight(b"1e3"), Some(1000.0));
        assert_eq!(weight(b".5"), Some(0.5));
        for bad in [&b"abc"[..], b"1 ", b"1x", b"nan", b"1e400", b"1e-400", b"  ", b"--1", b"+-1", b"0x", b"1e"] {
            assert_eq!(weight(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(weight(b"0e5"), Some(0.0));
        assert_eq!(weight(b"0.000"), Some(0.0));
    }

    fn args(words: &[&str]) -> Args {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn options_parse_in_redis_order() {
        let o = parse(
            &args(&["sort", "k", "BY", "w_*", "LIMIT", "1", "2", "GET", "#", "GET", "o_*->f", "DESC", "ALPHA"]),
            false,
        )
        .unwrap();
        assert!(o.desc && o.alpha && !o.nosort);
        assert_eq!((o.offset, o.count), (1, 2));
        assert_eq!(o.gets.len(), 2);
        assert!(parse(&args(&["sort", "k", "BY", "nosort"]), false).unwrap().nosort);
        assert_eq!(parse(&args(&["sort", "k", "STORE", "d"]), true).unwrap_err(), syntax_error());
        assert_eq!(parse(&args(&["sort", "k", "STORE"]), false).unwrap_err(), syntax_error());
        assert_eq!(parse(&args(&["sort", "k", "LIMIT", "x", "1"]), false).unwrap_err(), super::super::not_an_integer());
        assert_eq!(parse(&args(&["sort", "k", "LIMIT", "1"]), false).unwrap_err(), syntax_error());
        assert_eq!(parse(&args(&["sort", "k", "STORE", "d"]), false).unwrap().store.as_deref(), Some(&b"d"[..]));
    }
}
