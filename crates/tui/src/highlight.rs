//! Syntax highlighting of fenced code (syntect's bundled Sublime syntaxes, pure-Rust regexes).
//!
//! No syntect theme: scopes map to the theme's named colours (comments dim, strings green,
//! numbers and constants yellow, keywords magenta, functions blue, types cyan), so light and
//! dark schemes and `NO_COLOR` behave as everywhere else. A block is highlighted line by line
//! as its lines complete (the parse state is kept across lines); an unknown language keeps the
//! plain code colour. The syntax set is loaded once, on the first fenced block with a known
//! language tag, or earlier by [`warm_up`] on a background thread.

use std::sync::OnceLock;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxReference, SyntaxSet};

use crate::theme::Theme;

static SYNTAXES: OnceLock<SyntaxSet> = OnceLock::new();

fn syntaxes() -> &'static SyntaxSet {
    SYNTAXES.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// Loads the syntax set on a background thread (the first code block then does not wait).
pub fn warm_up() {
    if SYNTAXES.get().is_none() {
        std::thread::spawn(|| {
            syntaxes();
        });
    }
}

/// What a token is, by its innermost matching scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Comment,
    Str,
    Constant,
    Keyword,
    Function,
    Type,
}

struct Classes(Vec<(Scope, Kind)>);

fn classes() -> &'static Classes {
    static CLASSES: OnceLock<Classes> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let table = [
            ("comment", Kind::Comment),
            ("string", Kind::Str),
            ("constant.numeric", Kind::Constant),
            ("constant.language", Kind::Constant),
            ("constant.character", Kind::Constant),
            ("keyword", Kind::Keyword),
            ("storage.modifier", Kind::Keyword),
            ("storage.type", Kind::Type),
            ("entity.name.function", Kind::Function),
            ("support.function", Kind::Function),
            ("variable.function", Kind::Function),
            ("entity.name.type", Kind::Type),
            ("entity.name.class", Kind::Type),
            ("entity.name.struct", Kind::Type),
            ("entity.name.enum", Kind::Type),
            ("support.type", Kind::Type),
            ("support.class", Kind::Type),
        ];
        Classes(
            table
                .iter()
                .filter_map(|(s, k)| Scope::new(s).ok().map(|s| (s, *k)))
                .collect(),
        )
    })
}

fn classify(stack: &ScopeStack) -> Option<Kind> {
    let classes = classes();
    stack.as_slice().iter().rev().find_map(|scope| {
        classes
            .0
            .iter()
            .find(|(prefix, _)| prefix.is_prefix_of(*scope))
            .map(|(_, k)| *k)
    })
}

fn style(kind: Option<Kind>, theme: Theme) -> Style {
    let fg = |c: Color| {
        if theme.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    };
    match kind {
        None => Style::new(),
        Some(Kind::Comment) => theme.dim().add_modifier(Modifier::ITALIC),
        Some(Kind::Str) => fg(Color::Green),
        Some(Kind::Constant) => fg(Color::Yellow),
        Some(Kind::Keyword) => fg(Color::Magenta),
        Some(Kind::Function) => fg(Color::Blue),
        Some(Kind::Type) => fg(Color::Cyan),
    }
}

/// The syntax for a fence's info string (`rust`, `py`, `sh`, `ts` …), if one is bundled.
fn syntax_for(info: &str) -> Option<&'static SyntaxReference> {
    let lang = info.split_whitespace().next()?.trim_start_matches('.');
    if lang.is_empty() {
        return None;
    }
    let set = syntaxes();
    let alias = match lang.to_ascii_lowercase().as_str() {
        "shell" | "console" | "zsh" => "sh".to_owned(),
        "ts" | "typescript" | "tsx" => "js".to_owned(),
        "jsonc" | "json5" => "json".to_owned(),
        "yml" => "yaml".to_owned(),
        "py3" | "python3" => "py".to_owned(),
        other => other.to_owned(),
    };
    set.find_syntax_by_token(&alias)
}

/// The highlighting state of one fenced block.
#[derive(Clone)]
pub struct CodeHighlighter {
    state: ParseState,
    stack: ScopeStack,
}

impl std::fmt::Debug for CodeHighlighter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeHighlighter").finish_non_exhaustive()
    }
}

impl CodeHighlighter {
    /// A highlighter for the block opened with `info`; `None` for no or an unknown language.
    pub fn for_info(info: &str) -> Option<Self> {
        let syntax = syntax_for(info)?;
        Some(CodeHighlighter {
            state: ParseState::new(syntax),
            stack: ScopeStack::new(),
        })
    }

    /// The spans of the next line of the block (tabs expanded; no newline). A line the syntax
    /// cannot parse is returned plain.
    pub fn line(&mut self, line: &str, theme: Theme) -> Vec<Span<'static>> {
        let text = line.replace('\t', "    ");
        let with_nl = format!("{text}\n");
        let Ok(ops) = self.state.parse_line(&with_nl, syntaxes()) else {
            return vec![Span::styled(text, theme.code())];
        };
        let mut spans: Vec<Span<'static>> = Vec::new();
        let mut at = 0;
        let mut push = |from: usize, to: usize, stack: &ScopeStack| {
            let to = to.min(text.len());
            if from < to {
                spans.push(Span::styled(
                    text[from..to].to_owned(),
                    style(classify(stack), theme),
                ));
            }
        };
        for (pos, op) in ops {
            push(at, pos, &self.stack);
            at = at.max(pos.min(text.len()));
            if self.stack.apply(&op).is_err() {
                break;
            }
        }
        push(at, text.len(), &self.stack);
        if spans.is_empty() {
            spans.push(Span::raw(String::new()));
        }
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_fence_tags_find_a_syntax() {
        for tag in [
            "rust", "rs", "python", "py", "sh", "bash", "shell", "js", "ts", "json", "yaml", "yml",
            "go", "c", "cpp", "java", "diff", "html", "css", "sql", "md",
        ] {
            assert!(syntax_for(tag).is_some(), "{tag}");
        }
        assert!(syntax_for("").is_none());
        assert!(syntax_for("no-such-language").is_none());
        // Not bundled with syntect (README: known limitations).
        assert!(syntax_for("toml").is_none());
        assert!(syntax_for("typescript").is_some_and(|s| s.name == "JavaScript"));
    }
}
