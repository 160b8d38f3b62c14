//! `shaledb` run as `db_bench` (the link `shaledb install-db-bench` makes), with the flags RocksDB's
//! tools/benchmark.sh passes, and its output read back at the field positions the script's greps and awks use.

use std::path::Path;
use std::process::Command;

fn run(exe: &Path, args: &[String]) -> (Option<i32>, String, String) {
    let out = Command::new(exe).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn install(dir: &Path) -> std::path::PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).arg("install-db-bench").arg(dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir.join("db_bench")
}

/// The flags benchmark.sh's `const_params_base` and `level_const_params` give every step (at a size for a
/// test), plus the step's own.
/// `root` is a scratch directory: the database goes in `root/db`, the `--report_file` (benchmark.sh passes one per
/// step) beside it.
fn script_flags(root: &Path, own: &[&str]) -> Vec<String> {
    let db = root.join("db").display().to_string();
    let report = root.join("report.r.csv").display().to_string();
    let mut v: Vec<String> = [
        format!("--report_file={report}"),
        "--undefok=use_blob_cache,use_shared_block_and_blob_cache,blob_cache_size,blob_cache_numshardbits,prepopulate_blob_cache,multiread_batched,cache_low_pri_pool_ratio,prepopulate_block_cache".to_string(),
        format!("--db={db}"),
        format!("--wal_dir={db}"),
        "--num=20000".into(),
        "--key_size=20".into(),
        "--value_size=400".into(),
        "--block_size=8192".into(),
        "--cache_size=16777216".into(),
        "--cache_numshardbits=6".into(),
        "--compression_max_dict_bytes=0".into(),
        "--compression_ratio=0.5".into(),
        "--compression_type=zstd".into(),
        "--bytes_per_sync=1048576".into(),
        "--benchmark_write_rate_limit=0".into(),
        "--write_buffer_size=1048576".into(),
        "--target_file_size_base=1048576".into(),
        "--max_bytes_for_level_base=4194304".into(),
        "--verify_checksum=1".into(),
        "--delete_obsolete_files_period_micros=62914560".into(),
        "--max_bytes_for_level_multiplier=8".into(),
        "--statistics=0".into(),
        "--stats_per_interval=1".into(),
        "--stats_interval_seconds=60".into(),
        "--report_interval_seconds=1".into(),
        "--histogram=1".into(),
        "--memtablerep=skip_list".into(),
        "--bloom_bits=10".into(),
        "--open_files=-1".into(),
        "--subcompactions=1".into(),
        "--compaction_style=0".into(),
        "--num_levels=8".into(),
        "--min_level_to_compress=-1".into(),
        "--level_compaction_dynamic_level_bytes=true".into(),
        "--pin_l0_filter_and_index_blocks_in_cache=1".into(),
        "--prepopulate_block_cache=1".into(),
        "--seed=1".into(),
        "--progress=0".into(),
    ]
    .into_iter()
    .collect();
    v.extend(own.iter().map(|s| s.to_string()));
    v
}

/// awk's `$n` (1-based, whitespace separated) of the last line starting with `prefix`.
fn field(out: &str, prefix: &str, n: usize) -> String {
    let line = out.lines().rfind(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no line {prefix:?}"));
    line.split_whitespace().nth(n - 1).unwrap_or_else(|| panic!("no ${n} in {line:?}")).to_string()
}

fn number(out: &str, prefix: &str, n: usize) -> f64 {
    let f = field(out, prefix, n);
    f.trim_end_matches(',').parse().unwrap_or_else(|_| panic!("${n} of {prefix:?} is {f:?}"))
}

/// Every report.tsv column benchmark.sh fills from db_bench's output, read as the script reads it.
fn assert_scrapable(out: &str, bench: &str) {
    // date: $6 "-" $3 "-" $4 "T" $5 of `Date:`.
    let year: u32 = field(out, "Date:", 6).parse().unwrap();
    assert!(year >= 2024);
    assert!(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        .contains(&field(out, "Date:", 3).as_str()));
    assert_eq!(field(out, "Date:", 5).matches(':').count(), 2);
    // The result line, V2 layout: $5 ops/sec, $3 usec/op, $8 "seconds", $11 MB/s.
    let result = format!("{bench} ");
    assert_eq!(field(out, &result, 8), "seconds");
    assert!(number(out, &result, 5) > 0.0);
    assert!(number(out, &result, 3) > 0.0);
    number(out, &result, 11);
    // uptime, stall%, Nstall.
    assert!(number(out, "Uptime(secs)", 2) >= 0.0);
    number(out, "Cumulative stall", 5);
    for n in [2, 6, 10, 14, 18, 20] {
        number(out, "Stalls(count):", n);
    }
    // ingest GB of `Cumulative writes`, c_wgb ($3, unit $4) and c_mbps ($6) of `Cumulative compaction`,
    // flush GB ($3 up to its comma) of `Flush(GB)`.
    let writes = out.lines().rfind(|l| l.starts_with("Cumulative writes")).unwrap();
    let w: Vec<&str> = writes.split_whitespace().collect();
    let at = w.iter().position(|x| *x == "ingest:").expect("ingest:");
    w[at + 1].parse::<f64>().unwrap();
    number(out, "Cumulative compaction", 3);
    assert_eq!(field(out, "Cumulative compaction", 4), "GB");
    number(out, "Cumulative compaction", 6);
    number(out, "Flush(GB)", 3);
    // blob_sz: $7 $8 of `Blob file count:` (printed with no blob files too, as RocksDB does).
    number(out, "Blob file count:", 7);
    assert_eq!(field(out, "Blob file count:", 8), "GB,");
    // lsm_sz ($3 $4), c_wsecs ($15), c_csecs ($16), b_rgb ($21), b_wgb ($22) of the ` Sum` row.
    number(out, " Sum", 3);
    assert!(["KB", "MB", "GB", "TB"].contains(&field(out, " Sum", 4).as_str()));
    number(out, " Sum", 15);
    number(out, " Sum", 16);
    // Percentiles $3 $7 $9 $11, pmax: $6 of the `Min: ... Median: ... Max:` line.
    for n in [3, 7, 9, 11] {
        number(out, "Percentiles:", n);
    }
    let min_line = out.lines().find(|l| l.starts_with("Min: ") && l.contains("Median:") && l.contains("Max:"));
    min_line.expect("Min/Median/Max line").split_whitespace().nth(5).unwrap().parse::<f64>().unwrap();
}

#[test]
fn benchmark_sh_steps_run_through_the_db_bench_link() {
    let bin = tempfile::tempdir().unwrap();
    let exe = install(bin.path());
    let db = tempfile::tempdir().unwrap();
    let dbp = db.path();
    // bulkload: a vector memtable, no WAL, leader-only inserts, no automatic compaction.
    let (code, out, err) = run(
        &exe,
        &script_flags(
            dbp,
            &[
                "--benchmarks=fillrandom,stats",
                "--use_existing_db=0",
                "--disable_auto_compactions=1",
                "--sync=0",
                "--max_background_jobs=4",
                "--max_write_buffer_number=8",
                "--allow_concurrent_memtable_write=false",
                "--level0_file_num_compaction_trigger=10485760",
                "--level0_slowdown_writes_trigger=10485760",
                "--level0_stop_writes_trigger=10485760",
                "--threads=1",
                "--memtablerep=vector",
                "--disable_wal=1",
            ],
        ),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Memtablerep: VectorRepFactory"), "{out}");
    assert!(err.contains("--prepopulate_block_cache=1: ignored"), "{err}");
    assert_scrapable(&out, "fillrandom");
    // githash: `substr($5, 1, 10)` of the LOG's first "Git sha" line, the commit `--version` names too.
    let log = std::fs::read_to_string(dbp.join("db").join("LOG")).unwrap();
    let sha = log.lines().find(|l| l.contains("Git sha")).unwrap_or_else(|| panic!("no Git sha line in\n{log}"));
    let hash = sha.split_whitespace().nth(4).unwrap_or_else(|| panic!("no $5 in {sha:?}"));
    assert_eq!(hash, shaledb::BUILD_COMMIT, "{sha}");
    assert!(!hash.is_empty());
    // The LSM steps (automatic compactions off here, so that compact0 finds the bulk load's L0 files).
    let (code, out, err) = run(
        &exe,
        &script_flags(
            dbp,
            &[
                "--benchmarks=levelstats,flush,waitforcompaction,compact0,waitforcompaction,memstats,levelstats,stats",
                "--disable_auto_compactions=1",
                "--use_existing_db=1",
                "--sync=0",
                "--threads=1",
            ],
        ),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("compact0 compacted "), "{out}");
    assert!(out.contains("rocksdb.num-entries-active-mem-table: "), "{out}");
    // A step with a writer (merging) beside the readers, and range scans beside a writer.
    for (bench, extra) in
        [("readwhilemerging", "--merge_operator=put"), ("seekrandomwhilewriting", "--merge_operator=put")]
    {
        let benchmarks = format!("--benchmarks={bench},stats");
        let (code, out, err) = run(
            &exe,
            &script_flags(
                dbp,
                &[
                    &benchmarks,
                    extra,
                    "--seek_nexts=10",
                    "--use_existing_db=1",
                    "--sync=0",
                    "--threads=2",
                    "--duration=1",
                ],
            ),
        );
        assert_eq!(code, Some(0), "{bench}: {err}");
        assert_scrapable(&out, bench);
    }
}

/// benchmark.sh's `multireadrandom` job (`--batch_size=10`, `--multiread_batched` in later versions of the
/// script), read back as `summarize_result` reads it: the V2 layout (`$8 == "seconds"`, so `$11` is MB/s)
/// with its `(found of read)` message, every read counted once, in whole batches.
#[test]
fn benchmark_sh_multireadrandom_step_is_scrapable() {
    let bin = tempfile::tempdir().unwrap();
    let exe = install(bin.path());
    let db = tempfile::tempdir().unwrap();
    let fill = ["--benchmarks=fillrandom", "--use_existing_db=0", "--sync=0", "--threads=1"];
    let (code, _, err) = run(&exe, &script_flags(db.path(), &fill));
    assert_eq!(code, Some(0), "{err}");
    for batched in ["--multiread_batched=false", "--multiread_batched"] {
        let report = format!("--report_file={}", db.path().join("report.csv").display());
        let own = [
            &report,
            "--benchmarks=multireadrandom,stats",
            "--use_existing_db=1",
            "--threads=2",
            "--batch_size=10",
            batched,
            "--reads=3000",
        ];
        let (code, out, err) = run(&exe, &script_flags(db.path(), &own));
        assert_eq!(code, Some(0), "{err}");
        assert_scrapable(&out, "multireadrandom");
        let line = out.lines().rfind(|l| l.starts_with("multireadrandom ")).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f.len() >= 10 && f[7] == "seconds", "not benchmark.sh's V2 layout: {line}");
        assert_eq!(f[9], "operations;", "{line}");
        // 3000 reads per thread, in batches of 10: 6000 operations, and the message counts them all.
        assert_eq!(f[8], "6000", "{line}");
        let msg = &line[line.find('(').expect("a (found of read) message")..];
        let nums: Vec<u64> = msg
            .trim_matches(|c| c == '(' || c == ')')
            .split(" of ")
            .map(|n| n.trim_end_matches(" found").parse().unwrap())
            .collect();
        assert_eq!(nums[1], 6000, "{line}");
        assert!(nums[0] > 0 && nums[0] <= 6000, "{line}");
    }
    let (code, _, err) = run(&exe, &script_flags(db.path(), &["--benchmarks=multireadrandom", "--batch_size=0"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--batch_size") && err.contains("got 0"), "{err}");
}

#[test]
fn flags_shaledb_cannot_honour_are_errors_naming_them() {
    let bin = tempfile::tempdir().unwrap();
    let exe = install(bin.path());
    let db = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let wal = format!("--wal_dir={}", elsewhere.path().display());
    for (flag, arg) in [
        ("wal_dir", wal.as_str()),
        ("fifo_compaction_max_table_files_size_mb", "--compaction_style=2"),
        ("compaction_style", "--compaction_style=3"),
        ("memtablerep", "--memtablerep=hash_linkedlist"),
        ("subcompactions", "--subcompactions=0"),
        ("compression_max_dict_bytes", "--compression_max_dict_bytes=16384"),
        ("cache_high_pri_pool_ratio", "--cache_high_pri_pool_ratio=0.5"),
    ] {
        let args = vec![format!("--db={}", db.path().display()), "--num=10".into(), arg.to_string()];
        let (code, _, err) = run(&exe, &args);
        assert_eq!(code, Some(2), "{arg}: {err}");
        assert!(err.contains(flag), "{arg}: {err}");
    }
    // Not listed in --undefok: an unknown flag stays an error.
    let (code, _, err) = run(&exe, &["--num=10".into(), "--prepopulate_block_cache=1".into()]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn install_refuses_to_replace_without_force() {
    let bin = tempfile::tempdir().unwrap();
    install(bin.path());
    let again = Command::new(env!("CARGO_BIN_EXE_shaledb")).arg("install-db-bench").arg(bin.path()).output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    let forced = Command::new(env!("CARGO_BIN_EXE_shaledb"))
        .args(["install-db-bench", "--force"])
        .arg(bin.path())
        .output()
        .unwrap();
    assert!(forced.status.success());
    let (code, out, _) = run(&bin.path().join("db_bench"), &["--version".into()]);
    assert_eq!(code, Some(0));
    assert!(out.contains("0."), "{out}");
}
