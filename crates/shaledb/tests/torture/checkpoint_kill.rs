//! Checkpoints and backups taken during kill -9 runs on the real file system (D12): a child process (this test
//! binary re-executed) writes keys in order from one thread while its main thread takes checkpoints and
//! backups in a loop, announcing each with the number of writes acknowledged before it; it is killed at a
//! random moment. Then every checkpoint directory that exists must open and hold a prefix of the writes at
//! least as long as its announcement, every finished one must exist, and every backup the reopened backup
//! directory lists must verify and restore the same way. `SHALEDB_CRASH_CYCLES` scales the number of kills.

use rand::Rng;
use shaledb::backup::BackupEngine;
use shaledb::{Db, Options};
use shaledb_testkit::workload::tiny_options;
use shaledb_testkit::{budget_from_env, rng, seed_from_env};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD_VAR: &str = "SHALEDB_CKPT_KILL_CHILD";
const CYCLE_VAR: &str = "SHALEDB_CKPT_KILL_CYCLE";

fn options() -> Options {
    tiny_options(shaledb_vfs::default_fs())
}

fn key(i: u64) -> String {
    format!("w{i:08}")
}

fn value(i: u64) -> String {
    format!("{i}-{}", "v".repeat(60))
}

/// Checks that `db` holds exactly the writes `0..n` for some `n` (no hole, no wrong value) and returns `n`.
fn prefix_len(db: &Db) -> Result<u64, String> {
    let mut n = 0;
    for item in db.iter() {
        let (k, v) = item.map_err(|e| e.to_string())?;
        if k != key(n).as_bytes() || v != value(n).as_bytes() {
            return Err(format!("entry {n} is {:?} = {:?}", String::from_utf8_lossy(&k), String::from_utf8_lossy(&v)));
        }
        n += 1;
    }
    Ok(n)
}

/// The child side: does nothing unless started by [`checkpoints_and_backups_survive_kill_9`].
#[test]
fn checkpoint_kill_child() {
    let Ok(dir) = std::env::var(CHILD_VAR) else { return };
    let cycle = std::env::var(CYCLE_VAR).unwrap_or_default();
    let dir = Path::new(&dir);
    let db = Arc::new(Db::open(dir.join("db"), options()).expect("open"));
    let start = prefix_len(&db).expect("the database holds a prefix of the writes");
    let acked = Arc::new(AtomicU64::new(start));
    {
        let (db, acked) = (db.clone(), acked.clone());
        std::thread::spawn(move || {
            for i in start.. {
                db.put(key(i), value(i)).expect("put");
                acked.store(i + 1, Ordering::Release);
            }
        });
    }
    let mut engine = BackupEngine::open(dir.join("bk")).expect("open the backup directory");
    println!("running");
    for round in 0.. {
        let before = acked.load(Ordering::Acquire);
        if round % 2 == 0 {
            let name = format!("ckpt-{cycle}-{round}");
            println!("begin checkpoint {name} {before}");
            db.create_checkpoint(dir.join(&name)).expect("checkpoint");
            println!("done checkpoint {name}");
        } else {
            let id = engine.list().last().map_or(1, |b| b.id + 1);
            println!("begin backup {id} {before}");
            assert_eq!(engine.create_backup(&db).expect("backup"), id);
            println!("done backup {id}");
        }
    }
}

/// Runs one child until it is killed `run_for` after it starts writing; returns its lines.
fn run_child(dir: &Path, cycle: u64, run_for: Duration) -> Vec<String> {
    let envs = [(CHILD_VAR, dir.display().to_string()), (CYCLE_VAR, cycle.to_string())];
    let (mut child, rx, reader) = crate::spawn_self("checkpoint_kill::checkpoint_kill_child", &envs);
    let mut lines = Vec::new();
    let started = Instant::now();
    let mut kill_at = None;
    loop {
        if kill_at.is_some_and(|t| Instant::now() >= t) || started.elapsed() > Duration::from_secs(60) {
            // SIGKILL: nothing is flushed, synced or cleaned up.
            let _ = child.kill();
            break;
        }
        match rx.recv_timeout(Duration::from_millis(2)) {
            Ok(line) => {
                if line.ends_with("running") && kill_at.is_none() {
                    kill_at = Some(Instant::now() + run_for);
                }
                lines.push(line);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait().expect("wait for the child");
    let _ = reader.join();
    lines.extend(rx.try_iter());
    assert!(!status.success(), "the child ended by itself:\n{}", lines.join("\n"));
    lines
}

fn open_copy(path: &Path) -> Db {
    Db::open(path, Options { create_if_missing: false, ..options() })
        .unwrap_or_else(|e| panic!("{} does not open: {e}", path.display()))
}

#[test]
fn checkpoints_and_backups_survive_kill_9() {
    if std::env::var(CHILD_VAR).is_ok() {
        return;
    }
    let tmp = shaledb_testkit::tempdir();
    let dir = tmp.path();
    let mut r = rng(seed_from_env(0xC4E7_0017));
    let cycles = budget_from_env("SHALEDB_CRASH_CYCLES", 20).div_ceil(4).max(2);
    // Backup id -> writes acknowledged before it began, over every cycle.
    let mut backups_begun: BTreeMap<u64, u64> = BTreeMap::new();
    let mut backups_done = Vec::new();
    let (mut checkpoints_seen, mut backups_checked) = (0, 0);
    for cycle in 0..cycles {
        let lines = run_child(dir, cycle, Duration::from_millis(r.gen_range(50..400)));
        let out = lines.join("\n");
        assert!(lines.iter().any(|l| l.ends_with("running")), "cycle {cycle}: the child never started:\n{out}");
        for line in &lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [.., "begin", "checkpoint", name, before] => {
                    let path = dir.join(name);
                    let done = lines.iter().any(|l| l.ends_with(&format!("done checkpoint {name}")));
                    if !path.exists() {
                        assert!(!done, "cycle {cycle}: {name} finished but does not exist");
                        continue;
                    }
                    let n = prefix_len(&open_copy(&path)).unwrap_or_else(|e| panic!("{name}: {e}"));
                    let before: u64 = before.parse().unwrap();
                    assert!(n >= before, "{name}: holds {n} writes, {before} were acknowledged before it");
                    checkpoints_seen += 1;
                    std::fs::remove_dir_all(&path).unwrap();
                }
                [.., "begin", "backup", id, before] => {
                    backups_begun.insert(id.parse().unwrap(), before.parse().unwrap());
                }
                [.., "done", "backup", id] => backups_done.push(id.parse::<u64>().unwrap()),
                _ => {}
            }
        }
        let engine = BackupEngine::open(dir.join("bk")).expect("reopen the backup directory");
        assert!(engine.corrupt_backups().is_empty(), "{:?}", engine.corrupt_backups());
        let listed: Vec<u64> = engine.list().iter().map(|b| b.id).collect();
        for id in &backups_done {
            assert!(listed.contains(id), "cycle {cycle}: backup {id} finished but is not listed ({listed:?})");
        }
        for id in listed {
            let before = *backups_begun.get(&id).unwrap_or_else(|| panic!("backup {id} was never begun"));
            engine.verify(id).unwrap_or_else(|e| panic!("backup {id}: {e}"));
            let target = dir.join(format!("restored-{cycle}-{id}"));
            engine.restore(id, &target).unwrap_or_else(|e| panic!("backup {id}: {e}"));
            let n = prefix_len(&open_copy(&target)).unwrap_or_else(|e| panic!("backup {id}: {e}"));
            assert!(n >= before, "backup {id}: holds {n} writes, {before} were acknowledged before it");
            std::fs::remove_dir_all(&target).unwrap();
            backups_checked += 1;
        }
    }
    eprintln!(
        "checkpoint kill loop: {cycles} kills, {checkpoints_seen} checkpoints and {backups_checked} restores checked"
    );
    assert!(checkpoints_seen > 0 && backups_checked > 0);
}
