//! The block cache: one per database, shared by every open table, bounded in bytes.
//!
//! Entries are keyed by `(cache_id, block_offset)`: each opened table takes a fresh `cache_id`, so a file number
//! reused after deletion can never hit another file's blocks. Eviction is quick_cache's S3-FIFO, sharded, weighted
//! by block size.

use crate::block::Block;
use crate::bloom::BloomReader;
use quick_cache::sync::Cache;
use quick_cache::Weighter;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Bookkeeping charged per entry on top of its bytes (key, Arc header, slot), so tiny blocks are not free.
const ENTRY_OVERHEAD: u64 = 64;

/// What a cache slot holds.
#[derive(Clone, Debug)]
pub enum CacheValue {
    /// A data, index or meta block.
    Block(Arc<Block>),
    /// A parsed bloom filter.
    Filter(Arc<BloomReader>),
}

impl CacheValue {
    fn weight(&self) -> u64 {
        let bytes = match self {
            CacheValue::Block(b) => b.size(),
            CacheValue::Filter(f) => f.size(),
        };
        bytes as u64 + ENTRY_OVERHEAD
    }
}

#[derive(Clone, Debug)]
struct ByteWeighter;

impl Weighter<(u64, u64), CacheValue> for ByteWeighter {
    fn weight(&self, _key: &(u64, u64), val: &CacheValue) -> u64 {
        val.weight()
    }
}

/// A sharded cache of blocks and filters, bounded by the bytes it holds.
pub struct BlockCache {
    cache: Cache<(u64, u64), CacheValue, ByteWeighter>,
    capacity: usize,
    next_id: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding up to `capacity` bytes of blocks (RocksDB: `block_cache` capacity). 0 caches nothing.
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache::with_shard_bits(capacity, -1)
    }

    /// As [`BlockCache::new`], split into `2^shard_bits` shards (RocksDB `cache_numshardbits`); -1 (or any
    /// negative number) lets the cache choose from the number of CPUs. Bits above 16 count as 16. Each shard
    /// evicts on its own, so a block larger than a shard's share of the capacity is not kept.
    pub fn with_shard_bits(capacity: usize, shard_bits: i32) -> BlockCache {
        // The item estimate only sizes shards and ghost tracking; assume 4 KiB blocks.
        let items = (capacity / 4096).max(16);
        let cache = if shard_bits < 0 {
            Cache::with_weighter(items, capacity as u64, ByteWeighter)
        } else {
            let options = quick_cache::OptionsBuilder::new()
                .estimated_items_capacity(items)
                .weight_capacity(capacity as u64)
                .shards(1 << shard_bits.min(16))
                .build();
            match options {
                Ok(o) => Cache::with_options(o, ByteWeighter, Default::default(), Default::default()),
                // Only a missing capacity fails `build`, and both are set above; fall back to the default shards.
                Err(_) => Cache::with_weighter(items, capacity as u64, ByteWeighter),
            }
        };
        BlockCache { cache, capacity, next_id: AtomicU64::new(1), hits: AtomicU64::new(0), misses: AtomicU64::new(0) }
    }

    /// A fresh id for a table being opened; never returned twice by this cache.
    pub fn new_cache_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    /// The block cached at `(cache_id, offset)`.
    pub fn get(&self, cache_id: u64, offset: u64) -> Option<Arc<Block>> {
        match self.cache.get(&(cache_id, offset)) {
            Some(CacheValue::Block(b)) => {
                self.hits.fetch_add(1, Relaxed);
                Some(b)
            }
            _ => {
                self.misses.fetch_add(1, Relaxed);
                None
            }
        }
    }

    /// Caches a block. A block larger than a shard's capacity is not kept.
    pub fn insert(&self, cache_id: u64, offset: u64, block: Arc<Block>) {
        self.cache.insert((cache_id, offset), CacheValue::Block(block));
    }

    /// The filter cached at `(cache_id, offset)`.
    pub fn get_filter(&self, cache_id: u64, offset: u64) -> Option<Arc<BloomReader>> {
        match self.cache.get(&(cache_id, offset)) {
            Some(CacheValue::Filter(f)) => {
                self.hits.fetch_add(1, Relaxed);
                Some(f)
            }
            _ => {
                self.misses.fetch_add(1, Relaxed);
                None
            }
        }
    }

    /// Caches a parsed filter.
    pub fn insert_filter(&self, cache_id: u64, offset: u64, filter: Arc<BloomReader>) {
        self.cache.insert((cache_id, offset), CacheValue::Filter(filter));
    }

    /// Lookups that found their entry.
    pub fn hits(&self) -> u64 {
        self.hits.load(Relaxed)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.load(Relaxed)
    }

    /// Bytes charged for the entries held now.
    pub fn usage(&self) -> usize {
        self.cache.weight() as usize
    }

    /// The capacity in bytes given at creation.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of entries held.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::BlockBuilder;

    fn block(value_len: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        b.add(b"k", &vec![7u8; value_len]);
        Arc::new(Block::new(b.finish().to_vec()).unwrap())
    }

    #[test]
    fn shard_bits_bound_a_cache_like_the_default() {
        for bits in [0, 1, 6] {
            let c = BlockCache::with_shard_bits(1 << 20, bits);
            assert_eq!(c.capacity(), 1 << 20);
            let id = c.new_cache_id();
            for off in 0..2000u64 {
                c.insert(id, off, block(1024));
            }
            assert!(c.usage() <= 1 << 20, "bits {bits}: usage {}", c.usage());
            assert!(c.usage() > 0);
        }
    }

    #[test]
    fn get_insert_hits_misses() {
        let c = BlockCache::new(1 << 20);
        let id = c.new_cache_id();
        assert_ne!(id, c.new_cache_id());
        assert!(c.get(id, 0).is_none());
        c.insert(id, 0, block(100));
        assert_eq!(c.get(id, 0).unwrap().size(), block(100).size());
        assert!(c.get(id + 1, 0).is_none());
        assert_eq!((c.hits(), c.misses()), (1, 2));
        assert!(c.usage() >= 100);
        assert_eq!(c.capacity(), 1 << 20);
    }

    #[test]
    fn filter_and_block_slots_are_typed() {
        let c = BlockCache::new(1 << 20);
        let mut b = crate::bloom::BloomBuilder::new(10.0);
        b.add_hash(1);
        let f = Arc::new(BloomReader::from_vec(b.finish()).unwrap());
        c.insert_filter(1, 500, f);
        assert!(c.get_filter(1, 500).is_some());
        assert!(c.get(1, 500).is_none());
    }

    #[test]
    fn bounded_by_bytes() {
        let cap = 256 << 10;
        let c = BlockCache::new(cap);
        for i in 0..1000 {
            c.insert(1, i, block(4000));
        }
        assert!(c.usage() <= cap, "usage {} > capacity {cap}", c.usage());
        assert!(c.len() < 1000);
        assert!(!c.is_empty());
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let c = BlockCache::new(0);
        c.insert(1, 0, block(10));
        assert!(c.get(1, 0).is_none());
    }
}
