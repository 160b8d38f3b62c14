//! `Db::property` / `Db::property_int` with RocksDB's names and meanings, checked against what was written.

use shaledb::{Db, Options};
use std::time::{SystemTime, UNIX_EPOCH};

/// One flush at a time, no automatic compaction: the LSM's shape is what the test did.
fn manual() -> Options {
    Options { disable_auto_compactions: true, level0_file_num_compaction_trigger: 2, ..Options::default() }
}

fn int(db: &Db, name: &str) -> u64 {
    let v = db.property_int(name).unwrap_or_else(|| panic!("{name} is not an integer property"));
    // The text form is the same figure.
    assert_eq!(db.property(name), Some(v.to_string()), "{name}");
    v
}

/// Counts after writes, a flush, deletions, a second flush and a full compaction, against a model of what was
/// written (RocksDB's estimate-num-keys: entries minus twice the deletions).
#[test]
fn counts_follow_writes_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), manual()).unwrap();
    assert_eq!(int(&db, "rocksdb.estimate-num-keys"), 0);
    assert_eq!(int(&db, "rocksdb.live-sst-files-size"), 0);
    for i in 0..100u32 {
        db.put(format!("k{i:03}"), [b'v'; 50]).unwrap();
    }
    assert_eq!(int(&db, "rocksdb.num-entries-active-mem-table"), 100);
    assert_eq!(int(&db, "rocksdb.num-deletes-active-mem-table"), 0);
    assert_eq!(int(&db, "rocksdb.estimate-num-keys"), 100);
    assert!(int(&db, "rocksdb.cur-size-active-mem-table") >= 100 * 50);

    db.flush().unwrap();
    assert_eq!(db.property("rocksdb.num-files-at-level0").as_deref(), Some("1"));
    assert_eq!(int(&db, "rocksdb.num-entries-active-mem-table"), 0);
    assert_eq!(int(&db, "rocksdb.num-immutable-mem-table"), 0);
    assert_eq!(int(&db, "rocksdb.mem-table-flush-pending"), 0);
    assert_eq!(int(&db, "rocksdb.estimate-num-keys"), 100);
    let one_file = int(&db, "rocksdb.live-sst-files-size");
    assert!(one_file > 100 * 50 / 4, "{one_file}"); // LZ4 on repeated bytes still leaves the keys
    assert_eq!(int(&db, "rocksdb.total-sst-files-size"), one_file);
    assert_eq!(int(&db, "rocksdb.estimate-live-data-size"), one_file);
    assert_eq!(int(&db, "rocksdb.compaction-pending"), 0); // 1 file of the 2 that trigger

    for i in 0..10u32 {
        db.delete(format!("k{i:03}")).unwrap();
    }
    assert_eq!(int(&db, "rocksdb.num-deletes-active-mem-table"), 10);
    // 100 in the table, 10 entries in the memtable, minus twice its 10 deletions.
    assert_eq!(int(&db, "rocksdb.estimate-num-keys"), 90);

    db.flush().unwrap();
    assert_eq!(db.property("rocksdb.num-files-at-level0").as_deref(), Some("2"));
    assert_eq!(int(&db, "rocksdb.num-deletes-active-mem-table"), 0);
    // Tables: 110 entries of which 10 deletions: 100 non-deletions minus 10.
    assert_eq!(int(&db, "rocksdb.estimate-num-keys"), 90);
    assert_eq!(int(&db, "rocksdb.compaction-pending"), 1); // L0 holds its trigger's 2 files
    assert!(int(&db, "rocksdb.estimate-pending-compaction-bytes") > 0);
    // RocksDB's estimate takes L0 newest first: the deletions' table, inside the first one's key range, is
    // taken and the first one, overlapping it, is not.
    let live = int(&db, "rocksdb.live-sst-files-size");
    assert_eq!(int(&db, "rocksdb.estimate-live-data-size"), live - one_file);

    db.compact_range(None, None).unwrap();
    assert_eq!(db.property("rocksdb.num-files-at-level0").as_deref(), Some("0"));
    let files: usize =
        (0..7).map(|l| db.property(&format!("rocksdb.num-files-at-level{l}")).unwrap().parse::<usize>().unwrap()).sum();
    assert_eq!(files, 1);
    assert_eq!(int(&db, "rocksdb.estimate-num-keys"), 90); // deletions and what they covered dropped
    assert_eq!(int(&db, "rocksdb.compaction-pending"), 0);
    assert_eq!(int(&db, "rocksdb.estimate-live-data-size"), int(&db, "rocksdb.live-sst-files-size"));
    let base = int(&db, "rocksdb.base-level");
    assert!((1..7).contains(&base), "{base}");
    assert_eq!(int(&db, "rocksdb.num-running-compactions"), 0);
    assert_eq!(int(&db, "rocksdb.num-running-flushes"), 0);
    assert_eq!(int(&db, "rocksdb.background-errors"), 0);
    assert_eq!(db.property("shaledb.background-error").as_deref(), Some(""));
    db.close().unwrap();
}

/// num-snapshots, oldest-snapshot-time and oldest-snapshot-sequence follow the live snapshots.
#[test]
fn snapshot_properties() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(int(&db, "rocksdb.num-snapshots"), 0);
    assert_eq!(int(&db, "rocksdb.oldest-snapshot-time"), 0);
    assert_eq!(int(&db, "rocksdb.oldest-snapshot-sequence"), 0);
    let now = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let before = now();
    db.put("a", "1").unwrap();
    let first = db.snapshot();
    db.put("b", "2").unwrap();
    let second = db.snapshot();
    let same = second.clone(); // a clone is the same snapshot
    let after = now();
    assert_eq!(int(&db, "rocksdb.num-snapshots"), 2);
    let t = int(&db, "rocksdb.oldest-snapshot-time");
    assert!((before..=after).contains(&t), "{before} <= {t} <= {after}");
    assert_eq!(t, first.unix_time());
    assert_eq!(int(&db, "rocksdb.oldest-snapshot-sequence"), first.sequence());
    drop(first);
    assert_eq!(int(&db, "rocksdb.num-snapshots"), 1);
    assert_eq!(int(&db, "rocksdb.oldest-snapshot-sequence"), second.sequence());
    drop((second, same));
    assert_eq!(int(&db, "rocksdb.num-snapshots"), 0);
}

/// A cursor holds its version: num-live-versions counts it, total-sst-files-size keeps its tables after a
/// compaction replaced them, and both drop back once the cursor is gone.
#[test]
fn live_versions_and_total_sst_size_follow_readers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), manual()).unwrap();
    assert_eq!(int(&db, "rocksdb.num-live-versions"), 1);
    for round in 0..2u32 {
        for i in 0..50u32 {
            db.put(format!("k{i:03}"), format!("v{round}")).unwrap();
        }
        db.flush().unwrap();
    }
    let cursor = db.cursor();
    db.compact_range(None, None).unwrap();
    assert!(int(&db, "rocksdb.num-live-versions") >= 2);
    let (total, live) = (int(&db, "rocksdb.total-sst-files-size"), int(&db, "rocksdb.live-sst-files-size"));
    assert!(total > live, "{total} <= {live}");
    drop(cursor);
    assert_eq!(int(&db, "rocksdb.num-live-versions"), 1);
    assert_eq!(int(&db, "rocksdb.total-sst-files-size"), int(&db, "rocksdb.live-sst-files-size"));
}

/// Block cache and table reader figures.
#[test]
fn block_cache_and_table_reader_properties() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { block_cache_size: 1 << 20, cache_index_and_filter_blocks: false, ..manual() };
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(int(&db, "rocksdb.block-cache-capacity"), 1 << 20);
    assert_eq!(int(&db, "rocksdb.block-cache-usage"), 0);
    for i in 0..200u32 {
        db.put(format!("k{i:03}"), [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.get("k007").unwrap(), Some(vec![b'v'; 100]));
    assert!(int(&db, "rocksdb.block-cache-usage") > 0);
    // The open table holds its index and filter itself.
    assert!(int(&db, "rocksdb.estimate-table-readers-mem") > 0);
    drop(db);

    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options { block_cache_size: 0, ..manual() }).unwrap();
    assert_eq!(int(&db, "rocksdb.block-cache-capacity"), 0);
    assert_eq!(int(&db, "rocksdb.block-cache-usage"), 0);
}

/// The text properties, and names that are not properties: `None`, never a panic.
#[test]
fn text_properties_and_unknown_names() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), manual()).unwrap();
    db.put("a\x01", "1").unwrap();
    db.put("b", "2").unwrap();
    db.flush().unwrap();
    let stats = db.property("rocksdb.stats").unwrap();
    assert!(stats.contains("** Compaction Stats") && stats.contains("** DB Stats **"), "{stats}");
    let cf = db.property("rocksdb.cfstats").unwrap();
    assert!(cf.contains("** Compaction Stats") && !cf.contains("** DB Stats"), "{cf}");
    let dbs = db.property("rocksdb.dbstats").unwrap();
    assert!(dbs.starts_with("** DB Stats **") && dbs.contains("Cumulative writes"), "{dbs}");
    assert!(db.property("rocksdb.levelstats").unwrap().starts_with("** Compaction Stats"));
    let sst = db.property("rocksdb.sstables").unwrap();
    assert!(sst.starts_with("--- level 0 ---\n "), "{sst}");
    assert!(sst.contains("['a\\x01' .. 'b']"), "{sst}");
    assert_eq!(sst.matches("--- level").count(), 7);
    for text in ["rocksdb.stats", "rocksdb.dbstats", "rocksdb.sstables", "rocksdb.num-files-at-level0"] {
        assert_eq!(db.property_int(text), None, "{text}");
    }
    for bad in [
        "rocksdb.no-such-property",
        "rocksdb.num-files-at-level7",
        "rocksdb.num-files-at-level99999999999999999999999",
        "rocksdb.num-files-at-level-1",
        "rocksdb.num-files-at-levelx",
        "rocksdb.",
        "stats",
        "",
        "rocksdb.is-write-stopped",
        "rocksdb.block-cache-pinned-usage",
    ] {
        assert_eq!(db.property(bad), None, "{bad}");
        assert_eq!(db.property_int(bad), None, "{bad}");
    }
}
