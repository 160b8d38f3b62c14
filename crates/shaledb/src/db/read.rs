//! The read path: `get`, iterators and cursors over a pinned view, snapshots. A read takes no lock: it loads
//! the published [`SuperVersion`] and the visible sequence number (see `pin_view` for their order).

use super::family::Family;
use super::{Db, DbInner, SuperVersion};
use crate::iter::{
    CoverSkip, Cursor, Iter, KeyRange, LevelIterator, MergingIterator, RangeDelFilter, RefreshFn, SourceSeqs,
};
use crate::lookup::GetState;
use crate::options::{ReadOptions, ReadTier};
use crate::prefix::{table_may_contain, PrefixFiltered, PrefixScope, PrefixSource};
use crate::range_del::RangeDelView;
use crate::snapshot::Snapshot;
use crate::stats::Counters;
use crate::version::Version;
use shaledb_format::bloom;
use shaledb_format::edit::FileMeta;
use shaledb_format::ikey::{self, KIND_FOR_SEEK};
use shaledb_format::iter::InternalIterator;
use shaledb_format::table::{Readahead, Table, TableIterOptions};
use shaledb_vfs::{Error, Result};
use std::any::Any;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// An iterator that is exhausted with an error (a table could not be opened).
struct ErrorIter(Error);

impl InternalIterator for ErrorIter {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _: &[u8]) {}
    fn seek_for_prev(&mut self, _: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        Err(self.0.clone())
    }
}

impl Db {
    /// The value of `key`, if any.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// assert_eq!(db.get("k")?, Some(b"v".to_vec()));
    /// assert_eq!(db.get(b"absent")?, None);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// [`Db::get`] with read options (a snapshot, checksum and cache choices).
    ///
    /// ```
    /// use shaledb::ReadOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "old")?;
    /// let before = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    /// db.put("k", "new")?;
    /// assert_eq!(db.get_opt(&before, "k")?, Some(b"old".to_vec()));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn get_opt(&self, opts: &ReadOptions, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(opts, key, &mut out)?.then_some(out))
    }

    /// Looks `key` up and writes its value into `out` (cleared first), reusing its allocation.
    /// Returns whether the key was found.
    ///
    /// ```
    /// use shaledb::ReadOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// let mut buf = Vec::new();
    /// assert!(db.get_into(&ReadOptions::default(), "k", &mut buf)?);
    /// assert_eq!(buf, b"v");
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn get_into(&self, opts: &ReadOptions, key: impl AsRef<[u8]>, out: &mut Vec<u8>) -> Result<bool> {
        self.get_into_family(&self.inner.default, opts, key.as_ref(), out)
    }

    /// [`Db::get_into`] in family `fam`.
    pub(crate) fn get_into_family(
        &self,
        fam: &Family,
        opts: &ReadOptions,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        let inner = &self.inner;
        // The super version first, then the sequence (see `pin_view` for why this order).
        let (sv, seq) = pin_view(inner, fam, opts);
        Counters::add(&inner.counters.gets, 1);
        let mut state = GetState::with_buffer(key, seq, fam.opts.merge_operator.as_ref(), std::mem::take(out))
            .with_blobs(&inner.blobs)
            .cache_only(opts.read_tier == ReadTier::BlockCacheOnly);
        let hash = bloom::key_hash(key);
        // Range tombstones first: the newest one covering the key deletes every older entry, wherever it is.
        state.cover_with(mem_range_cover(&sv, key, seq));
        if sv.mem.may_contain(hash) {
            sv.mem.get(key, hash, seq, &mut state);
        }
        if !state.is_done() {
            for m in &sv.imm {
                if !m.may_contain(hash) {
                    continue;
                }
                m.get(key, hash, seq, &mut state);
                if state.is_done() {
                    break;
                }
            }
        }
        if state.is_done() {
            Counters::add(&inner.counters.memtable_hits, 1);
        } else {
            self.get_from_tables(fam, &sv.version, opts, key, hash, seq, &mut state)?;
        }
        let found = state.finish_into(out)?;
        let found = self.ttl_read(opts, key, found, out)?;
        if found {
            Counters::add(&inner.counters.gets_found, 1);
        }
        Ok(found)
    }

    /// TTL mode: turns a point lookup's result (`found`, the stored value in `out`) into what the user sees.
    pub(crate) fn ttl_read(
        &self,
        opts: &crate::ReadOptions,
        key: &[u8],
        found: bool,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        match &self.inner.opts.ttl {
            Some(ttl) if found => crate::ttl::strip(ttl, opts.hide_expired, ttl.now(), key, out),
            _ => Ok(found),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn get_from_tables(
        &self,
        fam: &Family,
        v: &Version,
        opts: &ReadOptions,
        key: &[u8],
        hash: u64,
        seq: u64,
        state: &mut GetState,
    ) -> Result<()> {
        let inner = &self.inner;
        let mut lookup = Vec::with_capacity(key.len() + ikey::TRAILER_LEN);
        ikey::append_internal_key(&mut lookup, key, seq, KIND_FOR_SEEK);
        // ReadTier::BlockCacheOnly: every step below that would read a file returns Incomplete instead.
        let cache_only = opts.read_tier == ReadTier::BlockCacheOnly;
        let topts = TableIterOptions {
            verify_checksums: opts.verify_checksums,
            fill_cache: opts.fill_cache,
            readahead: Readahead::Off,
            block_cache_only: cache_only,
        };
        let mut search = |f: &FileMeta| -> Result<bool> {
            // The file's range tombstones apply to its own older entries and to everything below it, whatever
            // its filter says about the key.
            if let Some(rd) = inner.tables.range_dels_in(f, cache_only)? {
                state.cover_with(rd.covering_seq(key, seq));
            }
            let table = inner.tables.get_in(f, cache_only)?;
            Counters::add(&inner.counters.bloom_checked, 1);
            if !table_may_contain(&fam.opts, &table, key, hash, cache_only) {
                Counters::add(&inner.counters.bloom_useful, 1);
                return Ok(false);
            }
            let mut it = table.iter_with(&topts);
            it.seek(&lookup);
            while it.valid() {
                let k = it.key();
                if ikey::user_key(k) != key {
                    break;
                }
                if state.feed_from(k, it.value(), it.location()) {
                    return Ok(true);
                }
                it.next();
            }
            it.status()?;
            Ok(state.is_done())
        };
        for f in v.files(0) {
            if f.smallest_user_key() <= key && key <= f.largest_user_key() && search(f)? {
                return Ok(());
            }
        }
        for level in 1..v.num_levels() {
            if let Some(f) = v.file_for_key(level, key) {
                if search(f)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Every key and value, in key order, from a consistent view of the latest state: a Rust
    /// [`DoubleEndedIterator`] of `Result<(key, value)>` (`.rev()` walks from the last key). An error (I/O,
    /// corruption) is yielded once, then the iterator ends.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("b", "2")?;
    /// db.put("a", "1")?;
    /// let all = db.iter().collect::<Result<Vec<_>, _>>()?;
    /// assert_eq!(all, [(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
    /// let last = db.iter().next_back().transpose()?;
    /// assert_eq!(last, Some((b"b".to_vec(), b"2".to_vec())));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn iter(&self) -> Iter {
        self.iter_opt(&ReadOptions::default())
    }

    /// [`Db::iter`] with read options: a snapshot, the bounds `iterate_lower_bound`/`iterate_upper_bound`,
    /// checksum, cache and readahead choices.
    ///
    /// ```
    /// use shaledb::ReadOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("a", "1")?;
    /// let snapshot = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    /// db.put("b", "2")?;
    /// assert_eq!(db.iter_opt(&snapshot).count(), 1); // "b" came after the snapshot
    /// assert_eq!(db.iter().count(), 2);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn iter_opt(&self, opts: &ReadOptions) -> Iter {
        Iter::new(self.cursor_opt(opts))
    }

    /// The entries with keys in `range`, in key order (`.rev()` for descending), from a consistent view.
    /// `range` is any range expression over byte strings ([`KeyRange`]): `b"a"..b"z"`, `"a"..="m"`,
    /// `key.to_vec()..`, `..end`, `(Bound::Excluded(k), Bound::Unbounded)`. An empty or inverted range yields
    /// nothing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// for k in ["apple", "banana", "cherry", "date"] {
    ///     db.put(k, "")?;
    /// }
    /// for entry in db.range(b"b"..b"d") {
    ///     let (key, _value) = entry?;
    ///     println!("{}", String::from_utf8_lossy(&key)); // banana, cherry
    /// }
    /// let backwards: Vec<_> = db.range("banana"..="cherry").rev().collect::<Result<_, _>>()?;
    /// assert_eq!(backwards[0].0, b"cherry");
    /// assert_eq!(db.range(String::from("cherry")..).count(), 2);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn range(&self, range: impl KeyRange) -> Iter {
        self.range_opt(&ReadOptions::default(), range)
    }

    /// [`Db::range`] with read options. Bounds set in `opts` still apply: the entries are those in both `range`
    /// and `opts`' bounds.
    ///
    /// ```
    /// use shaledb::ReadOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("a", "1")?;
    /// let snapshot = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    /// db.put("b", "2")?;
    /// assert_eq!(db.range_opt(&snapshot, "a"..="z").count(), 1);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn range_opt(&self, opts: &ReadOptions, range: impl KeyRange) -> Iter {
        let mut lower = opts.iterate_lower_bound.clone();
        let mut upper = opts.iterate_upper_bound.clone();
        crate::iter::narrow_bounds(&range, &mut lower, &mut upper);
        Iter::new(self.cursor_with_bounds(opts, lower, upper))
    }

    /// The entries whose keys start with `prefix`, in key order (`.rev()` for descending), from a consistent
    /// view. An empty prefix yields every entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("user:1", "ada")?;
    /// db.put("user:2", "grace")?;
    /// db.put("users", "not a user record")?;
    /// let names = db.prefix("user:").map(|e| e.map(|(_, v)| v)).collect::<Result<Vec<_>, _>>()?;
    /// assert_eq!(names, [b"ada".to_vec(), b"grace".to_vec()]);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        self.prefix_opt(&ReadOptions::default(), prefix)
    }

    /// [`Db::prefix`] with read options (bounds set in `opts` still apply, as for [`Db::range_opt`]).
    pub fn prefix_opt(&self, opts: &ReadOptions, prefix: impl AsRef<[u8]>) -> Iter {
        let prefix = prefix.as_ref();
        match crate::iter::prefix_upper_bound(prefix) {
            Some(upper) => self.range_opt(opts, (Bound::Included(prefix), Bound::Excluded(upper.as_slice()))),
            None => self.range_opt(opts, prefix..),
        }
    }

    /// A [`Cursor`] (RocksDB's `Iterator`: `seek`, `seek_for_prev`, `next`, `prev` on one view) over the latest
    /// state. Unpositioned: call a `seek*` first.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k1", "v1")?;
    /// db.put("k3", "v3")?;
    /// let mut cursor = db.cursor();
    /// cursor.seek("k2");
    /// assert!(cursor.valid());
    /// assert_eq!((cursor.key(), cursor.value()), (&b"k3"[..], &b"v3"[..]));
    /// cursor.prev();
    /// assert_eq!(cursor.key(), b"k1");
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn cursor(&self) -> Cursor {
        self.cursor_opt(&ReadOptions::default())
    }

    /// [`Db::cursor`] with read options (a snapshot, bounds, checksum, cache and readahead choices).
    ///
    /// ```
    /// use shaledb::ReadOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// for k in ["a", "b", "c"] {
    ///     db.put(k, "")?;
    /// }
    /// let opts = ReadOptions { iterate_upper_bound: Some(b"c".to_vec()), ..ReadOptions::default() };
    /// let mut cursor = db.cursor_opt(&opts);
    /// cursor.seek_to_last();
    /// assert_eq!(cursor.key(), b"b");
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn cursor_opt(&self, opts: &ReadOptions) -> Cursor {
        self.cursor_with_bounds(opts, opts.iterate_lower_bound.clone(), opts.iterate_upper_bound.clone())
    }

    /// A cursor reading as `opts` says within `lower` (inclusive) and `upper` (exclusive), in place of `opts`'
    /// own bounds. Without a snapshot, on a read-write database, it can be refreshed ([`Cursor::refresh`]).
    fn cursor_with_bounds(&self, opts: &ReadOptions, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> Cursor {
        self.cursor_in_family(&self.inner.default, opts, lower, upper)
    }

    /// [`Db::cursor_opt`] in family `fam`, within `lower` and `upper` in place of `opts`' own bounds.
    pub(crate) fn cursor_in_family(
        &self,
        fam: &Arc<Family>,
        opts: &ReadOptions,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
    ) -> Cursor {
        let inner = &self.inner;
        // ReadOptions::prefix_same_as_start: sources whose prefix filter excludes a sought prefix are skipped.
        let scope = match fam.opts.prefix_extractor {
            Some(ex) if opts.prefix_same_as_start && !opts.total_order_seek => Some(PrefixScope::new(ex)),
            _ => None,
        };
        let (it, seq, pin) = internal_view(inner, fam, opts, lower.as_deref(), upper.as_deref(), &scope);
        let refresh: Option<RefreshFn> = (opts.snapshot.is_none() && !inner.read_only).then(|| {
            let weak = Arc::downgrade(inner);
            let fam = fam.clone();
            let (opts, lower, upper, scope) = (opts.clone(), lower.clone(), upper.clone(), scope.clone());
            Box::new(move || {
                let inner = weak.upgrade().ok_or(Error::Closed)?;
                Ok(internal_view(&inner, &fam, &opts, lower.as_deref(), upper.as_deref(), &scope))
            }) as RefreshFn
        });
        let mut cursor = Cursor::new(it, seq, fam.opts.merge_operator.clone(), lower, upper, pin)
            .with_refresh(refresh)
            .with_blobs(inner.blobs.clone(), opts.read_tier == ReadTier::BlockCacheOnly);
        if let Some(scope) = scope {
            cursor.confine_to_prefix(scope);
        }
        match &inner.opts.ttl {
            Some(ttl) => cursor.with_ttl(ttl.clone(), opts.hide_expired),
            None => cursor,
        }
    }

    /// Pins what a read searches and the sequence it reads at: the super version FIRST, then the sequence
    /// (RocksDB's order). Why reads never go back in time (docs/durability.md D8):
    ///
    /// - Everything the pinned super version holds is at or below the sequence read after it. Its immutable
    ///   memtables were switched only after every group inserted into them had published (`switch_memtable`
    ///   waits for that), and its tables were written from such memtables or from other tables; so every
    ///   entry in them was visible before the pin, hence `<= seq`. Entries of the active memtable above `seq`
    ///   are skipped by the sequence filter.
    /// - A version the read needs is never missing from what it pinned. Flush and compaction drop an entry
    ///   only when a newer one of the same key, also among their inputs (so `<= seq` by the point above),
    ///   shadows it with no snapshot in between; they never change a table in place, and a table stays on
    ///   disk while any pinned version names it. With the opposite order (sequence, then super version) a
    ///   flush could collapse the entry at `seq` into one written after it, in between: the stale read of
    ///   issue 9.
    /// - A write that completed before the read began is in the pinned super version: its memtable was
    ///   published (under the state lock) before the write was assigned to it, and a memtable leaves the
    ///   super version only once its table is in the version published with that change.
    /// - A write completing between the pin and the sequence load may be at or below `seq` yet absent (it
    ///   went into a memtable switched in after the pin). Such a write is concurrent with the read, and the
    ///   view is still a prefix of the sequence: the pinned memtables hold every write before the switch.
    ///
    /// With a snapshot the sequence is the snapshot's; its registration made compaction keep what it sees.
    pub(super) fn pin_view_of(&self, fam: &Family, opts: &ReadOptions) -> (arc_swap::Guard<Arc<SuperVersion>>, u64) {
        pin_view(&self.inner, fam, opts)
    }

    /// A consistent read view, released when dropped: pass it in [`ReadOptions::snapshot`] to read the database
    /// as it was when the snapshot was taken.
    ///
    /// ```
    /// use shaledb::ReadOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "1")?;
    /// let snap = db.snapshot();
    /// db.put("k", "2")?;
    /// db.delete("k")?;
    /// let then = ReadOptions { snapshot: Some(snap), ..ReadOptions::default() };
    /// assert_eq!(db.get_opt(&then, "k")?, Some(b"1".to_vec()));
    /// assert_eq!(db.get("k")?, None);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    ///
    /// The sequence is read under the snapshot list's lock, so registration and sequence are one step. Flush
    /// and compaction fix their inputs first and read the snapshot list after (under the state lock): a job
    /// that read the list before this snapshot was registered has inputs that were all visible then, hence at
    /// or below this snapshot's sequence, so every entry it drops is shadowed by one this snapshot sees.
    pub fn snapshot(&self) -> Snapshot {
        let visible = &self.inner.visible_seq;
        self.inner.snapshots.acquire_with(|| visible.load(Ordering::SeqCst))
    }
}

/// [`Db::pin_view`] on the shared state (a refreshed cursor holds only that).
fn pin_view(inner: &DbInner, fam: &Family, opts: &ReadOptions) -> (arc_swap::Guard<Arc<SuperVersion>>, u64) {
    let sv = fam.sv.load();
    read_hook::between_loads();
    let seq = match &opts.snapshot {
        Some(s) => s.sequence(),
        None => inner.visible_seq.load(Ordering::SeqCst),
    };
    (sv, seq)
}

/// The merged internal iterator of a cursor, its sequence and what it pins: the memtables, the L0 tables and
/// one level iterator per deeper level of a freshly pinned view. Tables wholly outside `[lower, upper)` are
/// left out (the cursor would skip every key they hold), so they are neither opened nor read; a level
/// iterator then never steps into a file past the bounds (RocksDB's `LevelIterator` checks the next file's
/// smallest key against `iterate_upper_bound` likewise). With a prefix `scope` (a cursor confined to a
/// prefix), each memtable and table is wrapped in [`PrefixFiltered`], sharing the cursor's scope. With range
/// tombstones the merge is wrapped in [`RangeDelFilter`] and, outside a prefix scope, seeks its children past
/// covered stretches ([`CoverSkip`], given each child's sequence bound).
fn internal_view(
    inner: &DbInner,
    fam: &Family,
    opts: &ReadOptions,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    scope: &Option<Arc<PrefixScope>>,
) -> (Box<dyn InternalIterator>, u64, Box<dyn Any + Send + Sync>) {
    // No snapshot is registered for an iterator without one: it pins its SuperVersion, whose memtables and
    // table files hold every version visible at `seq` whatever compaction writes meanwhile. That keeps
    // iterator creation free of locks.
    let (sv, seq) = pin_view(inner, fam, opts);
    let sv = arc_swap::Guard::into_inner(sv);
    let snap = opts.snapshot.clone();
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::with_capacity(2 + sv.imm.len() + 8);
    // What bounds each child's sequence numbers, in the children's order (for `CoverSkip`).
    let mut seqs: Vec<SourceSeqs> = Vec::with_capacity(children.capacity());
    let mut range_dels = RangeDelView::default();
    for m in std::iter::once(&sv.mem).chain(&sv.imm) {
        if let Some(f) = m.range_tombstones() {
            range_dels.add(f);
        }
    }
    for m in std::iter::once(&sv.mem).chain(&sv.imm) {
        // Loaded after the read's sequence: it bounds every entry visible at it (`MemTable::largest_seq`).
        seqs.push(SourceSeqs::Max(m.largest_seq()));
        match scope {
            Some(scope) => children.push(Box::new(PrefixFiltered::new(
                m.iter(),
                PrefixSource::Mem(Arc::clone(m)),
                Arc::clone(scope),
            ))),
            None => children.push(Box::new(m.iter())),
        }
    }
    let readahead = if opts.readahead_size > 0 {
        Readahead::Fixed(opts.readahead_size)
    } else if inner.opts.max_auto_readahead_size > 0 {
        // RocksDB's initial_auto_readahead_size: 8 KiB.
        let max = inner.opts.max_auto_readahead_size;
        Readahead::Auto { initial: (8 << 10).min(max), max }
    } else {
        Readahead::Off
    };
    // ReadTier::BlockCacheOnly: a table not open, tombstones not loaded or a block not cached make the
    // cursor invalid with an Incomplete status (through ErrorIter or the table iterator), never a skipped key.
    let cache_only = opts.read_tier == ReadTier::BlockCacheOnly;
    let topts = TableIterOptions {
        verify_checksums: opts.verify_checksums,
        fill_cache: opts.fill_cache,
        readahead,
        block_cache_only: cache_only,
    };
    let table_iter =
        move |t: Arc<Table>, f: &FileMeta, scope: &Option<Arc<PrefixScope>>| -> Box<dyn InternalIterator> {
            let it = t.iter_with(&topts);
            match scope {
                Some(scope) => Box::new(
                    PrefixFiltered::new(it, PrefixSource::Table(t, cache_only), Arc::clone(scope))
                        .with_range(f.smallest_user_key(), f.largest_user_key()),
                ),
                None => Box::new(it),
            }
        };
    let in_bounds = |f: &&Arc<FileMeta>| file_in_bounds(f, lower, upper);
    // The range tombstones of every table in the view (only files that hold some are opened for them).
    for f in (0..sv.version.num_levels()).flat_map(|l| sv.version.files(l)).filter(in_bounds) {
        match inner.tables.range_dels_in(f, cache_only) {
            Ok(Some(rd)) => range_dels.add(rd),
            Ok(None) => {}
            Err(e) => {
                children.push(Box::new(ErrorIter(e)));
                seqs.push(SourceSeqs::Max(u64::MAX));
            }
        }
    }
    for f in sv.version.files(0).iter().filter(in_bounds) {
        match inner.tables.get_in(f, cache_only) {
            Ok(t) => children.push(table_iter(t, f, scope)),
            Err(e) => children.push(Box::new(ErrorIter(e))),
        }
        seqs.push(SourceSeqs::Max(f.largest_seq));
    }
    for level in 1..sv.version.num_levels() {
        // Sorted and disjoint: the files within the bounds are one run.
        let files: Vec<Arc<FileMeta>> = sv.version.files(level).iter().filter(in_bounds).cloned().collect();
        if files.is_empty() {
            continue;
        }
        seqs.push(SourceSeqs::Files(files.clone()));
        let tables = inner.tables.clone();
        let scope = scope.clone();
        let open = Arc::new(move |f: &FileMeta| -> Result<Box<dyn InternalIterator>> {
            Ok(table_iter(tables.get_in(f, cache_only)?, f, &scope))
        });
        children.push(Box::new(LevelIterator::new(files, open)));
    }
    debug_assert_eq!(seqs.len(), children.len());
    let merged = MergingIterator::new(children);
    let it: Box<dyn InternalIterator> = if range_dels.is_empty() {
        Box::new(merged)
    } else {
        // Seeks past covered stretches, except in a prefix-confined cursor: its sources take seeks only
        // within the prefix, and its scans are short.
        let skip = match scope {
            None => CoverSkip::new(range_dels.clone(), seq, seqs),
            Some(_) => None,
        };
        Box::new(RangeDelFilter::new(merged.with_cover_skip(skip), range_dels, seq))
    };
    (it, seq, Box::new((sv, snap)))
}

/// The sequence of the newest range tombstone of `sv`'s memtables covering `key` visible at `seq` (0: none).
pub(crate) fn mem_range_cover(sv: &SuperVersion, key: &[u8], seq: u64) -> u64 {
    std::iter::once(&sv.mem)
        .chain(&sv.imm)
        .filter_map(|m| m.range_tombstones())
        .map(|f| f.covering_seq(key, seq))
        .max()
        .unwrap_or(0)
}

/// False when every key of `f` is outside `[lower, upper)`.
pub(crate) fn file_in_bounds(f: &FileMeta, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
    !(lower.is_some_and(|l| f.largest_user_key() < l) || upper.is_some_and(|u| f.smallest_user_key() >= u))
}

/// A test seam: a unit test runs a closure of its own thread between the two loads of `pin_view`, where a
/// preempted reader would let flushes and compactions run. Compiled out of every non-test build.
mod read_hook {
    #[cfg(test)]
    type Hook = Box<dyn FnOnce()>;

    #[cfg(test)]
    thread_local! {
        pub(super) static BETWEEN_LOADS: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
    }

    /// Runs (once) the closure the current test thread set.
    #[cfg(test)]
    pub(super) fn between_loads() {
        if let Some(f) = BETWEEN_LOADS.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    #[cfg(not(test))]
    #[inline(always)]
    pub(super) fn between_loads() {}
}

#[cfg(test)]
mod tests {
    use super::read_hook::BETWEEN_LOADS;
    use super::*;
    use crate::options::Options;
    use shaledb_vfs::MemFs;

    /// A put and a flush that complete between the two loads of a read, as when the reader is preempted there.
    fn write_and_flush_between_the_loads(db: &Arc<Db>, value: &'static [u8]) {
        let d = db.clone();
        BETWEEN_LOADS.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                d.put(b"k", value).unwrap();
                // The flush writes one table holding only this newest version of k: the one before it in the
                // memtable is collapsed (no snapshot between).
                d.flush().unwrap();
            }))
        });
    }

    /// Issue 9, deterministically: with the sequence read before the super version, a flush in between
    /// collapsed the version at the read's sequence into a newer one, and `get` returned `None` for a key
    /// never deleted. Pinned first, the read finds v1 or v2 (the put is concurrent with it), never nothing.
    #[test]
    fn flush_between_the_loads_of_a_read_loses_nothing() {
        let fs = MemFs::new();
        let db = Arc::new(Db::open("/db", Options { fs: Arc::new(fs), ..Options::default() }).unwrap());
        db.put(b"k", b"v1").unwrap();
        write_and_flush_between_the_loads(&db, b"v2");
        let got = db.get(b"k").unwrap();
        assert!(got.as_deref() == Some(b"v1") || got.as_deref() == Some(b"v2"), "get returned {got:?}");
        BETWEEN_LOADS.with(|h| assert!(h.borrow().is_none(), "the hook did not run"));

        // The iterator: the unfixed order read v2 here, older than v3, which had been acknowledged.
        db.put(b"k", b"v3").unwrap();
        write_and_flush_between_the_loads(&db, b"v4");
        let mut it = db.cursor();
        it.seek(b"k");
        assert!(it.valid(), "iterator lost k: {:?}", it.status());
        assert!(it.value() == b"v3" || it.value() == b"v4", "iterator read {:?}", it.value());
        drop(it);
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v4"[..]));
        let db = Arc::try_unwrap(db).unwrap();
        db.close().unwrap();
    }
}
