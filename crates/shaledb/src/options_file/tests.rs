use super::fields::FIELDS;
use super::*;
use crate::compaction_filter::{CompactionFilter, Decision, FilterContext};
use crate::compaction_style::{
    CompactionOptionsFifo, CompactionOptionsUniversal, CompactionStopStyle, CompactionStyle,
};
use crate::merge::MergeOperator;
use crate::options::{MemTableRep, WalRecoveryMode};
use shaledb_format::compress::CompressionType;
use shaledb_format::prefix::PrefixExtractor;

#[derive(Debug)]
struct Concat;
impl MergeOperator for Concat {
    fn name(&self) -> &str {
        "my#concat:op\\v2\n"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut v = existing.unwrap_or_default().to_vec();
        operands.iter().for_each(|o| v.extend_from_slice(o));
        Some(v)
    }
}

#[derive(Debug)]
struct KeepAll;
impl CompactionFilter for KeepAll {
    fn name(&self) -> &str {
        "keep-all"
    }
    fn filter(&self, _cx: &FilterContext, _key: &[u8], _value: &[u8]) -> Decision {
        Decision::Keep
    }
}

/// Every persisted option away from its default; `ttl` or a merge operator (they exclude each other).
fn non_default(with_ttl: bool) -> Options {
    Options {
        paranoid_checks: false,
        max_background_jobs: 5,
        max_subcompactions: 3,
        delayed_write_rate: 1234567,
        max_open_files: 500,
        use_direct_reads: true,
        use_direct_io_for_flush_and_compaction: true,
        advise_random_on_open: false,
        compaction_readahead_size: 4 << 20,
        bytes_per_sync: 1 << 20,
        wal_bytes_per_sync: 2 << 20,
        max_total_wal_size: 64 << 20,
        stats_dump_period_sec: 30,
        rate_limiter: Some(crate::RateLimiter::new(8 << 20, 50_000, 7, true).unwrap()),
        allow_concurrent_memtable_write: false,
        wal_recovery_mode: WalRecoveryMode::AbsoluteConsistency,
        max_manifest_file_size: 1 << 30,
        max_log_file_size: 8 << 20,
        keep_log_file_num: 3,
        write_buffer_size: 8 << 20,
        max_write_buffer_number: 6,
        level0_file_num_compaction_trigger: 3,
        level0_slowdown_writes_trigger: 17,
        level0_stop_writes_trigger: 41,
        num_levels: 5,
        max_bytes_for_level_base: 100 << 20,
        max_bytes_for_level_multiplier: 8.5,
        level_compaction_dynamic_level_bytes: false,
        target_file_size_base: 32 << 20,
        target_file_size_multiplier: 2,
        soft_pending_compaction_bytes_limit: 1 << 30,
        hard_pending_compaction_bytes_limit: 2 << 30,
        disable_auto_compactions: true,
        compression: CompressionType::Zstd,
        compression_per_level: vec![CompressionType::None, CompressionType::Snappy, CompressionType::Lz4],
        bottommost_compression: Some(CompressionType::Zstd),
        compression_level: -5,
        memtable_rep: MemTableRep::Vector,
        memtable_prefix_bloom_size_ratio: 0.125,
        prefix_extractor: Some(PrefixExtractor::Capped(3)),
        merge_operator: if with_ttl { None } else { Some(Arc::new(Concat)) },
        compaction_filter: Some(Arc::new(KeepAll)),
        ttl: with_ttl.then(|| crate::ttl::Ttl::new(3600)),
        enable_blob_files: true,
        min_blob_size: 4096,
        blob_file_size: 64 << 20,
        blob_compression_type: CompressionType::Zstd,
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: 0.5,
        blob_garbage_collection_force_threshold: 0.75,
        blob_compaction_readahead_size: 2 << 20,
        block_size: 16 << 10,
        block_restart_interval: 8,
        bloom_bits_per_key: 9.5,
        whole_key_filtering: false,
        block_cache_size: 64 << 20,
        block_cache_shard_bits: 4,
        cache_index_and_filter_blocks: true,
        max_auto_readahead_size: 64 << 10,
        compaction_style: if with_ttl { CompactionStyle::Fifo } else { CompactionStyle::Universal },
        compaction_options_universal: CompactionOptionsUniversal {
            size_ratio: 7,
            min_merge_width: 3,
            max_merge_width: 9,
            max_size_amplification_percent: 150,
            stop_style: CompactionStopStyle::SimilarSize,
            allow_trivial_move: true,
        },
        compaction_options_fifo: CompactionOptionsFifo {
            max_table_files_size: 5 << 30,
            allow_compaction: true,
            ttl: if with_ttl { 0 } else { 86_400 },
            ..Default::default()
        },
        ..Options::default()
    }
}

fn parse_text(text: &str) -> Result<LoadedOptions> {
    text::parse(text.as_bytes(), Path::new("/db/OPTIONS-000007"))
}

#[test]
fn every_persisted_option_round_trips() {
    let default = Options::default();
    let (a, b) = (non_default(false), non_default(true));
    // Every field of the table is tested away from its default by one of the two.
    for f in FIELDS {
        let d = (f.get)(&default);
        assert!((f.get)(&a) != d || (f.get)(&b) != d, "{} is tested only at its default", f.name);
    }
    for opts in [a, b] {
        let text = render(&opts, &[]);
        let loaded = parse_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for f in FIELDS.iter().filter(|f| !matches!(f.name, "merge_operator" | "compaction_filter")) {
            assert_eq!((f.get)(&loaded.options), (f.get)(&opts), "{}", f.name);
        }
        let o = &loaded.options;
        assert_eq!((o.max_bytes_for_level_multiplier, o.bloom_bits_per_key), (8.5, 9.5));
        assert_eq!(o.compression_per_level, opts.compression_per_level);
        assert_eq!(o.prefix_extractor, Some(PrefixExtractor::Capped(3)));
        assert_eq!(o.ttl.as_ref().map(|t| t.seconds), opts.ttl.as_ref().map(|t| t.seconds));
        assert_eq!((o.wal_recovery_mode, o.memtable_rep), (WalRecoveryMode::AbsoluteConsistency, MemTableRep::Vector));
        // A compaction filter is never rebuilt; its name is returned.
        assert!(o.compaction_filter.is_none());
        assert_eq!(loaded.compaction_filter_name.as_deref(), Some("keep-all"));
        // The rate limiter comes back as a new one with the same parameters.
        assert_eq!(o.rate_limiter.as_ref().map(|l| l.params()), Some((8 << 20, 50_000, 7, true)));
        // Not persisted: they keep their defaults.
        assert!(o.create_if_missing && !o.error_if_exists);
    }
    // A user-defined merge operator: its (escaped) name comes back, the operator does not.
    let loaded = parse_text(&render(&non_default(false), &[])).unwrap();
    assert_eq!(loaded.merge_operator_name.as_deref(), Some("my#concat:op\\v2\n"));
    assert!(loaded.options.merge_operator.is_none());
}

#[test]
fn builtin_merge_operators_and_defaults_are_rebuilt() {
    let loaded = parse_text(&render(&Options::default(), &[])).unwrap();
    assert!(loaded.merge_operator_name.is_none() && loaded.compaction_filter_name.is_none());
    assert_eq!(render(&loaded.options, &[]), render(&Options::default(), &[]));
    for name in ["uint64add", "stringappend", "put"] {
        let opts = Options { merge_operator: crate::merge::builtin(name), ..Options::default() };
        let loaded = parse_text(&render(&opts, &[])).unwrap();
        assert_eq!(loaded.merge_operator_name.as_deref(), Some(name));
        assert_eq!(loaded.options.merge_operator.as_ref().map(|m| m.name().to_string()).as_deref(), Some(name));
    }
    // Bloom filters off are `nullptr`.
    let loaded = parse_text(&render(&Options { bloom_bits_per_key: 0.0, ..Options::default() }, &[])).unwrap();
    assert_eq!(loaded.options.bloom_bits_per_key, 0.0);
}

/// The error for `text` is a Corruption (or NotSupported) naming the file and `line`.
fn assert_bad(text: &str, line: usize, needle: &str) {
    let e = parse_text(text).expect_err(needle);
    let msg = e.to_string();
    assert!(msg.contains("/db/OPTIONS-000007"), "{msg}");
    assert!(msg.contains(&format!("line {line}:")), "want line {line}: {msg}");
    assert!(msg.contains(needle), "want {needle:?}: {msg}");
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn damaged_files_are_errors_naming_file_and_line() {
    let good = render(&Options::default(), &[]);
    let bs = line_of(&good, "block_size=");
    assert_bad(&good.replace("block_size=4096", "block_size=4x96"), bs, "not a decimal integer");
    assert_bad(&good.replace("block_size=4096", "block_size=+4096"), bs, "not a decimal integer");
    assert_bad(&good.replace("block_size=4096", "block_size=99999999999999999999"), bs, "out of range");
    // A number of the right type but out of the option's range is checked as `Options::validate` checks it.
    assert_bad(&good.replace("block_size=4096", "block_size=1"), bs, "block_size must be");
    let mult = line_of(&good, "max_bytes_for_level_multiplier=");
    assert_bad(
        &good.replace("max_bytes_for_level_multiplier=10", "max_bytes_for_level_multiplier=inf"),
        mult,
        "finite",
    );
    let rl = line_of(&good, "rate_limiter=");
    let limiter = |v: &str| good.replace("rate_limiter=nullptr", &format!("rate_limiter={v}"));
    assert_bad(
        &limiter("{rate_bytes_per_sec=0;refill_period_us=100000;fairness=10;auto_tuned=false}"),
        rl,
        "rate_bytes_per_sec must be positive",
    );
    assert_bad(
        &limiter("{rate_bytes_per_sec=1;refill_period_us=100000;fairness=101;auto_tuned=false}"),
        rl,
        "fairness in 1..=100",
    );
    assert_bad(&limiter("{rate_bytes_per_sec=1;refill_period_us=100000;fairness=10}"), rl, "lacks auto_tuned");
    assert_bad(
        &limiter("{rate_bytes_per_sec=1;refill_period_us=1;fairness=10;auto_tuned=maybe}"),
        rl,
        "not true or false",
    );
    let wbs = line_of(&good, "write_buffer_size=");
    let dup = good.replace("  write_buffer_size=", "  write_buffer_size=4096\n  write_buffer_size=");
    assert_bad(&dup, wbs + 1, "twice");
    assert_bad(&good.replace("[DBOptions]", "[DBOptionz]"), line_of(&good, "[DBOptions]"), "unknown section");
    assert_bad(
        &good.replace("  paranoid_checks=", "  no_such_option=1\n  paranoid_checks="),
        line_of(&good, "paranoid_checks"),
        "unknown option",
    );
    let v = line_of(&good, "options_file_version");
    let e = parse_text(&good.replace("options_file_version=1.2", "options_file_version=2.0")).unwrap_err();
    assert!(matches!(e, Error::NotSupported(_)), "{e}");
    assert!(e.to_string().contains(&format!("/db/OPTIONS-000007: line {v}:")), "{e}");
    assert_bad(&good.replace("options_file_version=1.2", "options_file_version=one"), v, "MAJOR.MINOR");
    assert_bad(
        &good.replace("compression=kLZ4Compression", "compression=kZlibCompression"),
        line_of(&good, "  compression="),
        "not a compression",
    );
    assert_bad(
        &good.replace("filter_policy=bloomfilter:10:false", "filter_policy=bloomfilter:10:true"),
        line_of(&good, "filter_policy"),
        "block-based",
    );
    assert_bad(
        &good.replace("  block_cache={capacity=", "  block_cache={num_shard_bits=1;capacity="),
        line_of(&good, "block_cache="),
        "twice",
    );
    assert_bad("garbage\n", 1, "neither");
    assert_bad("", 1, "no [Version]");
    assert_bad("# c\n[CFOptions \"default\"]\n  write_buffer_size=4096\n", 2, "not [Version]");
    // Not UTF-8.
    let mut bytes = good.clone().into_bytes();
    let at = good.find("block_size").unwrap();
    bytes[at] = 0xff;
    let e = text::parse(&bytes, Path::new("/db/OPTIONS-000007")).unwrap_err();
    assert!(e.to_string().contains(&format!("line {bs}: not UTF-8")), "{e}");
}

/// Cut at every byte, the file is an error naming a line, never a panic and never a silent success.
#[test]
fn truncated_files_are_errors_never_a_partial_load() {
    let good = render(&non_default(false), &[]);
    for cut in 0..good.len() {
        let e = parse_text(&good[..cut]).expect_err(&format!("cut at {cut}"));
        assert!(e.to_string().contains("/db/OPTIONS-000007") && e.to_string().contains("line "), "cut {cut}: {e}");
    }
    parse_text(&good).unwrap();
}

#[test]
fn newer_minor_versions_may_add_options_and_older_ones_lack_them() {
    let good = render(&Options::default(), &[]);
    let newer = good
        .replace("options_file_version=1.2", "options_file_version=1.7")
        .replace("  paranoid_checks=", "  some_future_option=42\n  paranoid_checks=");
    parse_text(&newer).unwrap();
    // Comments, blank lines and spacing are free; a missing option is an error at this version.
    let spaced = good.replace("  write_buffer_size=67108864", "write_buffer_size = 67108864   # 64 MiB");
    assert_eq!(parse_text(&spaced).unwrap().options.write_buffer_size, 64 << 20);
    let lacking = good.replace("  write_buffer_size=67108864\n", "");
    assert_bad(&lacking, line_of(&good, "[CFOptions"), "lacks option write_buffer_size");
    // A 1.0 file (before the compaction styles) lacks their three options: they load at their defaults.
    let mut old = render(&non_default(false), &[])
        .replace("options_file_version=1.2", "options_file_version=1.0")
        .replace("  named_column_families=0\n", "");
    for name in ["compaction_style", "compaction_options_universal", "compaction_options_fifo"] {
        let start = old.find(&format!("  {name}=")).unwrap();
        let end = start + old[start..].find('\n').unwrap() + 1;
        old.replace_range(start..end, "");
    }
    let o = parse_text(&old).unwrap().options;
    assert_eq!(o.compaction_style, CompactionStyle::Level);
    assert_eq!(o.compaction_options_universal, CompactionOptionsUniversal::default());
    assert_eq!(o.compaction_options_fifo.max_table_files_size, 1 << 30);
    assert_eq!(o.write_buffer_size, 8 << 20);
}

#[test]
fn escaping_is_rocksdbs() {
    use super::fields::{escape, unescape};
    for s in ["plain", "a#b", "x:y", "back\\slash", "new\nline\r", ""] {
        assert_eq!(unescape(&escape(s)).unwrap(), s);
    }
    assert_eq!(escape("a#b:c"), "a\\#b\\:c");
    assert!(unescape("bad\\").is_err());
}

/// The options of a family as the engine holds them: `own`'s own fields, `db`'s for the rest.
fn family(db: &Options, own: Options) -> Options {
    crate::options::family::family_options(db, &Options { num_levels: db.num_levels, ..own }).unwrap()
}

/// Two families with options unlike each other's and the default's.
fn two_families(db: &Options) -> (Options, Options) {
    let a = family(
        db,
        Options {
            write_buffer_size: 1 << 20,
            merge_operator: crate::merge::builtin("uint64add"),
            prefix_extractor: Some(PrefixExtractor::Fixed(4)),
            compression: CompressionType::Lz4,
            block_size: 8 << 10,
            bloom_bits_per_key: 0.0,
            ..Options::default()
        },
    );
    let b = family(
        db,
        Options {
            compaction_style: CompactionStyle::Fifo,
            compaction_options_fifo: CompactionOptionsFifo { max_table_files_size: 64 << 10, ..Default::default() },
            enable_blob_files: true,
            min_blob_size: 100,
            merge_operator: Some(Arc::new(Concat)),
            compaction_filter: Some(Arc::new(KeepAll)),
            whole_key_filtering: false,
            ..Options::default()
        },
    );
    (a, b)
}

#[test]
fn several_families_round_trip_in_order() {
    let db = non_default(false);
    let (a, b) = two_families(&db);
    let text = render(&db, &[("logs", &a), ("blobs \"x\"", &b)]);
    let loaded = parse_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let names: Vec<&str> = loaded.column_families.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["logs", "blobs \"x\""]);
    for (f, want) in loaded.column_families.iter().zip([&a, &b]) {
        for field in FIELDS.iter().filter(|f| !matches!(f.name, "merge_operator" | "compaction_filter")) {
            assert_eq!((field.get)(&f.options), (field.get)(want), "{}: {}", f.name, field.name);
        }
    }
    let (la, lb) = (&loaded.column_families[0], &loaded.column_families[1]);
    // A built-in merge operator is rebuilt; a user-defined one and a compaction filter are named.
    assert_eq!(la.merge_operator_name.as_deref(), Some("uint64add"));
    assert_eq!(la.options.merge_operator.as_ref().map(|m| m.name().to_string()).as_deref(), Some("uint64add"));
    assert!(la.compaction_filter_name.is_none());
    assert_eq!(loaded.merge_operator_name.as_deref(), Some("my#concat:op\\v2\n"));
    assert_eq!(lb.merge_operator_name.as_deref(), Some("my#concat:op\\v2\n"));
    assert!(lb.options.merge_operator.is_none() && lb.options.compaction_filter.is_none());
    assert_eq!(lb.compaction_filter_name.as_deref(), Some("keep-all"));
    // The database's fields are the database's in every family.
    assert_eq!((lb.options.num_levels, lb.options.block_cache_size), (5, 64 << 20));
    // Rebuilt from what was loaded (objects set again), the text is the same.
    let mut lb_opts = lb.options.clone();
    lb_opts.merge_operator = b.merge_operator.clone();
    lb_opts.compaction_filter = b.compaction_filter.clone();
    let mut db2 = loaded.options.clone();
    db2.compaction_filter = db.compaction_filter.clone();
    db2.merge_operator = db.merge_operator.clone();
    assert_eq!(render(&db2, &[("logs", &la.options), ("blobs \"x\"", &lb_opts)]), text);
    let descs = loaded.column_family_descriptors();
    assert_eq!(descs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), names);
    assert_eq!(descs[0].options.write_buffer_size, 1 << 20);
}

/// Family names may hold any UTF-8 the engine allows: quotes, backslashes, `#`, `:`, brackets, spaces at
/// either end, line breaks and other control characters all round-trip, and every title stays on one line.
#[test]
fn odd_family_names_round_trip() {
    let long = "n".repeat(shaledb_format::edit::MAX_FAMILY_NAME_LEN);
    let names = [
        "a\"b\"",
        "back\\slash\\",
        "new\nline\r\n",
        "hash#tag # not a comment",
        "colon:x",
        "]bracket[ [CFOptions \"x\"]",
        "  spaced  ",
        "tab\there",
        "\u{0}nul\u{7f}del\u{1b}esc",
        "\u{85}nel\u{2028}ls",
        "ünïcödé ✓ 数据",
        "\\u{41}",
        "default2",
        "nullptr",
        long.as_str(),
    ];
    for n in names {
        assert_eq!(text::unquote(&text::quote(n)).unwrap(), n);
    }
    let opts: Vec<Options> = names
        .iter()
        .enumerate()
        .map(|(i, _)| Options { write_buffer_size: (i + 1) << 20, ..Options::default() })
        .collect();
    let families: Vec<(&str, &Options)> = names.iter().copied().zip(opts.iter()).collect();
    let text = render(&Options::default(), &families);
    for line in text.lines().filter(|l| l.starts_with('[')) {
        assert!(line.ends_with("\"]") || !line.contains('"'), "{line:?}");
    }
    let loaded = parse_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let got: Vec<(&str, usize)> =
        loaded.column_families.iter().map(|f| (f.name.as_str(), f.options.write_buffer_size)).collect();
    let want: Vec<(&str, usize)> = names.iter().enumerate().map(|(i, n)| (*n, (i + 1) << 20)).collect();
    assert_eq!(got, want);
}

/// A file with named families: a damaged, misplaced or duplicated section, a bad name or a family option
/// that is the database's but differs from the default's is an error naming the line.
#[test]
fn malformed_family_sections_are_errors_at_their_line() {
    let (a, b) = two_families(&Options::default());
    let good = render(&Options::default(), &[("a", &a), ("b", &b)]);
    parse_text(&good).unwrap();
    let cf_a = line_of(&good, "[CFOptions \"a\"]");
    let table_a = line_of(&good, "[TableOptions/BlockBasedTable \"a\"]");
    let cf_b = line_of(&good, "[CFOptions \"b\"]");
    let title = |from: &str, to: &str| good.replace(from, to);
    // Titles: bad quoting and names refused with the reason.
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"\"]"), cf_a, "column family name of 0 bytes");
    let long = format!("[CFOptions \"{}\"]", "n".repeat(256));
    assert_bad(&title("[CFOptions \"a\"]", &long), cf_a, "column family name of 256 bytes");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"a]"), cf_a, "not a name in double quotes");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions a]"), cf_a, "not a name in double quotes");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"a\"b\"]"), cf_a, "must be written \\\"");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"a\\q\"]"), cf_a, "unknown escape \\q");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"a\\\"]"), cf_a, "unpaired");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"\\u{zz}\"]"), cf_a, "1 to 6 hex digits");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"\\u{d800}\"]"), cf_a, "is not a character");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"a\" ]"), cf_a, "not a name in double quotes");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptionz \"a\"]"), cf_a, "unknown section");
    // Order and pairing.
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"b\"]"), cf_b, "twice (first at line");
    assert_bad(&title("[CFOptions \"a\"]", "[CFOptions \"default\"]"), cf_a, "twice (first at line");
    assert_bad(
        &title("[TableOptions/BlockBasedTable \"a\"]", "[TableOptions/BlockBasedTable \"c\"]"),
        cf_a,
        "is not followed by its",
    );
    let swapped =
        good.replace("[CFOptions \"a\"]", "[X]").replace("[TableOptions/BlockBasedTable \"a\"]", "[CFOptions \"a\"]");
    assert_bad(&swapped.replace("[X]", "[TableOptions/BlockBasedTable \"a\"]"), cf_a, "expected a [CFOptions");
    // Options inside a family's sections.
    let in_a = |from: &str, to: &str| {
        let at = good.find("[CFOptions \"a\"]").unwrap();
        format!("{}{}", &good[..at], good[at..].replacen(from, to, 1))
    };
    let line_in_a = |needle: &str| cf_a - 1 + line_of(&good[good.find("[CFOptions \"a\"]").unwrap()..], needle);
    assert_bad(&in_a("  write_buffer_size=1048576\n", ""), cf_a, "lacks option write_buffer_size");
    assert_bad(
        &in_a("block_size=8192", "block_size=1"),
        line_in_a("block_size="),
        "column family \"a\": the options are not valid",
    );
    assert_bad(&in_a("block_size=8192", "block_size=x"), line_in_a("block_size="), "not a decimal integer");
    assert_bad(
        &in_a("num_levels=7", "num_levels=5"),
        line_in_a("num_levels="),
        "num_levels of column family \"a\" is 5",
    );
    assert_bad(&in_a("ttl_mode=off", "ttl_mode=60"), line_in_a("ttl_mode="), "the same in every family");
    assert_bad(
        &in_a("  block_size=", "  surprise=1\n  block_size="),
        line_in_a("block_size="),
        "unknown option \"surprise\"",
    );
    assert!(table_a > cf_a);
    // Named families arrived with 1.2: a 1.1 file holding them is refused at the first.
    let as_1_1 =
        good.replace("options_file_version=1.2", "options_file_version=1.1").replace("  named_column_families=2\n", "");
    assert_bad(&as_1_1, cf_a - 1, "added in 1.2");
    // The count of named families: a file cut between two families' sections is an error.
    let count = line_of(&good, "named_column_families=");
    assert_bad(&good.replace("named_column_families=2", "named_column_families=3"), count, "holds the sections of 2");
    assert_bad(&good.replace("named_column_families=2", "named_column_families=-1"), count, "named_column_families:");
    assert_bad(
        &good.replace("  named_column_families=2\n", ""),
        line_of(&good, "[DBOptions]"),
        "lacks option named_column_families",
    );
    // Cut at every byte, a file with families is an error, never a partial load.
    for cut in 0..good.len() {
        let e = parse_text(&good[..cut]).expect_err(&format!("cut at {cut}"));
        assert!(e.to_string().contains("line "), "cut {cut}: {e}");
    }
}

/// A file written before named families were recorded (1.1, the default family only) still loads, listing
/// none; so does this version's file of a database without named families.
#[test]
fn a_file_of_version_1_1_loads_with_no_families() {
    let now = render(&non_default(false), &[]);
    let old =
        now.replace("options_file_version=1.2", "options_file_version=1.1").replace("  named_column_families=0\n", "");
    let loaded = parse_text(&old).unwrap();
    assert!(loaded.column_families.is_empty());
    assert_eq!(loaded.options.write_buffer_size, 8 << 20);
    assert!(parse_text(&now).unwrap().column_families.is_empty());
}

/// Random damage to a file with families (bytes changed to characters that matter to the syntax, lines
/// dropped or doubled): parsing returns, never panics, and an error always names a line.
#[test]
fn damaged_family_files_never_panic() {
    let (a, b) = two_families(&Options::default());
    let good = render(&Options::default(), &[("a \"q\" #\\", &a), ("b\n\u{1}", &b)]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let specials = b"\"\\#[]=:{};\n u0-";
    for _ in 0..3000 {
        let mut bytes = good.clone().into_bytes();
        for _ in 0..1 + next(3) {
            match next(3) {
                0 => {
                    let at = next(bytes.len());
                    bytes[at] = specials[next(specials.len())];
                }
                1 => {
                    let lines: Vec<&[u8]> = bytes.split_inclusive(|&c| c == b'\n').collect();
                    let drop = next(lines.len());
                    bytes =
                        lines.iter().enumerate().filter(|(i, _)| *i != drop).flat_map(|(_, l)| l.to_vec()).collect();
                }
                _ => {
                    let lines: Vec<&[u8]> = bytes.split_inclusive(|&c| c == b'\n').collect();
                    let twice = next(lines.len());
                    let mut out = Vec::new();
                    for (i, l) in lines.iter().enumerate() {
                        out.extend_from_slice(l);
                        if i == twice {
                            out.extend_from_slice(l);
                        }
                    }
                    bytes = out;
                }
            }
        }
        if let Err(e) = text::parse(&bytes, Path::new("/db/OPTIONS-000007")) {
            assert!(e.to_string().contains("line "), "{e}");
        }
    }
}

#[test]
fn every_memtable_structure_round_trips() {
    for rep in [MemTableRep::SkipList, MemTableRep::Vector, MemTableRep::IndexedSkipList] {
        let opts = Options { memtable_rep: rep, ..Options::default() };
        let text = render(&opts, &[]);
        let loaded = parse_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(loaded.options.memtable_rep, rep, "{text}");
    }
}
