//! Order-preserving encodings of column values and the table layer's records (docs/format/table.md has the
//! same grammar, and the reasons):
//!
//! ```text
//! engine key      := pk_record_key | index_entry_key
//! pk_record_key   := pk_id:u32be key_col{PK columns, in PK order}
//! pk_record_value := row_field{every column not in the PK, in column order}
//! index_entry_key := index_id:u32be key_col{index columns, in index order} key_col{PK columns, in PK order}
//! index_entry_val := (empty)
//!
//! key_col         := int32_key | int64_key | uint32_key | uint64_key | char_key | varchar_key
//! int32_key       := (value as u32 XOR 0x8000_0000):u32be            4 bytes
//! int64_key       := (value as u64 XOR 0x8000_0000_0000_0000):u64be  8 bytes
//! uint32_key      := value:u32be                                     4 bytes
//! uint64_key      := value:u64be                                     8 bytes
//! char_key        := bytes, then 0x20 up to n bytes                  CHAR(n): exactly n bytes, no terminator
//! varchar_key     := (byte != 0x00 | 0x00 0xFF)* 0x00 0x01           VARCHAR(n): at most n bytes before escaping
//!
//! row_field       := int32:i32le | int64:i64le | uint32:u32le | uint64:u64le | string
//! string          := len:varint32 byte{len}                          CHAR without its trailing spaces
//! ```
//!
//! Key encodings ([`encode_key_value`]) make the bytewise (memcmp) order of encoded keys equal the order of the
//! values, column by column, so a range of values is a range of keys:
//! - signed integers: the two's complement with the sign bit flipped, big endian (`Int32` 4 bytes, `Int64` 8);
//! - unsigned integers: big endian (`UInt32` 4 bytes, `UInt64` 8);
//! - `CHAR(n)`: the bytes padded with spaces to exactly `n` (MySQL's PAD SPACE comparison: `"ab"` and `"ab "` are
//!   equal, and trailing spaces are not part of a CHAR value, so a decoded CHAR has them removed). Fixed length,
//!   so no terminator;
//! - `VARCHAR(n)`: each 0x00 byte written as `00 FF`, then the terminator `00 01`. Byte order is kept (a byte
//!   below 0x00 cannot exist, an escaped 0x00 sorts after the terminator, so a proper prefix sorts first). Chosen
//!   over MyRocks' memcmp format (groups of 8 bytes + a marker byte, ~9/8 the size plus padding of the last group)
//!   because it costs 2 bytes plus one per 0x00 byte (none in text), and decoding is a plain scan. The encoding
//!   compares bytes (a binary collation): `"ab" < "ab "`.
//!
//! The row value ([`encode_row_value`]) holds the columns not in the primary key, in column order, compactly:
//! integers fixed width little endian (4 or 8 bytes), strings `varint32(len) bytes` (CHAR without its trailing
//! spaces). Decoders check every length against the column's declared size and the bytes left before they copy
//! anything, and report damage as [`DecodeError`], never a panic.

use super::{ColumnType, Value};

/// Why bytes do not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Result of decoders.
pub type DecodeResult<T> = Result<T, DecodeError>;

fn err<T>(msg: impl Into<String>) -> DecodeResult<T> {
    Err(DecodeError(msg.into()))
}

/// Appends the index id (u32 big endian).
#[inline]
pub fn encode_index_id(id: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&id.to_be_bytes());
}

/// The index id at the front of `key`.
#[inline]
pub fn decode_index_id(key: &[u8]) -> DecodeResult<u32> {
    match key.get(..4) {
        Some(b) => Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        None => err(format!("key of {} bytes has no index id", key.len())),
    }
}

/// Whether `v` is a value of a column of type `ty` (integers in range, strings not longer than the column).
pub fn check_value(ty: ColumnType, v: &Value) -> Result<(), String> {
    match (ty, v) {
        (ColumnType::Int32, Value::Int(i)) if i32::try_from(*i).is_ok() => Ok(()),
        (ColumnType::Int64, Value::Int(_)) => Ok(()),
        (ColumnType::UInt32, Value::UInt(u)) if u32::try_from(*u).is_ok() => Ok(()),
        (ColumnType::UInt64, Value::UInt(_)) => Ok(()),
        (ColumnType::Char(n) | ColumnType::VarChar(n), Value::Str(s)) if s.len() <= usize::from(n) => Ok(()),
        (ColumnType::Char(n) | ColumnType::VarChar(n), Value::Str(s)) => {
            Err(format!("string of {} bytes in a column of {} bytes", s.len(), n))
        }
        _ => Err(format!("value {v:?} does not fit a column of type {ty:?}")),
    }
}

/// `s` without its trailing spaces (a CHAR value as MySQL returns it).
#[inline]
pub fn trim_pad(s: &[u8]) -> &[u8] {
    let mut end = s.len();
    while end > 0 && s[end - 1] == b' ' {
        end -= 1;
    }
    &s[..end]
}

/// Appends the key encoding of `v`, a value of type `ty` (checked by [`check_value`] beforehand: a value that
/// does not fit is encoded as the nearest value that does, never a panic).
pub fn encode_key_value(ty: ColumnType, v: &Value, out: &mut Vec<u8>) {
    match ty {
        ColumnType::Int32 => {
            let i = int_of(v) as i32;
            out.extend_from_slice(&((i as u32) ^ 0x8000_0000).to_be_bytes());
        }
        ColumnType::Int64 => {
            let i = int_of(v);
            out.extend_from_slice(&((i as u64) ^ 0x8000_0000_0000_0000).to_be_bytes());
        }
        ColumnType::UInt32 => out.extend_from_slice(&(uint_of(v) as u32).to_be_bytes()),
        ColumnType::UInt64 => out.extend_from_slice(&uint_of(v).to_be_bytes()),
        ColumnType::Char(n) => {
            let s = str_of(v);
            let n = usize::from(n);
            let s = &s[..s.len().min(n)];
            out.extend_from_slice(s);
            out.resize(out.len() + (n - s.len()), b' ');
        }
        ColumnType::VarChar(n) => {
            let s = str_of(v);
            let s = &s[..s.len().min(usize::from(n))];
            for chunk in s.split(|&b| b == 0).enumerate() {
                if chunk.0 > 0 {
                    out.extend_from_slice(&[0x00, 0xFF]);
                }
                out.extend_from_slice(chunk.1);
            }
            out.extend_from_slice(&[0x00, 0x01]);
        }
    }
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
        Value::Str(_) => 0,
    }
}

fn uint_of(v: &Value) -> u64 {
    match v {
        Value::UInt(u) => *u,
        Value::Int(i) => u64::try_from(*i).unwrap_or(0),
        Value::Str(_) => 0,
    }
}

fn str_of(v: &Value) -> &[u8] {
    match v {
        Value::Str(s) => s,
        _ => &[],
    }
}

/// Sets `out` to `Value::Str(bytes)`, reusing its allocation when it already is a string.
#[inline]
pub fn set_str(out: &mut Value, bytes: &[u8]) {
    match out {
        Value::Str(s) => {
            s.clear();
            s.extend_from_slice(bytes);
        }
        _ => *out = Value::Str(bytes.to_vec()),
    }
}

fn take<'a>(input: &mut &'a [u8], n: usize, what: ColumnType) -> DecodeResult<&'a [u8]> {
    if input.len() < n {
        return err(format!("{what:?} needs {n} bytes, {} left", input.len()));
    }
    let (head, rest) = input.split_at(n);
    *input = rest;
    Ok(head)
}

/// The length of the key encoding of a `ty` value at the front of `input` (checked: a VARCHAR has its
/// terminator within its declared length).
pub fn key_value_len(ty: ColumnType, input: &[u8]) -> DecodeResult<usize> {
    let fixed = match ty {
        ColumnType::Int32 | ColumnType::UInt32 => 4,
        ColumnType::Int64 | ColumnType::UInt64 => 8,
        ColumnType::Char(n) => usize::from(n),
        ColumnType::VarChar(n) => {
            let mut i = 0;
            let mut decoded = 0usize;
            loop {
                let Some(&b) = input.get(i) else {
                    return err("VARCHAR key without terminator");
                };
                if b == 0 {
                    match input.get(i + 1) {
                        Some(0x01) => return Ok(i + 2),
                        Some(0xFF) => i += 2,
                        Some(x) => return err(format!("VARCHAR key escape 00 {x:02x}")),
                        None => return err("VARCHAR key ends inside an escape"),
                    }
                } else {
                    i += 1;
                }
                decoded += 1;
                if decoded > usize::from(n) {
                    return err(format!("VARCHAR key longer than its column ({n} bytes)"));
                }
            }
        }
    };
    if input.len() < fixed {
        return err(format!("{ty:?} needs {fixed} bytes, {} left", input.len()));
    }
    Ok(fixed)
}

/// Decodes the key encoding of a `ty` value from the front of `input` into `out`, advancing `input`.
pub fn decode_key_value(ty: ColumnType, input: &mut &[u8], out: &mut Value) -> DecodeResult<()> {
    match ty {
        ColumnType::Int32 => {
            let b = take(input, 4, ty)?;
            let u = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) ^ 0x8000_0000;
            *out = Value::Int(i64::from(u as i32));
        }
        ColumnType::Int64 => {
            let b = take(input, 8, ty)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            *out = Value::Int((u64::from_be_bytes(a) ^ 0x8000_0000_0000_0000) as i64);
        }
        ColumnType::UInt32 => {
            let b = take(input, 4, ty)?;
            *out = Value::UInt(u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])));
        }
        ColumnType::UInt64 => {
            let b = take(input, 8, ty)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            *out = Value::UInt(u64::from_be_bytes(a));
        }
        ColumnType::Char(n) => {
            let b = take(input, usize::from(n), ty)?;
            set_str(out, trim_pad(b));
        }
        ColumnType::VarChar(_) => {
            let len = key_value_len(ty, input)?;
            let b = take(input, len, ty)?;
            let body = &b[..len - 2];
            if !matches!(out, Value::Str(_)) {
                *out = Value::Str(Vec::new());
            }
            if let Value::Str(s) = out {
                s.clear();
                let mut i = 0;
                while i < body.len() {
                    s.push(body[i]);
                    // An escaped 0x00 is `00 FF` (key_value_len checked it): skip the FF.
                    i += if body[i] == 0 { 2 } else { 1 };
                }
            }
        }
    }
    Ok(())
}

/// Appends `v` as a LEB128 varint of at most 5 bytes.
#[inline]
pub fn put_varint32(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint32 from the front of `input`.
#[inline]
pub fn get_varint32(input: &mut &[u8]) -> DecodeResult<u32> {
    let mut v: u32 = 0;
    for i in 0..5 {
        let Some(&b) = input.get(i) else {
            return err("truncated varint");
        };
        if i == 4 && b > 0x0F {
            return err("varint32 overflows");
        }
        v |= u32::from(b & 0x7F) << (7 * i);
        if b < 0x80 {
            *input = &input[i + 1..];
            return Ok(v);
        }
    }
    err("varint32 longer than 5 bytes")
}

/// Appends the row-value encoding of `v`, a value of type `ty` (checked by [`check_value`] beforehand).
pub fn encode_row_field(ty: ColumnType, v: &Value, out: &mut Vec<u8>) {
    match ty {
        ColumnType::Int32 => out.extend_from_slice(&(int_of(v) as i32).to_le_bytes()),
        ColumnType::Int64 => out.extend_from_slice(&int_of(v).to_le_bytes()),
        ColumnType::UInt32 => out.extend_from_slice(&(uint_of(v) as u32).to_le_bytes()),
        ColumnType::UInt64 => out.extend_from_slice(&uint_of(v).to_le_bytes()),
        ColumnType::Char(n) | ColumnType::VarChar(n) => {
            let s = str_of(v);
            let s = &s[..s.len().min(usize::from(n))];
            let s = if matches!(ty, ColumnType::Char(_)) { trim_pad(s) } else { s };
            put_varint32(out, s.len() as u32);
            out.extend_from_slice(s);
        }
    }
}

/// Decodes one row-value field of type `ty` from the front of `input` into `out`, advancing `input`.
pub fn decode_row_field(ty: ColumnType, input: &mut &[u8], out: &mut Value) -> DecodeResult<()> {
    match ty {
        ColumnType::Int32 => {
            let b = take(input, 4, ty)?;
            *out = Value::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        }
        ColumnType::Int64 => {
            let b = take(input, 8, ty)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            *out = Value::Int(i64::from_le_bytes(a));
        }
        ColumnType::UInt32 => {
            let b = take(input, 4, ty)?;
            *out = Value::UInt(u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        }
        ColumnType::UInt64 => {
            let b = take(input, 8, ty)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            *out = Value::UInt(u64::from_le_bytes(a));
        }
        ColumnType::Char(n) | ColumnType::VarChar(n) => {
            let len = get_varint32(input)?;
            // Bounded by the column's size before any copy (the copy itself is bounded by the input).
            if len > u32::from(n) {
                return err(format!("string of {len} bytes in a {ty:?} column"));
            }
            let b = take(input, len as usize, ty)?;
            set_str(out, b);
        }
    }
    Ok(())
}

/// Appends the row value of `row`: every column not in the primary key (`is_pk[i]`), in column order.
pub fn encode_row_value(types: &[ColumnType], is_pk: &[bool], row: &[Value], out: &mut Vec<u8>) {
    for ((ty, pk), v) in types.iter().zip(is_pk).zip(row) {
        if !*pk {
            encode_row_field(*ty, v, out);
        }
    }
}

/// Decodes a row value into the non-key positions of `row` (which has one entry per column); the value must
/// end exactly after its last field.
pub fn decode_row_value(types: &[ColumnType], is_pk: &[bool], mut input: &[u8], row: &mut [Value]) -> DecodeResult<()> {
    for ((ty, pk), v) in types.iter().zip(is_pk).zip(row.iter_mut()) {
        if !*pk {
            decode_row_field(*ty, &mut input, v)?;
        }
    }
    if !input.is_empty() {
        return err(format!("{} bytes after the last field of the row value", input.len()));
    }
    Ok(())
}

/// The smallest key greater than every key starting with `prefix` (the prefix with its last non-0xFF byte
/// incremented and what follows removed); `None` when there is none (the prefix is all 0xFF).
pub fn prefix_successor(prefix: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    out.extend_from_slice(prefix);
    while let Some(last) = out.last_mut() {
        if *last == 0xFF {
            out.pop();
        } else {
            *last += 1;
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn grammar_matches_docs() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("encoding.rs"),
            include_str!("../../../../../docs/format/table.md"),
        );
    }

    fn key(ty: ColumnType, v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key_value(ty, v, &mut out);
        out
    }

    fn roundtrip_key(ty: ColumnType, v: &Value) -> Value {
        let k = key(ty, v);
        let mut input = &k[..];
        let mut out = Value::Int(0);
        decode_key_value(ty, &mut input, &mut out).expect("decodes");
        assert!(input.is_empty(), "{ty:?} left bytes");
        assert_eq!(key_value_len(ty, &k), Ok(k.len()));
        out
    }

    fn roundtrip_field(ty: ColumnType, v: &Value) -> Value {
        let mut k = Vec::new();
        encode_row_field(ty, v, &mut k);
        let mut input = &k[..];
        let mut out = Value::Int(0);
        decode_row_field(ty, &mut input, &mut out).expect("decodes");
        assert!(input.is_empty());
        out
    }

    #[test]
    fn known_encodings() {
        assert_eq!(key(ColumnType::Int32, &Value::Int(1)), [0x80, 0, 0, 1]);
        assert_eq!(key(ColumnType::Int32, &Value::Int(-1)), [0x7F, 0xFF, 0xFF, 0xFF]);
        assert_eq!(key(ColumnType::UInt32, &Value::UInt(258)), [0, 0, 1, 2]);
        assert_eq!(key(ColumnType::Int64, &Value::Int(i64::MIN)), [0; 8]);
        assert_eq!(key(ColumnType::Char(4), &Value::Str(b"ab".to_vec())), b"ab  ");
        assert_eq!(key(ColumnType::VarChar(9), &Value::Str(b"a\0b".to_vec())), [b'a', 0, 0xFF, b'b', 0, 1]);
        assert_eq!(key(ColumnType::VarChar(9), &Value::Str(Vec::new())), [0, 1]);
        let mut v = Vec::new();
        put_varint32(&mut v, 300);
        assert_eq!(v, [0xAC, 0x02]);
        let mut s = Vec::new();
        assert!(prefix_successor(&[1, 0xFF, 0xFF], &mut s));
        assert_eq!(s, [2]);
        assert!(!prefix_successor(&[0xFF], &mut s));
    }

    fn key_err(ty: ColumnType, bytes: &[u8]) -> DecodeError {
        let mut out = Value::Int(0);
        let r = decode_key_value(ty, &mut &bytes[..], &mut out);
        assert_eq!(key_value_len(ty, bytes).is_err(), r.is_err(), "{ty:?} {bytes:?}");
        r.expect_err("corrupt key column decoded")
    }

    fn field_err(ty: ColumnType, bytes: &[u8]) -> DecodeError {
        let mut out = Value::Int(0);
        decode_row_field(ty, &mut &bytes[..], &mut out).expect_err("corrupt row field decoded")
    }

    #[test]
    fn truncated_int_key() {
        key_err(ColumnType::Int32, &[0x80, 0, 1]);
        key_err(ColumnType::UInt64, &[0; 7]);
    }

    #[test]
    fn truncated_char_key() {
        key_err(ColumnType::Char(5), b"abcd");
    }

    #[test]
    fn varchar_key_without_terminator() {
        key_err(ColumnType::VarChar(5), b"abc");
        key_err(ColumnType::VarChar(5), b"abc\0");
    }

    #[test]
    fn varchar_key_bad_escape() {
        key_err(ColumnType::VarChar(5), &[b'a', 0, 7]);
    }

    #[test]
    fn varchar_key_longer_than_column() {
        key_err(ColumnType::VarChar(1), &[b'a', b'b', 0, 1]);
        key_err(ColumnType::VarChar(1), &[0, 0xFF, 0, 0xFF, 0, 1]);
    }

    #[test]
    fn missing_index_id() {
        assert!(decode_index_id(&[0, 0, 1]).is_err());
    }

    #[test]
    fn truncated_int_field() {
        field_err(ColumnType::Int64, &[1, 2, 3]);
    }

    #[test]
    fn string_length_over_column() {
        // 2^28 claimed: refused against the column's size before any copy or allocation.
        field_err(ColumnType::Char(10), &[0x80, 0x80, 0x80, 0x80, 0x01]);
        field_err(ColumnType::VarChar(3), &[4, b'a', b'b', b'c', b'd']);
    }

    #[test]
    fn truncated_string_field() {
        field_err(ColumnType::VarChar(10), &[5, b'a']);
        field_err(ColumnType::VarChar(10), &[]);
    }

    #[test]
    fn varint_overflow() {
        assert!(get_varint32(&mut &[0xFF, 0xFF, 0xFF, 0xFF, 0x1F][..]).is_err());
        assert!(get_varint32(&mut &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01][..]).is_err());
        assert!(get_varint32(&mut &[0x80][..]).is_err());
        assert_eq!(get_varint32(&mut &[0xFF, 0xFF, 0xFF, 0xFF, 0x0F][..]), Ok(u32::MAX));
    }

    #[test]
    fn bytes_after_row_value() {
        let types = [ColumnType::Int32, ColumnType::VarChar(4)];
        let mut row = vec![Value::Int(0); 2];
        assert!(decode_row_value(&types, &[true, false], &[1, b'a'], &mut row).is_ok());
        assert!(decode_row_value(&types, &[true, false], &[1, b'a', 0], &mut row).is_err());
    }

    #[test]
    fn values_that_do_not_fit_are_refused() {
        assert!(check_value(ColumnType::Int32, &Value::Int(1 << 40)).is_err());
        assert!(check_value(ColumnType::UInt32, &Value::UInt(1 << 40)).is_err());
        assert!(check_value(ColumnType::Char(2), &Value::Str(b"abc".to_vec())).is_err());
        assert!(check_value(ColumnType::UInt64, &Value::Int(1)).is_err());
        assert!(check_value(ColumnType::Int64, &Value::Str(Vec::new())).is_err());
        assert!(check_value(ColumnType::VarChar(3), &Value::Str(b"abc".to_vec())).is_ok());
    }

    fn types() -> impl Strategy<Value = ColumnType> {
        prop_oneof![
            Just(ColumnType::Int32),
            Just(ColumnType::UInt32),
            Just(ColumnType::Int64),
            Just(ColumnType::UInt64),
            (0u16..20).prop_map(ColumnType::Char),
            (0u16..20).prop_map(ColumnType::VarChar),
        ]
    }

    /// A value of `ty`, in canonical form (CHAR without trailing spaces).
    fn value_of(ty: ColumnType) -> BoxedStrategy<Value> {
        match ty {
            ColumnType::Int32 => any::<i32>().prop_map(|i| Value::Int(i64::from(i))).boxed(),
            ColumnType::Int64 => any::<i64>().prop_map(Value::Int).boxed(),
            ColumnType::UInt32 => any::<u32>().prop_map(|u| Value::UInt(u64::from(u))).boxed(),
            ColumnType::UInt64 => any::<u64>().prop_map(Value::UInt).boxed(),
            ColumnType::Char(n) => {
                proptest::collection::vec(prop_oneof![Just(0u8), Just(b' '), any::<u8>()], 0..=n as usize)
                    .prop_map(|s| Value::Str(trim_pad(&s).to_vec()))
                    .boxed()
            }
            ColumnType::VarChar(n) => {
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()], 0..=n as usize)
                    .prop_map(Value::Str)
                    .boxed()
            }
        }
    }

    fn typed_pair() -> impl Strategy<Value = (ColumnType, Value, Value)> {
        types().prop_flat_map(|ty| (Just(ty), value_of(ty), value_of(ty)))
    }

    /// The order the encodings promise: numbers by value, CHAR as space-padded bytes, VARCHAR as bytes.
    fn value_cmp(ty: ColumnType, a: &Value, b: &Value) -> std::cmp::Ordering {
        match (ty, a, b) {
            (ColumnType::Char(n), Value::Str(x), Value::Str(y)) => {
                let pad = |s: &[u8]| {
                    let mut v = s.to_vec();
                    v.resize(usize::from(n), b' ');
                    v
                };
                pad(x).cmp(&pad(y))
            }
            _ => a.cmp(b),
        }
    }

    proptest! {
        #[test]
        fn key_order_is_value_order((ty, a, b) in typed_pair()) {
            prop_assert_eq!(key(ty, &a).cmp(&key(ty, &b)), value_cmp(ty, &a, &b));
        }

        #[test]
        fn two_column_key_order((t1, a1, b1) in typed_pair(), (t2, a2, b2) in typed_pair()) {
            let mut ka = key(t1, &a1);
            ka.extend(key(t2, &a2));
            let mut kb = key(t1, &b1);
            kb.extend(key(t2, &b2));
            let want = value_cmp(t1, &a1, &b1).then(value_cmp(t2, &a2, &b2));
            prop_assert_eq!(ka.cmp(&kb), want);
        }

        #[test]
        fn decode_inverts_encode((ty, a, _b) in typed_pair()) {
            prop_assert_eq!(roundtrip_key(ty, &a), a.clone());
            prop_assert_eq!(roundtrip_field(ty, &a), a);
        }

        #[test]
        fn random_bytes_never_panic(ty in types(), bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut out = Value::Int(0);
            let _ = key_value_len(ty, &bytes);
            let _ = decode_key_value(ty, &mut &bytes[..], &mut out);
            let _ = decode_row_field(ty, &mut &bytes[..], &mut out);
            let types = [ty, ColumnType::VarChar(5), ColumnType::Int64];
            let mut row = vec![Value::Int(0); 3];
            let _ = decode_row_value(&types, &[false, false, true], &bytes, &mut row);
            let _ = decode_index_id(&bytes);
        }
    }
}
