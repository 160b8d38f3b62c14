//! Short runs (issue 39: each `shaledb put` wrote its own table): with `avoid_flush_during_recovery` and
//! `avoid_flush_during_shutdown`, one write per open leaves no table per open, and the durability contract
//! still holds: every acknowledged write survives a kill, and a synced one a power loss, with no hole (D1-D3),
//! also when the WALs that hold the kept memtables were left unsynced by a killed process.

use crate::{db_path, open_on, watch_background_panics};
use shaledb::{Db, Options, WriteOptions};
use shaledb_testkit::{MemFs, PowerLoss};
use std::sync::Arc;

/// Default-sized options (a 64 MiB memtable: nothing fills it here) with both options on, on `fs`.
fn short_run_options(fs: &MemFs) -> Options {
    Options {
        avoid_flush_during_recovery: true,
        avoid_flush_during_shutdown: true,
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

fn names(fs: &MemFs, suffix: &str) -> Vec<String> {
    fs.file_names(db_path()).into_iter().filter(|n| n.ends_with(suffix)).collect()
}

fn key(i: usize) -> String {
    format!("key{i:03}")
}

fn value(i: usize) -> String {
    format!("value{i}")
}

fn assert_all_readable(db: &Db, n: usize) {
    for i in 0..n {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i).into_bytes()), "{}", key(i));
    }
}

#[test]
fn fifteen_open_put_close_cycles_leave_few_tables_and_every_value() {
    watch_background_panics();
    let fs = MemFs::new();
    let opts = short_run_options(&fs);
    for i in 0..15 {
        let db = open_on(&fs, &opts).unwrap();
        db.put(key(i), value(i)).unwrap();
        db.close().unwrap();
        // The kept memtables' WALs, and the one each open starts: never more than four live.
        let wals = names(&fs, ".log");
        assert!((1..=4).contains(&wals.len()), "after put {i}: {wals:?}");
    }
    // Without the options, each cycle wrote a table (at close) and the next open replayed nothing; with them an
    // open flushes only when it finds four WALs: tables at the 5th, 9th and 13th opens.
    let tables = names(&fs, ".sst");
    assert!(tables.len() <= 4, "{tables:?}");
    assert_eq!(names(&fs, "LOG").len(), 1, "{:?}", fs.file_names(db_path()));
    assert!(!fs.file_names(db_path()).iter().any(|n| n.starts_with("LOG.old.")), "{:?}", fs.file_names(db_path()));
    let db = open_on(&fs, &opts).unwrap();
    assert_all_readable(&db, 15);
    drop(db);
    // An open without the options (close flushes, recovery flushes) reads the same, and leaves one WAL: the
    // kept ones are deleted once a flush recorded their data.
    let db = open_on(&fs, &Options { fs: Arc::new(fs.clone()), ..Options::default() }).unwrap();
    assert_all_readable(&db, 15);
    db.close().unwrap();
    assert_eq!(names(&fs, ".log").len(), 1, "{:?}", fs.file_names(db_path()));
    let db = open_on(&fs, &opts).unwrap();
    assert_all_readable(&db, 15);
}

#[test]
fn a_flush_deletes_the_kept_wals_and_the_values_stay() {
    watch_background_panics();
    let fs = MemFs::new();
    let opts = short_run_options(&fs);
    for i in 0..3 {
        let db = open_on(&fs, &opts).unwrap();
        db.put(key(i), value(i)).unwrap();
        db.close().unwrap();
    }
    let db = open_on(&fs, &opts).unwrap();
    assert_eq!(names(&fs, ".log").len(), 4, "three kept and the new one: {:?}", fs.file_names(db_path()));
    assert!(names(&fs, ".sst").is_empty(), "{:?}", fs.file_names(db_path()));
    db.put(key(3), value(3)).unwrap();
    db.flush().unwrap();
    assert_eq!(names(&fs, ".log").len(), 1, "{:?}", fs.file_names(db_path()));
    assert_eq!(names(&fs, ".sst").len(), 1, "{:?}", fs.file_names(db_path()));
    assert_all_readable(&db, 4);
    // A kill now: the flushed values are in the table, nothing is replayed twice.
    let killed = fs.deep_clone();
    drop(db);
    let db = open_on(&killed, &short_run_options(&killed)).unwrap();
    assert_all_readable(&db, 4);
}

#[test]
fn kept_memtables_survive_kills_and_synced_writes_survive_power_loss_without_holes() {
    watch_background_panics();
    let mut fs = MemFs::new();
    let mut written = 0;
    for round in 0..10 {
        let opts = short_run_options(&fs);
        let db = open_on(&fs, &opts).unwrap();
        assert_all_readable(&db, written);
        // A synced write: a power loss now keeps everything acknowledged before it, including the previous
        // process's last write, which that process never synced (it was killed). That one is in a WAL this open
        // kept live and fsynced; were it not fsynced, the power loss would keep this write and lose that one,
        // a hole (D3).
        let mut b = shaledb::WriteBatch::new();
        b.put(key(written), value(written));
        db.write_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, &b).unwrap();
        written += 1;
        let powered = fs.deep_clone();
        powered.power_loss(PowerLoss::DropUnsynced, round);
        {
            let db = open_on(&powered, &short_run_options(&powered)).unwrap();
            assert_all_readable(&db, written);
        }
        // Then an unsynced write, and a kill (no close: nothing is synced at the end).
        db.put(key(written), value(written)).unwrap();
        written += 1;
        let killed = fs.deep_clone();
        drop(db);
        fs = killed;
    }
    assert!(names(&fs, ".sst").len() <= 3, "{:?}", fs.file_names(db_path()));
}

#[test]
fn a_write_without_the_wal_is_flushed_by_close_even_so() {
    watch_background_panics();
    let fs = MemFs::new();
    let opts = short_run_options(&fs);
    let db = open_on(&fs, &opts).unwrap();
    db.put("logged", "1").unwrap();
    let mut b = shaledb::WriteBatch::new();
    b.put("unlogged", "2");
    db.write_opt(&WriteOptions { disable_wal: true, ..WriteOptions::default() }, &b).unwrap();
    db.close().unwrap();
    assert_eq!(names(&fs, ".sst").len(), 1, "{:?}", fs.file_names(db_path()));
    let db = open_on(&fs, &opts).unwrap();
    assert_eq!(db.get("unlogged").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get("logged").unwrap(), Some(b"1".to_vec()));
}

/// The I/O-error loops (io_errors.rs) for short runs: for each class of operation and k = 1, 2, ..., eight
/// processes in turn open the database with both options, put one key (every other one synced) and close, while
/// the k-th operation of the class fails once. An open or a write may fail; the next process goes on. After
/// the run, a kill keeps every acknowledged write, and a power loss keeps a prefix of them holding every synced
/// one (a failed write may be there or not).
#[test]
fn a_failed_operation_during_short_runs_loses_no_acknowledged_write() {
    use shaledb_testkit::{FaultError, FaultPlan, FsOp};
    watch_background_panics();
    const RUNS: usize = 8;
    let mut failures = Vec::new();
    for op in [FsOp::Write, FsOp::Sync, FsOp::SyncDir, FsOp::Open, FsOp::Create, FsOp::Rename, FsOp::Remove] {
        for k in 1.. {
            let fs = MemFs::new();
            fs.set_faults(FaultPlan::once(op, k, FaultError::Eio));
            // (key index, synced) of each acknowledged write, in order.
            let mut acked: Vec<(usize, bool)> = Vec::new();
            for i in 0..RUNS {
                let Ok(db) = open_on(&fs, &short_run_options(&fs)) else { continue };
                for &(j, _) in &acked {
                    // An I/O error (the fault, reading a table) is allowed; a missing or wrong value is not.
                    match db.get(key(j)) {
                        Ok(v) if v != Some(value(j).into_bytes()) => {
                            failures.push(format!("{op:?} k={k}: process {i} reads {} as {v:?}", key(j)));
                        }
                        Ok(_) => {}
                        Err(e) if e.is_io() => {}
                        Err(e) => failures.push(format!("{op:?} k={k}: process {i}, get {}: {e}", key(j))),
                    }
                }
                let sync = i % 2 == 1;
                let mut b = shaledb::WriteBatch::new();
                b.put(key(i), value(i));
                if db.write_opt(&WriteOptions { sync, ..WriteOptions::default() }, &b).is_ok() {
                    acked.push((i, sync));
                }
                let _ = db.close();
            }
            let fired = fs.faults_fired() > 0;
            fs.clear_faults();
            for power_loss in [false, true] {
                let copy = fs.deep_clone();
                if power_loss {
                    copy.power_loss(PowerLoss::DropUnsynced, k);
                }
                let db = match open_on(&copy, &short_run_options(&copy)) {
                    Ok(db) => db,
                    Err(e) => {
                        failures.push(format!("{op:?} k={k} power_loss={power_loss}: reopen failed: {e}"));
                        continue;
                    }
                };
                let present: Vec<bool> =
                    acked.iter().map(|&(j, _)| db.get(key(j)).ok().flatten() == Some(value(j).into_bytes())).collect();
                let must =
                    if power_loss { acked.iter().rposition(|&(_, s)| s).map_or(0, |p| p + 1) } else { acked.len() };
                let kept = present.iter().take_while(|&&p| p).count();
                if kept < must || present[kept..].iter().any(|&p| p) {
                    failures.push(format!(
                        "{op:?} k={k} power_loss={power_loss}: acknowledged {acked:?}, present {present:?}"
                    ));
                }
            }
            if !fired {
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// One write of the chain test: a batch across the families, as `(family, key, value)` (`None`: a delete).
type ChainWrite = Vec<(usize, String, Option<String>)>;

/// The state after `writes`, as (family, key) -> value.
fn chain_state(writes: &[ChainWrite]) -> std::collections::BTreeMap<(usize, String), String> {
    let mut m = std::collections::BTreeMap::new();
    for w in writes {
        for (f, k, v) in w {
            match v {
                Some(v) => m.insert((*f, k.clone()), v.clone()),
                None => m.remove(&(*f, k.clone())),
            };
        }
    }
    m
}

/// The chain test's database: three families, the recovery options on or off.
fn chain_open(fs: &MemFs, keep: bool) -> (Db, Vec<shaledb::ColumnFamily>) {
    let o = Options {
        avoid_flush_during_recovery: keep,
        avoid_flush_during_shutdown: keep,
        write_buffer_size: 4096,
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    let descs = ["a", "b"].iter().map(|n| shaledb::ColumnFamilyDescriptor::new(*n, o.clone())).collect();
    let db = Db::open_with_column_families(crate::DB, o, descs).unwrap_or_else(|e| panic!("open: {e}"));
    let handles = vec![db.default_column_family(), db.column_family("a").unwrap(), db.column_family("b").unwrap()];
    (db, handles)
}

fn chain_read(db: &Db, handles: &[shaledb::ColumnFamily]) -> std::collections::BTreeMap<(usize, String), String> {
    let mut m = std::collections::BTreeMap::new();
    for (f, h) in handles.iter().enumerate() {
        for entry in db.iter_cf(h) {
            let (k, v) = entry.unwrap_or_else(|e| panic!("read: {e}"));
            m.insert((f, String::from_utf8(k).unwrap()), String::from_utf8(v).unwrap());
        }
    }
    m
}

/// The randomized form of the tests above, which found durability bug G (docs/durability.md): chains of short
/// runs over three column families with 4 KiB memtables, each run opened with `avoid_flush_during_recovery`
/// and `avoid_flush_during_shutdown` on (four runs in five) or off, writing batches across the families (some
/// synced) with flushes of one family now and then, and ending in a clean close, a kill or a power loss that
/// drops unsynced data. After each end the database must hold every acknowledged write (close, kill), or the
/// state after a prefix of them that keeps every synced one (power loss: no hole, batches whole). Sized by
/// `SHALEDB_TORTURE_BUDGET` (10 chains at 1); `SHALEDB_TEST_SEED` replays one.
#[test]
fn random_chains_of_short_runs_keep_every_acknowledged_write() {
    use rand::Rng;
    watch_background_panics();
    let base = shaledb_testkit::seed_from_env(0x5407_C4A1);
    for chain in 0..10 * crate::budget() {
        let seed = base.wrapping_add(chain);
        let mut r = shaledb_testkit::rng(seed);
        let mut fs = MemFs::new();
        let mut acked: Vec<ChainWrite> = Vec::new();
        let mut synced = 0usize;
        let mut n = 0u64;
        for run in 0..6 {
            let keep = r.gen_bool(0.8);
            let (db, handles) = chain_open(&fs, keep);
            assert_eq!(chain_read(&db, &handles), chain_state(&acked), "seed {seed:#x} run {run}: at open");
            for _ in 0..r.gen_range(1..40) {
                let mut batch = shaledb::WriteBatch::new();
                let mut w = ChainWrite::new();
                for _ in 0..r.gen_range(1..4) {
                    let f = r.gen_range(0..3usize);
                    let k = format!("k{:02}", r.gen_range(0..20));
                    n += 1;
                    if r.gen_bool(0.2) {
                        batch.delete_cf(&handles[f], &k);
                        w.push((f, k, None));
                    } else {
                        let v = format!("v{n}-{}", "x".repeat(r.gen_range(0..400)));
                        batch.put_cf(&handles[f], &k, &v);
                        w.push((f, k, Some(v)));
                    }
                }
                let sync = r.gen_bool(0.1);
                db.write_opt(&WriteOptions { sync, ..WriteOptions::default() }, &batch).unwrap();
                acked.push(w);
                if sync {
                    synced = acked.len();
                }
                if r.gen_bool(0.05) {
                    db.flush_cf(&handles[r.gen_range(0..3)]).unwrap();
                }
            }
            match r.gen_range(0..3) {
                0 => {
                    drop(handles);
                    db.close().unwrap();
                    synced = acked.len();
                }
                1 => {
                    let killed = fs.deep_clone();
                    drop(handles);
                    drop(db);
                    fs = killed;
                    // A kill keeps what was written to the files, synced or not.
                    synced = acked.len();
                }
                _ => {
                    let crashed = fs.deep_clone();
                    drop(handles);
                    drop(db);
                    crashed.power_loss(PowerLoss::DropUnsynced, seed ^ run);
                    let (db, handles) = chain_open(&crashed, keep);
                    let got = chain_read(&db, &handles);
                    let kept = (synced..=acked.len()).rev().find(|&p| chain_state(&acked[..p]) == got);
                    let Some(kept) = kept else {
                        panic!(
                            "seed {seed:#x} run {run}: after a power loss the state is no prefix of the {} \
                             acknowledged writes keeping the {synced} synced ones",
                            acked.len()
                        );
                    };
                    acked.truncate(kept);
                    drop(handles);
                    db.close().unwrap();
                    fs = crashed;
                    synced = acked.len();
                }
            }
        }
        let (db, handles) = chain_open(&fs, false);
        assert_eq!(chain_read(&db, &handles), chain_state(&acked), "seed {seed:#x}: at the end");
    }
    crate::assert_no_background_panics();
}

/// `max_total_wal_size` counts the WALs an open kept live for a kept memtable: a family whose kept memtable pins
/// more WAL bytes than the limit is switched and flushed at the next write (to any family), as it would be had
/// this process written those WALs, and the kept WALs are then deleted. (Before, only the WALs this process
/// switched out were counted, so kept ones could pin any number of bytes until the memtable filled.)
#[test]
fn wals_kept_at_open_count_toward_max_total_wal_size() {
    watch_background_panics();
    let fs = MemFs::new();
    let opts = Options { max_total_wal_size: 64 << 10, write_buffer_size: 4 << 20, ..short_run_options(&fs) };
    let open = || {
        let descs = vec![shaledb::ColumnFamilyDescriptor::new("b", opts.clone())];
        let db = Db::open_with_column_families(crate::DB, opts.clone(), descs).unwrap();
        let b = db.column_family("b").unwrap();
        (db, b)
    };
    let (db, b) = open();
    for i in 0..100 {
        db.put(key(i), "v".repeat(1000)).unwrap();
    }
    drop(b);
    db.close().unwrap();
    assert!(names(&fs, ".sst").is_empty(), "{:?}", fs.file_names(db_path()));

    // The open keeps the default family's memtable and its 100 KB WAL; a write to the other family sees more
    // live WAL bytes than the limit and switches the default family, whose flush lets that WAL go.
    let (db, b) = open();
    assert!(names(&fs, ".sst").is_empty(), "the open flushed: {:?}", fs.file_names(db_path()));
    db.put_cf(&b, "x", "y").unwrap();
    db.wait_for_compaction().unwrap();
    assert!(!names(&fs, ".sst").is_empty(), "the kept memtable was not flushed: {:?}", fs.file_names(db_path()));
    let wal_bytes: u64 =
        names(&fs, ".log").iter().map(|n| fs.read_file(&db_path().join(n)).map_or(0, |d| d.len() as u64)).sum();
    assert!(wal_bytes < 64 << 10, "{wal_bytes} bytes of WALs still live: {:?}", fs.file_names(db_path()));
    for i in 0..100 {
        assert_eq!(db.get(key(i)).unwrap().map(|v| v.len()), Some(1000), "{}", key(i));
    }
    assert_eq!(db.get_cf(&b, "x").unwrap().as_deref(), Some(&b"y"[..]));
}
