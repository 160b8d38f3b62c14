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
use super::wal::{
    append_records, switch_memtable, sync_closed_wals, wal_pinning_families, write_due_marker, WalState, WalSync,
};
use super::DbInner;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::stats::Counters;
use parking_lot::{Condvar, Mutex};
use shaledb_format::batch::BatchRep;
use shaledb_format::ikey::{ValueKind, MAX_SEQUENCE};
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
        return Err(super::errors::refused("write"));
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
///
/// Consecutive records of one family go to its memtable [`RUN`] at a time (`MemTable::add_batch`, whose
/// skiplist descents overlap their cache misses); the order of records is kept.
fn insert(batch: &BatchRep, first_seq: u64, mems: &Mems) {
    const RUN: usize = 32;
    let mut run: [(u64, ValueKind, &[u8], &[u8]); RUN] = [(0, ValueKind::Value, &[], &[]); RUN];
    let mut len = 0;
    let mut run_mem: Option<&Arc<MemTable>> = None;
    for (seq, e) in (first_seq..).zip(batch.iter().flatten()) {
        let Some(mem) = mems.get(e.family) else { continue };
        if len == RUN || run_mem.is_some_and(|m| !Arc::ptr_eq(m, mem)) {
            if let Some(m) = run_mem {
                m.add_batch(&run[..len]);
            }
            len = 0;
        }
        run_mem = Some(mem);
        run[len] = (seq, e.kind, e.key, e.value);
        len += 1;
    }
    if let Some(m) = run_mem {
        m.add_batch(&run[..len]);
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

/// Applies write stalls and switches full memtables. Returns the memtables the group goes into.
/// REQUIRES: `wal` locked (the caller is the leader).
fn make_room(inner: &Arc<DbInner>, wal: &mut WalState, bytes: usize) -> Result<Arc<Mems>> {
    let o = &inner.opts;
    let mut delayed = false;
    let mut stop_started: Option<Instant> = None;
    let mut st = inner.state.lock();
    let result = loop {
        if let Some(cause) = &st.bg_error {
            break Err(super::errors::read_only_error(cause));
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
