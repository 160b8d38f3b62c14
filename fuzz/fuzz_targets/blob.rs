//! Fuzz target: arbitrary bytes as a blob file: open, verify, and reads through blob references.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz::blob(data));
