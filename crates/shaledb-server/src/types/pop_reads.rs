//! What the pops of sets and sorted sets read, counted (store::ReadCounts), on redis-benchmark's workload
//! at a smaller scale: SADD (ZADD) of `element:<random below 1,000,000>` in groups of 50 commands, then
//! SPOP (ZPOPMIN) until the collection is empty, each called as the commit step calls it.
//!
//! The pops run in one group, so every member record they delete stays a pending delete the scans merge
//! in and count (the engine counts no tombstones its cursors step over); the dead ranges the commit step
//! keeps (dead.rs) live across groups anyway.

use crate::keys::Type;
use crate::store::{Reads, WriteCtx};
use crate::types::testing::{group, temp_db};
use crate::types::{set, zset};
use bytes::Bytes;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

const ADDS: usize = 20_000;
const GROUP: usize = 50;

/// The figures per pop: the mean of each count, and the most seeks and steps one pop took.
#[derive(Debug)]
struct PerPop {
    pops: usize,
    gets: f64,
    seeks: f64,
    steps: f64,
    max_seeks: u64,
    max_steps: u64,
}

fn per_pop(pops: usize, total: Reads, max_seeks: u64, max_steps: u64) -> PerPop {
    let n = pops.max(1) as f64;
    let (gets, seeks, steps) = (total.gets as f64 / n, total.seeks as f64 / n, total.steps as f64 / n);
    PerPop { pops, gets, seeks, steps, max_seeks, max_steps }
}

/// Runs `add(ctx, i)` `ADDS` times in groups of `GROUP`, each group written to the engine.
fn fill(ctx: &mut WriteCtx<'_>, mut add: impl FnMut(&mut WriteCtx<'_>, usize)) {
    for i in 0..ADDS {
        add(ctx, i);
        if i % GROUP == GROUP - 1 {
            ctx.finish(false).unwrap();
            ctx.begin(crate::store::now_ms());
        }
    }
    ctx.finish(false).unwrap();
    ctx.begin(crate::store::now_ms());
}

/// Pops with `pop(ctx)` (`None`: nothing left) until the collection is empty, counting each pop's reads.
fn pop_all(
    ctx: &mut WriteCtx<'_>,
    mut pop: impl FnMut(&mut WriteCtx<'_>) -> Option<Vec<u8>>,
) -> (Vec<Vec<u8>>, PerPop) {
    let counts = ctx.count_reads();
    let start = counts.sample();
    let mut popped = Vec::new();
    let (mut max_steps, mut max_seeks) = (0, 0);
    loop {
        let before = counts.sample();
        let Some(m) = pop(ctx) else { break };
        let d = counts.sample() - before;
        max_steps = max_steps.max(d.steps);
        max_seeks = max_seeks.max(d.seeks);
        popped.push(m);
    }
    let figures = per_pop(popped.len(), counts.sample() - start, max_seeks, max_steps);
    (popped, figures)
}

fn element(rng: &mut impl Rng) -> Vec<u8> {
    format!("element:{}", rng.gen_range(0..1_000_000)).into_bytes()
}

#[test]
fn spop_until_empty_reads_little_per_pop() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    let mut added = BTreeSet::new();
    fill(&mut ctx, |ctx, _| {
        let m = Bytes::from(element(&mut rng));
        added.insert(m.to_vec());
        set::add_members(ctx, b"myset", std::iter::once(&m)).unwrap();
    });
    // As commands/sets.rs's SPOP without a count: the set, then one pop.
    let (popped, f) = pop_all(&mut ctx, |ctx| {
        let mut c = set::get_mut(ctx, b"myset").unwrap()?;
        set::pop(ctx, b"myset", &mut c, 1).unwrap().pop()
    });
    eprintln!("SPOP, {} members, per pop: {f:?}", added.len());
    let distinct: BTreeSet<Vec<u8>> = popped.iter().cloned().collect();
    assert_eq!((popped.len(), f.pops), (added.len(), added.len()), "every member popped once");
    assert_eq!(distinct, added);
    assert!(ctx.get_meta(b"myset").unwrap().is_none(), "the emptied set is deleted");
    // Random, not in member order: the first tenth of the pops spreads over the leading digits (1..=9 lead
    // 9 in 10 of the numbers below 1,000,000, evenly).
    let mut lead = [0usize; 10];
    for m in &popped[..popped.len() / 10] {
        lead[usize::from(m[b"element:".len()] - b'0')] += 1;
    }
    assert!(lead[1..].iter().all(|&n| n > popped.len() / 10 / 9 / 2), "{lead:?}");
    // Before: 2 point reads (the meta value, then the member before deleting it), 3 seeks (the first
    // member, the last, the pick) and ~50 steps over tombstones per pop, up to ~40,000 for the last (read
    // whole). Now the member is not read again, the ends are remembered, and no zone is stepped through.
    assert!(f.gets <= 1.01, "{f:?}");
    assert!(f.seeks <= 2.0, "{f:?}");
    assert!(f.steps <= 1.0 && f.max_steps <= 64, "{f:?}");
}

#[test]
fn zpopmin_until_empty_reads_little_per_pop() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    let mut added = std::collections::BTreeMap::new();
    fill(&mut ctx, |ctx, _| {
        let score = rng.gen_range(0..1_000_000) as f64;
        let m = element(&mut rng);
        zset::add(ctx, b"myzset", &zset::AddFlags::default(), &[(score, &m)]).unwrap();
        // A member added again takes the later score.
        added.insert(m, score);
    });
    let (popped, f) = pop_all(&mut ctx, |ctx| {
        let (m, s) = zset::pop(ctx, b"myzset", false, 1).unwrap()?.pop()?;
        Some([s.to_be_bytes().as_slice(), &m].concat())
    });
    eprintln!("ZPOPMIN, {} members, per pop: {f:?}", added.len());
    // In score order, then member order; each member once with its last score.
    let mut want: Vec<(f64, Vec<u8>)> = added.iter().map(|(m, s)| (*s, m.clone())).collect();
    want.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let got: Vec<(f64, Vec<u8>)> =
        popped.iter().map(|p| (f64::from_be_bytes(p[..8].try_into().unwrap()), p[8..].to_vec())).collect();
    assert_eq!(got, want);
    assert_eq!(f.pops, want.len());
    assert!(ctx.get_coll(b"myzset", Type::ZSet).unwrap().is_none(), "the emptied set is deleted");
    // Before: a seek per pop, and a step past the entry taken. Now one seek reads the entries ahead that
    // the next pops take.
    assert!(f.gets <= 1.01, "{f:?}");
    assert!(f.seeks <= 0.1 && f.max_seeks <= 1, "{f:?}");
    assert!(f.steps <= 1.0 && f.max_steps <= 16, "{f:?}");
}

/// The shortcuts pops keep (dead zones, the tail, SPOP's span, the entries ZPOPMIN/ZPOPMAX read ahead) stay
/// exact under every write between pops: random ZADD, ZINCRBY, ZREM, ZPOPMIN/ZPOPMAX with counts, SADD,
/// SREM and SPOP, checked against a model after every command, across groups.
#[test]
fn pops_with_writes_between_match_a_model() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut zmodel: std::collections::BTreeMap<Vec<u8>, f64> = Default::default();
    let mut smodel: BTreeSet<Vec<u8>> = BTreeSet::new();
    let member = |rng: &mut rand::rngs::StdRng| format!("m{}", rng.gen_range(0..3000)).into_bytes();
    // Large enough for SPOP's picks by seek (past coll::SMALL_PICK).
    for i in 0..2500 {
        let m = format!("m{i}").into_bytes();
        set::add_members(&mut ctx, b"s", std::iter::once(&Bytes::from(m.clone()))).unwrap();
        smodel.insert(m);
    }
    for i in 0..30_000 {
        let m = member(&mut rng);
        match rng.gen_range(0..10) {
            0..=2 => {
                let score = rng.gen_range(0..200) as f64;
                zset::add(&mut ctx, b"z", &zset::AddFlags::default(), &[(score, &m)]).unwrap();
                zmodel.insert(m, score);
            }
            3 => {
                let by = rng.gen_range(-5..5) as f64;
                zset::incr(&mut ctx, b"z", by, &m).unwrap();
                *zmodel.entry(m).or_insert(0.0) += by;
            }
            4 => {
                let n = zset::remove_members(&mut ctx, b"z", &[&m]).unwrap();
                assert_eq!(n == 1, zmodel.remove(&m).is_some());
            }
            5 | 6 => {
                let max = rng.gen_bool(0.5);
                let n = if rng.gen_bool(0.8) { 1 } else { rng.gen_range(1..40) };
                let got = zset::pop(&mut ctx, b"z", max, n).unwrap().unwrap_or_default();
                let mut order: Vec<(f64, Vec<u8>)> = zmodel.iter().map(|(m, s)| (*s, m.clone())).collect();
                order.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
                if max {
                    order.reverse();
                }
                let want: Vec<(Vec<u8>, f64)> = order.into_iter().take(n as usize).map(|(s, m)| (m, s)).collect();
                for (m, _) in &want {
                    zmodel.remove(m);
                }
                assert_eq!(got, want, "command {i}");
            }
            7 => {
                set::add_members(&mut ctx, b"s", std::iter::once(&Bytes::from(m.clone()))).unwrap();
                smodel.insert(m);
            }
            8 => {
                let n = set::remove(&mut ctx, b"s", &[Bytes::from(m.clone())]).unwrap();
                assert_eq!(n == 1, smodel.remove(&m));
            }
            _ => {
                let n = if rng.gen_bool(0.8) { 1 } else { rng.gen_range(1..40) };
                let popped = match set::get_mut(&mut ctx, b"s").unwrap() {
                    Some(mut c) => set::pop(&mut ctx, b"s", &mut c, n).unwrap(),
                    None => Vec::new(),
                };
                assert_eq!(popped.len(), (n as usize).min(smodel.len()), "command {i}");
                for p in &popped {
                    assert!(smodel.remove(p), "command {i}: popped {p:?}, not a member");
                }
            }
        }
        let zsize = zset::get_mut(&mut ctx, b"z").unwrap().map_or(0, |c| c.size);
        let ssize = set::get_mut(&mut ctx, b"s").unwrap().map_or(0, |c| c.size);
        assert_eq!((zsize, ssize), (zmodel.len() as u64, smodel.len() as u64), "command {i}");
        if i % GROUP == GROUP - 1 {
            ctx.finish(false).unwrap();
            ctx.begin(crate::store::now_ms());
        }
    }
    // The sets end as the models say.
    let view = ctx.view();
    let members = set::get(&view, b"s").unwrap().map(|c| set::members(&view, &c).unwrap()).unwrap_or_default();
    assert_eq!(members, smodel.into_iter().collect::<Vec<_>>());
}
