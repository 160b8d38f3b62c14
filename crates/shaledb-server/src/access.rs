//! The access clock: when each key was last read or written, and (under an LFU `maxmemory-policy`) its
//! logarithmic access counter, for OBJECT IDLETIME and OBJECT FREQ. Keys live in the engine, with no
//! in-memory object to carry Redis's 24 LRU/LFU bits, so the clock keeps them beside the engine:
//!
//! - one 16-byte slot per key, holding a 64-bit hash of (server, database, key) and the key's clock,
//!   whatever the key's length (two keys whose hashes collide share a slot: both then report the more
//!   recent access);
//! - a set-associative table: a key can live only in the [`WAYS`] slots of one set (one 64-byte cache
//!   line), so a touch costs one cache miss and no allocation; a new key that finds its set full takes the
//!   slot of the set's least recently accessed key, which the clock then forgets;
//! - [`SHARDS`] shards, each behind its own short lock: a read touches one shard, never a global lock. A
//!   shard's table starts small and doubles as it fills (to three quarters), up to [`CAPACITY`] slots in
//!   all (16 MiB), so the memory follows the number of keys;
//! - the time is the kernel's coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`, updated every tick, a read
//!   of shared memory), as Redis reads its cached `lruclock` rather than the time on every access.
//!
//! A key the clock does not know (forgotten, or not accessed since the server started) reports the time
//! since the server started: never less than its true idle time. Its LFU counter starts again at 5, as a
//! new key's does in Redis.
//!
//! Every `get_meta` of a key that exists touches it (reads and writes go through it), and every write of a
//! key's meta record (store/write.rs) records an access; TYPE, TTL and the like, EXISTS and OBJECT read
//! without touching, as Redis's `LOOKUP_NOTOUCH` lookups. The clock is in memory only: after a restart
//! every key reports the time since the start.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// Shards of the clock.
pub const SHARDS: usize = 64;
/// Slots the clock holds at most (16 bytes each).
pub const CAPACITY: usize = 1 << 20;
/// Slots one shard holds at most.
pub const SHARD_CAPACITY: usize = CAPACITY / SHARDS;
/// Slots per set: four 16-byte slots fill one cache line.
pub const WAYS: usize = 4;
/// Slots of a shard's first table.
const FIRST_SLOTS: usize = 16 * WAYS;
/// A new key's LFU counter (Redis's `LFU_INIT_VAL`).
pub const LFU_INIT: u8 = 5;

/// One key's clock: last access (seconds since the clock's start), LFU counter and the minute (16 bits,
/// as Redis's) the counter was last decremented.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Entry {
    access_s: u32,
    counter: u8,
    decr_min: u16,
}

impl Entry {
    fn pack(self) -> u64 {
        self.access_s as u64 | (self.counter as u64) << 32 | (self.decr_min as u64) << 40
    }

    fn unpack(w: u64) -> Entry {
        Entry { access_s: w as u32, counter: (w >> 32) as u8, decr_min: (w >> 40) as u16 }
    }
}

/// One shard's table: `slots[2 * i]` is slot `i`'s key hash (0: empty), `slots[2 * i + 1]` its packed
/// [`Entry`]; slots `WAYS * s .. WAYS * (s + 1)` are set `s`. Its length is a power of two times `2 * WAYS`.
#[derive(Default)]
struct Shard {
    slots: Vec<u64>,
    used: usize,
}

impl Shard {
    fn sets(&self) -> usize {
        self.slots.len() / (2 * WAYS)
    }

    /// The first slot of `h`'s set (bits 0..32 of the hash; the shard came from bits 32..38).
    fn set_of(&self, h: u64) -> usize {
        (h as u32 as usize & (self.sets() - 1)) * WAYS
    }

    fn find(&self, h: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let set = self.set_of(h);
        (set..set + WAYS).find(|&i| self.slots[2 * i] == h)
    }

    fn get(&self, h: u64) -> Option<Entry> {
        self.find(h).map(|i| Entry::unpack(self.slots[2 * i + 1]))
    }

    /// The slot for a key not in the table: an empty one of its set, else the set's least recently
    /// accessed (whose key is forgotten). Grows the table first when it is three quarters full.
    fn claim(&mut self, h: u64) -> usize {
        if self.slots.is_empty() || (self.used * 4 >= self.slots.len() / 2 * 3 && self.slots.len() / 2 < SHARD_CAPACITY)
        {
            self.grow();
        }
        let set = self.set_of(h);
        let slot = (set..set + WAYS)
            .find(|&i| self.slots[2 * i] == 0)
            .unwrap_or_else(|| (set..set + WAYS).min_by_key(|&i| self.slots[2 * i + 1] as u32).unwrap_or(set));
        if self.slots[2 * slot] == 0 {
            self.used += 1;
        }
        self.slots[2 * slot] = h;
        slot
    }

    /// Doubles the table (the first time: makes it), moving every key to its set in the new one; a key
    /// whose new set is full is forgotten (only possible if its old set's keys all moved there).
    fn grow(&mut self) {
        let slots = (self.slots.len() * 2).max(2 * FIRST_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![0; slots]);
        self.used = 0;
        for pair in old.chunks_exact(2) {
            if pair[0] != 0 {
                let set = self.set_of(pair[0]);
                if let Some(i) = (set..set + WAYS).find(|&i| self.slots[2 * i] == 0) {
                    self.slots[2 * i] = pair[0];
                    self.slots[2 * i + 1] = pair[1];
                    self.used += 1;
                }
            }
        }
    }

    fn remove(&mut self, h: u64) {
        if let Some(i) = self.find(h) {
            self.slots[2 * i] = 0;
            self.used -= 1;
        }
    }
}

struct Clock {
    shards: Vec<Mutex<Shard>>,
    /// The coarse clock's reading at the start, in seconds.
    start: u64,
}

static CLOCK: LazyLock<Clock> = LazyLock::new(Clock::new);

/// The servers whose `maxmemory-policy` is an LFU one, with their `lfu-log-factor` and `lfu-decay-time`
/// (keyed like the clock, by the server's engine address), and how many there are: when none, an access
/// reads one atomic and no lock.
static LFU: LazyLock<Mutex<HashMap<usize, Lfu>>> = LazyLock::new(Default::default);
static LFU_SERVERS: AtomicUsize = AtomicUsize::new(0);

/// One server's LFU settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lfu {
    pub log_factor: u32,
    pub decay_time: u32,
}

/// Starts the clock (at server start: a key never accessed since reports the time since then).
#[inline(never)]
pub fn start() {
    LazyLock::force(&CLOCK);
}

/// Applies a server's `maxmemory-policy`, `lfu-log-factor` and `lfu-decay-time`.
pub fn configure(server: usize, policy: &str, log_factor: u32, decay_time: u32) {
    let mut m = LFU.lock();
    if policy.ends_with("-lfu") {
        m.insert(server, Lfu { log_factor, decay_time });
    } else {
        m.remove(&server);
    }
    LFU_SERVERS.store(m.len(), Ordering::Relaxed);
}

/// The server's LFU settings when its `maxmemory-policy` is an LFU one.
pub fn lfu_policy(server: usize) -> Option<Lfu> {
    if LFU_SERVERS.load(Ordering::Relaxed) == 0 {
        return None;
    }
    LFU.lock().get(&server).copied()
}

fn key_hash(server: usize, db: u8, key: &[u8]) -> u64 {
    // FNV-1a over the server's address, the database and the key, then a final mix.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    for b in (server as u64).to_le_bytes() {
        eat(b);
    }
    eat(db);
    for b in key {
        eat(*b);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    // 0 marks an empty slot.
    h.max(1)
}

/// Seconds of the coarse monotonic clock (it advances every kernel tick; a read costs no system call).
#[cfg(target_os = "linux")]
fn coarse_secs() -> u64 {
    rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse).tv_sec.max(0) as u64
}

#[cfg(not(target_os = "linux"))]
fn coarse_secs() -> u64 {
    static ORIGIN: LazyLock<std::time::Instant> = LazyLock::new(std::time::Instant::now);
    ORIGIN.elapsed().as_secs()
}

fn now_s(c: &Clock) -> u32 {
    coarse_secs().saturating_sub(c.start).min(u32::MAX as u64) as u32
}

fn now_minutes() -> u16 {
    let unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    ((unix / 60) & 0xffff) as u16
}

/// The counter after the decay of the minutes since `e.decr_min` (Redis's `LFUDecrAndReturn`).
fn decayed(e: &Entry, now_min: u16, decay: u32) -> u8 {
    if decay == 0 {
        return e.counter;
    }
    let elapsed = if now_min >= e.decr_min { now_min - e.decr_min } else { 65535 - e.decr_min + now_min };
    let periods = elapsed as u32 / decay;
    e.counter.saturating_sub(periods.min(255) as u8)
}

/// The counter after one access (Redis's `LFULogIncr`): grows with probability 1/((c-5)*factor+1).
fn incremented(counter: u8, log_factor: u32) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if rand::random::<f64>() < p {
        counter + 1
    } else {
        counter
    }
}

/// The shard of a key hash: bits 32..38, which no shard uses to pick a set (bits 0..32).
fn shard_of(h: u64) -> usize {
    (h >> 32) as usize % SHARDS
}

impl Clock {
    fn new() -> Clock {
        Clock { shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(), start: coarse_secs() }
    }

    fn touch(&self, h: u64, lfu: Option<Lfu>) {
        let now = now_s(self);
        let mut shard = self.shards[shard_of(h)].lock();
        let Some(slot) = shard.find(h) else {
            // A key new to the clock starts at LFU_INIT, as a new key does in Redis.
            let slot = shard.claim(h);
            shard.slots[2 * slot + 1] = Entry { access_s: now, counter: LFU_INIT, decr_min: now_minutes() }.pack();
            return;
        };
        let mut e = Entry::unpack(shard.slots[2 * slot + 1]);
        e.access_s = now;
        if let Some(l) = lfu {
            let m = now_minutes();
            e.counter = incremented(decayed(&e, m, l.decay_time), l.log_factor);
            e.decr_min = m;
        }
        shard.slots[2 * slot + 1] = e.pack();
    }

    fn entry(&self, h: u64) -> Option<Entry> {
        self.shards[shard_of(h)].lock().get(h)
    }

    fn idle_secs(&self, h: u64) -> u64 {
        let last = self.entry(h).map_or(0, |e| e.access_s);
        now_s(self).saturating_sub(last) as u64
    }
}

/// Records an access of `key` of database `db` of the server whose engine is at `server`. `count`: a
/// lookup (the LFU counter grows), not only a write of the key.
pub fn touch(server: usize, db: u8, key: &[u8], count: bool) {
    let lfu = if count { lfu_policy(server) } else { None };
    CLOCK.touch(key_hash(server, db, key), lfu);
}

/// The id under which the access clock knows `key` of database `db` of the server at `server`: [`touch`]
/// split in two, for a read that records its accesses only once it knows it answers ([`touch_id`]).
pub fn key_id(server: usize, db: u8, key: &[u8]) -> u64 {
    key_hash(server, db, key)
}

/// Starts loading the clock's slots for the key whose id [`key_id`] gave, so that a [`touch_id`] after the
/// engine's lookup finds them in the CPU's cache: a key's set is a cache miss of its own, about a tenth of a
/// cached GET's time when it waited for it.
#[allow(unsafe_code)]
pub fn prefetch(id: u64) {
    let shard = CLOCK.shards[shard_of(id)].lock();
    if !shard.slots.is_empty() {
        let at: *const u64 = &shard.slots[2 * shard.set_of(id)];
        // SAFETY: a prefetch is a hint that never faults and reads nothing the program sees; SSE, which it
        // needs, is part of every x86_64 CPU.
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast())
        };
        #[cfg(any(not(target_arch = "x86_64"), miri))]
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }
}

/// [`touch`] of the key whose id [`key_id`] gave.
pub fn touch_id(server: usize, id: u64, count: bool) {
    let lfu = if count { lfu_policy(server) } else { None };
    CLOCK.touch(id, lfu);
}

/// What a write recorded, held back until [`apply_deferred`].
#[derive(Clone, Copy)]
enum Deferred {
    Touch { server: usize, id: u64, count: bool },
    Forget(u64),
}

/// Most accesses a thread holds back before applying them at once.
const MAX_DEFERRED: usize = 1024;

thread_local! {
    /// This thread's held-back accesses, in order (the commit step's: see [`defer_touch`]).
    static DEFERRED: std::cell::RefCell<Vec<Deferred>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn defer(op: Deferred) {
    let full = DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        d.push(op);
        d.len() >= MAX_DEFERRED
    });
    if full {
        apply_deferred();
    }
}

/// [`touch`] held back until this thread calls [`apply_deferred`] (or reads the clock), the key's slot
/// prefetched now: the commit step records a group's accesses this way, so the cache misses of a group's
/// keys overlap the group's other work instead of each stalling its command. The group applies them before
/// its replies are released (`WriteCtx::finish`), and every read of the clock on the same thread applies
/// them first, so OBJECT IDLETIME inside MULTI or a script sees the writes before it.
pub fn defer_touch(server: usize, db: u8, key: &[u8], count: bool) {
    let id = key_hash(server, db, key);
    prefetch(id);
    defer(Deferred::Touch { server, id, count });
}

/// Applies the accesses this thread held back, in order.
pub fn apply_deferred() {
    let ops = DEFERRED.with(|d| std::mem::take(&mut *d.borrow_mut()));
    if ops.is_empty() {
        return;
    }
    for op in &ops {
        match *op {
            Deferred::Touch { server, id, count } => touch_id(server, id, count),
            Deferred::Forget(id) => CLOCK.shards[shard_of(id)].lock().remove(id),
        }
    }
    // Keep the vector's room for the next group.
    DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_empty() {
            let mut ops = ops;
            ops.clear();
            *d = ops;
        }
    });
}

/// Records a write of `key`'s meta record: an access when the key is stored, its entry dropped when it is
/// deleted; held back as [`defer_touch`] is.
pub fn record_write(server: usize, db: u8, key: &[u8], stored: bool) {
    if stored {
        defer_touch(server, db, key, false);
    } else {
        defer(Deferred::Forget(key_hash(server, db, key)));
    }
}

/// Drops `key`'s entry (the key was deleted).
pub fn forget(server: usize, db: u8, key: &[u8]) {
    apply_deferred();
    let h = key_hash(server, db, key);
    CLOCK.shards[shard_of(h)].lock().remove(h);
}

/// Seconds since `key` was last accessed (OBJECT IDLETIME of an existing key).
pub fn idle_secs(server: usize, db: u8, key: &[u8]) -> u64 {
    apply_deferred();
    CLOCK.idle_secs(key_hash(server, db, key))
}

/// `key`'s LFU counter, decayed to now (OBJECT FREQ of an existing key).
pub fn freq(server: usize, db: u8, key: &[u8]) -> u8 {
    apply_deferred();
    let decay = lfu_policy(server).map_or(1, |l| l.decay_time);
    CLOCK.entry(key_hash(server, db, key)).map_or(LFU_INIT, |e| decayed(&e, now_minutes(), decay))
}

/// Entries the clock holds (tests, INFO).
pub fn len() -> usize {
    apply_deferred();
    CLOCK.shards.iter().map(|s| s.lock().used).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_records_and_forget_drops() {
        let server = 0x5eed_0001;
        touch(server, 3, b"k", true);
        assert_eq!(idle_secs(server, 3, b"k"), 0);
        assert_eq!(freq(server, 3, b"k"), LFU_INIT);
        forget(server, 3, b"k");
        assert!(CLOCK.entry(key_hash(server, 3, b"k")).is_none());
    }

    #[test]
    fn lfu_settings_are_per_server() {
        configure(0x5eed_0003, "allkeys-lfu", 10, 1);
        assert_eq!(lfu_policy(0x5eed_0003), Some(Lfu { log_factor: 10, decay_time: 1 }));
        assert_eq!(lfu_policy(0x5eed_0004), None);
        for _ in 0..100 {
            touch(0x5eed_0003, 0, b"hot", true);
        }
        assert!(freq(0x5eed_0003, 0, b"hot") > LFU_INIT);
        configure(0x5eed_0003, "allkeys-lru", 10, 1);
        assert_eq!(lfu_policy(0x5eed_0003), None);
    }

    #[test]
    fn counter_grows_logarithmically_and_decays() {
        let mut c = LFU_INIT;
        for _ in 0..1000 {
            c = incremented(c, 10);
        }
        // With factor 10, a thousand hits take the counter to about 18, far from 255.
        assert!((10..40).contains(&c), "{c}");
        let e = Entry { access_s: 0, counter: 20, decr_min: 100 };
        assert_eq!(decayed(&e, 105, 1), 15);
        assert_eq!(decayed(&e, 105, 5), 19);
        assert_eq!(decayed(&e, 105, 0), 20);
        assert_eq!(decayed(&e, 200, 1), 0);
        let wrapped = Entry { access_s: 0, counter: 20, decr_min: 65530 };
        assert_eq!(decayed(&wrapped, 3, 1), 12);
    }

    /// A hash of shard 0 whose set bits are `set` and whose other bits are `tag`.
    fn in_set(set: u32, tag: u64) -> u64 {
        (tag << 38) | set as u64
    }

    #[test]
    fn a_full_set_forgets_its_least_recently_accessed_key() {
        let c = Clock::new();
        for t in 1..=WAYS as u64 {
            c.touch(in_set(5, t), None);
        }
        // Make key 2 the oldest of the set.
        {
            let mut shard = c.shards[0].lock();
            for t in 1..=WAYS as u64 {
                let i = shard.find(in_set(5, t)).unwrap();
                let e = Entry { access_s: if t == 2 { 3 } else { 9 }, ..Entry::unpack(shard.slots[2 * i + 1]) };
                shard.slots[2 * i + 1] = e.pack();
            }
        }
        c.touch(in_set(5, 100), None);
        assert!(c.entry(in_set(5, 2)).is_none(), "the least recently accessed key is forgotten");
        for t in [1, 3, 4, 100] {
            assert!(c.entry(in_set(5, t)).is_some(), "key {t} is kept");
        }
        // A key the clock forgot reports the time since the clock started.
        assert_eq!(c.idle_secs(in_set(5, 2)), now_s(&c) as u64);
    }

    #[test]
    fn a_shard_grows_with_its_keys_and_keeps_them_up_to_its_capacity() {
        let c = Clock::new();
        assert!(c.shards[0].lock().slots.is_empty(), "no memory before the first key");
        // Keys spread over sets (distinct set bits), all in shard 0.
        let n = SHARD_CAPACITY / 2;
        for k in 0..n as u32 {
            c.touch(in_set(k.wrapping_mul(0x9E37_79B1), 1 + k as u64), None);
        }
        let shard = c.shards[0].lock();
        assert!(shard.slots.len() / 2 <= SHARD_CAPACITY);
        assert!(shard.used * 10 >= n * 9, "{} of {n} keys kept", shard.used);
        drop(shard);
        // More keys than the shard holds: it stops growing and forgets old ones.
        for k in 0..(2 * SHARD_CAPACITY) as u32 {
            c.touch(in_set(k.wrapping_mul(0x85EB_CA6B), 1 << 20 | k as u64), None);
        }
        let shard = c.shards[0].lock();
        assert_eq!(shard.slots.len() / 2, SHARD_CAPACITY);
        assert!(shard.used <= SHARD_CAPACITY);
    }

    #[test]
    fn deferred_accesses_apply_in_order_before_any_read_of_the_clock() {
        let server = 0x5eed_0005;
        record_write(server, 0, b"a", true);
        record_write(server, 0, b"b", true);
        record_write(server, 0, b"b", false);
        // Held back: nothing reached the clock yet.
        assert!(CLOCK.entry(key_hash(server, 0, b"a")).is_none());
        // A read applies them first, in order: `a` stored, `b` stored then deleted.
        assert_eq!(idle_secs(server, 0, b"a"), 0);
        assert!(CLOCK.entry(key_hash(server, 0, b"b")).is_none());
        // A full buffer applies itself.
        for i in 0..MAX_DEFERRED as u32 {
            record_write(server, 1, &i.to_le_bytes(), true);
        }
        assert!(CLOCK.entry(key_hash(server, 1, &0u32.to_le_bytes())).is_some());
        apply_deferred();
        assert!(DEFERRED.with(|d| d.borrow().is_empty()));
    }

    #[test]
    fn forget_frees_the_slot() {
        let c = Clock::new();
        c.touch(in_set(9, 1), None);
        assert_eq!(c.shards[0].lock().used, 1);
        c.shards[0].lock().remove(in_set(9, 1));
        assert!(c.entry(in_set(9, 1)).is_none());
        assert_eq!(c.shards[0].lock().used, 0);
        c.touch(in_set(9, 1), None);
        assert_eq!(c.entry(in_set(9, 1)).map(|e| e.counter), Some(LFU_INIT));
    }
}
