//! The compaction style ([`CompactionStyle`]) and the options of universal and FIFO compaction, with
//! RocksDB's names, defaults and meanings (`CompactionOptionsUniversal`, `CompactionOptionsFIFO`).
//!
//! Column families do not exist yet: the style is one per database. It becomes per family when families
//! arrive, as in RocksDB.
//!
//! **Switching style on an existing database** is allowed in every direction, as RocksDB allows it, because
//! every style keeps the same version invariants (L0 newest first, each level below sorted and disjoint, newer
//! data above older data):
//!
//! - Level -> Universal: L0 files and each non-empty level become the sorted runs; the next universal
//!   compaction that includes the last run writes to the last level.
//! - Universal -> Level: universal's levels are sorted runs, which is all leveled compaction needs; their sizes
//!   then converge to the level targets.
//! - Level or Universal -> FIFO: FIFO only writes L0; while deeper levels hold data, FIFO's size limit drops
//!   files of the last non-empty level first, smallest keys first (RocksDB's migration rule), until only L0 is
//!   left.
//! - FIFO -> Level or Universal: FIFO's L0 files are ordinary L0 files.
//!
//! What is refused (at open, `InvalidArgument`): a `num_levels` smaller than the database's deepest non-empty
//! level + 1, whatever the style (as before), and FIFO's `ttl` with `max_open_files` other than -1 (RocksDB
//! refuses the same: the TTL rule reads each table's creation time from its open reader).

use crate::ttl::{Clock, SystemClock};
use shaledb_vfs::{Error, Result};
use std::sync::Arc;

/// How the database compacts (RocksDB's `CompactionStyle`; the numbers are db_bench's `--compaction_style`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CompactionStyle {
    /// Leveled compaction (`kCompactionStyleLevel`, 0): see the `picker` module. Default.
    #[default]
    Level,
    /// Universal (tiered) compaction (`kCompactionStyleUniversal`, 1): each L0 file and each non-empty level
    /// below is a sorted run; runs are merged by size ratio, size amplification and run count
    /// ([`CompactionOptionsUniversal`]). Less write amplification than leveled, more space amplification.
    Universal,
    /// FIFO compaction (`kCompactionStyleFIFO`, 2): files stay in L0 and the oldest are deleted whole once
    /// the database passes `max_table_files_size` or they are older than `ttl` ([`CompactionOptionsFifo`]).
    /// For data that expires by age (logs, metrics): a key's value disappears with the file holding it.
    Fifo,
}

impl CompactionStyle {
    /// RocksDB's number of the style (db_bench `--compaction_style`, the OPTIONS file).
    pub fn as_number(self) -> u32 {
        match self {
            CompactionStyle::Level => 0,
            CompactionStyle::Universal => 1,
            CompactionStyle::Fifo => 2,
        }
    }

    /// The style of RocksDB's number `n`; `None` for 3 (`kCompactionStyleNone`, not supported) and beyond.
    pub fn from_number(n: u64) -> Option<CompactionStyle> {
        match n {
            0 => Some(CompactionStyle::Level),
            1 => Some(CompactionStyle::Universal),
            2 => Some(CompactionStyle::Fifo),
            _ => None,
        }
    }

    /// RocksDB's name in OPTIONS files (`kCompactionStyleLevel` ...).
    pub fn rocksdb_name(self) -> &'static str {
        match self {
            CompactionStyle::Level => "kCompactionStyleLevel",
            CompactionStyle::Universal => "kCompactionStyleUniversal",
            CompactionStyle::Fifo => "kCompactionStyleFIFO",
        }
    }

    /// The style of a RocksDB name (see [`CompactionStyle::rocksdb_name`]).
    pub fn from_rocksdb_name(s: &str) -> Option<CompactionStyle> {
        [CompactionStyle::Level, CompactionStyle::Universal, CompactionStyle::Fifo]
            .into_iter()
            .find(|c| c.rocksdb_name() == s)
    }
}

/// When universal compaction stops adding runs to a size-ratio merge (RocksDB's `CompactionStopStyle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CompactionStopStyle {
    /// Stop at a run larger than the *last picked run* times `(100 + size_ratio)%`, or much smaller than it
    /// (`kCompactionStopStyleSimilarSize`, 0).
    SimilarSize,
    /// Stop at a run larger than the *sum of the picked runs* times `(100 + size_ratio)%`
    /// (`kCompactionStopStyleTotalSize`, 1). Default, as in RocksDB.
    #[default]
    TotalSize,
}

impl CompactionStopStyle {
    /// RocksDB's name in OPTIONS files.
    pub fn rocksdb_name(self) -> &'static str {
        match self {
            CompactionStopStyle::SimilarSize => "kCompactionStopStyleSimilarSize",
            CompactionStopStyle::TotalSize => "kCompactionStopStyleTotalSize",
        }
    }

    /// The stop style of a RocksDB name.
    pub fn from_rocksdb_name(s: &str) -> Option<CompactionStopStyle> {
        [CompactionStopStyle::SimilarSize, CompactionStopStyle::TotalSize].into_iter().find(|c| c.rocksdb_name() == s)
    }
}

/// Options of universal compaction (RocksDB's `CompactionOptionsUniversal`, same defaults). The picker
/// (`picker/universal.rs`) tries, in order: size amplification, size ratio, then run count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionOptionsUniversal {
    /// Percentage of flexibility when comparing run sizes: a run joins the merge while it is at most
    /// `(100 + size_ratio)%` of what is already picked ([`CompactionStopStyle`]). Default: 1.
    pub size_ratio: u32,
    /// Fewest runs merged by a size-ratio merge (at least 2 are merged whatever this says). Default: 2.
    pub min_merge_width: u32,
    /// Most runs merged by a size-ratio or run-count merge. Default: `u32::MAX`.
    pub max_merge_width: u32,
    /// When every run but the oldest together exceed this percentage of the oldest run, all runs are merged
    /// into one (a full compaction into the last level). Default: 200.
    pub max_size_amplification_percent: u32,
    /// See [`CompactionStopStyle`]. Default: `TotalSize`.
    pub stop_style: CompactionStopStyle,
    /// When the picked files do not overlap each other at all, move them to the output level by a version
    /// edit instead of rewriting them. Default: `false`.
    pub allow_trivial_move: bool,
}

impl Default for CompactionOptionsUniversal {
    fn default() -> Self {
        CompactionOptionsUniversal {
            size_ratio: 1,
            min_merge_width: 2,
            max_merge_width: u32::MAX,
            max_size_amplification_percent: 200,
            stop_style: CompactionStopStyle::TotalSize,
            allow_trivial_move: false,
        }
    }
}

/// Options of FIFO compaction (RocksDB's `CompactionOptionsFIFO`, plus the TTL).
#[derive(Clone)]
pub struct CompactionOptionsFifo {
    /// Once the table files together exceed this many bytes, the oldest are deleted until they fit.
    /// Default: 1 GiB.
    pub max_table_files_size: u64,
    /// Merge runs of small L0 files (each at most 1.1 x `write_buffer_size` per file removed) once
    /// `level0_file_num_compaction_trigger` of them exist, as RocksDB's intra-L0 compaction does.
    /// Default: `false`.
    pub allow_compaction: bool,
    /// Delete whole L0 files whose creation time is more than `ttl` seconds ago, oldest first (as long as
    /// what remains is under `max_table_files_size`; otherwise the size rule runs). 0 turns it off. NB:
    /// RocksDB keeps this in `ColumnFamilyOptions::ttl` since 6.x; ShaleDB's `Options::ttl` is TTL mode
    /// (`DBWithTTL`), so FIFO's lives here, where RocksDB had it before (`CompactionOptionsFIFO::ttl`).
    /// A table's creation time is a table property (`creation_time`) that tables written under FIFO carry;
    /// a table without one (written under another style or an older ShaleDB) stops the TTL rule at it, as
    /// RocksDB's rule stops at a creation time of 0. Requires `max_open_files = -1`. Default: 0.
    pub ttl: u64,
    /// The time source of the TTL rule and of the tables' creation time. Default: [`SystemClock`].
    pub clock: Arc<dyn Clock>,
}

impl Default for CompactionOptionsFifo {
    fn default() -> Self {
        CompactionOptionsFifo {
            max_table_files_size: 1 << 30,
            allow_compaction: false,
            ttl: 0,
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for CompactionOptionsFifo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The clock is a trait object without `Debug`.
        write!(
            f,
            "CompactionOptionsFifo {{ max_table_files_size: {}, allow_compaction: {}, ttl: {}, .. }}",
            self.max_table_files_size, self.allow_compaction, self.ttl
        )
    }
}

/// Checks the style's options (called by `Options::validate`).
pub(crate) fn validate(
    u: &CompactionOptionsUniversal,
    f: &CompactionOptionsFifo,
    style: CompactionStyle,
    max_open_files: i32,
) -> Result<()> {
    let invalid = |m: String| Err(Error::InvalidArgument(m));
    if u.min_merge_width < 2 {
        return invalid(format!(
            "compaction_options_universal.min_merge_width must be at least 2, got {}",
            u.min_merge_width
        ));
    }
    if u.max_merge_width < u.min_merge_width {
        return invalid(format!(
            "compaction_options_universal.max_merge_width ({}) must be >= min_merge_width ({})",
            u.max_merge_width, u.min_merge_width
        ));
    }
    if f.max_table_files_size == 0 {
        return invalid("compaction_options_fifo.max_table_files_size must be positive".into());
    }
    if style == CompactionStyle::Fifo && f.ttl > 0 && max_open_files != -1 {
        return invalid(format!(
            "compaction_options_fifo.ttl needs max_open_files = -1 (got {max_open_files}): the TTL rule reads each \
             table's creation time from its open reader"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_round_trip() {
        for s in [CompactionStyle::Level, CompactionStyle::Universal, CompactionStyle::Fifo] {
            assert_eq!(CompactionStyle::from_number(u64::from(s.as_number())), Some(s));
            assert_eq!(CompactionStyle::from_rocksdb_name(s.rocksdb_name()), Some(s));
        }
        assert_eq!(CompactionStyle::from_number(3), None);
        assert_eq!(CompactionStyle::from_rocksdb_name("kCompactionStyleNone"), None);
        for s in [CompactionStopStyle::SimilarSize, CompactionStopStyle::TotalSize] {
            assert_eq!(CompactionStopStyle::from_rocksdb_name(s.rocksdb_name()), Some(s));
        }
    }

    #[test]
    fn bad_values_are_refused_with_the_option_named() {
        let f = CompactionOptionsFifo::default();
        let u = CompactionOptionsUniversal { min_merge_width: 1, ..Default::default() };
        let e = validate(&u, &f, CompactionStyle::Universal, -1).unwrap_err();
        assert!(e.to_string().contains("min_merge_width"), "{e}");
        let u = CompactionOptionsUniversal { min_merge_width: 4, max_merge_width: 3, ..Default::default() };
        assert!(validate(&u, &f, CompactionStyle::Universal, -1).unwrap_err().to_string().contains("max_merge_width"));
        let u = CompactionOptionsUniversal::default();
        let f0 = CompactionOptionsFifo { max_table_files_size: 0, ..Default::default() };
        assert!(validate(&u, &f0, CompactionStyle::Fifo, -1).unwrap_err().to_string().contains("max_table_files_size"));
        let ft = CompactionOptionsFifo { ttl: 60, ..Default::default() };
        let e = validate(&u, &ft, CompactionStyle::Fifo, 100).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("max_open_files"), "{e}");
        // The same TTL under another style is not used, so not refused; and fine with every file open.
        validate(&u, &ft, CompactionStyle::Level, 100).unwrap();
        validate(&u, &ft, CompactionStyle::Fifo, -1).unwrap();
        validate(&u, &f, CompactionStyle::Level, -1).unwrap();
    }
}
