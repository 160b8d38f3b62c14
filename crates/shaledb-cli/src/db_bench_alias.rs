//! `db_bench` as another name of `shaledb bench`.
//!
//! RocksDB's tools/benchmark.sh runs `./db_bench` from its working directory with db_bench's flags and scrapes
//! its output. When this binary is started under the name `db_bench` (its file name, through a symbolic link
//! or a copy), the command line is read as `shaledb bench ...`; `shaledb install-db-bench DIR` makes the link.

use anyhow::Context;
use std::path::{Path, PathBuf};

/// The file name under which this binary behaves as `shaledb bench`.
pub const ALIAS: &str = "db_bench";

/// `shaledb install-db-bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory to put the `db_bench` link in (benchmark.sh runs `./db_bench` from its working directory).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Replace an existing `db_bench` link or file there.
    #[arg(long)]
    force: bool,
}

/// Rewrites `db_bench ARGS...` to `shaledb bench ARGS...`; any other command line is returned unchanged.
pub fn expand(mut args: Vec<String>) -> Vec<String> {
    let invoked_as = args.first().map(|a| Path::new(a).file_name().map(|n| n.to_string_lossy().into_owned()));
    if invoked_as.flatten().as_deref() == Some(ALIAS) {
        args.insert(1, "bench".to_string());
    }
    args
}

/// Creates `DIR/db_bench` as a symbolic link to the running binary.
pub fn install(a: Args) -> anyhow::Result<i32> {
    let exe = std::env::current_exe().context("finding the path of this binary")?;
    let exe = exe.canonicalize().with_context(|| format!("resolving {}", exe.display()))?;
    if !a.dir.is_dir() {
        anyhow::bail!("{} is not a directory", a.dir.display());
    }
    let link = a.dir.join(ALIAS);
    if link.symlink_metadata().is_ok() {
        if !a.force {
            anyhow::bail!("{} already exists (use --force to replace it)", link.display());
        }
        std::fs::remove_file(&link).with_context(|| format!("removing {}", link.display()))?;
    }
    std::os::unix::fs::symlink(&exe, &link)
        .with_context(|| format!("linking {} to {}", link.display(), exe.display()))?;
    println!("{} -> {}", link.display(), exe.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn db_bench_name_becomes_the_bench_command() {
        assert_eq!(expand(v(&["./db_bench", "--num=5"])), v(&["./db_bench", "bench", "--num=5"]));
        assert_eq!(expand(v(&["/x/y/db_bench"])), v(&["/x/y/db_bench", "bench"]));
        assert_eq!(expand(v(&["shaledb", "get", "db", "k"])), v(&["shaledb", "get", "db", "k"]));
        assert_eq!(expand(v(&["db_bench_x", "--num=5"])), v(&["db_bench_x", "--num=5"]));
        assert_eq!(expand(Vec::new()), Vec::<String>::new());
    }
}
