//! Crash, fault and corruption tests of the engine: the proofs behind docs/durability.md. One test binary;
//! modules by theme. Every test is seeded (`SHALEDB_TEST_SEED` replays a failure) and sized by budgets
//! (`SHALEDB_TORTURE_BUDGET` multiplies the work of the sweeps; `SHALEDB_CRASH_CYCLES` sets the kill cycles).

mod bit_flips;
mod checkpoint_crash;
mod checkpoint_kill;
mod crash_kill;
mod fuzz_corpora;
mod ingest_crash;
mod io_errors;
mod losses;
mod mixed_crash;
mod numbers;
mod options_crash;
mod power_loss;
mod short_runs;
mod sync_wal;
mod torn_tails;
mod wal_full_disk;
mod wal_modes;
mod wal_switch;

use shaledb::{Db, Options};
use shaledb_testkit::workload::tiny_options;
use shaledb_testkit::MemFs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};

/// Where every in-memory database of these tests lives.
pub const DB: &str = "/db";

/// The database directory on a [`MemFs`].
pub fn db_path() -> &'static Path {
    Path::new(DB)
}

/// Tiny options (see [`tiny_options`]) on `fs`.
pub fn mem_options(fs: &MemFs) -> Options {
    tiny_options(Arc::new(fs.clone()))
}

/// Opens the database at [`DB`] on `fs` with `opts` (whose `fs` is replaced by `fs`).
pub fn open_on(fs: &MemFs, opts: &Options) -> shaledb::Result<Db> {
    Db::open(DB, Options { fs: Arc::new(fs.clone()), ..opts.clone() })
}

/// Re-executes this test binary to run only the test `test` (a child side, which acts on the `envs` it is
/// given), its stdout read line by line into the returned channel by the returned thread.
pub fn spawn_self(
    test: &str,
    envs: &[(&str, String)],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    use std::io::BufRead;
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = std::process::Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx, reader)
}

/// Multiplier of the default work of each sweep: `SHALEDB_TORTURE_BUDGET` (default 1).
pub fn budget() -> u64 {
    shaledb_testkit::budget_from_env("SHALEDB_TORTURE_BUDGET", 1).max(1)
}

static PANIC_HOOK: Once = Once::new();
static BG_PANICS: AtomicUsize = AtomicUsize::new(0);
static BG_PANIC_MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Starts counting panics on the engine's background threads (a panic there would otherwise go unseen:
/// the test thread only notices that work stops). Idempotent.
pub fn watch_background_panics() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            if name.starts_with("shaledb") {
                BG_PANICS.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut m) = BG_PANIC_MESSAGES.lock() {
                    m.push(format!("{name}: {info}"));
                }
            }
            previous(info);
        }));
    });
}

/// Fails the test when any background thread panicked since the process started.
pub fn assert_no_background_panics() {
    let n = BG_PANICS.load(Ordering::SeqCst);
    if n > 0 {
        let msgs = BG_PANIC_MESSAGES.lock().map(|m| m.join("\n")).unwrap_or_default();
        panic!("{n} panics on background threads:\n{msgs}");
    }
}
