use super::*;
use crate::merge::{StringAppend, UInt64Add};
use shaledb_format::ikey::make_internal_key;
use shaledb_format::table::{Table, TableReadOptions};
use shaledb_vfs::{PosixFs, ReadHints, WriteHints};
use std::cell::Cell;
use std::path::Path;
use ValueKind::{Deletion as D, Merge as M, Value as V};

pub(super) fn ver(seq: u64, kind: ValueKind, value: &str) -> KeyVersion {
    KeyVersion { seq, kind, value: value.as_bytes().to_vec() }
}

pub(super) fn show(vs: &[KeyVersion]) -> String {
    vs.iter()
        .map(|v| {
            let k = match v.kind {
                V => "V",
                D => "D",
                M => "M",
                ValueKind::SingleDeletion => "SD",
                ValueKind::RangeDeletion => "RD",
                ValueKind::BlobIndex => "B",
            };
            format!("{k}{}={}", v.seq, String::from_utf8_lossy(&v.value))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn resolve(vs: Vec<KeyVersion>, snaps: &[u64], merge: Option<&dyn MergeOperator>, bottom: bool) -> String {
    show(&resolve_versions(b"k", vs, snaps, merge, bottom))
}

#[test]
fn newest_version_per_snapshot_stripe() {
    let vs = || vec![ver(9, V, "9"), ver(7, V, "7"), ver(5, V, "5"), ver(3, V, "3"), ver(1, V, "1")];
    assert_eq!(resolve(vs(), &[], None, false), "V9=9");
    // Snapshot 6 sees 5; snapshot 3 sees 3; 7 and 1 are shadowed within their stripes.
    assert_eq!(resolve(vs(), &[3, 6], None, false), "V9=9 V5=5 V3=3");
    // A snapshot at exactly a version's sequence sees it.
    assert_eq!(resolve(vs(), &[7], None, false), "V9=9 V7=7");
    // Snapshots newer than every version change nothing.
    assert_eq!(resolve(vs(), &[100], None, false), "V9=9");
}

#[test]
fn tombstones_dropped_only_at_bottommost() {
    let vs = || vec![ver(5, D, ""), ver(3, V, "3")];
    assert_eq!(resolve(vs(), &[], None, false), "D5=");
    assert_eq!(resolve(vs(), &[], None, true), "");
    // A snapshot still sees the value under the tombstone: both stay, even at the bottom.
    assert_eq!(resolve(vs(), &[4], None, true), "D5= V3=3");
    // Tombstones ending the history go; one above a kept value stays.
    let vs = vec![ver(9, V, "9"), ver(7, D, ""), ver(5, V, "5"), ver(3, D, "")];
    assert_eq!(resolve(vs, &[4, 6, 8], None, true), "V9=9 D7= V5=5");
    let vs = vec![ver(9, D, ""), ver(7, D, "")];
    assert_eq!(resolve(vs, &[8], None, true), "");
}

#[test]
fn merge_over_base_in_stripe_becomes_value() {
    let op = StringAppend::new(b",");
    let vs = || vec![ver(9, M, "c"), ver(8, M, "b"), ver(7, V, "a"), ver(6, V, "old")];
    assert_eq!(resolve(vs(), &[], Some(&op), false), "V9=a,b,c");
    // Over a tombstone the existing value is none.
    let over_tombstone = vec![ver(9, M, "c"), ver(8, D, ""), ver(7, V, "a")];
    assert_eq!(resolve(over_tombstone, &[], Some(&op), false), "V9=c");
    // A snapshot between operands splits them: each stripe merges on its own.
    assert_eq!(resolve(vs(), &[8], Some(&op), false), "M9=c V8=a,b");
}

#[test]
fn merge_without_base_full_merges_only_at_bottommost() {
    let op = StringAppend::new(b",");
    let vs = || vec![ver(9, M, "c"), ver(8, M, "b")];
    assert_eq!(resolve(vs(), &[], Some(&op), true), "V9=b,c");
    // Not bottommost: something below may hold a base, so the operands are only partially merged.
    assert_eq!(resolve(vs(), &[], Some(&op), false), "M9=b,c");
    // Bottommost but an older stripe holds versions: operands stay operands.
    let vs = vec![ver(9, M, "c"), ver(8, M, "b"), ver(3, V, "a")];
    assert_eq!(resolve(vs, &[5], Some(&op), true), "M9=b,c V3=a");
}

#[test]
fn partial_merge_combines_adjacent_operands() {
    let one = 1u64.to_le_bytes().to_vec();
    let vs = vec![
        KeyVersion { seq: 3, kind: M, value: one.clone() },
        KeyVersion { seq: 2, kind: M, value: one.clone() },
        KeyVersion { seq: 1, kind: M, value: one.clone() },
    ];
    let got = resolve_versions(b"k", vs, &[], Some(&UInt64Add), false);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].seq, got[0].kind), (3, M));
    assert_eq!(got[0].value, 3u64.to_le_bytes());
}

#[derive(Debug)]
struct NoPartial;
impl MergeOperator for NoPartial {
    fn name(&self) -> &str {
        "nopartial"
    }
    fn full_merge(&self, _k: &[u8], existing: Option<&[u8]>, ops: &[&[u8]]) -> Option<Vec<u8>> {
        if ops.contains(&&b"bad"[..]) {
            return None;
        }
        let mut v = existing.unwrap_or_default().to_vec();
        ops.iter().for_each(|o| v.extend_from_slice(o));
        Some(v)
    }
}

#[test]
fn operands_kept_without_partial_merge_or_operator() {
    let vs = || vec![ver(9, M, "c"), ver(8, M, "b")];
    assert_eq!(resolve(vs(), &[], Some(&NoPartial), false), "M9=c M8=b");
    assert_eq!(resolve(vs(), &[], None, true), "M9=c M8=b");
    // A rejected full merge keeps operands and base for the read path to report.
    let vs = vec![ver(9, M, "bad"), ver(8, V, "a"), ver(7, V, "x")];
    assert_eq!(resolve(vs, &[], Some(&NoPartial), false), "M9=bad V8=a");
}

// ---- write_sorted_run over real tables ----

pub(super) struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
    fail_at: Option<usize>,
}

impl VecIter {
    pub(super) fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIter {
        entries.sort_by(|a, b| ikey::compare(&a.0, &b.0));
        VecIter { entries, pos: 0, fail_at: None }
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.entries.len() && Some(self.pos) != self.fail_at
    }
    fn seek_to_first(&mut self) {
        self.pos = 0;
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().saturating_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        self.pos = self.entries.partition_point(|e| ikey::compare(&e.0, target) == Ordering::Less);
    }
    fn seek_for_prev(&mut self, _target: &[u8]) {
        self.pos = self.entries.len();
    }
    fn next(&mut self) {
        self.pos += 1;
    }
    fn prev(&mut self) {
        self.pos = self.pos.wrapping_sub(1);
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
    fn location(&self) -> Option<(&std::path::Path, u64)> {
        Some((std::path::Path::new("input.sst"), self.pos as u64))
    }
    fn status(&self) -> Result<()> {
        if self.fail_at.is_some_and(|f| self.pos >= f) {
            return Err(Error::io("read", "input.sst", std::io::Error::other("injected")));
        }
        Ok(())
    }
}

pub(super) fn e(key: &str, seq: u64, kind: ValueKind, value: &str) -> (Vec<u8>, Vec<u8>) {
    (make_internal_key(key.as_bytes(), seq, kind), value.as_bytes().to_vec())
}

pub(super) fn spec(max_file_size: u64) -> OutputSpec {
    OutputSpec {
        table_options: TableOptions::default(),
        max_file_size,
        grandparents: Vec::new(),
        max_grandparent_overlap: u64::MAX,
    }
}

pub(super) struct Env {
    dir: tempfile::TempDir,
    fs: PosixFs,
    next: Cell<u64>,
    stop: AtomicBool,
    write_hints: WriteHints,
    pub(super) filter: Option<crate::compaction_filter::JobFilter>,
    pub(super) range_dels: Option<Arc<crate::range_del::Fragments>>,
}

impl Env {
    pub(super) fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            fs: PosixFs::new(),
            next: Cell::new(10),
            stop: AtomicBool::new(false),
            write_hints: WriteHints::default(),
            filter: None,
            range_dels: None,
        }
    }

    pub(super) fn run(&self, it: &mut VecIter, s: &OutputSpec, snaps: &[u64], bottom: bool) -> Result<RunOutput> {
        let new_file = || {
            let n = self.next.get();
            self.next.set(n + 1);
            Ok((n, self.dir.path().join(format!("{n:06}.sst"))))
        };
        let merge: Arc<dyn MergeOperator> = Arc::new(StringAppend::new(b","));
        let cx = RunContext {
            fs: &self.fs,
            write_hints: self.write_hints,
            new_file: &new_file,
            snapshots: snaps,
            merge: Some(&merge),
            bottommost: bottom,
            stop: &self.stop,
            filter: self.filter.as_ref(),
            range_dels: self.range_dels.clone(),
            blob: None,
        };
        write_sorted_run(it, s, &cx)
    }

    pub(super) fn files_on_disk(&self) -> usize {
        std::fs::read_dir(self.dir.path()).unwrap().count()
    }

    pub(super) fn read(&self, number: u64) -> Vec<(String, u64, ValueKind, String)> {
        let path = self.dir.path().join(format!("{number:06}.sst"));
        read_table(&self.fs, &path)
    }
}

fn read_table(fs: &PosixFs, path: &Path) -> Vec<(String, u64, ValueKind, String)> {
    let t = Table::open(fs.open(path, ReadHints::default()).unwrap(), &TableReadOptions::default()).unwrap();
    let mut it = t.iter(true, false);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        let p = ikey::parse(it.key()).unwrap();
        out.push((
            String::from_utf8_lossy(p.user_key).into_owned(),
            p.seq,
            p.kind,
            String::from_utf8_lossy(it.value()).into_owned(),
        ));
        it.next();
    }
    it.status().unwrap();
    out
}

#[test]
fn run_writes_survivors_and_fills_meta() {
    let env = Env::new();
    let mut it = VecIter::new(vec![
        e("a", 5, V, "a5"),
        e("a", 3, V, "a3"),
        e("b", 6, D, ""),
        e("b", 2, V, "b2"),
        e("c", 8, M, "y"),
        e("c", 7, M, "x"),
        e("c", 4, V, "c4"),
        e("d", 9, D, ""),
    ]);
    let out = env.run(&mut it, &spec(u64::MAX), &[], false).unwrap();
    assert_eq!(out.files.len(), 1);
    let f = &out.files[0];
    assert_eq!(f.number, 10);
    assert_eq!(f.smallest, make_internal_key(b"a", 5, V));
    assert_eq!(f.largest, make_internal_key(b"d", 9, D));
    assert_eq!((f.smallest_seq, f.largest_seq, f.num_entries, f.num_deletions), (5, 9, 4, 2));
    assert!(f.file_size > 0);
    assert_eq!(out.stats.records_in, 8);
    assert_eq!(out.stats.records_dropped, 4);
    assert_eq!(out.stats.files_out, 1);
    assert_eq!(out.stats.bytes_written, f.file_size);
    let rows = env.read(10);
    assert_eq!(
        rows,
        vec![
            ("a".into(), 5, V, "a5".into()),
            ("b".into(), 6, D, "".into()),
            ("c".into(), 8, V, "c4,x,y".into()),
            ("d".into(), 9, D, "".into()),
        ]
    );
}

/// `use_direct_io_for_flush_and_compaction`: the outputs written with O_DIRECT (several, each ending in a
/// partial block) are byte for byte the buffered run's.
#[test]
fn run_with_direct_writes_makes_the_same_tables() {
    let input: Vec<_> =
        (0..20_000u32).map(|i| e(&format!("key{i:08}"), 1 + u64::from(i), V, &"v".repeat(90))).collect();
    let mut outs = Vec::new();
    for direct in [false, true] {
        let mut env = Env::new();
        env.write_hints = WriteHints { direct };
        let s = OutputSpec {
            table_options: TableOptions {
                block_size: 4096,
                compression: shaledb_format::compress::CompressionType::None,
                ..TableOptions::default()
            },
            ..spec(700_000)
        };
        let out = match env.run(&mut VecIter::new(input.clone()), &s, &[], true) {
            Ok(out) => out,
            Err(e) if direct && e.to_string().contains("refuses O_DIRECT") => {
                eprintln!("skipped: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert!(out.files.len() >= 2, "{} files", out.files.len());
        let bytes: Vec<Vec<u8>> = out
            .files
            .iter()
            .map(|f| {
                let b = std::fs::read(env.dir.path().join(format!("{:06}.sst", f.number))).unwrap();
                assert_eq!(b.len() as u64, f.file_size);
                b
            })
            .collect();
        assert!(bytes.iter().any(|b| b.len() % 4096 != 0), "some output ends in a partial block");
        assert!(!read_table(&env.fs, &env.dir.path().join(format!("{:06}.sst", out.files[0].number))).is_empty());
        outs.push(bytes);
    }
    assert!(outs[0] == outs[1], "direct and buffered outputs differ");
}

#[test]
fn run_bottommost_drops_tombstones_and_empty_output_makes_no_file() {
    let env = Env::new();
    let mut it = VecIter::new(vec![e("b", 6, D, ""), e("b", 2, V, "b2"), e("d", 9, D, "")]);
    let out = env.run(&mut it, &spec(u64::MAX), &[], true).unwrap();
    assert!(out.files.is_empty());
    assert_eq!(out.stats.records_dropped, 3);
    assert_eq!(env.files_on_disk(), 0);
    let mut it = VecIter::new(Vec::new());
    assert!(env.run(&mut it, &spec(u64::MAX), &[], true).unwrap().files.is_empty());
}

#[test]
fn run_cuts_at_size_but_never_inside_a_user_key() {
    let env = Env::new();
    let mut entries = Vec::new();
    for seq in 1..=5 {
        entries.push(e("a", seq, V, "xxxxxxxx"));
    }
    entries.push(e("b", 6, V, "y"));
    entries.push(e("c", 7, V, "z"));
    let mut it = VecIter::new(entries);
    // Every version of "a" survives (a snapshot at each), and the 1-byte limit cuts after every key.
    let out = env.run(&mut it, &spec(1), &[1, 2, 3, 4], false).unwrap();
    let ranges: Vec<(Vec<u8>, Vec<u8>)> =
        out.files.iter().map(|f| (f.smallest_user_key().to_vec(), f.largest_user_key().to_vec())).collect();
    assert_eq!(
        ranges,
        vec![(b"a".to_vec(), b"a".to_vec()), (b"b".to_vec(), b"b".to_vec()), (b"c".to_vec(), b"c".to_vec())]
    );
    assert_eq!(out.files[0].num_entries, 5);
    assert_eq!(out.files[0].smallest, make_internal_key(b"a", 5, V));
    assert_eq!(out.files[0].largest, make_internal_key(b"a", 1, V));
    assert_eq!(env.read(out.files[0].number).len(), 5);
}

#[test]
fn run_cuts_at_grandparent_overlap() {
    let env = Env::new();
    let gp = |n: u64, k: &str| {
        Arc::new(FileMeta {
            number: n,
            file_size: 100,
            smallest: make_internal_key(k.as_bytes(), 1, V),
            largest: make_internal_key(k.as_bytes(), 1, V),
            ..FileMeta::default()
        })
    };
    let mut s = spec(u64::MAX);
    s.grandparents = vec![gp(1, "b"), gp(2, "d"), gp(3, "f")];
    s.max_grandparent_overlap = 150;
    let mut it =
        VecIter::new(vec![e("a", 1, V, ""), e("c", 1, V, ""), e("e", 1, V, ""), e("g", 1, V, ""), e("h", 1, V, "")]);
    let out = env.run(&mut it, &s, &[], false).unwrap();
    // a..e overlaps b and d (200 > 150) by the time "e" comes: cut before it; then f before "g".
    let firsts: Vec<&[u8]> = out.files.iter().map(|f| f.smallest_user_key()).collect();
    assert_eq!(firsts, vec![&b"a"[..], &b"e"[..]]);
}

#[test]
fn run_removes_outputs_on_input_error() {
    let env = Env::new();
    let mut entries = Vec::new();
    for i in 0..20 {
        entries.push(e(&format!("k{i:02}"), 1, V, "v"));
    }
    let mut it = VecIter::new(entries);
    it.fail_at = Some(15);
    let err = env.run(&mut it, &spec(1), &[], false).unwrap_err();
    assert!(err.is_io());
    assert_eq!(env.files_on_disk(), 0);
}

#[test]
fn run_rejects_malformed_and_unordered_input() {
    let env = Env::new();
    let mut it = VecIter::new(vec![e("a", 1, V, "v")]);
    it.entries.push((b"bad".to_vec(), Vec::new()));
    let err = env.run(&mut it, &spec(1), &[], false).unwrap_err();
    // The error names the input's file and position (this VecIter: "input.sst", the entry's index).
    let at = |e: Error| match e {
        Error::Corruption { file, offset, .. } => (file, offset),
        other => panic!("expected corruption, got {other}"),
    };
    assert_eq!(at(err), ("input.sst".into(), 1));
    assert_eq!(env.files_on_disk(), 0);
    let mut it = VecIter::new(vec![e("b", 1, V, "v")]);
    it.entries.push(e("a", 1, V, "v"));
    assert_eq!(at(env.run(&mut it, &spec(1), &[], false).unwrap_err()), ("input.sst".into(), 1));
    assert_eq!(env.files_on_disk(), 0);
}

#[test]
fn run_stops_on_shutdown_and_cleans_up() {
    let env = Env::new();
    env.stop.store(true, AtomicOrdering::Release);
    let mut it = VecIter::new(vec![e("a", 1, V, "v"), e("b", 1, V, "v")]);
    let err = env.run(&mut it, &spec(1), &[], false).unwrap_err();
    assert!(matches!(err, Error::Closed));
    assert_eq!(env.files_on_disk(), 0);
}
