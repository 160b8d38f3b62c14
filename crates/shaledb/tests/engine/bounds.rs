//! `iterate_lower_bound` / `iterate_upper_bound` on every read path of a database whose data spans the
//! memtable, L0 and deeper levels (read-write and read-only opens), tables outside the bounds never opened, and
//! `Cursor::refresh` (RocksDB's `Iterator::Refresh`).

use crate::tiny_options;
use shaledb::{Cursor, Db, Error, Options, ReadOptions};
use std::collections::BTreeMap;
use std::path::Path;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// Keys `k0000..k0600` in three generations: the oldest compacted down the levels, the next in L0, the newest
/// (with deletions) in the memtable. Returns the model of the final state.
fn layered(db: &Db) -> Model {
    let mut model = Model::new();
    for i in 0..600u32 {
        let v = format!("old{i}").into_bytes();
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.compact_range(None, None).unwrap();
    for i in (0..600u32).step_by(3) {
        let v = format!("l0-{i}").into_bytes();
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.flush().unwrap();
    for i in (0..600u32).step_by(7) {
        db.delete(key(i)).unwrap();
        model.remove(&key(i));
    }
    for i in (1..600u32).step_by(11) {
        let v = format!("mem{i}").into_bytes();
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    model
}

fn in_bounds(k: &[u8], lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
    lower.is_none_or(|l| k >= l) && upper.is_none_or(|u| k < u)
}

fn entry(c: &Cursor) -> Option<(Vec<u8>, Vec<u8>)> {
    c.valid().then(|| (c.key().to_vec(), c.value().to_vec()))
}

/// Checks every positioning call of a cursor with `lower`/`upper` against the model, both directions.
fn check_bounds(db: &Db, model: &Model, lower: Option<&[u8]>, upper: Option<&[u8]>) {
    let opts = ReadOptions {
        iterate_lower_bound: lower.map(<[u8]>::to_vec),
        iterate_upper_bound: upper.map(<[u8]>::to_vec),
        ..ReadOptions::default()
    };
    let want: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().filter(|(k, _)| in_bounds(k, lower, upper)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let ctx = format!("bounds {:?}..{:?}", lower.map(String::from_utf8_lossy), upper.map(String::from_utf8_lossy));

    // The Rust iterator, both ways.
    let fwd: Vec<_> = db.iter_opt(&opts).collect::<Result<_, _>>().unwrap();
    assert_eq!(fwd, want, "{ctx}: forward");
    let mut back: Vec<_> = db.iter_opt(&opts).rev().collect::<Result<_, _>>().unwrap();
    back.reverse();
    assert_eq!(back, want, "{ctx}: reverse");

    let mut c = db.cursor_opt(&opts);
    c.seek_to_first();
    assert_eq!(entry(&c), want.first().cloned(), "{ctx}: seek_to_first");
    let mut walked = Vec::new();
    while let Some(e) = entry(&c) {
        walked.push(e);
        c.next();
    }
    assert_eq!(walked, want, "{ctx}: next from the first");
    c.seek_to_last();
    assert_eq!(entry(&c), want.last().cloned(), "{ctx}: seek_to_last");
    let mut walked = Vec::new();
    while let Some(e) = entry(&c) {
        walked.push(e);
        c.prev();
    }
    walked.reverse();
    assert_eq!(walked, want, "{ctx}: prev from the last");

    // Seeks inside, below and above the bounds (targets below the lower bound land on it, targets at or past
    // the upper bound find nothing forward; backward the mirror image).
    let mut targets: Vec<Vec<u8>> = vec![b"".to_vec(), b"a".to_vec(), b"z".to_vec(), key(0), key(599), key(600)];
    targets.extend((0..600).step_by(37).map(key));
    targets.extend(lower.iter().chain(upper.iter()).map(|b| b.to_vec()));
    for t in &targets {
        c.seek(t);
        let first_ge = want.iter().find(|(k, _)| k >= t).cloned();
        assert_eq!(entry(&c), first_ge, "{ctx}: seek {}", String::from_utf8_lossy(t));
        if c.valid() {
            c.prev();
            let before = want.iter().rev().find(|(k, _)| k < t).cloned();
            assert_eq!(entry(&c), before, "{ctx}: prev after seek {}", String::from_utf8_lossy(t));
        }
        c.seek_for_prev(t);
        let last_le = want.iter().rev().find(|(k, _)| k <= t).cloned();
        assert_eq!(entry(&c), last_le, "{ctx}: seek_for_prev {}", String::from_utf8_lossy(t));
        if c.valid() {
            c.next();
            let after = want.iter().find(|(k, _)| k > t).cloned();
            assert_eq!(entry(&c), after, "{ctx}: next after seek_for_prev {}", String::from_utf8_lossy(t));
        }
    }
    c.status().unwrap();
    // `range_opt` narrows the bounds of `opts` further.
    let narrowed: Vec<_> = db.range_opt(&opts, key(100)..key(400)).collect::<Result<_, _>>().unwrap();
    let want_narrowed: Vec<_> = want.iter().filter(|(k, _)| *k >= key(100) && *k < key(400)).cloned().collect();
    assert_eq!(narrowed, want_narrowed, "{ctx}: range_opt");
}

/// A lower (inclusive) and an upper (exclusive) iterator bound.
type Bounds = (Option<Vec<u8>>, Option<Vec<u8>>);

fn bound_sets() -> Vec<Bounds> {
    vec![
        (None, None),
        (Some(key(100)), None),
        (None, Some(key(450))),
        (Some(key(123)), Some(key(456))),
        (Some(key(300)), Some(key(301))),
        (Some(b"k0200x".to_vec()), Some(b"k0201".to_vec())), // between two keys: empty
        (Some(key(500)), Some(key(100))),                    // inverted: empty
        (Some(b"a".to_vec()), Some(b"b".to_vec())),          // before every key
        (Some(b"x".to_vec()), None),                         // after every key
        (Some(key(0)), Some(key(600))),                      // exactly the data
    ]
}

/// Every bound set on every positioning call, on data in the memtable, L0 and deeper levels.
#[test]
fn bounds_hold_on_every_path_of_a_layered_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    let model = layered(&db);
    for (lower, upper) in bound_sets() {
        check_bounds(&db, &model, lower.as_deref(), upper.as_deref());
    }
    // The same after everything moved to tables.
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    for (lower, upper) in bound_sets() {
        check_bounds(&db, &model, lower.as_deref(), upper.as_deref());
    }
}

/// The read-only open's iterators honour the bounds alike (its memtable is the replayed WAL).
#[test]
fn bounds_hold_on_a_read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    let model = {
        let db = Db::open(dir.path(), tiny_options()).unwrap();
        let model = layered(&db);
        db.sync_wal().unwrap();
        // Dropped without close: the newest generation stays in the WAL, for the read-only open to replay.
        drop(db);
        model
    };
    let ro = Db::open_read_only(dir.path(), tiny_options()).unwrap();
    for (lower, upper) in bound_sets() {
        check_bounds(&ro, &model, lower.as_deref(), upper.as_deref());
    }
}

/// The table files of a database, by key range: `(number, smallest, largest)` from `rocksdb.sstables`.
fn tables(db: &Db) -> Vec<(u64, String, String)> {
    let text = db.property("rocksdb.sstables").unwrap();
    text.lines()
        .filter(|l| l.starts_with(' '))
        .map(|l| {
            let (number, rest) = l.trim().split_once(':').unwrap();
            let keys = rest.split_once("['").unwrap().1.trim_end_matches("']");
            let (lo, hi) = keys.split_once("' .. '").unwrap();
            (number.parse().unwrap(), lo.to_string(), hi.to_string())
        })
        .collect()
}

fn remove_table(dir: &Path, number: u64) {
    std::fs::remove_file(dir.join(format!("{number:06}.sst"))).unwrap();
}

/// Tables wholly outside the bounds are never opened, in L0 and in deeper levels: with their files removed
/// (and the table cache empty after a reopen), a bounded scan both ways still succeeds, while an unbounded one
/// reports the missing file.
#[test]
fn tables_outside_the_bounds_are_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        disable_auto_compactions: true,
        paranoid_checks: false,
        target_file_size_base: 4 << 10,
        compression: shaledb::CompressionType::None,
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        // Deeper level: a0000.. in several small tables (written twice, so the compaction merges two L0
        // tables rather than moving one).
        for _ in 0..2 {
            for i in 0..400u32 {
                db.put(format!("a{i:04}"), [b'v'; 100]).unwrap();
            }
            db.flush().unwrap();
        }
        db.compact_range(None, None).unwrap();
        // L0: one table of b keys, one of c keys.
        for prefix in ["b", "c"] {
            for i in 0..50u32 {
                db.put(format!("{prefix}{i:04}"), "v").unwrap();
            }
            db.flush().unwrap();
        }
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let all = tables(&db);
    assert!(all.len() >= 4, "{all:?}");
    // Remove the c table (L0) and the deeper tables holding a0300 and beyond.
    let doomed: Vec<u64> = all
        .iter()
        .filter(|(_, lo, hi)| lo.starts_with('c') || (lo.starts_with('a') && hi.as_str() >= "a0300"))
        .map(|t| t.0)
        .collect();
    let kept_a = all.iter().any(|(_, lo, _)| lo.starts_with('a') && lo.as_str() < "a0300");
    assert!(kept_a && doomed.len() >= 2, "{all:?}");
    drop(db);
    for n in &doomed {
        remove_table(dir.path(), *n);
    }
    let db = Db::open(dir.path(), opts).unwrap();
    // Bounds that take the b table and the first a tables only.
    let first_a = all.iter().filter(|(_, lo, _)| lo.starts_with('a')).map(|t| t.2.clone()).min().unwrap();
    for (lower, upper) in [("b", "c"), ("a", first_a.as_str())] {
        let opts = ReadOptions {
            iterate_lower_bound: Some(lower.as_bytes().to_vec()),
            iterate_upper_bound: Some(upper.as_bytes().to_vec()),
            ..ReadOptions::default()
        };
        let fwd: Vec<_> = db.iter_opt(&opts).collect::<Result<_, _>>().unwrap();
        assert!(!fwd.is_empty());
        let back: Vec<_> = db.iter_opt(&opts).rev().collect::<Result<_, _>>().unwrap();
        assert_eq!(back.len(), fwd.len());
        let mut c = db.cursor_opt(&opts);
        c.seek("zzz");
        assert!(!c.valid());
        c.seek_for_prev("zzz");
        assert!(c.valid());
        c.status().unwrap();
    }
    // Unbounded, the missing tables are reported.
    let err = db.iter().find_map(Result::err).expect("an unbounded scan reaches a removed table");
    assert!(matches!(err, Error::Io { .. } | Error::Corruption { .. } | Error::InvalidArgument(_)), "{err}");
}

/// `refresh` re-pins the cursor to the latest writes, flushes and compactions, keeps the bounds, leaves the
/// cursor unpositioned, and releases the old version.
#[test]
fn refresh_sees_the_latest_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    db.put("a", "1").unwrap();
    db.put("m", "1").unwrap();
    let opts = ReadOptions { iterate_upper_bound: Some(b"x".to_vec()), ..ReadOptions::default() };
    let mut c = db.cursor_opt(&opts);
    db.put("b", "2").unwrap();
    db.delete("a").unwrap();
    db.put("y", "outside the bound").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    c.seek_to_first();
    assert_eq!(c.key(), b"a"); // the old view
    assert!(db.property_int("rocksdb.num-live-versions").unwrap() >= 2);
    c.refresh().unwrap();
    assert!(!c.valid(), "refresh leaves the cursor unpositioned");
    c.status().unwrap();
    assert_eq!(db.property_int("rocksdb.num-live-versions"), Some(1));
    let mut seen = Vec::new();
    c.seek_to_first();
    while c.valid() {
        seen.push(String::from_utf8(c.key().to_vec()).unwrap());
        c.next();
    }
    assert_eq!(seen, ["b", "m"]); // "a" deleted, "y" past the upper bound
                                  // Again, with writes in the memtable only.
    db.put("c", "3").unwrap();
    c.refresh().unwrap();
    c.seek_to_last();
    assert_eq!(c.key(), b"m");
    c.prev();
    assert_eq!((c.key(), c.value()), (&b"c"[..], &b"3"[..]));
}

/// As in RocksDB 7.8: a cursor on an explicit snapshot, or on a read-only open, cannot be refreshed
/// (NotSupported) and keeps its position; after the database is closed refresh reports Closed.
#[test]
fn refresh_is_not_supported_on_snapshots_and_read_only_opens() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("k", "old").unwrap();
    let snap = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    let mut c = db.cursor_opt(&snap);
    db.put("k", "new").unwrap();
    c.seek("k");
    assert!(matches!(c.refresh(), Err(Error::NotSupported(_))));
    assert_eq!((c.key(), c.value()), (&b"k"[..], &b"old"[..]));

    let mut live = db.cursor();
    db.close().unwrap();
    assert!(matches!(live.refresh(), Err(Error::Closed)));

    let ro = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let mut c = ro.cursor();
    c.seek("k");
    assert!(matches!(c.refresh(), Err(Error::NotSupported(_))));
    assert_eq!(c.value(), b"new");
}
