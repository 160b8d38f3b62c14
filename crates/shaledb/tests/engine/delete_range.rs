//! `Db::delete_range`: RocksDB's DeleteRange semantics case by case (half-open ranges, sequence order within a
//! batch, snapshots, merges, both iteration directions, multi_get, WAL replay), a model-oracle run and a
//! power-loss sweep.
//!
//! Tombstones in memtables (a large `write_buffer_size`), flushed into tables, and carried through
//! compactions (`churning` options: tiny memtables and levels).

use shaledb::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};
use shaledb_testkit::rand::{rngs::StdRng, Rng};
use shaledb_testkit::{rng, MemFs, Model, PowerLoss};
use std::sync::Arc;

fn memtable_only() -> Options {
    Options {
        write_buffer_size: 64 << 20,
        disable_auto_compactions: true,
        merge_operator: shaledb::merge::builtin("stringappend"),
        ..Options::default()
    }
}

fn fresh() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), memtable_only()).unwrap();
    (dir, db)
}

fn keys(db: &Db, opts: &ReadOptions) -> Vec<Vec<u8>> {
    db.iter_opt(opts).map(|e| e.map(|(k, _)| k)).collect::<shaledb::Result<_>>().expect("scan")
}

fn keys_back(db: &Db, opts: &ReadOptions) -> Vec<Vec<u8>> {
    let mut c = db.cursor_opt(opts);
    c.seek_to_last();
    let mut out = Vec::new();
    while c.valid() {
        out.push(c.key().to_vec());
        c.prev();
    }
    c.status().expect("backward scan");
    out
}

fn v(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn put_all(db: &Db, ks: &[&str]) {
    for k in ks {
        db.put(k, format!("v-{k}")).unwrap();
    }
}

#[test]
fn range_is_half_open_in_get_multi_get_and_both_directions() {
    let (_d, db) = fresh();
    put_all(&db, &["a", "b", "b0", "c", "d", "e"]);
    db.delete_range("b", "d").unwrap();
    assert_eq!(db.get("a").unwrap(), Some(v("v-a")));
    assert_eq!(db.get("b").unwrap(), None, "begin is inclusive");
    assert_eq!(db.get("b0").unwrap(), None);
    assert_eq!(db.get("c").unwrap(), None);
    assert_eq!(db.get("d").unwrap(), Some(v("v-d")), "end is exclusive");
    let got: Vec<Option<Vec<u8>>> = db.multi_get(["a", "b", "c", "d", "zz"]).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, vec![Some(v("v-a")), None, None, Some(v("v-d")), None]);
    let want = vec![v("a"), v("d"), v("e")];
    assert_eq!(keys(&db, &ReadOptions::default()), want);
    let mut back = want.clone();
    back.reverse();
    assert_eq!(keys_back(&db, &ReadOptions::default()), back);
    let mut c = db.cursor();
    c.seek("b");
    assert_eq!(c.key(), b"d");
    c.seek_for_prev("c");
    assert_eq!(c.key(), b"a");
    c.next();
    assert_eq!(c.key(), b"d");
    c.prev();
    assert_eq!(c.key(), b"a");
}

#[test]
fn writes_after_the_tombstone_are_live_and_batch_order_decides() {
    let (_d, db) = fresh();
    put_all(&db, &["k1", "k2", "k3"]);
    db.delete_range("k", "l").unwrap();
    db.put("k2", "new").unwrap();
    assert_eq!(keys(&db, &ReadOptions::default()), vec![v("k2")]);
    assert_eq!(db.get("k2").unwrap(), Some(v("new")));

    // Within one batch each record takes the next sequence number: a put before the range deletion is
    // deleted by it, one after survives (RocksDB's batch semantics).
    let mut b = WriteBatch::new();
    b.put("x1", "1").delete_range("x", "y").put("x2", "2");
    db.write(&b).unwrap();
    assert_eq!(db.get("x1").unwrap(), None);
    assert_eq!(db.get("x2").unwrap(), Some(v("2")));
}

#[test]
fn snapshots_see_keys_as_of_their_sequence() {
    let (_d, db) = fresh();
    put_all(&db, &["a", "b", "c"]);
    let before = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    db.delete_range("a", "c").unwrap();
    let after = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    db.put("a", "again").unwrap();
    assert_eq!(db.get_opt(&before, "a").unwrap(), Some(v("v-a")));
    assert_eq!(db.get_opt(&before, "b").unwrap(), Some(v("v-b")));
    assert_eq!(keys(&db, &before), vec![v("a"), v("b"), v("c")]);
    assert_eq!(keys_back(&db, &before), vec![v("c"), v("b"), v("a")]);
    assert_eq!(db.get_opt(&after, "a").unwrap(), None);
    assert_eq!(keys(&db, &after), vec![v("c")]);
    assert_eq!(keys_back(&db, &after), vec![v("c")]);
    assert_eq!(keys(&db, &ReadOptions::default()), vec![v("a"), v("c")]);
    assert_eq!(db.get("a").unwrap(), Some(v("again")));
}

#[test]
fn merge_operands_stop_at_the_tombstone() {
    let (_d, db) = fresh();
    db.put("m", "base").unwrap();
    db.merge("m", "old").unwrap();
    db.delete_range("m", "n").unwrap();
    db.merge("m", "new").unwrap();
    // Operands above the tombstone merge onto nothing, as above a point deletion.
    assert_eq!(db.get("m").unwrap(), Some(v("new")));
    assert_eq!(db.iter().collect::<shaledb::Result<Vec<_>>>().unwrap(), vec![(v("m"), v("new"))]);
    assert_eq!(keys_back(&db, &ReadOptions::default()), vec![v("m")]);
    let mut c = db.cursor();
    c.seek_to_last();
    assert_eq!(c.value(), b"new");
}

#[test]
fn overlapping_tombstones_and_empty_or_inverted_ranges() {
    let (_d, db) = fresh();
    put_all(&db, &["a", "b", "c", "d", "e", "f"]);
    db.delete_range("b", "d").unwrap();
    db.delete_range("c", "f").unwrap();
    db.delete_range("a", "a").unwrap(); // empty: deletes nothing
    assert_eq!(keys(&db, &ReadOptions::default()), vec![v("a"), v("f")]);
    let err = db.delete_range("z", "y").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let mut b = WriteBatch::new();
    b.put("g", "1").delete_range("q", "p");
    assert!(matches!(db.write(&b), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get("g").unwrap(), None, "a refused batch writes nothing");
    // The whole key space, from the empty key.
    db.delete_range("", "\u{7f}").unwrap();
    assert!(keys(&db, &ReadOptions::default()).is_empty());
}

/// WAL replay rebuilds the tombstones (a read-only open replays without flushing), and a read-write open
/// flushes them into a table that keeps hiding the keys.
#[test]
fn tombstones_survive_a_reopen_by_wal_replay_and_by_flush() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), memtable_only()).unwrap();
        put_all(&db, &["a", "b", "c"]);
        db.delete_range_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, "b", "c").unwrap();
        db.put("b2", "after").unwrap();
        // Dropped without `close`: the WAL is all there is.
    }
    let check = |db: &Db| {
        assert_eq!(db.get("b").unwrap(), None);
        assert_eq!(keys(db, &ReadOptions::default()), vec![v("a"), v("b2"), v("c")]);
        assert_eq!(keys_back(db, &ReadOptions::default()), vec![v("c"), v("b2"), v("a")]);
    };
    check(&Db::open_read_only(dir.path(), memtable_only()).unwrap());
    let db = Db::open(dir.path(), memtable_only()).unwrap();
    check(&db);
    db.close().unwrap();
    check(&Db::open(dir.path(), memtable_only()).unwrap());
}

/// A flushed tombstone hides the keys of tables below it, in every read path; keys written after it live.
#[test]
fn flushed_tombstones_hide_keys_of_older_tables() {
    let (_d, db) = fresh();
    put_all(&db, &["a", "b", "c", "d", "e"]);
    db.flush().unwrap();
    let before = db.snapshot();
    db.delete_range("b", "d").unwrap();
    db.put("c", "new").unwrap();
    db.flush().unwrap();
    assert_eq!(db.property("rocksdb.num-files-at-level0").as_deref(), Some("2"));
    assert_eq!(db.get("b").unwrap(), None);
    assert_eq!(db.get("c").unwrap(), Some(v("new")));
    assert_eq!(keys(&db, &ReadOptions::default()), vec![v("a"), v("c"), v("d"), v("e")]);
    assert_eq!(keys_back(&db, &ReadOptions::default()), vec![v("e"), v("d"), v("c"), v("a")]);
    let got: Vec<_> = db.multi_get(["a", "b", "c", "d"]).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, vec![Some(v("v-a")), None, Some(v("new")), Some(v("v-d"))]);
    // The snapshot taken before the deletion still sees every key, through the tables.
    let old = ReadOptions { snapshot: Some(before), ..ReadOptions::default() };
    assert_eq!(keys(&db, &old), vec![v("a"), v("b"), v("c"), v("d"), v("e")]);
    assert_eq!(db.get_opt(&old, "b").unwrap(), Some(v("v-b")));
}

/// A memtable holding nothing but a tombstone makes a table of its own, whose key range is the tombstone's.
#[test]
fn a_memtable_of_only_a_tombstone_makes_a_table() {
    let (_d, db) = fresh();
    put_all(&db, &["k1", "k2", "k3"]);
    db.flush().unwrap();
    db.delete_range("k1", "k3").unwrap();
    db.flush().unwrap();
    assert_eq!(db.property("rocksdb.num-files-at-level0").as_deref(), Some("2"));
    assert_eq!(keys(&db, &ReadOptions::default()), vec![v("k3")]);
    assert_eq!(db.get("k2").unwrap(), None);
}

/// Compaction drops the keys a tombstone covers and, at the bottom with no snapshot, the tombstone too; with a
/// snapshot older than the tombstone both stay, and the snapshot still reads the keys.
#[test]
fn compaction_drops_covered_keys_and_bottom_tombstones_unless_a_snapshot_needs_them() {
    let (_d, db) = fresh();
    for i in 0..200 {
        db.put(format!("k{i:03}"), "x".repeat(100)).unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    db.delete_range("k050", "k150").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let old = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
    assert_eq!(keys(&db, &old).len(), 200, "the snapshot still sees the deleted keys");
    assert_eq!(keys(&db, &ReadOptions::default()).len(), 100);
    assert_eq!(db.property_int("rocksdb.estimate-num-keys"), Some(200), "the snapshot keeps the covered keys");
    drop(old);
    drop(snap);
    // Rewrite the bottom file (a manual compaction leaves a lone bottom file alone, as RocksDB's default
    // `bottommost_level_compaction` does): an L0 file spanning its range pulls it in.
    db.put("k000", "x".repeat(100)).unwrap();
    db.put("k199", "x".repeat(100)).unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(keys(&db, &ReadOptions::default()).len(), 100);
    assert_eq!(db.get("k100").unwrap(), None);
    assert_eq!(db.get("k150").unwrap(), Some("x".repeat(100).into_bytes()));
    assert_eq!(db.property_int("rocksdb.estimate-num-keys"), Some(100), "covered keys are gone");
    // The tombstone went too: a key written at the bottom under its old range is not hidden by anything.
    db.put("k100", "back").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("k100").unwrap(), Some(v("back")));
}

/// Options that flush and compact often, so tombstones travel through tables of several levels.
fn churning() -> Options {
    Options {
        write_buffer_size: 4 << 10,
        target_file_size_base: 2 << 10,
        max_bytes_for_level_base: 8 << 10,
        level0_file_num_compaction_trigger: 2,
        merge_operator: shaledb::merge::builtin("stringappend"),
        ..Options::default()
    }
}

/// The model oracle: random puts, merges, deletes and range deletions against a `BTreeMap`, with gets,
/// multi_gets, scans both ways and snapshot reads checked as it goes, and reopens along the way (read-only:
/// WAL replay; read-write: replay and flush). Run memtable-only and with frequent flushes and compactions,
/// leveled and universal (range tombstones in tables of several levels and sorted runs, split between output
/// files, dropped at the bottom).
#[test]
fn random_ops_match_the_model() {
    let universal = Options { compaction_style: shaledb::CompactionStyle::Universal, ..churning() };
    // Tombstones cut at subcompaction boundaries.
    let split = Options { max_subcompactions: 4, target_file_size_base: 1 << 10, ..churning() };
    let runs = [("memtable", memtable_only()), ("churning", churning()), ("universal", universal), ("split", split)];
    for (name, opts) in runs {
        for seed in 0..4u64 {
            random_ops(name, &opts, seed);
        }
    }
}

/// Keys of the model runs: `k00` to `k79`.
const KEYS: usize = 80;

fn random_ops(name: &str, opts: &Options, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    let mut r = rng(seed);
    let key = |r: &mut StdRng| format!("k{:02}", r.gen_range(0..KEYS));
    let mut snaps: Vec<(ReadOptions, Model)> = Vec::new();
    // Values up to 300 bytes: with `churning`, several levels of several files each.
    let val = |i: usize| format!("v{i}-{}", "p".repeat(i % 301));
    for i in 0..600 {
        match r.gen_range(0..12) {
            0..=4 => {
                let k = key(&mut r);
                db.put(&k, val(i)).unwrap();
                model.put(k.as_bytes(), val(i).as_bytes());
            }
            5 => {
                let k = key(&mut r);
                db.delete(&k).unwrap();
                model.delete(k.as_bytes());
            }
            6 | 7 => {
                let (mut a, mut b) = (key(&mut r), key(&mut r));
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                db.delete_range(&a, &b).unwrap();
                model.delete_range(a.as_bytes(), b.as_bytes());
            }
            8 => {
                let k = key(&mut r);
                db.merge(&k, format!("m{i}")).unwrap();
                model.merge(k.as_bytes(), format!("m{i}").as_bytes(), |old, op| {
                    Some(match old {
                        Some(o) => [o, b",", op].concat(),
                        None => op.to_vec(),
                    })
                });
            }
            9 => {
                snaps.push((ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() }, model.snapshot()));
                if snaps.len() > 4 {
                    snaps.remove(0);
                }
            }
            10 if i % 100 == 0 => {
                let ro = Db::open_read_only(dir.path(), opts.clone()).unwrap();
                check(&ro, &ReadOptions::default(), &model, seed, i);
            }
            10 if i % 150 == 1 => {
                snaps.clear();
                drop(db);
                db = Db::open(dir.path(), opts.clone()).unwrap();
                check(&db, &ReadOptions::default(), &model, seed, i);
            }
            10 if i % 7 == 0 => db.compact_range(None, None).unwrap(),
            _ => {
                let k = key(&mut r);
                assert_eq!(
                    db.get(&k).unwrap().as_deref(),
                    model.get(k.as_bytes()),
                    "{name} seed {seed} op {i} get {k}"
                );
            }
        }
        if i % 50 == 49 {
            check(&db, &ReadOptions::default(), &model, seed, i);
            for (opts, m) in &snaps {
                check(&db, opts, m, seed, i);
            }
        }
    }
    db.wait_for_compaction().unwrap();
    check(&db, &ReadOptions::default(), &model, seed, 600);
    for (opts, m) in &snaps {
        check(&db, opts, m, seed, 600);
    }
}

fn check(db: &Db, opts: &ReadOptions, model: &Model, seed: u64, i: usize) {
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    let got = db.iter_opt(opts).collect::<shaledb::Result<Vec<_>>>().unwrap();
    assert_eq!(got, want, "seed {seed} op {i}: forward scan");
    let mut back: Vec<Vec<u8>> = want.iter().map(|(k, _)| k.clone()).collect();
    back.reverse();
    assert_eq!(keys_back(db, opts), back, "seed {seed} op {i}: backward scan");
    let probe: Vec<String> = (0..KEYS).map(|n| format!("k{n:02}")).collect();
    let got = db.multi_get_opt(opts, &probe);
    for (k, g) in probe.iter().zip(got) {
        assert_eq!(g.unwrap().as_deref(), model.get(k.as_bytes()), "seed {seed} op {i}: multi_get {k}");
    }
}

/// Power loss after each write of a workload mixing puts and range deletions, some synced: the reopened
/// database holds the state after a prefix of the acknowledged writes that includes every synced one.
#[test]
fn power_loss_sweep_with_range_deletions() {
    const DB: &str = "/db";
    let fs = MemFs::new();
    // Tiny memtables: flushes and compactions (and their MANIFEST edits) happen during the sweep too.
    let opts = Options { fs: Arc::new(fs.clone()), ..churning() };
    let db = Db::open(DB, opts.clone()).unwrap();
    fs.record_before(|op, _, _| op.is_mutation());
    let mut r = rng(7);
    // states[n]: the model after n acknowledged writes; synced[n]: whether write n (from 1) was synced.
    let mut states = vec![Model::new()];
    let mut synced = vec![false];
    for i in 0..120 {
        let mut m = states.last().unwrap().clone();
        let sync = r.gen_ratio(1, 6);
        let wo = WriteOptions { sync, ..WriteOptions::default() };
        let k = format!("k{:02}", r.gen_range(0..30));
        if r.gen_ratio(1, 4) {
            let end = format!("k{:02}", r.gen_range(0..30));
            let (a, b) = if k <= end { (k, end) } else { (end, k) };
            db.delete_range_opt(&wo, &a, &b).unwrap();
            m.delete_range(a.as_bytes(), b.as_bytes());
        } else {
            db.put_opt(&wo, &k, format!("v{i}")).unwrap();
            m.put(k.as_bytes(), format!("v{i}").as_bytes());
        }
        states.push(m);
        synced.push(sync);
        fs.set_tag(i + 1);
    }
    let recorded = fs.stop_recording();
    drop(db);
    assert!(recorded.len() > 20, "too few copies: {}", recorded.len());
    for (n, rec) in recorded.iter().enumerate() {
        let copy = rec.fs.deep_clone();
        copy.power_loss(PowerLoss::DropUnsynced, n as u64);
        let acked = rec.tag as usize;
        let last_synced = (0..=acked).rev().find(|&j| synced[j]).unwrap_or(0);
        let db = Db::open(DB, Options { fs: Arc::new(copy), ..churning() })
            .unwrap_or_else(|e| panic!("copy {n} (after {acked} writes): open failed: {e}"));
        let got = db.iter().collect::<shaledb::Result<Vec<_>>>().unwrap();
        // The write in flight when the copy was taken may have made it (a background job's copy can come after
        // its WAL sync, or after a flush that holds it, but before the loop counts it acknowledged).
        let in_flight = (acked + 1).min(states.len() - 1);
        let matching = (last_synced..=in_flight).find(|&j| {
            let want: Vec<(Vec<u8>, Vec<u8>)> = states[j].iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            want == got
        });
        assert!(
            matching.is_some(),
            "copy {n}: state after {acked} acknowledged writes is no prefix from {last_synced} to {in_flight}"
        );
    }
}

#[test]
fn bounded_and_prefix_scans_skip_covered_keys() {
    let dir = tempfile::tempdir().unwrap();
    let ex = shaledb::PrefixExtractor::Fixed(2);
    let opts = Options { prefix_extractor: Some(ex), memtable_prefix_bloom_size_ratio: 0.1, ..memtable_only() };
    let db = Db::open(dir.path(), opts).unwrap();
    put_all(&db, &["aa1", "aa2", "aa3", "ab1", "ab2", "ac1"]);
    db.delete_range("aa2", "ab2").unwrap();
    let range: Vec<Vec<u8>> = db.range(&b"aa"[..]..&b"ac"[..]).map(|e| e.unwrap().0).collect();
    assert_eq!(range, vec![v("aa1"), v("ab2")]);
    let mut rev: Vec<Vec<u8>> = db.range(&b"aa2"[..]..&b"ac"[..]).rev().map(|e| e.unwrap().0).collect();
    rev.reverse();
    assert_eq!(rev, vec![v("ab2")]);
    let prefix: Vec<Vec<u8>> = db.prefix("ab").map(|e| e.unwrap().0).collect();
    assert_eq!(prefix, vec![v("ab2")]);
    let mut c = db.cursor_opt(&ReadOptions { prefix_same_as_start: true, ..ReadOptions::default() });
    c.seek("aa2");
    assert!(!c.valid(), "aa2 and aa3 are deleted, and the cursor stays in the prefix aa");
    c.status().unwrap();
    c.seek("ab");
    assert_eq!(c.key(), b"ab2");
}

#[test]
fn ttl_mode_passes_range_deletions_through() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with_ttl(dir.path(), Options { merge_operator: None, ..memtable_only() }, 3600).unwrap();
    put_all(&db, &["a", "b", "c"]);
    db.delete_range("a", "c").unwrap();
    assert_eq!(db.get("a").unwrap(), None);
    assert_eq!(db.get("c").unwrap(), Some(v("v-c")));
    assert_eq!(keys(&db, &ReadOptions::default()), vec![v("c")]);
}

// ---- range-deletion-aware iteration: cursors seek past covered stretches ----------------------------------

/// The model's entries within `[lower, upper)`.
fn model_in(model: &Model, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let lo = lower.map_or(Unbounded, Included);
    let hi = upper.map_or(Unbounded, Excluded);
    model.range(lo, hi).map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
}

fn at(c: &shaledb::Cursor) -> Option<(Vec<u8>, Vec<u8>)> {
    c.valid().then(|| (c.key().to_vec(), c.value().to_vec()))
}

/// A cursor at `opts` with the bounds against `want` (the model within them): full scans both ways, then
/// seeks and seek_for_prevs at random keys each followed by steps both ways.
fn cursor_matches(db: &Db, opts: &ReadOptions, want: &[(Vec<u8>, Vec<u8>)], r: &mut StdRng, what: &str) {
    let mut c = db.cursor_opt(opts);
    let mut got = Vec::new();
    c.seek_to_first();
    while let Some(e) = at(&c) {
        got.push(e);
        c.next();
    }
    c.status().unwrap();
    assert_eq!(got, want, "{what}: forward scan");
    let mut back = Vec::new();
    c.seek_to_last();
    while let Some(e) = at(&c) {
        back.push(e);
        c.prev();
    }
    c.status().unwrap();
    back.reverse();
    assert_eq!(back, want, "{what}: backward scan");
    for _ in 0..24 {
        let target = format!("k{:04}", r.gen_range(0..DR_KEYS + 10));
        let (mut pos, forward) = if r.gen_bool(0.5) {
            c.seek(&target);
            let p = want.partition_point(|(k, _)| k.as_slice() < target.as_bytes());
            (p as isize, true)
        } else {
            c.seek_for_prev(&target);
            let p = want.partition_point(|(k, _)| k.as_slice() <= target.as_bytes());
            (p as isize - 1, false)
        };
        // Steps mostly in the seek's direction, then a turn.
        for step in 0..6 {
            let expect = usize::try_from(pos).ok().and_then(|p| want.get(p)).cloned();
            assert_eq!(
                at(&c),
                expect,
                "{what}: {} {target} then {step} steps",
                if forward { "seek" } else { "seek_for_prev" }
            );
            if expect.is_none() {
                break;
            }
            let ahead = (step < 4) == forward;
            if ahead {
                c.next();
                pos += 1;
            } else {
                c.prev();
                pos -= 1;
            }
        }
        c.status().unwrap();
    }
}

const DR_KEYS: usize = 400;

/// Random puts, deletes, merges and wide range deletions over flushed tables of several levels, the memtable
/// and snapshots: cursors (which seek sources past covered stretches) read exactly what a `BTreeMap` model
/// says in scans both ways, seeks and seek_for_prevs with steps, unbounded and between random bounds.
#[test]
fn cursors_over_covered_stretches_match_the_model_across_levels_snapshots_and_bounds() {
    let opts = Options {
        write_buffer_size: 16 << 10,
        target_file_size_base: 4 << 10,
        max_bytes_for_level_base: 16 << 10,
        level0_file_num_compaction_trigger: 3,
        merge_operator: shaledb::merge::builtin("stringappend"),
        ..Options::default()
    };
    for seed in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut model = Model::new();
        let mut r = rng(100 + seed);
        let key = |r: &mut StdRng| format!("k{:04}", r.gen_range(0..DR_KEYS));
        let mut snaps: Vec<(ReadOptions, Model)> = Vec::new();
        // The most levels holding tables at a check.
        let mut most_levels = 0;
        for i in 0..2000 {
            match r.gen_range(0..100) {
                0..=54 => {
                    let (k, val) = (key(&mut r), format!("v{i}-{}", "x".repeat(i % 90)));
                    db.put(&k, &val).unwrap();
                    model.put(k.as_bytes(), val.as_bytes());
                }
                55..=62 => {
                    let k = key(&mut r);
                    db.delete(&k).unwrap();
                    model.delete(k.as_bytes());
                }
                63..=68 => {
                    let k = key(&mut r);
                    db.merge(&k, format!("m{i}")).unwrap();
                    model.merge(k.as_bytes(), format!("m{i}").as_bytes(), |old, op| {
                        Some(match old {
                            Some(o) => [o, b",", op].concat(),
                            None => op.to_vec(),
                        })
                    });
                }
                69..=80 => {
                    let a = r.gen_range(0..DR_KEYS);
                    let b = (a + r.gen_range(1..120)).min(DR_KEYS + 5);
                    let (a, b) = (format!("k{a:04}"), format!("k{b:04}"));
                    db.delete_range(&a, &b).unwrap();
                    model.delete_range(a.as_bytes(), b.as_bytes());
                }
                81..=84 => db.flush().unwrap(),
                85 | 86 => {
                    let (a, b) = (key(&mut r), key(&mut r));
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    db.compact_range(Some(a.as_bytes()), Some(b.as_bytes())).unwrap();
                }
                87 | 88 => {
                    snaps.push((
                        ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() },
                        model.snapshot(),
                    ));
                    if snaps.len() > 3 {
                        snaps.remove(0);
                    }
                }
                _ => {
                    let k = key(&mut r);
                    assert_eq!(db.get(&k).unwrap().as_deref(), model.get(k.as_bytes()), "seed {seed} op {i} get {k}");
                }
            }
            if i % 250 == 249 {
                most_levels = most_levels.max(db.statistics().levels.iter().filter(|l| l.files > 0).count());
                let views =
                    std::iter::once((ReadOptions::default(), &model)).chain(snaps.iter().map(|(o, m)| (o.clone(), m)));
                for (n, (ro, m)) in views.enumerate() {
                    let what = format!("seed {seed} op {i} view {n}");
                    cursor_matches(&db, &ro, &model_in(m, None, None), &mut r, &what);
                    let (mut lo, mut hi) = (key(&mut r), key(&mut r));
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let bounded = ReadOptions {
                        iterate_lower_bound: Some(lo.clone().into_bytes()),
                        iterate_upper_bound: Some(hi.clone().into_bytes()),
                        ..ro.clone()
                    };
                    let want = model_in(m, Some(lo.as_bytes()), Some(hi.as_bytes()));
                    cursor_matches(&db, &bounded, &want, &mut r, &format!("{what} [{lo}, {hi})"));
                }
            }
        }
        assert!(most_levels >= 2, "seed {seed}: tables in {most_levels} levels at most");
    }
}

/// The cost of a scan over a deleted range does not grow with the number of deleted keys: 40,000 keys in
/// tables (about a thousand data blocks), all but the 100 at each end deleted by one range tombstone, first in
/// the memtable and then flushed into an L0 table. Scans both ways, a seek into the deleted range and a
/// bounded scan read a few dozen blocks (the ends of the range, indexes), not the covered ones. A snapshot
/// older than the tombstone still reads every key.
#[test]
fn a_scan_over_a_deleted_range_reads_few_blocks() {
    const N: usize = 40_000;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { disable_auto_compactions: true, ..Options::default() };
    let db = Db::open(dir.path(), opts).unwrap();
    let key = |i: usize| format!("key{i:06}");
    let val = |i: usize| format!("{i:0100}");
    for i in 0..N {
        db.put(key(i), val(i)).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let before_tombstone = db.snapshot();
    db.delete_range(key(100), key(N - 100)).unwrap();
    let live: Vec<Vec<u8>> = (0..100).chain(N - 100..N).map(|i| key(i).into_bytes()).collect();
    // Reads that keep no block in the cache, so each scan pays for what it touches.
    let ro = ReadOptions { fill_cache: false, ..ReadOptions::default() };
    let blocks = |db: &Db| db.statistics().blocks_read;

    // Data blocks the tombstone covers: a full scan of the older snapshot reads them all.
    let start = blocks(&db);
    let old = ReadOptions { snapshot: Some(before_tombstone), ..ro.clone() };
    assert_eq!(db.iter_opt(&old).count(), N, "the snapshot predates the tombstone");
    let covered_blocks = blocks(&db) - start;
    assert!(covered_blocks > 500, "only {covered_blocks} blocks: too few for the test to mean anything");
    let few = covered_blocks / 20;

    for place in ["memtable", "L0 table"] {
        let start = blocks(&db);
        assert_eq!(keys(&db, &ro), live, "{place}: forward");
        let fwd = blocks(&db) - start;
        let start = blocks(&db);
        let mut back = keys_back(&db, &ro);
        back.reverse();
        assert_eq!(back, live, "{place}: backward");
        let bwd = blocks(&db) - start;
        let start = blocks(&db);
        let mut c = db.cursor_opt(&ro);
        c.seek(key(N / 2));
        assert_eq!(c.key(), key(N - 100).as_bytes(), "{place}: seek into the range");
        c.prev();
        assert_eq!(c.key(), key(99).as_bytes(), "{place}: back over the range");
        c.seek_for_prev(key(N / 3));
        assert_eq!(c.key(), key(99).as_bytes(), "{place}: seek_for_prev into the range");
        c.next();
        assert_eq!(c.key(), key(N - 100).as_bytes(), "{place}: forward over the range");
        let seeks = blocks(&db) - start;
        let start = blocks(&db);
        let bounded = ReadOptions {
            iterate_lower_bound: Some(key(50).into_bytes()),
            iterate_upper_bound: Some(key(N - 50).into_bytes()),
            ..ro.clone()
        };
        assert_eq!(keys(&db, &bounded).len(), 100, "{place}: bounded");
        let bnd = blocks(&db) - start;
        for (what, n) in [("forward", fwd), ("backward", bwd), ("seeks", seeks), ("bounded", bnd)] {
            assert!(n <= few, "{place}: {what} read {n} blocks, more than {few} ({covered_blocks} covered)");
        }
        db.flush().unwrap();
        assert_eq!(db.statistics().levels[0].files, 1, "the tombstone's table");
    }
}

/// A writer replaces a range again and again in one batch (a range deletion over it, then every key at a new
/// generation) while memtables flush and compact beneath two readers: every scan, both ways, and every seek into
/// the range sees exactly one whole generation. The tombstone of a batch sits in the memtable with the newer
/// keys of its own batch (never sought past) and over older memtables and tables (sought past).
#[test]
fn concurrent_scans_see_whole_generations_under_range_replacements() {
    const KEYS: usize = 60;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { write_buffer_size: 8 << 10, target_file_size_base: 4 << 10, ..Options::default() };
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    let key = |i: usize| format!("k{i:03}");
    let generation = |db: &Db, gen: usize| {
        let mut b = WriteBatch::new();
        b.delete_range("k", "l");
        for i in 0..KEYS {
            b.put(key(i), format!("g{gen:05}-{}", "v".repeat(40)));
        }
        db.write(&b).unwrap();
    };
    generation(&db, 0);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (db, done) = (Arc::clone(&db), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut scans = 0;
                while !done.load(std::sync::atomic::Ordering::Acquire) || scans < 10 {
                    let mut c = db.cursor();
                    let mut seen = Vec::new();
                    if (scans + t) % 2 == 0 {
                        c.seek_to_first();
                        while c.valid() {
                            seen.push((c.key().to_vec(), c.value().to_vec()));
                            c.next();
                        }
                    } else {
                        c.seek_to_last();
                        while c.valid() {
                            seen.push((c.key().to_vec(), c.value().to_vec()));
                            c.prev();
                        }
                        seen.reverse();
                    }
                    c.status().unwrap();
                    let keys: Vec<Vec<u8>> = seen.iter().map(|(k, _)| k.clone()).collect();
                    let want: Vec<Vec<u8>> = (0..KEYS).map(|i| key(i).into_bytes()).collect();
                    assert_eq!(keys, want, "scan {scans} of reader {t}");
                    assert!(seen.iter().all(|(_, v)| v == &seen[0].1), "scan {scans} of reader {t}: mixed generations");
                    c.seek(key(KEYS / 2));
                    assert_eq!(c.key(), key(KEYS / 2).as_bytes());
                    c.seek_for_prev(key(KEYS / 3));
                    assert_eq!(c.key(), key(KEYS / 3).as_bytes());
                    scans += 1;
                }
            })
        })
        .collect();
    for gen in 1..300 {
        generation(&db, gen);
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    db.wait_for_compaction().unwrap();
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter().collect::<shaledb::Result<_>>().unwrap();
    assert_eq!(got.len(), KEYS);
    assert!(got.iter().all(|(_, v)| v.starts_with(b"g00299-")));
}
