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
    assert_eq!(push_one(&mut ctx, &mut c, true, b"x"), Err(Error::Exhausted));
    set_bounds(&mut c, u64::MAX, u64::MAX);
    assert_eq!(push_one(&mut ctx, &mut c, false, b"x"), Err(Error::Exhausted));
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
    ctx.delete_member(&c, SUB_MEMBER, &part(bounds(&c).0 + 1));
    {
        let v = ctx.view();
        assert_eq!(index(&v, &c, 1), Err(Error::Corrupt));
        assert_eq!(for_each_in(&v, &c, 0, 3, |_| ()), Err(Error::Corrupt));
    }
    assert_eq!(pop(&mut ctx, b"l", true, 3), Err(Error::Corrupt));
}
