//! Fuzz target: arbitrary bytes as a MANIFEST: one version edit (decode, encode, decode), and a log of edits.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_testkit::fuzz::manifest(data));
