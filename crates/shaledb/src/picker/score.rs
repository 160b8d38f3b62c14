//! Level targets and compaction scores (see the module documentation of `picker`), and RocksDB's estimate of
//! the pending compaction bytes.

use crate::options::Options;
use crate::version::Version;
use shaledb_format::edit::FileMeta;
use std::collections::HashSet;
use std::sync::Arc;

/// Per-level size targets.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LevelTargets {
    /// Level L0 compacts into.
    pub base_level: usize,
    /// Target bytes per level (index = level). Index 0 is unused (0); `u64::MAX` means the level has no
    /// target (above the base level, or all of L1+ empty with dynamic level bytes).
    pub targets: Vec<u64>,
    /// Growth between the base level and the last: `max_bytes_for_level_multiplier`, except that dynamic
    /// level bytes stretch it when L0 is backlogged, as RocksDB does.
    pub multiplier: f64,
}

impl LevelTargets {
    /// Target of `level` (`u64::MAX` past the last level).
    pub fn target(&self, level: usize) -> u64 {
        self.targets.get(level).copied().unwrap_or(u64::MAX)
    }
}

/// Per-level byte targets, RocksDB's way (see the module documentation).
pub(crate) fn level_targets(v: &Version, o: &Options) -> LevelTargets {
    let n = v.num_levels();
    let mult = o.max_bytes_for_level_multiplier;
    let mut targets = vec![u64::MAX; n.max(1)];
    targets[0] = 0;
    if n < 2 {
        return LevelTargets { base_level: 0, targets, multiplier: mult };
    }
    if !o.level_compaction_dynamic_level_bytes {
        let mut t = o.max_bytes_for_level_base;
        for slot in targets.iter_mut().skip(1) {
            *slot = t;
            t = mul(t, mult);
        }
        return LevelTargets { base_level: 1, targets, multiplier: mult };
    }

    let last = n - 1;
    let first_non_empty = (1..n).find(|&l| v.level_bytes(l) > 0);
    let max_level_size = (1..n).map(|l| v.level_bytes(l)).max().unwrap_or(0);
    let Some(first_non_empty) = first_non_empty else {
        // Nothing below L0: L0 compacts straight into the last level, and no level has a size target.
        return LevelTargets { base_level: last, targets, multiplier: mult };
    };

    let base_max = o.max_bytes_for_level_base;
    let base_min = div(base_max, mult);
    // The size the first non-empty level would have if every level below it were `mult` times larger.
    let mut cur = max_level_size;
    for _ in first_non_empty..last {
        cur = div(cur, mult);
    }
    let (base_level, mut base_size) = if cur <= base_min {
        // The tree is small: keep the first non-empty level as base, with a target just above the minimum.
        (first_non_empty, base_min.saturating_add(1))
    } else {
        // Move the base up while it would be over `max_bytes_for_level_base`.
        let mut bl = first_non_empty;
        while bl > 1 && cur > base_max {
            bl -= 1;
            cur = div(cur, mult);
        }
        (bl, if cur > base_max { base_max } else { cur.max(1) })
    };

    let mut level_mult = mult;
    let l0_size = v.level_bytes(0);
    // A backlogged L0 would make the base level's target smaller than the data about to enter it; RocksDB
    // then sizes the base level for L0 and spreads the remaining growth evenly over the levels below.
    if l0_size > base_size && (l0_size > base_max || v.files(0).len() / 2 >= o.level0_file_num_compaction_trigger) {
        base_size = l0_size;
        level_mult = if base_level == last {
            1.0
        } else {
            (max_level_size as f64 / base_size as f64).powf(1.0 / (last - base_level) as f64)
        };
    }
    let mut size = base_size;
    for (l, slot) in targets.iter_mut().enumerate().skip(base_level) {
        if l > base_level {
            size = mul(size, level_mult);
        }
        // Never below `max_bytes_for_level_base`: an hourglass-shaped tree would starve L0 of compactions.
        *slot = size.max(base_max);
    }
    LevelTargets { base_level, targets, multiplier: level_mult }
}

/// Compaction scores of levels 0..=num_levels-2, highest first (ties: lower level first).
pub(crate) fn scores(v: &Version, o: &Options, busy: &HashSet<u64>) -> Vec<(usize, f64)> {
    let t = level_targets(v, o);
    scores_with(v, o, busy, &t)
}

pub(super) fn scores_with(v: &Version, o: &Options, busy: &HashSet<u64>, t: &LevelTargets) -> Vec<(usize, f64)> {
    let n = v.num_levels();
    if n < 2 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(n - 1);
    for level in 0..n - 1 {
        let idle: Vec<&Arc<FileMeta>> = v.files(level).iter().filter(|f| !busy.contains(&f.number)).collect();
        let idle_bytes = idle.iter().fold(0u64, |sum, f| sum.saturating_add(f.file_size));
        let score = if level == 0 {
            let by_count = idle.len() as f64 / o.level0_file_num_compaction_trigger.max(1) as f64;
            // L0 -> L0 merges do not exist here, but L0 files may still be large (big memtables): also
            // score by bytes, with the base level's target divided by the fan-out as the budget.
            let mut l0_target = o.max_bytes_for_level_base;
            if o.level_compaction_dynamic_level_bytes && t.multiplier > 0.0 {
                let base_target = t.target(t.base_level);
                if base_target != u64::MAX {
                    l0_target = l0_target.max(div(base_target, t.multiplier));
                }
            }
            by_count.max(idle_bytes as f64 / l0_target.max(1) as f64)
        } else {
            let target = t.target(level);
            if target == u64::MAX {
                0.0
            } else {
                idle_bytes as f64 / target.max(1) as f64
            }
        };
        out.push((level, score));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// RocksDB's estimate of the bytes compaction must rewrite to bring every level under its target; the
/// write controller compares it with the soft/hard pending-compaction-bytes limits.
pub(crate) fn pending_compaction_bytes(v: &Version, o: &Options) -> u64 {
    let n = v.num_levels();
    if n < 2 {
        return 0;
    }
    let t = level_targets(v, o);
    let l0_size = v.level_bytes(0);
    let l0_triggered =
        v.files(0).len() >= o.level0_file_num_compaction_trigger || l0_size >= o.max_bytes_for_level_base;
    let mut estimate: u64 = 0;
    // Bytes the level above will push into the current one.
    let mut carried: u64 = 0;
    if l0_triggered {
        estimate = l0_size;
        carried = l0_size;
    }
    // Size of the next level when already summed while estimating the fan-out.
    let mut next_level_size: u64 = 0;
    for level in t.base_level.max(1)..=n - 2 {
        let mut level_size = if next_level_size > 0 { next_level_size } else { v.level_bytes(level) };
        next_level_size = 0;
        if level == t.base_level && l0_triggered {
            estimate = estimate.saturating_add(level_size);
        }
        level_size = level_size.saturating_add(carried);
        carried = 0;
        let target = t.target(level);
        if level_size > target {
            carried = level_size - target;
            next_level_size = v.level_bytes(level + 1);
            if next_level_size > 0 {
                // Rewriting `carried` bytes also rewrites their share of the next level.
                let fan_out = next_level_size as f64 / level_size as f64 + 1.0;
                estimate = estimate.saturating_add((carried as f64 * fan_out) as u64);
            }
        }
    }
    estimate
}

fn mul(x: u64, m: f64) -> u64 {
    let r = x as f64 * m;
    if r >= u64::MAX as f64 {
        u64::MAX
    } else {
        r as u64
    }
}

fn div(x: u64, m: f64) -> u64 {
    if m <= 0.0 {
        return x;
    }
    (x as f64 / m) as u64
}
