//! Writing and parsing the text of an OPTIONS file (the grammar is in `mod.rs` and docs/format/options.md).

use super::fields::{Field, Section, FIELDS};
use super::{LoadedOptions, FORMAT_MAJOR, FORMAT_MINOR, HEADER};
use crate::options::Options;
use shaledb_vfs::{Error, Result};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

const VERSION: &str = "Version";
const TITLES: [(Section, &str); 3] = [
    (Section::Db, "DBOptions"),
    (Section::Cf, "CFOptions \"default\""),
    (Section::Table, "TableOptions/BlockBasedTable \"default\""),
];

/// The file's text for `opts`.
pub(super) fn render(opts: &Options) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{HEADER} (docs/format/options.md), written by every open of the database.");
    s.push_str("# Sections and option names follow RocksDB's OPTIONS file; read it with Options::load_latest.\n");
    let _ = write!(
        s,
        "\n[{VERSION}]\n  shaledb_version={}\n  options_file_version={FORMAT_MAJOR}.{FORMAT_MINOR}\n",
        env!("CARGO_PKG_VERSION")
    );
    for (section, title) in TITLES {
        let _ = write!(s, "\n[{title}]\n");
        for f in FIELDS.iter().filter(|f| f.section == section) {
            let _ = writeln!(s, "  {}={}", f.name, (f.get)(opts));
        }
    }
    s
}

/// Where an option was read: its line number (from 1) and the line's byte offset.
struct Line {
    number: usize,
    offset: u64,
}

/// A section and its options (name, value, line).
struct SectionText<'a> {
    title: &'a str,
    line: usize,
    offset: u64,
    options: Vec<(&'a str, &'a str, Line)>,
}

/// The line without its comment: everything from the first `#` not escaped by `\`.
fn strip_comment(line: &str) -> &str {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '#' => return &line[..i],
            _ => {}
        }
    }
    line
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Parses `data`, read from `path`. Every error names the file, the line and its byte offset.
pub(super) fn parse(data: &[u8], path: &Path) -> Result<LoadedOptions> {
    let bad = |line: usize, offset: u64, what: String| Error::corruption(path, offset, format!("line {line}: {what}"));
    let sections = split_sections(data, &bad)?;
    let mut it = sections.into_iter();
    let version = it.next().ok_or_else(|| bad(1, 0, "no [Version] section: not an OPTIONS file".into()))?;
    if version.title != VERSION {
        return Err(bad(
            version.line,
            version.offset,
            format!("the first section is [{}], not [Version]", version.title),
        ));
    }
    let minor = check_version(&version, path, &bad)?;
    let mut loaded = LoadedOptions {
        options: Options::default(),
        merge_operator_name: None,
        compaction_filter_name: None,
        path: path.to_path_buf(),
    };
    // Where each `Options` field was read, to name the line when the whole set fails validation.
    let mut lines: HashMap<&str, (usize, u64)> = HashMap::new();
    let (mut last_line, mut last_offset) = (version.line, version.offset);
    for (section, title) in TITLES {
        let Some(s) = it.next() else {
            return Err(bad(
                last_line,
                last_offset,
                format!("the file ends before the [{title}] section (truncated?)"),
            ));
        };
        if s.title != title {
            return Err(bad(s.line, s.offset, format!("expected section [{title}], found [{}]", s.title)));
        }
        (last_line, last_offset) = s.options.last().map_or((s.line, s.offset), |(_, _, l)| (l.number, l.offset));
        let mut seen = vec![false; FIELDS.len()];
        for (name, value, line) in &s.options {
            let Some(i) = FIELDS.iter().position(|f| f.section == section && f.name == *name) else {
                if minor > FORMAT_MINOR {
                    continue; // written by a newer ShaleDB of the same major version
                }
                return Err(bad(line.number, line.offset, format!("unknown option {name:?} in [{title}]")));
            };
            let f: &Field = &FIELDS[i];
            seen[i] = true;
            (f.set)(&mut loaded, value).map_err(|e| bad(line.number, line.offset, format!("{name}: {e}")))?;
            for field in f.fields {
                lines.insert(field, (line.number, line.offset));
            }
        }
        // Not an older minor version: every option must be there.
        if minor.checked_sub(FORMAT_MINOR).is_some() {
            if let Some(f) = FIELDS.iter().enumerate().find(|(i, f)| f.section == section && !seen[*i]).map(|x| x.1) {
                return Err(bad(
                    s.line,
                    s.offset,
                    format!("[{title}] lacks option {} (truncated or edited file?)", f.name),
                ));
            }
        }
    }
    if let Some(extra) = it.next() {
        return Err(bad(extra.line, extra.offset, format!("unknown section [{}] after the last one", extra.title)));
    }
    if let Err(e) = loaded.options.validate() {
        let msg = e.to_string();
        let first = msg.trim_start_matches("invalid argument: ");
        let word: String = first.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let (line, offset) = lines.get(word.as_str()).copied().unwrap_or((last_line, last_offset));
        return Err(bad(line, offset, format!("the options are not valid: {msg}")));
    }
    Ok(loaded)
}

/// Checks `[Version]`; returns the file's minor version.
fn check_version(version: &SectionText<'_>, path: &Path, bad: &dyn Fn(usize, u64, String) -> Error) -> Result<u32> {
    let (mut file_version, mut shaledb_version) = (None, false);
    for (name, value, line) in &version.options {
        match *name {
            "options_file_version" => file_version = Some((*value, line)),
            "shaledb_version" => shaledb_version = true,
            _ => return Err(bad(line.number, line.offset, format!("unknown option {name:?} in [Version]"))),
        }
    }
    if !shaledb_version {
        return Err(bad(version.line, version.offset, "[Version] lacks shaledb_version".into()));
    }
    let Some((v, line)) = file_version else {
        return Err(bad(version.line, version.offset, "[Version] lacks options_file_version".into()));
    };
    let parsed = v.split_once('.').and_then(|(a, b)| {
        let num = |s: &str| super::fields::int::<u32>(s).ok().filter(|_| !s.starts_with('-'));
        Some((num(a)?, num(b)?))
    });
    let Some((major, minor)) = parsed else {
        return Err(bad(line.number, line.offset, format!("options_file_version {v:?} is not MAJOR.MINOR")));
    };
    if major != FORMAT_MAJOR {
        return Err(Error::NotSupported(format!(
            "{}: line {}: options_file_version {v} is not supported (this ShaleDB reads version {FORMAT_MAJOR}.x)",
            path.display(),
            line.number
        )));
    }
    Ok(minor)
}

/// Splits the file into its sections, checking the syntax of every line, that no section appears twice and
/// no option twice in one section.
fn split_sections<'a>(data: &'a [u8], bad: &dyn Fn(usize, u64, String) -> Error) -> Result<Vec<SectionText<'a>>> {
    let mut sections: Vec<SectionText<'a>> = Vec::new();
    let mut offset = 0u64;
    let mut rest = data;
    let mut number = 0usize;
    while !rest.is_empty() {
        number += 1;
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Err(bad(number, offset, "the last line has no newline (truncated file)".into()));
        };
        let raw = &rest[..end];
        let line_offset = offset;
        rest = &rest[end + 1..];
        offset += end as u64 + 1;
        let text = std::str::from_utf8(raw).map_err(|_| bad(number, line_offset, "not UTF-8 text".into()))?;
        let text = strip_comment(text).trim();
        if text.is_empty() {
            continue;
        }
        if let Some(title) = text.strip_prefix('[') {
            let title = title
                .strip_suffix(']')
                .ok_or_else(|| bad(number, line_offset, format!("{text:?}: a section title ends with ]")))?;
            let known = title == VERSION || TITLES.iter().any(|(_, t)| *t == title);
            if !known {
                return Err(bad(number, line_offset, format!("unknown section [{title}]")));
            }
            if let Some(s) = sections.iter().find(|s| s.title == title) {
                return Err(bad(number, line_offset, format!("section [{title}] twice (first at line {})", s.line)));
            }
            sections.push(SectionText { title, line: number, offset: line_offset, options: Vec::new() });
            continue;
        }
        let Some((name, value)) = text.split_once('=') else {
            return Err(bad(number, line_offset, format!("{text:?} is neither a [section] nor name=value")));
        };
        let (name, value) = (name.trim(), value.trim());
        if !is_name(name) {
            return Err(bad(number, line_offset, format!("{name:?} is not an option name")));
        }
        let Some(section) = sections.last_mut() else {
            return Err(bad(number, line_offset, format!("option {name:?} before any section")));
        };
        if let Some((_, _, first)) = section.options.iter().find(|(n, _, _)| *n == name) {
            return Err(bad(
                number,
                line_offset,
                format!("option {name:?} twice in [{}] (first at line {})", section.title, first.number),
            ));
        }
        section.options.push((name, value, Line { number, offset: line_offset }));
    }
    Ok(sections)
}
