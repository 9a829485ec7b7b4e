//! The terminal: raw mode, bracketed paste and an inline viewport (no alternate screen, so the
//! transcript lives in the terminal's own scrollback), restored on exit, on panic and around
//! Ctrl-Z.

use std::io::{Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};

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
pub type Term = Terminal<Backend>;

/// crossterm's backend, except that a resize does not ask the terminal where the cursor is:
/// the reply to that query races crossterm's own input thread (and fails the resize), so after
/// the first placement the viewport is put at the bottom of the screen, where a resized inline
/// viewport belongs anyway.
#[derive(Debug)]
pub struct Backend {
    inner: CrosstermBackend<Stdout>,
    /// Answer cursor queries with the last row instead of asking the terminal.
    pub bottom: bool,
    /// The run is leaving ([`leave`]): showing the cursor cannot fail any more (the terminal
    /// may be gone, hung up; [`restore`] has shown it where it could).
    leaving: bool,
}

impl ratatui::backend::Backend for Backend {
    type Error = std::io::Error;

    fn draw<'a, I>(&mut self, content: I) -> std::io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a ratatui::buffer::Cell)>,
    {
        self.inner.draw(content)
    }
    fn append_lines(&mut self, n: u16) -> std::io::Result<()> {
        self.inner.append_lines(n)
    }
    fn hide_cursor(&mut self) -> std::io::Result<()> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> std::io::Result<()> {
        match self.inner.show_cursor() {
            Err(e) if !self.leaving => Err(e),
            _ => Ok(()),
        }
    }
    fn get_cursor_position(&mut self) -> std::io::Result<ratatui::layout::Position> {
        if self.bottom {
            let size = self.inner.size()?;
            return Ok(ratatui::layout::Position::new(
                0,
                size.height.saturating_sub(1),
            ));
        }
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<ratatui::layout::Position>>(
        &mut self,
        position: P,
    ) -> std::io::Result<()> {
        self.inner.set_cursor_position(position)
    }
    fn clear(&mut self) -> std::io::Result<()> {
        self.inner.clear()
    }
    fn clear_region(&mut self, clear_type: ratatui::backend::ClearType) -> std::io::Result<()> {
        self.inner.clear_region(clear_type)
    }
    fn size(&self) -> std::io::Result<ratatui::layout::Size> {
        self.inner.size()
    }
    fn window_size(&mut self) -> std::io::Result<ratatui::backend::WindowSize> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> std::io::Result<()> {
        ratatui::backend::Backend::flush(&mut self.inner)
    }
    fn scroll_region_up(&mut self, region: std::ops::Range<u16>, n: u16) -> std::io::Result<()> {
        self.inner.scroll_region_up(region, n)
    }
    fn scroll_region_down(&mut self, region: std::ops::Range<u16>, n: u16) -> std::io::Result<()> {
        self.inner.scroll_region_down(region, n)
    }
}

/// Puts the terminal in the TUI's mode and opens an inline viewport of `height` rows at the
/// cursor.
pub fn enter(height: u16) -> Result<Term, TuiError> {
    enter_placed(height, false)
}

/// [`enter`]; with `bottom` the viewport goes to the bottom of the screen without asking the
/// terminal where the cursor is.
fn enter_placed(height: u16, bottom: bool) -> Result<Term, TuiError> {
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
    let mut term = Terminal::with_options(
        Backend {
            inner: CrosstermBackend::new(out),
            bottom,
            leaving: false,
        },
        TerminalOptions {
            viewport: Viewport::Inline(height),
        },
    )
    .map_err(TuiError::Terminal)?;
    term.backend_mut().bottom = true;
    Ok(term)
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

/// Clears the viewport and leaves the cursor below the transcript. A terminal that is gone
/// (hung up) is no error here: nothing is left to restore on it, and nothing may panic for it
/// (ratatui's drop of the terminal reports a cursor it could not show on stderr, with a
/// `eprintln!` that panics when stderr is that terminal).
pub fn leave(term: &mut Term) {
    let _ = term.clear();
    let area = term.get_frame().area();
    let _ = term.set_cursor_position((0, area.y));
    restore();
    term.backend_mut().leaving = true;
    let _ = term.show_cursor();
}

/// Resolves when the terminal goes away: SIGHUP (caught even when the parent ignored it, as
/// `nohup` does: a UI without its terminal can only leave), or stdin's terminal reporting a
/// hangup (no SIGHUP comes when dsh is not in the terminal's session). Until then it costs
/// nothing: one wakeup per burst of typed input, none when idle.
///
/// Without it, a hung-up terminal with SIGHUP ignored left dsh running: crossterm's reader
/// spins on the dead terminal (`poll` reports the hangup, never input) and an idle UI never
/// writes, so never learns.
pub async fn hung_up() {
    use tokio::signal::unix::{SignalKind, signal};

    let signalled = async {
        match signal(SignalKind::hangup()) {
            Ok(mut s) => {
                if s.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
            }
            Err(e) => {
                tracing::debug!("SIGHUP not watched: {e}");
                std::future::pending().await
            }
        }
    };
    let closed = async {
        let fd = match watch_stdin() {
            Ok(fd) => fd,
            Err(e) => {
                tracing::debug!("stdin not watched for a hangup: {e}");
                return std::future::pending().await;
            }
        };
        loop {
            match fd.readable().await {
                Ok(guard) if guard.ready().is_read_closed() => return,
                // Typed input (crossterm reads it): wait for the next edge.
                Ok(mut guard) => guard.clear_ready(),
                Err(e) => {
                    tracing::debug!("stdin not watched for a hangup: {e}");
                    return std::future::pending().await;
                }
            }
        }
    };
    tokio::select! {
        () = signalled => {}
        () = closed => {}
    }
}

/// A descriptor of stdin's terminal of its own, in the reactor (readable: typed input, or the
/// hangup).
#[allow(unsafe_code)]
fn watch_stdin() -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin().as_fd().try_clone_to_owned()?;
    // SAFETY: the `OwnedFd` is moved into the `AsyncFd`, which owns it (open, the same
    // descriptor for `as_raw_fd`) until it is dropped.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(std::io::Error::from)
}

/// Set when a panic restored the terminal. A panic of the TUI ends the run; one elsewhere (a
/// task the kernel contains) does not, and the TUI then takes the terminal back
/// ([`reenter_after_panic`]).
static RESTORED_BY_PANIC: AtomicBool = AtomicBool::new(false);

/// Restores the terminal before the default panic message, so it is readable.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        RESTORED_BY_PANIC.store(true, Ordering::SeqCst);
        previous(info);
    }));
}

/// After a contained panic elsewhere restored the terminal: raw mode and paste again, and the
/// viewport redrawn whole. Returns whether it did.
pub fn reenter_after_panic(term: &mut Term) -> Result<bool, TuiError> {
    if !RESTORED_BY_PANIC.swap(false, Ordering::SeqCst) {
        return Ok(false);
    }
    enable_raw_mode().map_err(TuiError::Terminal)?;
    crossterm::execute!(
        std::io::stdout(),
        EnableBracketedPaste,
        PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
    )
    .map_err(TuiError::Terminal)?;
    term.clear().map_err(TuiError::Terminal)?;
    Ok(true)
}

/// Inserts lines above the viewport, into the scrollback, a screenful at a time.
///
/// ratatui renders each call's lines into a temporary buffer of 48-byte cells (`height ×
/// width`) before drawing them, and draws at most a screenful per step anyway: a chunk of one
/// screen keeps that buffer at ~230 KB on a 120×40 terminal. Chunks of 500 lines made it 2.9 MB,
/// a transient that set the peak RSS of a session showing a long answer (dsh-bench's
/// 10,000-line transcript).
pub fn insert(term: &mut Term, lines: Vec<Line<'static>>) -> Result<(), TuiError> {
    let screen = term.size().map_or(24, |s| usize::from(s.height));
    let per_chunk = screen.clamp(8, 500);
    let mut rest = lines.into_iter();
    loop {
        let chunk: Vec<Line<'static>> = rest.by_ref().take(per_chunk).collect();
        if chunk.is_empty() {
            return Ok(());
        }
        let n = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
        term.insert_before(n, |buf| {
            Paragraph::new(chunk).render(buf.area, buf);
        })
        .map_err(TuiError::Terminal)?;
    }
}

/// Ctrl-Z: restores the terminal, stops the process (SIGTSTP) and, once continued, reopens the
/// viewport at the bottom of the screen (below what the shell printed meanwhile).
///
/// The reopened viewport does not ask where the cursor is: the input stream dropped before
/// suspending leaves a wake-up byte in crossterm's wake pipe, and a cursor query after SIGCONT
/// read that byte as "interrupted" and failed at once ("The cursor position could not be read
/// within a normal duration"), which ended the run.
pub fn suspend(term: &mut Term, height: u16) -> Result<(), TuiError> {
    leave(term);
    #[cfg(unix)]
    {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTSTP);
    }
    *term = enter_placed(height, true)?;
    Ok(())
}
