//! Subcompactions (`max_subcompactions`) and parallel compactions: a split job reads back exactly like an
//! unsplit one, readers and writers run during split and concurrent jobs, and the option is checked at open.

use crate::tiny_options;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::listener::{CompactionJobInfo, EventListener};
use shaledb::{Db, Options, ReadOptions};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts compaction jobs by how many pieces they ran as, and how many ran at once.
#[derive(Default)]
struct Jobs {
    split: AtomicU64,
    unsplit: AtomicU64,
    most_pieces: AtomicU64,
    failed: AtomicU64,
    running: AtomicU64,
    most_running: AtomicU64,
    /// Sleep in `on_compaction_begin` (the job's files are already busy): widens the window in which the
    /// other threads pick their own jobs.
    linger: Duration,
}

impl EventListener for Jobs {
    fn on_compaction_begin(&self, _: &CompactionJobInfo) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_running.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(self.linger);
    }
    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        if info.error.is_some() {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let pieces = info.stats.subcompactions;
        self.most_pieces.fetch_max(pieces, Ordering::SeqCst);
        match pieces {
            0 => {} // a trivial move
            1 => _ = self.unsplit.fetch_add(1, Ordering::SeqCst),
            _ => _ = self.split.fetch_add(1, Ordering::SeqCst),
        }
    }
}

fn split_options(jobs: &Arc<Jobs>) -> Options {
    Options {
        max_subcompactions: 4,
        max_background_jobs: 4,
        target_file_size_base: 2 << 10,
        listeners: vec![jobs.clone() as Arc<dyn EventListener>],
        ..tiny_options()
    }
}

fn scan(db: &Db, ro: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter_opt(ro).map(|r| r.unwrap()).collect()
}

/// The same writes (puts, deletes, merges, range deletions, a snapshot held) compacted by `compact_range`
/// with and without subcompactions read back the same, at the snapshot too, and again after a reopen.
#[test]
fn split_compaction_reads_back_like_an_unsplit_one() {
    let mut states = Vec::new();
    for max_subcompactions in [1u32, 4] {
        let jobs = Arc::new(Jobs::default());
        let opts = Options { max_subcompactions, disable_auto_compactions: true, ..split_options(&jobs) };
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut r = StdRng::seed_from_u64(7);
        let key = |r: &mut StdRng| format!("key{:04}", r.gen_range(0..600));
        let mut snapshot = None;
        for i in 0..6000u32 {
            match r.gen_range(0..20) {
                0..=11 => db.put(key(&mut r), format!("v{i}-{}", "x".repeat(i as usize % 40))).unwrap(),
                12 | 13 => db.delete(key(&mut r)).unwrap(),
                14..=17 => db.merge(key(&mut r), format!("m{i}")).unwrap(),
                18 if i % 5 == 0 => {
                    let (a, b) = (key(&mut r), key(&mut r));
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    db.delete_range(a, b).unwrap();
                }
                _ => {}
            }
            if i == 3000 {
                snapshot = Some(db.snapshot());
            }
            if i % 400 == 399 {
                db.flush().unwrap();
            }
        }
        db.compact_range(None, None).unwrap();
        let at_snapshot = ReadOptions { snapshot: snapshot.clone(), ..ReadOptions::default() };
        let state = (scan(&db, &ReadOptions::default()), scan(&db, &at_snapshot));
        assert!(state.0.len() > 100, "{} keys", state.0.len());
        db.verify_checksums().unwrap();
        let (split, most) = (jobs.split.load(Ordering::SeqCst), jobs.most_pieces.load(Ordering::SeqCst));
        assert_eq!(jobs.failed.load(Ordering::SeqCst), 0);
        if max_subcompactions == 1 {
            assert_eq!((split, most), (0, 1), "a job was split with max_subcompactions = 1");
        } else {
            assert!(split > 0 && (2..=4).contains(&most), "{split} split jobs, at most {most} pieces");
        }
        drop(snapshot);
        db.close().unwrap();
        let db = Db::open(dir.path(), opts).unwrap();
        assert_eq!(scan(&db, &ReadOptions::default()), state.0, "after reopen");
        states.push(state);
    }
    assert_eq!(states[0].0, states[1].0, "split and unsplit compactions read back differently");
    assert_eq!(states[0].1, states[1].1, "split and unsplit compactions differ at the snapshot");
}

/// Writers and readers while automatic compactions run split and several at once: a reader sees each key's
/// value only move forward, scans stay ordered, and everything written reads back at the end. The test runs
/// until it has seen a split job and two compactions at once (up to a time limit).
#[test]
fn writers_and_readers_during_split_and_parallel_compactions() {
    let jobs = Arc::new(Jobs { linger: Duration::from_millis(20), ..Jobs::default() });
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), split_options(&jobs)).unwrap());
    const WRITERS: u32 = 3;
    const KEYS: u32 = 400;
    let stop = Arc::new(AtomicBool::new(false));
    let key = |w: u32, k: u32| format!("w{w}-{:05}", (k * 7919) % KEYS);
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (db, stop) = (db.clone(), stop.clone());
        writers.push(std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) || n < 2 * KEYS {
                // Versions in order per key: the value starts with the write's number.
                db.put(key(w, n % KEYS), format!("{n:08}-{}", "p".repeat(60))).unwrap();
                n += 1;
            }
            n
        }));
    }
    let mut readers = Vec::new();
    for t in 0..2u64 {
        let (db, stop) = (db.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut r = StdRng::seed_from_u64(t);
            let mut seen: BTreeMap<String, String> = BTreeMap::new();
            while !stop.load(Ordering::Relaxed) {
                let k = key(r.gen_range(0..WRITERS), r.gen_range(0..KEYS));
                if let Some(v) = db.get(&k).unwrap() {
                    let v = String::from_utf8(v).unwrap();
                    if let Some(prev) = seen.get(&k) {
                        assert!(v[..8] >= prev[..8], "{k}: read {} after {}", &v[..8], &prev[..8]);
                    }
                    seen.insert(k, v);
                }
                if r.gen_ratio(1, 50) {
                    let all = scan(&db, &ReadOptions::default());
                    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "scan out of order");
                }
            }
        }));
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60)
        && (jobs.split.load(Ordering::SeqCst) < 3 || jobs.most_running.load(Ordering::SeqCst) < 2)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let written: Vec<u32> = writers.into_iter().map(|h| h.join().unwrap()).collect();
    for h in readers {
        h.join().unwrap();
    }
    db.wait_for_compaction().unwrap();
    let (split, most_running) = (jobs.split.load(Ordering::SeqCst), jobs.most_running.load(Ordering::SeqCst));
    assert!(split >= 3, "only {split} split compactions in {:?}", start.elapsed());
    assert!(most_running >= 2, "never two compactions at once in {:?}", start.elapsed());
    assert_eq!(jobs.failed.load(Ordering::SeqCst), 0);
    for (w, &n) in written.iter().enumerate() {
        for last in n.saturating_sub(KEYS)..n {
            let v = db.get(key(w as u32, last % KEYS)).unwrap().expect("a written key is missing");
            assert_eq!(&v[..8], format!("{last:08}").as_bytes(), "writer {w} write {last}");
        }
    }
    db.verify_checksums().unwrap();
}

/// `max_subcompactions` outside 1..=64 is refused at open with a message naming it.
#[test]
fn max_subcompactions_is_checked_at_open() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [0u32, 65, u32::MAX] {
        let e = Db::open(dir.path(), Options { max_subcompactions: bad, ..tiny_options() }).unwrap_err();
        assert!(e.is_invalid_argument(), "{bad}: {e}");
        assert!(e.to_string().contains("max_subcompactions must be in 1..=64"), "{e}");
    }
    Db::open(dir.path(), Options { max_subcompactions: 64, ..tiny_options() }).unwrap().close().unwrap();
}

/// A piece that fails (the third output table's sync fails) fails the whole job: the outputs every other
/// piece finished are removed, the MANIFEST still names the inputs, and a reopen reads everything back.
#[test]
fn a_failed_piece_removes_every_pieces_outputs() {
    use shaledb_vfs::{FaultError, FaultPlan, FsOp, MemFs};
    let fs = MemFs::new();
    let jobs = Arc::new(Jobs::default());
    let opts = Options { disable_auto_compactions: true, fs: Arc::new(fs.clone()), ..split_options(&jobs) };
    let db = Db::open("/db", opts.clone()).unwrap();
    for i in 0..4000u32 {
        db.put(format!("key{:05}", i * 7 % 4000), format!("v{i}-{}", "x".repeat(50))).unwrap();
        if i % 500 == 499 {
            db.flush().unwrap();
        }
    }
    let tables = |fs: &MemFs| -> Vec<String> {
        let mut t: Vec<String> = fs.file_names("/db".as_ref()).into_iter().filter(|n| n.ends_with(".sst")).collect();
        t.sort();
        t
    };
    let before = tables(&fs);
    let want = scan(&db, &ReadOptions::default());
    fs.set_faults(FaultPlan::once(FsOp::Sync, 3, FaultError::Eio).on_paths_containing(".sst"));
    let e = db.compact_range(None, None).unwrap_err();
    assert!(fs.faults_fired() == 1, "the fault did not fire");
    assert!(e.is_io() || e.to_string().contains("read-only"), "{e}");
    fs.clear_faults();
    assert_eq!(tables(&fs), before, "outputs of the failed job were left behind");
    assert_eq!(jobs.split.load(Ordering::SeqCst), 0, "the failed job was reported as done");
    assert_eq!(jobs.failed.load(Ordering::SeqCst), 1);
    drop(db);
    let db = Db::open("/db", opts).unwrap();
    assert_eq!(scan(&db, &ReadOptions::default()), want);
    db.compact_range(None, None).unwrap();
    assert!(jobs.split.load(Ordering::SeqCst) > 0, "the retried compaction was not split");
    assert_eq!(scan(&db, &ReadOptions::default()), want);
}
