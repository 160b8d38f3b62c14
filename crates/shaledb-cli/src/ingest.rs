//! `shaledb sst write OUTPUT INPUT` ([`shaledb::ingest::SstFileWriter`]) and `shaledb ingest DB FILE...`
//! ([`shaledb::Db::ingest_external_file`]).
//!
//! INPUT is a text file of `KEY<TAB>VALUE` lines sorted by key (bytewise), each key once; with `--hex` keys
//! and values are hexadecimal (`0x` optional), as `get`/`put` take them. A line without a tab, a key not
//! greater than the one before or bad hex is an error naming the line; after any error no file is left behind
//! and an existing OUTPUT is as it was (the table is written under a temporary name, renamed when complete).
//! Exit codes: 0 on success, 1 on any error (printed on stderr), 2 for a usage error.

use crate::keys::arg_bytes;
use anyhow::{bail, Context};
use shaledb::ingest::{IngestExternalFileOptions, SstFileWriter};
use shaledb::Options;
use std::io::BufRead;
use std::path::PathBuf;

/// `shaledb sst ...`.
#[derive(clap::Subcommand, Debug)]
pub enum SstCommand {
    /// Write the sorted `KEY<TAB>VALUE` lines of INPUT as an SST that `shaledb ingest` can add to a database.
    Write {
        /// The SST to write. An existing file is replaced only once the new table is complete; on an error it
        /// is left as it was and no file is left behind.
        output: PathBuf,
        /// The sorted input: one `KEY<TAB>VALUE` line per entry.
        input: PathBuf,
        /// Keys and values are given in hexadecimal.
        #[arg(long)]
        hex: bool,
    },
}

/// `shaledb ingest DB FILE...`.
#[derive(clap::Args, Debug)]
pub struct IngestArgs {
    /// The database directory.
    pub db: PathBuf,
    /// SSTs written by `shaledb sst write` (or an `SstFileWriter`); their key ranges must not overlap.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Hard link the files into the database and remove the originals (RocksDB's `move_files`).
    #[arg(long)]
    pub move_files: bool,
    /// Read every block of every file and check its checksum first.
    #[arg(long)]
    pub verify_checksums: bool,
    /// Fail instead of flushing when a file overlaps the memtable.
    #[arg(long)]
    pub no_blocking_flush: bool,
    /// Fail instead of giving the files a global sequence number when they overlap data of the database.
    #[arg(long)]
    pub no_global_seqno: bool,
}

/// `shaledb sst write`: prints the file's key range, entry count and size. The table is written under a
/// temporary name beside OUTPUT and renamed to it only once complete and synced: on any error the temporary
/// file is removed and OUTPUT (if it existed) is left as it was.
pub fn sst(cmd: SstCommand) -> anyhow::Result<i32> {
    let SstCommand::Write { output, input, hex } = cmd;
    let reader = std::io::BufReader::new(
        std::fs::File::open(&input).with_context(|| format!("cannot open {}", input.display()))?,
    );
    if output.is_dir() {
        bail!("{} is a directory: name the SST file to write", output.display());
    }
    let Some(name) = output.file_name() else {
        bail!("{} names no file: name the SST file to write", output.display());
    };
    // Writing over the input would replace it with the table once renamed: refuse before anything is made.
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(&output), std::fs::canonicalize(&input)) {
        if a == b {
            bail!("{} is the input file: name another file for the SST", output.display());
        }
    }
    let tmp = output.with_file_name(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let written = write_sst(&tmp, reader, &input, hex).and_then(|info| {
        std::fs::rename(&tmp, &output)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), output.display()))?;
        Ok(info)
    });
    let info = match written {
        Ok(info) => info,
        Err(e) => {
            // Only our temporary file: OUTPUT is replaced by the rename alone, which did not happen.
            if let Err(rm) = std::fs::remove_file(&tmp) {
                if rm.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("warning: could not remove the partial table {}: {rm}", tmp.display());
                }
            }
            return Err(e);
        }
    };
    let parent = output.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    std::fs::File::open(parent)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync the directory {}", parent.display()))?;
    println!(
        "{}: {} entries, {} bytes, keys {} .. {}",
        output.display(),
        info.num_entries,
        info.file_size,
        String::from_utf8_lossy(&info.smallest_key).escape_debug(),
        String::from_utf8_lossy(&info.largest_key).escape_debug()
    );
    Ok(0)
}

/// Writes the sorted `KEY<TAB>VALUE` lines of `reader` (the file `input`) as a table at `path`.
fn write_sst(
    path: &std::path::Path,
    reader: impl BufRead,
    input: &std::path::Path,
    hex: bool,
) -> anyhow::Result<shaledb::ingest::ExternalSstFileInfo> {
    let mut w = SstFileWriter::create(&Options::default());
    w.open(path)?;
    let mut last: Option<Vec<u8>> = None;
    for (i, line) in reader.split(b'\n').enumerate() {
        let n = i + 1;
        let line = line.with_context(|| format!("cannot read {}", input.display()))?;
        let Some(tab) = line.iter().position(|&b| b == b'\t') else {
            bail!("{}:{n}: no tab between key and value", input.display());
        };
        let (k, v) = (&line[..tab], &line[tab + 1..]);
        let (key, value) = if hex {
            let text = |b: &[u8], what: &str| {
                let s = std::str::from_utf8(b)
                    .with_context(|| format!("{}:{n}: {what} is not hexadecimal", input.display()))?;
                arg_bytes(s, true, what).with_context(|| format!("{}:{n}", input.display()))
            };
            (text(k, "key")?, text(v, "value")?)
        } else {
            (k.to_vec(), v.to_vec())
        };
        if last.as_ref().is_some_and(|l| key <= *l) {
            bail!(
                "{}:{n}: the key is not greater than the key of line {} (the input must be sorted, each key once)",
                input.display(),
                n - 1
            );
        }
        w.put(&key, &value).with_context(|| format!("{}:{n}", input.display()))?;
        last = Some(key);
    }
    if w.num_entries() == 0 {
        bail!("{} holds no entries: a table needs at least one", input.display());
    }
    Ok(w.finish()?)
}

/// `shaledb ingest`.
pub fn ingest(a: IngestArgs) -> anyhow::Result<i32> {
    // The options its OPTIONS file records, so a database with a built-in merge operator or TTL mode opens.
    let db = crate::keys::open_recorded(&a.db, false).with_context(|| format!("cannot open {}", a.db.display()))?;
    let opts = IngestExternalFileOptions {
        move_files: a.move_files,
        verify_checksums_before_ingest: a.verify_checksums,
        allow_blocking_flush: !a.no_blocking_flush,
        allow_global_seqno: !a.no_global_seqno,
        ..IngestExternalFileOptions::default()
    };
    db.ingest_external_file(&a.files, &opts)?;
    db.close()?;
    println!("ingested {} file(s) into {}", a.files.len(), a.db.display());
    Ok(0)
}
