//! Losses are loud and recoverable (D10): a damaged WAL is kept in `lost/`, what recovery dropped is counted
//! in `shaledb.recovery-dropped-*` and written to the LOG, a hole in the WAL (damage with intact records after
//! it) is refused by the default mode, and WAL sequence numbers never wrap.

use crate::torn_tails::{record_bounds, wal_paths};
use crate::{db_path, open_on, watch_background_panics};
use shaledb::{Options, WalRecoveryMode, WriteOptions};
use shaledb_format::batch::BatchRep;
use shaledb_format::ikey::MAX_SEQUENCE;
use shaledb_format::log::Writer;
use shaledb_testkit::workload::tiny_options;
use shaledb_testkit::{FaultError, FaultPlan, FsOp, MemFs};
use shaledb_vfs::{Error, Fs};
use std::path::PathBuf;
use std::sync::Arc;

const KEYS: usize = 1000;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn opts(mode: WalRecoveryMode) -> Options {
    Options { write_buffer_size: 4 << 20, wal_recovery_mode: mode, ..tiny_options(Arc::new(MemFs::new())) }
}

/// A killed database whose one WAL holds `KEYS` puts, one record each.
fn killed_with_one_wal() -> (MemFs, PathBuf, Vec<u8>) {
    let fs = MemFs::new();
    let db = open_on(&fs, &opts(WalRecoveryMode::PointInTime)).unwrap();
    for i in 0..KEYS {
        db.put(key(i), format!("value{i}").as_bytes()).unwrap();
    }
    let killed = fs.deep_clone();
    drop(db);
    let wals = wal_paths(&killed);
    let [wal] = wals.as_slice() else { panic!("expected one WAL, found {wals:?}") };
    let data = killed.read_file(wal).unwrap();
    assert_eq!(record_bounds(&data, wal).len(), KEYS);
    (killed, wal.clone(), data)
}

fn log_text(fs: &MemFs) -> String {
    String::from_utf8(fs.read_file(&db_path().join("LOG")).unwrap_or_default()).unwrap()
}

fn lost_files(fs: &MemFs) -> Vec<String> {
    fs.list(&db_path().join("lost")).unwrap_or_default()
}

fn corruption_at(e: &Error) -> (PathBuf, u64, String) {
    match e {
        Error::Corruption { file, offset, what } => (file.clone(), *offset, what.clone()),
        other => panic!("expected a corruption error, got {other}"),
    }
}

#[test]
fn bit_flip_in_the_middle_of_a_wal_is_kept_and_reported() {
    watch_background_panics();
    let (killed, wal, data) = killed_with_one_wal();
    let at = data.len() / 10;
    let mut flipped = data.clone();
    flipped[at] ^= 0x04;
    let bounds = record_bounds(&data, &wal);
    let victim = bounds.iter().position(|(s, e)| (*s as usize..*e as usize).contains(&at)).unwrap();
    let name = wal.file_name().unwrap().to_str().unwrap().to_string();

    // The default (PointInTime), TolerateCorruptedTailRecords and AbsoluteConsistency refuse, naming the WAL
    // and the damaged record, and leave every file as it was.
    for mode in [
        WalRecoveryMode::PointInTime,
        WalRecoveryMode::TolerateCorruptedTailRecords,
        WalRecoveryMode::AbsoluteConsistency,
    ] {
        let fs = killed.deep_clone();
        fs.write_file(&wal, &flipped);
        let e = open_on(&fs, &opts(mode)).expect_err(&format!("{mode:?} opened a WAL with a hole"));
        let (file, offset, what) = corruption_at(&e);
        assert_eq!(file, wal, "{mode:?}: {e}");
        assert_eq!(offset, bounds[victim].0, "{mode:?}: {e}");
        if mode == WalRecoveryMode::PointInTime {
            assert!(what.contains("valid records follow"), "{e}");
            assert!(Options::default().wal_recovery_mode == WalRecoveryMode::PointInTime, "the default mode");
        }
        assert_eq!(fs.read_file(&wal).unwrap(), flipped, "{mode:?}: the WAL changed");
        let log = log_text(&fs);
        let refused = log.lines().find(|l| l.contains("open refused")).unwrap_or_else(|| panic!("{log}"));
        assert!(refused.contains(&name) && refused.contains(&format!("offset {}", bounds[victim].0)), "{refused}");
        assert!(lost_files(&fs).is_empty(), "{mode:?}: a refused open keeps nothing");
    }

    // SkipAnyCorruptedRecords opens: the WAL is kept in lost/, the drop is counted, logged and verified.
    let fs = killed.deep_clone();
    fs.write_file(&wal, &flipped);
    let db = open_on(&fs, &opts(WalRecoveryMode::SkipAnyCorruptedRecords)).unwrap();
    let present = (0..KEYS).filter(|i| db.get(key(*i)).unwrap().is_some()).count();
    assert!(present >= victim && present < KEYS, "{present} keys recovered");
    for i in 0..victim {
        assert_eq!(db.get(key(i)).unwrap(), Some(format!("value{i}").into_bytes()));
    }
    let dropped: usize = db.property("shaledb.recovery-dropped-records").unwrap().parse().unwrap();
    assert_eq!(dropped, KEYS - present, "every record not recovered is counted");
    let bytes: u64 = db.property("shaledb.recovery-dropped-bytes").unwrap().parse().unwrap();
    assert!(bytes > 0);
    assert_eq!(lost_files(&fs), vec![name.clone()]);
    assert_eq!(fs.read_file(&db_path().join("lost").join(&name)).unwrap(), flipped, "kept byte for byte");
    let log = log_text(&fs);
    let line = log.lines().find(|l| l.contains(&name) && l.contains("skipped")).unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains(&format!("offset {}", bounds[victim].0)), "{line}");
    assert!(line.contains(&format!("{} records", KEYS - present)), "{line}");
    // lost/ and the LOG survive the next opens (they are ours, never orphans) until an operator acts.
    drop(db);
    let first_log = log_text(&fs);
    let db = open_on(&fs, &opts(WalRecoveryMode::PointInTime)).unwrap();
    assert_eq!(db.property("shaledb.recovery-dropped-records").as_deref(), Some("0"));
    drop(db);
    assert_eq!(lost_files(&fs), vec![name.clone()]);
    // The next open appended its session to the LOG, after the first one's lines, which stay.
    let log = log_text(&fs);
    assert!(log.lines().any(|l| l.contains(&name) && l.contains("skipped")), "{log}");
    assert!(log.starts_with(&first_log), "the earlier lines stay:\n{log}");
    let session = &log[first_log.len()..];
    assert!(session.lines().next().is_some_and(|l| l.contains("---- opened by pid")), "{log}");
    assert!(!fs.file_names(db_path()).iter().any(|n| n.starts_with("LOG.old.")), "{:?}", fs.file_names(db_path()));
    // `destroy` removes them with the rest.
    shaledb::destroy_with(db_path(), &fs).unwrap();
    assert!(lost_files(&fs).is_empty());
    assert!(!fs.file_names(db_path()).iter().any(|n| n.starts_with("LOG")), "{:?}", fs.file_names(db_path()));
}

#[test]
fn torn_tail_is_recovered_counted_and_kept() {
    let (killed, wal, data) = killed_with_one_wal();
    let bounds = record_bounds(&data, &wal);
    let cut = bounds[KEYS - 1].0 as usize + 5; // inside the last record's header
    killed.write_file(&wal, &data[..cut]);
    let db = open_on(&killed, &opts(WalRecoveryMode::PointInTime)).unwrap();
    assert!(db.get(key(KEYS - 2)).unwrap().is_some());
    assert!(db.get(key(KEYS - 1)).unwrap().is_none());
    assert_eq!(db.property("shaledb.recovery-dropped-records").as_deref(), Some("1"));
    assert_eq!(db.property("shaledb.recovery-dropped-bytes").as_deref(), Some("5"));
    assert_eq!(lost_files(&killed).len(), 1);
    assert!(log_text(&killed).contains("torn tail"), "{}", log_text(&killed));
}

#[test]
fn zero_filled_page_before_intact_records_is_a_power_loss_tail() {
    // A power failure can lose an unsynced page while a later one survives: a zero-filled, page-aligned hole
    // followed by intact records. That is a torn tail (the writes were never synced), not a hole to refuse.
    let (killed, wal, mut data) = killed_with_one_wal();
    assert!(data.len() > 3 * 4096);
    let after_hole = record_bounds(&data, &wal).iter().filter(|(s, _)| *s >= 8192).count();
    data[4096..8192].fill(0);
    killed.write_file(&wal, &data);
    let db = open_on(&killed, &opts(WalRecoveryMode::PointInTime)).unwrap();
    assert!(db.get(key(0)).unwrap().is_some());
    assert!(db.get(key(KEYS - 1)).unwrap().is_none());
    let dropped: usize = db.property("shaledb.recovery-dropped-records").unwrap().parse().unwrap();
    let present = (0..KEYS).filter(|i| db.get(key(*i)).unwrap().is_some()).count();
    // The intact records after the hole are counted; those the zeroed page destroyed cannot be (the bytes
    // property covers them).
    assert!(dropped >= after_hole && dropped <= KEYS - present, "{dropped} {after_hole} {present}");
    let bytes: usize = db.property("shaledb.recovery-dropped-bytes").unwrap().parse().unwrap();
    assert!(bytes > data.len() - 4096, "{bytes}");
    assert_eq!(lost_files(&killed).len(), 1);
}

/// A database whose WAL holds one batch of `entries` puts at sequence `seq`, written by hand.
fn wal_with_batch_at(seq: u64, entries: usize) -> (MemFs, PathBuf) {
    let fs = MemFs::new();
    let db = open_on(&fs, &opts(WalRecoveryMode::PointInTime)).unwrap();
    db.put_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, b"before", b"v").unwrap();
    let killed = fs.deep_clone();
    drop(db);
    let wal = wal_paths(&killed).pop().unwrap();
    let number: u64 = wal.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let newer = wal.with_file_name(format!("{:06}.log", number + 1));
    let mut b = BatchRep::new();
    for i in 0..entries {
        b.put(format!("high{i}").as_bytes(), b"x");
    }
    b.set_sequence(seq);
    let mut w = Writer::new(killed.create(&newer).unwrap());
    w.add_record(b.data()).unwrap();
    w.sync().unwrap();
    (killed, newer)
}

#[test]
fn wal_batch_sequence_near_2_pow_56_is_corruption_never_a_wrap() {
    // A batch ending exactly at the last sequence is replayed.
    let (fs, _) = wal_with_batch_at(MAX_SEQUENCE - 1, 2);
    let db = open_on(&fs, &opts(WalRecoveryMode::PointInTime)).unwrap();
    assert_eq!(db.get(b"high1").unwrap().as_deref(), Some(&b"x"[..]));
    drop(db);
    // Past it, or wrapping u64 in a release build: the record is corrupt (its checksum passed, its contents do
    // not decode). The default mode refuses, naming the WAL and the record; SkipAnyCorruptedRecords skips the
    // record, as it skips any corrupt one, counts it, and never applies any of its entries.
    for (seq, entries) in [(MAX_SEQUENCE - 1, 3), (MAX_SEQUENCE, 2), (u64::MAX - 1, 3), (u64::MAX, 1)] {
        let (fs, wal) = wal_with_batch_at(seq, entries);
        let e = open_on(&fs, &opts(WalRecoveryMode::PointInTime))
            .expect_err(&format!("seq {seq} + {entries} opened under PointInTime"));
        let (file, offset, what) = corruption_at(&e);
        assert_eq!((file.as_path(), offset), (wal.as_path(), 0), "{e}");
        assert!(what.contains("largest sequence"), "{e}");

        let db = open_on(&fs, &opts(WalRecoveryMode::SkipAnyCorruptedRecords)).unwrap();
        assert_eq!(db.get(b"before").unwrap().as_deref(), Some(&b"v"[..]));
        for i in 0..entries {
            assert_eq!(db.get(format!("high{i}").as_bytes()).unwrap(), None, "seq {seq} + {entries}");
        }
        assert_eq!(db.property("shaledb.recovery-dropped-records").as_deref(), Some("1"));
    }
}

#[test]
fn log_records_opens_flushes_compactions_and_the_switch_to_read_only() {
    watch_background_panics();
    let fs = MemFs::new();
    let o = Options { disable_auto_compactions: true, ..tiny_options(Arc::new(fs.clone())) };
    let db = open_on(&fs, &o).unwrap();
    for i in 0..200 {
        db.put(key(i), [b'v'; 40]).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    fs.set_faults(FaultPlan::from_nth(FsOp::Create, 1, FaultError::Enospc).on_paths_containing(".sst"));
    for i in 0..200 {
        if db.put(key(i), [b'w'; 40]).is_err() {
            break;
        }
    }
    let _ = db.flush();
    fs.clear_faults();
    drop(db);
    let log = log_text(&fs);
    for needle in ["open /db", "recovered MANIFEST-", "flush: memtable", "compaction", "read-only"] {
        assert!(log.contains(needle), "LOG lacks {needle:?}:\n{log}");
    }
    assert!(log.lines().all(|l| l.len() > 28 && l.as_bytes()[27] == b' ' && l.as_bytes()[26] == b'Z'), "{log}");
    // The next open appends to this LOG, after its session line, what recovery replayed; nothing is rotated.
    drop(open_on(&fs, &o).unwrap());
    let after = log_text(&fs);
    assert!(after.starts_with(&log), "the earlier lines stay:\n{after}");
    let session = &after[log.len()..];
    assert!(session.lines().next().is_some_and(|l| l.contains("---- opened by pid")), "{after}");
    assert!(session.contains("recovery: replayed"), "{after}");
    assert!(!fs.file_names(db_path()).iter().any(|n| n.starts_with("LOG.old.")), "{:?}", fs.file_names(db_path()));
}
