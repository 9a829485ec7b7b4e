//! The terminal: raw mode, bracketed paste and an inline viewport (no alternate screen, so the
//! transcript lives in the terminal's own scrollback), restored on exit, on panic and around
//! Ctrl-Z.

use std::io::{Stdout, Write};

use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{disable_raw_mode, enable_raw_mode};
use ratatui::backend::CrosstermBackend;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};

use crate::TuiError;

/// The terminal of a run.
pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Puts the terminal in the TUI's mode and opens an inline viewport of `height` rows at the
/// cursor.
pub fn enter(height: u16) -> Result<Term, TuiError> {
    enable_raw_mode().map_err(TuiError::Terminal)?;
    let mut out = std::io::stdout();
    // Terminals without the keyboard protocol ignore the push (Shift+Enter then reads as Enter;
    // Ctrl+J and Alt+Enter still insert a newline).
    crossterm::execute!(
        out,
        EnableBracketedPaste,
        PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
    )
    .map_err(TuiError::Terminal)?;
    Terminal::with_options(
        CrosstermBackend::new(out),
        TerminalOptions {
            viewport: Viewport::Inline(height),
        },
    )
    .map_err(TuiError::Terminal)
}

/// Restores the terminal (idempotent; used on exit, on panic and before suspending).
pub fn restore() {
    let mut out = std::io::stdout();
    let _ = crossterm::execute!(
        out,
        PopKeyboardEnhancementFlags,
        DisableBracketedPaste,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
    let _ = out.flush();
}

/// Clears the viewport and leaves the cursor below the transcript.
pub fn leave(term: &mut Term) {
    let _ = term.clear();
    let area = term.get_frame().area();
    let _ = term.set_cursor_position((0, area.y));
    restore();
}

/// Restores the terminal before the default panic message, so it is readable.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}

/// Inserts lines above the viewport, into the scrollback, in bounded chunks.
pub fn insert(term: &mut Term, lines: Vec<Line<'static>>) -> Result<(), TuiError> {
    let mut rest = lines;
    while !rest.is_empty() {
        let n = rest.len().min(500);
        let chunk: Vec<Line<'static>> = rest.drain(..n).collect();
        term.insert_before(n as u16, |buf| {
            Paragraph::new(chunk).render(buf.area, buf);
        })
        .map_err(TuiError::Terminal)?;
    }
    Ok(())
}

/// Ctrl-Z: restores the terminal, stops the process (SIGTSTP) and, once continued, reopens the
/// viewport.
pub fn suspend(term: &mut Term, height: u16) -> Result<(), TuiError> {
    leave(term);
    #[cfg(unix)]
    {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTSTP);
    }
    *term = enter(height)?;
    Ok(())
}
