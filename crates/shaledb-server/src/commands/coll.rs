//! Pieces shared by the collection commands (hashes, sets, and whoever wants them): the member cursors of
//! HSCAN/SSCAN/ZSCAN, random picks of members (HRANDFIELD, SRANDMEMBER, SPOP), and count checks.
//!
//! ## Member cursors
//! Members are stored in byte order under their collection's version, so a scan goes on from a member,
//! not from a hash-table slot. As SCAN does (commands/keys/scan.rs), the cursor a client sees is an id in a
//! bounded, server-wide table mapping it to the member the next call starts at; an unknown or evicted id is
//! `ERR invalid cursor`. A cursor names a position in member order, not a version: used on a collection
//! that was replaced meanwhile it still goes on in order. Guarantees are Redis's (a member present for the
//! whole scan is returned, here exactly once; the scan ends with cursor 0). COUNT is the number of members
//! examined per call (MATCH filters after), and a collection of at most [`SMALL_SCAN`] members is returned
//! whole by the first call with cursor 0, as Redis does for its small (listpack/intset) encodings.
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
//! SPOP picks the same way but one member at a time in the commit thread ([`pick_for_pop`]), skipping the
//! ranges its earlier pops emptied (dead.rs): a seek picks the member after a random point, so the members
//! after wide gaps go first and the gaps grow; without the ranges each pop would step over the tombstones
//! of every earlier pop in its gap.

use super::keys::{glob_match, Cursors};
use super::{arg_i64, syntax_error};
use crate::dead::Start;
use crate::keys::Coll;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;
use parking_lot::Mutex;
use rand::Rng;
use std::collections::HashSet;
use std::sync::OnceLock;

/// A collection this small is returned whole by a scan with cursor 0.
pub const SMALL_SCAN: u64 = 128;
/// A collection this small is read whole for random picks (exactly uniform).
pub const SMALL_PICK: u64 = 1024;
/// Most elements a random pick with repetitions (negative count) answers: bounds the reply's memory.
pub const MAX_PICK: u64 = 1 << 22;

/// `(part, value)` items of a collection, in member order.
pub type MemberList = Vec<Member>;
/// One member record: `(part, value)`.
pub type Member = (Vec<u8>, Vec<u8>);

fn cursors() -> &'static Mutex<Cursors> {
    static C: OnceLock<Mutex<Cursors>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Parsed `cursor [MATCH pattern] [COUNT count]` of HSCAN/SSCAN/ZSCAN.
pub struct ScanArgs {
    pub cursor: u64,
    pub pattern: Option<Bytes>,
    pub count: u64,
}

/// Parses the cursor at `args[at]` and the options after it.
pub fn parse_scan_args(args: &Args, at: usize) -> Result<ScanArgs, Reply> {
    let cursor = std::str::from_utf8(&args[at])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let mut sa = ScanArgs { cursor, pattern: None, count: 10 };
    let mut j = at + 1;
    while j < args.len() {
        if j + 1 >= args.len() {
            return Err(syntax_error());
        }
        let opt = args[j].to_ascii_uppercase();
        match &opt[..] {
            b"MATCH" => sa.pattern = Some(args[j + 1].clone()),
            b"COUNT" => {
                let n = arg_i64(&args[j + 1])?;
                if n < 1 {
                    return Err(syntax_error());
                }
                sa.count = n as u64;
            }
            _ => return Err(syntax_error()),
        }
        j += 2;
    }
    Ok(sa)
}

/// One step of a member scan of `c` (sub-kind `sub`): calls `emit(part, value)` for each member examined
/// that matches the pattern, and returns the cursor of the next call (0: done).
pub fn scan_members(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    sub: u8,
    sa: &ScanArgs,
    mut emit: impl FnMut(Vec<u8>, Vec<u8>),
) -> Result<u64, Reply> {
    let start: Option<Bytes> = if sa.cursor == 0 {
        None
    } else {
        match cursors().lock().get(sa.cursor) {
            Some((db, part)) if db == ctx.db_index => Some(part),
            _ => return Err(Reply::err("invalid cursor")),
        }
    };
    let budget = if start.is_none() && c.size <= SMALL_SCAN { u64::MAX } else { sa.count };
    for (examined, r) in ctx.members(c, sub, start.as_deref(), false).enumerate() {
        let (part, value) = r?;
        if examined as u64 == budget {
            let id = cursors().lock().insert(ctx.db_index, Bytes::from(part));
            return Ok(id);
        }
        if sa.pattern.as_deref().is_none_or(|p| glob_match(p, &part)) {
            emit(part, value);
        }
    }
    Ok(0)
}

/// The `[cursor, [items]]` reply of a scan.
pub fn scan_reply(next: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(items)])
}

/// Every member of `c` with sub-kind `sub`, in order.
pub fn all_members(ctx: &ReadCtx<'_>, c: &Coll, sub: u8) -> Result<MemberList, Reply> {
    ctx.members(c, sub, None, false).collect()
}

/// `count` members of `c` picked at random: distinct ones (at most the collection's size) or, with
/// `distinct == false`, `count` independent picks (repetitions possible). See the module docs for the
/// method. `count` must have been checked against [`MAX_PICK`] by the caller when not distinct.
pub fn random_members(ctx: &ReadCtx<'_>, c: &Coll, sub: u8, count: u64, distinct: bool) -> Result<MemberList, Reply> {
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
    fn new(ctx: &ReadCtx<'_>, c: &Coll, sub: u8) -> Result<Option<Seeker>, Reply> {
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

    /// A random part between the first and the last member.
    fn target(&self, rng: &mut impl Rng) -> Vec<u8> {
        let mut target = self.common.clone();
        target.push(rng.gen_range(self.lo..=self.hi));
        for _ in 0..8 {
            target.push(rng.gen_range(self.alpha_lo..=self.alpha_hi));
        }
        target
    }

    fn pick(&self, ctx: &ReadCtx<'_>, c: &Coll, rng: &mut impl Rng) -> Result<(Vec<u8>, Vec<u8>), Reply> {
        let target = self.target(rng);
        if let Some(m) = ctx.members(c, self.sub, Some(&target), false).next() {
            return m;
        }
        match ctx.members(c, self.sub, None, false).next() {
            Some(m) => m,
            None => Err(Reply::err("collection changed during a random pick")),
        }
    }
}

/// SPOP's pick, in the commit thread: a random live member of `c` (sub-kind `sub`) chosen as the seeks of
/// [`random_members`] choose (the first member at or after a random point, wrapping), skipping the ranges
/// earlier pops emptied. Records the range this pick finds empty once its member is gone, so the caller
/// must stage the deletion of the member returned before anything else is written. `None` when `c` has no
/// live member.
pub fn pick_for_pop(ctx: &mut WriteCtx<'_>, c: &Coll, sub: u8) -> Result<Option<Member>, Reply> {
    let mut rng = rand::thread_rng();
    // What the pick learnt: the zone from the target (or from the start) up to the member, and whether it
    // ran off the end (the tail from the target is empty).
    let (member, zone_from, tail_from) = {
        let view = ctx.view();
        let dead = ctx.dead_ranges(c, sub);
        let start_of = |t: &[u8]| dead.map_or(Start::At(t.to_vec()), |r| r.start(t));
        let Start::At(first_from) = start_of(b"") else { return Ok(None) };
        let Some(first) = view.members(c, sub, Some(&first_from), false).next().transpose()? else {
            return Ok(None);
        };
        // The tail part itself is gone, so "parts <= tail" is "parts before the tail".
        let last = view.members(c, sub, dead.and_then(|r| r.tail()), true).next().transpose()?;
        let Some(last) = last else { return Ok(None) };
        let target = Seeker::from_ends(sub, &first.0, &last.0).target(&mut rng);
        let found = match start_of(&target) {
            Start::At(from) => view.members(c, sub, Some(&from), false).next().transpose()?,
            Start::End => None,
        };
        match found {
            Some(m) => (m, target, None),
            None => (first, Vec::new(), Some(target)),
        }
    };
    ctx.note_dead_zone(c, sub, &zone_from, &member.0);
    if let Some(t) = tail_from {
        ctx.note_dead_tail(c, sub, &t);
    }
    Ok(Some(member))
}

/// Reads an optional count argument of HRANDFIELD/SRANDMEMBER: `(count, distinct)`, refusing a negative
/// count whose magnitude is above [`MAX_PICK`] (the reply would not fit in memory).
pub fn pick_count(a: &[u8]) -> Result<(u64, bool), Reply> {
    let n = arg_i64(a)?;
    if n >= 0 {
        return Ok((n as u64, true));
    }
    let m = n.unsigned_abs();
    if m > MAX_PICK {
        return Err(Reply::err(format!("value is out of range, ShaleDB answers at most {MAX_PICK} random elements")));
    }
    Ok((m, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Type, SUB_MEMBER};
    use crate::store::{now_ms, WriteCtx};
    use shaledb::{Db, Options};

    fn args(words: &[&str]) -> Args {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn scan_arguments_parse_like_redis() {
        let sa = parse_scan_args(&args(&["HSCAN", "k", "0", "MATCH", "a*", "COUNT", "5"]), 2).unwrap();
        assert_eq!((sa.cursor, sa.pattern.as_deref(), sa.count), (0, Some(&b"a*"[..]), 5));
        let bad = |w: &[&str]| match parse_scan_args(&args(w), 2) {
            Err(Reply::Error(e)) => e,
            _ => panic!("{w:?} parsed"),
        };
        assert_eq!(bad(&["HSCAN", "k", "-1"]), "ERR invalid cursor");
        assert_eq!(bad(&["HSCAN", "k", "0", "COUNT", "0"]), "ERR syntax error");
        assert_eq!(bad(&["HSCAN", "k", "0", "COUNT"]), "ERR syntax error");
        assert_eq!(bad(&["HSCAN", "k", "0", "BOGUS", "1"]), "ERR syntax error");
        assert_eq!(bad(&["HSCAN", "k", "0", "COUNT", "x"]), "ERR value is not an integer or out of range");
        assert_eq!(pick_count(b"3").unwrap(), (3, true));
        assert_eq!(pick_count(b"-3").unwrap(), (3, false));
        assert!(pick_count(b"-9223372036854775808").is_err());
        assert!(pick_count(b"x").is_err());
    }

    #[test]
    fn random_picks_by_seek_cover_the_set() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() }).unwrap();
        let mut ctx = WriteCtx::new(&db);
        ctx.begin(now_ms());
        let mut c = ctx.create_coll(b"s", Type::Set);
        let n = 5000u64;
        for i in 0..n {
            ctx.put_member(&c, SUB_MEMBER, format!("{i:05}").as_bytes(), b"").unwrap();
        }
        c.size = n;
        ctx.put_coll(b"s", &c).unwrap();
        ctx.finish(false).unwrap();
        let r = ReadCtx::new(&db, 0, now_ms());
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
}
