//! Opens an SST, reads its blocks (checksum first, then decompression) and iterates it as a two-level
//! iterator: the index block picks the data block, the data block the entry.

use super::{
    in_block, BlockHandle, Footer, Readahead, TableIterOptions, TableProperties, TableReadOptions, TableStats,
    BLOCK_TRAILER_LEN, FILTER_BLOCK_NAME, FOOTER_LEN, PROPERTIES_BLOCK_NAME,
};
use crate::block::{Block, BlockIter, KeyOrder};
use crate::bloom::{key_hash, BloomReader};
use crate::cache::BlockCache;
use crate::coding::get_fixed32;
use crate::compress::{decompress, CompressionType};
use crate::ikey;
use crate::iter::InternalIterator;
use crate::prefix::PrefixExtractor;
use crate::{crc, Error, Result};
use shaledb_vfs::{AlignedBuf, RandomAccessFile};
use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open SST. Shared as `Arc<Table>` by the table cache and every iterator over it.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    props: TableProperties,
    cache: Option<Arc<BlockCache>>,
    cache_id: u64,
    stats: Option<Arc<TableStats>>,
    /// Where the footer starts: every block must end at or before it.
    data_end: u64,
    footer: Footer,
    filter_handle: Option<BlockHandle>,
    /// The range-deletion block (`range_del.rs`), when the table has one.
    range_del_handle: Option<BlockHandle>,
    /// The index block, unless it lives in the block cache.
    pub(super) pinned_index: Option<Arc<Block>>,
    /// The filter, unless there is none or it lives in the block cache.
    pub(super) pinned_filter: Option<Arc<BloomReader>>,
    /// [`TableReadOptions::verify_checksums`]: check the index, filter and meta blocks when read.
    verify_meta: bool,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("path", &self.path).field("props", &self.props).finish()
    }
}

impl Table {
    /// Opens the SST in `file`: reads and checks the footer, metaindex, properties, index and filter.
    pub fn open(file: Arc<dyn RandomAccessFile>, opts: &TableReadOptions) -> Result<Arc<Table>> {
        let path = file.path().to_path_buf();
        let len = file.len();
        let Some(data_end) = len.checked_sub(FOOTER_LEN as u64) else {
            return Err(Error::corruption(&path, 0, format!("file of {len} bytes is too short to be an SST")));
        };
        let mut buf = [0u8; FOOTER_LEN];
        file.read_exact_at(&mut buf, data_end)?;
        let footer = Footer::decode(&buf, &path, data_end)?;
        let cache = opts.cache.clone();
        let cache_id = cache.as_ref().map_or(0, |c| c.new_cache_id());
        let mut t = Table {
            file,
            path,
            props: TableProperties::default(),
            cache,
            cache_id,
            stats: opts.stats.clone(),
            data_end,
            footer,
            filter_handle: None,
            range_del_handle: None,
            pinned_index: None,
            pinned_filter: None,
            verify_meta: opts.verify_checksums,
        };

        let (props_handle, filter_handle, range_del_handle) = t.read_metaindex()?;
        t.range_del_handle = range_del_handle;
        let props_block = t.read_block(props_handle, t.verify_meta)?;
        t.props = TableProperties::decode(props_block).map_err(|e| in_block(e, &t.path, props_handle.offset))?;
        t.props.file_size = len;
        t.filter_handle = filter_handle;

        let index = Arc::new(t.read_index_block()?);
        let filter = match filter_handle {
            Some(h) => Some(Arc::new(t.read_filter(h)?)),
            None => None,
        };
        match (&t.cache, opts.cache_index_and_filter) {
            (Some(c), true) => {
                c.insert(t.cache_id, footer.index.offset, index);
                if let (Some(h), Some(f)) = (filter_handle, filter) {
                    c.insert_filter(t.cache_id, h.offset, f);
                }
            }
            _ => {
                t.pinned_index = Some(index);
                t.pinned_filter = filter;
            }
        }
        Ok(Arc::new(t))
    }

    /// What the MANIFEST records of this table: its smallest and largest keys and its sequence range, covering
    /// its points and its range tombstones ([`super::range_del::widen_bounds`]), and the tombstones' count.
    /// Empty keys when the table holds neither.
    pub fn recorded_range(self: &Arc<Self>) -> Result<RecordedRange> {
        let p = &self.props;
        let mut it = self.iter(true, false);
        it.seek_to_first();
        let mut smallest = if it.valid() { it.key().to_vec() } else { Vec::new() };
        it.status()?;
        it.seek_to_last();
        let mut largest = if it.valid() { it.key().to_vec() } else { Vec::new() };
        it.status()?;
        let mut seqs = (p.num_entries > 0).then_some((p.smallest_seq, p.largest_seq));
        let tombstones = self.range_tombstones()?;
        for t in &tombstones {
            seqs = Some(seqs.map_or((t.seq, t.seq), |(lo, hi)| (lo.min(t.seq), hi.max(t.seq))));
            super::range_del::widen_bounds(&mut smallest, &mut largest, &t.begin, &t.end);
        }
        let (smallest_seq, largest_seq) = seqs.unwrap_or((p.smallest_seq, p.largest_seq));
        Ok(RecordedRange { smallest, largest, smallest_seq, largest_seq, num_range_deletions: tombstones.len() as u64 })
    }

    /// True when the table has a range-deletion block.
    pub fn has_range_tombstones(&self) -> bool {
        self.range_del_handle.is_some()
    }

    /// The range tombstones of the table's range-deletion block, read from the file (empty without one).
    pub fn range_tombstones(&self) -> Result<Vec<super::range_del::StoredRangeTombstone>> {
        match self.range_del_handle {
            Some(h) => super::range_del::decode(self.read_raw(h, self.verify_meta)?, &self.path, h.offset),
            None => Ok(Vec::new()),
        }
    }

    /// The metaindex: `(properties handle, filter handle, range-deletion handle)`.
    fn read_metaindex(&self) -> Result<(BlockHandle, Option<BlockHandle>, Option<BlockHandle>)> {
        let at = self.footer.metaindex.offset;
        let mut it = Arc::new(self.read_block(self.footer.metaindex, self.verify_meta)?).iter(KeyOrder::Bytewise);
        let (mut props, mut filter, mut range_del) = (None, None, None);
        it.seek_to_first();
        while it.valid() {
            let slot = match it.key() {
                FILTER_BLOCK_NAME => &mut filter,
                PROPERTIES_BLOCK_NAME => &mut props,
                super::range_del::RANGE_DEL_BLOCK_NAME => &mut range_del,
                _ => {
                    it.next();
                    continue;
                }
            };
            let Some(h) = BlockHandle::decode_exact(it.value()) else {
                return Err(Error::corruption(&self.path, at, "malformed block handle in metaindex"));
            };
            *slot = Some(h);
            it.next();
        }
        it.status().map_err(|e| in_block(e, &self.path, at))?;
        let props = props.ok_or_else(|| Error::corruption(&self.path, at, "metaindex lacks the properties block"))?;
        Ok((props, filter, range_del))
    }

    /// Length of block `h` as stored, trailer included, checked to end before the footer.
    fn stored_len(&self, h: BlockHandle) -> Result<usize> {
        h.end()
            .filter(|&end| end <= self.data_end)
            .and_then(|_| usize::try_from(h.size).ok())
            .and_then(|n| n.checked_add(BLOCK_TRAILER_LEN))
            .ok_or_else(|| {
                Error::corruption(
                    &self.path,
                    h.offset,
                    format!(
                        "block handle (offset {}, size {}) runs past the data end at {}",
                        h.offset, h.size, self.data_end
                    ),
                )
            })
    }

    /// Checks the trailer of `stored` (block `h` followed by its trailer): the checksum when asked, and the
    /// compression type, which it returns.
    fn check_trailer(&self, h: BlockHandle, stored: &[u8], verify_checksum: bool) -> Result<CompressionType> {
        let bad = |what: String| Error::corruption(&self.path, h.offset, what);
        let n =
            stored.len().checked_sub(BLOCK_TRAILER_LEN).ok_or_else(|| bad("block shorter than its trailer".into()))?;
        let kind_byte = stored[n];
        if verify_checksum {
            let stored_crc = get_fixed32(&stored[n + 1..]).map(crc::unmask);
            if stored_crc != Some(crc::value(&stored[..=n])) {
                return Err(bad("block checksum mismatch".into()));
            }
        }
        CompressionType::from_u8(kind_byte).ok_or_else(|| bad(format!("unknown compression type {kind_byte}")))
    }

    /// Reads a block's stored bytes, checks its trailer and decompresses it.
    fn read_raw(&self, h: BlockHandle, verify_checksum: bool) -> Result<Vec<u8>> {
        let len = self.stored_len(h)?;
        // Read straight into the vector the block will own: no copy for an uncompressed block.
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, h.offset)?;
        self.raw_from_stored(h, buf, verify_checksum)
    }

    /// The stored bytes of block `h` (trailer included), read into `buf`: counted, checked, decompressed.
    fn raw_from_stored(&self, h: BlockHandle, mut buf: Vec<u8>, verify_checksum: bool) -> Result<Vec<u8>> {
        let len = buf.len();
        if let Some(s) = &self.stats {
            s.add_read(len as u64);
            s.add_file_read(len as u64);
        }
        let kind = self.check_trailer(h, &buf, verify_checksum)?;
        let n = len - BLOCK_TRAILER_LEN;
        if kind == CompressionType::None {
            buf.truncate(n);
            Ok(buf)
        } else {
            decompress(kind, &buf[..n]).map_err(|e| in_block(e, &self.path, h.offset))
        }
    }

    /// A block from its stored bytes already in memory (a readahead window): checked, then copied out or
    /// decompressed.
    fn block_from_stored(&self, h: BlockHandle, stored: &[u8], verify_checksum: bool) -> Result<Block> {
        if let Some(s) = &self.stats {
            s.add_read(stored.len() as u64);
        }
        let kind = self.check_trailer(h, stored, verify_checksum)?;
        let body = &stored[..stored.len() - BLOCK_TRAILER_LEN];
        let raw = if kind == CompressionType::None {
            body.to_vec()
        } else {
            decompress(kind, body).map_err(|e| in_block(e, &self.path, h.offset))?
        };
        Block::new(raw).map_err(|e| in_block(e, &self.path, h.offset))
    }

    /// Block `h` through the iterator's readahead window: from the window when it holds the block, else
    /// from a new window when the policy asks for one, else read alone.
    fn read_block_ahead(&self, h: BlockHandle, verify_checksum: bool, ra: &mut ReadaheadState) -> Result<Block> {
        let len = self.stored_len(h)?;
        if ra.buffered(h, len).is_none() {
            // Windows cover data blocks only, but always the whole block asked for.
            let limit = self.props.data_size.min(self.data_end).max(h.offset + len as u64);
            let Some((offset, total)) = ra.window(h, len, limit) else {
                return self.read_block(h, verify_checksum);
            };
            ra.buf_offset = offset;
            if let Err(e) = self.file.read_into(offset, total, &mut ra.buf) {
                ra.buf.clear();
                return Err(e);
            }
            if let Some(s) = &self.stats {
                s.add_file_read(total as u64);
            }
        }
        match ra.buffered(h, len) {
            Some(stored) => self.block_from_stored(h, stored, verify_checksum),
            None => self.read_block(h, verify_checksum),
        }
    }

    fn read_block(&self, h: BlockHandle, verify_checksum: bool) -> Result<Block> {
        Block::new(self.read_raw(h, verify_checksum)?).map_err(|e| in_block(e, &self.path, h.offset))
    }

    fn read_filter(&self, h: BlockHandle) -> Result<BloomReader> {
        BloomReader::from_vec(self.read_raw(h, self.verify_meta)?).map_err(|e| in_block(e, &self.path, h.offset))
    }

    /// The error of a block-cache-only read that would have to read `what` (at `offset`) from the file.
    fn not_cached(&self, what: &str, offset: u64) -> Error {
        Error::Incomplete(format!("{what} at offset {offset} of {} is not in the block cache", self.path.display()))
    }

    fn count_lookup(&self, hit: bool) {
        if let Some(s) = &self.stats {
            if hit {
                s.add_hit()
            } else {
                s.add_miss()
            }
        }
    }

    /// A data block, through the cache when there is one, and on a miss through `ra` when given; with
    /// `cache_only` a miss is [`Error::Incomplete`] and nothing is read.
    fn data_block(
        &self,
        h: BlockHandle,
        verify_checksum: bool,
        fill_cache: bool,
        cache_only: bool,
        mut ra: Option<&mut ReadaheadState>,
    ) -> Result<Arc<Block>> {
        if cache_only {
            return self.through_cache(h, false, || Err(self.not_cached("data block", h.offset)));
        }
        if let Some(ra) = &mut ra {
            ra.note(h);
        }
        self.through_cache(h, fill_cache, || match ra {
            Some(ra) => self.read_block_ahead(h, verify_checksum, ra),
            None => self.read_block(h, verify_checksum),
        })
    }

    /// Block `h` from the cache when there is one (the lookup counted), else from `read`, then put in the cache
    /// with `fill_cache`.
    fn through_cache(
        &self,
        h: BlockHandle,
        fill_cache: bool,
        read: impl FnOnce() -> Result<Block>,
    ) -> Result<Arc<Block>> {
        if let Some(c) = &self.cache {
            let hit = c.get(self.cache_id, h.offset);
            self.count_lookup(hit.is_some());
            if let Some(b) = hit {
                return Ok(b);
            }
        }
        let b = Arc::new(read()?);
        if let (Some(c), true) = (&self.cache, fill_cache) {
            c.insert(self.cache_id, h.offset, Arc::clone(&b));
        }
        Ok(b)
    }

    /// The index block from the file, with its restart summary for point lookups' seeks.
    fn read_index_block(&self) -> Result<Block> {
        Ok(self.read_block(self.footer.index, self.verify_meta)?.with_restart_search(KeyOrder::Internal))
    }

    fn index_block(&self) -> Result<Arc<Block>> {
        self.index_block_in(false)
    }

    /// The index block; with `cache_only`, [`Error::Incomplete`] when it must be read from the file.
    fn index_block_in(&self, cache_only: bool) -> Result<Arc<Block>> {
        if let Some(b) = &self.pinned_index {
            return Ok(Arc::clone(b));
        }
        if cache_only {
            return self.through_cache(self.footer.index, false, || {
                Err(self.not_cached("index block", self.footer.index.offset))
            });
        }
        // Not pinned means cached: the index is always put back after a miss.
        self.through_cache(self.footer.index, true, || self.read_index_block())
    }

    /// The filter, if the table has one; with `cache_only`, `None` when it would have to be read from the file.
    fn filter(&self, cache_only: bool) -> Option<Result<Arc<BloomReader>>> {
        let h = self.filter_handle?;
        if let Some(f) = &self.pinned_filter {
            return Some(Ok(Arc::clone(f)));
        }
        let c = self.cache.as_ref()?;
        let hit = c.get_filter(self.cache_id, h.offset);
        self.count_lookup(hit.is_some());
        if let Some(f) = hit {
            return Some(Ok(f));
        }
        if cache_only {
            return None;
        }
        Some(self.read_filter(h).map(|f| {
            let f = Arc::new(f);
            c.insert_filter(self.cache_id, h.offset, Arc::clone(&f));
            f
        }))
    }

    /// Bytes of the index and filter blocks this table holds itself (those not in the block cache): what
    /// RocksDB's `rocksdb.estimate-table-readers-mem` adds up.
    pub fn pinned_memory(&self) -> usize {
        self.pinned_index.as_ref().map_or(0, |b| b.size()) + self.pinned_filter.as_ref().map_or(0, |f| f.size())
    }

    /// The table's properties.
    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// False only when no entry of the user key hashed to `key_hash` ([`crate::bloom::key_hash`]) is in the
    /// table. True without a filter, when the filter holds only prefixes (`whole_key_filtering` off: see
    /// [`Table::may_contain_prefix`]), and when a cached filter cannot be read back (a lookup then finds out).
    pub fn may_contain(&self, key_hash: u64) -> bool {
        self.may_contain_in(key_hash, false)
    }

    /// [`Table::may_contain`]; with `cache_only`, a filter that lives in the block cache and was evicted is
    /// not read back (true: the filter cannot tell), so the call does no file I/O.
    pub fn may_contain_in(&self, key_hash: u64, cache_only: bool) -> bool {
        if !self.props.whole_key_filtering {
            return true;
        }
        match self.filter(cache_only) {
            Some(Ok(f)) => f.may_contain(key_hash),
            Some(Err(_)) | None => true,
        }
    }

    /// False only when no user key whose prefix by `extractor` hashes to `prefix_hash` is in the table. True
    /// unless the table's filter was built with prefixes of that same extractor (RocksDB's rule: a table
    /// written with another extractor, or none, is never skipped by prefix).
    pub fn may_contain_prefix(&self, extractor: &PrefixExtractor, prefix_hash: u64) -> bool {
        self.may_contain_prefix_in(extractor, prefix_hash, false)
    }

    /// [`Table::may_contain_prefix`]; with `cache_only` it does no file I/O, as [`Table::may_contain_in`].
    pub fn may_contain_prefix_in(&self, extractor: &PrefixExtractor, prefix_hash: u64, cache_only: bool) -> bool {
        if self.props.prefix_extractor.as_ref() != Some(extractor) {
            return true;
        }
        match self.filter(cache_only) {
            Some(Ok(f)) => f.may_contain(prefix_hash),
            Some(Err(_)) | None => true,
        }
    }

    /// An unpositioned iterator without readahead. `verify_checksums = false` skips the crc check of data
    /// blocks read from the file; `fill_cache = false` keeps blocks it reads out of the block cache.
    pub fn iter(self: &Arc<Self>, verify_checksums: bool, fill_cache: bool) -> TableIter {
        self.iter_with(&TableIterOptions {
            verify_checksums,
            fill_cache,
            readahead: Readahead::Off,
            block_cache_only: false,
        })
    }

    /// An unpositioned iterator reading as `opts` say.
    pub fn iter_with(self: &Arc<Self>, opts: &TableIterOptions) -> TableIter {
        let (index, err) = match self.index_block_in(opts.block_cache_only) {
            Ok(b) => (Some(BlockIter::new(b, KeyOrder::Internal)), None),
            Err(e) => (None, Some(e)),
        };
        TableIter {
            table: Arc::clone(self),
            index,
            data: None,
            data_handle: BlockHandle::default(),
            verify: opts.verify_checksums,
            fill_cache: opts.fill_cache,
            cache_only: opts.block_cache_only,
            ra: ReadaheadState::new(opts.readahead),
            err,
        }
    }

    /// Approximate file offset where `ikey` is or would be stored: the offset of its data block, or the end
    /// of the data when it sorts after every block (also when the index cannot be read).
    pub fn approximate_offset_of(&self, ikey: &[u8]) -> u64 {
        let Ok(index) = self.index_block() else {
            return self.props.data_size;
        };
        let mut it = BlockIter::new(index, KeyOrder::Internal);
        it.seek(ikey);
        match it.valid().then(|| BlockHandle::decode_exact(it.value())).flatten() {
            Some(h) => h.offset,
            None => self.props.data_size,
        }
    }

    /// Reads every block from the file and checks it: footer, metaindex, properties, filter, index, and each
    /// data block (checksum, decoding, key order, agreement with the index and the properties).
    pub fn verify(&self) -> Result<()> {
        let mut buf = [0u8; FOOTER_LEN];
        self.file.read_exact_at(&mut buf, self.data_end)?;
        if Footer::decode(&buf, &self.path, self.data_end)? != self.footer {
            return Err(Error::corruption(&self.path, self.data_end, "footer changed since open"));
        }
        let (props_handle, filter_handle, _) = self.read_metaindex()?;
        self.range_tombstones()?;
        let props = TableProperties::decode(self.read_block(props_handle, true)?)
            .map_err(|e| in_block(e, &self.path, props_handle.offset))?;
        let index_at = self.footer.index.offset;
        let bad_index = |what: &str| Error::corruption(&self.path, index_at, what);
        let filter = match filter_handle {
            Some(h) => Some((h.offset, self.read_filter(h)?)),
            None => None,
        };
        let mut index = BlockIter::new(Arc::new(self.read_block(self.footer.index, true)?), KeyOrder::Internal);
        let (mut entries, mut blocks, mut next_offset) = (0u64, 0u64, 0u64);
        let mut prev_key: Vec<u8> = Vec::new();
        index.seek_to_first();
        while index.valid() {
            let h = BlockHandle::decode_exact(index.value()).ok_or_else(|| bad_index("malformed block handle"))?;
            if h.offset != next_offset {
                return Err(bad_index("data blocks are not contiguous"));
            }
            next_offset = h.end().unwrap_or(u64::MAX);
            let mut data = BlockIter::new(Arc::new(self.read_block(h, true)?), KeyOrder::Internal);
            let bad = |what: &str| Error::corruption(&self.path, h.offset, what);
            data.seek_to_first();
            if !data.valid() {
                data.status().map_err(|e| in_block(e, &self.path, h.offset))?;
                return Err(bad("empty data block"));
            }
            while data.valid() {
                let k = data.key();
                if ikey::parse(k).is_none() {
                    return Err(bad("malformed internal key"));
                }
                if entries > 0 && ikey::compare(&prev_key, k) != Ordering::Less {
                    return Err(bad("keys out of order"));
                }
                if ikey::compare(k, index.key()) == Ordering::Greater {
                    return Err(bad("key beyond its index separator"));
                }
                if let Some((at, f)) = &filter {
                    let user_key = ikey::user_key(k);
                    if props.whole_key_filtering && !f.may_contain(key_hash(user_key)) {
                        return Err(Error::corruption(&self.path, *at, "bloom filter lacks a key of the table"));
                    }
                    let prefix = props.prefix_extractor.and_then(|ex| ex.prefix(user_key));
                    if prefix.is_some_and(|p| !f.may_contain(key_hash(p))) {
                        return Err(Error::corruption(&self.path, *at, "bloom filter lacks a prefix of the table"));
                    }
                }
                prev_key.clear();
                prev_key.extend_from_slice(k);
                entries += 1;
                data.next();
            }
            data.status().map_err(|e| in_block(e, &self.path, h.offset))?;
            blocks += 1;
            index.next();
        }
        index.status().map_err(|e| in_block(e, &self.path, index_at))?;
        if entries != props.num_entries || blocks != props.num_data_blocks || next_offset != props.data_size {
            return Err(Error::corruption(
                &self.path,
                props_handle.offset,
                format!(
                    "properties claim {} entries in {} blocks ({} bytes), found {entries} in {blocks} ({next_offset})",
                    props.num_entries, props.num_data_blocks, props.data_size
                ),
            ));
        }
        Ok(())
    }

    /// For a batch of point lookups: the data block where a seek for each of `targets` (internal lookup keys,
    /// sorted in internal key order) starts, the first whose index separator is at or after the target, or
    /// `None` when the target sorts after every separator. (A target between a block's last key and its
    /// separator names that block, which then holds nothing at or after it: the seek would go on to the
    /// next.) The index is loaded once and walked forward once: a target at or below the separator of the
    /// block its predecessor landed in shares that block without another search.
    /// With `cache_only`, an index that must be read from the file is [`Error::Incomplete`].
    pub fn locate_blocks(&self, targets: &[&[u8]], cache_only: bool) -> Result<Vec<Option<BlockHandle>>> {
        let index_at = self.footer.index.offset;
        let mut it = BlockIter::new(self.index_block_in(cache_only)?, KeyOrder::Internal);
        let mut out = Vec::with_capacity(targets.len());
        let mut current: Option<BlockHandle> = None;
        for (i, target) in targets.iter().enumerate() {
            let same_block = i > 0
                && it.valid()
                && ikey::compare(targets[i - 1], target) != Ordering::Greater
                && ikey::compare(target, it.key()) != Ordering::Greater;
            if !same_block {
                it.seek(target);
                current = if it.valid() {
                    let h = BlockHandle::decode_exact(it.value())
                        .ok_or_else(|| Error::corruption(&self.path, index_at, "malformed block handle in index"))?;
                    Some(h)
                } else {
                    it.status().map_err(|e| in_block(e, &self.path, index_at))?;
                    None
                };
            }
            out.push(current);
        }
        Ok(out)
    }

    /// Data block `h` if the block cache holds it (counted as a cache hit or miss), without reading the file.
    pub fn cached_data_block(&self, h: BlockHandle) -> Option<Arc<Block>> {
        let c = self.cache.as_ref()?;
        let hit = c.get(self.cache_id, h.offset);
        self.count_lookup(hit.is_some());
        hit
    }

    /// Reads data block `h` from the file (checked as [`Table::iter`] checks it) and, with `fill_cache`, puts it
    /// in the block cache. The read of a batch lookup's cache miss, which the caller may run on any thread.
    pub fn read_data_block(&self, h: BlockHandle, verify_checksum: bool, fill_cache: bool) -> Result<Arc<Block>> {
        let b = Arc::new(self.read_block(h, verify_checksum)?);
        if let (Some(c), true) = (&self.cache, fill_cache) {
            c.insert(self.cache_id, h.offset, Arc::clone(&b));
        }
        Ok(b)
    }

    /// [`Table::read_data_block`] only when the block's bytes can be had without waiting on the device (the
    /// operating system's page cache holds them, [`RandomAccessFile::try_read_cached`]): `Ok(None)` when the
    /// read would wait, and then nothing was read or counted. Damage is an error as in `read_data_block`.
    pub fn try_read_data_block_cached(
        &self,
        h: BlockHandle,
        verify_checksum: bool,
        fill_cache: bool,
    ) -> Result<Option<Arc<Block>>> {
        let len = self.stored_len(h)?;
        let mut buf = vec![0u8; len];
        if !self.file.try_read_cached(&mut buf, h.offset)? {
            return Ok(None);
        }
        let raw = self.raw_from_stored(h, buf, verify_checksum)?;
        let b = Arc::new(Block::new(raw).map_err(|e| in_block(e, &self.path, h.offset))?);
        if let (Some(c), true) = (&self.cache, fill_cache) {
            c.insert(self.cache_id, h.offset, Arc::clone(&b));
        }
        Ok(Some(b))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The index block (one entry per data block: a separator key, then the block's encoded [`BlockHandle`]),
    /// and where it is in the file. For tools that show a table's layout (`shaledb dump`); reads go through
    /// [`Table::iter`].
    pub fn index(&self) -> Result<(Arc<Block>, BlockHandle)> {
        Ok((self.index_block()?, self.footer.index))
    }
}

/// Iterates a table in internal key order. Holds the table alive; reuses its data block iterator's buffers.
pub struct TableIter {
    table: Arc<Table>,
    /// `None` when the index block could not be read (`err` says why).
    index: Option<BlockIter>,
    /// The data block under the index's current entry; `None` when there is none.
    data: Option<BlockIter>,
    data_handle: BlockHandle,
    verify: bool,
    fill_cache: bool,
    /// [`TableIterOptions::block_cache_only`].
    cache_only: bool,
    ra: ReadaheadState,
    /// First error met; the iterator stays invalid after it.
    err: Option<Error>,
}

/// An iterator's readahead: the policy, the window of file bytes read last, and the access pattern so far.
struct ReadaheadState {
    mode: Readahead,
    /// `buf.data()` holds the file's bytes from `buf_offset` on (empty: nothing buffered).
    buf: AlignedBuf,
    buf_offset: u64,
    /// The block loaded before the current one (from the cache or not), to recognise sequential runs.
    prev: Option<BlockHandle>,
    /// Blocks in the current sequential run, and whether the current block lies before the previous one.
    run: u32,
    backward: bool,
    /// [`Readahead::Auto`]: readahead of the next window.
    next_ahead: usize,
}

impl ReadaheadState {
    fn new(mode: Readahead) -> ReadaheadState {
        let next_ahead = match mode {
            Readahead::Auto { initial, .. } => initial,
            _ => 0,
        };
        ReadaheadState { mode, buf: AlignedBuf::new(), buf_offset: 0, prev: None, run: 0, backward: false, next_ahead }
    }

    /// Records that block `h` is loaded next, whether from the cache or the file.
    fn note(&mut self, h: BlockHandle) {
        let sequential = self.prev.is_none_or(|p| p.end() == Some(h.offset));
        self.backward = self.prev.is_some_and(|p| h.offset < p.offset);
        if sequential {
            self.run = self.run.saturating_add(1);
        } else {
            self.run = 1;
            if let Readahead::Auto { initial, .. } = self.mode {
                self.next_ahead = initial;
            }
        }
        self.prev = Some(h);
    }

    /// The stored bytes of block `h` (`len` with its trailer) when the window holds them.
    fn buffered(&self, h: BlockHandle, len: usize) -> Option<&[u8]> {
        let rel = usize::try_from(h.offset.checked_sub(self.buf_offset)?).ok()?;
        self.buf.data().get(rel..rel.checked_add(len)?)
    }

    /// The window `(offset, length)` to read for block `h` (`len` bytes with its trailer), not past `limit`;
    /// `None` to read the block alone. Advances the automatic readahead.
    fn window(&mut self, h: BlockHandle, len: usize, limit: u64) -> Option<(u64, usize)> {
        let want = match self.mode {
            Readahead::Off => return None,
            // RocksDB starts after two sequential block reads.
            Readahead::Auto { max, .. } => {
                if self.run < 3 || max == 0 || self.backward {
                    return None;
                }
                let ahead = self.next_ahead.min(max);
                self.next_ahead = ahead.saturating_mul(2).min(max);
                len.saturating_add(ahead)
            }
            Readahead::Fixed(n) => n.max(len),
        };
        let end_of_block = h.offset + len as u64;
        if self.backward && matches!(self.mode, Readahead::Fixed(_)) {
            // Going backward, the window ends with the block.
            let start = end_of_block.saturating_sub(want as u64);
            return Some((start, (end_of_block - start) as usize));
        }
        let end = h.offset.saturating_add(want as u64).min(limit).max(end_of_block);
        Some((h.offset, usize::try_from(end - h.offset).ok()?))
    }
}

impl TableIter {
    /// Loads the data block the index points at (unless already loaded); unpositioned.
    fn load_block(&mut self) {
        let Some(index) = &self.index else {
            self.data = None;
            return;
        };
        if !index.valid() {
            if let Err(e) = index.status() {
                self.err = Some(in_block(e, &self.table.path, self.table.footer.index.offset));
            }
            self.data = None;
            return;
        }
        let Some(h) = BlockHandle::decode_exact(index.value()) else {
            let at = self.table.footer.index.offset;
            self.err = Some(Error::corruption(&self.table.path, at, "malformed block handle in index"));
            self.data = None;
            return;
        };
        if self.data.is_some() && h == self.data_handle {
            return;
        }
        let ra = (self.ra.mode != Readahead::Off).then_some(&mut self.ra);
        match self.table.data_block(h, self.verify, self.fill_cache, self.cache_only, ra) {
            Ok(block) => {
                match &mut self.data {
                    Some(d) => d.reset(block),
                    None => self.data = Some(BlockIter::new(block, KeyOrder::Internal)),
                }
                self.data_handle = h;
            }
            Err(e) => {
                self.err = Some(e);
                self.data = None;
            }
        }
    }

    /// True when the data iterator is positioned; records its error otherwise.
    fn data_ready(&mut self) -> bool {
        if self.err.is_some() {
            return true;
        }
        match &self.data {
            Some(d) if d.valid() => true,
            Some(d) => match d.status() {
                Ok(()) => false,
                Err(e) => {
                    self.err = Some(in_block(e, &self.table.path, self.data_handle.offset));
                    true
                }
            },
            None => false,
        }
    }

    /// Moves forward past exhausted (or empty) data blocks.
    fn skip_forward(&mut self) {
        while !self.data_ready() {
            match &mut self.index {
                Some(index) if index.valid() => index.next(),
                _ => {
                    self.data = None;
                    return;
                }
            }
            self.load_block();
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
    }

    /// Moves backward past exhausted (or empty) data blocks.
    fn skip_backward(&mut self) {
        while !self.data_ready() {
            match &mut self.index {
                Some(index) if index.valid() => index.prev(),
                _ => {
                    self.data = None;
                    return;
                }
            }
            self.load_block();
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
    }

    fn position(&mut self, index_op: impl FnOnce(&mut BlockIter), data_op: impl FnOnce(&mut BlockIter)) -> bool {
        if self.err.is_some() {
            return false;
        }
        let Some(index) = &mut self.index else {
            return false;
        };
        index_op(index);
        self.load_block();
        if let Some(d) = &mut self.data {
            data_op(d);
        }
        true
    }
}

impl InternalIterator for TableIter {
    #[inline]
    fn valid(&self) -> bool {
        self.err.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        if self.position(|i| i.seek_to_first(), |d| d.seek_to_first()) {
            self.skip_forward();
        }
    }

    fn seek_to_last(&mut self) {
        if self.position(|i| i.seek_to_last(), |d| d.seek_to_last()) {
            self.skip_backward();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        if self.position(|i| i.seek(target), |d| d.seek(target)) {
            self.skip_forward();
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.err.is_some() {
            return;
        }
        if !self.valid() {
            self.seek_to_last();
            return;
        }
        while self.valid() && ikey::compare(self.key(), target) == Ordering::Greater {
            self.prev();
        }
    }

    #[inline]
    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_backward();
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn location(&self) -> Option<(&Path, u64)> {
        Some((&self.table.path, self.data_handle.offset))
    }
    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

/// A table's key range and sequence range as the MANIFEST records them ([`Table::recorded_range`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRange {
    /// Smallest internal key (empty: the table holds nothing).
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number, tombstones included.
    pub smallest_seq: u64,
    /// Largest sequence number, tombstones included.
    pub largest_seq: u64,
    /// Range tombstones in the range-deletion block.
    pub num_range_deletions: u64,
}
