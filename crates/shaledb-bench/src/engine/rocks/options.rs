//! The RocksDB options a set of db_bench flags asks for ([`options_from_flags`]), set as db_bench sets them (7.8,
//! whose flags this tool follows, and 9.11, the RocksDB linked: the same for these flags); a flag RocksDB cannot
//! honour is an error naming it.

use crate::db_bench::flags::{BenchFlags, Compression};
use crate::engine::EngineResult;
use rocksdb::{
    BlockBasedOptions, Cache, DBCompactionStyle, DBCompressionType, Env, FifoCompactOptions, LruCacheOptions, Options,
    UniversalCompactOptions,
};

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

/// Options RocksDB has but the `rocksdb` crate 0.23.0 cannot set (no setter, no C API function in 9.11):
/// loaded from an OPTIONS file written for the purpose, the way `db_bench --options_file` loads them.
fn base_options(f: &BenchFlags) -> EngineResult<Options> {
    let dir = tempfile::Builder::new().prefix("shaledb-bench-rocksdb-options-").tempdir()?;
    let text = format!(
        "[Version]\n  rocksdb_version=9.11.2\n  options_file_version=1.1\n\n[DBOptions]\n  delayed_write_rate={}\n\n\
         [CFOptions \"default\"]\n",
        f.delayed_write_rate
    );
    std::fs::write(dir.path().join("OPTIONS-000001"), text)?;
    let cache = Cache::new_lru_cache(0);
    let (opts, _families) = Options::load_latest(dir.path(), Env::new()?, false, cache)
        .map_err(|e| bad("delayed_write_rate", format!("RocksDB did not take {}: {e}", f.delayed_write_rate)))?;
    Ok(opts)
}

/// `--compaction_style` and the `--universal_*` / `--fifo_compaction_*` flags, set as db_bench sets them: a
/// universal option only when its flag is not 0. The `rocksdb` crate has setters for the style, the universal
/// sizes and FIFO's size; the rest is in [`mutable_compaction_options`].
fn set_compaction_style(f: &BenchFlags, o: &mut Options) -> EngineResult<()> {
    o.set_compaction_style(match f.compaction_style {
        0 => DBCompactionStyle::Level,
        1 => DBCompactionStyle::Universal,
        2 => DBCompactionStyle::Fifo,
        n => return Err(bad("compaction_style", format!("unknown style {n}"))),
    });
    let mut u = UniversalCompactOptions::default();
    let c = |flag: &str, v: u32| i32::try_from(v).map_err(|_| bad(flag, format!("{v} is too large for RocksDB")));
    if f.universal_size_ratio != 0 {
        u.set_size_ratio(c("universal_size_ratio", f.universal_size_ratio)?);
    }
    if f.universal_min_merge_width != 0 {
        u.set_min_merge_width(c("universal_min_merge_width", f.universal_min_merge_width)?);
    }
    if f.universal_max_merge_width != 0 {
        u.set_max_merge_width(c("universal_max_merge_width", f.universal_max_merge_width)?);
    }
    if f.universal_max_size_amplification_percent != 0 {
        let v = c("universal_max_size_amplification_percent", f.universal_max_size_amplification_percent)?;
        u.set_max_size_amplification_percent(v);
    }
    o.set_universal_compaction_options(&u);
    let mut fifo = FifoCompactOptions::default();
    fifo.set_max_table_files_size(f.fifo_compaction_max_table_files_size_mb.saturating_mul(1 << 20));
    o.set_fifo_compaction_options(&fifo);
    Ok(())
}

/// The compaction options the `rocksdb` crate has no setter for (`allow_trivial_move`, FIFO's
/// `allow_compaction`, `ttl`, which db_bench sets from `--fifo_compaction_ttl` whatever the style), as
/// `SetOptions` pairs applied right after open: all three are mutable column family options in RocksDB.
pub(super) fn mutable_compaction_options(f: &BenchFlags) -> Vec<(&'static str, String)> {
    vec![
        ("compaction_options_universal", format!("{{allow_trivial_move={}}}", f.universal_allow_trivial_move)),
        (
            "compaction_options_fifo",
            format!(
                "{{allow_compaction={};max_table_files_size={}}}",
                f.fifo_compaction_allow_compaction,
                f.fifo_compaction_max_table_files_size_mb.saturating_mul(1 << 20)
            ),
        ),
        ("ttl", f.fifo_compaction_ttl.to_string()),
    ]
}

/// The RocksDB options `flags` ask for. Every flag that [`crate::engine::shale::options_from_flags`] maps is mapped
/// to RocksDB's option of the same name, as db_bench does:
///
/// | flag | RocksDB option |
/// |---|---|
/// | `--write_buffer_size`, `--max_write_buffer_number` | same names |
/// | `--level0_file_num_compaction_trigger`, `--level0_slowdown_writes_trigger`, `--level0_stop_writes_trigger` | same names |
/// | `--num_levels`, `--max_bytes_for_level_base`, `--max_bytes_for_level_multiplier` | same names |
/// | `--level_compaction_dynamic_level_bytes`, `--target_file_size_base` | same names |
/// | `--max_background_jobs`, `--max_background_compactions`, `--max_background_flushes` | same names (as given, as db_bench passes them) |
/// | `--subcompactions` | `max_subcompactions` |
/// | `--compaction_readahead_size` | same name (when given) |
/// | `--delayed_write_rate` | `delayed_write_rate` (DBOptions, through an OPTIONS file) |
/// | `--disable_auto_compactions` | same name |
/// | `--compaction_style`, `--universal_*`, `--fifo_compaction_*` | `compaction_style`, `compaction_options_universal`, `compaction_options_fifo`, `ttl` (setters, and `SetOptions` right after open for what has none) |
/// | `--compression_type`, `--min_level_to_compress` | `compression`, `compression_per_level` (db_bench's rule) |
/// | `--compression_per_level`, `--bottommost_compression` | same names |
/// | `--block_size`, `--cache_index_and_filter_blocks` | `BlockBasedTableOptions` of the same names |
/// | `--bloom_bits` | `filter_policy` = full Bloom filter (`NewBloomFilterPolicy`); <0 default (none), 0 none |
/// | `--cache_size`, `--cache_numshardbits` | `block_cache` = LRU cache of that size and shard bits; 0: no block cache |
/// | `--open_files` | `max_open_files` |
/// | `--use_direct_reads`, `--use_direct_io_for_flush_and_compaction`, `--advise_random_on_open` | same names |
/// | `--merge_operator` | `merge_operator` (uint64add, stringappend\[:sep\], put as Rust closures) |
/// | `--readahead_size` | `ReadOptions::readahead_size` of iterators |
/// | `--prefix_size` | `prefix_extractor` = `NewFixedPrefixTransform(N)` (none for 0) |
/// | `--whole_key_filtering` | `BlockBasedTableOptions::whole_key_filtering` |
/// | `--memtable_bloom_size_ratio`, `--memtable_whole_key_filtering` | `memtable_prefix_bloom_size_ratio`, `memtable_whole_key_filtering` |
/// | `--prefix_same_as_start`, `--total_order_seek` | the `ReadOptions` of the same names, on every iterator |
///
/// Also as db_bench: `create_if_missing`, `enable_pipelined_write` = true, `table_cache_numshardbits` = 4,
/// statistics enabled (db_bench's `--statistics`). `--soft/hard_pending_compaction_bytes_limit`, `--bytes_per_sync`,
/// `--allow_concurrent_memtable_write`, `--memtablerep` (skip_list, vector), `--verify_checksum`,
/// `--wal_bytes_per_sync`, `--stats_dump_period_sec`: same names. `--rate_limiter_bytes_per_sec` and
/// `--rate_limiter_refill_period_us`, `--rate_limiter_auto_tuned`: `rate_limiter` =
/// `NewGenericRateLimiter(rate, period, 10, auto_tuned)` as db_bench creates it.
pub fn options_from_flags(f: &BenchFlags) -> EngineResult<Options> {
    if f.max_grandparent_overlap_factor.is_some() {
        return Err(bad(
            "max_grandparent_overlap_factor",
            "RocksDB 7.8 and 9.11 have no such option (their db_bench rejects the flag too); drop it",
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
    o.set_max_subcompactions(f.subcompactions);
    o.set_disable_auto_compactions(f.disable_auto_compactions);
    set_compaction_style(f, &mut o)?;

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
        // db_bench's LRU cache: --cache_numshardbits (-1: RocksDB chooses from the capacity).
        let mut c = LruCacheOptions::default();
        c.set_capacity(size);
        c.set_num_shard_bits(f.cache_numshardbits);
        t.set_block_cache(&Cache::new_lru_cache_opts(&c));
    } else {
        t.disable_cache();
    }
    t.set_cache_index_and_filter_blocks(f.cache_index_and_filter_blocks);
    t.set_whole_key_filtering(f.whole_key_filtering);
    o.set_block_based_table_factory(&t);
    if f.prefix_size > 0 {
        o.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(f.prefix_size));
    }
    o.set_memtable_prefix_bloom_ratio(f.memtable_bloom_size_ratio);
    o.set_memtable_whole_key_filtering(f.memtable_whole_key_filtering);

    o.set_max_open_files(f.open_files);
    o.set_use_direct_reads(f.use_direct_reads);
    o.set_use_direct_io_for_flush_and_compaction(f.use_direct_io_for_flush_and_compaction);
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
    o.set_soft_pending_compaction_bytes_limit(usize_flag(
        "soft_pending_compaction_bytes_limit",
        f.soft_pending_compaction_bytes_limit,
    )?);
    o.set_hard_pending_compaction_bytes_limit(usize_flag(
        "hard_pending_compaction_bytes_limit",
        f.hard_pending_compaction_bytes_limit,
    )?);
    o.set_bytes_per_sync(f.bytes_per_sync);
    o.set_wal_bytes_per_sync(f.wal_bytes_per_sync);
    o.set_stats_dump_period_sec(
        u32::try_from(f.stats_dump_period_sec)
            .map_err(|_| bad("stats_dump_period_sec", format!("{} is too large", f.stats_dump_period_sec)))?,
    );
    if f.rate_limiter_bytes_per_sec > 0 {
        let rate = i64::try_from(f.rate_limiter_bytes_per_sec)
            .map_err(|_| bad("rate_limiter_bytes_per_sec", "too large for RocksDB"))?;
        let period = i64::try_from(f.rate_limiter_refill_period_us)
            .map_err(|_| bad("rate_limiter_refill_period_us", "too large for RocksDB"))?;
        // db_bench's fairness: 10.
        if f.rate_limiter_auto_tuned {
            o.set_auto_tuned_ratelimiter(rate, period, 10);
        } else {
            o.set_ratelimiter(rate, period, 10);
        }
    }
    o.set_enable_blob_files(f.enable_blob_files);
    o.set_min_blob_size(f.min_blob_size);
    o.set_blob_file_size(f.blob_file_size);
    let blob_codec = Compression::parse(&f.blob_compression_type)
        .ok_or_else(|| bad("blob_compression_type", format!("unknown compression '{}'", f.blob_compression_type)))?;
    o.set_blob_compression_type(codec(blob_codec));
    o.set_enable_blob_gc(f.enable_blob_garbage_collection);
    o.set_blob_gc_age_cutoff(f.blob_garbage_collection_age_cutoff);
    o.set_blob_gc_force_threshold(f.blob_garbage_collection_force_threshold);
    o.set_blob_compaction_readahead_size(f.blob_compaction_readahead_size);
    if let Some(n) = f.compaction_readahead_size {
        o.set_compaction_readahead_size(n);
    }
    o.set_allow_concurrent_memtable_write(f.allow_concurrent_memtable_write);
    match f.memtablerep.as_str() {
        "skip_list" => {}
        "vector" => o.set_memtable_factory(rocksdb::MemtableFactory::Vector),
        other => {
            return Err(bad(
                "memtablerep",
                format!("the RocksDB engine takes skip_list or vector, not '{other}' (indexed_skip_list is ShaleDB's)"),
            ))
        }
    }
    Ok(o)
}

fn usize_flag(flag: &str, v: u64) -> EngineResult<usize> {
    usize::try_from(v).map_err(|_| bad(flag, format!("{v} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_flags_are_errors_naming_them() {
        let err = |f: BenchFlags| options_from_flags(&f).err().map(|e| e.to_string()).unwrap_or_default();
        let d = BenchFlags::default;
        assert!(err(BenchFlags { max_grandparent_overlap_factor: Some(10), ..d() })
            .contains("--max_grandparent_overlap_factor"));
        assert!(err(BenchFlags { min_level_to_compress: 9, ..d() }).contains("--min_level_to_compress"));
        assert!(err(BenchFlags { max_write_buffer_number: usize::MAX, ..d() }).contains("--max_write_buffer_number"));
        assert!(options_from_flags(&BenchFlags::default()).is_ok());
        let limited = BenchFlags { rate_limiter_bytes_per_sec: 1 << 20, ..d() };
        assert!(options_from_flags(&limited).is_ok());
        let tuned = BenchFlags { rate_limiter_auto_tuned: true, ..limited };
        assert!(options_from_flags(&tuned).is_ok());
        let synced = BenchFlags { wal_bytes_per_sync: 1 << 20, stats_dump_period_sec: 5, ..d() };
        assert!(options_from_flags(&synced).is_ok());
    }

    /// The compaction style flags reach RocksDB: the OPTIONS file of a database opened with them says so.
    #[test]
    fn compaction_style_flags_reach_rocksdb() {
        let d = BenchFlags::default;
        let written = |f: BenchFlags| {
            let dir = tempfile::tempdir().unwrap();
            let db = rocksdb::DB::open(&options_from_flags(&f).unwrap(), dir.path()).unwrap();
            let pairs = mutable_compaction_options(&f);
            db.set_options(&pairs.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>()).unwrap();
            drop(db);
            let name = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("OPTIONS-"))
                .max()
                .unwrap();
            std::fs::read_to_string(dir.path().join(name)).unwrap()
        };
        let text = written(BenchFlags {
            compaction_style: 1,
            universal_size_ratio: 5,
            universal_max_size_amplification_percent: 150,
            universal_allow_trivial_move: true,
            ..d()
        });
        assert!(text.contains("compaction_style=kCompactionStyleUniversal"), "{text}");
        for want in
            ["size_ratio=5", "max_size_amplification_percent=150", "allow_trivial_move=true", "min_merge_width=2"]
        {
            assert!(text.contains(want), "{want}: {text}");
        }
        let text = written(BenchFlags {
            compaction_style: 2,
            fifo_compaction_max_table_files_size_mb: 64,
            fifo_compaction_allow_compaction: false,
            fifo_compaction_ttl: 3600,
            ..d()
        });
        assert!(text.contains("compaction_style=kCompactionStyleFIFO"), "{text}");
        for want in ["max_table_files_size=67108864", "allow_compaction=false", "ttl=3600"] {
            assert!(text.contains(want), "{want}: {text}");
        }
    }
}
