//! Snapshots: a sequence number pinned so that compaction keeps the versions it can see.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

/// The live snapshots of one database: `(sequence number, handle id)` -> the Unix time (seconds) the snapshot
/// was taken. The id orders snapshots taken at one sequence by creation, so the first entry is the oldest
/// snapshot (RocksDB's `snapshots_.oldest()`).
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<(u64, u64), u64>>,
    next_id: AtomicU64,
}

impl SnapshotList {
    /// Registers a snapshot at `seq`.
    #[cfg(test)]
    pub(crate) fn acquire(self: &Arc<Self>, seq: u64) -> Snapshot {
        self.acquire_with(|| seq)
    }

    /// Registers a snapshot at the sequence `current` returns, called with the list locked: a reader of
    /// [`SnapshotList::sequences`] sees either no snapshot or this one with this sequence, never a sequence
    /// taken earlier and registered later (the race of issue 9, where a compaction in that gap dropped the
    /// versions the snapshot reads).
    pub(crate) fn acquire_with(self: &Arc<Self>, current: impl FnOnce() -> u64) -> Snapshot {
        let unix_time = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut live = self.live.lock();
        let seq = current();
        live.insert((seq, id), unix_time);
        drop(live);
        Snapshot { inner: Arc::new(SnapshotInner { seq, id, unix_time, list: Arc::downgrade(self) }) }
    }

    /// The pinned sequence numbers, ascending, each once.
    pub(crate) fn sequences(&self) -> Vec<u64> {
        let mut seqs: Vec<u64> = self.live.lock().keys().map(|(seq, _)| *seq).collect();
        seqs.dedup();
        seqs
    }

    /// How many snapshots are live (`rocksdb.num-snapshots`).
    pub(crate) fn len(&self) -> usize {
        self.live.lock().len()
    }

    /// The Unix time of the oldest live snapshot, 0 without one (`rocksdb.oldest-snapshot-time`).
    pub(crate) fn oldest_time(&self) -> u64 {
        self.live.lock().values().next().copied().unwrap_or(0)
    }

    fn release(&self, seq: u64, id: u64) {
        self.live.lock().remove(&(seq, id));
    }
}

#[derive(Debug)]
struct SnapshotInner {
    seq: u64,
    id: u64,
    unix_time: u64,
    list: Weak<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        if let Some(list) = self.list.upgrade() {
            list.release(self.seq, self.id);
        }
    }
}

/// A consistent read view of the database, released when the last clone is dropped.
///
/// Pass it in [`crate::ReadOptions::snapshot`]; reads then see exactly the writes acknowledged before
/// [`crate::Db::snapshot`] returned.
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> u64 {
        self.inner.seq
    }

    /// When the snapshot was taken, in seconds since the Unix epoch (RocksDB's `Snapshot::GetUnixTime`).
    pub fn unix_time(&self) -> u64 {
        self.inner.unix_time
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_on_last_drop() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(5);
        let b = a.clone();
        let c = list.acquire(3);
        let d = list.acquire(3);
        assert_eq!(list.sequences(), vec![3, 5]);
        assert_eq!(list.len(), 3);
        assert_eq!(list.oldest_time(), c.unix_time());
        assert!(c.unix_time() > 0);
        drop(d);
        drop(a);
        assert_eq!(list.sequences(), vec![3, 5]);
        drop(b);
        assert_eq!(list.sequences(), vec![3]);
        assert_eq!(list.len(), 1);
        drop(c);
        assert!(list.sequences().is_empty());
        assert_eq!((list.len(), list.oldest_time()), (0, 0));
    }
}
