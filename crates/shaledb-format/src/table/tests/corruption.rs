//! One named test per way an SST can be corrupt, each naming the file and the offset of the bad block, and
//! the bit-flip sweep.

use super::*;

fn first_entry(t: &Arc<Table>) -> Result<()> {
    let mut it = t.iter(true, true);
    it.seek_to_first();
    assert!(!it.valid());
    it.status()
}

#[test]
fn bad_magic_is_corruption() {
    let (sst, _) = small_sst(TableOptions::default(), 50);
    let mut b = sst.bytes.clone();
    let n = b.len();
    b[n - 1] ^= 0x40;
    sst.rewrite(&b);
    assert_corruption(open(&sst.path), &sst.path, (n - 8) as u64, "magic");
}

#[test]
fn truncated_file_is_corruption() {
    let (sst, _) = small_sst(TableOptions::default(), 50);
    sst.rewrite(&sst.bytes[..sst.bytes.len() - 10]);
    assert_corruption(open(&sst.path), &sst.path, (sst.bytes.len() - 10 - 8) as u64, "magic");
    sst.rewrite(&sst.bytes[..30]);
    assert_corruption(open(&sst.path), &sst.path, 0, "too short");
    sst.rewrite(&[]);
    assert_corruption(open(&sst.path), &sst.path, 0, "too short");
}

#[test]
fn footer_checksum_mismatch_is_corruption() {
    let (sst, _) = small_sst(TableOptions::default(), 50);
    let mut b = sst.bytes.clone();
    let at = b.len() - FOOTER_LEN;
    b[at + 1] ^= 1; // inside the metaindex handle
    sst.rewrite(&b);
    assert_corruption(open(&sst.path), &sst.path, (at + 44) as u64, "footer checksum");
}

#[test]
fn unsupported_format_version_is_corruption() {
    let (sst, _) = small_sst(TableOptions::default(), 50);
    let mut f = sst.footer();
    f.format_version = crate::FORMAT_VERSION + 1;
    let mut b = sst.bytes.clone();
    let at = b.len() - FOOTER_LEN;
    b[at..].copy_from_slice(&f.encode());
    sst.rewrite(&b);
    assert_corruption(open(&sst.path), &sst.path, (at + 40) as u64, "format_version");
}

#[test]
fn block_crc_mismatch_is_corruption() {
    let (sst, _) = small_sst(TableOptions { compression: CompressionType::None, ..TableOptions::default() }, 50);
    let mut b = sst.bytes.clone();
    b[5] ^= 0x10;
    sst.rewrite(&b);
    let t = open(&sst.path).unwrap();
    assert_corruption(first_entry(&t), &sst.path, 0, "checksum mismatch");
    assert_corruption(t.verify(), &sst.path, 0, "checksum mismatch");
    // Without checksum verification the flipped byte is not detected by the crc (it may still fail to decode).
    let mut it = t.iter(false, false);
    it.seek_to_first();
    assert!(it.valid() || it.status().is_err());
}

#[test]
fn index_block_crc_mismatch_is_corruption() {
    let (sst, _) = small_sst(TableOptions::default(), 50);
    let idx = sst.footer().index;
    let mut b = sst.bytes.clone();
    b[idx.offset as usize + 2] ^= 0x01;
    sst.rewrite(&b);
    assert_corruption(open(&sst.path), &sst.path, idx.offset, "checksum mismatch");
}

/// Rewrites the trailer of the block at `h` with compression type `kind` and a matching crc.
fn retype_block(bytes: &mut [u8], h: BlockHandle, kind: u8) {
    let end = (h.offset + h.size) as usize;
    bytes[end] = kind;
    let c = crc::mask(crc::value(&bytes[h.offset as usize..=end]));
    bytes[end + 1..end + 5].copy_from_slice(&c.to_le_bytes());
}

#[test]
fn bad_compression_type_is_corruption() {
    let (sst, _) = small_sst(TableOptions::default(), 50);
    let h = sst.first_data_block();
    let mut b = sst.bytes.clone();
    retype_block(&mut b, h, 9);
    sst.rewrite(&b);
    let t = open(&sst.path).unwrap();
    assert_corruption(first_entry(&t), &sst.path, h.offset, "compression type 9");
}

#[test]
fn undecompressible_block_is_corruption() {
    // A raw block relabelled as zstd passes the crc but fails to decompress.
    let (sst, _) = small_sst(TableOptions { compression: CompressionType::None, ..TableOptions::default() }, 50);
    let h = sst.first_data_block();
    let mut b = sst.bytes.clone();
    retype_block(&mut b, h, CompressionType::Zstd as u8);
    sst.rewrite(&b);
    let t = open(&sst.path).unwrap();
    assert_corruption(first_entry(&t), &sst.path, h.offset, "zstd");
}

#[test]
fn bad_block_handle_beyond_end_is_corruption() {
    let (sst, _) = small_sst(TableOptions::default(), 50);
    let mut f = sst.footer();
    f.index = BlockHandle { offset: sst.bytes.len() as u64 + 100, size: 10 };
    let mut b = sst.bytes.clone();
    let at = b.len() - FOOTER_LEN;
    b[at..].copy_from_slice(&f.encode());
    sst.rewrite(&b);
    assert_corruption(open(&sst.path), &sst.path, sst.bytes.len() as u64 + 100, "past the data end");
    // A size that runs into the footer.
    f.index.offset = 0;
    f.index.size = at as u64;
    b[at..].copy_from_slice(&f.encode());
    sst.rewrite(&b);
    assert_corruption(open(&sst.path), &sst.path, 0, "past the data end");
}

#[test]
fn bad_block_handle_in_index_is_corruption() {
    // Rebuild the index block with a handle pointing past the end, then patch the footer to it.
    let (sst, data) = small_sst(TableOptions::default(), 50);
    let mut f = sst.footer();
    let mut ib = BlockBuilder::new(1);
    let mut h = Vec::new();
    BlockHandle { offset: 1 << 40, size: 100 }.encode_to(&mut h);
    ib.add(&data[49].0, &h);
    let contents = ib.finish().to_vec();
    let mut b = sst.bytes[..sst.bytes.len() - FOOTER_LEN].to_vec();
    f.index = BlockHandle { offset: b.len() as u64, size: contents.len() as u64 };
    let c = crc::mask(crc::extend(crc::value(&contents), &[0]));
    b.extend_from_slice(&contents);
    b.push(0);
    b.extend_from_slice(&c.to_le_bytes());
    b.extend_from_slice(&f.encode());
    sst.rewrite(&b);
    let t = open(&sst.path).unwrap();
    assert_corruption(first_entry(&t), &sst.path, 1 << 40, "past the data end");
    assert!(t.verify().unwrap_err().is_corruption());
}

#[test]
fn corrupt_entry_in_valid_block_is_corruption() {
    // A data block whose crc matches but whose first entry claims an impossible length.
    let (sst, _) = small_sst(TableOptions { compression: CompressionType::None, ..TableOptions::default() }, 50);
    let h = sst.first_data_block();
    let mut b = sst.bytes.clone();
    b[h.offset as usize + 2] = 0x7f; // value_len of the first entry
    b[h.offset as usize + 3] = 0x7f; // and the start of its key, so the entry cannot parse or fit
    let end = (h.offset + h.size) as usize;
    let c = crc::mask(crc::value(&b[h.offset as usize..=end]));
    b[end + 1..end + 5].copy_from_slice(&c.to_le_bytes());
    sst.rewrite(&b);
    let t = open(&sst.path).unwrap();
    let mut it = t.iter(true, true);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert!(n < 50);
    assert!(it.status().unwrap_err().is_corruption());
    assert!(t.verify().unwrap_err().is_corruption());
}

/// An SST held in memory, for the bit-flip sweep.
struct MemFile {
    data: Vec<u8>,
    path: PathBuf,
}

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.data.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| Error::io("read", &self.path, std::io::ErrorKind::UnexpectedEof.into()))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

#[test]
fn every_bit_flip_is_detected_or_harmless() {
    let opts = TableOptions { block_size: 256, compression: CompressionType::Lz4, ..TableOptions::default() };
    let (sst, data) = small_sst(opts, 60);
    let len = sst.bytes.len();
    assert!((1200..4000).contains(&len), "{len} bytes");
    let mut detected = 0;
    for bit in 0..len * 8 {
        let mut bytes = sst.bytes.clone();
        bytes[bit / 8] ^= 1 << (bit % 8);
        let file = Arc::new(MemFile { data: bytes, path: sst.path.clone() });
        let t = match Table::open(file, &TableReadOptions::default()) {
            Ok(t) => t,
            Err(e) => {
                assert!(e.is_corruption(), "bit {bit}: {e}");
                detected += 1;
                continue;
            }
        };
        let mut it = t.iter(true, true);
        it.seek_to_first();
        let mut i = 0;
        while it.valid() {
            assert_eq!((it.key(), it.value()), (&data[i].0[..], &data[i].1[..]), "bit {bit}");
            i += 1;
            it.next();
        }
        let ok = it.status().is_ok();
        assert!(!ok || i == data.len(), "bit {bit}: stopped early without an error");
        it.seek(&data[30].0);
        assert!(!it.valid() || it.key() == &data[30].0[..], "bit {bit}");
        let verified = t.verify();
        assert_eq!(verified.is_ok(), ok, "bit {bit}: verify disagrees with iteration");
        if !ok {
            detected += 1;
        }
    }
    // Every byte of an SST is covered by a checksum (blocks + trailers by theirs, the footer by its own).
    assert_eq!(detected, len * 8);
}
