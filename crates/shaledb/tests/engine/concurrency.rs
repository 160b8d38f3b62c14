use crate::tiny_options;
use shaledb::{Db, MemTableRep, Options, WriteOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Writers on disjoint key sets, readers checking that a key, once read, keeps a value at least as new (values
/// carry a per-key version), then a full verification.
#[test]
fn many_threads_write_and_read_verified() {
    many_threads_write_and_read(tiny_options());
}

/// The same with a vector memtable (reads scan it or sort a copy) and the leader inserting each whole group,
/// as RocksDB's benchmark.sh loads with (`--memtablerep=vector --allow_concurrent_memtable_write=false`).
#[test]
fn many_threads_with_a_vector_memtable_and_leader_only_inserts() {
    many_threads_write_and_read(Options {
        memtable_rep: MemTableRep::Vector,
        allow_concurrent_memtable_write: false,
        ..tiny_options()
    });
}

/// Leader-only inserts with the skiplist.
#[test]
fn many_threads_with_leader_only_inserts() {
    many_threads_write_and_read(Options { allow_concurrent_memtable_write: false, ..tiny_options() });
}

fn many_threads_write_and_read(opts: Options) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), opts.clone()).unwrap());
    let writers = 4;
    let per_writer = 3000u32;
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..2 {
        let db = db.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for w in 0..4u32 {
                    let k = format!("w{w}-k{:05}", (reads as u32 * 7 + r) % 3000);
                    if let Some(v) = db.get(k.as_bytes()).unwrap() {
                        let s = String::from_utf8(v).unwrap();
                        assert!(s.starts_with(&k), "value {s} for {k}");
                    }
                    reads += 1;
                }
                let mut it = db.cursor();
                it.seek(b"w1-");
                let mut prev: Option<Vec<u8>> = None;
                for _ in 0..50 {
                    if !it.valid() {
                        break;
                    }
                    if let Some(p) = &prev {
                        assert!(p.as_slice() < it.key(), "iterator out of order");
                    }
                    prev = Some(it.key().to_vec());
                    it.next();
                }
                it.status().unwrap();
            }
            reads
        }));
    }
    let mut handles = Vec::new();
    for w in 0..writers {
        let db = db.clone();
        handles.push(std::thread::spawn(move || {
            for round in 0..2u32 {
                for i in 0..per_writer {
                    let k = format!("w{w}-k{i:05}");
                    let v = format!("{k}-r{round}");
                    let sync = i % 500 == 0;
                    db.put_opt(&WriteOptions { sync, ..WriteOptions::default() }, k.as_bytes(), v.as_bytes()).unwrap();
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    for w in 0..writers {
        for i in 0..per_writer {
            let k = format!("w{w}-k{i:05}");
            assert_eq!(db.get(k.as_bytes()).unwrap(), Some(format!("{k}-r1").into_bytes()));
        }
    }
    let st = db.statistics();
    assert_eq!(st.keys_written, (writers as u64) * 2 * per_writer as u64);
    assert!(st.write_groups <= st.writes);
    let db = Arc::try_unwrap(db).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(db.iter().count(), writers as usize * per_writer as usize);
}

/// Writers of 40-entry batches, so that a group of two or more of them reaches the 64 entries above which the
/// members insert their own batches in parallel (smaller groups are inserted by their leader): every batch is
/// found whole, with the values of its last round, before and after a reopen.
#[test]
fn batches_large_enough_for_parallel_inserts_land_whole() {
    use shaledb::WriteBatch;
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny_options();
    let db = Arc::new(Db::open(dir.path(), opts.clone()).unwrap());
    let (writers, batches, per_batch) = (4u32, 150u32, 40u32);
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                for round in 0..2u32 {
                    for b in 0..batches {
                        let mut batch = WriteBatch::new();
                        for e in 0..per_batch {
                            let k = format!("w{w}-b{b:04}-e{e:02}");
                            batch.put(k.as_bytes(), format!("{k}-r{round}").as_bytes());
                        }
                        db.write(&batch).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let check = |db: &Db| {
        for w in 0..writers {
            for b in 0..batches {
                for e in 0..per_batch {
                    let k = format!("w{w}-b{b:04}-e{e:02}");
                    assert_eq!(db.get(k.as_bytes()).unwrap(), Some(format!("{k}-r1").into_bytes()), "{k}");
                }
            }
        }
        assert_eq!(db.iter().count(), (writers * batches * per_batch) as usize);
    };
    check(&db);
    assert_eq!(db.statistics().keys_written, u64::from(writers * 2 * batches * per_batch));
    let db = Arc::try_unwrap(db).unwrap();
    db.close().unwrap();
    check(&Db::open(dir.path(), opts).unwrap());
}
