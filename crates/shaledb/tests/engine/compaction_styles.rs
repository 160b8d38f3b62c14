//! Universal and FIFO compaction through the engine: the LSM shape after a known sequence of flushes (golden),
//! reads checked after every pick, FIFO dropping the oldest files by size and by TTL, switching styles on an
//! existing database, and write stalls counting sorted runs.

use crate::tiny_options;
use shaledb::{
    Clock, CompactionOptionsFifo, CompactionOptionsUniversal, CompactionStyle, CompressionType, Db, Options,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Options where only explicit flushes make tables and every flush of `batch` makes one of about the same size.
fn style_options(style: CompactionStyle) -> Options {
    Options {
        compaction_style: style,
        write_buffer_size: 4 << 20,
        level0_file_num_compaction_trigger: 4,
        compression: CompressionType::None,
        target_file_size_base: 1 << 20,
        max_background_jobs: 1,
        merge_operator: None,
        ..tiny_options()
    }
}

/// Files per level, as `L0:3 L6:1` (empty levels left out).
fn shape(db: &Db) -> String {
    let mut parts = Vec::new();
    for level in 0..7 {
        let n = db.property(&format!("rocksdb.num-files-at-level{level}")).unwrap_or_default();
        if n != "0" && !n.is_empty() {
            parts.push(format!("L{level}:{n}"));
        }
    }
    parts.join(" ")
}

/// Writes `n` keys of round `round` (distinct from every other round's), flushes, and waits for compactions.
fn flush_round(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, round: usize, n: usize) {
    for i in 0..n {
        let k = format!("r{round:03}k{i:05}").into_bytes();
        let v = format!("value-{round}-{i}-{}", "x".repeat(50)).into_bytes();
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
}

/// Every key of the model reads back, and a scan returns exactly the model.
fn check_reads(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, at: &str) {
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{at}: get {}", String::from_utf8_lossy(k));
    }
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
    assert!(got.iter().map(|(k, v)| (k, v)).eq(model.iter()), "{at}: scan differs from the model");
}

#[test]
fn universal_golden_shape_after_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), style_options(CompactionStyle::Universal)).unwrap();
    let mut model = BTreeMap::new();
    let mut shapes = Vec::new();
    for round in 0..12 {
        flush_round(&db, &mut model, round, 500);
        check_reads(&db, &model, &format!("after flush {round}"));
        shapes.push(shape(&db));
    }
    // Flushes 1-3 wait in L0; the 4th makes 4 runs with 3 over 1 (300% > 200%): everything into L6. Then
    // L0 fills again and the size ratio merges the 3 equal L0 files above the 4x larger L6 run, into L5; then 2
    // L0 files above the 3x run in L5, into L4. At flush 10 the runs 1, 1, 2, 3, 4 each fit within 101% of
    // the sum before them: all merge into L6 (size amplification, 7 over 4, stays under 200%).
    let want = [
        "L0:1",
        "L0:2",
        "L0:3",
        "L6:1",
        "L0:1 L6:1",
        "L0:2 L6:1",
        "L5:1 L6:1",
        "L0:1 L5:1 L6:1",
        "L4:1 L5:1 L6:1",
        "L0:1 L4:1 L5:1 L6:1",
        "L6:1",
        "L0:1 L6:1",
    ];
    assert_eq!(shapes, want);
    db.close().unwrap();
}

#[test]
fn universal_allow_trivial_move_moves_disjoint_files() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        compaction_options_universal: CompactionOptionsUniversal { allow_trivial_move: true, ..Default::default() },
        ..style_options(CompactionStyle::Universal)
    };
    let db = Db::open(dir.path(), o).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..4 {
        flush_round(&db, &mut model, round, 200);
    }
    // The 4 flushes hold disjoint key ranges: moved, not rewritten, so still 4 files, now in L6.
    assert_eq!(shape(&db), "L6:4");
    assert_eq!(db.statistics().compaction_bytes_written, 0, "a move writes nothing");
    check_reads(&db, &model, "after the move");
    db.close().unwrap();
}

#[test]
fn universal_compact_range_merges_everything_into_the_last_level() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), style_options(CompactionStyle::Universal)).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..6 {
        flush_round(&db, &mut model, round, 300);
    }
    for i in (0..300).step_by(3) {
        let k = format!("r002k{i:05}").into_bytes();
        db.delete(&k).unwrap();
        model.remove(&k);
    }
    db.compact_range(Some(b"r002"), Some(b"r003")).unwrap();
    assert_eq!(shape(&db), "L6:1", "the range is ignored: one run in the last level");
    check_reads(&db, &model, "after compact_range");
    db.close().unwrap();
}

/// A clock the test moves.
struct TestClock(AtomicU64);

impl Clock for TestClock {
    fn now_secs(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn fifo_options(max: u64, ttl: u64, clock: Arc<TestClock>) -> Options {
    Options {
        compaction_options_fifo: CompactionOptionsFifo { max_table_files_size: max, ttl, clock, ..Default::default() },
        ..style_options(CompactionStyle::Fifo)
    }
}

/// A FIFO database in `dir` with a test clock starting at `start`.
fn open_fifo(dir: &Path, max: u64, ttl: u64, start: u64) -> (Db, Arc<TestClock>) {
    let clock = Arc::new(TestClock(AtomicU64::new(start)));
    (Db::open(dir, fifo_options(max, ttl, clock.clone())).unwrap(), clock)
}

fn table_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn fifo_drops_the_oldest_files_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
    // One flush of 500 keys is about 45 KB: the limit holds 3 of them.
    let db = Db::open(dir.path(), fifo_options(140 << 10, 0, clock)).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..8 {
        flush_round(&db, &mut model, round, 500);
        let files: usize = shape(&db).trim_start_matches("L0:").parse().unwrap();
        let live: u64 = db.property("rocksdb.live-sst-files-size").unwrap().parse().unwrap();
        assert!(live <= 140 << 10, "round {round}: over the limit");
        // The newest `files` rounds are whole; every older one is gone whole.
        for r in 0..=round {
            let present = db.get(format!("r{r:03}k00000").as_bytes()).unwrap().is_some();
            let last = db.get(format!("r{r:03}k00499").as_bytes()).unwrap().is_some();
            assert_eq!(present, last, "round {round}: a file is dropped whole");
            assert_eq!(present, r + files > round, "round {round}: round {r} present={present}, {files} files");
        }
    }
    assert_eq!(shape(&db), "L0:3");
    // Reads of what is left agree with the model restricted to it.
    model.retain(|k, _| k.as_slice() >= b"r005".as_slice());
    check_reads(&db, &model, "after the drops");
    db.close().unwrap();
}

#[test]
fn fifo_drops_files_older_than_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let (db, clock) = open_fifo(dir.path(), 1 << 30, 100, 10_000);
    let mut model = BTreeMap::new();
    flush_round(&db, &mut model, 0, 100); // created at 10,000
    clock.0.store(10_050, Ordering::SeqCst);
    flush_round(&db, &mut model, 1, 100); // created at 10,050
    clock.0.store(10_090, Ordering::SeqCst);
    flush_round(&db, &mut model, 2, 100);
    assert_eq!(shape(&db), "L0:3", "nothing is older than 100 s yet");
    // At `now`, the files of rounds before `first_kept` have expired.
    let expire = |db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, now: u64, files: &str, first_kept: &[u8]| {
        clock.0.store(now, Ordering::SeqCst);
        db.wait_for_compaction().unwrap();
        assert_eq!(shape(db), files, "at {now}");
        model.retain(|k, _| k.as_slice() >= first_kept);
        check_reads(db, model, &format!("at {now}"));
    };
    // At 10,120 the first file is 120 s old.
    expire(&db, &mut model, 10_120, "L0:2", b"r001");
    assert_eq!(db.get(b"r000k00000").unwrap(), None);
    // Reopened, the creation times come back from the tables: at 10,170 the second file (10,050) is 120 s
    // old, the third (10,090) 80 s.
    db.close().unwrap();
    let db = Db::open(dir.path(), fifo_options(1 << 30, 100, clock.clone())).unwrap();
    expire(&db, &mut model, 10_170, "L0:1", b"r002");
    db.close().unwrap();
}

#[test]
fn fifo_allow_compaction_merges_small_files_and_keeps_their_age() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock(AtomicU64::new(5_000)));
    let mut o = fifo_options(1 << 30, 1_000, clock.clone());
    o.compaction_options_fifo.allow_compaction = true;
    let db = Db::open(dir.path(), o).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..4 {
        clock.0.fetch_add(10, Ordering::SeqCst);
        flush_round(&db, &mut model, round, 100);
    }
    assert_eq!(shape(&db), "L0:1", "4 small files merged into one");
    check_reads(&db, &model, "after the merge");
    // The merged file carries its oldest input's time (5,010): expired at 6,011, not at 5,900 + ...
    clock.0.store(6_005, Ordering::SeqCst);
    db.wait_for_compaction().unwrap();
    assert_eq!(shape(&db), "L0:1");
    clock.0.store(6_011, Ordering::SeqCst);
    db.wait_for_compaction().unwrap();
    assert_eq!(shape(&db), "");
    assert_eq!(db.iter().count(), 0);
    db.close().unwrap();
}

#[test]
fn switching_styles_keeps_every_key_and_fifo_with_ttl_needs_open_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    // Leveled first: data below L0.
    let db = Db::open(dir.path(), style_options(CompactionStyle::Level)).unwrap();
    for round in 0..6 {
        flush_round(&db, &mut model, round, 300);
    }
    db.compact_range(None, None).unwrap();
    assert!(!shape(&db).contains("L0"), "{}", shape(&db));
    db.close().unwrap();
    // Universal reads it, and compacts on top of it.
    let db = Db::open(dir.path(), style_options(CompactionStyle::Universal)).unwrap();
    check_reads(&db, &model, "leveled database opened under universal");
    for round in 6..10 {
        flush_round(&db, &mut model, round, 300);
        check_reads(&db, &model, &format!("universal flush {round}"));
    }
    db.close().unwrap();
    // Back to leveled.
    let db = Db::open(dir.path(), style_options(CompactionStyle::Level)).unwrap();
    check_reads(&db, &model, "universal database opened under leveled");
    db.close().unwrap();
    // FIFO's TTL needs every table open: refused, naming the option.
    let clock = Arc::new(TestClock(AtomicU64::new(1)));
    let bad = Options { max_open_files: 100, ..fifo_options(1 << 30, 60, clock.clone()) };
    let e = Db::open(dir.path(), bad).unwrap_err();
    assert!(e.to_string().contains("max_open_files") && e.to_string().contains("ttl"), "{e}");
    // FIFO with a size limit below the data: the last level goes first, smallest keys first.
    let db = Db::open(dir.path(), fifo_options(1 << 30, 0, clock.clone())).unwrap();
    check_reads(&db, &model, "opened under FIFO");
    db.close().unwrap();
    let total = table_bytes(dir.path());
    let db = Db::open(dir.path(), fifo_options(total / 2, 0, clock)).unwrap();
    db.wait_for_compaction().unwrap();
    // The version's tables (a dropped file leaves the disk once no reader of the old version remains).
    let live: u64 = db.property("rocksdb.live-sst-files-size").unwrap().parse().unwrap();
    assert!(live <= total / 2, "{live} > {total} / 2: {}", shape(&db));
    assert_eq!(db.get(b"r000k00000").unwrap(), None, "the smallest keys of the last level went first");
    for (k, v) in &model {
        if let Some(got) = db.get(k).unwrap() {
            assert_eq!(&got, v, "a key left reads its value");
        }
    }
    db.close().unwrap();
}

#[test]
fn universal_write_stalls_count_sorted_runs() {
    let dir = tempfile::tempdir().unwrap();
    // No rule can ever merge (min_merge_width above the run count, size amplification never reached), so
    // the runs stay; writes slow down at 3 sorted runs, with a delayed write rate that makes a write wait.
    let o = Options {
        compaction_options_universal: CompactionOptionsUniversal {
            min_merge_width: 100,
            max_merge_width: 100,
            max_size_amplification_percent: u32::MAX,
            ..Default::default()
        },
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 3,
        level0_stop_writes_trigger: 1000,
        delayed_write_rate: 4096,
        ..style_options(CompactionStyle::Universal)
    };
    let db = Db::open(dir.path(), o).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..2 {
        flush_round(&db, &mut model, round, 100);
    }
    db.put(b"zz", [b'v'; 100]).unwrap();
    assert_eq!(db.statistics().stalls.level0_slowdown, 0, "2 runs: under the trigger");
    // A third run in L0: 3 runs.
    flush_round(&db, &mut model, 2, 100);
    assert_eq!(shape(&db), "L0:3");
    db.put(b"zz", [b'v'; 100]).unwrap();
    let stalls = db.statistics().stalls;
    assert!(stalls.level0_slowdown > 0, "{stalls:?}");
    db.close().unwrap();
}

#[test]
fn fifo_ingestion_goes_to_level_0() {
    use shaledb::ingest::{IngestExternalFileOptions, SstFileWriter};
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock(AtomicU64::new(1)));
    let o = fifo_options(1 << 30, 0, clock);
    let path = dir.path().join("ext.sst");
    let mut w = SstFileWriter::create(&o);
    w.open(&path).unwrap();
    w.put(b"ext", b"1").unwrap();
    w.finish().unwrap();
    let db = Db::open(dir.path().join("db"), o).unwrap();
    db.ingest_external_file(&[&path], &IngestExternalFileOptions::default()).unwrap();
    // Leveled compaction would put it in the bottom level of an empty database.
    assert_eq!(shape(&db), "L0:1");
    assert_eq!(db.get(b"ext").unwrap(), Some(b"1".to_vec()));
    db.close().unwrap();
}

#[test]
fn fifo_ttl_drops_files_with_no_write_to_wake_the_database() {
    let dir = tempfile::tempdir().unwrap();
    // A TTL of 1 s: an idle background thread looks again every second.
    let (db, clock) = open_fifo(dir.path(), 1 << 30, 1, 1_000);
    flush_round(&db, &mut BTreeMap::new(), 0, 50);
    assert_eq!(shape(&db), "L0:1");
    clock.0.store(1_010, Ordering::SeqCst);
    // No call into the database until the file is gone (bounded wait; it takes about a second).
    let start = std::time::Instant::now();
    while db.property("rocksdb.num-files-at-level0").as_deref() != Some("0") {
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "the expired file was never dropped");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(db.get(b"r000k00000").unwrap(), None);
    db.close().unwrap();
}

/// Records the context of every filtered key's job.
struct Contexts(std::sync::Mutex<Vec<shaledb::FilterContext>>);

impl shaledb::CompactionFilter for Contexts {
    fn name(&self) -> &str {
        "contexts"
    }
    fn filter(&self, cx: &shaledb::FilterContext, _key: &[u8], _value: &[u8]) -> shaledb::Decision {
        self.0.lock().unwrap().push(*cx);
        shaledb::Decision::Keep
    }
}

#[test]
fn universal_full_compaction_over_several_levels_tells_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let filter = Arc::new(Contexts(std::sync::Mutex::new(Vec::new())));
    let o = Options { compaction_filter: Some(filter.clone()), ..style_options(CompactionStyle::Universal) };
    let db = Db::open(dir.path(), o).unwrap();
    let mut model = BTreeMap::new();
    // 8 flushes: runs in L0, L5 and L6 (see the golden shapes above).
    for round in 0..8 {
        flush_round(&db, &mut model, round, 100);
    }
    assert_eq!(shape(&db), "L0:1 L5:1 L6:1");
    filter.0.lock().unwrap().clear();
    db.compact_range(None, None).unwrap();
    assert_eq!(shape(&db), "L6:1");
    let seen = filter.0.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|cx| cx.is_full_compaction && cx.is_manual_compaction && cx.bottommost), "{seen:?}");
    assert!(seen.iter().all(|cx| (cx.level, cx.output_level) == (0, 6)), "{seen:?}");
    check_reads(&db, &model, "after the full compaction");
    db.close().unwrap();
}
