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
