//! Snapshots: a sequence number pinned so that compaction keeps the versions it can see.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// The live snapshots of one database: sequence number -> how many handles pin it.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<u64, usize>>,
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
        let mut live = self.live.lock();
        let seq = current();
        *live.entry(seq).or_insert(0) += 1;
        drop(live);
        Snapshot { inner: Arc::new(SnapshotInner { seq, list: Arc::downgrade(self) }) }
    }

    /// The pinned sequence numbers, ascending.
    pub(crate) fn sequences(&self) -> Vec<u64> {
        self.live.lock().keys().copied().collect()
    }

    fn release(&self, seq: u64) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                live.remove(&seq);
            }
        }
    }
}

#[derive(Debug)]
struct SnapshotInner {
    seq: u64,
    list: Weak<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        if let Some(list) = self.list.upgrade() {
            list.release(self.seq);
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
        assert_eq!(list.sequences(), vec![3, 5]);
        drop(a);
        assert_eq!(list.sequences(), vec![3, 5]);
        drop(b);
        assert_eq!(list.sequences(), vec![3]);
        drop(c);
        assert!(list.sequences().is_empty());
    }
}
