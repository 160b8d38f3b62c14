//! The I/O of one compaction job: open the inputs, split the job into subcompactions when
//! `max_subcompactions` allows ([`crate::compaction::subcompaction`]), write each piece's outputs with
//! [`compaction::write_sorted_run`] on a thread of its own, and gather every piece's outputs into the one
//! version edit the caller installs.
//!
//! All pieces share the job's rate-limited file system (the rate limiter charges the whole job), its snapshot
//! list, compaction filter and blob settings; each has its own input iterators (the input tables are opened
//! once and shared), its own share of the range tombstones (cut to its key range) and its own output and blob
//! files. The first piece runs on the calling background thread, the others on scoped threads named
//! `shaledb-subc<i>` (RocksDB also runs subcompaction 0 on the job's thread); a thread that cannot be spawned
//! has its piece run on the calling thread afterwards. When any piece fails, every output file and blob file
//! of every piece is removed and the first error returned (a real failure ahead of a shutdown's
//! `Error::Closed`); nothing reaches the MANIFEST.

use super::DbInner;
use crate::compaction::subcompaction::{self, Piece, PieceIter};
use crate::compaction::{self, OutputSpec, RunContext, RunOutput};
use crate::compaction_filter::{FilterContext, JobFilter};
use crate::filenames;
use crate::iter::MergingIterator;
use crate::picker::{self, CompactionReason, CompactionTask};
use crate::range_del::Fragments;
use crate::rate_limiter::IoPriority;
use crate::stats::CompactionStats;
use shaledb_format::edit::{BlobFileGarbage, FileMeta, VersionEdit};
use shaledb_format::iter::InternalIterator;
use shaledb_format::table::{Readahead, Table, TableIterOptions};
use shaledb_vfs::{Error, Fs, Result, WriteHints};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The I/O of a compaction: merge the inputs, write the outputs. No lock held. `full`: the task reads every
/// table file (for the compaction filter's context).
pub(super) fn execute(
    inner: &Arc<DbInner>,
    fam: &super::family::Family,
    task: &CompactionTask,
    snapshots: &[u64],
    full: bool,
) -> Result<(VersionEdit, CompactionStats)> {
    let start = Instant::now();
    // Under FIFO the outputs carry their oldest input's creation time (RocksDB's oldest ancestor time).
    let mut oldest_input: Option<u64> = None;
    let mut tombstones: Vec<Fragments> = Vec::new();
    let mut tables: Vec<(&FileMeta, Arc<Table>)> = Vec::new();
    for (_, f) in task.all_inputs() {
        let t = inner.tables.open_uncached(f, true)?;
        if f.num_range_deletions > 0 {
            tombstones.push(Fragments::from_stored(&t.range_tombstones()?));
        }
        if let Some(c) = t.properties().creation_time {
            oldest_input = Some(oldest_input.map_or(c, |o| o.min(c)));
        }
        tables.push((f.as_ref(), t));
    }
    let range_dels = (!tombstones.is_empty()).then(|| Arc::new(Fragments::merged(tombstones.iter())));
    let pieces = if subcompaction::should_split(task, &fam.opts) {
        let anchors = tables.iter().flat_map(|(f, t)| subcompaction::table_anchors(t, f)).collect();
        let max = fam.opts.max_subcompactions as usize;
        Piece::split(&subcompaction::choose_boundaries(anchors, max, task.max_output_file_size))
    } else {
        vec![Piece::default()]
    };
    let mut table_options = fam.opts.table_options(inner.db_id, task.output_level, task.bottommost);
    if table_options.creation_time.is_some() && oldest_input.is_some() {
        table_options.creation_time = oldest_input;
    }
    let job = Job {
        inner,
        fam,
        snapshots,
        bottommost: task.bottommost,
        tables: &tables,
        range_dels: &range_dels,
        split: pieces.len() > 1,
        spec: OutputSpec {
            table_options,
            max_file_size: task.max_output_file_size,
            grandparents: task.grandparents.clone(),
            max_grandparent_overlap: picker::max_grandparent_overlap(task.max_output_file_size),
        },
        filter: JobFilter::for_job(
            &fam.opts,
            FilterContext {
                level: task.level,
                output_level: task.output_level,
                is_full_compaction: full,
                is_manual_compaction: task.reason == CompactionReason::ManualCompaction,
                bottommost: task.bottommost,
            },
        ),
    };
    // Garbage collection relocates from the oldest blob files of the current version.
    let gc_below = crate::blob::gc_cutoff(&fam.opts, &fam.sv.load().version);
    let blob = crate::blob::config(&fam.opts, &inner.blobs, &inner.dir, gc_below);
    let limiter = fam.opts.rate_limiter.as_ref();
    let results = crate::rate_limiter::with_limited_fs(inner.fs.as_ref(), limiter, IoPriority::Low, |fs| {
        run_pieces(&pieces, &|piece: &Piece| job.run_piece(fs, &blob, piece))
    });
    let (outputs, cpu_micros) = gather(inner, results)?;
    let mut stats = CompactionStats::default();
    let mut edit = VersionEdit::default();
    for (level, f) in task.all_inputs() {
        edit.deleted_files.push((level as u32, f.number));
    }
    let mut garbage: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for out in outputs {
        stats.add(&out.stats);
        edit.new_files.extend(out.files.into_iter().map(|f| (task.output_level as u32, f)));
        edit.blob_files.extend(out.blob.additions);
        for g in out.blob.garbage {
            let e = garbage.entry(g.number).or_default();
            *e = (e.0.saturating_add(g.record_count), e.1.saturating_add(g.record_bytes));
        }
    }
    edit.blob_garbage.extend(garbage.into_iter().map(|(number, (record_count, record_bytes))| BlobFileGarbage {
        number,
        record_count,
        record_bytes,
    }));
    stats.micros = start.elapsed().as_micros() as u64;
    stats.cpu_micros = cpu_micros;
    stats.count = 1;
    stats.subcompactions = pieces.len() as u64;
    let input_level = task.inputs.iter().chain(task.more_inputs.iter().map(|(_, f)| f));
    stats.bytes_read_input_level = input_level.clone().map(|f| f.file_size).sum();
    stats.bytes_read_output_level = task.output_inputs.iter().map(|f| f.file_size).sum();
    stats.files_in_input_level = input_level.count() as u64;
    stats.files_in_output_level = task.output_inputs.len() as u64;
    Ok((edit, stats))
}

/// What every piece of a job shares.
struct Job<'a> {
    inner: &'a Arc<DbInner>,
    fam: &'a super::family::Family,
    snapshots: &'a [u64],
    bottommost: bool,
    /// The input tables, opened once.
    tables: &'a [(&'a FileMeta, Arc<Table>)],
    /// Every input's range tombstones, fragmented together.
    range_dels: &'a Option<Arc<Fragments>>,
    /// More than one piece: each reads only the inputs and tombstones of its range.
    split: bool,
    spec: OutputSpec,
    filter: Option<JobFilter>,
}

impl Job<'_> {
    /// Writes the outputs of `piece`; returns them with the CPU time its thread spent.
    fn run_piece(&self, fs: &dyn Fs, blob: &crate::blob::BlobConfig, piece: &Piece) -> Result<(RunOutput, u64)> {
        let cpu_start = shaledb_vfs::thread_cpu_micros();
        let (inner, fam) = (self.inner, self.fam);
        // Inputs are read front to back in large reads (RocksDB's compaction_readahead_size), also with O_DIRECT.
        let inputs: Vec<&Arc<Table>> =
            self.tables.iter().filter(|(f, _)| !self.split || piece.overlaps(f)).map(|(_, t)| t).collect();
        let input_opts = TableIterOptions {
            verify_checksums: fam.opts.paranoid_checks,
            fill_cache: false,
            readahead: match readahead_per_input(fam.opts.compaction_readahead_size, inputs.len()) {
                0 => Readahead::Off,
                n => Readahead::Fixed(n),
            },
            block_cache_only: false,
        };
        let children: Vec<Box<dyn InternalIterator>> =
            inputs.into_iter().map(|t| Box::new(t.iter_with(&input_opts)) as Box<dyn InternalIterator>).collect();
        let range_dels = match self.range_dels {
            Some(all) if self.split => Some(Arc::new(piece.clip(all))),
            other => other.clone(),
        };
        let new_file = || {
            let n = inner.state.lock().vs.new_file_number()?;
            Ok((n, filenames::table(&inner.dir, n)))
        };
        let cx = RunContext {
            fs,
            write_hints: WriteHints { direct: fam.opts.use_direct_io_for_flush_and_compaction },
            new_file: &new_file,
            snapshots: self.snapshots,
            merge: fam.opts.merge_operator.as_ref(),
            bottommost: self.bottommost,
            stop: &inner.shutting_down,
            filter: self.filter.as_ref(),
            range_dels,
            blob: Some(blob),
        };
        let mut merged = MergingIterator::new(children);
        let out = if self.split {
            compaction::write_sorted_run(&mut PieceIter::new(merged, piece.clone()), &self.spec, &cx)?
        } else {
            compaction::write_sorted_run(&mut merged, &self.spec, &cx)?
        };
        Ok((out, shaledb_vfs::thread_cpu_micros().saturating_sub(cpu_start)))
    }
}

/// Runs `run` over every piece: the first on this thread, the others on scoped threads of their own (on this
/// thread too when one cannot be spawned). Results in piece order.
fn run_pieces<T: Send>(pieces: &[Piece], run: &(dyn Fn(&Piece) -> Result<T> + Sync)) -> Vec<Result<T>> {
    let Some((first, rest)) = pieces.split_first() else { return Vec::new() };
    if rest.is_empty() {
        return vec![run(first)];
    }
    std::thread::scope(|s| {
        let spawned: Vec<_> = rest
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let h =
                    std::thread::Builder::new().name(format!("shaledb-subc{}", i + 1)).spawn_scoped(s, move || run(p));
                (p, h.ok())
            })
            .collect();
        let mut results = vec![run(first)];
        for (p, h) in spawned {
            results.push(match h {
                Some(h) => h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                None => run(p),
            });
        }
        results
    })
}

/// The pieces' outputs and their summed CPU time; on any failure, removes every piece's output and blob files
/// and returns the first error (a real failure ahead of a shutdown's `Closed`).
fn gather(inner: &DbInner, results: Vec<Result<(RunOutput, u64)>>) -> Result<(Vec<RunOutput>, u64)> {
    let mut outputs = Vec::with_capacity(results.len());
    let mut cpu = 0u64;
    let mut error: Option<Error> = None;
    for r in results {
        match r {
            Ok((out, c)) => {
                cpu = cpu.saturating_add(c);
                outputs.push(out);
            }
            Err(e) => {
                if error.as_ref().is_none_or(|prev| matches!(prev, Error::Closed) && !matches!(e, Error::Closed)) {
                    error = Some(e);
                }
            }
        }
    }
    let Some(e) = error else { return Ok((outputs, cpu)) };
    // Removal errors are ignored: no version names these files, so the next open's orphan sweep removes them.
    for out in &outputs {
        for f in &out.files {
            let _ = inner.fs.remove(&filenames::table(&inner.dir, f.number));
        }
        for b in &out.blob.additions {
            let _ = inner.fs.remove(&filenames::blob(&inner.dir, b.number));
        }
    }
    Err(e)
}

/// What one piece of a compaction may hold in read-ahead buffers over all its inputs together.
const READAHEAD_BUDGET: usize = 64 << 20;
/// The smallest read-ahead window an input gets when the budget is shared by many inputs.
const READAHEAD_FLOOR: usize = 64 << 10;

/// The read-ahead window of each of `inputs` tables read together: `configured`
/// (`compaction_readahead_size`) while the inputs' windows fit in [`READAHEAD_BUDGET`], else the budget shared
/// among them, at least [`READAHEAD_FLOOR`]. Each input holds one window, so without the share a compaction of
/// the 248 L0 tables benchmark.sh's bulkload leaves held 248 windows of 2 MiB (a 660 MiB peak, killed by seed
/// 000's 640 MiB memory limit).
fn readahead_per_input(configured: usize, inputs: usize) -> usize {
    if configured == 0 {
        return 0;
    }
    configured.min((READAHEAD_BUDGET / inputs.max(1)).max(READAHEAD_FLOOR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readahead_is_shared_among_many_inputs() {
        assert_eq!(readahead_per_input(2 << 20, 2), 2 << 20);
        assert_eq!(readahead_per_input(2 << 20, 32), 2 << 20);
        assert_eq!(readahead_per_input(2 << 20, 248), (64 << 20) / 248);
        assert!(248 * readahead_per_input(2 << 20, 248) <= READAHEAD_BUDGET);
        assert_eq!(readahead_per_input(2 << 20, 5000), READAHEAD_FLOOR);
        assert_eq!(readahead_per_input(0, 248), 0);
        assert_eq!(readahead_per_input(1 << 20, 0), 1 << 20);
    }
}
