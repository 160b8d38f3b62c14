//! The POSIX file system: `std::fs` with positional I/O, user-space write buffering and fcntl-free locking
//! through `File::try_lock`.

use crate::{Error, FileLock, Fs, RandomAccessFile, ReadHints, Result, WritableFile};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
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
}

struct PosixRandom {
    file: File,
    path: PathBuf,
    len: u64,
}

impl RandomAccessFile for PosixRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| Error::io("read", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn prefetch(&self, offset: u64, len: u64) {
        fadvise(&self.file, offset, len, libc::POSIX_FADV_WILLNEED);
    }
}

#[allow(unsafe_code)]
fn fadvise(file: &File, offset: u64, len: u64, advice: libc::c_int) {
    use std::os::fd::AsRawFd;
    let (Ok(off), Ok(l)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else { return };
    // SAFETY: posix_fadvise only reads its integer arguments; the descriptor is valid while `file` lives.
    // It is a hint: its result is deliberately ignored.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), off, l, advice);
    }
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

    fn open(&self, path: &Path, hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>> {
        if hints.direct {
            return Err(Error::NotSupported(
                "direct reads (O_DIRECT) are not implemented by PosixFs; reads go through the page cache".into(),
            ));
        }
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let len = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        if hints.sequential {
            fadvise(&file, 0, 0, libc::POSIX_FADV_SEQUENTIAL);
        } else {
            fadvise(&file, 0, 0, libc::POSIX_FADV_RANDOM);
        }
        Ok(Arc::new(PosixRandom { file, path: path.to_path_buf(), len }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))
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
    fn missing_file_is_io_error_naming_path() {
        let fs = PosixFs::new();
        let err = fs.open(Path::new("/nonexistent/x"), ReadHints::default()).err().unwrap();
        assert!(err.is_io());
        assert!(err.to_string().contains("/nonexistent/x"));
    }
}
