//! The options an OPTIONS file holds: one [`Field`] per line, with its section, its name (RocksDB's where
//! ShaleDB has the option), how it is written and how it is read back. Writer and reader share this one table,
//! so every persisted option round-trips. docs/format/options.md lists the same table.
//!
//! Not persisted: `create_if_missing` and `error_if_exists` (they say how one call to open treats the
//! directory, not what the database is: loaded options with `error_if_exists` could never reopen it), `fs`
//! (a runtime object), `listeners` (code), a TTL's and FIFO's `clock` (runtime objects; the system clock is used), and the merge operator
//! and compaction filter themselves (code: recorded by name only, see `LoadedOptions`).

use super::LoadedOptions;
use crate::compaction_style::{CompactionOptionsUniversal, CompactionStopStyle, CompactionStyle};
use crate::options::{MemTableRep, Options, WalRecoveryMode};
use shaledb_format::compress::CompressionType;
use shaledb_format::prefix::PrefixExtractor;
use std::str::FromStr;

/// The section an option belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Section {
    /// `[DBOptions]`.
    Db,
    /// `[CFOptions "name"]`, one per column family.
    Cf,
    /// `[TableOptions/BlockBasedTable "name"]`, one per column family.
    Table,
}

/// One option line.
pub(super) struct Field {
    pub(super) section: Section,
    /// The name in the file.
    pub(super) name: &'static str,
    /// The `Options` fields it carries (the names `Options::validate` errors start with).
    pub(super) fields: &'static [&'static str],
    /// The value written for `Options`.
    pub(super) get: fn(&Options) -> String,
    /// Reads a value into the options being loaded; the error says what is wrong with the value.
    pub(super) set: fn(&mut LoadedOptions, &str) -> Result<(), String>,
}

/// RocksDB's token for "no object" (`merge_operator=nullptr`).
pub(super) const NULLPTR: &str = "nullptr";

/// An integer: an optional `-` and decimal digits only (no `+`, no spaces), within `T`'s range.
pub(super) fn int<T: FromStr>(v: &str) -> Result<T, String> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{v:?} is not a decimal integer"));
    }
    v.parse().map_err(|_| format!("{v} is out of range"))
}

/// A finite decimal number.
pub(super) fn float(v: &str) -> Result<f64, String> {
    let ok = !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b));
    match v.parse::<f64>() {
        Ok(x) if ok && x.is_finite() => Ok(x),
        _ => Err(format!("{v:?} is not a finite decimal number")),
    }
}

/// `true` or `false`.
pub(super) fn boolean(v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{v:?} is not true or false")),
    }
}

/// RocksDB's names of the compression types ShaleDB has.
const COMPRESSIONS: [(CompressionType, &str); 4] = [
    (CompressionType::None, "kNoCompression"),
    (CompressionType::Snappy, "kSnappyCompression"),
    (CompressionType::Lz4, "kLZ4Compression"),
    (CompressionType::Zstd, "kZSTD"),
];

fn compression_name(c: CompressionType) -> &'static str {
    COMPRESSIONS.iter().find(|(t, _)| *t == c).map_or("kNoCompression", |(_, n)| n)
}

fn compression(v: &str) -> Result<CompressionType, String> {
    COMPRESSIONS.iter().find(|(_, n)| *n == v).map(|(t, _)| *t).ok_or_else(|| {
        format!("{v:?} is not a compression ShaleDB has (kNoCompression, kSnappyCompression, kLZ4Compression, kZSTD)")
    })
}

const RECOVERY_MODES: [(WalRecoveryMode, &str); 4] = [
    (WalRecoveryMode::TolerateCorruptedTailRecords, "kTolerateCorruptedTailRecords"),
    (WalRecoveryMode::AbsoluteConsistency, "kAbsoluteConsistency"),
    (WalRecoveryMode::PointInTime, "kPointInTimeRecovery"),
    (WalRecoveryMode::SkipAnyCorruptedRecords, "kSkipAnyCorruptedRecords"),
];

/// The `key=value` pairs of a RocksDB struct value `{a=1;b=2}`, each key exactly once, exactly `keys`.
fn struct_value<'a, const N: usize>(v: &'a str, keys: [&str; N]) -> Result<[&'a str; N], String> {
    let inner = v.strip_prefix('{').and_then(|v| v.strip_suffix('}')).ok_or_else(|| format!("{v:?} is not {{...}}"))?;
    let mut out: [Option<&str>; N] = [None; N];
    for part in inner.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, val) = part.split_once('=').ok_or_else(|| format!("{part:?} is not key=value"))?;
        let i = keys
            .iter()
            .position(|&key| key == k.trim())
            .ok_or_else(|| format!("unknown key {:?} in {v:?}", k.trim()))?;
        if out[i].replace(val.trim()).is_some() {
            return Err(format!("key {:?} twice in {v:?}", k.trim()));
        }
    }
    let mut done = [""; N];
    for (i, key) in keys.iter().enumerate() {
        done[i] = out[i].ok_or_else(|| format!("{v:?} lacks {key}"))?;
    }
    Ok(done)
}

/// RocksDB's escaping of a string value: `\`, `#`, `:` are preceded by `\`; newline and CR are `\n`, `\r`.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '#' | ':' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// The inverse of [`escape`]; a `\` at the end is an error.
pub(super) fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(c) => out.push(c),
            None => return Err(format!("{s:?} ends with an unpaired \\")),
        }
    }
    Ok(out)
}

fn name_or_null(name: Option<&str>) -> String {
    name.map_or(NULLPTR.to_string(), escape)
}

fn read_name(v: &str) -> Result<Option<String>, String> {
    if v == NULLPTR {
        Ok(None)
    } else {
        unescape(v).map(Some)
    }
}

/// A field read by `parse` (`int`, `boolean`, `float`) and written with `to_string`.
/// A field holding one compression type, written with RocksDB's names.
macro_rules! codec {
    ($section:ident, $name:literal, $f:ident) => {
        Field {
            section: Section::$section,
            name: $name,
            fields: &[stringify!($f)],
            get: |o| compression_name(o.$f).to_string(),
            set: |l, v| {
                l.options.$f = compression(v)?;
                Ok(())
            },
        }
    };
}

macro_rules! plain {
    ($section:ident, $name:literal, $f:ident, $parse:ident) => {
        Field {
            section: Section::$section,
            name: $name,
            fields: &[stringify!($f)],
            get: |o| o.$f.to_string(),
            set: |l, v| {
                l.options.$f = $parse(v)?;
                Ok(())
            },
        }
    };
}

/// Every persisted option, in the order written.
pub(super) const FIELDS: &[Field] = &[
    plain!(Db, "paranoid_checks", paranoid_checks, boolean),
    plain!(Db, "max_background_jobs", max_background_jobs, int),
    plain!(Db, "max_subcompactions", max_subcompactions, int),
    plain!(Db, "delayed_write_rate", delayed_write_rate, int),
    plain!(Db, "max_open_files", max_open_files, int),
    plain!(Db, "use_direct_reads", use_direct_reads, boolean),
    plain!(Db, "use_direct_io_for_flush_and_compaction", use_direct_io_for_flush_and_compaction, boolean),
    plain!(Db, "advise_random_on_open", advise_random_on_open, boolean),
    plain!(Db, "compaction_readahead_size", compaction_readahead_size, int),
    plain!(Db, "bytes_per_sync", bytes_per_sync, int),
    plain!(Db, "wal_bytes_per_sync", wal_bytes_per_sync, int),
    plain!(Db, "max_total_wal_size", max_total_wal_size, int),
    plain!(Db, "stats_dump_period_sec", stats_dump_period_sec, int),
    // RocksDB does not write its rate limiter into the OPTIONS file; ShaleDB records the parameters, and
    // loading builds a new limiter with them (one not shared with any other database).
    Field {
        section: Section::Db,
        name: "rate_limiter",
        fields: &["rate_limiter"],
        get: |o| match &o.rate_limiter {
            None => NULLPTR.to_string(),
            Some(l) => {
                let (rate, period, fairness, auto) = l.params();
                format!("{{rate_bytes_per_sec={rate};refill_period_us={period};fairness={fairness};auto_tuned={auto}}}")
            }
        },
        set: |l, v| {
            l.options.rate_limiter = if v == NULLPTR {
                None
            } else {
                let [rate, period, fairness, auto] =
                    struct_value(v, ["rate_bytes_per_sec", "refill_period_us", "fairness", "auto_tuned"])?;
                let limiter = crate::RateLimiter::new(int(rate)?, int(period)?, int(fairness)?, boolean(auto)?);
                Some(limiter.map_err(|e| e.to_string())?)
            };
            Ok(())
        },
    },
    plain!(Db, "allow_concurrent_memtable_write", allow_concurrent_memtable_write, boolean),
    Field {
        section: Section::Db,
        name: "wal_recovery_mode",
        fields: &["wal_recovery_mode"],
        get: |o| RECOVERY_MODES.iter().find(|(m, _)| *m == o.wal_recovery_mode).map_or("", |(_, n)| n).to_string(),
        set: |l, v| {
            l.options.wal_recovery_mode = RECOVERY_MODES
                .iter()
                .find(|(_, n)| *n == v)
                .map(|(m, _)| *m)
                .ok_or_else(|| format!("{v:?} is not a WAL recovery mode"))?;
            Ok(())
        },
    },
    plain!(Db, "max_manifest_file_size", max_manifest_file_size, int),
    plain!(Db, "max_log_file_size", max_log_file_size, int),
    plain!(Db, "keep_log_file_num", keep_log_file_num, int),
    plain!(Cf, "write_buffer_size", write_buffer_size, int),
    plain!(Cf, "max_write_buffer_number", max_write_buffer_number, int),
    plain!(Cf, "level0_file_num_compaction_trigger", level0_file_num_compaction_trigger, int),
    plain!(Cf, "level0_slowdown_writes_trigger", level0_slowdown_writes_trigger, int),
    plain!(Cf, "level0_stop_writes_trigger", level0_stop_writes_trigger, int),
    plain!(Cf, "num_levels", num_levels, int),
    plain!(Cf, "max_bytes_for_level_base", max_bytes_for_level_base, int),
    plain!(Cf, "max_bytes_for_level_multiplier", max_bytes_for_level_multiplier, float),
    plain!(Cf, "level_compaction_dynamic_level_bytes", level_compaction_dynamic_level_bytes, boolean),
    plain!(Cf, "target_file_size_base", target_file_size_base, int),
    plain!(Cf, "target_file_size_multiplier", target_file_size_multiplier, int),
    plain!(Cf, "soft_pending_compaction_bytes_limit", soft_pending_compaction_bytes_limit, int),
    plain!(Cf, "hard_pending_compaction_bytes_limit", hard_pending_compaction_bytes_limit, int),
    plain!(Cf, "disable_auto_compactions", disable_auto_compactions, boolean),
    Field {
        section: Section::Cf,
        name: "compaction_style",
        fields: &["compaction_style"],
        get: |o| o.compaction_style.rocksdb_name().to_string(),
        set: |l, v| {
            l.options.compaction_style = CompactionStyle::from_rocksdb_name(v).ok_or_else(|| {
                format!("{v:?} is not a compaction style ShaleDB has (kCompactionStyleLevel, kCompactionStyleUniversal, kCompactionStyleFIFO)")
            })?;
            Ok(())
        },
    },
    Field {
        section: Section::Cf,
        name: "compaction_options_universal",
        fields: &["compaction_options_universal"],
        get: |o| {
            let u = &o.compaction_options_universal;
            format!(
                "{{allow_trivial_move={};stop_style={};min_merge_width={};max_size_amplification_percent={};max_merge_width={};size_ratio={}}}",
                u.allow_trivial_move,
                u.stop_style.rocksdb_name(),
                u.min_merge_width,
                u.max_size_amplification_percent,
                u.max_merge_width,
                u.size_ratio
            )
        },
        set: |l, v| {
            let [trivial, stop, min_w, amp, max_w, ratio] = struct_value(
                v,
                [
                    "allow_trivial_move",
                    "stop_style",
                    "min_merge_width",
                    "max_size_amplification_percent",
                    "max_merge_width",
                    "size_ratio",
                ],
            )?;
            l.options.compaction_options_universal = CompactionOptionsUniversal {
                allow_trivial_move: boolean(trivial)?,
                stop_style: CompactionStopStyle::from_rocksdb_name(stop).ok_or_else(|| {
                    format!("{stop:?} is not kCompactionStopStyleSimilarSize or kCompactionStopStyleTotalSize")
                })?,
                min_merge_width: int(min_w)?,
                max_size_amplification_percent: int(amp)?,
                max_merge_width: int(max_w)?,
                size_ratio: int(ratio)?,
            };
            Ok(())
        },
    },
    // `ttl` is FIFO's TTL (see `CompactionOptionsFifo::ttl`); its clock is a runtime object, not persisted.
    Field {
        section: Section::Cf,
        name: "compaction_options_fifo",
        fields: &["compaction_options_fifo"],
        get: |o| {
            let f = &o.compaction_options_fifo;
            format!(
                "{{allow_compaction={};max_table_files_size={};ttl={}}}",
                f.allow_compaction, f.max_table_files_size, f.ttl
            )
        },
        set: |l, v| {
            let [allow, max, ttl] = struct_value(v, ["allow_compaction", "max_table_files_size", "ttl"])?;
            let f = &mut l.options.compaction_options_fifo;
            f.allow_compaction = boolean(allow)?;
            f.max_table_files_size = int(max)?;
            f.ttl = int(ttl)?;
            Ok(())
        },
    },
    codec!(Cf, "compression", compression),
    Field {
        section: Section::Cf,
        name: "compression_per_level",
        fields: &["compression_per_level"],
        get: |o| o.compression_per_level.iter().map(|c| compression_name(*c)).collect::<Vec<_>>().join(":"),
        set: |l, v| {
            l.options.compression_per_level =
                if v.is_empty() { Vec::new() } else { v.split(':').map(compression).collect::<Result<_, _>>()? };
            Ok(())
        },
    },
    Field {
        section: Section::Cf,
        name: "bottommost_compression",
        fields: &["bottommost_compression"],
        get: |o| o.bottommost_compression.map_or("kDisableCompressionOption", compression_name).to_string(),
        set: |l, v| {
            l.options.bottommost_compression =
                if v == "kDisableCompressionOption" { None } else { Some(compression(v)?) };
            Ok(())
        },
    },
    Field {
        section: Section::Cf,
        name: "compression_opts",
        fields: &["compression_level"],
        get: |o| format!("{{level={}}}", o.compression_level),
        set: |l, v| {
            let [level] = struct_value(v, ["level"])?;
            l.options.compression_level = int(level)?;
            Ok(())
        },
    },
    Field {
        section: Section::Cf,
        name: "memtable_factory",
        fields: &["memtable_rep"],
        get: |o| match o.memtable_rep {
            MemTableRep::SkipList => "SkipListFactory".to_string(),
            MemTableRep::Vector => "VectorRepFactory".to_string(),
            MemTableRep::IndexedSkipList => "IndexedSkipListFactory".to_string(),
        },
        set: |l, v| {
            l.options.memtable_rep = match v {
                "SkipListFactory" => MemTableRep::SkipList,
                "VectorRepFactory" => MemTableRep::Vector,
                "IndexedSkipListFactory" => MemTableRep::IndexedSkipList,
                _ => return Err(format!("{v:?} is not SkipListFactory, VectorRepFactory or IndexedSkipListFactory")),
            };
            Ok(())
        },
    },
    plain!(Cf, "memtable_prefix_bloom_size_ratio", memtable_prefix_bloom_size_ratio, float),
    Field {
        section: Section::Cf,
        name: "prefix_extractor",
        fields: &["prefix_extractor"],
        get: |o| o.prefix_extractor.map_or(NULLPTR.to_string(), |p| p.name()),
        set: |l, v| {
            l.options.prefix_extractor = match v {
                NULLPTR => None,
                _ => Some(PrefixExtractor::parse(v).ok_or_else(|| {
                    format!(
                        "{v:?} is not a prefix extractor ShaleDB has (rocksdb.FixedPrefix.N, rocksdb.CappedPrefix.N)"
                    )
                })?),
            };
            Ok(())
        },
    },
    Field {
        section: Section::Cf,
        name: "merge_operator",
        fields: &["merge_operator"],
        get: |o| name_or_null(o.merge_operator.as_ref().map(|m| m.name())),
        set: |l, v| {
            let name = read_name(v)?;
            l.options.merge_operator = name.as_deref().and_then(crate::merge::builtin);
            l.merge_operator_name = name;
            Ok(())
        },
    },
    Field {
        section: Section::Cf,
        name: "compaction_filter",
        fields: &["compaction_filter"],
        get: |o| name_or_null(o.compaction_filter.as_ref().map(|f| f.name())),
        set: |l, v| {
            l.compaction_filter_name = read_name(v)?;
            Ok(())
        },
    },
    // RocksDB's CF option `ttl` is compaction by file age; ShaleDB's `Options::ttl` is `DBWithTTL`'s TTL
    // (which RocksDB does not persist), so it has its own name, never taken for RocksDB's.
    Field {
        section: Section::Cf,
        name: "ttl_mode",
        fields: &["ttl"],
        get: |o| o.ttl.as_ref().map_or("off".to_string(), |t| t.seconds.to_string()),
        set: |l, v| {
            l.options.ttl = if v == "off" { None } else { Some(crate::ttl::Ttl::new(int(v)?)) };
            Ok(())
        },
    },
    // Blob files (RocksDB's CF options of the same names).
    plain!(Cf, "enable_blob_files", enable_blob_files, boolean),
    plain!(Cf, "min_blob_size", min_blob_size, int),
    plain!(Cf, "blob_file_size", blob_file_size, int),
    codec!(Cf, "blob_compression_type", blob_compression_type),
    plain!(Cf, "enable_blob_garbage_collection", enable_blob_garbage_collection, boolean),
    plain!(Cf, "blob_garbage_collection_age_cutoff", blob_garbage_collection_age_cutoff, float),
    plain!(Cf, "blob_garbage_collection_force_threshold", blob_garbage_collection_force_threshold, float),
    plain!(Cf, "blob_compaction_readahead_size", blob_compaction_readahead_size, int),
    plain!(Table, "block_size", block_size, int),
    plain!(Table, "block_restart_interval", block_restart_interval, int),
    Field {
        section: Section::Table,
        name: "filter_policy",
        fields: &["bloom_bits_per_key"],
        get: |o| {
            if o.bloom_bits_per_key == 0.0 {
                NULLPTR.to_string()
            } else {
                format!("bloomfilter:{}:false", o.bloom_bits_per_key)
            }
        },
        set: |l, v| {
            l.options.bloom_bits_per_key = if v == NULLPTR {
                0.0
            } else {
                let bad = || format!("{v:?} is not nullptr or bloomfilter:<bits per key>:false");
                let rest = v.strip_prefix("bloomfilter:").ok_or_else(bad)?;
                let (bits, block_based) = rest.split_once(':').ok_or_else(bad)?;
                if block_based != "false" {
                    return Err(format!("{v:?}: ShaleDB has no block-based filters (the last field must be false)"));
                }
                float(bits)?
            };
            Ok(())
        },
    },
    plain!(Table, "whole_key_filtering", whole_key_filtering, boolean),
    Field {
        section: Section::Table,
        name: "block_cache",
        fields: &["block_cache_size", "block_cache_shard_bits"],
        get: |o| format!("{{capacity={};num_shard_bits={}}}", o.block_cache_size, o.block_cache_shard_bits),
        set: |l, v| {
            let [capacity, bits] = struct_value(v, ["capacity", "num_shard_bits"])?;
            l.options.block_cache_size = int(capacity)?;
            l.options.block_cache_shard_bits = int(bits)?;
            Ok(())
        },
    },
    plain!(Table, "cache_index_and_filter_blocks", cache_index_and_filter_blocks, boolean),
    plain!(Table, "max_auto_readahead_size", max_auto_readahead_size, int),
];
