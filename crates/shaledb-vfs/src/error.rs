//! The one error type of ShaleDB. Every crate of the workspace returns it, the engine re-exports it.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Result alias used across ShaleDB.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ShaleDB.
///
/// `Display` is for humans and complete: it includes the cause (the operating system's message, the failure
/// that made the database read-only), so `{e}` alone says everything. For that reason no variant returns its
/// cause from [`std::error::Error::source`] too: a reporter that walks the chain (anyhow's `{e:#}`) would print
/// the cause twice (the issue-10 CLI message `...: Not a directory (os error 20): Not a directory (os error
/// 20)`). The cause stays reachable as a field (`Error::Io { source, .. }`). Match on the variants (or use the
/// `is_*` helpers) in code.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    Io {
        /// What we were doing (`"open"`, `"write"`, `"fsync"`, `"rename"`, ...).
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The operating system's error.
        source: Arc<std::io::Error>,
    },
    /// Stored data failed a checksum or format check. Never returned as a value.
    Corruption {
        /// The file holding the bad bytes (may be empty for in-memory data such as a write batch).
        file: PathBuf,
        /// Byte offset in `file` where the problem was found.
        offset: u64,
        /// What was wrong.
        what: String,
    },
    /// The caller passed something invalid (an option out of range, a malformed argument).
    InvalidArgument(String),
    /// A resource is held by someone else (the LOCK file of a database already open).
    Busy(String),
    /// The database refuses writes: a write, fsync or background job failed earlier. Sticky until reopen.
    ReadOnly {
        /// The failure that made the database read-only.
        cause: Arc<Error>,
    },
    /// The request is valid but this build or configuration does not support it.
    NotSupported(String),
    /// The database was closed (or is closing) and accepts no more work.
    Closed,
    /// A wait passed its limit (a transaction's lock wait: RocksDB's `Status::TimedOut`).
    TimedOut(String),
    /// A read with `ReadTier::BlockCacheOnly` needed file I/O (a block not in the block cache, a table not
    /// open, a blob) and stopped before doing any (RocksDB's `Status::Incomplete`). Not a failure: the same
    /// read with the default tier answers. The text says what was missing.
    Incomplete(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => write!(f, "I/O error during {op} on {}: {source}", path.display()),
            Error::Corruption { file, offset, what } => {
                write!(f, "corruption in {} at offset {offset}: {what}", file.display())
            }
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Busy(m) => write!(f, "busy: {m}"),
            Error::ReadOnly { cause } => write!(f, "database is read-only after an earlier failure: {cause}"),
            Error::NotSupported(m) => write!(f, "not supported: {m}"),
            Error::Closed => f.write_str("database is closed"),
            Error::TimedOut(m) => write!(f, "timed out: {m}"),
            Error::Incomplete(m) => write!(f, "incomplete: {m}"),
        }
    }
}

/// `source()` is `None` for every variant: `Display` already includes the cause (see [`Error`]).
impl std::error::Error for Error {}

impl Error {
    /// Builds an [`Error::Io`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { op, path: path.into(), source: Arc::new(source) }
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Error {
        Error::Corruption { file: file.into(), offset, what: what.into() }
    }

    /// True for [`Error::Corruption`], also when it is the cause of a [`Error::ReadOnly`].
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::ReadOnly { cause } => cause.is_corruption(),
            _ => false,
        }
    }

    /// True for [`Error::Io`], also when it is the cause of a [`Error::ReadOnly`].
    pub fn is_io(&self) -> bool {
        match self {
            Error::Io { .. } => true,
            Error::ReadOnly { cause } => cause.is_io(),
            _ => false,
        }
    }

    /// True when the I/O error is "no space left on device".
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            Error::ReadOnly { cause } => cause.is_no_space(),
            _ => false,
        }
    }

    /// True for [`Error::InvalidArgument`].
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, Error::InvalidArgument(_))
    }

    /// True for [`Error::Busy`].
    pub fn is_busy(&self) -> bool {
        matches!(self, Error::Busy(_))
    }

    /// True for [`Error::ReadOnly`].
    pub fn is_read_only(&self) -> bool {
        matches!(self, Error::ReadOnly { .. })
    }

    /// True for [`Error::Incomplete`]: a block-cache-only read that needed I/O (retry it with the default
    /// tier).
    pub fn is_incomplete(&self) -> bool {
        matches!(self, Error::Incomplete(_))
    }

    /// Re-targets a corruption error at `file`, shifting its offset by `base` (used when a decoder works on a
    /// slice of a file and the caller knows where that slice lives). Other errors pass through.
    pub fn in_file(self, file: impl Into<PathBuf>, base: u64) -> Error {
        match self {
            Error::Corruption { offset, what, .. } => {
                // Both parts can come from a damaged file: saturate rather than wrap.
                Error::Corruption { file: file.into(), offset: base.saturating_add(offset), what }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 10: `Display` holds the OS message and `source()` does not return it again, so a reporter that
    /// prints the chain (`{e:#}`) names the cause once.
    #[test]
    fn display_includes_the_cause_and_the_chain_does_not_repeat_it() {
        let os = std::io::Error::from_raw_os_error(libc::ENOTDIR);
        let os_text = os.to_string();
        let e = Error::io("open lock", "/a/LOCK", os);
        let text = e.to_string();
        assert!(text.contains(&os_text), "{text}");
        assert!(std::error::Error::source(&e).is_none());
        let ro = Error::ReadOnly { cause: Arc::new(e) };
        assert_eq!(ro.to_string().matches(&os_text).count(), 1, "{ro}");
        assert!(std::error::Error::source(&ro).is_none());
    }
}
