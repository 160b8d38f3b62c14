//! Cheap answers about keys without reading data blocks: [`Db::key_may_exist`] (RocksDB's `KeyMayExist`),
//! [`Db::get_approximate_sizes`] (`GetApproximateSizes`) and [`Db::get_approximate_memtable_stats`]
//! (`GetApproximateMemTableStats`).

use super::Db;
use crate::lookup::GetState;
use crate::memtable::MemTable;
use crate::options::ReadOptions;
use crate::version::Version;
use shaledb_format::bloom;
use shaledb_format::edit::FileMeta;
use shaledb_format::ikey::{self, KIND_FOR_SEEK, MAX_SEQUENCE};
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::{Error, Result};
use std::ops::Range;
use std::sync::Arc;

/// What [`Db::get_approximate_sizes`] adds up: RocksDB's `SizeApproximationOptions`.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeApproximationOptions {
    /// Add the memtables' entries in the range (their keys and values, as
    /// [`Db::get_approximate_memtable_stats`] counts them). Default false, as in RocksDB.
    pub include_memtables: bool,
    /// Add the tables' bytes in the range, estimated from their index blocks. Default true, as in RocksDB.
    pub include_files: bool,
    /// When positive: if the tables that only partly overlap a range hold less than this fraction of the bytes
    /// of the tables wholly inside it, count half of their size instead of searching their indexes (RocksDB's
    /// `files_size_error_margin`; the error stays within that fraction). Default -1.0: always search.
    pub files_size_error_margin: f64,
}

impl Default for SizeApproximationOptions {
    fn default() -> Self {
        SizeApproximationOptions { include_memtables: false, include_files: true, files_size_error_margin: -1.0 }
    }
}

/// The internal key sorting before every version of `user_key`.
fn seek_key(user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + ikey::TRAILER_LEN);
    ikey::append_internal_key(&mut k, user_key, MAX_SEQUENCE, KIND_FOR_SEEK);
    k
}

/// Entries of `m` with user keys in `[start, limit)`, and their bytes (internal key plus value).
fn memtable_stats(m: &Arc<MemTable>, start: &[u8], limit: &[u8]) -> (u64, u64) {
    let mut it = m.iter();
    it.seek(&seek_key(start));
    let (mut count, mut bytes) = (0u64, 0u64);
    while it.valid() && ikey::user_key(it.key()) < limit {
        count += 1;
        bytes += (it.key().len() + it.value().len()) as u64;
        it.next();
    }
    (count, bytes)
}

impl Db {
    /// False only when `key` certainly does not exist (RocksDB's `KeyMayExist`); true means it may. Lighter than
    /// [`Db::get`]: no data block is read. See [`Db::key_may_exist_opt`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// assert!(db.key_may_exist("k"));
    /// db.delete("k")?;
    /// assert!(!db.key_may_exist("k")); // the memtable's deletion decides
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn key_may_exist(&self, key: impl AsRef<[u8]>) -> bool {
        self.key_may_exist_opt(&ReadOptions::default(), key).0
    }

    /// [`Db::key_may_exist`] as of `opts.snapshot` (the other read options do not apply: nothing is read from a
    /// data block), with the value when the memtables decide the key (RocksDB's `value_found`).
    ///
    /// Returns `(false, None)` when the key certainly does not exist: the memtables hold a deletion as its
    /// newest visible version, or they hold nothing of it and no table may: each table whose key range covers
    /// `key` has a bloom filter that rules it out. Returns `(true, Some(value))` when the memtables hold its value
    /// (merge operands over a value there are merged), and `(true, None)` otherwise: a table may hold it, merge
    /// operands in the memtables need older data, or a table could not be opened (an error here is never
    /// reported: the answer is only "may exist", and [`Db::get`] reports it).
    ///
    /// Tables are opened through the table cache when not yet open (a read of their footer, index and filter,
    /// never of a data block). RocksDB also answers from data blocks already in the block cache; ShaleDB reads
    /// only memtables and filters, so a key whose block is cached is still "may exist" without a value.
    ///
    /// ```
    /// use shaledb::ReadOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// let (may, value) = db.key_may_exist_opt(&ReadOptions::default(), "k");
    /// assert!(may);
    /// assert_eq!(value.as_deref(), Some(&b"v"[..])); // found in the memtable
    /// db.flush()?;
    /// assert_eq!(db.key_may_exist_opt(&ReadOptions::default(), "k"), (true, None)); // a table may hold it
    /// assert!(!db.key_may_exist("zzz")); // past every table's key range
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn key_may_exist_opt(&self, opts: &ReadOptions, key: impl AsRef<[u8]>) -> (bool, Option<Vec<u8>>) {
        let fam = self.inner.default.clone();
        self.key_may_exist_in(&fam, opts, key.as_ref())
    }

    /// [`Db::key_may_exist_opt`] in column family `cf`.
    pub fn key_may_exist_cf(
        &self,
        opts: &ReadOptions,
        cf: &super::ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> (bool, Option<Vec<u8>>) {
        self.key_may_exist_in(&cf.fam, opts, key.as_ref())
    }

    fn key_may_exist_in(&self, fam: &super::family::Family, opts: &ReadOptions, key: &[u8]) -> (bool, Option<Vec<u8>>) {
        let (sv, seq) = self.pin_view_of(fam, opts);
        let mut state = GetState::with_buffer(key, seq, fam.opts.merge_operator.as_ref(), Vec::new());
        state.cover_with(super::read::mem_range_cover(&sv, key, seq));
        let hash = bloom::key_hash(key);
        for m in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            if state.is_done() {
                break;
            }
            if m.may_contain(hash) {
                m.get(key, hash, seq, &mut state);
            }
        }
        if state.is_done() {
            let mut value = Vec::new();
            return match state.finish_into(&mut value) {
                Ok(true) => (true, Some(value)),
                Ok(false) => (false, None),
                // The merge operator rejected the operands, or there is none: `get` reports it.
                Err(_) => (true, None),
            };
        }
        if state.has_operands() {
            return (true, None);
        }
        (self.tables_may_contain(&sv.version, key, hash), None)
    }

    /// False when no table's key range covers `key` or every such table's filter rules it out.
    fn tables_may_contain(&self, v: &Version, key: &[u8], hash: u64) -> bool {
        let may = |f: &FileMeta| match self.inner.tables.get(f) {
            Ok(t) => t.may_contain(hash),
            // Unreadable: the key may be in it.
            Err(_) => true,
        };
        let covers = |f: &&Arc<FileMeta>| f.smallest_user_key() <= key && key <= f.largest_user_key();
        if v.files(0).iter().filter(covers).any(|f| may(f)) {
            return true;
        }
        (1..v.num_levels()).any(|level| v.file_for_key(level, key).is_some_and(|f| may(f)))
    }

    /// The approximate bytes the keys of each range `start..limit` (start inclusive, limit exclusive) take, in
    /// the tables and/or the memtables as `opts` says (RocksDB's `GetApproximateSizes`).
    ///
    /// Tables: a table wholly inside a range counts its file size; one that partly overlaps counts the span
    /// between the byte offsets its index block gives for `start` and `limit` (the data blocks where they would
    /// be; no data block is read), or, with `files_size_error_margin`, half its size. So the figure is
    /// proportional to the data in the range, to within about a data block per table at each end, and
    /// compressed blocks count at their stored size. Memtables (with `include_memtables`): the bytes of their
    /// entries in the range, every version and deletion included.
    ///
    /// Errors: `InvalidArgument` when neither `include_files` nor `include_memtables` is set or a range has
    /// `start > limit`; a table that cannot be opened is its I/O or corruption error.
    ///
    /// ```
    /// use shaledb::SizeApproximationOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// for i in 0..1000u32 {
    ///     db.put(format!("k{i:04}"), [7u8; 100])?;
    /// }
    /// db.flush()?;
    /// let sizes = db.get_approximate_sizes(&SizeApproximationOptions::default(), &["k0000".."k0500", "x".."y"])?;
    /// assert!(sizes[0] > 0);
    /// assert_eq!(sizes[1], 0); // no table holds keys there
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn get_approximate_sizes<K: AsRef<[u8]>>(
        &self,
        opts: &SizeApproximationOptions,
        ranges: &[Range<K>],
    ) -> Result<Vec<u64>> {
        let fam = self.inner.default.clone();
        self.approximate_sizes_in(&fam, opts, ranges)
    }

    /// [`Db::get_approximate_sizes`] in column family `cf`.
    pub fn get_approximate_sizes_cf<K: AsRef<[u8]>>(
        &self,
        cf: &super::ColumnFamily,
        opts: &SizeApproximationOptions,
        ranges: &[Range<K>],
    ) -> Result<Vec<u64>> {
        self.approximate_sizes_in(&cf.fam, opts, ranges)
    }

    fn approximate_sizes_in<K: AsRef<[u8]>>(
        &self,
        fam: &super::family::Family,
        opts: &SizeApproximationOptions,
        ranges: &[Range<K>],
    ) -> Result<Vec<u64>> {
        if !opts.include_files && !opts.include_memtables {
            return Err(Error::InvalidArgument(
                "get_approximate_sizes needs include_files or include_memtables (or both)".into(),
            ));
        }
        let sv = fam.sv.load();
        let mut sizes = Vec::with_capacity(ranges.len());
        for r in ranges {
            let (start, limit) = (r.start.as_ref(), r.end.as_ref());
            if start > limit {
                return Err(Error::InvalidArgument(format!(
                    "get_approximate_sizes: range start {:?} is after its limit {:?}",
                    start.escape_ascii().to_string(),
                    limit.escape_ascii().to_string()
                )));
            }
            let mut size = 0u64;
            if opts.include_files {
                size += self.files_size(&sv.version, start, limit, opts.files_size_error_margin)?;
            }
            if opts.include_memtables {
                for m in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
                    size += memtable_stats(m, start, limit).1;
                }
            }
            sizes.push(size);
        }
        Ok(sizes)
    }

    /// Bytes of the tables of `v` in `[start, limit)`.
    fn files_size(&self, v: &Version, start: &[u8], limit: &[u8], margin: f64) -> Result<u64> {
        let mut full = 0u64;
        let mut partial: Vec<&Arc<FileMeta>> = Vec::new();
        for f in v.levels.iter().flatten() {
            let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
            if hi < start || lo >= limit {
                continue;
            }
            if lo >= start && hi < limit {
                full += f.file_size;
            } else {
                partial.push(f);
            }
        }
        let partial_bytes: u64 = partial.iter().map(|f| f.file_size).sum();
        if margin > 0.0 && (partial_bytes as f64) < full as f64 * margin {
            return Ok(full + partial_bytes / 2);
        }
        let (start_key, limit_key) = (seek_key(start), seek_key(limit));
        for f in partial {
            let t = self.inner.tables.get(f)?;
            let from = if f.smallest_user_key() >= start { 0 } else { t.approximate_offset_of(&start_key) };
            let to = if f.largest_user_key() < limit { f.file_size } else { t.approximate_offset_of(&limit_key) };
            full += to.saturating_sub(from);
        }
        Ok(full)
    }

    /// How many entries the memtables (active and immutable) hold with keys in `range` (start inclusive, limit
    /// exclusive), and their bytes (internal keys and values): RocksDB's `GetApproximateMemTableStats`. Every
    /// version, deletion and merge operand counts. RocksDB estimates both from its skiplist's shape; ShaleDB
    /// counts them exactly, walking the entries in the range, so the cost grows with how many there are. An
    /// empty or inverted range is `(0, 0)`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// for k in ["a", "b", "c"] {
    ///     db.put(k, "value")?;
    /// }
    /// let (count, bytes) = db.get_approximate_memtable_stats("a".."c");
    /// assert_eq!(count, 2);
    /// assert!(bytes >= 2 * 5);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn get_approximate_memtable_stats<K: AsRef<[u8]>>(&self, range: Range<K>) -> (u64, u64) {
        memtable_stats_in(&self.inner.default, range)
    }

    /// [`Db::get_approximate_memtable_stats`] in column family `cf` (`(0, 0)` once it is dropped).
    pub fn get_approximate_memtable_stats_cf<K: AsRef<[u8]>>(
        &self,
        cf: &super::ColumnFamily,
        range: Range<K>,
    ) -> (u64, u64) {
        if cf.fam.dropped.load(std::sync::atomic::Ordering::Acquire) {
            return (0, 0);
        }
        memtable_stats_in(&cf.fam, range)
    }
}

/// The memtable counts of `fam` in `range`.
fn memtable_stats_in<K: AsRef<[u8]>>(fam: &super::family::Family, range: Range<K>) -> (u64, u64) {
    let (start, limit) = (range.start.as_ref(), range.end.as_ref());
    if start >= limit {
        return (0, 0);
    }
    let sv = fam.sv.load();
    std::iter::once(&sv.mem).chain(sv.imm.iter()).fold((0, 0), |(c, b), m| {
        let (mc, mb) = memtable_stats(m, start, limit);
        (c + mc, b + mb)
    })
}
