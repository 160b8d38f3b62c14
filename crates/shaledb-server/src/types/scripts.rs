//! The durable records of FUNCTION libraries (docs/format/server-keys.md, "Function libraries").
//!
//! ```text
//! library_key   := 0xfe "shaledb-function:" library_name    outside every database's range (0..=15)
//! library_value := code                                       the FUNCTION LOAD payload, shebang line included
//! ```
//!
//! Functions belong to the server, not to a database: like the layout marker (0xff), the records sit above
//! every `db` byte, so SCAN, KEYS, FLUSHDB, FLUSHALL, the expiry sweep and the collector never see them. A
//! library is written by the commit step in the group of the FUNCTION LOAD, FUNCTION DELETE or FUNCTION
//! FLUSH that changed it, so it is acknowledged after that group's fsync, and read back when the server
//! loads its functions (on the first command that needs them).

use crate::store::{self, ReadCtx, WriteCtx};

/// The first bytes of every library record's key.
pub const PREFIX: &[u8] = b"\xfeshaledb-function:";

/// Why reading or writing a library record failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] store::Error),
    /// A record whose key does not hold a valid library name (the names FUNCTION LOAD accepts are ASCII).
    #[error("corrupt function library record: key {0:?}")]
    BadName(Vec<u8>),
}

/// The engine key of library `name`.
pub fn library_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(PREFIX.len() + name.len());
    k.extend_from_slice(PREFIX);
    k.extend_from_slice(name.as_bytes());
    k
}

/// The key just past every library record.
fn upper_bound() -> Vec<u8> {
    let mut up = PREFIX.to_vec();
    if let Some(last) = up.last_mut() {
        *last += 1;
    }
    up
}

/// Stores (or replaces) library `name` with its code.
pub fn put(ctx: &mut WriteCtx<'_>, name: &str, code: &[u8]) {
    ctx.put_raw(&library_key(name), code);
}

/// Deletes library `name`.
pub fn delete(ctx: &mut WriteCtx<'_>, name: &str) {
    ctx.delete_raw(&library_key(name));
}

/// Every stored library, `(name, code)`, in name order, as `view` sees them (a commit step's view includes
/// its group's pending writes).
pub fn load_all(view: &ReadCtx<'_>) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let mut out = Vec::new();
    for item in view.scan(PREFIX, &upper_bound(), false) {
        let (k, v) = item?;
        let name = k.get(PREFIX.len()..).ok_or_else(|| Error::BadName(k.clone()))?;
        let name = std::str::from_utf8(name).map_err(|_| Error::BadName(k.clone()))?;
        out.push((name.to_string(), v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::testing::temp_db;

    #[test]
    fn libraries_are_stored_listed_and_deleted_outside_every_database() {
        let (_dir, db) = temp_db();
        let mut ctx = WriteCtx::new(&db);
        ctx.begin(1);
        put(&mut ctx, "lib_b", b"#!lua name=lib_b\nbody");
        put(&mut ctx, "lib_a", b"#!lua name=lib_a\nbody");
        // A user key in the last database sorts below every library record.
        ctx.put_string(b"k", b"v", None).unwrap();
        assert_eq!(ctx.finish(true), Ok(true));
        let view = ReadCtx::new(&db, crate::keys::Keyspace::Ordered, 0, 1);
        let all = load_all(&view).unwrap();
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lib_a", "lib_b"]);
        assert_eq!(all[0].1, b"#!lua name=lib_a\nbody");
        assert!(library_key("x")[0] > crate::keys::DATABASES);
        ctx.begin(2);
        delete(&mut ctx, "lib_a");
        // The group's own view sees the pending delete.
        assert_eq!(load_all(&ctx.view()).unwrap().len(), 1);
        ctx.finish(true).unwrap();
        assert_eq!(load_all(&ReadCtx::new(&db, crate::keys::Keyspace::Ordered, 0, 2)).unwrap().len(), 1);
    }
}
