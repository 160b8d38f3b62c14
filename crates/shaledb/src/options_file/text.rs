//! Writing and parsing the text of an OPTIONS file (the grammar is in `mod.rs` and docs/format/options.md).

use super::fields::{Field, Section, FIELDS};
use super::{LoadedColumnFamily, LoadedOptions, FORMAT_MAJOR, FORMAT_MINOR, HEADER};
use crate::options::family::FAMILY_OWN_FIELDS;
use crate::options::Options;
use crate::version_set::DEFAULT_FAMILY_NAME;
use shaledb_format::edit::check_family_name;
use shaledb_vfs::{Error, Result};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

const VERSION: &str = "Version";
const DB_TITLE: &str = "DBOptions";
const CF_TITLE: &str = "CFOptions";
const TABLE_TITLE: &str = "TableOptions/BlockBasedTable";
/// The first minor version with a section pair per named column family (before it, only `"default"`'s).
const FAMILIES_MINOR: u32 = 2;
/// The `[DBOptions]` line (since 1.2) saying how many named families' section pairs follow the default's, so
/// that a file cut between two families' sections is an error, not a load missing families. In `[DBOptions]`
/// and not `[Version]`: a 1.1 reader ignores an unknown option of a newer minor there, and so still loads the
/// file of a database without named families.
const NAMED_FAMILIES: &str = "named_column_families";

/// A section's title, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Title {
    Version,
    Db,
    /// `CFOptions "name"`.
    Cf(String),
    /// `TableOptions/BlockBasedTable "name"`.
    Table(String),
}

impl Title {
    fn text(&self) -> String {
        match self {
            Title::Version => VERSION.to_string(),
            Title::Db => DB_TITLE.to_string(),
            Title::Cf(name) => format!("{CF_TITLE} {}", quote(name)),
            Title::Table(name) => format!("{TABLE_TITLE} {}", quote(name)),
        }
    }
}

/// A family name as a section title writes it: in double quotes, with `\` and `"` preceded by `\`, `#`
/// written `\#` (else it would start a comment), newline, carriage return and tab written `\n`, `\r`, `\t`,
/// and every other control character `\u{HEX}`. `"default"` is written as is.
pub(super) fn quote(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        match c {
            '\\' | '"' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The inverse of [`quote`]: `s` is the whole quoted string, quotes included. Also accepts `\:` (RocksDB's
/// escaping of a string value); any other escape, an unescaped `"` inside, or a missing quote is an error.
pub(super) fn unquote(s: &str) -> std::result::Result<String, String> {
    let inner = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|_| s.len() >= 2)
        .ok_or_else(|| format!("{s} is not a name in double quotes"))?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Err(format!("{s}: a \" inside the name must be written \\\"")),
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('t') => out.push('\t'),
                Some(c @ ('\\' | '"' | '#' | ':')) => out.push(c),
                Some('u') => {
                    let rest = chars.as_str();
                    let hex = rest
                        .strip_prefix('{')
                        .and_then(|r| r.split_once('}'))
                        .map(|(h, _)| h)
                        .filter(|h| !h.is_empty() && h.len() <= 6 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                        .ok_or_else(|| format!("{s}: \\u must be followed by {{1 to 6 hex digits}}"))?;
                    let c = u32::from_str_radix(hex, 16)
                        .ok()
                        .and_then(char::from_u32)
                        .ok_or_else(|| format!("{s}: \\u{{{hex}}} is not a character"))?;
                    out.push(c);
                    chars = rest[hex.len() + 2..].chars();
                }
                Some(c) => return Err(format!("{s}: unknown escape \\{c}")),
                None => return Err(format!("{s} ends with an unpaired \\")),
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The file's text for the database options `opts` (also the default family's) and the named column
/// families `families` (name and options, in id order; the default family is not among them).
pub(super) fn render(opts: &Options, families: &[(&str, &Options)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{HEADER} (docs/format/options.md), written by every open of the database.");
    s.push_str("# Sections and option names follow RocksDB's OPTIONS file; read it with Options::load_latest.\n");
    let _ = write!(
        s,
        "\n[{VERSION}]\n  shaledb_version={}\n  options_file_version={FORMAT_MAJOR}.{FORMAT_MINOR}\n",
        env!("CARGO_PKG_VERSION")
    );
    let mut section = |title: Title, section: Section, o: &Options| {
        let _ = write!(s, "\n[{}]\n", title.text());
        for f in FIELDS.iter().filter(|f| f.section == section) {
            let _ = writeln!(s, "  {}={}", f.name, (f.get)(o));
        }
        if section == Section::Db {
            let _ = writeln!(s, "  {NAMED_FAMILIES}={}", families.len());
        }
    };
    section(Title::Db, Section::Db, opts);
    let default = std::iter::once((DEFAULT_FAMILY_NAME, opts));
    for (name, o) in default.chain(families.iter().copied()) {
        section(Title::Cf(name.to_string()), Section::Cf, o);
        section(Title::Table(name.to_string()), Section::Table, o);
    }
    s
}

/// Where an option was read: its line number (from 1) and the line's byte offset.
#[derive(Clone, Copy)]
struct Line {
    number: usize,
    offset: u64,
}

/// A section and its options (name, value, line).
struct SectionText<'a> {
    title: Title,
    line: Line,
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

type Bad<'b> = &'b dyn Fn(Line, String) -> Error;

/// Parses `data`, read from `path`. Every error names the file, the line and its byte offset.
pub(super) fn parse(data: &[u8], path: &Path) -> Result<LoadedOptions> {
    let bad = |line: Line, what: String| Error::corruption(path, line.offset, format!("line {}: {what}", line.number));
    let sections = split_sections(data, &bad)?;
    let mut it = sections.into_iter();
    let first_line = Line { number: 1, offset: 0 };
    let version = it.next().ok_or_else(|| bad(first_line, "no [Version] section: not an OPTIONS file".into()))?;
    if version.title != Title::Version {
        return Err(bad(version.line, format!("the first section is [{}], not [Version]", version.title.text())));
    }
    let minor = check_version(&version, path, &bad)?;
    let mut loaded = LoadedOptions {
        options: Options::default(),
        merge_operator_name: None,
        compaction_filter_name: None,
        column_families: Vec::new(),
        path: path.to_path_buf(),
    };
    // Where each `Options` field was read, to name the line when the whole set fails validation.
    let mut lines: HashMap<&str, Line> = HashMap::new();
    let mut last = version.line;
    let mut named_families: Option<(usize, Line)> = None;
    let default = DEFAULT_FAMILY_NAME.to_string();
    for (section, title) in
        [(Section::Db, Title::Db), (Section::Cf, Title::Cf(default.clone())), (Section::Table, Title::Table(default))]
    {
        let Some(s) = it.next() else {
            return Err(bad(last, format!("the file ends before the [{}] section (truncated?)", title.text())));
        };
        if s.title != title {
            return Err(bad(s.line, format!("expected section [{}], found [{}]", title.text(), s.title.text())));
        }
        let mut s = s;
        if section == Section::Db && minor >= FAMILIES_MINOR {
            let Some(at) = s.options.iter().position(|(name, _, _)| *name == NAMED_FAMILIES) else {
                return Err(bad(
                    s.line,
                    format!("[{DB_TITLE}] lacks option {NAMED_FAMILIES} (truncated or edited file?)"),
                ));
            };
            let (_, value, line) = s.options.remove(at);
            let n = super::fields::int::<usize>(value).map_err(|e| bad(line, format!("{NAMED_FAMILIES}: {e}")))?;
            named_families = Some((n, line));
        }
        last = read_section(&s, section, &mut loaded, minor, &mut lines, &bad)?;
    }
    validate(&loaded.options, &lines, last, "", &bad)?;
    // The named families: [CFOptions "name"] then [TableOptions/BlockBasedTable "name"], each.
    while let Some(cf) = it.next() {
        let Title::Cf(name) = &cf.title else {
            return Err(bad(cf.line, format!("expected a [{CF_TITLE} \"name\"] section, found [{}]", cf.title.text())));
        };
        if minor < FAMILIES_MINOR {
            return Err(bad(
                cf.line,
                format!(
                    "[{}]: options_file_version {FORMAT_MAJOR}.{minor} has no sections of named column families \
                     (added in {FORMAT_MAJOR}.{FAMILIES_MINOR})",
                    cf.title.text()
                ),
            ));
        }
        let table_title = Title::Table(name.clone());
        let Some(table) = it.next().filter(|t| t.title == table_title) else {
            return Err(bad(
                cf.line,
                format!("[{}] is not followed by its [{}] section", cf.title.text(), table_title.text()),
            ));
        };
        let mut family = LoadedOptions {
            options: loaded.options.clone(),
            merge_operator_name: None,
            compaction_filter_name: None,
            column_families: Vec::new(),
            path: path.to_path_buf(),
        };
        let mut fam_lines: HashMap<&str, Line> = HashMap::new();
        read_section(&cf, Section::Cf, &mut family, minor, &mut fam_lines, &bad)?;
        let fam_last = read_section(&table, Section::Table, &mut family, minor, &mut fam_lines, &bad)?;
        // The options that are the database's, not the family's, must be the default family's.
        for f in FIELDS.iter().filter(|f| f.section != Section::Db) {
            if f.fields.iter().all(|x| FAMILY_OWN_FIELDS.contains(x)) {
                continue;
            }
            let (theirs, ours) = ((f.get)(&family.options), (f.get)(&loaded.options));
            if theirs != ours {
                let at = f.fields.first().and_then(|x| fam_lines.get(x)).copied().unwrap_or(cf.line);
                return Err(bad(
                    at,
                    format!(
                        "{} of column family {} is {theirs}, but the default family's is {ours}: it is an option of \
                         the database, the same in every family",
                        f.name,
                        quote(name)
                    ),
                ));
            }
        }
        validate(&family.options, &fam_lines, fam_last, &format!("column family {}: ", quote(name)), &bad)?;
        loaded.column_families.push(LoadedColumnFamily {
            name: name.clone(),
            options: family.options,
            merge_operator_name: family.merge_operator_name,
            compaction_filter_name: family.compaction_filter_name,
        });
    }
    if let Some((n, line)) = named_families.filter(|(n, _)| *n != loaded.column_families.len()) {
        return Err(bad(
            line,
            format!(
                "{NAMED_FAMILIES}={n}, but the file holds the sections of {} named column families (truncated?)",
                loaded.column_families.len()
            ),
        ));
    }
    Ok(loaded)
}

/// Reads the options of section `s` (of kind `section`) into `target`; returns the section's last line.
fn read_section<'a>(
    s: &SectionText<'a>,
    section: Section,
    target: &mut LoadedOptions,
    minor: u32,
    lines: &mut HashMap<&'a str, Line>,
    bad: Bad<'_>,
) -> Result<Line> {
    let mut seen = vec![false; FIELDS.len()];
    for (name, value, line) in &s.options {
        let Some(i) = FIELDS.iter().position(|f| f.section == section && f.name == *name) else {
            if minor > FORMAT_MINOR {
                continue; // written by a newer ShaleDB of the same major version
            }
            return Err(bad(*line, format!("unknown option {name:?} in [{}]", s.title.text())));
        };
        let f: &Field = &FIELDS[i];
        seen[i] = true;
        (f.set)(target, value).map_err(|e| bad(*line, format!("{name}: {e}")))?;
        for field in f.fields {
            lines.insert(field, *line);
        }
    }
    // Not an older minor version: every option must be there.
    if minor >= FORMAT_MINOR {
        if let Some(f) = FIELDS.iter().enumerate().find(|(i, f)| f.section == section && !seen[*i]).map(|x| x.1) {
            return Err(bad(
                s.line,
                format!("[{}] lacks option {} (truncated or edited file?)", s.title.text(), f.name),
            ));
        }
    }
    Ok(s.options.last().map_or(s.line, |(_, _, l)| *l))
}

/// `Options::validate` on options read, the error naming the line of the option it names (else `last`).
fn validate(opts: &Options, lines: &HashMap<&str, Line>, last: Line, whose: &str, bad: Bad<'_>) -> Result<()> {
    let Err(e) = opts.validate() else { return Ok(()) };
    let msg = e.to_string();
    let first = msg.trim_start_matches("invalid argument: ");
    let word: String = first.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let line = lines.get(word.as_str()).copied().unwrap_or(last);
    Err(bad(line, format!("{whose}the options are not valid: {msg}")))
}

/// Checks `[Version]`; returns the file's minor version.
fn check_version(version: &SectionText<'_>, path: &Path, bad: Bad<'_>) -> Result<u32> {
    let (mut file_version, mut shaledb_version) = (None, false);
    for (name, value, line) in &version.options {
        match *name {
            "options_file_version" => file_version = Some((*value, line)),
            "shaledb_version" => shaledb_version = true,
            _ => return Err(bad(*line, format!("unknown option {name:?} in [Version]"))),
        }
    }
    if !shaledb_version {
        return Err(bad(version.line, "[Version] lacks shaledb_version".into()));
    }
    let Some((v, line)) = file_version else {
        return Err(bad(version.line, "[Version] lacks options_file_version".into()));
    };
    let parsed = v.split_once('.').and_then(|(a, b)| {
        let num = |s: &str| super::fields::int::<u32>(s).ok().filter(|_| !s.starts_with('-'));
        Some((num(a)?, num(b)?))
    });
    let Some((major, minor)) = parsed else {
        return Err(bad(*line, format!("options_file_version {v:?} is not MAJOR.MINOR")));
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

/// A section title: `Version`, `DBOptions`, or `CFOptions` / `TableOptions/BlockBasedTable`, one space and a
/// quoted family name the engine allows.
fn parse_title(title: &str) -> std::result::Result<Title, String> {
    match title {
        VERSION => return Ok(Title::Version),
        DB_TITLE => return Ok(Title::Db),
        _ => {}
    }
    let family = |quoted: &str| -> std::result::Result<String, String> {
        let name = unquote(quoted)?;
        check_family_name(&name)?;
        Ok(name)
    };
    if let Some(q) = title.strip_prefix(CF_TITLE).and_then(|r| r.strip_prefix(' ')) {
        return family(q).map(Title::Cf);
    }
    if let Some(q) = title.strip_prefix(TABLE_TITLE).and_then(|r| r.strip_prefix(' ')) {
        return family(q).map(Title::Table);
    }
    Err(format!("unknown section [{title}]"))
}

/// Splits the file into its sections, checking the syntax of every line, that no section appears twice and
/// no option twice in one section.
fn split_sections<'a>(data: &'a [u8], bad: Bad<'_>) -> Result<Vec<SectionText<'a>>> {
    let mut sections: Vec<SectionText<'a>> = Vec::new();
    let mut offset = 0u64;
    let mut rest = data;
    let mut number = 0usize;
    while !rest.is_empty() {
        number += 1;
        let here = Line { number, offset };
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Err(bad(here, "the last line has no newline (truncated file)".into()));
        };
        let raw = &rest[..end];
        rest = &rest[end + 1..];
        offset += end as u64 + 1;
        let text = std::str::from_utf8(raw).map_err(|_| bad(here, "not UTF-8 text".into()))?;
        let text = strip_comment(text).trim();
        if text.is_empty() {
            continue;
        }
        if let Some(title) = text.strip_prefix('[') {
            let title =
                title.strip_suffix(']').ok_or_else(|| bad(here, format!("{text:?}: a section title ends with ]")))?;
            let title = parse_title(title).map_err(|e| bad(here, e))?;
            if let Some(s) = sections.iter().find(|s| s.title == title) {
                return Err(bad(here, format!("section [{}] twice (first at line {})", title.text(), s.line.number)));
            }
            sections.push(SectionText { title, line: here, options: Vec::new() });
            continue;
        }
        let Some((name, value)) = text.split_once('=') else {
            return Err(bad(here, format!("{text:?} is neither a [section] nor name=value")));
        };
        let (name, value) = (name.trim(), value.trim());
        if !is_name(name) {
            return Err(bad(here, format!("{name:?} is not an option name")));
        }
        let Some(section) = sections.last_mut() else {
            return Err(bad(here, format!("option {name:?} before any section")));
        };
        if let Some((_, _, first)) = section.options.iter().find(|(n, _, _)| *n == name) {
            return Err(bad(
                here,
                format!("option {name:?} twice in [{}] (first at line {})", section.title.text(), first.number),
            ));
        }
        section.options.push((name, value, here));
    }
    Ok(sections)
}
