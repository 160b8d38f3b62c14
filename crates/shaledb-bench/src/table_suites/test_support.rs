//! Test helpers the three table suites share: parsing a suite's flags as `shaledb bench suite <name>` does,
//! and the checks every suite's flags must pass alike.

use super::harness::SuiteFlags;
use clap::Parser;

#[derive(Parser)]
struct Cli<A: clap::Args> {
    #[command(flatten)]
    a: A,
}

/// Parses `args` (without the program name) as suite arguments `A`, as the command line does; the error is
/// clap's message.
pub fn parse_args<A: clap::Args + clap::FromArgMatches>(args: &[&str]) -> Result<A, String> {
    let cli =
        Cli::<A>::try_parse_from(std::iter::once("suite").chain(args.iter().copied())).map_err(|e| e.to_string())?;
    Ok(cli.a)
}

/// Asserts that each command line of `cases` is refused with a message holding its text (the flag's name).
pub fn assert_refused<T>(parse: impl Fn(&[&str]) -> Result<T, String>, cases: &[(&[&str], &str)]) {
    for (args, flag) in cases {
        let Err(e) = parse(args) else { panic!("{args:?} accepted") };
        assert!(e.contains(flag), "{args:?}: {e}");
    }
}

/// Asserts that a build without RocksDB refuses `--engine shaledb,rocksdb`, naming the cargo feature and the
/// script that builds the RocksDB it links.
pub fn assert_rocksdb_needs_its_feature<T>(parse: impl Fn(&[&str]) -> Result<T, String>) {
    if !cfg!(feature = "rocksdb") {
        let Err(e) = parse(&["--engine", "shaledb,rocksdb"]) else { panic!("rocksdb accepted without the feature") };
        assert!(e.contains("rocksdb") && e.contains("features") && e.contains("scripts/build-rocksdb"), "{e}");
    }
}

/// Asserts that the flags every suite takes parse as `shaledb bench` parses them: `--progress[=BOOL]`
/// (default on) and `--use_existing_db[=BOOL]` (default unset).
pub fn assert_common_flags<T>(parse: impl Fn(&[&str]) -> Result<T, String>, common: impl Fn(&T) -> &SuiteFlags) {
    let flags = |args: &[&str]| common(&parse(args).unwrap()).clone();
    assert!(flags(&[]).progress);
    assert!(flags(&["--progress"]).progress);
    assert!(!flags(&["--progress=false"]).progress);
    assert!(!flags(&["--progress=0"]).progress);
    assert_eq!(flags(&[]).use_existing_db, None);
    assert_eq!(flags(&["--use_existing_db=0"]).use_existing_db, Some(false));
    assert_eq!(flags(&["--use_existing_db=false"]).use_existing_db, Some(false));
    assert!(parse(&["--progress=maybe"]).is_err());
}
