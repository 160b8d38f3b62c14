//! The database: shared state ([`DbInner`], [`State`]) and the public API ([`Db`]).
//!
//! The files of `db/`, by concern:
//! - opening: `open.rs` (recovery, the steps of docs/durability.md), `replay.rs` (WAL replay), `files.rs` (which
//!   files are ours, what open and `destroy` remove), `read_only.rs` and `secondary.rs` (the other two opens);
//! - the write path: `write.rs` (the writer queue and group commit), `wal.rs` (the WAL: appends, syncs, the
//!   memtable switch, live-WAL accounting), `stall.rs` (write stalls);
//! - the read path: `read.rs` (get, iterators, snapshots), `multi_get.rs`, `newest.rs`, `estimate.rs`,
//!   `properties.rs` (`Db::property`, `Db::statistics`);
//! - background work: `background.rs` (the scheduler: threads, what runs next, shutdown), `flush.rs` (flush jobs
//!   and `Db::flush`), `compact.rs` (compaction runs, `compact_range`, `compact_level`), `compaction_job.rs`
//!   (the I/O of one compaction), `obsolete.rs` (deleting files no version references), `events.rs` (listener
//!   infos), `stats_dump.rs`;
//! - features: `family.rs` and `family_api.rs` (column families), `checkpoint.rs`, `ingest.rs`;
//! - `errors.rs`: the refusals and the background error, shared by all (it imports no other file of `db/`).
//!
//! Lock order, outermost first: a thread holding one of these takes only those after it.
//! 1. `options_file`: held by `create_column_family` and `drop_column_family` from before `wal` until their
//!    OPTIONS file is written (`wal` and `state` are released by then).
//! 2. `write.queue`: the writer queue, held briefly to join it, form a group or hand over leadership; only a
//!    writer's `phase` (a leaf) is taken under it.
//! 3. `tail`: a secondary instance's catch-up (secondary.rs), held for a whole catch-up; it takes `state`, then
//!    `wal` once `state` is released.
//! 4. `wal_sync`: `sync_wal`'s turn, held for the whole call, the WAL's `fdatasync` included (run with `wal`
//!    released); it takes `wal` (twice), `state`, `closed_wals.list` and `closed_wals.dir_unsynced`.
//! 5. `wal`: the WAL and the next sequence number ([`wal::WalState`]), held by the write leader, `flush`,
//!    `ingest_external_file`, checkpoints, family creation and drop, and shutdown.
//! 6. `threads`: the background threads' handles, held by `start` while it spawns them (it takes `state`) and
//!    briefly by shutdown with nothing else held.
//! 7. `state`: [`State`]; released during all table I/O; background threads wait on `bg_cv` with it.
//! 8. `publish`: the order in which groups publish their sequence numbers (`publish_cv`).
//! 9. `closed_wals.list`, then `closed_wals.dir_unsynced`: the WALs switched out unsynced, and whether the
//!    directory needs an fsync; taken under `wal` and `state` by a memtable switch, or with nothing else held
//!    by `sync_closed_wals`, which keeps the list while it fsyncs them.
//!
//! Leaf locks, under which nothing else is taken: each writer's `phase`, `lock` (the LOCK file's handle,
//! released at drop), the snapshot list, the listeners' event queue (their `delivering` turn is only
//! try-locked), the table and blob caches, the `LOG`
//! file, the rate limiter, and the counters' per-level and per-job figures. Readers take none of the numbered
//! locks: they load the published [`SuperVersion`] and the visible sequence number.
mod background;
pub(crate) mod checkpoint;
mod compact;
mod compaction_job;
mod errors;
mod estimate;
mod events;
pub(crate) mod family;
mod family_api;
pub(crate) mod files;
mod flush;
mod ingest;
mod multi_get;
mod newest;
mod obsolete;
mod open;
mod properties;
mod read;
mod read_only;
mod replay;
mod secondary;
mod stall;
mod stats_dump;
mod wal;
mod write;

pub use estimate::SizeApproximationOptions;
pub use family::ColumnFamily;

use crate::options::family::ColumnFamilyDescriptor;

use crate::batch::WriteBatch;
use crate::memtable::MemTable;
use crate::options::limits::check_len;
use crate::options::{Options, WriteOptions};
use crate::snapshot::SnapshotList;
use crate::stats::Counters;
use crate::table_cache::TableCache;
use crate::version::Version;
use crate::version_set::VersionSet;
use parking_lot::{Condvar, Mutex};
use shaledb_format::batch::BatchRep;
use shaledb_format::cache::BlockCache;
use shaledb_format::ikey::{self};
use shaledb_format::table::TableStats;
use shaledb_vfs::{Error, FileLock, Fs, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

/// What readers see: the memtables and the version, published together by an atomic swap.
pub(crate) struct SuperVersion {
    pub(crate) mem: Arc<MemTable>,
    /// Immutable memtables waiting for flush, newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
}

/// State changed by writers switching memtables and by background jobs. Guarded by `DbInner::state`.
pub(crate) struct State {
    pub(crate) vs: VersionSet,
    /// Every live column family's memtables, by id; the default family (0) is always there.
    pub(crate) fams: std::collections::BTreeMap<u32, family::FamilyState>,
    /// The active memtables, for the write leader (rebuilt by [`State::rebuild_mems`]).
    pub(crate) mems: Arc<family::Mems>,
    /// Memtables being written to L0 now, as (family, memtable id): several at once with several flush
    /// threads (background.rs), and several in one flush when they waited for it together.
    pub(crate) flushing: HashSet<(u32, u64)>,
    /// Flush jobs running now (each writes one or more of the memtables in `flushing`).
    pub(crate) running_flushes: usize,
    /// Flushes whose tables are written but not yet recorded, because an older memtable of the same family
    /// is still being flushed, by (family, id of the oldest memtable written): flushes finish in any order and
    /// are recorded oldest first.
    pub(crate) flushed: std::collections::HashMap<(u32, u64), flush::Flushed>,
    /// Recorded flushes whose `on_flush_completed` callbacks have not returned yet: `Db::flush` waits for
    /// them too, so a listener has heard of a flush by the time the flush that caused it returns.
    pub(crate) flush_callbacks_pending: usize,
    /// Installed flushes whose obsolete WALs are being deleted with `state` released: `wait_for_compaction`
    /// returns only once they are gone.
    pub(crate) flush_wal_deletions_pending: usize,
    pub(crate) running_compactions: usize,
    /// Files that are inputs of a running compaction.
    pub(crate) busy: HashSet<u64>,
    /// Set by the first failed write, sync or background job; every later write reports it (D6).
    pub(crate) bg_error: Option<Arc<Error>>,
    /// Manual compactions in progress: automatic picking pauses meanwhile.
    pub(crate) manual: usize,
    /// Tables no longer in the current version, deleted once no live version references them.
    pub(crate) obsolete_tables: Vec<u64>,
    /// Every version ever published that may still be referenced by a reader, with its family id.
    pub(crate) live_versions: Vec<(u32, Weak<Version>)>,
    /// Background threads still running.
    pub(crate) bg_threads_alive: usize,
    /// Checkpoints and backups copying WALs now: obsolete WALs stay until none is (db/checkpoint.rs).
    pub(crate) wal_pins: usize,
    /// The write-stall condition last told to the listeners (stall.rs).
    pub(crate) stall: crate::listener::WriteStallCondition,
}

impl State {
    /// Rebuilds [`State::mems`] after a memtable switch or a family's creation or drop.
    pub(crate) fn rebuild_mems(&mut self) {
        self.mems = Arc::new(family::Mems(self.fams.iter().map(|(id, f)| (*id, f.mem.clone())).collect()));
    }

    /// True when some family has an immutable memtable waiting.
    pub(crate) fn any_imm(&self) -> bool {
        self.fams.values().any(|f| !f.imm.is_empty())
    }

    /// True when memtable `id` of family `fid` is being flushed or is flushed and waits to be recorded.
    pub(crate) fn flush_claimed(&self, fid: u32, id: u64) -> bool {
        self.flushing.contains(&(fid, id)) || self.flushed.iter().any(|((f, _), done)| *f == fid && done.holds(id))
    }

    /// A lower bound on the sequence numbers of family `fid`'s memtables' entries, active and immutable (0 for
    /// an unknown family): intra-L0 compaction merges only L0 files older than this (`picker::intra_l0`).
    pub(crate) fn earliest_mem_seq(&self, fid: u32) -> u64 {
        let Some(f) = self.fams.get(&fid) else { return 0 };
        f.imm.iter().chain(std::iter::once(&f.mem)).map(|m| m.first_seq()).min().unwrap_or(0)
    }

    /// The oldest immutable memtable of family `fid` that no flush has taken yet.
    pub(crate) fn next_unclaimed(&self, fid: u32) -> Option<&Arc<MemTable>> {
        self.fams.get(&fid)?.imm.iter().rev().find(|m| !self.flush_claimed(fid, m.id()))
    }

    /// The immutable memtables of family `fid` that no flush has taken yet, oldest first: the run that starts at
    /// [`State::next_unclaimed`] (flushes take memtables oldest first, so the unclaimed ones are the newest).
    pub(crate) fn unclaimed(&self, fid: u32) -> Vec<Arc<MemTable>> {
        let Some(f) = self.fams.get(&fid) else { return Vec::new() };
        let claimed = |m: &&Arc<MemTable>| self.flush_claimed(fid, m.id());
        f.imm.iter().rev().skip_while(claimed).take_while(|m| !claimed(m)).cloned().collect()
    }
}

pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    /// The database's identity (MANIFEST, IDENTITY file, every new table's properties).
    pub(crate) db_id: crate::identity::DbId,
    pub(crate) opts: Options,
    pub(crate) fs: Arc<dyn Fs>,
    lock: Mutex<Option<Box<dyn FileLock>>>,
    /// The default column family (id 0): what every call without a family reads and writes.
    pub(crate) default: Arc<family::Family>,
    pub(crate) state: Mutex<State>,
    /// Signalled when background work may be due or has finished (with `state`).
    pub(crate) bg_cv: Condvar,
    pub(crate) write: write::WriteQueue,
    pub(crate) wal: Mutex<wal::WalState>,
    /// `sync_wal`'s turn (lock order: before `wal`): one caller at a time runs the WAL's `fdatasync` without
    /// the `wal` lock, so a second one syncs after it what was appended since.
    pub(crate) wal_sync: Mutex<()>,
    /// The WALs switched out with unsynced bytes (lock order: after `wal` and `state`, held alone while they
    /// are synced, so a flush can sync them while a stalled writer holds `wal`).
    pub(crate) closed_wals: wal::ClosedWals,
    /// Highest sequence number whose write is fully in a memtable: what new reads see.
    pub(crate) visible_seq: AtomicU64,
    pub(crate) publish: Mutex<()>,
    /// Held by `create_column_family` and `drop_column_family` from before `wal` until their new OPTIONS file
    /// is written, so that the file with the highest number lists the families as the last of them left them.
    pub(crate) options_file: Mutex<()>,
    pub(crate) publish_cv: Condvar,
    pub(crate) snapshots: Arc<SnapshotList>,
    pub(crate) tables: Arc<TableCache>,
    /// Open blob file readers (`crate::blob`).
    pub(crate) blobs: Arc<crate::blob::BlobFiles>,
    pub(crate) block_cache: Option<Arc<BlockCache>>,
    pub(crate) table_stats: Arc<TableStats>,
    pub(crate) counters: Counters,
    /// Set at close: background jobs stop taking work; running compactions abort.
    pub(crate) shutting_down: AtomicBool,
    /// A write with `disable_wal` was made since the open: its data is in no WAL, so close flushes even with
    /// `avoid_flush_during_shutdown` (RocksDB's `has_unpersisted_data_`).
    pub(crate) unlogged_writes: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The `LOG` file (info_log.rs).
    pub(crate) info_log: crate::info_log::InfoLog,
    /// What recovery at open dropped (D10).
    pub(crate) recovery_losses: crate::lost::Losses,
    /// Opened by [`Db::open_read_only`] (read_only.rs): every write is refused, nothing is flushed.
    pub(crate) read_only: bool,
    /// `Options::listeners`, and the events waiting for them (listener.rs).
    pub(crate) listeners: crate::listener::Listeners,
    /// Opened by [`Db::open_as_secondary`] (secondary.rs; `read_only` is set too).
    pub(crate) secondary: Option<secondary::Secondary>,
}

/// What an open, read-write (open.rs) or read-only (read_only.rs), recovered: the parts of a [`DbInner`] that
/// differ between the two.
pub(super) struct Opened {
    pub(super) vs: VersionSet,
    /// `None` when read-only: no LOCK is taken.
    pub(super) lock: Option<Box<dyn FileLock>>,
    /// Every live family's options and active memtable, by id (the default family's options are ignored:
    /// it has the database's).
    pub(super) fams: Vec<(u32, Options, Arc<MemTable>)>,
    pub(super) wal: wal::WalState,
    pub(super) visible_seq: u64,
    pub(super) counters: Counters,
    pub(super) info_log: crate::info_log::InfoLog,
    pub(super) losses: crate::lost::Losses,
    pub(super) read_only: bool,
    pub(super) secondary: Option<secondary::Secondary>,
}

impl DbInner {
    /// The shared state of a database `open` or `open_read_only` has recovered: the block and table caches,
    /// the first super version, no immutable memtable and no background job yet.
    pub(super) fn assemble(dir: &Path, opts: Options, o: Opened) -> Arc<DbInner> {
        let db_id = o.vs.db_id.unwrap_or_default();
        let block_cache = (opts.block_cache_size > 0)
            .then(|| Arc::new(BlockCache::with_shard_bits(opts.block_cache_size, opts.block_cache_shard_bits)));
        let table_stats = Arc::new(TableStats::default());
        let tables = Arc::new(TableCache::new(
            dir.to_path_buf(),
            opts.fs.clone(),
            &opts,
            block_cache.clone(),
            table_stats.clone(),
            db_id,
        ));
        let blobs = Arc::new(crate::blob::BlobFiles::new(dir, opts.fs.clone(), db_id));
        let mut fams = std::collections::BTreeMap::new();
        let mut live_versions = Vec::new();
        let token = family::new_db_token();
        for (id, fopts, mem) in o.fams {
            let Some(fv) = o.vs.families().get(&id) else { continue };
            let version = fv.current.clone();
            live_versions.push((id, Arc::downgrade(&version)));
            let fopts = if id == 0 { opts.clone() } else { fopts };
            let sv = SuperVersion { mem: mem.clone(), imm: Vec::new(), version };
            let fam = Arc::new(family::Family::new(id, fv.name.clone(), fopts, sv, token));
            fams.insert(id, family::FamilyState { fam, mem, imm: Vec::new(), shape: Default::default() });
        }
        let default = fams.get(&0).map(|f: &family::FamilyState| f.fam.clone()).unwrap_or_else(|| {
            // Unreachable: the version set always holds the default family and open gives its memtable.
            let version = o.vs.current().clone();
            let mem = Arc::new(MemTable::for_options(0, &opts));
            let sv = SuperVersion { mem: mem.clone(), imm: Vec::new(), version };
            let fam = Arc::new(family::Family::new(0, "default".into(), opts.clone(), sv, token));
            fams.insert(0, family::FamilyState { fam: fam.clone(), mem, imm: Vec::new(), shape: Default::default() });
            fam
        });
        let mut state = State {
            vs: o.vs,
            fams,
            mems: Arc::default(),
            flushing: HashSet::new(),
            running_flushes: 0,
            flushed: std::collections::HashMap::new(),
            flush_callbacks_pending: 0,
            flush_wal_deletions_pending: 0,
            running_compactions: 0,
            busy: Default::default(),
            bg_error: None,
            manual: 0,
            obsolete_tables: Vec::new(),
            live_versions,
            bg_threads_alive: 0,
            wal_pins: 0,
            stall: Default::default(),
        };
        state.rebuild_mems();
        Arc::new(DbInner {
            dir: dir.to_path_buf(),
            db_id,
            fs: opts.fs.clone(),
            lock: Mutex::new(o.lock),
            default,
            state: Mutex::new(state),
            bg_cv: Condvar::new(),
            write: Default::default(),
            wal: Mutex::new(o.wal),
            wal_sync: Mutex::new(()),
            closed_wals: Default::default(),
            visible_seq: AtomicU64::new(o.visible_seq),
            publish: Mutex::new(()),
            options_file: Mutex::new(()),
            publish_cv: Condvar::new(),
            snapshots: Arc::new(SnapshotList::default()),
            tables,
            blobs,
            block_cache,
            table_stats,
            counters: o.counters,
            shutting_down: AtomicBool::new(false),
            unlogged_writes: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            info_log: o.info_log,
            recovery_losses: o.losses,
            read_only: o.read_only,
            secondary: o.secondary,
            listeners: crate::listener::Listeners::new(opts.listeners.clone()),
            opts,
        })
    }
}

/// An open database. `Send + Sync`: share it between threads with an `Arc`.
///
/// Dropping it stops background work and syncs the WAL; [`Db::close`] also flushes the memtables and reports
/// errors.
pub struct Db {
    inner: Arc<DbInner>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

/// Removes every ShaleDB file of the database at `path`, then the directory if it is left empty, and returns
/// the names removed. Only a directory that holds a ShaleDB database (CURRENT naming a MANIFEST, or IDENTITY)
/// or nothing is touched: any other is refused with `InvalidArgument` naming what is there, and files whose
/// names are not ours stay. Fails with `Busy` when the database is open.
pub fn destroy(path: impl AsRef<Path>) -> Result<Vec<String>> {
    destroy_with(path.as_ref(), shaledb_vfs::default_fs().as_ref())
}

/// [`destroy`] on a given file system.
pub fn destroy_with(dir: &Path, fs: &dyn Fs) -> Result<Vec<String>> {
    files::destroy(dir, fs)
}

impl Db {
    /// Opens (and with `create_if_missing`, the default, creates) the database in directory `path`, replaying
    /// its WAL.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path();
    /// let db = Db::open(path, Options::default())?;
    /// db.put("greeting", "hello")?;
    /// db.close()?;
    ///
    /// // Reopened, it holds what was written.
    /// let db = Db::open(path, Options { create_if_missing: false, ..Options::default() })?;
    /// assert_eq!(db.get("greeting")?.as_deref(), Some(&b"hello"[..]));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = open::open(path.as_ref(), opts, &[])?;
        Ok(Db { inner })
    }

    /// Sets `key` to `value`. Keys and values are byte strings: anything that is `AsRef<[u8]>` (`&[u8]`,
    /// `b"..."`, `Vec<u8>`, `&str`, `String`). `key.len() + value.len()` may be at most
    /// [`crate::options::limits::MAX_KEY_VALUE_BYTES`] (128 MiB - 8); more is `InvalidArgument` (as for
    /// [`Db::merge`] and each entry of [`Db::write`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put(b"k1", b"v1")?;
    /// db.put("k2", "v2")?;
    /// db.put(vec![0, 1], 7u64.to_le_bytes())?;
    /// assert_eq!(db.get("k2")?, Some(b"v2".to_vec()));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    /// Removes `key` (a no-op when it is absent).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// db.delete("k")?;
    /// assert_eq!(db.get("k")?, None);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    /// Removes `key` with a *single deletion*, RocksDB's `SingleDelete`: a tombstone that compaction drops
    /// together with the one put it meets, instead of carrying it down to the bottom level. Reads treat it
    /// exactly like [`Db::delete`].
    ///
    /// **Contract** (RocksDB's): since the key's previous single deletion (or ever), it was put **at most
    /// once**, and it is never mixed with [`Db::delete`] or [`Db::merge`]. Anything else is *undefined*: after
    /// a compaction an older put may reappear, or a value vanish. ShaleDB does not check the contract on the
    /// write path (that would cost a read per write); compactions count every violation they meet in
    /// [`crate::stats::CompactionStats::single_delete_mismatches`] and log a line for it (in every build, not
    /// only debug ones: the check is a comparison of adjacent kinds).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// db.single_delete("k")?;
    /// assert_eq!(db.get("k")?, None);
    /// db.put("k", "again")?; // allowed: one put since the last single deletion
    /// assert_eq!(db.get("k")?, Some(b"again".to_vec()));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn single_delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.single_delete_opt(&WriteOptions::default(), key)
    }

    /// [`Db::single_delete`] with write options.
    pub fn single_delete_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.single_delete(key);
        self.write_opt(opts, &batch)
    }

    /// Deletes every key in `[begin, end)` (RocksDB's `DeleteRange`) with one range tombstone: a write of
    /// constant size whatever the number of keys, read back by `get`, `multi_get` and iterators (both ways),
    /// and by snapshots as of their sequence (a snapshot taken before still sees the keys). Keys written after
    /// it are live again. `begin > end` is `InvalidArgument`; `begin == end` deletes nothing.
    ///
    /// Flush writes the tombstones into the table's range-deletion block, and compaction drops the keys they
    /// cover (and, at the bottom level with no older snapshot, the tombstones themselves). Before then, a scan
    /// or seek over the deleted range seeks each memtable, table or level past the keys the tombstone hides
    /// in it instead of stepping over them, wherever all of them are older than the tombstone (a key written
    /// after the tombstone into the same range is read one by one, as it must be); a point read costs the same
    /// whatever the number deleted. Except in a cursor confined to a prefix (`prefix_same_as_start`), which
    /// steps over them.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, "v")?;
    /// }
    /// db.delete_range("b", "d")?;
    /// let keys: Vec<_> = db.iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [b"a".to_vec(), b"d".to_vec()]);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn delete_range(&self, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(&WriteOptions::default(), begin, end)
    }

    /// [`Db::delete_range`] with write options.
    pub fn delete_range_opt(&self, opts: &WriteOptions, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(begin, end);
        self.write_opt(opts, &batch)
    }

    /// Records a merge operand for `key`; needs [`Options::merge_operator`] (without one: `InvalidArgument`).
    /// Reads combine the operands with the value below them.
    ///
    /// ```
    /// use shaledb::{merge, Db, Options};
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path();
    /// let db = Db::open(path, Options { merge_operator: merge::builtin("uint64add"), ..Options::default() })?;
    /// db.merge("hits", 5u64.to_le_bytes())?;
    /// db.merge("hits", 7u64.to_le_bytes())?;
    /// assert_eq!(db.get("hits")?, Some(12u64.to_le_bytes().to_vec()));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.merge_opt(&WriteOptions::default(), key, operand)
    }

    /// [`Db::put`] with write options.
    ///
    /// ```
    /// use shaledb::WriteOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// // Acknowledged only once the WAL is fsynced: survives power loss.
    /// db.put_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, "k", "v")?;
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn put_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        check_len(key, value)?;
        let mut b = BatchRep::with_capacity(shaledb_format::batch::HEADER_LEN + key.len() + value.len() + 11);
        b.put(key, value);
        write::write(&self.inner, b, opts)
    }

    /// [`Db::delete`] with write options.
    pub fn delete_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        check_len(key, &[])?;
        let mut b = BatchRep::with_capacity(shaledb_format::batch::HEADER_LEN + key.len() + 6);
        b.delete(key);
        write::write(&self.inner, b, opts)
    }

    /// [`Db::merge`] with write options.
    pub fn merge_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let (key, operand) = (key.as_ref(), operand.as_ref());
        if self.inner.opts.merge_operator.is_none() {
            return Err(Error::InvalidArgument("merge needs Options::merge_operator to be set".into()));
        }
        check_len(key, operand)?;
        let mut b = BatchRep::with_capacity(shaledb_format::batch::HEADER_LEN + key.len() + operand.len() + 11);
        b.merge(key, operand);
        write::write(&self.inner, b, opts)
    }

    /// Applies every update of `batch` atomically: after a crash, all of them or none.
    ///
    /// ```
    /// use shaledb::WriteBatch;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("from", "100")?;
    /// let mut batch = WriteBatch::new();
    /// batch.delete("from").put("to", "100");
    /// db.write(&batch)?;
    /// assert_eq!((db.get("from")?, db.get("to")?), (None, Some(b"100".to_vec())));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.write_opt(&WriteOptions::default(), batch)
    }

    /// [`Db::write`] with write options. An empty batch writes nothing; with `sync` it still syncs the WAL,
    /// so every write acknowledged before it is durable when it returns.
    ///
    /// ```
    /// use shaledb::{WriteBatch, WriteOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// let mut batch = WriteBatch::new();
    /// batch.put("a", "1").put("b", "2");
    /// db.write_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, &batch)?;
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn write_opt(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        if batch.is_empty() {
            // Nothing to append; a synced empty write still makes every earlier write durable, as LevelDB's
            // and RocksDB's do (a transaction whose writes were all rolled back commits this way).
            return if opts.sync && !opts.disable_wal { wal::sync_wal(&self.inner) } else { Ok(()) };
        }
        let mut families = false;
        for e in batch.rep.iter() {
            let e = e?;
            check_len(e.key, e.value)?;
            if e.kind == ikey::ValueKind::RangeDeletion && e.key > e.value {
                return Err(Error::InvalidArgument("delete_range: the end key comes before the begin key".into()));
            }
            if e.family != 0 {
                families = true;
            } else if e.kind == ikey::ValueKind::Merge && self.inner.opts.merge_operator.is_none() {
                return Err(Error::InvalidArgument("merge needs Options::merge_operator to be set".into()));
            }
        }
        if families {
            family_api::check_batch_families(&self.inner, batch)?;
        }
        write::write(&self.inner, batch.rep.clone(), opts)
    }

    /// fsyncs the WAL, making every write acknowledged before the call durable across power loss (RocksDB's
    /// `SyncWAL`). Writes go on while the fsync runs (those made meanwhile may or may not be covered: the next
    /// call covers them); concurrent calls take turns. A no-op when nothing was written since the last sync. A
    /// failed sync makes the database read-only (D6) and is reported here and by every later write. Used for
    /// Redis's `appendfsync everysec`.
    pub fn sync_wal(&self) -> Result<()> {
        wal::sync_wal(&self.inner)
    }

    /// Writes the memtables (and any waiting immutable ones) of every column family to L0 tables and waits for
    /// it ([`Db::flush_cf`] flushes one family).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// assert_eq!(db.property("shaledb.num-files-at-level0").as_deref(), Some("1"));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn flush(&self) -> Result<()> {
        flush::flush(&self.inner, None)
    }

    /// Compacts the key range `[begin, end]` (both inclusive; `None` = unbounded) down to the last level,
    /// after a flush: what RocksDB's `CompactRange` does.
    ///
    /// Under universal compaction every file is merged into the last level, whatever the range; under FIFO
    /// compaction FIFO's own pick runs once (its size, TTL and intra-L0 rules), as RocksDB does for both.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// for i in 0..100u32 {
    ///     db.put(i.to_be_bytes(), "v")?;
    ///     db.delete(i.to_be_bytes())?;
    /// }
    /// db.compact_range(None, None)?; // everything: the deleted keys are gone from disk
    /// db.compact_range(Some(b"a".as_slice()), Some(b"m".as_slice()))?; // only keys in ["a", "m"]
    /// assert_eq!(db.iter().count(), 0);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        compact::compact_range(&self.inner, 0, begin, end)
    }

    /// Compacts every file of level 0 (`level` 0), or of the first non-empty level below it (`level` 1), into
    /// the level below, as db_bench's `compact0`/`compact1` do (LevelDB's `TEST_CompactRange` on one level).
    /// Returns how many files the level held and the levels `(from, to)`; `None` when it held none or is the
    /// last level. Automatic compactions pause meanwhile.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// let (files, from, to) = db.compact_level(0)?.expect("one L0 file");
    /// assert_eq!((files, from), (1, 0));
    /// assert!(to > 0);
    /// assert_eq!(db.compact_level(0)?, None); // L0 is empty now
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn compact_level(&self, level: usize) -> Result<Option<(usize, usize, usize)>> {
        if level > 1 {
            return Err(Error::InvalidArgument(format!("compact_level takes 0 or 1, got {level}")));
        }
        compact::compact_level(&self.inner, level)
    }

    /// Waits until no flush or compaction is running or due.
    pub fn wait_for_compaction(&self) -> Result<()> {
        background::wait_for_compaction(&self.inner)
    }
}

impl Db {
    /// The database's identity: 32 lowercase hex digits, drawn at random when it was created and kept in the
    /// MANIFEST, the IDENTITY file and every table.
    pub fn identity(&self) -> String {
        crate::identity::to_hex(&self.inner.db_id)
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Flushes every memtable, syncs, stops background work and releases the lock. Reports the first error
    /// (including a background error that made the database read-only). With
    /// [`Options::avoid_flush_during_shutdown`] it flushes nothing unless a write was made with `disable_wal`:
    /// the WAL, synced here, holds every write and the next open replays it.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path();
    /// let db = Db::open(path, Options::default())?;
    /// db.put("k", "v")?;
    /// db.close()?; // the lock is released: the database can be opened again at once
    /// let db = Db::open(path, Options::default())?;
    /// assert_eq!(db.get("k")?, Some(b"v".to_vec()));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn close(self) -> Result<()> {
        let r = background::shutdown(&self.inner, true);
        // Drop runs the (now idempotent) shutdown again and releases the lock.
        drop(self);
        r
    }

    /// Verifies every checksum of every live table and blob file (the engine side of `shaledb verify`); a blob
    /// file must also hold the records the MANIFEST recorded for it.
    pub fn verify_checksums(&self) -> Result<()> {
        let versions: Vec<Arc<Version>> =
            self.inner.state.lock().vs.families().values().map(|f| f.current.clone()).collect();
        for v in versions {
            for f in v.levels.iter().flatten() {
                self.inner.tables.open_uncached(f, false)?.verify()?;
            }
            crate::blob::verify_files(&self.inner.blobs, &v)?;
        }
        Ok(())
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = background::shutdown(&self.inner, false);
        self.inner.lock.lock().take();
    }
}

impl DbInner {
    /// Publishes a new super version of family `id` built from `st` (nothing once the family is dropped).
    /// REQUIRES: `state` locked (the caller's `st`).
    pub(crate) fn install_super_version(&self, st: &mut State, id: u32) {
        let (Some(version), Some(f)) = (st.vs.current_of(id).cloned(), st.fams.get(&id)) else { return };
        st.live_versions.retain(|(_, w)| w.strong_count() > 0);
        st.live_versions.push((id, Arc::downgrade(&version)));
        f.fam.sv.store(Arc::new(SuperVersion { mem: f.mem.clone(), imm: f.imm.clone(), version }));
        stall::note(self, st, None);
    }

    /// Records a background failure: the database turns read-only (D6); the listeners are told of the first.
    pub(crate) fn set_bg_error(
        &self,
        st: &mut State,
        e: &Error,
        reason: crate::listener::BackgroundErrorReason,
    ) -> Arc<Error> {
        Counters::add(&self.counters.bg_errors, 1);
        let cause = match &st.bg_error {
            Some(c) => {
                self.info_log.log(format_args!("background error (already read-only): {e}"));
                c.clone()
            }
            None => {
                let c = Arc::new(match e {
                    Error::ReadOnly { cause } => Error::clone(cause),
                    other => other.clone(),
                });
                st.bg_error = Some(c.clone());
                self.info_log.log(format_args!("background error, database now read-only: {c}"));
                self.listeners.defer(crate::listener::Deferred::BackgroundError(reason, Error::clone(&c)));
                c
            }
        };
        self.bg_cv.notify_all();
        cause
    }
}
