//! [`Db::open_as_secondary`] and [`Db::try_catch_up_with_primary`]: RocksDB's secondary instance. It reads a
//! database that another process (or thread), the *primary*, holds open and writes, and follows it on request.
//!
//! Like a read-only open (read_only.rs) it takes no LOCK and changes nothing in the primary's directory; unlike
//! one it keeps files of its own (a `LOG` and an `OPTIONS-NNNNNN` file) in the secondary directory, and its view
//! moves forward at each catch-up. A catch-up:
//!
//! 1. reads CURRENT; while it names the MANIFEST of the last catch-up, the file is read again but only the
//!    edits after those applied last time are applied (the *tail*: the live files they add up to are kept
//!    between catch-ups); a new MANIFEST (the primary rolled it) is replayed whole. An incomplete last record
//!    is an edit the primary is appending: reading stops before it, without error. (RocksDB keeps the file
//!    open and reads on from its position; reading it again costs at most `max_manifest_file_size` and needs
//!    no reader state that a roll could strand.)
//! 2. replays every WAL at or above the MANIFEST's log number into a fresh memtable, stopping at a torn tail
//!    (the record the primary is appending) without error: `wal_recovery_mode` is taken as `PointInTime`
//!    unless it is `SkipAnyCorruptedRecords` (a secondary reads WALs while they grow, so an incomplete last
//!    record is normal; intact records after damage are still `Corruption`). The live WALs hold only what the
//!    primary has not flushed (its memtables), so this costs what the primary's own recovery would; RocksDB
//!    reads on from where it stopped, which needs a memtable kept across catch-ups and switched in step with
//!    the primary's flushes;
//! 3. opens every table and blob file of the new version and keeps them open: a file the primary deletes
//!    later stays readable through its open handle (Linux keeps an unlinked file's data while a descriptor is
//!    open). Files that left every version a reader holds are closed at the next catch-up;
//! 4. checks that CURRENT and the MANIFEST's length did not change meanwhile. A change means the primary may
//!    have flushed a WAL read in step 2 into a table and deleted it, or deleted a table of step 3: the
//!    catch-up starts again from step 1 (the tail keeps what was applied). A file found missing in steps 2 or
//!    3 also starts it again. After [`MAX_ATTEMPTS`] attempts it fails with [`Error::Busy`]: the view is left
//!    as it was, and the caller may try again;
//! 5. publishes the new version and memtable together (the sequence first, see [`install`]).
//!
//! So after a catch-up, reads see the primary's state after some prefix of its writes: every write the
//! primary had acknowledged before the catch-up began, and never less than the previous catch-up saw (the
//! WALs and the MANIFEST only grow until a flush, and a flush is caught by step 4). With `max_open_files = -1`
//! (the default, and what RocksDB recommends for secondaries) a read never meets a deleted file; with a bounded
//! table cache a table evicted and then deleted by the primary is an `Io` error naming the file (never a wrong
//! answer): catch up and read again.
//!
//! A snapshot taken on a secondary is a sequence number read against the newest version: a compaction of the
//! primary may have dropped an overwritten value that the snapshot would see (the primary knows nothing of a
//! secondary's snapshots, as in RocksDB). An iterator keeps its own version and memtable and reads them
//! unchanged across catch-ups.

use super::wal::WalState;
use super::{ColumnFamilyDescriptor, Db, DbInner, Opened};
use crate::filenames;
use crate::identity;
use crate::info_log::InfoLog;
use crate::memtable::MemTable;
use crate::options::{Options, WalRecoveryMode};
use crate::stats::Counters;
use crate::version::Version;
use crate::version_set::{self, VersionSet};
use parking_lot::Mutex;
use shaledb_format::log;
use shaledb_format::manifest::{self, EditRead, LiveFiles};
use shaledb_vfs::{Error, Result};
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Attempts of one catch-up before it reports [`Error::Busy`] (step 4 of the module doc).
pub(crate) const MAX_ATTEMPTS: usize = 64;

/// The part of a [`DbInner`] only a secondary instance has.
pub(crate) struct Secondary {
    /// The secondary's own directory: its `LOG` and `OPTIONS` files.
    pub(crate) dir: PathBuf,
    /// What the catch-ups read so far; locked for a whole catch-up, so catch-ups run one at a time.
    tail: Mutex<Tail>,
}

/// The MANIFEST read so far and the files held open.
#[derive(Default, Clone)]
struct Tail {
    /// The MANIFEST last read (0: none yet).
    manifest_number: u64,
    /// How many of its edits are applied in `live`.
    records: u64,
    live: LiveFiles,
    /// Tables and blob files opened by a catch-up, closed once no live version lists them.
    tables: BTreeSet<u64>,
    blobs: BTreeSet<u64>,
}

/// What one attempt read of the primary.
struct Attempt {
    vs: VersionSet,
    /// Each family's replayed memtable, by id.
    mems: std::collections::BTreeMap<u32, Arc<MemTable>>,
    /// Highest sequence number the attempt holds.
    max_seq: u64,
    last_wal: u64,
    /// CURRENT's MANIFEST and the MANIFEST's length as read.
    manifest_number: u64,
    manifest_len: u64,
}

/// The error of a call that only a secondary instance supports.
fn not_secondary() -> Error {
    Error::NotSupported(
        "try_catch_up_with_primary: the database was not opened as a secondary (Db::open_as_secondary)".into(),
    )
}

/// True for an error that says a file is gone: the primary deleted it after the attempt read its name.
fn vanished(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

impl Db {
    /// Opens the database in `primary_dir`, which another process or thread (the primary) may hold open and
    /// write, as a *secondary instance* (RocksDB's `DB::OpenAsSecondary`): it takes no LOCK and changes nothing
    /// in `primary_dir`, writes its own `LOG` and `OPTIONS` file in `secondary_dir` (created if missing; one
    /// secondary per directory), and sees the primary's state as of the open, unflushed writes in its WALs
    /// included. [`Db::try_catch_up_with_primary`] moves the view forward.
    ///
    /// Every write (`put`, `delete`, `merge`, `write`, `ingest_external_file`) and `flush`, `compact_range` and
    /// `sync_wal` fail with [`Error::NotSupported`], as for [`Db::open_read_only`]. `create_if_missing` is
    /// ignored; `error_if_exists` and `secondary_dir == primary_dir` are `InvalidArgument`.
    ///
    /// Each catch-up opens every table and blob file of the version it installs and keeps them open, so files
    /// the primary deletes later stay readable (on Linux an unlinked file lives while a descriptor is open).
    /// Keep `max_open_files = -1` (the default, as RocksDB recommends for secondaries): with a bounded table
    /// cache, a table evicted and then deleted by the primary reads as an `Io` error naming it until the next
    /// catch-up (never a wrong value). The open ends with a first catch-up, so it fails with [`Error::Busy`] as
    /// that does when the primary changed its files during every attempt: retry the open. A snapshot taken on a
    /// secondary is a sequence number read against the newest version, and the primary's compactions know nothing
    /// of it: after a catch-up it may miss a value the primary has overwritten and compacted away. An iterator
    /// keeps the version it was opened on.
    ///
    /// ```no_run
    /// use shaledb::{Db, Options};
    /// let follower = Db::open_as_secondary("/var/lib/app/db", "/var/lib/app/db-follower", Options::default())?;
    /// loop {
    ///     follower.try_catch_up_with_primary()?;
    ///     let _v = follower.get(b"key")?;
    ///     # break;
    /// }
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn open_as_secondary(
        primary_dir: impl AsRef<Path>,
        secondary_dir: impl AsRef<Path>,
        opts: Options,
    ) -> Result<Db> {
        Db::open_as_secondary_with_column_families(primary_dir, secondary_dir, opts, Vec::new())
    }

    /// [`Db::open_as_secondary`] with the options of column families (RocksDB's `OpenAsSecondary` with column
    /// family descriptors): each described family reads with its own options (merge operator, prefix
    /// extractor and the other fields listed at [`ColumnFamilyDescriptor::options`]), the others with `opts`.
    /// A described family the primary does not hold is `InvalidArgument`, as is a descriptor of `"default"`.
    pub fn open_as_secondary_with_column_families(
        primary_dir: impl AsRef<Path>,
        secondary_dir: impl AsRef<Path>,
        opts: Options,
        families: Vec<ColumnFamilyDescriptor>,
    ) -> Result<Db> {
        let db = Db { inner: open(primary_dir.as_ref(), secondary_dir.as_ref(), opts, &families)? };
        catch_up(&db.inner)?;
        Ok(db)
    }

    /// Catches up with the primary (RocksDB's `TryCatchUpWithPrimary`): applies the MANIFEST edits it wrote
    /// since the last catch-up (all of a new MANIFEST) and replays its WALs, so that reads then see every write
    /// the primary acknowledged before this call, and never an older state than the previous catch-up. Fails
    /// with [`Error::NotSupported`] unless the database was opened with [`Db::open_as_secondary`], and with
    /// [`Error::Busy`] when the primary changed its files during every attempt (the view is then unchanged).
    pub fn try_catch_up_with_primary(&self) -> Result<()> {
        catch_up(&self.inner)
    }

    /// The secondary instance's own directory (`None` unless opened with [`Db::open_as_secondary`]).
    pub fn secondary_path(&self) -> Option<&Path> {
        self.inner.secondary.as_ref().map(|s| s.dir.as_path())
    }
}

fn open(primary: &Path, secondary: &Path, opts: Options, families: &[ColumnFamilyDescriptor]) -> Result<Arc<DbInner>> {
    opts.validate()?;
    super::family_api::check_descriptors(families)?;
    if opts.error_if_exists {
        return Err(Error::InvalidArgument(
            "error_if_exists with a secondary open: the database must exist to be read".into(),
        ));
    }
    let fs = opts.fs.clone();
    super::errors::check_exists(fs.as_ref(), primary)?;
    let same = match (std::fs::canonicalize(primary), std::fs::canonicalize(secondary)) {
        (Ok(p), Ok(s)) => p == s,
        _ => primary == secondary,
    };
    if same {
        return Err(Error::InvalidArgument(format!(
            "the secondary directory {} is the primary's: a secondary keeps its LOG and OPTIONS apart",
            secondary.display()
        )));
    }
    fs.create_dir_all(secondary)?;
    let info_log = InfoLog::open(fs.clone(), secondary, opts.max_log_file_size, opts.keep_log_file_num);
    info_log.log(format_args!("open as secondary of {}: {:?}", primary.display(), opts));
    // The number comes from a file name on disk: checked before the arithmetic.
    let newest = crate::options_file::newest(&fs.list(secondary)?).unwrap_or(0);
    if newest >= shaledb_format::edit::MAX_FILE_NUMBER - 1 {
        return Err(Error::InvalidArgument(format!(
            "{}: OPTIONS file number {newest} leaves no number for the next one",
            secondary.display()
        )));
    }
    let number = newest + 1;
    let (name, removed) = crate::options_file::write_numbered(
        fs.as_ref(),
        secondary,
        &crate::options_file::render(&opts, &[]),
        number,
        number + 1,
    )?;
    info_log.log(format_args!("open: wrote {name}; removed {removed:?}"));

    let mut tail = Tail::default();
    let first = read_primary(primary, &opts, &|_| None, &mut tail, &info_log)?;
    // The first read's memtables have the database's options; the catch-up that ends the open rebuilds them
    // with each family's.
    let described = super::family_api::described_options(&opts, &first.vs, families, "a secondary open")?;
    let mut vs = first.vs;
    let on_disk = identity::read(fs.as_ref(), primary)?;
    let db_id = identity::reconcile(primary, vs.db_id, vs.manifest_number(), on_disk)?.unwrap_or_default();
    vs.db_id = Some(db_id);
    let inner = DbInner::assemble(
        primary,
        opts.clone(),
        Opened {
            vs,
            lock: None,
            fams: first
                .mems
                .into_iter()
                .map(|(id, m)| (id, described.get(&id).cloned().unwrap_or_else(|| opts.clone()), m))
                .collect(),
            wal: WalState::without_log(first.last_wal, first.max_seq.saturating_add(1)),
            visible_seq: first.max_seq,
            counters: Counters::new(opts.num_levels),
            info_log,
            losses: Default::default(),
            read_only: true,
            secondary: Some(Secondary { dir: secondary.to_path_buf(), tail: Mutex::new(tail) }),
        },
    );
    Ok(inner)
}

/// Reads the primary's MANIFEST from where `tail` stopped (all of it when CURRENT names another) and replays
/// its live WALs into a new memtable. `tail` advances by the edits applied.
fn read_primary(
    primary: &Path,
    opts: &Options,
    fam_opts: &dyn Fn(u32) -> Option<Options>,
    tail: &mut Tail,
    info: &InfoLog,
) -> Result<Attempt> {
    let fs = opts.fs.as_ref();
    let current_path = filenames::current(primary);
    let current = fs.read_all(&current_path)?;
    let number = filenames::manifest_in_current(&current)
        .ok_or_else(|| Error::corruption(&current_path, 0, "CURRENT does not name a MANIFEST"))?;
    if number != tail.manifest_number {
        info.log(format_args!("catch-up: reading MANIFEST-{number:06} whole"));
        tail.manifest_number = number;
        tail.records = 0;
        tail.live = LiveFiles::default();
    }
    let path = primary.join(filenames::manifest_name(number));
    let data = fs.read_all(&path)?;
    let manifest_len = data.len() as u64;
    let mut reader = log::Reader::new(data, path.clone());
    let mut seen = 0u64;
    loop {
        match manifest::next_edit(&mut reader) {
            EditRead::Eof => break,
            // The record the primary is appending: read it at the next catch-up.
            EditRead::Damage(d) if d.at_tail => break,
            EditRead::Damage(d) => return Err(d.to_error(&path)),
            EditRead::Undecodable(e) => return Err(e),
            EditRead::Edit { offset, edit } => {
                seen += 1;
                if seen > tail.records {
                    version_set::apply_checked(&mut tail.live, &edit, &path, offset, opts)?;
                    tail.records = seen;
                }
            }
        }
    }
    let vs = VersionSet::from_live(primary, opts, number, &tail.live, &path)?;
    let wals = filenames::live_wals(&fs.list(primary)?, vs.min_log_number());
    let mode = match opts.wal_recovery_mode {
        WalRecoveryMode::SkipAnyCorruptedRecords => WalRecoveryMode::SkipAnyCorruptedRecords,
        _ => WalRecoveryMode::PointInTime,
    };
    let replay_opts = Options { wal_recovery_mode: mode, ..opts.clone() };
    let db_id = tail.live.db_id.unwrap_or_default();
    let replayed = super::replay::replay_view(&replay_opts, fam_opts, &vs, db_id, primary, &wals, info)?;
    let max_seq = replayed.max_seq.max(vs.last_sequence);
    let last_wal = wals.last().copied().unwrap_or(vs.min_log_number());
    let mems = replayed.fams.into_iter().map(|(id, f)| (id, f.mem)).collect();
    Ok(Attempt { vs, mems, max_seq, last_wal, manifest_number: number, manifest_len })
}

/// Opens every table and blob file of `v` (kept in the caches), noting them in `tail`.
fn pin(inner: &DbInner, v: &Version, tail: &mut Tail) -> Result<()> {
    for f in v.levels.iter().flatten() {
        inner.tables.get(f)?;
        tail.tables.insert(f.number);
        if f.num_range_deletions > 0 {
            inner.tables.range_dels(f)?;
        }
    }
    for &n in v.blob_files.keys() {
        inner.blobs.reader(n)?;
        tail.blobs.insert(n);
    }
    Ok(())
}

/// True when CURRENT still names the attempt's MANIFEST and the MANIFEST has the length the attempt read.
fn unchanged(primary: &Path, inner: &DbInner, a: &Attempt) -> Result<bool> {
    let fs = inner.fs.as_ref();
    let current = match fs.read_all(&filenames::current(primary)) {
        Err(e) if vanished(&e) => return Ok(false),
        r => r?,
    };
    if filenames::manifest_in_current(&current) != Some(a.manifest_number) {
        return Ok(false);
    }
    match fs.file_size(&primary.join(filenames::manifest_name(a.manifest_number))) {
        Err(e) if vanished(&e) => Ok(false),
        r => Ok(r? == a.manifest_len),
    }
}

/// Steps 1-5 of the module doc.
fn catch_up(inner: &Arc<DbInner>) -> Result<()> {
    let sec = inner.secondary.as_ref().ok_or_else(not_secondary)?;
    if inner.shutting_down.load(Ordering::Acquire) {
        return Err(Error::Closed);
    }
    let primary = inner.dir.as_path();
    let mut tail = sec.tail.lock();
    // Each family's memtable is rebuilt with the options it was opened with.
    let fam_opts: std::collections::BTreeMap<u32, Options> =
        inner.state.lock().fams.iter().map(|(id, f)| (*id, f.fam.opts.clone())).collect();
    for attempt in 1..=MAX_ATTEMPTS {
        let mut trial = tail.clone();
        let read =
            match read_primary(primary, &inner.opts, &|id| fam_opts.get(&id).cloned(), &mut trial, &inner.info_log) {
                Err(e) if vanished(&e) => continue,
                r => r?,
            };
        if trial.live.db_id.is_some_and(|id| id != inner.db_id) {
            return Err(Error::InvalidArgument(format!(
                "{} now holds another database (its identity changed since the secondary opened)",
                primary.display()
            )));
        }
        let pinned = read.vs.families().values().try_for_each(|f| pin(inner, &f.current, &mut trial));
        // The edits applied are the primary's whatever happens next; the files opened are to be closed later.
        *tail = trial;
        match pinned {
            Err(e) if vanished(&e) => continue,
            r => r?,
        }
        if !unchanged(primary, inner, &read)? {
            continue;
        }
        install(inner, read, &mut tail);
        if attempt > 1 {
            inner.info_log.log(format_args!("catch-up: done after {attempt} attempts"));
        }
        return Ok(());
    }
    inner.info_log.log(format_args!("catch-up: the primary changed its files during {MAX_ATTEMPTS} attempts"));
    Err(Error::Busy(format!(
        "try_catch_up_with_primary: {} changed its MANIFEST or files during each of {MAX_ATTEMPTS} attempts; \
         the view is unchanged, try again",
        primary.display()
    )))
}

/// Publishes what `a` read, then closes the files no live version lists any more.
fn install(inner: &DbInner, a: Attempt, tail: &mut Tail) {
    let Attempt { mut vs, mut mems, max_seq, last_wal, .. } = a;
    vs.db_id = Some(inner.db_id);
    let in_use: HashSet<u64>;
    let blobs_in_use: HashSet<u64>;
    {
        let mut st = inner.state.lock();
        // The sequence before the super version: a reader loads the super version first and the sequence
        // after it (read.rs), so it never reads the new version at the old sequence, which could miss a value
        // the primary's compaction dropped after overwriting it.
        inner.visible_seq.fetch_max(max_seq, Ordering::SeqCst);
        st.vs = vs;
        // The families the secondary opened with: a family the primary created since is not served, one it
        // dropped keeps the view of its last catch-up.
        let ids: Vec<u32> = st.fams.keys().copied().collect();
        for id in ids {
            if let (Some(f), Some(mem)) = (st.fams.get_mut(&id), mems.remove(&id)) {
                f.mem = mem;
                f.imm.clear();
            }
            inner.install_super_version(&mut st, id);
        }
        st.rebuild_mems();
        let live: Vec<Arc<Version>> = st.live_versions.iter().filter_map(|(_, w)| w.upgrade()).collect();
        in_use = live.iter().flat_map(|v| v.levels.iter().flatten().map(|f| f.number)).collect();
        blobs_in_use = live.iter().flat_map(|v| v.blob_files.keys().copied()).collect();
    }
    *inner.wal.lock() = WalState::without_log(last_wal, inner.visible_seq.load(Ordering::SeqCst).saturating_add(1));
    tail.tables.retain(|n| {
        let keep = in_use.contains(n);
        if !keep {
            inner.tables.evict(*n);
        }
        keep
    });
    tail.blobs.retain(|n| {
        let keep = blobs_in_use.contains(n);
        if !keep {
            inner.blobs.evict(*n);
        }
        keep
    });
}

#[cfg(test)]
#[path = "secondary_tests.rs"]
mod tests;
