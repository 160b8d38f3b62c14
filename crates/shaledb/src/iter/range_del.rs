//! Range tombstones on the iterator path: [`RangeDelFilter`] sits between the merged sources and the
//! [`crate::iter::Cursor`] and presents every entry a visible range tombstone covers as a point deletion of the
//! same sequence number.
//!
//! Rewriting only the kind keeps the internal order (sequence numbers are unique per key, and the kind sorts
//! after the sequence), so the cursor's forward and backward logic, merges and snapshots stay as they are: a
//! covered value hides the key, covered merge operands stop at it as at a deletion. Entries newer than the
//! read's sequence pass unchanged (the cursor ignores them anyway).
//!
//! NB: the cursor still steps over each covered entry until a compaction drops it (RocksDB 7.8's `DBIter` checks
//! each key against its range-deletion aggregator the same way). Skipping a covered stretch in one seek per
//! source, as Pebble's and newer RocksDB's range-deletion-aware merging iterators do, is not built.

use crate::range_del::RangeDelView;
use shaledb_format::ikey::{self, ValueKind};
use shaledb_format::iter::InternalIterator;
use shaledb_format::Result;
use std::path::Path;

/// Presents entries covered by a visible range tombstone as deletions. See the module documentation.
pub(crate) struct RangeDelFilter<I> {
    inner: I,
    view: RangeDelView,
    read_seq: u64,
    /// The rewritten key when `covered`.
    key: Vec<u8>,
    covered: bool,
}

impl<I: InternalIterator> RangeDelFilter<I> {
    /// Filters `inner` by the tombstones of `view` visible at `read_seq`.
    pub(crate) fn new(inner: I, view: RangeDelView, read_seq: u64) -> Self {
        RangeDelFilter { inner, view, read_seq, key: Vec::new(), covered: false }
    }

    fn settle(&mut self) {
        self.covered = false;
        if !self.inner.valid() {
            return;
        }
        // An unparseable key passes unchanged: the cursor reports it as corruption.
        let Some(p) = ikey::parse(self.inner.key()) else { return };
        if p.seq > self.read_seq || p.kind == ValueKind::Deletion {
            return;
        }
        if p.seq < self.view.covering_seq(p.user_key, self.read_seq) {
            self.key.clear();
            ikey::append_internal_key(&mut self.key, p.user_key, p.seq, ValueKind::Deletion);
            self.covered = true;
        }
    }
}

impl<I: InternalIterator> InternalIterator for RangeDelFilter<I> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
        self.settle();
    }
    fn seek_to_last(&mut self) {
        self.inner.seek_to_last();
        self.settle();
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target);
        self.settle();
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target);
        self.settle();
    }
    fn next(&mut self) {
        self.inner.next();
        self.settle();
    }
    fn prev(&mut self) {
        self.inner.prev();
        self.settle();
    }
    fn key(&self) -> &[u8] {
        if self.covered {
            &self.key
        } else {
            self.inner.key()
        }
    }
    fn value(&self) -> &[u8] {
        if self.covered {
            &[]
        } else {
            self.inner.value()
        }
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
    fn location(&self) -> Option<(&Path, u64)> {
        self.inner.location()
    }
}
