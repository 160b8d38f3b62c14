//! Build script, for the `rocksdb` feature only: the RocksDB engine links the release RocksDB 9.11.2 that
//! `scripts/build-rocksdb` builds (statically, through the `rocksdb` crate's librocksdb-sys with
//! `ROCKSDB_LIB_DIR`/`ROCKSDB_STATIC`, which `.cargo/config.toml` sets). This script
//!
//! - checks that `$ROCKSDB_LIB_DIR/librocksdb.a` is there and that the headers beside it
//!   (`$ROCKSDB_LIB_DIR/../include/rocksdb/version.h`) say RocksDB 9: otherwise the build stops with a message
//!   naming `scripts/build-rocksdb`, rather than failing later in the linker (or linking another RocksDB);
//! - links the libraries that static library needs and that librocksdb-sys does not link when it is given a
//!   library: snappy, lz4, zlib and bzip2 (the system's, as RocksDB's own `make static_lib db_bench` links
//!   them: its make_config.mk's `PLATFORM_LDFLAGS`), and pthread, rt, dl. Not zstd: the process already has the
//!   static zstd of the zstd-sys crate (ShaleDB's), a `-lzstd` would find that archive first in the search path,
//!   and one zstd serves both engines; the `rocksdb` crate's `zstd` feature gives it the dictionary builder
//!   RocksDB calls;
//! - passes the headers' version on as `SHALEDB_ROCKSDB_HEADER_VERSION`, which the engine checks against the
//!   version the library itself writes into the OPTIONS file.
//!
//! `SHALEDB_ROCKSDB_CHECK_ONLY=1` lets the feature compile without the library (for `cargo check`, clippy and
//! rustdoc, which do not link: CI's compile check); a link then fails.

use std::env;
use std::path::{Path, PathBuf};

/// The RocksDB major version the bindings (librocksdb-sys 0.17, RocksDB 9.9's C API) are for.
const ROCKSDB_MAJOR: u32 = 9;

/// The libraries `librocksdb.a` needs besides zstd, in link order (after it).
const NATIVE_LIBS: [&str; 7] = ["snappy", "lz4", "z", "bz2", "pthread", "rt", "dl"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ROCKSDB_LIB_DIR");
    println!("cargo:rerun-if-env-changed=SHALEDB_ROCKSDB_CHECK_ONLY");
    if env::var_os("CARGO_FEATURE_ROCKSDB").is_none() {
        return;
    }
    let check_only = env::var("SHALEDB_ROCKSDB_CHECK_ONLY").is_ok_and(|v| v == "1" || v == "true");
    let dir = env::var_os("ROCKSDB_LIB_DIR").map(PathBuf::from);
    match dir.as_deref().map(find) {
        Some(Ok(version)) => {
            let dir = dir.as_deref().unwrap_or(Path::new(""));
            println!("cargo:rerun-if-changed={}", dir.join("librocksdb.a").display());
            println!("cargo:rustc-env=SHALEDB_ROCKSDB_HEADER_VERSION={version}");
            for lib in NATIVE_LIBS {
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
        }
        Some(Err(why)) if check_only => {
            println!("cargo:warning=SHALEDB_ROCKSDB_CHECK_ONLY: compiling the rocksdb feature without linking: {why}");
            println!("cargo:rustc-env=SHALEDB_ROCKSDB_HEADER_VERSION=unknown");
        }
        None if check_only => {
            println!("cargo:warning=SHALEDB_ROCKSDB_CHECK_ONLY: compiling the rocksdb feature without linking");
            println!("cargo:rustc-env=SHALEDB_ROCKSDB_HEADER_VERSION=unknown");
        }
        Some(Err(why)) => stop(&why),
        None => stop("ROCKSDB_LIB_DIR is not set (.cargo/config.toml sets it to target/rocksdb/9.11.2/lib)"),
    }
}

/// The version the headers beside `lib_dir` give, when `lib_dir` holds `librocksdb.a` of RocksDB 9.
fn find(lib_dir: &Path) -> Result<String, String> {
    let lib = lib_dir.join("librocksdb.a");
    if !lib.is_file() {
        return Err(format!("{} does not exist", lib.display()));
    }
    let header = lib_dir.join("../include/rocksdb/version.h");
    let text = std::fs::read_to_string(&header).map_err(|e| format!("cannot read {}: {e}", header.display()))?;
    let field = |name: &str| -> Option<u32> {
        text.lines().find_map(|l| {
            let mut t = l.split_whitespace();
            match (t.next(), t.next(), t.next()) {
                (Some("#define"), Some(n), Some(v)) if n == name => v.parse().ok(),
                _ => None,
            }
        })
    };
    let (Some(major), Some(minor), Some(patch)) =
        (field("ROCKSDB_MAJOR"), field("ROCKSDB_MINOR"), field("ROCKSDB_PATCH"))
    else {
        return Err(format!("{} has no ROCKSDB_MAJOR/MINOR/PATCH", header.display()));
    };
    if major != ROCKSDB_MAJOR {
        return Err(format!(
            "{} is RocksDB {major}.{minor}.{patch}; the bindings are for RocksDB {ROCKSDB_MAJOR}.x",
            lib.display()
        ));
    }
    Ok(format!("{major}.{minor}.{patch}"))
}

fn stop(why: &str) -> ! {
    eprintln!(
        "\nshaledb-bench's `rocksdb` feature links the release RocksDB 9.11.2 built by scripts/build-rocksdb, and \
         cannot: {why}.\n\n  Build it once (30-50 minutes on 2 cores; cached in target/rocksdb/):\n\n    \
         scripts/build-rocksdb\n\n  or point ROCKSDB_LIB_DIR at the lib/ directory of another RocksDB 9 build \
         (its headers in ../include).\n  To compile the feature without linking (cargo check, clippy, doc): \
         SHALEDB_ROCKSDB_CHECK_ONLY=1.\n"
    );
    std::process::exit(1);
}
