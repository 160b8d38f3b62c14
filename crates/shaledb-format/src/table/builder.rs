//! Writes an SST front to back in one pass (grammar in `table/mod.rs`).

use super::{
    separator, successor, BlockHandle, Footer, TableOptions, TableProperties, FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME,
};
use crate::block::BlockBuilder;
use crate::bloom::{key_hash, BloomBuilder};
use crate::compress::{compress, CompressionType, MAX_BLOCK_LEN};
use crate::ikey::{self, ValueKind};
use crate::{crc, Error, Result};
use shaledb_vfs::WritableFile;
use std::cmp::Ordering;

/// Bytes an entry adds to a block besides its key and value, at most: three varint lengths and a restart
/// offset (an upper bound, since key sharing only makes the entry smaller).
const ENTRY_HEADER_ESTIMATE: usize = 3 * 5 + 4;

/// Largest data block target accepted; larger `block_size` settings are clamped to it.
const MAX_BLOCK_SIZE: usize = MAX_BLOCK_LEN / 4;
/// Largest single entry (internal key + value): one entry must fit in a block a reader accepts. The engine
/// refuses larger writes before acknowledging them.
pub const MAX_ENTRY_LEN: usize = MAX_BLOCK_LEN / 2;

/// Appends blocks with their trailers and tracks the file offset.
struct BlockWriter {
    file: Box<dyn WritableFile>,
    offset: u64,
    scratch: Vec<u8>,
    /// `TableOptions::bytes_per_sync`, and the offset up to which the file was last synced.
    bytes_per_sync: u64,
    synced: u64,
}

impl BlockWriter {
    /// Writes `raw`, compressed with `kind` when that saves at least 12.5%.
    fn write_block(&mut self, raw: &[u8], kind: CompressionType, level: i32) -> Result<BlockHandle> {
        let (contents, kind) = if kind != CompressionType::None
            && compress(kind, level, raw, &mut self.scratch)
            && self.scratch.len() <= raw.len() - raw.len() / 8
        {
            (&self.scratch[..], kind)
        } else {
            (raw, CompressionType::None)
        };
        let mut trailer = [0u8; 5];
        trailer[0] = kind as u8;
        let c = crc::mask(crc::extend(crc::value(contents), &trailer[..1]));
        trailer[1..].copy_from_slice(&c.to_le_bytes());
        self.file.append(contents)?;
        self.file.append(&trailer)?;
        let handle = BlockHandle { offset: self.offset, size: contents.len() as u64 };
        self.offset += (contents.len() + trailer.len()) as u64;
        if self.bytes_per_sync > 0 && self.offset - self.synced >= self.bytes_per_sync {
            self.file.sync()?;
            self.synced = self.offset;
        }
        Ok(handle)
    }
}

/// Builds an SST from internal keys added in increasing [`ikey::compare`] order.
pub struct TableBuilder {
    opts: TableOptions,
    w: BlockWriter,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    bloom: Option<BloomBuilder>,
    last_key: Vec<u8>,
    /// Handle of the last flushed data block, waiting for the next key to pick its separator.
    pending_handle: Option<BlockHandle>,
    handle_buf: Vec<u8>,
    sep_buf: Vec<u8>,
    props: TableProperties,
    /// Range tombstones, written in their own block at `finish` (`range_del.rs`).
    range_dels: Vec<super::range_del::StoredRangeTombstone>,
    /// Hash of the last prefix put in the bloom filter: keys of one prefix are adjacent, so it is added once.
    last_prefix_hash: Option<u64>,
    /// First write error; every later call returns it (the file is unusable).
    err: Option<Error>,
}

impl TableBuilder {
    /// Starts a table written to `file`.
    pub fn new(mut opts: TableOptions, file: Box<dyn WritableFile>) -> TableBuilder {
        opts.block_size = opts.block_size.clamp(1, MAX_BLOCK_SIZE);
        let bloom = (opts.bloom_bits_per_key > 0.0).then(|| BloomBuilder::new(opts.bloom_bits_per_key));
        let bytes_per_sync = opts.bytes_per_sync;
        let props = TableProperties {
            compression: opts.compression,
            smallest_seq: u64::MAX,
            format_version: crate::FORMAT_VERSION,
            db_id: opts.db_id,
            file_number: opts.file_number,
            creation_time: opts.creation_time,
            // Without a filter there is nothing to say about its contents; without prefixes in it, it holds
            // whole keys.
            prefix_extractor: opts.prefix_extractor.filter(|_| opts.bloom_bits_per_key > 0.0),
            whole_key_filtering: opts.whole_key_filtering
                || opts.prefix_extractor.is_none()
                || opts.bloom_bits_per_key <= 0.0,
            ..TableProperties::default()
        };
        TableBuilder {
            data_block: BlockBuilder::new(opts.block_restart_interval),
            index_block: BlockBuilder::new(1),
            opts,
            w: BlockWriter { file, offset: 0, scratch: Vec::new(), bytes_per_sync, synced: 0 },
            bloom,
            last_key: Vec::new(),
            pending_handle: None,
            handle_buf: Vec::new(),
            sep_buf: Vec::new(),
            props,
            range_dels: Vec::new(),
            last_prefix_hash: None,
            err: None,
        }
    }

    /// Adds a range tombstone `[begin, end)` at `seq`, in any order relative to the point entries; they go into
    /// the range-deletion block at [`TableBuilder::finish`]. An empty range (`begin >= end`) is left out.
    /// REQUIRES: `seq <= MAX_SEQUENCE`. NB: the caller widens the file's key range by the tombstones.
    pub fn add_range_tombstone(&mut self, begin: &[u8], end: &[u8], seq: u64) {
        if begin < end {
            self.range_dels.push(super::range_del::StoredRangeTombstone {
                begin: begin.to_vec(),
                end: end.to_vec(),
                seq,
            });
        }
    }

    /// Adds an entry. REQUIRES: `ikey` is greater than every key added before (by [`ikey::compare`]); a key
    /// out of order, malformed or too large is `InvalidArgument` and leaves the builder unchanged.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        let Some(parsed) = ikey::parse(ikey) else {
            return Err(Error::InvalidArgument(format!("malformed internal key of {} bytes", ikey.len())));
        };
        if self.props.num_entries > 0 && ikey::compare(ikey, &self.last_key) != Ordering::Greater {
            return Err(Error::InvalidArgument("table keys must be added in increasing order".into()));
        }
        if ikey.len() + value.len() > MAX_ENTRY_LEN {
            return Err(Error::InvalidArgument(format!(
                "entry of {} bytes exceeds the {MAX_ENTRY_LEN}-byte limit",
                ikey.len() + value.len()
            )));
        }
        // Cut the block before this entry when it would take the block past `block_size` and the block is
        // already within 10% of it (RocksDB's `block_size_deviation` of 10): blocks then stay at or under
        // the target instead of always passing it by up to one entry, which keeps a block of a page-multiple
        // target within that many pages and the read of a block no larger than asked for.
        if !self.data_block.is_empty() {
            let size = self.data_block.estimated_size();
            let after = size + ikey.len() + value.len() + ENTRY_HEADER_ESTIMATE;
            if after > self.opts.block_size && size * 10 > self.opts.block_size * 9 {
                self.flush_data_block()?;
            }
        }
        if let Some(handle) = self.pending_handle.take() {
            separator(&self.last_key, ikey, &mut self.sep_buf);
            self.add_index_entry(handle);
        }
        if let Some(b) = &mut self.bloom {
            match self.props.prefix_extractor {
                // Versions of one user key are adjacent: the builder stores their hash once.
                None => b.add_hash(key_hash(parsed.user_key)),
                Some(ex) => {
                    // Whole keys and prefixes interleave, so each kind keeps its own last hash.
                    let new_key = self.props.num_entries == 0 || ikey::user_key(&self.last_key) != parsed.user_key;
                    if new_key {
                        if self.props.whole_key_filtering {
                            b.add_hash(key_hash(parsed.user_key));
                        }
                        if let Some(prefix) = ex.prefix(parsed.user_key) {
                            let h = key_hash(prefix);
                            if self.last_prefix_hash != Some(h) {
                                b.add_hash(h);
                                self.last_prefix_hash = Some(h);
                            }
                        }
                    }
                }
            }
        }
        let p = &mut self.props;
        p.num_entries += 1;
        match parsed.kind {
            ValueKind::Deletion | ValueKind::SingleDeletion => p.num_deletions += 1,
            ValueKind::Merge => p.num_merges += 1,
            // `parse` never yields a range tombstone's kind for a point key.
            ValueKind::Value | ValueKind::RangeDeletion => {}
            ValueKind::BlobIndex => {
                if let Some(b) = crate::blob::BlobIndex::decode(value) {
                    p.oldest_blob_file = Some(p.oldest_blob_file.map_or(b.file_number, |o| o.min(b.file_number)));
                }
            }
        }
        p.raw_key_size += ikey.len() as u64;
        p.raw_value_size += value.len() as u64;
        p.smallest_seq = p.smallest_seq.min(parsed.seq);
        p.largest_seq = p.largest_seq.max(parsed.seq);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.data_block.add(ikey, value);
        if self.data_block.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn add_index_entry(&mut self, handle: BlockHandle) {
        self.handle_buf.clear();
        handle.encode_to(&mut self.handle_buf);
        self.index_block.add(&self.sep_buf, &self.handle_buf);
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let res = self.w.write_block(self.data_block.finish(), self.opts.compression, self.opts.compression_level);
        self.data_block.reset();
        let handle = self.check(res)?;
        self.props.data_size += handle.size + super::BLOCK_TRAILER_LEN as u64;
        self.props.num_data_blocks += 1;
        self.pending_handle = Some(handle);
        Ok(())
    }

    fn check<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.err = Some(e.clone());
        }
        r
    }

    /// Number of entries added.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Bytes written so far plus the unfinished data block's estimated size.
    pub fn file_size(&self) -> u64 {
        self.w.offset + self.data_block.estimated_size() as u64
    }

    /// Writes the remaining blocks and the footer, then syncs the file (`fdatasync`).
    pub fn finish(mut self) -> Result<TableProperties> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        self.flush_data_block()?;
        if let Some(handle) = self.pending_handle.take() {
            successor(&self.last_key, &mut self.sep_buf);
            self.add_index_entry(handle);
        }
        if self.props.num_entries == 0 {
            self.props.smallest_seq = 0;
        }
        let mut meta = BlockBuilder::new(1);
        let mut h = Vec::new();
        if let Some(bloom) = &mut self.bloom {
            let filter = bloom.finish();
            let handle = self.w.write_block(&filter, CompressionType::None, 0)?;
            self.props.filter_size = handle.size + super::BLOCK_TRAILER_LEN as u64;
            handle.encode_to(&mut h);
            meta.add(FILTER_BLOCK_NAME, &h);
        }
        // The index is written after the properties but its size is known now: it is stored uncompressed.
        let index = self.index_block.finish();
        self.props.index_size = (index.len() + super::BLOCK_TRAILER_LEN) as u64;
        let props_handle = self.w.write_block(&self.props.encode(), CompressionType::None, 0)?;
        h.clear();
        props_handle.encode_to(&mut h);
        meta.add(PROPERTIES_BLOCK_NAME, &h);
        // Metaindex names are in bytewise order: "shaledb.properties" < "shaledb.range_del".
        if !self.range_dels.is_empty() {
            let block = super::range_del::encode(&self.range_dels);
            let handle = self.w.write_block(&block, CompressionType::None, 0)?;
            h.clear();
            handle.encode_to(&mut h);
            meta.add(super::range_del::RANGE_DEL_BLOCK_NAME, &h);
        }
        let metaindex = self.w.write_block(meta.finish(), CompressionType::None, 0)?;
        let index = self.w.write_block(self.index_block.finish(), CompressionType::None, 0)?;
        let footer = Footer { metaindex, index, format_version: crate::FORMAT_VERSION }.encode();
        self.w.file.append(&footer)?;
        self.w.offset += footer.len() as u64;
        self.w.file.sync()?;
        self.props.file_size = self.w.offset;
        Ok(self.props)
    }

    /// Drops the builder without finishing the table; the caller removes the file.
    pub fn abandon(self) {}
}
