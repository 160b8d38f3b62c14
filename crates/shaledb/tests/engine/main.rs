//! Engine behaviour tests (issue: the shaledb engine). One test binary; modules by theme.

mod api;
mod blob;
mod bounds;
mod checkpoint_backup;
mod column_families;
mod compaction_filter;
mod compaction_styles;
mod concurrency;
mod delete_range;
mod estimates;
mod files;
mod fixture;
mod ingest;
mod intra_l0;
mod limits;
mod linearizable;
mod listeners;
mod model;
mod multi_get;
mod ops;
mod options_file;
mod parallel_flush;
mod prefix;
mod properties;
mod read_tier;
mod readahead;
mod rust_api;
mod secondary;
mod single_delete;
mod subcompactions;
mod ttl;

use shaledb::{CompressionType, Options};

/// Removes the OPTIONS files of the database in `dir`: it is then like one written before OPTIONS files
/// existed, which opens without the options checks.
pub fn remove_options_files(dir: &std::path::Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with("OPTIONS-") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
}

/// Options with tiny memtables and files so that flushes, compactions and multi-level reads all happen on
/// small data.
pub fn tiny_options() -> Options {
    Options {
        write_buffer_size: 16 << 10,
        max_write_buffer_number: 3,
        target_file_size_base: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        max_bytes_for_level_multiplier: 4.0,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 8,
        level0_stop_writes_trigger: 12,
        block_size: 512,
        block_restart_interval: 4,
        block_cache_size: 64 << 10,
        compression: CompressionType::Lz4,
        merge_operator: shaledb::merge::builtin("stringappend"),
        ..Options::default()
    }
}
