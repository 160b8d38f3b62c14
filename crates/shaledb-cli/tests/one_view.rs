//! One view of the data (issue 39): the key tools and the server agree on what a directory holds.
//!
//! A plain database (`shaledb put`, the engine API) is refused by `shaledb server` without a change to the
//! directory, naming `shaledb import-strings`; an imported one is served; a server's directory is shown and
//! written by `get`/`scan`/`put`/`delete` as Redis keys; a server database from before the layout marker is
//! adopted. The real binary throughout, the server on a loopback port it picks itself.

use shaledb::{Db, Options};
use shaledb_server::keys::{self, Coll, Type};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{p, shaledb};

/// Every file of a directory (recursively) with its bytes: a refusal must leave all of them as they were.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(snapshot(&e.path()));
        } else {
            out.insert(e.path(), std::fs::read(e.path()).unwrap());
        }
    }
    out
}

// ---- a small RESP2 client --------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream }
    }

    fn call(&mut self, args: &[&str]) -> Reply {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.writer.write_all(&out).unwrap();
        self.read()
    }

    fn read(&mut self) -> Reply {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Reply::Simple(rest.into()),
            "-" => Reply::Error(rest.into()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Bulk(None);
                }
                let mut buf = vec![0; n as usize + 2];
                self.reader.read_exact(&mut buf).unwrap();
                buf.truncate(n as usize);
                Reply::Bulk(Some(buf))
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                Reply::Array((0..n.max(0)).map(|_| self.read()).collect())
            }
            _ => panic!("unexpected reply line {line:?}"),
        }
    }
}

// ---- the server process ----------------------------------------------------------------------------------

/// A running `shaledb server` (killed when dropped, so a failing test leaves no process behind).
struct Server {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
}

impl Server {
    fn spawn(dir: &Path) -> (Child, Arc<Mutex<String>>, mpsc::Receiver<u16>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shaledb"))
            .args(["server", "--dir", p(dir), "--port", "0", "--bind", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shaledb server");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                // `# shaledb server 0.1.0 on 127.0.0.1:PORT (dir ..., appendfsync ...)`
                let port = line
                    .strip_prefix("# shaledb server ")
                    .and_then(|r| r.split(" on ").nth(1))
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|a| a.rsplit_once(':'))
                    .and_then(|(_, port)| port.parse().ok());
                if let Some(port) = port {
                    let _ = tx.send(port);
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        (child, log, rx)
    }

    fn start(dir: &Path) -> Server {
        let (mut child, log, rx) = Server::spawn(dir);
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(port) => Server { child, port, log },
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no startup line in 60 s; log:\n{}", log.lock().unwrap());
            }
        }
    }

    /// Starts a server that must refuse: its exit code and log.
    fn refused(dir: &Path) -> (Option<i32>, String) {
        let (mut child, log, rx) = Server::spawn(dir);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                // The reader thread may still hold the last lines: wait for the pipe to close.
                std::thread::sleep(Duration::from_millis(100));
                return (status.code(), log.lock().unwrap().clone());
            }
            if rx.try_recv().is_ok() || Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the server started instead of refusing; log:\n{}", log.lock().unwrap());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn client(&self) -> Client {
        Client::connect(self.port)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// SHUTDOWN, then waits for a clean exit.
    fn stop(mut self) {
        let mut c = self.client();
        c.writer.write_all(b"*1\r\n$8\r\nSHUTDOWN\r\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "server exit {status:?}; log:\n{}", self.log());
                return;
            }
            assert!(Instant::now() < deadline, "the server did not stop; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---- the tests -------------------------------------------------------------------------------------------

#[test]
fn the_server_refuses_a_plain_database_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("plain");
    assert_eq!(shaledb(&["put", "--create-if-missing", p(&db), "persist1", "hello"]).0, Some(0));
    assert_eq!(shaledb(&["put", p(&db), "persist2", "world"]).0, Some(0));
    let before = snapshot(&db);
    let (code, log) = Server::refused(&db);
    assert_eq!(code, Some(1), "{log}");
    let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one plain message:\n{log}");
    let e = errors[0];
    assert!(e.contains("holds keys written by `shaledb put` or the engine API, not a server keyspace"), "{e}");
    assert!(e.contains("(2 records)"), "{e}");
    assert!(e.contains(&format!("shaledb import-strings {} NEWDIR", db.display())), "{e}");
    assert!(e.contains("shaledb server --dir NEWDIR"), "{e}");
    assert_eq!(snapshot(&db), before, "the refusal created or changed files");
    // The plain database reads as before, in the engine's own terms.
    assert_eq!(shaledb(&["get", p(&db), "persist1"]).1, "hello\n");
}

#[test]
fn import_strings_makes_a_directory_the_server_serves() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dest, other) = (dir.path().join("plain"), dir.path().join("served"), dir.path().join("db2"));
    assert_eq!(shaledb(&["put", "--create-if-missing", p(&src), "persist1", "hello"]).0, Some(0));
    assert_eq!(shaledb(&["put", p(&src), "k2", "v2"]).0, Some(0));
    assert_eq!(shaledb(&["put", "--hex", p(&src), "0x00ff", "0x0102"]).0, Some(0));
    let before = snapshot(&src);
    let (code, out, err) = shaledb(&["import-strings", p(&src), p(&dest)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("imported 3 keys from "), "{out}");
    assert_eq!(snapshot(&src), before, "the source is read only");
    // A non-empty destination, and a source that is a server keyspace already, are refused.
    let (code, _, err) = shaledb(&["import-strings", p(&src), p(&dest)]);
    assert_eq!(code, Some(1));
    assert!(err.contains("is not empty"), "{err}");
    let (code, _, err) = shaledb(&["import-strings", p(&dest), p(&dir.path().join("x"))]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already holds a server keyspace"), "{err}");
    assert!(!dir.path().join("x").exists(), "a refused import creates nothing");
    // --db N: another Redis database.
    assert_eq!(shaledb(&["import-strings", "--db", "2", p(&src), p(&other)]).0, Some(0));

    let server = Server::start(&dest);
    let mut c = server.client();
    assert_eq!(c.call(&["GET", "persist1"]), bulk("hello"));
    assert_eq!(c.call(&["GET", "k2"]), bulk("v2"));
    assert_eq!(c.call(&["TYPE", "k2"]), Reply::Simple("string".into()));
    assert_eq!(c.call(&["DBSIZE"]), Reply::Int(3));
    match c.call(&["KEYS", "*"]) {
        Reply::Array(keys) => assert_eq!(keys.len(), 3, "{keys:?}"),
        other => panic!("{other:?}"),
    }
    assert!(!server.log().contains("adopted"), "{}", server.log());
    server.stop();

    let server = Server::start(&other);
    let mut c = server.client();
    assert_eq!(c.call(&["DBSIZE"]), Reply::Int(0));
    assert_eq!(c.call(&["SELECT", "2"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["GET", "persist1"]), bulk("hello"));
    server.stop();
}

#[test]
fn the_key_tools_show_and_write_a_servers_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("served");
    let server = Server::start(&db);
    let mut c = server.client();
    assert_eq!(c.call(&["SET", "persist1", "hello"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["SET", "gone", "x", "PX", "1"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["SET", "doomed", "x"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["HSET", "h", "f1", "a", "f2", "b", "f3", "c"]), Reply::Int(3));
    assert_eq!(c.call(&["RPUSH", "l", "x"]), Reply::Int(1));
    assert_eq!(c.call(&["SADD", "s", "m"]), Reply::Int(1));
    assert_eq!(c.call(&["SELECT", "1"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["SET", "one", "1"]), Reply::Simple("OK".into()));
    server.stop();
    std::thread::sleep(Duration::from_millis(5)); // `gone` has expired

    for extra in [&[][..], &["--read-only"][..]] {
        let mut args = vec!["get", p(&db), "persist1"];
        args.extend_from_slice(extra);
        let (code, out, err) = shaledb(&args);
        assert_eq!((code, out.as_str()), (Some(0), "hello\n"), "{args:?}: {err}");
    }
    let (code, _, err) = shaledb(&["get", p(&db), "h"]);
    assert_eq!(code, Some(1));
    assert_eq!(err, "error: h is a hash (3 fields); read it through shaledb server (HGETALL h)\n");
    let (code, _, err) = shaledb(&["get", p(&db), "l"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("l is a list (1 element)") && err.contains("LRANGE l 0 -1"), "{err}");
    let (code, _, err) = shaledb(&["get", p(&db), "gone"]);
    assert_eq!(code, Some(1), "an expired key is not found");
    assert!(err.contains("NotFound: gone"), "{err}");
    assert_eq!(shaledb(&["get", "--redis-db", "1", p(&db), "one"]).1, "1\n");
    assert_eq!(shaledb(&["get", p(&db), "one"]).0, Some(1), "database 0 has no `one`");

    let (code, out, err) = shaledb(&["scan", p(&db)]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "doomed ==> x\nh ==> (hash, 3 fields)\nl ==> (list, 1 element)\npersist1 ==> hello\ns ==> (set, 1 member)\n"
    );
    assert_eq!(
        shaledb(&["scan", "--reverse", "--limit", "2", p(&db)]).1,
        "s ==> (set, 1 member)\npersist1 ==> hello\n"
    );
    assert_eq!(
        shaledb(&["scan", "--from", "h", "--to", "m", p(&db)]).1,
        "h ==> (hash, 3 fields)\nl ==> (list, 1 element)\n"
    );
    assert_eq!(shaledb(&["scan", "--redis-db", "1", "--read-only", p(&db)]).1, "one ==> 1\n");
    let secondary = dir.path().join("secondary");
    let (code, out, err) = shaledb(&["get", "--secondary-path", p(&secondary), p(&db), "persist1"]);
    assert_eq!((code, out.as_str()), (Some(0), "hello\n"), "{err}");
    // --raw: the engine's records, the encoding and the layout marker included.
    let raw = shaledb(&["scan", "--raw", "--hex", p(&db)]).1;
    assert!(raw.contains("0x00007065727369737431 ==> 0x0168656C6C6F\n"), "{raw}");
    assert!(raw.ends_with("0xFF7368616C6564622D7365727665722D6C61796F7574 ==> 0x32\n"), "the marker: {raw}");
    // --column-family is for plain databases.
    let (code, _, err) = shaledb(&["get", "--column-family", "default", p(&db), "persist1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--column-family is for plain databases"), "{err}");

    // Writes: a string over a hash (SET), a new string, a DEL.
    assert_eq!(shaledb(&["put", p(&db), "newkey", "fresh"]).0, Some(0));
    assert_eq!(shaledb(&["put", p(&db), "h", "now a string"]).0, Some(0));
    assert_eq!(shaledb(&["delete", p(&db), "doomed"]).0, Some(0));
    assert_eq!(shaledb(&["put", "--redis-db", "3", p(&db), "three", "3"]).0, Some(0));
    let server = Server::start(&db);
    let mut c = server.client();
    assert_eq!(c.call(&["GET", "newkey"]), bulk("fresh"));
    assert_eq!(c.call(&["TYPE", "h"]), Reply::Simple("string".into()));
    assert_eq!(c.call(&["GET", "h"]), bulk("now a string"));
    assert_eq!(c.call(&["EXISTS", "doomed"]), Reply::Int(0));
    assert_eq!(c.call(&["GET", "persist1"]), bulk("hello"));
    assert_eq!(c.call(&["SELECT", "3"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["GET", "three"]), bulk("3"));
    server.stop();
}

#[test]
fn a_server_database_from_before_the_marker_is_adopted_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old");
    // The records an older server wrote: its encoding, no layout marker.
    let db = Db::open(&path, Options { create_if_missing: true, ..Options::default() }).unwrap();
    db.put(keys::meta_key(0, b"s"), keys::encode_string(b"old value", None)).unwrap();
    let mut h = Coll::new(Type::Hash, 5);
    h.size = 1;
    db.put(keys::meta_key(0, b"h"), h.encode()).unwrap();
    db.put(keys::member_key(0, 5, keys::SUB_MEMBER, b"f"), b"v").unwrap();
    db.put(keys::registry_key(0, 5), b"h").unwrap();
    db.close().unwrap();
    assert_eq!(db_get_raw(&path, shaledb_server::layout::MARKER_KEY), None);

    // The key tools see its Redis keys before the server ever marks it.
    assert_eq!(shaledb(&["get", "--read-only", p(&path), "s"]).1, "old value\n");

    let server = Server::start(&path);
    let log = server.log();
    assert_eq!(log.matches("adopted").count(), 1, "{log}");
    assert!(log.contains("holds a server keyspace written before the layout marker (4 records)"), "{log}");
    let mut c = server.client();
    assert_eq!(c.call(&["GET", "s"]), bulk("old value"));
    assert_eq!(c.call(&["HGETALL", "h"]), Reply::Array(vec![bulk("f"), bulk("v")]));
    assert_eq!(c.call(&["DBSIZE"]), Reply::Int(2));
    server.stop();
    assert_eq!(db_get_raw(&path, shaledb_server::layout::MARKER_KEY), Some(shaledb_server::layout::marker_value()));

    let server = Server::start(&path);
    assert!(!server.log().contains("adopted"), "said once: {}", server.log());
    server.stop();
}

#[test]
fn a_new_server_directory_is_marked_even_with_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new");
    let server = Server::start(&path);
    let mut c = server.client();
    // No command shows the marker, and FLUSHALL does not delete it.
    assert_eq!(c.call(&["DBSIZE"]), Reply::Int(0));
    assert_eq!(c.call(&["KEYS", "*"]), Reply::Array(vec![]));
    assert_eq!(c.call(&["RANDOMKEY"]), Reply::Bulk(None));
    assert_eq!(c.call(&["SCAN", "0"]), Reply::Array(vec![bulk("0"), Reply::Array(vec![])]));
    assert_eq!(c.call(&["SET", "a", "1"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["FLUSHALL"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&["DBSIZE"]), Reply::Int(0));
    server.stop();
    assert_eq!(db_get_raw(&path, shaledb_server::layout::MARKER_KEY), Some(shaledb_server::layout::marker_value()));
    assert_eq!(shaledb(&["scan", p(&path)]), (Some(0), String::new(), String::new()));
    // An empty server keyspace is still a server's: `put` writes a Redis string, not an engine record.
    assert_eq!(shaledb(&["put", p(&path), "k", "v"]).0, Some(0));
    assert_eq!(db_get_raw(&path, &keys::meta_key(0, b"k")), Some(keys::encode_string(b"v", None)));
    assert_eq!(shaledb(&["get", "--raw", p(&path), "k"]).0, Some(1), "--raw: no engine record `k`");
}

/// An engine record read with a read-only open.
fn db_get_raw(path: &Path, key: &[u8]) -> Option<Vec<u8>> {
    Db::open_read_only(path, Options::default()).unwrap().get(key).unwrap()
}
