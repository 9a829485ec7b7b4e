//! Live sub-agent cards: each child of the shown session (`subagentStarted` …
//! `subagentFinished`) is drawn in the viewport while it runs, from its own session's events
//! (the runtime subscribes to the child's session). Collapsed (the
//! default) a card is one line: the delegation's label, status, elapsed time, tool count,
//! tokens and the tool running now; Ctrl+O expands every card to the child's recent activity
//! (its last tool calls and answer lines) and collapses them again. A finished child leaves the
//! viewport; its parent's tool card goes to the scrollback as before.
//!
//! A running `workflow` call (`workflowProgress`) gets a card above its children: the script's
//! name, how many of its sub-agents run and how they ended, and their tokens (the ended ones'
//! from their usage, the running ones' from their live cards); expanded, one line per agent.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use dsh_protocol::{Event, EventMsg, WorkflowAgent, WorkflowAgentState, WorkflowStatus};
use ratatui::text::{Line, Span};

use crate::cells::{ToolCard, ToolOutcome, sanitize};
use crate::theme::Theme;
use crate::wrap;

/// Activity lines kept (and shown expanded) per child.
pub const RECENT: usize = 6;

/// One thing a child did.
#[derive(Clone, Debug, PartialEq)]
enum Activity {
    /// A tool call (result `None` while it runs).
    Tool { call_id: String, card: ToolCard },
    /// The first line of an answer.
    Text(String),
}

/// A running child.
#[derive(Clone, Debug)]
pub struct LiveChild {
    /// The child's session id.
    pub id: String,
    /// The delegation's label (`description`).
    pub label: String,
    started: Instant,
    /// Tool calls so far.
    pub tools: usize,
    /// Input tokens (cached included) so far.
    pub input_tokens: u64,
    /// Output tokens so far.
    pub output_tokens: u64,
    recent: VecDeque<Activity>,
}

impl LiveChild {
    fn push(&mut self, a: Activity) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(a);
    }

    /// The tool running now.
    fn current(&self) -> Option<&ToolCard> {
        self.recent.iter().rev().find_map(|a| match a {
            Activity::Tool { card, .. } if card.result.is_none() => Some(card),
            _ => None,
        })
    }
}

/// A running `workflow` call.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveWorkflow {
    /// The call.
    pub call_id: String,
    /// The script's name.
    pub name: String,
    /// Its sub-agents so far.
    pub agents: Vec<WorkflowAgent>,
}

/// The running children of the shown session.
#[derive(Debug, Default)]
pub struct LiveAgents {
    children: Vec<LiveChild>,
    workflows: Vec<LiveWorkflow>,
    /// Cards show the recent activity (Ctrl+O).
    pub expanded: bool,
}

impl LiveAgents {
    /// No child and no workflow is running.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty() && self.workflows.is_empty()
    }

    /// The running workflows.
    pub fn workflows(&self) -> &[LiveWorkflow] {
        &self.workflows
    }

    /// Folds a `workflowProgress`: a running run's card is replaced, an ended one leaves.
    pub fn workflow(&mut self, msg: &EventMsg) {
        let EventMsg::WorkflowProgress {
            call_id,
            name,
            status,
            agents,
            ..
        } = msg
        else {
            return;
        };
        let at = self.workflows.iter().position(|w| w.call_id == *call_id);
        match (status, at) {
            (WorkflowStatus::Running, Some(i)) => {
                self.workflows[i].name.clone_from(name);
                self.workflows[i].agents.clone_from(agents);
            }
            (WorkflowStatus::Running, None) => self.workflows.push(LiveWorkflow {
                call_id: call_id.clone(),
                name: name.clone(),
                agents: agents.clone(),
            }),
            (_, Some(i)) => {
                self.workflows.remove(i);
            }
            (_, None) => {}
        }
    }

    /// The running children.
    pub fn children(&self) -> &[LiveChild] {
        &self.children
    }

    /// A child started at `now`.
    pub fn started(&mut self, id: &str, label: &str, now: Instant) {
        if self.children.iter().any(|c| c.id == id) {
            return;
        }
        self.children.push(LiveChild {
            id: id.to_owned(),
            label: label.to_owned(),
            started: now,
            tools: 0,
            input_tokens: 0,
            output_tokens: 0,
            recent: VecDeque::new(),
        });
    }

    /// A child's run ended: its card leaves the viewport.
    pub fn finished(&mut self, id: &str) {
        self.children.retain(|c| c.id != id);
    }

    /// Forgets every child and workflow (another session is shown).
    pub fn clear(&mut self) {
        self.children.clear();
        self.workflows.clear();
    }

    /// Whether child `id` is running (shown).
    pub fn contains(&self, id: &str) -> bool {
        self.children.iter().any(|c| c.id == id)
    }

    /// Folds one event of child `id`.
    pub fn event(&mut self, id: &str, ev: &Event) {
        let Some(child) = self.children.iter_mut().find(|c| c.id == id) else {
            return;
        };
        match &ev.msg {
            EventMsg::AssistantMessage { text, .. } => {
                if let Some(first) = text.lines().map(str::trim).find(|l| !l.is_empty()) {
                    child.push(Activity::Text(sanitize(first)));
                }
            }
            EventMsg::UsageUpdated { usage, .. } => {
                child.input_tokens += usage.input_tokens + usage.cache_read_tokens;
                child.output_tokens += usage.output_tokens;
            }
            EventMsg::ToolCallBegan {
                call_id, display, ..
            } => {
                child.tools += 1;
                child.push(Activity::Tool {
                    call_id: call_id.clone(),
                    card: ToolCard::new(display.clone()),
                });
            }
            EventMsg::ToolCallEnded {
                call_id: ended,
                display,
                is_error,
                error_code,
                ..
            } => {
                for a in child.recent.iter_mut() {
                    if let Activity::Tool { call_id, card } = a
                        && call_id == ended
                    {
                        card.finish(
                            display.clone(),
                            ToolOutcome {
                                text: String::new(),
                                is_error: *is_error,
                                error_code: error_code.as_ref().map(|c| c.as_str().into_owned()),
                            },
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// Handles Ctrl+O: `false` when no card is shown (the key keeps its other meaning).
    pub fn toggle(&mut self) -> bool {
        if self.is_empty() {
            return false;
        }
        self.expanded = !self.expanded;
        true
    }

    /// The cards at `now`.
    pub fn render(&self, theme: Theme, width: u16, now: Instant) -> Vec<Line<'static>> {
        let w = usize::from(width);
        let mut out = Vec::new();
        for wf in &self.workflows {
            self.render_workflow(wf, theme, w, &mut out);
        }
        for c in &self.children {
            let elapsed = now.saturating_duration_since(c.started);
            let mut facts = format!(" · running {}", elapsed_text(elapsed));
            facts.push_str(&format!(
                " · {} tool{}",
                c.tools,
                if c.tools == 1 { "" } else { "s" }
            ));
            if c.input_tokens + c.output_tokens > 0 {
                facts.push_str(&format!(
                    " · {} in / {} out",
                    tokens(c.input_tokens),
                    tokens(c.output_tokens)
                ));
            }
            if let Some(card) = c.current() {
                let title = card_title(card, theme, w);
                facts.push_str(&format!(" · ▸ {title}"));
            }
            if !self.expanded {
                facts.push_str(" · Ctrl+O expands");
            }
            let head = format!("⧉ {} ", sanitize(&c.label).replace('\n', " "));
            let room = w.saturating_sub(head.chars().count());
            out.push(Line::from(vec![
                Span::styled(wrap::truncate(&head, w), theme.tool()),
                Span::styled(wrap::truncate(facts.trim_start(), room), theme.dim()),
            ]));
            if !self.expanded {
                continue;
            }
            if c.recent.is_empty() {
                out.push(Line::from(Span::styled(
                    "    (no activity yet)",
                    theme.dim(),
                )));
            }
            for a in &c.recent {
                match a {
                    Activity::Tool { card, .. } => {
                        let mark = match &card.result {
                            None => Span::styled("    ◌ ", theme.dim()),
                            Some(r) if r.is_error => Span::styled("    ✗ ", theme.error()),
                            Some(_) => Span::styled("    ● ", theme.ok()),
                        };
                        out.push(Line::from(vec![
                            mark,
                            Span::raw(card_title(card, theme, w.saturating_sub(6))),
                        ]));
                    }
                    Activity::Text(t) => out.push(Line::from(Span::styled(
                        wrap::truncate(&format!("    “{t}”"), w),
                        theme.dim(),
                    ))),
                }
            }
        }
        out
    }
}

impl LiveAgents {
    /// Tokens (input, cached input and output) of a workflow's agent: its usage once it
    /// ended, its live card's count while it runs.
    fn agent_tokens(&self, a: &WorkflowAgent) -> u64 {
        match (&a.usage, &a.session_id) {
            (Some(u), _) => u.input_tokens + u.cache_read_tokens + u.output_tokens,
            (None, Some(id)) => self
                .children
                .iter()
                .find(|c| c.id == *id)
                .map_or(0, |c| c.input_tokens + c.output_tokens),
            (None, None) => 0,
        }
    }

    /// A workflow's card: a head line, and expanded one line per agent.
    fn render_workflow(
        &self,
        wf: &LiveWorkflow,
        theme: Theme,
        w: usize,
        out: &mut Vec<Line<'static>>,
    ) {
        let n = wf.agents.len();
        let mut facts = format!("· {n} sub-agent{}", if n == 1 { "" } else { "s" });
        for (state, word) in [
            (WorkflowAgentState::Running, "running"),
            (WorkflowAgentState::Completed, "completed"),
            (WorkflowAgentState::Failed, "failed"),
            (WorkflowAgentState::Cancelled, "cancelled"),
        ] {
            let k = wf.agents.iter().filter(|a| a.state == state).count();
            if k > 0 {
                facts.push_str(&format!(", {k} {word}"));
            }
        }
        let total: u64 = wf.agents.iter().map(|a| self.agent_tokens(a)).sum();
        if total > 0 {
            facts.push_str(&format!(" · {} tokens", tokens(total)));
        }
        if !self.expanded && n > 0 {
            facts.push_str(" · Ctrl+O expands");
        }
        let name = if wf.name.trim().is_empty() {
            "Workflow".to_owned()
        } else {
            format!("Workflow {}", sanitize(&wf.name).replace('\n', " "))
        };
        let head = format!("⚙ {name} ");
        let room = w.saturating_sub(head.chars().count());
        out.push(Line::from(vec![
            Span::styled(wrap::truncate(&head, w), theme.tool()),
            Span::styled(wrap::truncate(&facts, room), theme.dim()),
        ]));
        if !self.expanded {
            return;
        }
        for a in &wf.agents {
            let (mark, style, word) = match a.state {
                WorkflowAgentState::Running => ("    ◌ ", theme.dim(), "running"),
                WorkflowAgentState::Completed => ("    ● ", theme.ok(), "completed"),
                WorkflowAgentState::Failed => ("    ✗ ", theme.error(), "failed"),
                WorkflowAgentState::Cancelled => ("    ⊘ ", theme.dim(), "cancelled"),
            };
            let mut text = sanitize(&a.label).replace('\n', " ");
            if let Some(p) = &a.phase {
                text.push_str(&format!(" [{}]", sanitize(p)));
            }
            text.push_str(&format!(" · {word}"));
            let t = self.agent_tokens(a);
            if t > 0 {
                text.push_str(&format!(" · {} tokens", tokens(t)));
            }
            out.push(Line::from(vec![
                Span::styled(mark, style),
                Span::raw(wrap::truncate(&text, w.saturating_sub(6))),
            ]));
        }
    }
}

/// A call's title (`name subject`) as plain text, at most `width` columns.
fn card_title(card: &ToolCard, theme: Theme, width: usize) -> String {
    let lines = card.render(theme, u16::try_from(width.max(8)).unwrap_or(u16::MAX));
    let first: String = lines
        .first()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .unwrap_or_default();
    // Drop the card's own mark.
    let text = first
        .trim_start_matches(['◌', '●', '✗'])
        .trim_start()
        .to_owned();
    wrap::truncate(&text, width)
}

fn elapsed_text(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

fn tokens(n: u64) -> String {
    if n >= 1000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}
