//! FIFO compaction picking, after RocksDB 7.8's `FIFOCompactionPicker`: a pure function of the version, the
//! options, the busy files, each table's creation time and the current time.
//!
//! - **One at a time.** Nothing is picked while any file is busy (RocksDB: "no need to run parallel
//!   compactions since compactions are very fast").
//! - **TTL** (`ttl > 0`): L0 files are dropped oldest first while their creation time is more than `ttl`
//!   seconds ago; an unknown creation time stops the walk. Used only when what L0 keeps is then within
//!   `max_table_files_size`; otherwise the size rule runs.
//! - **Size**: when the tables of all levels exceed `max_table_files_size`, L0 files are dropped oldest first
//!   until the rest fits. While a level below L0 holds data (a database switched to FIFO from another style),
//!   the last non-empty level is dropped first, smallest keys first (RocksDB's migration rule: a deeper
//!   level's file times say nothing about the age of its data).
//! - **Intra-L0** (`allow_compaction`, within the size limit): from the newest L0 file, files are added while
//!   the bytes rewritten per file removed keep falling and the job stays under 25 target file sizes (RocksDB's
//!   `max_compaction_bytes` default); at least `level0_file_num_compaction_trigger` files, each at most
//!   1.1 x `write_buffer_size` per file removed, are merged into one L0 file.

use super::{CompactionReason, CompactionTask, CreationTime};
use crate::options::Options;
use crate::version::Version;
use shaledb_format::edit::FileMeta;
use std::collections::HashSet;
use std::sync::Arc;

/// What FIFO's TTL rule needs: each table's creation time and the current time, in seconds since the UNIX
/// epoch.
pub(super) struct Ages<'a> {
    pub(super) created: CreationTime<'a>,
    pub(super) now: u64,
}

/// The next FIFO compaction (see the module documentation).
pub(super) fn pick(v: &Version, o: &Options, busy: &HashSet<u64>, ages: Ages<'_>) -> Option<CompactionTask> {
    if v.levels.iter().flatten().any(|f| busy.contains(&f.number)) {
        return None;
    }
    if o.compaction_options_fifo.ttl > 0 {
        if let Some(t) = pick_ttl(v, o, ages.created, ages.now) {
            return Some(t);
        }
    }
    pick_size(v, o)
}

fn drop_task(level: usize, inputs: Vec<Arc<FileMeta>>, reason: CompactionReason) -> Option<CompactionTask> {
    if inputs.is_empty() {
        return None;
    }
    Some(CompactionTask {
        level,
        output_level: level,
        inputs,
        output_inputs: Vec::new(),
        grandparents: Vec::new(),
        trivial_move: false,
        bottommost: false,
        score: 0.0,
        reason,
        max_output_file_size: 0,
        more_inputs: Vec::new(),
        drop_only: true,
    })
}

fn pick_ttl(v: &Version, o: &Options, created: CreationTime<'_>, now: u64) -> Option<CompactionTask> {
    let f = &o.compaction_options_fifo;
    let cutoff = now.checked_sub(f.ttl)?;
    let mut remaining = v.level_bytes(0);
    let mut inputs = Vec::new();
    // L0 is newest first: walk it from the back.
    for file in v.files(0).iter().rev() {
        match created(file) {
            Some(t) if t < cutoff => {}
            _ => break,
        }
        remaining = remaining.saturating_sub(file.file_size);
        inputs.push(file.clone());
    }
    if remaining > f.max_table_files_size {
        return None;
    }
    drop_task(0, inputs, CompactionReason::FifoTtl)
}

fn pick_size(v: &Version, o: &Options) -> Option<CompactionTask> {
    let max = o.compaction_options_fifo.max_table_files_size;
    let total = v.total_bytes();
    let last = v.last_nonempty_level().unwrap_or(0);
    if last == 0 && total <= max {
        return if o.compaction_options_fifo.allow_compaction { pick_intra_l0(v, o) } else { None };
    }
    if total <= max {
        return None;
    }
    let mut remaining = total;
    let mut inputs = Vec::new();
    // L0: oldest (last) first. Deeper levels: smallest keys first.
    let order: Box<dyn Iterator<Item = &Arc<FileMeta>>> =
        if last == 0 { Box::new(v.files(0).iter().rev()) } else { Box::new(v.files(last).iter()) };
    for file in order {
        remaining = remaining.saturating_sub(file.file_size);
        inputs.push(file.clone());
        if remaining <= max {
            break;
        }
    }
    drop_task(last, inputs, CompactionReason::FifoMaxSize)
}

/// RocksDB's `FindIntraL0Compaction` from the newest L0 file.
fn pick_intra_l0(v: &Version, o: &Options) -> Option<CompactionTask> {
    let l0 = v.files(0);
    let min_files = o.level0_file_num_compaction_trigger.max(2);
    let max_bytes_per_del_file = (o.write_buffer_size as f64 * 1.1) as u64;
    let max_compaction_bytes = o.target_file_size_base.saturating_mul(25);
    let first = l0.first()?;
    let mut bytes = first.file_size;
    let mut per_del_file = u64::MAX;
    let mut limit = 1;
    while let Some(f) = l0.get(limit) {
        bytes = bytes.saturating_add(f.file_size);
        let new_per_del_file = bytes / limit as u64;
        if new_per_del_file > per_del_file || bytes > max_compaction_bytes {
            break;
        }
        per_del_file = new_per_del_file;
        limit += 1;
    }
    if limit < min_files || per_del_file >= max_bytes_per_del_file {
        return None;
    }
    Some(CompactionTask {
        level: 0,
        output_level: 0,
        inputs: l0.get(..limit)?.to_vec(),
        output_inputs: Vec::new(),
        grandparents: Vec::new(),
        trivial_move: false,
        bottommost: limit == l0.len() && v.last_nonempty_level().unwrap_or(0) == 0,
        score: 0.0,
        reason: CompactionReason::FifoReduceNumFiles,
        // One output file: an L0 file is one sorted run.
        max_output_file_size: u64::MAX,
        more_inputs: Vec::new(),
        drop_only: false,
    })
}

#[cfg(test)]
#[path = "fifo_tests.rs"]
mod tests;
