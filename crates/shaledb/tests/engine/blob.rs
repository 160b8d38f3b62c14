//! Blob files (key-value separation): what goes where, reads through blob references, garbage accounting,
//! obsolete blob files deleted, garbage collection, corruption, checkpoints.

use crate::tiny_options;
use shaledb::{Db, Options, ReadOptions};
use std::path::{Path, PathBuf};

fn blob_options() -> Options {
    Options { enable_blob_files: true, min_blob_size: 100, blob_file_size: 1 << 20, ..tiny_options() }
}

fn blob_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "blob"))
        .collect();
    v.sort();
    v
}

fn big(i: usize, tag: &str) -> Vec<u8> {
    format!("{tag}-{i:05}-").repeat(20).into_bytes()
}

/// A closed database holding key `a` with a value in its one blob file.
fn closed_with_one_blob_file() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), blob_options()).unwrap();
    db.put("a", big(0, "v")).unwrap();
    db.flush().unwrap();
    dir
}

/// Puts `<prefix><i:03>` -> `big(i, tag)` for each `i` of `range`.
fn fill(db: &Db, prefix: &str, range: std::ops::Range<usize>, tag: &str) {
    for i in range {
        db.put(format!("{prefix}{i:03}"), big(i, tag)).unwrap();
    }
}

/// Checks that every key `fill` wrote reads back.
fn check(db: &Db, prefix: &str, range: std::ops::Range<usize>, tag: &str) {
    for i in range {
        assert_eq!(db.get(format!("{prefix}{i:03}")).unwrap(), Some(big(i, tag)), "{prefix}{i:03}");
    }
}

#[test]
fn large_values_go_to_blob_files_and_read_back_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options { write_buffer_size: 1 << 20, ..blob_options() }).unwrap();
    for i in 0..50 {
        db.put(format!("k{i:03}"), big(i, "v")).unwrap();
        db.put(format!("s{i:03}"), b"small").unwrap();
    }
    db.flush().unwrap();
    let files = blob_files(dir.path());
    assert_eq!(files.len(), 1, "one flush writes one blob file");
    // The blob file holds the large values only: header, 50 records (12-byte header, 4-byte key, 160-byte
    // value), footer; the small ones stay in the table.
    let size = std::fs::metadata(&files[0]).unwrap().len();
    assert_eq!(size, 30 + 50 * (12 + 4 + 160) + 28);
    assert_eq!(db.get("k007").unwrap(), Some(big(7, "v")));
    assert_eq!(db.get("s007").unwrap(), Some(b"small".to_vec()));
    let got = db.multi_get(["k001", "s001", "k049", "nope"]);
    let got: Vec<Option<Vec<u8>>> = got.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, vec![Some(big(1, "v")), Some(b"small".to_vec()), Some(big(49, "v")), None]);
    let fwd: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
    assert_eq!(fwd.len(), 100);
    assert_eq!(fwd[3], (b"k003".to_vec(), big(3, "v")));
    let back: Vec<(Vec<u8>, Vec<u8>)> = db.iter().rev().map(|r| r.unwrap()).collect();
    assert!(back.iter().rev().eq(fwd.iter()));
    let mut c = db.cursor();
    c.seek("k010");
    assert_eq!(c.value(), &big(10, "v")[..]);
    c.prev();
    assert_eq!((c.key(), c.value()), (&b"k009"[..], &big(9, "v")[..]));
    db.verify_checksums().unwrap();
    drop(c);
    db.close().unwrap();
    let db = Db::open(dir.path(), blob_options()).unwrap();
    assert_eq!(db.get("k042").unwrap(), Some(big(42, "v")));
    // Turning blob files off keeps existing references readable.
    drop(db);
    let db = Db::open(dir.path(), Options { enable_blob_files: false, ..blob_options() }).unwrap();
    assert_eq!(db.get("k042").unwrap(), Some(big(42, "v")));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("k042").unwrap(), Some(big(42, "v")));
}

#[test]
fn merges_and_snapshots_read_over_blob_values() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options { merge_operator: shaledb::merge::builtin("stringappend"), ..blob_options() };
    let db = Db::open(dir.path(), opts).unwrap();
    db.put("m", big(1, "base")).unwrap();
    db.put("o", big(1, "old")).unwrap();
    db.flush().unwrap();
    let snap = db.snapshot();
    db.merge("m", "tail").unwrap();
    db.put("o", big(2, "new")).unwrap();
    let mut want = big(1, "base");
    want.extend_from_slice(b",tail");
    assert_eq!(db.get("m").unwrap(), Some(want.clone()));
    let at_snap = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
    for round in 0..2 {
        assert_eq!(db.get("m").unwrap(), Some(want.clone()), "round {round}");
        let all: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
        assert_eq!(all, vec![(b"m".to_vec(), want.clone()), (b"o".to_vec(), big(2, "new"))], "round {round}");
        let rev: Vec<_> = db.iter().rev().map(|r| r.unwrap()).collect();
        assert_eq!(rev.len(), 2);
        assert_eq!(rev[1], (b"m".to_vec(), want.clone()));
        assert_eq!(db.get_opt(&at_snap, "o").unwrap(), Some(big(1, "old")), "round {round}");
        assert_eq!(db.get_opt(&at_snap, "m").unwrap(), Some(big(1, "base")), "round {round}");
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
    }
}

#[test]
fn a_corrupt_blob_record_is_corruption_naming_the_blob_file() {
    let dir = closed_with_one_blob_file();
    let file = blob_files(dir.path()).remove(0);
    let mut data = std::fs::read(&file).unwrap();
    // Header 30 bytes, record header 12, key 1: flip a byte in the value.
    data[30 + 12 + 1 + 5] ^= 0x40;
    std::fs::write(&file, &data).unwrap();
    let db = Db::open(dir.path(), blob_options()).unwrap();
    for e in [db.get("a").unwrap_err(), db.iter().next().unwrap().unwrap_err(), db.verify_checksums().unwrap_err()] {
        match e {
            shaledb::Error::Corruption { file: f, offset, .. } => assert_eq!((f, offset), (file.clone(), 30)),
            other => panic!("expected corruption naming the blob file, got {other}"),
        }
    }
}

#[test]
fn a_missing_blob_file_refuses_open_with_paranoid_checks() {
    let dir = closed_with_one_blob_file();
    std::fs::remove_file(blob_files(dir.path()).remove(0)).unwrap();
    let e = Db::open(dir.path(), blob_options()).unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains(".blob missing"), "{e}");
}

#[test]
fn overwritten_blob_files_are_deleted_once_no_reader_needs_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options { disable_auto_compactions: true, ..blob_options() }).unwrap();
    fill(&db, "k", 0..30, "first");
    db.flush().unwrap();
    let first = blob_files(dir.path());
    assert_eq!(first.len(), 1);
    fill(&db, "k", 0..30, "second");
    db.flush().unwrap();
    let mut cursor = db.cursor();
    let snap = db.snapshot();
    db.compact_range(None, None).unwrap();
    // The snapshot keeps the first values alive: nothing is garbage yet.
    assert!(first[0].exists());
    drop(snap);
    db.compact_range(None, None).unwrap();
    // Every first value is now garbage, but the cursor's version still lists the file.
    assert!(first[0].exists(), "a cursor still reads the old blob file");
    cursor.seek("k005");
    assert_eq!(cursor.value(), &big(5, "second")[..]);
    drop(cursor);
    db.put("wake", "up").unwrap();
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    assert!(!first[0].exists(), "an all-garbage blob file no version lists is deleted");
    assert_eq!(db.get("k005").unwrap(), Some(big(5, "second")));
    db.close().unwrap();
    let db = Db::open(dir.path(), blob_options()).unwrap();
    assert_eq!(db.get("k029").unwrap(), Some(big(29, "second")));
    assert_eq!(blob_files(dir.path()).len(), 1);
}

#[test]
fn garbage_collection_relocates_old_blob_values_and_deletes_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = blob_options();
    (opts.enable_blob_garbage_collection, opts.blob_garbage_collection_age_cutoff) = (true, 1.0);
    opts.disable_auto_compactions = true;
    let db = Db::open(dir.path(), opts).unwrap();
    for round in 0..3 {
        fill(&db, "k", (round * 20)..(round * 20 + 20), "v");
        db.flush().unwrap();
    }
    let before = blob_files(dir.path());
    assert_eq!(before.len(), 3);
    // Nothing was overwritten: without collection a compaction would keep every reference as it is.
    db.compact_range(None, None).unwrap();
    db.put("wake", "up").unwrap();
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    let after = blob_files(dir.path());
    assert!(before.iter().all(|f| !after.contains(f)), "every old file relocated and deleted: {after:?}");
    assert!(!after.is_empty());
    check(&db, "k", 0..60, "v");
    db.verify_checksums().unwrap();
}

#[test]
fn a_checkpoint_holds_the_blob_files_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), blob_options()).unwrap();
    fill(&db, "k", 0..20, "v");
    let target = dir.path().join("cp");
    db.create_checkpoint(&target).unwrap();
    assert_eq!(blob_files(&target).len(), 1);
    drop(db);
    let copy = Db::open(&target, blob_options()).unwrap();
    check(&copy, "k", 0..20, "v");
    copy.verify_checksums().unwrap();
}

#[test]
fn a_backup_holds_the_blob_files_shares_them_and_restores() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), blob_options()).unwrap();
    fill(&db, "k", 0..20, "v");
    let mut engine = shaledb::backup::BackupEngine::open(dir.path().join("backups")).unwrap();
    let first = engine.create_backup(&db).unwrap();
    fill(&db, "m", 0..20, "v");
    let second = engine.create_backup(&db).unwrap();
    drop(db);
    let shared: Vec<String> = std::fs::read_dir(dir.path().join("backups/shared"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".blob"))
        .collect();
    assert_eq!(shared.len(), 2, "each blob file stored once, shared by both backups: {shared:?}");
    engine.verify(first).unwrap();
    engine.restore(second, dir.path().join("restored")).unwrap();
    let db = Db::open(dir.path().join("restored"), blob_options()).unwrap();
    check(&db, "k", 0..20, "v");
    check(&db, "m", 0..20, "v");
    db.verify_checksums().unwrap();
}

#[test]
fn blob_options_out_of_range_are_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        Options { blob_garbage_collection_age_cutoff: 1.5, ..blob_options() },
        Options { blob_garbage_collection_force_threshold: -0.1, ..blob_options() },
        Options { blob_file_size: 10, ..blob_options() },
        Options { min_blob_size: u64::MAX, ..blob_options() },
        Options { blob_compaction_readahead_size: 2 << 30, ..blob_options() },
    ] {
        let e = Db::open(dir.path(), bad).unwrap_err();
        assert!(e.is_invalid_argument() && e.to_string().contains("blob"), "{e}");
    }
}

#[test]
fn forced_garbage_collection_compacts_the_tables_of_the_oldest_blob_file() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = Options {
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 200,
        level0_stop_writes_trigger: 300,
        write_buffer_size: 1 << 20,
        ..blob_options()
    };
    let db = Db::open(dir.path(), Options { disable_auto_compactions: true, ..quiet.clone() }).unwrap();
    for (prefix, range) in [("k", 0..20), ("m", 0..20), ("k", 0..10)] {
        fill(&db, prefix, range, prefix);
        db.flush().unwrap();
    }
    let files = blob_files(dir.path());
    assert_eq!(files.len(), 3);
    // Merging the two tables of `k` leaves half of the oldest blob file garbage; without collection nothing is
    // relocated, so the file stays.
    db.compact_range(Some(b"k"), Some(b"l")).unwrap();
    assert_eq!(db.property_int("rocksdb.num-blob-files"), Some(3));
    let garbage = db.property_int("rocksdb.live-blob-file-garbage-size").unwrap();
    assert_eq!(garbage, 10 * (12 + 4 + 160));
    db.close().unwrap();
    // The oldest of three files is within the age cutoff (0.5 -> one file) and half garbage (>= 0.3): the
    // background compacts the table referencing it, relocating its live half.
    let opts = Options {
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: 0.5,
        blob_garbage_collection_force_threshold: 0.3,
        ..quiet
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while files[0].exists() {
        assert!(std::time::Instant::now() < deadline, "the oldest blob file was never collected");
        db.put("wake", "up").unwrap();
        db.flush().unwrap();
        db.wait_for_compaction().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    check(&db, "k", 0..20, "k");
    check(&db, "m", 0..20, "m");
    assert!(files[1].exists(), "the younger files are not collected");
    db.verify_checksums().unwrap();
}

#[test]
fn a_leftover_blob_file_of_ours_is_removed_at_open_and_a_foreign_one_kept() {
    let dir = closed_with_one_blob_file();
    let live = blob_files(dir.path()).remove(0);
    // A copy of a blob file of ours under a number no MANIFEST names: what a compaction that crashed before
    // its edit leaves behind. And a file of the same name form holding something else.
    let ours = dir.path().join("000777.blob");
    let foreign = dir.path().join("000778.blob");
    std::fs::copy(&live, &ours).unwrap();
    let other: &[u8] = b"not a blob file of this database, longer than a header and its footer too";
    std::fs::write(&foreign, other).unwrap();
    let db = Db::open(dir.path(), blob_options()).unwrap();
    assert!(!ours.exists(), "our leftover is removed");
    assert!(foreign.exists(), "a file that is not provably ours stays");
    assert!(live.exists());
    assert_eq!(db.get("a").unwrap(), Some(big(0, "v")));
    db.put("b", big(1, "v")).unwrap();
    db.flush().unwrap();
    drop(db);
    assert_eq!(std::fs::read(&foreign).unwrap(), other, "left untouched by open, flush and close");
}

#[test]
fn an_external_file_holding_blob_references_is_refused() {
    use shaledb_format::blob::BlobIndex;
    use shaledb_format::ikey::{make_internal_key, ValueKind};
    use shaledb_vfs::Fs;
    let dir = tempfile::tempdir().unwrap();
    let sst = dir.path().join("external.sst");
    let file = shaledb_vfs::PosixFs::new().create(&sst).unwrap();
    let mut b = shaledb_format::table::TableBuilder::new(shaledb_format::table::TableOptions::default(), file);
    let mut index = Vec::new();
    let compression = shaledb_format::compress::CompressionType::None;
    BlobIndex { file_number: 5, offset: 30, size: 10, compression }.encode(&mut index);
    b.add(&make_internal_key(b"k", 0, ValueKind::BlobIndex), &index).unwrap();
    b.finish().unwrap();
    let db = Db::open(dir.path().join("db"), blob_options()).unwrap();
    let e = db.ingest_external_file(&[&sst], &shaledb::ingest::IngestExternalFileOptions::default()).unwrap_err();
    assert!(e.is_invalid_argument() && e.to_string().contains("blob references"), "{e}");
    assert_eq!(db.get("k").unwrap(), None);
}
