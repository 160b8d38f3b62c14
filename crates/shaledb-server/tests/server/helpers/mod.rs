//! What the server tests share: starting a server, the two kinds of client (the `redis` crate, with the
//! shortcuts below, and the raw RESP client of [`wire`]), the reply and error texts several areas expect, and
//! a reference redis-server for the comparisons ([`redis_server`]).

pub mod bus_proxy;
pub mod cluster;
mod redis_server;
mod rng;
mod wire;

pub use redis_server::{redis_or_skip, RedisServer};
pub use rng::Rng;
pub use wire::{encode, raw, read_reply as wire_read, Client, Resp};

use redis::{FromRedisValue, Value};
use shaledb_server::{Config, RunningServer};
use std::time::Duration;
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------------------
// Servers

/// Starts a server on a new temporary directory and a free port of 127.0.0.1; `cfg` adjusts the
/// configuration first. Keep the `TempDir` alive as long as the server.
pub fn start_server(cfg: impl FnOnce(&mut Config)) -> (TempDir, RunningServer) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Config { dir: dir.path().join("db"), port: 0, bind: "127.0.0.1".into(), ..Config::default() };
    cfg(&mut c);
    let server = RunningServer::start(c).expect("start the server");
    (dir, server)
}

/// A server under `appendfsync everysec` (the keyspace tests), returned before its directory guard.
pub fn start_everysec() -> (RunningServer, TempDir) {
    let (dir, server) = start_server(|c| c.appendfsync = shaledb_server::Appendfsync::Everysec);
    (server, dir)
}

/// A `redis` crate connection with timeouts, so a hung server fails the test instead of hanging it.
pub fn connect(server: &RunningServer) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{}/", server.addr())).expect("client");
    let con = client.get_connection_with_timeout(Duration::from_secs(5)).expect("connect");
    con.set_read_timeout(Some(Duration::from_secs(20))).expect("read timeout");
    con.set_write_timeout(Some(Duration::from_secs(20))).expect("write timeout");
    con
}

// ---------------------------------------------------------------------------------------------------------
// Shortcuts on a `redis` crate connection

/// A command of `args` (the first is its name).
pub fn cmd(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

/// Runs a command that must succeed and converts its reply.
pub fn q<T: FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    match cmd(args).query(con) {
        Ok(v) => v,
        Err(e) => panic!("{args:?} failed: {e}"),
    }
}

/// Runs a command that must fail; returns the error line as the server sent it.
pub fn e(con: &mut redis::Connection, args: &[&str]) -> String {
    match cmd(args).query::<Value>(con) {
        Ok(v) => panic!("{args:?} answered {v:?}, expected an error"),
        Err(err) => format!("{} {}", err.code().unwrap_or("?"), err.detail().unwrap_or("")),
    }
}

/// An integer reply.
pub fn i(con: &mut redis::Connection, args: &[&str]) -> i64 {
    q(con, args)
}

/// A string reply, `None` for nil.
pub fn s(con: &mut redis::Connection, args: &[&str]) -> Option<String> {
    q(con, args)
}

/// An array of strings.
pub fn v(con: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    q(con, args)
}

// ---------------------------------------------------------------------------------------------------------
// Replies and error lines, as redis-server 7.0 writes them

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const SYNTAX: &str = "ERR syntax error";
pub const NOT_INT: &str = "ERR value is not an integer or out of range";

/// `+OK`.
pub fn ok() -> Resp {
    Resp::Simple("OK".into())
}

/// An error reply.
pub fn err(msg: &str) -> Resp {
    Resp::Error(msg.into())
}

/// A bulk string.
pub fn bulk(s: &str) -> Resp {
    Resp::Bulk(s.as_bytes().to_vec())
}
