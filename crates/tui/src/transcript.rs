//! The fold of the session's protocol events into scrollback lines and the live region.
//!
//! Committed events (projected from the log: the truth, so a resumed session shows its whole
//! history) become [`Cell`]s; the live deltas of the attempt in progress become markdown pieces
//! as they complete. Tool cards are drawn from the displays the tools themselves fill in.

use dsh_protocol::{Event, EventMsg, JobState, MessageSource, TurnEndReason};
use ratatui::text::{Line, Span};

use crate::cells::{Cell, NoticeKind, ToolCard, ToolOutcome, sanitize};
use crate::markdown::{MarkdownStream, PieceRenderer};
use crate::status::Usage;
use crate::theme::Theme;
use crate::wrap;

/// The attempt being streamed.
struct Live {
    md: MarkdownStream,
    renderer: PieceRenderer,
    reasoning: String,
    /// Bytes of answer text received so far (deltas missed by a subscriber that fell behind are
    /// recovered from the committed message or a snapshot: what follows this many bytes).
    received: usize,
    width: u16,
}

/// The transcript state.
pub struct Transcript {
    theme: Theme,
    live: Option<Live>,
    calls: Vec<(String, ToolCard)>,
    /// Usage and cost.
    pub usage: Usage,
    /// The last reasoning shown collapsed (Ctrl+O shows it whole).
    pub last_reasoning: Option<String>,
    decisions: crate::approval::Decisions,
    /// Calls whose plan was printed when it was asked about.
    plans_shown: std::collections::HashSet<String>,
    /// The agent's open questions by request id: `(question id, question)`.
    questions: std::collections::HashMap<String, Vec<(String, String)>>,
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript")
            .field("usage", &self.usage)
            .finish_non_exhaustive()
    }
}

impl Transcript {
    /// An empty transcript.
    pub fn new(theme: Theme) -> Self {
        Transcript {
            theme,
            live: None,
            calls: Vec::new(),
            usage: Usage::default(),
            last_reasoning: None,
            decisions: crate::approval::Decisions::default(),
            plans_shown: std::collections::HashSet::new(),
            questions: std::collections::HashMap::new(),
        }
    }

    /// The lines of the plan of call `call_id`, asked about now (its card will not repeat it).
    pub fn show_plan(&mut self, call_id: &str, plan: &str, width: u16) -> Vec<Line<'static>> {
        if !self.plans_shown.insert(call_id.to_owned()) {
            return Vec::new();
        }
        crate::approval::plan_lines(plan, self.theme, width)
    }

    fn cell(&self, cell: &Cell, width: u16) -> Vec<Line<'static>> {
        cell.render(self.theme, width)
    }

    fn live(&mut self, width: u16) -> &mut Live {
        let theme = self.theme;
        self.live.get_or_insert_with(|| Live {
            md: MarkdownStream::new(),
            renderer: PieceRenderer::new(theme, width),
            reasoning: String::new(),
            received: 0,
            width,
        })
    }

    /// Streams `text` into the live answer (the reasoning is complete once its answer starts).
    fn push_text(&mut self, text: &str, width: u16) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        let reasoning = std::mem::take(&mut self.live(width).reasoning);
        out.extend(self.reasoning_cell(reasoning, width));
        let live = self.live(width);
        live.received += text.len();
        for p in live.md.push(text) {
            out.extend(live.renderer.piece(&p));
        }
        out
    }

    /// Brings the live attempt up to `full` (its whole text so far, from a commit or a
    /// snapshot): the part not streamed yet is streamed now. `false` when `full` is shorter than
    /// what was streamed (another attempt).
    pub fn catch_up(&mut self, full: &str, width: u16) -> (bool, Vec<Line<'static>>) {
        let Some(live) = &self.live else {
            return (false, Vec::new());
        };
        // The same attempt's text only grows: what was received is its prefix.
        match full.get(live.received..) {
            Some("") => (true, Vec::new()),
            Some(rest) => {
                let rest = rest.to_owned();
                (true, self.push_text(&rest, width))
            }
            None => (false, Vec::new()),
        }
    }

    /// Brings the live reasoning up to `full` (a snapshot's).
    pub fn catch_up_reasoning(&mut self, full: &str, width: u16) {
        let live = self.live(width);
        if full.len() > live.reasoning.len() && full.starts_with(live.reasoning.as_str()) {
            live.reasoning = full.to_owned();
        }
    }

    /// The usage to show.
    pub fn usage_now(&self) -> &Usage {
        &self.usage
    }

    fn reasoning_cell(&mut self, text: String, width: u16) -> Vec<Line<'static>> {
        if text.trim().is_empty() {
            return Vec::new();
        }
        let lines = self.cell(
            &Cell::Reasoning {
                text: text.clone(),
                expanded: false,
            },
            width,
        );
        self.last_reasoning = Some(text);
        lines
    }

    /// Flushes the live attempt (its open block and reasoning).
    fn finish_live(&mut self) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        if let Some(mut live) = self.live.take() {
            let reasoning = std::mem::take(&mut live.reasoning);
            let w = live.width;
            out.extend(self.reasoning_cell(reasoning, w));
            for p in live.md.finish() {
                out.extend(live.renderer.piece(&p));
            }
        }
        out
    }

    /// Forgets the attempt in progress without printing it (a snapshot restates it).
    pub fn drop_live(&mut self) {
        self.live = None;
    }

    /// Folds one event of the shown session; returns the lines to insert into the scrollback.
    pub fn on_event(&mut self, ev: &Event, width: u16) -> Vec<Line<'static>> {
        self.on_msg(&ev.msg, width)
    }

    /// Folds one event's message.
    pub fn on_msg(&mut self, msg: &EventMsg, width: u16) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        match msg {
            EventMsg::UserMessage {
                text,
                source: MessageSource::User,
                ..
            } => out.extend(self.cell(&Cell::User { text: text.clone() }, width)),
            EventMsg::TextDelta { text } => out.extend(self.push_text(text, width)),
            EventMsg::ReasoningDelta { text } => self.live(width).reasoning.push_str(text),
            EventMsg::AssistantMessage {
                text,
                reasoning,
                interrupted,
                ..
            } => {
                let (caught_up, lines) = self.catch_up(text, width);
                out.extend(lines);
                if caught_up || (self.live.is_some() && text.trim().is_empty()) {
                    out.extend(self.finish_live());
                } else {
                    // Nothing streamed of this message here (history), or the live text was
                    // another attempt's: the message whole.
                    self.live = None;
                    if let Some(r) = reasoning {
                        out.extend(self.reasoning_cell(r.clone(), width));
                    }
                    if !text.trim().is_empty() {
                        out.extend(self.cell(&Cell::Assistant { text: text.clone() }, width));
                    }
                }
                if *interrupted {
                    out.extend(self.cell(
                        &Cell::Notice {
                            text: "⏹ interrupted (the delivered text is kept)".into(),
                            kind: NoticeKind::Warn,
                        },
                        width,
                    ));
                }
            }
            EventMsg::UsageUpdated { turn, usage, .. } => self.usage.add(*turn, usage),
            EventMsg::UsageStreamed {
                usage,
                context_tokens,
                ..
            } => self.usage.stream(usage, *context_tokens),
            EventMsg::ToolCallBegan {
                call_id, display, ..
            } => {
                out.extend(self.finish_live());
                self.calls
                    .push((call_id.clone(), ToolCard::new(display.clone())));
            }
            EventMsg::ToolCallEnded {
                call_id,
                display,
                is_error,
                error_code,
                error_message,
                ..
            } => {
                let mut card = match self.calls.iter().position(|(c, _)| c == call_id) {
                    Some(i) => self.calls.remove(i).1,
                    None => ToolCard::new(display.clone()),
                };
                card.finish(
                    display.clone(),
                    ToolOutcome {
                        text: error_message.clone().unwrap_or_default(),
                        is_error: *is_error,
                        error_code: error_code.as_ref().map(|c| c.as_str().into_owned()),
                    },
                );
                // A plan nobody was asked about here (another policy) is printed before its
                // card.
                if !self.plans_shown.remove(call_id)
                    && let Some(plan) = &card.display.plan
                {
                    out.extend(crate::approval::plan_lines(plan, self.theme, width));
                }
                out.extend(self.cell(&Cell::Tool(card), width));
            }
            EventMsg::Retrying {
                attempt,
                max_attempts,
                delay_ms,
                error,
            } => {
                out.extend(self.finish_live());
                let of = max_attempts.map(|m| format!("/{m}")).unwrap_or_default();
                let text = format!(
                    "↻ stream dropped ({}: {}), retrying {attempt}{of} in {}",
                    error.code,
                    error.message,
                    crate::cells::duration(*delay_ms)
                );
                out.extend(self.cell(
                    &Cell::Notice {
                        text,
                        kind: NoticeKind::Warn,
                    },
                    width,
                ));
            }
            EventMsg::TurnEnded { reason, .. } => {
                out.extend(self.finish_live());
                self.calls.clear();
                if let Some((text, kind)) = turn_end_notice(reason) {
                    out.extend(self.cell(&Cell::Notice { text, kind }, width));
                }
            }
            EventMsg::TodoList { .. }
            | EventMsg::PlanMode { .. }
            | EventMsg::WorkingDirectory { .. } => {
                if let Some(lines) = crate::toolset::lines(msg, self.theme) {
                    out.extend(self.cell(&Cell::Lines(lines), width));
                }
            }
            EventMsg::ApprovalRequested(r) => {
                self.decisions.asked(&r.request_id, &r.tool_name);
                if let Some(plan) = &r.display.plan {
                    out.extend(self.show_plan(&r.call_id, plan, width));
                }
            }
            EventMsg::ApprovalResolved {
                request_id,
                outcome,
                reason,
                ..
            } => {
                let cell = self
                    .decisions
                    .decided(request_id, *outcome, reason.as_deref());
                out.extend(self.cell(&cell, width));
            }
            EventMsg::QuestionAsked(r) => {
                let qs = r
                    .questions
                    .iter()
                    .map(|q| (q.id.clone(), q.question.clone()))
                    .collect();
                self.questions.insert(r.request_id.clone(), qs);
            }
            EventMsg::QuestionAnswered {
                request_id,
                answers,
            } => {
                let asked = self.questions.remove(request_id).unwrap_or_default();
                if answers.is_empty() {
                    out.extend(self.cell(
                        &Cell::Notice {
                            text: "✗ the question was dismissed".to_owned(),
                            kind: NoticeKind::Warn,
                        },
                        width,
                    ));
                }
                for a in answers {
                    let question = asked
                        .iter()
                        .find(|(id, _)| *id == a.question_id)
                        .map_or("the question", |(_, q)| q.as_str());
                    let mut said = a.selected.join(", ");
                    if let Some(t) = &a.text {
                        if !said.is_empty() {
                            said.push_str(", ");
                        }
                        said.push_str(t);
                    }
                    out.extend(self.notice(format!("? {question} → {said}"), width));
                }
            }
            EventMsg::CompactionStarted { .. } => {
                out.extend(self.notice("⟳ compacting the history".to_owned(), width));
            }
            EventMsg::CompactionEnded {
                tokens_before,
                tokens_after,
                error,
            } => {
                let text = match (error, tokens_before, tokens_after) {
                    (Some(e), _, _) => format!("compaction failed: {}", e.message),
                    (None, Some(b), Some(a)) => format!("✓ history compacted: ~{b} → ~{a} tokens"),
                    _ => "compaction ended".to_owned(),
                };
                out.extend(self.notice(text, width));
            }
            // Foreground bash calls are jobs too: only background work settling is worth a line.
            EventMsg::JobUpdated {
                kind,
                state,
                description,
                ..
            } if kind != "bash" && *state != JobState::Running => {
                let word = match state {
                    JobState::Completed => "completed",
                    JobState::Failed => "failed",
                    JobState::Cancelled => "killed",
                    JobState::Running => "running",
                };
                let label = description.as_deref().unwrap_or(kind);
                out.extend(self.notice(format!("· job {label} {word}"), width));
            }
            // A sub-agent's run ended: its usage (failed runs too) counts in this session's
            // totals, under the latest turn.
            EventMsg::SubagentFinished { usage, .. } => {
                let turn = self.usage.turns.keys().next_back().copied().unwrap_or(0);
                self.usage.add_subagent(turn, usage);
            }
            EventMsg::CommandRan { name, outcome } => match outcome {
                dsh_protocol::CommandOutcome::Done { text }
                | dsh_protocol::CommandOutcome::SwitchSession { text, .. }
                    if !text.trim().is_empty() =>
                {
                    out.extend(self.command_output(name, text, width));
                }
                dsh_protocol::CommandOutcome::RewindPreview(p) => {
                    out.extend(self.rewind_preview(p, width));
                }
                _ => {}
            },
            // Where the session continues (a replayed old session says so; a live UI moves).
            EventMsg::SessionForked {
                session_id,
                to_turn,
                rewind_id,
                ..
            } => {
                let why = match (to_turn, rewind_id) {
                    (Some(t), Some(_)) => {
                        format!(" (rewound to before turn {t}, files restored)")
                    }
                    (Some(t), None) => format!(" (rewound to before turn {t})"),
                    _ => String::new(),
                };
                out.extend(self.notice(format!("↪ continued in {session_id}{why}"), width));
            }
            EventMsg::Notice { level, text } => {
                let kind = match level {
                    dsh_protocol::NoticeLevel::Info => NoticeKind::Info,
                    dsh_protocol::NoticeLevel::Warning => NoticeKind::Warn,
                };
                out.extend(self.cell(
                    &Cell::Notice {
                        text: text.clone(),
                        kind,
                    },
                    width,
                ));
            }
            EventMsg::Error(e) => out.extend(self.cell(
                &Cell::Notice {
                    text: format!("✗ {}: {}", e.code, e.message),
                    kind: NoticeKind::Error,
                },
                width,
            )),
            // Bookkeeping or state the viewport shows elsewhere (the welcome line, the status
            // line, the steer list, live cards). No raw event kind is shown.
            _ => {}
        }
        out
    }

    /// What a command said: a diff coloured, anything else as a notice.
    fn command_output(&self, name: &str, text: &str, width: u16) -> Vec<Line<'static>> {
        if let Some(diff) = text
            .strip_prefix("```diff\n")
            .and_then(|t| t.strip_suffix("```"))
        {
            let mut lines = crate::cells::git_diff_lines(diff, self.theme);
            let total = lines.len();
            lines.truncate(2000);
            if total > 2000 {
                lines.push(Line::from(format!(
                    "… {} more lines (run git diff)",
                    total - 2000
                )));
            }
            return self.cell(&Cell::Lines(lines), width);
        }
        tracing::debug!(command = name, "command output");
        self.notice(text.to_owned(), width)
    }

    /// A rewind's preview: the files, their diff coloured, the conflicts, and how to apply it.
    fn rewind_preview(
        &self,
        p: &dsh_protocol::command::RewindPreview,
        width: u16,
    ) -> Vec<Line<'static>> {
        use dsh_protocol::command::{RewindFileChange, RewindMode};
        let what = match p.mode {
            RewindMode::Both => "files and conversation",
            RewindMode::Code => "files",
            RewindMode::Conversation => "conversation",
        };
        let mut text = format!("Rewind {what} to before turn {}:", p.to_turn);
        if p.mode != RewindMode::Conversation && p.files.is_empty() {
            text.push_str("\n  no file changes to undo");
        }
        for f in &p.files {
            let verb = match f.change {
                RewindFileChange::Recreate => "re-create",
                RewindFileChange::Restore => "restore  ",
                RewindFileChange::Delete => "delete   ",
            };
            let stat = if f.binary {
                "binary".to_owned()
            } else {
                format!("+{} -{}", f.added, f.removed)
            };
            text.push_str(&format!("\n  {verb} {} ({stat})", f.path));
        }
        let mut out = self.notice(text, width);
        if !p.diff.is_empty() {
            out.extend(self.cell(
                &Cell::Lines(crate::cells::git_diff_lines(&p.diff, self.theme)),
                width,
            ));
        }
        for c in &p.left_alone {
            out.extend(self.notice(format!("left alone (over the size limit): {c}"), width));
        }
        if p.conflicts.is_empty() {
            out.extend(self.notice(format!("Apply with /rewind {}", p.confirm), width));
        } else {
            out.extend(self.cell(
                &Cell::Notice {
                    text: format!(
                        "! changed outside dsh since the checkpoint: {}\nOverwrite them (a \
                         backup is kept) with /rewind {}",
                        p.conflicts.join(", "),
                        if p.confirm.contains(" force") {
                            p.confirm.clone()
                        } else {
                            p.confirm.replacen(" yes", " force yes", 1)
                        }
                    ),
                    kind: NoticeKind::Warn,
                },
                width,
            ));
        }
        out
    }

    fn notice(&self, text: String, width: u16) -> Vec<Line<'static>> {
        self.cell(
            &Cell::Notice {
                text,
                kind: NoticeKind::Info,
            },
            width,
        )
    }

    /// The live region: reasoning in progress, the open block of the answer, running tools.
    pub fn live_lines(&self, width: u16) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        if let Some(live) = &self.live {
            if let Some(last) = live.reasoning.trim_end().lines().last() {
                out.push(Line::from(Span::styled(
                    format!(
                        "∴ {}",
                        wrap::truncate(&sanitize(last), usize::from(width) - 2)
                    ),
                    self.theme.dim(),
                )));
            }
            out.extend(live.renderer.tail(&live.md));
        }
        for (_, card) in &self.calls {
            out.extend(card.render(self.theme, width));
        }
        out
    }

    /// Whether anything is live.
    pub fn is_live(&self) -> bool {
        self.live.is_some() || !self.calls.is_empty()
    }
}

/// The notice of a turn's end (`None` for a normal end).
fn turn_end_notice(reason: &TurnEndReason) -> Option<(String, NoticeKind)> {
    match reason {
        TurnEndReason::Completed | TurnEndReason::Forked => None,
        TurnEndReason::Error { error } => Some((
            format!("✗ the turn failed: {}: {}", error.code, error.message),
            NoticeKind::Error,
        )),
        TurnEndReason::Aborted => Some(("⏹ turn interrupted".to_owned(), NoticeKind::Warn)),
        TurnEndReason::MaxTokens => Some((
            "⚠ the answer reached the output cap".to_owned(),
            NoticeKind::Warn,
        )),
        TurnEndReason::Blocked => Some((
            "⚠ the turn was blocked by a plugin".to_owned(),
            NoticeKind::Warn,
        )),
        TurnEndReason::Interrupted => Some((
            "⚠ this turn was cut short by a crash (repaired on resume)".to_owned(),
            NoticeKind::Warn,
        )),
        TurnEndReason::Other { kind } => Some((format!("· turn ended `{kind}`"), NoticeKind::Info)),
    }
}
