//! The iterator protocol shared by blocks, tables, memtables and merging iterators.

use crate::Result;
use std::path::Path;

/// A positioned cursor over internal keys in [`crate::ikey::compare`] order.
///
/// Errors (an unreadable or corrupt block) make the iterator invalid; `status` then returns the error.
/// `key`/`value` may only be called while `valid()`.
pub trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry with key >= `target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    /// Positions at the last entry with key <= `target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]);
    /// Moves to the next entry. REQUIRES: `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. REQUIRES: `valid()`.
    fn prev(&mut self);
    /// The current internal key. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
    /// `Ok` unless an error stopped the iterator.
    fn status(&self) -> Result<()>;
    /// Where the current entry is stored: the file and the byte offset of the block holding it, so that a
    /// caller who finds the entry malformed can name both in its `Corruption`. `None` when the source is not
    /// a file (a memtable). REQUIRES: `valid()`.
    fn location(&self) -> Option<(&Path, u64)> {
        None
    }
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) {
        (**self).seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        (**self).seek_for_prev(target)
    }
    fn next(&mut self) {
        (**self).next()
    }
    fn prev(&mut self) {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn status(&self) -> Result<()> {
        (**self).status()
    }
    fn location(&self) -> Option<(&Path, u64)> {
        (**self).location()
    }
}
