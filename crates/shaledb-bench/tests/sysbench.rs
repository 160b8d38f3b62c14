//! The sysbench suite end to end on tiny tables: every test runs and reports, the JSON has every figure, the
//! loaded rows look like sysbench's, and (with the `rocksdb` feature) the same run on RocksDB.

use shaledb_bench::engine::shale::ShaleDb;
use shaledb_bench::engine::{Engine, EngineKind};
use shaledb_bench::table_suites::harness::SuiteFlags;
use shaledb_bench::table_suites::sysbench::data::{sbtest_def, COL_C, COL_ID, COL_K, COL_PAD};
use shaledb_bench::table_suites::sysbench::workload::SEED_ORDER;
use shaledb_bench::table_suites::sysbench::{engine_flags, load, run_sysbench, CompressionSetting, SysbenchArgs};
use shaledb_bench::table_suites::table::{Row, Session, Table, Value};
use shaledb_bench::WriteMode;
use std::path::Path;

// The table layer removes secondary index entries with ShaleDB's own SingleDelete (issue 16), as on RocksDB.
const _: () = assert!(<ShaleDb as Engine>::HAS_SINGLE_DELETE);

fn args(dir: &Path, engines: Vec<EngineKind>) -> SysbenchArgs {
    SysbenchArgs {
        engine: engines,
        tables: 2,
        table_size: 2000,
        threads: vec![1, 2],
        duration: 0.3,
        compression: vec![CompressionSetting::None, CompressionSetting::Lz4Zstd],
        cache_size: 1 << 20,
        cache_index_and_filter_blocks: true,
        readahead_size: 256 << 10,
        tests: vec![],
        random_points: 100,
        common: SuiteFlags {
            db: Some(dir.join("db")),
            use_existing_db: None,
            progress: false,
            use_direct_reads: false,
            json: Some(dir.join("sb.json")),
            plot: Some(dir.join("plots")),
            seed: 7,
        },
        report_interval: 0.1,
    }
}

/// Runs the tiny suite and checks its JSON: 4 configurations, every test of the seed on every engine with a
/// positive figure, the load of 2 x 2000 rows, the scans' row counts.
fn tiny_run(engines: Vec<EngineKind>) {
    let dir = tempfile::tempdir().unwrap();
    let a = args(dir.path(), engines.clone());
    let mut out = Vec::new();
    run_sysbench(&a, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("sb.json")).unwrap()).unwrap();
    let configs = json["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 4, "2 compressions x 2 thread counts");
    for c in configs {
        let runs = c["runs"].as_array().unwrap();
        assert_eq!(runs.len(), engines.len());
        for run in runs {
            assert_eq!(run["load"]["rows"], 4000);
            assert!(run["load"]["rows_per_sec"].as_f64().unwrap() > 0.0);
            assert!(run["db_bytes_after_load"].as_u64().unwrap() > 0);
            let tests = run["tests"].as_array().unwrap();
            let names: Vec<&str> = tests.iter().map(|t| t["name"].as_str().unwrap()).collect();
            assert_eq!(names, SEED_ORDER.iter().map(|t| t.name).collect::<Vec<_>>());
            for t in tests {
                let name = t["name"].as_str().unwrap();
                assert!(t["value"].as_f64().unwrap() > 0.0, "{name}: {t}");
                assert!(t["ops"].as_u64().unwrap() > 0, "{name}");
                if name.starts_with("scan") {
                    assert_eq!(t["unit"], "Mrps");
                    assert_eq!(t["threads"], 2, "one scanner per table");
                } else {
                    assert_eq!(t["unit"], "QPS");
                    assert_eq!(t["threads"], c["threads"]);
                    assert!(t["cpu_us_per_op"].as_f64().is_some(), "{name}");
                }
                if name.starts_with("read-write") {
                    assert_eq!(t["statements"].as_u64().unwrap(), 20 * t["events"].as_u64().unwrap(), "{name}");
                }
                if name.starts_with("read-only") {
                    assert_eq!(t["statements"].as_u64().unwrap(), 16 * t["events"].as_u64().unwrap(), "{name}");
                }
            }
            let rows = |n: &str| tests.iter().find(|t| t["name"] == n).unwrap()["rows"].as_u64().unwrap();
            // Before the writes the scans read every row; after the deletes fewer remain (read-write re-inserts
            // what it deletes; the inserts come after the last scan).
            assert_eq!(rows("scan.pre"), 4000);
            assert_eq!(rows("scan.ra.pre"), 4000);
            assert!(rows("scan") < 4000 && rows("scan") == rows("scan.ra"), "{} {}", rows("scan"), rows("scan.ra"));
        }
        if engines.len() == 2 {
            assert_eq!(c["ratios"].as_array().unwrap().len(), SEED_ORDER.len() + 1);
        }
    }
    assert!(text.contains("===== summary ====="), "{text}");
    assert!(text.contains("update-inlist") && text.contains("Mrps"), "{text}");
    assert!(text.contains("the database is") && text.contains("cache"), "{text}");
    let plots = std::fs::read_dir(dir.path().join("plots")).unwrap().count();
    assert_eq!(plots, 8, "an SVG and a PNG per configuration");
    // The databases are removed after each run.
    assert!(std::fs::read_dir(dir.path().join("db")).unwrap().all(|e| {
        let p = e.unwrap().path();
        std::fs::read_dir(&p).map(|mut d| d.next().is_none()).unwrap_or(true)
    }));
}

#[test]
fn tiny_suite_on_shaledb() {
    tiny_run(vec![EngineKind::Shaledb]);
}

#[cfg(feature = "rocksdb")]
#[test]
fn tiny_suite_on_both_engines() {
    tiny_run(vec![EngineKind::Shaledb, EngineKind::Rocksdb]);
}

fn is_groups(s: &[u8], groups: usize) -> bool {
    let parts: Vec<&[u8]> = s.split(|b| *b == b'-').collect();
    parts.len() == groups && parts.iter().all(|p| p.len() == 11 && p.iter().all(u8::is_ascii_digit))
}

/// CHAR(n) values may come back padded with spaces; MySQL strips them on read.
fn trimmed(v: &Value) -> &[u8] {
    match v {
        Value::Str(s) => {
            let end = s.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
            &s[..end]
        }
        other => panic!("not a string: {other:?}"),
    }
}

#[test]
fn loaded_rows_look_like_sysbench() {
    let dir = tempfile::tempdir().unwrap();
    let a = args(dir.path(), vec![EngineKind::Shaledb]);
    let path = dir.path().join("direct");
    let f = engine_flags(&a, CompressionSetting::None, &path, false);
    let db = ShaleDb::open(&path, &f).unwrap();
    let tables = vec![Table::new(sbtest_def(1)).unwrap(), Table::new(sbtest_def(2)).unwrap()];
    let mut out = Vec::new();
    assert_eq!(load(&db, &tables, 500, 3, &mut out).unwrap(), 1000);
    let mut s = Session::new(&db, WriteMode::default());
    let mut row: Row = Vec::new();
    let mut ks = std::collections::BTreeSet::new();
    for t in &tables {
        for id in 1..=500 {
            assert!(s.get(t, &[Value::Int(id)], &mut row).unwrap(), "{} id {id}", t.def().name);
            assert_eq!(row[COL_ID], Value::Int(id));
            let Value::Int(k) = row[COL_K] else { panic!("{:?}", row[COL_K]) };
            assert!((1..=500).contains(&k));
            ks.insert(k);
            let c = trimmed(&row[COL_C]);
            let pad = trimmed(&row[COL_PAD]);
            assert_eq!((c.len(), pad.len()), (119, 59));
            assert!(is_groups(c, 10) && is_groups(pad, 5), "{}", String::from_utf8_lossy(c));
            // The secondary index finds the row by its k.
            let mut found = false;
            s.lookup(t, 0, &[Value::Int(k)], &mut |r| {
                found |= r[COL_ID] == Value::Int(id);
                true
            })
            .unwrap();
            assert!(found, "k_{} misses id {id}", t.def().name);
        }
        assert!(!s.get(t, &[Value::Int(501)], &mut row).unwrap());
    }
    assert!(ks.len() > 250, "k is random in 1..=table_size: {} distinct", ks.len());
    // Both tables got the rows their seed gives: reloading elsewhere gives identical rows.
    let path2 = dir.path().join("again");
    let db2 = ShaleDb::open(&path2, &engine_flags(&a, CompressionSetting::None, &path2, false)).unwrap();
    load(&db2, &tables, 500, 3, &mut out).unwrap();
    let mut s2 = Session::new(&db2, WriteMode::default());
    let mut row2: Row = Vec::new();
    for id in [1, 250, 500] {
        s.get(&tables[1], &[Value::Int(id)], &mut row).unwrap();
        s2.get(&tables[1], &[Value::Int(id)], &mut row2).unwrap();
        assert_eq!(row, row2);
    }
}

#[test]
fn direct_reads_work_or_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = args(dir.path(), vec![EngineKind::Shaledb]);
    a.common.use_direct_reads = true;
    a.threads = vec![1];
    a.compression = vec![CompressionSetting::None];
    a.tests = vec!["point-query.pre".into()];
    a.table_size = 200;
    a.common.json = None;
    a.common.plot = None;
    let mut out = Vec::new();
    match run_sysbench(&a, &mut out) {
        Ok(r) => assert!(r.configs[0].runs[0].tests[0].value > 0.0),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("--use_direct_reads=0"), "{msg}");
        }
    }
}
