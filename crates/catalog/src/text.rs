//! Text as the full-text index sees it: CJK and emoji split into one token per character,
//! bodies cut to a size, user queries turned into safe FTS5 expressions, snippets cleaned.
//!
//! The index uses SQLite's `unicode61` tokenizer, which keeps a run of letters as one token:
//! a CJK sentence (no spaces) would be one token and a word inside it could not be found.
//! Before indexing, a zero-width space (U+200B, a separator for `unicode61`) is put around
//! every CJK character and every emoji, and the same is done to the query, whose terms become
//! phrases: `你好` is searched as the phrase `你 好`. The zero-width spaces are removed from
//! snippets.

use std::borrow::Cow;

/// The separator put around CJK characters and emoji.
pub(crate) const SEP: char = '\u{200B}';
/// Snippet highlight markers (never in indexed text: control characters are dropped).
pub(crate) const HL_START: char = '\u{2}';
pub(crate) const HL_END: char = '\u{3}';

pub(crate) use dsh_catalog_api::{cut, is_word_alone as is_isolated};

/// Whether a character makes a token (letters, digits, CJK, emoji).
pub(crate) fn is_token_char(c: char) -> bool {
    c.is_alphanumeric() || is_isolated(c)
}

/// The text as indexed: at most `max` bytes (cut at a character boundary), control characters
/// as spaces, CJK and emoji separated. `None` when nothing in it can be searched.
pub(crate) fn body(text: &str, max: usize) -> Option<String> {
    let text = cut(text, max);
    if !text.chars().any(is_token_char) {
        return None;
    }
    Some(segment(text).into_owned())
}

/// CJK and emoji separated by [`SEP`]; control characters (highlight markers included) become
/// spaces.
pub(crate) fn segment(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| is_isolated(c) || c.is_control()) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut prev_isolated = false;
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push(' ');
            prev_isolated = false;
            continue;
        }
        let iso = is_isolated(c);
        if (iso || prev_isolated) && !out.is_empty() {
            out.push(SEP);
        }
        out.push(c);
        prev_isolated = iso;
    }
    Cow::Owned(out)
}

/// The most terms of a query that are searched (the rest are ignored).
pub(crate) const MAX_TERMS: usize = dsh_catalog_api::MAX_QUERY_TERMS;

/// A user's query as an FTS5 expression: every term quoted (so `"`, `*`, `NEAR(`, `AND`,
/// column filters are literal text), `"a phrase"` kept as a phrase, a trailing `*` kept as a
/// prefix search; terms are ANDed. `None` when the query holds nothing searchable.
pub fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<(String, bool)> = dsh_catalog_api::query_terms(text)
        .filter(|t| t.text.chars().any(is_token_char))
        .take(MAX_TERMS)
        .map(|t| (t.text, t.prefix))
        .collect();
    if terms.is_empty() {
        return None;
    }
    let mut out = String::new();
    for (term, prefix) in terms {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push('"');
        out.push_str(&segment(&term).replace('"', "\"\""));
        out.push('"');
        if prefix {
            out.push('*');
        }
    }
    Some(out)
}

/// A snippet from SQLite (with [`HL_START`]/[`HL_END`] around matches) as one clean line and
/// the byte ranges of its matches.
pub(crate) fn clean_snippet(raw: &str) -> (String, Vec<(usize, usize)>) {
    let mut out = String::with_capacity(raw.len());
    let mut ranges = Vec::new();
    let mut open: Option<usize> = None;
    let mut last_space = false;
    for c in raw.chars() {
        match c {
            HL_START => open = Some(out.len()),
            HL_END => {
                if let Some(start) = open.take().filter(|&s| out.len() > s) {
                    ranges.push((start, out.len()));
                }
            }
            SEP => {}
            c if c.is_whitespace() => {
                if !last_space {
                    out.push(' ');
                }
                last_space = true;
                continue;
            }
            c => out.push(c),
        }
        last_space = false;
    }
    (out, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_and_emoji_are_separated_and_latin_is_untouched() {
        assert_eq!(segment("plain text"), "plain text");
        assert_eq!(segment("修复测试"), "修\u{200B}复\u{200B}测\u{200B}试");
        assert_eq!(segment("ok🚀go"), "ok\u{200B}🚀\u{200B}go");
        assert_eq!(segment("a\u{2}b"), "a b");
    }

    #[test]
    fn queries_quote_every_term() {
        assert_eq!(fts_query("foo bar").as_deref(), Some("\"foo\" \"bar\""));
        assert_eq!(
            fts_query("\"a phrase\" pre*").as_deref(),
            Some("\"a phrase\" \"pre\"*")
        );
        assert_eq!(fts_query("NEAR(").as_deref(), Some("\"NEAR(\""));
        assert_eq!(fts_query("say\"hi").as_deref(), Some("\"say\" \"hi\""));
        assert_eq!(fts_query("\"unclosed").as_deref(), Some("\"unclosed\""));
        assert_eq!(fts_query("a\"\"b").as_deref(), Some("\"a\" \"b\""));
        assert_eq!(fts_query("\" * \"\" ( )"), None);
        assert_eq!(fts_query("").as_deref(), None);
        assert_eq!(fts_query("修复").as_deref(), Some("\"修\u{200B}复\""));
        let long = "word ".repeat(2_000);
        assert_eq!(
            fts_query(&long).map(|q| q.matches("\"word\"").count()),
            Some(MAX_TERMS)
        );
    }

    #[test]
    fn snippets_lose_markers_and_separators_and_keep_ranges() {
        let (s, r) = clean_snippet("fix \u{2}修\u{200B}复\u{3} the\n\ntest");
        assert_eq!(s, "fix 修复 the test");
        assert_eq!(&s[r[0].0..r[0].1], "修复");
    }

    #[test]
    fn bodies_are_cut_at_char_boundaries() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(body("   ", 10), None);
        assert_eq!(body("ab", 10).as_deref(), Some("ab"));
    }
}
