//! Incremental backups: [`BackupEngine`], RocksDB's `BackupEngine` simplified.
//!
//! A backup directory holds:
//!
//! ```text
//! LOCK                            held by the open BackupEngine
//! meta/<id>                       one committed backup (format: docs/format/backup.md)
//! meta/<id>.tmp                   a backup's metadata being written
//! shared/NNNNNN_<crc>_<size>.sst  a table, shared by every backup holding it
//! shared/NNNNNN_<crc>_<size>.blob a blob file, shared the same way
//! shared/*.tmp                    a table being copied
//! private/<id>/                   the backup's MANIFEST, CURRENT, IDENTITY, newest OPTIONS file (and WALs of a
//!                                 read-only source)
//! ```
//!
//! [`BackupEngine::open`] makes a backup directory when it is missing (what taking a backup needs);
//! [`BackupEngine::open_existing`] opens only a directory that already is one and creates nothing, so that
//! reading backups from a mistyped path, or from a database's directory, is an error rather than a new, empty
//! backup directory. Neither ever makes one inside a database directory.
//!
//! A backup is made from the same consistent file set as a checkpoint (`db/checkpoint.rs`: flush, then the
//! pinned current version and a snapshot MANIFEST), so restoring it gives every write acknowledged before
//! [`BackupEngine::create_backup`]. Tables are shared by name, size and crc32c (RocksDB's
//! `share_files_with_checksum` naming): a later backup copies only tables no earlier backup holds (it still
//! reads each table once to compute its checksum, as RocksDB does for files without a stored one). A copied
//! file gets its final name only once it is whole and fsynced (copied under a `.tmp` name, then renamed).
//!
//! Crash safety: the metadata file is written as `meta/<id>.tmp`, fsynced and renamed to `meta/<id>` last, so
//! a backup exists only once everything it lists is durable. An interrupted backup leaves no listed backup;
//! opening the backup directory removes what it left (temp files, a private directory without metadata, shared
//! tables no backup lists). Deletion removes the metadata first, then the files only that backup used.
//!
//! Simplifications against RocksDB, on purpose: one backup directory per engine (no separate
//! `shared_checksum` and `shared` schemes, no rate limiter, no app metadata, no exclusion of files); a
//! metadata file that fails its checks makes that backup *corrupt* ([`BackupEngine::corrupt_backups`]):
//! never listed, restored or verified, and while one exists no shared file is garbage-collected (its
//! references are unknown); [`BackupEngine::delete`] removes it. Restore writes into an empty or new
//! directory, CURRENT last: an interrupted restore leaves a directory that open refuses (no CURRENT, our
//! files) and restore refuses (not empty).

mod meta;

use crate::db::checkpoint::{copy_between, file_checksum, write_file, write_manifest};
use crate::filenames::{self, FileKind};
use crate::Db;
use meta::{BackupFile, Meta};
use shaledb_vfs::{Error, FileLock, Fs, Result};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What [`BackupEngine::list`] reports about one backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupInfo {
    /// The backup's id: 1 for the first, one more than the newest for each later one.
    pub id: u64,
    /// When it was made: seconds since the Unix epoch, UTC.
    pub timestamp: u64,
    /// Total size of its files in bytes (shared tables counted in every backup holding them).
    pub size: u64,
    /// How many files it holds.
    pub file_count: usize,
    /// Sequence number of the newest write it holds.
    pub sequence: u64,
}

/// An open backup directory (see the module docs). Holds the directory's `LOCK` while open: a second
/// engine on the same directory, in this process or another, gets [`Error::Busy`].
pub struct BackupEngine {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    _lock: Box<dyn FileLock>,
    backups: BTreeMap<u64, Meta>,
    corrupt: BTreeMap<u64, Error>,
}

impl std::fmt::Debug for BackupEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupEngine").field("dir", &self.dir).field("backups", &self.backups.len()).finish()
    }
}

/// The subdirectories every backup directory holds (see the module docs).
const BACKUP_SUBDIRS: [&str; 3] = ["meta", "shared", "private"];

/// Refuses `dir` when its listing `names` shows a database (CURRENT or a MANIFEST). `reading`: the caller
/// reads backups (the directory was likely given for the database: say how to back it up), else it makes one.
fn refuse_database(dir: &Path, names: &[String], reading: bool) -> Result<()> {
    let database = names.iter().any(|n| matches!(filenames::parse(n), Some(FileKind::Current | FileKind::Manifest(_))));
    if !database {
        return Ok(());
    }
    let hint = if reading {
        format!("to back it up: `shaledb backup create {} BACKUP_DIR`", dir.display())
    } else {
        "backups go into a directory of their own, never into a database".to_string()
    };
    Err(Error::InvalidArgument(format!("{} is a database, not a backup directory ({hint})", dir.display())))
}

/// Checks, creating nothing, that `dir` is an existing backup directory; the error says what it is instead.
fn check_backup_dir(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let made_by =
        || format!("a backup directory is made by the first backup: `shaledb backup create DB {}`", dir.display());
    if !fs.exists(dir) {
        return Err(Error::InvalidArgument(format!("{} does not exist; {}", dir.display(), made_by())));
    }
    let names = fs.list(dir).map_err(|_| {
        Error::InvalidArgument(format!("{} is not a directory, so not a backup directory", dir.display()))
    })?;
    refuse_database(dir, &names, true)?;
    let missing: Vec<String> = BACKUP_SUBDIRS
        .iter()
        .filter(|sub| !names.iter().any(|n| n == *sub) || fs.list(&dir.join(sub)).is_err())
        .map(|sub| format!("{sub}/"))
        .collect();
    if !missing.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} is not a backup directory (it has no {}); {}",
            dir.display(),
            missing.join(", "),
            made_by()
        )));
    }
    Ok(())
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl BackupEngine {
    /// Opens (creating it when missing) the backup directory `dir` on the operating system's file system; a
    /// database directory is refused. Only what makes backups should call it: to read backups without
    /// creating anything, [`BackupEngine::open_existing`]. Cleans what an interrupted backup or deletion left. A metadata file that fails its checks does not
    /// fail the open: the backup is reported by [`BackupEngine::corrupt_backups`].
    ///
    /// ```
    /// use shaledb::{backup::BackupEngine, Db, Options};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # let (path, backups, restored) = (tmp.path().join("db"), tmp.path().join("bk"), tmp.path().join("r"));
    /// let db = Db::open(&path, Options::default())?;
    /// db.put("k", "v1")?;
    /// let mut engine = BackupEngine::open(&backups)?;
    /// let first = engine.create_backup(&db)?;
    /// db.put("k", "v2")?;
    /// engine.create_backup(&db)?;
    /// engine.verify(first)?;
    /// engine.restore(first, &restored)?;
    /// assert_eq!(Db::open(&restored, Options::default())?.get("k")?, Some(b"v1".to_vec()));
    /// engine.purge_old(1)?; // keeps only the newest
    /// assert_eq!(engine.list().len(), 1);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        BackupEngine::open_with(dir.as_ref(), shaledb_vfs::default_fs())
    }

    /// [`BackupEngine::open`] on a given file system (the one backups are written to and restored from).
    /// Refuses a database directory (backups go beside a database, never into one), creating nothing there.
    pub fn open_with(dir: &Path, fs: Arc<dyn Fs>) -> Result<BackupEngine> {
        if fs.exists(dir) {
            if let Ok(names) = fs.list(dir) {
                refuse_database(dir, &names, false)?;
            }
        }
        BackupEngine::open_dir(dir, fs)
    }

    /// Opens the backup directory `dir`, which must already be one (made by [`BackupEngine::open`], which the
    /// first backup uses): it must hold `meta/`, `shared/` and `private/`. A path that does not exist, a
    /// database directory or any other directory is [`Error::InvalidArgument`] naming what it is, and nothing
    /// is created (no `LOCK`, no subdirectory). For the commands that read backups: `list`, `verify`,
    /// `restore`, `purge`, `delete`.
    ///
    /// ```
    /// use shaledb::backup::BackupEngine;
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let missing = tmp.path().join("no-backups-here");
    /// assert!(BackupEngine::open_existing(&missing).unwrap_err().is_invalid_argument());
    /// assert!(!missing.exists());
    /// BackupEngine::open(&missing)?; // creates it
    /// assert!(BackupEngine::open_existing(&missing)?.list().is_empty());
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn open_existing(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        BackupEngine::open_existing_with(dir.as_ref(), shaledb_vfs::default_fs())
    }

    /// [`BackupEngine::open_existing`] on a given file system.
    pub fn open_existing_with(dir: &Path, fs: Arc<dyn Fs>) -> Result<BackupEngine> {
        check_backup_dir(fs.as_ref(), dir)?;
        BackupEngine::open_dir(dir, fs)
    }

    fn open_dir(dir: &Path, fs: Arc<dyn Fs>) -> Result<BackupEngine> {
        for sub in BACKUP_SUBDIRS {
            fs.create_dir_all(&dir.join(sub))?;
        }
        let lock = fs.lock(&dir.join("LOCK"))?;
        let mut engine = BackupEngine {
            dir: dir.to_path_buf(),
            fs,
            _lock: lock,
            backups: BTreeMap::new(),
            corrupt: BTreeMap::new(),
        };
        for name in engine.fs.list(&dir.join("meta"))? {
            let path = dir.join("meta").join(&name);
            if name.ends_with(".tmp") {
                // An interrupted backup's metadata: never renamed, never a backup.
                engine.fs.remove(&path)?;
                continue;
            }
            let Some(id) = meta::parse_meta_name(&name) else { continue };
            match engine.read_meta(&path, id) {
                Ok(m) => {
                    engine.backups.insert(id, m);
                }
                Err(e) => {
                    engine.corrupt.insert(id, e);
                }
            }
        }
        engine.fs.sync_dir(&dir.join("meta"))?;
        engine.collect_garbage()?;
        Ok(engine)
    }

    fn read_meta(&self, path: &Path, id: u64) -> Result<Meta> {
        let size = self.fs.file_size(path)?;
        if size > meta::MAX_META_BYTES {
            return Err(Error::corruption(
                path,
                0,
                format!("{size} bytes, more than the {}-byte limit", meta::MAX_META_BYTES),
            ));
        }
        Meta::decode(&self.fs.read_all(path)?, path, id)
    }

    /// The backups, oldest first.
    pub fn list(&self) -> Vec<BackupInfo> {
        self.backups
            .values()
            .map(|m| BackupInfo {
                id: m.id,
                timestamp: m.timestamp,
                size: m.files.iter().map(|f| f.size).sum(),
                file_count: m.files.len(),
                sequence: m.sequence,
            })
            .collect()
    }

    /// Backups whose metadata file failed its checks, with the error naming the file. They are never listed,
    /// verified or restored; [`BackupEngine::delete`] removes them.
    pub fn corrupt_backups(&self) -> Vec<(u64, Error)> {
        self.corrupt.iter().map(|(id, e)| (*id, e.clone())).collect()
    }

    fn get(&self, id: u64) -> Result<&Meta> {
        if let Some(e) = self.corrupt.get(&id) {
            return Err(e.clone());
        }
        self.backups.get(&id).ok_or_else(|| {
            Error::InvalidArgument(format!("no backup {id} in {} (see `shaledb backup list`)", self.dir.display()))
        })
    }

    /// Backs up the database `db` (every write acknowledged before the call) and returns the new backup's id.
    /// Tables an earlier backup holds (same number, size and crc32c) are not copied again. On an error no
    /// backup is added and what was copied is removed (or, if that fails too, at the next open).
    pub fn create_backup(&mut self, db: &Db) -> Result<u64> {
        let id = self.backups.keys().chain(self.corrupt.keys()).max().map_or(1, |m| m + 1);
        match self.write_backup(db, id) {
            Ok(m) => {
                self.backups.insert(id, m);
                Ok(id)
            }
            Err(e) => {
                let _ = self.collect_garbage();
                Err(e)
            }
        }
    }

    /// Copies the files of backup `id` and commits its metadata; returns the metadata.
    fn write_backup(&self, db: &Db, id: u64) -> Result<Meta> {
        let set = db.live_file_set()?;
        let (src_fs, src) = (db.fs().as_ref(), db.path());
        let fs = self.fs.as_ref();
        let private = self.dir.join("private").join(id.to_string());
        fs.create_dir_all(&private)?;
        let mut files = Vec::new();
        let tables = set.tables.iter().map(|&(n, size)| (n, size, false));
        for (number, size, blob) in tables.chain(set.blobs.iter().map(|&(n, size)| (n, size, true))) {
            let from = if blob { filenames::blob(src, number) } else { filenames::table(src, number) };
            let (len, crc) = file_checksum(src_fs, &from)?;
            if len != size {
                return Err(Error::corruption(&from, 0, format!("file is {len} bytes, the MANIFEST records {size}")));
            }
            let stored =
                if blob { meta::shared_blob_path(number, crc, size) } else { meta::shared_path(number, crc, size) };
            let to = self.dir.join(&stored);
            if !(fs.exists(&to) && fs.file_size(&to)? == size) {
                let tmp = self.dir.join(format!("{stored}.tmp"));
                let (_, copied) = copy_between(src_fs, &from, fs, &tmp, Some(size))?;
                if copied != crc {
                    let _ = fs.remove(&tmp);
                    return Err(Error::corruption(&from, 0, "table changed while it was backed up"));
                }
                fs.rename(&tmp, &to)?;
            }
            let name = from.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            files.push(BackupFile { name, stored, size, crc });
        }
        fs.sync_dir(&self.dir.join("shared"))?;
        let mut private_file = |name: String, write: &dyn Fn(&Path) -> Result<()>| -> Result<()> {
            let stored = meta::private_path(id, &name);
            let path = self.dir.join(&stored);
            write(&path)?;
            let (size, crc) = file_checksum(fs, &path)?;
            files.push(BackupFile { name, stored, size, crc });
            Ok(())
        };
        for &(n, len) in &set.wals {
            let name = filenames::wal(Path::new(""), n).display().to_string();
            private_file(name, &|to| copy_between(src_fs, &filenames::wal(src, n), fs, to, len).map(|_| ()))?;
        }
        private_file(filenames::manifest_name(set.manifest_number), &|to| write_manifest(fs, to, &set.edits))?;
        if src_fs.exists(&filenames::identity(src)) {
            private_file("IDENTITY".into(), &|to| {
                copy_between(src_fs, &filenames::identity(src), fs, to, None).map(|_| ())
            })?;
        }
        if let Some(n) = set.options_file {
            let name = filenames::options_name(n);
            private_file(name.clone(), &|to| copy_between(src_fs, &src.join(&name), fs, to, None).map(|_| ()))?;
        }
        let current = format!("{}\n", filenames::manifest_name(set.manifest_number));
        private_file(filenames::CURRENT.into(), &|to| write_file(fs, to, current.as_bytes()))?;
        fs.sync_dir(&private)?;
        fs.sync_dir(&self.dir.join("private"))?;
        let m = Meta { id, timestamp: now_secs(), sequence: set.last_sequence(), files };
        let path = meta::meta_path(&self.dir, id);
        let tmp = path.with_file_name(format!("{id}.tmp"));
        write_file(fs, &tmp, &m.encode())?;
        let committed = fs.rename(&tmp, &path).and_then(|()| fs.sync_dir(&self.dir.join("meta")));
        if let Err(e) = committed {
            // Not known to be durable: withdrawn, so that garbage collection may remove its files.
            let _ = fs.remove(&path);
            let _ = fs.remove(&tmp);
            return Err(e);
        }
        Ok(m)
    }

    /// Checks that every file of backup `id` exists with the size and crc32c its metadata records. The error
    /// names the first file that does not.
    pub fn verify(&self, id: u64) -> Result<()> {
        let m = self.get(id)?;
        for f in &m.files {
            let path = self.dir.join(&f.stored);
            let (size, crc) = file_checksum(self.fs.as_ref(), &path)?;
            if size != f.size {
                return Err(Error::corruption(&path, 0, format!("{size} bytes, backup {id} records {}", f.size)));
            }
            if crc != f.crc {
                return Err(Error::corruption(
                    &path,
                    0,
                    format!("crc32c {crc:08x}, backup {id} records {:08x}", f.crc),
                ));
            }
        }
        Ok(())
    }

    /// Restores backup `id` into `target`, which must not exist or be an empty directory. Every file is
    /// checked against its recorded size and crc32c while it is copied; CURRENT is written last. Open the
    /// result with [`Db::open`].
    pub fn restore(&self, id: u64, target: impl AsRef<Path>) -> Result<()> {
        let target = target.as_ref();
        let m = self.get(id)?;
        let fs = self.fs.as_ref();
        if fs.exists(target) {
            let names = fs.list(target)?;
            if !names.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "restore target {} is not empty ({}); restore only into a new or empty directory",
                    target.display(),
                    crate::db::files::list_names(&names)
                )));
            }
        }
        fs.create_dir_all(target)?;
        let (current, rest): (Vec<&BackupFile>, Vec<&BackupFile>) =
            m.files.iter().partition(|f| f.name == filenames::CURRENT);
        for f in &rest {
            self.restore_file(id, f, target)?;
        }
        // Everything else is durable before CURRENT names it.
        fs.sync_dir(target)?;
        for f in &current {
            self.restore_file(id, f, target)?;
        }
        fs.sync_dir(target)
    }

    fn restore_file(&self, id: u64, f: &BackupFile, target: &Path) -> Result<()> {
        let fs = self.fs.as_ref();
        let from = self.dir.join(&f.stored);
        let (size, crc) = copy_between(fs, &from, fs, &target.join(&f.name), None)?;
        if (size, crc) != (f.size, f.crc) {
            let _ = fs.remove(&target.join(&f.name));
            return Err(Error::corruption(
                &from,
                0,
                format!("{size} bytes with crc32c {crc:08x}, backup {id} records {} and {:08x}", f.size, f.crc),
            ));
        }
        Ok(())
    }

    /// Deletes backup `id` (a corrupt one too) and the files no other backup uses.
    pub fn delete(&mut self, id: u64) -> Result<()> {
        if !self.backups.contains_key(&id) && !self.corrupt.contains_key(&id) {
            return Err(Error::InvalidArgument(format!("no backup {id} in {}", self.dir.display())));
        }
        // The metadata goes first: from then on the backup does not exist, whatever remains of its files.
        self.fs.remove(&meta::meta_path(&self.dir, id))?;
        self.fs.sync_dir(&self.dir.join("meta"))?;
        self.backups.remove(&id);
        self.corrupt.remove(&id);
        self.collect_garbage()
    }

    /// Deletes the oldest backups until at most `keep` remain; returns the ids deleted. Corrupt backups are
    /// neither counted nor deleted.
    pub fn purge_old(&mut self, keep: usize) -> Result<Vec<u64>> {
        let excess = self.backups.len().saturating_sub(keep);
        let old: Vec<u64> = self.backups.keys().take(excess).copied().collect();
        for &id in &old {
            self.delete(id)?;
        }
        Ok(old)
    }

    /// Removes temp files, private directories of no backup, and (when no metadata is corrupt) shared
    /// tables no backup lists.
    fn collect_garbage(&self) -> Result<()> {
        let fs = self.fs.as_ref();
        let known = |id: u64| self.backups.contains_key(&id) || self.corrupt.contains_key(&id);
        let private = self.dir.join("private");
        for name in fs.list(&private)? {
            if meta::parse_meta_name(&name).is_some_and(known) {
                continue;
            }
            let sub = private.join(&name);
            // Only what we write: a directory named by an id holding database files.
            let Some(_) = meta::parse_meta_name(&name) else { continue };
            for f in fs.list(&sub)? {
                if filenames::parse(&f).is_some_and(|k| !matches!(k, FileKind::LostDir)) {
                    fs.remove(&sub.join(f))?;
                }
            }
            // A directory still holding files that are not ours stays, with them.
            if fs.list(&sub)?.is_empty() {
                fs.remove_dir(&sub)?;
            }
        }
        fs.sync_dir(&private)?;
        let shared = self.dir.join("shared");
        let used: HashSet<&str> =
            self.backups.values().flat_map(|m| m.files.iter().map(|f| f.stored.as_str())).collect();
        for name in fs.list(&shared)? {
            let stored = format!("shared/{name}");
            let ours = [".sst", ".sst.tmp", ".blob", ".blob.tmp"].iter().any(|ext| name.ends_with(ext));
            let unused = name.ends_with(".tmp") || (self.corrupt.is_empty() && !used.contains(stored.as_str()));
            if ours && unused {
                fs.remove(&shared.join(&name))?;
            }
        }
        fs.sync_dir(&shared)
    }

    /// The backup directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests;
