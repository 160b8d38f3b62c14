//! Random operations against a BTreeMap oracle, with tiny memtables and files so that every path (flush,
//! compaction, multi-level reads, reopen) runs; re-run under several option sets.

use crate::tiny_options;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::{
    CompactionOptionsFifo, CompactionOptionsUniversal, CompactionStopStyle, CompactionStyle, CompressionType, Db,
    MemTableRep, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions,
};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(rng: &mut StdRng) -> Vec<u8> {
    // A small key space so that overwrites, deletes and merges hit the same keys often.
    let n: u32 = rng.gen_range(0..400);
    let mut k = format!("key{n:04}").into_bytes();
    if rng.gen_ratio(1, 10) {
        k.push(b'x'); // keys that are prefixes of each other
    }
    k
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = if rng.gen_ratio(1, 20) { rng.gen_range(200..2000) } else { rng.gen_range(0..40) };
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

fn model_merge(m: &mut Model, k: &[u8], op: &[u8]) {
    // stringappend with "," as delimiter; a missing key starts from the operand alone.
    match m.get_mut(k) {
        Some(v) => {
            v.push(b',');
            v.extend_from_slice(op);
        }
        None => {
            m.insert(k.to_vec(), op.to_vec());
        }
    }
}

fn check_scan(db: &Db, ro: ReadOptions, m: &Model, rng: &mut StdRng) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter_opt(&ro).map(|r| r.unwrap()).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "forward scan length");
    assert!(got == want, "forward scan differs");
    let back: Vec<(Vec<u8>, Vec<u8>)> = db.iter_opt(&ro).rev().map(|r| r.unwrap()).collect();
    assert!(back.iter().rev().eq(want.iter()), "backward scan differs");
    // Random seeks with a direction switch.
    let mut it = db.cursor_opt(&ro);
    for _ in 0..10 {
        let target = key(rng);
        it.seek(&target);
        let want = m.range(target.clone()..).next();
        assert_eq!(it.valid().then(|| it.key().to_vec()), want.map(|(k, _)| k.clone()), "seek {target:?}");
        if it.valid() {
            it.prev();
            let want_prev = m.range(..want.map(|(k, _)| k.clone()).unwrap_or_default()).next_back();
            assert_eq!(it.valid().then(|| it.key().to_vec()), want_prev.map(|(k, _)| k.clone()), "prev after seek");
        }
        it.seek_for_prev(&target);
        let want = m.range(..=target.clone()).next_back();
        assert_eq!(it.valid().then(|| it.value().to_vec()), want.map(|(_, v)| v.clone()), "seek_for_prev");
    }
    it.status().unwrap();
}

/// A random batch (absent keys and duplicates included) read with `multi_get_opt`: each result equals the
/// model's value and `get_opt`'s answer for the same key.
fn check_multi_get(db: &Db, ro: &ReadOptions, m: &Model, rng: &mut StdRng, at: &str) {
    let n = rng.gen_range(1..40);
    let mut keys: Vec<Vec<u8>> = (0..n).map(|_| key(rng)).collect();
    if rng.gen_ratio(1, 3) {
        let dup = keys[rng.gen_range(0..keys.len())].clone();
        keys.insert(rng.gen_range(0..=keys.len()), dup);
    }
    let got = db.multi_get_opt(ro, &keys);
    assert_eq!(got.len(), keys.len(), "{at}: multi_get result count");
    for (k, r) in keys.iter().zip(got) {
        let r = r.unwrap_or_else(|e| panic!("{at}: multi_get {k:?}: {e}"));
        assert_eq!(r, m.get(k).cloned(), "{at}: multi_get {k:?}");
        assert_eq!(r, db.get_opt(ro, k).unwrap(), "{at}: multi_get {k:?} differs from get");
    }
}

fn run(seed: u64, opts: Options, steps: usize) {
    run_in(tempfile::tempdir().unwrap(), seed, opts, steps);
}

fn run_in(dir: tempfile::TempDir, seed: u64, opts: Options, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut m = Model::new();
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    for step in 0..steps {
        let r: u32 = rng.gen_range(0..1000);
        match r {
            0..=399 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                db.put(&k, &v).unwrap();
                m.insert(k, v);
            }
            400..=519 => {
                let k = key(&mut rng);
                db.delete(&k).unwrap();
                m.remove(&k);
            }
            520..=619 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                let v = if v.is_empty() { b"e".to_vec() } else { v };
                db.merge(&k, &v).unwrap();
                model_merge(&mut m, &k, &v);
            }
            620..=699 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..10) {
                    let k = key(&mut rng);
                    if rng.gen_ratio(1, 3) {
                        b.delete(&k);
                        m.remove(&k);
                    } else {
                        let v = value(&mut rng);
                        b.put(&k, &v);
                        m.insert(k, v);
                    }
                }
                let sync = rng.gen_ratio(1, 10);
                db.write_opt(&WriteOptions { sync, ..WriteOptions::default() }, &b).unwrap();
            }
            700..=879 => {
                let k = key(&mut rng);
                assert_eq!(db.get(&k).unwrap(), m.get(&k).cloned(), "seed {seed} step {step} get {k:?}");
            }
            880..=899 => {
                check_multi_get(&db, &ReadOptions::default(), &m, &mut rng, &format!("seed {seed} step {step}"))
            }
            900..=929 => {
                if snaps.len() < 3 {
                    snaps.push((db.snapshot(), m.clone()));
                } else {
                    snaps.remove(rng.gen_range(0..snaps.len()));
                }
            }
            930..=949 => {
                if let Some((s, sm)) = snaps.first() {
                    let ro = ReadOptions { snapshot: Some(s.clone()), ..ReadOptions::default() };
                    for _ in 0..20 {
                        let k = key(&mut rng);
                        assert_eq!(
                            db.get_opt(&ro, &k).unwrap(),
                            sm.get(&k).cloned(),
                            "seed {seed} step {step} snapshot get"
                        );
                    }
                    check_multi_get(&db, &ro, sm, &mut rng, &format!("seed {seed} step {step} snapshot"));
                    check_scan(&db, ro, sm, &mut rng);
                }
            }
            950..=969 => check_scan(&db, ReadOptions::default(), &m, &mut rng),
            970..=979 => db.flush().unwrap(),
            980..=984 => db.compact_range(None, None).unwrap(),
            985..=989 => {
                let a = key(&mut rng);
                let b = key(&mut rng);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                db.compact_range(Some(&lo), Some(&hi)).unwrap();
            }
            _ => {
                // Reopen: snapshots do not survive it.
                snaps.clear();
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    drop(db);
                }
                db = Db::open(dir.path(), opts.clone()).unwrap();
            }
        }
    }
    db.wait_for_compaction().unwrap();
    check_scan(&db, ReadOptions::default(), &m, &mut rng);
    db.verify_checksums().unwrap();
    db.close().unwrap();
}

fn steps() -> usize {
    std::env::var("SHALEDB_MODEL_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(4000)
}

#[test]
fn model_default_tiny() {
    run(1, tiny_options(), steps());
}

#[test]
fn model_no_compression_no_bloom_small_blocks() {
    let o = Options { compression: CompressionType::None, bloom_bits_per_key: 0.0, block_size: 256, ..tiny_options() };
    run(2, o, steps());
}

#[test]
fn model_zstd_bottommost_snappy_upper_large_blocks() {
    let o = Options {
        compression: CompressionType::Snappy,
        bottommost_compression: Some(CompressionType::Zstd),
        block_size: 4096,
        block_restart_interval: 16,
        ..tiny_options()
    };
    run(3, o, steps());
}

#[test]
fn model_static_level_sizes_one_background_job() {
    let o = Options { level_compaction_dynamic_level_bytes: false, max_background_jobs: 1, ..tiny_options() };
    run(4, o, steps());
}

#[test]
fn model_cached_index_and_filter_small_cache() {
    let o =
        Options { cache_index_and_filter_blocks: true, block_cache_size: 4096, max_open_files: 20, ..tiny_options() };
    run(5, o, steps());
}

/// A vector memtable: reads of the active memtable scan it; iterators sort a copy; a switched-out one is
/// sorted once, in place.
#[test]
fn model_vector_memtable() {
    run(6, Options { memtable_rep: MemTableRep::Vector, ..tiny_options() }, steps());
}

/// Memtables with a point index: gets of keys in the memtables take the index, snapshots older than a key's
/// newest entry descend the skiplist.
#[test]
fn model_indexed_memtable() {
    run(17, Options { memtable_rep: MemTableRep::IndexedSkipList, ..tiny_options() }, steps());
}

/// Leader-only memtable inserts, tables synced every 1 KiB while written, a one-shard block cache.
#[test]
fn model_leader_inserts_bytes_per_sync_one_cache_shard() {
    let o = Options {
        allow_concurrent_memtable_write: false,
        bytes_per_sync: 1024,
        block_cache_shard_bits: 0,
        ..tiny_options()
    };
    run(7, o, steps());
}

/// The operations features on: flushes and compactions through a rate limiter (a small burst, so tables are
/// charged in many requests), the WAL synced every 4 KiB, a listener on every event, a stats dump every second.
#[test]
fn model_rate_limiter_wal_bytes_per_sync_listener_stats_dump() {
    struct Count(std::sync::atomic::AtomicU64);
    impl shaledb::listener::EventListener for Count {
        fn on_flush_completed(&self, _: &shaledb::listener::FlushJobInfo) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let limiter = shaledb::RateLimiter::new(64 << 20, 1_000, 10, true).unwrap();
    let count = std::sync::Arc::new(Count(Default::default()));
    let o = Options {
        rate_limiter: Some(limiter.clone()),
        wal_bytes_per_sync: 4096,
        listeners: vec![count.clone()],
        stats_dump_period_sec: 1,
        ..tiny_options()
    };
    run(10, o, steps());
    assert!(limiter.total_bytes_through(Some(shaledb::IoPriority::High)) > 0);
    assert!(limiter.total_bytes_through(Some(shaledb::IoPriority::Low)) > 0);
    assert!(count.0.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// Tables of flushes and compactions written with O_DIRECT, compaction inputs read with it, on a real
/// directory under target/ (where /tmp may be a tmpfs); then with direct reads as well.
#[test]
fn model_direct_io_for_flush_and_compaction() {
    let o = Options { use_direct_io_for_flush_and_compaction: true, ..tiny_options() };
    run_in(tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(), 8, o.clone(), steps());
    let o = Options { use_direct_reads: true, compaction_readahead_size: 0, ..o };
    run_in(tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(), 9, o, steps());
}

#[test]
fn model_universal_compaction() {
    let o = Options { compaction_style: CompactionStyle::Universal, ..tiny_options() };
    run(21, o, steps());
}

#[test]
fn model_universal_trivial_move_similar_size_parallel_jobs() {
    let u = CompactionOptionsUniversal {
        allow_trivial_move: true,
        stop_style: CompactionStopStyle::SimilarSize,
        size_ratio: 20,
        max_merge_width: 3,
        max_size_amplification_percent: 50,
        ..Default::default()
    };
    let o = Options {
        compaction_style: CompactionStyle::Universal,
        compaction_options_universal: u,
        max_background_jobs: 4,
        num_levels: 4,
        ..tiny_options()
    };
    run(22, o, steps());
}

#[test]
fn model_parallel_flushes() {
    // Eight jobs: two flush threads write the small memtables at once, recorded oldest first.
    let o = Options { max_background_jobs: 8, max_write_buffer_number: 6, ..tiny_options() };
    run(28, o, steps());
}

#[test]
fn model_fifo_compaction_within_its_limit() {
    // FIFO deletes data by design: under a limit the run never reaches (and no TTL), the model holds, and
    // allow_compaction's intra-L0 merges (with snapshots and merge operands) run.
    let fifo = CompactionOptionsFifo { max_table_files_size: 1 << 30, allow_compaction: true, ..Default::default() };
    let o = Options { compaction_style: CompactionStyle::Fifo, compaction_options_fifo: fifo, ..tiny_options() };
    run(23, o, steps());
}

#[test]
fn model_blob_files_small_min_blob_size() {
    // Values of 20 bytes and more go to blob files (rolled every 4 KiB): flush, compaction, merges over blob
    // values, snapshots, reopen and multi_get all read through blob references.
    let o = Options {
        enable_blob_files: true,
        min_blob_size: 20,
        blob_file_size: 4096,
        blob_compression_type: CompressionType::Lz4,
        ..tiny_options()
    };
    run(24, o, steps());
}

#[test]
fn model_blob_garbage_collection() {
    let o = Options {
        enable_blob_files: true,
        min_blob_size: 10,
        blob_file_size: 2048,
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: 0.5,
        blob_garbage_collection_force_threshold: 0.25,
        blob_compaction_readahead_size: 512,
        ..tiny_options()
    };
    run(25, o, steps());
}

#[test]
fn model_subcompactions_tiny_files_parallel_jobs() {
    // Jobs reading L0 and every compact_range are split into up to four pieces (2 KiB output files make
    // most of them large enough), with several jobs at once.
    let o = Options { max_subcompactions: 4, max_background_jobs: 4, target_file_size_base: 2 << 10, ..tiny_options() };
    run(26, o, steps());
}

#[test]
fn model_subcompactions_universal_blob_files() {
    // Universal merges split too; blob files written and their garbage counted per piece.
    let o = Options {
        max_subcompactions: 4,
        compaction_style: CompactionStyle::Universal,
        target_file_size_base: 2 << 10,
        enable_blob_files: true,
        min_blob_size: 20,
        blob_file_size: 4096,
        enable_blob_garbage_collection: true,
        ..tiny_options()
    };
    run(27, o, steps());
}
