//! Sets on the engine: the member records, and the operations SADD, SREM, SPOP, SMOVE, the set algebra and
//! its STORE forms perform on them; random picks and member listings are [`super::coll`]'s.
//!
//! Layout (docs/format/server-keys.md, "Sets"): the meta value holds the collection header (version, member
//! count); each member is one member record `db 0x01 version 0x00 member -> empty`. Members come back in
//! byte order.
//!
//! Intersections walk the smallest set and look each member up in the others (|smallest| x (k-1) point
//! reads); differences walk the first set and look its members up in the others; unions read every set.
//! [`store()`] replaces the destination (whatever it held) with a new collection under a fresh version.

use super::coll;
use crate::keys::{Coll, Type, SUB_MEMBER};
use crate::store::{self, check_entry_size, ReadCtx, WriteCtx};
use bytes::Bytes;
use std::collections::BTreeSet;

/// A set has no failure of its own: its operations fail as the store and the collection reads do.
pub type Error = coll::Error;

/// Refuses a member the engine could not hold as a member record.
pub fn check_member(m: &[u8]) -> Result<(), store::Error> {
    check_entry_size(m.len() + 9, 0)
}

/// The live set `key`: `Ok(None)` when missing, `Err(WRONGTYPE)` when it holds another type. Pass a
/// [`ReadCtx::pinned`] context when members are read next.
pub fn get(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::Set)?)
}

/// [`get`] in the commit step.
pub fn get_mut(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::Set)?)
}

/// Adds `members` to the set `key` (created when missing). Returns how many were new.
pub fn add_members<'m>(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    members: impl Iterator<Item = &'m Bytes> + Clone,
) -> Result<u64, Error> {
    coll::check_key(key)?;
    for m in members.clone() {
        check_member(m)?;
    }
    let (mut c, fresh) = match get_mut(ctx, key)? {
        Some(c) => (c, false),
        None => (ctx.create_coll(key, Type::Set), true),
    };
    let mut added = 0u64;
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
    failed.map_or(Ok(added), |e| Err(e.into()))
}

/// Removes `members` from the set `key` (SREM). Returns how many were there.
pub fn remove(ctx: &mut WriteCtx<'_>, key: &[u8], members: &[Bytes]) -> Result<u64, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(0) };
    coll::remove_members(ctx, key, &mut c, members.iter().map(|b| &b[..]))
}

/// Removes and returns `n` random members of the set `c`, stored as `key` (SPOP). The members picked are
/// deleted without being read again (the pick read them through the group's view), and the meta value is
/// written once.
pub fn pop(ctx: &mut WriteCtx<'_>, key: &[u8], c: &mut Coll, n: u64) -> Result<Vec<Vec<u8>>, Error> {
    // A first pop of a small set (or of a third of it, or of all of it) reads it whole and picks exactly
    // uniformly; otherwise one seek per member (see types/coll.rs), past what earlier pops emptied. Once
    // pops left dead ranges, a read of the whole set would step over all their tombstones: a pop of all
    // that is left reads whole only when more than `SMALL_PICK` members are left.
    let whole = match ctx.dead_ranges(c, SUB_MEMBER) {
        None => n >= c.size || c.size <= coll::SMALL_PICK || n.saturating_mul(3) > c.size,
        Some(_) => n >= c.size && c.size > coll::SMALL_PICK,
    };
    let mut picked = Vec::new();
    let mut failed = None;
    if whole {
        let view = ctx.view();
        match coll::random_members(&view, c, SUB_MEMBER, n, true) {
            Ok(ms) => picked = ms.into_iter().map(|(m, _)| m).collect(),
            Err(e) => failed = Some(e),
        }
    } else {
        for _ in 0..n {
            match coll::pick_for_pop(ctx, c, SUB_MEMBER) {
                Ok(Some((m, _))) => {
                    // The pick recorded its range as dead: the deletion goes next.
                    ctx.delete_member(c, SUB_MEMBER, &m);
                    picked.push(m);
                }
                Ok(None) => break,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
    }
    if whole {
        for m in &picked {
            ctx.delete_member(c, SUB_MEMBER, m);
        }
    }
    if !picked.is_empty() {
        c.size = c.size.saturating_sub(picked.len() as u64);
        ctx.put_coll(key, c)?;
    }
    failed.map_or(Ok(picked), Err)
}

/// Moves `member` from the set `src` to the set `dst` (SMOVE), creating `dst` when missing. Returns whether
/// it was in `src`. As Redis: a missing source answers `false` before the types are checked.
pub fn move_member(ctx: &mut WriteCtx<'_>, src: &[u8], dst: &[u8], member: &Bytes) -> Result<bool, Error> {
    let Some((sm, _)) = ctx.get_meta(src)? else { return Ok(false) };
    if sm.typ != Type::Set {
        return Err(store::Error::WrongType.into());
    }
    if let Some((dm, _)) = ctx.get_meta(dst)? {
        if dm.typ != Type::Set {
            return Err(store::Error::WrongType.into());
        }
    }
    let Some(mut sc) = get_mut(ctx, src)? else { return Ok(false) };
    if src == dst {
        return Ok(ctx.get_member(&sc, SUB_MEMBER, member)?.is_some());
    }
    coll::check_key(dst)?;
    check_member(member)?;
    if coll::remove_members(ctx, src, &mut sc, std::iter::once(&member[..]))? == 0 {
        return Ok(false);
    }
    add_members(ctx, dst, std::iter::once(member))?;
    Ok(true)
}

/// Every member of the set `c`, in member order (SMEMBERS).
pub fn members(ctx: &ReadCtx<'_>, c: &Coll) -> Result<Vec<Vec<u8>>, Error> {
    Ok(coll::all_members(ctx, c, SUB_MEMBER)?.into_iter().map(|(m, _)| m).collect())
}

/// `count` members of the set `c` picked at random: distinct ones or, with `distinct == false`,
/// independent picks (SRANDMEMBER; see [`coll::random_members`]).
pub fn random_members(ctx: &ReadCtx<'_>, c: &Coll, count: u64, distinct: bool) -> Result<Vec<Vec<u8>>, Error> {
    Ok(coll::random_members(ctx, c, SUB_MEMBER, count, distinct)?.into_iter().map(|(m, _)| m).collect())
}

/// Whether `m` is a member of the set `c`.
pub fn is_member(ctx: &ReadCtx<'_>, c: &Coll, m: &[u8]) -> Result<bool, Error> {
    Ok(ctx.get_member(c, SUB_MEMBER, m)?.is_some())
}

/// The sets named by `names`, `None` for a missing key; WRONGTYPE if any key holds another type (checked
/// for every key before anything else, as Redis does).
fn load_sets(ctx: &ReadCtx<'_>, names: &[Bytes]) -> Result<Vec<Option<Coll>>, Error> {
    names.iter().map(|k| get(ctx, k)).collect()
}

/// The intersection of the sets `names`, stopping after `limit` members (0: no limit).
pub fn inter(ctx: &ReadCtx<'_>, names: &[Bytes], limit: u64) -> Result<Vec<Vec<u8>>, Error> {
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

/// The union of the sets `names`, in member order.
pub fn union(ctx: &ReadCtx<'_>, names: &[Bytes]) -> Result<Vec<Vec<u8>>, Error> {
    let sets = load_sets(ctx, names)?;
    let mut out: BTreeSet<Vec<u8>> = BTreeSet::new();
    for c in sets.iter().flatten() {
        for r in ctx.members(c, SUB_MEMBER, None, false) {
            out.insert(r?.0);
        }
    }
    Ok(out.into_iter().collect())
}

/// The members of the first set `names` in none of the others, in member order.
pub fn diff(ctx: &ReadCtx<'_>, names: &[Bytes]) -> Result<Vec<Vec<u8>>, Error> {
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

/// Replaces `dst` (whatever it held) with a set of `members` (distinct; an empty result only deletes
/// `dst`). Returns the size stored.
pub fn store(ctx: &mut WriteCtx<'_>, dst: &[u8], members: &[Vec<u8>]) -> Result<u64, Error> {
    // The destination is replaced whatever it held (a collection's old version goes to the collector).
    if ctx.get_meta(dst)?.is_some() {
        ctx.remove_key(ctx.db_index, dst)?;
    }
    if members.is_empty() {
        return Ok(0);
    }
    let mut c = ctx.create_coll(dst, Type::Set);
    for m in members {
        if let Err(e) = ctx.put_member(&c, SUB_MEMBER, m, b"") {
            // Members come from existing sets: they always fit. Keep the count exact anyway.
            ctx.put_coll(dst, &c)?;
            return Err(e.into());
        }
        c.size += 1;
    }
    ctx.put_coll(dst, &c)?;
    Ok(c.size)
}

#[cfg(test)]
mod tests;
