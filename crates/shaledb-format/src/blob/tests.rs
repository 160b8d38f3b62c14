use super::*;
use shaledb_vfs::{Fs, MemFs, ReadHints};

const ID: [u8; DB_ID_LEN] = [7; DB_ID_LEN];

fn write(fs: &MemFs, compression: CompressionType, records: &[(&str, Vec<u8>)]) -> (Vec<BlobIndex>, BlobFileSummary) {
    let path = Path::new("/000009.blob");
    let mut w = BlobFileWriter::new(fs.create(path).unwrap(), 9, compression, &ID).unwrap();
    let idx = records.iter().map(|(k, v)| w.add(k.as_bytes(), v).unwrap()).collect();
    (idx, w.finish().unwrap())
}

fn overwrite(fs: &MemFs, path: &Path, data: &[u8]) {
    let mut f = fs.create(path).unwrap();
    f.append(data).unwrap();
    f.sync().unwrap();
}

#[test]
fn grammar_matches_docs() {
    shaledb_testkit::grammar::assert_module_grammar_in_doc(
        include_str!("../blob.rs"),
        include_str!("../../../../docs/format/blob.md"),
    );
}

fn open(fs: &MemFs) -> Result<BlobFileReader> {
    let path = Path::new("/000009.blob");
    BlobFileReader::open(fs.open(path, ReadHints::default()).unwrap(), 9, Some(&ID))
}

#[test]
fn records_read_back_and_verify() {
    for c in [CompressionType::None, CompressionType::Lz4, CompressionType::Zstd, CompressionType::Snappy] {
        let fs = MemFs::new();
        let recs = vec![("a", vec![1u8; 300]), ("bb", b"hello".to_vec()), ("", Vec::new())];
        let (idx, sum) = write(&fs, c, &recs);
        assert_eq!(sum.record_count, 3);
        let r = open(&fs).unwrap();
        let mut out = Vec::new();
        for ((k, v), i) in recs.iter().zip(&idx) {
            r.read(k.as_bytes(), i, &mut out).unwrap();
            assert_eq!(&out, v);
            let mut enc = Vec::new();
            i.encode(&mut enc);
            assert_eq!(BlobIndex::decode(&enc), Some(*i));
        }
        assert_eq!(r.verify().unwrap(), sum);
    }
}

#[test]
fn checksum_mismatch_names_file_and_record() {
    let fs = MemFs::new();
    let (idx, _) = write(&fs, CompressionType::None, &[("k", vec![5u8; 100])]);
    let path = Path::new("/000009.blob");
    let mut data = fs.read_file(path).unwrap();
    data[HEADER_LEN + RECORD_HEADER_LEN + 10] ^= 1;
    overwrite(&fs, path, &data);
    let r = open(&fs).unwrap();
    match r.read(b"k", &idx[0], &mut Vec::new()).unwrap_err() {
        Error::Corruption { file, offset, .. } => assert_eq!((file.as_path(), offset), (path, HEADER_LEN as u64)),
        e => panic!("{e}"),
    }
    assert!(r.verify().unwrap_err().is_corruption());
}

#[test]
fn index_past_the_file_or_for_another_key_is_corruption() {
    let fs = MemFs::new();
    let (idx, _) = write(&fs, CompressionType::None, &[("k", vec![5u8; 10])]);
    let r = open(&fs).unwrap();
    let far = BlobIndex { offset: u64::MAX - 3, ..idx[0] };
    assert!(r.read(b"k", &far, &mut Vec::new()).unwrap_err().is_corruption());
    let big = BlobIndex { size: 1 << 31, ..idx[0] };
    assert!(r.read(b"k", &big, &mut Vec::new()).unwrap_err().is_corruption());
    assert!(r.read(b"x", &idx[0], &mut Vec::new()).unwrap_err().is_corruption());
    assert!(r.read(b"kk", &idx[0], &mut Vec::new()).unwrap_err().is_corruption());
}

#[test]
fn bad_header_truncation_and_foreign_identity_are_refused() {
    let fs = MemFs::new();
    write(&fs, CompressionType::None, &[("k", vec![5u8; 10])]);
    let path = Path::new("/000009.blob");
    let good = fs.read_file(path).unwrap();
    let other = BlobFileReader::open(fs.open(path, ReadHints::default()).unwrap(), 9, Some(&[1; DB_ID_LEN]));
    assert!(other.unwrap_err().is_corruption());
    let mut bad = good.clone();
    bad[0] ^= 1;
    overwrite(&fs, path, &bad);
    assert!(open(&fs).unwrap_err().is_corruption());
    overwrite(&fs, path, &good[..20]);
    assert!(open(&fs).unwrap_err().is_corruption());
    // Torn footer: the header opens, verification fails.
    overwrite(&fs, path, &good[..good.len() - 3]);
    assert!(open(&fs).unwrap().verify().unwrap_err().is_corruption());
}

#[test]
fn undecodable_indexes_are_none() {
    assert_eq!(BlobIndex::decode(b""), None);
    let mut enc = Vec::new();
    BlobIndex { file_number: 1, offset: 30, size: 5, compression: CompressionType::None }.encode(&mut enc);
    enc.push(0);
    assert_eq!(BlobIndex::decode(&enc), None, "trailing bytes");
    enc.pop();
    *enc.last_mut().unwrap() = 99;
    assert_eq!(BlobIndex::decode(&enc), None, "unknown compression");
}

#[test]
fn read_ahead_windows_read_what_read_reads() {
    let fs = MemFs::new();
    let recs: Vec<(String, Vec<u8>)> = (0..20).map(|i| (format!("key{i:02}"), vec![i as u8; 10 + 7 * i])).collect();
    let refs: Vec<(&str, Vec<u8>)> = recs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let (idx, _) = write(&fs, CompressionType::None, &refs);
    let r = open(&fs).unwrap();
    for readahead in [0, 1, 64, 500, 1 << 20] {
        let mut window = ReadWindow::default();
        let mut out = Vec::new();
        // In file order, then backwards: windows are refilled as needed.
        for i in (0..recs.len()).chain((0..recs.len()).rev()) {
            r.read_ahead(recs[i].0.as_bytes(), &idx[i], &mut out, &mut window, readahead).unwrap();
            assert_eq!(out, recs[i].1, "record {i}, readahead {readahead}");
        }
        let wrong = BlobIndex { size: idx[3].size + 1, ..idx[3] };
        assert!(r.read_ahead(b"key03", &wrong, &mut out, &mut window, readahead).unwrap_err().is_corruption());
    }
}
