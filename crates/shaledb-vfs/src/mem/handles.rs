//! The handles [`MemFs`](super::MemFs) gives out: writers, readers and locks. Each holds the state it refers to
//! and the epoch (process) it was opened in; a handle from before a simulated crash fails every call.

use super::{os_err, FsOp, State};
use crate::{Error, FileLock, RandomAccessFile, Result, SyncHandle, WritableFile};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(super) struct MemWritable {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) ino: u64,
    pub(super) epoch: u64,
    pub(super) path: PathBuf,
    pub(super) buf: Vec<u8>,
    pub(super) len: u64,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.state.lock().check_alive(self.epoch, "write", &self.path)?;
        self.buf.extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(self.epoch, "write", &self.path)?;
        st.flush_buffer(self.ino, &self.path, &mut self.buf)
    }

    fn sync(&mut self) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(self.epoch, "fdatasync", &self.path)?;
        st.flush_buffer(self.ino, &self.path, &mut self.buf)?;
        st.begin(FsOp::Sync, "fdatasync", &self.path)?;
        let inode =
            st.inodes.get_mut(&self.ino).ok_or_else(|| Error::io("fdatasync", &self.path, os_err(libc::EBADF)))?;
        inode.synced_len = inode.data.len();
        inode.durable_override = None;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn sync_handle(&self) -> Result<Box<dyn SyncHandle>> {
        let mut st = self.state.lock();
        st.check_alive(self.epoch, "open", &self.path)?;
        let inode = st.inodes.get_mut(&self.ino).ok_or_else(|| Error::io("open", &self.path, os_err(libc::EBADF)))?;
        // The handle keeps the inode alive, as an open descriptor does.
        inode.handles += 1;
        Ok(Box::new(MemSyncHandle {
            state: Arc::clone(&self.state),
            ino: self.ino,
            epoch: self.epoch,
            path: self.path.clone(),
        }))
    }
}

/// A [`MemWritable`]'s [`SyncHandle`]: what its `sync` does after the flush. The sync is instantaneous under
/// the file system's lock, so it makes durable exactly the bytes flushed before it began; it is counted and
/// failed by fault plans as an [`FsOp::Sync`], and recorded by [`MemFs::record_before`](super::MemFs::record_before)
/// like one.
pub(super) struct MemSyncHandle {
    state: Arc<Mutex<State>>,
    ino: u64,
    epoch: u64,
    path: PathBuf,
}

impl SyncHandle for MemSyncHandle {
    fn sync(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(self.epoch, "fdatasync", &self.path)?;
        st.begin(FsOp::Sync, "fdatasync", &self.path)?;
        let inode =
            st.inodes.get_mut(&self.ino).ok_or_else(|| Error::io("fdatasync", &self.path, os_err(libc::EBADF)))?;
        inode.synced_len = inode.data.len();
        inode.durable_override = None;
        Ok(())
    }
}

impl Drop for MemSyncHandle {
    fn drop(&mut self) {
        self.state.lock().release_handle(self.epoch, self.ino);
    }
}

impl Drop for MemWritable {
    fn drop(&mut self) {
        // Like the POSIX writer, dropping does not flush: unflushed appends are lost.
        self.state.lock().release_handle(self.epoch, self.ino);
    }
}

pub(super) struct MemRandom {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) ino: u64,
    pub(super) epoch: u64,
    pub(super) path: PathBuf,
    pub(super) len: u64,
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(self.epoch, "read", &self.path)?;
        st.begin(FsOp::Read, "read", &self.path)?;
        let data = st.inodes.get(&self.ino).map(|i| i.data.as_slice()).unwrap_or_default();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?))
            .and_then(|range| data.get(range))
            .ok_or_else(|| {
                Error::io(
                    "read",
                    &self.path,
                    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "failed to fill whole buffer"),
                )
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MemRandom {
    fn drop(&mut self) {
        self.state.lock().release_handle(self.epoch, self.ino);
    }
}

pub(super) struct MemLock {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) key: PathBuf,
    pub(super) epoch: u64,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        // A lock from before a crash must not release the one the reopened database took since.
        if st.epoch == self.epoch {
            st.locks.remove(&self.key);
        }
    }
}
