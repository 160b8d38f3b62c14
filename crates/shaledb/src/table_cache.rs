//! Open tables, bounded by `max_open_files`, shared by readers without a global lock.

use crate::filenames;
use shaledb_format::cache::BlockCache;
use shaledb_format::edit::FileMeta;
use shaledb_format::table::{Table, TableReadOptions, TableStats};
use shaledb_vfs::{Fs, ReadHints, Result};
use std::path::PathBuf;
use std::sync::Arc;

pub(crate) struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    tables: quick_cache::sync::Cache<u64, Arc<Table>>,
    read_opts: TableReadOptions,
}

impl TableCache {
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn Fs>,
        max_open_files: i32,
        block_cache: Option<Arc<BlockCache>>,
        cache_index_and_filter: bool,
        stats: Arc<TableStats>,
    ) -> TableCache {
        // RocksDB keeps a few files' descriptors for WAL/MANIFEST out of the budget.
        let cap = if max_open_files < 0 { 1 << 20 } else { (max_open_files as usize).saturating_sub(10).max(6) };
        TableCache {
            dir,
            fs,
            tables: quick_cache::sync::Cache::new(cap),
            read_opts: TableReadOptions {
                cache: block_cache,
                cache_index_and_filter,
                stats: Some(stats),
                verify_checksums: true,
            },
        }
    }

    /// The open table for `meta`, opening it on first use.
    pub(crate) fn get(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.get(&meta.number) {
            return Ok(t);
        }
        let path = filenames::table(&self.dir, meta.number);
        let t = self.tables.get_or_insert_with(&meta.number, || {
            let file = self.fs.open(&path, ReadHints::default())?;
            Table::open(file, &self.read_opts)
        })?;
        Ok(t)
    }

    /// Opens `meta` outside the cache, for a one-pass sequential read (compaction input, verify).
    pub(crate) fn open_uncached(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.get(&meta.number) {
            return Ok(t);
        }
        let path = filenames::table(&self.dir, meta.number);
        let file = self.fs.open(&path, ReadHints { sequential: true, ..ReadHints::default() })?;
        Table::open(file, &self.read_opts)
    }

    /// Forgets a deleted table.
    pub(crate) fn evict(&self, number: u64) {
        self.tables.remove(&number);
    }
}
