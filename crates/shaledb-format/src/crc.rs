//! CRC-32C (Castagnoli, hardware accelerated) with LevelDB's masking.
//!
//! A crc stored next to the data it covers is masked, so that a crc computed over bytes that themselves
//! contain crcs does not degenerate: `masked = rotr15(crc) + 0xa282ead8` (wrapping).

const MASK_DELTA: u32 = 0xa282_ead8;

/// crc32c of `data`.
#[inline]
pub fn value(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends `crc` (of earlier bytes) with `data`.
#[inline]
pub fn extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// Masks a crc for storage.
#[inline]
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
#[inline]
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_mask() {
        // RFC 3720 test vector: 32 bytes of zeros.
        assert_eq!(value(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(value(b"123456789"), 0xe306_9283);
        assert_eq!(extend(value(b"1234"), b"56789"), value(b"123456789"));
        let c = value(b"foo");
        assert_ne!(mask(c), c);
        assert_eq!(unmask(mask(c)), c);
        assert_eq!(unmask(mask(mask(c))), mask(c));
    }
}
