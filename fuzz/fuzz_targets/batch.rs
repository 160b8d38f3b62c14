//! Fuzz target: arbitrary bytes as a write batch: BatchRep::from_bytes, iteration, rebuild.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz::batch(data));
