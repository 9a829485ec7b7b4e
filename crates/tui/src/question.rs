//! Questions the agent asks the user (`questionAsked`, the `ask_user_question` tool): shown in
//! the viewport one question at a time, answered with one key per option (`1`–`9`; a
//! multi-select question toggles options and takes Enter), or with a line of text when the
//! question offers no options (or after `0`: another answer). Whichever client answers first
//! wins (`questionAnswered` takes it off every screen); Esc interrupts the turn as anywhere.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_protocol::{Question, QuestionAnswer, QuestionRequest};
use ratatui::text::{Line, Span};

use crate::cells::sanitize;
use crate::theme::Theme;
use crate::wrap;

/// Options reachable with one key.
pub const MAX_KEYED: usize = 9;

/// One request on screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionPrompt {
    /// The request.
    pub request: QuestionRequest,
    /// The question being answered.
    index: usize,
    /// The answers so far (one per question before `index`).
    answers: Vec<QuestionAnswer>,
    /// Options toggled (a multi-select question).
    toggled: Vec<usize>,
    /// Typing a free answer (no options, or `0`).
    text: Option<String>,
}

/// What a key did to the front question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuestionKey {
    /// Every question of the request is answered.
    Answered(Vec<QuestionAnswer>),
    /// The prompt changed (or the key was ignored).
    Handled,
    /// Not the prompt's key (Esc, Ctrl-C, Ctrl-D): the normal bindings apply.
    Pass,
}

impl QuestionPrompt {
    /// A prompt for `request`.
    pub fn new(request: QuestionRequest) -> Self {
        let mut p = QuestionPrompt {
            request,
            index: 0,
            answers: Vec::new(),
            toggled: Vec::new(),
            text: None,
        };
        p.start();
        p
    }

    /// The request's id.
    pub fn id(&self) -> &str {
        &self.request.request_id
    }

    fn current(&self) -> Option<&Question> {
        self.request.questions.get(self.index)
    }

    /// Starts the current question (a free answer at once when it has no options).
    fn start(&mut self) {
        self.toggled.clear();
        self.text = self
            .current()
            .is_some_and(|q| q.options.is_empty())
            .then(String::new);
    }

    /// Records the answer of the current question; the whole request's answers once the last
    /// is answered.
    fn answer(&mut self, selected: Vec<String>, text: Option<String>) -> QuestionKey {
        let Some(q) = self.current() else {
            return QuestionKey::Answered(std::mem::take(&mut self.answers));
        };
        self.answers.push(QuestionAnswer {
            question_id: q.id.clone(),
            selected,
            text,
        });
        self.index += 1;
        if self.index >= self.request.questions.len() {
            return QuestionKey::Answered(std::mem::take(&mut self.answers));
        }
        self.start();
        QuestionKey::Handled
    }

    /// Handles a key.
    pub fn key(&mut self, key: KeyEvent) -> QuestionKey {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl || key.code == KeyCode::Esc && self.text.is_none() {
            return QuestionKey::Pass;
        }
        let Some(q) = self.current().cloned() else {
            return QuestionKey::Answered(std::mem::take(&mut self.answers));
        };
        if let Some(text) = &mut self.text {
            match key.code {
                KeyCode::Enter => {
                    let t = text.trim().to_owned();
                    if t.is_empty() {
                        return QuestionKey::Handled;
                    }
                    return self.answer(Vec::new(), Some(t));
                }
                KeyCode::Esc => {
                    if q.options.is_empty() {
                        return QuestionKey::Pass;
                    }
                    self.text = None;
                }
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Char(c) => text.push(c),
                _ => {}
            }
            return QuestionKey::Handled;
        }
        match key.code {
            KeyCode::Char('0') => self.text = Some(String::new()),
            KeyCode::Char(c @ '1'..='9') => {
                let i = usize::from(c as u8 - b'1');
                let Some(option) = q.options.get(i) else {
                    return QuestionKey::Handled;
                };
                if !q.multi_select {
                    return self.answer(vec![option.label.clone()], None);
                }
                match self.toggled.iter().position(|&t| t == i) {
                    Some(at) => {
                        self.toggled.remove(at);
                    }
                    None => self.toggled.push(i),
                }
            }
            KeyCode::Enter if q.multi_select && !self.toggled.is_empty() => {
                let mut chosen = self.toggled.clone();
                chosen.sort_unstable();
                let labels = chosen
                    .into_iter()
                    .filter_map(|i| q.options.get(i).map(|o| o.label.clone()))
                    .collect();
                return self.answer(labels, None);
            }
            _ => {}
        }
        QuestionKey::Handled
    }

    /// A paste while typing a free answer (one line).
    pub fn paste(&mut self, pasted: &str) {
        if let Some(text) = &mut self.text {
            text.push_str(&sanitize(&pasted.replace(['\r', '\n'], " ")));
        }
    }

    /// The prompt's lines (`waiting`: further requests queued behind it).
    pub fn render(&self, theme: Theme, width: u16, waiting: usize) -> Vec<Line<'static>> {
        let w = usize::from(width);
        let Some(q) = self.current() else {
            return Vec::new();
        };
        let count = self.request.questions.len();
        let mut head = String::from("? ");
        if let Some(h) = &q.header {
            head.push_str(&format!("{} · ", sanitize(h)));
        }
        head.push_str(&sanitize(&q.question).replace('\n', " "));
        if count > 1 {
            head.push_str(&format!(" ({}/{count})", self.index + 1));
        }
        let mut out = vec![Line::from(Span::styled(
            wrap::truncate(&head, w),
            theme.warn(),
        ))];
        for (i, o) in q.options.iter().enumerate() {
            let key = if i < MAX_KEYED {
                format!("{}", i + 1)
            } else {
                " ".to_owned()
            };
            let mark = if !q.multi_select {
                ""
            } else if self.toggled.contains(&i) {
                "[x] "
            } else {
                "[ ] "
            };
            let desc = o
                .description
                .as_deref()
                .map(|d| format!(" · {}", sanitize(d).replace('\n', " ")))
                .unwrap_or_default();
            out.push(Line::from(vec![
                Span::styled(format!("  {key} "), theme.heading()),
                Span::raw(wrap::truncate(
                    &format!("{mark}{}", sanitize(&o.label)),
                    w.saturating_sub(4),
                )),
                Span::styled(
                    wrap::truncate(&desc, w.saturating_sub(6 + o.label.chars().count())),
                    theme.dim(),
                ),
            ]));
        }
        let more = if waiting > 0 {
            format!(" · {waiting} more waiting")
        } else {
            String::new()
        };
        let footer = match (&self.text, q.options.is_empty(), q.multi_select) {
            (Some(t), _, _) => {
                let head = "  answer › ";
                let room = w.saturating_sub(head.chars().count() + 1);
                let chars: Vec<char> = t.chars().collect();
                let shown: String = chars[chars.len().saturating_sub(room)..].iter().collect();
                out.push(Line::from(vec![
                    Span::styled(head, theme.warn()),
                    Span::raw(shown),
                    Span::styled("▏", theme.dim()),
                ]));
                format!("  Enter answers{more} · Esc interrupts")
            }
            (None, _, true) => format!("  1–9 toggle · Enter answers · 0 another answer{more}"),
            (None, _, false) => format!("  1–9 answer · 0 another answer{more} · Esc interrupts"),
        };
        out.push(Line::from(Span::styled(
            wrap::truncate(&footer, w),
            theme.dim(),
        )));
        out
    }
}
