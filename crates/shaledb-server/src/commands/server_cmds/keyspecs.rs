//! Where a command line's keys are and what it does with each, as Redis 7.0's `COMMAND GETKEYS`,
//! `COMMAND GETKEYSANDFLAGS` and `COMMAND INFO` (`movablekeys`) report them.
//!
//! [`KEY_SPECS`] holds facts about Redis 7.0's commands: the flags of each of their key specs, as its
//! `COMMAND INFO` lists them. A key of a command line is found from the table's first/last/step positions,
//! or, for the commands whose keys move (`movablekeys`: a `numkeys` argument, `STORE`, `STREAMS` ...), by
//! reading its arguments; each key is paired with the key spec it belongs to.

use crate::commands::Spec;
use bytes::Bytes;

/// Why the keys of a command line cannot be told.
pub enum KeysError {
    /// A `numkeys` that is not a number or asks for more keys than there are arguments.
    Invalid,
}

/// The key flags of a key spec (`None`: the command is not in the table or has fewer specs).
pub fn spec_flags(full_name: &str, spec: usize) -> Option<&'static [&'static str]> {
    KEY_SPECS.iter().find(|(n, _, _)| *n == full_name).and_then(|(_, specs, _)| specs.get(spec).copied())
}

/// True when the command's keys are found by reading its arguments.
#[cfg(test)]
pub fn movable(name: &str) -> bool {
    KEY_SPECS.iter().any(|(n, _, m)| *n == name && *m)
}

fn numkeys(args: &[Bytes], at: usize) -> Result<usize, KeysError> {
    let n = args.get(at).and_then(|a| crate::resp::parse_i64(a)).ok_or(KeysError::Invalid)?;
    if n < 0 || (n as usize) > args.len().saturating_sub(at + 1) {
        return Err(KeysError::Invalid);
    }
    Ok(n as usize)
}

/// The keys of the command line `args` (its name first) as `(argument index, key spec index)` pairs.
pub fn find(spec: &Spec, args: &[Bytes]) -> Result<Vec<(usize, usize)>, KeysError> {
    let sub = || args.get(1).map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).unwrap_or_default();
    let range = |from: usize, n: usize, spec: usize| (from..from + n).map(move |i| (i, spec));
    Ok(match spec.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop" | "bzmpop" => {
            range(3, numkeys(args, 2)?, 0).collect()
        }
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            range(2, numkeys(args, 1)?, 0).collect()
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            let n = numkeys(args, 2)?;
            std::iter::once((1, 0)).chain(range(3, n, 1)).collect()
        }
        "sort" | "sort_ro" => {
            let mut out = vec![(1, 0)];
            if spec.name == "sort" {
                // Only the last STORE is the destination (SORT writes to it), as Redis reports.
                let mut store = None;
                let mut i = 2;
                while i < args.len() {
                    let a = &args[i];
                    if a.eq_ignore_ascii_case(b"store") && i + 1 < args.len() {
                        store = Some((i + 1, 2));
                        i += 2;
                    } else if (a.eq_ignore_ascii_case(b"by") || a.eq_ignore_ascii_case(b"get")) && i + 1 < args.len() {
                        i += 2;
                    } else if a.eq_ignore_ascii_case(b"limit") {
                        i += 3;
                    } else {
                        i += 1;
                    }
                }
                out.extend(store);
            }
            out
        }
        "xread" | "xreadgroup" => {
            let Some(at) = args.iter().position(|a| a.eq_ignore_ascii_case(b"streams")) else {
                return Err(KeysError::Invalid);
            };
            let rest = args.len() - at - 1;
            if rest == 0 || !rest.is_multiple_of(2) {
                return Err(KeysError::Invalid);
            }
            range(at + 1, rest / 2, 0).collect()
        }
        "georadius" | "georadiusbymember" => {
            let mut out = vec![(1, 0)];
            for (i, a) in args.iter().enumerate().take(args.len().saturating_sub(1)).skip(2) {
                if a.eq_ignore_ascii_case(b"store") {
                    out.push((i + 1, 1));
                } else if a.eq_ignore_ascii_case(b"storedist") {
                    out.push((i + 1, 2));
                }
            }
            out
        }
        "migrate" => match args.iter().position(|a| a.eq_ignore_ascii_case(b"keys")) {
            Some(at) if args.get(3).is_some_and(|k| k.is_empty()) => range(at + 1, args.len() - at - 1, 1).collect(),
            _ if args.len() > 3 => vec![(3, 0)],
            _ => Vec::new(),
        },
        "memory" if sub() == "usage" && args.len() > 2 => vec![(2, 0)],
        "object" | "xinfo" | "xgroup" if args.len() > 2 && sub() != "help" => {
            if super::stats::full_name(spec.name, args.get(1).map(|a| &a[..])).is_some() {
                vec![(2, 0)]
            } else {
                Vec::new()
            }
        }
        _ => {
            if spec.first_key <= 0 || spec.step <= 0 {
                return Ok(Vec::new());
            }
            let argc = args.len() as i64;
            let last =
                if spec.last_key < 0 { argc + spec.last_key as i64 } else { (spec.last_key as i64).min(argc - 1) };
            let mut out = Vec::new();
            let mut i = spec.first_key as i64;
            let mut n = 0usize;
            while i <= last && i < argc {
                out.push((i as usize, n));
                n += 1;
                i += spec.step as i64;
            }
            // One key spec for a range of keys: every key belongs to the first spec when there is no other.
            let specs = KEY_SPECS.iter().find(|(name, _, _)| *name == spec.name).map_or(1, |(_, s, _)| s.len());
            out.into_iter().map(|(i, n)| (i, n.min(specs.saturating_sub(1)))).collect()
        }
    })
}

/// The flags `COMMAND GETKEYSANDFLAGS` shows for a key: its spec's, with the variable flags resolved as
/// Redis resolves them for the command line (SET without GET overwrites, BITFIELD with only GETs reads).
pub fn key_flags(spec: &Spec, args: &[Bytes], spec_index: usize) -> Vec<&'static str> {
    let full = match spec.name {
        "memory" | "object" | "xinfo" | "xgroup" => {
            super::stats::full_name(spec.name, args.get(1).map(|a| &a[..])).unwrap_or_else(|| spec.name.to_string())
        }
        n => n.to_string(),
    };
    let flags = spec_flags(&full, spec_index).unwrap_or(&[]);
    match spec.name {
        // The options start after the value: `SET k get` stores the word "get".
        "set" if !args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) => vec!["OW", "update"],
        "bitfield" if bitfield_reads_only(args) => vec!["RO", "access"],
        _ => flags.iter().copied().filter(|f| *f != "variable_flags").collect(),
    }
}

/// Whether a BITFIELD line only reads, judged as Redis judges it for its key flags: GET, OVERFLOW and
/// their arguments up to the first SET or INCRBY with its three arguments; anything else (a syntax
/// error included) counts as a write.
fn bitfield_reads_only(args: &[Bytes]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let rest = args.len() - i - 1;
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"get") && rest >= 2 {
            i += 3;
        } else if a.eq_ignore_ascii_case(b"overflow") && rest >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

/// The key flags of each key spec of Redis 7.0's commands (`COMMAND INFO`'s key specs), by full name, and
/// whether the command's keys are movable (found by parsing its arguments).
pub const KEY_SPECS: &[(&str, &[&[&str]], bool)] = &[
    ("acl", &[], false),
    ("acl|cat", &[], false),
    ("acl|deluser", &[], false),
    ("acl|dryrun", &[], false),
    ("acl|genpass", &[], false),
    ("acl|getuser", &[], false),
    ("acl|help", &[], false),
    ("acl|list", &[], false),
    ("acl|load", &[], false),
    ("acl|log", &[], false),
    ("acl|save", &[], false),
    ("acl|setuser", &[], false),
    ("acl|users", &[], false),
    ("acl|whoami", &[], false),
    ("append", &[&["RW", "insert"]], false),
    ("asking", &[], false),
    ("auth", &[], false),
    ("bgrewriteaof", &[], false),
    ("bgsave", &[], false),
    ("bitcount", &[&["RO", "access"]], false),
    ("bitfield", &[&["RW", "access", "update", "variable_flags"]], false),
    ("bitfield_ro", &[&["RO", "access"]], false),
    ("bitop", &[&["OW", "update"], &["RO", "access"]], false),
    ("bitpos", &[&["RO", "access"]], false),
    ("blmove", &[&["RW", "access", "delete"], &["RW", "insert"]], false),
    ("blmpop", &[&["RW", "access", "delete"]], true),
    ("blpop", &[&["RW", "access", "delete"]], false),
    ("brpop", &[&["RW", "access", "delete"]], false),
    ("brpoplpush", &[&["RW", "access", "delete"], &["RW", "insert"]], false),
    ("bzmpop", &[&["RW", "access", "delete"]], true),
    ("bzpopmax", &[&["RW", "access", "delete"]], false),
    ("bzpopmin", &[&["RW", "access", "delete"]], false),
    ("client", &[], false),
    ("client|caching", &[], false),
    ("client|getname", &[], false),
    ("client|getredir", &[], false),
    ("client|help", &[], false),
    ("client|id", &[], false),
    ("client|info", &[], false),
    ("client|kill", &[], false),
    ("client|list", &[], false),
    ("client|no-evict", &[], false),
    ("client|pause", &[], false),
    ("client|reply", &[], false),
    ("client|setname", &[], false),
    ("client|tracking", &[], false),
    ("client|trackinginfo", &[], false),
    ("client|unblock", &[], false),
    ("client|unpause", &[], false),
    ("cluster", &[], false),
    ("cluster|addslots", &[], false),
    ("cluster|addslotsrange", &[], false),
    ("cluster|bumpepoch", &[], false),
    ("cluster|count-failure-reports", &[], false),
    ("cluster|countkeysinslot", &[], false),
    ("cluster|delslots", &[], false),
    ("cluster|delslotsrange", &[], false),
    ("cluster|failover", &[], false),
    ("cluster|flushslots", &[], false),
    ("cluster|forget", &[], false),
    ("cluster|getkeysinslot", &[], false),
    ("cluster|help", &[], false),
    ("cluster|info", &[], false),
    ("cluster|keyslot", &[], false),
    ("cluster|links", &[], false),
    ("cluster|meet", &[], false),
    ("cluster|myid", &[], false),
    ("cluster|nodes", &[], false),
    ("cluster|replicas", &[], false),
    ("cluster|replicate", &[], false),
    ("cluster|reset", &[], false),
    ("cluster|saveconfig", &[], false),
    ("cluster|set-config-epoch", &[], false),
    ("cluster|setslot", &[], false),
    ("cluster|shards", &[], false),
    ("cluster|slaves", &[], false),
    ("cluster|slots", &[], false),
    ("command", &[], false),
    ("command|count", &[], false),
    ("command|docs", &[], false),
    ("command|getkeys", &[], false),
    ("command|getkeysandflags", &[], false),
    ("command|help", &[], false),
    ("command|info", &[], false),
    ("command|list", &[], false),
    ("config", &[], false),
    ("config|get", &[], false),
    ("config|help", &[], false),
    ("config|resetstat", &[], false),
    ("config|rewrite", &[], false),
    ("config|set", &[], false),
    ("copy", &[&["RO", "access"], &["OW", "update"]], false),
    ("dbsize", &[], false),
    ("debug", &[], false),
    ("decr", &[&["RW", "access", "update"]], false),
    ("decrby", &[&["RW", "access", "update"]], false),
    ("del", &[&["RM", "delete"]], false),
    ("discard", &[], false),
    ("dump", &[&["RO", "access"]], false),
    ("echo", &[], false),
    ("eval", &[&["RW", "access", "update"]], true),
    ("eval_ro", &[&["RO", "access"]], true),
    ("evalsha", &[&["RW", "access", "update"]], true),
    ("evalsha_ro", &[&["RO", "access"]], true),
    ("exec", &[], false),
    ("exists", &[&["RO"]], false),
    ("expire", &[&["RW", "update"]], false),
    ("expireat", &[&["RW", "update"]], false),
    ("expiretime", &[&["RO", "access"]], false),
    ("failover", &[], false),
    ("fcall", &[&["RW", "access", "update"]], true),
    ("fcall_ro", &[&["RO", "access"]], true),
    ("flushall", &[], false),
    ("flushdb", &[], false),
    ("function", &[], false),
    ("function|delete", &[], false),
    ("function|dump", &[], false),
    ("function|flush", &[], false),
    ("function|help", &[], false),
    ("function|kill", &[], false),
    ("function|list", &[], false),
    ("function|load", &[], false),
    ("function|restore", &[], false),
    ("function|stats", &[], false),
    ("geoadd", &[&["RW", "update"]], false),
    ("geodist", &[&["RO", "access"]], false),
    ("geohash", &[&["RO", "access"]], false),
    ("geopos", &[&["RO", "access"]], false),
    ("georadius", &[&["RO", "access"], &["OW", "update"], &["OW", "update"]], true),
    ("georadius_ro", &[&["RO", "access"]], false),
    ("georadiusbymember", &[&["RO", "access"], &["OW", "update"], &["OW", "update"]], true),
    ("georadiusbymember_ro", &[&["RO", "access"]], false),
    ("geosearch", &[&["RO", "access"]], false),
    ("geosearchstore", &[&["OW", "update"], &["RO", "access"]], false),
    ("get", &[&["RO", "access"]], false),
    ("getbit", &[&["RO", "access"]], false),
    ("getdel", &[&["RW", "access", "delete"]], false),
    ("getex", &[&["RW", "access", "update"]], false),
    ("getrange", &[&["RO", "access"]], false),
    ("getset", &[&["RW", "access", "update"]], false),
    ("hdel", &[&["RW", "delete"]], false),
    ("hello", &[], false),
    ("hexists", &[&["RO"]], false),
    ("hget", &[&["RO", "access"]], false),
    ("hgetall", &[&["RO", "access"]], false),
    ("hincrby", &[&["RW", "access", "update"]], false),
    ("hincrbyfloat", &[&["RW", "access", "update"]], false),
    ("hkeys", &[&["RO", "access"]], false),
    ("hlen", &[&["RO"]], false),
    ("hmget", &[&["RO", "access"]], false),
    ("hmset", &[&["RW", "update"]], false),
    ("hrandfield", &[&["RO", "access"]], false),
    ("hscan", &[&["RO", "access"]], false),
    ("hset", &[&["RW", "update"]], false),
    ("hsetnx", &[&["RW", "insert"]], false),
    ("hstrlen", &[&["RO"]], false),
    ("hvals", &[&["RO", "access"]], false),
    ("incr", &[&["RW", "access", "update"]], false),
    ("incrby", &[&["RW", "access", "update"]], false),
    ("incrbyfloat", &[&["RW", "access", "update"]], false),
    ("info", &[], false),
    ("keys", &[], false),
    ("lastsave", &[], false),
    ("latency", &[], false),
    ("latency|doctor", &[], false),
    ("latency|graph", &[], false),
    ("latency|help", &[], false),
    ("latency|histogram", &[], false),
    ("latency|history", &[], false),
    ("latency|latest", &[], false),
    ("latency|reset", &[], false),
    ("lcs", &[&["RO", "access"]], false),
    ("lindex", &[&["RO", "access"]], false),
    ("linsert", &[&["RW", "insert"]], false),
    ("llen", &[&["RO"]], false),
    ("lmove", &[&["RW", "access", "delete"], &["RW", "insert"]], false),
    ("lmpop", &[&["RW", "access", "delete"]], true),
    ("lolwut", &[], false),
    ("lpop", &[&["RW", "access", "delete"]], false),
    ("lpos", &[&["RO", "access"]], false),
    ("lpush", &[&["RW", "insert"]], false),
    ("lpushx", &[&["RW", "insert"]], false),
    ("lrange", &[&["RO", "access"]], false),
    ("lrem", &[&["RW", "delete"]], false),
    ("lset", &[&["RW", "update"]], false),
    ("ltrim", &[&["RW", "delete"]], false),
    ("memory", &[], false),
    ("memory|doctor", &[], false),
    ("memory|help", &[], false),
    ("memory|malloc-stats", &[], false),
    ("memory|purge", &[], false),
    ("memory|stats", &[], false),
    ("memory|usage", &[&["RO"]], false),
    ("mget", &[&["RO", "access"]], false),
    ("migrate", &[&["RW", "access", "delete"], &["RW", "access", "delete", "incomplete"]], true),
    ("module", &[], false),
    ("module|help", &[], false),
    ("module|list", &[], false),
    ("module|load", &[], false),
    ("module|loadex", &[], false),
    ("module|unload", &[], false),
    ("monitor", &[], false),
    ("move", &[&["RW", "access", "update"]], false),
    ("mset", &[&["OW", "update"]], false),
    ("msetnx", &[&["OW", "insert"]], false),
    ("multi", &[], false),
    ("object", &[], false),
    ("object|encoding", &[&["RO"]], false),
    ("object|freq", &[&["RO"]], false),
    ("object|help", &[], false),
    ("object|idletime", &[&["RO"]], false),
    ("object|refcount", &[&["RO"]], false),
    ("persist", &[&["RW", "update"]], false),
    ("pexpire", &[&["RW", "update"]], false),
    ("pexpireat", &[&["RW", "update"]], false),
    ("pexpiretime", &[&["RO", "access"]], false),
    ("pfadd", &[&["RW", "insert"]], false),
    ("pfcount", &[&["RW", "access"]], false),
    ("pfdebug", &[&["RW", "access"]], false),
    ("pfmerge", &[&["RW", "access", "insert"], &["RO", "access"]], false),
    ("pfselftest", &[], false),
    ("ping", &[], false),
    ("psetex", &[&["OW", "update"]], false),
    ("psubscribe", &[], false),
    ("psync", &[], false),
    ("pttl", &[&["RO", "access"]], false),
    ("publish", &[], false),
    ("pubsub", &[], false),
    ("pubsub|channels", &[], false),
    ("pubsub|help", &[], false),
    ("pubsub|numpat", &[], false),
    ("pubsub|numsub", &[], false),
    ("pubsub|shardchannels", &[], false),
    ("pubsub|shardnumsub", &[], false),
    ("punsubscribe", &[], false),
    ("quit", &[], false),
    ("randomkey", &[], false),
    ("readonly", &[], false),
    ("readwrite", &[], false),
    ("rename", &[&["RW", "access", "delete"], &["OW", "update"]], false),
    ("renamenx", &[&["RW", "access", "delete"], &["OW", "insert"]], false),
    ("replconf", &[], false),
    ("replicaof", &[], false),
    ("reset", &[], false),
    ("restore", &[&["OW", "update"]], false),
    ("restore-asking", &[&["OW", "update"]], false),
    ("role", &[], false),
    ("rpop", &[&["RW", "access", "delete"]], false),
    ("rpoplpush", &[&["RW", "access", "delete"], &["RW", "insert"]], false),
    ("rpush", &[&["RW", "insert"]], false),
    ("rpushx", &[&["RW", "insert"]], false),
    ("sadd", &[&["RW", "insert"]], false),
    ("save", &[], false),
    ("scan", &[], false),
    ("scard", &[&["RO"]], false),
    ("script", &[], false),
    ("script|debug", &[], false),
    ("script|exists", &[], false),
    ("script|flush", &[], false),
    ("script|help", &[], false),
    ("script|kill", &[], false),
    ("script|load", &[], false),
    ("sdiff", &[&["RO", "access"]], false),
    ("sdiffstore", &[&["OW", "update"], &["RO", "access"]], false),
    ("select", &[], false),
    ("set", &[&["RW", "access", "update", "variable_flags"]], false),
    ("setbit", &[&["RW", "access", "update"]], false),
    ("setex", &[&["OW", "update"]], false),
    ("setnx", &[&["OW", "insert"]], false),
    ("setrange", &[&["RW", "update"]], false),
    ("shutdown", &[], false),
    ("sinter", &[&["RO", "access"]], false),
    ("sintercard", &[&["RO", "access"]], true),
    ("sinterstore", &[&["RW", "update"], &["RO", "access"]], false),
    ("sismember", &[&["RO"]], false),
    ("slaveof", &[], false),
    ("slowlog", &[], false),
    ("slowlog|get", &[], false),
    ("slowlog|help", &[], false),
    ("slowlog|len", &[], false),
    ("slowlog|reset", &[], false),
    ("smembers", &[&["RO", "access"]], false),
    ("smismember", &[&["RO", "access"]], false),
    ("smove", &[&["RW", "access", "delete"], &["RW", "insert"]], false),
    ("sort", &[&["RO", "access"], &["RO", "access"], &["OW", "update"]], true),
    ("sort_ro", &[&["RO", "access"], &["RO", "access"]], true),
    ("spop", &[&["RW", "access", "delete"]], false),
    ("spublish", &[&["not_key"]], false),
    ("srandmember", &[&["RO", "access"]], false),
    ("srem", &[&["RW", "delete"]], false),
    ("sscan", &[&["RO", "access"]], false),
    ("ssubscribe", &[&["not_key"]], false),
    ("strlen", &[&["RO"]], false),
    ("subscribe", &[], false),
    ("substr", &[&["RO", "access"]], false),
    ("sunion", &[&["RO", "access"]], false),
    ("sunionstore", &[&["OW", "update"], &["RO", "access"]], false),
    ("sunsubscribe", &[&["not_key"]], false),
    ("swapdb", &[], false),
    ("sync", &[], false),
    ("time", &[], false),
    ("touch", &[&["RO"]], false),
    ("ttl", &[&["RO", "access"]], false),
    ("type", &[&["RO"]], false),
    ("unlink", &[&["RM", "delete"]], false),
    ("unsubscribe", &[], false),
    ("unwatch", &[], false),
    ("wait", &[], false),
    ("watch", &[&["RO"]], false),
    ("xack", &[&["RW", "update"]], false),
    ("xadd", &[&["RW", "update"]], false),
    ("xautoclaim", &[&["RW", "delete"]], false),
    ("xclaim", &[&["RW", "update"]], false),
    ("xdel", &[&["RW", "delete"]], false),
    ("xgroup", &[], false),
    ("xgroup|create", &[&["RW", "insert"]], false),
    ("xgroup|createconsumer", &[&["RW", "insert"]], false),
    ("xgroup|delconsumer", &[&["RW", "delete"]], false),
    ("xgroup|destroy", &[&["RW", "delete"]], false),
    ("xgroup|help", &[], false),
    ("xgroup|setid", &[&["RW", "update"]], false),
    ("xinfo", &[], false),
    ("xinfo|consumers", &[&["RO", "access"]], false),
    ("xinfo|groups", &[&["RO", "access"]], false),
    ("xinfo|help", &[], false),
    ("xinfo|stream", &[&["RO", "access"]], false),
    ("xlen", &[&["RO"]], false),
    ("xpending", &[&["RO", "access"]], false),
    ("xrange", &[&["RO", "access"]], false),
    ("xread", &[&["RO", "access"]], true),
    ("xreadgroup", &[&["RO", "access"]], true),
    ("xrevrange", &[&["RO", "access"]], false),
    ("xsetid", &[&["RW", "update"]], false),
    ("xtrim", &[&["RW", "delete"]], false),
    ("zadd", &[&["RW", "update"]], false),
    ("zcard", &[&["RO"]], false),
    ("zcount", &[&["RO", "access"]], false),
    ("zdiff", &[&["RO", "access"]], true),
    ("zdiffstore", &[&["OW", "update"], &["RO", "access"]], true),
    ("zincrby", &[&["RW", "access", "update"]], false),
    ("zinter", &[&["RO", "access"]], true),
    ("zintercard", &[&["RO", "access"]], true),
    ("zinterstore", &[&["OW", "update"], &["RO", "access"]], true),
    ("zlexcount", &[&["RO", "access"]], false),
    ("zmpop", &[&["RW", "access", "delete"]], true),
    ("zmscore", &[&["RO", "access"]], false),
    ("zpopmax", &[&["RW", "access", "delete"]], false),
    ("zpopmin", &[&["RW", "access", "delete"]], false),
    ("zrandmember", &[&["RO", "access"]], false),
    ("zrange", &[&["RO", "access"]], false),
    ("zrangebylex", &[&["RO", "access"]], false),
    ("zrangebyscore", &[&["RO", "access"]], false),
    ("zrangestore", &[&["OW", "update"], &["RO", "access"]], false),
    ("zrank", &[&["RO", "access"]], false),
    ("zrem", &[&["RW", "delete"]], false),
    ("zremrangebylex", &[&["RW", "delete"]], false),
    ("zremrangebyrank", &[&["RW", "delete"]], false),
    ("zremrangebyscore", &[&["RW", "delete"]], false),
    ("zrevrange", &[&["RO", "access"]], false),
    ("zrevrangebylex", &[&["RO", "access"]], false),
    ("zrevrangebyscore", &[&["RO", "access"]], false),
    ("zrevrank", &[&["RO", "access"]], false),
    ("zscan", &[&["RO", "access"]], false),
    ("zscore", &[&["RO", "access"]], false),
    ("zunion", &[&["RO", "access"]], true),
    ("zunionstore", &[&["OW", "update"], &["RO", "access"]], true),
];
