//! Fuzz target: arbitrary bytes as a database's OPTIONS file, loaded with `Options::load_latest_with`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz::options(data));
