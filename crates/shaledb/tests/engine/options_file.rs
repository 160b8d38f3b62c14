//! OPTIONS files (docs/durability.md D14): every read-write open writes one, the newest two are kept,
//! `Options::load_latest` reads the newest back, open refuses options that cannot read the data, and
//! checkpoints and backups carry the newest.

use shaledb::backup::BackupEngine;
use shaledb::{Db, Error, Options, PrefixExtractor, Ttl};
use shaledb_testkit::MemFs;
use std::path::Path;
use std::sync::Arc;

fn opts(fs: &MemFs) -> Options {
    Options { fs: Arc::new(fs.clone()), ..crate::tiny_options() }
}

fn options_files(fs: &MemFs, dir: &str) -> Vec<String> {
    let mut v: Vec<String> = fs.file_names(Path::new(dir)).into_iter().filter(|n| n.starts_with("OPTIONS-")).collect();
    v.sort();
    v
}

fn load(fs: &MemFs, dir: &str) -> shaledb::LoadedOptions {
    Options::load_latest_with(Path::new(dir), Arc::new(fs.clone())).unwrap()
}

#[test]
fn every_open_writes_an_options_file_and_the_newest_two_are_kept() {
    let fs = MemFs::new();
    let mut seen = Vec::new();
    for (i, wbs) in [16usize << 10, 32 << 10, 48 << 10, 64 << 10].into_iter().enumerate() {
        let db = Db::open("/db", Options { write_buffer_size: wbs, ..opts(&fs) }).unwrap();
        db.put(format!("k{i}"), "v").unwrap();
        db.flush().unwrap();
        let files = options_files(&fs, "/db");
        assert_eq!(files.len(), (i + 1).min(2), "{files:?}");
        let newest = files.last().unwrap().clone();
        assert!(!seen.contains(&newest), "{newest} written twice");
        seen.push(newest.clone());
        let loaded = load(&fs, "/db");
        assert_eq!(loaded.options.write_buffer_size, wbs);
        assert_eq!(loaded.path, Path::new("/db").join(&newest));
        assert_eq!(loaded.merge_operator_name.as_deref(), Some("stringappend"));
        assert!(loaded.options.merge_operator.is_some(), "a built-in operator is rebuilt");
        // No table ever takes an OPTIONS file's number.
        let number = |n: &str| n.trim_start_matches("OPTIONS-").to_string();
        for name in fs.file_names(Path::new("/db")) {
            if let Some(stem) = name.strip_suffix(".sst").or(name.strip_suffix(".log")) {
                assert!(!seen.iter().any(|o| number(o) == stem), "{name} shares a number with {seen:?}");
            }
        }
        drop(db);
    }
    assert_eq!(options_files(&fs, "/db"), seen[2..].to_vec(), "the newest two, the older removed");
    // The loaded options open the database.
    let loaded = load(&fs, "/db");
    let db = Db::open("/db", loaded.options).unwrap();
    assert_eq!(db.get("k3").unwrap().as_deref(), Some(&b"v"[..]));
    drop(db);
    // A read-only open writes nothing.
    let before = options_files(&fs, "/db");
    drop(Db::open_read_only("/db", opts(&fs)).unwrap());
    assert_eq!(options_files(&fs, "/db"), before);
    // OPTIONS files are ours: destroy removes them with the rest.
    let removed = shaledb::destroy_with(Path::new("/db"), &fs).unwrap();
    assert!(before.iter().all(|n| removed.contains(n)), "{removed:?}");
    assert!(options_files(&fs, "/db").is_empty());
}

fn assert_refused(r: shaledb::Result<Db>, needles: &[&str]) {
    let Err(e) = r else { panic!("the open must be refused") };
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    for n in needles {
        assert!(e.to_string().contains(n), "want {n:?} in: {e}");
    }
}

#[test]
fn a_different_merge_operator_is_refused_naming_both() {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    db.merge("k", "a").unwrap();
    db.put("p", "v").unwrap();
    drop(db);
    let with = |name: Option<&str>| Options { merge_operator: name.and_then(shaledb::merge::builtin), ..opts(&fs) };
    assert_refused(Db::open("/db", with(Some("uint64add"))), &["\"stringappend\"", "\"uint64add\"", "OPTIONS-"]);
    // Nothing was written by the refused open: the recorded operator is still the first one.
    assert_eq!(load(&fs, "/db").merge_operator_name.as_deref(), Some("stringappend"));
    // Without an operator the open succeeds, as RocksDB's does (benchmark.sh's readrandom opens so after its
    // readwhilewriting set "put"): plain keys read, a merged key fails naming the missing operator, and the
    // OPTIONS file written keeps the recorded name, so another operator is still refused afterwards.
    let db = Db::open("/db", with(None)).unwrap();
    assert_eq!(db.get("p").unwrap().as_deref(), Some(&b"v"[..]));
    let e = db.get("k").unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    db.flush().unwrap();
    drop(db);
    assert_eq!(load(&fs, "/db").merge_operator_name.as_deref(), Some("stringappend"));
    assert_refused(Db::open("/db", with(Some("uint64add"))), &["\"stringappend\"", "\"uint64add\""]);
    let db = Db::open("/db", with(Some("stringappend"))).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"a"[..]));
    drop(db);

    // A database recorded without an operator may gain one; then it is recorded.
    let fs = MemFs::new();
    drop(Db::open("/db", Options { merge_operator: None, ..opts(&fs) }).unwrap());
    drop(Db::open("/db", Options { merge_operator: shaledb::merge::builtin("put"), ..opts(&fs) }).unwrap());
    assert_eq!(load(&fs, "/db").merge_operator_name.as_deref(), Some("put"));
}

#[test]
fn switching_ttl_mode_is_refused_but_its_length_and_the_prefix_extractor_may_change() {
    let fs = MemFs::new();
    let ttl = |s| Options { ttl: Some(Ttl::new(s)), merge_operator: None, ..opts(&fs) };
    let db = Db::open("/db", ttl(60)).unwrap();
    db.put("k", "v").unwrap();
    drop(db);
    assert_refused(Db::open("/db", Options { merge_operator: None, ..opts(&fs) }), &["TTL mode on", "TTL mode off"]);
    drop(Db::open("/db", ttl(3600)).unwrap());
    assert_eq!(load(&fs, "/db").options.ttl.map(|t| t.seconds), Some(3600));

    let fs = MemFs::new();
    drop(Db::open("/db", Options { merge_operator: None, ..opts(&fs) }).unwrap());
    assert_refused(
        Db::open("/db", Options { ttl: Some(Ttl::new(5)), merge_operator: None, ..opts(&fs) }),
        &["TTL mode off"],
    );

    // Prefix extractors may change between opens (tables record theirs).
    let fs = MemFs::new();
    let prefix = |p| Options { prefix_extractor: p, ..opts(&fs) };
    drop(Db::open("/db", prefix(Some(PrefixExtractor::Fixed(2)))).unwrap());
    drop(Db::open("/db", prefix(Some(PrefixExtractor::Capped(4)))).unwrap());
    drop(Db::open("/db", prefix(None)).unwrap());
    assert_eq!(load(&fs, "/db").options.prefix_extractor, None);
}

#[test]
fn a_damaged_newest_options_file_fails_open_under_paranoid_checks_only() {
    let fs = MemFs::new();
    drop(Db::open("/db", opts(&fs)).unwrap());
    let newest = options_files(&fs, "/db").pop().unwrap();
    let path = Path::new("/db").join(&newest);
    let text = String::from_utf8(fs.read_file(&path).unwrap()).unwrap();
    fs.write_file(&path, text.replace("num_levels=7", "num_levels=seven").as_bytes());
    let Err(e) = Db::open("/db", opts(&fs)) else { panic!("a damaged OPTIONS file must refuse the open") };
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains(&newest) && e.to_string().contains("line "), "{e}");
    let e = Options::load_latest_with(Path::new("/db"), Arc::new(fs.clone())).unwrap_err();
    assert!(e.to_string().contains("num_levels"), "{e}");
    // Without paranoid checks the open goes on and writes a good file.
    drop(Db::open("/db", Options { paranoid_checks: false, ..opts(&fs) }).unwrap());
    assert!(!load(&fs, "/db").options.paranoid_checks);
    drop(Db::open("/db", opts(&fs)).unwrap());
}

#[test]
fn checkpoints_and_backups_carry_the_newest_options_file() {
    let fs = MemFs::new();
    let o = Options { write_buffer_size: 40 << 10, ..opts(&fs) };
    drop(Db::open("/db", o.clone()).unwrap());
    let db = Db::open("/db", o.clone()).unwrap();
    db.put("k", "v").unwrap();
    let newest = options_files(&fs, "/db").pop().unwrap();
    let source = fs.read_file(&Path::new("/db").join(&newest)).unwrap();

    db.create_checkpoint("/ckpt").unwrap();
    assert_eq!(options_files(&fs, "/ckpt"), vec![newest.clone()], "only the newest is copied");
    assert_eq!(fs.read_file(&Path::new("/ckpt").join(&newest)).unwrap(), source);
    assert_eq!(load(&fs, "/ckpt").options.write_buffer_size, 40 << 10);

    let mut engine = BackupEngine::open_with(Path::new("/bk"), Arc::new(fs.clone())).unwrap();
    let id = engine.create_backup(&db).unwrap();
    engine.verify(id).unwrap();
    engine.restore(id, "/restored").unwrap();
    assert_eq!(options_files(&fs, "/restored"), vec![newest.clone()]);
    assert_eq!(fs.read_file(&Path::new("/restored").join(&newest)).unwrap(), source);
    drop(db);
    for dir in ["/ckpt", "/restored"] {
        let copy = Db::open(dir, load(&fs, dir).options).unwrap();
        assert_eq!(copy.get("k").unwrap().as_deref(), Some(&b"v"[..]), "{dir}");
    }
    // A copy keeps refusing what the source refuses.
    let other = Options { merge_operator: shaledb::merge::builtin("uint64add"), ..opts(&fs) };
    assert_refused(Db::open("/ckpt", other), &["stringappend"]);
}

/// The names of the families the newest OPTIONS file lists.
fn listed(fs: &MemFs) -> Vec<String> {
    load(fs, "/db").column_families.into_iter().map(|f| f.name).collect()
}

/// The options of a family that its OPTIONS sections carry, as one comparable text (`Options`'s `Debug` plus
/// the fields it leaves out).
fn family_view(o: &Options) -> String {
    format!(
        "{o:?} {:?}",
        (
            o.num_levels,
            o.max_bytes_for_level_multiplier,
            o.level0_slowdown_writes_trigger,
            o.level0_stop_writes_trigger,
            o.target_file_size_multiplier,
            o.disable_auto_compactions,
            &o.compression_per_level,
            o.bottommost_compression,
            o.compression_level,
            o.block_restart_interval,
        )
    )
}

fn two_families(fs: &MemFs) -> Vec<shaledb::ColumnFamilyDescriptor> {
    let counters = Options {
        merge_operator: shaledb::merge::builtin("uint64add"),
        write_buffer_size: 32 << 10,
        prefix_extractor: Some(PrefixExtractor::Fixed(3)),
        block_size: 1024,
        ..opts(fs)
    };
    let events = Options {
        merge_operator: None,
        compaction_style: shaledb::CompactionStyle::Fifo,
        compaction_options_fifo: shaledb::CompactionOptionsFifo { max_table_files_size: 1 << 20, ..Default::default() },
        compression: shaledb::CompressionType::None,
        bloom_bits_per_key: 0.0,
        disable_auto_compactions: true,
        ..opts(fs)
    };
    vec![
        shaledb::ColumnFamilyDescriptor::new("counters", counters),
        shaledb::ColumnFamilyDescriptor::new("events", events),
    ]
}

/// RocksDB's `LoadLatestOptions` with families: two families created with different options are recorded
/// each in its sections, and reopening with what `load_latest` returns gives every family the same options.
#[test]
fn each_familys_options_are_recorded_and_reopen_exactly() {
    let fs = MemFs::new();
    let db = Db::open_with_column_families("/db", opts(&fs), two_families(&fs)).unwrap();
    let before: Vec<(String, String)> =
        db.column_families().iter().map(|c| (c.name().to_string(), family_view(c.options()))).collect();
    let c = db.column_family("counters").unwrap();
    db.merge_cf(&c, "hits", 2u64.to_le_bytes()).unwrap();
    db.close().unwrap();

    let loaded = load(&fs, "/db");
    assert_eq!(listed(&fs), ["counters", "events"]);
    let (lc, le) = (&loaded.column_families[0], &loaded.column_families[1]);
    assert_eq!(lc.merge_operator_name.as_deref(), Some("uint64add"));
    assert_eq!((lc.options.write_buffer_size, lc.options.block_size), (32 << 10, 1024));
    assert_eq!(lc.options.prefix_extractor, Some(PrefixExtractor::Fixed(3)));
    assert!(le.merge_operator_name.is_none());
    assert_eq!(le.options.compaction_style, shaledb::CompactionStyle::Fifo);
    assert_eq!(le.options.compaction_options_fifo.max_table_files_size, 1 << 20);
    assert_eq!(loaded.merge_operator_name.as_deref(), Some("stringappend"));

    let db = Db::open_with_column_families("/db", loaded.options.clone(), loaded.column_family_descriptors()).unwrap();
    let after: Vec<(String, String)> =
        db.column_families().iter().map(|c| (c.name().to_string(), family_view(c.options()))).collect();
    assert_eq!(after, before);
    let c = db.column_family("counters").unwrap();
    db.merge_cf(&c, "hits", 3u64.to_le_bytes()).unwrap();
    assert_eq!(db.get_cf(&c, "hits").unwrap(), Some(5u64.to_le_bytes().to_vec()));
    drop(db);
    // The open wrote the same families again.
    assert_eq!(listed(&fs), ["counters", "events"]);
}

/// Creating or dropping a family writes a new OPTIONS file (the newest two kept, as for an open): the newest
/// always lists the live families.
#[test]
fn create_and_drop_family_rewrite_the_options_file() {
    let fs = MemFs::new();
    let db = Db::open("/db", opts(&fs)).unwrap();
    assert!(listed(&fs).is_empty());
    let first = options_files(&fs, "/db");
    let a = db.create_column_family("a", Options { write_buffer_size: 24 << 10, ..opts(&fs) }).unwrap();
    assert_eq!(listed(&fs), ["a"]);
    assert_eq!(load(&fs, "/db").column_families[0].options.write_buffer_size, 24 << 10);
    let odd = "b \"quoted\" #not-a-comment\\\n";
    let b = db.create_column_family(odd, opts(&fs)).unwrap();
    assert_eq!(listed(&fs), ["a", odd]);
    let files = options_files(&fs, "/db");
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(!files.contains(&first[0]), "the oldest is removed: {files:?}");
    db.drop_column_family(&a).unwrap();
    assert_eq!(listed(&fs), [odd]);
    assert_eq!(options_files(&fs, "/db").len(), 2);
    db.put_cf(&b, "k", "v").unwrap();
    db.close().unwrap();
    let db = Db::open("/db", opts(&fs)).unwrap();
    assert_eq!(listed(&fs), [odd]);
    assert_eq!(db.get_cf(&db.column_family(odd).unwrap(), "k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(db);
}

/// Open checks each live family's merge operator against the one its sections record, as the default's.
#[test]
fn a_different_merge_operator_in_a_family_is_refused_naming_the_family() {
    let fs = MemFs::new();
    let plain = Options { merge_operator: None, ..opts(&fs) };
    let with = |name: Option<&str>| Options { merge_operator: name.and_then(shaledb::merge::builtin), ..opts(&fs) };
    let counters = |name| vec![shaledb::ColumnFamilyDescriptor::new("counters", with(name))];
    let db = Db::open_with_column_families("/db", plain.clone(), counters(Some("uint64add"))).unwrap();
    let c = db.column_family("counters").unwrap();
    db.merge_cf(&c, "hits", 2u64.to_le_bytes()).unwrap();
    drop(c);
    db.close().unwrap();
    let before = options_files(&fs, "/db");
    assert_refused(
        Db::open_with_column_families("/db", plain.clone(), counters(Some("stringappend"))),
        &["column family \"counters\"", "\"uint64add\"", "\"stringappend\"", "OPTIONS-"],
    );
    // Not listed, the family takes the database's options: refused for another operator.
    assert_refused(Db::open("/db", with(Some("stringappend"))), &["column family \"counters\"", "\"uint64add\""]);
    assert_eq!(options_files(&fs, "/db"), before, "a refused open writes nothing");
    // Without an operator it opens (as RocksDB's does); the family's merged key then fails to read, and the
    // file it writes keeps the family's recorded operator, which still refuses another.
    let db = Db::open_with_column_families("/db", plain.clone(), counters(None)).unwrap();
    assert!(db.get_cf(&db.column_family("counters").unwrap(), "hits").unwrap_err().is_invalid_argument());
    drop(db);
    let kept = load(&fs, "/db").column_families.into_iter().find(|f| f.name == "counters").unwrap();
    assert_eq!(kept.merge_operator_name.as_deref(), Some("uint64add"));
    assert_refused(
        Db::open_with_column_families("/db", plain.clone(), counters(Some("stringappend"))),
        &["column family \"counters\"", "\"uint64add\""],
    );
    drop(Db::open("/db", plain.clone()).unwrap());
    let db = Db::open_with_column_families("/db", plain.clone(), counters(Some("uint64add"))).unwrap();
    assert_eq!(db.get_cf(&db.column_family("counters").unwrap(), "hits").unwrap(), Some(2u64.to_le_bytes().to_vec()));
    drop(db);
    let stale = fs.read_file(&Path::new("/db").join(options_files(&fs, "/db").pop().unwrap())).unwrap();

    // A family the newest file lists but the MANIFEST no longer has (a crash between the drop and the
    // rewrite) is not checked: a new family of that name takes any options.
    let db = Db::open("/db", plain.clone()).unwrap();
    db.drop_column_family(&db.column_family("counters").unwrap()).unwrap();
    db.close().unwrap();
    // The drop's OPTIONS file as if it had never been written: the newest lists the dropped family.
    fs.write_file(&Path::new("/db").join(options_files(&fs, "/db").pop().unwrap()), &stale);
    assert_eq!(load(&fs, "/db").column_families[0].merge_operator_name.as_deref(), Some("uint64add"));
    let db = Db::open_with_column_families("/db", plain, counters(Some("stringappend"))).unwrap();
    let c = db.column_family("counters").unwrap();
    assert_eq!(db.get_cf(&c, "hits").unwrap(), None, "a new family");
    assert_eq!(load(&fs, "/db").column_families[0].merge_operator_name.as_deref(), Some("stringappend"));
}

/// A database whose newest OPTIONS file was written before families were recorded (format 1.1: the default
/// family's sections only) opens with its families, unchecked, and then records them.
#[test]
fn an_options_file_of_version_1_1_still_loads_and_opens() {
    let fs = MemFs::new();
    let db = Db::open_with_column_families("/db", opts(&fs), two_families(&fs)).unwrap();
    db.put_cf(&db.column_family("events").unwrap(), "k", "v").unwrap();
    db.close().unwrap();
    // Rewrite the newest file as the previous version wrote it.
    let newest = Path::new("/db").join(options_files(&fs, "/db").pop().unwrap());
    let text = String::from_utf8(fs.read_file(&newest).unwrap()).unwrap();
    let cut = text.find("\n[CFOptions \"counters\"]").unwrap();
    let old = text[..cut + 1]
        .replace("options_file_version=1.2", "options_file_version=1.1")
        .replace("  named_column_families=2\n", "");
    fs.write_file(&newest, old.as_bytes());
    let loaded = load(&fs, "/db");
    assert!(loaded.column_families.is_empty());
    assert_eq!(loaded.options.write_buffer_size, opts(&fs).write_buffer_size);
    let db = Db::open_with_column_families("/db", loaded.options, two_families(&fs)).unwrap();
    assert_eq!(db.get_cf(&db.column_family("events").unwrap(), "k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(db);
    assert_eq!(listed(&fs), ["counters", "events"]);
}
