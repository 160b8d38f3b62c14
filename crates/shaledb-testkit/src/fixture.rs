//! The frozen fixture database: a small database written once by format version 1 and kept in the repository
//! (`crates/shaledb/tests/fixtures/v1/`), which every later build must open and read exactly.
//!
//! Its contents are a pure function of this module: [`ops`] draws the same operations on every machine and
//! every version of every dependency (its generator is a SplitMix64 written here, not a library's RNG, whose
//! algorithm may change between releases), and [`expected`] folds them into the contents a correct reader
//! returns. [`write()`] made the committed files (`cargo run -p shaledb --example write_fixture -- DIR`); the
//! test `fixture::the_frozen_v1_database_reads_exactly` opens a copy and compares.
//!
//! What the files hold, so a reader of every part of the format is exercised: puts, deletes and `uint64add`
//! merges over keys that collide; values that compress and values that do not; tables on several levels, with
//! uncompressed blocks on levels 0 and 1 and lz4 below (`compression_per_level`); and a WAL whose last writes
//! were never flushed (the writer was dropped without `close`).

use shaledb::merge::UInt64Add;
use shaledb::{CompressionType, Db, Options};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// One operation of the fixture's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `put(key, value)`.
    Put(Vec<u8>, Vec<u8>),
    /// `delete(key)`.
    Delete(Vec<u8>),
    /// `merge(key, n)` with the `uint64add` operator (`n` as 8 bytes little endian).
    Merge(Vec<u8>, u64),
    /// `flush()`.
    Flush,
}

/// Operations written and flushed (the tables); the tail after them stays in the WAL only.
const FLUSHED_OPS: usize = 24_000;
const TAIL_OPS: usize = 600;
const SEED: u64 = 0x5a1e_db00_f1c5_0001;

/// SplitMix64: tiny, fixed, and good enough to scatter keys.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The fixture's history, in order: `FLUSHED_OPS` operations with a flush every 2,000 and at the end, then
/// `TAIL_OPS` more that were only in the WAL when the writer stopped. Returns `(flushed, tail)`.
pub fn ops() -> (Vec<Op>, Vec<Op>) {
    let mut r = Mix(SEED);
    let draw = |r: &mut Mix| -> Op {
        let roll = r.below(100);
        if roll < 12 {
            // Counters: merges only, over a small key space.
            return Op::Merge(format!("counter{:03}", r.below(200)).into_bytes(), r.below(1000));
        }
        let key = format!("key{:06}", r.below(9_000)).into_bytes();
        if roll < 22 {
            return Op::Delete(key);
        }
        let len = 20 + r.below(300) as usize;
        let value: Vec<u8> = if roll < 60 {
            // Compresses well: a short pattern repeated.
            let pattern = format!("v{:04}-", r.below(10_000)).into_bytes();
            pattern.iter().copied().cycle().take(len).collect()
        } else {
            // Does not compress: every byte drawn.
            (0..len).map(|_| r.next() as u8).collect()
        };
        Op::Put(key, value)
    };
    let mut flushed = Vec::with_capacity(FLUSHED_OPS + FLUSHED_OPS / 2000);
    for i in 0..FLUSHED_OPS {
        flushed.push(draw(&mut r));
        if (i + 1) % 2000 == 0 {
            flushed.push(Op::Flush);
        }
    }
    let tail = (0..TAIL_OPS).map(|_| draw(&mut r)).collect();
    (flushed, tail)
}

/// The contents a correct reader returns after every operation of `ops` (merges as `uint64add`: a missing or
/// deleted base counts as 0).
pub fn expected<'a>(ops: impl IntoIterator<Item = &'a Op>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for op in ops {
        match op {
            Op::Put(k, v) => {
                m.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                m.remove(k);
            }
            Op::Merge(k, n) => {
                let base = m.get(k).and_then(|v: &Vec<u8>| <[u8; 8]>::try_from(v.as_slice()).ok());
                let sum = base.map_or(0, u64::from_le_bytes).wrapping_add(*n);
                m.insert(k.clone(), sum.to_le_bytes().to_vec());
            }
            Op::Flush => {}
        }
    }
    m
}

/// The options the fixture was written with (and is read with): small memtables and levels so 2 MB of data
/// spread over several levels, uncompressed blocks on levels 0 and 1, lz4 below, the `uint64add` operator.
pub fn options() -> Options {
    Options {
        write_buffer_size: 128 << 10,
        target_file_size_base: 128 << 10,
        max_bytes_for_level_base: 512 << 10,
        max_bytes_for_level_multiplier: 4.0,
        level_compaction_dynamic_level_bytes: false,
        level0_file_num_compaction_trigger: 2,
        block_size: 4 << 10,
        compression: CompressionType::Lz4,
        compression_per_level: vec![CompressionType::None, CompressionType::None, CompressionType::Lz4],
        merge_operator: Some(Arc::new(UInt64Add)),
        ..Options::default()
    }
}

fn apply(db: &Db, op: &Op) -> shaledb::Result<()> {
    match op {
        Op::Put(k, v) => db.put(k, v),
        Op::Delete(k) => db.delete(k),
        Op::Merge(k, n) => db.merge(k, n.to_le_bytes()),
        Op::Flush => db.flush(),
    }
}

/// Writes the fixture into the empty directory `dir`: the flushed operations, a wait for compactions, then
/// the tail, synced to the WAL, and a stop without `close` (so the tail is never flushed).
pub fn write(dir: &Path) -> shaledb::Result<()> {
    let (flushed, tail) = ops();
    let db = Db::open(dir, Options { create_if_missing: true, error_if_exists: true, ..options() })?;
    for op in &flushed {
        apply(&db, op)?;
    }
    db.wait_for_compaction()?;
    for op in &tail {
        apply(&db, op)?;
    }
    db.sync_wal()?;
    drop(db);
    Ok(())
}
