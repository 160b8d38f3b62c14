//! `shaledb server`: a Redis-protocol server on the ShaleDB engine, durable by default.
//!
//! In layers, from the ground up; a module uses only modules of its own layer or of the layers below:
//!
//! 1. the ground, which uses nothing of the crate:
//!    - [`resp`]: the RESP2/RESP3 request parser (incremental, zero-copy, limited) and reply encoder (its
//!      fuzz driver alone looks commands up in the table);
//!    - [`keys`]: how Redis keys and values are laid out on the engine (docs/format/server-keys.md);
//!    - [`dead`]: where the commit step knows a collection has no live member records;
//!    - [`notify`]: keyspace-notification classes and events;
//! 2. what reads the ground only:
//!    - [`layout`]: the layout marker, and telling a server keyspace from a plain database;
//!    - [`config`]: flags and run-time configuration;
//! 3. [`store`]: storage only, what a command sees of the engine (`ReadCtx`, `WriteCtx`) and its typed
//!    errors; it knows nothing of commands, replies or threads;
//! 4. [`types`]: each Redis type's operations on the store, without the protocol;
//! 5. the server, whose modules call each other:
//!    - [`acl`]: users, their rules and permissions (ACL), checked before every command;
//!    - [`commands`]: the command table (one `cmd!` line per command) and the commands, one module per
//!      family: they parse their arguments, call the store or `types`, and reply;
//!    - [`commit`]: the commit step, which executes every write command and group-commits them, and the
//!      [`Store`](commit::Store) that owns it with the engine;
//!    - [`expire`]: the background sweeper that deletes expired keys, and the keyspace counts of `INFO`;
//!    - [`gc`]: the collector that deletes the member records of dead collection versions;
//!    - [`blocking`]: clients blocked on keys (BLPOP, XREAD BLOCK) and the commit step's wake-ups;
//!    - [`server`]: the listener, connections, sessions and shutdown;
//!    - [`cluster`]: replica groups (issue 43): the raft node a server runs in cluster mode, slots, redirects
//!      and the read lease.

pub mod access;
pub mod acl;
pub mod blocking;
pub mod cluster;
pub mod commands;
pub mod commit;
pub mod config;
pub mod dead;
pub mod expire;
pub mod fuzzing;
pub mod gc;
pub mod keys;
pub mod layout;
pub mod notify;
pub mod resp;
pub mod server;
pub mod store;
pub mod tracking;
pub mod types;
pub mod wakeup;

pub use config::{Appendfsync, Config, ServerArgs};
pub use server::{run, RunningServer};

/// The Redis version clients are told (`INFO server`, `HELLO`): the Redis 7.0 command set is what we follow.
pub const REDIS_VERSION: &str = "7.0.0";
