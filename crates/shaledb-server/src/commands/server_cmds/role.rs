//! ROLE, REPLICAOF and SLAVEOF: a ShaleDB server is a master without replicas (it does not replicate), unless it
//! is a replica group member (`--cluster-enabled yes`): then ROLE says what it is in the group.

use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use bytes::Bytes;

/// `ROLE`: `master`, the replication offset (0: nothing was ever sent to a replica) and no replicas.
pub fn role(_: &mut Session, shared: &Shared, _: &Args) -> Reply {
    if let Some(c) = shared.store.cluster() {
        return super::cluster::role(c);
    }
    Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"master")), Reply::Int(0), Reply::Array(vec![])])
}

/// `REPLICAOF NO ONE` (and `SLAVEOF`): this server is a master already, so it answers OK as Redis does on a
/// master. `REPLICAOF host port` is refused after Redis's own check of the port: this server cannot follow
/// a master.
pub fn replicaof(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        return Reply::Ok;
    }
    match crate::resp::parse_i64(&args[2]) {
        Some(p) if (0..=65535).contains(&p) => {
            Reply::err("ShaleDB does not replicate: it cannot become a replica of another server")
        }
        _ => Reply::err("Invalid master port"),
    }
}
