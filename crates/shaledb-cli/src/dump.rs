//! `shaledb dump PATH`: prints what a ShaleDB file holds, in the spirit of RocksDB's `sst_dump` and `ldb`:
//!
//! - `NNNNNN.sst`: properties, the index (separator -> block), and the entries (user key, sequence, kind,
//!   value);
//! - `NNNNNN.log`: each record (offset, size), the write batch in it (sequence, count) and its updates;
//! - `MANIFEST-NNNNNN`: each version edit, then the LSM shape they add up to;
//! - a database directory: CURRENT, its MANIFEST, then the directory listing.
//!
//! Damage is printed where it is met (file and offset) and the dump goes on where the format allows; the
//! exit code is 1 when anything was damaged, also when the output's reader stops early (`| head`) after a
//! `DAMAGE` line reached it (a reader that went away before any is exit 0, as before).
//!
//! `--limit N` bounds every section (index entries, table entries, WAL records, MANIFEST edits, the files of
//! each level, the directory listing), each followed by a line counting what was left out;
//! `--properties-only` prints a table's properties (a WAL's or MANIFEST's totals) and nothing per entry;
//! `--from`/`--to` keep the user keys in `[from, to)`.

use shaledb_format::block::{BlockIter, KeyOrder};
use shaledb_format::edit::FileMeta;
use shaledb_format::filenames;
use shaledb_format::ikey::{self, ValueKind};
use shaledb_format::iter::InternalIterator;
use shaledb_format::log::Reader;
use shaledb_format::manifest::{self, EditRead, LiveFiles};
use shaledb_format::table::{BlockHandle, Table, TableReadOptions};
use shaledb_format::wal::{self, BatchRead};
use shaledb_format::Error;
use shaledb_vfs::{Fs, PosixFs, ReadHints};
use std::io::Write;
use std::path::Path;

/// Arguments of `shaledb dump`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A table (`NNNNNN.sst`), a WAL (`NNNNNN.log`), a MANIFEST (`MANIFEST-NNNNNN`) or a database directory.
    pub path: std::path::PathBuf,
    /// What the file is, when its name does not tell.
    #[arg(long, value_enum)]
    pub kind: Option<Kind>,
    /// Print at most this many lines in each section: index entries, entries, records, edits, the files of each
    /// level, the directory listing (0: all). What is left out is counted on a line of its own.
    #[arg(long, default_value_t = 0)]
    pub limit: usize,
    /// A table's properties only (with a WAL or MANIFEST: the totals, and a MANIFEST's LSM shape).
    #[arg(long)]
    pub properties_only: bool,
    /// Only user keys at or after this key (entries, index blocks, WAL updates, MANIFEST files overlapping).
    #[arg(long)]
    pub from: Option<String>,
    /// Only user keys before this key (exclusive).
    #[arg(long)]
    pub to: Option<String>,
    /// `--from` and `--to` are given in hexadecimal.
    #[arg(long)]
    pub hex: bool,
    /// Print keys only, not values.
    #[arg(long)]
    pub keys_only: bool,
    /// Read an SST's blocks without checking their checksums, to see what a damaged table still holds (like
    /// `sst_dump --verify_checksum=false`). The damage is still reported at the end and the exit code is 1.
    #[arg(long)]
    pub no_verify_checksums: bool,
}

/// The kinds of file `dump` reads.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An SST.
    Sst,
    /// A write-ahead log.
    Wal,
    /// A MANIFEST.
    Manifest,
}

/// How much to print.
#[derive(Clone, Debug, Default)]
pub struct DumpOptions {
    /// At most this many lines per section (0: all).
    pub limit: usize,
    /// Properties or totals only.
    pub properties_only: bool,
    /// User keys at or after this one only.
    pub from: Option<Vec<u8>>,
    /// User keys before this one only.
    pub to: Option<Vec<u8>>,
    /// Keys only.
    pub keys_only: bool,
    /// Skip the checksum checks while printing an SST (a full check still runs at the end).
    pub no_verify_checksums: bool,
}

impl DumpOptions {
    /// The `n`-th line (from 0) of a section is printed.
    fn shows(&self, n: usize) -> bool {
        self.limit == 0 || n < self.limit
    }

    /// A line counting what `--limit` left out of a section of `total` lines.
    fn more(&self, out: &mut dyn Write, indent: &str, total: usize, what: &str) -> std::io::Result<()> {
        if self.limit != 0 && total > self.limit {
            writeln!(out, "{indent}... {} more {what} (--limit {})", total - self.limit, self.limit)?;
        }
        Ok(())
    }

    /// `key` is in `[from, to)`.
    fn in_range(&self, key: &[u8]) -> bool {
        self.from.as_deref().is_none_or(|f| key >= f) && self.to.as_deref().is_none_or(|t| key < t)
    }

    /// The user-key range `[smallest, largest]` overlaps `[from, to)`.
    fn overlaps(&self, smallest: &[u8], largest: &[u8]) -> bool {
        self.from.as_deref().is_none_or(|f| largest >= f) && self.to.as_deref().is_none_or(|t| smallest < t)
    }
}

/// Runs `shaledb dump`; exit code 0, or 1 when damage was found.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let fs = PosixFs::new();
    let bound = |k: &Option<String>, flag| k.as_deref().map(|k| crate::keys::arg_bytes(k, args.hex, flag)).transpose();
    let opts = DumpOptions {
        limit: args.limit,
        properties_only: args.properties_only,
        from: bound(&args.from, "--from")?,
        to: bound(&args.to, "--to")?,
        keys_only: args.keys_only,
        no_verify_checksums: args.no_verify_checksums,
    };
    if std::fs::symlink_metadata(&args.path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        anyhow::bail!("{} does not exist", args.path.display());
    }
    let stdout = std::io::stdout();
    let mut out = Watched::new(stdout.lock());
    let result = if args.path.is_dir() {
        dump_dir(&fs, &args.path, &opts, &mut out)
    } else {
        let kind = match args.kind.or_else(|| kind_of(&args.path)) {
            Some(k) => k,
            None => {
                anyhow::bail!("cannot tell what {} is from its name; pass --kind sst|wal|manifest", args.path.display())
            }
        };
        dump_file(&fs, &args.path, kind, &opts, &mut out)
    }
    .and_then(|clean| Ok(out.flush().map(|()| clean)?));
    // Whatever the dump functions return, a DAMAGE (or ERROR) line that reached the output makes the exit 1.
    let reported = out.reported_damage;
    match result {
        Ok(clean) => Ok(if clean && !reported { 0 } else { 1 }),
        // `shaledb dump x.sst | head`: the reader went away, which is no problem of the file; damage the reader
        // was shown still is.
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) => {
            Ok(if reported { 1 } else { 0 })
        }
        Err(e) => Err(e),
    }
}

/// The output of `dump`, noting whether a line starting `DAMAGE ` or `ERROR ` went through it.
struct Watched<W: Write> {
    inner: W,
    /// The first bytes of the line being written (up to the length of the longest marker).
    line_start: Vec<u8>,
    reported_damage: bool,
}

impl<W: Write> Watched<W> {
    const MARKERS: [&'static [u8]; 2] = [b"DAMAGE ", b"ERROR "];

    fn new(inner: W) -> Self {
        Watched { inner, line_start: Vec::with_capacity(8), reported_damage: false }
    }
}

impl<W: Write> Write for Watched<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        for &b in buf.iter().take(n) {
            if b == b'\n' {
                self.line_start.clear();
            } else if self.line_start.len() < 7 {
                self.line_start.push(b);
                if Self::MARKERS.contains(&self.line_start.as_slice()) {
                    self.reported_damage = true;
                }
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The kind of a file, from its name: the engine's names (`shaledb_format::filenames`), and also copies renamed
/// by hand (any `*.sst`, `*.log` or `MANIFEST-*`).
pub fn kind_of(path: &Path) -> Option<Kind> {
    if path.file_name()?.to_str()?.starts_with(filenames::MANIFEST_PREFIX) {
        return Some(Kind::Manifest);
    }
    match path.extension()?.to_str()? {
        filenames::TABLE_EXT => Some(Kind::Sst),
        filenames::WAL_EXT => Some(Kind::Wal),
        _ => None,
    }
}

/// Dumps one file; returns false when damage was found.
pub fn dump_file(
    fs: &dyn Fs,
    path: &Path,
    kind: Kind,
    opts: &DumpOptions,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    match kind {
        Kind::Sst => dump_sst(fs, path, opts, out),
        Kind::Wal => dump_wal(fs, path, opts, out),
        Kind::Manifest => dump_manifest(fs, path, opts, out),
    }
}

/// Dumps CURRENT, the MANIFEST it names and the file listing of a database directory.
pub fn dump_dir(fs: &dyn Fs, dir: &Path, opts: &DumpOptions, out: &mut dyn Write) -> anyhow::Result<bool> {
    let current = fs.read_all(&filenames::current(dir))?;
    let name = String::from_utf8_lossy(&current);
    writeln!(out, "CURRENT: {}", name.trim_end_matches('\n'))?;
    let clean = if let Some(number) = filenames::manifest_in_current(&current) {
        dump_manifest(fs, &dir.join(filenames::manifest_name(number)), opts, out)?
    } else {
        writeln!(out, "DAMAGE CURRENT at offset 0: does not name a MANIFEST")?;
        false
    };
    if opts.properties_only {
        return Ok(clean);
    }
    writeln!(out, "files:")?;
    let names = fs.list(dir)?;
    for n in names.iter().take(if opts.limit == 0 { usize::MAX } else { opts.limit }) {
        let size = fs.file_size(&dir.join(n)).map_or_else(|e| e.to_string(), |s| format!("{s} bytes"));
        writeln!(out, "  {n}  {size}")?;
    }
    opts.more(out, "  ", names.len(), "files")?;
    Ok(clean)
}

/// Text when printable, else `0x` hex.
fn show(bytes: &[u8]) -> String {
    if !bytes.is_empty() && bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("'{}'", String::from_utf8_lossy(bytes))
    } else {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}")
    }
}

fn show_ikey(k: &[u8]) -> String {
    match ikey::parse(k) {
        // Index separators carry the largest sequence so that they sort before every entry of their key.
        Some(p) if p.seq == ikey::MAX_SEQUENCE => format!("{} @max", show(p.user_key)),
        Some(p) => format!("{} @{} {}", show(p.user_key), p.seq, kind_name(p.kind)),
        None => format!("{} (malformed internal key)", show(k)),
    }
}

fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Deletion => "DEL",
        ValueKind::Value => "PUT",
        ValueKind::Merge => "MERGE",
        ValueKind::SingleDeletion => "SINGLEDEL",
        // A batch record `[key, value)`: the value shown is the range's exclusive end.
        ValueKind::RangeDeletion => "RANGEDEL",
        ValueKind::BlobIndex => "BLOB",
    }
}

/// A table entry's value; a blob reference (kind `0x11`) shown decoded (docs/format/blob.md).
fn show_value(ikey_bytes: &[u8], value: &[u8]) -> String {
    if ikey::parse(ikey_bytes).is_some_and(|p| p.kind == ValueKind::BlobIndex) {
        return match shaledb_format::blob::BlobIndex::decode(value) {
            Some(b) => format!("blob #{} offset {} size {} {}", b.file_number, b.offset, b.size, b.compression),
            None => format!("{} (undecodable blob reference)", show(value)),
        };
    }
    show(value)
}

fn damage(out: &mut dyn Write, e: &Error, path: &Path) -> std::io::Result<()> {
    match e {
        Error::Corruption { file, offset, what } => {
            let file = if file.as_os_str().is_empty() { path } else { file.as_path() };
            writeln!(out, "DAMAGE {} at offset {offset}: {what}", file.display())
        }
        other => writeln!(out, "ERROR {}: {other}", path.display()),
    }
}

fn dump_sst(fs: &dyn Fs, path: &Path, opts: &DumpOptions, out: &mut dyn Write) -> anyhow::Result<bool> {
    let file = fs.open(path, ReadHints { sequential: true, ..ReadHints::default() })?;
    let len = file.len();
    writeln!(out, "table {} ({len} bytes)", path.display())?;
    let verify = !opts.no_verify_checksums;
    let table = match Table::open(file, &TableReadOptions { verify_checksums: verify, ..TableReadOptions::default() }) {
        Ok(t) => t,
        Err(e) => {
            damage(out, &e, path)?;
            return Ok(false);
        }
    };
    let p = table.properties();
    writeln!(out, "properties:")?;
    for (name, value) in [
        ("num_entries", p.num_entries.to_string()),
        ("num_deletions", p.num_deletions.to_string()),
        ("num_merges", p.num_merges.to_string()),
        ("num_data_blocks", p.num_data_blocks.to_string()),
        ("raw_key_size", p.raw_key_size.to_string()),
        ("raw_value_size", p.raw_value_size.to_string()),
        ("data_size", p.data_size.to_string()),
        ("index_size", p.index_size.to_string()),
        ("filter_size", p.filter_size.to_string()),
        ("compression", p.compression.name().to_string()),
        ("smallest_seq", p.smallest_seq.to_string()),
        ("largest_seq", p.largest_seq.to_string()),
        ("format_version", p.format_version.to_string()),
    ] {
        writeln!(out, "  {name}: {value}")?;
    }
    let mut clean = true;
    if opts.properties_only {
        if let Err(e) = table.verify() {
            damage(out, &e, path)?;
            clean = false;
        }
        return Ok(clean);
    }
    writeln!(out, "index:")?;
    match table.index() {
        Err(e) => {
            damage(out, &e, path)?;
            clean = false;
        }
        Ok((block, BlockHandle { offset, .. })) => {
            let mut it = BlockIter::new(block, KeyOrder::Internal);
            it.seek_to_first();
            // A block holds the keys up to its separator: the blocks in range run from the first whose
            // separator is at or after `from` to the first whose separator reaches `to`.
            let (mut n, mut past_to) = (0usize, false);
            while it.valid() && !past_to {
                let sep = ikey::parse(it.key()).map_or(it.key(), |p| p.user_key);
                if opts.from.as_deref().is_some_and(|f| sep < f) {
                    it.next();
                    continue;
                }
                past_to = opts.to.as_deref().is_some_and(|t| sep >= t);
                if opts.shows(n) {
                    let target = BlockHandle::decode_exact(it.value())
                        .map_or_else(|| "malformed handle".to_string(), |h| format!("block @{} +{}", h.offset, h.size));
                    writeln!(out, "  {} -> {target}", show_ikey(it.key()))?;
                }
                n += 1;
                it.next();
            }
            opts.more(out, "  ", n, "index entries")?;
            if let Err(e) = it.status() {
                damage(out, &e.in_file(path, offset), path)?;
                clean = false;
            }
        }
    }
    writeln!(out, "entries:")?;
    let mut it = table.iter(verify, false);
    match &opts.from {
        Some(f) => {
            let mut target = Vec::with_capacity(f.len() + ikey::TRAILER_LEN);
            ikey::append_internal_key(&mut target, f, ikey::MAX_SEQUENCE, ikey::KIND_FOR_SEEK);
            it.seek(&target);
        }
        None => it.seek_to_first(),
    }
    let mut n = 0usize;
    while it.valid() {
        let user_key = ikey::parse(it.key()).map_or(it.key(), |p| p.user_key);
        if opts.to.as_deref().is_some_and(|t| user_key >= t) {
            break;
        }
        if opts.shows(n) {
            if opts.keys_only {
                writeln!(out, "  {}", show_ikey(it.key()))?;
            } else {
                writeln!(out, "  {} => {}", show_ikey(it.key()), show_value(it.key(), it.value()))?;
            }
        }
        n += 1;
        it.next();
    }
    opts.more(out, "  ", n, "entries")?;
    if let Err(e) = it.status() {
        damage(out, &e, path)?;
        clean = false;
    }
    if table.has_range_tombstones() {
        writeln!(out, "range tombstones:")?;
        match table.range_tombstones() {
            Ok(ts) => {
                for t in &ts {
                    writeln!(out, "  [{} .. {}) @ {}", show(&t.begin), show(&t.end), t.seq)?;
                }
            }
            Err(e) => {
                damage(out, &e, path)?;
                clean = false;
            }
        }
    }
    if let Err(e) = table.verify() {
        damage(out, &e, path)?;
        clean = false;
    }
    let in_range = if opts.from.is_some() || opts.to.is_some() { " in range" } else { "" };
    writeln!(out, "{n} entries{in_range}")?;
    Ok(clean)
}

fn dump_wal(fs: &dyn Fs, path: &Path, opts: &DumpOptions, out: &mut dyn Write) -> anyhow::Result<bool> {
    let data = fs.read_all(path)?;
    writeln!(out, "WAL {} ({} bytes)", path.display(), data.len())?;
    let mut reader = Reader::new(data, path.to_path_buf());
    let mut clean = true;
    let (mut records, mut updates) = (0usize, 0u64);
    // Records printed (with `--from`/`--to`: those holding an update in range).
    let mut shown = 0usize;
    loop {
        match wal::next_batch(&mut reader) {
            BatchRead::Eof => break,
            BatchRead::Damage(d) => {
                writeln!(out, "DAMAGE {}", d.to_error(path))?;
                clean = false;
            }
            BatchRead::Undecodable { error, .. } => {
                records += 1;
                damage(out, &error, path)?;
                clean = false;
            }
            BatchRead::Marker { offset, marker } => {
                // Not a batch: not counted in the records and updates of the summary.
                if !opts.properties_only && opts.from.is_none() && opts.to.is_none() {
                    let text = match marker {
                        wal::WalMarker::Predecessor { number, length } => {
                            format!("WAL {number:06}.log was {length} bytes and unsynced when this one began")
                        }
                        wal::WalMarker::Synced { through } => format!("WALs through {through:06}.log synced"),
                    };
                    writeln!(out, "marker @{offset}: {text}")?;
                }
            }
            BatchRead::Batch { offset, size, batch } => {
                records += 1;
                updates += u64::from(batch.count());
                let in_range = (opts.from.is_none() && opts.to.is_none())
                    || batch.iter().any(|e| e.is_ok_and(|e| opts.in_range(e.key)));
                if !in_range || opts.properties_only {
                    continue;
                }
                shown += 1;
                if opts.shows(shown - 1) {
                    writeln!(
                        out,
                        "record @{offset} ({size} bytes): batch seq {} count {}",
                        batch.sequence(),
                        batch.count()
                    )?;
                    for (i, e) in batch.iter().enumerate() {
                        let Ok(e) = e else { break };
                        if !opts.in_range(e.key) {
                            continue;
                        }
                        let seq = batch.sequence() + i as u64;
                        let cf = if e.family == 0 { String::new() } else { format!("cf {} ", e.family) };
                        let kind = kind_name(e.kind);
                        match (e.kind, opts.keys_only) {
                            (ValueKind::Deletion | ValueKind::SingleDeletion, _) | (_, true) => {
                                writeln!(out, "  {cf}{kind} {} @{seq}", show(e.key))?
                            }
                            _ => writeln!(out, "  {cf}{kind} {} @{seq} => {}", show(e.key), show(e.value))?,
                        }
                    }
                }
            }
        }
    }
    opts.more(out, "", shown, "records")?;
    writeln!(out, "{records} records, {updates} updates, intact prefix {} bytes", reader.end_of_last_record())?;
    Ok(clean)
}

fn show_meta(f: &FileMeta) -> String {
    format!(
        "#{} {} bytes [{} .. {}] seq {}..{} entries {} deletions {}{}",
        f.number,
        f.file_size,
        show_ikey(&f.smallest),
        show_ikey(&f.largest),
        f.smallest_seq,
        f.largest_seq,
        f.num_entries,
        f.num_deletions,
        if f.num_range_deletions > 0 { format!(" range deletions {}", f.num_range_deletions) } else { String::new() }
    )
}

fn dump_manifest(fs: &dyn Fs, path: &Path, opts: &DumpOptions, out: &mut dyn Write) -> anyhow::Result<bool> {
    let data = fs.read_all(path)?;
    writeln!(out, "MANIFEST {} ({} bytes)", path.display(), data.len())?;
    let mut reader = Reader::new(data, path.to_path_buf());
    let mut clean = true;
    let mut live = LiveFiles::default();
    let mut n = 0usize;
    loop {
        match manifest::next_edit(&mut reader) {
            EditRead::Eof => break,
            EditRead::Damage(d) => {
                writeln!(out, "DAMAGE {}", d.to_error(path))?;
                clean = false;
            }
            EditRead::Undecodable(e) => {
                n += 1;
                damage(out, &e, path)?;
                clean = false;
            }
            EditRead::Edit { offset, edit } => {
                n += 1;
                let show_edit = !opts.properties_only && opts.shows(n - 1);
                if show_edit {
                    writeln!(out, "edit {n} @{offset}:")?;
                    for (name, v) in [
                        ("comparator", edit.comparator.clone()),
                        ("format_version", edit.format_version.map(|v| v.to_string())),
                        ("log_number", edit.log_number.map(|v| v.to_string())),
                        ("next_file_number", edit.next_file_number.map(|v| v.to_string())),
                        ("last_sequence", edit.last_sequence.map(|v| v.to_string())),
                        ("column_family", edit.family.map(|v| v.to_string())),
                        ("add_column_family", edit.family_add.clone()),
                        ("drop_column_family", edit.family_drop.then(|| "yes".to_string())),
                        ("max_column_family", edit.max_family.map(|v| v.to_string())),
                    ] {
                        if let Some(v) = v {
                            writeln!(out, "  {name}: {v}")?;
                        }
                    }
                }
                if show_edit {
                    for (level, number) in &edit.deleted_files {
                        writeln!(out, "  delete L{level} #{number}")?;
                    }
                    for (level, meta) in &edit.new_files {
                        if opts.overlaps(meta.smallest_user_key(), meta.largest_user_key()) {
                            writeln!(out, "  add L{level} {}", show_meta(meta))?;
                        }
                    }
                    for b in &edit.blob_files {
                        let (n, c, r, f) = (b.number, b.record_count, b.record_bytes, b.file_size);
                        writeln!(out, "  add blob #{n} {f} bytes, {c} records of {r} bytes")?;
                    }
                    for g in &edit.blob_garbage {
                        writeln!(
                            out,
                            "  garbage blob #{} {} records of {} bytes",
                            g.number, g.record_count, g.record_bytes
                        )?;
                    }
                }
                for problem in live.apply(&edit) {
                    writeln!(out, "DAMAGE {} at offset {offset}: {problem}", path.display())?;
                    clean = false;
                }
            }
        }
    }
    if !opts.properties_only {
        opts.more(out, "", n, "edits")?;
    }
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    writeln!(
        out,
        "{n} edits; log number {}, next file {}, last sequence {}",
        opt(live.log_number),
        opt(live.next_file_number),
        opt(live.last_sequence)
    )?;
    writeln!(out, "LSM shape:")?;
    show_family_shape(out, opts, &live.levels, &live.blob_files, "  ")?;
    for (id, f) in &live.families {
        writeln!(out, "  column family {id} ({:?}), log number {}:", f.name, opt(f.log_number))?;
        show_family_shape(out, opts, &f.levels, &f.blob_files, "    ")?;
    }
    Ok(clean)
}

/// The blob files and levels of one column family, each line indented by `pad`.
fn show_family_shape(
    out: &mut dyn Write,
    opts: &DumpOptions,
    levels: &std::collections::BTreeMap<u32, std::collections::BTreeMap<u64, FileMeta>>,
    blob_files: &std::collections::BTreeMap<u64, shaledb_format::blob::BlobFileMeta>,
    pad: &str,
) -> std::io::Result<()> {
    for m in blob_files.values() {
        let (n, size, c) = (m.addition.number, m.addition.file_size, m.addition.record_count);
        writeln!(
            out,
            "{pad}blob #{n}: {size} bytes, {c} records, {} garbage ({} bytes)",
            m.garbage_count, m.garbage_bytes
        )?;
    }
    for (level, files) in levels.iter().filter(|(_, f)| !f.is_empty()) {
        let bytes: u64 = files.values().map(|f| f.file_size).sum();
        writeln!(out, "{pad}L{level}: {} files, {bytes} bytes", files.len())?;
        if opts.properties_only {
            continue;
        }
        let in_range: Vec<&FileMeta> =
            files.values().filter(|f| opts.overlaps(f.smallest_user_key(), f.largest_user_key())).collect();
        for f in in_range.iter().take(if opts.limit == 0 { usize::MAX } else { opts.limit }) {
            writeln!(out, "{pad}  {}", show_meta(f))?;
        }
        opts.more(out, &format!("{pad}  "), in_range.len(), "files")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shaledb::{Db, Options, WriteBatch};
    use shaledb_vfs::MemFs;
    use std::sync::Arc;

    fn dir() -> &'static Path {
        Path::new("/db")
    }

    /// Two flushed tables, then a batch, a delete and a merge left in the WAL; the state after a kill.
    fn fixture() -> MemFs {
        let fs = MemFs::new();
        let opts = Options {
            fs: Arc::new(fs.clone()),
            write_buffer_size: 1 << 20,
            block_size: 256,
            disable_auto_compactions: true,
            merge_operator: shaledb::merge::builtin("stringappend"),
            ..Options::default()
        };
        let db = Db::open(dir(), opts).unwrap();
        for round in 0..2 {
            for i in 0..30 {
                db.put(format!("key{:03}", i * 2 + round).as_bytes(), format!("v{i}").as_bytes()).unwrap();
            }
            db.flush().unwrap();
        }
        let mut b = WriteBatch::new();
        b.put(b"batch-a", b"1").put(b"batch-b", [0, 1, 2]);
        db.write(&b).unwrap();
        db.delete(b"key000").unwrap();
        db.merge(b"key001", b"more").unwrap();
        let killed = fs.deep_clone();
        drop(db);
        killed
    }

    /// The fixture's live WAL: the newest `.log`. A WAL that the fixture's last flush made obsolete may still be
    /// there, since it is deleted after the flush returns (`drop_obsolete_closed_wals`).
    fn live_wal(fs: &MemFs) -> std::path::PathBuf {
        let names: Vec<String> = fs.file_names(dir()).into_iter().filter(|n| n.ends_with(".log")).collect();
        dir().join(names.last().expect("no .log file"))
    }

    fn file(fs: &MemFs, suffix: &str) -> std::path::PathBuf {
        let names: Vec<String> = fs.file_names(dir()).into_iter().filter(|n| n.contains(suffix)).collect();
        dir().join(names.first().unwrap_or_else(|| panic!("no {suffix} file")))
    }

    fn dump(fs: &MemFs, path: &Path, kind: Kind, opts: DumpOptions) -> (bool, String) {
        let mut out = Vec::new();
        let clean = dump_file(fs, path, kind, &opts, &mut out).unwrap();
        (clean, String::from_utf8(out).unwrap())
    }

    #[test]
    fn kind_is_read_from_the_name() {
        assert_eq!(kind_of(Path::new("/x/000012.sst")), Some(Kind::Sst));
        assert_eq!(kind_of(Path::new("000013.log")), Some(Kind::Wal));
        assert_eq!(kind_of(Path::new("MANIFEST-000004")), Some(Kind::Manifest));
        assert_eq!(kind_of(Path::new("CURRENT")), None);
    }

    #[test]
    fn sst_dump_shows_properties_index_and_entries() {
        let fs = fixture();
        let (clean, text) = dump(&fs, &file(&fs, ".sst"), Kind::Sst, DumpOptions::default());
        assert!(clean, "{text}");
        assert!(text.contains("num_entries: 30"), "{text}");
        assert!(text.contains("compression: "), "{text}");
        assert!(text.contains("index:\n  "), "{text}");
        assert!(text.contains(" -> block @0 +"), "{text}");
        assert!(text.contains("'key000' @1 PUT => 'v0'"), "{text}");
        assert!(text.ends_with("30 entries\n"), "{text}");
        let (_, keys) = dump(
            &fs,
            &file(&fs, ".sst"),
            Kind::Sst,
            DumpOptions { limit: 2, keys_only: true, ..DumpOptions::default() },
        );
        assert!(keys.contains("'key000' @1 PUT\n"), "{keys}");
        assert!(!keys.contains("'key004'"), "limit 2: {keys}");
    }

    /// Issue 10: `--limit 1` printed 28,804 index lines of a 68 MB table.
    #[test]
    fn limit_bounds_every_section_and_counts_what_it_left_out() {
        let fs = fixture();
        let sst = file(&fs, ".sst");
        let (_, all) = dump(&fs, &sst, Kind::Sst, DumpOptions::default());
        let index_lines = all.split("index:\n").nth(1).unwrap().split("entries:").next().unwrap().lines().count();
        assert!(index_lines >= 2, "the fixture's table needs several blocks: {all}");
        let (clean, text) = dump(&fs, &sst, Kind::Sst, DumpOptions { limit: 1, ..DumpOptions::default() });
        assert!(clean, "{text}");
        let index = text.split("index:\n").nth(1).unwrap().split("entries:").next().unwrap();
        assert_eq!(index.lines().count(), 2, "{index}");
        assert!(index.ends_with(&format!("  ... {} more index entries (--limit 1)\n", index_lines - 1)), "{index}");
        assert!(text.contains("  ... 29 more entries (--limit 1)\n30 entries\n"), "{text}");

        let (_, wal) = dump(&fs, &live_wal(&fs), Kind::Wal, DumpOptions { limit: 1, ..DumpOptions::default() });
        assert_eq!(wal.matches("record @").count(), 1, "{wal}");
        assert!(wal.contains("... 2 more records (--limit 1)\n3 records"), "{wal}");

        let m = file(&fs, "MANIFEST-");
        let (_, text) = dump(&fs, &m, Kind::Manifest, DumpOptions { limit: 1, ..DumpOptions::default() });
        assert_eq!(text.matches("edit ").count(), 1, "{text}");
        assert!(text.contains(" more edits (--limit 1)"), "{text}");
        assert!(text.contains("  L0: 2 files") && text.contains("    ... 1 more files (--limit 1)"), "{text}");

        let mut out = Vec::new();
        dump_dir(&fs, dir(), &DumpOptions { limit: 1, ..DumpOptions::default() }, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let listing = text.split("files:\n").nth(1).unwrap();
        assert_eq!(listing.lines().count(), 2, "{listing}");
        assert!(listing.contains(" more files (--limit 1)"), "{listing}");
    }

    #[test]
    fn properties_only_prints_no_entry() {
        let fs = fixture();
        let opts = DumpOptions { properties_only: true, ..DumpOptions::default() };
        let (clean, text) = dump(&fs, &file(&fs, ".sst"), Kind::Sst, opts.clone());
        assert!(clean, "{text}");
        assert!(text.contains("num_entries: 30"), "{text}");
        assert!(!text.contains("index:") && !text.contains("\nentries:") && !text.contains("=>"), "{text}");
        let (_, wal) = dump(&fs, &live_wal(&fs), Kind::Wal, opts.clone());
        assert_eq!(wal.lines().count(), 2, "{wal}");
        assert!(wal.contains("3 records, 4 updates"), "{wal}");
        let (_, m) = dump(&fs, &file(&fs, "MANIFEST-"), Kind::Manifest, opts);
        assert!(!m.contains("edit ") && !m.contains("    #"), "{m}");
        assert!(m.contains("LSM shape:\n  L0: 2 files"), "{m}");
    }

    #[test]
    fn a_key_range_keeps_the_entries_updates_and_files_in_it() {
        let fs = fixture();
        let range =
            DumpOptions { from: Some(b"key010".to_vec()), to: Some(b"key014".to_vec()), ..DumpOptions::default() };
        let (clean, text) = dump(&fs, &file(&fs, ".sst"), Kind::Sst, range.clone());
        assert!(clean, "{text}");
        let entries = text.split("entries:\n").nth(1).unwrap();
        assert_eq!(entries, "  'key010' @6 PUT => 'v5'\n  'key012' @7 PUT => 'v6'\n2 entries in range\n", "{text}");
        let index = text.split("index:\n").nth(1).unwrap().split("entries:").next().unwrap();
        let (_, all) = dump(&fs, &file(&fs, ".sst"), Kind::Sst, DumpOptions::default());
        let all_index = all.split("index:\n").nth(1).unwrap().split("entries:").next().unwrap();
        assert!(!index.is_empty() && index.lines().count() < all_index.lines().count(), "{index}");

        let wal_range = DumpOptions { from: Some(b"key".to_vec()), ..DumpOptions::default() };
        let (_, wal) = dump(&fs, &live_wal(&fs), Kind::Wal, wal_range);
        assert!(!wal.contains("batch-a") && wal.contains("DEL 'key000'"), "{wal}");
        assert_eq!(wal.matches("record @").count(), 2, "{wal}");

        let (_, m) = dump(
            &fs,
            &file(&fs, "MANIFEST-"),
            Kind::Manifest,
            DumpOptions { from: Some(b"zzz".to_vec()), ..DumpOptions::default() },
        );
        assert!(!m.contains("add L0") && !m.contains("    #"), "no table holds keys from zzz: {m}");
    }

    #[test]
    fn wal_dump_shows_batches_with_sequences() {
        let fs = fixture();
        let (clean, text) = dump(&fs, &live_wal(&fs), Kind::Wal, DumpOptions::default());
        assert!(clean, "{text}");
        assert!(text.contains("batch seq 61 count 2"), "{text}");
        assert!(text.contains("PUT 'batch-b' @62 => 0x000102"), "{text}");
        assert!(text.contains("DEL 'key000' @63"), "{text}");
        assert!(text.contains("MERGE 'key001' @64 => 'more'"), "{text}");
        assert!(text.contains("3 records, 4 updates"), "{text}");
        // The fixture's flush left its older WAL unsynced: this one begins with the marker naming it.
        assert!(text.contains("marker @0: WAL 0") && text.contains("unsynced when this one began"), "{text}");
    }

    #[test]
    fn manifest_dump_shows_edits_and_shape() {
        let fs = fixture();
        let (clean, text) = dump(&fs, &file(&fs, "MANIFEST-"), Kind::Manifest, DumpOptions::default());
        assert!(clean, "{text}");
        assert!(text.contains("comparator: shaledb.bytewise"), "{text}");
        assert!(text.contains("  add L0 #"), "{text}");
        assert!(text.contains("LSM shape:\n  L0: 2 files"), "{text}");
    }

    #[test]
    fn directory_dump_follows_current() {
        let fs = fixture();
        let mut out = Vec::new();
        assert!(dump_dir(&fs, dir(), &DumpOptions::default(), &mut out).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("CURRENT: MANIFEST-"), "{text}");
        assert!(text.contains("files:\n"), "{text}");
    }

    #[test]
    fn damage_is_reported_with_file_and_offset_and_makes_the_dump_unclean() {
        let fs = fixture();
        let wal = live_wal(&fs);
        let data = fs.read_file(&wal).unwrap();
        fs.write_file(&wal, &data[..data.len() - 2]);
        let (clean, text) = dump(&fs, &wal, Kind::Wal, DumpOptions::default());
        assert!(!clean);
        assert!(text.contains("DAMAGE corruption in /db/"), "{text}");
        assert!(text.contains("2 records"), "the intact records are still shown: {text}");

        let sst = file(&fs, ".sst");
        let mut data = fs.read_file(&sst).unwrap();
        data[10] ^= 0xff;
        fs.write_file(&sst, &data);
        let (clean, text) = dump(&fs, &sst, Kind::Sst, DumpOptions::default());
        assert!(!clean);
        assert!(text.contains("DAMAGE /db/") && text.contains("at offset 0"), "{text}");

        let manifest = file(&fs, "MANIFEST-");
        let mut data = fs.read_file(&manifest).unwrap();
        data[3] ^= 0x01;
        fs.write_file(&manifest, &data);
        let (clean, text) = dump(&fs, &manifest, Kind::Manifest, DumpOptions::default());
        assert!(!clean);
        assert!(text.contains("at offset 0"), "{text}");
    }

    #[test]
    fn no_verify_checksums_shows_what_a_damaged_table_holds_and_still_reports_the_damage() {
        let fs = fixture();
        let sst = file(&fs, ".sst");
        let (_, text) = dump(&fs, &sst, Kind::Sst, DumpOptions::default());
        // The first data block is at offset 0; its stored crc follows its contents and the compression byte.
        let size: usize =
            text.split(" -> block @0 +").nth(1).and_then(|t| t.split('\n').next()).unwrap().parse().unwrap();
        let mut data = fs.read_file(&sst).unwrap();
        data[size + 1] ^= 0x01;
        fs.write_file(&sst, &data);

        let (clean, checked) = dump(&fs, &sst, Kind::Sst, DumpOptions::default());
        assert!(!clean);
        assert!(checked.contains("block checksum mismatch"), "{checked}");
        assert!(!checked.contains("'key000' @1 PUT"), "the damaged block is not shown when checking: {checked}");

        let opts = DumpOptions { no_verify_checksums: true, ..DumpOptions::default() };
        let (clean, unchecked) = dump(&fs, &sst, Kind::Sst, opts);
        assert!(!clean, "the damage is still reported: {unchecked}");
        assert!(unchecked.contains("'key000' @1 PUT => 'v0'"), "{unchecked}");
        assert!(unchecked.contains("block checksum mismatch") && unchecked.ends_with("30 entries\n"), "{unchecked}");
    }

    #[test]
    fn a_damage_or_error_line_is_noticed_however_the_writes_split_it() {
        let mut w = Watched::new(Vec::new());
        w.write_all(b"table x.sst (5 bytes)\n  key DAMAGE in a value\nDAM").unwrap();
        assert!(!w.reported_damage, "DAMAGE not at a line start, or not yet whole");
        w.write_all(b"AGE x.sst at offset 0: too short\n").unwrap();
        assert!(w.reported_damage);
        let mut w = Watched::new(Vec::new());
        writeln!(w, "ERROR x.sst: I/O error").unwrap();
        assert!(w.reported_damage);
        let mut w = Watched::new(Vec::new());
        writeln!(w, "DAMAGED goods are not a marker\nERRORS neither").unwrap();
        assert!(!w.reported_damage);
    }
}
