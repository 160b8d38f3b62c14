//! Transactions: RocksDB's documented semantics, case by case, and a concurrent transfer workload whose
//! invariant (the sum of all balances) holds under both disciplines.

use super::*;
use crate::merge;
use std::sync::Arc;
use std::time::Duration;

fn opts() -> Options {
    Options { merge_operator: merge::builtin("uint64add"), ..Options::default() }
}

fn pessimistic() -> (tempfile::TempDir, TransactionDb) {
    let dir = tempfile::tempdir().unwrap();
    let t = TransactionDbOptions {
        transaction_lock_timeout: Some(Duration::from_millis(100)),
        default_lock_timeout: Some(Duration::from_millis(100)),
    };
    let db = TransactionDb::open(dir.path(), opts(), t).unwrap();
    (dir, db)
}

fn optimistic() -> (tempfile::TempDir, OptimisticTransactionDb) {
    let dir = tempfile::tempdir().unwrap();
    let db = OptimisticTransactionDb::open(dir.path(), opts()).unwrap();
    (dir, db)
}

fn w() -> WriteOptions {
    WriteOptions::default()
}

fn no() -> TransactionOptions {
    TransactionOptions::default()
}

fn u64v(n: u64) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

#[test]
fn reads_see_the_transactions_own_writes_and_others_see_them_only_after_commit() {
    let (_d, tdb) = pessimistic();
    tdb.put("a", "old").unwrap();
    tdb.db().merge("n", u64v(5)).unwrap();
    let mut t = tdb.begin(&w(), &no());
    t.put("a", "new").unwrap();
    t.put("b", "1").unwrap();
    t.delete("b").unwrap();
    t.merge("n", u64v(2)).unwrap();
    t.merge("n", u64v(3)).unwrap();
    assert_eq!(t.get("a").unwrap(), Some(b"new".to_vec()));
    assert_eq!(t.get("b").unwrap(), None);
    assert_eq!(t.get("n").unwrap(), Some(u64v(10)), "operands merge onto the database's value");
    assert_eq!(tdb.db().get("a").unwrap(), Some(b"old".to_vec()), "not visible before commit");
    assert_eq!(t.num_writes(), 5);
    t.commit().unwrap();
    assert_eq!(tdb.db().get("a").unwrap(), Some(b"new".to_vec()));
    assert_eq!(tdb.db().get("b").unwrap(), None);
    assert_eq!(tdb.db().get("n").unwrap(), Some(u64v(10)));
}

#[test]
fn rollback_and_drop_discard_everything_and_release_the_locks() {
    let (_d, tdb) = pessimistic();
    let mut t = tdb.begin(&w(), &no());
    t.put("k", "v").unwrap();
    t.rollback().unwrap();
    assert_eq!(tdb.db().get("k").unwrap(), None);
    {
        let mut t = tdb.begin(&w(), &no());
        t.put("k", "v").unwrap();
    } // dropped
    assert_eq!(tdb.db().get("k").unwrap(), None);
    assert_eq!(tdb.locks.num_locked(), 0);
    tdb.put("k", "free").unwrap();
}

#[test]
fn a_locked_key_makes_others_wait_then_time_out() {
    let (_d, tdb) = pessimistic();
    let mut t1 = tdb.begin(&w(), &no());
    t1.put("k", "1").unwrap();
    let mut t2 = tdb.begin(&w(), &no());
    let e = t2.put("k", "2").unwrap_err();
    assert!(matches!(e, Error::TimedOut(_)), "{e}");
    let e = t2.get_for_update("k").unwrap_err();
    assert!(matches!(e, Error::TimedOut(_)), "{e}");
    assert!(matches!(tdb.put("k", "x").unwrap_err(), Error::TimedOut(_)), "plain writes lock too");
    // Reads never wait.
    assert_eq!(t2.get("k").unwrap(), None);
    t2.put("other", "2").unwrap();
    t1.commit().unwrap();
    t2.put("k", "2").unwrap();
    t2.commit().unwrap();
    assert_eq!(tdb.db().get("k").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_waiter_gets_the_lock_when_the_holder_commits() {
    let dir = tempfile::tempdir().unwrap();
    let t = TransactionDbOptions { transaction_lock_timeout: Some(Duration::from_secs(10)), ..Default::default() };
    let tdb = Arc::new(TransactionDb::open(dir.path(), opts(), t).unwrap());
    let mut t1 = tdb.begin(&w(), &no());
    t1.put("k", "1").unwrap();
    let tdb2 = tdb.clone();
    let waiter = std::thread::spawn(move || {
        let mut t2 = tdb2.begin(&w(), &no());
        let seen = t2.get_for_update("k").unwrap();
        t2.put("k", "2").unwrap();
        t2.commit().unwrap();
        seen
    });
    std::thread::sleep(Duration::from_millis(30));
    t1.commit().unwrap();
    assert_eq!(waiter.join().unwrap(), Some(b"1".to_vec()), "the waiter reads the committed value");
    assert_eq!(tdb.db().get("k").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn deadlock_detection_refuses_the_wait_that_closes_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let t = TransactionDbOptions { transaction_lock_timeout: Some(Duration::from_secs(10)), ..Default::default() };
    let tdb = Arc::new(TransactionDb::open(dir.path(), opts(), t).unwrap());
    let detect = TransactionOptions { deadlock_detect: true, ..no() };
    let mut t1 = tdb.begin(&w(), &detect);
    t1.put("a", "1").unwrap();
    let tdb2 = tdb.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let other = std::thread::spawn(move || {
        let mut t2 = tdb2.begin(&w(), &TransactionOptions { deadlock_detect: true, ..TransactionOptions::default() });
        t2.put("b", "2").unwrap();
        tx.send(()).unwrap();
        // Waits for "a" (held by t1) until t1 gives up and rolls back.
        t2.put("a", "2").unwrap();
        t2.commit().unwrap();
    });
    rx.recv().unwrap();
    while tdb.locks.num_waiting() == 0 {
        std::thread::yield_now();
    }
    let e = t1.put("b", "1").unwrap_err();
    assert!(matches!(e, Error::Busy(ref m) if m.contains("deadlock")), "{e}");
    t1.rollback().unwrap();
    other.join().unwrap();
    assert_eq!(tdb.db().get("a").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn with_a_snapshot_a_key_changed_after_it_cannot_be_written() {
    let (_d, tdb) = pessimistic();
    tdb.put("k", "0").unwrap();
    let mut t = tdb.begin(&w(), &TransactionOptions { set_snapshot: true, ..no() });
    tdb.put("k", "changed").unwrap();
    tdb.put("z", "new").unwrap();
    assert_eq!(t.get("k").unwrap(), Some(b"0".to_vec()), "reads at the snapshot");
    let e = t.put("k", "1").unwrap_err();
    assert!(matches!(e, Error::Busy(_)), "{e}");
    assert!(matches!(t.get_for_update("z").unwrap_err(), Error::Busy(_)));
    t.put("untouched", "1").unwrap();
    t.commit().unwrap();
    assert_eq!(tdb.db().get("k").unwrap(), Some(b"changed".to_vec()));
    assert_eq!(tdb.locks.num_locked(), 0, "a refused key is not left locked");
}

#[test]
fn optimistic_commit_fails_when_a_written_or_read_key_changed() {
    let (_d, odb) = optimistic();
    odb.put("k", "0").unwrap();
    // Written key changed by a plain write.
    let mut t = odb.begin(&w(), &no());
    t.put("k", "t").unwrap();
    odb.put("k", "other").unwrap();
    assert!(matches!(t.commit().unwrap_err(), Error::Busy(_)));
    assert_eq!(odb.db().get("k").unwrap(), Some(b"other".to_vec()), "nothing of the failed commit was written");
    // Read-for-update key changed by another transaction's commit.
    let mut t1 = odb.begin(&w(), &no());
    assert_eq!(t1.get_for_update("k").unwrap(), Some(b"other".to_vec()));
    t1.put("derived", "x").unwrap();
    let mut t2 = odb.begin(&w(), &no());
    t2.put("k", "t2").unwrap();
    t2.commit().unwrap();
    assert!(matches!(t1.commit().unwrap_err(), Error::Busy(_)));
    assert_eq!(odb.db().get("derived").unwrap(), None);
    // A plain get is not tracked: no conflict.
    let mut t3 = odb.begin(&w(), &no());
    t3.get("k").unwrap();
    t3.put("x", "1").unwrap();
    odb.put("k", "again").unwrap();
    t3.commit().unwrap();
    assert_eq!(odb.db().get("x").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn optimistic_conflicts_are_found_in_tables_too() {
    let (_d, odb) = optimistic();
    let mut t = odb.begin(&w(), &TransactionOptions { set_snapshot: true, ..no() });
    t.put("k", "t").unwrap();
    odb.put("k", "other").unwrap();
    odb.db().flush().unwrap();
    odb.db().compact_range(None, None).unwrap();
    assert!(matches!(t.commit().unwrap_err(), Error::Busy(_)));
}

/// A range deletion over a key a transaction read for update is a change to it: the commit fails, whether
/// the tombstone is still in the memtable or flushed into a table.
#[test]
fn optimistic_commit_fails_when_a_range_deletion_covered_a_read_key() {
    for flush in [false, true] {
        let (_d, odb) = optimistic();
        odb.put("k", "0").unwrap();
        let mut t = odb.begin(&w(), &TransactionOptions { set_snapshot: true, ..no() });
        assert_eq!(t.get_for_update("k").unwrap(), Some(b"0".to_vec()));
        t.put("derived", "x").unwrap();
        odb.db().delete_range("a", "z").unwrap();
        if flush {
            odb.db().flush().unwrap();
        }
        assert!(matches!(t.commit().unwrap_err(), Error::Busy(_)), "flush={flush}");
        assert_eq!(odb.db().get("derived").unwrap(), None);
    }
}

#[test]
fn savepoints_undo_later_writes_and_release_later_locks() {
    let (_d, tdb) = pessimistic();
    let mut t = tdb.begin(&w(), &no());
    assert!(matches!(t.rollback_to_savepoint().unwrap_err(), Error::InvalidArgument(_)));
    t.put("a", "1").unwrap();
    t.set_savepoint();
    t.put("a", "2").unwrap();
    t.put("b", "2").unwrap();
    t.set_savepoint();
    t.delete("a").unwrap();
    assert_eq!(t.get("a").unwrap(), None);
    t.rollback_to_savepoint().unwrap();
    assert_eq!(t.get("a").unwrap(), Some(b"2".to_vec()));
    t.rollback_to_savepoint().unwrap();
    assert_eq!(t.get("a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(t.get("b").unwrap(), None);
    // "b" was locked after the first savepoint: released; "a" before it: still held.
    tdb.put("b", "other").unwrap();
    assert!(matches!(tdb.put("a", "other").unwrap_err(), Error::TimedOut(_)));
    t.commit().unwrap();
    assert_eq!(tdb.db().get("a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(tdb.db().get("b").unwrap(), Some(b"other".to_vec()));
}

#[test]
fn a_transaction_is_over_after_a_failed_commit() {
    let (_d, odb) = optimistic();
    let mut t = odb.begin(&w(), &no());
    t.put("k", "1").unwrap();
    odb.put("k", "2").unwrap();
    assert!(t.commit().is_err());
    // commit consumed it; a new one retries and succeeds.
    let mut t = odb.begin(&w(), &no());
    t.put("k", "1").unwrap();
    t.commit().unwrap();
    assert_eq!(odb.db().get("k").unwrap(), Some(b"1".to_vec()));
}

const ACCOUNTS: u64 = 8;
const START: u64 = 1000;

fn balance(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.unwrap().try_into().unwrap())
}

/// Threads move money between random accounts; the total never changes, whatever interleaving.
#[test]
fn concurrent_transfers_keep_the_total_under_both_disciplines() {
    for optimistic_mode in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let timeouts = TransactionDbOptions {
            transaction_lock_timeout: Some(Duration::from_secs(10)),
            default_lock_timeout: Some(Duration::from_secs(10)),
        };
        let pdb = Arc::new(TransactionDb::open(dir.path().join("p"), opts(), timeouts).unwrap());
        let odb = Arc::new(OptimisticTransactionDb::open(dir.path().join("o"), opts()).unwrap());
        for a in 0..ACCOUNTS {
            pdb.put(format!("acct{a}"), u64v(START)).unwrap();
            odb.put(format!("acct{a}"), u64v(START)).unwrap();
        }
        let threads: Vec<_> = (0..4u64)
            .map(|seed| {
                let (pdb, odb) = (pdb.clone(), odb.clone());
                std::thread::spawn(move || {
                    let mut x = seed * 7 + 1;
                    let mut done = 0;
                    while done < 150 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let (from, to) = ((x >> 33) % ACCOUNTS, (x >> 40) % ACCOUNTS);
                        if from == to {
                            continue;
                        }
                        let detect = TransactionOptions { deadlock_detect: true, ..TransactionOptions::default() };
                        let mut t = if optimistic_mode { odb.begin(&w(), &detect) } else { pdb.begin(&w(), &detect) };
                        let run = |t: &mut Transaction<'_>| -> Result<()> {
                            let a = balance(t.get_for_update(format!("acct{from}"))?);
                            let b = balance(t.get_for_update(format!("acct{to}"))?);
                            let amount = (x >> 50) % 10;
                            if a >= amount {
                                t.put(format!("acct{from}"), u64v(a - amount))?;
                                t.put(format!("acct{to}"), u64v(b + amount))?;
                            }
                            Ok(())
                        };
                        match run(&mut t).and_then(|()| t.commit()) {
                            Ok(()) => done += 1,
                            Err(Error::Busy(_) | Error::TimedOut(_)) => {} // conflict or deadlock: retry
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let db = if optimistic_mode { odb.db() } else { pdb.db() };
        let total: u64 = (0..ACCOUNTS).map(|a| balance(db.get(format!("acct{a}")).unwrap())).sum();
        assert_eq!(total, ACCOUNTS * START, "optimistic={optimistic_mode}");
    }
}

/// D13: a committed transaction survives a power loss whole when its write options sync, and a transaction
/// that did not commit leaves nothing behind; after recovery no lock or snapshot of the old process remains.
#[test]
fn committed_transactions_survive_power_loss_whole_and_uncommitted_ones_leave_nothing() {
    use shaledb_vfs::{MemFs, PowerLoss};
    let fs = Arc::new(MemFs::new());
    let open = |fs: &Arc<MemFs>| Options { fs: fs.clone(), ..opts() };
    let path = std::path::Path::new("/db");
    let sync = WriteOptions { sync: true, ..WriteOptions::default() };
    for seed in 0..4u64 {
        {
            let tdb = TransactionDb::open(path, open(&fs), TransactionDbOptions::default()).unwrap();
            let mut t = tdb.begin(&sync, &no());
            for i in 0..50 {
                t.put(format!("s{seed}-{i:02}"), format!("v{i}")).unwrap();
            }
            t.commit().unwrap();
            let mut pending = tdb.begin(&sync, &no());
            pending.put(format!("s{seed}-pending"), "x").unwrap();
            fs.power_loss(PowerLoss::DropUnsynced, seed);
            std::mem::forget(pending); // the process died holding it
        }
        let tdb = TransactionDb::open(path, open(&fs), TransactionDbOptions::default()).unwrap();
        for i in 0..50 {
            assert_eq!(tdb.db().get(format!("s{seed}-{i:02}")).unwrap(), Some(format!("v{i}").into_bytes()));
        }
        assert_eq!(tdb.db().get(format!("s{seed}-pending")).unwrap(), None);
        tdb.put(format!("s{seed}-pending"), "free").unwrap();
    }
}
