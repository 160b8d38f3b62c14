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
//!
//! Outputs are cut only between user keys, so one key's versions never straddle two files (reads and the
//! picker's clean cuts rely on it).

use crate::merge::MergeOperator;
use crate::stats::CompactionStats;
use shaledb_format::edit::FileMeta;
use shaledb_format::ikey::{self, ValueKind};
use shaledb_format::iter::InternalIterator;
use shaledb_format::table::{TableBuilder, TableOptions};
use shaledb_vfs::{Error, Fs, Result};
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
}

/// What a run produced.
#[derive(Debug)]
pub(crate) struct RunOutput {
    /// The finished (synced) output files, in key order.
    pub files: Vec<FileMeta>,
    /// `bytes_written`, `records_in`, `records_dropped` and `files_out`; the caller fills the rest.
    pub stats: CompactionStats,
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
            let drop = bottommost && only.kind == ValueKind::Deletion;
            return if drop { Vec::new() } else { versions };
        }
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
        while out.last().is_some_and(|v| v.kind == ValueKind::Deletion) {
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
    match run(input, &mut w) {
        Ok(()) => Ok(RunOutput { files: w.done, stats: w.stats }),
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
            emit_key(w, &user_key, &versions[..n], merge)?;
            n = 0;
        }
        if n == 0 {
            user_key.clear();
            user_key.extend_from_slice(p.user_key);
        }
        let value = input.value();
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
        emit_key(w, &user_key, &versions[..n], merge)?;
    }
    if w.cx.stop.load(AtomicOrdering::Acquire) {
        return Err(Error::Closed);
    }
    w.finish_current()
}

/// Resolves the versions of one user key and writes what survives.
fn emit_key(w: &mut Writer, user_key: &[u8], versions: &[KeyVersion], merge: Option<&dyn MergeOperator>) -> Result<()> {
    let n_in = versions.len() as u64;
    w.stats.records_in += n_in;
    // Fast path: a single value, or a single tombstone above the bottommost level, is always kept as is.
    if let [only] = versions {
        if only.kind == ValueKind::Value || (only.kind == ValueKind::Deletion && !w.cx.bottommost) {
            return w.add_key(user_key, versions);
        }
    }
    let keep = resolve_versions(user_key, versions.to_vec(), w.cx.snapshots, merge, w.cx.bottommost);
    w.stats.records_dropped += n_in - keep.len() as u64;
    w.add_key(user_key, &keep)
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
    gp_index: usize,
    gp_overlap: u64,
    gp_seen_key: bool,
    key_buf: Vec<u8>,
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
            gp_index: 0,
            gp_overlap: 0,
            gp_seen_key: false,
            key_buf: Vec::new(),
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
            self.finish_current()?;
        }
        if self.current.is_none() {
            self.open()?;
        }
        let Some(o) = self.current.as_mut() else { return Ok(()) };
        for v in versions {
            self.key_buf.clear();
            ikey::append_internal_key(&mut self.key_buf, user_key, v.seq, v.kind);
            o.builder.add(&self.key_buf, &v.value)?;
            if o.meta.smallest.is_empty() {
                o.meta.smallest = self.key_buf.clone();
            }
        }
        if let Some(last) = versions.last() {
            o.meta.largest.clear();
            ikey::append_internal_key(&mut o.meta.largest, user_key, last.seq, last.kind);
        }
        Ok(())
    }

    fn open(&mut self) -> Result<()> {
        let (number, path) = (self.cx.new_file)()?;
        self.created.push(path.clone());
        let file = self.cx.fs.create(&path)?;
        let mut table_options = self.spec.table_options.clone();
        // The table's own number goes into its properties, so a copy over another table is recognised.
        table_options.file_number = Some(number);
        let builder = TableBuilder::new(table_options, file);
        self.current = Some(Output { builder, meta: FileMeta { number, ..FileMeta::default() } });
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        let Some(o) = self.current.take() else { return Ok(()) };
        let props = o.builder.finish()?;
        // The gap between two outputs resets the grandparent budget.
        self.gp_overlap = 0;
        let meta = FileMeta {
            file_size: props.file_size,
            smallest_seq: props.smallest_seq,
            largest_seq: props.largest_seq,
            num_entries: props.num_entries,
            num_deletions: props.num_deletions,
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
        self.done.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::{StringAppend, UInt64Add};
    use shaledb_format::ikey::make_internal_key;
    use shaledb_format::table::{Table, TableReadOptions};
    use shaledb_vfs::{PosixFs, ReadHints};
    use std::cell::Cell;
    use std::path::Path;
    use ValueKind::{Deletion as D, Merge as M, Value as V};

    fn ver(seq: u64, kind: ValueKind, value: &str) -> KeyVersion {
        KeyVersion { seq, kind, value: value.as_bytes().to_vec() }
    }

    fn show(vs: &[KeyVersion]) -> String {
        vs.iter()
            .map(|v| {
                let k = match v.kind {
                    V => "V",
                    D => "D",
                    M => "M",
                };
                format!("{k}{}={}", v.seq, String::from_utf8_lossy(&v.value))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn resolve(vs: Vec<KeyVersion>, snaps: &[u64], merge: Option<&dyn MergeOperator>, bottom: bool) -> String {
        show(&resolve_versions(b"k", vs, snaps, merge, bottom))
    }

    #[test]
    fn newest_version_per_snapshot_stripe() {
        let vs = || vec![ver(9, V, "9"), ver(7, V, "7"), ver(5, V, "5"), ver(3, V, "3"), ver(1, V, "1")];
        assert_eq!(resolve(vs(), &[], None, false), "V9=9");
        // Snapshot 6 sees 5; snapshot 3 sees 3; 7 and 1 are shadowed within their stripes.
        assert_eq!(resolve(vs(), &[3, 6], None, false), "V9=9 V5=5 V3=3");
        // A snapshot at exactly a version's sequence sees it.
        assert_eq!(resolve(vs(), &[7], None, false), "V9=9 V7=7");
        // Snapshots newer than every version change nothing.
        assert_eq!(resolve(vs(), &[100], None, false), "V9=9");
    }

    #[test]
    fn tombstones_dropped_only_at_bottommost() {
        let vs = || vec![ver(5, D, ""), ver(3, V, "3")];
        assert_eq!(resolve(vs(), &[], None, false), "D5=");
        assert_eq!(resolve(vs(), &[], None, true), "");
        // A snapshot still sees the value under the tombstone: both stay, even at the bottom.
        assert_eq!(resolve(vs(), &[4], None, true), "D5= V3=3");
        // Tombstones ending the history go; one above a kept value stays.
        let vs = vec![ver(9, V, "9"), ver(7, D, ""), ver(5, V, "5"), ver(3, D, "")];
        assert_eq!(resolve(vs, &[4, 6, 8], None, true), "V9=9 D7= V5=5");
        let vs = vec![ver(9, D, ""), ver(7, D, "")];
        assert_eq!(resolve(vs, &[8], None, true), "");
    }

    #[test]
    fn merge_over_base_in_stripe_becomes_value() {
        let op = StringAppend::new(b",");
        let vs = || vec![ver(9, M, "c"), ver(8, M, "b"), ver(7, V, "a"), ver(6, V, "old")];
        assert_eq!(resolve(vs(), &[], Some(&op), false), "V9=a,b,c");
        // Over a tombstone the existing value is none.
        let over_tombstone = vec![ver(9, M, "c"), ver(8, D, ""), ver(7, V, "a")];
        assert_eq!(resolve(over_tombstone, &[], Some(&op), false), "V9=c");
        // A snapshot between operands splits them: each stripe merges on its own.
        assert_eq!(resolve(vs(), &[8], Some(&op), false), "M9=c V8=a,b");
    }

    #[test]
    fn merge_without_base_full_merges_only_at_bottommost() {
        let op = StringAppend::new(b",");
        let vs = || vec![ver(9, M, "c"), ver(8, M, "b")];
        assert_eq!(resolve(vs(), &[], Some(&op), true), "V9=b,c");
        // Not bottommost: something below may hold a base, so the operands are only partially merged.
        assert_eq!(resolve(vs(), &[], Some(&op), false), "M9=b,c");
        // Bottommost but an older stripe holds versions: operands stay operands.
        let vs = vec![ver(9, M, "c"), ver(8, M, "b"), ver(3, V, "a")];
        assert_eq!(resolve(vs, &[5], Some(&op), true), "M9=b,c V3=a");
    }

    #[test]
    fn partial_merge_combines_adjacent_operands() {
        let one = 1u64.to_le_bytes().to_vec();
        let vs = vec![
            KeyVersion { seq: 3, kind: M, value: one.clone() },
            KeyVersion { seq: 2, kind: M, value: one.clone() },
            KeyVersion { seq: 1, kind: M, value: one.clone() },
        ];
        let got = resolve_versions(b"k", vs, &[], Some(&UInt64Add), false);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].seq, got[0].kind), (3, M));
        assert_eq!(got[0].value, 3u64.to_le_bytes());
    }

    #[derive(Debug)]
    struct NoPartial;
    impl MergeOperator for NoPartial {
        fn name(&self) -> &str {
            "nopartial"
        }
        fn full_merge(&self, _k: &[u8], existing: Option<&[u8]>, ops: &[&[u8]]) -> Option<Vec<u8>> {
            if ops.contains(&&b"bad"[..]) {
                return None;
            }
            let mut v = existing.unwrap_or_default().to_vec();
            ops.iter().for_each(|o| v.extend_from_slice(o));
            Some(v)
        }
    }

    #[test]
    fn operands_kept_without_partial_merge_or_operator() {
        let vs = || vec![ver(9, M, "c"), ver(8, M, "b")];
        assert_eq!(resolve(vs(), &[], Some(&NoPartial), false), "M9=c M8=b");
        assert_eq!(resolve(vs(), &[], None, true), "M9=c M8=b");
        // A rejected full merge keeps operands and base for the read path to report.
        let vs = vec![ver(9, M, "bad"), ver(8, V, "a"), ver(7, V, "x")];
        assert_eq!(resolve(vs, &[], Some(&NoPartial), false), "M9=bad V8=a");
    }

    // ---- write_sorted_run over real tables ----

    struct VecIter {
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        pos: usize,
        fail_at: Option<usize>,
    }

    impl VecIter {
        fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIter {
            entries.sort_by(|a, b| ikey::compare(&a.0, &b.0));
            VecIter { entries, pos: 0, fail_at: None }
        }
    }

    impl InternalIterator for VecIter {
        fn valid(&self) -> bool {
            self.pos < self.entries.len() && Some(self.pos) != self.fail_at
        }
        fn seek_to_first(&mut self) {
            self.pos = 0;
        }
        fn seek_to_last(&mut self) {
            self.pos = self.entries.len().saturating_sub(1);
        }
        fn seek(&mut self, target: &[u8]) {
            self.pos = self.entries.partition_point(|e| ikey::compare(&e.0, target) == Ordering::Less);
        }
        fn seek_for_prev(&mut self, _target: &[u8]) {
            self.pos = self.entries.len();
        }
        fn next(&mut self) {
            self.pos += 1;
        }
        fn prev(&mut self) {
            self.pos = self.pos.wrapping_sub(1);
        }
        fn key(&self) -> &[u8] {
            &self.entries[self.pos].0
        }
        fn value(&self) -> &[u8] {
            &self.entries[self.pos].1
        }
        fn location(&self) -> Option<(&std::path::Path, u64)> {
            Some((std::path::Path::new("input.sst"), self.pos as u64))
        }
        fn status(&self) -> Result<()> {
            if self.fail_at.is_some_and(|f| self.pos >= f) {
                return Err(Error::io("read", "input.sst", std::io::Error::other("injected")));
            }
            Ok(())
        }
    }

    fn e(key: &str, seq: u64, kind: ValueKind, value: &str) -> (Vec<u8>, Vec<u8>) {
        (make_internal_key(key.as_bytes(), seq, kind), value.as_bytes().to_vec())
    }

    fn spec(max_file_size: u64) -> OutputSpec {
        OutputSpec {
            table_options: TableOptions::default(),
            max_file_size,
            grandparents: Vec::new(),
            max_grandparent_overlap: u64::MAX,
        }
    }

    struct Env {
        dir: tempfile::TempDir,
        fs: PosixFs,
        next: Cell<u64>,
        stop: AtomicBool,
    }

    impl Env {
        fn new() -> Env {
            Env {
                dir: tempfile::tempdir().unwrap(),
                fs: PosixFs::new(),
                next: Cell::new(10),
                stop: AtomicBool::new(false),
            }
        }

        fn run(&self, it: &mut VecIter, s: &OutputSpec, snaps: &[u64], bottom: bool) -> Result<RunOutput> {
            let new_file = || {
                let n = self.next.get();
                self.next.set(n + 1);
                Ok((n, self.dir.path().join(format!("{n:06}.sst"))))
            };
            let merge: Arc<dyn MergeOperator> = Arc::new(StringAppend::new(b","));
            let cx = RunContext {
                fs: &self.fs,
                new_file: &new_file,
                snapshots: snaps,
                merge: Some(&merge),
                bottommost: bottom,
                stop: &self.stop,
            };
            write_sorted_run(it, s, &cx)
        }

        fn files_on_disk(&self) -> usize {
            std::fs::read_dir(self.dir.path()).unwrap().count()
        }

        fn read(&self, number: u64) -> Vec<(String, u64, ValueKind, String)> {
            let path = self.dir.path().join(format!("{number:06}.sst"));
            read_table(&self.fs, &path)
        }
    }

    fn read_table(fs: &PosixFs, path: &Path) -> Vec<(String, u64, ValueKind, String)> {
        let t = Table::open(fs.open(path, ReadHints::default()).unwrap(), &TableReadOptions::default()).unwrap();
        let mut it = t.iter(true, false);
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid() {
            let p = ikey::parse(it.key()).unwrap();
            out.push((
                String::from_utf8_lossy(p.user_key).into_owned(),
                p.seq,
                p.kind,
                String::from_utf8_lossy(it.value()).into_owned(),
            ));
            it.next();
        }
        it.status().unwrap();
        out
    }

    #[test]
    fn run_writes_survivors_and_fills_meta() {
        let env = Env::new();
        let mut it = VecIter::new(vec![
            e("a", 5, V, "a5"),
            e("a", 3, V, "a3"),
            e("b", 6, D, ""),
            e("b", 2, V, "b2"),
            e("c", 8, M, "y"),
            e("c", 7, M, "x"),
            e("c", 4, V, "c4"),
            e("d", 9, D, ""),
        ]);
        let out = env.run(&mut it, &spec(u64::MAX), &[], false).unwrap();
        assert_eq!(out.files.len(), 1);
        let f = &out.files[0];
        assert_eq!(f.number, 10);
        assert_eq!(f.smallest, make_internal_key(b"a", 5, V));
        assert_eq!(f.largest, make_internal_key(b"d", 9, D));
        assert_eq!((f.smallest_seq, f.largest_seq, f.num_entries, f.num_deletions), (5, 9, 4, 2));
        assert!(f.file_size > 0);
        assert_eq!(out.stats.records_in, 8);
        assert_eq!(out.stats.records_dropped, 4);
        assert_eq!(out.stats.files_out, 1);
        assert_eq!(out.stats.bytes_written, f.file_size);
        let rows = env.read(10);
        assert_eq!(
            rows,
            vec![
                ("a".into(), 5, V, "a5".into()),
                ("b".into(), 6, D, "".into()),
                ("c".into(), 8, V, "c4,x,y".into()),
                ("d".into(), 9, D, "".into()),
            ]
        );
    }

    #[test]
    fn run_bottommost_drops_tombstones_and_empty_output_makes_no_file() {
        let env = Env::new();
        let mut it = VecIter::new(vec![e("b", 6, D, ""), e("b", 2, V, "b2"), e("d", 9, D, "")]);
        let out = env.run(&mut it, &spec(u64::MAX), &[], true).unwrap();
        assert!(out.files.is_empty());
        assert_eq!(out.stats.records_dropped, 3);
        assert_eq!(env.files_on_disk(), 0);
        let mut it = VecIter::new(Vec::new());
        assert!(env.run(&mut it, &spec(u64::MAX), &[], true).unwrap().files.is_empty());
    }

    #[test]
    fn run_cuts_at_size_but_never_inside_a_user_key() {
        let env = Env::new();
        let mut entries = Vec::new();
        for seq in 1..=5 {
            entries.push(e("a", seq, V, "xxxxxxxx"));
        }
        entries.push(e("b", 6, V, "y"));
        entries.push(e("c", 7, V, "z"));
        let mut it = VecIter::new(entries);
        // Every version of "a" survives (a snapshot at each), and the 1-byte limit cuts after every key.
        let out = env.run(&mut it, &spec(1), &[1, 2, 3, 4], false).unwrap();
        let ranges: Vec<(Vec<u8>, Vec<u8>)> =
            out.files.iter().map(|f| (f.smallest_user_key().to_vec(), f.largest_user_key().to_vec())).collect();
        assert_eq!(
            ranges,
            vec![(b"a".to_vec(), b"a".to_vec()), (b"b".to_vec(), b"b".to_vec()), (b"c".to_vec(), b"c".to_vec())]
        );
        assert_eq!(out.files[0].num_entries, 5);
        assert_eq!(out.files[0].smallest, make_internal_key(b"a", 5, V));
        assert_eq!(out.files[0].largest, make_internal_key(b"a", 1, V));
        assert_eq!(env.read(out.files[0].number).len(), 5);
    }

    #[test]
    fn run_cuts_at_grandparent_overlap() {
        let env = Env::new();
        let gp = |n: u64, k: &str| {
            Arc::new(FileMeta {
                number: n,
                file_size: 100,
                smallest: make_internal_key(k.as_bytes(), 1, V),
                largest: make_internal_key(k.as_bytes(), 1, V),
                ..FileMeta::default()
            })
        };
        let mut s = spec(u64::MAX);
        s.grandparents = vec![gp(1, "b"), gp(2, "d"), gp(3, "f")];
        s.max_grandparent_overlap = 150;
        let mut it = VecIter::new(vec![
            e("a", 1, V, ""),
            e("c", 1, V, ""),
            e("e", 1, V, ""),
            e("g", 1, V, ""),
            e("h", 1, V, ""),
        ]);
        let out = env.run(&mut it, &s, &[], false).unwrap();
        // a..e overlaps b and d (200 > 150) by the time "e" comes: cut before it; then f before "g".
        let firsts: Vec<&[u8]> = out.files.iter().map(|f| f.smallest_user_key()).collect();
        assert_eq!(firsts, vec![&b"a"[..], &b"e"[..]]);
    }

    #[test]
    fn run_removes_outputs_on_input_error() {
        let env = Env::new();
        let mut entries = Vec::new();
        for i in 0..20 {
            entries.push(e(&format!("k{i:02}"), 1, V, "v"));
        }
        let mut it = VecIter::new(entries);
        it.fail_at = Some(15);
        let err = env.run(&mut it, &spec(1), &[], false).unwrap_err();
        assert!(err.is_io());
        assert_eq!(env.files_on_disk(), 0);
    }

    #[test]
    fn run_rejects_malformed_and_unordered_input() {
        let env = Env::new();
        let mut it = VecIter::new(vec![e("a", 1, V, "v")]);
        it.entries.push((b"bad".to_vec(), Vec::new()));
        let err = env.run(&mut it, &spec(1), &[], false).unwrap_err();
        // The error names the input's file and position (this VecIter: "input.sst", the entry's index).
        let at = |e: Error| match e {
            Error::Corruption { file, offset, .. } => (file, offset),
            other => panic!("expected corruption, got {other}"),
        };
        assert_eq!(at(err), ("input.sst".into(), 1));
        assert_eq!(env.files_on_disk(), 0);
        let mut it = VecIter::new(vec![e("b", 1, V, "v")]);
        it.entries.push(e("a", 1, V, "v"));
        assert_eq!(at(env.run(&mut it, &spec(1), &[], false).unwrap_err()), ("input.sst".into(), 1));
        assert_eq!(env.files_on_disk(), 0);
    }

    #[test]
    fn run_stops_on_shutdown_and_cleans_up() {
        let env = Env::new();
        env.stop.store(true, AtomicOrdering::Release);
        let mut it = VecIter::new(vec![e("a", 1, V, "v"), e("b", 1, V, "v")]);
        let err = env.run(&mut it, &spec(1), &[], false).unwrap_err();
        assert!(matches!(err, Error::Closed));
        assert_eq!(env.files_on_disk(), 0);
    }
}
