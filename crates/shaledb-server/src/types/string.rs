//! Strings on the engine: the value inline in the meta value (docs/format/server-keys.md, "Grammar":
//! `meta_value := head expire_at_ms? payload`, the payload being the string's bytes), so a read or a write
//! of a string is one engine key; and the operations SET (with its conditions), GETSET, GETDEL, GETEX,
//! APPEND, SETRANGE, INCRBY and INCRBYFLOAT perform on it (the bit operations are [`super::bits`]). Every
//! write runs in the commit step, so the read-modify-write operations are atomic.

use crate::keys::{self, Meta, Type};
use crate::store::{self, ReadCtx, WriteCtx};
use bytes::Bytes;

/// Redis's `proto-max-bulk-len` default: the longest string SETRANGE and APPEND may build.
pub const MAX_STRING_LEN: u64 = 512 << 20;

/// Why a string operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The store failed (wrong type, corrupt meta value, failed read, entry too large).
    #[error(transparent)]
    Store(#[from] store::Error),
    /// INCR on a value that is not an integer.
    #[error("value is not an integer or out of range")]
    NotInteger,
    /// INCR past the i64 range.
    #[error("increment or decrement would overflow")]
    Overflow,
    /// INCRBYFLOAT on a value that is not a float.
    #[error("value is not a valid float")]
    NotFloat,
    /// INCRBYFLOAT to an infinite or NaN result.
    #[error("increment would produce NaN or Infinity")]
    NotFinite,
    /// APPEND or SETRANGE past [`MAX_STRING_LEN`].
    #[error("string exceeds maximum allowed size (proto-max-bulk-len)")]
    TooLong,
}

/// A live string: its meta and whole stored value; `Ok(None)` if missing; WRONGTYPE for another type.
pub fn get_stored(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<(Meta, Bytes)>, Error> {
    match ctx.get_meta(key)? {
        Some((m, v)) if m.typ == Type::String => Ok(Some((m, v))),
        Some(_) => Err(store::Error::WrongType.into()),
        None => Ok(None),
    }
}

/// [`get_stored`] in the commit step.
pub fn get_stored_mut(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<Option<(Meta, Bytes)>, Error> {
    match ctx.get_meta(key)? {
        Some((m, v)) if m.typ == Type::String => Ok(Some((m, v))),
        Some(_) => Err(store::Error::WrongType.into()),
        None => Ok(None),
    }
}

/// The value of a string read with [`get_stored`].
pub fn value_of(found: Option<(Meta, Bytes)>) -> Option<Bytes> {
    found.map(|(m, v)| keys::payload(v, &m))
}

/// The value of the string `key`; `Ok(None)` if missing; WRONGTYPE for another type.
pub fn get(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Bytes>, Error> {
    Ok(value_of(get_stored(ctx, key)?))
}

/// The value of `key` if it holds a string, `None` whatever else it holds (MGET).
pub fn get_if_string(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Bytes>, Error> {
    Ok(match ctx.get_meta(key)? {
        Some((m, v)) if m.typ == Type::String => Some(keys::payload(v, &m)),
        _ => None,
    })
}

/// Stores `value` (with its expiry) as `key`, whatever `key` held.
pub fn put(ctx: &mut WriteCtx<'_>, key: &[u8], value: &[u8], expire: Option<u64>) -> Result<(), Error> {
    Ok(ctx.put_string(key, value, expire)?)
}

/// Writes a string, or deletes the key when its expiry is already past (Redis sets and expires it at once).
pub fn store(ctx: &mut WriteCtx<'_>, key: &[u8], value: &[u8], expire: Option<u64>) -> Result<(), Error> {
    if expire.is_some_and(|t| t <= ctx.now_ms) {
        ctx.delete_key(key);
        return Ok(());
    }
    Ok(ctx.put_string(key, value, expire)?)
}

/// Refuses a key and value the engine could not hold as a string.
pub fn check_size(key: &[u8], value: &[u8]) -> Result<(), Error> {
    Ok(crate::store::check_entry_size(key.len(), value.len() + 9)?)
}

/// The conditions of SET: NX, XX, GET, KEEPTTL, and the new expiry (absolute Unix ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetCond {
    pub nx: bool,
    pub xx: bool,
    pub get: bool,
    pub keepttl: bool,
    pub expire: Option<u64>,
}

/// SET with conditions: stores `value` as `key` unless NX or XX says no. Returns whether it was written,
/// and (with GET) the old value; GET makes a key of another type an error.
pub fn set(ctx: &mut WriteCtx<'_>, key: &[u8], value: &[u8], o: &SetCond) -> Result<(bool, Option<Bytes>), Error> {
    if !(o.nx || o.xx || o.get || o.keepttl) {
        store(ctx, key, value, o.expire)?;
        return Ok((true, None));
    }
    let old = if o.get { get_stored_mut(ctx, key)? } else { ctx.get_meta(key)? };
    let found = old.is_some();
    let old_ttl = old.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old_value = if o.get { value_of(old) } else { None };
    if (o.nx && found) || (o.xx && !found) {
        return Ok((false, old_value));
    }
    let expire = if o.keepttl { old_ttl } else { o.expire };
    store(ctx, key, value, expire)?;
    Ok((true, old_value))
}

/// Stores `value` as `key` only when `key` holds nothing (SETNX). Returns whether it was written.
pub fn set_if_absent(ctx: &mut WriteCtx<'_>, key: &[u8], value: &[u8]) -> Result<bool, Error> {
    if ctx.get_meta(key)?.is_some() {
        return Ok(false);
    }
    put(ctx, key, value, None)?;
    Ok(true)
}

/// Stores the `(key, value)` pairs of `pairs` (MSET); with `nx` none of them when any key holds
/// something (MSETNX). Returns whether they were written. Check the sizes with [`check_size`] first.
pub fn set_many(ctx: &mut WriteCtx<'_>, pairs: &[Bytes], nx: bool) -> Result<bool, Error> {
    if nx {
        for p in pairs.chunks(2) {
            if ctx.get_meta(&p[0])?.is_some() {
                return Ok(false);
            }
        }
    }
    for p in pairs.chunks(2) {
        put(ctx, &p[0], &p[1], None)?;
    }
    Ok(true)
}

/// Replaces the string `key` with `value` (GETSET). Returns the old value.
pub fn get_set(ctx: &mut WriteCtx<'_>, key: &[u8], value: &[u8]) -> Result<Option<Bytes>, Error> {
    let old = value_of(get_stored_mut(ctx, key)?);
    put(ctx, key, value, None)?;
    Ok(old)
}

/// Deletes the string `key` (GETDEL). Returns its value.
pub fn get_del(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<Option<Bytes>, Error> {
    let old = value_of(get_stored_mut(ctx, key)?);
    if old.is_some() {
        ctx.delete_key(key);
    }
    Ok(old)
}

/// The value of the string `key` (`found`, as [`get_stored_mut`] read it) after giving it the expiry
/// `expire` or (`persist`) none (GETEX).
pub fn get_ex(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    found: (Meta, Bytes),
    expire: Option<u64>,
    persist: bool,
) -> Result<Bytes, Error> {
    let (m, v) = found;
    let value = keys::payload(v, &m);
    if let Some(at) = expire {
        store(ctx, key, &value, Some(at))?;
    } else if persist && m.expire_at_ms.is_some() {
        put(ctx, key, &value, None)?;
    }
    Ok(value)
}

/// `TooLong` unless `size + append` fits [`MAX_STRING_LEN`].
fn check_string_length(size: u64, append: u64) -> Result<(), Error> {
    match size.checked_add(append) {
        Some(t) if t <= MAX_STRING_LEN => Ok(()),
        _ => Err(Error::TooLong),
    }
}

/// Appends `tail` to the string `key`, keeping its expiry (APPEND). Returns the new length.
pub fn append(ctx: &mut WriteCtx<'_>, key: &[u8], tail: &[u8]) -> Result<u64, Error> {
    let found = get_stored_mut(ctx, key)?;
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old = value_of(found).unwrap_or_default();
    check_string_length(old.len() as u64, tail.len() as u64)?;
    let mut v = Vec::with_capacity(old.len() + tail.len());
    v.extend_from_slice(&old);
    v.extend_from_slice(tail);
    put(ctx, key, &v, ttl)?;
    Ok(v.len() as u64)
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

/// Overwrites the string `key` with `patch` at `offset`, zero-padding, keeping its expiry (SETRANGE).
/// Returns the new length.
pub fn set_range(ctx: &mut WriteCtx<'_>, key: &[u8], offset: u64, patch: &[u8]) -> Result<u64, Error> {
    let found = get_stored_mut(ctx, key)?;
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old = value_of(found).unwrap_or_default();
    if patch.is_empty() {
        return Ok(old.len() as u64);
    }
    check_string_length(offset, patch.len() as u64)?;
    // Within 512 MB: fits usize; the engine's own limit is checked by put_string before anything is built
    // beyond what the reply needs.
    let new_len = (old.len() as u64).max(offset + patch.len() as u64) as usize;
    crate::store::check_entry_size(key.len(), new_len + 9)?;
    let mut v = Vec::with_capacity(new_len);
    v.extend_from_slice(&old);
    v.resize(new_len, 0);
    v[offset as usize..offset as usize + patch.len()].copy_from_slice(patch);
    put(ctx, key, &v, ttl)?;
    Ok(v.len() as u64)
}

/// Adds `by` to the integer in the string `key` (0 when missing), keeping its expiry (INCRBY and its
/// forms). Returns the new value.
pub fn incr_by(ctx: &mut WriteCtx<'_>, key: &[u8], by: i64) -> Result<i64, Error> {
    let found = get_stored_mut(ctx, key)?;
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old = match value_of(found) {
        Some(v) => crate::resp::parse_i64(&v).ok_or(Error::NotInteger)?,
        None => 0,
    };
    let new = old.checked_add(by).ok_or(Error::Overflow)?;
    put(ctx, key, new.to_string().as_bytes(), ttl)?;
    Ok(new)
}

/// Adds the number `by` (its text) to the number in the string `found` (as [`get_stored_mut`] read `key`; 0
/// when missing) in C's `long double`, keeping its expiry (INCRBYFLOAT). Returns the new value's text, as
/// stored: Redis's, byte for byte ([`super::long_double`]).
pub fn incr_by_float(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    found: Option<(Meta, Bytes)>,
    by: &[u8],
) -> Result<String, Error> {
    let ttl = found.as_ref().and_then(|(m, _)| m.expire_at_ms);
    let old = value_of(found);
    let text = super::long_double::add(old.as_deref(), by).map_err(|e| match e {
        super::long_double::AddError::NotFinite => Error::NotFinite,
        _ => Error::NotFloat,
    })?;
    put(ctx, key, text.as_bytes(), ttl)?;
    Ok(text)
}

/// Parses a float as Redis's string2ld does: no leading space, finite, at most 5 KB of text.
pub fn parse_float(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a.len() > 5 * 1024 || a[0].is_ascii_whitespace() {
        return None;
    }
    let v: f64 = std::str::from_utf8(a).ok()?.parse().ok()?;
    v.is_finite().then_some(v)
}

/// The shortest decimal that reads back as the same `f64`, never in exponent form, `-0` as `0`. Not what
/// INCRBYFLOAT stores (that is [`super::long_double::add`]'s `long double` text).
pub fn format_float(v: f64) -> String {
    let s = format!("{v}");
    if s == "-0" {
        return "0".into();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn conditional_sets_and_read_modify_writes() {
        use crate::store::now_ms;
        use crate::types::testing::{group, temp_db};
        let (_dir, db) = temp_db();
        let mut ctx = group(&db);
        let get_now = |ctx: &WriteCtx<'_>, k: &[u8]| get(&ctx.view(), k).unwrap();
        let nx = SetCond { nx: true, get: true, ..SetCond::default() };
        assert_eq!(set(&mut ctx, b"k", b"1", &nx).unwrap(), (true, None));
        assert_eq!(set(&mut ctx, b"k", b"2", &nx).unwrap(), (false, Some(Bytes::from("1"))));
        let ttl = now_ms() + 60_000;
        set(&mut ctx, b"k", b"5", &SetCond { expire: Some(ttl), ..SetCond::default() }).unwrap();
        // Read-modify-writes keep the expiry.
        assert_eq!(incr_by(&mut ctx, b"k", 10).unwrap(), 15);
        assert_eq!(append(&mut ctx, b"k", b"x").unwrap(), 3);
        assert_eq!(get_stored_mut(&mut ctx, b"k").unwrap().unwrap().0.expire_at_ms, Some(ttl));
        assert_eq!(incr_by(&mut ctx, b"k", 1), Err(Error::NotInteger));
        assert_eq!(set_range(&mut ctx, b"r", 3, b"ab").unwrap(), 5);
        assert_eq!(get_now(&ctx, b"r").as_deref(), Some(&b"\0\0\0ab"[..]));
        assert_eq!(set_range(&mut ctx, b"r", MAX_STRING_LEN, b"a"), Err(Error::TooLong));
        put(&mut ctx, b"i", i64::MAX.to_string().as_bytes(), None).unwrap();
        assert_eq!(incr_by(&mut ctx, b"i", 1), Err(Error::Overflow));
        let found = get_stored_mut(&mut ctx, b"f").unwrap();
        assert_eq!(incr_by_float(&mut ctx, b"f", found, b"2.5").unwrap(), "2.5");
        let found = get_stored_mut(&mut ctx, b"f").unwrap();
        assert_eq!(incr_by_float(&mut ctx, b"f", found, b"0.1").unwrap(), "2.6");
        let found = get_stored_mut(&mut ctx, b"f").unwrap();
        assert_eq!(incr_by_float(&mut ctx, b"f", found, b"inf"), Err(Error::NotFinite));
        let found = get_stored_mut(&mut ctx, b"f").unwrap();
        assert_eq!(incr_by_float(&mut ctx, b"f", found, b"x"), Err(Error::NotFloat));
        // An expiry already past deletes the key.
        store(&mut ctx, b"f", b"v", Some(1)).unwrap();
        assert_eq!(get_now(&ctx, b"f"), None);
        assert_eq!(get_set(&mut ctx, b"r", b"new").unwrap().as_deref(), Some(&b"\0\0\0ab"[..]));
        assert_eq!(get_del(&mut ctx, b"r").unwrap().as_deref(), Some(&b"new"[..]));
        assert_eq!(get_now(&ctx, b"r"), None);
        assert!(!set_many(&mut ctx, &[Bytes::from("k"), Bytes::from("v")], true).unwrap());
        assert_eq!(get_if_string(&ctx.view(), b"k").unwrap().as_deref(), Some(&b"15x"[..]));
        push_list(&mut ctx);
        assert_eq!(get_if_string(&ctx.view(), b"list").unwrap(), None);
        assert_eq!(get(&ctx.view(), b"list"), Err(Error::Store(store::Error::WrongType)));
    }

    fn push_list(ctx: &mut WriteCtx<'_>) {
        crate::types::list::push(ctx, b"list", &[Bytes::from("e")], true, false).unwrap();
    }
}
