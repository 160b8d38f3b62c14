//! Merge operators: read-modify-write without the read.
//!
//! A `merge(key, operand)` records the operand; reads and compactions combine the operands with whatever
//! value lies below them through the database's [`MergeOperator`]. Built-ins: [`UInt64Add`] (RocksDB's
//! `uint64add`), [`StringAppend`] (`stringappend`) and [`PutOperator`] (`put`).

use std::sync::Arc;

/// Combines merge operands. Implementations must be deterministic and associative in the way
/// `partial_merge` promises, because compaction may combine operands in any grouping.
pub trait MergeOperator: Send + Sync + std::fmt::Debug {
    /// The operator's name, used in error messages and `Debug` output; RocksDB's names for the built-ins. Each
    /// open records it in the database's OPTIONS file, and a later open with an operator of another name (or
    /// none) is refused (`Options::load_latest`, docs/format/options.md). Give each operator its own name.
    fn name(&self) -> &str;

    /// Combines `existing` (the value below the operands, if any) with `operands`, oldest first.
    /// `None` means the operands are invalid for this operator: the read fails with `Corruption`.
    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>>;

    /// Combines two adjacent operands (`older`, then `newer`) into one, when the operator can.
    /// Returning `None` keeps both operands. Default: never.
    fn partial_merge(&self, _key: &[u8], _older: &[u8], _newer: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// RocksDB's `uint64add`: values are 8-byte little-endian unsigned counters; operands are added (wrapping).
/// A missing or malformed existing value counts as 0, and a malformed operand is skipped, as RocksDB does.
#[derive(Debug, Default, Clone, Copy)]
pub struct UInt64Add;

fn decode_u64(b: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(b).ok().map(u64::from_le_bytes)
}

impl MergeOperator for UInt64Add {
    fn name(&self) -> &str {
        "uint64add"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut sum = existing.and_then(decode_u64).unwrap_or(0);
        for op in operands {
            if let Some(v) = decode_u64(op) {
                sum = sum.wrapping_add(v);
            }
        }
        Some(sum.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let a = decode_u64(older).unwrap_or(0);
        let b = decode_u64(newer).unwrap_or(0);
        Some(a.wrapping_add(b).to_le_bytes().to_vec())
    }
}

/// RocksDB's `stringappend`: operands are appended to the value, separated by `delimiter`.
#[derive(Debug, Clone)]
pub struct StringAppend {
    delimiter: Vec<u8>,
}

impl StringAppend {
    /// An append operator with the given delimiter (RocksDB's default is `,`).
    pub fn new(delimiter: &[u8]) -> StringAppend {
        StringAppend { delimiter: delimiter.to_vec() }
    }
}

impl Default for StringAppend {
    fn default() -> Self {
        StringAppend::new(b",")
    }
}

impl MergeOperator for StringAppend {
    fn name(&self) -> &str {
        "stringappend"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut out = existing.map(<[u8]>::to_vec);
        for op in operands {
            match &mut out {
                Some(v) => {
                    v.extend_from_slice(&self.delimiter);
                    v.extend_from_slice(op);
                }
                None => out = Some(op.to_vec()),
            }
        }
        Some(out.unwrap_or_default())
    }

    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let mut v = Vec::with_capacity(older.len() + self.delimiter.len() + newer.len());
        v.extend_from_slice(older);
        v.extend_from_slice(&self.delimiter);
        v.extend_from_slice(newer);
        Some(v)
    }
}

/// RocksDB's `put` operator: the newest operand wins (merge behaves like put).
#[derive(Debug, Default, Clone, Copy)]
pub struct PutOperator;

impl MergeOperator for PutOperator {
    fn name(&self) -> &str {
        "put"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        operands.last().copied().or(existing).map(<[u8]>::to_vec).or(Some(Vec::new()))
    }

    fn partial_merge(&self, _key: &[u8], _older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        Some(newer.to_vec())
    }
}

/// Looks up a built-in operator by its RocksDB name (`uint64add`, `stringappend`, `put`; also
/// `stringappend:<delimiter>`). Returns `None` for an unknown name.
pub fn builtin(name: &str) -> Option<Arc<dyn MergeOperator>> {
    match name {
        "uint64add" => Some(Arc::new(UInt64Add)),
        "stringappend" => Some(Arc::new(StringAppend::default())),
        "put" | "put_v1" => Some(Arc::new(PutOperator)),
        _ => name.strip_prefix("stringappend:").map(|d| Arc::new(StringAppend::new(d.as_bytes())) as _),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uint64add_sums_and_partial_merges() {
        let op = UInt64Add;
        let one = 1u64.to_le_bytes();
        let five = 5u64.to_le_bytes();
        let got = op.full_merge(b"k", Some(&five), &[&one, &one]).unwrap();
        assert_eq!(decode_u64(&got), Some(7));
        assert_eq!(decode_u64(&op.full_merge(b"k", None, &[&one]).unwrap()), Some(1));
        assert_eq!(decode_u64(&op.partial_merge(b"k", &five, &one).unwrap()), Some(6));
        // Malformed operands are skipped rather than failing the read, as in RocksDB.
        assert_eq!(decode_u64(&op.full_merge(b"k", Some(&five), &[b"xx"]).unwrap()), Some(5));
    }

    #[test]
    fn stringappend_joins_with_delimiter() {
        let op = StringAppend::new(b",");
        assert_eq!(op.full_merge(b"k", Some(b"a"), &[b"b", b"c"]).unwrap(), b"a,b,c");
        assert_eq!(op.full_merge(b"k", None, &[b"b"]).unwrap(), b"b");
        assert_eq!(op.partial_merge(b"k", b"x", b"y").unwrap(), b"x,y");
    }

    #[test]
    fn put_keeps_newest() {
        assert_eq!(PutOperator.full_merge(b"k", Some(b"a"), &[b"b", b"c"]).unwrap(), b"c");
        assert!(builtin("uint64add").is_some());
        assert_eq!(builtin("stringappend:|").unwrap().full_merge(b"k", Some(b"a"), &[b"b"]).unwrap(), b"a|b");
        assert!(builtin("nope").is_none());
    }
}
