//! MIGRATE: shaledb to shaledb, shaledb to a real redis-server and back, with COPY, REPLACE, KEYS, AUTH and
//! AUTH2, a target that refuses (BUSYKEY, a wrong password), a closed port (IOERR), keys that expire, and the
//! argument errors, all on 127.0.0.1. redis-server missing: the tests that need it print why and return.

use crate::helpers::{connect, e, i, q, redis_or_skip, s, start_server, v, SYNTAX};
use redis::Value;

/// A port of 127.0.0.1 nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn migrate_between_shaledb_servers() {
    let (_d1, src) = start_server(|_| {});
    let (_d2, dst) = start_server(|_| {});
    let (mut a, mut b) = (connect(&src), connect(&dst));
    let port = dst.addr().port().to_string();
    q::<()>(&mut a, &["RPUSH", "l", "x", "y", "z"]);
    q::<()>(&mut a, &["SET", "s", "v", "PX", "100000"]);
    // One key, to db 3.
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "l", "3", "5000"]), Some("OK".into()));
    assert_eq!(i(&mut a, &["EXISTS", "l"]), 0);
    q::<()>(&mut b, &["SELECT", "3"]);
    assert_eq!(v(&mut b, &["LRANGE", "l", "0", "-1"]), ["x", "y", "z"]);
    // COPY keeps the key here; its TTL goes with it.
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "s", "3", "5000", "COPY"]), Some("OK".into()));
    assert_eq!(s(&mut a, &["GET", "s"]), Some("v".into()));
    assert_eq!(s(&mut b, &["GET", "s"]), Some("v".into()));
    let ttl = i(&mut b, &["PTTL", "s"]);
    assert!(ttl > 90_000 && ttl <= 100_000, "{ttl}");
    // The target has it now: BUSYKEY passed on, and nothing deleted here.
    assert_eq!(
        e(&mut a, &["MIGRATE", "127.0.0.1", &port, "s", "3", "5000"]),
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    assert_eq!(s(&mut a, &["GET", "s"]), Some("v".into()));
    // REPLACE overwrites it, and the key is gone here.
    q::<()>(&mut a, &["SET", "s", "new"]);
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "s", "3", "5000", "REPLACE"]), Some("OK".into()));
    assert_eq!(s(&mut b, &["GET", "s"]), Some("new".into()));
    assert_eq!(i(&mut b, &["PTTL", "s"]), -1);
    assert_eq!(i(&mut a, &["EXISTS", "s"]), 0);
    // KEYS: the missing ones are skipped; none at all is NOKEY.
    q::<()>(&mut a, &["HSET", "h", "f", "1"]);
    q::<()>(&mut a, &["SADD", "set", "m"]);
    assert_eq!(
        s(&mut a, &["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS", "h", "missing", "set"]),
        Some("OK".into())
    );
    q::<()>(&mut b, &["SELECT", "0"]);
    assert_eq!(s(&mut b, &["HGET", "h", "f"]), Some("1".into()));
    assert_eq!(v(&mut b, &["SMEMBERS", "set"]), ["m"]);
    assert_eq!(i(&mut a, &["EXISTS", "h", "set"]), 0);
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "nope", "0", "5000"]), Some("NOKEY".into()));
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS", "a", "b"]), Some("NOKEY".into()));
    // Several keys, two of them busy on the target: the error is passed on and only the acknowledged keys
    // are deleted here.
    q::<()>(&mut b, &["SELECT", "5"]);
    q::<()>(&mut b, &["MSET", "c", "_", "d", "_"]);
    q::<()>(&mut a, &["SELECT", "5"]);
    q::<()>(&mut a, &["MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]);
    assert_eq!(
        e(&mut a, &["MIGRATE", "127.0.0.1", &port, "", "5", "5000", "KEYS", "a", "b", "c", "d", "e"]),
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    let mut left: Vec<String> = q(&mut a, &["KEYS", "*"]);
    left.sort();
    assert_eq!(left, ["c", "d"]);
    assert_eq!(i(&mut b, &["DBSIZE"]), 5);
    assert_eq!(v(&mut b, &["MGET", "a", "b", "c", "d", "e"]), ["1", "2", "_", "_", "5"]);
    q::<()>(&mut a, &["SELECT", "0"]);
    q::<()>(&mut b, &["SELECT", "0"]);
    // A key that expired before MIGRATE is not there to send.
    q::<()>(&mut a, &["SET", "short", "v", "PX", "20"]);
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "short", "0", "5000"]), Some("NOKEY".into()));
    assert_eq!(i(&mut b, &["EXISTS", "short"]), 0);
    // A key about to expire arrives with its remaining TTL, and expires there.
    q::<()>(&mut a, &["SET", "soon", "v", "PX", "300"]);
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "soon", "0", "5000"]), Some("OK".into()));
    let ttl = i(&mut b, &["PTTL", "soon"]);
    assert!(ttl > 0 && ttl <= 300, "{ttl}");
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(i(&mut b, &["EXISTS", "soon"]), 0);
    // The source answers other clients while nothing is cached.
    let info: String = q(&mut a, &["INFO", "stats"]);
    assert!(info.contains("migrate_cached_sockets:0"), "{info}");
}

#[test]
fn migrate_deletion_is_durable() {
    let (dir, src) = start_server(|_| {});
    let (_d2, dst) = start_server(|_| {});
    let mut a = connect(&src);
    q::<()>(&mut a, &["SET", "k", "v"]);
    let port = dst.addr().port().to_string();
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "k", "0", "5000"]), Some("OK".into()));
    drop(a);
    let cfg_dir = dir.path().join("db");
    drop(src);
    let src = shaledb_server::RunningServer::start(shaledb_server::Config {
        dir: cfg_dir,
        port: 0,
        bind: "127.0.0.1".into(),
        ..shaledb_server::Config::default()
    })
    .expect("restart");
    let mut a = connect(&src);
    assert_eq!(i(&mut a, &["EXISTS", "k"]), 0);
    assert_eq!(s(&mut connect(&dst), &["GET", "k"]), Some("v".into()));
}

#[test]
fn migrate_with_auth_and_refusals() {
    let (_d1, src) = start_server(|_| {});
    let (_d2, dst) = start_server(|c| c.requirepass = Some("sekret".into()));
    let mut a = connect(&src);
    let port = dst.addr().port().to_string();
    q::<()>(&mut a, &["SET", "k", "v"]);
    // No password: the target's refusal, and the key stays.
    let err = e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k", "0", "5000"]);
    assert!(err.starts_with("ERR Target instance replied with error: NOAUTH"), "{err}");
    let err = e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k", "0", "5000", "AUTH", "wrong"]);
    assert!(err.starts_with("ERR Target instance replied with error: WRONGPASS"), "{err}");
    assert_eq!(i(&mut a, &["EXISTS", "k"]), 1);
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &port, "k", "0", "5000", "AUTH", "sekret"]), Some("OK".into()));
    q::<()>(&mut a, &["SET", "k2", "v2"]);
    assert_eq!(
        s(&mut a, &["MIGRATE", "127.0.0.1", &port, "k2", "0", "5000", "AUTH2", "default", "sekret"]),
        Some("OK".into())
    );
    assert_eq!(i(&mut a, &["EXISTS", "k", "k2"]), 0);
    // Target db out of range.
    q::<()>(&mut a, &["SET", "k3", "v"]);
    assert_eq!(
        e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k3", "99", "5000", "AUTH", "sekret"]),
        "ERR Target instance replied with error: ERR DB index is out of range"
    );
    // Nothing listens: IOERR (as redis-server 7.0.15, which finds the refusal at its first write), and the key
    // stays.
    let closed = closed_port().to_string();
    assert_eq!(
        e(&mut a, &["MIGRATE", "127.0.0.1", &closed, "k3", "0", "1000"]),
        "IOERR error or timeout writing to target instance"
    );
    assert_eq!(i(&mut a, &["EXISTS", "k3"]), 1);
    // A target that accepts and never answers: a read timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let sport = silent.local_addr().unwrap().port().to_string();
    assert_eq!(
        e(&mut a, &["MIGRATE", "127.0.0.1", &sport, "k3", "0", "200"]),
        "IOERR error or timeout reading to target instance"
    );
    assert_eq!(i(&mut a, &["EXISTS", "k3"]), 1);
    // To itself: Redis times out waiting on itself; nothing is sent and the key stays.
    let own = src.addr().port().to_string();
    assert_eq!(
        e(&mut a, &["MIGRATE", "127.0.0.1", &own, "k3", "0", "1000", "REPLACE"]),
        "IOERR error or timeout reading to target instance"
    );
    assert_eq!(s(&mut a, &["GET", "k3"]), Some("v".into()));
    // Argument errors, in Redis's order.
    assert_eq!(e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k3", "0", "5000", "bogus"]), SYNTAX);
    assert_eq!(e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k3", "0", "5000", "AUTH"]), SYNTAX);
    assert_eq!(
        e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k3", "0", "5000", "KEYS", "k3"]),
        "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
    );
    assert_eq!(e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k3", "x", "5000"]), crate::helpers::NOT_INT);
    assert_eq!(
        e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k3", "0"]),
        "ERR wrong number of arguments for 'migrate' command"
    );
    // Refused inside MULTI (the transaction runs where nothing may wait on the network).
    q::<()>(&mut a, &["MULTI"]);
    let err = e(&mut a, &["MIGRATE", "127.0.0.1", &port, "k3", "0", "5000"]);
    assert!(err.contains("not allowed inside MULTI"), "{err}");
    q::<()>(&mut a, &["DISCARD"]);
    // COMMAND GETKEYS knows both forms.
    assert_eq!(v(&mut a, &["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "k", "0", "5"]), ["k"]);
    assert_eq!(v(&mut a, &["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "b"]), ["a", "b"]);
}

#[test]
fn migrate_to_and_from_redis_server() {
    let Some(redis) = redis_or_skip() else { return };
    let (_d, server) = start_server(|_| {});
    let mut a = connect(&server);
    let mut r = redis::Client::open(format!("redis://{}/", redis.addr)).unwrap().get_connection().unwrap();
    let rport = redis.addr.port().to_string();
    let sport = server.addr().port().to_string();
    // shaledb to redis-server.
    q::<()>(&mut a, &["ZADD", "z", "1", "a", "2", "b"]);
    q::<()>(&mut a, &["SET", "t", "v", "EX", "100"]);
    assert_eq!(s(&mut a, &["MIGRATE", "127.0.0.1", &rport, "", "0", "5000", "KEYS", "z", "t"]), Some("OK".into()));
    assert_eq!(v(&mut r, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]), ["a", "1", "b", "2"]);
    let ttl = i(&mut r, &["TTL", "t"]);
    assert!(ttl > 90 && ttl <= 100, "{ttl}");
    assert_eq!(i(&mut a, &["EXISTS", "z", "t"]), 0);
    // redis-server refuses a key it has.
    q::<()>(&mut a, &["SET", "t", "again"]);
    let ours = e(&mut a, &["MIGRATE", "127.0.0.1", &rport, "t", "0", "5000"]);
    assert_eq!(ours, "ERR Target instance replied with error: BUSYKEY Target key name already exists.");
    // redis-server to shaledb, with REPLACE over a key shaledb has.
    q::<()>(&mut r, &["RPUSH", "rl", "1", "2"]);
    q::<()>(&mut a, &["SET", "rl", "old"]);
    assert_eq!(s(&mut r, &["MIGRATE", "127.0.0.1", &sport, "rl", "0", "5000", "REPLACE"]), Some("OK".into()));
    assert_eq!(v(&mut a, &["LRANGE", "rl", "0", "-1"]), ["1", "2"]);
    assert_eq!(i(&mut r, &["EXISTS", "rl"]), 0);
    // Both give the same replies for the same mistakes.
    let closed = closed_port().to_string();
    for args in [
        vec!["MIGRATE", "127.0.0.1", &closed, "t", "0", "500"],
        vec!["MIGRATE", "127.0.0.1", &rport, "t", "0", "500", "bogus"],
        vec!["MIGRATE", "127.0.0.1", &rport, "t", "0", "500", "KEYS", "t"],
        vec!["MIGRATE", "127.0.0.1", &rport, "t", "x", "500"],
    ] {
        q::<()>(&mut r, &["SET", "t", "x"]);
        assert_eq!(e(&mut a, &args), e(&mut r, &args), "{args:?}");
    }
    for args in [
        vec!["MIGRATE", "127.0.0.1", &rport, "none", "0", "500"],
        vec!["MIGRATE", "127.0.0.1", &rport, "", "0", "500", "KEYS", "none", "nada"],
    ] {
        assert_eq!(q::<Value>(&mut a, &args), q::<Value>(&mut r, &args), "{args:?}");
    }
}

/// A target that reads the whole request, then answers `+OK` to each of its `commands` commands only once the
/// test says so (the window in which another client writes a migrating key).
fn held_target(commands: usize) -> (u16, std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
        let mut buf = [0u8; 4096];
        // Read until the client has sent everything (a quiet 300 ms).
        while let Ok(n) = c.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        wait.recv_timeout(std::time::Duration::from_secs(20)).unwrap();
        c.write_all(&b"+OK\r\n".repeat(commands)).unwrap();
    });
    (port, go, t)
}

#[test]
fn a_key_written_during_migrate_is_kept_and_not_lost() {
    let (_d, src) = start_server(|_| {});
    let mut a = connect(&src);
    q::<()>(&mut a, &["SET", "k", "old"]);
    let (port, go, t) = held_target(2); // SELECT, RESTORE
    let addr = src.addr();
    let migrating = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
        let mut m = client.get_connection().unwrap();
        redis::cmd("MIGRATE").arg("127.0.0.1").arg(port).arg("k").arg(0).arg(10_000).query::<Value>(&mut m)
    });
    // While the target holds its replies, another client overwrites the key (acknowledged).
    std::thread::sleep(std::time::Duration::from_millis(500));
    q::<()>(&mut a, &["SET", "k", "new"]);
    go.send(()).unwrap();
    let r = migrating.join().unwrap();
    t.join().unwrap();
    let err = r.expect_err("MIGRATE must not report the key moved");
    assert!(err.to_string().contains("copied to the target, not moved"), "{err}");
    assert_eq!(s(&mut a, &["GET", "k"]).as_deref(), Some("new"));
    // Without a concurrent write the same target moves the key: it is deleted here.
    let (port, go, t) = held_target(2);
    go.send(()).unwrap();
    q::<()>(&mut a, &["MIGRATE", "127.0.0.1", &port.to_string(), "k", "0", "10000"]);
    t.join().unwrap();
    assert_eq!(i(&mut a, &["EXISTS", "k"]), 0);
}
