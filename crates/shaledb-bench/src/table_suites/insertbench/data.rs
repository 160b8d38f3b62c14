//! The insert benchmark's table and values, as iibench (Mark Callaghan's `iibench.py`, after Tokutek's
//! original) makes them: per row a cash register in `0..1000`, a product in `0..10000`, a customer in
//! `0..100000`, and `price = (random() * 500 + customerid) / 100` (iibench's `--max_price` 500), plus the time
//! of the batch and a data field of `--pad` bytes of which half is random and half a repeated byte (iibench's
//! `data_random_pct` 50: half compressible).
//!
//! The three indexed fields are independent uniform draws, so each secondary-index entry lands at a random
//! place of its index: the "fields inserted in random order" of the seed, which is what makes index
//! maintenance expensive for an engine that reads index pages to insert.

use crate::table_suites::table::{Column, ColumnType, IndexDef, Row, TableDef, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// iibench's `--cashregisters`.
pub const CASHREGISTERS: i64 = 1000;
/// iibench's `--products`.
pub const PRODUCTS: i64 = 10_000;
/// iibench's `--customers`.
pub const CUSTOMERS: i64 = 100_000;
/// iibench's `--max_price`.
pub const MAX_PRICE: f64 = 500.0;
/// Largest price in cents: `MAX_PRICE + CUSTOMERS - 1` rounded up.
pub const MAX_PRICE_CENTS: i64 = 500 + CUSTOMERS;
/// Largest `--pad`: the data column is a `VARCHAR` whose length the table layer keeps in a u16.
pub const MAX_PAD: usize = 65_535;

/// Column positions.
pub const COL_TRANSACTIONID: usize = 0;
/// `dateandtime`.
pub const COL_DATEANDTIME: usize = 1;
/// `cashregisterid`.
pub const COL_CASHREGISTERID: usize = 2;
/// `customerid`.
pub const COL_CUSTOMERID: usize = 3;
/// `productid`.
pub const COL_PRODUCTID: usize = 4;
/// `price`.
pub const COL_PRICE: usize = 5;
/// `data` (the padding).
pub const COL_DATA: usize = 6;

/// Index ids: `0x6969_00xx` ("ii"). sysbench's tables use `2n` and `2n + 1` for n in `1..=1024` (at most
/// 2049), so the two suites' tables could even share a database without colliding.
pub const PRIMARY_ID: u32 = 0x6969_0000;
/// `marketsegment (price, customerid)`.
pub const MARKET_ID: u32 = PRIMARY_ID + 1;
/// `registersegment (cashregisterid, price, customerid)`.
pub const REGISTER_ID: u32 = PRIMARY_ID + 2;
/// `pdc (price, dateandtime, customerid)`.
pub const PDC_ID: u32 = PRIMARY_ID + 3;

/// Index names in `secondary` order (iibench's MySQL names).
pub const INDEX_NAMES: [&str; 3] = ["marketsegment", "registersegment", "pdc"];

/// Seconds since the Unix epoch of 2015-06-29 00:00:00 UTC (the seed's date): `dateandtime` is this plus the
/// seconds since the load began.
pub const EPOCH_BASE: i64 = 1_435_536_000;

/// The table `purchases_index` with `data VARCHAR(pad)`.
///
/// Types: `transactionid BIGINT` (iibench: `int not null auto_increment`; BIGINT as the issue asks, so that
/// no run can overflow it), `dateandtime BIGINT` seconds since the epoch (iibench: `datetime` at second
/// resolution; an integer keeps the order and the 8 bytes of a packed DATETIME), the three ids `INT`, `price
/// INT` in cents (iibench: `float` filled from `%.2f`; the table layer has no float column, and cents keep
/// every distinct value iibench sends and its order), `data VARCHAR(pad)`.
pub fn purchases_def(pad: usize) -> TableDef {
    let col = |name: &str, ty| Column { name: name.into(), ty };
    let width = u16::try_from(pad.max(1)).unwrap_or(u16::MAX);
    TableDef {
        name: "purchases_index".into(),
        columns: vec![
            col("transactionid", ColumnType::Int64),
            col("dateandtime", ColumnType::Int64),
            col("cashregisterid", ColumnType::Int32),
            col("customerid", ColumnType::Int32),
            col("productid", ColumnType::Int32),
            col("price", ColumnType::Int32),
            col("data", ColumnType::VarChar(width)),
        ],
        primary: IndexDef { id: PRIMARY_ID, name: "PRIMARY".into(), columns: vec![COL_TRANSACTIONID] },
        secondary: vec![
            IndexDef { id: MARKET_ID, name: INDEX_NAMES[0].into(), columns: vec![COL_PRICE, COL_CUSTOMERID] },
            IndexDef {
                id: REGISTER_ID,
                name: INDEX_NAMES[1].into(),
                columns: vec![COL_CASHREGISTERID, COL_PRICE, COL_CUSTOMERID],
            },
            IndexDef {
                id: PDC_ID,
                name: INDEX_NAMES[2].into(),
                columns: vec![COL_PRICE, COL_DATEANDTIME, COL_CUSTOMERID],
            },
        ],
    }
}

/// A client's random numbers.
pub struct IiRand {
    rng: SmallRng,
}

impl IiRand {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> IiRand {
        IiRand { rng: SmallRng::seed_from_u64(seed) }
    }

    /// Uniform in `0..n` (`0` when `n <= 0`).
    pub fn below(&mut self, n: i64) -> i64 {
        if n <= 0 {
            0
        } else {
            self.rng.gen_range(0..n)
        }
    }

    /// iibench's price for `customerid`, in cents: `((random() * 500) + customerid) / 100` printed with
    /// `%.2f`, times 100.
    pub fn price_cents(&mut self, customerid: i64) -> i64 {
        let x: f64 = self.rng.gen::<f64>() * MAX_PRICE + customerid as f64;
        x.round() as i64
    }

    /// A start for a query on `marketsegment` or `pdc`: a price drawn as a row's (iibench's
    /// `generate_market_query`).
    pub fn query_price(&mut self) -> i64 {
        let c = self.below(CUSTOMERS);
        self.price_cents(c)
    }

    /// `pad` bytes: the first half (rounded down) random bytes, the rest `'a'` (iibench puts the constant part
    /// first; the order does not change what a block compressor saves).
    pub fn fill_data(&mut self, pad: usize, out: &mut Vec<u8>) {
        out.clear();
        let random = pad / 2;
        out.resize(random, 0);
        self.rng.fill(&mut out[..]);
        out.resize(pad, b'a');
    }

    /// Fills `row` (resized to the column count, its buffers reused) with a new row of id `id` at time
    /// `when` with `pad` bytes of data.
    pub fn fill_row(&mut self, row: &mut Row, id: i64, when: i64, pad: usize) {
        row.resize(7, Value::Int(0));
        let cash = self.below(CASHREGISTERS);
        let product = self.below(PRODUCTS);
        let customer = self.below(CUSTOMERS);
        let price = self.price_cents(customer);
        row[COL_TRANSACTIONID] = Value::Int(id);
        row[COL_DATEANDTIME] = Value::Int(when);
        row[COL_CASHREGISTERID] = Value::Int(cash);
        row[COL_CUSTOMERID] = Value::Int(customer);
        row[COL_PRODUCTID] = Value::Int(product);
        row[COL_PRICE] = Value::Int(price);
        if !matches!(row[COL_DATA], Value::Str(_)) {
            row[COL_DATA] = Value::Str(Vec::with_capacity(pad));
        }
        if let Value::Str(buf) = &mut row[COL_DATA] {
            self.fill_data(pad, buf);
        }
    }
}

/// Seed of one thread of one step: distinct per run seed, configuration, step and thread, and the same for
/// every engine (both engines of a configuration draw the same numbers).
pub fn thread_seed(base: u64, config: usize, step: usize, thread: usize) -> u64 {
    crate::table_suites::sysbench::data::client_seed(base ^ 0x6969_6969_0000_0000, config, step, thread)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table_suites::table::Table;

    #[test]
    fn rows_have_iibench_ranges() {
        let mut r = IiRand::new(5);
        let mut row = Row::new();
        let (mut cash, mut prod, mut cust) = (Vec::new(), Vec::new(), Vec::new());
        for id in 1..=2000 {
            r.fill_row(&mut row, id, EPOCH_BASE + 3, 100);
            let int = |c: usize| match row[c] {
                Value::Int(v) => v,
                _ => panic!("column {c} is not an integer: {:?}", row[c]),
            };
            assert_eq!(int(COL_TRANSACTIONID), id);
            assert_eq!(int(COL_DATEANDTIME), EPOCH_BASE + 3);
            assert!((0..CASHREGISTERS).contains(&int(COL_CASHREGISTERID)));
            assert!((0..PRODUCTS).contains(&int(COL_PRODUCTID)));
            let c = int(COL_CUSTOMERID);
            assert!((0..CUSTOMERS).contains(&c));
            let p = int(COL_PRICE);
            assert!(p >= c && p <= c + 500, "price {p} for customer {c}");
            cash.push(int(COL_CASHREGISTERID));
            prod.push(int(COL_PRODUCTID));
            cust.push(c);
            assert!(matches!(&row[COL_DATA], Value::Str(d) if d.len() == 100));
        }
        // Spread over the ranges, not clustered (in random order, not in PK order).
        for (v, n) in [(&mut cash, CASHREGISTERS), (&mut prod, PRODUCTS), (&mut cust, CUSTOMERS)] {
            let (lo, hi) = (*v.iter().min().unwrap(), *v.iter().max().unwrap());
            assert!(lo < n / 20 && hi > n - n / 20, "range {lo}..{hi} of {n}");
            let ascending = v.windows(2).filter(|w| w[0] <= w[1]).count();
            assert!((800..1200).contains(&ascending), "{ascending} of 1999 ascending pairs");
        }
    }

    #[test]
    fn data_is_half_random() {
        let mut r = IiRand::new(1);
        let mut d = Vec::new();
        r.fill_data(1024, &mut d);
        assert_eq!(d.len(), 1024);
        assert!(d[512..].iter().all(|&b| b == b'a'));
        let distinct: std::collections::BTreeSet<u8> = d[..512].iter().copied().collect();
        assert!(distinct.len() > 200, "{}", distinct.len());
        r.fill_data(1, &mut d);
        assert_eq!(d, b"a");
        r.fill_data(0, &mut d);
        assert!(d.is_empty());
    }

    #[test]
    fn schema_is_valid_and_ids_do_not_collide_with_sysbench() {
        let def = purchases_def(16);
        let t = Table::new(def.clone()).unwrap();
        assert_eq!(t.def().secondary.len(), 3);
        assert_eq!(def.secondary[0].columns, vec![COL_PRICE, COL_CUSTOMERID]);
        assert_eq!(def.secondary[1].columns, vec![COL_CASHREGISTERID, COL_PRICE, COL_CUSTOMERID]);
        assert_eq!(def.secondary[2].columns, vec![COL_PRICE, COL_DATEANDTIME, COL_CUSTOMERID]);
        for n in [1u16, 2, 512, 1024, u16::MAX] {
            let sb = TableDef::sbtest(n);
            for id in [sb.primary.id, sb.secondary[0].id] {
                assert!(![PRIMARY_ID, MARKET_ID, REGISTER_ID, PDC_ID].contains(&id), "sbtest{n} uses {id}");
            }
        }
        let mut r = IiRand::new(2);
        let mut row = Row::new();
        r.fill_row(&mut row, 1, EPOCH_BASE, 16);
        t.check_row(&row).unwrap();
        r.fill_row(&mut row, 2, EPOCH_BASE, 17);
        assert!(t.check_row(&row).is_err(), "a pad longer than the column must not fit");
    }

    #[test]
    fn seeds_are_engine_independent_and_distinct() {
        assert_eq!(thread_seed(7, 1, 2, 3), thread_seed(7, 1, 2, 3));
        assert_ne!(thread_seed(7, 1, 2, 3), thread_seed(7, 1, 2, 4));
        assert_ne!(thread_seed(7, 0, 0, 0), crate::table_suites::sysbench::data::client_seed(7, 0, 0, 0));
        let (mut a, mut b) = (IiRand::new(9), IiRand::new(9));
        let (mut x, mut y) = (Row::new(), Row::new());
        a.fill_row(&mut x, 1, 0, 64);
        b.fill_row(&mut y, 1, 0, 64);
        assert_eq!(x, y);
    }
}
