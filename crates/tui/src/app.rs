//! The application state: transcript, composer, pending steers, popups and the key bindings.
//! Pure state: effects (sending, cancelling, switching sessions) are returned as [`Action`]s
//! for the runtime, so every state can be drawn on a `TestBackend`.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use parking_lot::Mutex;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::approval::{ApprovalPrompt, PromptKey};
use crate::cells::{Cell, NoticeKind};
use crate::composer::Composer;
use crate::status::{StatusInfo, cost_table, status_line};
use crate::theme::Theme;
use crate::transcript::Transcript;
use crate::wrap;

/// The slash commands, with their help text.
pub const COMMANDS: [(&str, &str); 10] = [
    ("/help", "show the commands and keys"),
    ("/new", "start a new session in this directory"),
    (
        "/resume",
        "continue a stored session (picker; or /resume ID)",
    ),
    ("/model", "show or set the model (/model ID)"),
    (
        "/effort",
        "show or set the reasoning effort (/effort off|low|high|max)",
    ),
    ("/cost", "tokens, cache hits and cost per turn"),
    ("/diff", "the workspace's git diff"),
    (
        "/compact",
        "summarise the history now (keeps the cache-hit prefix)",
    ),
    (
        "/plan",
        "toggle plan mode: read-only tools until the plan is accepted (Shift+Tab)",
    ),
    ("/quit", "leave (the session is saved)"),
];

/// An effect for the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a prompt (starts a turn).
    Send(String),
    /// A steer was typed while the agent works (the last of [`App::pending`], not sent yet):
    /// the host delivers it at the next step boundary.
    Steered,
    /// Take back the queued steer with this id (it came back to the composer).
    WithdrawSteer(String),
    /// Interrupt the turn.
    Cancel,
    /// Leave.
    Quit,
    /// Start a new session.
    New,
    /// Continue a stored session.
    Resume(String),
    /// List the stored sessions for the picker.
    OpenPicker,
    /// Search the stored sessions' full text for the picker's query (as it is typed).
    SearchSessions(String),
    /// Use this model from the next request on.
    SetModel(String),
    /// Use this effort from the next request on.
    SetEffort(String),
    /// Show the workspace's git diff.
    Diff,
    /// Compact the history now (the compaction service, when composed).
    Compact,
    /// Suspend to the shell (Ctrl-Z).
    Suspend,
    /// Turn plan mode on or off (`/plan`, Shift+Tab).
    TogglePlan,
    /// Run a command of the registry (a plugin's slash command) with the rest of the line.
    RunCommand {
        /// The name, without the slash.
        name: String,
        /// The arguments.
        args: String,
    },
    /// The user answered the agent's questions of request `id`.
    AnswerQuestion {
        /// The request's id.
        id: String,
        /// One answer per question.
        answers: Vec<dsh_protocol::QuestionAnswer>,
    },
    /// The user answered the approval question `id`.
    Answer {
        /// The question's id.
        id: String,
        /// The answer.
        answer: crate::approval::ApprovalAnswer,
    },
}

/// A steer typed while the agent works, not yet delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSteer {
    /// The host's id, once queued there.
    pub id: Option<String>,
    /// The text.
    pub text: String,
    /// Sent to the host (its id may not be back yet).
    pub sent: bool,
}

/// One row of the session picker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickItem {
    /// Session id.
    pub id: String,
    /// The title, else the first prompt.
    pub title: String,
    /// The second line: first prompt (when a title differs), cwd, age, turns, status.
    pub detail: String,
}

/// The session picker.
#[derive(Clone, Debug, Default)]
pub struct Picker {
    /// Every stored session, newest first.
    pub items: Vec<PickItem>,
    /// The filter typed so far.
    pub query: String,
    /// Index into the filtered rows.
    pub selected: usize,
    /// The host's full-text hits (its catalog) for a query: shown after the rows the query
    /// matches here, while it is still the query typed.
    pub found: Option<(String, Vec<PickItem>)>,
}

impl Picker {
    /// The rows matching the query (fuzzy: its characters in order), best first: the query
    /// whole in the title, then anywhere in the row, then fuzzily in the title, then anywhere;
    /// newest first within each.
    pub fn filtered(&self) -> Vec<&PickItem> {
        let q = self.query.to_lowercase();
        let mut rows: Vec<(u8, &PickItem)> = self
            .items
            .iter()
            .filter_map(|i| {
                let title = i.title.to_lowercase();
                let all = format!("{title} {} {}", i.detail.to_lowercase(), i.id);
                let rank = if title.contains(&q) {
                    0
                } else if all.contains(&q) {
                    1
                } else if fuzzy(&q, &title) {
                    2
                } else if fuzzy(&q, &all) {
                    3
                } else {
                    return None;
                };
                Some((rank, i))
            })
            .collect();
        rows.sort_by_key(|(rank, _)| *rank);
        let mut rows: Vec<&PickItem> = rows.into_iter().map(|(_, i)| i).collect();
        if let Some((query, found)) = &self.found
            && *query == self.query
        {
            for f in found {
                if !rows.iter().any(|r| r.id == f.id) {
                    rows.push(f);
                }
            }
        }
        rows
    }
}

/// Whether the characters of `query` occur in `text` in order (case-insensitive).
pub fn fuzzy(query: &str, text: &str) -> bool {
    let mut t = text.chars().flat_map(char::to_lowercase);
    query
        .chars()
        .flat_map(char::to_lowercase)
        .all(|q| t.any(|c| c == q))
}

/// The application state.
pub struct App {
    /// Palette.
    pub theme: Theme,
    /// The transcript fold.
    pub transcript: Transcript,
    /// The composer.
    pub composer: Composer,
    /// Steers typed while the agent works (here or by another client), not yet delivered.
    pub pending: Mutex<Vec<PendingSteer>>,
    /// Whether a turn is running.
    pub running: bool,
    /// Model id shown.
    pub model: String,
    /// Effort shown.
    pub effort: Option<String>,
    /// The route's context window.
    pub context_window: Option<u64>,
    /// Whether the route has prices.
    pub priced: bool,
    /// Session id.
    pub session_id: String,
    /// Lines waiting to be inserted above the viewport.
    pub inserts: Vec<Line<'static>>,
    /// The open picker.
    pub picker: Option<Picker>,
    /// The project's files, for `@` mentions.
    pub files: Option<Arc<crate::mentions::FileIndex>>,
    mention_sel: usize,
    /// Approval questions, the front one on screen.
    pub approvals: std::collections::VecDeque<ApprovalPrompt>,
    /// The agent's questions to the user, the front one on screen (after approvals).
    pub questions: std::collections::VecDeque<crate::question::QuestionPrompt>,
    /// A `/rewind` preview this UI asked for, waiting for y/N (after approvals and questions).
    pub rewind_confirm: Option<crate::confirm::RewindConfirm>,
    hint: Option<String>,
    quit_armed: bool,
    search: Option<usize>,
    /// Slash commands plugins expand (custom commands, skills): `(/name, help)`, sent as prompts.
    pub extra_commands: Vec<(String, String)>,
    /// Names (without the slash) of the registry's plugin commands, run through the registry.
    pub registry_commands: Vec<String>,
    /// The running sub-agents of the shown agent (live cards; Ctrl+O expands them).
    pub agents: crate::live_agents::LiveAgents,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("session_id", &self.session_id)
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

impl App {
    /// A fresh state.
    pub fn new(theme: Theme, transcript: Transcript, composer: Composer) -> Self {
        App {
            theme,
            transcript,
            composer,
            pending: Mutex::new(Vec::new()),
            running: false,
            model: String::new(),
            effort: None,
            context_window: None,
            priced: false,
            session_id: String::new(),
            inserts: Vec::new(),
            picker: None,
            approvals: std::collections::VecDeque::new(),
            questions: std::collections::VecDeque::new(),
            rewind_confirm: None,
            files: None,
            mention_sel: 0,
            hint: None,
            quit_armed: false,
            search: None,
            extra_commands: Vec::new(),
            registry_commands: Vec::new(),
            agents: crate::live_agents::LiveAgents::default(),
        }
    }

    /// Queues a cell for the scrollback.
    pub fn insert_cell(&mut self, cell: &Cell, width: u16) {
        let lines = cell.render(self.theme, width);
        self.inserts.extend(lines);
    }

    fn notice(&mut self, text: impl Into<String>, kind: NoticeKind, width: u16) {
        self.insert_cell(
            &Cell::Notice {
                text: text.into(),
                kind,
            },
            width,
        );
    }

    /// The slash commands matching what is typed (when a command name is being typed).
    pub fn completions(&self) -> Vec<(&str, &str)> {
        let raw = self.composer.raw();
        if !raw.starts_with('/') || raw.contains(char::is_whitespace) {
            return Vec::new();
        }
        COMMANDS
            .iter()
            .copied()
            .chain(
                self.extra_commands
                    .iter()
                    .map(|(c, h)| (c.as_str(), h.as_str())),
            )
            .filter(|(c, _)| c.starts_with(raw.as_str()) && *c != raw)
            .collect()
    }

    /// Whether `name` (with its `/`) is one of the plugin commands.
    fn is_extra(&self, name: &str) -> bool {
        let registry = name
            .strip_prefix('/')
            .is_some_and(|n| self.registry_commands.iter().any(|r| r == n));
        !registry && self.extra_commands.iter().any(|(c, _)| c == name)
    }

    /// Handles a paste.
    pub fn paste(&mut self, text: &str) {
        if let Some(a) = self.approvals.front_mut() {
            a.paste(text);
            return;
        }
        if let Some(q) = self.questions.front_mut() {
            q.paste(text);
            return;
        }
        if let Some(p) = &mut self.picker {
            p.query.push_str(text.trim());
            p.selected = 0;
            return;
        }
        self.composer.paste(text);
    }

    /// Handles a key; returns the effects.
    pub fn key(&mut self, key: KeyEvent, width: u16) -> Vec<Action> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let is_ctrl_c = ctrl && key.code == KeyCode::Char('c');
        if !is_ctrl_c {
            self.quit_armed = false;
            self.hint = None;
        }
        if key.code != KeyCode::Char('r') || !ctrl {
            self.search = None;
        }
        if self.picker.is_some() {
            return self.picker_key(key);
        }
        if let Some(a) = self.approvals.front_mut() {
            match a.key(key) {
                PromptKey::Answered(answer) => {
                    let id = a.question.id.clone();
                    self.approvals.pop_front();
                    return vec![Action::Answer { id, answer }];
                }
                PromptKey::Handled => return Vec::new(),
                PromptKey::Pass => {}
            }
        } else if let Some(q) = self.questions.front_mut() {
            match q.key(key) {
                crate::question::QuestionKey::Answered(answers) => {
                    let id = q.id().to_owned();
                    self.questions.pop_front();
                    return vec![Action::AnswerQuestion { id, answers }];
                }
                crate::question::QuestionKey::Handled => return Vec::new(),
                crate::question::QuestionKey::Pass => {}
            }
        }
        if self.approvals.is_empty()
            && self.questions.is_empty()
            && let Some(c) = &self.rewind_confirm
        {
            match c.key(key) {
                crate::confirm::ConfirmKey::Yes(args) => {
                    self.rewind_confirm = None;
                    return vec![Action::RunCommand {
                        name: "rewind".into(),
                        args,
                    }];
                }
                crate::confirm::ConfirmKey::No => {
                    self.rewind_confirm = None;
                    self.hint = Some("rewind not applied: nothing changed".into());
                    return Vec::new();
                }
                crate::confirm::ConfirmKey::Ignored => return Vec::new(),
            }
        }
        if let Some(actions) = self.mention_key(key) {
            return actions;
        }
        match key.code {
            KeyCode::Char('c') if ctrl => {
                if self.quit_armed {
                    return vec![Action::Quit];
                }
                self.quit_armed = true;
                self.hint = Some("Ctrl-C again to quit".into());
                let mut out = Vec::new();
                if !self.composer.is_empty() {
                    self.composer.set_text("");
                } else if self.running {
                    out.extend(self.reclaim_pending());
                    out.extend(self.dismiss_approvals());
                    out.push(Action::Cancel);
                }
                out
            }
            KeyCode::Char('d') if ctrl && self.composer.is_empty() => vec![Action::Quit],
            KeyCode::Char('z') if ctrl => vec![Action::Suspend],
            KeyCode::Char('o') if ctrl => {
                // With live sub-agent cards, Ctrl+O expands or collapses them.
                if self.agents.toggle() {
                    return Vec::new();
                }
                if let Some(text) = self.transcript.last_reasoning.clone() {
                    self.insert_cell(
                        &Cell::Reasoning {
                            text,
                            expanded: true,
                        },
                        width,
                    );
                }
                Vec::new()
            }
            KeyCode::Char('r') if ctrl => {
                let query = self.composer.raw();
                let query = if self.search.is_some() {
                    self.hint.take().unwrap_or(query)
                } else {
                    query
                };
                if let Some((i, entry)) = self.composer.search(&query, self.search) {
                    let entry = entry.to_owned();
                    self.composer.set_text(&entry);
                    self.search = Some(i);
                }
                self.hint = Some(query);
                Vec::new()
            }
            KeyCode::Char('j') if ctrl => {
                self.composer.area.insert_newline();
                Vec::new()
            }
            KeyCode::Esc => {
                let mut out = self.dismiss_approvals();
                if self.running {
                    out.extend(self.reclaim_pending());
                    out.push(Action::Cancel);
                }
                out
            }
            KeyCode::Enter
                if key
                    .modifiers
                    .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT) =>
            {
                self.composer.area.insert_newline();
                Vec::new()
            }
            KeyCode::Enter => self.submit(width),
            KeyCode::BackTab => vec![Action::TogglePlan],
            KeyCode::Tab => {
                let first = self.completions().first().map(|(c, _)| format!("{c} "));
                if let Some(c) = first {
                    self.composer.set_text(&c);
                } else {
                    self.composer.area.insert_tab();
                }
                Vec::new()
            }
            KeyCode::Up => {
                if self.composer.is_empty() {
                    let last = self.pending.lock().pop();
                    if let Some(p) = last {
                        // Edit the last undelivered steer (Enter queues it again).
                        self.composer.set_text(&p.text);
                        return p.id.map(Action::WithdrawSteer).into_iter().collect();
                    }
                }
                if !self.composer.history_prev() {
                    self.composer.area.input(key);
                }
                Vec::new()
            }
            KeyCode::Down => {
                if !self.composer.history_next() {
                    self.composer.area.input(key);
                }
                Vec::new()
            }
            _ => {
                self.composer.area.input(key);
                Vec::new()
            }
        }
    }

    /// The `@` mention at the cursor: its query and length in chars.
    fn mention(&self) -> Option<(String, usize)> {
        let ratatui_textarea::DataCursor(row, col) = self.composer.area.cursor();
        let line = self.composer.area.lines().get(row)?;
        crate::mentions::token_at(line, col)
    }

    /// The files offered for the `@` mention at the cursor (`None`: no mention, or the files
    /// are still being listed).
    pub fn mention_matches(&self) -> Option<Vec<String>> {
        let (query, _) = self.mention()?;
        self.files.as_ref()?.matches(&query)
    }

    /// Keys of the mention popup: Tab/Enter complete, Up/Down choose. `None`: not handled.
    fn mention_key(&mut self, key: KeyEvent) -> Option<Vec<Action>> {
        let matches = self.mention_matches().filter(|m| !m.is_empty());
        let Some(matches) = matches else {
            self.mention_sel = 0;
            return None;
        };
        match key.code {
            KeyCode::Tab | KeyCode::Enter if key.modifiers.is_empty() => {
                let path = matches.get(self.mention_sel).or(matches.first())?.clone();
                let (_, n) = self.mention()?;
                for _ in 0..n {
                    self.composer.area.delete_char();
                }
                self.composer.area.insert_str(format!("@{path} "));
                self.mention_sel = 0;
                Some(Vec::new())
            }
            KeyCode::Up => {
                self.mention_sel = self.mention_sel.saturating_sub(1);
                Some(Vec::new())
            }
            KeyCode::Down => {
                if self.mention_sel + 1 < matches.len() {
                    self.mention_sel += 1;
                }
                Some(Vec::new())
            }
            _ => {
                self.mention_sel = 0;
                None
            }
        }
    }

    fn mention_popup(&self, width: u16) -> Option<Vec<Line<'static>>> {
        let (query, _) = self.mention()?;
        let theme = self.theme;
        let index = self.files.as_ref()?;
        let Some(matches) = index.matches(&query) else {
            return Some(vec![Line::from(Span::styled(
                "  listing the project's files…",
                theme.dim(),
            ))]);
        };
        if matches.is_empty() {
            return Some(vec![Line::from(Span::styled(
                format!("  no matching file for @{query}"),
                theme.dim(),
            ))]);
        }
        let mut out = Vec::new();
        for (i, m) in matches.iter().enumerate() {
            let style = if i == self.mention_sel {
                theme.selected()
            } else {
                ratatui::style::Style::new()
            };
            out.push(Line::from(Span::styled(
                wrap::truncate(&format!("@{m}"), usize::from(width)),
                style,
            )));
        }
        Some(out)
    }

    /// Every open question answered `Cancelled` (the turn is being interrupted: the host
    /// dismisses the agent's questions too).
    fn dismiss_approvals(&mut self) -> Vec<Action> {
        self.questions.clear();
        self.approvals
            .drain(..)
            .map(|a| Action::Answer {
                id: a.question.id,
                answer: crate::approval::ApprovalAnswer::Cancelled,
            })
            .collect()
    }

    /// Undelivered steers come back to the composer when the turn is interrupted: nothing
    /// typed is lost (the host is asked to withdraw them).
    fn reclaim_pending(&mut self) -> Vec<Action> {
        let pending: Vec<PendingSteer> = std::mem::take(&mut *self.pending.lock());
        if pending.is_empty() {
            return Vec::new();
        }
        let mut text = self.composer.raw();
        let mut out = Vec::new();
        for p in pending {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&p.text);
            out.extend(p.id.map(Action::WithdrawSteer));
        }
        self.composer.set_text(&text);
        out
    }

    fn submit(&mut self, width: u16) -> Vec<Action> {
        let first = self.completions().first().map(|(c, _)| (*c).to_owned());
        if let Some(c) = first {
            // Enter on a partly typed command runs the first match.
            self.composer.set_text(&c);
        }
        let Some(text) = self.composer.take() else {
            return Vec::new();
        };
        let plugin_command = text
            .split_whitespace()
            .next()
            .is_some_and(|n| self.is_extra(n));
        if text.starts_with('/') && !plugin_command {
            if let Some((name, args)) = text[1..].split_once(' ').or(Some((&text[1..], "")))
                && self.registry_commands.iter().any(|c| c == name)
                && !COMMANDS.iter().any(|(c, _)| c[1..] == *name)
            {
                return vec![Action::RunCommand {
                    name: name.to_owned(),
                    args: args.trim().to_owned(),
                }];
            }
            return self.command(&text, width);
        }
        if self.running {
            self.pending.lock().push(PendingSteer {
                id: None,
                text,
                sent: false,
            });
            return vec![Action::Steered];
        }
        vec![Action::Send(text)]
    }

    fn command(&mut self, text: &str, width: u16) -> Vec<Action> {
        let mut words = text.split_whitespace();
        let name = words.next().unwrap_or("");
        let arg = words.next().map(str::to_owned);
        match (name, arg) {
            ("/help", _) => {
                let mut lines = vec![Line::from(Span::styled("Commands", self.theme.heading()))];
                for (c, h) in COMMANDS {
                    lines.push(Line::from(vec![
                        Span::styled(format!("  {c:<9}"), self.theme.tool()),
                        Span::raw(h),
                    ]));
                }
                for (c, h) in &self.extra_commands {
                    lines.push(Line::from(vec![
                        Span::styled(format!("  {c:<9}"), self.theme.tool()),
                        Span::raw(h.clone()),
                    ]));
                }
                lines.push(Line::from(Span::styled("Keys", self.theme.heading())));
                for (k, h) in [
                    (
                        "Enter",
                        "send (while working: queue a steer for the next step)",
                    ),
                    ("Shift+Enter, Ctrl+J", "new line"),
                    (
                        "Up / Down",
                        "history; Up on an empty composer edits a queued steer",
                    ),
                    ("Esc", "interrupt the turn (delivered text is kept)"),
                    ("Ctrl+R", "search the history"),
                    ("Ctrl+O", "show the last reasoning whole"),
                    ("Shift+Tab", "toggle plan mode"),
                    ("Ctrl+C twice, Ctrl+D", "quit"),
                ] {
                    lines.push(Line::from(vec![
                        Span::styled(format!("  {k:<21}"), self.theme.tool()),
                        Span::raw(h),
                    ]));
                }
                self.insert_cell(&Cell::Lines(lines), width);
                Vec::new()
            }
            ("/new", _) => vec![Action::New],
            ("/resume", Some(id)) => vec![Action::Resume(id)],
            ("/resume", None) => vec![Action::OpenPicker],
            ("/model", Some(m)) => vec![Action::SetModel(m)],
            ("/effort", Some(e)) => vec![Action::SetEffort(e)],
            ("/model", None) | ("/effort", None) => {
                let effort = self.effort.clone().unwrap_or_else(|| "-".into());
                let text = format!("model {} · effort {effort}", self.model);
                self.notice(text, NoticeKind::Info, width);
                Vec::new()
            }
            ("/cost", _) => {
                let lines = cost_table(&self.transcript.usage, self.priced, self.theme);
                self.insert_cell(&Cell::Lines(lines), width);
                Vec::new()
            }
            ("/diff", _) => vec![Action::Diff],
            ("/compact", _) => vec![Action::Compact],
            ("/plan", None) => vec![Action::TogglePlan],
            ("/plan", Some(args)) => vec![Action::RunCommand {
                name: "plan".into(),
                args,
            }],
            ("/quit", _) | ("/exit", _) => vec![Action::Quit],
            (other, _) => {
                self.notice(
                    format!("unknown command {other} (see /help)"),
                    NoticeKind::Error,
                    width,
                );
                Vec::new()
            }
        }
    }

    fn picker_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let Some(p) = &mut self.picker else {
            return Vec::new();
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => self.picker = None,
            KeyCode::Char('c') if ctrl => self.picker = None,
            KeyCode::Up => p.selected = p.selected.saturating_sub(1),
            KeyCode::Down => {
                let n = p.filtered().len();
                if p.selected + 1 < n {
                    p.selected += 1;
                }
            }
            KeyCode::Backspace => {
                p.query.pop();
                p.selected = 0;
                return vec![Action::SearchSessions(p.query.clone())];
            }
            KeyCode::Enter => {
                let id = p.filtered().get(p.selected).map(|i| i.id.clone());
                self.picker = None;
                if let Some(id) = id {
                    return vec![Action::Resume(id)];
                }
            }
            KeyCode::Char(c) if !ctrl => {
                p.query.push(c);
                p.selected = 0;
                return vec![Action::SearchSessions(p.query.clone())];
            }
            _ => {}
        }
        Vec::new()
    }

    /// Shows a hint in the status line until the next key.
    pub fn set_hint(&mut self, hint: impl Into<String>) {
        self.hint = Some(hint.into());
    }

    /// Draws the viewport: live region, popups, pending steers, composer and status line.
    pub fn draw(&self, frame: &mut Frame<'_>) {
        self.draw_at(frame, std::time::Instant::now());
    }

    /// Draws the viewport with the live cards' clocks read at `now` (tests pass a fixed one).
    pub fn draw_at(&self, frame: &mut Frame<'_>, now: std::time::Instant) {
        let area = frame.area();
        let width = area.width;
        let theme = self.theme;
        let mut popup: Vec<Line<'static>> = Vec::new();
        if let Some(a) = self.approvals.front() {
            popup = a.render(theme, width, self.approvals.len() - 1);
        } else if let Some(q) = self.questions.front() {
            popup = q.render(theme, width, self.questions.len() - 1);
        } else if let Some(c) = &self.rewind_confirm {
            popup = c.render(theme, width);
        } else if let Some(p) = &self.picker {
            popup.push(Line::from(vec![
                Span::styled("resume ", theme.heading()),
                Span::raw(format!("› {}", p.query)),
            ]));
            let rows = p.filtered();
            if rows.is_empty() {
                popup.push(Line::from(Span::styled(
                    "  no matching session",
                    theme.dim(),
                )));
            }
            let first = p.selected.saturating_sub(4);
            let w = usize::from(width);
            for (i, item) in rows.iter().enumerate().skip(first).take(5) {
                let style = if i == p.selected {
                    theme.selected()
                } else {
                    ratatui::style::Style::new()
                };
                popup.push(Line::from(Span::styled(
                    wrap::truncate(&format!("  {}", item.title), w),
                    style,
                )));
                let short = item.id.rsplit('-').next().unwrap_or(&item.id);
                popup.push(Line::from(Span::styled(
                    wrap::truncate(&format!("    {} · {short}", item.detail), w),
                    theme.dim(),
                )));
            }
        } else if let Some(lines) = self.mention_popup(width) {
            popup = lines;
        } else {
            for (i, (c, h)) in self.completions().iter().enumerate() {
                let style = if i == 0 {
                    theme.selected()
                } else {
                    ratatui::style::Style::new()
                };
                popup.push(Line::from(vec![
                    Span::styled(format!("{c:<9}"), style),
                    Span::styled(format!(" {h}"), theme.dim()),
                ]));
            }
        }
        let mut steers: Vec<Line<'static>> = Vec::new();
        for p in self.pending.lock().iter() {
            let first = p.text.lines().next().unwrap_or("");
            steers.push(Line::from(vec![
                Span::styled("⏳ queued: ", theme.warn()),
                Span::raw(wrap::truncate(first, usize::from(width).saturating_sub(12))),
            ]));
        }
        if !steers.is_empty() {
            steers.push(Line::from(Span::styled(
                "   delivered at the next step · Up edits · Esc interrupts",
                theme.dim(),
            )));
        }
        let composer_h = self.composer.height();
        let fixed = composer_h + 2;
        let avail = area.height.saturating_sub(fixed);
        let popup_h = (popup.len() as u16).min(avail);
        let steer_h = (steers.len() as u16).min(avail - popup_h);
        let live_h = avail - popup_h - steer_h;
        let [live_a, popup_a, steer_a, rule_a, comp_a, status_a] = Layout::vertical([
            Constraint::Length(live_h),
            Constraint::Length(popup_h),
            Constraint::Length(steer_h),
            Constraint::Length(1),
            Constraint::Length(composer_h),
            Constraint::Length(1),
        ])
        .areas(area);
        let mut live = self.transcript.live_lines(width);
        live.extend(self.agents.render(theme, width, now));
        let skip = live.len().saturating_sub(usize::from(live_h));
        let live: Vec<Line<'static>> = live.into_iter().skip(skip).collect();
        // Bottom-aligned: the newest line sits right above the composer.
        let pad = usize::from(live_h).saturating_sub(live.len());
        let mut shown = vec![Line::default(); pad];
        shown.extend(live);
        frame.render_widget(Paragraph::new(shown), live_a);
        frame.render_widget(Paragraph::new(popup), popup_a);
        frame.render_widget(Paragraph::new(steers), steer_a);
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(
                "─".repeat(usize::from(width)),
                theme.dim(),
            ))),
            rule_a,
        );
        let [mark_a, text_a] =
            Layout::horizontal([Constraint::Length(2), Constraint::Fill(1)]).areas(comp_a);
        frame.render_widget(Paragraph::new(Span::styled("› ", theme.user())), mark_a);
        frame.render_widget(&self.composer.area, text_a);
        let usage = self.transcript.usage_now();
        let info = StatusInfo {
            model: &self.model,
            effort: self.effort.as_deref(),
            context_window: self.context_window,
            usage,
            priced: self.priced,
            running: self.running,
            hint: self.hint.as_deref(),
        };
        frame.render_widget(Paragraph::new(status_line(&info, theme, width)), status_a);
    }

    /// The viewport height this state wants for a terminal of `rows` rows.
    pub fn viewport_height(rows: u16) -> u16 {
        rows.clamp(4, 14)
    }
}

/// The area of the viewport (for tests).
pub fn full(width: u16, height: u16) -> Rect {
    Rect::new(0, 0, width, height)
}
