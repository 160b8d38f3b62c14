//! The `shaledb` tools as a user runs them: the real binary on real directories (errors, key tools, dump, flag
//! spellings, stress, version).

use std::path::Path;
use std::process::Command;

/// Runs `shaledb ARGS`: (exit code, stdout, stderr).
fn shaledb<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Issue 10: `error: destroying .../afile: I/O error during open lock on .../afile/LOCK: Not a directory (os
/// error 20): I/O error during open lock on ...: Not a directory (os error 20): Not a directory (os error 20)`.
#[test]
fn an_error_names_its_os_cause_once() {
    let tmp = shaledb_testkit::tempdir();
    let file = tmp.path().join("afile");
    std::fs::write(&file, b"a regular file").unwrap();
    let under = file.join("db");
    let os = std::io::Error::from_raw_os_error(20).to_string();
    let db_flag = format!("--db={}", p(&under));
    let runs: Vec<Vec<&str>> = vec![
        vec!["bench", &db_flag, "--benchmarks=fillseq", "--num=10", "--progress=false"],
        vec!["stress", "--destroy", "--keys", "10", "--path", p(&under)],
    ];
    for args in runs {
        let (code, out, err) = shaledb(&args);
        assert_ne!(code, Some(0), "{args:?} succeeded: {out}{err}");
        let line = err.lines().find(|l| l.contains(&os)).unwrap_or_else(|| panic!("{args:?}: no OS cause: {err}"));
        assert_eq!(err.matches(&os).count(), 1, "{args:?}: {err}");
        assert!(line.contains("LOCK") || line.contains(p(&under)), "{args:?}: {line}");
    }
}
