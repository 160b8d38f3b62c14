//! Table tests: roundtrips through real files, iterator positioning across blocks, the cache, and one named
//! test per way an SST can be corrupt.

use super::*;
use crate::block::BlockIter;
use crate::bloom::key_hash;

#[test]
fn grammar_matches_docs() {
    shaledb_testkit::grammar::assert_module_grammar_in_doc(
        include_str!("mod.rs"),
        include_str!("../../../../docs/format/sst.md"),
    );
}
use crate::ikey::{make_internal_key, ValueKind};
use shaledb_vfs::{Fs, PosixFs, RandomAccessFile, ReadHints};
use std::path::PathBuf;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// `n` entries in `ikey::compare` order: three versions per user key, some deletions and merges, values of
/// mixed compressibility.
fn entries(n: usize) -> Entries {
    (0..n)
        .map(|i| {
            let kind = match i % 7 {
                0 => ValueKind::Deletion,
                3 => ValueKind::Merge,
                _ => ValueKind::Value,
            };
            let k = make_internal_key(format!("user{:06}", i / 3).as_bytes(), 1_000_000 - i as u64, kind);
            let mut v = format!("value-{i}-").repeat(i % 5);
            v.extend((0..i % 13).map(|j| char::from(b'a' + ((i * 31 + j * 17) % 26) as u8)));
            (k, if kind == ValueKind::Deletion { Vec::new() } else { v.into_bytes() })
        })
        .collect()
}

fn write_table(path: &Path, opts: TableOptions, entries: &Entries) -> TableProperties {
    let file = PosixFs::new().create(path).unwrap();
    let mut b = TableBuilder::new(opts, file);
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    assert_eq!(b.num_entries(), entries.len() as u64);
    b.finish().unwrap()
}

fn open_file(path: &Path) -> Arc<dyn RandomAccessFile> {
    PosixFs::new().open(path, ReadHints::default()).unwrap()
}

fn open(path: &Path) -> Result<Arc<Table>> {
    Table::open(open_file(path), &TableReadOptions::default())
}

fn collect_forward(t: &Arc<Table>) -> Entries {
    let mut it = t.iter(true, true);
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

fn small_opts(compression: CompressionType, block_size: usize) -> TableOptions {
    TableOptions { block_size, compression, ..TableOptions::default() }
}

const CODECS: [CompressionType; 4] =
    [CompressionType::None, CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd];

#[test]
fn roundtrip_every_codec_and_block_size() {
    let dir = tempfile::tempdir().unwrap();
    let data = entries(1500);
    for codec in CODECS {
        for block_size in [1, 200, 4096, 1 << 20] {
            let path = dir.path().join(format!("{codec}-{block_size}.sst"));
            let props = write_table(&path, small_opts(codec, block_size), &data);
            let t = open(&path).unwrap();
            let mut expect = props.clone();
            expect.file_size = std::fs::metadata(&path).unwrap().len();
            assert_eq!(t.properties(), &expect);
            assert_eq!(props.num_entries, 1500);
            assert_eq!(
                props.num_deletions,
                data.iter().filter(|(k, _)| ikey::parse(k).unwrap().kind == ValueKind::Deletion).count() as u64
            );
            assert_eq!(
                props.num_merges,
                data.iter().filter(|(k, _)| ikey::parse(k).unwrap().kind == ValueKind::Merge).count() as u64
            );
            assert_eq!(props.raw_key_size, data.iter().map(|(k, _)| k.len() as u64).sum::<u64>());
            assert_eq!(props.raw_value_size, data.iter().map(|(_, v)| v.len() as u64).sum::<u64>());
            assert_eq!((props.smallest_seq, props.largest_seq), (1_000_000 - 1499, 1_000_000));
            assert_eq!(props.compression, codec);
            assert_eq!(props.format_version, crate::FORMAT_VERSION);
            if block_size == 1 {
                assert_eq!(props.num_data_blocks, 1500);
            }
            assert_eq!(collect_forward(&t), data, "{codec} {block_size}");
            let mut it = t.iter(false, false);
            it.seek_to_last();
            for (k, v) in data.iter().rev() {
                assert!(it.valid(), "{codec} {block_size}");
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.prev();
            }
            assert!(!it.valid());
            it.status().unwrap();
            t.verify().unwrap();
        }
    }
}

#[test]
fn compressible_blocks_shrink_and_incompressible_stay_raw() {
    let dir = tempfile::tempdir().unwrap();
    let zeros: Entries = (0..200)
        .map(|i| (make_internal_key(format!("k{i:05}").as_bytes(), 1, ValueKind::Value), vec![0u8; 100]))
        .collect();
    let raw = write_table(&dir.path().join("raw.sst"), small_opts(CompressionType::None, 4096), &zeros);
    let lz4 = write_table(&dir.path().join("lz4.sst"), small_opts(CompressionType::Lz4, 4096), &zeros);
    assert!(lz4.data_size * 2 < raw.data_size, "{} vs {}", lz4.data_size, raw.data_size);
    // Pseudo-random values do not compress by 12.5%: stored raw, same size as uncompressed.
    let mut x = 0x1234_5678_u64;
    let noise: Entries = (0..200)
        .map(|i| {
            let v = (0..100)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            (make_internal_key(format!("k{i:05}").as_bytes(), 1, ValueKind::Value), v)
        })
        .collect();
    let raw = write_table(&dir.path().join("nraw.sst"), small_opts(CompressionType::None, 4096), &noise);
    let lz4 = write_table(&dir.path().join("nlz4.sst"), small_opts(CompressionType::Lz4, 4096), &noise);
    assert_eq!(lz4.data_size, raw.data_size);
    assert_eq!(collect_forward(&open(&dir.path().join("nlz4.sst")).unwrap()), noise);
}

#[test]
fn seek_next_prev_across_block_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    // Only even user keys, so odd ones fall between entries.
    let data: Entries = (0..300)
        .map(|i| {
            (make_internal_key(format!("k{:05}", i * 2).as_bytes(), 7, ValueKind::Value), format!("v{i}").into_bytes())
        })
        .collect();
    let props = write_table(&path, small_opts(CompressionType::Lz4, 100), &data);
    assert!(props.num_data_blocks > 30);
    let t = open(&path).unwrap();
    let mut it = t.iter(true, true);
    for i in 0..300 {
        it.seek(&data[i].0);
        assert_eq!(it.key(), &data[i].0[..]);
        it.prev();
        if i == 0 {
            assert!(!it.valid());
        } else {
            assert_eq!(it.key(), &data[i - 1].0[..]);
            it.next();
            assert_eq!(it.key(), &data[i].0[..]);
        }
        let between = make_internal_key(format!("k{:05}", i * 2 + 1).as_bytes(), 7, ValueKind::Value);
        it.seek(&between);
        match data.get(i + 1) {
            Some((k, _)) => assert_eq!(it.key(), &k[..]),
            None => assert!(!it.valid()),
        }
        it.seek_for_prev(&between);
        assert_eq!(it.key(), &data[i].0[..]);
        it.seek_for_prev(&data[i].0);
        assert_eq!(it.key(), &data[i].0[..]);
        it.next();
        match data.get(i + 1) {
            Some((k, _)) => assert_eq!(it.key(), &k[..]),
            None => assert!(!it.valid()),
        }
    }
    it.seek(b"a\0\0\0\0\0\0\0\0");
    assert_eq!(it.key(), &data[0].0[..]);
    it.seek_for_prev(&make_internal_key(b"a", 1, ValueKind::Value));
    assert!(!it.valid());
    it.seek_for_prev(&make_internal_key(b"z", 1, ValueKind::Value));
    assert_eq!(it.key(), &data[299].0[..]);
    it.seek(&make_internal_key(b"z", 1, ValueKind::Value));
    assert!(!it.valid());
    it.status().unwrap();
}

#[test]
fn versions_of_one_user_key_span_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut data: Entries = vec![(make_internal_key(b"a", 5, ValueKind::Value), b"a".to_vec())];
    data.extend(
        (1..=200u64).rev().map(|s| (make_internal_key(b"dup", s, ValueKind::Value), s.to_string().into_bytes())),
    );
    data.push((make_internal_key(b"z", 5, ValueKind::Value), b"z".to_vec()));
    write_table(&path, small_opts(CompressionType::None, 64), &data);
    let t = open(&path).unwrap();
    let mut it = t.iter(true, true);
    for snapshot in [200u64, 150, 77, 1] {
        it.seek(&make_internal_key(b"dup", snapshot, ikey::KIND_FOR_SEEK));
        assert_eq!(it.value(), snapshot.to_string().as_bytes());
        it.seek_for_prev(&make_internal_key(b"dup", snapshot, ValueKind::Value));
        assert_eq!(it.value(), snapshot.to_string().as_bytes());
    }
    it.seek(&make_internal_key(b"dup", 1000, ikey::KIND_FOR_SEEK));
    assert_eq!(it.value(), b"200");
    it.seek(&make_internal_key(b"dup", 0, ValueKind::Deletion));
    assert_eq!(it.value(), b"z");
    assert_eq!(collect_forward(&t), data);
}

#[test]
fn bloom_negatives_and_no_false_negatives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = entries(3000);
    write_table(&path, TableOptions::default(), &data);
    let t = open(&path).unwrap();
    assert!(t.properties().filter_size > 0);
    for (k, _) in &data {
        assert!(t.may_contain(key_hash(ikey::user_key(k))));
    }
    let fp = (0..10_000).filter(|i| t.may_contain(key_hash(format!("absent{i}").as_bytes()))).count();
    assert!(fp < 300, "{fp} false positives of 10000");

    let nofilter = dir.path().join("nofilter.sst");
    let props = write_table(&nofilter, TableOptions { bloom_bits_per_key: 0.0, ..TableOptions::default() }, &data);
    assert_eq!(props.filter_size, 0);
    let t = open(&nofilter).unwrap();
    assert!(t.may_contain(key_hash(b"absent")));
}

#[test]
fn empty_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let props = write_table(&path, TableOptions::default(), &Vec::new());
    assert_eq!((props.num_entries, props.num_data_blocks, props.smallest_seq), (0, 0, 0));
    let t = open(&path).unwrap();
    assert!(collect_forward(&t).is_empty());
    let mut it = t.iter(true, true);
    it.seek_to_last();
    assert!(!it.valid());
    it.seek_for_prev(b"anything");
    assert!(!it.valid());
    assert!(!t.may_contain(key_hash(b"x")));
    assert_eq!(t.approximate_offset_of(b"x\0\0\0\0\0\0\0\x01"), 0);
    t.verify().unwrap();
}

#[test]
fn add_rejects_bad_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut b = TableBuilder::new(TableOptions::default(), PosixFs::new().create(&path).unwrap());
    b.add(&make_internal_key(b"b", 1, ValueKind::Value), b"x").unwrap();
    let e = b.add(&make_internal_key(b"a", 1, ValueKind::Value), b"x").unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    let e = b.add(&make_internal_key(b"b", 1, ValueKind::Value), b"x").unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(b.add(b"short", b"x").unwrap_err().is_invalid_argument());
    let mut bad_kind = make_internal_key(b"c", 1, ValueKind::Value);
    bad_kind[1] = 9;
    assert!(b.add(&bad_kind, b"x").unwrap_err().is_invalid_argument());
    assert_eq!(b.num_entries(), 1);
    assert!(b.file_size() > 0);
    b.abandon();
}

#[test]
fn block_cache_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = entries(2000);
    let props = write_table(&path, TableOptions::default(), &data);
    let cache = Arc::new(BlockCache::new(8 << 20));
    let stats = Arc::new(TableStats::new());
    let ropts = TableReadOptions {
        cache: Some(cache.clone()),
        cache_index_and_filter: false,
        stats: Some(stats.clone()),
        ..Default::default()
    };
    let t = Table::open(open_file(&path), &ropts).unwrap();
    let meta_reads = stats.blocks_read();
    assert_eq!(meta_reads, 4); // metaindex, properties, index, filter
    assert_eq!(collect_forward(&t), data);
    assert_eq!(stats.blocks_read() - meta_reads, props.num_data_blocks);
    assert_eq!(stats.block_cache_misses(), props.num_data_blocks);
    assert!(stats.bytes_read() >= props.data_size);
    assert_eq!(collect_forward(&t), data);
    assert_eq!(stats.blocks_read() - meta_reads, props.num_data_blocks);
    assert_eq!(stats.block_cache_hits(), props.num_data_blocks);
    assert!(cache.usage() > 0);

    // fill_cache = false reads without inserting.
    let t2 = Table::open(open_file(&path), &ropts).unwrap();
    let before = stats.blocks_read();
    let mut it = t2.iter(true, false);
    it.seek_to_first();
    it.seek_to_first();
    assert!(it.valid());
    assert_eq!(stats.blocks_read() - before, 1);
}

#[test]
fn index_and_filter_in_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = entries(2000);
    write_table(&path, TableOptions::default(), &data);
    for capacity in [8 << 20, 1] {
        let cache = Arc::new(BlockCache::new(capacity));
        let ropts = TableReadOptions {
            cache: Some(cache.clone()),
            cache_index_and_filter: true,
            stats: None,
            ..Default::default()
        };
        let t = Table::open(open_file(&path), &ropts).unwrap();
        assert!(t.pinned_index.is_none() && t.pinned_filter.is_none());
        assert_eq!(collect_forward(&t), data);
        for (k, _) in data.iter().step_by(97) {
            assert!(t.may_contain(key_hash(ikey::user_key(k))));
        }
        assert_eq!(t.approximate_offset_of(&data[0].0), 0);
        if capacity > 1 {
            assert!(cache.hits() > 0);
        }
    }
}

/// `block_cache_only` (the engine's `ReadTier::BlockCacheOnly`): a data block or a cached index that the block
/// cache lacks stops the iterator with `Incomplete`, reading nothing; blocks read before are served.
#[test]
fn block_cache_only_reads_nothing_and_serves_what_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = entries(2000);
    let props = write_table(&path, TableOptions::default(), &data);
    let only = TableIterOptions { block_cache_only: true, ..TableIterOptions::default() };
    for cache_index_and_filter in [false, true] {
        let cache = Arc::new(BlockCache::new(8 << 20));
        let stats = Arc::new(TableStats::new());
        let ropts = TableReadOptions {
            cache: Some(cache.clone()),
            cache_index_and_filter,
            stats: Some(stats.clone()),
            ..Default::default()
        };
        let t = Table::open(open_file(&path), &ropts).unwrap();
        let reads = stats.blocks_read();
        let e = scan_with(&t, &only, false).unwrap_err();
        assert!(e.is_incomplete(), "{e}");
        assert_eq!(stats.blocks_read(), reads, "a block-cache-only scan read a block");
        let targets: Vec<&[u8]> = vec![&data[0].0];
        assert!(t.locate_blocks(&targets, true).is_ok(), "the index is pinned or cached after the open");
        assert_eq!(collect_forward(&t), data);
        let reads = stats.blocks_read();
        assert_eq!(reads, 4 + props.num_data_blocks);
        assert_eq!(scan_with(&t, &only, false).unwrap(), data);
        assert_eq!(scan_with(&t, &only, true).unwrap(), data);
        assert_eq!(stats.blocks_read(), reads);
        if cache_index_and_filter {
            // With the index evicted, even the positioning is Incomplete, and the filter cannot tell.
            let t2 = Table::open(
                open_file(&path),
                &TableReadOptions { cache: Some(Arc::new(BlockCache::new(1))), ..ropts.clone() },
            )
            .unwrap();
            let reads = stats.blocks_read();
            assert!(scan_with(&t2, &only, false).unwrap_err().is_incomplete());
            assert!(t2.locate_blocks(&targets, true).unwrap_err().is_incomplete());
            assert!(t2.may_contain_in(key_hash(b"absent"), true));
            assert_eq!(stats.blocks_read(), reads);
        }
    }
}

/// `Table::index` gives the index block (pinned or from the cache) and its handle: one entry per data block,
/// each decoding to a block inside the data, the first at offset 0, the block placed after the data.
#[test]
fn index_lists_every_data_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let props = write_table(&path, small_opts(CompressionType::None, 512), &entries(600));
    assert!(props.num_data_blocks > 2);
    for cache_index in [false, true] {
        let ropts = TableReadOptions {
            cache: cache_index.then(|| Arc::new(BlockCache::new(8 << 20))),
            cache_index_and_filter: cache_index,
            ..Default::default()
        };
        let t = Table::open(open_file(&path), &ropts).unwrap();
        let (index, handle) = t.index().unwrap();
        assert!(handle.offset >= props.data_size, "{handle:?}");
        let mut it = BlockIter::new(index, KeyOrder::Internal);
        it.seek_to_first();
        let mut handles = Vec::new();
        while it.valid() {
            handles.push(BlockHandle::decode_exact(it.value()).unwrap());
            it.next();
        }
        it.status().unwrap();
        assert_eq!(handles.len() as u64, props.num_data_blocks);
        assert_eq!(handles[0].offset, 0);
        assert!(handles.iter().all(|h| h.offset + h.size <= props.data_size), "{handles:?}");
    }
}

#[test]
fn approximate_offsets_increase() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = entries(2000);
    let props = write_table(&path, small_opts(CompressionType::None, 1024), &data);
    let t = open(&path).unwrap();
    let mut last = 0;
    for (k, _) in &data {
        let off = t.approximate_offset_of(k);
        assert!(off >= last);
        last = off;
    }
    assert!(last > props.data_size / 2);
    assert_eq!(t.approximate_offset_of(&make_internal_key(b"zzz", 1, ValueKind::Value)), props.data_size);
}

/// A small table on disk, for the corruption tests here and in `corruption`.
struct Sst {
    _dir: tempfile::TempDir,
    path: PathBuf,
    bytes: Vec<u8>,
}

fn small_sst(opts: TableOptions, n: usize) -> (Sst, Entries) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000042.sst");
    let data = entries(n);
    write_table(&path, opts, &data);
    let bytes = std::fs::read(&path).unwrap();
    (Sst { _dir: dir, path, bytes }, data)
}

impl Sst {
    fn footer(&self) -> Footer {
        let at = self.bytes.len() - FOOTER_LEN;
        Footer::decode(&self.bytes[at..], &self.path, at as u64).unwrap()
    }
    fn rewrite(&self, bytes: &[u8]) {
        std::fs::write(&self.path, bytes).unwrap();
    }
    /// The first data block's handle.
    fn first_data_block(&self) -> BlockHandle {
        let idx = self.footer().index;
        let block = Block::new(self.bytes[idx.offset as usize..(idx.offset + idx.size) as usize].to_vec()).unwrap();
        let mut it = Arc::new(block).iter(KeyOrder::Internal);
        it.seek_to_first();
        BlockHandle::decode_exact(it.value()).unwrap()
    }
}

fn assert_corruption(r: Result<impl std::fmt::Debug>, path: &Path, offset: u64, needle: &str) {
    match r {
        Err(Error::Corruption { file, offset: at, what }) => {
            assert_eq!(file, path, "{what}");
            assert_eq!(at, offset, "{what}");
            assert!(what.contains(needle), "{what:?} lacks {needle:?}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn concurrent_readers_share_table_and_cache() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    fn assert_iter<T: InternalIterator + 'static>() {}
    assert_iter::<TableIter>();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = Arc::new(entries(1000));
    write_table(&path, small_opts(CompressionType::Lz4, 512), &data);
    let cache = Arc::new(BlockCache::new(64 << 10));
    let ropts =
        TableReadOptions { cache: Some(cache), cache_index_and_filter: true, stats: None, ..Default::default() };
    let t = Table::open(open_file(&path), &ropts).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let (t, data) = (Arc::clone(&t), Arc::clone(&data));
            std::thread::spawn(move || {
                let mut it = t.iter(true, true);
                for (k, v) in data.iter().skip(n).step_by(7) {
                    it.seek(k);
                    assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                }
                it.status().unwrap();
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
}

#[test]
fn index_crc_mismatch_fails_the_open_unless_checksums_are_off() {
    let (sst, data) = small_sst(TableOptions { compression: CompressionType::None, ..TableOptions::default() }, 50);
    let idx = sst.footer().index;
    let mut b = sst.bytes.clone();
    // The stored crc of the index block: after its contents and the compression byte.
    b[(idx.offset + idx.size + 1) as usize] ^= 0x01;
    sst.rewrite(&b);
    assert_corruption(open(&sst.path), &sst.path, idx.offset, "checksum mismatch");
    let unchecked = TableReadOptions { verify_checksums: false, ..TableReadOptions::default() };
    let t = Table::open(open_file(&sst.path), &unchecked).unwrap();
    assert_eq!(collect_forward(&t), data, "the index itself is intact");
    assert_corruption(t.verify(), &sst.path, idx.offset, "checksum mismatch");
}

fn open_hinted(path: &Path, direct: bool, ropts: &TableReadOptions) -> Arc<Table> {
    let file = PosixFs::new().open(path, ReadHints { direct, ..ReadHints::default() }).unwrap();
    Table::open(file, ropts).unwrap()
}

fn scan_with(t: &Arc<Table>, opts: &TableIterOptions, backward: bool) -> Result<Entries> {
    let mut it = t.iter_with(opts);
    let mut out = Vec::new();
    if backward {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if backward {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status()?;
    if backward {
        out.reverse();
    }
    Ok(out)
}

const READAHEADS: [Readahead; 5] =
    [Readahead::Off, Readahead::AUTO, Readahead::Fixed(1), Readahead::Fixed(64 << 10), Readahead::Fixed(1 << 20)];

#[test]
fn readahead_and_direct_reads_return_the_same_entries() {
    let dir = tempfile::tempdir().unwrap();
    let data = entries(6000);
    for codec in [CompressionType::None, CompressionType::Lz4] {
        let path = dir.path().join(format!("{codec}.sst"));
        write_table(&path, small_opts(codec, 512), &data);
        for direct in [false, true] {
            for readahead in READAHEADS {
                for backward in [false, true] {
                    let t = open_hinted(&path, direct, &TableReadOptions::default());
                    let opts = TableIterOptions { readahead, ..TableIterOptions::default() };
                    let got = scan_with(&t, &opts, backward).unwrap();
                    assert!(got == data, "{codec} direct={direct} {readahead:?} backward={backward}");
                }
            }
            // Seeks into the middle, then forward: windows start anywhere.
            let t = open_hinted(&path, direct, &TableReadOptions::default());
            let mut it = t.iter_with(&TableIterOptions { readahead: Readahead::Fixed(3000), ..Default::default() });
            for i in (0..data.len()).step_by(977) {
                it.seek(&data[i].0);
                for want in data.iter().skip(i).take(40) {
                    assert!(it.valid());
                    assert_eq!((it.key(), it.value()), (&want.0[..], &want.1[..]));
                    it.next();
                }
            }
            it.status().unwrap();
        }
    }
}

#[test]
fn auto_readahead_grows_to_few_large_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = entries(60_000);
    let props = write_table(&path, small_opts(CompressionType::None, 4096), &data);
    let stats = Arc::new(TableStats::new());
    let ropts = TableReadOptions { stats: Some(stats.clone()), ..TableReadOptions::default() };
    let scan = |readahead| {
        let t = open_hinted(&path, false, &ropts);
        let before = stats.file_reads();
        assert!(scan_with(&t, &TableIterOptions { readahead, ..Default::default() }, false).unwrap() == data);
        stats.file_reads() - before
    };
    let blocks = props.num_data_blocks;
    assert!(blocks > 300, "{blocks} blocks");
    assert_eq!(scan(Readahead::Off), blocks);
    let auto = scan(Readahead::AUTO);
    // Two single reads, windows of 8, 16, ... 256 KiB, then 256 KiB each.
    let max_windows = 2 + 6 + props.data_size / (256 << 10) + 1;
    assert!(auto <= max_windows, "auto readahead: {auto} reads for {blocks} blocks (at most {max_windows})");
    assert_eq!(scan(Readahead::Fixed(1 << 30)), 1, "one window holds every data block");
    // 64 KiB windows start at a block and end before the first block they do not hold whole.
    let fixed = scan(Readahead::Fixed(64 << 10));
    let (lo, hi) = (props.data_size / (64 << 10), props.data_size / ((64 << 10) - 8192) + 1);
    assert!((lo..=hi).contains(&fixed), "{fixed} reads of 64 KiB for {} bytes", props.data_size);
}

#[test]
fn readahead_fills_the_cache_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = entries(4000);
    let props = write_table(&path, TableOptions::default(), &data);
    for fill_cache in [false, true] {
        let cache = Arc::new(BlockCache::new(8 << 20));
        let stats = Arc::new(TableStats::new());
        let ropts = TableReadOptions { cache: Some(cache.clone()), stats: Some(stats.clone()), ..Default::default() };
        let t = open_hinted(&path, false, &ropts);
        let opts = TableIterOptions { fill_cache, readahead: Readahead::Fixed(1 << 20), ..Default::default() };
        assert!(scan_with(&t, &opts, false).unwrap() == data);
        let hits = stats.block_cache_hits();
        assert!(scan_with(&t, &opts, false).unwrap() == data);
        let expect_hits = if fill_cache { props.num_data_blocks } else { 0 };
        assert_eq!(stats.block_cache_hits() - hits, expect_hits, "fill_cache={fill_cache}");
    }
}

#[test]
fn corrupt_block_fails_its_checksum_through_readahead_and_direct_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let data = entries(3000);
    write_table(&path, small_opts(CompressionType::None, 1024), &data);
    // Flip a byte inside the data blocks, away from the first block.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[5000] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    for direct in [false, true] {
        for readahead in READAHEADS {
            let t = open_hinted(&path, direct, &TableReadOptions::default());
            let e = scan_with(&t, &TableIterOptions { readahead, ..Default::default() }, false).unwrap_err();
            assert!(e.is_corruption() && e.to_string().contains("checksum mismatch"), "{readahead:?}: {e}");
        }
    }
}

#[test]
fn data_blocks_stay_within_the_block_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    // ~130-byte entries against a 4 KiB target: a block that always passed the target by one entry would
    // average well over 4096 bytes.
    let data: Entries = (0..20_000)
        .map(|i| {
            let k = make_internal_key(format!("key{i:010}").as_bytes(), 9, ValueKind::Value);
            (k, vec![b'a' + (i % 26) as u8; 100 + i % 17])
        })
        .collect();
    let props = write_table(&path, small_opts(CompressionType::None, 4096), &data);
    let n = props.num_data_blocks;
    let payload = props.data_size - n * crate::table::BLOCK_TRAILER_LEN as u64;
    let average = payload / n;
    assert!(average <= 4096, "average block {average} bytes over the 4096 target");
    assert!(average >= 4096 * 85 / 100, "average block {average} bytes: blocks cut far too early");
    assert_eq!(collect_forward(&open(&path).unwrap()), data);
}

/// A file that counts its syncs and where they happened.
struct SyncCounting {
    path: PathBuf,
    len: u64,
    syncs: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl shaledb_vfs::WritableFile for SyncCounting {
    fn append(&mut self, data: &[u8]) -> shaledb_vfs::Result<()> {
        self.len += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> shaledb_vfs::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> shaledb_vfs::Result<()> {
        self.syncs.lock().unwrap().push(self.len);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// `bytes_per_sync`: a sync each time that many bytes were written since the last one, and one at the end;
/// 0: only the one at the end.
#[test]
fn bytes_per_sync_syncs_as_the_table_grows() {
    let data = entries(3000);
    for (every, expect_more_than) in [(0u64, 0usize), (4096, 3)] {
        let syncs = Arc::new(std::sync::Mutex::new(Vec::new()));
        let file = SyncCounting { path: PathBuf::from("t.sst"), len: 0, syncs: syncs.clone() };
        let opts =
            TableOptions { bytes_per_sync: every, compression: CompressionType::None, ..TableOptions::default() };
        let mut b = TableBuilder::new(opts, Box::new(file));
        for (k, v) in &data {
            b.add(k, v).unwrap();
        }
        let props = b.finish().unwrap();
        let at = syncs.lock().unwrap().clone();
        assert_eq!(at.last(), Some(&props.file_size), "the final sync covers the whole file");
        if every == 0 {
            assert_eq!(at.len(), 1, "{at:?}");
        } else {
            assert!(at.len() > expect_more_than, "{at:?}");
            for w in at.windows(2) {
                // Syncs come at block boundaries once `every` bytes were written since the previous one.
                assert!(w[1] - w[0] >= every || w[1] == props.file_size, "{at:?}");
            }
            assert!(at[0] >= every && at[0] < every + 4096 + 1024, "{at:?}");
        }
    }
}

// ---- batch lookups: locate_blocks, cached_data_block, read_data_block ----

#[test]
fn locate_blocks_agrees_with_seek_for_sorted_targets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000007.sst");
    let data = entries(900);
    write_table(&path, small_opts(CompressionType::None, 256), &data);
    let t = open(&path).unwrap();
    assert!(t.properties().num_data_blocks > 20);
    // Present keys, absent keys between them, keys before the first and after the last, and repeats.
    let mut targets: Vec<Vec<u8>> = Vec::new();
    for i in (0..320).step_by(3) {
        let seq = if i % 2 == 0 { crate::ikey::MAX_SEQUENCE } else { 1_000_000 - 3 * i as u64 };
        targets.push(make_internal_key(format!("user{i:06}").as_bytes(), seq, ValueKind::Value));
        targets.push(make_internal_key(format!("user{i:06}a").as_bytes(), crate::ikey::MAX_SEQUENCE, ValueKind::Value));
    }
    targets.push(make_internal_key(b"a", crate::ikey::MAX_SEQUENCE, ValueKind::Value));
    targets.push(make_internal_key(b"zzz", crate::ikey::MAX_SEQUENCE, ValueKind::Value));
    targets.push(targets[5].clone());
    targets.sort_by(|a, b| crate::ikey::compare(a, b));
    let refs: Vec<&[u8]> = targets.iter().map(|t| t.as_slice()).collect();
    let got = t.locate_blocks(&refs, false).unwrap();
    assert_eq!(got.len(), targets.len());
    let mut shared = 0;
    for (i, (target, h)) in targets.iter().zip(&got).enumerate() {
        let mut it = t.iter(true, false);
        it.seek(target);
        it.status().unwrap();
        match (it.valid().then(|| it.location().unwrap().1), h) {
            (Some(want), _) => assert_eq!(h.map(|h| h.offset), Some(want), "target {i}"),
            // Past the last key: no block, or the last one, which then holds nothing at or after the target
            // (its index separator may sort after its last key).
            (None, None) => {}
            (None, Some(h)) => {
                let mut b = BlockIter::new(t.read_data_block(*h, true, false).unwrap(), KeyOrder::Internal);
                b.seek(target);
                assert!(!b.valid(), "target {i}: the block has an entry a seek did not find");
            }
        }
        if i > 0 && got[i - 1] == *h {
            shared += 1;
        }
    }
    assert!(shared > 0, "no two targets shared a block");
    let first = make_internal_key(b"a", crate::ikey::MAX_SEQUENCE, ValueKind::Value);
    assert_eq!(t.locate_blocks(&[&first], false).unwrap()[0].map(|h| h.offset), Some(0), "before every key: block 0");
}

#[test]
fn read_data_block_fills_the_cache_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000008.sst");
    write_table(&path, small_opts(CompressionType::Lz4, 256), &entries(300));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let ropts = TableReadOptions { cache: Some(cache), ..TableReadOptions::default() };
    let t = Table::open(open_file(&path), &ropts).unwrap();
    let target = make_internal_key(b"user000050", crate::ikey::MAX_SEQUENCE, ValueKind::Value);
    let h = t.locate_blocks(&[&target], false).unwrap()[0].unwrap();
    assert!(t.cached_data_block(h).is_none());
    let b = t.read_data_block(h, true, false).unwrap();
    assert!(t.cached_data_block(h).is_none(), "fill_cache = false kept the block out");
    let again = t.read_data_block(h, true, true).unwrap();
    assert_eq!(b.size(), again.size());
    let cached = t.cached_data_block(h).expect("fill_cache = true cached the block");
    assert!(Arc::ptr_eq(&cached, &again));
    let mut it = BlockIter::new(cached, KeyOrder::Internal);
    it.seek(&target);
    assert!(it.valid() && crate::ikey::user_key(it.key()) == b"user000050");
}

mod corruption;

/// A table built with a prefix extractor: its filter answers for prefixes, its properties name the extractor,
/// and a reader with another extractor (or none) never skips it.
#[test]
fn prefix_filter_answers_for_prefixes_and_only_for_its_extractor() {
    use crate::prefix::PrefixExtractor::{Capped, Fixed};
    let dir = tempfile::tempdir().unwrap();
    // 50 prefixes "p000".."p049" (even numbers only), 20 keys each.
    let mut es: Entries = Vec::new();
    for p in (0..100).step_by(2) {
        for k in 0..20 {
            es.push((make_internal_key(format!("p{p:03}-{k:04}").as_bytes(), 7, ValueKind::Value), b"v".to_vec()));
        }
    }
    for whole in [true, false] {
        let path = dir.path().join(format!("{whole}.sst"));
        let opts =
            TableOptions { prefix_extractor: Some(Fixed(4)), whole_key_filtering: whole, ..TableOptions::default() };
        let props = write_table(&path, opts, &es);
        assert_eq!((props.prefix_extractor, props.whole_key_filtering), (Some(Fixed(4)), whole));
        let t = open(&path).unwrap();
        assert_eq!((t.properties().prefix_extractor, t.properties().whole_key_filtering), (Some(Fixed(4)), whole));
        t.verify().unwrap();
        let present = |p: u32| t.may_contain_prefix(&Fixed(4), key_hash(format!("p{p:03}").as_bytes()));
        assert!((0..100).step_by(2).all(present), "a present prefix is never excluded");
        let false_positives = (1..100).step_by(2).filter(|&p| present(p)).count();
        assert!(false_positives <= 5, "{false_positives} of 50 absent prefixes matched");
        // Another extractor, or a filter without whole keys asked for a whole key: never excluded.
        assert!((1..100).step_by(2).all(|p| t.may_contain_prefix(&Capped(4), key_hash(format!("p{p:03}").as_bytes()))));
        let absent_key = key_hash(b"p001-0000");
        let present_key = key_hash(b"p000-0003");
        assert!(t.may_contain(present_key));
        if !whole {
            assert!(t.may_contain(absent_key), "a prefix-only filter cannot exclude a whole key");
        }
    }
    // Without an extractor the properties say nothing about prefixes and every prefix probe passes.
    let path = dir.path().join("plain.sst");
    let props = write_table(&path, TableOptions::default(), &es);
    assert_eq!((props.prefix_extractor, props.whole_key_filtering), (None, true));
    let t = open(&path).unwrap();
    assert!(t.may_contain_prefix(&Fixed(4), key_hash(b"p001")));
    assert!(t.may_contain(key_hash(b"p000-0000")));
}
