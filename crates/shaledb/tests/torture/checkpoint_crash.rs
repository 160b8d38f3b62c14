//! Checkpoints and backups cut short (D12): a copy of the file system is kept before every mutating operation
//! of one checkpoint and of one backup; each copy is crashed (process kill, power loss) and must show either no
//! checkpoint (no backup listed) or a whole one that opens with every write acknowledged before the call. What
//! the interrupted attempt left is cleaned: the next checkpoint to the same target works, and opening the
//! backup directory removes the partial files.

use crate::{mem_options, open_on};
use shaledb::backup::BackupEngine;
use shaledb::{Db, Fs};
use shaledb_testkit::history::string_append;
use shaledb_testkit::workload::{random_write, read_all, submit, WorkloadConfig};
use shaledb_testkit::{rng, seed_from_env, History, MemFs, Model, PowerLoss, Recorded};
use std::path::Path;
use std::sync::Arc;

/// A database with flushed and unflushed writes (some without the WAL's sync), and its expected state.
fn loaded_db(fs: &MemFs) -> (Db, Model) {
    let db = open_on(fs, &mem_options(fs)).unwrap();
    let mut history = History::new(string_append());
    let mut r = rng(seed_from_env(17));
    let cfg = WorkloadConfig { sync_one_in: 0, ..WorkloadConfig::default() };
    for _ in 0..600 {
        let w = random_write(&mut r, &cfg);
        submit(&db, &w).unwrap();
        history.push(w);
    }
    let expected = history.model_after(history.len());
    (db, expected)
}

/// The recorded copies, each crashed both ways.
fn crashed(recorded: Vec<Recorded>) -> Vec<(String, MemFs)> {
    let mut out = Vec::new();
    for r in recorded {
        let what = format!("before {:?} {} (#{})", r.op, r.path.display(), r.index);
        let power = r.fs.deep_clone();
        power.power_loss(PowerLoss::DropUnsynced, r.index);
        out.push((format!("kill {what}"), r.fs));
        out.push((format!("power loss {what}"), power));
    }
    out
}

fn open_copy(fs: &MemFs, path: &str) -> Db {
    Db::open(path, shaledb::Options { create_if_missing: false, ..mem_options(fs) }).unwrap()
}

#[test]
fn interrupted_checkpoint_leaves_no_half_copy() {
    let fs = MemFs::new();
    let (db, expected) = loaded_db(&fs);
    // Every operation on the staging directory or the target, and the final sync of their parent.
    fs.record_before(|op, path, _| {
        op.is_mutation() && (path.to_string_lossy().starts_with("/ckpt") || path == Path::new("/"))
    });
    db.create_checkpoint("/ckpt").unwrap();
    let recorded = fs.stop_recording();
    // Also one copy after the checkpoint returned: it must be there, whole, after a power loss.
    let done = fs.deep_clone();
    done.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(read_all(&open_copy(&done, "/ckpt")).unwrap(), expected);
    assert!(recorded.len() > 10, "only {} operations recorded", recorded.len());
    let (mut whole, mut absent) = (0, 0);
    for (what, crashed) in crashed(recorded) {
        if crashed.exists(Path::new("/ckpt")) {
            whole += 1;
            let copy = open_copy(&crashed, "/ckpt");
            assert_eq!(read_all(&copy).unwrap(), expected, "{what}: the checkpoint is not whole");
        } else {
            absent += 1;
            // The interrupted attempt does not stand in the way of the next one.
            let source = open_on(&crashed, &mem_options(&crashed)).unwrap_or_else(|e| panic!("{what}: {e}"));
            source.create_checkpoint("/ckpt").unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            drop(source);
            assert_eq!(read_all(&open_copy(&crashed, "/ckpt")).unwrap(), expected, "{what}: retry");
            assert!(!crashed.exists(Path::new("/ckpt.tmp")), "{what}");
        }
    }
    assert!(absent > 0 && whole > 0, "crash points: {absent} without a checkpoint, {whole} with one");
}

#[test]
fn interrupted_backup_is_never_listed_and_is_cleaned_at_the_next_open() {
    let fs = MemFs::new();
    let (db, expected) = loaded_db(&fs);
    let bk = Path::new("/bk");
    let engine_on = |fs: &MemFs| BackupEngine::open_with(bk, Arc::new(fs.clone()));
    let mut engine = engine_on(&fs).unwrap();
    fs.record_before(|op, path, _| op.is_mutation() && path.starts_with("/bk"));
    engine.create_backup(&db).unwrap();
    let recorded = fs.stop_recording();
    drop(engine);
    assert!(recorded.len() > 10, "only {} operations recorded", recorded.len());
    let (mut listed, mut absent) = (0, 0);
    for (what, crashed) in crashed(recorded) {
        let mut engine = engine_on(&crashed).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(engine.corrupt_backups().is_empty(), "{what}: {:?}", engine.corrupt_backups());
        match engine.list().as_slice() {
            [] => {
                absent += 1;
                // Nothing of the interrupted backup is left.
                for sub in ["shared", "private", "meta"] {
                    let left = crashed.list(&bk.join(sub)).unwrap();
                    assert!(left.is_empty(), "{what}: {sub}/ still holds {left:?}");
                }
            }
            [one] => {
                listed += 1;
                engine.verify(one.id).unwrap_or_else(|e| panic!("{what}: {e}"));
                engine.restore(one.id, "/restored").unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(read_all(&open_copy(&crashed, "/restored")).unwrap(), expected, "{what}");
            }
            more => panic!("{what}: {} backups listed", more.len()),
        }
        // A backup after the crash works either way.
        let source = open_on(&crashed, &mem_options(&crashed)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let id = engine.create_backup(&source).unwrap_or_else(|e| panic!("{what}: backup after: {e}"));
        engine.verify(id).unwrap();
    }
    assert!(absent > 0 && listed > 0, "crash points: {absent} without the backup, {listed} with it");
}
