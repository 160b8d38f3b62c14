//! A failed fsync is never acknowledged: the commit thread answers `MISCONF`, the store turns read-only and
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
        &ReadCtx::new(&store.db, 0, shaledb_server::store::now_ms()),
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
