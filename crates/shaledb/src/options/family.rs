//! A column family's options: [`ColumnFamilyDescriptor`], and which fields of [`Options`] each family has for
//! itself ([`FAMILY_OWN_FIELDS`], [`family_options`]); the database's options give the rest. Used by the
//! database (`db/family_api.rs`, `db/open.rs`) and by the OPTIONS file's checks (`options_file/`).

use super::Options;
use shaledb_vfs::{Error, Result};

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
