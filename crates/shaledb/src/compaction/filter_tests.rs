//! The compaction filter inside a run: which version it sees, and what each decision writes.

use super::tests::{e, spec, Env, VecIter};
use super::*;
use crate::compaction_filter::{CompactionFilter, Decision, FilterContext, JobFilter};
use crate::ttl::{Clock, Ttl};
use parking_lot::Mutex;
use ValueKind::{Deletion as D, Value as V};

/// Removes `rm*`, upper-cases `chg*`, panics on `boom`, keeps the rest; records the keys it was asked about.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl CompactionFilter for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn filter(&self, _cx: &FilterContext, key: &[u8], value: &[u8]) -> Decision {
        self.seen.lock().push(String::from_utf8_lossy(key).into_owned());
        if key == b"boom" {
            panic!("boom");
        }
        if key.starts_with(b"rm") {
            Decision::Remove
        } else if key.starts_with(b"chg") {
            Decision::ChangeValue(value.to_ascii_uppercase())
        } else {
            Decision::Keep
        }
    }
}

fn cx(bottommost: bool) -> FilterContext {
    FilterContext { level: 1, output_level: 2, is_full_compaction: false, is_manual_compaction: false, bottommost }
}

fn job(user: Arc<dyn CompactionFilter>, bottommost: bool) -> JobFilter {
    JobFilter { cx: cx(bottommost), user: Some(user), ttl: None }
}

fn entries_of(env: &Env, out: &RunOutput) -> Vec<(String, u64, ValueKind, String)> {
    out.files.iter().flat_map(|f| env.read(f.number)).collect()
}

#[test]
fn filter_remove_becomes_a_deletion_above_the_bottom_and_nothing_at_it() {
    let input =
        || VecIter::new(vec![e("chg", 7, V, "abc"), e("keep", 6, V, "k"), e("rm", 9, V, "new"), e("rm", 3, V, "old")]);
    let rec = Arc::new(Recorder::default());
    let mut env = Env::new();
    env.filter = Some(job(rec.clone(), false));
    let out = env.run(&mut input(), &spec(1 << 20), &[], false).unwrap();
    let got = entries_of(&env, &out);
    assert_eq!(
        got,
        vec![
            ("chg".into(), 7, V, "ABC".into()),
            ("keep".into(), 6, V, "k".into()),
            ("rm".into(), 9, D, String::new()), // still hides what lies below the output level
        ]
    );
    // Only each key's newest version is shown to the filter.
    assert_eq!(*rec.seen.lock(), vec!["chg", "keep", "rm"]);
    assert_eq!(out.stats.records_filtered, 2);
    let mut env = Env::new();
    env.filter = Some(job(rec.clone(), true));
    let out = env.run(&mut input(), &spec(1 << 20), &[], true).unwrap();
    let keys: Vec<String> = entries_of(&env, &out).into_iter().map(|(k, ..)| k).collect();
    assert_eq!(keys, vec!["chg", "keep"]);
}

#[test]
fn filter_never_sees_versions_a_snapshot_can_read() {
    let rec = Arc::new(Recorder::default());
    let mut env = Env::new();
    env.filter = Some(job(rec.clone(), false));
    // Snapshot 5: rm@4 is visible to it; rm@9 is newer and filtered; chg@5 is visible and left alone.
    let mut it = VecIter::new(vec![e("chg", 5, V, "abc"), e("rm", 9, V, "new"), e("rm", 4, V, "old")]);
    let out = env.run(&mut it, &spec(1 << 20), &[5], false).unwrap();
    assert_eq!(
        entries_of(&env, &out),
        vec![("chg".into(), 5, V, "abc".into()), ("rm".into(), 9, D, String::new()), ("rm".into(), 4, V, "old".into())]
    );
    assert_eq!(*rec.seen.lock(), vec!["rm"]);
}

#[test]
fn filter_panic_fails_the_run_and_leaves_no_file() {
    let mut env = Env::new();
    env.filter = Some(job(Arc::new(Recorder::default()), false));
    let mut it = VecIter::new(vec![e("a", 1, V, "x"), e("boom", 1, V, "x")]);
    let err = env.run(&mut it, &spec(1 << 20), &[], false).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("panicked") && m.contains("boom")), "{err}");
    assert_eq!(env.files_on_disk(), 0);
}

struct At(u64);
impl Clock for At {
    fn now_secs(&self) -> u64 {
        self.0
    }
}

#[test]
fn ttl_filter_removes_expired_values_and_keeps_timestamps_on_change() {
    // Timestamps whose bytes are ASCII, so the values stay printable strings.
    let base = u32::from_le_bytes(*b"0000");
    let stamped = |v: &str, ts: u32| {
        let mut b = v.as_bytes().to_vec();
        b.extend_from_slice(&ts.to_le_bytes());
        String::from_utf8_lossy(&b).into_owned()
    };
    let rec = Arc::new(Recorder::default());
    let mut env = Env::new();
    let ttl = Ttl { seconds: 10, clock: Arc::new(At(u64::from(base) + 20)) };
    env.filter = Some(JobFilter { cx: cx(false), user: Some(rec.clone()), ttl: Some((ttl.clone(), ttl.now())) });
    let mut it = VecIter::new(vec![
        e("chg", 1, V, &stamped("abc", base + 15)),
        e("fresh", 2, V, &stamped("f", base + 10)),
        e("old", 3, V, &stamped("o", base + 9)),
    ]);
    let out = env.run(&mut it, &spec(1 << 20), &[], false).unwrap();
    assert_eq!(
        entries_of(&env, &out),
        vec![
            ("chg".into(), 1, V, stamped("ABC", base + 15)),
            ("fresh".into(), 2, V, stamped("f", base + 10)),
            ("old".into(), 3, D, String::new()),
        ]
    );
    // The user's filter saw the live values only, without their timestamps' bytes.
    assert_eq!(*rec.seen.lock(), vec!["chg", "fresh"]);
}
