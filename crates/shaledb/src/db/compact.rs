//! Compaction runs: one picked task run and recorded ([`run_compaction`]: a FIFO drop, a trivial move, or a
//! rewrite by `compaction_job.rs`), and the manual calls that drive it in the caller's thread
//! ([`compact_range`], [`compact_level`]). The background threads pick automatic tasks (`background.rs`) and run
//! them here too.

use super::errors::check_error;
use super::flush::flush;
use super::{events, DbInner, State};
use crate::picker::{self, CompactionTask};
use crate::stats::CompactionStats;
use shaledb_format::edit::VersionEdit;
use shaledb_vfs::{Error, Result};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The next compaction under the database's style (`manual`: for `compact_range`, see `picker::pick_auto`).
/// FIFO's TTL reads each table's creation time from the table cache: every table stays open there (FIFO's TTL
/// requires `max_open_files = -1`), so no I/O runs under the state lock; a table that cannot be read counts as
/// of unknown age.
pub(super) fn pick_auto(
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

/// Runs one compaction task of family `fid`. REQUIRES: `st` locked; the task's files are not busy.
pub(super) fn run_compaction(
    inner: &Arc<DbInner>,
    st: &mut parking_lot::MutexGuard<'_, State>,
    fid: u32,
    task: CompactionTask,
) {
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
        return Err(super::errors::refused("compact_range"));
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
            check_error(&st.bg_error)
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
                check_error(&st.bg_error)?;
            }
        }
        let num_levels = st.vs.num_levels();
        let mut level = 0;
        while level + 1 < num_levels {
            check_error(&st.bg_error)?;
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
                    check_error(&st.bg_error)?;
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
            check_error(&st.bg_error)?;
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
        return Err(super::errors::refused("compact_level"));
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
            check_error(&st.bg_error)?;
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
            check_error(&st.bg_error)?;
        }
        Ok((to != from).then_some((initial.len(), from, to)))
    })
}

#[cfg(test)]
mod tests {
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
}
