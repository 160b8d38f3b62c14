//! Power-loss and kill sweeps over a workload that mixes the engine's features at once (D3, D13, D16, D28): column
//! families created and dropped mid-run (a name dropped and created again too), batches across the live
//! families with puts, deletes, merges and range deletions, transactions committed and rolled back (to a
//! savepoint or whole), snapshots held across range deletions, flushes and compactions and read back in full
//! when released, all recorded by the same crash oracle as `power_loss.rs`.
//!
//! The oracle sees one flat key space: key `k` of family `f` is `f/k` in the model, a dropped family is a
//! range deletion of `[f/, f0)` (acknowledged only once durable, so it is a synced write), a created family is
//! an empty synced write and a committed transaction is a batch. After each crash the database is reopened
//! with the families its MANIFEST lists; every family it holds must be one the history created and not
//! dropped at the prefix found, every key must be where it was written, and the families together must hold
//! the state after a prefix of the acknowledged writes that keeps every synced one.
//!
//! The run is planned from its seed first ([`plan`]) and then executed, so `kill_loop_with_mixed_features` can
//! SIGKILL a child running the plan on the real file system and check the directory against the same plan.

use crate::power_loss::{crash_copy, Crash, CRASHES};
use crate::{assert_no_background_panics, budget, watch_background_panics, DB};
use rand::rngs::StdRng;
use rand::Rng;
use shaledb::{
    ColumnFamily, ColumnFamilyDescriptor, Db, Fs, OptimisticTransactionDb, Options, PosixFs, ReadOptions, Snapshot,
    Transaction, TransactionDb, TransactionDbOptions, TransactionOptions, WriteBatch, WriteOptions,
};
use shaledb_testkit::history::{string_append, Mutation, Write};
use shaledb_testkit::workload::{key, random_write, tiny_options, WorkloadConfig};
use shaledb_testkit::{rng, seed_from_env, History, MemFs, Model, PowerLoss, Recorded};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The family names the workload draws from; `default` is always live.
const NAMES: [&str; 4] = ["default", "a", "b", "c"];

/// The model key of `key` in family `name`.
fn model_key(name: &str, key: &[u8]) -> Vec<u8> {
    let mut k = name.as_bytes().to_vec();
    k.push(b'/');
    k.extend_from_slice(key);
    k
}

/// The model range a family's keys occupy: `[name/, name0)` (`0` follows `/`).
fn family_range(name: &str) -> (Vec<u8>, Vec<u8>) {
    (format!("{name}/").into_bytes(), format!("{name}0").into_bytes())
}

/// Which transaction flavour the run uses.
#[derive(Clone, Copy, Debug)]
enum Flavour {
    Pessimistic,
    Optimistic,
}

enum Txns {
    Pessimistic(TransactionDb),
    Optimistic(OptimisticTransactionDb),
}

impl Txns {
    fn db(&self) -> &Db {
        match self {
            Txns::Pessimistic(t) => t.db(),
            Txns::Optimistic(t) => t.db(),
        }
    }

    fn begin(&self, w: &WriteOptions) -> Transaction<'_> {
        let opts = TransactionOptions::default();
        match self {
            Txns::Pessimistic(t) => t.begin(w, &opts),
            Txns::Optimistic(t) => t.begin(w, &opts),
        }
    }
}

struct Run {
    history: History,
    recorded: Vec<Recorded>,
    /// Snapshots read back in full when released, and families created and dropped, for the summary line.
    snapshots_checked: usize,
    creates: usize,
    drops: usize,
    commits: usize,
    rollbacks: usize,
    /// What each acknowledged write was, for failure reports.
    kinds: Vec<String>,
}

fn opts_on(fs: &MemFs, opts: &Options) -> Options {
    Options { fs: Arc::new(fs.clone()), ..opts.clone() }
}

/// Opens the database with every family its MANIFEST lists; the handles by name.
fn open_listed(opts: &Options) -> shaledb::Result<(Db, BTreeMap<String, ColumnFamily>)> {
    open_listed_at(Path::new(DB), opts)
}

/// [`open_listed`] of the database in `dir`.
fn open_listed_at(dir: &Path, opts: &Options) -> shaledb::Result<(Db, BTreeMap<String, ColumnFamily>)> {
    let o = opts.clone();
    let names = if o.fs.exists(&dir.join("CURRENT")) {
        Db::list_column_families(dir, o.clone())?
    } else {
        vec!["default".to_string()]
    };
    let descs = names
        .iter()
        .filter(|n| n.as_str() != "default")
        .map(|n| ColumnFamilyDescriptor::new(n.clone(), o.clone()))
        .collect();
    let db = Db::open_with_column_families(dir, o, descs)?;
    let mut handles = BTreeMap::new();
    for n in &names {
        let h = db.column_family(n).ok_or_else(|| shaledb::Error::InvalidArgument(format!("no handle for {n}")))?;
        handles.insert(n.clone(), h);
    }
    Ok((db, handles))
}

/// Every entry of every family in `handles`, as model keys, read with forward scans at `read`.
fn read_families(db: &Db, handles: &BTreeMap<String, ColumnFamily>, read: &ReadOptions) -> shaledb::Result<Model> {
    let mut m = Model::new();
    for (name, h) in handles {
        for item in db.iter_cf_opt(read, h) {
            let (k, v) = item?;
            m.put(&model_key(name, &k), &v);
        }
    }
    Ok(m)
}

/// The part of `m` in the families `names`.
fn restrict(m: &Model, names: &[&str]) -> Model {
    let mut out = Model::new();
    for name in names {
        let (lo, hi) = family_range(name);
        for (k, v) in m.range(std::ops::Bound::Included(&lo[..]), std::ops::Bound::Excluded(&hi[..])) {
            out.put(k, v);
        }
    }
    out
}

/// Point lookups of keys `0..keys` (and every key the scans found) in each family agree with the scans.
fn check_gets(
    db: &Db,
    handles: &BTreeMap<String, ColumnFamily>,
    read: &ReadOptions,
    expected: &Model,
    keys: u32,
) -> Result<(), String> {
    for (name, h) in handles {
        let (lo, hi) = family_range(name);
        let found: Vec<Vec<u8>> = expected
            .range(std::ops::Bound::Included(&lo[..]), std::ops::Bound::Excluded(&hi[..]))
            .map(|(k, _)| k[lo.len()..].to_vec())
            .collect();
        for k in (0..keys).map(key).chain(found) {
            let got = db.get_cf_opt(read, h, &k).map_err(|e| format!("get failed: {e}"))?;
            let want = expected.get(&model_key(name, &k));
            if got.as_deref() != want {
                return Err(format!(
                    "family {name}: get({}) = {:?} but the scans say {:?}",
                    String::from_utf8_lossy(&k),
                    got.as_deref().map(String::from_utf8_lossy),
                    want.map(String::from_utf8_lossy)
                ));
            }
        }
    }
    Ok(())
}

/// The mutation of `m` on family `name`, and that update added to `batch` (or the transaction).
fn in_family(name: &str, m: &Mutation) -> Mutation {
    match m {
        Mutation::Put { key, value } => Mutation::Put { key: model_key(name, key), value: value.clone() },
        Mutation::Delete { key } => Mutation::Delete { key: model_key(name, key) },
        Mutation::SingleDelete { key } => Mutation::SingleDelete { key: model_key(name, key) },
        Mutation::Merge { key, operand } => Mutation::Merge { key: model_key(name, key), operand: operand.clone() },
        Mutation::DeleteRange { begin, end } => {
            Mutation::DeleteRange { begin: model_key(name, begin), end: model_key(name, end) }
        }
    }
}

/// One update of a planned transaction.
enum TxnOp {
    Savepoint,
    GetForUpdate(String, Vec<u8>),
    Update(String, Mutation),
}

/// One planned step: what it does to the database.
enum Action {
    Create(String),
    Drop(String),
    Txn { ops: Vec<TxnOp>, rollback_to_savepoint: bool, commit: bool, sync: bool },
    Write { ops: Vec<(String, Mutation)>, sync: bool },
}

/// What is done with the snapshot after a step.
enum SnapshotAction {
    Keep,
    /// Take one, remembering the history length and the live families (name, incarnation).
    Take(Vec<(String, u32)>),
    /// Read the held one back in full and drop it.
    Release,
}

struct Step {
    action: Action,
    /// The acknowledged write the step adds to the history, if any (a rolled-back transaction adds none).
    write: Option<Write>,
    flush: Option<String>,
    compact: Option<String>,
    snapshot: SnapshotAction,
}

/// A planned run: its steps and the history of acknowledged writes they make. Planning is a function of the
/// seed alone, so the parent of a killed child plans the same run to know what the child was doing.
struct Plan {
    steps: Vec<Step>,
    history: History,
    creates: usize,
    drops: usize,
    commits: usize,
    rollbacks: usize,
}

fn pick_live(r: &mut StdRng, live: &BTreeMap<String, u32>) -> String {
    let i = r.gen_range(0..live.len());
    live.keys().nth(i).expect("index below len").clone()
}

/// Plans `steps` random steps.
fn plan(seed: u64, cfg: &WorkloadConfig, steps: usize) -> Plan {
    let mut r = rng(seed);
    // Live families by name, with their incarnation (how many times the name had been created).
    let mut live: BTreeMap<String, u32> = BTreeMap::from([("default".to_string(), 0)]);
    let mut created: BTreeMap<String, u32> = BTreeMap::new();
    let mut history = History::new(string_append());
    let mut held_until: Option<usize> = None;
    let mut p = Plan {
        steps: Vec::new(),
        history: History::new(string_append()),
        creates: 0,
        drops: 0,
        commits: 0,
        rollbacks: 0,
    };
    for step in 0..steps {
        let roll = r.gen_range(0..100u32);
        let (action, write) = if roll < 3 {
            // Create a family whose name is not live.
            let free: Vec<&str> = NAMES.iter().copied().filter(|n| !live.contains_key(*n)).collect();
            if free.is_empty() {
                continue;
            }
            let name = free[r.gen_range(0..free.len())].to_string();
            let n = created.entry(name.clone()).or_insert(0);
            *n += 1;
            live.insert(name.clone(), *n);
            p.creates += 1;
            (Action::Create(name), Some(Write { mutations: Vec::new(), sync: true, batch: false }))
        } else if roll < 5 {
            // Drop a family other than the default one.
            let names: Vec<String> = live.keys().filter(|n| n.as_str() != "default").cloned().collect();
            if names.is_empty() {
                continue;
            }
            let name = names[r.gen_range(0..names.len())].clone();
            live.remove(&name);
            p.drops += 1;
            let (begin, end) = family_range(&name);
            (
                Action::Drop(name),
                Some(Write { mutations: vec![Mutation::DeleteRange { begin, end }], sync: true, batch: false }),
            )
        } else if roll < 20 {
            // A transaction over random live families: committed, or rolled back whole or to a savepoint.
            let sync = r.gen_ratio(1, 4);
            let mut ops = Vec::new();
            let mut kept: Vec<Mutation> = Vec::new();
            let mut before_savepoint: Option<usize> = None;
            for _ in 0..r.gen_range(1..=5) {
                if before_savepoint.is_none() && r.gen_ratio(1, 4) {
                    ops.push(TxnOp::Savepoint);
                    before_savepoint = Some(kept.len());
                }
                let name = pick_live(&mut r, &live);
                let k = key(r.gen_range(0..cfg.keys));
                if r.gen_ratio(1, 3) {
                    ops.push(TxnOp::GetForUpdate(name.clone(), k.clone()));
                }
                let m = match r.gen_range(0..6) {
                    0 => Mutation::Delete { key: k },
                    1 => Mutation::Merge { key: k, operand: vec![r.gen_range(b'a'..=b'z')] },
                    _ => Mutation::Put { key: k, value: shaledb_testkit::random_value(&mut r, cfg.max_value) },
                };
                kept.push(in_family(&name, &m));
                ops.push(TxnOp::Update(name, m));
            }
            let rollback_to_savepoint = before_savepoint.is_some() && r.gen_ratio(1, 2);
            if let (true, Some(n)) = (rollback_to_savepoint, before_savepoint) {
                kept.truncate(n);
            }
            let commit = !r.gen_ratio(1, 4);
            if commit {
                p.commits += 1;
            } else {
                p.rollbacks += 1;
            }
            let write = commit.then_some(Write { mutations: kept, sync, batch: true });
            (Action::Txn { ops, rollback_to_savepoint, commit, sync }, write)
        } else {
            // A write (or batch) with each update in a random live family; a range deletion in one family.
            let w = random_write(&mut r, cfg);
            let ops: Vec<(String, Mutation)> =
                w.mutations.iter().map(|m| (pick_live(&mut r, &live), m.clone())).collect();
            let mutations = ops.iter().map(|(name, m)| in_family(name, m)).collect();
            (Action::Write { ops, sync: w.sync }, Some(Write { mutations, sync: w.sync, batch: w.batch }))
        };
        if let Some(w) = &write {
            history.push(w.clone());
        }
        let flush = r.gen_ratio(1, 40).then(|| pick_live(&mut r, &live));
        let compact = r.gen_ratio(1, 150).then(|| pick_live(&mut r, &live));
        // Snapshots: one held at a time, for 10 to 80 steps, then read back in full.
        let snapshot = if held_until.is_some_and(|until| step >= until) {
            held_until = None;
            SnapshotAction::Release
        } else if held_until.is_none() && r.gen_ratio(1, 15) {
            held_until = Some(step + r.gen_range(10..80));
            SnapshotAction::Take(live.iter().map(|(n, i)| (n.clone(), *i)).collect())
        } else {
            SnapshotAction::Keep
        };
        p.steps.push(Step { action, write, flush, compact, snapshot });
    }
    p.history = history;
    p
}

/// A live family's handle and incarnation.
struct Live {
    handle: ColumnFamily,
    incarnation: u32,
}

/// A held snapshot: the history length when it was taken, and the families live then.
struct Held {
    snapshot: Snapshot,
    at: usize,
    families: Vec<(String, u32)>,
}

/// Runs `plan` on a new database opened with `opts`, calling `acked(n)` once `n` writes are acknowledged.
/// Returns how many held snapshots were read back, and what each acknowledged write was (for reports).
fn execute(
    plan: &Plan,
    dir: &Path,
    opts: &Options,
    flavour: Flavour,
    keys: u32,
    acked: &mut dyn FnMut(usize),
) -> (usize, Vec<String>) {
    let (db, handles) = open_listed_at(dir, opts).expect("open a new database");
    let txns = match flavour {
        Flavour::Pessimistic => Txns::Pessimistic(TransactionDb::from_db(db, TransactionDbOptions::default())),
        Flavour::Optimistic => Txns::Optimistic(OptimisticTransactionDb::from_db(db)),
    };
    let mut live: BTreeMap<String, Live> =
        handles.into_iter().map(|(n, handle)| (n, Live { handle, incarnation: 0 })).collect();
    let mut incarnations: BTreeMap<String, u32> = BTreeMap::new();
    let mut held: Option<Held> = None;
    let mut snapshots_checked = 0;
    let mut kinds: Vec<String> = Vec::new();
    let mut done = 0usize;
    let handle = |live: &BTreeMap<String, Live>, name: &str| live[name].handle.clone();
    for (i, step) in plan.steps.iter().enumerate() {
        let db = txns.db();
        match &step.action {
            Action::Create(name) => {
                let h = db.create_column_family(name, opts.clone()).expect("create_column_family");
                let n = incarnations.entry(name.clone()).or_insert(0);
                *n += 1;
                kinds.push(format!("create {name} (id {})", h.id()));
                live.insert(name.clone(), Live { handle: h, incarnation: *n });
            }
            Action::Drop(name) => {
                let gone = live.remove(name).expect("live");
                db.drop_column_family(&gone.handle).expect("drop_column_family");
                kinds.push(format!("drop {name} (id {})", gone.handle.id()));
            }
            Action::Txn { ops, rollback_to_savepoint, commit, sync } => {
                let mut t = txns.begin(&WriteOptions { sync: *sync, ..WriteOptions::default() });
                for op in ops {
                    match op {
                        TxnOp::Savepoint => t.set_savepoint(),
                        TxnOp::GetForUpdate(name, k) => {
                            t.get_for_update_cf(&handle(&live, name), k).expect("get_for_update_cf");
                        }
                        TxnOp::Update(name, m) => {
                            let h = handle(&live, name);
                            match m {
                                Mutation::Put { key, value } => t.put_cf(&h, key, value),
                                Mutation::Delete { key } => t.delete_cf(&h, key),
                                Mutation::Merge { key, operand } => t.merge_cf(&h, key, operand),
                                other => panic!("no transaction update {other:?}"),
                            }
                            .expect("transaction update");
                        }
                    }
                }
                if *rollback_to_savepoint {
                    t.rollback_to_savepoint().expect("rollback_to_savepoint");
                }
                if *commit {
                    t.commit().expect("commit");
                    kinds.push(format!("transaction{}", if *sync { ", sync" } else { "" }));
                } else {
                    t.rollback().expect("rollback");
                }
            }
            Action::Write { ops, sync } => {
                let mut b = WriteBatch::new();
                for (name, m) in ops {
                    let h = handle(&live, name);
                    match m {
                        Mutation::Put { key, value } => b.put_cf(&h, key, value),
                        Mutation::Delete { key } => b.delete_cf(&h, key),
                        Mutation::SingleDelete { key } => b.single_delete_cf(&h, key),
                        Mutation::Merge { key, operand } => b.merge_cf(&h, key, operand),
                        Mutation::DeleteRange { begin, end } => b.delete_range_cf(&h, begin, end),
                    };
                }
                db.write_opt(&WriteOptions { sync: *sync, ..WriteOptions::default() }, &b)
                    .unwrap_or_else(|e| panic!("step {i}: write failed without any fault: {e}"));
                kinds.push(format!("write{}", if *sync { ", sync" } else { "" }));
            }
        }
        if step.write.is_some() {
            done += 1;
            acked(done);
        }
        if let Some(name) = &step.flush {
            db.flush_cf(&handle(&live, name)).expect("flush_cf");
            if let Some(k) = kinds.last_mut() {
                k.push_str(&format!(" then flush {name}"));
            }
        }
        if let Some(name) = &step.compact {
            db.compact_range_cf(&handle(&live, name), None, None).expect("compact_range_cf");
            if let Some(k) = kinds.last_mut() {
                k.push_str(&format!(" then compact {name}"));
            }
        }
        match &step.snapshot {
            SnapshotAction::Keep => {}
            SnapshotAction::Take(families) => {
                held = Some(Held { snapshot: db.snapshot(), at: done, families: families.clone() });
            }
            SnapshotAction::Release => {
                let h = held.take().expect("a snapshot is held");
                // Families dropped (or dropped and created again) since are not read through.
                let now: Vec<&str> = h
                    .families
                    .iter()
                    .filter(|(n, inc)| live.get(n).is_some_and(|l| l.incarnation == *inc))
                    .map(|(n, _)| n.as_str())
                    .collect();
                let handles: BTreeMap<String, ColumnFamily> =
                    now.iter().map(|n| (n.to_string(), handle(&live, n))).collect();
                let read = ReadOptions { snapshot: Some(h.snapshot), ..ReadOptions::default() };
                let seen = read_families(db, &handles, &read).expect("read at a snapshot");
                let want = restrict(&plan.history.model_after(h.at), &now);
                assert!(seen == want, "step {i}: the snapshot taken after write {} reads a different state", h.at);
                check_gets(db, &handles, &read, &want, keys).unwrap_or_else(|e| panic!("step {i}: {e}"));
                snapshots_checked += 1;
            }
        }
    }
    (snapshots_checked, kinds)
}

/// Plans and runs `steps` steps on a [`MemFs`], keeping a copy of the file system before every mutating file
/// operation.
fn run_workload(seed: u64, opts: &Options, cfg: &WorkloadConfig, steps: usize, flavour: Flavour) -> Run {
    let plan = plan(seed, cfg, steps);
    let fs = MemFs::new();
    fs.record_before(|op, _, _| op.is_mutation());
    let (snapshots_checked, kinds) =
        execute(&plan, Path::new(DB), &opts_on(&fs, opts), flavour, cfg.keys, &mut |n| fs.set_tag(n as u64));
    Run {
        recorded: fs.stop_recording(),
        snapshots_checked,
        creates: plan.creates,
        drops: plan.drops,
        commits: plan.commits,
        rollbacks: plan.rollbacks,
        kinds,
        history: plan.history,
    }
}

/// Crashes one recorded copy and checks what a reopen recovers.
fn check_crash(run: &Run, rec: &Recorded, crash: Crash, seed: u64, opts: &Options, keys: u32) -> Result<(), String> {
    let (fs, lo, hi) = crash_copy(&run.history, rec, crash, seed);
    let (db, handles) = open_listed(&opts_on(&fs, opts)).map_err(|e| format!("open failed: {e}"))?;
    let read = ReadOptions::default();
    let observed = read_families(&db, &handles, &read).map_err(|e| format!("scan failed: {e}"))?;
    check_gets(&db, &handles, &read, &observed, keys)?;
    let k = run.history.check(&observed, lo, hi).map_err(|e| {
        if std::env::var_os("SHALEDB_MIXED_DEBUG").is_none() {
            return e;
        }
        let from = lo.saturating_sub(12);
        let kinds: Vec<String> =
            (from..hi.min(run.kinds.len())).map(|i| format!("  #{} {}", i + 1, run.kinds[i])).collect();
        let files: Vec<String> = fs.list(std::path::Path::new(DB)).unwrap_or_default();
        format!("{e}\n families {:?}\n files {files:?}\n{}", handles.keys().collect::<Vec<_>>(), kinds.join("\n"))
    })?;
    let listed: Vec<String> = handles.keys().cloned().collect();
    let again = fs.deep_clone();
    drop(handles);
    drop(db);
    again.power_loss(PowerLoss::DropUnsynced, seed ^ 1);
    let (db, handles) = open_listed(&opts_on(&again, opts)).map_err(|e| format!("second open failed: {e}"))?;
    let second = read_families(&db, &handles, &read).map_err(|e| format!("second scan failed: {e}"))?;
    let relisted: Vec<String> = handles.keys().cloned().collect();
    if second != observed || relisted != listed {
        return Err(format!(
            "a power loss right after recovery changed the state (prefix {k}, families {listed:?} -> {relisted:?})"
        ));
    }
    Ok(())
}

fn sweep(name: &str, flavour: Flavour, steps: usize, points: usize) {
    watch_background_panics();
    let seed = seed_from_env(0x5EED_00F7) ^ flavour as u64;
    let opts = tiny_options(Arc::new(MemFs::new()));
    let cfg = WorkloadConfig { keys: 60, delete_range_one_in: 15, ..WorkloadConfig::default() };
    let steps = steps * budget() as usize;
    let points = points * budget() as usize;
    let run = run_workload(seed, &opts, &cfg, steps, flavour);
    assert!(run.creates > 0 && run.drops > 0 && run.commits > 0 && run.rollbacks > 0 && run.snapshots_checked > 0);
    let step = (run.recorded.len() / points.max(1)).max(1);
    let mut failures = Vec::new();
    let mut checked = 0usize;
    for (n, rec) in run.recorded.iter().enumerate().filter(|(n, _)| n % step == 0) {
        let crashes: Vec<Crash> = if n % (7 * step) == 0 { CRASHES.to_vec() } else { vec![CRASHES[n / step % 5]] };
        for crash in crashes {
            checked += 1;
            let crash_seed = seed ^ (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            if let Err(e) = check_crash(&run, rec, crash, crash_seed, &opts, cfg.keys) {
                failures.push(format!(
                    "copy {n} (before {:?} of {} at op {}, {} writes acked), {crash:?}: {e}",
                    rec.op,
                    rec.path.display(),
                    rec.index,
                    rec.tag
                ));
            }
        }
    }
    eprintln!(
        "{name}: {steps} steps, {} writes acked ({} families created, {} dropped, {} transactions committed, {} \
         rolled back, {} snapshots read back), {} copies recorded, {checked} crashes checked",
        run.history.len(),
        run.creates,
        run.drops,
        run.commits,
        run.rollbacks,
        run.snapshots_checked,
        run.recorded.len()
    );
    assert_no_background_panics();
    assert!(failures.is_empty(), "{name}: {} of {checked} crashes failed:\n{}", failures.len(), failures.join("\n"));
}

/// Families created and dropped mid-run, pessimistic transactions, range deletions under held snapshots.
#[test]
fn power_loss_sweep_mixed_features_pessimistic() {
    sweep("mixed, pessimistic", Flavour::Pessimistic, 500, 300);
}

/// The same with optimistic transactions.
#[test]
fn power_loss_sweep_mixed_features_optimistic() {
    sweep("mixed, optimistic", Flavour::Optimistic, 500, 300);
}

/// Writes `k` unsynced in the default family, runs `barrier`, cuts the power (dropping every unsynced byte)
/// and reopens: the families listed and the value of `k` afterwards.
fn power_loss_after(barrier: &dyn Fn(&Db, &MemFs, &Options)) -> (Vec<String>, Option<Vec<u8>>) {
    let fs = MemFs::new();
    let opts = tiny_options(Arc::new(fs.clone()));
    let (db, handles) = open_listed(&opts).expect("open");
    db.put("k", "unsynced").expect("put");
    db.put_cf(&db.create_column_family("old", opts.clone()).expect("create"), "x", "y").expect("put_cf");
    db.sync_wal().expect("sync_wal");
    db.put("k", "acknowledged before the barrier").expect("put");
    barrier(&db, &fs, &opts);
    let crashed = fs.deep_clone();
    drop(handles);
    drop(db);
    crashed.power_loss(PowerLoss::DropUnsynced, 7);
    let (db, handles) = open_listed(&opts_on(&crashed, &opts)).expect("reopen");
    let v = db.get("k").expect("get");
    (handles.keys().cloned().collect(), v)
}

/// Bug found by the mixed sweep: a family's creation, durable when it returned, could survive a power loss that
/// took writes acknowledged before it (the state after no prefix of the acknowledged operations). The creation
/// now syncs the WAL before its MANIFEST edit.
#[test]
fn writes_acknowledged_before_a_family_creation_survive_when_it_does() {
    let (families, v) = power_loss_after(&|db, _, opts| {
        db.create_column_family("new", opts.clone()).expect("create");
    });
    assert_eq!(families, ["default", "new", "old"]);
    assert_eq!(v.as_deref(), Some(&b"acknowledged before the barrier"[..]));
}

/// The same for a drop.
#[test]
fn writes_acknowledged_before_a_family_drop_survive_when_it_does() {
    let (families, v) = power_loss_after(&|db, _, _| {
        db.drop_column_family(&db.column_family("old").expect("live")).expect("drop");
    });
    assert_eq!(families, ["default"]);
    assert_eq!(v.as_deref(), Some(&b"acknowledged before the barrier"[..]));
}

/// Bug found by the mixed sweep: an empty write (and a transaction whose writes were all rolled back to a
/// savepoint) acknowledged with `sync` returned without syncing, so writes acknowledged before it could be
/// lost. It now syncs the WAL, as LevelDB's and RocksDB's do.
#[test]
fn an_empty_synced_write_or_commit_makes_earlier_writes_durable() {
    let synced = WriteOptions { sync: true, ..WriteOptions::default() };
    let (_, v) = power_loss_after(&|db, _, _| {
        db.write_opt(&synced, &WriteBatch::new()).expect("empty synced write");
    });
    assert_eq!(v.as_deref(), Some(&b"acknowledged before the barrier"[..]));
    for flavour in [Flavour::Pessimistic, Flavour::Optimistic] {
        let fs = MemFs::new();
        let opts = tiny_options(Arc::new(fs.clone()));
        let (db, _) = open_listed(&opts).expect("open");
        let txns = match flavour {
            Flavour::Pessimistic => Txns::Pessimistic(TransactionDb::from_db(db, TransactionDbOptions::default())),
            Flavour::Optimistic => Txns::Optimistic(OptimisticTransactionDb::from_db(db)),
        };
        txns.db().put("k", "acknowledged before the commit").expect("put");
        let mut t = txns.begin(&synced);
        t.set_savepoint();
        t.put("k", "rolled back").expect("txn put");
        t.rollback_to_savepoint().expect("rollback_to_savepoint");
        t.commit().expect("empty commit");
        let crashed = fs.deep_clone();
        drop(txns);
        crashed.power_loss(PowerLoss::DropUnsynced, 7);
        let (db, _) = open_listed(&opts_on(&crashed, &opts)).expect("reopen");
        assert_eq!(db.get("k").expect("get").as_deref(), Some(&b"acknowledged before the commit"[..]), "{flavour:?}");
    }
}

const KILL_DIR_VAR: &str = "SHALEDB_MIXED_KILL_DIR";
const KILL_SEED_VAR: &str = "SHALEDB_MIXED_KILL_SEED";
/// Steps a killed child plans (it is killed long before the end, or ends by itself on a fast machine).
const KILL_STEPS: usize = 1500;

fn kill_cfg() -> WorkloadConfig {
    WorkloadConfig { keys: 60, delete_range_one_in: 15, ..WorkloadConfig::default() }
}

fn kill_flavour(seed: u64) -> Flavour {
    if seed.is_multiple_of(2) {
        Flavour::Pessimistic
    } else {
        Flavour::Optimistic
    }
}

/// The child side of [`kill_loop_with_mixed_features`]: does nothing unless started by it. Runs the plan of its
/// seed on the real file system, printing `acked N` after each acknowledged write.
#[test]
fn mixed_kill_child() {
    let Ok(dir) = std::env::var(KILL_DIR_VAR) else { return };
    let seed: u64 = std::env::var(KILL_SEED_VAR).ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let cfg = kill_cfg();
    let plan = plan(seed, &cfg, KILL_STEPS);
    let opts = tiny_options(Arc::new(PosixFs::new()));
    println!("mixed child: running");
    execute(&plan, Path::new(&dir), &opts, kill_flavour(seed), cfg.keys, &mut |n| println!("acked {n}"));
    println!("mixed child: done");
}

/// SIGKILL over the mixed workload on the real file system (D2, D3, D13, D28): a child runs a seeded plan of
/// family creations and drops, transactions committed and rolled back, batches across families with range
/// deletions, snapshots, flushes and compactions, and is killed after a random number of acknowledged writes
/// (and a random few hundred microseconds more); the parent plans the same run from the seed, reopens the
/// directory with the families its MANIFEST lists and checks it holds the state after every write the child
/// acknowledged, and at most the one in flight. `SHALEDB_CRASH_CYCLES` sets the number of kills (default 6).
#[test]
fn kill_loop_with_mixed_features() {
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::{Duration, Instant};
    let base = seed_from_env(0x5EED_00F8);
    let cycles = shaledb_testkit::budget_from_env("SHALEDB_CRASH_CYCLES", 6).max(1);
    let cfg = kill_cfg();
    let mut r = rng(base);
    let mut killed_runs = 0;
    let mut acked_total = 0;
    for cycle in 0..cycles {
        let seed = base.wrapping_add(cycle);
        let tmp = shaledb_testkit::tempdir();
        let dir = tmp.path().join("db");
        let envs = [(KILL_DIR_VAR, dir.display().to_string()), (KILL_SEED_VAR, seed.to_string())];
        let (mut child, rx, reader) = crate::spawn_self("mixed_crash::mixed_kill_child", &envs);
        let target = r.gen_range(20..700usize);
        let extra = Duration::from_micros(r.gen_range(0..800));
        let started = Instant::now();
        let mut kill_at: Option<Instant> = None;
        let mut killed = false;
        let mut acked = 0usize;
        let mut lines = Vec::new();
        loop {
            if !killed && kill_at.is_some_and(|t| Instant::now() >= t) {
                // SIGKILL: the child gets no chance to flush or sync anything.
                let _ = child.kill();
                killed = true;
            }
            match rx.recv_timeout(Duration::from_micros(200)) {
                Ok(line) => {
                    if let Some(n) = line.split_once("acked ").and_then(|(_, n)| n.trim().parse::<usize>().ok()) {
                        acked = n;
                        if n >= target && kill_at.is_none() {
                            kill_at = Some(Instant::now() + extra);
                        }
                    }
                    lines.push(line);
                }
                Err(RecvTimeoutError::Timeout) => {
                    if !killed && started.elapsed() > Duration::from_secs(120) {
                        let _ = child.kill();
                        killed = true;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let status = child.wait().expect("wait for the child");
        let _ = reader.join();
        let finished = lines.iter().any(|l| l.contains("mixed child: done"));
        assert!(
            killed || (finished && status.success()),
            "cycle {cycle} (seed {seed}): the child failed ({status:?}):\n{}",
            lines.iter().rev().take(20).cloned().collect::<Vec<_>>().join("\n")
        );
        killed_runs += usize::from(!finished);
        acked_total += acked;
        let plan = plan(seed, &cfg, KILL_STEPS);
        let opts = tiny_options(Arc::new(PosixFs::new()));
        let (db, handles) = open_listed_at(&dir, &opts).unwrap_or_else(|e| panic!("cycle {cycle}: open failed: {e}"));
        let read = ReadOptions::default();
        let observed = read_families(&db, &handles, &read).unwrap_or_else(|e| panic!("cycle {cycle}: scan: {e}"));
        check_gets(&db, &handles, &read, &observed, cfg.keys).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        let hi = (acked + 1).min(plan.history.len());
        if let Err(e) = plan.history.check(&observed, acked, hi) {
            panic!("cycle {cycle} (seed {seed}, killed after {acked} acknowledged writes): {e}");
        }
    }
    eprintln!(
        "mixed kill loop: {cycles} runs, {killed_runs} killed mid-run, {acked_total} acknowledged writes checked"
    );
}
