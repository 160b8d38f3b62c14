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
