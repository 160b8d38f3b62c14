//! Fuzz target: arbitrary bytes as a WAL: the log reader to the end, each record decoded as a write batch.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz::wal(data));
