//! A catch-up racing the primary: the primary flushes (and deletes the WAL it flushed) between the
//! secondary's MANIFEST read and its WAL listing, the interleaving that step 4 of `secondary.rs` catches.

use crate::{Db, Options};
use parking_lot::Mutex;
use shaledb_vfs::{FileLock, Fs, PosixFs, RandomAccessFile, ReadHints, Result, WritableFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Hook = Box<dyn FnOnce() + Send>;

/// The OS file system, running a hook once just before the next directory listing of `dir`.
struct ListHook {
    dir: PathBuf,
    hook: Mutex<Option<Hook>>,
}

impl std::fmt::Debug for ListHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListHook").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl Fs for ListHook {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        PosixFs::new().create(path)
    }
    fn open(&self, path: &Path, hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>> {
        PosixFs::new().open(path, hints)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        PosixFs::new().rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        PosixFs::new().remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        if dir == self.dir {
            let hook = self.hook.lock().take();
            if let Some(h) = hook {
                h();
            }
        }
        PosixFs::new().list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        PosixFs::new().create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        PosixFs::new().sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        PosixFs::new().exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        PosixFs::new().file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        PosixFs::new().lock(path)
    }
}

fn wals(dir: &Path) -> Vec<String> {
    PosixFs::new().list(dir).unwrap().into_iter().filter(|n| n.ends_with(".log")).collect()
}

#[test]
fn a_flush_between_the_manifest_read_and_the_wal_listing_makes_the_catch_up_read_again() {
    let tmp = shaledb_testkit::tempdir();
    let (primary_dir, secondary_dir) = (tmp.path().join("db"), tmp.path().join("follower"));
    let opts = Options { disable_auto_compactions: true, ..Options::default() };
    let primary = Arc::new(Db::open(&primary_dir, opts.clone()).unwrap());
    for i in 0..100 {
        primary.put(format!("k{i:03}"), "first").unwrap();
    }
    let fs = Arc::new(ListHook { dir: primary_dir.clone(), hook: Mutex::new(None) });
    let secondary = Db::open_as_secondary(&primary_dir, &secondary_dir, Options { fs: fs.clone(), ..opts }).unwrap();
    assert_eq!(secondary.get("k099").unwrap().as_deref(), Some(&b"first"[..]));
    for i in 100..200 {
        primary.put(format!("k{i:03}"), "second").unwrap();
    }
    let old_wals = wals(&primary_dir);
    let p = primary.clone();
    let dir = primary_dir.clone();
    *fs.hook.lock() = Some(Box::new(move || {
        // Everything written so far goes to a table, and the WALs holding it are deleted, after the secondary
        // read the MANIFEST and before it lists the WALs.
        p.flush().unwrap();
        for _ in 0..1000 {
            if old_wals.iter().all(|w| !dir.join(w).exists()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("the primary kept its flushed WALs {old_wals:?}");
    }));
    secondary.try_catch_up_with_primary().unwrap();
    assert!(fs.hook.lock().is_none(), "the hook did not run");
    for i in 0..200 {
        let want: &[u8] = if i < 100 { b"first" } else { b"second" };
        assert_eq!(secondary.get(format!("k{i:03}")).unwrap().as_deref(), Some(want), "k{i:03}");
    }
    drop(secondary);
    let log = std::fs::read_to_string(secondary_dir.join("LOG")).unwrap();
    assert!(log.contains("catch-up: done after 2 attempts"), "{log}");
}

#[test]
fn an_options_file_number_at_the_limit_in_the_secondary_directory_is_refused() {
    let tmp = shaledb_testkit::tempdir();
    let (primary_dir, secondary_dir) = (tmp.path().join("db"), tmp.path().join("follower"));
    Db::open(&primary_dir, Options::default()).unwrap().close().unwrap();
    std::fs::create_dir_all(&secondary_dir).unwrap();
    let name = format!("OPTIONS-{:06}", shaledb_format::edit::MAX_FILE_NUMBER);
    std::fs::write(secondary_dir.join(&name), "").unwrap();
    let e = Db::open_as_secondary(&primary_dir, &secondary_dir, Options::default()).unwrap_err();
    assert!(e.is_invalid_argument() && e.to_string().contains("leaves no number"), "{e}");
}
