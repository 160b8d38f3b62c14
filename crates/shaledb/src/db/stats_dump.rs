//! `stats_dump_period_sec`: a thread that writes the `stats` property's text into `LOG` every period, as
//! RocksDB's periodic `DumpStats` does. Each line of the text becomes one `LOG` line after a
//! `------- DUMPING STATS -------` line (the `LOG` grammar keeps one event per line; docs/format/
//! info-log-and-lost.md).
//!
//! The thread waits on `bg_cv` under the state lock, which close notifies after setting `shutting_down`
//! (background.rs `shutdown`): it stops as soon as the database closes, whatever the period. It is joined
//! with the background threads, but not counted in `bg_threads_alive` (it does no flush or compaction).

use super::DbInner;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Starts the thread when `stats_dump_period_sec` is not 0; `None` when it is.
pub(super) fn spawn(inner: &Arc<DbInner>) -> std::io::Result<Option<JoinHandle<()>>> {
    let secs = inner.opts.stats_dump_period_sec;
    if secs == 0 {
        return Ok(None);
    }
    let db = inner.clone();
    std::thread::Builder::new()
        .name("shaledb-stats".into())
        .spawn(move || run(&db, Duration::from_secs(u64::from(secs))))
        .map(Some)
}

fn run(inner: &DbInner, period: Duration) {
    let mut next = Instant::now() + period;
    let mut st = inner.state.lock();
    while !inner.shutting_down.load(Ordering::Acquire) {
        let now = Instant::now();
        if now < next {
            inner.bg_cv.wait_for(&mut st, next - now);
            continue;
        }
        parking_lot::MutexGuard::unlocked(&mut st, || dump(inner));
        next += period;
        if next <= now {
            // Fell behind (a suspended process): the next dump is one period from now.
            next = now + period;
        }
    }
}

/// Writes the stats into `LOG`.
pub(crate) fn dump(inner: &DbInner) {
    let text = super::properties::stats_text(inner);
    inner.info_log.log("------- DUMPING STATS -------");
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        inner.info_log.log(line);
    }
}
