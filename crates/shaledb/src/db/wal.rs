//! The WAL: the current log and its sequence numbers ([`WalState`], under `DbInner::wal`), the WALs switched
//! out with unsynced bytes ([`ClosedWals`]), the appends and syncs that make writes durable (D1, D2, D3, D5,
//! D18), the memtable switch that starts a new WAL ([`switch_memtable`]), and the accounting of live WALs for
//! `max_total_wal_size` ([`WalState::count_live_wals`], [`wal_pinning_families`]).
//!
//! The write path (`write.rs`) appends each group here; flushes sync the closed WALs and close the obsolete
//! ones; deleting obsolete WAL files is `obsolete.rs`.

use super::{DbInner, State};
use crate::filenames;
use crate::memtable::MemTable;
use crate::stats::Counters;
use parking_lot::Mutex;
use shaledb_format::batch::BatchRep;
use shaledb_format::log;
use shaledb_format::wal::WalMarker;
use shaledb_vfs::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

pub(crate) struct WalState {
    /// `None` after close, or when the WAL could not be created.
    pub(crate) log: Option<log::Writer>,
    pub(crate) number: u64,
    /// Next sequence number to assign (only the leader touches it).
    pub(crate) next_seq: u64,
    /// The WAL holds appended bytes not yet fsynced.
    pub(crate) unsynced: bool,
    /// The WAL's length at its last sync by `wal_bytes_per_sync` (0 for a new WAL).
    pub(super) synced_len: u64,
    /// Scratch buffer for a multi-writer group's WAL record.
    pub(super) scratch: BatchRep,
    /// The WALs switched out and their lengths, by number, for `max_total_wal_size` (pruned below the smallest
    /// log number of any family).
    pub(super) closed: std::collections::BTreeMap<u64, u64>,
    /// Token bucket for delayed writes: no write may start before this instant.
    pub(super) delay_until: Option<Instant>,
}

impl WalState {
    pub(crate) fn new(log: log::Writer, number: u64, next_seq: u64) -> WalState {
        let synced_len = log.len();
        WalState {
            log: Some(log),
            number,
            next_seq,
            unsynced: false,
            synced_len,
            scratch: BatchRep::new(),
            closed: Default::default(),
            delay_until: None,
        }
    }

    /// Counts `wals` (number, length) toward `max_total_wal_size` as if switched out by this process: the WALs
    /// an open kept live for the memtables it kept (`avoid_flush_during_recovery`).
    pub(crate) fn count_live_wals(&mut self, wals: &[(u64, u64)]) {
        self.closed.extend(wals.iter().copied());
    }

    /// No WAL to write: a database opened read-only.
    pub(crate) fn without_log(number: u64, next_seq: u64) -> WalState {
        WalState {
            log: None,
            number,
            next_seq,
            unsynced: false,
            synced_len: 0,
            scratch: BatchRep::new(),
            closed: Default::default(),
            delay_until: None,
        }
    }
}

/// The WALs switched out while they held unsynced bytes, oldest first, with their writers: synced by the
/// next synced write, `sync_wal`, shutdown, a column family's creation or drop, or (with several families) a
/// flush, whichever comes first; dropped unsynced once obsolete (their memtables flushed).
#[derive(Default)]
pub(crate) struct ClosedWals {
    list: Mutex<Vec<ClosedWal>>,
    /// The newest WAL number synced from the list and not yet recorded by a `Synced` marker (0: none); the next
    /// group's leader writes the marker into the current WAL.
    marker_due: std::sync::atomic::AtomicU64,
    /// A WAL was created since the database directory was last fsynced: its name is not durable yet. The next
    /// WAL sync that makes anything durable fsyncs the directory first ([`sync_wal_dir`]), as RocksDB syncs
    /// its WAL directory before the first synced write into a new log; the memtable switch does not (a
    /// directory fsync commits the file system's journal, which waits for the flush's and compactions' data
    /// in flight, and every writer waited behind it). Held while that fsync runs, so no sync can pass it.
    dir_unsynced: Mutex<bool>,
}

/// fsyncs the database directory if a WAL was created since it was last synced. Every WAL sync that makes
/// writes durable calls it first: a WAL whose name a power loss can take would take its synced records along
/// (D3, D5). The caller turns the database read-only on failure ([`fail`]), as for a failed WAL sync.
pub(crate) fn sync_wal_dir(inner: &DbInner) -> Result<()> {
    let mut unsynced = inner.closed_wals.dir_unsynced.lock();
    if *unsynced {
        inner.fs.sync_dir(&inner.dir)?;
        *unsynced = false;
    }
    Ok(())
}

struct ClosedWal {
    number: u64,
    log: log::Writer,
}

/// Takes out of the closed-WAL list the WALs below `min_log` (their memtables are flushed and recorded; their
/// files are deleted or about to be) and closes them. The last close of a deleted WAL frees its blocks, which
/// takes as long as deleting it did: the caller holds neither `state` nor `wal`, and the list's lock is
/// released before the close.
pub(crate) fn drop_obsolete_closed_wals(inner: &DbInner, min_log: u64) {
    let gone: Vec<ClosedWal> = inner.closed_wals.list.lock().extract_if(.., |c| c.number < min_log).collect();
    drop(gone);
}

/// What a group's append must do about syncing, and the WAL state it updates.
pub(super) struct WalSync<'a> {
    /// A member asked for `sync`.
    pub(super) need_sync: bool,
    pub(super) unsynced: &'a mut bool,
    pub(super) synced_len: &'a mut u64,
}

pub(super) fn append_records(
    inner: &Arc<DbInner>,
    log: &mut log::Writer,
    records: &[BatchRep],
    sync: WalSync<'_>,
) -> Result<()> {
    let WalSync { need_sync, unsynced, synced_len } = sync;
    let per_sync = inner.opts.wal_bytes_per_sync;
    let c = &inner.counters;
    let r = (|| {
        for b in records {
            log.add_record(b.data())?;
            Counters::add_exclusive(&c.wal_bytes, b.data().len() as u64);
        }
        Counters::add_exclusive(&c.wal_writes, 1);
        log.flush()?;
        // `wal_bytes_per_sync`: a sync each time that many bytes were appended since the last one.
        let due = per_sync > 0 && log.len().saturating_sub(*synced_len) >= per_sync;
        if need_sync || due {
            sync_wal_dir(inner)?;
            log.sync()?;
            Counters::add(&c.wal_syncs, 1);
            *unsynced = false;
            *synced_len = log.len();
        } else {
            *unsynced = true;
        }
        Ok(())
    })();
    r.map_err(|e| fail(inner, e))
}

/// fsyncs the WALs switched out unsynced, then the current WAL if it holds unsynced bytes: this makes every
/// write that returned before the call durable (writes made while it runs may or may not be covered).
///
/// The current WAL's `fdatasync` runs without the `wal` lock, so writes go on meanwhile (RocksDB's `SyncWAL`
/// releases its mutex the same way). Under the lock: the checks, the closed WALs and the `Synced` marker as
/// [`sync_wal_locked`] does them, then the WAL is flushed and its number, its length and a
/// [`SyncHandle`](shaledb_vfs::SyncHandle) of its file are taken. With the lock released: the directory is
/// fsynced if a WAL was created since it last was ([`sync_wal_dir`], which has its own lock), then the file
/// through the handle. Under the lock again: the synced length is recorded if the WAL is still current and the
/// length grew. Callers take turns on `wal_sync` (before `wal` in the lock order), so a second `sync_wal`
/// waits for the first one's sync, then syncs what was appended since. A file whose writer gives no sync
/// handle is synced under the lock, as [`sync_wal_locked`] does.
pub(crate) fn sync_wal(inner: &Arc<DbInner>) -> Result<()> {
    if inner.read_only {
        return Err(super::errors::refused("sync_wal"));
    }
    let _turn = inner.wal_sync.lock();
    let (number, len, handle) = {
        let mut wal = inner.wal.lock();
        if !sync_wal_begin(inner, &mut wal)? {
            return Ok(());
        }
        let Some(log) = wal.log.as_mut() else { return Err(Error::Closed) };
        // The group that appended flushed already; the marker just written did too. A failed flush is a
        // failed WAL write: the writer is poisoned, and dropped as a failed group drops it.
        if let Err(e) = log.flush() {
            wal.log = None;
            return Err(fail(inner, e));
        }
        let len = log.len();
        match log.sync_handle() {
            Ok(handle) => (wal.number, len, handle),
            // A file system without handles (or out of descriptors): the sync under the lock, as before.
            Err(_) => return sync_current_locked(inner, &mut wal),
        }
    };
    // INVARIANT: WAL `number` holds `len` flushed bytes covering every write acknowledged before this call;
    // a memtable switch or shutdown may take its writer from `wal` meanwhile, never the file from the handle.
    sync_wal_dir(inner).map_err(|e| fail(inner, e))?;
    let synced = handle.sync();
    let mut wal = inner.wal.lock();
    let current = wal.number == number && wal.log.is_some();
    match synced {
        Ok(()) => {
            Counters::add(&inner.counters.wal_syncs, 1);
            // A synced group may have passed `len` meanwhile; after a switch the old WAL is on `closed_wals`
            // (unsynced, as it was when the switch ran) and is synced again by whatever next needs it.
            if let Some(log) = wal.log.as_ref().filter(|_| current && len > wal.synced_len) {
                let appended_since = log.len() > len;
                wal.synced_len = len;
                wal.unsynced = appended_since;
            }
            Ok(())
        }
        Err(e) => {
            // As for a failed group sync: the WAL is never written or synced again, and the database turns
            // read-only before the lock is released. A synced group that ran since the failure synced through
            // the writer's own descriptor, which reports the same write-back error (`sync_handle` on POSIX
            // opens the file again rather than sharing the writer's open file description).
            if current {
                wal.log = None;
            }
            Err(fail(inner, e))
        }
    }
}

/// [`sync_wal`] with the WAL lock held by the caller (which must not hold the state lock), the `fdatasync`
/// included. Column family creation and drop call it before their MANIFEST edit, so a power loss never keeps
/// the edit and loses a write acknowledged before it (the recovered state stays a prefix of the acknowledged
/// operations, D28).
pub(crate) fn sync_wal_locked(inner: &Arc<DbInner>, wal: &mut WalState) -> Result<()> {
    if !sync_wal_begin(inner, wal)? {
        return Ok(());
    }
    sync_current_locked(inner, wal)
}

/// The part of a WAL sync done under the `wal` lock before the current WAL's own: refuses when the database
/// is read-only after a failure, syncs the closed WALs and appends their marker. Returns whether the current
/// WAL holds unsynced bytes; `Err(Closed)` when there is no WAL. REQUIRES: `wal` locked, `state` not.
fn sync_wal_begin(inner: &DbInner, wal: &mut WalState) -> Result<bool> {
    if let Some(cause) = &inner.state.lock().bg_error {
        return Err(super::errors::read_only_error(cause));
    }
    sync_closed_wals(inner)?;
    write_due_marker(inner, wal)?;
    match (&wal.log, wal.unsynced) {
        (None, _) => Err(Error::Closed),
        (Some(_), unsynced) => Ok(unsynced),
    }
}

/// fsyncs the directory if needed, then the current WAL, under the `wal` lock. REQUIRES: `wal` locked,
/// `state` not.
fn sync_current_locked(inner: &DbInner, wal: &mut WalState) -> Result<()> {
    sync_wal_dir(inner).map_err(|e| fail(inner, e))?;
    let Some(log) = wal.log.as_mut() else { return Err(Error::Closed) };
    match log.sync() {
        Ok(()) => {
            Counters::add(&inner.counters.wal_syncs, 1);
            wal.unsynced = false;
            wal.synced_len = log.len();
            Ok(())
        }
        Err(e) => {
            // As for a failed group sync: the WAL is never written or synced again.
            wal.log = None;
            Err(fail(inner, e))
        }
    }
}

/// fsyncs the WALs switched out with unsynced bytes that are still live (those whose memtables were flushed
/// since are dropped unsynced: recovery never reads them), and makes the next group's leader append a
/// [`WalMarker::Synced`] naming the newest of them to the current WAL ([`write_due_marker`]): recovery uses it
/// to tell damage in a synced WAL (refused) from the tail a power loss cut off an unsynced one (a prefix, D3,
/// D5). REQUIRES: `state` and `closed_wals` not locked by the caller.
pub(crate) fn sync_closed_wals(inner: &DbInner) -> Result<()> {
    if inner.closed_wals.list.lock().is_empty() {
        return Ok(());
    }
    let min_log = inner.state.lock().vs.min_log_number();
    // What is left is live: a WAL joins the list as the current one, never below the smallest live log number.
    drop_obsolete_closed_wals(inner, min_log);
    let mut list = inner.closed_wals.list.lock();
    let Some(through) = list.last().map(|c| c.number) else { return Ok(()) };
    if let Err(e) = sync_wal_dir(inner) {
        drop(list);
        return Err(fail(inner, e));
    }
    for c in list.iter_mut() {
        if let Err(e) = c.log.sync() {
            drop(list);
            return Err(fail(inner, e));
        }
        Counters::add(&inner.counters.wal_syncs, 1);
    }
    list.clear();
    inner.closed_wals.marker_due.fetch_max(through, Ordering::AcqRel);
    Ok(())
}

/// Appends the `Synced` marker [`sync_closed_wals`] left due, if any, to the current WAL (unsynced: a synced
/// write after it syncs it with its own record). REQUIRES: `wal` locked.
pub(super) fn write_due_marker(inner: &DbInner, wal: &mut WalState) -> Result<()> {
    let due = &inner.closed_wals.marker_due;
    if due.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let through = due.swap(0, Ordering::AcqRel);
    let Some(log) = wal.log.as_mut().filter(|_| through > 0) else { return Ok(()) };
    let marker = WalMarker::Synced { through }.encode();
    if let Err(e) = log.add_record(&marker).and_then(|()| log.flush()) {
        wal.log = None;
        return Err(fail(inner, e));
    }
    wal.unsynced = true;
    Ok(())
}

/// [`sync_closed_wals`] then [`write_due_marker`]. REQUIRES: `wal` locked, `state` not.
pub(crate) fn sync_closed_locked(inner: &DbInner, wal: &mut WalState) -> Result<()> {
    sync_closed_wals(inner)?;
    write_due_marker(inner, wal)
}

/// A WAL failure: the database turns read-only; the writer gets the original error.
fn fail(inner: &DbInner, e: Error) -> Error {
    let mut st = inner.state.lock();
    inner.set_bg_error(&mut st, &e, crate::listener::BackgroundErrorReason::WriteCallback);
    e
}

/// With several families and more than `max_total_wal_size` bytes of live WALs: the families whose active
/// memtable (holding something, no flush pending) began in the oldest live WAL, to switch so that their flush
/// lets that WAL go. Empty otherwise. REQUIRES: `wal` and `state` locked.
pub(super) fn wal_pinning_families(inner: &DbInner, wal: &mut WalState, st: &State) -> Vec<u32> {
    if st.fams.len() < 2 {
        return Vec::new();
    }
    let min_log = st.vs.min_log_number();
    wal.closed.retain(|n, _| *n >= min_log);
    let live = wal.closed.values().sum::<u64>() + wal.log.as_ref().map_or(0, |l| l.len());
    let limit = match inner.opts.max_total_wal_size {
        0 => st
            .fams
            .values()
            .map(|f| (f.fam.opts.write_buffer_size as u64).saturating_mul(f.fam.opts.max_write_buffer_number as u64))
            .fold(0u64, u64::saturating_add)
            .saturating_mul(4),
        n => n,
    };
    if live <= limit {
        return Vec::new();
    }
    let oldest = st.fams.values().map(|f| f.imm.last().map_or(f.mem.id(), |m| m.id())).min().unwrap_or(0);
    st.fams
        .iter()
        .filter(|(_, f)| f.imm.is_empty() && !f.mem.is_empty() && f.mem.id() <= oldest && f.mem.id() < wal.number)
        .map(|(id, _)| *id)
        .collect()
}

/// Makes the active memtables of families `ids` immutable and starts new ones with a new WAL. The other
/// families' memtables that are empty start over in the new WAL too, so that their log numbers can advance.
/// REQUIRES: `wal` and `state` locked.
pub(crate) fn switch_memtable(inner: &DbInner, wal: &mut WalState, st: &mut State, ids: &[u32]) -> Result<()> {
    // Groups still inserting into the old memtable must finish before it can be flushed.
    {
        let mut g = inner.publish.lock();
        while inner.visible_seq.load(Ordering::Acquire) + 1 < wal.next_seq {
            inner.publish_cv.wait(&mut g);
        }
    }
    // The closed WALs already obsolete stay in the list: closing one frees its deleted file's blocks (a
    // memtable's worth), 10-100 ms on this project's disk, with every writer waiting here. The flush that made
    // them obsolete closes them without a lock ([`drop_obsolete_closed_wals`], docs/perf/wal-close.md).
    let number = st.vs.new_file_number()?;
    let old_len = wal.log.as_ref().map(|l| l.len());
    if let Some(len) = old_len {
        wal.closed.insert(wal.number, len);
    }
    let path = filenames::wal(&inner.dir, number);
    let mut log = log::Writer::new(inner.fs.create(&path)?);
    // The old WAL is not synced here: that would hold every writer for as long as the device takes to write
    // it (a memtable's worth). It joins `pending`, synced later by whatever needs it durable (a synced write,
    // `sync_wal`, a flush with several families, shutdown) or dropped once its memtable is flushed. So that
    // recovery can tell the tail a power loss cut off it (a prefix of the writes: replay stops there) from
    // damage, the new WAL starts with a marker naming it and its length, synced with the new WAL before any
    // batch goes into it (D3, D5).
    let unsynced_old = match (old_len, wal.unsynced) {
        (Some(length), true) => {
            log.add_record(&WalMarker::Predecessor { number: wal.number, length }.encode())?;
            log.sync()?;
            Counters::add(&inner.counters.wal_syncs, 1);
            true
        }
        _ => false,
    };
    // The new WAL's name is made durable by the first WAL sync after it (`sync_wal_dir`), not here. Until then
    // a power loss may take the new WAL whole: it holds nothing acknowledged as durable, and the old WAL is
    // then the last one, whose torn tail recovery accepts. The marker synced above does not need the name:
    // with the file gone, nothing in it needs explaining.
    *inner.closed_wals.dir_unsynced.lock() = true;
    let synced_len = log.len();
    if let Some(old) = wal.log.replace(log) {
        if unsynced_old {
            inner.closed_wals.list.lock().push(ClosedWal { number: wal.number, log: old });
        }
    }
    wal.unsynced = false;
    wal.synced_len = synced_len;
    wal.number = number;
    let mut changed = Vec::new();
    for (id, f) in st.fams.iter_mut() {
        let switched = ids.contains(id);
        if !switched && !f.mem.is_empty() {
            continue;
        }
        // Groups get their memtables and sequence numbers under the `wal` lock held here, and every group
        // that inserted into the old one has finished: the new one gets `next_seq` and later only.
        let fresh = Arc::new(MemTable::for_options(number, &f.fam.opts).starting_at(wal.next_seq));
        let old = std::mem::replace(&mut f.mem, fresh);
        if switched && !old.is_empty() {
            // Every group that inserted into it has finished (above): a vector memtable may sort itself now.
            old.mark_immutable();
            f.imm.insert(0, old);
        }
        changed.push(*id);
    }
    st.rebuild_mems();
    for id in changed {
        inner.install_super_version(st, id);
    }
    inner.bg_cv.notify_all();
    Ok(())
}
