//! The fold of the session feed into scrollback lines and the live region.
//!
//! Committed session events (the log: the truth, so a resumed session shows its whole history)
//! become [`Cell`]s; live stream chunks of the attempt in progress become markdown pieces as
//! they complete. Events of later plugins (compaction, sub-agents) arrive through the same feed
//! and are shown generically.

use std::collections::HashMap;

use dsh_llm::{ContentBlock, ModelPricing, StreamChunk, TokenUsage};
use dsh_session::data::TurnEndReason;
use dsh_session::{CoreEvent, Event, EventKind, PluginEvent};
use ratatui::text::{Line, Span};

use crate::cells::{Cell, NoticeKind, ToolCard, ToolOutcome, sanitize};
use crate::markdown::{MarkdownStream, PieceRenderer};
use crate::status::Usage;
use crate::theme::Theme;
use crate::tool_display::Displayer;
use crate::wrap;

/// Prices by model id (`None`: the route has none).
pub type Pricer = Box<dyn Fn(&str) -> Option<ModelPricing> + Send>;

/// What an `llm/retry` payload says (written by the retry plugin; read by shape, not by type,
/// since a front end depends on no plugin implementation).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RetryNotice {
    retry: u32,
    #[serde(default)]
    max_retries: Option<u32>,
    delay_ms: u64,
    failure: dsh_llm::LlmFailure,
}

/// The attempt being streamed.
struct Live {
    md: MarkdownStream,
    renderer: PieceRenderer,
    reasoning: String,
    width: u16,
}

/// The transcript state.
pub struct Transcript {
    theme: Theme,
    live: Option<Live>,
    calls: Vec<(String, ToolCard)>,
    /// Usage and cost.
    pub usage: Usage,
    pricer: Pricer,
    prices: HashMap<String, Option<ModelPricing>>,
    /// The last reasoning shown collapsed (Ctrl+O shows it whole).
    pub last_reasoning: Option<String>,
    decisions: crate::approval::Decisions,
    /// The usage chunk of the attempt in progress, priced (shown until the attempt commits).
    live_usage: Option<(TokenUsage, Option<ModelPricing>)>,
    /// The model the next requests use (prices live chunks and failed attempts, which carry
    /// no model id).
    pub model: String,
    /// Calls whose plan was printed when it was asked about.
    plans_shown: std::collections::HashSet<String>,
    /// Describes the tool calls for their cards.
    displayer: Displayer,
    /// `dsh/compaction-tokens` of the compaction being closed.
    compaction_tokens: Option<(u64, u64)>,
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
    pub fn new(theme: Theme, pricer: Pricer) -> Self {
        Transcript {
            theme,
            live: None,
            calls: Vec::new(),
            usage: Usage::default(),
            pricer,
            prices: HashMap::new(),
            last_reasoning: None,
            decisions: crate::approval::Decisions::default(),
            live_usage: None,
            model: String::new(),
            plans_shown: std::collections::HashSet::new(),
            displayer: crate::tool_display::generic(),
            compaction_tokens: None,
        }
    }

    /// Describe tool calls with `displayer` (the tools' own displays) from now on.
    pub fn set_displayer(&mut self, displayer: Displayer) {
        self.displayer = displayer;
    }

    /// The displayer of the tool cards.
    pub fn displayer(&self) -> &Displayer {
        &self.displayer
    }

    /// The lines of the plan of call `call_id`, asked about now (its card will not repeat it).
    pub fn show_plan(&mut self, call_id: &str, plan: &str, width: u16) -> Vec<Line<'static>> {
        self.plans_shown.insert(call_id.to_owned());
        crate::approval::plan_lines(plan, self.theme, width)
    }

    fn pricing(&mut self, model: &str) -> Option<ModelPricing> {
        if let Some(p) = self.prices.get(model) {
            return *p;
        }
        let p = (self.pricer)(model);
        self.prices.insert(model.to_owned(), p);
        p
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
            width,
        })
    }

    /// Folds one live chunk; returns the lines it completed.
    pub fn on_chunk(&mut self, chunk: &StreamChunk, width: u16) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        match chunk {
            StreamChunk::TextDelta { text, .. } => {
                let live = self.live(width);
                for p in live.md.push(text) {
                    out.extend(live.renderer.piece(&p));
                }
            }
            StreamChunk::ReasoningDelta { text, .. } => self.live(width).reasoning.push_str(text),
            StreamChunk::BlockEnd { block, .. } => match block {
                ContentBlock::Reasoning { .. } => {
                    let text = std::mem::take(&mut self.live(width).reasoning);
                    out.extend(self.reasoning_cell(text, width));
                }
                ContentBlock::Text { .. } => {
                    let live = self.live(width);
                    for p in live.md.finish() {
                        out.extend(live.renderer.piece(&p));
                    }
                }
                _ => {}
            },
            StreamChunk::Usage { usage } => {
                self.live(width);
                let model = self.model.clone();
                let p = self.pricing(&model);
                self.live_usage = Some((*usage, p));
            }
            _ => {
                self.live(width);
            }
        }
        out
    }

    /// The usage to show: committed attempts plus the usage chunk of the one in progress.
    pub fn usage_now(&self) -> std::borrow::Cow<'_, Usage> {
        match &self.live_usage {
            None => std::borrow::Cow::Borrowed(&self.usage),
            Some((u, p)) => {
                let mut shown = self.usage.clone();
                shown.session.add(u, p.as_ref());
                shown.context_used =
                    Some(u.input_tokens + u.cache_read_tokens.unwrap_or(0) + u.output_tokens);
                std::borrow::Cow::Owned(shown)
            }
        }
    }

    /// A settled attempt that committed nothing (it failed and was retried, or the turn
    /// failed): the usage it reported is billed, so it is counted.
    fn failed_attempt(&mut self, a: &dsh_session::data::AssistantAttempt) {
        self.live_usage = None;
        let Ok(records) = a.stream.records() else {
            return;
        };
        let Ok(chunks) = dsh_session::stream::expand_stream(&records) else {
            return;
        };
        let usage = chunks.iter().rev().find_map(|(_, c)| {
            match serde_json::from_value::<StreamChunk>(c.clone()) {
                Ok(StreamChunk::Usage { usage }) => Some(usage),
                _ => None,
            }
        });
        if let Some(u) = usage {
            let model = self.model.clone();
            let p = self.pricing(&model);
            self.usage.add(a.turn, &u, p.as_ref());
        }
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

    /// Folds one committed event; returns the lines to insert into the scrollback.
    pub fn on_event(&mut self, ev: &Event, width: u16) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        match ev.core() {
            Some(CoreEvent::UserMessage(m)) => {
                if m.0.source.kind == "user" {
                    out.extend(self.cell(&Cell::User { text: m.0.text() }, width));
                }
            }
            Some(CoreEvent::AssistantMessage(m)) => {
                if self.live.is_some() {
                    out.extend(self.finish_live());
                } else {
                    for block in &m.message.content {
                        match block {
                            ContentBlock::Reasoning { text } => {
                                out.extend(self.reasoning_cell(text.clone(), width));
                            }
                            ContentBlock::Text { text } if !text.trim().is_empty() => {
                                out.extend(
                                    self.cell(&Cell::Assistant { text: text.clone() }, width),
                                );
                            }
                            _ => {}
                        }
                    }
                }
                if m.interrupted == Some(true) {
                    out.extend(self.cell(
                        &Cell::Notice {
                            text: "⏹ interrupted (the delivered text is kept)".into(),
                            kind: NoticeKind::Warn,
                        },
                        width,
                    ));
                }
                self.live_usage = None;
                if let Some(u) = &m.usage {
                    let model = m.message.source.model_id().unwrap_or("").to_owned();
                    let p = self.pricing(&model);
                    self.usage.add(m.turn, u, p.as_ref());
                }
            }
            Some(CoreEvent::ToolCallEvent(c)) => {
                self.calls.push((
                    c.call_id.clone(),
                    ToolCard::new(c.name.clone(), c.arguments.clone(), &self.displayer),
                ));
            }
            Some(CoreEvent::ToolResult(r)) => {
                let id = r.message.tool_call_id.clone().unwrap_or_default();
                let mut card = match self.calls.iter().position(|(c, _)| *c == id) {
                    Some(i) => self.calls.remove(i).1,
                    None => ToolCard::new("tool", Default::default(), &self.displayer),
                };
                card.finish(
                    ToolOutcome {
                        text: r.message.text(),
                        is_error: r.message.is_error == Some(true),
                        error_code: r.error.as_ref().map(|e| e.code.to_string()),
                        meta: r.meta.as_ref().map(dsh_session::data::ToolMeta::to_value),
                    },
                    &self.displayer,
                );
                // A plan nobody was asked about here (a resumed session, another policy) is
                // printed before its card.
                if !self.plans_shown.remove(&id)
                    && let Some(plan) = &card.display.plan
                {
                    out.extend(crate::approval::plan_lines(plan, self.theme, width));
                }
                out.extend(self.cell(&Cell::Tool(card), width));
            }
            Some(CoreEvent::AssistantAttempt(a)) => self.failed_attempt(a),
            Some(CoreEvent::TurnEnd(end)) => {
                self.live_usage = None;
                out.extend(self.finish_live());
                self.calls.clear();
                let notice = match &end.reason {
                    TurnEndReason::Completed | TurnEndReason::Forked => None,
                    TurnEndReason::Error { error } => Some((
                        format!("✗ the turn failed: {}: {}", error.code, error.message),
                        NoticeKind::Error,
                    )),
                    TurnEndReason::Aborted { .. } => {
                        Some(("⏹ turn interrupted".to_owned(), NoticeKind::Warn))
                    }
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
                    TurnEndReason::Unknown(_) => Some((
                        format!("· turn ended `{}`", end.reason.kind()),
                        NoticeKind::Info,
                    )),
                };
                if let Some((text, kind)) = notice {
                    out.extend(self.cell(&Cell::Notice { text, kind }, width));
                }
            }
            Some(_) => {}
            None => out.extend(self.plugin_event(ev, width)),
        }
        out
    }

    fn plugin_event(&mut self, ev: &Event, width: u16) -> Vec<Line<'static>> {
        match ev.event_kind() {
            EventKind::LlmRetry => {
                let mut out = self.finish_live();
                let text = match ev.data_as::<RetryNotice>() {
                    Ok(r) => {
                        let of = r.max_retries.map(|m| format!("/{m}")).unwrap_or_default();
                        format!(
                            "↻ stream dropped ({}: {}), retrying {}{of} in {}",
                            r.failure.code,
                            r.failure.message,
                            r.retry,
                            crate::cells::duration(r.delay_ms)
                        )
                    }
                    Err(_) => "↻ retrying".to_owned(),
                };
                out.extend(self.cell(
                    &Cell::Notice {
                        text,
                        kind: NoticeKind::Warn,
                    },
                    width,
                ));
                out
            }
            // A sub-agent's run ended: its usage (failed runs too) counts in this session's
            // totals, under the latest turn.
            EventKind::Other(k) if &**k == "dsh/subagent-usage" => {
                let turn = self.usage.turns.keys().next_back().copied().unwrap_or(0);
                let data = ev.data_as::<serde_json::Value>().unwrap_or_default();
                for (u, model) in crate::status::subagent_record_usage(&data) {
                    let p = self.pricing(model.as_deref().unwrap_or(""));
                    self.usage.add_subagent(turn, &u, p.as_ref());
                }
                Vec::new()
            }
            EventKind::TodoWrite | EventKind::PlanMode | EventKind::WorkingDirectoryChange => {
                match crate::toolset::lines(ev, self.theme) {
                    Some(lines) => self.cell(&Cell::Lines(lines), width),
                    None => Vec::new(),
                }
            }
            EventKind::ApprovalAsked => {
                if let Ok(asked) = ev.data_as::<dsh_approval_api::events::ApprovalAsked>() {
                    self.decisions.asked(asked);
                }
                Vec::new()
            }
            EventKind::ApprovalDecided => {
                match ev.data_as::<dsh_approval_api::events::ApprovalDecided>() {
                    Ok(d) => {
                        let cell = self.decisions.decided(&d);
                        self.cell(&cell, width)
                    }
                    Err(_) => Vec::new(),
                }
            }
            EventKind::CompactionStart | EventKind::CompactionEnd => {
                let text = if *ev.event_kind() == EventKind::CompactionStart {
                    "⟳ compacting the history".to_owned()
                } else {
                    match self.compaction_tokens.take() {
                        Some((before, after)) => {
                            format!("✓ history compacted: ~{before} → ~{after} tokens")
                        }
                        None => dsh_compaction_api::events::describe(ev)
                            .unwrap_or_else(|| "compaction ended".to_owned()),
                    }
                };
                self.notice(text, width)
            }
            EventKind::Other(k) if &**k == dsh_compaction_api::events::CompactionTokens::TYPE => {
                if let Some(Ok(t)) = ev.plugin::<dsh_compaction_api::events::CompactionTokens>() {
                    self.compaction_tokens = Some((t.tokens_before, t.tokens_after));
                }
                Vec::new()
            }
            EventKind::JobSettled => {
                match ev.plugin::<dsh_session::feature::JobSettled>() {
                    // Foreground bash calls are jobs too: only background work is worth a line.
                    Some(Ok(j)) if j.kind != "bash" => {
                        self.notice(format!("· job {} {}", j.label, j.status.as_str()), width)
                    }
                    _ => Vec::new(),
                }
            }
            // Recorded for the log's readers; what they mean is on screen already (the welcome
            // line, tool cards, the status line) or is bookkeeping. No raw event kind is shown.
            other => {
                tracing::debug!(kind = other.as_str(), "event not shown");
                Vec::new()
            }
        }
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
