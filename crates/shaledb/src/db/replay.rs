//! WAL replay at open under the chosen recovery mode (D5), and what it drops (D10).
//!
//! Damage is told apart by what follows it:
//!
//! - a *torn tail*: no intact record after the damage in this WAL (what a crash in the middle of an append
//!   leaves), or a stretch holding a zero-filled 4 KiB page (what a power loss leaves of unsynced pages), and
//!   no later WAL proves this one was synced: a later WAL holds no intact record at all, or the next one starts
//!   with a `Predecessor` marker naming this one (it was switched out unsynced) and no later WAL holds a
//!   `Synced` marker covering it;
//! - a WAL shorter than the length the next one's `Predecessor` marker gives it: the same torn tail, cut at a
//!   record boundary;
//! - a *hole*: intact records follow the damage (a flipped bit, a bad sector, an overwritten block). Dropping
//!   what follows would silently lose acknowledged writes.
//!
//! PointInTime replays up to a torn tail and refuses a hole; TolerateCorruptedTailRecords does the same but only
//! accepts damage at the tail of the last WAL; AbsoluteConsistency refuses any damage; SkipAnyCorruptedRecords
//! skips every damaged stretch. Every WAL recovery did not replay in full is kept in `lost/` (lost.rs).

use super::flush::write_level0;
use crate::filenames;
use crate::identity::DbId;
use crate::info_log::InfoLog;
use crate::lost::Losses;
use crate::memtable::MemTable;
use crate::options::{Options, WalRecoveryMode};
use crate::stats::CompactionStats;
use shaledb_format::batch::BatchRep;
use shaledb_format::edit::FileMeta;
use shaledb_format::ikey::MAX_SEQUENCE;
use shaledb_format::log::{self, DamageKind};
use shaledb_format::wal::{self, BatchRead, WalMarker};
use shaledb_vfs::{Error, Result};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Unsynced pages lost in a power failure read back as zeros at this granularity.
const PAGE: usize = 4096;

/// A column family replay fills: its id, options and log number (its records in WALs numbered below it are
/// already in its tables).
pub(super) struct Target {
    pub(super) id: u32,
    pub(super) opts: Options,
    pub(super) log_number: u64,
}

/// What replay produced for one family.
pub(super) struct FamilyReplay {
    /// Memtable holding what was not flushed during replay.
    pub(super) mem: Arc<MemTable>,
    /// L0 tables written when the memtable filled up.
    pub(super) files: Vec<FileMeta>,
    /// Blob files those tables reference (`enable_blob_files`).
    pub(super) blob_files: Vec<shaledb_format::edit::BlobFileAddition>,
}

/// The targets of every live family of `vs`, each with the options `opts_of` gives.
pub(super) fn targets(vs: &crate::version_set::VersionSet, opts_of: &dyn Fn(u32) -> Options) -> Vec<Target> {
    vs.families().iter().map(|(id, f)| Target { id: *id, opts: opts_of(*id), log_number: f.log_number }).collect()
}

/// Replay for a view that writes nothing (a read-only open, a secondary's catch-up): one unbounded memtable per
/// family (a full one would be flushed to a table), no file number handed out, and records of a family the
/// view does not know skipped (the writer may create a family between the MANIFEST read and the WAL read).
/// `fam_opts` gives a family's own options where the caller has them (else `opts`).
pub(super) fn replay_view(
    opts: &Options,
    fam_opts: &dyn Fn(u32) -> Option<Options>,
    vs: &crate::version_set::VersionSet,
    db_id: DbId,
    dir: &Path,
    wals: &[u64],
    info: &InfoLog,
) -> Result<Replayed> {
    let replay_opts = Options { write_buffer_size: usize::MAX, ..opts.clone() };
    let no_numbers = || -> Result<u64> { Err(super::errors::refused("allocating a file number")) };
    let stop = AtomicBool::new(false);
    // Each family's memtable is built with its own options (a prefix extractor shapes its filter).
    let targets = targets(vs, &|id| match fam_opts(id) {
        Some(o) => Options { write_buffer_size: usize::MAX, wal_recovery_mode: opts.wal_recovery_mode, ..o },
        None => replay_opts.clone(),
    });
    let replayed =
        replay(&replay_opts, &targets, u32::MAX, db_id, dir, wals, &no_numbers, &stop, info, vs.last_sequence, false)?;
    if replayed.fams.values().any(|f| !f.files.is_empty()) {
        // Cannot happen with unbounded memtables; a table written here would break the promise above.
        return Err(super::errors::refused("writing a table during WAL replay"));
    }
    Ok(replayed)
}

/// What replay produced.
pub(super) struct Replayed {
    /// Each target family's memtable and tables, by id.
    pub(super) fams: std::collections::BTreeMap<u32, FamilyReplay>,
    pub(super) stats: CompactionStats,
    /// Highest sequence number replayed (or the one given when none was).
    pub(super) max_seq: u64,
    pub(super) losses: Losses,
    /// WALs (by number) not replayed in full: kept in `lost/` before the recovery's MANIFEST is written.
    pub(super) to_keep: Vec<u64>,
}

/// One damaged stretch found during replay.
struct Hit {
    error: Error,
    offset: u64,
    /// The reader's own judgement: no intact physical record after the damage.
    at_tail: bool,
    /// A damaged stretch of zeros or an orphan fragment counts as no record.
    uncounted: bool,
    /// The hit is one whole record the reader has already consumed (its checksum passed, its contents do not
    /// decode): the reader resumes right after it, and it is the only record dropped.
    whole_record: bool,
}

/// Replays `wals` (numbers, oldest first) of the database in `dir` into memtables, flushing them to L0 when
/// they fill. `max_seq`: the MANIFEST's last sequence. `shaped`: the memtables are built as each family's
/// options ask (`MemTable::for_options`), so that open may keep them as the active ones
/// (`avoid_flush_during_recovery`); else plain ones, which are only flushed or read.
#[allow(clippy::too_many_arguments)]
pub(super) fn replay(
    opts: &Options,
    targets: &[Target],
    max_family: u32,
    db_id: DbId,
    dir: &Path,
    wals: &[u64],
    new_number: &dyn Fn() -> Result<u64>,
    stop: &AtomicBool,
    info: &InfoLog,
    mut max_seq: u64,
    shaped: bool,
) -> Result<Replayed> {
    let fs = opts.fs.as_ref();
    let blobs = crate::blob::BlobFiles::new(dir, opts.fs.clone(), db_id);
    let new_mem = |t: &Target| Arc::new(if shaped { MemTable::for_options(0, &t.opts) } else { MemTable::new(0) });
    let mut out = Replayed {
        fams: targets
            .iter()
            .map(|t| (t.id, FamilyReplay { mem: new_mem(t), files: Vec::new(), blob_files: Vec::new() }))
            .collect(),
        stats: CompactionStats::default(),
        max_seq,
        losses: Losses::default(),
        to_keep: Vec::new(),
    };
    // The number and length of the WAL replayed before this one.
    let mut previous: Option<(u64, u64)> = None;
    'replay: for (i, &number) in wals.iter().enumerate() {
        let path = filenames::wal(dir, number);
        let data = fs.read_all(&path)?;
        let file_len = data.len() as u64;
        let before = previous.replace((number, file_len));
        let mut reader = log::Reader::new(data, path.clone());
        let mut records = 0u64;
        let mut damaged = false;
        loop {
            let hit = match wal::next_batch(&mut reader) {
                BatchRead::Eof => break,
                BatchRead::Damage(d) => Hit {
                    error: d.to_error(&path),
                    offset: d.offset,
                    at_tail: d.at_tail,
                    // An orphan fragment belongs to a record already counted where its FIRST was (intact and
                    // skipped, or damaged): not another record.
                    uncounted: matches!(d.kind, DamageKind::ZeroedRegion | DamageKind::Fragmentation),
                    whole_record: false,
                },
                // The record's checksum passed but its contents do not decode: corruption that no torn write
                // explains.
                BatchRead::Undecodable { offset, error } => {
                    Hit { error, offset, at_tail: false, uncounted: false, whole_record: true }
                }
                BatchRead::Marker { marker: WalMarker::Synced { .. }, .. } => continue,
                BatchRead::Marker { marker: WalMarker::Predecessor { number: p, length }, .. } => {
                    let Some((prev, prev_len)) = before.filter(|(n, len)| *n == p && *len < length) else {
                        continue;
                    };
                    // The WAL before this one ended short of its length at the switch: a power loss took its
                    // unsynced tail at a record boundary, unless a later WAL says it was synced.
                    let prev_path = filenames::wal(dir, prev);
                    let error = Error::corruption(
                        &prev_path,
                        prev_len,
                        format!("the WAL ends at {prev_len} bytes, short of the {length} it had when {} began", {
                            path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
                        }),
                    );
                    let hit = Hit { error, offset: prev_len, at_tail: true, uncounted: true, whole_record: false };
                    match opts.wal_recovery_mode {
                        WalRecoveryMode::AbsoluteConsistency => return Err(hit.error),
                        WalRecoveryMode::SkipAnyCorruptedRecords => {
                            info.log(format_args!("recovery: {} (skipping, replay goes on)", hit.error));
                            out.losses.bytes = out.losses.bytes.saturating_add(length - prev_len);
                            out.to_keep.push(prev);
                            continue;
                        }
                        WalRecoveryMode::TolerateCorruptedTailRecords | WalRecoveryMode::PointInTime => {
                            if let Some((file, at)) = synced_after(fs, dir, &wals[i..], prev)? {
                                return Err(refusal(&hit, &prev_path, Evidence::Synced, &file, at));
                            }
                            info.log(format_args!("recovery: {}: torn tail of an unsynced WAL", hit.error));
                            out.losses.bytes = out.losses.bytes.saturating_add(length - prev_len);
                            out.to_keep.push(prev);
                            drop_later(fs, dir, info, &mut out, &wals[i..])?;
                            break 'replay;
                        }
                    }
                }
                BatchRead::Batch { offset, batch, .. } => {
                    let into = Into { targets, max_family, wal: number };
                    max_seq = apply_batch(&out.fams, &into, &batch, &path, offset, max_seq)?;
                    records += 1;
                    for t in targets {
                        let Some(f) = out.fams.get_mut(&t.id) else { continue };
                        if f.mem.approximate_memory_usage() >= t.opts.write_buffer_size {
                            let (files, st, blob) = write_level0(
                                &t.opts,
                                db_id,
                                dir,
                                std::slice::from_ref(&f.mem),
                                new_number,
                                &[],
                                stop,
                                &blobs,
                            )?;
                            out.stats.add(&st);
                            f.files.extend(files);
                            f.blob_files.extend(blob.additions);
                            f.mem = new_mem(t);
                        }
                    }
                    continue;
                }
            };
            damaged = true;
            let dropped_here = u64::from(!hit.uncounted);
            match opts.wal_recovery_mode {
                WalRecoveryMode::AbsoluteConsistency => return Err(hit.error),
                WalRecoveryMode::SkipAnyCorruptedRecords => {
                    let resume = reader.position().max(hit.offset);
                    let n = if hit.whole_record {
                        1
                    } else {
                        dropped_here + reader.intact_records_between(hit.offset, resume)
                    };
                    drop_stretch(info, &mut out, &path, &hit, "skipped", resume, n);
                    continue;
                }
                WalRecoveryMode::TolerateCorruptedTailRecords | WalRecoveryMode::PointInTime => {
                    let tolerate = opts.wal_recovery_mode == WalRecoveryMode::TolerateCorruptedTailRecords;
                    if tolerate && !hit.at_tail {
                        return Err(hit.error);
                    }
                    // Search after the damaged record's start: its own FIRST fragment is intact when only its
                    // later fragments were lost (a WAL cut at a block boundary, or the page after it zeroed), and is
                    // no record that follows the damage. A whole undecodable record is judged from its own offset
                    // (it is found there: refused).
                    let from = if hit.whole_record { hit.offset } else { hit.offset + 1 };
                    match valid_after(fs, dir, &reader, from, number, &wals[i + 1..])? {
                        After::Nothing => {}
                        After::Record(file, at) => {
                            return Err(refusal(&hit, &path, Evidence::RecordFollows, &file, at))
                        }
                        After::Synced(file, at) => return Err(refusal(&hit, &path, Evidence::Synced, &file, at)),
                    }
                    // A torn tail: everything before it is a prefix of the acknowledged writes; nothing after it
                    // may be applied, in this WAL or a later one, or the result could have holes (D3).
                    let n = dropped_here + reader.intact_records_between(hit.offset, file_len);
                    drop_stretch(info, &mut out, &path, &hit, "torn tail, dropped", file_len, n);
                    out.to_keep.push(number);
                    info.log(format_args!("recovery: replayed {} records of {}", records, path.display()));
                    drop_later(fs, dir, info, &mut out, &wals[i + 1..])?;
                    break 'replay;
                }
            }
        }
        if damaged {
            out.to_keep.push(number);
        }
        info.log(format_args!("recovery: replayed {records} records of {}", path.display()));
    }
    out.max_seq = max_seq;
    Ok(out)
}

/// Where the records of one WAL go.
struct Into<'a> {
    targets: &'a [Target],
    max_family: u32,
    /// The WAL's number.
    wal: u64,
}

/// Adds the entries of `batch` (read at `offset` of `path`) to their families' memtables; returns the new
/// highest sequence. A record of a family whose log number is above this WAL is already in its tables, and one
/// of a dropped family (an id handed out before, no longer live) is skipped; an id never handed out is
/// corruption. Sequences come from disk: one that would pass [`MAX_SEQUENCE`] is corruption, never a wrap.
fn apply_batch(
    fams: &std::collections::BTreeMap<u32, FamilyReplay>,
    into: &Into<'_>,
    batch: &BatchRep,
    path: &Path,
    offset: u64,
    max_seq: u64,
) -> Result<u64> {
    let first = batch.sequence();
    let count = u64::from(batch.count());
    let beyond = || {
        Error::corruption(
            path,
            offset,
            format!("batch of {count} entries at sequence {first} runs past the largest sequence {MAX_SEQUENCE}"),
        )
    };
    if first.checked_add(count).is_none_or(|end| end > MAX_SEQUENCE + 1) {
        return Err(beyond());
    }
    let mut s = first;
    for e in batch.iter() {
        let e = e.map_err(|e| e.in_file(path, offset))?;
        // The header's count bounds `s` above; an entry beyond the count is still refused rather than wrapped.
        if s > MAX_SEQUENCE {
            return Err(beyond());
        }
        match into.targets.iter().find(|t| t.id == e.family) {
            Some(t) if into.wal >= t.log_number => {
                if let Some(f) = fams.get(&t.id) {
                    f.mem.add(s, e.kind, e.key, e.value);
                }
            }
            Some(_) => {}
            None if e.family <= into.max_family => {}
            None => {
                // A family is created by a synced MANIFEST edit before any write names it: a record of an id
                // never handed out means damage.
                return Err(Error::corruption(
                    path,
                    offset,
                    format!("write batch record for column family {}, which the MANIFEST does not hold", e.family),
                ));
            }
        }
        s += 1;
    }
    Ok(if s > first { max_seq.max(s - 1) } else { max_seq })
}

/// Counts, logs and keeps (for `lost/`) the WALs `wals`, none of which is replayed.
fn drop_later(fs: &dyn shaledb_vfs::Fs, dir: &Path, info: &InfoLog, out: &mut Replayed, wals: &[u64]) -> Result<()> {
    for &later in wals {
        let p = filenames::wal(dir, later);
        let len = fs.file_size(&p)?;
        if len > 0 {
            info.log(format_args!("recovery: {} ({len} bytes) not replayed", p.display()));
            out.losses.bytes = out.losses.bytes.saturating_add(len);
            out.to_keep.push(later);
        }
    }
    Ok(())
}

/// What follows damage, as [`valid_after`] judges it.
enum After {
    /// Nothing that the damage could have been written before: a torn tail.
    Nothing,
    /// An intact record, in this WAL (and no zero-filled page between) or in a later one.
    Record(std::path::PathBuf, u64),
    /// A later WAL's `Synced` marker covering the damaged WAL.
    Synced(std::path::PathBuf, u64),
}

/// What follows damage at `offset` of WAL `number` (read by `reader`): the first intact record after it in this
/// WAL, unless the damaged stretch up to it holds a zero-filled page (unsynced pages lost in a power failure);
/// then, when the next WAL starts with a `Predecessor` marker naming this one (it was switched out unsynced), a
/// `Synced` marker covering it in a later WAL; otherwise the first intact record of a later WAL (a WAL switched
/// out synced).
fn valid_after(
    fs: &dyn shaledb_vfs::Fs,
    dir: &Path,
    reader: &log::Reader,
    offset: u64,
    number: u64,
    later: &[u64],
) -> Result<After> {
    if let Some(at) = reader.next_intact_record(offset) {
        if zero_page_in(reader.data(), offset, at) {
            return Ok(After::Nothing);
        }
        return Ok(After::Record(reader.path().to_path_buf(), at));
    }
    let Some(&next) = later.first() else { return Ok(After::Nothing) };
    let path = filenames::wal(dir, next);
    let mut r = log::Reader::new(fs.read_all(&path)?, path.clone());
    if let BatchRead::Marker { offset: 0, marker: WalMarker::Predecessor { number: p, .. } } = wal::next_batch(&mut r) {
        if p == number {
            return Ok(match synced_after(fs, dir, later, number)? {
                Some((file, at)) => After::Synced(file, at),
                None => After::Nothing,
            });
        }
    }
    for &n in later {
        let path = filenames::wal(dir, n);
        let r = log::Reader::new(fs.read_all(&path)?, path.clone());
        if let Some(at) = r.next_intact_record(0) {
            return Ok(After::Record(path, at));
        }
    }
    Ok(After::Nothing)
}

/// The first `Synced` marker covering WAL `number` in the WALs `wals`: where it is.
fn synced_after(
    fs: &dyn shaledb_vfs::Fs,
    dir: &Path,
    wals: &[u64],
    number: u64,
) -> Result<Option<(std::path::PathBuf, u64)>> {
    for &n in wals {
        let path = filenames::wal(dir, n);
        let mut r = log::Reader::new(fs.read_all(&path)?, path.clone());
        loop {
            match wal::next_batch(&mut r) {
                BatchRead::Eof => break,
                BatchRead::Marker { offset, marker: WalMarker::Synced { through } } if through >= number => {
                    return Ok(Some((path, offset)));
                }
                _ => {}
            }
        }
    }
    Ok(None)
}

/// Counts and logs the stretch `hit.offset..end` of `path` holding `records` records that recovery dropped.
fn drop_stretch(info: &InfoLog, out: &mut Replayed, path: &Path, hit: &Hit, what: &str, end: u64, records: u64) {
    let bytes = end.saturating_sub(hit.offset);
    info.log(format_args!(
        "recovery: {} at offset {}: {what} {bytes} bytes holding {records} records ({})",
        path.display(),
        hit.offset,
        hit.error
    ));
    out.losses.records = out.losses.records.saturating_add(records);
    out.losses.bytes = out.losses.bytes.saturating_add(bytes);
}

/// True when `data[from..to]` holds what a lost page write-back leaves: a whole, page-aligned, zero-filled
/// page, or zeros from `from` to the end of its page (the unsynced rest of a page whose start was synced
/// earlier: the synced part survives, the rest reads as zeros).
fn zero_page_in(data: &[u8], from: u64, to: u64) -> bool {
    let (Ok(from), Ok(to)) = (usize::try_from(from), usize::try_from(to)) else { return false };
    let Some(mut page) = from.checked_next_multiple_of(PAGE) else { return false };
    if page > from && page <= to && data.get(from..page).is_some_and(|p| p.iter().all(|&b| b == 0)) {
        return true;
    }
    while page.saturating_add(PAGE) <= to {
        if data.get(page..page + PAGE).is_some_and(|p| p.iter().all(|&b| b == 0)) {
            return true;
        }
        page += PAGE;
    }
    false
}

/// Why damage is no torn tail, for [`refusal`].
enum Evidence {
    /// An intact record follows it.
    RecordFollows,
    /// A later marker says the WAL was synced in full.
    Synced,
}

/// The open's refusal of damage `hit` in `path`: `evidence`, found in `file` at offset `at`, shows that
/// acknowledged writes are gone.
fn refusal(hit: &Hit, path: &Path, evidence: Evidence, file: &Path, at: u64) -> Error {
    let name = |p: &Path| p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned());
    let why = match evidence {
        Evidence::RecordFollows if file == path => format!("valid records follow at offset {at}"),
        Evidence::RecordFollows => format!("valid records follow in {} at offset {at}", name(file)),
        Evidence::Synced => format!("the WAL was synced in full ({} records so at offset {at})", name(file)),
    };
    let what = match &hit.error {
        Error::Corruption { what, .. } => what.clone(),
        other => other.to_string(),
    };
    Error::corruption(
        path,
        hit.offset,
        format!(
            "{what}; {why}, so this is no torn tail: refusing to drop acknowledged writes (open with \
             WalRecoveryMode::SkipAnyCorruptedRecords to skip the damage, keeping the WAL in lost/)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_pages_are_found_only_when_whole_or_up_to_the_page_end() {
        let mut data = vec![1u8; 4 * PAGE];
        data[PAGE + 10..3 * PAGE].fill(0);
        assert!(zero_page_in(&data, 0, 4 * PAGE as u64));
        assert!(!zero_page_in(&data, 0, 2 * PAGE as u64 + 100), "the zeros before 2 pages are not a whole page");
        assert!(zero_page_in(&data, PAGE as u64 + 3, 3 * PAGE as u64));
        assert!(!zero_page_in(&data, u64::MAX - 2, u64::MAX));
        // The unsynced rest of a page whose start survived: zeros from the damage to the page's end.
        let mut data = vec![1u8; 3 * PAGE];
        data[2631..PAGE].fill(0);
        assert!(zero_page_in(&data, 2631, 2 * PAGE as u64));
        assert!(!zero_page_in(&data, 2630, 2 * PAGE as u64), "a non-zero byte before the zeros");
        data[PAGE - 1] = 7;
        assert!(!zero_page_in(&data, 2631, 2 * PAGE as u64), "zeros that stop before the page ends");
    }
}
