//! Reads that need the disk (issue 41): a read command runs on its connection's task reading only memory
//! (`ReadTier::BlockCacheOnly`); when that is not enough it runs again on tokio's blocking pool, counted in
//! `INFO stats` as `reads_offloaded`, while the other connections are answered.

use crate::helpers::*;
use shaledb_server::{Config, RunningServer};
use shaledb_vfs::{AlignedBuf, FileLock, Fs, PosixFs, RandomAccessFile, ReadHints, Result, WritableFile, WriteHints};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server without a block cache: every read of a table block needs the disk (`engine_options` may
/// change the engine further).
fn start_uncached(engine_options: Option<fn(&mut shaledb::Options)>) -> (tempfile::TempDir, RunningServer) {
    start_server(|c: &mut Config| {
        c.block_cache_size = Some(0);
        c.engine_options = engine_options;
    })
}

fn reads_offloaded(con: &mut redis::Connection) -> u64 {
    let info: String = q(con, &["INFO", "stats"]);
    let line = info.lines().find(|l| l.starts_with("reads_offloaded:")).expect("INFO stats has reads_offloaded");
    line["reads_offloaded:".len()..].trim().parse().unwrap()
}

#[test]
fn reads_that_need_the_disk_are_answered_from_the_blocking_pool_and_counted() {
    let (_dir, server) = start_uncached(None);
    let mut con = connect(&server);
    for i in 0..200 {
        let _: () = q(&mut con, &["SET", &format!("k{i}"), &format!("value-{i}")]);
    }
    let fields: Vec<String> = (0..50).flat_map(|i| [format!("f{i:02}"), format!("v{i}")]).collect();
    let mut hset = vec!["HSET", "h"];
    hset.extend(fields.iter().map(String::as_str));
    assert_eq!(i(&mut con, &hset), 50);
    let elems: Vec<String> = (0..100).map(|i| format!("e{i}")).collect();
    let mut rpush = vec!["RPUSH", "l"];
    rpush.extend(elems.iter().map(String::as_str));
    assert_eq!(i(&mut con, &rpush), 100);
    // SAVE's checkpoint flushes the memtables: from now on these keys are only in table files.
    let _: () = q(&mut con, &["SAVE"]);
    let before = reads_offloaded(&mut con);

    for i in (0..200).step_by(7) {
        assert_eq!(s(&mut con, &["GET", &format!("k{i}")]), Some(format!("value-{i}")));
    }
    let after_gets = reads_offloaded(&mut con);
    assert!(after_gets >= before + 29, "GETs of flushed keys offloaded {} times", after_gets - before);
    let all: Vec<String> = v(&mut con, &["HGETALL", "h"]);
    assert_eq!(all, fields);
    assert_eq!(v(&mut con, &["LRANGE", "l", "0", "-1"]), elems);
    let mget: Vec<Option<String>> = q(&mut con, &["MGET", "k1", "nope", "k2"]);
    assert_eq!(mget, [Some("value-1".to_string()), None, Some("value-2".to_string())]);
    assert!(reads_offloaded(&mut con) >= after_gets + 3, "HGETALL, LRANGE and MGET were not offloaded");

    // A key in the memtable is answered on the connection's task.
    let _: () = q(&mut con, &["SET", "fresh", "x"]);
    let n = reads_offloaded(&mut con);
    assert_eq!(s(&mut con, &["GET", "fresh"]), Some("x".into()));
    assert_eq!(reads_offloaded(&mut con), n);
    // Reads inside MULTI/EXEC run in the commit step, as before: never offloaded.
    let _: () = q(&mut con, &["MULTI"]);
    let _: () = q(&mut con, &["GET", "k3"]);
    let replies: Vec<Option<String>> = q(&mut con, &["EXEC"]);
    assert_eq!(replies, [Some("value-3".to_string())]);
    assert_eq!(reads_offloaded(&mut con), n);
    server.shutdown().unwrap();
}

/// The side effects of an offloaded read happen once: one `keymiss` event for a missing key whose lookup
/// needed the disk (a deletion in a table), and replies in order on a pipelining connection.
#[test]
fn an_offloaded_read_publishes_its_keymiss_once_and_keeps_the_pipeline_order() {
    let (_dir, server) = start_uncached(None);
    let mut con = connect(&server);
    let _: () = q(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "Em"]);
    let _: () = q(&mut con, &["SET", "gone", "1"]);
    let _: () = q(&mut con, &["SET", "kept", "2"]);
    assert_eq!(i(&mut con, &["DEL", "gone"]), 1);
    let _: () = q(&mut con, &["SAVE"]);

    let mut sub = Client::connect(server.addr());
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:keymiss"]);
    let before = reads_offloaded(&mut con);
    // Pipelined: an offloaded GET between two answered from memory.
    let mut c = Client::connect(server.addr());
    c.send(&["PING"]);
    c.send(&["GET", "gone"]);
    c.send(&["GET", "kept"]);
    c.send(&["GET", "absent"]);
    c.send(&["ECHO", "last"]);
    let replies: Vec<Resp> = (0..5).map(|_| c.read().expect("a reply")).collect();
    assert_eq!(replies, [Resp::Simple("PONG".into()), Resp::Nil, bulk("2"), Resp::Nil, bulk("last")]);
    assert!(reads_offloaded(&mut con) >= before + 2, "GET gone and GET kept needed the disk");
    // One event per missing key, in order: none twice (the run from memory dropped its own).
    for key in ["gone", "absent"] {
        let msg = sub.read().expect("a keymiss message").array();
        assert_eq!(msg.last().unwrap().text(), key);
    }
    c.send(&["GET", "absent2"]);
    c.read().expect("reply");
    let msg = sub.read().expect("a keymiss message").array();
    assert_eq!(msg.last().unwrap().text(), "absent2", "an extra keymiss was published");
    server.shutdown().unwrap();
}

// ---------------------------------------------------------------------------------------------------------
// A slow disk

/// While on, the next read of a table file by the server's threads (its runtime or its blocking pool, not
/// the engine's background threads) takes [`DELAY`], and turns it off.
static SLOW: AtomicBool = AtomicBool::new(false);
const DELAY: Duration = Duration::from_millis(2500);

/// The operating system's file system, with reads of table files slowed by [`SLOW`].
#[derive(Debug)]
struct SlowFs(PosixFs);

struct SlowFile(Arc<dyn RandomAccessFile>);

impl SlowFile {
    fn wait(&self) {
        let server_thread =
            std::thread::current().name().is_some_and(|n| n == "shaledb-server" || n == "shaledb-blocking");
        if server_thread && self.0.path().extension().is_some_and(|e| e == "sst") && SLOW.swap(false, Ordering::SeqCst)
        {
            std::thread::sleep(DELAY);
        }
    }
}

impl RandomAccessFile for SlowFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.wait();
        self.0.read_exact_at(buf, offset)
    }
    fn read_into(&self, offset: u64, len: usize, buf: &mut AlignedBuf) -> Result<()> {
        self.wait();
        self.0.read_into(offset, len, buf)
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Fs for SlowFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.create(path)
    }
    fn create_with(&self, path: &Path, hints: WriteHints) -> Result<Box<dyn WritableFile>> {
        self.0.create_with(path, hints)
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.open_append(path)
    }
    fn open(&self, path: &Path, hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(SlowFile(self.0.open(path, hints)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.hard_link(from, to)
    }
    fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.0.remove_dir(dir)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.0.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.0.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.0.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.0.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.0.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.0.lock(path)
    }
}

fn slow_fs(o: &mut shaledb::Options) {
    o.fs = Arc::new(SlowFs(PosixFs::new()));
}

/// While one connection's GET waits on a slow disk read, another connection's PING and GET (of a key in the
/// memtable) are answered at once; the slow GET's pipeline still answers in order.
#[test]
fn a_read_waiting_on_the_disk_does_not_hold_up_other_connections() {
    let (_dir, server) = start_uncached(Some(slow_fs));
    let mut con = connect(&server);
    let _: () = q(&mut con, &["SET", "cold", "on-disk"]);
    let _: () = q(&mut con, &["SAVE"]);
    let _: () = q(&mut con, &["SET", "hot", "in-memory"]);
    let before = reads_offloaded(&mut con);

    SLOW.store(true, Ordering::SeqCst);
    let mut slow = Client::connect(server.addr());
    let sent = Instant::now();
    slow.send(&["GET", "cold"]);
    slow.send(&["GET", "hot"]);
    // Give the server time to start the slow read.
    std::thread::sleep(Duration::from_millis(200));
    let mut other = Client::connect(server.addr());
    let t = Instant::now();
    assert_eq!(other.cmd(&["PING"]).text(), "PONG");
    assert_eq!(other.cmd(&["GET", "hot"]).text(), "in-memory");
    let took = t.elapsed();
    assert!(took < Duration::from_millis(1500), "another connection waited {took:?} behind the disk read");

    assert_eq!(slow.read().expect("reply").text(), "on-disk");
    assert_eq!(slow.read().expect("reply").text(), "in-memory");
    let slow_took = sent.elapsed();
    assert!(!SLOW.load(Ordering::SeqCst), "no table read was slowed");
    assert!(slow_took >= DELAY, "the GET did not wait on the slowed read ({slow_took:?})");
    assert!(reads_offloaded(&mut con) > before);
    server.shutdown().unwrap();
}

/// `--read-offload no`: reads that need the disk run on the connection's task, as before issue 41; the
/// answers are the same and nothing is counted.
#[test]
fn with_read_offload_off_disk_reads_stay_on_the_connection_task() {
    let (_dir, server) = start_server(|c: &mut Config| {
        c.block_cache_size = Some(0);
        c.read_offload = false;
    });
    let mut con = connect(&server);
    for i in 0..20 {
        let _: () = q(&mut con, &["SET", &format!("k{i}"), &format!("value-{i}")]);
    }
    let _: () = q(&mut con, &["SAVE"]);
    for i in 0..20 {
        assert_eq!(s(&mut con, &["GET", &format!("k{i}")]), Some(format!("value-{i}")));
    }
    assert_eq!(reads_offloaded(&mut con), 0);
    server.shutdown().unwrap();
}
