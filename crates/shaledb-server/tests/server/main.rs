//! Integration tests of `shaledb server`: a server started in this process on a temporary directory and a
//! free loopback port, and clients talking RESP over TCP. One module per area; what they share (starting a
//! server, the clients, the expected error lines, a reference redis-server) is in `helpers`.

mod helpers;

mod acl;
mod admin;
mod backpressure;
mod bits;
mod blocking;
mod cluster;
mod cluster_disk;
mod cluster_faults;
mod cluster_linearizable;
mod cluster_ops;
mod cluster_slots;
mod collections;
mod command_info;
mod config_save;
mod differential;
mod dump;
mod failures;
mod fuzz_corpus;
mod geohll;
mod keyspace;
mod knobs;
mod linearizable;
mod listener;
mod lists;
mod migrate;
mod notify;
mod object_access;
mod ordering;
mod protocol;
mod pubsub;
mod read_pool;
mod redis_gaps;
mod redispy;
mod scripting;
mod sort;
mod streams;
mod tracking;
mod transactions;
mod watch;
mod zsets;
