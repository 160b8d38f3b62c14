//! Writes the frozen fixture database (`shaledb_testkit::fixture`) into an empty directory:
//!
//! ```sh
//! cargo run -p shaledb --example write_fixture -- crates/shaledb/tests/fixtures/v1
//! ```
//!
//! Run once per format version; the files it wrote for version 1 are committed, and every later build must read
//! them exactly (the test `fixture::the_frozen_v1_database_reads_exactly`). Never rewrite a committed fixture:
//! a format change that cannot read it bumps the format version, adds `fixtures/vN`, and states the migration.

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: write_fixture DIR (an empty or missing directory)");
        std::process::exit(2);
    };
    let dir = std::path::PathBuf::from(dir);
    if let Err(e) = shaledb_testkit::fixture::write(&dir) {
        eprintln!("write_fixture: {e}");
        std::process::exit(1);
    }
    println!("fixture written to {}", dir.display());
}
