//! Fuzz target: a small database with one file (MANIFEST, a WAL, a table, CURRENT) damaged as the input says,
//! opened with `Db::open` and read in full (see `shaledb_testkit::fuzz_db`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz_db::database(data));
