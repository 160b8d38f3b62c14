//! The suite's tests and the statements each one issues per event, as the seed ran them: sysbench 1.0's
//! oltp_*.lua scripts plus the seed author's oltp_inlist_select.lua / oltp_inlist_update.lua, driven by his
//! scripts of October 2017 (mdcallag/mytools bench/sysbench.lua/all_small.sh and run.sh), which fix the
//! order, `--rand-type=uniform`, 100 values per IN-list and update-one's one-row table.
//!
//! Statements are plain data ([`Stmt`]) so that their shapes are testable without an engine; the executor in
//! the parent module turns each into table-layer calls.

use super::data::SbRand;

/// What one test does per event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// oltp_point_select.lua: one `SELECT c FROM sbtestN WHERE id=?`.
    PointQuery,
    /// oltp_read_only.lua with `--range-size`: BEGIN, 10 point selects, simple/sum/order/distinct range,
    /// COMMIT.
    ReadOnly {
        /// `--range-size`.
        range: i64,
    },
    /// oltp_read_write.lua: the read-only statements plus an index update, a non-index update, a delete and
    /// an insert of the deleted id.
    ReadWrite {
        /// `--range-size`.
        range: i64,
    },
    /// oltp_inlist_select.lua: `SELECT c FROM sbtestN WHERE id IN (<points> random ids)`.
    RandomPoints,
    /// oltp_inlist_select.lua `--hot-points`: the same IN-list of `<points>` adjacent ids starting after
    /// table_size/2 in every statement.
    HotPoints,
    /// A full scan of the PK index of every table, one client per table at once, each row's `pad` tested
    /// (`SELECT count(*) FROM sbtestN WHERE length(pad) < 0`); `readahead`: reopened with
    /// advise_random_on_open=0 and iterator readahead.
    Scan {
        /// Scan with file-system and iterator readahead.
        readahead: bool,
    },
    /// oltp_inlist_update.lua: `UPDATE sbtestN SET c=? WHERE id IN (<points> random ids)`.
    UpdateInlist,
    /// oltp_update_non_index.lua with `--table-size=1`: every client updates `c` of row id=1.
    UpdateOne,
    /// oltp_update_index.lua: `UPDATE sbtestN SET k=k+1 WHERE id=?`.
    UpdateIndex,
    /// oltp_update_non_index.lua: `UPDATE sbtestN SET c=? WHERE id=?`.
    UpdateNonindex,
    /// oltp_delete.lua: `DELETE FROM sbtestN WHERE id=?` (deleted rows are not re-inserted; deleting an id
    /// deleted before is still a statement).
    Delete,
    /// oltp_insert.lua with auto_inc: `INSERT INTO sbtestN (id, k, c, pad)` with the next id past the table.
    Insert,
}

/// A test of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TestSpec {
    /// Its name (`--tests` takes these).
    pub name: &'static str,
    /// What it runs.
    pub kind: Kind,
}

const fn spec(name: &'static str, kind: Kind) -> TestSpec {
    TestSpec { name, kind }
}

/// Every test in the seed's order (all_small.sh of October 2017): a warm-up point-query, the read tests
/// before the writes (`.pre`), the full scans, the write-heavy group, read-write and read-only, the read tests
/// after the writes, the full scans again and the inserts.
pub const SEED_ORDER: &[TestSpec] = &[
    spec("point-query.warm", Kind::PointQuery),
    spec("point-query.pre", Kind::PointQuery),
    spec("read-only.pre.range10000", Kind::ReadOnly { range: 10_000 }),
    spec("random-points.pre", Kind::RandomPoints),
    spec("scan.pre", Kind::Scan { readahead: false }),
    spec("scan.ra.pre", Kind::Scan { readahead: true }),
    spec("update-inlist", Kind::UpdateInlist),
    spec("update-one", Kind::UpdateOne),
    spec("update-index", Kind::UpdateIndex),
    spec("update-nonindex", Kind::UpdateNonindex),
    spec("delete", Kind::Delete),
    spec("read-write.range100", Kind::ReadWrite { range: 100 }),
    spec("read-write.range10000", Kind::ReadWrite { range: 10_000 }),
    spec("read-only.range100", Kind::ReadOnly { range: 100 }),
    spec("read-only.range10000", Kind::ReadOnly { range: 10_000 }),
    spec("point-query", Kind::PointQuery),
    spec("random-points", Kind::RandomPoints),
    spec("hot-points", Kind::HotPoints),
    spec("scan", Kind::Scan { readahead: false }),
    spec("scan.ra", Kind::Scan { readahead: true }),
    spec("insert", Kind::Insert),
];

/// The tests `--tests` names, in the seed's order whatever the order given; an error names an unknown one.
pub fn select_tests(names: &[String]) -> Result<Vec<TestSpec>, String> {
    if names.is_empty() {
        return Ok(SEED_ORDER.to_vec());
    }
    for n in names {
        if !SEED_ORDER.iter().any(|t| t.name == n.as_str()) {
            let known: Vec<&str> = SEED_ORDER.iter().map(|t| t.name).collect();
            return Err(format!("unknown test '{n}' (known: {})", known.join(", ")));
        }
    }
    Ok(SEED_ORDER.iter().filter(|t| names.iter().any(|n| n == t.name)).copied().collect())
}

/// What a range statement computes over `id BETWEEN lo AND hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeKind {
    /// `SELECT c`.
    Simple,
    /// `SELECT SUM(k)`.
    Sum,
    /// `SELECT c ... ORDER BY c`.
    Order,
    /// `SELECT DISTINCT c ... ORDER BY c`.
    Distinct,
}

/// One SQL statement of sysbench, on table `t` (0-based: sbtest1 is 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `BEGIN`.
    Begin,
    /// `COMMIT`.
    Commit,
    /// `SELECT c FROM t WHERE id=?`.
    PointSelect {
        /// Table.
        t: usize,
        /// Primary key.
        id: i64,
    },
    /// A range statement over `id BETWEEN lo AND hi`.
    Range {
        /// Table.
        t: usize,
        /// Low id.
        lo: i64,
        /// High id (inclusive).
        hi: i64,
        /// What it computes.
        what: RangeKind,
    },
    /// `UPDATE t SET k=k+1 WHERE id=?`.
    IndexUpdate {
        /// Table.
        t: usize,
        /// Primary key.
        id: i64,
    },
    /// `UPDATE t SET c=? WHERE id=?`.
    NonIndexUpdate {
        /// Table.
        t: usize,
        /// Primary key.
        id: i64,
        /// New `c`.
        c: Vec<u8>,
    },
    /// `DELETE FROM t WHERE id=?`.
    Delete {
        /// Table.
        t: usize,
        /// Primary key.
        id: i64,
    },
    /// `INSERT INTO t (id, k, c, pad) VALUES (...)`; `id: None` takes the next auto-increment id.
    Insert {
        /// Table.
        t: usize,
        /// Primary key, or auto-increment.
        id: Option<i64>,
        /// `k`.
        k: i64,
        /// `c`.
        c: Vec<u8>,
        /// `pad`.
        pad: Vec<u8>,
    },
    /// `SELECT c FROM t WHERE id IN (...)`.
    InlistSelect {
        /// Table.
        t: usize,
        /// The listed ids.
        ids: Vec<i64>,
    },
    /// `UPDATE t SET c=? WHERE id IN (...)`.
    InlistUpdate {
        /// Table.
        t: usize,
        /// The listed ids.
        ids: Vec<i64>,
        /// New `c`.
        c: Vec<u8>,
    },
}

/// The sizes statements are drawn from.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// `--tables`.
    pub tables: usize,
    /// `--table_size`.
    pub table_size: i64,
    /// Values per IN-list (`--random-points`; the seed's scripts pass 100).
    pub points: usize,
}

/// oltp_common.lua's statement counts per read-only/read-write transaction.
pub const POINT_SELECTS: usize = 10;

impl Shape {
    fn table(&self, r: &mut SbRand) -> usize {
        (r.uniform(1, self.tables as i64) - 1) as usize
    }

    fn id(&self, r: &mut SbRand) -> i64 {
        r.uniform(1, self.table_size)
    }

    fn read_statements(&self, r: &mut SbRand, range: i64, out: &mut Vec<Stmt>) {
        let t = self.table(r);
        for _ in 0..POINT_SELECTS {
            out.push(Stmt::PointSelect { t, id: self.id(r) });
        }
        for what in [RangeKind::Simple, RangeKind::Sum, RangeKind::Order, RangeKind::Distinct] {
            let t = self.table(r);
            let lo = self.id(r);
            out.push(Stmt::Range { t, lo, hi: lo + range - 1, what });
        }
    }

    /// Appends one event's statements of `kind` to `out` (scans have none: they are not event-based).
    pub fn event(&self, kind: Kind, r: &mut SbRand, out: &mut Vec<Stmt>) {
        match kind {
            Kind::PointQuery => {
                let t = self.table(r);
                out.push(Stmt::PointSelect { t, id: self.id(r) });
            }
            Kind::ReadOnly { range } => {
                out.push(Stmt::Begin);
                self.read_statements(r, range, out);
                out.push(Stmt::Commit);
            }
            Kind::ReadWrite { range } => {
                out.push(Stmt::Begin);
                self.read_statements(r, range, out);
                let t = self.table(r);
                out.push(Stmt::IndexUpdate { t, id: self.id(r) });
                let t = self.table(r);
                let c = r.c_value();
                out.push(Stmt::NonIndexUpdate { t, id: self.id(r), c });
                let t = self.table(r);
                let id = self.id(r);
                let k = self.id(r);
                out.push(Stmt::Delete { t, id });
                out.push(Stmt::Insert { t, id: Some(id), k, c: r.c_value(), pad: r.pad_value() });
                out.push(Stmt::Commit);
            }
            Kind::RandomPoints => {
                let t = self.table(r);
                let ids = (0..self.points).map(|_| self.id(r)).collect();
                out.push(Stmt::InlistSelect { t, ids });
            }
            Kind::HotPoints => {
                let t = self.table(r);
                out.push(Stmt::InlistSelect { t, ids: self.hot_ids() });
            }
            Kind::Scan { .. } => {}
            Kind::UpdateInlist => {
                let t = self.table(r);
                let c = r.c_value();
                let ids = (0..self.points).map(|_| self.id(r)).collect();
                out.push(Stmt::InlistUpdate { t, ids, c });
            }
            Kind::UpdateOne => {
                let t = self.table(r);
                out.push(Stmt::NonIndexUpdate { t, id: 1, c: r.c_value() });
            }
            Kind::UpdateIndex => {
                let t = self.table(r);
                out.push(Stmt::IndexUpdate { t, id: self.id(r) });
            }
            Kind::UpdateNonindex => {
                let t = self.table(r);
                let c = r.c_value();
                out.push(Stmt::NonIndexUpdate { t, id: self.id(r), c });
            }
            Kind::Delete => {
                let t = self.table(r);
                out.push(Stmt::Delete { t, id: self.id(r) });
            }
            Kind::Insert => {
                let t = self.table(r);
                let k = self.id(r);
                out.push(Stmt::Insert { t, id: None, k, c: r.c_value(), pad: r.pad_value() });
            }
        }
    }

    /// hot-points' ids: `table_size/2 + 1 ..= table_size/2 + points`.
    pub fn hot_ids(&self) -> Vec<i64> {
        let hot = self.table_size / 2;
        (1..=self.points as i64).map(|i| hot + i).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape = Shape { tables: 2, table_size: 1000, points: 100 };

    fn one_event(kind: Kind, seed: u64) -> Vec<Stmt> {
        let mut v = Vec::new();
        SHAPE.event(kind, &mut SbRand::new(seed), &mut v);
        v
    }

    #[test]
    fn read_only_is_begin_ten_points_four_ranges_commit() {
        let v = one_event(Kind::ReadOnly { range: 100 }, 1);
        assert_eq!(v.len(), 16);
        assert_eq!(v[0], Stmt::Begin);
        assert_eq!(*v.last().unwrap(), Stmt::Commit);
        assert_eq!(v.iter().filter(|s| matches!(s, Stmt::PointSelect { .. })).count(), 10);
        let ranges: Vec<_> = v
            .iter()
            .filter_map(|s| match s {
                Stmt::Range { lo, hi, what, .. } => Some((*lo, *hi, *what)),
                _ => None,
            })
            .collect();
        assert_eq!(
            ranges.iter().map(|r| r.2).collect::<Vec<_>>(),
            [RangeKind::Simple, RangeKind::Sum, RangeKind::Order, RangeKind::Distinct]
        );
        assert!(ranges.iter().all(|r| r.1 - r.0 == 99 && (1..=1000).contains(&r.0)));
        // The 10 point selects of one transaction use one table, as execute_point_selects does.
        let tables: std::collections::BTreeSet<usize> = v
            .iter()
            .filter_map(|s| match s {
                Stmt::PointSelect { t, .. } => Some(*t),
                _ => None,
            })
            .collect();
        assert_eq!(tables.len(), 1);
    }

    #[test]
    fn read_write_is_eighteen_statements_plus_begin_commit() {
        for seed in 0..20 {
            let v = one_event(Kind::ReadWrite { range: 10_000 }, seed);
            assert_eq!(v.len(), 20);
            assert_eq!((&v[0], &v[19]), (&Stmt::Begin, &Stmt::Commit));
            assert!(matches!(v[15], Stmt::IndexUpdate { .. }));
            assert!(matches!(&v[16], Stmt::NonIndexUpdate { c, .. } if c.len() == 119));
            // The delete and the insert of the same id, as execute_delete_inserts does.
            match (&v[17], &v[18]) {
                (Stmt::Delete { t: t1, id: d }, Stmt::Insert { t: t2, id: Some(i), k, c, pad }) => {
                    assert_eq!((t1, d), (t2, i));
                    assert!((1..=1000).contains(k));
                    assert_eq!((c.len(), pad.len()), (119, 59));
                }
                other => panic!("not delete+insert: {other:?}"),
            }
            let Stmt::Range { lo, hi, .. } = v[11] else { panic!("{:?}", v[11]) };
            assert_eq!(hi - lo, 9_999);
        }
    }

    #[test]
    fn single_statement_tests() {
        for (kind, check) in [
            (Kind::PointQuery, (|s: &Stmt| matches!(s, Stmt::PointSelect { .. })) as fn(&Stmt) -> bool),
            (Kind::UpdateIndex, |s| matches!(s, Stmt::IndexUpdate { .. })),
            (Kind::UpdateNonindex, |s| matches!(s, Stmt::NonIndexUpdate { c, .. } if c.len() == 119)),
            (Kind::UpdateOne, |s| matches!(s, Stmt::NonIndexUpdate { id: 1, .. })),
            (Kind::Delete, |s| matches!(s, Stmt::Delete { .. })),
            (Kind::Insert, |s| matches!(s, Stmt::Insert { id: None, .. })),
            (Kind::RandomPoints, |s| matches!(s, Stmt::InlistSelect { ids, .. } if ids.len() == 100)),
            (Kind::UpdateInlist, |s| matches!(s, Stmt::InlistUpdate { ids, .. } if ids.len() == 100)),
        ] {
            for seed in 0..10 {
                let v = one_event(kind, seed);
                assert_eq!(v.len(), 1, "{kind:?}");
                assert!(check(&v[0]), "{kind:?}: {:?}", v[0]);
            }
        }
        assert!(one_event(Kind::Scan { readahead: true }, 1).is_empty());
    }

    #[test]
    fn hot_points_use_the_same_adjacent_ids() {
        let a = one_event(Kind::HotPoints, 1);
        let b = one_event(Kind::HotPoints, 2);
        let ids = |v: &[Stmt]| match &v[0] {
            Stmt::InlistSelect { ids, .. } => ids.clone(),
            s => panic!("{s:?}"),
        };
        assert_eq!(ids(&a), ids(&b));
        assert_eq!(ids(&a), (501..=600).collect::<Vec<i64>>());
    }

    #[test]
    fn ids_and_tables_are_uniform_over_their_ranges() {
        let mut r = SbRand::new(5);
        let mut per_table = [0u32; 2];
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for _ in 0..4000 {
            let mut v = Vec::new();
            SHAPE.event(Kind::PointQuery, &mut r, &mut v);
            let Stmt::PointSelect { t, id } = v[0] else { panic!() };
            per_table[t] += 1;
            lo = lo.min(id);
            hi = hi.max(id);
        }
        assert!(per_table.iter().all(|n| (1_800..2_200).contains(n)), "{per_table:?}");
        assert!(lo <= 3 && hi >= 998, "{lo}..{hi}");
    }

    #[test]
    fn test_selection_keeps_the_seed_order() {
        let all = select_tests(&[]).unwrap();
        assert_eq!(all.len(), SEED_ORDER.len());
        let names: Vec<String> = ["insert", "point-query.pre"].iter().map(|s| s.to_string()).collect();
        let some = select_tests(&names).unwrap();
        assert_eq!(some.iter().map(|t| t.name).collect::<Vec<_>>(), ["point-query.pre", "insert"]);
        let e = select_tests(&["point-qurey".to_string()]).unwrap_err();
        assert!(e.contains("point-qurey") && e.contains("hot-points"), "{e}");
        // Names are unique.
        let set: std::collections::BTreeSet<_> = SEED_ORDER.iter().map(|t| t.name).collect();
        assert_eq!(set.len(), SEED_ORDER.len());
    }
}
