//! A version: the immutable set of live SSTs, per level.
//!
//! INVARIANT: `levels[0]` is ordered newest first (largest sequence number descending, then file number
//! descending), and its files may overlap. Every other level is ordered by smallest key, and its files'
//! user-key ranges are disjoint.

use shaledb_format::blob::BlobFileMeta;
use shaledb_format::edit::FileMeta;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The live files of the database at one point in time. Shared by readers through an `Arc`.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// Files per level; see the module's invariant.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
    /// The live blob files by number, with their garbage (files whose records are all garbage are gone).
    pub blob_files: BTreeMap<u64, BlobFileMeta>,
}

impl Version {
    /// An empty version with `num_levels` levels.
    pub fn new(num_levels: usize) -> Version {
        Version { levels: vec![Vec::new(); num_levels], blob_files: BTreeMap::new() }
    }

    /// Number of levels (L0 included).
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Files in `level`.
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        self.levels.get(level).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Total bytes of the files in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        // Sizes come from the MANIFEST (each at most `edit::MAX_FILE_SIZE`): saturate rather than wrap (a
        // release build) or panic (a debug build) on a sum past `u64`.
        self.files(level).iter().fold(0u64, |sum, f| sum.saturating_add(f.file_size))
    }

    /// Total bytes of all live files.
    pub fn total_bytes(&self) -> u64 {
        (0..self.num_levels()).fold(0u64, |sum, l| sum.saturating_add(self.level_bytes(l)))
    }

    /// Index of the first file in sorted `level` (>= 1) whose largest user key is >= `user_key`.
    pub fn find_file(&self, level: usize, user_key: &[u8]) -> usize {
        self.files(level).partition_point(|f| f.largest_user_key() < user_key)
    }

    /// The one file of sorted `level` (>= 1) that may hold `user_key`.
    pub fn file_for_key(&self, level: usize, user_key: &[u8]) -> Option<&Arc<FileMeta>> {
        let files = self.files(level);
        let i = self.find_file(level, user_key);
        files.get(i).filter(|f| f.smallest_user_key() <= user_key)
    }

    /// Files of `level` whose user-key range intersects `[begin, end]` (inclusive; `None` = unbounded).
    /// For L0 the range is widened transitively, as LevelDB does, because L0 files overlap each other.
    pub fn overlapping_files(&self, level: usize, begin: Option<&[u8]>, end: Option<&[u8]>) -> Vec<Arc<FileMeta>> {
        let mut lo = begin.map(<[u8]>::to_vec);
        let mut hi = end.map(<[u8]>::to_vec);
        let files = self.files(level);
        'restart: loop {
            let mut out = Vec::new();
            for f in files {
                let before = hi.as_deref().is_some_and(|h| f.smallest_user_key() > h);
                let after = lo.as_deref().is_some_and(|l| f.largest_user_key() < l);
                if before || after {
                    continue;
                }
                if level == 0 {
                    if lo.as_deref().is_some_and(|l| f.smallest_user_key() < l) {
                        lo = Some(f.smallest_user_key().to_vec());
                        continue 'restart;
                    }
                    if hi.as_deref().is_some_and(|h| f.largest_user_key() > h) {
                        hi = Some(f.largest_user_key().to_vec());
                        continue 'restart;
                    }
                }
                out.push(f.clone());
            }
            return out;
        }
    }

    /// The deepest level holding any file, if any.
    pub fn last_nonempty_level(&self) -> Option<usize> {
        (0..self.num_levels()).rev().find(|&l| !self.files(l).is_empty())
    }

    /// True when no level below `level` holds a file overlapping `[smallest, largest]` (user keys): output
    /// written to `level` for that range is bottommost, so tombstones there can be dropped.
    pub fn is_bottommost_for(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool {
        (level + 1..self.num_levels()).all(|l| self.overlapping_files(l, Some(smallest), Some(largest)).is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shaledb_format::ikey::{make_internal_key, ValueKind};

    pub(crate) fn meta(number: u64, lo: &str, hi: &str, size: u64) -> Arc<FileMeta> {
        Arc::new(FileMeta {
            number,
            file_size: size,
            smallest: make_internal_key(lo.as_bytes(), 1, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Value),
            smallest_seq: 1,
            largest_seq: 1,
            num_entries: 1,
            num_deletions: 0,
            num_range_deletions: 0,
        })
    }

    #[test]
    fn find_and_overlap() {
        let mut v = Version::new(3);
        v.levels[1] = vec![meta(1, "a", "c", 10), meta(2, "e", "g", 20), meta(3, "k", "m", 30)];
        assert_eq!(v.file_for_key(1, b"b").unwrap().number, 1);
        assert!(v.file_for_key(1, b"d").is_none());
        assert_eq!(v.file_for_key(1, b"g").unwrap().number, 2);
        assert!(v.file_for_key(1, b"z").is_none());
        let o: Vec<u64> = v.overlapping_files(1, Some(b"c"), Some(b"f")).iter().map(|f| f.number).collect();
        assert_eq!(o, vec![1, 2]);
        assert_eq!(v.level_bytes(1), 60);
        assert!(v.is_bottommost_for(1, b"a", b"z"));
        assert!(!v.is_bottommost_for(0, b"a", b"b"));
    }

    #[test]
    fn level_bytes_saturate_instead_of_wrapping() {
        // Sizes as a damaged (but in-range per file) MANIFEST could list them: the sum passes u64.
        let mut v = Version::new(3);
        v.levels[1] = vec![meta(1, "a", "c", u64::MAX - 5), meta(2, "e", "g", 10)];
        v.levels[2] = vec![meta(3, "a", "c", u64::MAX)];
        assert_eq!(v.level_bytes(1), u64::MAX);
        assert_eq!(v.total_bytes(), u64::MAX);
    }

    #[test]
    fn l0_overlap_widens() {
        let mut v = Version::new(2);
        v.levels[0] = vec![meta(3, "a", "c", 1), meta(2, "b", "f", 1), meta(1, "x", "z", 1)];
        let o: Vec<u64> = v.overlapping_files(0, Some(b"a"), Some(b"b")).iter().map(|f| f.number).collect();
        assert_eq!(o, vec![3, 2]);
    }
}
