//! The table layer on the ShaleDB engine.

use super::*;
use crate::db_bench::flags::BenchFlags;
use crate::engine::{Engine, EngineIter, WriteMode};
use std::sync::Arc;
use std::time::Duration;

fn open<E: Engine>() -> (tempfile::TempDir, E) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = E::open(&dir.path().join("db"), &BenchFlags::default()).expect("open");
    (dir, db)
}

/// sysbench's sbtest: id INT PK (index id 1), k INT with index k_1 (index id 2), c CHAR(120), pad CHAR(60).
fn sbtest() -> Table {
    let mut def = TableDef::sbtest(1);
    // Ids 1 and 2 keep the raw keys of these tests short to write.
    def.primary.id = 1;
    def.secondary[0].id = 2;
    Table::new(def).expect("valid schema")
}

#[test]
fn sbtest_schema() {
    let d = TableDef::sbtest(7);
    assert_eq!((d.name.as_str(), d.primary.id, d.secondary[0].id), ("sbtest7", 14, 15));
    assert_eq!(d.columns[2].ty, ColumnType::Char(120));
    assert_eq!(d.columns[3].ty, ColumnType::Char(60));
    assert!(Table::new(d).is_ok());
}

fn row(id: i64, k: i64, c: &str) -> Row {
    vec![Value::Int(id), Value::Int(k), Value::Str(c.as_bytes().to_vec()), Value::Str(b"pad".to_vec())]
}

/// Every raw entry of the engine, in key order.
fn raw<E: Engine>(db: &E) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(None, None);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("iterator");
    out
}

/// Raw keys of index id `id`.
fn raw_keys<E: Engine>(db: &E, id: u32) -> Vec<Vec<u8>> {
    raw(db).into_iter().map(|(k, _)| k).filter(|k| k[..4] == id.to_be_bytes()).collect()
}

fn int_key(id: u32, vals: &[i32]) -> Vec<u8> {
    let mut k = id.to_be_bytes().to_vec();
    for v in vals {
        k.extend_from_slice(&((*v as u32) ^ 0x8000_0000).to_be_bytes());
    }
    k
}

fn insert_get_and_duplicate_pk<E: Engine>() {
    let (_d, db) = open::<E>();
    let t = sbtest();
    let mut s = Session::new(&db, WriteMode::default());
    assert!(s.insert(&t, &row(1, 10, "one")).unwrap());
    assert!(!s.insert(&t, &row(1, 11, "other")).unwrap(), "duplicate PK refused");
    let mut out = Row::new();
    assert!(s.get(&t, &[Value::Int(1)], &mut out).unwrap());
    assert_eq!(out, row(1, 10, "one"));
    assert!(!s.get(&t, &[Value::Int(2)], &mut out).unwrap());
    // The duplicate wrote nothing: one PK record, one index entry.
    assert_eq!(raw(&db).len(), 2);
    let st = s.stats();
    assert_eq!((st.batches, st.entries, st.gets), (1, 2, 4));
    // Bad rows are errors.
    assert!(matches!(s.insert(&t, &row(1, 10, "x")[..3]), Err(TableError::Invalid(_))));
    assert!(matches!(s.insert(&t, &row(1 << 40, 10, "x")), Err(TableError::Invalid(_))));
    assert!(matches!(s.insert(&t, &row(3, 1, &"x".repeat(121))), Err(TableError::Invalid(_))));
}

fn insert_many_skips_existing_and_repeated<E: Engine>() {
    let (_d, db) = open::<E>();
    let t = sbtest();
    let mut s = Session::new(&db, WriteMode::default());
    assert!(s.insert(&t, &row(2, 20, "old")).unwrap());
    let rows = vec![row(3, 30, "a"), row(2, 99, "dup"), row(1, 10, "b"), row(3, 31, "again")];
    assert_eq!(s.insert_many(&t, &rows).unwrap(), 2);
    let mut out = Row::new();
    assert!(s.get(&t, &[Value::Int(3)], &mut out).unwrap());
    assert_eq!(out, row(3, 30, "a"), "the first of a repeated PK is inserted");
    assert!(s.get(&t, &[Value::Int(2)], &mut out).unwrap());
    assert_eq!(out, row(2, 20, "old"));
    assert_eq!(raw_keys(&db, 2), vec![int_key(2, &[10, 1]), int_key(2, &[20, 2]), int_key(2, &[30, 3])]);
    assert_eq!(s.stats().batches, 2);
}

fn secondary_lookup_and_range<E: Engine>() {
    let (_d, db) = open::<E>();
    let t = sbtest();
    let mut s = Session::new(&db, WriteMode::default());
    let rows: Vec<Row> = (1..=20).map(|i| row(i, i % 5, &format!("c{i}"))).collect();
    assert_eq!(s.insert_many(&t, &rows).unwrap(), 20);
    let k1 = t.index_position("k_1").unwrap();
    let mut ids = Vec::new();
    let n = s
        .lookup(&t, k1, &[Value::Int(3)], &mut |r| {
            ids.push(r[0].clone());
            true
        })
        .unwrap();
    assert_eq!(n, 4);
    assert_eq!(ids, [3, 8, 13, 18].map(Value::Int));
    let mut seen = Vec::new();
    let n = s
        .range_index(&t, k1, &[Value::Int(1)], &[Value::Int(2)], &mut |r| {
            seen.push((r[1].clone(), r[0].clone()));
            true
        })
        .unwrap();
    assert_eq!(n, 8);
    let want: Vec<_> = [(1, 1), (1, 6), (1, 11), (1, 16), (2, 2), (2, 7), (2, 12), (2, 17)]
        .iter()
        .map(|&(k, id)| (Value::Int(k), Value::Int(id)))
        .collect();
    assert_eq!(seen, want);
    // Stopping early.
    assert_eq!(s.range_index(&t, k1, &[Value::Int(0)], &[Value::Int(4)], &mut |_| false).unwrap(), 1);
    // PK range, and an empty range (lo > hi).
    let mut pks = Vec::new();
    let n = s
        .range_pk(&t, &[Value::Int(5)], &[Value::Int(9)], &mut |r| {
            pks.push(r[0].clone());
            true
        })
        .unwrap();
    assert_eq!(n, 5);
    assert_eq!(pks, (5..=9).map(Value::Int).collect::<Vec<_>>());
    assert_eq!(s.range_pk(&t, &[Value::Int(9)], &[Value::Int(5)], &mut |_| true).unwrap(), 0);
    assert!(matches!(s.lookup(&t, 7, &[Value::Int(1)], &mut |_| true), Err(TableError::Invalid(_))));
}

fn update_of_indexed_column_moves_the_entry<E: Engine>() {
    let (_d, db) = open::<E>();
    let t = sbtest();
    let mut s = Session::new(&db, WriteMode::default());
    s.insert(&t, &row(7, 100, "c")).unwrap();
    assert!(s.update(&t, &[Value::Int(7)], &mut |r| r[1] = Value::Int(200)).unwrap());
    assert_eq!(raw_keys(&db, 2), vec![int_key(2, &[200, 7])]);
    assert_eq!(s.lookup(&t, 0, &[Value::Int(100)], &mut |_| true).unwrap(), 0, "old entry gone");
    let mut found = Vec::new();
    s.lookup(&t, 0, &[Value::Int(200)], &mut |r| {
        found.push(r.clone());
        true
    })
    .unwrap();
    assert_eq!(found, vec![row(7, 200, "c")]);
    // A missing row is not updated; changing the PK is refused and writes nothing.
    assert!(!s.update(&t, &[Value::Int(8)], &mut |r| r[1] = Value::Int(1)).unwrap());
    let before = raw(&db);
    assert!(matches!(s.update(&t, &[Value::Int(7)], &mut |r| r[0] = Value::Int(9)), Err(TableError::Invalid(_))));
    assert_eq!(raw(&db), before);
}

fn update_of_non_indexed_column_leaves_the_index<E: Engine>() {
    let (_d, db) = open::<E>();
    let t = sbtest();
    let mut s = Session::new(&db, WriteMode::default());
    s.insert(&t, &row(7, 100, "c")).unwrap();
    let before = s.stats();
    assert!(s.update(&t, &[Value::Int(7)], &mut |r| r[2] = Value::Str(b"new c".to_vec())).unwrap());
    let after = s.stats();
    assert_eq!(after.entries - before.entries, 1, "only the PK record written");
    assert_eq!(raw_keys(&db, 2), vec![int_key(2, &[100, 7])]);
    let mut out = Row::new();
    s.get(&t, &[Value::Int(7)], &mut out).unwrap();
    assert_eq!(out, row(7, 100, "new c"));
    // An update that changes nothing writes nothing.
    assert!(s.update(&t, &[Value::Int(7)], &mut |_| {}).unwrap());
    assert_eq!(s.stats().batches, after.batches);
}

fn delete_removes_every_entry<E: Engine>() {
    let (_d, db) = open::<E>();
    let t = sbtest();
    let mut s = Session::new(&db, WriteMode::default());
    s.insert(&t, &row(1, 5, "a")).unwrap();
    s.insert(&t, &row(2, 5, "b")).unwrap();
    s.update(&t, &[Value::Int(1)], &mut |r| r[1] = Value::Int(6)).unwrap();
    assert!(s.delete(&t, &[Value::Int(1)]).unwrap());
    assert!(!s.delete(&t, &[Value::Int(1)]).unwrap());
    let keys: Vec<Vec<u8>> = raw(&db).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![int_key(1, &[2]), int_key(2, &[5, 2])]);
    assert!(s.delete(&t, &[Value::Int(2)]).unwrap());
    assert!(raw(&db).is_empty());
    // Re-insert after delete works (and its entries are put once again after their deletion).
    assert!(s.insert(&t, &row(1, 5, "again")).unwrap());
    assert_eq!(raw(&db).len(), 2);
}

fn full_scan_is_in_pk_order<E: Engine>() {
    let (_d, db) = open::<E>();
    let t = sbtest();
    let mut s = Session::new(&db, WriteMode::default());
    // Negative ids too: the sign-flipped encoding orders them first.
    let ids = [5i64, -3, 1000, 0, -70000, 42, 7, 1];
    for (i, id) in ids.iter().enumerate() {
        s.insert(&t, &row(*id, i as i64, "x")).unwrap();
    }
    // An entry of another index id after the table does not appear.
    db.put(WriteMode::default(), &int_key(3, &[1]), b"other").unwrap();
    let mut seen = Vec::new();
    let n = s.full_scan(&t, 2 << 20, &mut |r| seen.push(r[0].clone())).unwrap();
    let mut want = ids.to_vec();
    want.sort();
    assert_eq!(n, ids.len() as u64);
    assert_eq!(seen, want.into_iter().map(Value::Int).collect::<Vec<_>>());
}

fn concurrent_read_modify_write_loses_no_update<E: Engine>() {
    let (_d, db) = open::<E>();
    let db = Arc::new(db);
    let t = Arc::new(sbtest());
    Session::new(&*db, WriteMode::default()).insert(&t, &row(1, 0, "c")).unwrap();
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (db, t) = (Arc::clone(&db), Arc::clone(&t));
            std::thread::spawn(move || {
                let mut s = Session::new(&*db, WriteMode::default());
                for _ in 0..2000 {
                    let ok = s
                        .update(&t, &[Value::Int(1)], &mut |r| {
                            if let Value::Int(k) = &mut r[1] {
                                *k += 1;
                            }
                        })
                        .unwrap();
                    assert!(ok);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    let mut out = Row::new();
    Session::new(&*db, WriteMode::default()).get(&t, &[Value::Int(1)], &mut out).unwrap();
    assert_eq!(out[1], Value::Int(4000));
    // k is indexed: after 4000 moves exactly one entry is left, the current one.
    assert_eq!(raw_keys(&*db, 2), vec![int_key(2, &[4000, 1])]);
}

fn update_many_with_overlapping_unsorted_lists_does_not_deadlock<E: Engine>() {
    let (_d, db) = open::<E>();
    let db = Arc::new(db);
    let t = Arc::new(sbtest());
    let rows: Vec<Row> = (0..10).map(|i| row(i, 0, "c")).collect();
    Session::new(&*db, WriteMode::default()).insert_many(&t, &rows).unwrap();
    let lists: [Vec<i64>; 2] = [vec![5, 1, 3, 1, 9, 0], vec![9, 3, 5, 7, 1, 8]];
    let (tx, rx) = std::sync::mpsc::channel();
    for list in lists.clone() {
        let (db, t, tx) = (Arc::clone(&db), Arc::clone(&t), tx.clone());
        std::thread::spawn(move || {
            let mut s = Session::new(&*db, WriteMode::default());
            let pks: Vec<Vec<Value>> = list.iter().map(|&i| vec![Value::Int(i)]).collect();
            let distinct = list.iter().collect::<std::collections::BTreeSet<_>>().len();
            let mut counts = Vec::new();
            for _ in 0..500 {
                let n = s
                    .update_many(&t, &pks, &mut |r| {
                        if let Value::Int(k) = &mut r[1] {
                            *k += 1;
                        }
                    })
                    .unwrap();
                counts.push(n);
            }
            // A repeated key is updated once.
            tx.send(counts.iter().all(|&n| n == distinct)).expect("send");
        });
    }
    for _ in 0..2 {
        let ok = rx.recv_timeout(Duration::from_secs(120)).expect("update_many deadlocked (no progress in 120 s)");
        assert!(ok, "update_many counted a repeated key twice");
    }
    let mut s = Session::new(&*db, WriteMode::default());
    let mut out = Row::new();
    for i in 0..10 {
        let want = lists.iter().filter(|l| l.contains(&i)).count() as i64 * 500;
        s.get(&t, &[Value::Int(i)], &mut out).unwrap();
        assert_eq!(out[1], Value::Int(want), "row {i}");
    }
    assert_eq!(raw_keys(&*db, 2).len(), 10);
}

/// A table with row 1 (k 5) and the engine, for the corruption tests.
fn one_row<E: Engine>() -> (tempfile::TempDir, E, Table) {
    let (d, db) = open::<E>();
    let t = sbtest();
    Session::new(&db, WriteMode::default()).insert(&t, &row(1, 5, "a")).unwrap();
    (d, db, t)
}

fn is_corrupt<T: std::fmt::Debug>(r: TableResult<T>) -> bool {
    matches!(r, Err(TableError::Corrupt { .. }))
}

fn corrupt_value_string_length_over_column<E: Engine>() {
    let (_d, db, t) = one_row::<E>();
    let mut s = Session::new(&db, WriteMode::default());
    // k, then a CHAR(120) length claiming 2^28 bytes.
    db.put(WriteMode::default(), &int_key(1, &[1]), &[5, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x01]).unwrap();
    let mut out = Row::new();
    assert!(is_corrupt(s.get(&t, &[Value::Int(1)], &mut out)));
    assert!(is_corrupt(s.update(&t, &[Value::Int(1)], &mut |_| {})));
    assert!(is_corrupt(s.delete(&t, &[Value::Int(1)])));
    assert!(is_corrupt(s.full_scan(&t, 0, &mut |_| {})));
    assert!(is_corrupt(s.range_pk(&t, &[Value::Int(0)], &[Value::Int(9)], &mut |_| true)));
    assert!(is_corrupt(s.lookup(&t, 0, &[Value::Int(5)], &mut |_| true)));
}

fn corrupt_value_truncated<E: Engine>() {
    let (_d, db, t) = one_row::<E>();
    db.put(WriteMode::default(), &int_key(1, &[1]), &[5, 0]).unwrap();
    let mut out = Row::new();
    assert!(is_corrupt(Session::new(&db, WriteMode::default()).get(&t, &[Value::Int(1)], &mut out)));
}

fn corrupt_value_trailing_bytes<E: Engine>() {
    let (_d, db, t) = one_row::<E>();
    let mut v = Vec::new();
    t.row_value(&row(1, 5, "a"), &mut v);
    v.push(0);
    db.put(WriteMode::default(), &int_key(1, &[1]), &v).unwrap();
    let mut out = Row::new();
    assert!(is_corrupt(Session::new(&db, WriteMode::default()).get(&t, &[Value::Int(1)], &mut out)));
}

fn corrupt_pk_key_length<E: Engine>() {
    let (_d, db, t) = one_row::<E>();
    let mut short = int_key(1, &[2]);
    short.pop();
    db.put(WriteMode::default(), &short, b"").unwrap();
    assert!(is_corrupt(Session::new(&db, WriteMode::default()).full_scan(&t, 0, &mut |_| {})));
    let (_d, db, t) = one_row::<E>();
    let mut long = int_key(1, &[2]);
    long.push(0);
    db.put(WriteMode::default(), &long, b"").unwrap();
    assert!(is_corrupt(Session::new(&db, WriteMode::default()).full_scan(&t, 0, &mut |_| {})));
}

fn corrupt_index_entry_pk_suffix<E: Engine>() {
    let (_d, db, t) = one_row::<E>();
    let mut s = Session::new(&db, WriteMode::default());
    let mut bad = int_key(2, &[9]);
    bad.push(1);
    db.put(WriteMode::default(), &bad, b"").unwrap();
    assert!(is_corrupt(s.lookup(&t, 0, &[Value::Int(9)], &mut |_| true)));
    let mut long = int_key(2, &[8, 1]);
    long.push(0);
    db.put(WriteMode::default(), &long, b"").unwrap();
    assert!(is_corrupt(s.lookup(&t, 0, &[Value::Int(8)], &mut |_| true)));
}

fn stale_index_entry_is_skipped<E: Engine>() {
    // An entry whose row's index column no longer matches (as a lookup racing an update sees it).
    let (_d, db, t) = one_row::<E>();
    db.put(WriteMode::default(), &int_key(2, &[9, 1]), b"").unwrap();
    let mut s = Session::new(&db, WriteMode::default());
    assert_eq!(s.lookup(&t, 0, &[Value::Int(9)], &mut |_| true).unwrap(), 0);
    assert_eq!(s.range_index(&t, 0, &[Value::Int(0)], &[Value::Int(10)], &mut |_| true).unwrap(), 1);
    assert_eq!(s.stats().gets, 3, "both entries were followed to the row");
}

#[test]
fn record_of_another_index_is_corrupt() {
    let t = sbtest();
    let mut out = Row::new();
    let r = t.decode_record(&int_key(2, &[1]), &[], &mut out);
    assert!(is_corrupt(r));
    assert!(is_corrupt(t.decode_record(&[0, 0], &[], &mut out)));
}

fn key_layout_is_as_documented<E: Engine>() {
    let (_d, db) = open::<E>();
    let t = sbtest();
    let mut s = Session::new(&db, WriteMode::default());
    s.insert(&t, &row(42, -2, "ab")).unwrap();
    let entries = raw(&db);
    assert_eq!(entries.len(), 2);
    // PK record: 00000001 | id 42 as 80 00 00 2A -> k (i32 LE) | varint len "ab" | varint len "pad".
    assert_eq!(entries[0].0, [0, 0, 0, 1, 0x80, 0, 0, 0x2A]);
    assert_eq!(entries[0].1, [0xFE, 0xFF, 0xFF, 0xFF, 2, b'a', b'b', 3, b'p', b'a', b'd']);
    // Index entry: 00000002 | k -2 as 7F FF FF FE | id 42 -> empty.
    assert_eq!(entries[1].0, [0, 0, 0, 2, 0x7F, 0xFF, 0xFF, 0xFE, 0x80, 0, 0, 0x2A]);
    assert!(entries[1].1.is_empty());
}

#[test]
fn schema_checks() {
    let col = |name: &str, ty| Column { name: name.into(), ty };
    let def = TableDef {
        name: "t".into(),
        columns: vec![col("a", ColumnType::Int64), col("b", ColumnType::VarChar(10))],
        primary: IndexDef { id: 5, name: "PRIMARY".into(), columns: vec![1, 0] },
        secondary: vec![IndexDef { id: 6, name: "a".into(), columns: vec![0] }],
    };
    assert!(Table::new(def.clone()).is_ok());
    let mut d = def.clone();
    d.secondary[0].id = 5;
    assert!(matches!(Table::new(d), Err(TableError::Invalid(_))));
    let mut d = def.clone();
    d.secondary[0].columns = vec![2];
    assert!(matches!(Table::new(d), Err(TableError::Invalid(_))));
    let mut d = def.clone();
    d.primary.columns = vec![];
    assert!(matches!(Table::new(d), Err(TableError::Invalid(_))));
    let mut d = def.clone();
    d.columns[1].name = "a".into();
    assert!(matches!(Table::new(d), Err(TableError::Invalid(_))));
    let mut d = def;
    d.primary.columns = vec![0, 0];
    assert!(matches!(Table::new(d), Err(TableError::Invalid(_))));
}

fn varchar_composite_pk_and_prefix_range<E: Engine>() {
    let (_d, db) = open::<E>();
    let col = |name: &str, ty| Column { name: name.into(), ty };
    let t = Table::new(TableDef {
        name: "t".into(),
        columns: vec![col("a", ColumnType::Int64), col("b", ColumnType::VarChar(10)), col("v", ColumnType::UInt64)],
        primary: IndexDef { id: 5, name: "PRIMARY".into(), columns: vec![1, 0] },
        secondary: vec![IndexDef { id: 6, name: "v".into(), columns: vec![2] }],
    })
    .unwrap();
    let mut s = Session::new(&db, WriteMode::default());
    let names: [&[u8]; 5] = [b"b", b"a\0", b"a", b"ab", b""];
    for (i, n) in names.iter().enumerate() {
        for a in [-1i64, 1] {
            assert!(s.insert(&t, &[Value::Int(a), Value::Str(n.to_vec()), Value::UInt(i as u64)]).unwrap());
        }
    }
    let mut seen = Vec::new();
    // Every row whose b is in ["a", "ab"] (a prefix of the PK: b only).
    let n = s
        .range_pk(&t, &[Value::Str(b"a".to_vec())], &[Value::Str(b"ab".to_vec())], &mut |r| {
            seen.push((r[1].clone(), r[0].clone()));
            true
        })
        .unwrap();
    assert_eq!(n, 6);
    let want: Vec<(Value, Value)> = [(&b"a"[..], -1), (b"a", 1), (b"a\0", -1), (b"a\0", 1), (b"ab", -1), (b"ab", 1)]
        .iter()
        .map(|&(b, a)| (Value::Str(b.to_vec()), Value::Int(a)))
        .collect();
    assert_eq!(seen, want);
    let mut out = Row::new();
    assert!(s.get(&t, &[Value::Str(b"a\0".to_vec()), Value::Int(1)], &mut out).unwrap());
    assert_eq!(out, vec![Value::Int(1), Value::Str(b"a\0".to_vec()), Value::UInt(1)]);
    let mut hits = 0;
    s.lookup(&t, 0, &[Value::UInt(3)], &mut |r| {
        hits += 1;
        r[1] == Value::Str(b"ab".to_vec())
    })
    .unwrap();
    assert_eq!(hits, 2);
}

fn pk_only_table_delete_and_reinsert<E: Engine>() {
    let (_d, db) = open::<E>();
    let col = |name: &str, ty| Column { name: name.into(), ty };
    let t = Table::new(TableDef {
        name: "t".into(),
        columns: vec![col("a", ColumnType::UInt32), col("b", ColumnType::Char(3))],
        primary: IndexDef { id: 9, name: "PRIMARY".into(), columns: vec![0, 1] },
        secondary: vec![],
    })
    .unwrap();
    let mut s = Session::new(&db, WriteMode::default());
    let r = vec![Value::UInt(4), Value::Str(b"x".to_vec())];
    assert!(s.insert(&t, &r).unwrap());
    assert!(s.update(&t, &r, &mut |_| {}).unwrap());
    assert_eq!(s.stats().batches, 1, "an update of a PK-only row writes nothing");
    assert_eq!(raw(&db), vec![(vec![0, 0, 0, 9, 0, 0, 0, 4, b'x', b' ', b' '], vec![])]);
    assert!(s.delete(&t, &r).unwrap());
    assert!(raw(&db).is_empty());
    assert!(s.insert(&t, &r).unwrap());
    let mut out = Row::new();
    assert!(s.get(&t, &r, &mut out).unwrap());
    assert_eq!(out, r);
}

mod model {
    //! Random statements against the table and against a model (a map from id to row): after each sequence,
    //! the PK records and the index entries are exactly those the model implies.
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(i64, i64),
        Update(i64, i64),
        UpdateC(i64, u8),
        UpdateMany(Vec<i64>, i64),
        Delete(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let id = -4i64..12;
        let k = -3i64..4;
        prop_oneof![
            (id.clone(), k.clone()).prop_map(|(i, k)| Op::Insert(i, k)),
            (id.clone(), k.clone()).prop_map(|(i, k)| Op::Update(i, k)),
            (id.clone(), any::<u8>()).prop_map(|(i, c)| Op::UpdateC(i, c)),
            (proptest::collection::vec(id.clone(), 0..6), k).prop_map(|(l, k)| Op::UpdateMany(l, k)),
            id.prop_map(Op::Delete),
        ]
    }

    fn check_model<E: Engine>(ops: &[Op]) -> Result<(), TestCaseError> {
        let (_d, db) = open::<E>();
        let t = sbtest();
        let mut s = Session::new(&db, WriteMode::default());
        let mut m: BTreeMap<i64, Row> = BTreeMap::new();
        for (i, o) in ops.iter().enumerate() {
            // Flushes along the way put the puts and the (Single)Deletes of one key in different files, so the
            // compaction below meets them (where a SingleDelete over two puts would let an old entry reappear).
            if i % 40 == 39 {
                db.flush().unwrap();
            }
            match o {
                Op::Insert(id, k) => {
                    let r = row(*id, *k, "c");
                    let did = s.insert(&t, &r).unwrap();
                    prop_assert_eq!(did, !m.contains_key(id));
                    m.entry(*id).or_insert(r);
                }
                Op::Update(id, k) => {
                    let did = s.update(&t, &[Value::Int(*id)], &mut |r| r[1] = Value::Int(*k)).unwrap();
                    prop_assert_eq!(did, m.contains_key(id));
                    if let Some(r) = m.get_mut(id) {
                        r[1] = Value::Int(*k);
                    }
                }
                Op::UpdateC(id, c) => {
                    let v = Value::Str(vec![b'a' + c % 26; usize::from(*c % 120)]);
                    let did = s.update(&t, &[Value::Int(*id)], &mut |r| r[2] = v.clone()).unwrap();
                    prop_assert_eq!(did, m.contains_key(id));
                    if let Some(r) = m.get_mut(id) {
                        r[2] = v;
                    }
                }
                Op::UpdateMany(ids, k) => {
                    let pks: Vec<Vec<Value>> = ids.iter().map(|&i| vec![Value::Int(i)]).collect();
                    let n = s
                        .update_many(&t, &pks, &mut |r| {
                            if let Value::Int(x) = &mut r[1] {
                                *x += k;
                            }
                        })
                        .unwrap();
                    let distinct: std::collections::BTreeSet<_> = ids.iter().filter(|i| m.contains_key(i)).collect();
                    prop_assert_eq!(n, distinct.len());
                    for i in distinct {
                        if let Some(Value::Int(x)) = m.get_mut(i).map(|r| &mut r[1]) {
                            *x += k;
                        }
                    }
                }
                Op::Delete(id) => {
                    prop_assert_eq!(s.delete(&t, &[Value::Int(*id)]).unwrap(), m.remove(id).is_some());
                }
            }
        }
        check_state(&db, &t, &mut s, &m)?;
        db.compact_all().unwrap();
        check_state(&db, &t, &mut s, &m)
    }

    /// The PK records, the index entries and the index lookups are exactly those of the model.
    fn check_state<E: Engine>(
        db: &E,
        t: &Table,
        s: &mut Session<'_, E>,
        m: &BTreeMap<i64, Row>,
    ) -> Result<(), TestCaseError> {
        let mut scanned = Vec::new();
        s.full_scan(t, 0, &mut |r| scanned.push(r.clone())).unwrap();
        prop_assert_eq!(&scanned, &m.values().cloned().collect::<Vec<_>>());
        let mut want_index: Vec<Vec<u8>> = m
            .values()
            .map(|r| {
                let (Value::Int(id), Value::Int(k)) = (&r[0], &r[1]) else { unreachable!() };
                int_key(2, &[*k as i32, *id as i32])
            })
            .collect();
        want_index.sort();
        prop_assert_eq!(raw_keys(db, 2), want_index);
        // Every row is found through the index.
        for r in m.values() {
            let mut found = false;
            s.lookup(t, 0, &r[1..2], &mut |x| {
                found |= x == r;
                true
            })
            .unwrap();
            prop_assert!(found);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn table_matches_model_shaledb(ops in proptest::collection::vec(op(), 1..120)) {
            check_model::<crate::engine::shale::ShaleDb>(&ops)?;
        }
    }

    #[cfg(feature = "rocksdb")]
    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn table_matches_model_rocksdb(ops in proptest::collection::vec(op(), 1..120)) {
            check_model::<crate::engine::rocks::RocksDb>(&ops)?;
        }
    }
}

/// Runs each engine-generic test above on ShaleDB, and on RocksDB when built with the `rocksdb` feature (there
/// `single_delete` is a real SingleDelete, so the SingleDelete rule is exercised).
macro_rules! on_engines {
    ($($name:ident),* $(,)?) => {
        mod shaledb {
            $(#[test]
            fn $name() {
                super::$name::<crate::engine::shale::ShaleDb>();
            })*
        }
        #[cfg(feature = "rocksdb")]
        mod rocksdb {
            $(#[test]
            fn $name() {
                super::$name::<crate::engine::rocks::RocksDb>();
            })*
        }
    };
}

on_engines!(
    insert_get_and_duplicate_pk,
    insert_many_skips_existing_and_repeated,
    secondary_lookup_and_range,
    update_of_indexed_column_moves_the_entry,
    update_of_non_indexed_column_leaves_the_index,
    delete_removes_every_entry,
    full_scan_is_in_pk_order,
    concurrent_read_modify_write_loses_no_update,
    update_many_with_overlapping_unsorted_lists_does_not_deadlock,
    corrupt_value_string_length_over_column,
    corrupt_value_truncated,
    corrupt_value_trailing_bytes,
    corrupt_pk_key_length,
    corrupt_index_entry_pk_suffix,
    stale_index_entry_is_skipped,
    key_layout_is_as_documented,
    varchar_composite_pk_and_prefix_range,
    pk_only_table_delete_and_reinsert,
);
