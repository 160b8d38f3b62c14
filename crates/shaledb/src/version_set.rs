//! The version set: the current [`Version`] and the MANIFEST that records how it came to be.
//!
//! Every change of the set of live files is a [`VersionEdit`] appended to the MANIFEST and synced before the
//! new version is published (D7). At open a new MANIFEST is always started, holding one edit that is a
//! snapshot of the recovered version; CURRENT is then switched to it atomically (temp file, fsync, rename,
//! directory fsync), so a torn MANIFEST tail from a crash is never appended to.
//!
//! REQUIRES: every method runs under the database's state mutex (the caller's `&mut`).

use crate::filenames;
use crate::options::Options;
use crate::version::Version;
use shaledb_format::edit::{BlobFileGarbage, FileMeta, VersionEdit, DB_ID_LEN, MAX_FILE_NUMBER};
use shaledb_format::ikey;
use shaledb_format::log;
use shaledb_format::manifest::{self, EditProblem, EditRead, LiveFiles};
use shaledb_vfs::{Error, Fs, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Name recorded in the MANIFEST: keys are ordered bytewise (the only order ShaleDB supports).
pub(crate) const COMPARATOR: &str = shaledb_format::edit::BYTEWISE_COMPARATOR;

/// The name of the default column family (id 0), as RocksDB names it.
pub(crate) const DEFAULT_FAMILY_NAME: &str = "default";

/// One column family's part of the version set.
#[derive(Clone)]
pub(crate) struct FamilyVersion {
    pub(crate) name: String,
    pub(crate) current: Arc<Version>,
    /// WALs numbered below this hold nothing of this family that is not in its tables.
    pub(crate) log_number: u64,
}

fn default_family(num_levels: usize, log_number: u64) -> BTreeMap<u32, FamilyVersion> {
    let f = FamilyVersion {
        name: DEFAULT_FAMILY_NAME.to_string(),
        current: Arc::new(Version::new(num_levels)),
        log_number,
    };
    BTreeMap::from([(0, f)])
}

pub(crate) struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    num_levels: usize,
    max_manifest_size: u64,
    /// Every live column family's version and log number, by id; the default family (0) is always there.
    families: BTreeMap<u32, FamilyVersion>,
    /// The largest family id ever handed out (never reused).
    pub(crate) max_family: u32,
    manifest: Option<log::Writer>,
    manifest_number: u64,
    /// Next number to hand out for a WAL, table, MANIFEST or temp file.
    pub(crate) next_file_number: u64,
    /// Largest sequence number recorded as durable in tables or WALs.
    pub(crate) last_sequence: u64,
    /// The error of a failed MANIFEST append or sync. The failed edit may or may not be in the file, so
    /// memory and the file may disagree: no later edit may be appended (it would record stale state, such as
    /// a `last_sequence` below the failed edit's, after it). Every later `log_and_apply` returns this error.
    failed: Option<Error>,
    /// The database's identity, recorded in the snapshot edit of every new MANIFEST. `None` only between
    /// recovering a MANIFEST written before identities existed and open adopting one.
    pub(crate) db_id: Option<[u8; DB_ID_LEN]>,
    /// Numbers of files found at open that look like ours but cannot be proven ours (at or above the counter,
    /// no identity): the counter steps over them so that no file of ours ever takes their name.
    pub(crate) foreign_numbers: BTreeSet<u64>,
    /// Blob files that left the current version (all their records garbage), to delete once no live version
    /// lists them (`db::obsolete::obsolete_files`, then `remove_files` without the lock).
    pub(crate) obsolete_blobs: Vec<u64>,
}

/// Checks that a number read from MANIFEST-`path` at record `offset` is within the format's range.
fn check_range(path: &Path, offset: u64, what: &str, value: u64, max: u64) -> Result<()> {
    if value > max {
        return Err(Error::corruption(path, offset, format!("{what} {value} is above the limit {max}")));
    }
    Ok(())
}

/// Applies `edit` to `base`, giving the next version. Fails with `Corruption` when the edit does not fit (a
/// deleted file that is not there, a level out of range, overlapping files in a sorted level).
pub(crate) fn apply(base: &Version, edit: &VersionEdit, manifest: &Path) -> Result<Version> {
    let bad = |what: String| Error::corruption(manifest, 0, what);
    let mut levels = base.levels.clone();
    for &(level, number) in &edit.deleted_files {
        let files = levels.get_mut(level as usize).ok_or_else(|| bad(format!("deleted file in level {level}")))?;
        let before = files.len();
        files.retain(|f| f.number != number);
        if files.len() == before {
            return Err(bad(format!("edit deletes file {number} which is not in level {level}")));
        }
    }
    for (level, meta) in &edit.new_files {
        let files = levels.get_mut(*level as usize).ok_or_else(|| bad(format!("new file in level {level}")))?;
        files.push(Arc::new(meta.clone()));
    }
    let mut blob_files = base.blob_files.clone();
    if let Some(p) = shaledb_format::blob::apply_edit(&mut blob_files, &edit.blob_files, &edit.blob_garbage).pop() {
        return Err(bad(p));
    }
    for (level, files) in levels.iter_mut().enumerate() {
        if level == 0 {
            files.sort_by(|a, b| b.largest_seq.cmp(&a.largest_seq).then(b.number.cmp(&a.number)));
        } else {
            manifest::sort_by_smallest(files);
            if let Some((a, b)) = manifest::overlapping_neighbours(files).next() {
                return Err(bad(format!("files {a} and {b} overlap in level {level}")));
            }
        }
    }
    Ok(Version { levels, blob_files })
}

/// Checks the numbers of `edit` (read at record `offset` of MANIFEST `path`) against the format's limits and
/// `opts`, then folds it into `live`: the step of MANIFEST replay shared by recovery and a secondary instance's
/// catch-up (`db/secondary.rs`). A problem is `Corruption`, `InvalidArgument` or `NotSupported`.
pub(crate) fn apply_checked(
    live: &mut LiveFiles,
    edit: &VersionEdit,
    path: &Path,
    offset: u64,
    opts: &Options,
) -> Result<()> {
    // Numbers read from disk stay in range, so the arithmetic on them below cannot wrap.
    let (p, at) = (path, offset);
    if let Some(n) = edit.next_file_number {
        check_range(p, at, "next file number", n, MAX_FILE_NUMBER)?;
    }
    if let Some(n) = edit.log_number {
        check_range(p, at, "log number", n, MAX_FILE_NUMBER)?;
    }
    if let Some(n) = edit.last_sequence {
        check_range(p, at, "last sequence", n, ikey::MAX_SEQUENCE)?;
    }
    for &(_, n) in &edit.deleted_files {
        check_range(p, at, "deleted file number", n, MAX_FILE_NUMBER)?;
    }
    for (_, f) in &edit.new_files {
        check_range(p, at, "file number", f.number, MAX_FILE_NUMBER)?;
        check_range(p, at, "largest sequence of a file", f.largest_seq, ikey::MAX_SEQUENCE)?;
    }
    match manifest::unsupported(edit).into_iter().next() {
        Some(EditProblem::UnknownComparator(c)) => {
            return Err(Error::InvalidArgument(format!(
                "database uses comparator {c:?}; ShaleDB only supports {COMPARATOR:?}"
            )));
        }
        Some(p) => return Err(Error::NotSupported(format!("database {p}"))),
        None => {}
    }
    for (level, _) in &edit.new_files {
        if *level as usize >= opts.num_levels {
            return Err(Error::InvalidArgument(format!(
                "database has files in level {level} but num_levels is {}",
                opts.num_levels
            )));
        }
    }
    if let Some(p) = live.apply(edit).into_iter().next() {
        return Err(Error::corruption(path, offset, p.to_string()));
    }
    Ok(())
}

impl VersionSet {
    /// A brand-new database: an empty version, MANIFEST-000001 and CURRENT.
    pub(crate) fn create(dir: &Path, opts: &Options, db_id: [u8; DB_ID_LEN]) -> Result<VersionSet> {
        let mut vs = VersionSet {
            dir: dir.to_path_buf(),
            fs: opts.fs.clone(),
            num_levels: opts.num_levels,
            max_manifest_size: opts.max_manifest_file_size,
            families: default_family(opts.num_levels, 0),
            max_family: 0,
            manifest: None,
            manifest_number: 0,
            next_file_number: 1,
            last_sequence: 0,
            failed: None,
            db_id: Some(db_id),
            foreign_numbers: BTreeSet::new(),
            obsolete_blobs: Vec::new(),
        };
        vs.write_new_manifest()?;
        Ok(vs)
    }

    /// Reads CURRENT and replays its MANIFEST. Does not start a new MANIFEST: call
    /// [`VersionSet::write_new_manifest`] (or `log_and_apply`) once recovery has settled.
    pub(crate) fn recover(dir: &Path, opts: &Options) -> Result<VersionSet> {
        let current_path = filenames::current(dir);
        let current = opts.fs.read_all(&current_path)?;
        let manifest_number = filenames::manifest_in_current(&current)
            .ok_or_else(|| Error::corruption(&current_path, 0, "CURRENT does not name a MANIFEST"))?;
        VersionSet::recover_manifest(dir, opts, manifest_number)
    }

    /// Replays MANIFEST-`manifest_number` (named by CURRENT, or a candidate of `repair`).
    pub(crate) fn recover_manifest(dir: &Path, opts: &Options, manifest_number: u64) -> Result<VersionSet> {
        let fs = opts.fs.clone();
        let manifest_path = dir.join(filenames::manifest_name(manifest_number));
        let data = fs.read_all(&manifest_path)?;
        let mut reader = log::Reader::new(data, manifest_path.clone());
        let mut live = LiveFiles::default();
        let mut records = 0u64;
        let mut tail_damage = None;
        loop {
            match manifest::next_edit(&mut reader) {
                EditRead::Eof => break,
                // A MANIFEST edit is synced before it takes effect, so an incomplete last record was never
                // acted upon: ignore it. Any other damage is real corruption.
                EditRead::Damage(d) if d.at_tail && records > 0 => {
                    tail_damage = Some(d.to_error(&manifest_path));
                    break;
                }
                EditRead::Damage(d) => return Err(d.to_error(&manifest_path)),
                EditRead::Undecodable(e) => return Err(e),
                EditRead::Edit { offset, edit } => {
                    records += 1;
                    apply_checked(&mut live, &edit, &manifest_path, offset, opts)?;
                }
            }
        }
        let vs = VersionSet::from_live(dir, opts, manifest_number, &live, &manifest_path)?;
        if let Some(damage) = tail_damage {
            // A damaged last edit is ignored only if it was never acted upon: an edit is synced before its
            // effects (deleting a compaction's inputs or a flushed WAL) happen, so if the version without it
            // names a missing table or WAL, the edit was durable and the damage is real corruption (D4).
            let versions: Vec<&Arc<Version>> = vs.families.values().map(|f| &f.current).collect();
            let missing_table = versions
                .iter()
                .flat_map(|v| v.levels.iter().flatten())
                .find(|f| !fs.exists(&filenames::table(dir, f.number)))
                .map(|f| f.number);
            let missing_blob = versions
                .iter()
                .flat_map(|v| v.blob_files.keys())
                .find(|&&n| !fs.exists(&filenames::blob(dir, n)))
                .copied();
            let missing_table = missing_table.or(missing_blob);
            let missing_wal = Some(vs.min_log_number()).filter(|&n| n != 0 && !fs.exists(&filenames::wal(dir, n)));
            if missing_table.is_some() || missing_wal.is_some() {
                return Err(damage);
            }
        }
        Ok(vs)
    }

    /// The version set the replayed edits `live` of MANIFEST-`manifest_number` (at `manifest_path`) add up to:
    /// recovery's, and a secondary instance's after each catch-up (`db/secondary.rs`).
    pub(crate) fn from_live(
        dir: &Path,
        opts: &Options,
        manifest_number: u64,
        live: &LiveFiles,
        manifest_path: &Path,
    ) -> Result<VersionSet> {
        let fs = opts.fs.clone();
        let (Some(next_file_number), Some(log_number), Some(last_sequence)) =
            (live.next_file_number, live.log_number, live.last_sequence)
        else {
            return Err(Error::corruption(manifest_path, 0, "MANIFEST lacks next file number, log number or sequence"));
        };
        // The replayed files in the engine's order (see `Version`), family by family.
        let build = |levels: &BTreeMap<u32, BTreeMap<u64, FileMeta>>,
                     blobs: &BTreeMap<u64, shaledb_format::blob::BlobFileMeta>|
         -> Result<Version> {
            let all = VersionEdit {
                new_files: levels
                    .iter()
                    .flat_map(|(level, files)| files.values().map(move |f| (*level, f.clone())))
                    .collect(),
                ..VersionEdit::default()
            };
            let mut version = apply(&Version::new(opts.num_levels), &all, manifest_path)?;
            version.blob_files = blobs.clone();
            Ok(version)
        };
        let mut families = default_family(opts.num_levels, log_number);
        if let Some(f) = families.get_mut(&0) {
            f.current = Arc::new(build(&live.levels, &live.blob_files)?);
        }
        for (id, f) in &live.families {
            let log_number = f.log_number.unwrap_or(0);
            let current = Arc::new(build(&f.levels, &f.blob_files)?);
            families.insert(*id, FamilyVersion { name: f.name.clone(), current, log_number });
        }
        let db_id = live.db_id;
        let versions = || families.values().map(|f| &f.current);
        let max_blob = versions().flat_map(|v| v.blob_files.keys()).max().copied().unwrap_or(0);
        let max_file =
            versions().flat_map(|v| v.levels.iter().flatten()).map(|f| f.number).max().unwrap_or(0).max(max_blob);
        // A table never holds a sequence number above the last one recorded with it; the maximum guards
        // against a MANIFEST from a build that could append a stale edit after a failed sync.
        let max_seq = versions().flat_map(|v| v.levels.iter().flatten()).map(|f| f.largest_seq).max().unwrap_or(0);
        Ok(VersionSet {
            dir: dir.to_path_buf(),
            fs,
            num_levels: opts.num_levels,
            max_manifest_size: opts.max_manifest_file_size,
            families,
            max_family: live.max_family,
            manifest: None,
            manifest_number,
            next_file_number: next_file_number.max(max_file + 1).max(manifest_number + 1),
            last_sequence: last_sequence.max(max_seq),
            failed: None,
            db_id,
            foreign_numbers: BTreeSet::new(),
            obsolete_blobs: Vec::new(),
        })
    }

    /// The default family's current version.
    pub(crate) fn current(&self) -> &Arc<Version> {
        &self.families[&0].current
    }

    /// Family `id`'s current version (`None` once dropped).
    pub(crate) fn current_of(&self, id: u32) -> Option<&Arc<Version>> {
        self.families.get(&id).map(|f| &f.current)
    }

    /// Every live family, by id.
    pub(crate) fn families(&self) -> &BTreeMap<u32, FamilyVersion> {
        &self.families
    }

    /// The numbers of every live table and blob file, of every family.
    pub(crate) fn live_numbers(&self) -> std::collections::HashSet<u64> {
        let mut live = std::collections::HashSet::new();
        for f in self.families.values() {
            live.extend(f.current.levels.iter().flatten().map(|f| f.number));
            live.extend(f.current.blob_files.keys().copied());
        }
        live
    }

    /// The smallest log number of any live family: WALs numbered below it hold nothing any family needs.
    pub(crate) fn min_log_number(&self) -> u64 {
        self.families.values().map(|f| f.log_number).min().unwrap_or(0)
    }

    pub(crate) fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Hands out the next file number, stepping over [`VersionSet::foreign_numbers`]. Past
    /// `MAX_FILE_NUMBER` it is an error, never a wrap (the counter would take the numbers of live files).
    pub(crate) fn new_file_number(&mut self) -> Result<u64> {
        loop {
            let n = self.next_file_number;
            if n > MAX_FILE_NUMBER {
                return Err(Error::corruption(
                    self.dir.join(filenames::manifest_name(self.manifest_number)),
                    0,
                    format!("the file number counter would pass {MAX_FILE_NUMBER}"),
                ));
            }
            self.next_file_number = n + 1;
            if !self.foreign_numbers.contains(&n) {
                return Ok(n);
            }
        }
    }

    /// Marks `n` as used (a file of ours seen on disk during recovery). Numbers outside the format's range are
    /// never ours and never move the counter.
    pub(crate) fn mark_file_number_used(&mut self, n: u64) {
        if n <= MAX_FILE_NUMBER && self.next_file_number <= n {
            self.next_file_number = n + 1;
        }
    }

    /// The edits that open a new MANIFEST: the database's counters with the default family's files, then one
    /// edit per other family (its creation, log number, files and blob files).
    pub(crate) fn snapshot_edits(&self) -> Vec<VersionEdit> {
        let mut edits = Vec::with_capacity(self.families.len());
        for (&id, f) in &self.families {
            let mut e = if id == 0 {
                VersionEdit {
                    comparator: Some(COMPARATOR.to_string()),
                    format_version: Some(shaledb_format::FORMAT_VERSION),
                    next_file_number: Some(self.next_file_number),
                    last_sequence: Some(self.last_sequence),
                    db_id: self.db_id,
                    max_family: (self.max_family > 0).then_some(self.max_family),
                    ..VersionEdit::default()
                }
            } else {
                VersionEdit { family: Some(id), family_add: Some(f.name.clone()), ..VersionEdit::default() }
            };
            e.log_number = Some(f.log_number);
            for (level, files) in f.current.levels.iter().enumerate() {
                for file in files {
                    e.new_files.push((level as u32, FileMeta::clone(file)));
                }
            }
            for m in f.current.blob_files.values() {
                e.blob_files.push(m.addition);
                if m.garbage_count > 0 {
                    let (record_count, record_bytes) = (m.garbage_count, m.garbage_bytes);
                    e.blob_garbage.push(BlobFileGarbage { number: m.addition.number, record_count, record_bytes });
                }
            }
            edits.push(e);
        }
        edits
    }

    /// Starts a new MANIFEST holding a snapshot of the current state and points CURRENT at it.
    pub(crate) fn write_new_manifest(&mut self) -> Result<()> {
        let number = self.new_file_number()?;
        let path = self.dir.join(filenames::manifest_name(number));
        let result = (|| {
            let mut w = log::Writer::new(self.fs.create(&path)?);
            for snapshot in self.snapshot_edits() {
                // Never write what the decoder would refuse: the database could not be opened again.
                snapshot.validate()?;
                let mut buf = Vec::new();
                snapshot.encode(&mut buf);
                w.add_record(&buf)?;
            }
            w.sync()?;
            let temp_number = self.new_file_number()?;
            set_current(self.fs.as_ref(), &self.dir, number, temp_number)?;
            Ok(w)
        })();
        match result {
            Ok(w) => {
                let old = std::mem::replace(&mut self.manifest_number, number);
                self.manifest = Some(w);
                if old != 0 && old != number {
                    // Best effort: an old MANIFEST left behind is removed as an orphan at the next open.
                    let _ = self.fs.remove(&self.dir.join(filenames::manifest_name(old)));
                }
                Ok(())
            }
            Err(e) => {
                // If CURRENT was already renamed to name the new MANIFEST (a later directory sync failed), the
                // file must stay: removing it would leave CURRENT naming nothing. Otherwise it is unused.
                let named = self.fs.read_all(&filenames::current(&self.dir)).ok();
                let expect = format!("{}\n", filenames::manifest_name(number));
                if named.as_deref() != Some(expect.as_bytes()) {
                    let _ = self.fs.remove(&path);
                }
                Err(e)
            }
        }
    }

    /// Records `edit` durably, then makes its result the current version. On error nothing changes in
    /// memory; the caller must treat the database as failed (the MANIFEST may hold a partial record, or the
    /// whole edit unsynced). After a failed append or sync every later call fails with the same error, so
    /// a background job finishing after the failure cannot append an edit built on the stale state.
    pub(crate) fn log_and_apply(&mut self, edit: VersionEdit) -> Result<Arc<Version>> {
        self.apply_edit(edit, true)
    }

    /// [`VersionSet::log_and_apply`] for an edit whose new files' directory entries the caller has already
    /// made durable: a flush or compaction that fsynced the directory after creating its outputs, without the
    /// state lock, or a trivial move (its files were named by an earlier edit). The directory fsync commits
    /// the file system's journal, which waits for the data of every write in flight; under the state lock
    /// every writer's memtable switch waited behind it (docs/perf/dir-sync.md).
    pub(crate) fn log_and_apply_dir_synced(&mut self, edit: VersionEdit) -> Result<Arc<Version>> {
        self.apply_edit(edit, false)
    }

    fn apply_edit(&mut self, mut edit: VersionEdit, sync_dir: bool) -> Result<Arc<Version>> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let fam = edit.family.unwrap_or(0);
        let manifest_path = self.dir.join(filenames::manifest_name(self.manifest_number));
        // The family's state after the edit (`None`: dropped).
        let next: Option<FamilyVersion> = if let Some(name) = &edit.family_add {
            if self.families.contains_key(&fam) || fam <= self.max_family {
                return Err(Error::InvalidArgument(format!("column family id {fam} is live or was used before")));
            }
            let base = Version::new(self.num_levels);
            let current = Arc::new(apply(&base, &edit, &manifest_path)?);
            edit.max_family = Some(fam);
            Some(FamilyVersion { name: name.clone(), current, log_number: edit.log_number.unwrap_or(0) })
        } else {
            let Some(f) = self.families.get(&fam) else {
                return Err(Error::InvalidArgument(format!("column family {fam} does not exist (dropped?)")));
            };
            if let Some(n) = edit.log_number {
                debug_assert!(n >= f.log_number);
            }
            if edit.family_drop {
                None
            } else {
                let current = Arc::new(apply(&f.current, &edit, &manifest_path)?);
                Some(FamilyVersion {
                    name: f.name.clone(),
                    current,
                    log_number: edit.log_number.unwrap_or(f.log_number),
                })
            }
        };
        edit.next_file_number = Some(self.next_file_number);
        let last_seq = edit.last_sequence.unwrap_or(self.last_sequence).max(self.last_sequence);
        edit.last_sequence = Some(last_seq);
        if sync_dir && (!edit.new_files.is_empty() || !edit.blob_files.is_empty()) {
            // The new tables' (and blob files') directory entries must be durable before the MANIFEST names them (D7).
            self.fs.sync_dir(&self.dir)?;
        }
        let too_big = self.manifest.as_ref().is_none_or(|m| m.len() >= self.max_manifest_size);
        if too_big {
            // The snapshot written into the new MANIFEST must already include this edit.
            let (prev_fams, prev_max, prev_seq) = (self.families.clone(), self.max_family, self.last_sequence);
            self.set_family(fam, next);
            self.max_family = self.max_family.max(edit.max_family.unwrap_or(0));
            self.last_sequence = last_seq;
            if let Err(e) = self.write_new_manifest() {
                self.families = prev_fams;
                self.max_family = prev_max;
                self.last_sequence = prev_seq;
                // CURRENT may name the new MANIFEST (holding this edit) or the old one (without it).
                self.failed = Some(e.clone());
                return Err(e);
            }
            self.note_dropped_blobs(&prev_fams);
            return Ok(self.current_of(fam).unwrap_or_else(|| self.current()).clone());
        }
        // Never append what the decoder would refuse (the MANIFEST could not be replayed); nothing is written.
        edit.validate()?;
        let mut buf = Vec::new();
        edit.encode(&mut buf);
        let w = self.manifest.as_mut().ok_or(Error::Closed)?;
        if let Err(e) = w.add_record(&buf).and_then(|()| w.sync()) {
            self.failed = Some(e.clone());
            return Err(e);
        }
        let prev_fams = self.families.clone();
        self.set_family(fam, next);
        self.max_family = self.max_family.max(edit.max_family.unwrap_or(0));
        self.last_sequence = last_seq;
        self.note_dropped_blobs(&prev_fams);
        Ok(self.current_of(fam).unwrap_or_else(|| self.current()).clone())
    }

    fn set_family(&mut self, id: u32, f: Option<FamilyVersion>) {
        match f {
            Some(f) => {
                self.families.insert(id, f);
            }
            None => {
                self.families.remove(&id);
            }
        }
    }

    /// Queues for deletion the blob files of `prev` that no current version lists any more.
    fn note_dropped_blobs(&mut self, prev: &BTreeMap<u32, FamilyVersion>) {
        let now: BTreeSet<u64> = self.families.values().flat_map(|f| f.current.blob_files.keys().copied()).collect();
        let gone = prev.values().flat_map(|f| f.current.blob_files.keys()).filter(|n| !now.contains(n));
        self.obsolete_blobs.extend(gone);
    }

    /// Replaces the current version during recovery, before the new MANIFEST is written.
    pub(crate) fn replace_current(&mut self, id: u32, v: Arc<Version>, log_number: u64, last_sequence: u64) {
        if let Some(f) = self.families.get_mut(&id) {
            f.current = v;
            f.log_number = log_number;
        }
        self.last_sequence = self.last_sequence.max(last_sequence);
    }

    pub(crate) fn num_levels(&self) -> usize {
        self.num_levels
    }
}

/// Points CURRENT at MANIFEST-`number`: temp file, fsync, rename over CURRENT, fsync of the directory.
pub(crate) fn set_current(fs: &dyn Fs, dir: &Path, number: u64, temp_number: u64) -> Result<()> {
    let contents = format!("{}\n", filenames::manifest_name(number));
    crate::atomic_file::replace_file(fs, dir, &filenames::current(dir), contents.as_bytes(), temp_number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shaledb_format::ikey::{make_internal_key as encode, ValueKind};
    use shaledb_vfs::{FaultError, FaultPlan, FsOp, MemFs};

    const DIR: &str = "/db";

    fn options(fs: &MemFs) -> Options {
        Options { fs: Arc::new(fs.clone()), ..Options::default() }
    }

    fn table(number: u64, seqs: std::ops::RangeInclusive<u64>) -> FileMeta {
        FileMeta {
            number,
            file_size: 100,
            smallest: encode(b"a", *seqs.end(), ValueKind::Value),
            largest: encode(b"z", *seqs.start(), ValueKind::Value),
            smallest_seq: *seqs.start(),
            largest_seq: *seqs.end(),
            num_entries: 2,
            num_deletions: 0,
            num_range_deletions: 0,
        }
    }

    fn flush_edit(number: u64, seqs: std::ops::RangeInclusive<u64>) -> VersionEdit {
        let last = *seqs.end();
        let mut e = VersionEdit { last_sequence: Some(last), ..VersionEdit::default() };
        e.new_files.push((0, table(number, seqs)));
        e
    }

    fn new_set(fs: &MemFs) -> VersionSet {
        fs.create_dir_all(Path::new(DIR)).unwrap();
        VersionSet::create(Path::new(DIR), &options(fs), [1; DB_ID_LEN]).unwrap()
    }

    #[test]
    fn apply_refuses_overlapping_files_in_a_sorted_level_but_not_in_level_0() {
        let base = Version::new(7);
        let mut e = VersionEdit::default();
        e.new_files.extend([(0, table(5, 1..=2)), (0, table(6, 3..=4))]);
        let v = apply(&base, &e, Path::new("/db/MANIFEST-000001")).unwrap();
        assert_eq!(v.levels[0].iter().map(|f| f.number).collect::<Vec<_>>(), vec![6, 5]);
        let mut e = VersionEdit::default();
        e.new_files.extend([(1, table(6, 3..=4)), (1, table(5, 1..=2))]);
        let err = apply(&base, &e, Path::new("/db/MANIFEST-000001")).unwrap_err();
        assert!(err.is_corruption() && err.to_string().contains("files 6 and 5 overlap in level 1"), "{err}");
    }

    /// Bug D of docs/durability.md: a flush's edit was written but its sync failed, then a compaction that
    /// had been running appended its own edit, carrying the old `last_sequence`. After a crash the MANIFEST
    /// held both edits, the last sequence went back, and the flushed writes were invisible.
    #[test]
    fn after_a_failed_manifest_sync_no_edit_is_appended() {
        let fs = MemFs::new();
        let mut vs = new_set(&fs);
        vs.log_and_apply(flush_edit(10, 1..=46)).unwrap();
        fs.set_faults(FaultPlan::once(FsOp::Sync, 1, FaultError::Eio).on_paths_containing("MANIFEST-"));
        let err = vs.log_and_apply(flush_edit(12, 47..=67)).unwrap_err();
        assert!(err.is_io(), "{err}");
        fs.clear_faults();
        let mut compaction = VersionEdit::default();
        compaction.deleted_files.push((0, 10));
        compaction.new_files.push((6, table(11, 1..=46)));
        let again = vs.log_and_apply(compaction).unwrap_err();
        assert_eq!(again.to_string(), err.to_string(), "a later edit fails with the first error");
        assert_eq!(vs.current().levels[0].len(), 1, "memory keeps the version before the failed edit");

        // The failed edit reached the OS: after a process kill it is the last one, and it counts.
        let killed = fs.deep_clone();
        let vs = VersionSet::recover(Path::new(DIR), &options(&killed)).unwrap();
        assert_eq!(vs.last_sequence, 67);
        let numbers: Vec<u64> = vs.current().levels.iter().flatten().map(|f| f.number).collect();
        assert_eq!(numbers, vec![12, 10]);
    }

    /// The file counter never wraps: past `MAX_FILE_NUMBER` handing out a number is an error, and a number
    /// outside the range (a stray `18446744073709551615.log`) never moves it.
    #[test]
    fn file_counter_stops_at_the_format_limit() {
        let fs = MemFs::new();
        let mut vs = new_set(&fs);
        let before = vs.next_file_number;
        vs.mark_file_number_used(u64::MAX);
        assert_eq!(vs.next_file_number, before);
        vs.next_file_number = MAX_FILE_NUMBER;
        assert_eq!(vs.new_file_number().unwrap(), MAX_FILE_NUMBER);
        let e = vs.new_file_number().unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains("would pass"), "{e}");
        assert_eq!(vs.next_file_number, MAX_FILE_NUMBER + 1, "no wrap");
        vs.next_file_number = 7;
        vs.foreign_numbers.extend([7, 8]);
        assert_eq!(vs.new_file_number().unwrap(), 9, "numbers of files that are not ours are stepped over");
    }

    /// Every number a MANIFEST edit carries is range-checked at recovery: corruption naming the MANIFEST and the
    /// record's offset, never a value that later wraps.
    #[test]
    fn manifest_numbers_above_their_limits_are_corruption() {
        type Damage = fn(&mut VersionEdit);
        let cases: [(&str, Damage); 4] = [
            ("log number", |e| e.log_number = Some(MAX_FILE_NUMBER + 1)),
            ("next file number", |e| e.next_file_number = Some(u64::MAX)),
            ("last sequence", |e| e.last_sequence = Some(u64::MAX)),
            ("file number", |e| e.new_files.push((0, table(MAX_FILE_NUMBER + 1, 1..=2)))),
        ];
        for (what, damage) in cases {
            let fs = MemFs::new();
            drop(new_set(&fs));
            let name = String::from_utf8(fs.read_file(&Path::new(DIR).join("CURRENT")).unwrap()).unwrap();
            let path = Path::new(DIR).join(name.trim_end());
            let mut w = log::Writer::new(fs.create(&path).unwrap());
            let mut e = VersionEdit { comparator: Some(COMPARATOR.to_string()), ..VersionEdit::default() };
            e.log_number = Some(1);
            e.next_file_number = Some(10);
            e.last_sequence = Some(0);
            let mut buf = Vec::new();
            e.encode(&mut buf);
            w.add_record(&buf).unwrap();
            let at = w.len();
            let mut bad = VersionEdit::default();
            damage(&mut bad);
            buf.clear();
            bad.encode(&mut buf);
            w.add_record(&buf).unwrap();
            w.sync().unwrap();
            drop(w);
            match VersionSet::recover(Path::new(DIR), &options(&fs)).map(|_| ()).unwrap_err() {
                Error::Corruption { file, offset, what: msg } => {
                    assert_eq!(file, path, "{what}");
                    assert_eq!(offset, at, "{what}");
                    assert!(msg.contains(what), "{what}: {msg}");
                }
                other => panic!("{what}: {other}"),
            }
        }
    }

    /// A MANIFEST written by a build with bug D (a stale edit after a failed sync) still recovers every
    /// table's writes: the last sequence is at least the largest one in any live table.
    #[test]
    fn recovery_takes_the_last_sequence_from_the_tables_too() {
        let fs = MemFs::new();
        drop(new_set(&fs));
        let name = String::from_utf8(fs.read_file(&Path::new(DIR).join("CURRENT")).unwrap()).unwrap();
        let path = Path::new(DIR).join(name.trim_end());
        let mut w = log::Writer::new(fs.create(&path).unwrap());
        let mut first = flush_edit(12, 47..=67);
        first.comparator = Some(COMPARATOR.to_string());
        first.log_number = Some(10);
        first.next_file_number = Some(13);
        let mut stale = VersionEdit { last_sequence: Some(46), ..VersionEdit::default() };
        stale.new_files.push((6, table(11, 1..=46)));
        for e in [first, stale] {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            w.add_record(&buf).unwrap();
        }
        w.sync().unwrap();
        drop(w);
        let vs = VersionSet::recover(Path::new(DIR), &options(&fs)).unwrap();
        assert_eq!(vs.last_sequence, 67);
    }
}
