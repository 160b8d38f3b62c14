//! Limits hold end to end (docs/durability.md, "Limits"): what the engine acknowledges it can always flush,
//! compact and recover.

use shaledb::options::limits::MAX_KEY_VALUE_BYTES;
use shaledb::{CompressionType, Db, Options, WalRecoveryMode, WriteBatch};
use shaledb_testkit::MemFs;
use std::sync::Arc;

fn options(fs: &MemFs) -> Options {
    Options {
        // No compression: these tests hold a few values of 50-128 MiB; spare the compressor's copies.
        compression: CompressionType::None,
        merge_operator: shaledb::merge::builtin("stringappend"),
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

/// Issue 9: a put of a value over the table writer's 128 MiB entry limit was acknowledged, then every flush
/// failed and no recovery mode could open the database. Now it is refused before anything is written, in
/// `put`, `merge` and a batch; an entry exactly at the limit is stored, flushed and recovered.
#[test]
fn entry_over_the_table_limit_is_refused_before_acknowledging() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let key = b"big";
    let mut value = vec![b'x'; MAX_KEY_VALUE_BYTES - key.len() + 1];
    let e = db.put(key, &value).unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("limit"), "{e}");
    assert!(db.merge(key, &value).unwrap_err().is_invalid_argument());
    let mut batch = WriteBatch::new();
    batch.put(b"small", b"v");
    batch.put(key, &value);
    assert!(db.write(&batch).unwrap_err().is_invalid_argument());
    // Nothing of the refused batch was applied, and the database still takes writes.
    assert_eq!(db.get(b"small").unwrap(), None);
    value.pop();
    db.put(key, &value).unwrap();
    db.put(b"after", b"a").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    for mode in [WalRecoveryMode::PointInTime, WalRecoveryMode::AbsoluteConsistency] {
        let db = Db::open("/db", Options { wal_recovery_mode: mode, ..options(&fs) }).unwrap();
        assert_eq!(db.get(key).unwrap().map(|v| v.len()), Some(value.len()));
        assert_eq!(db.get(b"after").unwrap(), Some(b"a".to_vec()));
        db.close().unwrap();
    }
}

/// Issue 9: three 50 MiB `stringappend` merges made a flush or compaction write a 150 MiB entry, fail, and
/// turn the database read-only. A merge result over the limit now stays as operands; reads still combine
/// them into the right value.
#[test]
fn merge_result_over_the_table_limit_stays_operands() {
    const OP: usize = 50 << 20;
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    db.put(b"a", b"before").unwrap();
    for c in [b'1', b'2', b'3'] {
        db.merge(b"k", vec![c; OP]).unwrap();
    }
    let check = |db: &Db| {
        let v = db.get(b"k").unwrap().expect("merged value");
        assert_eq!(v.len(), 3 * OP + 2);
        for (i, c) in [b'1', b'2', b'3'].into_iter().enumerate() {
            let at = i * (OP + 1);
            assert!(v[at..at + OP].iter().all(|&b| b == c), "operand {i} wrong");
            if i < 2 {
                assert_eq!(v[at + OP], b',');
            }
        }
    };
    check(&db);
    // Flush (operands not at the bottom: partial merge), then a full compaction (bottommost: full merge).
    db.flush().unwrap();
    check(&db);
    db.compact_range(None, None).unwrap();
    check(&db);
    db.put(b"b", b"still writable").unwrap();
    assert_eq!(db.property("shaledb.background-errors").as_deref(), Some("0"));
    assert_eq!(db.property("shaledb.background-error").as_deref(), Some(""));
    db.close().unwrap();
    let db = Db::open("/db", options(&fs)).unwrap();
    check(&db);
    assert_eq!(db.get(b"b").unwrap(), Some(b"still writable".to_vec()));
    db.close().unwrap();
}
