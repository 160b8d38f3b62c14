//! [`ReadCounts`]: the read work of the storage layer, counted where the server asks the engine (or the
//! commit step's pending writes) for something. The engine counts its point lookups (`Statistics::gets`)
//! but not its seeks or the entries a cursor steps over, so a test that bounds what a command reads counts
//! here: switch it on with [`WriteCtx::count_reads`](super::WriteCtx::count_reads).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Running totals; shared by a [`WriteCtx`](super::WriteCtx) and every view and scan made from it.
#[derive(Debug, Default)]
pub struct ReadCounts {
    gets: AtomicU64,
    seeks: AtomicU64,
    steps: AtomicU64,
}

/// A sample of [`ReadCounts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    /// Point reads of one key (served by the pending writes or by `Db::get`).
    pub gets: u64,
    /// Scans begun: an engine cursor made and positioned (`seek`, `seek_to_last`).
    pub seeks: u64,
    /// Entries a scan moved over after its seek: each move of the engine cursor (`next`/`prev`, which
    /// steps over the engine's own tombstones unseen) and each pending write merged in, a pending delete
    /// included.
    pub steps: u64,
}

impl ReadCounts {
    pub(super) fn get(&self) {
        self.gets.fetch_add(1, Relaxed);
    }

    pub(super) fn seek(&self) {
        self.seeks.fetch_add(1, Relaxed);
    }

    pub(super) fn step(&self) {
        self.steps.fetch_add(1, Relaxed);
    }

    /// The totals so far.
    pub fn sample(&self) -> Reads {
        Reads { gets: self.gets.load(Relaxed), seeks: self.seeks.load(Relaxed), steps: self.steps.load(Relaxed) }
    }
}

impl std::ops::Sub for Reads {
    type Output = Reads;
    fn sub(self, o: Reads) -> Reads {
        Reads {
            gets: self.gets.saturating_sub(o.gets),
            seeks: self.seeks.saturating_sub(o.seeks),
            steps: self.steps.saturating_sub(o.steps),
        }
    }
}
