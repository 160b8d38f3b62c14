//! Fuzz drivers, one per decoder: each takes arbitrary bytes, runs the decoder over them the way the engine
//! does, and panics only when a property that must hold for any input breaks (the decoder itself must never
//! panic). The cargo-fuzz targets in `fuzz/` call these, and the engine's torture suite replays the committed
//! corpora (`fuzz/corpus/<target>/`) and every saved crasher through them in `cargo test`.
//!
//! Properties checked beyond "no panic": iteration terminates; a forward pass and a backward pass of a valid
//! block or table see the same entries; what decodes re-encodes to something that decodes to the same value.

use shaledb_format::batch::BatchRep;
use shaledb_format::block::{Block, KeyOrder};
use shaledb_format::edit::VersionEdit;
use shaledb_format::iter::InternalIterator;
use shaledb_format::log::{LogRead, Reader};
use shaledb_format::table::{Table, TableReadOptions};
use shaledb_vfs::{Fs, MemFs, ReadHints};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A fuzz driver: takes arbitrary bytes, panics only when a property breaks.
pub type Driver = fn(&[u8]);

/// Key-value pairs an iterator yielded.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The targets, by the name of their fuzz target and corpus directory.
pub const TARGETS: [(&str, Driver); 9] = [
    ("block", block),
    ("blob", blob),
    ("table", table),
    ("wal", wal),
    ("manifest", manifest),
    ("batch", batch),
    ("db", crate::fuzz_db::database),
    ("options", options),
    ("ops", crate::fuzz_ops::ops),
];

/// The entries of an iterator: forward from the first, then backward from the last (reversed back), each
/// pass stopping at an error. Panics when an iterator runs on for more steps than `limit`.
fn both_ways(it: &mut dyn InternalIterator, limit: usize) -> (Entries, Entries, bool) {
    walk(it, limit, true)
}

/// [`both_ways`], except that with `must_end` false a pass simply stops after `limit` steps.
fn walk(it: &mut dyn InternalIterator, limit: usize, must_end: bool) -> (Entries, Entries, bool) {
    let mut fwd = Vec::new();
    it.seek_to_first();
    while it.valid() {
        fwd.push((it.key().to_vec(), it.value().to_vec()));
        if fwd.len() > limit {
            assert!(!must_end, "forward iteration does not terminate");
            break;
        }
        it.next();
    }
    let fwd_ok = it.status().is_ok();
    let mut back = Vec::new();
    it.seek_to_last();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        if back.len() > limit {
            assert!(!must_end, "backward iteration does not terminate");
            break;
        }
        it.prev();
    }
    let ok = fwd_ok && it.status().is_ok();
    back.reverse();
    (fwd, back, ok)
}

/// Seeks to keys taken from `data` (and to each entry's own key) and checks the iterator stays sane.
fn seeks(it: &mut dyn InternalIterator, entries: &[(Vec<u8>, Vec<u8>)], data: &[u8]) {
    for target in entries.iter().map(|(k, _)| k.as_slice()).take(16).chain(data.chunks(9).take(8)) {
        it.seek(target);
        if it.valid() {
            let _ = (it.key().len(), it.value().len());
            it.prev();
        }
        it.seek_for_prev(target);
        if it.valid() {
            it.next();
        }
    }
    let _ = it.status();
}

/// Block decoder: [`Block::new`] and its iterator in both key orders.
pub fn block(data: &[u8]) {
    let Ok(b) = Block::new(data.to_vec()) else { return };
    let b = Arc::new(b);
    for order in [KeyOrder::Internal, KeyOrder::Bytewise] {
        let mut it = b.iter(order);
        let (fwd, back, ok) = both_ways(&mut it, data.len() + 1);
        if ok {
            assert_eq!(fwd, back, "a valid block reads differently forward and backward");
        }
        seeks(&mut it, &fwd, data);
    }
}

/// SST reader: [`Table::open`] on the bytes as a file, a full iteration both ways, seeks, point-lookup
/// filter probes and [`Table::verify`].
pub fn table(data: &[u8]) {
    let fs = MemFs::new();
    let path = PathBuf::from("/fuzz/000001.sst");
    fs.write_file(&path, data);
    let Ok(file) = fs.open(&path, ReadHints::default()) else { return };
    let Ok(t) = Table::open(file, &TableReadOptions::default()) else { return };
    let verified = t.verify().is_ok();
    let mut it = t.iter(true, true);
    let (fwd, back, ok) = both_ways(&mut it, data.len() + 1);
    if ok {
        assert_eq!(fwd, back, "a readable table reads differently forward and backward");
    }
    if verified {
        assert!(ok, "a table that verifies fails to iterate");
        for (k, _) in &fwd {
            let user_key = shaledb_format::ikey::user_key(k);
            assert!(t.may_contain(shaledb_format::bloom::key_hash(user_key)), "a verified filter lacks a key");
        }
    }
    seeks(&mut it, &fwd, data);
    let _ = t.approximate_offset_of(data);
    unverified_table(&fs, &path, data);
}

/// The same bytes opened with block checksum checks off, as `shaledb dump --no-verify-checksums` does (the
/// footer's own crc is always checked): the metaindex, properties, index, filter and data-block decoders see
/// the damaged bytes themselves (with checksums on, almost every mutation stops at the first crc). Nothing may panic; the index may name
/// one block many times, so iteration is capped rather than required to end.
fn unverified_table(fs: &MemFs, path: &Path, data: &[u8]) {
    let Ok(file) = fs.open(path, ReadHints::default()) else { return };
    let opts = TableReadOptions { verify_checksums: false, ..TableReadOptions::default() };
    let Ok(t) = Table::open(file, &opts) else { return };
    let _ = t.verify();
    let mut it = t.iter(false, true);
    let (fwd, _, _) = walk(&mut it, 4 * data.len() + 16, false);
    for (k, _) in fwd.iter().take(64) {
        let _ = t.may_contain(shaledb_format::bloom::key_hash(shaledb_format::ikey::user_key(k)));
    }
    seeks(&mut it, &fwd, data);
    let _ = t.approximate_offset_of(data);
}

/// Blob file reader (docs/format/blob.md): [`shaledb_format::blob::BlobFileReader::open`] on the bytes as a file, `verify`, and reads
/// of the record every verified file starts with and of blob references decoded from the bytes themselves.
pub fn blob(data: &[u8]) {
    use shaledb_format::blob::{BlobFileReader, BlobIndex, HEADER_LEN, RECORD_HEADER_LEN};
    let _ = BlobIndex::decode(data);
    let fs = MemFs::new();
    let path = PathBuf::from("/fuzz/000001.blob");
    fs.write_file(&path, data);
    let Ok(file) = fs.open(&path, ReadHints::default()) else { return };
    let Ok(r) = BlobFileReader::open(file, 1, None) else { return };
    let mut out = Vec::new();
    if let Ok(summary) = r.verify() {
        assert!(summary.record_bytes <= data.len() as u64, "records larger than the file");
        let head = data.get(HEADER_LEN..HEADER_LEN + RECORD_HEADER_LEN).filter(|_| summary.record_count > 0);
        if let Some(h) = head {
            let key_len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
            let size = u64::from(u32::from_le_bytes([h[4], h[5], h[6], h[7]]));
            let key = &data[HEADER_LEN + RECORD_HEADER_LEN..HEADER_LEN + RECORD_HEADER_LEN + key_len];
            let compression = shaledb_format::compress::CompressionType::from_u8(data[9]);
            if let Some(compression) = compression {
                let index = BlobIndex { file_number: 1, offset: HEADER_LEN as u64, size, compression };
                let _ = r.read(key, &index, &mut out);
            }
        }
    }
    for chunk in data.chunks(11).take(16) {
        if let Some(index) = BlobIndex::decode(chunk) {
            let _ = r.read(&chunk[..chunk.len() / 2], &index, &mut out);
        }
    }
}

/// WAL reader: [`Reader`] to the end, each record decoded as a write batch, as recovery does.
pub fn wal(data: &[u8]) {
    read_log(data, batch);
}

/// Runs a log reader over `data`, handing each record to `each`. Panics when the reader does not end.
fn read_log(data: &[u8], mut each: impl FnMut(&[u8])) {
    let mut r = Reader::new(data.to_vec(), Path::new("/fuzz/log").to_path_buf());
    // Every call consumes at least one byte or reports damage once per block: far fewer calls than this.
    let limit = 2 * data.len() + 16;
    let mut last_end = 0;
    for _ in 0..limit {
        match r.next() {
            LogRead::Eof => {
                assert!(matches!(r.next(), LogRead::Eof), "Eof is final");
                return;
            }
            LogRead::Damage(d) => assert!(d.offset <= data.len() as u64, "damage offset beyond the data"),
            LogRead::Record { offset, data: payload } => {
                assert!(offset >= last_end, "records go back");
                last_end = r.end_of_last_record();
                assert!(last_end <= data.len() as u64);
                each(&payload);
            }
        }
    }
    panic!("the log reader did not reach the end of {} bytes in {limit} calls", data.len());
}

/// MANIFEST: the bytes as one edit ([`VersionEdit::decode`], re-encoded and decoded again to the same edit),
/// and as a log of edits.
pub fn manifest(data: &[u8]) {
    edit(data);
    read_log(data, edit);
}

fn edit(data: &[u8]) {
    let Ok(e) = VersionEdit::decode(data) else { return };
    let mut out = Vec::new();
    e.encode(&mut out);
    match VersionEdit::decode(&out) {
        Ok(again) => assert_eq!(again, e, "a decoded edit does not survive encode and decode"),
        Err(err) => panic!("a decoded edit re-encodes to bytes that do not decode: {err}"),
    }
}

/// OPTIONS file: the bytes as a database directory's only OPTIONS file, read by `Options::load_latest_with`
/// (text parsing, section titles, quoted family names, every option's value); what loads must validate or
/// refuse cleanly, and its family descriptors must build.
pub fn options(data: &[u8]) {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).expect("a directory in memory");
    let mut f = fs.create(&dir.join("OPTIONS-000005")).expect("a file in memory");
    f.append(data).expect("an append in memory");
    f.sync().expect("a sync in memory");
    drop(f);
    let Ok(loaded) = shaledb::Options::load_latest_with(dir, Arc::new(fs)) else { return };
    let _ = loaded.options.validate();
    for d in loaded.column_family_descriptors() {
        assert!(!d.name.is_empty() && d.name != "default", "a loaded family is named {:?}", d.name);
        let _ = d.options.validate();
    }
}

/// Write batch: [`BatchRep::from_bytes`] and its iterator; a valid batch rebuilt record by record iterates
/// the same.
pub fn batch(data: &[u8]) {
    let Ok(b) = BatchRep::from_bytes(data.to_vec()) else { return };
    let entries: Vec<_> = match b.iter().collect::<Result<Vec<_>, _>>() {
        Ok(e) => e,
        Err(e) => panic!("from_bytes accepted a batch whose iteration fails: {e}"),
    };
    assert_eq!(entries.len(), b.count() as usize, "count and records disagree");
    let mut rebuilt = BatchRep::new();
    rebuilt.set_sequence(b.sequence());
    for e in &entries {
        match e.kind {
            shaledb_format::ikey::ValueKind::BlobIndex => panic!("a write batch decoded a blob reference"),
            // Every other kind, in its column family (the prefix is written only for families other than 0).
            kind => rebuilt.push_record(e.family, kind, e.key, e.value),
        }
    }
    let again: Vec<_> = rebuilt.iter().collect::<Result<Vec<_>, _>>().unwrap_or_default();
    assert_eq!(again, entries, "a rebuilt batch differs");
}

/// Seed inputs for each target, made by the real encoders: a few blocks, tables, logs, edits and batches.
/// `fuzz/corpus/` was generated from these (see `fuzz/README.md`).
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use shaledb_format::block::BlockBuilder;
    use shaledb_format::compress::CompressionType;
    use shaledb_format::edit::FileMeta;
    use shaledb_format::ikey::{make_internal_key, ValueKind};
    use shaledb_format::log::Writer;
    use shaledb_format::table::{TableBuilder, TableOptions};

    let mut out = Vec::new();
    let ikeys: Vec<(Vec<u8>, Vec<u8>)> = (0..40u64)
        .map(|i| {
            let kind = [ValueKind::Value, ValueKind::Deletion, ValueKind::Merge][(i % 3) as usize];
            (make_internal_key(format!("key{i:03}").as_bytes(), 100 - i, kind), format!("value-{i}").repeat(3).into())
        })
        .collect();
    for restart in [1, 4, 16] {
        let mut b = BlockBuilder::new(restart);
        for (k, v) in ikeys.iter().take(10 + restart) {
            b.add(k, v);
        }
        out.push(("block", b.finish().to_vec()));
    }
    let fs = MemFs::new();
    let _ = fs.create_dir_all(Path::new("/seeds"));
    for (n, (compression, bloom, block_size)) in
        [(CompressionType::None, 10.0, 256), (CompressionType::Lz4, 0.0, 512), (CompressionType::Snappy, 5.0, 128)]
            .into_iter()
            .enumerate()
    {
        let path = PathBuf::from(format!("/seeds/{n:06}.sst"));
        let opts = TableOptions { compression, bloom_bits_per_key: bloom, block_size, ..TableOptions::default() };
        let Ok(file) = fs.create(&path) else { continue };
        let mut tb = TableBuilder::new(opts, file);
        for (k, v) in ikeys.iter().take(12 + 8 * n) {
            let _ = tb.add(k, v);
        }
        if tb.finish().is_ok() {
            if let Some(data) = fs.read_file(&path) {
                out.push(("table", data));
            }
        }
    }
    let mut batches = Vec::new();
    for n in 0..5u64 {
        let mut b = BatchRep::new();
        b.set_sequence(1 + 10 * n);
        for i in 0..=n {
            match i % 4 {
                0 => b.put(format!("k{i}").as_bytes(), &vec![b'v'; (i * 50) as usize]),
                1 => b.delete(format!("k{i}").as_bytes()),
                2 => b.merge(format!("k{i}").as_bytes(), b"op"),
                _ => b.single_delete(format!("k{i}").as_bytes()),
            }
        }
        out.push(("batch", b.data().to_vec()));
        batches.push(b);
    }
    let mut edits = Vec::new();
    let meta = |number: u64| FileMeta {
        number,
        file_size: 1000 + number,
        smallest: make_internal_key(b"a", number, ValueKind::Value),
        largest: make_internal_key(b"z", number + 1, ValueKind::Deletion),
        smallest_seq: number,
        largest_seq: number + 1,
        num_entries: 10,
        num_deletions: 1,
        // Odd numbers hold range tombstones: the seeds cover both file records (tags 7 and 8).
        num_range_deletions: (number % 2) * 2,
    };
    let mut first = VersionEdit {
        comparator: Some(shaledb_format::edit::BYTEWISE_COMPARATOR.into()),
        format_version: Some(shaledb_format::FORMAT_VERSION),
        log_number: Some(3),
        next_file_number: Some(9),
        last_sequence: Some(77),
        ..VersionEdit::default()
    };
    first.add_file(0, meta(5));
    first.add_file(1, meta(6));
    let mut second = VersionEdit { log_number: Some(8), ..VersionEdit::default() };
    second.delete_file(0, 5);
    second.add_file(2, meta(7));
    for e in [first, second] {
        let mut buf = Vec::new();
        e.encode(&mut buf);
        out.push(("manifest", buf.clone()));
        edits.push(buf);
    }
    for (target, payloads) in
        [("wal", batches.iter().map(|b| b.data().to_vec()).collect::<Vec<_>>()), ("manifest", edits)]
    {
        let path = PathBuf::from(format!("/seeds/{target}.log"));
        let Ok(file) = fs.create(&path) else { continue };
        let mut w = Writer::new(file);
        for p in &payloads {
            let _ = w.add_record(p);
        }
        let _ = w.flush();
        if let Some(data) = fs.read_file(&path) {
            out.push((target, data));
        }
        // One record large enough to be fragmented across blocks.
        if target == "wal" {
            let mut big = BatchRep::new();
            big.put(b"big", &vec![7u8; 40_000]);
            let _ = w.add_record(big.data());
            let _ = w.flush();
            if let Some(data) = fs.read_file(&path) {
                out.push((target, data));
            }
        }
    }
    out.extend(crate::fuzz_db::seeds().into_iter().map(|s| ("db", s)));
    out.extend(options_seeds().into_iter().map(|s| ("options", s)));
    // Short programs (the driver opens a database per input): every op once, and put / single delete pairs.
    let every: Vec<u8> = (0..16u8).flat_map(|op| [op, op.wrapping_mul(7) % 24, op.wrapping_mul(29)]).collect();
    out.push(("ops", every));
    out.push(("ops", [0u8, 3, 40, 2, 3, 0, 0, 4, 9, 11, 0, 0, 2, 4, 0, 13, 0, 0, 4, 1, 3, 12, 0, 0].to_vec()));
    for compression in [CompressionType::None, CompressionType::Lz4] {
        let (fs, path) = (MemFs::new(), PathBuf::from("/seed/000001.blob"));
        let _ = fs.create_dir_all(Path::new("/seed"));
        let Ok(file) = fs.create(&path) else { continue };
        let Ok(mut w) = shaledb_format::blob::BlobFileWriter::new(file, 1, compression, &[7; 16]) else { continue };
        for (k, v) in ikeys.iter().take(8) {
            let _ = w.add(shaledb_format::ikey::user_key(k), &v.repeat(4));
        }
        if w.finish().is_ok() {
            if let Some(data) = fs.read_file(&path) {
                out.push(("blob", data));
            }
        }
    }
    out
}

/// OPTIONS files as databases write them: default options, and two named column families with options of
/// their own (a merge operator, a prefix extractor, a name that needs quoting).
fn options_seeds() -> Vec<Vec<u8>> {
    use shaledb::{merge, ColumnFamilyDescriptor, Db, Options, PrefixExtractor};
    let mut out = Vec::new();
    for (n, families) in [0usize, 2].into_iter().enumerate() {
        let fs = MemFs::new();
        let dir = PathBuf::from(format!("/options-seed-{n}"));
        let opts = Options { fs: Arc::new(fs.clone()), ..Options::default() };
        let descs = (0..families)
            .map(|i| {
                let o = if i == 0 {
                    Options { merge_operator: merge::builtin("uint64add"), ..opts.clone() }
                } else {
                    Options { prefix_extractor: Some(PrefixExtractor::Fixed(4)), ..opts.clone() }
                };
                ColumnFamilyDescriptor::new(["counters", "we\"ird #name"][i], o)
            })
            .collect();
        let Ok(db) = Db::open_with_column_families(&dir, opts, descs) else { continue };
        let _ = db.close();
        let newest = fs.list(&dir).unwrap_or_default().into_iter().filter(|f| f.starts_with("OPTIONS-")).max();
        if let Some(data) = newest.and_then(|f| fs.read_file(&dir.join(f))) {
            out.push(data);
        }
    }
    out
}

/// Writes [`seeds`] as `<dir>/<target>/seed-<n>` (how `fuzz/corpus/` was made).
pub fn write_seed_corpus(dir: &Path) -> std::io::Result<usize> {
    let mut counts = std::collections::BTreeMap::new();
    for (target, data) in seeds() {
        let n = counts.entry(target).or_insert(0usize);
        let d = dir.join(target);
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join(format!("seed-{n}")), data)?;
        *n += 1;
    }
    Ok(counts.values().sum())
}

/// The inputs of a corpus directory (`fuzz/corpus/<target>` or a directory of saved crashers), sorted by
/// name; an empty list when the directory does not exist.
pub fn corpus_inputs(dir: &Path) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.is_file() {
            let data = std::fs::read(&path)?;
            out.push((path, data));
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_corpus_is_written_per_target() {
        let dir = crate::tempdir();
        let n = write_seed_corpus(dir.path()).unwrap();
        assert_eq!(n, seeds().len());
        for (name, _) in TARGETS {
            assert!(corpus_inputs(&dir.path().join(name)).unwrap().len() >= 2, "{name}");
        }
        assert!(corpus_inputs(&dir.path().join("nothing")).unwrap().is_empty());
    }

    #[test]
    fn seeds_cover_every_target_and_pass_their_driver() {
        let seeds = seeds();
        for (name, driver) in TARGETS {
            let mine: Vec<&Vec<u8>> = seeds.iter().filter(|(t, _)| *t == name).map(|(_, d)| d).collect();
            assert!(mine.len() >= 2, "{name}: {} seeds", mine.len());
            for s in mine {
                driver(s);
            }
        }
    }

    #[test]
    fn drivers_survive_junk_and_truncations() {
        let seeds = seeds();
        for (name, driver) in TARGETS {
            driver(&[]);
            driver(&[0xff; 64]);
            for (_, s) in seeds.iter().filter(|(t, _)| *t == name) {
                for cut in (0..s.len()).step_by(7) {
                    driver(&s[..cut]);
                }
                let mut flipped = s.clone();
                for i in (0..flipped.len()).step_by(11) {
                    flipped[i] ^= 0x5a;
                }
                driver(&flipped);
            }
        }
    }

    /// Regenerates `fuzz/corpus/` when `SHALEDB_WRITE_FUZZ_SEEDS` names the directory (see fuzz/README.md).
    #[test]
    fn write_seed_corpus_when_asked() {
        if let Ok(dir) = std::env::var("SHALEDB_WRITE_FUZZ_SEEDS") {
            write_seed_corpus(Path::new(&dir)).unwrap();
        }
    }
}
