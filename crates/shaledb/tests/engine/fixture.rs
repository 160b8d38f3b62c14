//! The frozen fixture database (`shaledb_testkit::fixture`): files written once by format version 1, read by
//! every later build. A change that makes this fail breaks every database written by version 1.

use shaledb::{Db, Options};
use shaledb_testkit::fixture;
use std::path::{Path, PathBuf};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

/// Copies the committed files (opening writes: WAL replay, a new MANIFEST), returning the copy's directory.
fn copy_of_fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture_dir()).expect("the fixture directory") {
        let entry = entry.unwrap();
        assert!(entry.file_type().unwrap().is_file(), "unexpected entry in the fixture: {:?}", entry.path());
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    tmp
}

#[test]
fn the_frozen_v1_database_reads_exactly() {
    // The files are what the fixture says: tables, and a WAL holding the unflushed tail.
    let names: Vec<String> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let tables = names.iter().filter(|n| n.ends_with(".sst")).count();
    assert!(tables >= 4, "{tables} tables in {names:?}");
    let wal_bytes: u64 = names
        .iter()
        .filter(|n| n.ends_with(".log"))
        .map(|n| std::fs::metadata(fixture_dir().join(n)).unwrap().len())
        .sum();
    assert!(wal_bytes > 0, "no unflushed WAL tail in {names:?}");
    // Written before OPTIONS files existed: it opens without the options checks, and then has one.
    assert!(!names.iter().any(|n| n.starts_with("OPTIONS-")), "{names:?}");

    let (flushed, tail) = fixture::ops();
    let want = fixture::expected(flushed.iter().chain(&tail));
    let dir = copy_of_fixture();
    let db = Db::open(dir.path(), Options { create_if_missing: false, ..fixture::options() }).unwrap();
    // Several levels hold tables (levels 0-1 store blocks uncompressed, deeper levels lz4).
    let levels_with_files =
        (0..7).filter(|l| db.property(&format!("shaledb.num-files-at-level{l}")).is_some_and(|n| n != "0")).count();
    assert!(levels_with_files >= 2, "tables on {levels_with_files} level(s)");
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.range(..).map(|r| r.unwrap()).collect();
    assert_eq!(got.len(), want.len(), "number of keys");
    for ((gk, gv), (wk, wv)) in got.iter().zip(&want) {
        assert_eq!((gk, gv), (wk, wv), "key {}", String::from_utf8_lossy(wk));
    }
    // Point reads agree with the scan, including keys the history deleted.
    for key in ["key000000", "key004321", "key008999", "counter000", "counter199", "nokey"] {
        assert_eq!(db.get(key.as_bytes()).unwrap().as_ref(), want.get(key.as_bytes()), "{key}");
    }
    db.verify_checksums().unwrap();
    db.close().unwrap();
    let loaded = Options::load_latest(dir.path()).unwrap();
    assert_eq!(loaded.options.write_buffer_size, fixture::options().write_buffer_size);
    assert_eq!(loaded.merge_operator_name, fixture::options().merge_operator.map(|m| m.name().to_string()));
}
