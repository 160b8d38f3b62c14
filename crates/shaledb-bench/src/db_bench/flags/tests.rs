use super::*;

fn parse(args: &[&str]) -> Result<BenchFlags, BenchError> {
    BenchFlags::parse_args(args.iter().copied())
}

fn err_text(args: &[&str]) -> String {
    parse(args).unwrap_err().to_string()
}

#[test]
fn defaults_parse() {
    let f = BenchFlags::default();
    assert_eq!(f.num, 1_000_000);
    assert_eq!(f.key_size, 16);
    assert_eq!(f.value_size, 100);
    assert_eq!(f.compression_type, "snappy");
    assert_eq!(f.benchmarks, DEFAULT_BENCHMARKS);
    assert!(f.progress && !f.histogram && f.use_existing_db.is_none());
    assert_eq!(f.reads, -1);
    assert_eq!(f.readwritepercent, 90);
    // db_bench's defaults for the operations flags: no limiter, no WAL range sync, a dump every 600 s.
    assert_eq!((f.rate_limiter_bytes_per_sec, f.rate_limiter_refill_period_us), (0, 100_000));
    assert!(!f.rate_limiter_auto_tuned);
    assert_eq!((f.wal_bytes_per_sync, f.stats_dump_period_sec), (0, 600));
}

#[test]
fn db_bench_spellings_of_booleans() {
    for (arg, want) in [
        ("--histogram", true),
        ("--histogram=1", true),
        ("--histogram=true", true),
        ("--histogram=0", false),
        ("--histogram=false", false),
    ] {
        assert_eq!(parse(&[arg]).unwrap().histogram, want, "{arg}");
    }
    let f = parse(&["--sync", "--disable_wal=1", "--num", "5"]).unwrap();
    assert!(f.sync && f.disable_wal);
    assert_eq!(f.num, 5);
}

#[test]
fn values_and_single_dash_long_flags() {
    let f = parse(&[
        "-num=5000000",
        "--key_size=20",
        "--value_size=400",
        "--compression_type=lz4",
        "--compression_ratio=0.5",
        "--block_size=8192",
        "--bloom_bits=10",
        "--cache_size=1073741824",
        "--write_buffer_size=67108864",
        "--max_write_buffer_number=4",
        "--target_file_size_base=67108864",
        "--max_bytes_for_level_base=268435456",
        "--level_compaction_dynamic_level_bytes=true",
        "--max_background_jobs=2",
        "--benchmarks=fillrandom,readrandom",
        "--seed=-5",
    ])
    .unwrap();
    assert_eq!(f.num, 5_000_000);
    assert_eq!(f.compression(), Some(Compression::Lz4));
    assert_eq!(f.bloom_bits, 10.0);
    assert_eq!(f.cache_size, 1 << 30);
    assert_eq!(f.benchmark_list(), ["fillrandom", "readrandom"]);
    assert_eq!(f.seed, -5);
}

#[test]
fn unknown_flag_is_an_error_naming_it() {
    let e = err_text(&["--numm=5"]);
    assert!(e.contains("--numm"), "{e}");
    let e = err_text(&["--bogus_flag"]);
    assert!(e.contains("--bogus_flag"), "{e}");
}

#[test]
fn bad_value_is_an_error_naming_the_flag() {
    for (args, flag) in [
        (&["--num=abc"][..], "--num"),
        (&["--threads=-1"][..], "--threads"),
        (&["--histogram=maybe"][..], "--histogram"),
        (&["--compression_ratio=x"][..], "--compression_ratio"),
        (&["--num=0"][..], "--num"),
        (&["--threads=0"][..], "--threads"),
        (&["--compression_type=brotli"][..], "--compression_type"),
        (&["--merge_operator=max"][..], "--merge_operator"),
        (&["--readwritepercent=101"][..], "--readwritepercent"),
        (&["--compression_ratio=0"][..], "--compression_ratio"),
        (&["--compression_ratio=1.5"][..], "--compression_ratio"),
        (&["--compression_ratio=-0.5"][..], "--compression_ratio"),
        (&["--block_size=0"][..], "--block_size"),
        (&["--block_size=100"][..], "--block_size"),
        (&["--block_size=134217728"][..], "--block_size"),
        (&["--benchmarks=fillseq,fillbogus"][..], "--benchmarks"),
        (&["--mmap_read=1"][..], "--mmap_read"),
        (&["--use_existing_db"][..], "--use_existing_db"),
        (&["--batch_size=0"][..], "--batch_size"),
        (&["--batch_size=-3"][..], "--batch_size"),
        (&["--multiread_stride=-1"][..], "--multiread_stride"),
        (&["--ingest_keys_per_file=0"][..], "--ingest_keys_per_file"),
        (&["--ingest_keys_per_file=-5"][..], "--ingest_keys_per_file"),
        (&["--writes_per_range_tombstone=10", "--range_tombstone_width=0"][..], "--range_tombstone_width"),
        (&["--writes_per_range_tombstone=-1"][..], "--writes_per_range_tombstone"),
        (
            &["--rate_limiter_bytes_per_sec=1000", "--rate_limiter_refill_period_us=0"][..],
            "--rate_limiter_refill_period_us",
        ),
        (&["--rate_limiter_auto_tuned"][..], "--rate_limiter_auto_tuned"),
        (&["--rate_limiter_bytes_per_sec=9223372036854775808"][..], "--rate_limiter_bytes_per_sec"),
        (&["--stats_dump_period_sec=4294967296"][..], "--stats_dump_period_sec"),
    ] {
        let e = err_text(args);
        assert!(e.contains(flag), "{args:?}: {e}");
    }
}

#[test]
fn multiread_flags_default_as_db_bench() {
    let f = parse(&[]).unwrap();
    assert_eq!((f.batch_size, f.multiread_stride, f.multiread_batched), (1, 0, false));
    let f = parse(&["--batch_size=32", "--multiread_stride=4", "--multiread_batched"]).unwrap();
    assert_eq!((f.batch_size, f.multiread_stride, f.multiread_batched), (32, 4, true));
}

#[test]
fn range_ends_are_accepted() {
    let f = parse(&["--compression_ratio=1", "--block_size=256"]).unwrap();
    assert_eq!((f.compression_ratio, f.block_size), (1.0, 256));
    assert_eq!(parse(&["--block_size=67108864"]).unwrap().block_size, 64 << 20);
    assert_eq!(parse(&["--compression_ratio=0.01"]).unwrap().compression_ratio, 0.01);
}

#[test]
fn legacy_flags_are_accepted_with_notes() {
    let f = parse(&[
        "--disable_seek_compaction=1",
        "--mmap_read=0",
        "--max_background_compactions=20",
        "--delete_obsolete_files_period_micros=300000000",
        "--max_grandparent_overlap_factor=10",
        "--stats_interval=1000000",
        "--stats_per_interval=1",
        "--num_levels=6",
        "--min_level_to_compress=2",
    ])
    .unwrap();
    assert_eq!(f.background_jobs(), 21);
    assert_eq!(f.compatibility_notes().len(), 4);
    assert!(parse(&[]).unwrap().compatibility_notes().is_empty());
}

#[test]
fn undefok_drops_only_listed_flags_this_tool_does_not_define() {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (kept, notes) = apply_undefok(args(&[
        "--undefok=prepopulate_block_cache,use_blob_cache,num",
        "--prepopulate_block_cache=1",
        "-use_blob_cache=1",
        "--num=7",
        "--not_listed=1",
    ]));
    assert_eq!(kept, args(&["--num=7", "--not_listed=1"]));
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].contains("--prepopulate_block_cache=1"), "{notes:?}");
    // The listed flag it defines is parsed; an unlisted unknown flag stays an error.
    let f = parse(&["--undefok", "prepopulate_block_cache", "--prepopulate_block_cache=1", "--num=7"]).unwrap();
    assert_eq!(f.num, 7);
    let e = err_text(&["--undefok=x", "--prepopulate_block_cache=1"]);
    assert!(e.contains("prepopulate_block_cache"), "{e}");
}

#[test]
fn repeated_flag_takes_the_last_value() {
    let f = parse(&["--num=5", "--threads=2", "--num=7"]).unwrap();
    assert_eq!((f.num, f.threads), (7, 2));
}

#[test]
fn normalize_leaves_short_and_double_dash_flags() {
    assert_eq!(normalize_arg("-num=5".into()), "--num=5");
    assert_eq!(normalize_arg("--num=5".into()), "--num=5");
    assert_eq!(normalize_arg("-h".into()), "-h");
    assert_eq!(normalize_arg("-5".into()), "-5");
    assert_eq!(normalize_arg("fillseq".into()), "fillseq");
}

#[test]
fn compaction_style_flags_map_to_both_engines_options() {
    let shale =
        |args: &str| crate::engine::shale::options_from_flags(&parse(&args.split(' ').collect::<Vec<_>>()).unwrap());
    let o = shale(
        "--compaction_style=1 --universal_size_ratio=5 --universal_min_merge_width=3 --universal_max_merge_width=8 \
         --universal_max_size_amplification_percent=150 --universal_allow_trivial_move=1",
    )
    .unwrap();
    assert_eq!(o.compaction_style, shaledb::CompactionStyle::Universal);
    let u = &o.compaction_options_universal;
    assert_eq!((u.size_ratio, u.min_merge_width, u.max_merge_width, u.max_size_amplification_percent), (5, 3, 8, 150));
    assert!(u.allow_trivial_move);
    // 0 keeps RocksDB's defaults, as db_bench does.
    let o = shale("--compaction_style=1").unwrap();
    assert_eq!(o.compaction_options_universal, shaledb::CompactionOptionsUniversal::default());
    let o = shale(
        "--compaction_style=2 --fifo_compaction_max_table_files_size_mb=64 --fifo_compaction_allow_compaction=0 \
         --fifo_compaction_ttl=3600",
    )
    .unwrap();
    assert_eq!(o.compaction_style, shaledb::CompactionStyle::Fifo);
    let fifo = &o.compaction_options_fifo;
    assert_eq!((fifo.max_table_files_size, fifo.allow_compaction, fifo.ttl), (64 << 20, false, 3600));
    o.validate().unwrap();
}

#[test]
fn compaction_style_flags_shaledb_refuses_name_the_flag() {
    let e = err_text(&["--compaction_style=2"]);
    assert!(e.contains("fifo_compaction_max_table_files_size_mb"), "{e}");
    let e = err_text(&[
        "--compaction_style=2",
        "--fifo_compaction_max_table_files_size_mb=1",
        "--fifo_compaction_ttl=9",
        "--open_files=100",
    ]);
    assert!(e.contains("fifo_compaction_ttl") && e.contains("open_files"), "{e}");
    assert!(err_text(&["--compaction_style=3"]).contains("compaction_style"));
    parse(&["--compaction_style=2", "--fifo_compaction_max_table_files_size_mb=1", "--fifo_compaction_ttl=9"]).unwrap();
}

#[test]
fn blob_flags_default_as_db_bench_and_reach_the_engine_options() {
    let f = parse(&[]).unwrap();
    assert!(!f.enable_blob_files && !f.enable_blob_garbage_collection);
    assert_eq!((f.min_blob_size, f.blob_file_size, f.blob_compression_type.as_str()), (0, 256 << 20, "none"));
    assert_eq!((f.blob_garbage_collection_age_cutoff, f.blob_garbage_collection_force_threshold), (0.25, 1.0));
    let f = parse(&[
        "--enable_blob_files=1",
        "--min_blob_size=4096",
        "--blob_file_size=1048576",
        "--blob_compression_type=zstd",
        "--enable_blob_garbage_collection=true",
        "--blob_garbage_collection_age_cutoff=0.5",
        "--blob_garbage_collection_force_threshold=0.8",
        "--blob_compaction_readahead_size=2097152",
    ])
    .unwrap();
    let o = crate::engine::shale::options_from_flags(&f).unwrap();
    assert!(o.enable_blob_files && o.enable_blob_garbage_collection);
    assert_eq!((o.min_blob_size, o.blob_file_size), (4096, 1 << 20));
    assert_eq!(o.blob_compression_type, shaledb::CompressionType::Zstd);
    assert_eq!((o.blob_garbage_collection_age_cutoff, o.blob_garbage_collection_force_threshold), (0.5, 0.8));
    assert_eq!(o.blob_compaction_readahead_size, 2 << 20);
    for (args, flag) in [
        (&["--blob_compression_type=brotli"][..], "--blob_compression_type"),
        (&["--blob_file_starting_level=2"][..], "--blob_file_starting_level"),
        (&["--blob_garbage_collection_age_cutoff=1.5"][..], "--blob_garbage_collection_age_cutoff"),
        (&["--blob_garbage_collection_force_threshold=-1"][..], "--blob_garbage_collection_force_threshold"),
    ] {
        let e = err_text(args);
        assert!(e.contains(flag), "{args:?}: {e}");
    }
}

/// db_bench's `--compaction_readahead_size`: given, it reaches the engine; unset, the engine keeps its default.
#[test]
fn compaction_readahead_size_reaches_the_engine_when_given() {
    let default = shaledb::Options::default().compaction_readahead_size;
    let o = crate::engine::shale::options_from_flags(&parse(&[]).unwrap()).unwrap();
    assert_eq!(o.compaction_readahead_size, default);
    for n in [0, 65536, 2 << 20] {
        let f = parse(&[&format!("--compaction_readahead_size={n}")]).unwrap();
        assert_eq!(f.compaction_readahead_size, Some(n));
        assert_eq!(crate::engine::shale::options_from_flags(&f).unwrap().compaction_readahead_size, n);
    }
    assert!(err_text(&["--compaction_readahead_size=-1"]).contains("compaction_readahead_size"));
}

#[test]
fn subcompactions_and_background_limits_reach_the_engine() {
    let f = parse(&["--subcompactions=4", "--max_background_compactions=3", "--max_background_flushes=1"]).unwrap();
    let o = crate::engine::shale::options_from_flags(&f).unwrap();
    assert_eq!((o.max_subcompactions, o.max_background_jobs), (4, 4));
    let o = crate::engine::shale::options_from_flags(&parse(&["--max_background_jobs=6"]).unwrap()).unwrap();
    assert_eq!((o.max_subcompactions, o.max_background_jobs), (1, 6));
    for bad in ["--subcompactions=0", "--subcompactions=65"] {
        let e = err_text(&[bad]);
        assert!(e.contains("subcompactions") && e.contains("1..=64"), "{bad}: {e}");
    }
}

/// Whether --use_existing_db was given at all decides whether bench may delete a database at --db: not given
/// is `None`, and the last of repeated values wins (benchmark.sh appends overrides).
#[test]
fn use_existing_db_remembers_whether_it_was_given() {
    let db = ["--db=/nonexistent/x"];
    let get = |extra: &[&str]| parse(&[&db[..], extra].concat()).unwrap().use_existing_db;
    assert_eq!(get(&[]), None);
    assert_eq!(get(&["--use_existing_db"]), Some(true));
    assert_eq!(get(&["--use_existing_db=0"]), Some(false));
    assert_eq!(get(&["-use_existing_db=false"]), Some(false));
    assert_eq!(get(&["--use_existing_db=1", "--use_existing_db=0"]), Some(false));
    assert!(parse(&["--use_existing_db=0"]).is_ok(), "nothing to delete without --db: fine");
    assert!(!BenchFlags::default().uses_existing_db());
}
