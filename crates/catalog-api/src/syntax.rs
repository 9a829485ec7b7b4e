//! What every catalog implementation reads the same way: the query syntax of
//! [`Catalog::search`](crate::Catalog::search), the directory filter of [`Filter::cwd`]
//! (crate::Filter::cwd), and the searchable text of a tool call. The SQLite and the PostgreSQL
//! catalog render them into their own query languages; keeping the reading here keeps both
//! stores' answers to one query the same.

/// The most terms of a query that are searched (the rest are ignored).
pub const MAX_QUERY_TERMS: usize = 32;

/// One term of a user's query: a word or path as typed, or a `"quoted phrase"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryTerm {
    /// The term's text, without its quotes and trailing `*`.
    pub text: String,
    /// A trailing `*`: the term's last word is a prefix.
    pub prefix: bool,
}

/// The terms of a user's query, in order: split at white space, a `"quoted phrase"` kept as
/// one term (an unclosed quote runs to the end), a trailing `*` marking a prefix. Every other
/// character is the term's text (quotes inside a word, `*`, `NEAR(`, `AND`): implementations
/// treat it as literal text, never as their own syntax. A caller keeps the terms that hold
/// something searchable, up to [`MAX_QUERY_TERMS`].
pub fn query_terms(text: &str) -> impl Iterator<Item = QueryTerm> + '_ {
    let mut chars = text.chars().peekable();
    std::iter::from_fn(move || {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let first = *chars.peek()?;
        let mut term = String::new();
        if first == '"' {
            chars.next();
            for c in chars.by_ref() {
                if c == '"' {
                    break;
                }
                term.push(c);
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '"' {
                    break;
                }
                term.push(c);
                chars.next();
            }
        }
        let prefix = term.ends_with('*');
        let text = term.trim_end_matches('*').to_owned();
        Some(QueryTerm { text, prefix })
    })
}

/// A directory filter as the directory itself (no trailing `/`, `/` for the root) and the
/// prefix every directory under it starts with.
pub fn dir_and_prefix(dir: &str) -> (String, String) {
    let dir = match dir.trim_end_matches('/') {
        "" => "/",
        d => d,
    };
    let under = if dir == "/" {
        "/".to_owned()
    } else {
        format!("{dir}/")
    };
    (dir.to_owned(), under)
}

/// The searchable text of a tool call: its name, then the string values of its JSON arguments
/// (commands, paths, patterns), or the raw arguments when they are not JSON.
pub fn call_text(name: &str, arguments: &str) -> String {
    fn strings(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::String(s) => {
                out.push(' ');
                out.push_str(s);
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
            serde_json::Value::Object(o) => o.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut out = name.to_owned();
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(v) => strings(&v, &mut out),
        Err(_) => {
            out.push(' ');
            out.push_str(arguments);
        }
    }
    out
}

/// Characters that are a word each, in documents and queries alike: CJK ideographs, kana,
/// hangul and emoji (a CJK sentence has no spaces; word splitters drop emoji).
pub fn is_word_alone(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x2FDF        // CJK radicals, Kangxi
        | 0x3040..=0x30FF      // hiragana, katakana
        | 0x3100..=0x312F      // bopomofo
        | 0x3130..=0x318F      // hangul compatibility jamo
        | 0x31F0..=0x31FF      // katakana extension
        | 0x3400..=0x4DBF      // CJK extension A
        | 0x4E00..=0x9FFF      // CJK unified ideographs
        | 0xAC00..=0xD7AF      // hangul syllables
        | 0xF900..=0xFAFF      // CJK compatibility ideographs
        | 0xFF66..=0xFF9F      // halfwidth katakana
        | 0x20000..=0x3FFFF    // CJK extensions B and later
        | 0x2600..=0x27BF      // miscellaneous symbols, dingbats
        | 0x2B00..=0x2BFF      // arrows and symbols (⭐)
        | 0x1F000..=0x1FAFF    // mahjong .. symbols and pictographs extended-A
    )
}

/// `text` cut to at most `max` bytes at a character boundary (how much of a text is indexed).
pub fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(q: &str) -> Vec<(String, bool)> {
        query_terms(q).map(|t| (t.text, t.prefix)).collect()
    }

    #[test]
    fn terms_phrases_prefixes_and_hostile_text() {
        assert_eq!(
            terms(r#" cargo  "a phrase" pre* NEAR(x "#),
            [
                ("cargo".into(), false),
                ("a phrase".into(), false),
                ("pre".into(), true),
                ("NEAR(x".into(), false)
            ]
        );
        assert_eq!(
            terms(r#"ab"cd "unclosed"#),
            [
                ("ab".into(), false),
                ("cd ".into(), false),
                ("unclosed".into(), false)
            ]
        );
        assert_eq!(terms("*"), [(String::new(), true)]);
        assert!(terms("  \t ").is_empty());
    }

    #[test]
    fn directories_and_calls() {
        assert_eq!(dir_and_prefix("/a/b/"), ("/a/b".into(), "/a/b/".into()));
        assert_eq!(dir_and_prefix("/"), ("/".into(), "/".into()));
        assert_eq!(
            call_text("bash", r#"{"command":"cargo test -p x","timeout":5}"#),
            "bash cargo test -p x"
        );
        assert_eq!(
            call_text("edit", r#"{"path":"src/a.rs","edits":[{"old":"x"}]}"#),
            "edit src/a.rs x"
        );
        assert_eq!(call_text("t", "not json"), "t not json");
    }
}
