//! The storage of each Redis type on the engine: one module per type, over the store's
//! [`ReadCtx`](crate::store::ReadCtx) and [`WriteCtx`](crate::store::WriteCtx).
//!
//! A module here knows its type's layout (the member keys, the sub-kinds, the collection's `extra` slots; the
//! grammar is docs/format/server-keys.md) and nothing of the protocol: no `Reply`, no `Args`. Each returns its
//! own error enum, which wraps [`store::Error`](crate::store::Error) and adds the type's own cases; the command
//! modules (`commands/<type>.rs`) parse the arguments, call these functions and turn results and errors into
//! replies (`impl From<types::<type>::Error> for Reply` sits next to the commands).
//!
//! - [`coll`]: what the collections share: member listing, scan steps, random picks, key size checks;
//! - [`hash`]: field records; set, delete, increment;
//! - [`list`]: head and tail bounds, element positions; push, pop, index, range, trim, insert, remove, move;
//! - [`stream`]: entry ids, the header slots, entry records and emulated nodes; add, trim, delete, range, read;
//! - [`zset`]: member records and the score index; add, remove, pop, store; ranks and score, rank and lex
//!   ranges;
//! - [`set`]: member records; add, remove, pop, move; intersection, union, difference, store;
//! - [`string`]: the value inline in the meta value, and the float text INCRBYFLOAT stores.
//! - [`bits`]: bit operations on strings (SETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD) and LCS's table;
//! - [`long_double`]: INCRBYFLOAT's and HINCRBYFLOAT's arithmetic in C's `long double`, as Redis does it.
//! - [`hll`]: HyperLogLog values (a string in Redis's dense and sparse encodings); [`geo`]: geohash scores and
//!   searches on sorted sets.

pub mod bits;
pub mod coll;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod list;
pub mod long_double;
pub mod rdb;
pub mod scripts;
pub mod set;
pub mod stream;
pub mod string;
pub mod zset;

#[cfg(test)]
mod pop_reads;

/// What the unit tests of the type modules share: a database in a temporary directory and a group of the
/// commit step on it.
#[cfg(test)]
pub(crate) mod testing {
    use crate::store::{now_ms, WriteCtx};
    use shaledb::{Db, Options};

    /// A new database in a temporary directory; the directory lives as long as the guard returned.
    pub fn temp_db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() }).unwrap();
        (dir, db)
    }

    /// A commit-thread context on `db` with a group begun now.
    pub fn group(db: &Db) -> WriteCtx<'_> {
        let mut ctx = WriteCtx::new(db);
        ctx.begin(now_ms());
        ctx
    }
}
