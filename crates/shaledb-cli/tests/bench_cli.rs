//! `shaledb bench` as a user runs it: flags, errors and output.

use std::process::Command;

fn shaledb(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn tiny_run_prints_db_bench_lines() {
    let (ok, out, err) = shaledb(&[
        "bench",
        "-num=2000",
        "--benchmarks=fillseq,readrandom",
        "--seed=1",
        "--histogram=1",
        "--progress=false",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("Keys:       16 bytes each"));
    assert!(out.contains("Values:     100 bytes each (50 bytes after compression)"));
    assert!(out.contains("Entries:    2000"));
    let line = out.lines().find(|l| l.starts_with("readrandom   :")).unwrap();
    assert!(line.ends_with("(2000 of 2000 found)"), "{line}");
    assert!(out.contains("Microseconds per read:"));
}

/// db_bench's range deletions during a fill: fillrandom deletes 50 keys after every 100th write (up to 10
/// times), so a scan finds fewer keys than without; expanded into point deletions, the same keys go.
#[test]
fn range_deletions_during_writes_delete_keys_as_db_bench_does() {
    let scanned = |extra: &[&str]| -> u64 {
        let mut args = vec!["bench", "-num=3000", "--benchmarks=fillrandom,readseq", "--seed=1", "--progress=false"];
        args.extend_from_slice(extra);
        let (ok, out, err) = shaledb(&args);
        assert!(ok, "{err}");
        let deleting = extra.iter().any(|a| a.starts_with("--writes_per_range_tombstone"));
        assert_eq!(out.contains("Number of range deletions: 10"), deleting, "{out}");
        let line = out.lines().find(|l| l.starts_with("readseq      :")).unwrap();
        let ops = line.split(" operations;").next().unwrap().rsplit(' ').next().unwrap();
        ops.parse().unwrap()
    };
    let plain = scanned(&[]);
    let flags = ["--writes_per_range_tombstone=100", "--max_num_range_tombstones=10", "--range_tombstone_width=50"];
    let ranged = scanned(&flags);
    let expanded = scanned(&[flags[0], flags[1], flags[2], "--expand_range_tombstones"]);
    assert!(ranged < plain, "{ranged} keys with range deletions, {plain} without");
    assert_eq!(ranged, expanded, "point deletions of the same keys leave the same keys");
}

#[test]
fn unknown_flag_fails_naming_it() {
    let (ok, _, err) = shaledb(&["bench", "--no_such_flag=1"]);
    assert!(!ok);
    assert!(err.contains("--no_such_flag"), "{err}");
}

#[test]
fn bad_values_fail_naming_the_flag() {
    for (arg, flag) in
        [("--num=ten", "--num"), ("--compression_type=lzma", "--compression_type"), ("--threads=0", "--threads")]
    {
        let (ok, _, err) = shaledb(&["bench", arg]);
        assert!(!ok, "{arg}");
        assert!(err.contains(flag), "{arg}: {err}");
    }
}

fn shaledb_status(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A bad flag fails with status 2 and one line naming it, before any database is created or benchmark runs.
fn assert_fails_before_the_run(args: &[&str], flag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_arg = format!("--db={}", db.display());
    let mut all = vec!["bench", &db_arg, "-num=50", "--benchmarks=fillseq", "--progress=false", "--seed=1"];
    all.extend_from_slice(args);
    let (code, out, err) = shaledb_status(&all);
    assert_eq!(code, Some(2), "{args:?}: {out}{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line, got {err:?}");
    assert!(err.contains(flag), "{args:?}: {err}");
    assert!(!out.contains("fillseq      :") && !out.contains("DB path"), "{args:?} ran: {out}");
    assert!(!db.exists(), "{args:?} created the database");
}

#[test]
fn json_and_plot_paths_that_cannot_be_written_fail_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, b"x").unwrap();
    let under_file = format!("--json={}", file.join("out.json").display());
    assert_fails_before_the_run(&[&under_file], "--json");
    let missing_dir = format!("--json={}", dir.path().join("no/such/dir/out.json").display());
    assert_fails_before_the_run(&[&missing_dir], "--json");
    let json_is_dir = format!("--json={}", dir.path().display());
    assert_fails_before_the_run(&[&json_is_dir], "--json");
    let plot_is_file = format!("--plot={}", file.display());
    assert_fails_before_the_run(&[&plot_is_file], "--plot");
    let plot_under_file = format!("--plot={}", file.join("plots").display());
    assert_fails_before_the_run(&[&plot_under_file], "--plot");
    let report = format!("--report_file={}", file.join("r.csv").display());
    assert_fails_before_the_run(&["--report_interval_seconds=1", &report], "--report_file");
    // The check leaves nothing behind, and good paths still work.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let json = dir.path().join("out.json");
    let plots = dir.path().join("plots");
    let (ok, _, err) = shaledb(&[
        "bench",
        "-num=50",
        "--benchmarks=fillseq",
        "--progress=false",
        &format!("--json={}", json.display()),
        &format!("--plot={}", plots.display()),
    ]);
    assert!(ok, "{err}");
    assert!(std::fs::metadata(&json).unwrap().len() > 0);
    assert!(plots.join("01-fillseq.svg").exists());
}

#[test]
fn bad_block_size_and_compression_ratio_are_one_line_errors_before_the_run() {
    assert_fails_before_the_run(&["--block_size=0"], "--block_size");
    assert_fails_before_the_run(&["--compression_ratio=1.5"], "--compression_ratio");
    assert_fails_before_the_run(&["--compression_ratio=0"], "--compression_ratio");
    // An option only the engine checks is refused before the run as well.
    assert_fails_before_the_run(&["--write_buffer_size=100"], "write_buffer_size");
}

#[test]
fn mergerandom_without_a_merge_operator_is_skipped_and_the_rest_runs() {
    let (ok, out, err) =
        shaledb(&["bench", "-num=200", "--benchmarks=fillseq,mergerandom,readseq", "--progress=false", "--seed=1"]);
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l == "mergerandom  : skipped (--merge_operator is unknown)"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("fillseq      :")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("readseq      :")), "{out}");
    // With an operator it runs.
    let (ok, out, err) = shaledb(&[
        "bench",
        "-num=200",
        "--benchmarks=mergerandom",
        "--merge_operator=uint64add",
        "--value_size=8",
        "--progress=false",
        "--seed=1",
    ]);
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l.starts_with("mergerandom  :") && !l.contains("skipped")), "{out}");
}

#[test]
fn bench_help_speaks_of_what_is_measured_not_of_internal_reports() {
    for args in [
        &["bench", "--help"][..],
        &["bench", "suite", "--help"],
        &["bench", "suite", "rocksdb", "--help"],
        &["bench", "suite", "merge", "--help"],
        &["bench", "suite", "sysbench", "--help"],
        &["bench", "suite", "insert", "--help"],
        &["bench", "suite", "forestdb", "--help"],
        &["bench", "resp", "--help"],
        &["--help"],
    ] {
        let (ok, out, err) = shaledb(args);
        assert!(ok, "{args:?}: {err}");
        let lower = out.to_lowercase();
        for jargon in ["seed 0", "seed's", "seed report", "seed suite", "issue "] {
            assert!(!lower.contains(jargon), "{args:?} says {jargon:?}:\n{out}");
        }
    }
}

/// `--statistics` prints db_bench's histograms (`name P50 : f P95 : f P99 : f P100 : f COUNT : n SUM : n`), each
/// measured: after a run that gets, writes, seeks, flushes and compacts, every one has a non-zero count.
#[test]
fn statistics_print_db_bench_histograms_with_real_counts() {
    let (ok, out, err) = shaledb(&[
        "bench",
        "-num=3000",
        "--benchmarks=fillrandom,readrandom,seekrandom,compact",
        "--statistics",
        "--write_buffer_size=65536",
        "--seed=1",
        "--progress=false",
    ]);
    assert!(ok, "{err}");
    let block = out.rsplit("STATISTICS:\n").next().unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for line in block.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) != Some(&"P50") {
            continue;
        }
        assert_eq!(f.len(), 19, "{line}");
        for (i, label) in ["P50", "P95", "P99", "P100", "COUNT", "SUM"].iter().enumerate() {
            assert_eq!((f[1 + 3 * i], f[2 + 3 * i]), (*label, ":"), "{line}");
        }
        let p: Vec<f64> = (0..4).map(|i| f[3 + 3 * i].parse().unwrap()).collect();
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "percentiles out of order: {line}");
        let count: u64 = f[15].parse().unwrap();
        let sum: u64 = f[18].parse().unwrap();
        seen.insert(f[0].to_string(), (count, sum, p[3]));
    }
    for name in [
        "rocksdb.db.get.micros",
        "rocksdb.db.write.micros",
        "rocksdb.db.seek.micros",
        "rocksdb.bytes.per.read",
        "rocksdb.bytes.per.write",
        "rocksdb.compaction.times.micros",
        "rocksdb.compaction.times.cpu_micros",
        "rocksdb.db.flush.micros",
    ] {
        let (count, _, max) = seen.get(name).copied().unwrap_or_else(|| panic!("no {name} in:\n{block}"));
        assert!(count > 0 && max > 0.0, "{name}: count {count}, max {max}");
    }
    assert_eq!(seen["rocksdb.db.get.micros"].0, 3000);
    assert_eq!(seen["rocksdb.db.write.micros"].0, 3000);
    assert_eq!(seen["rocksdb.db.seek.micros"].0, 3000);
    // Every write is a 16-byte key and a 100-byte value.
    assert_eq!(seen["rocksdb.bytes.per.write"], (3000, 3000 * 116, 116.0));
    // Each found value is 100 bytes.
    let (found, bytes, _) = seen["rocksdb.bytes.per.read"];
    assert_eq!(bytes, found * 100);
    // Without --statistics, none of it.
    let (ok, out, err) = shaledb(&["bench", "-num=100", "--benchmarks=fillseq", "--progress=false"]);
    assert!(ok, "{err}");
    assert!(!out.contains("STATISTICS:") && !out.contains(" P50 : "), "{out}");
}

#[test]
fn suite_names_are_checked() {
    let (ok, _, err) = shaledb(&["bench", "suite", "leveldb"]);
    assert!(!ok);
    assert!(err.contains("leveldb"), "{err}");
}

/// Issue 9: `bench --db=DIR` without `--use_existing_db` deleted `20240101.log` and `CURRENT` from a directory
/// that never held a database. Now it refuses, naming them, and leaves them.
#[test]
fn bench_db_on_a_directory_with_20240101_log_and_current_from_another_program_leaves_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("20240101.log"), b"another program's log").unwrap();
    std::fs::write(dir.path().join("CURRENT"), b"another program's CURRENT").unwrap();
    let db = format!("--db={}", dir.path().display());
    let (ok, _, err) = shaledb(&["bench", &db, "-num=100", "--benchmarks=fillseq", "--progress=false"]);
    assert!(!ok);
    assert!(err.contains("20240101.log") && err.contains("CURRENT"), "{err}");
    assert_eq!(std::fs::read(dir.path().join("20240101.log")).unwrap(), b"another program's log");
    assert_eq!(std::fs::read(dir.path().join("CURRENT")).unwrap(), b"another program's CURRENT");
}

/// Names and sizes of the entries of `dir`, sorted.
fn listing(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len())
        })
        .collect();
    v.sort();
    v
}

/// Issue 39: `bench --db DIR` on a database deleted it with no flag asking for it. Without
/// `--use_existing_db` it now refuses in one line (exit 2) before doing anything, and every file stays.
#[test]
fn bench_db_on_a_database_without_use_existing_db_refuses_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = format!("--db={}", path.display());
    let (ok, _, err) = shaledb(&["bench", &db, "-num=300", "--benchmarks=fillseq", "--progress=false"]);
    assert!(ok, "{err}");
    assert!(!err.contains("removed") && !err.contains("deleted"), "a new --db: nothing to delete: {err}");
    let before = listing(&path);
    assert!(before.iter().any(|(n, _)| n == "CURRENT"), "{before:?}");
    for benchmarks in ["--benchmarks=fillseq", "--benchmarks=readrandom"] {
        let (code, out, err) = shaledb_status(&["bench", &db, "-num=300", benchmarks, "--progress=false"]);
        assert_eq!(code, Some(2), "{out}{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(
            err.contains(&format!(
                "{} holds a database; pass --use_existing_db=1 to benchmark on it, or --use_existing_db=0 to delete \
                 it first",
                path.display()
            )),
            "{err}"
        );
        assert!(out.is_empty(), "nothing ran: {out}");
        assert_eq!(listing(&path), before, "every file of the database is still there");
    }
    // --use_existing_db=1 benchmarks on it and finds every key.
    let (ok, out, err) =
        shaledb(&["bench", &db, "--use_existing_db=1", "-num=300", "--benchmarks=readrandom", "--progress=false"]);
    assert!(ok, "{err}");
    assert!(out.contains("(300 of 300 found)"), "{out}");
}

/// An explicit `--use_existing_db=0` deletes the database first, as db_bench does, and says so once, with the
/// count of files, not their names.
#[test]
fn explicit_use_existing_db_0_deletes_the_database_and_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = format!("--db={}", path.display());
    let (ok, _, err) = shaledb(&["bench", &db, "-num=300", "--benchmarks=fillseq", "--progress=false"]);
    assert!(ok, "{err}");
    for flag in ["--use_existing_db=0", "--use_existing_db=false"] {
        let files = listing(&path).len();
        let (ok, out, err) =
            shaledb(&["bench", &db, flag, "-num=100", "--benchmarks=fillseq,readrandom", "--progress=false"]);
        assert!(ok, "{flag}: {err}");
        let said: Vec<&str> = err.lines().filter(|l| l.contains("deleted") || l.contains("removed")).collect();
        assert_eq!(said.len(), 1, "{flag}: said once: {err}");
        assert!(said[0].contains(&format!("deleted the database in {}", path.display())), "{}", said[0]);
        assert!(said[0].contains(&format!("({files} files)")), "{flag}: {} ({files} files)", said[0]);
        assert!(!said[0].contains("CURRENT") && !said[0].contains("MANIFEST"), "no file names: {}", said[0]);
        assert!(out.contains("(100 of 100 found)"), "the old 300 keys are gone: {out}");
    }
}

/// A default run (a temporary directory bench made) and fill benchmarks that start on an empty database
/// announce no deletion.
#[test]
fn a_default_run_announces_no_removal() {
    let (ok, out, err) =
        shaledb(&["bench", "-num=300", "--benchmarks=fillseq,fillrandom,overwrite,readrandom", "--progress=false"]);
    assert!(ok, "{err}");
    assert!(out.contains("fillrandom   :"), "{out}");
    assert!(!err.contains("removed") && !err.contains("deleted"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("new").display());
    let (ok, _, err) = shaledb(&["bench", &db, "-num=300", "--benchmarks=fillseq,fillrandom", "--progress=false"]);
    assert!(ok, "{err}");
    assert!(!err.contains("removed") && !err.contains("deleted"), "{err}");
}

/// A `--db` holding files that are not a database's is never emptied, nor given a database among them,
/// whatever --use_existing_db says.
#[test]
fn a_db_with_files_that_are_not_a_database_is_never_emptied() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    std::fs::create_dir(dir.path().join("photos")).unwrap();
    std::fs::write(dir.path().join("photos/a.jpg"), b"jpg").unwrap();
    let before = listing(dir.path());
    let db = format!("--db={}", dir.path().display());
    for flag in [None, Some("--use_existing_db=0"), Some("--use_existing_db=1")] {
        let mut args = vec!["bench", &db, "-num=100", "--benchmarks=fillseq", "--progress=false"];
        args.extend(flag);
        let (code, out, err) = shaledb_status(&args);
        assert_eq!(code, Some(2), "{flag:?}: {out}{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{flag:?}: {err}");
        assert!(err.contains("notes.txt") && err.contains("never deletes other files"), "{flag:?}: {err}");
        assert_eq!(listing(dir.path()), before, "{flag:?}");
        assert_eq!(std::fs::read(dir.path().join("photos/a.jpg")).unwrap(), b"jpg");
    }
}

/// The suites follow the same rule: a database already in `--db` (the rocksdb and merge suites) or in
/// `--db/<engine>` (sysbench, insert, forestdb) is refused without `--use_existing_db=0`, and deleted with it,
/// said once. Every suite takes `--progress[=BOOL]` as `shaledb bench` does.
#[test]
fn suites_delete_a_database_they_did_not_make_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("suite");
    let path = parent.join("shaledb");
    let db = format!("--db={}", path.display());
    let (ok, _, err) = shaledb(&["bench", &db, "-num=300", "--benchmarks=fillseq", "--progress=false"]);
    assert!(ok, "{err}");
    let before = listing(&path);
    let parent_db = format!("--db={}", parent.display());
    let insert = ["bench", "suite", "insert", "--rows", "500", "--threads", "1", "--pad", "16"];
    let insert_tail = ["--query_configs", "none", "--use_direct_reads=0", "--progress=false", &parent_db];
    let merge = ["bench", "suite", "merge", "--num", "300", "--duration", "0", "--progress", &db];
    for args in [[&insert[..], &insert_tail[..]].concat(), merge.to_vec()] {
        let (code, out, err) = shaledb_status(&args);
        assert_eq!(code, Some(2), "{args:?}: {out}{err}");
        assert!(err.contains("holds a database; pass --use_existing_db=0 to delete it first"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert_eq!(listing(&path), before, "{args:?}");
    }
    let (code, _, err) = shaledb_status(&[&merge[..], &["--use_existing_db=1"]].concat());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--use_existing_db"), "{err}");
    let (ok, out, err) = shaledb(&[&insert[..], &insert_tail[..], &["--use_existing_db=0"]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("load:"), "{out}");
    let said: Vec<&str> = err.lines().filter(|l| l.contains("deleted") || l.contains("removed")).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains(&format!("deleted the database in {}", path.display())), "{err}");
    assert!(!path.exists(), "the suite removes its own database at the end");
    // Its own database, made in this run: no message.
    let (ok, _, err) = shaledb(&[&insert[..], &insert_tail[..]].concat());
    assert!(ok, "{err}");
    assert!(!err.contains("deleted") && !err.contains("removed"), "{err}");
}

/// `shaledb repair DB` brings back a database whose CURRENT was lost; open refused it before.
#[test]
fn repair_subcommand_rebuilds_a_missing_current() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = format!("--db={}", path.display());
    let (ok, _, err) = shaledb(&["bench", &db, "-num=500", "--benchmarks=fillseq", "--progress=false"]);
    assert!(ok, "{err}");
    std::fs::remove_file(path.join("CURRENT")).unwrap();
    let (ok, _, err) =
        shaledb(&["bench", &db, "--use_existing_db", "-num=500", "--benchmarks=readseq", "--progress=false"]);
    assert!(!ok);
    assert!(err.contains("repair"), "{err}");
    let (ok, out, err) = shaledb(&["repair", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("CURRENT now names MANIFEST-"), "{out}");
    let (ok, out, err) =
        shaledb(&["bench", &db, "--use_existing_db", "-num=500", "--benchmarks=readseq", "--progress=false"]);
    assert!(ok, "{err}");
    assert!(out.contains("readseq"), "{out}");
    let (ok, out, _) = shaledb(&["verify", path.to_str().unwrap()]);
    assert!(ok, "{out}");
}

/// `--prefix_size` with `--keys_per_prefix` shapes keys as db_bench does, and `seekrandom` with
/// `--prefix_same_as_start` finds exactly the keys a total-order seek finds (the prefix filters only skip
/// tables that hold none of the prefix); every seek's `--seek_nexts` stay within the prefix.
#[test]
fn prefix_seeks_find_what_total_order_seeks_find() {
    let dir = tempfile::tempdir().unwrap();
    let found = |extra: &[&str]| -> String {
        let db = dir.path().join("db");
        let db_flag = format!("--db={}", db.display());
        let mut args = vec![
            "bench",
            "--benchmarks=fillrandom,flush,seekrandom",
            "--num=3000",
            "--seed=5",
            "--prefix_size=8",
            "--keys_per_prefix=10",
            "--bloom_bits=10",
            "--memtable_bloom_size_ratio=0.1",
            "--write_buffer_size=65536",
            "--seek_nexts=3",
            "--progress=false",
            "--use_existing_db=0",
            db_flag.as_str(),
        ];
        args.extend_from_slice(extra);
        let (ok, out, err) = shaledb(&args);
        assert!(ok, "{err}");
        assert!(out.contains("Prefix:    8 bytes") && out.contains("Keys per prefix:    10"), "{out}");
        let line = out.lines().find(|l| l.starts_with("seekrandom   :")).unwrap().to_string();
        line[line.rfind('(').unwrap()..].to_string()
    };
    let total = found(&["--total_order_seek=true"]);
    assert_eq!(found(&["--prefix_same_as_start=true"]), total);
    assert_eq!(found(&["--prefix_same_as_start=true", "--whole_key_filtering=false"]), total);
    assert!(!total.starts_with("(0 of"), "{total}");
}

#[test]
fn prefix_flags_out_of_range_fail_naming_the_flag() {
    for (args, flag) in [
        (&["--prefix_size=17"][..], "prefix_size"),
        (&["--keys_per_prefix=4"][..], "keys_per_prefix"),
        (&["--prefix_size=4", "--memtable_bloom_size_ratio=0.5"][..], "memtable_bloom_size_ratio"),
        (&["--memtable_bloom_size_ratio=0.1"][..], "memtable_bloom_size_ratio"),
    ] {
        assert_fails_before_the_run(args, flag);
    }
}

/// `randomtransaction` as db_bench runs it: pessimistic and optimistic transactions from several threads,
/// then RandomTransactionVerify (every set sums to the same total), and plain batches without either flag.
#[test]
fn randomtransaction_commits_whole_transactions_and_verifies() {
    for (flag, message) in [
        ("--transaction_db=true", "( transactions:"),
        ("--optimistic_transaction_db=true", "( transactions:"),
        ("--transaction_db=false", "( batches:"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db_flag = format!("--db={}", dir.path().join("db").display());
        let (ok, out, err) = shaledb(&[
            "bench",
            "--benchmarks=randomtransaction",
            "--num=500",
            "--reads=300",
            "--threads=3",
            "--transaction_sets=4",
            "--seed=3",
            "--progress=false",
            flag,
            &db_flag,
        ]);
        assert!(ok, "{flag}: {err}");
        let line = out.lines().find(|l| l.starts_with("randomtransaction :")).unwrap();
        assert!(line.contains(message), "{flag}: {line}");
        assert!(line.contains("900 operations"), "{flag}: {line}");
        if message.contains("transactions") {
            assert!(out.contains("RandomTransactionVerify Success."), "{flag}: {out}");
        }
    }
}

#[test]
fn transaction_flags_out_of_range_fail_naming_the_flag() {
    assert_fails_before_the_run(&["--transaction_sets=0"], "transaction_sets");
    assert_fails_before_the_run(&["--transaction_sets=10000"], "transaction_sets");
    assert_fails_before_the_run(&["--transaction_db", "--optimistic_transaction_db"], "optimistic_transaction_db");
}

/// A tiny run of each table suite (`bench suite <name> ...`) with its databases under `db`.
fn tiny_suite(name: &str, db: &std::path::Path) -> Vec<String> {
    let mut args: Vec<String> = ["bench", "suite", name].iter().map(|s| s.to_string()).collect();
    let tail: &[&str] = match name {
        "sysbench" => {
            &["--tables=1", "--table_size=200", "--threads=1", "--compression=none", "--tests=point-query.pre"]
        }
        "insert" => &["--rows=300", "--threads=1", "--pad=16", "--query_configs=none", "--engine=shaledb"],
        _ => &["--docs=300", "--variant=cached", "--steps=load,pq.1", "--warmup=0", "--threads=2", "--engine=shaledb"],
    };
    args.extend(tail.iter().map(|s| s.to_string()));
    args.extend(["--duration=1".to_string(), "--use_direct_reads=0".to_string(), format!("--db={}", db.display())]);
    args
}

/// Runs `args` with stdin, stdout and stderr on a pseudo-terminal (util-linux `script`), as a user at a
/// terminal runs them; returns the exit status and everything the terminal showed.
fn shaledb_on_a_terminal(args: &[String]) -> (bool, String) {
    let cmd = std::iter::once(env!("CARGO_BIN_EXE_shaledb").to_string())
        .chain(args.iter().cloned())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().expect("util-linux script");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every table suite takes `--progress[=BOOL]` as `shaledb bench` does (the same values, the same error for
/// a bad one) and does what it does there: a progress bar on stderr when stderr is a terminal, none with
/// `--progress=false`, and none when stderr is not a terminal.
#[test]
fn every_suite_takes_progress_as_bench_does() {
    let (code, _, bench_err) = shaledb_status(&["bench", "--progress=maybe", "-num=10"]);
    assert_eq!(code, Some(2), "{bench_err}");
    // The bar counts the steps of one engine's run: the load and one test or step (insert: the load alone).
    for (suite, steps) in [("sysbench", 2), ("insert", 1), ("forestdb", 2)] {
        let bar = format!("/{steps} steps");
        let dir = tempfile::tempdir().unwrap();
        let args = tiny_suite(suite, &dir.path().join("db"));
        let with = |flag: &str| [&args[..], &[flag.to_string()]].concat();
        let (code, _, err) = shaledb_status(&with("--progress=maybe").iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(code, Some(2), "{suite}: {err}");
        assert!(err.contains("--progress"), "{suite}: {err}");
        for flag in ["--progress", "--progress=1", "--progress=false"] {
            let (ok, _, err) = shaledb(&with(flag).iter().map(String::as_str).collect::<Vec<_>>());
            assert!(ok, "{suite} {flag}: {err}");
            assert!(!err.contains(&bar), "{suite} {flag}: no bar when stderr is not a terminal: {err}");
        }
        let (ok, shown) = shaledb_on_a_terminal(&with("--progress"));
        assert!(ok, "{suite}: {shown}");
        assert!(shown.contains(&bar), "{suite}: a bar on a terminal: {shown}");
        let (ok, shown) = shaledb_on_a_terminal(&with("--progress=false"));
        assert!(ok, "{suite}: {shown}");
        assert!(!shown.contains(&bar), "{suite}: no bar with --progress=false: {shown}");
    }
}

/// Every table suite names its time per step `--duration`; the insert benchmark's old `--query_duration`
/// still works, and its help calls it deprecated.
#[test]
fn every_suite_takes_duration_and_the_old_name_still_works() {
    for suite in ["sysbench", "insert", "forestdb"] {
        let (ok, help, err) = shaledb(&["bench", "suite", suite, "--help"]);
        assert!(ok, "{err}");
        assert!(help.contains("--duration <DURATION>"), "{suite}: {help}");
    }
    let (_, help, _) = shaledb(&["bench", "suite", "insert", "--help"]);
    assert!(help.contains("`--query_duration` is a deprecated alias"), "{help}");
    for flag in ["--duration=0.2", "--query_duration=0.2"] {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("--db={}", dir.path().join("db").display());
        let args = ["bench", "suite", "insert", "--rows=300", "--threads=1", "--pad=16", "--engine=shaledb"];
        let tail = ["--query_insert_rates=100", "--use_direct_reads=0", "--progress=false", flag, &db];
        let (ok, out, err) = shaledb(&[&args[..], &tail[..]].concat());
        assert!(ok, "{flag}: {err}");
        assert!(
            out.contains("1 query threads, 0.2 s each") || out.contains("query threads, 0.2 s each"),
            "{flag}: {out}"
        );
        assert!(out.lines().any(|l| l.starts_with("q.100:")), "{flag}: {out}");
    }
    let (code, _, err) = shaledb_status(&["bench", "suite", "insert", "--query_duration=-1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--duration"), "{err}");
}
