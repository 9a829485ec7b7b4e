//! Inline approval prompts. An approval request of the session ([`ApprovalRequest`], asked by
//! the approval plugin through the host) becomes an [`ApprovalPrompt`] in the viewport (queued
//! when several calls ask at once) and takes one key: `y` (or Enter) allows the call once, `a`
//! allows it and stores a rule for the project, `n` denies it after an optional one-line reason
//! that the model is shown. Esc interrupts the turn as anywhere else (the host then dismisses
//! the question). Whichever client answers first wins; the resolution is logged and shown from
//! the log (`approvalResolved`), so every client and a resumed session show the decisions.

use std::collections::HashMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_protocol::{ApprovalDecision, ApprovalOutcome, ApprovalRequest};
use ratatui::text::{Line, Span};

use crate::cells::{Cell, NoticeKind, sanitize};
use crate::theme::Theme;
use crate::wrap;

/// A person's answer to a prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run this call once.
    AllowOnce,
    /// Run it, and calls like it in this project from now on.
    AllowAlways,
    /// Do not run it; the reason is shown to the model.
    Deny {
        /// Why (optional).
        reason: Option<String>,
    },
    /// Dismissed: the turn is being interrupted (the host cancels the question).
    Cancelled,
}

impl ApprovalAnswer {
    /// The protocol's decision (`None` for a dismissal: the interrupt answers it).
    pub fn decision(self) -> Option<ApprovalDecision> {
        match self {
            ApprovalAnswer::AllowOnce => Some(ApprovalDecision::AllowOnce),
            ApprovalAnswer::AllowAlways => Some(ApprovalDecision::AllowAlways),
            ApprovalAnswer::Deny { reason } => Some(ApprovalDecision::Deny { reason }),
            ApprovalAnswer::Cancelled => None,
        }
    }
}

/// What the prompt shows of one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The request's id (answered with it).
    pub id: String,
    /// The tool.
    pub tool_name: String,
    /// Why approval is needed (from the policy).
    pub reason: String,
    /// What the call does, as the tool describes it (its display's subject: the command, the
    /// path, the URL), else its title.
    pub subject: String,
    /// The tool call the question is about.
    pub call_id: String,
    /// The plan (markdown) when the call proposes one (its display carries a plan): accept
    /// it, or reject it with feedback for the model.
    pub plan: Option<String>,
}

impl Question {
    /// The question of `request` (its call as the tool describes it).
    pub fn from_request(request: &ApprovalRequest) -> Self {
        let display = &request.display;
        let subject = match &display.subject {
            Some(s) if !s.is_empty() => s.clone(),
            _ => display.title.clone(),
        };
        Question {
            id: request.request_id.clone(),
            tool_name: request.tool_name.clone(),
            reason: request.reason.clone(),
            subject: sanitize(&subject),
            call_id: request.call_id.clone(),
            plan: display.plan.clone(),
        }
    }
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

/// The questions of the session, for the decision lines (`approvalRequested` then
/// `approvalResolved`).
#[derive(Debug, Default)]
pub struct Decisions {
    asked: HashMap<String, String>,
}

impl Decisions {
    /// Remembers a question's tool.
    pub fn asked(&mut self, request_id: &str, tool_name: &str) {
        self.asked
            .insert(request_id.to_owned(), tool_name.to_owned());
    }

    /// The line of a resolution.
    pub fn decided(
        &mut self,
        request_id: &str,
        outcome: ApprovalOutcome,
        reason: Option<&str>,
    ) -> Cell {
        let tool = self
            .asked
            .remove(request_id)
            .unwrap_or_else(|| "the call".to_owned());
        let (text, kind) = match outcome {
            ApprovalOutcome::AllowedAlways => (
                format!("✓ {tool} allowed always (a rule was stored for this project)"),
                NoticeKind::Info,
            ),
            ApprovalOutcome::AllowedOnce => (format!("✓ {tool} allowed once"), NoticeKind::Info),
            ApprovalOutcome::Denied => (
                match reason {
                    Some(r) => format!("✗ {tool} denied: {r}"),
                    None => format!("✗ {tool} denied"),
                },
                NoticeKind::Warn,
            ),
            ApprovalOutcome::Cancelled => {
                (format!("✗ approval of {tool} cancelled"), NoticeKind::Warn)
            }
            ApprovalOutcome::Unavailable => (
                format!("✗ {tool} needed approval and nobody could answer: not run"),
                NoticeKind::Warn,
            ),
        };
        Cell::Notice { text, kind }
    }
}
