//! [`Engine`] for RocksDB (cargo feature `rocksdb`): the `rocksdb` crate 0.20.1 linked to the system's
//! librocksdb (Debian's 7.8.3, the library of the installed `db_bench`).
//!
//! The flags map onto RocksDB's options of the same names, set as db_bench 7.8's
//! `InitializeOptionsFromFlags`/`InitializeOptionsGeneral` set them, so that `shaledb bench --engine rocksdb`
//! runs the database `db_bench` would run with the same flags. Options db_bench sets from flags this tool
//! does not have are set to db_bench's defaults where those differ from RocksDB's (see [`options_from_flags`]).
//! A flag RocksDB cannot honour is an error naming it.
//!
//! Counters come from RocksDB's statistics (tickers, always enabled here) and properties; see
//! [`RocksDb::sample`].

use crate::engine::{
    Engine, EngineBatch, EngineIter, EngineResult, EngineSample, HistogramLine, IterOptions, LevelSample, WriteMode,
};
use crate::flags::{BenchFlags, Compression};
use rocksdb::{
    BlockBasedOptions, BottommostLevelCompaction, Cache, CompactOptions, DBCompressionType, DBRawIterator, Env,
    FlushOptions, Options, ReadOptions, WriteOptions, DB,
};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// A RocksDB database driven by the benchmarks.
pub struct RocksDb {
    db: DB,
    /// Kept for its statistics object (`Options::get_statistics`).
    opts: Options,
    read: ReadOptions,
    /// The four durability modes, built once (creating a `WriteOptions` allocates through the C API).
    writes: [WriteOptions; 4],
    /// `--readahead_size`: iterators' readahead unless [`IterOptions::readahead_size`] sets one.
    readahead_size: usize,
    num_levels: usize,
    opened: Instant,
}

fn codec(c: Compression) -> DBCompressionType {
    match c {
        Compression::None => DBCompressionType::None,
        Compression::Snappy => DBCompressionType::Snappy,
        Compression::Lz4 => DBCompressionType::Lz4,
        Compression::Zstd => DBCompressionType::Zstd,
    }
}

fn bad(flag: &str, msg: impl std::fmt::Display) -> crate::engine::EngineError {
    format!("--{flag}: {msg}").into()
}

fn c_int(flag: &str, v: usize) -> EngineResult<i32> {
    i32::try_from(v).map_err(|_| bad(flag, format!("{v} is too large for RocksDB (at most {})", i32::MAX)))
}

/// db_bench's default for `hard_pending_compaction_bytes_limit` (RocksDB's own is 256 GiB).
const DB_BENCH_HARD_PENDING_LIMIT: usize = 128 << 30;
/// db_bench's default for `soft_pending_compaction_bytes_limit` (the same as RocksDB's).
const DB_BENCH_SOFT_PENDING_LIMIT: usize = 64 << 30;
/// db_bench's default for `table_cache_numshardbits` (RocksDB's own is 6).
const DB_BENCH_TABLE_CACHE_SHARD_BITS: i32 = 4;

/// RocksDB's name for a merge operator `--merge_operator` names (the name db_bench's
/// `MergeOperator::CreateFromString` gives it, recorded in the OPTIONS file).
fn merge_operator_name(flag: &str) -> &'static str {
    match flag {
        "uint64add" => "UInt64AddOperator",
        "put" | "put_v1" => "PutOperator",
        _ => "StringAppendOperator",
    }
}

/// Options RocksDB has but the `rocksdb` crate 0.20.1 cannot set (no setter, no C API function in 7.8):
/// loaded from an OPTIONS file written for the purpose, the way `db_bench --options_file` loads them.
fn base_options(f: &BenchFlags) -> EngineResult<Options> {
    let dir = tempfile::Builder::new().prefix("shaledb-bench-rocksdb-options-").tempdir()?;
    let text = format!(
        "[Version]\n  rocksdb_version=7.8.3\n  options_file_version=1.1\n\n[DBOptions]\n  delayed_write_rate={}\n\n\
         [CFOptions \"default\"]\n",
        f.delayed_write_rate
    );
    std::fs::write(dir.path().join("OPTIONS-000001"), text)?;
    let cache = Cache::new_lru_cache(0)?;
    let (opts, _families) = Options::load_latest(dir.path(), Env::new()?, false, cache)
        .map_err(|e| bad("delayed_write_rate", format!("RocksDB did not take {}: {e}", f.delayed_write_rate)))?;
    Ok(opts)
}

/// The RocksDB options `flags` ask for. Every flag that [`crate::shale::options_from_flags`] maps is mapped
/// to RocksDB's option of the same name, as db_bench does:
///
/// | flag | RocksDB option |
/// |---|---|
/// | `--write_buffer_size`, `--max_write_buffer_number` | same names |
/// | `--level0_file_num_compaction_trigger`, `--level0_slowdown_writes_trigger`, `--level0_stop_writes_trigger` | same names |
/// | `--num_levels`, `--max_bytes_for_level_base`, `--max_bytes_for_level_multiplier` | same names |
/// | `--level_compaction_dynamic_level_bytes`, `--target_file_size_base` | same names |
/// | `--max_background_jobs`, `--max_background_compactions`, `--max_background_flushes` | same names (as given, as db_bench passes them) |
/// | `--delayed_write_rate` | `delayed_write_rate` (DBOptions, through an OPTIONS file) |
/// | `--disable_auto_compactions` | same name |
/// | `--compression_type`, `--min_level_to_compress` | `compression`, `compression_per_level` (db_bench's rule) |
/// | `--compression_per_level`, `--bottommost_compression` | same names |
/// | `--block_size`, `--cache_index_and_filter_blocks` | `BlockBasedTableOptions` of the same names |
/// | `--bloom_bits` | `filter_policy` = full Bloom filter (`NewBloomFilterPolicy`); <0 default (none), 0 none |
/// | `--cache_size` | `block_cache` = LRU cache of that size; 0: no block cache |
/// | `--open_files` | `max_open_files` |
/// | `--use_direct_reads`, `--advise_random_on_open` | same names |
/// | `--merge_operator` | `merge_operator` (uint64add, stringappend[:sep], put as Rust closures) |
/// | `--readahead_size` | `ReadOptions::readahead_size` of iterators |
///
/// Also as db_bench: `create_if_missing`, `enable_pipelined_write` = true, `table_cache_numshardbits` = 4,
/// `soft/hard_pending_compaction_bytes_limit` = 64/128 GiB, statistics enabled (db_bench's `--statistics`).
pub fn options_from_flags(f: &BenchFlags) -> EngineResult<Options> {
    if f.max_grandparent_overlap_factor.is_some() {
        return Err(bad(
            "max_grandparent_overlap_factor",
            "RocksDB 7.8 has no such option (db_bench 7.8 rejects the flag too); drop it",
        ));
    }
    if f.mmap_read == Some(true) {
        return Err(bad("mmap_read", "not supported by this benchmark tool (use --mmap_read=0)"));
    }
    let mut o = base_options(f)?;
    o.create_if_missing(true);
    o.create_missing_column_families(true);
    o.enable_statistics();

    o.set_write_buffer_size(f.write_buffer_size);
    o.set_max_write_buffer_number(c_int("max_write_buffer_number", f.max_write_buffer_number)?);
    o.set_level_zero_file_num_compaction_trigger(c_int(
        "level0_file_num_compaction_trigger",
        f.level0_file_num_compaction_trigger,
    )?);
    o.set_level_zero_slowdown_writes_trigger(c_int(
        "level0_slowdown_writes_trigger",
        f.level0_slowdown_writes_trigger,
    )?);
    o.set_level_zero_stop_writes_trigger(c_int("level0_stop_writes_trigger", f.level0_stop_writes_trigger)?);
    let num_levels = c_int("num_levels", f.num_levels)?;
    o.set_num_levels(num_levels);
    o.set_max_bytes_for_level_base(f.max_bytes_for_level_base);
    o.set_max_bytes_for_level_multiplier(f.max_bytes_for_level_multiplier);
    o.set_level_compaction_dynamic_level_bytes(f.level_compaction_dynamic_level_bytes);
    o.set_target_file_size_base(f.target_file_size_base);
    o.set_max_background_jobs(c_int("max_background_jobs", f.max_background_jobs)?);
    // db_bench passes the legacy per-kind limits through (-1: derive them from max_background_jobs).
    #[allow(deprecated)]
    {
        o.set_max_background_compactions(f.max_background_compactions.unwrap_or(-1) as i32);
        o.set_max_background_flushes(f.max_background_flushes.unwrap_or(-1) as i32);
    }
    o.set_disable_auto_compactions(f.disable_auto_compactions);

    let c = f.compression().ok_or_else(|| bad("compression_type", format!("unknown '{}'", f.compression_type)))?;
    o.set_compression_type(codec(c));
    if f.min_level_to_compress >= 0 {
        if f.min_level_to_compress > num_levels {
            return Err(bad(
                "min_level_to_compress",
                format!("{} is above --num_levels={}", f.min_level_to_compress, f.num_levels),
            ));
        }
        let min = f.min_level_to_compress;
        let levels: Vec<_> =
            (0..num_levels).map(|l| if l < min { DBCompressionType::None } else { codec(c) }).collect();
        o.set_compression_per_level(&levels);
    }
    let levels = f
        .compression_levels()
        .ok_or_else(|| bad("compression_per_level", format!("unknown compression in '{}'", f.compression_per_level)))?;
    if !levels.is_empty() {
        let list: Vec<_> = levels.into_iter().map(codec).collect();
        o.set_compression_per_level(&list);
    }
    if !f.bottommost_compression.is_empty() {
        let b = f
            .bottommost()
            .ok_or_else(|| bad("bottommost_compression", format!("unknown '{}'", f.bottommost_compression)))?;
        o.set_bottommost_compression_type(codec(b));
    }

    let mut t = BlockBasedOptions::default();
    t.set_block_size(f.block_size);
    // db_bench: a negative --bloom_bits keeps BlockBasedTableOptions' default filter (none); 0 is none.
    if f.bloom_bits > 0.0 {
        t.set_bloom_filter(f.bloom_bits, false);
    }
    if f.cache_size > 0 {
        let size = usize::try_from(f.cache_size).map_err(|_| bad("cache_size", "too large"))?;
        t.set_block_cache(&Cache::new_lru_cache(size)?);
    } else {
        t.disable_cache();
    }
    t.set_cache_index_and_filter_blocks(f.cache_index_and_filter_blocks);
    o.set_block_based_table_factory(&t);

    o.set_max_open_files(f.open_files);
    o.set_use_direct_reads(f.use_direct_reads);
    o.set_advise_random_on_open(f.advise_random_on_open);

    if !f.merge_operator.is_empty() {
        let op = shaledb::merge::builtin(&f.merge_operator)
            .ok_or_else(|| bad("merge_operator", format!("unknown merge operator '{}'", f.merge_operator)))?;
        // The three built-ins are associative: combining operands without the value below them is the full
        // merge with no existing value, so one closure serves RocksDB's full and partial merges. They are the
        // same functions ShaleDB calls, hence the same answers.
        o.set_merge_operator_associative(
            merge_operator_name(&f.merge_operator),
            move |key: &[u8], existing: Option<&[u8]>, operands: &rocksdb::MergeOperands| {
                let list: Vec<&[u8]> = operands.iter().collect();
                op.full_merge(key, existing, &list)
            },
        );
    }

    // db_bench's values for options it sets from flags this tool does not have.
    o.set_enable_pipelined_write(true);
    o.set_table_cache_num_shard_bits(DB_BENCH_TABLE_CACHE_SHARD_BITS);
    o.set_soft_pending_compaction_bytes_limit(DB_BENCH_SOFT_PENDING_LIMIT);
    o.set_hard_pending_compaction_bytes_limit(DB_BENCH_HARD_PENDING_LIMIT);
    Ok(o)
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

/// RocksDB's `WriteBatch` in its serialized form, built here because the `rocksdb` crate 0.20.1 has no
/// `single_delete` on its batch; [`Engine::write`] hands the bytes to `WriteBatch::from_data`.
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
    /// An integer property (`rocksdb.num-running-compactions`, ...).
    pub fn int_property(&self, name: &str) -> EngineResult<u64> {
        self.db.property_int_value(name)?.ok_or_else(|| format!("RocksDB has no integer property {name}").into())
    }

    /// The statistics tickers by name (`rocksdb.block.cache.hit` -> count).
    pub fn tickers(&self) -> HashMap<String, u64> {
        self.opts.get_statistics().map(|s| parse_tickers(&s)).unwrap_or_default()
    }

    fn background_errors(&self) -> u64 {
        self.int_property("rocksdb.background-errors").unwrap_or(0)
    }
}

impl Engine for RocksDb {
    type Iter<'a> = RocksIter<'a>;
    type Batch = RocksBatch;
    const HAS_SINGLE_DELETE: bool = true;

    fn name() -> &'static str {
        "RocksDB"
    }

    fn open(path: &Path, flags: &BenchFlags) -> EngineResult<Self> {
        let opts = options_from_flags(flags)?;
        let db = DB::open(&opts, path)?;
        Ok(RocksDb {
            db,
            opts,
            read: ReadOptions::default(),
            writes: std::array::from_fn(|i| write_options(WriteMode { sync: i & 2 != 0, disable_wal: i & 1 != 0 })),
            readahead_size: flags.readahead_size,
            num_levels: flags.num_levels,
            opened: Instant::now(),
        })
    }

    fn destroy(path: &Path) -> EngineResult<()> {
        if !path.exists() {
            return Ok(());
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
        let removed: Vec<&String> = names.iter().filter(|n| !left.contains(n)).collect();
        if !removed.is_empty() && !empty {
            eprintln!(
                "bench: removed the old database in {} ({} files: {})",
                path.display(),
                removed.len(),
                removed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
        Ok(())
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

    fn iter_with(&self, o: &IterOptions<'_>) -> RocksIter<'_> {
        let mut r = ReadOptions::default();
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
        RocksIter { it: self.db.raw_iterator_opt(r) }
    }

    fn new_batch(&self) -> RocksBatch {
        RocksBatch::default()
    }

    fn write(&self, mode: WriteMode, batch: &RocksBatch) -> EngineResult<()> {
        let b = rocksdb::WriteBatch::from_data(batch.data());
        self.db.write_opt(b, &self.writes[mode_index(mode)]).map_err(Into::into)
    }

    fn flush(&self) -> EngineResult<()> {
        let mut f = FlushOptions::default();
        f.set_wait(true);
        self.db.flush_opt(&f).map_err(Into::into)
    }

    fn compact_all(&self) -> EngineResult<()> {
        // db_bench's `compact`: CompactRange over everything with the bottommost level forced (optimized).
        let before = self.background_errors();
        let mut c = CompactOptions::default();
        c.set_bottommost_level_compaction(BottommostLevelCompaction::ForceOptimized);
        self.db.compact_range_opt(None::<&[u8]>, None::<&[u8]>, &c);
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

    /// Tickers for the totals; live files for the per-level shape; the `rocksdb.cfstats` Compaction Stats
    /// table for the per-level work, whose text gives bytes in GB with one decimal (or MB/s times seconds):
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
        let cfstats = self.property("rocksdb.cfstats-no-file-histogram").unwrap_or_default();
        let rows = parse_compaction_stats(&cfstats);
        let flush_bytes = tk("rocksdb.flush.write.bytes");
        let compaction_read = tk("rocksdb.compact.read.bytes");
        let compaction_written = tk("rocksdb.compact.write.bytes");
        fill_level_work(&mut levels, &rows, flush_bytes, compaction_read, compaction_written);
        let stalls = parse_stall_counts(&cfstats);
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
            pending_compaction_bytes: self.int_property("rocksdb.estimate-pending-compaction-bytes").unwrap_or(0),
            memtable_bytes: self.int_property("rocksdb.cur-size-all-mem-tables").unwrap_or(0),
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

/// Reads the tickers of RocksDB's `Statistics::ToString()` (`rocksdb.block.cache.hit COUNT : 5`); histogram
/// lines (`name P50 : ... COUNT : n SUM : s`) are skipped.
pub fn parse_tickers(text: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if let (Some(name), Some("COUNT"), Some(":"), Some(v), None) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        {
            if let Ok(v) = v.parse::<u64>() {
                m.insert(name.to_string(), v);
            }
        }
    }
    m
}

/// One level's row of the Compaction Stats table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompactionRow {
    /// Level number.
    pub level: usize,
    /// Bytes read by compactions into the level (estimate from the text).
    pub read_est: f64,
    /// Bytes written into the level (estimate from the text).
    pub write_est: f64,
    /// `Comp(sec)`.
    pub secs: f64,
    /// `Comp(cnt)`.
    pub count: u64,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// Reads the per-level rows (`L0`, `L1`, ...) of the first `Level Files Size ...` table of `rocksdb.cfstats`.
/// The text gives bytes in GB with one decimal; below 1 GB the rate column (MB/s with one decimal) times the
/// seconds is the better estimate.
pub fn parse_compaction_stats(text: &str) -> Vec<CompactionRow> {
    let mut rows = Vec::new();
    let mut header: Option<Vec<&str>> = None;
    for line in text.lines() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.first() == Some(&"Level") && toks.get(1) == Some(&"Files") {
            if header.is_some() {
                break;
            }
            header = Some(toks);
            continue;
        }
        let Some(h) = &header else { continue };
        let Some(level) = toks.first().and_then(|t| t.strip_prefix('L')).and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        // The Size column prints as two tokens ("63.50 MB").
        if toks.len() != h.len() + 1 {
            continue;
        }
        let col = |name: &str| -> f64 {
            h.iter()
                .position(|c| *c == name)
                .map(|j| if j > 2 { j + 1 } else { j })
                .and_then(|i| toks.get(i))
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .unwrap_or(0.0)
        };
        let secs = col("Comp(sec)");
        let est = |gb: f64, mbps: f64| if gb >= 1.0 { gb * GIB } else { mbps * secs * MIB };
        rows.push(CompactionRow {
            level,
            read_est: est(col("Read(GB)"), col("Rd(MB/s)")),
            write_est: est(col("Write(GB)"), col("Wr(MB/s)")),
            secs,
            count: col("Comp(cnt)") as u64,
        });
    }
    rows
}

/// Splits `total` over the entries in proportion to `weights` (all to the first when every weight is 0);
/// the parts add up to `total`.
pub fn apportion(total: u64, weights: &[f64]) -> Vec<u64> {
    let mut out = vec![0u64; weights.len()];
    if weights.is_empty() || total == 0 {
        return out;
    }
    let sum: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
    if sum <= 0.0 {
        out[0] = total;
        return out;
    }
    let mut given = 0u64;
    let mut last = 0;
    for (i, w) in weights.iter().enumerate() {
        if w.is_finite() && *w > 0.0 {
            let part = ((total as f64) * (w / sum)).floor() as u64;
            out[i] = part.min(total - given);
            given += out[i];
            last = i;
        }
    }
    out[last] += total - given;
    out
}

/// Fills the per-level work of `levels` from the Compaction Stats rows and the exact tickers: L0's write
/// bytes are the flushes; compaction output is split over L1 and below (L0 when no deeper level compacted:
/// intra-L0 compactions), compaction input over all levels, by the text's estimates.
pub fn fill_level_work(levels: &mut [LevelSample], rows: &[CompactionRow], flush: u64, read: u64, written: u64) {
    let n = levels.len();
    if n == 0 {
        return;
    }
    let mut wr = vec![0.0; n];
    let mut rd = vec![0.0; n];
    for r in rows.iter().filter(|r| r.level < n) {
        let l = &mut levels[r.level];
        l.compactions = r.count;
        l.compaction_micros = (r.secs * 1e6) as u64;
        rd[r.level] = r.read_est;
        if r.level > 0 {
            wr[r.level] = r.write_est;
        }
    }
    // With no estimate anywhere (sub-second, sub-GB work), compaction counts are the weights.
    if wr.iter().all(|w| *w <= 0.0) {
        for r in rows.iter().filter(|r| r.level > 0 && r.level < n) {
            wr[r.level] = r.count as f64;
        }
    }
    if rd.iter().all(|w| *w <= 0.0) {
        rd.clone_from(&wr);
    }
    let wparts = if wr.iter().any(|w| *w > 0.0) {
        apportion(written, &wr)
    } else {
        // Nothing compacted into L1 or below: the output stayed in L0.
        let mut v = vec![0; n];
        v[0] = written;
        v
    };
    let rparts = apportion(read, &rd);
    for (i, l) in levels.iter_mut().enumerate() {
        l.write_bytes = wparts[i] + if i == 0 { flush } else { 0 };
        l.read_bytes = rparts[i];
    }
}

/// Reads the `Stalls(count): 0 level0_slowdown, 0 level0_numfiles, ...` line of `rocksdb.cfstats` into
/// cause -> count.
pub fn parse_stall_counts(text: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    if let Some(line) = text.lines().find_map(|l| l.trim_start().strip_prefix("Stalls(count):")) {
        for part in line.split(',') {
            let part = part.trim();
            if let Some((n, name)) = part.split_once(' ') {
                if let Ok(v) = n.parse::<u64>() {
                    m.insert(name.trim().to_string(), v);
                }
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickers_parse_and_histograms_are_skipped() {
        let text = "rocksdb.block.cache.miss COUNT : 12\nrocksdb.block.cache.hit COUNT : 3456\n\
                    rocksdb.db.get.micros P50 : 1.5 P95 : 3.0 P99 : 4.0 P100 : 9.0 COUNT : 77 SUM : 120\n\
                    rocksdb.bloom.filter.useful COUNT : 0\nnot a line\n";
        let m = parse_tickers(text);
        assert_eq!(m.get("rocksdb.block.cache.hit"), Some(&3456));
        assert_eq!(m.get("rocksdb.block.cache.miss"), Some(&12));
        assert_eq!(m.get("rocksdb.bloom.filter.useful"), Some(&0));
        assert_eq!(m.get("rocksdb.db.get.micros"), None);
        assert_eq!(m.len(), 3);
    }

    const CFSTATS: &str = "\n** Compaction Stats [default] **\n\
Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)\n\
----------------------------------------------------------------------------------------------------------------------------------------------------------------------------\n\
  L0      2/0   12.61 MB   0.5      0.0     0.0      0.0       0.1      0.1       0.0   1.0      0.0     90.5      1.30              1.10        11    0.118       0      0       0.0       0.0\n\
  L1      4/0   55.02 MB   0.2      0.2     0.1      0.1       0.2      0.1       0.0   1.4     80.0     70.0      2.50              2.30         3    0.833    2000K   100K       0.0       0.0\n\
  L2     10/0    1.20 GB   0.1      1.5     0.5      1.0       1.4      0.4       0.0   2.8     60.0     56.0     25.00             24.00         9    2.778    9000K   10K       0.0       0.0\n\
 Sum     16/0    1.27 GB   0.0      1.7     0.6      1.1       1.7      0.6       0.0   1.9     58.0     58.0     28.80             27.40        23    1.252    11M   110K       0.0       0.0\n\
 Int      0/0    0.00 KB   0.0      0.0     0.0      0.0       0.0      0.0       0.0   0.0      0.0      0.0      0.00              0.00         0    0.000       0      0       0.0       0.0\n\
\n** Compaction Stats [default] **\n\
Priority    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)\n\
 Low      0/0    0.00 KB   0.0      1.7     0.6      1.1       1.6      0.5       0.0   0.0     60.0     57.0     27.50             26.30        12    2.292    11M   110K       0.0       0.0\n\
Stalls(count): 3 level0_slowdown, 1 level0_slowdown_with_compaction, 2 level0_numfiles, 0 level0_numfiles_with_compaction, 0 stop for pending_compaction_bytes, 4 slowdown for pending_compaction_bytes, 0 memtable_compaction, 5 memtable_slowdown, interval 0 total count\n";

    #[test]
    fn compaction_stats_rows() {
        let rows = parse_compaction_stats(CFSTATS);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].level, 0);
        assert_eq!(rows[0].count, 11);
        assert!((rows[0].secs - 1.30).abs() < 1e-9);
        // Below 1 GB: MB/s x seconds.
        assert!((rows[1].write_est - 70.0 * 2.5 * MIB).abs() < 1.0);
        assert!((rows[1].read_est - 80.0 * 2.5 * MIB).abs() < 1.0);
        // From 1 GB: the GB column.
        assert!((rows[2].write_est - 1.4 * GIB).abs() < 1.0);
        assert_eq!(rows[2].count, 9);
    }

    #[test]
    fn level_work_adds_up_to_the_tickers() {
        let rows = parse_compaction_stats(CFSTATS);
        let mut levels = vec![LevelSample::default(); 7];
        fill_level_work(&mut levels, &rows, 1000, 5000, 7001);
        assert_eq!(levels[0].write_bytes, 1000);
        assert_eq!(levels.iter().map(|l| l.write_bytes).sum::<u64>(), 8001);
        assert_eq!(levels.iter().map(|l| l.read_bytes).sum::<u64>(), 5000);
        assert!(levels[2].write_bytes > levels[1].write_bytes);
        assert_eq!(levels[1].compactions, 3);
        assert_eq!(levels[2].compaction_micros, 25_000_000);
        // No compaction text at all: the output stays in L0, nothing is lost.
        let mut levels = vec![LevelSample::default(); 3];
        fill_level_work(&mut levels, &[], 10, 0, 5);
        assert_eq!(levels[0].write_bytes, 15);
    }

    #[test]
    fn apportion_is_exact() {
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0]).iter().sum::<u64>(), 10);
        assert_eq!(apportion(10, &[0.0, 0.0]), vec![10, 0]);
        assert_eq!(apportion(0, &[1.0]), vec![0]);
        assert_eq!(apportion(100, &[0.0, 3.0, 1.0]), vec![0, 75, 25]);
    }

    #[test]
    fn stall_counts() {
        let m = parse_stall_counts(CFSTATS);
        assert_eq!(m.get("level0_slowdown"), Some(&3));
        assert_eq!(m.get("slowdown for pending_compaction_bytes"), Some(&4));
        assert_eq!(m.get("memtable_slowdown"), Some(&5));
    }

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

    #[test]
    fn bad_flags_are_errors_naming_them() {
        let err = |f: BenchFlags| options_from_flags(&f).err().map(|e| e.to_string()).unwrap_or_default();
        let d = BenchFlags::default;
        assert!(err(BenchFlags { max_grandparent_overlap_factor: Some(10), ..d() })
            .contains("--max_grandparent_overlap_factor"));
        assert!(err(BenchFlags { min_level_to_compress: 9, ..d() }).contains("--min_level_to_compress"));
        assert!(err(BenchFlags { max_write_buffer_number: usize::MAX, ..d() }).contains("--max_write_buffer_number"));
        assert!(options_from_flags(&BenchFlags::default()).is_ok());
    }
}
