//! Opening a database: [`open`] runs the recovery steps of docs/durability.md ("The steps of open"), one
//! function each, in the order listed there. Nothing is written or removed before the recovered state has been
//! checked against the directory. Which files are ours: `files.rs` (docs/durability.md D9).

use super::flush::write_level0;
use super::wal::WalState;
use super::{DbInner, Opened};
use crate::filenames;
use crate::identity;
use crate::info_log::InfoLog;
use crate::lost::Losses;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::Counters;
use crate::version_set::VersionSet;
use parking_lot::Mutex;
use shaledb_format::edit::VersionEdit;
use shaledb_format::log;
use shaledb_vfs::{Error, FileLock, ReadHints, Result};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Opens the database with the families of `descs` taking their options (the others take the database's).
pub(crate) fn open(dir: &Path, opts: Options, descs: &[super::ColumnFamilyDescriptor]) -> Result<Arc<DbInner>> {
    opts.validate()?;
    let mut fam_opts = std::collections::HashMap::new();
    for d in descs {
        fam_opts.insert(d.name.clone(), crate::options::family::family_options(&opts, &d.options)?);
    }
    let lock = lock_directory(dir, &opts)?;
    let exists = opts.fs.exists(&filenames::current(dir));
    let names = opts.fs.list(dir)?;
    let (recorded, options_note) = if exists { check_recorded_options(dir, &opts, &names)? } else { (None, None) };
    let (mut vs, leftovers) =
        if exists { recover_manifest(dir, &opts, &names)? } else { create_database(dir, &opts, &names)? };
    check_family_options(recorded.as_ref(), &vs, &opts, descs)?;
    probe_direct_io(dir, &opts)?;
    let info_log = open_info_log(dir, &opts, &leftovers);
    let wals = find_live_wals(&mut vs, &names, &info_log);
    let names_of: std::collections::BTreeMap<u32, String> =
        vs.families().iter().map(|(id, f)| (*id, f.name.clone())).collect();
    let opts_of = |id: u32| -> Options {
        let named = names_of.get(&id).and_then(|n| fam_opts.get(n)).filter(|_| id != 0);
        named.cloned().unwrap_or_else(|| opts.clone())
    };
    let mut rec = replay_wals(dir, &opts, vs, &wals, &info_log, &opts_of)?;
    let wal = start_new_wal(dir, &opts, &mut rec)?;
    keep_unreplayed_wals(dir, &opts, &mut rec, &info_log)?;
    write_recovered_manifest(&mut rec, wal.number)?;
    remove_obsolete_files(dir, &opts, &rec.vs, &wals, &info_log)?;
    let named: Vec<(String, Options)> =
        names_of.iter().filter(|(id, _)| **id != 0).map(|(id, name)| (name.clone(), opts_of(*id))).collect();
    let (recorded_opts, recorded_named) =
        crate::options_file::keep_recorded_operators(recorded.as_ref(), &opts, &named);
    write_options_file(dir, &recorded_opts, &recorded_named, &mut rec.vs, &info_log, options_note)?;

    let (wal_number, max_seq) = (wal.number, rec.max_seq);
    let fams = rec
        .vs
        .families()
        .keys()
        .map(|&id| {
            let o = opts_of(id);
            // Writes after the open take `max_seq + 1` and later (the WAL state below). A memtable recovery
            // kept (`avoid_flush_during_recovery`) goes on taking them.
            let mem = match rec.kept.remove(&id) {
                Some(kept) => kept,
                None => Arc::new(MemTable::for_options(wal_number, &o).starting_at(max_seq + 1)),
            };
            (id, o, mem)
        })
        .collect();
    let inner = DbInner::assemble(
        dir,
        opts,
        Opened {
            vs: rec.vs,
            lock: Some(lock),
            fams,
            wal,
            visible_seq: max_seq,
            counters: rec.counters,
            info_log,
            losses: rec.losses,
            read_only: false,
            secondary: None,
        },
    );
    inner.info_log.log(format_args!("open: done, last sequence {max_seq}, new WAL {wal_number:06}.log"));
    super::background::start(&inner)?;
    Ok(inner)
}

/// Creates a missing directory (with `create_if_missing`), refuses one that holds no database when it may not
/// create one or it is not ours to create one in (before even `LOCK` is created), and takes the LOCK.
fn lock_directory(dir: &Path, opts: &Options) -> Result<Box<dyn FileLock>> {
    let fs = opts.fs.as_ref();
    if !fs.exists(dir) {
        if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} does not exist (create_if_missing is false)",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)?;
    }
    if !fs.exists(&filenames::current(dir)) {
        // Checked before taking the lock too, so that not even a LOCK file is left in a directory that is not
        // ours, or in one that holds no database when we may not create one; checked again by
        // `create_database` under the lock.
        let names = fs.list(dir)?;
        if !opts.create_if_missing {
            // A damaged database is still named as one (and repair suggested); anything else holds no database.
            return Err(match super::files::check_fresh_dir(fs, dir, &names) {
                Err(e) if e.is_corruption() => e,
                _ => no_database(dir),
            });
        }
        super::files::check_fresh_dir(fs, dir, &names)?;
    }
    fs.lock(&filenames::lock(dir))
}

/// Open with CURRENT, before anything is written: refuses options that cannot read the data, by the newest
/// OPTIONS file (a different merge operator, TTL mode switched; options_file.rs). Returns the file read, and
/// a note for the LOG when the checks were skipped.
fn check_recorded_options(
    dir: &Path,
    opts: &Options,
    names: &[String],
) -> Result<(Option<crate::options_file::LoadedOptions>, Option<String>)> {
    crate::options_file::check_recorded(dir, opts, names)
}

/// After `recover_manifest`, before anything else is written: each live named family's options (its
/// descriptor's, else the database's) checked against the ones the newest OPTIONS file records for it (a
/// different merge operator; options_file.rs), the error naming the family.
fn check_family_options(
    recorded: Option<&crate::options_file::LoadedOptions>,
    vs: &VersionSet,
    opts: &Options,
    descs: &[super::ColumnFamilyDescriptor],
) -> Result<()> {
    let Some(recorded) = recorded else { return Ok(()) };
    let live: Vec<&str> = vs.families().iter().filter(|(id, _)| **id != 0).map(|(_, f)| f.name.as_str()).collect();
    crate::options_file::check_families(recorded, &live, opts, descs)
}

/// Open with CURRENT: recovers the MANIFEST (every number range-checked), reconciles the identity, checks the
/// live tables (`paranoid_checks`), and only then removes our leftovers and rewrites a missing IDENTITY.
/// Returns the version set and the names of the leftovers removed.
fn recover_manifest(dir: &Path, opts: &Options, names: &[String]) -> Result<(VersionSet, Vec<String>)> {
    let fs = opts.fs.as_ref();
    if opts.error_if_exists {
        return Err(Error::InvalidArgument(format!("{} exists (error_if_exists is true)", dir.display())));
    }
    let mut vs = VersionSet::recover(dir, opts)?;
    // Nothing is written or removed before the recovered state has been checked against the directory.
    let on_disk = identity::read(fs, dir)?;
    // A MANIFEST written before identities existed: adopt IDENTITY's, or draw one.
    let id = match identity::reconcile(dir, vs.db_id, vs.manifest_number(), on_disk)? {
        Some(id) => id,
        None => identity::generate(dir)?,
    };
    vs.db_id = Some(id);
    if opts.paranoid_checks {
        for f in vs.families().values() {
            super::files::check_live_files(fs, dir, &f.current)?;
        }
    }
    let leftovers = super::files::remove_leftovers(fs, dir, &mut vs, names)?;
    if on_disk != Some(id) {
        let temp = vs.new_file_number()?;
        identity::write(fs, dir, &id, temp)?;
    }
    Ok((vs, leftovers))
}

/// The refusal of a directory without CURRENT (and no file of a damaged database) when `create_if_missing` is
/// false.
fn no_database(dir: &Path) -> Error {
    Error::InvalidArgument(format!("{} holds no database (create_if_missing is false)", dir.display()))
}

/// Open without CURRENT: creates a database (with `create_if_missing`) in a directory holding nothing or only
/// `LOCK` and a valid `IDENTITY` (whose id is kept), finishing an interrupted creation. Returns the version
/// set and the names of the creation's leftovers removed.
fn create_database(dir: &Path, opts: &Options, names: &[String]) -> Result<(VersionSet, Vec<String>)> {
    let fs = opts.fs.as_ref();
    if !opts.create_if_missing {
        return Err(no_database(dir));
    }
    let fresh = super::files::check_fresh_dir(fs, dir, names)?;
    for name in &fresh.creation_leftovers {
        fs.remove(&dir.join(name))?;
    }
    let kept = fresh.id;
    let id = match kept {
        Some(id) => id,
        None => identity::generate(dir)?,
    };
    let mut vs = VersionSet::create(dir, opts, id)?;
    if kept.is_none() {
        let temp = vs.new_file_number()?;
        identity::write(fs, dir, &id, temp)?;
    }
    Ok((vs, fresh.creation_leftovers))
}

/// With `use_direct_reads` or `use_direct_io_for_flush_and_compaction`: tables are opened on first use and
/// written by the first flush, so find out now, not there, whether the file system takes O_DIRECT
/// (NotSupported naming the option when it refuses). IDENTITY exists here.
fn probe_direct_io(dir: &Path, opts: &Options) -> Result<()> {
    if opts.use_direct_io_for_flush_and_compaction {
        // The same check as for reads: O_DIRECT is refused per file system, at open, for reads and writes.
        let probe = opts.fs.open(&filenames::identity(dir), ReadHints { direct: true, ..ReadHints::default() });
        if let Err(e) = probe {
            return Err(match e {
                Error::NotSupported(_) => Error::NotSupported(format!(
                    "use_direct_io_for_flush_and_compaction: the file system of {} refuses O_DIRECT; open with \
                     use_direct_io_for_flush_and_compaction = false",
                    dir.display()
                )),
                e => e,
            });
        }
    }
    if opts.use_direct_reads {
        let probe = opts.fs.open(&filenames::identity(dir), ReadHints { direct: true, ..ReadHints::default() })?;
        let mut head = [0u8; 16];
        let n = usize::try_from(probe.len()).map_or(head.len(), |l| l.min(head.len()));
        probe.read_exact_at(&mut head[..n], 0)?;
    }
    Ok(())
}

/// The directory is ours from here on: the LOG may be written. Logs the open and the leftovers removed.
fn open_info_log(dir: &Path, opts: &Options, leftovers: &[String]) -> InfoLog {
    let info_log = InfoLog::open(opts.fs.clone(), dir, opts.max_log_file_size, opts.keep_log_file_num);
    // "Git sha" is the fifth field of the line, as in RocksDB's LOG, where benchmark.sh reads it.
    info_log.log(format_args!(
        "build: Git sha {} (shaledb {}, on-disk format {})",
        crate::BUILD_COMMIT,
        env!("CARGO_PKG_VERSION"),
        shaledb_format::FORMAT_VERSION
    ));
    info_log.log(format_args!("open {}: {:?}, recovery mode {:?}", dir.display(), opts, opts.wal_recovery_mode));
    for name in leftovers {
        info_log.log(format_args!("open: removed leftover {name}"));
    }
    info_log
}

/// The WALs to replay, oldest first: names exactly ours (within range) at or above the log number. Their
/// numbers may be above the MANIFEST's counter (a WAL is created before the next edit records the counter):
/// the counter steps over them.
fn find_live_wals(vs: &mut VersionSet, names: &[String], info_log: &InfoLog) -> Vec<u64> {
    let wals = filenames::live_wals(names, vs.min_log_number());
    for &n in &wals {
        vs.mark_file_number_used(n);
    }
    info_log.log(format_args!(
        "recovered MANIFEST-{:06}: database {}, {} column families, log number {}, next file {}, last sequence {}; \
         WALs to replay: {wals:?}",
        vs.manifest_number(),
        identity::to_hex(&vs.db_id.unwrap_or_default()),
        vs.families().len(),
        vs.min_log_number(),
        vs.next_file_number,
        vs.last_sequence
    ));
    wals
}

/// What WAL replay recovered, carried through the steps that make it the new durable state.
struct Recovery {
    vs: VersionSet,
    /// The recovery's edit of each family: the L0 tables replay wrote, then the new WAL's number and the last
    /// sequence.
    edits: std::collections::BTreeMap<u32, VersionEdit>,
    max_seq: u64,
    losses: Losses,
    /// WALs (by number) not replayed in full.
    to_keep: Vec<u64>,
    counters: Counters,
    /// The replayed memtables kept as the families' active ones (`avoid_flush_during_recovery`), by family,
    /// each numbered by the oldest WAL its entries came from: that family's log number from here on.
    kept: std::collections::BTreeMap<u32, Arc<MemTable>>,
    /// The WALs the kept memtables hold live, with their lengths: counted toward `max_total_wal_size` like the
    /// WALs this process switches out, so that a kept memtable's WALs force its flush as theirs would.
    kept_wals: Vec<(u64, u64)>,
}

/// With `avoid_flush_during_recovery`, the most WALs an open may find and still keep what it replayed in
/// memory: with the one it creates, at most this many WALs are live through the option (an open that finds
/// this many flushes them, as without it).
const MAX_LIVE_WALS_KEPT: usize = 4;

/// Replays `wals` under the recovery mode (replay.rs), then flushes what is left in the memtable to L0, or, with
/// `avoid_flush_during_recovery` and a replay that allows it ([`keep_in_memory`]), keeps it there. The tables
/// take numbers from the version set's counter (range-checked, stepping over files that are not ours). A
/// refusal is written to the LOG.
fn replay_wals(
    dir: &Path,
    opts: &Options,
    vs: VersionSet,
    wals: &[u64],
    info_log: &InfoLog,
    opts_of: &dyn Fn(u32) -> Options,
) -> Result<Recovery> {
    let db_id = vs.db_id.unwrap_or_default();
    let counters = Counters::new(opts.num_levels);
    let last_sequence = vs.last_sequence;
    let targets = super::replay::targets(&vs, opts_of);
    let max_family = vs.max_family;
    let vs_numbers = Mutex::new(vs);
    let new_number = || vs_numbers.lock().new_file_number();
    let stop = AtomicBool::new(false);
    let replayed = super::replay::replay(
        opts,
        &targets,
        max_family,
        db_id,
        dir,
        wals,
        &new_number,
        &stop,
        info_log,
        last_sequence,
        opts.avoid_flush_during_recovery,
    )
    .inspect_err(|e| info_log.log(format_args!("open refused: {e}")))?;
    let mut replayed = replayed;
    let kept = keep_in_memory(dir, opts, &targets, wals, &mut replayed, info_log)?;
    let kept_wals = match kept.values().map(|m| m.id()).min() {
        Some(oldest) => wals
            .iter()
            .filter(|&&n| n >= oldest)
            .map(|&n| Ok((n, opts.fs.file_size(&filenames::wal(dir, n))?)))
            .collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    let mut flush_stats = replayed.stats;
    let mut edits = std::collections::BTreeMap::new();
    let blobs = crate::blob::BlobFiles::new(dir, opts.fs.clone(), db_id);
    for t in &targets {
        let Some(f) = replayed.fams.get(&t.id) else { continue };
        let mut edit = VersionEdit { family: (t.id != 0).then_some(t.id), ..VersionEdit::default() };
        edit.new_files.extend(f.files.iter().map(|f| (0, f.clone())));
        edit.blob_files.extend(f.blob_files.iter().copied());
        if let Some(mem) = kept.get(&t.id) {
            edit.log_number = Some(mem.id());
        } else if !f.mem.is_empty() {
            let (files, st, blob) =
                write_level0(&t.opts, db_id, dir, std::slice::from_ref(&f.mem), &new_number, &[], &stop, &blobs)?;
            flush_stats.add(&st);
            edit.new_files.extend(files.into_iter().map(|f| (0, f)));
            edit.blob_files.extend(blob.additions);
        }
        edits.insert(t.id, edit);
    }
    let vs = vs_numbers.into_inner();
    counters.record_compaction(0, &flush_stats);
    Ok(Recovery {
        vs,
        edits,
        max_seq: replayed.max_seq,
        losses: replayed.losses,
        to_keep: replayed.to_keep,
        counters,
        kept,
        kept_wals,
    })
}

/// `avoid_flush_during_recovery`: takes out of `replayed` the non-empty memtables to keep as the families'
/// active ones, when the replay allows it: it met no damage (nothing dropped or kept in `lost/`), wrote no
/// table, and read fewer than [`MAX_LIVE_WALS_KEPT`] WALs. Each is numbered by the oldest WAL that holds its
/// entries (the first replayed at or above its family's log number), which stays live until a flush records
/// it. Before that, every WAL that stays live is fsynced, and then the directory: the previous process may have
/// left their tails unsynced (a kill), and a synced write acknowledged after this open must not survive a power
/// loss that takes them (D3). Empty when the option is off or the replay does not allow it (open flushes then).
fn keep_in_memory(
    dir: &Path,
    opts: &Options,
    targets: &[super::replay::Target],
    wals: &[u64],
    replayed: &mut super::replay::Replayed,
    info_log: &InfoLog,
) -> Result<std::collections::BTreeMap<u32, Arc<MemTable>>> {
    let mut kept = std::collections::BTreeMap::new();
    let clean = replayed.to_keep.is_empty() && replayed.losses.records == 0 && replayed.losses.bytes == 0;
    let no_tables = replayed.fams.values().all(|f| f.files.is_empty() && f.blob_files.is_empty());
    if !opts.avoid_flush_during_recovery || !clean || !no_tables || wals.len() >= MAX_LIVE_WALS_KEPT {
        return Ok(kept);
    }
    let mut oldest_kept = u64::MAX;
    let mut numbers = std::collections::BTreeMap::new();
    for t in targets {
        let Some(f) = replayed.fams.get(&t.id) else { continue };
        if f.mem.is_empty() {
            continue;
        }
        let Some(&first) = wals.iter().find(|&&n| n >= t.log_number) else { return Ok(kept) };
        numbers.insert(t.id, first);
        oldest_kept = oldest_kept.min(first);
    }
    if numbers.is_empty() {
        return Ok(kept);
    }
    let fs = opts.fs.as_ref();
    for &n in wals.iter().filter(|&&n| n >= oldest_kept) {
        let synced = fs.open_append(&filenames::wal(dir, n)).and_then(|mut f| f.sync());
        match synced {
            Ok(()) => {}
            // A file system that cannot reopen a file: flush, as without the option.
            Err(Error::NotSupported(_)) => return Ok(kept),
            Err(e) => return Err(e),
        }
    }
    fs.sync_dir(dir)?;
    for (id, first) in numbers {
        let Some(f) = replayed.fams.get_mut(&id) else { continue };
        let mem = std::mem::replace(&mut f.mem, Arc::new(MemTable::new(0)));
        match Arc::try_unwrap(mem) {
            Ok(mem) => {
                kept.insert(id, Arc::new(mem.renumbered(first)));
            }
            Err(mem) => f.mem = mem,
        }
    }
    let live: Vec<u64> = wals.iter().copied().filter(|&n| n >= oldest_kept).collect();
    info_log.log(format_args!(
        "recovery: kept the replayed memtables of families {:?} in memory (avoid_flush_during_recovery); WALs \
         {live:?} stay live until a flush",
        kept.keys().collect::<Vec<_>>()
    ));
    Ok(kept)
}

/// A fresh WAL; the old ones are obsolete once the recovery's edit, which names it, is durable.
fn start_new_wal(dir: &Path, opts: &Options, rec: &mut Recovery) -> Result<WalState> {
    let wal_number = rec.vs.new_file_number()?;
    let wal_file = opts.fs.create(&filenames::wal(dir, wal_number))?;
    for edit in rec.edits.values_mut() {
        // A family whose replayed memtable is kept keeps the log number `replay_wals` gave it.
        edit.log_number = Some(edit.log_number.unwrap_or(wal_number));
        edit.last_sequence = Some(rec.max_seq);
    }
    let mut wal = WalState::new(log::Writer::new(wal_file), wal_number, rec.max_seq + 1);
    wal.count_live_wals(&rec.kept_wals);
    Ok(wal)
}

/// What recovery did not replay is kept in `lost/` before the MANIFEST that makes the WALs obsolete (lost.rs).
fn keep_unreplayed_wals(dir: &Path, opts: &Options, rec: &mut Recovery, info_log: &InfoLog) -> Result<()> {
    let fs = opts.fs.as_ref();
    for &n in &rec.to_keep {
        let name = format!("{n:06}.log");
        let kept = crate::lost::keep(fs, dir, &name, &fs.read_all(&filenames::wal(dir, n))?)?;
        info_log.log(format_args!("recovery: kept {name} as {}", kept.display()));
        rec.losses.kept.push(kept);
    }
    Ok(())
}

/// Recovery always starts a new MANIFEST holding a snapshot that includes the recovery's edit, and switches
/// CURRENT to it.
fn write_recovered_manifest(rec: &mut Recovery, wal_number: u64) -> Result<()> {
    for (&id, edit) in &rec.edits {
        let Some(base) = rec.vs.current_of(id) else { continue };
        let v = crate::version_set::apply(base, edit, Path::new("recovery"))?;
        rec.vs.replace_current(id, Arc::new(v), edit.log_number.unwrap_or(wal_number), rec.max_seq);
    }
    rec.vs.write_new_manifest()
}

/// Orphans: files of ours the new state does not need, and only those (D7, D9): the WALs just replayed and
/// what this open created.
fn remove_obsolete_files(dir: &Path, opts: &Options, vs: &VersionSet, wals: &[u64], info_log: &InfoLog) -> Result<()> {
    for name in super::files::remove_obsolete(opts.fs.as_ref(), dir, vs, wals)? {
        info_log.log(format_args!("open: removed obsolete {name}"));
    }
    Ok(())
}

/// The options of this open, the database's and every named family's (`named`, in id order), as a new
/// `OPTIONS-NNNNNN` (temp file, fsync, rename, directory fsync), the older ones beyond the newest two removed
/// (options_file.rs, D14).
fn write_options_file(
    dir: &Path,
    opts: &Options,
    named: &[(String, Options)],
    vs: &mut VersionSet,
    info_log: &InfoLog,
    note: Option<String>,
) -> Result<()> {
    if let Some(note) = note {
        info_log.log(format_args!("open: {note}"));
    }
    let families: Vec<(&str, &Options)> = named.iter().map(|(n, o)| (n.as_str(), o)).collect();
    let (name, removed) = crate::options_file::write(opts.fs.as_ref(), dir, vs, opts, &families)?;
    info_log.log(format_args!("open: wrote {name}; removed {removed:?}"));
    Ok(())
}
