//! Prefix filtering on the read paths: point lookups in tables whose filter holds only prefixes, and cursors
//! confined to one prefix ([`crate::ReadOptions::prefix_same_as_start`]) that skip the tables and memtables
//! whose prefix filter excludes it.
//!
//! A confined cursor shares a [`PrefixScope`] with the [`PrefixFiltered`] wrappers around its sources. The
//! cursor sets the scope on every `seek`/`seek_for_prev` whose target has a prefix, and clears it on
//! `seek_to_first`/`seek_to_last` and on targets outside the extractor's domain. While it is set, the cursor's
//! bounds lie within the prefix's key range, so every seek the merged sources receive (the cursor's own, the
//! merging iterator's direction switches, a level iterator's seek into a file) has a target with that same
//! prefix: a source whose filter excludes the prefix has no key the cursor may yield, and is treated as empty
//! until the next positioning call.

use crate::memtable::MemTable;
use crate::options::Options;
use shaledb_format::bloom::key_hash;
use shaledb_format::ikey;
use shaledb_format::iter::InternalIterator;
use shaledb_format::prefix::PrefixExtractor;
use shaledb_format::table::Table;
use shaledb_vfs::Result;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Whether `table` may hold `key` (whose whole-key hash is `hash`): its whole-key filter when it has one,
/// else its prefix filter when it was built with `opts`' extractor, else yes.
#[inline]
pub(crate) fn table_may_contain(opts: &Options, table: &Table, key: &[u8], hash: u64, cache_only: bool) -> bool {
    if table.properties().whole_key_filtering {
        return table.may_contain_in(hash, cache_only);
    }
    match opts.prefix_extractor.as_ref().and_then(|ex| ex.prefix(key).map(|p| (ex, p))) {
        Some((ex, p)) => table.may_contain_prefix_in(ex, key_hash(p), cache_only),
        None => true,
    }
}

/// The prefix a confined cursor is positioned in, shared with the filtered sources under it.
#[derive(Debug)]
pub(crate) struct PrefixScope {
    pub(crate) extractor: PrefixExtractor,
    confined: AtomicBool,
    hash: AtomicU64,
}

impl PrefixScope {
    pub(crate) fn new(extractor: PrefixExtractor) -> Arc<PrefixScope> {
        Arc::new(PrefixScope { extractor, confined: AtomicBool::new(false), hash: AtomicU64::new(0) })
    }

    /// The cursor is now confined to `prefix`.
    pub(crate) fn confine(&self, prefix: &[u8]) {
        self.hash.store(key_hash(prefix), Relaxed);
        self.confined.store(true, Relaxed);
    }

    /// The cursor reads in total order.
    pub(crate) fn release(&self) {
        self.confined.store(false, Relaxed);
    }

    /// The hash of the prefix the cursor is confined to, if it is.
    fn confined_hash(&self) -> Option<u64> {
        self.confined.load(Relaxed).then(|| self.hash.load(Relaxed))
    }
}

/// The prefix filter a [`PrefixFiltered`] source consults.
pub(crate) enum PrefixSource {
    /// A table, and whether its filter may be consulted only if it needs no file I/O
    /// (`ReadTier::BlockCacheOnly`).
    Table(Arc<Table>, bool),
    Mem(Arc<MemTable>),
}

impl PrefixSource {
    fn may_contain(&self, ex: &PrefixExtractor, hash: u64) -> bool {
        match self {
            PrefixSource::Table(t, cache_only) => t.may_contain_prefix_in(ex, hash, *cache_only),
            PrefixSource::Mem(m) => m.may_contain_prefix(ex, hash),
        }
    }
}

/// A source of a confined cursor that turns empty for a seek into a prefix its filter excludes.
pub(crate) struct PrefixFiltered<I> {
    inner: I,
    source: PrefixSource,
    scope: Arc<PrefixScope>,
    /// Hashes of the prefixes of the source's smallest and largest user keys, when known (a table's, from
    /// its file metadata): a level iterator stepping into the next (previous) file of a level while the
    /// cursor is confined skips the file when its first (last) key is of another prefix, since every key
    /// of the file then lies past the prefix's range.
    ends: Option<(Option<u64>, Option<u64>)>,
    /// The last positioning call was into a prefix the source cannot hold.
    excluded: bool,
}

impl<I: InternalIterator> PrefixFiltered<I> {
    pub(crate) fn new(inner: I, source: PrefixSource, scope: Arc<PrefixScope>) -> PrefixFiltered<I> {
        PrefixFiltered { inner, source, scope, ends: None, excluded: false }
    }

    /// With the user-key range of the source (a table file's smallest and largest keys).
    pub(crate) fn with_range(mut self, smallest: &[u8], largest: &[u8]) -> PrefixFiltered<I> {
        let ex = self.scope.extractor;
        self.ends = Some((ex.prefix(smallest).map(key_hash), ex.prefix(largest).map(key_hash)));
        self
    }

    /// Whether a `seek_to_first` (`first`) or `seek_to_last` of the source, while the cursor is confined,
    /// reaches keys of another prefix only.
    fn end_outside(&mut self, first: bool) -> bool {
        self.excluded = match (self.scope.confined_hash(), self.ends) {
            (Some(h), Some((lo, hi))) => (if first { lo } else { hi }) != Some(h),
            _ => false,
        };
        self.excluded
    }

    /// Decides whether a seek to `target` (an internal key) is into an excluded prefix.
    fn excludes(&mut self, target: &[u8]) -> bool {
        self.excluded = match self.scope.confined_hash() {
            // The target's prefix is the scope's (see the module comment); checked in debug builds.
            Some(h) => {
                debug_assert!(
                    target.len() < ikey::TRAILER_LEN
                        || self.scope.extractor.prefix(ikey::user_key(target)).map(key_hash) == Some(h),
                    "a confined cursor sought outside its prefix"
                );
                !self.source.may_contain(&self.scope.extractor, h)
            }
            None => false,
        };
        self.excluded
    }
}

impl<I: InternalIterator> InternalIterator for PrefixFiltered<I> {
    fn valid(&self) -> bool {
        !self.excluded && self.inner.valid()
    }

    fn seek_to_first(&mut self) {
        if !self.end_outside(true) {
            self.inner.seek_to_first();
        }
    }

    fn seek_to_last(&mut self) {
        if !self.end_outside(false) {
            self.inner.seek_to_last();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        if !self.excludes(target) {
            self.inner.seek(target);
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        if !self.excludes(target) {
            self.inner.seek_for_prev(target);
        }
    }

    fn next(&mut self) {
        self.inner.next();
    }

    fn prev(&mut self) {
        self.inner.prev();
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }

    fn status(&self) -> Result<()> {
        if self.excluded {
            return Ok(());
        }
        self.inner.status()
    }

    fn location(&self) -> Option<(&Path, u64)> {
        self.inner.location()
    }
}
