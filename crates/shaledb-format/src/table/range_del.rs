//! The range-deletion meta block of a table (DeleteRange): written by `TableBuilder::add_range_tombstone`,
//! read by `Table::range_tombstones`; and the rule by which a file's recorded key range covers its tombstones
//! ([`widen_bounds`], docs/format/manifest.md).
//!
//! ```text
//! range_del_block := block trailer        ; restart interval 1, entries in ikey::compare order
//! entry key       := begin ++ fixed64_le( seq << 8 | 0x0f )   ; begin: inclusive, 0x0f: range_deletion
//! entry value     := end                  ; exclusive; begin < end
//! ```
//!
//! Metaindex name `shaledb.range_del`, FROZEN. The tombstones are stored as
//! written (overlaps allowed); a reader fragments them. A kind other than `0x0f`, `begin >= end`, a sequence
//! past `MAX_SEQUENCE` or keys out of order are corruption.

use crate::block::{Block, BlockBuilder, KeyOrder};
use crate::ikey::{self, ValueKind, MAX_SEQUENCE, TRAILER_LEN};
use crate::iter::InternalIterator;
use crate::{Error, Result};
use std::cmp::Ordering;
use std::sync::Arc;

/// Metaindex name of the range-deletion block. FROZEN.
pub const RANGE_DEL_BLOCK_NAME: &[u8] = b"shaledb.range_del";

/// One stored range tombstone: `[begin, end)` deleted at `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRangeTombstone {
    /// Inclusive start.
    pub begin: Vec<u8>,
    /// Exclusive end.
    pub end: Vec<u8>,
    /// Sequence number of the deletion.
    pub seq: u64,
}

/// Encodes `tombstones` (sorted here; empty ranges left out) as the contents of a range-deletion block.
/// REQUIRES: every `seq <= MAX_SEQUENCE`.
pub fn encode(tombstones: &[StoredRangeTombstone]) -> Vec<u8> {
    let mut keyed: Vec<(Vec<u8>, &[u8])> = tombstones
        .iter()
        .filter(|t| t.begin < t.end)
        .map(|t| (ikey::make_internal_key(&t.begin, t.seq, ValueKind::RangeDeletion), t.end.as_slice()))
        .collect();
    keyed.sort_by(|a, b| ikey::compare(&a.0, &b.0));
    keyed.dedup_by(|a, b| a.0 == b.0);
    let mut b = BlockBuilder::new(1);
    for (k, end) in &keyed {
        b.add(k, end);
    }
    b.finish().to_vec()
}

/// The inclusive upper bound of the keys below the exclusive `end`: `k` for `end = k ++ 0x00` (exact: `k ++
/// 0x00` is `k`'s successor), else `end` itself (one key wider than needed).
pub fn inclusive_upper(end: &[u8]) -> &[u8] {
    match end.split_last() {
        Some((0, k)) => k,
        _ => end,
    }
}

/// Widens a file's internal-key bounds (`smallest`, `largest`; empty = unset) to cover tombstones spanning
/// `[start, end)`: the smallest becomes at most `(start, MAX_SEQUENCE, Deletion)`, which sorts before every
/// entry of `start` (no entry has sequence `MAX_SEQUENCE`), and the largest at least `(inclusive_upper(end), 0,
/// Deletion)`, which sorts after every entry of its key. FROZEN: the MANIFEST records these keys and every open
/// recomputes them to check a table's identity.
pub fn widen_bounds(smallest: &mut Vec<u8>, largest: &mut Vec<u8>, start: &[u8], end: &[u8]) {
    let lo = ikey::make_internal_key(start, MAX_SEQUENCE, ValueKind::Deletion);
    let hi = ikey::make_internal_key(inclusive_upper(end), 0, ValueKind::Deletion);
    if smallest.is_empty() || ikey::compare(&lo, smallest) == Ordering::Less {
        *smallest = lo;
    }
    if largest.is_empty() || ikey::compare(&hi, largest) == Ordering::Greater {
        *largest = hi;
    }
}

/// Decodes the contents of a range-deletion block; errors are corruption at `offset` (the block's) in `file`.
pub fn decode(contents: Vec<u8>, file: &std::path::Path, offset: u64) -> Result<Vec<StoredRangeTombstone>> {
    let bad = |what: String| Error::corruption(file, offset, what);
    let block = Arc::new(Block::new(contents).map_err(|e| bad(format!("range-deletion block: {e}")))?);
    let mut it = block.iter(KeyOrder::Internal);
    let mut out: Vec<StoredRangeTombstone> = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    it.seek_to_first();
    while it.valid() {
        let key = it.key();
        if key.len() < TRAILER_LEN {
            return Err(bad(format!("range-deletion key of {} bytes", key.len())));
        }
        let t = ikey::trailer(key);
        if (t & 0xff) as u8 != ValueKind::RangeDeletion as u8 {
            return Err(bad(format!("range-deletion entry of kind {}", t & 0xff)));
        }
        let seq = t >> 8;
        if seq > MAX_SEQUENCE {
            return Err(bad(format!("range-deletion sequence {seq} past {MAX_SEQUENCE}")));
        }
        if last.as_deref().is_some_and(|l| ikey::compare(l, key) != Ordering::Less) {
            return Err(bad("range-deletion entries out of order".into()));
        }
        let (begin, end) = (ikey::user_key(key), it.value());
        if begin >= end {
            return Err(bad("range-deletion entry with begin >= end".into()));
        }
        out.push(StoredRangeTombstone { begin: begin.to_vec(), end: end.to_vec(), seq });
        last = Some(key.to_vec());
        it.next();
    }
    it.status().map_err(|e| bad(format!("range-deletion block: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn t(b: &str, e: &str, seq: u64) -> StoredRangeTombstone {
        StoredRangeTombstone { begin: b.into(), end: e.into(), seq }
    }

    fn corrupt(contents: Vec<u8>) -> String {
        match decode(contents, Path::new("x.sst"), 77) {
            Err(Error::Corruption { offset, what, .. }) => {
                assert_eq!(offset, 77);
                what
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn roundtrip_sorted_by_begin_then_newest_first() {
        let ts = [t("m", "z", 3), t("a", "c", 5), t("a", "q", 9), t("k", "k", 4)];
        let got = decode(encode(&ts), Path::new("x.sst"), 0).unwrap();
        assert_eq!(got, vec![t("a", "q", 9), t("a", "c", 5), t("m", "z", 3)], "empty range left out");
        assert!(decode(encode(&[]), Path::new("x.sst"), 0).unwrap().is_empty());
    }

    fn block_of(entries: &[(Vec<u8>, &[u8])]) -> Vec<u8> {
        let mut b = BlockBuilder::new(1);
        for (k, v) in entries {
            b.add(k, v);
        }
        b.finish().to_vec()
    }

    #[test]
    fn wrong_kind_is_corruption() {
        let k = ikey::make_internal_key(b"a", 1, ValueKind::Deletion);
        assert!(corrupt(block_of(&[(k, b"b")])).contains("kind 0"));
    }

    #[test]
    fn inverted_or_empty_range_is_corruption() {
        let k = ikey::make_internal_key(b"b", 1, ValueKind::RangeDeletion);
        assert!(corrupt(block_of(&[(k.clone(), b"a")])).contains("begin >= end"));
        assert!(corrupt(block_of(&[(k, b"b")])).contains("begin >= end"));
    }

    #[test]
    fn short_key_and_garbage_are_corruption() {
        assert!(corrupt(block_of(&[(b"abc".to_vec(), b"z")])).contains("3 bytes"));
        let _ = corrupt(vec![1, 2, 3]);
    }

    /// Through a real table: the builder writes the block and names it in the metaindex, the table reads it
    /// back, `verify` checks it, and the point entries are untouched. A table without one reads as empty.
    #[test]
    fn table_roundtrip() {
        use crate::table::{Table, TableBuilder, TableOptions, TableReadOptions};
        use shaledb_vfs::{Fs, PosixFs, ReadHints};
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        for with in [true, false] {
            let path = dir.path().join(format!("{with}.sst"));
            let mut b = TableBuilder::new(TableOptions::default(), fs.create(&path).unwrap());
            if with {
                b.add_range_tombstone(b"m", b"p", 9);
                b.add_range_tombstone(b"x", b"x", 8); // empty: left out
            }
            b.add(&ikey::make_internal_key(b"k", 3, ValueKind::Value), b"v").unwrap();
            if with {
                b.add_range_tombstone(b"a", b"z", 2);
            }
            b.finish().unwrap();
            let table =
                Table::open(fs.open(&path, ReadHints::default()).unwrap(), &TableReadOptions::default()).unwrap();
            let want = if with { vec![t("a", "z", 2), t("m", "p", 9)] } else { Vec::new() };
            assert_eq!(table.range_tombstones().unwrap(), want);
            table.verify().unwrap();
            let mut it = table.iter(true, true);
            it.seek_to_first();
            assert!(it.valid());
            assert_eq!(ikey::user_key(it.key()), b"k");
            it.next();
            assert!(!it.valid());
        }
    }

    #[test]
    fn grammar_matches_docs() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("range_del.rs"),
            include_str!("../../../../docs/format/sst.md"),
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let good = encode(&[t("a", "b", 1), t("c", "d", 2)]);
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                let _ = decode(bad, Path::new("x.sst"), 0);
            }
            let _ = decode(good[..i].to_vec(), Path::new("x.sst"), 0);
        }
    }
}
