//! [`Db::ingest_external_file`]: RocksDB's `IngestExternalFile`, the protocol.
//!
//! 1. **Inspect** (no lock): open every file as a table; it must hold entries, all at sequence number 0
//!    (what [`crate::ingest::SstFileWriter`] writes); its key range is read from its first and last entries
//!    (with `verify_checksums_before_ingest`, every block is read, checksums checked and each entry's
//!    sequence number). The files, sorted by smallest key, must not overlap each other.
//! 2. **Number and copy** (no lock held during I/O): each file gets a new table number; the counter is
//!    recorded first by a MANIFEST edit naming no file, so a copy a crash leaves behind is below the counter
//!    and carries no identity: the next open removes it as a leftover (`db/files.rs`). Each file is copied
//!    (or hard linked with `move_files`) to `<number>.sst` and the copy fsynced.
//! 3. **Stop writes**: the `wal` lock is taken (no new write group can get sequence numbers) and the groups
//!    already numbered finish their memtable inserts. Under the `state` lock: if any file's range holds a key
//!    of a memtable, the memtables are flushed (`allow_blocking_flush`; else `InvalidArgument`) while writes
//!    stay stopped.
//! 4. **Place**: a file whose range overlaps a table of any level, or any file while a snapshot is live and
//!    `snapshot_consistency` is on, needs a global sequence number: one number, `next_seq`, for the whole
//!    ingestion (RocksDB's rule). Each file goes to the deepest level L such that no level 0..=L holds a
//!    table overlapping its range and no running compaction can write into its range at L (conservatively:
//!    the span of the busy input files at levels 0..=L, since a compaction's outputs lie within the span of
//!    its inputs and go to a level at or below them). A file overlapping level 0 stays in level 0.
//! 5. **Rewrite** a file that got the global sequence number: its entries are written into a new table
//!    (the database's table options for its level, its identity and number) with that sequence number.
//!    ShaleDB's tables carry the sequence number inside each entry and every reader (get, iterators,
//!    multi_get, compaction) decodes it from there; recording a per-file global sequence number in the
//!    MANIFEST instead would change the MANIFEST format and every one of those readers. The rewrite costs one
//!    pass over the file while writes wait, and only for files that need it (RocksDB also writes the number
//!    into the file by default, `write_global_seqno`).
//! 6. **Record**: one MANIFEST edit adds every file (the directory is fsynced first, D7) with the new last
//!    sequence; then the new version is published and the visible sequence moves to the global number. Only
//!    then are writes let through: a read sees all the files or none, and a snapshot taken before sees none
//!    of a file given a global number. Copies replaced by rewrites, and the originals with `move_files`, are
//!    removed afterwards.
//!
//! A failure before step 6 removes every file the ingestion created and changes nothing; a failed MANIFEST
//! write makes the database read-only (D6), as for a flush.

use super::errors::check_error;
use super::family::Family;
use super::{checkpoint, wal, Db, DbInner, State};
use crate::filenames;
use crate::ingest::IngestExternalFileOptions;
use crate::version::Version;
use shaledb_format::edit::{FileMeta, VersionEdit};
use shaledb_format::ikey::{self, MAX_SEQUENCE};
use shaledb_format::iter::InternalIterator;
use shaledb_format::table::{Table, TableBuilder, TableReadOptions};
use shaledb_vfs::{Error, ReadHints, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// One file to ingest, as inspected.
struct External {
    src: PathBuf,
    /// First and last internal keys (sequence number 0).
    smallest: Vec<u8>,
    largest: Vec<u8>,
    num_entries: u64,
    num_deletions: u64,
    file_size: u64,
    /// The table number of its copy in the database directory.
    number: u64,
}

impl External {
    fn smallest_user_key(&self) -> &[u8] {
        ikey::user_key(&self.smallest)
    }
    fn largest_user_key(&self) -> &[u8] {
        ikey::user_key(&self.largest)
    }
}

impl Db {
    /// Adds the tables at `paths` (written by [`crate::ingest::SstFileWriter`]) to the database atomically
    /// (RocksDB's `IngestExternalFile`): after it returns every key of every file is readable, after a crash
    /// either all of them or none are (docs/durability.md D15).
    ///
    /// The files must not overlap each other (else `InvalidArgument`) and must hold only entries at sequence
    /// number 0. Each goes to the deepest level whose tables and running compactions leave its key range
    /// free; a file overlapping data of the database (or any file, while a snapshot is live and
    /// `snapshot_consistency` is on) gets one global sequence number newer than every write, so it shadows
    /// what it overlaps and snapshots taken before do not see it. A file overlapping a memtable is ingested
    /// after the memtables are flushed (`allow_blocking_flush`). Writes wait while the files are placed, and
    /// while files that need the global number are rewritten with it. See `db/ingest.rs` for the protocol
    /// and [`IngestExternalFileOptions`] for the options. Not available with [`crate::Options::ttl`] (the
    /// files' values carry no write time): `NotSupported`.
    pub fn ingest_external_file<P: AsRef<Path>>(&self, paths: &[P], opts: &IngestExternalFileOptions) -> Result<()> {
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        let fam = self.inner.default.clone();
        ingest(&self.inner, &fam, &paths, opts)
    }

    /// [`Db::ingest_external_file`] into column family `cf` (placed by its levels, written with its options).
    pub fn ingest_external_file_cf<P: AsRef<Path>>(
        &self,
        cf: &super::ColumnFamily,
        paths: &[P],
        opts: &IngestExternalFileOptions,
    ) -> Result<()> {
        if cf.fam.db_token != self.inner.default.db_token || cf.fam.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "column family {:?} is dropped or a handle of another database",
                cf.name()
            )));
        }
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        ingest(&self.inner, &cf.fam, &paths, opts)
    }
}

fn ingest(inner: &Arc<DbInner>, fam: &Family, paths: &[PathBuf], o: &IngestExternalFileOptions) -> Result<()> {
    if inner.read_only {
        return Err(super::errors::refused("ingest_external_file"));
    }
    if inner.opts.ttl.is_some() {
        return Err(Error::NotSupported(
            "ingest_external_file in TTL mode: the files' values carry no write time".into(),
        ));
    }
    if paths.is_empty() {
        return Err(Error::InvalidArgument("ingest_external_file: the list of files is empty".into()));
    }
    let mut files =
        paths.iter().map(|p| inspect(inner, p, o.verify_checksums_before_ingest)).collect::<Result<Vec<_>>>()?;
    files.sort_by(|a, b| a.smallest_user_key().cmp(b.smallest_user_key()));
    for pair in files.windows(2) {
        if pair[0].largest_user_key() >= pair[1].smallest_user_key() {
            return Err(Error::InvalidArgument(format!(
                "ingest_external_file: the key ranges of {} and {} overlap",
                pair[0].src.display(),
                pair[1].src.display()
            )));
        }
    }
    reserve_numbers(inner, &mut files)?;
    let mut created: Vec<u64> = Vec::new();
    let result = copy_in(inner, &mut files, o, &mut created)
        .map_err(Failure::Clean)
        .and_then(|()| install(inner, fam, &files, o, &mut created));
    match result {
        Ok(replaced) => {
            for n in replaced {
                // Best effort: a copy left behind is a leftover the next open removes.
                let _ = inner.fs.remove(&filenames::table(&inner.dir, n));
            }
            if o.move_files {
                for f in &files {
                    let _ = inner.fs.remove(&f.src);
                }
            }
            Ok(())
        }
        Err(Failure::Clean(e)) => {
            for n in created {
                let _ = inner.fs.remove(&filenames::table(&inner.dir, n));
            }
            Err(e)
        }
        Err(Failure::Recorded(e)) => Err(e),
    }
}

/// How an ingestion failed: before anything was recorded (its files are removed), or in the MANIFEST write
/// (its files stay: the edit may be in the MANIFEST).
enum Failure {
    Clean(Error),
    Recorded(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Clean(e)
    }
}

/// Step 1: opens `path` as a table and reads its key range (module docs).
fn inspect(inner: &DbInner, path: &Path, verify: bool) -> Result<External> {
    let file = inner.fs.open(path, ReadHints::default())?;
    let t = Table::open(file, &TableReadOptions::default())?;
    let p = t.properties().clone();
    let bad = |what: String| Error::InvalidArgument(format!("ingest_external_file: {}: {what}", path.display()));
    if p.num_entries == 0 {
        return Err(bad("the table holds no entries".into()));
    }
    if p.oldest_blob_file.is_some() {
        return Err(bad("the table holds blob references (kind 0x11); external files hold values only".into()));
    }
    // SstFileWriter writes no range tombstones; a table holding some came from elsewhere, and placing them at
    // a global sequence number is not supported (RocksDB's ingestion of range deletions has its own rules).
    if !t.range_tombstones()?.is_empty() {
        return Err(bad("the table holds range tombstones, which ingestion does not support".into()));
    }
    if p.smallest_seq != 0 || p.largest_seq != 0 {
        return Err(bad(format!(
            "entries have sequence numbers {}..={}; an external file's are all 0 (write it with SstFileWriter)",
            p.smallest_seq, p.largest_seq
        )));
    }
    let mut it = t.iter(verify, false);
    it.seek_to_first();
    let smallest = it.valid().then(|| it.key().to_vec());
    if verify {
        t.verify()?;
        let mut prev: Option<Vec<u8>> = None;
        let mut count = 0u64;
        while it.valid() {
            let k = ikey::parse(it.key()).ok_or_else(|| Error::corruption(path, 0, "malformed internal key"))?;
            if k.seq != 0 {
                return Err(bad(format!("an entry has sequence number {}", k.seq)));
            }
            if k.kind == ikey::ValueKind::BlobIndex {
                return Err(bad("an entry is a blob reference (kind 0x11); external files hold values only".into()));
            }
            if prev.as_deref().is_some_and(|p| p >= k.user_key) {
                return Err(bad("user keys are not strictly increasing".into()));
            }
            prev = Some(k.user_key.to_vec());
            count += 1;
            it.next();
        }
        it.status()?;
        if count != p.num_entries {
            return Err(Error::corruption(path, 0, format!("{count} entries, the properties say {}", p.num_entries)));
        }
    }
    it.seek_to_last();
    let largest = it.valid().then(|| it.key().to_vec());
    it.status()?;
    let (Some(smallest), Some(largest)) = (smallest, largest) else {
        return Err(Error::corruption(path, 0, "no first or last entry in a table with entries"));
    };
    Ok(External {
        src: path.to_path_buf(),
        smallest,
        largest,
        num_entries: p.num_entries,
        num_deletions: p.num_deletions,
        file_size: p.file_size,
        number: 0,
    })
}

/// Step 2a: new numbers, recorded in the MANIFEST before any copy exists.
fn reserve_numbers(inner: &DbInner, files: &mut [External]) -> Result<()> {
    let mut st = inner.state.lock();
    check_error(&st.bg_error)?;
    for f in files.iter_mut() {
        f.number = st.vs.new_file_number()?;
    }
    if let Err(e) = st.vs.log_and_apply(VersionEdit::default()) {
        inner.set_bg_error(&mut st, &e, crate::listener::BackgroundErrorReason::ManifestWrite);
        return Err(e);
    }
    Ok(())
}

/// Step 2b: each file copied (or linked) to its number, fsynced.
fn copy_in(
    inner: &DbInner,
    files: &mut [External],
    o: &IngestExternalFileOptions,
    created: &mut Vec<u64>,
) -> Result<()> {
    let fs = inner.fs.as_ref();
    for f in files.iter_mut() {
        let dst = filenames::table(&inner.dir, f.number);
        created.push(f.number);
        let linked = o.move_files && {
            match fs.hard_link(&f.src, &dst).and_then(|()| sync_linked(fs, &dst)) {
                Ok(()) => true,
                Err(_) if o.failed_move_fall_back_to_copy => {
                    if fs.exists(&dst) {
                        fs.remove(&dst)?;
                    }
                    false
                }
                Err(e) => return Err(e),
            }
        };
        if !linked {
            let (len, _) = checkpoint::copy_between(fs, &f.src, fs, &dst, Some(f.file_size))?;
            if len != fs.file_size(&f.src)? {
                return Err(Error::InvalidArgument(format!(
                    "ingest_external_file: {} changed while it was copied",
                    f.src.display()
                )));
            }
        }
    }
    Ok(())
}

/// Syncs the file a link made: the caller's file may never have been synced (written by a process that
/// relied on this step, as RocksDB's ingestion syncs linked files too), and the link shares its data.
fn sync_linked(fs: &dyn crate::Fs, path: &std::path::Path) -> Result<()> {
    let mut f = fs.open_append(path)?;
    f.sync()
}

/// Whether a memtable holds a key, or a range tombstone over a key, in `[lo, hi]` (a file placed below a
/// memtable's tombstone would be hidden by it: it is flushed first, so the tombstone's table is overlapped).
fn memtable_overlaps(mem: &Arc<crate::memtable::MemTable>, lo: &[u8], hi: &[u8]) -> bool {
    if let Some(rd) = mem.range_tombstones() {
        if rd.fragments().iter().any(|f| f.start.as_slice() <= hi && lo < f.end.as_slice()) {
            return true;
        }
    }
    let mut it = mem.iter();
    let mut target = Vec::with_capacity(lo.len() + 8);
    ikey::append_internal_key(&mut target, lo, MAX_SEQUENCE, ikey::KIND_FOR_SEEK);
    it.seek(&target);
    it.valid() && ikey::user_key(it.key()) <= hi
}

/// Whether any table of `level` overlaps `[lo, hi]`.
fn level_overlaps(v: &Version, level: usize, lo: &[u8], hi: &[u8]) -> bool {
    v.files(level).iter().any(|f| f.smallest_user_key() <= hi && f.largest_user_key() >= lo)
}

/// Step 4: the level of a file with range `[lo, hi]` in `v`, where `busy` holds the input files of the
/// running compactions (module docs).
fn pick_level(v: &Version, busy: &HashSet<u64>, lo: &[u8], hi: &[u8]) -> usize {
    if level_overlaps(v, 0, lo, hi) {
        return 0;
    }
    // The span of the busy files at levels 0..=L, grown with L.
    let mut span: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut target = 0;
    for level in 0..v.num_levels() {
        for f in v.files(level).iter().filter(|f| busy.contains(&f.number)) {
            let (s, l) = (f.smallest_user_key(), f.largest_user_key());
            let (a, b) = span.get_or_insert_with(|| (s.to_vec(), l.to_vec()));
            if s < &a[..] {
                *a = s.to_vec();
            }
            if l > &b[..] {
                *b = l.to_vec();
            }
        }
        if level == 0 {
            continue;
        }
        let compacting = span.as_ref().is_some_and(|(a, b)| &a[..] <= hi && &b[..] >= lo);
        if compacting || level_overlaps(v, level, lo, hi) {
            break;
        }
        target = level;
    }
    target
}

/// Steps 3 to 6 under the `wal` and `state` locks. Returns the numbers of copies replaced by rewrites.
fn install(
    inner: &Arc<DbInner>,
    fam: &Family,
    files: &[External],
    o: &IngestExternalFileOptions,
    created: &mut Vec<u64>,
) -> std::result::Result<Vec<u64>, Failure> {
    let mut wal = inner.wal.lock();
    wait_for_inserts(inner, wal.next_seq);
    let mut st = inner.state.lock();
    check_error(&st.bg_error)?;
    let overlaps_memtable = |st: &State| {
        files.iter().any(|f| {
            let Some(d) = st.fams.get(&fam.id) else { return false };
            std::iter::once(&d.mem)
                .chain(&d.imm)
                .any(|m| memtable_overlaps(m, f.smallest_user_key(), f.largest_user_key()))
        })
    };
    if overlaps_memtable(&st) {
        if !o.allow_blocking_flush {
            return Err(Failure::Clean(Error::InvalidArgument(
                "ingest_external_file: a file's key range overlaps the memtable and allow_blocking_flush is off".into(),
            )));
        }
        flush_memtables(inner, fam.id, &mut wal, &mut st)?;
    }
    // Place every file and decide whether the ingestion needs its global sequence number.
    let force = o.snapshot_consistency && !inner.snapshots.sequences().is_empty();
    let Some(v) = st.vs.current_of(fam.id).cloned() else {
        return Err(Failure::Clean(Error::InvalidArgument(format!("column family {:?} was dropped", fam.name))));
    };
    let mut plan = Vec::with_capacity(files.len());
    for f in files {
        let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
        let overlaps_db = (0..v.num_levels()).any(|l| level_overlaps(&v, l, lo, hi));
        // FIFO keeps everything in L0 (RocksDB's FIFO has one level); a deeper file would be dropped first.
        let fifo = fam.opts.compaction_style == crate::compaction_style::CompactionStyle::Fifo;
        let level = if fifo { 0 } else { pick_level(&v, &st.busy, lo, hi) };
        plan.push((level, force || overlaps_db));
    }
    let global = plan.iter().any(|&(_, g)| g);
    if global && !o.allow_global_seqno {
        return Err(Failure::Clean(Error::InvalidArgument(
            "ingest_external_file: the files need a global sequence number (they overlap data of the database, \
             or a snapshot is live) and allow_global_seqno is off"
                .into(),
        )));
    }
    let seq = wal.next_seq;
    if global && seq > MAX_SEQUENCE {
        return Err(Failure::Clean(Error::InvalidArgument(format!(
            "sequence numbers exhausted: ingestion at sequence {seq} would pass {MAX_SEQUENCE}"
        ))));
    }
    let mut edit = VersionEdit { family: (fam.id != 0).then_some(fam.id), ..VersionEdit::default() };
    let mut replaced = Vec::new();
    for (f, &(level, needs_seq)) in files.iter().zip(&plan) {
        let meta = if needs_seq {
            let number = st.vs.new_file_number()?;
            created.push(number);
            let meta = rewrite(inner, fam, f, number, level, seq)?;
            replaced.push(f.number);
            meta
        } else {
            FileMeta {
                number: f.number,
                file_size: f.file_size,
                smallest: f.smallest.clone(),
                largest: f.largest.clone(),
                smallest_seq: 0,
                largest_seq: 0,
                num_entries: f.num_entries,
                num_deletions: f.num_deletions,
                // `inspect` refuses external files with range tombstones.
                num_range_deletions: 0,
            }
        };
        edit.new_files.push((level as u32, meta));
    }
    if global {
        edit.last_sequence = Some(seq);
    }
    let line = format!(
        "ingested {} file(s){}: {}",
        files.len(),
        if global { format!(" at sequence {seq}") } else { String::new() },
        edit.new_files.iter().map(|(l, m)| format!("{:06}.sst@L{l}", m.number)).collect::<Vec<_>>().join(", ")
    );
    if let Err(e) = st.vs.log_and_apply(edit) {
        inner.set_bg_error(&mut st, &e, crate::listener::BackgroundErrorReason::ManifestWrite);
        return Err(Failure::Recorded(e));
    }
    if global {
        wal.next_seq = seq + 1;
    }
    inner.install_super_version(&mut st, fam.id);
    if global {
        let _g = inner.publish.lock();
        inner.visible_seq.store(seq, Ordering::Release);
        inner.publish_cv.notify_all();
    }
    inner.info_log.log(line);
    inner.bg_cv.notify_all();
    Ok(replaced)
}

/// Waits until every write group numbered below `next_seq` is in its memtable. REQUIRES: `wal` locked.
fn wait_for_inserts(inner: &DbInner, next_seq: u64) {
    let mut g = inner.publish.lock();
    while inner.visible_seq.load(Ordering::Acquire) + 1 < next_seq {
        inner.publish_cv.wait(&mut g);
    }
}

/// Step 3's blocking flush: every memtable written, writes still stopped. REQUIRES: `wal` and `state` locked.
fn flush_memtables(
    inner: &Arc<DbInner>,
    fid: u32,
    wal: &mut wal::WalState,
    st: &mut parking_lot::MutexGuard<'_, State>,
) -> Result<()> {
    if st.fams.get(&fid).is_some_and(|f| !f.mem.is_empty()) {
        wal::switch_memtable(inner, wal, st, &[fid]).inspect_err(|e| {
            inner.set_bg_error(st, e, crate::listener::BackgroundErrorReason::MemTable);
        })?;
    }
    let Some(target) = st.fams.get(&fid).and_then(|f| f.imm.first()).map(|m| m.id()) else { return Ok(()) };
    inner.bg_cv.notify_all();
    while st.fams.get(&fid).is_some_and(|f| f.imm.iter().any(|m| m.id() <= target)) {
        check_error(&st.bg_error)?;
        if st.bg_threads_alive == 0 {
            return Err(Error::Closed);
        }
        inner.bg_cv.wait_for(st, Duration::from_millis(50));
    }
    check_error(&st.bg_error)
}

/// Step 5: the copy of `f` rewritten as table `number` with every entry at `seq`; fsynced.
fn rewrite(inner: &DbInner, fam: &Family, f: &External, number: u64, level: usize, seq: u64) -> Result<FileMeta> {
    let src = filenames::table(&inner.dir, f.number);
    let t = Table::open(
        inner.fs.open(&src, ReadHints { sequential: true, ..ReadHints::default() })?,
        &TableReadOptions::default(),
    )?;
    let mut topts = fam.opts.table_options(inner.db_id, level, level + 1 == fam.opts.num_levels);
    topts.file_number = Some(number);
    let dst = filenames::table(&inner.dir, number);
    let mut b = TableBuilder::new(topts, inner.fs.create(&dst)?);
    let mut it = t.iter(true, false);
    it.seek_to_first();
    let (mut smallest, mut largest, mut key) = (None, Vec::new(), Vec::new());
    while it.valid() {
        let k = ikey::parse(it.key()).ok_or_else(|| Error::corruption(&src, 0, "malformed internal key"))?;
        if k.kind == ikey::ValueKind::BlobIndex {
            return Err(Error::InvalidArgument(format!(
                "ingest_external_file: {}: an entry is a blob reference (kind 0x11); external files hold values only",
                f.src.display()
            )));
        }
        key.clear();
        ikey::append_internal_key(&mut key, k.user_key, seq, k.kind);
        b.add(&key, it.value())?;
        if smallest.is_none() {
            smallest = Some(key.clone());
        }
        std::mem::swap(&mut largest, &mut key);
        it.next();
    }
    it.status()?;
    let p = b.finish()?;
    let smallest = smallest.ok_or_else(|| Error::corruption(&src, 0, "the copy holds no entries"))?;
    if p.num_entries != f.num_entries {
        return Err(Error::corruption(&src, 0, format!("{} entries, {} expected", p.num_entries, f.num_entries)));
    }
    Ok(FileMeta {
        number,
        file_size: p.file_size,
        smallest,
        largest,
        smallest_seq: seq,
        largest_seq: seq,
        num_entries: p.num_entries,
        num_deletions: p.num_deletions,
        num_range_deletions: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(number: u64, lo: &str, hi: &str) -> Arc<FileMeta> {
        let key = |k: &str| {
            let mut b = Vec::new();
            ikey::append_internal_key(&mut b, k.as_bytes(), 5, ikey::ValueKind::Value);
            b
        };
        Arc::new(FileMeta { number, smallest: key(lo), largest: key(hi), ..FileMeta::default() })
    }

    fn version(files: &[(usize, Arc<FileMeta>)]) -> Version {
        let mut v = Version::new(7);
        for (level, f) in files {
            v.levels[*level].push(f.clone());
        }
        v
    }

    #[test]
    fn a_file_goes_to_the_deepest_level_above_the_first_overlap() {
        let v = version(&[(0, file(1, "x", "z")), (3, file(2, "c", "f")), (6, file(3, "a", "m"))]);
        let none = HashSet::new();
        assert_eq!(pick_level(&v, &none, b"d", b"e"), 2);
        assert_eq!(pick_level(&v, &none, b"g", b"h"), 5);
        assert_eq!(pick_level(&v, &none, b"n", b"p"), 6);
        assert_eq!(pick_level(&v, &none, b"y", b"y"), 0);
        assert_eq!(pick_level(&Version::new(7), &none, b"a", b"z"), 6);
    }

    #[test]
    fn a_running_compaction_keeps_files_out_of_the_span_of_its_inputs() {
        // A compaction of the level-1 files [a, b] and [y, z] writes into level 2 over [a, z]: a file in the
        // gap between its inputs must stay above level 2, though no table overlaps it.
        let v = version(&[(1, file(1, "a", "b")), (1, file(2, "y", "z"))]);
        let busy: HashSet<u64> = [1, 2].into();
        assert_eq!(pick_level(&v, &busy, b"m", b"n"), 0);
        assert_eq!(pick_level(&v, &HashSet::new(), b"m", b"n"), 6);
        // A level-0 compaction's span blocks every level below.
        let v = version(&[(0, file(3, "a", "c")), (0, file(4, "x", "z"))]);
        let busy: HashSet<u64> = [3, 4].into();
        assert_eq!(pick_level(&v, &busy, b"m", b"n"), 0);
        // A compaction deeper down leaves the levels above it free.
        let v = version(&[(4, file(5, "a", "c")), (4, file(6, "x", "z"))]);
        let busy: HashSet<u64> = [5, 6].into();
        assert_eq!(pick_level(&v, &busy, b"m", b"n"), 3);
    }
}
