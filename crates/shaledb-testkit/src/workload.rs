//! Random write workloads for crash tests, and the glue between them and the engine: submit a
//! [`Write`], read a whole database into a [`Model`].

use crate::history::{Mutation, Write};
use crate::Model;
use rand::Rng;
use shaledb::{CompressionType, Db, Options, ReadOptions, WriteBatch, WriteOptions};
use std::sync::Arc;

/// The shape of a random workload. Ratios are "one in n" (0 = never).
#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    /// Distinct keys: small enough that overwrites, deletes and merges hit live keys.
    pub keys: u32,
    /// Largest value in bytes.
    pub max_value: usize,
    /// One write in this many is acknowledged with `sync`.
    pub sync_one_in: u32,
    /// One write in this many is a batch of 2 to `max_batch` updates.
    pub batch_one_in: u32,
    /// Largest batch.
    pub max_batch: usize,
    /// One update in this many is a delete.
    pub delete_one_in: u32,
    /// One update in this many is a merge (stringappend operands of 1 to 4 bytes).
    pub merge_one_in: u32,
    /// For [`SingleDeleteMix`]: one update in this many goes to its own keys (`sd00042`), put and
    /// single-deleted in turn; 0: none. [`random_write`] ignores it (it keeps no state).
    pub single_delete_one_in: u32,
    /// One update in this many is a range deletion of 1 to 8 keys (`[key(i), key(i + w))`; 0 = never). Its
    /// range holds only `key…` names, so it never touches [`SingleDeleteMix`]'s keys and their contract.
    pub delete_range_one_in: u32,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            keys: 200,
            max_value: 120,
            sync_one_in: 5,
            batch_one_in: 4,
            max_batch: 6,
            delete_one_in: 6,
            merge_one_in: 6,
            single_delete_one_in: 0,
            delete_range_one_in: 30,
        }
    }
}

/// The name of key `i`: `key00042`. Fixed width, so the order of names is the order of numbers.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn one_in<R: Rng + ?Sized>(rng: &mut R, n: u32) -> bool {
    n > 0 && rng.gen_ratio(1, n)
}

/// A random update.
pub fn random_mutation<R: Rng + ?Sized>(rng: &mut R, cfg: &WorkloadConfig) -> Mutation {
    let i = rng.gen_range(0..cfg.keys.max(1));
    let key = key(i);
    if one_in(rng, cfg.delete_range_one_in) {
        Mutation::DeleteRange { begin: key, end: self::key(i + rng.gen_range(1..=8)) }
    } else if one_in(rng, cfg.delete_one_in) {
        Mutation::Delete { key }
    } else if one_in(rng, cfg.merge_one_in) {
        let len = rng.gen_range(1..=4);
        Mutation::Merge { key, operand: (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect() }
    } else {
        Mutation::Put { key, value: crate::random_value(rng, cfg.max_value) }
    }
}

/// A random write: one update, or a batch.
pub fn random_write<R: Rng + ?Sized>(rng: &mut R, cfg: &WorkloadConfig) -> Write {
    let batch = one_in(rng, cfg.batch_one_in);
    let n = if batch { rng.gen_range(2..=cfg.max_batch.max(2)) } else { 1 };
    Write { mutations: (0..n).map(|_| random_mutation(rng, cfg)).collect(), sync: one_in(rng, cfg.sync_one_in), batch }
}

/// A stateful workload mixing [`random_write`]'s updates with single deletions that keep their contract: one
/// update in `single_delete_one_in` goes to keys of their own (`sd00042`, never deleted or merged otherwise),
/// which are put when absent and single-deleted when present, so each is put exactly once between its single
/// deletions, batches included. The state follows the generated order, which is the order writes are
/// submitted and acknowledged in (one writer).
#[derive(Clone, Debug, Default)]
pub struct SingleDeleteMix {
    present: std::collections::BTreeSet<u32>,
}

impl SingleDeleteMix {
    /// No single-delete key present.
    pub fn new() -> SingleDeleteMix {
        SingleDeleteMix::default()
    }

    /// The name of single-delete key `i`.
    pub fn key(i: u32) -> Vec<u8> {
        format!("sd{i:05}").into_bytes()
    }

    /// The next write (see the type's documentation).
    pub fn write<R: Rng + ?Sized>(&mut self, rng: &mut R, cfg: &WorkloadConfig) -> Write {
        let batch = one_in(rng, cfg.batch_one_in);
        let n = if batch { rng.gen_range(2..=cfg.max_batch.max(2)) } else { 1 };
        let mutations = (0..n)
            .map(|_| {
                if !one_in(rng, cfg.single_delete_one_in) {
                    return random_mutation(rng, cfg);
                }
                let i = rng.gen_range(0..cfg.keys.max(1));
                let key = SingleDeleteMix::key(i);
                if self.present.remove(&i) {
                    Mutation::SingleDelete { key }
                } else {
                    self.present.insert(i);
                    Mutation::Put { key, value: crate::random_value(rng, cfg.max_value) }
                }
            })
            .collect();
        Write { mutations, sync: one_in(rng, cfg.sync_one_in), batch }
    }
}

/// Sends `w` to the database the way a user would: `put_opt`/`delete_opt`/`merge_opt` for a single update,
/// [`Db::write`] for a batch.
pub fn submit(db: &Db, w: &Write) -> shaledb::Result<()> {
    let opts = WriteOptions { sync: w.sync, ..WriteOptions::default() };
    match (w.batch, w.mutations.as_slice()) {
        (false, [Mutation::Put { key, value }]) => db.put_opt(&opts, key, value),
        (false, [Mutation::Delete { key }]) => db.delete_opt(&opts, key),
        (false, [Mutation::SingleDelete { key }]) => db.single_delete_opt(&opts, key),
        (false, [Mutation::Merge { key, operand }]) => db.merge_opt(&opts, key, operand),
        (false, [Mutation::DeleteRange { begin, end }]) => db.delete_range_opt(&opts, begin, end),
        (_, mutations) => {
            let mut b = WriteBatch::new();
            for m in mutations {
                match m {
                    Mutation::Put { key, value } => b.put(key, value),
                    Mutation::Delete { key } => b.delete(key),
                    Mutation::SingleDelete { key } => b.single_delete(key),
                    Mutation::Merge { key, operand } => b.merge(key, operand),
                    Mutation::DeleteRange { begin, end } => b.delete_range(begin, end),
                };
            }
            db.write_opt(&opts, &b)
        }
    }
}

/// The column family (an index into `families`) a key of a family workload lives in: keys are spread over the
/// families by a hash of their bytes, so the families together hold the flat key space the [`crate::History`]
/// models, and a write of several keys is a batch across families.
pub fn family_of(key: &[u8], families: usize) -> usize {
    let h = key.iter().fold(0u32, |h, &b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    h as usize % families.max(1)
}

/// [`submit`] over column families: each key goes to its family ([`family_of`]), a range deletion to every
/// family (each deletes its own keys in the range); a write touching more than one family is one batch.
pub fn submit_families(db: &Db, families: &[shaledb::ColumnFamily], w: &Write) -> shaledb::Result<()> {
    let opts = WriteOptions { sync: w.sync, ..WriteOptions::default() };
    let cf = |k: &[u8]| &families[family_of(k, families.len())];
    let mut b = WriteBatch::new();
    for m in &w.mutations {
        match m {
            Mutation::Put { key, value } => b.put_cf(cf(key), key, value),
            Mutation::Delete { key } => b.delete_cf(cf(key), key),
            Mutation::SingleDelete { key } => b.single_delete_cf(cf(key), key),
            Mutation::Merge { key, operand } => b.merge_cf(cf(key), key, operand),
            Mutation::DeleteRange { begin, end } => {
                for f in families {
                    b.delete_range_cf(f, begin, end);
                }
                &mut b
            }
        };
    }
    db.write_opt(&opts, &b)
}

/// Every entry of every family of `families` (whose keys are disjoint, [`family_of`]), read with forward scans.
pub fn read_all_families(db: &Db, families: &[shaledb::ColumnFamily]) -> shaledb::Result<Model> {
    let mut m = Model::new();
    for f in families {
        for item in db.iter_cf(f) {
            let (k, v) = item?;
            if family_of(&k, families.len()) != families.iter().position(|g| g.id() == f.id()).unwrap_or(usize::MAX) {
                return Err(shaledb::Error::InvalidArgument(format!(
                    "key {} is in column family {:?}, not the one it was written to",
                    crate::history::show(&k),
                    f.name()
                )));
            }
            m.put(&k, &v);
        }
    }
    Ok(m)
}

/// [`check_gets`] over column families.
pub fn check_gets_families(
    db: &Db,
    families: &[shaledb::ColumnFamily],
    expected: &Model,
    keys: u32,
) -> shaledb::Result<Result<(), String>> {
    let names = (0..keys).map(key).chain(expected.iter().map(|(k, _)| k.to_vec()));
    for k in names {
        let got = db.get_cf(&families[family_of(&k, families.len())], &k)?;
        if got.as_deref() != expected.get(&k) {
            return Ok(Err(format!(
                "get({}) = {} but the scans say {}",
                crate::history::show(&k),
                got.as_deref().map_or("absent".into(), crate::history::show),
                expected.get(&k).map_or("absent".into(), crate::history::show)
            )));
        }
    }
    Ok(Ok(()))
}

/// Every entry of the database, read with a forward scan.
pub fn read_all(db: &Db) -> shaledb::Result<Model> {
    read_all_with(db, ReadOptions::default())
}

/// [`read_all`] with read options (a snapshot, checksum choices).
pub fn read_all_with(db: &Db, opts: ReadOptions) -> shaledb::Result<Model> {
    let mut m = Model::new();
    for item in db.iter_opt(&opts) {
        let (k, v) = item?;
        m.put(&k, &v);
    }
    Ok(m)
}

/// Checks that point lookups of every key of `expected`, and of the `keys` key names, agree with it. The
/// error names the first key that disagrees; a read error is returned as is.
pub fn check_gets(db: &Db, expected: &Model, keys: u32) -> shaledb::Result<Result<(), String>> {
    let names = (0..keys).map(key).chain(expected.iter().map(|(k, _)| k.to_vec()));
    for k in names {
        let got = db.get(&k)?;
        if got.as_deref() != expected.get(&k) {
            return Ok(Err(format!(
                "get({}) = {} but the scan says {}",
                crate::history::show(&k),
                got.as_deref().map_or("absent".into(), crate::history::show),
                expected.get(&k).map_or("absent".into(), crate::history::show)
            )));
        }
    }
    Ok(Ok(()))
}

/// Options with tiny memtables, files and blocks so that a few hundred writes go through flushes,
/// compactions and several levels; `stringappend` merges; the given file system.
pub fn tiny_options(fs: Arc<dyn shaledb::Fs>) -> Options {
    Options {
        write_buffer_size: 4096,
        max_write_buffer_number: 3,
        target_file_size_base: 4096,
        max_bytes_for_level_base: 16 << 10,
        max_bytes_for_level_multiplier: 4.0,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 8,
        level0_stop_writes_trigger: 12,
        block_size: 256,
        block_restart_interval: 4,
        block_cache_size: 32 << 10,
        compression: CompressionType::Lz4,
        merge_operator: shaledb::merge::builtin("stringappend"),
        fs,
        ..Options::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng;

    #[test]
    fn workload_mixes_every_kind_of_write() {
        let mut r = rng(11);
        let cfg = WorkloadConfig::default();
        let writes: Vec<Write> = (0..500).map(|_| random_write(&mut r, &cfg)).collect();
        let ms = || writes.iter().flat_map(|w| w.mutations.iter());
        assert!(writes.iter().any(|w| w.sync) && writes.iter().any(|w| !w.sync));
        assert!(writes.iter().any(|w| w.batch && w.mutations.len() > 1));
        assert!(ms().any(|m| matches!(m, Mutation::Delete { .. })));
        assert!(ms().any(|m| matches!(m, Mutation::Merge { .. })));
        assert!(ms().all(|m| m.key().starts_with(b"key") && m.key().len() == 8));
    }

    #[test]
    fn single_delete_mix_keeps_the_contract_and_matches_random_write_when_off() {
        let cfg = WorkloadConfig { single_delete_one_in: 2, keys: 20, ..WorkloadConfig::default() };
        let mut r = rng(12);
        let mut mix = SingleDeleteMix::new();
        let mut present = std::collections::BTreeSet::new();
        let (mut puts, mut sds) = (0, 0);
        for _ in 0..2000 {
            for m in mix.write(&mut r, &cfg).mutations {
                match m {
                    Mutation::Put { key, .. } if key.starts_with(b"sd") => {
                        assert!(present.insert(key), "a second put before a single deletion");
                        puts += 1;
                    }
                    Mutation::SingleDelete { key } => {
                        assert!(present.remove(&key), "a single deletion of a key not put");
                        sds += 1;
                    }
                    m => assert!(m.key().starts_with(b"key"), "{m:?}"),
                }
            }
        }
        assert!(puts > 100 && sds > 100, "{puts} puts, {sds} single deletions");
        // Off, it draws exactly what random_write draws: existing seeded tests keep their workloads.
        let off = WorkloadConfig::default();
        let (mut a, mut b) = (rng(13), rng(13));
        let mut mix = SingleDeleteMix::new();
        for _ in 0..300 {
            assert_eq!(mix.write(&mut a, &off), random_write(&mut b, &off));
        }
    }

    #[test]
    fn key_names_sort_by_number() {
        assert!(key(9) < key(10));
        assert_eq!(key(42), b"key00042");
    }
}
