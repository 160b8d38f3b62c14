//! Prefix extractors (issue 16): prefix bloom filters in tables and memtables, `prefix_same_as_start` and
//! `total_order_seek` on cursors, `whole_key_filtering = false`. Every answer is checked against a model
//! (a `BTreeMap` of what was written); the filters' effect is checked through the read statistics.

use crate::tiny_options;
use shaledb::{Cursor, Db, Options, PrefixExtractor, ReadOptions};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys `pNNN-kkkk` for even prefixes NNN only (odd ones are absent), spread over the active memtable, L0
/// and deeper levels, with some deletions and overwrites.
fn populate(db: &Db) -> Model {
    let mut model = Model::new();
    for round in 0..3u32 {
        for p in (0..60u32).step_by(2) {
            for k in (round..12).step_by(3) {
                let (key, value) = (format!("p{p:03}-{k:04}").into_bytes(), format!("v{p}-{k}-{round}").into_bytes());
                db.put(&key, &value).unwrap();
                model.insert(key, value);
            }
        }
        let gone = format!("p{:03}-{:04}", 4 * round, round).into_bytes();
        db.delete(&gone).unwrap();
        model.remove(&gone);
        match round {
            0 => db.compact_range(None, None).unwrap(),
            1 => db.flush().unwrap(),
            _ => {} // round 2 stays in the memtable
        }
    }
    model
}

fn prefix_options(ex: PrefixExtractor) -> Options {
    Options { prefix_extractor: Some(ex), memtable_prefix_bloom_size_ratio: 0.1, ..tiny_options() }
}

fn confined() -> ReadOptions {
    ReadOptions { prefix_same_as_start: true, ..ReadOptions::default() }
}

/// Keys from the cursor's position on, at most `limit`, stepping with `next` (or `prev`).
fn walk(c: &mut Cursor, forward: bool, limit: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while c.valid() && out.len() < limit {
        out.push(c.key().to_vec());
        if forward {
            c.next()
        } else {
            c.prev()
        }
    }
    c.status().unwrap();
    out
}

/// What a cursor confined to `target`'s prefix yields after `seek` (forward) or `seek_for_prev` (backward).
/// The first 100 of them, as [`walk`] takes.
fn expected(model: &Model, ex: PrefixExtractor, target: &[u8], forward: bool) -> Vec<Vec<u8>> {
    let Some(p) = ex.prefix(target) else {
        // Outside the extractor's domain: total order.
        return if forward {
            model.keys().filter(|k| k.as_slice() >= target).take(100).cloned().collect()
        } else {
            model.keys().rev().filter(|k| k.as_slice() <= target).take(100).cloned().collect()
        };
    };
    let same = |k: &&Vec<u8>| ex.prefix(k) == Some(p);
    if forward {
        model.keys().filter(|k| k.as_slice() >= target).filter(same).take(100).cloned().collect()
    } else {
        model.keys().rev().filter(|k| k.as_slice() <= target).filter(same).take(100).cloned().collect()
    }
}

fn targets() -> Vec<Vec<u8>> {
    let mut t: Vec<Vec<u8>> = Vec::new();
    for p in 0..62u32 {
        for k in [0u32, 5, 11, 99] {
            t.push(format!("p{p:03}-{k:04}").into_bytes());
        }
        t.push(format!("p{p:03}").into_bytes());
    }
    t
}

#[test]
fn prefix_same_as_start_yields_exactly_the_prefix_in_both_directions() {
    for ex in [PrefixExtractor::Fixed(4), PrefixExtractor::Capped(4)] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), prefix_options(ex)).unwrap();
        let model = populate(&db);
        let mut c = db.cursor_opt(&confined());
        for t in targets() {
            c.seek(&t);
            assert_eq!(walk(&mut c, true, 100), expected(&model, ex, &t, true), "{ex} seek {t:?}");
            c.seek_for_prev(&t);
            assert_eq!(walk(&mut c, false, 100), expected(&model, ex, &t, false), "{ex} seek_for_prev {t:?}");
        }
        // Direction changes inside the prefix stay inside it.
        c.seek("p010-0005");
        c.prev();
        assert_eq!(c.key(), b"p010-0004");
        c.next();
        c.next();
        assert_eq!(c.key(), b"p010-0006");
        c.seek("p010-0000");
        c.prev();
        assert!(!c.valid(), "prev from a prefix's first key leaves the prefix");
        // seek_to_first / seek_to_last are never confined.
        c.seek_to_first();
        assert_eq!(walk(&mut c, true, usize::MAX).len(), model.len());
        c.seek_to_last();
        assert_eq!(walk(&mut c, false, usize::MAX).len(), model.len());
    }
}

#[test]
fn a_target_outside_the_domain_and_total_order_seek_read_in_total_order() {
    let ex = PrefixExtractor::Fixed(4);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), prefix_options(ex)).unwrap();
    let model = populate(&db);
    let all: Vec<Vec<u8>> = model.keys().cloned().collect();
    // "p0" is shorter than the fixed prefix: no prefix, total order.
    let mut c = db.cursor_opt(&confined());
    c.seek("p0");
    assert_eq!(walk(&mut c, true, usize::MAX), all);
    let total = ReadOptions { total_order_seek: true, ..confined() };
    let mut c = db.cursor_opt(&total);
    c.seek("p010-0000");
    let from: Vec<Vec<u8>> = model.keys().filter(|k| k.as_slice() >= &b"p010-0000"[..]).cloned().collect();
    assert_eq!(walk(&mut c, true, usize::MAX), from);
    // Without prefix_same_as_start a cursor never depends on the extractor.
    let mut c = db.cursor();
    c.seek("p010-0000");
    assert_eq!(walk(&mut c, true, usize::MAX), from);
}

#[test]
fn the_callers_bounds_still_apply_inside_the_prefix() {
    let ex = PrefixExtractor::Fixed(4);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), prefix_options(ex)).unwrap();
    let model = populate(&db);
    let opts = ReadOptions {
        iterate_lower_bound: Some(b"p010-0003".to_vec()),
        iterate_upper_bound: Some(b"p010-0008".to_vec()),
        ..confined()
    };
    let mut c = db.cursor_opt(&opts);
    c.seek("p010-0000");
    let want: Vec<Vec<u8>> = model
        .keys()
        .filter(|k| k.as_slice() >= &b"p010-0003"[..] && k.as_slice() < &b"p010-0008"[..])
        .cloned()
        .collect();
    assert_eq!(walk(&mut c, true, usize::MAX), want);
    c.seek_for_prev("p010-9999");
    assert_eq!(walk(&mut c, false, usize::MAX), want.iter().rev().cloned().collect::<Vec<_>>());
    // After a confined seek, seek_to_first restores the caller's bounds.
    c.seek_to_first();
    assert_eq!(walk(&mut c, true, usize::MAX), want);
}

#[test]
fn seeks_into_absent_prefixes_skip_tables_by_their_filters() {
    let ex = PrefixExtractor::Fixed(4);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options { block_cache_size: 0, ..prefix_options(ex) }).unwrap();
    populate(&db);
    db.flush().unwrap();
    // No compaction may read blocks while they are counted (the counter is the database's).
    db.wait_for_compaction().unwrap();
    let blocks_for = |opts: &ReadOptions| {
        let mut c = db.cursor_opt(opts);
        let before = db.statistics().blocks_read;
        for p in (1..60u32).step_by(2) {
            c.seek(format!("p{p:03}-0000"));
            if opts.prefix_same_as_start && !opts.total_order_seek {
                assert!(!c.valid());
            }
            c.status().unwrap();
        }
        db.statistics().blocks_read - before
    };
    // Every table is open (and its index and filter read) before counting.
    blocks_for(&ReadOptions { total_order_seek: true, ..confined() });
    let total_order = blocks_for(&ReadOptions { total_order_seek: true, ..confined() });
    let filtered = blocks_for(&confined());
    // About 1% of filter probes are false positives, each costing a block.
    assert!(total_order >= 10 && filtered * 5 <= total_order, "{filtered} blocks with filters, {total_order} without");
}

#[test]
fn whole_key_filtering_off_filters_point_lookups_by_prefix() {
    let ex = PrefixExtractor::Fixed(4);
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { whole_key_filtering: false, ..prefix_options(ex) };
    let db = Db::open(dir.path(), opts).unwrap();
    let model = populate(&db);
    db.flush().unwrap();
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    let s0 = db.statistics();
    for p in (1..60u32).step_by(2) {
        assert_eq!(db.get(format!("p{p:03}-0001")).unwrap(), None);
    }
    // A missing key of a present prefix: the prefix filter cannot exclude it, and the lookup still answers.
    assert_eq!(db.get("p002-0500").unwrap(), None);
    let s1 = db.statistics();
    assert!(s1.bloom_useful - s0.bloom_useful >= 25, "prefix filters excluded {}", s1.bloom_useful - s0.bloom_useful);
}

#[test]
fn changing_the_extractor_between_opens_never_loses_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let model = {
        let db = Db::open(dir.path(), prefix_options(PrefixExtractor::Fixed(4))).unwrap();
        let m = populate(&db);
        db.close().unwrap();
        m
    };
    for ex in [PrefixExtractor::Fixed(2), PrefixExtractor::Capped(4), PrefixExtractor::Fixed(6)] {
        let opts = Options { whole_key_filtering: false, ..prefix_options(ex) };
        let db = Db::open(dir.path(), opts).unwrap();
        for (k, v) in &model {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{ex}");
        }
        let mut c = db.cursor_opt(&confined());
        for t in targets() {
            c.seek(&t);
            assert_eq!(walk(&mut c, true, 100), expected(&model, ex, &t, true), "{ex} seek {t:?}");
        }
        db.close().unwrap();
    }
    // No extractor at all: every table is read in total order.
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    assert_eq!(db.iter().count(), model.len());
}

#[test]
fn invalid_prefix_options_are_refused() {
    for opts in [
        Options { prefix_extractor: Some(PrefixExtractor::Fixed(0)), ..tiny_options() },
        Options { memtable_prefix_bloom_size_ratio: 0.5, ..tiny_options() },
        Options { memtable_prefix_bloom_size_ratio: -0.1, ..tiny_options() },
        Options { memtable_prefix_bloom_size_ratio: f64::NAN, ..tiny_options() },
    ] {
        let dir = tempfile::tempdir().unwrap();
        let err = Db::open(dir.path(), opts).unwrap_err().to_string();
        assert!(err.contains("prefix"), "{err}");
    }
}
