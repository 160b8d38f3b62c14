//! A slot copied into a cluster member as sorted tables (issue 44): the records a move writes for a slot
//! arriving here are taken out of the group's pending writes and written as SST files
//! (`shaledb::ingest::SstFileWriter`), which the proposal carries and every member of the group ingests
//! (`shaledb_raft::Proposal::tables`), instead of going through each member's WAL, memtable, flush and
//! compactions as a batch does.
//!
//! Which records: those of the slots the group's import commands named ([`WriteCtx::table_slots`]), found by
//! the slot every record of the `Slots` keyspace carries in its bytes 2..4 (a meta key's `slot`, a member or
//! registry key's version, whose top 16 bits are the slot; docs/format/server-keys.md). Nothing else of the
//! group is written to those slots meanwhile: the group does not serve a slot that is moving to it. The
//! pending writes hold each key's last state (a value or a deletion), so a table holds exactly what the batch
//! would have written, and no key of a table is left in the batch.
//!
//! One table per run of records with the same first four bytes (database, kind, slot): each table's range is
//! then inside the slot's range of one kind, which the member holds nothing of after the move's first step
//! dropped it, so the ingestion places each table below the data without a flush or a global sequence
//! number. A slot's share smaller than [`MIN_TABLE_BYTES`] stays in the batch: an ingestion costs a WAL sync,
//! a MANIFEST write and a directory sync, more than a small batch.
//!
//! [`WriteCtx::table_slots`]: super::WriteCtx::table_slots

use super::Overlay;
use crate::keys;
use shaledb::ingest::SstFileWriter;
use shaledb::{Fs, Options};
use std::path::PathBuf;
use std::sync::Arc;

/// The least bytes (keys and values) of the slots' records worth tables instead of the batch.
pub const MIN_TABLE_BYTES: usize = 256 << 10;

/// The slot of an engine record of the `Slots` keyspace, for meta, member and registry keys.
pub fn slot_of(key: &[u8]) -> Option<u16> {
    match key {
        [db, kind, hi, lo, ..] if *db < keys::DATABASES && *kind <= keys::KIND_REGISTRY => {
            Some(u16::from_be_bytes([*hi, *lo]))
        }
        _ => None,
    }
}

/// Takes the records of `slots` out of `pending` as tables written with `opts`' table options, when they
/// come to [`MIN_TABLE_BYTES`] or more; else changes nothing and returns no table. `Err`: why a table could
/// not be built (`pending` is then unchanged).
pub fn take(pending: &mut Overlay, slots: &[u16], opts: &Options) -> Result<Vec<Vec<u8>>, String> {
    let ours = |k: &[u8]| slot_of(k).is_some_and(|s| slots.contains(&s));
    let bytes: usize =
        pending.iter().filter(|(k, _)| ours(k)).map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len)).sum();
    if bytes < MIN_TABLE_BYTES {
        return Ok(Vec::new());
    }
    let fs = shaledb_vfs::MemFs::new();
    let mut o = opts.clone();
    o.fs = Arc::new(fs.clone());
    let mut w = SstFileWriter::create(&o);
    let mut tables = Vec::new();
    let mut open: Option<(PathBuf, [u8; 4])> = None;
    let err = |e: shaledb::Error| format!("building a table of the slot's records: {e}");
    let finish = |w: &mut SstFileWriter, path: &PathBuf, tables: &mut Vec<Vec<u8>>| -> Result<(), String> {
        w.finish().map_err(err)?;
        tables.push(fs.read_all(path).map_err(err)?);
        fs.remove(path).map_err(err)
    };
    for (k, v) in pending.iter().filter(|(k, _)| ours(k)) {
        let prefix = [k[0], k[1], k[2], k[3]];
        if open.as_ref().is_none_or(|(_, p)| *p != prefix) {
            if let Some((path, _)) = open.take() {
                finish(&mut w, &path, &mut tables)?;
            }
            let path = PathBuf::from(format!("/table-{}", tables.len()));
            w.open(&path).map_err(err)?;
            open = Some((path, prefix));
        }
        match v {
            Some(v) => w.put(k, v),
            None => w.delete(k),
        }
        .map_err(err)?;
    }
    if let Some((path, _)) = open {
        finish(&mut w, &path, &mut tables)?;
    }
    pending.retain(|k, _| !ours(k));
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keyspace;

    #[test]
    fn records_of_the_slots_become_one_table_per_kind_and_the_rest_stays() {
        let ks = Keyspace::Slots;
        let slot = crate::cluster::key_slot(b"k0");
        let other = crate::cluster::key_slot(b"other");
        assert_ne!(slot, other);
        let mut pending = Overlay::new();
        let version = (u64::from(slot) << keys::VERSION_SLOT_SHIFT) | 7;
        for i in 0..200u32 {
            // Keys of one slot: a hash tag.
            let user = format!("{{k0}}{i:04}");
            pending.insert(ks.meta_key(0, user.as_bytes()), Some(vec![b'm'; 1000]));
            pending.insert(keys::member_key(0, version, keys::SUB_MEMBER, user.as_bytes()), Some(vec![b'v'; 1000]));
        }
        pending.insert(keys::registry_key(0, version).to_vec(), Some(b"{k0}0000".to_vec()));
        pending.insert(ks.meta_key(0, b"{k0}gone"), None);
        pending.insert(ks.meta_key(0, b"other"), Some(b"x".to_vec()));
        pending.insert(keys::NEXT_VERSION_KEY.to_vec(), Some(8u64.to_be_bytes().to_vec()));
        assert_eq!(slot_of(&ks.meta_key(3, b"other")), Some(other));
        assert_eq!(slot_of(keys::NEXT_VERSION_KEY), None);

        let mut small = Overlay::new();
        small.insert(ks.meta_key(0, b"{k0}a"), Some(b"x".to_vec()));
        assert!(take(&mut small, &[slot], &Options::default()).unwrap().is_empty());
        assert_eq!(small.len(), 1, "a small share stays in the batch");

        let tables = take(&mut pending, &[slot], &Options::default()).unwrap();
        assert_eq!(tables.len(), 3, "meta, member and registry records: one table each");
        let left: Vec<&Vec<u8>> = pending.keys().collect();
        assert_eq!(left, vec![&ks.meta_key(0, b"other"), &keys::NEXT_VERSION_KEY.to_vec()]);

        // Ingested into a database, the tables hold every record, the deletion included.
        let dir = tempfile::tempdir().unwrap();
        let db = shaledb::Db::open(dir.path().join("db"), Options::default()).unwrap();
        db.put(ks.meta_key(0, b"{k0}gone"), b"old").unwrap();
        db.flush().unwrap();
        let mut paths = Vec::new();
        for (n, t) in tables.iter().enumerate() {
            let p = dir.path().join(format!("t{n}.sst"));
            std::fs::write(&p, t).unwrap();
            paths.push(p);
        }
        db.ingest_external_file(&paths, &Default::default()).unwrap();
        assert_eq!(db.get(ks.meta_key(0, b"{k0}0199")).unwrap(), Some(vec![b'm'; 1000]));
        assert_eq!(
            db.get(keys::member_key(0, version, keys::SUB_MEMBER, b"{k0}0007")).unwrap(),
            Some(vec![b'v'; 1000])
        );
        assert_eq!(db.get(keys::registry_key(0, version)).unwrap(), Some(b"{k0}0000".to_vec()));
        assert_eq!(db.get(ks.meta_key(0, b"{k0}gone")).unwrap(), None);
    }
}
