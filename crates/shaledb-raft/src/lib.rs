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

/// A member's address as a ShaleDB server records it in openraft's `BasicNode::addr`: `host:port@busport`, the
/// RESP address clients are sent to (`-MOVED`, `CLUSTER SLOTS`) and the bus port the transport dials (Redis
/// Cluster's `ip:port@cport` notation). An address without `@` (the transport alone, as this crate's tests
/// use it) is only a transport address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberAddr {
    /// The host (an IPv6 address keeps its brackets).
    pub host: String,
    /// The RESP port.
    pub port: u16,
    /// The transport's port.
    pub bus_port: u16,
    /// `host:port`, the RESP address.
    pub resp: String,
    /// `host:busport`, the transport address.
    pub bus: String,
}

impl MemberAddr {
    /// Parses `host:port@busport`; a clear error for anything else.
    pub fn parse(s: &str) -> std::result::Result<MemberAddr, String> {
        let (resp, bus) = s.rsplit_once('@').ok_or_else(|| format!("'{s}' is not host:port@busport (no '@')"))?;
        let (host, port) =
            resp.rsplit_once(':').ok_or_else(|| format!("'{s}' is not host:port@busport (no ':' before '@')"))?;
        if host.is_empty() || host.contains('@') || host.chars().any(char::is_whitespace) {
            return Err(format!("'{s}' is not host:port@busport (bad host '{host}')"));
        }
        if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
            return Err(format!("'{s}': an IPv6 host is written in brackets, as [::1]:7000@17000"));
        }
        let num = |what: &str, v: &str| -> std::result::Result<u16, String> {
            match v.parse::<u16>() {
                Ok(p) if p > 0 && v.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
                _ => Err(format!("'{s}': {what} '{v}' is not a port (1-65535)")),
            }
        };
        let port = num("the port", port)?;
        let bus_port = num("the bus port", bus)?;
        Ok(MemberAddr {
            host: host.to_string(),
            port,
            bus_port,
            resp: format!("{host}:{port}"),
            bus: format!("{host}:{bus_port}"),
        })
    }

    /// `host:port@busport`.
    pub fn format(host: &str, port: u16, bus_port: u16) -> String {
        format!("{host}:{port}@{bus_port}")
    }
}

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

/// What a leader proposes: sorted tables to ingest, then one engine write batch (`shaledb::WriteBatch::data`),
/// applied on every member with the entry's log id.
///
/// `tables` are whole SST files written by `shaledb::ingest::SstFileWriter` (a slot's keys copied in by a
/// move, issue 44): each member ingests them into its data's default column family before it applies
/// `batch`, and no key of a table is also written by `batch`. Most proposals have none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The encoded batch.
    #[serde(with = "byte_string")]
    pub batch: Vec<u8>,
    /// SST files to ingest first, in a key order that does not overlap (each file's range its own).
    #[serde(with = "byte_strings")]
    pub tables: Vec<Vec<u8>>,
}

/// A `Vec<u8>` as serde's byte string rather than a sequence of `u8`s: the same bytes in postcard (a varint
/// length, then the bytes; a `u8` is one byte), but copied whole instead of decoded one element at a time,
/// which cost a member about 7% of its CPU while a slot's tables were replicated.
pub(crate) mod byte_string {
    use serde::de::{Deserializer, SeqAccess, Visitor};
    use serde::Serializer;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(ByteBuf)
    }

    pub struct ByteBuf;

    impl<'de> Visitor<'de> for ByteBuf {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }

        fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }

        /// Formats without byte strings give a sequence; its length hint is not trusted for the allocation.
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::new();
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }
}

/// A `Vec<Vec<u8>>` as a sequence of byte strings ([`byte_string`]).
mod byte_strings {
    use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
    use serde::ser::{SerializeSeq, Serializer};

    struct Bytes<'a>(&'a [u8]);

    impl serde::Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    pub fn serialize<S: Serializer>(v: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(&Bytes(b))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        d.deserialize_seq(Seq)
    }

    struct Seq;

    struct One;

    impl<'de> DeserializeSeed<'de> for One {
        type Value = Vec<u8>;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<u8>, D::Error> {
            d.deserialize_byte_buf(super::byte_string::ByteBuf)
        }
    }

    impl<'de> Visitor<'de> for Seq {
        type Value = Vec<Vec<u8>>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sequence of byte strings")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Vec<u8>>, A::Error> {
            let mut out = Vec::new();
            while let Some(b) = seq.next_element_seed(One)? {
                out.push(b);
            }
            Ok(out)
        }
    }
}

impl Proposal {
    /// The proposal of `batch` alone.
    pub fn new(batch: &shaledb::WriteBatch) -> Proposal {
        Proposal { batch: batch.data().to_vec(), tables: Vec::new() }
    }

    /// The proposal of `tables`, ingested before `batch` is applied.
    pub fn with_tables(batch: &shaledb::WriteBatch, tables: Vec<Vec<u8>>) -> Proposal {
        Proposal { batch: batch.data().to_vec(), tables }
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

#[cfg(test)]
mod member_addr_tests {
    use super::MemberAddr;

    #[test]
    fn member_addresses_parse_into_resp_and_bus_addresses() {
        let m = MemberAddr::parse("127.0.0.1:7000@17000").unwrap();
        assert_eq!((m.host.as_str(), m.port, m.bus_port), ("127.0.0.1", 7000, 17000));
        assert_eq!((m.resp.as_str(), m.bus.as_str()), ("127.0.0.1:7000", "127.0.0.1:17000"));
        assert_eq!(MemberAddr::format("127.0.0.1", 7000, 17000), "127.0.0.1:7000@17000");
        let v6 = MemberAddr::parse("[::1]:7001@17001").unwrap();
        assert_eq!((v6.resp.as_str(), v6.bus.as_str()), ("[::1]:7001", "[::1]:17001"));
        assert_eq!(MemberAddr::parse("db1.example:6379@16379").unwrap().bus, "db1.example:16379");
        for bad in [
            "127.0.0.1:7000",
            "127.0.0.1@17000",
            ":7000@17000",
            "h:0@1",
            "h:1@70000",
            "h:x@1",
            "::1:7000@1",
            "h:+5@1",
            "h:1@",
        ] {
            assert!(MemberAddr::parse(bad).is_err(), "{bad} accepted");
        }
        assert!(MemberAddr::parse("h:1").unwrap_err().contains("no '@'"));
    }
}

#[cfg(test)]
mod proposal_encoding_tests {
    use super::Proposal;

    /// The derive's encoding of the same fields: a sequence of `u8`s per byte vector.
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Plain {
        batch: Vec<u8>,
        tables: Vec<Vec<u8>>,
    }

    #[test]
    fn byte_strings_encode_as_the_derived_sequences_did() {
        let batch: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let tables = vec![vec![7u8; 300], Vec::new(), (0..200u8).collect()];
        let p = Proposal { batch: batch.clone(), tables: tables.clone() };
        let plain = Plain { batch, tables };
        let bytes = postcard::to_stdvec(&p).unwrap();
        assert_eq!(bytes, postcard::to_stdvec(&plain).unwrap());
        assert_eq!(postcard::from_bytes::<Proposal>(&bytes).unwrap(), p);
        assert_eq!(postcard::from_bytes::<Plain>(&bytes).unwrap(), plain);
        // A length past the input is an error, not an allocation of that size.
        let mut lying = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
        lying.extend_from_slice(&[1, 2, 3]);
        assert!(postcard::from_bytes::<Proposal>(&lying).is_err());
    }
}
