//! The y/N question after a `/rewind` preview: `y` applies the rewind (with `force` when files
//! changed outside dsh since the checkpoint: the preview listed them, and a backup is kept),
//! anything else (`n`, Enter, Esc) leaves the workspace and the conversation as they are.
//! Asked only in the UI that ran the preview (the preview's `commandRan` event also reaches the
//! other clients watching; they show the preview and the command that applies it).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::text::{Line, Span};

use crate::theme::Theme;
use crate::wrap;

/// A rewind waiting for y/N.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewindConfirm {
    /// What it restores (`files and conversation`, …) and to where.
    pub what: String,
    /// The `/rewind` arguments that apply it.
    pub args: String,
    /// Files changed outside dsh that it overwrites.
    pub conflicts: usize,
}

/// What a key did to the question.
#[derive(Debug, PartialEq, Eq)]
pub enum ConfirmKey {
    /// Apply: run `/rewind` with these arguments.
    Yes(String),
    /// Declined.
    No,
    /// Not an answer (the question stays).
    Ignored,
}

impl RewindConfirm {
    /// The question for a preview: `confirm` are the arguments that apply it as planned; with
    /// conflicts, `y` forces it.
    pub fn new(p: &dsh_protocol::command::RewindPreview) -> RewindConfirm {
        use dsh_protocol::command::RewindMode;
        let what = match p.mode {
            RewindMode::Both => "files and conversation",
            RewindMode::Code => "files",
            RewindMode::Conversation => "conversation",
        };
        let args = if p.conflicts.is_empty() || p.confirm.contains(" force") {
            p.confirm.clone()
        } else {
            p.confirm.replacen(" yes", " force yes", 1)
        };
        RewindConfirm {
            what: format!("{what} to before turn {}", p.to_turn),
            args,
            conflicts: p.conflicts.len(),
        }
    }

    /// `y` applies, `n`, Enter and Esc decline; Ctrl-C passes through (it declines too).
    pub fn key(&self, key: KeyEvent) -> ConfirmKey {
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            return if key.code == KeyCode::Char('c') {
                ConfirmKey::No
            } else {
                ConfirmKey::Ignored
            };
        }
        match key.code {
            KeyCode::Char('y' | 'Y') => ConfirmKey::Yes(self.args.clone()),
            KeyCode::Char('n' | 'N') | KeyCode::Enter | KeyCode::Esc => ConfirmKey::No,
            _ => ConfirmKey::Ignored,
        }
    }

    /// The popup: the question and the keys.
    pub fn render(&self, theme: Theme, width: u16) -> Vec<Line<'static>> {
        let w = usize::from(width);
        let question = if self.conflicts > 0 {
            format!(
                "⚠ rewind {}, overwriting {} file(s) changed outside dsh (a backup is kept)?",
                self.what, self.conflicts
            )
        } else {
            format!("rewind {}?", self.what)
        };
        vec![
            Line::from(Span::styled(wrap::truncate(&question, w), theme.warn())),
            Line::from(vec![
                Span::styled("  y", theme.heading()),
                Span::raw(" apply  "),
                Span::styled("n", theme.heading()),
                Span::raw(" keep everything as it is"),
                Span::styled(" · Enter/Esc: no", theme.dim()),
            ]),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::command::RewindPreview;

    fn preview(conflicts: Vec<String>) -> RewindPreview {
        serde_json::from_value(serde_json::json!({
            "toTurn": 2,
            "mode": "both",
            "files": [],
            "diff": "",
            "conflicts": conflicts,
            "leftAlone": [],
            "confirm": "2 both yes",
        }))
        .expect("a preview")
    }

    #[test]
    fn y_applies_and_anything_else_declines() {
        let c = RewindConfirm::new(&preview(Vec::new()));
        assert_eq!(c.what, "files and conversation to before turn 2");
        let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
        assert_eq!(
            c.key(key(KeyCode::Char('y'))),
            ConfirmKey::Yes("2 both yes".into())
        );
        for code in [KeyCode::Char('n'), KeyCode::Enter, KeyCode::Esc] {
            assert_eq!(c.key(key(code)), ConfirmKey::No);
        }
        assert_eq!(c.key(key(KeyCode::Char('x'))), ConfirmKey::Ignored);
        assert_eq!(
            c.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            ConfirmKey::No
        );
    }

    #[test]
    fn with_conflicts_yes_forces() {
        let c = RewindConfirm::new(&preview(vec!["a.txt".into()]));
        assert_eq!(c.args, "2 both force yes");
        assert_eq!(c.conflicts, 1);
    }
}
