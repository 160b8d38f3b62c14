//! LZF decompression, for the compressed strings of a payload (Redis compresses strings longer than 20
//! bytes when `rdbcompression` is on). ShaleDB never compresses what it writes.
//!
//! ```text
//! stream  := (literal | backref)*
//! literal := ctrl:u8 (< 0x20) byte{ctrl + 1}
//! backref := ctrl:u8 (>= 0x20) [extra:u8 if ctrl >> 5 == 7] low:u8
//!            copies (ctrl >> 5) + extra + 2 bytes from `out_len - ((ctrl & 0x1f) << 8 | low) - 1`
//! ```

/// Decompresses `input`, which must produce exactly `expect` bytes. `None` for anything malformed: a
/// literal or reference running past the input, a reference before the start of the output, or an output
/// of another length. The output grows as it is produced, so a lying `expect` sizes nothing.
pub fn decompress(input: &[u8], expect: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(expect.min(input.len().saturating_mul(4)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 0x20 {
            let run = input.get(i..i + ctrl + 1)?;
            if out.len() + run.len() > expect {
                return None;
            }
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            let low = *input.get(i)? as usize;
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            let from = out.len().checked_sub(back)?;
            let len = len + 2;
            if out.len() + len > expect {
                return None;
            }
            // Byte by byte: the source may overlap the bytes being written (a run).
            for k in 0..len {
                let b = out[from + k];
                out.push(b);
            }
        }
    }
    (out.len() == expect).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::decompress;

    #[test]
    fn literals_and_overlapping_references() {
        // "abc" literal, then a reference 3 back of length 6: "abcabcabc".
        let input = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert_eq!(decompress(&input, 9).unwrap(), b"abcabcabc");
        // A long reference (len field 7 plus an extra byte).
        let input = [0, b'x', (7 << 5), 3, 0];
        assert_eq!(decompress(&input, 1 + 12).unwrap(), vec![b'x'; 13]);
    }

    #[test]
    fn malformed_input_is_refused() {
        assert!(decompress(&[2, b'a'], 3).is_none(), "literal past the end");
        assert!(decompress(&[(1 << 5), 0], 3).is_none(), "reference before the output");
        assert!(decompress(&[0, b'a'], 2).is_none(), "short output");
        assert!(decompress(&[1, b'a', b'b'], 1).is_none(), "long output");
        assert!(decompress(&[0, b'a', (1 << 5)], 4).is_none(), "truncated reference");
    }
}
