//! Writes keys, reads them back, reopens the database, and prints its statistics.
//!
//! `cargo run --release -p shaledb --example quickstart [-- N]`

use shaledb::{Db, Options, WriteBatch};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(200_000);
    let dir = tempfile::tempdir()?;
    let opts = Options {
        write_buffer_size: 4 << 20,
        merge_operator: shaledb::merge::builtin("uint64add"),
        ..Options::default()
    };

    let db = Db::open(dir.path(), opts.clone())?;
    let start = Instant::now();
    let mut batch = WriteBatch::new();
    for i in 0..n {
        batch.put(format!("key{i:010}").as_bytes(), format!("value-{i}").as_bytes());
        if batch.count() == 100 {
            db.write(&batch)?;
            batch.clear();
        }
    }
    db.write(&batch)?;
    db.merge(b"counter", 5u64.to_le_bytes())?;
    db.merge(b"counter", 7u64.to_le_bytes())?;
    println!("wrote {n} keys in {:.2?}", start.elapsed());

    let start = Instant::now();
    let mut found = 0;
    for i in (0..n).step_by(7) {
        if db.get(format!("key{i:010}").as_bytes())?.is_some() {
            found += 1;
        }
    }
    println!("read back {found} of {} sampled keys in {:.2?}", n.div_ceil(7), start.elapsed());
    db.close()?;

    let db = Db::open(dir.path(), opts)?;
    let counter = db.get(b"counter")?.map(|v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8])));
    let scanned = db.range(b"key0000000100"..b"key0000000200").count();
    println!("after reopen: counter = {counter:?}, {scanned} keys in [key0000000100, key0000000200)");
    db.compact_range(None, None)?;
    println!("{}", db.property("shaledb.stats").unwrap_or_default());
    db.close()?;
    Ok(())
}
