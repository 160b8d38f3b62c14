//! Iterators: the k-way merge of memtables and tables, the concatenation of one sorted level, and the
//! user-facing [`Cursor`] / [`Iter`] that turn internal entries (versions, tombstones, merge
//! operands) into the key/value view of one snapshot.
//!
//! Layering: sources (memtable, table, `LevelIterator`) <- `MergingIterator` <- [`Cursor`] <- [`Iter`].
//! Everything below `Cursor` speaks `InternalIterator` over internal keys.

mod db_iter;
mod level;
mod merging;
mod range;
mod range_del;
#[cfg(test)]
pub(crate) mod vec;

pub use db_iter::Cursor;
pub(crate) use db_iter::RefreshFn;
pub(crate) use level::LevelIterator;
pub(crate) use merging::MergingIterator;
pub(crate) use range::{narrow_bounds, prefix_upper_bound};
pub use range::{Iter, KeyRange};
pub(crate) use range_del::{CoverSkip, RangeDelFilter, SourceSeqs};
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) use vec::VecIter;
