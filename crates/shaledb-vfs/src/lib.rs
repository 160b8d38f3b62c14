//! ShaleDB's file-system layer.
//!
//! All file I/O of the engine goes through the [`Fs`] trait so that tests can substitute an in-memory file
//! system that drops unsynced data or injects errors. The contract each implementation keeps:
//!
//! - [`WritableFile::append`] may buffer; [`WritableFile::flush`] hands every appended byte to the operating
//!   system (after it, a process kill loses nothing); [`WritableFile::sync`] makes them durable (after it, a
//!   power loss loses nothing of this file's *contents*); a [`SyncHandle`] from [`WritableFile::sync_handle`]
//!   does the same for the flushed bytes without the writer.
//! - A newly created, renamed or removed directory entry is durable only after [`Fs::sync_dir`] on its parent.
//! - Errors carry the operation and the path ([`Error::Io`]).

#![deny(missing_docs)]

mod aligned;
mod error;
mod mem;
mod posix;

pub use aligned::{AlignedBuf, DIRECT_IO_ALIGN};
pub use error::{Error, Result};
pub use mem::*;
pub use posix::PosixFs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file open for appending (WAL, MANIFEST, SST being built).
pub trait WritableFile: Send + Sync {
    /// Appends `data`. May be buffered in user space until [`WritableFile::flush`].
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands every appended byte to the operating system (`write(2)`).
    fn flush(&mut self) -> Result<()>;
    /// Flushes, then makes the contents durable (`fdatasync(2)`).
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far (buffered or not).
    fn len(&self) -> u64;
    /// True when nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The path this file was created at.
    fn path(&self) -> &Path;
    /// A handle that makes this file's contents durable without the writer, so that one thread can
    /// `fdatasync` the file while another goes on appending (or holds the lock that guards the writer). The
    /// handle covers the bytes handed to the operating system before its [`SyncHandle::sync`] began, not those
    /// still in the writer's buffer: [`WritableFile::flush`] first. It refers to this file, whatever happens to
    /// the writer or the file's name meanwhile. Default: [`Error::NotSupported`]; a caller then syncs through
    /// the writer.
    fn sync_handle(&self) -> Result<Box<dyn SyncHandle>> {
        Err(Error::NotSupported(format!("syncing {} without its writer", self.path().display())))
    }
}

/// Makes a file's flushed contents durable on behalf of its writer ([`WritableFile::sync_handle`]).
pub trait SyncHandle: Send + Sync {
    /// Makes durable every byte of the file flushed to the operating system before this call began
    /// (`fdatasync(2)`), as [`WritableFile::sync`] does for its own; a failure is reported the same way and
    /// means those bytes may be lost.
    fn sync(&self) -> Result<()>;
}

/// A file open for positional reads (SSTs, and whole-file reads of logs).
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`; a short file is an `UnexpectedEof` I/O error.
    ///
    /// A file opened with [`ReadHints::direct`] accepts any `buf`, `offset` and length: the implementation
    /// reads the aligned range around them into its own aligned scratch buffer and copies the bytes out.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Reads exactly `len` bytes at `offset` into `buf` (reusing its allocation); afterwards
    /// [`AlignedBuf::data`] holds them. A direct file reads the aligned range around them straight into `buf`
    /// (no copy). A short file is an `UnexpectedEof` I/O error. Default: [`RandomAccessFile::read_exact_at`]
    /// into `buf`.
    fn read_into(&self, offset: u64, len: usize, buf: &mut AlignedBuf) -> Result<()> {
        self.read_exact_at(buf.fill(len), offset)
    }
    /// Size of the file when it was opened.
    fn len(&self) -> u64;
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The path this file was opened at.
    fn path(&self) -> &Path;
    /// Hint that `[offset, offset+len)` will be read soon (`posix_fadvise(WILLNEED)`); default: nothing.
    fn prefetch(&self, _offset: u64, _len: u64) {}
    /// Reads exactly `buf.len()` bytes at `offset` only if that needs no wait on the device: `Ok(true)` when
    /// `buf` was filled (the bytes were in the operating system's page cache), `Ok(false)` when the read would
    /// have to wait (or the file cannot tell), in which case `buf` holds nothing meaningful and the caller
    /// reads with [`RandomAccessFile::read_exact_at`]. Lets a caller with many reads to issue serve the cached
    /// ones at once and hand only the others to reader threads. Default: `Ok(false)`.
    fn try_read_cached(&self, _buf: &mut [u8], _offset: u64) -> Result<bool> {
        Ok(false)
    }
}

/// A held advisory lock on a database's LOCK file; released on drop.
pub trait FileLock: Send + Sync {}

/// How a file is to be opened for reading. The default asks for nothing: buffered reads, the kernel's
/// default readahead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadHints {
    /// Bypass the OS page cache (`O_DIRECT`). [`PosixFs`] opens the file with `O_DIRECT` and fails the open
    /// with [`Error::NotSupported`] when the file system refuses it (`EINVAL`); reads of any size and offset
    /// still work (see [`RandomAccessFile::read_exact_at`]). The in-memory [`MemFs`] has no page cache: there
    /// the hint changes nothing.
    pub direct: bool,
    /// The file will be read front to back (compaction input): `posix_fadvise(SEQUENTIAL)`, the kernel's
    /// larger readahead. Ignored with `direct`.
    pub sequential: bool,
    /// The file will be read at random (tables for point lookups): `posix_fadvise(RANDOM)`, which turns the
    /// kernel's readahead off (RocksDB's `advise_random_on_open`). Ignored with `direct` (no page cache, no
    /// kernel readahead) and with `sequential`.
    pub advise_random: bool,
}

/// How a file is to be created for writing. The default asks for nothing: buffered writes through the page
/// cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteHints {
    /// Bypass the OS page cache (`O_DIRECT`), for files written once front to back (tables written by flush
    /// and compaction). [`PosixFs`] opens the file with `O_DIRECT`, gathers appends in an aligned buffer and
    /// writes it in large aligned writes; a partial last block is written padded with zeros and the file is
    /// truncated to the bytes appended before [`WritableFile::sync`]'s `fdatasync` (and on drop), so readers
    /// see exactly what was appended. A file system that refuses `O_DIRECT` (`EINVAL`) fails the create with
    /// [`Error::NotSupported`]. The in-memory [`MemFs`] has no page cache: there the hint changes nothing.
    pub direct: bool,
}

/// The file system the engine runs on.
pub trait Fs: Send + Sync + std::fmt::Debug {
    /// Creates (or truncates) `path` for writing.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates (or truncates) `path` for writing as `hints` ask. Default: [`Fs::create`] (for file systems
    /// without a page cache, where the hints change nothing).
    fn create_with(&self, path: &Path, hints: WriteHints) -> Result<Box<dyn WritableFile>> {
        let _ = hints;
        self.create(path)
    }
    /// Opens the existing file `path` for writing at its end (`O_APPEND`): its contents stay, appends follow
    /// them, and [`WritableFile::len`] starts at the file's size. A missing file is an error (`ENOENT`), never
    /// created. Used for files a later process continues (the `LOG`) and to fsync a file another process wrote
    /// (a WAL kept live across an open). Default: [`Error::NotSupported`], for file systems that cannot.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Err(Error::NotSupported(format!("appending to an existing file on this file system ({})", path.display())))
    }
    /// Opens an existing file for positional reads.
    fn open(&self, path: &Path, hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file into memory.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let f = self.open(path, ReadHints { sequential: true, ..ReadHints::default() })?;
        let mut buf = vec![0u8; usize::try_from(f.len()).map_err(|_| Error::NotSupported("file too large".into()))?];
        f.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }
    /// Atomically renames `from` to `to`, replacing `to`. `from` may also be a directory (`to` must then not
    /// exist): checkpoints are written into a staging directory renamed into place at the end.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Makes `to` a second name of the file `from` (`link(2)`), durable once [`Fs::sync_dir`] runs on `to`'s
    /// parent. Fails when `to` exists, and across file systems (`EXDEV`); callers that only need the
    /// contents (checkpoints) then copy. Default: [`Error::NotSupported`], for file systems without links.
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        let _ = to;
        Err(Error::NotSupported(format!("hard links on this file system (linking {})", from.display())))
    }
    /// Removes the empty directory `dir`; a directory that still holds entries is an error (`ENOTEMPTY`).
    /// Default: [`Error::NotSupported`].
    fn remove_dir(&self, dir: &Path) -> Result<()> {
        Err(Error::NotSupported(format!("removing directories on this file system ({})", dir.display())))
    }
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Names (not paths) of the entries of directory `dir`.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Creates `dir` and its parents when missing.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Makes the entries of `dir` (creates, renames, removes) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// True when `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Size of the file at `path`.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Takes an exclusive lock on `path` (created when missing). Fails with [`Error::Busy`] when another
    /// holder, in this process or another, has it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
}

/// The default file system: the operating system's.
pub fn default_fs() -> Arc<dyn Fs> {
    Arc::new(PosixFs::new())
}

/// Joins a database directory and a file name.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// CPU time the calling thread has used so far, microseconds (`CLOCK_THREAD_CPUTIME_ID`); 0 where the clock
/// cannot be read. A job's CPU time is the difference of two readings on its thread.
#[allow(unsafe_code)]
pub fn thread_cpu_micros() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000).saturating_add(ts.tv_nsec as u64 / 1_000)
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_cpu_time_grows_with_work_on_this_thread() {
        let before = super::thread_cpu_micros();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let used = super::thread_cpu_micros() - before;
        assert!(used > 0, "20 ms of spinning used no CPU time");
        // A sleep uses (almost) none.
        let before = super::thread_cpu_micros();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(super::thread_cpu_micros() - before < 40_000);
    }
}
