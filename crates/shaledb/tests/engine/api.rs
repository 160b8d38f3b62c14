use crate::tiny_options;
use shaledb::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

#[test]
fn put_get_delete_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"2").unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    db.delete(b"a").unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"zz").unwrap(), None);
    let mut out = Vec::new();
    assert!(db.get_into(&ReadOptions::default(), b"b", &mut out).unwrap());
    assert_eq!(out, b"2");
    db.close().unwrap();
}

#[test]
fn batch_is_atomic_and_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"k", b"1").put(b"k", b"2").delete(b"x").put(b"y", b"3");
    db.write_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, &b).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"y").unwrap(), Some(b"3".to_vec()));
}

#[test]
fn second_open_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(err.is_busy(), "{err}");
    drop(db);
    Db::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn create_if_missing_false_and_error_if_exists() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let err = Db::open(&path, Options { create_if_missing: false, ..Options::default() }).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    Db::open(&path, Options::default()).unwrap().close().unwrap();
    let err = Db::open(&path, Options { error_if_exists: true, ..Options::default() }).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
}

#[test]
fn invalid_options_are_rejected_with_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let err = Db::open(dir.path(), Options { num_levels: 1, ..Options::default() }).unwrap_err();
    assert!(err.to_string().contains("num_levels"), "{err}");
}

#[test]
fn merge_without_operator_is_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(db.merge(b"k", b"v").unwrap_err().is_invalid_argument());
}

#[test]
fn uint64add_counters_across_flush_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { merge_operator: shaledb::merge::builtin("uint64add"), ..tiny_options() };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for round in 0..50u64 {
        for k in 0..20u64 {
            db.merge(format!("c{k}").as_bytes(), (k + 1).to_le_bytes()).unwrap();
        }
        if round % 10 == 9 {
            db.flush().unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    for k in 0..20u64 {
        let v = db.get(format!("c{k}").as_bytes()).unwrap().unwrap();
        assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), 50 * (k + 1));
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    let v = db.get(b"c3").unwrap().unwrap();
    assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), 200);
}

#[test]
fn snapshot_sees_old_values_across_flush_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i:05}").as_bytes(), b"old").unwrap();
    }
    let snap = db.snapshot();
    for i in 0..500u32 {
        if i % 2 == 0 {
            db.put(format!("k{i:05}").as_bytes(), b"new").unwrap();
        } else {
            db.delete(format!("k{i:05}").as_bytes()).unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    let ro = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
    for i in (0..500u32).step_by(7) {
        let key = format!("k{i:05}");
        assert_eq!(db.get_opt(&ro, key.as_bytes()).unwrap(), Some(b"old".to_vec()), "{key}");
        let now = db.get(key.as_bytes()).unwrap();
        assert_eq!(now, (i % 2 == 0).then(|| b"new".to_vec()), "{key}");
    }
    assert_eq!(db.iter_opt(&ro).count(), 500);
    assert_eq!(db.iter().count(), 250);
}

#[test]
fn iterator_bounds_and_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    for i in 0..300u32 {
        db.put(format!("k{i:03}").as_bytes(), format!("v{i}").as_bytes()).unwrap();
        if i == 150 {
            db.flush().unwrap();
        }
    }
    let ro = ReadOptions {
        iterate_lower_bound: Some(b"k100".to_vec()),
        iterate_upper_bound: Some(b"k200".to_vec()),
        ..ReadOptions::default()
    };
    let mut it = db.cursor_opt(&ro);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(n, 100);
    it.seek_to_last();
    assert_eq!(it.key(), b"k199");
    it.seek_for_prev(b"k150x");
    assert_eq!(it.key(), b"k150");
    it.prev();
    assert_eq!(it.key(), b"k149");
    it.seek(b"k0");
    assert_eq!(it.key(), b"k100");
    let back: Vec<_> = db.range(b"k010"..b"k013").rev().collect();
    let keys: Vec<Vec<u8>> = back.into_iter().map(|r| r.unwrap().0).collect();
    assert_eq!(keys, vec![b"k012".to_vec(), b"k011".to_vec(), b"k010".to_vec()]);
}

#[test]
fn reopen_after_drop_without_close_recovers_wal() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), tiny_options()).unwrap();
        for i in 0..2000u32 {
            db.put(format!("k{i:05}").as_bytes(), format!("v{i}").as_bytes()).unwrap();
        }
        db.delete(b"k00007").unwrap();
        // Dropped without close: memtable contents live only in the WAL.
    }
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    assert_eq!(db.get(b"k01999").unwrap(), Some(b"v1999".to_vec()));
    assert_eq!(db.get(b"k00007").unwrap(), None);
    assert_eq!(db.iter().count(), 1999);
}

#[test]
fn stats_property_has_rocksdb_layout() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}").as_bytes(), [b'x'; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    let s = db.property("shaledb.stats").unwrap();
    assert!(s.contains("** Compaction Stats"), "{s}");
    assert!(s.lines().any(|l| l.starts_with(" Sum")), "{s}");
    assert!(s.lines().any(|l| l.starts_with("Cumulative writes:")), "{s}");
    assert!(s.lines().any(|l| l.starts_with("Cumulative stall:")), "{s}");
    assert!(db.property("rocksdb.stats").is_some());
    let st = db.statistics();
    assert_eq!(st.keys_written, 3000);
    assert!(st.flush_bytes > 0);
    assert!(st.levels.iter().map(|l| l.files).sum::<u64>() > 0);
    // Flushing 3000 entries takes CPU time; it is measured on the flushing thread (`CompMergeCPU`).
    assert!(st.levels[0].compaction.cpu_micros > 0, "{:?}", st.levels[0].compaction);
    assert!(db.property("shaledb.num-files-at-level0").is_some());
    assert!(db.property("shaledb.no-such-thing").is_none());
}

#[test]
fn writes_after_close_of_clone_are_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    db.verify_checksums().unwrap();
}

#[test]
fn destroy_removes_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    Db::open(&path, Options::default()).unwrap().close().unwrap();
    shaledb::destroy(&path).unwrap();
    assert!(!path.join("CURRENT").exists());
}

#[test]
fn db_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
    assert_send_sync::<shaledb::Snapshot>();
}

/// A key with hundreds of versions between two others: forward iteration (which seeks past a run of
/// versions instead of stepping over each) yields the right version, or none, at every snapshot, in the
/// memtable and after a flush.
#[test]
fn forward_iteration_past_many_versions_of_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() }).unwrap();
    db.put(b"a", b"a").unwrap();
    db.put(b"z", b"z").unwrap();
    // (snapshot, what it must see of "h")
    let mut snaps = Vec::new();
    let mut latest = None;
    for i in 0..320u32 {
        if i % 50 == 49 {
            db.delete(b"h").unwrap();
            latest = None;
            snaps.push((db.snapshot(), None));
        } else {
            db.put(b"h", format!("v{i}").as_bytes()).unwrap();
            latest = Some(format!("v{i}").into_bytes());
            if i % 37 == 0 {
                snaps.push((db.snapshot(), latest.clone()));
            }
        }
    }
    let check = |stage: &str| {
        let mut cases: Vec<(ReadOptions, Option<Vec<u8>>)> = snaps
            .iter()
            .map(|(s, want)| (ReadOptions { snapshot: Some(s.clone()), ..Default::default() }, want.clone()))
            .collect();
        cases.push((ReadOptions::default(), latest.clone()));
        for (ro, want) in cases {
            let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter_opt(&ro).map(|r| r.unwrap()).collect();
            let mut expect = vec![(b"a".to_vec(), b"a".to_vec())];
            if let Some(v) = &want {
                expect.push((b"h".to_vec(), v.clone()));
            }
            expect.push((b"z".to_vec(), b"z".to_vec()));
            assert_eq!(got, expect, "{stage}: snapshot {:?}", ro.snapshot.as_ref().map(|s| s.sequence()));
            // Seeking to the key itself, and from before it.
            let mut it = db.cursor_opt(&ro);
            it.seek(b"h");
            let want_key: &[u8] = if want.is_some() { b"h" } else { b"z" };
            assert_eq!(it.key(), want_key, "{stage}");
        }
    };
    check("memtable");
    db.flush().unwrap();
    check("after a flush");
}

/// db_bench's compact0/compact1 through `compact_level`: every L0 file goes to the level below, then that
/// level's files go one further; the data is unchanged; an empty level reports `None`.
#[test]
fn compact_level_moves_one_level_down() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { disable_auto_compactions: true, ..tiny_options() };
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(db.compact_level(0).unwrap(), None);
    for round in 0..3u32 {
        for i in 0..300u32 {
            db.put(format!("k{i:05}"), format!("v{round}-{i}")).unwrap();
        }
        db.flush().unwrap();
    }
    // Tiny memtables: several flushes per round.
    let l0: usize = db.property("rocksdb.num-files-at-level0").unwrap().parse().unwrap();
    assert!(l0 >= 3, "{l0}");
    let (files, from, to) = db.compact_level(0).unwrap().expect("L0 held files");
    assert_eq!((files, from), (l0, 0));
    assert!(to >= 1);
    assert_eq!(db.property("rocksdb.num-files-at-level0").unwrap(), "0");
    assert_eq!(db.compact_level(0).unwrap(), None);
    // tiny_options keeps the default of 7 levels.
    if to + 1 < 7 {
        let (_, from1, to1) = db.compact_level(1).unwrap().expect("a level below L0 holds files");
        assert_eq!((from1, to1), (to, to + 1));
    }
    assert!(matches!(db.compact_level(2), Err(shaledb::Error::InvalidArgument(_))));
    for i in 0..300u32 {
        assert_eq!(db.get(format!("k{i:05}")).unwrap(), Some(format!("v2-{i}").into_bytes()));
    }
}

/// The memtable properties db_bench's `memstats` prints.
#[test]
fn memtable_properties() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let num = |p: &str| -> u64 { db.property(p).unwrap_or_else(|| panic!("{p}")).parse().unwrap() };
    assert_eq!(num("rocksdb.num-entries-active-mem-table"), 0);
    for i in 0..10u32 {
        db.put(i.to_be_bytes(), "v").unwrap();
    }
    assert_eq!(num("rocksdb.num-entries-active-mem-table"), 10);
    assert_eq!(num("rocksdb.num-entries-imm-mem-tables"), 0);
    assert_eq!(num("rocksdb.num-immutable-mem-table"), 0);
    assert!(num("rocksdb.cur-size-active-mem-table") > 0);
    assert_eq!(num("rocksdb.cur-size-all-mem-tables"), num("rocksdb.size-all-mem-tables"));
    db.flush().unwrap();
    assert_eq!(num("rocksdb.num-entries-active-mem-table"), 0);
}
