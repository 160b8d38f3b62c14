//! The Rust API's signature forms (issue 10): byte-string keys of any `AsRef<[u8]>` type, `range` over every
//! range expression, `iter`/`range`/`prefix` as double-ended Rust iterators, `cursor` for seeks.

use crate::tiny_options;
use shaledb::{Db, Options, ReadOptions, WriteBatch};
use std::ops::Bound;

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    (dir, db)
}

/// The keys an iterator yields, as strings (every entry must be `Ok`).
fn keys(it: impl Iterator<Item = shaledb::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<String> {
    it.map(|e| String::from_utf8(e.unwrap().0).unwrap()).collect()
}

/// The raw keys an iterator yields.
fn raw_keys(it: impl Iterator<Item = shaledb::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<Vec<u8>> {
    it.map(|e| e.unwrap().0).collect()
}

/// An owned `Vec<u8>` key or value (the form under test).
fn owned(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn letters(db: &Db) {
    for k in ["a", "b", "c", "d", "e"] {
        db.put(k, k.to_uppercase()).unwrap();
    }
}

#[test]
fn writes_and_reads_take_any_byte_string() {
    let (_dir, db) = open();
    db.put(b"lit", b"1").unwrap(); // &[u8; N]
    db.put("str", "2").unwrap(); // &str
    db.put(String::from("string"), String::from("3")).unwrap(); // String
    db.put(vec![0u8, 0xff], vec![4u8]).unwrap(); // Vec<u8>
    db.put(&b"slice"[..], [5u8; 2]).unwrap(); // &[u8], [u8; N]
    let borrowed = b"borrowed".to_vec();
    db.put(&borrowed, &borrowed).unwrap(); // &Vec<u8>
    assert_eq!(db.get(b"lit").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get("str").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(String::from("string")).unwrap(), Some(b"3".to_vec()));
    assert_eq!(db.get([0u8, 0xff]).unwrap(), Some(vec![4]));
    assert_eq!(db.get(owned("slice")).unwrap(), Some(vec![5, 5]));
    assert_eq!(db.get_opt(&ReadOptions::default(), &borrowed).unwrap(), Some(borrowed.clone()));
    db.delete("str").unwrap();
    db.delete(vec![0u8, 0xff]).unwrap();
    assert_eq!(db.get("str").unwrap(), None);
    assert_eq!(db.get(vec![0u8, 0xff]).unwrap(), None);
}

#[test]
fn merge_and_batches_take_any_byte_string() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { merge_operator: shaledb::merge::builtin("stringappend"), ..Options::default() };
    let db = Db::open(dir.path(), opts).unwrap();
    db.merge("m", "x").unwrap();
    db.merge(String::from("m"), owned("y")).unwrap();
    assert_eq!(db.get("m").unwrap(), Some(b"x,y".to_vec()));

    let mut b = WriteBatch::new();
    b.put("k1", String::from("v1")).put(vec![b'k', b'2'], b"v2").merge("m", "z").delete(String::from("gone"));
    db.put("gone", "soon").unwrap();
    db.write(&b).unwrap();
    assert_eq!(db.get("k1").unwrap(), Some(b"v1".to_vec()));
    assert_eq!(db.get("k2").unwrap(), Some(b"v2".to_vec()));
    assert_eq!(db.get("m").unwrap(), Some(b"x,y,z".to_vec()));
    assert_eq!(db.get("gone").unwrap(), None);
}

#[test]
fn range_takes_byte_literal_bounds() {
    let (_dir, db) = open();
    letters(&db);
    assert_eq!(keys(db.range(b"b"..b"d")), ["b", "c"]);
    assert_eq!(keys(db.range(b"b"..=b"d")), ["b", "c", "d"]);
    assert_eq!(keys(db.range(b"d"..)), ["d", "e"]);
    assert_eq!(keys(db.range(..b"b")), ["a"]);
    assert_eq!(keys(db.range(..=b"b")), ["a", "b"]);
    assert_eq!(keys(db.range(&b"a"[..]..&b"bb"[..])), ["a", "b"]);
    assert_eq!(keys(db.range(..)), ["a", "b", "c", "d", "e"]);
}

#[test]
fn range_takes_str_and_string_bounds() {
    let (_dir, db) = open();
    letters(&db);
    assert_eq!(keys(db.range("b".."d")), ["b", "c"]);
    assert_eq!(keys(db.range("bb"..="d")), ["c", "d"]);
    assert_eq!(keys(db.range(String::from("c")..)), ["c", "d", "e"]);
    let (lo, hi) = (String::from("a"), String::from("c"));
    assert_eq!(keys(db.range(&lo..&hi)), ["a", "b"]);
    assert_eq!(keys(db.range(lo.as_str()..=hi.as_str())), ["a", "b", "c"]);
}

#[test]
fn range_takes_vec_bounds_and_bound_pairs() {
    let (_dir, db) = open();
    letters(&db);
    assert_eq!(keys(db.range(b"b".to_vec()..b"d".to_vec())), ["b", "c"]);
    assert_eq!(keys(db.range(..=b"c".to_vec())), ["a", "b", "c"]);
    assert_eq!(keys(db.range((Bound::Excluded("b"), Bound::Included("d")))), ["c", "d"]);
    assert_eq!(keys(db.range((Bound::Excluded(b"d".to_vec()), Bound::Unbounded))), ["e"]);
    assert_eq!(keys(db.range((Bound::<&[u8]>::Unbounded, Bound::Excluded(&b"b"[..])))), ["a"]);
}

#[test]
fn empty_and_inverted_ranges_yield_nothing() {
    let (_dir, db) = open();
    letters(&db);
    assert!(keys(db.range("c".."c")).is_empty());
    assert!(keys(db.range("d".."b")).is_empty());
    assert!(keys(db.range("d"..="b").rev()).is_empty());
    assert!(keys(db.range((Bound::Excluded("c"), Bound::Excluded("c")))).is_empty());
    assert_eq!(keys(db.range("c"..="c")), ["c"]);
}

#[test]
fn iter_and_range_run_backwards_with_rev() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    // Spread over tables and the memtable, with deletions, so the reverse walk merges every source.
    for i in 0..600u32 {
        db.put(format!("k{i:04}"), format!("v{i}")).unwrap();
        if i % 200 == 199 {
            db.flush().unwrap();
        }
    }
    for i in (0..600u32).step_by(3) {
        db.delete(format!("k{i:04}")).unwrap();
    }
    let forward = keys(db.iter());
    assert_eq!(forward.len(), 400);
    let mut backward = keys(db.iter().rev());
    backward.reverse();
    assert_eq!(backward, forward);

    let rev = keys(db.range("k0100"..="k0110").rev());
    assert_eq!(rev, ["k0110", "k0109", "k0107", "k0106", "k0104", "k0103", "k0101", "k0100"]);
    let last = db.iter().next_back().unwrap().unwrap();
    assert_eq!(last, (b"k0599".to_vec(), b"v599".to_vec()));
    // Both ends of one iterator meet without overlap.
    let mut it = db.range(b"k0100"..b"k0106");
    assert_eq!(it.next().unwrap().unwrap().0, b"k0100");
    assert_eq!(it.next_back().unwrap().unwrap().0, b"k0104");
    assert_eq!(it.next().unwrap().unwrap().0, b"k0101");
    assert_eq!(it.next_back().unwrap().unwrap().0, b"k0103");
    assert!(it.next().is_none());
    assert!(it.next_back().is_none());
    assert!(it.next().is_none(), "fused: stays exhausted");
}

#[test]
fn iter_opt_and_range_opt_read_a_snapshot_and_keep_its_bounds() {
    let (_dir, db) = open();
    letters(&db);
    let snap = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    db.put("f", "F").unwrap();
    db.delete("a").unwrap();
    assert_eq!(keys(db.iter_opt(&snap)), ["a", "b", "c", "d", "e"]);
    assert_eq!(keys(db.iter()), ["b", "c", "d", "e", "f"]);
    assert_eq!(keys(db.range_opt(&snap, "a".."c")), ["a", "b"]);

    // The range narrows the options' bounds, never widens them.
    let bounded = ReadOptions {
        iterate_lower_bound: Some(b"b".to_vec()),
        iterate_upper_bound: Some(b"e".to_vec()),
        ..ReadOptions::default()
    };
    assert_eq!(keys(db.iter_opt(&bounded)), ["b", "c", "d"]);
    assert_eq!(keys(db.range_opt(&bounded, ..)), ["b", "c", "d"]);
    assert_eq!(keys(db.range_opt(&bounded, "a"..="z")), ["b", "c", "d"]);
    assert_eq!(keys(db.range_opt(&bounded, "c"..)), ["c", "d"]);
    assert_eq!(keys(db.range_opt(&bounded, .."c")), ["b"]);
    assert_eq!(keys(db.prefix_opt(&bounded, "d")), ["d"]);
    assert!(keys(db.prefix_opt(&bounded, "e")).is_empty());
}

#[test]
fn prefix_yields_exactly_the_keys_starting_with_it() {
    let (_dir, db) = open();
    for k in ["use", "user", "user:1", "user:2", "user:2:x", "user;", "users", "v"] {
        db.put(k, "").unwrap();
    }
    assert_eq!(keys(db.prefix("user:")), ["user:1", "user:2", "user:2:x"]);
    assert_eq!(keys(db.prefix(owned("user:")).rev()), ["user:2:x", "user:2", "user:1"]);
    assert_eq!(keys(db.prefix(String::from("user"))), ["user", "user:1", "user:2", "user:2:x", "user;", "users"]);
    assert_eq!(keys(db.prefix("")).len(), 8);
    assert!(keys(db.prefix("w")).is_empty());
}

#[test]
fn prefix_ending_in_0xff() {
    let (_dir, db) = open();
    let stored: [&[u8]; 9] = [
        &[0x61, 0xfe, 0xff],
        &[0x61, 0xff],
        &[0x61, 0xff, 0x00],
        &[0x61, 0xff, 0xff],
        &[0x61, 0xff, 0xff, 0x01],
        &[0x62],
        &[0xfe, 0xff, 0xff],
        &[0xff],
        &[0xff, 0xff, 0x05],
    ];
    for k in stored {
        db.put(k, b"").unwrap();
    }
    // The bound past the prefix is 0x62, not 0x61 0x100.
    let want: Vec<Vec<u8>> =
        vec![vec![0x61, 0xff], vec![0x61, 0xff, 0x00], vec![0x61, 0xff, 0xff], vec![0x61, 0xff, 0xff, 0x01]];
    assert_eq!(raw_keys(db.prefix([0x61, 0xff])), want);
    let mut back = raw_keys(db.prefix([0x61, 0xff]).rev());
    back.reverse();
    assert_eq!(back, want);
    assert_eq!(raw_keys(db.prefix([0x61, 0xff, 0xff])), want[2..]);
    // All-0xff prefixes have no key past them: the range runs to the end.
    assert_eq!(raw_keys(db.prefix([0xff])), [vec![0xff], vec![0xff, 0xff, 0x05]]);
    assert_eq!(raw_keys(db.prefix([0xff, 0xff]).rev()), [vec![0xff, 0xff, 0x05]]);
    assert_eq!(raw_keys(db.prefix([0xfe])), [vec![0xfe, 0xff, 0xff]]);
}

#[test]
fn cursor_seeks_with_any_byte_string() {
    let (_dir, db) = open();
    letters(&db);
    let mut c = db.cursor();
    assert!(!c.valid(), "a new cursor is unpositioned");
    c.seek("bb");
    assert_eq!((c.key(), c.value()), (&b"c"[..], &b"C"[..]));
    c.seek_for_prev(owned("bb"));
    assert_eq!(c.key(), b"b");
    c.prev();
    assert_eq!(c.key(), b"a");
    c.prev();
    assert!(!c.valid());
    c.status().unwrap();

    let opts = ReadOptions { iterate_lower_bound: Some(b"b".to_vec()), ..ReadOptions::default() };
    let mut c = db.cursor_opt(&opts);
    c.seek(String::from("a"));
    assert_eq!(c.key(), b"b", "seek below the lower bound lands on it");
    c.seek_to_last();
    assert_eq!(c.key(), b"e");
}
