//! Golden tests of FIFO picking: a shape, creation times and a clock in, the pick out.

use super::super::fixture::parse;
use super::super::universal::tests::render_all;
use super::*;
use crate::compaction_style::{CompactionOptionsFifo, CompactionStyle};
use std::collections::HashMap;

const K: u64 = 1 << 10;

fn opts(max: u64, allow_compaction: bool, ttl: u64) -> Options {
    Options {
        compaction_style: CompactionStyle::Fifo,
        compaction_options_fifo: CompactionOptionsFifo {
            max_table_files_size: max,
            allow_compaction,
            ttl,
            ..Default::default()
        },
        level0_file_num_compaction_trigger: 4,
        ..Options::default()
    }
}

/// `times`: (file number, creation time); files not listed have none.
fn golden(o: &Options, shape: &str, times: &[(u64, u64)], now: u64, busy: &[u64], want: &str) {
    let v = parse(7, shape);
    let times: HashMap<u64, u64> = times.iter().copied().collect();
    let created = |f: &FileMeta| times.get(&f.number).copied();
    let busy: HashSet<u64> = busy.iter().copied().collect();
    assert_eq!(
        render_all(pick(&v, o, &busy, Ages { created: &created, now }, u64::MAX).as_ref()),
        want,
        "shape: {shape}"
    );
}

#[test]
fn size_limit_drops_the_oldest_files_until_the_rest_fits() {
    let o = opts(1000 * K, false, 0);
    golden(&o, "L0: a-z@1:400K a-z@2:400K a-z@3:400K", &[], 0, &[], "L0->L0 in[#1] out[] drop (FifoMaxSize)");
    golden(
        &o,
        "L0: a-z@1:400K a-z@2:400K a-z@3:400K a-z@4:400K",
        &[],
        0,
        &[],
        "L0->L0 in[#1 #2] out[] drop (FifoMaxSize)",
    );
    golden(&o, "L0: a-z@1:400K a-z@2:400K", &[], 0, &[], "none");
    // Exactly at the limit is within it.
    golden(&o, "L0: a-z@1:500K a-z@2:500K", &[], 0, &[], "none");
    // One FIFO job at a time.
    golden(&o, "L0: a-z@1:400K a-z@2:400K a-z@3:400K", &[], 0, &[3], "none");
}

#[test]
fn ttl_drops_expired_files_oldest_first() {
    let o = opts(1 << 30, false, 750);
    let shape = "L0: a-z@1 a-z@2 a-z@3";
    let times = [(1, 100), (2, 200), (3, 300)];
    // Cutoff 1000 - 750 = 250: #1 and #2 are expired, #3 is not.
    golden(&o, shape, &times, 1000, &[], "L0->L0 in[#1 #2] out[] drop (FifoTtl)");
    golden(&o, shape, &times, 1051, &[], "L0->L0 in[#1 #2 #3] out[] drop (FifoTtl)");
    golden(&o, shape, &times, 850, &[], "none");
    // A clock before the TTL's length: nothing is old enough.
    golden(&o, shape, &times, 500, &[], "none");
    // An unknown creation time stops the walk (RocksDB stops at a creation time of 0).
    golden(&o, shape, &[(2, 200), (3, 300)], 2000, &[], "none");
    golden(&o, shape, &[(1, 100), (3, 300)], 2000, &[], "L0->L0 in[#1] out[] drop (FifoTtl)");
    // Without a TTL, age does not matter.
    golden(&opts(1 << 30, false, 0), shape, &times, 1_000_000, &[], "none");
}

#[test]
fn ttl_gives_way_to_the_size_rule_when_not_enough() {
    // Only #1 is expired; dropping it leaves 1200K > 1000K, so the size rule drops #1 and #2.
    let o = opts(1000 * K, false, 100);
    golden(
        &o,
        "L0: a-z@1:400K a-z@2:400K a-z@3:400K a-z@4:400K",
        &[(1, 0), (2, 950), (3, 950), (4, 950)],
        1000,
        &[],
        "L0->L0 in[#1 #2] out[] drop (FifoMaxSize)",
    );
}

#[test]
fn levels_below_l0_are_dropped_first_smallest_keys_first() {
    // A database switched to FIFO from leveled compaction: L6 goes first, from its smallest keys.
    let o = opts(2000 * K, false, 0);
    golden(&o, "L6: a-c:1000K d-f:1000K; L0: a-z@5:1000K", &[], 0, &[], "L6->L6 in[#1] out[] drop (FifoMaxSize)");
    golden(&o, "L6: a-c:1000K d-f:500K; L0: a-z@5:500K", &[], 0, &[], "none");
}

#[test]
fn intra_l0_compaction_merges_small_files_when_allowed() {
    let o = opts(1 << 30, true, 0);
    let shape = "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5";
    golden(&o, shape, &[], 0, &[], "L0->L0 in[#5 #4 #3 #2 #1] out[] bottom (FifoReduceNumFiles)");
    // Fewer than level0_file_num_compaction_trigger files: nothing.
    golden(&o, "L0: a-z@1 a-z@2 a-z@3", &[], 0, &[], "none");
    golden(&opts(1 << 30, false, 0), shape, &[], 0, &[], "none");
    // Files past 1.1 x write_buffer_size per file removed are left alone.
    let small_buffer = Options { write_buffer_size: 512 << 10, ..o.clone() };
    golden(&small_buffer, shape, &[], 0, &[], "none");
    // The work per file removed must keep falling: a big newer file ends the run.
    golden(
        &o,
        "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5:8M a-z@6 a-z@7 a-z@8 a-z@9",
        &[],
        0,
        &[],
        "L0->L0 in[#9 #8 #7 #6] out[] (FifoReduceNumFiles)",
    );
    let t = pick(&parse(7, shape), &o, &HashSet::new(), Ages { created: &|_| None, now: 0 }, u64::MAX).unwrap();
    assert_eq!(t.max_output_file_size, u64::MAX, "one output file: an L0 file is one run");
}

#[test]
fn intra_l0_compaction_leaves_out_files_newer_than_a_memtable() {
    let o = opts(1 << 30, true, 0);
    let v = parse(7, "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5");
    let at = |earliest_mem_seq| {
        let t = pick(&v, &o, &HashSet::new(), Ages { created: &|_| None, now: 0 }, earliest_mem_seq);
        render_all(t.as_ref())
    };
    // A memtable whose entries start at 5: #5 (sequence 5, say an ingested file) stays out.
    assert_eq!(at(5), "L0->L0 in[#4 #3 #2 #1] out[] bottom (FifoReduceNumFiles)");
    // Starting at 4: three files left, under the trigger.
    assert_eq!(at(4), "none");
}

#[test]
fn no_stall_count_under_fifo() {
    let o = opts(1 << 30, false, 0);
    assert_eq!(super::super::l0_delay_trigger_count(&parse(7, "L0: a-z@1 a-z@2"), &o), None);
}
