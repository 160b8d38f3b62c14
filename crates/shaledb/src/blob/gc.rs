//! Forced blob garbage collection (`blob_garbage_collection_force_threshold`, RocksDB's
//! `ComputeFilesMarkedForForcedBlobGC`): once the oldest blob file within the age cutoff holds at least the
//! threshold's fraction of garbage, the tables whose oldest blob reference names it are compacted, so garbage
//! collection relocates their values and the file's last references go.
//!
//! RocksDB sums the garbage of the oldest batch of blob files that share the same linked tables; ShaleDB looks at
//! the oldest file alone (its compactions write one batch per job, and the oldest file is what blocks space
//! reclamation). A table's oldest blob file comes from its `oldest_blob_file` property (docs/format/sst.md),
//! read through the table cache.

use crate::picker::{self, CompactionReason, CompactionTask};
use crate::table_cache::TableCache;
use crate::version::Version;
use std::collections::HashSet;

/// The oldest blob file when it is due for forced collection: within the age cutoff, garbage ratio at least
/// the threshold. `None` when collection or forcing is off.
pub(crate) fn forced_target(o: &crate::Options, v: &Version) -> Option<u64> {
    if !o.enable_blob_garbage_collection || o.blob_garbage_collection_force_threshold >= 1.0 {
        return None;
    }
    let old = (v.blob_files.len() as f64 * o.blob_garbage_collection_age_cutoff) as usize;
    let (&number, meta) = v.blob_files.iter().next()?;
    (old > 0 && meta.garbage_ratio() >= o.blob_garbage_collection_force_threshold).then_some(number)
}

/// A compaction of a table whose oldest blob reference names the file [`forced_target`] picks, avoiding
/// `busy` files; never a trivial move (a move would not relocate anything). REQUIRES: `state` locked (a table
/// not in the table cache is opened meanwhile: only while collection is due).
pub(crate) fn pick_forced(
    tables: &TableCache,
    o: &crate::Options,
    v: &Version,
    busy: &HashSet<u64>,
) -> Option<CompactionTask> {
    let target = forced_target(o, v)?;
    for level in 0..v.num_levels() {
        for f in v.files(level) {
            if busy.contains(&f.number) {
                continue;
            }
            let Ok(t) = tables.get(f) else { continue };
            if t.properties().oldest_blob_file != Some(target) {
                continue;
            }
            let (lo, hi) = (Some(f.smallest_user_key()), Some(f.largest_user_key()));
            let task = if level + 1 < v.num_levels() {
                picker::pick_manual(v, o, level, lo, hi, busy)
            } else {
                picker::pick_bottom_rewrite(v, o, lo, hi, busy)
            };
            if let Some(mut task) = task {
                task.trivial_move = false;
                task.reason = CompactionReason::ForcedBlobGc;
                return Some(task);
            }
        }
    }
    None
}
