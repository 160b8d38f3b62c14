//! ARCHITECTURE.md and README.md name files and modules; this test checks that every one of them exists, so the
//! map stays true to the code as files move.
//!
//! What counts as a path (the rule the first lines of ARCHITECTURE.md state), outside fenced code blocks:
//! - a backticked span without spaces made of `A-Z a-z 0-9 _ . / -` that starts with a root folder
//!   (`crates/`, `docs/`, `scripts/`, `fuzz/`, `.ci/`, `.config/`): it must exist from the workspace root;
//! - such a span ending in `.rs`: a file of the crate of its section. A heading naming `crates/NAME` sets that
//!   crate for the lines under it (down to the next heading of the same or a higher level); a path with a `/`
//!   is looked up under the crate's `src/`, the crate's folder, then `crates/`; a bare file name anywhere in the
//!   crate's folder. Without a crate, any crate will do;
//! - a backticked module path `a::b...` whose first segment is lowercase: that first segment must be a module
//!   (`a.rs` or `a/`) in the crate's `src/`, `tests/` or a test binary's folder `tests/BIN/` (after a leading
//!   crate name such as `shaledb::` or `shaledb_format::`, which switches to that crate). Later segments may
//!   be items and are not checked;
//! - outside backticks: a word starting with a root folder (`docs/durability.md`), up to the first character
//!   that is not `A-Z a-z 0-9 _ . / -`, trailing dots dropped; this covers relative Markdown link targets too.

use std::path::{Path, PathBuf};

const ROOTS: [&str; 6] = ["crates/", "docs/", "scripts/", "fuzz/", ".ci/", ".config/"];
const EXTERNAL: [&str; 3] = ["std", "core", "alloc"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// One name a document mentions, with what the check needs to find it.
#[derive(Debug, PartialEq)]
enum Mention {
    /// A path from the workspace root.
    Rooted(String),
    /// A `.rs` file of the section's crate (or of any crate).
    CrateFile(String),
    /// A module path: its segments, the crate prefix included if written.
    Module(Vec<String>),
}

/// The names one line mentions (outside fenced code), by the rule in this file's header.
fn mentions(line: &str) -> Vec<Mention> {
    let mut in_span = false;
    mentions_from(line, &mut in_span)
}

/// As [`mentions`], for a line that may start inside a backticked span begun on the line before (`in_span`,
/// updated for the next line). A span broken across lines holds a line break, so it is not a path.
fn mentions_from(line: &str, in_span: &mut bool) -> Vec<Mention> {
    let mut out = Vec::new();
    let pieces: Vec<&str> = line.split('`').collect();
    let last = pieces.len() - 1;
    for (i, piece) in pieces.iter().enumerate() {
        let span = (i % 2 == 1) != *in_span;
        let whole = (i > 0 || !*in_span) && i < last;
        if span {
            if whole {
                span_mention(piece, &mut out);
            }
        } else {
            prose_mentions(piece, &mut out);
        }
    }
    *in_span ^= last % 2 == 1;
    out
}

fn span_mention(span: &str, out: &mut Vec<Mention>) {
    if span.is_empty() || span.contains(char::is_whitespace) {
        return;
    }
    if span.contains("::") {
        let body = span.trim_end_matches("::*");
        let ok_chars = body.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        let first = body.split("::").next().unwrap_or("");
        let lower = first.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
        if ok_chars && lower && !EXTERNAL.contains(&first) {
            out.push(Mention::Module(body.split("::").map(str::to_string).collect()));
        }
        return;
    }
    if !span.chars().all(is_path_char) {
        return;
    }
    if ROOTS.iter().any(|r| span.starts_with(r)) {
        out.push(Mention::Rooted(span.to_string()));
    } else if span.ends_with(".rs") && !span.starts_with('.') && !span.starts_with('/') {
        out.push(Mention::CrateFile(span.to_string()));
    }
}

fn prose_mentions(text: &str, out: &mut Vec<Mention>) {
    let bytes = text.as_bytes();
    for root in ROOTS {
        let mut from = 0;
        while let Some(pos) = text[from..].find(root) {
            let start = from + pos;
            from = start + root.len();
            let word_start = start == 0 || !is_path_char(bytes[start - 1] as char);
            if !word_start {
                continue;
            }
            let len = text[start..].find(|c: char| !is_path_char(c)).unwrap_or(text.len() - start);
            let word = text[start..start + len].trim_end_matches('.');
            out.push(Mention::Rooted(word.to_string()));
        }
    }
}

/// The crate folder a heading names (`crates/NAME`), if any.
fn heading_crate(heading: &str) -> Option<String> {
    let at = heading.find("crates/")?;
    let name: String =
        heading[at + "crates/".len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    (!name.is_empty()).then_some(name)
}

fn crate_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn file_named_under(dir: &Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.filter_map(|e| e.ok()).any(|e| {
        let path = e.path();
        if path.is_dir() {
            e.file_name() != "target" && file_named_under(&path, name)
        } else {
            e.file_name() == name
        }
    })
}

fn crate_file_exists(root: &Path, krate: &str, file: &str) -> bool {
    let dir = root.join("crates").join(krate);
    if file.contains('/') {
        [dir.join("src"), dir.clone(), root.join("crates")].iter().any(|base| base.join(file).is_file())
    } else {
        file_named_under(&dir, file)
    }
}

fn module_exists(root: &Path, krate: &str, module: &str) -> bool {
    let dir = root.join("crates").join(krate);
    let is_module = |base: &Path| base.join(format!("{module}.rs")).is_file() || base.join(module).is_dir();
    // A test binary's folder (`tests/engine/`) holds modules too, named without the binary.
    let test_bins = std::fs::read_dir(dir.join("tests"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir());
    is_module(&dir.join("src")) || is_module(&dir.join("tests")) || test_bins.into_iter().any(|p| is_module(&p))
}

/// Whether a mention resolves, given the section's crate (None: any crate).
fn resolves(root: &Path, krate: Option<&str>, mention: &Mention) -> bool {
    let crates = crate_names(root);
    let candidates: Vec<&str> = match krate {
        Some(k) => vec![k],
        None => crates.iter().map(String::as_str).collect(),
    };
    match mention {
        Mention::Rooted(path) => root.join(path).exists(),
        Mention::CrateFile(file) => candidates.iter().any(|k| crate_file_exists(root, k, file)),
        Mention::Module(segments) => {
            let named = segments[0].replace('_', "-");
            let (candidates, rest): (Vec<&str>, &[String]) = if crates.contains(&named) {
                (vec![named.as_str()], &segments[1..])
            } else {
                (candidates, &segments[..])
            };
            match rest.first() {
                Some(first) if first.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') => {
                    candidates.iter().any(|k| module_exists(root, k, first))
                }
                _ => true,
            }
        }
    }
}

/// Every mention of `doc` (a file at the workspace root) that names nothing, as "FILE:LINE: ..." messages.
fn missing_in(root: &Path, doc: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
    check_text(root, doc, &text)
}

fn check_text(root: &Path, doc: &str, text: &str) -> Vec<String> {
    let mut missing = Vec::new();
    // The crate each open heading level set (index: level - 1).
    let mut levels: Vec<Option<String>> = Vec::new();
    let mut in_fence = false;
    let mut in_span = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            in_span = false; // a code span never crosses a paragraph
        }
        if line.starts_with('#') {
            let level = line.chars().take_while(|&c| c == '#').count();
            levels.truncate(level - 1);
            let inherited = levels.iter().rev().flatten().next().cloned();
            levels.resize(level - 1, None);
            levels.push(heading_crate(line).or(inherited));
        }
        let krate = levels.iter().rev().flatten().next().map(String::as_str);
        for mention in mentions_from(line, &mut in_span) {
            if !resolves(root, krate, &mention) {
                let under = krate.map_or("any crate".to_string(), |k| format!("crates/{k}"));
                missing.push(format!("{doc}:{}: {mention:?} names nothing (section crate: {under})", n + 1));
            }
        }
    }
    missing
}

#[test]
fn architecture_names_only_files_and_modules_that_exist() {
    let missing = missing_in(&workspace_root(), "ARCHITECTURE.md");
    assert!(missing.is_empty(), "ARCHITECTURE.md is out of date:\n{}", missing.join("\n"));
}

#[test]
fn readme_names_only_files_that_exist() {
    let missing = missing_in(&workspace_root(), "README.md");
    assert!(missing.is_empty(), "README.md is out of date:\n{}", missing.join("\n"));
}

#[test]
fn what_counts_as_a_path() {
    let m = |s: &str| mentions(s);
    assert_eq!(
        m("see `crates/shaledb/src/db/mod.rs` here"),
        vec![Mention::Rooted("crates/shaledb/src/db/mod.rs".into())]
    );
    assert_eq!(
        m("`db/read.rs` and `mod.rs`"),
        vec![Mention::CrateFile("db/read.rs".into()), Mention::CrateFile("mod.rs".into())]
    );
    assert_eq!(m("`picker::pick_manual`"), vec![Mention::Module(vec!["picker".into(), "pick_manual".into()])]);
    assert_eq!(m("(docs/durability.md, D5)."), vec![Mention::Rooted("docs/durability.md".into())]);
    assert_eq!(
        m("[docs/format/](docs/format/)"),
        vec![Mention::Rooted("docs/format/".into()), Mention::Rooted("docs/format/".into())]
    );
    // Prose, values and types are not paths.
    for prose in [
        "`db:u8 0x00 user_key`",
        "`get|scan`",
        "`Options::load_latest`",
        "`std::fs::File`",
        "`/tmp/db`",
        "`~/.cargo/bin`",
        "`target/release/shaledb`",
        "`lost/`",
        "mydocs/x.md",
    ] {
        assert_eq!(m(prose), vec![], "{prose}");
    }
}

#[test]
fn a_span_broken_across_lines_is_not_a_path() {
    let mut in_span = false;
    assert_eq!(mentions_from("see (`docs/no-such", &mut in_span), vec![]);
    assert!(in_span);
    assert_eq!(
        mentions_from("file.md`) and `db/read.rs`", &mut in_span),
        vec![Mention::CrateFile("db/read.rs".into())]
    );
    assert!(!in_span);
}

#[test]
fn a_missing_path_is_named_with_its_line_and_crate() {
    let root = workspace_root();
    let doc = "# Map\n\n`crates/shaledb/src/lib.rs`\n\n## The engine (crates/shaledb)\n\n`db/mod.rs`, `picker::pick`\n\
               `db/no_such_file.rs`\n```\n`crates/not-in-a-fence-check`\n```\n### Deeper\n`no_such_module::x`\n\
               ## Elsewhere\n`read.rs` and docs/no-such.md.\n";
    let missing = check_text(&root, "T.md", doc);
    assert_eq!(
        missing,
        vec![
            "T.md:8: CrateFile(\"db/no_such_file.rs\") names nothing (section crate: crates/shaledb)".to_string(),
            "T.md:13: Module([\"no_such_module\", \"x\"]) names nothing (section crate: crates/shaledb)".to_string(),
            "T.md:15: Rooted(\"docs/no-such.md\") names nothing (section crate: any crate)".to_string(),
        ]
    );
}
