//! ZRANDMEMBER and ZSCAN.

use super::parse::scan_score_text;
use super::range::items_reply;
use crate::commands::coll::{check_pairs_count, pick_bound, pick_count};
use crate::commands::{arg_i64, syntax_error};
use crate::resp::{Args, Reply};
use crate::store::ReadCtx;
use crate::types::zset::{self, Items};
use bytes::Bytes;
use parking_lot::Mutex;
use rand::Rng;
use std::sync::OnceLock;

/// `ZRANDMEMBER key [count [WITHSCORES]]`: in Redis's order, the count, the options, then the key.
pub(super) fn zrandmember(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let mut withscores = false;
    let count = match args.get(2) {
        None => None,
        Some(a) => {
            let n = tri!(pick_count(a));
            match args.len() {
                3 => {}
                4 if args[3].eq_ignore_ascii_case(b"WITHSCORES") => withscores = true,
                _ => return syntax_error(),
            }
            if withscores {
                tri!(check_pairs_count(n));
            }
            Some(n)
        }
    };
    let ctx = ctx.pinned();
    let Some(c) = tri!(zset::get(&ctx, &args[1])) else {
        return if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil };
    };
    let mut rng = rand::thread_rng();
    let size = c.size;
    let Some(count) = count else {
        let r = rng.gen_range(0..size);
        let v = tri!(zset::ranked(&ctx, &c, r, r));
        return v.into_iter().next().map_or(Reply::Nil, |(m, _)| Reply::Bulk(m.into()));
    };
    let (n, distinct) = tri!(pick_bound(count));
    if n == 0 {
        return Reply::Array(Vec::new());
    }
    if distinct && n >= size {
        // The whole set, highest first: the order Redis 7.0 sends it in (it walks from the tail).
        let mut all = tri!(zset::ranked(&ctx, &c, 0, size - 1));
        all.reverse();
        return items_reply(all, withscores);
    }
    // Ranks to return: distinct, or with repeats (negative count), in random order.
    let ranks: Vec<u64> = if distinct {
        rand::seq::index::sample(&mut rng, size as usize, n as usize).into_iter().map(|i| i as u64).collect()
    } else {
        (0..n).map(|_| rng.gen_range(0..size)).collect()
    };
    let mut wanted: Vec<u64> = ranks.clone();
    wanted.sort_unstable();
    wanted.dedup();
    let found = tri!(zset::at_ranks(&ctx, &c, &wanted));
    let items: Items = ranks.iter().filter_map(|r| found.get(r).cloned()).collect();
    items_reply(items, withscores)
}

/// ZSCAN cursors: id -> (database, the member the scan goes on at), least recently used first out.
fn cursors() -> &'static Mutex<crate::commands::keys::Cursors> {
    static C: OnceLock<Mutex<crate::commands::keys::Cursors>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// A sorted set this small is answered in one ZSCAN call (cursor 0), as Redis does for its small
/// (listpack) encoding, whatever COUNT says.
const SCAN_ALL_AT_ONCE: u64 = 128;

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`: in Redis's order, the cursor, the key, the options.
pub(super) fn zscan(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let cursor = tri!(crate::commands::arg_cursor(&args[2]));
    let ctx = ctx.pinned();
    let empty = || Reply::Array(vec![Reply::bulk("0"), Reply::Array(Vec::new())]);
    let Some(c) = tri!(zset::get(&ctx, &args[1])) else { return empty() };
    let mut pattern: Option<Bytes> = None;
    let mut count: i64 = 10;
    let mut j = 3;
    while j < args.len() {
        if j + 1 >= args.len() {
            return syntax_error();
        }
        match &args[j].to_ascii_uppercase()[..] {
            b"MATCH" => pattern = Some(args[j + 1].clone()),
            b"COUNT" => {
                count = tri!(arg_i64(&args[j + 1]));
                if count < 1 {
                    return syntax_error();
                }
            }
            _ => return syntax_error(),
        }
        j += 2;
    }
    let keep = |m: &[u8]| pattern.as_deref().is_none_or(|p| crate::commands::keys::glob_match(p, m));
    let mut out = Vec::new();
    let push = |out: &mut Vec<Reply>, m: &[u8], s: f64| {
        out.push(Reply::Bulk(Bytes::copy_from_slice(m)));
        out.push(Reply::bulk(scan_score_text(s)));
    };
    if c.size <= SCAN_ALL_AT_ONCE {
        for (m, s) in tri!(zset::all_items(&ctx, &c)) {
            if keep(&m) {
                push(&mut out, &m, s);
            }
        }
        return Reply::Array(vec![Reply::bulk("0"), Reply::Array(out)]);
    }
    // Larger sets: pages in member order (stable while scores change), the cursor names the next member.
    let from: Option<Bytes> = if cursor == 0 {
        None
    } else {
        match cursors().lock().get(cursor) {
            Some((db, m)) if db == ctx.db_index => Some(m),
            _ => return Reply::err("invalid cursor"),
        }
    };
    let (page, next) = tri!(zset::scan_page(&ctx, &c, from.as_deref(), count as u64, keep));
    for (m, s) in page {
        push(&mut out, &m, s);
    }
    let id = match next {
        Some(m) => cursors().lock().insert(ctx.db_index, Bytes::from(m)),
        None => 0,
    };
    Reply::Array(vec![Reply::bulk(id.to_string()), Reply::Array(out)])
}
