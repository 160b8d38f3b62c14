//! `shaledb bench` flags: db_bench's names, meanings and defaults (`--num`, `--key_size`, ...), parsed by
//! clap. Booleans take db_bench's forms (`--histogram`, `--histogram=1`, `--histogram=true`). An unknown
//! flag or a bad value is an error naming the flag.

use crate::BenchError;
use clap::Parser;
use std::path::{Path, PathBuf};

/// The benchmark list run when `--benchmarks` is not given: a short tour that finishes in well under a
/// minute on two cores with the default `--num`.
pub const DEFAULT_BENCHMARKS: &str = "fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,stats";

/// Largest `--num_column_families` (each family is opened with its own memtables; RocksDB's limit is far
/// above what a benchmark on one machine can use).
pub const MAX_COLUMN_FAMILIES: i64 = 10_000;

/// Smallest `--block_size` the engine accepts.
pub const MIN_BLOCK_SIZE: usize = 256;
/// Largest `--block_size` the engine accepts (64 MiB).
pub const MAX_BLOCK_SIZE: usize = 64 << 20;

/// Block compression codecs `--compression_type` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// No compression.
    None,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// Parses db_bench's names (`none`, `snappy`, `lz4`, `zstd`) and RocksDB's enum names as options files
    /// and MyRocks' `compression_per_level` write them (`kNoCompression`, `kSnappyCompression`,
    /// `kLZ4Compression`, `kZSTD`).
    pub fn parse(s: &str) -> Option<Compression> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "no" | "knocompression" => Some(Compression::None),
            "snappy" | "ksnappycompression" => Some(Compression::Snappy),
            "lz4" | "klz4compression" => Some(Compression::Lz4),
            "zstd" | "kzstd" | "kzstdnotfinalcompression" => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// Parses a per-level list as RocksDB writes it: names separated by `:` (or `,`), L0 first.
    pub fn parse_list(s: &str) -> Option<Vec<Compression>> {
        s.split([':', ',']).map(Compression::parse).collect()
    }

    /// RocksDB's name, as db_bench's header prints it.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "NoCompression",
            Compression::Snappy => "Snappy",
            Compression::Lz4 => "LZ4",
            Compression::Zstd => "ZSTD",
        }
    }
}

/// Whether `name` is a merge operator ShaleDB provides.
pub fn merge_operator_known(name: &str) -> bool {
    matches!(name, "uint64add" | "stringappend" | "put" | "put_v1") || name.starts_with("stringappend:")
}

/// Parses db_bench's boolean spellings.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Ok(true),
        "0" | "false" | "f" | "no" | "n" => Ok(false),
        _ => Err(format!("expected 1/0/true/false, got '{s}'")),
    }
}

/// db_bench's flags.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
#[command(rename_all = "snake_case")]
pub struct BenchFlags {
    /// Comma-separated benchmarks, run in order on one database.
    #[arg(long, default_value = DEFAULT_BENCHMARKS)]
    pub benchmarks: String,
    /// Number of key-value pairs (the key space).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: i64,
    /// Reads per thread for read benchmarks; -1 means --num.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub reads: i64,
    /// Writes per thread where a benchmark counts writes separately; -1 means --num.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub writes: i64,
    /// Deletes per thread for deleteseq/deleterandom; -1 means --num.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub deletes: i64,
    /// Keys mergerandom spreads its operands over; -1 means --num.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub merge_keys: i64,
    /// Column families the benchmarks use (db_bench's `--num_column_families`): with N > 1 the database is
    /// opened with "default" and `column_family_name_000001` .. `column_family_name_{N-1:06}`, and key number
    /// k is written and read in family k % N, as db_bench does (see BENCHMARKS.md for the benchmarks each
    /// engine routes, and those refused).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub num_column_families: i64,
    /// db_bench's `--num_hot_column_families`: 0, or any value >= `--num_column_families`, makes every family
    /// hot (the only form supported); creating families in stages while writing is not.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub num_hot_column_families: i64,
    /// Seconds to run random benchmarks instead of a fixed count; 0 means use the count.
    #[arg(long, default_value_t = 0)]
    pub duration: u64,
    /// Concurrent threads (readwhilewriting adds one writer).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Key size in bytes.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Fraction of its size a value compresses to.
    #[arg(long, default_value_t = 0.5)]
    pub compression_ratio: f64,
    /// none, snappy, lz4 or zstd.
    #[arg(long, default_value = "snappy")]
    pub compression_type: String,
    /// Levels below this one are not compressed; -1 compresses every level.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub min_level_to_compress: i32,
    /// Uncompressed data block size.
    #[arg(long, default_value_t = 4096)]
    pub block_size: usize,
    /// Bloom filter bits per key; negative or 0 means no filter (db_bench's default).
    #[arg(long, default_value_t = -1.0, allow_negative_numbers = true)]
    pub bloom_bits: f64,
    /// Block cache bytes.
    #[arg(long, default_value_t = 32 << 20)]
    pub cache_size: u64,
    /// Keep index and filter blocks in the block cache rather than pinned.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub cache_index_and_filter_blocks: bool,
    /// Tables kept open; -1 keeps all open.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub open_files: i32,
    /// Memtable size.
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: usize,
    /// Memtables allowed at once.
    #[arg(long, default_value_t = 2)]
    pub max_write_buffer_number: usize,
    /// Compaction output file size.
    #[arg(long, default_value_t = 64 << 20)]
    pub target_file_size_base: u64,
    /// L1 target size.
    #[arg(long, default_value_t = 256 << 20)]
    pub max_bytes_for_level_base: u64,
    /// Growth between level targets.
    #[arg(long, default_value_t = 10.0)]
    pub max_bytes_for_level_multiplier: f64,
    /// Level targets computed from the last level up.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub level_compaction_dynamic_level_bytes: bool,
    /// L0 files that trigger compaction.
    #[arg(long, default_value_t = 4)]
    pub level0_file_num_compaction_trigger: usize,
    /// L0 files at which writes slow down.
    #[arg(long, default_value_t = 20)]
    pub level0_slowdown_writes_trigger: usize,
    /// L0 files at which writes stop.
    #[arg(long, default_value_t = 36)]
    pub level0_stop_writes_trigger: usize,
    /// Number of levels.
    #[arg(long, default_value_t = 7)]
    pub num_levels: usize,
    /// Background threads for flushes and compactions.
    #[arg(long, default_value_t = 2)]
    pub max_background_jobs: usize,
    /// Legacy: when given (with or without --max_background_flushes), background jobs = their sum.
    #[arg(long, allow_negative_numbers = true)]
    pub max_background_compactions: Option<i64>,
    /// Legacy: see --max_background_compactions.
    #[arg(long, allow_negative_numbers = true)]
    pub max_background_flushes: Option<i64>,
    /// Write rate (bytes/s) while writes are slowed down.
    #[arg(long, default_value_t = 8 << 20)]
    pub delayed_write_rate: u64,
    /// Do not compact automatically.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub disable_auto_compactions: bool,
    /// Write without the WAL.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub disable_wal: bool,
    /// fsync every write.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub sync: bool,
    /// 1: run on the database already at --db (fill benchmarks are then skipped). 0: delete the database at
    /// --db first, as db_bench does (only its files; a directory holding other files is refused), and say so
    /// once. Not given: a --db that holds a database is refused (exit 2) and nothing is deleted; an empty or
    /// new --db is used as it is. Each fill benchmark (fillseq, fillrandom, ...) starts on an empty database
    /// unless this is 1.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub use_existing_db: Option<bool>,
    /// Database directory. Default: a new temporary directory, removed at the end. A --db that holds a
    /// database needs --use_existing_db=1 (benchmark on it) or --use_existing_db=0 (delete it first); one that
    /// holds other files is refused whatever the flag: bench never deletes files that are not the database's.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Set by the suites on a database directory they made themselves: it is emptied before each step
    /// without asking and without a message. Not a flag.
    #[arg(skip)]
    #[serde(skip)]
    pub db_made_by_bench: bool,
    /// Base of the per-thread random seeds; 0 derives it from the clock.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub seed: i64,
    /// Print the latency histogram of each benchmark.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub histogram: bool,
    /// Print the database's statistics (Compaction Stats and counters) after each benchmark.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub statistics: bool,
    /// Bytes per second the writers may write; 0 means unlimited.
    #[arg(long, default_value_t = 0)]
    pub benchmark_write_rate_limit: u64,
    /// Next() calls after each Seek() in seekrandom.
    #[arg(long, default_value_t = 0)]
    pub seek_nexts: usize,
    /// Writes of a thread before it starts deleting ranges (`crate::db_bench::range_dels`).
    #[arg(long, default_value_t = 0)]
    pub writes_before_delete_range: u64,
    /// Writes between two range deletions of a thread; 0: none (`crate::db_bench::range_dels`).
    #[arg(long, default_value_t = 0)]
    pub writes_per_range_tombstone: u64,
    /// Keys each range deletion removes.
    #[arg(long, default_value_t = 100)]
    pub range_tombstone_width: u64,
    /// Range deletions per thread at most.
    #[arg(long, default_value_t = 0)]
    pub max_num_range_tombstones: u64,
    /// Delete each range with one point deletion per key instead of a range tombstone.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub expand_range_tombstones: bool,
    /// Keys per table file in fillingest (each file is written, then ingested on its own).
    #[arg(long, default_value_t = 1_000_000)]
    pub ingest_keys_per_file: u64,
    /// Keys per MultiGet call in multireadrandom (db_bench's default: 1; RocksDB's benchmark.sh passes 10).
    #[arg(long, default_value_t = 1)]
    pub batch_size: i64,
    /// multireadrandom: keys of a batch `multiread_stride` apart from a random first key, instead of all random.
    #[arg(long, default_value_t = 0)]
    pub multiread_stride: i64,
    /// multireadrandom with RocksDB's batched MultiGet API (`--engine rocksdb`: `batched_multi_get_cf`; without
    /// it, `multi_get`). ShaleDB has one MultiGet, batched by design (sorted, coalesced, parallel reads): both
    /// values run it.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub multiread_batched: bool,
    /// Prev() instead of Next() in seekrandom.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub reverse_iterator: bool,
    /// Merge operator: uint64add, stringappend, put.
    #[arg(long, default_value = "")]
    pub merge_operator: String,
    /// Percentage of reads in readrandomwriterandom.
    #[arg(long, default_value_t = 90)]
    pub readwritepercent: u32,
    /// Read tables with O_DIRECT.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub use_direct_reads: bool,
    /// Write the tables of flushes and compactions with O_DIRECT, and read compaction inputs with it.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Directory of the WAL files; empty: the database directory. ShaleDB keeps its WAL in the database
    /// directory, so a different directory is an error for it.
    #[arg(long, default_value = "")]
    pub wal_dir: String,
    /// Block cache shards as a power of two; -1: the engine's own choice (db_bench's default is 6).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub cache_numshardbits: i32,
    /// Sync table files in the background every N bytes as flushes and compactions write them, so the
    /// final fsync has little left to do; 0: only at the end.
    #[arg(long, default_value_t = 0)]
    pub bytes_per_sync: u64,
    /// Sync the WAL every N bytes written to it; 0: only when a write asks for it.
    #[arg(long, default_value_t = 0)]
    pub wal_bytes_per_sync: u64,
    /// Limit flush and compaction writes to N bytes per second (a rate limiter with fairness 10, as
    /// db_bench creates it); 0: no limit.
    #[arg(long, default_value_t = 0)]
    pub rate_limiter_bytes_per_sec: u64,
    /// The rate limiter's refill period in microseconds.
    #[arg(long, default_value_t = 100_000)]
    pub rate_limiter_refill_period_us: u64,
    /// Let the rate limiter tune its rate between 1/20 of --rate_limiter_bytes_per_sec and all of it.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub rate_limiter_auto_tuned: bool,
    /// Write the database's stats into its LOG file every N seconds; 0: never.
    #[arg(long, default_value_t = 600)]
    pub stats_dump_period_sec: u64,
    /// Key-value separation: flushes and compactions write values of at least --min_blob_size bytes into
    /// blob files (RocksDB's integrated BlobDB; benchmark.sh's COMPACTION_STYLE=blob).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub enable_blob_files: bool,
    /// The smallest value written to a blob file.
    #[arg(long, default_value_t = 0)]
    pub min_blob_size: u64,
    /// Size at which a blob file is closed.
    #[arg(long, default_value_t = 256 << 20)]
    pub blob_file_size: u64,
    /// Compression of blob values: none, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    pub blob_compression_type: String,
    /// Compactions relocate the values of the oldest blob files into new ones.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub enable_blob_garbage_collection: bool,
    /// The oldest fraction of the blob files garbage collection relocates from (0..=1).
    #[arg(long, default_value_t = 0.25)]
    pub blob_garbage_collection_age_cutoff: f64,
    /// Garbage ratio of the oldest blob file at which its tables are compacted (0..=1; 1: never).
    #[arg(long, default_value_t = 1.0)]
    pub blob_garbage_collection_force_threshold: f64,
    /// Read-ahead of the blob values a compaction reads (garbage collection); 0: none.
    #[arg(long, default_value_t = 0)]
    pub blob_compaction_readahead_size: u64,
    /// Bytes each compaction input file is read ahead by (`compaction_readahead_size`; 0: none). Unset: the
    /// engine's default (ShaleDB's 2 MiB, RocksDB 7.8's 0, which is also db_bench 7.8's default).
    #[arg(long)]
    pub compaction_readahead_size: Option<usize>,
    /// The level from which flushes and compactions write blob files (benchmark.sh passes it with
    /// COMPACTION_STYLE=blob). Only 0, RocksDB's default, is accepted: ShaleDB writes blob files from the flush
    /// on, and the `rocksdb` crate has no setter for the option.
    #[arg(long, default_value_t = 0)]
    pub blob_file_starting_level: i64,
    /// Check block checksums on reads.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub verify_checksum: bool,
    /// Pending compaction bytes at which writes slow down; 0 disables.
    #[arg(long, default_value_t = 64 << 30)]
    pub soft_pending_compaction_bytes_limit: u64,
    /// Pending compaction bytes at which writes stop; 0 disables.
    #[arg(long, default_value_t = 128 << 30)]
    pub hard_pending_compaction_bytes_limit: u64,
    /// Memtable structure: skip_list, vector (append only, sorted once when flushed: the fast way to
    /// bulk load; reads of a vector memtable that is still being written are slow), or indexed_skip_list
    /// (ShaleDB only: the skiplist with a hash index for point lookups).
    #[arg(long, default_value = "skip_list")]
    pub memtablerep: String,
    /// Writers of one commit group insert into the memtable in parallel; false: the group's leader inserts
    /// every batch.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub allow_concurrent_memtable_write: bool,
    /// 0: leveled compaction, 1: universal, 2: FIFO (RocksDB's numbers).
    #[arg(long, default_value_t = 0)]
    pub compaction_style: u32,
    /// Universal: percentage flexibility when comparing run sizes; 0 keeps the default (1).
    #[arg(long, default_value_t = 0)]
    pub universal_size_ratio: u32,
    /// Universal: fewest runs in a size-ratio merge; 0 keeps the default (2).
    #[arg(long, default_value_t = 0)]
    pub universal_min_merge_width: u32,
    /// Universal: most runs in one merge; 0 keeps the default (unlimited).
    #[arg(long, default_value_t = 0)]
    pub universal_max_merge_width: u32,
    /// Universal: size amplification (%) that triggers a full merge; 0 keeps the default (200).
    #[arg(long, default_value_t = 0)]
    pub universal_max_size_amplification_percent: u32,
    /// Universal: move non-overlapping files instead of rewriting them.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub universal_allow_trivial_move: bool,
    /// FIFO: total table size (MiB) past which the oldest tables are deleted. Required with
    /// --compaction_style=2 (db_bench's default, 0, would delete every table).
    #[arg(long, default_value_t = 0)]
    pub fifo_compaction_max_table_files_size_mb: u64,
    /// FIFO: merge small L0 files (intra-L0 compaction).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub fifo_compaction_allow_compaction: bool,
    /// FIFO: delete tables older than this many seconds; 0 off. Needs --open_files=-1.
    #[arg(long, default_value_t = 0)]
    pub fifo_compaction_ttl: u64,
    /// Threads one compaction job may split into (`max_subcompactions` on both engines), 1..=64.
    #[arg(long, default_value_t = 1)]
    pub subcompactions: u32,
    /// Bytes of a compression dictionary; ShaleDB has no dictionary compression (only 0 is accepted).
    #[arg(long, default_value_t = 0)]
    pub compression_max_dict_bytes: u64,
    /// Share of the block cache for index and filter blocks (with --cache_index_and_filter_blocks); ShaleDB's
    /// cache has no priority pools (only 0 is accepted).
    #[arg(long, default_value_t = 0.0)]
    pub cache_high_pri_pool_ratio: f64,
    /// Keep L0 tables' index and filter blocks pinned when --cache_index_and_filter_blocks caches the others.
    /// Without --cache_index_and_filter_blocks every table's index and filter stay in memory anyway.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    /// The engine: shaledb, or rocksdb (RocksDB linked in, in builds with the `rocksdb` feature).
    #[arg(long, value_enum, default_value_t = crate::engine::EngineKind::Shaledb)]
    pub engine: crate::engine::EngineKind,
    /// Compression per level, L0 first, separated by ':' (`none:none:lz4:lz4`, or RocksDB's enum names
    /// `kNoCompression:kLZ4Compression`); levels past the list use its last entry. Empty: --compression_type
    /// and --min_level_to_compress decide.
    #[arg(long, default_value = "")]
    pub compression_per_level: String,
    /// Compression of the bottommost level, overriding the others (RocksDB's `bottommost_compression`);
    /// empty keeps the per-level choice.
    #[arg(long, default_value = "")]
    pub bottommost_compression: String,
    /// Bytes iterators read ahead in each table file (RocksDB's `ReadOptions::readahead_size`); 0 keeps the
    /// engine's own policy.
    #[arg(long, default_value_t = 0)]
    pub readahead_size: usize,
    /// Tell the OS that table files are read at random (no file-system readahead), as RocksDB's
    /// `advise_random_on_open` does; 0 lets the OS read ahead.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub advise_random_on_open: bool,
    /// Write `secs_elapsed,interval_qps` to --report_file every N seconds; 0 disables.
    #[arg(long, default_value_t = 0)]
    pub report_interval_seconds: u64,
    /// File for --report_interval_seconds.
    #[arg(long, default_value = "report.csv")]
    pub report_file: PathBuf,
    /// Print a progress line (and the database's stats with --stats_per_interval) to stderr every N
    /// seconds; 0 disables.
    #[arg(long, default_value_t = 0)]
    pub stats_interval_seconds: u64,
    /// As --stats_interval_seconds, every N operations.
    #[arg(long, default_value_t = 0)]
    pub stats_interval: u64,
    /// Include the database's stats in interval reports.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub stats_per_interval: bool,
    /// Write every figure of every benchmark to this file as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write throughput, latency and LSM-shape plots (SVG and PNG) for each benchmark into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Progress bar on stderr (only when stderr is a terminal and a benchmark runs longer than ~2 s).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub progress: bool,
    /// Prefix extractor of the database: the first N bytes of each key (RocksDB's
    /// `NewFixedPrefixTransform(N)`), whose prefixes the tables' bloom filters also hold; 0: none.
    #[arg(long, default_value_t = 0)]
    pub prefix_size: usize,
    /// Average keys per prefix: keys are generated as db_bench's `GenerateKeyFromInt` does with
    /// prefixes (the first --prefix_size bytes are `key_number % (num / keys_per_prefix)`, big-endian); 0:
    /// plain keys.
    #[arg(long, default_value_t = 0)]
    pub keys_per_prefix: u64,
    /// Size of each memtable's prefix bloom filter as a fraction of --write_buffer_size (RocksDB's
    /// `memtable_prefix_bloom_size_ratio`); needs --prefix_size. In 0..=0.25.
    #[arg(long, default_value_t = 0.0)]
    pub memtable_bloom_size_ratio: f64,
    /// RocksDB: a whole-key filter in each memtable. ShaleDB's memtables always have one, so for it the
    /// flag changes nothing either way.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub memtable_whole_key_filtering: bool,
    /// Put whole keys in the tables' bloom filters; false with --prefix_size keeps only prefixes there.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub whole_key_filtering: bool,
    /// Iterators ignore the prefix extractor (RocksDB's `ReadOptions::total_order_seek`).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub total_order_seek: bool,
    /// Iterators yield only keys with the seek key's prefix (RocksDB's `ReadOptions::prefix_same_as_start`).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub prefix_same_as_start: bool,
    /// Open the database for pessimistic transactions (RocksDB's `TransactionDB`): `randomtransaction` runs
    /// them. Other benchmarks write to the database directly.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub transaction_db: bool,
    /// Open the database for optimistic transactions (RocksDB's `OptimisticTransactionDB`).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub optimistic_transaction_db: bool,
    /// Keys each `randomtransaction` transaction reads and writes, one per set (1..=9999).
    #[arg(long, default_value_t = 2)]
    pub transaction_sets: u64,
    /// Each transaction takes a snapshot when it starts (`TransactionOptions::set_snapshot`). Accepted as
    /// db_bench defines it: its `randomtransaction` takes one in every transaction regardless, and so does
    /// ShaleDB's.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub transaction_set_snapshot: bool,
    /// Milliseconds a pessimistic transaction waits for a key's lock before giving up.
    #[arg(long, default_value_t = 100)]
    pub transaction_lock_timeout: u64,
    /// Accepted as db_bench defines it; db_bench's own `randomtransaction` never reads it either.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub transaction_sleep: i32,
    /// Accepted for db_bench compatibility: ShaleDB never compacts because of seeks.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub disable_seek_compaction: Option<bool>,
    /// Accepted for db_bench compatibility; only 0 (ShaleDB reads with pread, never mmap).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub mmap_read: Option<bool>,
    /// Accepted for db_bench compatibility: ShaleDB deletes obsolete files as soon as nothing uses them.
    #[arg(long, allow_negative_numbers = true)]
    pub delete_obsolete_files_period_micros: Option<i64>,
    /// Accepted for db_bench compatibility: obsolete in RocksDB too; ShaleDB bounds grandparent overlap
    /// itself.
    #[arg(long, allow_negative_numbers = true)]
    pub max_grandparent_overlap_factor: Option<i64>,
}

#[derive(Parser, Debug)]
// As gflags does, a repeated flag takes its last value (benchmark.sh appends overrides to shared flags).
#[command(name = "bench", no_binary_name = true, args_override_self = true)]
struct Standalone {
    #[command(flatten)]
    flags: BenchFlags,
}

impl Default for BenchFlags {
    fn default() -> Self {
        BenchFlags::parse_args(std::iter::empty::<String>()).unwrap_or_else(|_| unreachable_defaults())
    }
}

#[cold]
fn unreachable_defaults() -> BenchFlags {
    // Every default above parses; a failure here is a bug in this file caught by `defaults_parse`.
    std::process::abort()
}

/// Rewrites gflags' single-dash long flags (`-num=5`) to clap's `--num=5`; leaves everything else alone.
pub fn normalize_arg(a: String) -> String {
    let b = a.as_bytes();
    if b.len() > 2 && b[0] == b'-' && b[1] != b'-' && b[1].is_ascii_alphabetic() {
        format!("-{a}")
    } else {
        a
    }
}

/// Whether `a` names the directory `b` (as given, or after resolving links when both exist).
fn same_dir(a: &Path, b: Option<&Path>) -> bool {
    let Some(b) = b else { return false };
    let trim = |p: &Path| p.components().collect::<PathBuf>();
    trim(a) == trim(b) || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The long names of every flag `BenchFlags` defines.
pub fn known_flag_names() -> Vec<String> {
    use clap::CommandFactory;
    Standalone::command().get_arguments().filter_map(|a| a.get_long().map(str::to_string)).collect()
}

/// gflags' `--undefok=a,b`: flags named there that this tool does not define are dropped instead of being an
/// error (benchmark.sh lists flags newer db_bench versions have, so one script drives several versions). A
/// listed flag this tool does define is parsed as usual. Returns the remaining arguments and one note per
/// dropped flag. Dropped are `--name`, `--name=value` and `-name=value`; a flag ShaleDB does not know is never
/// given its value as a separate argument by benchmark.sh, and gflags too requires `=` for it.
pub fn apply_undefok(args: Vec<String>) -> (Vec<String>, Vec<String>) {
    let mut undefok: Vec<String> = Vec::new();
    let mut rest = Vec::with_capacity(args.len());
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        let norm = normalize_arg(a.clone());
        if let Some(list) = norm.strip_prefix("--undefok=") {
            undefok.extend(list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string));
        } else if norm == "--undefok" {
            if let Some(list) = it.next() {
                undefok.extend(list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string));
            }
        } else {
            rest.push(a);
        }
    }
    if undefok.is_empty() {
        return (rest, Vec::new());
    }
    let known = known_flag_names();
    let mut notes = Vec::new();
    let kept = rest
        .into_iter()
        .filter(|a| {
            let norm = normalize_arg(a.clone());
            let Some(flag) = norm.strip_prefix("--") else { return true };
            let name = flag.split_once('=').map_or(flag, |(n, _)| n);
            let drop = undefok.iter().any(|u| u == name) && !known.iter().any(|k| k == name);
            if drop {
                notes.push(format!("{a}: ignored (ShaleDB has no such flag and --undefok lists it)"));
            }
            !drop
        })
        .collect();
    (kept, notes)
}

impl BenchFlags {
    /// Parses flags (without a program name) and validates them.
    pub fn parse_args<I, S>(args: I) -> Result<BenchFlags, BenchError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let (args, notes) = apply_undefok(args.into_iter().map(Into::into).collect());
        for n in notes {
            eprintln!("note: {n}");
        }
        let args: Vec<String> = args.into_iter().map(normalize_arg).collect();
        let s = Standalone::try_parse_from(args).map_err(|e| BenchError::Usage(e.render().to_string()))?;
        s.flags.validate()?;
        Ok(s.flags)
    }

    /// Checks values clap cannot check alone; the error names the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |flag: &str, msg: String| Err(BenchError::BadFlag { flag: flag.to_string(), msg });
        if self.num < 1 {
            return bad("num", format!("must be at least 1, got {}", self.num));
        }
        if self.threads < 1 || self.threads > 1024 {
            return bad("threads", format!("must be in 1..=1024, got {}", self.threads));
        }
        if self.key_size < 1 || self.key_size > 4096 {
            return bad("key_size", format!("must be in 1..=4096, got {}", self.key_size));
        }
        if self.num_column_families < 1 {
            return bad("num_column_families", format!("must be at least 1, got {}", self.num_column_families));
        }
        if self.num_column_families > MAX_COLUMN_FAMILIES {
            return bad(
                "num_column_families",
                format!("must be at most {MAX_COLUMN_FAMILIES}, got {}", self.num_column_families),
            );
        }
        if self.num_hot_column_families < 0 {
            return bad("num_hot_column_families", format!("must be 0 or more, got {}", self.num_hot_column_families));
        }
        if self.num_column_families > 1
            && self.num_hot_column_families > 0
            && self.num_hot_column_families < self.num_column_families
        {
            return bad(
                "num_hot_column_families",
                format!(
                    "{} hot of {} families would create families in stages while writing, which this tool does not \
                     do; use 0 (every family hot)",
                    self.num_hot_column_families, self.num_column_families
                ),
            );
        }
        if self.num_column_families > 1 {
            // Refused before any work, naming the flag (Kind::runs_with_families says why each one is).
            let refused: Vec<String> = self
                .benchmark_list()
                .into_iter()
                .filter(|b| crate::db_bench::workloads::Kind::from_name(b).is_some_and(|k| !k.runs_with_families()))
                .collect();
            if !refused.is_empty() {
                return bad(
                    "num_column_families",
                    format!(
                        "{} cannot run with {} column families (db_bench scans, seeks and runs transactions in the \
                         default family only; fillingest, compact0 and compact1 work on one family); run them with \
                         --num_column_families=1",
                        refused.join(", "),
                        self.num_column_families
                    ),
                );
            }
        }
        if self.transaction_db && self.optimistic_transaction_db {
            return bad("optimistic_transaction_db", "cannot be used with --transaction_db".to_string());
        }
        if !(1..=9999).contains(&self.transaction_sets) {
            return bad("transaction_sets", format!("must be in 1..=9999, got {}", self.transaction_sets));
        }
        if self.prefix_size > self.key_size {
            return bad(
                "prefix_size",
                format!("must be at most --key_size ({}), got {}", self.key_size, self.prefix_size),
            );
        }
        if self.keys_per_prefix > 0 && self.prefix_size == 0 {
            return bad("keys_per_prefix", "needs --prefix_size".to_string());
        }
        if !(0.0..=0.25).contains(&self.memtable_bloom_size_ratio) {
            return bad(
                "memtable_bloom_size_ratio",
                format!("must be in 0..=0.25, got {}", self.memtable_bloom_size_ratio),
            );
        }
        if self.memtable_bloom_size_ratio > 0.0 && self.prefix_size == 0 {
            return bad(
                "memtable_bloom_size_ratio",
                "needs --prefix_size (the memtable filter holds prefixes)".to_string(),
            );
        }
        if self.value_size > 64 << 20 {
            return bad("value_size", format!("must be at most 64 MiB, got {}", self.value_size));
        }
        if !(self.compression_ratio.is_finite() && self.compression_ratio > 0.0 && self.compression_ratio <= 1.0) {
            return bad(
                "compression_ratio",
                format!(
                    "must be in (0, 1] (the fraction of its size a value compresses to), got {}",
                    self.compression_ratio
                ),
            );
        }
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&self.block_size) {
            return bad(
                "block_size",
                format!("must be in {MIN_BLOCK_SIZE}..={MAX_BLOCK_SIZE} (64 MiB), got {}", self.block_size),
            );
        }
        if self.compression().is_none() {
            return bad(
                "compression_type",
                format!("unknown compression '{}' (none, snappy, lz4, zstd)", self.compression_type),
            );
        }
        if Compression::parse(&self.blob_compression_type).is_none() {
            return bad(
                "blob_compression_type",
                format!("unknown compression '{}' (none, snappy, lz4, zstd)", self.blob_compression_type),
            );
        }
        if self.blob_file_starting_level != 0 {
            return bad(
                "blob_file_starting_level",
                format!("only 0 is supported (blob files from the flush on), got {}", self.blob_file_starting_level),
            );
        }
        for (name, v) in [
            ("blob_garbage_collection_age_cutoff", self.blob_garbage_collection_age_cutoff),
            ("blob_garbage_collection_force_threshold", self.blob_garbage_collection_force_threshold),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(name, format!("must be in 0..=1, got {v}"));
            }
        }
        if !self.compression_per_level.is_empty() && self.compression_levels().is_none() {
            return bad(
                "compression_per_level",
                format!("unknown compression in '{}' (none, snappy, lz4, zstd, or kNoCompression, kSnappyCompression, kLZ4Compression, kZSTD, separated by ':')", self.compression_per_level),
            );
        }
        if !self.bottommost_compression.is_empty() && Compression::parse(&self.bottommost_compression).is_none() {
            return bad(
                "bottommost_compression",
                format!("unknown compression '{}' (none, snappy, lz4, zstd)", self.bottommost_compression),
            );
        }
        if self.readahead_size > 256 << 20 {
            return bad("readahead_size", format!("must be at most 256 MiB, got {}", self.readahead_size));
        }
        if !self.bloom_bits.is_finite() || self.bloom_bits > 64.0 {
            return bad("bloom_bits", format!("must be at most 64, got {}", self.bloom_bits));
        }
        if self.readwritepercent > 100 {
            return bad("readwritepercent", format!("must be in 0..=100, got {}", self.readwritepercent));
        }
        if self.writes_per_range_tombstone > 0 && !(1..=1 << 30).contains(&self.range_tombstone_width) {
            return bad("range_tombstone_width", format!("must be in 1..=2^30, got {}", self.range_tombstone_width));
        }
        if !(1..=1 << 20).contains(&self.batch_size) {
            return bad("batch_size", format!("must be in 1..=1048576, got {}", self.batch_size));
        }
        if self.ingest_keys_per_file < 1 {
            return bad("ingest_keys_per_file", format!("must be at least 1, got {}", self.ingest_keys_per_file));
        }
        if self.multiread_stride < 0 {
            return bad("multiread_stride", format!("must be at least 0, got {}", self.multiread_stride));
        }
        if !self.merge_operator.is_empty() && !merge_operator_known(&self.merge_operator) {
            return bad(
                "merge_operator",
                format!("unknown merge operator '{}' (uint64add, stringappend, put)", self.merge_operator),
            );
        }
        if self.mmap_read == Some(true) {
            return bad("mmap_read", "ShaleDB does not read through mmap; use --mmap_read=0".into());
        }
        if !matches!(self.memtablerep.as_str(), "skip_list" | "vector") {
            return bad("memtablerep", format!("unknown memtable '{}' (skip_list, vector)", self.memtablerep));
        }
        match self.compaction_style {
            0 | 1 => {}
            2 if self.fifo_compaction_max_table_files_size_mb == 0 => {
                return bad(
                    "fifo_compaction_max_table_files_size_mb",
                    "FIFO compaction (--compaction_style=2) needs a size limit; 0 (db_bench's default) would delete \
                     every table"
                        .into(),
                )
            }
            2 if self.fifo_compaction_ttl > 0 && self.open_files != -1 => {
                return bad(
                    "fifo_compaction_ttl",
                    format!("needs --open_files=-1 (both engines), got {}", self.open_files),
                )
            }
            2 => {}
            n => return bad("compaction_style", format!("unknown style {n} (0 leveled, 1 universal, 2 FIFO)")),
        }
        if self.rate_limiter_bytes_per_sec > 0 && !(1..=10_000_000).contains(&self.rate_limiter_refill_period_us) {
            return bad(
                "rate_limiter_refill_period_us",
                format!("must be in 1..=10000000, got {}", self.rate_limiter_refill_period_us),
            );
        }
        if self.rate_limiter_auto_tuned && self.rate_limiter_bytes_per_sec == 0 {
            return bad(
                "rate_limiter_auto_tuned",
                "needs --rate_limiter_bytes_per_sec (the limit to tune under)".into(),
            );
        }
        if self.rate_limiter_bytes_per_sec > i64::MAX as u64 {
            return bad(
                "rate_limiter_bytes_per_sec",
                format!("at most {}, got {}", i64::MAX, self.rate_limiter_bytes_per_sec),
            );
        }
        if u32::try_from(self.stats_dump_period_sec).is_err() {
            return bad("stats_dump_period_sec", format!("at most {}, got {}", u32::MAX, self.stats_dump_period_sec));
        }
        if !(1..=shaledb::options::limits::MAX_SUBCOMPACTIONS).contains(&self.subcompactions) {
            return bad(
                "subcompactions",
                format!("must be in 1..={}, got {}", shaledb::options::limits::MAX_SUBCOMPACTIONS, self.subcompactions),
            );
        }
        if self.compression_max_dict_bytes != 0 {
            return bad("compression_max_dict_bytes", "ShaleDB has no dictionary compression; only 0".into());
        }
        if self.cache_high_pri_pool_ratio != 0.0 {
            return bad(
                "cache_high_pri_pool_ratio",
                format!("ShaleDB's block cache has no priority pools; only 0, got {}", self.cache_high_pri_pool_ratio),
            );
        }
        if self.pin_l0_filter_and_index_blocks_in_cache && self.cache_index_and_filter_blocks {
            return bad(
                "pin_l0_filter_and_index_blocks_in_cache",
                "ShaleDB cannot pin L0's index and filter blocks while caching the others; drop one of the two flags"
                    .into(),
            );
        }
        if !(-1..=16).contains(&self.cache_numshardbits) {
            return bad("cache_numshardbits", format!("must be in -1..=16, got {}", self.cache_numshardbits));
        }
        if self.hard_pending_compaction_bytes_limit != 0
            && self.hard_pending_compaction_bytes_limit < self.soft_pending_compaction_bytes_limit
        {
            return bad(
                "hard_pending_compaction_bytes_limit",
                "must be 0 or at least --soft_pending_compaction_bytes_limit".into(),
            );
        }
        if !self.wal_dir.is_empty() && !same_dir(Path::new(&self.wal_dir), self.db.as_deref()) {
            return bad(
                "wal_dir",
                format!(
                    "ShaleDB keeps the WAL in the database directory; --wal_dir must be empty or the --db directory, got {}",
                    self.wal_dir
                ),
            );
        }
        if self.use_existing_db == Some(true) && self.db.is_none() {
            return bad("use_existing_db", "needs --db PATH (the default database is a new temporary one)".into());
        }
        for (flag, v) in [
            ("max_background_compactions", self.max_background_compactions),
            ("max_background_flushes", self.max_background_flushes),
        ] {
            if let Some(v) = v {
                if !(-1..=256).contains(&v) {
                    return bad(flag, format!("must be in -1..=256, got {v}"));
                }
            }
        }
        if self.benchmark_list().is_empty() {
            return bad("benchmarks", "no benchmark given".into());
        }
        for name in self.benchmark_list() {
            if crate::db_bench::workloads::Kind::from_name(&name).is_none() {
                return bad(
                    "benchmarks",
                    format!("unknown benchmark '{name}' (known: {})", crate::db_bench::workloads::Kind::known()),
                );
            }
        }
        Ok(())
    }

    /// `--use_existing_db` is 1: the benchmarks run on the database already at `--db`.
    pub fn uses_existing_db(&self) -> bool {
        self.use_existing_db == Some(true)
    }

    /// The compression codec named by `--compression_type`.
    pub fn compression(&self) -> Option<Compression> {
        Compression::parse(&self.compression_type)
    }

    /// The codecs `--compression_per_level` lists, L0 first; `Some(empty)` when it is not given.
    pub fn compression_levels(&self) -> Option<Vec<Compression>> {
        if self.compression_per_level.is_empty() {
            return Some(Vec::new());
        }
        Compression::parse_list(&self.compression_per_level)
    }

    /// The codec `--bottommost_compression` names, if given.
    pub fn bottommost(&self) -> Option<Compression> {
        Compression::parse(&self.bottommost_compression)
    }

    /// The benchmarks in order.
    pub fn benchmark_list(&self) -> Vec<String> {
        self.benchmarks.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
    }

    /// Background jobs after applying the legacy per-kind flags.
    pub fn background_jobs(&self) -> usize {
        match (self.max_background_compactions, self.max_background_flushes) {
            (None, None) => self.max_background_jobs,
            (c, f) => (c.unwrap_or(1).max(1) + f.unwrap_or(1).max(1)) as usize,
        }
    }

    /// The column families to open: `--num_column_families`, at least 1.
    pub fn column_families(&self) -> usize {
        usize::try_from(self.num_column_families).unwrap_or(1).max(1)
    }

    /// Notes for accepted flags that change nothing in ShaleDB, or that this tool honours where db_bench does
    /// not, printed once at start.
    pub fn compatibility_notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.num_column_families > 1 {
            let routed: Vec<String> = self
                .benchmark_list()
                .into_iter()
                .filter(|b| {
                    crate::db_bench::workloads::Kind::from_name(b).is_some_and(|k| k.families_beyond_db_bench())
                })
                .collect();
            if !routed.is_empty() {
                v.push(format!(
                    "--num_column_families: {} route each key to family k % N here; db_bench 7.8 runs them on the \
                     default family only",
                    routed.join(", ")
                ));
            }
        }
        if self.disable_seek_compaction.is_some() {
            v.push("--disable_seek_compaction: no effect (ShaleDB has no seek-triggered compaction)".into());
        }
        if self.delete_obsolete_files_period_micros.is_some() {
            v.push("--delete_obsolete_files_period_micros: no effect (obsolete files are deleted at once)".into());
        }
        if self.max_grandparent_overlap_factor.is_some() {
            v.push(
                "--max_grandparent_overlap_factor: no effect (obsolete; output files are cut by target size)".into(),
            );
        }
        if (self.max_background_compactions.is_some() || self.max_background_flushes.is_some())
            && self.engine == crate::engine::EngineKind::Shaledb
        {
            // RocksDB takes the three limits as given, as db_bench passes them.
            v.push(format!(
                "--max_background_compactions/--max_background_flushes: using max_background_jobs={}",
                self.background_jobs()
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests;
