//! INFO: its sections and the keyspace counts they show.

use super::text;
use crate::keys;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::now_ms;
use shaledb::{Db, ReadOptions};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

/// A random 40-hex-digit id fixed for the life of the process (`run_id`, `master_replid`).
fn process_id_hex(which: usize) -> &'static str {
    static IDS: OnceLock<[String; 2]> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let hex = || (0..40).map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap_or('0')).collect();
        [hex(), hex()]
    });
    &ids[which]
}

/// Unix seconds when the server started.
pub(super) fn start_unix(shared: &Shared) -> u64 {
    (now_ms() / 1000).saturating_sub(shared.started.elapsed().as_secs())
}

/// The resident set size of this process, from /proc/self/status (`None` where there is no /proc).
pub(super) fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()?;
    kb.checked_mul(1024)
}

pub(super) fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2}G", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.2}M", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else {
        format!("{bytes}B")
    }
}

fn prop_u64(db: &Db, name: &str) -> u64 {
    db.property(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Live keys and keys with an expiry per non-empty database, by a scan of each database's meta keys (keys
/// already expired at `now_ms` but not yet removed are not counted). Runs in the caller's thread: INFO
/// keyspace costs a scan of the keyspace.
pub fn keyspace_scan(db: &Db, now_ms: u64) -> shaledb::Result<Vec<(u8, u64, u64)>> {
    let mut out = Vec::new();
    for d in 0..keys::DATABASES {
        let lower = keys::meta_prefix(d).to_vec();
        let mut upper = lower.clone();
        upper[1] += 1;
        let mut it = db.cursor_opt(&ReadOptions {
            iterate_lower_bound: Some(lower.clone()),
            iterate_upper_bound: Some(upper),
            fill_cache: false,
            ..ReadOptions::default()
        });
        it.seek(&lower);
        let (mut n, mut expires) = (0u64, 0u64);
        while it.valid() {
            if let Ok(meta) = keys::decode_meta(it.value()) {
                if !meta.expired(now_ms) {
                    n += 1;
                    expires += meta.expire_at_ms.is_some() as u64;
                }
            }
            it.next();
        }
        it.status()?;
        if n > 0 {
            out.push((d, n, expires));
        }
    }
    Ok(out)
}

/// Every section, in the order INFO prints them.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// The sections of `INFO` without arguments (and of `INFO default`): all but commandstats and latencystats.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// The sections `INFO <args>` prints, in print order: `default`, `all` (every section), `everything` (the
/// same: there are no module sections), or section names in any case (`module_list` is `modules`); unknown
/// names are ignored, and a section asked twice is printed once.
pub(super) fn chosen_sections(args: &[bytes::Bytes]) -> Vec<&'static str> {
    if args.is_empty() {
        return DEFAULT_SECTIONS.to_vec();
    }
    let mut all = false;
    let mut wanted: Vec<String> = Vec::new();
    for a in args {
        let a = text(a).to_ascii_lowercase();
        match a.as_str() {
            "all" | "everything" => all = true,
            "default" => wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string())),
            "module_list" => wanted.push("modules".into()),
            _ => wanted.push(a),
        }
    }
    SECTIONS.iter().copied().filter(|name| all || wanted.iter().any(|w| w == name)).collect()
}

pub(super) fn info(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let mut out = String::new();
    for name in chosen_sections(&args[1..]) {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(shared, name, &mut out);
    }
    Reply::Verbatim(out)
}

/// This process's CPU time (user, system) and its waited-for children's, in seconds, from /proc/self/stat
/// (whose times are in USER_HZ, 100 per second on Linux).
fn cpu_times() -> Option<[f64; 4]> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime, stime, cutime, cstime are fields 14-17 of the line: 11-14 of `rest` (which starts at field 3).
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).map(|v| v / 100.0);
    Some([t(11)?, t(12)?, t(13)?, t(14)?])
}

fn section(shared: &Shared, name: &str, out: &mut String) {
    let cfg = shared.config.read().clone();
    let store = &shared.store;
    let stats = &shared.stats;
    match name {
        "server" => {
            let uptime = shared.started.elapsed().as_secs();
            let os = format!(
                "{} {} {}",
                if std::env::consts::OS == "linux" { "Linux" } else { std::env::consts::OS },
                std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
                std::env::consts::ARCH
            );
            out.push_str("# Server\r\n");
            kv(out, "redis_version", &crate::REDIS_VERSION);
            kv(out, "redis_git_sha1", &"00000000");
            kv(out, "redis_git_dirty", &0);
            kv(out, "redis_mode", &"standalone");
            kv(out, "shaledb_version", &env!("CARGO_PKG_VERSION"));
            kv(out, "os", &os);
            kv(out, "arch_bits", &usize::BITS);
            kv(out, "multiplexing_api", &"tokio");
            kv(out, "process_id", &std::process::id());
            kv(out, "run_id", &process_id_hex(0));
            kv(out, "tcp_port", &shared.listen_port.load(std::sync::atomic::Ordering::Relaxed));
            kv(out, "server_time_usec", &(now_ms() * 1000));
            kv(out, "uptime_in_seconds", &uptime);
            kv(out, "uptime_in_days", &(uptime / 86400));
            kv(out, "executable", &std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
            kv(
                out,
                "config_file",
                &cfg.config_file
                    .as_ref()
                    .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()).display().to_string())
                    .unwrap_or_default(),
            );
        }
        "clients" => {
            out.push_str("# Clients\r\n");
            kv(out, "connected_clients", &shared.clients.lock().len());
            kv(out, "cluster_connections", &0);
            kv(out, "maxclients", &cfg.maxclients);
            kv(out, "blocked_clients", &store.blocking.blocked_clients());
            kv(out, "tracking_clients", &store.tracking.figures().clients);
            kv(out, "pubsub_clients", &shared.pubsub.subscribers());
        }
        "memory" => {
            let db = &store.db();
            let mem = prop_u64(db, "shaledb.cur-size-all-mem-tables");
            let cache = prop_u64(db, "shaledb.block-cache-usage");
            let used = mem + cache;
            let rss = rss_bytes().unwrap_or(0);
            out.push_str("# Memory\r\n");
            kv(out, "used_memory", &used);
            kv(out, "used_memory_human", &human(used));
            kv(out, "used_memory_rss", &rss);
            kv(out, "used_memory_rss_human", &human(rss));
            kv(out, "used_memory_memtables", &mem);
            kv(out, "used_memory_block_cache", &cache);
            kv(out, "block_cache_capacity", &prop_u64(db, "shaledb.block-cache-capacity"));
            kv(out, "maxmemory", &0);
            kv(out, "maxmemory_human", &"0B");
            kv(out, "maxmemory_policy", &"noeviction");
            kv(out, "number_of_cached_scripts", &store.scripts.number_of_cached_scripts());
            // Deleted collections whose members the collector (gc.rs) still has to remove, and those it
            // removed since the start or CONFIG RESETSTAT.
            kv(out, "lazyfree_pending_objects", &store.gc.pending());
            kv(out, "lazyfreed_objects", &store.gc.lazyfreed_objects());
        }
        "persistence" => {
            let reason = store.read_only_reason();
            let s = &store.stats;
            let last_fsync = s.last_fsync_unix.load(Ordering::Relaxed);
            out.push_str("# Persistence\r\n");
            kv(out, "loading", &0);
            kv(out, "async_loading", &0);
            // Saves are checkpoints (save.rs); every write is durable without them, so nothing is "unsaved".
            let saves = shared.saves.state();
            kv(out, "rdb_changes_since_last_save", &0);
            kv(out, "rdb_bgsave_in_progress", &(saves.in_progress as u8));
            kv(out, "rdb_last_save_time", &super::save::last_save_unix(shared));
            kv(out, "rdb_last_bgsave_status", &if saves.last_error.is_some() { "err" } else { "ok" });
            kv(
                out,
                "rdb_last_checkpoint_dir",
                &saves.last_dir.as_ref().map(|d| d.display().to_string()).unwrap_or_default(),
            );
            kv(out, "aof_enabled", &1);
            kv(out, "aof_rewrite_in_progress", &0);
            kv(out, "aof_last_write_status", &if reason.is_some() { "err" } else { "ok" });
            kv(out, "appendfsync", &store.appendfsync().name());
            kv(out, "read_only", &(reason.is_some() as u8));
            kv(out, "read_only_reason", &reason.unwrap_or_default().replace(['\r', '\n'], " "));
            kv(out, "commit_groups", &s.groups.load(Ordering::Relaxed));
            kv(out, "commit_commands", &s.commands.load(Ordering::Relaxed));
            kv(out, "commit_fsyncs", &s.fsyncs.load(Ordering::Relaxed));
            kv(out, "last_fsync_time", &last_fsync);
        }
        "stats" => {
            out.push_str("# Stats\r\n");
            kv(out, "total_connections_received", &stats.connections_received.load(Ordering::Relaxed));
            kv(out, "total_commands_processed", &stats.commands_processed.load(Ordering::Relaxed));
            kv(out, "instantaneous_ops_per_sec", &stats.ops_last_second.load(Ordering::Relaxed));
            kv(out, "total_net_input_bytes", &stats.net_input_bytes.load(Ordering::Relaxed));
            kv(out, "total_net_output_bytes", &stats.net_output_bytes.load(Ordering::Relaxed));
            kv(out, "rejected_connections", &stats.rejected_connections.load(Ordering::Relaxed));
            // Issue 41: read commands that needed the disk and ran on the blocking pool (not in Redis).
            kv(out, "reads_offloaded", &stats.reads_offloaded.load(Ordering::Relaxed));
            kv(out, "pubsub_channels", &shared.pubsub.channel_count());
            kv(out, "pubsub_patterns", &shared.pubsub.pattern_count());
            kv(out, "pubsubshard_channels", &shared.pubsub.shard_channel_count());
            let cmds = &shared.intro.commands;
            kv(out, "total_error_replies", &cmds.total_error_replies.load(Ordering::Relaxed));
            kv(out, "unexpected_error_replies", &0);
            // MIGRATE connects anew each time: it caches no socket.
            kv(out, "migrate_cached_sockets", &0);
            let tracking = shared.store.tracking.figures();
            kv(out, "tracking_total_keys", &tracking.keys);
            kv(out, "tracking_total_items", &tracking.items);
            kv(out, "tracking_total_prefixes", &tracking.prefixes);
            // The collector of dead collection versions (gc.rs).
            let gc = &shared.store.gc;
            kv(out, "gc_versions_reclaimed", &gc.versions_reclaimed.load(Ordering::Relaxed));
            kv(out, "gc_records_deleted", &gc.records_deleted.load(Ordering::Relaxed));
            kv(out, "gc_versions_queued", &gc.pending());
            kv(out, "gc_registry_passes", &gc.passes.load(Ordering::Relaxed));
        }
        "replication" if store.cluster().is_some() => {
            out.push_str("# Replication\r\n");
            if let Some(c) = store.cluster() {
                super::cluster::info_replication(c, out, process_id_hex(1));
            }
        }
        "replication" => {
            out.push_str("# Replication\r\n");
            kv(out, "role", &"master");
            kv(out, "connected_slaves", &0);
            kv(out, "master_failover_state", &"no-failover");
            kv(out, "master_replid", &process_id_hex(1));
            kv(out, "master_replid2", &"0000000000000000000000000000000000000000");
            kv(out, "master_repl_offset", &0);
            kv(out, "second_repl_offset", &-1);
            kv(out, "repl_backlog_active", &0);
        }
        "cpu" => {
            out.push_str("# CPU\r\n");
            let t = cpu_times().unwrap_or_default();
            for (name, v) in ["used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"]
                .iter()
                .zip([t[1], t[0], t[3], t[2]])
            {
                kv(out, name, &format_args!("{v:.6}"));
            }
        }
        "modules" => out.push_str("# Modules\r\n"),
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            shared.intro.commands.write_commandstats(out);
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            shared.intro.commands.write_errorstats(out);
        }
        "latencystats" => {
            out.push_str("# Latencystats\r\n");
            let percentiles: Vec<f64> = cfg
                .get("latency-tracking-info-percentiles")
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            shared.intro.commands.write_latencystats(&percentiles, out);
        }
        "cluster" => {
            out.push_str("# Cluster\r\n");
            kv(out, "cluster_enabled", &u8::from(store.cluster().is_some()));
            if let Some(c) = store.cluster() {
                // Messages PUBLISH could not pass on to another node (issue 44).
                kv(out, "cluster_publish_dropped", &c.publish_dropped());
                // A slot's records copied in as tables, ingested by this member (store/tables.rs).
                let (tables, bytes) = c.tables_ingested();
                kv(out, "cluster_tables_ingested", &tables);
                kv(out, "cluster_table_bytes_ingested", &bytes);
            }
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            let db = &store.db();
            // NB: a scan of every key, on the server's one runtime thread (other clients wait meanwhile).
            let counts = keyspace_scan(db, now_ms());
            match counts {
                Ok(counts) => {
                    for (d, n, e) in counts {
                        kv(out, &format!("db{d}"), &format_args!("keys={n},expires={e},avg_ttl=0"));
                    }
                }
                Err(e) => kv(out, "keyspace_error", &e.to_string().replace(['\r', '\n'], " ")),
            }
        }
        _ => {}
    }
}

fn kv(out: &mut String, k: &str, v: &dyn std::fmt::Display) {
    let _ = write!(out, "{k}:{v}\r\n");
}
