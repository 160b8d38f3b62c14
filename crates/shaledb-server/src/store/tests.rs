//! Unit tests of the commit step's overlay and of the merged reads (`store`).

use super::*;
use crate::keys::{self, Type};
use shaledb::{Db, Options};

fn open(dir: &std::path::Path) -> Db {
    Db::open(dir, Options { create_if_missing: true, ..Options::default() }).unwrap()
}

fn collect(s: Scan<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.map(|r| r.unwrap_or_else(|e| panic!("scan failed: {e:?}"))).collect()
}

fn kv(k: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
fn reads_in_the_group_see_its_own_puts_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put(b"gone", b"engine").unwrap();
    db.put(b"kept", b"engine").unwrap();
    let mut ctx = WriteCtx::new(&db);
    ctx.begin(now_ms());
    ctx.put_raw(b"new", b"pending");
    ctx.put_raw(b"kept", b"overwritten");
    ctx.delete_raw(b"gone");
    assert_eq!(ctx.get_raw(b"new").unwrap().as_deref(), Some(&b"pending"[..]));
    assert_eq!(ctx.get_raw(b"kept").unwrap().as_deref(), Some(&b"overwritten"[..]));
    assert_eq!(ctx.get_raw(b"gone").unwrap(), None);
    {
        let v = ctx.view();
        assert_eq!(v.get_raw(b"new").unwrap().as_deref(), Some(&b"pending"[..]));
        assert_eq!(v.get_raw(b"gone").unwrap(), None);
        // A pinned view in the commit step still reads the pending writes.
        let p = v.pinned();
        assert_eq!(p.get_raw(b"kept").unwrap().as_deref(), Some(&b"overwritten"[..]));
    }
    // Nothing reached the engine before the group ends.
    assert_eq!(db.get(b"new").unwrap(), None);
    assert_eq!(db.get(b"gone").unwrap().as_deref(), Some(&b"engine"[..]));
    // A put after a delete in the same group, and a delete after a put.
    ctx.put_raw(b"gone", b"back");
    ctx.delete_raw(b"new");
    assert_eq!(ctx.get_raw(b"gone").unwrap().as_deref(), Some(&b"back"[..]));
    assert_eq!(ctx.get_raw(b"new").unwrap(), None);
    assert_eq!(ctx.finish(false), Ok(false));
    assert_eq!(db.get(b"gone").unwrap().as_deref(), Some(&b"back"[..]));
    assert_eq!(db.get(b"new").unwrap(), None);
    assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"overwritten"[..]));
}

#[test]
fn merged_scans_forward_and_reverse_with_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for k in ["a", "c", "e", "g", "i"] {
        db.put(k.as_bytes(), b"e").unwrap();
    }
    let mut ctx = WriteCtx::new(&db);
    ctx.begin(now_ms());
    ctx.put_raw(b"b", b"p"); // a new key between engine keys
    ctx.put_raw(b"c", b"p"); // an overwrite
    ctx.delete_raw(b"e"); // hides an engine key
    ctx.delete_raw(b"f"); // a delete of nothing
    ctx.put_raw(b"h", b"p"); // new, next to the upper bound
    ctx.put_raw(b"i", b"p"); // outside [b, i)
    ctx.put_raw(b"0", b"p"); // before the lower bound
    let v = ctx.view();
    let fwd = collect(v.scan(b"b", b"i", false));
    assert_eq!(fwd, vec![kv("b", "p"), kv("c", "p"), kv("g", "e"), kv("h", "p")]);
    let mut rev = collect(v.scan(b"b", b"i", true));
    rev.reverse();
    assert_eq!(rev, fwd);
    // Whole range, both directions.
    let all = collect(v.scan(b"", b"\xff", false));
    let names: Vec<&[u8]> = all.iter().map(|(k, _)| &k[..]).collect();
    assert_eq!(names, vec![&b"0"[..], b"a", b"b", b"c", b"g", b"h", b"i"]);
    let mut all_rev = collect(v.scan(b"", b"\xff", true));
    all_rev.reverse();
    assert_eq!(all_rev, all);
    // Only pending entries in range, only engine entries in range, and an empty range.
    assert_eq!(collect(v.scan(b"h", b"hz", true)), vec![kv("h", "p")]);
    assert_eq!(collect(v.scan(b"g", b"gz", false)), vec![kv("g", "e")]);
    assert!(collect(v.scan(b"e", b"f", false)).is_empty(), "a pending delete hides the only key");
    assert!(collect(v.scan(b"x", b"b", false)).is_empty(), "lower >= upper");
    assert!(collect(v.scan(b"c", b"c", true)).is_empty());
    // The last engine key hidden, reverse: the scan goes on below it.
    drop(v);
    ctx.delete_raw(b"g");
    ctx.delete_raw(b"h");
    let v = ctx.view();
    assert_eq!(collect(v.scan(b"b", b"i", true)), vec![kv("c", "p"), kv("b", "p")]);
}

#[test]
fn members_start_at_a_part_in_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut ctx = WriteCtx::new(&db);
    ctx.begin(now_ms());
    let mut c = ctx.create_coll(b"h", Type::Hash);
    // A neighbouring version's members must never show.
    let mut other = ctx.create_coll(b"o", Type::Hash);
    for p in ["m1", "m3", "m5"] {
        ctx.put_member(&c, keys::SUB_MEMBER, p.as_bytes(), b"v").unwrap();
    }
    ctx.put_member(&other, keys::SUB_MEMBER, b"m2", b"x").unwrap();
    ctx.put_member(&c, keys::SUB_SCORE, b"s", b"").unwrap();
    c.size = 3;
    other.size = 1;
    ctx.put_coll(b"h", &c).unwrap();
    ctx.put_coll(b"o", &other).unwrap();
    assert_eq!(ctx.finish(false), Ok(false));
    // Applied to the engine; now pending changes on top.
    ctx.begin(now_ms());
    ctx.put_member(&c, keys::SUB_MEMBER, b"m2", b"p").unwrap();
    ctx.put_member(&c, keys::SUB_MEMBER, b"m4", b"p").unwrap();
    ctx.delete_member(&c, keys::SUB_MEMBER, b"m5");
    let parts = |it: Members<'_>| -> Vec<String> { it.map(|r| String::from_utf8(r.unwrap().0).unwrap()).collect() };
    let v = ctx.view();
    assert_eq!(parts(v.members(&c, keys::SUB_MEMBER, None, false)), ["m1", "m2", "m3", "m4"]);
    assert_eq!(parts(v.members(&c, keys::SUB_MEMBER, None, true)), ["m4", "m3", "m2", "m1"]);
    assert_eq!(parts(v.members(&c, keys::SUB_MEMBER, Some(b"m3"), false)), ["m3", "m4"]);
    assert_eq!(parts(v.members(&c, keys::SUB_MEMBER, Some(b"m25"), false)), ["m3", "m4"]);
    assert_eq!(parts(v.members(&c, keys::SUB_MEMBER, Some(b"m3"), true)), ["m3", "m2", "m1"]);
    assert_eq!(parts(v.members(&c, keys::SUB_MEMBER, Some(b"m25"), true)), ["m2", "m1"]);
    assert_eq!(parts(v.members(&c, keys::SUB_MEMBER, Some(b"m0"), true)), Vec::<String>::new());
    assert_eq!(parts(v.members(&c, keys::SUB_MEMBER, Some(b"\xff"), false)), Vec::<String>::new());
    assert_eq!(parts(v.members(&c, keys::SUB_SCORE, None, true)), ["s"]);
    let values: Vec<Vec<u8>> = v.members(&c, keys::SUB_MEMBER, None, false).map(|r| r.unwrap().1).collect();
    assert_eq!(values, vec![b"v".to_vec(), b"p".to_vec(), b"v".to_vec(), b"p".to_vec()]);
    drop(v);
    // The same through a connection's pinned read context once applied, and the snapshot holds.
    assert_eq!(ctx.finish(false), Ok(false));
    let r = ReadCtx::new(&db, crate::keys::Keyspace::Ordered, 0, now_ms());
    let p = r.pinned();
    db.put(keys::member_key(0, c.version, keys::SUB_MEMBER, b"m0"), b"late").unwrap();
    assert_eq!(parts(p.members(&c, keys::SUB_MEMBER, None, false)), ["m1", "m2", "m3", "m4"]);
    assert_eq!(parts(r.members(&c, keys::SUB_MEMBER, None, false)), ["m0", "m1", "m2", "m3", "m4"]);
    assert_eq!(p.get_coll(b"h", Type::Hash).unwrap(), Some(c.clone()));
    assert!(p.get_coll(b"h", Type::Set).is_err(), "WRONGTYPE");
}

#[test]
fn versions_are_never_reused_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    {
        let db = open(dir.path());
        let mut ctx = WriteCtx::new(&db);
        ctx.load_versions().unwrap();
        ctx.begin(now_ms());
        for db_index in [0u8, 3, 15] {
            ctx.db_index = db_index;
            let mut c = ctx.create_coll(b"k", Type::Set);
            ctx.put_member(&c, keys::SUB_MEMBER, b"m", b"").unwrap();
            c.size = 1;
            ctx.put_coll(b"k", &c).unwrap();
            seen.push(c.version);
        }
        assert_eq!(ctx.finish(true), Ok(true));
        drop(ctx);
        db.close().unwrap();
    }
    let db = open(dir.path());
    let mut ctx = WriteCtx::new(&db);
    ctx.load_versions().unwrap();
    ctx.begin(now_ms());
    let c = ctx.create_coll(b"k2", Type::Set);
    assert!(seen.iter().all(|&v| c.version > v), "{} after {seen:?}", c.version);
    // The registry records were written with the collections.
    for (db_index, v) in [0u8, 3, 15].into_iter().zip(&seen) {
        assert_eq!(db.get(keys::registry_key(db_index, *v)).unwrap().as_deref(), Some(&b"k"[..]));
    }
}

#[test]
fn a_cluster_members_versions_carry_their_slot_and_a_counter_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..40).map(|i| format!("key{i}")).collect();
    let mut seen = Vec::new();
    {
        let db = open(dir.path());
        let mut ctx = WriteCtx::new(&db);
        ctx.keyspace = keys::Keyspace::Slots;
        ctx.load_versions().unwrap();
        ctx.begin(now_ms());
        for n in &names {
            let mut c = ctx.create_coll(n.as_bytes(), Type::Set);
            ctx.put_member(&c, keys::SUB_MEMBER, b"m", b"").unwrap();
            c.size = 1;
            ctx.put_coll(n.as_bytes(), &c).unwrap();
            let slot = crate::cluster::key_slot(n.as_bytes());
            let (lo, hi) = keys::version_slot_range(slot);
            assert!((lo..hi).contains(&c.version), "{n}: version {:x} outside slot {slot}", c.version);
            seen.push(c.version);
        }
        assert_eq!(ctx.finish(true), Ok(true));
        // The meta key is slot first.
        let slot = crate::cluster::key_slot(b"key0");
        let mut mk = vec![0, keys::KIND_META];
        mk.extend_from_slice(&slot.to_be_bytes());
        mk.extend_from_slice(b"key0");
        assert!(db.get(&mk).unwrap().is_some());
        assert_eq!(keys::Keyspace::Slots.user_key(0, &mk), Some(&b"key0"[..]));
        drop(ctx);
        db.close().unwrap();
    }
    let counters: std::collections::BTreeSet<u64> = seen.iter().map(|v| v & keys::VERSION_COUNTER_MAX).collect();
    assert_eq!(counters.len(), names.len(), "each version has its own counter");
    // After a restart, from the counter record; and without it, from the registry, slot by slot.
    for drop_record in [false, true] {
        let db = open(dir.path());
        if drop_record {
            db.delete(keys::NEXT_VERSION_KEY).unwrap();
        }
        let mut ctx = WriteCtx::new(&db);
        ctx.keyspace = keys::Keyspace::Slots;
        ctx.load_versions().unwrap();
        ctx.begin(now_ms());
        let c = ctx.create_coll(b"later", Type::Set);
        let counter = c.version & keys::VERSION_COUNTER_MAX;
        assert!(counters.iter().all(|&v| counter > v), "{counter} after {counters:?} (record dropped: {drop_record})");
        drop(ctx);
        db.close().unwrap();
    }
}

#[test]
fn empty_collections_are_deleted_and_their_versions_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut ctx = WriteCtx::new(&db);
    ctx.begin(now_ms());
    let mut c = ctx.get_or_create_coll(b"s", Type::Set).unwrap();
    ctx.put_member(&c, keys::SUB_MEMBER, b"a", b"").unwrap();
    c.size = 1;
    ctx.put_coll(b"s", &c).unwrap();
    assert_eq!(ctx.get_coll(b"s", Type::Set).unwrap(), Some(c.clone()));
    assert!(ctx.get_coll(b"s", Type::Hash).is_err());
    ctx.delete_member(&c, keys::SUB_MEMBER, b"a");
    c.size = 0;
    ctx.put_coll(b"s", &c).unwrap();
    assert_eq!(ctx.get_coll(b"s", Type::Set).unwrap(), None);
    assert_eq!(ctx.dropped, vec![(0, c.version)]);
}
