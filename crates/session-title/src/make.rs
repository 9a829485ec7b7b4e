//! The title texts: the fallback from the prompt and the cleaning of a model's answer.

/// Words of a fallback title.
const FALLBACK_WORDS: usize = 5;
/// Bytes of a fallback title.
const FALLBACK_BYTES: usize = 40;
/// Bytes of any title.
pub(crate) const MAX_BYTES: usize = 80;

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// The fallback title of a prompt: its first five words (whitespace collapsed), at most 40 bytes.
/// `None` for a prompt without words.
pub fn fallback_title(prompt: &str) -> Option<String> {
    let words: Vec<&str> = prompt.split_whitespace().take(FALLBACK_WORDS).collect();
    if words.is_empty() {
        return None;
    }
    let joined = words.join(" ");
    let title = cut(&joined, FALLBACK_BYTES).trim_end();
    (!title.is_empty()).then(|| title.to_owned())
}

/// The title in a model's answer: its first non-empty line, whole-line `*`/`_` emphasis and
/// surrounding quotes stripped, at most 80 bytes. `None` when nothing is left.
pub fn model_title(answer: &str) -> Option<String> {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut t = line;
    for mark in ["***", "**", "*", "__", "_"] {
        if let Some(inner) = t.strip_prefix(mark).and_then(|r| r.strip_suffix(mark)) {
            t = inner.trim();
            break;
        }
    }
    let t = t
        .trim_matches(|c| matches!(c, '"' | '\'' | '“' | '”' | '「' | '」'))
        .trim();
    let t = cut(t, MAX_BYTES).trim_end();
    (!t.is_empty()).then(|| t.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_takes_five_words_within_forty_bytes() {
        assert_eq!(
            fallback_title("  fix   the failing\n test in crates/session please now").as_deref(),
            Some("fix the failing test in")
        );
        assert_eq!(
            fallback_title("supercalifragilisticexpialidocious-and-then-some more").as_deref(),
            Some("supercalifragilisticexpialidocious-and-t")
        );
        assert_eq!(fallback_title(" \n\t"), None);
        // A cut never splits a character.
        let t = fallback_title(&"é".repeat(30)).unwrap();
        assert!(t.len() <= 40 && t.chars().all(|c| c == 'é'));
    }

    #[test]
    fn model_answers_are_cleaned() {
        assert_eq!(
            model_title("\n**Fix flaky resize test**\nmore").as_deref(),
            Some("Fix flaky resize test")
        );
        assert_eq!(
            model_title("\"Add zstd logs\"").as_deref(),
            Some("Add zstd logs")
        );
        assert_eq!(model_title("   \n  "), None);
        assert!(model_title(&"x".repeat(200)).unwrap().len() <= 80);
    }
}
