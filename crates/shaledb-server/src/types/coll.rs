//! What every collection type shares on the engine: listing the member records, a step of a member scan
//! (HSCAN, SSCAN), random picks of members (HRANDFIELD, SRANDMEMBER, SPOP), and the size checks of
//! collection keys. The layout of the member records is docs/format/server-keys.md, "Collections".
//!
//! ## Random picks
//! A collection of at most [`SMALL_PICK`] members, or a distinct pick of more than a third of the members,
//! is read whole and sampled exactly uniformly (Fisher-Yates on the members read). Otherwise each pick is a
//! random seek into the member range: a random part between the first and the last member (same common
//! prefix, a random byte between theirs at the first difference, then random bytes between the smallest and
//! largest byte the two hold after it), and the first member
//! at or after it (wrapping to the first). Cost: one engine seek per pick (a block read when not cached),
//! never a read of the whole collection. It is uniform when members are spread evenly over the byte range
//! (e.g. ids, hashes, same-length numbers); a member after a sparse stretch of the range is likelier, as
//! Redis's own random picks from a sparse hash table are skewed. Distinct picks retry a bounded number of
//! times and then take members in order from a random start.
//!
//! SPOP picks the same way but one member at a time in the commit step ([`pick_for_pop`]), skipping the
//! ranges its earlier pops emptied (dead.rs): a seek picks the member after a random point, so the members
//! after wide gaps go first and the gaps grow; without the ranges each pop would step over the tombstones
//! of every earlier pop in its gap. Its scans stop where a zone begins and resume past it, and the first
//! and last members are sought by the first pick only (dead.rs keeps them), so a pick costs one seek,
//! plus one per zone it crosses (each crossing merges two zones, so that is at most one more on average).

use crate::dead::Start;
use crate::keys::{Coll, Type, COLL_HEADER_LEN, SUB_MEMBER};
use crate::store::{self, check_entry_size, ReadCtx, WriteCtx};
use rand::Rng;
use std::collections::HashSet;

/// A collection this small is returned whole by a scan with cursor 0.
pub const SMALL_SCAN: u64 = 128;
/// A collection this small is read whole for random picks (exactly uniform).
pub const SMALL_PICK: u64 = 1024;

/// Why a collection read failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The store failed (wrong type, corrupt meta value, failed read, entry too large).
    #[error(transparent)]
    Store(#[from] store::Error),
    /// A random pick found no member where the header promised some.
    #[error("collection changed during a random pick")]
    Changed,
}

/// `(part, value)` items of a collection, in member order.
pub type MemberList = Vec<Member>;
/// One member record: `(part, value)`.
pub type Member = (Vec<u8>, Vec<u8>);

/// Refuses a user key too long for a collection's meta value (checked before any member is written).
pub fn check_key(key: &[u8]) -> Result<(), store::Error> {
    check_entry_size(key.len(), 9 + COLL_HEADER_LEN + 32)
}

/// Redis's index rules (LRANGE, LTRIM, ZRANGE, ZREMRANGEBYRANK) on a collection of `len`: the positions
/// `[lo, hi]` (inclusive) of `start..=end` clamped as Redis does (negative from the end), or `None` when
/// empty.
pub fn rank_bounds(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = len.min(i64::MAX as u64) as i64;
    let mut s = if start < 0 { start.saturating_add(len) } else { start };
    let mut e = if end < 0 { end.saturating_add(len) } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as u64, e as u64))
}

/// The values of the member records `parts` (`sub 0x00`) of the collection `key` of type `typ`, `None` for
/// each missing one (all of them when there is no such collection): HMGET, SMISMEMBER.
pub fn member_values<P: AsRef<[u8]>>(
    ctx: &ReadCtx<'_>,
    key: &[u8],
    typ: Type,
    parts: &[P],
) -> Result<Vec<Option<Vec<u8>>>, Error> {
    let ctx = ctx.pinned();
    let c = ctx.get_coll(key, typ)?;
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        out.push(match &c {
            Some(c) => ctx.get_member(c, SUB_MEMBER, p.as_ref())?,
            None => None,
        });
    }
    Ok(out)
}

/// Deletes the member records `parts` (`sub 0x00`) of the collection `c` stored as `key` (HDEL, SREM):
/// returns how many were there. The meta value follows whatever was deleted, even when a read failed.
pub fn remove_members<'m>(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    c: &mut Coll,
    parts: impl Iterator<Item = &'m [u8]>,
) -> Result<u64, Error> {
    let mut removed = 0u64;
    let mut failed = None;
    for m in parts {
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
    failed.map_or(Ok(removed), |e| Err(e.into()))
}

/// One step of a scan of `c`'s member records (`sub 0x00`: HSCAN, SSCAN) from the part `start` (the
/// beginning when `None`): calls `emit(part, value)` for each of up to `budget` members examined, and
/// returns the part the next step starts at (`None`: done).
pub fn scan_step(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    start: Option<&[u8]>,
    budget: u64,
    mut emit: impl FnMut(Vec<u8>, Vec<u8>),
) -> Result<Option<Vec<u8>>, Error> {
    for (examined, r) in ctx.members(c, SUB_MEMBER, start, false).enumerate() {
        let (part, value) = r?;
        if examined as u64 == budget {
            return Ok(Some(part));
        }
        emit(part, value);
    }
    Ok(None)
}

/// Every member of `c` with sub-kind `sub`, in order.
pub fn all_members(ctx: &ReadCtx<'_>, c: &Coll, sub: u8) -> Result<MemberList, Error> {
    ctx.members(c, sub, None, false).map(|r| r.map_err(Error::from)).collect()
}

/// `count` members of `c` picked at random: distinct ones (at most the collection's size) or, with
/// `distinct == false`, `count` independent picks (repetitions possible). See the module docs for the
/// method. `count` must have been bounded by the caller when not distinct (`commands::coll::MAX_PICK`).
pub fn random_members(ctx: &ReadCtx<'_>, c: &Coll, sub: u8, count: u64, distinct: bool) -> Result<MemberList, Error> {
    let mut rng = rand::thread_rng();
    if count == 0 || c.size == 0 {
        return Ok(Vec::new());
    }
    if distinct && count >= c.size {
        return all_members(ctx, c, sub);
    }
    if c.size <= SMALL_PICK || (distinct && count.saturating_mul(3) > c.size) {
        let mut all = all_members(ctx, c, sub)?;
        if all.is_empty() {
            return Ok(all);
        }
        if distinct {
            let n = (count as usize).min(all.len());
            for i in 0..n {
                let j = rng.gen_range(i..all.len());
                all.swap(i, j);
            }
            all.truncate(n);
            return Ok(all);
        }
        let mut out = Vec::new();
        for _ in 0..count {
            out.push(all[rng.gen_range(0..all.len())].clone());
        }
        return Ok(out);
    }
    let seeker = Seeker::new(ctx, c, sub)?;
    let Some(seeker) = seeker else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    if !distinct {
        for _ in 0..count {
            out.push(seeker.pick(ctx, c, &mut rng)?);
        }
        return Ok(out);
    }
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut attempts = count.saturating_mul(4).saturating_add(64);
    while (seen.len() as u64) < count && attempts > 0 {
        attempts -= 1;
        let m = seeker.pick(ctx, c, &mut rng)?;
        if seen.insert(m.0.clone()) {
            out.push(m);
        }
    }
    if (out.len() as u64) < count {
        // Skewed ranges: take members in order from a random point (wrapping), skipping those picked.
        let (start, _) = seeker.pick(ctx, c, &mut rng)?;
        let tail = ctx.members(c, sub, Some(&start), false);
        let head = ctx.members(c, sub, None, false);
        for r in tail.chain(head) {
            if out.len() as u64 >= count {
                break;
            }
            let m = r?;
            if seen.insert(m.0.clone()) {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// Random seeks into one collection's member range.
struct Seeker {
    sub: u8,
    /// The bytes every member starts with (the common prefix of the first and last members).
    common: Vec<u8>,
    /// The range of the byte after `common`.
    lo: u8,
    hi: u8,
    /// The range of the bytes after that one: the smallest and largest byte the first and last members
    /// hold there (all bytes when they hold none). Drawing them from the members' own alphabet keeps the
    /// picks spread over the members: members of digits drawn with bytes of 0..=255 would almost always
    /// seek past a whole run of members to the start of the next (and SPOP would pile its tombstones there).
    alpha_lo: u8,
    alpha_hi: u8,
}

impl Seeker {
    fn new(ctx: &ReadCtx<'_>, c: &Coll, sub: u8) -> Result<Option<Seeker>, Error> {
        let Some(first) = ctx.members(c, sub, None, false).next().transpose()? else { return Ok(None) };
        let Some(last) = ctx.members(c, sub, None, true).next().transpose()? else { return Ok(None) };
        Ok(Some(Seeker::from_ends(sub, &first.0, &last.0)))
    }

    /// The seeker over the members from `first` to `last`.
    fn from_ends(sub: u8, first: &[u8], last: &[u8]) -> Seeker {
        let n = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let lo = first.get(n).copied().unwrap_or(0);
        let hi = last.get(n).copied().unwrap_or(0xff).max(lo);
        let tail = first.iter().skip(n + 1).chain(last.iter().skip(n + 1));
        let (alpha_lo, alpha_hi) = tail.fold((0xff, 0), |(a, b), &x| (a.min(x), b.max(x)));
        let (alpha_lo, alpha_hi) = if alpha_lo > alpha_hi { (0, 0xff) } else { (alpha_lo, alpha_hi) };
        Seeker { sub, common: first[..n].to_vec(), lo, hi, alpha_lo, alpha_hi }
    }

    /// The same seeker drawing the bytes after the first difference from the byte range the members
    /// `first` and `last` hold there: the bounds the seeker was made from may be parts no member has (the
    /// end of a dead zone, the tail), whose bytes would send the picks to the starts of runs.
    fn with_alphabet_of(mut self, first: &[u8], last: &[u8]) -> Seeker {
        let members = Seeker::from_ends(self.sub, first, last);
        (self.alpha_lo, self.alpha_hi) = (members.alpha_lo, members.alpha_hi);
        self
    }

    /// A random part between the first and the last member.
    fn target(&self, rng: &mut impl Rng) -> Vec<u8> {
        let mut target = self.common.clone();
        target.push(rng.gen_range(self.lo..=self.hi));
        for _ in 0..8 {
            target.push(rng.gen_range(self.alpha_lo..=self.alpha_hi));
        }
        target
    }

    fn pick(&self, ctx: &ReadCtx<'_>, c: &Coll, rng: &mut impl Rng) -> Result<(Vec<u8>, Vec<u8>), Error> {
        let target = self.target(rng);
        if let Some(m) = ctx.members(c, self.sub, Some(&target), false).next() {
            return Ok(m?);
        }
        match ctx.members(c, self.sub, None, false).next() {
            Some(m) => Ok(m?),
            None => Err(Error::Changed),
        }
    }
}

/// SPOP's pick, in the commit step: a random live member of `c` (sub-kind `sub`) chosen as the seeks of
/// [`random_members`] choose (the first member at or after a random point, wrapping), skipping the ranges
/// earlier pops emptied. One seek: the first and last members that bound the random point are sought by
/// the first pick only and remembered with the dead ranges (narrowed by what later pops empty from either
/// end, widened by writes outside them); a second seek when the point lies past the last member (the pick
/// wraps to the first). Records the range this pick finds empty once its member is gone, so the caller must
/// stage the deletion of the member returned before anything else is written. `None` when `c` has no live
/// member.
pub fn pick_for_pop(ctx: &mut WriteCtx<'_>, c: &Coll, sub: u8) -> Result<Option<Member>, Error> {
    let mut rng = rand::thread_rng();
    // What the pick learnt: the zone from the target (or from the start) up to the member, whether it ran
    // off the end (the tail from the target is empty), and the ends it sought.
    let (member, zone_from, tail_from, ends) = {
        let view = ctx.view();
        let dead = ctx.dead_ranges(c, sub);
        let start_of = |t: &[u8]| dead.map_or(Start::At(t.to_vec()), |r| r.start(t));
        let Start::At(low) = start_of(b"") else { return Ok(None) };
        let first_live = || first_live_from(&view, c, sub, dead, low.clone());
        let known = dead.and_then(|r| Some((r.bounds()?, r.span()?)));
        let (seeker, first, ends) = match known {
            Some(((lo, hi), (first, last))) => {
                (Seeker::from_ends(sub, &lo, &hi).with_alphabet_of(first, last), None, None)
            }
            None => {
                let Some(first) = first_live()? else { return Ok(None) };
                // The tail part itself is gone, so "parts <= tail" is "parts before the tail".
                let last = view.members(c, sub, dead.and_then(|r| r.tail()), true).next().transpose()?;
                let Some(last) = last else { return Ok(None) };
                let ends = (first.0.clone(), last.0);
                (Seeker::from_ends(sub, &ends.0, &ends.1), Some(first), Some(ends))
            }
        };
        let target = seeker.target(&mut rng);
        let found = match start_of(&target) {
            Start::At(from) => first_live_from(&view, c, sub, dead, from)?,
            Start::End => None,
        };
        match found {
            Some(m) => (m, target, None, ends),
            None => {
                let first = match first {
                    Some(f) => f,
                    None => match first_live()? {
                        Some(f) => f,
                        None => return Ok(None),
                    },
                };
                (first, Vec::new(), Some(target), ends)
            }
        }
    };
    if let Some((first, last)) = ends {
        ctx.note_dead_span(c, sub, &first, &last);
    }
    ctx.note_dead_zone(c, sub, &zone_from, &member.0);
    if let Some(t) = tail_from {
        ctx.note_dead_tail(c, sub, &t);
    }
    Ok(Some(member))
}

/// The first live member of `c` (sub-kind `sub`) at or after the part `from` (in no dead zone): scans
/// bounded at the next zone or the tail, resumed past each zone, so no tombstone inside a zone is stepped
/// over (one more seek per zone crossed; the zone the caller records then covers them all).
fn first_live_from(
    view: &ReadCtx<'_>,
    c: &Coll,
    sub: u8,
    dead: Option<&crate::dead::Ranges>,
    mut from: Vec<u8>,
) -> Result<Option<Member>, Error> {
    loop {
        let stop = dead.and_then(|r| r.next_stop(&from));
        if let Some(m) = view.members_until(c, sub, &from, stop).next() {
            return Ok(Some(m?));
        }
        let (Some(stop), Some(r)) = (stop, dead) else { return Ok(None) };
        match r.start(stop) {
            Start::At(next) => from = next,
            Start::End => return Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Type, SUB_MEMBER};
    use crate::store::now_ms;
    use crate::types::testing::{group, temp_db};

    #[test]
    fn random_picks_by_seek_cover_the_set() {
        let (_dir, db) = temp_db();
        let mut ctx = group(&db);
        let mut c = ctx.create_coll(b"s", Type::Set);
        let n = 5000u64;
        for i in 0..n {
            ctx.put_member(&c, SUB_MEMBER, format!("{i:05}").as_bytes(), b"").unwrap();
        }
        c.size = n;
        ctx.put_coll(b"s", &c).unwrap();
        ctx.finish(false).unwrap();
        let r = ReadCtx::new(&db, crate::keys::Keyspace::Ordered, 0, now_ms());
        // Distinct picks by seek (count well below a third of the set).
        let picked = random_members(&r, &c, SUB_MEMBER, 200, true).unwrap();
        let distinct: HashSet<Vec<u8>> = picked.iter().map(|(m, _)| m.clone()).collect();
        assert_eq!(distinct.len(), 200);
        // With repetitions: every pick is a member, and the thousands digit is spread over 0..=4.
        let picked = random_members(&r, &c, SUB_MEMBER, 2000, false).unwrap();
        assert_eq!(picked.len(), 2000);
        let mut buckets = [0u32; 5];
        for (m, _) in &picked {
            let i: u64 = std::str::from_utf8(m).unwrap().parse().unwrap();
            assert!(i < n);
            buckets[(i / 1000) as usize] += 1;
        }
        assert!(buckets.iter().all(|&b| b > 100), "{buckets:?}");
        // Spread over the members, not only over the thousands: 2000 uniform picks of 5000 hit about 1650
        // distinct members (a pick that jumps to the start of the next run of digits hits a handful).
        let distinct: HashSet<&Vec<u8>> = picked.iter().map(|(m, _)| m).collect();
        assert!(distinct.len() > 1200, "{} distinct members in 2000 picks", distinct.len());
        // More than a third, and more than the set: read whole.
        assert_eq!(random_members(&r, &c, SUB_MEMBER, 3000, true).unwrap().len(), 3000);
        assert_eq!(random_members(&r, &c, SUB_MEMBER, 9000, true).unwrap().len(), 5000);
        assert!(random_members(&r, &c, SUB_MEMBER, 0, false).unwrap().is_empty());
    }

    #[test]
    fn scan_steps_page_in_member_order() {
        let (_dir, db) = temp_db();
        let mut ctx = group(&db);
        let mut c = ctx.create_coll(b"h", Type::Hash);
        for m in ["a", "b", "c", "d", "e"] {
            ctx.put_member(&c, SUB_MEMBER, m.as_bytes(), b"v").unwrap();
        }
        c.size = 5;
        ctx.put_coll(b"h", &c).unwrap();
        let v = ctx.view();
        let mut seen = Vec::new();
        let next = scan_step(&v, &c, None, 2, |p, _| seen.push(p)).unwrap();
        assert_eq!(next.as_deref(), Some(&b"c"[..]));
        let next = scan_step(&v, &c, next.as_deref(), 10, |p, _| seen.push(p)).unwrap();
        assert_eq!(next, None);
        assert_eq!(seen, [b"a", b"b", b"c", b"d", b"e"].map(|m| m.to_vec()));
        assert_eq!(all_members(&v, &c, SUB_MEMBER).unwrap().len(), 5);
        assert!(check_key(&[b'k'; 16]).is_ok());
        assert!(check_key(&vec![b'k'; shaledb::options::limits::MAX_KEY_VALUE_BYTES]).is_err());
    }
}
