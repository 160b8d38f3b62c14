//! `shaledb get|put|delete|scan DB ...`: key-level tools as RocksDB's `ldb` gives them.
//!
//! Keys and values are taken and printed as raw bytes, or with `--hex` as hexadecimal (`0x` optional on input;
//! printed as `0x` and upper-case digits, as ldb does). `scan` prints `KEY ==> VALUE` lines. A key `get` does
//! not find prints `error: NotFound: KEY` on stderr and exits 1, as `ldb get` does. `--read-only` opens with
//! [`shaledb::Db::open_read_only`]: nothing in the directory is created or changed, and a database another
//! process holds open (or a read-only directory) can be read. `--secondary-path DIR` opens with
//! [`shaledb::Db::open_as_secondary`] (ldb's `--secondary_path`): the same, with the secondary's LOG and OPTIONS
//! file in `DIR`.
//!
//! Two views of a database. A plain database (the engine API, `shaledb put`) is shown as its engine records. A
//! server's directory (`shaledb server`: its layout marker, or records that all follow the server's grammar,
//! `shaledb_server::layout`) is shown as Redis keys of one Redis database (`--redis-db N`, default 0): `get`
//! prints a string's value (an expired key is NotFound) and refuses a collection in one line naming its type,
//! size and the server command that reads it; `scan` lists keys in order, collections as `KEY ==> (hash, 3
//! fields)`; `put` writes a string as SET does (a collection it replaces is reclaimed by the server's
//! collector); `delete` removes the key as DEL does. `--raw` shows and takes the engine's records of either.
//! `import-strings SRC DEST` turns a plain database into a server's directory of strings.

use anyhow::{bail, Context};
use shaledb::{ColumnFamilyDescriptor, Db, Options, WriteBatch};
use shaledb_server::keys::{self as rkeys, Coll, Type};
use shaledb_server::layout;
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

/// Which view of the database a key tool uses (see the module's comment).
#[derive(clap::Args, Debug, Default)]
pub struct ViewFlags {
    /// The engine's own records, whatever the database holds (on a server's directory: the encoded keys and
    /// values, for debugging).
    #[arg(long, conflicts_with = "redis_db")]
    pub raw: bool,
    /// On a server's directory: the Redis database (0-15, as SELECT) whose keys are shown or written
    /// (default 0).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..16))]
    pub redis_db: Option<u8>,
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
    #[command(flatten)]
    pub view: ViewFlags,
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
    #[command(flatten)]
    pub view: ViewFlags,
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
    #[command(flatten)]
    pub view: ViewFlags,
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
    #[command(flatten)]
    pub view: ViewFlags,
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
    // Short runs (one `put` per process) write no table per run: close leaves the writes in the synced WAL and
    // the next open keeps what it replays in memory (docs/durability.md, the steps of open).
    let opts =
        Options { create_if_missing, avoid_flush_during_recovery: true, avoid_flush_during_shutdown: true, ..opts };
    Db::open_with_column_families(path, opts, families).with_context(|| format!("opening {}", path.display()))
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
    if let Some(n) = redis_view(&db, &args.db, &args.view, args.flags.column_family.as_deref())? {
        let code = redis_get(&db, n, &key, args.flags.hex)?;
        if !args.flags.reads_only() {
            close(db, &args.db)?;
        }
        return Ok(code);
    }
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
            eprintln!("error: NotFound: {}", String::from_utf8_lossy(&shown(&key, args.flags.hex)));
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
    match redis_view(&db, &args.db, &args.view, args.column_family.as_deref())? {
        // SET: a string without expiry, whatever the key held (a collection's old version is reclaimed by the
        // server's collector, which finds it in its registry pass).
        Some(n) => db.put(rkeys::meta_key(n, &key), rkeys::encode_string(&value, None)).context("put")?,
        None => {
            let cf = family(&db, args.column_family.as_deref())?;
            db.put_cf(&cf, &key, &value).context("put")?;
        }
    }
    close(db, &args.db)?;
    println!("OK");
    Ok(0)
}

/// Runs `shaledb delete`.
pub fn delete(args: DeleteArgs) -> anyhow::Result<i32> {
    let key = arg_bytes(&args.key, args.hex, "key")?;
    let db = open(&args.db, None)?;
    match redis_view(&db, &args.db, &args.view, args.column_family.as_deref())? {
        // DEL: the meta record only; a collection's members are reclaimed by the server's collector.
        Some(n) => db.delete(rkeys::meta_key(n, &key)).context("delete")?,
        None => {
            let cf = family(&db, args.column_family.as_deref())?;
            db.delete_cf(&cf, &key).context("delete")?;
        }
    }
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
    let redis = redis_view(&db, &args.db, &args.view, args.flags.column_family.as_deref())?;
    // In the Redis view the bounds are meta keys of the database: --from and --to name Redis keys.
    let (from, to) = match redis {
        Some(n) => (
            Some(from.map_or_else(|| rkeys::meta_prefix(n).to_vec(), |f| rkeys::meta_key(n, &f))),
            Some(to.map_or_else(|| rkeys::meta_end(n).to_vec(), |t| rkeys::meta_key(n, &t))),
        ),
        None => (from, to),
    };
    let now = shaledb_server::store::now_ms();
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
        let line = match redis {
            None => {
                let mut line = shown(k, hex);
                line.extend_from_slice(b" ==> ");
                line.extend_from_slice(&shown(it.value(), hex));
                line.push(b'\n');
                Some(line)
            }
            // Meta keys are `db 0x00 user_key`; an expired key is not shown.
            Some(_) => redis_line(k.get(2..).unwrap_or_default(), it.value(), now, hex),
        };
        if let Some(line) = line {
            if let Err(e) = out.write_all(&line) {
                return broken_pipe_is_done(e);
            }
            printed += 1;
        }
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

/// The view a key tool uses on `db` (at `path`): `None` for the engine's records, `Some(n)` for the Redis keys
/// of database `n`. A server's directory (its layout marker, or records that all follow the server's grammar)
/// is shown as Redis keys unless `--raw`; `--column-family` is refused there (the server keeps every key in
/// the default family, so a family view of it could only show engine records: `--raw` does that), and
/// `--redis-db` is refused on a plain database (it has no Redis keyspace).
fn redis_view(db: &Db, path: &Path, view: &ViewFlags, column_family: Option<&str>) -> anyhow::Result<Option<u8>> {
    if view.raw {
        return Ok(None);
    }
    let found = layout::check(db).with_context(|| format!("reading {}", path.display()))?;
    if !found.is_server() {
        if view.redis_db.is_some() {
            bail!("--redis-db: {} is a plain database (engine records, no Redis keyspace)", path.display());
        }
        return Ok(None);
    }
    if let Some(why) = layout::refusal(path, &found) {
        bail!("{why} (--raw shows the engine's records)");
    }
    if matches!(found, layout::Layout::Marked { keyspace: rkeys::Keyspace::Slots, .. }) {
        // A replica group member's state machine: its keys change only through the group's log.
        bail!(
            "{} is a cluster member's state machine (keys stored by hash slot, changed only through its group's \
             log): read and write its keys through the server (`redis-cli -c`); --raw shows the engine's records",
            path.display()
        );
    }
    if let Some(cf) = column_family {
        bail!(
            "{} is a server's directory (Redis keys): --column-family is for plain databases (add --raw to read the \
             engine's records of family {cf:?})",
            path.display()
        );
    }
    Ok(Some(view.redis_db.unwrap_or(0)))
}

/// What a collection's size counts, for `n` of them.
fn size_words(typ: Type, n: u64) -> String {
    let unit = match typ {
        Type::Hash => "field",
        Type::List => "element",
        Type::Stream => "entry",
        Type::String | Type::Set | Type::ZSet => "member",
    };
    match (n, typ) {
        (1, _) => format!("1 {unit}"),
        (_, Type::Stream) => format!("{n} entries"),
        _ => format!("{n} {unit}s"),
    }
}

/// The server command that reads a whole collection of `typ` named `key`.
fn reading_command(typ: Type, key: &str) -> String {
    match typ {
        Type::Hash => format!("HGETALL {key}"),
        Type::List => format!("LRANGE {key} 0 -1"),
        Type::Set => format!("SMEMBERS {key}"),
        Type::ZSet => format!("ZRANGE {key} 0 -1 WITHSCORES"),
        Type::Stream => format!("XRANGE {key} - +"),
        Type::String => format!("GET {key}"),
    }
}

/// `get` in the Redis view: a string's value (exit 0); NotFound for a missing or expired key, one line naming
/// the type, size and reading command for a collection (exit 1).
fn redis_get(db: &Db, n: u8, key: &[u8], hex: bool) -> anyhow::Result<i32> {
    let name = String::from_utf8_lossy(&shown(key, hex)).into_owned();
    let stored = db.get(rkeys::meta_key(n, key)).context("get")?;
    let now = shaledb_server::store::now_ms();
    let found = match &stored {
        None => None,
        Some(v) => Some(rkeys::decode_meta(v).with_context(|| format!("the value of {name}"))?),
    };
    let (Some(stored), Some(meta)) = (stored, found.filter(|m| !m.expired(now))) else {
        eprintln!("error: NotFound: {name}");
        return Ok(1);
    };
    if meta.typ == Type::String {
        let mut line = shown(stored.get(meta.payload_at..).unwrap_or_default(), hex);
        line.push(b'\n');
        write_stdout(&line)?;
        return Ok(0);
    }
    let coll = Coll::decode(&stored).with_context(|| format!("the value of {name}"))?;
    let size = coll.map_or(0, |c| c.size);
    eprintln!(
        "error: {name} is a {} ({}); read it through shaledb server ({})",
        meta.typ.name(),
        size_words(meta.typ, size),
        reading_command(meta.typ, &name)
    );
    Ok(1)
}

/// A `scan` line in the Redis view: `KEY ==> VALUE` for a string, `KEY ==> (hash, 3 fields)` for a collection;
/// `None` for an expired key.
fn redis_line(key: &[u8], stored: &[u8], now: u64, hex: bool) -> Option<Vec<u8>> {
    let mut line = shown(key, hex);
    line.extend_from_slice(b" ==> ");
    match rkeys::decode_meta(stored) {
        Ok(m) if m.expired(now) => return None,
        Ok(m) if m.typ == Type::String => {
            line.extend_from_slice(&shown(stored.get(m.payload_at..).unwrap_or_default(), hex));
        }
        Ok(m) => {
            let shown = match Coll::decode(stored) {
                Ok(c) => format!("({}, {})", m.typ.name(), size_words(m.typ, c.map_or(0, |c| c.size))),
                Err(e) => format!("({e})"),
            };
            line.extend_from_slice(shown.as_bytes());
        }
        Err(e) => line.extend_from_slice(format!("({e})").as_bytes()),
    }
    line.push(b'\n');
    Some(line)
}

/// `shaledb import-strings SRC DEST`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The plain database to read (opened read-only: nothing in it is created or changed).
    pub src: PathBuf,
    /// The server's directory to write: a new or empty directory.
    pub dest: PathBuf,
    /// Read this column family of SRC (default: the default family).
    #[arg(long, value_name = "NAME")]
    pub column_family: Option<String>,
    /// The Redis database (0-15, as SELECT) the strings go to.
    #[arg(long = "db", visible_alias = "redis-db", value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..16))]
    pub redis_db: u8,
}

/// Most bytes of keys and values one batch of `import-strings` holds.
const IMPORT_BATCH_BYTES: usize = 4 << 20;
/// Most records one batch of `import-strings` holds.
const IMPORT_BATCH_RECORDS: usize = 10_000;

/// Runs `shaledb import-strings`: every record of SRC's family becomes a Redis string (no expiry) of the same
/// name in database `--db` of a new server keyspace in DEST, written with the server's own encoding
/// (`shaledb_server::keys`) and its layout marker, in bounded batches; DEST is synced and closed at the end.
pub fn import_strings(args: ImportArgs) -> anyhow::Result<i32> {
    let (src, dest) = (&args.src, &args.dest);
    if dest.exists() {
        let mut entries =
            std::fs::read_dir(dest).with_context(|| format!("{} is not a directory to import into", dest.display()))?;
        if entries.next().is_some() {
            bail!("{} is not empty: import-strings writes into a new or empty directory", dest.display());
        }
    }
    let opts = Options { create_if_missing: false, ..recorded_options(src)? };
    let from = Db::open_read_only(src, opts).with_context(|| format!("opening {}", src.display()))?;
    if args.column_family.is_none() {
        let found = layout::check(&from).with_context(|| format!("reading {}", src.display()))?;
        if found.is_server() {
            bail!(
                "{} already holds a server keyspace (Redis keys): serve it with `shaledb server --dir {}`",
                src.display(),
                src.display()
            );
        }
    }
    let cf = family(&from, args.column_family.as_deref())?;
    let to = Db::open(dest, Options { create_if_missing: true, error_if_exists: true, ..Options::default() })
        .with_context(|| format!("creating {}", dest.display()))?;
    let partial = || format!("importing into {} (it holds a partial import: delete it and run again)", dest.display());
    let mut batch = WriteBatch::new();
    batch.put(layout::MARKER_KEY, layout::marker_value());
    let (mut count, mut records, mut bytes) = (0u64, 1usize, 0usize);
    let mut key = Vec::new();
    let mut it = from.cursor_cf_opt(&shaledb::ReadOptions { fill_cache: false, ..Default::default() }, &cf);
    it.seek_to_first();
    while it.valid() {
        rkeys::Keyspace::Ordered.meta_key_into(args.redis_db, it.key(), &mut key);
        let value = rkeys::encode_string(it.value(), None);
        bytes += key.len() + value.len();
        batch.put(&key, &value);
        records += 1;
        count += 1;
        if records >= IMPORT_BATCH_RECORDS || bytes >= IMPORT_BATCH_BYTES {
            to.write(&batch).with_context(partial)?;
            batch = WriteBatch::new();
            (records, bytes) = (0, 0);
        }
        it.next();
    }
    it.status().with_context(|| format!("reading {}", src.display()))?;
    drop(it);
    drop(cf);
    to.write_opt(&shaledb::WriteOptions { sync: true, ..Default::default() }, &batch).with_context(partial)?;
    close(to, dest)?;
    println!(
        "imported {count} keys from {} into {} as strings of Redis database {}; serve them with `shaledb server --dir {}`",
        src.display(),
        dest.display(),
        args.redis_db,
        dest.display()
    );
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
