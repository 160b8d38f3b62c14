//! Snapshot archives and the file steps of building and installing them.
//!
//! A snapshot is an engine checkpoint of the state machine's database packed into one byte string, which
//! openraft carries to a follower (docs/format/raft-log.md, "Snapshot archive"):
//!
//! ```text
//! archive  := magic:"SHRSNAP1" meta_len:fixed32 meta:record(snapshot_meta) count:fixed32 file{count} crc:fixed32
//! file     := name_len:u8 name:byte{name_len} size:fixed64 data:byte{size} data_crc:fixed32
//! name     := [A-Za-z0-9._-]{1,255}, not "." or "..", unique in the archive   ; a flat checkpoint directory
//! data_crc := crc32c(data)
//! crc      := crc32c(every byte before it)
//! ```
//!
//! Integers are little-endian. Every length is checked against the bytes left before it sizes anything.

use std::path::{Path, PathBuf};

use openraft::SnapshotMeta;
use shaledb::Fs;

use crate::codec::{self, Kind};
use crate::error::{Error, Result};
use crate::NodeId;

/// The archive's first bytes. FROZEN.
pub const MAGIC: &[u8; 8] = b"SHRSNAP1";

/// The metadata openraft keeps with a snapshot.
pub type Meta = SnapshotMeta<NodeId, openraft::BasicNode>;

/// One file of an unpacked archive.
pub struct ArchiveFile<'a> {
    pub name: &'a str,
    pub data: &'a [u8],
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Packs `meta` and every file of the flat directory `dir`, in name order.
pub fn pack(fs: &dyn Fs, meta: &Meta, dir: &Path) -> Result<Vec<u8>> {
    let mut names = fs.list(dir)?;
    names.sort();
    let rec = codec::encode(Kind::SnapshotMeta, meta).map_err(Error::InvalidArgument)?;
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(rec.len() as u32).to_le_bytes());
    out.extend_from_slice(&rec);
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for name in &names {
        if !valid_name(name) {
            return Err(Error::InvalidArgument(format!("checkpoint file name {name:?} cannot be archived")));
        }
        let data = fs.read_all(&dir.join(name))?;
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(&data);
        out.extend_from_slice(&crc32c::crc32c(&data).to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    dir: &'a Path,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let left = self.data.len() - self.pos;
        if n > left {
            return Err(Error::corruption(
                self.dir,
                format!("snapshot archive: {what} of {n} bytes at offset {} runs past its end ({left} left)", self.pos),
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Checks a whole archive and returns its metadata and files. `dir` names where it came from in errors.
pub fn unpack<'a>(data: &'a [u8], dir: &'a Path) -> Result<(Meta, Vec<ArchiveFile<'a>>)> {
    if data.len() < MAGIC.len() + 4 + 4 + 4 {
        return Err(Error::corruption(dir, format!("snapshot archive of {} bytes is too short", data.len())));
    }
    let (body, crc) = data.split_at(data.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let actual = crc32c::crc32c(body);
    if stored != actual {
        return Err(Error::corruption(
            dir,
            format!("snapshot archive checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    let mut r = Reader { data: body, pos: 0, dir };
    if r.take(MAGIC.len(), "magic")? != MAGIC {
        return Err(Error::corruption(dir, "snapshot archive does not start with its magic"));
    }
    let meta_len = r.u32("metadata length")? as usize;
    let meta: Meta = codec::decode(Kind::SnapshotMeta, r.take(meta_len, "metadata")?)
        .map_err(|e| Error::corruption(dir, format!("snapshot archive metadata: {e}")))?;
    let count = r.u32("file count")? as usize;
    // Each file takes at least 1 + 1 + 8 + 4 bytes: a count larger than the bytes allow is corrupt, checked
    // before it sizes the vector.
    if count > (body.len() - r.pos) / 14 {
        return Err(Error::corruption(dir, format!("snapshot archive claims {count} files, more than its bytes hold")));
    }
    let mut files: Vec<ArchiveFile<'a>> = Vec::with_capacity(count);
    for _ in 0..count {
        let name_len = r.take(1, "name length")?[0] as usize;
        let name = std::str::from_utf8(r.take(name_len, "file name")?)
            .ok()
            .filter(|n| valid_name(n))
            .ok_or_else(|| Error::corruption(dir, format!("snapshot archive: bad file name at offset {}", r.pos)))?;
        if files.iter().any(|f| f.name == name) {
            return Err(Error::corruption(dir, format!("snapshot archive holds {name} twice")));
        }
        let size = usize::try_from(r.u64("file size")?)
            .map_err(|_| Error::corruption(dir, "snapshot archive: file size does not fit in memory"))?;
        let data = r.take(size, "file data")?;
        if r.u32("file checksum")? != crc32c::crc32c(data) {
            return Err(Error::corruption(dir, format!("snapshot archive: {name} fails its checksum")));
        }
        files.push(ArchiveFile { name, data });
    }
    if r.pos != body.len() {
        return Err(Error::corruption(
            dir,
            format!("snapshot archive has {} bytes after its files", body.len() - r.pos),
        ));
    }
    Ok((meta, files))
}

/// Writes `data` to `path` and syncs it (the directory is the caller's to sync).
pub fn write_synced(fs: &dyn Fs, path: &Path, data: &[u8]) -> Result<()> {
    let mut f = fs.create(path)?;
    f.append(data)?;
    f.flush()?;
    f.sync()?;
    Ok(())
}

/// Replaces `dir/name` durably: temp file, sync, rename, directory sync (as the engine replaces CURRENT).
pub fn replace_file(fs: &dyn Fs, dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    write_synced(fs, &tmp, data)?;
    fs.rename(&tmp, &dir.join(name))?;
    fs.sync_dir(dir)?;
    Ok(())
}

/// Removes a directory and everything under it. Only called on directories this crate made.
pub fn remove_tree(fs: &dyn Fs, dir: &Path) -> Result<()> {
    if !fs.exists(dir) {
        return Ok(());
    }
    for name in fs.list(dir)? {
        let path: PathBuf = dir.join(&name);
        if fs.remove(&path).is_err() {
            remove_tree(fs, &path)?;
        }
    }
    fs.remove_dir(dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{LogId, StoredMembership};

    fn sample() -> (tempfile::TempDir, Vec<u8>) {
        let tmp = tempfile::tempdir().unwrap();
        let fs = shaledb::Options::default().fs;
        fs.create_dir_all(&tmp.path().join("c")).unwrap();
        write_synced(fs.as_ref(), &tmp.path().join("c/000001.sst"), b"table bytes").unwrap();
        write_synced(fs.as_ref(), &tmp.path().join("c/CURRENT"), b"MANIFEST-000002\n").unwrap();
        let meta = Meta {
            last_log_id: Some(LogId::new(openraft::CommittedLeaderId::new(2, 1), 9)),
            last_membership: StoredMembership::default(),
            snapshot_id: "s-1".into(),
        };
        let packed = pack(fs.as_ref(), &meta, &tmp.path().join("c")).unwrap();
        (tmp, packed)
    }

    #[test]
    fn round_trip() {
        let (tmp, packed) = sample();
        let (meta, files) = unpack(&packed, tmp.path()).unwrap();
        assert_eq!(meta.snapshot_id, "s-1");
        assert_eq!(meta.last_log_id.map(|l| l.index), Some(9));
        let names: Vec<_> = files.iter().map(|f| (f.name, f.data)).collect();
        assert_eq!(names, [("000001.sst", &b"table bytes"[..]), ("CURRENT", &b"MANIFEST-000002\n"[..])]);
    }

    #[test]
    fn checksum_mismatch() {
        let (tmp, mut packed) = sample();
        packed[20] ^= 0x40;
        let err = unpack(&packed, tmp.path()).err().unwrap();
        assert!(err.is_corruption() && err.to_string().contains("checksum"), "{err}");
    }

    #[test]
    fn truncated_archive() {
        let (tmp, packed) = sample();
        for cut in [0, 5, 16, packed.len() / 2, packed.len() - 1] {
            assert!(unpack(&packed[..cut], tmp.path()).err().unwrap().is_corruption(), "cut at {cut}");
        }
    }

    #[test]
    fn huge_file_size_is_refused_before_use() {
        let (tmp, packed) = sample();
        // Rewrite the first file's size to u64::MAX and fix the trailer so only the size check can catch it.
        let mut body = packed[..packed.len() - 4].to_vec();
        let meta_len = u32::from_le_bytes(body[8..12].try_into().unwrap()) as usize;
        let first = 12 + meta_len + 4;
        let name_len = body[first] as usize;
        let size_at = first + 1 + name_len;
        body[size_at..size_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        let err = unpack(&body, tmp.path()).err().unwrap();
        assert!(err.to_string().contains("runs past") || err.to_string().contains("fit"), "{err}");
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(!valid_name(".."));
        assert!(!valid_name("a/b"));
        assert!(!valid_name(""));
        assert!(valid_name("MANIFEST-000002"));
    }
}
