//! `Options::compaction_filter` through the engine: keep, remove and change, snapshot protection, the
//! context each call gets, and a panicking filter.

use crate::tiny_options;
use shaledb::{CompactionFilter, Db, Decision, FilterContext, Options, ReadOptions};
use std::sync::{Arc, Mutex};

/// Removes keys starting with `r`, wraps the values of keys starting with `c` in `<>`, keeps the rest; records
/// each call's key and context.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(Vec<u8>, FilterContext)>>,
}

impl CompactionFilter for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn filter(&self, cx: &FilterContext, key: &[u8], value: &[u8]) -> Decision {
        self.calls.lock().unwrap().push((key.to_vec(), *cx));
        match key.first() {
            Some(b'r') => Decision::Remove,
            Some(b'c') => Decision::ChangeValue([&b"<"[..], value, b">"].concat()),
            _ => Decision::Keep,
        }
    }
}

fn open(dir: &std::path::Path, filter: Arc<dyn CompactionFilter>) -> Db {
    let opts = Options {
        compaction_filter: Some(filter),
        merge_operator: None,
        disable_auto_compactions: true,
        ..tiny_options()
    };
    Db::open(dir, opts).unwrap()
}

#[test]
fn compaction_filter_keep_remove_change() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recorder::default());
    let db = open(dir.path(), rec.clone());
    db.put("chg1", "abc").unwrap();
    db.put("keep", "k").unwrap();
    db.put("rm1", "gone").unwrap();
    db.flush().unwrap();
    // Flushes do not filter.
    assert!(rec.calls.lock().unwrap().is_empty());
    assert_eq!(db.get("rm1").unwrap(), Some(b"gone".to_vec()));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("chg1").unwrap(), Some(b"<abc>".to_vec()));
    assert_eq!(db.get("keep").unwrap(), Some(b"k".to_vec()));
    assert_eq!(db.get("rm1").unwrap(), None);
    let keys: Vec<Vec<u8>> = db.iter().map(|r| r.unwrap().0).collect();
    assert_eq!(keys, vec![b"chg1".to_vec(), b"keep".to_vec()]);
    let filtered: u64 = db.statistics().levels.iter().map(|l| l.compaction.records_filtered).sum();
    assert_eq!(filtered, 2);
    // Values already in the last level are filtered by the next compact_range too (the level is rewritten
    // in place, RocksDB's `kIfHaveCompactionFilter`): "chg1" is changed again, nothing else moves.
    let files_before = db.statistics().levels.iter().map(|l| l.files).sum::<u64>();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("chg1").unwrap(), Some(b"<<abc>>".to_vec()));
    assert_eq!(db.get("keep").unwrap(), Some(b"k".to_vec()));
    assert_eq!(db.statistics().levels.iter().map(|l| l.files).sum::<u64>(), files_before);
}

#[test]
fn compaction_filter_context_reports_level_manual_full_and_bottommost() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recorder::default());
    let db = open(dir.path(), rec.clone());
    db.put("a", "1").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let calls = rec.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let cx = calls[0].1;
    assert_eq!(cx.level, 0);
    assert!(cx.output_level > 0);
    assert!(cx.is_manual_compaction && cx.is_full_compaction && cx.bottommost, "{cx:?}");
}

#[test]
fn compaction_filter_never_changes_what_a_snapshot_sees() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recorder::default());
    let db = open(dir.path(), rec.clone());
    db.put("rm", "old").unwrap();
    db.put("chg", "old").unwrap();
    let snap = db.snapshot();
    db.put("rm", "new").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let at_snap = ReadOptions { snapshot: Some(snap), ..ReadOptions::default() };
    // The snapshot still reads the old versions; the newest "rm" (newer than the snapshot) was removed.
    assert_eq!(db.get_opt(&at_snap, "rm").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get_opt(&at_snap, "chg").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get("rm").unwrap(), None);
    // "chg"'s only version is visible to the snapshot: not filtered.
    assert_eq!(db.get("chg").unwrap(), Some(b"old".to_vec()));
    let asked: Vec<Vec<u8>> = rec.calls.lock().unwrap().iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(asked, vec![b"rm".to_vec()]);
}

struct Panics;
impl CompactionFilter for Panics {
    fn name(&self) -> &str {
        "panics"
    }
    fn filter(&self, _cx: &FilterContext, _key: &[u8], _value: &[u8]) -> Decision {
        panic!("filter bug")
    }
}

#[test]
fn compaction_filter_panic_fails_the_compaction_without_losing_data() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path(), Arc::new(Panics));
        for i in 0..20 {
            db.put(format!("k{i:02}"), format!("v{i}")).unwrap();
        }
        db.flush().unwrap();
        let err = db.compact_range(None, None).unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        // Background-error rules: reads go on, writes are refused.
        assert_eq!(db.get("k03").unwrap(), Some(b"v3".to_vec()));
        assert!(db.put("x", "y").is_err());
    }
    let db = Db::open(dir.path(), Options { disable_auto_compactions: true, ..tiny_options() }).unwrap();
    for i in 0..20 {
        assert_eq!(db.get(format!("k{i:02}")).unwrap(), Some(format!("v{i}").into_bytes()));
    }
    db.compact_range(None, None).unwrap();
    assert_eq!(db.iter().count(), 20);
}
