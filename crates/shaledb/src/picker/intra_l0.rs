//! Intra-L0 compaction: a span of L0's newest files merged into one L0 file, after RocksDB's
//! `FindIntraL0Compaction`.
//!
//! - **Leveled.** When L0 scores highest but its compaction into the base level cannot start (another L0
//!   compaction, or a compaction of the base level, holds a file it needs), and L0 holds at least
//!   `level0_file_num_compaction_trigger + 2` files, the newest free files are merged among themselves: L0's
//!   file count, which the write stalls compare with their triggers, falls while the other job runs, and a
//!   point lookup probes fewer L0 files. At least 4 files (RocksDB's `kMinFilesForIntraL0Compaction`).
//! - **FIFO** (`allow_compaction`): the same span rule, at least `level0_file_num_compaction_trigger` files of
//!   at most 1.1 x `write_buffer_size` per file removed.
//!
//! The span starts at the newest file and grows while the bytes rewritten per file removed keep falling and
//! the job stays under 25 target file sizes (RocksDB's `max_compaction_bytes` default); it stops at the first
//! busy file. Correctness rests on L0's order (largest sequence number first): the merged file takes the
//! largest sequence of its inputs, so it sorts where they were, above every older file and below every newer
//! one. Two kinds of file must stay out:
//!
//! - a file that a running job holds (the span stops there);
//! - a file with data newer than a memtable's (`earliest_mem_seq`): an ingested file takes a sequence number
//!   above the memtable's entries when their keys do not overlap. Merged with older files, it would carry their
//!   old versions above the memtable's newer ones once that is flushed (RocksDB's `earliest_mem_seqno` check).
//!   Such files at the newest end are skipped; the span starts below them.

use super::{CompactionReason, CompactionTask};
use crate::options::Options;
use crate::version::Version;
use shaledb_format::edit::FileMeta;
use std::collections::HashSet;
use std::sync::Arc;

/// RocksDB's `kMinFilesForIntraL0Compaction`.
const MIN_FILES_LEVELED: usize = 4;

/// How large a span may be.
pub(super) struct Limits {
    /// Fewest files merged.
    pub(super) min_files: usize,
    /// The bytes rewritten per file removed must stay below this.
    pub(super) max_bytes_per_removed_file: u64,
    /// Most bytes read.
    pub(super) max_compaction_bytes: u64,
}

/// RocksDB's `max_compaction_bytes` default: 25 target file sizes.
pub(super) fn max_compaction_bytes(o: &Options) -> u64 {
    o.target_file_size_base.saturating_mul(25)
}

/// The span of `l0` (newest first) to merge, or `None` (see the module documentation). `earliest_mem_seq` is a
/// lower bound on the sequence numbers of every memtable's entries.
pub(super) fn find_span(
    l0: &[Arc<FileMeta>],
    busy: &HashSet<u64>,
    earliest_mem_seq: u64,
    limits: &Limits,
) -> Option<Vec<Arc<FileMeta>>> {
    let mut start = 0;
    loop {
        let f = l0.get(start)?;
        if busy.contains(&f.number) {
            return None;
        }
        if f.largest_seq < earliest_mem_seq {
            break;
        }
        start += 1;
    }
    let mut bytes = l0.get(start)?.file_size;
    let mut per_removed = u64::MAX;
    let mut limit = start + 1;
    while let Some(f) = l0.get(limit) {
        bytes = bytes.saturating_add(f.file_size);
        // `limit - start` files are removed once `limit - start + 1` become one.
        let new_per_removed = bytes / (limit - start) as u64;
        if busy.contains(&f.number) || new_per_removed > per_removed || bytes > limits.max_compaction_bytes {
            break;
        }
        per_removed = new_per_removed;
        limit += 1;
    }
    if limit - start < limits.min_files || per_removed >= limits.max_bytes_per_removed_file {
        return None;
    }
    l0.get(start..limit).map(<[_]>::to_vec)
}

/// The task merging `inputs` (a span of L0) into one L0 file.
pub(super) fn task(v: &Version, inputs: Vec<Arc<FileMeta>>, reason: CompactionReason) -> Option<CompactionTask> {
    let lo = inputs.iter().map(|f| f.smallest_user_key()).min()?.to_vec();
    let hi = inputs.iter().map(|f| f.largest_user_key()).max()?.to_vec();
    // Tombstones may go only when nothing older holds the range: no L0 file below the span (the span must
    // end at L0's oldest file) and no deeper level.
    let includes_oldest = inputs.last().map(|f| f.number) == v.files(0).last().map(|f| f.number);
    let bottommost = includes_oldest && v.is_bottommost_for(0, &lo, &hi);
    Some(CompactionTask {
        level: 0,
        output_level: 0,
        inputs,
        output_inputs: Vec::new(),
        grandparents: Vec::new(),
        trivial_move: false,
        bottommost,
        score: 0.0,
        reason,
        // One output file: an L0 file is one sorted run.
        max_output_file_size: u64::MAX,
        more_inputs: Vec::new(),
        drop_only: false,
    })
}

/// Leveled compaction's intra-L0 task, when L0 holds `level0_file_num_compaction_trigger + 2` files or more.
pub(super) fn pick_leveled(
    v: &Version,
    o: &Options,
    busy: &HashSet<u64>,
    earliest_mem_seq: u64,
) -> Option<CompactionTask> {
    let l0 = v.files(0);
    if l0.len() < o.level0_file_num_compaction_trigger.saturating_add(2) {
        return None;
    }
    let limits = Limits {
        min_files: MIN_FILES_LEVELED,
        max_bytes_per_removed_file: u64::MAX,
        max_compaction_bytes: max_compaction_bytes(o),
    };
    let inputs = find_span(l0, busy, earliest_mem_seq, &limits)?;
    task(v, inputs, CompactionReason::LevelL0FilesNum)
}
