//! Numbers decoded from disk are checked (issue 9): a WAL batch whose sequence numbers run past the 56-bit
//! range is corruption naming the WAL, never a wrap or a clamp, and the write path refuses to pass the range.

use crate::{db_path, open_on};
use shaledb::{Options, WalRecoveryMode};
use shaledb_format::batch::BatchRep;
use shaledb_format::ikey::MAX_SEQUENCE;
use shaledb_format::log::Writer;
use shaledb_testkit::workload::tiny_options;
use shaledb_testkit::MemFs;
use shaledb_vfs::Fs;
use std::sync::Arc;

fn opts(fs: &MemFs, mode: WalRecoveryMode) -> Options {
    Options { write_buffer_size: 4 << 20, wal_recovery_mode: mode, ..tiny_options(Arc::new(fs.clone())) }
}

/// A killed database holding `good` in its WAL, plus a later WAL `000900.log` holding one record: a batch
/// of `count` puts of `evil` at sequence `seq`.
fn database_with_wal_batch_at(seq: u64, count: usize) -> MemFs {
    let fs = MemFs::new();
    let db = open_on(&fs, &opts(&fs, WalRecoveryMode::PointInTime)).unwrap();
    db.put(b"good", b"1").unwrap();
    let image = fs.deep_clone();
    drop(db);
    let mut b = BatchRep::new();
    for i in 0..count {
        b.put(b"evil", format!("{i}").as_bytes());
    }
    b.set_sequence(seq);
    let mut w = Writer::new(image.create(&db_path().join("000900.log")).unwrap());
    w.add_record(b.data()).unwrap();
    w.sync().unwrap();
    image
}

#[test]
fn wal_batch_with_sequence_past_max_is_corruption_naming_the_wal() {
    for seq in [MAX_SEQUENCE, u64::MAX - 1, u64::MAX] {
        let fs = database_with_wal_batch_at(seq, 2);
        // Strict mode: the open fails, naming the WAL and the record's offset (0: the first record).
        let err = open_on(&fs.deep_clone(), &opts(&fs, WalRecoveryMode::AbsoluteConsistency)).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("000900.log") && msg.contains("offset 0"), "{msg}");
        assert!(msg.contains("past the largest sequence number"), "{msg}");
        // Any mode: an error, or an open that never shows the out-of-range entries.
        for mode in [
            WalRecoveryMode::PointInTime,
            WalRecoveryMode::TolerateCorruptedTailRecords,
            WalRecoveryMode::SkipAnyCorruptedRecords,
        ] {
            let copy = fs.deep_clone();
            match open_on(&copy, &opts(&copy, mode)) {
                Err(e) => assert!(e.is_corruption(), "{mode:?}: {e}"),
                Ok(db) => {
                    assert_eq!(db.get(b"evil").unwrap(), None, "{mode:?}");
                    assert_eq!(db.get(b"good").unwrap(), Some(b"1".to_vec()), "{mode:?}");
                }
            }
        }
    }
}

#[test]
fn writes_stop_at_the_last_sequence_number_instead_of_wrapping() {
    // The WAL's batch takes MAX_SEQUENCE - 1: valid. One more write takes MAX_SEQUENCE; the next has none left.
    let fs = database_with_wal_batch_at(MAX_SEQUENCE - 1, 1);
    let db = open_on(&fs, &opts(&fs, WalRecoveryMode::AbsoluteConsistency)).unwrap();
    assert_eq!(db.get(b"evil").unwrap(), Some(b"0".to_vec()));
    db.put(b"last", b"fits").unwrap();
    let err = db.put(b"past", b"none left").unwrap_err();
    assert!(err.is_invalid_argument() && err.to_string().contains("sequence numbers exhausted"), "{err}");
    let mut b = shaledb::WriteBatch::new();
    b.put(b"p1", b"x").put(b"p2", b"y");
    assert!(db.write(&b).unwrap_err().is_invalid_argument());
    assert_eq!(db.get(b"last").unwrap(), Some(b"fits".to_vec()));
    assert_eq!(db.get(b"past").unwrap(), None);
    assert_eq!(db.get(b"p1").unwrap(), None);
    assert_eq!(db.get(b"good").unwrap(), Some(b"1".to_vec()));
}
