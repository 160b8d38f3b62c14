//! The rate limiter for background writes: RocksDB's `GenericRateLimiter` (`NewGenericRateLimiter`), a token
//! bucket shared by any number of databases through an `Arc` in [`crate::Options::rate_limiter`].
//!
//! Every `refill_period_us` the bucket receives `rate_bytes_per_sec * refill_period_us / 1e6` bytes (the
//! *single burst*, at least 1). A request takes bytes from the bucket when it holds enough and nobody waits;
//! otherwise it queues by priority and waits for a refill. At each refill the queued requests are granted in
//! order, the high-priority queue first, except that with probability `1/fairness` the low-priority queue goes
//! first (so low priority is never starved forever). A request larger than the bucket holds at a refill is
//! granted in part and granting stops until the next refill (RocksDB's rule, which keeps a large request from
//! starving when the rate was lowered under it). Unused bytes carry over to the next period only up to one burst.
//!
//! As RocksDB's default mode (`kWritesOnly`), only writes are charged: flushes at [`IoPriority::High`],
//! compactions at [`IoPriority::Low`], so a flush, which frees a memtable writers may be waiting for, is not
//! starved behind compaction. Foreground writes (the WAL) are never charged.
//!
//! A job waits for the limiter holding no lock of the database. Close stops a flush or compaction between two
//! user keys, so with a limiter it waits for the writes in progress to be granted: a data block, or the index
//! and filter blocks that end a table, at the current rate.
//!
//! **Auto-tuning** (`auto_tuned`), RocksDB's: the rate starts at half the limit and, every 100 refill periods,
//! is recomputed from how often a request had to wait for a refill (a *drain*) in the periods since: no drain
//! at all sets it to the floor (limit / 20); under 50% of periods drained lowers it by 5%; over 90% raises it
//! by 5%; always within [limit / 20, limit].

use parking_lot::{Condvar, Mutex};
use shaledb_vfs::{Error, Result, WritableFile};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The priority of a request (RocksDB's `Env::IOPriority`, the two levels ShaleDB uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoPriority {
    /// Compaction writes.
    Low,
    /// Flush writes.
    High,
}

impl IoPriority {
    fn index(self) -> usize {
        match self {
            IoPriority::Low => 0,
            IoPriority::High => 1,
        }
    }
}

/// Refill periods between two auto-tunings (RocksDB's `kRefillsPerTune`).
const REFILLS_PER_TUNE: u64 = 100;
/// The auto-tuned rate stays within [limit / this, limit] (RocksDB's `kAllowedRangeFactor`).
const ALLOWED_RANGE_FACTOR: u64 = 20;
/// Largest `refill_period_us` accepted: 10 s.
pub const MAX_REFILL_PERIOD_US: u64 = 10_000_000;

/// A monotonic clock in microseconds; tests inject their own.
pub(crate) trait MicrosClock: Send + Sync {
    fn now_micros(&self) -> u64;
}

struct RealClock(Instant);

impl MicrosClock for RealClock {
    fn now_micros(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// What a queued request learns when it looks again.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Poll {
    Granted,
    /// Not yet: look again at this time (the next refill).
    WaitUntil(u64),
}

/// The bucket's arithmetic, a pure state machine over the time it is given.
pub(crate) struct Bucket {
    max_rate: u64,
    rate: u64,
    refill_period_us: u64,
    refill_bytes: u64,
    available: u64,
    next_refill_us: u64,
    /// Queued requests per priority: (ticket, bytes still wanted).
    queues: [VecDeque<(u64, u64)>; 2],
    /// Tickets granted, not yet collected by their waiter.
    granted: Vec<u64>,
    next_ticket: u64,
    fairness: u64,
    rng: u64,
    auto_tuned: bool,
    tuned_at_us: u64,
    drains: u64,
    /// The refill time whose drain was counted (one drain per period at most).
    drain_counted_for: Option<u64>,
    total_bytes: [u64; 2],
    total_requests: [u64; 2],
}

impl Bucket {
    pub(crate) fn new(rate: u64, refill_period_us: u64, fairness: u32, auto_tuned: bool, now: u64) -> Bucket {
        let mut b = Bucket {
            max_rate: rate,
            rate: 0,
            refill_period_us,
            refill_bytes: 0,
            available: 0,
            next_refill_us: now,
            queues: [VecDeque::new(), VecDeque::new()],
            granted: Vec::new(),
            next_ticket: 0,
            fairness: u64::from(fairness),
            rng: 0x9E37_79B9_7F4A_7C15,
            auto_tuned,
            tuned_at_us: now,
            drains: 0,
            drain_counted_for: None,
            total_bytes: [0; 2],
            total_requests: [0; 2],
        };
        b.set_rate(if auto_tuned { (rate / 2).max(1) } else { rate });
        b
    }

    fn set_rate(&mut self, rate: u64) {
        self.rate = rate;
        let bytes = u128::from(rate) * u128::from(self.refill_period_us) / 1_000_000;
        self.refill_bytes = u64::try_from(bytes).unwrap_or(u64::MAX).max(1);
    }

    /// The most one request may ask for (RocksDB's `GetSingleBurstBytes`).
    pub(crate) fn burst(&self) -> u64 {
        self.refill_bytes
    }

    /// One in `fairness`, from a xorshift generator (deterministic: tests depend on it only through its
    /// frequency).
    fn one_in_fairness(&mut self) -> bool {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng.is_multiple_of(self.fairness)
    }

    /// Asks for `bytes` (at most [`Bucket::burst`]): `None` when taken at once, else the ticket to poll.
    pub(crate) fn request(&mut self, now: u64, bytes: u64, pri: IoPriority) -> Option<u64> {
        if self.auto_tuned && now.saturating_sub(self.tuned_at_us) >= REFILLS_PER_TUNE * self.refill_period_us {
            self.tune(now);
        }
        let p = pri.index();
        self.total_requests[p] += 1;
        if self.queues.iter().all(VecDeque::is_empty) && self.available >= bytes {
            self.available -= bytes;
            self.total_bytes[p] += bytes;
            return None;
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.queues[p].push_back((ticket, bytes));
        Some(ticket)
    }

    /// Looks at a queued request at time `now`, refilling when a refill is due.
    pub(crate) fn poll(&mut self, now: u64, ticket: u64) -> Poll {
        if now >= self.next_refill_us {
            self.refill(now);
        }
        if let Some(i) = self.granted.iter().position(|&t| t == ticket) {
            self.granted.swap_remove(i);
            return Poll::Granted;
        }
        if self.drain_counted_for != Some(self.next_refill_us) {
            self.drain_counted_for = Some(self.next_refill_us);
            self.drains += 1;
        }
        Poll::WaitUntil(self.next_refill_us)
    }

    fn refill(&mut self, now: u64) {
        self.next_refill_us = now.saturating_add(self.refill_period_us);
        if self.available < self.refill_bytes {
            self.available += self.refill_bytes;
        }
        let order = if self.one_in_fairness() {
            [IoPriority::Low, IoPriority::High]
        } else {
            [IoPriority::High, IoPriority::Low]
        };
        for pri in order {
            let p = pri.index();
            while let Some(front) = self.queues[p].front_mut() {
                if self.available < front.1 {
                    // Partly granted; nothing more this period.
                    front.1 -= self.available;
                    self.total_bytes[p] += self.available;
                    self.available = 0;
                    return;
                }
                self.available -= front.1;
                self.total_bytes[p] += front.1;
                self.granted.push(front.0);
                self.queues[p].pop_front();
            }
        }
    }

    fn tune(&mut self, now: u64) {
        let elapsed = now.saturating_sub(self.tuned_at_us);
        let intervals = elapsed.div_ceil(self.refill_period_us).max(1);
        let drained_pct = self.drains.saturating_mul(100) / intervals;
        let floor = (self.max_rate / ALLOWED_RANGE_FACTOR).max(1);
        let prev = self.rate;
        let new = if drained_pct == 0 {
            floor
        } else if drained_pct < 50 {
            floor.max((u128::from(prev) * 100 / 105) as u64)
        } else if drained_pct > 90 {
            self.max_rate.min(u64::try_from(u128::from(prev) * 105 / 100).unwrap_or(u64::MAX))
        } else {
            prev
        };
        if new != prev {
            self.set_rate(new);
        }
        self.drains = 0;
        self.tuned_at_us = now;
    }
}

/// A token-bucket limit on the bytes flushes and compactions write (see the module documentation).
/// Create it with [`RateLimiter::new`] and share it between databases by cloning the `Arc`.
///
/// ```
/// use shaledb::{Options, RateLimiter};
///
/// let limiter = RateLimiter::new(64 << 20, 100_000, 10, false)?; // 64 MiB/s
/// let opts = Options { rate_limiter: Some(limiter.clone()), ..Options::default() };
/// # drop(opts);
/// assert_eq!(limiter.bytes_per_second(), 64 << 20);
/// # Ok::<(), shaledb::Error>(())
/// ```
pub struct RateLimiter {
    bucket: Mutex<Bucket>,
    cv: Condvar,
    clock: Box<dyn MicrosClock>,
    params: (u64, u64, u32, bool),
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rate, period, fairness, auto) = self.params;
        f.debug_struct("RateLimiter")
            .field("rate_bytes_per_sec", &rate)
            .field("refill_period_us", &period)
            .field("fairness", &fairness)
            .field("auto_tuned", &auto)
            .finish()
    }
}

impl RateLimiter {
    /// RocksDB's `NewGenericRateLimiter(rate_bytes_per_sec, refill_period_us, fairness, kWritesOnly,
    /// auto_tuned)`; RocksDB's defaults are `refill_period_us` 100 000 (100 ms) and `fairness` 10. With
    /// `auto_tuned`, `rate_bytes_per_sec` is the upper limit of the tuned rate.
    ///
    /// `InvalidArgument` unless `rate_bytes_per_sec` > 0, `refill_period_us` in 1..=10 000 000 and `fairness`
    /// in 1..=100 (RocksDB asserts the first two and clamps a larger fairness to 100; ShaleDB says so instead).
    pub fn new(rate_bytes_per_sec: u64, refill_period_us: u64, fairness: u32, auto_tuned: bool) -> Result<Arc<Self>> {
        let start = Instant::now();
        Self::with_clock(rate_bytes_per_sec, refill_period_us, fairness, auto_tuned, Box::new(RealClock(start)))
            .map(Arc::new)
    }

    pub(crate) fn with_clock(
        rate: u64,
        period: u64,
        fairness: u32,
        auto_tuned: bool,
        clock: Box<dyn MicrosClock>,
    ) -> Result<Self> {
        if rate == 0 || !(1..=MAX_REFILL_PERIOD_US).contains(&period) || !(1..=100).contains(&fairness) {
            return Err(Error::InvalidArgument(format!(
                "rate limiter: rate_bytes_per_sec must be positive (got {rate}), refill_period_us in \
                 1..={MAX_REFILL_PERIOD_US} (got {period}), fairness in 1..=100 (got {fairness})"
            )));
        }
        let now = clock.now_micros();
        Ok(RateLimiter {
            bucket: Mutex::new(Bucket::new(rate, period, fairness, auto_tuned, now)),
            cv: Condvar::new(),
            clock,
            params: (rate, period, fairness, auto_tuned),
        })
    }

    /// The parameters it was created with: (`rate_bytes_per_sec`, `refill_period_us`, `fairness`,
    /// `auto_tuned`).
    pub fn params(&self) -> (u64, u64, u32, bool) {
        self.params
    }

    /// Waits until `bytes` may be written at priority `pri` (RocksDB's `Request`, split into requests of at
    /// most one burst as RocksDB's `RequestToken` does).
    pub fn request(&self, bytes: u64, pri: IoPriority) {
        let mut left = bytes;
        let mut b = self.bucket.lock();
        while left > 0 {
            let chunk = left.min(b.burst());
            left -= chunk;
            let Some(ticket) = b.request(self.clock.now_micros(), chunk, pri) else { continue };
            loop {
                let now = self.clock.now_micros();
                match b.poll(now, ticket) {
                    Poll::Granted => break,
                    Poll::WaitUntil(t) => {
                        // Bounded, so a clock other than the real one (tests) is looked at again soon.
                        let wait = Duration::from_micros(t.saturating_sub(now))
                            .clamp(Duration::from_micros(50), Duration::from_millis(20));
                        self.cv.wait_for(&mut b, wait);
                    }
                }
            }
            // A refill may have granted others too.
            self.cv.notify_all();
        }
    }

    /// The current rate in bytes per second (below the limit while auto-tuning lowers it).
    pub fn bytes_per_second(&self) -> u64 {
        self.bucket.lock().rate
    }

    /// Changes the rate (RocksDB's `SetBytesPerSecond`); with auto-tuning, the new limit. 0 is
    /// `InvalidArgument`.
    pub fn set_bytes_per_second(&self, rate: u64) -> Result<()> {
        if rate == 0 {
            return Err(Error::InvalidArgument("rate limiter: rate_bytes_per_sec must be positive".into()));
        }
        let mut b = self.bucket.lock();
        b.max_rate = rate;
        b.set_rate(rate);
        Ok(())
    }

    /// The most bytes one refill gives (RocksDB's `GetSingleBurstBytes`).
    pub fn single_burst_bytes(&self) -> u64 {
        self.bucket.lock().burst()
    }

    /// Bytes granted so far at `pri`, or at every priority with `None` (RocksDB's `GetTotalBytesThrough`).
    pub fn total_bytes_through(&self, pri: Option<IoPriority>) -> u64 {
        let b = self.bucket.lock();
        match pri {
            Some(p) => b.total_bytes[p.index()],
            None => b.total_bytes.iter().sum(),
        }
    }

    /// Requests made so far at `pri`, or at every priority with `None` (RocksDB's `GetTotalRequests`).
    pub fn total_requests(&self, pri: Option<IoPriority>) -> u64 {
        let b = self.bucket.lock();
        match pri {
            Some(p) => b.total_requests[p.index()],
            None => b.total_requests.iter().sum(),
        }
    }
}

/// A file whose appends are charged to a rate limiter before they are written.
struct LimitedFile {
    file: Box<dyn WritableFile>,
    limiter: Arc<RateLimiter>,
    pri: IoPriority,
}

impl WritableFile for LimitedFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.limiter.request(data.len() as u64, self.pri);
        self.file.append(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }
    fn len(&self) -> u64 {
        self.file.len()
    }
    fn path(&self) -> &Path {
        self.file.path()
    }
    fn sync_handle(&self) -> Result<Box<dyn shaledb_vfs::SyncHandle>> {
        self.file.sync_handle()
    }
}

/// A file system whose created files are charged to `limiter` at `pri`: what flushes and compactions write
/// their tables through. Everything else goes straight to `fs`.
pub(crate) struct LimitedFs<'a> {
    pub(crate) fs: &'a dyn shaledb_vfs::Fs,
    pub(crate) limiter: Arc<RateLimiter>,
    pub(crate) pri: IoPriority,
}

impl std::fmt::Debug for LimitedFs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimitedFs").field("fs", &self.fs).field("pri", &self.pri).finish()
    }
}

impl LimitedFs<'_> {
    fn wrap(&self, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(LimitedFile { file, limiter: self.limiter.clone(), pri: self.pri })
    }
}

impl shaledb_vfs::Fs for LimitedFs<'_> {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.fs.create(path).map(|f| self.wrap(f))
    }
    fn create_with(&self, path: &Path, hints: shaledb_vfs::WriteHints) -> Result<Box<dyn WritableFile>> {
        self.fs.create_with(path, hints).map(|f| self.wrap(f))
    }
    fn open(&self, path: &Path, hints: shaledb_vfs::ReadHints) -> Result<Arc<dyn shaledb_vfs::RandomAccessFile>> {
        self.fs.open(path, hints)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.fs.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.fs.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.fs.hard_link(from, to)
    }
    fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.fs.remove_dir(dir)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.fs.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.fs.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.fs.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.fs.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.fs.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.fs.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn shaledb_vfs::FileLock>> {
        self.fs.lock(path)
    }
}

/// Runs `f` with the file system a background job at `pri` writes its tables through: `fs` itself without a
/// limiter, else `fs` charged to it.
pub(crate) fn with_limited_fs<T>(
    fs: &dyn shaledb_vfs::Fs,
    limiter: Option<&Arc<RateLimiter>>,
    pri: IoPriority,
    f: impl FnOnce(&dyn shaledb_vfs::Fs) -> T,
) -> T {
    match limiter {
        Some(l) => f(&LimitedFs { fs, limiter: l.clone(), pri }),
        None => f(fs),
    }
}

#[cfg(test)]
#[path = "rate_limiter_tests.rs"]
mod tests;
