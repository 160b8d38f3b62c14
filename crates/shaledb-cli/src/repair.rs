//! `shaledb repair PATH`: points CURRENT at the newest MANIFEST that replays cleanly and whose tables all exist
//! with their recorded sizes ([`shaledb::repair`]). Nothing is deleted. Exit code 0 when the database can be
//! opened afterwards, 1 when no MANIFEST qualifies.

use std::path::PathBuf;

/// Arguments of `shaledb repair`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The database directory.
    pub path: PathBuf,
}

/// Runs `shaledb repair`, printing what it found and did.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let report = shaledb::repair(&args.path, &shaledb::Options::default())?;
    for (name, why) in &report.skipped {
        println!("skipped {name}: {why}");
    }
    let before = report.previous.as_deref().unwrap_or("nothing (CURRENT was missing or unreadable)");
    if report.rewrote_current {
        println!("repair: CURRENT now names {} (it named {before})", report.manifest);
    } else {
        println!("repair: CURRENT already names {}, which replays cleanly; nothing changed", report.manifest);
    }
    Ok(0)
}
