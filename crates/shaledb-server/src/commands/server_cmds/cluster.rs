//! CLUSTER, ASKING, READONLY and READWRITE on a server that is not part of a cluster: the replies of a Redis
//! 7.0 instance started with `cluster-enabled no`. Each checks its subcommand and arity first (Redis finds the
//! subcommand and checks its arity before running it), then answers that cluster support is disabled. The
//! commands exist so clients and tools that probe for cluster mode (redis-py's `RedisCluster`, `redis-cli -c`,
//! `COMMAND LIST FILTERBY PATTERN cluster*`) get the answer Redis gives, instead of "unknown command".

use super::facts;
use crate::commands::{sub_arity, unknown_subcommand};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use bytes::Bytes;

const DISABLED: &str = "This instance has cluster support disabled";

/// `CLUSTER <subcommand> ...`.
pub fn cluster(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    reply(args)
}

/// `ASKING`, `READONLY`, `READWRITE`.
pub fn disabled(_: &mut Session, _: &Shared, _: &Args) -> Reply {
    disabled_reply()
}

/// CLUSTER's reply, from a connection or a script.
pub fn reply(args: &[Bytes]) -> Reply {
    let Some(full) = super::stats::full_name("cluster", Some(&args[1])) else {
        return unknown_subcommand("CLUSTER", &args[1]);
    };
    match facts::lookup(&full) {
        Some(f) if !facts::arity_fits(f.arity, args.len()) => {
            sub_arity("cluster", &full.as_bytes()["cluster|".len()..])
        }
        _ => Reply::err(DISABLED),
    }
}

/// The reply of ASKING, READONLY and READWRITE, from a connection or a script.
pub fn disabled_reply() -> Reply {
    Reply::err(DISABLED)
}
