//! Replays the committed corpus of the `resp` fuzz target (`fuzz/corpus/resp/`) and its saved crashers
//! (`fuzz/regressions/resp/`) through the fuzz driver on stable Rust.

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
