//! Unit tests of the list storage (`types::list`), over a commit-thread context on a temporary database.

use super::*;
use crate::store::{now_ms, Error as StoreError};
use crate::types::testing::{group, temp_db};

fn b(xs: &[&str]) -> Vec<Bytes> {
    xs.iter().map(|x| Bytes::copy_from_slice(x.as_bytes())).collect()
}

/// The whole list `key` as strings, head first (empty when missing), read through the group's view.
fn all(ctx: &WriteCtx<'_>, key: &[u8]) -> Vec<String> {
    let v = ctx.view();
    let Some(c) = get(&v, key).unwrap() else { return Vec::new() };
    let mut out = Vec::new();
    for_each_in(&v, &c, 0, c.size, |e| out.push(String::from_utf8_lossy(e).into_owned())).unwrap();
    out
}

#[test]
fn ranges_follow_redis() {
    assert_eq!(range(0, -1, 3), Some((0, 3)));
    assert_eq!(range(-100, 100, 3), Some((0, 3)));
    assert_eq!(range(2, 1, 3), None);
    assert_eq!(range(3, 5, 3), None);
    assert_eq!(range(-1, -1, 3), Some((2, 3)));
    assert_eq!(range(0, 0, 0), None);
    assert_eq!(range(i64::MIN, i64::MAX, 3), Some((0, 3)));
    assert_eq!(position(-1, 3), Some(2));
    assert_eq!(position(3, 3), None);
    assert_eq!(position(-4, 3), None);
    assert_eq!(position(i64::MIN, 3), None);
}

#[test]
fn list_header_round_trips() {
    let mut c = Coll::new(Type::List, 9);
    set_bounds(&mut c, BASE - 2, BASE + 5);
    let d = Coll::decode(&c.encode()).unwrap().unwrap();
    assert_eq!(bounds(&d), (BASE - 2, BASE + 5));
    assert_eq!(d.size, 7);
}

#[test]
fn pushes_pops_and_index_keep_the_order_and_the_bounds() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    assert_eq!(push(&mut ctx, b"l", &b(&["x"]), false, true).unwrap(), 0, "PUSHX on no list");
    assert!(get_mut(&mut ctx, b"l").unwrap().is_none());
    assert_eq!(push(&mut ctx, b"l", &b(&["b", "c"]), false, false).unwrap(), 2);
    assert_eq!(push(&mut ctx, b"l", &b(&["a", "z"]), true, false).unwrap(), 4);
    assert_eq!(all(&ctx, b"l"), ["z", "a", "b", "c"]);
    let c = get_mut(&mut ctx, b"l").unwrap().unwrap();
    assert_eq!(bounds(&c), (BASE - 2, BASE + 2));
    {
        let v = ctx.view();
        assert_eq!(index(&v, &c, 0).unwrap().as_deref(), Some(&b"z"[..]));
        assert_eq!(index(&v, &c, -1).unwrap().as_deref(), Some(&b"c"[..]));
        assert_eq!(index(&v, &c, 4).unwrap(), None);
    }
    assert_eq!(pop(&mut ctx, b"l", false, 1).unwrap(), Some(b(&["c"])));
    assert_eq!(pop(&mut ctx, b"l", true, 2).unwrap(), Some(b(&["z", "a"])));
    // A count past the length pops what there is and deletes the emptied list.
    assert_eq!(pop(&mut ctx, b"l", true, 10).unwrap(), Some(b(&["b"])));
    assert_eq!(pop(&mut ctx, b"l", true, 1).unwrap(), None);
    assert!(get_mut(&mut ctx, b"l").unwrap().is_none());
    // The group's writes reach the engine and read back the same.
    assert_eq!(push(&mut ctx, b"m", &b(&["1", "2", "3"]), false, false).unwrap(), 3);
    ctx.finish(false).unwrap();
    ctx.begin(now_ms());
    assert_eq!(all(&ctx, b"m"), ["1", "2", "3"]);
}

#[test]
fn a_push_past_the_index_space_is_refused() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    let mut c = create(&mut ctx, b"l");
    set_bounds(&mut c, 0, 0);
    assert_eq!(push_all(&mut ctx, &mut c, true, &[b"x"]), Err(Error::Exhausted));
    set_bounds(&mut c, u64::MAX - 1, u64::MAX - 1);
    push_all(&mut ctx, &mut c, false, &[b"x"]).unwrap();
    assert_eq!(bounds(&c), (u64::MAX - 1, u64::MAX), "the last index is usable");
    assert_eq!(push_all(&mut ctx, &mut c, false, &[b"x"]), Err(Error::Exhausted));
    assert_eq!(Error::Exhausted.to_string(), "list index space exhausted at this end: too many pushes on one side");
}

#[test]
fn set_insert_remove_and_trim_rewrite_the_records() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    push(&mut ctx, b"l", &b(&["a", "b", "c", "b", "d", "b"]), false, false).unwrap();
    let c = get_mut(&mut ctx, b"l").unwrap().unwrap();
    assert_eq!(set(&mut ctx, b"l", &c, 6, b"x"), Err(Error::IndexOutOfRange));
    set(&mut ctx, b"l", &c, -1, b"e").unwrap();
    assert_eq!(all(&ctx, b"l"), ["a", "b", "c", "b", "d", "e"]);
    // Near the head the head side moves; near the tail the tail side does.
    assert_eq!(insert(&mut ctx, b"l", false, b"b", b"0").unwrap(), Some(7));
    assert_eq!(insert(&mut ctx, b"l", true, b"d", b"9").unwrap(), Some(8));
    assert_eq!(insert(&mut ctx, b"l", true, b"nope", b"9").unwrap(), None);
    assert_eq!(insert(&mut ctx, b"missing", true, b"a", b"9").unwrap(), Some(0));
    assert_eq!(all(&ctx, b"l"), ["a", "0", "b", "c", "b", "d", "9", "e"]);
    // LREM from the tail, then every match.
    assert_eq!(remove(&mut ctx, b"l", -1, b"b").unwrap(), 1);
    assert_eq!(all(&ctx, b"l"), ["a", "0", "b", "c", "d", "9", "e"]);
    push(&mut ctx, b"l", &b(&["b"]), true, false).unwrap();
    assert_eq!(remove(&mut ctx, b"l", 0, b"b").unwrap(), 2);
    assert_eq!(all(&ctx, b"l"), ["a", "0", "c", "d", "9", "e"]);
    let c = get_mut(&mut ctx, b"l").unwrap().unwrap();
    assert_eq!(c.size, 6);
    assert_eq!(bounds(&c).1 - bounds(&c).0, 6);
    trim(&mut ctx, b"l", 1, -2).unwrap();
    assert_eq!(all(&ctx, b"l"), ["0", "c", "d", "9"]);
    // Removing every element deletes the list.
    push(&mut ctx, b"same", &b(&["s", "s"]), false, false).unwrap();
    assert_eq!(remove(&mut ctx, b"same", 0, b"s").unwrap(), 2);
    assert!(get_mut(&mut ctx, b"same").unwrap().is_none());
    trim(&mut ctx, b"l", 5, 10).unwrap();
    assert!(get_mut(&mut ctx, b"l").unwrap().is_none());
}

#[test]
fn find_honours_rank_count_and_maxlen() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    push(&mut ctx, b"l", &b(&["a", "x", "b", "x", "c", "x"]), false, false).unwrap();
    let v = ctx.view();
    let c = get(&v, b"l").unwrap().unwrap();
    let q = |rank, want, limit| Find { element: b"x", rank, want, limit };
    assert_eq!(find(&v, &c, &q(1, u64::MAX, u64::MAX)).unwrap(), [1, 3, 5]);
    assert_eq!(find(&v, &c, &q(2, 1, u64::MAX)).unwrap(), [3]);
    assert_eq!(find(&v, &c, &q(-1, 2, u64::MAX)).unwrap(), [5, 3]);
    assert_eq!(find(&v, &c, &q(1, u64::MAX, 4)).unwrap(), [1, 3]);
}

#[test]
fn moves_check_the_destination_type_and_rotate_in_place() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    push(&mut ctx, b"src", &b(&["a", "b"]), false, false).unwrap();
    ctx.put_string(b"str", b"v", None).unwrap();
    assert_eq!(move_one(&mut ctx, b"src", b"str", true, true), Err(Error::Store(StoreError::WrongType)));
    assert_eq!(all(&ctx, b"src"), ["a", "b"], "nothing popped when the destination is of another type");
    assert_eq!(move_one(&mut ctx, b"src", b"src", true, false).unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(all(&ctx, b"src"), ["b", "a"]);
    assert_eq!(move_one(&mut ctx, b"src", b"dst", false, true).unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(move_one(&mut ctx, b"src", b"dst", false, true).unwrap().as_deref(), Some(&b"b"[..]));
    assert_eq!(all(&ctx, b"dst"), ["b", "a"]);
    assert!(get_mut(&mut ctx, b"src").unwrap().is_none());
    assert_eq!(move_one(&mut ctx, b"src", b"dst", false, true).unwrap(), None);
}

#[test]
fn records_that_disagree_with_the_header_are_corrupt() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    push(&mut ctx, b"l", &b(&["a", "b", "c"]), false, false).unwrap();
    let c = get_mut(&mut ctx, b"l").unwrap().unwrap();
    // The node holds three elements; a header that says four disagrees with it.
    let mut longer = c.clone();
    set_bounds(&mut longer, BASE, BASE + 4);
    ctx.put_coll(b"l", &longer).unwrap();
    {
        let v = ctx.view();
        assert_eq!(index(&v, &longer, 1), Err(Error::Corrupt));
        assert_eq!(for_each_in(&v, &longer, 0, 3, |_| ()), Err(Error::Corrupt));
    }
    assert_eq!(pop(&mut ctx, b"l", true, 3), Err(Error::Corrupt));
    // A missing node record.
    ctx.put_coll(b"l", &c).unwrap();
    ctx.delete_member(&c, SUB_NODE, &node_part(node_of(BASE)));
    {
        let v = ctx.view();
        assert_eq!(index(&v, &c, 1), Err(Error::Corrupt));
        assert_eq!(for_each_in(&v, &c, 0, 3, |_| ()), Err(Error::Corrupt));
    }
    assert_eq!(pop(&mut ctx, b"l", true, 3), Err(Error::Corrupt));
    // A node value that does not parse: an inline length past its bytes.
    ctx.put_member(&c, SUB_NODE, &node_part(node_of(BASE)), &[0x00, 0xff, 0xff, 0xff, 0x7f, b'a']).unwrap();
    {
        let v = ctx.view();
        assert_eq!(index(&v, &c, 0), Err(Error::Corrupt));
        assert_eq!(for_each_in(&v, &c, 0, 3, |_| ()), Err(Error::Corrupt));
    }
    // A long element whose record is missing.
    let long = vec![b'L'; node::INLINE_MAX + 1];
    push(&mut ctx, b"x", &[Bytes::from(long.clone()), Bytes::from_static(b"s")], false, false).unwrap();
    let x = get_mut(&mut ctx, b"x").unwrap().unwrap();
    assert_eq!(index(&ctx.view(), &x, 0).unwrap(), Some(long));
    ctx.delete_member(&x, SUB_NODE, &ext_part(node_of(BASE), (BASE % node::K) as u8));
    assert_eq!(index(&ctx.view(), &x, 0), Err(Error::Corrupt));
    assert_eq!(index(&ctx.view(), &x, 1).unwrap(), Some(b"s".to_vec()));
    assert_eq!(for_each_in(&ctx.view(), &x, 0, 2, |_| ()), Err(Error::Corrupt));
}

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// An element for the model test: few distinct values (LREM and LINSERT find matches), some of them longer
/// than a node keeps inline.
fn element(rng: &mut Rng) -> Vec<u8> {
    let v = rng.below(6);
    if rng.below(5) == 0 {
        format!("long{v}-").repeat(120).into_bytes()
    } else {
        format!("e{v}").into_bytes()
    }
}

/// The list's records are exactly its nodes and the records of its long elements: no record left behind by
/// a pop, a trim or a rewrite.
fn assert_records_match(ctx: &WriteCtx<'_>, key: &[u8], model: &std::collections::VecDeque<Vec<u8>>) {
    let v = ctx.view();
    let Some(c) = get(&v, key).unwrap() else {
        assert!(model.is_empty());
        return;
    };
    let (h, t) = bounds(&c);
    let mut want: Vec<Vec<u8>> = Vec::new();
    for n in node_of(h)..=node_of(t - 1) {
        want.push(node_part(n).to_vec());
        let (first, end) = node::live(n, h, t);
        for a in first..end {
            if node::is_external(&model[(a - h) as usize]) {
                want.push(ext_part(n, (a % node::K) as u8).to_vec());
            }
        }
    }
    let got: Vec<Vec<u8>> = v.members(&c, SUB_NODE, None, false).map(|r| r.unwrap().0).collect();
    assert_eq!(got, want);
    assert_eq!(v.members(&c, crate::keys::SUB_MEMBER, None, false).count(), 0);
}

#[test]
fn random_operations_agree_with_a_model() {
    for seed in [0x5eed_1234_abcd_0001, 7, 0x9e37_79b9_7f4a_7c15, 12_345] {
        random_operations(seed);
    }
}

/// 3,000 random list operations from `seed`, each checked against a `VecDeque` (the elements, and that the
/// records are exactly the nodes and the long elements' records).
fn random_operations(seed: u64) {
    use std::collections::VecDeque;
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    let mut rng = Rng(seed);
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    let key = b"m";
    let mut longest = 0;
    for step in 0..3000 {
        let len = model.len() as i64;
        longest = longest.max(model.len());
        match rng.below(11) {
            0 | 1 => {
                let most = if rng.below(4) == 0 { 80 } else { 5 };
                let k = 1 + rng.below(most);
                let els: Vec<Vec<u8>> = (0..k).map(|_| element(&mut rng)).collect();
                let left = rng.below(2) == 0;
                let bytes: Vec<Bytes> = els.iter().map(|e| Bytes::from(e.clone())).collect();
                let n = push(&mut ctx, key, &bytes, left, false).unwrap();
                for e in els {
                    if left {
                        model.push_front(e);
                    } else {
                        model.push_back(e);
                    }
                }
                assert_eq!(n, model.len() as u64);
            }
            2 | 3 => {
                let n = 1 + rng.below(40);
                let left = rng.below(2) == 0;
                let got = pop(&mut ctx, key, left, n).unwrap();
                let mut want = Vec::new();
                for _ in 0..n {
                    let e = if left { model.pop_front() } else { model.pop_back() };
                    match e {
                        Some(e) => want.push(Bytes::from(e)),
                        None => break,
                    }
                }
                if len == 0 {
                    assert_eq!(got, None);
                } else {
                    assert_eq!(got, Some(want));
                }
            }
            4 if len > 0 => {
                let i = rng.below(len as u64) as i64 - if rng.below(2) == 0 { len } else { 0 };
                let e = element(&mut rng);
                let c = get_mut(&mut ctx, key).unwrap().unwrap();
                set(&mut ctx, key, &c, i, &e).unwrap();
                let p = position(i, len as u64).unwrap() as usize;
                model[p] = e;
            }
            5 => {
                let pivot = element(&mut rng);
                let e = element(&mut rng);
                let after = rng.below(2) == 0;
                let got = insert(&mut ctx, key, after, &pivot, &e).unwrap();
                match model.iter().position(|x| *x == pivot) {
                    _ if len == 0 => assert_eq!(got, Some(0)),
                    Some(p) => {
                        model.insert(p + after as usize, e);
                        assert_eq!(got, Some(model.len() as u64));
                    }
                    None => assert_eq!(got, None),
                }
            }
            6 => {
                let e = element(&mut rng);
                let count = rng.below(5) as i64 - 2;
                let got = remove(&mut ctx, key, count, &e).unwrap();
                let want = if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
                let mut hits: Vec<usize> = model.iter().enumerate().filter(|(_, x)| **x == e).map(|(i, _)| i).collect();
                if count < 0 {
                    hits.reverse();
                }
                hits.truncate(want);
                hits.sort_unstable();
                for &p in hits.iter().rev() {
                    model.remove(p);
                }
                assert_eq!(got, hits.len() as u64);
            }
            7 if rng.below(4) == 0 => {
                let s = rng.below(len as u64 + 3) as i64 - 1;
                let e = len - rng.below(len as u64 + 3) as i64;
                trim(&mut ctx, key, s, e).unwrap();
                match range(s, e, len as u64) {
                    Some((a, b)) => {
                        model.truncate(b as usize);
                        model.drain(..a as usize);
                    }
                    None => model.clear(),
                }
            }
            8 => {
                let (fl, tl) = (rng.below(2) == 0, rng.below(2) == 0);
                let got = move_one(&mut ctx, key, key, fl, tl).unwrap();
                let e = if fl { model.pop_front() } else { model.pop_back() };
                assert_eq!(got, e.clone().map(Bytes::from));
                if let Some(e) = e {
                    if tl {
                        model.push_front(e);
                    } else {
                        model.push_back(e);
                    }
                }
            }
            9 if len > 0 => {
                let v = ctx.view();
                let c = get(&v, key).unwrap().unwrap();
                let i = rng.below(len as u64);
                assert_eq!(index(&v, &c, i as i64).unwrap().as_ref(), Some(&model[i as usize]));
                let (a, b) = (rng.below(len as u64), rng.below(len as u64));
                let (a, b) = (a.min(b), a.max(b) + 1);
                let mut got = Vec::new();
                for_each_in(&v, &c, a, b, |e| got.push(e.to_vec())).unwrap();
                assert_eq!(got, model.range(a as usize..b as usize).cloned().collect::<Vec<_>>());
                let e = element(&mut rng);
                let rank = if rng.below(2) == 0 { 1 + rng.below(2) as i64 } else { -1 - rng.below(2) as i64 };
                let q = Find { element: &e, rank, want: u64::MAX, limit: u64::MAX };
                let mut want: Vec<u64> =
                    model.iter().enumerate().filter(|(_, x)| **x == e).map(|(i, _)| i as u64).collect();
                if rank < 0 {
                    want.reverse();
                }
                let want: Vec<u64> = want.into_iter().skip(rank.unsigned_abs() as usize - 1).collect();
                assert_eq!(find(&v, &c, &q).unwrap(), want);
            }
            _ => {
                // The group's writes reach the engine: later reads come from the engine itself.
                ctx.finish(false).unwrap();
                ctx.begin(now_ms());
            }
        }
        let got: Vec<Vec<u8>> = {
            let v = ctx.view();
            match get(&v, key).unwrap() {
                None => Vec::new(),
                Some(c) => {
                    let mut out = Vec::new();
                    for_each_in(&v, &c, 0, c.size, |e| out.push(e.to_vec())).unwrap();
                    out
                }
            }
        };
        assert_eq!(got, model.iter().cloned().collect::<Vec<_>>(), "seed {seed} step {step}");
        assert_records_match(&ctx, key, &model);
    }
    assert!(longest as u64 > 3 * node::K, "seed {seed}: the list never spanned several nodes ({longest})");
}

#[test]
fn an_element_too_large_for_the_engine_writes_nothing() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    push(&mut ctx, b"l", &b(&["a"]), false, false).unwrap();
    let huge = Bytes::from(vec![0u8; shaledb::options::limits::MAX_KEY_VALUE_BYTES]);
    let r = push(&mut ctx, b"l", &[Bytes::from_static(b"b"), huge.clone()], false, false);
    assert!(matches!(r, Err(Error::Store(StoreError::TooLarge { .. }))), "{r:?}");
    assert_eq!(all(&ctx, b"l"), ["a"]);
    let c = get_mut(&mut ctx, b"l").unwrap().unwrap();
    assert!(matches!(set(&mut ctx, b"l", &c, 0, &huge), Err(Error::Store(StoreError::TooLarge { .. }))));
    assert!(matches!(insert(&mut ctx, b"l", true, b"a", &huge), Err(Error::Store(StoreError::TooLarge { .. }))));
    assert_eq!(all(&ctx, b"l"), ["a"]);
}
