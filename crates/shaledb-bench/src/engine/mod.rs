//! What the benchmarks need from a database. ShaleDB implements it (module `shale`); keeping the workloads
//! behind this small trait lets the same code drive any embedded key-value store, and keeps the benchmark
//! logic free of engine plumbing.
//!
//! The engines: [`shale`] (ShaleDB) and, with the cargo feature `rocksdb`, `rocks` (RocksDB through the
//! `rocksdb` crate).

#[cfg(feature = "rocksdb")]
pub mod rocks;
pub mod shale;

use crate::db_bench::flags::BenchFlags;
use std::path::{Path, PathBuf};

/// Per-write durability, as db_bench's `--sync` and `--disable_wal` set it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteMode {
    /// fsync the WAL before the write returns.
    pub sync: bool,
    /// Skip the WAL.
    pub disable_wal: bool,
}

/// An error from the engine, with the operation that failed.
pub type EngineError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result of engine calls.
pub type EngineResult<T> = Result<T, EngineError>;

/// Shape and work figures of one level.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LevelSample {
    /// Live files.
    pub files: u64,
    /// Live bytes.
    pub bytes: u64,
    /// Bytes written by flushes (L0) or compactions into this level.
    pub write_bytes: u64,
    /// Bytes read by compactions into this level.
    pub read_bytes: u64,
    /// Compaction jobs into this level.
    pub compactions: u64,
    /// Time spent in those jobs, microseconds.
    pub compaction_micros: u64,
}

/// One histogram of db_bench's `--statistics` block, in RocksDB's line format
/// (`name P50 : f P95 : f P99 : f P100 : f COUNT : n SUM : n`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct HistogramLine {
    /// RocksDB's name (`rocksdb.db.get.micros`).
    pub name: String,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value.
    pub p100: f64,
    /// Values recorded.
    pub count: u64,
    /// Their sum.
    pub sum: u64,
}

impl HistogramLine {
    /// The line as RocksDB's `Statistics::ToString` prints it.
    pub fn text(&self) -> String {
        format!(
            "{} P50 : {:.6} P95 : {:.6} P99 : {:.6} P100 : {:.6} COUNT : {} SUM : {}",
            self.name, self.p50, self.p95, self.p99, self.p100, self.count, self.sum
        )
    }

    /// Reads a line in that format back; `None` for any other line.
    pub fn parse(line: &str) -> Option<HistogramLine> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let labels = ["P50", "P95", "P99", "P100", "COUNT", "SUM"];
        if f.len() != 1 + 3 * labels.len() {
            return None;
        }
        for (i, label) in labels.iter().enumerate() {
            if f.get(1 + 3 * i) != Some(label) || f.get(2 + 3 * i) != Some(&":") {
                return None;
            }
        }
        let num = |i: usize| f.get(3 + 3 * i).and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite());
        let int = |i: usize| f.get(3 + 3 * i).and_then(|v| v.parse::<u64>().ok());
        Some(HistogramLine {
            name: f.first()?.to_string(),
            p50: num(0)?,
            p95: num(1)?,
            p99: num(2)?,
            p100: num(3)?,
            count: int(4)?,
            sum: int(5)?,
        })
    }
}

/// A snapshot of an engine's counters (cumulative since open).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct EngineSample {
    /// Seconds since open.
    pub uptime_secs: f64,
    /// Per level, L0 first.
    pub levels: Vec<LevelSample>,
    /// Key + value bytes written by users.
    pub user_bytes_written: u64,
    /// Entries written by users.
    pub keys_written: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes written by compactions (flushes excluded).
    pub compaction_bytes_written: u64,
    /// WAL bytes appended.
    pub wal_bytes: u64,
    /// WAL fsyncs.
    pub wal_syncs: u64,
    /// Time writers spent delayed or stopped, microseconds.
    pub stall_micros: u64,
    /// Writes delayed.
    pub slowdowns: u64,
    /// Times writes were stopped.
    pub stops: u64,
    /// Estimated bytes compaction must rewrite to bring every level under its target.
    pub pending_compaction_bytes: u64,
    /// Bytes in memtables.
    pub memtable_bytes: u64,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Bloom filter checks.
    pub bloom_checked: u64,
    /// Bloom filter checks that avoided a read.
    pub bloom_useful: u64,
    /// Point lookups.
    pub gets: u64,
    /// Point lookups that found a value.
    pub gets_found: u64,
    /// The histograms the engine itself measures, in RocksDB's names (ShaleDB: compaction and flush job
    /// times).
    pub histograms: Vec<HistogramLine>,
}

impl EngineSample {
    /// Live bytes in all levels.
    pub fn total_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes).sum()
    }

    /// Bytes written by flushes and compactions together (the Compaction Stats table's `Sum` row
    /// `Write(GB)`).
    pub fn sum_write_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.write_bytes).sum()
    }

    /// Bytes written into L0 (the `L0` row's `Write(GB)`: flushes).
    pub fn l0_write_bytes(&self) -> u64 {
        self.levels.first().map(|l| l.write_bytes).unwrap_or(0)
    }
}

/// A cursor over the database in key order.
pub trait EngineIter {
    /// Positions at the first key.
    fn seek_to_first(&mut self);
    /// Positions at the last key.
    fn seek_to_last(&mut self);
    /// Positions at the first key >= `key`.
    fn seek(&mut self, key: &[u8]);
    /// Whether the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Moves forward. REQUIRES: `valid()`.
    fn next(&mut self);
    /// Moves backward. REQUIRES: `valid()`.
    fn prev(&mut self);
    /// The current key. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
    /// The error that stopped the cursor, if any.
    fn status(&self) -> EngineResult<()>;
}

/// A group of writes applied atomically by [`Engine::write`] (RocksDB's and ShaleDB's `WriteBatch`).
pub trait EngineBatch: Send {
    /// Adds a put.
    fn put(&mut self, key: &[u8], value: &[u8]);
    /// Adds a delete.
    fn delete(&mut self, key: &[u8]);
    /// Adds a SingleDelete where the engine has one ([`Engine::HAS_SINGLE_DELETE`]), a delete otherwise. The
    /// caller promises the key was put at most once since its last deletion (RocksDB's contract).
    fn single_delete(&mut self, key: &[u8]);
    /// Adds a merge operand.
    fn merge(&mut self, key: &[u8], operand: &[u8]);
    /// Entries added since the last clear.
    fn len(&self) -> usize;
    /// Whether no entry was added.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Removes every entry, keeping the allocation.
    fn clear(&mut self);
}

/// A table file written outside the database for [`Engine::ingest`] (RocksDB's and ShaleDB's
/// `SstFileWriter`).
pub trait EngineSstWriter {
    /// Adds `key` = `value`. REQUIRES: keys in strictly increasing order.
    fn put(&mut self, key: &[u8], value: &[u8]) -> EngineResult<()>;
    /// Writes the rest of the file and syncs it; the file is then ready for [`Engine::ingest`].
    fn finish(&mut self) -> EngineResult<()>;
}

/// How a cursor reads, beyond its bounds.
#[derive(Clone, Debug, Default)]
pub struct IterOptions<'k> {
    /// Smallest key yielded (inclusive).
    pub lower: Option<&'k [u8]>,
    /// Key to stop before (exclusive).
    pub upper: Option<&'k [u8]>,
    /// Bytes read ahead of the cursor in each table file (RocksDB's `ReadOptions::readahead_size`); 0 keeps
    /// the engine's own policy.
    pub readahead_size: usize,
    /// Put the blocks read into the block cache (`ReadOptions::fill_cache`). Full scans turn it off.
    pub fill_cache: bool,
}

impl<'k> IterOptions<'k> {
    /// A cursor over `[lower, upper)` that fills the cache and keeps the engine's readahead.
    pub fn bounded(lower: Option<&'k [u8]>, upper: Option<&'k [u8]>) -> IterOptions<'k> {
        IterOptions { lower, upper, readahead_size: 0, fill_cache: true }
    }
}

/// An embedded key-value store the benchmarks can drive.
pub trait Engine: Send + Sync + Sized + 'static {
    /// The cursor type.
    type Iter<'a>: EngineIter
    where
        Self: 'a;
    /// The write batch type.
    type Batch: EngineBatch;
    /// The table writer of [`Engine::sst_writer`].
    type SstWriter<'a>: EngineSstWriter
    where
        Self: 'a;

    /// Whether [`EngineBatch::single_delete`] is a real SingleDelete (false: it writes a delete).
    const HAS_SINGLE_DELETE: bool;

    /// Short name for reports (`shaledb`).
    fn name() -> &'static str;
    /// The engine's version for report headers (`ShaleDB:    version ...`): this crate's for ShaleDB, the linked
    /// library's own for RocksDB.
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }
    /// Opens (creating if missing) the database at `path` configured from `flags`; `overrides` are the
    /// suite-specific settings applied on top.
    fn open(path: &Path, flags: &BenchFlags) -> EngineResult<Self>;
    /// Checks the options `flags` make as [`Engine::open`] would, without touching any file, so that a
    /// bad value fails before the run. Engines that check only at open keep this default.
    fn check_options(flags: &BenchFlags) -> EngineResult<()> {
        let _ = flags;
        Ok(())
    }
    /// Removes the database at `path` (only the engine's files; a directory holding other files and no
    /// database is refused) and returns how many files went. Prints nothing: the caller says what was done.
    fn destroy(path: &Path) -> EngineResult<usize>;
    /// Closes the database, waiting for background work to stop.
    fn close(self) -> EngineResult<()>;

    /// Writes one entry.
    fn put(&self, mode: WriteMode, key: &[u8], value: &[u8]) -> EngineResult<()>;
    /// Deletes one key.
    fn delete(&self, mode: WriteMode, key: &[u8]) -> EngineResult<()>;
    /// Records a merge operand.
    fn merge(&self, mode: WriteMode, key: &[u8], operand: &[u8]) -> EngineResult<()>;
    /// Deletes every key in `[begin, end)` with one range tombstone (RocksDB's `DeleteRange`).
    fn delete_range(&self, mode: WriteMode, begin: &[u8], end: &[u8]) -> EngineResult<()>;
    /// Reads `key` into `out`; `false` when absent.
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> EngineResult<bool>;
    /// Column families the database was opened with (`--num_column_families`); index 0 is "default".
    fn num_families(&self) -> usize {
        1
    }
    /// [`Engine::put`] in family `cf` (an index below [`Engine::num_families`]).
    fn put_cf(&self, cf: usize, mode: WriteMode, key: &[u8], value: &[u8]) -> EngineResult<()> {
        check_default(cf)?;
        self.put(mode, key, value)
    }
    /// [`Engine::delete`] in family `cf`.
    fn delete_cf(&self, cf: usize, mode: WriteMode, key: &[u8]) -> EngineResult<()> {
        check_default(cf)?;
        self.delete(mode, key)
    }
    /// [`Engine::merge`] in family `cf`.
    fn merge_cf(&self, cf: usize, mode: WriteMode, key: &[u8], operand: &[u8]) -> EngineResult<()> {
        check_default(cf)?;
        self.merge(mode, key, operand)
    }
    /// [`Engine::delete_range`] in family `cf`.
    fn delete_range_cf(&self, cf: usize, mode: WriteMode, begin: &[u8], end: &[u8]) -> EngineResult<()> {
        check_default(cf)?;
        self.delete_range(mode, begin, end)
    }
    /// [`Engine::get`] in family `cf`.
    fn get_cf(&self, cf: usize, key: &[u8], out: &mut Vec<u8>) -> EngineResult<bool> {
        check_default(cf)?;
        self.get(key, out)
    }
    /// [`Engine::multi_get`] with key `i` read in family `cfs[i]` (`cfs` as long as `keys`).
    fn multi_get_cf(&self, cfs: &[usize], keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> EngineResult<()> {
        for &cf in cfs {
            check_default(cf)?;
        }
        self.multi_get(keys, values)
    }
    /// [`Engine::property`] of family `cf`.
    fn property_cf(&self, cf: usize, name: &str) -> Option<String> {
        if cf == 0 {
            self.property(name)
        } else {
            None
        }
    }
    /// Reads `keys` in one call (RocksDB's `MultiGet`): `values` becomes one entry per key, in order, `None` for
    /// an absent key. An error for any key fails the call (db_bench aborts on one).
    fn multi_get(&self, keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> EngineResult<()>;
    /// Runs one `randomtransaction` transaction, in the transaction mode the flags opened the database with
    /// (`--transaction_db` or `--optimistic_transaction_db`). Engines without transactions return an error.
    fn random_transaction(&self, _mode: WriteMode, _step: &TxnStep<'_>) -> EngineResult<TxnOutcome> {
        Err(format!(
            "{}: randomtransaction with --transaction_db or --optimistic_transaction_db is not available",
            Self::name()
        )
        .into())
    }
    /// A cursor bounded by `[lower, upper)` where given.
    fn iter(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Self::Iter<'_> {
        self.iter_with(&IterOptions::bounded(lower, upper))
    }
    /// A cursor configured by `opts`.
    fn iter_with(&self, opts: &IterOptions<'_>) -> Self::Iter<'_>;
    /// An empty batch.
    fn new_batch(&self) -> Self::Batch;
    /// Applies `batch` atomically: all of it or, on error, none of it.
    fn write(&self, mode: WriteMode, batch: &Self::Batch) -> EngineResult<()>;

    /// A writer of a new table file at `path`, made with the options the database was opened with, for
    /// [`Engine::ingest`].
    fn sst_writer(&self, path: &Path) -> EngineResult<Self::SstWriter<'_>>;
    /// Adds the finished table files at `paths` to the database atomically (`IngestExternalFile`), moving
    /// them in (`move_files`: hard links, copies across file systems); the originals are removed once
    /// ingested.
    fn ingest(&self, paths: &[PathBuf]) -> EngineResult<()>;

    /// Flushes the memtables.
    fn flush(&self) -> EngineResult<()>;
    /// Compacts the whole key range down to the last level.
    fn compact_all(&self) -> EngineResult<()>;
    /// Waits until no flush or compaction is pending or running.
    fn wait_for_compaction(&self) -> EngineResult<()>;
    /// Compacts every file of `level` (0, or 1 meaning the first non-empty level below L0) into the next
    /// level holding data, as db_bench's `compact0`/`compact1`. Returns the number of files and the levels
    /// (from, to), or `None` when there was nothing to compact.
    fn compact_level(&self, level: usize) -> EngineResult<Option<(usize, usize, usize)>> {
        let _ = level;
        Err(format!("{} in this tool cannot compact one level (compact0/compact1)", Self::name()).into())
    }
    /// A named text property (`rocksdb.stats` names are translated by the engine).
    fn property(&self, name: &str) -> Option<String>;
    /// Current counters.
    fn sample(&self) -> EngineSample;
}

/// The name db_bench gives column family `i` of `--num_column_families`: "default", then
/// `column_family_name_000001`, ...
pub fn column_family_name(i: usize) -> String {
    if i == 0 {
        "default".to_string()
    } else {
        format!("column_family_name_{i:06}")
    }
}

fn check_default(cf: usize) -> EngineResult<()> {
    if cf == 0 {
        Ok(())
    } else {
        Err(format!("column family {cf} does not exist: the database was opened with the default family only").into())
    }
}

/// The engines this build can run, by the names `--engine` takes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
pub enum EngineKind {
    /// ShaleDB (always built).
    #[default]
    Shaledb,
    /// RocksDB through the `rocksdb` crate, linked statically to the release RocksDB 9.11.2 that
    /// `scripts/build-rocksdb` builds (cargo feature `rocksdb`).
    Rocksdb,
}

impl EngineKind {
    /// The name `--engine` takes.
    pub fn flag_name(self) -> &'static str {
        match self {
            EngineKind::Shaledb => "shaledb",
            EngineKind::Rocksdb => "rocksdb",
        }
    }

    /// Whether this build includes the engine.
    pub fn available(self) -> bool {
        match self {
            EngineKind::Shaledb => true,
            EngineKind::Rocksdb => cfg!(feature = "rocksdb"),
        }
    }
}

/// One transaction of db_bench's `randomtransaction` (its `RandomTransactionInserter`): for each key in
/// order, read it (with `get_for_update` where asked), then delete it and put its decimal value plus `incr`
/// (absent: 0); then commit, or roll back when `rollback`.
#[derive(Debug)]
pub struct TxnStep<'a> {
    /// One key per set, in the order to visit them.
    pub keys: &'a [Vec<u8>],
    /// Per key: read it with `get_for_update`.
    pub get_for_update: &'a [bool],
    /// Added to every key's value.
    pub incr: u64,
    /// Roll back instead of committing.
    pub rollback: bool,
}

/// How a [`TxnStep`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    /// Committed.
    Committed,
    /// Rolled back as asked.
    RolledBack,
    /// Gave up on a conflict (`Busy`), a lock timeout or a deadlock: rolled back, nothing written.
    Aborted,
}

/// Code generic over the engine, run by [`with_engine`] for an engine chosen at run time.
pub trait EngineVisitor {
    /// What the code returns.
    type Output;
    /// Runs the code with engine type `E`.
    fn visit<E: Engine>(self) -> Self::Output;
}

/// What `--engine rocksdb` says in a build without the `rocksdb` feature.
pub const ROCKSDB_MISSING: &str = "this shaledb was built without the RocksDB engine (cargo feature `rocksdb`). It \
     links the release RocksDB 9.11.2 that scripts/build-rocksdb builds (once, 30-50 minutes on 2 cores, into \
     target/rocksdb/; needs libclang-dev): run scripts/build-rocksdb, then `cargo build --release -p shaledb-cli \
     --features rocksdb`";

/// Runs `v` with the engine `kind` names; an error when this build lacks it.
pub fn with_engine<V: EngineVisitor>(kind: EngineKind, v: V) -> crate::Result<V::Output> {
    match kind {
        EngineKind::Shaledb => Ok(v.visit::<crate::engine::shale::ShaleDb>()),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => Ok(v.visit::<crate::engine::rocks::RocksDb>()),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => Err(crate::BenchError::BadFlag { flag: "engine".into(), msg: ROCKSDB_MISSING.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_lines_print_and_parse_in_rocksdb_format() {
        let l = HistogramLine {
            name: "rocksdb.db.get.micros".into(),
            p50: 1.5,
            p95: 3.25,
            p99: 4.0,
            p100: 9.0,
            count: 77,
            sum: 120,
        };
        let t = l.text();
        assert_eq!(
            t,
            "rocksdb.db.get.micros P50 : 1.500000 P95 : 3.250000 P99 : 4.000000 P100 : 9.000000 COUNT : 77 SUM : 120"
        );
        assert_eq!(HistogramLine::parse(&t), Some(l));
        for bad in [
            "rocksdb.block.cache.hit COUNT : 3",
            "x P50 : 1 P95 : 1 P99 : 1 P100 : 1 COUNT : 1",
            "x P50 : a P95 : 1 P99 : 1 P100 : 1 COUNT : 1 SUM : 1",
            "x P50 : 1 P95 : 1 P99 : 1 P100 : 1 COUNT : -1 SUM : 1",
            "x P50 : 1 P95 : 1 P99 : 1 P100 : inf COUNT : 1 SUM : 1",
            "",
        ] {
            assert_eq!(HistogramLine::parse(bad), None, "{bad}");
        }
    }
}
