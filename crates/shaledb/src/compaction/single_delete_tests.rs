//! RocksDB's compaction rules for single deletions, case by case (see `single_delete.rs`).

use super::single_delete::count_mismatches;
use super::tests::{resolve, ver};
use super::*;
use crate::merge::StringAppend;
use ValueKind::{Deletion as D, Merge as M, SingleDeletion as SD, Value as V};

#[test]
fn single_delete_meeting_its_put_drops_both_at_any_level() {
    let vs = || vec![ver(5, SD, ""), ver(3, V, "3")];
    assert_eq!(resolve(vs(), &[], None, false), "");
    assert_eq!(resolve(vs(), &[], None, true), "");
    // A snapshot newer than both changes nothing: they are in one stripe.
    assert_eq!(resolve(vs(), &[9], None, false), "");
    // A put after the pair survives alone.
    let vs = vec![ver(7, V, "7"), ver(5, SD, ""), ver(3, V, "3")];
    assert_eq!(resolve(vs, &[], None, false), "V7=7");
}

#[test]
fn single_delete_with_a_snapshot_between_is_kept() {
    // Snapshot 4 still sees put 3: the single deletion must stay above it, and the put below it.
    let vs = || vec![ver(5, SD, ""), ver(3, V, "3")];
    assert_eq!(resolve(vs(), &[4], None, false), "SD5= V3=3");
    assert_eq!(resolve(vs(), &[4], None, true), "SD5= V3=3");
    // Once the snapshot is released, the next compaction drops both.
    assert_eq!(resolve(vs(), &[], None, false), "");
}

#[test]
fn single_delete_without_its_put_in_the_input_is_kept_above_the_bottom() {
    // The put lives in a lower level: the single deletion must travel down to meet it.
    assert_eq!(resolve(vec![ver(5, SD, "")], &[], None, false), "SD5=");
    assert_eq!(resolve(vec![ver(5, SD, "")], &[], None, true), "");
    // Hidden by a newer put of its stripe, it is still kept: dropping it would let its put reappear once
    // the newer put is single-deleted in turn.
    let vs = vec![ver(7, V, "7"), ver(5, SD, "")];
    assert_eq!(resolve(vs.clone(), &[], None, false), "V7=7 SD5=");
    assert_eq!(resolve(vs, &[], None, true), "V7=7");
}

#[test]
fn single_delete_then_put_again_cycles() {
    // put 1, sd 2, put 3, sd 4, put 5: every pair annihilates, the last put stays.
    let vs = vec![ver(5, V, "5"), ver(4, SD, ""), ver(3, V, "3"), ver(2, SD, ""), ver(1, V, "1")];
    assert_eq!(resolve(vs.clone(), &[], None, false), "V5=5");
    assert_eq!(count_mismatches(&vs), 0);
    // With snapshot 3 the stripe (1..=3] keeps its newest, put 3; single deletion 4 stays above it.
    assert_eq!(resolve(vs, &[3], None, false), "V5=5 SD4= V3=3");
}

#[test]
fn two_single_deletes_in_a_row_drop_the_first() {
    let vs = vec![ver(6, SD, ""), ver(5, SD, ""), ver(3, V, "3")];
    assert_eq!(count_mismatches(&vs), 1);
    assert_eq!(resolve(vs, &[], None, false), "");
    let vs = vec![ver(6, SD, ""), ver(5, SD, "")];
    assert_eq!(resolve(vs, &[], None, false), "SD5=");
}

#[test]
fn single_delete_over_a_deletion_or_merge_is_counted_and_drops_both() {
    let vs = vec![ver(6, SD, ""), ver(5, D, ""), ver(3, V, "3")];
    assert_eq!(count_mismatches(&vs), 1);
    // The pair goes; put 3 is hidden in the same stripe (RocksDB's behaviour; the result is undefined).
    assert_eq!(resolve(vs, &[], None, false), "");
    let op = StringAppend::new(b",");
    let vs = vec![ver(6, SD, ""), ver(5, M, "b"), ver(4, V, "a")];
    assert_eq!(count_mismatches(&vs), 1);
    assert_eq!(resolve(vs, &[], Some(&op), false), "");
    // Two puts under a single deletion: one reappears-or-not is undefined; counted.
    let vs = vec![ver(6, SD, ""), ver(5, V, "5"), ver(4, V, "4")];
    assert_eq!(count_mismatches(&vs), 1);
    assert_eq!(resolve(vs, &[], None, false), "");
}

#[test]
fn merge_above_a_single_delete_treats_it_as_no_value() {
    let op = StringAppend::new(b",");
    let vs = vec![ver(7, M, "x"), ver(5, SD, ""), ver(3, V, "3")];
    assert_eq!(resolve(vs, &[], Some(&op), false), "V7=x");
}

#[test]
fn single_delete_counts_as_deletion_for_bottommost_trailing_tombstones() {
    // At the bottom, with a snapshot between: the put must stay for the snapshot, the tombstone above it too.
    let vs = vec![ver(5, SD, ""), ver(3, V, "3")];
    assert_eq!(resolve(vs, &[4], None, true), "SD5= V3=3");
    let vs = vec![ver(9, V, "9"), ver(5, SD, "")];
    assert_eq!(resolve(vs, &[6], None, true), "V9=9");
}
