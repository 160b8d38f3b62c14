//! Table reads: direct reads (`use_direct_reads`), iterator readahead (`ReadOptions::readahead_size` and the
//! automatic readahead), compaction readahead, `advise_random_on_open`, and the direct writes and compaction
//! reads of `use_direct_io_for_flush_and_compaction`, observed through a counting `Fs`.

use parking_lot::Mutex;
use shaledb::{CompressionType, Db, Options, ReadOptions};
use shaledb_vfs::{
    AlignedBuf, Error, FileLock, Fs, PosixFs, RandomAccessFile, ReadHints, Result, WritableFile, WriteHints,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// What the counting file system saw of table (`.sst`) files.
#[derive(Default)]
struct Seen {
    reads: AtomicU64,
    largest_read: AtomicU64,
    opens: Mutex<Vec<ReadHints>>,
    /// How table files were created.
    creates: Mutex<Vec<WriteHints>>,
    /// Refuse O_DIRECT as tmpfs before Linux 6.6 does (`NotSupported` at open and create).
    refuse_direct: AtomicBool,
}

impl Seen {
    fn reset(&self) {
        self.reads.store(0, Relaxed);
        self.largest_read.store(0, Relaxed);
        self.opens.lock().clear();
        self.creates.lock().clear();
    }
    fn reads(&self) -> u64 {
        self.reads.load(Relaxed)
    }
    fn largest_read(&self) -> u64 {
        self.largest_read.load(Relaxed)
    }
}

/// The OS file system, counting the reads of table files.
#[derive(Debug)]
struct CountingFs {
    inner: PosixFs,
    seen: Arc<Seen>,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seen").field("reads", &self.reads()).finish()
    }
}

struct CountingFile {
    inner: Arc<dyn RandomAccessFile>,
    seen: Option<Arc<Seen>>,
}

impl CountingFile {
    fn count(&self, len: usize) {
        if let Some(s) = &self.seen {
            s.reads.fetch_add(1, Relaxed);
            s.largest_read.fetch_max(len as u64, Relaxed);
        }
    }
}

impl RandomAccessFile for CountingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.count(buf.len());
        self.inner.read_exact_at(buf, offset)
    }
    fn read_into(&self, offset: u64, len: usize, buf: &mut AlignedBuf) -> Result<()> {
        self.count(len);
        self.inner.read_into(offset, len, buf)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

impl Fs for CountingFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create_with(path, WriteHints::default())
    }
    fn create_with(&self, path: &Path, hints: WriteHints) -> Result<Box<dyn WritableFile>> {
        if hints.direct && self.seen.refuse_direct.load(Relaxed) {
            return Err(Error::NotSupported(format!("{} refuses O_DIRECT", path.display())));
        }
        if path.extension().is_some_and(|e| e == "sst") {
            self.seen.creates.lock().push(hints);
        }
        self.inner.create_with(path, hints)
    }
    fn open(&self, path: &Path, hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>> {
        if hints.direct && self.seen.refuse_direct.load(Relaxed) {
            return Err(Error::NotSupported(format!("{} refuses O_DIRECT", path.display())));
        }
        let is_table = path.extension().is_some_and(|e| e == "sst");
        if is_table {
            self.seen.opens.lock().push(hints);
        }
        let inner = self.inner.open(path, hints)?;
        Ok(Arc::new(CountingFile { inner, seen: is_table.then(|| self.seen.clone()) }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

const N: usize = 20_000;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(200, b'a' + (i % 26) as u8);
    v
}

/// Options for a database of a few MB in 4 KiB uncompressed blocks, without a block cache (every block
/// is read from its file), counted by `seen`.
fn options(seen: &Arc<Seen>) -> Options {
    Options {
        write_buffer_size: 1 << 20,
        target_file_size_base: 2 << 20,
        max_bytes_for_level_base: 4 << 20,
        block_size: 4096,
        compression: CompressionType::None,
        block_cache_size: 0,
        fs: Arc::new(CountingFs { inner: PosixFs::new(), seen: seen.clone() }),
        ..Options::default()
    }
}

/// Writes the `N` entries in two overlapping passes (so that reads merge several files), compacted into
/// tables, plus some writes left in the memtable. Returns the expected contents.
fn load(dir: &Path, seen: &Arc<Seen>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, options(seen)).unwrap();
    let mut model = BTreeMap::new();
    for i in (0..N).step_by(2).chain((1..N).step_by(2)) {
        db.put(key(i), value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    for i in (0..N).step_by(97) {
        db.put(key(i), b"newer").unwrap();
        model.insert(key(i), b"newer".to_vec());
    }
    db.flush().unwrap();
    db.close().unwrap();
    model
}

fn scan(db: &Db, ro: ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.cursor_opt(&ro);
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

fn scan_back(db: &Db, ro: ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.cursor_opt(&ro);
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    out.reverse();
    out
}

fn ro(readahead_size: usize) -> ReadOptions {
    ReadOptions { readahead_size, ..ReadOptions::default() }
}

#[test]
fn scans_with_any_readahead_and_direct_reads_return_the_same_entries() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Seen::default());
    let model = load(dir.path(), &seen);
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    let (lo, hi) = (key(N / 3), key(N / 3 + 2500));
    let want_range: Vec<_> = model.range(lo.clone()..hi.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
    for direct in [false, true] {
        // The reference: no readahead at all (automatic readahead off, readahead_size 0).
        let o = Options { use_direct_reads: direct, max_auto_readahead_size: 0, ..options(&seen) };
        let db = Db::open(dir.path(), o).unwrap();
        assert!(scan(&db, ro(0)) == want, "direct={direct} without readahead");
        db.close().unwrap();
        let db = Db::open(dir.path(), Options { use_direct_reads: direct, ..options(&seen) }).unwrap();
        for size in [0, 64 << 10, 1 << 20] {
            assert!(scan(&db, ro(size)) == want, "direct={direct} readahead {size}");
            assert!(scan_back(&db, ro(size)) == want, "direct={direct} readahead {size} backward");
            let bounded = ReadOptions {
                iterate_lower_bound: Some(lo.clone()),
                iterate_upper_bound: Some(hi.clone()),
                ..ro(size)
            };
            assert!(scan(&db, bounded) == want_range, "direct={direct} readahead {size} bounded");
            for i in (0..N).step_by(1231) {
                assert_eq!(db.get_opt(&ro(size), key(i)).unwrap().as_ref(), model.get(&key(i)));
            }
        }
        db.close().unwrap();
    }
}

#[test]
fn automatic_readahead_grows_so_a_long_scan_issues_few_large_reads() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Seen::default());
    let model = load(dir.path(), &seen);
    for direct in [false, true] {
        let db = Db::open(dir.path(), Options { use_direct_reads: direct, ..options(&seen) }).unwrap();
        // Open every table first (the table cache's opens read the meta blocks), then count the scan alone.
        assert_eq!(scan(&db, ro(0)).len(), model.len());
        seen.reset();
        let before = db.statistics();
        assert_eq!(scan(&db, ro(0)).len(), model.len());
        let after = db.statistics();
        let blocks = after.blocks_read - before.blocks_read;
        let reads = seen.reads();
        assert_eq!(after.table_file_reads - before.table_file_reads, reads, "the engine counts every read");
        assert!(blocks > 1000, "{blocks} blocks read");
        assert!(reads * 20 < blocks, "direct={direct}: {reads} reads for {blocks} blocks");
        // The windows grew to RocksDB's max_auto_readahead_size (256 KiB) plus a block.
        let largest = seen.largest_read();
        assert!((256 << 10..(256 << 10) + 8192).contains(&largest), "largest read {largest}");

        // Without readahead: one read per block.
        seen.reset();
        db.close().unwrap();
        let o = Options { use_direct_reads: direct, max_auto_readahead_size: 0, ..options(&seen) };
        let db = Db::open(dir.path(), o).unwrap();
        assert_eq!(scan(&db, ro(0)).len(), model.len());
        seen.reset();
        let before = db.statistics();
        assert_eq!(scan(&db, ro(0)).len(), model.len());
        let blocks = db.statistics().blocks_read - before.blocks_read;
        assert_eq!(seen.reads(), blocks, "direct={direct}: one read per block without readahead");
        assert!(seen.largest_read() < 8192);

        // A fixed readahead_size: reads of that size.
        seen.reset();
        assert_eq!(scan(&db, ro(1 << 20)).len(), model.len());
        assert!(seen.reads() < 20, "{} reads of 1 MiB", seen.reads());
        assert!(seen.largest_read() > 512 << 10);
        db.close().unwrap();
    }
}

#[test]
fn point_lookups_never_read_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Seen::default());
    let model = load(dir.path(), &seen);
    for direct in [false, true] {
        let db = Db::open(dir.path(), Options { use_direct_reads: direct, ..options(&seen) }).unwrap();
        assert_eq!(scan(&db, ro(0)).len(), model.len());
        seen.reset();
        // Consecutive keys: sequential blocks, which would start the automatic readahead of an iterator.
        for i in 5000..7000 {
            assert_eq!(db.get_opt(&ro(1 << 20), key(i)).unwrap().as_ref(), model.get(&key(i)));
        }
        assert!(seen.reads() > 0);
        assert!(seen.largest_read() < 8192, "a get read {} bytes at once", seen.largest_read());
        db.close().unwrap();
    }
}

#[test]
fn compactions_read_their_inputs_in_large_windows() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Seen::default());
    let model = load(dir.path(), &seen);
    for (direct, readahead) in [(false, 2 << 20), (true, 2 << 20), (true, 0)] {
        let o = Options { use_direct_reads: direct, compaction_readahead_size: readahead, ..options(&seen) };
        let db = Db::open(dir.path(), o).unwrap();
        for i in (0..N).step_by(89) {
            db.put(key(i), value(i + 1)).unwrap();
        }
        seen.reset();
        db.compact_range(None, None).unwrap();
        let opens = seen.opens.lock().clone();
        assert!(!opens.is_empty());
        assert!(opens.iter().all(|h| h.direct == direct), "{opens:?}");
        let largest = seen.largest_read();
        if readahead > 0 {
            assert!(largest > 1 << 20, "direct={direct}: largest compaction read {largest}");
        } else {
            // Blocks one by one; the largest reads are the filter and index blocks of the tables opened.
            assert!(largest < 64 << 10, "block by block: largest read {largest}");
        }
        let mut it = db.cursor();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().unwrap();
        assert_eq!(n, model.len());
        db.close().unwrap();
    }
}

#[test]
fn advise_random_on_open_either_way_opens_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Seen::default());
    let model = load(dir.path(), &seen);
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    for (advise, direct) in [(true, false), (false, false), (true, true), (false, true)] {
        seen.reset();
        let o = Options { advise_random_on_open: advise, use_direct_reads: direct, ..options(&seen) };
        let db = Db::open(dir.path(), o).unwrap();
        for i in (0..N).step_by(503) {
            assert_eq!(db.get(key(i)).unwrap().as_ref(), model.get(&key(i)));
        }
        assert!(scan(&db, ro(0)) == want);
        let opens = seen.opens.lock().clone();
        assert!(!opens.is_empty());
        for h in &opens {
            assert_eq!((h.advise_random, h.direct, h.sequential), (advise, direct, false), "{opens:?}");
        }
        db.close().unwrap();
    }
}

/// `use_direct_reads` and `use_direct_io_for_flush_and_compaction`, alone and together, on the in-memory
/// `Fs` (no page cache): accepted, and nothing changes.
#[test]
fn direct_io_on_the_in_memory_fs_changes_nothing() {
    for (reads, flush_and_compaction) in [(true, false), (false, true), (true, true)] {
        let fs = Arc::new(shaledb_vfs::MemFs::new());
        let dir = Path::new("/db");
        let o = || Options {
            fs: fs.clone(),
            use_direct_reads: reads,
            use_direct_io_for_flush_and_compaction: flush_and_compaction,
            write_buffer_size: 64 << 10,
            ..Options::default()
        };
        let db = Db::open(dir, o()).unwrap();
        for i in 0..3000 {
            db.put(key(i), value(i)).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        db.close().unwrap();
        let db = Db::open(dir, o()).unwrap();
        let got = scan(&db, ro(64 << 10));
        assert_eq!(got.len(), 3000);
        assert!(got.iter().enumerate().all(|(i, (k, v))| *k == key(i) && *v == value(i)));
        db.close().unwrap();
    }
}

/// `use_direct_io_for_flush_and_compaction`: every table a flush or a compaction writes is created direct,
/// compaction inputs are opened direct (and read in `compaction_readahead_size` windows) while the tables
/// opened for reads stay buffered; the contents are the model's, before and after a reopen without the
/// option.
#[test]
fn direct_io_for_flush_and_compaction_writes_and_compacts_direct() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let seen = Arc::new(Seen::default());
    let o = || Options { use_direct_io_for_flush_and_compaction: true, ..options(&seen) };
    let db = Db::open(dir.path(), o()).unwrap();
    let mut model = BTreeMap::new();
    for i in (0..N).step_by(2).chain((1..N).step_by(2)) {
        db.put(key(i), value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    db.flush().unwrap();
    // Reads through the table cache: buffered.
    for i in (0..N).step_by(101) {
        assert_eq!(db.get(key(i)).unwrap().as_ref(), model.get(&key(i)));
    }
    let creates = seen.creates.lock().clone();
    assert!(!creates.is_empty() && creates.iter().all(|h| h.direct), "{creates:?}");
    assert!(seen.opens.lock().iter().any(|h| !h.direct), "tables opened for reads stay buffered");
    seen.reset();
    db.compact_range(None, None).unwrap();
    let (opens, creates) = (seen.opens.lock().clone(), seen.creates.lock().clone());
    assert!(!opens.is_empty() && opens.iter().all(|h| h.direct && h.sequential), "{opens:?}");
    assert!(!creates.is_empty() && creates.iter().all(|h| h.direct), "{creates:?}");
    assert!(seen.largest_read() > 1 << 20, "compaction inputs read in readahead windows: {}", seen.largest_read());
    assert!(scan(&db, ro(0)) == model.clone().into_iter().collect::<Vec<_>>());
    db.close().unwrap();
    // The tables are ordinary tables: a buffered open reads them, verify passes.
    let db = Db::open(dir.path(), options(&seen)).unwrap();
    db.verify_checksums().unwrap();
    assert!(scan(&db, ro(0)) == model.into_iter().collect::<Vec<_>>());
    db.close().unwrap();
}

/// A file system that refuses O_DIRECT fails `Db::open` with `NotSupported` naming the option, before any
/// table is written (never a silent fallback to buffered writes).
#[test]
fn direct_io_for_flush_and_compaction_refused_is_not_supported_naming_the_option() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let seen = Arc::new(Seen::default());
    seen.refuse_direct.store(true, Relaxed);
    let o = Options { use_direct_io_for_flush_and_compaction: true, ..options(&seen) };
    let Err(e) = Db::open(dir.path(), o) else { panic!("the open must fail") };
    assert!(matches!(e, Error::NotSupported(_)), "{e}");
    assert!(e.to_string().contains("use_direct_io_for_flush_and_compaction"), "{e}");
    assert!(seen.creates.lock().is_empty());
    // Without the option the same file system works.
    let db = Db::open(dir.path(), options(&seen)).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
}

/// On tmpfs (`/dev/shm`): before Linux 6.6 it refuses O_DIRECT and the open fails naming the option; a
/// newer kernel's tmpfs takes O_DIRECT, and the database then works with the option.
#[test]
fn direct_io_for_flush_and_compaction_on_tmpfs() {
    let shm = Path::new("/dev/shm");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let is_tmpfs = mounts.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"/dev/shm") && f.get(2) == Some(&"tmpfs")
    });
    if !is_tmpfs {
        eprintln!("skipped: /dev/shm is not a tmpfs here");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let o = Options { use_direct_io_for_flush_and_compaction: true, write_buffer_size: 64 << 10, ..Options::default() };
    match Db::open(dir.path(), o) {
        Err(e) => {
            assert!(matches!(e, Error::NotSupported(_)), "{e}");
            assert!(e.to_string().contains("use_direct_io_for_flush_and_compaction"), "{e}");
        }
        Ok(db) => {
            eprintln!("this kernel's tmpfs takes O_DIRECT: checked that the database works there");
            for i in 0..3000 {
                db.put(key(i), value(i)).unwrap();
            }
            db.flush().unwrap();
            db.compact_range(None, None).unwrap();
            for i in (0..3000).step_by(7) {
                assert_eq!(db.get(key(i)).unwrap(), Some(value(i)));
            }
            db.close().unwrap();
        }
    }
}
