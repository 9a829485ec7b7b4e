//! Transcript cells: what is inserted into the terminal's scrollback, one finished item at a
//! time (a user message, an answer, collapsed reasoning, a tool card, a notice).

use dsh_protocol::{ExitStatus, TodoStatus, ToolDisplay};
use ratatui::text::{Line, Span};

use crate::markdown;
use crate::theme::Theme;
use crate::wrap;

/// Lines of reasoning shown while collapsed.
pub const REASONING_PREVIEW_LINES: usize = 3;
/// Diff lines a card shows before eliding the rest.
pub const DIFF_MAX_LINES: usize = 40;
/// Largest pair of texts a card diffs (beyond: counts only).
pub const DIFF_MAX_BYTES: usize = 256 * 1024;

/// How a notice reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    /// Neutral information (dim).
    Info,
    /// Something the user should notice (retries, interruptions).
    Warn,
    /// A failure.
    Error,
}

/// One finished item of the transcript.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// The user's message.
    User {
        /// Its text.
        text: String,
    },
    /// An answer, rendered whole (history; streamed answers are inserted block by block).
    Assistant {
        /// Markdown text.
        text: String,
    },
    /// Reasoning, dim; collapsed to its first lines unless expanded.
    Reasoning {
        /// The text.
        text: String,
        /// Shown whole.
        expanded: bool,
    },
    /// A tool call and its result.
    Tool(ToolCard),
    /// A line about the session (retries, errors, interruptions, plugin events).
    Notice {
        /// The text.
        text: String,
        /// Its tone.
        kind: NoticeKind,
    },
    /// Pre-rendered lines (slash command output such as `/cost` or `/diff`).
    Lines(Vec<Line<'static>>),
}

/// A tool call as the tool describes it, and its result once it came.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCard {
    /// How the tool describes the call (with its output summary once it ended).
    pub display: Box<ToolDisplay>,
    /// The result (`None` while running).
    pub result: Option<ToolOutcome>,
}

/// The result of a tool call, as its card needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutcome {
    /// An error's message (its first line is shown).
    pub text: String,
    /// Whether the result is an error.
    pub is_error: bool,
    /// The error code, for errors.
    pub error_code: Option<String>,
}

impl ToolCard {
    /// A running call, as the tool describes it.
    pub fn new(display: ToolDisplay) -> Self {
        ToolCard {
            display: Box::new(display),
            result: None,
        }
    }

    /// The call ended with `outcome`, described again with its result as `display`.
    pub fn finish(&mut self, display: ToolDisplay, outcome: ToolOutcome) {
        *self.display = display;
        self.result = Some(outcome);
    }

    /// A finished call (history, tests).
    pub fn ended(display: ToolDisplay, outcome: Option<ToolOutcome>) -> Self {
        ToolCard {
            display: Box::new(display),
            result: outcome,
        }
    }
}

impl Cell {
    /// The cell's lines at `width` columns, wrapped.
    pub fn render(&self, theme: Theme, width: u16) -> Vec<Line<'static>> {
        match self {
            Cell::User { text } => {
                let mut lines = Vec::new();
                for (i, l) in sanitize(text).lines().enumerate() {
                    let mark = if i == 0 { "› " } else { "  " };
                    lines.push(Line::from(vec![
                        Span::styled(mark, theme.user()),
                        Span::styled(l.to_owned(), theme.user()),
                    ]));
                }
                wrap::wrap(lines, width, 2)
            }
            Cell::Assistant { text } => markdown::render_all(&sanitize(text), theme, width),
            Cell::Reasoning { text, expanded } => reasoning(text, *expanded, theme, width),
            Cell::Tool(card) => card.render(theme, width),
            Cell::Notice { text, kind } => {
                let style = match kind {
                    NoticeKind::Info => theme.dim(),
                    NoticeKind::Warn => theme.warn(),
                    NoticeKind::Error => theme.error(),
                };
                // One line per line of the text: a multi-line notice (a rewind preview's
                // files, a conflict and its remedy) keeps its lines.
                let lines = text
                    .split('\n')
                    .map(|l| Line::from(Span::styled(sanitize(l), style)))
                    .collect();
                wrap::wrap(lines, width, 2)
            }
            Cell::Lines(lines) => wrap::wrap(lines.clone(), width, 0),
        }
    }
}

fn reasoning(text: &str, expanded: bool, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let text = sanitize(text.trim());
    let all: Vec<&str> = text.lines().collect();
    let shown = if expanded {
        all.len()
    } else {
        all.len().min(REASONING_PREVIEW_LINES)
    };
    let mut lines = vec![Line::from(Span::styled("∴ thinking", theme.dim()))];
    for l in &all[..shown] {
        lines.push(Line::from(Span::styled(format!("  {l}"), theme.dim())));
    }
    let mut out = wrap::wrap(lines, width, 2);
    if shown < all.len() {
        out.push(Line::from(Span::styled(
            format!("  … {} more lines (Ctrl+O shows all)", all.len() - shown),
            theme.dim(),
        )));
    }
    out
}

/// Replaces control characters (escape sequences from tool output or a model must never reach
/// the terminal) with `�`, keeping newlines and expanding tabs.
pub fn sanitize(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return s.to_owned();
    }
    s.chars()
        .map(|c| match c {
            '\n' => "\n".to_owned(),
            '\t' => "    ".to_owned(),
            '\r' => String::new(),
            c if c.is_control() => "�".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

impl ToolCard {
    /// The card's lines.
    pub fn render(&self, theme: Theme, width: u16) -> Vec<Line<'static>> {
        render_tool(&self.display, self.result.as_ref(), theme, width)
    }
}

/// The lines of a tool card: a mark (running, done, failed), the display's title and subject
/// (with the result's headline), then for a failure its code and first line, else the diff,
/// a facts line (how a command exited, how long it ran, how much it printed, the display's
/// fields), the task list and the output the tool kept.
pub fn render_tool(
    display: &ToolDisplay,
    outcome: Option<&ToolOutcome>,
    theme: Theme,
    width: u16,
) -> Vec<Line<'static>> {
    let w = usize::from(width);
    let mark = match outcome {
        None => Span::styled("◌ ", theme.dim()),
        Some(r) if r.is_error => Span::styled("✗ ", theme.error()),
        Some(_) => Span::styled("● ", theme.ok()),
    };
    let output = display.output.as_ref();
    let mut subject = display.subject.clone().unwrap_or_default();
    if let Some(h) = output.and_then(|o| o.headline.as_deref()) {
        subject = format!("{subject} ({h})").trim_start().to_owned();
    }
    let title = Line::from(vec![
        mark,
        Span::styled(sanitize(&display.title), theme.tool()),
        Span::raw(" "),
        Span::raw(sanitize(&subject).replace('\n', " ")),
    ]);
    let mut lines = vec![title];
    match outcome {
        Some(r) if r.is_error => {
            let code = r.error_code.as_deref().unwrap_or("ERROR");
            let first = r.text.lines().next().unwrap_or("");
            lines.push(Line::from(Span::styled(
                format!("  {code}: {}", sanitize(first)),
                theme.error(),
            )));
        }
        Some(_) => lines.extend(body(display, theme, w)),
        None => {}
    }
    wrap::wrap(lines, width, 4)
}

/// The body of a card whose call succeeded.
fn body(display: &ToolDisplay, theme: Theme, width: usize) -> Vec<Line<'static>> {
    let mut body = Vec::new();
    if let Some(diff) = &display.diff {
        body.extend(diff_lines(
            diff.old_text.as_deref().unwrap_or(""),
            &diff.new_text,
            theme,
        ));
    }
    let output = display.output.as_ref();
    let mut facts = Vec::new();
    match output.and_then(|o| o.exit.as_ref()) {
        Some(ExitStatus::Exited { code: 0 }) => facts.push(Span::styled("exit 0", theme.ok())),
        Some(ExitStatus::Exited { code }) => {
            facts.push(Span::styled(format!("exit {code}"), theme.error()))
        }
        Some(ExitStatus::Signaled { signal }) => facts.push(Span::styled(
            format!("killed by {}", sanitize(signal)),
            theme.error(),
        )),
        Some(ExitStatus::TimedOut) => facts.push(Span::styled("timed out", theme.error())),
        None => {}
    }
    if let Some(ms) = output.and_then(|o| o.duration_ms) {
        facts.push(Span::styled(duration(ms), theme.dim()));
    }
    if let Some(b) = output.and_then(|o| o.bytes).filter(|&b| b > 0) {
        facts.push(Span::styled(human_bytes(b), theme.dim()));
    }
    for f in &display.fields {
        facts.push(Span::styled(
            sanitize(&format!("{}: {}", f.label, f.value)).replace('\n', " "),
            theme.dim(),
        ));
    }
    if !facts.is_empty() {
        let mut line = vec![Span::raw("    ")];
        for (i, f) in facts.into_iter().enumerate() {
            if i > 0 {
                line.push(Span::styled(" · ", theme.dim()));
            }
            line.push(f);
        }
        body.push(Line::from(line));
    }
    for t in display.todos.iter().flatten() {
        let (sign, style) = match t.status {
            TodoStatus::Completed => ("✓", theme.ok()),
            TodoStatus::InProgress => ("▸", theme.warn()),
            TodoStatus::Pending => ("○", theme.dim()),
        };
        body.push(Line::from(vec![
            Span::styled(format!("    {sign} "), style),
            Span::raw(sanitize(&t.content).replace('\n', " ")),
        ]));
    }
    if let Some(o) = output.filter(|o| !o.text.is_empty()) {
        let more = Line::from(Span::styled("    …", theme.dim()));
        if o.truncated && o.tail {
            body.push(more.clone());
        }
        for l in o.text.split('\n') {
            let l = wrap::truncate(&sanitize(l), width.saturating_sub(4).max(8));
            body.push(Line::from(Span::styled(format!("    {l}"), theme.dim())));
        }
        if o.truncated && !o.tail {
            body.push(more);
        }
    }
    body
}

/// A coloured unified diff of two texts (context 2), bounded to [`DIFF_MAX_LINES`].
pub fn diff_lines(old: &str, new: &str, theme: Theme) -> Vec<Line<'static>> {
    use similar::{ChangeTag, TextDiff};
    if old.len() + new.len() > DIFF_MAX_BYTES {
        return vec![Line::from(Span::styled(
            format!(
                "    (diff not shown: {} lines → {} lines)",
                old.lines().count(),
                new.lines().count()
            ),
            theme.dim(),
        ))];
    }
    let diff = TextDiff::configure()
        .timeout(std::time::Duration::from_millis(100))
        .diff_lines(old, new);
    let mut out = Vec::new();
    let mut total = 0usize;
    for group in diff.grouped_ops(2) {
        for op in &group {
            for change in diff.iter_changes(op) {
                total += 1;
                if out.len() >= DIFF_MAX_LINES {
                    continue;
                }
                let value = sanitize(change.value().trim_end_matches(['\n', '\r']));
                let (sign, style) = match change.tag() {
                    ChangeTag::Delete => ("-", theme.removed()),
                    ChangeTag::Insert => ("+", theme.added()),
                    ChangeTag::Equal => (" ", theme.dim()),
                };
                let num = change
                    .new_index()
                    .or(change.old_index())
                    .map(|i| format!("{:>4} ", i + 1))
                    .unwrap_or_default();
                out.push(Line::from(vec![
                    Span::styled(num, theme.dim()),
                    Span::styled(format!("{sign}{value}"), style),
                ]));
            }
        }
    }
    if total > out.len() {
        out.push(Line::from(Span::styled(
            format!("     … {} more diff lines", total - out.len()),
            theme.dim(),
        )));
    }
    out
}

/// Colours the lines of a `git diff` output.
pub fn git_diff_lines(text: &str, theme: Theme) -> Vec<Line<'static>> {
    text.lines()
        .map(|l| {
            let l = sanitize(l);
            let style = if l.starts_with("+++") || l.starts_with("---") || l.starts_with("diff ") {
                theme.heading()
            } else if l.starts_with('+') {
                theme.added()
            } else if l.starts_with('-') {
                theme.removed()
            } else if l.starts_with("@@") {
                theme.link()
            } else {
                theme.dim()
            };
            Line::from(Span::styled(l, style))
        })
        .collect()
}

/// `850ms`, `1.2s`, `2m05s`.
pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

/// `512 B`, `1.5 KB`, `10.0 MB`.
pub fn human_bytes(b: u64) -> String {
    if b < 1024 {
        format!("{b} B")
    } else if b < 1024 * 1024 {
        format!("{:.1} KB", b as f64 / 1024.0)
    } else {
        format!("{:.1} MB", b as f64 / (1024.0 * 1024.0))
    }
}
