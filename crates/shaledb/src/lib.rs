//! ShaleDB: a durable, concurrent LSM-tree key-value storage engine.
//!
//! Where things are, one line per module (ARCHITECTURE.md tells the same story at length):
//!
//! The database and its options:
//! - `db/`: [`Db`], open and recovery, the public calls, and the engine's moving parts; its `mod.rs` lists
//!   its files and the lock order;
//! - [`options`]: [`Options`], [`ReadOptions`], [`WriteOptions`] and their limits; `options_file/`: the
//!   OPTIONS file an open writes and checks;
//! - `batch.rs`: [`WriteBatch`], applied all or nothing.
//!
//! The write path:
//! - `memtable/`: the memtable (a concurrent skiplist, or a vector sorted at switch) over an arena;
//! - `range_del.rs`: range tombstones (`delete_range`) and the fragments both paths read them as;
//! - [`merge`]: merge operators (read-modify-write without the read).
//!
//! The read path:
//! - `lookup.rs`: the state of one point lookup across memtables and tables;
//! - [`iter`]: merging, level and database iterators, [`Iter`] and [`Cursor`];
//! - `prefix.rs`: prefix filters on point lookups and cursors;
//! - `snapshot.rs`: [`Snapshot`], a pinned sequence number;
//! - `table_cache.rs`: open tables, bounded by `max_open_files`.
//!
//! Background work:
//! - `compaction.rs` (with `compaction/`): writing a sorted run, the I/O half of flushes and compactions;
//! - `picker/`: which compaction runs next, a pure function of a version and the options;
//! - [`compaction_style`]: universal and FIFO compaction's options; [`compaction_filter`]: the user's filter;
//! - [`rate_limiter`]: the limit on background writes; [`listener`]: the events told to the application.
//!
//! Files and formats (the codecs themselves are in the `shaledb-format` crate):
//! - [`version`]: a version, the live tables per level; `version_set.rs`: the MANIFEST and the current version;
//! - `atomic_file.rs`: a small file replaced whole and durably (CURRENT, IDENTITY, OPTIONS);
//! - `identity.rs`: the database's id; `info_log.rs`: the `LOG` file; `lost.rs`: what recovery set aside;
//! - `repair.rs`: [`repair()`], rebuilding a database whose MANIFEST is lost;
//! - [`stats`]: counters and figures; `stats_report.rs`: the `stats` text reports.
//!
//! Features:
//! - [`txn`]: pessimistic and optimistic transactions; [`ttl`]: TTL mode, values that expire;
//! - `blob/`: blob files, large values kept out of the tables; [`ingest`]: external tables loaded whole;
//! - [`backup`]: incremental backups (checkpoints are `db/checkpoint.rs`).
//!
//! ## Example
//!
//! ```
//! use shaledb::{Db, Options, WriteBatch};
//!
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path();
//! let db = Db::open(path, Options::default())?;
//! db.put(b"key", b"value")?;
//! assert_eq!(db.get(b"key")?.as_deref(), Some(&b"value"[..]));
//!
//! let mut batch = WriteBatch::new(); // applied all together or not at all
//! batch.put("user:1", "ada").put("user:2", "grace").delete("key");
//! db.write(&batch)?;
//!
//! for entry in db.prefix("user:") {
//!     let (key, value) = entry?;
//!     println!("{} = {}", String::from_utf8_lossy(&key), String::from_utf8_lossy(&value));
//! }
//! db.close()?;
//! # Ok::<(), shaledb::Error>(())
//! ```
//!
//! Reads: [`Db::get`]; [`Db::iter`], [`Db::range`] and [`Db::prefix`] return a Rust [`Iterator`] of
//! `Result<(key, value)>` (double-ended: `.rev()` walks backwards); [`Db::cursor`] returns a [`Cursor`]
//! (RocksDB's `Iterator`: seek, next, prev) for seek-heavy work. Every method has a `_opt` form that takes
//! its options first, as RocksDB's C++ API does: `get_opt(&ReadOptions, key)`, `range_opt(&ReadOptions,
//! range)`, `put_opt(&WriteOptions, key, value)`, `write_opt(&WriteOptions, &batch)`.
//!
//! See ARCHITECTURE.md for the path of a write and of a read, the threads and the lock order, and
//! docs/durability.md for what survives which crash.

mod atomic_file;
pub mod backup;
mod batch;
mod blob;
mod compaction;
pub mod compaction_filter;
pub mod compaction_style;
mod db;
use shaledb_format::filenames;
mod identity;
mod info_log;
pub mod ingest;
pub mod iter;
pub mod listener;
mod lookup;
mod lost;
mod memtable;
pub mod merge;
pub mod options;
mod options_file;
mod picker;
mod prefix;
mod range_del;
pub mod rate_limiter;
mod repair;
mod snapshot;
pub mod stats;
mod stats_report;
mod table_cache;
pub mod ttl;
pub mod txn;
pub mod version;
mod version_set;

pub use batch::WriteBatch;
pub use compaction_filter::{CompactionFilter, Decision, FilterContext};
pub use compaction_style::{CompactionOptionsFifo, CompactionOptionsUniversal, CompactionStopStyle, CompactionStyle};
pub use db::{destroy, destroy_with, ColumnFamily, Db, SizeApproximationOptions};
pub use info_log::ctime_utc;
pub use iter::{Cursor, Iter, KeyRange};
pub use options::family::ColumnFamilyDescriptor;
pub use options::{MemTableRep, Options, ReadOptions, ReadTier, WalRecoveryMode, WriteOptions};
pub use options_file::{LoadedColumnFamily, LoadedOptions};
pub use rate_limiter::{IoPriority, RateLimiter};
pub use repair::{repair, RepairReport};
pub use shaledb_format::compress::CompressionType;
pub use shaledb_format::prefix::PrefixExtractor;
pub use shaledb_vfs::{Error, Fs, PosixFs, Result};
pub use snapshot::Snapshot;
pub use stats::{CompactionStats, Histogram, LevelStats, StallCounts, Statistics};
pub use ttl::{Clock, SystemClock, Ttl};
pub use txn::{OptimisticTransactionDb, Transaction, TransactionDb, TransactionDbOptions, TransactionOptions};

/// The git commit this engine was built from (12 hex digits), or "unknown" outside a git checkout. Written to
/// the LOG at every open (`build: Git sha <commit>`, where RocksDB's LOG has its own `Git sha` line, which
/// benchmark.sh reads into report.tsv's githash column) and printed by `shaledb --version`.
pub const BUILD_COMMIT: &str = env!("SHALEDB_GIT_COMMIT");

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}
