//! Files that are not ours, and what open checks (docs/durability.md D9).

use crate::tiny_options;
use shaledb::{Db, Error, Options};
use shaledb_format::edit::{VersionEdit, BYTEWISE_COMPARATOR};
use shaledb_vfs::{FaultError, FaultPlan, Fs, FsOp, MemFs};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Every regular file of `dir` with its contents.
fn snapshot_dir(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap()))
        .collect()
}

fn tables(dir: &Path) -> Vec<String> {
    snapshot_dir(dir).into_keys().filter(|n| n.ends_with(".sst")).collect()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Issue 9: open on a directory holding files that merely look like ours replayed `20240101.log`, deleted both
/// files and numbered its own files from them.
#[test]
fn look_alike_files_in_a_fresh_directory_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("20240101.log"), b"a log of someone else's program\n").unwrap();
    std::fs::write(dir.path().join("7.sst"), b"not a table of ours").unwrap();
    let before = snapshot_dir(dir.path());
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("20240101.log") && msg.contains("7.sst"), "{msg}");
    assert_eq!(snapshot_dir(dir.path()), before, "nothing replayed, deleted or created (not even LOCK)");
}

/// A fresh directory holding only our LOCK and IDENTITY is ours: the database is created and keeps that id.
#[test]
fn a_directory_holding_only_lock_and_identity_gets_a_database_with_that_identity() {
    let dir = tempfile::tempdir().unwrap();
    let id = "00112233445566778899aabbccddeeff";
    std::fs::write(dir.path().join("IDENTITY"), format!("{id}\n")).unwrap();
    std::fs::write(dir.path().join("LOCK"), b"").unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.identity(), id);
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.identity(), id, "the id survives reopen (it is in the MANIFEST)");
}

/// Each new database gets its own random id, kept in IDENTITY and across reopen; a lost IDENTITY is rewritten
/// from the MANIFEST, a different one is corruption (files of two databases mixed).
#[test]
fn database_identity_is_random_persistent_and_checked() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let da = Db::open(a.path(), Options::default()).unwrap();
    let db = Db::open(b.path(), Options::default()).unwrap();
    let (ia, ib) = (da.identity(), db.identity());
    assert_ne!(ia, ib);
    assert_eq!(ia.len(), 32);
    da.close().unwrap();
    db.close().unwrap();
    assert_eq!(std::fs::read_to_string(a.path().join("IDENTITY")).unwrap(), format!("{ia}\n"));
    std::fs::remove_file(a.path().join("IDENTITY")).unwrap();
    let da = Db::open(a.path(), Options::default()).unwrap();
    assert_eq!(da.identity(), ia);
    da.close().unwrap();
    assert_eq!(std::fs::read_to_string(a.path().join("IDENTITY")).unwrap(), format!("{ia}\n"));
    std::fs::copy(b.path().join("IDENTITY"), a.path().join("IDENTITY")).unwrap();
    let err = Db::open(a.path(), Options::default()).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("IDENTITY"), "{err}");
}

/// Issue 9: a missing CURRENT made open create a new database and delete every table, WAL and MANIFEST.
/// Now it is refused (also with create_if_missing) naming what was found, and `repair` brings it back.
#[test]
fn missing_current_is_refused_and_repair_brings_the_database_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    for i in 0..2000 {
        db.put(key(i), format!("v{i}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
    let before = snapshot_dir(dir.path());
    let err = Db::open(dir.path(), Options { create_if_missing: true, ..tiny_options() }).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("MANIFEST-") && msg.contains(".sst") && msg.contains("repair"), "{msg}");
    assert_eq!(snapshot_dir(dir.path()), before, "a damaged database is left as it is");

    let report = shaledb::repair(dir.path(), &tiny_options()).unwrap();
    assert!(report.rewrote_current);
    assert_eq!(report.previous, None);
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    for i in 0..2000 {
        assert_eq!(db.get(key(i)).unwrap(), Some(format!("v{i}").into_bytes()), "key {i}");
    }
    db.verify_checksums().unwrap();
}

/// `repair` passes over a newer MANIFEST that does not replay (here: garbage) or names a missing table.
#[test]
fn repair_takes_the_newest_manifest_that_replays_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let current = std::fs::read_to_string(dir.path().join("CURRENT")).unwrap();
    std::fs::write(dir.path().join("MANIFEST-900000"), b"garbage that is no MANIFEST").unwrap();
    std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
    let report = shaledb::repair(dir.path(), &tiny_options()).unwrap();
    assert_eq!(format!("{}\n", report.manifest), current);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].0, "MANIFEST-900000");
    assert!(dir.path().join("MANIFEST-900000").exists(), "repair deletes nothing");
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    drop(db);
    // Nothing to repair from: an error, not a new database.
    let empty = tempfile::tempdir().unwrap();
    assert!(shaledb::repair(empty.path(), &tiny_options()).unwrap_err().is_invalid_argument());
}

/// Issue 39: `repair` on a directory that is no database left a LOCK file, and its error named a CURRENT that
/// did not exist. It now says what is wrong and creates nothing.
#[test]
fn repair_of_a_directory_without_a_database_says_so_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"not a database").unwrap();
    let before = snapshot_dir(dir.path());
    let err = shaledb::repair(dir.path(), &tiny_options()).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("holds no database (no CURRENT and no MANIFEST)"), "{msg}");
    assert!(!msg.contains("CURRENT at offset"), "{msg}");
    assert_eq!(snapshot_dir(dir.path()), before, "nothing created, not even LOCK");

    // A CURRENT without any MANIFEST: damaged, and still nothing to repair from.
    std::fs::write(dir.path().join("CURRENT"), b"MANIFEST-000005\n").unwrap();
    let before = snapshot_dir(dir.path());
    let err = shaledb::repair(dir.path(), &tiny_options()).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("holds no MANIFEST"), "{err}");
    assert_eq!(snapshot_dir(dir.path()), before, "nothing created, not even LOCK");
}

/// Issue 39: `Db::open` without create_if_missing on an existing directory that holds no database took the
/// LOCK before finding out, and left the file. It refuses now creating nothing at all.
#[test]
fn open_without_create_if_missing_creates_nothing_where_there_is_no_database() {
    let no_create = || Options { create_if_missing: false, ..tiny_options() };
    let dir = tempfile::tempdir().unwrap();
    let err = Db::open(dir.path(), no_create()).unwrap_err();
    assert!(err.is_invalid_argument() && err.to_string().contains("holds no database"), "{err}");
    assert!(snapshot_dir(dir.path()).is_empty(), "nothing created, not even LOCK");
    // An interrupted creation (LOCK and IDENTITY only) is not created further either.
    std::fs::write(dir.path().join("IDENTITY"), "00112233445566778899aabbccddeeff\n").unwrap();
    std::fs::write(dir.path().join("LOCK"), b"").unwrap();
    let before = snapshot_dir(dir.path());
    let err = Db::open(dir.path(), no_create()).unwrap_err();
    assert!(err.is_invalid_argument() && err.to_string().contains("holds no database"), "{err}");
    assert_eq!(snapshot_dir(dir.path()), before);
    // Nor among files that are not ours.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("notes.txt"), b"mine").unwrap();
    let before = snapshot_dir(other.path());
    let err = Db::open(other.path(), no_create()).unwrap_err();
    assert!(err.is_invalid_argument() && err.to_string().contains("holds no database"), "{err}");
    assert_eq!(snapshot_dir(other.path()), before);
    // A damaged database (a MANIFEST, no CURRENT) is still named as one, with repair suggested.
    let db = Db::open(other.path().join("db"), tiny_options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    std::fs::remove_file(other.path().join("db/CURRENT")).unwrap();
    std::fs::remove_file(other.path().join("db/LOCK")).unwrap();
    let before = snapshot_dir(&other.path().join("db"));
    let err = Db::open(other.path().join("db"), no_create()).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("repair"), "{err}");
    assert_eq!(snapshot_dir(&other.path().join("db")), before, "nothing created, not even LOCK");
    // A path that does not exist stays so.
    let missing = dir.path().join("missing");
    assert!(Db::open(&missing, no_create()).unwrap_err().is_invalid_argument());
    assert!(!missing.exists());
}

/// Issue 9: a stray empty `18446744073709551615.log` made the file counter wrap (`n + 1`); new files took the
/// numbers of live ones, and after overwrite, flush and compact the database was corrupt.
#[test]
fn stray_u64_max_log_file_does_not_wrap_the_file_counter() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny_options;
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..3000 {
        db.put(key(i), b"first").unwrap();
    }
    db.close().unwrap();
    let stray = dir.path().join(format!("{}.log", u64::MAX));
    std::fs::write(&stray, b"").unwrap();

    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..3000 {
        db.put(key(i), format!("second{i}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..3000 {
        assert_eq!(db.get(key(i)).unwrap(), Some(format!("second{i}").into_bytes()), "key {i}");
    }
    db.verify_checksums().unwrap();
    drop(db);
    assert!(stray.exists(), "a name that is not ours is left alone");
    for name in snapshot_dir(dir.path()).into_keys() {
        let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && name != format!("{}.log", u64::MAX) {
            assert!(digits.parse::<u64>().unwrap() < 1 << 20, "{name}: the counter did not jump");
        }
    }
}

/// Issue 9: a MANIFEST edit with `next_file_number = u64::MAX` is corruption naming the MANIFEST, never a
/// counter that wraps.
#[test]
fn manifest_with_next_file_number_u64_max_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default()).unwrap().close().unwrap();
    let fs = shaledb_vfs::PosixFs::new();
    let path = dir.path().join("MANIFEST-100000");
    let mut w = shaledb_format::log::Writer::new(fs.create(&path).unwrap());
    let edit = VersionEdit {
        comparator: Some(BYTEWISE_COMPARATOR.into()),
        format_version: Some(shaledb_format::FORMAT_VERSION),
        log_number: Some(0),
        next_file_number: Some(u64::MAX),
        last_sequence: Some(0),
        ..VersionEdit::default()
    };
    let mut buf = Vec::new();
    edit.encode(&mut buf);
    w.add_record(&buf).unwrap();
    w.sync().unwrap();
    drop(w);
    std::fs::write(dir.path().join("CURRENT"), "MANIFEST-100000\n").unwrap();
    match Db::open(dir.path(), Options::default()).unwrap_err() {
        Error::Corruption { file, what, .. } => {
            assert!(file.ends_with("MANIFEST-100000"), "{}", file.display());
            assert!(what.contains("next file number"), "{what}");
        }
        other => panic!("expected corruption, got {other}"),
    }
}

/// A MANIFEST that records a column family by the grammar of docs/format/manifest.md (written here by hand,
/// not by the engine) opens with that family, empty, and a write to it survives a reopen.
#[test]
fn manifest_written_by_the_grammar_opens_with_its_column_family() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default()).unwrap().close().unwrap();
    let fs = shaledb_vfs::PosixFs::new();
    let path = dir.path().join("MANIFEST-100000");
    let mut w = shaledb_format::log::Writer::new(fs.create(&path).unwrap());
    let snapshot = VersionEdit {
        comparator: Some(BYTEWISE_COMPARATOR.into()),
        format_version: Some(shaledb_format::FORMAT_VERSION),
        log_number: Some(0),
        next_file_number: Some(100_001),
        last_sequence: Some(0),
        ..VersionEdit::default()
    };
    let family = VersionEdit {
        family: Some(1),
        family_add: Some("users".into()),
        max_family: Some(1),
        log_number: Some(0),
        ..VersionEdit::default()
    };
    for e in [snapshot, family] {
        let mut buf = Vec::new();
        e.encode(&mut buf);
        w.add_record(&buf).unwrap();
    }
    w.sync().unwrap();
    drop(w);
    std::fs::write(dir.path().join("CURRENT"), "MANIFEST-100000\n").unwrap();
    assert_eq!(Db::list_column_families(dir.path(), Options::default()).unwrap(), ["default", "users"]);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let users = db.column_family("users").expect("the family of the MANIFEST");
    assert_eq!(users.id(), 1);
    assert_eq!(db.iter_cf(&users).count(), 0);
    db.put_cf(&users, "ada", "1").unwrap();
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let users = db.column_family("users").unwrap();
    assert_eq!(db.get_cf(&users, "ada").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get("ada").unwrap(), None);
}

/// A WAL record that writes to a column family the MANIFEST does not hold is damage (a family exists in the
/// MANIFEST before any write names it): recovery reports it with the WAL's name, and never applies the record to
/// the default family.
#[test]
fn wal_record_of_an_unknown_column_family_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default()).unwrap().close().unwrap();
    let fs = shaledb_vfs::PosixFs::new();
    let path = dir.path().join("099999.log");
    let mut w = shaledb_format::log::Writer::new(fs.create(&path).unwrap());
    let mut batch = shaledb_format::batch::BatchRep::new();
    batch.put(b"plain", b"v");
    batch.push_record(3, shaledb_format::ikey::ValueKind::Value, b"k", b"v");
    batch.set_sequence(1);
    w.add_record(batch.data()).unwrap();
    w.sync().unwrap();
    drop(w);
    match Db::open(dir.path(), Options::default()).unwrap_err() {
        Error::Corruption { file, what, .. } => {
            assert!(file.ends_with("099999.log"), "{}", file.display());
            assert!(what.contains("column family 3"), "{what}");
        }
        other => panic!("expected corruption, got {other}"),
    }
}

/// Two flushed L0 tables: keys `a*` in the first, `b*` in the second. Returns their names, oldest first.
fn two_tables(dir: &Path) -> (String, String) {
    let opts = Options { disable_auto_compactions: true, write_buffer_size: 1 << 20, ..tiny_options() };
    let db = Db::open(dir, opts).unwrap();
    for i in 0..200 {
        db.put(format!("a{i:04}").as_bytes(), b"first table").unwrap();
    }
    db.flush().unwrap();
    for i in 0..300 {
        db.put(format!("b{i:04}").as_bytes(), b"second table").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let t = tables(dir);
    assert_eq!(t.len(), 2, "{t:?}");
    (t[0].clone(), t[1].clone())
}

/// Issue 9: a table file swapped for another of the same database read as missing keys with no error, and
/// `verify_checksums` passed. Now get, iter and verify give corruption naming the file.
#[test]
fn swapped_table_is_corruption_not_missing_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = two_tables(dir.path());
    std::fs::copy(dir.path().join(&first), dir.path().join(&second)).unwrap();
    let opts = Options { disable_auto_compactions: true, paranoid_checks: false, ..tiny_options() };
    let db = Db::open(dir.path(), opts).unwrap();
    let named = |e: &Error| e.is_corruption() && e.to_string().contains(&second);
    let e = db.get(b"b0007").unwrap_err();
    assert!(named(&e), "{e}");
    assert_eq!(db.get(b"a0007").unwrap(), Some(b"first table".to_vec()));
    let mut it = db.cursor();
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    let e = it.status().unwrap_err();
    assert!(named(&e), "{e}");
    let e = db.verify_checksums().unwrap_err();
    assert!(named(&e), "{e}");
    drop(it);
    drop(db);
    // With paranoid checks (the default) the open itself refuses: the size differs.
    let e = Db::open(dir.path(), tiny_options()).unwrap_err();
    assert!(named(&e), "{e}");
}

/// Issue 9: a database whose live table is missing, empty or truncated opened and failed at the first read
/// (and accepted writes). Now open refuses, naming the file.
#[test]
fn missing_empty_or_truncated_live_table_is_refused_at_open() {
    for damage in ["missing", "empty", "truncated"] {
        let dir = tempfile::tempdir().unwrap();
        let (_, second) = two_tables(dir.path());
        let path = dir.path().join(&second);
        let len = std::fs::metadata(&path).unwrap().len();
        match damage {
            "missing" => std::fs::remove_file(&path).unwrap(),
            "empty" => std::fs::File::options().write(true).open(&path).unwrap().set_len(0).unwrap(),
            _ => std::fs::File::options().write(true).open(&path).unwrap().set_len(len - 100).unwrap(),
        }
        let before = snapshot_dir(dir.path());
        let e = Db::open(dir.path(), tiny_options()).unwrap_err();
        let msg = e.to_string();
        assert!(e.is_corruption() && msg.contains(&second), "{damage}: {msg}");
        let word = if damage == "truncated" { "bytes" } else { damage };
        assert!(msg.contains(word), "{damage}: {msg}");
        assert_eq!(snapshot_dir(dir.path()), before, "{damage}: a refused open changes nothing");
    }
}

/// Files in a live database whose names are not ours, or that cannot be proven ours, are never replayed,
/// deleted or numbered from; new files step over their numbers.
#[test]
fn unknown_files_in_a_database_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let strangers: [(&str, &[u8]); 5] = [
        ("notes.txt", b"operator notes"),
        ("7.sst", b"x"),
        ("000020.sst", b"a look-alike above the counter, no identity"),
        ("000021.dbtmp", b"y"),
        ("18446744073709551615.log", b""),
    ];
    for (name, data) in strangers {
        std::fs::write(dir.path().join(name), data).unwrap();
    }
    for round in 0..3 {
        let db = Db::open(dir.path(), tiny_options()).unwrap();
        for i in 0..3000 {
            db.put(key(i), format!("{round}-{i}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        db.close().unwrap();
    }
    let after = snapshot_dir(dir.path());
    for (name, data) in strangers {
        assert_eq!(after.get(name).map(Vec::as_slice), Some(data), "{name}");
    }
    let db = Db::open(dir.path(), tiny_options()).unwrap();
    assert_eq!(db.get(key(5)).unwrap(), Some(b"2-5".to_vec()));
    db.verify_checksums().unwrap();
}

/// Issue 9: recoveries killed part-way each left orphan tables until the disk was full and every open failed.
/// Leftovers of ours (tables above the counter carrying this database's id, temp files below it) are removed at
/// the start of open, before it creates any file: here every create fails and they are gone all the same.
#[test]
fn leftovers_of_killed_recoveries_are_removed_before_open_writes_anything() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let opts = || Options { fs: Arc::new(fs.clone()), ..tiny_options() };
    let db = Db::open(dir, Options { write_buffer_size: 8 << 20, ..opts() }).unwrap();
    for i in 0..2000 {
        db.put(key(i), b"in the WAL only").unwrap();
    }
    drop(db); // no flush: the writes are only in the WAL
    let ssts = |fs: &MemFs| fs.file_names(dir).into_iter().filter(|n| n.ends_with(".sst")).count();
    assert_eq!(ssts(&fs), 0);
    // Three recoveries die after writing their L0 tables, before the new MANIFEST.
    // Before the fix they piled up (1, 2, 3 tables); now each open first removes the previous one's.
    for _ in 0..3 {
        fs.set_faults(FaultPlan::once(FsOp::Create, 1, FaultError::Enospc).on_paths_containing("MANIFEST-"));
        assert!(Db::open(dir, Options { write_buffer_size: 8 << 20, ..opts() }).is_err());
        fs.clear_faults();
        assert_eq!(ssts(&fs), 1, "{:?}", fs.file_names(dir));
    }
    fs.write_file(&dir.join("000002.dbtmp"), b"MANIFEST-000001\n"); // below the counter: ours
                                                                    // A full disk: every create fails. The leftovers go before the first create is tried.
    fs.set_faults(FaultPlan::from_nth(FsOp::Create, 1, FaultError::Enospc));
    let e = Db::open(dir, Options { write_buffer_size: 8 << 20, ..opts() }).unwrap_err();
    assert!(e.is_no_space(), "{e}");
    fs.clear_faults();
    assert_eq!(ssts(&fs), 0, "{:?}", fs.file_names(dir));
    assert!(!fs.file_names(dir).contains(&"000002.dbtmp".to_string()));
    let db = Db::open(dir, opts()).unwrap();
    for i in 0..2000 {
        assert_eq!(db.get(key(i)).unwrap(), Some(b"in the WAL only".to_vec()), "key {i}");
    }
    db.verify_checksums().unwrap();
}

/// `destroy` removes a database and says what it removed; a directory that holds none is refused untouched.
#[test]
fn destroy_refuses_what_is_not_a_database_and_reports_what_it_removed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("20240101.log"), b"theirs").unwrap();
    std::fs::write(dir.path().join("CURRENT"), b"another program's CURRENT\n").unwrap();
    let before = snapshot_dir(dir.path());
    let e = shaledb::destroy(dir.path()).unwrap_err();
    assert!(e.is_invalid_argument() && e.to_string().contains("20240101.log"), "{e}");
    assert_eq!(snapshot_dir(dir.path()), before);

    let db_dir = tempfile::tempdir().unwrap();
    let path = db_dir.path().join("db");
    let db = Db::open(&path, tiny_options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    std::fs::write(path.join("notes.txt"), b"mine").unwrap();
    let removed = shaledb::destroy(&path).unwrap();
    assert!(
        removed.iter().any(|n| n == "CURRENT") && removed.iter().any(|n| n.starts_with("MANIFEST-")),
        "{removed:?}"
    );
    assert!(removed.iter().any(|n| n == "IDENTITY"), "{removed:?}");
    assert_eq!(snapshot_dir(&path).into_keys().collect::<Vec<_>>(), vec!["notes.txt".to_string()]);
    // An empty directory (or a missing one) is fine.
    assert_eq!(shaledb::destroy(db_dir.path().join("none")).unwrap(), Vec::<String>::new());
}

/// A creation killed before CURRENT existed leaves MANIFEST-000001 recording no file and CURRENT's temp file:
/// no write was ever acknowledged there, so open finishes the creation. A first MANIFEST that records a
/// table is a damaged database and is refused.
#[test]
fn an_interrupted_creation_is_finished_but_a_manifest_naming_tables_is_refused() {
    let write_manifest = |dir: &Path, with_table: bool| {
        let fs = shaledb_vfs::PosixFs::new();
        let mut w = shaledb_format::log::Writer::new(fs.create(&dir.join("MANIFEST-000001")).unwrap());
        let mut edit = VersionEdit {
            comparator: Some(BYTEWISE_COMPARATOR.into()),
            log_number: Some(0),
            next_file_number: Some(2),
            last_sequence: Some(0),
            ..VersionEdit::default()
        };
        if with_table {
            let k = |s: u64| shaledb_format::ikey::make_internal_key(b"k", s, shaledb_format::ikey::ValueKind::Value);
            let meta = shaledb_format::edit::FileMeta {
                number: 5,
                file_size: 1,
                smallest: k(2),
                largest: k(1),
                ..Default::default()
            };
            edit.add_file(0, meta);
        }
        let mut buf = Vec::new();
        edit.encode(&mut buf);
        w.add_record(&buf).unwrap();
        w.sync().unwrap();
    };
    let dir = tempfile::tempdir().unwrap();
    write_manifest(dir.path(), false);
    std::fs::write(dir.path().join("000002.dbtmp"), b"MANIFEST-000001\n").unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    assert!(!dir.path().join("000002.dbtmp").exists());

    let dir = tempfile::tempdir().unwrap();
    write_manifest(dir.path(), true);
    let e = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains("MANIFEST-000001"), "{e}");
    assert!(dir.path().join("MANIFEST-000001").exists());
}

/// The WAL files of `dir` that this process still holds open after they were deleted.
#[cfg(target_os = "linux")]
fn deleted_wals_held_open(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|t| t.starts_with(&*dir.to_string_lossy()) && t.ends_with(".log (deleted)"))
        .collect()
}

/// A WAL switched out unsynced stays open (a later synced write may have to sync it) until its memtable's
/// flush is recorded. Then the flush deletes it and closes it: the close of a deleted WAL frees its blocks,
/// and it used to wait for the next memtable switch, where every writer waited behind it under the state and
/// WAL locks (docs/perf/wal-close.md).
#[cfg(target_os = "linux")]
#[test]
fn a_flushed_wal_is_deleted_and_closed_by_its_flush_not_held_until_the_next_switch() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..1000 {
        db.put(key(i), vec![b'v'; 100]).unwrap();
    }
    // The switch puts the unsynced WAL in the closed list; the flush makes it obsolete.
    db.flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let held = deleted_wals_held_open(dir.path());
        if held.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "deleted WALs still open with no further switch: {held:?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let live: Vec<String> = snapshot_dir(dir.path()).into_keys().filter(|n| n.ends_with(".log")).collect();
    assert_eq!(live.len(), 1, "only the current WAL is left: {live:?}");
    for i in 0..1000 {
        assert_eq!(db.get(key(i)).unwrap().as_deref(), Some(&[b'v'; 100][..]), "key {i} after the flush");
    }
}
