//! Integration tests: a server on a free port, driven by the `redis` crate.
//!
//! (Minimal harness of the keyspace helper; the lead merges it with the core helper's.)

mod keyspace;

use shaledb_server::{Appendfsync, Config, RunningServer};
use std::time::Duration;

/// A server on a fresh directory and a free port; the directory lives as long as the returned guard.
pub fn start_server() -> (RunningServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config =
        Config { dir: dir.path().join("db"), port: 0, appendfsync: Appendfsync::Everysec, ..Config::default() };
    (RunningServer::start(config).unwrap(), dir)
}

/// A client connection with timeouts, so a hung server fails the test instead of hanging it.
pub fn connect(server: &RunningServer) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{}/", server.addr())).unwrap();
    let con = client.get_connection_with_timeout(Duration::from_secs(5)).unwrap();
    con.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    con.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    con
}
