//! Fuzz target: arbitrary bytes as a data or index block: Block::new and its iterator in both key orders.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz::block(data));
