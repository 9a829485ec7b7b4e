//! Transcript cells: what is inserted into the terminal's scrollback, one finished item at a
//! time (a user message, an answer, collapsed reasoning, a tool card, a notice).

use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::markdown;
use crate::theme::Theme;
use crate::wrap;

/// Lines of reasoning shown while collapsed.
pub const REASONING_PREVIEW_LINES: usize = 3;
/// Output lines a bash card shows (the last ones).
pub const BASH_TAIL_LINES: usize = 6;
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

/// A tool call as dispatched, and its result once it came.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCard {
    /// Tool name.
    pub name: String,
    /// Raw argument string (shared with the logged call).
    pub arguments: dsh_llm::ToolArguments,
    /// The result (`None` while running).
    pub result: Option<ToolOutcome>,
}

/// The result of a tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    /// The model-visible text.
    pub text: String,
    /// Whether the result is an error.
    pub is_error: bool,
    /// The error code, for errors.
    pub error_code: Option<String>,
    /// The tool's presentation facts (`tool/result.meta`).
    pub meta: Option<Value>,
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
                wrap::wrap(
                    vec![Line::from(Span::styled(sanitize(text), style))],
                    width,
                    2,
                )
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

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn meta_u64(meta: Option<&Value>, key: &str) -> Option<u64> {
    meta.and_then(|m| m.get(key)).and_then(Value::as_u64)
}

impl ToolCard {
    /// The card's lines.
    pub fn render(&self, theme: Theme, width: u16) -> Vec<Line<'static>> {
        let args: Value = serde_json::from_str(&self.arguments).unwrap_or(Value::Null);
        let w = usize::from(width);
        let mark = match &self.result {
            None => Span::styled("◌ ", theme.dim()),
            Some(r) if r.is_error => Span::styled("✗ ", theme.error()),
            Some(_) => Span::styled("● ", theme.ok()),
        };
        let (subject, mut body) = match self.name.as_str() {
            "bash" => self.bash(&args, theme, w),
            "edit" => self.edit(&args, theme),
            "write" => self.write(&args, theme),
            "read" | "grep" | "glob" => (self.summary(&args), Vec::new()),
            crate::approval::PLAN_TOOL => self.plan(theme),
            _ if crate::subagent_card::is_subagent(self) => {
                crate::subagent_card::render(self, &args, theme)
            }
            _ => (wrap::truncate(&self.arguments, 200), Vec::new()),
        };
        let title = Line::from(vec![
            mark,
            Span::styled(self.name.clone(), theme.tool()),
            Span::raw(" "),
            Span::raw(sanitize(&subject).replace('\n', " ")),
        ]);
        let mut lines = vec![title];
        if let Some(r) = &self.result
            && r.is_error
        {
            let code = r.error_code.as_deref().unwrap_or("ERROR");
            let first = r.text.lines().next().unwrap_or("");
            lines.push(Line::from(Span::styled(
                format!("  {code}: {}", sanitize(first)),
                theme.error(),
            )));
        } else {
            lines.append(&mut body);
        }
        wrap::wrap(lines, width, 4)
    }

    /// `exit_plan_mode`: what became of the plan (the plan itself is printed above the card).
    fn plan(&self, theme: Theme) -> (String, Vec<Line<'static>>) {
        let Some(r) = &self.result else {
            return ("plan submitted".into(), Vec::new());
        };
        let accepted = r
            .meta
            .as_ref()
            .and_then(|m| m.get("accepted"))
            .and_then(Value::as_bool)
            == Some(true);
        let subject = if accepted {
            "plan accepted · plan mode is off"
        } else {
            "plan not accepted · plan mode stays on"
        };
        let first = r.text.lines().next().unwrap_or("");
        let body = vec![Line::from(Span::styled(
            format!("    {}", sanitize(first)),
            theme.dim(),
        ))];
        (subject.into(), body)
    }

    fn bash(&self, args: &Value, theme: Theme, width: usize) -> (String, Vec<Line<'static>>) {
        let command = arg(args, "command").unwrap_or("").to_owned();
        let mut body = Vec::new();
        let Some(r) = &self.result else {
            return (command, body);
        };
        let meta = r.meta.as_ref();
        let mut facts = Vec::new();
        match meta.and_then(|m| m.get("signal")).and_then(Value::as_str) {
            Some(sig) => facts.push(Span::styled(format!("killed by {sig}"), theme.error())),
            None => match meta.and_then(|m| m.get("exitCode")).and_then(Value::as_i64) {
                Some(0) => facts.push(Span::styled("exit 0", theme.ok())),
                Some(c) => facts.push(Span::styled(format!("exit {c}"), theme.error())),
                None => {}
            },
        }
        if meta
            .and_then(|m| m.get("timedOut"))
            .and_then(Value::as_bool)
            == Some(true)
        {
            facts.push(Span::styled("timed out", theme.error()));
        }
        if let Some(ms) = meta_u64(meta, "durationMs") {
            facts.push(Span::styled(duration(ms), theme.dim()));
        }
        let bytes =
            meta_u64(meta, "stdoutBytes").unwrap_or(0) + meta_u64(meta, "stderrBytes").unwrap_or(0);
        if bytes > 0 {
            facts.push(Span::styled(human_bytes(bytes), theme.dim()));
        }
        let mut fact_line = vec![Span::raw("    ")];
        for (i, f) in facts.into_iter().enumerate() {
            if i > 0 {
                fact_line.push(Span::styled(" · ", theme.dim()));
            }
            fact_line.push(f);
        }
        if fact_line.len() > 1 {
            body.push(Line::from(fact_line));
        }
        // The last lines, found from the end: a 10 MB output costs only what is shown.
        let text = r.text.trim_end_matches('\n');
        let mut tail: Vec<&str> = text.rsplit('\n').take(BASH_TAIL_LINES + 1).collect();
        let more = tail.len() > BASH_TAIL_LINES;
        if more {
            tail.pop();
        }
        tail.reverse();
        if more {
            body.push(Line::from(Span::styled("    …", theme.dim())));
        }
        for l in tail {
            let l = wrap::truncate(&sanitize(l), width.saturating_sub(4).max(8));
            body.push(Line::from(Span::styled(format!("    {l}"), theme.dim())));
        }
        (command, body)
    }

    fn edit(&self, args: &Value, theme: Theme) -> (String, Vec<Line<'static>>) {
        let path = arg(args, "file_path").unwrap_or("").to_owned();
        let old = arg(args, "old_string").unwrap_or("");
        let new = arg(args, "new_string").unwrap_or("");
        let mut subject = path;
        if let Some(n) = self
            .result
            .as_ref()
            .and_then(|r| meta_u64(r.meta.as_ref(), "replacements"))
            && n > 1
        {
            subject.push_str(&format!(" ({n} replacements)"));
        }
        let body = if self.result.as_ref().is_some_and(|r| !r.is_error) {
            diff_lines(old, new, theme)
        } else {
            Vec::new()
        };
        (subject, body)
    }

    fn write(&self, args: &Value, theme: Theme) -> (String, Vec<Line<'static>>) {
        let path = arg(args, "file_path").unwrap_or("").to_owned();
        let content = arg(args, "content").unwrap_or("");
        let Some(r) = self.result.as_ref().filter(|r| !r.is_error) else {
            return (path, Vec::new());
        };
        let created = r
            .meta
            .as_ref()
            .and_then(|m| m.get("created"))
            .and_then(Value::as_bool);
        let verb = match created {
            Some(true) => "created",
            Some(false) => "replaced",
            None => "written",
        };
        let n = content.lines().count();
        let subject = format!("{path} ({verb}, {n} lines)");
        (subject, diff_lines("", content, theme))
    }

    fn summary(&self, args: &Value) -> String {
        let meta = self.result.as_ref().and_then(|r| r.meta.as_ref());
        match self.name.as_str() {
            "read" => {
                let path = arg(args, "file_path").or(arg(args, "path")).unwrap_or("");
                let lines = self
                    .result
                    .as_ref()
                    .filter(|r| !r.is_error)
                    .map(|r| r.text.lines().count());
                match lines {
                    Some(n) => format!("{path} ({n} lines)"),
                    None => path.to_owned(),
                }
            }
            "grep" => {
                let pattern = arg(args, "pattern").unwrap_or("");
                match (meta_u64(meta, "matches"), meta_u64(meta, "files")) {
                    (Some(m), Some(f)) => format!("{pattern} ({m} matches in {f} files)"),
                    _ => pattern.to_owned(),
                }
            }
            _ => {
                let pattern = arg(args, "pattern").unwrap_or("");
                match meta_u64(meta, "count") {
                    Some(n) => format!("{pattern} ({n} files)"),
                    None => pattern.to_owned(),
                }
            }
        }
    }
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
