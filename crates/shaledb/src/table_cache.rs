//! Open tables, bounded by `max_open_files`, shared by readers without a global lock.
//!
//! Every table opened here is checked against the identity the MANIFEST expects before any read uses it: the
//! file number and database id in its properties (when present: older tables lack them), its size, its
//! smallest and largest key and its sequence range. A table copied over another, or from another database,
//! is `Corruption` naming the file, never missing keys.

use crate::filenames;
use crate::identity::{self, DbId};
use crate::range_del::Fragments;
use crate::Options;
use shaledb_format::cache::BlockCache;
use shaledb_format::edit::FileMeta;
use shaledb_format::table::{Table, TableReadOptions, TableStats};
use shaledb_vfs::{Error, Fs, ReadHints, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    tables: quick_cache::sync::Cache<u64, Arc<Table>>,
    /// The fragmented range tombstones of open tables that hold any (`FileMeta::num_range_deletions`).
    range_dels: quick_cache::sync::Cache<u64, Arc<Fragments>>,
    read_opts: TableReadOptions,
    /// How tables are opened: `direct` and `advise_random` from the options.
    hints: ReadHints,
    /// Compaction inputs are read with `O_DIRECT` (`use_direct_io_for_flush_and_compaction`).
    direct_compaction_reads: bool,
    db_id: DbId,
}

/// Checks that `t`, opened from `path`, is the table `meta` describes (see the module docs).
pub(crate) fn check_identity(t: &Arc<Table>, meta: &FileMeta, db_id: &DbId, path: &Path) -> Result<()> {
    let p = t.properties();
    let bad = |what: String| {
        Err(Error::corruption(path, 0, format!("{what}: not the table the MANIFEST names (a copied or swapped file?)")))
    };
    if let Some(n) = p.file_number {
        if n != meta.number {
            return bad(format!("the table was written as file {n:06}, the MANIFEST expects {:06}", meta.number));
        }
    }
    if let Some(id) = &p.db_id {
        if id != db_id {
            return bad(format!(
                "the table belongs to database {}, this is {}",
                identity::to_hex(id),
                identity::to_hex(db_id)
            ));
        }
    }
    if p.file_size != meta.file_size {
        return bad(format!("{} bytes, the MANIFEST records {}", p.file_size, meta.file_size));
    }
    // The key range and sequence range cover the range tombstones too (docs/format/manifest.md).
    let r = t.recorded_range()?;
    if r.num_range_deletions != meta.num_range_deletions {
        return bad(format!(
            "{} range tombstones, the MANIFEST records {}",
            r.num_range_deletions, meta.num_range_deletions
        ));
    }
    if p.num_entries != meta.num_entries || r.smallest_seq != meta.smallest_seq || r.largest_seq != meta.largest_seq {
        return bad(format!(
            "{} entries with sequences {}..={}, the MANIFEST records {} with {}..={}",
            p.num_entries, r.smallest_seq, r.largest_seq, meta.num_entries, meta.smallest_seq, meta.largest_seq
        ));
    }
    if r.smallest != meta.smallest || r.largest != meta.largest {
        return bad("its smallest or largest key differs from the MANIFEST's".into());
    }
    Ok(())
}

impl TableCache {
    /// A cache for the tables of `dir`, sized and opening files as `opts` say (`max_open_files`,
    /// `cache_index_and_filter_blocks`, `use_direct_reads`, `advise_random_on_open`).
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn Fs>,
        opts: &Options,
        block_cache: Option<Arc<BlockCache>>,
        stats: Arc<TableStats>,
        db_id: DbId,
    ) -> TableCache {
        let max_open_files = opts.max_open_files;
        let cache_index_and_filter = opts.cache_index_and_filter_blocks;
        let hints =
            ReadHints { direct: opts.use_direct_reads, sequential: false, advise_random: opts.advise_random_on_open };
        // RocksDB keeps a few files' descriptors for WAL/MANIFEST out of the budget.
        let cap = if max_open_files < 0 { 1 << 20 } else { (max_open_files as usize).saturating_sub(10).max(6) };
        TableCache {
            dir,
            fs,
            tables: quick_cache::sync::Cache::new(cap),
            range_dels: quick_cache::sync::Cache::new(cap),
            read_opts: TableReadOptions {
                cache: block_cache,
                cache_index_and_filter,
                stats: Some(stats),
                verify_checksums: true,
            },
            hints,
            direct_compaction_reads: opts.use_direct_io_for_flush_and_compaction,
            db_id,
        }
    }

    /// Bytes the open tables hold outside the block cache (their pinned index and filter blocks).
    pub(crate) fn readers_memory(&self) -> u64 {
        self.tables.iter().map(|(_, t)| t.pinned_memory() as u64).sum()
    }

    /// The open table for `meta`, opening it on first use.
    pub(crate) fn get(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        self.get_in(meta, false)
    }

    /// [`TableCache::get`]; with `cache_only` (`ReadTier::BlockCacheOnly`) a table not open is
    /// [`Error::Incomplete`] and nothing is read.
    pub(crate) fn get_in(&self, meta: &FileMeta, cache_only: bool) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.get(&meta.number) {
            return Ok(t);
        }
        if cache_only {
            return Err(Self::not_open(meta.number, "table"));
        }
        let path = filenames::table(&self.dir, meta.number);
        let t = self.tables.get_or_insert_with(&meta.number, || {
            let file = self.fs.open(&path, self.hints)?;
            let t = Table::open(file, &self.read_opts)?;
            check_identity(&t, meta, &self.db_id, &path)?;
            Ok::<_, Error>(t)
        })?;
        Ok(t)
    }

    /// Opens `meta` outside the cache, for a one-pass sequential read (`for_compaction`: a compaction's
    /// input; else verify). The cache's table is reused when it reads as this pass should: a compaction
    /// input with `use_direct_io_for_flush_and_compaction` is opened anew with `O_DIRECT` unless the cache's
    /// handles are direct already (`use_direct_reads`), as RocksDB opens compaction inputs.
    pub(crate) fn open_uncached(&self, meta: &FileMeta, for_compaction: bool) -> Result<Arc<Table>> {
        let direct = self.hints.direct || (for_compaction && self.direct_compaction_reads);
        if direct == self.hints.direct {
            if let Some(t) = self.tables.get(&meta.number) {
                return Ok(t);
            }
        }
        let path = filenames::table(&self.dir, meta.number);
        let file = self.fs.open(&path, ReadHints { direct, sequential: true, advise_random: false })?;
        let t = Table::open(file, &self.read_opts)?;
        check_identity(&t, meta, &self.db_id, &path)?;
        Ok(t)
    }

    /// The fragmented range tombstones of the table `meta` describes (`None` when it holds none), read from
    /// the file once and kept while the table is open.
    pub(crate) fn range_dels(&self, meta: &FileMeta) -> Result<Option<Arc<Fragments>>> {
        self.range_dels_in(meta, false)
    }

    /// [`TableCache::range_dels`]; with `cache_only`, tombstones not loaded yet are [`Error::Incomplete`].
    pub(crate) fn range_dels_in(&self, meta: &FileMeta, cache_only: bool) -> Result<Option<Arc<Fragments>>> {
        if meta.num_range_deletions == 0 {
            return Ok(None);
        }
        if let Some(f) = self.range_dels.get(&meta.number) {
            return Ok(Some(f));
        }
        if cache_only {
            return Err(Self::not_open(meta.number, "range tombstones of table"));
        }
        let f = self.range_dels.get_or_insert_with(&meta.number, || {
            let t = self.get(meta)?;
            Ok::<_, Error>(Arc::new(Fragments::from_stored(&t.range_tombstones()?)))
        })?;
        Ok(Some(f))
    }

    fn not_open(number: u64, what: &str) -> Error {
        Error::Incomplete(format!("{what} {number:06} not in the table cache"))
    }

    /// Forgets a deleted table.
    pub(crate) fn evict(&self, number: u64) {
        self.tables.remove(&number);
        self.range_dels.remove(&number);
    }
}
