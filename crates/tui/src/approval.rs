//! Inline approval prompts: the TUI's side of the approval seam (`dsh-approval`).
//!
//! The TUI provides the kernel service `approval-answerer` ([`TuiAnswerer`]). A question the
//! `approval` plugin asks becomes an [`ApprovalPrompt`] in the viewport (queued when several
//! calls ask at once) and takes one key: `y` (or Enter) allows the call once, `a` allows it and
//! stores a rule for the project, `n` denies it after an optional one-line reason that the model
//! is shown. Esc interrupts the turn as anywhere else (the question is answered `Cancelled`).
//! The decision is logged by the plugin (`approval/decided`) and shown from the log, so a
//! resumed session shows its decisions too.

use std::collections::HashMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_approval_api::events::{ApprovalAsked, ApprovalDecided, DecidedOutcome};
use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest};
use futures::future::BoxFuture;
use ratatui::text::{Line, Span};
use tokio::sync::oneshot;

use crate::cells::{Cell, NoticeKind, sanitize};
use crate::theme::Theme;
use crate::tool_display::Displayer;
use crate::wrap;
use dsh_protocol::ToolDisplay;
use dsh_tools::DisplayInput;

/// What the prompt shows of one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The id logged in `approval/asked` / `approval/decided`.
    pub id: String,
    /// The tool.
    pub tool_name: String,
    /// Why approval is needed (from the policy).
    pub reason: String,
    /// What the call does, as the tool describes it (its display's subject: the command, the
    /// path, the URL), else the arguments.
    pub subject: String,
    /// The tool call the question is about.
    pub call_id: String,
    /// The plan (markdown) when the call proposes one (its display carries a plan): accept
    /// it, or reject it with feedback for the model.
    pub plan: Option<String>,
}

impl Question {
    /// The question of `request`, whose call the tool describes as `display`.
    pub fn from_request(request: &ApprovalRequest, display: &ToolDisplay) -> Self {
        let subject = match &display.subject {
            Some(s) if !s.is_empty() => s.clone(),
            _ => request.arguments.to_string(),
        };
        Question {
            id: request.id.clone(),
            tool_name: request.tool_name.clone(),
            reason: request.reason.clone(),
            subject: sanitize(&subject),
            call_id: request.call_id.clone(),
            plan: display.plan.clone(),
        }
    }
}

/// The display of the call an approval request is about, as the tools of `displayer` describe
/// it.
pub fn request_display(request: &ApprovalRequest, displayer: &Displayer) -> ToolDisplay {
    let arguments = request.arguments.to_string();
    displayer(&DisplayInput::new(&request.tool_name, &arguments))
}

/// The lines of a plan shown for review: a heading, then the plan as markdown.
pub fn plan_lines(plan: &str, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(Span::styled(
        "▌ plan for review",
        theme.heading(),
    ))];
    out.extend(crate::markdown::render_all(&sanitize(plan), theme, width));
    out
}

/// Where the prompt is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptMode {
    /// Waiting for `y` / `a` / `n`.
    Choose,
    /// `n` was pressed: the reason typed so far (Enter denies, Esc goes back).
    Reason(String),
}

/// One question on screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalPrompt {
    /// The question.
    pub question: Question,
    /// Choosing, or typing a reason.
    pub mode: PromptMode,
}

impl ApprovalPrompt {
    /// A new prompt for `question`.
    pub fn new(question: Question) -> Self {
        ApprovalPrompt {
            question,
            mode: PromptMode::Choose,
        }
    }
}

/// What a key did to the front prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptKey {
    /// The question is answered.
    Answered(ApprovalAnswer),
    /// The prompt changed (or the key was ignored).
    Handled,
    /// Not the prompt's key (Esc to interrupt, Ctrl-C, Ctrl-D): the normal bindings apply.
    Pass,
}

impl ApprovalPrompt {
    /// Handles a key.
    pub fn key(&mut self, key: KeyEvent) -> PromptKey {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match &mut self.mode {
            PromptMode::Choose => match key.code {
                _ if ctrl => PromptKey::Pass,
                KeyCode::Char('y' | 'Y') | KeyCode::Enter => {
                    PromptKey::Answered(ApprovalAnswer::AllowOnce)
                }
                // A plan is accepted once; there is no rule to store.
                KeyCode::Char('a' | 'A') if self.question.plan.is_some() => PromptKey::Handled,
                KeyCode::Char('a' | 'A') => PromptKey::Answered(ApprovalAnswer::AllowAlways),
                KeyCode::Char('n' | 'N') => {
                    self.mode = PromptMode::Reason(String::new());
                    PromptKey::Handled
                }
                KeyCode::Esc => PromptKey::Pass,
                _ => PromptKey::Handled,
            },
            PromptMode::Reason(text) => match key.code {
                KeyCode::Char('c' | 'd') if ctrl => PromptKey::Pass,
                KeyCode::Enter => {
                    let reason = text.trim();
                    PromptKey::Answered(ApprovalAnswer::Deny {
                        reason: (!reason.is_empty()).then(|| reason.to_owned()),
                    })
                }
                KeyCode::Esc => {
                    self.mode = PromptMode::Choose;
                    PromptKey::Handled
                }
                KeyCode::Backspace => {
                    text.pop();
                    PromptKey::Handled
                }
                KeyCode::Char(c) if !ctrl => {
                    text.push(c);
                    PromptKey::Handled
                }
                _ => PromptKey::Handled,
            },
        }
    }

    /// A paste while typing the reason (one line).
    pub fn paste(&mut self, pasted: &str) {
        if let PromptMode::Reason(text) = &mut self.mode {
            text.push_str(&sanitize(&pasted.replace(['\r', '\n'], " ")));
        }
    }

    /// The prompt's lines (`waiting`: further questions queued behind it).
    pub fn render(&self, theme: Theme, width: u16, waiting: usize) -> Vec<Line<'static>> {
        if self.question.plan.is_some() {
            return self.render_plan(theme, width, waiting);
        }
        let w = usize::from(width);
        let q = &self.question;
        let mut out = vec![
            Line::from(vec![
                Span::styled(format!("⚠ allow {}? ", q.tool_name), theme.warn()),
                Span::styled(
                    wrap::truncate(
                        &sanitize(&q.reason),
                        w.saturating_sub(q.tool_name.chars().count() + 10),
                    ),
                    theme.dim(),
                ),
            ]),
            Line::from(Span::styled(
                wrap::truncate(&format!("  {}", q.subject.lines().next().unwrap_or("")), w),
                theme.tool(),
            )),
        ];
        let more = if waiting > 0 {
            format!(" · {waiting} more waiting")
        } else {
            String::new()
        };
        match &self.mode {
            PromptMode::Choose => out.push(Line::from(vec![
                Span::styled("  y", theme.heading()),
                Span::raw(" allow once  "),
                Span::styled("a", theme.heading()),
                Span::raw(" allow always  "),
                Span::styled("n", theme.heading()),
                Span::raw(" deny"),
                Span::styled(format!("{more} · Esc interrupts"), theme.dim()),
            ])),
            PromptMode::Reason(text) => out.extend(reason_lines(
                "  deny · reason for the model › ",
                "  Enter denies (the reason is optional) · Esc back",
                text,
                &more,
                w,
                theme,
            )),
        }
        out
    }
}

impl ApprovalPrompt {
    /// The prompt of a plan (the plan itself is printed above it, into the scrollback).
    fn render_plan(&self, theme: Theme, width: u16, waiting: usize) -> Vec<Line<'static>> {
        let w = usize::from(width);
        let more = if waiting > 0 {
            format!(" · {waiting} more waiting")
        } else {
            String::new()
        };
        let mut out = vec![Line::from(vec![
            Span::styled("⚠ accept this plan? ", theme.warn()),
            Span::styled(
                wrap::truncate(
                    "the plan is above; accepting ends plan mode",
                    w.saturating_sub(20),
                ),
                theme.dim(),
            ),
        ])];
        match &self.mode {
            PromptMode::Choose => out.push(Line::from(vec![
                Span::styled("  y", theme.heading()),
                Span::raw(" accept  "),
                Span::styled("n", theme.heading()),
                Span::raw(" reject with feedback"),
                Span::styled(format!("{more} · Esc interrupts"), theme.dim()),
            ])),
            PromptMode::Reason(text) => out.extend(reason_lines(
                "  reject · feedback for the model › ",
                "  Enter rejects (plan mode stays on) · Esc back",
                text,
                &more,
                w,
                theme,
            )),
        }
        out
    }
}

/// The two lines of a prompt's free-text answer: `head` and the tail of `text` that fits `w`
/// columns, then `footer` and the `more` notice.
fn reason_lines(
    head: &'static str,
    footer: &str,
    text: &str,
    more: &str,
    w: usize,
    theme: Theme,
) -> [Line<'static>; 2] {
    let room = w.saturating_sub(head.chars().count() + 1);
    let chars: Vec<char> = text.chars().collect();
    let shown: String = chars[chars.len().saturating_sub(room)..].iter().collect();
    [
        Line::from(vec![
            Span::styled(head, theme.warn()),
            Span::raw(shown),
            Span::styled("▏", theme.dim()),
        ]),
        Line::from(Span::styled(format!("{footer}{more}"), theme.dim())),
    ]
}

/// A question handed to the UI, with the way back.
pub(crate) struct Asked {
    pub(crate) question: Question,
    pub(crate) reply: oneshot::Sender<ApprovalAnswer>,
}

/// The TUI's answerer: each question goes to the UI loop and waits for the user's key. A
/// question whose turn ends first (its call dropped) disappears from the screen.
pub(crate) struct TuiAnswerer {
    pub(crate) send: Box<dyn Fn(Asked) -> bool + Send + Sync>,
    /// Describes the call of a question (the session's tools, looked up per request).
    pub(crate) display: Box<dyn Fn(&ApprovalRequest) -> ToolDisplay + Send + Sync>,
}

impl ApprovalAnswerer for TuiAnswerer {
    fn answer<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let asked = Asked {
                question: Question::from_request(request, &(self.display)(request)),
                reply,
            };
            if !(self.send)(asked) {
                // The UI is gone.
                return ApprovalAnswer::Cancelled;
            }
            answer.await.unwrap_or(ApprovalAnswer::Cancelled)
        })
    }
}

/// The questions of the log, for the decision lines (`approval/asked` then `approval/decided`).
#[derive(Debug, Default)]
pub struct Decisions {
    asked: HashMap<String, ApprovalAsked>,
}

impl Decisions {
    /// Remembers a question.
    pub fn asked(&mut self, asked: ApprovalAsked) {
        self.asked.insert(asked.id.clone(), asked);
    }

    /// The line of a decision.
    pub fn decided(&mut self, decided: &ApprovalDecided) -> Cell {
        let tool = self
            .asked
            .remove(&decided.id)
            .map_or_else(|| "the call".to_owned(), |a| a.tool_name);
        let (text, kind) = match decided.outcome {
            DecidedOutcome::AllowedOnce if decided.always => (
                format!("✓ {tool} allowed always (a rule was stored for this project)"),
                NoticeKind::Info,
            ),
            DecidedOutcome::AllowedOnce => (format!("✓ {tool} allowed once"), NoticeKind::Info),
            DecidedOutcome::Rejected => (
                match &decided.reason {
                    Some(r) => format!("✗ {tool} denied: {r}"),
                    None => format!("✗ {tool} denied"),
                },
                NoticeKind::Warn,
            ),
            DecidedOutcome::Cancelled => {
                (format!("✗ approval of {tool} cancelled"), NoticeKind::Warn)
            }
            DecidedOutcome::Unavailable => (
                format!("✗ {tool} needed approval and nobody could answer: not run"),
                NoticeKind::Warn,
            ),
        };
        Cell::Notice { text, kind }
    }
}
