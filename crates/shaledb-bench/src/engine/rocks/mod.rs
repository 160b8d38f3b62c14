//! [`Engine`] for RocksDB (cargo feature `rocksdb`): the `rocksdb` crate 0.23.0 (librocksdb-sys 0.17.1, the C API
//! of RocksDB 9.9) linked statically to the release RocksDB 9.11.2 that `scripts/build-rocksdb` builds, the library
//! of the `db_bench` the comparison scripts run (see `build.rs` and `.cargo/config.toml`). Report headers give the
//! version the library writes into the database's OPTIONS file ([`RocksDb::library_version`]).
//!
//! The flags map onto RocksDB's options of the same names, set as db_bench's (7.8's and 9.11's)
//! `InitializeOptionsFromFlags`/`InitializeOptionsGeneral` set them, so that `shaledb bench --engine rocksdb`
//! runs the database `db_bench` would run with the same flags. Options db_bench sets from flags this tool
//! does not have are set to db_bench's defaults where those differ from RocksDB's (see [`options_from_flags`]).
//! A flag RocksDB cannot honour is an error naming it.
//!
//! Counters come from RocksDB's statistics (tickers, always enabled here) and properties; see
//! [`RocksDb::sample`].
//!
//! This file holds the engine (database, iterator, batch); the flags' mapping onto options is in
//! `options.rs`, the reading of RocksDB's statistics text in `stats.rs`.

use crate::db_bench::flags::BenchFlags;
use crate::engine::{
    column_family_name, Engine, EngineBatch, EngineIter, EngineResult, EngineSample, EngineSstWriter, HistogramLine,
    IterOptions, LevelSample, WriteMode,
};
use rocksdb::{
    BottommostLevelCompaction, ColumnFamilyDescriptor, CompactOptions, DBRawIterator, FlushOptions,
    IngestExternalFileOptions, Options, ReadOptions, SstFileWriter, WriteOptions, DB,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod options;
mod stats;

pub use options::options_from_flags;
pub use stats::{apportion, fill_level_work, parse_compaction_stats, parse_stall_counts, parse_tickers, CompactionRow};

/// A RocksDB database driven by the benchmarks.
pub struct RocksDb {
    db: DB,
    /// `--num_column_families` names, "default" first (empty with the default family only). The crate lends
    /// handles only borrowed from the database, so each call looks its family up by name.
    families: Vec<String>,
    /// Kept for its statistics object (`Options::get_statistics`).
    opts: Options,
    read: ReadOptions,
    /// The four durability modes, built once (creating a `WriteOptions` allocates through the C API).
    writes: [WriteOptions; 4],
    /// `--readahead_size`: iterators' readahead unless [`IterOptions::readahead_size`] sets one.
    readahead_size: usize,
    /// `--multiread_batched`: MultiGet through `batched_multi_get_cf` rather than `multi_get`.
    multiread_batched: bool,
    verify_checksum: bool,
    /// `--prefix_same_as_start`, `--total_order_seek`: every iterator's.
    prefix_same_as_start: bool,
    total_order_seek: bool,
    num_levels: usize,
    opened: Instant,
    /// [`RocksDb::library_version`] at open.
    version: String,
}

/// A RocksDB iterator behind [`EngineIter`].
pub struct RocksIter<'a> {
    it: DBRawIterator<'a>,
}

impl EngineIter for RocksIter<'_> {
    fn seek_to_first(&mut self) {
        self.it.seek_to_first()
    }
    fn seek_to_last(&mut self) {
        self.it.seek_to_last()
    }
    fn seek(&mut self, key: &[u8]) {
        self.it.seek(key)
    }
    fn valid(&self) -> bool {
        self.it.valid()
    }
    fn next(&mut self) {
        self.it.next()
    }
    fn prev(&mut self) {
        self.it.prev()
    }
    fn key(&self) -> &[u8] {
        self.it.key().unwrap_or_default()
    }
    fn value(&self) -> &[u8] {
        self.it.value().unwrap_or_default()
    }
    fn status(&self) -> EngineResult<()> {
        self.it.status().map_err(Into::into)
    }
}

/// RocksDB's `SstFileWriter` behind [`EngineSstWriter`], made with the database's options.
pub struct RocksSstWriter<'a> {
    w: SstFileWriter<'a>,
}

impl EngineSstWriter for RocksSstWriter<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.w.put(key, value).map_err(Into::into)
    }
    fn finish(&mut self) -> EngineResult<()> {
        self.w.finish().map_err(Into::into)
    }
}

/// RocksDB's `WriteBatch` in its serialized form, built here because the `rocksdb` crate (0.20.1 when this was
/// written; 0.23.0 has one) had no `single_delete` on its batch; [`Engine::write`] hands the bytes to `WriteBatch::from_data`.
///
/// Layout (RocksDB's `write_batch.cc`): an 8-byte sequence number and a 4-byte count, both little-endian,
/// then one record per entry: a type byte and varint32-length-prefixed key (and value).
#[derive(Clone, Debug)]
pub struct RocksBatch {
    rep: Vec<u8>,
    count: u32,
}

const BATCH_HEADER: usize = 12;
const TYPE_DELETION: u8 = 0x0;
const TYPE_VALUE: u8 = 0x1;
const TYPE_MERGE: u8 = 0x2;
const TYPE_SINGLE_DELETION: u8 = 0x7;

impl Default for RocksBatch {
    fn default() -> Self {
        RocksBatch { rep: vec![0; BATCH_HEADER], count: 0 }
    }
}

impl RocksBatch {
    fn put_slice(&mut self, s: &[u8]) {
        let mut n = s.len() as u32;
        while n >= 0x80 {
            self.rep.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.rep.push(n as u8);
        self.rep.extend_from_slice(s);
    }

    fn record(&mut self, tag: u8, key: &[u8], value: Option<&[u8]>) {
        self.rep.push(tag);
        self.put_slice(key);
        if let Some(v) = value {
            self.put_slice(v);
        }
        self.count += 1;
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    /// The serialized batch.
    pub fn data(&self) -> &[u8] {
        &self.rep
    }
}

impl EngineBatch for RocksBatch {
    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.record(TYPE_VALUE, key, Some(value));
    }
    fn delete(&mut self, key: &[u8]) {
        self.record(TYPE_DELETION, key, None);
    }
    fn single_delete(&mut self, key: &[u8]) {
        self.record(TYPE_SINGLE_DELETION, key, None);
    }
    fn merge(&mut self, key: &[u8], operand: &[u8]) {
        self.record(TYPE_MERGE, key, Some(operand));
    }
    fn len(&self) -> usize {
        self.count as usize
    }
    fn clear(&mut self) {
        self.rep.truncate(BATCH_HEADER);
        self.rep.fill(0);
        self.count = 0;
    }
}

/// Index in [`RocksDb::writes`]: sync is bit 1, disable_wal bit 0.
fn mode_index(m: WriteMode) -> usize {
    usize::from(m.sync) * 2 + usize::from(m.disable_wal)
}

fn write_options(m: WriteMode) -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(m.sync);
    w.disable_wal(m.disable_wal);
    w
}

/// Names of the entries of `dir`, sorted.
fn entries(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    v.sort_unstable();
    Ok(v)
}

impl RocksDb {
    /// The version of the RocksDB library this process runs, as the library wrote it (`rocksdb_version=9.11.2`)
    /// into the newest OPTIONS file of the database at `path`: RocksDB's C API has no version call, and this
    /// reads what the linked code itself says rather than the headers it was compiled against.
    pub fn library_version(path: &Path) -> EngineResult<String> {
        let newest = entries(path)?
            .into_iter()
            .filter_map(|n| Some((n.strip_prefix("OPTIONS-")?.parse::<u64>().ok()?, n)))
            .max()
            .ok_or_else(|| format!("{} has no OPTIONS file to read RocksDB's version from", path.display()))?;
        let file = path.join(&newest.1);
        let text = std::fs::read_to_string(&file)?;
        text.lines()
            .find_map(|l| l.trim().strip_prefix("rocksdb_version="))
            .map(|v| v.trim().to_string())
            .ok_or_else(|| format!("{} names no rocksdb_version", file.display()).into())
    }

    /// An integer property (`rocksdb.num-running-compactions`, ...).
    pub fn int_property(&self, name: &str) -> EngineResult<u64> {
        self.db.property_int_value(name)?.ok_or_else(|| format!("RocksDB has no integer property {name}").into())
    }

    /// The statistics tickers by name (`rocksdb.block.cache.hit` -> count).
    pub fn tickers(&self) -> HashMap<String, u64> {
        self.opts.get_statistics().map(|s| parse_tickers(&s)).unwrap_or_default()
    }

    /// An integer property summed over the families (the default family's alone without families).
    fn sum_property(&self, name: &str) -> u64 {
        let others: u64 =
            self.other_families().map(|cf| self.db.property_int_value_cf(cf, name).ok().flatten().unwrap_or(0)).sum();
        self.int_property(name).unwrap_or(0) + others
    }

    /// The handle of family `cf` (not 0: the default family goes through the plain calls).
    fn family(&self, cf: usize) -> EngineResult<&rocksdb::ColumnFamily> {
        let name = self.families.get(cf).ok_or_else(|| {
            format!("column family {cf} does not exist: the database has {} families", self.families.len().max(1))
        })?;
        self.db.cf_handle(name).ok_or_else(|| format!("RocksDB has no column family {name}").into())
    }

    /// The families other than "default", with their handles.
    fn other_families(&self) -> impl Iterator<Item = &rocksdb::ColumnFamily> + '_ {
        self.families.iter().skip(1).filter_map(|n| self.db.cf_handle(n))
    }

    fn background_errors(&self) -> u64 {
        self.int_property("rocksdb.background-errors").unwrap_or(0)
    }
}

impl Engine for RocksDb {
    type Iter<'a> = RocksIter<'a>;
    type Batch = RocksBatch;
    type SstWriter<'a> = RocksSstWriter<'a>;
    const HAS_SINGLE_DELETE: bool = true;

    fn name() -> &'static str {
        "RocksDB"
    }

    fn version(&self) -> String {
        self.version.clone()
    }

    fn open(path: &Path, flags: &BenchFlags) -> EngineResult<Self> {
        let opts = options_from_flags(flags)?;
        let n = flags.column_families();
        let families: Vec<String> = if n > 1 { (0..n).map(column_family_name).collect() } else { Vec::new() };
        let db = if n > 1 {
            // As db_bench's OpenDb: "default" and the numbered families, each with the database's options;
            // `create_missing_column_families` (set by `options_from_flags`) creates those not there yet.
            let cfs = families.iter().map(|name| ColumnFamilyDescriptor::new(name, opts.clone()));
            DB::open_cf_descriptors(&opts, path, cfs)?
        } else if flags.multiread_batched {
            // The batched MultiGet takes a column family handle, which the crate gives only for families named at
            // open: the default one, with the same options `DB::open` gives it.
            let default = ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, opts.clone());
            DB::open_cf_descriptors(&opts, path, [default])?
        } else {
            DB::open(&opts, path)?
        };
        let pairs = options::mutable_compaction_options(flags);
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        db.set_options(&pairs)?;
        for name in families.iter().skip(1) {
            let cf = db.cf_handle(name).ok_or_else(|| format!("RocksDB did not open column family {name}"))?;
            db.set_options_cf(cf, &pairs)?;
        }
        // SetOptions has just written a fresh OPTIONS file.
        let version = Self::library_version(path)?;
        Ok(RocksDb {
            db,
            families,
            opts,
            read: {
                let mut r = ReadOptions::default();
                r.set_verify_checksums(flags.verify_checksum);
                r
            },
            writes: std::array::from_fn(|i| write_options(WriteMode { sync: i & 2 != 0, disable_wal: i & 1 != 0 })),
            readahead_size: flags.readahead_size,
            multiread_batched: flags.multiread_batched,
            verify_checksum: flags.verify_checksum,
            prefix_same_as_start: flags.prefix_same_as_start,
            total_order_seek: flags.total_order_seek,
            num_levels: flags.num_levels,
            opened: Instant::now(),
            version,
        })
    }

    fn destroy(path: &Path) -> EngineResult<usize> {
        if !path.exists() {
            return Ok(0);
        }
        let names = entries(path)?;
        let empty = names.iter().all(|n| n == "LOCK");
        if !empty && !names.iter().any(|n| n == "CURRENT" || n == "IDENTITY") {
            return Err(format!(
                "{} does not hold a RocksDB database (no CURRENT, no IDENTITY) and is not empty: {}. Refusing to \
                 destroy it; nothing was removed",
                path.display(),
                names.join(", ")
            )
            .into());
        }
        DB::destroy(&Options::default(), path)?;
        let left = if path.exists() { entries(path)? } else { Vec::new() };
        Ok(names.iter().filter(|n| !left.contains(n)).count())
    }

    fn close(self) -> EngineResult<()> {
        // As db_bench at exit: the DB's destructor waits for running background jobs; nothing is flushed
        // (RocksDB flushes at close only what the WAL does not hold, as in db_bench).
        drop(self.db);
        Ok(())
    }

    fn put(&self, mode: WriteMode, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.db.put_opt(key, value, &self.writes[mode_index(mode)]).map_err(Into::into)
    }

    fn delete(&self, mode: WriteMode, key: &[u8]) -> EngineResult<()> {
        self.db.delete_opt(key, &self.writes[mode_index(mode)]).map_err(Into::into)
    }

    fn merge(&self, mode: WriteMode, key: &[u8], operand: &[u8]) -> EngineResult<()> {
        self.db.merge_opt(key, operand, &self.writes[mode_index(mode)]).map_err(Into::into)
    }

    fn delete_range(&self, mode: WriteMode, begin: &[u8], end: &[u8]) -> EngineResult<()> {
        let mut b = rocksdb::WriteBatch::default();
        b.delete_range(begin, end);
        self.db.write_opt(b, &self.writes[mode_index(mode)]).map_err(Into::into)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> EngineResult<bool> {
        match self.db.get_pinned_opt(key, &self.read)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn multi_get(&self, keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> EngineResult<()> {
        values.clear();
        if self.multiread_batched {
            let cf = self
                .db
                .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
                .ok_or("RocksDB was opened without a handle on its default column family")?;
            for r in self.db.batched_multi_get_cf_opt(cf, keys, false, &self.read) {
                values.push(r?.map(|v| v.to_vec()));
            }
        } else {
            for r in self.db.multi_get_opt(keys, &self.read) {
                values.push(r?);
            }
        }
        Ok(())
    }

    fn num_families(&self) -> usize {
        self.families.len().max(1)
    }

    fn put_cf(&self, cf: usize, mode: WriteMode, key: &[u8], value: &[u8]) -> EngineResult<()> {
        match cf {
            0 => self.put(mode, key, value),
            _ => self.db.put_cf_opt(self.family(cf)?, key, value, &self.writes[mode_index(mode)]).map_err(Into::into),
        }
    }

    fn delete_cf(&self, cf: usize, mode: WriteMode, key: &[u8]) -> EngineResult<()> {
        match cf {
            0 => self.delete(mode, key),
            _ => self.db.delete_cf_opt(self.family(cf)?, key, &self.writes[mode_index(mode)]).map_err(Into::into),
        }
    }

    fn merge_cf(&self, cf: usize, mode: WriteMode, key: &[u8], operand: &[u8]) -> EngineResult<()> {
        match cf {
            0 => self.merge(mode, key, operand),
            _ => {
                self.db.merge_cf_opt(self.family(cf)?, key, operand, &self.writes[mode_index(mode)]).map_err(Into::into)
            }
        }
    }

    fn delete_range_cf(&self, cf: usize, mode: WriteMode, begin: &[u8], end: &[u8]) -> EngineResult<()> {
        if cf == 0 {
            return self.delete_range(mode, begin, end);
        }
        let mut b = rocksdb::WriteBatch::default();
        b.delete_range_cf(self.family(cf)?, begin, end);
        self.db.write_opt(b, &self.writes[mode_index(mode)]).map_err(Into::into)
    }

    fn get_cf(&self, cf: usize, key: &[u8], out: &mut Vec<u8>) -> EngineResult<bool> {
        if cf == 0 {
            return self.get(key, out);
        }
        match self.db.get_pinned_cf_opt(self.family(cf)?, key, &self.read)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn multi_get_cf(&self, cfs: &[usize], keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> EngineResult<()> {
        if cfs.iter().all(|&cf| cf == 0) {
            return self.multi_get(keys, values);
        }
        // Keys in several families: RocksDB's MultiGet over (family, key) pairs (the batched API takes one
        // family).
        let handles = cfs.iter().map(|&cf| self.family(cf)).collect::<EngineResult<Vec<_>>>()?;
        values.clear();
        for r in self.db.multi_get_cf_opt(handles.into_iter().zip(keys), &self.read) {
            values.push(r?);
        }
        Ok(())
    }

    fn property_cf(&self, cf: usize, name: &str) -> Option<String> {
        match cf {
            0 => self.property(name),
            _ => self.db.property_value_cf(self.family(cf).ok()?, name).ok().flatten(),
        }
    }

    fn iter_with(&self, o: &IterOptions<'_>) -> RocksIter<'_> {
        let mut r = ReadOptions::default();
        r.set_verify_checksums(self.verify_checksum);
        if let Some(l) = o.lower {
            r.set_iterate_lower_bound(l);
        }
        if let Some(u) = o.upper {
            r.set_iterate_upper_bound(u);
        }
        let readahead = if o.readahead_size > 0 { o.readahead_size } else { self.readahead_size };
        if readahead > 0 {
            r.set_readahead_size(readahead);
        }
        r.fill_cache(o.fill_cache);
        r.set_prefix_same_as_start(self.prefix_same_as_start);
        r.set_total_order_seek(self.total_order_seek);
        RocksIter { it: self.db.raw_iterator_opt(r) }
    }

    fn new_batch(&self) -> RocksBatch {
        RocksBatch::default()
    }

    fn write(&self, mode: WriteMode, batch: &RocksBatch) -> EngineResult<()> {
        let b = rocksdb::WriteBatch::from_data(batch.data());
        self.db.write_opt(b, &self.writes[mode_index(mode)]).map_err(Into::into)
    }

    fn sst_writer(&self, path: &Path) -> EngineResult<RocksSstWriter<'_>> {
        let w = SstFileWriter::create(&self.opts);
        w.open(path)?;
        Ok(RocksSstWriter { w })
    }

    fn ingest(&self, paths: &[PathBuf]) -> EngineResult<()> {
        let mut o = IngestExternalFileOptions::default();
        o.set_move_files(true);
        self.db.ingest_external_file_opts(&o, paths.to_vec()).map_err(Into::into)
    }

    fn flush(&self) -> EngineResult<()> {
        let mut f = FlushOptions::default();
        f.set_wait(true);
        self.db.flush_opt(&f)?;
        // db_bench's `flush` flushes every family.
        for cf in self.other_families() {
            self.db.flush_cf_opt(cf, &f)?;
        }
        Ok(())
    }

    fn compact_all(&self) -> EngineResult<()> {
        // db_bench's `compact`: CompactRange over everything with the bottommost level forced (optimized).
        let before = self.background_errors();
        let mut c = CompactOptions::default();
        c.set_bottommost_level_compaction(BottommostLevelCompaction::ForceOptimized);
        self.db.compact_range_opt(None::<&[u8]>, None::<&[u8]>, &c);
        for cf in self.other_families() {
            self.db.compact_range_cf_opt(cf, None::<&[u8]>, None::<&[u8]>, &c);
        }
        // The crate's compact_range returns no status: a failed compaction shows as a background error.
        let after = self.background_errors();
        if after > before {
            return Err(
                format!("compact_range failed: {} new background errors (see the LOG file)", after - before).into()
            );
        }
        Ok(())
    }

    fn wait_for_compaction(&self) -> EngineResult<()> {
        // db_bench's properties, polled until all are 0 twice in a row (a job that finishes may schedule the
        // next one just after).
        const KEYS: [&str; 4] = [
            "rocksdb.mem-table-flush-pending",
            "rocksdb.num-running-flushes",
            "rocksdb.compaction-pending",
            "rocksdb.num-running-compactions",
        ];
        let mut idle = 0;
        while idle < 2 {
            let mut busy = false;
            for k in KEYS {
                if self.int_property(k)? > 0 {
                    busy = true;
                    break;
                }
                // Flushes and compactions pending in the other families (the running counts are the DB's).
                for cf in self.other_families() {
                    if self.db.property_int_value_cf(cf, k)?.unwrap_or(0) > 0 {
                        busy = true;
                    }
                }
                if busy {
                    break;
                }
            }
            idle = if busy { 0 } else { idle + 1 };
            std::thread::sleep(Duration::from_millis(if busy { 50 } else { 20 }));
        }
        match self.background_errors() {
            0 => Ok(()),
            n => Err(format!("RocksDB reports {n} background errors (see the LOG file)").into()),
        }
    }

    fn property(&self, name: &str) -> Option<String> {
        self.db.property_value(name).ok().flatten()
    }

    /// Tickers for the totals; live files (of every family) for the per-level shape; the `rocksdb.cfstats`
    /// Compaction Stats tables (of every family, summed by level) for the per-level work, whose text gives bytes in GB with one decimal (or MB/s times seconds):
    /// the per-level bytes are those estimates scaled so that they add up to the exact tickers.
    fn sample(&self) -> EngineSample {
        let t = self.tickers();
        let tk = |name: &str| t.get(name).copied().unwrap_or(0);
        let mut levels = vec![LevelSample::default(); self.num_levels.max(1)];
        if let Ok(files) = self.db.live_files() {
            for f in files {
                let l = usize::try_from(f.level).unwrap_or(0);
                if l >= levels.len() {
                    levels.resize(l + 1, LevelSample::default());
                }
                levels[l].files += 1;
                levels[l].bytes += f.size as u64;
            }
        }
        // The non-periodic dump: reading it does not move the interval (`Int`) snapshot of `rocksdb.stats`.
        // With `--num_column_families`, each family has its own table and stall counts: summed by level and name.
        let mut rows: Vec<CompactionRow> = Vec::new();
        let mut stalls: HashMap<String, u64> = HashMap::new();
        for cf in 0..self.num_families() {
            let cfstats = self.property_cf(cf, "rocksdb.cfstats-no-file-histogram").unwrap_or_default();
            for r in parse_compaction_stats(&cfstats) {
                match rows.iter_mut().find(|o| o.level == r.level) {
                    Some(o) => {
                        o.read_est += r.read_est;
                        o.write_est += r.write_est;
                        o.secs += r.secs;
                        o.count += r.count;
                    }
                    None => rows.push(r),
                }
            }
            for (name, n) in parse_stall_counts(&cfstats) {
                *stalls.entry(name).or_default() += n;
            }
        }
        let flush_bytes = tk("rocksdb.flush.write.bytes");
        let compaction_read = tk("rocksdb.compact.read.bytes");
        let compaction_written = tk("rocksdb.compact.write.bytes");
        fill_level_work(&mut levels, &rows, flush_bytes, compaction_read, compaction_written);
        let count = |names: &[&str]| names.iter().map(|n| stalls.get(*n).copied().unwrap_or(0)).sum::<u64>();
        EngineSample {
            uptime_secs: self.opened.elapsed().as_secs_f64(),
            levels,
            user_bytes_written: tk("rocksdb.bytes.written"),
            keys_written: tk("rocksdb.number.keys.written"),
            flush_bytes,
            compaction_bytes_read: compaction_read,
            compaction_bytes_written: compaction_written,
            wal_bytes: tk("rocksdb.wal.bytes"),
            wal_syncs: tk("rocksdb.wal.synced"),
            stall_micros: tk("rocksdb.stall.micros"),
            slowdowns: count(&[
                "level0_slowdown",
                "level0_slowdown_with_compaction",
                "slowdown for pending_compaction_bytes",
                "memtable_slowdown",
            ]),
            stops: count(&[
                "level0_numfiles",
                "level0_numfiles_with_compaction",
                "stop for pending_compaction_bytes",
                "memtable_compaction",
            ]),
            pending_compaction_bytes: self.sum_property("rocksdb.estimate-pending-compaction-bytes"),
            memtable_bytes: self.sum_property("rocksdb.cur-size-all-mem-tables"),
            block_cache_hits: tk("rocksdb.block.cache.hit"),
            block_cache_misses: tk("rocksdb.block.cache.miss"),
            bloom_checked: tk("rocksdb.bloom.filter.useful") + tk("rocksdb.bloom.filter.full.positive"),
            bloom_useful: tk("rocksdb.bloom.filter.useful"),
            gets: tk("rocksdb.number.keys.read"),
            // Found in a memtable (a tombstone there counts too: RocksDB's MEMTABLE_HIT) or in a table file.
            gets_found: tk("rocksdb.memtable.hit")
                + tk("rocksdb.l0.hit")
                + tk("rocksdb.l1.hit")
                + tk("rocksdb.l2andup.hit"),
            // RocksDB's own histograms, as its statistics print them.
            histograms: self
                .opts
                .get_statistics()
                .map(|s| s.lines().filter_map(HistogramLine::parse).collect())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_layout() {
        let mut b = RocksBatch::default();
        b.put(b"k", b"v");
        b.single_delete(b"k");
        assert_eq!(b.len(), 2);
        assert_eq!(&b.data()[8..12], &2u32.to_le_bytes());
        assert_eq!(&b.data()[12..], &[TYPE_VALUE, 1, b'k', 1, b'v', TYPE_SINGLE_DELETION, 1, b'k']);
        let long = vec![7u8; 300];
        b.clear();
        assert!(b.is_empty());
        b.merge(b"m", &long);
        // 300 as varint32: 0xac 0x02.
        assert_eq!(&b.data()[12..18], &[TYPE_MERGE, 1, b'm', 0xac, 0x02, 7]);
        assert_eq!(b.data().len(), 12 + 5 + 300);
    }
}
