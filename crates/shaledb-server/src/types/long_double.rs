//! INCRBYFLOAT's and HINCRBYFLOAT's arithmetic in C's `long double`, as Redis computes it.
//!
//! Redis reads both operands with `strtold`, adds them as `long double` and stores the sum printed with
//! `%.17Lf`, its trailing fractional zeros removed: `SET k 1000; INCRBYFLOAT k 0.1` stores
//! `1000.09999999999999998`, `INCRBYFLOAT k 1e-320` on a missing key stores `0` (1e-320 is a normal number in
//! the x87 80-bit format, printed with 17 decimals), `SET k 0x10; INCRBYFLOAT k 1` stores `17` (`strtold`
//! reads hexadecimal). Rust has no `long double`, so the parsing, the addition and the formatting live in
//! `long_double.c`, compiled by the crate's build script with the platform's C compiler: the platform's own
//! `long double` and libc, as Redis uses, so the texts agree byte for byte on the same platform.
//!
//! The C side takes byte slices and writes into a buffer this module owns; it keeps no state and is thread
//! safe (`strtold` and `snprintf` in the "C" locale, `errno` thread-local).

// The FFI calls below need `unsafe`; nothing else in this module does.
#![allow(unsafe_code)]

use std::os::raw::{c_char, c_int};

/// Longest operand text accepted (exclusive), and the result buffer's size: Redis's 5 KiB.
const TEXT_MAX: usize = 5120;

extern "C" {
    fn shaledb_ld_classify(s: *const u8, len: usize) -> c_int;
    fn shaledb_ld_add(
        old: *const u8,
        old_len: usize,
        has_old: c_int,
        by: *const u8,
        by_len: usize,
        out: *mut c_char,
        out_cap: usize,
        out_len: *mut usize,
    ) -> c_int;
}

/// What a text is, read as Redis reads a long double.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Not a number: empty, 5 KiB or longer, a leading space, trailing bytes, NaN, or out of range.
    NotANumber,
    /// A finite number.
    Finite,
    /// `inf`, `-inf`, `infinity` ...: read as a number, refused later by the commands.
    Infinite,
}

/// Why [`add`] gave no sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The stored value is not a number.
    OldNotNumber,
    /// The increment is not a number.
    IncrNotNumber,
    /// The sum is NaN or infinite.
    NotFinite,
}

/// Reads `text` as Redis's `string2ld` does.
pub fn classify(text: &[u8]) -> Class {
    if text.is_empty() || text.len() >= TEXT_MAX {
        return Class::NotANumber;
    }
    // SAFETY: the pointer and length describe `text`, which outlives the call; the C function only reads
    // `len` bytes from it.
    match unsafe { shaledb_ld_classify(text.as_ptr(), text.len()) } {
        1 => Class::Finite,
        2 => Class::Infinite,
        _ => Class::NotANumber,
    }
}

/// `old + by` (`old` missing: 0) in `long double`, as the text Redis stores. The old value is checked
/// first, then the increment, as Redis does.
pub fn add(old: Option<&[u8]>, by: &[u8]) -> Result<String, AddError> {
    let mut out = vec![0u8; TEXT_MAX];
    let mut out_len = 0usize;
    let (old_ptr, old_len) = old.map_or((std::ptr::null(), 0), |o| (o.as_ptr(), o.len()));
    // SAFETY: each (pointer, length) pair describes a live slice (`old` is only read when `has_old` is set;
    // a null pointer goes with `has_old == 0`); `out` is a writable buffer of `out.len()` bytes, and the C
    // function writes at most `out_cap` bytes to it and its length to `out_len`, a live local.
    let rc = unsafe {
        shaledb_ld_add(
            old_ptr,
            old_len,
            c_int::from(old.is_some()),
            by.as_ptr(),
            by.len(),
            out.as_mut_ptr().cast::<c_char>(),
            out.len(),
            &mut out_len,
        )
    };
    match rc {
        0 => {
            out.truncate(out_len.min(TEXT_MAX));
            // The C side printed a number in the "C" locale: ASCII only.
            Ok(String::from_utf8_lossy(&out).into_owned())
        }
        1 => Err(AddError::OldNotNumber),
        2 => Err(AddError::IncrNotNumber),
        _ => Err(AddError::NotFinite),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_print_as_redis_prints_them() {
        // The cases of issue 40, checked against redis-server 7.0.15 on x86-64.
        assert_eq!(add(Some(b"1000"), b"0.1").unwrap(), "1000.09999999999999998");
        assert_eq!(add(None, b"1e-320").unwrap(), "0");
        assert_eq!(add(Some(b"0x10"), b"1").unwrap(), "17");
        assert_eq!(add(Some(b"10.5"), b"0.1").unwrap(), "10.6");
        assert_eq!(add(None, b"5.0e3").unwrap(), "5000");
        assert_eq!(add(Some(b"0.5"), b"-1").unwrap(), "-0.5");
        assert_eq!(add(Some(b"-0"), b"0").unwrap(), "0");
        assert_eq!(add(Some(b"1"), b"-1").unwrap(), "0");
    }

    #[test]
    fn bad_operands_and_infinite_sums_are_refused() {
        assert_eq!(add(Some(b"abc"), b"1"), Err(AddError::OldNotNumber));
        assert_eq!(add(Some(b"abc"), b"xyz"), Err(AddError::OldNotNumber), "the old value is checked first");
        assert_eq!(add(Some(b"1"), b" 1"), Err(AddError::IncrNotNumber));
        assert_eq!(add(Some(b"1"), b"1 "), Err(AddError::IncrNotNumber));
        assert_eq!(add(Some(b"1"), b"1\x002"), Err(AddError::IncrNotNumber));
        assert_eq!(add(Some(b"1"), b""), Err(AddError::IncrNotNumber));
        assert_eq!(add(Some(b"1"), b"nan"), Err(AddError::IncrNotNumber));
        assert_eq!(add(Some(b"1"), b"1e999999"), Err(AddError::IncrNotNumber), "overflow");
        assert_eq!(add(Some(b"1"), b"1e-999999"), Err(AddError::IncrNotNumber), "underflow to zero");
        assert_eq!(add(Some(b"1"), b"inf"), Err(AddError::NotFinite));
        assert_eq!(add(Some(b"1"), &vec![b'1'; TEXT_MAX]), Err(AddError::IncrNotNumber));
        assert_eq!(classify(b"inf"), Class::Infinite);
        assert_eq!(classify(b"-Infinity"), Class::Infinite);
        assert_eq!(classify(b"1.5"), Class::Finite);
        assert_eq!(classify(b"\t1"), Class::NotANumber);
        assert_eq!(classify(b"NaN"), Class::NotANumber);
        assert_eq!(classify(b""), Class::NotANumber);
    }
}
