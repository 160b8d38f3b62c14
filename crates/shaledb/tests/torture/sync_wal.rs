//! `Db::sync_wal` runs the WAL's `fdatasync` without the `wal` lock (D1, D2, D3, D6): writes without `sync`
//! complete while it runs; once it returns, every write acknowledged before the call survives a power loss;
//! a failed sync through its handle turns the database read-only; a memtable switch while it runs loses
//! nothing. A file system wrapping [`MemFs`] holds the WAL's sync handle at a gate, after its sync and before it
//! returns (a device slow to acknowledge), until the test releases it, so each scenario is reached without
//! timing and the writes made meanwhile are not synced by it.

use crate::{db_path, mem_options};
use shaledb::listener::{EventListener, FlushJobInfo};
use shaledb::{Db, Error, Options};
use shaledb_testkit::{FaultError, FaultPlan, FsOp, MemFs, PowerLoss};
use shaledb_vfs::{FileLock, Fs, RandomAccessFile, ReadHints, Result, SyncHandle, WritableFile};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a step may wait for another thread before the test fails: a hang is the failure being tested for
/// (a write stuck behind the sync), never a speed.
const STUCK: Duration = Duration::from_secs(60);

/// A one-shot gate: the first `pass` after `arm` reports itself inside and waits until `release`.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    armed: bool,
    inside: bool,
    released: bool,
}

impl Gate {
    fn arm(&self) {
        *self.state.lock().unwrap() = GateState { armed: true, ..GateState::default() };
    }

    fn pass(&self) {
        let mut st = self.state.lock().unwrap();
        if !st.armed {
            return;
        }
        st.armed = false;
        st.inside = true;
        self.cv.notify_all();
        while !st.released {
            st = self.cv.wait(st).unwrap();
        }
    }

    fn wait_inside(&self, what: &str) {
        let st = self.state.lock().unwrap();
        let (st, timeout) = self.cv.wait_timeout_while(st, STUCK, |s| !s.inside).unwrap();
        assert!(!timeout.timed_out() && st.inside, "{what} never reached the gate");
    }

    fn release(&self) {
        self.state.lock().unwrap().released = true;
        self.cv.notify_all();
    }
}

/// [`MemFs`] whose WAL files give sync handles that pass `gate` before they sync.
#[derive(Debug)]
struct GatedFs {
    inner: MemFs,
    gate: Arc<GateDebug>,
}

/// The gate, printable for `Fs: Debug`.
#[derive(Default)]
struct GateDebug(Gate);

impl std::fmt::Debug for GateDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

struct GatedFile {
    inner: Box<dyn WritableFile>,
    gate: Arc<GateDebug>,
}

struct GatedHandle {
    inner: Box<dyn SyncHandle>,
    gate: Arc<GateDebug>,
}

impl SyncHandle for GatedHandle {
    fn sync(&self) -> Result<()> {
        // The sync is done (or has failed) before the gate: writes made while the handle waits there are not
        // covered, the case the engine must not count as synced.
        let r = self.inner.sync();
        self.gate.0.pass();
        r
    }
}

impl WritableFile for GatedFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn sync_handle(&self) -> Result<Box<dyn SyncHandle>> {
        Ok(Box::new(GatedHandle { inner: self.inner.sync_handle()?, gate: self.gate.clone() }))
    }
}

impl GatedFs {
    fn wrap(&self, path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        if path.extension().is_some_and(|e| e == "log") {
            Box::new(GatedFile { inner: file, gate: self.gate.clone() })
        } else {
            file
        }
    }
}

impl Fs for GatedFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.inner.create(path)?))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.inner.open_append(path)?))
    }
    fn open(&self, path: &Path, hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path, hints)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.hard_link(from, to)
    }
    fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.inner.remove_dir(dir)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

/// A database on `fs` whose WAL syncs through handles pass the returned gate (armed by the test).
fn open_gated(fs: &MemFs, opts: Options) -> (Arc<Db>, Arc<GateDebug>) {
    let gate = Arc::new(GateDebug::default());
    let gated = GatedFs { inner: fs.clone(), gate: gate.clone() };
    let db = Db::open(db_path(), Options { fs: Arc::new(gated), ..opts }).expect("open");
    (Arc::new(db), gate)
}

fn spawn_sync(db: &Arc<Db>) -> JoinHandle<shaledb::Result<()>> {
    let db = db.clone();
    std::thread::spawn(move || db.sync_wal())
}

/// Runs `f` on another thread and returns its result, failing the test if it does not finish within
/// [`STUCK`] (it is then blocked behind something it must not wait for).
fn finishes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(STUCK) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what} waited for sync_wal's fdatasync"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// What a power loss of `fs` now (in `mode`) leaves, reopened.
fn after_power_loss(fs: &MemFs, mode: PowerLoss, seed: u64) -> Db {
    let crashed = fs.deep_clone();
    crashed.power_loss(mode, seed);
    Db::open(db_path(), mem_options(&crashed)).expect("reopen after the power loss")
}

fn get(db: &Db, k: &str) -> Option<Vec<u8>> {
    db.get(k.as_bytes()).expect("read")
}

#[test]
fn a_write_without_sync_completes_while_sync_wal_is_inside_its_fdatasync() {
    let fs = MemFs::new();
    let (db, gate) = open_gated(&fs, mem_options(&fs));
    db.put(b"before", b"1").unwrap();
    gate.0.arm();
    let syncer = spawn_sync(&db);
    gate.0.wait_inside("sync_wal");
    let writer = db.clone();
    finishes("a put without sync", move || {
        writer.put(b"during", b"2").unwrap();
        let mut batch = shaledb::WriteBatch::new();
        batch.put("batch", "3").delete("before");
        writer.write(&batch).unwrap();
    });
    assert!(!syncer.is_finished(), "sync_wal is still held inside its fdatasync");
    assert_eq!(get(&db, "during").as_deref(), Some(&b"2"[..]));
    assert_eq!(get(&db, "before"), None, "the batch written during the sync is visible");
    gate.0.release();
    syncer.join().unwrap().expect("sync_wal");
    // The writes made during the sync are the next sync_wal's to cover.
    db.sync_wal().unwrap();
    let crashed = after_power_loss(&fs, PowerLoss::DropUnsynced, 1);
    assert_eq!(get(&crashed, "during").as_deref(), Some(&b"2"[..]));
    assert_eq!(get(&crashed, "batch").as_deref(), Some(&b"3"[..]));
    assert_eq!(get(&crashed, "before"), None);
}

#[test]
fn every_write_acknowledged_before_sync_wal_survives_a_power_loss_after_it_returns() {
    for (seed, mode) in [
        (1, PowerLoss::DropUnsynced),
        (2, PowerLoss::GarbleUnsynced),
        (3, PowerLoss::KeepRandomPages { keep_probability: 0.5 }),
    ] {
        let fs = MemFs::new();
        let (db, gate) = open_gated(&fs, mem_options(&fs));
        for i in 0..20 {
            db.put(format!("a{i:02}").as_bytes(), b"x").unwrap();
        }
        gate.0.arm();
        let first = spawn_sync(&db);
        gate.0.wait_inside("the first sync_wal");
        // Acknowledged after the first call began and before the second: the second must cover it.
        db.put(b"b", b"y").unwrap();
        let second = spawn_sync(&db);
        gate.0.release();
        first.join().unwrap().expect("first sync_wal");
        let after_first = fs.deep_clone();
        second.join().unwrap().expect("second sync_wal");
        let after_second = fs.deep_clone();
        db.put(b"c", b"z").unwrap();
        drop(db);
        for (fs_copy, second_returned) in [(after_first, false), (after_second, true)] {
            let crashed = after_power_loss(&fs_copy, mode, seed);
            for i in 0..20 {
                assert_eq!(get(&crashed, &format!("a{i:02}")).as_deref(), Some(&b"x"[..]), "{mode:?}: a{i:02}");
            }
            if second_returned {
                assert_eq!(get(&crashed, "b").as_deref(), Some(&b"y"[..]), "{mode:?}: b");
            }
            assert_eq!(get(&crashed, "c"), None, "{mode:?}: c was written after both copies");
        }
    }
}

#[test]
fn a_failed_sync_through_the_handle_makes_the_database_read_only_with_its_cause() {
    let fs = MemFs::new();
    let (db, gate) = open_gated(&fs, mem_options(&fs));
    db.put(b"a", b"1").unwrap();
    fs.set_faults(FaultPlan::once(FsOp::Sync, 1, FaultError::Eio).on_paths_containing(".log"));
    gate.0.arm();
    let syncer = spawn_sync(&db);
    gate.0.wait_inside("sync_wal");
    // The sync has failed; until sync_wal returns, writes go on (they reach the OS, D2).
    db.put(b"during", b"2").unwrap();
    gate.0.release();
    let e = syncer.join().unwrap().expect_err("the failed fdatasync is reported");
    assert!(e.is_io(), "{e}");
    assert_eq!(fs.faults_fired(), 1);
    fs.clear_faults();
    match db.put(b"b", b"3") {
        Err(Error::ReadOnly { cause }) => assert!(cause.is_io() && cause.to_string().contains("fdatasync"), "{cause}"),
        other => panic!("a write after the failed sync: {other:?}"),
    }
    let again = db.sync_wal().expect_err("a later sync_wal does not pretend the bytes are durable");
    assert!(again.is_read_only(), "{again}");
    assert_eq!(get(&db, "a").as_deref(), Some(&b"1"[..]), "reads go on");
    // The process dies: every acknowledged write reached the OS (D2).
    let killed = fs.deep_clone();
    drop(db);
    let db = Db::open(db_path(), mem_options(&killed)).unwrap();
    assert_eq!(get(&db, "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&db, "during").as_deref(), Some(&b"2"[..]));
    assert_eq!(get(&db, "b"), None);
}

/// Holds the first flush after `hold.arm()` in `on_flush_begin`, after its memtable switch.
struct HoldFlush {
    hold: Gate,
}

impl EventListener for HoldFlush {
    fn on_flush_begin(&self, _: &FlushJobInfo) {
        self.hold.pass();
    }
}

#[test]
fn a_memtable_switch_while_sync_wal_runs_keeps_its_writes_and_the_next_sync_covers_the_new_wal() {
    let fs = MemFs::new();
    let hold = Arc::new(HoldFlush { hold: Gate::default() });
    let opts = Options { listeners: vec![hold.clone()], ..mem_options(&fs) };
    let (db, gate) = open_gated(&fs, opts);
    for i in 0..10 {
        db.put(format!("k{i}").as_bytes(), b"old wal").unwrap();
    }
    gate.0.arm();
    let syncer = spawn_sync(&db);
    gate.0.wait_inside("sync_wal");
    db.put(b"during", b"old wal, after the sync began").unwrap();
    // A flush switches the memtable (and the WAL) and is then held before it writes its table, so the old WAL
    // stays live.
    hold.hold.arm();
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    hold.hold.wait_inside("the flush");
    let writer = db.clone();
    finishes("a put into the new WAL", move || writer.put(b"new", b"new wal").unwrap());
    gate.0.release();
    syncer.join().unwrap().expect("sync_wal across the switch");
    let switched = fs.deep_clone();
    db.sync_wal().expect("the next sync_wal");
    let synced_again = fs.deep_clone();
    hold.hold.release();
    flusher.join().unwrap().expect("flush");
    drop(db);

    for seed in 0..4 {
        let crashed = after_power_loss(&switched, PowerLoss::KeepRandomPages { keep_probability: 0.5 }, seed);
        for i in 0..10 {
            assert_eq!(get(&crashed, &format!("k{i}")).as_deref(), Some(&b"old wal"[..]), "seed {seed}: k{i}");
        }
        // A prefix of the acknowledged writes, whatever the power loss kept of the unsynced ones.
        if get(&crashed, "new").is_some() {
            assert!(get(&crashed, "during").is_some(), "seed {seed}: a hole before `new`");
        }
        let crashed = after_power_loss(&synced_again, PowerLoss::DropUnsynced, seed);
        for k in ["k0", "k9", "during", "new"] {
            assert!(get(&crashed, k).is_some(), "seed {seed}: {k} after the second sync_wal");
        }
    }
}
