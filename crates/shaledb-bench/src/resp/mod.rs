//! `shaledb bench resp`: a load tool that drives any RESP server (ShaleDB's or Redis) on this machine with
//! the workloads of seed 001 (obigstore's `bm_write` / `bm_read`): hotspot, sequential and uniform inserts,
//! random reads over a working set, and ordered range reads (a ShaleDB extension; "n/a" against Redis).
//!
//! Measurement reuses the engine benchmarks' pieces: [`crate::reporting::recorder`] for the time series and merged
//! histograms, [`crate::reporting::report`]'s result line and JSON record, [`crate::reporting::plot`]'s plots. What is new is
//! the client ([`client`], [`proto`]), the workloads' requests and reply checks ([`workloads`]), and the
//! runner ([`runner`]): connections spread over client threads, each an event loop; pipelining; a fixed
//! arrival rate whose latency is measured from the intended send time (no coordinated omission); with
//! `--cluster`, routing by hash slot ([`slots`]).

pub mod client;
pub mod flags;
pub mod proto;
pub mod runner;
pub mod slots;
pub mod workloads;

pub use flags::RespFlags;
pub use runner::{run_resp, RespResult, RespRun};
pub use workloads::{Workload, RANGE_COMMAND};

use std::net::SocketAddr;

/// Errors of `shaledb bench resp` other than failed requests (those are counted in the results).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RespError {
    /// A flag, or a file of the tool (JSON, plots).
    #[error(transparent)]
    Bench(#[from] crate::BenchError),
    /// A connection could not be set up.
    #[error("connecting to {addr}: {cause}")]
    Connect {
        /// The server.
        addr: SocketAddr,
        /// Why (in the message, not also a `source()`).
        cause: client::ClientError,
    },
    /// Requests failed (error replies, broken connections); the results were printed.
    #[error("{failed} request(s) failed; first error ({workload}): {first}")]
    Failed {
        /// Failed requests over all workloads.
        failed: u64,
        /// The workload of the first failure.
        workload: String,
        /// Its message.
        first: String,
    },
    /// A client thread could not start.
    #[error("starting a client thread: {0}")]
    Thread(std::io::Error),
}
