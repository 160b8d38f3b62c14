//! A failed fsync is never acknowledged: the commit step answers `MISCONF`, the store turns read-only and
//! says why, later writes are refused, reads go on (issue 11; docs/durability.md S2).

use bytes::Bytes;
use shaledb::{Db, Options};
use shaledb_server::commands::lookup;
use shaledb_server::commit::Store;
use shaledb_server::resp::Reply;
use shaledb_server::store::ReadCtx;
use shaledb_server::Appendfsync;
use shaledb_vfs::{FaultError, FaultPlan, FsOp, MemFs};
use std::sync::Arc;

fn set(k: &str, v: &str) -> (&'static shaledb_server::commands::Spec, Vec<Bytes>) {
    let spec = lookup(b"set").expect("SET exists");
    (spec, vec![Bytes::from("set"), Bytes::from(k.to_string()), Bytes::from(v.to_string())])
}

fn get(store: &Store, k: &str) -> Reply {
    let spec = lookup(b"get").expect("GET exists");
    let shaledb_server::commands::Handler::Read(f) = spec.handler else { panic!("GET is a read") };
    f(
        &ReadCtx::new(&store.db(), store.keyspace(), 0, shaledb_server::store::now_ms()),
        &vec![Bytes::from("get"), Bytes::from(k.to_string())],
    )
}

#[test]
fn a_failed_fsync_is_never_acknowledged_and_the_server_turns_read_only() {
    let fs = MemFs::new();
    let db = Db::open("/db", Options { fs: Arc::new(fs.clone()), ..Options::default() }).expect("open");
    let store = Store::start(db, Appendfsync::Always);
    let ok = store.submit_and_wait(0, vec![set("a", "1")]).expect("answered");
    assert_eq!(ok, vec![Reply::Ok]);

    fs.set_faults(FaultPlan::once(FsOp::Sync, 1, FaultError::Eio));
    let failed = store.submit_and_wait(0, vec![set("b", "2"), set("c", "3")]).expect("answered");
    assert_eq!(failed.len(), 2);
    for r in &failed {
        match r {
            Reply::Error(e) => assert!(e.starts_with("MISCONF "), "{e}"),
            other => panic!("a write whose fsync failed was answered {other:?}"),
        }
    }
    let why = store.read_only_reason().expect("the store says why it refuses writes");
    assert!(why.contains("fsync") || why.contains("I/O") || why.contains("EIO") || why.contains("error"), "{why}");

    fs.clear_faults();
    let later = store.submit_and_wait(0, vec![set("d", "4")]).expect("answered");
    assert!(matches!(&later[0], Reply::Error(e) if e.starts_with("MISCONF ")), "{later:?}");
    assert_eq!(get(&store, "a"), Reply::Bulk(Bytes::from("1")), "reads go on");
    store.shutdown();

    // After a process kill and a restart, the acknowledged write is there; d never reached the WAL.
    let killed = fs.deep_clone();
    drop(store);
    let db = Db::open("/db", Options { fs: Arc::new(killed), ..Options::default() }).expect("reopen");
    let v = db.get(shaledb_server::keys::meta_key(0, b"a")).expect("read").expect("a survived");
    assert_eq!(&v[1..], b"1");
    assert_eq!(db.get(shaledb_server::keys::meta_key(0, b"d")).expect("read"), None);
}

/// A command of `words` for [`Store::submit_and_wait`].
fn command(words: &[&str]) -> (&'static shaledb_server::commands::Spec, Vec<Bytes>) {
    let spec = lookup(words[0].as_bytes()).expect("the command exists");
    (spec, words.iter().map(|w| Bytes::from(w.to_string())).collect())
}

/// Runs a read command on the store's engine as a connection would.
fn read(store: &Store, words: &[&str]) -> Reply {
    let (spec, args) = command(words);
    let shaledb_server::commands::Handler::Read(f) = spec.handler else { panic!("{} is a read", words[0]) };
    f(&ReadCtx::new(&store.db(), store.keyspace(), 0, shaledb_server::store::now_ms()), &args)
}

fn bulk_text(r: &Reply) -> String {
    match r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// The value after `name` in an XINFO map reply.
fn map_field(r: &Reply, name: &str) -> Reply {
    let Reply::Map(pairs) = r else { panic!("not a map: {r:?}") };
    pairs.iter().find(|(k, _)| bulk_text(k) == name).map(|(_, v)| v.clone()).expect("the field")
}

/// A consumer group's state (pending entries, their owners and delivery counts, consumers, last delivered id,
/// entries read) is engine records written in the batch of the command that changed it: after a kill -9
/// under `appendfsync always`, every acknowledged XREADGROUP, XACK, XCLAIM and XGROUP is there, as it was.
#[test]
fn consumer_group_state_survives_a_process_kill() {
    let fs = MemFs::new();
    let db = Db::open("/db", Options { fs: Arc::new(fs.clone()), ..Options::default() }).expect("open");
    let store = Store::start(db, Appendfsync::Always);
    let run =
        |store: &Store, words: &[&str]| store.submit_and_wait(0, vec![command(words)]).expect("answered").remove(0);
    for n in 1..=4 {
        let id = format!("{n}-0");
        assert_eq!(bulk_text(&run(&store, &["XADD", "s", &id, "f", "v"])), id);
    }
    assert_eq!(run(&store, &["XGROUP", "CREATE", "s", "g", "0"]), Reply::Ok);
    assert!(matches!(
        run(&store, &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">"]),
        Reply::Array(_)
    ));
    assert_eq!(run(&store, &["XACK", "s", "g", "1-0"]), Reply::Int(1));
    assert!(matches!(run(&store, &["XCLAIM", "s", "g", "bob", "0", "3-0", "RETRYCOUNT", "5"]), Reply::Array(_)));
    assert_eq!(run(&store, &["XGROUP", "CREATECONSUMER", "s", "g", "carol"]), Reply::Int(1));
    let before = (read(&store, &["XPENDING", "s", "g", "-", "+", "10"]), read(&store, &["XINFO", "GROUPS", "s"]));

    // kill -9: what reached the file system is all there is; no shutdown, no flush.
    let killed = fs.deep_clone();
    drop(store);
    let db = Db::open("/db", Options { fs: Arc::new(killed), ..Options::default() }).expect("reopen");
    let store = Store::start(db, Appendfsync::Always);
    let pending = read(&store, &["XPENDING", "s", "g", "-", "+", "10"]);
    let Reply::Array(rows) = &pending else { panic!("{pending:?}") };
    let owners: Vec<(String, String, Reply)> = rows
        .iter()
        .map(|r| {
            let Reply::Array(f) = r else { panic!("{r:?}") };
            (bulk_text(&f[0]), bulk_text(&f[1]), f[3].clone())
        })
        .collect();
    assert_eq!(
        owners,
        [("2-0".into(), "alice".into(), Reply::Int(1)), ("3-0".into(), "bob".into(), Reply::Int(5))],
        "the PEL after the kill"
    );
    let groups = read(&store, &["XINFO", "GROUPS", "s"]);
    let Reply::Array(gs) = &groups else { panic!("{groups:?}") };
    assert_eq!(map_field(&gs[0], "last-delivered-id"), Reply::Bulk(Bytes::from("3-0")));
    assert_eq!(map_field(&gs[0], "entries-read"), Reply::Int(3));
    assert_eq!(map_field(&gs[0], "consumers"), Reply::Int(3));
    assert_eq!(map_field(&gs[0], "pending"), Reply::Int(2));
    assert_eq!(before.1, groups, "XINFO GROUPS as before the kill");
    // The group goes on from where it was: the next `>` read is 4-0.
    let next = run(&store, &["XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">"]);
    let Reply::Array(streams) = &next else { panic!("{next:?}") };
    let Reply::Array(pair) = &streams[0] else { panic!() };
    let Reply::Array(entries) = &pair[1] else { panic!() };
    let Reply::Array(first) = &entries[0] else { panic!() };
    assert_eq!((entries.len(), bulk_text(&first[0])), (1, "4-0".to_string()));
    store.shutdown();
}
