//! Operations features (issue 17): `wal_bytes_per_sync`, the rate limiter writing flushes and compactions,
//! the periodic stats dump in `LOG`.

use shaledb::{Db, IoPriority, Options, RateLimiter, WriteOptions};
use shaledb_testkit::{MemFs, PowerLoss};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn on(fs: &MemFs, opts: Options) -> Options {
    Options { fs: Arc::new(fs.clone()), ..opts }
}

fn key(i: usize) -> String {
    format!("key{i:05}")
}

/// Writes 200 values of 1 KiB without `sync`, loses power, reopens: returns how many survived.
fn survivors_of_power_loss(wal_bytes_per_sync: u64) -> (usize, u64) {
    let fs = MemFs::new();
    let opts = on(&fs, Options { wal_bytes_per_sync, stats_dump_period_sec: 0, ..Options::default() });
    let db = Db::open("/db", opts.clone()).unwrap();
    for i in 0..200 {
        db.put_opt(&WriteOptions::default(), key(i), [b'v'; 1024]).unwrap();
    }
    let syncs = db.statistics().wal_syncs;
    fs.power_loss(PowerLoss::DropUnsynced, 7);
    drop(db);
    let db = Db::open("/db", opts).unwrap();
    let n = (0..200).take_while(|&i| db.get(key(i)).unwrap().is_some()).count();
    // A prefix survived, nothing after it.
    assert!((n..200).all(|i| db.get(key(i)).unwrap().is_none()));
    (n, syncs)
}

/// `wal_bytes_per_sync`: the WAL is synced each time 16 KiB more were written to it, so a power loss loses
/// at most the last 16 KiB of unsynced writes; without it, every unsynced write is lost.
#[test]
fn wal_bytes_per_sync_bounds_what_a_power_loss_takes() {
    let (kept, syncs) = survivors_of_power_loss(16 << 10);
    // 200 records of ~1 KiB: a sync every 16 KiB, at most 16 records after the last one.
    assert!(kept >= 200 - 16, "only {kept} of 200 writes survived");
    assert!((10..=14).contains(&syncs), "{syncs} WAL syncs for ~205 KiB at 16 KiB");
    let (kept, syncs) = survivors_of_power_loss(0);
    assert_eq!((kept, syncs), (0, 0));
}

/// Flushes are charged to the limiter at high priority, compactions at low, byte for byte what they write;
/// the WAL never. The properties report it, and one limiter shared by two databases counts both.
#[test]
fn rate_limiter_charges_every_table_write_and_nothing_else() {
    let limiter = RateLimiter::new(1 << 30, 100_000, 10, false).unwrap();
    let fs = MemFs::new();
    let opts = on(&fs, Options { rate_limiter: Some(limiter.clone()), ..crate::tiny_options() });
    let db = Db::open("/db", opts.clone()).unwrap();
    for i in 0..2000 {
        db.put(key(i % 700), format!("value {i} {}", "x".repeat(i % 50))).unwrap();
    }
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    let stats = db.statistics();
    assert!(stats.flush_bytes > 0 && stats.compaction_bytes_written > 0, "{stats:?}");
    let p = |name: &str| db.property_int(&format!("shaledb.rate-limiter-{name}")).unwrap();
    assert_eq!(p("flush-bytes"), stats.flush_bytes);
    assert_eq!(p("compaction-bytes"), stats.compaction_bytes_written);
    assert_eq!(p("total-bytes"), stats.flush_bytes + stats.compaction_bytes_written);
    assert_eq!(p("bytes-per-sec"), 1 << 30);
    assert_eq!(limiter.total_bytes_through(Some(IoPriority::High)), stats.flush_bytes);
    // The WAL (far more bytes than one flush) was never charged.
    assert!(stats.wal_bytes > 0);
    // Reads are right after writing through it.
    assert_eq!(db.get(key(5)).unwrap().unwrap(), format!("value 1405 {}", "x".repeat(1405 % 50)).into_bytes());
    // A second database on the same limiter adds its flush.
    let before = limiter.total_bytes_through(None);
    let other = Db::open("/other", opts).unwrap();
    other.put("k", "v").unwrap();
    other.flush().unwrap();
    let added = other.statistics().flush_bytes;
    assert_eq!(limiter.total_bytes_through(None), before + added);
    assert_eq!(db.property_int("shaledb.rate-limiter-total-bytes"), Some(before + added));
    // Without a limiter the properties are not offered.
    let plain = Db::open("/plain", on(&fs, Options::default())).unwrap();
    assert_eq!(plain.property_int("shaledb.rate-limiter-total-bytes"), None);
}

/// An auto-tuned limiter starts at half its limit; the property shows the current rate.
#[test]
fn auto_tuned_rate_limiter_reports_its_current_rate() {
    let limiter = RateLimiter::new(64 << 20, 100_000, 10, true).unwrap();
    let fs = MemFs::new();
    let db = Db::open("/db", on(&fs, Options { rate_limiter: Some(limiter), ..Options::default() })).unwrap();
    assert_eq!(db.property_int("shaledb.rate-limiter-bytes-per-sec"), Some(32 << 20));
}

fn log_text(fs: &MemFs) -> String {
    String::from_utf8_lossy(&fs.read_file(Path::new("/db/LOG")).unwrap_or_default()).into_owned()
}

/// `stats_dump_period_sec`: the stats text appears in `LOG` every period, one line per line of the text.
#[test]
fn stats_are_dumped_into_log_every_period() {
    let fs = MemFs::new();
    let db = Db::open("/db", on(&fs, Options { stats_dump_period_sec: 1, ..Options::default() })).unwrap();
    db.put("k", "v").unwrap();
    let start = Instant::now();
    while log_text(&fs).matches("------- DUMPING STATS -------").count() < 2 {
        assert!(start.elapsed() < Duration::from_secs(30), "no two dumps in 30 s:\n{}", log_text(&fs));
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = log_text(&fs);
    assert!(log.contains("** DB Stats **"), "{log}");
    assert!(log.lines().any(|l| l.contains("Cumulative writes: 1 writes")), "{log}");
    // Each dumped line is a LOG line of its own, with its timestamp.
    assert!(log.lines().all(|l| l.len() > 27 && l.as_bytes()[10] == b'T'), "{log}");
    db.close().unwrap();
}

/// Close does not wait for the period (600 s by default) to end.
#[test]
fn stats_dump_thread_stops_at_close() {
    let fs = MemFs::new();
    let db = Db::open("/db", on(&fs, Options::default())).unwrap();
    let start = Instant::now();
    db.close().unwrap();
    assert!(start.elapsed() < Duration::from_secs(60), "close waited {:?}", start.elapsed());
    assert!(!log_text(&fs).contains("DUMPING STATS"));
}
