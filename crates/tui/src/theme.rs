//! Styles, with `NO_COLOR` honoured: without colour only modifiers (bold, dim, italic, reverse)
//! remain, so every state stays distinguishable on any background.

use ratatui::style::{Color, Modifier, Style};

/// The palette of one run. Colours are the terminal's named ones (they follow the user's light
/// or dark scheme), never RGB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    /// Whether colours are used (`false` under `NO_COLOR`).
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to a non-empty value (no-color.org).
    pub fn from_env() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Theme { color: !no_color }
    }

    /// A theme with colours.
    pub const COLOR: Theme = Theme { color: true };
    /// A theme without colours.
    pub const PLAIN: Theme = Theme { color: false };

    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    /// Secondary text (reasoning, summaries, hints).
    pub fn dim(self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }
    /// The user's own messages.
    pub fn user(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    /// Errors.
    pub fn error(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    /// Warnings and notices (retries, interruptions).
    pub fn warn(self) -> Style {
        self.fg(Color::Yellow)
    }
    /// Success marks.
    pub fn ok(self) -> Style {
        self.fg(Color::Green)
    }
    /// Added diff lines.
    pub fn added(self) -> Style {
        self.fg(Color::Green)
    }
    /// Removed diff lines.
    pub fn removed(self) -> Style {
        if self.color {
            self.fg(Color::Red)
        } else {
            Style::new().add_modifier(Modifier::CROSSED_OUT)
        }
    }
    /// Headings.
    pub fn heading(self) -> Style {
        self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
    }
    /// Inline code and code blocks.
    pub fn code(self) -> Style {
        self.fg(Color::Yellow)
    }
    /// Links.
    pub fn link(self) -> Style {
        self.fg(Color::Blue).add_modifier(Modifier::UNDERLINED)
    }
    /// Tool card titles.
    pub fn tool(self) -> Style {
        self.fg(Color::Blue).add_modifier(Modifier::BOLD)
    }
    /// The selected row of a picker or completion list.
    pub fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }
}
