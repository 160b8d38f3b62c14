//! Which files a compaction takes: L0's oldest file and its transitive overlaps, the Ln file with the least
//! overlap per byte, clean cuts between files sharing a user key, LevelDB's input widening, grandparents.

use super::score::{level_targets, LevelTargets};
use super::{CompactionReason, CompactionTask};
use crate::options::Options;
use crate::version::Version;
use shaledb_format::edit::FileMeta;
use std::collections::HashSet;
use std::sync::Arc;

fn total_size(files: &[Arc<FileMeta>]) -> u64 {
    // Sizes come from the MANIFEST: saturate rather than wrap or panic.
    files.iter().fold(0u64, |sum, f| sum.saturating_add(f.file_size))
}

/// RocksDB: a file's overlap with the grandparent level is kept under 10 target file sizes.
pub(crate) fn max_grandparent_overlap(max_output_file_size: u64) -> u64 {
    max_output_file_size.saturating_mul(10)
}

/// Output file size for `output_level`: `target_file_size_base` grows per level below the base level.
fn output_file_size(o: &Options, output_level: usize, base_level: usize) -> u64 {
    if o.level_compaction_dynamic_level_bytes {
        // Levels above the base are empty, so counting from the base keeps RocksDB's sizes per depth.
        o.target_file_size(output_level.saturating_sub(base_level.saturating_sub(1)))
    } else {
        o.target_file_size(output_level)
    }
}

fn user_range(files: &[Arc<FileMeta>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| f.smallest_user_key()).min()?;
    let hi = files.iter().map(|f| f.largest_user_key()).max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

/// Index range `[i, j)` of the files of a sorted level intersecting `[begin, end]`.
pub(super) fn sorted_overlap_range(
    files: &[Arc<FileMeta>],
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> (usize, usize) {
    let i = match begin {
        Some(b) => files.partition_point(|f| f.largest_user_key() < b),
        None => 0,
    };
    let mut j = i;
    while let Some(f) = files.get(j) {
        if end.is_some_and(|e| f.smallest_user_key() > e) {
            break;
        }
        j += 1;
    }
    (i, j)
}

/// Widens `[i, j)` of a sorted level so that no user key is split between a chosen and an unchosen file
/// (possible when a user key's versions straddle two files).
pub(super) fn clean_cut(files: &[Arc<FileMeta>], mut i: usize, mut j: usize) -> (usize, usize) {
    if i >= j {
        return (i, j);
    }
    while i > 0 {
        match (files.get(i - 1), files.get(i)) {
            (Some(prev), Some(cur)) if prev.largest_user_key() == cur.smallest_user_key() => i -= 1,
            _ => break,
        }
    }
    while let (Some(last), Some(next)) = (files.get(j - 1), files.get(j)) {
        if last.largest_user_key() == next.smallest_user_key() {
            j += 1;
        } else {
            break;
        }
    }
    (i, j)
}

/// Files of `level` overlapping `[lo, hi]`: transitive for L0, clean-cut for sorted levels.
fn level_overlaps(v: &Version, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<FileMeta>> {
    if level == 0 {
        return v.overlapping_files(0, Some(lo), Some(hi));
    }
    let files = v.files(level);
    let (i, j) = sorted_overlap_range(files, Some(lo), Some(hi));
    let (i, j) = clean_cut(files, i, j);
    files.get(i..j).map(<[_]>::to_vec).unwrap_or_default()
}

fn any_busy(files: &[Arc<FileMeta>], busy: &HashSet<u64>) -> bool {
    files.iter().any(|f| busy.contains(&f.number))
}

/// Completes a task from its input-level files: output-level overlap, optional widening of the inputs,
/// grandparents, trivial move and bottommost flags. `None` when a needed file is busy.
pub(super) fn build_task(
    v: &Version,
    o: &Options,
    level: usize,
    output_level: usize,
    mut inputs: Vec<Arc<FileMeta>>,
    busy: &HashSet<u64>,
    reason: CompactionReason,
) -> Option<CompactionTask> {
    let t = level_targets(v, o);
    let max_output_file_size = output_file_size(o, output_level, t.base_level);
    let (lo, hi) = user_range(&inputs)?;
    let mut output_inputs = level_overlaps(v, output_level, &lo, &hi);
    if any_busy(&output_inputs, busy) {
        return None;
    }
    if let Some((all_lo, all_hi)) = user_range(&[inputs.as_slice(), output_inputs.as_slice()].concat()) {
        // LevelDB's input widening: take more input-level files when that costs no extra output-level file
        // and keeps the job bounded (25 target file sizes).
        let wider = level_overlaps(v, level, &all_lo, &all_hi);
        if wider.len() > inputs.len()
            && !any_busy(&wider, busy)
            && total_size(&wider).saturating_add(total_size(&output_inputs)) < max_output_file_size.saturating_mul(25)
        {
            if let Some((wlo, whi)) = user_range(&wider) {
                let wider_out = level_overlaps(v, output_level, &wlo, &whi);
                if wider_out.len() == output_inputs.len() && !any_busy(&wider_out, busy) {
                    inputs = wider;
                    output_inputs = wider_out;
                }
            }
        }
    }
    let (lo, hi) = user_range(&[inputs.as_slice(), output_inputs.as_slice()].concat())?;
    let grandparents =
        if output_level + 1 < v.num_levels() { level_overlaps(v, output_level + 1, &lo, &hi) } else { Vec::new() };
    let trivial_move = inputs.len() == 1
        && output_inputs.is_empty()
        && total_size(&grandparents) <= max_grandparent_overlap(max_output_file_size);
    let bottommost = v.is_bottommost_for(output_level, &lo, &hi);
    Some(CompactionTask {
        level,
        output_level,
        inputs,
        output_inputs,
        grandparents,
        trivial_move,
        bottommost,
        score: 0.0,
        reason,
        max_output_file_size,
        more_inputs: Vec::new(),
        drop_only: false,
    })
}

/// A task rewriting `inputs` (files of `level`) into `level` itself: no output-level inputs, never a move.
pub(super) fn rewrite_task(
    v: &Version,
    o: &Options,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
    reason: CompactionReason,
) -> Option<CompactionTask> {
    let t = level_targets(v, o);
    let max_output_file_size = output_file_size(o, level, t.base_level);
    let (lo, hi) = user_range(&inputs)?;
    let grandparents = if level + 1 < v.num_levels() { level_overlaps(v, level + 1, &lo, &hi) } else { Vec::new() };
    Some(CompactionTask {
        level,
        output_level: level,
        inputs,
        output_inputs: Vec::new(),
        grandparents,
        trivial_move: false,
        bottommost: v.is_bottommost_for(level, &lo, &hi),
        score: 0.0,
        reason,
        max_output_file_size,
        more_inputs: Vec::new(),
        drop_only: false,
    })
}

pub(super) fn pick_l0(v: &Version, o: &Options, busy: &HashSet<u64>, t: &LevelTargets) -> Option<CompactionTask> {
    let l0 = v.files(0);
    // One L0 compaction at a time: see the module documentation.
    if any_busy(l0, busy) {
        return None;
    }
    let oldest = l0.last()?;
    let inputs = v.overlapping_files(0, Some(oldest.smallest_user_key()), Some(oldest.largest_user_key()));
    let output_level = t.base_level.max(1);
    build_task(v, o, 0, output_level, inputs, busy, CompactionReason::LevelL0FilesNum)
}

pub(super) fn pick_level(v: &Version, o: &Options, level: usize, busy: &HashSet<u64>) -> Option<CompactionTask> {
    let output_level = level + 1;
    if output_level >= v.num_levels() {
        return None;
    }
    let files = v.files(level);
    let next = v.files(output_level);
    // (overlap bytes, file size, smallest seq, index): sorted so the cheapest push-down comes first.
    let mut candidates: Vec<(u64, u64, u64, usize)> = Vec::new();
    for (idx, f) in files.iter().enumerate() {
        if busy.contains(&f.number) {
            continue;
        }
        let (i, j) = sorted_overlap_range(next, Some(f.smallest_user_key()), Some(f.largest_user_key()));
        let overlap = next.get(i..j).map(total_size).unwrap_or(0);
        candidates.push((overlap, f.file_size.max(1), f.smallest_seq, idx));
    }
    candidates.sort_by(|a, b| {
        // a.overlap / a.size < b.overlap / b.size, without division.
        let lhs = u128::from(a.0) * u128::from(b.1);
        let rhs = u128::from(b.0) * u128::from(a.1);
        lhs.cmp(&rhs).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3))
    });
    for (_, _, _, idx) in candidates {
        let (i, j) = clean_cut(files, idx, idx + 1);
        let inputs = match files.get(i..j) {
            Some(s) => s.to_vec(),
            None => continue,
        };
        if any_busy(&inputs, busy) {
            continue;
        }
        if let Some(task) = build_task(v, o, level, output_level, inputs, busy, CompactionReason::LevelMaxLevelSize) {
            return Some(task);
        }
    }
    None
}
