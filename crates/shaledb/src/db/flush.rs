//! Flushes: memtables written out as L0 tables ([`write_level0`], for the background flush and for WAL replay at
//! open, `replay.rs` and `open.rs`), a background flush job ([`flush_one`]) and its install, oldest memtable
//! first, in the MANIFEST, and the manual flush that `Db::flush` runs ([`flush`]).

use super::errors::check_error;
use super::obsolete::obsolete_wals;
use super::{events, DbInner, State};
use crate::blob::{BlobFiles, BlobOutput};
use crate::compaction::{self, OutputSpec, RunContext};
use crate::filenames;
use crate::identity::DbId;
use crate::iter::MergingIterator;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::range_del::Fragments;
use crate::rate_limiter::IoPriority;
use crate::stats::{CompactionStats, Counters};
use shaledb_format::edit::{FileMeta, VersionEdit};
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::{Error, Result, WriteHints};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes the contents of `mems` (one memtable, or several of one family that waited for the flush together, as
/// RocksDB's flush job takes every immutable memtable waiting) as one L0 table (recovery and flush), with its large
/// values in blob files (`enable_blob_files`). Several are merged into one sorted run: a key written in more than
/// one keeps only the versions a snapshot needs, and their range tombstones drop what they cover in the older ones.
/// Nothing when every memtable is empty.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_level0(
    opts: &Options,
    db_id: DbId,
    dir: &Path,
    mems: &[Arc<MemTable>],
    new_number: &dyn Fn() -> Result<u64>,
    snapshots: &[u64],
    stop: &AtomicBool,
    blobs: &BlobFiles,
) -> Result<(Vec<FileMeta>, CompactionStats, BlobOutput)> {
    if mems.iter().all(|m| m.is_empty()) {
        return Ok((Vec::new(), CompactionStats::default(), BlobOutput::default()));
    }
    let blob = crate::blob::config(opts, blobs, dir, 0);
    let spec = OutputSpec {
        table_options: opts.table_options(db_id, 0, false),
        max_file_size: u64::MAX,
        grandparents: Vec::new(),
        max_grandparent_overlap: u64::MAX,
    };
    let new_file = || {
        let n = new_number()?;
        Ok((n, filenames::table(dir, n)))
    };
    let start = Instant::now();
    let cpu_start = shaledb_vfs::thread_cpu_micros();
    // Flushes (also those of WAL replay at open) are charged to the rate limiter at high priority.
    let limiter = opts.rate_limiter.as_ref();
    let out = crate::rate_limiter::with_limited_fs(opts.fs.as_ref(), limiter, IoPriority::High, |fs| {
        let cx = RunContext {
            fs,
            write_hints: WriteHints { direct: opts.use_direct_io_for_flush_and_compaction },
            new_file: &new_file,
            snapshots,
            merge: opts.merge_operator.as_ref(),
            bottommost: false,
            stop,
            // Flushes never filter (RocksDB's default): a value is filtered when a compaction first rewrites it.
            filter: None,
            // The memtables' range tombstones go into the L0 table, and drop the points they cover there.
            range_dels: range_tombstones(mems),
            blob: Some(&blob),
        };
        match mems {
            [mem] => compaction::write_sorted_run(&mut mem.iter(), &spec, &cx),
            _ => {
                let children = mems.iter().map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>).collect();
                compaction::write_sorted_run(&mut MergingIterator::new(children), &spec, &cx)
            }
        }
    })?;
    let mut stats = out.stats;
    stats.micros = start.elapsed().as_micros() as u64;
    stats.cpu_micros = shaledb_vfs::thread_cpu_micros().saturating_sub(cpu_start);
    stats.count = 1;
    Ok((out.files, stats, out.blob))
}

/// The range tombstones of `mems`, as one set of fragments (`None` when they have none).
fn range_tombstones(mems: &[Arc<MemTable>]) -> Option<Arc<Fragments>> {
    let all: Vec<Arc<Fragments>> = mems.iter().filter_map(|m| m.range_tombstones()).collect();
    match all.len() {
        0 => None,
        1 => all.into_iter().next(),
        _ => Some(Arc::new(Fragments::merged(all.iter().map(|f| f.as_ref())))),
    }
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
pub(super) fn flush_one(inner: &Arc<DbInner>, st: &mut parking_lot::MutexGuard<'_, State>, fid: u32) {
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
            super::wal::sync_closed_wals(inner)?;
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
    st.flush_wal_deletions_pending += 1;
    parking_lot::MutexGuard::unlocked(st, || {
        drop(mems);
        for path in doomed {
            let _ = inner.fs.remove(&path);
        }
        // A WAL switched out unsynced is still open in the closed-WAL list: its blocks are freed when that
        // file is closed, here rather than under the writers' locks (docs/perf/wal-close.md).
        super::wal::drop_obsolete_closed_wals(inner, min_log);
    });
    st.flush_wal_deletions_pending -= 1;
    inner.bg_cv.notify_all();
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

/// Switches the memtables of every family (`None`) or of family `only` that hold anything, and waits until
/// every memtable of those families written so far is flushed, the WALs those flushes made obsolete are
/// deleted, and every `on_flush_completed` callback of a recorded flush has returned (a listener has heard of
/// the flush when this returns; callbacks must not call `flush`, as the listener module says, so this wait
/// cannot be on itself).
pub(crate) fn flush(inner: &Arc<DbInner>, only: Option<u32>) -> Result<()> {
    if inner.read_only {
        return Err(super::errors::refused("flush"));
    }
    let targets: Vec<(u32, u64)> = {
        let mut wal = inner.wal.lock();
        let mut st = inner.state.lock();
        check_error(&st.bg_error)?;
        let chosen = |id: u32| only.is_none_or(|o| o == id);
        let full: Vec<u32> =
            st.fams.iter().filter(|(id, f)| chosen(**id) && !f.mem.is_empty()).map(|(id, _)| *id).collect();
        if !full.is_empty() {
            super::wal::switch_memtable(inner, &mut wal, &mut st, &full).inspect_err(|e| {
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
            || st.flush_wal_deletions_pending > 0
            || targets.iter().any(|(id, t)| st.fams.get(id).is_some_and(|f| f.imm.iter().any(|m| m.id() <= *t)))
    };
    while waiting(&st) {
        check_error(&st.bg_error)?;
        if st.bg_threads_alive == 0 {
            return Err(Error::Closed);
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
    check_error(&st.bg_error)
}
