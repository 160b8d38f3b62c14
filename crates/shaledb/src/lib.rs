//! ShaleDB: a durable, concurrent LSM-tree key-value storage engine.
//!
//! ```no_run
//! use shaledb::{Db, Options};
//! let db = Db::open("/tmp/shaledb-example", Options::default())?;
//! db.put(b"key", b"value")?;
//! assert_eq!(db.get(b"key")?.as_deref(), Some(&b"value"[..]));
//! db.close()?;
//! # Ok::<(), shaledb::Error>(())
//! ```
//!
//! See ARCHITECTURE.md for the path of a write and of a read, the threads and the lock order, and
//! docs/durability.md for what survives which crash.

mod batch;
mod compaction;
mod db;
mod filenames;
mod identity;
mod info_log;
pub mod iter;
mod lookup;
mod lost;
mod memtable;
pub mod merge;
pub mod options;
mod picker;
mod repair;
mod snapshot;
pub mod stats;
mod stats_report;
mod table_cache;
pub mod version;
mod version_set;

pub use batch::WriteBatch;
pub use db::{destroy, destroy_with, Db};
pub use iter::{DbIterator, Range};
pub use options::{Options, ReadOptions, WalRecoveryMode, WriteOptions};
pub use repair::{repair, RepairReport};
pub use shaledb_format::compress::CompressionType;
pub use shaledb_vfs::{Error, Fs, PosixFs, Result};
pub use snapshot::Snapshot;
pub use stats::{CompactionStats, Histogram, LevelStats, Statistics};
