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
//! - **Intra-L0** (`allow_compaction`, within the size limit): the newest L0 files merged into one, as
//!   `intra_l0` describes: at least `level0_file_num_compaction_trigger` files, at most 1.1 x
//!   `write_buffer_size` rewritten per file removed.

use super::{intra_l0, CompactionReason, CompactionTask, CreationTime};
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
pub(super) fn pick(
    v: &Version,
    o: &Options,
    busy: &HashSet<u64>,
    ages: Ages<'_>,
    earliest_mem_seq: u64,
) -> Option<CompactionTask> {
    if v.levels.iter().flatten().any(|f| busy.contains(&f.number)) {
        return None;
    }
    if o.compaction_options_fifo.ttl > 0 {
        if let Some(t) = pick_ttl(v, o, ages.created, ages.now) {
            return Some(t);
        }
    }
    pick_size(v, o, earliest_mem_seq)
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

fn pick_size(v: &Version, o: &Options, earliest_mem_seq: u64) -> Option<CompactionTask> {
    let max = o.compaction_options_fifo.max_table_files_size;
    let total = v.total_bytes();
    let last = v.last_nonempty_level().unwrap_or(0);
    if last == 0 && total <= max {
        return if o.compaction_options_fifo.allow_compaction { pick_intra_l0(v, o, earliest_mem_seq) } else { None };
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

/// FIFO's intra-L0 merge (see `intra_l0`): nothing else runs (FIFO picks nothing while any file is busy).
fn pick_intra_l0(v: &Version, o: &Options, earliest_mem_seq: u64) -> Option<CompactionTask> {
    let limits = intra_l0::Limits {
        min_files: o.level0_file_num_compaction_trigger.max(2),
        max_bytes_per_removed_file: (o.write_buffer_size as f64 * 1.1) as u64,
        max_compaction_bytes: intra_l0::max_compaction_bytes(o),
    };
    let inputs = intra_l0::find_span(v.files(0), &HashSet::new(), earliest_mem_seq, &limits)?;
    intra_l0::task(v, inputs, CompactionReason::FifoReduceNumFiles)
}

#[cfg(test)]
#[path = "fifo_tests.rs"]
mod tests;
