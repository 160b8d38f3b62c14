//! Golden tests of universal picking: an LSM shape in (the `fixture` language of `picker`), the pick out.

use super::super::fixture::{parse, render};
use super::*;
use crate::compaction_style::{CompactionOptionsUniversal, CompactionStyle};

fn opts(u: CompactionOptionsUniversal) -> Options {
    Options {
        compaction_style: CompactionStyle::Universal,
        compaction_options_universal: u,
        level0_file_num_compaction_trigger: 4,
        target_file_size_base: 2 << 20,
        ..Options::default()
    }
}

/// `render`, plus the inputs of other levels, the reason and a dropped-only flag.
pub(in crate::picker) fn render_all(t: Option<&CompactionTask>) -> String {
    let Some(t) = t else { return "none".into() };
    let mut s = render(Some(t));
    if !t.more_inputs.is_empty() {
        let more: Vec<String> = t.more_inputs.iter().map(|(l, f)| format!("L{l}#{}", f.number)).collect();
        s.push_str(&format!(" more[{}]", more.join(" ")));
    }
    if t.drop_only {
        s.push_str(" drop");
    }
    s.push_str(&format!(" ({:?})", t.reason));
    s
}

fn golden(o: &Options, shape: &str, busy: &[u64], want: &str) {
    let v = parse(7, shape);
    let busy: HashSet<u64> = busy.iter().copied().collect();
    assert_eq!(render_all(pick(&v, o, &busy).as_ref()), want, "shape: {shape}");
}

#[test]
fn nothing_below_the_trigger() {
    let o = opts(Default::default());
    golden(&o, "L0: a-z@1 a-z@2 a-z@3", &[], "none");
    // Three L0 files and a level are four runs: due.
    assert_ne!(render_all(pick(&parse(7, "L0: a-z@4 a-z@5 a-z@6; L6: a-z@1"), &o, &HashSet::new()).as_ref()), "none");
    // Busy runs do not count towards the trigger.
    golden(&o, "L0: a-z@4 a-z@5 a-z@6; L6: a-z@1", &[1], "none");
}

#[test]
fn size_amplification_merges_everything_into_the_last_level() {
    let o = opts(Default::default());
    // 4M of newer runs over a 1M oldest run: 400% > 200%.
    golden(
        &o,
        "L6: a-z@1; L0: a-z@2 a-z@3 a-z@4 a-z@5",
        &[],
        "L0->L6 in[#5 #4 #3 #2] out[#1] bottom (UniversalSizeAmplification)",
    );
    // Under the limit (4M over 3M = 133%), size ratio merges them all anyway (3M <= 1.01 x 4M).
    golden(
        &o,
        "L6: a-z@1:3M; L0: a-z@2 a-z@3 a-z@4 a-z@5",
        &[],
        "L0->L6 in[#5 #4 #3 #2] out[#1] bottom (UniversalSizeRatio)",
    );
    // A busy run between the first idle one and the oldest blocks the rule.
    let o = opts(CompactionOptionsUniversal { max_size_amplification_percent: 50, ..Default::default() });
    golden(
        &o,
        "L6: a-z@1:100M; L0: a-z@2 a-z@3 a-z@4 a-z@5 a-z@6",
        &[3],
        "L0->L0 in[#6 #5 #4] out[] (UniversalSizeRatio)",
    );
}

#[test]
fn size_ratio_stops_at_a_much_larger_run_and_writes_above_it() {
    let o = opts(Default::default());
    // The 4 L0 files (4M) stop at L5 (20M): output just above L5.
    golden(
        &o,
        "L6: a-z@1:100M; L5: a-z@2:20M; L0: a-z@3 a-z@4 a-z@5 a-z@6",
        &[],
        "L0->L4 in[#6 #5 #4 #3] out[] (UniversalSizeRatio)",
    );
    // Runs of several levels: L0 x2 (2M), L3 (2M), L5 (4M) merge; L6 (100M) stops them; output L5.
    golden(
        &o,
        "L6: a-z@1:100M; L5: a-z@2:4M; L3: a-m@3:1M n-z@4:1M; L0: a-z@6 a-z@7",
        &[],
        "L0->L5 in[#6 #5] out[#2] more[L3#3 L3#4] (UniversalSizeRatio)",
    );
}

#[test]
fn size_ratio_percent_and_stop_styles() {
    // 1M, 2M, 3M, 40M newest first: with ratio 1 no run is within 101% of what precedes it.
    let shape = "L0: a-z@4:1M a-z@3:2M a-z@2:3M a-z@1:40M";
    golden(&opts(Default::default()), shape, &[], "none");
    // ratio 100: 1M -> 2M (<= 2M) -> total 3M -> 3M ok -> total 6M -> 40M stops.
    let o = opts(CompactionOptionsUniversal { size_ratio: 100, ..Default::default() });
    golden(&o, shape, &[], "L0->L0 in[#1 #2 #3] out[] (UniversalSizeRatio)");
    // SimilarSize compares with the last picked run only: 1M -> 2M -> 3M (<= 4M) -> 40M stops too.
    let o = opts(CompactionOptionsUniversal {
        size_ratio: 100,
        stop_style: CompactionStopStyle::SimilarSize,
        ..Default::default()
    });
    golden(&o, shape, &[], "L0->L0 in[#1 #2 #3] out[] (UniversalSizeRatio)");
    // ...but stops at a run much smaller than the last picked: 8M, then 1M (1M x 2 < 8M) is a new start.
    let shape = "L0: a-z@4:8M a-z@3:1M a-z@2:1M a-z@1:100M";
    golden(&o, shape, &[], "L0->L0 in[#2 #3] out[] (UniversalSizeRatio)");
}

#[test]
fn merge_widths() {
    let shape = "L6: a-z@1:100M; L0: a-z@2 a-z@3 a-z@4 a-z@5 a-z@6";
    let o = opts(CompactionOptionsUniversal { max_merge_width: 3, ..Default::default() });
    golden(&o, shape, &[], "L0->L0 in[#6 #5 #4] out[] (UniversalSizeRatio)");
    // min_merge_width 6 cannot be met by size ratio: 6 runs > trigger 4, so run count merges 3.
    let o = opts(CompactionOptionsUniversal { min_merge_width: 6, ..Default::default() });
    golden(&o, shape, &[], "none");
    let o = Options { level0_file_num_compaction_trigger: 2, ..o };
    let got = render_all(pick(&parse(7, shape), &o, &HashSet::new()).as_ref());
    assert_eq!(got, "none", "min_merge_width applies to the run-count rule too, as in RocksDB");
}

#[test]
fn run_count_ignores_size_ratio() {
    // Each run 4x the previous: size ratio never merges; 5 runs > trigger 4, so 2 are merged.
    let o = opts(Default::default());
    golden(
        &o,
        "L6: a-z@1:256M; L0: a-z@2:64M a-z@3:16M a-z@4:4M a-z@5:1M",
        &[],
        "L0->L0 in[#5 #4] out[] (UniversalSortedRunNum)",
    );
    // 6 runs: 3 merged, written to L0 above the next L0 run.
    golden(
        &o,
        "L6: a-z@1:1G; L0: a-z@2:256M a-z@3:64M a-z@4:16M a-z@5:4M a-z@6:1M",
        &[],
        "L0->L0 in[#6 #5 #4] out[] (UniversalSortedRunNum)",
    );
}

#[test]
fn busy_runs_are_skipped_and_never_crossed() {
    let o = opts(Default::default());
    // The newest run is busy (a running L0 -> L0 merge): the rest merge from the next idle run.
    golden(
        &o,
        "L6: a-z@1:100M; L0: a-z@2 a-z@3 a-z@4 a-z@5 a-z@6",
        &[6],
        "L0->L5 in[#5 #4 #3 #2] out[] (UniversalSizeRatio)",
    );
    // A busy run in the middle ends the candidate before it.
    golden(
        &o,
        "L6: a-z@1:100M; L0: a-z@2 a-z@3 a-z@4 a-z@5 a-z@6",
        &[4],
        "L0->L0 in[#6 #5] out[] (UniversalSizeRatio)",
    );
}

#[test]
fn trivial_move_when_nothing_overlaps() {
    let o = opts(CompactionOptionsUniversal { allow_trivial_move: true, ..Default::default() });
    golden(
        &o,
        "L0: a-b@4 c-d@3 e-f@2 g-h@1",
        &[],
        "L0->L6 in[#1 #2 #3 #4] out[] move bottom (UniversalSizeAmplification)",
    );
    golden(&o, "L0: a-b@4 c-d@3 e-f@2 b-h@1", &[], "L0->L6 in[#1 #2 #3 #4] out[] bottom (UniversalSizeAmplification)");
    // Written to L0 (above an older L0 run), disjoint files are merged: a move would change nothing.
    golden(
        &o,
        "L6: a-z@1:100M; L0: a-z@2:50M a-b@3 c-d@4 e-f@5 g-h@6",
        &[],
        "L0->L0 in[#6 #5 #4 #3] out[] (UniversalSizeRatio)",
    );
}

#[test]
fn output_files_are_cut_below_l0_only() {
    let o = opts(Default::default());
    let t = pick(&parse(7, "L0: a-z@4 a-z@3 a-z@2 a-z@1"), &o, &HashSet::new()).unwrap();
    assert_eq!(t.output_level, 6);
    assert_eq!(t.max_output_file_size, 2 << 20);
    let t = pick(&parse(7, "L6: a-z@1:100M; L0: a-z@2:50M a-z@3 a-z@4 a-z@5 a-z@6"), &o, &HashSet::new()).unwrap();
    assert_eq!((t.output_level, t.max_output_file_size), (0, u64::MAX));
}

#[test]
fn stall_count_is_the_sorted_runs() {
    let o = opts(Default::default());
    let v = parse(7, "L0: a-z@4 a-z@3; L2: a-b c-d; L6: a-z@1");
    assert_eq!(super::super::l0_delay_trigger_count(&v, &o), Some(4));
    let level = Options { compaction_style: CompactionStyle::Level, ..o.clone() };
    assert_eq!(super::super::l0_delay_trigger_count(&v, &level), Some(2));
    assert_eq!(super::super::pending_compaction_bytes(&v, &o), 0);
}

#[test]
fn manual_compaction_merges_everything_into_the_last_level() {
    let o = opts(CompactionOptionsUniversal { allow_trivial_move: true, ..Default::default() });
    let b = HashSet::new();
    let v = parse(7, "L0: a-b@4; L3: c-d@2; L6: e-f@1");
    assert_eq!(
        render_all(pick_manual(&v, &o, &b).as_ref()),
        "L0->L6 in[#1] out[#3] bottom more[L3#2] (ManualCompaction)"
    );
    // Already one run at the bottom: nothing to do, unless a filter wants to see every value.
    let v = parse(7, "L6: a-b c-d");
    assert_eq!(render_all(pick_manual(&v, &o, &b).as_ref()), "none");
    let ttl = Options { ttl: Some(crate::ttl::Ttl::new(10)), ..o.clone() };
    assert_eq!(render_all(pick_manual(&v, &ttl, &b).as_ref()), "L6->L6 in[#1 #2] out[] bottom (ManualCompaction)");
    // One run above the bottom is brought down.
    let v = parse(7, "L0: a-b");
    assert_eq!(render_all(pick_manual(&v, &o, &b).as_ref()), "L0->L6 in[#1] out[] bottom (ManualCompaction)");
    assert_eq!(render_all(pick_manual(&parse(7, "L0: a-b c-d"), &o, &[1].into()).as_ref()), "none");
    assert_eq!(render_all(pick_manual(&Version::new(7), &o, &b).as_ref()), "none");
}
