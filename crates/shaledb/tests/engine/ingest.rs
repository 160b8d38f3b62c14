//! SST ingestion (docs/durability.md D15): `SstFileWriter` files added with `Db::ingest_external_file`,
//! placed at the deepest free level or given a global sequence number, checked against a model.

use shaledb::ingest::{IngestExternalFileOptions, SstFileWriter};
use shaledb::{Db, Error, Options, ReadOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options { disable_auto_compactions: true, ..crate::tiny_options() }
}

/// Writes `entries` (sorted; `None` = a deletion) as an external file `name` in `dir`.
fn sst(dir: &Path, name: &str, entries: &[(&str, Option<&str>)]) -> PathBuf {
    let path = dir.join(name);
    let mut w = SstFileWriter::create(&opts());
    w.open(&path).unwrap();
    for (k, v) in entries {
        match v {
            Some(v) => w.put(k, v).unwrap(),
            None => w.delete(k).unwrap(),
        }
    }
    w.finish().unwrap();
    path
}

fn level_of_files(db: &Db) -> Vec<usize> {
    (0..7).map(|l| db.property(&format!("rocksdb.num-files-at-level{l}")).unwrap().parse().unwrap()).collect()
}

fn all(db: &Db) -> Model {
    db.iter().map(|r| r.unwrap()).collect()
}

fn ingest(db: &Db, files: &[&PathBuf]) -> shaledb::Result<()> {
    db.ingest_external_file(files, &IngestExternalFileOptions::default())
}

#[test]
fn into_an_empty_database_the_file_goes_to_the_bottom_level() {
    let tmp = shaledb_testkit::tempdir();
    let f = sst(tmp.path(), "a.sst", &[("a", Some("1")), ("b", Some("2")), ("c", None)]);
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    ingest(&db, &[&f]).unwrap();
    assert_eq!(level_of_files(&db), [0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(db.get("b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get("c").unwrap(), None);
    assert_eq!(all(&db), Model::from([(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]));
    // The original is still there (copied, not moved).
    assert!(f.exists());
}

#[test]
fn a_file_goes_above_the_first_level_it_overlaps_and_then_shadows_it() {
    let tmp = shaledb_testkit::tempdir();
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    for k in ["b", "d", "f"] {
        db.put(k, "old").unwrap();
    }
    db.compact_range(None, None).unwrap();
    let bottom = level_of_files(&db);
    assert_eq!(bottom[6], 1, "{bottom:?}");
    // Overlaps the bottom table's range: one level up, with a global sequence number, newer than "d".
    let over = sst(tmp.path(), "over.sst", &[("c", Some("new")), ("d", Some("new"))]);
    ingest(&db, &[&over]).unwrap();
    assert_eq!(level_of_files(&db), [0, 0, 0, 0, 0, 1, 1]);
    assert_eq!(db.get("d").unwrap(), Some(b"new".to_vec()));
    // Outside every range: to the bottom, beside the old table.
    let apart = sst(tmp.path(), "apart.sst", &[("x", Some("1")), ("y", Some("2"))]);
    ingest(&db, &[&apart]).unwrap();
    assert_eq!(level_of_files(&db), [0, 0, 0, 0, 0, 1, 2]);
    // Overlapping a level-0 table: level 0.
    db.put("m", "mem").unwrap();
    db.flush().unwrap();
    let l0 = sst(tmp.path(), "l0.sst", &[("l", Some("1")), ("n", None)]);
    ingest(&db, &[&l0]).unwrap();
    assert_eq!(level_of_files(&db), [2, 0, 0, 0, 0, 1, 2]);
    let expected: Model =
        [("b", "old"), ("c", "new"), ("d", "new"), ("f", "old"), ("l", "1"), ("m", "mem"), ("x", "1"), ("y", "2")]
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
    assert_eq!(all(&db), expected);
    // A compaction keeps the newest versions.
    db.compact_range(None, None).unwrap();
    assert_eq!(all(&db), expected);
    drop(db);
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    assert_eq!(all(&db), expected);
}

#[test]
fn a_file_overlapping_the_memtable_is_ingested_after_a_flush_or_refused_without_blocking_flush() {
    let tmp = shaledb_testkit::tempdir();
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    db.put("k2", "mem").unwrap();
    let f = sst(tmp.path(), "f.sst", &[("k1", Some("ext")), ("k3", Some("ext"))]);
    let no_flush = IngestExternalFileOptions { allow_blocking_flush: false, ..IngestExternalFileOptions::default() };
    let e = db.ingest_external_file(&[&f], &no_flush).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("memtable")), "{e}");
    assert_eq!(level_of_files(&db).iter().sum::<usize>(), 0);
    assert_eq!(db.get("k1").unwrap(), None);
    let f2 = sst(tmp.path(), "f2.sst", &[("k2", Some("ext"))]);
    ingest(&db, &[&f, &f2]).unwrap_err(); // f and f2 overlap
    ingest(&db, &[&f2]).unwrap();
    // Flushed first (one L0 table), then the file above it with a global sequence number.
    assert_eq!(level_of_files(&db)[0], 2);
    assert_eq!(db.get("k2").unwrap(), Some(b"ext".to_vec()));
    db.put("k2", "after").unwrap();
    assert_eq!(db.get("k2").unwrap(), Some(b"after".to_vec()));
}

#[test]
fn overlapping_files_empty_lists_and_global_numbers_when_not_allowed_are_refused() {
    let tmp = shaledb_testkit::tempdir();
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    let a = sst(tmp.path(), "a.sst", &[("a", Some("1")), ("m", Some("1"))]);
    let b = sst(tmp.path(), "b.sst", &[("m", Some("2")), ("z", Some("2"))]);
    let e = ingest(&db, &[&a, &b]).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("overlap")), "{e}");
    let none: [&Path; 0] = [];
    assert!(matches!(
        db.ingest_external_file(&none, &IngestExternalFileOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    db.put("c", "x").unwrap();
    db.flush().unwrap();
    let no_seq = IngestExternalFileOptions { allow_global_seqno: false, ..IngestExternalFileOptions::default() };
    let e = db.ingest_external_file(&[&a], &no_seq).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("allow_global_seqno")), "{e}");
    assert_eq!(all(&db).len(), 1);
    assert_eq!(
        std::fs::read_dir(tmp.path().join("db"))
            .unwrap()
            .filter(|e| { e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".sst") })
            .count(),
        1,
        "no copy left behind"
    );
}

#[test]
fn a_corrupt_or_foreign_file_is_refused_and_nothing_changes() {
    let tmp = shaledb_testkit::tempdir();
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    db.put("keep", "1").unwrap();
    let entries: Vec<(String, String)> = (0..300).map(|i| (format!("k{i:04}"), "v".repeat(50))).collect();
    let refs: Vec<(&str, Option<&str>)> = entries.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))).collect();
    let f = sst(tmp.path(), "c.sst", &refs);
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[100] ^= 0x40; // inside the first data block
    std::fs::write(&f, &bytes).unwrap();
    let verify =
        IngestExternalFileOptions { verify_checksums_before_ingest: true, ..IngestExternalFileOptions::default() };
    let e = db.ingest_external_file(&[&f], &verify).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    let junk = tmp.path().join("junk.sst");
    std::fs::write(&junk, b"not a table at all, not even close to one ........................").unwrap();
    assert!(ingest(&db, &[&junk]).is_err());
    let names: Vec<String> = std::fs::read_dir(tmp.path().join("db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".sst")), "{names:?}");
    assert_eq!(all(&db), Model::from([(b"keep".to_vec(), b"1".to_vec())]));
    // A table written by a database (sequence numbers above 0) is not an external file.
    db.flush().unwrap();
    let own = std::fs::read_dir(tmp.path().join("db"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .unwrap();
    let copy = tmp.path().join("own.sst");
    std::fs::copy(&own, &copy).unwrap();
    let e = ingest(&db, &[&copy]).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("sequence numbers")), "{e}");
}

#[test]
fn snapshots_and_iterators_from_before_an_ingestion_do_not_see_it() {
    let tmp = shaledb_testkit::tempdir();
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    db.put("a", "old").unwrap();
    db.flush().unwrap();
    let snap = db.snapshot();
    let before = db.iter();
    // No overlap with any data, but a live snapshot: a global number all the same (snapshot_consistency).
    let f = sst(tmp.path(), "f.sst", &[("x", Some("1"))]);
    ingest(&db, &[&f]).unwrap();
    let at_snap = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
    assert_eq!(db.get_opt(&at_snap, "x").unwrap(), None);
    assert_eq!(db.iter_opt(&at_snap).count(), 1);
    assert_eq!(before.map(|r| r.unwrap().0).collect::<Vec<_>>(), vec![b"a".to_vec()]);
    assert_eq!(db.get("x").unwrap(), Some(b"1".to_vec()));
    // An overlapping file: the snapshot keeps the old value.
    let g = sst(tmp.path(), "g.sst", &[("a", Some("new"))]);
    ingest(&db, &[&g]).unwrap();
    assert_eq!(db.get_opt(&at_snap, "a").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get("a").unwrap(), Some(b"new".to_vec()));
    // Without snapshot_consistency a non-overlapping file keeps sequence number 0: seen at the snapshot
    // (RocksDB's behaviour).
    let h = sst(tmp.path(), "h.sst", &[("z", Some("1"))]);
    let loose = IngestExternalFileOptions { snapshot_consistency: false, ..IngestExternalFileOptions::default() };
    db.ingest_external_file(&[&h], &loose).unwrap();
    assert_eq!(db.get_opt(&at_snap, "z").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn move_files_links_the_file_and_removes_the_original() {
    let tmp = shaledb_testkit::tempdir();
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    let f = sst(tmp.path(), "m.sst", &[("a", Some("1"))]);
    let mv = IngestExternalFileOptions { move_files: true, ..IngestExternalFileOptions::default() };
    db.ingest_external_file(&[&f], &mv).unwrap();
    assert!(!f.exists());
    assert_eq!(db.get("a").unwrap(), Some(b"1".to_vec()));
    drop(db);
    let db = Db::open(tmp.path().join("db"), opts()).unwrap();
    assert_eq!(db.get("a").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn random_writes_and_ingestions_agree_with_a_model_and_survive_reopen() {
    use rand::Rng;
    let tmp = shaledb_testkit::tempdir();
    let path = tmp.path().join("db");
    let mut r = shaledb_testkit::rng(shaledb_testkit::seed_from_env(1715));
    let options = Options { disable_auto_compactions: false, ..crate::tiny_options() };
    let db = Db::open(&path, options.clone()).unwrap();
    let mut model = Model::new();
    let key = |i: u32| format!("key{i:05}").into_bytes();
    for round in 0..40 {
        for _ in 0..r.gen_range(0..60) {
            let k = key(r.gen_range(0..3000));
            if r.gen_bool(0.2) {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("w{round}-{}", r.gen::<u16>()).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        // One to three non-overlapping files of sorted random keys.
        let mut files = Vec::new();
        let mut next = r.gen_range(0..2000);
        let snap = db.snapshot();
        let seen = all(&db);
        let mut ingested: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        for n in 0..r.gen_range(1..4) {
            let p = tmp.path().join(format!("r{round}-{n}.sst"));
            let mut w = SstFileWriter::create(&options);
            w.open(&p).unwrap();
            for _ in 0..r.gen_range(1..40) {
                next += r.gen_range(1..20);
                let k = key(next);
                if r.gen_bool(0.15) {
                    w.delete(&k).unwrap();
                    ingested.insert(k, None);
                } else {
                    let v = format!("i{round}-{n}").into_bytes();
                    w.put(&k, &v).unwrap();
                    ingested.insert(k, Some(v));
                }
            }
            w.finish().unwrap();
            files.push(p);
            next += 1;
        }
        db.ingest_external_file(&files, &IngestExternalFileOptions::default()).unwrap();
        for (k, v) in ingested {
            match v {
                Some(v) => model.insert(k, v),
                None => model.remove(&k),
            };
        }
        let at_snap = ReadOptions { snapshot: Some(snap), ..ReadOptions::default() };
        assert_eq!(db.iter_opt(&at_snap).map(|e| e.unwrap()).collect::<Model>(), seen, "round {round}: snapshot");
        assert_eq!(all(&db), model, "round {round}");
        if round % 7 == 3 {
            db.flush().unwrap();
        }
    }
    for (k, v) in model.iter().take(50) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(
        db.iter().rev().map(|e| e.unwrap()).collect::<Vec<_>>(),
        model.clone().into_iter().rev().collect::<Vec<_>>()
    );
    db.close().unwrap();
    let db = Db::open(&path, options).unwrap();
    assert_eq!(all(&db), model);
    db.compact_range(None, None).unwrap();
    assert_eq!(all(&db), model);
}

#[test]
fn ingestions_during_concurrent_writes_and_compactions_lose_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let tmp = shaledb_testkit::tempdir();
    let options = Options { disable_auto_compactions: false, ..crate::tiny_options() };
    let db = Arc::new(Db::open(tmp.path().join("db"), options.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // The writer's keys end in "w", the files' in "i": the same ranges (memtable overlaps, flushes, global
    // sequence numbers), never the same keys.
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Acquire) || n < 500 {
                db.put(format!("k{:05}w", (n * 7919) % 20000), format!("w{n}")).unwrap();
                n += 1;
            }
            n
        })
    };
    let mut ingested = Model::new();
    for round in 0..20u32 {
        let p = tmp.path().join(format!("c{round}.sst"));
        let mut w = SstFileWriter::create(&options);
        w.open(&p).unwrap();
        for i in (round..20000).step_by(997) {
            let (k, v) = (format!("k{i:05}i"), format!("i{round}"));
            w.put(&k, &v).unwrap();
            ingested.insert(k.into_bytes(), v.into_bytes());
        }
        w.finish().unwrap();
        db.ingest_external_file(&[&p], &IngestExternalFileOptions::default()).unwrap();
        // Every file ingested so far is read whole, whatever the writer and the compactions do.
        let got: Model = db.iter().map(|e| e.unwrap()).filter(|(k, _)| k.ends_with(b"i")).collect();
        assert_eq!(got, ingested, "round {round}");
    }
    stop.store(true, Ordering::Release);
    let written = writer.join().unwrap();
    let mut expected = ingested;
    for n in 0..written {
        expected.insert(format!("k{:05}w", (n * 7919) % 20000).into_bytes(), format!("w{n}").into_bytes());
    }
    assert_eq!(all(&db), expected);
}
