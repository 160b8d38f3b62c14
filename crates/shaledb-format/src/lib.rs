//! ShaleDB's on-disk formats, as codecs only: nothing here knows about the engine's `Options`, threads or
//! versions. Each module opens with the grammar of its format (the same text as `docs/format/*.md`).
//!
//! Layering: `coding`/`crc` <- `log` (WAL and MANIFEST framing), `batch`, `edit`, `filenames` <- `block`, `bloom`,
//! `compress` <- `table` (SST builder and reader, block cache); `manifest` and `wal` read MANIFESTs and WALs.

pub mod batch;
pub mod blob;
pub mod block;
pub mod bloom;
pub mod cache;
pub mod coding;
pub mod compress;
pub mod crc;
pub mod edit;
pub mod filenames;
pub mod ikey;
pub mod iter;
pub mod log;
pub mod manifest;
pub mod prefix;
pub mod table;
pub mod wal;

pub use shaledb_vfs::{Error, Result};

/// Version of the on-disk format family (WAL, MANIFEST, SST footer). Bumped on any change to any of them.
/// Written into every SST footer and into the first MANIFEST edit. Readers accept every version up to theirs.
///
/// - 1: the first format.
/// - 2: internal keys and write-batch records may hold the kind `0x07` single deletion (`Db::single_delete`),
///   and index separators carry it as `KIND_FOR_SEEK`. Version-1 files never do, so they open unchanged; a
///   version-1 reader refuses version-2 files cleanly instead of misreading them.
/// - 3: write-batch records may hold the kind `0x0f` range deletion (`Db::delete_range`); tables carry range
///   tombstones in a `shaledb.range_del` meta block (docs/format/sst.md), MANIFEST files with tombstones tag 10.
///   Version-2 files hold neither, so they open unchanged.
/// - 4: blob files (`NNNNNN.blob`, docs/format/blob.md): tables may hold the kind `0x11` blob index (and index
///   separators carry it as `KIND_FOR_SEEK`); MANIFEST edits may hold blob file additions and garbage (tags 8
///   and 9). Older files never do, so they open unchanged.
/// - 5: column families: write-batch records may carry a family prefix (`0x04 id`, docs/format/batch.md), and
///   MANIFEST edits may name a family, add or drop one (tags 11 to 14, docs/format/manifest.md). Older files
///   never do, so they open unchanged, as the default family.
pub const FORMAT_VERSION: u32 = 5;
