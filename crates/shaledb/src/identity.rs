//! The database's identity: 16 random bytes drawn when it is created, kept in the MANIFEST (authoritative), in
//! the IDENTITY file (32 lowercase hex digits and "\n", for operators and tools) and in every table's
//! properties (so a table copied over another, or from another database, is recognised).

use crate::filenames;
use shaledb_format::edit::DB_ID_LEN;
use shaledb_vfs::{Error, Fs, Result};
use std::path::Path;

pub(crate) type DbId = [u8; DB_ID_LEN];

/// A fresh identity from the operating system's random source.
pub(crate) fn generate(dir: &Path) -> Result<DbId> {
    let mut id = [0u8; DB_ID_LEN];
    getrandom::getrandom(&mut id)
        .map_err(|e| Error::io("getrandom", dir, std::io::Error::other(format!("no random identity: {e}"))))?;
    Ok(id)
}

/// The 32 lowercase hex digits of `id`.
pub(crate) fn to_hex(id: &DbId) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses the contents of an IDENTITY file: exactly 32 lowercase hex digits and "\n".
pub(crate) fn parse(contents: &[u8]) -> Option<DbId> {
    let hex = contents.strip_suffix(b"\n")?;
    if hex.len() != DB_ID_LEN * 2 {
        return None;
    }
    let mut id = [0u8; DB_ID_LEN];
    for (slot, pair) in id.iter_mut().zip(hex.chunks_exact(2)) {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let &[hi, lo] = pair else { return None };
        *slot = (digit(hi)? << 4) | digit(lo)?;
    }
    Some(id)
}

/// Reads the IDENTITY file of `dir`: `Ok(None)` when it is missing or does not hold an identity.
pub(crate) fn read(fs: &dyn Fs, dir: &Path) -> Result<Option<DbId>> {
    let path = filenames::identity(dir);
    if !fs.exists(&path) {
        return Ok(None);
    }
    Ok(parse(&fs.read_all(&path)?))
}

/// Writes the IDENTITY file atomically (temp file `temp_number`, fsync, rename, directory fsync).
/// The database's identity from what the MANIFEST records (`manifest`, in `MANIFEST-manifest_number`) and
/// what IDENTITY holds (`file`): the one they agree on, the one that exists, or `None` when neither does (a
/// database from before identities). Two different identities mean files of two databases are mixed: an
/// error naming both.
pub(crate) fn reconcile(
    dir: &Path,
    manifest: Option<DbId>,
    manifest_number: u64,
    file: Option<DbId>,
) -> Result<Option<DbId>> {
    match (manifest, file) {
        (Some(m), Some(f)) if m != f => Err(Error::corruption(
            filenames::identity(dir),
            0,
            format!(
                "IDENTITY holds {} but MANIFEST-{:06} records {}: files of two databases are mixed",
                to_hex(&f),
                manifest_number,
                to_hex(&m)
            ),
        )),
        (m, f) => Ok(m.or(f)),
    }
}

pub(crate) fn write(fs: &dyn Fs, dir: &Path, id: &DbId, temp_number: u64) -> Result<()> {
    let contents = format!("{}\n", to_hex(id));
    crate::atomic_file::replace_file(fs, dir, &filenames::identity(dir), contents.as_bytes(), temp_number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_file_roundtrip_and_rejects() {
        let id = generate(Path::new("/db")).unwrap();
        assert_ne!(id, generate(Path::new("/db")).unwrap(), "two databases get different ids");
        let text = format!("{}\n", to_hex(&id));
        assert_eq!(text.len(), 33);
        assert_eq!(parse(text.as_bytes()), Some(id));
        assert_eq!(parse(to_hex(&id).as_bytes()), None, "needs the newline");
        assert_eq!(parse(text.to_uppercase().as_bytes()), None);
        assert_eq!(parse(b"hello\n"), None);
        assert_eq!(parse(&[b'z'; 33]), None);
    }
}
