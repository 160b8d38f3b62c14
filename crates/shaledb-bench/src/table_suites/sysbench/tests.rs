use super::*;
use crate::table_suites::test_support::{
    assert_common_flags, assert_refused, assert_rocksdb_needs_its_feature, parse_args,
};

fn parse(args: &[&str]) -> std::result::Result<SysbenchArgs, String> {
    let a: SysbenchArgs = parse_args(args)?;
    a.validate().map_err(|e| e.to_string())?;
    Ok(a)
}

#[test]
fn defaults() {
    let a = parse(&[]).unwrap();
    assert_eq!(a.engine, [EngineKind::Shaledb]);
    assert_eq!((a.tables, a.table_size), (2, 10_000_000));
    assert_eq!(a.threads, [1, 2]);
    assert_eq!(a.duration, 60.0);
    assert_eq!(a.compression, [CompressionSetting::None, CompressionSetting::Lz4Zstd]);
    assert_eq!(a.cache_size, 512 << 20);
    assert!(a.common.use_direct_reads);
    assert_eq!(a.readahead_size, 2 << 20);
    assert_eq!(a.random_points, 100);
    assert!(a.cache_index_and_filter_blocks);
    assert_eq!(a.validate().unwrap().len(), workload::SEED_ORDER.len());
}

#[test]
fn lists_and_bad_values() {
    let a =
        parse(&["--threads", "1,2,4", "--compression", "lz4-zstd", "--use_direct_reads=0", "--tests", "insert,scan"])
            .unwrap();
    assert_eq!(a.threads, [1, 2, 4]);
    assert_eq!(a.compression, [CompressionSetting::Lz4Zstd]);
    assert!(!a.common.use_direct_reads);
    let cases: &[(&[&str], &str)] = &[
        (&["--threads", "0"][..], "threads"),
        (&["--duration", "0"][..], "duration"),
        (&["--duration", "nan"][..], "duration"),
        (&["--table_size", "0"][..], "table_size"),
        (&["--tables", "0"][..], "tables"),
        (&["--tests", "scan,bogus"][..], "bogus"),
        (&["--compression", "snappy"][..], "compression"),
        (&["--random_points", "0"][..], "random_points"),
        (&["--cache_size", "0"][..], "cache_size"),
    ];
    assert_refused(parse, cases);
    assert_rocksdb_needs_its_feature(parse);
}

#[test]
fn engine_options_follow_the_settings() {
    let a = parse(&["--cache_size", "1000000", "--readahead_size", "65536"]).unwrap();
    let p = Path::new("/x");
    let f = engine_flags(&a, CompressionSetting::None, p, false);
    f.validate().unwrap();
    assert_eq!((f.block_size, f.bloom_bits, f.cache_size), (16384, 10.0, 1_000_000));
    assert_eq!(f.write_buffer_size, 64 << 20);
    assert!(f.level_compaction_dynamic_level_bytes && f.use_direct_reads && f.advise_random_on_open);
    assert_eq!((f.compression_per_level.as_str(), f.bottommost_compression.as_str()), ("", ""));
    assert_eq!(f.compression_type, "none");
    assert_eq!(f.readahead_size, 0);
    let z = engine_flags(&a, CompressionSetting::Lz4Zstd, p, true);
    z.validate().unwrap();
    assert_eq!(z.compression_per_level, "none:none:lz4:lz4:lz4:lz4:lz4");
    assert_eq!(z.bottommost_compression, "zstd");
    assert!(!z.advise_random_on_open);
    assert_eq!(z.readahead_size, 65536);
    assert_eq!(z.compression_levels().unwrap().len(), z.num_levels);
}

/// `--progress[=BOOL]` and `--use_existing_db[=BOOL]` parse as `shaledb bench` parses them.
#[test]
fn progress_and_use_existing_db_parse_as_bench_flags() {
    assert_common_flags(parse, |a| &a.common);
}
