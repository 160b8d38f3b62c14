//! CONFIG GET/SET over every Redis 7.0 parameter, SAVE/BGSAVE/LASTSAVE checkpoints, and a start that fails
//! creating nothing.

use crate::helpers::{start_server, Client, Resp};
use shaledb_server::config::{parameter_names, redis};
use shaledb_server::{Config, RunningServer};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

fn config_get(c: &mut Client, pattern: &str) -> HashMap<String, String> {
    let flat = c.cmd(&["CONFIG", "GET", pattern]).array();
    flat.chunks(2).map(|p| (p[0].text(), p[1].text())).collect()
}

fn info_field(c: &mut Client, name: &str) -> String {
    let info = c.cmd(&["INFO", "persistence"]).text();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} not in {info}"))
        .to_string()
}

/// The checkpoint directories under `<dir>/checkpoints`, sorted.
fn checkpoints(db: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = match std::fs::read_dir(db.join("checkpoints")) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

#[test]
fn config_get_star_lists_every_parameter_and_set_stores_redis_ones() {
    let (_dir, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let all = config_get(&mut c, "*");
    // Every parameter of Redis 7.0 (192 names with aliases, as a 7.0 server lists them) and the hidden ones.
    assert!(all.len() >= 192, "{} parameters", all.len());
    for name in parameter_names().chain(redis::PARAMETERS.iter().map(|(n, _)| *n)) {
        // Redis's hidden parameters answer only to their exact name.
        if redis::HIDDEN.contains(&name) {
            assert!(!all.contains_key(name), "{name} (hidden) listed by CONFIG GET *");
            assert_eq!(config_get(&mut c, name).len(), 1, "{name} by its name");
            continue;
        }
        assert!(all.contains_key(name), "{name} missing from CONFIG GET *");
    }
    let want =
        [("save", ""), ("appendonly", "yes"), ("maxmemory", "0"), ("databases", "16"), ("cluster-enabled", "no")];
    for (name, value) in want {
        assert_eq!(all[name], value, "{name}");
    }
    assert_eq!(all["appendfsync"], "always");
    assert_eq!(all["tcp-backlog"], "511");
    // Patterns match aliases too, as Redis's do.
    let slave = config_get(&mut c, "slave-read-*");
    assert_eq!(slave.get("slave-read-only").map(String::as_str), Some("yes"));
    // A Redis parameter the server stores: set, read back, checked like Redis; immutable ones stay so.
    assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "20", "save", "900 1"]), Resp::Simple("OK".into()));
    assert_eq!(config_get(&mut c, "hz")["hz"], "20");
    assert_eq!(config_get(&mut c, "save")["save"], "900 1");
    match c.cmd(&["CONFIG", "SET", "activerehashing", "maybe"]) {
        Resp::Error(e) => assert!(e.contains("'activerehashing'") && e.contains("yes"), "{e}"),
        other => panic!("{other:?}"),
    }
    match c.cmd(&["CONFIG", "SET", "cluster-enabled", "yes"]) {
        Resp::Error(e) => assert!(e.contains("can't set immutable config"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn save_and_bgsave_write_checkpoints_that_open_as_databases() {
    let (dir, server) = start_server(|_| {});
    let db = dir.path().join("db");
    let mut c = Client::connect(server.addr());
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    for i in 0..100 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]), Resp::Simple("OK".into()));
    }
    assert_eq!(c.cmd(&["RPUSH", "list", "a", "b"]), Resp::Int(2));
    assert_eq!(c.cmd(&["SAVE"]), Resp::Simple("OK".into()));
    let first = checkpoints(&db);
    assert_eq!(first.len(), 1, "{first:?}");
    let Resp::Int(last) = c.cmd(&["LASTSAVE"]) else { panic!() };
    assert!(last as u64 >= started);
    assert_eq!(info_field(&mut c, "rdb_last_checkpoint_dir"), first[0].display().to_string());
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");

    // BGSAVE: a second, fresh directory (even within the same second), never the first one rewritten.
    assert_eq!(c.cmd(&["SET", "after", "first"]), Resp::Simple("OK".into()));
    assert_eq!(c.cmd(&["BGSAVE"]), Resp::Simple("Background saving started".into()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut c, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "BGSAVE did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let both = checkpoints(&db);
    assert_eq!(both.len(), 2, "{both:?}");
    assert!(both.contains(&first[0]));
    let second = both.iter().find(|p| **p != first[0]).unwrap().clone();
    assert_eq!(info_field(&mut c, "rdb_last_checkpoint_dir"), second.display().to_string());
    assert!(matches!(c.cmd(&["BGSAVE", "NOW"]), Resp::Error(_)));
    drop(c);
    server.shutdown().unwrap();

    // The live database opens again with its checkpoints inside it.
    let again =
        RunningServer::start(Config { dir: db.clone(), port: 0, bind: "127.0.0.1".into(), ..Config::default() })
            .unwrap();
    assert_eq!(Client::connect(again.addr()).cmd(&["DBSIZE"]), Resp::Int(102));
    again.shutdown().unwrap();

    // Each checkpoint is a database directory the server serves as it was.
    for (cp, has_after) in [(&first[0], false), (&second, true)] {
        let copy =
            RunningServer::start(Config { dir: cp.clone(), port: 0, bind: "127.0.0.1".into(), ..Config::default() })
                .unwrap();
        let mut c = Client::connect(copy.addr());
        assert_eq!(c.cmd(&["DBSIZE"]), Resp::Int(if has_after { 102 } else { 101 }));
        assert_eq!(c.cmd(&["GET", "k42"]), Resp::Bulk(b"v42".to_vec()));
        assert_eq!(c.cmd(&["LRANGE", "list", "0", "-1"]).array().len(), 2);
        drop(c);
        copy.shutdown().unwrap();
    }
}

#[test]
fn a_start_that_cannot_listen_creates_nothing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new").join("db");
    let cfg = Config { dir: new.clone(), port, bind: "127.0.0.1".into(), ..Config::default() };
    let e = RunningServer::start(cfg).err().expect("the port is taken");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(!dir.path().join("new").exists(), "a failed start left {}", dir.path().join("new").display());

    // An empty directory stays empty; a path that is a file is refused and left alone.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let cfg = Config { dir: empty.clone(), port, bind: "127.0.0.1".into(), ..Config::default() };
    assert!(RunningServer::start(cfg).is_err());
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    let file = dir.path().join("file");
    std::fs::write(&file, b"not a database").unwrap();
    let cfg = Config { dir: file.clone(), port: 0, bind: "127.0.0.1".into(), ..Config::default() };
    assert!(RunningServer::start(cfg).is_err());
    assert_eq!(std::fs::read(&file).unwrap(), b"not a database");
    drop(taken);
}
