//! Hashes on the engine: the field records and the operations HSET, HDEL, HINCRBY and HINCRBYFLOAT perform
//! on them; the reads are point reads of one field or the listing of [`super::coll`].
//!
//! Layout (docs/format/server-keys.md, "Hashes"): the meta value holds the collection header (version, field
//! count); each field is one member record `db 0x01 version 0x00 field -> value`. Fields come back in byte
//! order (Redis's order is its hash table's; clients must not rely on either).
//!
//! Write operations read every member they change before writing it and write the meta value once at the
//! end, so the field count stays exact; a size problem is refused before anything is written.

use super::coll;
use crate::keys::{Coll, Type, SUB_MEMBER};
use crate::store::{self, check_entry_size, ReadCtx, WriteCtx};
use bytes::Bytes;

/// Why a hash operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The store failed (wrong type, corrupt meta value, failed read, entry too large).
    #[error(transparent)]
    Store(#[from] store::Error),
    /// A collection read failed.
    #[error(transparent)]
    Coll(#[from] coll::Error),
    /// HINCRBY on a field that does not hold an integer.
    #[error("hash value is not an integer")]
    NotInteger,
    /// HINCRBY past the i64 range.
    #[error("increment or decrement would overflow")]
    Overflow,
    /// HINCRBYFLOAT on a field that does not hold a float.
    #[error("hash value is not a float")]
    NotFloat,
    /// HINCRBYFLOAT to an infinite or NaN result.
    #[error("increment would produce NaN or Infinity")]
    NotFinite,
}

/// Refuses a field and value the engine could not hold as one member record.
fn check_field(field: &[u8], value: &[u8]) -> Result<(), store::Error> {
    check_entry_size(field.len() + 9, value.len())
}

/// The live hash `key`: `Ok(None)` when missing, `Err(WRONGTYPE)` when it holds another type. Pass a
/// [`ReadCtx::pinned`] context when fields are read next.
pub fn get(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::Hash)?)
}

/// The value of `field` in the hash `c`.
pub fn field(ctx: &ReadCtx<'_>, c: &Coll, field: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    Ok(ctx.get_member(c, SUB_MEMBER, field)?)
}

/// Every `(field, value)` of the hash `key` (empty when missing), in field order.
pub fn all_fields(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<coll::MemberList, Error> {
    let ctx = ctx.pinned();
    match ctx.get_coll(key, Type::Hash)? {
        Some(c) => Ok(coll::all_members(&ctx, &c, SUB_MEMBER)?),
        None => Ok(Vec::new()),
    }
}

/// `count` fields of the hash `c` picked at random, with their values: distinct ones or, with
/// `distinct == false`, independent picks (HRANDFIELD; see [`coll::random_members`]).
pub fn random_fields(ctx: &ReadCtx<'_>, c: &Coll, count: u64, distinct: bool) -> Result<coll::MemberList, Error> {
    Ok(coll::random_members(ctx, c, SUB_MEMBER, count, distinct)?)
}

/// The hash `key`, created when missing: `(collection, created)`. A created one is stored by the caller's
/// `put_coll` (a command that ends up writing nothing leaves only a registry record the collector removes).
fn get_or_create(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<(Coll, bool), store::Error> {
    match ctx.get_coll(key, Type::Hash)? {
        Some(c) => Ok((c, false)),
        None => Ok((ctx.create_coll(key, Type::Hash), true)),
    }
}

/// Sets the `(field, value)` pairs of `pairs` (HSET, HMSET); `nx`: only fields that do not exist (HSETNX).
/// Returns the number of fields created.
pub fn set_fields(ctx: &mut WriteCtx<'_>, key: &[u8], pairs: &[Bytes], nx: bool) -> Result<u64, Error> {
    coll::check_key(key)?;
    for p in pairs.chunks_exact(2) {
        check_field(&p[0], &p[1])?;
    }
    let (mut c, fresh) = get_or_create(ctx, key)?;
    let mut added = 0u64;
    let mut failed = None;
    for p in pairs.chunks_exact(2) {
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
        Some(e) => Err(e.into()),
        None => Ok(added),
    }
}

/// Deletes `fields` from the hash `key` (HDEL). Returns how many were there.
pub fn delete_fields(ctx: &mut WriteCtx<'_>, key: &[u8], fields: &[Bytes]) -> Result<u64, Error> {
    let Some(mut c) = ctx.get_coll(key, Type::Hash)? else { return Ok(0) };
    Ok(coll::remove_members(ctx, key, &mut c, fields.iter().map(|f| &f[..]))?)
}

/// Read-modify-write of one field: `f(old value) -> new value`, or the operation's error.
fn update_field(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    field: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, Error>,
) -> Result<Vec<u8>, Error> {
    coll::check_key(key)?;
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

/// Adds `by` to the integer in `field` of the hash `key` (0 when missing; HINCRBY). Returns the new value.
pub fn incr_by(ctx: &mut WriteCtx<'_>, key: &[u8], field: &[u8], by: i64) -> Result<i64, Error> {
    let v = update_field(ctx, key, field, |old| {
        let cur = match old {
            Some(v) => crate::resp::parse_i64(v).ok_or(Error::NotInteger)?,
            None => 0,
        };
        let new = cur.checked_add(by).ok_or(Error::Overflow)?;
        Ok(new.to_string().into_bytes())
    })?;
    // The value was just formatted from an i64.
    Ok(crate::resp::parse_i64(&v).unwrap_or_default())
}

/// Adds the number `by` (its text) to the number in `field` of the hash `key` (0 when missing; HINCRBYFLOAT)
/// in C's `long double`, as Redis does ([`super::long_double`]). Returns the new value's text, as stored.
pub fn incr_by_float(ctx: &mut WriteCtx<'_>, key: &[u8], field: &[u8], by: &[u8]) -> Result<Vec<u8>, Error> {
    update_field(ctx, key, field, |old| match super::long_double::add(old, by) {
        Ok(text) => Ok(text.into_bytes()),
        Err(super::long_double::AddError::NotFinite) => Err(Error::NotFinite),
        Err(_) => Err(Error::NotFloat),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::testing::{group, temp_db};

    fn b(xs: &[&str]) -> Vec<Bytes> {
        xs.iter().map(|x| Bytes::copy_from_slice(x.as_bytes())).collect()
    }

    #[test]
    fn fields_are_set_counted_deleted_and_incremented() {
        let (_dir, db) = temp_db();
        let mut ctx = group(&db);
        assert_eq!(set_fields(&mut ctx, b"h", &b(&["a", "1", "b", "2"]), false).unwrap(), 2);
        assert_eq!(set_fields(&mut ctx, b"h", &b(&["a", "9", "c", "3"]), true).unwrap(), 1);
        {
            let v = ctx.view();
            let c = get(&v, b"h").unwrap().unwrap();
            assert_eq!(c.size, 3);
            assert_eq!(field(&v, &c, b"a").unwrap().as_deref(), Some(&b"1"[..]), "NX kept the old value");
            let all = all_fields(&v, b"h").unwrap();
            assert_eq!(all.iter().map(|(f, _)| f.as_slice()).collect::<Vec<_>>(), [b"a", b"b", b"c"]);
        }
        assert_eq!(incr_by(&mut ctx, b"h", b"a", 5).unwrap(), 6);
        assert_eq!(incr_by(&mut ctx, b"h", b"new", -2).unwrap(), -2);
        assert_eq!(incr_by(&mut ctx, b"h", b"a", i64::MAX), Err(Error::Overflow));
        set_fields(&mut ctx, b"h", &b(&["s", "x"]), false).unwrap();
        assert_eq!(incr_by(&mut ctx, b"h", b"s", 1), Err(Error::NotInteger));
        assert_eq!(incr_by_float(&mut ctx, b"h", b"f", b"10.5").unwrap(), b"10.5");
        assert_eq!(incr_by_float(&mut ctx, b"h", b"f", b"0.1").unwrap(), b"10.6");
        assert_eq!(incr_by_float(&mut ctx, b"h", b"f", b"1000").unwrap(), b"1010.59999999999999998");
        assert_eq!(incr_by_float(&mut ctx, b"h", b"s", b"1"), Err(Error::NotFloat));
        assert_eq!(incr_by_float(&mut ctx, b"h", b"f", b"inf"), Err(Error::NotFinite));
        assert_eq!(delete_fields(&mut ctx, b"h", &b(&["a", "b", "c", "new", "s", "zz"])).unwrap(), 5);
        assert_eq!(delete_fields(&mut ctx, b"h", &b(&["f"])).unwrap(), 1);
        assert!(get(&ctx.view(), b"h").unwrap().is_none(), "an emptied hash is deleted");
        ctx.put_string(b"str", b"v", None).unwrap();
        assert_eq!(set_fields(&mut ctx, b"str", &b(&["a", "1"]), false), Err(Error::Store(store::Error::WrongType)));
    }
}
