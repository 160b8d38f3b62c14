//! Checkpoints and backups of a live database (docs/durability.md D12): taken while a writer thread keeps
//! writing (puts, deletes, merges, batches) and compactions run, each copy opened (a backup restored first)
//! and checked against the history of acknowledged writes: its state is the state after a prefix of them
//! that holds every write acknowledged before the call.

use shaledb::backup::BackupEngine;
use shaledb::{Db, Options};
use shaledb_testkit::history::string_append;
use shaledb_testkit::workload::{random_write, read_all, submit, WorkloadConfig};
use shaledb_testkit::{rng, seed_from_env, History};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A copy and the writes acknowledged just before and just after it was taken.
struct Taken {
    path: PathBuf,
    before: usize,
    after: usize,
    backup_id: Option<u64>,
}

#[test]
fn checkpoints_and_backups_during_writes_and_compaction_hold_every_acknowledged_write() {
    let seed = seed_from_env(24);
    let tmp = shaledb_testkit::tempdir();
    let opts = Options { disable_auto_compactions: false, ..crate::tiny_options() };
    let db = Arc::new(Db::open(tmp.path().join("db"), opts.clone()).unwrap());
    let history = Arc::new(Mutex::new(History::new(string_append())));
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, history, acked, stop) = (db.clone(), history.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut r = rng(seed);
            let cfg = WorkloadConfig { sync_one_in: 50, ..WorkloadConfig::default() };
            while !stop.load(Ordering::Acquire) {
                let w = random_write(&mut r, &cfg);
                submit(&db, &w).unwrap();
                let mut h = history.lock().unwrap();
                h.push(w);
                acked.store(h.len(), Ordering::Release);
            }
        })
    };
    let compactor = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                db.compact_range(None, None).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let mut engine = BackupEngine::open(tmp.path().join("backups")).unwrap();
    let mut taken = Vec::new();
    for round in 0..6 {
        // Let the writer get ahead: every copy must hold writes made since the previous one.
        while acked.load(Ordering::Acquire) < 300 * (round + 1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let before = acked.load(Ordering::Acquire);
        let path = tmp.path().join(format!("ckpt{round}"));
        let backup_id = if round % 2 == 0 {
            db.create_checkpoint(&path).unwrap();
            None
        } else {
            Some(engine.create_backup(&db).unwrap())
        };
        taken.push(Taken { path, before, after: acked.load(Ordering::Acquire), backup_id });
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    compactor.join().unwrap();
    let history = history.lock().unwrap().clone();
    assert_eq!(engine.list().len(), 3);
    let mut prefixes = Vec::new();
    for t in &taken {
        if let Some(id) = t.backup_id {
            engine.verify(id).unwrap();
            engine.restore(id, &t.path).unwrap();
        }
        let copy = Db::open(&t.path, Options { create_if_missing: false, ..opts.clone() }).unwrap();
        let observed = read_all(&copy).unwrap();
        let k = history
            .check(&observed, t.before, t.after)
            .unwrap_or_else(|e| panic!("{} (backup {:?}): {e}", t.path.display(), t.backup_id));
        prefixes.push(k);
        // The copy is a database of its own: it takes writes and reopens with them.
        copy.put("after-copy", "x").unwrap();
        copy.close().unwrap();
        let copy = Db::open(&t.path, opts.clone()).unwrap();
        assert_eq!(copy.get("after-copy").unwrap().as_deref(), Some(&b"x"[..]));
    }
    assert!(prefixes.windows(2).all(|w| w[0] < w[1]), "copies taken later hold more writes: {prefixes:?}");
}
