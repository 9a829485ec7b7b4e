//! Text as the store's full-text search sees it: what of an event is searchable (prompts,
//! replies, titles, tool calls with their argument values, the head of tool results), its words
//! as a `tsvector` built here (not by PostgreSQL's parser), and a user's query as a `tsquery`.
//!
//! The words are made here, the same way for the stored documents and the queries, so that the
//! server's parser and locale play no part: PostgreSQL's default parser keeps `/src/main.rs`,
//! `a@b.c` or `host.name` as one token (a search for `main` would not find the path) and, in
//! most locales, drops emoji. A word is a run of letters and digits, lower-cased; every CJK
//! character and every emoji is a word of its own (a CJK sentence has no spaces), as in the
//! SQLite catalog (`dsh-catalog`). The document is stored as a `tsvector` literal
//! (`'word':1,4 'other':2`) and the query cast with `::tsquery`: neither goes through
//! `to_tsvector` / `to_tsquery`.

use std::collections::BTreeMap;

/// Bytes of a prompt, a reply or a title that are searchable.
pub(crate) const TEXT_MAX: usize = 8 * 1024;
/// Bytes of a tool call (name and argument values) that are searchable.
pub(crate) const CALL_MAX: usize = 2 * 1024;
/// Bytes of the head of a tool result that are searchable (its first lines: what it is).
pub(crate) const RESULT_MAX: usize = 512;
/// The most terms of a query that are searched (the rest are ignored), as in the SQLite
/// catalog.
pub(crate) const MAX_TERMS: usize = dsh_catalog_api::MAX_QUERY_TERMS;
/// The longest word kept, in bytes (PostgreSQL refuses lexemes over 2 KB); longer runs (a
/// base64 blob) are cut, the same way in documents and queries.
const WORD_MAX: usize = 240;
/// The highest position PostgreSQL stores.
const POS_MAX: usize = 16_383;
/// Positions kept per word (PostgreSQL keeps at most 256).
const POSITIONS_MAX: usize = 255;

use dsh_catalog_api::{cut, is_word_alone as is_isolated};

/// The words of a text: runs of letters and digits (lower case, cut to [`WORD_MAX`] bytes),
/// and each CJK character or emoji alone.
pub(crate) fn words(text: &str) -> Vec<String> {
    fn flush(cur: &mut String, out: &mut Vec<String>) {
        if !cur.is_empty() {
            let mut w = std::mem::take(cur).to_lowercase();
            w.truncate(w.floor_char_boundary(WORD_MAX));
            out.push(w);
        }
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if is_isolated(c) {
            flush(&mut cur, &mut out);
            out.push(c.to_string());
        } else if c.is_alphanumeric() {
            cur.push(c);
        } else {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// A lexeme quoted for a `tsvector` or `tsquery` literal.
fn quoted(w: &str) -> String {
    format!("'{}'", w.replace('\\', "\\\\").replace('\'', "''"))
}

/// The `tsvector` literal of a searchable text: each word with its positions. Empty (`""`, an
/// empty `tsvector`) when the text has no word.
pub(crate) fn document(text: &str) -> String {
    let mut at: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, w) in words(text).into_iter().enumerate() {
        let p = at.entry(w).or_default();
        if p.len() < POSITIONS_MAX {
            p.push((i + 1).min(POS_MAX));
        }
    }
    let mut out = String::new();
    for (w, mut ps) in at {
        ps.dedup();
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quoted(&w));
        out.push(':');
        let ps: Vec<String> = ps.iter().map(usize::to_string).collect();
        out.push_str(&ps.join(","));
    }
    out
}

/// What of an event is searchable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Indexed {
    /// The text shown around a hit (the prompts' text is also the listing's first and last
    /// prompt): prompts, replies and titles whole, a tool call's name and argument values and a
    /// tool result's head cut to their sizes.
    pub(crate) body: Option<String>,
    /// The `tsvector` literal of the searchable part of `body` (`Some("")` for a searchable
    /// kind without words: indexed, nothing to find).
    pub(crate) doc: Option<String>,
    /// The title of a `session/title`.
    pub(crate) title: Option<String>,
}

/// The searchable text of an event of type `kind` with data `data`.
pub(crate) fn index(kind: &str, data: &serde_json::Value) -> Indexed {
    fn texts(content: &serde_json::Value) -> Option<String> {
        let parts: Vec<&str> = content
            .as_array()?
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n"))
    }
    let (body, max, title) = match kind {
        "session/title" => {
            let t = data["title"].as_str().map(str::to_owned);
            (t.clone(), TEXT_MAX, t)
        }
        "user/message" => (texts(&data["content"]), TEXT_MAX, None),
        "assistant/message" => (texts(&data["message"]["content"]), TEXT_MAX, None),
        "tool/call" => {
            let name = data["name"].as_str().unwrap_or_default();
            let args = match &data["arguments"] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            let t = dsh_catalog_api::call_text(name, &args);
            (Some(cut(&t, CALL_MAX).to_owned()), CALL_MAX, None)
        }
        "tool/result" => {
            let head = data["message"]["content"].as_array().and_then(|c| {
                c.iter()
                    .filter(|p| p["type"] == "text")
                    .find_map(|p| p["text"].as_str())
            });
            (
                head.map(|h| cut(h, RESULT_MAX).to_owned()),
                RESULT_MAX,
                None,
            )
        }
        _ => return Indexed::default(),
    };
    // PostgreSQL's text holds no NUL (a tool's output may: `find -print0`, a binary file), and
    // a row that cannot be stored would fail the whole commit batch.
    let body = body.map(no_nul);
    let title = title.map(no_nul);
    let doc = Some(
        body.as_deref()
            .map_or_else(String::new, |b| document(cut(b, max))),
    );
    Indexed { body, doc, title }
}

/// `text` with every NUL character made a space.
fn no_nul(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', " ")
    } else {
        text
    }
}

/// The catalog's query syntax as a `tsquery` literal: terms (split at white space, or a
/// `"quoted phrase"`) are ANDed, the words of one term form a phrase (`<->`: `main.rs` is
/// `main` then `rs`, `修复` is `修` then `复`), a trailing `*` makes the term's last word a
/// prefix. Every other character is literal: quotes, `*`, `NEAR(`, `&`, `|`, `!`, `:` never
/// make a syntax error. At most [`MAX_TERMS`] terms. `None` when nothing searchable is left.
pub fn ts_query(text: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for term in dsh_catalog_api::query_terms(text) {
        let prefix = term.prefix;
        let ws = words(&term.text);
        let n = ws.len();
        if n == 0 {
            continue;
        }
        let parts: Vec<String> = ws
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut l = quoted(w);
                if prefix && i + 1 == n {
                    l.push_str(":*");
                }
                l
            })
            .collect();
        terms.push(if n == 1 {
            parts.join("")
        } else {
            format!("({})", parts.join(" <-> "))
        });
        if terms.len() == MAX_TERMS {
            break;
        }
    }
    (!terms.is_empty()).then(|| terms.join(" & "))
}

/// A short one-line excerpt of `body` around the first word of the query found in it, and the
/// byte ranges of the query's words in it.
pub(crate) fn snippet(body: &str, query: &str) -> (String, Vec<(usize, usize)>) {
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = flat.to_lowercase();
    let mut terms = words(query);
    terms.sort();
    terms.dedup();
    // Lower-casing can change byte lengths; then the excerpt starts at the beginning.
    let same = lower.len() == flat.len();
    let first = if same {
        terms.iter().filter_map(|t| lower.find(t.as_str())).min()
    } else {
        None
    };
    let start = flat.floor_char_boundary(first.map(|p| p.saturating_sub(40)).unwrap_or(0));
    let end = flat.floor_char_boundary(start + 160);
    let text = flat[start..end].to_owned();
    let mut marks: Vec<(usize, usize)> = Vec::new();
    if same {
        let low = &lower[start..end];
        for t in &terms {
            let mut from = 0;
            while let Some(p) = low[from..].find(t.as_str()) {
                let b = from + p;
                marks.push((b, b + t.len()));
                from = b + t.len();
            }
        }
        marks.sort_unstable();
        // Overlapping marks (a word inside another) become one.
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (a, b) in marks {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        return (text, merged);
    }
    (text, marks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_paths_cjk_and_emoji() {
        assert_eq!(words("cat /src/Main.rs"), ["cat", "src", "main", "rs"]);
        assert_eq!(words("修复测试"), ["修", "复", "测", "试"]);
        assert_eq!(words("ok🚀go"), ["ok", "🚀", "go"]);
        assert_eq!(words("a@b.c it's"), ["a", "b", "c", "it", "s"]);
        let long = "x".repeat(5_000);
        assert_eq!(words(&long)[0].len(), WORD_MAX);
    }

    #[test]
    fn documents_are_tsvector_literals() {
        assert_eq!(document("Fix the fix"), "'fix':1,3 'the':2");
        assert_eq!(document(" ,. "), "");
        assert_eq!(document("修复"), "'修':1 '复':2");
    }

    #[test]
    fn queries_translate_to_tsquery() {
        assert_eq!(
            ts_query("Hello world").as_deref(),
            Some("'hello' & 'world'")
        );
        assert_eq!(
            ts_query("\"a phrase\" pre*").as_deref(),
            Some("('a' <-> 'phrase') & 'pre':*")
        );
        assert_eq!(ts_query("main.rs").as_deref(), Some("('main' <-> 'rs')"));
        assert_eq!(ts_query("it's & | !").as_deref(), Some("('it' <-> 's')"));
        assert_eq!(ts_query("NEAR(").as_deref(), Some("'near'"));
        assert_eq!(ts_query("  ").as_deref(), None);
        assert_eq!(ts_query("\" * \"\" ( )"), None);
        assert_eq!(
            ts_query("\"unclosed phrase").as_deref(),
            Some("('unclosed' <-> 'phrase')")
        );
        assert_eq!(ts_query("修复").as_deref(), Some("('修' <-> '复')"));
        assert_eq!(ts_query("🚀").as_deref(), Some("'🚀'"));
        let long = "word ".repeat(2_000);
        assert_eq!(
            ts_query(&long).map(|q| q.matches("'word'").count()),
            Some(MAX_TERMS)
        );
    }

    #[test]
    fn tool_calls_and_results_are_searchable() {
        let call = index(
            "tool/call",
            &serde_json::json!({"name": "bash", "arguments": "{\"command\":\"cargo test -p x\",\"timeout\":5}"}),
        );
        assert_eq!(call.body.as_deref(), Some("bash cargo test -p x"));
        let result = index(
            "tool/result",
            &serde_json::json!({"message": {"content": [{"type": "text", "text": "a".repeat(600)}]}}),
        );
        assert_eq!(result.body.map(|b| b.len()), Some(RESULT_MAX));
        let image = index(
            "tool/result",
            &serde_json::json!({"message": {"content": [{"type": "image"}]}}),
        );
        assert_eq!((image.body, image.doc.as_deref()), (None, Some("")));
        assert_eq!(
            index("turn/start", &serde_json::json!({})),
            Indexed::default()
        );
        let nul = index(
            "tool/result",
            &serde_json::json!({"message": {"content": [{"type": "text", "text": "a\u{0}b"}]}}),
        );
        assert_eq!(nul.body.as_deref(), Some("a b"));
    }

    #[test]
    fn snippets_mark_the_words() {
        let (s, h) = snippet("Some text\nwith Needle inside", "needle");
        assert_eq!(s, "Some text with Needle inside");
        assert_eq!(h, vec![(15, 21)]);
    }
}
