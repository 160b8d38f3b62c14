use super::*;
use crate::options::{Options, WriteOptions};
use shaledb_vfs::{FaultError, FaultPlan, FsOp, MemFs};

fn opts(fs: &MemFs) -> Options {
    Options { fs: Arc::new(fs.clone()), write_buffer_size: 4 << 10, ..Options::default() }
}

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

/// Keys `k0000..k{n}`: tables, a memtable, and writes without the WAL.
fn fill(db: &Db, n: usize) {
    for i in 0..n {
        db.put(format!("k{i:04}"), format!("v{i}")).unwrap();
    }
    db.put_opt(&WriteOptions { disable_wal: true, ..WriteOptions::default() }, "nowal", "x").unwrap();
}

/// A database on a new file system holding `k0000..k0009` = `v0..v9` in its WAL only, opened read-only.
pub(crate) fn read_only_db() -> (MemFs, Db) {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    for i in 0..10 {
        db.put(format!("k{i:04}"), format!("v{i}")).unwrap();
    }
    drop(db);
    let ro = Db::open_read_only("/db", opts(&fs)).unwrap();
    (fs, ro)
}

/// A database on a new file system holding [`fill`]'s `n` keys, all flushed.
fn flushed_db(n: usize) -> (MemFs, Db) {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    fill(&db, n);
    db.flush().unwrap();
    (fs, db)
}

fn assert_holds(db: &Db, n: usize) {
    for i in 0..n {
        assert_eq!(db.get(format!("k{i:04}")).unwrap(), Some(format!("v{i}").into_bytes()), "k{i:04}");
    }
    assert_eq!(db.get("nowal").unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn checkpoint_holds_every_acknowledged_write_and_opens_while_the_source_goes_on() {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    fill(&db, 400);
    db.create_checkpoint("/ckpt").unwrap();
    db.put("k0000", "after").unwrap();
    let names = fs.list(&p("/ckpt")).unwrap();
    assert!(names.iter().any(|n| n.ends_with(".sst")), "{names:?}");
    assert!(names.contains(&"CURRENT".to_string()) && names.contains(&"IDENTITY".to_string()), "{names:?}");
    assert!(!fs.exists(&p("/ckpt.tmp")));
    let copy = Db::open("/ckpt", opts(&fs)).unwrap();
    assert_holds(&copy, 400);
    assert_eq!(copy.identity(), db.identity());
    // The copy is independent: writes to either stay there.
    copy.put("only-copy", "1").unwrap();
    assert_eq!(db.get("only-copy").unwrap(), None);
    assert_eq!(db.get("k0000").unwrap().as_deref(), Some(&b"after"[..]));
}

#[test]
fn checkpoint_refuses_an_existing_directory() {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    fs.create_dir_all(&p("/there")).unwrap();
    let e = db.create_checkpoint("/there").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("/there"), "{e}");
    assert!(fs.list(&p("/there")).unwrap().is_empty());
    // The database's own directory too.
    assert!(db.create_checkpoint("/db").is_err());
}

#[test]
fn checkpoint_tables_are_hard_links_on_a_posix_file_system() {
    use std::os::unix::fs::MetadataExt;
    let tmp = shaledb_testkit::tempdir();
    let db = Db::open(tmp.path().join("db"), Options::default()).unwrap();
    fill(&db, 50);
    db.create_checkpoint(tmp.path().join("ckpt")).unwrap();
    let tables: Vec<_> = std::fs::read_dir(tmp.path().join("ckpt"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .collect();
    assert!(!tables.is_empty());
    for t in tables {
        assert_eq!(t.metadata().unwrap().nlink(), 2, "{:?}", t.file_name());
    }
    drop(db);
    let copy = Db::open(tmp.path().join("ckpt"), Options::default()).unwrap();
    assert_holds(&copy, 50);
}

#[test]
fn checkpoint_copies_a_table_when_linking_fails() {
    let (fs, db) = flushed_db(100);
    // The first table create after this is the link (the flush has nothing to write): it fails, the copy
    // (a create in the staging directory) works.
    fs.set_faults(FaultPlan::once(FsOp::Create, 1, FaultError::Eio).on_paths_containing(".sst"));
    db.create_checkpoint("/ckpt").unwrap();
    assert_eq!(fs.faults_fired(), 1);
    db.compact_range(None, None).unwrap();
    db.wait_for_compaction().unwrap();
    let copy = Db::open("/ckpt", opts(&fs)).unwrap();
    assert_holds(&copy, 100);
}

#[test]
fn checkpoint_failure_leaves_no_target_and_no_staging_directory() {
    let (fs, db) = flushed_db(100);
    fs.set_faults(FaultPlan::once(FsOp::Rename, 1, FaultError::Eio).on_paths_containing("ckpt"));
    let e = db.create_checkpoint("/ckpt").unwrap_err();
    assert!(e.to_string().contains("ckpt"), "{e}");
    assert!(!fs.exists(&p("/ckpt")) && !fs.exists(&p("/ckpt.tmp")));
    // Retried, it works.
    db.create_checkpoint("/ckpt").unwrap();
    assert_holds(&Db::open("/ckpt", opts(&fs)).unwrap(), 100);
}

#[test]
fn leftover_staging_directory_is_removed_but_foreign_files_in_it_are_refused() {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    fill(&db, 20);
    fs.write_file(&p("/ckpt.tmp/000007.sst"), b"half");
    fs.write_file(&p("/ckpt.tmp/CURRENT"), b"MANIFEST-000001\n");
    db.create_checkpoint("/ckpt").unwrap();
    assert!(!fs.exists(&p("/ckpt.tmp")));
    fs.write_file(&p("/other.tmp/notes.txt"), b"mine");
    let e = db.create_checkpoint("/other").unwrap_err();
    assert!(e.to_string().contains("notes.txt"), "{e}");
    assert_eq!(fs.read_file(&p("/other.tmp/notes.txt")).unwrap(), b"mine");
}

#[test]
fn pinned_file_set_keeps_its_tables_through_compaction() {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    fill(&db, 300);
    let set = db.live_file_set().unwrap();
    assert!(!set.tables.is_empty());
    for i in 0..300 {
        db.put(format!("k{i:04}"), "new").unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_compaction().unwrap();
    let live: Vec<u64> = db.inner.default.sv.load().version.levels.iter().flatten().map(|f| f.number).collect();
    assert!(set.tables.iter().any(|(n, _)| !live.contains(n)), "compaction replaced none of the pinned tables");
    for (n, size) in &set.tables {
        assert_eq!(fs.file_size(&filenames::table(&p("/db"), *n)).unwrap(), *size, "table {n} was deleted");
    }
}

#[test]
fn checkpoint_of_a_read_only_database_copies_its_wals() {
    let (fs, ro) = read_only_db();
    ro.create_checkpoint("/ckpt").unwrap();
    assert!(fs.list(&p("/ckpt")).unwrap().iter().any(|n| n.ends_with(".log")));
    let copy = Db::open("/ckpt", opts(&fs)).unwrap();
    for i in 0..10 {
        assert_eq!(copy.get(format!("k{i:04}")).unwrap(), Some(format!("v{i}").into_bytes()));
    }
}

#[test]
fn checkpoint_of_a_failed_database_is_refused() {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    db.put("k", "v").unwrap();
    fs.set_faults(FaultPlan::once(FsOp::Sync, 1, FaultError::Eio));
    assert!(db.put_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, "k2", "v").is_err());
    fs.clear_faults();
    let e = db.create_checkpoint("/ckpt").unwrap_err();
    assert!(matches!(e, Error::ReadOnly { .. }), "{e}");
    assert!(!fs.exists(&p("/ckpt")));
}
