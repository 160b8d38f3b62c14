//! Background work: flushes and compactions on `max_background_jobs` threads, manual flush and compaction,
//! shutdown, and deletion of files no live version references.
//!
//! A job takes what it needs under the state mutex, releases it for all I/O, and retakes it to record the
//! result in the MANIFEST and publish a new super version. A failed job sets the background error: the
//! database turns read-only (D6) and no further job starts.

use super::events;
use super::flush::write_level0;
use super::{DbInner, State};
use crate::filenames;
use crate::listener::{Deferred, TableFileDeletionInfo};
use crate::picker::{self, CompactionTask};
use crate::stats::{CompactionStats, Counters};
use shaledb_format::edit::VersionEdit;
use shaledb_vfs::{Error, Result};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Starts the `max_background_jobs` threads. A thread that cannot be spawned (the system's thread limit) is
/// an error from `open`, never an abort: the threads already started are stopped and joined first, so the
/// caller can drop the database (releasing its lock) with nothing left running.
pub(crate) fn start(inner: &Arc<DbInner>) -> Result<()> {
    let n = inner.opts.max_background_jobs.max(1);
    inner.state.lock().bg_threads_alive = n;
    let mut failure = None;
    {
        let mut threads = inner.threads.lock();
        for i in 0..n {
            let db = inner.clone();
            let spawned = spawn_hook::check(i).and_then(|()| {
                std::thread::Builder::new().name(format!("shaledb-bg{i}")).spawn(move || background_loop(&db, i))
            });
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    // The threads not started will never decrement the count.
                    inner.state.lock().bg_threads_alive -= n - i;
                    failure = Some(Error::io("spawn background thread", &inner.dir, e));
                    break;
                }
            }
        }
        if failure.is_none() {
            match super::stats_dump::spawn(inner) {
                Ok(h) => threads.extend(h),
                Err(e) => failure = Some(Error::io("spawn stats dump thread", &inner.dir, e)),
            }
        }
    }
    let Some(e) = failure else { return Ok(()) };
    inner.shutting_down.store(true, Ordering::Release);
    {
        let _st = inner.state.lock();
        inner.bg_cv.notify_all();
    }
    let threads: Vec<_> = std::mem::take(&mut *inner.threads.lock());
    for t in threads {
        let _ = t.join();
    }
    Err(e)
}

/// A test seam: unit tests make the n-th spawn of their own thread fail, as the system does at its thread
/// limit. Compiled out of every non-test build.
pub(crate) mod spawn_hook {
    #[cfg(test)]
    thread_local! {
        pub(crate) static FAIL_AT: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    }

    #[cfg(test)]
    pub(crate) fn check(i: usize) -> std::io::Result<()> {
        if FAIL_AT.with(|f| f.get()) == Some(i) {
            return Err(std::io::Error::new(std::io::ErrorKind::WouldBlock, "Resource temporarily unavailable"));
        }
        Ok(())
    }

    #[cfg(not(test))]
    #[inline]
    pub(crate) fn check(_: usize) -> std::io::Result<()> {
        Ok(())
    }
}

/// Flush threads among `jobs` background threads: RocksDB's split of `max_background_jobs` (a quarter
/// flush, at least one), so that several memtables are written at once when writes outrun one flush
/// (benchmark.sh's bulkload: eight memtables, 16 jobs, 4 flush threads).
fn flush_threads(jobs: usize) -> usize {
    if jobs <= 1 {
        1
    } else {
        (jobs / 4).max(1)
    }
}

/// Compactions allowed at once: one per compaction thread (every thread but the flush threads when there
/// are several).
fn max_compactions(inner: &DbInner) -> usize {
    let jobs = inner.opts.max_background_jobs.max(1);
    if jobs == 1 {
        1
    } else {
        jobs - flush_threads(jobs)
    }
}

/// What a background thread runs (issue 15). With one thread it runs both, flushes first. With several,
/// the first [`flush_threads`] run only flushes, and the others only compactions: a flush never waits
/// for a compaction to end and free its thread, and a compaction never waits while a compaction thread
/// flushes. (Before, any thread flushed and thread 0 compacted only while no memtable waited, so while a
/// flush ran on the other thread no compaction could start, with two jobs, and L0 grew.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Role {
    flushes: bool,
    compacts: bool,
}

impl Role {
    fn of(thread: usize, jobs: usize) -> Role {
        if jobs <= 1 {
            Role { flushes: true, compacts: true }
        } else {
            let flushes = thread < flush_threads(jobs);
            Role { flushes, compacts: !flushes }
        }
    }
}

fn background_loop(inner: &Arc<DbInner>, thread: usize) {
    let role = Role::of(thread, inner.opts.max_background_jobs);
    let mut st = inner.state.lock();
    loop {
        let doomed = obsolete_files(inner, &mut st);
        if !doomed.is_empty() {
            parking_lot::MutexGuard::unlocked(&mut st, || remove_files(inner, doomed));
        }
        if inner.listeners.has_pending() {
            parking_lot::MutexGuard::unlocked(&mut st, || inner.listeners.deliver());
        }
        // At shutdown no new job starts; a running one notices the flag and aborts.
        if inner.shutting_down.load(Ordering::Acquire) {
            break;
        }
        if st.bg_error.is_none() {
            // Flushes first: a full memtable holds writers back, a compaction only L0's growth. The family whose
            // oldest waiting memtable is oldest goes first: it pins the oldest WAL.
            if role.flushes {
                let due = st.fams.keys().filter_map(|id| Some((st.next_unclaimed(*id)?.id(), *id))).min();
                if let Some((_, fid)) = due {
                    flush_one(inner, &mut st, fid);
                    continue;
                }
            }
            let may_compact = role.compacts && st.manual == 0 && st.running_compactions < max_compactions(inner);
            if may_compact {
                if let Some((fid, task)) = pick_any(inner, &st) {
                    run_compaction(inner, &mut st, fid, task);
                    continue;
                }
            }
        }
        match fifo_ttl_recheck(&st) {
            Some(period) => {
                inner.bg_cv.wait_for(&mut st, period);
            }
            None => inner.bg_cv.wait(&mut st),
        }
    }
    st.bg_threads_alive -= 1;
    inner.bg_cv.notify_all();
}

/// FIFO's TTL makes files due with time alone, with no write to wake a thread: an idle thread then looks again
/// every `ttl` seconds, at most every 60 s (so a file goes at most a minute late) and at least every second.
fn fifo_ttl_recheck(st: &State) -> Option<Duration> {
    st.fams
        .values()
        .filter_map(|f| {
            let fifo = &f.fam.opts.compaction_options_fifo;
            let on = f.fam.opts.compaction_style == crate::compaction_style::CompactionStyle::Fifo && fifo.ttl > 0;
            on.then(|| Duration::from_secs(fifo.ttl.clamp(1, 60)))
        })
        .min()
}

/// The next automatic compaction of any family (in id order), with the family's id. REQUIRES: `st` locked.
fn pick_any(inner: &DbInner, st: &State) -> Option<(u32, CompactionTask)> {
    for (&fid, f) in &st.fams {
        if f.fam.opts.disable_auto_compactions {
            continue;
        }
        let Some(v) = st.vs.current_of(fid) else { continue };
        if let Some(task) = pick_auto(inner, &f.fam.opts, v, &st.busy, false, st.earliest_mem_seq(fid)) {
            return Some((fid, task));
        }
        if let Some(task) = crate::blob::pick_forced(inner, &f.fam.opts, v, &st.busy) {
            return Some((fid, task));
        }
    }
    None
}

/// The next compaction under the database's style (`manual`: for `compact_range`, see `picker::pick_auto`).
/// FIFO's TTL reads each table's creation time from the table cache: every table stays open there (FIFO's TTL
/// requires `max_open_files = -1`), so no I/O runs under the state lock; a table that cannot be read counts as
/// of unknown age.
fn pick_auto(
    inner: &DbInner,
    opts: &crate::Options,
    v: &crate::version::Version,
    busy: &HashSet<u64>,
    manual: bool,
    earliest_mem_seq: u64,
) -> Option<CompactionTask> {
    let created = |f: &shaledb_format::edit::FileMeta| inner.tables.get(f).ok()?.properties().creation_time;
    picker::pick_auto(v, opts, busy, &created, manual, earliest_mem_seq)
}

/// A flush whose tables are written, waiting in [`State::flushed`] until every older memtable of its family is
/// recorded.
pub(crate) struct Flushed {
    /// The memtables written, oldest first.
    mems: Vec<Arc<crate::memtable::MemTable>>,
    files: Vec<shaledb_format::edit::FileMeta>,
    stats: CompactionStats,
    blob: crate::blob::BlobOutput,
    job: Option<crate::listener::FlushJobInfo>,
}

impl Flushed {
    /// True when memtable `id` is one of those written.
    pub(crate) fn holds(&self, id: u64) -> bool {
        self.mems.iter().any(|m| m.id() == id)
    }
}

/// Flushes every immutable memtable of family `fid` that no other flush has taken, oldest first, into one L0
/// table, then records every flushed memtable of the family that is next in line. Taking all of them is RocksDB's
/// flush job's rule: when the flush falls behind, the memtables that waited meanwhile make one larger table, not
/// one each, so L0 grows by fewer files, each compaction of L0 covers more data, and a key overwritten in several
/// of them is written once. Several flush threads run this at once, each on its own memtables; the tables are
/// written in any order but recorded oldest first, so a family's log number only moves past memtables whose
/// tables are recorded, and L0 never holds a newer memtable's table without the older ones'. REQUIRES: `st`
/// locked.
fn flush_one(inner: &Arc<DbInner>, st: &mut parking_lot::MutexGuard<'_, State>, fid: u32) {
    let mems = st.unclaimed(fid);
    let Some(oldest) = mems.first().map(|m| m.id()) else { return };
    let Some(f) = st.fams.get(&fid) else { return };
    let fam = f.fam.clone();
    st.flushing.extend(mems.iter().map(|m| (fid, m.id())));
    st.running_flushes += 1;
    let snapshots = inner.snapshots.sequences();
    let job = inner.listeners.any().then(|| events::flush_info(inner, st, &mems));
    let several = st.fams.len() > 1;
    let result = parking_lot::MutexGuard::unlocked(st, || {
        if let Some(info) = &job {
            inner.listeners.deliver();
            inner.listeners.each(|l| l.on_flush_begin(info));
        }
        let new_number = || inner.state.lock().vs.new_file_number();
        let (opts, stop) = (&fam.opts, &inner.shutting_down);
        let out = write_level0(opts, inner.db_id, &inner.dir, &mems, &new_number, &snapshots, stop, &inner.blobs)?;
        if !out.0.is_empty() || !out.2.additions.is_empty() {
            // The outputs' directory entries must be durable before the MANIFEST names them (D7); synced here,
            // without the state lock, rather than in the edit (`log_and_apply_dir_synced`).
            inner.fs.sync_dir(&inner.dir)?;
        }
        if several {
            // This family's table will be durable while other families' writes of the same time may still be
            // only in WALs switched out unsynced: those are synced first, or a power loss could keep later
            // writes (in the table) and lose earlier ones (in a WAL's lost tail), a hole (D3). One family
            // needs no sync: its WALs are not read again once its table is recorded.
            super::write::sync_closed_wals(inner)?;
        }
        Ok(out)
    });
    for m in &mems {
        st.flushing.remove(&(fid, m.id()));
    }
    st.running_flushes -= 1;
    let (files, stats, blob) = match result {
        Ok(r) => r,
        // Aborted by shutdown: the memtables are still in the WAL; nothing failed. Tables written by newer
        // flushes and not recorded are orphans, removed at the next open.
        Err(Error::Closed) if inner.shutting_down.load(Ordering::Acquire) => return,
        Err(e) => {
            inner.set_bg_error(st, &e, crate::listener::BackgroundErrorReason::Flush);
            discard_flushed(st, fid);
            return;
        }
    };
    st.flushed.insert((fid, oldest), Flushed { mems, files, stats, blob, job });
    install_flushed(inner, st, fid);
    inner.bg_cv.notify_all();
}

/// Drops the flushed, unrecorded tables of family `fid`: after a failed flush of an older memtable (the
/// database is read-only now) or when the family is gone. Their files are deleted like any obsolete file.
fn discard_flushed(st: &mut State, fid: u32) {
    let keys: Vec<(u32, u64)> = st.flushed.keys().filter(|(f, _)| *f == fid).copied().collect();
    for key in keys {
        if let Some(done) = st.flushed.remove(&key) {
            st.obsolete_tables.extend(done.files.iter().map(|f| f.number));
            st.vs.obsolete_blobs.extend(done.blob.additions.iter().map(|b| b.number));
        }
    }
}

/// Records, oldest first, every flushed memtable of family `fid` whose older memtables are all recorded: one
/// MANIFEST edit each. REQUIRES: `st` locked.
fn install_flushed(inner: &Arc<DbInner>, st: &mut parking_lot::MutexGuard<'_, State>, fid: u32) {
    loop {
        if st.bg_error.is_some() {
            return;
        }
        let Some(f) = st.fams.get(&fid) else {
            // The family was dropped meanwhile: the outputs belong to nothing.
            discard_flushed(st, fid);
            return;
        };
        let Some(oldest) = f.imm.last().map(|m| m.id()) else { return };
        let Some(done) = st.flushed.remove(&(fid, oldest)) else { return };
        if !install_one(inner, st, fid, done) {
            return;
        }
    }
}

/// Records one flush, of the oldest memtables of its family: the MANIFEST edit, the new super version, the
/// counters, the obsolete WALs and the listeners. False when the edit failed (the background error is set).
fn install_one(inner: &Arc<DbInner>, st: &mut parking_lot::MutexGuard<'_, State>, fid: u32, done: Flushed) -> bool {
    let Flushed { mems, files, mut stats, blob, job } = done;
    let Some(f) = st.fams.get(&fid) else { return false };
    let n = mems.len();
    // The flushed memtables are the family's oldest n, in order: the group was a run of the oldest unclaimed
    // ones, and every older memtable was recorded before it.
    debug_assert!(n <= f.imm.len() && f.imm.iter().rev().zip(&mems).all(|(a, b)| a.id() == b.id()));
    // The family's WALs older than its next memtable still waiting are obsolete once this edit is durable.
    let next_log = if f.imm.len() > n { f.imm[f.imm.len() - 1 - n].id() } else { f.mem.id() };
    let mut edit = VersionEdit {
        family: (fid != 0).then_some(fid),
        log_number: Some(next_log),
        last_sequence: Some(inner.visible_seq.load(Ordering::Acquire)),
        ..VersionEdit::default()
    };
    let written: u64 = files.iter().map(|f| f.file_size).sum::<u64>() + blob.bytes_written;
    edit.new_files.extend(files.into_iter().map(|f| (0, f)));
    edit.blob_files.extend(blob.additions);
    let ids: Vec<u64> = mems.iter().map(|m| m.id()).collect();
    let line = crate::info_log::flush_line(&ids, &edit, &stats);
    let outputs = events::outputs(inner, job.is_some(), &edit);
    if let Err(e) = st.vs.log_and_apply_dir_synced(edit) {
        // The outputs stay: the edit naming them may be in the MANIFEST even though its sync failed. If it is
        // not, they are orphans removed at the next open.
        inner.set_bg_error(st, &e, crate::listener::BackgroundErrorReason::Flush);
        return false;
    }
    if let Some(f) = st.fams.get_mut(&fid) {
        let keep = f.imm.len().saturating_sub(n);
        f.imm.truncate(keep);
    }
    // Counted under the same lock hold that pops the memtables, so a `flush` that sees them gone also sees
    // their callback pending.
    st.flush_callbacks_pending += usize::from(job.is_some());
    inner.install_super_version(st, fid);
    advance_idle_families(inner, st);
    stats.bytes_written = written;
    inner.counters.record_compaction(0, &stats);
    inner.counters.record_flush_job(&stats);
    Counters::add(&inner.counters.flush_count, 1);
    inner.info_log.log(line);
    // Unlinking a WAL of a memtable's size took 30-40 ms on this project's disk, and freeing the flushed
    // memtable (one node and one record allocation per entry) is as slow: both are done with `state` released,
    // so that writers (whose leader takes `state` in every group) do not wait for them. The popped memtable and
    // the replaced super version are gone by now, so `mems` holds their last references unless a reader still
    // holds one (then the reader frees it). Another flush thread may record the family's next memtable
    // meanwhile: it is the oldest now.
    let doomed = obsolete_wals(inner, st);
    let min_log = st.vs.min_log_number();
    parking_lot::MutexGuard::unlocked(st, || {
        drop(mems);
        for path in doomed {
            let _ = inner.fs.remove(&path);
        }
        // A WAL switched out unsynced is still open in the closed-WAL list: its blocks are freed when that
        // file is closed, here rather than under the writers' locks (docs/perf/wal-close.md).
        super::write::drop_obsolete_closed_wals(inner, min_log);
    });
    if let Some(mut info) = job {
        info.output_files = outputs;
        info.bytes_written = written;
        info.duration = Duration::from_micros(stats.micros);
        parking_lot::MutexGuard::unlocked(st, || events::flush_completed(inner, &info));
        st.flush_callbacks_pending -= 1;
        inner.bg_cv.notify_all();
    }
    true
}

/// Old WALs: every one below the smallest log number of any family. REQUIRES: `st` locked.
pub(crate) fn delete_obsolete_wals(inner: &DbInner, st: &State) {
    for path in obsolete_wals(inner, st) {
        let _ = inner.fs.remove(&path);
    }
}

/// The WALs [`delete_obsolete_wals`] deletes (none while a checkpoint or backup copies WALs: the next flush
/// after it deletes them). A WAL never comes back into use, so they may be removed after `st` is released.
/// REQUIRES: `st` locked.
fn obsolete_wals(inner: &DbInner, st: &State) -> Vec<std::path::PathBuf> {
    if st.wal_pins > 0 {
        return Vec::new();
    }
    let min_log = st.vs.min_log_number();
    let names = inner.fs.list(&inner.dir).unwrap_or_default();
    names
        .into_iter()
        .filter(|name| matches!(filenames::parse(name), Some(filenames::FileKind::Wal(n)) if n < min_log))
        .map(|name| inner.dir.join(name))
        .collect()
}

/// Families with nothing in memory whose recorded log number lags behind their (empty) memtable's WAL:
/// records the newer log number, so that an idle family does not keep old WALs alive. A failure is the
/// background error (the MANIFEST cannot take edits any more). REQUIRES: `st` locked.
pub(crate) fn advance_idle_families(inner: &DbInner, st: &mut State) {
    let idle: Vec<(u32, u64)> = st
        .fams
        .iter()
        .filter(|(_, f)| f.imm.is_empty() && f.mem.is_empty())
        .filter_map(|(id, f)| {
            let recorded = st.vs.families().get(id)?.log_number;
            (recorded < f.mem.id()).then_some((*id, f.mem.id()))
        })
        .collect();
    for (fid, log_number) in idle {
        let edit =
            VersionEdit { family: (fid != 0).then_some(fid), log_number: Some(log_number), ..VersionEdit::default() };
        if let Err(e) = st.vs.log_and_apply(edit) {
            inner.set_bg_error(st, &e, crate::listener::BackgroundErrorReason::Flush);
            return;
        }
        inner.install_super_version(st, fid);
    }
}

/// Runs one compaction task of family `fid`. REQUIRES: `st` locked; the task's files are not busy.
fn run_compaction(inner: &Arc<DbInner>, st: &mut parking_lot::MutexGuard<'_, State>, fid: u32, task: CompactionTask) {
    let Some(fam) = st.fams.get(&fid).map(|f| f.fam.clone()) else { return };
    let all: Vec<u64> = task.all_inputs().iter().map(|(_, f)| f.number).collect();
    st.busy.extend(all.iter().copied());
    st.running_compactions += 1;
    let job = inner.listeners.any().then(|| events::compaction_info(inner, &task));
    if let Some(info) = &job {
        // The task's files are busy: nobody else picks them meanwhile.
        parking_lot::MutexGuard::unlocked(st, || {
            inner.listeners.deliver();
            inner.listeners.each(|l| l.on_compaction_begin(info));
        });
    }
    let family = (fid != 0).then_some(fid);
    let result = if task.drop_only {
        drop_files(inner, st, family, &task).map(|stats| (stats, Vec::new()))
    } else if task.trivial_move {
        trivial_move(inner, st, family, &task).map(|stats| (stats, Vec::new()))
    } else {
        let snapshots = inner.snapshots.sequences();
        let full = st.vs.current_of(fid).is_some_and(|v| is_full_compaction(v, &task));
        let out = parking_lot::MutexGuard::unlocked(st, || {
            let (edit, stats) = super::compaction_job::execute(inner, &fam, &task, &snapshots, full)?;
            if !edit.new_files.is_empty() || !edit.blob_files.is_empty() {
                // As for a flush: the outputs' names made durable before the edit, without the state lock.
                inner.fs.sync_dir(&inner.dir)?;
            }
            Ok((edit, stats))
        });
        // On a failed MANIFEST write the outputs stay (see flush_one).
        out.and_then(|(mut edit, stats)| {
            if st.vs.current_of(fid).is_none() {
                // The family was dropped meanwhile: its outputs belong to nothing.
                st.obsolete_tables.extend(edit.new_files.iter().map(|(_, f)| f.number));
                st.vs.obsolete_blobs.extend(edit.blob_files.iter().map(|b| b.number));
                return Err(Error::Closed);
            }
            edit.family = family;
            let line = crate::info_log::compaction_line(&task, &edit, &stats);
            let outputs = events::outputs(inner, job.is_some(), &edit);
            st.vs.log_and_apply_dir_synced(edit).map(|_| (stats, line, outputs))
        })
        .map(|(stats, line, outputs)| {
            inner.info_log.log(line);
            st.obsolete_tables.extend(all.iter().copied());
            inner.counters.record_compaction(task.output_level, &stats);
            inner.counters.record_compaction_job(&stats);
            (stats, outputs)
        })
    };
    for n in &all {
        st.busy.remove(n);
    }
    st.running_compactions -= 1;
    let error = match &result {
        Ok(_) => {
            inner.install_super_version(st, fid);
            None
        }
        Err(e)
            if matches!(e, Error::Closed)
                && (inner.shutting_down.load(Ordering::Acquire) || st.vs.current_of(fid).is_none()) =>
        {
            Some(e.clone())
        }
        Err(e) => {
            inner.set_bg_error(st, e, crate::listener::BackgroundErrorReason::Compaction);
            Some(e.clone())
        }
    };
    if let Some(mut info) = job {
        if let Ok((stats, outputs)) = result {
            info.stats = stats;
            info.output_files = outputs;
        }
        info.error = error;
        parking_lot::MutexGuard::unlocked(st, || events::compaction_completed(inner, &info));
    }
    inner.bg_cv.notify_all();
}

/// FIFO's size and TTL rules: the inputs leave the version; nothing is written.
fn drop_files(inner: &DbInner, st: &mut State, family: Option<u32>, task: &CompactionTask) -> Result<CompactionStats> {
    let mut edit = VersionEdit { family, ..VersionEdit::default() };
    for (level, f) in task.all_inputs() {
        edit.deleted_files.push((level as u32, f.number));
    }
    let stats = CompactionStats { count: 1, ..CompactionStats::default() };
    let line = crate::info_log::compaction_line(task, &edit, &stats);
    st.vs.log_and_apply(edit)?;
    inner.info_log.log(line);
    st.obsolete_tables.extend(task.all_inputs().iter().map(|(_, f)| f.number));
    Ok(stats)
}

fn trivial_move(
    inner: &DbInner,
    st: &mut State,
    family: Option<u32>,
    task: &CompactionTask,
) -> Result<CompactionStats> {
    let mut edit = VersionEdit { family, ..VersionEdit::default() };
    let mut stats = CompactionStats { count: 1, ..CompactionStats::default() };
    // Files already in the output level (universal compaction's) stay where they are.
    for (level, f) in task.all_inputs().into_iter().filter(|(l, _)| *l != task.output_level) {
        edit.deleted_files.push((level as u32, f.number));
        edit.new_files.push((task.output_level as u32, (**f).clone()));
        stats.bytes_moved += f.file_size;
    }
    let line = crate::info_log::compaction_line(task, &edit, &stats);
    // The moved files were named durably by the edits that added them: no directory fsync.
    st.vs.log_and_apply_dir_synced(edit)?;
    inner.info_log.log(line);
    inner.counters.record_compaction(task.output_level, &stats);
    Ok(stats)
}

/// True when `task` reads every table file of `v` (RocksDB's `is_full_compaction` for the filter context).
fn is_full_compaction(v: &crate::version::Version, task: &CompactionTask) -> bool {
    let total: usize = (0..v.num_levels()).map(|l| v.files(l).len()).sum();
    task.all_inputs().len() == total
}

/// Takes the obsolete tables and blob files that no live version references any more out of `st`, evicted
/// from their caches, for [`remove_files`] to delete with the state lock released: unlinking a 64 MiB table
/// took tens of milliseconds on this project's disk, and every write group's leader takes that lock.
/// REQUIRES: `st` locked.
pub(crate) fn obsolete_files(inner: &DbInner, st: &mut State) -> Vec<Doomed> {
    let mut doomed: Vec<Doomed> = crate::blob::take_obsolete(inner, st).into_iter().map(Doomed::Blob).collect();
    if st.obsolete_tables.is_empty() {
        return doomed;
    }
    st.live_versions.retain(|(_, w)| w.strong_count() > 0);
    let mut live: HashSet<u64> = HashSet::new();
    for (_, w) in &st.live_versions {
        if let Some(v) = w.upgrade() {
            live.extend(v.levels.iter().flatten().map(|f| f.number));
        }
    }
    for f in st.vs.families().values() {
        live.extend(f.current.levels.iter().flatten().map(|f| f.number));
    }
    let mut keep = Vec::new();
    for n in std::mem::take(&mut st.obsolete_tables) {
        if live.contains(&n) {
            keep.push(n);
        } else {
            inner.tables.evict(n);
            doomed.push(Doomed::Table(n));
        }
    }
    st.obsolete_tables = keep;
    doomed
}

/// A file [`obsolete_files`] took: no version lists it and no cache holds it, and its number is never used
/// again, so it may be removed without the state lock.
pub(crate) enum Doomed {
    Table(u64),
    Blob(u64),
}

/// Removes the files [`obsolete_files`] took; a table's removal is told to the listeners. A failed removal
/// leaves a leftover that the next open removes as an orphan. REQUIRES: `state` not held.
pub(crate) fn remove_files(inner: &DbInner, doomed: Vec<Doomed>) {
    for d in doomed {
        match d {
            Doomed::Blob(n) => {
                let _ = inner.fs.remove(&filenames::blob(&inner.dir, n));
            }
            Doomed::Table(n) => {
                let path = filenames::table(&inner.dir, n);
                let r = inner.fs.remove(&path);
                let info = TableFileDeletionInfo { file_number: n, path, error: r.err() };
                inner.listeners.defer(Deferred::Deleted(info));
            }
        }
    }
}

fn check_error(st: &State) -> Result<()> {
    match &st.bg_error {
        Some(c) => Err(DbInner::read_only_error(c)),
        None => Ok(()),
    }
}

/// Switches the memtables of every family (`None`) or of family `only` that hold anything, and waits until
/// every memtable of those families written so far is flushed and every `on_flush_completed` callback of a
/// recorded flush has returned (a listener has heard of the flush when this returns; callbacks must not call
/// `flush`, as the listener module says, so this wait cannot be on itself).
pub(crate) fn flush(inner: &Arc<DbInner>, only: Option<u32>) -> Result<()> {
    if inner.read_only {
        return Err(super::read_only::refused("flush"));
    }
    let targets: Vec<(u32, u64)> = {
        let mut wal = inner.wal.lock();
        let mut st = inner.state.lock();
        check_error(&st)?;
        let chosen = |id: u32| only.is_none_or(|o| o == id);
        let full: Vec<u32> =
            st.fams.iter().filter(|(id, f)| chosen(**id) && !f.mem.is_empty()).map(|(id, _)| *id).collect();
        if !full.is_empty() {
            super::write::switch_memtable(inner, &mut wal, &mut st, &full).inspect_err(|e| {
                inner.set_bg_error(&mut st, e, crate::listener::BackgroundErrorReason::MemTable);
            })?;
        }
        st.fams.iter().filter(|(id, _)| chosen(**id)).filter_map(|(id, f)| Some((*id, f.imm.first()?.id()))).collect()
    };
    if targets.is_empty() {
        return Ok(());
    }
    let mut st = inner.state.lock();
    inner.bg_cv.notify_all();
    let waiting = |st: &State| {
        st.flush_callbacks_pending > 0
            || targets.iter().any(|(id, t)| st.fams.get(id).is_some_and(|f| f.imm.iter().any(|m| m.id() <= *t)))
    };
    while waiting(&st) {
        check_error(&st)?;
        if st.bg_threads_alive == 0 {
            return Err(Error::Closed);
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
    check_error(&st)
}

/// Waits until nothing is flushing or compacting and no compaction is due, in any family.
pub(crate) fn wait_for_compaction(inner: &Arc<DbInner>) -> Result<()> {
    if inner.read_only {
        // No background work ever runs.
        return Ok(());
    }
    let mut st = inner.state.lock();
    loop {
        check_error(&st)?;
        let due = pick_any(inner, &st).is_some();
        if !st.any_imm() && st.flushing.is_empty() && st.running_compactions == 0 && !due {
            return Ok(());
        }
        if st.bg_threads_alive == 0 {
            return Err(Error::Closed);
        }
        inner.bg_cv.notify_all();
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// Family `fid`'s current version and options, or `InvalidArgument` once it is dropped. REQUIRES: `st` locked.
fn family_now(st: &State, fid: u32) -> Result<(Arc<crate::version::Version>, Arc<super::family::Family>)> {
    match (st.vs.current_of(fid), st.fams.get(&fid)) {
        (Some(v), Some(f)) => Ok((v.clone(), f.fam.clone())),
        _ => Err(Error::InvalidArgument(format!("column family {fid} was dropped"))),
    }
}

/// Flushes, then compacts `[begin, end]` level by level down to the last level, in the caller's thread.
///
/// It compacts what exists when the call starts: every write visible then (sequence `start_seq`) reaches the
/// last level, and the call returns even while writes continue (issue 9: it never returned, because each
/// flush of a concurrent writer put a new L0 file in range and L0 was never empty). Level 0 is done once no
/// file in range holds an entry at or below `start_seq`: every L0 file flushed later holds only newer entries
/// (its memtable was switched in after `flush` switched the one holding `start_seq`). Deeper levels gain no
/// files meanwhile (automatic compactions pause while `manual > 0`), so each is done after finitely many tasks.
pub(crate) fn compact_range(inner: &Arc<DbInner>, fid: u32, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
    if inner.read_only {
        return Err(super::read_only::refused("compact_range"));
    }
    let start_seq = inner.visible_seq.load(Ordering::Acquire);
    flush(inner, Some(fid))?;
    let (_, fam) = family_now(&inner.state.lock(), fid)?;
    let o = &fam.opts;
    if o.compaction_style != crate::compaction_style::CompactionStyle::Level {
        // Universal: everything into the last level; FIFO: its automatic pick, once (RocksDB's CompactRange).
        return manual_compaction(inner, |st| {
            let (v, _) = family_now(st, fid)?;
            if let Some(task) = pick_auto(inner, o, &v, &st.busy, true, st.earliest_mem_seq(fid)) {
                run_compaction(inner, st, fid, task);
            }
            check_error(st)
        });
    }
    manual_compaction(inner, |st| {
        // With a compaction filter (or TTL mode) the last level is rewritten too, so the filter sees every
        // value in the range (RocksDB's default `kIfHaveCompactionFilter`). First, so that what the levels
        // above bring down is not filtered twice in one call (as RocksDB's `kForceOptimized` skips the files
        // the call itself wrote).
        if o.compaction_filter.is_some() || o.ttl.is_some() {
            let (v, _) = family_now(st, fid)?;
            if let Some(task) = picker::pick_bottom_rewrite(&v, o, begin, end, &st.busy) {
                run_compaction(inner, st, fid, task);
                check_error(st)?;
            }
        }
        let num_levels = st.vs.num_levels();
        let mut level = 0;
        while level + 1 < num_levels {
            check_error(st)?;
            let (v, _) = family_now(st, fid)?;
            let last = v.last_nonempty_level().unwrap_or(0);
            if level >= last && (level > 0 || v.files(0).is_empty()) {
                break;
            }
            if level == 0 && v.overlapping_files(0, begin, end).iter().all(|f| f.smallest_seq > start_seq) {
                // Only files flushed after the call started: not ours to compact.
                level += 1;
                continue;
            }
            match picker::pick_manual(&v, o, level, begin, end, &st.busy) {
                Some(task) => {
                    let out_level = task.output_level;
                    run_compaction(inner, st, fid, task);
                    check_error(st)?;
                    // Large ranges are compacted in several tasks; stay on this level until it is done.
                    let (v2, _) = family_now(st, fid)?;
                    let left = v2.overlapping_files(level, begin, end);
                    let done =
                        if level == 0 { left.iter().all(|f| f.smallest_seq > start_seq) } else { left.is_empty() };
                    if out_level == level || done {
                        level += 1;
                    }
                }
                None => level += 1,
            }
        }
        Ok(())
    })
}

/// Runs `work` as a manual compaction: automatic picking pauses (`manual`), the running compactions finish
/// first, and the background threads are woken when it is done, whatever its result.
fn manual_compaction<T>(
    inner: &Arc<DbInner>,
    work: impl FnOnce(&mut parking_lot::MutexGuard<'_, State>) -> Result<T>,
) -> Result<T> {
    let mut st = inner.state.lock();
    st.manual += 1;
    let r = (|| {
        while st.running_compactions > 0 {
            check_error(&st)?;
            inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
        }
        work(&mut st)
    })();
    st.manual -= 1;
    inner.bg_cv.notify_all();
    r
}

/// db_bench's `compact0`/`compact1`: compacts every file of level 0 (`level` 0) or of the first non-empty
/// level below it (`level` 1) into the level its compactions output to. Returns the number of files that were
/// in that level, and the levels (from, to); `None` when there was nothing to compact.
pub(crate) fn compact_level(inner: &Arc<DbInner>, level: usize) -> Result<Option<(usize, usize, usize)>> {
    if inner.read_only {
        return Err(super::read_only::refused("compact_level"));
    }
    manual_compaction(inner, |st| {
        let v = st.vs.current().clone();
        let from = if level == 0 {
            0
        } else {
            match (1..v.num_levels()).find(|&l| !v.files(l).is_empty()) {
                Some(l) => l,
                None => return Ok(None),
            }
        };
        let initial: std::collections::HashSet<u64> = v.files(from).iter().map(|f| f.number).collect();
        let mut to = from;
        loop {
            check_error(st)?;
            let v = st.vs.current().clone();
            if !v.files(from).iter().any(|f| initial.contains(&f.number)) {
                break;
            }
            let Some(task) = picker::pick_manual(&v, &inner.opts, from, None, None, &st.busy) else { break };
            if task.output_level == from {
                break;
            }
            to = task.output_level;
            run_compaction(inner, st, 0, task);
            check_error(st)?;
        }
        Ok((to != from).then_some((initial.len(), from, to)))
    })
}

/// Stops the database: with `flush_memtables`, first flushes every memtable (close; with
/// `avoid_flush_during_shutdown` only when a write bypassed the WAL); always syncs the WAL, stops and joins the
/// background threads. Idempotent.
pub(crate) fn shutdown(inner: &Arc<DbInner>, flush_memtables: bool) -> Result<()> {
    if inner.shutting_down.load(Ordering::Acquire) && inner.threads.lock().is_empty() {
        return Ok(());
    }
    let mut first_err = None;
    let in_wal_only = inner.opts.avoid_flush_during_shutdown && !inner.unlogged_writes.load(Ordering::Acquire);
    if flush_memtables && !inner.read_only && !in_wal_only {
        if let Err(e) = flush(inner, None) {
            first_err = Some(e);
        }
    }
    {
        let mut wal = inner.wal.lock();
        inner.shutting_down.store(true, Ordering::Release);
        if !inner.read_only {
            if let Err(e) = super::write::sync_closed_locked(inner, &mut wal) {
                first_err.get_or_insert(e);
            }
        }
        if let Some(log) = wal.log.as_mut() {
            if let Err(e) = super::write::sync_wal_dir(inner).and_then(|()| log.sync()) {
                first_err.get_or_insert(e);
            }
        }
        wal.log = None;
    }
    {
        let _st = inner.state.lock();
        inner.bg_cv.notify_all();
    }
    let threads: Vec<_> = std::mem::take(&mut *inner.threads.lock());
    for t in threads {
        let _ = t.join();
    }
    let st = inner.state.lock();
    if let Some(c) = &st.bg_error {
        first_err.get_or_insert(DbInner::read_only_error(c));
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::spawn_hook::FAIL_AT;
    use crate::{Db, Options};
    use shaledb_vfs::MemFs;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    /// Issue 9: `compact_range(None, None)` never returned while a writer kept flushing new L0 files. It now
    /// compacts what existed when it started: it returns under writes, and every file of the start and
    /// every entry written before the call is in the last level.
    #[test]
    fn compact_range_returns_under_concurrent_writes() {
        let fs = MemFs::new();
        let opts = Options {
            write_buffer_size: 64 << 10,
            max_write_buffer_number: 4,
            target_file_size_base: 256 << 10,
            max_bytes_for_level_base: 1 << 20,
            level0_file_num_compaction_trigger: 2,
            level0_slowdown_writes_trigger: 1000,
            level0_stop_writes_trigger: 2000,
            fs: Arc::new(fs.clone()),
            ..Options::default()
        };
        let db = Arc::new(Db::open("/db", opts).unwrap());
        let written = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        // Keys spread over the whole key space: every L0 file the writer flushes overlaps every table below,
        // so each L0 compaction rewrites the database, far slower than the writer fills a memtable.
        const KEYS: u64 = 20_000;
        const WRITER_LIMIT: u64 = KEYS + 1_000_000;
        let put = |db: &Db, i: u64| db.put(format!("key{:06}", i.wrapping_mul(7919) % KEYS).as_bytes(), [b'v'; 100]);
        for i in 0..KEYS {
            put(&db, i).unwrap();
        }
        written.store(KEYS, Ordering::SeqCst);
        let writer = {
            let (db, written, stop) = (db.clone(), written.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = written.load(Ordering::SeqCst);
                // Bounded: on main the call returned only once writes paused long enough.
                while !stop.load(Ordering::Relaxed) && i < WRITER_LIMIT {
                    put(&db, i).unwrap();
                    i += 1;
                    written.store(i, Ordering::SeqCst);
                }
            })
        };
        // Let the writer get going, then compact under it.
        while written.load(Ordering::SeqCst) < KEYS + 1000 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let start_seq = db.inner.visible_seq.load(Ordering::SeqCst);
        let start_files: HashSet<u64> =
            db.inner.default.sv.load().version.levels.iter().flatten().map(|f| f.number).collect();
        let (tx, rx) = mpsc::channel();
        let compactor = {
            let db = db.clone();
            std::thread::spawn(move || {
                let _ = tx.send(db.compact_range(None, None));
            })
        };
        let result = rx.recv_timeout(Duration::from_secs(300));
        let written_at_return = written.load(Ordering::SeqCst);
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        compactor.join().unwrap();
        result.expect("compact_range did not return within 300 s").unwrap();
        // It returned while the writer still wrote (main's loop ran until the writer's bound stopped it).
        assert!(
            written_at_return < WRITER_LIMIT,
            "compact_range returned only after the writer finished its {} writes",
            WRITER_LIMIT - KEYS
        );
        let v = db.inner.default.sv.load().version.clone();
        let last = v.last_nonempty_level().unwrap();
        for (level, files) in v.levels.iter().enumerate() {
            for f in files {
                // A file of the start is live only when moved (not rewritten) to the last level.
                if start_files.contains(&f.number) || f.smallest_seq <= start_seq {
                    assert_eq!(
                        level, last,
                        "file {} holds entries from before the call above the last level",
                        f.number
                    );
                }
            }
        }
    }

    /// Issue 15: with two jobs, thread 0 flushes and thread 1 compacts, so a compaction starts while a flush
    /// is in progress. (Before, when the flush ran on thread 1, thread 0 would not compact while a memtable
    /// waited, and no compaction ran until the flush ended; which thread took a flush depended on which woke
    /// first, so the scenario is repeated.) In each round a flush is held in its listener callback and an
    /// ingested file overlapping the one L0 file makes a compaction due meanwhile.
    #[test]
    fn a_compaction_runs_while_a_flush_is_in_progress() {
        use crate::ingest::{IngestExternalFileOptions, SstFileWriter};
        use crate::listener::{CompactionJobInfo, EventListener, FlushJobInfo};
        use parking_lot::{Condvar, Mutex};

        #[derive(Default)]
        struct Gate {
            hold: Mutex<bool>,
            cv: Condvar,
            flushes_begun: AtomicU64,
            compactions_begun: AtomicU64,
        }
        impl EventListener for Gate {
            fn on_flush_begin(&self, _: &FlushJobInfo) {
                self.flushes_begun.fetch_add(1, Ordering::SeqCst);
                let mut hold = self.hold.lock();
                while *hold {
                    self.cv.wait(&mut hold);
                }
            }
            fn on_compaction_begin(&self, _: &CompactionJobInfo) {
                self.compactions_begun.fetch_add(1, Ordering::SeqCst);
            }
        }
        let wait_for = |what: &str, ok: &dyn Fn() -> bool| {
            let start = std::time::Instant::now();
            while !ok() {
                assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let fs = MemFs::new();
        let gate = Arc::new(Gate::default());
        let opts = Options {
            max_background_jobs: 2,
            level0_file_num_compaction_trigger: 2,
            listeners: vec![gate.clone()],
            fs: Arc::new(fs.clone()),
            ..Options::default()
        };
        let db = Arc::new(Db::open("/db", opts.clone()).unwrap());
        let key = |round: usize, c: char, i: usize| format!("{c}{round:02}-{i:03}");
        for round in 0..25 {
            // L0 empty, then one file of `a` keys: below the trigger.
            db.compact_range(None, None).unwrap();
            for i in 0..100 {
                db.put(key(round, 'a', i), b"1").unwrap();
            }
            db.flush().unwrap();
            assert_eq!(db.inner.default.sv.load().version.files(0).len(), 1, "round {round}");
            // A flush of `m` keys, held once it has begun.
            *gate.hold.lock() = true;
            for i in 0..100 {
                db.put(key(round, 'm', i), b"2").unwrap();
            }
            let (flushes, compactions) =
                (gate.flushes_begun.load(Ordering::SeqCst), gate.compactions_begun.load(Ordering::SeqCst));
            let flusher = {
                let db = db.clone();
                std::thread::spawn(move || db.flush())
            };
            wait_for("the flush to begin", &|| gate.flushes_begun.load(Ordering::SeqCst) == flushes + 1);
            // A file overlapping the L0 file (not the memtable) goes to L0: two files there, a compaction is due.
            let mut w = SstFileWriter::create(&opts);
            let ext = format!("/ext{round}.sst");
            w.open(&ext).unwrap();
            for i in 40..60 {
                w.put(key(round, 'a', i), b"3").unwrap();
            }
            w.finish().unwrap();
            db.ingest_external_file(&[&ext], &IngestExternalFileOptions::default()).unwrap();
            wait_for("a compaction to begin while the flush is held", &|| {
                gate.compactions_begun.load(Ordering::SeqCst) > compactions
            });
            assert_eq!(gate.flushes_begun.load(Ordering::SeqCst), flushes + 1, "the flush is still held");
            *gate.hold.lock() = false;
            gate.cv.notify_all();
            flusher.join().unwrap().unwrap();
        }
        db.wait_for_compaction().unwrap();
        for round in 0..25 {
            for i in 0..100 {
                let a = if (40..60).contains(&i) { b"3" } else { b"1" };
                assert_eq!(db.get(key(round, 'a', i)).unwrap().as_deref(), Some(&a[..]));
                assert_eq!(db.get(key(round, 'm', i)).unwrap().as_deref(), Some(&b"2"[..]));
            }
        }
    }

    /// Issue 9: a background thread that could not be spawned aborted the process. Now `open` fails with an
    /// error, stops the threads it started, releases the lock, and a later open works with all data.
    #[test]
    fn thread_spawn_failure_is_an_error_from_open() {
        let fs = MemFs::new();
        let opts = Options { max_background_jobs: 4, fs: Arc::new(fs.clone()), ..Options::default() };
        let db = Db::open("/db", opts.clone()).unwrap();
        db.put(b"k", b"v").unwrap();
        db.close().unwrap();
        FAIL_AT.with(|f| f.set(Some(2)));
        let e = Db::open("/db", opts.clone()).unwrap_err();
        FAIL_AT.with(|f| f.set(None));
        assert!(e.is_io(), "{e}");
        assert!(e.to_string().contains("spawn background thread"), "{e}");
        let db = Db::open("/db", opts).unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
        db.close().unwrap();
    }
}
