//! Streams on the engine: entry ids, the header slots, the entry records and the emulated Redis nodes; the
//! operations XADD, XTRIM, XDEL, XRANGE, XREAD and XINFO STREAM perform on them.
//!
//! Layout (docs/format/server-keys.md, "Streams"): one member record per entry, `sub 0x00`, part =
//! `ms:u64be seq:u64be` (so the records are in id order and XRANGE is one ordered scan), value =
//! `node:u64be count:u32be (len:u32be bytes){2*count}` (the field/value pairs in order; `node` is the
//! entry's emulated Redis node, see below). The collection's `extra` holds seven u64be slots ([`Header`]):
//! `last_ms last_seq max_deleted_ms max_deleted_seq entries_added tail_node tail_node_fill`. Consumer groups,
//! their consumers and pending entries are member records of sub-kinds 0x02..0x05 ([`groups`]).
//!
//! Redis keeps an empty stream (after XDEL or XTRIM of every entry), so a stream's meta value is written
//! even when its size is 0, unlike the other collections.
//!
//! Approximate trimming (`MAXLEN ~` / `MINID ~`) in Redis removes only whole radix-tree nodes of up to
//! `stream-node-max-entries` (default 100) entries. To answer the same, each entry records the node it would
//! be in: a stream starts node 0 with its first entry and opens the next node once the current one has
//! `stream-node-max-entries` entries (the value in force when each entry is added,
//! [`WriteCtx::stream_node_max_entries`]; 0: no limit) (`tail_node`, `tail_node_fill`), and an emptied stream
//! starts a fresh node. Redis also closes a node at `stream-node-max-bytes` (4096 bytes); that limit is not
//! emulated (CONFIG SET stores it only), so with large entries `~` trims in larger steps than Redis would.

use crate::keys::{be_u64, Coll, Type, SUB_MEMBER};
use crate::store::{self, ReadCtx, WriteCtx};
use bytes::Bytes;

/// Redis's `stream-node-max-entries` default (see the module comment on `~` trimming).
pub const NODE_MAX_ENTRIES: u64 = 100;

/// Whether a node holding `fill` entries is full under `stream-node-max-entries` = `max` (0: never).
fn node_full(fill: u64, max: u64) -> bool {
    max != 0 && fill >= max
}

/// The LIMIT of a `~` trim that names none: 100 nodes of `node_max` entries, kept within 1..=1,000,000
/// entries (10,000 when `node_max` is 0), as Redis does.
pub fn default_approx_limit(node_max: u64) -> u64 {
    match node_max.saturating_mul(100) {
        0 => 10_000,
        n => n.min(1_000_000),
    }
}

/// Why a stream operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The store failed (wrong type, corrupt meta value, failed read, entry too large).
    #[error(transparent)]
    Store(#[from] store::Error),
    /// An entry record that does not follow the layout.
    #[error("corrupt stream entry record")]
    Corrupt,
    /// An entry with more pairs, or a field or value longer, than a u32 counts.
    #[error("stream entry too large")]
    EntryTooLarge,
    /// XADD after the id `MAX`.
    #[error("The stream has exhausted the last possible ID, unable to add more items")]
    IdsExhausted,
    /// XADD with an id not above the last one.
    #[error("The ID specified in XADD is equal or smaller than the target stream top item")]
    IdTooSmall,
    /// XINFO STREAM on a missing key.
    #[error("no such key")]
    NoSuchKey,
    /// XSETID below the last entry.
    #[error("The ID specified in XSETID is smaller than the target stream top item")]
    SetIdTooSmall,
    /// XSETID with ENTRIESADDED below the length.
    #[error("The entries_added specified in XSETID is smaller than the target stream length")]
    EntriesAddedTooSmall,
}

/// A stream entry id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Id {
    pub ms: u64,
    pub seq: u64,
}

impl Id {
    pub const MAX: Id = Id { ms: u64::MAX, seq: u64::MAX };

    pub fn part(self) -> [u8; 16] {
        let mut p = [0u8; 16];
        p[..8].copy_from_slice(&self.ms.to_be_bytes());
        p[8..].copy_from_slice(&self.seq.to_be_bytes());
        p
    }

    pub fn from_part(p: &[u8]) -> Option<Id> {
        (p.len() == 16).then(|| Id { ms: be_u64(&p[..8]), seq: be_u64(&p[8..]) })
    }

    /// The id just after this one (`None` after [`Id::MAX`]).
    pub fn next(self) -> Option<Id> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(Id { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| Id { ms, seq: 0 }),
        }
    }

    /// The id just before this one (`None` before 0-0).
    pub fn prev(self) -> Option<Id> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(Id { ms: self.ms, seq }),
            None => self.ms.checked_sub(1).map(|ms| Id { ms, seq: u64::MAX }),
        }
    }

    pub fn text(self) -> String {
        format!("{}-{}", self.ms, self.seq)
    }
}

/// The stream's fields kept in `extra`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// The last id generated.
    pub last: Id,
    /// The largest id removed by XDEL.
    pub max_deleted: Id,
    /// Every XADD ever, trimmed entries included.
    pub entries_added: u64,
    /// The emulated node the next entry joins, and how many entries it has.
    pub tail_node: u64,
    pub tail_fill: u64,
}

impl Header {
    pub fn of(c: &Coll) -> Header {
        Header {
            last: Id { ms: c.extra_u64(0), seq: c.extra_u64(1) },
            max_deleted: Id { ms: c.extra_u64(2), seq: c.extra_u64(3) },
            entries_added: c.extra_u64(4),
            tail_node: c.extra_u64(5),
            tail_fill: c.extra_u64(6),
        }
    }

    fn store(&self, c: &mut Coll) {
        for (i, v) in [
            self.last.ms,
            self.last.seq,
            self.max_deleted.ms,
            self.max_deleted.seq,
            self.entries_added,
            self.tail_node,
            self.tail_fill,
        ]
        .into_iter()
        .enumerate()
        {
            c.set_extra_u64(i, v);
        }
    }
}

/// Encodes an entry's value: `node:u64be count:u32be (len:u32be bytes)*`.
pub fn encode_entry(node: u64, pairs: &[Bytes]) -> Result<Vec<u8>, Error> {
    let n = u32::try_from(pairs.len() / 2).map_err(|_| Error::EntryTooLarge)?;
    let mut v = Vec::with_capacity(12 + pairs.iter().map(|p| p.len() + 4).sum::<usize>());
    v.extend_from_slice(&node.to_be_bytes());
    v.extend_from_slice(&n.to_be_bytes());
    for p in pairs {
        let len = u32::try_from(p.len()).map_err(|_| Error::EntryTooLarge)?;
        v.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(p);
    }
    Ok(v)
}

/// The node of an encoded entry.
fn entry_node(v: &[u8]) -> Result<u64, Error> {
    v.get(..8).map(be_u64).ok_or(Error::Corrupt)
}

/// Decodes an entry's field/value pairs.
pub fn decode_entry(v: &[u8]) -> Result<Vec<Bytes>, Error> {
    let n = v.get(8..12).ok_or(Error::Corrupt)?;
    let n = u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize;
    let mut out = Vec::with_capacity((2 * n).min(v.len() / 4));
    let mut at = 12;
    for _ in 0..2 * n {
        let l = v.get(at..at + 4).ok_or(Error::Corrupt)?;
        let l = u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize;
        at += 4;
        out.push(Bytes::copy_from_slice(v.get(at..at + l).ok_or(Error::Corrupt)?));
        at += l;
    }
    if at != v.len() {
        return Err(Error::Corrupt);
    }
    Ok(out)
}

/// A decoded entry: its id and its field/value pairs in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: Id,
    pub pairs: Vec<Bytes>,
}

impl Entry {
    fn decode(part: &[u8], v: &[u8]) -> Result<Entry, Error> {
        let id = Id::from_part(part).ok_or(Error::Corrupt)?;
        Ok(Entry { id, pairs: decode_entry(v)? })
    }
}

pub mod groups;

/// Writes a stream's meta value, whatever its size (Redis keeps empty streams).
fn store_stream(ctx: &mut WriteCtx<'_>, key: &[u8], c: &Coll) -> Result<(), Error> {
    let v = c.encode();
    Ok(ctx.put_meta_in(ctx.db_index, key, &v)?)
}

/// The live stream `key`: `Ok(None)` when missing, `Err(WRONGTYPE)` when it holds another type. Pass a
/// [`ReadCtx::pinned`] context when entries are read next.
pub fn get(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::Stream)?)
}

/// [`get`] in the commit step.
pub fn get_mut(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<Option<Coll>, Error> {
    Ok(ctx.get_coll(key, Type::Stream)?)
}

/// The last id generated in the stream `key` (0-0 when missing): what XREAD's `$` means now.
pub fn last_id(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Id, Error> {
    Ok(get(ctx, key)?.map_or(Id::default(), |c| Header::of(&c).last))
}

/// A trim's threshold: `MAXLEN n` or `MINID id`.
#[derive(Clone, Copy, Debug)]
pub enum Threshold {
    MaxLen(u64),
    MinId(Id),
}

/// A trim request: `MAXLEN|MINID [=|~] threshold [LIMIT n]`.
#[derive(Clone, Copy, Debug)]
pub struct Trim {
    pub threshold: Threshold,
    /// `~`: whole emulated nodes only.
    pub approx: bool,
    /// Most entries removed (approximate trims only); 0: no limit.
    pub limit: u64,
}

/// Applies a trim: removes entries from the head. Returns how many were removed.
fn apply_trim(ctx: &mut WriteCtx<'_>, c: &mut Coll, t: Trim) -> Result<u64, Error> {
    let size = c.size;
    // The entries to remove, in id order: (part, node).
    let mut doomed: Vec<[u8; 16]> = Vec::new();
    {
        let view = ctx.view();
        let mut it = view.members(c, SUB_MEMBER, None, false).peekable();
        if !t.approx {
            for r in it.by_ref() {
                let (p, _) = r?;
                let id = Id::from_part(&p).ok_or(Error::Corrupt)?;
                let go = match t.threshold {
                    Threshold::MaxLen(m) => size - (doomed.len() as u64) > m,
                    Threshold::MinId(min) => id < min,
                };
                if !go {
                    break;
                }
                doomed.push(id.part());
            }
        } else {
            // Whole emulated nodes only, as Redis removes whole radix-tree nodes.
            while let Some(first) = it.next() {
                let (p, v) = first?;
                let node = entry_node(&v)?;
                let mut group = vec![Id::from_part(&p).ok_or(Error::Corrupt)?];
                while let Some(Ok((p2, v2))) = it.peek() {
                    if entry_node(v2)? != node {
                        break;
                    }
                    group.push(Id::from_part(p2).ok_or(Error::Corrupt)?);
                    it.next();
                }
                let live = group.len() as u64;
                let left = size - doomed.len() as u64;
                let ok = match t.threshold {
                    Threshold::MaxLen(m) => left - live >= m,
                    Threshold::MinId(min) => group.last().is_some_and(|last| *last < min),
                };
                if !ok || (t.limit != 0 && doomed.len() as u64 + live > t.limit) {
                    break;
                }
                doomed.extend(group.iter().map(|id| id.part()));
            }
        }
    }
    for p in &doomed {
        ctx.delete_member(c, SUB_MEMBER, p);
    }
    let n = doomed.len() as u64;
    c.size -= n;
    Ok(n)
}

/// The id XADD asks for: `*`, `ms-*` (the sequence chosen) or an explicit id.
#[derive(Clone, Copy, Debug)]
pub enum NewId {
    Auto,
    Ms(u64),
    Exact(Id),
}

/// Appends an entry with the field/value `pairs` to the stream `key` (XADD), creating the stream unless
/// `nomkstream`, then applies `trim`. Returns the entry's id, or `None` when there is no stream and
/// `nomkstream`.
pub fn add(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    want: NewId,
    pairs: &[Bytes],
    nomkstream: bool,
    trim: Option<Trim>,
) -> Result<Option<Id>, Error> {
    Ok(add_and_trim(ctx, key, want, pairs, nomkstream, trim)?.map(|(id, _)| id))
}

/// [`add`], also returning how many entries its `trim` removed (XADD publishes `xtrim` after `xadd` when
/// that is not 0, as Redis does).
pub fn add_and_trim(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    want: NewId,
    pairs: &[Bytes],
    nomkstream: bool,
    trim: Option<Trim>,
) -> Result<Option<(Id, u64)>, Error> {
    let existing = get_mut(ctx, key)?;
    if existing.is_none() && nomkstream {
        return Ok(None);
    }
    let mut c = match existing {
        Some(c) => c,
        None => ctx.create_coll(key, Type::Stream),
    };
    let mut h = Header::of(&c);
    if h.last == Id::MAX {
        return Err(Error::IdsExhausted);
    }
    let id = match want {
        NewId::Auto => {
            let ms = ctx.now_ms.max(h.last.ms);
            if ms == h.last.ms {
                h.last.next().ok_or(Error::IdTooSmall)?
            } else {
                Id { ms, seq: 0 }
            }
        }
        NewId::Ms(ms) => {
            if ms < h.last.ms {
                return Err(Error::IdTooSmall);
            }
            if ms == h.last.ms {
                if h.last.seq == u64::MAX {
                    return Err(Error::IdTooSmall);
                }
                Id { ms, seq: h.last.seq + 1 }
            } else {
                Id { ms, seq: 0 }
            }
        }
        NewId::Exact(id) => {
            if id <= h.last {
                return Err(Error::IdTooSmall);
            }
            id
        }
    };
    if c.size == 0 || node_full(h.tail_fill, ctx.stream_node_max_entries) {
        if c.size == 0 && h.entries_added == 0 {
            h.tail_node = 0;
        } else {
            h.tail_node += 1;
        }
        h.tail_fill = 0;
    }
    let v = encode_entry(h.tail_node, pairs)?;
    ctx.put_member(&c, SUB_MEMBER, &id.part(), &v)?;
    h.tail_fill += 1;
    h.last = id;
    h.entries_added += 1;
    c.size += 1;
    let trimmed = match trim {
        Some(t) => apply_trim(ctx, &mut c, t)?,
        None => 0,
    };
    h.store(&mut c);
    store_stream(ctx, key, &c)?;
    ctx.signal_key(key);
    Ok(Some((id, trimmed)))
}

/// Trims the stream `key` (XTRIM). Returns how many entries were removed (0 when there is no stream).
pub fn trim(ctx: &mut WriteCtx<'_>, key: &[u8], t: Trim) -> Result<u64, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(0) };
    let n = apply_trim(ctx, &mut c, t)?;
    if n > 0 {
        store_stream(ctx, key, &c)?;
    }
    Ok(n)
}

/// Deletes the entries `ids` of the stream `key` (XDEL), raising the header's `max_deleted`. Returns how
/// many existed.
pub fn delete(ctx: &mut WriteCtx<'_>, key: &[u8], ids: &[Id]) -> Result<u64, Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Ok(0) };
    let mut h = Header::of(&c);
    let mut n = 0;
    for &id in ids {
        if ctx.get_member(&c, SUB_MEMBER, &id.part())?.is_some() {
            ctx.delete_member(&c, SUB_MEMBER, &id.part());
            c.size -= 1;
            n += 1;
            if id > h.max_deleted {
                h.max_deleted = id;
            }
        }
    }
    if n > 0 {
        h.store(&mut c);
        store_stream(ctx, key, &c)?;
    }
    Ok(n)
}

/// The entries of the stream `c` with ids in `[start, end]`, ascending or (`rev`) descending, at most
/// `count` of them (XRANGE, XREVRANGE). Read `c` from the same pinned context.
pub fn range(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    start: Id,
    end: Id,
    rev: bool,
    count: Option<u64>,
) -> Result<Vec<Entry>, Error> {
    let from = if rev { end } else { start };
    let mut out = Vec::new();
    for r in ctx.members(c, SUB_MEMBER, Some(&from.part()), rev) {
        let (p, v) = r?;
        let id = Id::from_part(&p).ok_or(Error::Corrupt)?;
        if (!rev && id > end) || (rev && id < start) {
            break;
        }
        out.push(Entry::decode(&p, &v)?);
        if count.is_some_and(|n| out.len() as u64 >= n) {
            break;
        }
    }
    Ok(out)
}

/// The entries of the stream `c` with ids above `after`, ascending, at most `count` of them (0: all)
/// (XREAD). Read `c` from the same pinned context.
pub fn read_after(ctx: &ReadCtx<'_>, c: &Coll, after: Id, count: u64) -> Result<Vec<Entry>, Error> {
    let Some(from) = after.next() else { return Ok(Vec::new()) };
    let mut entries = Vec::new();
    for r in ctx.members(c, SUB_MEMBER, Some(&from.part()), false) {
        let (p, v) = r?;
        entries.push(Entry::decode(&p, &v)?);
        if count > 0 && entries.len() as u64 >= count {
            break;
        }
    }
    Ok(entries)
}

/// The id of the first entry of the stream `c` (`None` when empty). Read `c` from the same pinned context.
pub fn first_entry_id(ctx: &ReadCtx<'_>, c: &Coll) -> Result<Option<Id>, Error> {
    match ctx.members(c, SUB_MEMBER, None, false).next().transpose()? {
        Some((p, _)) => Ok(Some(Id::from_part(&p).ok_or(Error::Corrupt)?)),
        None => Ok(None),
    }
}

/// XSETID: sets the stream's last id, and optionally its entries-added counter and largest deleted id.
/// [`Error::NoSuchKey`] when there is no stream.
pub fn set_id(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    last: Id,
    entries_added: Option<u64>,
    max_deleted: Option<Id>,
) -> Result<(), Error> {
    let Some(mut c) = get_mut(ctx, key)? else { return Err(Error::NoSuchKey) };
    let mut h = Header::of(&c);
    if c.size > 0 {
        let top = {
            let v = ctx.view();
            let r = v.members(&c, SUB_MEMBER, None, true).next().transpose()?;
            r.and_then(|(p, _)| Id::from_part(&p))
        };
        if top.is_some_and(|t| last < t) {
            return Err(Error::SetIdTooSmall);
        }
        if entries_added.is_some_and(|n| n < c.size) {
            return Err(Error::EntriesAddedTooSmall);
        }
    }
    h.last = last;
    if let Some(n) = entries_added {
        h.entries_added = n;
    }
    if let Some(m) = max_deleted.filter(|m| *m != Id::default()) {
        h.max_deleted = m;
    }
    h.store(&mut c);
    store_stream(ctx, key, &c)
}

/// The first and the last entry of the stream `c` (one seek each; XINFO STREAM). Read `c` from the same
/// pinned context.
pub fn edges(ctx: &ReadCtx<'_>, c: &Coll) -> Result<(Option<Entry>, Option<Entry>), Error> {
    let edge = |rev: bool| ctx.members(c, SUB_MEMBER, None, rev).next().transpose();
    let first = edge(false)?;
    let last = edge(true)?;
    let decode = |e: Option<(Vec<u8>, Vec<u8>)>| e.map(|(p, v)| Entry::decode(&p, &v)).transpose();
    Ok((decode(first)?, decode(last)?))
}

/// RESTORE: creates the stream `key` (absent: the caller removed it) holding `entries` (ascending ids, none
/// above `last`) with the header fields Redis keeps, expiring at `expire_at_ms`. The entries fill emulated
/// nodes of [`WriteCtx::stream_node_max_entries`] in order. Returns the stored collection (for its groups).
pub fn restore(
    ctx: &mut WriteCtx<'_>,
    key: &[u8],
    entries: &[Entry],
    last: Id,
    max_deleted: Id,
    entries_added: u64,
    expire_at_ms: Option<u64>,
) -> Result<Coll, Error> {
    let mut c = ctx.create_coll(key, Type::Stream);
    c.expire_at_ms = expire_at_ms;
    let mut h = Header { last, max_deleted, entries_added, tail_node: 0, tail_fill: 0 };
    for e in entries {
        if node_full(h.tail_fill, ctx.stream_node_max_entries) {
            h.tail_node += 1;
            h.tail_fill = 0;
        }
        let v = encode_entry(h.tail_node, &e.pairs)?;
        ctx.put_member(&c, SUB_MEMBER, &e.id.part(), &v)?;
        h.tail_fill += 1;
        c.size += 1;
    }
    h.store(&mut c);
    store_stream(ctx, key, &c)?;
    ctx.signal_key(key);
    Ok(c)
}

#[cfg(test)]
mod tests;
