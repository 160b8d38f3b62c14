//! Checkpoints ([`Db::create_checkpoint`], RocksDB's `Checkpoint::CreateCheckpoint`) and the consistent live
//! file set they and backups (`crate::backup`) are made from.
//!
//! The file set ([`LiveFileSet`]):
//!
//! 1. Flush: every memtable written so far becomes L0 tables (RocksDB flushes unless `log_size_for_flush`
//!    says otherwise; ShaleDB always flushes, the behaviour of RocksDB's default `log_size_for_flush = 0`).
//!    Every write acknowledged before the call is then in a table, including `disable_wal` writes, which a
//!    copy of the WALs would miss. Writes that continue meanwhile go to the new memtable and WAL.
//! 2. Under the state lock, in one step: the current version (an `Arc`, registered among the live versions,
//!    so background compaction's obsolete-file deletion keeps each of its tables until the set is dropped)
//!    and a snapshot edit of the version set (files, log number, last sequence, file counter, identity). The
//!    copy gets a fresh MANIFEST holding that one edit, as every open writes one, instead of a prefix of the
//!    live MANIFEST (which a rollover may delete meanwhile). The tables hold a prefix of the acknowledged
//!    writes (memtables are flushed oldest first), so the copy is a consistent state of the database.
//!
//! A database opened with [`Db::open_read_only`] cannot flush: its set holds its WALs instead (every WAL at
//! or above the log number, copied whole; nothing in this process writes them). Its files are pinned only
//! against this process: another process writing the database may delete a table meanwhile, and the copy then
//! fails with an I/O error naming it (try again).
//!
//! The copy holds the files a database needs to open: tables, blob files, the MANIFEST, CURRENT, IDENTITY (and a
//! read-only source's WALs), and the newest OPTIONS file (as RocksDB's checkpoints do), so that
//! [`crate::Options::load_latest`] and open's option checks work on the copy as on the source. `LOG`, `LOCK`
//! and `lost/` are not copied (the copy starts its own LOG; `lost/` holds nothing the database reads).
//!
//! A checkpoint is written into `<target>.tmp` next to the target: tables hard linked
//! ([`shaledb_vfs::Fs::hard_link`]; copied when linking fails, e.g. across file systems), the MANIFEST,
//! CURRENT, IDENTITY and any WAL written and fsynced, the directory fsynced, then renamed to the target and
//! the parent fsynced. A crash leaves either no target or a whole one; a leftover `<target>.tmp` holding only
//! our files is removed by the next checkpoint to that target.

use super::{flush, Db, DbInner};
use crate::filenames::{self, FileKind};
use crate::version::Version;
use shaledb_format::edit::VersionEdit;
use shaledb_format::log;
use shaledb_vfs::{Error, Fs, ReadHints, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Size of one read when a file is copied.
const COPY_CHUNK: usize = 1 << 20;

/// A consistent set of a live database's files (see the module docs). Holding it keeps its tables on disk.
pub(crate) struct LiveFileSet {
    /// Keeps every table of the set (of every family) from obsolete-file deletion.
    _pin: Vec<Arc<Version>>,
    /// Keeps the WALs of the set from deletion (several families only).
    _wal_pin: Option<WalPin>,
    /// `(number, size)` of each table.
    pub(crate) tables: Vec<(u64, u64)>,
    /// `(number, size)` of each live blob file.
    pub(crate) blobs: Vec<(u64, u64)>,
    /// WALs to copy, each whole or up to a length: a read-only database's, and with several column families a
    /// live database's from the smallest log number of any family (module docs).
    pub(crate) wals: Vec<(u64, Option<u64>)>,
    /// The snapshot edits the copy's MANIFEST holds (the first with the counters, then one per other family).
    pub(crate) edits: Vec<VersionEdit>,
    /// The number the copy's MANIFEST takes: the live one's, never a table's.
    pub(crate) manifest_number: u64,
    /// The sequence number of the newest write the set holds: the tables' (the snapshot edit's), or for a
    /// read-only database the newest its WALs replayed.
    pub(crate) last_sequence: u64,
    /// The number of the newest OPTIONS file, copied whole (none in a database written before OPTIONS files).
    pub(crate) options_file: Option<u64>,
}

impl LiveFileSet {
    /// The sequence number of the newest write the set holds.
    pub(crate) fn last_sequence(&self) -> u64 {
        self.last_sequence
    }
}

/// Keeps a live database's WALs on disk while a checkpoint or backup copies them (`State::wal_pins`).
pub(crate) struct WalPin {
    inner: Arc<DbInner>,
}

impl Drop for WalPin {
    fn drop(&mut self) {
        self.inner.state.lock().wal_pins -= 1;
    }
}

/// The largest column family id a record of the WAL at `path` names (0 when none, or when it cannot be read:
/// damage is for the copy's recovery to judge).
fn max_family_in_wal(fs: &dyn Fs, path: &Path) -> u32 {
    let Ok(data) = fs.read_all(path) else { return 0 };
    let mut reader = log::Reader::new(data, path.to_path_buf());
    let mut max = 0;
    loop {
        match shaledb_format::wal::next_batch(&mut reader) {
            shaledb_format::wal::BatchRead::Batch { batch, .. } => {
                max = batch.iter().flatten().map(|e| e.family).fold(max, u32::max);
            }
            shaledb_format::wal::BatchRead::Eof => return max,
            _ => {}
        }
    }
}

/// Flushes (unless read-only) and pins the live file set of `inner`.
///
/// With several column families a flush is not a consistent cut by itself: between it and the snapshot of the
/// versions one family may flush newer writes while another still holds the rest of their batches in memory.
/// So the set also holds the WALs from the smallest log number of any family, the current one up to its length
/// under the `wal` lock: the copy's recovery replays each family from its own log number, and the result is
/// every write up to that point, batches whole.
pub(crate) fn live_file_set(inner: &Arc<DbInner>) -> Result<LiveFileSet> {
    if !inner.read_only {
        flush::flush(inner, None)?;
    }
    let wal = (!inner.read_only).then(|| inner.wal.lock());
    let mut st = inner.state.lock();
    if let Some(cause) = &st.bg_error {
        return Err(super::errors::read_only_error(cause));
    }
    let versions: Vec<Arc<Version>> = st.vs.families().values().map(|f| f.current.clone()).collect();
    // Registered explicitly: obsolete-file deletion keeps every table of a live registered version.
    for (id, v) in st.vs.families().keys().copied().zip(&versions).collect::<Vec<_>>() {
        st.live_versions.push((id, Arc::downgrade(v)));
    }
    let mut edits = st.vs.snapshot_edits();
    let manifest_number = st.vs.manifest_number();
    let log_number = st.vs.min_log_number();
    let several = st.fams.len() > 1;
    let mut live_wals = Vec::new();
    let mut wal_pin = None;
    if let (Some(w), true) = (wal.as_ref(), several) {
        let names = inner.fs.list(&inner.dir)?;
        for n in filenames::live_wals(&names, log_number) {
            live_wals.push((n, (n == w.number).then(|| w.log.as_ref().map_or(0, |l| l.len()))));
        }
        st.wal_pins += 1;
        wal_pin = Some(WalPin { inner: inner.clone() });
    }
    let live_seq = wal.as_ref().map(|w| w.next_seq.saturating_sub(1));
    drop(st);
    drop(wal);
    let tables = versions.iter().flat_map(|v| v.levels.iter().flatten()).map(|f| (f.number, f.file_size)).collect();
    let blobs = versions
        .iter()
        .flat_map(|v| v.blob_files.values())
        .map(|b| (b.addition.number, b.addition.file_size))
        .collect();
    let names = inner.fs.list(&inner.dir)?;
    // Written by open only, so stable while this database is open (a read-only source's writer may rotate it:
    // the copy then fails naming the file; try again).
    let options_file = crate::options_file::newest(&names);
    let (wals, last_sequence) = if inner.read_only {
        let wals: Vec<(u64, Option<u64>)> =
            filenames::live_wals(&names, log_number).into_iter().map(|n| (n, None)).collect();
        // The writer may have created families since this view was read: their records in the WALs copied are
        // of ids the copy's MANIFEST never handed out. Recording the largest such id makes the copy's recovery
        // skip them as it skips a dropped family's (the view never held those families).
        let seen = wals.iter().map(|&(n, _)| max_family_in_wal(inner.fs.as_ref(), &filenames::wal(&inner.dir, n)));
        let seen = seen.max().unwrap_or(0);
        if let Some(first) = edits.first_mut() {
            if seen > first.max_family.unwrap_or(0) {
                first.max_family = Some(seen);
            }
        }
        (wals, inner.visible_seq.load(std::sync::atomic::Ordering::Acquire))
    } else if several {
        (live_wals, live_seq.unwrap_or(0))
    } else {
        (Vec::new(), edits.first().and_then(|e| e.last_sequence).unwrap_or(0))
    };
    Ok(LiveFileSet {
        _pin: versions,
        _wal_pin: wal_pin,
        tables,
        blobs,
        wals,
        edits,
        manifest_number,
        last_sequence,
        options_file,
    })
}

/// Writes a MANIFEST holding `edits` at `path`, fsynced.
pub(crate) fn write_manifest(fs: &dyn Fs, path: &Path, edits: &[VersionEdit]) -> Result<()> {
    let mut w = log::Writer::new(fs.create(path)?);
    for edit in edits {
        edit.validate()?;
        let mut buf = Vec::new();
        edit.encode(&mut buf);
        w.add_record(&buf)?;
    }
    w.sync()
}

/// Writes `contents` to a new file at `path`, fsynced.
pub(crate) fn write_file(fs: &dyn Fs, path: &Path, contents: &[u8]) -> Result<()> {
    let mut f = fs.create(path)?;
    f.append(contents)?;
    f.sync()
}

/// Copies the first `len` bytes of `from` (all of it when `None`) on `src_fs` to a new file `to` on `fs`,
/// fsynced, and returns the bytes copied and their crc32c. A source shorter than `len` is an error naming it.
pub(crate) fn copy_between(
    src_fs: &dyn Fs,
    from: &Path,
    fs: &dyn Fs,
    to: &Path,
    len: Option<u64>,
) -> Result<(u64, u32)> {
    let src = src_fs.open(from, ReadHints { sequential: true, ..ReadHints::default() })?;
    let len = len.unwrap_or(src.len());
    if src.len() < len {
        return Err(Error::corruption(from, src.len(), format!("file is {} bytes, expected {len}", src.len())));
    }
    let mut dst = fs.create(to)?;
    let mut buf = vec![0u8; COPY_CHUNK.min(usize::try_from(len).unwrap_or(COPY_CHUNK))];
    let (mut pos, mut crc) = (0u64, 0u32);
    while pos < len {
        let n = usize::try_from(len - pos).map_or(buf.len(), |rest| rest.min(buf.len()));
        let chunk = &mut buf[..n];
        src.read_exact_at(chunk, pos)?;
        crc = shaledb_format::crc::extend(crc, chunk);
        dst.append(chunk)?;
        pos += n as u64;
    }
    dst.sync()?;
    Ok((len, crc))
}

/// [`copy_between`] on one file system.
pub(crate) fn copy_file(fs: &dyn Fs, from: &Path, to: &Path, len: Option<u64>) -> Result<(u64, u32)> {
    copy_between(fs, from, fs, to, len)
}

/// The crc32c and size of the whole file at `path`.
pub(crate) fn file_checksum(fs: &dyn Fs, path: &Path) -> Result<(u64, u32)> {
    let src = fs.open(path, ReadHints { sequential: true, ..ReadHints::default() })?;
    let len = src.len();
    let mut buf = vec![0u8; COPY_CHUNK.min(usize::try_from(len).unwrap_or(COPY_CHUNK))];
    let (mut pos, mut crc) = (0u64, 0u32);
    while pos < len {
        let n = usize::try_from(len - pos).map_or(buf.len(), |rest| rest.min(buf.len()));
        src.read_exact_at(&mut buf[..n], pos)?;
        crc = shaledb_format::crc::extend(crc, &buf[..n]);
        pos += n as u64;
    }
    Ok((len, crc))
}

/// `<dir>.tmp`: where a checkpoint to `dir` is staged.
fn staging_dir(dir: &Path) -> Result<PathBuf> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("checkpoint directory {} has no file name", dir.display())))?;
    Ok(dir.with_file_name(format!("{name}.tmp")))
}

/// Removes a staging directory an interrupted checkpoint left, when it holds nothing but our files.
fn clean_staging(fs: &dyn Fs, staging: &Path) -> Result<()> {
    if !fs.exists(staging) {
        return Ok(());
    }
    let names = fs.list(staging)?;
    let foreign: Vec<&String> =
        names.iter().filter(|n| matches!(filenames::parse(n), None | Some(FileKind::LostDir))).collect();
    if !foreign.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} exists and holds files that are not a checkpoint's ({}); remove it to take this checkpoint",
            staging.display(),
            super::files::list_names(&foreign)
        )));
    }
    for n in &names {
        fs.remove(&staging.join(n))?;
    }
    fs.remove_dir(staging)
}

/// Hard links `from` to `to`, or copies it when the file system cannot link them (another file system,
/// links unsupported).
fn link_or_copy(fs: &dyn Fs, from: &Path, to: &Path, size: u64) -> Result<()> {
    match fs.hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(_) => {
            // A failed link leaves nothing at `to`, except when `to` existed: never in a fresh staging dir.
            copy_file(fs, from, to, Some(size)).map(|_| ())
        }
    }
}

/// Writes the files of `set` from `src` into the empty directory `out`, everything fsynced.
fn write_checkpoint(fs: &dyn Fs, src: &Path, set: &LiveFileSet, out: &Path) -> Result<()> {
    for &(number, size) in &set.tables {
        link_or_copy(fs, &filenames::table(src, number), &filenames::table(out, number), size)?;
    }
    for &(number, size) in &set.blobs {
        link_or_copy(fs, &filenames::blob(src, number), &filenames::blob(out, number), size)?;
    }
    for &(n, len) in &set.wals {
        copy_file(fs, &filenames::wal(src, n), &filenames::wal(out, n), len)?;
    }
    write_manifest(fs, &out.join(filenames::manifest_name(set.manifest_number)), &set.edits)?;
    let identity = filenames::identity(src);
    if fs.exists(&identity) {
        copy_file(fs, &identity, &filenames::identity(out), None)?;
    }
    if let Some(n) = set.options_file {
        let name = filenames::options_name(n);
        copy_file(fs, &src.join(&name), &out.join(&name), None)?;
    }
    let current = format!("{}\n", filenames::manifest_name(set.manifest_number));
    write_file(fs, &filenames::current(out), current.as_bytes())?;
    fs.sync_dir(out)
}

/// [`Db::create_checkpoint`].
pub(crate) fn create(inner: &Arc<DbInner>, dir: &Path) -> Result<()> {
    let fs = inner.fs.as_ref();
    if fs.exists(dir) {
        return Err(Error::InvalidArgument(format!(
            "checkpoint directory {} already exists; a checkpoint is only written to a new directory",
            dir.display()
        )));
    }
    let staging = staging_dir(dir)?;
    clean_staging(fs, &staging)?;
    let set = live_file_set(inner)?;
    fs.create_dir_all(&staging)?;
    let parent = staging.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let result = write_checkpoint(fs, &inner.dir, &set, &staging)
        .and_then(|()| fs.rename(&staging, dir))
        .and_then(|()| fs.sync_dir(parent));
    match result {
        Ok(()) => {
            inner.info_log.log(format_args!(
                "checkpoint {}: {} tables, {} blob files, {} WALs, last sequence {}",
                dir.display(),
                set.tables.len(),
                set.blobs.len(),
                set.wals.len(),
                set.last_sequence()
            ));
            Ok(())
        }
        Err(e) => {
            // Best effort; a leftover is cleaned by the next checkpoint to this target.
            let _ = clean_staging(fs, &staging);
            Err(e)
        }
    }
}

impl Db {
    /// Writes a consistent, openable copy of the database into the new directory `dir`, on the same file
    /// system for hard links (RocksDB's `Checkpoint::CreateCheckpoint`), while reads and writes continue.
    ///
    /// The copy holds every write acknowledged before the call: the memtables are flushed first (as RocksDB
    /// does with its default `log_size_for_flush = 0`), then tables are hard linked (copied when linking
    /// fails, e.g. `EXDEV`) and the MANIFEST, CURRENT, IDENTITY and newest OPTIONS file written. It is staged in `<dir>.tmp` and
    /// renamed into place, so a crash never leaves a partial copy under `dir`. The copy has this database's
    /// identity. Open it with [`Db::open`] like any database. A database opened with [`Db::open_read_only`]
    /// is not flushed: its WALs are copied whole instead.
    ///
    /// Errors: `InvalidArgument` when `dir` exists (or `<dir>.tmp` holds files that are not ours); the flush's
    /// error (e.g. `ReadOnly` after a background error); I/O errors naming the file.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # let (path, copy) = (tmp.path().join("db"), tmp.path().join("copy"));
    /// let db = Db::open(&path, Options::default())?;
    /// db.put("k", "v")?;
    /// db.create_checkpoint(&copy)?;
    /// db.put("k", "later")?;
    /// let snapshot = Db::open(&copy, Options::default())?;
    /// assert_eq!(snapshot.get("k")?, Some(b"v".to_vec()));
    /// assert!(db.create_checkpoint(&copy).is_err()); // never over an existing directory
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn create_checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        create(&self.inner, dir.as_ref())
    }

    /// The live file set for a backup (crate::backup).
    pub(crate) fn live_file_set(&self) -> Result<LiveFileSet> {
        live_file_set(&self.inner)
    }

    /// The database's file system.
    pub(crate) fn fs(&self) -> &Arc<dyn Fs> {
        &self.inner.fs
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
pub(crate) mod tests;
