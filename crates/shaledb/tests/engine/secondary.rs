//! Secondary instances (`Db::open_as_secondary`, `Db::try_catch_up_with_primary`): a primary writing while a
//! secondary follows it, a torn WAL tail, files the primary deletes under the secondary, refused writes.

use crate::tiny_options;
use shaledb::{Db, Error, Options, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const KEYS: u64 = 400;
const COUNTER: &[u8] = b"zz-counter";

fn key(i: u64) -> Vec<u8> {
    format!("k{:04}", (i * 7919) % KEYS).into_bytes()
}

/// Write `i` of the primary: a put of `key(i)` (a delete for every fifth) and the counter, in one batch.
fn op(i: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    if i % 5 == 3 {
        b.delete(key(i));
    } else {
        b.put(key(i), format!("value {i} {}", "x".repeat((i % 97) as usize)));
    }
    b.put(COUNTER, i.to_string());
    b
}

/// The data keys after the first `k` writes.
fn model(k: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for i in 0..k {
        if i % 5 == 3 {
            m.remove(&key(i));
        } else {
            m.insert(key(i), format!("value {i} {}", "x".repeat((i % 97) as usize)).into_bytes());
        }
    }
    m
}

/// Everything the database holds, read by one iterator: the number of writes it reflects (from the counter)
/// and the data keys.
fn state(db: &Db) -> (u64, BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut data = BTreeMap::new();
    let mut k = 0;
    for e in db.iter() {
        let (key, value) = e.unwrap();
        if key == COUNTER {
            k = String::from_utf8(value).unwrap().parse::<u64>().unwrap() + 1;
        } else {
            data.insert(key, value);
        }
    }
    (k, data)
}

fn primary_options() -> Options {
    // Every few edits the MANIFEST passes 2 KiB and the primary starts a new one.
    Options { max_manifest_file_size: 2 << 10, ..tiny_options() }
}

/// A primary writes in a thread (flushes, compactions, WAL switches, MANIFEST rolls) while the secondary
/// catches up in a loop: after each catch-up it holds exactly the state after some prefix of the writes, at
/// least every write acknowledged before the catch-up began and never fewer than the previous catch-up saw.
#[test]
fn a_secondary_follows_a_writing_primary_through_flushes_compactions_and_manifest_rolls() {
    follow(primary_options());
}

/// The same with values of 40 bytes and more in blob files (rolled every 4 KiB, collected by compactions):
/// the secondary holds the blob files of its view open too.
#[test]
fn a_secondary_follows_a_primary_with_blob_files() {
    follow(Options {
        enable_blob_files: true,
        min_blob_size: 40,
        blob_file_size: 4 << 10,
        enable_blob_garbage_collection: true,
        ..primary_options()
    });
}

fn follow(opts: Options) {
    let tmp = tempfile::tempdir().unwrap();
    let (primary_dir, secondary_dir) = (tmp.path().join("db"), tmp.path().join("follower"));
    let primary = Arc::new(Db::open(&primary_dir, opts.clone()).unwrap());
    let total = 4000u64;
    for i in 0..100 {
        primary.write(&op(i)).unwrap();
    }
    let acked = Arc::new(AtomicU64::new(100));
    // The open's first catch-up races the primary's background flushes and compactions like any other: on a
    // busy machine every one of its attempts can see the files change, and it fails with Busy (seen once in a
    // parallel test run). A caller retries, as after `try_catch_up_with_primary`.
    let mut tries = 0;
    let secondary = loop {
        match Db::open_as_secondary(&primary_dir, &secondary_dir, opts.clone()) {
            Ok(db) => break db,
            Err(Error::Busy(e)) if tries < 20 => {
                tries += 1;
                eprintln!("open as secondary: busy ({e}), retrying");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("open as secondary after {tries} busy retries: {e}"),
        }
    };
    assert_eq!(secondary.secondary_path(), Some(secondary_dir.as_path()));
    let (k, data) = state(&secondary);
    assert_eq!(k, 100);
    assert_eq!(data, model(100));

    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (primary, acked, done) = (primary.clone(), acked.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 100..total {
                primary.write(&op(i)).unwrap();
                acked.store(i + 1, Ordering::SeqCst);
                if i % 1000 == 500 {
                    primary.compact_range(None, None).unwrap();
                }
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let (mut previous, mut catch_ups, mut busy) = (k, 0, 0);
    let mut manifests = std::collections::BTreeSet::new();
    let mut blob_files = 0;
    loop {
        let finished = done.load(Ordering::SeqCst);
        let before = acked.load(Ordering::SeqCst);
        match secondary.try_catch_up_with_primary() {
            Ok(()) => catch_ups += 1,
            Err(Error::Busy(_)) => {
                busy += 1;
                continue;
            }
            Err(e) => panic!("catch-up failed: {e}"),
        }
        let (k, data) = state(&secondary);
        assert!(k >= before, "the secondary sees {k} writes, {before} were acknowledged before the catch-up");
        assert!(k >= previous, "the secondary went back from {previous} to {k} writes");
        assert!(data == model(k), "the secondary's state is not the state after the first {k} writes");
        previous = k;
        for e in std::fs::read_dir(&primary_dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if name.starts_with("MANIFEST-") {
                manifests.insert(name);
            } else if name.ends_with(".blob") {
                blob_files += 1;
            }
        }
        if finished {
            break;
        }
    }
    writer.join().unwrap();
    assert_eq!(previous, total, "the last catch-up, after the primary finished, sees every write");
    assert!(catch_ups > 5, "only {catch_ups} catch-ups ({busy} busy)");
    // Two names at least: the secondary caught up across a roll. (How many it sees depends on how many edits the
    // primary makes between catch-ups: fewer since one flush takes every memtable that waited.)
    assert!(manifests.len() >= 2, "the primary should have rolled its MANIFEST: {manifests:?}");
    assert_eq!(blob_files > 0, opts.enable_blob_files, "blob files seen {blob_files} times");
    let p = primary.statistics();
    assert!(p.flush_count > 5 && p.compaction_bytes_written > 0, "no flushes or compactions ran");

    // The secondary wrote its own LOG and OPTIONS file, and nothing of it went to the primary's directory.
    let own: Vec<String> =
        std::fs::read_dir(&secondary_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    assert!(own.iter().any(|n| n == "LOG") && own.iter().any(|n| n.starts_with("OPTIONS-")), "{own:?}");
    let log = std::fs::read_to_string(secondary_dir.join("LOG")).unwrap();
    assert!(log.contains("open as secondary of"), "{log}");
    drop(secondary);
    Arc::try_unwrap(primary).ok().unwrap().close().unwrap();
    let db = Db::open(&primary_dir, opts).unwrap();
    assert_eq!(state(&db), (total, model(total)));
}

/// The newest WAL of the database in `dir`.
fn newest_wal(dir: &Path) -> std::path::PathBuf {
    dir.join(files_ending(dir, ".log").pop().expect("a WAL"))
}

/// A database whose 50 writes are in its WAL only (dropped, not closed), in `db` of the returned directory,
/// with the path for a secondary beside it.
fn fifty_writes_in_the_wal() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (primary_dir, secondary_dir) = (tmp.path().join("db"), tmp.path().join("follower"));
    let db = Db::open(&primary_dir, Options::default()).unwrap();
    for i in 0..50 {
        db.write(&op(i)).unwrap();
    }
    drop(db);
    (tmp, primary_dir, secondary_dir)
}

/// A record the primary is still appending (a torn WAL tail) is where the secondary stops, without error; once
/// the record is whole, the next catch-up reads it.
#[test]
fn a_torn_wal_tail_stops_the_secondary_without_error_until_the_record_is_whole() {
    let (_tmp, primary_dir, secondary_dir) = fifty_writes_in_the_wal();
    let wal = newest_wal(&primary_dir);
    let whole = std::fs::read(&wal).unwrap();
    // Cut the last record (a batch of about 40 bytes) in its middle, as a reader sees an append in progress.
    std::fs::write(&wal, &whole[..whole.len() - 15]).unwrap();
    for mode in [shaledb::WalRecoveryMode::AbsoluteConsistency, shaledb::WalRecoveryMode::PointInTime] {
        let opts = Options { wal_recovery_mode: mode, ..Options::default() };
        let secondary = Db::open_as_secondary(&primary_dir, &secondary_dir, opts).unwrap();
        assert_eq!(state(&secondary), (49, model(49)), "{mode:?}");
        secondary.try_catch_up_with_primary().unwrap();
        assert_eq!(state(&secondary), (49, model(49)), "{mode:?}");
        std::fs::write(&wal, &whole).unwrap();
        secondary.try_catch_up_with_primary().unwrap();
        assert_eq!(state(&secondary), (50, model(50)), "{mode:?}: the completed record is read");
        std::fs::write(&wal, &whole[..whole.len() - 15]).unwrap();
    }
    // The tear is not lost by the secondary: nothing was moved to lost/ or changed.
    assert!(!primary_dir.join("lost").exists());
}

/// Intact records after damage in the WAL are a hole, not an append in progress: the catch-up reports
/// corruption and the view stays as it was.
#[test]
fn a_hole_in_the_wal_is_corruption_and_the_view_is_kept() {
    let (_tmp, primary_dir, secondary_dir) = fifty_writes_in_the_wal();
    let secondary = Db::open_as_secondary(&primary_dir, &secondary_dir, Options::default()).unwrap();
    let wal = newest_wal(&primary_dir);
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[100] ^= 0x55;
    std::fs::write(&wal, &bytes).unwrap();
    let e = secondary.try_catch_up_with_primary().unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert_eq!(state(&secondary), (50, model(50)));
}

/// The names of the files in `dir` ending in `suffix`, sorted.
fn files_ending(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// The table files in `dir`, sorted.
fn tables(dir: &Path) -> Vec<String> {
    files_ending(dir, ".sst")
}

/// Waits until the primary's background thread has deleted the files `names` of `dir` (obsolete tables are
/// removed when it next wakes, after the compaction returned).
fn wait_deleted(dir: &Path, names: &[String]) {
    for _ in 0..1000 {
        if names.iter().all(|n| !dir.join(n).exists()) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the primary did not delete {names:?}");
}

/// Tables the primary's compaction deletes stay readable: through the secondary's open handles (its current
/// view, and an iterator opened before), and after a catch-up from the new tables.
#[test]
fn tables_the_primary_deletes_stay_readable_through_open_handles() {
    let tmp = tempfile::tempdir().unwrap();
    let (primary_dir, secondary_dir) = (tmp.path().join("db"), tmp.path().join("follower"));
    let opts = Options { disable_auto_compactions: true, ..tiny_options() };
    let primary = Db::open(&primary_dir, opts.clone()).unwrap();
    for i in 0..1000 {
        primary.write(&op(i)).unwrap();
    }
    primary.flush().unwrap();
    let before = tables(&primary_dir);
    assert!(before.len() > 2, "{before:?}");
    let secondary = Db::open_as_secondary(&primary_dir, &secondary_dir, opts.clone()).unwrap();
    let mut old_iter = secondary.cursor();
    old_iter.seek_to_first();

    for i in 1000..1500 {
        primary.write(&op(i)).unwrap();
    }
    primary.compact_range(None, None).unwrap();
    wait_deleted(&primary_dir, &before);
    let after = tables(&primary_dir);
    assert!(before.iter().all(|t| !after.contains(t)), "the compaction deleted no old table: {before:?} {after:?}");

    // Not caught up: the view of the open, from tables deleted on disk.
    assert_eq!(state(&secondary), (1000, model(1000)));
    let mut n = 0;
    while old_iter.valid() {
        n += 1;
        old_iter.next();
    }
    old_iter.status().unwrap();
    assert_eq!(n as usize, model(1000).len() + 1);
    secondary.try_catch_up_with_primary().unwrap();
    assert_eq!(state(&secondary), (1500, model(1500)));
    drop(old_iter);
    secondary.try_catch_up_with_primary().unwrap();
    assert_eq!(state(&secondary), (1500, model(1500)));
}

/// With a bounded table cache, a table evicted and then deleted by the primary is a clear `Io` error naming
/// the file, never a wrong answer or a panic; a catch-up reads the new tables.
#[test]
fn an_evicted_table_the_primary_deleted_is_an_io_error_until_the_catch_up() {
    let tmp = tempfile::tempdir().unwrap();
    let (primary_dir, secondary_dir) = (tmp.path().join("db"), tmp.path().join("follower"));
    let opts = Options {
        disable_auto_compactions: true,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 200,
        ..tiny_options()
    };
    let primary = Db::open(&primary_dir, opts.clone()).unwrap();
    // Twelve L0 tables, each holding its own keys.
    for t in 0..12u64 {
        for j in 0..20u64 {
            primary.put(format!("t{t:02}-{j:02}"), format!("v{t}-{j}")).unwrap();
        }
        primary.flush().unwrap();
    }
    // At most 6 tables stay open (16 - 10): the first ones opened are evicted.
    let secondary =
        Db::open_as_secondary(&primary_dir, &secondary_dir, Options { max_open_files: 16, ..opts.clone() }).unwrap();
    let before = tables(&primary_dir);
    primary.compact_range(None, None).unwrap();
    wait_deleted(&primary_dir, &before);
    let mut errors = 0;
    for t in 0..12u64 {
        match secondary.get(format!("t{t:02}-07")) {
            Ok(v) => assert_eq!(v.as_deref(), Some(format!("v{t}-7").as_bytes())),
            Err(e) => {
                assert!(e.is_io() && e.to_string().contains(".sst"), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "every table was still open: the test did not delete one under the secondary");
    secondary.try_catch_up_with_primary().unwrap();
    for t in 0..12u64 {
        assert_eq!(secondary.get(format!("t{t:02}-07")).unwrap().as_deref(), Some(format!("v{t}-7").as_bytes()));
    }
}

/// Every write is refused as on a read-only open; catching up needs a secondary; the secondary directory
/// cannot be the primary's; a missing primary is an error that creates nothing there.
#[test]
fn writes_are_refused_and_bad_opens_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let (primary_dir, secondary_dir) = (tmp.path().join("db"), tmp.path().join("follower"));
    let primary = Db::open(&primary_dir, Options::default()).unwrap();
    primary.put("a", "1").unwrap();
    let e = primary.try_catch_up_with_primary().unwrap_err();
    assert!(matches!(e, Error::NotSupported(_)), "{e}");
    let secondary = Db::open_as_secondary(&primary_dir, &secondary_dir, Options::default()).unwrap();
    let refused = |r: shaledb::Result<()>, what: &str| match r {
        Err(Error::NotSupported(m)) => assert!(m.contains("read-only"), "{what}: {m}"),
        other => panic!("{what}: {other:?}"),
    };
    refused(secondary.put("b", "2"), "put");
    refused(secondary.delete("a"), "delete");
    refused(secondary.delete_range("a", "z"), "delete_range");
    let mut batch = WriteBatch::new();
    batch.put("c", "3");
    refused(secondary.write_opt(&WriteOptions::default(), &batch), "write");
    refused(secondary.flush(), "flush");
    refused(secondary.compact_range(None, None), "compact_range");
    refused(secondary.sync_wal(), "sync_wal");
    assert_eq!(secondary.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(secondary.get("b").unwrap(), None);
    secondary.close().unwrap();
    assert_eq!(primary.get("b").unwrap(), None);

    let e = Db::open_as_secondary(&primary_dir, &primary_dir, Options::default()).unwrap_err();
    assert!(e.is_invalid_argument() && e.to_string().contains("primary"), "{e}");
    let e =
        Db::open_as_secondary(&primary_dir, &secondary_dir, Options { error_if_exists: true, ..Options::default() })
            .unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    let missing = tmp.path().join("missing");
    let e = Db::open_as_secondary(&missing, tmp.path().join("f2"), Options::default()).unwrap_err();
    assert!(e.is_invalid_argument() && e.to_string().contains("does not exist"), "{e}");
    assert!(!missing.exists());
    primary.close().unwrap();
}

/// The primary closes and opens again (a new MANIFEST, its WALs flushed and deleted at open): the secondary's
/// next catch-up reads the new MANIFEST whole. A different database put in the primary's place is refused.
#[test]
fn a_secondary_follows_the_primary_across_its_restart_and_refuses_another_database() {
    let tmp = tempfile::tempdir().unwrap();
    let (primary_dir, secondary_dir) = (tmp.path().join("db"), tmp.path().join("follower"));
    let primary = Db::open(&primary_dir, tiny_options()).unwrap();
    for i in 0..300 {
        primary.write(&op(i)).unwrap();
    }
    let secondary = Db::open_as_secondary(&primary_dir, &secondary_dir, tiny_options()).unwrap();
    assert_eq!(state(&secondary), (300, model(300)));
    primary.close().unwrap();
    let primary = Db::open(&primary_dir, tiny_options()).unwrap();
    for i in 300..600 {
        primary.write(&op(i)).unwrap();
    }
    assert_eq!(state(&secondary), (300, model(300)), "not caught up yet");
    secondary.try_catch_up_with_primary().unwrap();
    assert_eq!(state(&secondary), (600, model(600)));
    primary.close().unwrap();

    shaledb::destroy(&primary_dir).unwrap();
    let other = Db::open(&primary_dir, tiny_options()).unwrap();
    other.put("other", "database").unwrap();
    let e = secondary.try_catch_up_with_primary().unwrap_err();
    assert!(e.is_invalid_argument() && e.to_string().contains("another database"), "{e}");
    assert_eq!(state(&secondary), (600, model(600)), "the view is kept");
    other.close().unwrap();
}
