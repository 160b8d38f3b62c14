//! Compaction of a user key whose versions include a single deletion ([`crate::Db::single_delete`]).
//!
//! RocksDB's rules (`CompactionIterator::NextFromInput`), on one key's versions newest first. A single deletion
//! is examined even when a newer version of its stripe hides it, because it still has to meet its put:
//!
//! - the next version is in the same snapshot stripe and is another single deletion: the first is dropped
//!   (a contract violation, counted), the second is examined in turn;
//! - the next version is in the same stripe and is anything else: both are dropped (the put it deletes; a
//!   deletion or merge operand there is a violation, counted, and dropped all the same);
//! - the next version is in an older stripe (a snapshot lies between): the single deletion is kept;
//! - nothing older in the input: kept, unless the output is bottommost (nothing older exists anywhere).
//!   RocksDB additionally requires that no snapshot predates it; a tombstone with nothing below it hides
//!   nothing from any reader, so ShaleDB drops it as it drops a bottommost [`ValueKind::Deletion`].
//!
//! Other versions follow the usual rules: a stripe keeps its newest version, and after a pair was dropped
//! the rest of that stripe is hidden (dropped; a put or merge there is a violation, counted). Merge operands
//! combine with the version below them in their stripe ([`super::resolve_stripe`]), a single deletion counting
//! as "no value". With no transactions (no write-conflict snapshots), RocksDB's "optimization 3" never
//! applies.
//!
//! Violations (RocksDB's "undefined" results) are counted in `single_delete_mismatches`: two adjacent versions
//! where a single deletion meets a single deletion, a deletion or a merge operand, or a put meets a put below
//! it. They are not asserted: a database written by a violating application must still compact.

use super::{resolve_stripe, KeyVersion};
use crate::merge::MergeOperator;
use shaledb_format::ikey::ValueKind;

/// Violations of the contract among adjacent versions (newest first) of one key.
pub(crate) fn count_mismatches(versions: &[KeyVersion]) -> u64 {
    versions
        .windows(2)
        .filter(|w| {
            // A blob reference is a put here (a value kept in a blob file).
            (w[0].kind.is_value() && w[1].kind.is_value())
                || matches!(
                    (w[0].kind, w[1].kind),
                    (ValueKind::SingleDeletion, ValueKind::SingleDeletion | ValueKind::Deletion | ValueKind::Merge)
                        | (ValueKind::Deletion | ValueKind::Merge, ValueKind::SingleDeletion)
                )
        })
        .count() as u64
}

/// Resolves the versions of a key holding at least one single deletion (see the module documentation).
/// `versions` and the result are newest first.
pub(crate) fn resolve(
    user_key: &[u8],
    versions: &[KeyVersion],
    snapshots: &[u64],
    merge: Option<&dyn MergeOperator>,
    bottommost: bool,
) -> Vec<KeyVersion> {
    let stripe = |seq: u64| snapshots.partition_point(|&s| s < seq);
    let mut out: Vec<KeyVersion> = Vec::with_capacity(2);
    // The stripe of the last version examined (RocksDB's `current_user_key_snapshot_`).
    let mut last_stripe: Option<usize> = None;
    let mut i = 0;
    while let Some(v) = versions.get(i) {
        let s = stripe(v.seq);
        let next_same_stripe = versions.get(i + 1).filter(|n| stripe(n.seq) == s);
        if v.kind == ValueKind::SingleDeletion {
            last_stripe = Some(s);
            match next_same_stripe {
                Some(n) if n.kind == ValueKind::SingleDeletion => i += 1,
                Some(_) => i += 2,
                None if i + 1 == versions.len() && bottommost => i += 1,
                None => {
                    out.push(v.clone());
                    i += 1;
                }
            }
            continue;
        }
        if last_stripe == Some(s) {
            i += 1; // hidden by a newer version of the same stripe
            continue;
        }
        last_stripe = Some(s);
        if v.kind != ValueKind::Merge {
            out.push(v.clone());
            i += 1;
            continue;
        }
        // Merge operands of this stripe and the version below them in it, if any.
        let n_ops = versions[i..].iter().take_while(|o| o.kind == ValueKind::Merge && stripe(o.seq) == s).count();
        let base = versions.get(i + n_ops).filter(|b| stripe(b.seq) == s).map_or(0, |_| 1);
        let end = i + n_ops + base;
        resolve_stripe(user_key, &versions[i..end], end < versions.len(), merge, bottommost, &mut out);
        i = end;
    }
    if bottommost {
        while out.last().is_some_and(|v| v.kind.is_deletion()) {
            out.pop();
        }
    }
    out
}
