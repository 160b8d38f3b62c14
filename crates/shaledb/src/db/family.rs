//! Column families: several LSM trees in one database, sharing its WAL, sequence numbers, block cache,
//! background threads and MANIFEST (docs/format/manifest.md, docs/format/batch.md).
//!
//! Each family has its own memtables, version (levels and blob files), options and published
//! [`SuperVersion`]; the default family (id 0, named `default`) is the one every call without a family uses.
//! A write batch may touch several families and is applied all or nothing: one WAL record, one range of
//! sequence numbers. Each family records in the MANIFEST the WAL number from which its writes are not yet in
//! its tables (its log number); recovery replays a WAL record into a family only from there, and a WAL is
//! deleted once it is below every live family's log number.

use super::SuperVersion;
use crate::memtable::MemTable;
use crate::options::Options;
use arc_swap::ArcSwap;
use shaledb_vfs::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One column family: what readers and the background jobs need of it.
pub(crate) struct Family {
    pub(crate) id: u32,
    pub(crate) name: String,
    /// The database's options with this family's own fields ([`family_options`]).
    pub(crate) opts: Options,
    /// What readers of this family see.
    pub(crate) sv: ArcSwap<SuperVersion>,
    /// Set once the family's drop is durable: reads of a handle still work on what it held, writes fail.
    pub(crate) dropped: AtomicBool,
    /// The open database it belongs to ([`new_db_token`]): a handle of another database is refused.
    pub(crate) db_token: u64,
}

/// A number no other database opened by this process has: what tells a family handle's database apart.
pub(crate) fn new_db_token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Family {
    pub(crate) fn new(id: u32, name: String, opts: Options, sv: SuperVersion, db_token: u64) -> Family {
        Family { id, name, opts, sv: ArcSwap::from_pointee(sv), dropped: AtomicBool::new(false), db_token }
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }
}

/// A family's write-side state, under the database's state mutex.
pub(crate) struct FamilyState {
    pub(crate) fam: Arc<Family>,
    pub(crate) mem: Arc<MemTable>,
    /// Immutable memtables waiting for flush, newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    /// The stall assessment's figures of the family's current version, computed once per version.
    pub(crate) shape: super::stall::ShapeMemo,
}

/// The memtables writes go into, by family id (sorted; the default family first): what the write leader hands
/// its group, rebuilt whenever a memtable is switched or a family created or dropped.
#[derive(Default)]
pub(crate) struct Mems(pub(crate) Vec<(u32, Arc<MemTable>)>);

impl Mems {
    /// The active memtable of family `id` (`None`: dropped meanwhile; its records are skipped, as if written
    /// before the drop, which is what recovery does with them too).
    pub(crate) fn get(&self, id: u32) -> Option<&Arc<MemTable>> {
        match self.0.first() {
            Some((0, m)) if id == 0 => Some(m),
            _ => self.0.binary_search_by_key(&id, |(i, _)| *i).ok().map(|i| &self.0[i].1),
        }
    }
}

/// A handle on a column family, from [`crate::Db::create_column_family`] or [`crate::Db::column_family`]:
/// cheap to clone, valid for the life of the database. After the family is dropped, writes through it fail
/// with `InvalidArgument`; reads see what the family held.
#[derive(Clone)]
pub struct ColumnFamily {
    pub(crate) fam: Arc<Family>,
}

impl ColumnFamily {
    /// The family's name.
    pub fn name(&self) -> &str {
        &self.fam.name
    }

    /// The family's id: 0 for the default family, never reused after a drop.
    pub fn id(&self) -> u32 {
        self.fam.id
    }

    /// The options the family was opened or created with (database-wide fields are the database's).
    pub fn options(&self) -> &Options {
        &self.fam.opts
    }
}

impl std::fmt::Debug for ColumnFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnFamily").field("id", &self.fam.id).field("name", &self.fam.name).finish()
    }
}

/// A family to open with [`crate::Db::open_with_column_families`]: its name and options.
#[derive(Clone)]
pub struct ColumnFamilyDescriptor {
    /// The family's name.
    pub name: String,
    /// Its options. The family's own fields (RocksDB's `ColumnFamilyOptions`): `write_buffer_size`,
    /// `max_write_buffer_number`, the `level0_*` triggers, `max_bytes_for_level_base` and `_multiplier`,
    /// `level_compaction_dynamic_level_bytes`, `target_file_size_base` and `_multiplier`, the pending-compaction
    /// byte limits, `disable_auto_compactions`, `compaction_style` and its universal and FIFO options,
    /// `compression`, `compression_per_level`, `bottommost_compression`, `compression_level`, `block_size`,
    /// `block_restart_interval`, `bloom_bits_per_key`, `memtable_rep`, `prefix_extractor`,
    /// `whole_key_filtering`, `memtable_prefix_bloom_size_ratio`, `merge_operator`, `compaction_filter` and
    /// the blob file options. Every other field is taken from the database's options; `num_levels` must equal
    /// the database's.
    pub options: Options,
}

impl ColumnFamilyDescriptor {
    /// A descriptor of family `name` with `options`.
    pub fn new(name: impl Into<String>, options: Options) -> ColumnFamilyDescriptor {
        ColumnFamilyDescriptor { name: name.into(), options }
    }
}

/// The options of a family: `family`'s values of the fields each family has for itself (RocksDB's
/// `ColumnFamilyOptions`: memtable size and number, level sizes and targets, compaction style and its
/// options, automatic compactions, pending-compaction limits, compression per level, block size and restart
/// interval, bloom bits, prefix extractor and prefix bloom, merge operator, compaction filter, memtable kind,
/// blob file options), and `db`'s for the rest (file system, WAL, caches, background jobs, TTL, ...).
/// `num_levels` must be the database's: every family has as many levels.
pub(crate) fn family_options(db: &Options, family: &Options) -> Result<Options> {
    if family.num_levels != db.num_levels {
        return Err(Error::InvalidArgument(format!(
            "a column family has num_levels {} but the database {}: every family has as many levels",
            family.num_levels, db.num_levels
        )));
    }
    let o = own_fields(db, family);
    o.validate()?;
    Ok(o)
}

/// Declares the fields each family has for itself once: [`FAMILY_OWN_FIELDS`] (their names, for the OPTIONS
/// file's checks) and `own_fields` (the options built from them).
macro_rules! family_own_fields {
    ($($field:ident),* $(,)?) => {
        /// The `Options` fields each column family has for itself ([`family_options`]); every other field is
        /// the database's.
        pub(crate) const FAMILY_OWN_FIELDS: &[&str] = &[$(stringify!($field)),*];

        /// `family`'s values of [`FAMILY_OWN_FIELDS`], `db`'s for the rest.
        fn own_fields(db: &Options, family: &Options) -> Options {
            Options { $($field: family.$field.clone(),)* ..db.clone() }
        }
    };
}

family_own_fields!(
    write_buffer_size,
    max_write_buffer_number,
    level0_file_num_compaction_trigger,
    level0_slowdown_writes_trigger,
    level0_stop_writes_trigger,
    max_bytes_for_level_base,
    max_bytes_for_level_multiplier,
    level_compaction_dynamic_level_bytes,
    target_file_size_base,
    target_file_size_multiplier,
    soft_pending_compaction_bytes_limit,
    hard_pending_compaction_bytes_limit,
    disable_auto_compactions,
    compaction_style,
    compaction_options_universal,
    compaction_options_fifo,
    compression,
    compression_per_level,
    bottommost_compression,
    compression_level,
    block_size,
    block_restart_interval,
    bloom_bits_per_key,
    memtable_rep,
    prefix_extractor,
    whole_key_filtering,
    memtable_prefix_bloom_size_ratio,
    merge_operator,
    compaction_filter,
    enable_blob_files,
    min_blob_size,
    blob_file_size,
    blob_compression_type,
    enable_blob_garbage_collection,
    blob_garbage_collection_age_cutoff,
    blob_garbage_collection_force_threshold,
    blob_compaction_readahead_size,
);
