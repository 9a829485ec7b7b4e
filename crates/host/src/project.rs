//! The projection of committed log events into protocol events.
//!
//! The log is the truth; what a client sees is derived from it here, one committed event at a
//! time, by the same code for a live session and for a stored one (so a client that reconnects,
//! or opens a session written by another process, sees exactly what a live client saw). The
//! payloads of plugin events are read in the session format's own shapes (the format is the
//! contract, `docs/session-format.md`), never through a plugin crate.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_approval_api::{ApprovalAsked, ApprovalDecided, DecidedOutcome};
use dsh_compaction_api::events::{CompactionEnd, CompactionTokens};
use dsh_goal_api::{GoalChange, GoalSource};
use dsh_kernel::ScopeKey;
use dsh_llm::{ContentBlock, ModelPricing, TokenUsage};
use dsh_protocol::{
    ApprovalOutcome, ApprovalRequest, ErrorCode, EventMsg, ForkReason, JobState, MessageSource,
    ProtocolError, RunStatus, SessionSettings, ToolDisplay, TurnEndReason, Usage,
};
use dsh_session::data::TurnEndReason as LogTurnEnd;
use dsh_session::feature::{
    ApprovalPolicyEvent, JobRegistered, JobSettled, PlanModeChange, SessionTitle, TodoWrite,
    WorkingDirectoryChange,
};
use dsh_session::forked::{ForkReason as LogForkReason, SessionForked};
use dsh_session::wire::JobStatus;
use dsh_session::{CoreEvent, Event, EventKind, PluginEvent};
use dsh_subagent_api::{StopReason, SubagentUsage};
use dsh_tools::{DisplayInput, DisplayResult, Tools, generic_display};
use serde::Deserialize;

use crate::convert;

/// Prices by model id (`None`: the route has none).
pub type Pricer = Arc<dyn Fn(&str) -> Option<ModelPricing> + Send + Sync>;

/// A call seen in the log, waiting for its result.
struct OpenCall {
    name: String,
    arguments: dsh_llm::ToolArguments,
    display: ToolDisplay,
}

/// Folds committed events into protocol events, keeping what later events need (open calls,
/// usage so far, the settings in force).
pub struct Projector {
    tools: Option<Arc<dyn Tools>>,
    scope: Option<ScopeKey>,
    pricer: Option<Pricer>,
    calls: HashMap<String, OpenCall>,
    /// The session's usage so far (sub-agents included).
    pub total: Usage,
    /// The part of `total` sub-agents spent.
    pub subagents: Usage,
    turn_usage: Usage,
    /// The current turn.
    pub turn: u64,
    /// Turns seen.
    pub turns: u64,
    /// The settings the log recorded (sandbox mode, approval policy, model selection).
    pub settings: SessionSettings,
    /// The latest title.
    pub title: Option<String>,
    /// The session's goal (`goal/change`, rounds counted from their prompts).
    pub goal: Option<dsh_protocol::GoalInfo>,
    /// The goal round the current turn runs, if it is one.
    round: Option<(String, u64)>,
    /// The latest working directory change.
    pub cwd: Option<String>,
    /// The first prompt a person wrote.
    pub first_prompt: Option<String>,
    /// How the last turn ended (`None` while one is open).
    pub last_turn_end: Option<TurnEndReason>,
    /// Approval requests logged (`approval/asked`) and not yet decided.
    pub asked: std::collections::HashSet<String>,
    /// The model of the latest answer (prices failed attempts).
    model: String,
    /// The session whose log this is (approval requests name it).
    session_id: String,
    /// `dsh/compaction-tokens` of the bracket being closed.
    compaction_tokens: Option<(u64, u64)>,
    /// The `workflow` runs in progress.
    workflows: crate::workflow::Workflows,
}

impl std::fmt::Debug for Projector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Projector")
            .field("turn", &self.turn)
            .field("open_calls", &self.calls.len())
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SandboxData {
    mode: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelSelectionData {
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    reasoning_effort: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RetryData {
    retry: u32,
    #[serde(default)]
    max_retries: Option<u32>,
    delay_ms: u64,
    failure: dsh_llm::LlmFailure,
}

impl Projector {
    /// A projector describing tool calls with `tools` (as seen from `scope`) and pricing usage
    /// with `pricer`; without tools every call gets the generic display.
    pub fn new(
        session_id: impl Into<String>,
        tools: Option<Arc<dyn Tools>>,
        scope: Option<ScopeKey>,
        pricer: Option<Pricer>,
    ) -> Self {
        Projector {
            tools,
            scope,
            pricer,
            calls: HashMap::new(),
            total: Usage::default(),
            subagents: Usage::default(),
            turn_usage: Usage::default(),
            turn: 0,
            turns: 0,
            settings: SessionSettings::default(),
            title: None,
            goal: None,
            round: None,
            cwd: None,
            first_prompt: None,
            last_turn_end: None,
            asked: std::collections::HashSet::new(),
            model: String::new(),
            session_id: session_id.into(),
            compaction_tokens: None,
            workflows: crate::workflow::Workflows::default(),
        }
    }

    fn price(&self, model: &str, usage: &TokenUsage) -> Usage {
        let pricing = self.pricer.as_ref().and_then(|p| p(model));
        convert::usage(usage, pricing.as_ref())
    }

    fn display(&self, input: &DisplayInput<'_>) -> ToolDisplay {
        match &self.tools {
            Some(t) => t.display(self.scope.as_ref(), input),
            None => generic_display(input),
        }
    }

    /// The display of an open call (approval prompts); generic when the call is unknown.
    pub fn call_display(&self, call_id: &str, name: &str) -> ToolDisplay {
        match self.calls.get(call_id) {
            Some(c) => c.display.clone(),
            None => self.display(&DisplayInput::new(name, "{}")),
        }
    }

    /// Adds a request's usage to the totals and returns the `usageUpdated` event.
    fn account(&mut self, usage: &TokenUsage, model: &str) -> EventMsg {
        let u = self.price(model, usage);
        self.total.add(&u);
        self.turn_usage.add(&u);
        EventMsg::UsageUpdated {
            turn: self.turn,
            usage: u,
            total: self.total,
            context_tokens: usage.input_tokens
                + usage.cache_read_tokens.unwrap_or(0)
                + usage.output_tokens,
        }
    }

    /// The live `usageStreamed` event of a request's usage as its stream reports it (priced
    /// at the model the session uses now; the totals are not changed: the committed message
    /// adds it).
    pub fn streamed_usage(&self, turn: u64, usage: &TokenUsage) -> EventMsg {
        let model = self.settings.model.as_deref().unwrap_or(&self.model);
        let u = self.price(model, usage);
        let mut total = self.total;
        total.add(&u);
        EventMsg::UsageStreamed {
            turn,
            usage: u,
            total,
            context_tokens: usage.input_tokens
                + usage.cache_read_tokens.unwrap_or(0)
                + usage.output_tokens,
        }
    }

    /// The protocol events of one committed event (none for events a client has no use for:
    /// request headers, step brackets, system prompts).
    pub fn project(&mut self, ev: &Event) -> Vec<EventMsg> {
        let mut out = Vec::new();
        match ev.core() {
            Some(CoreEvent::TurnStart(t)) => {
                self.last_turn_end = None;
                self.turn = t.turn;
                self.turns = self.turns.max(t.turn);
                self.turn_usage = Usage::default();
                self.round = None;
                out.push(EventMsg::TurnStarted { turn: t.turn });
            }
            Some(CoreEvent::TurnEnd(end)) => {
                self.calls.clear();
                let reason = turn_end(&end.reason);
                self.last_turn_end = Some(reason.clone());
                let usage = std::mem::take(&mut self.turn_usage);
                let abort_cause = match &end.reason {
                    LogTurnEnd::Aborted { reason } => Some(convert::abort_cause(reason)),
                    _ => None,
                };
                out.push(EventMsg::TurnEnded {
                    turn: end.turn,
                    reason,
                    usage,
                    abort_cause,
                });
                if matches!(end.reason, LogTurnEnd::Interrupted) {
                    out.extend(self.workflows.interrupted());
                }
                if let Some((goal_id, round)) = self.round.take() {
                    let max_rounds = self
                        .goal
                        .as_ref()
                        .filter(|g| g.id == goal_id)
                        .map_or(0, |g| g.max_rounds);
                    out.push(EventMsg::GoalRoundEnded {
                        goal_id,
                        round,
                        max_rounds,
                        usage,
                    });
                }
            }
            Some(CoreEvent::UserMessage(m)) => {
                if let Some(s) = GoalSource::of(&m.0) {
                    if let Some(g) = self.goal.as_mut().filter(|g| g.id == s.goal_id) {
                        g.rounds_started = g.rounds_started.max(s.round);
                    }
                    self.round = Some((s.goal_id, s.round));
                }
                let source = match m.0.source.kind.as_str() {
                    "user" => MessageSource::User,
                    "command" | "dsh-command" => MessageSource::Command,
                    "goal" => MessageSource::Goal,
                    "subagent" | "job" | "agent" => MessageSource::Agent,
                    other => MessageSource::Other(other.to_owned()),
                };
                let text = m.0.text();
                if source == MessageSource::User && self.first_prompt.is_none() {
                    self.first_prompt = Some(text.clone());
                }
                out.push(EventMsg::UserMessage {
                    turn: self.turn,
                    text,
                    source,
                });
            }
            Some(CoreEvent::AssistantMessage(m)) => {
                let mut text = String::new();
                let mut reasoning = String::new();
                for block in &m.message.content {
                    match block {
                        ContentBlock::Text { text: t } => text.push_str(t),
                        ContentBlock::Reasoning { text: t } => reasoning.push_str(t),
                        _ => {}
                    }
                }
                let model = m.message.source.model_id().map(str::to_owned);
                if let Some(id) = &model {
                    self.model.clone_from(id);
                }
                out.push(EventMsg::AssistantMessage {
                    turn: m.turn,
                    text,
                    reasoning: (!reasoning.is_empty()).then_some(reasoning),
                    interrupted: m.interrupted == Some(true),
                    model,
                });
                if let Some(u) = &m.usage {
                    let model = self.model.clone();
                    out.push(self.account(u, &model));
                }
            }
            Some(CoreEvent::AssistantAttempt(a)) => {
                // A settled attempt that committed nothing: the usage it reported is billed.
                if let Some(u) = attempt_usage(a) {
                    let model = self.model.clone();
                    out.push(self.account(&u, &model));
                }
            }
            Some(CoreEvent::ToolCallEvent(c)) => {
                let display = self.display(&DisplayInput::new(&c.name, c.arguments.as_str()));
                out.push(EventMsg::ToolCallBegan {
                    call_id: c.call_id.clone(),
                    tool_name: c.name.clone(),
                    display: display.clone(),
                });
                self.calls.insert(
                    c.call_id.clone(),
                    OpenCall {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                        display,
                    },
                );
            }
            Some(CoreEvent::ToolResult(r)) => {
                let id = r.message.tool_call_id.clone().unwrap_or_default();
                let call = self.calls.remove(&id);
                let text = r.message.text();
                let meta: Option<serde_json::Value> = r
                    .meta
                    .as_ref()
                    .and_then(|m| serde_json::from_str(m.as_str()).ok());
                let is_error = r.message.is_error == Some(true);
                let code = r.error.as_ref().map(|e| e.code.to_string());
                let result = DisplayResult {
                    text: &text,
                    is_error,
                    error_code: code.as_deref(),
                    meta: meta.as_ref(),
                };
                let (name, display) = match &call {
                    Some(c) => (
                        c.name.clone(),
                        self.display(
                            &DisplayInput::new(&c.name, c.arguments.as_str()).with_result(result),
                        ),
                    ),
                    None => (
                        "tool".to_owned(),
                        self.display(&DisplayInput::new("tool", "{}").with_result(result)),
                    ),
                };
                let error_message = is_error
                    .then(|| text.lines().find(|l| !l.trim().is_empty()))
                    .flatten()
                    .map(str::to_owned);
                out.push(EventMsg::ToolCallEnded {
                    call_id: id,
                    tool_name: name,
                    display,
                    is_error,
                    error_code: code.as_deref().map(ErrorCode::from_wire),
                    error_message,
                });
            }
            Some(_) => {}
            None => self.plugin_event(ev, &mut out),
        }
        out
    }

    fn plugin_event(&mut self, ev: &Event, out: &mut Vec<EventMsg>) {
        match ev.event_kind() {
            EventKind::SessionTitle => {
                if let Some(Ok(t)) = ev.plugin::<SessionTitle>() {
                    self.title = Some(t.title.clone());
                    out.push(EventMsg::Title { title: t.title });
                }
            }
            EventKind::WorkingDirectoryChange => {
                if let Some(Ok(c)) = ev.plugin::<WorkingDirectoryChange>() {
                    self.cwd = Some(c.cwd.clone());
                    out.push(EventMsg::WorkingDirectory { cwd: c.cwd });
                }
            }
            EventKind::TodoWrite => {
                if let Some(Ok(t)) = ev.plugin::<TodoWrite>() {
                    let items = t.todos.into_iter().map(convert::todo).collect();
                    out.push(EventMsg::TodoList { items });
                }
            }
            EventKind::GoalChange => {
                if let Some(Ok(c)) = ev.plugin::<GoalChange>() {
                    self.goal = convert::goal(c);
                    out.push(EventMsg::GoalUpdated {
                        goal: self.goal.clone(),
                    });
                }
            }
            EventKind::PlanMode => {
                if let Some(Ok(p)) = ev.plugin::<PlanModeChange>() {
                    out.push(EventMsg::PlanMode {
                        active: p.active,
                        plan: None,
                    });
                }
            }
            EventKind::SandboxMode => {
                if let Ok(s) = ev.data_as::<SandboxData>() {
                    self.settings.sandbox = convert::sandbox_mode(&s.mode);
                }
            }
            EventKind::ApprovalPolicy => {
                if let Some(Ok(p)) = ev.plugin::<ApprovalPolicyEvent>() {
                    self.settings.approval_policy = convert::approval_policy(p.policy);
                }
            }
            EventKind::ModelSelection => {
                if let Ok(m) = ev.data_as::<ModelSelectionData>() {
                    if m.provider.is_some() {
                        self.settings.route = m.provider;
                    }
                    if m.model.is_some() {
                        self.settings.model = m.model;
                    }
                    if let Some(e) = m.reasoning_effort.as_deref() {
                        self.settings.effort = dsh_protocol::Effort::parse(e);
                    }
                }
            }
            EventKind::LlmRetry => {
                if let Ok(r) = ev.data_as::<RetryData>() {
                    out.push(EventMsg::Retrying {
                        attempt: r.retry,
                        max_attempts: r.max_retries,
                        delay_ms: r.delay_ms,
                        error: convert::failure(&r.failure),
                    });
                }
            }
            EventKind::CompactionStart => out.push(EventMsg::CompactionStarted {
                tokens_before: None,
            }),
            EventKind::CompactionEnd => {
                let error = ev
                    .plugin::<CompactionEnd>()
                    .and_then(Result::ok)
                    .and_then(|d| d.error)
                    .map(|e| ProtocolError::new(ErrorCode::Other("COMPACTION_FAILED".into()), e));
                let (tokens_before, tokens_after) = match self.compaction_tokens.take() {
                    Some((b, a)) => (Some(b), Some(a)),
                    None => (None, None),
                };
                out.push(EventMsg::CompactionEnded {
                    tokens_before,
                    tokens_after,
                    error,
                });
            }
            EventKind::ApprovalAsked => {
                if let Some(Ok(a)) = ev.plugin::<ApprovalAsked>() {
                    self.asked.insert(a.id.clone());
                    let call_id = a.call_id.unwrap_or_default();
                    out.push(EventMsg::ApprovalRequested(ApprovalRequest {
                        purpose: crate::approvals::purpose_of(&a.id),
                        request_id: a.id,
                        session_id: self.session_id.clone(),
                        display: self.call_display(&call_id, &a.tool_name),
                        call_id,
                        tool_name: a.tool_name,
                        reason: a.reason.unwrap_or_default(),
                        escalation: None,
                    }));
                }
            }
            EventKind::ApprovalDecided => {
                if let Some(Ok(d)) = ev.plugin::<ApprovalDecided>() {
                    self.asked.remove(&d.id);
                    let outcome = match (d.outcome, d.always) {
                        (DecidedOutcome::AllowedOnce, true) => ApprovalOutcome::AllowedAlways,
                        (DecidedOutcome::AllowedOnce, false) => ApprovalOutcome::AllowedOnce,
                        (DecidedOutcome::Rejected, _) => ApprovalOutcome::Denied,
                        (DecidedOutcome::Unavailable, _) => ApprovalOutcome::Unavailable,
                        (DecidedOutcome::Cancelled, _) => ApprovalOutcome::Cancelled,
                    };
                    out.push(EventMsg::ApprovalResolved {
                        request_id: d.id,
                        call_id: None,
                        outcome,
                        reason: d.reason,
                    });
                }
            }
            EventKind::JobRegistered => {
                if let Some(Ok(j)) = ev.plugin::<JobRegistered>() {
                    out.push(EventMsg::JobUpdated {
                        job_id: j.job_id,
                        kind: j.kind,
                        state: JobState::Running,
                        description: Some(j.label),
                    });
                }
            }
            EventKind::JobSettled => {
                if let Some(Ok(j)) = ev.plugin::<JobSettled>() {
                    let state = match j.status {
                        JobStatus::Completed => JobState::Completed,
                        JobStatus::Killed => JobState::Cancelled,
                        JobStatus::Failed | JobStatus::Unknown(_) => JobState::Failed,
                    };
                    out.push(EventMsg::JobUpdated {
                        job_id: j.job_id,
                        kind: j.kind,
                        state,
                        description: Some(j.label),
                    });
                }
            }
            EventKind::Other(k) if &**k == CompactionTokens::TYPE => {
                if let Some(Ok(t)) = ev.plugin::<CompactionTokens>() {
                    // The figures of the bracket that is closing (`compaction/end` follows).
                    self.compaction_tokens = Some((t.tokens_before, t.tokens_after));
                }
            }
            EventKind::Other(k) if &**k == SessionForked::TYPE => {
                if let Some(Ok(f)) = ev.plugin::<SessionForked>() {
                    out.push(EventMsg::SessionForked {
                        session_id: f.session_id,
                        reason: match f.reason {
                            LogForkReason::Rewind => ForkReason::Rewind,
                            LogForkReason::Other(r) => ForkReason::Other(r),
                        },
                        to_turn: f.to_turn,
                        rewind_id: f.rewind_id,
                    });
                }
            }
            EventKind::Other(k) if &**k == SubagentUsage::TYPE => {
                if let Some(Ok(s)) = ev.plugin::<SubagentUsage>() {
                    let usage = self.subagent_usage(&s);
                    self.total.add(&usage);
                    self.subagents.add(&usage);
                    self.turn_usage.add(&usage);
                    let status = match s.stop_reason {
                        StopReason::Completed => RunStatus::Completed,
                        StopReason::Aborted => RunStatus::Cancelled,
                        StopReason::Error | StopReason::MaxTokens | StopReason::Refusal => {
                            RunStatus::Failed
                        }
                    };
                    let workflow = self.workflows.child_usage(&s.child_id, usage);
                    out.push(EventMsg::SubagentFinished {
                        session_id: s.child_id,
                        status,
                        usage,
                    });
                    out.extend(workflow);
                }
            }
            kind if crate::workflow::Workflows::is_record(kind) => {
                // A run whose id does not name its call (not dsh's `wf-<callId>`): the open
                // `workflow` call not yet tied to a run (the smallest id of several).
                let calls = &self.calls;
                let open = |free: &dyn Fn(&str) -> bool| {
                    calls
                        .iter()
                        .filter(|(id, c)| c.name == "workflow" && free(id))
                        .map(|(id, _)| id.clone())
                        .min()
                };
                out.extend(self.workflows.record(ev, open));
            }
            _ => {}
        }
    }
}

impl Projector {
    /// A child run's usage with its own children's, priced.
    fn subagent_usage(&self, s: &SubagentUsage) -> Usage {
        let mut usage = self.price(s.model.as_deref().unwrap_or(""), &s.usage);
        // One record for the child's whole run: its requests, all priced or none.
        usage.requests = s.requests;
        usage.unpriced_requests = if usage.cost_usd.is_none() {
            s.requests
        } else {
            0
        };
        for n in &s.nested {
            usage.add(&self.subagent_usage(n));
        }
        usage
    }
}

fn attempt_usage(a: &dsh_session::data::AssistantAttempt) -> Option<TokenUsage> {
    let records = a.stream.records().ok()?;
    let chunks = dsh_session::stream::expand_stream(&records).ok()?;
    chunks.iter().rev().find_map(|(_, c)| {
        match serde_json::from_value::<dsh_llm::StreamChunk>(c.clone()) {
            Ok(dsh_llm::StreamChunk::Usage { usage }) => Some(usage),
            _ => None,
        }
    })
}

/// The protocol's reason of a logged turn end.
pub fn turn_end(reason: &LogTurnEnd) -> TurnEndReason {
    match reason {
        LogTurnEnd::Completed => TurnEndReason::Completed,
        LogTurnEnd::Aborted { .. } => TurnEndReason::Aborted,
        LogTurnEnd::Blocked => TurnEndReason::Blocked,
        LogTurnEnd::Error { error } => TurnEndReason::Error {
            error: convert::failure(error),
        },
        LogTurnEnd::MaxTokens => TurnEndReason::MaxTokens,
        LogTurnEnd::Interrupted => TurnEndReason::Interrupted,
        LogTurnEnd::Forked => TurnEndReason::Forked,
        LogTurnEnd::Unknown(_) => TurnEndReason::Other {
            kind: reason.kind().to_owned(),
        },
    }
}
