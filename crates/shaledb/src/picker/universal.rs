//! Universal compaction picking, after RocksDB 7.8's `UniversalCompactionPicker`: a pure function of the
//! version, the options and the busy files.
//!
//! - **Sorted runs.** Each L0 file is a run (newest first), then each non-empty level below is one run. A run
//!   is busy when any of its files is. Newer data always sits in earlier runs.
//! - **Trigger.** Nothing is picked while fewer than `level0_file_num_compaction_trigger` runs are idle.
//! - **Order of rules**, the first that yields a task wins:
//!   1. *Size amplification*: when the runs from the first idle one down to (not including) the oldest sum to
//!      at least `max_size_amplification_percent`% of the oldest run, all of them and the oldest are merged
//!      into the last level. Not when a run after the first idle one is busy.
//!   2. *Size ratio*: from each idle run in turn, later runs are added while the next is no larger than
//!      `(100 + size_ratio)%` of the picked total (`TotalSize`) or of the last picked run, and not much
//!      smaller than it (`SimilarSize`); at most `max_merge_width` runs. The first start giving at least
//!      `min_merge_width` runs wins.
//!   3. *Run count*: when more than `level0_file_num_compaction_trigger` runs are idle, the size ratio is
//!      ignored and `idle - trigger + 1` runs are merged from the first idle one.
//! - **Output level.** Merging the oldest run writes the last level; otherwise the level just above the next
//!   older run (L0 when that run is an L0 file), so newer data stays above older data. An L0 output is one
//!   file (an L0 file is one run); deeper outputs are cut at the level's `target_file_size`.
//! - **Trivial move** (`allow_trivial_move`): when no two picked files overlap, they are moved to the output
//!   level by a version edit.
//! - **Concurrency.** Tasks take consecutive idle runs and write between them and the next older run, so
//!   several run at once without crossing (RocksDB runs parallel universal compactions the same way).

use super::{CompactionReason, CompactionTask};
use crate::compaction_style::CompactionStopStyle;
use crate::options::Options;
use crate::version::Version;
use shaledb_format::edit::FileMeta;
use std::collections::HashSet;
use std::sync::Arc;

/// One sorted run: an L0 file, or every file of a level below.
#[derive(Debug)]
struct SortedRun {
    level: usize,
    files: Vec<Arc<FileMeta>>,
    size: u64,
    busy: bool,
}

fn sorted_runs(v: &Version, busy: &HashSet<u64>) -> Vec<SortedRun> {
    let is_busy = |f: &Arc<FileMeta>| busy.contains(&f.number);
    let mut runs: Vec<SortedRun> = v
        .files(0)
        .iter()
        .map(|f| SortedRun { level: 0, files: vec![f.clone()], size: f.file_size, busy: is_busy(f) })
        .collect();
    for level in 1..v.num_levels() {
        let files = v.files(level);
        if !files.is_empty() {
            runs.push(SortedRun {
                level,
                files: files.to_vec(),
                size: v.level_bytes(level),
                busy: files.iter().any(is_busy),
            });
        }
    }
    runs
}

/// All sorted runs, busy or not (the write stalls' count under universal compaction).
pub(super) fn sorted_run_count(v: &Version) -> usize {
    v.files(0).len() + (1..v.num_levels()).filter(|&l| !v.files(l).is_empty()).count()
}

/// The next universal compaction (see the module documentation).
pub(super) fn pick(v: &Version, o: &Options, busy: &HashSet<u64>) -> Option<CompactionTask> {
    let runs = sorted_runs(v, busy);
    let trigger = o.level0_file_num_compaction_trigger.max(1);
    let idle = runs.iter().filter(|r| !r.busy).count();
    if idle < trigger {
        return None;
    }
    let u = &o.compaction_options_universal;
    if let Some(t) = reduce_size_amp(v, o, &runs) {
        return Some(t);
    }
    if let Some((start, n)) = reduce_sorted_runs(&runs, o, u.size_ratio, u32::MAX) {
        return build(v, o, &runs, start, n, CompactionReason::UniversalSizeRatio);
    }
    if idle > trigger {
        let width = u32::try_from(idle - trigger + 1).unwrap_or(u32::MAX);
        if let Some((start, n)) = reduce_sorted_runs(&runs, o, u32::MAX, width) {
            return build(v, o, &runs, start, n, CompactionReason::UniversalSortedRunNum);
        }
    }
    None
}

fn reduce_size_amp(v: &Version, o: &Options, runs: &[SortedRun]) -> Option<CompactionTask> {
    let (oldest, newer) = runs.split_last()?;
    let start = newer.iter().position(|r| !r.busy)?;
    if oldest.busy || newer[start..].iter().any(|r| r.busy) {
        return None;
    }
    let candidate = newer[start..].iter().fold(0u64, |s, r| s.saturating_add(r.size));
    let percent = u128::from(o.compaction_options_universal.max_size_amplification_percent);
    if u128::from(candidate) * 100 < percent * u128::from(oldest.size) {
        return None;
    }
    build(v, o, runs, start, runs.len() - start, CompactionReason::UniversalSizeAmplification)
}

/// RocksDB's `PickCompactionToReduceSortedRuns`: `(first run, count)` of the merge, if any.
fn reduce_sorted_runs(runs: &[SortedRun], o: &Options, ratio: u32, max_files: u32) -> Option<(usize, usize)> {
    let u = &o.compaction_options_universal;
    let min_width = u.min_merge_width.max(2) as usize;
    let max_width = u.max_merge_width.min(max_files) as usize;
    let grow = |x: u64| x as f64 * (100.0 + f64::from(ratio)) / 100.0;
    let mut loop_i = 0;
    while loop_i < runs.len() {
        // The next idle run starts a candidate.
        let Some(start) = (loop_i..runs.len()).find(|&i| !runs[i].busy) else { break };
        let mut candidate_size = runs[start].size;
        let mut count = 1usize;
        for next in runs.iter().skip(start + 1) {
            if count >= max_width || next.busy || grow(candidate_size) < next.size as f64 {
                break;
            }
            match u.stop_style {
                CompactionStopStyle::SimilarSize => {
                    // A run much smaller than the last picked one starts its own candidate later.
                    if grow(next.size) < candidate_size as f64 {
                        break;
                    }
                    candidate_size = next.size;
                }
                CompactionStopStyle::TotalSize => candidate_size = candidate_size.saturating_add(next.size),
            }
            count += 1;
        }
        if count >= min_width {
            return Some((start, count));
        }
        loop_i = start + 1;
    }
    None
}

/// The task merging `runs[start..start + n]`.
fn build(
    v: &Version,
    o: &Options,
    runs: &[SortedRun],
    start: usize,
    n: usize,
    reason: CompactionReason,
) -> Option<CompactionTask> {
    if n < 2 {
        return None;
    }
    let picked = runs.get(start..start + n)?;
    let after = runs.get(start + n);
    let output_level = match after {
        None => v.num_levels() - 1,
        Some(r) if r.level == 0 => 0,
        Some(r) => r.level - 1,
    };
    let level = picked.first()?.level;
    let (mut inputs, mut more_inputs, mut output_inputs) = (Vec::new(), Vec::new(), Vec::new());
    for r in picked {
        for f in &r.files {
            if r.level == level {
                inputs.push(f.clone());
            } else if r.level == output_level {
                output_inputs.push(f.clone());
            } else {
                more_inputs.push((r.level, f.clone()));
            }
        }
    }
    let all: Vec<&Arc<FileMeta>> =
        inputs.iter().chain(more_inputs.iter().map(|(_, f)| f)).chain(output_inputs.iter()).collect();
    // Into L0 a move would leave every file where it is (and be picked again): those merge instead.
    let trivial_move = o.compaction_options_universal.allow_trivial_move && output_level > 0 && !any_overlap(&all);
    Some(CompactionTask {
        level,
        output_level,
        inputs,
        output_inputs,
        grandparents: Vec::new(),
        trivial_move,
        // Nothing older than the oldest run.
        bottommost: after.is_none(),
        score: 0.0,
        reason,
        // One L0 file per run; deeper runs are cut like leveled outputs.
        max_output_file_size: if output_level == 0 { u64::MAX } else { o.target_file_size(output_level) },
        more_inputs,
        drop_only: false,
    })
}

/// True when two of `files` share a user key.
fn any_overlap(files: &[&Arc<FileMeta>]) -> bool {
    let mut sorted: Vec<&Arc<FileMeta>> = files.to_vec();
    sorted.sort_by(|a, b| a.smallest_user_key().cmp(b.smallest_user_key()));
    sorted.windows(2).any(|w| w[1].smallest_user_key() <= w[0].largest_user_key())
}

/// `compact_range` under universal compaction: every file merged into the last level, the range ignored, as
/// RocksDB's `CompactRange` does with more than one level. `None` when a file is busy, or when the database
/// is already one run in the last level and no compaction filter (or TTL mode) asks for a rewrite.
pub(super) fn pick_manual(v: &Version, o: &Options, busy: &HashSet<u64>) -> Option<CompactionTask> {
    let runs = sorted_runs(v, busy);
    if runs.is_empty() || runs.iter().any(|r| r.busy) {
        return None;
    }
    let filtered = o.compaction_filter.is_some() || o.ttl.is_some();
    let last = v.num_levels() - 1;
    if runs.len() == 1 && runs[0].level == last && !filtered {
        return None;
    }
    if runs.len() == 1 {
        // One run to rewrite in place (filter) or to bring down: `build` wants two, so do it here.
        let r = &runs[0];
        return Some(CompactionTask {
            level: r.level,
            output_level: last,
            inputs: r.files.clone(),
            output_inputs: Vec::new(),
            grandparents: Vec::new(),
            trivial_move: false,
            bottommost: true,
            score: 0.0,
            reason: CompactionReason::ManualCompaction,
            max_output_file_size: o.target_file_size(last),
            more_inputs: Vec::new(),
            drop_only: false,
        });
    }
    let mut t = build(v, o, &runs, 0, runs.len(), CompactionReason::ManualCompaction)?;
    // Called to purge tombstones or run a filter: always a rewrite.
    t.trivial_move = false;
    Some(t)
}

#[cfg(test)]
#[path = "universal_tests.rs"]
pub(super) mod tests;
