//! Iterators: the k-way merge of memtables and tables, the concatenation of one sorted level, and the
//! user-facing [`DbIterator`] / [`Range`] that turn internal entries (versions, tombstones, merge
//! operands) into the key/value view of one snapshot.
//!
//! Layering: sources (memtable, table, `LevelIterator`) <- `MergingIterator` <- [`DbIterator`] <- [`Range`].
//! Everything below `DbIterator` speaks `InternalIterator` over internal keys.

mod db_iter;
mod level;
mod merging;
mod range;
#[cfg(test)]
pub(crate) mod vec;

pub use db_iter::DbIterator;
pub(crate) use level::LevelIterator;
pub(crate) use merging::MergingIterator;
pub use range::Range;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) use vec::VecIter;
