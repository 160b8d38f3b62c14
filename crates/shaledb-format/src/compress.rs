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
        CompressionType::Zstd => match zstd::bulk::compress(input, level) {
            Ok(v) => {
                *out = v;
                true
            }
            Err(_) => false,
        },
    }
}

/// Decompresses a block body. Any codec failure is `Corruption` (the caller re-targets file and offset).
pub fn decompress(kind: CompressionType, input: &[u8]) -> Result<Vec<u8>> {
    let bad = |what: String| Error::corruption("", 0, what);
    match kind {
        CompressionType::None => Ok(input.to_vec()),
        CompressionType::Snappy => {
            let n = snap::raw::decompress_len(input).map_err(|e| bad(format!("snappy: {e}")))?;
            if n > MAX_BLOCK_LEN {
                return Err(bad(format!("snappy block claims {n} bytes")));
            }
            snap::raw::Decoder::new().decompress_vec(input).map_err(|e| bad(format!("snappy: {e}")))
        }
        CompressionType::Lz4 => {
            let (n, used) = crate::coding::get_varint32(input).ok_or_else(|| bad("lz4: bad length prefix".into()))?;
            let n = n as usize;
            if n > MAX_BLOCK_LEN {
                return Err(bad(format!("lz4 block claims {n} bytes")));
            }
            let mut out = vec![0u8; n];
            let got =
                lz4_flex::block::decompress_into(&input[used..], &mut out).map_err(|e| bad(format!("lz4: {e}")))?;
            if got != n {
                return Err(bad(format!("lz4: decoded {got} bytes, expected {n}")));
            }
            Ok(out)
        }
        CompressionType::Zstd => {
            let mut dec = zstd::bulk::Decompressor::new().map_err(|e| bad(format!("zstd: {e}")))?;
            let cap = zstd::zstd_safe::get_frame_content_size(input)
                .ok()
                .flatten()
                .map(|n| n as usize)
                .unwrap_or(MAX_BLOCK_LEN)
                .min(MAX_BLOCK_LEN);
            dec.decompress(input, cap).map_err(|e| bad(format!("zstd: {e}")))
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
    fn names_parse() {
        for kind in [CompressionType::None, CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd] {
            assert_eq!(CompressionType::parse(kind.name()), Some(kind));
            assert_eq!(CompressionType::from_u8(kind as u8), Some(kind));
        }
        assert_eq!(CompressionType::parse("bzip2"), None);
    }
}
