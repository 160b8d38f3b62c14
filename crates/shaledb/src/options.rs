//! Options. Names follow RocksDB's where RocksDB has the same knob; every field documents its default.

use crate::identity::DbId;
use crate::merge::MergeOperator;
use shaledb_format::compress::CompressionType;
use shaledb_format::prefix::PrefixExtractor;
use shaledb_format::table::TableOptions;
use shaledb_vfs::{Error, Fs, Result};
use std::sync::Arc;

pub(crate) mod family;

/// How the WAL is replayed at open when a record is damaged (RocksDB's `WALRecoveryMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// Stop replay at the first damaged or incomplete record and open with everything before it (default).
    /// The result is always a prefix of the acknowledged writes.
    #[default]
    PointInTime,
    /// Ignore an incomplete record at the end of the newest WAL; any other damage fails the open.
    TolerateCorruptedTailRecords,
    /// Any damage, even an incomplete tail, fails the open.
    AbsoluteConsistency,
    /// Skip damaged records and replay everything else (may leave holes; for salvage only).
    SkipAnyCorruptedRecords,
}

/// The structure of the memtable (RocksDB's `memtable_factory`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MemTableRep {
    /// A concurrent skiplist: inserts and reads in O(log n) at any time (default).
    #[default]
    SkipList,
    /// An append-only vector, sorted once when the memtable is flushed (RocksDB's `VectorRepFactory`): the
    /// fastest way to bulk load. A point read of a vector memtable still being written scans it, and an
    /// iterator over it sorts a copy, so use it for loads that do not read until they are done.
    Vector,
    /// The skiplist with a point index beside it: a hash table from each user key to its newest entry, so a
    /// point lookup (`get`, `multi_get`) of a key in a large memtable reads a few cache lines instead of
    /// descending the skiplist (one cache miss per level). It costs 8 bytes more per entry and 8 bytes per
    /// bucket (one per 128 bytes of `write_buffer_size`, at most 1M), and inserts a little more work (the
    /// bucket's chain). For reads of recently written keys, as the Redis server's are; it changes nothing for
    /// iterators.
    IndexedSkipList,
}

/// Database options. `Options::default()` gives RocksDB-like defaults for a server with a few GB of RAM.
///
/// Every read-write open records them in an OPTIONS file in the database directory, and
/// [`Options::load_latest`] reads the newest back (docs/format/options.md lists what is persisted and what is
/// not, with the reason).
#[derive(Clone)]
pub struct Options {
    /// Create the database when the directory holds none. Default: `true`.
    pub create_if_missing: bool,
    /// Fail the open when a database already exists. Default: `false`.
    pub error_if_exists: bool,
    /// At open, check that every live table the MANIFEST names exists with its recorded size (refusing to open,
    /// naming each missing, empty or resized file, rather than failing at the first read); and verify the
    /// checksum of every block compaction reads (a damaged block fails the compaction instead of being
    /// rewritten). User reads verify checksums as `ReadOptions::verify_checksums` says, whatever this is; WAL
    /// recovery follows `wal_recovery_mode`. Default: `true`.
    pub paranoid_checks: bool,
    /// Bytes a memtable may hold before it is switched for a new one and flushed. Default: 64 MiB.
    pub write_buffer_size: usize,
    /// Memtables (active + immutable) allowed at once; writes stall when all are full. Default: 2.
    pub max_write_buffer_number: usize,
    /// L0 file count that triggers an L0 compaction (universal: sorted runs that trigger a merge; FIFO with
    /// `allow_compaction`: the fewest L0 files merged). Default: 4.
    pub level0_file_num_compaction_trigger: usize,
    /// L0 file count at which writes are slowed to `delayed_write_rate` (universal: sorted runs; not used under
    /// FIFO, as in RocksDB). Default: 20.
    pub level0_slowdown_writes_trigger: usize,
    /// L0 file count at which writes stop until compaction catches up (universal: sorted runs; not used under
    /// FIFO, as in RocksDB). Default: 36.
    pub level0_stop_writes_trigger: usize,
    /// Number of levels, L0 included. Default: 7.
    pub num_levels: usize,
    /// Target size of L1 (or, with dynamic level bytes, of the first non-empty level above the last).
    /// Default: 256 MiB.
    pub max_bytes_for_level_base: u64,
    /// Growth factor between level targets. Default: 10.
    pub max_bytes_for_level_multiplier: f64,
    /// Size targets computed from the last level upward, so 90% of data sits in the last level.
    /// Default: `true`.
    pub level_compaction_dynamic_level_bytes: bool,
    /// Size at which compaction output files are cut. Default: 64 MiB.
    pub target_file_size_base: u64,
    /// Growth of `target_file_size_base` per level below L1. Default: 1.
    pub target_file_size_multiplier: u64,
    /// Background threads for flushes and compactions together, at least 1 (RocksDB's `max_background_jobs`).
    /// With 1, the one thread runs both, flushes first (a flush waits for the compaction in progress); with
    /// n >= 2, max(1, n / 4) threads run only flushes (RocksDB's split; several memtables are then written at
    /// once, and recorded oldest first) and the others only compactions, so a flush never waits for a
    /// compaction and compactions go on while a flush runs. Default: 2 (one flush thread, one compaction
    /// thread).
    pub max_background_jobs: usize,
    /// Threads one compaction may split into (RocksDB `max_subcompactions`): a leveled job reading level 0 or
    /// a manual one, or a universal merge, into a level below 0 is cut by key range (from the inputs' index
    /// blocks, in pieces of at least one output file) into up to this many pieces, each written by a thread
    /// of its own; all outputs go into one MANIFEST edit, and a failed piece removes every piece's outputs.
    /// A user compaction filter is then called from several threads at once. The threads are the job's own,
    /// not `max_background_jobs`'. In `1..=`[`limits::MAX_SUBCOMPACTIONS`]. Default: 1.
    pub max_subcompactions: u32,
    /// Write rate (bytes/s) while writes are slowed down. Default: 16 MiB/s.
    pub delayed_write_rate: u64,
    /// Estimated pending compaction bytes at which writes slow down; 0 disables. Default: 64 GiB.
    pub soft_pending_compaction_bytes_limit: u64,
    /// Estimated pending compaction bytes at which writes stop; 0 disables. Default: 256 GiB.
    pub hard_pending_compaction_bytes_limit: u64,
    /// Do not schedule compactions automatically (manual `compact_range` still works). Default: `false`.
    pub disable_auto_compactions: bool,
    /// How the database compacts: leveled, universal or FIFO (RocksDB `compaction_style`); one style per
    /// database (column families do not exist yet). See [`crate::compaction_style`], which also says what
    /// switching style on an existing database does. Default: `Level`.
    pub compaction_style: crate::compaction_style::CompactionStyle,
    /// Universal compaction's options (RocksDB `compaction_options_universal`); used under
    /// `CompactionStyle::Universal`. Default: RocksDB's defaults.
    pub compaction_options_universal: crate::compaction_style::CompactionOptionsUniversal,
    /// FIFO compaction's options (RocksDB `compaction_options_fifo`); used under `CompactionStyle::Fifo`.
    /// Default: RocksDB's defaults (1 GiB, no intra-L0 compaction, no TTL).
    pub compaction_options_fifo: crate::compaction_style::CompactionOptionsFifo,
    /// Compression for every level without an entry in `compression_per_level`. Default: LZ4.
    pub compression: CompressionType,
    /// Per-level compression, index = level; levels past the end use the last entry. Default: empty.
    pub compression_per_level: Vec<CompressionType>,
    /// Compression of the bottommost level, overriding the above. Default: `None` (no override).
    pub bottommost_compression: Option<CompressionType>,
    /// zstd level (ignored by other codecs). Default: 3.
    pub compression_level: i32,
    /// Uncompressed size of a data block. Default: 4 KiB.
    pub block_size: usize,
    /// Keys between restart points in a block. Default: 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default: 10.
    pub bloom_bits_per_key: f64,
    /// Capacity of the block cache shared by all tables, in bytes. Default: 32 MiB.
    pub block_cache_size: usize,
    /// Shards of the block cache, as a power of two (RocksDB `cache_numshardbits`); -1 lets the cache choose
    /// from the number of CPUs. At most 16. Default: -1.
    pub block_cache_shard_bits: i32,
    /// Cache index and filter blocks in the block cache instead of pinning them in memory for each open
    /// table. Default: `false` (pinned).
    pub cache_index_and_filter_blocks: bool,
    /// Files kept open at once, RocksDB's meaning: 10 of them are kept for the WAL, the MANIFEST and others,
    /// the rest (at least 6) for tables; -1 keeps every table open (up to 1,048,576). Values 0 to 15 are
    /// refused. Default: -1.
    pub max_open_files: i32,
    /// Read table files (SSTs) with `O_DIRECT`, bypassing the OS page cache (RocksDB `use_direct_reads`):
    /// every read is rounded out to 4 KiB into an aligned buffer. Point lookups then read one block per
    /// miss of the block cache, scans and compactions read through their readahead windows
    /// ([`ReadOptions::readahead_size`], [`Options::compaction_readahead_size`]). Writes (WAL, MANIFEST,
    /// tables being built) stay buffered. A file system that refuses `O_DIRECT` (`EINVAL`) fails the open
    /// with `NotSupported` (RocksDB fails there too). With an in-memory `Fs` the flag changes nothing.
    /// Default: `false`.
    pub use_direct_reads: bool,
    /// Write the tables of flushes and compactions with `O_DIRECT`, and read compaction inputs with it
    /// (RocksDB `use_direct_io_for_flush_and_compaction`): a table being built gathers in a 1 MiB aligned
    /// buffer written in whole aligned writes; its partial last block is written padded with zeros and the
    /// file truncated to its real length before the `fdatasync` that ends it, so the table's bytes are the
    /// same as with buffered writes. Compaction inputs are opened with `O_DIRECT` for the compaction (apart
    /// from the table cache's handles, unless `use_direct_reads`) and read through
    /// [`Options::compaction_readahead_size`] windows. `bytes_per_sync` has no effect on these tables
    /// (nothing piles up in the page cache). The WAL and the MANIFEST stay buffered. The durability contract
    /// is unchanged: a table is synced before the MANIFEST names it. A file system that refuses `O_DIRECT`
    /// (`EINVAL`) fails the open with `NotSupported` naming this option. With an in-memory `Fs` the flag
    /// changes nothing. Default: `false`.
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Tell the OS that table files opened for reads are read at random (`posix_fadvise(RANDOM)`), which
    /// turns off the kernel's readahead for them (RocksDB `advise_random_on_open`); `false` leaves the
    /// kernel's default readahead on, which helps scans and wastes I/O on point lookups. Compaction inputs
    /// opened for one pass are advised sequential either way. No effect with `use_direct_reads` (no page
    /// cache, no kernel readahead). Default: `true`.
    pub advise_random_on_open: bool,
    /// Bytes a compaction reads at once from each input table (RocksDB `compaction_readahead_size`), so
    /// that compaction inputs are read in large sequential reads, with and without `use_direct_reads`;
    /// 0 reads block by block (with the kernel's readahead unless `use_direct_reads`). At most 256 MiB.
    /// Default: 2 MiB.
    pub compaction_readahead_size: usize,
    /// Largest window of the automatic readahead of iterators with `ReadOptions::readahead_size` 0 (RocksDB
    /// `BlockBasedTableOptions::max_auto_readahead_size`): 0 turns the automatic readahead off. At most
    /// 256 MiB. Default: 256 KiB.
    pub max_auto_readahead_size: usize,
    /// While a flush or compaction writes a table, sync what it wrote every this many bytes, so dirty pages
    /// do not pile up and the fsync that ends the table has little left to do (RocksDB `bytes_per_sync`,
    /// which issues `sync_file_range`; ShaleDB issues `fdatasync` from the background thread). 0: only the
    /// final fsync. No effect with `use_direct_io_for_flush_and_compaction`. Default: 0.
    pub bytes_per_sync: u64,
    /// Sync the WAL every this many bytes written to it (RocksDB `wal_bytes_per_sync`), so the kernel never
    /// holds much dirty WAL at once; 0: the WAL is synced only when a write asks for it (and at memtable
    /// switches and close). As `bytes_per_sync` does for tables, ShaleDB issues `fdatasync` where RocksDB issues
    /// the asynchronous `sync_file_range`: the group-commit leader that passes the mark waits for it, and every
    /// write before it becomes durable then (a stronger effect than RocksDB's, at the cost of that wait; choose
    /// a mark of a few MiB). Default: 0.
    pub wal_bytes_per_sync: u64,
    /// With several column families: once the live WALs hold more than this many bytes, the families whose
    /// memtables keep the oldest WAL alive are switched (and so flushed), as RocksDB's `max_total_wal_size`
    /// does, so that a family written rarely never keeps every later WAL on disk. The WALs an open kept live for
    /// the memtables it kept (`avoid_flush_during_recovery`) count too. 0: four times the sum over the families
    /// of `write_buffer_size * max_write_buffer_number` (RocksDB's rule). Default: 0.
    pub max_total_wal_size: u64,
    /// Limits the bytes flushes and compactions write per second (RocksDB `rate_limiter`): see
    /// [`crate::RateLimiter`]. Flushes are charged at high priority, compactions at low; the WAL is never
    /// charged. One limiter may be shared by several databases. Default: none.
    pub rate_limiter: Option<Arc<crate::RateLimiter>>,
    /// Every this many seconds a background thread writes the database statistics (the text of
    /// `property("rocksdb.stats")`) into the `LOG` file (RocksDB `stats_dump_period_sec`); 0: never. The
    /// dump takes the interval sample, as RocksDB's does: the next `stats` property's `Interval` lines start
    /// from it. Read-only opens write no `LOG` and dump nothing. Default: 600.
    pub stats_dump_period_sec: u32,
    /// Callbacks told of flushes, compactions, table files, write-stall changes and background errors (RocksDB
    /// `listeners`): see [`crate::listener::EventListener`], which says on which thread and under which locks
    /// (none of the database's) they run. Not recorded in the OPTIONS file (code, like `fs`). Default: none.
    pub listeners: Vec<Arc<dyn crate::listener::EventListener>>,
    /// The memtable's structure. Default: [`MemTableRep::SkipList`].
    pub memtable_rep: MemTableRep,
    /// The writers of one commit group insert their batches into the memtable in parallel (RocksDB
    /// `allow_concurrent_memtable_write`); `false`: the group's leader inserts every batch of the group.
    /// Default: `true`.
    pub allow_concurrent_memtable_write: bool,
    /// Maps keys to the prefixes that prefix filters and prefix seeks work on (RocksDB `prefix_extractor`):
    /// tables then also hold every key's prefix in their bloom filter, and a cursor read with
    /// [`ReadOptions::prefix_same_as_start`] skips the tables (and, with
    /// [`memtable_prefix_bloom_size_ratio`](Self::memtable_prefix_bloom_size_ratio), the memtables) whose
    /// filter excludes the sought prefix. It may be changed between opens: a table records the extractor it
    /// was built with and is only skipped by prefix when that is the extractor in use. Default: none.
    pub prefix_extractor: Option<PrefixExtractor>,
    /// Put whole keys in the tables' bloom filters (RocksDB `BlockBasedTableOptions::whole_key_filtering`).
    /// `false` with a prefix extractor keeps only prefixes there: smaller filters, and point lookups are
    /// filtered by prefix instead. Ignored without a prefix extractor (the filter then holds whole keys).
    /// Default: `true`.
    pub whole_key_filtering: bool,
    /// Size of a prefix bloom filter in each memtable, as a fraction of `write_buffer_size` (RocksDB
    /// `memtable_prefix_bloom_size_ratio`), used by prefix seeks to skip memtables without the prefix; 0:
    /// none. Needs a prefix extractor. In 0..=0.25. (Point lookups always use the memtable's whole-key
    /// filter, RocksDB's `memtable_whole_key_filtering`, which ShaleDB keeps on.) Default: 0.
    pub memtable_prefix_bloom_size_ratio: f64,
    /// Operator for `merge`. The OPTIONS file records its name; an open with an operator of another name (or
    /// none) than the recorded one is refused. Default: none (merge fails with `InvalidArgument`).
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// A callback that keeps, removes or changes values during compactions (RocksDB `compaction_filter`);
    /// see [`crate::compaction_filter`]. Default: none.
    pub compaction_filter: Option<Arc<dyn crate::compaction_filter::CompactionFilter>>,
    /// TTL mode (RocksDB `DBWithTTL`): values carry their write time, expire after `ttl.seconds`; see
    /// [`crate::ttl`]. On or off, it must be the same at every open of a database: the OPTIONS file records it
    /// and an open that switches it is refused (the TTL's length may change). Not with a `merge_operator`.
    /// Default: none.
    pub ttl: Option<crate::ttl::Ttl>,
    /// WAL replay behaviour on damage. Default: `PointInTime`.
    pub wal_recovery_mode: WalRecoveryMode,
    /// Open keeps what WAL replay recovered in the memtables instead of writing it to L0 tables (RocksDB
    /// `avoid_flush_during_recovery`): the replayed WALs stay live, after an fsync, until a later flush records
    /// their data in tables; new writes go to a new WAL. It applies only to a replay that met no damage, wrote
    /// no table (nothing filled a memtable) and found fewer than 4 WALs; otherwise open flushes as without it,
    /// so at most 4 WALs are ever live through it. With `avoid_flush_during_shutdown`, short runs (one write per
    /// open, as `shaledb put`) write no table per run. Not recorded in the OPTIONS file. Default: false.
    pub avoid_flush_during_recovery: bool,
    /// [`Db::close`](crate::Db::close) does not flush memtables whose writes are all in the WAL (RocksDB
    /// `avoid_flush_during_shutdown`): the WAL, synced by close, holds them and the next open replays it. Unlike
    /// RocksDB, where this drops writes made with `disable_wal`, such writes still make close flush every
    /// memtable. Not recorded in the OPTIONS file. Default: false (close flushes every memtable).
    pub avoid_flush_during_shutdown: bool,
    /// Size at which the MANIFEST is rewritten from a snapshot of the current version. Default: 64 MiB.
    pub max_manifest_file_size: u64,
    /// Size past which the `LOG` file is rotated to `LOG.old.N`. Default: 4 MiB. At least 1 KiB.
    pub max_log_file_size: u64,
    /// Rotated `LOG.old.N` files kept (the oldest are removed). Default: 10. At most 10000.
    pub keep_log_file_num: usize,
    /// Key-value separation (RocksDB's integrated BlobDB, docs/format/blob.md): flush and compaction write put
    /// values of at least `min_blob_size` bytes into blob files (`NNNNNN.blob`) and keep only a reference in
    /// the table. May be switched at any open: existing references stay readable either way. Default: false.
    pub enable_blob_files: bool,
    /// The smallest value that goes to a blob file. Default: 0 (every put value).
    pub min_blob_size: u64,
    /// A blob file is closed once it reaches this size. Default: 256 MiB. In 1 KiB..=1 TiB.
    pub blob_file_size: u64,
    /// How blob values are compressed. Default: none (RocksDB's default).
    pub blob_compression_type: CompressionType,
    /// Compactions relocate the values they meet in the oldest blob files into new ones. Default: false.
    pub enable_blob_garbage_collection: bool,
    /// The oldest fraction of the blob files (by count, oldest by file number) garbage collection relocates
    /// from. Default: 0.25. In 0..=1.
    pub blob_garbage_collection_age_cutoff: f64,
    /// With garbage collection: when the garbage ratio of the oldest blob file (within the age cutoff) is at
    /// least this, the tables referencing it are compacted. Default: 1.0 (only a file all garbage, which is
    /// already gone: in effect off). In 0..=1.
    pub blob_garbage_collection_force_threshold: f64,
    /// Compactions read the blob values they relocate or merge through windows of this many bytes per blob
    /// file (the references of a compaction come in key order, so mostly in file order). Default: 0 (one read
    /// per value, as RocksDB). At most 1 GiB.
    pub blob_compaction_readahead_size: u64,
    /// The file system. Default: the operating system's.
    pub fs: Arc<dyn Fs>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_write_buffer_number", &self.max_write_buffer_number)
            .field("level0_file_num_compaction_trigger", &self.level0_file_num_compaction_trigger)
            .field("max_bytes_for_level_base", &self.max_bytes_for_level_base)
            .field("target_file_size_base", &self.target_file_size_base)
            .field("compression", &self.compression)
            .field("block_size", &self.block_size)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("block_cache_size", &self.block_cache_size)
            .field("use_direct_reads", &self.use_direct_reads)
            .field("use_direct_io_for_flush_and_compaction", &self.use_direct_io_for_flush_and_compaction)
            .field("advise_random_on_open", &self.advise_random_on_open)
            .field("compaction_readahead_size", &self.compaction_readahead_size)
            .field("block_cache_shard_bits", &self.block_cache_shard_bits)
            .field("bytes_per_sync", &self.bytes_per_sync)
            .field("wal_bytes_per_sync", &self.wal_bytes_per_sync)
            .field("max_total_wal_size", &self.max_total_wal_size)
            .field("rate_limiter", &self.rate_limiter)
            .field("stats_dump_period_sec", &self.stats_dump_period_sec)
            .field("listeners", &self.listeners.len())
            .field("memtable_rep", &self.memtable_rep)
            .field("allow_concurrent_memtable_write", &self.allow_concurrent_memtable_write)
            .field("prefix_extractor", &self.prefix_extractor.map(|p| p.name()))
            .field("whole_key_filtering", &self.whole_key_filtering)
            .field("memtable_prefix_bloom_size_ratio", &self.memtable_prefix_bloom_size_ratio)
            .field("merge_operator", &self.merge_operator.as_ref().map(|m| m.name().to_string()))
            .field("compaction_filter", &self.compaction_filter.as_ref().map(|m| m.name().to_string()))
            .field("ttl", &self.ttl)
            .field("compaction_style", &self.compaction_style)
            .field("compaction_options_universal", &self.compaction_options_universal)
            .field("compaction_options_fifo", &self.compaction_options_fifo)
            .field("enable_blob_files", &self.enable_blob_files)
            .field("min_blob_size", &self.min_blob_size)
            .field("blob_file_size", &self.blob_file_size)
            .field("blob_compression_type", &self.blob_compression_type)
            .field("enable_blob_garbage_collection", &self.enable_blob_garbage_collection)
            .field("blob_garbage_collection_age_cutoff", &self.blob_garbage_collection_age_cutoff)
            .field("blob_garbage_collection_force_threshold", &self.blob_garbage_collection_force_threshold)
            .field("blob_compaction_readahead_size", &self.blob_compaction_readahead_size)
            .field("avoid_flush_during_recovery", &self.avoid_flush_during_recovery)
            .field("avoid_flush_during_shutdown", &self.avoid_flush_during_shutdown)
            .finish_non_exhaustive()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            paranoid_checks: true,
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            num_levels: 7,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10.0,
            level_compaction_dynamic_level_bytes: true,
            target_file_size_base: 64 << 20,
            target_file_size_multiplier: 1,
            max_background_jobs: 2,
            max_subcompactions: 1,
            delayed_write_rate: 16 << 20,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            disable_auto_compactions: false,
            compaction_style: crate::compaction_style::CompactionStyle::Level,
            compaction_options_universal: Default::default(),
            compaction_options_fifo: Default::default(),
            compression: CompressionType::Lz4,
            compression_per_level: Vec::new(),
            bottommost_compression: None,
            compression_level: 3,
            block_size: 4 << 10,
            block_restart_interval: 16,
            bloom_bits_per_key: 10.0,
            block_cache_size: 32 << 20,
            block_cache_shard_bits: -1,
            cache_index_and_filter_blocks: false,
            max_open_files: -1,
            use_direct_reads: false,
            use_direct_io_for_flush_and_compaction: false,
            advise_random_on_open: true,
            compaction_readahead_size: 2 << 20,
            max_auto_readahead_size: 256 << 10,
            bytes_per_sync: 0,
            wal_bytes_per_sync: 0,
            max_total_wal_size: 0,
            rate_limiter: None,
            stats_dump_period_sec: 600,
            listeners: Vec::new(),
            memtable_rep: MemTableRep::SkipList,
            allow_concurrent_memtable_write: true,
            prefix_extractor: None,
            whole_key_filtering: true,
            memtable_prefix_bloom_size_ratio: 0.0,
            merge_operator: None,
            compaction_filter: None,
            ttl: None,
            wal_recovery_mode: WalRecoveryMode::PointInTime,
            avoid_flush_during_recovery: false,
            avoid_flush_during_shutdown: false,
            max_manifest_file_size: 64 << 20,
            max_log_file_size: 4 << 20,
            keep_log_file_num: 10,
            enable_blob_files: false,
            min_blob_size: 0,
            blob_file_size: 256 << 20,
            blob_compression_type: CompressionType::None,
            enable_blob_garbage_collection: false,
            blob_garbage_collection_age_cutoff: 0.25,
            blob_garbage_collection_force_threshold: 1.0,
            blob_compaction_readahead_size: 0,
            fs: shaledb_vfs::default_fs(),
        }
    }
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

impl Options {
    /// Checks every option for a usable value; the error names the option and the accepted range.
    ///
    /// Upper bounds (issue 9: an unbounded value aborted the process or allocated without limit), each in
    /// [`limits`]: `write_buffer_size` <= 4 GiB (each memtable allocates its key filter from it up front),
    /// `max_write_buffer_number` <= 64, `max_background_jobs` <= 256 (one thread each, spawned at open),
    /// the level-0 triggers <= 2^30, `max_bytes_for_level_multiplier` <= 1000,
    /// `target_file_size_base` <= 1 TiB, `target_file_size_multiplier` <= 1000, `block_size` <= 64 MiB,
    /// `block_restart_interval` <= 1024, `bloom_bits_per_key` <= 64, `compression_level` in -131072..=22
    /// (zstd's range), `num_levels` <= 32, `compaction_readahead_size` and `max_auto_readahead_size` <= 256 MiB.
    pub fn validate(&self) -> Result<()> {
        crate::blob::validate_options(self)?;
        crate::compaction::subcompaction::validate_options(self)?;
        if let Some(ex) = &self.prefix_extractor {
            if !(1..=limits::MAX_KEY_VALUE_BYTES).contains(&ex.len()) {
                return Err(invalid(format!(
                    "prefix_extractor length must be in 1..={}, got {}",
                    limits::MAX_KEY_VALUE_BYTES,
                    ex.len()
                )));
            }
        }
        if !(0.0..=0.25).contains(&self.memtable_prefix_bloom_size_ratio) {
            return Err(invalid(format!(
                "memtable_prefix_bloom_size_ratio must be in 0..=0.25, got {}",
                self.memtable_prefix_bloom_size_ratio
            )));
        }
        crate::compaction_style::validate(
            &self.compaction_options_universal,
            &self.compaction_options_fifo,
            self.compaction_style,
            self.max_open_files,
        )?;
        if self.ttl.is_some() && self.merge_operator.is_some() {
            return Err(invalid("ttl (TTL mode) cannot be combined with a merge_operator".into()));
        }
        if self.max_log_file_size < 1024 || self.keep_log_file_num > 10_000 {
            return Err(invalid(format!(
                "max_log_file_size must be at least 1024 (got {}) and keep_log_file_num at most 10000 (got {})",
                self.max_log_file_size, self.keep_log_file_num
            )));
        }
        if !(-1..=16).contains(&self.block_cache_shard_bits) {
            return Err(invalid(format!(
                "block_cache_shard_bits must be in -1..=16, got {}",
                self.block_cache_shard_bits
            )));
        }
        if !(4096..=limits::MAX_WRITE_BUFFER_SIZE).contains(&self.write_buffer_size) {
            return Err(invalid(format!(
                "write_buffer_size must be in 4096..={}, got {}",
                limits::MAX_WRITE_BUFFER_SIZE,
                self.write_buffer_size
            )));
        }
        if !(2..=limits::MAX_WRITE_BUFFER_NUMBER).contains(&self.max_write_buffer_number) {
            return Err(invalid(format!(
                "max_write_buffer_number must be in 2..={} (at least one active, one flushing), got {}",
                limits::MAX_WRITE_BUFFER_NUMBER,
                self.max_write_buffer_number
            )));
        }
        if self.level0_stop_writes_trigger > limits::MAX_LEVEL0_TRIGGER {
            return Err(invalid(format!(
                "level0_stop_writes_trigger must be at most {}, got {}",
                limits::MAX_LEVEL0_TRIGGER,
                self.level0_stop_writes_trigger
            )));
        }
        if self.max_bytes_for_level_multiplier > limits::MAX_MULTIPLIER as f64 {
            return Err(invalid(format!(
                "max_bytes_for_level_multiplier must be at most {}, got {}",
                limits::MAX_MULTIPLIER,
                self.max_bytes_for_level_multiplier
            )));
        }
        if self.target_file_size_base > limits::MAX_TARGET_FILE_SIZE {
            return Err(invalid(format!(
                "target_file_size_base must be at most {} (1 TiB), got {}",
                limits::MAX_TARGET_FILE_SIZE,
                self.target_file_size_base
            )));
        }
        if self.target_file_size_multiplier > limits::MAX_MULTIPLIER {
            return Err(invalid(format!(
                "target_file_size_multiplier must be at most {}, got {}",
                limits::MAX_MULTIPLIER,
                self.target_file_size_multiplier
            )));
        }
        if self.max_background_jobs > limits::MAX_BACKGROUND_JOBS {
            return Err(invalid(format!(
                "max_background_jobs must be in 1..={} (one thread each), got {}",
                limits::MAX_BACKGROUND_JOBS,
                self.max_background_jobs
            )));
        }
        if !(limits::MIN_COMPRESSION_LEVEL..=limits::MAX_COMPRESSION_LEVEL).contains(&self.compression_level) {
            return Err(invalid(format!(
                "compression_level must be in {}..={}, got {}",
                limits::MIN_COMPRESSION_LEVEL,
                limits::MAX_COMPRESSION_LEVEL,
                self.compression_level
            )));
        }
        if !(2..=32).contains(&self.num_levels) {
            return Err(invalid(format!("num_levels must be in 2..=32, got {}", self.num_levels)));
        }
        if self.level0_file_num_compaction_trigger == 0 {
            return Err(invalid("level0_file_num_compaction_trigger must be at least 1".into()));
        }
        if self.level0_slowdown_writes_trigger < self.level0_file_num_compaction_trigger {
            return Err(invalid(format!(
                "level0_slowdown_writes_trigger ({}) must be >= level0_file_num_compaction_trigger ({})",
                self.level0_slowdown_writes_trigger, self.level0_file_num_compaction_trigger
            )));
        }
        if self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger {
            return Err(invalid(format!(
                "level0_stop_writes_trigger ({}) must be >= level0_slowdown_writes_trigger ({})",
                self.level0_stop_writes_trigger, self.level0_slowdown_writes_trigger
            )));
        }
        if self.max_bytes_for_level_base == 0 {
            return Err(invalid("max_bytes_for_level_base must be positive".into()));
        }
        if !(self.max_bytes_for_level_multiplier > 1.0 && self.max_bytes_for_level_multiplier.is_finite()) {
            return Err(invalid(format!(
                "max_bytes_for_level_multiplier must be a finite number > 1, got {}",
                self.max_bytes_for_level_multiplier
            )));
        }
        if self.target_file_size_base < 1024 {
            return Err(invalid(format!(
                "target_file_size_base must be at least 1024, got {}",
                self.target_file_size_base
            )));
        }
        if self.target_file_size_multiplier == 0 {
            return Err(invalid("target_file_size_multiplier must be at least 1".into()));
        }
        if self.max_background_jobs == 0 {
            return Err(invalid("max_background_jobs must be at least 1".into()));
        }
        if self.delayed_write_rate == 0 {
            return Err(invalid("delayed_write_rate must be positive".into()));
        }
        if self.hard_pending_compaction_bytes_limit != 0
            && self.hard_pending_compaction_bytes_limit < self.soft_pending_compaction_bytes_limit
        {
            return Err(invalid(
                "hard_pending_compaction_bytes_limit must be 0 or >= soft_pending_compaction_bytes_limit".into(),
            ));
        }
        if !(256..=(64 << 20)).contains(&self.block_size) {
            return Err(invalid(format!("block_size must be in 256..=64MiB, got {}", self.block_size)));
        }
        if !(1..=1024).contains(&self.block_restart_interval) {
            return Err(invalid(format!(
                "block_restart_interval must be in 1..=1024, got {}",
                self.block_restart_interval
            )));
        }
        if !(0.0..=64.0).contains(&self.bloom_bits_per_key) {
            return Err(invalid(format!("bloom_bits_per_key must be in 0..=64, got {}", self.bloom_bits_per_key)));
        }
        if self.max_open_files != -1 && self.max_open_files < 16 {
            return Err(invalid(format!("max_open_files must be -1 or at least 16, got {}", self.max_open_files)));
        }
        for (name, v) in [
            ("compaction_readahead_size", self.compaction_readahead_size),
            ("max_auto_readahead_size", self.max_auto_readahead_size),
        ] {
            if v > limits::MAX_READAHEAD_SIZE {
                return Err(invalid(format!(
                    "{name} must be at most {} (256 MiB), got {v}",
                    limits::MAX_READAHEAD_SIZE
                )));
            }
        }
        Ok(())
    }

    /// Compression used for output files of `level` (`bottommost` when the level is the last one with data).
    pub fn compression_for_level(&self, level: usize, bottommost: bool) -> CompressionType {
        if bottommost {
            if let Some(c) = self.bottommost_compression {
                return c;
            }
        }
        match self.compression_per_level.get(level).or(self.compression_per_level.last()) {
            Some(c) => *c,
            None => self.compression,
        }
    }

    /// The table writer's options for output files of `level` (`shaledb-format` never sees `Options`; the
    /// engine converts, as Pebble's `MakeWriterOptions`).
    pub(crate) fn table_options(&self, db_id: DbId, level: usize, bottommost: bool) -> TableOptions {
        TableOptions {
            db_id: Some(db_id),
            file_number: None,
            block_size: self.block_size,
            block_restart_interval: self.block_restart_interval,
            compression: self.compression_for_level(level, bottommost),
            compression_level: self.compression_level,
            bloom_bits_per_key: self.bloom_bits_per_key,
            prefix_extractor: self.prefix_extractor,
            whole_key_filtering: self.whole_key_filtering,
            // Direct writes leave no dirty pages behind to sync early.
            bytes_per_sync: if self.use_direct_io_for_flush_and_compaction { 0 } else { self.bytes_per_sync },
            // FIFO's TTL needs each table's age; a compaction replaces it with its inputs' oldest.
            creation_time: (self.compaction_style == crate::compaction_style::CompactionStyle::Fifo)
                .then(|| self.compaction_options_fifo.clock.now_secs()),
        }
    }

    /// Output file size target at `level` (L0 and L1 use the base).
    pub fn target_file_size(&self, level: usize) -> u64 {
        let mut s = self.target_file_size_base;
        for _ in 1..level.max(1) {
            s = s.saturating_mul(self.target_file_size_multiplier);
        }
        s
    }
}

/// The upper bounds [`Options::validate`] enforces, and the engine's size limits on keys and values.
pub mod limits {
    /// Largest `write_buffer_size`: 4 GiB.
    pub const MAX_WRITE_BUFFER_SIZE: usize = 4 << 30;
    /// Largest `max_write_buffer_number`.
    pub const MAX_WRITE_BUFFER_NUMBER: usize = 64;
    /// Largest level-0 trigger (`level0_stop_writes_trigger`, which bounds the two others). High enough for
    /// the "never" values of RocksDB's bulk-load settings (10 485 760), low enough for any arithmetic on it.
    pub const MAX_LEVEL0_TRIGGER: usize = 1 << 30;
    /// Largest `max_bytes_for_level_multiplier` and `target_file_size_multiplier`.
    pub const MAX_MULTIPLIER: u64 = 1000;
    /// Largest `target_file_size_base`: 1 TiB.
    pub const MAX_TARGET_FILE_SIZE: u64 = 1 << 40;
    /// Largest `max_background_jobs`: each is a thread started at open.
    pub const MAX_BACKGROUND_JOBS: usize = 256;
    /// Largest `max_subcompactions`: each piece of a compaction is a thread with its own input iterators.
    pub const MAX_SUBCOMPACTIONS: u32 = 64;
    /// Largest `compaction_readahead_size` and `max_auto_readahead_size`: 256 MiB (one buffer of that size
    /// per table being read).
    pub const MAX_READAHEAD_SIZE: usize = 256 << 20;
    /// zstd's range of levels.
    pub const MIN_COMPRESSION_LEVEL: i32 = -(1 << 17);
    /// zstd's strongest level.
    pub const MAX_COMPRESSION_LEVEL: i32 = 22;
    /// Largest key length plus value (or merge operand) length of one write: 128 MiB minus 8 bytes, what one
    /// table entry can hold (the 8 bytes are the sequence and kind stored with the key). A larger `put`,
    /// `merge` or batch entry is refused with `InvalidArgument` before anything is written, so every
    /// acknowledged entry can be flushed and compacted. A merge whose full result would be larger keeps its
    /// operands unmerged in tables; reads still return the merged value.
    pub const MAX_KEY_VALUE_BYTES: usize = shaledb_format::table::MAX_ENTRY_LEN - shaledb_format::ikey::TRAILER_LEN;

    /// The size limit of one entry ([`MAX_KEY_VALUE_BYTES`]): what a table can store.
    /// Checked before a write is queued, so an entry the engine acknowledged can always be flushed (issue 9: a
    /// 130 MiB put was acknowledged, then every flush failed and the database could not be opened).
    pub(crate) fn check_len(key: &[u8], value: &[u8]) -> shaledb_vfs::Result<()> {
        let max = MAX_KEY_VALUE_BYTES;
        if key.len().saturating_add(value.len()) > max {
            return Err(shaledb_vfs::Error::InvalidArgument(format!(
                "key ({} bytes) plus value ({} bytes) exceeds the {max}-byte limit of one entry",
                key.len(),
                value.len()
            )));
        }
        Ok(())
    }
}

/// Options for one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// fsync the WAL before acknowledging (durable across power loss). Default: `false` (durable across a
    /// process kill only).
    pub sync: bool,
    /// Skip the WAL: the write is lost on any crash until its memtable is flushed. Default: `false`.
    pub disable_wal: bool,
}

/// Options for reads and iterators.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Read as of this snapshot. Default: the latest state.
    pub snapshot: Option<crate::Snapshot>,
    /// Check the crc of every block read. Default: `true`.
    pub verify_checksums: bool,
    /// Put blocks read into the block cache. Default: `true`.
    pub fill_cache: bool,
    /// Iterators: the smallest user key to yield (inclusive). Default: none.
    pub iterate_lower_bound: Option<Vec<u8>>,
    /// Iterators: the user key to stop before (exclusive). Default: none.
    pub iterate_upper_bound: Option<Vec<u8>>,
    /// Iterators: bytes read at once from each table file when a data block is not in the block cache
    /// (RocksDB `ReadOptions::readahead_size`), from the first block on, in the direction of iteration;
    /// the blocks are then served from that buffer (and put into the block cache when `fill_cache`). 0:
    /// the automatic readahead, as RocksDB's: after two sequential block reads in one file, each read takes
    /// 8 KiB more than the block, doubling up to [`Options::max_auto_readahead_size`] (256 KiB), so a long
    /// scan issues large sequential reads and a short one reads no more than it needs. Works with and without
    /// `use_direct_reads`. Point lookups never read ahead. A window never extends past the table's data
    /// blocks, which bounds its buffer. Default: 0.
    pub readahead_size: usize,
    /// Cursors: after a `seek` or `seek_for_prev`, yield only keys with the target's prefix, by the
    /// database's [`Options::prefix_extractor`] (RocksDB `prefix_same_as_start`): the cursor becomes invalid
    /// at the prefix's end, in both directions, and skips every table and memtable whose prefix filter
    /// excludes the prefix. A target outside the extractor's domain (a `Fixed(n)` extractor and a target
    /// shorter than `n`) seeks in total order. `seek_to_first`/`seek_to_last` are never confined. No effect
    /// without an extractor or with [`total_order_seek`](Self::total_order_seek). Unlike RocksDB's plain
    /// prefix mode, ShaleDB never confines or filters a cursor without this option, so results never depend
    /// on the extractor. Default: `false`.
    pub prefix_same_as_start: bool,
    /// Cursors: ignore the prefix extractor (RocksDB `total_order_seek`): no prefix confinement or
    /// filtering. Default: `false`.
    pub total_order_seek: bool,
    /// TTL mode ([`Options::ttl`]): treat values older than the TTL as absent, in `get`, `multi_get` and
    /// iterators. `false` returns them until a compaction removes them, as RocksDB's `DBWithTTL` does. No
    /// effect outside TTL mode. Default: `false`.
    pub hide_expired: bool,
    /// Where a read may look (RocksDB `read_tier`): [`ReadTier::All`] reads the files as needed;
    /// [`ReadTier::BlockCacheOnly`] (RocksDB `kBlockCacheTier`) answers only from memory, for callers that
    /// must not wait on the disk (an event loop): a read that would need any file I/O stops with
    /// [`Error::Incomplete`] (`is_incomplete()`) having done none, and can be run again
    /// with `All` elsewhere. Honoured by `get`, `multi_get` (per key) and iterators/cursors (the cursor turns
    /// invalid with the `Incomplete` status: it never skips or invents a key). Default: [`ReadTier::All`].
    pub read_tier: ReadTier,
}

/// Where a read may look ([`ReadOptions::read_tier`], RocksDB's `ReadTier`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReadTier {
    /// Memtables, the block cache and the files (RocksDB `kReadAllTier`). The default.
    #[default]
    All,
    /// Memtables and what is in memory only (RocksDB `kBlockCacheTier`): entries in the memtables, data,
    /// index and filter blocks in the block cache (or pinned in an open table), tables already open in the
    /// table cache. Anything else (a data or index block to read, a table to open, range tombstones not yet
    /// loaded, a blob value) makes the read return [`Error::Incomplete`] without
    /// reading. A filter block evicted from the cache is not read either: the table is then searched without
    /// it. Blocks are never inserted into the cache by such a read (it reads none).
    BlockCacheOnly,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            verify_checksums: true,
            fill_cache: true,
            iterate_lower_bound: None,
            iterate_upper_bound: None,
            readahead_size: 0,
            prefix_same_as_start: false,
            total_order_seek: false,
            hide_expired: false,
            read_tier: ReadTier::All,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        Options::default().validate().unwrap();
    }

    #[test]
    fn bad_values_name_the_option() {
        let o = Options { max_write_buffer_number: 1, ..Options::default() };
        let e = o.validate().unwrap_err();
        assert!(e.is_invalid_argument());
        assert!(e.to_string().contains("max_write_buffer_number"));
        let o = Options { level0_stop_writes_trigger: 3, ..Options::default() };
        assert!(o.validate().unwrap_err().to_string().contains("level0_stop_writes_trigger"));
        let o = Options { block_size: 10, ..Options::default() };
        assert!(o.validate().unwrap_err().to_string().contains("block_size"));
    }

    /// Issue 9: `max_background_jobs = 100000` passed validation and aborted the process at open.
    #[test]
    fn upper_bounds_are_enforced() {
        let cases: Vec<(&str, Options)> = vec![
            ("max_background_jobs", Options { max_background_jobs: 100_000, ..Options::default() }),
            ("write_buffer_size", Options { write_buffer_size: usize::MAX, ..Options::default() }),
            ("max_write_buffer_number", Options { max_write_buffer_number: 1 << 20, ..Options::default() }),
            (
                "level0_stop_writes_trigger",
                Options {
                    level0_slowdown_writes_trigger: 1 << 31,
                    level0_stop_writes_trigger: usize::MAX,
                    ..Options::default()
                },
            ),
            ("max_bytes_for_level_multiplier", Options { max_bytes_for_level_multiplier: 1e9, ..Options::default() }),
            ("target_file_size_base", Options { target_file_size_base: u64::MAX, ..Options::default() }),
            ("target_file_size_multiplier", Options { target_file_size_multiplier: 1 << 40, ..Options::default() }),
            ("compression_level", Options { compression_level: 1000, ..Options::default() }),
            ("num_levels", Options { num_levels: 1000, ..Options::default() }),
            ("block_size", Options { block_size: usize::MAX, ..Options::default() }),
        ];
        for (name, o) in cases {
            let e = o.validate().unwrap_err();
            assert!(e.is_invalid_argument(), "{name}: {e}");
            assert!(e.to_string().contains(name), "{name}: {e}");
        }
        let at_limits = Options {
            max_background_jobs: limits::MAX_BACKGROUND_JOBS,
            max_write_buffer_number: limits::MAX_WRITE_BUFFER_NUMBER,
            target_file_size_base: limits::MAX_TARGET_FILE_SIZE,
            compression_level: limits::MAX_COMPRESSION_LEVEL,
            ..Options::default()
        };
        at_limits.validate().unwrap();
    }

    #[test]
    fn compression_per_level_and_bottommost() {
        let o = Options {
            compression_per_level: vec![CompressionType::None, CompressionType::None, CompressionType::Lz4],
            bottommost_compression: Some(CompressionType::Zstd),
            ..Options::default()
        };
        assert_eq!(o.compression_for_level(0, false), CompressionType::None);
        assert_eq!(o.compression_for_level(5, false), CompressionType::Lz4);
        assert_eq!(o.compression_for_level(5, true), CompressionType::Zstd);
    }
}
