//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) and every saved crasher
//! (`fuzz/regressions/<target>/`) through the fuzz drivers on stable Rust, so a decoder change that would
//! panic on a known input fails `cargo test` (D4: corrupt input is an error, never a panic or a wrong value).

use shaledb_testkit::fuzz::{corpus_inputs, TARGETS};
use std::path::PathBuf;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

#[test]
fn fuzz_corpora_and_regressions_replay_without_panics() {
    let mut total = 0;
    for (name, driver) in TARGETS {
        let corpus = corpus_inputs(&fuzz_dir().join("corpus").join(name)).expect("read the corpus");
        assert!(corpus.len() >= 2, "fuzz/corpus/{name} holds {} inputs", corpus.len());
        let regressions = corpus_inputs(&fuzz_dir().join("regressions").join(name)).expect("read the regressions");
        for (path, data) in corpus.iter().chain(&regressions) {
            if let Err(panic) = std::panic::catch_unwind(|| driver(data)) {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
                panic!("{name} driver panicked on {}: {}", path.display(), msg.unwrap_or_default());
            }
            total += 1;
        }
    }
    eprintln!("replayed {total} fuzz inputs");
}
