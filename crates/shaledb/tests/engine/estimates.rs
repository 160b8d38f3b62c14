//! `key_may_exist`, `get_approximate_sizes` and `get_approximate_memtable_stats` with RocksDB's documented
//! semantics.

use crate::tiny_options;
use rand::Rng;
use shaledb::{CompressionType, Db, Error, Options, ReadOptions, SizeApproximationOptions};
use std::collections::BTreeMap;

fn key(i: u32) -> String {
    format!("k{i:05}")
}

/// Never false for a key that is present, wherever it lives (memtable, L0, deeper levels), over random puts,
/// overwrites and deletions with tiny memtables and files; false for every deleted key whose deletion is still
/// in a memtable.
#[test]
fn key_may_exist_is_never_false_for_a_present_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    let mut rng = shaledb_testkit::rng(shaledb_testkit::seed_from_env(16));
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for step in 0..4000u32 {
        let k = key(rng.gen_range(0..1500));
        if rng.gen_ratio(1, 5) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("{step}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    let check = |db: &Db, model: &BTreeMap<String, Vec<u8>>| {
        for (k, v) in model {
            let (may, found) = db.key_may_exist_opt(&ReadOptions::default(), k);
            assert!(may, "present key {k} reported absent");
            if let Some(found) = found {
                assert_eq!(&found, v, "{k}");
            }
        }
    };
    check(&db, &model);
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    check(&db, &model);

    // Deletions in the memtable decide: certainly absent.
    let deleted: Vec<String> = model.keys().take(50).cloned().collect();
    for k in &deleted {
        db.delete(k).unwrap();
        model.remove(k);
        assert!(!db.key_may_exist(k), "{k} was just deleted");
    }
    check(&db, &model);
}

/// False for keys outside every table's key range and absent from the memtables; for absent keys inside the
/// range, the bloom filters rule out nearly all (10 bits per key: about 1% false positives).
#[test]
fn key_may_exist_false_outside_tables_and_by_bloom() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options { disable_auto_compactions: true, ..Options::default() }).unwrap();
    for i in (1000..3000u32).step_by(2) {
        db.put(key(i), "v").unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.key_may_exist_opt(&ReadOptions::default(), key(1000)), (true, None));
    for outside in [key(0), key(999), key(3000), key(99999), String::new(), "zzz".into()] {
        assert!(!db.key_may_exist(&outside), "{outside:?} is outside every table");
    }
    let ruled_out = (1001..3000u32).step_by(2).filter(|&i| !db.key_may_exist(key(i))).count();
    assert!(ruled_out >= 900, "the filters ruled out only {ruled_out} of 1000 absent keys");
    // Moved to the last level, the same holds.
    db.compact_range(None, None).unwrap();
    assert!(!db.key_may_exist(key(999)) && !db.key_may_exist(key(3001)));
    assert!((1000..3000u32).step_by(2).all(|i| db.key_may_exist(key(i))));
}

/// RocksDB's `value_found`: the value comes back when the memtables decide the key, merges included; with a
/// snapshot, the answer is as of the snapshot.
#[test]
fn key_may_exist_values_from_memtables_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    let plain = ReadOptions::default();
    db.put("k", "v1").unwrap();
    let snap = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    db.delete("k").unwrap();
    assert_eq!(db.key_may_exist_opt(&plain, "k"), (false, None));
    assert_eq!(db.key_may_exist_opt(&snap, "k"), (true, Some(b"v1".to_vec())));

    // Merge operands over a value in the memtable are merged (stringappend joins with ',').
    db.put("m", "a").unwrap();
    db.merge("m", "b").unwrap();
    assert_eq!(db.key_may_exist_opt(&plain, "m"), (true, Some(b"a,b".to_vec())));
    // Operands alone: the key exists whatever the tables hold, but its value needs them.
    db.merge("only-merges", "x").unwrap();
    assert_eq!(db.key_may_exist_opt(&plain, "only-merges"), (true, None));
    db.flush().unwrap();
    assert_eq!(db.key_may_exist_opt(&plain, "m"), (true, None));
    // The read-only open answers alike.
    db.close().unwrap();
    let ro = Db::open_read_only(dir.path(), tiny_options()).unwrap();
    assert!(ro.key_may_exist("m"));
    assert!(!ro.key_may_exist("zzzz"));
}

/// A database of `n` keys of 100-byte values, uncompressed, compacted into tables of the last level.
fn sized_db(n: u32) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        compression: CompressionType::None,
        target_file_size_base: 64 << 10,
        disable_auto_compactions: true,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..n {
        db.put(key(i), [i as u8; 100]).unwrap();
    }
    db.compact_range(None, None).unwrap();
    (dir, db)
}

/// Sizes from the tables' indexes are proportional to the data in a range (within 10% of the whole plus a
/// block's worth), zero where no table holds keys, and the whole database for the whole key space.
#[test]
fn approximate_sizes_are_proportional_to_the_data() {
    let n = 10_000u32;
    let (_dir, db) = sized_db(n);
    let total = db.property_int("rocksdb.live-sst-files-size").unwrap();
    let files = SizeApproximationOptions::default();
    let all = db.get_approximate_sizes(&files, &["".."\u{7f}"]).unwrap()[0];
    assert_eq!(all, total);
    let tolerance = total / 10 + 4096;
    for (a, b) in [(0, n / 2), (n / 2, n), (1000, 2000), (2500, 7500), (n / 3, n / 3 + 10)] {
        let got = db.get_approximate_sizes(&files, &[key(a)..key(b)]).unwrap()[0];
        let want = total * u64::from(b - a) / u64::from(n);
        assert!(got.abs_diff(want) <= tolerance, "[{a}, {b}): {got} vs about {want} (of {total})");
    }
    // Several ranges in one call, each answered as alone; ranges past the data are 0.
    let sizes = db
        .get_approximate_sizes(
            &files,
            &[key(0)..key(n / 2), "a".into().."b".into(), "z".into().."zz".into(), key(7)..key(7)],
        )
        .unwrap();
    assert!(sizes[0] > 0);
    assert_eq!(&sizes[1..], &[0, 0, 0]);
    // The margin: partly covered tables count half their size when they are small next to the rest.
    let rough = SizeApproximationOptions { files_size_error_margin: 0.5, ..files.clone() };
    let exact = db.get_approximate_sizes(&files, &[key(100)..key(9900)]).unwrap()[0];
    let approx = db.get_approximate_sizes(&rough, &[key(100)..key(9900)]).unwrap()[0];
    assert!(approx.abs_diff(exact) <= exact / 2, "{approx} vs {exact}");
}

/// include_memtables adds the memtable entries in the range; without files, only them; neither, and an inverted
/// range, are InvalidArgument.
#[test]
fn approximate_sizes_with_memtables_and_bad_arguments() {
    let (_dir, db) = sized_db(1000);
    let files = SizeApproximationOptions::default();
    let mem_only = SizeApproximationOptions { include_memtables: true, include_files: false, ..files.clone() };
    let both = SizeApproximationOptions { include_memtables: true, ..files.clone() };
    let r = [key(0)..key(2000)];
    assert_eq!(db.get_approximate_sizes(&mem_only, &r).unwrap(), vec![0]);
    let on_disk = db.get_approximate_sizes(&files, &r).unwrap()[0];
    for i in 1500..1600 {
        db.put(key(i), [1u8; 100]).unwrap();
    }
    let (count, bytes) = db.get_approximate_memtable_stats(key(0)..key(2000));
    assert_eq!(count, 100);
    assert_eq!(db.get_approximate_sizes(&mem_only, &r).unwrap(), vec![bytes]);
    assert_eq!(db.get_approximate_sizes(&both, &r).unwrap(), vec![on_disk + bytes]);
    assert_eq!(db.get_approximate_sizes(&files, &r).unwrap(), vec![on_disk]);

    let neither = SizeApproximationOptions { include_files: false, ..files.clone() };
    assert!(matches!(db.get_approximate_sizes(&neither, &r), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.get_approximate_sizes(&files, &["b".."a"]), Err(Error::InvalidArgument(_))));
    let none: [std::ops::Range<&str>; 0] = [];
    assert_eq!(db.get_approximate_sizes(&files, &none).unwrap(), Vec::<u64>::new());
}

/// Memtable stats count every entry (versions, deletions, merge operands) with a key in `[start, limit)` in the
/// active and immutable memtables, and their key and value bytes.
#[test]
fn memtable_stats_count_entries_in_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    assert_eq!(db.get_approximate_memtable_stats("a".."z"), (0, 0));
    db.put("b", "12345").unwrap();
    db.put("b", "67890").unwrap(); // a second version
    db.delete("c").unwrap();
    db.merge("d", "x").unwrap();
    db.put("z", "outside").unwrap();
    // Internal keys carry an 8-byte trailer.
    let want_bytes = (1 + 8 + 5) * 2 + (1 + 8) + (1 + 8 + 1);
    assert_eq!(db.get_approximate_memtable_stats("a".."z"), (4, want_bytes));
    assert_eq!(db.get_approximate_memtable_stats("b".."c"), (2, 28));
    assert_eq!(db.get_approximate_memtable_stats("c".."c"), (0, 0));
    assert_eq!(db.get_approximate_memtable_stats("d".."a"), (0, 0));
    db.flush().unwrap();
    assert_eq!(db.get_approximate_memtable_stats("a".."zz"), (0, 0));
    // Enough writes to fill and switch tiny memtables: active and immutable ones both count.
    let mut written = 0u64;
    for i in 0..2000u32 {
        db.put(key(i), [0u8; 40]).unwrap();
        written += 1;
    }
    let (count, bytes) = db.get_approximate_memtable_stats(key(0)..key(99999));
    let flushed = written - count;
    assert!(count <= written && bytes == count * (6 + 8 + 40), "{count} entries, {bytes} bytes, {flushed} flushed");
}
