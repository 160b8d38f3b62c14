//! The POSIX file system: `std::fs` with positional I/O, user-space write buffering and fcntl-free locking
//! through `File::try_lock`.

use crate::{
    AlignedBuf, Error, FileLock, Fs, RandomAccessFile, ReadHints, Result, SyncHandle, WritableFile, WriteHints,
    DIRECT_IO_ALIGN,
};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Appends larger than this go straight to `write(2)`; smaller ones are gathered first.
const WRITE_BUFFER: usize = 1 << 20;

/// The operating system's file system.
#[derive(Debug, Default, Clone)]
pub struct PosixFs {
    _private: (),
}

impl PosixFs {
    /// A handle to the OS file system.
    pub fn new() -> PosixFs {
        PosixFs { _private: () }
    }
}

struct PosixWritable {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    len: u64,
}

impl WritableFile for PosixWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.flush()?;
            if data.len() >= WRITE_BUFFER {
                return self.file.write_all(data).map_err(|e| Error::io("write", &self.path, e));
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf).map_err(|e| Error::io("write", &self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file.sync_data().map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the file again (a new open file description), checking it is the same inode as the writer's.
    /// NB: not a `dup` (`File::try_clone`): Linux reports a write-back error once per open file description,
    /// so with a shared one the writer's `fdatasync` and the handle's racing each other would see it once
    /// between them, and the other would report success for lost bytes. Each description reports an error
    /// nobody has seen yet, and every error after its open.
    fn sync_handle(&self) -> Result<Box<dyn SyncHandle>> {
        use std::os::unix::fs::MetadataExt;
        let file = OpenOptions::new().write(true).open(&self.path).map_err(|e| Error::io("open", &self.path, e))?;
        let ours = self.file.metadata().map_err(|e| Error::io("stat", &self.path, e))?;
        let found = file.metadata().map_err(|e| Error::io("stat", &self.path, e))?;
        if (ours.dev(), ours.ino()) != (found.dev(), found.ino()) {
            return Err(Error::NotSupported(format!(
                "syncing {} without its writer: the name now refers to another file",
                self.path.display()
            )));
        }
        Ok(Box::new(PosixSyncHandle { file, path: self.path.clone() }))
    }
}

/// [`WritableFile::sync_handle`] of a [`PosixWritable`]: its own descriptor of the file.
struct PosixSyncHandle {
    file: File,
    path: PathBuf,
}

impl SyncHandle for PosixSyncHandle {
    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| Error::io("fdatasync", &self.path, e))
    }
}

/// A file written with `O_DIRECT` ([`WriteHints::direct`]): appends gather in an aligned buffer of
/// [`DIRECT_WRITE_BUFFER`] bytes, written whole at aligned offsets. The buffer holds the file's bytes from
/// `written` (a multiple of [`DIRECT_IO_ALIGN`]) on; a flush writes it rounded up to the alignment with zero
/// padding and keeps the partial last block in the buffer, to be written again (completed) by the next
/// write. While padding is on disk the file is longer than `len`: `sync` (and drop) truncate it first.
struct PosixDirectWritable {
    file: File,
    path: PathBuf,
    /// Aligned storage; `mem.prepare(DIRECT_WRITE_BUFFER, 0, 0)` gives its bytes (never reallocates once
    /// grown to that size, so the contents persist between calls).
    mem: AlignedBuf,
    /// Bytes of the buffer holding appended data.
    buffered: usize,
    /// File offset of the buffer's first byte; always aligned.
    written: u64,
    /// Bytes appended so far.
    len: u64,
    /// The file on disk is longer than `len` (a padded block was written and not yet truncated).
    padded: bool,
}

/// Size of the aligned buffer of a direct writer, and so of its writes (RocksDB writes 1 MiB at a time for
/// flush and compaction with direct I/O).
const DIRECT_WRITE_BUFFER: usize = 1 << 20;

impl PosixDirectWritable {
    fn storage(&mut self) -> &mut [u8] {
        self.mem.prepare(DIRECT_WRITE_BUFFER, 0, 0)
    }

    /// Writes the buffer up to `end` (a multiple of the alignment, at most the buffer size) at `written`.
    fn write_out(&mut self, end: usize) -> Result<()> {
        let at = self.written;
        let (file, path) = (&self.file, &self.path);
        let data = &self.mem.prepare(DIRECT_WRITE_BUFFER, 0, 0)[..end];
        file.write_all_at(data, at).map_err(|e| Error::io("direct write", path, e))
    }
}

// `sync_handle` keeps its default (not supported): the file may hold zero padding past `len` that only the
// writer's `sync` truncates away, and a sync without the writer would make the padding durable.
impl WritableFile for PosixDirectWritable {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let at = self.buffered;
            let n = data.len().min(DIRECT_WRITE_BUFFER - at);
            self.storage()[at..at + n].copy_from_slice(&data[..n]);
            self.buffered += n;
            self.len += n as u64;
            data = &data[n..];
            if self.buffered == DIRECT_WRITE_BUFFER {
                self.write_out(DIRECT_WRITE_BUFFER)?;
                self.written += DIRECT_WRITE_BUFFER as u64;
                self.buffered = 0;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buffered == 0 {
            return Ok(());
        }
        let whole = self.buffered - self.buffered % DIRECT_IO_ALIGN;
        let end = self.buffered.next_multiple_of(DIRECT_IO_ALIGN);
        let buffered = self.buffered;
        self.storage()[buffered..end].fill(0);
        self.write_out(end)?;
        if end > buffered {
            self.padded = true;
        }
        // The whole blocks are done; the partial last one moves to the front, to be completed and written
        // again at its (aligned) offset.
        self.storage().copy_within(whole..buffered, 0);
        self.written += whole as u64;
        self.buffered -= whole;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        if self.padded {
            self.file.set_len(self.len).map_err(|e| Error::io("ftruncate", &self.path, e))?;
            self.padded = false;
        }
        self.file.sync_data().map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PosixDirectWritable {
    fn drop(&mut self) {
        // Best effort, as closing is: a file dropped after a flush without a sync loses its padding.
        if self.padded {
            let _ = self.file.set_len(self.len);
        }
    }
}

struct PosixRandom {
    file: File,
    path: PathBuf,
    len: u64,
    /// Opened with `O_DIRECT`: every read must be aligned (see [`PosixRandom::read_direct`]).
    direct: bool,
    /// The file offset and length alignment of its direct reads: the file system's own (`statx`'s
    /// `STATX_DIOALIGN`, Linux 6.1 on: the device's logical block, 512 bytes on most disks) when it says so,
    /// else [`DIRECT_IO_ALIGN`]. Reading a small block rounded out to 4 KiB pages instead of 512-byte sectors
    /// read 1.6x the bytes per point read (RocksDB aligns to the logical block size too).
    align: u64,
}

/// The file offset alignment `file`'s file system requires of direct reads, when it reports one that
/// divides [`DIRECT_IO_ALIGN`] (the alignment of [`AlignedBuf`]'s memory, which then also satisfies the
/// memory alignment it asks for); `None` where `statx` or `STATX_DIOALIGN` is not supported, or direct
/// I/O is not (alignment 0).
fn dio_offset_align(file: &File) -> Option<u64> {
    use rustix::fs::{statx, AtFlags, StatxFlags};
    let st = statx(file, "", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN).ok()?;
    if st.stx_mask & StatxFlags::DIOALIGN.bits() == 0 {
        return None;
    }
    let (offset, mem) = (u64::from(st.stx_dio_offset_align), u64::from(st.stx_dio_mem_align));
    let fits = |a: u64| a.is_power_of_two() && a <= DIRECT_IO_ALIGN as u64;
    (fits(offset) && fits(mem)).then_some(offset)
}

/// Direct reads up to this size through `read_exact_at` use the thread's scratch buffer; larger ones (rare:
/// an index block of a huge table) a buffer of their own, so that no thread keeps a huge one.
const DIRECT_SCRATCH_MAX: usize = 1 << 20;

thread_local! {
    /// Aligned landing buffer for direct reads into unaligned caller buffers.
    static DIRECT_SCRATCH: RefCell<AlignedBuf> = RefCell::new(AlignedBuf::new());
}

impl PosixRandom {
    /// Reads `[offset, offset + len)` of a direct file: the enclosing range rounded out to the file's
    /// alignment (`self.align`) lands in `buf`'s aligned storage, and `buf.data()` is set to the asked bytes.
    fn read_direct(&self, offset: u64, len: usize, buf: &mut AlignedBuf) -> Result<()> {
        let align = self.align;
        let eof = || {
            Error::io(
                "direct read",
                &self.path,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "failed to fill whole buffer"),
            )
        };
        let end = offset.checked_add(len as u64).ok_or_else(eof)?;
        let first = offset - offset % align;
        let last = end.div_ceil(align).checked_mul(align).ok_or_else(eof)?;
        let total = usize::try_from(last - first).map_err(|_| eof())?;
        let skip = (offset - first) as usize;
        let dst = buf.prepare(total, skip, len);
        // The rounded range may run past the end of the file: the read then returns what there is.
        let mut got = 0;
        while got < skip + len {
            match self.file.read_at(&mut dst[got..], first + got as u64) {
                Ok(0) => return Err(eof()),
                Ok(n) => {
                    got += n;
                    // Short and unaligned: the file ended (another read would be unaligned, EINVAL).
                    if !(n as u64).is_multiple_of(align) && got < skip + len {
                        return Err(eof());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("direct read", &self.path, e)),
            }
        }
        Ok(())
    }
}

impl RandomAccessFile for PosixRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if !self.direct {
            return self.file.read_exact_at(buf, offset).map_err(|e| Error::io("read", &self.path, e));
        }
        if buf.len() > DIRECT_SCRATCH_MAX {
            let mut own = AlignedBuf::new();
            self.read_direct(offset, buf.len(), &mut own)?;
            buf.copy_from_slice(own.data());
            return Ok(());
        }
        DIRECT_SCRATCH.with_borrow_mut(|scratch| {
            self.read_direct(offset, buf.len(), scratch)?;
            buf.copy_from_slice(scratch.data());
            Ok(())
        })
    }

    fn read_into(&self, offset: u64, len: usize, buf: &mut AlignedBuf) -> Result<()> {
        if self.direct {
            self.read_direct(offset, len, buf)
        } else {
            self.file.read_exact_at(buf.fill(len), offset).map_err(|e| Error::io("read", &self.path, e))
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn prefetch(&self, offset: u64, len: u64) {
        if !self.direct {
            fadvise(&self.file, offset, len, rustix::fs::Advice::WillNeed);
        }
    }

    /// `preadv2(RWF_NOWAIT)`: the kernel copies what its page cache holds and answers `EAGAIN` instead of
    /// going to the device. A direct file always goes to the device, so it is never tried there.
    fn try_read_cached(&self, buf: &mut [u8], offset: u64) -> Result<bool> {
        if self.direct || NOWAIT_UNSUPPORTED.load(Ordering::Relaxed) {
            return Ok(false);
        }
        // An offset past what `off_t` holds: the blocking read reports it.
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > i64::MAX as u64) {
            return Ok(false);
        }
        let mut got = 0;
        while got < buf.len() {
            let at = offset + got as u64;
            let mut slices = [std::io::IoSliceMut::new(&mut buf[got..])];
            match rustix::io::preadv2(&self.file, &mut slices, at, rustix::io::ReadWriteFlags::NOWAIT) {
                // End of file, or a page not cached: the blocking read says which (and reports a short file).
                Ok(0) => return Ok(false),
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => return Ok(false),
                // A kernel or file system without RWF_NOWAIT: stop asking (every later read would fail alike).
                Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => {
                    NOWAIT_UNSUPPORTED.store(true, Ordering::Relaxed);
                    return Ok(false);
                }
                Err(e) => return Err(Error::io("read (RWF_NOWAIT)", &self.path, std::io::Error::from(e))),
            }
        }
        Ok(true)
    }
}

/// Set once `preadv2(RWF_NOWAIT)` was refused as unsupported: [`RandomAccessFile::try_read_cached`] then
/// answers `Ok(false)` without a system call.
static NOWAIT_UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// `posix_fadvise` on the whole file from `offset` (`len` 0: to the end). A hint: its failure is ignored.
fn fadvise(file: &File, offset: u64, len: u64, advice: rustix::fs::Advice) {
    let _ = rustix::fs::fadvise(file, offset, std::num::NonZeroU64::new(len), advice);
}

/// Opens `path` for reading with `O_DIRECT`. A file system that refuses it (`EINVAL`: tmpfs before Linux 6.6,
/// some FUSE and network file systems) is [`Error::NotSupported`], as RocksDB refuses to open there.
fn open_direct(path: &Path) -> Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::EINVAL) {
            Error::NotSupported(format!(
                "direct reads: the file system of {} refuses O_DIRECT ({e}); open with use_direct_reads = false",
                path.display()
            ))
        } else {
            Error::io("open (O_DIRECT)", path, e)
        }
    })
}

/// Creates `path` for writing with `O_DIRECT`; a file system that refuses it is [`Error::NotSupported`].
fn create_direct(path: &Path) -> Result<File> {
    OpenOptions::new().write(true).create(true).truncate(true).custom_flags(libc::O_DIRECT).open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::EINVAL) {
            Error::NotSupported(format!(
                "direct writes: the file system of {} refuses O_DIRECT ({e}); open with \
                 use_direct_io_for_flush_and_compaction = false",
                path.display()
            ))
        } else {
            Error::io("create (O_DIRECT)", path, e)
        }
    })
}

/// Paths locked by this process: `flock` locks are per open file description, so two opens in one process
/// would both succeed without this set.
fn locked_paths() -> &'static Mutex<HashSet<PathBuf>> {
    static LOCKED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    LOCKED.get_or_init(|| Mutex::new(HashSet::new()))
}

struct PosixLock {
    _file: File,
    path: PathBuf,
}

impl FileLock for PosixLock {}

impl Drop for PosixLock {
    fn drop(&mut self) {
        locked_paths().lock().remove(&self.path);
        // The OS lock goes with the file descriptor.
    }
}

impl Fs for PosixFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(PosixWritable { file, path: path.to_path_buf(), buf: Vec::with_capacity(64 << 10), len: 0 }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().append(true).open(path).map_err(|e| Error::io("open for append", path, e))?;
        let len = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        Ok(Box::new(PosixWritable { file, path: path.to_path_buf(), buf: Vec::with_capacity(64 << 10), len }))
    }

    fn create_with(&self, path: &Path, hints: WriteHints) -> Result<Box<dyn WritableFile>> {
        if !hints.direct {
            return self.create(path);
        }
        let file = create_direct(path)?;
        Ok(Box::new(PosixDirectWritable {
            file,
            path: path.to_path_buf(),
            mem: AlignedBuf::new(),
            buffered: 0,
            written: 0,
            len: 0,
            padded: false,
        }))
    }

    fn open(&self, path: &Path, hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>> {
        let file =
            if hints.direct { open_direct(path)? } else { File::open(path).map_err(|e| Error::io("open", path, e))? };
        let len = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        // Without O_DIRECT the kernel reads ahead by default; the hints tune or disable that.
        if !hints.direct {
            if hints.sequential {
                fadvise(&file, 0, 0, rustix::fs::Advice::Sequential);
            } else if hints.advise_random {
                fadvise(&file, 0, 0, rustix::fs::Advice::Random);
            }
        }
        let align = if hints.direct { dio_offset_align(&file).unwrap_or(DIRECT_IO_ALIGN as u64) } else { 1 };
        Ok(Arc::new(PosixRandom { file, path: path.to_path_buf(), len, direct: hints.direct, align }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::hard_link(from, to).map_err(|e| Error::io("link", from, e))
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        std::fs::remove_dir(dir).map_err(|e| Error::io("rmdir", dir, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io("readdir", dir, e))? {
            let entry = entry.map_err(|e| Error::io("readdir", dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                out.push(name.to_string());
            }
        }
        Ok(out)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("mkdir", dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let d = File::open(dir).map_err(|e| Error::io("open dir", dir, e))?;
        d.sync_all().map_err(|e| Error::io("fsync dir", dir, e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?.len())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let key = std::fs::canonicalize(path.parent().unwrap_or(Path::new(".")))
            .map(|p| p.join(path.file_name().unwrap_or_default()))
            .unwrap_or_else(|_| path.to_path_buf());
        {
            let mut held = locked_paths().lock();
            if !held.insert(key.clone()) {
                return Err(Error::Busy(format!("{} is already locked by this process", path.display())));
            }
        }
        let opened = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path);
        let file = match opened {
            Ok(f) => f,
            Err(e) => {
                locked_paths().lock().remove(&key);
                return Err(Error::io("open lock", path, e));
            }
        };
        match file.try_lock() {
            Ok(()) => Ok(Box::new(PosixLock { _file: file, path: key })),
            Err(e) => {
                locked_paths().lock().remove(&key);
                match e {
                    std::fs::TryLockError::WouldBlock => Err(Error::Busy(format!(
                        "{} is locked by another process (is the database open elsewhere?)",
                        path.display()
                    ))),
                    std::fs::TryLockError::Error(e) => Err(Error::io("lock", path, e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_rename_list() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let p = dir.path().join("a");
        let mut w = fs.create(&p).unwrap();
        w.append(b"hello ").unwrap();
        w.append(b"world").unwrap();
        assert_eq!(w.len(), 11);
        w.sync().unwrap();
        drop(w);
        assert_eq!(fs.read_all(&p).unwrap(), b"hello world");
        let q = dir.path().join("b");
        fs.rename(&p, &q).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        assert!(!fs.exists(&p));
        assert_eq!(fs.list(dir.path()).unwrap(), vec!["b".to_string()]);
        let r = fs.open(&q, ReadHints::default()).unwrap();
        let mut buf = [0u8; 5];
        r.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(&buf, b"world");
        assert!(r.read_exact_at(&mut buf, 9).is_err());
    }

    #[test]
    fn sync_handle_syncs_without_the_writer_and_only_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let p = dir.path().join("wal");
        let mut w = fs.create(&p).unwrap();
        w.append(b"abc").unwrap();
        w.flush().unwrap();
        let h = w.sync_handle().unwrap();
        // The handle syncs on another thread while the writer goes on appending.
        let syncer = std::thread::spawn(move || h.sync());
        w.append(b"def").unwrap();
        w.flush().unwrap();
        syncer.join().unwrap().unwrap();
        // It outlives the writer.
        let h = w.sync_handle().unwrap();
        drop(w);
        h.sync().unwrap();
        assert_eq!(fs.read_all(&p).unwrap(), b"abcdef");
        // A handle is never taken on another file that took the writer's name.
        let w = fs.create(&p).unwrap();
        fs.rename(&p, &dir.path().join("moved")).unwrap();
        let _other = fs.create(&p).unwrap();
        assert!(matches!(w.sync_handle(), Err(Error::NotSupported(_))));
        // Nor on a direct writer, whose padding only its own sync truncates.
        if let Ok(d) = fs.create_with(&dir.path().join("direct"), WriteHints { direct: true }) {
            assert!(matches!(d.sync_handle(), Err(Error::NotSupported(_))));
        }
    }

    #[test]
    fn second_lock_in_process_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let p = dir.path().join("LOCK");
        let l = fs.lock(&p).unwrap();
        assert!(fs.lock(&p).err().unwrap().is_busy());
        drop(l);
        fs.lock(&p).unwrap();
    }

    #[test]
    fn direct_reads_of_any_offset_and_length() {
        // The test's temporary directory: on a file system that refuses O_DIRECT the open must say so.
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut w = fs.create(&p).unwrap();
        w.append(&data).unwrap();
        w.sync().unwrap();
        drop(w);
        let r = match fs.open(&p, ReadHints { direct: true, ..ReadHints::default() }) {
            Ok(r) => r,
            Err(e) => {
                assert!(e.to_string().contains("refuses O_DIRECT"), "{e}");
                eprintln!("skipped: {e}");
                return;
            }
        };
        let mut own = AlignedBuf::new();
        // The file system's alignment (512 on most disks since Linux 6.1, else the 4 KiB fallback): reads
        // round out to it, so ranges across 512-byte sectors inside a page are covered as well.
        if let Some(a) = dio_offset_align(&std::fs::File::open(&p).unwrap()) {
            assert!(a.is_power_of_two() && a <= DIRECT_IO_ALIGN as u64, "{a}");
        }
        for (off, len) in [
            (0, 1),
            (1, 4095),
            (4095, 2),
            (4096, 4096),
            (5000, 15_000),
            (0, 20_000),
            (19_999, 1),
            (511, 2),
            (512, 512),
            (513, 600),
            (19_968, 32),
        ] {
            let mut buf = vec![0u8; len];
            r.read_exact_at(&mut buf, off as u64).unwrap();
            assert_eq!(buf, &data[off..off + len], "read_exact_at({off}, {len})");
            r.read_into(off as u64, len, &mut own).unwrap();
            assert_eq!(own.data(), &data[off..off + len], "read_into({off}, {len})");
        }
        let mut big = vec![0u8; 2];
        let e = r.read_exact_at(&mut big, 19_999).unwrap_err();
        assert!(e.is_io() && e.to_string().contains("direct read"), "{e}");
        assert!(r.read_into(20_000, 1, &mut own).is_err());
        assert!(r.read_into(u64::MAX - 1, 4, &mut own).is_err());
    }

    #[test]
    fn nowait_reads_serve_cached_pages_and_decline_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 13 % 251) as u8).collect();
        let mut w = fs.create(&p).unwrap();
        w.append(&data).unwrap();
        w.sync().unwrap();
        drop(w);
        let r = fs.open(&p, ReadHints::default()).unwrap();
        // Just written, so in the page cache: served without waiting, byte for byte.
        let mut buf = vec![0u8; 9_000];
        if r.try_read_cached(&mut buf, 1_234).unwrap() {
            assert_eq!(buf, &data[1_234..10_234]);
        } else {
            // Only a kernel or file system without RWF_NOWAIT may decline a cached page.
            assert!(NOWAIT_UNSUPPORTED.load(Ordering::Relaxed), "a cached range was declined");
            eprintln!("skipped: preadv2(RWF_NOWAIT) is not supported here");
            return;
        }
        // Past the end: declined (the blocking read reports the short file), never a partial success.
        let mut tail = vec![0u8; 100];
        assert!(!r.try_read_cached(&mut tail, 49_950).unwrap());
        assert!(!r.try_read_cached(&mut tail, 60_000).unwrap());
        assert!(r.read_exact_at(&mut tail, 49_950).is_err());
        assert!(!r.try_read_cached(&mut tail, u64::MAX - 10).unwrap());
        // A direct file always goes to the device: never tried.
        if let Ok(d) = fs.open(&p, ReadHints { direct: true, ..ReadHints::default() }) {
            assert!(!d.try_read_cached(&mut buf, 0).unwrap());
        }
    }

    /// Creates `name` in `dir` with direct writes, or `None` (printing why) where the file system refuses.
    fn create_direct_or_skip(fs: &PosixFs, p: &Path) -> Option<Box<dyn WritableFile>> {
        match fs.create_with(p, WriteHints { direct: true }) {
            Ok(w) => Some(w),
            Err(e) => {
                assert!(e.to_string().contains("refuses O_DIRECT"), "{e}");
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    #[test]
    fn direct_writes_leave_exactly_the_appended_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let data: Vec<u8> = (0..3_500_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        // Appends of every size class: tiny, unaligned, exactly the buffer, larger than the buffer.
        let sizes = [1usize, 4095, 4096, 17, DIRECT_WRITE_BUFFER, 100_000, DIRECT_WRITE_BUFFER + 5, 3];
        for (case, flush_every) in [(0, 0usize), (1, 1), (2, 3)] {
            let p = dir.path().join(format!("t{case}"));
            let Some(mut w) = create_direct_or_skip(&fs, &p) else { return };
            let mut at = 0;
            for (i, n) in sizes.iter().cycle().enumerate() {
                if at == data.len() {
                    break;
                }
                let n = (*n).min(data.len() - at);
                w.append(&data[at..at + n]).unwrap();
                at += n;
                assert_eq!(w.len(), at as u64);
                if flush_every > 0 && i % flush_every == 0 {
                    // A flush hands every byte to the OS: a reader sees them (the padded tail beyond is zeros).
                    w.flush().unwrap();
                    let on_disk = std::fs::read(&p).unwrap();
                    assert!(on_disk.len() >= at && on_disk.len().is_multiple_of(DIRECT_IO_ALIGN));
                    assert_eq!(&on_disk[..at], &data[..at]);
                    assert!(on_disk[at..].iter().all(|&b| b == 0));
                }
                if case == 2 && i == 5 {
                    // A sync in the middle truncates the padding; later appends continue the file.
                    w.sync().unwrap();
                    assert_eq!(std::fs::read(&p).unwrap(), &data[..at]);
                }
            }
            w.sync().unwrap();
            assert_eq!(fs.file_size(&p).unwrap(), data.len() as u64);
            drop(w);
            assert!(std::fs::read(&p).unwrap() == data, "case {case}: the file differs from the appended bytes");
        }
    }

    #[test]
    fn direct_writer_dropped_after_flush_is_truncated_to_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let p = dir.path().join("f");
        let Some(mut w) = create_direct_or_skip(&fs, &p) else { return };
        w.append(b"hello direct").unwrap();
        w.flush().unwrap();
        assert_eq!(fs.file_size(&p).unwrap(), DIRECT_IO_ALIGN as u64, "padded on disk until closed");
        drop(w);
        assert_eq!(std::fs::read(&p).unwrap(), b"hello direct");
        // An empty direct file stays empty.
        let q = dir.path().join("g");
        let mut w = create_direct_or_skip(&fs, &q).unwrap();
        w.sync().unwrap();
        drop(w);
        assert_eq!(fs.file_size(&q).unwrap(), 0);
    }

    #[test]
    fn missing_file_is_io_error_naming_path() {
        let fs = PosixFs::new();
        let err = fs.open(Path::new("/nonexistent/x"), ReadHints::default()).err().unwrap();
        assert!(err.is_io());
        assert!(err.to_string().contains("/nonexistent/x"));
    }
}
