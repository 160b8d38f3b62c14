//! End to end on ShaleDB with a tiny `--num`: every benchmark, both suites, JSON and plots; results read
//! back through the benchmark.sh scraper.

use shaledb_bench::db_bench::keygen::{make_key, ValueData};
use shaledb_bench::db_bench::random::Mt64;
use shaledb_bench::db_bench::suite::{run_suite, SuiteArgs, SuiteKind};
use shaledb_bench::db_bench::workloads::Kind;
use shaledb_bench::engine::shale::ShaleDb;
use shaledb_bench::engine::Engine;
use shaledb_bench::reporting::report::scrape;
use shaledb_bench::{run_bench, Runner};
use std::collections::HashMap;

#[path = "support/engines.rs"]
mod engines;
use engines::flags;

fn run(args: &[&str]) -> String {
    let mut out = Vec::new();
    run_bench::<ShaleDb>(&flags(args), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn every_benchmark_runs_and_its_line_scrapes_back() {
    let all = "fillseq,readrandom,multireadrandom,readmissing,readseq,readreverse,seekrandom,fillrandom,overwrite,readwhilewriting,\
deleteseq,deleterandom,updaterandom,readrandomwriterandom,filluniquerandom,fillsync,compact,flush,waitforcompaction,\
stats,levelstats,mergerandom";
    let extra = ["--seek_nexts=3", "--batch_size=8", "--histogram", "--merge_operator=put"];
    let text = engines::every_benchmark_runs::<ShaleDb>(all, 2000, &extra);
    for name in all.split(',').filter(|n| !Kind::from_name(n).unwrap().is_meta()) {
        assert!(scrape(&text, name).usecs_op.unwrap() > 0.0, "{name}");
    }
    assert!(text.contains("( updates:4000 found:"));
    assert!(text.contains("fillsync     : ") && text.contains("(2 ops)"));
}

/// db_bench's compact counts no operation, so its report says 1 operation taking the whole compaction and no
/// histogram follows it (a script reading the last `Percentiles:` line then gets the fill's, as with db_bench).
#[test]
fn compact_reports_one_operation_and_no_histogram() {
    let text = run(&["--benchmarks=fillrandom,compact", "--num=3000", "--histogram", "--subcompactions=4"]);
    let s = scrape(&text, "compact");
    assert_eq!(s.operations, Some(1), "{text}");
    assert!(s.usecs_op.unwrap() > 0.0, "{text}");
    let after = &text[text.find("compact      :").unwrap_or_else(|| panic!("no compact line:\n{text}"))..];
    assert!(!after.contains("Percentiles:"), "a histogram after compact's line:\n{after}");
    assert_eq!(text.matches("Percentiles:").count(), 1, "fillrandom's histogram only:\n{text}");
}

/// db_bench's multireadrandom: batches of `--batch_size` keys, each counted as a read; with
/// `--multiread_stride` the batch's keys are that far apart and a batch that would run past the key space is
/// moved back into it, so after fillseq every key is found.
#[test]
fn multireadrandom_reads_whole_batches_with_or_without_a_stride() {
    for (batch, stride) in [(1, 0), (10, 0), (10, 3), (7, 250)] {
        let text = run(&[
            "--benchmarks=fillseq,multireadrandom",
            "--num=2000",
            "--reads=700",
            &format!("--batch_size={batch}"),
            &format!("--multiread_stride={stride}"),
            "--statistics",
        ]);
        let s = scrape(&text, "multireadrandom");
        assert_eq!(s.operations, Some(700), "batch {batch} stride {stride}");
        assert_eq!(s.found, Some((700, 700)), "batch {batch} stride {stride}");
        let calls = text
            .lines()
            .rfind(|l| l.starts_with("rocksdb.db.multiget.micros "))
            .and_then(shaledb_bench::engine::HistogramLine::parse)
            .unwrap_or_else(|| panic!("no multiget histogram:\n{text}"));
        assert_eq!(calls.count, 700 / batch, "one MultiGet per batch");
    }
}

#[test]
fn fills_write_the_whole_key_space() {
    for fill in ["fillseq", "filluniquerandom"] {
        let text = run(&[&format!("--benchmarks={fill},readseq,readrandom"), "--num=3000"]);
        assert_eq!(scrape(&text, "readseq").operations, Some(3000), "{fill}");
        assert_eq!(scrape(&text, "readrandom").found, Some((3000, 3000)), "{fill}");
    }
    // fillrandom draws with repeats: about 1 - 1/e of the keys exist, and readrandom sees that fraction.
    let text = run(&["--benchmarks=fillrandom,readrandom", "--num=4000"]);
    let (found, n) = scrape(&text, "readrandom").found.unwrap();
    assert_eq!(n, 4000);
    assert!((2200..=2850).contains(&found), "{found}");
}

/// fillingest writes files of `--ingest_keys_per_file` keys and ingests each: every key of the key space reads
/// back with the value its thread wrote, the files land below L0, and the directory of the files is removed.
#[test]
fn fillingest_loads_every_key() {
    let text = engines::fillingest_loads_every_key::<ShaleDb>(|db| {
        // Five disjoint files (4 x 700 + 200), each in the deepest level, none in L0.
        let s = db.sample();
        assert_eq!(s.levels.first().map(|l| l.files), Some(0), "{:?}", s.levels);
        assert_eq!(s.levels.iter().map(|l| l.files).sum::<u64>(), 5, "{:?}", s.levels);
    });
    assert!(text.contains("(5 files of up to 700 keys)"), "{text}");
}

/// Keys whose order the key shape does not keep (prefixes) are sorted within each file; every key still reads
/// back, overlapping files included.
#[test]
fn fillingest_with_prefixed_keys_loads_every_key() {
    let text = run(&[
        "--benchmarks=fillingest,readrandom",
        "--num=2000",
        "--ingest_keys_per_file=300",
        "--prefix_size=8",
        "--keys_per_prefix=10",
    ]);
    assert_eq!(scrape(&text, "fillingest").operations, Some(2000), "{text}");
    assert_eq!(scrape(&text, "readrandom").found, Some((2000, 2000)), "{text}");
}

#[test]
fn mergerandom_counters_are_the_sums_of_their_operands() {
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("db");
    let f = flags(&[
        "--benchmarks=mergerandom",
        "--merge_operator=uint64add",
        "--value_size=8",
        "--num=300",
        "--writes=5000",
        "--disable_wal",
        &format!("--db={}", db_path.display()),
    ]);
    let mut out = Vec::new();
    let mut runner = Runner::<ShaleDb>::open(f.clone(), &mut out).unwrap();
    runner.run_all().unwrap();
    // Replay the thread's draws: its seed is --seed + 1 (first thread started), its values the shared buffer.
    let mut rng = Mt64::new(43);
    let data = ValueData::new(8, f.compression_ratio);
    let mut values = data.generator();
    let mut expected: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut key = Vec::new();
    for _ in 0..5000 {
        rng.next_u64(); // db_bench's database choice
        make_key(rng.next_u64() % 300, 16, &mut key);
        let v = u64::from_le_bytes(values.generate(8).try_into().unwrap());
        let e = expected.entry(key.clone()).or_default();
        *e = e.wrapping_add(v);
    }
    let db = runner.db().unwrap();
    db.flush().unwrap();
    let mut got = Vec::new();
    for (k, want) in &expected {
        assert!(db.get(k, &mut got).unwrap());
        assert_eq!(u64::from_le_bytes(got.as_slice().try_into().unwrap()), *want);
    }
    runner.close().unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("( updates:5000)"), "{text}");
}

#[test]
fn same_key_sequence_as_db_bench() {
    // RocksDB 7.8.3's db_bench with these flags prints `(12409 of 20000 found)`: the same seeds draw the
    // same keys.
    let text =
        run(&["--benchmarks=fillrandom,readrandom", "--num=20000", "--key_size=20", "--value_size=400", "--seed=1"]);
    assert_eq!(scrape(&text, "readrandom").found, Some((12409, 20000)), "{text}");
}

#[test]
fn use_existing_db_skips_fills_and_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    run(&["--benchmarks=fillseq", "--num=1000", &db]);
    let text = run(&["--benchmarks=fillrandom,readrandom", "--num=1000", "--use_existing_db", &db]);
    assert!(text.contains("fillrandom   : skipped (--use_existing_db is true)"));
    assert_eq!(scrape(&text, "readrandom").found, Some((1000, 1000)));
    assert!(dir.path().join("db").exists());
}

#[test]
fn json_and_plots_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let plots = dir.path().join("plots");
    run(&[
        "--benchmarks=fillrandom,readrandom,stats",
        "--num=5000",
        &format!("--json={}", json.display()),
        &format!("--plot={}", plots.display()),
    ]);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let benches = doc["benchmarks"].as_array().unwrap();
    assert_eq!(benches.len(), 2);
    assert_eq!(benches[1]["name"], "readrandom");
    assert_eq!(benches[1]["ops"], 5000);
    assert!(benches[1]["latency"]["p99"].as_f64().unwrap() > 0.0);
    assert!(!benches[0]["lsm"].as_array().unwrap().is_empty());
    for f in ["01-fillrandom.svg", "01-fillrandom.png", "02-readrandom.svg", "02-readrandom.png"] {
        let len = std::fs::metadata(plots.join(f)).unwrap().len();
        assert!(len > 5_000, "{f}: {len}");
    }
}

fn suite_args(kind: SuiteKind, num: u64) -> SuiteArgs {
    SuiteArgs {
        suite: kind,
        engine: vec![shaledb_bench::EngineKind::Shaledb],
        num_keys: Some(num),
        num_threads: Some(2),
        cache_size: Some(1 << 20),
        duration: Some(1),
        value_size: None,
        key_size: None,
        block_size: None,
        compression: None,
        mb_write_per_sec: Some(1),
        no_sync: Some(true),
        write_buffer_size: Some(256 << 10),
        target_file_size_base: Some(256 << 10),
        max_bytes_for_level_base: Some(1 << 20),
        max_background_jobs: None,
        seed: 7,
        db: None,
        use_existing_db: None,
        db_made_by_bench: false,
        json: None,
        plot: None,
        progress: false,
    }
}

#[test]
fn rocksdb_suite_prints_benchmark_sh_table() {
    let mut out = Vec::new();
    let r = run_suite::<ShaleDb>(&suite_args(SuiteKind::Rocksdb, 20_000), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let tests: Vec<&str> = r.rows.iter().map(|r| r.test.as_str()).collect();
    assert_eq!(tests, ["bulkload", "overwrite", "readwhilewriting", "readrandom"]);
    assert!(text.contains("Test | ops/sec | mb/sec | Size-GB | L0_GB | Sum_GB | W-Amp | W-MB/s | usec/op | p50 | p75 | p99 | p99.9 | p99.99 | Uptime | Stall-time | Stall% | du -s -k |"));
    assert!(text.contains("Complete bulkload in "));
    let bulk = &r.rows[0];
    assert!(bulk.ops_sec > 0 && bulk.l0_gb > 0.0 && bulk.du_k > 0, "{bulk:?}");
    // Keys written by the bulk load are all found afterwards (fillrandom covers ~63% of them).
    let rr = r.results.iter().find(|x| x.name == "readrandom").unwrap();
    assert!(rr.found > rr.reads / 2, "{} of {}", rr.found, rr.reads);
    for row in &r.rows {
        assert!(text.lines().any(|l| l.starts_with(&format!("{} | {} |", row.test, row.ops_sec))), "{text}");
    }
}

#[test]
fn merge_suite_reports_the_speedup() {
    let mut out = Vec::new();
    let mut a = suite_args(SuiteKind::Merge, 2_000);
    a.duration = Some(0);
    let r = run_suite::<ShaleDb>(&a, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(r.speedup.unwrap() > 0.0);
    assert_eq!(scrape(&text, "updaterandom").operations, Some(2000));
    assert_eq!(scrape(&text, "mergerandom").operations, Some(2000));
    assert!(text.contains("( updates:2000)") && text.contains("( updates:2000 found:"));
    assert!(text.contains("merge operator speed-up"));
}

#[path = "support/families.rs"]
mod families;

#[test]
fn column_families_hold_key_k_in_family_k_mod_n() {
    families::keys_live_in_family_k_mod_n::<ShaleDb>();
}

#[test]
fn mergerandom_with_column_families() {
    families::mergerandom_uses_every_family::<ShaleDb>();
}

#[test]
fn bad_column_family_flags_are_errors() {
    families::bad_family_flags_are_errors::<ShaleDb>();
}

#[test]
fn every_benchmark_runs_with_column_families() {
    families::every_family_benchmark_runs::<ShaleDb>();
}
