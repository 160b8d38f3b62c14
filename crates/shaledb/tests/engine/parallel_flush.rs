//! Several flush threads (issue 15): with `max_background_jobs = 8` two threads flush, each its own memtable,
//! and a family's flushes are recorded oldest first whatever order their tables are written in.

use shaledb::listener::{EventListener, FlushJobInfo};
use shaledb::{Db, Options};
use shaledb_vfs::MemFs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Holds the first flush in `on_flush_begin` until released; records the memtables begun and completed.
#[derive(Default)]
struct Gate {
    begun: Mutex<Vec<u64>>,
    completed: Mutex<Vec<u64>>,
    open: AtomicBool,
}

impl EventListener for Gate {
    fn on_flush_begin(&self, info: &FlushJobInfo) {
        let first = {
            let mut b = self.begun.lock().unwrap();
            b.push(info.memtable_id);
            b.len() == 1
        };
        let start = Instant::now();
        while first && !self.open.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    fn on_flush_completed(&self, info: &FlushJobInfo) {
        self.completed.lock().unwrap().push(info.memtable_id);
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
    let begun = gate.begun.lock().unwrap().clone();
    wait_until("both completions", || gate.completed.lock().unwrap().len() == 2);
    assert_eq!(*gate.completed.lock().unwrap(), begun, "recorded in another order than the memtables'");
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
