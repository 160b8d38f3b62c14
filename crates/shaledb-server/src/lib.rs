//! `shaledb server`: a Redis-protocol server on the ShaleDB engine, durable by default.
//!
//! - [`resp`]: the RESP2/RESP3 request parser (incremental, zero-copy, limited) and reply encoder;
//! - [`keys`]: how Redis keys and values are laid out on the engine (docs/format/server-keys.md);
//! - [`layout`]: the layout marker, and telling a server keyspace from a plain database;
//! - [`store`]: the engine, and the commit thread that executes every write and group-commits them;
//! - [`expire`]: the background sweeper that deletes expired keys, and the keyspace counts of `INFO`;
//! - [`gc`]: the collector that deletes the member records of dead collection versions;
//! - [`commands`]: the command table and the commands, one module per family;
//! - [`blocking`]: clients blocked on keys (BLPOP, XREAD BLOCK) and the commit thread's wake-ups;
//! - [`server`]: the listener, connections, sessions and shutdown;
//! - [`config`]: flags and run-time configuration.

pub mod blocking;
pub mod commands;
pub mod config;
pub mod dead;
pub mod expire;
pub mod gc;
pub mod keys;
pub mod layout;
pub mod resp;
pub mod server;
pub mod store;

pub use config::{Config, ServerArgs};
pub use server::{run, RunningServer};
pub use store::Appendfsync;

/// The Redis version clients are told (`INFO server`, `HELLO`): the Redis 7.0 command set is what we follow.
pub const REDIS_VERSION: &str = "7.0.0";
