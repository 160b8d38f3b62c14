//! Reads one RDB object (the body of a payload) into a [`Value`]. Every length is checked against the bytes
//! that remain before it sizes anything (a count sizes a vector only up to the bytes left, as every element
//! takes at least one byte); anything malformed is [`Error::BadFormat`].

use super::packed::{self, Item};
use super::{Error, GroupValue, Pending, StreamValue, Value};
use crate::types::stream::groups::Counters;
use crate::types::stream::{Entry, Id};
use bytes::Bytes;
use std::collections::{BTreeMap, HashSet};

/// Object types (RDB's, frozen).
pub mod kind {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// Quicklist node containers (RDB_TYPE_LIST_QUICKLIST_2).
pub const CONTAINER_PLAIN: u64 = 1;
pub const CONTAINER_PACKED: u64 = 2;

/// Stream entry flags inside a node's listpack.
pub const FLAG_DELETED: i64 = 1;
pub const FLAG_SAMEFIELDS: i64 = 2;

fn bad(what: &'static str) -> Error {
    Error::BadFormat(what)
}

/// A cursor over the object's bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, at: 0 }
    }

    /// Bytes not read yet.
    pub fn left(&self) -> usize {
        self.buf.len() - self.at
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], Error> {
        if n > self.left() as u64 {
            return Err(bad("length past the end of the payload"));
        }
        let s = &self.buf[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }

    /// The object's type (its first byte).
    pub fn object_type(&mut self) -> Result<u8, Error> {
        self.byte()
    }

    fn u64le(&mut self) -> Result<u64, Error> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| bad("short read"))?))
    }

    /// A length, or the encoding of a special string: `(value, encoded)`.
    fn len_or_enc(&mut self) -> Result<(u64, bool), Error> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.byte()? as u64, false),
            3 => ((b & 0x3f) as u64, true),
            _ => match b {
                0x80 => (u32::from_be_bytes(self.take(4)?.try_into().map_err(|_| bad("short read"))?) as u64, false),
                0x81 => (u64::from_be_bytes(self.take(8)?.try_into().map_err(|_| bad("short read"))?), false),
                _ => return Err(bad("unknown length encoding")),
            },
        })
    }

    /// A length (not a special string).
    pub fn length(&mut self) -> Result<u64, Error> {
        match self.len_or_enc()? {
            (v, false) => Ok(v),
            (_, true) => Err(bad("string encoding where a length belongs")),
        }
    }

    /// A string: raw, an integer in 1, 2 or 4 bytes, or LZF-compressed.
    pub fn string(&mut self) -> Result<Vec<u8>, Error> {
        let (v, enc) = self.len_or_enc()?;
        if !enc {
            return Ok(self.take(v)?.to_vec());
        }
        let n = match v {
            0 => self.take(1)?[0] as i8 as i64,
            1 => i16::from_le_bytes([self.byte()?, self.byte()?]) as i64,
            2 => {
                let b = self.take(4)?;
                i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64
            }
            3 => {
                let clen = self.length()?;
                let ulen = self.length()?;
                let c = self.take(clen)?;
                let ulen = usize::try_from(ulen).map_err(|_| bad("compressed string too long"))?;
                return super::lzf::decompress(c, ulen).ok_or(bad("invalid LZF compressed string"));
            }
            _ => return Err(bad("unknown string encoding")),
        };
        Ok(n.to_string().into_bytes())
    }

    /// A score in text form (old sorted sets): `len:u8` then the text; 253 NaN, 254 +inf, 255 -inf.
    fn text_double(&mut self) -> Result<f64, Error> {
        let l = self.byte()?;
        let v = match l {
            253 => f64::NAN,
            254 => f64::INFINITY,
            255 => f64::NEG_INFINITY,
            _ => parse_score(self.take(l as u64)?).ok_or(bad("unreadable score"))?,
        };
        Ok(v)
    }

    fn binary_double(&mut self) -> Result<f64, Error> {
        Ok(f64::from_bits(self.u64le()?))
    }

    /// A count of elements, each taking at least `min` bytes: refused when the bytes left cannot hold them.
    fn count(&mut self, min: u64) -> Result<u64, Error> {
        let n = self.length()?;
        if n.saturating_mul(min) > self.left() as u64 {
            return Err(bad("count larger than the payload holds"));
        }
        Ok(n)
    }

    fn stream_id(&mut self) -> Result<Id, Error> {
        Ok(Id { ms: self.length()?, seq: self.length()? })
    }

    fn raw_id(&mut self) -> Result<Id, Error> {
        Id::from_part(self.take(16)?).ok_or(bad("short stream id"))
    }
}

/// A score's text as Redis reads it (`inf`, `-inf`, decimals); NaN is refused.
fn parse_score(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    let v: f64 = match t {
        "inf" | "+inf" | "infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => t.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

fn item_score(it: Item<'_>) -> Result<f64, Error> {
    match it {
        Item::Int(v) => Ok(v as f64),
        Item::Str(s) => parse_score(s).ok_or(bad("unreadable score")),
    }
}

/// Reads the object of type `typ` from `r`.
pub fn object(typ: u8, r: &mut Reader<'_>) -> Result<Value, Error> {
    use kind::*;
    let v = match typ {
        STRING => Value::String(r.string()?),
        LIST => {
            let n = r.count(1)?;
            let mut out = Vec::with_capacity(n as usize);
            for _ in 0..n {
                out.push(r.string()?);
            }
            Value::List(out)
        }
        SET => {
            let n = r.count(1)?;
            let mut out = Vec::with_capacity(n as usize);
            for _ in 0..n {
                out.push(r.string()?);
            }
            Value::Set(out)
        }
        ZSET | ZSET_2 => {
            let n = r.count(2)?;
            let mut out = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let m = r.string()?;
                let s = if typ == ZSET { r.text_double()? } else { r.binary_double()? };
                out.push((m, s));
            }
            Value::ZSet(out)
        }
        HASH => {
            let n = r.count(2)?;
            let mut out = Vec::with_capacity(n as usize);
            for _ in 0..n {
                out.push((r.string()?, r.string()?));
            }
            Value::Hash(out)
        }
        HASH_ZIPMAP => Value::Hash(packed::zipmap(&r.string()?).map_err(bad)?),
        LIST_ZIPLIST => {
            Value::List(packed::ziplist(&r.string()?).map_err(bad)?.into_iter().map(Item::to_vec).collect())
        }
        SET_INTSET => Value::Set(
            packed::intset(&r.string()?).map_err(bad)?.into_iter().map(|v| v.to_string().into_bytes()).collect(),
        ),
        ZSET_ZIPLIST | ZSET_LISTPACK => {
            let blob = r.string()?;
            let items =
                if typ == ZSET_ZIPLIST { packed::ziplist(&blob) } else { packed::listpack(&blob) }.map_err(bad)?;
            if items.len() % 2 != 0 {
                return Err(bad("sorted set with an odd number of elements"));
            }
            let mut out = Vec::with_capacity(items.len() / 2);
            for p in items.chunks_exact(2) {
                out.push((p[0].to_vec(), item_score(p[1])?));
            }
            Value::ZSet(out)
        }
        HASH_ZIPLIST | HASH_LISTPACK => {
            let blob = r.string()?;
            let items =
                if typ == HASH_ZIPLIST { packed::ziplist(&blob) } else { packed::listpack(&blob) }.map_err(bad)?;
            if items.len() % 2 != 0 {
                return Err(bad("hash with an odd number of elements"));
            }
            Value::Hash(items.chunks_exact(2).map(|p| (p[0].to_vec(), p[1].to_vec())).collect())
        }
        LIST_QUICKLIST | LIST_QUICKLIST_2 => {
            let nodes = r.count(1)?;
            let mut out = Vec::new();
            for _ in 0..nodes {
                let container = if typ == LIST_QUICKLIST_2 { r.length()? } else { CONTAINER_PACKED };
                let blob = r.string()?;
                if blob.is_empty() {
                    return Err(bad("empty quicklist node"));
                }
                match container {
                    CONTAINER_PLAIN => out.push(blob),
                    CONTAINER_PACKED => {
                        let items =
                            if typ == LIST_QUICKLIST { packed::ziplist(&blob) } else { packed::listpack(&blob) };
                        out.extend(items.map_err(bad)?.into_iter().map(Item::to_vec));
                    }
                    _ => return Err(bad("unknown quicklist container")),
                }
            }
            Value::List(out)
        }
        STREAM_LISTPACKS | STREAM_LISTPACKS_2 => Value::Stream(Box::new(stream(typ == STREAM_LISTPACKS_2, r)?)),
        _ => return Err(bad("unknown or unsupported object type")),
    };
    check(&v)?;
    Ok(v)
}

/// What Redis refuses of every value: empty collections (streams may be empty), duplicate members or
/// fields, NaN scores.
fn check(v: &Value) -> Result<(), Error> {
    fn distinct<'a>(it: impl Iterator<Item = &'a [u8]>) -> Result<(), Error> {
        let mut seen = HashSet::new();
        for m in it {
            if !seen.insert(m) {
                return Err(bad("duplicate member"));
            }
        }
        Ok(())
    }
    match v {
        Value::String(_) | Value::Stream(_) => Ok(()),
        Value::List(l) if l.is_empty() => Err(bad("empty list")),
        Value::List(_) => Ok(()),
        Value::Set(s) if s.is_empty() => Err(bad("empty set")),
        Value::Set(s) => distinct(s.iter().map(|m| m.as_slice())),
        Value::ZSet(z) if z.is_empty() => Err(bad("empty sorted set")),
        Value::ZSet(z) => {
            if z.iter().any(|(_, s)| s.is_nan()) {
                return Err(bad("NaN score"));
            }
            distinct(z.iter().map(|(m, _)| m.as_slice()))
        }
        Value::Hash(h) if h.is_empty() => Err(bad("empty hash")),
        Value::Hash(h) => distinct(h.iter().map(|(f, _)| f.as_slice())),
    }
}

/// One node's listpack: the live entries after `master`, appended to `out`.
fn stream_node(master: Id, lp: &[u8], out: &mut Vec<Entry>) -> Result<(), Error> {
    let items = packed::listpack(lp).map_err(bad)?;
    let mut it = items.into_iter();
    fn int(it: &mut std::vec::IntoIter<Item<'_>>) -> Result<i64, Error> {
        it.next().and_then(Item::as_i64).ok_or(bad("stream node: missing or non-integer field"))
    }
    let count = int(&mut it)?;
    let deleted = int(&mut it)?;
    let nfields = int(&mut it)?;
    if count < 0 || deleted < 0 || nfields < 0 || nfields as u64 > lp.len() as u64 {
        return Err(bad("stream node: bad master entry"));
    }
    let mut master_fields = Vec::with_capacity(nfields as usize);
    for _ in 0..nfields {
        master_fields.push(Bytes::from(it.next().ok_or(bad("stream node: short master entry"))?.to_vec()));
    }
    if int(&mut it)? != 0 {
        return Err(bad("stream node: master entry not terminated"));
    }
    let (mut live, mut dead) = (0i64, 0i64);
    while it.len() > 0 {
        let flags = int(&mut it)?;
        let ms = master.ms.wrapping_add(int(&mut it)? as u64);
        let seq = master.seq.wrapping_add(int(&mut it)? as u64);
        let mut pairs = Vec::new();
        let expect_lp_count = if flags & FLAG_SAMEFIELDS != 0 {
            for f in &master_fields {
                pairs.push(f.clone());
                pairs.push(Bytes::from(it.next().ok_or(bad("stream entry: short"))?.to_vec()));
            }
            nfields + 3
        } else {
            let n = int(&mut it)?;
            if n < 0 || n as u64 > lp.len() as u64 {
                return Err(bad("stream entry: bad field count"));
            }
            for _ in 0..2 * n {
                pairs.push(Bytes::from(it.next().ok_or(bad("stream entry: short"))?.to_vec()));
            }
            2 * n + 4
        };
        if int(&mut it)? != expect_lp_count {
            return Err(bad("stream entry: lp-count does not match"));
        }
        if flags & FLAG_DELETED != 0 {
            dead += 1;
        } else {
            live += 1;
            out.push(Entry { id: Id { ms, seq }, pairs });
        }
    }
    if live == 0 && dead == 0 {
        return Err(bad("empty stream node"));
    }
    if live != count || dead != deleted {
        return Err(bad("stream node: counts do not match its entries"));
    }
    Ok(())
}

fn stream(v2: bool, r: &mut Reader<'_>) -> Result<StreamValue, Error> {
    let nodes = r.count(2)?;
    let mut entries = Vec::new();
    let mut keys = HashSet::new();
    for _ in 0..nodes {
        let key = r.string()?;
        let master = Id::from_part(&key).ok_or(bad("stream node key is not a stream id"))?;
        if !keys.insert(master) {
            return Err(bad("stream node key twice"));
        }
        let lp = r.string()?;
        stream_node(master, &lp, &mut entries)?;
    }
    entries.sort_by_key(|e| e.id);
    if entries.windows(2).any(|w| w[0].id == w[1].id) {
        return Err(bad("stream entry id twice"));
    }
    let length = r.length()?;
    if length != entries.len() as u64 {
        return Err(bad("stream length does not match its entries"));
    }
    let last = r.stream_id()?;
    if entries.last().is_some_and(|e| e.id > last) {
        return Err(bad("stream entry after the last id"));
    }
    let (max_deleted, entries_added) = if v2 {
        let _first = r.stream_id()?;
        (r.stream_id()?, r.length()?)
    } else {
        (Id::default(), length)
    };
    let ngroups = r.count(1)?;
    let mut groups = Vec::new();
    let mut names = HashSet::new();
    for _ in 0..ngroups {
        let name = r.string()?;
        if !names.insert(name.clone()) {
            return Err(bad("consumer group twice"));
        }
        let last_delivered = r.stream_id()?;
        let entries_read = if v2 {
            r.length()?
        } else {
            // A payload from before Redis 7.0 has no read counters: as Redis 7.0 loads one, estimate each
            // group's from its last id, taking every entry ever added to be still there (entries-added is
            // the length, no deletion recorded).
            let counters = Counters {
                length,
                entries_added,
                last,
                max_deleted,
                first: entries.first().map_or_else(Id::default, |e| e.id),
            };
            counters.distance(last_delivered).unwrap_or(u64::MAX)
        };
        let npel = r.count(17)?;
        // id -> (delivered_ms, deliveries, owner)
        let mut pel: BTreeMap<Id, (u64, u64, Option<Vec<u8>>)> = BTreeMap::new();
        for _ in 0..npel {
            let id = r.raw_id()?;
            let delivered = r.u64le()?;
            let count = r.length()?;
            if pel.insert(id, (delivered, count, None)).is_some() {
                return Err(bad("pending entry twice in a group"));
            }
        }
        let nconsumers = r.count(10)?;
        let mut consumers = Vec::new();
        let mut cnames = HashSet::new();
        for _ in 0..nconsumers {
            let cname = r.string()?;
            if !cnames.insert(cname.clone()) {
                return Err(bad("consumer twice in a group"));
            }
            let seen = r.u64le()?;
            let n = r.count(16)?;
            for _ in 0..n {
                let id = r.raw_id()?;
                let slot = pel.get_mut(&id).ok_or(bad("consumer entry not in the group's pending list"))?;
                if slot.2.is_some() {
                    return Err(bad("pending entry owned twice"));
                }
                slot.2 = Some(cname.clone());
            }
            consumers.push((cname, seen));
        }
        let mut pending = Vec::with_capacity(pel.len());
        for (id, (delivered_ms, deliveries, owner)) in pel {
            let consumer = owner.ok_or(bad("pending entry without a consumer"))?;
            pending.push(Pending { id, delivered_ms, deliveries, consumer });
        }
        groups.push(GroupValue {
            name,
            last: last_delivered,
            entries_read: (entries_read != u64::MAX).then_some(entries_read),
            pending,
            consumers,
        });
    }
    Ok(StreamValue { entries, last, max_deleted, entries_added, groups })
}
