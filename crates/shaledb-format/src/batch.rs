//! The write-batch representation: the payload of every WAL record.
//!
//! ```text
//! batch    := sequence:fixed64 count:fixed32 record*  ; count = number of records
//! record   := [family] kind:u8 key:lp_slice [value:lp_slice]   ; value present for value, merge, range_deletion
//! family   := 0x04 id:varint32                        ; format 5: the record's column family, id > 0;
//!                                                     ; absent: the default family, 0
//! kind     := 0x00 deletion | 0x01 value | 0x02 merge | 0x07 single_deletion
//!           | 0x0f range_deletion                     ; FROZEN: the ikey.rs ValueKind values
//!                                                     ; range_deletion: key = begin, value = end, [begin, end)
//! ```
//!
//! `sequence` is the sequence number of the first record; record `i` takes `sequence + i`, and the last one,
//! `sequence + count - 1`, is at most `ikey::MAX_SEQUENCE` (2^56 - 1), else the batch is corrupt. A batch is applied
//! all or nothing, so a decoder validates every record and the count before the engine applies any of it.

use crate::coding::{self, Decoder};
use crate::ikey::{self, ValueKind};
use crate::{Error, Result};

/// Bytes before the first record: sequence (8) and count (4).
pub const HEADER_LEN: usize = 12;

/// The byte that opens a record's column family prefix (format 5).
pub const FAMILY_MARKER: u8 = 0x04;

/// An encoded write batch. INVARIANT: `rep` holds at least a header and, when built by [`BatchRep::from_bytes`]
/// or the mutators, exactly `count` well-formed records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchRep {
    rep: Vec<u8>,
}

impl Default for BatchRep {
    fn default() -> Self {
        BatchRep::new()
    }
}

/// One record of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// What the record does.
    pub kind: ValueKind,
    /// The user key.
    pub key: &'a [u8],
    /// The value or merge operand; empty for a deletion; the exclusive end for a range deletion.
    pub value: &'a [u8],
    /// The column family the record writes to (0: the default family).
    pub family: u32,
}

impl BatchRep {
    /// An empty batch with sequence 0.
    pub fn new() -> Self {
        BatchRep::with_capacity(0)
    }

    /// An empty batch with room for `bytes` bytes of records.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER_LEN.saturating_add(bytes));
        rep.resize(HEADER_LEN, 0);
        BatchRep { rep }
    }

    /// Adds a put. REQUIRES: key and value shorter than 4 GiB (the engine rejects larger ones beforehand).
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.push(ValueKind::Value, key, Some(value));
    }

    /// Adds a deletion. REQUIRES: key shorter than 4 GiB.
    pub fn delete(&mut self, key: &[u8]) {
        self.push(ValueKind::Deletion, key, None);
    }

    /// Adds a single deletion (see `Db::single_delete` for the contract). REQUIRES: key shorter than 4 GiB.
    pub fn single_delete(&mut self, key: &[u8]) {
        self.push(ValueKind::SingleDeletion, key, None);
    }

    /// Adds a range deletion of `[begin, end)`. REQUIRES: both shorter than 4 GiB. An empty or inverted range
    /// is stored as given (the engine refuses an inverted one beforehand; an empty one deletes nothing).
    pub fn delete_range(&mut self, begin: &[u8], end: &[u8]) {
        self.push(ValueKind::RangeDeletion, begin, Some(end));
    }

    /// Adds a merge operand. REQUIRES: key and value shorter than 4 GiB.
    pub fn merge(&mut self, key: &[u8], value: &[u8]) {
        self.push(ValueKind::Merge, key, Some(value));
    }

    /// Adds a record of `kind` for column family `family` (0: the default family, written without a prefix).
    /// `value` is ignored for the kinds that carry none (deletions). REQUIRES: key and value shorter than 4 GiB.
    pub fn push_record(&mut self, family: u32, kind: ValueKind, key: &[u8], value: &[u8]) {
        if family != 0 {
            self.rep.push(FAMILY_MARKER);
            coding::put_varint32(&mut self.rep, family);
        }
        let value = match kind {
            ValueKind::Deletion | ValueKind::SingleDeletion => None,
            _ => Some(value),
        };
        self.push(kind, key, value);
    }

    fn push(&mut self, kind: ValueKind, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(u32::try_from(key.len()).is_ok() && !matches!(value, Some(v) if u32::try_from(v.len()).is_err()));
        self.rep.push(kind as u8);
        coding::put_lp_slice(&mut self.rep, key);
        if let Some(v) = value {
            coding::put_lp_slice(&mut self.rep, v);
        }
        self.set_count(self.count().wrapping_add(1));
    }

    /// Number of records.
    pub fn count(&self) -> u32 {
        coding::get_fixed32(self.rep.get(8..).unwrap_or_default()).unwrap_or(0)
    }

    fn set_count(&mut self, count: u32) {
        if let Some(b) = self.rep.get_mut(8..HEADER_LEN) {
            b.copy_from_slice(&count.to_le_bytes());
        }
    }

    /// Sequence number of the first record.
    pub fn sequence(&self) -> u64 {
        coding::get_fixed64(&self.rep).unwrap_or(0)
    }

    /// Sets the sequence number of the first record (the write leader assigns it).
    pub fn set_sequence(&mut self, seq: u64) {
        if let Some(b) = self.rep.get_mut(..8) {
            b.copy_from_slice(&seq.to_le_bytes());
        }
    }

    /// The encoded batch: what goes into a WAL record.
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Takes an encoded batch (a WAL record's payload), checking every record and the count. Errors are
    /// [`Error::Corruption`] with an empty file and the offset within `data`; re-target with [`Error::in_file`].
    pub fn from_bytes(data: Vec<u8>) -> Result<BatchRep> {
        if data.len() < HEADER_LEN {
            return Err(Error::corruption(
                "",
                0,
                format!("write batch of {} bytes is shorter than its {HEADER_LEN}-byte header", data.len()),
            ));
        }
        let batch = BatchRep { rep: data };
        // Record `i` takes `sequence + i`: the last one must still fit in a trailer's 56 bits. Checked before
        // the records, so a replay never computes a sequence past the range (release builds do not trap a
        // wrap). An empty batch uses no sequence number.
        let (seq, count) = (batch.sequence(), u64::from(batch.count()));
        if count > 0 && seq.checked_add(count - 1).is_none_or(|last| last > ikey::MAX_SEQUENCE) {
            return Err(Error::corruption(
                "",
                0,
                format!(
                    "write batch of {count} records at sequence {seq} runs past the largest sequence number {}",
                    ikey::MAX_SEQUENCE
                ),
            ));
        }
        for entry in batch.iter() {
            entry?;
        }
        Ok(batch)
    }

    /// Removes every record and resets the sequence to 0.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(HEADER_LEN, 0);
    }

    /// True when the batch holds no records.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Encoded size in bytes, header included.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Appends the records of `other` after ours; counts are summed and our sequence is kept.
    pub fn append(&mut self, other: &BatchRep) {
        self.rep.extend_from_slice(other.rep.get(HEADER_LEN..).unwrap_or_default());
        self.set_count(self.count().wrapping_add(other.count()));
    }

    /// The records in order. Yields an error (and then nothing) at the first malformed record or when the
    /// records do not match the count.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter { dec: Decoder::new(&self.rep), count: self.count(), seen: 0, started: false, done: false }
    }
}

impl<'a> IntoIterator for &'a BatchRep {
    type Item = Result<BatchEntry<'a>>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

/// Iterator over the records of a [`BatchRep`].
pub struct BatchIter<'a> {
    dec: Decoder<'a>,
    count: u32,
    seen: u32,
    started: bool,
    done: bool,
}

impl<'a> BatchIter<'a> {
    fn fail(&mut self, offset: usize, what: String) -> Option<Result<BatchEntry<'a>>> {
        self.done = true;
        Some(Err(Error::corruption("", offset as u64, what)))
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            if self.dec.bytes(HEADER_LEN).is_none() {
                return self.fail(0, format!("write batch shorter than its {HEADER_LEN}-byte header"));
            }
        }
        let at = self.dec.pos();
        if self.dec.is_empty() {
            self.done = true;
            if self.seen != self.count {
                return self.fail(at, format!("write batch header counts {} records, found {}", self.count, self.seen));
            }
            return None;
        }
        if self.seen == self.count {
            return self.fail(at, format!("write batch holds more than the {} records its header counts", self.count));
        }
        let Some(mut kind_byte) = self.dec.u8() else { return self.fail(at, "truncated record".into()) };
        let mut family = 0;
        if kind_byte == FAMILY_MARKER {
            match self.dec.varint32() {
                Some(f) if f > 0 => family = f,
                Some(_) => return self.fail(at, "column family prefix names the default family (0)".into()),
                None => return self.fail(at, "truncated column family prefix".into()),
            }
            let Some(b) = self.dec.u8() else { return self.fail(at, "truncated record".into()) };
            kind_byte = b;
        }
        let Some(kind) = ValueKind::from_record_u8(kind_byte).filter(|k| *k != ValueKind::BlobIndex) else {
            return self.fail(at, format!("unknown record kind {kind_byte} in write batch"));
        };
        let Some(key) = self.dec.lp_slice() else {
            return self.fail(at, format!("truncated key in write batch record #{}", self.seen));
        };
        let value = match kind {
            ValueKind::Deletion | ValueKind::SingleDeletion => &[][..],
            ValueKind::Value | ValueKind::Merge | ValueKind::RangeDeletion | ValueKind::BlobIndex => {
                match self.dec.lp_slice() {
                    Some(v) => v,
                    None => return self.fail(at, format!("truncated value in write batch record #{}", self.seen)),
                }
            }
        };
        self.seen += 1;
        Some(Ok(BatchEntry { kind, key, value, family }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> BatchRep {
        let mut b = BatchRep::new();
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.merge(b"k3", b"+1");
        b.put(b"", b"");
        b.set_sequence(100);
        b
    }

    fn entries(b: &BatchRep) -> Vec<(ValueKind, Vec<u8>, Vec<u8>)> {
        b.iter().map(|e| e.map(|e| (e.kind, e.key.to_vec(), e.value.to_vec()))).collect::<Result<_>>().unwrap()
    }

    fn corruption_offset(r: Result<BatchRep>) -> (u64, String) {
        match r {
            Err(Error::Corruption { file, offset, what }) => {
                assert_eq!(file.as_os_str(), "");
                (offset, what)
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn roundtrip() {
        let b = sample();
        assert_eq!((b.count(), b.sequence(), b.is_empty()), (4, 100, false));
        let back = BatchRep::from_bytes(b.data().to_vec()).unwrap();
        assert_eq!(back, b);
        assert_eq!(
            entries(&back),
            vec![
                (ValueKind::Value, b"k1".to_vec(), b"v1".to_vec()),
                (ValueKind::Deletion, b"k2".to_vec(), vec![]),
                (ValueKind::Merge, b"k3".to_vec(), b"+1".to_vec()),
                (ValueKind::Value, vec![], vec![]),
            ]
        );
        assert_eq!(b.approximate_size(), b.data().len());
        let mut c = b.clone();
        c.clear();
        assert_eq!(c, BatchRep::default());
        assert!(c.is_empty());
        assert_eq!(c.data().len(), HEADER_LEN);
        assert_eq!(BatchRep::from_bytes(c.data().to_vec()).unwrap(), c);
    }

    #[test]
    fn single_deletion_roundtrips_without_a_value_and_unassigned_kinds_are_corrupt() {
        let mut b = BatchRep::new();
        b.single_delete(b"gone");
        b.put(b"k", b"v");
        b.set_sequence(7);
        let data = b.data().to_vec();
        assert_eq!(data[HEADER_LEN], 0x07);
        let back = BatchRep::from_bytes(data.clone()).unwrap();
        assert_eq!(
            entries(&back),
            vec![
                (ValueKind::SingleDeletion, b"gone".to_vec(), vec![]),
                (ValueKind::Value, b"k".to_vec(), b"v".to_vec())
            ]
        );
        for unassigned in [3u8, 4, 5, 6, 8, 0x0e, 0x10, 0xff] {
            let mut bad = data.clone();
            bad[HEADER_LEN] = unassigned;
            let (off, what) = corruption_offset(BatchRep::from_bytes(bad));
            assert_eq!(off, HEADER_LEN as u64);
            assert!(what.contains("unknown record kind"), "{what}");
        }
    }

    #[test]
    fn range_deletion_roundtrips_with_its_end_as_the_value() {
        let mut b = BatchRep::new();
        b.delete_range(b"b", b"d");
        b.put(b"c", b"v");
        b.delete_range(b"", b"");
        b.set_sequence(9);
        let data = b.data().to_vec();
        assert_eq!(data[HEADER_LEN], 0x0f);
        let back = BatchRep::from_bytes(data.clone()).unwrap();
        assert_eq!(
            entries(&back),
            vec![
                (ValueKind::RangeDeletion, b"b".to_vec(), b"d".to_vec()),
                (ValueKind::Value, b"c".to_vec(), b"v".to_vec()),
                (ValueKind::RangeDeletion, vec![], vec![]),
            ]
        );
        // The end is required: a record cut after the begin key is truncated, at the record's first byte.
        let cut = HEADER_LEN + 1 + 2;
        let mut short = data[..cut].to_vec();
        short[8] = 1;
        let (off, what) = corruption_offset(BatchRep::from_bytes(short));
        assert_eq!(off, HEADER_LEN as u64);
        assert!(what.contains("truncated value"), "{what}");
    }

    #[test]
    fn family_prefixes_roundtrip_and_bad_ones_are_corrupt() {
        let mut b = BatchRep::new();
        b.push_record(0, ValueKind::Value, b"a", b"1");
        b.push_record(7, ValueKind::Value, b"b", b"2");
        b.push_record(300, ValueKind::Deletion, b"c", b"ignored");
        b.push_record(7, ValueKind::RangeDeletion, b"d", b"e");
        let b = BatchRep::from_bytes(b.data().to_vec()).unwrap();
        let got: Vec<_> = b
            .iter()
            .map(|e| e.map(|e| (e.family, e.kind, e.key.to_vec(), e.value.to_vec())))
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(
            got,
            [
                (0, ValueKind::Value, b"a".to_vec(), b"1".to_vec()),
                (7, ValueKind::Value, b"b".to_vec(), b"2".to_vec()),
                (300, ValueKind::Deletion, b"c".to_vec(), vec![]),
                (7, ValueKind::RangeDeletion, b"d".to_vec(), b"e".to_vec()),
            ]
        );
        // A prefix naming family 0, a truncated prefix, and a prefix with no record after it are corrupt.
        for tail in [&[FAMILY_MARKER, 0, 1, 1, b'k', 1, b'v'][..], &[FAMILY_MARKER, 0x80][..], &[FAMILY_MARKER, 5][..]]
        {
            let mut raw = vec![0u8; HEADER_LEN];
            raw[8] = 1;
            raw.extend_from_slice(tail);
            assert!(BatchRep::from_bytes(raw).is_err(), "{tail:?}");
        }
    }

    #[test]
    fn append() {
        let mut a = sample();
        let mut other = BatchRep::with_capacity(64);
        other.put(b"x", b"y");
        other.set_sequence(999);
        a.append(&other);
        assert_eq!((a.count(), a.sequence()), (5, 100));
        let e = entries(&a);
        assert_eq!(e.last(), Some(&(ValueKind::Value, b"x".to_vec(), b"y".to_vec())));
        assert_eq!(BatchRep::from_bytes(a.data().to_vec()).unwrap(), a);
        let mut empty = BatchRep::new();
        empty.append(&a);
        assert_eq!(entries(&empty), e);
    }

    #[test]
    fn count_mismatch() {
        let mut data = sample().data().to_vec();
        data[8] = 5;
        let (off, what) = corruption_offset(BatchRep::from_bytes(data.clone()));
        assert_eq!(off, data.len() as u64);
        assert!(what.contains("counts 5"), "{what}");
        data[8] = 3;
        let (_, what) = corruption_offset(BatchRep::from_bytes(data));
        assert!(what.contains("more than"), "{what}");
    }

    #[test]
    fn truncated_record() {
        let mut b = BatchRep::new();
        b.put(b"key", b"value");
        let full = b.data().to_vec();
        for cut in HEADER_LEN + 1..full.len() {
            let (off, _) = corruption_offset(BatchRep::from_bytes(full[..cut].to_vec()));
            assert_eq!(off, HEADER_LEN as u64, "cut at {cut}");
        }
    }

    #[test]
    fn bad_kind() {
        let mut data = sample().data().to_vec();
        let second = HEADER_LEN + 1 + 3 + 3; // kind, lp "k1", lp "v1"
        assert_eq!(data[second], ValueKind::Deletion as u8);
        data[second] = 5; // unassigned (7 is the single deletion)
        let (off, what) = corruption_offset(BatchRep::from_bytes(data));
        assert_eq!(off, second as u64);
        assert!(what.contains("kind 5"), "{what}");
    }

    #[test]
    fn batch_with_sequence_past_max_is_corruption() {
        let mut b = BatchRep::new();
        b.put(b"a", b"1");
        b.put(b"b", b"2");
        // The last record takes MAX_SEQUENCE exactly: fine.
        b.set_sequence(ikey::MAX_SEQUENCE - 1);
        assert_eq!(BatchRep::from_bytes(b.data().to_vec()).unwrap().sequence(), ikey::MAX_SEQUENCE - 1);
        // One more and the second record would take 2^56: out of range, as is any sequence near u64::MAX
        // (where `sequence + count` would wrap).
        for seq in [ikey::MAX_SEQUENCE, ikey::MAX_SEQUENCE + 1, u64::MAX - 1, u64::MAX] {
            b.set_sequence(seq);
            let (off, what) = corruption_offset(BatchRep::from_bytes(b.data().to_vec()));
            assert_eq!(off, 0);
            assert!(what.contains("past the largest sequence number"), "{what}");
        }
        // An empty batch uses no sequence number.
        let mut empty = BatchRep::new();
        empty.set_sequence(u64::MAX);
        assert!(BatchRep::from_bytes(empty.data().to_vec()).is_ok());
    }

    #[test]
    fn header_too_short() {
        for n in 0..HEADER_LEN {
            let (off, _) = corruption_offset(BatchRep::from_bytes(vec![0; n]));
            assert_eq!(off, 0);
        }
    }

    #[test]
    fn grammar_matches_docs() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("batch.rs"),
            include_str!("../../../docs/format/batch.md"),
        );
    }

    proptest! {
        #[test]
        fn roundtrip_random(
            seq in 0..=ikey::MAX_SEQUENCE - 20,
            ops in prop::collection::vec(
                (0u8..3, prop::collection::vec(any::<u8>(), 0..20), prop::collection::vec(any::<u8>(), 0..300)),
                0..20,
            ),
        ) {
            let mut b = BatchRep::new();
            for (k, key, value) in &ops {
                match k {
                    0 => b.delete(key),
                    1 => b.put(key, value),
                    _ => b.merge(key, value),
                }
            }
            b.set_sequence(seq);
            let back = BatchRep::from_bytes(b.data().to_vec()).unwrap();
            prop_assert_eq!(back.sequence(), seq);
            prop_assert_eq!(back.count() as usize, ops.len());
            let got = entries(&back);
            for ((k, key, value), (gk, gkey, gvalue)) in ops.iter().zip(&got) {
                prop_assert_eq!(*k, *gk as u8);
                prop_assert_eq!(key, gkey);
                prop_assert_eq!(if *k == 0 { &[][..] } else { &value[..] }, &gvalue[..]);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(b) = BatchRep::from_bytes(data.clone()) {
                prop_assert_eq!(b.data(), &data[..]);
                prop_assert_eq!(b.iter().count(), b.count() as usize);
            }
        }
    }
}
