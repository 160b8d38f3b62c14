//! TTL mode (`Options::ttl`, `Db::open_with_ttl`): expiry at compaction with an injected clock, the timestamp
//! stripped on every read path, and `ReadOptions::hide_expired`.

use crate::tiny_options;
use shaledb::{Clock, Db, Options, ReadOptions, Ttl, WriteBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A clock the test moves by hand.
struct Manual(AtomicU64);
impl Clock for Manual {
    fn now_secs(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn open(dir: &std::path::Path, clock: &Arc<Manual>, seconds: u32) -> Db {
    let opts = Options {
        ttl: Some(Ttl { seconds, clock: clock.clone() }),
        merge_operator: None,
        disable_auto_compactions: true,
        ..tiny_options()
    };
    Db::open(dir, opts).unwrap()
}

fn hide() -> ReadOptions {
    ReadOptions { hide_expired: true, ..ReadOptions::default() }
}

#[test]
fn ttl_values_read_back_without_their_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(Manual(AtomicU64::new(1_000_000)));
    let db = open(dir.path(), &clock, 100);
    db.put("a", "1").unwrap();
    let mut b = WriteBatch::new();
    b.put("b", "22").put("c", "").delete("a");
    db.write(&b).unwrap();
    db.put("a", "333").unwrap();
    for flushed in [false, true] {
        assert_eq!(db.get("a").unwrap(), Some(b"333".to_vec()), "flushed {flushed}");
        assert_eq!(db.get("c").unwrap(), Some(Vec::new()));
        let got: Vec<_> = db.multi_get(["a", "b", "zz"]).into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(got, vec![Some(b"333".to_vec()), Some(b"22".to_vec()), None]);
        let all: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            all,
            vec![(b"a".to_vec(), b"333".to_vec()), (b"b".to_vec(), b"22".to_vec()), (b"c".to_vec(), vec![])]
        );
        let back: Vec<_> = db.iter().rev().map(|r| r.unwrap().1).collect();
        assert_eq!(back, vec![vec![], b"22".to_vec(), b"333".to_vec()]);
        db.flush().unwrap();
    }
    // Stored with the 4-byte timestamp. The OPTIONS file records TTL mode and a plain open is refused; without
    // one (a database written before OPTIONS files), a plain open sees the timestamp.
    drop(db);
    let plain = || Db::open(dir.path(), Options { merge_operator: None, ..tiny_options() });
    assert!(plain().unwrap_err().to_string().contains("TTL mode"));
    crate::remove_options_files(dir.path());
    let plain = plain().unwrap();
    let mut want = b"333".to_vec();
    want.extend_from_slice(&1_000_000u32.to_le_bytes());
    assert_eq!(plain.get("a").unwrap(), Some(want));
}

#[test]
fn ttl_expired_values_are_dropped_at_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(Manual(AtomicU64::new(5_000)));
    let db = open(dir.path(), &clock, 10);
    db.put("old", "o").unwrap();
    clock.0.store(5_008, Ordering::SeqCst);
    db.put("young", "y").unwrap();
    db.flush().unwrap();
    clock.0.store(5_015, Ordering::SeqCst); // old: 5000 + 10 < 5015, expired; young: 5008 + 10 >= 5015
                                            // RocksDB's default: returned until a compaction removes it.
    assert_eq!(db.get("old").unwrap(), Some(b"o".to_vec()));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("old").unwrap(), None);
    assert_eq!(db.get("young").unwrap(), Some(b"y".to_vec()));
    clock.0.store(5_019, Ordering::SeqCst);
    // "young" is in the last level now: compact_range rewrites that level too when TTL mode (or a
    // compaction filter) is on, as RocksDB's default `kIfHaveCompactionFilter`.
    db.put("fresh", "f").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("young").unwrap(), None);
    assert_eq!(db.get("fresh").unwrap(), Some(b"f".to_vec()));
}

#[test]
fn ttl_hide_expired_on_read_before_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(Manual(AtomicU64::new(100)));
    let db = open(dir.path(), &clock, 5);
    for k in ["a", "b", "c", "d"] {
        db.put(k, k).unwrap();
    }
    clock.0.store(103, Ordering::SeqCst);
    db.put("b", "b2").unwrap();
    db.put("d", "d2").unwrap();
    clock.0.store(106, Ordering::SeqCst); // a and c (written at 100) expired; b and d (103) not
    assert_eq!(db.get_opt(&hide(), "a").unwrap(), None);
    assert_eq!(db.get_opt(&ReadOptions::default(), "a").unwrap(), Some(b"a".to_vec()));
    let got: Vec<_> = db.multi_get_opt(&hide(), ["a", "b", "c"]).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, vec![None, Some(b"b2".to_vec()), None]);
    let keys: Vec<_> = db.iter_opt(&hide()).map(|r| r.unwrap().0).collect();
    assert_eq!(keys, vec![b"b".to_vec(), b"d".to_vec()]);
    let keys: Vec<_> = db.iter_opt(&hide()).rev().map(|r| r.unwrap().0).collect();
    assert_eq!(keys, vec![b"d".to_vec(), b"b".to_vec()]);
    let mut c = db.cursor_opt(&hide());
    c.seek("a");
    assert_eq!(c.key(), b"b");
    c.seek_for_prev("c");
    assert_eq!(c.key(), b"b");
    c.seek_to_first();
    assert_eq!((c.key(), c.value()), (&b"b"[..], &b"b2"[..]));
    c.next();
    assert_eq!(c.key(), b"d");
    c.next();
    assert!(!c.valid());
    c.status().unwrap();
    assert_eq!(db.iter().count(), 4);
}

#[test]
fn ttl_zero_never_expires_and_merge_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(Manual(AtomicU64::new(1)));
    let db = open(dir.path(), &clock, 0);
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    clock.0.store(u64::from(u32::MAX), Ordering::SeqCst);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get_opt(&hide(), "k").unwrap(), Some(b"v".to_vec()));
    drop(db);
    let dir2 = tempfile::tempdir().unwrap();
    let with_merge = Options { ttl: Some(Ttl::new(10)), ..tiny_options() }; // tiny_options has stringappend
    let err = Db::open(dir2.path(), with_merge).unwrap_err();
    assert!(err.to_string().contains("merge_operator"), "{err}");
}

#[test]
fn ttl_open_with_ttl_uses_the_system_clock() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with_ttl(dir.path(), Options { merge_operator: None, ..tiny_options() }, 3600).unwrap();
    db.put("k", "v").unwrap();
    assert_eq!(db.get_opt(&hide(), "k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.options().ttl.as_ref().map(|t| t.seconds), Some(3600));
}
