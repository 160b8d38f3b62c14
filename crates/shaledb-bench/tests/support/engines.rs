//! Checks written once for any engine: e2e.rs runs them on ShaleDB, rocks.rs on RocksDB (cargo feature
//! `rocksdb`), each adding what only its engine does.

use shaledb_bench::db_bench::flags::BenchFlags;
use shaledb_bench::db_bench::keygen::{make_key, ValueData};
use shaledb_bench::db_bench::workloads::Kind;
use shaledb_bench::engine::{Engine, EngineIter};
use shaledb_bench::reporting::report::scrape;
use shaledb_bench::{run_bench, Runner};

/// The flags of a tiny run: no progress bar, seed 42, 64 KiB memtables and files, then `args`.
pub fn flags(args: &[&str]) -> BenchFlags {
    let mut v = vec!["--progress=false", "--seed=42", "--write_buffer_size=65536", "--target_file_size_base=65536"];
    v.extend_from_slice(args);
    BenchFlags::parse_args(v).unwrap()
}

/// Runs the benchmarks `all` (comma-separated, fillseq first) with `--num=num` on 2 threads and the `extra`
/// flags on engine `E`: each benchmark's result line scrapes back with its operation count and a positive
/// rate, and the random reads find every key fillseq wrote and no missing one. Returns the output.
pub fn every_benchmark_runs<E: Engine>(all: &str, num: u64, extra: &[&str]) -> String {
    let (list, n) = (format!("--benchmarks={all}"), format!("--num={num}"));
    let args = [&[list.as_str(), n.as_str(), "--threads=2"][..], extra].concat();
    let mut out = Vec::new();
    run_bench::<E>(&flags(&args), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for name in all.split(',') {
        let kind = Kind::from_name(name).unwrap();
        if kind.is_meta() {
            continue;
        }
        let s = scrape(&text, name);
        let ops = s.operations.unwrap_or_else(|| panic!("no result line for {name}:\n{text}"));
        let expected = match kind {
            Kind::Compact => 1,
            // One synced write per 1000 keys, per thread.
            Kind::FillSync => 2 * (num / 1000),
            // The threads share fillingest's key space.
            Kind::FillIngest => num,
            _ => 2 * num,
        };
        assert_eq!(ops, expected, "{name}");
        assert!(s.ops_sec.unwrap() > 0.0, "{name}");
    }
    // fillseq wrote every key, so every random read finds one; a missing key is never found.
    let all_found = Some((2 * num, 2 * num));
    assert_eq!(scrape(&text, "readrandom").found, all_found);
    assert_eq!(scrape(&text, "readmissing").found, Some((0, 2 * num)));
    assert_eq!(scrape(&text, "multireadrandom").found, all_found);
    assert_eq!(scrape(&text, "seekrandom").found, all_found);
    assert!(text.contains("Percentiles: P50: "), "{text}");
    assert!(text.contains("** Compaction Stats"), "{text}");
    text
}

/// The value fillingest gives each key number below `n` with `per_file` keys per file and `threads` threads:
/// file `j` is written by thread `j % threads`, whose values are the next ones of its own pass over the
/// shared buffer.
fn ingested_values(n: u64, per_file: u64, threads: u64, f: &BenchFlags) -> Vec<Vec<u8>> {
    let data = ValueData::new(f.value_size, f.compression_ratio);
    let mut values = vec![Vec::new(); n as usize];
    for t in 0..threads {
        let mut g = data.generator();
        for run in (t..n.div_ceil(per_file)).step_by(threads as usize) {
            for k in run * per_file..((run + 1) * per_file).min(n) {
                values[k as usize] = g.generate(f.value_size).to_vec();
            }
        }
    }
    values
}

/// fillingest of 3000 keys from 3 threads in files of 700 keys: every key of the key space reads back with
/// the value its thread wrote, a scan sees exactly those keys, the result line counts 3000 operations and the
/// directory of the files is removed. `check` sees the database before it is closed. Returns the output.
pub fn fillingest_loads_every_key<E: Engine>(check: impl FnOnce(&E)) -> String {
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("db");
    let f = flags(&[
        "--benchmarks=fillingest",
        "--num=3000",
        "--threads=3",
        "--ingest_keys_per_file=700",
        &format!("--db={}", db_path.display()),
    ]);
    let mut out = Vec::new();
    let mut runner = Runner::<E>::open(f.clone(), &mut out).unwrap();
    runner.run_all().unwrap();
    let db = runner.db().unwrap();
    let want = ingested_values(3000, 700, 3, &f);
    let mut key = Vec::new();
    let mut got = Vec::new();
    for (k, v) in want.iter().enumerate() {
        make_key(k as u64, f.key_size, &mut key);
        assert!(db.get(&key, &mut got).unwrap(), "key {k} missing");
        assert_eq!(&got, v, "key {k}");
    }
    // Nothing else: a scan sees exactly the 3000 keys.
    let mut it = db.iter(None, None);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().unwrap();
    drop(it);
    assert_eq!(n, 3000);
    check(db);
    runner.close().unwrap();
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["db"], "the files' directory is removed");
    let text = String::from_utf8(out).unwrap();
    assert_eq!(scrape(&text, "fillingest").operations, Some(3000), "the threads share the key space:\n{text}");
    text
}
