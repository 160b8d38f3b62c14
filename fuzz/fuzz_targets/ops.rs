//! Fuzz target: a program of writes (single deletions and range deletions among them, in batches or not),
//! flushes, compactions, snapshots and reopens, run on a database in memory against the model (see
//! `shaledb_testkit::fuzz_ops`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz_ops::ops(data));
