//! One sysbench client: the events of a test as statements ([`super::workload`]), each run on the table layer
//! as MySQL runs it on MyRocks ([`exec`]).

use super::data::{SbRand, COL_C, COL_K};
use super::workload::{Kind, RangeKind, Shape, Stmt};
use crate::engine::{Engine, WriteMode};
use crate::table_suites::table::{Row, Session, SessionStats, Table, TableError, TableResult, Value};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

/// What one client did in a test.
pub(super) struct ClientTotals {
    /// Events (sysbench's transactions).
    pub(super) events: u64,
    /// Statements, BEGIN/COMMIT included.
    pub(super) statements: u64,
    /// What its session asked of the engine.
    pub(super) stats: SessionStats,
}

/// One client thread of a timed test: events of `kind` until `deadline` (or `stop`), each statement run by
/// [`exec`], `counter` counting statements.
pub(super) fn client<E: Engine>(
    engine: &E,
    tables: &[Table],
    next_ids: &[AtomicI64],
    shape: Shape,
    kind: Kind,
    seed: u64,
    deadline: Instant,
    stop: &AtomicBool,
    counter: &AtomicU64,
) -> TableResult<ClientTotals> {
    let mut s = Session::new(engine, WriteMode::default());
    let mut r = SbRand::new(seed);
    let mut stmts = Vec::new();
    let mut scratch = Scratch::default();
    let mut totals = ClientTotals { events: 0, statements: 0, stats: SessionStats::default() };
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        stmts.clear();
        shape.event(kind, &mut r, &mut stmts);
        for st in &stmts {
            exec(&mut s, tables, next_ids, st, &mut scratch)?;
        }
        totals.events += 1;
        totals.statements += stmts.len() as u64;
        counter.fetch_add(stmts.len() as u64, Ordering::Relaxed);
    }
    totals.stats = s.stats();
    Ok(totals)
}

/// Reusable buffers of one client.
#[derive(Default)]
struct Scratch {
    row: Row,
    strings: Vec<Vec<u8>>,
    ids: Vec<i64>,
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
        Value::Str(_) => 0,
    }
}

pub(super) fn str_len(v: &Value) -> usize {
    match v {
        Value::Str(s) => s.len(),
        _ => 0,
    }
}

/// Runs one statement as MySQL would on MyRocks: point reads and PK ranges on the PK index, updates that read
/// the row and write the changed row and index entries, IN-lists as one read (or one write batch) per
/// distinct listed id in id order.
fn exec<E: Engine>(
    s: &mut Session<'_, E>,
    tables: &[Table],
    next_ids: &[AtomicI64],
    st: &Stmt,
    x: &mut Scratch,
) -> TableResult<()> {
    let table = |t: usize| {
        tables.get(t).ok_or_else(|| TableError::Invalid(format!("statement on table {} of {}", t + 1, tables.len())))
    };
    match st {
        Stmt::Begin | Stmt::Commit => {}
        Stmt::PointSelect { t, id } => {
            if s.get(table(*t)?, &[Value::Int(*id)], &mut x.row)? {
                std::hint::black_box(x.row.get(COL_C));
            }
        }
        Stmt::Range { t, lo, hi, what } => {
            let tb = table(*t)?;
            let (lo, hi) = ([Value::Int(*lo)], [Value::Int(*hi)]);
            match what {
                RangeKind::Simple => {
                    s.range_pk(tb, &lo, &hi, &mut |r| {
                        std::hint::black_box(r.get(COL_C));
                        true
                    })?;
                }
                RangeKind::Sum => {
                    let mut sum = 0i64;
                    s.range_pk(tb, &lo, &hi, &mut |r| {
                        sum = sum.wrapping_add(r.get(COL_K).map_or(0, int));
                        true
                    })?;
                    std::hint::black_box(sum);
                }
                RangeKind::Order | RangeKind::Distinct => {
                    x.strings.clear();
                    let strings = &mut x.strings;
                    s.range_pk(tb, &lo, &hi, &mut |r| {
                        if let Some(Value::Str(c)) = r.get(COL_C) {
                            strings.push(c.clone());
                        }
                        true
                    })?;
                    x.strings.sort_unstable();
                    if *what == RangeKind::Distinct {
                        x.strings.dedup();
                    }
                    std::hint::black_box(x.strings.len());
                }
            }
        }
        Stmt::IndexUpdate { t, id } => {
            s.update(table(*t)?, &[Value::Int(*id)], &mut |r| {
                if let Some(Value::Int(k)) = r.get_mut(COL_K) {
                    *k += 1;
                }
            })?;
        }
        Stmt::NonIndexUpdate { t, id, c } => {
            s.update(table(*t)?, &[Value::Int(*id)], &mut |r| {
                if let Some(v) = r.get_mut(COL_C) {
                    *v = Value::Str(c.clone());
                }
            })?;
        }
        Stmt::Delete { t, id } => {
            s.delete(table(*t)?, &[Value::Int(*id)])?;
        }
        Stmt::Insert { t, id, k, c, pad } => {
            let tb = table(*t)?;
            let id = match id {
                Some(id) => *id,
                None => next_ids.get(*t).map_or(0, |n| n.fetch_add(1, Ordering::Relaxed)),
            };
            let row = [Value::Int(id), Value::Int(*k), Value::Str(c.clone()), Value::Str(pad.clone())];
            s.insert(tb, &row)?;
        }
        Stmt::InlistSelect { t, ids } => {
            let tb = table(*t)?;
            x.ids.clear();
            x.ids.extend_from_slice(ids);
            x.ids.sort_unstable();
            x.ids.dedup();
            for &id in &x.ids {
                if s.get(tb, &[Value::Int(id)], &mut x.row)? {
                    std::hint::black_box(x.row.get(COL_C));
                }
            }
        }
        Stmt::InlistUpdate { t, ids, c } => {
            let tb = table(*t)?;
            x.ids.clear();
            x.ids.extend_from_slice(ids);
            x.ids.sort_unstable();
            x.ids.dedup();
            let pks: Vec<Vec<Value>> = x.ids.iter().map(|id| vec![Value::Int(*id)]).collect();
            s.update_many(tb, &pks, &mut |r| {
                if let Some(v) = r.get_mut(COL_C) {
                    *v = Value::Str(c.clone());
                }
            })?;
        }
    }
    Ok(())
}
