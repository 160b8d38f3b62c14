//! `shaledb verify` as a user runs it: the real binary on real directories.

use shaledb::{Db, Options};
use std::path::Path;
use std::process::Command;

fn verify(args: &[&str], path: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).arg("verify").args(args).arg(path).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn small() -> Options {
    Options { write_buffer_size: 4096, block_size: 256, ..Options::default() }
}

#[test]
fn not_a_database_is_one_line_and_exit_2() {
    let tmp = shaledb_testkit::tempdir();
    std::fs::write(tmp.path().join("20240101.log"), b"someone else's").unwrap();
    let (code, out, err) = verify(&[], tmp.path());
    assert_eq!(code, Some(2), "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a ShaleDB database"), "{err}");
    assert!(!tmp.path().join("LOCK").exists(), "verify wrote into a directory that is not a database");
    let (code, _, err) = verify(&[], &tmp.path().join("missing"));
    assert_eq!(code, Some(2));
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn open_database_is_refused_naming_the_lock_and_live_checks_it() {
    let tmp = shaledb_testkit::tempdir();
    let path = tmp.path().join("db");
    let db = Db::open(&path, small()).unwrap();
    for i in 0..500 {
        db.put(format!("k{i:04}").as_bytes(), [b'x'; 50]).unwrap();
    }
    db.flush().unwrap();
    let (code, out, err) = verify(&[], &path);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("open elsewhere") && err.contains("LOCK"), "{err}");
    let (code, out, err) = verify(&["--live"], &path);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("verify: 0 problems"), "{out}");
    drop(db);
    std::fs::write(path.join("README.txt"), b"an operator's note").unwrap();
    let (code, out, err) = verify(&[], &path);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("note README.txt"), "{out}");
}

/// Tables holding range tombstones (their recorded range covers the tombstones) verify clean, and `dump` lists
/// the tombstones of a table and the count the MANIFEST records.
#[test]
fn range_tombstones_verify_clean_and_dump_lists_them() {
    let tmp = shaledb_testkit::tempdir();
    let path = tmp.path().join("db");
    let db = Db::open(&path, small()).unwrap();
    for i in 0..300 {
        db.put(format!("k{i:04}").as_bytes(), [b'x'; 50]).unwrap();
    }
    db.delete_range("k0100", "k0200").unwrap();
    // A tombstone past every point key: the table's recorded range reaches beyond its last entry.
    db.delete_range("k0290", "z").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.delete_range("k0010", "k0020").unwrap();
    db.flush().unwrap();
    drop(db);
    let (code, out, err) = verify(&[], &path);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("verify: 0 problems"), "{out}");
    let tables: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    let dumps: Vec<String> = tables
        .iter()
        .map(|t| {
            let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).arg("dump").arg(t).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
        .collect();
    assert!(dumps.iter().any(|d| d.contains("range tombstones:") && d.contains("['k0010' .. 'k0020')")), "{dumps:?}");
}

/// Blob files: `verify` reads them (also `--live`, which pins them with the tables), names a damaged one, and
/// `dump` shows a table's blob references and the MANIFEST's blob files.
#[test]
fn verify_and_dump_read_blob_files() {
    let tmp = shaledb_testkit::tempdir();
    let path = tmp.path().join("db");
    let opts = Options { enable_blob_files: true, min_blob_size: 32, ..small() };
    let db = Db::open(&path, opts).unwrap();
    for i in 0..200 {
        db.put(format!("k{i:04}").as_bytes(), [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    let (code, out, err) = verify(&["--live"], &path);
    assert_eq!(code, Some(0), "{out}{err}");
    drop(db);
    let (code, out, err) = verify(&[], &path);
    assert_eq!(code, Some(0), "{out}{err}");
    let with_ext = |ext: &str| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        v.sort();
        v
    };
    let sst = with_ext("sst").pop().unwrap();
    let dump = Command::new(env!("CARGO_BIN_EXE_shaledb")).arg("dump").arg(&sst).output().unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout);
    assert!(dump.contains(" BLOB => blob #"), "{dump}");
    let blob = with_ext("blob").pop().unwrap();
    let mut data = std::fs::read(&blob).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 1;
    std::fs::write(&blob, &data).unwrap();
    let (code, out, err) = verify(&[], &path);
    assert_eq!(code, Some(1), "{out}{err}");
    let name = blob.file_name().unwrap().to_string_lossy().into_owned();
    assert!(out.contains(&name) || err.contains(&name), "{out}{err}");
}
