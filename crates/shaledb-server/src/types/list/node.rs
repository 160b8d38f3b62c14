//! The records of a list: nodes of [`K`] consecutive indexes, and the elements too long to keep inline.
//!
//! ```text
//! list extra    := head:u64be tail:u64be             the elements are at indexes [head, tail); size = tail - head
//! list node     := db 0x01 version 0x02 node:u64be -> node_value     node n: indexes [32n, 32n+32)
//! node_value    := entry*                            the node's live elements, in index order
//! entry         := 0x00 len:varint bytes             inline (at most 512 bytes)
//!                | 0x01                              external: the bytes are the list external record
//! list external := db 0x01 version 0x02 node:u64be slot:u8 -> element bytes     slot = index % 32
//! varint        := LEB128, at most 10 bytes
//! ```
//!
//! The live elements of node `n` of a list `[head, tail)` are the indexes `[max(head, 32n), min(tail,
//! 32n + 32))`; element `a` is entry `a - max(head, 32n)` of node `a / 32`. An external record sorts right
//! after its node record, so an ordered scan from a node reads the node and its external elements together
//! ([`NodeScan`]). Every length read from disk is checked against the bytes left: a corrupt record is
//! [`Error::Corrupt`], never a panic or a large allocation.

use super::Error;
use crate::keys::Coll;
use crate::store::{Members, ReadCtx};

/// `sub` byte of a list's node and external records (sub 0x00 held one record per element before
/// keyspace format version 2).
pub const SUB_NODE: u8 = 0x02;

/// Indexes per node.
pub const K: u64 = 32;

/// The longest element kept inline in its node record.
pub const INLINE_MAX: usize = 512;

const TAG_INLINE: u8 = 0x00;
const TAG_EXTERNAL: u8 = 0x01;

/// The node holding index `a`.
pub fn node_of(a: u64) -> u64 {
    a / K
}

/// The part (after `db 0x01 version sub`) of node `n`'s record.
pub fn node_part(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

/// The part of the external record at `slot` of node `n`.
pub fn ext_part(n: u64, slot: u8) -> [u8; 9] {
    let mut p = [0u8; 9];
    p[..8].copy_from_slice(&n.to_be_bytes());
    p[8] = slot;
    p
}

/// True when `v` is stored in an external record rather than inline.
pub fn is_external(v: &[u8]) -> bool {
    v.len() > INLINE_MAX
}

/// The live indexes `[lo, hi)` of node `n` in a list `[head, tail)` (empty when `lo >= hi`).
pub fn live(n: u64, head: u64, tail: u64) -> (u64, u64) {
    let first = n * K;
    let last = first + (K - 1);
    let hi = if tail > last { last + 1 } else { tail };
    (head.max(first), hi)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint at `*at` of `b`, advancing `*at`; `None` when truncated or longer than 64 bits.
fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        v |= bits << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The node value of `values` (in index order): short ones inline, long ones marked external.
pub fn encode<'v, I>(values: I) -> Vec<u8>
where
    I: IntoIterator<Item = &'v [u8]>,
    I::IntoIter: Clone,
{
    let values = values.into_iter();
    let mut out = Vec::with_capacity(encoded_size(values.clone()));
    encode_into(values, &mut out);
    out
}

/// An upper bound of the bytes [`encode`] makes of `values` (a tag, at most a 2-byte length, the bytes).
pub fn encoded_size<'v>(values: impl IntoIterator<Item = &'v [u8]>) -> usize {
    values.into_iter().map(|v| if is_external(v) { 1 } else { 3 + v.len() }).sum()
}

/// [`encode`], appended to `out`: the entries of `values`, in order.
pub fn encode_into<'v>(values: impl IntoIterator<Item = &'v [u8]>, out: &mut Vec<u8>) {
    for v in values {
        if is_external(v) {
            out.push(TAG_EXTERNAL);
        } else {
            out.push(TAG_INLINE);
            put_varint(out, v.len() as u64);
            out.extend_from_slice(v);
        }
    }
}

/// One entry of a decoded node value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// The element's bytes are `raw[start..end]`; its entry starts at `raw[tag]`.
    Inline { tag: usize, start: usize, end: usize },
    /// The element is `ext[i]`; its entry is the byte `raw[tag]`.
    External { tag: usize, i: usize },
}

impl Entry {
    /// The bytes of the entry in the node value: `raw[start..end]`.
    fn span(&self) -> (usize, usize) {
        match *self {
            Entry::Inline { tag, end, .. } => (tag, end),
            Entry::External { tag, .. } => (tag, tag + 1),
        }
    }
}

/// The entries of a node value: `Err(Corrupt)` when it does not follow the grammar.
fn parse(raw: &[u8]) -> Result<Vec<Entry>, Error> {
    // Every entry takes at least one byte, and a node holds at most K: one allocation.
    let mut entries = Vec::with_capacity(raw.len().min(K as usize + 1));
    let mut at = 0;
    let mut ext = 0;
    while at < raw.len() {
        let tag_at = at;
        let tag = raw[at];
        at += 1;
        match tag {
            TAG_INLINE => {
                let len = get_varint(raw, &mut at).ok_or(Error::Corrupt)?;
                let left = (raw.len() - at) as u64;
                if len > left || len > INLINE_MAX as u64 {
                    return Err(Error::Corrupt);
                }
                let end = at + len as usize;
                entries.push(Entry::Inline { tag: tag_at, start: at, end });
                at = end;
            }
            TAG_EXTERNAL => {
                entries.push(Entry::External { tag: tag_at, i: ext });
                ext += 1;
            }
            _ => return Err(Error::Corrupt),
        }
        if entries.len() as u64 > K {
            return Err(Error::Corrupt);
        }
    }
    Ok(entries)
}

/// How many elements a node value holds (MEMORY USAGE's sampling); `Err(Corrupt)` when it does not parse.
pub fn count(raw: &[u8]) -> Result<u64, Error> {
    Ok(parse(raw)?.len() as u64)
}

/// The number of entries of a node value and its entry `i`: `Some(bytes)` when inline, `None` when in an
/// external record (LINDEX's point read). `Err(Corrupt)` when the value does not parse or is too short.
pub fn entry_at(raw: &[u8], i: usize) -> Result<(u64, Option<&[u8]>), Error> {
    let entries = parse(raw)?;
    let count = entries.len() as u64;
    match entries.get(i) {
        Some(&Entry::Inline { start, end, .. }) => Ok((count, Some(raw.get(start..end).ok_or(Error::Corrupt)?))),
        Some(Entry::External { .. }) => Ok((count, None)),
        None => Err(Error::Corrupt),
    }
}

/// A node read from the engine, its external elements loaded.
#[derive(Debug)]
pub struct Node {
    /// Its number.
    pub n: u64,
    /// The index of its first live element.
    pub first: u64,
    /// The stored node value.
    pub raw: Vec<u8>,
    entries: Vec<Entry>,
    /// The external elements, in entry order.
    ext: Vec<Vec<u8>>,
}

impl Node {
    /// The element at index `a` (absolute), `None` when the node does not hold it.
    pub fn at(&self, a: u64) -> Option<&[u8]> {
        let i = usize::try_from(a.checked_sub(self.first)?).ok()?;
        match *self.entries.get(i)? {
            Entry::Inline { start, end, .. } => self.raw.get(start..end),
            Entry::External { i, .. } => self.ext.get(i).map(Vec::as_slice),
        }
    }

    /// True when the element at index `a` is in an external record.
    pub fn external_at(&self, a: u64) -> bool {
        let Some(i) = a.checked_sub(self.first).and_then(|i| usize::try_from(i).ok()) else { return false };
        matches!(self.entries.get(i), Some(Entry::External { .. }))
    }

    /// The bytes of the entries of the indexes `[from, to)` in its stored value, `None` unless it holds them
    /// all (`None` too when `from >= to`): a rewrite copies the entries it keeps without decoding them.
    pub fn raw_span(&self, from: u64, to: u64) -> Option<&[u8]> {
        if from >= to {
            return None;
        }
        let i = usize::try_from(from.checked_sub(self.first)?).ok()?;
        let j = usize::try_from(to.checked_sub(self.first)?).ok()?.checked_sub(1)?;
        let (start, _) = self.entries.get(i)?.span();
        let (_, end) = self.entries.get(j)?.span();
        self.raw.get(start..end)
    }

    /// The end of its live indexes (exclusive).
    pub fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    /// The slots of its external records.
    pub fn ext_slots(&self) -> impl Iterator<Item = u8> + '_ {
        let base = self.first % K;
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Entry::External { .. }))
            .map(move |(i, _)| (base + i as u64) as u8)
    }

    /// Decodes node `n` of a list `[head, tail)` from its stored value; `Err(Corrupt)` unless it holds exactly
    /// the node's live elements.
    fn decode(n: u64, head: u64, tail: u64, raw: Vec<u8>) -> Result<Node, Error> {
        let (first, end) = live(n, head, tail);
        let entries = parse(&raw)?;
        if first >= end || entries.len() as u64 != end - first {
            return Err(Error::Corrupt);
        }
        Ok(Node { n, first, raw, entries, ext: Vec::new() })
    }

    /// The external elements, checked against the records found: `(slot, bytes)` in slot order.
    fn attach(&mut self, found: Vec<(u8, Vec<u8>)>) -> Result<(), Error> {
        let slots: Vec<u8> = self.ext_slots().collect();
        if slots.len() != found.len() {
            return Err(Error::Corrupt);
        }
        for (want, (slot, v)) in slots.into_iter().zip(found) {
            if want != slot || !is_external(&v) {
                return Err(Error::Corrupt);
            }
            self.ext.push(v);
        }
        Ok(())
    }
}

/// Reads node `n` of the list `c` (`head`, `tail` its bounds) by point reads: the node record, then each of
/// its external records. `Err(Corrupt)` when a record is missing or disagrees with the bounds.
pub fn read(ctx: &ReadCtx<'_>, c: &Coll, head: u64, tail: u64, n: u64) -> Result<Node, Error> {
    let raw = ctx.get_member(c, SUB_NODE, &node_part(n))?.ok_or(Error::Corrupt)?;
    let mut node = Node::decode(n, head, tail, raw)?;
    let mut found = Vec::new();
    for slot in node.ext_slots().collect::<Vec<_>>() {
        let v = ctx.get_member(c, SUB_NODE, &ext_part(n, slot))?.ok_or(Error::Corrupt)?;
        found.push((slot, v));
    }
    node.attach(found)?;
    Ok(node)
}

/// An ordered scan over `count` consecutive nodes of a list, from node `start` upwards or (`reverse`)
/// downwards: each node record with its external records, checked against the list's bounds. It reads no
/// record past the last node it yields.
pub struct NodeScan<'a> {
    members: Members<'a>,
    head: u64,
    tail: u64,
    next: u64,
    remaining: u64,
    reverse: bool,
}

impl<'a> NodeScan<'a> {
    /// The scan of nodes `start, start ± 1, ...`, `count` of them (callers keep them inside the list).
    pub fn new(ctx: &ReadCtx<'a>, c: &Coll, head: u64, tail: u64, start: u64, count: u64, reverse: bool) -> Self {
        let members = if reverse {
            // Parts <= the last external slot of `start`: the node and every one of its external records.
            ctx.members(c, SUB_NODE, Some(&ext_part(start, 0xff)), true)
        } else {
            ctx.members(c, SUB_NODE, Some(&node_part(start)), false)
        };
        NodeScan { members, head, tail, next: start, remaining: count, reverse }
    }

    fn record(&mut self) -> Result<(Vec<u8>, Vec<u8>), Error> {
        Ok(self.members.next().ok_or(Error::Corrupt)??)
    }

    fn forward(&mut self, n: u64) -> Result<Node, Error> {
        let (p, raw) = self.record()?;
        if p != node_part(n) {
            return Err(Error::Corrupt);
        }
        let mut node = Node::decode(n, self.head, self.tail, raw)?;
        let mut found = Vec::new();
        for _ in 0..node.ext_slots().count() {
            let (p, v) = self.record()?;
            if p.len() != 9 || p[..8] != node_part(n) {
                return Err(Error::Corrupt);
            }
            found.push((p[8], v));
        }
        node.attach(found)?;
        Ok(node)
    }

    fn backward(&mut self, n: u64) -> Result<Node, Error> {
        let mut found = Vec::new();
        loop {
            let (p, v) = self.record()?;
            if p == node_part(n) {
                let mut node = Node::decode(n, self.head, self.tail, v)?;
                found.reverse();
                node.attach(found)?;
                return Ok(node);
            }
            if p.len() != 9 || p[..8] != node_part(n) || found.len() as u64 >= K {
                return Err(Error::Corrupt);
            }
            found.push((p[8], v));
        }
    }
}

impl Iterator for NodeScan<'_> {
    type Item = Result<Node, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let n = self.next;
        let r = if self.reverse { self.backward(n) } else { self.forward(n) };
        self.remaining = if r.is_ok() { self.remaining - 1 } else { 0 };
        self.next = if self.reverse { n.wrapping_sub(1) } else { n.wrapping_add(1) };
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_matches_docs() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("node.rs"),
            include_str!("../../../../../docs/format/server-keys.md"),
        );
    }

    #[test]
    fn values_round_trip_inline_and_external() {
        let long = vec![b'x'; INLINE_MAX + 1];
        let edge = vec![b'y'; INLINE_MAX];
        let values: Vec<&[u8]> = vec![b"", b"a", &long, &edge, b"bc"];
        let raw = encode(values.iter().copied());
        let node = Node::decode(3, 0, 1000, {
            // Node 3 holds indexes [96, 128): pad to five live elements by using a list [96, 101).
            raw.clone()
        });
        assert_eq!(node.unwrap_err(), Error::Corrupt, "32 live elements expected, 5 stored");
        let mut node = Node::decode(3, 96, 101, raw).unwrap();
        assert_eq!(node.ext_slots().collect::<Vec<_>>(), [2]);
        node.attach(vec![(2, long.clone())]).unwrap();
        for (i, v) in values.iter().enumerate() {
            assert_eq!(node.at(96 + i as u64), Some(*v));
        }
        assert!(node.external_at(98) && !node.external_at(99));
        assert_eq!(node.at(101), None);
        assert_eq!(node.at(95), None);
        assert_eq!(count(&encode(values.iter().copied())).unwrap(), 5);
    }

    #[test]
    fn a_raw_span_is_the_encoding_of_its_elements() {
        let long = vec![b'x'; INLINE_MAX + 1];
        let values: Vec<&[u8]> = vec![b"a", &long, b"", b"bcd", &long, b"e"];
        let node = Node::decode(0, 10, 16, encode(values.iter().copied())).unwrap();
        for from in 10..16u64 {
            for to in from + 1..=16 {
                let want = encode(values[(from - 10) as usize..(to - 10) as usize].iter().copied());
                assert_eq!(node.raw_span(from, to), Some(&want[..]), "[{from}, {to})");
            }
        }
        assert_eq!(node.raw_span(9, 12), None, "before the node's first element");
        assert_eq!(node.raw_span(15, 17), None, "past its last");
        assert_eq!(node.raw_span(12, 12), None, "empty");
        let mut out = b"keep".to_vec();
        encode_into(values.iter().copied(), &mut out);
        assert_eq!(&out[4..], &encode(values.iter().copied())[..]);
        assert!(encoded_size(values.iter().copied()) >= out.len() - 4);
    }

    #[test]
    fn the_live_span_of_a_node_follows_the_bounds() {
        assert_eq!(live(0, 0, 100), (0, 32));
        assert_eq!(live(1, 40, 50), (40, 50));
        assert_eq!(live(2, 40, 50), (64, 50), "empty");
        let last = node_of(u64::MAX);
        assert_eq!(live(last, u64::MAX - 3, u64::MAX), (u64::MAX - 3, u64::MAX));
        assert!(node_part(7)[..] < ext_part(7, 0)[..]);
        assert!(ext_part(7, 0xff)[..] < node_part(8)[..]);
    }

    #[test]
    fn a_truncated_inline_length_is_corrupt() {
        assert_eq!(parse(&[TAG_INLINE]), Err(Error::Corrupt));
        assert_eq!(parse(&[TAG_INLINE, 0x80]), Err(Error::Corrupt));
    }

    #[test]
    fn a_length_past_the_bytes_left_is_corrupt() {
        assert_eq!(parse(&[TAG_INLINE, 3, b'a', b'b']), Err(Error::Corrupt));
        // A huge varint (2^63): refused without allocating.
        let mut raw = vec![TAG_INLINE];
        put_varint(&mut raw, 1 << 63);
        assert_eq!(parse(&raw), Err(Error::Corrupt));
        let mut raw = vec![TAG_INLINE];
        raw.extend_from_slice(&[0xff; 11]);
        assert_eq!(parse(&raw), Err(Error::Corrupt));
    }

    #[test]
    fn an_inline_entry_longer_than_the_limit_is_corrupt() {
        let mut raw = vec![TAG_INLINE];
        put_varint(&mut raw, INLINE_MAX as u64 + 1);
        raw.extend_from_slice(&vec![0; INLINE_MAX + 1]);
        assert_eq!(parse(&raw), Err(Error::Corrupt));
    }

    #[test]
    fn an_unknown_tag_is_corrupt() {
        assert_eq!(parse(&[0x02]), Err(Error::Corrupt));
    }

    #[test]
    fn more_than_k_entries_are_corrupt() {
        let raw = vec![TAG_EXTERNAL; K as usize + 1];
        assert_eq!(parse(&raw), Err(Error::Corrupt));
    }

    #[test]
    fn external_records_that_disagree_with_the_node_are_corrupt() {
        let long = vec![b'x'; INLINE_MAX + 1];
        let raw = encode([&long[..], b"a"]);
        let mut node = Node::decode(0, 0, 2, raw.clone()).unwrap();
        assert_eq!(node.attach(vec![]), Err(Error::Corrupt), "missing");
        let mut node2 = Node::decode(0, 0, 2, raw.clone()).unwrap();
        assert_eq!(node2.attach(vec![(1, long.clone())]), Err(Error::Corrupt), "wrong slot");
        let mut node3 = Node::decode(0, 0, 2, raw).unwrap();
        assert_eq!(node3.attach(vec![(0, b"short".to_vec())]), Err(Error::Corrupt), "short external");
        node.attach(vec![(0, long)]).unwrap();
    }
}
