//! The composer: a multi-line text area with per-project history and collapsed pastes.

use std::io::Write;
use std::path::PathBuf;

use ratatui_textarea::{CursorMove, TextArea};

/// Pastes with more lines than this (or more bytes than [`PASTE_COLLAPSE_BYTES`]) are shown
/// as one placeholder line and expanded when the message is sent.
pub const PASTE_COLLAPSE_LINES: usize = 5;
/// See [`PASTE_COLLAPSE_LINES`].
pub const PASTE_COLLAPSE_BYTES: usize = 1000;
/// Entries kept in a history file.
pub const HISTORY_MAX: usize = 500;

/// The composer state.
#[derive(Debug)]
pub struct Composer {
    /// The text area (public for rendering).
    pub area: TextArea<'static>,
    pastes: Vec<(String, String)>,
    history: Vec<String>,
    /// Position while browsing history (`None`: editing a new entry).
    browsing: Option<usize>,
    draft: Vec<String>,
    file: Option<PathBuf>,
}

fn new_area() -> TextArea<'static> {
    let mut area = TextArea::default();
    area.set_placeholder_text("Ask dsh anything · /help for commands");
    area.set_cursor_line_style(ratatui::style::Style::new());
    // Dim, not a colour: readable on light and dark backgrounds and under NO_COLOR.
    area.set_placeholder_style(
        ratatui::style::Style::new().add_modifier(ratatui::style::Modifier::DIM),
    );
    area
}

impl Composer {
    /// A composer whose history lives in `file` (one JSON string per line).
    pub fn new(file: Option<PathBuf>) -> Self {
        let history = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|t| {
                t.lines()
                    .filter_map(|l| serde_json::from_str::<String>(l).ok())
                    .collect()
            })
            .unwrap_or_default();
        Composer {
            area: new_area(),
            pastes: Vec::new(),
            history,
            browsing: None,
            draft: Vec::new(),
            file,
        }
    }

    /// The text as typed (placeholders not expanded).
    pub fn raw(&self) -> String {
        self.area.lines().join("\n")
    }

    /// Whether nothing is typed.
    pub fn is_empty(&self) -> bool {
        self.area.lines().iter().all(|l| l.is_empty())
    }

    /// Lines the composer needs.
    pub fn height(&self) -> u16 {
        self.area.lines().len().clamp(1, 6) as u16
    }

    /// Replaces the text.
    pub fn set_text(&mut self, text: &str) {
        let mut area = new_area();
        area.insert_str(text);
        self.area = area;
    }

    /// Takes the message: placeholders expanded, the composer cleared, the entry added to the
    /// history. `None` when only whitespace is typed.
    pub fn take(&mut self) -> Option<String> {
        let raw = self.raw();
        if raw.trim().is_empty() {
            return None;
        }
        let mut text = raw.clone();
        for (placeholder, content) in self.pastes.drain(..) {
            text = text.replacen(&placeholder, &content, 1);
        }
        self.area = new_area();
        self.browsing = None;
        self.remember(&raw);
        Some(text)
    }

    fn remember(&mut self, entry: &str) {
        if self.history.last().map(String::as_str) == Some(entry) {
            return;
        }
        self.history.push(entry.to_owned());
        if let Some(f) = &self.file {
            let write = || -> std::io::Result<()> {
                if let Some(dir) = f.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                if self.history.len() > HISTORY_MAX * 2 {
                    let keep = &self.history[self.history.len() - HISTORY_MAX..];
                    let text: String = keep
                        .iter()
                        .map(|e| format!("{}\n", serde_json::Value::from(e.as_str())))
                        .collect();
                    return std::fs::write(f, text);
                }
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(f)?;
                writeln!(file, "{}", serde_json::Value::from(entry))
            };
            if let Err(e) = write() {
                tracing::warn!(file = %f.display(), error = %e, "cannot save the composer history");
            }
        }
    }

    /// A bracketed paste: inserted as is when small, else as a placeholder line.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let lines = text.lines().count();
        if lines > PASTE_COLLAPSE_LINES || text.len() > PASTE_COLLAPSE_BYTES {
            let placeholder = format!("[Pasted text #{} +{lines} lines]", self.pastes.len() + 1);
            self.area.insert_str(&placeholder);
            self.pastes.push((placeholder, text));
        } else {
            self.area.insert_str(&text);
        }
    }

    /// Up on the first line: the previous history entry. Returns whether it was handled.
    pub fn history_prev(&mut self) -> bool {
        if self.area.cursor().0 != 0 || self.history.is_empty() {
            return false;
        }
        let next = match self.browsing {
            None => {
                self.draft = self.area.lines().to_vec();
                self.history.len() - 1
            }
            Some(0) => return true,
            Some(i) => i - 1,
        };
        self.browsing = Some(next);
        let entry = self.history[next].clone();
        self.set_text(&entry);
        self.browsing = Some(next);
        true
    }

    /// Down on the last line: the next history entry (or the draft). Returns whether it was
    /// handled.
    pub fn history_next(&mut self) -> bool {
        let Some(i) = self.browsing else {
            return false;
        };
        if self.area.cursor().0 + 1 < self.area.lines().len() {
            return false;
        }
        if i + 1 < self.history.len() {
            let entry = self.history[i + 1].clone();
            self.set_text(&entry);
            self.browsing = Some(i + 1);
        } else {
            let draft = self.draft.join("\n");
            self.set_text(&draft);
            self.browsing = None;
        }
        self.area.move_cursor(CursorMove::Bottom);
        self.area.move_cursor(CursorMove::End);
        true
    }

    /// The most recent history entry containing `query`, searching back from before `before`.
    pub fn search(&self, query: &str, before: Option<usize>) -> Option<(usize, &str)> {
        let end = before.unwrap_or(self.history.len()).min(self.history.len());
        self.history[..end]
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| e.contains(query))
            .map(|(i, e)| (i, e.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_pastes_collapse_and_expand_on_send() {
        let mut c = Composer::new(None);
        c.area.insert_str("see ");
        let big: String = (0..20).map(|i| format!("line {i}\n")).collect();
        c.paste(&big);
        assert_eq!(c.raw(), "see [Pasted text #1 +20 lines]");
        assert_eq!(c.take().unwrap(), format!("see {big}"));
        assert!(c.is_empty());
        c.paste("small");
        assert_eq!(c.raw(), "small");
    }

    #[test]
    fn history_is_per_file_and_browsable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h/p.jsonl");
        let mut c = Composer::new(Some(file.clone()));
        for t in ["one", "two\nlines"] {
            c.set_text(t);
            c.take();
        }
        let mut c = Composer::new(Some(file));
        c.set_text("draft");
        c.area.move_cursor(CursorMove::Top);
        assert!(c.history_prev());
        assert_eq!(c.raw(), "two\nlines");
        c.area.move_cursor(CursorMove::Top);
        assert!(c.history_prev());
        assert_eq!(c.raw(), "one");
        assert!(c.history_next());
        assert_eq!(c.raw(), "two\nlines");
        assert!(c.history_next());
        assert_eq!(c.raw(), "draft");
        assert_eq!(c.search("on", None).map(|(_, e)| e), Some("one"));
    }
}
