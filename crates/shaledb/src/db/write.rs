//! The write path: group commit with a concurrent memtable insert.
//!
//! 1. A writer queues itself. The first in line becomes the leader; the others wait.
//! 2. The leader takes the writers queued behind it as its group, makes room (write stalls, memtable
//!    switch), assigns consecutive sequence numbers, appends the whole group to the WAL as one record with
//!    one `write(2)`, and issues one fsync if any member asked for `sync` (D1, D2), after syncing the WALs
//!    switched out with unsynced bytes (see [`switch_memtable`]).
//! 3. The leader hands leadership to the next writer in the queue (whose group can use the WAL while this
//!    one inserts), then every member inserts its own batch into the memtable, in parallel (a group of one
//!    writer, or of fewer than [`PARALLEL_INSERT_MIN_ENTRIES`] entries, is inserted by its leader alone).
//! 4. The last member to finish publishes the group's sequence numbers, in group order, so readers never
//!    see a later group without an earlier one; every member returns only after that.

use super::family::Mems;
use super::{DbInner, State};
use crate::filenames;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::stats::Counters;
use parking_lot::{Condvar, Mutex};
use shaledb_format::batch::BatchRep;
use shaledb_format::ikey::MAX_SEQUENCE;
use shaledb_format::log;
use shaledb_format::wal::WalMarker;
use shaledb_vfs::{Error, Result};
use std::borrow::Borrow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest group a leader forms, in encoded bytes.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// Fewest entries in a group whose members insert their own batches in parallel
/// (`allow_concurrent_memtable_write`); a smaller group is inserted by its leader.
const PARALLEL_INSERT_MIN_ENTRIES: u64 = 64;

pub(crate) struct WalState {
    /// `None` after close, or when the WAL could not be created.
    pub(crate) log: Option<log::Writer>,
    pub(crate) number: u64,
    /// Next sequence number to assign (only the leader touches it).
    pub(crate) next_seq: u64,
    /// The WAL holds appended bytes not yet fsynced.
    pub(crate) unsynced: bool,
    /// The WAL's length at its last sync by `wal_bytes_per_sync` (0 for a new WAL).
    synced_len: u64,
    /// Scratch buffer for a multi-writer group's WAL record.
    scratch: BatchRep,
    /// The WALs switched out and their lengths, by number, for `max_total_wal_size` (pruned below the smallest
    /// log number of any family).
    closed: std::collections::BTreeMap<u64, u64>,
    /// Token bucket for delayed writes: no write may start before this instant.
    delay_until: Option<Instant>,
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

enum Phase {
    Waiting,
    Leader,
    Insert { first_seq: u64, mems: Arc<Mems>, group: Arc<Group> },
    Done(Result<()>),
}

struct Writer {
    batch: BatchRep,
    sync: bool,
    disable_wal: bool,
    phase: Mutex<Phase>,
    cv: Condvar,
}

struct Group {
    first: u64,
    last: u64,
    remaining: AtomicUsize,
}

#[derive(Default)]
pub(crate) struct WriteQueue {
    queue: Mutex<Queue>,
}

/// The writers waiting to commit, the leader at the front, and whether a writer is committing alone.
#[derive(Default)]
struct Queue {
    writers: VecDeque<Arc<Writer>>,
    /// A writer found the queue empty and commits alone, without queueing ([`solo`]): writers arriving
    /// meanwhile queue up, and it hands leadership to the first of them when its commit is done.
    solo: bool,
}

impl Writer {
    fn set(&self, p: Phase) {
        *self.phase.lock() = p;
        self.cv.notify_one();
    }
}

/// Writes `batch` through the group-commit pipeline.
pub(crate) fn write(inner: &Arc<DbInner>, batch: BatchRep, opts: &WriteOptions) -> Result<()> {
    if inner.read_only {
        return Err(super::read_only::refused("write"));
    }
    if inner.shutting_down.load(Ordering::Acquire) {
        return Err(Error::Closed);
    }
    // TTL mode: every value carries its write time (crate::ttl).
    let batch = match &inner.opts.ttl {
        Some(ttl) => crate::ttl::stamp(&batch, ttl.now())?,
        None => batch,
    };
    if opts.sync && opts.disable_wal {
        return Err(Error::InvalidArgument("sync and disable_wal cannot both be set".into()));
    }
    if opts.disable_wal {
        // Before the write is acknowledged: a close from now on flushes it (`avoid_flush_during_shutdown`).
        inner.unlogged_writes.store(true, Ordering::Release);
    }
    let w = Writer {
        batch,
        sync: opts.sync,
        disable_wal: opts.disable_wal,
        phase: Mutex::new(Phase::Waiting),
        cv: Condvar::new(),
    };
    let w = {
        let mut q = inner.write.queue.lock();
        if q.writers.is_empty() && !q.solo {
            q.solo = true;
            drop(q);
            return solo(inner, &w);
        }
        let w = Arc::new(w);
        q.writers.push_back(w.clone());
        if q.writers.len() == 1 && !q.solo {
            *w.phase.lock() = Phase::Leader;
        }
        w
    };
    loop {
        let mut p = w.phase.lock();
        match std::mem::replace(&mut *p, Phase::Waiting) {
            Phase::Waiting => {
                w.cv.wait(&mut p);
            }
            Phase::Leader => {
                drop(p);
                lead(inner, &w);
            }
            Phase::Insert { first_seq, mems, group } => {
                drop(p);
                insert(&w.batch, first_seq, &mems);
                return finish_insert(inner, &group);
            }
            Phase::Done(r) => return r,
        }
    }
}

/// A writer that found no one queued: its own group of one, committed without queueing, so a lone writer (a
/// single-threaded loader, one client of the server) allocates nothing and waits on nothing to commit. The
/// same steps as [`lead`] then inserting in the leader; leadership passes to the first writer that queued
/// meanwhile as soon as the WAL is written, as in `lead`.
fn solo(inner: &Arc<DbInner>, w: &Writer) -> Result<()> {
    let result = commit_group(inner, std::slice::from_ref(w));
    {
        let mut q = inner.write.queue.lock();
        q.solo = false;
        if let Some(next) = q.writers.front() {
            next.set(Phase::Leader);
        }
    }
    let (first, mems) = result?;
    insert(&w.batch, first, &mems);
    let last = first + w.batch.count() as u64 - 1;
    finish_insert(inner, &Group { first, last, remaining: AtomicUsize::new(1) })
}

/// Inserts each record into its family's memtable. A record of a family dropped since the write was checked
/// is skipped (it keeps its sequence number): the write is as if made just before the drop.
fn insert(batch: &BatchRep, first_seq: u64, mems: &Mems) {
    for (seq, e) in (first_seq..).zip(batch.iter().flatten()) {
        if let Some(mem) = mems.get(e.family) {
            mem.add(seq, e.kind, e.key, e.value);
        }
    }
}

/// Called by each member after its insert. The last one publishes; all wait for publication.
fn finish_insert(inner: &DbInner, group: &Group) -> Result<()> {
    let mut g = inner.publish.lock();
    if group.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
        // Groups publish in sequence order.
        while inner.visible_seq.load(Ordering::Acquire) + 1 != group.first {
            inner.publish_cv.wait(&mut g);
        }
        inner.visible_seq.store(group.last, Ordering::Release);
        inner.publish_cv.notify_all();
    } else {
        while inner.visible_seq.load(Ordering::Acquire) < group.last {
            inner.publish_cv.wait(&mut g);
        }
    }
    Ok(())
}

fn lead(inner: &Arc<DbInner>, me: &Arc<Writer>) {
    // Form the group: every writer queued now (the leader is at the front), up to a size limit.
    let group: Vec<Arc<Writer>> = {
        let q = inner.write.queue.lock();
        let mut bytes = 0usize;
        let mut g = Vec::new();
        for w in q.writers.iter() {
            let n = w.batch.approximate_size();
            if !g.is_empty() && bytes + n > MAX_GROUP_BYTES {
                break;
            }
            bytes += n;
            g.push(w.clone());
        }
        g
    };
    debug_assert!(Arc::ptr_eq(&group[0], me));
    let result = commit_group(inner, &group);
    // Remove the group from the queue and pass leadership on.
    {
        let mut q = inner.write.queue.lock();
        for _ in 0..group.len() {
            q.writers.pop_front();
        }
        if let Some(next) = q.writers.front() {
            next.set(Phase::Leader);
        }
    }
    match result {
        Ok((first, mems)) => {
            let count: u64 = group.iter().map(|w| w.batch.count() as u64).sum();
            let last = first + count - 1;
            // Members insert their own batches only when there is enough to insert to pay for waking them:
            // a member asleep in its condition variable takes tens of microseconds to run again, and the group
            // publishes only when every member has inserted, while the leader inserts a small batch in one or
            // two. Inserting small groups in the leader made two overwrite threads 1.5x faster on this machine
            // (docs/perf/write-handoff.md); RocksDB likewise inserts a one-writer group in its leader.
            let parallel =
                inner.opts.allow_concurrent_memtable_write && group.len() > 1 && count >= PARALLEL_INSERT_MIN_ENTRIES;
            if parallel {
                let g = Arc::new(Group { first, last, remaining: AtomicUsize::new(group.len()) });
                let mut seq = first;
                for w in &group {
                    w.set(Phase::Insert { first_seq: seq, mems: mems.clone(), group: g.clone() });
                    seq += w.batch.count() as u64;
                }
            } else {
                // The leader inserts the whole group, then publishes it; the members only wait for that.
                let mut seq = first;
                for w in &group {
                    insert(&w.batch, seq, &mems);
                    seq += w.batch.count() as u64;
                }
                let r = finish_insert(inner, &Group { first, last, remaining: AtomicUsize::new(1) });
                for w in &group {
                    w.set(Phase::Done(r.clone()));
                }
            }
        }
        Err(e) => {
            for w in &group {
                w.set(Phase::Done(Err(e.clone())));
            }
        }
    }
}

/// The leader's critical section: room, sequence numbers, WAL. Returns the first sequence number and the
/// memtables to insert into.
fn commit_group<W: Borrow<Writer>>(inner: &Arc<DbInner>, group: &[W]) -> Result<(u64, Arc<Mems>)> {
    let mut wal = inner.wal.lock();
    let bytes: usize = group.iter().map(|w| w.borrow().batch.approximate_size()).sum();
    let mem = make_room(inner, &mut wal, bytes)?;
    let count: u64 = group.iter().map(|w| w.borrow().batch.count() as u64).sum();
    let first = wal.next_seq;
    // The group's last entry takes `first + count - 1`, which must fit an internal key's 56-bit sequence:
    // refused before the WAL sees it, since a wrapped or clamped number would file the value under a wrong
    // sequence (and the WAL record would not decode at the next open).
    if count > 0 && first.checked_add(count - 1).is_none_or(|last| last > MAX_SEQUENCE) {
        return Err(Error::InvalidArgument(format!(
            "sequence numbers exhausted: a write of {count} entries at sequence {first} would pass {MAX_SEQUENCE}"
        )));
    }
    let c = &inner.counters;
    Counters::add_exclusive(&c.writes, group.len() as u64);
    Counters::add_exclusive(&c.keys_written, count);
    Counters::add_exclusive(&c.bytes_written, (bytes - group.len() * shaledb_format::batch::HEADER_LEN) as u64);
    Counters::add_exclusive(&c.write_groups, 1);

    let wal_members = group.iter().filter(|w| !(*w).borrow().disable_wal).count();
    if wal_members > 0 {
        let r = append_group(inner, &mut wal, group, first);
        if r.is_err() {
            // A WAL that failed is never written or synced again (its writer is poisoned; dropping it makes
            // sure shutdown does not even try): the failed group must not become durable later, and the file
            // keeps a clean prefix of acknowledged records. `fail` has made the database read-only.
            wal.log = None;
        }
        r?;
    }
    wal.next_seq = first + count;
    Ok((first, mem))
}

/// Appends the WAL-enabled members of `group` (sequence numbers from `first`) to the WAL.
fn append_group<W: Borrow<Writer>>(inner: &Arc<DbInner>, wal: &mut WalState, group: &[W], first: u64) -> Result<()> {
    let need_sync = group.iter().any(|w| w.borrow().sync);
    if need_sync || inner.opts.wal_bytes_per_sync > 0 {
        // A synced write makes every earlier write durable, those in WALs switched out unsynced too; their
        // `Synced` marker goes into this WAL before the group, so the group's fsync covers it. With
        // `wal_bytes_per_sync` (D18) the WAL switched out is synced by the first group after the switch (less
        // than that many bytes of it are unsynced), or a power loss could take it and the newer WAL after it.
        sync_closed_wals(inner)?;
    }
    write_due_marker(inner, wal)?;
    let WalState { log, scratch, unsynced, synced_len, .. } = wal;
    let sync = WalSync { need_sync, unsynced, synced_len };
    let Some(log) = log.as_mut() else { return Err(Error::Closed) };
    // Only WAL-enabled members go to the WAL; the record holds their batches concatenated, each entry
    // keeping its own sequence number (consecutive within a member; members with disabled WAL leave gaps
    // that recovery tolerates).
    if group.len() == 1 {
        // The common case: one writer, its batch copied once into the reused scratch buffer.
        scratch.clear();
        scratch.append(&group[0].borrow().batch);
        scratch.set_sequence(first);
        append_records(inner, log, std::slice::from_ref(scratch), sync)?;
    } else {
        // Contiguous sequence runs become one batch each; a gap (a disable_wal member in between)
        // starts a new WAL record so that every record's entries have consecutive sequence numbers.
        let mut records: Vec<BatchRep> = Vec::new();
        let mut seq = first;
        let mut expect = None;
        for w in group {
            let w = w.borrow();
            if !w.disable_wal {
                if expect != Some(seq) {
                    let mut b = BatchRep::new();
                    b.set_sequence(seq);
                    records.push(b);
                }
                if let Some(b) = records.last_mut() {
                    b.append(&w.batch);
                }
                expect = Some(seq + w.batch.count() as u64);
            }
            seq += w.batch.count() as u64;
        }
        append_records(inner, log, &records, sync)?;
    }
    Ok(())
}

/// What a group's append must do about syncing, and the WAL state it updates.
struct WalSync<'a> {
    /// A member asked for `sync`.
    need_sync: bool,
    unsynced: &'a mut bool,
    synced_len: &'a mut u64,
}

fn append_records(inner: &Arc<DbInner>, log: &mut log::Writer, records: &[BatchRep], sync: WalSync<'_>) -> Result<()> {
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
/// write that returned so far durable.
pub(crate) fn sync_wal(inner: &Arc<DbInner>) -> Result<()> {
    if inner.read_only {
        return Err(super::read_only::refused("sync_wal"));
    }
    let mut wal = inner.wal.lock();
    sync_wal_locked(inner, &mut wal)
}

/// [`sync_wal`] with the WAL lock held by the caller (which must not hold the state lock). Column family
/// creation and drop call it before their MANIFEST edit, so a power loss never keeps the edit and loses a
/// write acknowledged before it (the recovered state stays a prefix of the acknowledged operations, D28).
pub(crate) fn sync_wal_locked(inner: &Arc<DbInner>, wal: &mut WalState) -> Result<()> {
    if let Some(cause) = &inner.state.lock().bg_error {
        return Err(DbInner::read_only_error(cause));
    }
    sync_closed_wals(inner)?;
    write_due_marker(inner, wal)?;
    if !wal.unsynced {
        return if wal.log.is_some() { Ok(()) } else { Err(Error::Closed) };
    }
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
fn write_due_marker(inner: &DbInner, wal: &mut WalState) -> Result<()> {
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

/// Applies write stalls and switches full memtables. Returns the memtables the group goes into.
/// REQUIRES: `wal` locked (the caller is the leader).
fn make_room(inner: &Arc<DbInner>, wal: &mut WalState, bytes: usize) -> Result<Arc<Mems>> {
    let o = &inner.opts;
    let mut delayed = false;
    let mut stop_started: Option<Instant> = None;
    let mut st = inner.state.lock();
    let result = loop {
        if let Some(cause) = &st.bg_error {
            break Err(DbInner::read_only_error(cause));
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            break Err(Error::Closed);
        }
        let a = super::stall::assess_all(&mut st);
        super::stall::note(inner, &mut st, Some(&a));
        if let Some(cause) = a.stop {
            if stop_started.is_none() {
                stop_started = Some(Instant::now());
                Counters::add(&inner.counters.stop_count, 1);
                inner.counters.stall(cause, st.running_compactions > 0);
            }
            inner.bg_cv.notify_all();
            inner.bg_cv.wait_for(&mut st, Duration::from_millis(100));
            continue;
        }
        if let Some(cause) = a.slow.filter(|_| !delayed) {
            delayed = true;
            // Token bucket at `delayed_write_rate`, 1 ms granularity.
            let now = Instant::now();
            let cost = Duration::from_secs_f64(bytes as f64 / o.delayed_write_rate as f64);
            let start = wal.delay_until.filter(|t| *t > now).unwrap_or(now);
            let until = start + cost;
            wal.delay_until = Some(until);
            let wait = until.saturating_duration_since(now);
            if wait >= Duration::from_millis(1) {
                Counters::add(&inner.counters.slowdown_count, 1);
                inner.counters.stall(cause, st.running_compactions > 0);
                drop(st);
                std::thread::sleep(wait);
                Counters::add(&inner.counters.stall_micros, wait.as_micros() as u64);
                st = inner.state.lock();
            }
            continue;
        }
        let pinning = if a.mem_full.is_empty() { wal_pinning_families(inner, wal, &st) } else { Vec::new() };
        let full = if a.mem_full.is_empty() { pinning } else { a.mem_full };
        if !full.is_empty() {
            if let Err(e) = switch_memtable(inner, wal, &mut st, &full) {
                let e2 = e.clone();
                inner.set_bg_error(&mut st, &e, crate::listener::BackgroundErrorReason::MemTable);
                break Err(e2);
            }
            continue;
        }
        break Ok(st.mems.clone());
    };
    if let Some(t) = stop_started {
        Counters::add(&inner.counters.stall_micros, t.elapsed().as_micros() as u64);
    }
    result
}

/// With several families and more than `max_total_wal_size` bytes of live WALs: the families whose active
/// memtable (holding something, no flush pending) began in the oldest live WAL, to switch so that their flush
/// lets that WAL go. Empty otherwise. REQUIRES: `wal` and `state` locked.
fn wal_pinning_families(inner: &DbInner, wal: &mut WalState, st: &State) -> Vec<u32> {
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
