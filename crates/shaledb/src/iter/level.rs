//! Concatenation of the sorted, disjoint files of one level, each opened only when reached.

use shaledb_format::edit::FileMeta;
use shaledb_format::ikey;
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// Opens an iterator over one table (through the table cache).
pub(crate) type OpenFn = Arc<dyn Fn(&FileMeta) -> Result<Box<dyn InternalIterator>> + Send + Sync>;

/// An [`InternalIterator`] over a level >= 1: files ordered by key with disjoint ranges. Seeks binary-search
/// the files' key ranges, so only the file that may hold the target is opened.
pub(crate) struct LevelIterator {
    files: Vec<Arc<FileMeta>>,
    open: OpenFn,
    /// Index of the file `cur` iterates (meaningless when `cur` is `None`).
    index: usize,
    cur: Option<Box<dyn InternalIterator>>,
    /// An error opening a file, which leaves the iterator invalid until the next seek.
    error: Option<Error>,
}

impl LevelIterator {
    /// An unpositioned iterator over `files` (sorted by smallest key, disjoint), opened with `open`.
    pub(crate) fn new(files: Vec<Arc<FileMeta>>, open: OpenFn) -> LevelIterator {
        LevelIterator { files, open, index: 0, cur: None, error: None }
    }

    /// Makes file `index` current (reusing the open iterator if it already is); false on error or past the end.
    fn set_file(&mut self, index: usize) -> bool {
        if self.cur.is_some() && self.index == index {
            return true;
        }
        self.cur = None;
        self.index = index;
        let Some(meta) = self.files.get(index) else { return false };
        match (self.open)(meta) {
            Ok(it) => {
                self.cur = Some(it);
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    fn cur_valid(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.valid())
    }

    /// The current file ran out going forward: move through the following files to the first entry.
    fn skip_forward(&mut self) {
        while !self.cur_valid() {
            if self.cur_failed() {
                return;
            }
            let next = self.index + 1;
            if next >= self.files.len() || !self.set_file(next) {
                self.cur = None;
                return;
            }
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_first();
            }
        }
    }

    /// The current file ran out going backward: move through the preceding files to the last entry.
    fn skip_backward(&mut self) {
        while !self.cur_valid() {
            if self.cur_failed() {
                return;
            }
            let Some(prev) = self.index.checked_sub(1) else {
                self.cur = None;
                return;
            };
            if !self.set_file(prev) {
                self.cur = None;
                return;
            }
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_last();
            }
        }
    }

    /// True when there is no current file or the current one stopped on an error (nothing to skip over).
    fn cur_failed(&self) -> bool {
        self.cur.as_ref().is_none_or(|c| c.status().is_err())
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.cur_valid()
    }

    fn seek_to_first(&mut self) {
        self.error = None;
        if self.set_file(0) {
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_first();
            }
            self.skip_forward();
        }
    }

    fn seek_to_last(&mut self) {
        self.error = None;
        let Some(last) = self.files.len().checked_sub(1) else {
            self.cur = None;
            return;
        };
        if self.set_file(last) {
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_last();
            }
            self.skip_backward();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        // The first file whose largest key is >= target holds the first entry >= target, if any does.
        let i = self.files.partition_point(|f| ikey::compare(&f.largest, target).is_lt());
        if i >= self.files.len() {
            self.cur = None;
            return;
        }
        if self.set_file(i) {
            if let Some(c) = self.cur.as_mut() {
                c.seek(target);
            }
            self.skip_forward();
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.error = None;
        // The last file whose smallest key is <= target holds the last entry <= target, if any does.
        let n = self.files.partition_point(|f| ikey::compare(&f.smallest, target).is_le());
        let Some(i) = n.checked_sub(1) else {
            self.cur = None;
            return;
        };
        if self.set_file(i) {
            if let Some(c) = self.cur.as_mut() {
                c.seek_for_prev(target);
            }
            self.skip_backward();
        }
    }

    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(c) = self.cur.as_mut() {
            c.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(c) = self.cur.as_mut() {
            c.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.value())
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.cur.as_ref().map_or(Ok(()), |c| c.status())
    }

    fn location(&self) -> Option<(&Path, u64)> {
        self.cur.as_ref().and_then(|c| c.location())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIter;
    use shaledb_format::ikey::{make_internal_key, ValueKind};
    use std::collections::HashMap;
    use std::sync::Mutex;

    fn ent(k: &str) -> (Vec<u8>, Vec<u8>) {
        (make_internal_key(k.as_bytes(), 1, ValueKind::Value), k.as_bytes().to_vec())
    }

    /// Three files of "keys"; the open function records which files were opened and can fail file 3.
    fn level(fail_file: Option<u64>) -> (LevelIterator, Arc<Mutex<Vec<u64>>>) {
        let data: HashMap<u64, Vec<&str>> =
            HashMap::from([(1, vec!["a", "b", "c"]), (2, vec!["e", "f"]), (3, vec!["h", "i", "j"])]);
        let files: Vec<Arc<FileMeta>> = [1u64, 2, 3]
            .iter()
            .map(|&n| {
                let keys = &data[&n];
                Arc::new(FileMeta {
                    number: n,
                    file_size: 100,
                    smallest: ent(keys[0]).0,
                    largest: ent(keys[keys.len() - 1]).0,
                    smallest_seq: 1,
                    largest_seq: 1,
                    num_entries: keys.len() as u64,
                    num_deletions: 0,
                    num_range_deletions: 0,
                })
            })
            .collect();
        let opened = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&opened);
        let open: OpenFn = Arc::new(move |f: &FileMeta| {
            log.lock().unwrap().push(f.number);
            if Some(f.number) == fail_file {
                return Err(Error::corruption(format!("{}.sst", f.number), 0, "bad table"));
            }
            let entries = data[&f.number].iter().map(|k| ent(k)).collect();
            Ok(Box::new(VecIter::new(entries)) as Box<dyn InternalIterator>)
        });
        (LevelIterator::new(files, open), opened)
    }

    fn user(it: &LevelIterator) -> String {
        String::from_utf8(ikey::user_key(it.key()).to_vec()).unwrap()
    }

    #[test]
    fn concatenates_files_both_ways() {
        let (mut it, _) = level(None);
        let mut fwd = Vec::new();
        it.seek_to_first();
        while it.valid() {
            fwd.push(user(&it));
            it.next();
        }
        assert_eq!(fwd, ["a", "b", "c", "e", "f", "h", "i", "j"]);
        let mut back = Vec::new();
        it.seek_to_last();
        while it.valid() {
            back.push(user(&it));
            it.prev();
        }
        back.reverse();
        assert_eq!(back, fwd);
        it.status().unwrap();
    }

    #[test]
    fn seeks_open_only_the_file_needed() {
        let (mut it, opened) = level(None);
        it.seek(&make_internal_key(b"g", 5, ValueKind::Value));
        assert_eq!(user(&it), "h");
        assert_eq!(*opened.lock().unwrap(), vec![3]);
        it.seek(&make_internal_key(b"d", 5, ValueKind::Value));
        assert_eq!(user(&it), "e");
        it.seek_for_prev(&make_internal_key(b"d", 5, ValueKind::Value));
        assert_eq!(user(&it), "c");
        it.next();
        assert_eq!(user(&it), "e");
        it.prev();
        assert_eq!(user(&it), "c");
        it.seek_for_prev(&make_internal_key(b"0", 5, ValueKind::Value));
        assert!(!it.valid());
        it.seek(&make_internal_key(b"k", 5, ValueKind::Value));
        assert!(!it.valid());
        it.status().unwrap();
    }

    #[test]
    fn open_error_surfaces_in_status() {
        let (mut it, _) = level(Some(3));
        it.seek(&make_internal_key(b"f", 5, ValueKind::Value));
        assert_eq!(user(&it), "f");
        it.next();
        assert!(!it.valid());
        assert!(it.status().unwrap_err().is_corruption());
        it.seek_to_first();
        assert!(it.valid());
        it.status().unwrap();
    }

    #[test]
    fn empty_level_is_never_valid() {
        let open: OpenFn = Arc::new(|_: &FileMeta| Ok(Box::new(VecIter::new(Vec::new())) as Box<dyn InternalIterator>));
        let mut it = LevelIterator::new(Vec::new(), open);
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"xxxxxxxxx");
        assert!(!it.valid());
        it.status().unwrap();
    }
}
