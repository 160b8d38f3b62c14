//! `shaledb get|put|delete|scan DB ...`: key-level tools as RocksDB's `ldb` gives them.
//!
//! Keys and values are taken and printed as raw bytes, or with `--hex` as hexadecimal (`0x` optional on input;
//! printed as `0x` and upper-case digits, as ldb does). `scan` prints `KEY ==> VALUE` lines. A key `get` does
//! not find prints `Failed: NotFound: KEY` on stderr and exits 1, as `ldb get` does. `--read-only` opens with
//! [`shaledb::Db::open_read_only`]: nothing in the directory is created or changed, and a database another
//! process holds open (or a read-only directory) can be read. `--secondary-path DIR` opens with
//! [`shaledb::Db::open_as_secondary`] (ldb's `--secondary_path`): the same, with the secondary's LOG and OPTIONS
//! file in `DIR`.

use anyhow::{bail, Context};
use shaledb::{ColumnFamilyDescriptor, Db, Options};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments shared by the read commands.
#[derive(clap::Args, Debug)]
pub struct ReadFlags {
    /// Keys (and values) are given and printed in hexadecimal.
    #[arg(long)]
    pub hex: bool,
    /// Open without writing anything (no LOCK, no WAL, no MANIFEST): works on a database open elsewhere or in a
    /// read-only directory; writes not yet flushed are read from its WAL.
    #[arg(long, conflicts_with = "secondary_path")]
    pub read_only: bool,
    /// Open as a secondary instance of a database open elsewhere (ldb's `--secondary_path`): like
    /// `--read-only`, but the secondary's own LOG and OPTIONS file are written in this directory.
    #[arg(long, value_name = "DIR")]
    pub secondary_path: Option<PathBuf>,
    /// Read this column family (ldb's `--column_family`; default: the default family).
    #[arg(long, value_name = "NAME")]
    pub column_family: Option<String>,
}

impl ReadFlags {
    /// True when the database is opened without writing to it (`--read-only` or `--secondary-path`).
    fn reads_only(&self) -> bool {
        self.read_only || self.secondary_path.is_some()
    }
}

/// `shaledb get DB KEY`.
#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// The database directory.
    pub db: PathBuf,
    /// The key.
    pub key: String,
    #[command(flatten)]
    pub flags: ReadFlags,
}

/// `shaledb put DB KEY VALUE`.
#[derive(clap::Args, Debug)]
pub struct PutArgs {
    /// The database directory.
    pub db: PathBuf,
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
    /// Keys and values are given in hexadecimal.
    #[arg(long)]
    pub hex: bool,
    /// Create the database when it does not exist.
    #[arg(long)]
    pub create_if_missing: bool,
    /// Write to this column family (ldb's `--column_family`; default: the default family).
    #[arg(long, value_name = "NAME")]
    pub column_family: Option<String>,
}

/// `shaledb delete DB KEY`.
#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// The database directory.
    pub db: PathBuf,
    /// The key.
    pub key: String,
    /// The key is given in hexadecimal.
    #[arg(long)]
    pub hex: bool,
    /// Delete from this column family (ldb's `--column_family`; default: the default family).
    #[arg(long, value_name = "NAME")]
    pub column_family: Option<String>,
}

/// `shaledb list-column-families DB`, `create-column-family DB NAME`, `drop-column-family DB NAME`.
#[derive(clap::Args, Debug)]
pub struct FamilyArgs {
    /// The database directory.
    pub db: PathBuf,
    /// The column family's name.
    pub name: String,
}

/// `shaledb list-column-families DB`.
#[derive(clap::Args, Debug)]
pub struct ListFamiliesArgs {
    /// The database directory.
    pub db: PathBuf,
}

/// `shaledb scan DB`.
#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// The database directory.
    pub db: PathBuf,
    /// First key (inclusive).
    #[arg(long)]
    pub from: Option<String>,
    /// End key (exclusive).
    #[arg(long)]
    pub to: Option<String>,
    /// Print at most this many entries.
    #[arg(long)]
    pub limit: Option<u64>,
    /// From the last key down.
    #[arg(long)]
    pub reverse: bool,
    #[command(flatten)]
    pub flags: ReadFlags,
}

/// Decodes a key or value given on the command line.
pub(crate) fn arg_bytes(s: &str, hex: bool, what: &str) -> anyhow::Result<Vec<u8>> {
    if !hex {
        return Ok(s.as_bytes().to_vec());
    }
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if !digits.len().is_multiple_of(2) {
        bail!("{what} {s:?} is not hexadecimal: an odd number of digits");
    }
    let digit = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    digits
        .as_bytes()
        .chunks(2)
        .map(|p| match (digit(p[0]), digit(p[1])) {
            (Some(h), Some(l)) => Ok(h << 4 | l),
            _ => bail!("{what} {s:?} is not hexadecimal (digits 0-9, a-f, with or without 0x)"),
        })
        .collect()
}

/// A key or value as printed: raw, or `0x` and upper-case hex digits.
fn shown(bytes: &[u8], hex: bool) -> Vec<u8> {
    if !hex {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(2 + 2 * bytes.len());
    out.extend_from_slice(b"0x");
    for b in bytes {
        out.extend_from_slice(format!("{b:02X}").as_bytes());
    }
    out
}

/// The options the CLI opens the database at `path` with: those its newest OPTIONS file records (as RocksDB's
/// `ldb --try_load_options`), so that its merge operator (a built-in one) and TTL mode match what open checks;
/// the defaults when it has none (a new database, or one written before OPTIONS files). A database recorded
/// with a user-defined merge operator is then refused by open, naming it.
pub(crate) fn recorded_options(path: &Path) -> anyhow::Result<Options> {
    Ok(recorded(path)?.0)
}

/// [`recorded_options`] and the column families the newest OPTIONS file records, each with its options (none
/// without a file).
fn recorded(path: &Path) -> anyhow::Result<(Options, Vec<ColumnFamilyDescriptor>)> {
    let has_options = std::fs::read_dir(path)
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-")))
        .unwrap_or(false);
    if !has_options {
        return Ok((Options::default(), Vec::new()));
    }
    let loaded = Options::load_latest(path).with_context(|| format!("reading the options of {}", path.display()))?;
    let families = loaded.column_family_descriptors();
    Ok((loaded.options, families))
}

/// Opens the database at `path` for writing with the options its newest OPTIONS file records, every column
/// family with its own (so a family's merge operator is the one open checks it against); `create_if_missing`
/// as given.
pub(crate) fn open_recorded(path: &Path, create_if_missing: bool) -> anyhow::Result<Db> {
    let (opts, families) = recorded(path)?;
    Db::open_with_column_families(path, Options { create_if_missing, ..opts }, families)
        .with_context(|| format!("opening {}", path.display()))
}

fn open(path: &Path, flags: Option<&ReadFlags>) -> anyhow::Result<Db> {
    let read_only = flags.is_some_and(ReadFlags::reads_only);
    if !read_only {
        return open_recorded(path, false);
    }
    let opts = Options { create_if_missing: false, ..recorded_options(path)? };
    let db = match flags.and_then(|f| f.secondary_path.as_ref()) {
        Some(secondary) => Db::open_as_secondary(path, secondary, opts),
        None => Db::open_read_only(path, opts),
    };
    db.with_context(|| format!("opening {}", path.display()))
}

/// The handle of family `name` (`None`: the default family); a family the database does not hold is an error
/// naming it.
fn family(db: &Db, name: Option<&str>) -> anyhow::Result<shaledb::ColumnFamily> {
    match name {
        None => Ok(db.default_column_family()),
        Some(n) => db.column_family(n).ok_or_else(|| anyhow::anyhow!("the database has no column family {n:?}")),
    }
}

/// Runs `shaledb list-column-families`: one name per line, the default family first.
pub fn list_families(args: ListFamiliesArgs) -> anyhow::Result<i32> {
    let names = Db::list_column_families(&args.db, recorded_options(&args.db)?)
        .with_context(|| format!("reading the column families of {}", args.db.display()))?;
    for n in names {
        println!("{n}");
    }
    Ok(0)
}

/// Runs `shaledb create-column-family` (with the database's recorded options).
pub fn create_family(args: FamilyArgs) -> anyhow::Result<i32> {
    let db = open(&args.db, None)?;
    let cf = db.create_column_family(&args.name, db.options().clone()).context("create_column_family")?;
    close(db, &args.db)?;
    println!("OK {} (id {})", cf.name(), cf.id());
    Ok(0)
}

/// Runs `shaledb drop-column-family`.
pub fn drop_family(args: FamilyArgs) -> anyhow::Result<i32> {
    let db = open(&args.db, None)?;
    let cf = family(&db, Some(&args.name))?;
    db.drop_column_family(&cf).context("drop_column_family")?;
    drop(cf);
    close(db, &args.db)?;
    println!("OK");
    Ok(0)
}

/// Closes a database opened for writing, reporting a failure to make the write durable.
fn close(db: Db, path: &Path) -> anyhow::Result<()> {
    db.close().with_context(|| format!("closing {}", path.display()))
}

/// Runs `shaledb get`.
pub fn get(args: GetArgs) -> anyhow::Result<i32> {
    let key = arg_bytes(&args.key, args.flags.hex, "key")?;
    let db = open(&args.db, Some(&args.flags))?;
    let cf = family(&db, args.flags.column_family.as_deref())?;
    let value = db.get_cf(&cf, &key).context("get")?;
    drop(cf);
    let code = match value {
        Some(v) => {
            let mut line = shown(&v, args.flags.hex);
            line.push(b'\n');
            write_stdout(&line)?;
            0
        }
        None => {
            eprintln!("Failed: NotFound: {}", String::from_utf8_lossy(&shown(&key, args.flags.hex)));
            1
        }
    };
    if !args.flags.reads_only() {
        close(db, &args.db)?;
    }
    Ok(code)
}

/// Runs `shaledb put`.
pub fn put(args: PutArgs) -> anyhow::Result<i32> {
    let key = arg_bytes(&args.key, args.hex, "key")?;
    let value = arg_bytes(&args.value, args.hex, "value")?;
    let db = open_recorded(&args.db, args.create_if_missing)?;
    let cf = family(&db, args.column_family.as_deref())?;
    db.put_cf(&cf, &key, &value).context("put")?;
    drop(cf);
    close(db, &args.db)?;
    println!("OK");
    Ok(0)
}

/// Runs `shaledb delete`.
pub fn delete(args: DeleteArgs) -> anyhow::Result<i32> {
    let key = arg_bytes(&args.key, args.hex, "key")?;
    let db = open(&args.db, None)?;
    let cf = family(&db, args.column_family.as_deref())?;
    db.delete_cf(&cf, &key).context("delete")?;
    drop(cf);
    close(db, &args.db)?;
    println!("OK");
    Ok(0)
}

/// Runs `shaledb scan`.
pub fn scan(args: ScanArgs) -> anyhow::Result<i32> {
    let hex = args.flags.hex;
    let from = args.from.as_deref().map(|k| arg_bytes(k, hex, "--from")).transpose()?;
    let to = args.to.as_deref().map(|k| arg_bytes(k, hex, "--to")).transpose()?;
    let db = open(&args.db, Some(&args.flags))?;
    let cf = family(&db, args.flags.column_family.as_deref())?;
    let mut it = db.cursor_cf_opt(&shaledb::ReadOptions::default(), &cf);
    let before_to = |k: &[u8]| to.as_deref().is_none_or(|t| k < t);
    let from_on = |k: &[u8]| from.as_deref().is_none_or(|f| k >= f);
    if args.reverse {
        match &to {
            Some(t) => {
                it.seek_for_prev(t);
                // The end key is exclusive.
                if it.valid() && it.key() == t.as_slice() {
                    it.prev();
                }
            }
            None => it.seek_to_last(),
        }
    } else {
        match &from {
            Some(f) => it.seek(f),
            None => it.seek_to_first(),
        }
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    while it.valid() && args.limit.is_none_or(|l| printed < l) {
        let k = it.key();
        if !(before_to(k) && from_on(k)) {
            break;
        }
        let mut line = shown(k, hex);
        line.extend_from_slice(b" ==> ");
        line.extend_from_slice(&shown(it.value(), hex));
        line.push(b'\n');
        if let Err(e) = out.write_all(&line) {
            return broken_pipe_is_done(e);
        }
        printed += 1;
        if args.reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().context("scan")?;
    if let Err(e) = out.flush() {
        return broken_pipe_is_done(e);
    }
    Ok(0)
}

/// A reader that stopped reading (`scan | head`) ends the output, not the command with an error.
fn broken_pipe_is_done(e: std::io::Error) -> anyhow::Result<i32> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(0)
    } else {
        Err(anyhow::Error::new(e).context("writing to stdout"))
    }
}

fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) => broken_pipe_is_done(e).map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_arguments_round_trip_and_bad_ones_are_refused() {
        assert_eq!(arg_bytes("0x00fFa1", true, "key").unwrap(), vec![0, 0xff, 0xa1]);
        assert_eq!(arg_bytes("00ff", true, "key").unwrap(), vec![0, 0xff]);
        assert_eq!(arg_bytes("0x", true, "key").unwrap(), Vec::<u8>::new());
        assert_eq!(arg_bytes("0xab", false, "key").unwrap(), b"0xab".to_vec());
        assert!(arg_bytes("0xabc", true, "key").unwrap_err().to_string().contains("odd"));
        assert!(arg_bytes("zz", true, "key").unwrap_err().to_string().contains("not hexadecimal"));
        assert!(arg_bytes("é1", true, "key").is_err());
        assert_eq!(shown(&[0, 0xff, 0xa1], true), b"0x00FFA1".to_vec());
        assert_eq!(shown(b"ab", false), b"ab".to_vec());
    }
}
