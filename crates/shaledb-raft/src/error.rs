//! The crate's one error type.

use std::path::PathBuf;

/// What the raft store and the state machine report. openraft sees each as a `StorageError`, which stops the
/// node: a node whose log or state cannot be trusted neither votes nor acknowledges.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine failed (I/O, a read-only database after a failed sync, corruption found by the engine).
    #[error(transparent)]
    Engine(#[from] shaledb::Error),
    /// Stored raft data failed a format, checksum or continuity check.
    #[error("corrupt raft data in {}: {what}", dir.display())]
    Corruption {
        /// The database or snapshot directory holding the bad data.
        dir: PathBuf,
        /// What was wrong, naming the log index or key concerned.
        what: String,
    },
    /// The caller asked for something the store refuses (an append that would leave a hole in the log).
    #[error("refused: {0}")]
    InvalidArgument(String),
    /// A blocking task running engine work panicked or was cancelled with its runtime.
    #[error("the engine task did not finish: {0}")]
    Task(String),
    /// A socket could not be bound or its address read.
    #[error("{op} {addr}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The address concerned.
        addr: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// This node is not the leader: ask the leader, when one is known.
    #[error("not the leader; the leader is {}", leader_text(.leader_id, .leader_addr))]
    NotLeader {
        /// The leader's node id, if known.
        leader_id: Option<crate::NodeId>,
        /// The leader's transport address ("host:port"), if known.
        leader_addr: Option<String>,
    },
    /// No answer within the time allowed. For a proposal the outcome is unknown: it may still commit.
    #[error("{op} did not finish within {after:?}")]
    Timeout {
        /// What timed out.
        op: &'static str,
        /// The limit.
        after: std::time::Duration,
    },
    /// A leader could not reach a quorum to confirm its leadership (read index).
    #[error(transparent)]
    QuorumNotEnough(Box<openraft::error::QuorumNotEnough<crate::NodeId>>),
    /// A membership change was refused (another one in progress, an unknown learner, an empty membership).
    #[error(transparent)]
    Membership(Box<openraft::error::ChangeMembershipError<crate::NodeId>>),
    /// `initialize` refused: the node already has a log, or is not among the members given.
    #[error(transparent)]
    Initialize(Box<openraft::error::InitializeError<crate::NodeId, openraft::BasicNode>>),
    /// openraft stopped: shut down, or a storage error (which stops the node on purpose).
    #[error("raft stopped: {0}")]
    Stopped(Box<openraft::error::Fatal<crate::NodeId>>),
}

impl From<openraft::error::Fatal<crate::NodeId>> for Error {
    fn from(f: openraft::error::Fatal<crate::NodeId>) -> Error {
        Error::Stopped(Box::new(f))
    }
}

fn leader_text(id: &Option<crate::NodeId>, addr: &Option<String>) -> String {
    match (id, addr) {
        (Some(id), Some(addr)) => format!("node {id} at {addr}"),
        (Some(id), None) => format!("node {id}"),
        _ => "unknown (an election is under way)".to_string(),
    }
}

impl Error {
    /// True for corruption found by this crate or by the engine.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::Engine(e) => e.is_corruption(),
            _ => false,
        }
    }

    /// True when the caller should send the request to another node: [`Error::NotLeader`].
    pub fn is_not_leader(&self) -> bool {
        matches!(self, Error::NotLeader { .. })
    }

    pub(crate) fn corruption(dir: &std::path::Path, what: impl Into<String>) -> Error {
        Error::Corruption { dir: dir.to_path_buf(), what: what.into() }
    }
}

/// Runs engine work (fsyncs, checkpoints) on tokio's blocking pool, never on a runtime worker.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(Error::Task(e.to_string())),
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
