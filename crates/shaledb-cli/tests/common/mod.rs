//! Helpers shared by the CLI's test files: each runs the real `shaledb` binary that Cargo built for the tests.
//! Each test file is its own crate and uses some of them, so the rest would be dead code there.
#![allow(dead_code)]

pub mod cluster;

use std::path::Path;
use std::process::Command;

/// Runs `shaledb ARGS`: (exit code, stdout, stderr).
pub fn shaledb<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `shaledb ARGS`, which must exit 0; its stdout.
pub fn ok(args: &[&str]) -> String {
    let (code, out, err) = shaledb(args);
    assert_eq!(code, Some(0), "{args:?}: {out}{err}");
    out
}

/// A path as the `&str` argument the binary takes.
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}
