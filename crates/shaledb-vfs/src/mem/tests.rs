use super::*;
use crate::PosixFs;

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

/// A MemFs with directory `/db` made.
fn fs_with_db() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(&p("/db")).unwrap();
    fs
}

fn write_synced(fs: &MemFs, path: &Path, data: &[u8]) {
    let mut w = fs.create(path).unwrap();
    w.append(data).unwrap();
    w.sync().unwrap();
}

// The scenarios of the POSIX tests, run against both implementations: MemFs must behave as the OS does.

fn scenario_write_read_rename_list(fs: &dyn Fs, dir: &Path) {
    let a = dir.join("a");
    let mut w = fs.create(&a).unwrap();
    w.append(b"hello ").unwrap();
    w.append(b"world").unwrap();
    assert_eq!(w.len(), 11);
    w.sync().unwrap();
    drop(w);
    assert_eq!(fs.read_all(&a).unwrap(), b"hello world");
    assert_eq!(fs.file_size(&a).unwrap(), 11);
    let b = dir.join("b");
    fs.rename(&a, &b).unwrap();
    fs.sync_dir(dir).unwrap();
    assert!(!fs.exists(&a));
    assert!(fs.exists(&b));
    assert_eq!(fs.list(dir).unwrap(), vec!["b".to_string()]);
    let r = fs.open(&b, ReadHints::default()).unwrap();
    assert_eq!(r.len(), 11);
    let mut buf = [0u8; 5];
    r.read_exact_at(&mut buf, 6).unwrap();
    assert_eq!(&buf, b"world");
    let err = r.read_exact_at(&mut buf, 9).unwrap_err();
    assert!(err.is_io());
    assert!(r.read_exact_at(&mut buf, u64::MAX).is_err());
    fs.remove(&b).unwrap();
    assert!(fs.list(dir).unwrap().is_empty());
    assert!(fs.remove(&b).unwrap_err().is_io());
}

fn scenario_lock(fs: &dyn Fs, dir: &Path) {
    let lock = dir.join("LOCK");
    let l = fs.lock(&lock).unwrap();
    assert!(fs.exists(&lock), "lock creates the file");
    assert!(fs.lock(&lock).err().unwrap().is_busy());
    drop(l);
    fs.lock(&lock).unwrap();
}

fn scenario_missing_paths(fs: &dyn Fs, dir: &Path) {
    let missing = dir.join("nonexistent").join("x");
    let err = fs.open(&missing, ReadHints::default()).err().unwrap();
    assert!(err.is_io());
    assert!(err.to_string().contains("nonexistent"));
    assert!(fs.create(&missing).is_err(), "parent directory missing");
    assert!(fs.list(&dir.join("nonexistent")).is_err());
    assert!(fs.file_size(&missing).is_err());
    assert!(!fs.exists(&missing));
    fs.create_dir_all(&dir.join("nonexistent")).unwrap();
    drop(fs.create(&missing).unwrap());
    assert!(fs.exists(&missing));
    assert_eq!(fs.list(dir).unwrap(), vec!["nonexistent".to_string()]);
}

fn scenario_rename_replaces(fs: &dyn Fs, dir: &Path) {
    let (from, to) = (dir.join("CURRENT.tmp"), dir.join("CURRENT"));
    for (path, data) in [(&to, &b"old"[..]), (&from, &b"new"[..])] {
        let mut w = fs.create(path).unwrap();
        w.append(data).unwrap();
        w.flush().unwrap();
    }
    fs.rename(&from, &to).unwrap();
    assert_eq!(fs.read_all(&to).unwrap(), b"new");
    assert_eq!(fs.list(dir).unwrap(), vec!["CURRENT".to_string()]);
    // Re-creating truncates.
    drop(fs.create(&to).unwrap());
    assert_eq!(fs.file_size(&to).unwrap(), 0);
}

fn scenario_open_append(fs: &dyn Fs, dir: &Path) {
    let f = dir.join("LOG");
    assert!(fs.open_append(&f).err().unwrap().is_io(), "a missing file is not created");
    assert!(!fs.exists(&f));
    let mut w = fs.create(&f).unwrap();
    w.append(b"one\n").unwrap();
    w.sync().unwrap();
    drop(w);
    let mut w = fs.open_append(&f).unwrap();
    assert_eq!(w.len(), 4, "len starts at the file's size");
    w.append(b"two\n").unwrap();
    assert_eq!(w.len(), 8);
    w.sync().unwrap();
    drop(w);
    assert_eq!(fs.read_all(&f).unwrap(), b"one\ntwo\n");
}

#[test]
fn posix_scenarios_hold_for_both_implementations() {
    type Scenario = fn(&dyn Fs, &Path);
    let scenarios: [Scenario; 5] = [
        scenario_write_read_rename_list,
        scenario_lock,
        scenario_missing_paths,
        scenario_rename_replaces,
        scenario_open_append,
    ];
    for scenario in scenarios {
        let dir = tempfile::tempdir().unwrap();
        scenario(&PosixFs::new(), dir.path());
        let mem = fs_with_db();
        scenario(&mem, Path::new("/db"));
    }
}

#[test]
fn a_sync_through_open_append_makes_what_another_writer_left_durable() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/wal")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    w.append(b"unsynced by its writer").unwrap();
    w.flush().unwrap();
    drop(w);
    fs.kill_process();
    let mut again = fs.open_append(&p("/db/wal")).unwrap();
    again.sync().unwrap();
    drop(again);
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.read_file(&p("/db/wal")).unwrap(), b"unsynced by its writer");
}

#[test]
fn unflushed_appends_are_lost_at_kill_flushed_ones_survive() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/log")).unwrap();
    w.append(b"flushed").unwrap();
    w.flush().unwrap();
    w.append(b"buffered").unwrap();
    assert_eq!(fs.read_file(&p("/db/log")).unwrap(), b"flushed");
    fs.kill_process();
    assert_eq!(fs.read_file(&p("/db/log")).unwrap(), b"flushed");
    assert_eq!(fs.file_names(&p("/db")), vec!["log".to_string()], "the OS namespace survives a kill");
}

#[test]
fn dropping_a_writer_does_not_flush() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/f")).unwrap();
    w.append(b"lost").unwrap();
    drop(w);
    assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"");
}

#[test]
fn power_loss_keeps_exactly_the_synced_prefix() {
    let fs = fs_with_db();
    fs.sync_dir(&p("/db")).unwrap();
    let mut w = fs.create(&p("/db/log")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    w.append(b"synced;").unwrap();
    w.sync().unwrap();
    w.append(b"flushed;").unwrap();
    w.flush().unwrap();
    w.append(b"buffered").unwrap();
    fs.power_loss(PowerLoss::DropUnsynced, 1);
    assert_eq!(fs.read_file(&p("/db/log")).unwrap(), b"synced;");
}

#[test]
fn sync_handle_makes_durable_what_was_flushed_before_its_sync() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/log")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    w.append(b"flushed;").unwrap();
    w.flush().unwrap();
    let h = w.sync_handle().unwrap();
    w.append(b"buffered;").unwrap();
    let syncs = fs.op_count(FsOp::Sync);
    h.sync().unwrap();
    assert_eq!(fs.op_count(FsOp::Sync), syncs + 1, "counted as a sync");
    // Flushed after that sync: not covered until the handle syncs again.
    w.flush().unwrap();
    let before_second = fs.deep_clone();
    h.sync().unwrap();
    before_second.power_loss(PowerLoss::DropUnsynced, 1);
    assert_eq!(before_second.read_file(&p("/db/log")).unwrap(), b"flushed;");
    // The handle outlives its writer and keeps the unlinked file alive, as a descriptor does.
    w.append(b"lost").unwrap();
    drop(w);
    fs.remove(&p("/db/log")).unwrap();
    h.sync().unwrap();
    let kept = fs.deep_clone();
    kept.power_loss(PowerLoss::DropUnsynced, 2);
    assert_eq!(kept.read_file(&p("/db/log")).unwrap(), b"flushed;buffered;", "removal not synced: durable name");
}

#[test]
fn sync_handle_faults_fire_as_for_sync_and_die_with_the_process() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/log")).unwrap();
    w.append(b"x").unwrap();
    w.flush().unwrap();
    let h = w.sync_handle().unwrap();
    fs.set_faults(FaultPlan::once(FsOp::Sync, 1, FaultError::Eio));
    let e = h.sync().unwrap_err();
    assert!(e.is_io() && !e.is_no_space(), "{e}");
    fs.set_faults(FaultPlan::from_nth(FsOp::Sync, 1, FaultError::Enospc).on_paths_containing("log"));
    assert!(h.sync().unwrap_err().is_no_space());
    assert!(w.sync().unwrap_err().is_no_space(), "the writer's own sync meets the same plan");
    fs.clear_faults();
    h.sync().unwrap();
    fs.kill_process();
    assert!(h.sync().is_err(), "a handle from before a crash is dead");
    fs.power_loss(PowerLoss::DropUnsynced, 3);
    assert_eq!(fs.read_file(&p("/db/log")), None, "the file's name was never synced");
}

#[test]
fn create_is_durable_only_after_dir_sync() {
    let fs = fs_with_db();
    write_synced(&fs, &p("/db/a"), b"data");
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.read_file(&p("/db/a")), None, "file synced, directory not");

    write_synced(&fs, &p("/db/a"), b"data");
    fs.sync_dir(&p("/db")).unwrap();
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.read_file(&p("/db/a")).unwrap(), b"data");
}

#[test]
fn rename_is_durable_only_after_dir_sync() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/CURRENT"), b"MANIFEST-1");
    write_synced(&fs, &p("/db/CURRENT.tmp"), b"MANIFEST-2");
    fs.rename(&p("/db/CURRENT.tmp"), &p("/db/CURRENT")).unwrap();
    assert_eq!(fs.read_file(&p("/db/CURRENT")).unwrap(), b"MANIFEST-2");
    let snapshot = fs.deep_clone();
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.read_file(&p("/db/CURRENT")).unwrap(), b"MANIFEST-1");
    assert_eq!(fs.file_names(&p("/db")), vec!["CURRENT".to_string()]);

    snapshot.sync_dir(&p("/db")).unwrap();
    snapshot.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(snapshot.read_file(&p("/db/CURRENT")).unwrap(), b"MANIFEST-2");
    assert_eq!(snapshot.file_names(&p("/db")), vec!["CURRENT".to_string()]);
}

#[test]
fn rename_across_directories_needs_both_synced() {
    let fs = fs_with_db();
    fs.create_dir_all(&p("/db/archive")).unwrap();
    fs.write_file(&p("/db/old.log"), b"x");
    fs.rename(&p("/db/old.log"), &p("/db/archive/old.log")).unwrap();
    fs.sync_dir(&p("/db/archive")).unwrap();
    let only_target = fs.deep_clone();
    only_target.power_loss(PowerLoss::DropUnsynced, 0);
    // Both names exist: the source directory still holds its entry. Hard links are what a real FS shows.
    assert_eq!(only_target.read_file(&p("/db/old.log")).unwrap(), b"x");
    assert_eq!(only_target.read_file(&p("/db/archive/old.log")).unwrap(), b"x");
    fs.sync_dir(&p("/db")).unwrap();
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.read_file(&p("/db/old.log")), None);
    assert_eq!(fs.read_file(&p("/db/archive/old.log")).unwrap(), b"x");
}

#[test]
fn remove_is_durable_only_after_dir_sync() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/000001.sst"), b"table");
    fs.remove(&p("/db/000001.sst")).unwrap();
    assert!(!fs.exists(&p("/db/000001.sst")));
    let unsynced = fs.deep_clone();
    unsynced.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(unsynced.read_file(&p("/db/000001.sst")).unwrap(), b"table", "resurrected");

    fs.sync_dir(&p("/db")).unwrap();
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert!(!fs.exists(&p("/db/000001.sst")));
}

#[test]
fn removed_file_stays_readable_through_open_handle() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/t"), b"abc");
    let r = fs.open(&p("/db/t"), ReadHints::default()).unwrap();
    fs.remove(&p("/db/t")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    let mut buf = [0u8; 3];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"abc");
    drop(r);
    assert!(fs.state.lock().inodes.is_empty(), "unlinked inode freed with its last handle");
}

#[test]
fn recreated_file_reverts_to_old_contents_until_synced() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/OPTIONS"), b"old options");
    let mut w = fs.create(&p("/db/OPTIONS")).unwrap();
    w.append(b"new").unwrap();
    w.flush().unwrap();
    let before_sync = fs.deep_clone();
    w.sync().unwrap();
    before_sync.power_loss(PowerLoss::KeepRandomPages { keep_probability: 1.0 }, 3);
    assert_eq!(before_sync.read_file(&p("/db/OPTIONS")).unwrap(), b"old options");
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.read_file(&p("/db/OPTIONS")).unwrap(), b"new");
}

/// A durable file with one synced page and `pages` unsynced ones, page i filled with byte `i + 1`.
fn torn_candidate(pages: usize) -> MemFs {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/wal")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    w.append(&[0xAA; PAGE]).unwrap();
    w.sync().unwrap();
    for i in 0..pages {
        w.append(&[i as u8 + 1; PAGE]).unwrap();
    }
    w.flush().unwrap();
    fs
}

fn after_loss(fs: &MemFs, mode: PowerLoss, seed: u64) -> Vec<u8> {
    let copy = fs.deep_clone();
    copy.power_loss(mode, seed);
    copy.read_file(&p("/db/wal")).unwrap()
}

#[test]
fn random_page_keep_is_seeded_and_replayable() {
    let fs = torn_candidate(16);
    let mode = PowerLoss::KeepRandomPages { keep_probability: 0.5 };
    let outcomes: Vec<Vec<u8>> = (0..20).map(|seed| after_loss(&fs, mode, seed)).collect();
    for (seed, outcome) in outcomes.iter().enumerate() {
        assert_eq!(&after_loss(&fs, mode, seed as u64), outcome, "seed {seed} replays");
        assert_eq!(outcome.get(..PAGE), Some(&[0xAA; PAGE][..]), "synced page always survives");
        assert_eq!(outcome.len() % PAGE, 0);
        for (i, page) in outcome.chunks(PAGE).enumerate().skip(1) {
            assert!(page == [i as u8; PAGE] || page == [0; PAGE], "page {i} is either kept or a hole");
        }
    }
    assert!(outcomes.windows(2).any(|w| w[0] != w[1]), "different seeds give different tears");
    // A torn tail: some outcome keeps a later page while an earlier one is lost.
    assert!(outcomes.iter().any(|o| o.chunks(PAGE).skip(1).any(|pg| pg == [0; PAGE])));
    assert_eq!(after_loss(&fs, PowerLoss::KeepRandomPages { keep_probability: 0.0 }, 9).len(), PAGE);
    assert_eq!(after_loss(&fs, PowerLoss::KeepRandomPages { keep_probability: 1.0 }, 9).len(), 17 * PAGE);
}

#[test]
fn random_page_keep_splits_at_page_boundaries_not_at_sync_point() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/wal")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    w.append(&[1; 100]).unwrap();
    w.sync().unwrap();
    w.append(&[2; PAGE]).unwrap();
    w.flush().unwrap();
    let lens: BTreeSet<usize> =
        (0..40).map(|seed| after_loss(&fs, PowerLoss::KeepRandomPages { keep_probability: 0.5 }, seed).len()).collect();
    // Pages [100, 4096) and [4096, 4196): the file ends at 100, 4096 or 4196.
    assert!(lens.is_subset(&BTreeSet::from([100, PAGE, PAGE + 100])));
    assert!(lens.len() >= 2);
}

#[test]
fn garble_replaces_the_unsynced_tail() {
    let fs = torn_candidate(2);
    let out = after_loss(&fs, PowerLoss::GarbleUnsynced, 5);
    assert_eq!(out.len(), 3 * PAGE);
    assert_eq!(&out[..PAGE], &[0xAA; PAGE][..]);
    assert_ne!(&out[PAGE..2 * PAGE], &[1; PAGE][..]);
    assert_eq!(out, after_loss(&fs, PowerLoss::GarbleUnsynced, 5));
}

#[test]
fn nth_fault_fires_exactly_once() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/f")).unwrap();
    fs.set_faults(FaultPlan::once(FsOp::Write, 3, FaultError::Eio));
    for chunk in [b"1", b"2"] {
        w.append(chunk).unwrap();
        w.flush().unwrap();
    }
    w.append(b"3").unwrap();
    let err = w.flush().unwrap_err();
    assert!(err.is_io() && !err.is_no_space());
    assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"12", "a failed write appends nothing");
    w.flush().unwrap();
    w.append(b"4").unwrap();
    w.flush().unwrap();
    assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"1234");
    assert_eq!(fs.op_count(FsOp::Write), 5);
}

#[test]
fn persistent_fault_fails_every_later_op() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/f"), b"abc");
    let r = fs.open(&p("/db/f"), ReadHints::default()).unwrap();
    let mut buf = [0u8; 1];
    r.read_exact_at(&mut buf, 0).unwrap();
    // Counting starts when the plan is set.
    fs.set_faults(FaultPlan::from_nth(FsOp::Read, 2, FaultError::Eio));
    r.read_exact_at(&mut buf, 0).unwrap();
    for _ in 0..3 {
        assert!(r.read_exact_at(&mut buf, 0).is_err());
    }
    fs.clear_faults();
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(fs.op_count(FsOp::Read), 6);
}

#[test]
fn enospc_shows_as_no_space() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/f")).unwrap();
    w.append(b"x").unwrap();
    fs.set_faults(FaultPlan::from_nth(FsOp::Write, 1, FaultError::Enospc));
    let err = w.sync().unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert_eq!(fs.op_count(FsOp::Sync), 0, "sync stopped at its flush");
}

#[test]
fn failed_sync_makes_nothing_durable() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/f")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    w.append(b"x").unwrap();
    fs.set_faults(FaultPlan::once(FsOp::Sync, 1, FaultError::Eio));
    assert!(w.sync().is_err());
    assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"x", "the write reached the OS");
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"");
}

#[test]
fn failed_namespace_ops_change_nothing() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/a"), b"a");
    fs.set_faults(FaultPlan::from_nth(FsOp::Rename, 1, FaultError::Eio));
    assert!(fs.rename(&p("/db/a"), &p("/db/b")).is_err());
    fs.set_faults(FaultPlan::from_nth(FsOp::Remove, 1, FaultError::Eio));
    assert!(fs.remove(&p("/db/a")).is_err());
    fs.set_faults(FaultPlan::from_nth(FsOp::Create, 1, FaultError::Enospc));
    assert!(fs.create(&p("/db/c")).err().unwrap().is_no_space());
    // A hard link is a create.
    assert!(fs.hard_link(&p("/db/a"), &p("/db/d")).err().unwrap().is_no_space());
    fs.set_faults(FaultPlan::from_nth(FsOp::Open, 1, FaultError::Eio));
    assert!(fs.open(&p("/db/a"), ReadHints::default()).is_err());
    assert!(fs.read_all(&p("/db/a")).is_err());
    assert_eq!(fs.file_names(&p("/db")), vec!["a".to_string()]);

    fs.clear_faults();
    fs.rename(&p("/db/a"), &p("/db/b")).unwrap();
    fs.set_faults(FaultPlan::once(FsOp::SyncDir, 1, FaultError::Eio));
    assert!(fs.sync_dir(&p("/db")).is_err());
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.file_names(&p("/db")), vec!["a".to_string()], "failed dir sync made nothing durable");
}

#[test]
fn op_count_counts_each_class() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/f")).unwrap();
    w.flush().unwrap(); // empty: no write(2)
    w.append(b"x").unwrap();
    w.sync().unwrap();
    w.sync().unwrap();
    drop(w);
    fs.sync_dir(&p("/db")).unwrap();
    fs.rename(&p("/db/f"), &p("/db/g")).unwrap();
    fs.read_all(&p("/db/g")).unwrap();
    fs.remove(&p("/db/g")).unwrap();
    let counts: Vec<u64> = FsOp::ALL.iter().map(|op| fs.op_count(*op)).collect();
    // Read, Write, Sync, Create, Rename, Remove, SyncDir, Open
    assert_eq!(counts, vec![1, 1, 2, 1, 1, 1, 1, 1]);
}

#[test]
fn handles_are_dead_after_kill() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/r"), b"abc");
    let r = fs.open(&p("/db/r"), ReadHints::default()).unwrap();
    let mut w = fs.create(&p("/db/w")).unwrap();
    w.append(b"x").unwrap();
    fs.kill_process();
    let mut buf = [0u8; 1];
    assert!(r.read_exact_at(&mut buf, 0).unwrap_err().is_io());
    assert!(w.append(b"y").unwrap_err().is_io());
    assert!(w.flush().unwrap_err().is_io());
    assert!(w.sync().unwrap_err().is_io());
    assert_eq!(fs.read_file(&p("/db/w")).unwrap(), b"");
    assert_eq!(fs.op_count(FsOp::Read), 0, "calls on dead handles are not counted");
    // The new "process" works normally.
    let r2 = fs.open(&p("/db/r"), ReadHints::default()).unwrap();
    r2.read_exact_at(&mut buf, 2).unwrap();
    assert_eq!(&buf, b"c");
}

#[test]
fn handles_are_dead_after_power_loss() {
    let fs = fs_with_db();
    let mut w = fs.create(&p("/db/w")).unwrap();
    fs.power_loss(PowerLoss::GarbleUnsynced, 7);
    assert!(w.append(b"y").is_err());
    assert!(w.sync().is_err());
}

#[test]
fn crash_releases_locks_and_stale_lock_drop_keeps_new_one() {
    for crash in [|fs: &MemFs| fs.kill_process(), |fs: &MemFs| fs.power_loss(PowerLoss::DropUnsynced, 0)] {
        let fs = fs_with_db();
        let stale = fs.lock(&p("/db/LOCK")).unwrap();
        crash(&fs);
        let fresh = fs.lock(&p("/db/LOCK")).unwrap();
        drop(stale);
        assert!(fs.lock(&p("/db/LOCK")).err().unwrap().is_busy());
        drop(fresh);
        fs.lock(&p("/db/LOCK")).unwrap();
    }
}

#[test]
fn deep_clone_is_independent() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/a"), b"1");
    let _lock = fs.lock(&p("/db/LOCK")).unwrap();
    fs.set_faults(FaultPlan::from_nth(FsOp::Create, 1, FaultError::Eio));
    let copy = fs.deep_clone();
    copy.write_file(&p("/db/a"), b"2");
    drop(copy.create(&p("/db/b")).unwrap()); // no fault plan in the copy
    copy.lock(&p("/db/LOCK")).unwrap(); // no locks in the copy
    assert_eq!(fs.read_file(&p("/db/a")).unwrap(), b"1");
    assert!(!fs.exists(&p("/db/b")));
    assert!(fs.create(&p("/db/b")).is_err());
}

#[test]
fn write_file_is_durable_at_once() {
    let fs = MemFs::new();
    fs.write_file(&p("/x/y/z"), b"bytes");
    assert!(fs.exists(&p("/x/y")));
    fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(fs.read_file(&p("/x/y/z")).unwrap(), b"bytes");
    assert_eq!(fs.list(&p("/x")).unwrap(), vec!["y".to_string()]);
    assert_eq!(fs.file_names(&p("/x")), Vec::<String>::new());
}

#[test]
fn paths_are_normalised() {
    let fs = fs_with_db();
    fs.write_file(&p("/db/./a"), b"1");
    assert_eq!(fs.read_file(&p("/db//a")).unwrap(), b"1");
    assert_eq!(fs.list(&p("/db/")).unwrap(), vec!["a".to_string()]);
}

#[test]
fn mem_fs_works_as_shared_dyn_fs() {
    let fs = fs_with_db();
    let engine: Arc<dyn Fs> = Arc::new(fs.clone());
    let mut w = engine.create(&p("/db/f")).unwrap();
    w.append(b"via engine").unwrap();
    w.flush().unwrap();
    assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"via engine");
    assert!(format!("{fs:?}").contains("MemFs"));
}

#[test]
fn record_before_keeps_the_state_just_before_each_selected_op() {
    let fs = fs_with_db();
    fs.record_before(|op, path, _| op == FsOp::Sync && path.ends_with("log"));
    let mut w = fs.create(&p("/db/log")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    fs.set_tag(1);
    w.append(b"one;").unwrap();
    w.sync().unwrap();
    fs.set_tag(2);
    w.append(b"two;").unwrap();
    w.sync().unwrap();
    let rec = fs.stop_recording();
    assert_eq!(rec.len(), 2);
    assert_eq!((rec[0].op, rec[0].tag, rec[1].tag), (FsOp::Sync, 1, 2));
    assert_eq!(rec[0].path, p("/db/log"));
    // Before the first sync: the write reached the OS, nothing is durable yet.
    assert_eq!(rec[0].fs.read_file(&p("/db/log")).unwrap(), b"one;");
    rec[0].fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(rec[0].fs.read_file(&p("/db/log")).unwrap(), b"");
    rec[1].fs.power_loss(PowerLoss::DropUnsynced, 0);
    assert_eq!(rec[1].fs.read_file(&p("/db/log")).unwrap(), b"one;");
    // Indexes count every operation since recording started: create, sync_dir, write, sync, write, sync.
    assert_eq!((rec[0].index, rec[1].index), (4, 6));
    assert!(fs.stop_recording().is_empty(), "stopped");
    w.sync().unwrap();
}

#[test]
fn recorded_copies_are_independent_and_unlocked() {
    let fs = fs_with_db();
    let _lock = fs.lock(&p("/db/LOCK")).unwrap();
    fs.record_before(|op, _, _| op.is_mutation());
    fs.write_file(&p("/db/a"), b"1");
    fs.remove(&p("/db/a")).unwrap();
    let rec = fs.stop_recording();
    assert_eq!(rec.len(), 1, "write_file is a test helper, not an operation");
    assert_eq!(rec[0].op, FsOp::Remove);
    assert_eq!(rec[0].fs.read_file(&p("/db/a")).unwrap(), b"1");
    rec[0].fs.lock(&p("/db/LOCK")).unwrap();
    assert!(!fs.exists(&p("/db/a")));
    assert!(FsOp::ALL.iter().filter(|op| op.is_mutation()).count() == 6);
}

#[test]
fn fault_restricted_to_a_path_counts_only_matching_ops() {
    let fs = fs_with_db();
    fs.set_faults(FaultPlan::once(FsOp::Sync, 2, FaultError::Eio).on_paths_containing("MANIFEST-"));
    let mut log = fs.create(&p("/db/000003.log")).unwrap();
    let mut manifest = fs.create(&p("/db/MANIFEST-000002")).unwrap();
    for _ in 0..3 {
        log.sync().unwrap();
    }
    manifest.sync().unwrap();
    log.sync().unwrap();
    assert_eq!(fs.faults_fired(), 0);
    let err = manifest.sync().unwrap_err();
    assert!(err.to_string().contains("MANIFEST-000002"), "{err}");
    manifest.sync().unwrap();
    assert_eq!(fs.faults_fired(), 1);
}

#[test]
fn hard_link_shares_contents_and_needs_a_directory_sync_to_be_durable() {
    let fs = fs_with_db();
    write_synced(&fs, &p("/db/000005.sst"), b"table");
    fs.sync_dir(&p("/db")).unwrap();
    fs.create_dir_all(&p("/ckpt")).unwrap();
    fs.hard_link(&p("/db/000005.sst"), &p("/ckpt/000005.sst")).unwrap();
    assert_eq!(fs.read_file(&p("/ckpt/000005.sst")).unwrap(), b"table");
    // Removing the first name leaves the second readable.
    fs.remove(&p("/db/000005.sst")).unwrap();
    assert_eq!(fs.read_file(&p("/ckpt/000005.sst")).unwrap(), b"table");
    // An existing target or a missing source is an error naming the path.
    fs.write_file(&p("/ckpt/x"), b"1");
    let e = fs.hard_link(&p("/ckpt/x"), &p("/ckpt/000005.sst")).unwrap_err();
    assert!(e.to_string().contains("000005.sst"), "{e}");
    assert!(fs.hard_link(&p("/db/missing"), &p("/ckpt/y")).is_err());
    // Not synced: a power loss drops the link.
    fs.power_loss(PowerLoss::DropUnsynced, 1);
    assert!(fs.read_file(&p("/ckpt/000005.sst")).is_none());
}

#[test]
fn directory_rename_moves_its_files_and_is_durable_only_after_the_parent_is_synced() {
    let fs = MemFs::new();
    fs.create_dir_all(&p("/top/stage")).unwrap();
    write_synced(&fs, &p("/top/stage/CURRENT"), b"x");
    fs.sync_dir(&p("/top/stage")).unwrap();
    fs.rename(&p("/top/stage"), &p("/top/final")).unwrap();
    assert_eq!(fs.list(&p("/top")).unwrap(), vec!["final".to_string()]);
    assert_eq!(fs.read_file(&p("/top/final/CURRENT")).unwrap(), b"x");
    assert!(!fs.exists(&p("/top/stage/CURRENT")));
    // Power loss before the parent is synced: the rename is undone.
    let lost = fs.deep_clone();
    lost.power_loss(PowerLoss::DropUnsynced, 1);
    assert_eq!(lost.list(&p("/top")).unwrap(), vec!["stage".to_string()]);
    assert_eq!(lost.read_file(&p("/top/stage/CURRENT")).unwrap(), b"x");
    // After the sync it survives.
    fs.sync_dir(&p("/top")).unwrap();
    fs.power_loss(PowerLoss::DropUnsynced, 1);
    assert_eq!(fs.list(&p("/top")).unwrap(), vec!["final".to_string()]);
    assert_eq!(fs.read_file(&p("/top/final/CURRENT")).unwrap(), b"x");
}

#[test]
fn directory_rename_refuses_a_non_empty_target_and_remove_dir_a_non_empty_directory() {
    let fs = MemFs::new();
    fs.write_file(&p("/a/f"), b"1");
    fs.write_file(&p("/b/g"), b"2");
    let e = fs.rename(&p("/a"), &p("/b")).unwrap_err();
    assert!(e.to_string().contains("/a"), "{e}");
    assert!(fs.rename(&p("/a"), &p("/a/inner")).is_err());
    assert!(fs.remove_dir(&p("/a")).is_err());
    fs.remove(&p("/a/f")).unwrap();
    fs.remove_dir(&p("/a")).unwrap();
    assert!(!fs.exists(&p("/a")));
    assert!(fs.remove_dir(&p("/a")).is_err());
}
