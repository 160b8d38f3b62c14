//! A vector-backed [`InternalIterator`] for tests: sorted entries in memory, with optional error injection.

use shaledb_format::ikey;
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::{Error, Result};
use std::path::Path;

/// Entries sorted by [`ikey::compare`]; `pos == entries.len()` means invalid.
pub(crate) struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
    /// Landing on this index makes the iterator invalid with a corruption error.
    fail_at: Option<usize>,
    failed: bool,
}

impl VecIter {
    /// An iterator over `entries` (sorted here; internal keys must be distinct).
    pub(crate) fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIter {
        entries.sort_by(|a, b| ikey::compare(&a.0, &b.0));
        let pos = entries.len();
        VecIter { entries, pos, fail_at: None, failed: false }
    }

    /// Like `new`, but positioning on entry `index` (in sorted order) fails with a corruption error.
    pub(crate) fn failing_at(entries: Vec<(Vec<u8>, Vec<u8>)>, index: usize) -> VecIter {
        let mut it = VecIter::new(entries);
        it.fail_at = Some(index);
        it
    }

    fn land(&mut self, pos: usize) {
        self.failed = false;
        self.pos = pos;
        if Some(pos) == self.fail_at {
            self.failed = true;
            self.pos = self.entries.len();
        }
    }

    fn invalidate(&mut self) {
        self.pos = self.entries.len();
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) {
        self.land(0);
    }
    fn seek_to_last(&mut self) {
        match self.entries.len().checked_sub(1) {
            Some(p) => self.land(p),
            None => self.invalidate(),
        }
    }
    fn seek(&mut self, target: &[u8]) {
        let p = self.entries.partition_point(|e| ikey::compare(&e.0, target).is_lt());
        self.land(p);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let p = self.entries.partition_point(|e| ikey::compare(&e.0, target).is_le());
        match p.checked_sub(1) {
            Some(p) => self.land(p),
            None => {
                self.failed = false;
                self.invalidate();
            }
        }
    }
    fn next(&mut self) {
        self.land(self.pos + 1);
    }
    fn prev(&mut self) {
        match self.pos.checked_sub(1) {
            Some(p) => self.land(p),
            None => self.invalidate(),
        }
    }
    fn key(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[], |e| &e.0)
    }
    fn value(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[], |e| &e.1)
    }
    /// "vec", at the entry's index: lets tests check that errors name where the entry came from.
    fn location(&self) -> Option<(&Path, u64)> {
        Some((Path::new("vec"), self.pos as u64))
    }
    fn status(&self) -> Result<()> {
        if self.failed {
            Err(Error::corruption("vec", self.fail_at.unwrap_or(0) as u64, "injected failure"))
        } else {
            Ok(())
        }
    }
}
