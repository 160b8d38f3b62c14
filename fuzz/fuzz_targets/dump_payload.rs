//! Fuzz target: arbitrary bytes as a DUMP payload, and as the object inside a payload with a valid footer
//! (RESTORE's decoders: RDB strings and lengths, LZF, listpack, ziplist, intset, zipmap, streams and their
//! consumer groups). No panic; a value that decodes survives encode and decode unchanged.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shaledb_server::types::rdb::fuzz_payload(data));
