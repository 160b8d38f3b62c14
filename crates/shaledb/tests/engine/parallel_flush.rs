//! Several flush threads (issue 15): with `max_background_jobs = 8` two threads flush, each its own memtable,
//! and a family's flushes are recorded oldest first whatever order their tables are written in.
//!
//! One flush for every memtable that waited (RocksDB's flush job takes them all): while the flush thread is busy,
//! the memtables that fill meanwhile are written together as one L0 table when it is free. A key overwritten in
//! several of them is written once, but a version a snapshot still reads stays; range tombstones and deletions
//! in a newer memtable still hide an older one's values; the WALs of every memtable written are obsolete after
//! it; and everything reads back after a reopen.

use shaledb::listener::{EventListener, FlushJobInfo};
use shaledb::{Db, Options, ReadOptions};
use shaledb_vfs::MemFs;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Holds the first flush in `on_flush_begin` until released; records the flushes begun and completed.
#[derive(Default)]
struct Gate {
    begun: Mutex<Vec<FlushJobInfo>>,
    completed: Mutex<Vec<FlushJobInfo>>,
    open: AtomicBool,
}

/// The (oldest) memtable of each flush in `jobs`.
fn ids(jobs: &Mutex<Vec<FlushJobInfo>>) -> Vec<u64> {
    jobs.lock().unwrap().iter().map(|j| j.memtable_id).collect()
}

impl EventListener for Gate {
    fn on_flush_begin(&self, info: &FlushJobInfo) {
        let first = {
            let mut b = self.begun.lock().unwrap();
            b.push(info.clone());
            b.len() == 1
        };
        let start = Instant::now();
        while first && !self.open.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    fn on_flush_completed(&self, info: &FlushJobInfo) {
        self.completed.lock().unwrap().push(info.clone());
    }
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn tables(fs: &MemFs) -> usize {
    fs.file_names(std::path::Path::new("/db")).iter().filter(|n| n.ends_with(".sst")).count()
}

/// The older memtable's flush is held while the newer one's is written: the newer table exists but is not
/// recorded (L0 stays empty, both memtables still serve reads), and once the older flush ends both are
/// recorded, older first, and the newer values win, before and after a reopen.
#[test]
fn a_newer_memtable_flushed_first_is_recorded_after_the_older_one() {
    let fs = MemFs::new();
    let gate = Arc::new(Gate::default());
    let opts = Options {
        fs: Arc::new(fs.clone()),
        listeners: vec![gate.clone() as Arc<dyn EventListener>],
        max_background_jobs: 8,
        max_write_buffer_number: 6,
        disable_auto_compactions: true,
        stats_dump_period_sec: 0,
        ..Options::default()
    };
    let db = Db::open("/db", opts.clone()).unwrap();
    let prop = |name: &str| db.property(name).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), "old").unwrap();
    }
    std::thread::scope(|s| {
        let older = s.spawn(|| db.flush());
        wait_until("the older flush to begin", || gate.begun.lock().unwrap().len() == 1);
        for i in 0..100 {
            db.put(format!("k{i:03}"), "new").unwrap();
        }
        db.put("only-new", "x").unwrap();
        let newer = s.spawn(|| db.flush());
        // The newer flush begins on the other flush thread and writes its table while the older one is held.
        wait_until("the newer table", || gate.begun.lock().unwrap().len() == 2 && tables(&fs) == 1);
        wait_until("the newer flush to finish writing", || prop("rocksdb.num-running-flushes") == "1");
        assert_eq!(prop("rocksdb.num-files-at-level0"), "0", "a newer table recorded before the older one");
        assert_eq!(prop("rocksdb.num-immutable-mem-table"), "2");
        assert_eq!(prop("rocksdb.mem-table-flush-pending"), "0");
        assert!(gate.completed.lock().unwrap().is_empty());
        assert_eq!(db.get("k007").unwrap().as_deref(), Some(&b"new"[..]));
        gate.open.store(true, Ordering::SeqCst);
        older.join().unwrap().unwrap();
        newer.join().unwrap().unwrap();
    });
    let begun = ids(&gate.begun);
    wait_until("both completions", || gate.completed.lock().unwrap().len() == 2);
    assert_eq!(ids(&gate.completed), begun, "recorded in another order than the memtables'");
    assert!(begun[0] < begun[1], "{begun:?}");
    assert_eq!(prop("rocksdb.num-files-at-level0"), "2");
    assert_eq!(prop("rocksdb.num-immutable-mem-table"), "0");
    for key in ["k000", "k050", "k099"] {
        assert_eq!(db.get(key).unwrap().as_deref(), Some(&b"new"[..]), "{key}");
    }
    drop(db);
    let db = Db::open("/db", Options { listeners: Vec::new(), ..opts }).unwrap();
    assert_eq!(db.property("rocksdb.num-files-at-level0").unwrap(), "2");
    for key in ["k000", "k050", "k099"] {
        assert_eq!(db.get(key).unwrap().as_deref(), Some(&b"new"[..]), "{key} after reopen");
    }
    assert_eq!(db.get("only-new").unwrap().as_deref(), Some(&b"x"[..]));
}

/// A write burst into many small memtables with two flush threads: every value reads back, before and after
/// a reopen, and every memtable is recorded (as many L0 tables as flushes).
#[test]
fn bursts_flushed_by_two_threads_lose_nothing() {
    let fs = MemFs::new();
    let opts = Options {
        fs: Arc::new(fs.clone()),
        max_background_jobs: 8,
        max_write_buffer_number: 8,
        write_buffer_size: 8 << 10,
        disable_auto_compactions: true,
        stats_dump_period_sec: 0,
        ..Options::default()
    };
    let db = Db::open("/db", opts.clone()).unwrap();
    let value = |i: u32, round: u32| format!("{round}-{i}-{}", "v".repeat(100));
    for round in 0..3 {
        for i in 0..2000u32 {
            db.put(format!("k{i:05}"), value(i, round)).unwrap();
        }
    }
    db.flush().unwrap();
    let flushes: u64 = db.property("rocksdb.num-files-at-level0").unwrap().parse().unwrap();
    assert!(flushes > 20, "{flushes} memtables");
    let check = |db: &Db| {
        for i in 0..2000u32 {
            assert_eq!(db.get(format!("k{i:05}")).unwrap(), Some(value(i, 2).into_bytes()), "k{i:05}");
        }
    };
    check(&db);
    drop(db);
    let db = Db::open("/db", opts).unwrap();
    assert_eq!(db.property("rocksdb.num-files-at-level0").unwrap(), flushes.to_string());
    check(&db);
}

fn count(fs: &MemFs, suffix: &str) -> usize {
    fs.file_names(Path::new("/db")).iter().filter(|n| n.ends_with(suffix)).count()
}

type Model = BTreeMap<String, Vec<u8>>;

fn check(db: &Db, model: &Model, when: &str) {
    for key in (0..60).map(|i| format!("k{i:03}")).chain((0..20).map(|i| format!("r{i:03}"))).chain(["hot".into()]) {
        assert_eq!(db.get(&key).unwrap(), model.get(&key).cloned(), "{key} {when}");
    }
    let scanned: Model = db
        .iter()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (String::from_utf8(k.to_vec()).unwrap(), v.to_vec())
        })
        .collect();
    assert_eq!(&scanned, model, "scan {when}");
}

#[test]
fn memtables_that_waited_for_the_flush_thread_become_one_table() {
    let fs = MemFs::new();
    let gate = Arc::new(Gate::default());
    let opts = Options {
        fs: Arc::new(fs.clone()),
        listeners: vec![gate.clone() as Arc<dyn EventListener>],
        // One flush thread, so nothing else takes the waiting memtables while the first flush is held.
        max_background_jobs: 2,
        max_write_buffer_number: 8,
        write_buffer_size: 16 << 10,
        disable_auto_compactions: true,
        stats_dump_period_sec: 0,
        ..Options::default()
    };
    let db = Db::open("/db", opts.clone()).unwrap();
    let mut model = Model::new();
    let value = |round: usize, i: usize| format!("{round}-{i}-{}", "v".repeat(300)).into_bytes();
    // Round 0 is small enough to stay in one memtable, so the first flush is the one `flush` asks for.
    for i in 0..60 {
        db.put(format!("k{i:03}"), format!("0-{i}")).unwrap();
        model.insert(format!("k{i:03}"), format!("0-{i}").into_bytes());
    }
    let mut snapshot = None;
    std::thread::scope(|s| {
        // The first flush takes the one memtable there is and is held.
        let first = s.spawn(|| db.flush());
        wait_until("the first flush to begin", || gate.begun.lock().unwrap().len() == 1);
        assert_eq!(gate.begun.lock().unwrap()[0].num_memtables, 1);
        // Rounds of overwrites fill more memtables meanwhile (each round is about 20 KB, a memtable 16 KiB),
        // with a deletion, a range deletion and a snapshot among them.
        let imm = || db.property("rocksdb.num-immutable-mem-table").unwrap().parse::<usize>().unwrap();
        // Until four memtables are immutable (the held one and three that wait), the deletions' among them: round
        // 1 fills more than a memtable, so they are never in the first one that waits.
        let mut deleted_in = usize::MAX;
        let mut round = 1;
        while imm() < 4 || imm() <= deleted_in {
            for i in 0..60 {
                db.put(format!("k{i:03}"), value(round, i)).unwrap();
                model.insert(format!("k{i:03}"), value(round, i));
            }
            // One hot key, overwritten five times a round: the group's table keeps its newest version (and the one
            // the snapshot reads).
            for j in 0..5 {
                db.put("hot", format!("{round}-{j}")).unwrap();
                model.insert("hot".to_string(), format!("{round}-{j}").into_bytes());
            }
            match round {
                1 => {
                    // Keys no later round writes: what the deletions below hide must stay hidden.
                    for i in 0..20 {
                        db.put(format!("r{i:03}"), value(round, i)).unwrap();
                        model.insert(format!("r{i:03}"), value(round, i));
                    }
                    // Read later at this snapshot: round 1's values, which newer memtables overwrite.
                    snapshot = Some((db.snapshot(), model.clone()));
                }
                2 => {
                    db.delete("r002").unwrap();
                    model.remove("r002");
                    db.delete_range("r005", "r015").unwrap();
                    model.retain(|k, _| !("r005".."r015").contains(&k.as_str()));
                    deleted_in = imm();
                }
                _ => {}
            }
            round += 1;
            assert!(round < 50, "memtables did not fill");
        }
        // Some of the deleted keys come back in the newest memtable, above the range tombstone.
        for i in [2, 12] {
            db.put(format!("r{i:03}"), value(99, i)).unwrap();
            model.insert(format!("r{i:03}"), value(99, i));
        }
        let waiting = imm() as u64 - 1;
        assert_eq!(gate.begun.lock().unwrap().len(), 1, "a second flush began while the only flush thread was held");
        check(&db, &model, "before the flushes");
        gate.open.store(true, Ordering::SeqCst);
        first.join().unwrap().unwrap();
        // The next flush takes every memtable that waited.
        wait_until("the group's flush", || gate.completed.lock().unwrap().len() == 2);
        let group = gate.completed.lock().unwrap()[1].clone();
        assert_eq!(group.num_memtables, waiting, "{group:?}");
        assert_eq!(group.output_files.len(), 1, "{group:?}");
        let written = group.output_files[0].num_entries;
        assert!(
            written < group.num_entries,
            "the overwritten keys were written {written} times of {} entries",
            group.num_entries
        );
    });
    let (snap, at_snap) = snapshot.unwrap();
    let ro = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
    for key in (0..60).map(|i| format!("k{i:03}")).chain((0..20).map(|i| format!("r{i:03}"))).chain(["hot".into()]) {
        assert_eq!(db.get_opt(&ro, &key).unwrap(), at_snap.get(&key).cloned(), "{key} at the snapshot");
    }
    assert_eq!(db.property("rocksdb.num-files-at-level0").unwrap(), "2");
    assert_eq!(db.property("rocksdb.num-immutable-mem-table").unwrap(), "0");
    // Only the active memtable's WAL is left: the group's flush made every older one obsolete.
    wait_until("the obsolete WALs to go", || count(&fs, ".log") == 1);
    check(&db, &model, "after the flushes");
    drop(snap);
    drop(ro);
    drop(db);
    let db = Db::open("/db", Options { listeners: Vec::new(), ..opts }).unwrap();
    check(&db, &model, "after a reopen");
    // The two flushes' tables, and the table recovery wrote from the active memtable's WAL.
    assert_eq!(db.property("rocksdb.num-files-at-level0").unwrap(), "3");
}
