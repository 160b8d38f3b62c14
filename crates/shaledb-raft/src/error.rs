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
}

impl Error {
    /// True for corruption found by this crate or by the engine.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::Engine(e) => e.is_corruption(),
            Error::InvalidArgument(_) | Error::Task(_) => false,
        }
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
