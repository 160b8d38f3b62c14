//! Fuzz target: arbitrary bytes as client requests: the RESP parser (multibulk and inline) fed in pieces of
//! any size, then command lookup and arity checks (no engine). No panic, the same result whatever the split,
//! memory bounded by the input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_server::resp::fuzz_requests(data));
