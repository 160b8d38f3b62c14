//! Reads never go back in time (docs/durability.md D8): one writer bumps a counter per key (keys are never
//! deleted), readers check that every `get`, iterator seek and snapshot read returns a value at least as new as
//! the last write that had returned before the read began. Tiny memtables and files, plus a thread forcing
//! flushes and manual compactions, keep versions collapsing under the readers all the time.
//!
//! The default run takes about two seconds; `SHALEDB_TORTURE_BUDGET=N` runs it N times longer.

use shaledb::{Db, Options, ReadOptions};
use shaledb_testkit::MemFs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEYS: usize = 8;
const READERS: usize = 6;
/// Padding so that memtables fill (and flush) after a few dozen writes.
const PAD: usize = 100;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:02}").into_bytes()
}

fn value(n: u64) -> Vec<u8> {
    let mut v = n.to_be_bytes().to_vec();
    v.resize(8 + PAD, b'.');
    v
}

fn decode(v: &[u8]) -> Option<u64> {
    v.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_be_bytes)
}

fn options(fs: &MemFs) -> Options {
    Options {
        write_buffer_size: 4096,
        max_write_buffer_number: 4,
        target_file_size_base: 2048,
        max_bytes_for_level_base: 8 << 10,
        max_bytes_for_level_multiplier: 2.0,
        level0_file_num_compaction_trigger: 1,
        level0_slowdown_writes_trigger: 64,
        level0_stop_writes_trigger: 128,
        num_levels: 4,
        block_size: 256,
        max_background_jobs: 3,
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

/// Every violation found, as text; the test fails when any is recorded.
type Violations = Arc<Mutex<Vec<String>>>;

fn check(violations: &Violations, what: &str, k: usize, floor: u64, got: Option<&[u8]>) {
    let n = got.and_then(decode);
    if n.is_none_or(|n| n < floor) {
        if let Ok(mut v) = violations.lock() {
            v.push(format!("{what} of key{k:02}: {n:?}, but {floor} had been acknowledged before the read began"));
        }
    }
}

fn reader(db: &Db, done: &[AtomicU64; KEYS], stop: &AtomicBool, violations: &Violations, r: usize) -> u64 {
    let mut reads = 0u64;
    let mut i = r;
    while !stop.load(Ordering::Relaxed) {
        i = i.wrapping_mul(31).wrapping_add(7);
        let k = i % KEYS;
        match reads % 3 {
            0 => {
                let floor = done[k].load(Ordering::SeqCst);
                let got = db.get(key(k)).unwrap();
                check(violations, "get", k, floor, got.as_deref());
            }
            1 => {
                let floor = done[k].load(Ordering::SeqCst);
                let mut it = db.cursor();
                it.seek(key(k));
                let got = (it.valid() && it.key() == key(k).as_slice()).then(|| it.value().to_vec());
                it.status().unwrap();
                check(violations, "iterator seek", k, floor, got.as_deref());
            }
            _ => {
                let floor = done[k].load(Ordering::SeqCst);
                let snap = db.snapshot();
                let opts = ReadOptions { snapshot: Some(snap.clone()), ..ReadOptions::default() };
                let first = db.get_opt(&opts, key(k)).unwrap();
                check(violations, "snapshot get", k, floor, first.as_deref());
                // Let flushes and compactions run, then read the same snapshot again: it must not change.
                std::thread::yield_now();
                let again = db.get_opt(&opts, key(k)).unwrap();
                if again != first {
                    if let Ok(mut v) = violations.lock() {
                        v.push(format!(
                            "snapshot of key{k:02} changed: {:?} then {:?}",
                            first.as_deref().and_then(decode),
                            again.as_deref().and_then(decode)
                        ));
                    }
                }
            }
        }
        reads += 1;
    }
    reads
}

/// Runs the writer, the readers and the flushing thread for `run`; returns the violations and the reads done.
fn run_linearizability(run: Duration) -> (Vec<String>, u64) {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", options(&fs)).unwrap());
    let done: Arc<[AtomicU64; KEYS]> = Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
    for k in 0..KEYS {
        db.put(key(k), value(0)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let violations: Violations = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (db, done, stop) = (db.clone(), done.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                for (k, d) in done.iter().enumerate() {
                    db.put(key(k), value(n)).unwrap();
                    // Recorded only once the put returned: a read starting after this must see >= n.
                    d.store(n, Ordering::SeqCst);
                }
            }
            n
        })
    };
    let flusher = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                db.flush().unwrap();
                if i.is_multiple_of(8) {
                    db.compact_range(None, None).unwrap();
                }
            }
        })
    };
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (db, done, stop, violations) = (db.clone(), done.clone(), stop.clone(), violations.clone());
            std::thread::spawn(move || reader(&db, &done, &stop, &violations, r))
        })
        .collect();
    let start = Instant::now();
    while start.elapsed() < run {
        std::thread::sleep(Duration::from_millis(20));
        if violations.lock().map(|v| !v.is_empty()).unwrap_or(true) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(writes > 0);
    flusher.join().unwrap();
    let reads: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    let db = Arc::try_unwrap(db).unwrap();
    db.close().unwrap();
    let v = violations.lock().map(|v| v.clone()).unwrap_or_default();
    (v, reads)
}

#[test]
fn reads_never_go_back_in_time() {
    let budget = shaledb_testkit::budget_from_env("SHALEDB_TORTURE_BUDGET", 1).max(1);
    let (violations, reads) = run_linearizability(Duration::from_secs(2) * budget as u32);
    assert!(reads > 0);
    assert!(
        violations.is_empty(),
        "{} stale reads in {reads} reads, first: {:?}",
        violations.len(),
        &violations[..violations.len().min(5)]
    );
}
