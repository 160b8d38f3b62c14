//! Flag handling, option scaling, and tiny runs of the whole suite on every engine of the build.

use super::report::WRITER_KEPT_SHARE;
use super::steps::{Kind, SEED_ORDER};
use super::*;
use crate::table_suites::test_support::{
    assert_common_flags, assert_refused, assert_rocksdb_needs_its_feature, parse_args,
};

fn args(list: &[&str]) -> std::result::Result<ForestdbArgs, String> {
    parse_args(list)
}

fn plan(list: &[&str]) -> std::result::Result<Plan, String> {
    args(list)?.plan().map_err(|e| e.to_string())
}

#[test]
fn defaults() {
    let a = args(&[]).unwrap();
    let p = a.plan().unwrap();
    assert_eq!(a.docs, 2_000_000);
    assert_eq!((a.duration, a.warmup), (15.0, 5.0));
    assert_eq!((a.load_batch, a.writer_rate, a.range_len), (4096, 1000.0, 20));
    assert!(a.common.use_direct_reads && a.writer_sync);
    assert!(!args(&["--writer_sync=0"]).unwrap().writer_sync);
    assert_eq!(p.threads, default_threads());
    assert!(p.threads >= 2);
    assert_eq!(p.steps.len(), 13);
    assert_eq!(
        p.steps.iter().map(|s| s.name).collect::<Vec<_>>(),
        SEED_ORDER.iter().map(|s| s.name).collect::<Vec<_>>()
    );
    let logical = 2_000_000 * docs::DOC_BYTES;
    assert_eq!(p.logical_bytes, logical);
    assert_eq!(p.variants, vec![(Variant::Cached, 2 * logical), (Variant::Iobound, logical / 4)]);
    let expect: Vec<EngineKind> = if cfg!(feature = "rocksdb") {
        vec![EngineKind::Rocksdb, EngineKind::Shaledb]
    } else {
        vec![EngineKind::Shaledb]
    };
    assert_eq!(p.engines, expect);
}

#[test]
fn steps_keep_the_seed_order_and_need_the_load() {
    let p = plan(&["--steps", "pq.1,load,ows.1"]).unwrap();
    assert_eq!(p.steps.iter().map(|s| s.name).collect::<Vec<_>>(), ["load", "ows.1", "pq.1"]);
    let e = plan(&["--steps", "pq.1"]).unwrap_err();
    assert!(e.contains("--steps") && e.contains("load"), "{e}");
    // The seed's names and kinds.
    let by = |n: &str| SEED_ORDER.iter().find(|s| s.name == n).copied().unwrap();
    assert_eq!(by("ows.n").kind, Kind::Overwrite { sync: true });
    assert_eq!(by("owa.1").kind, Kind::Overwrite { sync: false });
    assert!(by("pqw.n").writer && by("pqw.n").many && !by("pq.1").writer && !by("rq.1").many);
    assert_eq!(by("rqw.1").kind, Kind::Range);
}

#[test]
fn bad_flags_name_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--docs", "0"][..], "--docs"),
        (&["--threads", "0"][..], "--threads"),
        (&["--duration", "0"][..], "--duration"),
        (&["--duration", "nan"][..], "--duration"),
        (&["--warmup", "-1"][..], "--warmup"),
        (&["--load_batch", "0"][..], "--load_batch"),
        (&["--writer_rate", "0"][..], "--writer_rate"),
        (&["--range_len", "0"][..], "--range_len"),
        (&["--steps", "load,bogus"][..], "bogus"),
        (&["--variant", "cached,cached"][..], "--variant"),
        (&["--variant", "hot"][..], "--variant"),
        (&["--engine", "shaledb,shaledb"][..], "--engine"),
        (&["--cache_size", "1000000"][..], "--cache_size"),
        (&["--cache_size", "0", "--variant", "cached"][..], "--cache_size"),
    ];
    assert_refused(plan, cases);
    let p = plan(&["--cache_size", "1000000,2000000", "--threads", "3"]).unwrap();
    assert_eq!(p.variants, vec![(Variant::Cached, 1_000_000), (Variant::Iobound, 2_000_000)]);
    assert_eq!(p.threads, 3);
    assert_rocksdb_needs_its_feature(plan);
}

#[test]
fn engine_options_are_the_seeds_scaled_to_the_docs() {
    // From 4 GiB of documents: the seed's values.
    assert_eq!(scaled_lsm_sizes(4 << 30), (64 << 20, 512 << 20, 32 << 20));
    assert_eq!(scaled_lsm_sizes(1 << 40), (64 << 20, 512 << 20, 32 << 20));
    // Smaller: 1/64 of the logical size with the seed's proportions, never below 256 KiB.
    assert_eq!(scaled_lsm_sizes(1 << 30), (16 << 20, 128 << 20, 8 << 20));
    assert_eq!(scaled_lsm_sizes(1000), (256 << 10, 2 << 20, 128 << 10));
    let a = args(&["--docs", "2000000"]).unwrap();
    let p = a.plan().unwrap();
    let path = Path::new("/x");
    let c = engine_flags(&p, &a, Variant::Cached, 1 << 30, path);
    c.validate().unwrap();
    assert_eq!((c.block_size, c.bloom_bits, c.cache_size), (8192, 10.0, 1 << 30));
    assert!(c.level_compaction_dynamic_level_bytes && !c.use_direct_reads);
    assert_eq!((c.level0_slowdown_writes_trigger, c.level0_stop_writes_trigger), (12, 16));
    assert_eq!(c.compression_type, "snappy");
    assert!(c.compression_per_level.is_empty() && c.bottommost_compression.is_empty());
    let (wb, base, file) = scaled_lsm_sizes(p.logical_bytes);
    assert_eq!((c.write_buffer_size as u64, c.max_bytes_for_level_base, c.target_file_size_base), (wb, base, file));
    let i = engine_flags(&p, &a, Variant::Iobound, 1 << 20, path);
    assert!(i.use_direct_reads);
    let a0 = args(&["--use_direct_reads=0"]).unwrap();
    assert!(!engine_flags(&p, &a0, Variant::Iobound, 1 << 20, path).use_direct_reads);
}

/// Runs the suite tiny and checks what the report must hold.
fn tiny_run(engines: &str) -> (ForestdbReport, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let plots = dir.path().join("plots");
    let db = dir.path().join("db");
    let a = args(&[
        "--engine",
        engines,
        "--docs",
        "3000",
        "--threads",
        "2",
        "--duration",
        "0.25",
        "--warmup",
        "0.05",
        "--load_batch",
        "500",
        "--writer_rate",
        "200",
        "--range_len",
        "5",
        // O_DIRECT is not available on every test machine's temporary directory (tmpfs).
        "--use_direct_reads=0",
        "--seed",
        "7",
        "--db",
        db.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ])
    .unwrap();
    let mut out = Vec::new();
    let r = run_forestdb(&a, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let n_engines = engines.split(',').count();
    assert_eq!(r.variants.len(), 2);
    assert_eq!(r.seed, 7);
    for v in &r.variants {
        assert_eq!(v.runs.len(), n_engines, "{text}");
        for run in &v.runs {
            let mut writer_writes = 0;
            let mut run_ops = 0;
            let names: Vec<&str> = run.steps.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(names, SEED_ORDER.iter().map(|s| s.name).collect::<Vec<_>>());
            for (s, spec) in run.steps.iter().zip(SEED_ORDER.iter()) {
                let ctx = format!("{} {} {}", v.variant, run.name, s.name);
                assert!(s.db_bytes > 0, "{ctx}");
                // A 0.25 s window of a debug build on a busy machine may see no fsynced write complete, so
                // the count is checked for consistency here and for progress over the run below.
                assert!(s.seconds > 0.0, "{ctx}");
                run_ops += s.ops;
                assert_eq!(s.missing, 0, "{ctx}");
                assert_eq!(s.p99_us.is_some(), s.queries > 0, "{ctx}");
                assert_eq!(s.threads, if spec.kind == Kind::Load || spec.many { 2 } else { 1 }, "{ctx}");
                match spec.kind {
                    Kind::Load => assert_eq!((s.ops, s.queries), (3000, 3000), "{ctx}"),
                    // 5 documents after each seek, fewer only at the end of the key space.
                    Kind::Range => assert!(s.ops <= 5 * s.queries && s.ops >= 4 * s.queries, "{ctx}"),
                    _ => assert_eq!(s.ops, s.queries, "{ctx}"),
                }
                if spec.kind != Kind::Load {
                    assert!((s.seconds - 0.25).abs() < 1e-9, "{ctx}: {}", s.seconds);
                    assert!((s.ops_per_sec - s.ops as f64 / s.seconds).abs() < 1e-6 * s.ops_per_sec.max(1.0));
                }
                match (&s.writer, spec.writer) {
                    (Some(w), true) => {
                        assert_eq!(w.target, 200.0);
                        writer_writes += w.writes;
                        assert!((w.rate - w.writes as f64 / s.seconds).abs() < 1e-6, "{ctx}");
                        assert_eq!(w.kept, w.rate >= WRITER_KEPT_SHARE * 200.0, "{ctx}");
                    }
                    (None, false) => {}
                    (w, _) => panic!("{ctx}: writer {w:?}"),
                }
            }
            // The writer may be starved in one short window of a debug build, not in all four.
            assert!(writer_writes > 0, "{} {}", v.variant, run.name);
            assert!(run_ops > 3000, "{} {}", v.variant, run.name);
        }
    }
    // The text has the seed's table per variant, the JSON every figure, the plot directory its charts.
    assert!(text.contains("variant cached") && text.contains("variant iobound"), "{text}");
    assert!(text.contains("owa.n") && text.contains("kept 200"), "{text}");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["variants"].as_array().unwrap().len(), 2);
    assert_eq!(j["variants"][0]["runs"][0]["steps"].as_array().unwrap().len(), 13);
    assert_eq!(std::fs::read_dir(&plots).unwrap().count(), 8);
    // Each engine's database is removed after its run.
    assert_eq!(std::fs::read_dir(&db).unwrap().count(), 0);
    (r, text)
}

#[test]
fn tiny_run_on_shaledb() {
    let (r, text) = tiny_run("shaledb");
    assert_eq!(r.variants[0].runs[0].name, "ShaleDB");
    assert!(!text.contains("S/R"), "{text}");
}

#[cfg(feature = "rocksdb")]
#[test]
fn tiny_run_on_both_engines() {
    let (r, text) = tiny_run("shaledb,rocksdb");
    for v in &r.variants {
        assert_eq!(v.runs[0].name, "ShaleDB");
        assert_eq!(v.runs[1].name, "RocksDB");
        for s in SEED_ORDER.iter() {
            assert!(v.ratio(s.name, |x| x.ops_per_sec).is_some(), "{}", s.name);
            assert!(v.ratio(s.name, |x| x.db_bytes as f64).is_some(), "{}", s.name);
        }
    }
    assert!(text.contains("RocksDB op/s") && text.contains("ShaleDB op/s") && text.contains("size S/R"), "{text}");
}

/// `--progress[=BOOL]` and `--use_existing_db[=BOOL]` parse as `shaledb bench` parses them.
#[test]
fn progress_and_use_existing_db_parse_as_bench_flags() {
    assert_common_flags(args, |a| &a.common);
}
