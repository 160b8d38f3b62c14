//! Fuzz target: arbitrary bytes as a sequence of commands (a name from the command table, then arguments: tokens
//! such as key names, edge numbers and keywords, or raw bytes) sent to a whole server in this process; every
//! command answers one well-formed reply and the server survives every input.
#![no_main]

use shaledb_server::fuzzing::ServerFuzzer;
use std::sync::{Mutex, OnceLock};

/// The server lives across inputs on purpose (its caches, memtables and Lua VMs are kept), so what it holds
/// when the process ends is not a leak: LeakSanitizer is off for this target.
#[no_mangle]
pub extern "C" fn __asan_default_options() -> *const std::ffi::c_char {
    c"detect_leaks=0".as_ptr()
}

static FUZZER: OnceLock<Mutex<(tempfile::TempDir, ServerFuzzer)>> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let cell = FUZZER.get_or_init(|| {
        // On tmpfs when there is one: the server writes on every command.
        let base = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
        let dir = tempfile::Builder::new().prefix("shaledb-fuzz-").tempdir_in(base).expect("tempdir");
        let fuzzer = ServerFuzzer::start(dir.path().join("db"));
        Mutex::new((dir, fuzzer))
    });
    let mut guard = cell.lock().unwrap_or_else(|e| e.into_inner());
    let _ = guard.1.run_commands(data);
});
