//! `create_goal`, `get_goal` and `update_goal`: the original's arguments, results and authority
//! rules.

use std::sync::Arc;

use dsh_agent::{Agent, AgentStatus, Agents};
use dsh_goal_api::{BlockedReason, GoalPhase, GoalRef, GoalSource};
use dsh_kernel::Ctx;
use dsh_llm::{ContentBlock, Message, MessageSource, Role};
use dsh_session::{CoreEvent, EventKind};
use dsh_tools::{DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolKind, ToolOutput};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::service::{Activation, GoalError, GoalView, Goals};
use crate::texts;

/// `create_goal`.
pub const CREATE: &str = "create_goal";
/// `get_goal`.
pub const GET: &str = "get_goal";
/// `update_goal`.
pub const UPDATE: &str = "update_goal";

/// Which of the three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoalToolKind {
    /// `get_goal`.
    Get,
    /// `create_goal`.
    Create,
    /// `update_goal`.
    Update,
}

/// One of the goal tools.
pub struct GoalTool {
    kind: GoalToolKind,
    ctx: Ctx,
    goals: Arc<Goals>,
    description: String,
    parameters: Value,
}

impl std::fmt::Debug for GoalTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoalTool")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// The result every goal tool returns (`{"goal":null}` without a goal).
#[derive(Serialize)]
struct GoalValue {
    goal: Option<GoalOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    activation: Option<Activation>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoalOut {
    id: String,
    revision: u64,
    objective: String,
    phase: GoalPhase,
    rounds_started: u64,
    max_goal_rounds: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocked_reason: Option<BlockedReason>,
}

/// The result JSON of a goal tool for `view` (the original's `goalValue`).
pub fn goal_value(view: Option<&GoalView>) -> Value {
    let v = match view {
        None => GoalValue {
            goal: None,
            activation: None,
        },
        Some(v) => {
            let g = v.goal();
            GoalValue {
                goal: Some(GoalOut {
                    id: g.id.clone(),
                    revision: g.revision,
                    objective: g.objective.clone(),
                    phase: g.phase,
                    rounds_started: v.state.rounds_started,
                    max_goal_rounds: g.max_goal_rounds,
                    blocked_reason: g.blocked_reason.clone(),
                }),
                activation: Some(v.activation),
            }
        }
    };
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn reject(message: impl Into<String>, code: &str) -> ToolError {
    ToolError::new(code, message)
}

fn goal_error(e: GoalError) -> ToolError {
    ToolError::new(e.code(), e.to_string())
}

/// What the open turn says about the caller's authority.
struct OpenTurn {
    agent: Arc<dyn Agent>,
    /// A human prompt of a top-level agent is in the open turn.
    human: bool,
    /// The goal rounds admitted in the open turn.
    rounds: Vec<GoalSource>,
}

#[derive(Deserialize)]
struct CreateArgs {
    objective: String,
    #[serde(default)]
    max_goal_rounds: Option<f64>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "kebab-case")]
enum Action {
    Edit,
    Pause,
    Resume,
    Complete,
    Blocked,
}

#[derive(Deserialize)]
struct UpdateArgs {
    goal_id: String,
    revision: f64,
    action: Action,
    #[serde(default)]
    objective: Option<String>,
    #[serde(default)]
    max_goal_rounds: Option<f64>,
    #[serde(default)]
    blocked_reason: Option<String>,
}

/// A positive whole number, else `None`.
fn whole(n: f64) -> Option<u64> {
    (n.fract() == 0.0 && (1.0..=9_007_199_254_740_991.0).contains(&n)).then_some(n as u64)
}

fn has_text(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

/// An optional round limit that means something (0 is a strict-schema filler).
fn round_cap(n: Option<f64>) -> Option<f64> {
    n.filter(|n| *n != 0.0)
}

fn invalid_update(message: &str) -> ToolError {
    reject(message, "GOAL_TOOL_INVALID_UPDATE")
}

impl GoalTool {
    /// The tool of `kind` over `goals`; the calling agent is found through `ctx`'s `agents`.
    pub fn new(kind: GoalToolKind, ctx: Ctx, goals: Arc<Goals>) -> Self {
        let (description, parameters) = match kind {
            GoalToolKind::Get => (
                texts::GET_DESCRIPTION.to_owned(),
                json!({"type": "object", "properties": {}}),
            ),
            GoalToolKind::Create => (
                texts::CREATE_DESCRIPTION.to_owned(),
                json!({
                    "type": "object",
                    "properties": {
                        "objective": {"type": "string"},
                        "max_goal_rounds": {"type": "number"}
                    },
                    "required": ["objective"]
                }),
            ),
            GoalToolKind::Update => (
                texts::update_description(goals.config.blocked_after_consecutive_rounds),
                json!({
                    "type": "object",
                    "properties": {
                        "goal_id": {"type": "string"},
                        "revision": {"type": "number"},
                        "action": {
                            "type": "string",
                            "enum": ["edit", "pause", "resume", "complete", "blocked"]
                        },
                        "objective": {"type": "string"},
                        "max_goal_rounds": {"type": "number"},
                        "blocked_reason": {"type": "string"}
                    },
                    "required": ["goal_id", "revision", "action"]
                }),
            ),
        };
        GoalTool {
            kind,
            ctx,
            goals,
            description,
            parameters,
        }
    }

    /// The caller and its open turn (the original's `goalToolExecution`).
    fn execution(&self, tc: &ToolContext) -> Result<OpenTurn, ToolError> {
        let agent = self
            .ctx
            .get::<dyn Agents>()
            .and_then(|a| a.get(tc.session_id()))
            .ok_or_else(|| {
                reject(
                    "goal tools require a calling agent",
                    "GOAL_TOOL_AGENT_REQUIRED",
                )
            })?;
        if agent.status() != AgentStatus::Running {
            return Err(reject(
                "goal tools require the exact live calling agent inside its active driver",
                "GOAL_TOOL_DRIVER_REQUIRED",
            ));
        }
        let session = agent.session();
        let root = session.header().parent_session.is_none();
        let turn = session.with_log(|log| {
            let events = log.events();
            let start = events
                .iter()
                .rposition(|e| *e.event_kind() == EventKind::TurnStart)?;
            let open = &events[start + 1..];
            if open.iter().any(|e| *e.event_kind() == EventKind::TurnEnd) {
                return None;
            }
            let mut human = false;
            let mut rounds = Vec::new();
            for e in open {
                if let Some(CoreEvent::UserMessage(m)) = e.core() {
                    if m.0.source.kind == "user" {
                        human = true;
                    }
                    rounds.extend(GoalSource::of(&m.0));
                }
            }
            Some((human, rounds))
        });
        let (human, rounds) = turn.ok_or_else(|| {
            reject(
                "goal tools require an open model turn",
                "GOAL_TOOL_DRIVER_REQUIRED",
            )
        })?;
        Ok(OpenTurn {
            agent,
            human: human && root,
            rounds,
        })
    }

    fn require_human(turn: &OpenTurn) -> Result<(), ToolError> {
        if turn.human {
            Ok(())
        } else {
            Err(reject(
                "this goal operation requires a direct human turn on a top-level agent",
                "GOAL_TOOL_AUTHORITY_REQUIRED",
            ))
        }
    }

    fn create(&self, turn: &OpenTurn, args: Value) -> Result<Value, ToolError> {
        Self::require_human(turn)?;
        let a: CreateArgs =
            serde_json::from_value(args).map_err(|e| ToolError::invalid_args(e.to_string()))?;
        let max = match a.max_goal_rounds {
            None => None,
            Some(n) => Some(whole(n).ok_or_else(|| goal_error(GoalError::InvalidMaxRounds))?),
        };
        let view = self
            .goals
            .create(turn.agent.as_ref(), &a.objective, max)
            .map_err(goal_error)?;
        Ok(goal_value(Some(&view)))
    }

    fn update(&self, turn: &OpenTurn, args: Value) -> Result<Value, ToolError> {
        let a: UpdateArgs =
            serde_json::from_value(args).map_err(|e| ToolError::invalid_args(e.to_string()))?;
        let revision =
            whole(a.revision).filter(|_| !a.goal_id.is_empty() && a.goal_id.trim() == a.goal_id);
        let Some(revision) = revision else {
            return Err(invalid_update(
                "goal_id must be non-empty and revision must be a positive safe integer",
            ));
        };
        let r = GoalRef {
            id: a.goal_id.clone(),
            revision,
        };
        let agent = turn.agent.as_ref();
        let cap = round_cap(a.max_goal_rounds);
        match a.action {
            Action::Edit => {
                Self::require_human(turn)?;
                if has_text(&a.blocked_reason) {
                    return Err(invalid_update(
                        "blocked_reason is valid only with action blocked",
                    ));
                }
                let max = match cap {
                    None => None,
                    Some(n) => {
                        Some(whole(n).ok_or_else(|| goal_error(GoalError::InvalidMaxRounds))?)
                    }
                };
                let objective = a.objective.as_deref().filter(|s| !s.is_empty());
                let view = self
                    .goals
                    .edit(agent, &r, objective, max)
                    .map_err(goal_error)?;
                Ok(goal_value(Some(&view)))
            }
            Action::Pause | Action::Resume => {
                Self::require_human(turn)?;
                if has_text(&a.objective) || cap.is_some() || has_text(&a.blocked_reason) {
                    return Err(invalid_update(
                        "objective and max_goal_rounds are valid only with action edit; \
                         blocked_reason is valid only with action blocked",
                    ));
                }
                let view = if a.action == Action::Pause {
                    self.goals.pause(agent, &r)
                } else {
                    let current = self.goals.get(agent);
                    if current
                        .as_ref()
                        .is_some_and(|c| c.goal_ref() == r && c.goal().phase == GoalPhase::Paused)
                    {
                        return Err(reject(
                            "the model cannot resume a paused goal; the user must resume it",
                            "GOAL_TOOL_RESUME_PAUSED",
                        ));
                    }
                    self.goals.resume(agent, &r)
                }
                .map_err(goal_error)?;
                Ok(goal_value(Some(&view)))
            }
            Action::Complete | Action::Blocked => {
                // Authority: a direct human turn, or the current goal's exact round.
                let round = if turn.human {
                    None
                } else {
                    let current = self.goals.get(agent);
                    let matching = current.filter(|g| {
                        turn.rounds.iter().any(|s| {
                            s.goal_id == g.goal().id
                                && s.revision == g.goal().revision
                                && s.round == g.state.rounds_started
                        })
                    });
                    match matching {
                        Some(g) => Some(g),
                        None => {
                            return Err(reject(
                                "complete and blocked require a direct human turn or the current goal round",
                                "GOAL_TOOL_AUTHORITY_REQUIRED",
                            ));
                        }
                    }
                };
                if has_text(&a.objective) || cap.is_some() {
                    return Err(invalid_update(
                        "objective and max_goal_rounds are valid only with action edit",
                    ));
                }
                let view = if a.action == Action::Complete {
                    if has_text(&a.blocked_reason) {
                        return Err(invalid_update(
                            "blocked_reason is valid only with action blocked",
                        ));
                    }
                    self.goals.complete(agent, &r).map_err(goal_error)?
                } else {
                    let reason = a
                        .blocked_reason
                        .as_deref()
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .ok_or_else(|| {
                            invalid_update("blocked_reason is required with action blocked")
                        })?;
                    let after = self.goals.config.blocked_after_consecutive_rounds;
                    if let Some(g) = &round
                        && g.state.rounds_started < after
                    {
                        return Err(reject(
                            format!(
                                "blocked requires at least {after} consecutive goal rounds; current round is {}",
                                g.state.rounds_started
                            ),
                            "GOAL_TOOL_BLOCK_THRESHOLD",
                        ));
                    }
                    self.goals
                        .block(
                            agent,
                            &r,
                            BlockedReason {
                                code: "model-reported".into(),
                                message: reason.to_owned(),
                            },
                        )
                        .map_err(goal_error)?
                };
                if round.is_some() {
                    // The model addresses the user once more before the run ends.
                    let blocked = (a.action == Action::Blocked)
                        .then(|| a.blocked_reason.as_deref().unwrap_or_default().trim());
                    let action = if a.action == Action::Complete {
                        "complete"
                    } else {
                        "blocked"
                    };
                    let message = Message::new(
                        "",
                        Role::User,
                        vec![ContentBlock::text(texts::wrapup(
                            &view.goal().objective,
                            blocked,
                        ))],
                        MessageSource::new("tool-goal")
                            .with("form", Value::String("notice".into()))
                            .with(
                                "summary",
                                Value::String(texts::summary(&format!(
                                    "{action}: {}",
                                    view.goal().objective
                                ))),
                            ),
                    );
                    if let Err(e) = turn.agent.inject(message) {
                        tracing::warn!(error = %e, "goal wrap-up context dropped");
                    }
                }
                Ok(goal_value(Some(&view)))
            }
        }
    }
}

/// The display of a goal tool call.
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    #[derive(Deserialize)]
    struct Shown {
        #[serde(default)]
        objective: Option<String>,
        #[serde(default)]
        action: Option<String>,
        #[serde(default)]
        blocked_reason: Option<String>,
    }
    let title = match call.name {
        GET => "Read current goal".to_owned(),
        CREATE => "Create goal".to_owned(),
        _ => match call.parse::<Shown>().and_then(|s| s.action) {
            Some(a) if a == "blocked" => "Mark goal blocked".to_owned(),
            Some(a) => {
                let mut c = a.chars();
                match c.next() {
                    Some(f) => format!("{}{} goal", f.to_uppercase(), c.as_str()),
                    None => "Update goal".to_owned(),
                }
            }
            None => "Update goal".to_owned(),
        },
    };
    let mut d = ToolDisplay::new(ToolKind::Other, title);
    if let Some(s) = call.parse::<Shown>()
        && let Some(subject) = s
            .blocked_reason
            .filter(|r| !r.is_empty())
            .or(s.objective.filter(|o| !o.is_empty()))
    {
        d = d.with_subject(subject);
    }
    d
}

impl Tool for GoalTool {
    fn name(&self) -> &str {
        match self.kind {
            GoalToolKind::Get => GET,
            GoalToolKind::Create => CREATE,
            GoalToolKind::Update => UPDATE,
        }
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// `get_goal` reads the session's goal; creating or updating one drives later rounds.
    fn read_only(&self) -> bool {
        self.kind == GoalToolKind::Get
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let turn = self.execution(&ctx)?;
            let value = match self.kind {
                GoalToolKind::Get => goal_value(self.goals.get(turn.agent.as_ref()).as_ref()),
                GoalToolKind::Create => self.create(&turn, args)?,
                GoalToolKind::Update => self.update(&turn, args)?,
            };
            Ok(ToolOutput::json(value))
        })
    }
}
