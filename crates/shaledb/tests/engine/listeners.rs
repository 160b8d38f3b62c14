//! The event listener API: each event observed with its fields on real flushes, compactions, stalls and
//! errors, and listeners calling back into the database without deadlocking.

use shaledb::listener::{
    BackgroundErrorReason, CompactionJobInfo, EventListener, FlushJobInfo, FlushReason, TableFileCreationInfo,
    TableFileCreationReason, TableFileDeletionInfo, WriteStallCondition, WriteStallInfo,
};
use shaledb::{Db, Error, Options};
use shaledb_testkit::{FaultError, FaultPlan, FsOp, MemFs};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
enum Event {
    FlushBegin(FlushJobInfo),
    FlushCompleted(FlushJobInfo),
    CompactionBegin(CompactionJobInfo),
    CompactionCompleted(CompactionJobInfo),
    Created(TableFileCreationInfo),
    Deleted(TableFileDeletionInfo),
    Stall(WriteStallInfo),
    Error(BackgroundErrorReason, Error),
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Event>>,
}

impl Recorder {
    fn push(&self, e: Event) {
        self.events.lock().unwrap().push(e);
    }
    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
    /// Waits (up to 30 s) until an event satisfies `f`; deferred events arrive shortly after their cause.
    fn wait_for(&self, what: &str, f: impl Fn(&Event) -> bool) -> Event {
        let start = Instant::now();
        loop {
            if let Some(e) = self.events().into_iter().find(|e| f(e)) {
                return e;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no {what} in {:#?}", self.events());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl EventListener for Recorder {
    fn on_flush_begin(&self, info: &FlushJobInfo) {
        self.push(Event::FlushBegin(info.clone()));
    }
    fn on_flush_completed(&self, info: &FlushJobInfo) {
        self.push(Event::FlushCompleted(info.clone()));
    }
    fn on_compaction_begin(&self, info: &CompactionJobInfo) {
        self.push(Event::CompactionBegin(info.clone()));
    }
    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        self.push(Event::CompactionCompleted(info.clone()));
    }
    fn on_table_file_created(&self, info: &TableFileCreationInfo) {
        self.push(Event::Created(info.clone()));
    }
    fn on_table_file_deleted(&self, info: &TableFileDeletionInfo) {
        self.push(Event::Deleted(info.clone()));
    }
    fn on_stall_conditions_changed(&self, info: &WriteStallInfo) {
        self.push(Event::Stall(*info));
    }
    fn on_background_error(&self, reason: BackgroundErrorReason, error: &Error) {
        self.push(Event::Error(reason, error.clone()));
    }
}

fn open(fs: &MemFs, rec: &Arc<Recorder>, opts: Options) -> Db {
    let opts = Options { fs: Arc::new(fs.clone()), listeners: vec![rec.clone()], ..opts };
    Db::open("/db", opts).unwrap()
}

/// Options where nothing happens unless the test asks: no automatic compaction, large memtables.
fn manual() -> Options {
    Options { disable_auto_compactions: true, stats_dump_period_sec: 0, ..Options::default() }
}

#[test]
fn flush_events_carry_the_memtable_and_the_table_written() {
    let fs = MemFs::new();
    let rec = Arc::new(Recorder::default());
    let db = open(&fs, &rec, manual());
    for i in 0..100 {
        db.put(format!("k{i:03}"), "v").unwrap();
    }
    db.delete("k000").unwrap();
    db.flush().unwrap();
    let events = rec.events();
    let [Event::FlushBegin(begin), Event::Created(created), Event::FlushCompleted(done)] = events.as_slice() else {
        panic!("{events:#?}")
    };
    assert_eq!((begin.job_id, begin.num_entries, begin.num_deletions), (1, 101, 1));
    assert_eq!(begin.reason, FlushReason::Manual);
    assert!(begin.output_files.is_empty() && begin.duration.is_zero());
    assert!(!begin.triggered_writes_slowdown && !begin.triggered_writes_stop);
    assert_eq!((done.job_id, done.memtable_id), (1, begin.memtable_id));
    let [file] = done.output_files.as_slice() else { panic!("{done:#?}") };
    // The put of k000 (sequence 1) is shadowed by its deletion in the same memtable: not written.
    assert_eq!((file.level, file.num_entries, file.num_deletions), (0, 100, 1));
    assert_eq!((file.smallest_seqno, file.largest_seqno), (2, 101));
    assert_eq!(done.bytes_written, file.file_size);
    assert!(fs.read_file(&file.path).is_some_and(|d| d.len() as u64 == file.file_size), "{file:?}");
    let sstables = db.property("rocksdb.sstables").unwrap();
    assert!(sstables.contains(&format!(" {}:{}[", file.file_number, file.file_size)), "{sstables}");
    assert_eq!((created.job_id, created.reason, &created.file), (1, TableFileCreationReason::Flush, file));
}

/// A listener whose completion callback takes a while, to show that `flush` waits for it.
struct SlowFlushListener(Mutex<u32>);

impl EventListener for SlowFlushListener {
    fn on_flush_completed(&self, _: &FlushJobInfo) {
        std::thread::sleep(Duration::from_millis(200));
        *self.0.lock().unwrap() += 1;
    }
}

#[test]
fn flush_returns_after_the_completion_callback_has_returned() {
    let fs = MemFs::new();
    let slow = Arc::new(SlowFlushListener(Mutex::new(0)));
    let opts = Options { fs: Arc::new(fs.clone()), listeners: vec![slow.clone()], ..manual() };
    let db = Db::open("/db", opts).unwrap();
    for round in 1..=3 {
        db.put(format!("k{round}"), "v").unwrap();
        db.flush().unwrap();
        // The table is recorded before the callback runs; the call returns only once the callback is done.
        assert_eq!(*slow.0.lock().unwrap(), round);
    }
}

#[test]
fn compaction_events_carry_inputs_outputs_and_stats_and_inputs_are_reported_deleted() {
    let fs = MemFs::new();
    let rec = Arc::new(Recorder::default());
    let db = open(&fs, &rec, manual());
    for round in 0..2 {
        for i in 0..50 {
            db.put(format!("k{i:03}"), format!("v{round}")).unwrap();
        }
        db.flush().unwrap();
    }
    let flushed: Vec<u64> = rec
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::FlushCompleted(f) => Some(f.output_files[0].file_number),
            _ => None,
        })
        .collect();
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    let events = rec.events();
    let begin = events.iter().find_map(|e| if let Event::CompactionBegin(c) = e { Some(c) } else { None }).unwrap();
    let done = events.iter().find_map(|e| if let Event::CompactionCompleted(c) = e { Some(c) } else { None }).unwrap();
    assert_eq!(begin.reason, "ManualCompaction");
    assert_eq!(begin.job_id, 3);
    let mut inputs: Vec<u64> = begin.input_files.iter().map(|f| f.file_number).collect();
    inputs.sort();
    assert_eq!(inputs, flushed);
    assert!(begin.input_files.iter().all(|f| f.level == 0));
    assert!(begin.output_files.is_empty() && begin.stats.records_in == 0);
    assert_eq!((done.job_id, done.base_input_level), (3, 0));
    assert!(done.error.is_none() && !done.trivial_move);
    assert_eq!((done.stats.records_in, done.stats.records_dropped), (100, 50));
    let [out] = done.output_files.as_slice() else { panic!("{done:#?}") };
    assert_eq!((out.level, out.num_entries), (done.output_level, 50));
    assert_eq!(done.stats.bytes_written, out.file_size);
    assert!(done.output_level > 0);
    // Created before completed; the inputs deleted once no version holds them.
    let created_at = events.iter().position(
        |e| matches!(e, Event::Created(c) if c.reason == TableFileCreationReason::Compaction && c.file == *out),
    );
    let done_at = events.iter().position(|e| matches!(e, Event::CompactionCompleted(_)));
    assert!(created_at.unwrap() < done_at.unwrap());
    for n in flushed {
        let Event::Deleted(d) = rec.wait_for("deletion", |e| matches!(e, Event::Deleted(d) if d.file_number == n))
        else {
            unreachable!()
        };
        assert!(d.error.is_none() && d.path.ends_with(format!("{n:06}.sst")), "{d:?}");
        assert!(fs.read_file(&d.path).is_none());
    }
}

/// L0 at the slowdown trigger delays writes: the listener is told when that starts and when the compaction
/// that empties L0 ends it.
#[test]
fn stall_condition_changes_are_reported_both_ways() {
    let fs = MemFs::new();
    let rec = Arc::new(Recorder::default());
    let opts = Options {
        level0_file_num_compaction_trigger: 1,
        level0_slowdown_writes_trigger: 1,
        level0_stop_writes_trigger: 100,
        stats_dump_period_sec: 0,
        ..Options::default()
    };
    let db = open(&fs, &rec, opts);
    db.put("a", "1").unwrap();
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    let stalls = |rec: &Recorder| -> Vec<WriteStallInfo> {
        rec.events().into_iter().filter_map(|e| if let Event::Stall(s) = e { Some(s) } else { None }).collect()
    };
    rec.wait_for("return to normal", |e| matches!(e, Event::Stall(s) if s.current == WriteStallCondition::Normal));
    let s = stalls(&rec);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!((s[0].previous, s[0].current), (WriteStallCondition::Normal, WriteStallCondition::Delayed));
    assert_eq!((s[1].previous, s[1].current), (WriteStallCondition::Delayed, WriteStallCondition::Normal));
}

/// A flush that cannot create its table: the background error reaches the listener with its reason; a
/// compaction that fails is reported completed with its error.
#[test]
fn background_errors_are_reported_with_their_reason() {
    let fs = MemFs::new();
    let rec = Arc::new(Recorder::default());
    let db = open(&fs, &rec, manual());
    db.put("a", "1").unwrap();
    fs.set_faults(FaultPlan { path_contains: Some(".sst"), ..FaultPlan::once(FsOp::Create, 1, FaultError::Eio) });
    assert!(db.flush().unwrap_err().is_io() || db.put("b", "2").unwrap_err().is_read_only());
    let Event::Error(reason, e) = rec.wait_for("background error", |e| matches!(e, Event::Error(..))) else {
        unreachable!()
    };
    assert_eq!(reason, BackgroundErrorReason::Flush);
    assert!(e.is_io() && e.to_string().contains(".sst"), "{e}");

    let fs = MemFs::new();
    let rec = Arc::new(Recorder::default());
    let db = open(&fs, &rec, manual());
    for i in 0..2 {
        db.put("a", format!("{i}")).unwrap();
        db.flush().unwrap();
    }
    fs.set_faults(FaultPlan { path_contains: Some(".sst"), ..FaultPlan::once(FsOp::Create, 1, FaultError::Eio) });
    assert!(db.compact_range(None::<&[u8]>, None::<&[u8]>).is_err());
    let Event::CompactionCompleted(c) =
        rec.wait_for("failed compaction", |e| matches!(e, Event::CompactionCompleted(_)))
    else {
        unreachable!()
    };
    assert!(c.error.as_ref().is_some_and(|e| e.is_io()) && c.output_files.is_empty(), "{c:#?}");
    let Event::Error(reason, _) = rec.wait_for("background error", |e| matches!(e, Event::Error(..))) else {
        unreachable!()
    };
    assert_eq!(reason, BackgroundErrorReason::Compaction);
}

/// A listener that reads, writes and asks for properties from inside its callbacks (taking the state lock
/// among others): no deadlock, and what it read is right.
#[derive(Default)]
struct CallsBack {
    /// Held for the whole callback, so the test can stop callbacks before it drops the database (the last
    /// `Arc` must not be dropped on a background thread).
    db: Mutex<Option<Weak<Db>>>,
    seen: Mutex<Vec<String>>,
}

impl CallsBack {
    fn visit(&self, what: &str) {
        let guard = self.db.lock().unwrap();
        let Some(db) = guard.as_ref().and_then(Weak::upgrade) else { return };
        let v = db.get("anchor").unwrap();
        let running = db.property_int("rocksdb.num-running-compactions").unwrap();
        let stats = db.property("rocksdb.stats").unwrap();
        db.put(format!("from-listener-{what}"), "x").unwrap();
        self.seen.lock().unwrap().push(format!("{what}:{:?}:{running}:{}", v, stats.contains("** DB Stats **")));
    }
}

impl EventListener for CallsBack {
    fn on_flush_completed(&self, _: &FlushJobInfo) {
        self.visit("flush");
    }
    fn on_compaction_begin(&self, _: &CompactionJobInfo) {
        self.visit("compaction-begin");
    }
    fn on_compaction_completed(&self, _: &CompactionJobInfo) {
        self.visit("compaction");
    }
    fn on_table_file_deleted(&self, _: &TableFileDeletionInfo) {
        self.visit("deleted");
    }
}

#[test]
fn listeners_calling_back_into_the_database_do_not_deadlock() {
    let fs = MemFs::new();
    let l = Arc::new(CallsBack::default());
    let opts = Options {
        fs: Arc::new(fs.clone()),
        listeners: vec![l.clone()],
        level0_file_num_compaction_trigger: 2,
        stats_dump_period_sec: 0,
        ..Options::default()
    };
    let db = Arc::new(Db::open("/db", opts).unwrap());
    *l.db.lock().unwrap() = Some(Arc::downgrade(&db));
    db.put("anchor", "here").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..3 {
                db.put(format!("k{i}"), "v").unwrap();
                db.flush().unwrap();
            }
            db.wait_for_compaction().unwrap();
            tx.send(()).unwrap();
        })
    };
    rx.recv_timeout(Duration::from_secs(60)).expect("deadlock: flushes and compaction did not finish in 60 s");
    worker.join().unwrap();
    let start = Instant::now();
    while !l.seen.lock().unwrap().iter().any(|s| s.starts_with("deleted")) {
        assert!(start.elapsed() < Duration::from_secs(30), "{:?}", l.seen.lock().unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    let seen = l.seen.lock().unwrap().clone();
    for what in ["flush", "compaction-begin", "compaction", "deleted"] {
        let s = seen.iter().find(|s| s.starts_with(&format!("{what}:"))).unwrap_or_else(|| panic!("{what}: {seen:?}"));
        assert!(s.contains("Some([104, 101, 114, 101])") && s.ends_with(":true"), "{s}");
    }
    // The compaction was running when it was reported begun.
    assert!(seen.iter().any(|s| s.starts_with("compaction-begin:") && s.contains(":1:")), "{seen:?}");
    // The listener's own writes landed.
    assert_eq!(db.get("from-listener-flush").unwrap(), Some(b"x".to_vec()));
    *l.db.lock().unwrap() = None;
}
