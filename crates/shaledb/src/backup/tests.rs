use super::*;
use crate::options::Options;
use shaledb_vfs::{FaultError, FaultPlan, FsOp, MemFs};

fn opts(fs: &MemFs) -> Options {
    Options { fs: Arc::new(fs.clone()), write_buffer_size: 4 << 10, ..Options::default() }
}

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn engine(fs: &MemFs) -> BackupEngine {
    BackupEngine::open_with(&p("/bk"), Arc::new(fs.clone())).unwrap()
}

fn put_range(db: &Db, range: std::ops::Range<usize>, tag: &str) {
    for i in range {
        db.put(format!("k{i:04}"), format!("{tag}{i}")).unwrap();
    }
}

fn assert_range(db: &Db, range: std::ops::Range<usize>, tag: &str) {
    for i in range {
        assert_eq!(db.get(format!("k{i:04}")).unwrap(), Some(format!("{tag}{i}").into_bytes()), "k{i:04}");
    }
}

/// A database on a new file system holding `range` written with tag "a".
fn db_with(range: std::ops::Range<usize>) -> (MemFs, Db) {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    put_range(&db, range, "a");
    (fs, db)
}

/// Restores backup `id` into `target` and checks that it holds `range` written with tag "a".
fn assert_restores(e: &BackupEngine, fs: &MemFs, id: u64, target: &str, range: std::ops::Range<usize>) {
    e.restore(id, target).unwrap();
    assert_range(&Db::open(target, opts(fs)).unwrap(), range, "a");
}

fn shared(fs: &MemFs) -> Vec<String> {
    fs.list(&p("/bk/shared")).unwrap()
}

#[test]
fn backup_create_list_verify_restore_roundtrip() {
    let (fs, db) = db_with(0..300);
    let mut e = engine(&fs);
    assert!(e.list().is_empty());
    let id = e.create_backup(&db).unwrap();
    assert_eq!(id, 1);
    put_range(&db, 0..10, "b");
    let list = e.list();
    assert_eq!(list.len(), 1);
    let info = &list[0];
    assert_eq!(info.id, 1);
    assert!(info.timestamp > 1_600_000_000 && info.file_count >= 4 && info.size > 0, "{info:?}");
    assert!(info.sequence >= 300, "{info:?}");
    e.verify(1).unwrap();
    e.restore(1, "/restored").unwrap();
    let r = Db::open("/restored", opts(&fs)).unwrap();
    assert_range(&r, 0..300, "a");
    assert_eq!(r.identity(), db.identity());
    // Reopened, the engine lists the same backup.
    drop(e);
    assert_eq!(engine(&fs).list(), list);
}

/// Counts the files created under `prefix` from now on (the recorder's selector sees every operation).
fn count_creates(fs: &MemFs, prefix: &'static str) -> Arc<std::sync::atomic::AtomicUsize> {
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = n.clone();
    fs.record_before(move |op, path, _| {
        if op == FsOp::Create && path.starts_with(prefix) {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        false
    });
    n
}

#[test]
fn second_backup_copies_only_new_tables() {
    let (fs, db) = db_with(0..300);
    let mut e = engine(&fs);
    let created = count_creates(&fs, "/bk/shared");
    e.create_backup(&db).unwrap();
    let first = shared(&fs);
    assert_eq!(created.swap(0, std::sync::atomic::Ordering::Relaxed), first.len());
    put_range(&db, 300..320, "a");
    e.create_backup(&db).unwrap();
    let second = shared(&fs);
    let new: Vec<&String> = second.iter().filter(|n| !first.contains(n)).collect();
    assert!(!new.is_empty(), "the new writes made no new table");
    assert!(first.iter().all(|n| second.contains(n)));
    // Only the new tables were copied.
    assert_eq!(created.load(std::sync::atomic::Ordering::Relaxed), new.len());
    fs.stop_recording();
    let shared_in = |id: u64| e.backups[&id].files.iter().filter(|f| f.stored.starts_with("shared/")).count();
    assert!(shared_in(2) > new.len(), "the second backup shares no table with the first");
    e.verify(2).unwrap();
    assert_restores(&e, &fs, 2, "/r2", 0..320);
}

#[test]
fn verify_reports_a_changed_size_or_checksum_naming_the_file() {
    let (fs, db) = db_with(0..100);
    let mut e = engine(&fs);
    e.create_backup(&db).unwrap();
    let table = format!("/bk/shared/{}", shared(&fs)[0]);
    let mut data = fs.read_file(&p(&table)).unwrap();
    data[10] ^= 0xff;
    fs.write_file(&p(&table), &data);
    let err = e.verify(1).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains(&table) && err.to_string().contains("crc32c"), "{err}");
    // Restore checks too, and leaves no database that would open.
    let err = e.restore(1, "/r").unwrap_err();
    assert!(err.to_string().contains(&table), "{err}");
    assert!(!fs.exists(&p("/r/CURRENT")));
    data.pop();
    fs.write_file(&p(&table), &data);
    let err = e.verify(1).unwrap_err();
    assert!(err.to_string().contains("bytes"), "{err}");
    fs.remove(&p(&table)).unwrap();
    let err = e.verify(1).unwrap_err();
    assert!(err.to_string().contains(&table), "{err}");
}

#[test]
fn restore_refuses_a_non_empty_target_and_an_unknown_id() {
    let (fs, db) = db_with(0..10);
    let mut e = engine(&fs);
    e.create_backup(&db).unwrap();
    fs.write_file(&p("/full/x"), b"1");
    let err = e.restore(1, "/full").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("/full"), "{err}");
    let err = e.restore(9, "/new").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("no backup 9"), "{err}");
    assert!(e.verify(9).is_err() && e.delete(9).is_err());
    // An existing empty directory is fine.
    fs.create_dir_all(&p("/empty")).unwrap();
    assert_restores(&e, &fs, 1, "/empty", 0..10);
}

#[test]
fn delete_and_purge_remove_only_files_no_backup_uses() {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    let mut e = engine(&fs);
    for round in 0..3 {
        put_range(&db, round * 100..round * 100 + 100, "a");
        e.create_backup(&db).unwrap();
    }
    db.compact_range(None, None).unwrap();
    put_range(&db, 0..5, "z");
    e.create_backup(&db).unwrap();
    assert_eq!(e.list().iter().map(|b| b.id).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    e.delete(2).unwrap();
    assert!(!fs.exists(&p("/bk/private/2")) && !fs.exists(&p("/bk/meta/2")));
    assert_eq!(e.purge_old(2).unwrap(), vec![1]);
    assert_eq!(e.list().iter().map(|b| b.id).collect::<Vec<_>>(), vec![3, 4]);
    let used: HashSet<String> = e.backups.values().flat_map(|m| m.files.iter().map(|f| f.stored.clone())).collect();
    for name in shared(&fs) {
        assert!(used.contains(&format!("shared/{name}")), "{name} is used by no backup but was kept");
    }
    for id in [3, 4] {
        e.verify(id).unwrap();
    }
    assert_restores(&e, &fs, 3, "/r3", 0..300);
    assert_eq!(e.purge_old(5).unwrap(), Vec::<u64>::new());
    assert_eq!(e.purge_old(0).unwrap(), vec![3, 4]);
    assert!(shared(&fs).is_empty() && fs.list(&p("/bk/private")).unwrap().is_empty());
}

#[test]
fn corrupt_metadata_is_reported_never_listed_and_keeps_shared_files() {
    let (fs, db) = db_with(0..100);
    let mut e = engine(&fs);
    e.create_backup(&db).unwrap();
    put_range(&db, 100..200, "a");
    e.create_backup(&db).unwrap();
    drop(e);
    let before = shared(&fs);
    let mut meta = fs.read_file(&p("/bk/meta/2")).unwrap();
    meta[20] ^= 1;
    fs.write_file(&p("/bk/meta/2"), &meta);
    let mut e = engine(&fs);
    assert_eq!(e.list().iter().map(|b| b.id).collect::<Vec<_>>(), vec![1]);
    let corrupt = e.corrupt_backups();
    assert_eq!(corrupt.len(), 1);
    assert_eq!(corrupt[0].0, 2);
    assert!(corrupt[0].1.to_string().contains("/bk/meta/2"), "{}", corrupt[0].1);
    for err in [e.verify(2).unwrap_err(), e.restore(2, "/r").unwrap_err()] {
        assert!(err.is_corruption() && err.to_string().contains("/bk/meta/2"), "{err}");
    }
    // Its tables are kept while its references are unknown, also when another backup goes.
    e.delete(1).unwrap();
    assert_eq!(shared(&fs), before);
    // A new backup never reuses its id.
    assert_eq!(e.create_backup(&db).unwrap(), 3);
    e.delete(2).unwrap();
    assert!(e.corrupt_backups().is_empty());
    e.verify(3).unwrap();
}

#[test]
fn garbage_empty_or_truncated_metadata_is_an_error_not_a_panic() {
    let fs = MemFs::new();
    fs.write_file(&p("/bk/meta/1"), &[0xff; 100]);
    fs.write_file(&p("/bk/meta/2"), b"");
    fs.write_file(&p("/bk/meta/3"), b"shaledb-backup 1\nid 3\n");
    fs.write_file(&p("/bk/meta/notes"), b"not ours");
    let e = engine(&fs);
    let ids: Vec<u64> = e.corrupt_backups().iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    assert!(e.list().is_empty());
    assert!(fs.exists(&p("/bk/meta/notes")));
}

#[test]
fn interrupted_backup_is_invisible_and_cleaned_at_the_next_open() {
    let (fs, db) = db_with(0..100);
    let mut e = engine(&fs);
    e.create_backup(&db).unwrap();
    let kept = shared(&fs);
    put_range(&db, 100..200, "a");
    // The metadata's rename (the commit point) fails.
    fs.set_faults(FaultPlan::once(FsOp::Rename, 1, FaultError::Eio).on_paths_containing("/bk/meta/"));
    assert!(e.create_backup(&db).is_err());
    fs.clear_faults();
    // The failed backup's files are gone at once.
    assert_eq!(e.list().len(), 1);
    assert!(!fs.exists(&p("/bk/meta/2.tmp")) && !fs.exists(&p("/bk/private/2")));
    assert_eq!(shared(&fs), kept);
    // A crash leaves them for the next open (here, as a kill in the middle of the backup would).
    fs.write_file(&p("/bk/meta/2.tmp"), b"shaledb-backup 1\n");
    fs.write_file(&p("/bk/private/2/CURRENT"), b"MANIFEST-000001\n");
    fs.write_file(&p("/bk/shared/000099_00000000_0.sst"), b"");
    fs.write_file(&p("/bk/shared/000098_00000000_5.sst.tmp"), b"part");
    drop(e);
    let mut e = engine(&fs);
    assert_eq!(e.list().len(), 1);
    assert!(!fs.exists(&p("/bk/meta/2.tmp")) && !fs.exists(&p("/bk/private/2")));
    assert_eq!(shared(&fs), kept);
    assert_eq!(e.create_backup(&db).unwrap(), 2);
    // Files that are not ours in a leftover private directory stay, with their directory.
    fs.write_file(&p("/bk/private/7/notes.txt"), b"mine");
    fs.write_file(&p("/bk/private/7/CURRENT"), b"MANIFEST-000001\n");
    drop(e);
    let e = engine(&fs);
    assert_eq!(fs.list(&p("/bk/private/7")).unwrap(), vec!["notes.txt".to_string()]);
    e.verify(2).unwrap();
}

#[test]
fn a_second_engine_on_one_directory_is_busy() {
    let fs = MemFs::new();
    let _e = engine(&fs);
    let err = BackupEngine::open_with(&p("/bk"), Arc::new(fs.clone())).unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err}");
}

#[test]
fn backup_of_a_read_only_database_holds_its_wals() {
    let (fs, ro) = crate::db::checkpoint::tests::read_only_db();
    let mut e = engine(&fs);
    e.create_backup(&ro).unwrap();
    assert!(e.backups[&1].files.iter().any(|f| f.name.ends_with(".log")));
    // The newest write is in the WAL, not in a table: the backup still reports it.
    assert_eq!(e.list()[0].sequence, 10);
    e.restore(1, "/r").unwrap();
    assert_range(&Db::open("/r", opts(&fs)).unwrap(), 0..10, "v");
}

/// Every path under `dir`, sorted (directories and files): what a refusal must leave as it was.
fn tree(fs: &MemFs, dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for name in fs.list(dir).unwrap_or_default() {
        let path = dir.join(name);
        out.push(path.clone());
        out.extend(tree(fs, &path));
    }
    out.sort();
    out
}

#[test]
fn open_existing_refuses_a_missing_path_creating_nothing() {
    let fs = MemFs::new();
    fs.create_dir_all(&p("/data")).unwrap();
    let err = BackupEngine::open_existing_with(&p("/data/bk"), Arc::new(fs.clone())).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("/data/bk does not exist") && msg.contains("backup create DB /data/bk"), "{msg}");
    assert!(!fs.exists(&p("/data/bk")));
    assert!(tree(&fs, &p("/data")).is_empty());
}

#[test]
fn open_existing_and_open_refuse_a_database_directory_creating_nothing() {
    let (fs, db) = db_with(0..10);
    db.flush().unwrap();
    let before = tree(&fs, &p("/db"));
    let existing = BackupEngine::open_existing_with(&p("/db"), Arc::new(fs.clone())).unwrap_err();
    let created = BackupEngine::open_with(&p("/db"), Arc::new(fs.clone())).unwrap_err();
    for (err, hint) in [
        (existing, "to back it up: `shaledb backup create /db BACKUP_DIR`"),
        (created, "backups go into a directory of their own"),
    ] {
        assert!(err.is_invalid_argument(), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("/db is a database, not a backup directory") && msg.contains(hint), "{msg}");
    }
    assert_eq!(tree(&fs, &p("/db")), before);
    assert_range(&db, 0..10, "a");
}

#[test]
fn open_existing_refuses_a_directory_that_is_not_a_backup_directory() {
    let fs = MemFs::new();
    fs.create_dir_all(&p("/empty")).unwrap();
    fs.create_dir_all(&p("/half/meta")).unwrap();
    fs.write_file(&p("/half/shared"), b"a file, not a directory");
    fs.write_file(&p("/afile"), b"text");
    for (dir, what) in [
        ("/empty", "it has no meta/, shared/, private/"),
        ("/half", "it has no shared/, private/"),
        ("/afile", "is not a directory"),
    ] {
        let before = tree(&fs, &p("/"));
        assert!(before.contains(&p("/half/meta")), "{before:?}");
        let err = BackupEngine::open_existing_with(&p(dir), Arc::new(fs.clone())).unwrap_err();
        assert!(err.is_invalid_argument(), "{dir}: {err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("{dir} is not")) && msg.contains(what), "{dir}: {msg}");
        assert_eq!(tree(&fs, &p("/")), before, "{dir}: something was created");
    }
}

#[test]
fn open_existing_opens_what_open_made_with_its_backups() {
    let (fs, db) = db_with(0..10);
    let mut e = engine(&fs);
    e.create_backup(&db).unwrap();
    drop(e);
    let e = BackupEngine::open_existing_with(&p("/bk"), Arc::new(fs.clone())).unwrap();
    assert_eq!(e.list().iter().map(|b| b.id).collect::<Vec<_>>(), vec![1]);
    e.verify(1).unwrap();
    // An empty backup directory (made, no backup yet) is one too.
    drop(BackupEngine::open_with(&p("/bk2"), Arc::new(fs.clone())).unwrap());
    assert!(BackupEngine::open_existing_with(&p("/bk2"), Arc::new(fs.clone())).unwrap().list().is_empty());
}
