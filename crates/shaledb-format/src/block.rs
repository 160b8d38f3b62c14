//! Blocks: sorted key/value entries with prefix-compressed keys and restart points (data, index, metaindex and
//! properties blocks of an SST).
//!
//! ```text
//! block        := entry* restarts:fixed32* num_restarts:fixed32
//! entry        := shared:varint32 non_shared:varint32 value_len:varint32 key_delta value
//! key_delta    := byte{non_shared}          ; key = previous_key[..shared] ++ key_delta
//! value        := byte{value_len}
//! restarts     := offsets (from the block start) of the entries that begin a restart run
//! ```
//!
//! - Every `restart_interval`-th entry is a restart point: its `shared` is 0 and its offset is listed in
//!   `restarts`. The first restart is 0, restarts strictly increase and all lie before the restart array.
//! - `num_restarts >= 1`. A block with no entries is `restarts = [0], num_restarts = 1`.
//! - Keys strictly increase: by `ikey::compare` in data and index blocks, bytewise in metaindex and
//!   properties blocks.
//!
//! The reader binary-searches the restart keys, then scans at most one restart run forward.

use crate::coding::{get_fixed32, get_varint32, put_fixed32, put_varint32};
use crate::iter::InternalIterator;
use crate::{ikey, Error, Result};
use std::cmp::Ordering;
use std::sync::Arc;

/// How the keys of a block are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// Internal keys ordered by [`ikey::compare`] (data and index blocks).
    Internal,
    /// Plain byte strings ordered bytewise (metaindex and properties blocks).
    Bytewise,
}

impl KeyOrder {
    /// Compares two keys in this order.
    #[inline]
    pub fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyOrder::Internal => ikey::compare(a, b),
            KeyOrder::Bytewise => a.cmp(b),
        }
    }
}

/// Builds one block. Keys must be added in increasing order (of whichever [`KeyOrder`] the reader will use).
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
    finished: bool,
}

impl BlockBuilder {
    /// A builder placing a restart point every `restart_interval` entries (0 is taken as 1).
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval: restart_interval.max(1),
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Appends an entry. REQUIRES: `key` is greater than every key added since the last reset, `finish` was
    /// not called since, and the block stays below 4 GiB (offsets are fixed32).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished, "BlockBuilder::add after finish without reset");
        let shared = if self.counter < self.restart_interval {
            common_prefix_len(&self.last_key, key)
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        let delta = &key[shared..];
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, delta.len() as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(delta);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(delta);
        self.counter += 1;
    }

    /// Size of the block if it were finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }

    /// Appends the restart array and returns the finished block. It stays valid until `reset`.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &r in &self.restarts {
                put_fixed32(&mut self.buf, r);
            }
            put_fixed32(&mut self.buf, self.restarts.len() as u32);
            self.finished = true;
        }
        &self.buf
    }

    /// Empties the builder for the next block, keeping its buffers.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.finished = false;
    }

    /// True when no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The last key added (empty when none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }
}

#[inline]
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A decoded, validated block. Shared between iterators and the block cache as `Arc<Block>`.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// INVARIANT: `restarts_offset + 4 * num_restarts + 4 == data.len()`.
    restarts_offset: usize,
    /// INVARIANT: >= 1; every restart point is < `restarts_offset` (or 0 in an empty block), the first is 0,
    /// and they strictly increase.
    num_restarts: usize,
    /// For an index block: its restart keys summarized for [`BlockIter::seek`] (see [`Block::with_restart_search`]).
    search: Option<RestartSearch>,
}

/// Fewest restart points for which [`Block::with_restart_search`] builds a summary.
const MIN_RESTARTS_FOR_SEARCH: usize = 8;

/// Eight bytes of every restart key, in the block's order, so that a seek's binary search runs over one
/// contiguous array instead of touching a restart offset and an entry per step: in a 64 MiB table's index
/// (~14K entries, restart interval 1) that was two cache misses at each of 14 steps, most of a point lookup's
/// CPU time (docs/perf/index-search.md).
///
/// The restart keys' user keys all start with `shared` (the common prefix of the first and the last; every
/// key sorted between two keys shares what they share). `prefixes[i]` is the 8 bytes of restart `i`'s user key
/// after `shared`, zero-padded, as a big-endian number. Truncating and zero-padding keeps order (never
/// reverses it), so a restart whose number is below the target's sorts below the target, one whose number is
/// above sorts above it, and only restarts with an equal number need their key compared.
///
/// Even that array is 112 KiB for such an index, and a binary search over it misses the CPU cache at most of
/// its steps, so `top` holds every 32nd number (3.5 KiB, which stays cached): a seek binary-searches `top`, then
/// counts through the one run of 32 numbers (256 bytes, whose loads do not wait on each other).
#[derive(Debug)]
struct RestartSearch {
    order: KeyOrder,
    shared: Vec<u8>,
    prefixes: Box<[u64]>,
    /// `prefixes[SEARCH_STRIDE * j]` for every `j`.
    top: Box<[u64]>,
}

/// Restarts per entry of [`RestartSearch::top`].
const SEARCH_STRIDE: usize = 32;

/// The part of `key` that [`KeyOrder`] compares first: the user key of an internal key, else all of it.
#[inline]
fn ordered_part(order: KeyOrder, key: &[u8]) -> &[u8] {
    match order {
        KeyOrder::Internal => ikey::user_key(key),
        KeyOrder::Bytewise => key,
    }
}

/// The 8 bytes of `key` after its first `skip`, zero-padded, as a big-endian number.
#[inline]
fn prefix_number(key: &[u8], skip: usize) -> u64 {
    let mut b = [0u8; 8];
    let rest = key.get(skip..).unwrap_or_default();
    let n = rest.len().min(8);
    b[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(b)
}

impl RestartSearch {
    /// The restart range `[lo, hi]` that holds the last restart whose key is below `target` (or restart 0 when
    /// none is), for a target ordered as the summary was built. `None` when `target` does not start with the
    /// shared prefix (a seek outside the block's range): the caller searches the whole block.
    #[inline]
    fn narrow(&self, target: &[u8]) -> Option<(usize, usize)> {
        let key = ordered_part(self.order, target);
        if !key.starts_with(&self.shared) {
            return None;
        }
        let t = prefix_number(key, self.shared.len());
        // Restarts before `below` sort below the target; those from `upto` on sort above it. Every run of
        // `top` before run `c` starts below `t`, so the first number >= t is in run `c - 1` or starts run `c`.
        let c = self.top.partition_point(|&p| p < t);
        let (start, end) = (c.saturating_sub(1) * SEARCH_STRIDE, (c * SEARCH_STRIDE).min(self.prefixes.len()));
        let below = start + self.prefixes[start..end].iter().map(|&p| usize::from(p < t)).sum::<usize>();
        let upto = below + equal_run(&self.prefixes[below..], t);
        let lo = below.saturating_sub(1);
        Some((lo, upto.saturating_sub(1).max(lo)))
    }

    fn memory(&self) -> usize {
        (self.prefixes.len() + self.top.len()) * 8 + self.shared.len()
    }
}

/// How many of `sorted`'s first numbers equal `t`, when none is below it: usually none or one, so it looks at
/// the next ones first and doubles the stride (a galloping search).
fn equal_run(sorted: &[u64], t: u64) -> usize {
    if sorted.first() != Some(&t) {
        return 0;
    }
    // `sorted[known] == t`; the run ends before `known + step` or runs on.
    let (mut known, mut step) = (0usize, 1usize);
    loop {
        let probe = known + step;
        if probe >= sorted.len() || sorted[probe] != t {
            let end = probe.min(sorted.len());
            return known + 1 + sorted[known + 1..end].partition_point(|&p| p == t);
        }
        known = probe;
        step *= 2;
    }
}

impl Block {
    /// Takes ownership of a block's contents and validates its restart array. Errors are `Corruption` with
    /// offsets relative to the block start and an empty file name (the caller re-targets them).
    pub fn new(contents: Vec<u8>) -> Result<Block> {
        let len = contents.len();
        let bad = |offset: usize, what: String| Err(Error::corruption("", offset as u64, what));
        let Some(n) = len.checked_sub(4).and_then(|at| contents.get(at..)).and_then(get_fixed32) else {
            return bad(0, format!("block of {len} bytes is too short for a restart count"));
        };
        let n = n as usize;
        let max = (len - 4) / 4;
        if n == 0 || n > max {
            return bad(len - 4, format!("block claims {n} restart points, room for 1..={max}"));
        }
        let restarts_offset = len - 4 - 4 * n;
        let mut prev = None;
        for i in 0..n {
            let at = restarts_offset + 4 * i;
            let off = contents.get(at..).and_then(get_fixed32).map_or(usize::MAX, |v| v as usize);
            let ok = match prev {
                None => off == 0,
                Some(p) => off > p && off < restarts_offset,
            };
            if !ok {
                return bad(at, format!("restart point {i} at {off} is out of order or beyond the entries"));
            }
            prev = Some(off);
        }
        Ok(Block { data: contents, restarts_offset, num_restarts: n, search: None })
    }

    /// This block with a summary of its restart keys that makes seeks in `order` search a short array of
    /// numbers first (8 bytes of each key after the prefix they all share): for index blocks, which a point
    /// lookup binary-searches in full and which stay in memory (pinned or cached). A block with fewer than 8 restarts, or with a malformed restart entry, is
    /// returned as it is; its seeks search the entries as before (and report the damage).
    pub fn with_restart_search(mut self, order: KeyOrder) -> Block {
        let n = self.num_restarts;
        if n < MIN_RESTARTS_FOR_SEARCH {
            return self;
        }
        let (Some(first), Some(last)) = (self.restart_key(0), self.restart_key(n - 1)) else {
            return self;
        };
        let (first, last) = (ordered_part(order, first), ordered_part(order, last));
        let shared = first[..common_prefix_len(first, last)].to_vec();
        let mut prefixes = Vec::with_capacity(n);
        for i in 0..n {
            let Some(k) = self.restart_key(i) else {
                return self;
            };
            prefixes.push(prefix_number(ordered_part(order, k), shared.len()));
        }
        let top = prefixes.iter().step_by(SEARCH_STRIDE).copied().collect();
        self.search = Some(RestartSearch { order, shared, prefixes: prefixes.into_boxed_slice(), top });
        self
    }

    /// Size of the block in memory: its contents and any restart summary (its weight in the block cache).
    pub fn size(&self) -> usize {
        self.data.len() + self.search.as_ref().map_or(0, RestartSearch::memory)
    }

    /// Number of restart points.
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// An unpositioned iterator over this block.
    pub fn iter(self: &Arc<Self>, order: KeyOrder) -> BlockIter {
        BlockIter::new(Arc::clone(self), order)
    }

    #[inline]
    fn restart_point(&self, i: usize) -> usize {
        // Validated in `new`; the fallback is unreachable.
        self.data.get(self.restarts_offset + 4 * i..).and_then(get_fixed32).map_or(self.restarts_offset, |v| v as usize)
    }

    /// The key stored whole at restart `i`, or `None` when the entry there is malformed.
    #[inline]
    fn restart_key(&self, i: usize) -> Option<&[u8]> {
        let entries = self.data.get(..self.restarts_offset)?;
        let (shared, non_shared, _, key_at) = decode_entry(entries, self.restart_point(i))?;
        if shared != 0 {
            return None;
        }
        entries.get(key_at..key_at + non_shared)
    }
}

/// Decodes an entry header at `at`: `(shared, non_shared, value_len, key_delta offset)`, checking that the key
/// delta and value fit in `entries`.
#[inline]
fn decode_entry(entries: &[u8], at: usize) -> Option<(usize, usize, usize, usize)> {
    let p = entries.get(at..)?;
    let (shared, non_shared, value_len, hdr) = match p {
        // Fast path: all three lengths fit in one byte each, the common case.
        [a, b, c, ..] if (a | b | c) < 0x80 => (*a as usize, *b as usize, *c as usize, 3),
        _ => {
            let (s, n1) = get_varint32(p)?;
            let (n, n2) = get_varint32(p.get(n1..)?)?;
            let (v, n3) = get_varint32(p.get(n1 + n2..)?)?;
            (s as usize, n as usize, v as usize, n1 + n2 + n3)
        }
    };
    let key_at = at + hdr;
    let end = key_at.checked_add(non_shared)?.checked_add(value_len)?;
    if end > entries.len() {
        return None;
    }
    Some((shared, non_shared, value_len, key_at))
}

/// A cursor over one block. Owns an `Arc<Block>`; reuses one key buffer for every entry.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    order: KeyOrder,
    /// Offset of the current entry; `block.restarts_offset` when not positioned.
    current: usize,
    /// Offset just past the current entry.
    next: usize,
    /// Restart run holding the current entry.
    restart_index: usize,
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
    err: Option<Error>,
}

/// Initial capacity of a block iterator's key buffer.
const KEY_BUF_CAPACITY: usize = 64;

impl BlockIter {
    /// An unpositioned iterator over `block`, comparing keys in `order`.
    pub fn new(block: Arc<Block>, order: KeyOrder) -> BlockIter {
        let end = block.restarts_offset;
        BlockIter {
            block,
            order,
            current: end,
            next: end,
            restart_index: 0,
            // One allocation that holds typical keys, instead of growing 8, 16, 32, ... on the first entries:
            // a point lookup makes two block iterators.
            key: Vec::with_capacity(KEY_BUF_CAPACITY),
            value_start: 0,
            value_end: 0,
            err: None,
        }
    }

    /// Switches to another block (same order), keeping the key buffer. Clears any error; unpositioned.
    pub fn reset(&mut self, block: Arc<Block>) {
        let end = block.restarts_offset;
        self.block = block;
        self.current = end;
        self.next = end;
        self.restart_index = 0;
        self.key.clear();
        self.err = None;
    }

    /// The block being iterated.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    fn corrupt(&mut self, what: &str) {
        if self.err.is_none() {
            self.err = Some(Error::corruption("", self.current as u64, what));
        }
        self.invalidate();
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_offset;
        self.next = self.current;
        self.key.clear();
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next = self.block.restart_point(i);
    }

    /// Decodes the entry at `self.next`. Returns false at the end of the entries or on corruption.
    fn parse_next(&mut self) -> bool {
        let limit = self.block.restarts_offset;
        self.current = self.next;
        if self.current >= limit {
            self.invalidate();
            return false;
        }
        let block = &*self.block;
        let entries = &block.data[..limit];
        let Some((shared, non_shared, value_len, key_at)) = decode_entry(entries, self.current) else {
            self.corrupt("malformed block entry");
            return false;
        };
        while self.restart_index + 1 < block.num_restarts && block.restart_point(self.restart_index + 1) <= self.current
        {
            self.restart_index += 1;
        }
        let at_restart = block.restart_point(self.restart_index) == self.current;
        if shared > self.key.len() || (at_restart && shared != 0) {
            self.corrupt("block entry shares more key bytes than exist");
            return false;
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(&entries[key_at..key_at + non_shared]);
        self.value_start = key_at + non_shared;
        self.value_end = self.value_start + value_len;
        self.next = self.value_end;
        true
    }
}

impl InternalIterator for BlockIter {
    #[inline]
    fn valid(&self) -> bool {
        self.err.is_none() && self.current < self.block.restarts_offset
    }

    fn seek_to_first(&mut self) {
        if self.err.is_some() {
            return;
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    fn seek_to_last(&mut self) {
        if self.err.is_some() {
            return;
        }
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next < self.block.restarts_offset {}
    }

    fn seek(&mut self, target: &[u8]) {
        if self.err.is_some() {
            return;
        }
        // Find the last restart whose key is < target; every entry before it is < target too.
        let (mut lo, mut hi) = (0usize, self.block.num_restarts - 1);
        if let Some(s) = self.block.search.as_ref().filter(|s| s.order == self.order) {
            if let Some(range) = s.narrow(target) {
                (lo, hi) = range;
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let ord = match self.block.restart_key(mid) {
                Some(k) => self.order.compare(k, target),
                None => {
                    self.current = self.block.restart_point(mid);
                    self.corrupt("malformed entry at a restart point");
                    return;
                }
            };
            if ord == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.seek_to_restart(lo);
        while self.parse_next() {
            if self.order.compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.err.is_some() {
            return;
        }
        if !self.valid() {
            self.seek_to_last();
        } else if self.order.compare(&self.key, target) == Ordering::Greater {
            self.prev();
        }
    }

    #[inline]
    fn next(&mut self) {
        if self.valid() {
            self.parse_next();
        }
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        let original = self.current;
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        while self.parse_next() {
            match self.next.cmp(&original) {
                Ordering::Less => {}
                Ordering::Equal => return,
                Ordering::Greater => {
                    self.corrupt("block entries overlap");
                    return;
                }
            }
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        &self.key
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.block.data.get(self.value_start..self.value_end).unwrap_or(&[])
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ikey::{make_internal_key, ValueKind};

    #[test]
    fn grammar_matches_docs() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("block.rs"),
            include_str!("../../../docs/format/block.md"),
        );
    }

    fn build(keys: &[Vec<u8>], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (i, k) in keys.iter().enumerate() {
            b.add(k, format!("v{i}").as_bytes());
        }
        Arc::new(Block::new(b.finish().to_vec()).unwrap())
    }

    fn ikeys(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| make_internal_key(format!("key{:05}", i * 2).as_bytes(), 100, ValueKind::Value)).collect()
    }

    #[test]
    fn roundtrip_forward_backward_every_interval() {
        let keys = ikeys(200);
        for interval in [1, 2, 16, 1000] {
            let block = build(&keys, interval);
            let mut it = block.iter(KeyOrder::Internal);
            it.seek_to_first();
            for (i, k) in keys.iter().enumerate() {
                assert!(it.valid());
                assert_eq!(it.key(), &k[..]);
                assert_eq!(it.value(), format!("v{i}").as_bytes());
                it.next();
            }
            assert!(!it.valid());
            it.seek_to_last();
            for k in keys.iter().rev() {
                assert_eq!(it.key(), &k[..]);
                it.prev();
            }
            assert!(!it.valid());
            assert!(it.status().is_ok());
        }
    }

    #[test]
    fn seek_and_seek_for_prev() {
        let keys = ikeys(100);
        let block = build(&keys, 16);
        let mut it = block.iter(KeyOrder::Internal);
        for i in 0..100 {
            // Exact hit.
            it.seek(&keys[i]);
            assert_eq!(it.key(), &keys[i][..]);
            // Between key i and i+1 (odd numbers are absent).
            let between = make_internal_key(format!("key{:05}", i * 2 + 1).as_bytes(), 100, ValueKind::Value);
            it.seek(&between);
            if i + 1 < 100 {
                assert_eq!(it.key(), &keys[i + 1][..]);
            } else {
                assert!(!it.valid());
            }
            it.seek_for_prev(&between);
            assert_eq!(it.key(), &keys[i][..]);
        }
        it.seek_for_prev(&make_internal_key(b"a", 1, ValueKind::Value));
        assert!(!it.valid());
        it.seek(&make_internal_key(b"a", 1, ValueKind::Value));
        assert_eq!(it.key(), &keys[0][..]);
        // A newer sequence of the same user key sorts first, so seek lands on the stored entry.
        it.seek(&make_internal_key(b"key00010", 200, ValueKind::Value));
        assert_eq!(it.key(), &keys[5][..]);
        it.seek_for_prev(&make_internal_key(b"key00010", 50, ValueKind::Value));
        assert_eq!(it.key(), &keys[5][..]);
    }

    #[test]
    fn bytewise_order_mode() {
        let keys: Vec<Vec<u8>> = vec![b"a".to_vec(), b"ab".to_vec(), b"b".to_vec(), b"shaledb.x".to_vec()];
        let block = build(&keys, 1);
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek(b"aa");
        assert_eq!(it.key(), b"ab");
        it.seek(b"shaledb.x");
        assert_eq!(it.key(), b"shaledb.x");
        it.seek(b"z");
        assert!(!it.valid());
    }

    #[test]
    fn empty_block() {
        let mut b = BlockBuilder::new(16);
        assert!(b.is_empty());
        let block = Arc::new(Block::new(b.finish().to_vec()).unwrap());
        let mut it = block.iter(KeyOrder::Internal);
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"anything");
        assert!(!it.valid());
        assert!(it.status().is_ok());
    }

    #[test]
    fn builder_reset_and_estimate() {
        let mut b = BlockBuilder::new(4);
        b.add(b"abc", b"1");
        assert!(!b.is_empty());
        let est = b.estimated_size();
        assert_eq!(b.finish().len(), est);
        b.reset();
        assert!(b.is_empty());
        b.add(b"abd", b"2");
        let block = Arc::new(Block::new(b.finish().to_vec()).unwrap());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        assert_eq!((it.key(), it.value()), (&b"abd"[..], &b"2"[..]));
    }

    #[test]
    fn too_short_is_corruption() {
        for len in 0..4 {
            let e = Block::new(vec![0; len]).unwrap_err();
            assert!(e.is_corruption(), "{e}");
        }
    }

    #[test]
    fn bad_restart_count_is_corruption() {
        let mut data = build(&ikeys(3), 1).data.clone();
        let n = data.len();
        data[n - 4..].copy_from_slice(&1000u32.to_le_bytes());
        assert!(Block::new(data.clone()).unwrap_err().is_corruption());
        data[n - 4..].copy_from_slice(&0u32.to_le_bytes());
        assert!(Block::new(data).unwrap_err().is_corruption());
    }

    #[test]
    fn bad_restart_offset_is_corruption() {
        let block = build(&ikeys(3), 1);
        let mut data = block.data.clone();
        let at = block.restarts_offset + 4; // second restart point
        data[at..at + 4].copy_from_slice(&(block.restarts_offset as u32 + 10).to_le_bytes());
        let e = Block::new(data).unwrap_err();
        assert!(matches!(e, Error::Corruption { offset, .. } if offset == at as u64), "{e}");
    }

    #[test]
    fn value_beyond_entries_is_corruption() {
        let block = build(&ikeys(2), 16);
        let mut data = block.data.clone();
        // The first entry's value_len byte: 127 bytes run past the two entries.
        data[2] = 0x7f;
        let bad = Arc::new(Block::new(data).unwrap());
        let mut it = bad.iter(KeyOrder::Internal);
        it.seek_to_first();
        assert!(!it.valid());
        let e = it.status().unwrap_err();
        assert!(matches!(e, Error::Corruption { offset: 0, .. }), "{e}");
        let mut it = bad.iter(KeyOrder::Internal);
        it.seek(&ikeys(2)[1]);
        assert!(!it.valid());
        assert!(it.status().is_err());
    }

    #[test]
    fn shared_beyond_previous_key_is_corruption() {
        let keys = ikeys(2);
        let mut b = BlockBuilder::new(16);
        b.add(&keys[0], b"x");
        b.add(&keys[1], b"y");
        let mut data = b.finish().to_vec();
        // The first entry (a restart point) must not share bytes.
        data[0] = 1;
        let block = Arc::new(Block::new(data).unwrap());
        let mut it = block.iter(KeyOrder::Internal);
        it.seek_to_first();
        assert!(!it.valid());
        let e = it.status().unwrap_err();
        assert!(matches!(e, Error::Corruption { offset: 0, .. }), "{e}");
        // Sticky: later seeks stay invalid.
        it.seek(&keys[1]);
        assert!(!it.valid());
    }

    #[test]
    fn reset_reuses_iterator() {
        let a = build(&ikeys(5), 2);
        let b = build(&ikeys(9), 2);
        let mut it = a.iter(KeyOrder::Internal);
        it.seek_to_last();
        assert_eq!(it.key(), &ikeys(5)[4][..]);
        it.reset(b);
        assert!(!it.valid());
        it.seek_to_last();
        assert_eq!(it.key(), &ikeys(9)[8][..]);
    }

    /// Seeks through a block with a restart summary land where they land in the same block without one.
    fn assert_same_seeks(bytes: &[u8], order: KeyOrder, targets: &[Vec<u8>]) {
        let plain = Arc::new(Block::new(bytes.to_vec()).unwrap());
        let summarized = Arc::new(Block::new(bytes.to_vec()).unwrap().with_restart_search(order));
        let (mut a, mut b) = (plain.iter(order), summarized.iter(order));
        for t in targets {
            a.seek(t);
            b.seek(t);
            assert_eq!(a.valid(), b.valid(), "seek {t:?}");
            if a.valid() {
                assert_eq!(a.key(), b.key(), "seek {t:?}");
                assert_eq!(a.value(), b.value(), "seek {t:?}");
            }
            a.seek_for_prev(t);
            b.seek_for_prev(t);
            assert_eq!(a.valid(), b.valid(), "seek_for_prev {t:?}");
            if a.valid() {
                assert_eq!(a.key(), b.key(), "seek_for_prev {t:?}");
            }
        }
        assert!(b.status().is_ok());
    }

    #[test]
    fn restart_search_is_built_for_many_restarts_and_counted_in_size() {
        let keys = ikeys(100);
        let mut b = BlockBuilder::new(1);
        for k in &keys {
            b.add(k, b"v");
        }
        let bytes = b.finish().to_vec();
        let plain = Block::new(bytes.clone()).unwrap();
        let summarized = Block::new(bytes).unwrap().with_restart_search(KeyOrder::Internal);
        // "key00" ("key00000" to "key00198"), shared by every key, a number per restart and every 32nd again.
        assert_eq!(summarized.size(), plain.size() + (100 + 4) * 8 + 5);
        let few = build(&ikeys(7), 1);
        let few = Block::new(few.data.clone()).unwrap().with_restart_search(KeyOrder::Internal);
        assert!(few.search.is_none());
    }

    #[test]
    fn restart_search_finds_every_key_and_every_gap() {
        // Keys whose first 8 bytes after the shared "key0" repeat, differ only past them, or are shorter.
        let mut users: Vec<Vec<u8>> = Vec::new();
        for i in 0..300u32 {
            users.push(format!("key0{:04}", i / 3).into_bytes());
            users.push(format!("key0{:04}tail{:03}", i / 3, i).into_bytes());
            users.push(format!("key0{}", i % 10).into_bytes());
            // A run of 300 restarts with the same number, across several runs of `top`.
            users.push(format!("key0~~~~~~~~{i:03}").into_bytes());
        }
        users.sort();
        users.dedup();
        let mut keys = Vec::new();
        for u in &users {
            for seq in [30, 20, 10] {
                keys.push(make_internal_key(u, seq, ValueKind::Value));
            }
        }
        let mut targets = Vec::new();
        for u in &users {
            for seq in [40, 25, 20, 5] {
                targets.push(make_internal_key(u, seq, ValueKind::Value));
            }
            let mut past = u.clone();
            past.push(0);
            targets.push(make_internal_key(&past, 1, ValueKind::Value));
        }
        for other in [&b""[..], b"a", b"key", b"key/", b"key1", b"zzz", b"key0\xff\xff\xff\xff\xff\xff\xff\xff\xff"] {
            targets.push(make_internal_key(other, 7, ValueKind::Value));
        }
        for interval in [1, 2, 5] {
            let mut b = BlockBuilder::new(interval);
            for (i, k) in keys.iter().enumerate() {
                b.add(k, format!("v{i}").as_bytes());
            }
            assert_same_seeks(b.finish(), KeyOrder::Internal, &targets);
        }
    }

    proptest::proptest! {
        #[test]
        fn equal_run_counts_the_leading_equal_numbers(
            mut v in proptest::collection::vec(0u64..4, 0..300),
            t in 0u64..4,
        ) {
            v.retain(|&p| p >= t);
            v.sort();
            let expected = v.iter().take_while(|&&p| p == t).count();
            proptest::prop_assert_eq!(equal_run(&v, t), expected);
        }

        #[test]
        fn restart_search_matches_plain_search(
            mut users in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..14), 8..200),
            targets in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..14), 1..50),
            shared in proptest::collection::vec(0u8..3, 0..4),
            interval in 1usize..4,
        ) {
            for k in users.iter_mut() {
                k.splice(0..0, shared.iter().copied());
            }
            users.sort();
            users.dedup();
            // Bytewise blocks hold the keys themselves.
            let mut b = BlockBuilder::new(interval);
            for k in &users {
                b.add(k, b"v");
            }
            let mut bytewise_targets: Vec<Vec<u8>> = targets.clone();
            bytewise_targets.extend(targets.iter().map(|t| [&shared[..], t].concat()));
            assert_same_seeks(b.finish(), KeyOrder::Bytewise, &bytewise_targets);
            // Internal-key blocks: two sequence numbers per user key.
            let mut b = BlockBuilder::new(interval);
            for k in &users {
                b.add(&make_internal_key(k, 9, ValueKind::Value), b"v");
                b.add(&make_internal_key(k, 3, ValueKind::Value), b"v");
            }
            let internal: Vec<Vec<u8>> = bytewise_targets
                .iter()
                .flat_map(|t| [12, 9, 5, 1].map(|seq| make_internal_key(t, seq, ValueKind::Value)))
                .collect();
            assert_same_seeks(b.finish(), KeyOrder::Internal, &internal);
        }
    }
}
