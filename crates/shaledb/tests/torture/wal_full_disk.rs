//! A WAL write that fails (a full disk) is never retried (D6): the put that returned the error never becomes
//! durable, not even through the sync at close, and the WAL keeps a clean prefix of acknowledged records that
//! every recovery mode replays.

use crate::{db_path, open_on};
use shaledb::{Options, WalRecoveryMode, WriteOptions};
use shaledb_testkit::{FaultError, FaultPlan, FsOp, MemFs};
use std::sync::Arc;

const MODES: [WalRecoveryMode; 4] = [
    WalRecoveryMode::PointInTime,
    WalRecoveryMode::TolerateCorruptedTailRecords,
    WalRecoveryMode::AbsoluteConsistency,
    WalRecoveryMode::SkipAnyCorruptedRecords,
];

fn options(fs: &MemFs) -> Options {
    // Large memtables: everything stays in the WAL, which is what recovery then has to read.
    Options { fs: Arc::new(fs.clone()), ..Options::default() }
}

/// Issue 9: after ENOSPC on a WAL write, close synced the WAL and so wrote the failed buffer: the put that had
/// returned an error became durable, and (after a partial write) the WAL held a checksum error mid-file.
#[test]
fn failed_wal_write_never_becomes_durable() {
    for sync in [false, true] {
        let fs = MemFs::new();
        let opts = options(&fs);
        let db = open_on(&fs, &opts).unwrap();
        let wo = WriteOptions { sync, ..WriteOptions::default() };
        for i in 0..100u32 {
            db.put_opt(&wo, format!("k{i:03}").as_bytes(), format!("v{i}").as_bytes()).unwrap();
        }
        fs.set_faults(FaultPlan::once(FsOp::Write, 1, FaultError::Enospc).on_paths_containing(".log"));
        let e = db.put_opt(&wo, b"failed", b"must never be durable").unwrap_err();
        assert!(e.is_no_space(), "{e}");
        assert_eq!(fs.faults_fired(), 1);
        fs.clear_faults();
        // The disk has room again; the database stays read-only and the failed WAL is not written again.
        let e = db.put_opt(&wo, b"later", b"x").unwrap_err();
        assert!(e.is_read_only(), "{e}");
        assert_eq!(db.get(b"failed").unwrap(), None);
        assert_eq!(db.get(b"k099").unwrap(), Some(b"v99".to_vec()));
        let e = db.close().unwrap_err();
        assert!(e.is_read_only() || e.is_no_space(), "{e}");
        for mode in MODES {
            let copy = fs.deep_clone();
            let db = open_on(&copy, &Options { wal_recovery_mode: mode, ..options(&copy) })
                .unwrap_or_else(|e| panic!("sync={sync} {mode:?}: open failed: {e}"));
            assert_eq!(db.get(b"failed").unwrap(), None, "sync={sync} {mode:?}: a failed put became durable");
            assert_eq!(db.get(b"later").unwrap(), None);
            for i in 0..100u32 {
                assert_eq!(
                    db.get(format!("k{i:03}").as_bytes()).unwrap(),
                    Some(format!("v{i}").into_bytes()),
                    "sync={sync} {mode:?}: acknowledged k{i:03} lost"
                );
            }
            db.close().unwrap();
        }
        assert!(db_path().is_absolute());
    }
}
