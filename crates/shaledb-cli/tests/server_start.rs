//! `shaledb server` starts with the real binary: a start that fails creates nothing, Debian's stock redis.conf
//! (Redis 7.0) starts with one warning, and a config file naming a directive Redis does not have fails naming
//! its line.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const STOCK_REDIS_CONF: &str = "/etc/redis/redis.conf";

fn shaledb<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).args(args).stdin(Stdio::null()).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A server started in the background; its stderr lines arrive on `lines`. Killed when dropped.
struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shaledb"))
            .arg("server")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server { child, lines, seen: Vec::new() }
    }

    /// Reads stderr until the start line and returns the port it names.
    fn port(&mut self) -> u16 {
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
                panic!("no start line; stderr so far: {:?}", self.seen);
            });
            self.seen.push(line.clone());
            if let Some(rest) = line.strip_prefix("# shaledb server ") {
                let addr = rest.split_whitespace().nth(2).unwrap();
                return addr.rsplit(':').next().unwrap().parse().unwrap();
            }
        }
    }

    /// Sends SHUTDOWN, waits for the exit and returns every stderr line.
    fn stop(mut self, port: u16) -> Vec<String> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"SHUTDOWN\r\n").unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(10)) {
            self.seen.push(line);
        }
        std::mem::take(&mut self.seen)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ping(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn a_start_on_a_taken_port_creates_nothing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new");
    let (code, stderr) = shaledb(&["server", "--dir", p(&new), "--port", &port]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("Address already in use") && stderr.lines().count() == 1, "{stderr}");
    assert!(!new.exists(), "the failed start created {}", new.display());
    drop(taken);
}

#[test]
fn a_directive_redis_does_not_have_fails_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("redis.conf");
    std::fs::write(&conf, "# a comment\nport 0\nrdbcompression yes\nsave 900 1\nnot-a-directive 7\n").unwrap();
    let db = dir.path().join("db");
    let (code, stderr) = shaledb(&["server", "--config", p(&conf), "--dir", p(&db)]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("line 5") && stderr.contains("not-a-directive"), "{stderr}");
    assert!(!db.exists());
    // A bad value for a directive the server honours names its line too.
    std::fs::write(&conf, "port 0\nmaxclients none\n").unwrap();
    let (code, stderr) = shaledb(&["server", "--config", p(&conf), "--dir", p(&db)]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("line 2") && stderr.contains("maxclients"), "{stderr}");
    assert!(!db.exists());
}

/// Debian's redis.conf of Redis 7.0 as installed by `apt-get install redis-server` (CI installs it), with
/// the port and directory given on the command line as redis-server allows.
#[test]
fn the_stock_redis_conf_starts_with_one_warning() {
    if !Path::new(STOCK_REDIS_CONF).exists() {
        println!("SKIPPED: {STOCK_REDIS_CONF} is missing (apt-get install redis-server installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut server = Server::start(&["--config", STOCK_REDIS_CONF, "--port", "0", "--dir", p(&db)]);
    let port = server.port();
    assert_eq!(ping(port), "+PONG\r\n");
    let lines = server.stop(port);
    let warnings: Vec<&String> = lines.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{lines:#?}");
    // Directives of the stock file that change nothing here, all on the one line.
    for name in ["tcp-backlog", "daemonize yes", "rdbcompression", "lazyfree-lazy-eviction", "jemalloc-bg-thread"] {
        assert!(warnings[0].contains(name), "{name} not in {}", warnings[0]);
    }
    // Directives the server honours are not named in it.
    for name in [" port", " timeout", " protected-mode", " appendfsync"] {
        assert!(!warnings[0].contains(name), "{name} in {}", warnings[0]);
    }
}
