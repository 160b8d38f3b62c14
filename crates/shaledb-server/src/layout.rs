//! Which view of the engine a database holds: a server keyspace (the grammar of [`crate::keys`]) or plain
//! engine records (`shaledb put`, the engine API). docs/format/server-keys.md, "The layout marker".
//!
//! ```text
//! layout_key    := 0xff "shaledb-server-layout"         one record, outside every database's range
//! layout_value  := version:decimal (" slots")?          the keyspace format version (ASCII), now "2";
//!                                                         " slots": a cluster member's, keys slot first
//! ```
//!
//! The server writes the marker (synced) when it creates a database or opens an empty one, so a server's
//! database says so itself, even when it holds no key. Its first byte, 0xff, is above every `db` byte (0..=15),
//! so no command of the server sees it: SCAN, KEYS, DBSIZE, RANDOMKEY, FLUSHDB and FLUSHALL, the expiry sweep,
//! the collector's registry pass and the version count at start all read or delete `[db] .. [db + 1)` ranges
//! only.
//!
//! A database without the marker is judged by [`check`]: a server database from before the marker parses as
//! the grammar record by record (and is adopted: the server writes the marker); anything else is plain, and the
//! server refuses it, naming `shaledb import-strings`. The check reads the whole keyspace when it has at most
//! [`SAMPLE`] records, else the first and the last [`SAMPLE`]; it stops at the first record that does not parse,
//! which for a plain database is almost always the first.

use crate::keys::{self, Coll, Keyspace, Type, DATABASES, KIND_MEMBER, KIND_META, KIND_REGISTRY};
use shaledb::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use std::fmt;
use std::path::Path;

/// The engine key of the layout marker.
pub const MARKER_KEY: &[u8] = b"\xffshaledb-server-layout";

/// The keyspace format version the marker records (bumped on any change of the grammar in `keys.rs`).
pub const KEYSPACE_VERSION: u32 = 2;

/// The previous keyspace format version, which the server converts at start (lists held one record per
/// element: [`crate::types::list::upgrade`]).
pub const CONVERTIBLE_VERSION: u32 = 1;

/// Records read from each end of a database without the marker before it is judged a server keyspace.
pub const SAMPLE: usize = 10_000;

/// Records counted (past the first that does not parse) for the message about a plain database; beyond, the
/// engine's estimate is given.
const COUNT_LIMIT: u64 = 1_000_000;

/// The value of the marker record of a standalone server's keyspace.
pub fn marker_value() -> Vec<u8> {
    marker_value_of(Keyspace::Ordered)
}

/// The value of the marker record of a keyspace ordered as `ks`: the version, then ` slots` for a cluster
/// member's.
pub fn marker_value_of(ks: Keyspace) -> Vec<u8> {
    match ks.marker_word() {
        None => KEYSPACE_VERSION.to_string().into_bytes(),
        Some(w) => format!("{KEYSPACE_VERSION} {w}").into_bytes(),
    }
}

/// Parses a marker's value: the version (`None` when it is not a number, or the word after it is unknown)
/// and the keyspace's order.
fn parse_marker(v: &[u8]) -> (Option<u32>, Keyspace) {
    let Ok(text) = std::str::from_utf8(v) else { return (None, Keyspace::Ordered) };
    let mut words = text.split_whitespace();
    let version = words.next().and_then(|w| w.parse().ok());
    match (words.next(), words.next()) {
        (None, _) => (version, Keyspace::Ordered),
        (Some(w), None) if Some(w) == Keyspace::Slots.marker_word() => (version, Keyspace::Slots),
        _ => (None, Keyspace::Ordered),
    }
}

/// How many records a database holds, exactly or as the engine estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Records {
    Exact(u64),
    About(u64),
}

impl fmt::Display for Records {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Records::Exact(1) => write!(f, "1 record"),
            Records::Exact(n) => write!(f, "{n} records"),
            Records::About(n) => write!(f, "about {n} records"),
        }
    }
}

/// What a database holds (its default column family).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// Not a single record: a new database.
    Empty,
    /// The marker is there: a server keyspace. `version` is `None` when the marker's value is not a number;
    /// `keyspace` says how its keys are ordered (a standalone server's, or a cluster member's).
    Marked { version: Option<u32>, keyspace: Keyspace },
    /// No marker, and every record examined follows the server's grammar: a server database from before the
    /// marker.
    Unmarked { records: Records },
    /// Records that do not follow the grammar (`example` is the first such key): a plain database.
    Plain { records: Records, example: Vec<u8> },
}

impl Layout {
    /// True for a database the server may serve (and the key tools show as Redis keys): marked, or a server
    /// keyspace from before the marker.
    pub fn is_server(&self) -> bool {
        matches!(self, Layout::Marked { .. } | Layout::Unmarked { .. })
    }
}

/// True when the engine record `key -> value` follows the server's grammar (`keys.rs`): a meta record whose
/// value decodes (a string, or a collection with its whole header), a member record with its version and
/// sub-kind, or a registry record. The marker itself is not a keyspace record and answers false.
pub fn record_fits(key: &[u8], value: &[u8]) -> bool {
    let (Some(&db), Some(&kind)) = (key.first(), key.get(1)) else { return false };
    if db >= DATABASES {
        return false;
    }
    match kind {
        KIND_META => match keys::decode_meta(value) {
            Ok(m) if m.typ == Type::String => true,
            Ok(_) => matches!(Coll::decode(value), Ok(Some(_))),
            Err(_) => false,
        },
        KIND_MEMBER => key.len() >= 11,
        KIND_REGISTRY => key.len() == 10,
        _ => false,
    }
}

/// Judges what `db` holds: the marker, else its records (see the module's comment for the bounds).
pub fn check(db: &Db) -> shaledb::Result<Layout> {
    if let Some(v) = db.get(MARKER_KEY)? {
        let (version, keyspace) = parse_marker(&v);
        return Ok(Layout::Marked { version, keyspace });
    }
    let opts = ReadOptions { fill_cache: false, ..ReadOptions::default() };
    let mut it = db.cursor_opt(&opts);
    it.seek_to_first();
    let mut seen = 0u64;
    while it.valid() && seen < SAMPLE as u64 {
        if !record_fits(it.key(), it.value()) {
            let example = it.key().to_vec();
            return Ok(Layout::Plain { records: count_from(db, it, seen)?, example });
        }
        seen += 1;
        it.next();
    }
    it.status()?;
    if !it.valid() {
        return Ok(if seen == 0 { Layout::Empty } else { Layout::Unmarked { records: Records::Exact(seen) } });
    }
    // The first record the forward walk did not examine: the backward walk stops before passing it.
    let unexamined = it.key().to_vec();
    drop(it);
    // More than SAMPLE records: the last SAMPLE as well (a plain database's keys may all sort after a few
    // that happen to parse).
    let mut it = db.cursor_opt(&opts);
    it.seek_to_last();
    let mut back = 0usize;
    while it.valid() && back < SAMPLE && it.key() >= unexamined.as_slice() {
        if !record_fits(it.key(), it.value()) {
            let example = it.key().to_vec();
            return Ok(Layout::Plain { records: estimate(db, seen + back as u64 + 1), example });
        }
        back += 1;
        it.prev();
    }
    it.status()?;
    Ok(Layout::Unmarked { records: estimate(db, seen + back as u64) })
}

/// Counts on from a cursor at record number `seen` (0-based) up to [`COUNT_LIMIT`].
fn count_from(db: &Db, mut it: shaledb::Cursor, seen: u64) -> shaledb::Result<Records> {
    let mut n = seen;
    while it.valid() && n < COUNT_LIMIT {
        n += 1;
        it.next();
    }
    it.status()?;
    Ok(if it.valid() { estimate(db, n) } else { Records::Exact(n) })
}

/// The engine's estimate of the records, at least `floor` (the records actually read).
fn estimate(db: &Db, floor: u64) -> Records {
    Records::About(db.property_int("rocksdb.estimate-num-keys").unwrap_or(0).max(floor))
}

/// Writes the marker, synced (as a write under `appendfsync always`).
pub fn write_marker(db: &Db) -> shaledb::Result<()> {
    let mut batch = WriteBatch::new();
    batch.put(MARKER_KEY, marker_value());
    db.write_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, &batch)
}

/// Why the server will not serve a database of this layout, or `None` when it may.
pub fn refusal(dir: &Path, layout: &Layout) -> Option<String> {
    let dir = dir.display();
    match layout {
        Layout::Plain { records, .. } => Some(format!(
            "{dir} holds keys written by `shaledb put` or the engine API, not a server keyspace ({records}); to \
             serve them as Redis strings run `shaledb import-strings {dir} NEWDIR` and then `shaledb server --dir \
             NEWDIR`"
        )),
        Layout::Marked { version: Some(v), .. } if *v == KEYSPACE_VERSION || *v == CONVERTIBLE_VERSION => None,
        Layout::Marked { version: Some(v), .. } => Some(format!(
            "{dir} holds a server keyspace of format version {v}; this shaledb reads version {KEYSPACE_VERSION} \
             (and converts version {CONVERTIBLE_VERSION} when it starts)"
        )),
        Layout::Marked { version: None, .. } => {
            Some(format!("{dir} holds a damaged server layout marker (not a version number)"))
        }
        Layout::Empty | Layout::Unmarked { .. } => None,
    }
}

/// A standalone server will not serve a cluster member's keyspace (its keys are stored slot first).
fn cluster_keyspace_refusal(dir: &Path, layout: &Layout) -> Option<String> {
    matches!(layout, Layout::Marked { keyspace: Keyspace::Slots, .. }).then(|| {
        format!(
            "{} holds a cluster member's keyspace (keys stored by hash slot); a standalone server reads keys stored \
             in key order: serve it as the member it is (--cluster-enabled yes, in its own directory)",
            dir.display()
        )
    })
}

/// A replica group member's state machine (`sm/` under its directory) at start: `Ok(true)` when it holds the
/// marker of a cluster member's keyspace, `Ok(false)` when it holds nothing of a keyspace yet (the first
/// leader writes the marker through the log), and `Err` when it holds keys stored otherwise: a member created
/// by a build from before keys were stored slot first, or a standalone server's records.
pub fn check_member(db: &Db, dir: &Path) -> Result<bool, String> {
    let read = |e: shaledb::Error| format!("reading the state machine in {}: {e}", dir.display());
    match db.get(MARKER_KEY).map_err(read)? {
        Some(v) => match parse_marker(&v) {
            (Some(KEYSPACE_VERSION), Keyspace::Slots) => Ok(true),
            _ => Err(format!(
                "{} holds a keyspace marked {:?}, not a cluster member's (\"{}\")",
                dir.display(),
                String::from_utf8_lossy(&v),
                String::from_utf8_lossy(&marker_value_of(Keyspace::Slots))
            )),
        },
        None => {
            let mut it = db.cursor_opt(&ReadOptions {
                iterate_lower_bound: Some(vec![0]),
                iterate_upper_bound: Some(vec![DATABASES]),
                fill_cache: false,
                ..ReadOptions::default()
            });
            it.seek_to_first();
            let found = it.valid();
            it.status().map_err(read)?;
            if found {
                return Err(format!(
                    "{} holds keys of a replica group member written before keys were stored by hash slot (a build \
                     from before 2026-11-30); this build cannot read them: start the group afresh in empty \
                     directories and load the keys again (`shaledb cluster import`)",
                    dir.display()
                ));
            }
            Ok(false)
        }
    }
}

/// Before the server opens `dir` for writing: when it holds a database, reads it with a read-only open (which
/// creates and changes nothing) and refuses one the server cannot serve. A directory without a database
/// passes (the server creates one).
pub fn check_before_open(dir: &Path, opts: &Options) -> Result<(), String> {
    if !dir.join("CURRENT").exists() {
        return Ok(());
    }
    let ro = Options { create_if_missing: false, ..opts.clone() };
    let db = Db::open_read_only(dir, ro).map_err(|e| format!("opening the database in {}: {e}", dir.display()))?;
    let layout = check(&db).map_err(|e| format!("reading the database in {}: {e}", dir.display()))?;
    drop(db);
    if let Some(why) = refusal(dir, &layout).or_else(|| cluster_keyspace_refusal(dir, &layout)) {
        return Err(why);
    }
    // The server keeps its keyspace in the default family only: a database without the marker whose other
    // families hold data (the engine API, `shaledb create-column-family`) is plain even when its default
    // family is empty or looks like a keyspace.
    if !matches!(layout, Layout::Marked { .. }) {
        let families = Db::list_column_families(dir, opts.clone())
            .map_err(|e| format!("reading the column families of {}: {e}", dir.display()))?;
        let others: Vec<&str> = families.iter().map(String::as_str).filter(|f| *f != "default").collect();
        if !others.is_empty() {
            return Err(format!(
                "{} holds column families written by the engine API or `shaledb create-column-family` ({}), not \
                 a server keyspace; to serve one as Redis strings run `shaledb import-strings {} NEWDIR \
                 --column-family NAME` and then `shaledb server --dir NEWDIR`",
                dir.display(),
                others.join(", "),
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Right after the server opened `dir` for writing: writes the marker into a new or empty database, adopts a
/// server database from before the marker (writes it, and says so once on stderr), and refuses anything else
/// (a database written meanwhile by someone else).
pub fn mark_on_open(db: &Db, dir: &Path) -> Result<(), String> {
    let layout = check(db).map_err(|e| format!("reading the database in {}: {e}", dir.display()))?;
    if let Some(why) = refusal(dir, &layout).or_else(|| cluster_keyspace_refusal(dir, &layout)) {
        return Err(why);
    }
    let write = |db: &Db| write_marker(db).map_err(|e| format!("writing the layout marker in {}: {e}", dir.display()));
    match layout {
        Layout::Empty => write(db),
        Layout::Unmarked { records } => {
            upgrade(db, dir)?;
            write(db)?;
            eprintln!(
                "# {} holds a server keyspace written before the layout marker ({records}): adopted (marker \
                 written)",
                dir.display()
            );
            Ok(())
        }
        Layout::Marked { version: Some(CONVERTIBLE_VERSION), .. } => {
            upgrade(db, dir)?;
            write(db)
        }
        _ => Ok(()),
    }
}

/// Converts a keyspace of format version 1 to the current one (its lists to nodes), saying so on stderr at
/// the start and the end. Safe to cut short at any point: the next start resumes (`types/list/upgrade.rs`).
/// The caller writes the marker afterwards.
pub fn upgrade(db: &Db, dir: &Path) -> Result<(), String> {
    eprintln!(
        "# {}: converting the lists of keyspace format version {CONVERTIBLE_VERSION} to version {KEYSPACE_VERSION} \
         (nodes of 32 elements) before serving",
        dir.display()
    );
    let done = crate::types::list::upgrade::convert_lists(db, None).map_err(|why| {
        format!("converting the lists in {} to format version {KEYSPACE_VERSION}: {why}", dir.display())
    })?;
    eprintln!(
        "# {}: converted {} lists ({} elements) in {} synced batches",
        dir.display(),
        done.lists,
        done.elements,
        done.batches
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{encode_string, member_key, meta_key, registry_key, SUB_MEMBER};

    fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() }).unwrap();
        (dir, db)
    }

    /// The records of a small server keyspace: strings with and without expiry, a hash with its member and
    /// registry records, in databases 0 and 3.
    fn server_records(db: &Db) {
        db.put(meta_key(0, b"s"), encode_string(b"v", None)).unwrap();
        db.put(meta_key(3, b"t"), encode_string(b"", Some(1))).unwrap();
        let mut h = Coll::new(Type::Hash, 7);
        h.size = 1;
        db.put(meta_key(0, b"h"), h.encode()).unwrap();
        db.put(member_key(0, 7, SUB_MEMBER, b"f"), b"x").unwrap();
        db.put(registry_key(0, 7), b"h").unwrap();
    }

    #[test]
    fn grammar_matches_docs() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("layout.rs"),
            include_str!("../../../docs/format/server-keys.md"),
        );
    }

    #[test]
    fn records_of_the_grammar_fit_and_others_do_not() {
        assert!(record_fits(&meta_key(0, b"k"), &encode_string(b"v", None)));
        assert!(record_fits(&meta_key(15, b""), &encode_string(b"", Some(5))));
        assert!(record_fits(&member_key(2, 9, SUB_MEMBER, b""), b"anything"));
        // A list's node record and the record of a long element (format version 2).
        use crate::types::list::node::{ext_part, node_part, SUB_NODE};
        assert!(record_fits(&member_key(0, 9, SUB_NODE, &node_part(1 << 58)), &[0x00, 0x01, b'a', 0x01]));
        assert!(record_fits(&member_key(0, 9, SUB_NODE, &ext_part(1 << 58, 31)), &[b'x'; 600]));
        assert!(record_fits(&registry_key(1, 9), b"user key"));
        assert!(record_fits(&meta_key(0, b"h"), &Coll::new(Type::Set, 1).encode()));
        // Plain records: `shaledb put DIR persist1 hello`, a key in database 16, a short collection header.
        assert!(!record_fits(b"persist1", b"hello"));
        assert!(!record_fits(&meta_key(16, b"k"), &encode_string(b"v", None)));
        assert!(!record_fits(&meta_key(0, b"k"), b"hello"));
        assert!(!record_fits(&meta_key(0, b"k"), b""));
        assert!(!record_fits(&meta_key(0, b"h"), &[0x02, 0, 0]));
        assert!(!record_fits(&[0, KIND_MEMBER, 1, 2], b""));
        assert!(!record_fits(&[0, KIND_REGISTRY, 1], b"k"));
        assert!(!record_fits(&[0, 0x03, 1], b"k"));
        assert!(!record_fits(&[0], b""));
        assert!(!record_fits(MARKER_KEY, &marker_value()));
    }

    #[test]
    fn an_empty_database_is_empty_and_gets_the_marker() {
        let (dir, db) = db();
        assert_eq!(check(&db).unwrap(), Layout::Empty);
        mark_on_open(&db, dir.path()).unwrap();
        assert_eq!(
            check(&db).unwrap(),
            Layout::Marked { version: Some(KEYSPACE_VERSION), keyspace: Keyspace::Ordered }
        );
        assert_eq!(db.get(MARKER_KEY).unwrap(), Some(b"2".to_vec()));
    }

    #[test]
    fn a_server_database_from_before_the_marker_is_adopted() {
        let (dir, db) = db();
        server_records(&db);
        assert_eq!(check(&db).unwrap(), Layout::Unmarked { records: Records::Exact(5) });
        assert!(check(&db).unwrap().is_server());
        mark_on_open(&db, dir.path()).unwrap();
        assert_eq!(
            check(&db).unwrap(),
            Layout::Marked { version: Some(KEYSPACE_VERSION), keyspace: Keyspace::Ordered }
        );
    }

    /// A keyspace from before the marker is of format version 1: its lists (one record per element) are
    /// converted to nodes when it is adopted.
    #[test]
    fn a_database_from_before_the_marker_has_its_lists_converted_when_adopted() {
        use crate::types::list;
        let (dir, db) = db();
        server_records(&db);
        let elements: Vec<Vec<u8>> =
            (0..40).map(|i| if i == 33 { vec![b'x'; 700] } else { format!("e{i}").into_bytes() }).collect();
        let mut l = Coll::new(Type::List, 8);
        let head = list::BASE - 3;
        l.size = elements.len() as u64;
        l.set_extra_u64(0, head);
        l.set_extra_u64(1, head + l.size);
        db.put(meta_key(0, b"l"), l.encode()).unwrap();
        db.put(registry_key(0, 8), b"l").unwrap();
        for (i, e) in elements.iter().enumerate() {
            db.put(member_key(0, 8, SUB_MEMBER, &(head + i as u64).to_be_bytes()), e).unwrap();
        }
        assert!(matches!(check(&db).unwrap(), Layout::Unmarked { .. }));
        mark_on_open(&db, dir.path()).unwrap();
        assert_eq!(
            check(&db).unwrap(),
            Layout::Marked { version: Some(KEYSPACE_VERSION), keyspace: Keyspace::Ordered }
        );
        let ctx = crate::store::ReadCtx::new(&db, crate::keys::Keyspace::Ordered, 0, 0).pinned();
        let c = list::get(&ctx, b"l").unwrap().unwrap();
        let mut got = Vec::new();
        list::for_each_in(&ctx, &c, 0, c.size, |e| got.push(e.to_vec())).unwrap();
        assert_eq!(got, elements);
        assert_eq!(list::index(&ctx, &c, 33).unwrap(), Some(vec![b'x'; 700]));
        assert_eq!(ctx.members(&c, SUB_MEMBER, None, false).count(), 0, "no element record of version 1 left");
    }

    #[test]
    fn a_marker_of_version_1_is_converted_and_bumped() {
        let (dir, db) = db();
        db.put(MARKER_KEY, b"1").unwrap();
        assert_eq!(refusal(dir.path(), &check(&db).unwrap()), None);
        mark_on_open(&db, dir.path()).unwrap();
        assert_eq!(db.get(MARKER_KEY).unwrap(), Some(b"2".to_vec()));
    }

    #[test]
    fn a_plain_database_is_refused_with_its_count_and_the_import_command() {
        let (dir, db) = db();
        for i in 0..3 {
            db.put(format!("persist{i}"), "hello").unwrap();
        }
        let layout = check(&db).unwrap();
        assert_eq!(layout, Layout::Plain { records: Records::Exact(3), example: b"persist0".to_vec() });
        assert!(!layout.is_server());
        let why = mark_on_open(&db, dir.path()).unwrap_err();
        assert!(why.contains("not a server keyspace (3 records)"), "{why}");
        assert!(why.contains("shaledb import-strings"), "{why}");
        assert_eq!(db.get(MARKER_KEY).unwrap(), None, "a refusal writes nothing");
    }

    #[test]
    fn plain_records_after_server_like_ones_are_found() {
        let (_dir, db) = db();
        server_records(&db);
        db.put(b"zzz", b"plain").unwrap();
        assert_eq!(check(&db).unwrap(), Layout::Plain { records: Records::Exact(6), example: b"zzz".to_vec() });
    }

    #[test]
    fn a_large_database_is_judged_by_both_ends() {
        let (_dir, db) = db();
        let n = SAMPLE as u64 * 2 + 500;
        let mut batch = WriteBatch::new();
        for i in 0..n {
            batch.put(meta_key(0, format!("k{i:08}").as_bytes()), encode_string(b"v", None));
        }
        db.write(&batch).unwrap();
        match check(&db).unwrap() {
            Layout::Unmarked { records: Records::About(r) } => assert!(r >= 2 * SAMPLE as u64, "{r}"),
            other => panic!("{other:?}"),
        }
        // A plain key past the first SAMPLE records is found from the end.
        db.put(b"plain", b"x").unwrap();
        match check(&db).unwrap() {
            Layout::Plain { example, records: Records::About(_) } => assert_eq!(example, b"plain"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_marker_of_another_version_is_refused() {
        let (dir, db) = db();
        db.put(MARKER_KEY, b"3").unwrap();
        let why = mark_on_open(&db, dir.path()).unwrap_err();
        assert!(why.contains("format version 3"), "{why}");
        db.put(MARKER_KEY, b"x").unwrap();
        assert_eq!(check(&db).unwrap(), Layout::Marked { version: None, keyspace: Keyspace::Ordered });
        assert!(mark_on_open(&db, dir.path()).unwrap_err().contains("damaged"));
    }

    #[test]
    fn a_cluster_members_marker_says_slots_and_each_side_refuses_the_other() {
        assert_eq!(marker_value_of(Keyspace::Slots), b"2 slots".to_vec());
        assert_eq!(parse_marker(b"2 slots"), (Some(2), Keyspace::Slots));
        assert_eq!(parse_marker(b"2"), (Some(2), Keyspace::Ordered));
        assert_eq!(parse_marker(b"2 shards").0, None);
        assert_eq!(parse_marker(b"2 slots more").0, None);
        // A member's state machine: nothing yet, its own marker, or keys written otherwise.
        let (dir, db) = db();
        assert_eq!(check_member(&db, dir.path()), Ok(false));
        db.put(MARKER_KEY, marker_value_of(Keyspace::Slots)).unwrap();
        assert_eq!(check(&db).unwrap(), Layout::Marked { version: Some(KEYSPACE_VERSION), keyspace: Keyspace::Slots });
        assert_eq!(check_member(&db, dir.path()), Ok(true));
        db.put(MARKER_KEY, marker_value()).unwrap();
        assert!(check_member(&db, dir.path()).unwrap_err().contains("not a cluster member's"));
        db.delete(MARKER_KEY).unwrap();
        db.put(meta_key(0, b"old"), encode_string(b"v", None)).unwrap();
        let why = check_member(&db, dir.path()).unwrap_err();
        assert!(
            why.contains("before keys were stored by hash slot") && why.contains("shaledb cluster import"),
            "{why}"
        );
        // A standalone server refuses a member's keyspace before opening it for writing.
        db.delete(meta_key(0, b"old")).unwrap();
        db.put(MARKER_KEY, marker_value_of(Keyspace::Slots)).unwrap();
        db.close().unwrap();
        let why = check_before_open(dir.path(), &Options::default()).unwrap_err();
        assert!(why.contains("a cluster member's keyspace"), "{why}");
    }

    #[test]
    fn the_marker_is_outside_every_database_range() {
        for db in 0..DATABASES {
            assert!(MARKER_KEY > keys::prefix_end(&[db]).unwrap().as_slice());
        }
    }

    /// `shaledb put DIR h v` over a hash writes the meta record only (a blind SET): the collector's registry pass
    /// finds the old version dead and deletes its records.
    #[test]
    fn an_offline_string_over_a_collection_is_reclaimed_by_the_collector() {
        let (_dir, db) = db();
        server_records(&db);
        db.put(meta_key(0, b"h"), encode_string(b"now a string", None)).unwrap();
        let store = crate::commit::Store::start(db, crate::Appendfsync::No);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while store.db().get(registry_key(0, 7)).unwrap().is_some()
            || store.db().get(member_key(0, 7, SUB_MEMBER, b"f")).unwrap().is_some()
        {
            assert!(std::time::Instant::now() < deadline, "version 7 not reclaimed");
            store.gc.kick();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(store.db().get(meta_key(0, b"h")).unwrap(), Some(encode_string(b"now a string", None)));
        store.shutdown();
    }

    #[test]
    fn check_before_open_creates_nothing_and_refuses_a_plain_database() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("new");
        check_before_open(&missing, &Options::default()).unwrap();
        assert!(!missing.exists());
        let plain = dir.path().join("plain");
        let db = Db::open(&plain, Options { create_if_missing: true, ..Options::default() }).unwrap();
        db.put(b"persist1", b"hello").unwrap();
        db.close().unwrap();
        let before: Vec<_> = std::fs::read_dir(&plain).unwrap().map(|e| e.unwrap().file_name()).collect();
        let why = check_before_open(&plain, &Options::default()).unwrap_err();
        assert!(why.contains("1 record)"), "{why}");
        let after: Vec<_> = std::fs::read_dir(&plain).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn a_database_whose_data_is_in_other_column_families_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("families");
        let db = Db::open(&path, Options { create_if_missing: true, ..Options::default() }).unwrap();
        let users = db.create_column_family("users", Options::default()).unwrap();
        db.put_cf(&users, b"ada", b"lovelace").unwrap();
        drop(users);
        db.close().unwrap();
        let why = check_before_open(&path, &Options::default()).unwrap_err();
        assert!(why.contains("column families") && why.contains("(users)"), "{why}");
        assert!(why.contains("import-strings") && why.contains("--column-family NAME"), "{why}");
    }
}
