//! The subcommands of the container commands (CONFIG, OBJECT, XGROUP ...) as `COMMAND INFO` lists them in
//! its tenth field: each with Redis 7.0's arity, flags and key positions, so a client that finds a command's
//! keys from `COMMAND` (redis-py's `CommandsParser`: `OBJECT ENCODING key`, `MEMORY USAGE key`) finds them
//! here too. The handler is the container's own: the container parses its subcommand.

use crate::commands::flags::*;
use crate::commands::Spec;

/// Full name (`container|sub`), arity, flags and `[first_key, last_key, step]`, by container.
const SUBCOMMANDS: &[(&str, i32, u32, [i32; 3])] = &[
    ("acl|cat", -2, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|deluser", -3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|dryrun", -4, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|genpass", -2, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|getuser", 3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|help", 2, LOADING | STALE, [0, 0, 0]),
    ("acl|list", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|load", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|log", -2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|save", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|setuser", -3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|users", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("acl|whoami", 2, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|caching", 3, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|getname", 2, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|getredir", 2, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|help", 2, LOADING | STALE, [0, 0, 0]),
    ("client|id", 2, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|info", 2, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|list", -2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|reply", 3, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|setname", 3, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|tracking", -3, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|trackinginfo", 2, NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|unblock", -3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("client|unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("command|count", 2, LOADING | STALE, [0, 0, 0]),
    ("command|docs", -2, LOADING | STALE, [0, 0, 0]),
    ("command|getkeys", -4, LOADING | STALE, [0, 0, 0]),
    ("command|getkeysandflags", -4, LOADING | STALE, [0, 0, 0]),
    ("command|help", 2, LOADING | STALE, [0, 0, 0]),
    ("command|info", -2, LOADING | STALE, [0, 0, 0]),
    ("command|list", -2, LOADING | STALE, [0, 0, 0]),
    ("config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("config|help", 2, LOADING | STALE, [0, 0, 0]),
    ("config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("config|rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("function|delete", 3, WRITE | NOSCRIPT, [0, 0, 0]),
    ("function|dump", 2, NOSCRIPT, [0, 0, 0]),
    ("function|flush", -2, WRITE | NOSCRIPT, [0, 0, 0]),
    ("function|help", 2, LOADING | STALE, [0, 0, 0]),
    ("function|kill", 2, NOSCRIPT, [0, 0, 0]),
    ("function|list", -2, NOSCRIPT, [0, 0, 0]),
    ("function|load", -3, WRITE | DENYOOM | NOSCRIPT, [0, 0, 0]),
    ("function|restore", -3, WRITE | DENYOOM | NOSCRIPT, [0, 0, 0]),
    ("function|stats", 2, NOSCRIPT, [0, 0, 0]),
    ("latency|doctor", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("latency|graph", 3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("latency|help", 2, LOADING | STALE, [0, 0, 0]),
    ("latency|histogram", -2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("latency|history", 3, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("latency|latest", 2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("latency|reset", -2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0]),
    ("memory|doctor", 2, 0, [0, 0, 0]),
    ("memory|help", 2, LOADING | STALE, [0, 0, 0]),
    ("memory|malloc-stats", 2, 0, [0, 0, 0]),
    ("memory|purge", 2, 0, [0, 0, 0]),
    ("memory|stats", 2, 0, [0, 0, 0]),
    ("memory|usage", -3, READONLY, [2, 2, 1]),
    ("module|help", 2, LOADING | STALE, [0, 0, 0]),
    ("module|list", 2, ADMIN | NOSCRIPT, [0, 0, 0]),
    ("module|load", -3, ADMIN | NOSCRIPT, [0, 0, 0]),
    ("module|loadex", -3, ADMIN | NOSCRIPT, [0, 0, 0]),
    ("module|unload", 3, ADMIN | NOSCRIPT, [0, 0, 0]),
    ("object|encoding", 3, READONLY, [2, 2, 1]),
    ("object|freq", 3, READONLY, [2, 2, 1]),
    ("object|help", 2, LOADING | STALE, [0, 0, 0]),
    ("object|idletime", 3, READONLY, [2, 2, 1]),
    ("object|refcount", 3, READONLY, [2, 2, 1]),
    ("pubsub|channels", -2, PUBSUB | LOADING | STALE, [0, 0, 0]),
    ("pubsub|help", 2, LOADING | STALE, [0, 0, 0]),
    ("pubsub|numpat", 2, PUBSUB | LOADING | STALE, [0, 0, 0]),
    ("pubsub|numsub", -2, PUBSUB | LOADING | STALE, [0, 0, 0]),
    ("pubsub|shardchannels", -2, PUBSUB | LOADING | STALE, [0, 0, 0]),
    ("pubsub|shardnumsub", -2, PUBSUB | LOADING | STALE, [0, 0, 0]),
    ("script|debug", 3, NOSCRIPT, [0, 0, 0]),
    ("script|exists", -3, NOSCRIPT, [0, 0, 0]),
    ("script|flush", -2, NOSCRIPT, [0, 0, 0]),
    ("script|help", 2, LOADING | STALE, [0, 0, 0]),
    ("script|kill", 2, NOSCRIPT, [0, 0, 0]),
    ("script|load", 3, NOSCRIPT | STALE, [0, 0, 0]),
    ("slowlog|get", -2, ADMIN | LOADING | STALE, [0, 0, 0]),
    ("slowlog|help", 2, LOADING | STALE, [0, 0, 0]),
    ("slowlog|len", 2, ADMIN | LOADING | STALE, [0, 0, 0]),
    ("slowlog|reset", 2, ADMIN | LOADING | STALE, [0, 0, 0]),
    ("xgroup|create", -5, WRITE | DENYOOM, [2, 2, 1]),
    ("xgroup|createconsumer", 5, WRITE | DENYOOM, [2, 2, 1]),
    ("xgroup|delconsumer", 5, WRITE, [2, 2, 1]),
    ("xgroup|destroy", 4, WRITE, [2, 2, 1]),
    ("xgroup|help", 2, LOADING | STALE, [0, 0, 0]),
    ("xgroup|setid", -5, WRITE, [2, 2, 1]),
    ("xinfo|consumers", 4, READONLY, [2, 2, 1]),
    ("xinfo|groups", 3, READONLY, [2, 2, 1]),
    ("xinfo|help", 2, LOADING | STALE, [0, 0, 0]),
    ("xinfo|stream", -3, READONLY, [2, 2, 1]),
];

/// The subcommands of `parent` as [`Spec`]s (none for a command without subcommands).
pub fn of(parent: &Spec) -> Vec<Spec> {
    SUBCOMMANDS
        .iter()
        .filter(|(name, ..)| name.split_once('|').is_some_and(|(p, _)| p == parent.name))
        .map(|&(name, arity, flags, [first_key, last_key, step])| Spec {
            name,
            arity,
            flags,
            first_key,
            last_key,
            step,
            handler: parent.handler,
            summary: "",
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_container_with_subcommands_is_a_command_of_this_server() {
        for (name, ..) in super::SUBCOMMANDS {
            let (parent, _) = name.split_once('|').expect("container|sub");
            let spec = crate::commands::lookup(parent.as_bytes()).unwrap_or_else(|| panic!("no command {parent}"));
            assert!(super::of(spec).iter().any(|s| s.name == *name));
        }
        let object = crate::commands::lookup(b"object").expect("OBJECT");
        let enc = super::of(object).into_iter().find(|s| s.name == "object|encoding").expect("object|encoding");
        assert_eq!((enc.arity, enc.first_key, enc.last_key, enc.step), (3, 2, 2, 1));
        assert!(super::of(crate::commands::lookup(b"get").expect("GET")).is_empty());
    }
}
