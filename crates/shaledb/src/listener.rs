//! The event listener API (RocksDB's `EventListener`): callbacks told when flushes and compactions begin and
//! end, when table files are created and deleted, when the write-stall condition changes and when a
//! background error makes the database read-only.
//!
//! ```
//! use shaledb::listener::{EventListener, FlushJobInfo};
//! use shaledb::{Db, Options};
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! #[derive(Default)]
//! struct Flushes(AtomicU64);
//! impl EventListener for Flushes {
//!     fn on_flush_completed(&self, info: &FlushJobInfo) {
//!         self.0.fetch_add(info.output_files.len() as u64, Ordering::SeqCst);
//!     }
//! }
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let counter = Arc::new(Flushes::default());
//! let db = Db::open(dir.path(), Options { listeners: vec![counter.clone()], ..Options::default() })?;
//! db.put("k", "v")?;
//! db.flush()?;
//! assert_eq!(counter.0.load(Ordering::SeqCst), 1);
//! # Ok::<(), shaledb::Error>(())
//! ```
//!
//! **Threads and locks.** Every callback runs on a background thread of the database (for
//! [`crate::Db::compact_range`] and the other manual compactions: the calling thread, which runs the
//! compaction), never while the database's state lock or write-queue lock is held: a callback may call back
//! into the database (`get`, `property`, even `put`) without deadlocking. It does hold up the job it reports
//! on (and, while it runs, that background thread does nothing else), so it should be quick, as RocksDB asks.
//! A callback must not wait for background work ([`crate::Db::flush`], `compact_range`,
//! `wait_for_compaction`), nor write while writes are stopped: the thread that would do that work may be the
//! one running the callback. A callback that panics is caught (the process's panic hook reports it) and the job
//! goes on.
//!
//! **When.** `on_flush_begin`/`on_compaction_begin` run before the job writes anything; `on_table_file_created`
//! for each output and then `on_flush_completed`/`on_compaction_completed` after its result is recorded in
//! the MANIFEST and visible to reads; [`crate::Db::flush`] returns only after the `on_flush_completed` calls of
//! the flushes it waited for have returned (the example above relies on it). A compaction that fails (or is aborted by close) is reported to
//! `on_compaction_completed` with its error, as RocksDB reports its status; a failed flush is reported through
//! `on_background_error`. Stall changes, deletions of table files and background errors are noticed under the
//! state lock, queued, and delivered in order by the next background thread that runs: shortly after, on
//! another thread than the one that caused them (a writer for a WAL error). The flushes of WAL replay inside
//! `Db::open` are not reported (they finish before `open` returns), nor is anything of a read-only instance.

use shaledb_vfs::Error;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::stats::CompactionStats;

/// Callbacks for database events; every method has a default that does nothing. Installed through
/// [`crate::Options::listeners`]. See the module documentation for the threads and locks they run under.
pub trait EventListener: Send + Sync {
    /// A flush is about to write a memtable (`output_files` empty, `duration` zero).
    fn on_flush_begin(&self, info: &FlushJobInfo) {
        let _ = info;
    }
    /// A flush's tables are in the MANIFEST and visible to reads.
    fn on_flush_completed(&self, info: &FlushJobInfo) {
        let _ = info;
    }
    /// A compaction (or trivial move) is about to run (`output_files` empty, `stats` zero).
    fn on_compaction_begin(&self, info: &CompactionJobInfo) {
        let _ = info;
    }
    /// A compaction finished: recorded and visible when `error` is `None`, else failed or aborted.
    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        let _ = info;
    }
    /// A flush or compaction wrote a table file that is now live.
    fn on_table_file_created(&self, info: &TableFileCreationInfo) {
        let _ = info;
    }
    /// A table file no live version references was removed (or its removal failed: `error`).
    fn on_table_file_deleted(&self, info: &TableFileDeletionInfo) {
        let _ = info;
    }
    /// The write-stall condition changed.
    fn on_stall_conditions_changed(&self, info: &WriteStallInfo) {
        let _ = info;
    }
    /// A background error made the database read-only (docs/durability.md D6). Unlike RocksDB's, the
    /// callback cannot suppress or replace the error: a failed write or sync is never retried (D6). Called for
    /// the first error only; later ones are logged to `LOG`.
    fn on_background_error(&self, reason: BackgroundErrorReason, error: &Error) {
        let _ = (reason, error);
    }
}

/// A table file written by a flush or a compaction.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableFileInfo {
    /// Its file number (`NNNNNN.sst`).
    pub file_number: u64,
    /// Its path.
    pub path: PathBuf,
    /// The level it went to (or, for a compaction input, came from).
    pub level: usize,
    /// Its size in bytes.
    pub file_size: u64,
    /// Entries it holds, deletions included.
    pub num_entries: u64,
    /// Deletions among them.
    pub num_deletions: u64,
    /// Smallest sequence number in it.
    pub smallest_seqno: u64,
    /// Largest sequence number in it.
    pub largest_seqno: u64,
}

/// Why a memtable was flushed (RocksDB's `FlushReason`, the two ShaleDB has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlushReason {
    /// The memtable had reached `write_buffer_size` (RocksDB `kWriteBufferFull`).
    WriteBufferFull,
    /// It was switched before it was full: [`crate::Db::flush`], close, `compact_range`, ingestion
    /// (RocksDB's `kManualFlush`, `kShutDown`, `kExternalFileIngestion`, which ShaleDB does not tell apart).
    Manual,
}

/// A flush (RocksDB's `FlushJobInfo`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FlushJobInfo {
    /// Numbers the background jobs of this open (flushes and compactions) from 1.
    pub job_id: u64,
    /// Why it runs.
    pub reason: FlushReason,
    /// The number of the WAL the (oldest) memtable was written to (its id).
    pub memtable_id: u64,
    /// Memtables written into the one table: every immutable memtable of the family that waited for a flush
    /// when this one began (RocksDB's flush job takes them all too).
    pub num_memtables: u64,
    /// Entries in the memtables.
    pub num_entries: u64,
    /// Deletions among them.
    pub num_deletions: u64,
    /// Writes were slowed down (RocksDB `triggered_writes_slowdown`) when the flush began.
    pub triggered_writes_slowdown: bool,
    /// Writes were stopped (RocksDB `triggered_writes_stop`) when the flush began.
    pub triggered_writes_stop: bool,
    /// The level-0 tables written (empty at begin, and for a memtable with nothing left to write).
    pub output_files: Vec<TableFileInfo>,
    /// Bytes written.
    pub bytes_written: u64,
    /// Wall time of the flush (zero at begin).
    pub duration: Duration,
}

/// A compaction (RocksDB's `CompactionJobInfo`, with its `CompactionJobStats` as [`CompactionStats`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompactionJobInfo {
    /// Numbers the background jobs of this open (flushes and compactions) from 1.
    pub job_id: u64,
    /// RocksDB's name of the reason, without its `k`: `LevelL0FilesNum`, `LevelMaxLevelSize`,
    /// `ManualCompaction`, ...
    pub reason: String,
    /// The level the inputs come from (RocksDB `base_input_level`).
    pub base_input_level: usize,
    /// The level the outputs go to.
    pub output_level: usize,
    /// The input files of both levels.
    pub input_files: Vec<TableFileInfo>,
    /// The files written (empty at begin, on failure, and for a trivial move).
    pub output_files: Vec<TableFileInfo>,
    /// A trivial move: the one input is re-linked to `output_level`; nothing is read or written.
    pub trivial_move: bool,
    /// Bytes, records and time (zero at begin).
    pub stats: CompactionStats,
    /// Why it failed, at completion; `None` when it succeeded.
    pub error: Option<Error>,
}

/// Why a table file was created (RocksDB's `TableFileCreationReason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableFileCreationReason {
    /// By a flush.
    Flush,
    /// By a compaction.
    Compaction,
}

/// A table file a flush or compaction created (RocksDB's `TableFileCreationInfo`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TableFileCreationInfo {
    /// The job that wrote it.
    pub job_id: u64,
    /// Flush or compaction.
    pub reason: TableFileCreationReason,
    /// The file.
    pub file: TableFileInfo,
}

/// A table file deleted (RocksDB's `TableFileDeletionInfo`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TableFileDeletionInfo {
    /// Its file number.
    pub file_number: u64,
    /// Its path.
    pub path: PathBuf,
    /// Why the removal failed (the file is then removed as an orphan at the next open).
    pub error: Option<Error>,
}

/// The write-stall condition (RocksDB's `WriteStallCondition`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WriteStallCondition {
    /// Writes proceed at full speed.
    #[default]
    Normal,
    /// Writes are slowed to `delayed_write_rate`.
    Delayed,
    /// Writes wait until flushes or compactions catch up.
    Stopped,
}

/// A change of the write-stall condition (RocksDB's `WriteStallInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteStallInfo {
    /// The condition now.
    pub current: WriteStallCondition,
    /// The condition before.
    pub previous: WriteStallCondition,
}

/// What failed (RocksDB's `BackgroundErrorReason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackgroundErrorReason {
    /// A flush (writing its table or recording it).
    Flush,
    /// A compaction (writing its tables or recording them).
    Compaction,
    /// A write or sync of the WAL by a foreground write (RocksDB `kWriteCallback`).
    WriteCallback,
    /// Switching to a new memtable and WAL (RocksDB `kMemTable`).
    MemTable,
    /// A MANIFEST write outside flushes and compactions (ingestion).
    ManifestWrite,
}

/// An event noticed under the state lock, delivered later without it.
pub(crate) enum Deferred {
    Stall(WriteStallInfo),
    Deleted(TableFileDeletionInfo),
    BackgroundError(BackgroundErrorReason, Error),
}

/// The listeners of one database, and the events waiting for delivery.
pub(crate) struct Listeners {
    list: Vec<Arc<dyn EventListener>>,
    pending: parking_lot::Mutex<VecDeque<Deferred>>,
    /// Held by the thread delivering `pending`, so events arrive in order. A leaf lock.
    delivering: parking_lot::Mutex<()>,
    job_ids: AtomicU64,
}

impl Listeners {
    pub(crate) fn new(list: Vec<Arc<dyn EventListener>>) -> Listeners {
        Listeners { list, pending: Default::default(), delivering: Default::default(), job_ids: AtomicU64::new(0) }
    }

    /// True when there is a listener (everything else is skipped without one).
    pub(crate) fn any(&self) -> bool {
        !self.list.is_empty()
    }

    /// A new job id.
    pub(crate) fn next_job_id(&self) -> u64 {
        self.job_ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Calls `f` on every listener. A panic in a callback is caught (the panic hook has reported it), so it
    /// never ends a background thread. REQUIRES: no database lock held.
    pub(crate) fn each(&self, f: impl Fn(&dyn EventListener)) {
        for l in &self.list {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(l.as_ref())));
        }
    }

    /// Queues an event for [`Listeners::deliver`] (callable under any lock: the queue's mutex is a leaf).
    pub(crate) fn defer(&self, ev: Deferred) {
        if self.any() {
            self.pending.lock().push_back(ev);
        }
    }

    /// True when events wait for delivery.
    pub(crate) fn has_pending(&self) -> bool {
        self.any() && !self.pending.lock().is_empty()
    }

    /// Delivers the queued events, in order. Returns at once when another thread is delivering (it takes
    /// what was queued meanwhile too). REQUIRES: no database lock held.
    pub(crate) fn deliver(&self) {
        loop {
            {
                let Some(_turn) = self.delivering.try_lock() else { return };
                loop {
                    let Some(ev) = self.pending.lock().pop_front() else { break };
                    self.each(|l| match &ev {
                        Deferred::Stall(info) => l.on_stall_conditions_changed(info),
                        Deferred::Deleted(info) => l.on_table_file_deleted(info),
                        Deferred::BackgroundError(reason, e) => l.on_background_error(*reason, e),
                    });
                }
            }
            // An event queued after the last pop, while another thread found us delivering, is ours.
            if self.pending.lock().is_empty() {
                return;
            }
        }
    }
}

/// The listener view of a table's metadata.
pub(crate) fn table_info(dir: &std::path::Path, level: usize, f: &shaledb_format::edit::FileMeta) -> TableFileInfo {
    TableFileInfo {
        file_number: f.number,
        path: crate::filenames::table(dir, f.number),
        level,
        file_size: f.file_size,
        num_entries: f.num_entries,
        num_deletions: f.num_deletions,
        smallest_seqno: f.smallest_seq,
        largest_seqno: f.largest_seq,
    }
}
