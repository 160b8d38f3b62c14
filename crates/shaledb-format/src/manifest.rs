//! Replaying a MANIFEST: its version edits, in order, folded into the live files of each level and the
//! counters they record.
//!
//! This is the one replay of a MANIFEST. The engine's recovery takes the first [`EditProblem`] of an edit as
//! corruption and stops; `shaledb dump` and `shaledb verify` report every problem and go on. The edits are
//! read with [`next_edit`]: a record of [`crate::log::Reader`], decoded with [`VersionEdit::decode`].

use crate::edit::{FileMeta, VersionEdit, BYTEWISE_COMPARATOR, DB_ID_LEN};
use crate::ikey;
use crate::log::{Damage, LogRead, Reader};
use crate::Error;
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;

/// What [`next_edit`] read.
#[derive(Debug)]
pub enum EditRead {
    /// A version edit; `offset` is where its record starts.
    Edit {
        /// File offset of the edit's record.
        offset: u64,
        /// The decoded edit.
        edit: VersionEdit,
    },
    /// An intact record that is not a version edit: the error names the MANIFEST and the record's offset.
    Undecodable(Error),
    /// Bytes that do not form a record. Reading may continue.
    Damage(Damage),
    /// The end of the MANIFEST.
    Eof,
}

/// Reads the next record of the MANIFEST `reader` reads, and decodes it.
pub fn next_edit(reader: &mut Reader) -> EditRead {
    match reader.next() {
        LogRead::Eof => EditRead::Eof,
        LogRead::Damage(d) => EditRead::Damage(d),
        LogRead::Record { offset, data } => match VersionEdit::decode(&data) {
            Ok(edit) => EditRead::Edit { offset, edit },
            Err(e) => EditRead::Undecodable(e.in_file(reader.path(), offset)),
        },
    }
}

/// What the edits replayed so far add up to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveFiles {
    /// The live files of each level, by file number.
    pub levels: BTreeMap<u32, BTreeMap<u64, FileMeta>>,
    /// The last log number an edit recorded.
    pub log_number: Option<u64>,
    /// The last next file number an edit recorded.
    pub next_file_number: Option<u64>,
    /// The last last sequence an edit recorded.
    pub last_sequence: Option<u64>,
    /// The last database identity an edit recorded.
    pub db_id: Option<[u8; DB_ID_LEN]>,
    /// The live blob files, by number (files all garbage left).
    pub blob_files: BTreeMap<u64, crate::blob::BlobFileMeta>,
    /// How many edits were applied.
    pub edits: usize,
    /// The column families other than the default one (whose files are `levels` and `blob_files` above), by
    /// id: the live ones, dropped ones removed.
    pub families: BTreeMap<u32, FamilyFiles>,
    /// The largest family id an edit recorded as handed out.
    pub max_family: u32,
}

/// The files of one column family other than the default one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FamilyFiles {
    /// Its name.
    pub name: String,
    /// The live files of each level, by file number.
    pub levels: BTreeMap<u32, BTreeMap<u64, FileMeta>>,
    /// The last log number an edit of this family recorded.
    pub log_number: Option<u64>,
    /// Its live blob files, by number.
    pub blob_files: BTreeMap<u64, crate::blob::BlobFileMeta>,
}

/// An edit that does not fit what came before it, or that this build cannot read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EditProblem {
    /// The edit deletes a file that is not in the level it names.
    DeletesMissing {
        /// The level named.
        level: u32,
        /// The file named.
        number: u64,
    },
    /// The edit adds a file whose number is already live.
    AddsTwice {
        /// The file's number.
        number: u64,
    },
    /// The edit's blob additions or garbage do not fit (the reason).
    Blob(String),
    /// The edit names a key order other than ShaleDB's.
    UnknownComparator(String),
    /// The edit records a format version newer than this build's.
    NewerFormat(u32),
    /// The edit is about a column family that does not exist (never added, or dropped).
    UnknownFamily(u32),
    /// The edit adds a column family whose id or name is already live.
    FamilyExists(u32, String),
}

impl fmt::Display for EditProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EditProblem::DeletesMissing { level, number } => {
                write!(f, "edit deletes file {number}, which is not in level {level}")
            }
            EditProblem::AddsTwice { number } => write!(f, "edit adds file {number} twice"),
            EditProblem::Blob(what) => f.write_str(what),
            EditProblem::UnknownComparator(c) => {
                write!(f, "unknown comparator {c:?} (ShaleDB only supports {BYTEWISE_COMPARATOR:?})")
            }
            EditProblem::NewerFormat(v) => {
                write!(f, "format version {v} is newer than this build's {}", crate::FORMAT_VERSION)
            }
            EditProblem::UnknownFamily(id) => write!(f, "edit names column family {id}, which does not exist"),
            EditProblem::FamilyExists(id, name) => {
                write!(f, "edit adds column family {id} ({name:?}), but that id or name is already live")
            }
        }
    }
}

/// The comparator or format version `edit` records that this build cannot read (at most one of each).
pub fn unsupported(edit: &VersionEdit) -> Vec<EditProblem> {
    let mut problems = Vec::new();
    if let Some(c) = edit.comparator.as_ref().filter(|c| *c != BYTEWISE_COMPARATOR) {
        problems.push(EditProblem::UnknownComparator(c.clone()));
    }
    if let Some(v) = edit.format_version.filter(|v| *v > crate::FORMAT_VERSION) {
        problems.push(EditProblem::NewerFormat(v));
    }
    problems
}

impl LiveFiles {
    /// Applies `edit`: its deletions, then its additions, then its counters. Returns what did not fit; the
    /// rest of the edit is applied all the same (a deletion of a missing file deletes nothing, a file added
    /// twice is kept once, at the level of its last addition).
    pub fn apply(&mut self, edit: &VersionEdit) -> Vec<EditProblem> {
        let mut problems = Vec::new();
        self.edits += 1;
        let fam = edit.family.unwrap_or(0);
        self.max_family = self.max_family.max(edit.max_family.unwrap_or(0)).max(fam);
        if let Some(name) = &edit.family_add {
            if self.families.contains_key(&fam) || self.families.values().any(|f| &f.name == name) {
                problems.push(EditProblem::FamilyExists(fam, name.clone()));
                return problems;
            } else {
                self.families.insert(fam, FamilyFiles { name: name.clone(), ..FamilyFiles::default() });
            }
        }
        let (levels, log_number, blob_files) = if fam == 0 {
            (&mut self.levels, &mut self.log_number, &mut self.blob_files)
        } else if let Some(f) = self.families.get_mut(&fam) {
            (&mut f.levels, &mut f.log_number, &mut f.blob_files)
        } else {
            problems.push(EditProblem::UnknownFamily(fam));
            self.next_file_number = edit.next_file_number.or(self.next_file_number);
            self.last_sequence = edit.last_sequence.or(self.last_sequence);
            return problems;
        };
        for &(level, number) in &edit.deleted_files {
            if levels.get_mut(&level).and_then(|files| files.remove(&number)).is_none() {
                problems.push(EditProblem::DeletesMissing { level, number });
            }
        }
        for (level, meta) in &edit.new_files {
            if let Some(files) = levels.values_mut().find(|files| files.contains_key(&meta.number)) {
                problems.push(EditProblem::AddsTwice { number: meta.number });
                files.remove(&meta.number);
            }
            levels.entry(*level).or_default().insert(meta.number, meta.clone());
        }
        let blob = crate::blob::apply_edit(blob_files, &edit.blob_files, &edit.blob_garbage);
        problems.extend(blob.into_iter().map(EditProblem::Blob));
        *log_number = edit.log_number.or(*log_number);
        if edit.family_drop {
            self.families.remove(&fam);
        }
        self.next_file_number = edit.next_file_number.or(self.next_file_number);
        self.last_sequence = edit.last_sequence.or(self.last_sequence);
        self.db_id = edit.db_id.or(self.db_id);
        problems
    }

    /// The smallest log number of any live family: WALs numbered below it hold nothing any family needs.
    pub fn min_log_number(&self) -> Option<u64> {
        self.families.values().filter_map(|f| f.log_number).chain(self.log_number).min()
    }

    /// Every family's levels: the default family (id 0) first, then the others by id.
    pub fn family_levels(&self) -> impl Iterator<Item = (u32, &BTreeMap<u32, BTreeMap<u64, FileMeta>>)> {
        std::iter::once((0, &self.levels)).chain(self.families.iter().map(|(id, f)| (*id, &f.levels)))
    }

    /// The pairs of files whose user-key ranges overlap in a sorted level (every level but 0), as
    /// `(level, file, file)`, the files in key order.
    pub fn overlaps(&self) -> Vec<(u32, u64, u64)> {
        let mut found = Vec::new();
        for (_, levels) in self.family_levels() {
            for (level, files) in levels.iter().filter(|(l, _)| **l > 0) {
                let mut sorted: Vec<&FileMeta> = files.values().collect();
                sort_by_smallest(&mut sorted);
                found.extend(overlapping_neighbours(&sorted).map(|(a, b)| (*level, a, b)));
            }
        }
        found
    }

    /// Every live file of every family, with its level.
    pub fn files(&self) -> impl Iterator<Item = (u32, &FileMeta)> {
        self.family_levels()
            .flat_map(|(_, levels)| levels.iter().flat_map(|(level, files)| files.values().map(move |f| (*level, f))))
    }

    /// Every live blob file of every family.
    pub fn all_blob_files(&self) -> impl Iterator<Item = (&u64, &crate::blob::BlobFileMeta)> {
        self.blob_files.iter().chain(self.families.values().flat_map(|f| f.blob_files.iter()))
    }
}

/// Sorts the files of a sorted level (every level but 0) by their smallest key, as the engine keeps them.
pub fn sort_by_smallest<F: Borrow<FileMeta>>(files: &mut [F]) {
    files.sort_by(|a, b| ikey::compare(&a.borrow().smallest, &b.borrow().smallest));
}

/// The neighbours whose user-key ranges overlap in a level sorted by [`sort_by_smallest`], as `(file, file)`
/// numbers in key order: none in a sound sorted level. The one overlap check of the engine's version edits and
/// of [`LiveFiles::overlaps`].
pub fn overlapping_neighbours<F: Borrow<FileMeta>>(sorted: &[F]) -> impl Iterator<Item = (u64, u64)> + '_ {
    sorted.windows(2).filter_map(|w| {
        let (a, b) = (w[0].borrow(), w[1].borrow());
        (a.largest_user_key() >= b.smallest_user_key()).then_some((a.number, b.number))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ikey::ValueKind;
    use std::path::Path;

    #[test]
    fn next_edit_decodes_records_and_names_the_ones_that_do_not_decode() {
        use shaledb_vfs::{Fs, MemFs};
        let (fs, path) = (MemFs::new(), Path::new("/MANIFEST-000001"));
        let edit = VersionEdit { log_number: Some(4), ..VersionEdit::default() };
        let mut w = crate::log::Writer::new(fs.create(path).unwrap());
        let mut encoded = Vec::new();
        edit.encode(&mut encoded);
        w.add_record(&encoded).unwrap();
        w.add_record(&[0xff, 0xff]).unwrap();
        w.flush().unwrap();
        let data = fs.read_file(path).unwrap();
        let mut r = Reader::new(data, path.to_path_buf());
        assert!(matches!(next_edit(&mut r), EditRead::Edit { offset: 0, edit: e } if e == edit));
        match next_edit(&mut r) {
            EditRead::Undecodable(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file.as_path(), offset > 0), (path, true));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(next_edit(&mut r), EditRead::Eof));
    }

    fn meta(number: u64, lo: &str, hi: &str) -> FileMeta {
        let key = |k: &str| {
            let mut v = Vec::new();
            ikey::append_internal_key(&mut v, k.as_bytes(), 1, ValueKind::Value);
            v
        };
        FileMeta { number, file_size: 100, smallest: key(lo), largest: key(hi), ..FileMeta::default() }
    }

    #[test]
    fn families_keep_their_own_files_and_log_numbers_and_drops_remove_them() {
        let mut live = LiveFiles::default();
        let default =
            VersionEdit { log_number: Some(3), new_files: vec![(1, meta(5, "a", "m"))], ..VersionEdit::default() };
        assert!(live.apply(&default).is_empty());
        let add = VersionEdit {
            family: Some(1),
            family_add: Some("users".into()),
            max_family: Some(1),
            ..VersionEdit::default()
        };
        assert!(live.apply(&add).is_empty());
        // The same key range in the same level of another family is no overlap.
        let flush = VersionEdit {
            family: Some(1),
            log_number: Some(7),
            new_files: vec![(1, meta(6, "a", "m"))],
            ..VersionEdit::default()
        };
        assert!(live.apply(&flush).is_empty());
        assert!(live.overlaps().is_empty());
        assert_eq!(live.files().map(|(_, f)| f.number).collect::<Vec<_>>(), [5, 6]);
        assert_eq!((live.log_number, live.families[&1].log_number, live.min_log_number()), (Some(3), Some(7), Some(3)));
        // A second family with a live name, or an edit of a family that does not exist, is a problem.
        let again = VersionEdit { family: Some(2), family_add: Some("users".into()), ..VersionEdit::default() };
        assert_eq!(live.apply(&again), [EditProblem::FamilyExists(2, "users".into())]);
        let unknown =
            VersionEdit { family: Some(9), new_files: vec![(1, meta(8, "a", "b"))], ..VersionEdit::default() };
        assert_eq!(live.apply(&unknown), [EditProblem::UnknownFamily(9)]);
        let drop = VersionEdit { family: Some(1), family_drop: true, ..VersionEdit::default() };
        assert!(live.apply(&drop).is_empty());
        assert!(live.families.is_empty());
        assert_eq!(live.files().map(|(_, f)| f.number).collect::<Vec<_>>(), [5]);
        assert_eq!(live.max_family, 9, "ids seen are never handed out again");
        assert_eq!(live.apply(&flush), [EditProblem::UnknownFamily(1)], "a dropped family takes no more edits");
    }

    #[test]
    fn edits_fold_into_levels_and_counters() {
        let mut live = LiveFiles::default();
        let e = VersionEdit {
            log_number: Some(3),
            next_file_number: Some(9),
            new_files: vec![(0, meta(5, "a", "c")), (1, meta(6, "d", "f"))],
            ..VersionEdit::default()
        };
        assert!(live.apply(&e).is_empty());
        let mut move_down = VersionEdit { last_sequence: Some(40), ..VersionEdit::default() };
        move_down.deleted_files.push((0, 5));
        move_down.new_files.push((1, meta(5, "a", "c")));
        assert!(live.apply(&move_down).is_empty(), "a file moved to another level is not added twice");
        let in_l1: Vec<u64> = live.levels[&1].keys().copied().collect();
        assert_eq!(in_l1, vec![5, 6]);
        assert!(live.levels[&0].is_empty());
        assert_eq!(
            (live.log_number, live.next_file_number, live.last_sequence, live.edits),
            (Some(3), Some(9), Some(40), 2)
        );
        assert!(live.overlaps().is_empty());
        assert_eq!(live.files().count(), 2);
    }

    #[test]
    fn what_does_not_fit_is_returned_and_the_rest_applied() {
        let mut live = LiveFiles::default();
        let e =
            VersionEdit { new_files: vec![(1, meta(5, "a", "m")), (1, meta(6, "k", "z"))], ..VersionEdit::default() };
        assert!(live.apply(&e).is_empty());
        assert_eq!(live.overlaps(), vec![(1, 5, 6)]);
        let mut bad = VersionEdit { log_number: Some(7), ..VersionEdit::default() };
        bad.deleted_files.push((2, 5));
        bad.new_files.push((3, meta(6, "k", "z")));
        let problems = live.apply(&bad);
        assert_eq!(
            problems,
            vec![EditProblem::DeletesMissing { level: 2, number: 5 }, EditProblem::AddsTwice { number: 6 }]
        );
        assert_eq!(problems[0].to_string(), "edit deletes file 5, which is not in level 2");
        assert_eq!(live.log_number, Some(7));
        assert!(live.levels[&3].contains_key(&6) && !live.levels[&1].contains_key(&6));
    }

    #[test]
    fn unsupported_comparator_and_format_are_named() {
        let ok = VersionEdit {
            comparator: Some(BYTEWISE_COMPARATOR.into()),
            format_version: Some(crate::FORMAT_VERSION),
            ..VersionEdit::default()
        };
        assert!(unsupported(&ok).is_empty());
        let bad = VersionEdit {
            comparator: Some("leveldb.BytewiseComparator".into()),
            format_version: Some(crate::FORMAT_VERSION + 1),
            ..VersionEdit::default()
        };
        assert_eq!(
            unsupported(&bad),
            vec![
                EditProblem::UnknownComparator("leveldb.BytewiseComparator".into()),
                EditProblem::NewerFormat(crate::FORMAT_VERSION + 1)
            ]
        );
    }
}
