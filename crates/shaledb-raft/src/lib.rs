//! ShaleDB replica groups on openraft 0.9 (issue 43), first brick: the storage openraft runs on.
//!
//! - [`LogStore`] (`log_store.rs`): openraft's `RaftLogStorage` and its reader on an engine database of its own:
//!   entries, the vote and the committed and purged markers, every append and vote synced before openraft hears
//!   of it; records framed by `codec.rs` (docs/format/raft-log.md). A log with a corrupt or missing entry
//!   is refused at open ([`Error::Corruption`]), so the node never votes with holes.
//! - [`StateMachine`] (`state_machine.rs`): openraft's `RaftStateMachine` on a second engine database: each
//!   entry's [`Proposal`] (a `shaledb::WriteBatch`'s bytes) is applied in the same engine batch as the applied
//!   log id; snapshots are engine checkpoints packed by `snapshot.rs`, installed by switching to a new data
//!   directory.
//!
//!
//! Second brick: the group running over TCP.
//!
//! - [`Network`] (`network.rs`) and the listener (`server.rs`): openraft's `RaftNetworkFactory`/`RaftNetwork`
//!   over TCP, one pooled connection per peer, frames of `wire.rs` (docs/format/raft-wire.md: versioned,
//!   length-prefixed with a limit checked before any allocation, crc32c-checked), connect and I/O timeouts, and
//!   failures mapped to openraft's `Unreachable`/`Network`/`Timeout` errors so it backs off from dead peers.
//! - [`Node`] (`node.rs`): what a server embeds: storage under one directory, the listener, `openraft::Raft`
//!   with [`default_raft_config`]; initialize, propose, linearizable reads, membership changes, status, shutdown.
//!
//! The server's use of it and the CLI are later steps (see this crate's README).

mod codec;
mod error;
mod log_store;
mod network;
mod node;
mod server;
mod snapshot;
mod state_machine;
pub mod wire;

use serde::{Deserialize, Serialize};

pub use error::{Error, Result};
pub use log_store::{LogReader, LogStore};
pub use network::{Network, PeerClient, TransportConfig};
pub use node::{default_raft_config, Node, NodeConfig, Status};
pub use server::{Listener, ListenerStats};
pub use state_machine::{SnapshotBuilder, StateMachine, APPLIED_FAMILY};

/// A node's id in a replica group.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The openraft types of a ShaleDB replica group.
    pub TypeConfig:
        D = Proposal,
        R = Response,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// What a leader proposes: one engine write batch (`shaledb::WriteBatch::data`), applied all or nothing on
/// every member with the entry's log id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The encoded batch.
    pub batch: Vec<u8>,
}

impl Proposal {
    /// The proposal of `batch`.
    pub fn new(batch: &shaledb::WriteBatch) -> Proposal {
        Proposal { batch: batch.data().to_vec() }
    }
}

/// What applying one entry did. Every member computes the same answer from the same entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// A blank or membership entry: only the applied log id (and membership) moved.
    Recorded,
    /// The proposal's batch was applied.
    Applied,
    /// The proposal's batch was refused the same way on every member (malformed bytes, a column family the
    /// state machine does not have, a merge without an operator): nothing of it was applied, the applied log
    /// id moved past it.
    Rejected {
        /// Why.
        reason: String,
    },
}
