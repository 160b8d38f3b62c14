//! Unit tests of the set storage (`types::set`), over a commit-thread context on a temporary database.

use super::*;
use crate::types::testing::{group, temp_db};

fn b(xs: &[&str]) -> Vec<Bytes> {
    xs.iter().map(|x| Bytes::copy_from_slice(x.as_bytes())).collect()
}

fn v(xs: &[&str]) -> Vec<Vec<u8>> {
    xs.iter().map(|x| x.as_bytes().to_vec()).collect()
}

#[test]
fn adds_removes_pops_and_moves_keep_the_count() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    assert_eq!(add_members(&mut ctx, b"s", b(&["a", "b", "c", "a"]).iter()).unwrap(), 3);
    assert_eq!(remove(&mut ctx, b"s", &b(&["a", "x"])).unwrap(), 1);
    assert!(move_member(&mut ctx, b"s", b"t", &Bytes::from("b")).unwrap());
    assert!(!move_member(&mut ctx, b"s", b"t", &Bytes::from("b")).unwrap());
    {
        let view = ctx.view();
        let s = get(&view, b"s").unwrap().unwrap();
        let t = get(&view, b"t").unwrap().unwrap();
        assert_eq!((s.size, t.size), (1, 1));
        assert!(is_member(&view, &t, b"b").unwrap() && !is_member(&view, &s, b"b").unwrap());
    }
    let mut c = get_mut(&mut ctx, b"s").unwrap().unwrap();
    assert_eq!(pop(&mut ctx, b"s", &mut c, 5).unwrap(), v(&["c"]));
    assert!(get_mut(&mut ctx, b"s").unwrap().is_none(), "an emptied set is deleted");
    ctx.put_string(b"str", b"v", None).unwrap();
    assert_eq!(add_members(&mut ctx, b"str", b(&["a"]).iter()), Err(Error::Store(store::Error::WrongType)));
}

#[test]
fn algebra_and_store() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    add_members(&mut ctx, b"x", b(&["a", "b", "c", "d"]).iter()).unwrap();
    add_members(&mut ctx, b"y", b(&["b", "d", "e"]).iter()).unwrap();
    {
        let view = ctx.view();
        assert_eq!(inter(&view, &b(&["x", "y"]), 0).unwrap(), v(&["b", "d"]));
        assert_eq!(inter(&view, &b(&["x", "y"]), 1).unwrap().len(), 1);
        assert!(inter(&view, &b(&["x", "missing"]), 0).unwrap().is_empty());
        assert_eq!(union(&view, &b(&["x", "y", "missing"])).unwrap(), v(&["a", "b", "c", "d", "e"]));
        assert_eq!(diff(&view, &b(&["x", "y"])).unwrap(), v(&["a", "c"]));
        assert!(diff(&view, &b(&["x", "x"])).unwrap().is_empty());
    }
    assert_eq!(store(&mut ctx, b"x", &v(&["p", "q"])).unwrap(), 2);
    assert_eq!(union(&ctx.view(), &b(&["x"])).unwrap(), v(&["p", "q"]), "the destination is replaced");
    assert_eq!(store(&mut ctx, b"x", &[]).unwrap(), 0);
    assert!(get_mut(&mut ctx, b"x").unwrap().is_none());
}
