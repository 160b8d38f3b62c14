//! Storage: what a command sees of the engine, and nothing above it (no commands, replies or threads).
//!
//! - [`ReadCtx`] (`read.rs`): what a read command sees, on the connection's task: the engine at one
//!   snapshot, and the merged scans ([`Scan`], [`Members`]);
//! - [`WriteCtx`] (`write.rs`): what a write command sees, in the commit step (`commit.rs`): the engine
//!   through the group's pending writes ([`Overlay`]), and those writes;
//! - [`Watches`] (`watches.rs`): the keys clients WATCH, told of every write of a meta key;
//! - [`Error`] (`error.rs`): what goes wrong, typed; the command layer turns it into the reply Redis gives.
//!
//! It builds on `keys.rs` (how keys and values are laid out) and `dead.rs` (where collections have no live
//! records) alone; `types/`, the commands and the commit step (`commit.rs`) build on it.

use crate::keys;
use std::time::{SystemTime, UNIX_EPOCH};

mod counts;
mod error;
mod read;
pub mod tables;
mod watches;
mod write;

pub use counts::{ReadCounts, Reads};
pub use error::Error;
pub use read::{CacheOnly, Members, Misses, ReadCtx, Scan};
pub use watches::{WatchInbox, Watches};
pub use write::{check_entry_size, DbRef, Overlay, ProposeFn, Waiters, WriteCtx};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The collection a live meta value holds, if it is of type `typ` (`get_coll` of [`ReadCtx`] and
/// [`WriteCtx`]): `Err(WRONGTYPE)` for another type or a meta value that holds no collection.
fn coll_of_type(meta: &keys::Meta, stored: &[u8], typ: keys::Type) -> Result<keys::Coll, Error> {
    if meta.typ != typ {
        return Err(Error::WrongType);
    }
    match keys::Coll::decode(stored) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(Error::WrongType),
        Err(e) => Err(Error::Corrupt(e.to_string())),
    }
}

#[cfg(test)]
mod tests;
