//! The directives of Redis 7.0's config file (redis.conf) and its `CONFIG GET` parameters: their names, Redis's
//! defaults, which are aliases of which, and which `CONFIG SET` cannot change. These are facts about Redis
//! 7.0 (its configuration table, as `CONFIG GET *` of a 7.0 server lists it, plus the hidden and the
//! file-only directives); this server honours a few of them (`config.rs`, [`super::PARAMETERS`]) and stores
//! the others, which change nothing here.

/// Every parameter of Redis 7.0 under its canonical name, with Redis's default as `CONFIG GET` prints it.
/// Three defaults are this server's instead of Redis's, because they describe what this server does: `save`
/// is empty (no periodic snapshot; Redis's default is `3600 1 300 100 60 10000`), `appendonly` is `yes`
/// (every write goes to the WAL; Redis's is `no`), and `dir` is filled in from the configuration.
pub const PARAMETERS: &[(&str, &str)] = &[
    ("acl-pubsub-default", "resetchannels"),
    ("aclfile", ""),
    ("acllog-max-len", "128"),
    ("active-defrag-cycle-max", "25"),
    ("active-defrag-cycle-min", "1"),
    ("active-defrag-ignore-bytes", "104857600"),
    ("active-defrag-max-scan-fields", "1000"),
    ("active-defrag-threshold-lower", "10"),
    ("active-defrag-threshold-upper", "100"),
    ("active-expire-effort", "1"),
    ("activedefrag", "no"),
    ("activerehashing", "yes"),
    ("always-show-logo", "no"),
    ("aof-disable-auto-gc", "no"),
    ("aof-load-truncated", "yes"),
    ("aof-rewrite-incremental-fsync", "yes"),
    ("aof-timestamp-enabled", "no"),
    ("aof-use-rdb-preamble", "yes"),
    ("aof_rewrite_cpulist", ""),
    ("appenddirname", "appendonlydir"),
    ("appendfilename", "appendonly.aof"),
    ("appendfsync", "everysec"),
    ("appendonly", "yes"),
    ("auto-aof-rewrite-min-size", "67108864"),
    ("auto-aof-rewrite-percentage", "100"),
    ("bgsave_cpulist", ""),
    ("bind", "127.0.0.1"),
    ("bind-source-addr", ""),
    ("bio_cpulist", ""),
    ("busy-reply-threshold", "5000"),
    ("client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    ("client-query-buffer-limit", "1073741824"),
    ("cluster-allow-pubsubshard-when-down", "yes"),
    ("cluster-allow-reads-when-down", "no"),
    ("cluster-allow-replica-migration", "yes"),
    ("cluster-announce-bus-port", "0"),
    ("cluster-announce-hostname", ""),
    ("cluster-announce-ip", ""),
    ("cluster-announce-port", "0"),
    ("cluster-announce-tls-port", "0"),
    ("cluster-config-file", "nodes.conf"),
    ("cluster-enabled", "no"),
    ("cluster-link-sendbuf-limit", "0"),
    ("cluster-migration-barrier", "1"),
    ("cluster-node-timeout", "15000"),
    ("cluster-port", "0"),
    ("cluster-preferred-endpoint-type", "ip"),
    ("cluster-replica-no-failover", "no"),
    ("cluster-replica-validity-factor", "10"),
    ("cluster-require-full-coverage", "yes"),
    ("crash-log-enabled", "yes"),
    ("crash-memcheck-enabled", "yes"),
    ("daemonize", "no"),
    ("databases", "16"),
    ("dbfilename", "dump.rdb"),
    ("dir", ""),
    ("disable-thp", "yes"),
    ("dynamic-hz", "yes"),
    ("enable-debug-command", "no"),
    ("enable-module-command", "no"),
    ("enable-protected-configs", "no"),
    ("hash-max-listpack-entries", "512"),
    ("hash-max-listpack-value", "64"),
    ("hll-sparse-max-bytes", "3000"),
    ("hz", "10"),
    ("ignore-warnings", ""),
    ("io-threads", "1"),
    ("io-threads-do-reads", "no"),
    ("jemalloc-bg-thread", "yes"),
    ("latency-monitor-threshold", "0"),
    ("latency-tracking", "yes"),
    ("latency-tracking-info-percentiles", "50 99 99.9"),
    ("lazyfree-lazy-eviction", "no"),
    ("lazyfree-lazy-expire", "no"),
    ("lazyfree-lazy-server-del", "no"),
    ("lazyfree-lazy-user-del", "no"),
    ("lazyfree-lazy-user-flush", "no"),
    ("lfu-decay-time", "1"),
    ("lfu-log-factor", "10"),
    ("list-compress-depth", "0"),
    ("list-max-listpack-size", "-2"),
    ("logfile", ""),
    ("loglevel", "notice"),
    ("masterauth", ""),
    ("masteruser", ""),
    ("maxclients", "10000"),
    ("maxmemory", "0"),
    ("maxmemory-clients", "0"),
    ("maxmemory-eviction-tenacity", "10"),
    ("maxmemory-policy", "noeviction"),
    ("maxmemory-samples", "5"),
    ("min-replicas-max-lag", "10"),
    ("min-replicas-to-write", "0"),
    ("no-appendfsync-on-rewrite", "no"),
    ("notify-keyspace-events", ""),
    ("oom-score-adj", "no"),
    ("oom-score-adj-values", "0 200 800"),
    ("pidfile", ""),
    ("port", "6379"),
    ("proc-title-template", "{title} {listen-addr} {server-mode}"),
    ("propagation-error-behavior", "ignore"),
    ("protected-mode", "yes"),
    ("proto-max-bulk-len", "536870912"),
    ("rdb-del-sync-files", "no"),
    ("rdb-save-incremental-fsync", "yes"),
    ("rdbchecksum", "yes"),
    ("rdbcompression", "yes"),
    ("repl-backlog-size", "1048576"),
    ("repl-backlog-ttl", "3600"),
    ("repl-disable-tcp-nodelay", "no"),
    ("repl-diskless-load", "disabled"),
    ("repl-diskless-sync", "yes"),
    ("repl-diskless-sync-delay", "5"),
    ("repl-diskless-sync-max-replicas", "0"),
    ("repl-ping-replica-period", "10"),
    ("repl-timeout", "60"),
    ("replica-announce-ip", ""),
    ("replica-announce-port", "0"),
    ("replica-announced", "yes"),
    ("replica-ignore-disk-write-errors", "no"),
    ("replica-ignore-maxmemory", "yes"),
    ("replica-lazy-flush", "no"),
    ("replica-priority", "100"),
    ("replica-read-only", "yes"),
    ("replica-serve-stale-data", "yes"),
    ("replicaof", ""),
    ("requirepass", ""),
    ("sanitize-dump-payload", "no"),
    ("save", ""),
    ("server_cpulist", ""),
    ("set-max-intset-entries", "512"),
    ("set-proc-title", "yes"),
    ("shutdown-on-sigint", "default"),
    ("shutdown-on-sigterm", "default"),
    ("shutdown-timeout", "10"),
    ("slowlog-log-slower-than", "10000"),
    ("slowlog-max-len", "128"),
    ("socket-mark-id", "0"),
    ("stop-writes-on-bgsave-error", "yes"),
    ("stream-node-max-bytes", "4096"),
    ("stream-node-max-entries", "100"),
    ("supervised", "no"),
    ("syslog-enabled", "no"),
    ("syslog-facility", "local0"),
    ("syslog-ident", "redis"),
    ("tcp-backlog", "511"),
    ("tcp-keepalive", "300"),
    ("timeout", "0"),
    ("tls-auth-clients", "yes"),
    ("tls-ca-cert-dir", ""),
    ("tls-ca-cert-file", ""),
    ("tls-cert-file", ""),
    ("tls-ciphers", ""),
    ("tls-ciphersuites", ""),
    ("tls-client-cert-file", ""),
    ("tls-client-key-file", ""),
    ("tls-client-key-file-pass", ""),
    ("tls-cluster", "no"),
    ("tls-dh-params-file", ""),
    ("tls-key-file", ""),
    ("tls-key-file-pass", ""),
    ("tls-port", "0"),
    ("tls-prefer-server-ciphers", "no"),
    ("tls-protocols", ""),
    ("tls-replication", "no"),
    ("tls-session-cache-size", "20480"),
    ("tls-session-cache-timeout", "300"),
    ("tls-session-caching", "yes"),
    ("tracking-table-max-keys", "1000000"),
    ("unixsocket", ""),
    ("unixsocketperm", "0"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    // Hidden in Redis 7.0 (not listed by `CONFIG GET *` there, but accepted in a file and by CONFIG SET).
    ("key-load-delay", "0"),
    ("loading-process-events-interval-bytes", "2097152"),
    ("lua-enable-deprecated-api", "no"),
    ("rdb-key-save-delay", "0"),
    ("use-exit-on-panic", "no"),
    ("watchdog-period", "0"),
];

/// Parameters Redis 7.0 hides: `CONFIG GET` answers them when named exactly, never for a pattern.
pub const HIDDEN: &[&str] = &[
    "key-load-delay",
    "loading-process-events-interval-bytes",
    "lua-enable-deprecated-api",
    "rdb-key-save-delay",
    "use-exit-on-panic",
    "watchdog-period",
];

/// Old names Redis 7.0 still accepts, each with the parameter it stands for.
pub const ALIASES: &[(&str, &str)] = &[
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    ("cluster-slave-validity-factor", "cluster-replica-validity-factor"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-priority", "replica-priority"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slaveof", "replicaof"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
];

/// Parameters Redis 7.0 refuses to change with `CONFIG SET` ("can't set immutable config" or "protected").
pub const IMMUTABLE: &[&str] = &[
    "aclfile",
    "always-show-logo",
    "aof_rewrite_cpulist",
    "appenddirname",
    "appendfilename",
    "bgsave_cpulist",
    "bio_cpulist",
    "cluster-config-file",
    "cluster-enabled",
    "cluster-port",
    "daemonize",
    "databases",
    "dbfilename",
    "dir",
    "disable-thp",
    "enable-debug-command",
    "enable-module-command",
    "enable-protected-configs",
    "io-threads",
    "io-threads-do-reads",
    "logfile",
    "pidfile",
    "rdbchecksum",
    "replicaof",
    "server_cpulist",
    "set-proc-title",
    "socket-mark-id",
    "supervised",
    "syslog-enabled",
    "syslog-facility",
    "syslog-ident",
    "tcp-backlog",
    "unixsocket",
    "unixsocketperm",
];

/// Directives of a Redis 7.0 config file that are not `CONFIG GET` parameters: `include` (read here), the
/// repeated ones (`rename-command`, `user`, `loadmodule`), `sentinel` (Redis Sentinel's), and the deprecated
/// ones Redis 7.0 still accepts and ignores.
pub const FILE_ONLY: &[&str] = &[
    "include",
    "rename-command",
    "user",
    "loadmodule",
    "sentinel",
    "lua-replicate-commands",
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
];

/// Parameters whose value is several words (`save 900 1 300 10`), each given as separate arguments in a file.
pub const MULTI_WORD: &[&str] = &[
    "save",
    "client-output-buffer-limit",
    "oom-score-adj-values",
    "latency-tracking-info-percentiles",
    "bind",
    "replicaof",
];

/// Parameters whose default is `yes` or `no` but that take other words too (so they are not checked as
/// yes/no).
const NOT_BOOLEAN: &[&str] =
    &["oom-score-adj", "enable-protected-configs", "enable-debug-command", "enable-module-command"];

/// The canonical name of a Redis 7.0 parameter or alias (`None`: not a parameter).
pub fn canonical(name: &str) -> Option<&'static str> {
    if let Some((_, c)) = ALIASES.iter().find(|(a, _)| *a == name) {
        return Some(c);
    }
    PARAMETERS.iter().find(|(n, _)| *n == name).map(|(n, _)| *n)
}

/// Redis's default of a canonical parameter (as adjusted in [`PARAMETERS`]).
pub fn default_of(canonical: &str) -> &'static str {
    PARAMETERS.iter().find(|(n, _)| *n == canonical).map_or("", |(_, d)| *d)
}

/// Every name `CONFIG GET` matches: each parameter and each alias.
pub fn all_names() -> impl Iterator<Item = &'static str> {
    PARAMETERS.iter().map(|(n, _)| *n).chain(ALIASES.iter().map(|(a, _)| *a))
}

/// True for a name a Redis 7.0 config file may hold.
pub fn is_directive(name: &str) -> bool {
    canonical(name).is_some() || FILE_ONLY.contains(&name)
}

/// Checks and normalises a value for a parameter this server stores without applying: yes/no parameters
/// take yes or no, numeric ones a number (memory units allowed, stored in bytes), `save` pairs of numbers,
/// `client-output-buffer-limit` classes with three limits each (merged into `old`). Other values are stored
/// as given.
pub fn normalise(canonical: &str, value: &str, old: &str) -> Result<String, String> {
    let default = default_of(canonical);
    match canonical {
        "save" => {
            let words: Vec<&str> = value.split_whitespace().collect();
            if !words.len().is_multiple_of(2) || words.iter().any(|w| w.parse::<u64>().is_err()) {
                return Err("save takes pairs of numbers: <seconds> <changes> ... (or \"\")".into());
            }
            return Ok(words.join(" "));
        }
        "client-output-buffer-limit" => return merge_output_limits(old, value),
        "notify-keyspace-events" => {
            let flags = crate::notify::parse(value.as_bytes()).ok_or(crate::notify::BAD_CLASS)?;
            return Ok(crate::notify::format(flags));
        }
        "latency-tracking-info-percentiles" => {
            let mut out = Vec::new();
            for w in value.split_whitespace() {
                let p: f64 = w
                    .parse()
                    .ok()
                    .filter(|p: &f64| p.is_finite())
                    .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
                if !(0.0..=100.0).contains(&p) {
                    return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                }
                let s = format!("{p:.6}");
                out.push(s.trim_end_matches('0').trim_end_matches('.').to_string());
            }
            return Ok(out.join(" "));
        }
        _ => {}
    }
    if let Some((_, min, max, kind)) = NUMERIC.iter().find(|(n, ..)| *n == canonical) {
        return check_numeric(value, *min, *max, *kind);
    }
    if let Some((_, words)) = ENUMS.iter().find(|(n, _)| *n == canonical) {
        let lower = value.to_ascii_lowercase();
        return match words.iter().find(|w| **w == lower) {
            Some(w) => Ok(w.to_string()),
            None => Err(format!("argument(s) must be one of the following: {}", words.join(", "))),
        };
    }
    if (default == "yes" || default == "no") && !NOT_BOOLEAN.contains(&canonical) {
        return match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        };
    }
    if default.parse::<i64>().is_ok() {
        let (neg, digits) = match value.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, value),
        };
        let percent = digits.strip_suffix('%');
        return match (percent, super::parse_memory(digits)) {
            (Some(p), _) if !neg && p.parse::<u64>().is_ok() => Ok(value.to_string()),
            (_, Some(n)) => Ok(if neg { format!("-{n}") } else { n.to_string() }),
            _ => Err("argument couldn't be parsed into an integer".into()),
        };
    }
    Ok(value.to_string())
}

/// How a numeric parameter's value is written: a plain integer, a memory size (`1mb`), an octal number, or
/// a memory size or a percentage (`10%`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numeric {
    Int,
    Memory,
    Octal,
    MemoryOrPercent,
}

const INT_MAX: i128 = i32::MAX as i128;
const INT_MIN: i128 = i32::MIN as i128;
const LONG_MAX: i128 = i64::MAX as i128;
const UINT_MAX: i128 = u32::MAX as i128;
const ULLONG_MAX: i128 = u64::MAX as i128;

/// Redis 7.0's numeric parameters with the bounds `CONFIG SET` checks (`argument must be between <min> and
/// <max> inclusive`). The honoured ones (`maxclients`, `timeout`, `port` ...) are checked in `config.rs`.
pub const NUMERIC: &[(&str, i128, i128, Numeric)] = &[
    ("active-defrag-cycle-max", 1, 99, Numeric::Int),
    ("active-defrag-cycle-min", 1, 99, Numeric::Int),
    ("active-defrag-ignore-bytes", 1, LONG_MAX, Numeric::Memory),
    ("active-defrag-max-scan-fields", 1, LONG_MAX, Numeric::Int),
    ("active-defrag-threshold-lower", 0, 1000, Numeric::Int),
    ("active-defrag-threshold-upper", 0, 1000, Numeric::Int),
    ("active-expire-effort", 1, 10, Numeric::Int),
    ("acllog-max-len", 0, LONG_MAX, Numeric::Int),
    ("auto-aof-rewrite-min-size", 0, LONG_MAX, Numeric::Memory),
    ("auto-aof-rewrite-percentage", 0, INT_MAX, Numeric::Int),
    ("busy-reply-threshold", 0, LONG_MAX, Numeric::Int),
    ("cluster-announce-bus-port", 0, 65535, Numeric::Int),
    ("cluster-announce-port", 0, 65535, Numeric::Int),
    ("cluster-announce-tls-port", 0, 65535, Numeric::Int),
    ("cluster-link-sendbuf-limit", 0, ULLONG_MAX, Numeric::Memory),
    ("cluster-migration-barrier", 0, INT_MAX, Numeric::Int),
    ("cluster-node-timeout", 0, LONG_MAX, Numeric::Int),
    ("cluster-port", 0, 65535, Numeric::Int),
    ("cluster-replica-validity-factor", 0, INT_MAX, Numeric::Int),
    ("hash-max-listpack-entries", 0, LONG_MAX, Numeric::Int),
    ("hash-max-listpack-value", 0, LONG_MAX, Numeric::Memory),
    ("hll-sparse-max-bytes", 0, LONG_MAX, Numeric::Memory),
    ("hz", 0, INT_MAX, Numeric::Int),
    ("io-threads", 1, 128, Numeric::Int),
    ("key-load-delay", INT_MIN, INT_MAX, Numeric::Int),
    ("latency-monitor-threshold", 0, LONG_MAX, Numeric::Int),
    ("lfu-decay-time", 0, INT_MAX, Numeric::Int),
    ("lfu-log-factor", 0, INT_MAX, Numeric::Int),
    ("list-compress-depth", 0, INT_MAX, Numeric::Int),
    ("list-max-listpack-size", INT_MIN, INT_MAX, Numeric::Int),
    ("loading-process-events-interval-bytes", 1024, INT_MAX, Numeric::Int),
    ("maxmemory", 0, ULLONG_MAX, Numeric::Memory),
    ("maxmemory-clients", -100, LONG_MAX, Numeric::MemoryOrPercent),
    ("maxmemory-eviction-tenacity", 0, 100, Numeric::Int),
    ("maxmemory-samples", 1, INT_MAX, Numeric::Int),
    ("min-replicas-max-lag", 0, INT_MAX, Numeric::Int),
    ("min-replicas-to-write", 0, INT_MAX, Numeric::Int),
    ("rdb-key-save-delay", INT_MIN, INT_MAX, Numeric::Int),
    ("repl-backlog-size", 1, LONG_MAX, Numeric::Memory),
    ("repl-backlog-ttl", 0, LONG_MAX, Numeric::Int),
    ("repl-diskless-sync-delay", 0, INT_MAX, Numeric::Int),
    ("repl-diskless-sync-max-replicas", 0, INT_MAX, Numeric::Int),
    ("repl-ping-replica-period", 1, INT_MAX, Numeric::Int),
    ("repl-timeout", 1, INT_MAX, Numeric::Int),
    ("replica-announce-port", 0, 65535, Numeric::Int),
    ("replica-priority", 0, INT_MAX, Numeric::Int),
    ("set-max-intset-entries", 0, LONG_MAX, Numeric::Int),
    ("shutdown-timeout", 0, INT_MAX, Numeric::Int),
    ("slowlog-log-slower-than", -1, LONG_MAX, Numeric::Int),
    ("slowlog-max-len", 0, LONG_MAX, Numeric::Int),
    ("socket-mark-id", 0, UINT_MAX, Numeric::Int),
    ("stream-node-max-bytes", 0, LONG_MAX, Numeric::Memory),
    ("stream-node-max-entries", 0, LONG_MAX, Numeric::Int),
    ("tcp-backlog", 0, INT_MAX, Numeric::Int),
    ("tcp-keepalive", 0, INT_MAX, Numeric::Int),
    ("tls-port", 0, 65535, Numeric::Int),
    ("tls-session-cache-size", 0, INT_MAX, Numeric::Int),
    ("tls-session-cache-timeout", 0, INT_MAX, Numeric::Int),
    ("tracking-table-max-keys", 0, LONG_MAX, Numeric::Int),
    ("unixsocketperm", 0, 0o777, Numeric::Octal),
    ("watchdog-period", 0, INT_MAX, Numeric::Int),
    ("zset-max-listpack-entries", 0, LONG_MAX, Numeric::Int),
    ("zset-max-listpack-value", 0, LONG_MAX, Numeric::Memory),
];

/// Redis 7.0's parameters that take one word of a fixed list (`argument(s) must be one of the following:
/// ...`), the list in Redis's order.
pub const ENUMS: &[(&str, &[&str])] = &[
    ("acl-pubsub-default", &["allchannels", "resetchannels"]),
    ("cluster-preferred-endpoint-type", &["ip", "hostname", "unknown-endpoint"]),
    ("enable-debug-command", &["no", "yes", "local"]),
    ("enable-module-command", &["no", "yes", "local"]),
    ("enable-protected-configs", &["no", "yes", "local"]),
    ("loglevel", &["debug", "verbose", "notice", "warning"]),
    (
        "maxmemory-policy",
        &[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ],
    ),
    ("oom-score-adj", &["no", "yes", "relative", "absolute"]),
    ("propagation-error-behavior", &["ignore", "panic", "panic-on-replicas"]),
    ("repl-diskless-load", &["disabled", "on-empty-db", "swapdb"]),
    ("sanitize-dump-payload", &["no", "yes", "clients"]),
    ("supervised", &["upstart", "systemd", "auto", "no"]),
    ("syslog-facility", &["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]),
    ("tls-auth-clients", &["no", "yes", "optional"]),
];

/// A numeric parameter's value checked as Redis 7.0 checks it, as `CONFIG GET` prints it (memory sizes in
/// bytes, percentages as given, octal as given).
fn check_numeric(value: &str, min: i128, max: i128, kind: Numeric) -> Result<String, String> {
    let (n, shown): (i128, Option<String>) = match kind {
        Numeric::Int => match crate::resp::parse_i64(value.as_bytes()) {
            Some(n) => (n as i128, None),
            None => return Err("argument couldn't be parsed into an integer".into()),
        },
        Numeric::Octal => match i64::from_str_radix(value, 8) {
            Ok(n) if !value.starts_with('+') => (n as i128, Some(format!("{n:o}"))),
            _ => return Err("argument couldn't be parsed as an octal number".into()),
        },
        Numeric::Memory | Numeric::MemoryOrPercent => {
            let mem = (!value.starts_with('-')).then(|| super::parse_memory(value)).flatten();
            let pct = value
                .strip_suffix('%')
                .filter(|_| kind == Numeric::MemoryOrPercent && value.len() > 1)
                .and_then(|d| crate::resp::parse_i64(d.as_bytes()))
                .filter(|p| *p >= 0);
            match (mem, pct) {
                // Redis keeps a percentage as a negative number: its lower bound is minus the largest one.
                (_, Some(p)) => {
                    if -(p as i128) < min {
                        return Err(format!("percentage argument must be less or equal to {}", -min));
                    }
                    return Ok(format!("{p}%"));
                }
                (Some(m), None) => (m as i128, None),
                (None, None) if kind == Numeric::Memory => return Err("argument must be a memory value".into()),
                (None, None) => return Err("argument must be a memory or percent value".into()),
            }
        }
    };
    if n < min || n > max {
        if kind == Numeric::Octal {
            return Err(format!("argument must be between {min:o} and {max:o} inclusive"));
        }
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(shown.unwrap_or_else(|| n.to_string()))
}

/// `client-output-buffer-limit <class> <hard> <soft> <seconds> ...` merged into the current value (every
/// class kept, the given ones replaced; `replica` is written `slave` as Redis prints it).
fn merge_output_limits(old: &str, value: &str) -> Result<String, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("client-output-buffer-limit takes <class> <hard> <soft> <seconds> groups".into());
    }
    let old_words: Vec<&str> = old.split_whitespace().collect();
    let mut classes: Vec<(String, [String; 3])> = old_words
        .chunks(4)
        .filter(|c| c.len() == 4)
        .map(|c| (c[0].to_string(), [c[1].to_string(), c[2].to_string(), c[3].to_string()]))
        .collect();
    for g in words.chunks(4) {
        let class = match g[0].to_ascii_lowercase().as_str() {
            "normal" => "normal",
            "replica" | "slave" => "slave",
            "pubsub" => "pubsub",
            _ => return Err(format!("invalid client class '{}' (normal, replica or pubsub)", g[0])),
        };
        let hard = super::parse_memory(g[1]).ok_or("invalid hard limit")?;
        let soft = super::parse_memory(g[2]).ok_or("invalid soft limit")?;
        let secs: u64 = g[3].parse().map_err(|_| "invalid soft limit seconds")?;
        let limits = [hard.to_string(), soft.to_string(), secs.to_string()];
        match classes.iter_mut().find(|(c, _)| c == class) {
            Some((_, l)) => *l = limits,
            None => classes.push((class.to_string(), limits)),
        }
    }
    Ok(classes.iter().map(|(c, l)| format!("{c} {} {} {}", l[0], l[1], l[2])).collect::<Vec<_>>().join(" "))
}
