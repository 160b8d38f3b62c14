//! Unit tests of the sorted-set storage (`types::zset`), over a commit-thread context on a temporary
//! database.

use super::*;
use crate::types::testing::{group, temp_db};
use bytes::Bytes;

fn members(items: &Items) -> Vec<String> {
    items.iter().map(|(m, _)| String::from_utf8_lossy(m).into_owned()).collect()
}

/// A sorted set `key` of `(score, member)` pairs.
fn fill(ctx: &mut WriteCtx<'_>, key: &[u8], pairs: &[(f64, &str)]) {
    let pairs: Vec<(f64, &[u8])> = pairs.iter().map(|(s, m)| (*s, m.as_bytes())).collect();
    add(ctx, key, &AddFlags::default(), &pairs).unwrap();
}

#[test]
fn rank_bounds_follow_redis() {
    assert_eq!(rank_bounds(0, -1, 5), Some((0, 4)));
    assert_eq!(rank_bounds(-2, -1, 5), Some((3, 4)));
    assert_eq!(rank_bounds(-100, 2, 5), Some((0, 2)));
    assert_eq!(rank_bounds(3, 100, 5), Some((3, 4)));
    assert_eq!(rank_bounds(5, 10, 5), None);
    assert_eq!(rank_bounds(3, 1, 5), None);
    assert_eq!(rank_bounds(0, -1, 0), None);
    assert_eq!(rank_bounds(i64::MIN, i64::MAX, 5), Some((0, 4)));
}

/// The score index's byte order is the sorted set's order (score, then member) for many random
/// scores, negatives, zeros and infinities included, and decodes back to the same score and member.
#[test]
fn score_index_keys_sort_in_sorted_set_order() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let mut items: Vec<(f64, Vec<u8>)> = Vec::new();
    for i in 0..5000 {
        let s = match i % 7 {
            0 => f64::from_bits(rng.gen::<u64>()),
            1 => rng.gen_range(-1e6..1e6),
            2 => f64::NEG_INFINITY,
            3 => f64::INFINITY,
            4 => (rng.gen_range(-5..5)) as f64,
            5 => -0.0,
            _ => rng.gen::<f64>() * 1e-300,
        };
        if s.is_nan() {
            continue;
        }
        let m: Vec<u8> = (0..rng.gen_range(0..4)).map(|_| rng.gen_range(b'a'..b'e')).collect();
        items.push((s, m));
    }
    let p = keys::sub_prefix(3, 77, SUB_SCORE);
    let mut encoded: Vec<Vec<u8>> = items
        .iter()
        .map(|(s, m)| {
            let mut part = Vec::new();
            index_part_into(*s, m, &mut part);
            let mut k = p.to_vec();
            k.extend_from_slice(&part);
            k
        })
        .collect();
    encoded.sort();
    let mut model = items.clone();
    model.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then_with(|| a.1.cmp(&b.1)));
    for (k, (s, m)) in encoded.iter().zip(&model) {
        let (ds, dm) = split_index_key(k).unwrap();
        assert_eq!(ds, if *s == 0.0 { 0.0 } else { *s });
        assert!(ds.to_bits() == (if *s == 0.0 { 0.0f64 } else { *s }).to_bits());
        assert_eq!(dm, &m[..]);
    }
    assert!(split_index_key(&p).is_err());
    assert!(decode_score(b"1234567").is_err());
}

#[test]
fn adds_follow_the_flags_and_keep_both_records() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    let xx = AddFlags { xx: true, ..AddFlags::default() };
    assert_eq!(add(&mut ctx, b"z", &xx, &[(1.0, b"a")]).unwrap(), None, "XX on no set");
    fill(&mut ctx, b"z", &[(1.0, "a"), (2.0, "b")]);
    let gt = AddFlags { gt: true, ..AddFlags::default() };
    let r = add(&mut ctx, b"z", &gt, &[(0.5, b"a"), (3.0, b"b"), (1.0, b"c")]).unwrap().unwrap();
    assert_eq!(r, [Added::Nop, Added::Updated(3.0), Added::New]);
    let nx = AddFlags { nx: true, ..AddFlags::default() };
    assert_eq!(add(&mut ctx, b"z", &nx, &[(9.0, b"a")]).unwrap().unwrap(), [Added::Nop]);
    assert_eq!(incr(&mut ctx, b"z", 0.0, b"a").unwrap(), Added::Same(1.0));
    assert_eq!(incr(&mut ctx, b"z", f64::INFINITY, b"a").unwrap(), Added::Updated(f64::INFINITY));
    assert_eq!(incr(&mut ctx, b"z", f64::NEG_INFINITY, b"a"), Err(Error::NanResult));
    let v = ctx.view();
    let c = get(&v, b"z").unwrap().unwrap();
    assert_eq!(c.size, 3);
    assert_eq!(score(&v, &c, b"b").unwrap(), Some(3.0));
    assert_eq!(score(&v, &c, b"x").unwrap(), None);
    // The score index holds each member once, at its current score.
    let all = all_items(&v, &c).unwrap();
    assert_eq!(all, vec![(b"c".to_vec(), 1.0), (b"b".to_vec(), 3.0), (b"a".to_vec(), f64::INFINITY)]);
    assert_eq!(rank_of(&v, &c, 3.0, b"b").unwrap(), 1);
    assert_eq!(rank_of(&v, &c, 3.0, b"x"), Err(Error::MissingFromIndex));
}

#[test]
fn ranges_by_rank_score_and_lex() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    fill(&mut ctx, b"z", &[(1.0, "a"), (2.0, "b"), (3.0, "c"), (4.0, "d"), (5.0, "e")]);
    fill(&mut ctx, b"lex", &[(0.0, "a"), (0.0, "b"), (0.0, "c"), (0.0, "d")]);
    let v = ctx.view();
    let z = get(&v, b"z").unwrap().unwrap();
    assert_eq!(members(&run(&v, &z, &Range::Rank(1, -2), false, Limit::ALL).unwrap()), ["b", "c", "d"]);
    assert_eq!(members(&run(&v, &z, &Range::Rank(0, 1), true, Limit::ALL).unwrap()), ["e", "d"]);
    assert_eq!(members(&ranked(&v, &z, 3, 4).unwrap()), ["d", "e"]);
    let sr = ScoreRange { min: 2.0, minex: true, max: 5.0, maxex: false };
    let lim = Limit { offset: 1, count: 2 };
    assert_eq!(members(&run(&v, &z, &Range::Score(sr), false, lim).unwrap()), ["d", "e"]);
    assert_eq!(members(&run(&v, &z, &Range::Score(sr), true, Limit::ALL).unwrap()), ["e", "d", "c"]);
    assert_eq!(count_by_score(&v, &z, &sr).unwrap(), 3);
    let l = get(&v, b"lex").unwrap().unwrap();
    let lr = LexRange { min: LexBound::Excl(Bytes::from("a")), max: LexBound::Incl(Bytes::from("c")) };
    assert_eq!(members(&run(&v, &l, &Range::Lex(lr.clone()), false, Limit::ALL).unwrap()), ["b", "c"]);
    assert_eq!(members(&run(&v, &l, &Range::Lex(lr.clone()), true, Limit::ALL).unwrap()), ["c", "b"]);
    let mut n = 0;
    for_each_lex(&v, &l, &lr, false, |_| {
        n += 1;
        Ok(true)
    })
    .unwrap();
    assert_eq!(n, 2);
    let found = at_ranks(&v, &z, &[0, 3]).unwrap();
    assert_eq!(found.get(&3), Some(&(b"d".to_vec(), 4.0)));
    assert_eq!(found.len(), 2);
    let (page, next) = scan_page(&v, &z, None, 2, |m| m != b"a").unwrap();
    assert_eq!((members(&page), next), (vec!["b".to_string()], Some(b"c".to_vec())));
}

#[test]
fn pops_removals_and_stores() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    fill(&mut ctx, b"z", &[(1.0, "a"), (2.0, "b"), (3.0, "c"), (4.0, "d"), (5.0, "e")]);
    assert_eq!(members(&pop(&mut ctx, b"z", false, 2).unwrap().unwrap()), ["a", "b"]);
    assert_eq!(pop_one(&mut ctx, b"z", true).unwrap(), Some((b"e".to_vec(), 5.0)));
    assert_eq!(pop(&mut ctx, b"z", false, 0).unwrap(), None);
    assert_eq!(pop(&mut ctx, b"missing", false, 1).unwrap(), None);
    assert_eq!(remove_members(&mut ctx, b"z", &[b"c", b"x"]).unwrap(), 1);
    assert_eq!(members(&pop(&mut ctx, b"z", false, 9).unwrap().unwrap()), ["d"]);
    assert!(get_mut(&mut ctx, b"z").unwrap().is_none(), "an emptied set is deleted");
    fill(&mut ctx, b"z", &[(1.0, "a"), (2.0, "b"), (3.0, "c")]);
    let sr = ScoreRange { min: 2.0, minex: false, max: f64::INFINITY, maxex: false };
    assert_eq!(remove_range(&mut ctx, b"z", &Range::Score(sr)).unwrap(), 2);
    // STORE replaces a destination of any type; sets read as score 1.
    ctx.put_string(b"dst", b"old", None).unwrap();
    assert_eq!(store(&mut ctx, b"dst", &[(b"m".to_vec(), 7.0), (b"n".to_vec(), 8.0)]).unwrap(), 2);
    assert_eq!(load_scored(&ctx.view(), b"dst").unwrap(), Some(vec![(b"m".to_vec(), 7.0), (b"n".to_vec(), 8.0)]));
    assert_eq!(store(&mut ctx, b"dst", &[]).unwrap(), 0);
    assert!(get_mut(&mut ctx, b"dst").unwrap().is_none());
    ctx.put_string(b"str", b"v", None).unwrap();
    assert_eq!(load_scored(&ctx.view(), b"str"), Err(Error::Store(store::Error::WrongType)));
    assert_eq!(load_scored(&ctx.view(), b"missing").unwrap(), None);
}
