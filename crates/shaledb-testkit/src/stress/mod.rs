//! A db_stress-like driver on a real directory: several threads of random puts, deletes, merges, batches and
//! reads, each write announced in and acknowledged to an expected-state file ([`expected`]) that survives the
//! process. Every start verifies the database against that file first, so a driver that kills the process
//! with SIGKILL at random moments and starts it again checks each recovery (D2, D3): no acknowledged write
//! lost, synced or not; a write in flight at the kill either whole or absent; no corrupt read.
//!
//! Used by `shaledb stress` and by the kill-loop test of the engine's torture suite.

pub mod expected;

use crate::history::show;
use expected::{Expected, Journal, Op};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::{
    ColumnFamily, ColumnFamilyDescriptor, CompressionType, Db, Options, WalRecoveryMode, WriteBatch, WriteOptions,
};
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct StressConfig {
    /// The database directory.
    pub path: PathBuf,
    /// The expected-state file; `<path>.expected` when `None`.
    pub expected: Option<PathBuf>,
    /// Writer threads.
    pub threads: usize,
    /// Size of the key space.
    pub keys: u32,
    /// Operations per thread (0: no limit).
    pub ops_per_thread: u64,
    /// Stop after this long (`None`: no limit).
    pub duration: Option<Duration>,
    /// Seed of the operation mix (each thread and round derives its own).
    pub seed: u64,
    /// Largest value in bytes.
    pub max_value: usize,
    /// One write in this many is synced (0: none).
    pub sync_one_in: u32,
    /// Memtable size: small values make flushes and compactions frequent.
    pub write_buffer_size: usize,
    /// Close and reopen the database this many times during the run (the work is split evenly).
    pub reopens: u32,
    /// Only open and verify; write nothing (the expected-state file is left as it is).
    pub verify_only: bool,
    /// Write flush and compaction tables with O_DIRECT (`Options::use_direct_io_for_flush_and_compaction`).
    pub direct_io_for_flush_and_compaction: bool,
    /// Column families besides the default one (`cf1`, `cf2`, ...; 0: none). Key `k` lives in family
    /// `k % (column_families + 1)` (the default family is 0), as db_bench spreads keys over its families; a
    /// write of several keys is a batch across families, a range deletion one batch over every family.
    pub column_families: u32,
}

impl Default for StressConfig {
    fn default() -> Self {
        StressConfig {
            path: PathBuf::from("shaledb-stress"),
            expected: None,
            threads: 4,
            keys: 10_000,
            ops_per_thread: 10_000,
            duration: None,
            seed: 1,
            max_value: 100,
            sync_one_in: 100,
            write_buffer_size: 64 << 10,
            reopens: 0,
            verify_only: false,
            direct_io_for_flush_and_compaction: false,
            column_families: 0,
        }
    }
}

/// The database's family handles of a run with column families, the default family first; empty without.
type Families = Vec<ColumnFamily>;

/// The family key `k` lives in (`None`: the run has no families).
fn family(fams: &[ColumnFamily], k: u32) -> Option<&ColumnFamily> {
    (!fams.is_empty()).then(|| &fams[k as usize % fams.len()])
}

fn get(db: &Db, fams: &[ColumnFamily], k: u32) -> shaledb::Result<Option<Vec<u8>>> {
    match family(fams, k) {
        Some(cf) => db.get_cf(cf, key_name(k)),
        None => db.get(key_name(k)),
    }
}

impl StressConfig {
    /// The expected-state file.
    pub fn expected_path(&self) -> PathBuf {
        self.expected.clone().unwrap_or_else(|| {
            let mut p = self.path.clone().into_os_string();
            p.push(".expected");
            PathBuf::from(p)
        })
    }

    /// The engine options of a stress run: small memtables and files so that flushes and compactions run
    /// all the time; `stringappend` merges; PointInTime recovery.
    pub fn options(&self) -> Options {
        Options {
            write_buffer_size: self.write_buffer_size.max(4096),
            max_write_buffer_number: 3,
            target_file_size_base: (self.write_buffer_size as u64).max(4096),
            max_bytes_for_level_base: (self.write_buffer_size as u64 * 4).max(16 << 10),
            level0_file_num_compaction_trigger: 4,
            block_size: 1024,
            compression: CompressionType::Lz4,
            merge_operator: shaledb::merge::builtin("stringappend"),
            wal_recovery_mode: WalRecoveryMode::PointInTime,
            use_direct_io_for_flush_and_compaction: self.direct_io_for_flush_and_compaction,
            ..Options::default()
        }
    }
}

/// Why a stress run failed.
#[derive(Debug)]
pub enum StressError {
    /// The database does not hold what the expected state says: each line is one problem.
    Verify(Vec<String>),
    /// The engine failed (open, write, read).
    Db(shaledb::Error),
    /// The expected-state file could not be read or written.
    Io(std::io::Error),
}

impl fmt::Display for StressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StressError::Verify(p) => {
                write!(f, "verification failed with {} problems", p.len())?;
                for line in p.iter().take(20) {
                    write!(f, "\n  {line}")?;
                }
                Ok(())
            }
            StressError::Db(e) => write!(f, "database error: {e}"),
            StressError::Io(e) => write!(f, "expected-state file: {e}"),
        }
    }
}

impl std::error::Error for StressError {}

impl From<shaledb::Error> for StressError {
    fn from(e: shaledb::Error) -> Self {
        StressError::Db(e)
    }
}

impl From<std::io::Error> for StressError {
    fn from(e: std::io::Error) -> Self {
        StressError::Io(e)
    }
}

/// What a successful run did.
#[derive(Clone, Debug, Default)]
pub struct StressSummary {
    /// Time of each `Db::open` (the first one recovers from whatever the last run left).
    pub open_times: Vec<Duration>,
    /// In-flight writes found in the expected state at the start (writes a kill interrupted).
    pub in_flight_at_start: usize,
    /// Operations done (writes and reads).
    pub ops: u64,
}

/// The value of every key of the key space (index = key), as read from the database.
pub type Values = Vec<Option<Vec<u8>>>;

/// The name of key `k`.
pub fn key_name(k: u32) -> Vec<u8> {
    format!("s{k:08}").into_bytes()
}

/// The key number of a key the driver writes ([`key_name`]'s inverse, any width); `None` for any other key.
pub fn key_index(key: &[u8]) -> Option<u32> {
    let digits = key.strip_prefix(b"s")?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn say(line: &str) {
    // The kill driver reads these lines from a pipe: each one is flushed at once.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "stress: {line}");
    let _ = out.flush();
}

/// Every key's value, by point lookups, cross-checked with a full scan (which must hold no other key).
fn read_state(db: &Db, fams: &[ColumnFamily], keys: u32) -> Result<Values, StressError> {
    let mut values = Vec::with_capacity(keys as usize);
    for k in 0..keys {
        values.push(get(db, fams, k)?);
    }
    let mut problems = Vec::new();
    let mut seen = 0usize;
    let scans: Vec<(usize, shaledb::Iter)> = if fams.is_empty() {
        vec![(0, db.iter())]
    } else {
        fams.iter().enumerate().map(|(i, cf)| (i, db.iter_cf(cf))).collect()
    };
    for (i, item) in scans.into_iter().flat_map(|(f, it)| it.map(move |e| (f, e))) {
        let (fam, item) = (i, item);
        let (k, v) = item?;
        match key_index(&k).filter(|i| *i < keys) {
            Some(i) if !fams.is_empty() && i as usize % fams.len() != fam => {
                problems.push(format!("key {i} is in column family {fam}, not the one it was written to"))
            }
            Some(i) if values[i as usize].as_deref() == Some(&v[..]) => seen += 1,
            Some(i) => problems.push(format!("scan shows key {i} = {} but get says otherwise", show(&v))),
            None => problems.push(format!("scan shows a key outside the key space: {}", show(&k))),
        }
    }
    let present = values.iter().filter(|v| v.is_some()).count();
    if seen != present && problems.is_empty() {
        problems.push(format!("get finds {present} keys, the scan {seen}"));
    }
    if problems.is_empty() {
        Ok(values)
    } else {
        Err(StressError::Verify(problems))
    }
}

fn open_timed(cfg: &StressConfig, summary: &mut StressSummary) -> Result<(Db, Families), StressError> {
    let start = Instant::now();
    let (db, fams) = if cfg.column_families == 0 {
        (Db::open(&cfg.path, cfg.options())?, Vec::new())
    } else {
        let names: Vec<String> = (1..=cfg.column_families).map(|i| format!("cf{i}")).collect();
        let descs = names.iter().map(|n| ColumnFamilyDescriptor::new(n.clone(), cfg.options())).collect();
        let db = Db::open_with_column_families(&cfg.path, cfg.options(), descs)?;
        let mut fams = vec![db.default_column_family()];
        for n in &names {
            fams.push(
                db.column_family(n)
                    .ok_or_else(|| StressError::Verify(vec![format!("column family {n} is missing after the open")]))?,
            );
        }
        (db, fams)
    };
    let took = start.elapsed();
    summary.open_times.push(took);
    say(&format!("opened in {:.3} ms", took.as_secs_f64() * 1e3));
    Ok((db, fams))
}

/// Opens the database, checks it against the expected-state file (when there is one) and returns the
/// database's values, which every key was checked to be allowed to hold.
fn open_and_verify(cfg: &StressConfig, summary: &mut StressSummary) -> Result<(Db, Families, Values), StressError> {
    let expected = Expected::load(&cfg.expected_path())?;
    let (db, fams) = open_timed(cfg, summary)?;
    let values = read_state(&db, &fams, cfg.keys)?;
    match &expected {
        Some(e) if e.keys != cfg.keys => {
            return Err(StressError::Verify(vec![format!(
                "the expected-state file is for {} keys, the run for {}",
                e.keys, cfg.keys
            )]))
        }
        Some(e) => {
            let problems = e.check(&values);
            if !problems.is_empty() {
                return Err(StressError::Verify(problems));
            }
            summary.in_flight_at_start = e.in_flight.len();
            say(&format!("verified {} keys ({} writes were in flight)", cfg.keys, e.in_flight.len()));
        }
        None if values.iter().any(Option::is_some) => {
            return Err(StressError::Verify(vec!["the database holds keys but there is no expected-state file".into()]))
        }
        None => say(&format!("verified {} keys (new database)", cfg.keys)),
    }
    Ok((db, fams, values))
}

/// Runs the stress test (or, with `verify_only`, only the verification).
pub fn run(cfg: &StressConfig) -> Result<StressSummary, StressError> {
    let mut summary = StressSummary::default();
    let (db, fams, values) = open_and_verify(cfg, &mut summary)?;
    if cfg.verify_only {
        return Ok(summary);
    }
    // The verified state becomes the new snapshot: in-flight writes are resolved to what the database holds.
    let journal = Arc::new(Expected::start(&cfg.expected_path(), &values)?);
    let state: Arc<Vec<Mutex<Option<Vec<u8>>>>> = Arc::new(values.into_iter().map(Mutex::new).collect());
    say("running");
    let rounds = u64::from(cfg.reopens) + 1;
    let deadline = cfg.duration.map(|d| Instant::now() + d);
    let mut db = Some((db, fams));
    for round in 0..rounds {
        let (current, fams) = match db.take() {
            Some(d) => d,
            None => {
                let (d, fams) = open_timed(cfg, &mut summary)?;
                let values = read_state(&d, &fams, cfg.keys)?;
                let problems: Vec<String> = values
                    .iter()
                    .enumerate()
                    .filter(|(k, v)| *state[*k].lock().unwrap_or_else(PoisonError::into_inner) != **v)
                    .map(|(k, _)| format!("key {k} changed across a clean reopen"))
                    .collect();
                if !problems.is_empty() {
                    return Err(StressError::Verify(problems));
                }
                say(&format!("reopen {round}: verified {} keys", cfg.keys));
                (d, fams)
            }
        };
        let round_deadline = deadline.map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            Instant::now() + left / u32::try_from(rounds - round).unwrap_or(1)
        });
        summary.ops += run_round(cfg, &current, &fams, &journal, &state, round, round_deadline)?;
        drop(fams);
        current.close()?;
    }
    say(&format!("done: {} ops", summary.ops));
    Ok(summary)
}

#[allow(clippy::too_many_arguments)]
fn run_round(
    cfg: &StressConfig,
    db: &Db,
    fams: &[ColumnFamily],
    journal: &Arc<Journal>,
    state: &Arc<Vec<Mutex<Option<Vec<u8>>>>>,
    round: u64,
    deadline: Option<Instant>,
) -> Result<u64, StressError> {
    let rounds = u64::from(cfg.reopens) + 1;
    let ops = if cfg.ops_per_thread == 0 { u64::MAX } else { cfg.ops_per_thread.div_ceil(rounds) };
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let first_error: Mutex<Option<StressError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for t in 0..cfg.threads.max(1) {
            let (stop, done, first_error) = (&stop, &done, &first_error);
            s.spawn(move || {
                let seed = cfg.seed ^ (round << 32) ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let mut rng = StdRng::seed_from_u64(seed);
                let mut n = 0;
                while n < ops && !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
                    if let Err(e) = one_op(cfg, db, fams, journal, state, t as u32, &mut rng) {
                        stop.store(true, Ordering::Relaxed);
                        first_error.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(e);
                        break;
                    }
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    match first_error.into_inner().unwrap_or_else(PoisonError::into_inner) {
        Some(e) => Err(e),
        None => Ok(done.into_inner()),
    }
}

/// One random operation of thread `tid`: a read checked against the expected state, or a write journaled
/// around the database call, all under the locks of the keys involved.
#[allow(clippy::too_many_arguments)]
fn one_op(
    cfg: &StressConfig,
    db: &Db,
    fams: &[ColumnFamily],
    journal: &Journal,
    state: &[Mutex<Option<Vec<u8>>>],
    tid: u32,
    rng: &mut StdRng,
) -> Result<(), StressError> {
    let keys = cfg.keys.max(1);
    let roll = rng.gen_range(0..100);
    if roll < 20 {
        let k = rng.gen_range(0..keys);
        let slot = state[k as usize].lock().unwrap_or_else(PoisonError::into_inner);
        let got = get(db, fams, k)?;
        if got != *slot {
            return Err(StressError::Verify(vec![format!(
                "thread {tid}: get(key {k}) = {} while the expected value is {}",
                got.as_deref().map_or("nothing".into(), show),
                slot.as_deref().map_or("nothing".into(), show)
            )]));
        }
        return Ok(());
    }
    if roll < 23 {
        return delete_range(cfg, db, fams, journal, state, tid, rng);
    }
    let n = if roll < 30 { rng.gen_range(2..=4) } else { 1 };
    let mut ks: Vec<u32> = (0..n).map(|_| rng.gen_range(0..keys)).collect();
    ks.sort_unstable();
    ks.dedup();
    // Ascending lock order: no two threads deadlock.
    let mut slots: Vec<_> =
        ks.iter().map(|k| state[*k as usize].lock().unwrap_or_else(PoisonError::into_inner)).collect();
    let ops: Vec<Op> = ks
        .iter()
        .zip(&slots)
        .map(|(k, slot)| match rng.gen_range(0..10) {
            0 | 1 => Op::Delete(*k),
            2 if slot.as_ref().is_none_or(|v| v.len() < 200) => {
                let len = rng.gen_range(1..=4);
                Op::Merge(*k, (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect())
            }
            _ => {
                let len = rng.gen_range(0..=cfg.max_value);
                Op::Put(*k, (0..len).map(|_| rng.gen()).collect())
            }
        })
        .collect();
    let sync = cfg.sync_one_in > 0 && rng.gen_ratio(1, cfg.sync_one_in);
    let opts = WriteOptions { sync, ..WriteOptions::default() };
    journal.intent(tid, &ops)?;
    if !fams.is_empty() {
        let mut b = WriteBatch::new();
        for op in &ops {
            match op {
                Op::Put(k, v) => b.put_cf(&fams[*k as usize % fams.len()], key_name(*k), v),
                Op::Delete(k) => b.delete_cf(&fams[*k as usize % fams.len()], key_name(*k)),
                Op::Merge(k, v) => b.merge_cf(&fams[*k as usize % fams.len()], key_name(*k), v),
                Op::DeleteRange(lo, hi) => {
                    for cf in fams {
                        b.delete_range_cf(cf, key_name(*lo), key_name(*hi));
                    }
                    &mut b
                }
            };
        }
        db.write_opt(&opts, &b)?;
    } else if let [op] = ops.as_slice() {
        match op {
            Op::Put(k, v) => db.put_opt(&opts, key_name(*k), v)?,
            Op::Delete(k) => db.delete_opt(&opts, key_name(*k))?,
            Op::Merge(k, v) => db.merge_opt(&opts, key_name(*k), v)?,
            Op::DeleteRange(b, e) => db.delete_range_opt(&opts, key_name(*b), key_name(*e))?,
        }
    } else {
        let mut b = WriteBatch::new();
        for op in &ops {
            match op {
                Op::Put(k, v) => b.put(key_name(*k), v),
                Op::Delete(k) => b.delete(key_name(*k)),
                Op::Merge(k, v) => b.merge(key_name(*k), v),
                Op::DeleteRange(lo, hi) => b.delete_range(key_name(*lo), key_name(*hi)),
            };
        }
        db.write_opt(&opts, &b)?;
    }
    journal.ack(tid)?;
    for (op, slot) in ops.iter().zip(slots.iter_mut()) {
        **slot = op.apply(slot.as_deref());
    }
    Ok(())
}

/// One range deletion of 1 to 16 consecutive keys, holding the locks of all of them (ascending) from its
/// intent to its acknowledgement, like any other write.
#[allow(clippy::too_many_arguments)]
fn delete_range(
    cfg: &StressConfig,
    db: &Db,
    fams: &[ColumnFamily],
    journal: &Journal,
    state: &[Mutex<Option<Vec<u8>>>],
    tid: u32,
    rng: &mut StdRng,
) -> Result<(), StressError> {
    let keys = cfg.keys.max(1);
    let b = rng.gen_range(0..keys);
    let e = (b + rng.gen_range(1..=16)).min(keys);
    let mut slots: Vec<_> = (b..e).map(|k| state[k as usize].lock().unwrap_or_else(PoisonError::into_inner)).collect();
    let op = Op::DeleteRange(b, e);
    let sync = cfg.sync_one_in > 0 && rng.gen_ratio(1, cfg.sync_one_in);
    journal.intent(tid, std::slice::from_ref(&op))?;
    let opts = WriteOptions { sync, ..WriteOptions::default() };
    if fams.is_empty() {
        db.delete_range_opt(&opts, key_name(b), key_name(e))?;
    } else {
        let mut batch = WriteBatch::new();
        for cf in fams {
            batch.delete_range_cf(cf, key_name(b), key_name(e));
        }
        db.write_opt(&opts, &batch)?;
    }
    journal.ack(tid)?;
    for slot in slots.iter_mut() {
        **slot = None;
    }
    Ok(())
}

/// Removes a stress database and its expected-state file (for a fresh start).
pub fn destroy(cfg: &StressConfig) -> std::io::Result<()> {
    shaledb::destroy(&cfg.path).map_err(std::io::Error::other)?;
    match std::fs::remove_file(cfg.expected_path()) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// True when `path` looks like a stress database (for tools that want to refuse foreign directories).
pub fn is_stress_db(cfg: &StressConfig) -> bool {
    Path::new(&cfg.expected_path()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path) -> StressConfig {
        StressConfig {
            path: dir.join("db"),
            threads: 3,
            keys: 300,
            ops_per_thread: 400,
            write_buffer_size: 8 << 10,
            sync_one_in: 10,
            ..StressConfig::default()
        }
    }

    #[test]
    fn key_index_inverts_key_name_and_refuses_other_keys() {
        assert_eq!(key_index(&key_name(0)), Some(0));
        assert_eq!(key_index(&key_name(123_456)), Some(123_456));
        for other in [&b"s"[..], b"s+5", b"t00000001", b"00000001", b"s0000000x", b"s99999999999"] {
            assert_eq!(key_index(other), None, "{other:?}");
        }
    }

    #[test]
    fn run_then_verify_only_then_continue_with_reopens() {
        let dir = crate::tempdir();
        let c = cfg(dir.path());
        let s = run(&c).unwrap();
        assert!(s.ops >= 1200, "{s:?}");
        assert!(is_stress_db(&c));
        let v = run(&StressConfig { verify_only: true, ..c.clone() }).unwrap();
        assert_eq!((v.ops, v.in_flight_at_start), (0, 0));
        let r = run(&StressConfig { reopens: 2, seed: 2, ..c.clone() }).unwrap();
        assert_eq!(r.open_times.len(), 3);
        destroy(&c).unwrap();
        assert!(!is_stress_db(&c));
    }

    #[test]
    fn column_families_run_verify_and_a_key_in_the_wrong_family_is_found() {
        let dir = crate::tempdir();
        let c = StressConfig { column_families: 2, ..cfg(dir.path()) };
        let s = run(&StressConfig { reopens: 1, ..c.clone() }).unwrap();
        assert!(s.ops >= 1200, "{s:?}");
        run(&StressConfig { verify_only: true, ..c.clone() }).unwrap();
        assert_eq!(Db::list_column_families(&c.path, c.options()).unwrap(), ["default", "cf1", "cf2"]);
        // Key 1 lives in family 1; a copy of it in family 2 is a problem the verification names.
        {
            let db = Db::open(&c.path, c.options()).unwrap();
            let cf2 = db.column_family("cf2").unwrap();
            db.put_cf(&cf2, key_name(1), "misplaced").unwrap();
            db.close().unwrap();
        }
        match run(&StressConfig { verify_only: true, ..c }) {
            Err(StressError::Verify(p)) => {
                assert!(p.iter().any(|l| l.contains("key 1 is in column family 2")), "{p:?}")
            }
            other => panic!("expected a verification failure, got {other:?}"),
        }
    }

    #[test]
    fn a_lost_write_fails_verification() {
        let dir = crate::tempdir();
        let c = cfg(dir.path());
        run(&c).unwrap();
        // Acknowledge a write the database never saw.
        let j = Expected::start(&c.expected_path(), &{
            let db = Db::open(&c.path, c.options()).unwrap();
            read_state(&db, &[], c.keys).unwrap()
        })
        .unwrap();
        j.intent(0, &[Op::Put(7, b"never written".to_vec())]).unwrap();
        j.ack(0).unwrap();
        match run(&StressConfig { verify_only: true, ..c }) {
            Err(StressError::Verify(p)) => assert!(p.iter().any(|l| l.starts_with("key 7:")), "{p:?}"),
            other => panic!("expected a verification failure, got {other:?}"),
        }
    }

    #[test]
    fn a_database_without_expected_state_is_refused_unless_empty() {
        let dir = crate::tempdir();
        let c = cfg(dir.path());
        run(&StressConfig { ops_per_thread: 50, ..c.clone() }).unwrap();
        std::fs::remove_file(c.expected_path()).unwrap();
        assert!(matches!(run(&c), Err(StressError::Verify(_))));
    }
}
