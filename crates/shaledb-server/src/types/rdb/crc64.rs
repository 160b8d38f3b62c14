//! CRC-64/Jones as DUMP payloads use it: polynomial 0xad93d23594c935a9, reflected input and output,
//! initial value 0, no final xor (the check value of `123456789` is 0xe9c6d914c4b8d9ca).

/// The reflected polynomial.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

/// One entry per byte value: the CRC of that byte alone, for the byte-at-a-time update.
static TABLE: [u64; 256] = table();

const fn table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLY } else { crc >> 1 };
            bit += 1;
        }
        t[i] = crc;
        i += 1;
    }
    t
}

/// The CRC of `data`, continuing from `crc` (0 to start).
pub fn update(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = TABLE[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value_matches_the_jones_catalogue_entry() {
        assert_eq!(super::update(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(super::update(0, b""), 0);
        let split = super::update(super::update(0, b"1234"), b"56789");
        assert_eq!(split, 0xe9c6_d914_c4b8_d9ca);
    }
}
