//! The insert benchmark end to end on tiny loads (ShaleDB alone, and both engines with the `rocksdb` feature):
//! every configuration and step is in the report with consistent counts, the flags are checked, and the
//! covering index scan the queries use returns index entries in order.

use super::*;
use crate::table_suites::table::{Row, Session, Value};
use crate::table_suites::test_support::{
    assert_common_flags, assert_refused, assert_rocksdb_needs_its_feature, parse_args,
};
use data::IiRand;

fn parse(args: &[&str]) -> std::result::Result<InsertArgs, String> {
    let a: InsertArgs = parse_args(args)?;
    a.validate().map_err(|e| e.to_string())?;
    Ok(a)
}

fn tiny(dir: &Path, engines: Vec<EngineKind>) -> InsertArgs {
    InsertArgs {
        engine: engines,
        rows: 3000,
        threads: vec![1, 3],
        pad: vec![16, 100],
        rows_per_commit: 70,
        report_interval: 0.05,
        query_insert_rates: vec![40, 400],
        query_threads: 2,
        query_duration: 0.4,
        rows_per_query: 10,
        query_configs: QueryConfigs::First,
        cache_size: 1 << 20,
        sync: false,
        common: SuiteFlags {
            db: Some(dir.join("db")),
            use_existing_db: None,
            progress: false,
            use_direct_reads: false,
            json: Some(dir.join("insert.json")),
            plot: Some(dir.join("plots")),
            seed: 11,
        },
    }
}

/// Runs the tiny suite and checks the report, the JSON and the plots.
fn tiny_run(engines: Vec<EngineKind>) {
    let dir = tempfile::tempdir().unwrap();
    let a = tiny(dir.path(), engines.clone());
    let mut out = Vec::new();
    let rep = run_insert(&a, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(rep.configs.len(), 4, "2 pads x 2 thread counts");
    let labels: Vec<String> = rep.configs.iter().map(|c| c.label()).collect();
    assert_eq!(labels, ["t1/pad16", "t3/pad16", "t1/pad100", "t3/pad100"]);
    for (ci, c) in rep.configs.iter().enumerate() {
        assert_eq!(c.runs.len(), engines.len());
        assert_eq!(c.load_ratio.is_some(), engines.len() == 2, "{}", c.label());
        for (run, kind) in c.runs.iter().zip(&engines) {
            assert_eq!(run.engine, kind.flag_name());
            let l = &run.load;
            assert_eq!(l.rows, 3000);
            assert!(l.rows_per_sec > 0.0 && l.seconds > 0.0);
            assert!(!l.intervals.is_empty(), "{}: no insert-rate samples", c.label());
            assert!(l.intervals.windows(2).all(|w| w[0].t < w[1].t && w[0].rows <= w[1].rows));
            assert!(l.intervals.last().unwrap().rows <= 3000);
            // Every row is one batch entry for its PK record and one per index, in batches of 70 rows.
            assert_eq!(l.session.entries, 4 * 3000);
            assert!(l.session.batches >= 3000 / 70 && l.session.batches <= 3000 / 70 + c.threads as u64);
            // One uniqueness check (point read) per row, no read of any index.
            assert_eq!(l.session.gets, 3000);
            assert_eq!((l.session.seeks, l.session.nexts), (0, 0));
            assert_eq!(l.cost.rows, 3000);
            assert_eq!(l.cost.logical_bytes, l.session.bytes_written);
            assert!(l.cost.logical_bytes > 3000 * (c.pad as u64 + 4 * 12));
            assert!(l.cost.write_amp.unwrap() >= 0.0);
            assert!(l.cost.cpu_us_per_row.is_some());
            assert!(l.cost.db_bytes > 0);
            let sizes: Vec<(&str, u64)> = l.index_sizes.iter().map(|s| (s.name.as_str(), s.entries)).collect();
            assert_eq!(sizes, [("PRIMARY", 3000), ("marketsegment", 3000), ("registersegment", 3000), ("pdc", 3000)]);
            assert!(l.index_sizes.iter().all(|s| s.bytes > 3000 * 12));
            if ci == 0 {
                assert_eq!(run.queries.len(), 2, "query steps after the first configuration only");
                for (q, rate) in run.queries.iter().zip([40u64, 400]) {
                    assert_eq!(q.name, format!("q.{rate}"));
                    assert_eq!(q.target_rate, rate);
                    assert!(q.queries > 0 && q.queries_per_index.iter().all(|&n| n > 0), "{q:?}");
                    assert_eq!(q.queries, q.queries_per_index.iter().sum::<u64>());
                    assert!(q.rows_read <= q.queries * 10 && q.rows_read > 0);
                    assert!(q.qps > 0.0);
                    assert_eq!(q.query_session.seeks, q.queries, "one seek per query");
                    assert_eq!(q.query_session.gets, 0, "covering: no point read of a row");
                    assert!(q.rows_inserted > 0);
                    assert_eq!(q.inserter_session.entries, 4 * q.rows_inserted);
                    assert_eq!(q.kept_rate, report::kept_rate(q.insert_rate, rate));
                    assert!(q.read_bytes_per_query.is_some() == q.cost.process.read_bytes.is_some());
                    assert!(q.cost.db_bytes > 0);
                }
                let inserted: u64 = run.queries.iter().map(|q| q.rows_inserted).sum();
                assert_eq!(run.rows_end, 3000 + inserted);
                let last = run.queries.last().unwrap();
                assert!(last.index_sizes.iter().all(|s| s.entries == run.rows_end), "{:?}", last.index_sizes);
            } else {
                assert!(run.queries.is_empty());
                assert_eq!(run.rows_end, 3000);
            }
            assert!(run.db_bytes_end > 0);
        }
    }
    assert!(text.contains("concurrency") && text.contains("shaledb.sz100"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("insert.json")).unwrap()).unwrap();
    assert_eq!(json["configs"].as_array().unwrap().len(), 4);
    assert_eq!(json["seed"], 11);
    assert!(!json["configs"][0]["runs"][0]["load"]["intervals"].as_array().unwrap().is_empty());
    let plots = std::fs::read_dir(dir.path().join("plots")).unwrap().count();
    assert_eq!(plots, 2 * (4 + 1));
    assert!(!dir.path().join("db").join("shaledb").exists(), "databases are removed");
}

#[test]
fn tiny_run_on_shaledb() {
    tiny_run(vec![EngineKind::Shaledb]);
}

#[cfg(feature = "rocksdb")]
#[test]
fn tiny_run_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    tiny_run(vec![EngineKind::Shaledb, EngineKind::Rocksdb]);
    // Both engines draw the same numbers: the same rows land in the same index ranges, so with one inserter
    // thread the logical bytes inserted are equal.
    let mut a = tiny(dir.path(), vec![EngineKind::Shaledb, EngineKind::Rocksdb]);
    (a.threads, a.pad, a.query_configs, a.common.plot, a.common.json) =
        (vec![1], vec![40], QueryConfigs::None, None, None);
    let rep = run_insert(&a, &mut Vec::new()).unwrap();
    let runs = &rep.configs[0].runs;
    assert_eq!(runs[0].load.cost.logical_bytes, runs[1].load.cost.logical_bytes);
    assert_eq!(runs[0].load.index_sizes, runs[1].load.index_sizes);
}

#[test]
fn defaults() {
    let a = parse(&[]).unwrap();
    assert_eq!(a.rows, 500_000);
    assert_eq!(a.threads, [1, 2, 4, 8]);
    assert_eq!(a.pad, [16, 64, 256, 1024]);
    assert_eq!(a.rows_per_commit, 1000);
    assert_eq!(a.query_insert_rates, [100, 500, 1000]);
    assert_eq!(a.query_configs, QueryConfigs::First);
    assert_eq!((a.query_threads, a.rows_per_query), (2, 10));
    assert_eq!(a.cache_size, 16 << 20);
    assert!(a.common.use_direct_reads && !a.sync);
    let want: &[EngineKind] =
        if cfg!(feature = "rocksdb") { &[EngineKind::Shaledb, EngineKind::Rocksdb] } else { &[EngineKind::Shaledb] };
    assert_eq!(a.engine, want);
    assert!(a.queries_after(0) && !a.queries_after(1));
    let f = engine_flags(&a, Path::new("/x"));
    f.validate().unwrap();
    assert_eq!((f.block_size, f.bloom_bits, f.write_buffer_size), (16 << 10, 10.0, 64 << 20));
    assert!(f.level_compaction_dynamic_level_bytes && f.use_direct_reads && !f.sync);
    assert_eq!(f.compression_per_level, "none:none:snappy:snappy:snappy:snappy:snappy");
    assert_eq!(f.compression_levels().unwrap().len(), f.num_levels);
    let s = parse(&["--sync", "--use_direct_reads=0", "--query_configs", "all"]).unwrap();
    assert!(s.write_mode().sync && !s.write_mode().disable_wal && s.queries_after(5));
    assert!(engine_flags(&s, Path::new("/x")).sync);
}

#[test]
fn bad_flags_name_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--rows", "0"][..], "--rows"),
        (&["--threads", "0"][..], "--threads"),
        (&["--threads", "1,2000"][..], "--threads"),
        (&["--pad", "70000"][..], "--pad"),
        (&["--rows_per_commit", "0"][..], "--rows_per_commit"),
        (&["--report_interval", "0"][..], "--report_interval"),
        (&["--report_interval", "nan"][..], "--report_interval"),
        (&["--query_insert_rates", "100,0"][..], "--query_insert_rates"),
        (&["--query_threads", "0"][..], "--query_threads"),
        (&["--duration", "-1"][..], "--duration"),
        (&["--query_duration", "-1"][..], "--duration"),
        (&["--rows_per_query", "0"][..], "--rows_per_query"),
        (&["--cache_size", "0"][..], "--cache_size"),
        (&["--engine", "shaledb,shaledb"][..], "--engine"),
        (&["--query_configs", "some"][..], "--query_configs"),
        (&["--threads", "x"][..], "--threads"),
    ];
    assert_refused(parse, cases);
    assert_rocksdb_needs_its_feature(parse);
}

#[test]
fn covering_scan_reads_index_entries_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let a = tiny(dir.path(), vec![EngineKind::Shaledb]);
    let engine = crate::engine::shale::ShaleDb::open(&dir.path().join("db"), &engine_flags(&a, &dir.path().join("db")))
        .expect("open");
    let t = Table::new(data::purchases_def(8)).unwrap();
    let mut s = Session::new(&engine, WriteMode::default());
    let mut r = IiRand::new(3);
    let rows: Vec<Row> = (1..=500)
        .map(|id| {
            let mut row = Row::new();
            r.fill_row(&mut row, id, data::EPOCH_BASE, 8);
            row
        })
        .collect();
    assert_eq!(s.insert_many(&t, &rows).unwrap(), 500);
    let int = |v: &Value| match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    };
    // registersegment from cashregisterid 500: (cashregisterid, price, customerid, transactionid) ascending.
    let mut seen: Vec<Vec<i64>> = Vec::new();
    let n = s
        .scan_index(&t, 1, &[Value::Int(500)], &mut |e| {
            seen.push(e.iter().map(int).collect());
            seen.len() < 10
        })
        .unwrap();
    assert_eq!(n, 10);
    assert!(seen.iter().all(|e| e.len() == 4 && e[0] >= 500), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    let mut want: Vec<Vec<i64>> = rows
        .iter()
        .map(|row| {
            [data::COL_CASHREGISTERID, data::COL_PRICE, data::COL_CUSTOMERID, data::COL_TRANSACTIONID]
                .iter()
                .map(|&c| int(&row[c]))
                .collect::<Vec<i64>>()
        })
        .filter(|e| e[0] >= 500)
        .collect();
    want.sort();
    assert_eq!(seen, want[..10]);
    // The whole index from the start, and a start past its end.
    assert_eq!(s.scan_index(&t, 0, &[Value::Int(0)], &mut |_| true).unwrap(), 500);
    assert_eq!(s.scan_index(&t, 2, &[Value::Int(data::MAX_PRICE_CENTS + 1)], &mut |_| true).unwrap(), 0);
    assert_eq!(s.stats().gets, 500, "only the inserts' uniqueness checks read rows");
    assert!(s.scan_index(&t, 3, &[Value::Int(0)], &mut |_| true).is_err());
    for i in [None, Some(0), Some(1), Some(2)] {
        let (n, bytes) = s.index_extent(&t, i).unwrap();
        assert_eq!(n, 500, "{i:?}");
        assert!(bytes >= 500 * 16, "{i:?}");
    }
    engine.close().unwrap();
}

/// `--progress[=BOOL]` and `--use_existing_db[=BOOL]` parse as `shaledb bench` parses them.
#[test]
fn progress_and_use_existing_db_parse_as_bench_flags() {
    assert_common_flags(parse, |a| &a.common);
}
