//! The scheduler: the `max_background_jobs` threads, which work each runs next (flushes on the flush
//! threads, compactions on the others), the wait for background work, and shutdown.
//!
//! A job takes what it needs under the state mutex, releases it for all I/O, and retakes it to record the
//! result in the MANIFEST and publish a new super version. A failed job sets the background error: the
//! database turns read-only (D6) and no further job starts. The jobs themselves are in `flush.rs` (a memtable
//! written to L0 and recorded), `compact.rs` (a compaction task run and recorded) and `obsolete.rs` (the files
//! no live version references, deleted between jobs).

use super::compact::{pick_auto, run_compaction};
use super::errors::check_error;
use super::flush::{flush, flush_one};
use super::obsolete::{obsolete_files, remove_files};
use super::{DbInner, State};
use crate::picker::CompactionTask;
use shaledb_vfs::{Error, Result};
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
        if let Some(task) = crate::blob::pick_forced(&inner.tables, &f.fam.opts, v, &st.busy) {
            return Some((fid, task));
        }
    }
    None
}

/// Waits until nothing is flushing or compacting (an installed flush's obsolete WALs deleted too) and no
/// compaction is due, in any family.
pub(crate) fn wait_for_compaction(inner: &Arc<DbInner>) -> Result<()> {
    if inner.read_only {
        // No background work ever runs.
        return Ok(());
    }
    let mut st = inner.state.lock();
    loop {
        check_error(&st.bg_error)?;
        let due = pick_any(inner, &st).is_some();
        let idle = st.flushing.is_empty() && st.flush_wal_deletions_pending == 0 && st.running_compactions == 0;
        if !st.any_imm() && idle && !due {
            return Ok(());
        }
        if st.bg_threads_alive == 0 {
            return Err(Error::Closed);
        }
        inner.bg_cv.notify_all();
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
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
            if let Err(e) = super::wal::sync_closed_locked(inner, &mut wal) {
                first_err.get_or_insert(e);
            }
        }
        if let Some(log) = wal.log.as_mut() {
            if let Err(e) = super::wal::sync_wal_dir(inner).and_then(|()| log.sync()) {
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
        first_err.get_or_insert(super::errors::read_only_error(c));
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
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

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
