//! Writing a sorted run: the I/O half of flushes and compactions.
//!
//! [`write_sorted_run`] reads one merged stream of internal keys (a merging iterator over the input tables,
//! or a memtable iterator for a flush), decides per user key which versions survive
//! ([`resolve_versions`], a pure function), and writes them into new tables cut at size and grandparent
//! boundaries.
//!
//! Which versions survive, as LevelDB's and RocksDB's compaction iterators decide:
//!
//! - The live snapshots split sequence numbers into *stripes*: stripe `i` holds the sequences in
//!   `(s[i-1], s[i]]`, and the last stripe those above the newest snapshot (seen only by current reads).
//!   Every reader sees, per key, the newest version of some stripe, so each stripe keeps only its newest
//!   version; everything older in the same stripe is dropped.
//! - Merge operands at the top of a stripe are combined with what lies below them *in the stripe*: over a
//!   value or a tombstone, `full_merge` folds them into one value; with nothing below at all (bottommost
//!   output, no older stripe), `full_merge(None)` does; otherwise adjacent operands are `partial_merge`d
//!   where the operator can, and the rest stay operands. An operator that rejects the operands (or none
//!   configured) leaves the versions untouched, so reads report the problem rather than compaction.
//! - A merge result (full or partial) larger than one table entry can hold
//!   ([`crate::options::limits::MAX_KEY_VALUE_BYTES`]) is treated like a rejected merge: the operands stay
//!   unmerged (as RocksDB does when a full merge fails), and reads combine them, so the database never turns
//!   read-only over a result it could not store (issue 9: three 50 MiB `stringappend` merges did).
//! - In bottommost output, tombstones that end a key's history are dropped: nothing older exists to hide.
//! - A key with a single deletion ([`crate::Db::single_delete`]) follows RocksDB's rules for them
//!   ([`single_delete`]): a single deletion and the put it meets in the same stripe are both dropped, at any
//!   level; violations of the contract are counted (`CompactionStats::single_delete_mismatches`).
//!
//! Before that, a compaction (never a flush) runs the compaction filter ([`crate::compaction_filter`], and TTL
//! mode's expiry, [`crate::ttl`]) on each key's newest version when it is a value newer than every snapshot; a
//! removed value becomes a deletion, which the rules above then treat like any other.
//!
//! Range tombstones (`Db::delete_range`) of the inputs drop the points they cover in their snapshot stripe and
//! are written into the outputs' range-deletion blocks, split at the cuts ([`range_del`]).
//! Blob files ([`crate::blob`]): a blob reference (kind `0x11`) is a value to these rules. It is resolved to
//! its value first when the key holds merge operands (they fold over the value) or when the compaction filter
//! is to see it; the [`BlobSink`] then decides per surviving version whether a value goes to a blob file, a
//! reference is relocated (garbage collection) or kept, and counts the references the run drops as garbage.
//!
//! Outputs are cut only between user keys, so one key's versions never straddle two files (reads and the
//! picker's clean cuts rely on it).

use crate::blob::{BlobConfig, BlobOutput, BlobSink, Emit};
use crate::compaction_filter::{Decision, JobFilter};
use crate::merge::MergeOperator;
use crate::range_del::{Fragment, Fragments};
use crate::stats::CompactionStats;
use range_del::RunRangeDels;
use shaledb_format::edit::FileMeta;
use shaledb_format::ikey::{self, ValueKind};
use shaledb_format::iter::InternalIterator;
use shaledb_format::table::{TableBuilder, TableOptions};
use shaledb_vfs::{Error, Fs, Result, WriteHints};
use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Where and how outputs are written.
pub(crate) struct OutputSpec {
    /// Table format options of the output level.
    pub table_options: TableOptions,
    /// An output file is closed at the first user-key boundary after it reaches this size.
    pub max_file_size: u64,
    /// Files of the level below the output level, sorted by key: outputs are cut so that no file overlaps
    /// more than `max_grandparent_overlap` bytes of them (keeps later compactions small).
    pub grandparents: Vec<Arc<FileMeta>>,
    /// See `grandparents`; `u64::MAX` disables the rule.
    pub max_grandparent_overlap: u64,
}

/// The environment of one run.
pub(crate) struct RunContext<'a> {
    /// Where output files are created.
    pub fs: &'a dyn Fs,
    /// How output files are created (`direct`: `use_direct_io_for_flush_and_compaction`).
    pub write_hints: WriteHints,
    /// Allocates a file number and its path.
    pub new_file: &'a dyn Fn() -> Result<(u64, PathBuf)>,
    /// Live snapshot sequence numbers, ascending.
    pub snapshots: &'a [u64],
    /// The database's merge operator.
    pub merge: Option<&'a Arc<dyn MergeOperator>>,
    /// No data below the output level overlaps the run's range (tombstones may go).
    pub bottommost: bool,
    /// Set when the database shuts down: the run stops, removes its outputs and returns `Error::Closed`.
    pub stop: &'a AtomicBool,
    /// The compaction filter (user's and/or TTL mode's) of a compaction; `None` for flushes.
    pub filter: Option<&'a JobFilter>,
    /// The range tombstones of every input, fragmented together (`None`: the inputs hold none). They drop
    /// the points they cover and go into the outputs ([`range_del`]).
    pub range_dels: Option<Arc<Fragments>>,
    /// Blob files: where large values go and how blob references are treated. `None` only in tests that
    /// never meet a blob reference (a run meeting one without it fails).
    pub blob: Option<&'a BlobConfig<'a>>,
}

/// What a run produced.
#[derive(Debug)]
pub(crate) struct RunOutput {
    /// The finished (synced) output files, in key order.
    pub files: Vec<FileMeta>,
    /// `bytes_written`, `records_in`, `records_dropped` and `files_out`; the caller fills the rest.
    pub stats: CompactionStats,
    /// The blob files written and the garbage left in older ones.
    pub blob: BlobOutput,
}

/// One version of a user key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyVersion {
    /// Sequence number.
    pub seq: u64,
    /// Value, tombstone or merge operand.
    pub kind: ValueKind,
    /// The value or operand (empty for tombstones).
    pub value: Vec<u8>,
}

/// Decides which versions of `user_key` survive (see the module documentation). `versions` and the result
/// are newest first; the result's sequence numbers are a subset of the input's.
pub(crate) fn resolve_versions(
    user_key: &[u8],
    versions: Vec<KeyVersion>,
    snapshots: &[u64],
    merge: Option<&dyn MergeOperator>,
    bottommost: bool,
) -> Vec<KeyVersion> {
    // The common case, one version that is not an operand: nothing to decide, nothing to copy.
    if let [only] = versions.as_slice() {
        if only.kind != ValueKind::Merge {
            let drop = bottommost && only.kind.is_deletion();
            return if drop { Vec::new() } else { versions };
        }
    }
    if versions.iter().any(|v| v.kind == ValueKind::SingleDeletion) {
        return single_delete::resolve(user_key, &versions, snapshots, merge, bottommost);
    }
    let stripe = |seq: u64| snapshots.partition_point(|&s| s < seq);
    let mut out = Vec::with_capacity(1);
    let mut rest = versions.as_slice();
    while let Some(first) = rest.first() {
        let s = stripe(first.seq);
        let len = rest.iter().position(|v| stripe(v.seq) != s).unwrap_or(rest.len());
        let (group, older) = rest.split_at(len);
        resolve_stripe(user_key, group, !older.is_empty(), merge, bottommost, &mut out);
        rest = older;
    }
    if bottommost {
        // A tombstone with nothing older left behind it hides nothing; so may the one above it then.
        while out.last().is_some_and(|v| v.kind.is_deletion()) {
            out.pop();
        }
    }
    out
}

fn resolve_stripe(
    user_key: &[u8],
    group: &[KeyVersion],
    has_older: bool,
    merge: Option<&dyn MergeOperator>,
    bottommost: bool,
    out: &mut Vec<KeyVersion>,
) {
    let Some(first) = group.first() else { return };
    if first.kind != ValueKind::Merge {
        out.push(first.clone());
        return;
    }
    let n_ops = group.iter().take_while(|v| v.kind == ValueKind::Merge).count();
    let (ops, below) = group.split_at(n_ops);
    // Operands oldest first, as the operator expects.
    let oldest_first: Vec<&[u8]> = ops.iter().rev().map(|v| v.value.as_slice()).collect();
    let base = below.first();
    let full = match (merge, base) {
        (Some(m), Some(b)) => {
            let existing = (b.kind == ValueKind::Value).then_some(b.value.as_slice());
            m.full_merge(user_key, existing, &oldest_first)
        }
        (Some(m), None) if bottommost && !has_older => m.full_merge(user_key, None, &oldest_first),
        _ => None,
    };
    let full = full.filter(|v| fits_in_table(user_key, v));
    if let Some(value) = full {
        out.push(KeyVersion { seq: first.seq, kind: ValueKind::Value, value });
        return;
    }
    if base.is_some() {
        // No operator, or it rejected the operands: keep them and their base for reads to report.
        out.extend(ops.iter().cloned());
        out.extend(base.cloned());
        return;
    }
    let Some(m) = merge else {
        out.extend(ops.iter().cloned());
        return;
    };
    // Partial merges, oldest first; a combined operand takes the newer sequence number.
    let mut combined: Vec<KeyVersion> = Vec::with_capacity(ops.len());
    for op in ops.iter().rev() {
        let merged = match combined.last() {
            Some(prev) => m.partial_merge(user_key, &prev.value, &op.value),
            None => None,
        };
        let merged = merged.filter(|v| fits_in_table(user_key, v));
        match (merged, combined.last_mut()) {
            (Some(value), Some(prev)) => {
                prev.seq = op.seq;
                prev.value = value;
            }
            _ => combined.push(op.clone()),
        }
    }
    out.extend(combined.into_iter().rev());
}

/// True when `user_key` with `value` fits in one table entry.
fn fits_in_table(user_key: &[u8], value: &[u8]) -> bool {
    user_key.len().saturating_add(value.len()) <= crate::options::limits::MAX_KEY_VALUE_BYTES
}

/// Writes the stream `input` into new tables (see the module documentation). Positions `input` at its first
/// entry itself. On any error, including a stop request, every file this run created is removed and the
/// error returned (`Error::Closed` for a stop). An empty result creates no file.
pub(crate) fn write_sorted_run(
    input: &mut dyn InternalIterator,
    out: &OutputSpec,
    cx: &RunContext,
) -> Result<RunOutput> {
    let mut w = Writer::new(out, cx);
    w.range_dels = cx
        .range_dels
        .as_ref()
        .filter(|f| !f.is_empty())
        .map(|f| RunRangeDels::new(Arc::clone(f), cx.snapshots, cx.bottommost));
    let result = run(input, &mut w).and_then(|()| match w.blob.as_mut() {
        Some(sink) => sink.finish(),
        None => Ok(BlobOutput::default()),
    });
    match result {
        Ok(blob) => {
            let mut stats = w.stats;
            stats.bytes_written += blob.bytes_written;
            Ok(RunOutput { files: w.done, stats, blob })
        }
        Err(e) => {
            w.discard();
            Err(e)
        }
    }
}

/// A `Corruption` naming where the input's current entry is stored (its table and block offset; a memtable
/// being flushed has no file). REQUIRES: `input.valid()`.
fn input_corruption(input: &dyn InternalIterator, what: String) -> Error {
    match input.location() {
        Some((file, offset)) => Error::corruption(file, offset, what),
        None => Error::corruption(crate::lookup::MEMTABLE, 0, what),
    }
}

fn run(input: &mut dyn InternalIterator, w: &mut Writer) -> Result<()> {
    let merge = w.cx.merge.map(|m| m.as_ref());
    let mut user_key: Vec<u8> = Vec::new();
    let mut prev_ikey: Vec<u8> = Vec::new();
    // Versions of the current user key; `versions[..n]` are live. The slots (and their value buffers) are
    // reused from key to key, so the common path allocates nothing per key.
    let mut versions: Vec<KeyVersion> = Vec::new();
    let mut n = 0usize;
    input.seek_to_first();
    while input.valid() {
        let key = input.key();
        let Some(p) = ikey::parse(key) else {
            return Err(input_corruption(input, format!("malformed internal key of {} bytes", key.len())));
        };
        if !prev_ikey.is_empty() && ikey::compare(key, &prev_ikey) != Ordering::Greater {
            return Err(input_corruption(input, "internal keys out of order".into()));
        }
        if n > 0 && p.user_key != user_key.as_slice() {
            if w.cx.stop.load(AtomicOrdering::Acquire) {
                return Err(Error::Closed);
            }
            emit_key(w, &user_key, &mut versions[..n], merge)?;
            n = 0;
        }
        if n == 0 {
            user_key.clear();
            user_key.extend_from_slice(p.user_key);
        }
        let value = input.value();
        if p.kind == ValueKind::BlobIndex && shaledb_format::blob::BlobIndex::decode(value).is_none() {
            return Err(input_corruption(input, format!("undecodable blob index of {} bytes", value.len())));
        }
        match versions.get_mut(n) {
            Some(slot) => {
                slot.seq = p.seq;
                slot.kind = p.kind;
                slot.value.clear();
                slot.value.extend_from_slice(value);
            }
            None => versions.push(KeyVersion { seq: p.seq, kind: p.kind, value: value.to_vec() }),
        }
        n += 1;
        prev_ikey.clear();
        prev_ikey.extend_from_slice(key);
        input.next();
    }
    input.status()?;
    if n > 0 {
        emit_key(w, &user_key, &mut versions[..n], merge)?;
    }
    if w.cx.stop.load(AtomicOrdering::Acquire) {
        return Err(Error::Closed);
    }
    // Tombstones with no point left to carry them (a memtable of only deletions) still make a file.
    if w.current.is_none() && w.range_dels.as_ref().is_some_and(|r| !r.is_empty()) {
        w.open()?;
    }
    w.finish_current(true)
}

/// Runs the compaction filter on the newest version of a key when it is a value no snapshot can see (see
/// `crate::compaction_filter`): a removal turns it into a deletion, a change replaces its value.
fn apply_filter(w: &mut Writer, user_key: &[u8], versions: &mut [KeyVersion]) -> Result<()> {
    let (Some(f), Some(first)) = (w.cx.filter, versions.first_mut()) else { return Ok(()) };
    if first.kind != ValueKind::Value || w.cx.snapshots.last().is_some_and(|&s| first.seq <= s) {
        return Ok(());
    }
    match f.decide(user_key, &first.value)? {
        Decision::Keep => return Ok(()),
        Decision::Remove => {
            first.kind = ValueKind::Deletion;
            first.value.clear();
        }
        Decision::ChangeValue(v) => {
            if !fits_in_table(user_key, &v) {
                return Err(Error::InvalidArgument(format!(
                    "compaction filter changed the value of a {}-byte key to {} bytes, past the {}-byte limit of \
                     one entry",
                    user_key.len(),
                    v.len(),
                    crate::options::limits::MAX_KEY_VALUE_BYTES
                )));
            }
            first.value = v;
        }
    }
    w.stats.records_filtered += 1;
    Ok(())
}

/// Counts the key's blob references as the run's input, and resolves to values the ones that must be read:
/// all of them under merge operands, the newest when the compaction filter is to see it.
fn prepare_blobs(w: &mut Writer, user_key: &[u8], versions: &mut [KeyVersion]) -> Result<()> {
    let Some(sink) = w.blob.as_mut() else {
        return Err(Error::InvalidArgument("a blob reference met by a run without blob settings".into()));
    };
    let has_merge = versions.iter().any(|v| v.kind == ValueKind::Merge);
    let newest_filtered =
        w.cx.filter.is_some() && versions.first().is_some_and(|f| w.cx.snapshots.last().is_none_or(|&s| f.seq > s));
    let mut buf = Vec::new();
    for (i, v) in versions.iter_mut().enumerate() {
        if v.kind != ValueKind::BlobIndex {
            continue;
        }
        sink.note_input(user_key, &v.value)?;
        if has_merge || (i == 0 && newest_filtered) {
            sink.resolve(user_key, &v.value, &mut buf)?;
            std::mem::swap(&mut v.value, &mut buf);
            v.kind = ValueKind::Value;
        }
    }
    Ok(())
}

/// Resolves the versions of one user key and writes what survives.
fn emit_key(
    w: &mut Writer,
    user_key: &[u8],
    versions: &mut [KeyVersion],
    merge: Option<&dyn MergeOperator>,
) -> Result<()> {
    let n_in = versions.len() as u64;
    w.stats.records_in += n_in;
    if versions.iter().any(|v| v.kind == ValueKind::BlobIndex) {
        // Every input reference is noted (garbage accounting) before range tombstones drop any.
        prepare_blobs(w, user_key, versions)?;
    }
    let versions = match &w.range_dels {
        Some(rd) => {
            let kept = drop_covered(rd, user_key, versions);
            w.stats.records_dropped += n_in - kept as u64;
            &mut versions[..kept]
        }
        None => versions,
    };
    let n_in = versions.len() as u64;
    apply_filter(w, user_key, versions)?;
    let versions: &[KeyVersion] = versions;
    if n_in > 1 && versions.iter().any(|v| v.kind == ValueKind::SingleDeletion) {
        w.stats.single_delete_mismatches += single_delete::count_mismatches(versions);
    }
    // Fast path: a single value, or a single tombstone above the bottommost level, is always kept as is.
    if let [only] = versions {
        if only.kind.is_value() || (only.kind == ValueKind::Deletion && !w.cx.bottommost) {
            return w.add_key(user_key, versions);
        }
    }
    let keep = resolve_versions(user_key, versions.to_vec(), w.cx.snapshots, merge, w.cx.bottommost);
    w.stats.records_dropped += n_in - keep.len() as u64;
    w.add_key(user_key, &keep)
}

/// Moves the versions of `user_key` that a range tombstone of the run drops behind the others, keeping the
/// order of the rest; returns how many are kept.
fn drop_covered(rd: &RunRangeDels, user_key: &[u8], versions: &mut [KeyVersion]) -> usize {
    let mut kept = 0;
    for i in 0..versions.len() {
        if !rd.drops(user_key, versions[i].seq) {
            versions.swap(kept, i);
            kept += 1;
        }
    }
    kept
}

/// An output file being written.
struct Output {
    builder: TableBuilder,
    meta: FileMeta,
}

struct Writer<'a> {
    spec: &'a OutputSpec,
    cx: &'a RunContext<'a>,
    current: Option<Output>,
    done: Vec<FileMeta>,
    /// Every path created, finished or not: removed on failure.
    created: Vec<PathBuf>,
    stats: CompactionStats,
    /// The run's blob side (`None` without [`RunContext::blob`]).
    blob: Option<BlobSink<'a>>,
    gp_index: usize,
    gp_overlap: u64,
    gp_seen_key: bool,
    key_buf: Vec<u8>,
    /// The run's range tombstones, handed to outputs as they are finished.
    range_dels: Option<RunRangeDels>,
}

impl<'a> Writer<'a> {
    fn new(spec: &'a OutputSpec, cx: &'a RunContext<'a>) -> Writer<'a> {
        Writer {
            spec,
            cx,
            current: None,
            done: Vec::new(),
            created: Vec::new(),
            stats: CompactionStats::default(),
            blob: cx.blob.map(|cfg| BlobSink::new(cfg, cx.fs)),
            gp_index: 0,
            gp_overlap: 0,
            gp_seen_key: false,
            key_buf: Vec::new(),
            range_dels: None,
        }
    }

    /// True when the output should end before `user_key` to bound its overlap with the grandparents.
    fn grandparent_cut(&mut self, user_key: &[u8]) -> bool {
        let gps = &self.spec.grandparents;
        while let Some(g) = gps.get(self.gp_index) {
            if user_key <= g.largest_user_key() {
                break;
            }
            if self.gp_seen_key {
                self.gp_overlap = self.gp_overlap.saturating_add(g.file_size);
            }
            self.gp_index += 1;
        }
        self.gp_seen_key = true;
        self.gp_overlap > self.spec.max_grandparent_overlap
    }

    fn add_key(&mut self, user_key: &[u8], versions: &[KeyVersion]) -> Result<()> {
        let gp_cut = self.grandparent_cut(user_key);
        if versions.is_empty() {
            return Ok(());
        }
        let size_cut = self.current.as_ref().is_some_and(|o| o.builder.file_size() >= self.spec.max_file_size);
        if self.current.is_some() && (gp_cut || size_cut) {
            self.finish_current(false)?;
        }
        if self.current.is_none() {
            self.open()?;
        }
        let Some(o) = self.current.as_mut() else { return Ok(()) };
        for v in versions {
            let (kind, value) = match self.blob.as_mut().filter(|_| v.kind.is_value()) {
                Some(sink) => match sink.emit(user_key, v.kind == ValueKind::BlobIndex, &v.value, self.cx.new_file)? {
                    Emit::Keep => (v.kind, &v.value[..]),
                    Emit::Index(i) => (ValueKind::BlobIndex, i),
                    Emit::Inline(b) => (ValueKind::Value, b),
                },
                None => (v.kind, &v.value[..]),
            };
            self.key_buf.clear();
            ikey::append_internal_key(&mut self.key_buf, user_key, v.seq, kind);
            o.builder.add(&self.key_buf, value)?;
            if o.meta.smallest.is_empty() {
                o.meta.smallest = self.key_buf.clone();
            }
        }
        if let Some(last) = versions.last() {
            // The kind of the last entry written, which `self.key_buf` still holds.
            o.meta.largest.clear();
            o.meta.largest.extend_from_slice(&self.key_buf);
            debug_assert_eq!(ikey::parse(&o.meta.largest).map(|p| p.seq), Some(last.seq));
        }
        Ok(())
    }

    fn open(&mut self) -> Result<()> {
        let (number, path) = (self.cx.new_file)()?;
        self.created.push(path.clone());
        let file = self.cx.fs.create_with(&path, self.cx.write_hints)?;
        let mut table_options = self.spec.table_options.clone();
        // The table's own number goes into its properties, so a copy over another table is recognised.
        table_options.file_number = Some(number);
        let builder = TableBuilder::new(table_options, file);
        self.current = Some(Output { builder, meta: FileMeta { number, ..FileMeta::default() } });
        Ok(())
    }

    /// Finishes the open output; `last`: the run's last one, which takes every tombstone left.
    fn finish_current(&mut self, last: bool) -> Result<()> {
        let Some(mut o) = self.current.take() else { return Ok(()) };
        let frags: Vec<Fragment> = match self.range_dels.as_mut() {
            Some(rd) if last => rd.take_rest(),
            Some(rd) => rd.take_through(ikey::user_key(&o.meta.largest)),
            None => Vec::new(),
        };
        let mut num_range_deletions = 0u64;
        let mut tomb_seqs: Option<(u64, u64)> = None;
        for f in &frags {
            for &seq in &f.seqs {
                o.builder.add_range_tombstone(&f.start, &f.end, seq);
                num_range_deletions += 1;
                tomb_seqs = Some(tomb_seqs.map_or((seq, seq), |(lo, hi)| (lo.min(seq), hi.max(seq))));
            }
        }
        range_del::widen_bounds(&mut o.meta.smallest, &mut o.meta.largest, &frags);
        let props = o.builder.finish()?;
        let (mut smallest_seq, mut largest_seq) = (props.smallest_seq, props.largest_seq);
        if let Some((lo, hi)) = tomb_seqs {
            (smallest_seq, largest_seq) =
                if props.num_entries == 0 { (lo, hi) } else { (smallest_seq.min(lo), largest_seq.max(hi)) };
        }
        // The gap between two outputs resets the grandparent budget.
        self.gp_overlap = 0;
        let meta = FileMeta {
            file_size: props.file_size,
            smallest_seq,
            largest_seq,
            num_entries: props.num_entries,
            num_deletions: props.num_deletions,
            num_range_deletions,
            ..o.meta
        };
        self.stats.bytes_written += meta.file_size;
        self.stats.files_out += 1;
        self.done.push(meta);
        Ok(())
    }

    /// Abandons the open output and removes every file created. Removal errors are ignored: the files are
    /// not referenced by any version, so the next open's orphan sweep deletes them.
    fn discard(&mut self) {
        if let Some(o) = self.current.take() {
            o.builder.abandon();
        }
        for path in self.created.drain(..) {
            let _ = self.cx.fs.remove(&path);
        }
        if let Some(sink) = self.blob.as_mut() {
            sink.discard();
        }
        self.done.clear();
    }
}

#[cfg(test)]
mod filter_tests;
pub(crate) mod range_del;
mod single_delete;
#[cfg(test)]
mod single_delete_tests;
pub(crate) mod subcompaction;
#[cfg(test)]
mod tests;
