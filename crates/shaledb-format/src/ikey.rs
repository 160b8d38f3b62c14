//! Internal keys: the keys stored in memtables and SSTs.
//!
//! ```text
//! internal_key := user_key trailer
//! trailer      := fixed64_le( sequence << 8 | kind )      ; sequence < 2^56
//! kind         := 0x00 deletion | 0x01 value | 0x02 merge | 0x07 single_deletion
//!               | 0x11 blob_index                          ; tables only (format 4): value is a blob::BlobIndex
//!                                                          ; FROZEN: on-disk values, never renumber
//! range_kind   := 0x0f range_deletion                      ; FROZEN; never in a point key (see below)
//! ```
//!
//! `0x0f` (RocksDB's `kTypeRangeDeletion`) marks a range tombstone. It appears in write batches and in a table's
//! range-deletion block, never among point keys: [`parse`] rejects it, so a range tombstone found where point
//! entries live is corruption.
//!
//! Order: user keys ascending (bytewise), then trailer descending, so that for one user key the newest entry
//! comes first. A lookup for `(key, snapshot)` seeks to `key ++ trailer(snapshot, KIND_FOR_SEEK)` and lands on the
//! newest entry visible at that snapshot.

use std::cmp::Ordering;

/// A sequence number: the order of writes. Every write takes one per entry.
pub type SequenceNumber = u64;

/// Largest sequence number that fits in a trailer.
pub const MAX_SEQUENCE: SequenceNumber = (1 << 56) - 1;

/// Size of the trailer appended to each user key.
pub const TRAILER_LEN: usize = 8;

/// What an entry is. The discriminants are an on-disk format: FROZEN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone.
    Deletion = 0,
    /// A full value.
    Value = 1,
    /// A merge operand.
    Merge = 2,
    /// A single-deletion tombstone (`Db::single_delete`): deletes the one put it meets, and compaction drops
    /// both when they meet. The value 7 is RocksDB's `kTypeSingleDeletion`; 3..=6 stay unassigned. Tables and
    /// WALs written before this kind existed never contain it, so they still decode.
    SingleDeletion = 7,
    /// A range tombstone `[key, value)` (`Db::delete_range`). Only in write batches and range-deletion blocks,
    /// never a point key: [`ValueKind::from_u8`] (point keys) rejects it, [`ValueKind::from_record_u8`] takes it.
    /// The value 15 is RocksDB's `kTypeRangeDeletion`; added by format version 3.
    RangeDeletion = 0x0f,
    /// A value kept in a blob file (key-value separation): the entry's value is an encoded
    /// [`crate::blob::BlobIndex`]. Written only into tables by flush and compaction (never into a WAL or a
    /// write batch, which refuse it). The value 0x11 is RocksDB's `kTypeBlobIndex`. Format version 4.
    BlobIndex = 0x11,
}

/// The kind with the highest tag: seeking with it finds every entry of the sequence number. Since format 4
/// it is the blob index; tables written before carry `0x07` in their index separators, which a seek with
/// `0x11` at the same user key and sequence sorts before, so those separators still route seeks correctly.
pub const KIND_FOR_SEEK: ValueKind = ValueKind::BlobIndex;

impl ValueKind {
    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::Merge),
            7 => Some(ValueKind::SingleDeletion),
            0x11 => Some(ValueKind::BlobIndex),
            _ => None,
        }
    }

    /// Decodes the kind byte of a write-batch record: a point kind or [`ValueKind::RangeDeletion`].
    pub fn from_record_u8(b: u8) -> Option<ValueKind> {
        match b {
            0x0f => Some(ValueKind::RangeDeletion),
            b => ValueKind::from_u8(b),
        }
    }

    /// True for the tombstones: a deletion or a single deletion.
    #[inline]
    pub fn is_deletion(self) -> bool {
        matches!(self, ValueKind::Deletion | ValueKind::SingleDeletion)
    }

    /// True for the kinds that hold a whole value: a value, or a blob index naming one.
    #[inline]
    pub fn is_value(self) -> bool {
        matches!(self, ValueKind::Value | ValueKind::BlobIndex)
    }
}

/// Packs sequence and kind into the trailer value.
#[inline]
pub fn pack_trailer(seq: SequenceNumber, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | kind as u64
}

/// Appends `user_key ++ trailer(seq, kind)` to `buf`.
#[inline]
pub fn append_internal_key(buf: &mut Vec<u8>, user_key: &[u8], seq: SequenceNumber, kind: ValueKind) {
    buf.reserve(user_key.len() + TRAILER_LEN);
    buf.extend_from_slice(user_key);
    buf.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Builds an owned internal key.
pub fn make_internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind);
    v
}

/// The user key of an internal key. REQUIRES: `ikey.len() >= 8` (shorter input yields an empty key).
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

/// The trailer value of an internal key (0 for a key too short to hold one).
#[inline]
pub fn trailer(ikey: &[u8]) -> u64 {
    match ikey.len().checked_sub(TRAILER_LEN) {
        Some(at) => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&ikey[at..]);
            u64::from_le_bytes(b)
        }
        None => 0,
    }
}

/// A decoded internal key borrowing its user key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// Sequence number of the write.
    pub seq: SequenceNumber,
    /// What the entry is.
    pub kind: ValueKind,
}

/// Decodes an internal key; `None` when it is too short or its kind byte is unknown (corruption).
#[inline]
pub fn parse(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TRAILER_LEN {
        return None;
    }
    let t = trailer(ikey);
    let kind = ValueKind::from_u8((t & 0xff) as u8)?;
    Some(ParsedKey { user_key: user_key(ikey), seq: t >> 8, kind })
}

/// Compares two internal keys: user key ascending, then trailer (sequence, kind) descending.
#[inline]
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_user_key_then_newest_first() {
        let a1 = make_internal_key(b"a", 1, ValueKind::Value);
        let a2 = make_internal_key(b"a", 2, ValueKind::Value);
        let ab = make_internal_key(b"ab", 9, ValueKind::Value);
        assert_eq!(compare(&a2, &a1), Ordering::Less);
        assert_eq!(compare(&a1, &ab), Ordering::Less);
        assert_eq!(compare(&a2, &ab), Ordering::Less);
        let seek = make_internal_key(b"a", 2, KIND_FOR_SEEK);
        assert_ne!(compare(&seek, &a2), Ordering::Greater);
    }

    #[test]
    fn seek_kind_finds_every_kind_of_a_sequence() {
        let seek = make_internal_key(b"a", 5, KIND_FOR_SEEK);
        for b in 0..=u8::MAX {
            if let Some(kind) = ValueKind::from_u8(b) {
                assert_eq!(kind as u8, b);
                let k = make_internal_key(b"a", 5, kind);
                assert_ne!(compare(&seek, &k), Ordering::Greater, "{kind:?} sorts before the seek key");
            }
        }
        let sd = make_internal_key(b"a", 5, ValueKind::SingleDeletion);
        assert_eq!(parse(&sd).map(|p| p.kind), Some(ValueKind::SingleDeletion));
        assert!(ValueKind::SingleDeletion.is_deletion() && ValueKind::Deletion.is_deletion());
        assert!(!ValueKind::Value.is_deletion() && !ValueKind::Merge.is_deletion());
    }

    #[test]
    fn parse_roundtrip_and_rejects() {
        let k = make_internal_key(b"key", 12345, ValueKind::Merge);
        let p = parse(&k).unwrap();
        assert_eq!((p.user_key, p.seq, p.kind), (&b"key"[..], 12345, ValueKind::Merge));
        assert!(parse(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 3;
        assert!(parse(&bad).is_none());
        // A range tombstone's kind is never a point key's.
        bad[n - 8] = ValueKind::RangeDeletion as u8;
        assert!(parse(&bad).is_none());
        assert_eq!(ValueKind::from_record_u8(0x0f), Some(ValueKind::RangeDeletion));
        assert_eq!(ValueKind::from_record_u8(1), Some(ValueKind::Value));
        assert_eq!(ValueKind::from_record_u8(3), None);
    }
}
