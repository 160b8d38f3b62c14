//! The differential test's generator for SORT/SORT_RO and the commands that move keys between databases
//! (SWAPDB, MOVE, COPY ... DB): random sorts of a list, a set and a sorted set by their elements, by string
//! weights and by hash fields, with GET, LIMIT, ALPHA, DESC and STORE; the databases swapped in between.

use super::{Cmp, Op, Rng};

/// The elements sorted: numbers, words, and ties.
const ELEMS: &[&str] = &["1", "2", "3", "10", "-1", "2.5", "a", "b", "007", "1e1"];
/// Weights: numbers mostly, a word now and then (an error when sorted numerically).
const WEIGHTS: &[&str] = &["1", "2", "5", "-3", "0.5", "100", "2", "x"];
const SOURCES: &[&str] = &["so_l", "so_s", "so_z", "so_missing", "str"];
/// The keys whose final state is compared.
pub(super) const SORT_FAMILY_KEYS: &[&str] = &["so_l", "so_s", "so_z", "so_d", "w_1", "w_2", "w_a", "h_1", "h_a"];

fn elem(r: &mut Rng) -> String {
    r.pick(ELEMS).to_string()
}

pub(super) fn gen_sort(r: &mut Rng) -> Vec<Op> {
    let mut cmp = Cmp::Exact;
    let a = match r.below(20) {
        0 | 1 => cmd!["RPUSH", "so_l", elem(r), elem(r)],
        2 => cmd!["SADD", "so_s", elem(r), elem(r)],
        3 => cmd!["ZADD", "so_z", r.range(-5, 5), elem(r)],
        4 | 5 => cmd!["SET", format!("w_{}", elem(r)), r.pick(WEIGHTS)],
        6 => cmd!["HSET", format!("h_{}", elem(r)), "f", r.pick(WEIGHTS)],
        7 => cmd!["DEL", r.pick(&["so_l", "so_s", "so_z", "so_d"])],
        8 => cmd!["SWAPDB", "0", r.pick(&["1", "0", "16", "x"])],
        9 => cmd!["MOVE", r.pick(SOURCES), "1"],
        10 => cmd!["COPY", r.pick(SOURCES), "so_d", "DB", r.pick(&["0", "1"]), "REPLACE"],
        11 => cmd!["LRANGE", "so_d", "0", "-1"],
        12 => cmd!["SET", "str", elem(r)],
        _ => {
            let ro = r.chance(20);
            let mut a = cmd![if ro { "SORT_RO" } else { "SORT" }, r.pick(SOURCES)];
            let by = match r.below(5) {
                0 => Some("w_*"),
                1 => Some("h_*->f"),
                2 => Some("nosort"),
                _ => None,
            };
            if let Some(p) = by {
                a.extend(cmd!["BY", p]);
            }
            let alpha = r.chance(50);
            // Redis's sort is not stable: elements of equal ALPHA weights (BY pattern) come in any order,
            // and a set has no order of its own without sorting (BY nosort, no STORE). Those replies are
            // compared as multisets, never cut by LIMIT and never stored.
            let ties = alpha && matches!(by, Some("w_*" | "h_*->f"));
            let unordered = by == Some("nosort") && a[1] == "so_s";
            if !ties && !unordered && r.chance(30) {
                a.extend(cmd!["LIMIT", r.range(-1, 4), r.range(-1, 4)]);
            }
            for _ in 0..r.below(3) {
                a.extend(cmd!["GET", r.pick(&["#", "w_*", "h_*->f", "nostar", "h_*->"])]);
            }
            if r.chance(40) {
                a.push("DESC".into());
            }
            if alpha {
                a.push("ALPHA".into());
            }
            if !ro && !ties && !unordered && r.chance(30) {
                a.extend(cmd!["STORE", "so_d"]);
            } else if ties || unordered {
                cmp = Cmp::Sorted;
            }
            if r.chance(3) {
                a.push("BOGUS".into());
            }
            a
        }
    };
    vec![Op { conn: 0, args: a, cmp }]
}
