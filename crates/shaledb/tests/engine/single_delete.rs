//! `Db::single_delete`: RocksDB's documented SingleDelete semantics, case by case, through memtables,
//! flushes, compactions, snapshots, iterators, read-only opens and reopens.

use crate::tiny_options;
use shaledb::{Db, Options, ReadOptions, WriteBatch};

fn quiet() -> Options {
    Options { disable_auto_compactions: true, ..tiny_options() }
}

/// A new database in a temporary directory (kept alive by the first element).
fn fresh() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), quiet()).unwrap();
    (dir, db)
}

fn scan(db: &Db, opts: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter_opt(opts).collect::<shaledb::Result<Vec<_>>>().expect("scan")
}

fn scan_back(db: &Db) -> Vec<Vec<u8>> {
    let mut c = db.cursor();
    c.seek_to_last();
    let mut keys = Vec::new();
    while c.valid() {
        keys.push(c.key().to_vec());
        c.prev();
    }
    c.status().expect("backward scan");
    keys
}

fn mismatches(db: &Db) -> u64 {
    db.statistics().levels.iter().map(|l| l.compaction.single_delete_mismatches).sum()
}

/// Entries stored in the database's live tables (every kind, every version), read from the files themselves
/// once the background thread has removed the tables a compaction replaced.
fn entries(db: &Db) -> u64 {
    use shaledb_format::iter::InternalIterator;
    use shaledb_format::table::{Table, TableReadOptions};
    use shaledb_vfs::{Fs, PosixFs, ReadHints};
    let tables = || {
        std::fs::read_dir(db.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "sst"))
            .collect::<Vec<_>>()
    };
    let live = || db.statistics().levels.iter().map(|l| l.files).sum::<u64>() as usize;
    for _ in 0..400 {
        if tables().len() == live() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(tables().len(), live(), "replaced tables were not removed");
    let fs = PosixFs::new();
    let mut n = 0;
    for path in tables() {
        {
            let t = Table::open(fs.open(&path, ReadHints::default()).unwrap(), &TableReadOptions::default()).unwrap();
            let mut it = t.iter(true, false);
            it.seek_to_first();
            while it.valid() {
                n += 1;
                it.next();
            }
            it.status().unwrap();
        }
    }
    n
}

#[test]
fn single_delete_put_then_get() {
    let (_dir, db) = fresh();
    db.put("k", "v").unwrap();
    db.put("other", "o").unwrap();
    db.single_delete("k").unwrap();
    assert_eq!(db.get("k").unwrap(), None);
    assert_eq!(db.get("other").unwrap(), Some(b"o".to_vec()));
    // A single deletion of an absent key is a no-op for reads.
    db.single_delete("never").unwrap();
    assert_eq!(db.get("never").unwrap(), None);
    let got = db.multi_get(["k", "other", "never"]);
    let got: Vec<Option<Vec<u8>>> = got.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, vec![None, Some(b"o".to_vec()), None]);
}

#[test]
fn single_delete_in_a_batch_with_its_put() {
    let (_dir, db) = fresh();
    let mut b = WriteBatch::new();
    b.put("a", "1").single_delete("a").put("b", "2");
    assert_eq!(b.count(), 3);
    db.write(&b).unwrap();
    assert_eq!(db.get("a").unwrap(), None);
    assert_eq!(db.get("b").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn single_delete_across_flush_and_compaction_drops_both_entries() {
    let (_dir, db) = fresh();
    for i in 0..50 {
        db.put(format!("k{i:03}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap(); // the puts in one table
    for i in 0..50 {
        if i % 2 == 0 {
            db.single_delete(format!("k{i:03}")).unwrap();
        }
    }
    db.flush().unwrap(); // the single deletions in another: they meet the puts only in a compaction
    for i in 0..50 {
        let want = (i % 2 == 1).then(|| format!("v{i}").into_bytes());
        assert_eq!(db.get(format!("k{i:03}")).unwrap(), want, "before compaction, key {i}");
    }
    // multi_get reads the two tables the same way: the single deletion in the newer one hides the put.
    let keys: Vec<String> = (0..50).map(|i| format!("k{i:03}")).collect();
    for (i, got) in db.multi_get(&keys).into_iter().enumerate() {
        assert_eq!(got.unwrap(), (i % 2 == 1).then(|| format!("v{i}").into_bytes()), "multi_get key {i}");
    }
    db.compact_range(None, None).unwrap();
    for i in 0..50 {
        let want = (i % 2 == 1).then(|| format!("v{i}").into_bytes());
        assert_eq!(db.get(format!("k{i:03}")).unwrap(), want, "after compaction, key {i}");
    }
    // Both the single deletions and their puts are gone from the files, not just hidden.
    assert_eq!(entries(&db), 25);
    assert_eq!(mismatches(&db), 0);
}

#[test]
fn single_delete_with_a_snapshot_between_keeps_the_old_value_visible() {
    let (_dir, db) = fresh();
    db.put("k", "v1").unwrap();
    let snap = db.snapshot();
    db.single_delete("k").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let at_snap = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
    assert_eq!(db.get_opt(&at_snap, "k").unwrap(), Some(b"v1".to_vec()));
    assert_eq!(scan(&db, &at_snap), vec![(b"k".to_vec(), b"v1".to_vec())]);
    assert_eq!(db.get("k").unwrap(), None);
    // Both entries had to stay for the snapshot.
    assert_eq!(entries(&db), 2);
    drop(at_snap);
    drop(snap);
    // Released before a compaction meets them: the pair goes. (The pair of "k" stays: it is in the bottom
    // level, which compact_range does not rewrite without a compaction filter, as RocksDB's default
    // `BottommostLevelCompaction::kIfHaveCompactionFilter`.)
    db.put("k2", "v").unwrap();
    let snap = db.snapshot();
    db.single_delete("k2").unwrap();
    db.flush().unwrap();
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("k2").unwrap(), None);
    assert_eq!(entries(&db), 2);
}

#[test]
fn single_delete_then_put_again() {
    let (_dir, db) = fresh();
    for round in 0..6 {
        db.put("k", format!("v{round}")).unwrap();
        if round % 2 == 0 {
            db.flush().unwrap();
        }
        assert_eq!(db.get("k").unwrap(), Some(format!("v{round}").into_bytes()));
        db.single_delete("k").unwrap();
        assert_eq!(db.get("k").unwrap(), None, "round {round}");
        if round % 3 == 1 {
            db.compact_range(None, None).unwrap();
            assert_eq!(db.get("k").unwrap(), None, "round {round} after compaction");
        }
    }
    db.put("k", "last").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("k").unwrap(), Some(b"last".to_vec()));
    assert_eq!(entries(&db), 1);
    assert_eq!(mismatches(&db), 0);
}

#[test]
fn single_delete_hides_keys_from_iterators_both_ways() {
    let (_dir, db) = fresh();
    for k in ["a", "b", "c", "d"] {
        db.put(k, k).unwrap();
    }
    db.flush().unwrap();
    db.single_delete("b").unwrap();
    db.single_delete("d").unwrap();
    let keys = |v: Vec<(Vec<u8>, Vec<u8>)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    assert_eq!(keys(scan(&db, &ReadOptions::default())), vec![b"a".to_vec(), b"c".to_vec()]);
    assert_eq!(scan_back(&db), vec![b"c".to_vec(), b"a".to_vec()]);
    let mut c = db.cursor();
    c.seek("b");
    assert!(c.valid());
    assert_eq!(c.key(), b"c");
    c.seek_for_prev("b");
    assert_eq!(c.key(), b"a");
    drop(c);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(keys(scan(&db, &ReadOptions::default())), vec![b"a".to_vec(), b"c".to_vec()]);
    assert_eq!(scan_back(&db), vec![b"c".to_vec(), b"a".to_vec()]);
}

#[test]
fn single_delete_survives_reopen_before_and_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), quiet()).unwrap();
        db.put("flushed", "1").unwrap();
        db.put("walonly", "2").unwrap();
        db.flush().unwrap();
        db.single_delete("flushed").unwrap(); // only in the WAL
        db.single_delete("walonly").unwrap();
        drop(db); // no close: the WAL is replayed
    }
    {
        let db = Db::open(dir.path(), quiet()).unwrap();
        assert_eq!(db.get("flushed").unwrap(), None);
        assert_eq!(db.get("walonly").unwrap(), None);
        db.flush().unwrap(); // now in a table
        db.close().unwrap();
    }
    let ro = Db::open_read_only(dir.path(), quiet()).unwrap();
    assert_eq!(ro.get("flushed").unwrap(), None);
    assert!(scan(&ro, &ReadOptions::default()).is_empty());
    drop(ro);
    let db = Db::open(dir.path(), quiet()).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("flushed").unwrap(), None);
    assert_eq!(entries(&db), 0);
}

/// Violations are undefined (RocksDB's contract); ShaleDB counts them per compaction and logs them.
#[test]
fn single_delete_contract_violations_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), quiet()).unwrap();
    db.put("twice", "1").unwrap();
    db.put("twice", "2").unwrap();
    db.single_delete("twice").unwrap();
    db.delete("mixed").unwrap();
    db.single_delete("mixed").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(mismatches(&db) >= 2, "{}", mismatches(&db));
    let log = std::fs::read_to_string(dir.path().join("LOG")).unwrap_or_default();
    assert!(log.contains("violations of the single_delete contract"), "LOG does not mention them");
}

/// The model oracle over a seeded workload of single puts, deletes, merges and batches mixed with single
/// deletions that keep their contract (`SingleDeleteMix`), through automatic flushes and compactions, manual
/// compactions, snapshots and a reopen: every read agrees with the model, and no compaction meets a violation.
#[test]
fn single_delete_workload_matches_the_model() {
    use shaledb_testkit::history::string_append;
    use shaledb_testkit::workload::{read_all, read_all_with, submit, SingleDeleteMix, WorkloadConfig};
    use shaledb_testkit::{rng, History};
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options { write_buffer_size: 8 << 10, ..tiny_options() };
    let cfg = WorkloadConfig { keys: 80, single_delete_one_in: 2, max_value: 60, ..WorkloadConfig::default() };
    let mut r = rng(0x5D);
    let mut mix = SingleDeleteMix::new();
    let mut history = History::new(string_append());
    let mut db = Db::open(dir.path(), opts()).unwrap();
    let mut snapshots = Vec::new();
    let mut total_mismatches = 0;
    for i in 0..3000usize {
        let w = mix.write(&mut r, &cfg);
        submit(&db, &w).unwrap();
        history.push(w);
        if i % 250 == 0 {
            snapshots.push((db.snapshot(), history.len()));
        }
        if i % 700 == 699 {
            db.compact_range(None, None).unwrap();
        }
        if i % 400 == 399 {
            // Release the oldest snapshot after checking it: compactions may now drop what it held.
            if let Some((snap, at)) = (!snapshots.is_empty()).then(|| snapshots.remove(0)) {
                let seen = read_all_with(&db, ReadOptions { snapshot: Some(snap), ..ReadOptions::default() });
                assert_eq!(seen.unwrap(), history.model_after(at), "snapshot after {at} writes, at write {i}");
            }
        }
        if i == 1500 {
            total_mismatches += mismatches(&db);
            snapshots.clear();
            drop(db); // a crash-like reopen: the WAL tail is replayed
            db = Db::open(dir.path(), opts()).unwrap();
            assert_eq!(read_all(&db).unwrap(), history.model_after(history.len()), "after reopen");
        }
    }
    db.wait_for_compaction().unwrap();
    let want = history.model_after(history.len());
    assert_eq!(read_all(&db).unwrap(), want);
    for (k, v) in want.iter() {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(v));
    }
    for (snap, at) in snapshots.drain(..) {
        let seen = read_all_with(&db, ReadOptions { snapshot: Some(snap), ..ReadOptions::default() }).unwrap();
        assert_eq!(seen, history.model_after(at), "snapshot after {at} writes");
    }
    db.compact_range(None, None).unwrap();
    assert_eq!(read_all(&db).unwrap(), want, "after a full compaction");
    total_mismatches += mismatches(&db);
    assert_eq!(total_mismatches, 0, "the workload keeps the contract: no compaction may see a violation");
}
