//! The state of one point lookup, fed by the memtables and then the SSTs, newest source first.
//!
//! Each source feeds the entries it holds for the user key, newest first, until [`GetState::feed`] says the
//! answer is decided: a value, a deletion, or a value/deletion under merge operands. Operands met on the
//! way are kept (copied, because sources only lend their bytes) and combined by [`GetState::finish`].

use crate::merge::MergeOperator;
use shaledb_format::ikey::{self, ValueKind};
use shaledb_vfs::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Nothing decisive seen yet (maybe some merge operands).
    Pending,
    /// A value was found; it is in `value` (under operands, it is the base they merge onto).
    Value,
    /// A deletion was found (under operands: they merge onto nothing).
    Deleted,
    /// Decided by an error: `error` holds it.
    Failed,
}

/// A point lookup in progress. See the module documentation.
pub(crate) struct GetState<'a> {
    user_key: &'a [u8],
    seq: u64,
    merge: Option<&'a Arc<dyn MergeOperator>>,
    outcome: Outcome,
    value: Vec<u8>,
    /// Merge operands, newest first, concatenated; `op_ends[i]` is where operand `i` ends.
    ops: Vec<u8>,
    op_ends: Vec<usize>,
    /// Where the newest merge operand is stored (file, block offset), for the error if the merge operator
    /// rejects the operands.
    merge_at: Option<(PathBuf, u64)>,
    error: Option<Error>,
    /// The newest range tombstone covering the key visible at `seq` (0: none): entries below it are deleted.
    cover: u64,
    /// `value` holds a blob index (kind `0x11`), stored at `blob_at`, to resolve through `blobs`.
    blob: bool,
    blob_at: Option<(PathBuf, u64)>,
    blobs: Option<&'a crate::blob::BlobFiles>,
    /// `ReadTier::BlockCacheOnly`: blob values are not read (there is no blob cache).
    cache_only: bool,
}

/// The file named by a `Corruption` found in an entry that came from a memtable (no file holds it yet).
pub(crate) const MEMTABLE: &str = "memtable";

/// A `Corruption` at `location` (a table's file and block offset), or in the memtable when `None`.
fn corruption_at(location: Option<(&Path, u64)>, what: String) -> Error {
    match location {
        Some((file, offset)) => Error::corruption(file, offset, what),
        None => Error::corruption(MEMTABLE, 0, what),
    }
}

impl<'a> GetState<'a> {
    /// A lookup of `user_key` as of sequence number `seq`, combining merge operands with `merge`.
    #[cfg(test)]
    pub(crate) fn new(user_key: &'a [u8], seq: u64, merge: Option<&'a Arc<dyn MergeOperator>>) -> GetState<'a> {
        GetState::with_buffer(user_key, seq, merge, Vec::new())
    }

    /// Like [`GetState::new`], but a found value is written into `buf` (cleared first), so a caller that
    /// takes its buffer back through [`GetState::finish_into`] reads without allocating.
    pub(crate) fn with_buffer(
        user_key: &'a [u8],
        seq: u64,
        merge: Option<&'a Arc<dyn MergeOperator>>,
        mut buf: Vec<u8>,
    ) -> GetState<'a> {
        buf.clear();
        GetState {
            user_key,
            seq,
            merge,
            outcome: Outcome::Pending,
            value: buf,
            ops: Vec::new(),
            op_ends: Vec::new(),
            merge_at: None,
            error: None,
            cover: 0,
            blob: false,
            blob_at: None,
            blobs: None,
            cache_only: false,
        }
    }

    /// Resolves a blob index found by the lookup through `blobs` (without, a blob index is an error).
    pub(crate) fn with_blobs(mut self, blobs: &'a crate::blob::BlobFiles) -> GetState<'a> {
        self.blobs = Some(blobs);
        self
    }

    /// `ReadTier::BlockCacheOnly`: a blob index found is [`Error::Incomplete`] instead of being read.
    pub(crate) fn cache_only(mut self, cache_only: bool) -> GetState<'a> {
        self.cache_only = cache_only;
        self
    }

    /// Declares that a range tombstone at `cover` (visible at the lookup's sequence) covers the key: every
    /// entry older than it reads as a deletion. Sources may pass it before or while feeding; the largest wins.
    pub(crate) fn cover_with(&mut self, cover: u64) {
        self.cover = self.cover.max(cover);
    }

    /// Feeds one entry. Sources pass the entries of this user key newest first; entries of other user keys
    /// and entries newer than the lookup's sequence number are ignored. Returns true once the lookup is
    /// decided (then the caller stops feeding).
    pub(crate) fn feed(&mut self, ikey: &[u8], value: &[u8]) -> bool {
        self.feed_from(ikey, value, None)
    }

    /// [`GetState::feed`] for an entry stored at `location` (its file and block offset; `None`: a memtable),
    /// which an error about the entry names.
    pub(crate) fn feed_from(&mut self, ikey: &[u8], value: &[u8], location: Option<(&Path, u64)>) -> bool {
        if self.outcome != Outcome::Pending {
            return true;
        }
        let Some(p) = ikey::parse(ikey) else {
            let what = format!("unparseable internal key of {} bytes in lookup", ikey.len());
            self.fail(corruption_at(location, what));
            return true;
        };
        if p.user_key != self.user_key || p.seq > self.seq {
            return false;
        }
        if p.seq < self.cover {
            // Deleted by a range tombstone newer than the entry: as a point deletion here.
            self.outcome = Outcome::Deleted;
            return true;
        }
        match p.kind {
            ValueKind::Value | ValueKind::BlobIndex => {
                self.value.clear();
                self.value.extend_from_slice(value);
                self.outcome = Outcome::Value;
                if p.kind == ValueKind::BlobIndex {
                    self.blob = true;
                    self.blob_at = location.map(|(f, o)| (f.to_path_buf(), o));
                }
            }
            ValueKind::Deletion | ValueKind::SingleDeletion => self.outcome = Outcome::Deleted,
            ValueKind::RangeDeletion => {
                // `ikey::parse` never yields it; a point key carrying it would be corrupt.
                self.fail(corruption_at(location, "range tombstone kind in a point entry".into()));
                return true;
            }
            ValueKind::Merge => {
                if self.merge.is_none() {
                    self.fail(no_merge_operator());
                    return true;
                }
                if self.op_ends.is_empty() {
                    self.merge_at = location.map(|(f, o)| (f.to_path_buf(), o));
                }
                self.ops.extend_from_slice(value);
                self.op_ends.push(self.ops.len());
            }
        }
        self.outcome != Outcome::Pending
    }

    /// The sequence number the lookup reads at.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// Decides the lookup by an error met outside [`GetState::feed`] (a table that cannot be opened or read in
    /// a batch lookup, which goes on with its other keys).
    pub(crate) fn fail(&mut self, e: Error) {
        self.error = Some(e);
        self.outcome = Outcome::Failed;
    }

    /// True when merge operands of the key were fed: the key exists whatever older sources hold (the operands
    /// alone merge into a value).
    pub(crate) fn has_operands(&self) -> bool {
        !self.op_ends.is_empty()
    }

    /// True once the answer is decided and older sources need not be read.
    pub(crate) fn is_done(&self) -> bool {
        self.outcome != Outcome::Pending
    }

    /// The value, or `None` when the key is deleted or absent. (The read path uses `finish_into`.)
    #[cfg(test)]
    pub(crate) fn finish(self) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(if self.finish_into(&mut out)? { Some(out) } else { None })
    }

    /// Writes the value into `out` (replacing its contents) and returns true, or returns false when the key
    /// is deleted or absent (then `out` is left empty).
    pub(crate) fn finish_into(mut self, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.blob {
            let Some(blobs) = self.blobs else {
                return Err(Error::InvalidArgument("a blob reference met by a read without blob files".into()));
            };
            if self.cache_only {
                return Err(Error::Incomplete("the value is in a blob file".into()));
            }
            let at = self.blob_at.as_ref().map(|(f, o)| (f.as_path(), *o));
            let raw = std::mem::take(&mut self.value);
            blobs.resolve(self.user_key, &raw, at, &mut self.value)?;
        }
        if self.op_ends.is_empty() {
            // Hand the buffer back either way so a caller reusing it keeps its capacity.
            std::mem::swap(out, &mut self.value);
            if self.outcome == Outcome::Value {
                return Ok(true);
            }
            out.clear();
            return Ok(false);
        }
        let Some(op) = self.merge else { return Err(no_merge_operator()) };
        // Stored newest first; the operator wants them oldest first.
        let mut operands: Vec<&[u8]> = Vec::with_capacity(self.op_ends.len());
        for i in (0..self.op_ends.len()).rev() {
            let start = if i == 0 { 0 } else { self.op_ends[i - 1] };
            operands.push(&self.ops[start..self.op_ends[i]]);
        }
        let base = (self.outcome == Outcome::Value).then_some(self.value.as_slice());
        match op.full_merge(self.user_key, base, &operands) {
            Some(v) => {
                *out = v;
                Ok(true)
            }
            None => {
                let what = format!("merge operator {} rejected the operands of a key in lookup", op.name());
                let at = self.merge_at.as_ref().map(|(f, o)| (f.as_path(), *o));
                Err(corruption_at(at, what))
            }
        }
    }
}

pub(crate) fn no_merge_operator() -> Error {
    Error::InvalidArgument("merge operand found but no merge_operator is configured".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::{StringAppend, UInt64Add};
    use shaledb_format::ikey::make_internal_key;

    fn ik(k: &str, seq: u64, kind: ValueKind) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, kind)
    }

    #[test]
    fn value_decides() {
        let mut st = GetState::new(b"k", 10, None);
        assert!(!st.is_done());
        assert!(st.feed(&ik("k", 5, ValueKind::Value), b"v"));
        assert!(st.is_done());
        assert_eq!(st.finish().unwrap(), Some(b"v".to_vec()));
    }

    #[test]
    fn deletion_decides_absent() {
        let mut st = GetState::new(b"k", 10, None);
        assert!(st.feed(&ik("k", 5, ValueKind::Deletion), b""));
        assert_eq!(st.finish().unwrap(), None);
        assert_eq!(GetState::new(b"k", 10, None).finish().unwrap(), None);
    }

    #[test]
    fn newer_and_other_keys_are_ignored() {
        let mut st = GetState::new(b"k", 4, None);
        assert!(!st.feed(&ik("k", 5, ValueKind::Value), b"new"));
        assert!(!st.feed(&ik("j", 3, ValueKind::Value), b"other"));
        assert!(st.feed(&ik("k", 4, ValueKind::Value), b"old"));
        assert_eq!(st.finish().unwrap(), Some(b"old".to_vec()));
    }

    #[test]
    fn merges_over_value_deletion_and_nothing() {
        let op: Arc<dyn MergeOperator> = Arc::new(StringAppend::default());
        let mut st = GetState::new(b"k", 10, Some(&op));
        assert!(!st.feed(&ik("k", 9, ValueKind::Merge), b"c"));
        assert!(!st.feed(&ik("k", 8, ValueKind::Merge), b"b"));
        assert!(st.feed(&ik("k", 7, ValueKind::Value), b"a"));
        assert_eq!(st.finish().unwrap(), Some(b"a,b,c".to_vec()));

        let mut st = GetState::new(b"k", 10, Some(&op));
        assert!(!st.feed(&ik("k", 9, ValueKind::Merge), b"c"));
        assert!(st.feed(&ik("k", 7, ValueKind::Deletion), b""));
        assert_eq!(st.finish().unwrap(), Some(b"c".to_vec()));

        let add: Arc<dyn MergeOperator> = Arc::new(UInt64Add);
        let mut st = GetState::new(b"k", 10, Some(&add));
        st.feed(&ik("k", 9, ValueKind::Merge), &2u64.to_le_bytes());
        st.feed(&ik("k", 8, ValueKind::Merge), &3u64.to_le_bytes());
        assert!(!st.is_done());
        assert_eq!(st.finish().unwrap(), Some(5u64.to_le_bytes().to_vec()));
    }

    #[test]
    fn merge_without_operator_is_invalid_argument() {
        let mut st = GetState::new(b"k", 10, None);
        assert!(st.feed(&ik("k", 9, ValueKind::Merge), b"x"));
        assert!(st.finish().unwrap_err().is_invalid_argument());
    }

    #[test]
    fn merge_operator_rejecting_is_corruption() {
        #[derive(Debug)]
        struct Reject;
        impl MergeOperator for Reject {
            fn name(&self) -> &str {
                "reject"
            }
            fn full_merge(&self, _: &[u8], _: Option<&[u8]>, _: &[&[u8]]) -> Option<Vec<u8>> {
                None
            }
        }
        let op: Arc<dyn MergeOperator> = Arc::new(Reject);
        let mut st = GetState::new(b"k", 10, Some(&op));
        st.feed(&ik("k", 9, ValueKind::Merge), b"x");
        assert_corruption_at(st.finish().unwrap_err(), MEMTABLE, 0);
        // From a table: the newest operand's file and block offset.
        let mut st = GetState::new(b"k", 10, Some(&op));
        st.feed_from(&ik("k", 9, ValueKind::Merge), b"x", Some((Path::new("/db/000007.sst"), 4096)));
        st.feed_from(&ik("k", 8, ValueKind::Merge), b"y", Some((Path::new("/db/000005.sst"), 0)));
        assert_corruption_at(st.finish().unwrap_err(), "/db/000007.sst", 4096);
    }

    fn assert_corruption_at(e: Error, want_file: &str, want_offset: u64) {
        match e {
            Error::Corruption { file, offset, .. } => {
                assert_eq!((file.as_path(), offset), (Path::new(want_file), want_offset))
            }
            other => panic!("expected corruption, got {other}"),
        }
    }

    #[test]
    fn lookup_corruption_names_file_and_offset() {
        let mut st = GetState::new(b"k", 10, None);
        assert!(st.feed_from(b"short", b"", Some((Path::new("/db/000009.sst"), 1234))));
        assert_corruption_at(st.finish().unwrap_err(), "/db/000009.sst", 1234);
        let mut st = GetState::new(b"k", 10, None);
        assert!(st.feed(b"short", b""));
        assert_corruption_at(st.finish().unwrap_err(), MEMTABLE, 0);
    }

    #[test]
    fn unparseable_key_is_corruption() {
        let mut st = GetState::new(b"k", 10, None);
        assert!(st.feed(b"short", b""));
        assert!(st.finish().unwrap_err().is_corruption());
        let mut bad = ik("k", 3, ValueKind::Value);
        let n = bad.len();
        bad[n - 8] = 9; // unknown kind byte
        let mut st = GetState::new(b"k", 10, None);
        assert!(st.feed(&bad, b""));
        assert!(st.finish().unwrap_err().is_corruption());
    }

    #[test]
    fn finish_into_reuses_the_buffer() {
        let mut out = Vec::with_capacity(64);
        let cap_ptr = out.as_ptr();
        let mut st = GetState::with_buffer(b"k", 10, None, std::mem::take(&mut out));
        st.feed(&ik("k", 5, ValueKind::Value), b"hello");
        assert!(st.finish_into(&mut out).unwrap());
        assert_eq!(out, b"hello");
        assert_eq!(out.as_ptr(), cap_ptr);
        let st = GetState::with_buffer(b"k", 10, None, std::mem::take(&mut out));
        assert!(!st.finish_into(&mut out).unwrap());
        assert!(out.is_empty());
        assert_eq!(out.as_ptr(), cap_ptr);
    }
}
