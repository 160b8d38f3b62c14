//! The flush writer: a memtable written out as L0 tables, for the background flush (`background.rs`) and for
//! WAL replay at open (`replay.rs`, `open.rs`).

use crate::blob::{BlobFiles, BlobOutput};
use crate::compaction::{self, OutputSpec, RunContext};
use crate::filenames;
use crate::identity::DbId;
use crate::iter::MergingIterator;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::range_del::Fragments;
use crate::rate_limiter::IoPriority;
use crate::stats::CompactionStats;
use shaledb_format::edit::FileMeta;
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::Result;
use shaledb_vfs::WriteHints;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// Writes the contents of `mems` (one memtable, or several of one family that waited for the flush together, as
/// RocksDB's flush job takes every immutable memtable waiting) as one L0 table (recovery and flush), with its large
/// values in blob files (`enable_blob_files`). Several are merged into one sorted run: a key written in more than
/// one keeps only the versions a snapshot needs, and their range tombstones drop what they cover in the older ones.
/// Nothing when every memtable is empty.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_level0(
    opts: &Options,
    db_id: DbId,
    dir: &Path,
    mems: &[Arc<MemTable>],
    new_number: &dyn Fn() -> Result<u64>,
    snapshots: &[u64],
    stop: &AtomicBool,
    blobs: &BlobFiles,
) -> Result<(Vec<FileMeta>, CompactionStats, BlobOutput)> {
    if mems.iter().all(|m| m.is_empty()) {
        return Ok((Vec::new(), CompactionStats::default(), BlobOutput::default()));
    }
    let blob = crate::blob::config(opts, blobs, dir, 0);
    let spec = OutputSpec {
        table_options: opts.table_options(db_id, 0, false),
        max_file_size: u64::MAX,
        grandparents: Vec::new(),
        max_grandparent_overlap: u64::MAX,
    };
    let new_file = || {
        let n = new_number()?;
        Ok((n, filenames::table(dir, n)))
    };
    let start = Instant::now();
    let cpu_start = shaledb_vfs::thread_cpu_micros();
    // Flushes (also those of WAL replay at open) are charged to the rate limiter at high priority.
    let limiter = opts.rate_limiter.as_ref();
    let out = crate::rate_limiter::with_limited_fs(opts.fs.as_ref(), limiter, IoPriority::High, |fs| {
        let cx = RunContext {
            fs,
            write_hints: WriteHints { direct: opts.use_direct_io_for_flush_and_compaction },
            new_file: &new_file,
            snapshots,
            merge: opts.merge_operator.as_ref(),
            bottommost: false,
            stop,
            // Flushes never filter (RocksDB's default): a value is filtered when a compaction first rewrites it.
            filter: None,
            // The memtables' range tombstones go into the L0 table, and drop the points they cover there.
            range_dels: range_tombstones(mems),
            blob: Some(&blob),
        };
        match mems {
            [mem] => compaction::write_sorted_run(&mut mem.iter(), &spec, &cx),
            _ => {
                let children = mems.iter().map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>).collect();
                compaction::write_sorted_run(&mut MergingIterator::new(children), &spec, &cx)
            }
        }
    })?;
    let mut stats = out.stats;
    stats.micros = start.elapsed().as_micros() as u64;
    stats.cpu_micros = shaledb_vfs::thread_cpu_micros().saturating_sub(cpu_start);
    stats.count = 1;
    Ok((out.files, stats, out.blob))
}

/// The range tombstones of `mems`, as one set of fragments (`None` when they have none).
fn range_tombstones(mems: &[Arc<MemTable>]) -> Option<Arc<Fragments>> {
    let all: Vec<Arc<Fragments>> = mems.iter().filter_map(|m| m.range_tombstones()).collect();
    match all.len() {
        0 => None,
        1 => all.into_iter().next(),
        _ => Some(Arc::new(Fragments::merged(all.iter().map(|f| f.as_ref())))),
    }
}
