//! [`Db::open_read_only`]: RocksDB's `OpenForReadOnly`. The database is read as it is on disk and nothing is
//! written: no LOCK is taken (a writer may hold it), no LOG, IDENTITY, WAL, MANIFEST or table is created,
//! renamed or removed, and no background thread runs. The WALs are replayed into one memtable, so writes that
//! were acknowledged but not yet flushed are visible; a damaged WAL is judged as at a normal open (the recovery
//! mode), but what would be dropped is only left unread, never moved to `lost/`.
//!
//! The view is fixed at open: writes of a process that holds the database open meanwhile are not seen (reopen
//! to see them). Every write (`put`, `delete`, `merge`, `write`) and `flush`, `compact_range` and `sync_wal`
//! fail with [`Error::NotSupported`]; `wait_for_compaction` returns at once; `close` flushes nothing.

use super::wal::WalState;
use super::{ColumnFamilyDescriptor, Db, DbInner, Opened};
use crate::filenames;
use crate::identity;
use crate::info_log::InfoLog;
use crate::options::Options;
use crate::stats::Counters;
use crate::version_set::VersionSet;
use shaledb_vfs::{Error, Result};
use std::path::Path;
use std::sync::Arc;

impl Db {
    /// Opens the database in directory `path` for reading only, creating, changing and locking nothing (RocksDB's
    /// `OpenForReadOnly`): it can read a database in a read-only directory or on a read-only file system, or
    /// one another process holds open. The WAL is replayed into memory, so unflushed writes are visible. Writes,
    /// `flush`, `compact_range` and `sync_wal` fail with [`Error::NotSupported`].
    ///
    /// `create_if_missing` is ignored (a database that does not exist is an `InvalidArgument` error);
    /// `error_if_exists` is refused. `paranoid_checks` and `wal_recovery_mode` apply as at [`Db::open`].
    ///
    /// ```no_run
    /// use shaledb::{Db, Options};
    /// let db = Db::open_read_only("/var/lib/app/db", Options::default())?;
    /// let v = db.get(b"key")?;
    /// assert!(db.put(b"key", b"value").is_err());
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Ok(Db { inner: open(path.as_ref(), opts, &[])? })
    }

    /// [`Db::open_read_only`] with the options of column families (RocksDB's `OpenForReadOnly` with column
    /// family descriptors): each described family reads with its own options (its merge operator, prefix
    /// extractor, compaction filter and the other fields listed at [`ColumnFamilyDescriptor::options`]); a
    /// family not described reads with `opts`. A described family the database does not hold is
    /// `InvalidArgument` (a read-only open creates nothing), as is a descriptor of `"default"`.
    ///
    /// ```
    /// use shaledb::{merge, ColumnFamilyDescriptor, Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let counters = Options { merge_operator: merge::builtin("uint64add"), ..Options::default() };
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let cf = db.create_column_family("counters", counters.clone())?;
    /// db.merge_cf(&cf, "hits", 2u64.to_le_bytes())?;
    /// db.merge_cf(&cf, "hits", 3u64.to_le_bytes())?;
    /// drop(cf);
    /// db.close()?;
    /// let view = Db::open_read_only_with_column_families(
    ///     dir.path(),
    ///     Options::default(),
    ///     vec![ColumnFamilyDescriptor::new("counters", counters)],
    /// )?;
    /// let cf = view.column_family("counters").unwrap();
    /// assert_eq!(view.get_cf(&cf, "hits")?, Some(5u64.to_le_bytes().to_vec()));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn open_read_only_with_column_families(
        path: impl AsRef<Path>,
        opts: Options,
        families: Vec<ColumnFamilyDescriptor>,
    ) -> Result<Db> {
        Ok(Db { inner: open(path.as_ref(), opts, &families)? })
    }
}

fn open(dir: &Path, opts: Options, families: &[ColumnFamilyDescriptor]) -> Result<Arc<DbInner>> {
    opts.validate()?;
    if opts.error_if_exists {
        return Err(Error::InvalidArgument(
            "error_if_exists with a read-only open: the database must exist to be read".into(),
        ));
    }
    let fs = opts.fs.clone();
    super::errors::check_exists(fs.as_ref(), dir)?;
    let mut vs = VersionSet::recover(dir, &opts)?;
    let described = super::family_api::described_options(&opts, &vs, families, "a read-only open")?;
    let on_disk = identity::read(fs.as_ref(), dir)?;
    // A database from before identities: its tables carry none, so no table check needs one.
    let db_id = identity::reconcile(dir, vs.db_id, vs.manifest_number(), on_disk)?.unwrap_or_default();
    vs.db_id = Some(db_id);
    if opts.paranoid_checks {
        for f in vs.families().values() {
            super::files::check_live_files(fs.as_ref(), dir, &f.current)?;
        }
    }
    let names = fs.list(dir)?;
    let wals = filenames::live_wals(&names, vs.min_log_number());

    // No LOG: a logger without a file (replay reports through it).
    let info_log = InfoLog::without_file(fs.clone(), dir);
    let replayed =
        super::replay::replay_view(&opts, &|id| described.get(&id).cloned(), &vs, db_id, dir, &wals, &info_log)?;
    let max_seq = replayed.max_seq;
    let mut losses = replayed.losses;
    losses.kept.clear();

    let last_wal = wals.last().copied().unwrap_or(vs.min_log_number());
    let fams = replayed
        .fams
        .into_iter()
        .map(|(id, f)| (id, described.get(&id).cloned().unwrap_or_else(|| opts.clone()), f.mem))
        .collect();
    let counters = Counters::new(opts.num_levels);
    Ok(DbInner::assemble(
        dir,
        opts,
        Opened {
            vs,
            lock: None,
            fams,
            wal: WalState::without_log(last_wal, max_seq.saturating_add(1)),
            visible_seq: max_seq,
            counters,
            info_log,
            losses,
            read_only: true,
            secondary: None,
        },
    ))
}

#[cfg(test)]
mod tests {
    use crate::{Db, Options, WriteBatch, WriteOptions};
    use shaledb_vfs::{Error, FileLock, Fs, PosixFs, RandomAccessFile, ReadHints, Result, WritableFile};
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// The OS file system with every call that would change something refused (as on a read-only mount), and
    /// counted. Running as root, a chmod-ed directory stays writable; this refuses anyway.
    #[derive(Debug, Default)]
    struct NoWrites {
        attempts: AtomicUsize,
    }

    impl NoWrites {
        fn refuse(&self, op: &'static str, path: &Path) -> Error {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            Error::io(op, path, std::io::Error::other("refused by the test's read-only file system"))
        }
    }

    impl Fs for NoWrites {
        fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            Err(self.refuse("create", path))
        }
        fn open(&self, path: &Path, hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>> {
            PosixFs::new().open(path, hints)
        }
        fn rename(&self, from: &Path, _: &Path) -> Result<()> {
            Err(self.refuse("rename", from))
        }
        fn remove(&self, path: &Path) -> Result<()> {
            Err(self.refuse("remove", path))
        }
        fn list(&self, dir: &Path) -> Result<Vec<String>> {
            PosixFs::new().list(dir)
        }
        fn create_dir_all(&self, dir: &Path) -> Result<()> {
            Err(self.refuse("mkdir", dir))
        }
        fn sync_dir(&self, dir: &Path) -> Result<()> {
            Err(self.refuse("sync dir", dir))
        }
        fn exists(&self, path: &Path) -> bool {
            PosixFs::new().exists(path)
        }
        fn file_size(&self, path: &Path) -> Result<u64> {
            PosixFs::new().file_size(path)
        }
        fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
            Err(self.refuse("lock", path))
        }
    }

    /// Every file under `dir` with its contents and modification time.
    fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
        let mut out = BTreeMap::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let meta = e.metadata().unwrap();
                if meta.is_dir() {
                    todo.push(e.path());
                }
                let data = if meta.is_file() { std::fs::read(e.path()).unwrap() } else { Vec::new() };
                out.insert(e.path(), (data, meta.modified().unwrap()));
            }
        }
        out
    }

    fn small() -> Options {
        Options { write_buffer_size: 4 << 10, ..Options::default() }
    }

    /// Writes 300 keys in tables and 50 more (plus an overwrite and a delete) left in the WAL only.
    fn make_db(path: &Path) {
        let db = Db::open(path, small()).unwrap();
        for i in 0..300 {
            db.put(format!("k{i:04}").as_bytes(), format!("table {i}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
        for i in 300..350 {
            db.put(format!("k{i:04}").as_bytes(), format!("wal {i}").as_bytes()).unwrap();
        }
        db.put(b"k0000", b"overwritten in the WAL").unwrap();
        db.delete(b"k0001").unwrap();
        // Dropped, not closed: the last writes stay in the WAL only.
        drop(db);
    }

    fn assert_refused(r: Result<()>, what: &str) {
        match r {
            Err(Error::NotSupported(m)) => assert!(m.contains("read-only"), "{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
    }

    #[test]
    fn reads_unflushed_writes_and_refuses_every_write_creating_nothing() {
        let tmp = shaledb_testkit::tempdir();
        let path = tmp.path().join("db");
        make_db(&path);
        assert!(std::fs::read_dir(&path).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".log")));
        let before = snapshot(&path);
        let fs = Arc::new(NoWrites::default());
        let db = Db::open_read_only(&path, Options { fs: fs.clone(), ..small() }).unwrap();
        assert_eq!(db.get(b"k0000").unwrap().as_deref(), Some(&b"overwritten in the WAL"[..]));
        assert_eq!(db.get(b"k0001").unwrap(), None);
        assert_eq!(db.get(b"k0200").unwrap().as_deref(), Some(&b"table 200"[..]));
        assert_eq!(db.get(b"k0349").unwrap().as_deref(), Some(&b"wal 349"[..]));
        let mut it = db.cursor();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().unwrap();
        assert_eq!(n, 349);
        drop(it);

        assert_refused(db.put(b"x", b"y"), "put");
        assert_refused(db.delete(b"k0002"), "delete");
        let mut batch = WriteBatch::new();
        batch.put(b"x", b"y");
        assert_refused(db.write_opt(&WriteOptions::default(), &batch), "write");
        assert_refused(db.flush(), "flush");
        assert_refused(db.compact_range(None, None), "compact_range");
        assert_refused(db.sync_wal(), "sync_wal");
        db.wait_for_compaction().unwrap();
        assert_eq!(db.get(b"x").unwrap(), None);
        db.close().unwrap();
        assert_eq!(fs.attempts.load(Ordering::SeqCst), 0, "the read-only open tried to change the file system");
        assert!(snapshot(&path) == before, "files were created, changed or removed");

        // A normal open still finds everything (nothing was lost or consumed).
        let db = Db::open(&path, small()).unwrap();
        assert_eq!(db.get(b"k0349").unwrap().as_deref(), Some(&b"wal 349"[..]));
        db.close().unwrap();
    }

    #[test]
    fn reads_a_database_in_a_read_only_directory_and_beside_a_writer() {
        let tmp = shaledb_testkit::tempdir();
        let path = tmp.path().join("db");
        make_db(&path);
        let before = snapshot(&path);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o555)).unwrap();
        let read = Db::open_read_only(&path, Options::default()).map(|db| {
            let v = db.get(b"k0300");
            drop(db);
            v
        });
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(read.unwrap().unwrap().as_deref(), Some(&b"wal 300"[..]));
        assert!(snapshot(&path) == before, "files were created, changed or removed");

        // No LOCK is taken: a writer may hold the database meanwhile; the reader sees the state at its open.
        let writer = Db::open(&path, small()).unwrap();
        writer.put(b"new", b"1").unwrap();
        let reader = Db::open_read_only(&path, Options::default()).unwrap();
        assert_eq!(reader.get(b"new").unwrap().as_deref(), Some(&b"1"[..]));
        writer.put(b"newer", b"2").unwrap();
        assert_eq!(reader.get(b"newer").unwrap(), None);
        drop(reader);
        writer.close().unwrap();
    }

    #[test]
    fn a_missing_database_is_an_error_and_nothing_is_created() {
        let tmp = shaledb_testkit::tempdir();
        let missing = tmp.path().join("missing");
        let e = Db::open_read_only(&missing, Options { create_if_missing: true, ..Options::default() }).unwrap_err();
        assert!(e.is_invalid_argument() && e.to_string().contains("does not exist"), "{e}");
        assert!(!missing.exists());
        let e = Db::open_read_only(tmp.path(), Options::default()).unwrap_err();
        assert!(e.to_string().contains("holds no database"), "{e}");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "a file was created");
        let path = tmp.path().join("db");
        make_db(&path);
        let e = Db::open_read_only(&path, Options { error_if_exists: true, ..Options::default() }).unwrap_err();
        assert!(e.is_invalid_argument(), "{e}");
    }
}
