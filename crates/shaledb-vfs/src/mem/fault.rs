//! Fault injection for [`MemFs`]: the classes of operation ([`FsOp`]), the error a fault returns
//! ([`FaultError`]) and which operation fails ([`FaultPlan`]).

#[cfg(doc)]
use super::MemFs;
#[cfg(doc)]
use crate::{Error, Fs, RandomAccessFile, WritableFile};

/// Classes of file-system operations, for [`MemFs::op_count`] and [`FaultPlan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FsOp {
    /// [`RandomAccessFile::read_exact_at`].
    Read,
    /// A flush of a writer's buffer to the OS (from [`WritableFile::flush`] or [`WritableFile::sync`]); counted
    /// only when the buffer holds bytes, as only then a `write(2)` happens.
    Write,
    /// [`WritableFile::sync`] (the `fdatasync(2)` part).
    Sync,
    /// [`Fs::create`], and [`Fs::hard_link`] (a new directory entry).
    Create,
    /// [`Fs::rename`].
    Rename,
    /// [`Fs::remove`] and [`Fs::remove_dir`].
    Remove,
    /// [`Fs::sync_dir`].
    SyncDir,
    /// [`Fs::open`] and [`Fs::open_append`].
    Open,
}

impl FsOp {
    /// Every class, in declaration order.
    pub const ALL: [FsOp; 8] =
        [FsOp::Read, FsOp::Write, FsOp::Sync, FsOp::Create, FsOp::Rename, FsOp::Remove, FsOp::SyncDir, FsOp::Open];

    /// True for the classes that change what a crash leaves behind: write, sync, create, rename, remove and
    /// directory sync.
    pub fn is_mutation(self) -> bool {
        !matches!(self, FsOp::Read | FsOp::Open)
    }

    pub(super) fn index(self) -> usize {
        match self {
            FsOp::Read => 0,
            FsOp::Write => 1,
            FsOp::Sync => 2,
            FsOp::Create => 3,
            FsOp::Rename => 4,
            FsOp::Remove => 5,
            FsOp::SyncDir => 6,
            FsOp::Open => 7,
        }
    }
}

/// The operating-system error an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// `EIO`: a generic I/O error.
    Eio,
    /// `ENOSPC`: no space left on device ([`Error::is_no_space`] is true).
    Enospc,
}

impl FaultError {
    pub(super) fn to_io(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(match self {
            FaultError::Eio => libc::EIO,
            FaultError::Enospc => libc::ENOSPC,
        })
    }
}

/// Which operation to fail, for [`MemFs::set_faults`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    /// The class of operation that fails.
    pub op: FsOp,
    /// Which one fails: 1-based, counted from the moment the plan is set (0 is treated as 1).
    pub nth: u64,
    /// When true, every later operation of the class fails too (a full disk, a dead device).
    pub persistent: bool,
    /// The error returned.
    pub error: FaultError,
    /// When set, only operations on paths containing this text count and fail (e.g. `"MANIFEST-"`).
    pub path_contains: Option<&'static str>,
}

impl FaultPlan {
    /// Fails only the `nth` operation of class `op`.
    pub fn once(op: FsOp, nth: u64, error: FaultError) -> FaultPlan {
        FaultPlan { op, nth, persistent: false, error, path_contains: None }
    }

    /// Fails the `nth` operation of class `op` and every later one.
    pub fn from_nth(op: FsOp, nth: u64, error: FaultError) -> FaultPlan {
        FaultPlan { op, nth, persistent: true, error, path_contains: None }
    }

    /// Restricts the plan to operations on paths containing `text` (`"MANIFEST-"`, `".log"`, `".sst"`).
    pub fn on_paths_containing(self, text: &'static str) -> FaultPlan {
        FaultPlan { path_contains: Some(text), ..self }
    }
}

#[derive(Clone, Debug)]
pub(super) struct ActiveFault {
    pub(super) plan: FaultPlan,
    pub(super) seen: u64,
}
