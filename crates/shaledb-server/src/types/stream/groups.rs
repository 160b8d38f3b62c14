//! Consumer groups of a stream: the groups, their consumers and their pending entries lists (PEL), as
//! member records of the stream's version, written in the same batch as the command that changes them (so a
//! group's state after kill -9 is the state of the last acknowledged command).
//!
//! ```text
//! group record     sub 0x02  part = group                              value = last_ms:u64be last_seq:u64be
//!                                                                              entries_read:u64be (u64::MAX: unknown)
//! consumer record  sub 0x03  part = glen:u32be group consumer          value = seen_ms:u64be
//! PEL record       sub 0x04  part = glen:u32be group ms:u64be seq:u64be value = delivered_ms:u64be
//!                                                                              deliveries:u64be consumer
//! consumer PEL     sub 0x05  part = glen:u32be group clen:u32be consumer ms:u64be seq:u64be   value = empty
//! ```
//!
//! The group PEL (sub 0x04) answers XPENDING, XCLAIM, XAUTOCLAIM and XACK by id; the consumer PEL index
//! (sub 0x05) answers a consumer's history (XREADGROUP with an id), XPENDING for one consumer and
//! DELCONSUMER. Every change of a PEL record changes both in the same batch. Deleting or overwriting the
//! stream drops its version, and with it every group record (the collector deletes them with the entries).

use super::{first_entry_id, get, get_mut, read_after, store_stream, Entry, Error, Header, Id};
use crate::keys::{be_u64, Coll, Type};
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;

/// Frozen `sub` bytes of the group records (see the module comment).
pub const SUB_GROUP: u8 = 0x02;
pub const SUB_CONSUMER: u8 = 0x03;
pub const SUB_PEL: u8 = 0x04;
pub const SUB_CONSUMER_PEL: u8 = 0x05;

/// `entries_read` stored for "unknown" (Redis's -1).
const UNKNOWN_READ: u64 = u64::MAX;

/// A consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub name: Bytes,
    /// The last id delivered to a consumer of the group (`>` reads after it).
    pub last: Id,
    /// How many entries of the stream the group has read (its logical position); `None` when unknown.
    pub entries_read: Option<u64>,
}

impl Group {
    fn encode(&self) -> [u8; 24] {
        let mut v = [0u8; 24];
        v[..16].copy_from_slice(&self.last.part());
        v[16..].copy_from_slice(&self.entries_read.unwrap_or(UNKNOWN_READ).to_be_bytes());
        v
    }

    fn decode(name: &[u8], v: &[u8]) -> Result<Group, Error> {
        if v.len() != 24 {
            return Err(Error::Corrupt);
        }
        let last = Id::from_part(&v[..16]).ok_or(Error::Corrupt)?;
        let read = be_u64(&v[16..]);
        Ok(Group { name: Bytes::copy_from_slice(name), last, entries_read: (read != UNKNOWN_READ).then_some(read) })
    }
}

/// A consumer of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumer {
    pub name: Bytes,
    /// When the consumer last read or claimed (Unix ms).
    pub seen_ms: u64,
}

/// A pending entry: delivered to `consumer`, not acknowledged yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    pub id: Id,
    pub consumer: Bytes,
    /// When it was last delivered (Unix ms).
    pub delivered_ms: u64,
    pub deliveries: u64,
}

impl Nack {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16 + self.consumer.len());
        v.extend_from_slice(&self.delivered_ms.to_be_bytes());
        v.extend_from_slice(&self.deliveries.to_be_bytes());
        v.extend_from_slice(&self.consumer);
        v
    }

    fn decode(id: Id, v: &[u8]) -> Result<Nack, Error> {
        if v.len() < 16 {
            return Err(Error::Corrupt);
        }
        Ok(Nack {
            id,
            delivered_ms: be_u64(&v[..8]),
            deliveries: be_u64(&v[8..16]),
            consumer: Bytes::copy_from_slice(&v[16..]),
        })
    }
}

/// `len:u32be bytes`: a name as the first field of a part, so one group's records are one contiguous range.
fn prefixed(name: &[u8]) -> Result<Vec<u8>, Error> {
    let n = u32::try_from(name.len()).map_err(|_| Error::EntryTooLarge)?;
    let mut p = Vec::with_capacity(4 + name.len() + 40);
    p.extend_from_slice(&n.to_be_bytes());
    p.extend_from_slice(name);
    Ok(p)
}

fn consumer_part(group: &[u8], consumer: &[u8]) -> Result<Vec<u8>, Error> {
    let mut p = prefixed(group)?;
    p.extend_from_slice(consumer);
    Ok(p)
}

fn pel_part(group: &[u8], id: Id) -> Result<Vec<u8>, Error> {
    let mut p = prefixed(group)?;
    p.extend_from_slice(&id.part());
    Ok(p)
}

fn consumer_pel_prefix(group: &[u8], consumer: &[u8]) -> Result<Vec<u8>, Error> {
    let mut p = prefixed(group)?;
    p.extend_from_slice(&prefixed(consumer)?);
    Ok(p)
}

/// The records of sub-kind `sub` whose parts start with `prefix`, from `prefix + from` on, as `(rest of the
/// part after prefix, value)`; `f` returns false to stop.
fn scan(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    sub: u8,
    prefix: &[u8],
    from: &[u8],
    mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, Error>,
) -> Result<(), Error> {
    let mut start = prefix.to_vec();
    start.extend_from_slice(from);
    for r in ctx.members(c, sub, Some(&start), false) {
        let (p, v) = r?;
        let Some(rest) = p.strip_prefix(prefix) else { break };
        if !f(rest, &v)? {
            break;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Reads

/// The group `name` of the stream `c`.
pub fn group(ctx: &ReadCtx<'_>, c: &Coll, name: &[u8]) -> Result<Option<Group>, Error> {
    ctx.get_member(c, SUB_GROUP, name)?.map(|v| Group::decode(name, &v)).transpose()
}

/// Every group of the stream `c`, by name.
pub fn groups(ctx: &ReadCtx<'_>, c: &Coll) -> Result<Vec<Group>, Error> {
    let mut out = Vec::new();
    scan(ctx, c, SUB_GROUP, b"", b"", |name, v| {
        out.push(Group::decode(name, v)?);
        Ok(true)
    })?;
    Ok(out)
}

/// The consumers of `group`, by name.
pub fn consumers(ctx: &ReadCtx<'_>, c: &Coll, group: &[u8]) -> Result<Vec<Consumer>, Error> {
    let mut out = Vec::new();
    scan(ctx, c, SUB_CONSUMER, &prefixed(group)?, b"", |name, v| {
        let seen_ms = v.get(..8).map(be_u64).ok_or(Error::Corrupt)?;
        out.push(Consumer { name: Bytes::copy_from_slice(name), seen_ms });
        Ok(true)
    })?;
    Ok(out)
}

/// The consumer `name` of `group`.
pub fn consumer(ctx: &ReadCtx<'_>, c: &Coll, group: &[u8], name: &[u8]) -> Result<Option<Consumer>, Error> {
    let Some(v) = ctx.get_member(c, SUB_CONSUMER, &consumer_part(group, name)?)? else { return Ok(None) };
    let seen_ms = v.get(..8).map(be_u64).ok_or(Error::Corrupt)?;
    Ok(Some(Consumer { name: Bytes::copy_from_slice(name), seen_ms }))
}

/// The pending entry `id` of `group`.
pub fn nack(ctx: &ReadCtx<'_>, c: &Coll, group: &[u8], id: Id) -> Result<Option<Nack>, Error> {
    ctx.get_member(c, SUB_PEL, &pel_part(group, id)?)?.map(|v| Nack::decode(id, &v)).transpose()
}

/// The pending entries of `group` with ids in `[start, end]`, in id order, for which `f` is called until it
/// returns false.
pub fn for_pending(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    group: &[u8],
    start: Id,
    end: Id,
    mut f: impl FnMut(Nack) -> bool,
) -> Result<(), Error> {
    scan(ctx, c, SUB_PEL, &prefixed(group)?, &start.part(), |rest, v| {
        let id = Id::from_part(rest).ok_or(Error::Corrupt)?;
        if id > end {
            return Ok(false);
        }
        Ok(f(Nack::decode(id, v)?))
    })
}

/// The ids pending for `consumer` of `group` in `[start, end]`, in order, at most `limit`.
pub fn consumer_pending(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    group: &[u8],
    consumer: &[u8],
    start: Id,
    end: Id,
    limit: usize,
) -> Result<Vec<Id>, Error> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    scan(ctx, c, SUB_CONSUMER_PEL, &consumer_pel_prefix(group, consumer)?, &start.part(), |rest, _| {
        let id = Id::from_part(rest).ok_or(Error::Corrupt)?;
        if id > end {
            return Ok(false);
        }
        out.push(id);
        Ok(out.len() < limit)
    })?;
    Ok(out)
}

/// How many entries are pending for `consumer` of `group`.
pub fn consumer_pending_count(ctx: &ReadCtx<'_>, c: &Coll, group: &[u8], consumer: &[u8]) -> Result<u64, Error> {
    let mut n = 0;
    scan(ctx, c, SUB_CONSUMER_PEL, &consumer_pel_prefix(group, consumer)?, b"", |_, _| {
        n += 1;
        Ok(true)
    })?;
    Ok(n)
}

/// The entry `id` of the stream `c`, if it exists.
pub fn entry(ctx: &ReadCtx<'_>, c: &Coll, id: Id) -> Result<Option<Entry>, Error> {
    ctx.get_member(c, crate::keys::SUB_MEMBER, &id.part())?.map(|v| Entry::decode(&id.part(), &v)).transpose()
}

// ---------------------------------------------------------------------------------------------------------
// The counters Redis reports: entries-read and lag

/// What the lag arithmetic needs of a stream.
#[derive(Clone, Copy, Debug)]
pub struct Counters {
    pub length: u64,
    pub entries_added: u64,
    pub last: Id,
    pub max_deleted: Id,
    /// The first entry's id (0-0 when empty).
    pub first: Id,
}

impl Counters {
    /// The counters of the stream `c`.
    pub fn of(ctx: &ReadCtx<'_>, c: &Coll) -> Result<Counters, Error> {
        let h = Header::of(c);
        Ok(Counters {
            length: c.size,
            entries_added: h.entries_added,
            last: h.last,
            max_deleted: h.max_deleted,
            first: first_entry_id(ctx, c)?.unwrap_or_default(),
        })
    }

    /// True when an entry was deleted (XDEL) at or after `start`, among the live range.
    fn has_tombstones(&self, start: Id) -> bool {
        if self.length == 0 || self.max_deleted == Id::default() || self.first > self.max_deleted {
            return false;
        }
        start <= self.max_deleted
    }

    /// How many entries were added up to and including `id` (its logical read counter), when it can be
    /// known; `None` when deletions make it unknowable.
    pub fn distance(&self, id: Id) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last {
            return Some(self.entries_added);
        }
        if id == self.last {
            return Some(self.entries_added);
        }
        if id > self.last {
            return None;
        }
        if self.max_deleted == Id::default() || self.max_deleted < self.first {
            if id < self.first {
                return Some(self.entries_added - self.length);
            }
            if id == self.first {
                return Some(self.entries_added - self.length + 1);
            }
        }
        None
    }

    /// How many entries `g` has yet to read; `None` when unknown. Negative when a group's entries-read was set
    /// (XGROUP CREATE/SETID ENTRIESREAD) past the entries added: Redis reports the signed difference as it is.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        let diff = |read: u64| (self.entries_added as i64).wrapping_sub(read as i64);
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = g.entries_read {
            if !self.has_tombstones(g.last) {
                return Some(diff(read));
            }
        }
        self.distance(g.last).map(diff)
    }

    /// The group's counter after it reads the entry `id` (in order, after its last id).
    fn read_one(&self, g: &mut Group, id: Id) {
        if g.entries_read.is_some() && !self.has_tombstones(id) {
            g.entries_read = g.entries_read.map(|n| n + 1);
        } else if self.entries_added > 0 {
            g.entries_read = self.distance(id);
        }
        g.last = id;
    }
}

// ---------------------------------------------------------------------------------------------------------
// Writes

/// Stores `g` as a group of the stream `c`.
pub fn put_group(ctx: &mut WriteCtx<'_>, c: &Coll, g: &Group) -> Result<(), Error> {
    Ok(ctx.put_member(c, SUB_GROUP, &g.name, &g.encode())?)
}

/// Creates or refreshes the consumer `name` of `group`, seen now. Returns true if it was created.
pub fn touch_consumer(ctx: &mut WriteCtx<'_>, c: &Coll, group: &[u8], name: &[u8]) -> Result<bool, Error> {
    let part = consumer_part(group, name)?;
    let created = ctx.get_member(c, SUB_CONSUMER, &part)?.is_none();
    ctx.put_member(c, SUB_CONSUMER, &part, &ctx.now_ms.to_be_bytes())?;
    Ok(created)
}

/// Stores the pending entry `n` of `group`, moving it from `previous` owner's index when that differs.
pub fn put_nack(
    ctx: &mut WriteCtx<'_>,
    c: &Coll,
    group: &[u8],
    n: &Nack,
    previous: Option<&[u8]>,
) -> Result<(), Error> {
    if let Some(p) = previous.filter(|p| *p != n.consumer.as_ref()) {
        let mut k = consumer_pel_prefix(group, p)?;
        k.extend_from_slice(&n.id.part());
        ctx.delete_member(c, SUB_CONSUMER_PEL, &k);
    }
    ctx.put_member(c, SUB_PEL, &pel_part(group, n.id)?, &n.encode())?;
    let mut k = consumer_pel_prefix(group, &n.consumer)?;
    k.extend_from_slice(&n.id.part());
    ctx.put_member(c, SUB_CONSUMER_PEL, &k, b"")?;
    Ok(())
}

/// Removes the pending entry `n` of `group` (acknowledged, or its entry is gone).
pub fn delete_nack(ctx: &mut WriteCtx<'_>, c: &Coll, group: &[u8], n: &Nack) -> Result<(), Error> {
    ctx.delete_member(c, SUB_PEL, &pel_part(group, n.id)?);
    let mut k = consumer_pel_prefix(group, &n.consumer)?;
    k.extend_from_slice(&n.id.part());
    ctx.delete_member(c, SUB_CONSUMER_PEL, &k);
    Ok(())
}

/// Deletes the consumer `name` of `group` and its pending entries. Returns how many were pending, or
/// `None` when there was no such consumer.
pub fn delete_consumer(ctx: &mut WriteCtx<'_>, c: &Coll, group: &[u8], name: &[u8]) -> Result<Option<u64>, Error> {
    let part = consumer_part(group, name)?;
    if ctx.get_member(c, SUB_CONSUMER, &part)?.is_none() {
        return Ok(None);
    }
    let ids = {
        let v = ctx.view();
        consumer_pending(&v, c, group, name, Id::default(), Id::MAX, usize::MAX)?
    };
    let prefix = consumer_pel_prefix(group, name)?;
    for id in &ids {
        ctx.delete_member(c, SUB_PEL, &pel_part(group, *id)?);
        let mut k = prefix.clone();
        k.extend_from_slice(&id.part());
        ctx.delete_member(c, SUB_CONSUMER_PEL, &k);
    }
    ctx.delete_member(c, SUB_CONSUMER, &part);
    Ok(Some(ids.len() as u64))
}

/// Deletes `group` with its consumers and pending entries. Returns false when there was no such group.
pub fn destroy_group(ctx: &mut WriteCtx<'_>, c: &Coll, name: &[u8]) -> Result<bool, Error> {
    if ctx.get_member(c, SUB_GROUP, name)?.is_none() {
        return Ok(false);
    }
    let prefix = prefixed(name)?;
    let mut doomed: Vec<(u8, Vec<u8>)> = Vec::new();
    {
        let v = ctx.view();
        for sub in [SUB_CONSUMER, SUB_PEL, SUB_CONSUMER_PEL] {
            scan(&v, c, sub, &prefix, b"", |rest, _| {
                let mut p = prefix.clone();
                p.extend_from_slice(rest);
                doomed.push((sub, p));
                Ok(true)
            })?;
        }
    }
    for (sub, p) in doomed {
        ctx.delete_member(c, sub, &p);
    }
    ctx.delete_member(c, SUB_GROUP, name);
    Ok(true)
}

/// XGROUP CREATE's start: an id, or `$` (the stream's last id).
#[derive(Clone, Copy, Debug)]
pub enum Start {
    Id(Id),
    Last,
}

/// Why a group operation did not happen (the command turns these into Redis's replies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No stream at the key.
    NoKey,
    /// No such group.
    NoGroup,
    /// CREATE of a group that exists.
    Exists,
}

/// XGROUP CREATE: a group on the stream `key` (created empty when `mkstream`).
pub fn create_group(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    name: &[u8],
    start: Start,
    mkstream: bool,
    entries_read: Option<u64>,
) -> Result<Result<(), Refused>, Error> {
    let c = match get_mut(ctx, key)? {
        Some(c) => c,
        None if mkstream => {
            let c = ctx.create_coll(key, Type::Stream);
            store_stream(ctx, key, &c)?;
            c
        }
        None => return Ok(Err(Refused::NoKey)),
    };
    if ctx.get_member(&c, SUB_GROUP, name)?.is_some() {
        return Ok(Err(Refused::Exists));
    }
    let last = match start {
        Start::Id(id) => id,
        Start::Last => Header::of(&c).last,
    };
    put_group(ctx, &c, &Group { name: Bytes::copy_from_slice(name), last, entries_read })?;
    Ok(Ok(()))
}

/// The stream `key` and its group `name`, for a command that needs both (commit step). A missing stream
/// is a `keymiss`, as XREADGROUP, XACK, XCLAIM and XAUTOCLAIM look it up for reading in Redis.
pub fn stream_and_group(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    name: &[u8],
) -> Result<Result<(Coll, Group), Refused>, Error> {
    let Some(c) = get_mut(ctx, key)? else {
        ctx.note_miss(key);
        return Ok(Err(Refused::NoKey));
    };
    let g = group(&ctx.view(), &c, name)?;
    Ok(g.map(|g| (c, g)).ok_or(Refused::NoGroup))
}

/// [`stream_and_group`] on a connection.
pub fn stream_and_group_read(ctx: &ReadCtx<'_>, key: &[u8], name: &[u8]) -> Result<Option<(Coll, Group)>, Error> {
    let Some(c) = get(ctx, key)? else { return Ok(None) };
    Ok(group(ctx, &c, name)?.map(|g| (c, g)))
}

/// One entry of an XREADGROUP or XCLAIM reply: its id and pairs, or no pairs when the entry was deleted.
pub type Delivered = (Id, Option<Vec<Bytes>>);

/// XREADGROUP on one stream, for `consumer` of the group `g` of the stream `c`: with `after == None`
/// (`>`), the entries after the group's last id, at most `count` (0: all), added to the PEL unless `noack`;
/// `None` when there are none. With an id, the consumer's own pending entries after it (its history).
#[allow(clippy::too_many_arguments)]
pub fn read_group(
    ctx: &mut WriteCtx<'_>,
    c: &Coll,
    mut g: Group,
    consumer: &[u8],
    after: Option<Id>,
    count: u64,
    noack: bool,
) -> Result<Option<Vec<Delivered>>, Error> {
    let now = ctx.now_ms;
    let Some(after) = after else {
        let (entries, counters) = {
            let v = ctx.view();
            let entries = read_after(&v, c, g.last, count)?;
            if entries.is_empty() {
                return Ok(None);
            }
            (entries, Counters::of(&v, c)?)
        };
        touch_consumer(ctx, c, &g.name, consumer)?;
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            counters.read_one(&mut g, e.id);
            if !noack {
                let previous = nack(&ctx.view(), c, &g.name, e.id)?.map(|n| n.consumer);
                let n = Nack { id: e.id, consumer: Bytes::copy_from_slice(consumer), delivered_ms: now, deliveries: 1 };
                put_nack(ctx, c, &g.name, &n, previous.as_deref())?;
            }
            out.push((e.id, Some(e.pairs)));
        }
        put_group(ctx, c, &g)?;
        return Ok(Some(out));
    };
    touch_consumer(ctx, c, &g.name, consumer)?;
    let Some(start) = after.next() else { return Ok(Some(Vec::new())) };
    let limit = if count == 0 { usize::MAX } else { usize::try_from(count).unwrap_or(usize::MAX) };
    let ids = consumer_pending(&ctx.view(), c, &g.name, consumer, start, Id::MAX, limit)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let (e, n) = {
            let v = ctx.view();
            (entry(&v, c, id)?, nack(&v, c, &g.name, id)?)
        };
        match (e, n) {
            (Some(e), Some(mut n)) => {
                n.delivered_ms = now;
                n.deliveries += 1;
                put_nack(ctx, c, &g.name, &n, None)?;
                out.push((id, Some(e.pairs)));
            }
            _ => out.push((id, None)),
        }
    }
    Ok(Some(out))
}

/// XACK: removes the ids from the PEL of `group`. Returns how many were pending.
pub fn ack(ctx: &mut WriteCtx<'_>, c: &Coll, group: &[u8], ids: &[Id]) -> Result<u64, Error> {
    let mut n = 0;
    for &id in ids {
        let pending = nack(&ctx.view(), c, group, id)?;
        if let Some(p) = pending {
            delete_nack(ctx, c, group, &p)?;
            n += 1;
        }
    }
    Ok(n)
}

/// XCLAIM's options.
#[derive(Clone, Copy, Debug, Default)]
pub struct Claim {
    pub min_idle: u64,
    /// The delivery time to record (IDLE/TIME, clamped to now); `None`: now.
    pub delivered_ms: Option<u64>,
    pub retry_count: Option<u64>,
    pub force: bool,
    pub justid: bool,
    pub last_id: Option<Id>,
}

/// XCLAIM: gives the pending entries `ids` of the group `g` idle for at least `min_idle` to `consumer`.
/// Returns what was claimed (entries without pairs with JUSTID). Pending entries whose stream entry is gone
/// are removed from the PEL.
pub fn claim(
    ctx: &mut WriteCtx<'_>,
    c: &Coll,
    mut g: Group,
    consumer: &[u8],
    ids: &[Id],
    o: Claim,
) -> Result<Vec<Delivered>, Error> {
    let now = ctx.now_ms;
    if let Some(l) = o.last_id.filter(|l| *l > g.last) {
        g.last = l;
        put_group(ctx, c, &g)?;
    }
    let delivered_ms = o.delivered_ms.map_or(now, |t| t.min(now));
    let mut touched = false;
    let mut out = Vec::new();
    for &id in ids {
        let (e, n) = {
            let v = ctx.view();
            (entry(&v, c, id)?, nack(&v, c, &g.name, id)?)
        };
        let Some(e) = e else {
            if let Some(n) = n {
                delete_nack(ctx, c, &g.name, &n)?;
            }
            continue;
        };
        let (mut n, previous) = match n {
            Some(n) => {
                if o.min_idle > 0 && now.saturating_sub(n.delivered_ms) < o.min_idle {
                    continue;
                }
                let p = n.consumer.clone();
                (n, Some(p))
            }
            // A forced claim creates the pending entry as a first delivery would.
            None if o.force => (Nack { id, consumer: Bytes::new(), delivered_ms: now, deliveries: 1 }, None),
            None => continue,
        };
        if !touched {
            touch_consumer(ctx, c, &g.name, consumer)?;
            touched = true;
        }
        n.consumer = Bytes::copy_from_slice(consumer);
        n.delivered_ms = delivered_ms;
        match o.retry_count {
            Some(r) => n.deliveries = r,
            None if !o.justid => n.deliveries += 1,
            None => {}
        }
        put_nack(ctx, c, &g.name, &n, previous.as_deref())?;
        out.push((id, (!o.justid).then_some(e.pairs)));
    }
    Ok(out)
}

/// XAUTOCLAIM's result: the id to continue from (0-0 at the end), the claimed entries, and the ids that
/// were pending but whose entries are gone (removed from the PEL).
pub type AutoClaimed = (Id, Vec<Delivered>, Vec<Id>);

/// XAUTOCLAIM: claims for `consumer` up to `count` pending entries of `g` from `start` on that are idle
/// for at least `min_idle`, looking at no more than `10 * count` of them.
#[allow(clippy::too_many_arguments)]
pub fn auto_claim(
    ctx: &mut WriteCtx<'_>,
    c: &Coll,
    g: &Group,
    consumer: &[u8],
    min_idle: u64,
    start: Id,
    count: u64,
    justid: bool,
) -> Result<AutoClaimed, Error> {
    let now = ctx.now_ms;
    let mut attempts = count.saturating_mul(10);
    let mut left = count;
    // The candidates: at most `attempts` pending entries, plus one to know where to continue.
    let mut seen: Vec<Nack> = Vec::new();
    let want = usize::try_from(attempts.saturating_add(1)).unwrap_or(usize::MAX);
    for_pending(&ctx.view(), c, &g.name, start, Id::MAX, |n| {
        seen.push(n);
        seen.len() < want
    })?;
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let mut touched = false;
    let mut next = Id::default();
    let mut it = seen.into_iter();
    for mut n in it.by_ref() {
        if attempts == 0 || left == 0 {
            next = n.id;
            break;
        }
        attempts -= 1;
        let e = entry(&ctx.view(), c, n.id)?;
        let Some(e) = e else {
            delete_nack(ctx, c, &g.name, &n)?;
            deleted.push(n.id);
            left -= 1;
            continue;
        };
        if min_idle > 0 && now.saturating_sub(n.delivered_ms) < min_idle {
            continue;
        }
        if !touched {
            touch_consumer(ctx, c, &g.name, consumer)?;
            touched = true;
        }
        let previous = n.consumer.clone();
        n.consumer = Bytes::copy_from_slice(consumer);
        n.delivered_ms = now;
        if !justid {
            n.deliveries += 1;
        }
        put_nack(ctx, c, &g.name, &n, Some(&previous))?;
        claimed.push((n.id, (!justid).then_some(e.pairs)));
        left -= 1;
    }
    Ok((next, claimed, deleted))
}

/// XGROUP SETID: the group's last id and entries-read counter.
pub fn set_group_id(
    ctx: &mut WriteCtx<'_>,
    c: &Coll,
    mut g: Group,
    last: Id,
    entries_read: Option<u64>,
) -> Result<(), Error> {
    g.last = last;
    g.entries_read = entries_read;
    put_group(ctx, c, &g)
}

/// XGROUP CREATECONSUMER: creates `name` in `group` if missing. Returns true when it was created.
pub fn create_consumer(ctx: &mut WriteCtx<'_>, c: &Coll, group: &[u8], name: &[u8]) -> Result<bool, Error> {
    let part = consumer_part(group, name)?;
    if ctx.get_member(c, SUB_CONSUMER, &part)?.is_some() {
        return Ok(false);
    }
    ctx.put_member(c, SUB_CONSUMER, &part, &ctx.now_ms.to_be_bytes())?;
    Ok(true)
}
