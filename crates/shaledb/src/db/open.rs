//! Opening a database: directory rules and lock, MANIFEST recovery, identity and live-file checks, removal of
//! our leftovers (before anything is written), WAL replay under the chosen recovery mode, orphan cleanup.
//! Which files are ours: `files.rs` (docs/durability.md D9).

use super::flush::write_level0;
use super::write::WalState;
use super::{DbInner, State, SuperVersion};
use crate::filenames::{self, FileKind};
use crate::identity;
use crate::info_log::InfoLog;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::snapshot::SnapshotList;
use crate::stats::Counters;
use crate::table_cache::TableCache;
use crate::version_set::VersionSet;
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use shaledb_format::cache::BlockCache;
use shaledb_format::edit::VersionEdit;
use shaledb_format::log;
use shaledb_format::table::TableStats;
use shaledb_vfs::{Error, ReadHints, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

pub(crate) fn open(dir: &Path, opts: Options) -> Result<Arc<DbInner>> {
    opts.validate()?;
    let fs = opts.fs.clone();
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
        // ours; checked again below under the lock.
        super::files::check_fresh_dir(fs.as_ref(), dir, &fs.list(dir)?)?;
    }
    let lock = fs.lock(&filenames::lock(dir))?;
    let exists = fs.exists(&filenames::current(dir));
    let names = fs.list(dir)?;
    let (mut vs, leftovers) = if exists {
        if opts.error_if_exists {
            return Err(Error::InvalidArgument(format!("{} exists (error_if_exists is true)", dir.display())));
        }
        let mut vs = VersionSet::recover(dir, &opts)?;
        // Nothing is written or removed before the recovered state has been checked against the directory.
        let on_disk = identity::read(fs.as_ref(), dir)?;
        // A MANIFEST written before identities existed: adopt IDENTITY's, or draw one.
        let id = match identity::reconcile(dir, vs.db_id, vs.manifest_number(), on_disk)? {
            Some(id) => id,
            None => identity::generate(dir)?,
        };
        vs.db_id = Some(id);
        if opts.paranoid_checks {
            super::files::check_live_files(fs.as_ref(), dir, vs.current())?;
        }
        let leftovers = super::files::remove_leftovers(fs.as_ref(), dir, &mut vs, &names)?;
        if on_disk != Some(id) {
            let temp = vs.new_file_number()?;
            identity::write(fs.as_ref(), dir, &id, temp)?;
        }
        (vs, leftovers)
    } else {
        if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} holds no database (create_if_missing is false)",
                dir.display()
            )));
        }
        let fresh = super::files::check_fresh_dir(fs.as_ref(), dir, &names)?;
        for name in &fresh.creation_leftovers {
            fs.remove(&dir.join(name))?;
        }
        let kept = fresh.id;
        let id = match kept {
            Some(id) => id,
            None => identity::generate(dir)?,
        };
        let mut vs = VersionSet::create(dir, &opts, id)?;
        if kept.is_none() {
            let temp = vs.new_file_number()?;
            identity::write(fs.as_ref(), dir, &id, temp)?;
        }
        (vs, fresh.creation_leftovers)
    };
    if opts.use_direct_reads {
        // Tables are opened on first use: find out now, not at the first read of a table, whether the file
        // system takes O_DIRECT (NotSupported when it refuses). IDENTITY exists at this point.
        let probe = fs.open(&filenames::identity(dir), ReadHints { direct: true, ..ReadHints::default() })?;
        let mut head = [0u8; 16];
        let n = usize::try_from(probe.len()).map_or(head.len(), |l| l.min(head.len()));
        probe.read_exact_at(&mut head[..n], 0)?;
    }
    let db_id = vs.db_id.unwrap_or_default();
    // The directory is ours from here on: the LOG may be written.
    let info_log = InfoLog::open(fs.clone(), dir, opts.max_log_file_size, opts.keep_log_file_num);
    info_log.log(format_args!("open {}: {:?}, recovery mode {:?}", dir.display(), opts, opts.wal_recovery_mode));
    for name in &leftovers {
        info_log.log(format_args!("open: removed leftover {name}"));
    }

    // WALs at or above the log number are live (their numbers may be above the MANIFEST's counter: a WAL is
    // created before the next edit records the counter); only names exactly ours, within range, count.
    let mut wals = Vec::new();
    for name in &names {
        if let Some(FileKind::Wal(n)) = filenames::parse(name) {
            if n >= vs.log_number {
                vs.mark_file_number_used(n);
                wals.push(n);
            }
        }
    }
    wals.sort_unstable();

    info_log.log(format_args!(
        "recovered MANIFEST-{:06}: database {}, log number {}, next file {}, last sequence {}; WALs to replay: \
         {wals:?}",
        vs.manifest_number(),
        identity::to_hex(&db_id),
        vs.log_number,
        vs.next_file_number,
        vs.last_sequence
    ));
    let counters = Counters::new(opts.num_levels);
    let last_sequence = vs.last_sequence;
    // Recovery's tables take numbers from the version set's counter (range-checked, stepping over files that
    // are not ours).
    let vs_numbers = Mutex::new(vs);
    let new_number = || vs_numbers.lock().new_file_number();
    let stop = AtomicBool::new(false);
    let mut edit = VersionEdit::default();
    let replayed = super::replay::replay(&opts, db_id, dir, &wals, &new_number, &stop, &info_log, last_sequence)
        .inspect_err(|e| info_log.log(format_args!("open refused: {e}")))?;
    let max_seq = replayed.max_seq;
    let mem = replayed.mem;
    let mut flush_stats = replayed.stats;
    edit.new_files.extend(replayed.files.into_iter().map(|f| (0, f)));
    let mut losses = replayed.losses;
    if !mem.is_empty() {
        let (files, st) = write_level0(&opts, db_id, dir, &mem, &new_number, &[], &stop)?;
        flush_stats.add(&st);
        edit.new_files.extend(files.into_iter().map(|f| (0, f)));
    }
    let mut vs = vs_numbers.into_inner();
    counters.record_compaction(0, &flush_stats);

    // A fresh WAL; the old ones are obsolete once the edit below is durable.
    let wal_number = vs.new_file_number()?;
    let wal_path = filenames::wal(dir, wal_number);
    let wal_file = fs.create(&wal_path)?;
    edit.log_number = Some(wal_number);
    edit.last_sequence = Some(max_seq);
    // What recovery did not replay is kept before the MANIFEST that makes the WALs obsolete (lost.rs).
    for &n in &replayed.to_keep {
        let name = format!("{n:06}.log");
        let kept = crate::lost::keep(fs.as_ref(), dir, &name, &fs.read_all(&filenames::wal(dir, n))?)?;
        info_log.log(format_args!("recovery: kept {name} as {}", kept.display()));
        losses.kept.push(kept);
    }
    // Recovery always starts a new MANIFEST holding a snapshot that includes this edit.
    let v = crate::version_set::apply(vs.current(), &edit, Path::new("recovery"))?;
    vs.replace_current(Arc::new(v), wal_number, max_seq);
    vs.write_new_manifest()?;

    // Orphans: files of ours the new state does not need, and only those (D7, D9).
    for name in super::files::remove_obsolete(fs.as_ref(), dir, &vs, &wals)? {
        info_log.log(format_args!("open: removed obsolete {name}"));
    }

    let block_cache = (opts.block_cache_size > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_size)));
    let table_stats = Arc::new(TableStats::default());
    let tables = Arc::new(TableCache::new(
        dir.to_path_buf(),
        fs.clone(),
        &opts,
        block_cache.clone(),
        table_stats.clone(),
        db_id,
    ));
    let mem = Arc::new(MemTable::with_capacity(wal_number, opts.write_buffer_size));
    let version = vs.current().clone();
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        db_id,
        fs: fs.clone(),
        lock: Mutex::new(Some(lock)),
        sv: ArcSwap::from_pointee(SuperVersion { mem: mem.clone(), imm: Vec::new(), version: version.clone() }),
        state: Mutex::new(State {
            vs,
            mem,
            imm: Vec::new(),
            flushing: false,
            running_compactions: 0,
            busy: Default::default(),
            bg_error: None,
            manual: 0,
            obsolete_tables: Vec::new(),
            live_versions: vec![Arc::downgrade(&version)],
            bg_threads_alive: 0,
        }),
        bg_cv: Condvar::new(),
        write: Default::default(),
        wal: Mutex::new(WalState::new(log::Writer::new(wal_file), wal_number, max_seq + 1)),
        visible_seq: AtomicU64::new(max_seq),
        publish: Mutex::new(()),
        publish_cv: Condvar::new(),
        snapshots: Arc::new(SnapshotList::default()),
        tables,
        block_cache,
        table_stats,
        counters,
        shutting_down: AtomicBool::new(false),
        threads: Mutex::new(Vec::new()),
        info_log,
        recovery_losses: losses,
        read_only: false,
        opts,
    });
    inner.info_log.log(format_args!("open: done, last sequence {max_seq}, new WAL {wal_number:06}.log"));
    super::background::start(&inner)?;
    Ok(inner)
}
