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

/// `bench --db=DIR` on a directory holding a ShaleDB database replaces it and says what it removed.
#[test]
fn bench_db_on_an_old_database_says_what_it_removed() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    let args = ["bench", &db, "-num=100", "--benchmarks=fillseq", "--progress=false"];
    let (ok, _, err) = shaledb(&args);
    assert!(ok, "{err}");
    let (ok, _, err) = shaledb(&args);
    assert!(ok, "{err}");
    assert!(err.contains("removed the old database") && err.contains("CURRENT"), "{err}");
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
