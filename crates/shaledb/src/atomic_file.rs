//! Replacing a small file whole and durably (docs/durability.md D7): CURRENT, IDENTITY and the OPTIONS files
//! are written to a temp file, synced, renamed over the target, and the directory synced, so a crash leaves
//! either the old file or the new one, never a part.

use crate::filenames;
use shaledb_vfs::{Fs, Result};
use std::path::Path;

/// Replaces `target` atomically with `contents`: temp file `temp_number`, fsync, rename, directory fsync.
pub(crate) fn replace_file(fs: &dyn Fs, dir: &Path, target: &Path, contents: &[u8], temp_number: u64) -> Result<()> {
    let tmp = filenames::temp(dir, temp_number);
    let res = (|| {
        let mut f = fs.create(&tmp)?;
        f.append(contents)?;
        f.sync()?;
        drop(f);
        fs.rename(&tmp, target)?;
        fs.sync_dir(dir)
    })();
    if res.is_err() {
        let _ = fs.remove(&tmp);
    }
    res
}
