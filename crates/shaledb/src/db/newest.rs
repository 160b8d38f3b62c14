//! The sequence number of a key's newest entry, whatever its kind: what transactions validate against (a key
//! written after a transaction read or locked it has a newer entry than the sequence the transaction noted).

use super::Db;
use crate::prefix::table_may_contain;
use crate::stats::Counters;
use shaledb_format::bloom;
use shaledb_format::ikey::{self, KIND_FOR_SEEK, MAX_SEQUENCE};
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::Result;

impl Db {
    /// The sequence number of the newest write visible to reads (RocksDB's `GetLatestSequenceNumber`).
    pub fn latest_sequence(&self) -> u64 {
        self.inner.visible_seq.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The sequence number of the newest entry of `key` (a value, deletion or merge operand) in the database
    /// now, or `None` when no source holds one. Sources are searched newest first (active memtable, immutable
    /// memtables, L0 tables newest first, then each deeper level), so the first entry found is the newest.
    ///
    /// An entry older than every snapshot may have had its sequence number zeroed by a compaction to the last
    /// level; callers that compare against a sequence hold a snapshot at or below it, so every entry newer than
    /// that keeps its number.
    #[cfg(test)]
    pub(crate) fn newest_sequence(&self, key: &[u8]) -> Result<Option<u64>> {
        self.newest_sequence_in(&self.inner.default, key)
    }

    /// [`Db::newest_sequence`] in family `fam`.
    pub(crate) fn newest_sequence_in(&self, fam: &super::family::Family, key: &[u8]) -> Result<Option<u64>> {
        let inner = &self.inner;
        let sv = fam.sv.load();
        let mut target = Vec::with_capacity(key.len() + ikey::TRAILER_LEN);
        ikey::append_internal_key(&mut target, key, MAX_SEQUENCE, KIND_FOR_SEEK);
        let first_of_key = |it: &mut dyn InternalIterator| -> Result<Option<u64>> {
            it.seek(&target);
            if it.valid() {
                if let Some(p) = ikey::parse(it.key()) {
                    if p.user_key == key {
                        return Ok(Some(p.seq));
                    }
                }
            }
            it.status().map(|()| None)
        };
        let hash = bloom::key_hash(key);
        // A range tombstone over the key is a change to it too (`delete_range` after a transaction read the
        // key conflicts). Sources are visited newest first, so a tombstone met below the first point found is
        // older than it; `cover` holds the newest met so far.
        let mut cover = super::read::mem_range_cover(&sv, key, MAX_SEQUENCE);
        let newest = |point: u64, cover: u64| Some(point.max(cover));
        for m in std::iter::once(&sv.mem).chain(&sv.imm) {
            if m.may_contain(hash) {
                if let Some(seq) = first_of_key(&mut m.iter())? {
                    return Ok(newest(seq, cover));
                }
            }
        }
        let v = &sv.version;
        for level in 0..v.num_levels() {
            for f in v.files(level) {
                if key < f.smallest_user_key() || key > f.largest_user_key() {
                    continue;
                }
                if let Some(rd) = inner.tables.range_dels(f)? {
                    cover = cover.max(rd.covering_seq(key, MAX_SEQUENCE));
                }
                let table = inner.tables.get(f)?;
                Counters::add(&inner.counters.bloom_checked, 1);
                if !table_may_contain(&fam.opts, &table, key, hash, false) {
                    Counters::add(&inner.counters.bloom_useful, 1);
                    continue;
                }
                if let Some(seq) = first_of_key(&mut table.iter(true, true))? {
                    return Ok(newest(seq, cover));
                }
            }
        }
        Ok((cover > 0).then_some(cover))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Db, Options};

    #[test]
    fn newest_sequence_finds_the_newest_entry_in_every_kind_of_source() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options { disable_auto_compactions: true, ..Options::default() }).unwrap();
        assert_eq!(db.newest_sequence(b"k").unwrap(), None);
        db.put("k", "1").unwrap();
        let s1 = db.newest_sequence(b"k").unwrap().unwrap();
        db.put("other", "x").unwrap();
        assert_eq!(db.newest_sequence(b"k").unwrap(), Some(s1));
        // In an L0 table, then below a newer memtable entry, then a deletion in a deeper level.
        db.flush().unwrap();
        assert_eq!(db.newest_sequence(b"k").unwrap(), Some(s1));
        // A snapshot older than the deletion (as a transaction holds): compaction keeps the deletion and its
        // number.
        let snap = db.snapshot();
        db.delete("k").unwrap();
        let s2 = db.newest_sequence(b"k").unwrap().unwrap();
        assert!(s2 > s1);
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(db.newest_sequence(b"k").unwrap(), Some(s2));
        assert_eq!(db.newest_sequence(b"j").unwrap(), None);
        drop(snap);
    }
}
