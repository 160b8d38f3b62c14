//! Records the git commit the engine is built from (`shaledb::BUILD_COMMIT`: the LOG's first
//! lines and `shaledb --version`), or "unknown" outside a git checkout (a source archive, a crate download) or
//! without git. Rebuilt when HEAD or the branch it names moves.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(dir).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| ".".into()));
    let commit = git(&dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SHALEDB_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&dir, &["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        if let Some(p) = git(&dir, &["rev-parse", "--git-path", &name]) {
            let p = dir.join(p);
            // A path that does not exist would make cargo run this script on every build.
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}
