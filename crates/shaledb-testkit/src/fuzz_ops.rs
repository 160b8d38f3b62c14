//! The `ops` fuzz driver: the input is a program of writes (puts, deletes, single deletions keeping their
//! contract, merges, range deletions, batches mixing them), flushes, compactions, snapshots and reopens, run on
//! a small database in memory and on the model side by side. Every write's key reads back as the model says;
//! a snapshot, when released, reads back the model as it was; at the end a full scan both ways equals the model.
//!
//! Program: pairs of bytes `op key`, some ops reading one more byte (a length or a width). At most
//! [`MAX_OPS`] ops run, so any input ends quickly.

use crate::history::{string_append, MergeFn};
use crate::Model;
use shaledb::{Db, Options, ReadOptions, Snapshot, WriteBatch};
use shaledb_vfs::MemFs;
use std::collections::HashMap;
use std::sync::Arc;

/// Ops run per input at most.
pub const MAX_OPS: usize = 300;

const DB: &str = "/db";

/// Key `k % 24` (`k00`..`k23`); a range deletion's end may name up to `k29`.
fn key(k: u8) -> Vec<u8> {
    format!("k{:02}", k % 24).into_bytes()
}

/// What SingleDelete's contract allows for a key: a single deletion only right after exactly one put, with
/// nothing else since the key was last single-deleted (or since the start).
#[derive(Clone, Copy, PartialEq)]
enum Sd {
    Clean,
    PutOnce,
    Tainted,
}

struct Run {
    db: Option<Db>,
    fs: MemFs,
    opts: Options,
    model: Model,
    merge: MergeFn,
    sd: HashMap<Vec<u8>, Sd>,
    held: Option<(Snapshot, Model)>,
}

/// One write, applied to a batch (or the database directly) and to the model.
enum W {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    SingleDelete(Vec<u8>),
    Merge(Vec<u8>, Vec<u8>),
    DeleteRange(Vec<u8>, Vec<u8>),
}

impl Run {
    fn db(&self) -> &Db {
        self.db.as_ref().expect("the database is open between ops")
    }

    fn state(&self, k: &[u8]) -> Sd {
        self.sd.get(k).copied().unwrap_or(Sd::Clean)
    }

    /// The write op `op` on key `k`, `arg` its extra byte; a single deletion the contract forbids becomes a
    /// delete. Updates the contract states as if the write happens.
    fn write_of(&mut self, op: u8, k: u8, arg: u8) -> W {
        let kb = key(k);
        match op % 5 {
            0 => {
                let next = if self.state(&kb) == Sd::Clean { Sd::PutOnce } else { Sd::Tainted };
                self.sd.insert(kb.clone(), next);
                W::Put(kb, vec![arg; usize::from(arg % 48)])
            }
            1 => {
                self.sd.insert(kb.clone(), Sd::Tainted);
                W::Delete(kb)
            }
            2 if self.state(&kb) == Sd::PutOnce => {
                self.sd.insert(kb.clone(), Sd::Clean);
                W::SingleDelete(kb)
            }
            2 => {
                self.sd.insert(kb.clone(), Sd::Tainted);
                W::Delete(kb)
            }
            3 => {
                self.sd.insert(kb.clone(), Sd::Tainted);
                W::Merge(kb, vec![b'a' + arg % 26])
            }
            _ => {
                let end = format!("k{:02}", k % 24 + 1 + arg % 6).into_bytes();
                for (key, s) in self.sd.iter_mut() {
                    if *key >= kb && *key < end {
                        *s = Sd::Tainted;
                    }
                }
                W::DeleteRange(kb, end)
            }
        }
    }

    fn apply_model(&mut self, w: &W) {
        match w {
            W::Put(k, v) => {
                self.model.put(k, v);
            }
            W::Delete(k) => {
                self.model.delete(k);
            }
            W::SingleDelete(k) => {
                self.model.single_delete(k);
            }
            W::Merge(k, op) => {
                let merge = self.merge.clone();
                self.model.merge(k, op, |old, operand| merge(k, old, operand));
            }
            W::DeleteRange(b, e) => {
                self.model.delete_range(b, e);
            }
        }
    }

    fn add(batch: &mut WriteBatch, w: &W) {
        match w {
            W::Put(k, v) => batch.put(k, v),
            W::Delete(k) => batch.delete(k),
            W::SingleDelete(k) => batch.single_delete(k),
            W::Merge(k, op) => batch.merge(k, op),
            W::DeleteRange(b, e) => batch.delete_range(b, e),
        };
    }

    fn check_key(&self, k: &[u8], what: &str) {
        let got = self.db().get(k).unwrap_or_else(|e| panic!("{what}: get failed: {e}"));
        assert_eq!(
            got.as_deref(),
            self.model.get(k),
            "{what}: get({}) disagrees with the model",
            crate::history::show(k)
        );
    }
}

/// Key-value pairs in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A forward and a backward scan (the latter reversed into key order).
fn read_all(db: &Db, opts: &ReadOptions) -> (Entries, Entries) {
    let fwd: Vec<_> = db.iter_opt(opts).collect::<Result<_, _>>().expect("a forward scan");
    let mut back: Vec<_> = db.iter_opt(opts).rev().collect::<Result<_, _>>().expect("a backward scan");
    back.reverse();
    (fwd, back)
}

fn check_all(db: &Db, opts: &ReadOptions, model: &Model, what: &str) {
    let want: Vec<_> = model.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    let (fwd, back) = read_all(db, opts);
    assert!(fwd == want, "{what}: the forward scan disagrees with the model");
    assert!(back == want, "{what}: the backward scan disagrees with the model");
}

/// The driver.
pub fn ops(data: &[u8]) {
    let fs = MemFs::new();
    let opts = crate::workload::tiny_options(Arc::new(fs.clone()));
    let db = Db::open(DB, opts.clone()).expect("open a new database in memory");
    let mut run =
        Run { db: Some(db), fs, opts, model: Model::new(), merge: string_append(), sd: HashMap::new(), held: None };
    let mut i = 0;
    let mut n = 0;
    let byte = |i: &mut usize| -> u8 {
        let b = data.get(*i).copied().unwrap_or(0);
        *i += 1;
        b
    };
    while i + 1 < data.len() && n < MAX_OPS {
        n += 1;
        let (op, k) = (byte(&mut i), byte(&mut i));
        let what = format!("op {n} ({op:#04x} {k:#04x})");
        match op % 16 {
            0..=9 => {
                let w = run.write_of(op, k, byte(&mut i));
                let mut b = WriteBatch::new();
                Run::add(&mut b, &w);
                run.db().write(&b).unwrap_or_else(|e| panic!("{what}: write failed: {e}"));
                run.apply_model(&w);
                let probe = match &w {
                    W::Put(k, _) | W::Delete(k) | W::SingleDelete(k) | W::Merge(k, _) | W::DeleteRange(k, _) => {
                        k.clone()
                    }
                };
                run.check_key(&probe, &what);
            }
            10 => {
                // A batch of 2 to 5 writes, applied in order.
                let mut b = WriteBatch::new();
                let mut ws = Vec::new();
                for _ in 0..2 + k % 4 {
                    let (o, kk, a) = (byte(&mut i), byte(&mut i), byte(&mut i));
                    let w = run.write_of(o, kk, a);
                    Run::add(&mut b, &w);
                    ws.push(w);
                }
                run.db().write(&b).unwrap_or_else(|e| panic!("{what}: batch failed: {e}"));
                for w in &ws {
                    run.apply_model(w);
                }
                check_all(run.db(), &ReadOptions::default(), &run.model, &what);
            }
            11 => run.db().flush().unwrap_or_else(|e| panic!("{what}: flush failed: {e}")),
            12 => run.db().compact_range(None, None).unwrap_or_else(|e| panic!("{what}: compaction failed: {e}")),
            13 | 14 => match run.held.take() {
                Some((snapshot, then)) => {
                    let opts = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
                    check_all(run.db(), &opts, &then, &format!("{what}: at the snapshot"));
                }
                None => run.held = Some((run.db().snapshot(), run.model.clone())),
            },
            _ => {
                // Reopen: every write is in the WAL or a table (a clean close).
                run.held = None;
                let db = run.db.take().expect("open");
                db.close().unwrap_or_else(|e| panic!("{what}: close failed: {e}"));
                let reopened = Db::open(DB, Options { fs: Arc::new(run.fs.clone()), ..run.opts.clone() });
                run.db = Some(reopened.unwrap_or_else(|e| panic!("{what}: reopen failed: {e}")));
            }
        }
    }
    if let Some((snapshot, then)) = run.held.take() {
        let opts = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
        check_all(run.db(), &opts, &then, "the end: at the snapshot");
    }
    check_all(run.db(), &ReadOptions::default(), &run.model, "the end");
}
