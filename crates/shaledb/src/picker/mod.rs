//! Leveled compaction picking: a pure function of a [`Version`], the [`Options`] and the set of files that
//! running jobs hold. No I/O and no locks, so every decision is tested with text fixtures (see the tests).
//!
//! Policy, in RocksDB's terms:
//!
//! - **Targets.** Without `level_compaction_dynamic_level_bytes`, L1 holds `max_bytes_for_level_base` and
//!   each level below `max_bytes_for_level_multiplier` times more. With it, targets are derived from the
//!   size of the largest level upward; levels above the *base level* stay empty (target `u64::MAX`) and L0
//!   compacts straight into the base level ([`level_targets`]).
//! - **Scores.** L0: non-busy files / `level0_file_num_compaction_trigger`, or its bytes against the base
//!   level's fan-in when that is larger. Ln: non-busy bytes / target. The last level never has a score.
//! - **Choice.** The highest score >= 1 whose task touches no busy file wins. L0 takes its oldest file plus
//!   every L0 file overlapping it, transitively. Ln takes the file whose overlap with Ln+1 is smallest per
//!   byte of the file (RocksDB's default `kMinOverlappingRatio`: the least rewrite per byte pushed down);
//!   ties go to the file holding the oldest data. No compact pointer is kept.
//! - **Intra-L0.** When L0's compaction into the base level cannot start because a running job holds a file
//!   it needs, L0's newest free files may merge into one L0 file instead (`intra_l0`, RocksDB's rule), so
//!   the L0 file count that write stalls watch falls while that job runs.
//! - **Concurrency.** A task never includes a busy file, and no L0 compaction starts while another one runs
//!   (two jobs writing overlapping L0 data into the base level could invert the order of versions; an
//!   intra-L0 merge takes only files newer than those a running L0 job holds). So tasks that [`pick`]
//!   returns while others run are disjoint from them.

mod choose;
mod fifo;
mod intra_l0;
mod score;
mod universal;

use crate::compaction_style::CompactionStyle;
use crate::options::Options;
use crate::version::Version;
pub(crate) use choose::max_grandparent_overlap;
use choose::{build_task, clean_cut, pick_l0, pick_level, rewrite_task, sorted_overlap_range};
use score::scores_with;
pub(crate) use score::{level_targets, scores};
use shaledb_format::edit::FileMeta;
use std::collections::HashSet;
use std::sync::Arc;

/// Why a compaction was scheduled (RocksDB's `CompactionReason` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompactionReason {
    /// L0 holds too many files (or too many bytes for the base level's fan-in).
    LevelL0FilesNum,
    /// A level below L0 is over its size target.
    LevelMaxLevelSize,
    /// `compact_range`.
    ManualCompaction,
    /// Universal: the runs above the oldest exceed `max_size_amplification_percent` of it.
    UniversalSizeAmplification,
    /// Universal: runs of similar size (`size_ratio`).
    UniversalSizeRatio,
    /// Universal: more sorted runs than `level0_file_num_compaction_trigger`.
    UniversalSortedRunNum,
    /// FIFO: the tables exceed `max_table_files_size`.
    FifoMaxSize,
    /// FIFO: the oldest tables are older than `ttl`.
    FifoTtl,
    /// FIFO with `allow_compaction`: small L0 files merged.
    FifoReduceNumFiles,
    /// Forced blob garbage collection (`blob_garbage_collection_force_threshold`, `blob/gc.rs`).
    ForcedBlobGc,
}

/// One compaction to run: `inputs` (from `level`) and `output_inputs` (from `output_level`) are merged and
/// rewritten into `output_level`, or, for a `trivial_move`, the single input file is re-linked there.
#[derive(Clone, Debug)]
pub(crate) struct CompactionTask {
    /// Level the inputs come from.
    pub level: usize,
    /// Level the output goes to (the base level for L0 with dynamic level bytes, else `level + 1`).
    pub output_level: usize,
    /// Files of `level`; for L0 newest first, as in the version.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Files of `output_level` overlapping the inputs' range, sorted by key.
    pub output_inputs: Vec<Arc<FileMeta>>,
    /// Files of `output_level + 1` overlapping the whole range: outputs are cut to limit overlap with them.
    pub grandparents: Vec<Arc<FileMeta>>,
    /// Move `inputs[0]` to `output_level` by a version edit alone; nothing is read or written.
    pub trivial_move: bool,
    /// No level below `output_level` holds data in the task's range: tombstones can be dropped there.
    pub bottommost: bool,
    /// Score of `level` when picked (0 for manual compactions).
    pub score: f64,
    /// Why (for logs and tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub reason: CompactionReason,
    /// Size at which output files are cut.
    pub max_output_file_size: u64,
    /// Universal compaction's inputs from levels other than `level` and `output_level` (the sorted runs in
    /// between), with their level; empty for leveled compaction.
    pub more_inputs: Vec<(usize, Arc<FileMeta>)>,
    /// Delete the inputs and write nothing (FIFO's size and TTL rules).
    pub drop_only: bool,
}

impl CompactionTask {
    /// Every input file with its level: `inputs`, `more_inputs`, then `output_inputs`.
    pub(crate) fn all_inputs(&self) -> Vec<(usize, &Arc<FileMeta>)> {
        let mut all: Vec<(usize, &Arc<FileMeta>)> = self.inputs.iter().map(|f| (self.level, f)).collect();
        all.extend(self.more_inputs.iter().map(|(l, f)| (*l, f)));
        all.extend(self.output_inputs.iter().map(|f| (self.output_level, f)));
        all
    }
}

/// Reads a table's `creation_time` property for FIFO's TTL rule (`None`: unknown). The background threads
/// read it from the table cache; tests pass fixtures.
pub(crate) type CreationTime<'a> = &'a dyn Fn(&FileMeta) -> Option<u64>;

/// The next compaction under `o.compaction_style`: automatic, or for `compact_range` (`manual`; leveled
/// compaction has its own, level by level, and gets `None`): universal then merges every file into the last
/// level, FIFO runs its automatic pick once, as RocksDB does. `created` gives FIFO's TTL rule each table's
/// creation time (see [`CreationTime`]).
pub(crate) fn pick_auto(
    v: &Version,
    o: &Options,
    busy: &HashSet<u64>,
    created: CreationTime<'_>,
    manual: bool,
    earliest_mem_seq: u64,
) -> Option<CompactionTask> {
    let now = || o.compaction_options_fifo.clock.now_secs();
    let task = match (o.compaction_style, manual) {
        (CompactionStyle::Level, false) => pick(v, o, busy, earliest_mem_seq),
        (CompactionStyle::Level, true) => None,
        (CompactionStyle::Universal, false) => universal::pick(v, o, busy),
        (CompactionStyle::Universal, true) => universal::pick_manual(v, o, busy),
        (CompactionStyle::Fifo, _) => fifo::pick(v, o, busy, fifo::Ages { created, now: now() }, earliest_mem_seq),
    };
    task.map(|mut t| {
        if manual {
            t.reason = CompactionReason::ManualCompaction;
        }
        t
    })
}

/// RocksDB's `compaction-pending` property: a level scores >= 1 (leveled), or the style's picker has a task
/// (universal; FIFO by its size and intra-L0 rules, without reading creation times).
pub(crate) fn compaction_pending(v: &Version, o: &Options, busy: &HashSet<u64>) -> bool {
    match o.compaction_style {
        CompactionStyle::Level => scores(v, o, busy).iter().any(|(_, s)| *s >= 1.0),
        // Without the memtables' bound: FIFO's intra-L0 rule then sees every file as mergeable.
        CompactionStyle::Universal | CompactionStyle::Fifo => {
            pick_auto(v, o, busy, &|_| None, false, u64::MAX).is_some()
        }
    }
}

/// The file count the level-0 write stalls compare with `level0_slowdown_writes_trigger` and
/// `level0_stop_writes_trigger`, RocksDB's `l0_delay_trigger_count`: L0 files, plus under universal compaction
/// each non-empty level below (all sorted runs). `None` under FIFO, where RocksDB turns the two triggers off:
/// FIFO deletes files only by size and age, so a stop on the file count could never be lifted.
pub(crate) fn l0_delay_trigger_count(v: &Version, o: &Options) -> Option<usize> {
    match o.compaction_style {
        CompactionStyle::Level => Some(v.files(0).len()),
        CompactionStyle::Universal => Some(universal::sorted_run_count(v)),
        CompactionStyle::Fifo => None,
    }
}

/// RocksDB's estimate of the pending compaction bytes (only leveled compaction has one; 0 otherwise, as in
/// RocksDB's `EstimateCompactionBytesNeeded`).
pub(crate) fn pending_compaction_bytes(v: &Version, o: &Options) -> u64 {
    match o.compaction_style {
        CompactionStyle::Level => score::pending_compaction_bytes(v, o),
        CompactionStyle::Universal | CompactionStyle::Fifo => 0,
    }
}

/// The next automatic compaction, if any level scores >= 1 and a task avoiding `busy` files exists. When L0's
/// compaction into the base level cannot start, L0's newest files may merge among themselves (`intra_l0`);
/// `earliest_mem_seq` is a lower bound on the sequence numbers of the family's memtables' entries.
pub(crate) fn pick(v: &Version, o: &Options, busy: &HashSet<u64>, earliest_mem_seq: u64) -> Option<CompactionTask> {
    let t = level_targets(v, o);
    for (level, score) in scores_with(v, o, busy, &t) {
        if score < 1.0 {
            break;
        }
        let task = if level == 0 {
            pick_l0(v, o, busy, &t).or_else(|| intra_l0::pick_leveled(v, o, busy, earliest_mem_seq))
        } else {
            pick_level(v, o, level, busy)
        };
        if let Some(mut task) = task {
            task.score = score;
            return Some(task);
        }
    }
    None
}

/// The compaction of `level`'s files overlapping `[begin, end]` (inclusive user keys; `None` = unbounded)
/// into the next level (the base level for L0), for `compact_range`, called level by level from 0 down.
///
/// Returns `None` when the range holds no file at `level`, when `level` is the last level (RocksDB's default
/// `kIfHaveCompactionFilter` skips the bottommost level: compactions into it have already dropped what they
/// could), or when an involved file is busy; the caller tells the last case apart by checking
/// `v.overlapping_files(level, begin, end)` and retries once running jobs finish.
pub(crate) fn pick_manual(
    v: &Version,
    o: &Options,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
    busy: &HashSet<u64>,
) -> Option<CompactionTask> {
    let n = v.num_levels();
    if n < 2 || level >= n - 1 {
        return None;
    }
    let t = level_targets(v, o);
    let output_level = if level == 0 { t.base_level.max(1) } else { level + 1 };
    if level == 0 && v.files(0).iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    let inputs = if level == 0 {
        v.overlapping_files(0, begin, end)
    } else {
        let files = v.files(level);
        let (i, j) = sorted_overlap_range(files, begin, end);
        let (i, j) = clean_cut(files, i, j);
        files.get(i..j).map(<[_]>::to_vec).unwrap_or_default()
    };
    if inputs.is_empty() || inputs.iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    let mut task = build_task(v, o, level, output_level, inputs, busy, CompactionReason::ManualCompaction)?;
    // compact_range is often called to purge tombstones: moving a file holding some into the bottom level
    // would keep them forever, so rewrite it instead.
    if task.trivial_move && task.bottommost && task.inputs.iter().any(|f| f.num_deletions > 0) {
        task.trivial_move = false;
    }
    // Nor is a manual compaction with a compaction filter (or TTL mode's) a move: it is called to run the
    // filter (RocksDB's `Compaction::IsTrivialMove` makes the same exception).
    if o.compaction_filter.is_some() || o.ttl.is_some() {
        task.trivial_move = false;
    }
    Some(task)
}

/// The files of the last non-empty level (below L0) overlapping `[begin, end]`, rewritten in place: what
/// `compact_range` runs first when a compaction filter or TTL mode is set, so that values already at the bottom
/// are filtered too (RocksDB's default `BottommostLevelCompaction::kIfHaveCompactionFilter`). `None` when the
/// database is empty or all in L0, nothing overlaps, or a file is busy.
pub(crate) fn pick_bottom_rewrite(
    v: &Version,
    o: &Options,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
    busy: &HashSet<u64>,
) -> Option<CompactionTask> {
    let level = v.last_nonempty_level().filter(|&l| l > 0)?;
    let files = v.files(level);
    let (i, j) = sorted_overlap_range(files, begin, end);
    let (i, j) = clean_cut(files, i, j);
    let inputs = files.get(i..j).map(<[_]>::to_vec).unwrap_or_default();
    if inputs.is_empty() || inputs.iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    rewrite_task(v, o, level, inputs, CompactionReason::ManualCompaction)
}

#[cfg(test)]
pub(crate) mod fixture {
    //! A small text language for LSM shapes, shared by the picker's golden tests:
    //!
    //! ```text
    //! shape := level (';' level)*          ; newlines work as ';' too
    //! level := 'L' digit+ ':' file*
    //! file  := ['#' num] lo '-' hi ['@' seq] [':' size]
    //! size  := digits ['K' | 'M' | 'G']     ; default 1M
    //! ```
    //!
    //! Files are numbered in order of appearance unless `#num` is given; `@seq` is the file's largest
    //! sequence number (default: its number). L0 is sorted newest first, other levels by key.

    use super::*;
    use shaledb_format::ikey::{make_internal_key, ValueKind};

    fn parse_size(s: &str) -> u64 {
        let (digits, mult) = match s.as_bytes().last() {
            Some(b'K') => (&s[..s.len() - 1], 1u64 << 10),
            Some(b'M') => (&s[..s.len() - 1], 1 << 20),
            Some(b'G') => (&s[..s.len() - 1], 1 << 30),
            _ => (s, 1),
        };
        digits.parse::<u64>().unwrap_or_else(|_| panic!("bad size {s:?}")) * mult
    }

    /// Parses a shape into a version of `num_levels` levels. Panics on a malformed fixture (tests only).
    pub(crate) fn parse(num_levels: usize, text: &str) -> Version {
        let mut v = Version::new(num_levels);
        let mut next_number = 1;
        for part in text.split([';', '\n']).map(str::trim).filter(|p| !p.is_empty()) {
            let (name, files) = part.split_once(':').unwrap_or_else(|| panic!("no ':' in {part:?}"));
            let level: usize = name.trim().trim_start_matches('L').parse().expect("level number");
            for tok in files.split_whitespace() {
                let (tok, size) = match tok.split_once(':') {
                    Some((t, s)) => (t, parse_size(s)),
                    None => (tok, 1 << 20),
                };
                let (number, tok) = match tok.strip_prefix('#') {
                    Some(rest) => {
                        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                        (rest[..end].parse::<u64>().expect("file number"), &rest[end..])
                    }
                    None => (next_number, tok),
                };
                next_number = next_number.max(number + 1);
                let (range, seq) = match tok.split_once('@') {
                    Some((r, s)) => (r, s.parse::<u64>().expect("seq")),
                    None => (tok, number),
                };
                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                v.levels[level].push(Arc::new(FileMeta {
                    number,
                    file_size: size,
                    smallest: make_internal_key(lo.as_bytes(), seq, ValueKind::Value),
                    largest: make_internal_key(hi.as_bytes(), seq, ValueKind::Value),
                    smallest_seq: seq,
                    largest_seq: seq,
                    num_entries: 1,
                    num_deletions: 0,
                    num_range_deletions: 0,
                }));
            }
        }
        v.levels[0].sort_by(|a, b| b.largest_seq.cmp(&a.largest_seq).then(b.number.cmp(&a.number)));
        for l in v.levels.iter_mut().skip(1) {
            l.sort_by(|a, b| a.smallest_user_key().cmp(b.smallest_user_key()));
        }
        v
    }

    fn names(files: &[Arc<FileMeta>]) -> String {
        files.iter().map(|f| format!("#{}", f.number)).collect::<Vec<_>>().join(" ")
    }

    /// One-line rendering of a pick, for golden comparisons.
    pub(crate) fn render(task: Option<&CompactionTask>) -> String {
        let Some(t) = task else { return "none".into() };
        let mut s =
            format!("L{}->L{} in[{}] out[{}]", t.level, t.output_level, names(&t.inputs), names(&t.output_inputs));
        if !t.grandparents.is_empty() {
            s.push_str(&format!(" gp[{}]", names(&t.grandparents)));
        }
        if t.trivial_move {
            s.push_str(" move");
        }
        if t.bottommost {
            s.push_str(" bottom");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{parse, render};
    use super::*;

    const MB: u64 = 1 << 20;

    fn opts() -> Options {
        Options {
            level0_file_num_compaction_trigger: 4,
            max_bytes_for_level_base: 10 * MB,
            max_bytes_for_level_multiplier: 10.0,
            target_file_size_base: 2 * MB,
            level_compaction_dynamic_level_bytes: false,
            ..Options::default()
        }
    }

    fn busy(nums: &[u64]) -> HashSet<u64> {
        nums.iter().copied().collect()
    }

    fn golden(num_levels: usize, o: &Options, shape: &str, busy_files: &[u64], want: &str) {
        let v = parse(num_levels, shape);
        let got = render(pick(&v, o, &busy(busy_files), u64::MAX).as_ref());
        assert_eq!(got, want, "shape: {shape}");
    }

    #[test]
    fn fixture_parses_and_orders() {
        let v = parse(3, "L0: a-c@5 b-f@3 #9x-z@7:4K; L1: c-d a-b:2M");
        let l0: Vec<u64> = v.files(0).iter().map(|f| f.number).collect();
        assert_eq!(l0, vec![9, 1, 2]);
        assert_eq!(v.files(0)[0].file_size, 4 << 10);
        let l1: Vec<&[u8]> = v.files(1).iter().map(|f| f.smallest_user_key()).collect();
        assert_eq!(l1, vec![&b"a"[..], &b"c"[..]]);
        assert_eq!(v.files(1)[0].number, 11);
        assert_eq!(v.files(1)[0].file_size, 2 * MB);
    }

    #[test]
    fn nothing_to_do_below_trigger() {
        golden(4, &opts(), "L0: a-c b-d c-e; L1: a-z", &[], "none");
        golden(4, &opts(), "", &[], "none");
    }

    #[test]
    fn l0_takes_oldest_file_and_its_transitive_overlaps() {
        // #1 is oldest; it overlaps #2, which overlaps #3; #4 stands apart.
        golden(
            4,
            &opts(),
            "L0: a-b@1 b-d@2 d-f@3 x-z@4; L1: a-c e-g m-n; L2: a-z:5M",
            &[],
            "L0->L1 in[#3 #2 #1] out[#5 #6] gp[#8]",
        );
    }

    #[test]
    fn l0_single_file_without_overlap_is_trivially_moved() {
        golden(4, &opts(), "L0: a-b@1 c-d@2 e-f@3 g-h@4; L1: x-z", &[], "L0->L1 in[#1] out[] move bottom");
    }

    #[test]
    fn l0_waits_while_another_l0_job_runs() {
        // 5 files: under trigger + 2 (6), so no intra-L0 merge either.
        golden(4, &opts(), "L0: a-b@1 c-d@2 e-f@3 g-h@4 i-j@5", &[1], "none");
    }

    #[test]
    fn intra_l0_merges_the_newest_free_files_while_l0_compaction_runs() {
        // #1 is held by the L0 job: the newest five, down to it, become one L0 file (not bottommost: #1 and
        // L1 hold older data in the range).
        golden(4, &opts(), "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5 a-z@6; L1: a-z", &[1], "L0->L0 in[#6 #5 #4 #3 #2] out[]");
        // Also when the base level's compaction holds the file L0's job needs: all of L0 then.
        golden(
            4,
            &opts(),
            "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5 a-z@6; L1: a-z",
            &[7],
            "L0->L0 in[#6 #5 #4 #3 #2 #1] out[]",
        );
        let t = pick(&parse(4, "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5 a-z@6"), &opts(), &busy(&[1]), u64::MAX).unwrap();
        assert_eq!(t.reason, CompactionReason::LevelL0FilesNum);
        assert_eq!(t.max_output_file_size, u64::MAX, "one L0 file");
    }

    #[test]
    fn intra_l0_span_limits() {
        let o = opts();
        // Fewer than 4 free files at the newest end: the span stops at the busy #4.
        golden(4, &o, "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5 a-z@6 a-z@7", &[1, 4], "none");
        // The newest file busy: nothing.
        golden(4, &o, "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5 a-z@6 a-z@7", &[1, 7], "none");
        // Bytes rewritten per file removed would rise with the 100M file: it stays out.
        golden(4, &o, "L0: a-z@1 a-z@2:100M a-z@3 a-z@4 a-z@5 a-z@6 a-z@7", &[1], "L0->L0 in[#7 #6 #5 #4 #3] out[]");
        // 25 target file sizes (50M) at most: two 20M files already reach 40M, a third passes it.
        golden(4, &o, "L0: a-z@1 a-z@2:20M a-z@3:20M a-z@4:20M a-z@5:20M a-z@6:20M", &[1], "none");
    }

    #[test]
    fn intra_l0_leaves_out_files_newer_than_a_memtable() {
        // #7 (sequence 9, an ingested file) is newer than a memtable starting at 8: merged with older files, it
        // would put their versions above the memtable's once flushed. The span starts below it.
        let shape = "L0: a-z@1 a-z@2 a-z@3 a-z@4 a-z@5 a-z@6 m-m@9; L1: a-z";
        let v = parse(4, shape);
        let got = render(pick(&v, &opts(), &busy(&[1]), 8).as_ref());
        assert_eq!(got, "L0->L0 in[#6 #5 #4 #3 #2] out[]");
        // A memtable older than every file: nothing can be merged.
        assert_eq!(render(pick(&v, &opts(), &busy(&[1]), 1).as_ref()), "none");
        // Skipped files that are busy stop the pick.
        assert_eq!(render(pick(&v, &opts(), &busy(&[1, 7]), 8).as_ref()), "none");
    }

    #[test]
    fn l0_skips_when_output_file_busy() {
        golden(4, &opts(), "L0: a-c@1 a-c@2 a-c@3 a-c@4; L1: #10b-b", &[10], "none");
    }

    #[test]
    fn ln_picks_smallest_overlap_ratio() {
        // L1 is at 15M of 10M. #1 overlaps 8M below, #2 overlaps 1M, #3 20M.
        golden(4, &opts(), "L1: a-c:5M e-g:5M m-p:5M; L2: a-b:8M e-f:1M m-n:20M", &[], "L1->L2 in[#2] out[#5] bottom");
        // Overlapping nothing below is cheapest of all; the grandparents do not count.
        golden(
            4,
            &opts(),
            "L1: a-c:5M e-g:5M m-p:5M; L2: a-b:8M e-f:1M; L3: m-p:100M",
            &[],
            "L1->L2 in[#3] out[] gp[#6]",
        );
    }

    #[test]
    fn ln_trivial_move_when_nothing_below_and_small_grandparent_overlap() {
        golden(4, &opts(), "L1: a-c:5M e-g:6M; L2: a-b:8M e-f:12M; L3: x-y", &[], "L1->L2 in[#1] out[#3] bottom");
        golden(4, &opts(), "L1: a-c:5M e-g:6M; L2: x-y:1M", &[], "L1->L2 in[#1] out[] move bottom");
        // Too much grandparent overlap (> 10 x 2M): rewrite so outputs get cut at grandparent boundaries.
        golden(4, &opts(), "L1: a-c:11M; L2: x-y:1M; L3: a-b:25M", &[], "L1->L2 in[#1] out[] gp[#3]");
    }

    #[test]
    fn ln_skips_busy_files_so_disjoint_jobs_run_together() {
        // #2 is cheapest but its L2 overlap #5 is busy: fall back to the next candidate.
        golden(4, &opts(), "L1: a-c:5M e-g:5M m-p:5M; L2: a-b:8M e-f:1M m-n:3M", &[5], "L1->L2 in[#3] out[#6] bottom");
        golden(4, &opts(), "L1: a-c:11M; L2: a-b", &[1], "none");
    }

    #[test]
    fn ln_inputs_widen_when_free_and_keep_clean_user_key_cuts() {
        // L2 file #4 spans both L1 files: both are taken since that adds no L2 file.
        golden(4, &opts(), "L1: a-c:6M d-f:6M; L2: a-z:1M", &[], "L1->L2 in[#1 #2] out[#3] bottom");
        // L1 files sharing user key "c" at their boundary must move together.
        golden(4, &opts(), "L1: a-c:6M c-e:6M; L2: x-z:1M", &[], "L1->L2 in[#1 #2] out[] bottom");
    }

    #[test]
    fn bottommost_only_when_nothing_below_overlaps() {
        golden(4, &opts(), "L1: a-c:11M; L2: a-a:1M; L3: b-b", &[], "L1->L2 in[#1] out[#2] gp[#3]");
        golden(4, &opts(), "L1: a-c:11M; L2: a-a:1M; L3: x-y", &[], "L1->L2 in[#1] out[#2] bottom");
    }

    #[test]
    fn highest_score_wins() {
        // L0 at 4/4 = 1.0, L1 at 25M/10M = 2.5.
        golden(4, &opts(), "L0: a-a@1 a-a@2 a-a@3 a-a@4; L1: m-n:25M", &[], "L1->L2 in[#5] out[] move bottom");
        // If L1 is blocked, L0 is tried next.
        golden(
            4,
            &opts(),
            "L0: a-a@1 a-a@2 a-a@3 a-a@4; L1: m-n:25M; L2: m-m",
            &[6],
            "L0->L1 in[#4 #3 #2 #1] out[] bottom",
        );
    }

    #[test]
    fn scores_by_count_and_bytes() {
        let o = opts();
        let v = parse(4, "L0: a-a@1 a-a@2; L1: a-b:5M; L2: a-b:200M");
        let s = scores(&v, &o, &HashSet::new());
        assert_eq!(s, vec![(2, 2.0), (0, 0.5), (1, 0.5)]);
        // Busy files do not count.
        let s = scores(&v, &o, &busy(&[1]));
        assert!(s.contains(&(0, 0.25)));
        // Big L0 files score by bytes against max_bytes_for_level_base.
        let v = parse(4, "L0: a-a@1:30M");
        assert_eq!(scores(&v, &o, &HashSet::new())[0], (0, 3.0));
    }

    #[test]
    fn static_targets() {
        let v = parse(4, "L3: a-b");
        let t = level_targets(&v, &opts());
        assert_eq!(t.base_level, 1);
        assert_eq!(t.targets, vec![0, 10 * MB, 100 * MB, 1000 * MB]);
    }

    fn dyn_opts() -> Options {
        Options {
            level_compaction_dynamic_level_bytes: true,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10.0,
            num_levels: 7,
            ..Options::default()
        }
    }

    fn with_last_level(bytes: u64) -> Version {
        let mut v = Version::new(7);
        let mut f = (*parse(7, "L6: a-z").files(6)[0]).clone();
        f.file_size = bytes;
        v.levels[6].push(Arc::new(f));
        v
    }

    #[test]
    fn dynamic_targets_empty_db_compacts_l0_into_last_level() {
        let t = level_targets(&Version::new(7), &dyn_opts());
        assert_eq!(t.base_level, 6);
        assert!(t.targets[1..].iter().all(|&x| x == u64::MAX));
    }

    #[test]
    fn dynamic_targets_small_db_uses_last_level_as_base() {
        // 1 MB in the last level: below base/multiplier, so the base is the last level itself, and no level
        // target falls below max_bytes_for_level_base.
        let t = level_targets(&with_last_level(1_000_000), &dyn_opts());
        assert_eq!(t.base_level, 6);
        assert_eq!(t.targets[6], 256 << 20);
        assert_eq!(t.targets[1], u64::MAX);
        // 100 MB: between base/multiplier and base, still the last level.
        let t = level_targets(&with_last_level(100_000_000), &dyn_opts());
        assert_eq!(t.base_level, 6);
    }

    #[test]
    fn dynamic_targets_large_db_match_rocksdb_documentation() {
        // RocksDB's wiki: with multiplier 10 and 276 GB in the last level, targets are 276 GB, 27.6 GB,
        // 2.76 GB, 276 MB upward, and the level whose target would drop under max_bytes_for_level_base /
        // multiplier.. max_bytes_for_level_base is the base level; levels above it are empty.
        let t = level_targets(&with_last_level(276_000_000_000), &dyn_opts());
        assert_eq!(t.base_level, 2);
        assert_eq!(t.targets[1], u64::MAX);
        assert_eq!(t.targets[2], 256 << 20); // 27.6 MB raised to max_bytes_for_level_base
        assert_eq!(t.targets[3], 276_000_000);
        assert_eq!(t.targets[4], 2_760_000_000);
        assert_eq!(t.targets[5], 27_600_000_000);
        assert_eq!(t.targets[6], 276_000_000_000);
        // 2 GB: L5 would be 200 MB <= 256 MB, so L5 is the base.
        let t = level_targets(&with_last_level(2_000_000_000), &dyn_opts());
        assert_eq!(t.base_level, 5);
        assert_eq!(t.targets[5], 256 << 20);
        assert_eq!(t.targets[6], 2_000_000_000);
    }

    #[test]
    fn dynamic_l0_goes_to_base_level() {
        let mut o = dyn_opts();
        o.level0_file_num_compaction_trigger = 2;
        let v = parse(7, "L0: a-c@1 b-d@2; L6: a-z:2G");
        let task = pick(&v, &o, &HashSet::new(), u64::MAX).unwrap();
        assert_eq!(task.output_level, 5);
        assert_eq!(task.reason, CompactionReason::LevelL0FilesNum);
        assert!(!task.bottommost);
        assert_eq!(render(Some(&task)), "L0->L5 in[#2 #1] out[] gp[#3]");
    }

    #[test]
    fn dynamic_backlogged_l0_stretches_the_base_target() {
        // L0 holds more than max_bytes_for_level_base: the base target becomes L0's size.
        let mut v = with_last_level(276_000_000_000);
        v.levels[0] = parse(7, "L0: a-b@1:300M").files(0).to_vec();
        let t = level_targets(&v, &dyn_opts());
        assert_eq!(t.base_level, 2);
        assert_eq!(t.targets[2], 300 << 20);
        // The remaining growth, 276 GB / 300 MiB, spread over L3..L6.
        assert!((t.multiplier - 5.443).abs() < 0.001, "{}", t.multiplier);
        assert_eq!(t.targets[3], ((300u64 << 20) as f64 * t.multiplier) as u64);
    }

    #[test]
    fn manual_compaction_level_by_level() {
        let o = opts();
        let v = parse(4, "L0: a-b@1 x-y@2; L1: a-c c-d:1K e-f; L2: d-d; L3: a-z");
        let b = HashSet::new();
        assert_eq!(
            render(pick_manual(&v, &o, 0, Some(b"a"), Some(b"b"), &b).as_ref()),
            "L0->L1 in[#1] out[#3 #4] gp[#6]"
        );
        assert_eq!(render(pick_manual(&v, &o, 0, None, None, &b).as_ref()), "L0->L1 in[#2 #1] out[#3 #4 #5] gp[#6]");
        // The cut at "c" is clean: both files holding "c" go together.
        assert_eq!(
            render(pick_manual(&v, &o, 1, Some(b"b"), Some(b"b"), &b).as_ref()),
            "L1->L2 in[#3 #4] out[#6] gp[#7]"
        );
        assert_eq!(render(pick_manual(&v, &o, 2, None, None, &b).as_ref()), "L2->L3 in[#6] out[#7] bottom");
        assert_eq!(render(pick_manual(&v, &o, 3, None, None, &b).as_ref()), "none");
        assert_eq!(render(pick_manual(&v, &o, 1, Some(b"m"), Some(b"n"), &b).as_ref()), "none");
        assert_eq!(render(pick_manual(&v, &o, 1, None, None, &busy(&[6])).as_ref()), "none");
    }

    #[test]
    fn bottom_rewrite_takes_the_last_level_in_place_with_clean_cuts() {
        let o = opts();
        let v = parse(4, "L0: a-b@1; L2: a-c c-d e-f");
        let b = HashSet::new();
        assert_eq!(render(pick_bottom_rewrite(&v, &o, None, None, &b).as_ref()), "L2->L2 in[#2 #3 #4] out[] bottom");
        // "c" straddles two files: both go.
        assert_eq!(
            render(pick_bottom_rewrite(&v, &o, Some(b"b"), Some(b"b"), &b).as_ref()),
            "L2->L2 in[#2 #3] out[] bottom"
        );
        assert_eq!(render(pick_bottom_rewrite(&v, &o, Some(b"x"), None, &b).as_ref()), "none");
        assert_eq!(render(pick_bottom_rewrite(&v, &o, None, None, &busy(&[3])).as_ref()), "none");
        // Everything in L0: nothing to rewrite in place.
        assert_eq!(render(pick_bottom_rewrite(&parse(4, "L0: a-b"), &o, None, None, &b).as_ref()), "none");
        // A task is never a move, whatever the options.
        assert!(pick_bottom_rewrite(&v, &o, None, None, &b).is_some_and(|t| !t.trivial_move));
    }

    #[test]
    fn manual_move_into_bottom_rewrites_files_with_tombstones() {
        let o = opts();
        let mut v = parse(3, "L1: a-b");
        let mut f = (*v.levels[1][0]).clone();
        f.num_deletions = 1;
        v.levels[1][0] = Arc::new(f);
        let t = pick_manual(&v, &o, 1, None, None, &HashSet::new()).unwrap();
        assert!(!t.trivial_move && t.bottommost);
        assert_eq!(t.reason, CompactionReason::ManualCompaction);
    }

    #[test]
    fn pending_bytes_estimate() {
        let o = opts();
        // Below every trigger: nothing pending.
        assert_eq!(pending_compaction_bytes(&parse(4, "L0: a-a@1; L1: a-a:5M"), &o), 0);
        // L0 triggered (4 files of 1M): L0 + L1 (5M) count, then L1 at 9M of 10M is fine.
        assert_eq!(pending_compaction_bytes(&parse(4, "L0: a-a@1 a-a@2 a-a@3 a-a@4; L1: a-a:5M"), &o), 9 * MB);
        // L1 20M over 10M: 10M carried down, with fan-out (L2 50M / L1 20M + 1) = 3.5.
        assert_eq!(pending_compaction_bytes(&parse(4, "L1: a-a:20M; L2: b-b:50M"), &o), 35 * MB);
    }

    #[test]
    fn task_sizes_and_score() {
        let v = parse(3, "L1: a-c:11M; L2: a-b:3M");
        let t = pick(&v, &opts(), &HashSet::new(), u64::MAX).unwrap();
        assert_eq!(render(Some(&t)), "L1->L2 in[#1] out[#2] bottom");
        assert_eq!(t.max_output_file_size, 2 * MB);
        assert_eq!(t.reason, CompactionReason::LevelMaxLevelSize);
        assert!((t.score - 1.1).abs() < 1e-9);
    }
}
