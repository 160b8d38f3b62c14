//! One flag style across the subcommands.
//!
//! - `bench` keeps db_bench's names (`--value_size`, `--db`) and gflags' one-dash form (`-num=5`), so that
//!   db_bench command lines and scripts work unchanged; `server` keeps redis-server's (`--port`, `--dir`,
//!   `--appendfsync`), for the same reason.
//! - Every other command takes the database (or file) as its first positional argument and kebab-case flags:
//!   `shaledb stress DB --verify-only`, `shaledb dump FILE --keys-only`, `shaledb get DB KEY --read-only`.
//!
//! The spellings of the previous release are accepted for one more release, each with a warning on stderr:
//! `stress --path DB` (now the positional DB) and snake_case flags on the kebab-case commands
//! (`--keys_only`, `--verify_only`).

/// Commands whose flags are kebab-case with the database or file as the first positional argument.
const KEBAB_COMMANDS: &[&str] = &["dump", "verify", "repair", "stress", "get", "put", "delete", "scan"];

/// Rewrites a command line (program name first) to the current spellings. Returns the arguments to parse and
/// one warning per old spelling met.
pub fn respell(args: Vec<String>) -> (Vec<String>, Vec<String>) {
    let command = args.get(1).cloned().unwrap_or_default();
    if !KEBAB_COMMANDS.contains(&command.as_str()) {
        // gflags' `--undefok` (bench only), and its one-dash long flags (`-num=5`), as db_bench has them.
        use shaledb_bench::db_bench::flags;
        let (args, notes) = if command == "bench" { flags::apply_undefok(args) } else { (args, Vec::new()) };
        let args = args.into_iter().enumerate().map(|(i, a)| if i == 0 { a } else { flags::normalize_arg(a) });
        return (args.collect(), notes);
    }
    let mut out = Vec::with_capacity(args.len());
    let mut warnings = Vec::new();
    let mut rest = args.into_iter();
    out.extend(rest.by_ref().take(2));
    while let Some(a) = rest.next() {
        if a == "--" {
            // Everything after `--` is a positional argument (a key that starts with a dash).
            out.push(a);
            out.extend(rest.by_ref());
            break;
        }
        let Some(flag) = a.strip_prefix("--") else {
            out.push(a);
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (flag, None),
        };
        if command == "stress" && name == "path" {
            warnings.push(
                "`stress --path DB` is the old spelling, accepted until the next release: give the directory as \
                 the first argument (`shaledb stress DB ...`)"
                    .to_string(),
            );
            match value {
                Some(v) => out.push(v.to_string()),
                // The value follows; a missing one is clap's error (`stress` then lacks its DB argument).
                None => out.extend(rest.next()),
            }
            continue;
        }
        if name.contains('_') {
            let kebab = name.replace('_', "-");
            warnings.push(format!(
                "`--{name}` is the old spelling, accepted until the next release: use `--{kebab}` (shaledb {command} \
                 takes kebab-case flags; only `bench` keeps db_bench's snake_case names)"
            ));
            out.push(match value {
                Some(v) => format!("--{kebab}={v}"),
                None => format!("--{kebab}"),
            });
            continue;
        }
        out.push(a);
    }
    (out, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn old_spellings_become_the_current_ones_with_a_warning_each() {
        let (args, warnings) = respell(argv(&["shaledb", "stress", "--path", "/d", "--verify_only", "--keys=5"]));
        assert_eq!(args, argv(&["shaledb", "stress", "/d", "--verify-only", "--keys=5"]));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("--path") && warnings[1].contains("--verify-only"), "{warnings:?}");
        let (args, _) = respell(argv(&["shaledb", "stress", "--path=/d", "--max_value=7"]));
        assert_eq!(args, argv(&["shaledb", "stress", "/d", "--max-value=7"]));
        let (args, warnings) = respell(argv(&["shaledb", "dump", "f.sst", "--keys-only", "--", "--a_b"]));
        assert_eq!(args, argv(&["shaledb", "dump", "f.sst", "--keys-only", "--", "--a_b"]));
        assert!(warnings.is_empty());
        // `--path` is only stress's old flag.
        let (args, warnings) = respell(argv(&["shaledb", "scan", "--path", "x"]));
        assert_eq!((args, warnings.len()), (argv(&["shaledb", "scan", "--path", "x"]), 0));
    }

    #[test]
    fn bench_keeps_db_bench_spellings() {
        let (args, warnings) = respell(argv(&["shaledb", "bench", "-num=5", "--value_size=10", "--db=/x"]));
        assert_eq!(args, argv(&["shaledb", "bench", "--num=5", "--value_size=10", "--db=/x"]));
        assert!(warnings.is_empty());
    }
}
