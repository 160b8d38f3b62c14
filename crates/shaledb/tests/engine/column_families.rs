//! Column families (issue 16): several LSM trees in one database, one WAL, atomic batches across them, each
//! family flushed, compacted, recovered and dropped on its own (docs/format/manifest.md, docs/durability.md D28).

use crate::tiny_options;
use shaledb::{
    merge, ColumnFamilyDescriptor, CompactionOptionsFifo, CompactionStyle, CompressionType, Db, Error, Options,
    ReadOptions, WriteBatch,
};
use std::collections::BTreeMap;
use std::path::Path;

fn keys(it: shaledb::Iter) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.collect::<Result<Vec<_>, _>>().unwrap()
}

fn files_with(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v
}

#[test]
fn families_are_created_listed_and_hold_their_own_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.create_column_family("a", Options::default()).unwrap();
    let b = db.create_column_family("b", Options::default()).unwrap();
    assert_eq!((a.id(), b.id(), a.name()), (1, 2, "a"));
    db.put("k", "default").unwrap();
    db.put_cf(&a, "k", "in a").unwrap();
    db.put_cf(&b, "k2", "in b").unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"default"[..]));
    assert_eq!(db.get_cf(&a, "k").unwrap().as_deref(), Some(&b"in a"[..]));
    assert_eq!(db.get_cf(&b, "k").unwrap(), None);
    assert_eq!(keys(db.iter_cf(&b)), [(b"k2".to_vec(), b"in b".to_vec())]);
    assert_eq!(keys(db.iter()), [(b"k".to_vec(), b"default".to_vec())]);
    db.delete_cf(&a, "k").unwrap();
    assert_eq!(db.get_cf(&a, "k").unwrap(), None);
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"default"[..]), "a deletion stays in its family");
    let names: Vec<String> = db.column_families().iter().map(|c| c.name().to_string()).collect();
    assert_eq!(names, ["default", "a", "b"]);
    assert_eq!(db.default_column_family().id(), 0);
    db.close().unwrap();
    assert_eq!(Db::list_column_families(dir.path(), Options::default()).unwrap(), ["default", "a", "b"]);
}

#[test]
fn bad_requests_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.create_column_family("a", Options::default()).unwrap();
    let invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(db.create_column_family("a", Options::default()).map(drop)), "a live name");
    assert!(invalid(db.create_column_family("default", Options::default()).map(drop)));
    assert!(invalid(db.create_column_family("", Options::default()).map(drop)));
    assert!(invalid(db.create_column_family(&"n".repeat(256), Options::default()).map(drop)));
    let levels = Options { num_levels: 4, ..Options::default() };
    assert!(invalid(db.create_column_family("l", levels).map(drop)), "num_levels differs from the database's");
    assert!(invalid(db.drop_column_family(&db.default_column_family())));
    assert!(invalid(db.merge_cf(&a, "k", "x")), "no merge operator in the family");
    let mut batch = WriteBatch::new();
    batch.put("x", "1").merge_cf(&a, "k", "x");
    assert!(invalid(db.write(&batch)), "a batch merging in a family without an operator");
    assert_eq!(db.get("x").unwrap(), None, "nothing of a refused batch is applied");
    db.drop_column_family(&a).unwrap();
    assert!(invalid(db.drop_column_family(&a)), "dropped twice");
    assert!(invalid(db.put_cf(&a, "k", "v")));
    let mut batch = WriteBatch::new();
    batch.put("y", "1").put_cf(&a, "k", "v");
    assert!(invalid(db.write(&batch)), "a batch naming a dropped family");
    assert_eq!(db.get("y").unwrap(), None);
    drop(db);
    let twice = vec![
        ColumnFamilyDescriptor::new("x", Options::default()),
        ColumnFamilyDescriptor::new("x", Options::default()),
    ];
    assert!(matches!(
        Db::open_with_column_families(dir.path(), Options::default(), twice),
        Err(Error::InvalidArgument(_))
    ));
    let default = vec![ColumnFamilyDescriptor::new("default", Options::default())];
    assert!(matches!(
        Db::open_with_column_families(dir.path(), Options::default(), default),
        Err(Error::InvalidArgument(_))
    ));
}

/// One batch writing to three families is applied all or nothing, also across a crash: the families share
/// one WAL record.
#[test]
fn a_batch_across_families_is_atomic_and_recovered_from_the_shared_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.create_column_family("a", Options::default()).unwrap();
    let b = db.create_column_family("b", Options::default()).unwrap();
    let mut batch = WriteBatch::new();
    batch.put("from", "0").put_cf(&a, "to", "100").delete_range_cf(&b, "a", "z").put_cf(&b, "zz", "kept");
    db.put_cf(&b, "m", "covered by the range deletion").unwrap();
    db.write(&batch).unwrap();
    // Dropped without close: no flush, the WAL holds everything.
    drop(db);
    assert_eq!(files_with(dir.path(), ".sst"), Vec::<String>::new());
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let (a, b) = (db.column_family("a").unwrap(), db.column_family("b").unwrap());
    assert_eq!(db.get("from").unwrap().as_deref(), Some(&b"0"[..]));
    assert_eq!(db.get_cf(&a, "to").unwrap().as_deref(), Some(&b"100"[..]));
    assert_eq!(keys(db.iter_cf(&b)), [(b"zz".to_vec(), b"kept".to_vec())]);
}

/// Flushing one family leaves the others in memory; recovery replays each from its own log number, so a
/// family flushed after a WAL switch never sees its old records twice and an unflushed one loses nothing.
#[test]
fn recovery_with_some_families_flushed_and_some_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.create_column_family("a", Options::default()).unwrap();
    let b = db.create_column_family("b", Options::default()).unwrap();
    for i in 0..100u32 {
        db.put_cf(&a, i.to_be_bytes(), "a1").unwrap();
        db.put_cf(&b, i.to_be_bytes(), "b1").unwrap();
    }
    db.flush_cf(&a).unwrap();
    assert_eq!(files_with(dir.path(), ".sst").len(), 1, "only a was flushed");
    for i in 0..50u32 {
        // Overwritten after a's flush: the newer value must win after recovery.
        db.put_cf(&a, i.to_be_bytes(), "a2").unwrap();
        db.delete_cf(&b, i.to_be_bytes()).unwrap();
    }
    db.put("d", "default").unwrap();
    drop(db);
    for round in 0..2 {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let (a, b) = (db.column_family("a").unwrap(), db.column_family("b").unwrap());
        for i in 0..100u32 {
            let want_a: &[u8] = if i < 50 { b"a2" } else { b"a1" };
            assert_eq!(db.get_cf(&a, i.to_be_bytes()).unwrap().as_deref(), Some(want_a), "round {round} key {i}");
            let want_b = (i >= 50).then_some(&b"b1"[..]);
            assert_eq!(db.get_cf(&b, i.to_be_bytes()).unwrap().as_deref(), want_b, "round {round} key {i}");
        }
        assert_eq!(db.iter_cf(&a).count(), 100);
        assert_eq!(db.iter_cf(&b).count(), 50);
        assert_eq!(db.get("d").unwrap().as_deref(), Some(&b"default"[..]));
        drop(db);
    }
}

/// An idle family does not keep old WALs alive: WALs are deleted once below every family's log number.
#[test]
fn an_idle_family_does_not_pin_old_wals() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    let idle = db.create_column_family("idle", tiny_options()).unwrap();
    let busy = db.create_column_family("busy", tiny_options()).unwrap();
    db.put_cf(&idle, "once", "written before the busy family's writes").unwrap();
    db.flush_cf(&idle).unwrap();
    for i in 0..4000u32 {
        db.put_cf(&busy, i.to_be_bytes(), [7u8; 100]).unwrap();
    }
    db.wait_for_compaction().unwrap();
    db.flush().unwrap();
    let wals = files_with(dir.path(), ".log");
    assert!(wals.len() <= 2, "old WALs kept alive: {wals:?}");
    db.close().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    let idle = db.column_family("idle").unwrap();
    assert!(db.get_cf(&idle, "once").unwrap().is_some());
    assert_eq!(db.iter_cf(&db.column_family("busy").unwrap()).count(), 4000);
}

/// A dropped family's tables are deleted once no handle or iterator holds them; its id is never reused; its
/// records still in the WAL are skipped at recovery.
#[test]
fn dropping_a_family_removes_its_files_and_its_wal_records_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let gone = db.create_column_family("gone", Options::default()).unwrap();
    for i in 0..100u32 {
        db.put_cf(&gone, i.to_be_bytes(), "flushed").unwrap();
    }
    db.flush_cf(&gone).unwrap();
    db.put_cf(&gone, "unflushed", "only in the WAL").unwrap();
    db.put("kept", "default").unwrap();
    let tables = files_with(dir.path(), ".sst");
    assert_eq!(tables.len(), 1);
    let it = db.iter_cf(&gone);
    db.drop_column_family(&gone).unwrap();
    assert!(db.column_family("gone").is_none());
    // The handle and the iterator still read what the family held.
    assert_eq!(db.get_cf(&gone, 5u32.to_be_bytes()).unwrap().as_deref(), Some(&b"flushed"[..]));
    assert_eq!(it.count(), 101);
    drop(gone);
    let again = db.create_column_family("gone", Options::default()).unwrap();
    assert_eq!(again.id(), 2, "a dropped family's id is never reused");
    assert_eq!(db.iter_cf(&again).count(), 0, "a new family of the same name starts empty");
    // Obsolete files go at the next background pass (a flush wakes one).
    db.put("wake", "1").unwrap();
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    let left: Vec<String> = files_with(dir.path(), ".sst").into_iter().filter(|t| tables.contains(t)).collect();
    assert!(left.is_empty(), "the dropped family's tables are still there: {left:?}");
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(Db::list_column_families(dir.path(), Options::default()).unwrap(), ["default", "gone"]);
    assert_eq!(db.iter_cf(&db.column_family("gone").unwrap()).count(), 0, "the old family's records were skipped");
    assert_eq!(db.get("kept").unwrap().as_deref(), Some(&b"default"[..]));
}

/// Each family has its own options: a merge operator only in one, FIFO compaction in one next to the default
/// family's leveled compaction (issue 17: the compaction style is chosen per family).
#[test]
fn each_family_has_its_own_options_merge_operator_and_compaction_style() {
    let dir = tempfile::tempdir().unwrap();
    let counters = Options { merge_operator: merge::builtin("uint64add"), ..Options::default() };
    let fifo = Options {
        compaction_style: CompactionStyle::Fifo,
        compaction_options_fifo: CompactionOptionsFifo { max_table_files_size: 64 << 10, ..Default::default() },
        write_buffer_size: 16 << 10,
        compression: CompressionType::None,
        ..Options::default()
    };
    let descs = vec![
        ColumnFamilyDescriptor::new("counters", counters.clone()),
        ColumnFamilyDescriptor::new("events", fifo.clone()),
    ];
    let db = Db::open_with_column_families(dir.path(), Options::default(), descs).unwrap();
    let (c, e) = (db.column_family("counters").unwrap(), db.column_family("events").unwrap());
    assert!(c.options().merge_operator.is_some() && db.options().merge_operator.is_none());
    for _ in 0..10 {
        db.merge_cf(&c, "hits", 1u64.to_le_bytes()).unwrap();
    }
    assert!(db.merge("hits", 1u64.to_le_bytes()).is_err());
    for i in 0..3000u32 {
        db.put_cf(&e, i.to_be_bytes(), [1u8; 100]).unwrap();
        db.put(i.to_be_bytes(), [2u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    // FIFO dropped the oldest events to stay near its size limit; the default family kept everything.
    let events = db.iter_cf(&e).count();
    assert!(events < 3000 && events > 0, "FIFO kept {events} of 3000");
    assert_eq!(db.iter().count(), 3000);
    assert_eq!(db.get_cf(&c, "hits").unwrap(), Some(10u64.to_le_bytes().to_vec()));
    db.close().unwrap();
    let descs = vec![ColumnFamilyDescriptor::new("counters", counters), ColumnFamilyDescriptor::new("events", fifo)];
    let db = Db::open_with_column_families(dir.path(), Options::default(), descs).unwrap();
    let c = db.column_family("counters").unwrap();
    db.merge_cf(&c, "hits", 5u64.to_le_bytes()).unwrap();
    assert_eq!(db.get_cf(&c, "hits").unwrap(), Some(15u64.to_le_bytes().to_vec()));
}

/// Snapshots are database-wide: one snapshot reads every family as of the same write.
#[test]
fn a_snapshot_covers_every_family() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.create_column_family("a", Options::default()).unwrap();
    let mut batch = WriteBatch::new();
    batch.put("x", "1").put_cf(&a, "x", "1");
    db.write(&batch).unwrap();
    let snap = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    let mut batch = WriteBatch::new();
    batch.put("x", "2").put_cf(&a, "x", "2");
    db.write(&batch).unwrap();
    db.flush().unwrap();
    assert_eq!(db.get_opt(&snap, "x").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get_cf_opt(&snap, &a, "x").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(keys(db.iter_cf_opt(&snap, &a)), [(b"x".to_vec(), b"1".to_vec())]);
    assert_eq!(db.get_cf(&a, "x").unwrap().as_deref(), Some(&b"2"[..]));
    db.compact_range_cf(&a, None, None).unwrap();
    assert_eq!(db.get_cf_opt(&snap, &a, "x").unwrap().as_deref(), Some(&b"1"[..]), "kept by compaction");
}

/// The model oracle per family: random puts, deletes, range deletes and batches over three families with
/// small memtables (many flushes and compactions), a family dropped and created mid-run, and reopens after a
/// clean close or a drop without close; every family matches its model after each.
#[test]
fn families_match_their_models_across_flushes_compactions_drops_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let names = ["default", "a", "b"];
    let mut models: BTreeMap<&str, BTreeMap<Vec<u8>, Vec<u8>>> = names.iter().map(|n| (*n, BTreeMap::new())).collect();
    let mut db = Db::open(dir.path(), tiny_options()).unwrap();
    for n in &names[1..] {
        db.create_column_family(n, tiny_options()).unwrap();
    }
    for round in 0..6 {
        for _ in 0..1500 {
            let name = names[rnd(3) as usize];
            let cf = db.column_family(name).unwrap();
            let model = models.get_mut(name).unwrap();
            let key = format!("k{:04}", rnd(400)).into_bytes();
            match rnd(10) {
                0..=5 => {
                    let value = format!("{name}-{round}-{}", rnd(1000)).into_bytes();
                    db.put_cf(&cf, &key, &value).unwrap();
                    model.insert(key, value);
                }
                6..=7 => {
                    db.delete_cf(&cf, &key).unwrap();
                    model.remove(&key);
                }
                8 => {
                    let end = format!("k{:04}", rnd(400)).into_bytes();
                    if key <= end {
                        db.delete_range_cf(&cf, &key, &end).unwrap();
                        let gone: Vec<Vec<u8>> =
                            model.range(key.clone()..end.clone()).map(|(k, _)| k.clone()).collect();
                        for k in gone {
                            model.remove(&k);
                        }
                    }
                }
                _ => {
                    // A batch over every family.
                    let mut batch = WriteBatch::new();
                    for n in names {
                        let value = format!("batch-{round}").into_bytes();
                        batch.put_cf(&db.column_family(n).unwrap(), &key, &value);
                        models.get_mut(n).unwrap().insert(key.clone(), value);
                    }
                    db.write(&batch).unwrap();
                }
            }
        }
        if round == 2 {
            db.drop_column_family(&db.column_family("b").unwrap()).unwrap();
            db.create_column_family("b", tiny_options()).unwrap();
            models.get_mut("b").unwrap().clear();
        }
        if round % 2 == 0 {
            drop(db);
        } else {
            db.close().unwrap();
        }
        db = Db::open(dir.path(), tiny_options()).unwrap();
        for n in names {
            let cf = db.column_family(n).unwrap();
            let got: BTreeMap<Vec<u8>, Vec<u8>> = keys(db.iter_cf(&cf)).into_iter().collect();
            assert_eq!(&got, &models[n], "family {n} after round {round}");
            let back: Vec<Vec<u8>> = db.iter_cf(&cf).rev().map(|e| e.unwrap().0).collect();
            assert_eq!(back, models[n].keys().rev().cloned().collect::<Vec<_>>(), "family {n} backwards");
        }
    }
    db.verify_checksums().unwrap();
}

/// Writers to different families at once, through the shared group commit.
#[test]
fn concurrent_writers_to_different_families() {
    let dir = tempfile::tempdir().unwrap();
    let db = std::sync::Arc::new(Db::open(dir.path(), tiny_options()).unwrap());
    let fams: Vec<_> = (0..3).map(|i| db.create_column_family(&format!("f{i}"), tiny_options()).unwrap()).collect();
    std::thread::scope(|s| {
        for (t, cf) in fams.iter().enumerate() {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..2000u32 {
                    db.put_cf(cf, i.to_be_bytes(), format!("{t}-{i}")).unwrap();
                }
            });
        }
    });
    db.wait_for_compaction().unwrap();
    for (t, cf) in fams.iter().enumerate() {
        assert_eq!(db.iter_cf(cf).count(), 2000);
        assert_eq!(db.get_cf(cf, 7u32.to_be_bytes()).unwrap(), Some(format!("{t}-7").into_bytes()));
    }
}

/// Checkpoints and backups copy every family: a family's tables and its MANIFEST record open in the copy.
#[test]
fn checkpoints_and_backups_hold_every_family() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default()).unwrap();
    let a = db.create_column_family("a", Options::default()).unwrap();
    for i in 0..200u32 {
        db.put_cf(&a, i.to_be_bytes(), "in a").unwrap();
        db.put(i.to_be_bytes(), "default").unwrap();
    }
    db.flush_cf(&a).unwrap();
    db.put_cf(&a, "late", "only in a memtable").unwrap();
    let check = dir.path().join("checkpoint");
    db.create_checkpoint(&check).unwrap();
    let mut engine = shaledb::backup::BackupEngine::open(dir.path().join("backups")).unwrap();
    let id = engine.create_backup(&db).unwrap();
    engine.restore(id, dir.path().join("restored")).unwrap();
    for copy in [check, dir.path().join("restored")] {
        let c = Db::open(&copy, Options::default()).unwrap();
        let a = c.column_family("a").expect("the family is in the copy");
        assert_eq!(c.iter_cf(&a).count(), 201, "{}", copy.display());
        assert_eq!(c.get_cf(&a, "late").unwrap().as_deref(), Some(&b"only in a memtable"[..]));
        assert_eq!(c.iter().count(), 200);
    }
}

/// `multi_get_cf` reads its family only, from memtables and tables, under the family's merge operator.
#[test]
fn multi_get_reads_one_family() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let c = db
        .create_column_family("c", Options { merge_operator: merge::builtin("uint64add"), ..Options::default() })
        .unwrap();
    db.put("a", "default").unwrap();
    db.merge_cf(&c, "a", 4u64.to_le_bytes()).unwrap();
    db.flush().unwrap();
    db.merge_cf(&c, "a", 1u64.to_le_bytes()).unwrap();
    db.put_cf(&c, "b", "in c").unwrap();
    let got: Vec<Option<Vec<u8>>> =
        db.multi_get_cf(&ReadOptions::default(), &c, ["a", "b", "z"]).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, [Some(5u64.to_le_bytes().to_vec()), Some(b"in c".to_vec()), None]);
    let one: Vec<_> = db.multi_get_cf(&ReadOptions::default(), &c, ["b"]).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(one, [Some(b"in c".to_vec())]);
    let default: Vec<_> = db.multi_get(["a", "b"]).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(default, [Some(b"default".to_vec()), None]);
}

/// FIFO's TTL in a family other than the default one: an idle background thread looks again by itself (every
/// `ttl` seconds, at least every second) and drops the expired file with no write to wake it.
#[test]
fn fifo_ttl_of_a_family_expires_without_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let fifo = Options {
        compaction_style: CompactionStyle::Fifo,
        compaction_options_fifo: CompactionOptionsFifo { max_table_files_size: 1 << 30, ttl: 1, ..Default::default() },
        ..Options::default()
    };
    let events = db.create_column_family("events", fifo).unwrap();
    db.put_cf(&events, "k", "v").unwrap();
    db.flush_cf(&events).unwrap();
    let start = std::time::Instant::now();
    while db.get_cf(&events, "k").unwrap().is_some() {
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "the expired file was never dropped");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(start.elapsed() >= std::time::Duration::from_millis(900), "dropped before its TTL");
}

/// A family holding a few unflushed writes does not keep every later WAL alive: past `max_total_wal_size` it
/// is switched and flushed, as RocksDB does.
#[test]
fn a_lightly_written_family_is_flushed_past_max_total_wal_size() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { max_total_wal_size: 256 << 10, ..tiny_options() };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let small = db.create_column_family("small", tiny_options()).unwrap();
    db.put_cf(&small, "once", "a single small write").unwrap();
    for i in 0..20000u32 {
        db.put(i.to_be_bytes(), [7u8; 100]).unwrap();
    }
    db.wait_for_compaction().unwrap();
    let wals = files_with(dir.path(), ".log");
    let bytes: u64 = wals.iter().map(|w| std::fs::metadata(dir.path().join(w)).unwrap().len()).sum();
    assert!(bytes <= 512 << 10, "{} WALs of {bytes} bytes kept alive by one small write", wals.len());
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    let small = db.column_family("small").unwrap();
    assert_eq!(db.get_cf(&small, "once").unwrap().as_deref(), Some(&b"a single small write"[..]));
    assert_eq!(db.iter().count(), 20000);
}

/// A read-only instance's checkpoint copies the WALs as they are now: records of a family the writer created
/// after the read-only open are of an id the copied MANIFEST never handed out, and the copy opens without them
/// (the view never held that family). A read-only open racing the creation likewise opens.
#[test]
fn a_read_only_view_and_its_checkpoint_open_when_the_writer_created_a_family_since() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let out = out.path().join("cp");
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("a", "1").unwrap();
    let ro = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let late = db.create_column_family("late", Options::default()).unwrap();
    let sync = shaledb::WriteOptions { sync: true, ..Default::default() };
    db.put_cf_opt(&sync, &late, "x", "y").unwrap();
    ro.create_checkpoint(&out).unwrap();
    let copy = Db::open(&out, Options::default()).unwrap();
    assert_eq!(copy.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert!(copy.column_family("late").is_none());
    let next = copy.create_column_family("next", Options::default()).unwrap();
    assert!(next.id() > late.id(), "the ids the copy skipped are not handed out again");
}

/// A handle of another database (or of an earlier open of this one) is refused before anything reaches the
/// WAL: a write through it would land in a family of the wrong database.
#[test]
fn a_handle_of_another_database_is_refused() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db1 = Db::open(d1.path(), Options::default()).unwrap();
    let foreign = db1.create_column_family("a", Options::default()).unwrap();
    let db2 = Db::open(d2.path(), Options::default()).unwrap();
    let own = db2.create_column_family("a", Options::default()).unwrap();
    assert_eq!(own.id(), foreign.id());
    assert!(matches!(db2.put_cf(&foreign, "k", "v"), Err(Error::InvalidArgument(_))));
    let mut batch = WriteBatch::new();
    batch.put_cf(&foreign, "k", "v");
    assert!(matches!(db2.write(&batch), Err(Error::InvalidArgument(_))));
    assert!(matches!(db2.drop_column_family(&foreign), Err(Error::InvalidArgument(_))));
    assert_eq!(db2.get_cf(&own, "k").unwrap(), None);
    db2.close().unwrap();
    let db2 = Db::open(d2.path(), Options::default()).unwrap();
    assert!(matches!(db2.put_cf(&own, "k", "v"), Err(Error::InvalidArgument(_))), "a handle of the closed open");
    let own = db2.column_family("a").unwrap();
    db2.put_cf(&own, "k", "v").unwrap();
}

/// Transactions across families: one commit writes to several families as one batch; reads see the
/// transaction's own writes per family; locks and conflicts are per family and key (the same key in another
/// family never conflicts); a rollback discards every family's writes.
#[test]
fn transactions_span_families_with_per_family_locks_and_conflicts() {
    use shaledb::{OptimisticTransactionDb, TransactionDb, TransactionDbOptions, TransactionOptions, WriteOptions};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let counters = Options { merge_operator: merge::builtin("uint64add"), ..Options::default() };
    let a = db.create_column_family("a", counters).unwrap();
    let tdb = TransactionDb::from_db(db, TransactionDbOptions::default());
    let short = TransactionOptions { lock_timeout: Some(Duration::from_millis(50)), ..TransactionOptions::default() };
    let w = WriteOptions::default();
    let mut t1 = tdb.begin(&w, &short);
    t1.put("k", "default").unwrap();
    t1.put_cf(&a, "k", 1u64.to_le_bytes()).unwrap();
    t1.merge_cf(&a, "k", 2u64.to_le_bytes()).unwrap();
    assert_eq!(t1.get_cf(&a, "k").unwrap(), Some(3u64.to_le_bytes().to_vec()), "its own writes, merged");
    assert_eq!(t1.get("k").unwrap().as_deref(), Some(&b"default"[..]));
    assert_eq!(tdb.db().get_cf(&a, "k").unwrap(), None, "nothing visible before the commit");
    // Another transaction: the same key in the default family is locked, in family a too; a third family
    // key is free.
    let mut t2 = tdb.begin(&w, &short);
    assert!(matches!(t2.put_cf(&a, "k", "x"), Err(Error::Busy(_)) | Err(Error::TimedOut(_))));
    t2.put_cf(&a, "other", "free").unwrap();
    t2.commit().unwrap();
    t1.commit().unwrap();
    assert_eq!(tdb.db().get("k").unwrap().as_deref(), Some(&b"default"[..]));
    assert_eq!(tdb.db().get_cf(&a, "k").unwrap(), Some(3u64.to_le_bytes().to_vec()));
    let mut t3 = tdb.begin(&w, &short);
    t3.delete_cf(&a, "k").unwrap();
    t3.put("gone", "never").unwrap();
    t3.rollback().unwrap();
    assert!(tdb.db().get_cf(&a, "k").unwrap().is_some() && tdb.db().get("gone").unwrap().is_none());
    let db = tdb.into_db();

    // Optimistic: a write to the key in family a after the transaction read it fails the commit; a write to
    // the same key in the default family does not.
    let odb = OptimisticTransactionDb::from_db(db);
    let a = odb.db().column_family("a").unwrap();
    let mut t = odb.begin(&w, &TransactionOptions::default());
    t.get_for_update_cf(&a, "k").unwrap();
    t.put_cf(&a, "k", 9u64.to_le_bytes()).unwrap();
    odb.put("k", "a default write: no conflict").unwrap();
    let mut u = odb.begin(&w, &TransactionOptions::default());
    u.get_for_update_cf(&a, "k").unwrap();
    odb.db().put_cf(&a, "k", 5u64.to_le_bytes()).unwrap();
    t.commit().unwrap_err();
    assert!(matches!(u.commit(), Err(Error::Busy(_))));
    let mut v = odb.begin(&w, &TransactionOptions::default());
    v.get_for_update_cf(&a, "k").unwrap();
    v.put_cf(&a, "k", 7u64.to_le_bytes()).unwrap();
    odb.put("k", "again no conflict").unwrap();
    v.commit().unwrap();
    assert_eq!(odb.db().get_cf(&a, "k").unwrap(), Some(7u64.to_le_bytes().to_vec()));
}

/// Ingestion, `key_may_exist` and approximate sizes per family: a file ingested into a family is read there
/// only; the estimates look at that family's memtables and tables.
#[test]
fn ingestion_and_estimates_per_family() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    let a = db.create_column_family("a", Options::default()).unwrap();
    let sst = dir.path().join("in.sst");
    let mut w = shaledb::ingest::SstFileWriter::create(&Options::default());
    w.open(&sst).unwrap();
    for i in 0..1000u32 {
        w.put(format!("k{i:05}"), [3u8; 64]).unwrap();
    }
    w.finish().unwrap();
    db.ingest_external_file_cf(&a, &[&sst], &shaledb::ingest::IngestExternalFileOptions::default()).unwrap();
    assert_eq!(db.get_cf(&a, "k00007").unwrap(), Some(vec![3u8; 64]));
    assert_eq!(db.get("k00007").unwrap(), None);
    assert!(db.key_may_exist_cf(&ReadOptions::default(), &a, "k00007").0);
    assert!(!db.key_may_exist("k00007"), "the default family holds no table or memtable entry");
    let opts = shaledb::SizeApproximationOptions::default();
    let in_a = db.get_approximate_sizes_cf(&a, &opts, &[b"k".to_vec()..b"l".to_vec()]).unwrap();
    let in_default = db.get_approximate_sizes(&opts, &[b"k".to_vec()..b"l".to_vec()]).unwrap();
    assert!(in_a[0] > 1000 && in_default[0] == 0, "{in_a:?} {in_default:?}");
    db.drop_column_family(&a).unwrap();
    assert!(matches!(
        db.ingest_external_file_cf(&a, &[&sst], &shaledb::ingest::IngestExternalFileOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn table_sizes_versions_and_memtable_stats_are_per_family() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.create_column_family("a", Options::default()).unwrap();
    // Values that do not compress: the default family's ten times the size of a's.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    for i in 0..200u32 {
        db.put(format!("k{i:04}"), noise(100)).unwrap();
        db.put_cf(&a, format!("k{i:04}"), noise(10)).unwrap();
    }
    db.put_cf(&a, "m", "in a's memtable only").unwrap();
    assert_eq!(db.get_approximate_memtable_stats_cf(&a, "k".."z").0, 201);
    assert_eq!(db.get_approximate_memtable_stats("k".."z").0, 200);
    db.flush().unwrap();
    db.flush_cf(&a).unwrap();
    assert_eq!(db.get_approximate_memtable_stats_cf(&a, "k".."z"), (0, 0));
    let int = |cf: &shaledb::ColumnFamily, name: &str| db.property_int_cf(cf, name).unwrap();
    let d = db.default_column_family();
    for cf in [&d, &a] {
        assert_eq!(int(cf, "rocksdb.total-sst-files-size"), int(cf, "rocksdb.live-sst-files-size"), "{}", cf.name());
    }
    assert!(int(&d, "rocksdb.live-sst-files-size") > 2 * int(&a, "rocksdb.live-sst-files-size"));
    // An iterator holds a's version; rewriting a's table leaves its old one counted in a's total only.
    let it = db.iter_cf(&a);
    let before = int(&a, "rocksdb.total-sst-files-size");
    db.put_cf(&a, "k0000", "new").unwrap();
    db.flush_cf(&a).unwrap();
    db.compact_range_cf(&a, None, None).unwrap();
    assert!(int(&a, "rocksdb.total-sst-files-size") > int(&a, "rocksdb.live-sst-files-size"));
    assert!(int(&a, "rocksdb.total-sst-files-size") >= before);
    assert_eq!(int(&d, "rocksdb.total-sst-files-size"), int(&d, "rocksdb.live-sst-files-size"));
    assert!(int(&a, "rocksdb.num-live-versions") >= 2);
    assert_eq!(int(&d, "rocksdb.num-live-versions"), 1);
    drop(it);
    db.drop_column_family(&a).unwrap();
    assert_eq!(db.get_approximate_memtable_stats_cf(&a, "k".."z"), (0, 0));
}

#[test]
fn read_only_and_secondary_opens_take_each_familys_options() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, secondary) = (dir.path().join("db"), dir.path().join("secondary"));
    let counters = Options { merge_operator: merge::builtin("uint64add"), ..Options::default() };
    let db = Db::open(&primary, Options::default()).unwrap();
    let cf = db.create_column_family("counters", counters.clone()).unwrap();
    for n in [2u64, 3] {
        db.merge_cf(&cf, "hits", n.to_le_bytes()).unwrap();
    }
    db.flush_cf(&cf).unwrap();
    db.merge_cf(&cf, "hits", 4u64.to_le_bytes()).unwrap(); // in the WAL only
    let sum = |v: Option<Vec<u8>>| u64::from_le_bytes(v.unwrap().try_into().unwrap());
    let descs = || vec![ColumnFamilyDescriptor::new("counters", counters.clone())];

    let view = Db::open_read_only_with_column_families(&primary, Options::default(), descs()).unwrap();
    let vcf = view.column_family("counters").unwrap();
    assert_eq!(sum(view.get_cf(&vcf, "hits").unwrap()), 9);
    drop(vcf);
    drop(view);
    // Without its descriptor the family reads with the database's options, which have no merge operator.
    let plain = Db::open_read_only(&primary, Options::default()).unwrap();
    assert!(plain.get_cf(&plain.column_family("counters").unwrap(), "hits").is_err());
    drop(plain);
    for bad in [
        vec![ColumnFamilyDescriptor::new("missing", counters.clone())],
        vec![ColumnFamilyDescriptor::new("default", counters.clone())],
    ] {
        let r = Db::open_read_only_with_column_families(&primary, Options::default(), bad);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{:?}", r.err());
    }

    let follower =
        Db::open_as_secondary_with_column_families(&primary, &secondary, Options::default(), descs()).unwrap();
    let fcf = follower.column_family("counters").unwrap();
    assert_eq!(sum(follower.get_cf(&fcf, "hits").unwrap()), 9);
    db.merge_cf(&cf, "hits", 10u64.to_le_bytes()).unwrap();
    follower.try_catch_up_with_primary().unwrap();
    assert_eq!(sum(follower.get_cf(&fcf, "hits").unwrap()), 19);
    let r = Db::open_as_secondary_with_column_families(
        &primary,
        dir.path().join("other"),
        Options::default(),
        vec![ColumnFamilyDescriptor::new("missing", counters.clone())],
    );
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
}
