//! Replays the committed corpora of the `resp`, `commands` and `scripts` fuzz targets (`fuzz/corpus/<target>/`)
//! and their saved crashers (`fuzz/regressions/<target>/`) through the fuzz drivers on stable Rust.

use shaledb_server::fuzzing::{ServerFuzzer, Tally};
use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(PathBuf, Vec<u8>)> = entries
        .map(|e| e.expect("read the corpus directory").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let data = std::fs::read(&p).expect("read a corpus file");
            (p, data)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn resp_fuzz_corpus_replays_without_panics() {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let corpus = inputs(&fuzz.join("corpus/resp"));
    assert!(corpus.len() >= 2, "fuzz/corpus/resp holds {} inputs", corpus.len());
    let regressions = inputs(&fuzz.join("regressions/resp"));
    for (path, data) in corpus.iter().chain(&regressions) {
        if std::panic::catch_unwind(|| shaledb_server::resp::fuzz_requests(data)).is_err() {
            panic!("the resp driver panicked on {}", path.display());
        }
    }
}

/// Replays `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through a [`ServerFuzzer`] driver: the
/// whole-server targets (`commands`, `scripts`).
/// Also checks the driver does more than collect errors: part of what the corpus sends succeeds.
fn replay_server_target(target: &str, run: fn(&mut ServerFuzzer, &[u8]) -> Tally) {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let corpus = inputs(&fuzz.join("corpus").join(target));
    assert!(corpus.len() >= 2, "fuzz/corpus/{target} holds {} inputs", corpus.len());
    let regressions = inputs(&fuzz.join("regressions").join(target));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut fuzzer = ServerFuzzer::start(dir.path().join("db"));
    let mut total = Tally::default();
    for (path, data) in corpus.iter().chain(&regressions) {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut fuzzer, data))) {
            Ok(t) => {
                total.sent += t.sent;
                total.errors += t.errors;
            }
            Err(_) => panic!("the {target} driver failed on {}", path.display()),
        }
    }
    assert!(total.sent >= corpus.len() && total.errors < total.sent, "{target}: {total:?}");
    eprintln!("{target}: {total:?}");
}

#[test]
fn commands_fuzz_corpus_replays_against_a_server() {
    replay_server_target("commands", ServerFuzzer::run_commands);
}

#[test]
fn scripts_fuzz_corpus_replays_against_a_server() {
    replay_server_target("scripts", ServerFuzzer::run_scripts);
}
