//! `--num_column_families` on any engine: the checks e2e.rs (ShaleDB) and rocks.rs (RocksDB) run.

use shaledb_bench::db_bench::flags::BenchFlags;
use shaledb_bench::db_bench::keygen::make_key;
use shaledb_bench::engine::{column_family_name, Engine};
use shaledb_bench::reporting::report::scrape;
use shaledb_bench::{BenchError, Runner};

fn flags(db: &std::path::Path, args: &[&str]) -> BenchFlags {
    let mut v = vec![
        "--progress=false".to_string(),
        "--seed=42".to_string(),
        "--write_buffer_size=65536".to_string(),
        "--target_file_size_base=65536".to_string(),
        format!("--db={}", db.display()),
    ];
    v.extend(args.iter().map(|a| a.to_string()));
    BenchFlags::parse_args(v).unwrap()
}

/// Runs `args` on engine `E`, then calls `check` with the database still open.
fn run_then<E: Engine>(args: &[&str], check: impl FnOnce(&E, &BenchFlags)) {
    let dir = tempfile::tempdir().unwrap();
    let f = flags(&dir.path().join("db"), args);
    let mut out = Vec::new();
    let mut runner = Runner::<E>::open(f.clone(), &mut out).unwrap();
    runner.run_all().unwrap();
    check(runner.db().unwrap(), &f);
    runner.close().unwrap();
}

/// The families each key number below `num` is found in.
fn homes<E: Engine>(db: &E, f: &BenchFlags) -> Vec<Vec<usize>> {
    let (mut key, mut v) = (Vec::new(), Vec::new());
    (0..f.num as u64)
        .map(|k| {
            make_key(k, f.key_size, &mut key);
            (0..db.num_families()).filter(|&cf| db.get_cf(cf, &key, &mut v).unwrap()).collect()
        })
        .collect()
}

/// fillseq puts key number k in family k % 3 and nowhere else; readrandom finds every key; fillrandom fills
/// every family; deleteseq removes every key from its family.
pub fn keys_live_in_family_k_mod_n<E: Engine>() {
    run_then::<E>(&["--benchmarks=fillseq,flush", "--num=3000", "--num_column_families=3"], |db, f| {
        assert_eq!(db.num_families(), 3);
        for (k, h) in homes(db, f).into_iter().enumerate() {
            assert_eq!(h, [k % 3], "key {k}");
        }
        // The sample's LSM shape counts every family's tables.
        let int = |cf: usize, name: &str| db.property_cf(cf, name).unwrap().trim().parse::<u64>().unwrap();
        let bytes: u64 = (0..3).map(|cf| int(cf, "rocksdb.live-sst-files-size")).sum();
        let files: u64 = (0..3)
            .flat_map(|cf| (0..f.num_levels).map(move |l| (cf, l)))
            .map(|(cf, l)| int(cf, &format!("rocksdb.num-files-at-level{l}")))
            .sum();
        let s = db.sample();
        assert!(files >= 3 && (0..3).all(|cf| int(cf, "rocksdb.live-sst-files-size") > 0), "{files}");
        assert_eq!(s.levels.iter().map(|l| l.files).sum::<u64>(), files, "{:?}", s.levels);
        assert_eq!(s.total_bytes(), bytes, "{:?}", s.levels);
    });
    let text = run_text::<E>(&[
        "--benchmarks=fillseq,readrandom,multireadrandom,levelstats",
        "--num=3000",
        "--batch_size=8",
        "--num_column_families=3",
    ]);
    assert_eq!(scrape(&text, "readrandom").found, Some((3000, 3000)), "{text}");
    assert_eq!(scrape(&text, "multireadrandom").found, Some((3000, 3000)), "{text}");
    // levelstats names every family.
    for cf in 0..3 {
        assert!(text.contains(&column_family_name(cf)), "{text}");
    }
    run_then::<E>(&["--benchmarks=fillrandom", "--num=3000", "--threads=2", "--num_column_families=3"], |db, f| {
        let homes = homes(db, f);
        let mut per_family = [0usize; 3];
        for (k, h) in homes.iter().enumerate() {
            assert!(h.is_empty() || h == &[k % 3], "key {k} in {h:?}");
            if let [cf] = h[..] {
                per_family[cf] += 1;
            }
        }
        assert!(per_family.iter().all(|&n| n > 500), "{per_family:?}");
    });
    let text = run_text::<E>(&["--benchmarks=fillseq,deleteseq,readrandom", "--num=2000", "--num_column_families=3"]);
    assert_eq!(scrape(&text, "readrandom").found, Some((0, 2000)), "{text}");
    // One family: the same flags find every key in "default".
    let text = run_text::<E>(&["--benchmarks=fillseq,readrandom", "--num=2000", "--num_column_families=1"]);
    assert_eq!(scrape(&text, "readrandom").found, Some((2000, 2000)), "{text}");
}

/// mergerandom merges key number k in family k % N: every family's counters add up to the operands.
pub fn mergerandom_uses_every_family<E: Engine>() {
    run_then::<E>(
        &[
            "--benchmarks=mergerandom",
            "--num=600",
            "--merge_keys=60",
            "--merge_operator=put",
            "--num_column_families=4",
        ],
        |db, f| {
            let (mut key, mut v) = (Vec::new(), Vec::new());
            for k in 0..60u64 {
                make_key(k, f.key_size, &mut key);
                let found: Vec<usize> = (0..4).filter(|&cf| db.get_cf(cf, &key, &mut v).unwrap()).collect();
                // 600 operands over 60 keys (seed 42): every key has some, in its family only.
                assert_eq!(found, [(k % 4) as usize], "key {k}");
            }
        },
    );
}

fn run_text<E: Engine>(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    shaledb_bench::run_bench::<E>(&flags(&dir.path().join("db"), args), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Bad values and benchmarks that cannot run with families are errors naming the flag, before any work.
pub fn bad_family_flags_are_errors<E: Engine>() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for (args, flag, says) in [
        (&["--num_column_families=0"][..], "num_column_families", "at least 1"),
        (&["--num_column_families=-2"], "num_column_families", "at least 1"),
        (
            &["--num_column_families=4", "--num_hot_column_families=2", "--benchmarks=fillseq"],
            "num_hot_column_families",
            "in stages",
        ),
        (&["--num_column_families=2", "--benchmarks=fillseq,readseq"], "num_column_families", "readseq"),
        (&["--num_column_families=2", "--benchmarks=seekrandom"], "num_column_families", "seekrandom"),
        (&["--num_column_families=2", "--benchmarks=fillingest"], "num_column_families", "fillingest"),
    ] {
        let mut v = vec!["--progress=false".to_string(), format!("--db={}", db.display())];
        v.extend(args.iter().map(|a| a.to_string()));
        let mut out = Vec::new();
        // The flags refuse the values as they parse (the runner checks them again before it opens anything).
        let opened = BenchFlags::parse_args(v).and_then(|f| Runner::<E>::open(f, &mut out).map(drop));
        match opened {
            Err(BenchError::BadFlag { flag: got, msg }) => {
                assert_eq!(got, flag, "{args:?}: {msg}");
                assert!(msg.contains(says), "{args:?}: {msg}");
            }
            Err(e) => panic!("{args:?}: {e}"),
            Ok(_) => panic!("{args:?} was accepted"),
        }
        assert!(!db.exists(), "{args:?}: the database was created");
    }
    // Every family hot (0, or at least N) is db_bench's default.
    for hot in ["--num_hot_column_families=0", "--num_hot_column_families=4"] {
        let text = run_text::<E>(&["--benchmarks=fillseq,readrandom", "--num=400", "--num_column_families=4", hot]);
        assert_eq!(scrape(&text, "readrandom").found, Some((400, 400)), "{hot}: {text}");
    }
}

/// Every benchmark that runs with families runs on both engines and prints its line; range deletions go to
/// the family of the key just written.
pub fn every_family_benchmark_runs<E: Engine>() {
    let all = "fillseq,fillrandom,filluniquerandom,fillsync,overwrite,readrandom,readmissing,multireadrandom,\
readwhilewriting,readwhilemerging,deleteseq,deleterandom,updaterandom,readrandomwriterandom,mergerandom,compact,\
flush,waitforcompaction,stats,levelstats,memstats";
    let text = run_text::<E>(&[
        &format!("--benchmarks={all}"),
        "--num=1000",
        "--threads=2",
        "--batch_size=4",
        "--merge_operator=put",
        "--num_column_families=3",
        "--statistics",
    ]);
    for name in all.split(',') {
        let kind = shaledb_bench::db_bench::workloads::Kind::from_name(name).unwrap();
        if !kind.is_meta() {
            assert!(scrape(&text, name).operations.is_some(), "no line for {name}:\n{text}");
        }
    }
    assert!(text.contains("rocksdb.num-entries-active-mem-table [column_family_name_000002]:"), "{text}");
    // stats, levelstats and each benchmark's --statistics block end with the table of every family.
    assert!(text.matches("** Column families: 3").count() > 10, "{text}");
    // overwrite with a range deletion every 50 writes, 20 keys wide, each in the family of the key just
    // written: it removes that family's keys of the range, so the missing keys are of every residue mod 3.
    run_then::<E>(
        &[
            "--benchmarks=fillseq,overwrite",
            "--num=3000",
            "--num_column_families=3",
            "--writes_per_range_tombstone=50",
            "--range_tombstone_width=20",
            "--max_num_range_tombstones=10",
        ],
        |db, f| {
            let mut missing = [0usize; 3];
            for (k, h) in homes(db, f).iter().enumerate() {
                assert!(h.is_empty() || h == &[k % 3], "key {k} in {h:?}");
                if h.is_empty() {
                    missing[k % 3] += 1;
                }
            }
            assert!(missing.iter().filter(|&&n| n > 0).count() >= 2, "{missing:?}");
            assert!(missing.iter().sum::<usize>() < 300, "{missing:?}");
        },
    );
}
