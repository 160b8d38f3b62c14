//! ShaleDB: a durable, concurrent LSM-tree key-value storage engine.
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
pub use db::{destroy, destroy_with, ColumnFamily, ColumnFamilyDescriptor, Db, SizeApproximationOptions};
pub use info_log::ctime_utc;
pub use iter::{Cursor, Iter, KeyRange};
pub use options::{MemTableRep, Options, ReadOptions, WalRecoveryMode, WriteOptions};
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
