use super::*;
use proptest::prelude::*;
use shaledb_vfs::{Error, Result, WritableFile};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An in-memory file whose contents stay readable through a shared handle.
struct MemFile {
    buf: Arc<Mutex<Vec<u8>>>,
    path: PathBuf,
}

impl WritableFile for MemFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.buf.lock().unwrap().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.buf.lock().unwrap().len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// Issue 9: after a failed flush (a full disk), a later flush or sync (at close) wrote the failed buffer.
/// A poisoned writer never touches its file again and keeps returning the first error.
#[test]
fn writer_is_poisoned_after_an_error() {
    use shaledb_vfs::{FaultError, FaultPlan, Fs, FsOp, MemFs};
    let fs = MemFs::new();
    let path = Path::new("/000007.log");
    let mut w = Writer::new(fs.create(path).unwrap());
    w.add_record(b"acknowledged").unwrap();
    w.flush().unwrap();
    let good = fs.read_file(path).unwrap();
    fs.set_faults(FaultPlan::once(FsOp::Write, 1, FaultError::Enospc));
    w.add_record(b"failed").unwrap();
    let e = w.flush().unwrap_err();
    assert!(e.is_no_space(), "{e}");
    assert!(w.is_poisoned());
    fs.clear_faults();
    // The disk has room again: still nothing is written, and every call reports the first error.
    assert!(w.sync().unwrap_err().is_no_space());
    assert!(w.add_record(b"later").unwrap_err().is_no_space());
    assert!(w.flush().unwrap_err().is_no_space());
    drop(w);
    assert_eq!(fs.read_file(path).unwrap(), good);
    let mut r = Reader::new(good, path.to_path_buf());
    assert!(matches!(r.next(), LogRead::Record { data, .. } if data == b"acknowledged"));
    assert_eq!(r.next(), LogRead::Eof);
}

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7 + j / 251) as u8).collect()
}

/// Writes `records`, returning the file contents and each record's header offset.
fn write_log(records: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let mut w = Writer::new(Box::new(MemFile { buf: buf.clone(), path: PathBuf::from("000001.log") }));
    let mut offsets = Vec::new();
    for r in records {
        // A record starts at the writer's position unless a trailer comes first.
        let at = w.len();
        let at = if BLOCK_SIZE as u64 - at % BLOCK_SIZE as u64 >= HEADER_LEN as u64 {
            at
        } else {
            at.next_multiple_of(BLOCK_SIZE as u64)
        };
        offsets.push(at);
        w.add_record(r).unwrap();
    }
    w.sync().unwrap();
    assert_eq!(w.path(), Path::new("000001.log"));
    let data = buf.lock().unwrap().clone();
    assert_eq!(w.len(), data.len() as u64);
    (data, offsets)
}

fn read_all(data: Vec<u8>) -> Vec<LogRead> {
    let mut r = Reader::new(data, PathBuf::from("000001.log"));
    let mut out = Vec::new();
    loop {
        let item = r.next();
        if item == LogRead::Eof {
            assert_eq!(r.next(), LogRead::Eof, "Eof is sticky");
            return out;
        }
        out.push(item);
        assert!(out.len() < 100_000, "reader does not terminate");
    }
}

fn records(reads: &[LogRead]) -> Vec<Vec<u8>> {
    reads
        .iter()
        .filter_map(|r| match r {
            LogRead::Record { data, .. } => Some(data.clone()),
            _ => None,
        })
        .collect()
}

fn damages(reads: &[LogRead]) -> Vec<Damage> {
    reads
        .iter()
        .filter_map(|r| match r {
            LogRead::Damage(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

/// A physical record with a valid checksum.
fn phys(typ: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = record_crc(typ, payload).to_le_bytes().to_vec();
    v.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    v.push(typ);
    v.extend_from_slice(payload);
    v
}

fn assert_only_damage(reads: &[LogRead], kind: DamageKind, offset: u64, at_tail: bool) {
    let d = damages(reads);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].kind, d[0].offset, d[0].at_tail), (kind, offset, at_tail), "{}", d[0]);
}

#[test]
fn empty_file() {
    assert!(read_all(Vec::new()).is_empty());
}

#[test]
fn empty_payload_is_a_record() {
    let (data, _) = write_log(&[Vec::new(), b"x".to_vec(), Vec::new()]);
    assert_eq!(data.len(), 3 * HEADER_LEN + 1);
    assert_eq!(records(&read_all(data)), vec![Vec::new(), b"x".to_vec(), Vec::new()]);
}

#[test]
fn sizes_across_block_boundaries() {
    let b = BLOCK_SIZE;
    let h = HEADER_LEN;
    let sizes = [
        0,
        1,
        b - 4 * h, // ends 6 bytes before the block boundary: a trailer follows
        b - h,     // exactly fills block 1: no trailer
        b - h - 7, // leaves exactly one header's room: the next record starts with an empty FIRST
        50,
        3 * b + 17, // fragmented over four blocks
        b - h - 1,
        1,
        0,
    ];
    let recs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| payload(i, n)).collect();
    let (data, offsets) = write_log(&recs);
    let reads = read_all(data.clone());
    assert!(damages(&reads).is_empty(), "{:?}", damages(&reads));
    assert_eq!(records(&reads), recs);
    let got: Vec<u64> = reads
        .iter()
        .filter_map(|r| match r {
            LogRead::Record { offset, .. } => Some(*offset),
            _ => None,
        })
        .collect();
    assert_eq!(got, offsets);
    assert_eq!(offsets[3], b as u64, "a 6-byte tail is skipped as a trailer");
    assert_eq!(offsets[4], 2 * b as u64, "an exactly-fitting record leaves no trailer");
    assert_eq!(offsets[5], 3 * b as u64 - 7, "7 bytes of room hold an empty FIRST fragment");
    assert_eq!(data[3 * b - 1], RecordType::First as u8);
    // Every block boundary starts with a header.
    for blk in (0..data.len()).step_by(b) {
        assert!(Reader::new(data.clone(), PathBuf::new()).intact_at(blk), "block at {blk}");
    }
}

#[test]
fn end_of_last_record_tracks_intact_prefix() {
    let (data, _) = write_log(&[b"one".to_vec(), b"two".to_vec()]);
    let mut r = Reader::new(data, PathBuf::new());
    assert_eq!(r.end_of_last_record(), 0);
    assert!(matches!(r.next(), LogRead::Record { .. }));
    assert_eq!(r.end_of_last_record(), (HEADER_LEN + 3) as u64);
    assert!(matches!(r.next(), LogRead::Record { .. }));
    assert_eq!(r.end_of_last_record(), 2 * (HEADER_LEN + 3) as u64);
}

#[test]
fn checksum_mismatch() {
    // Record 0 fills block 0; record 1 in block 1 survives the resync.
    let recs = vec![payload(0, BLOCK_SIZE - HEADER_LEN), payload(1, 10)];
    let (mut data, _) = write_log(&recs);
    data[HEADER_LEN + 5] ^= 0x10;
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::Checksum, 0, false);
    assert_eq!(records(&reads), vec![recs[1].clone()]);
}

#[test]
fn checksum_mismatch_at_tail() {
    let recs = vec![payload(0, 10), payload(1, 10)];
    let (mut data, offsets) = write_log(&recs);
    let n = data.len();
    data[n - 1] ^= 1;
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::Checksum, offsets[1], true);
    assert_eq!(records(&reads), vec![recs[0].clone()]);
}

#[test]
fn checksum_mismatch_reports_later_intact_record_in_same_block() {
    // Record 1 is intact but lost to the resync: at_tail must say so.
    let recs = vec![payload(0, 10), payload(1, 10)];
    let (mut data, _) = write_log(&recs);
    data[HEADER_LEN] ^= 1;
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::Checksum, 0, false);
    assert!(records(&reads).is_empty());
}

#[test]
fn bad_type() {
    let mut data = phys(9, b"future");
    data.extend(phys(1, b"next"));
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::BadType, 0, false);
    assert_eq!(records(&reads), vec![b"next".to_vec()], "the checksum vouched for the length");
}

#[test]
fn bad_length() {
    let recs = vec![payload(0, BLOCK_SIZE - HEADER_LEN), payload(1, 10)];
    let (mut data, _) = write_log(&recs);
    data[4..6].copy_from_slice(&0xffffu16.to_le_bytes());
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::BadLength, 0, false);
    assert_eq!(records(&reads), vec![recs[1].clone()]);
}

#[test]
fn bad_length_at_tail() {
    let recs = vec![payload(0, 10), payload(1, 10)];
    let (mut data, offsets) = write_log(&recs);
    let at = offsets[1] as usize;
    data[at + 4..at + 6].copy_from_slice(&0xfff0u16.to_le_bytes());
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::BadLength, offsets[1], true);
    assert_eq!(records(&reads), vec![recs[0].clone()]);
}

#[test]
fn truncated_header_at_tail() {
    let recs = vec![payload(0, 10), payload(1, 10)];
    let (mut data, offsets) = write_log(&recs);
    data.truncate(offsets[1] as usize + 4);
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::TruncatedTail, offsets[1], true);
    assert_eq!(records(&reads), vec![recs[0].clone()]);
}

#[test]
fn truncated_payload_at_tail() {
    let recs = vec![payload(0, 10), payload(1, 1000)];
    let (mut data, offsets) = write_log(&recs);
    data.truncate(data.len() - 1);
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::TruncatedTail, offsets[1], true);
    assert_eq!(records(&reads), vec![recs[0].clone()]);
}

#[test]
fn missing_last_fragment_at_eof() {
    let recs = vec![payload(0, 10), payload(1, 3 * BLOCK_SIZE)];
    let (mut data, offsets) = write_log(&recs);
    data.truncate(2 * BLOCK_SIZE); // FIRST and MIDDLE intact, LAST gone
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::TruncatedTail, offsets[1], true);
    assert_eq!(records(&reads), vec![recs[0].clone()]);
}

#[test]
fn first_fragment_followed_by_full_record() {
    let mut data = phys(2, b"head");
    data.extend(phys(1, b"whole"));
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::Fragmentation, 0, false);
    assert_eq!(records(&reads), vec![b"whole".to_vec()]);
}

#[test]
fn orphan_middle_and_last_fragments() {
    let mut data = phys(3, b"mid");
    let second = data.len() as u64;
    data.extend(phys(4, b"end"));
    data.extend(phys(1, b"ok"));
    let reads = read_all(data);
    let d = damages(&reads);
    assert_eq!(d.len(), 2);
    assert_eq!((d[0].kind, d[0].offset, d[0].at_tail), (DamageKind::Fragmentation, 0, false));
    assert_eq!((d[1].kind, d[1].offset, d[1].at_tail), (DamageKind::Fragmentation, second, false));
    assert_eq!(records(&reads), vec![b"ok".to_vec()]);
}

#[test]
fn middle_corruption_then_good_records() {
    let recs: Vec<Vec<u8>> = (0..200).map(|i| payload(i, 1000)).collect();
    let (mut data, offsets) = write_log(&recs);
    // Damage the first record that starts in block 1.
    let victim = offsets.iter().position(|&o| o >= BLOCK_SIZE as u64).unwrap();
    data[offsets[victim] as usize + HEADER_LEN + 3] ^= 0x80;
    let reads = read_all(data);
    let d = damages(&reads);
    assert!(!d.is_empty());
    assert_eq!((d[0].kind, d[0].offset, d[0].at_tail), (DamageKind::Checksum, offsets[victim], false));
    assert!(d.iter().all(|d| !d.at_tail));
    let got = records(&reads);
    // A prefix up to the victim, then everything from block 2 on, in order.
    assert_eq!(got[..victim], recs[..victim]);
    let resumed = offsets.iter().position(|&o| o >= 2 * BLOCK_SIZE as u64).unwrap();
    assert_eq!(got[victim..], recs[resumed..]);
}

#[test]
fn resync_reports_where_it_resumes_and_how_many_intact_records_it_skipped() {
    let recs: Vec<Vec<u8>> = (0..200).map(|i| payload(i, 1000)).collect();
    let (mut data, offsets) = write_log(&recs);
    let victim = 3;
    data[offsets[victim] as usize + HEADER_LEN] ^= 1;
    let mut r = Reader::new(data, PathBuf::from("000001.log"));
    for _ in 0..victim {
        assert!(matches!(r.next(), LogRead::Record { .. }));
    }
    let LogRead::Damage(d) = r.next() else { panic!("damage expected") };
    assert_eq!(d.offset, offsets[victim]);
    assert_eq!(r.position(), BLOCK_SIZE as u64, "a checksum error resyncs at the next block");
    // Records starting after the victim and before the block boundary are intact but skipped; the one
    // fragmented across the boundary starts in block 0 and is skipped too.
    let skipped = offsets.iter().filter(|&&o| o > offsets[victim] && o < BLOCK_SIZE as u64).count() as u64;
    assert!(skipped > 20);
    assert_eq!(r.intact_records_between(d.offset, r.position()), skipped);
    // The rest of the record fragmented across the boundary is an orphan fragment; then records resume.
    let offset = loop {
        match r.next() {
            LogRead::Record { offset, .. } => break offset,
            LogRead::Damage(d) => assert_eq!(d.kind, DamageKind::Fragmentation),
            LogRead::Eof => panic!("record expected after the resync"),
        }
    };
    assert!(offset >= BLOCK_SIZE as u64);
    assert_eq!(r.next_intact_record(d.offset), Some(offsets[victim + 1]));
    assert_eq!(r.next_intact_record(*offsets.last().unwrap() + 1), None);
    // Out-of-range bounds are clamped to the data, never a panic.
    assert_eq!(r.intact_records_between(u64::MAX - 3, u64::MAX), 0);
}

#[test]
fn zero_filled_tail() {
    let recs = vec![payload(0, 10), payload(1, 20)];
    let (mut data, _) = write_log(&recs);
    let end = data.len() as u64;
    data.resize(data.len() + 3 * BLOCK_SIZE + 5, 0); // preallocated space, reported once
    let reads = read_all(data);
    assert_only_damage(&reads, DamageKind::ZeroedRegion, end, true);
    assert_eq!(records(&reads), recs);
}

#[test]
fn zeroed_block_in_the_middle() {
    let recs: Vec<Vec<u8>> = (0..100).map(|i| payload(i, 1000)).collect();
    let (mut data, offsets) = write_log(&recs);
    data[BLOCK_SIZE..2 * BLOCK_SIZE].fill(0);
    let reads = read_all(data);
    let d = damages(&reads);
    // The record straddling blocks 0 and 1 is the first loss.
    let first_lost = offsets.iter().position(|&o| o + 1007 > BLOCK_SIZE as u64).unwrap();
    assert_eq!((d[0].kind, d[0].offset, d[0].at_tail), (DamageKind::ZeroedRegion, offsets[first_lost], false));
    let got = records(&reads);
    assert_eq!(got.last(), recs.last());
    assert_eq!(got[..first_lost], recs[..first_lost]);
}

#[test]
fn appended_garbage() {
    let recs = vec![payload(0, 10), payload(1, 20)];
    let (mut data, _) = write_log(&recs);
    let end = data.len() as u64;
    let mut x: u32 = 0x1234_5678;
    data.extend((0..100).map(|_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x >> 8) as u8 | 1
    }));
    let reads = read_all(data);
    let d = damages(&reads);
    assert_eq!(records(&reads), recs);
    assert!(!d.is_empty());
    assert_eq!(d[0].offset, end);
    assert!(d.iter().all(|d| d.at_tail), "{d:?}");
}

#[test]
fn every_bit_flip_is_detected_and_never_yields_a_wrong_record() {
    let recs = vec![payload(0, 5), payload(1, 40), payload(2, 0)];
    let (data, _) = write_log(&recs);
    for bit in 0..data.len() * 8 {
        let mut bad = data.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        let reads = read_all(bad);
        assert!(!damages(&reads).is_empty(), "flip of bit {bit} went unnoticed");
        // Returned records are a subsequence of the originals.
        let mut next = 0;
        for got in records(&reads) {
            let at = recs[next..].iter().position(|r| *r == got);
            assert!(at.is_some(), "flip of bit {bit} produced a record not written: {got:?}");
            next += at.unwrap_or(0) + 1;
        }
    }
}

#[test]
fn damage_error_names_file_and_offset() {
    let d = Damage { offset: 77, kind: DamageKind::Checksum, what: "x".into(), at_tail: false };
    match d.to_error(Path::new("/db/000007.log")) {
        Error::Corruption { file, offset, what } => {
            assert_eq!(file, Path::new("/db/000007.log"));
            assert_eq!(offset, 77);
            assert!(what.contains("checksum"), "{what}");
        }
        e => panic!("not corruption: {e}"),
    }
}

#[test]
fn grammar_matches_docs() {
    shaledb_testkit::grammar::assert_module_grammar_in_doc(
        include_str!("../log.rs"),
        include_str!("../../../../docs/format/wal.md"),
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn roundtrip_random_sizes(sizes in prop::collection::vec(
        prop_oneof![0usize..20, 0usize..BLOCK_SIZE, (BLOCK_SIZE - 20)..(BLOCK_SIZE + 20), 0usize..100_000],
        0..12,
    )) {
        let recs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| payload(i, n)).collect();
        let (data, offsets) = write_log(&recs);
        let reads = read_all(data);
        let want: Vec<LogRead> = recs
            .iter()
            .zip(&offsets)
            .map(|(r, &o)| LogRead::Record { offset: o, data: r.clone() })
            .collect();
        prop_assert_eq!(reads, want);
    }
}
