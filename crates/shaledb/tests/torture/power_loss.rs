//! Power-loss and kill sweep (D1, D2, D3, D7): one seeded workload of puts, deletes, merges and batches (and,
//! in `power_loss_sweep_with_single_deletes`, single deletions keeping their contract),
//! some synced, through flushes and compactions; a copy of the file system is kept just before many of its
//! mutating operations (inside background jobs too). Each copy is crashed (process kill, or a power loss that
//! drops, tears or garbles unsynced data), reopened under PointInTime, read back in full and checked:
//!
//! - the open succeeds and no read reports corruption;
//! - the state is the state after a prefix of the acknowledged writes (no holes, batches all or nothing);
//! - that prefix holds every write acknowledged with `sync` (power loss) or every acknowledged write (kill);
//! - point lookups agree with the scan;
//! - the recovered state is itself durable: a power loss right after the open changes nothing.

use crate::{assert_no_background_panics, budget, open_on, watch_background_panics, DB};
use rand::Rng;
use shaledb::{ColumnFamily, ColumnFamilyDescriptor, CompressionType, Db, Options};
use shaledb_testkit::history::string_append;
use shaledb_testkit::workload::{
    check_gets, check_gets_families, read_all, read_all_families, submit, submit_families, tiny_options,
    SingleDeleteMix, WorkloadConfig,
};
use shaledb_testkit::{rng, seed_from_env, History, MemFs, PowerLoss, Recorded};
use std::sync::Arc;

/// How a recorded copy is crashed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Crash {
    Kill,
    Power(PowerLoss),
}

pub(crate) const CRASHES: [Crash; 5] = [
    Crash::Kill,
    Crash::Power(PowerLoss::DropUnsynced),
    Crash::Power(PowerLoss::KeepRandomPages { keep_probability: 0.5 }),
    Crash::Power(PowerLoss::GarbleUnsynced),
    Crash::Power(PowerLoss::KeepRandomPages { keep_probability: 0.9 }),
];

struct Run {
    history: History,
    recorded: Vec<Recorded>,
}

/// Runs `writes` random writes (with a flush now and then and a full compaction more rarely), keeping a copy
/// of the file system before every `stride`-th operation from the first open on. The tag of each copy is the
/// number of writes acknowledged when it was taken.
/// Opens the database on `fs`; with `fams` > 0, with that many column families besides the default one
/// (`f1`, `f2`, ..., created at the first open), whose handles are returned, the default family first.
fn open_fams(fs: &MemFs, opts: &Options, fams: usize) -> shaledb::Result<(Db, Vec<ColumnFamily>)> {
    if fams == 0 {
        return Ok((open_on(fs, opts)?, Vec::new()));
    }
    let o = Options { fs: Arc::new(fs.clone()), ..opts.clone() };
    let descs = (1..=fams).map(|i| ColumnFamilyDescriptor::new(format!("f{i}"), o.clone())).collect();
    let db = Db::open_with_column_families(DB, o, descs)?;
    let mut handles = vec![db.default_column_family()];
    for i in 1..=fams {
        handles.push(db.column_family(&format!("f{i}")).expect("opened with the database"));
    }
    Ok((db, handles))
}

fn run_workload(seed: u64, opts: &Options, cfg: &WorkloadConfig, writes: usize, stride: u64, fams: usize) -> Run {
    let fs = MemFs::new();
    fs.record_before(move |op, _, i| op.is_mutation() && i % stride == 0);
    let (db, handles) = open_fams(&fs, opts, fams).expect("open a new database");
    let mut r = rng(seed);
    let mut history = History::new(string_append());
    // With `single_delete_one_in` 0 this draws exactly what `random_write` draws.
    let mut mix = SingleDeleteMix::new();
    for i in 0..writes {
        let w = mix.write(&mut r, cfg);
        let done = if fams == 0 { submit(&db, &w) } else { submit_families(&db, &handles, &w) };
        if let Err(e) = done {
            panic!("write {i} failed without any fault: {e}");
        }
        history.push(w);
        fs.set_tag(i as u64 + 1);
        if r.gen_ratio(1, 80) {
            db.flush().expect("flush");
        }
        if r.gen_ratio(1, 250) {
            db.compact_range(None, None).expect("compact_range");
            for h in handles.iter().skip(1) {
                db.compact_range_cf(h, None, None).expect("compact_range_cf");
            }
        }
    }
    let recorded = fs.stop_recording();
    drop(handles);
    drop(db);
    Run { history, recorded }
}

/// Crashes one recorded copy and checks what a reopen recovers.
/// Reads every entry, of every family with `fams` > 0, and checks point lookups against the scans.
fn read_checked(db: &Db, handles: &[ColumnFamily], keys: u32) -> Result<shaledb_testkit::Model, String> {
    let observed = if handles.is_empty() { read_all(db) } else { read_all_families(db, handles) };
    let observed = observed.map_err(|e| format!("scan failed: {e}"))?;
    let gets = if handles.is_empty() {
        check_gets(db, &observed, keys)
    } else {
        check_gets_families(db, handles, &observed, keys)
    };
    gets.map_err(|e| format!("get failed: {e}"))??;
    Ok(observed)
}

#[allow(clippy::too_many_arguments)]
fn check_crash(
    run: &Run,
    rec: &Recorded,
    crash: Crash,
    seed: u64,
    opts: &Options,
    keys: u32,
    fams: usize,
) -> Result<(), String> {
    let (fs, lo, hi) = crash_copy(&run.history, rec, crash, seed);
    let (db, handles) = open_fams(&fs, opts, fams).map_err(|e| format!("open failed: {e}"))?;
    let observed = read_checked(&db, &handles, keys)?;
    let k = run.history.check(&observed, lo, hi)?;
    // Recovery must have made its result durable before returning (the WAL tail it dropped is gone, the
    // flushed tables are in a synced MANIFEST): cut the power at once and look again.
    let again = fs.deep_clone();
    drop(handles);
    drop(db);
    again.power_loss(PowerLoss::DropUnsynced, seed ^ 1);
    let (db, handles) = open_fams(&again, opts, fams).map_err(|e| format!("second open failed: {e}"))?;
    let second = read_checked(&db, &handles, keys)?;
    if second != observed {
        let k2 = run.history.check(&second, 0, run.history.len());
        return Err(format!("a power loss right after recovery changed the state (prefix {k} became {k2:?})"));
    }
    Ok(())
}

/// Crashes a deep copy of `rec`'s file system as `crash` says; with it, the range of prefixes of `history` the
/// recovered state may be: at least every write acknowledged (kill) or every synced one (power loss), at most
/// one more (the write in flight when the copy was taken may or may not have made it).
pub(crate) fn crash_copy(history: &History, rec: &Recorded, crash: Crash, seed: u64) -> (MemFs, usize, usize) {
    let fs = rec.fs.deep_clone();
    let acked = usize::try_from(rec.tag).unwrap_or(usize::MAX);
    let lo = match crash {
        Crash::Kill => acked,
        Crash::Power(mode) => {
            fs.power_loss(mode, seed);
            history.synced_prefix(acked)
        }
    };
    (fs, lo, (acked + 1).min(history.len()))
}

/// Runs a workload and checks up to `points` of its recorded copies, each under one crash kind (rotating),
/// and every `full_every`-th copy under all of them.
fn sweep(name: &str, opts: Options, cfg: WorkloadConfig, writes: usize, points: usize) {
    sweep_then(name, opts, cfg, writes, points, &|| {});
}

/// [`sweep`], calling `after_workload` once the workload has run, before any crash is checked.
fn sweep_then(name: &str, opts: Options, cfg: WorkloadConfig, writes: usize, points: usize, after_workload: &dyn Fn()) {
    sweep_families(name, opts, cfg, writes, points, after_workload, 0);
}

/// [`sweep_then`] with `fams` column families besides the default one (0: none).
fn sweep_families(
    name: &str,
    opts: Options,
    cfg: WorkloadConfig,
    writes: usize,
    points: usize,
    after_workload: &dyn Fn(),
    fams: usize,
) {
    watch_background_panics();
    let seed = seed_from_env(0x5EED_0001);
    let writes = writes * budget() as usize;
    let points = points * budget() as usize;
    let run = run_workload(seed, &opts, &cfg, writes, 1, fams);
    after_workload();
    assert!(!run.recorded.is_empty());
    let step = (run.recorded.len() / points.max(1)).max(1);
    let mut failures = Vec::new();
    let mut checked = 0usize;
    for (n, rec) in run.recorded.iter().enumerate().filter(|(n, _)| n % step == 0) {
        let crashes: Vec<Crash> = if n % (7 * step) == 0 { CRASHES.to_vec() } else { vec![CRASHES[n / step % 5]] };
        for crash in crashes {
            checked += 1;
            let crash_seed = seed ^ (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            if let Err(e) = check_crash(&run, rec, crash, crash_seed, &opts, cfg.keys, fams) {
                failures.push(format!(
                    "copy {n} (before {:?} of {} at op {}, {} writes acked), {crash:?}: {e}",
                    rec.op,
                    rec.path.display(),
                    rec.index,
                    rec.tag
                ));
            }
        }
    }
    eprintln!("{name}: {writes} writes, {} copies recorded, {checked} crashes checked", run.recorded.len());
    assert_no_background_panics();
    assert!(failures.is_empty(), "{name}: {} of {checked} crashes failed:\n{}", failures.len(), failures.join("\n"));
}

fn mem_default() -> Options {
    tiny_options(Arc::new(MemFs::new()))
}

#[test]
fn power_loss_sweep_tiny_files_lz4() {
    sweep("tiny/lz4", mem_default(), WorkloadConfig::default(), 400, 400);
}

#[test]
fn power_loss_sweep_one_background_thread_no_compression_no_bloom() {
    let opts = Options {
        max_background_jobs: 1,
        compression: CompressionType::None,
        bloom_bits_per_key: 0.0,
        block_size: 1024,
        ..mem_default()
    };
    sweep("single-thread/none", opts, WorkloadConfig { keys: 60, ..WorkloadConfig::default() }, 300, 300);
}

#[test]
fn power_loss_sweep_large_values_fragmented_wal_records() {
    // Values up to 3 KiB: WAL records span 32 KiB blocks, memtables switch every write or two.
    let cfg = WorkloadConfig { max_value: 3000, keys: 40, sync_one_in: 3, ..WorkloadConfig::default() };
    let opts = Options { write_buffer_size: 8192, compression: CompressionType::Zstd, ..mem_default() };
    sweep("large-values/zstd", opts, cfg, 150, 300);
}

/// D17: universal compaction's tasks (several levels in, written just above the next older run, trivial
/// moves) keep D3 and D7 at every crash point: a power loss never loses an acknowledged synced write nor
/// resurrects an old value.
#[test]
fn power_loss_sweep_universal_compaction() {
    let u = shaledb::CompactionOptionsUniversal { allow_trivial_move: true, ..Default::default() };
    let opts = Options {
        compaction_style: shaledb::CompactionStyle::Universal,
        compaction_options_universal: u,
        ..mem_default()
    };
    sweep("universal/lz4", opts, WorkloadConfig::default(), 400, 300);
}

/// D3 with single deletions (issue 16): a kill or power loss before or after a flush or compaction never
/// resurrects a single-deleted value nor loses one acknowledged, whichever of a put and its single deletion
/// reached a table first.
#[test]
fn power_loss_sweep_with_single_deletes() {
    let cfg = WorkloadConfig { keys: 60, single_delete_one_in: 2, ..WorkloadConfig::default() };
    sweep("single-delete/lz4", mem_default(), cfg, 300, 300);
}

/// Minimal reproduction of a D1/D7 violation found by the sweep: a flushed table is synced and recorded in a
/// synced MANIFEST edit, but its directory entry is never synced, so a power loss right after the flush
/// leaves a MANIFEST naming a table that does not exist; the synced write is unreadable.
#[test]
fn synced_write_survives_power_loss_right_after_flush() {
    let fs = MemFs::new();
    let db = open_on(&fs, &mem_default()).unwrap();
    db.put_opt(&shaledb::WriteOptions { sync: true, ..Default::default() }, b"k", b"v").unwrap();
    db.flush().unwrap();
    let crashed = fs.deep_clone();
    drop(db);
    crashed.power_loss(PowerLoss::DropUnsynced, 0);
    let db = open_on(&crashed, &mem_default()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// Blob files (D21): values of 16 bytes and more go to blob files at flush and compaction; a kill or power
/// loss at any step (blob file written but not synced, synced but not in the MANIFEST, the edit torn) never
/// loses an acknowledged write nor leaves a reference to a missing or partial blob file.
#[test]
fn power_loss_sweep_blob_files() {
    let opts = Options { enable_blob_files: true, min_blob_size: 16, blob_file_size: 2048, ..mem_default() };
    sweep("blob/lz4", opts, WorkloadConfig { keys: 60, ..WorkloadConfig::default() }, 300, 300);
}

/// The same with blob garbage collection relocating values and obsolete blob files deleted (D22).
#[test]
fn power_loss_sweep_blob_garbage_collection() {
    let opts = Options {
        enable_blob_files: true,
        min_blob_size: 8,
        blob_file_size: 1024,
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: 0.5,
        blob_garbage_collection_force_threshold: 0.5,
        ..mem_default()
    };
    sweep("blob-gc/lz4", opts, WorkloadConfig { keys: 40, ..WorkloadConfig::default() }, 300, 300);
}

/// Subcompactions: level-0 compactions split into up to four pieces written by threads of their own and
/// installed in one MANIFEST edit. A kill or power loss at any step of any piece (outputs of some pieces
/// synced, others partial, the edit torn) never loses an acknowledged synced write nor resurrects an old
/// value: no piece's outputs count before the one edit naming them all is durable.
#[test]
fn power_loss_sweep_subcompactions() {
    use shaledb::listener::{CompactionJobInfo, EventListener};
    use std::sync::atomic::{AtomicU64, Ordering};
    #[derive(Default)]
    struct Split(AtomicU64);
    impl EventListener for Split {
        fn on_compaction_completed(&self, info: &CompactionJobInfo) {
            if info.stats.subcompactions > 1 {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let split = Arc::new(Split::default());
    let opts = Options {
        max_subcompactions: 4,
        max_background_jobs: 3,
        target_file_size_base: 1024,
        listeners: vec![split.clone() as Arc<dyn EventListener>],
        ..mem_default()
    };
    // Counted before the crash checks, whose reopens compact too: the splits happened in the recorded run.
    let check = || assert!(split.0.load(Ordering::SeqCst) > 0, "no compaction of the recorded run was split");
    sweep_then("subcompactions/lz4", opts, WorkloadConfig::default(), 400, 300, &check);
}

/// Parallel flushes (issue 15): eight background jobs make two flush threads, which write memtables at once
/// (4 KiB memtables, up to five waiting) and record them oldest first, over three column families so that
/// each family's log number moves on its own. After every crash the families hold a prefix of the acknowledged
/// writes, as in the other sweeps.
#[test]
fn power_loss_sweep_parallel_flushes() {
    use shaledb::listener::{EventListener, FlushJobInfo};
    use std::sync::atomic::{AtomicU64, Ordering};
    /// The most flushes begun and not yet recorded at one time: 2 or more only when two ran at once (one
    /// flush thread records its memtable before it begins the next).
    #[derive(Default)]
    struct Overlap {
        open: AtomicU64,
        most: AtomicU64,
    }
    impl EventListener for Overlap {
        fn on_flush_begin(&self, _: &FlushJobInfo) {
            let now = self.open.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
        }
        fn on_flush_completed(&self, _: &FlushJobInfo) {
            self.open.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let overlap = Arc::new(Overlap::default());
    let opts = Options {
        max_background_jobs: 8,
        max_write_buffer_number: 6,
        write_buffer_size: 4096,
        listeners: vec![overlap.clone() as Arc<dyn EventListener>],
        ..mem_default()
    };
    let check = || assert!(overlap.most.load(Ordering::SeqCst) >= 2, "no two flushes of the recorded run overlapped");
    sweep_families("parallel-flushes", opts, WorkloadConfig::default(), 400, 300, &check, 2);
}

/// Column families (D28): the same workload over three families (the default one and two more), every key in
/// the family its hash picks and every batch across them, so the families flush, compact and advance their log
/// numbers at different times. After every crash the families together hold a prefix of the acknowledged
/// writes, each batch in all its families or none, each key only in its own family.
#[test]
fn power_loss_sweep_column_families() {
    let cfg = WorkloadConfig { delete_range_one_in: 40, ..WorkloadConfig::default() };
    sweep_families("families", mem_default(), cfg, 400, 400, &|| {}, 2);
}
