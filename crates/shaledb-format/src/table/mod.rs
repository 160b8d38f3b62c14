//! SST files: sorted internal keys in blocks, an index over the blocks, a bloom filter over user keys.
//!
//! ```text
//! sst              := data_block* filter_block? properties_block range_del_block? metaindex_block index_block footer
//! data_block       := block trailer             ; block.md: internal key -> value, ikey::compare order
//! filter_block     := filter trailer            ; bloom.rs: user keys and/or their prefixes (see properties)
//! properties_block := block trailer             ; property name -> value, bytewise order
//! range_del_block  := block trailer             ; range tombstones (table/range_del.rs), format version 3
//! metaindex_block  := block trailer             ; meta block name -> block_handle, bytewise order
//! index_block      := block trailer             ; separator internal key -> block_handle of a data block
//! trailer          := compression_type:u8 masked_crc32c:fixed32   ; crc32c over stored block ++ compression_type
//! block_handle     := offset:varint64 size:varint64               ; size of the stored block, without trailer
//! footer           := metaindex_handle:block_handle index_handle:block_handle zero_padding  ; 40 bytes together
//!                     format_version:fixed32 footer_crc:fixed32 magic:fixed64               ; 56 bytes in all
//! footer_crc       := masked crc32c of the 44 footer bytes before it
//! magic            := 0x5453_5365_6c61_6853     ; "ShaleSST" little-endian. FROZEN
//! compression_type := 0x00 none | 0x01 snappy | 0x04 lz4 | 0x07 zstd   ; compress.rs. FROZEN
//! ```
//!
//! - A data block is stored compressed with the table's codec when that saves at least 12.5%, else as `none`.
//!   Filter, properties, metaindex and index blocks are written as `none`; a reader accepts any type anywhere.
//! - Index entry `i` maps a separator `s` with `last_key(block i) <= s < first_key(block i+1)` to block `i`. The
//!   separator shortens the user key (a byte past the common prefix is bumped) and then carries the largest
//!   trailer, `(MAX_SEQUENCE, KIND_FOR_SEEK)`, so it sorts before every real entry of that user key. The index
//!   block uses restart interval 1.
//! - Metaindex names: `shaledb.filter.bloom` (optional), `shaledb.properties` (required), `shaledb.range_del`
//!   (optional, version 3). FROZEN.
//! - Properties, each a varint64 except `compression`, which holds the codec's name (`none`, `snappy`, `lz4`,
//!   `zstd`): `compression data_size filter_size format_version index_size largest_seq num_data_blocks
//!   num_deletions num_entries num_merges raw_key_size raw_value_size smallest_seq`. Sizes include trailers.
//!   Unknown names are ignored; a missing one is corruption. Two optional identity properties (absent in tables
//!   written before they existed): `db_id` (the 16 bytes of the database's identity, as in the MANIFEST) and
//!   `file_number` (varint64: the number the table was written under, `<number:06>.sst`). FROZEN. Optional
//!   since format 4: `oldest_blob_file` (varint64: the smallest blob file number the table's blob references
//!   name; absent when it holds none).
//! - Two optional filter properties, written together when the filter also holds prefixes:
//!   `prefix_extractor` (the extractor's RocksDB name, prefix.rs, e.g. `rocksdb.FixedPrefix.8`) and
//!   `whole_key_filtering` (one byte, 0 or 1: whether the filter also holds whole user keys). Absent: the
//!   filter holds whole user keys only. An extractor name this build does not know reads as absent.
//! - One optional time property: `creation_time` (varint64, seconds since the UNIX epoch when the table's data
//!   was first written; written by FIFO compaction for its TTL, absent otherwise). FROZEN.
//! - `format_version` is `crate::FORMAT_VERSION` (4; readers accept 1 to 4: version 2 added the single-deletion
//!   kind, version 3 range deletions, version 4 blob indexes, docs/format/sst.md).

mod builder;
pub mod range_del;
mod reader;
#[cfg(test)]
mod tests;

pub use builder::{TableBuilder, MAX_ENTRY_LEN};
pub use reader::{RecordedRange, Table, TableIter};

use crate::block::{Block, BlockBuilder, KeyOrder};
use crate::cache::BlockCache;
use crate::coding::{get_fixed32, get_fixed64, get_varint64, put_fixed32, put_fixed64, put_varint64, Decoder};
use crate::compress::CompressionType;
use crate::edit::DB_ID_LEN;
use crate::ikey::{self, KIND_FOR_SEEK, MAX_SEQUENCE};
use crate::iter::InternalIterator;
use crate::prefix::PrefixExtractor;
use crate::{crc, Error, Result};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The footer's magic number. FROZEN.
pub const TABLE_MAGIC: u64 = 0x5453_5365_6c61_6853;
/// Size of the footer.
pub const FOOTER_LEN: usize = 56;
/// Size of the trailer after every block.
pub const BLOCK_TRAILER_LEN: usize = 5;
/// Metaindex name of the bloom filter. FROZEN.
pub const FILTER_BLOCK_NAME: &[u8] = b"shaledb.filter.bloom";
/// Metaindex name of the properties block. FROZEN.
pub const PROPERTIES_BLOCK_NAME: &[u8] = b"shaledb.properties";

const HANDLES_LEN: usize = 40;

/// How to build an SST. The engine converts its `Options` into this.
#[derive(Clone, Debug, PartialEq)]
pub struct TableOptions {
    /// Target uncompressed size of a data block (RocksDB `block_size`). Default 4096.
    pub block_size: usize,
    /// Entries between restart points in data blocks (RocksDB `block_restart_interval`). Default 16.
    pub block_restart_interval: usize,
    /// Codec for data blocks (RocksDB `compression`). Default LZ4.
    pub compression: CompressionType,
    /// Codec level, used by zstd (RocksDB `compression_opts.level`). Default 3.
    pub compression_level: i32,
    /// Bloom filter bits per key; <= 0 writes no filter (RocksDB `filter_policy` bits). Default 10.0.
    pub bloom_bits_per_key: f64,
    /// The database's identity, written into the properties (`db_id`). Default none.
    pub db_id: Option<[u8; DB_ID_LEN]>,
    /// The file number the table is written under, written into the properties (`file_number`), so a table
    /// copied over another is recognised. Default none.
    pub file_number: Option<u64>,
    /// Sync the file every this many bytes written (RocksDB `bytes_per_sync`); 0: only when finished.
    /// Default 0.
    pub bytes_per_sync: u64,
    /// Also put the prefix of every key in the bloom filter (RocksDB `prefix_extractor` with a full
    /// filter), so prefix seeks skip tables without the prefix. Default none.
    pub prefix_extractor: Option<PrefixExtractor>,
    /// Put whole user keys in the bloom filter (RocksDB `whole_key_filtering`). With a prefix extractor and
    /// `false`, the filter holds only prefixes: smaller, and point lookups check the prefix instead. Default
    /// true.
    pub whole_key_filtering: bool,
    /// When the table's data was first written, in seconds since the UNIX epoch, written into the
    /// properties (`creation_time`): FIFO compaction's TTL reads it. Default none.
    pub creation_time: Option<u64>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            block_restart_interval: 16,
            compression: CompressionType::Lz4,
            compression_level: 3,
            bloom_bits_per_key: 10.0,
            db_id: None,
            file_number: None,
            bytes_per_sync: 0,
            prefix_extractor: None,
            whole_key_filtering: true,
            creation_time: None,
        }
    }
}

/// What a finished table holds, recorded in its properties block.
#[derive(Clone, Debug, PartialEq)]
pub struct TableProperties {
    /// Size of the whole file (not stored: known from the file).
    pub file_size: u64,
    /// Entries of every kind.
    pub num_entries: u64,
    /// Entries that are deletions.
    pub num_deletions: u64,
    /// Entries that are merge operands.
    pub num_merges: u64,
    /// Sum of the internal key lengths.
    pub raw_key_size: u64,
    /// Sum of the value lengths.
    pub raw_value_size: u64,
    /// Bytes of data blocks as stored, trailers included.
    pub data_size: u64,
    /// Bytes of the index block as stored.
    pub index_size: u64,
    /// Bytes of the filter block as stored (0 without a filter).
    pub filter_size: u64,
    /// Number of data blocks.
    pub num_data_blocks: u64,
    /// Codec the data blocks were compressed with (blocks that did not shrink enough are stored raw).
    pub compression: CompressionType,
    /// Smallest sequence number of any entry (0 for an empty table).
    pub smallest_seq: u64,
    /// Largest sequence number of any entry.
    pub largest_seq: u64,
    /// Format version the table was written with.
    pub format_version: u32,
    /// Identity of the database that wrote the table (`None` in tables written before identities existed).
    pub db_id: Option<[u8; DB_ID_LEN]>,
    /// The number the table was written under (`None` in tables written before identities existed).
    pub file_number: Option<u64>,
    /// The extractor whose prefixes the bloom filter also holds (`None`: no prefixes; tables written
    /// before prefix filters existed have none). A name ShaleDB does not know reads as `None`.
    pub prefix_extractor: Option<PrefixExtractor>,
    /// Whether the bloom filter holds whole user keys. True in tables written before prefix filters
    /// existed.
    pub whole_key_filtering: bool,
    /// Seconds since the UNIX epoch when the table's data was first written (`None` in tables written
    /// without one: before the property existed, or under a compaction style other than FIFO).
    pub creation_time: Option<u64>,
    /// The smallest blob file number any blob reference of the table names (RocksDB's
    /// `oldest_blob_file_number`); `None` when the table holds no blob reference.
    pub oldest_blob_file: Option<u64>,
}

impl Default for TableProperties {
    fn default() -> Self {
        TableProperties {
            file_size: 0,
            num_entries: 0,
            num_deletions: 0,
            num_merges: 0,
            raw_key_size: 0,
            raw_value_size: 0,
            data_size: 0,
            index_size: 0,
            filter_size: 0,
            num_data_blocks: 0,
            compression: CompressionType::default(),
            smallest_seq: 0,
            largest_seq: 0,
            format_version: 0,
            db_id: None,
            file_number: None,
            prefix_extractor: None,
            whole_key_filtering: true,
            creation_time: None,
            oldest_blob_file: None,
        }
    }
}

/// Optional properties: written only when set, `None` when absent.
const DB_ID_PROP: &[u8] = b"db_id";
const FILE_NUMBER_PROP: &[u8] = b"file_number";
const PREFIX_EXTRACTOR_PROP: &[u8] = b"prefix_extractor";
const WHOLE_KEY_FILTERING_PROP: &[u8] = b"whole_key_filtering";
const CREATION_TIME_PROP: &[u8] = b"creation_time";
const OLDEST_BLOB_FILE_PROP: &[u8] = b"oldest_blob_file";

const PROP_NAMES: [&[u8]; 13] = [
    b"compression",
    b"data_size",
    b"filter_size",
    b"format_version",
    b"index_size",
    b"largest_seq",
    b"num_data_blocks",
    b"num_deletions",
    b"num_entries",
    b"num_merges",
    b"raw_key_size",
    b"raw_value_size",
    b"smallest_seq",
];

impl TableProperties {
    /// Encodes the properties block contents (names in bytewise order).
    fn encode(&self) -> Vec<u8> {
        let mut entries: Vec<(&[u8], Vec<u8>)> = Vec::with_capacity(PROP_NAMES.len() + 2);
        for name in PROP_NAMES {
            let mut v = Vec::new();
            match name {
                b"compression" => v.extend_from_slice(self.compression.name().as_bytes()),
                _ => put_varint64(&mut v, self.numeric(name).unwrap_or(0)),
            }
            entries.push((name, v));
        }
        if let Some(id) = &self.db_id {
            entries.push((DB_ID_PROP, id.to_vec()));
        }
        if let Some(n) = self.file_number {
            let mut v = Vec::new();
            put_varint64(&mut v, n);
            entries.push((FILE_NUMBER_PROP, v));
        }
        if let Some(t) = self.creation_time {
            let mut v = Vec::new();
            put_varint64(&mut v, t);
            entries.push((CREATION_TIME_PROP, v));
        }
        if let Some(n) = self.oldest_blob_file {
            let mut v = Vec::new();
            put_varint64(&mut v, n);
            entries.push((OLDEST_BLOB_FILE_PROP, v));
        }
        if let Some(ex) = &self.prefix_extractor {
            entries.push((PREFIX_EXTRACTOR_PROP, ex.name().into_bytes()));
            entries.push((WHOLE_KEY_FILTERING_PROP, vec![self.whole_key_filtering as u8]));
        }
        // The block needs its keys in bytewise order; the optional names fall between the fixed ones.
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let mut b = BlockBuilder::new(1);
        for (name, v) in &entries {
            b.add(name, v);
        }
        b.finish().to_vec()
    }

    fn numeric(&self, name: &[u8]) -> Option<u64> {
        Some(match name {
            b"data_size" => self.data_size,
            b"filter_size" => self.filter_size,
            b"format_version" => self.format_version as u64,
            b"index_size" => self.index_size,
            b"largest_seq" => self.largest_seq,
            b"num_data_blocks" => self.num_data_blocks,
            b"num_deletions" => self.num_deletions,
            b"num_entries" => self.num_entries,
            b"num_merges" => self.num_merges,
            b"raw_key_size" => self.raw_key_size,
            b"raw_value_size" => self.raw_value_size,
            b"smallest_seq" => self.smallest_seq,
            _ => return None,
        })
    }

    /// Decodes a properties block. Errors are `Corruption` relative to the block (the caller re-targets).
    fn decode(block: Block) -> Result<TableProperties> {
        let bad = |what: String| Error::corruption("", 0, what);
        let mut p = TableProperties::default();
        let mut seen = 0u32;
        let mut it = Arc::new(block).iter(KeyOrder::Bytewise);
        it.seek_to_first();
        while it.valid() {
            let (name, value) = (it.key(), it.value());
            if name == DB_ID_PROP {
                let id = <[u8; DB_ID_LEN]>::try_from(value)
                    .map_err(|_| bad(format!("db_id property of {} bytes, not {DB_ID_LEN}", value.len())))?;
                p.db_id = Some(id);
            } else if name == FILE_NUMBER_PROP {
                p.file_number = match get_varint64(value) {
                    Some((v, n)) if n == value.len() => Some(v),
                    _ => return Err(bad("bad value of property file_number".into())),
                };
            } else if name == CREATION_TIME_PROP {
                p.creation_time = match get_varint64(value) {
                    Some((v, n)) if n == value.len() => Some(v),
                    _ => return Err(bad("bad value of property creation_time".into())),
                };
            } else if name == OLDEST_BLOB_FILE_PROP {
                p.oldest_blob_file = match get_varint64(value) {
                    Some((v, n)) if n == value.len() => Some(v),
                    _ => return Err(bad("bad value of property oldest_blob_file".into())),
                };
            } else if name == PREFIX_EXTRACTOR_PROP {
                // An extractor this build does not know: its prefixes are of no use, never an error.
                p.prefix_extractor = std::str::from_utf8(value).ok().and_then(PrefixExtractor::parse);
            } else if name == WHOLE_KEY_FILTERING_PROP {
                p.whole_key_filtering = match value {
                    [0] => false,
                    [1] => true,
                    _ => return Err(bad("bad value of property whole_key_filtering".into())),
                };
            } else if let Some(i) = PROP_NAMES.iter().position(|n| *n == name) {
                seen |= 1 << i;
                if name == b"compression" {
                    let s = std::str::from_utf8(value).ok().and_then(CompressionType::parse);
                    p.compression = s.ok_or_else(|| bad("unknown compression name in properties".into()))?;
                } else {
                    let v = match get_varint64(value) {
                        Some((v, n)) if n == value.len() => v,
                        _ => return Err(bad(format!("bad value of property {}", String::from_utf8_lossy(name)))),
                    };
                    match name {
                        b"data_size" => p.data_size = v,
                        b"filter_size" => p.filter_size = v,
                        b"format_version" => {
                            p.format_version = u32::try_from(v).map_err(|_| bad("format_version too large".into()))?
                        }
                        b"index_size" => p.index_size = v,
                        b"largest_seq" => p.largest_seq = v,
                        b"num_data_blocks" => p.num_data_blocks = v,
                        b"num_deletions" => p.num_deletions = v,
                        b"num_entries" => p.num_entries = v,
                        b"num_merges" => p.num_merges = v,
                        b"raw_key_size" => p.raw_key_size = v,
                        b"raw_value_size" => p.raw_value_size = v,
                        _ => p.smallest_seq = v,
                    }
                }
            }
            it.next();
        }
        it.status()?;
        if let Some(i) = (0..PROP_NAMES.len()).find(|i| seen & (1 << i) == 0) {
            let name = String::from_utf8_lossy(PROP_NAMES[i]);
            return Err(bad(format!("properties block lacks {name}")));
        }
        // Sequence numbers live in 56 bits; a range past that (or upside down) cannot describe real entries.
        if p.smallest_seq > p.largest_seq || p.largest_seq > MAX_SEQUENCE {
            return Err(bad(format!(
                "properties: sequence range {}..={} is empty or past {MAX_SEQUENCE}",
                p.smallest_seq, p.largest_seq
            )));
        }
        Ok(p)
    }
}

/// Block read counters shared by every table of a database (through `Arc`). Relaxed atomics.
#[derive(Debug, Default)]
pub struct TableStats {
    block_cache_hits: AtomicU64,
    block_cache_misses: AtomicU64,
    blocks_read: AtomicU64,
    bytes_read: AtomicU64,
    file_reads: AtomicU64,
    file_bytes_read: AtomicU64,
}

impl TableStats {
    /// Zeroed counters.
    pub fn new() -> TableStats {
        TableStats::default()
    }
    /// Block lookups answered by the block cache.
    pub fn block_cache_hits(&self) -> u64 {
        self.block_cache_hits.load(Relaxed)
    }
    /// Block lookups the block cache could not answer.
    pub fn block_cache_misses(&self) -> u64 {
        self.block_cache_misses.load(Relaxed)
    }
    /// Blocks read from files.
    pub fn blocks_read(&self) -> u64 {
        self.blocks_read.load(Relaxed)
    }
    /// Bytes read from files for blocks (trailers included).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Relaxed)
    }
    /// Reads issued to table files for blocks: one per block read alone, one per readahead window (which
    /// may serve many blocks).
    pub fn file_reads(&self) -> u64 {
        self.file_reads.load(Relaxed)
    }
    /// Bytes those reads asked for (readahead windows count whole, used or not).
    pub fn file_bytes_read(&self) -> u64 {
        self.file_bytes_read.load(Relaxed)
    }
    fn add_hit(&self) {
        self.block_cache_hits.fetch_add(1, Relaxed);
    }
    fn add_miss(&self) {
        self.block_cache_misses.fetch_add(1, Relaxed);
    }
    fn add_read(&self, bytes: u64) {
        self.blocks_read.fetch_add(1, Relaxed);
        self.bytes_read.fetch_add(bytes, Relaxed);
    }
    fn add_file_read(&self, bytes: u64) {
        self.file_reads.fetch_add(1, Relaxed);
        self.file_bytes_read.fetch_add(bytes, Relaxed);
    }
}

/// How a table iterator reads the data blocks it does not find in the block cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readahead {
    /// One read per block (point lookups, which never read ahead).
    Off,
    /// RocksDB's automatic readahead, per file: the first two blocks of a sequential run are read one by one;
    /// from the third on, each read takes the block plus `initial` bytes after it (RocksDB's
    /// `initial_auto_readahead_size`, 8 KiB), the amount doubling with each read up to `max` (RocksDB's
    /// `max_auto_readahead_size`, 256 KiB). A block that does not follow the previous one starts over.
    Auto {
        /// Readahead of the first window.
        initial: usize,
        /// Largest readahead.
        max: usize,
    },
    /// Every read takes this many bytes (at least the block) in the direction of iteration, from the first
    /// block on (RocksDB's `ReadOptions::readahead_size`, and `compaction_readahead_size` for compactions).
    Fixed(usize),
}

impl Readahead {
    /// RocksDB's defaults for [`Readahead::Auto`]: 8 KiB doubling up to 256 KiB.
    pub const AUTO: Readahead = Readahead::Auto { initial: 8 << 10, max: 256 << 10 };
}

/// How a [`Table::iter_with`] iterator reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableIterOptions {
    /// Check the crc32c of the data blocks read from the file. Default true.
    pub verify_checksums: bool,
    /// Insert the data blocks read from the file into the block cache (also those served from a
    /// readahead window). Default true.
    pub fill_cache: bool,
    /// Readahead policy. Default [`Readahead::Off`].
    pub readahead: Readahead,
    /// Serve only what needs no file I/O (the engine's `ReadTier::BlockCacheOnly`): a data block, or an index
    /// not pinned in the table, that the block cache does not hold stops the iterator with
    /// [`Error::Incomplete`] instead of being read. Default false.
    pub block_cache_only: bool,
}

impl Default for TableIterOptions {
    fn default() -> Self {
        TableIterOptions {
            verify_checksums: true,
            fill_cache: true,
            readahead: Readahead::Off,
            block_cache_only: false,
        }
    }
}

/// How to open an SST for reading.
#[derive(Clone, Debug)]
pub struct TableReadOptions {
    /// Cache for data blocks (and for index and filter with `cache_index_and_filter`).
    pub cache: Option<Arc<BlockCache>>,
    /// Keep the index and filter in `cache` instead of pinning them in the table (RocksDB
    /// `cache_index_and_filter_blocks`). Default false. Ignored without a cache.
    pub cache_index_and_filter: bool,
    /// Counters to bump on every block read and cache lookup.
    pub stats: Option<Arc<TableStats>>,
    /// Check the crc32c of the metaindex, properties, index and filter blocks when they are read (data blocks
    /// are checked per iterator, [`Table::verify`] always checks). Default true. False is for looking into a
    /// damaged file (`shaledb dump --no-verify-checksums`, RocksDB's `sst_dump --verify_checksum=false`) and
    /// for fuzzing the decoders behind the checksums; damaged bytes then give errors, never a panic.
    pub verify_checksums: bool,
}

impl Default for TableReadOptions {
    fn default() -> Self {
        TableReadOptions { cache: None, cache_index_and_filter: false, stats: None, verify_checksums: true }
    }
}

/// Where a block lives in the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Size of the stored block, without its trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the encoding.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.offset);
        put_varint64(out, self.size);
    }

    /// Decodes a handle that must span all of `input`.
    pub fn decode_exact(input: &[u8]) -> Option<BlockHandle> {
        let mut d = Decoder::new(input);
        let h = BlockHandle::decode_from(&mut d)?;
        d.is_empty().then_some(h)
    }

    fn decode_from(d: &mut Decoder<'_>) -> Option<BlockHandle> {
        Some(BlockHandle { offset: d.varint64()?, size: d.varint64()? })
    }

    /// Offset just past the block's trailer.
    pub(crate) fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.size)?.checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// The fixed-size end of an SST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Footer {
    metaindex: BlockHandle,
    index: BlockHandle,
    format_version: u32,
}

impl Footer {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.metaindex.encode_to(&mut out);
        self.index.encode_to(&mut out);
        out.resize(HANDLES_LEN, 0);
        put_fixed32(&mut out, self.format_version);
        let c = crc::mask(crc::value(&out));
        put_fixed32(&mut out, c);
        put_fixed64(&mut out, TABLE_MAGIC);
        out
    }

    /// Decodes the footer read at `at` of `path`.
    fn decode(buf: &[u8], path: &Path, at: u64) -> Result<Footer> {
        let bad = |off: usize, what: String| Err(Error::corruption(path, at + off as u64, what));
        if buf.len() != FOOTER_LEN {
            return bad(0, format!("footer of {} bytes", buf.len()));
        }
        let magic = get_fixed64(&buf[48..]).unwrap_or(0);
        if magic != TABLE_MAGIC {
            return bad(48, format!("bad magic {magic:#018x}: not a ShaleDB SST"));
        }
        let stored = get_fixed32(&buf[44..]).map(crc::unmask);
        if stored != Some(crc::value(&buf[..44])) {
            return bad(44, "footer checksum mismatch".into());
        }
        let format_version = get_fixed32(&buf[40..]).unwrap_or(0);
        if format_version == 0 || format_version > crate::FORMAT_VERSION {
            return bad(40, format!("unsupported format_version {format_version}"));
        }
        let mut d = Decoder::new(&buf[..HANDLES_LEN]);
        let (Some(metaindex), Some(index)) = (BlockHandle::decode_from(&mut d), BlockHandle::decode_from(&mut d))
        else {
            return bad(0, "malformed block handle in footer".into());
        };
        Ok(Footer { metaindex, index, format_version })
    }
}

/// Sets `out` to a short internal key `s` with `last <= s < next`. REQUIRES: `last < next`.
fn separator(last: &[u8], next: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let (a, b) = (ikey::user_key(last), ikey::user_key(next));
    let n = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    if let (Some(&x), Some(&y)) = (a.get(n), b.get(n)) {
        if x < 0xff && x + 1 < y {
            out.extend_from_slice(&a[..n]);
            ikey::append_internal_key(out, &[x + 1], MAX_SEQUENCE, KIND_FOR_SEEK);
            return;
        }
    }
    out.extend_from_slice(last);
}

/// Sets `out` to a short internal key `>= last` (for after the last data block).
fn successor(last: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let a = ikey::user_key(last);
    if let Some(i) = a.iter().position(|&x| x != 0xff) {
        out.extend_from_slice(&a[..i]);
        ikey::append_internal_key(out, &[a[i] + 1], MAX_SEQUENCE, KIND_FOR_SEEK);
    } else {
        out.extend_from_slice(last);
    }
}

/// Re-targets a block-relative corruption at the block at `offset` of `path`, keeping the in-block position
/// in the message (it is meaningless as a file offset when the block was compressed). For readers that iterate
/// a block themselves (a batch lookup).
pub fn in_block(e: Error, path: &Path, offset: u64) -> Error {
    match e {
        Error::Corruption { offset: rel, what, .. } => {
            Error::corruption(path, offset, format!("{what} (byte {rel} of the block)"))
        }
        other => other,
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;
    use crate::ikey::{make_internal_key, ValueKind};
    use std::cmp::Ordering;

    #[test]
    fn separator_is_short_and_between() {
        let cases: &[(&[u8], &[u8])] =
            &[(b"abcdef", b"abzzzz"), (b"abc", b"abd"), (b"abc", b"abc\x00"), (b"a\xff", b"b"), (b"", b"x")];
        let mut out = Vec::new();
        for &(a, b) in cases {
            let last = make_internal_key(a, 5, ValueKind::Value);
            let next = make_internal_key(b, 9, ValueKind::Value);
            separator(&last, &next, &mut out);
            assert_ne!(ikey::compare(&out, &last), Ordering::Less, "{a:?} {b:?}");
            assert_eq!(ikey::compare(&out, &next), Ordering::Less, "{a:?} {b:?}");
            assert!(ikey::parse(&out).is_some());
        }
        separator(
            &make_internal_key(b"abcdef", 5, ValueKind::Value),
            &make_internal_key(b"abzz", 1, ValueKind::Value),
            &mut out,
        );
        assert_eq!(ikey::user_key(&out), b"abd");
        // Same user key: the separator must stay the last key.
        let last = make_internal_key(b"k", 9, ValueKind::Value);
        separator(&last, &make_internal_key(b"k", 3, ValueKind::Value), &mut out);
        assert_eq!(out, last);
    }

    #[test]
    fn successor_is_short_and_not_less() {
        let mut out = Vec::new();
        for a in [&b"abc"[..], b"\xff\xffa", b"\xff\xff", b""] {
            let last = make_internal_key(a, 5, ValueKind::Deletion);
            successor(&last, &mut out);
            assert_ne!(ikey::compare(&out, &last), Ordering::Less, "{a:?}");
        }
        successor(&make_internal_key(b"abc", 1, ValueKind::Value), &mut out);
        assert_eq!(ikey::user_key(&out), b"b");
    }

    #[test]
    fn footer_roundtrip() {
        let f = Footer {
            metaindex: BlockHandle { offset: u64::MAX, size: u64::MAX },
            index: BlockHandle { offset: 1 << 40, size: 12345 },
            format_version: crate::FORMAT_VERSION,
        };
        let enc = f.encode();
        assert_eq!(enc.len(), FOOTER_LEN);
        assert_eq!(Footer::decode(&enc, Path::new("x"), 0).unwrap(), f);
        assert_eq!(&enc[48..], b"ShaleSST");
    }

    #[test]
    fn properties_roundtrip() {
        let p = TableProperties {
            file_size: 0,
            num_entries: 1,
            num_deletions: 2,
            num_merges: 3,
            raw_key_size: 4,
            raw_value_size: 5,
            data_size: 6,
            index_size: 7,
            filter_size: 8,
            num_data_blocks: 9,
            compression: CompressionType::Zstd,
            smallest_seq: 10,
            largest_seq: u64::MAX >> 8,
            format_version: 1,
            db_id: None,
            file_number: None,
            prefix_extractor: None,
            whole_key_filtering: true,
            creation_time: None,
            oldest_blob_file: None,
        };
        let block = Block::new(p.encode()).unwrap();
        assert_eq!(TableProperties::decode(block).unwrap(), p);
        let with_identity = TableProperties {
            db_id: Some([0xab; DB_ID_LEN]),
            file_number: Some(12),
            creation_time: Some(1 << 40),
            oldest_blob_file: Some(7),
            ..p.clone()
        };
        let block = Block::new(with_identity.encode()).unwrap();
        assert_eq!(TableProperties::decode(block).unwrap(), with_identity);
        for (ex, whole) in [(PrefixExtractor::Fixed(8), false), (PrefixExtractor::Capped(3), true)] {
            let with_prefix = TableProperties { prefix_extractor: Some(ex), whole_key_filtering: whole, ..p.clone() };
            let block = Block::new(with_prefix.encode()).unwrap();
            assert_eq!(TableProperties::decode(block).unwrap(), with_prefix);
        }
    }

    #[test]
    fn properties_with_an_unknown_extractor_read_as_none_and_a_bad_flag_is_corruption() {
        let encode = |pairs: &[(&[u8], &[u8])]| {
            let base = TableProperties { format_version: 1, ..TableProperties::default() };
            let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let mut it = Arc::new(Block::new(base.encode()).unwrap()).iter(KeyOrder::Bytewise);
            it.seek_to_first();
            while it.valid() {
                entries.push((it.key().to_vec(), it.value().to_vec()));
                it.next();
            }
            entries.extend(pairs.iter().map(|(k, v)| (k.to_vec(), v.to_vec())));
            entries.sort();
            let mut b = BlockBuilder::new(1);
            for (k, v) in &entries {
                b.add(k, v);
            }
            Block::new(b.finish().to_vec()).unwrap()
        };
        let p = TableProperties::decode(encode(&[
            (PREFIX_EXTRACTOR_PROP, b"com.example.MyPrefix"),
            (WHOLE_KEY_FILTERING_PROP, &[1]),
        ]))
        .unwrap();
        assert_eq!((p.prefix_extractor, p.whole_key_filtering), (None, true));
        let e = TableProperties::decode(encode(&[(WHOLE_KEY_FILTERING_PROP, &[7])])).unwrap_err();
        assert!(e.to_string().contains("whole_key_filtering"), "{e}");
    }

    #[test]
    fn properties_bad_identity_is_corruption() {
        let mut b = BlockBuilder::new(1);
        b.add(DB_ID_PROP, &[1, 2, 3]);
        let e = TableProperties::decode(Block::new(b.finish().to_vec()).unwrap()).unwrap_err();
        assert!(e.to_string().contains("db_id property of 3 bytes"), "{e}");
    }

    #[test]
    fn properties_with_sequence_past_max_is_corruption() {
        let ok = TableProperties { format_version: 1, smallest_seq: 3, largest_seq: 7, ..TableProperties::default() };
        assert!(TableProperties::decode(Block::new(ok.encode()).unwrap()).is_ok());
        for (smallest_seq, largest_seq) in [(0, MAX_SEQUENCE + 1), (0, u64::MAX), (8, 7)] {
            let p = TableProperties { smallest_seq, largest_seq, ..ok.clone() };
            let e = TableProperties::decode(Block::new(p.encode()).unwrap()).unwrap_err();
            assert!(e.is_corruption() && e.to_string().contains("sequence range"), "{e}");
        }
    }

    #[test]
    fn properties_missing_name_is_corruption() {
        let mut b = BlockBuilder::new(1);
        b.add(b"num_entries", &[1]);
        let e = TableProperties::decode(Block::new(b.finish().to_vec()).unwrap()).unwrap_err();
        assert!(e.is_corruption(), "{e}");
    }
}
