//! `ReadOptions::read_tier` (issue 41): with `ReadTier::BlockCacheOnly` a read answers from memory or stops with
//! `Error::Incomplete` having read nothing; with `ReadTier::All` it reads the files. Every test counts the file
//! system's reads and opens (MemFs) to check that an Incomplete read did no I/O.

use crate::tiny_options;
use shaledb::{Db, Options, ReadOptions, ReadTier};
use shaledb_testkit::{FsOp, MemFs};
use std::sync::Arc;

fn cache_only() -> ReadOptions {
    ReadOptions { read_tier: ReadTier::BlockCacheOnly, ..ReadOptions::default() }
}

/// File reads and opens so far.
fn io(fs: &MemFs) -> (u64, u64) {
    (fs.op_count(FsOp::Read), fs.op_count(FsOp::Open))
}

/// Opens `/db` on `fs`; no automatic compaction, so what is cached stays the layout's until the test reads.
fn open(fs: &MemFs, opts: Options) -> Db {
    Db::open("/db", Options { fs: Arc::new(fs.clone()), disable_auto_compactions: true, ..opts }).unwrap()
}

/// `key0000..key{n}` written and flushed into tables (none left in the memtables).
fn flushed(fs: &MemFs, n: usize) -> Db {
    let db = open(fs, tiny_options());
    for i in 0..n {
        db.put(format!("key{i:04}"), format!("value{i}")).unwrap();
    }
    db.flush().unwrap();
    db
}

fn assert_incomplete<T: std::fmt::Debug>(r: shaledb::Result<T>, what: &str) {
    match r {
        Err(e) => assert!(e.is_incomplete(), "{what}: expected Incomplete, got {e}"),
        Ok(v) => panic!("{what}: expected Incomplete, got {v:?}"),
    }
}

#[test]
fn a_value_only_on_disk_is_incomplete_from_the_cache_then_served_once_read() {
    let fs = MemFs::new();
    let db = flushed(&fs, 300);
    let before = io(&fs);
    assert_incomplete(db.get_opt(&cache_only(), "key0123"), "get of a block never read");
    assert_eq!(io(&fs), before, "a block-cache-only get read the file system");

    assert_eq!(db.get_opt(&ReadOptions::default(), "key0123").unwrap(), Some(b"value123".to_vec()));
    assert!(io(&fs).0 > before.0, "the full read read no block");
    let after_full = io(&fs);
    // The block is cached now: the same read answers from memory.
    assert_eq!(db.get_opt(&cache_only(), "key0123").unwrap(), Some(b"value123".to_vec()));
    assert_eq!(io(&fs), after_full);
    // An absent key whose block is cached is an answer too, not Incomplete.
    assert_eq!(db.get_opt(&cache_only(), "key0123x").unwrap(), None);
    db.close().unwrap();
}

#[test]
fn a_table_not_open_is_incomplete() {
    let fs = MemFs::new();
    flushed(&fs, 50).close().unwrap();
    let db = open(&fs, tiny_options());
    let before = io(&fs);
    assert_incomplete(db.get_opt(&cache_only(), "key0007"), "get from a table not in the table cache");
    let mut c = db.cursor_opt(&cache_only());
    c.seek_to_first();
    assert!(!c.valid());
    assert!(c.status().unwrap_err().is_incomplete());
    drop(c);
    assert_eq!(io(&fs), before, "block-cache-only reads opened or read a file");
    assert_eq!(db.get("key0007").unwrap(), Some(b"value7".to_vec()));
    assert_eq!(db.get_opt(&cache_only(), "key0007").unwrap(), Some(b"value7".to_vec()));
    db.close().unwrap();
}

#[test]
fn a_memtable_value_is_always_served() {
    let fs = MemFs::new();
    let db = flushed(&fs, 100);
    // Newer versions in the memtable decide without looking at the tables.
    db.put("key0042", "fresh").unwrap();
    db.delete("key0043").unwrap();
    let before = io(&fs);
    assert_eq!(db.get_opt(&cache_only(), "key0042").unwrap(), Some(b"fresh".to_vec()));
    assert_eq!(db.get_opt(&cache_only(), "key0043").unwrap(), None);
    assert_eq!(io(&fs), before);
    // A key only in the memtable of a database without tables.
    let fs2 = MemFs::new();
    let db2 = open(&fs2, tiny_options());
    db2.put("k", "v").unwrap();
    assert_eq!(db2.get_opt(&cache_only(), "k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(db2.get_opt(&cache_only(), "absent").unwrap(), None);
    db.close().unwrap();
    db2.close().unwrap();
}

#[test]
fn multi_get_answers_each_key_it_can_and_marks_the_others_incomplete() {
    let fs = MemFs::new();
    let db = flushed(&fs, 300);
    db.put("key0001", "in the memtable").unwrap();
    // key0200's block read once, so cached.
    assert_eq!(db.get("key0200").unwrap(), Some(b"value200".to_vec()));
    let before = io(&fs);
    let got = db.multi_get_opt(&cache_only(), ["key0001", "key0200", "key0100", "key0001"]);
    assert_eq!(io(&fs), before, "a block-cache-only multi_get read the file system");
    assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"in the memtable"[..]));
    assert_eq!(got[1].as_ref().unwrap().as_deref(), Some(&b"value200"[..]));
    assert!(got[2].as_ref().unwrap_err().is_incomplete(), "{:?}", got[2]);
    assert_eq!(got[3].as_ref().unwrap().as_deref(), Some(&b"in the memtable"[..]));
    // With All the same batch is answered whole, and then from the cache too.
    let all: Vec<_> = db.multi_get(["key0100", "key0200"]).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(all, [Some(b"value100".to_vec()), Some(b"value200".to_vec())]);
    let again = db.multi_get_opt(&cache_only(), ["key0100", "key0200"]);
    assert!(again.iter().all(|r| r.is_ok()), "{again:?}");
    db.close().unwrap();
}

/// A block-cache-only cursor yields a correct prefix of the keys, then turns invalid with Incomplete: it
/// never skips a key whose block is not cached, nor yields a wrong one.
#[test]
fn a_cursor_stops_with_incomplete_never_with_a_wrong_or_missing_key() {
    let fs = MemFs::new();
    // One table of many small blocks (a cursor positions every L0 table at once, so with several the
    // first seek would need them all open).
    let one_table = || Options { write_buffer_size: 1 << 20, ..tiny_options() };
    let db = open(&fs, one_table());
    for i in 0..400 {
        db.put(format!("key{i:04}"), format!("value{i}")).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.property("rocksdb.num-files-at-level0").as_deref(), Some("1"));
    db.close().unwrap();
    // Reopened, so nothing is cached; memtable entries interleaved with the table's keys.
    let db = open(&fs, one_table());
    db.put("key0000a", "mem").unwrap();
    db.put("key0300a", "mem").unwrap();
    let mut expected: Vec<Vec<u8>> = (0..400).map(|i| format!("key{i:04}").into_bytes()).collect();
    expected.extend([b"key0000a".to_vec(), b"key0300a".to_vec()]);
    expected.sort();
    // Warm the first few blocks only.
    for i in 0..20 {
        db.get(format!("key{i:04}")).unwrap();
    }
    let before = io(&fs);
    let mut c = db.cursor_opt(&cache_only());
    c.seek_to_first();
    let mut seen = Vec::new();
    while c.valid() {
        seen.push(c.key().to_vec());
        c.next();
    }
    let status = c.status();
    drop(c);
    assert_eq!(io(&fs), before, "a block-cache-only cursor read the file system");
    assert!(status.as_ref().is_err_and(|e| e.is_incomplete()), "{status:?}");
    assert!(seen.len() >= 21 && seen.len() < expected.len(), "{} keys from the warmed blocks", seen.len());
    assert_eq!(seen[..], expected[..seen.len()], "the cursor's keys are not a prefix of the real ones");

    // Read everything once; then the block-cache-only cursor sees it all, forward and backward.
    assert_eq!(db.iter().count(), expected.len());
    let forward: Vec<Vec<u8>> = db.iter_opt(&cache_only()).map(|r| r.unwrap().0).collect();
    assert_eq!(forward, expected);
    let backward: Vec<Vec<u8>> = db.iter_opt(&cache_only()).rev().map(|r| r.unwrap().0).collect();
    assert_eq!(backward.into_iter().rev().collect::<Vec<_>>(), expected);
    db.close().unwrap();
}

#[test]
fn a_blob_value_is_incomplete_even_when_its_table_is_cached() {
    let fs = MemFs::new();
    let db = open(&fs, Options { enable_blob_files: true, min_blob_size: 100, ..tiny_options() });
    let big = vec![b'x'; 500];
    db.put("big", &big).unwrap();
    db.put("small", "s").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("big").unwrap(), Some(big.clone()));
    assert_eq!(db.get("small").unwrap(), Some(b"s".to_vec()));
    let before = io(&fs);
    // No blob cache: the value needs a blob file read.
    assert_incomplete(db.get_opt(&cache_only(), "big"), "get of a blob value");
    assert_eq!(db.get_opt(&cache_only(), "small").unwrap(), Some(b"s".to_vec()));
    let mut c = db.cursor_opt(&cache_only());
    c.seek(b"big");
    assert!(!c.valid());
    assert!(c.status().unwrap_err().is_incomplete());
    drop(c);
    assert_eq!(io(&fs), before);
    db.close().unwrap();
}
