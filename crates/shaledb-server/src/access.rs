//! The access clock: when each key was last read or written, and (under an LFU `maxmemory-policy`) its
//! logarithmic access counter, for OBJECT IDLETIME and OBJECT FREQ. Keys live in the engine, with no
//! in-memory object to carry Redis's 24 LRU/LFU bits, so the clock keeps them beside the engine:
//!
//! - one entry per key, keyed by a 64-bit hash of (server, database, key): 16 bytes, whatever the key's
//!   length (two keys whose hashes collide share an entry: both then report the more recent access);
//! - [`SHARDS`] shards, each behind its own short lock: a read touches one shard, never a global lock;
//! - at most [`CAPACITY`] entries in all. A shard that is full forgets its least recently accessed eighth
//!   at once (one pass over the shard every [`SHARD_CAPACITY`] / 8 new keys).
//!   A key the clock does not know (forgotten, or not accessed since the server started) reports the time
//!   since the server started: never less than its true idle time. Its LFU counter starts again at 5, as a
//!   new key's does in Redis.
//!
//! Every `get_meta` of a key that exists touches it (reads and writes go through it), and every write of a
//! key's meta record (store/write.rs) records an access; TYPE, TTL and the like, EXISTS and OBJECT read
//! without touching, as Redis's `LOOKUP_NOTOUCH` lookups. The clock is in memory only: after a restart
//! every key reports the time since the start.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Shards of the clock.
pub const SHARDS: usize = 64;
/// Entries the clock holds at most (about 32 MiB at most with the maps' overhead).
pub const CAPACITY: usize = 1 << 20;
/// Entries one shard holds at most.
pub const SHARD_CAPACITY: usize = CAPACITY / SHARDS;
/// A full shard forgets this fraction (1/N) of its entries, the least recently accessed.
const FORGET_DIVISOR: usize = 8;
/// A new key's LFU counter (Redis's `LFU_INIT_VAL`).
pub const LFU_INIT: u8 = 5;

/// The key of a map is already a hash: used as is.
#[derive(Default)]
struct Passthrough(u64);

impl Hasher for Passthrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | *b as u64;
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Map = HashMap<u64, Entry, BuildHasherDefault<Passthrough>>;

/// One key's clock: last access (seconds since the clock's start), LFU counter and the minute (16 bits,
/// as Redis's) the counter was last decremented.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Entry {
    access_s: u32,
    counter: u8,
    decr_min: u16,
}

struct Clock {
    shards: Vec<Mutex<Map>>,
    start: Instant,
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
    h
}

fn now_s(c: &Clock) -> u32 {
    c.start.elapsed().as_secs().min(u32::MAX as u64) as u32
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

/// The shard of a key hash: bits 32..38, which the maps use for neither the bucket index (the low bits) nor
/// the control-byte tag (the top 7 bits), so the keys of one shard still spread over its map.
fn shard_of(h: u64) -> usize {
    (h >> 32) as usize % SHARDS
}

impl Clock {
    fn new() -> Clock {
        Clock { shards: (0..SHARDS).map(|_| Mutex::new(Map::default())).collect(), start: Instant::now() }
    }

    fn touch(&self, h: u64, lfu: Option<Lfu>) {
        let now = now_s(self);
        let mut shard = self.shards[shard_of(h)].lock();
        if let Some(e) = shard.get_mut(&h) {
            e.access_s = now;
            if let Some(l) = lfu {
                let m = now_minutes();
                e.counter = incremented(decayed(e, m, l.decay_time), l.log_factor);
                e.decr_min = m;
            }
            return;
        }
        if shard.len() >= SHARD_CAPACITY {
            self.forget_oldest(&mut shard);
        }
        shard.insert(h, Entry { access_s: now, counter: LFU_INIT, decr_min: now_minutes() });
    }

    /// Makes room in a full shard: forgets its least recently accessed eighth at once (one pass over the
    /// shard per [`SHARD_CAPACITY`] / 8 new keys).
    fn forget_oldest(&self, shard: &mut Map) {
        let mut times: Vec<u32> = shard.values().map(|e| e.access_s).collect();
        let k = times.len() / FORGET_DIVISOR;
        if k == 0 {
            shard.clear();
            return;
        }
        let cut = *times.select_nth_unstable(k).1;
        let mut left = k;
        shard.retain(|_, e| {
            if e.access_s < cut {
                left = left.saturating_sub(1);
                false
            } else {
                true
            }
        });
        shard.retain(|_, e| {
            if left > 0 && e.access_s == cut {
                left -= 1;
                false
            } else {
                true
            }
        });
    }

    fn entry(&self, h: u64) -> Option<Entry> {
        self.shards[shard_of(h)].lock().get(&h).copied()
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

/// [`touch`] of the key whose id [`key_id`] gave.
pub fn touch_id(server: usize, id: u64, count: bool) {
    let lfu = if count { lfu_policy(server) } else { None };
    CLOCK.touch(id, lfu);
}

/// Records a write of `key`'s meta record: an access when the key is stored, its entry dropped when it is
/// deleted.
pub fn record_write(server: usize, db: u8, key: &[u8], stored: bool) {
    if stored {
        touch(server, db, key, false);
    } else {
        forget(server, db, key);
    }
}

/// Drops `key`'s entry (the key was deleted).
pub fn forget(server: usize, db: u8, key: &[u8]) {
    let h = key_hash(server, db, key);
    CLOCK.shards[shard_of(h)].lock().remove(&h);
}

/// Seconds since `key` was last accessed (OBJECT IDLETIME of an existing key).
pub fn idle_secs(server: usize, db: u8, key: &[u8]) -> u64 {
    CLOCK.idle_secs(key_hash(server, db, key))
}

/// `key`'s LFU counter, decayed to now (OBJECT FREQ of an existing key).
pub fn freq(server: usize, db: u8, key: &[u8]) -> u8 {
    let decay = lfu_policy(server).map_or(1, |l| l.decay_time);
    CLOCK.entry(key_hash(server, db, key)).map_or(LFU_INIT, |e| decayed(&e, now_minutes(), decay))
}

/// Entries the clock holds (tests, INFO).
pub fn len() -> usize {
    CLOCK.shards.iter().map(|s| s.lock().len()).sum()
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

    #[test]
    fn a_full_shard_forgets_its_oldest_entries() {
        let mut c = Clock::new();
        c.start -= std::time::Duration::from_secs(100);
        // Fill one shard: keys with the same bits 32..38 land in the same shard.
        for i in 0..SHARD_CAPACITY as u64 {
            c.touch(i, None);
        }
        assert_eq!(c.shards[0].lock().len(), SHARD_CAPACITY);
        c.shards[0].lock().values_mut().for_each(|e| e.access_s = 7);
        for i in 0..1000u64 {
            c.touch(1 << 40 | i, None);
        }
        let shard = c.shards[0].lock();
        assert_eq!(shard.len(), SHARD_CAPACITY - SHARD_CAPACITY / FORGET_DIVISOR + 1000);
        assert!((0..1000u64).all(|i| shard.contains_key(&(1 << 40 | i))));
        drop(shard);
        // A key the clock forgot reports the time since the clock started.
        assert_eq!(c.idle_secs(u64::MAX), now_s(&c) as u64);
    }
}
