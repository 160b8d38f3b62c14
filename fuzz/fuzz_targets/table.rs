//! Fuzz target: arbitrary bytes as an SST: Table::open, iteration both ways, seeks, filter probes, verify.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz::table(data));
