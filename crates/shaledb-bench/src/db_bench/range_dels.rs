//! db_bench's range deletions during writes: `--writes_per_range_tombstone`, `--writes_before_delete_range`,
//! `--max_num_range_tombstones`, `--range_tombstone_width` and `--expand_range_tombstones`.
//!
//! As db_bench does in its write loop (`DoWrite`: fillrandom, fillseq, overwrite, ...) and in the background
//! writer of readwhilewriting and seekrandomwhilewriting (`BGWriter`): after the `n`-th write of a thread, when
//! `n > writes_before_delete_range`, `(n - writes_before_delete_range) % writes_per_range_tombstone == 0` and
//! `(n - writes_before_delete_range) / writes_per_range_tombstone <= max_num_range_tombstones`, the thread
//! deletes the `range_tombstone_width` keys from a key chosen as its next write key would be (the fill loops)
//! or at random (the background writer): with one range deletion, or with `--expand_range_tombstones` one
//! point deletion per key. Each thread prints `Number of range deletions: N` when it made any, as db_bench does.

use crate::db_bench::flags::BenchFlags;

/// When and how wide a thread deletes ranges while it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeDelPlan {
    /// `--writes_before_delete_range`.
    pub writes_before: u64,
    /// `--writes_per_range_tombstone` (at least 1).
    pub every: u64,
    /// `--max_num_range_tombstones`.
    pub max: u64,
    /// `--range_tombstone_width`: keys per deletion.
    pub width: u64,
    /// `--expand_range_tombstones`: point deletions instead of one range deletion.
    pub expand: bool,
}

impl RangeDelPlan {
    /// The plan the flags describe; `None` when `--writes_per_range_tombstone` is 0 (db_bench's default).
    pub fn from_flags(f: &BenchFlags) -> Option<RangeDelPlan> {
        (f.writes_per_range_tombstone > 0).then_some(RangeDelPlan {
            writes_before: f.writes_before_delete_range,
            every: f.writes_per_range_tombstone,
            max: f.max_num_range_tombstones,
            width: f.range_tombstone_width,
            expand: f.expand_range_tombstones,
        })
    }

    /// True when a thread deletes a range right after its `written`-th write.
    pub fn due(&self, written: u64) -> bool {
        let Some(n) = written.checked_sub(self.writes_before).filter(|&n| n > 0) else { return false };
        n % self.every == 0 && n / self.every <= self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_as_db_bench_counts() {
        let p = RangeDelPlan { writes_before: 10, every: 5, max: 2, width: 100, expand: false };
        let due: Vec<u64> = (0..40).filter(|&n| p.due(n)).collect();
        assert_eq!(due, vec![15, 20], "after 10 writes, every 5, at most 2");
        let none = RangeDelPlan { max: 0, ..p };
        assert!((0..100).all(|n| !none.due(n)), "max 0: never, as in db_bench");
    }
}
