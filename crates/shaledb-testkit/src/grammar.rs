//! The check that keeps each on-disk format's specification and its code from drifting apart: the module that
//! implements a format opens its `//!` docs with the format's grammar in a ```` ```text ```` block, and that
//! block must appear, line for line, as one of the ```` ```text ```` blocks of its `docs/format/*.md` page.

/// The lines of every ```` ```text ```` block of `lines`, in order.
fn text_blocks<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<Vec<&'a str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in lines {
        match (&mut current, line.trim_end()) {
            (None, "```text") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(b), _) => b.push(line),
            (None, _) => {}
        }
    }
    blocks
}

/// The first ```` ```text ```` block of the `//!` docs at the top of `rust_source` (empty when there is none).
pub fn module_grammar(rust_source: &str) -> Vec<&str> {
    let docs = rust_source
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.strip_prefix("//! ").unwrap_or(l.trim_start_matches("//!")));
    text_blocks(docs).into_iter().next().unwrap_or_default()
}

/// Panics unless the first grammar block of `rust_source`'s module docs is one of the ```` ```text ```` blocks
/// of `markdown`, exactly; the message shows the module's block and the page's closest one.
pub fn assert_module_grammar_in_doc(rust_source: &str, markdown: &str) {
    let code = module_grammar(rust_source);
    assert!(!code.is_empty(), "no ```text grammar at the top of the module docs");
    let blocks = text_blocks(markdown.lines());
    if blocks.contains(&code) {
        return;
    }
    let closest = blocks.iter().max_by_key(|b| b.iter().filter(|l| code.contains(l)).count());
    panic!(
        "the module's grammar is not in the format page\nmodule:\n{}\npage's closest block:\n{}",
        code.join("\n"),
        closest.map(|b| b.join("\n")).unwrap_or_default()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# A format\n\n```text\na := b c\n```\n\nprose\n\n```text\nx := y\nz := w\n```\n";

    #[test]
    fn a_module_grammar_must_be_one_of_the_page_blocks() {
        let module = "//! The x codec.\n//!\n//! ```text\n//! x := y\n//! z := w\n//! ```\n//!\n//! ```text\n//! other\n//! ```\nfn f() {}\n";
        assert_eq!(module_grammar(module), vec!["x := y", "z := w"]);
        assert_module_grammar_in_doc(module, PAGE);
        let drifted = module.replace("z := w", "z := v");
        let r = std::panic::catch_unwind(|| assert_module_grammar_in_doc(&drifted, PAGE));
        assert!(r.is_err(), "a changed line must fail");
        let none = "//! No grammar here.\nfn f() {}\n";
        assert!(module_grammar(none).is_empty());
        assert!(std::panic::catch_unwind(|| assert_module_grammar_in_doc(none, PAGE)).is_err());
    }
}
