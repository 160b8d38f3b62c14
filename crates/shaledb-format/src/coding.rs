//! Integer and slice coding shared by every format.
//!
//! ```text
//! fixed32  := 4 bytes little-endian          fixed64 := 8 bytes little-endian
//! varint32 := 1..5 bytes, 7 bits each, low groups first, high bit = "more follows"
//! varint64 := 1..10 bytes, same scheme
//! lp_slice := varint32(len) byte{len}
//! ```

/// Appends a varint32.
#[inline]
pub fn put_varint32(out: &mut Vec<u8>, v: u32) {
    put_varint64(out, v as u64)
}

/// Appends a varint64.
#[inline]
pub fn put_varint64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a varint32 from the front of `input`: `(value, bytes used)`, or `None` when truncated/overlong.
#[inline]
pub fn get_varint32(input: &[u8]) -> Option<(u32, usize)> {
    let (v, n) = get_varint_n(input, 5)?;
    u32::try_from(v).ok().map(|v| (v, n))
}

/// Decodes a varint64 from the front of `input`.
#[inline]
pub fn get_varint64(input: &[u8]) -> Option<(u64, usize)> {
    get_varint_n(input, 10)
}

#[inline]
fn get_varint_n(input: &[u8], max: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &b) in input.iter().enumerate().take(max) {
        let shift = 7 * i as u32;
        let part = (b & 0x7f) as u64;
        if shift == 63 && part > 1 {
            return None;
        }
        v |= part << shift;
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Bytes a varint of `v` takes.
#[inline]
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends a fixed32.
#[inline]
pub fn put_fixed32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a fixed64.
#[inline]
pub fn put_fixed64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Reads a fixed32 at the front of `input` (`None` when shorter than 4 bytes).
#[inline]
pub fn get_fixed32(input: &[u8]) -> Option<u32> {
    input.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Reads a fixed64 at the front of `input` (`None` when shorter than 8 bytes).
#[inline]
pub fn get_fixed64(input: &[u8]) -> Option<u64> {
    let b: [u8; 8] = input.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// Appends a length-prefixed slice.
#[inline]
pub fn put_lp_slice(out: &mut Vec<u8>, s: &[u8]) {
    put_varint32(out, s.len() as u32);
    out.extend_from_slice(s);
}

/// Decodes a length-prefixed slice: `(slice, bytes used)`.
#[inline]
pub fn get_lp_slice(input: &[u8]) -> Option<(&[u8], usize)> {
    let (len, n) = get_varint32(input)?;
    let end = n.checked_add(len as usize)?;
    input.get(n..end).map(|s| (s, end))
}

/// A cursor that decodes from a byte slice, remembering how far it got (for error offsets).
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// Starts at the front of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }
    /// Offset of the next byte to decode.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// True when everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    /// The bytes not yet consumed.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos.min(self.buf.len())..]
    }
    /// Decodes a varint32.
    pub fn varint32(&mut self) -> Option<u32> {
        let (v, n) = get_varint32(self.rest())?;
        self.pos += n;
        Some(v)
    }
    /// Decodes a varint64.
    pub fn varint64(&mut self) -> Option<u64> {
        let (v, n) = get_varint64(self.rest())?;
        self.pos += n;
        Some(v)
    }
    /// Decodes a fixed32.
    pub fn fixed32(&mut self) -> Option<u32> {
        let v = get_fixed32(self.rest())?;
        self.pos += 4;
        Some(v)
    }
    /// Decodes a fixed64.
    pub fn fixed64(&mut self) -> Option<u64> {
        let v = get_fixed64(self.rest())?;
        self.pos += 8;
        Some(v)
    }
    /// Decodes one byte.
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.rest().first()?;
        self.pos += 1;
        Some(b)
    }
    /// Decodes a length-prefixed slice.
    pub fn lp_slice(&mut self) -> Option<&'a [u8]> {
        let (s, n) = get_lp_slice(self.rest())?;
        self.pos += n;
        Some(s)
    }
    /// Takes `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.rest().get(..n)?;
        self.pos += n;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip_edges() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            put_varint64(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            assert_eq!(get_varint64(&b), Some((v, b.len())));
        }
    }

    #[test]
    fn varint_truncated_and_overlong_rejected() {
        assert_eq!(get_varint32(&[0x80]), None);
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), None);
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None); // > u32::MAX
        assert_eq!(get_varint64(&[0xff; 11]), None);
        assert_eq!(get_varint64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]), None);
    }

    #[test]
    fn lp_slice_bounds() {
        let mut b = Vec::new();
        put_lp_slice(&mut b, b"abc");
        assert_eq!(get_lp_slice(&b), Some((&b"abc"[..], 4)));
        assert_eq!(get_lp_slice(&b[..3]), None);
        let mut d = Decoder::new(&b);
        assert_eq!(d.lp_slice(), Some(&b"abc"[..]));
        assert!(d.is_empty());
        assert_eq!(d.u8(), None);
    }
}
