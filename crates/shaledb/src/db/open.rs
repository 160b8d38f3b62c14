//! Opening a database: lock, MANIFEST recovery, WAL replay under the chosen recovery mode, orphan cleanup.

use super::write::WalState;
use super::{DbInner, State, SuperVersion};
use crate::compaction::{self, OutputSpec, RunContext};
use crate::filenames::{self, FileKind};
use crate::memtable::MemTable;
use crate::options::{Options, WalRecoveryMode};
use crate::snapshot::SnapshotList;
use crate::stats::{CompactionStats, Counters};
use crate::table_cache::TableCache;
use crate::version_set::VersionSet;
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use shaledb_format::batch::BatchRep;
use shaledb_format::cache::BlockCache;
use shaledb_format::edit::{FileMeta, VersionEdit};
use shaledb_format::log::{self, LogRead};
use shaledb_format::table::{TableOptions, TableStats};
use shaledb_vfs::{Error, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub(crate) fn table_options(o: &Options, level: usize, bottommost: bool) -> TableOptions {
    TableOptions {
        block_size: o.block_size,
        block_restart_interval: o.block_restart_interval,
        compression: o.compression_for_level(level, bottommost),
        compression_level: o.compression_level,
        bloom_bits_per_key: o.bloom_bits_per_key,
    }
}

/// Writes the contents of `mem` as one L0 table (recovery and flush). `None` when the memtable is empty.
pub(crate) fn write_level0(
    opts: &Options,
    dir: &Path,
    mem: &Arc<MemTable>,
    new_number: &dyn Fn() -> u64,
    snapshots: &[u64],
    stop: &AtomicBool,
) -> Result<(Vec<FileMeta>, CompactionStats)> {
    if mem.is_empty() {
        return Ok((Vec::new(), CompactionStats::default()));
    }
    let spec = OutputSpec {
        table_options: table_options(opts, 0, false),
        max_file_size: u64::MAX,
        grandparents: Vec::new(),
        max_grandparent_overlap: u64::MAX,
    };
    let new_file = || {
        let n = new_number();
        Ok((n, filenames::table(dir, n)))
    };
    let cx = RunContext {
        fs: opts.fs.as_ref(),
        new_file: &new_file,
        snapshots,
        merge: opts.merge_operator.as_ref(),
        bottommost: false,
        stop,
    };
    let start = Instant::now();
    let cpu_start = shaledb_vfs::thread_cpu_micros();
    let mut it = mem.iter();
    let out = compaction::write_sorted_run(&mut it, &spec, &cx)?;
    let mut stats = out.stats;
    stats.micros = start.elapsed().as_micros() as u64;
    stats.cpu_micros = shaledb_vfs::thread_cpu_micros().saturating_sub(cpu_start);
    stats.count = 1;
    Ok((out.files, stats))
}

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
    let lock = fs.lock(&filenames::lock(dir))?;
    let exists = fs.exists(&filenames::current(dir));
    let mut vs = if exists {
        if opts.error_if_exists {
            return Err(Error::InvalidArgument(format!("{} exists (error_if_exists is true)", dir.display())));
        }
        VersionSet::recover(dir, &opts)?
    } else {
        if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} holds no database (create_if_missing is false)",
                dir.display()
            )));
        }
        VersionSet::create(dir, &opts)?
    };

    // Every number on disk counts as used, so a new file never takes the name of an orphan.
    let names = fs.list(dir)?;
    let mut wals = Vec::new();
    for name in &names {
        match filenames::parse(name) {
            Some(FileKind::Wal(n)) => {
                vs.mark_file_number_used(n);
                if n >= vs.log_number {
                    wals.push(n);
                }
            }
            Some(FileKind::Table(n) | FileKind::Temp(n) | FileKind::Manifest(n)) => vs.mark_file_number_used(n),
            _ => {}
        }
    }
    wals.sort_unstable();

    let counters = Counters::new(opts.num_levels);
    let next_number = AtomicU64::new(vs.next_file_number);
    let new_number = || next_number.fetch_add(1, Ordering::Relaxed);
    let stop = AtomicBool::new(false);
    let mut edit = VersionEdit::default();
    let mut max_seq = vs.last_sequence;
    let mut mem = Arc::new(MemTable::new(0));
    let mut flush_stats = CompactionStats::default();
    let last_wal = wals.last().copied();
    'replay: for &number in &wals {
        let path = filenames::wal(dir, number);
        let data = fs.read_all(&path)?;
        let mut reader = log::Reader::new(data, path.clone());
        loop {
            let (damage, at_tail) = match reader.next() {
                LogRead::Eof => break,
                LogRead::Damage(d) => (d.to_error(&path), d.at_tail),
                LogRead::Record { offset, data } => match BatchRep::from_bytes(data) {
                    // The record's checksum passed but its contents do not decode: corruption that no
                    // torn write explains.
                    Err(e) => (e.in_file(&path, offset), false),
                    Ok(batch) => {
                        let seq = batch.sequence();
                        let mut s = seq;
                        for e in batch.iter() {
                            let e = e.map_err(|e| e.in_file(&path, offset))?;
                            mem.add(s, e.kind, e.key, e.value);
                            s += 1;
                        }
                        if s > seq {
                            max_seq = max_seq.max(s - 1);
                        }
                        if mem.approximate_memory_usage() >= opts.write_buffer_size {
                            let (files, st) = write_level0(&opts, dir, &mem, &new_number, &[], &stop)?;
                            flush_stats.add(&st);
                            edit.new_files.extend(files.into_iter().map(|f| (0, f)));
                            mem = Arc::new(MemTable::new(0));
                        }
                        continue;
                    }
                },
            };
            match opts.wal_recovery_mode {
                // Everything before the damage is a prefix of the acknowledged writes; nothing after it may be
                // applied, in this WAL or a later one, or the result could have holes (D3).
                WalRecoveryMode::PointInTime => break 'replay,
                WalRecoveryMode::SkipAnyCorruptedRecords => continue,
                WalRecoveryMode::AbsoluteConsistency => return Err(damage),
                WalRecoveryMode::TolerateCorruptedTailRecords => {
                    if at_tail && Some(number) == last_wal {
                        break 'replay;
                    }
                    return Err(damage);
                }
            }
        }
    }
    vs.next_file_number = vs.next_file_number.max(next_number.load(Ordering::Relaxed));
    if !mem.is_empty() {
        let next_number = AtomicU64::new(vs.next_file_number);
        let new_number = || next_number.fetch_add(1, Ordering::Relaxed);
        let (files, st) = write_level0(&opts, dir, &mem, &new_number, &[], &stop)?;
        flush_stats.add(&st);
        edit.new_files.extend(files.into_iter().map(|f| (0, f)));
        vs.next_file_number = next_number.load(Ordering::Relaxed);
    }
    counters.record_compaction(0, &flush_stats);

    // A fresh WAL; the old ones are obsolete once the edit below is durable.
    let wal_number = vs.new_file_number();
    let wal_path = filenames::wal(dir, wal_number);
    let wal_file = fs.create(&wal_path)?;
    edit.log_number = Some(wal_number);
    edit.last_sequence = Some(max_seq);
    // Recovery always starts a new MANIFEST holding a snapshot that includes this edit.
    let v = crate::version_set::apply(vs.current(), &edit, Path::new("recovery"))?;
    vs.replace_current(Arc::new(v), wal_number, max_seq);
    vs.write_new_manifest()?;

    // Orphans: anything not live in the new state (D7).
    let live: std::collections::HashSet<u64> = vs.current().levels.iter().flatten().map(|f| f.number).collect();
    for name in fs.list(dir)? {
        let remove = match filenames::parse(&name) {
            Some(FileKind::Wal(n)) => n != wal_number,
            Some(FileKind::Table(n)) => !live.contains(&n),
            Some(FileKind::Manifest(n)) => n != vs.manifest_number(),
            Some(FileKind::Temp(_)) => true,
            _ => false,
        };
        if remove {
            fs.remove(&dir.join(&name))?;
        }
    }

    let block_cache = (opts.block_cache_size > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_size)));
    let table_stats = Arc::new(TableStats::default());
    let tables = Arc::new(TableCache::new(
        dir.to_path_buf(),
        fs.clone(),
        opts.max_open_files,
        block_cache.clone(),
        opts.cache_index_and_filter_blocks,
        table_stats.clone(),
    ));
    let mem = Arc::new(MemTable::with_capacity(wal_number, opts.write_buffer_size));
    let version = vs.current().clone();
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
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
        opts,
    });
    super::background::start(&inner)?;
    Ok(inner)
}
