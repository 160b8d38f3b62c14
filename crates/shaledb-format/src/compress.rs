//! Block compression.
//!
//! ```text
//! compression_type := 0x00 none | 0x01 snappy | 0x04 lz4 | 0x07 zstd   ; FROZEN (RocksDB's numbering)
//! lz4 block        := varint32(uncompressed_len) lz4_raw_block
//! snappy block     := snappy_raw (carries its own length)
//! zstd block       := zstd frame (carries its own length)
//! ```
//! Decompression runs only after the block's checksum passed, and checks the decoded length.

use crate::{Error, Result};

/// A block compression codec. The discriminants are written into every block trailer: FROZEN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum CompressionType {
    /// Stored as is.
    None = 0,
    /// Snappy (raw format).
    Snappy = 1,
    /// LZ4 block format with a varint length prefix.
    #[default]
    Lz4 = 4,
    /// Zstandard.
    Zstd = 7,
}

/// Blocks larger than this after decompression are refused as corrupt.
pub const MAX_BLOCK_LEN: usize = 256 << 20;

/// Upper bounds on how many times larger than its compressed form a valid block can be, per codec, so that a
/// length a damaged block declares never sizes an allocation by itself. LZ4: a sequence's match length grows
/// by at most 255 per byte spent on it. Snappy: a 3-byte copy element yields at most 64 bytes (21x); 32 is a
/// safe round bound.
const LZ4_MAX_RATIO: usize = 256;
const SNAPPY_MAX_RATIO: usize = 32;

/// The largest decoded length a compressed body of `input_len` bytes can honestly claim with `ratio`.
fn claimable(input_len: usize, ratio: usize) -> usize {
    input_len.saturating_mul(ratio).saturating_add(16).min(MAX_BLOCK_LEN)
}

impl CompressionType {
    /// Decodes a trailer byte.
    pub fn from_u8(b: u8) -> Option<CompressionType> {
        match b {
            0 => Some(CompressionType::None),
            1 => Some(CompressionType::Snappy),
            4 => Some(CompressionType::Lz4),
            7 => Some(CompressionType::Zstd),
            _ => None,
        }
    }

    /// RocksDB's name for the codec, as db_bench's `--compression_type` takes it.
    pub fn name(self) -> &'static str {
        match self {
            CompressionType::None => "none",
            CompressionType::Snappy => "snappy",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }

    /// Parses RocksDB's names (`none`, `snappy`, `lz4`, `zstd`; RocksDB's `kLZ4Compression` style too).
    pub fn parse(s: &str) -> Option<CompressionType> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "no" | "knocompression" => Some(CompressionType::None),
            "snappy" | "ksnappycompression" => Some(CompressionType::Snappy),
            "lz4" | "klz4compression" => Some(CompressionType::Lz4),
            "zstd" | "kzstd" | "kzstdcompression" => Some(CompressionType::Zstd),
            _ => None,
        }
    }
}

impl std::fmt::Display for CompressionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Compresses `input` into `out` (cleared first). Returns `false` when the codec failed, in which case the
/// caller stores the block uncompressed.
pub fn compress(kind: CompressionType, level: i32, input: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    match kind {
        CompressionType::None => false,
        CompressionType::Snappy => {
            out.resize(snap::raw::max_compress_len(input.len()), 0);
            match snap::raw::Encoder::new().compress(input, out) {
                Ok(n) => {
                    out.truncate(n);
                    true
                }
                Err(_) => false,
            }
        }
        CompressionType::Lz4 => {
            crate::coding::put_varint32(out, input.len() as u32);
            let start = out.len();
            out.resize(start + lz4_flex::block::get_maximum_output_size(input.len()), 0);
            match lz4_flex::block::compress_into(input, &mut out[start..]) {
                Ok(n) => {
                    out.truncate(start + n);
                    true
                }
                Err(_) => false,
            }
        }
        CompressionType::Zstd => zstd_compress(level, input, out),
    }
}

/// Frames that declare at most this many decoded bytes are decoded in one call into a buffer of exactly
/// that size (zstd refuses to write past it); larger declarations, and frames that do not declare a size,
/// go through the streaming decoder, whose buffer grows only with what is really produced. So a size read
/// from a block never sizes an allocation above this bound by itself.
const ZSTD_ONE_SHOT_MAX: u64 = 4 << 20;

thread_local! {
    /// One zstd compression context per thread, kept across blocks: creating one costs more than
    /// compressing an 8 KiB block with it (14% of a flush's CPU in a profile of benchmark.sh's bulkload,
    /// docs/perf/zstd-contexts.md). The level is the last one set.
    static ZSTD_COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
    /// One decompression context per thread, for the same reason.
    static ZSTD_DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn zstd_compress(level: i32, input: &[u8], out: &mut Vec<u8>) -> bool {
    ZSTD_COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if !matches!(&*slot, Some((l, _)) if *l == level) {
            // A new context rather than a changed level: a context that failed is dropped below, and one
            // created for the level starts clean.
            match zstd::bulk::Compressor::new(level) {
                Ok(c) => *slot = Some((level, c)),
                Err(_) => return false,
            }
        }
        let Some((_, c)) = slot.as_mut() else { return false };
        out.reserve(zstd::zstd_safe::compress_bound(input.len()));
        match c.compress_to_buffer(input, out) {
            Ok(_) => true,
            Err(_) => {
                // zstd leaves a context that failed in an undefined state: never reuse it.
                *slot = None;
                out.clear();
                false
            }
        }
    })
}

/// Decodes a zstd block in one call when its frame declares a size up to [`ZSTD_ONE_SHOT_MAX`]. `None`
/// when it does not, or when the one-shot decode fails or yields another length: the caller then runs the
/// streaming decoder, which gives the same answer a damaged block always got.
fn zstd_one_shot(input: &[u8]) -> Option<Vec<u8>> {
    let n = match zstd::zstd_safe::get_frame_content_size(input) {
        Ok(Some(n)) if n <= ZSTD_ONE_SHOT_MAX => n as usize,
        _ => return None,
    };
    ZSTD_DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().ok()?);
        }
        let d = slot.as_mut()?;
        let mut out = Vec::with_capacity(n);
        match d.decompress_to_buffer(input, &mut out) {
            Ok(got) if got == n => Some(out),
            Ok(_) => None,
            Err(_) => {
                *slot = None;
                None
            }
        }
    })
}

/// Decompresses a block body. Any codec failure is `Corruption` (the caller re-targets file and offset).
pub fn decompress(kind: CompressionType, input: &[u8]) -> Result<Vec<u8>> {
    let bad = |what: String| Error::corruption("", 0, what);
    match kind {
        CompressionType::None => Ok(input.to_vec()),
        CompressionType::Snappy => {
            let n = snap::raw::decompress_len(input).map_err(|e| bad(format!("snappy: {e}")))?;
            if n > claimable(input.len(), SNAPPY_MAX_RATIO) {
                return Err(bad(format!("snappy block of {} bytes claims {n} bytes", input.len())));
            }
            snap::raw::Decoder::new().decompress_vec(input).map_err(|e| bad(format!("snappy: {e}")))
        }
        CompressionType::Lz4 => {
            let (n, used) = crate::coding::get_varint32(input).ok_or_else(|| bad("lz4: bad length prefix".into()))?;
            let n = n as usize;
            let body = input.get(used..).unwrap_or_default();
            if n > claimable(body.len(), LZ4_MAX_RATIO) {
                return Err(bad(format!("lz4 block of {} bytes claims {n} bytes", body.len())));
            }
            let mut out = vec![0u8; n];
            let got = lz4_flex::block::decompress_into(body, &mut out).map_err(|e| bad(format!("lz4: {e}")))?;
            if got != n {
                return Err(bad(format!("lz4: decoded {got} bytes, expected {n}")));
            }
            Ok(out)
        }
        CompressionType::Zstd => {
            if let Some(out) = zstd_one_shot(input) {
                return Ok(out);
            }
            // zstd's ratio has no useful bound (a 4-byte RLE block yields 128 KiB), so the frame's declared
            // size is not trusted to size the buffer: decode as a stream into a buffer that grows with what is
            // actually produced, and stop one byte past the limit.
            use std::io::Read;
            let dec = zstd::stream::read::Decoder::with_buffer(input).map_err(|e| bad(format!("zstd: {e}")))?;
            let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(MAX_BLOCK_LEN));
            dec.take(MAX_BLOCK_LEN as u64 + 1).read_to_end(&mut out).map_err(|e| bad(format!("zstd: {e}")))?;
            if out.len() > MAX_BLOCK_LEN {
                return Err(bad(format!("zstd block decodes to more than {MAX_BLOCK_LEN} bytes")));
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_every_codec() {
        let data: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        for kind in [CompressionType::None, CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd] {
            let mut out = Vec::new();
            let stored = if compress(kind, 3, &data, &mut out) { out.clone() } else { data.clone() };
            if kind != CompressionType::None {
                assert!(stored.len() < data.len(), "{kind} did not compress");
            }
            assert_eq!(decompress(kind, &stored).unwrap(), data, "{kind}");
        }
    }

    #[test]
    fn garbage_is_corruption_not_panic() {
        for kind in [CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd] {
            for junk in [&b""[..], b"\xff\xff\xff\xff\x0f", b"\x05abc", b"garbage garbage garbage"] {
                if let Err(e) = decompress(kind, junk) {
                    assert!(e.is_corruption(), "{kind}: {e}");
                }
            }
        }
    }

    #[test]
    fn declared_decompressed_size_past_input_bound_is_corruption() {
        // Six bytes that claim a 200 MiB LZ4 block: refused before anything is allocated.
        let mut lz4 = Vec::new();
        crate::coding::put_varint32(&mut lz4, 200 << 20);
        lz4.push(0);
        let e = decompress(CompressionType::Lz4, &lz4).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains("claims 209715200 bytes"), "{e}");
        // A snappy preamble claiming 200 MiB over a 5-byte body.
        let mut snappy = Vec::new();
        crate::coding::put_varint32(&mut snappy, 200 << 20);
        snappy.push(0);
        let e = decompress(CompressionType::Snappy, &snappy).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains("claims 209715200 bytes"), "{e}");
        // A zstd frame whose header declares 200 MiB but holds 10 bytes: an error, sized by what it holds.
        let mut frame = Vec::new();
        assert!(compress(CompressionType::Zstd, 3, b"0123456789", &mut frame));
        let mut big = Vec::new();
        // Frame header: magic, descriptor with an 8-byte content size, then the size.
        big.extend_from_slice(&frame[..4]);
        big.push(0xe0); // single segment, 8-byte frame content size
        big.extend_from_slice(&(200u64 << 20).to_le_bytes());
        big.extend_from_slice(&frame[frame.len().min(6)..]);
        assert!(decompress(CompressionType::Zstd, &big).unwrap_err().is_corruption());
        // Honest blocks at high ratios still decode.
        let zeros = vec![0u8; 1 << 20];
        for kind in [CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd] {
            let mut out = Vec::new();
            assert!(compress(kind, 3, &zeros, &mut out), "{kind}");
            assert_eq!(decompress(kind, &out).unwrap(), zeros, "{kind}");
        }
    }

    /// The per-thread contexts: blocks at two levels interleaved, each decoded back; a frame that declares
    /// no size and one that declares more than the one-shot bound both decode through the stream; a frame
    /// declaring fewer bytes than it holds is corruption, and the context that failed on it is not reused
    /// wrongly by the next block.
    #[test]
    fn zstd_contexts_are_reused_across_blocks_and_levels() {
        let block = |i: u32| -> Vec<u8> { (0..2048u32).flat_map(|j| ((i * 31 + j) % 251).to_le_bytes()).collect() };
        let mut out = Vec::new();
        for i in 0..8 {
            let level = if i % 2 == 0 { 3 } else { 1 };
            let data = block(i);
            out.extend_from_slice(b"stale bytes the call must clear");
            assert!(compress(CompressionType::Zstd, level, &data, &mut out));
            assert_eq!(zstd::zstd_safe::get_frame_content_size(&out).unwrap(), Some(data.len() as u64));
            assert_eq!(decompress(CompressionType::Zstd, &out).unwrap(), data, "block {i} at level {level}");
        }
        // No declared size (a streaming encoder that was not told the length).
        let data = block(99);
        let streamed = zstd::stream::encode_all(&data[..], 3).unwrap();
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&streamed).unwrap(), None);
        assert_eq!(decompress(CompressionType::Zstd, &streamed).unwrap(), data);
        // Declared above the one-shot bound.
        let large = vec![7u8; (ZSTD_ONE_SHOT_MAX + 1) as usize];
        assert!(compress(CompressionType::Zstd, 3, &large, &mut out));
        assert_eq!(decompress(CompressionType::Zstd, &out).unwrap(), large);
        // Declares 16 bytes and holds 2 KiB: refused by both decoders, then the next block still decodes.
        let mut frame = Vec::new();
        assert!(compress(CompressionType::Zstd, 3, &data, &mut frame));
        assert_eq!(frame[4], 0x60, "single segment with a 2-byte content size");
        let mut lying = frame[..4].to_vec();
        lying.push(0x20); // single segment, 1-byte frame content size
        lying.push(16);
        let header = 4 + 1 + 2; // magic, descriptor, the 2-byte size data.len() takes
        lying.extend_from_slice(&frame[header..]);
        assert!(decompress(CompressionType::Zstd, &lying).unwrap_err().is_corruption());
        assert_eq!(decompress(CompressionType::Zstd, &frame).unwrap(), data);
    }

    #[test]
    fn names_parse() {
        for kind in [CompressionType::None, CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd] {
            assert_eq!(CompressionType::parse(kind.name()), Some(kind));
            assert_eq!(CompressionType::from_u8(kind as u8), Some(kind));
        }
        assert_eq!(CompressionType::parse("bzip2"), None);
    }
}
