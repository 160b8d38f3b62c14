//! [`Engine`] for ShaleDB: db_bench's flags mapped onto [`shaledb::Options`] (same names where RocksDB and
//! ShaleDB share a knob), and ShaleDB's statistics mapped onto [`EngineSample`].

use crate::db_bench::flags::{BenchFlags, Compression};
use crate::engine::column_family_name;
use crate::engine::{
    Engine, EngineBatch, EngineIter, EngineResult, EngineSample, EngineSstWriter, HistogramLine, IterOptions,
    LevelSample, TxnOutcome, TxnStep, WriteMode,
};
use shaledb::ingest::{IngestExternalFileOptions, SstFileWriter};
use shaledb::{
    ColumnFamily, ColumnFamilyDescriptor, CompressionType, Cursor, Db, OptimisticTransactionDb, Options, ReadOptions,
    Transaction, TransactionDb, TransactionDbOptions, TransactionOptions, WriteBatch, WriteOptions,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A ShaleDB database driven by the benchmarks.
pub struct ShaleDb {
    store: Store,
    /// `--num_column_families` handles, "default" first (empty when the database has the default one only).
    families: Vec<ColumnFamily>,
    read: ReadOptions,
    /// `--transaction_set_snapshot` and `--transaction_lock_timeout`.
    txn_options: TransactionOptions,
}

/// The database, with the transaction layer `--transaction_db` / `--optimistic_transaction_db` ask for.
enum Store {
    Plain(Db),
    Pessimistic(TransactionDb),
    Optimistic(OptimisticTransactionDb),
}

impl ShaleDb {
    fn db(&self) -> &Db {
        match &self.store {
            Store::Plain(db) => db,
            Store::Pessimistic(t) => t.db(),
            Store::Optimistic(t) => t.db(),
        }
    }
}

impl ShaleDb {
    /// Adds the live files and pending compaction bytes of the families other than "default" to `sample` (the
    /// engine's statistics give the default family's shape; their memtable, flush and compaction figures are
    /// the database's already).
    fn add_other_families(&self, sample: &mut EngineSample) {
        for f in self.families.iter().skip(1) {
            if let Some(text) = self.db().property_cf(f, "rocksdb.sstables") {
                for (level, bytes) in sstables_files(&text) {
                    if level >= sample.levels.len() {
                        sample.levels.resize(level + 1, LevelSample::default());
                    }
                    sample.levels[level].files += 1;
                    sample.levels[level].bytes += bytes;
                }
            }
            sample.pending_compaction_bytes +=
                self.db().property_int_cf(f, "rocksdb.estimate-pending-compaction-bytes").unwrap_or(0);
        }
    }

    /// The handle of family `cf` (not 0: the default family goes through the plain calls).
    fn family(&self, cf: usize) -> EngineResult<&ColumnFamily> {
        self.families.get(cf).ok_or_else(|| {
            format!("column family {cf} does not exist: the database has {} families", self.num_families()).into()
        })
    }
}

/// The (level, size) of each file the `sstables` property lists: `--- level N ---` lines, then one
/// ` number:size[...]...` line per file.
fn sstables_files(text: &str) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    let mut level = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("--- level ").and_then(|r| r.strip_suffix(" ---")) {
            level = n.trim().parse().ok();
            continue;
        }
        let size = line.trim_start().split_once(':').and_then(|(_, r)| r.split('[').next()?.parse::<u64>().ok());
        if let (Some(l), Some(size)) = (level, size) {
            out.push((l, size));
        }
    }
    out
}

/// Whether a transaction error is one `randomtransaction` expects under contention (the transaction is
/// counted as aborted, as db_bench counts it as a failure, not an error).
fn expected_conflict(e: &shaledb::Error) -> bool {
    matches!(e, shaledb::Error::Busy(_) | shaledb::Error::TimedOut(_))
}

/// The body of one `randomtransaction` transaction; `Ok(false)` when it met an expected conflict.
fn run_step(t: &mut Transaction<'_>, step: &TxnStep<'_>) -> shaledb::Result<bool> {
    for (key, &gfu) in step.keys.iter().zip(step.get_for_update) {
        let read = if gfu { t.get_for_update(key) } else { t.get(key) };
        let value = match read {
            Ok(v) => v,
            Err(e) if expected_conflict(&e) => return Ok(false),
            Err(e) => return Err(e),
        };
        let n = match value {
            None => 0,
            Some(v) => crate::db_bench::randomtxn::decode_counter(key, &v)
                .map_err(|msg| shaledb::Error::InvalidArgument(format!("randomtransaction: {msg}")))?,
        };
        // db_bench deletes (or single-deletes) the key before the put, in the same transaction.
        for r in [t.delete(key), t.put(key, n.wrapping_add(step.incr).to_string())] {
            match r {
                Ok(()) => {}
                Err(e) if expected_conflict(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }
    Ok(true)
}

fn codec(c: Compression) -> CompressionType {
    match c {
        Compression::None => CompressionType::None,
        Compression::Snappy => CompressionType::Snappy,
        Compression::Lz4 => CompressionType::Lz4,
        Compression::Zstd => CompressionType::Zstd,
    }
}

/// The database options `flags` ask for.
pub fn options_from_flags(f: &BenchFlags) -> EngineResult<Options> {
    let mut o = Options {
        create_if_missing: true,
        write_buffer_size: f.write_buffer_size,
        max_write_buffer_number: f.max_write_buffer_number,
        level0_file_num_compaction_trigger: f.level0_file_num_compaction_trigger,
        level0_slowdown_writes_trigger: f.level0_slowdown_writes_trigger,
        level0_stop_writes_trigger: f.level0_stop_writes_trigger,
        num_levels: f.num_levels,
        max_bytes_for_level_base: f.max_bytes_for_level_base,
        max_bytes_for_level_multiplier: f.max_bytes_for_level_multiplier,
        level_compaction_dynamic_level_bytes: f.level_compaction_dynamic_level_bytes,
        target_file_size_base: f.target_file_size_base,
        max_background_jobs: f.background_jobs(),
        max_subcompactions: f.subcompactions,
        delayed_write_rate: f.delayed_write_rate,
        disable_auto_compactions: f.disable_auto_compactions,
        ..Options::default()
    };
    let c = codec(f.compression().ok_or_else(|| format!("unknown compression '{}'", f.compression_type))?);
    o.compression = c;
    if f.min_level_to_compress >= 0 {
        let min = f.min_level_to_compress as usize;
        o.compression_per_level = (0..f.num_levels).map(|l| if l < min { CompressionType::None } else { c }).collect();
    }
    let levels =
        f.compression_levels().ok_or_else(|| format!("bad --compression_per_level '{}'", f.compression_per_level))?;
    if !levels.is_empty() {
        o.compression_per_level = levels.into_iter().map(codec).collect();
    }
    o.bottommost_compression = f.bottommost().map(codec);
    compaction_style(f, &mut o)?;
    o.block_size = f.block_size;
    // db_bench: a negative --bloom_bits keeps the table default, which has no filter; 0 means none.
    o.bloom_bits_per_key = if f.bloom_bits > 0.0 { f.bloom_bits } else { 0.0 };
    o.block_cache_size = usize::try_from(f.cache_size).unwrap_or(usize::MAX);
    o.cache_index_and_filter_blocks = f.cache_index_and_filter_blocks;
    o.max_open_files = f.open_files;
    o.use_direct_reads = f.use_direct_reads;
    o.use_direct_io_for_flush_and_compaction = f.use_direct_io_for_flush_and_compaction;
    o.advise_random_on_open = f.advise_random_on_open;
    o.block_cache_shard_bits = f.cache_numshardbits;
    o.bytes_per_sync = f.bytes_per_sync;
    o.wal_bytes_per_sync = f.wal_bytes_per_sync;
    o.stats_dump_period_sec = u32::try_from(f.stats_dump_period_sec)
        .map_err(|_| format!("--stats_dump_period_sec={} is too large", f.stats_dump_period_sec))?;
    if f.rate_limiter_bytes_per_sec > 0 {
        // db_bench's fairness: 10.
        o.rate_limiter = Some(shaledb::RateLimiter::new(
            f.rate_limiter_bytes_per_sec,
            f.rate_limiter_refill_period_us,
            10,
            f.rate_limiter_auto_tuned,
        )?);
    }
    o.enable_blob_files = f.enable_blob_files;
    o.min_blob_size = f.min_blob_size;
    o.blob_file_size = f.blob_file_size;
    let blob_codec = Compression::parse(&f.blob_compression_type)
        .ok_or_else(|| format!("unknown --blob_compression_type '{}'", f.blob_compression_type))?;
    o.blob_compression_type = codec(blob_codec);
    o.enable_blob_garbage_collection = f.enable_blob_garbage_collection;
    o.blob_garbage_collection_age_cutoff = f.blob_garbage_collection_age_cutoff;
    o.blob_garbage_collection_force_threshold = f.blob_garbage_collection_force_threshold;
    o.blob_compaction_readahead_size = f.blob_compaction_readahead_size;
    if let Some(n) = f.compaction_readahead_size {
        o.compaction_readahead_size = n;
    }
    o.soft_pending_compaction_bytes_limit = f.soft_pending_compaction_bytes_limit;
    o.hard_pending_compaction_bytes_limit = f.hard_pending_compaction_bytes_limit;
    o.allow_concurrent_memtable_write = f.allow_concurrent_memtable_write;
    o.prefix_extractor = (f.prefix_size > 0).then_some(shaledb::PrefixExtractor::Fixed(f.prefix_size));
    o.whole_key_filtering = f.whole_key_filtering;
    o.memtable_prefix_bloom_size_ratio = f.memtable_bloom_size_ratio;
    o.memtable_rep = match f.memtablerep.as_str() {
        "skip_list" => shaledb::MemTableRep::SkipList,
        "vector" => shaledb::MemTableRep::Vector,
        "indexed_skip_list" => shaledb::MemTableRep::IndexedSkipList,
        other => return Err(format!("unknown --memtablerep '{other}' (skip_list, vector, indexed_skip_list)").into()),
    };
    if !f.merge_operator.is_empty() {
        o.merge_operator = Some(
            shaledb::merge::builtin(&f.merge_operator)
                .ok_or_else(|| format!("unknown merge operator '{}'", f.merge_operator))?,
        );
    }
    Ok(o)
}

/// The read options of every read, as db_bench sets its `read_options_`: `--readahead_size`,
/// `--prefix_same_as_start` and `--total_order_seek` apply to all iterators (point lookups never read ahead).
pub fn read_options_from_flags(f: &BenchFlags) -> ReadOptions {
    ReadOptions {
        readahead_size: f.readahead_size,
        verify_checksums: f.verify_checksum,
        prefix_same_as_start: f.prefix_same_as_start,
        total_order_seek: f.total_order_seek,
        ..ReadOptions::default()
    }
}

/// The read options of a cursor: `base` (from the flags) with the cursor's bounds, `fill_cache`, and its
/// `readahead_size` when it sets one (0 keeps the flags').
fn iter_read_options(base: &ReadOptions, o: &IterOptions<'_>) -> ReadOptions {
    ReadOptions {
        iterate_lower_bound: o.lower.map(<[u8]>::to_vec),
        iterate_upper_bound: o.upper.map(<[u8]>::to_vec),
        fill_cache: o.fill_cache,
        readahead_size: if o.readahead_size > 0 { o.readahead_size } else { base.readahead_size },
        ..base.clone()
    }
}

impl EngineIter for Cursor {
    fn seek_to_first(&mut self) {
        Cursor::seek_to_first(self)
    }
    fn seek_to_last(&mut self) {
        Cursor::seek_to_last(self)
    }
    fn seek(&mut self, key: &[u8]) {
        Cursor::seek(self, key)
    }
    fn valid(&self) -> bool {
        Cursor::valid(self)
    }
    fn next(&mut self) {
        Cursor::next(self)
    }
    fn prev(&mut self) {
        Cursor::prev(self)
    }
    fn key(&self) -> &[u8] {
        Cursor::key(self)
    }
    fn value(&self) -> &[u8] {
        Cursor::value(self)
    }
    fn status(&self) -> EngineResult<()> {
        Cursor::status(self).map_err(Into::into)
    }
}

fn write_options(m: WriteMode) -> WriteOptions {
    WriteOptions { sync: m.sync, disable_wal: m.disable_wal }
}

impl EngineBatch for WriteBatch {
    fn put(&mut self, key: &[u8], value: &[u8]) {
        WriteBatch::put(self, key, value);
    }
    fn delete(&mut self, key: &[u8]) {
        WriteBatch::delete(self, key);
    }
    fn single_delete(&mut self, key: &[u8]) {
        WriteBatch::single_delete(self, key);
    }
    fn merge(&mut self, key: &[u8], operand: &[u8]) {
        WriteBatch::merge(self, key, operand);
    }
    fn len(&self) -> usize {
        self.count() as usize
    }
    fn clear(&mut self) {
        WriteBatch::clear(self);
    }
}

/// One of the engine's job-time histograms (microseconds) as a `--statistics` line.
impl EngineSstWriter for SstFileWriter {
    fn put(&mut self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        SstFileWriter::put(self, key, value).map_err(Into::into)
    }
    fn finish(&mut self) -> EngineResult<()> {
        SstFileWriter::finish(self).map(drop).map_err(Into::into)
    }
}

fn histogram_line(name: &str, h: &shaledb::Histogram) -> HistogramLine {
    HistogramLine {
        name: name.to_string(),
        p50: h.percentile(50.0),
        p95: h.percentile(95.0),
        p99: h.percentile(99.0),
        p100: h.max() as f64,
        count: h.count(),
        sum: h.sum(),
    }
}

impl Engine for ShaleDb {
    type Iter<'a> = Cursor;
    type Batch = WriteBatch;
    type SstWriter<'a> = SstFileWriter;
    const HAS_SINGLE_DELETE: bool = true;

    fn name() -> &'static str {
        "ShaleDB"
    }

    fn open(path: &Path, flags: &BenchFlags) -> EngineResult<Self> {
        let opts = options_from_flags(flags)?;
        let n = flags.column_families();
        let (db, families) = if n > 1 {
            // As db_bench: every family takes the database's options, and a missing one is created.
            let descriptors =
                (1..n).map(|i| ColumnFamilyDescriptor::new(column_family_name(i), opts.clone())).collect();
            let db = Db::open_with_column_families(path, opts, descriptors)?;
            let mut handles = vec![db.default_column_family()];
            for i in 1..n {
                let name = column_family_name(i);
                handles.push(db.column_family(&name).ok_or_else(|| format!("column family {name} was not opened"))?);
            }
            (db, handles)
        } else {
            (Db::open(path, opts)?, Vec::new())
        };
        let timeout = Some(Duration::from_millis(flags.transaction_lock_timeout));
        let store = if flags.transaction_db {
            let opts = TransactionDbOptions { transaction_lock_timeout: timeout, default_lock_timeout: timeout };
            Store::Pessimistic(TransactionDb::from_db(db, opts))
        } else if flags.optimistic_transaction_db {
            Store::Optimistic(OptimisticTransactionDb::from_db(db))
        } else {
            Store::Plain(db)
        };
        // Every randomtransaction transaction reads at a snapshot, as db_bench's inserter makes its
        // pessimistic ones do (it calls SetSnapshot on each): a key changed after the snapshot then cannot be
        // written (pessimistic) or committed (optimistic), so no increment is lost between a plain read and
        // the write. (db_bench's optimistic inserter takes none, and can lose such an update.)
        let txn_options =
            TransactionOptions { set_snapshot: true, lock_timeout: timeout, ..TransactionOptions::default() };
        Ok(ShaleDb { store, families, read: read_options_from_flags(flags), txn_options })
    }

    fn random_transaction(&self, mode: WriteMode, step: &TxnStep<'_>) -> EngineResult<TxnOutcome> {
        let wo = write_options(mode);
        let mut t = match &self.store {
            Store::Pessimistic(tdb) => tdb.begin(&wo, &self.txn_options),
            Store::Optimistic(odb) => odb.begin(&wo, &self.txn_options),
            Store::Plain(_) => {
                return Err(
                    "randomtransaction's transactions need --transaction_db or --optimistic_transaction_db".into()
                )
            }
        };
        if !run_step(&mut t, step)? {
            t.rollback()?;
            return Ok(TxnOutcome::Aborted);
        }
        if step.rollback {
            t.rollback()?;
            return Ok(TxnOutcome::RolledBack);
        }
        match t.commit() {
            Ok(()) => Ok(TxnOutcome::Committed),
            Err(e) if expected_conflict(&e) => Ok(TxnOutcome::Aborted),
            Err(e) => Err(e.into()),
        }
    }

    fn check_options(flags: &BenchFlags) -> EngineResult<()> {
        options_from_flags(flags)?.validate().map_err(Into::into)
    }

    fn destroy(path: &Path) -> EngineResult<usize> {
        if !path.exists() {
            return Ok(0);
        }
        // Refuses a directory that holds no ShaleDB database (and is not empty), naming what is there.
        Ok(shaledb::destroy(path)?.len())
    }

    fn close(self) -> EngineResult<()> {
        let db = match self.store {
            Store::Plain(db) => db,
            Store::Pessimistic(t) => t.into_db(),
            Store::Optimistic(t) => t.into_db(),
        };
        db.close().map_err(Into::into)
    }

    fn put(&self, mode: WriteMode, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.db().put_opt(&write_options(mode), key, value).map_err(Into::into)
    }

    fn delete(&self, mode: WriteMode, key: &[u8]) -> EngineResult<()> {
        self.db().delete_opt(&write_options(mode), key).map_err(Into::into)
    }

    fn merge(&self, mode: WriteMode, key: &[u8], operand: &[u8]) -> EngineResult<()> {
        self.db().merge_opt(&write_options(mode), key, operand).map_err(Into::into)
    }

    fn delete_range(&self, mode: WriteMode, begin: &[u8], end: &[u8]) -> EngineResult<()> {
        self.db().delete_range_opt(&write_options(mode), begin, end).map_err(Into::into)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> EngineResult<bool> {
        self.db().get_into(&self.read, key, out).map_err(Into::into)
    }

    fn multi_get(&self, keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> EngineResult<()> {
        values.clear();
        for r in self.db().multi_get_opt(&self.read, keys) {
            values.push(r?);
        }
        Ok(())
    }

    fn num_families(&self) -> usize {
        self.families.len().max(1)
    }

    fn put_cf(&self, cf: usize, mode: WriteMode, key: &[u8], value: &[u8]) -> EngineResult<()> {
        match cf {
            0 => self.put(mode, key, value),
            _ => self.db().put_cf_opt(&write_options(mode), self.family(cf)?, key, value).map_err(Into::into),
        }
    }

    fn delete_cf(&self, cf: usize, mode: WriteMode, key: &[u8]) -> EngineResult<()> {
        match cf {
            0 => self.delete(mode, key),
            _ => self.db().delete_cf_opt(&write_options(mode), self.family(cf)?, key).map_err(Into::into),
        }
    }

    fn merge_cf(&self, cf: usize, mode: WriteMode, key: &[u8], operand: &[u8]) -> EngineResult<()> {
        if cf == 0 {
            return self.merge(mode, key, operand);
        }
        // No `merge_cf_opt`: a one-entry batch carries the write options.
        let mut b = WriteBatch::new();
        b.merge_cf(self.family(cf)?, key, operand);
        self.db().write_opt(&write_options(mode), &b).map_err(Into::into)
    }

    fn delete_range_cf(&self, cf: usize, mode: WriteMode, begin: &[u8], end: &[u8]) -> EngineResult<()> {
        if cf == 0 {
            return self.delete_range(mode, begin, end);
        }
        let mut b = WriteBatch::new();
        b.delete_range_cf(self.family(cf)?, begin, end);
        self.db().write_opt(&write_options(mode), &b).map_err(Into::into)
    }

    fn get_cf(&self, cf: usize, key: &[u8], out: &mut Vec<u8>) -> EngineResult<bool> {
        if cf == 0 {
            return self.get(key, out);
        }
        // NB: the engine has no `get_into` for a family, so the value comes in a new vector.
        match self.db().get_cf_opt(&self.read, self.family(cf)?, key)? {
            Some(v) => {
                *out = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn multi_get_cf(&self, cfs: &[usize], keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> EngineResult<()> {
        if cfs.iter().all(|&cf| cf == 0) {
            return self.multi_get(keys, values);
        }
        // One MultiGet per family named, each over its keys; the values go back in the keys' order.
        values.clear();
        values.resize(keys.len(), None);
        let mut done = vec![false; keys.len()];
        for (i, &cf) in cfs.iter().enumerate() {
            if done[i] {
                continue;
            }
            let idx: Vec<usize> = (i..keys.len()).filter(|&j| cfs.get(j) == Some(&cf)).collect();
            let family = self.family(cf)?;
            let got = self.db().multi_get_cf(&self.read, family, idx.iter().map(|&j| &keys[j]));
            for (&j, r) in idx.iter().zip(got) {
                values[j] = r?;
                done[j] = true;
            }
        }
        Ok(())
    }

    fn property_cf(&self, cf: usize, name: &str) -> Option<String> {
        match cf {
            0 => self.property(name),
            _ => self.db().property_cf(self.families.get(cf)?, name),
        }
    }

    fn iter_with(&self, o: &IterOptions<'_>) -> Cursor {
        self.db().cursor_opt(&iter_read_options(&self.read, o))
    }

    fn new_batch(&self) -> WriteBatch {
        WriteBatch::new()
    }

    fn write(&self, mode: WriteMode, batch: &WriteBatch) -> EngineResult<()> {
        self.db().write_opt(&write_options(mode), batch).map_err(Into::into)
    }

    fn sst_writer(&self, path: &Path) -> EngineResult<SstFileWriter> {
        let mut w = SstFileWriter::create(self.db().options());
        w.open(path)?;
        Ok(w)
    }

    fn ingest(&self, paths: &[PathBuf]) -> EngineResult<()> {
        let o = IngestExternalFileOptions { move_files: true, ..IngestExternalFileOptions::default() };
        self.db().ingest_external_file(paths, &o).map_err(Into::into)
    }

    fn flush(&self) -> EngineResult<()> {
        self.db().flush().map_err(Into::into)
    }

    fn compact_level(&self, level: usize) -> EngineResult<Option<(usize, usize, usize)>> {
        self.db().compact_level(level).map_err(Into::into)
    }

    fn compact_all(&self) -> EngineResult<()> {
        self.db().compact_range(None, None)?;
        for f in self.families.iter().skip(1) {
            self.db().compact_range_cf(f, None, None)?;
        }
        Ok(())
    }

    fn wait_for_compaction(&self) -> EngineResult<()> {
        self.db().wait_for_compaction().map_err(Into::into)
    }

    fn property(&self, name: &str) -> Option<String> {
        self.db().property(name)
    }

    fn sample(&self) -> EngineSample {
        let s = self.db().statistics();
        let mut sample = EngineSample {
            uptime_secs: s.uptime_secs,
            levels: s
                .levels
                .iter()
                .map(|l| LevelSample {
                    files: l.files,
                    bytes: l.bytes,
                    write_bytes: l.compaction.bytes_written,
                    read_bytes: l.compaction.bytes_read_input_level + l.compaction.bytes_read_output_level,
                    compactions: l.compaction.count,
                    compaction_micros: l.compaction.micros,
                })
                .collect(),
            user_bytes_written: s.bytes_written,
            keys_written: s.keys_written,
            flush_bytes: s.flush_bytes,
            compaction_bytes_read: s.compaction_bytes_read,
            compaction_bytes_written: s.compaction_bytes_written,
            wal_bytes: s.wal_bytes,
            wal_syncs: s.wal_syncs,
            stall_micros: s.stall_micros,
            slowdowns: s.slowdown_count,
            stops: s.stop_count,
            pending_compaction_bytes: s.pending_compaction_bytes,
            memtable_bytes: s.memtable_bytes,
            block_cache_hits: s.block_cache_hits,
            block_cache_misses: s.block_cache_misses,
            bloom_checked: s.bloom_checked,
            bloom_useful: s.bloom_useful,
            gets: s.gets,
            gets_found: s.gets_found,
            histograms: vec![
                histogram_line("rocksdb.db.flush.micros", &s.flush_times),
                histogram_line("rocksdb.compaction.times.micros", &s.compaction_times),
                histogram_line("rocksdb.compaction.times.cpu_micros", &s.compaction_cpu_times),
            ],
        };
        if self.families.len() > 1 {
            self.add_other_families(&mut sample);
        }
        sample
    }
}

/// `--compaction_style` and the `--universal_*` / `--fifo_compaction_*` flags, as db_bench sets them (a 0 for a
/// universal option keeps RocksDB's default).
fn compaction_style(f: &BenchFlags, o: &mut Options) -> EngineResult<()> {
    o.compaction_style = shaledb::CompactionStyle::from_number(u64::from(f.compaction_style))
        .ok_or_else(|| format!("unknown --compaction_style {}", f.compaction_style))?;
    let u = &mut o.compaction_options_universal;
    for (flag, slot) in [
        (f.universal_size_ratio, &mut u.size_ratio),
        (f.universal_min_merge_width, &mut u.min_merge_width),
        (f.universal_max_merge_width, &mut u.max_merge_width),
        (f.universal_max_size_amplification_percent, &mut u.max_size_amplification_percent),
    ] {
        if flag != 0 {
            *slot = flag;
        }
    }
    u.allow_trivial_move = f.universal_allow_trivial_move;
    let fifo = &mut o.compaction_options_fifo;
    if f.fifo_compaction_max_table_files_size_mb > 0 {
        fifo.max_table_files_size = f.fifo_compaction_max_table_files_size_mb.saturating_mul(1 << 20);
    }
    fifo.allow_compaction = f.fifo_compaction_allow_compaction;
    fifo.ttl = f.fifo_compaction_ttl;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> BenchFlags {
        BenchFlags::parse_args(args.iter().copied()).unwrap()
    }

    #[test]
    fn read_flags_map_to_the_engine_options() {
        let f = flags(&["--use_direct_reads=1", "--advise_random_on_open=0", "--readahead_size=2097152"]);
        let o = options_from_flags(&f).unwrap();
        assert!(o.use_direct_reads && !o.advise_random_on_open && !o.use_direct_io_for_flush_and_compaction);
        let o = options_from_flags(&flags(&["--use_direct_io_for_flush_and_compaction"])).unwrap();
        assert!(o.use_direct_io_for_flush_and_compaction && !o.use_direct_reads);
        let o = options_from_flags(&flags(&["--use_direct_io_for_flush_and_compaction=0"])).unwrap();
        assert!(!o.use_direct_io_for_flush_and_compaction);
        let base = read_options_from_flags(&f);
        assert_eq!(base.readahead_size, 2 << 20);
        // A cursor's own readahead_size wins; 0 keeps the flag's.
        let cursor = IterOptions { lower: Some(b"a"), upper: Some(b"b"), readahead_size: 0, fill_cache: false };
        let ro = iter_read_options(&base, &cursor);
        assert_eq!(ro.readahead_size, 2 << 20);
        assert!(!ro.fill_cache);
        assert_eq!(
            (ro.iterate_lower_bound.as_deref(), ro.iterate_upper_bound.as_deref()),
            (Some(&b"a"[..]), Some(&b"b"[..]))
        );
        let ro = iter_read_options(&base, &IterOptions { readahead_size: 65536, fill_cache: true, ..cursor });
        assert_eq!(ro.readahead_size, 65536);
        assert!(ro.fill_cache);

        let d = options_from_flags(&flags(&[])).unwrap();
        assert!(
            !d.use_direct_reads && !d.use_direct_io_for_flush_and_compaction && d.advise_random_on_open,
            "db_bench's defaults"
        );
        assert_eq!(read_options_from_flags(&flags(&[])).readahead_size, 0);
    }

    #[test]
    fn operations_flags_map_to_the_engine_options() {
        let f = flags(&[
            "--rate_limiter_bytes_per_sec=1048576",
            "--rate_limiter_refill_period_us=50000",
            "--rate_limiter_auto_tuned",
            "--wal_bytes_per_sync=65536",
            "--stats_dump_period_sec=30",
        ]);
        let o = options_from_flags(&f).unwrap();
        assert_eq!(o.rate_limiter.as_ref().map(|l| l.params()), Some((1 << 20, 50_000, 10, true)));
        assert_eq!((o.wal_bytes_per_sync, o.stats_dump_period_sec), (65536, 30));
        let d = options_from_flags(&flags(&[])).unwrap();
        assert!(d.rate_limiter.is_none());
        assert_eq!((d.wal_bytes_per_sync, d.stats_dump_period_sec), (0, 600));
    }

    /// Writes `n` keys through the engine and flushes them into tables.
    fn load(path: &Path, n: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
        let db = ShaleDb::open(path, &flags(&["--compression_type=none", "--write_buffer_size=262144"])).unwrap();
        let mode = WriteMode { sync: false, disable_wal: false };
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            (0..n).map(|i| (format!("{i:016}").into_bytes(), format!("value {i} ").repeat(10).into_bytes())).collect();
        for (k, v) in &want {
            db.put(mode, k, v).unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
        want
    }

    fn read_all(db: &ShaleDb, readahead_size: usize, fill_cache: bool) -> EngineResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut it = db.iter_with(&IterOptions { readahead_size, fill_cache, ..IterOptions::default() });
        let mut out = Vec::new();
        it.seek_to_first();
        while EngineIter::valid(&it) {
            out.push((EngineIter::key(&it).to_vec(), EngineIter::value(&it).to_vec()));
            EngineIter::next(&mut it);
        }
        EngineIter::status(&it)?;
        Ok(out)
    }

    /// A directory on the disk file system of the workspace's target/, where O_DIRECT works (a /tmp on tmpfs
    /// refuses it before Linux 6.6).
    fn real_dir() -> tempfile::TempDir {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp");
        std::fs::create_dir_all(&base).unwrap();
        tempfile::tempdir_in(base).unwrap()
    }

    #[test]
    fn direct_reads_return_the_same_data() {
        let dir = real_dir();
        let want = load(dir.path(), 20_000);
        for args in
            [&["--use_direct_reads=0"][..], &["--use_direct_reads=1"], &["--use_direct_reads=1", "--cache_size=0"]]
        {
            let db = ShaleDb::open(dir.path(), &flags(args)).unwrap();
            for readahead in [0, 64 << 10, 2 << 20] {
                for fill_cache in [false, true] {
                    assert!(read_all(&db, readahead, fill_cache).unwrap() == want, "{args:?} {readahead} {fill_cache}");
                }
            }
            let mut out = Vec::new();
            for (k, v) in want.iter().step_by(997) {
                assert!(db.get(k, &mut out).unwrap());
                assert_eq!(&out, v);
            }
            db.close().unwrap();
        }
    }

    #[test]
    fn corrupt_block_fails_its_checksum_with_direct_reads() {
        let dir = real_dir();
        load(dir.path(), 20_000);
        let mut tables: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sst"))
            .collect();
        tables.sort();
        let sst = tables.first().expect("the load wrote a table");
        // A byte in the second data block (4 KiB blocks): the table's meta blocks stay intact, so it opens.
        let mut bytes = std::fs::read(sst).unwrap();
        bytes[6000] ^= 0x01;
        std::fs::write(sst, &bytes).unwrap();
        for readahead in [0, 2 << 20] {
            let db = ShaleDb::open(dir.path(), &flags(&["--use_direct_reads=1", "--cache_size=0"])).unwrap();
            let e = read_all(&db, readahead, false).unwrap_err();
            assert!(e.to_string().contains("checksum mismatch"), "readahead {readahead}: {e}");
            db.close().unwrap();
        }
    }
}
