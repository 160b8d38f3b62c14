//! `shaledb verify` on blob files (docs/format/blob.md): each live blob file read whole (every record's checksum,
//! the footer) and its counts compared with the MANIFEST's addition.

use super::Report;
use shaledb_format::blob::{BlobFileMeta, BlobFileReader};
use shaledb_format::filenames;
use shaledb_vfs::{Fs, ReadHints};
use std::path::Path;

/// Checks live blob file `m` of the database in `dir`.
pub(super) fn check_blob_file(fs: &dyn Fs, dir: &Path, m: &BlobFileMeta, report: &mut Report) {
    let a = m.addition;
    let path = filenames::blob(dir, a.number);
    let reader = match fs.open(&path, ReadHints { sequential: true, ..ReadHints::default() }) {
        Ok(file) => BlobFileReader::open(file, a.number, None),
        Err(e) => Err(e),
    };
    let summary = reader.and_then(|r| r.verify());
    match summary {
        Err(e) => report.error(&path, &e),
        Ok(s) if (s.record_count, s.record_bytes, s.file_size) != (a.record_count, a.record_bytes, a.file_size) => {
            report.problem(
                &path,
                None,
                format!(
                    "{} records of {} bytes in {} bytes; the MANIFEST records {} of {} in {}",
                    s.record_count, s.record_bytes, s.file_size, a.record_count, a.record_bytes, a.file_size
                ),
            );
        }
        Ok(s) => report.checked.push(format!("{}: {} blob records", path.display(), s.record_count)),
    }
}
